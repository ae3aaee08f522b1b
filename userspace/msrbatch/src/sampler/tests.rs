// SPDX-License-Identifier: GPL-2.0
//! The ring reader against a ring in a heap buffer, written by a fake
//! producer that follows the ABI as `<linux/msrbatch.h>` states it: records
//! 8-byte aligned, never wrapping (a PAD record fills the end), never over
//! unread bytes (a full ring drops records, counts them, and reports them
//! in a LOST record later), the head published with release ordering.
//! These test the parser and the protocol, not the kernel.

use super::*;
use crate::{Errno, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A control page and a data area of `data_size` bytes, as a mapping.
#[derive(Debug)]
struct Fake {
    words: Vec<AtomicU64>,
    data_word: usize,
    data_size: u64,
    producer: Mutex<Producer>,
}

/// What only the producer knows.
#[derive(Debug, Default)]
struct Producer {
    head: u64,
    /// Per CPU, records dropped since its last LOST record.
    lost: BTreeMap<u32, u64>,
}

impl Words for Arc<Fake> {
    fn load(&self, i: usize) -> Option<u64> {
        Some(self.words.get(i)?.load(Ordering::Relaxed))
    }
    fn load_acquire(&self, i: usize) -> Option<u64> {
        Some(self.words.get(i)?.load(Ordering::Acquire))
    }
    fn store_release(&self, i: usize, v: u64) -> Option<()> {
        self.words.get(i)?.store(v, Ordering::Release);
        Some(())
    }
}

const PAGE: u64 = 4096;

fn header(kind: u32, cpu: u32, size: usize, nr: usize) -> [u64; 2] {
    [
        u64::from(kind) | u64::from(cpu) << 32,
        size as u64 | (nr as u64) << 32,
    ]
}

pub(crate) fn sample_rec(cpu: u32, seq: u64, tsc: u64, failed: u64, vals: &[[u64; 2]]) -> Vec<u64> {
    let size = 40 + 16 * vals.len();
    let mut r = header(MSRBATCH_REC_SAMPLE, cpu, size, vals.len()).to_vec();
    r.extend([seq, tsc, failed]);
    r.extend(vals.iter().flatten());
    r
}

pub(crate) fn cpu_rec(kind: u32, cpu: u32, seq: u64, tsc: u64) -> Vec<u64> {
    let mut r = header(kind, cpu, 32, 0).to_vec();
    r.extend([seq, tsc]);
    r
}

impl Fake {
    fn new(data_size: u64) -> Arc<Fake> {
        let words = (PAGE + data_size) / 8;
        let f = Fake {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            data_word: (PAGE / 8) as usize,
            data_size,
            producer: Mutex::default(),
        };
        let set = |i: usize, v: u64| f.words[i].store(v, Ordering::Relaxed);
        set(word::VERSION_FLAGS, u64::from(MSRBATCH_RING_VERSION));
        set(word::DATA_OFFSET, PAGE);
        set(word::DATA_SIZE, data_size);
        set(word::PERIOD, 1_000_000);
        set(word::EPOCH, 5_000_000_000);
        Arc::new(f)
    }

    fn reader(self: &Arc<Self>) -> RingReader<Arc<Fake>> {
        RingReader::new(Arc::clone(self), self.words.len()).unwrap()
    }

    fn data(&self, pos: u64, v: u64) {
        self.words[self.data_word + (pos / 8) as usize].store(v, Ordering::Relaxed);
    }

    /// Appends `rec` if it fits below the reader's tail, padding to the end
    /// of the area first if it does not fit before it.
    fn append(&self, p: &mut Producer, rec: &[u64]) -> bool {
        let size = rec.len() as u64 * 8;
        let tail = self.words[word::TAIL].load(Ordering::Acquire);
        let pos = p.head & (self.data_size - 1);
        let pad = if size > self.data_size - pos {
            self.data_size - pos
        } else {
            0
        };
        if p.head + pad + size - tail > self.data_size {
            return false;
        }
        if pad > 0 {
            self.data(pos, u64::from(MSRBATCH_REC_PAD) | 7 << 32);
            if pad >= 16 {
                self.data(pos + 8, pad);
            }
            p.head += pad;
        }
        let pos = p.head & (self.data_size - 1);
        for (i, w) in rec.iter().enumerate() {
            self.data(pos + i as u64 * 8, *w);
        }
        p.head += size;
        self.words[word::HEAD].store(p.head, Ordering::Release);
        true
    }

    /// A CPU's record as the kernel appends it: a LOST record first if it
    /// dropped some; a full ring drops this one too and counts it.
    fn emit(&self, cpu: u32, rec: &[u64]) -> bool {
        let mut p = self.producer.lock().unwrap();
        let pending = p.lost.get(&cpu).copied().unwrap_or(0);
        let mut lost_rec = header(MSRBATCH_REC_LOST, cpu, 24, 0).to_vec();
        lost_rec.push(pending);
        let ok = (pending == 0 || self.append(&mut p, &lost_rec)) && {
            p.lost.remove(&cpu);
            self.append(&mut p, rec)
        };
        if !ok {
            *p.lost.entry(cpu).or_default() += 1;
            self.words[word::LOST].fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    fn set_head(&self, head: u64) {
        self.producer.lock().unwrap().head = head;
        self.words[word::HEAD].store(head, Ordering::Release);
    }

    fn tail(&self) -> u64 {
        self.words[word::TAIL].load(Ordering::Relaxed)
    }
}

fn sample(cpu: u32, seq: u64, vals: &[[u64; 2]]) -> Record {
    Record::Sample(Sample {
        cpu,
        seq,
        tsc: 1000 + seq,
        failed: 0,
        values: vals.to_vec(),
    })
}

fn all(r: &mut RingReader<Arc<Fake>>) -> Vec<Record> {
    std::iter::from_fn(|| r.next().unwrap()).collect()
}

#[test]
fn records_come_out_typed_in_order_and_free_their_space() {
    let f = Fake::new(PAGE);
    let mut r = f.reader();
    assert_eq!(r.next().unwrap(), None);
    assert!(f.emit(1, &cpu_rec(MSRBATCH_REC_ONLINE, 1, 0, 900)));
    assert!(f.emit(1, &sample_rec(1, 0, 1000, 0, &[[7, 8], [9, 10]])));
    assert!(f.emit(1, &cpu_rec(MSRBATCH_REC_OFFLINE, 1, 1, 2000)));
    assert_eq!(
        all(&mut r),
        [
            Record::Online {
                cpu: 1,
                seq: 0,
                tsc: 900
            },
            sample(1, 0, &[[7, 8], [9, 10]]),
            Record::Offline {
                cpu: 1,
                seq: 1,
                tsc: 2000
            },
        ]
    );
    assert_eq!(f.tail(), 32 + 72 + 32);
    assert_eq!(r.flags(), 0);
    f.words[word::VERSION_FLAGS]
        .fetch_or(u64::from(MSRBATCH_RING_STOPPED) << 32, Ordering::Relaxed);
    assert_eq!(r.flags(), MSRBATCH_RING_STOPPED);
}

/// A sample with no ops is 40 bytes; a longer record than its type needs
/// keeps its known part; unknown types are skipped by their size.
#[test]
fn empty_samples_longer_records_and_unknown_types() {
    let f = Fake::new(PAGE);
    let mut r = f.reader();
    f.emit(0, &sample_rec(0, 3, 1003, 0, &[]));
    let mut unknown = header(99, 0, 48, 5).to_vec();
    unknown.extend([1, 2, 3, 4]);
    f.emit(0, &unknown);
    let mut long = cpu_rec(MSRBATCH_REC_ONLINE, 2, 4, 5);
    long[1] = header(0, 0, 48, 0)[1];
    long.extend([0xdead, 0xbeef]);
    f.emit(2, &long);
    assert_eq!(
        all(&mut r),
        [
            sample(0, 3, &[]),
            Record::Online {
                cpu: 2,
                seq: 4,
                tsc: 5
            }
        ]
    );
    assert_eq!(f.tail(), 40 + 48 + 48);
}

/// Records that do not fit before the end follow a PAD record, of 16 bytes
/// or more (skipped by its size) or of 8 (its first word only).
#[test]
fn wrap_with_padding_of_every_size() {
    let f = Fake::new(256);
    let mut r = f.reader();
    let vals = [[1, 2], [3, 4]];
    // 3 samples of 72 bytes and a 24-byte LOST-sized unknown record: 240,
    // so the fourth sample follows a 16-byte PAD.
    for seq in 0..3 {
        assert!(f.emit(0, &sample_rec(0, seq, 1000 + seq, 0, &vals)));
    }
    let mut unknown = header(42, 0, 24, 0).to_vec();
    unknown.push(0);
    assert!(f.emit(0, &unknown));
    assert_eq!(all(&mut r).len(), 3);
    assert!(f.emit(0, &sample_rec(0, 3, 1003, 0, &vals)));
    assert_eq!(all(&mut r), [sample(0, 3, &vals)]);
    assert_eq!(f.tail(), 256 + 72);
    // Now at 72: 2 samples (216) and a CPU record (248) leave 8 bytes.
    for seq in 4..6 {
        assert!(f.emit(0, &sample_rec(0, seq, 1000 + seq, 0, &vals)));
    }
    assert!(f.emit(0, &cpu_rec(MSRBATCH_REC_OFFLINE, 0, 6, 9)));
    assert!(f.emit(0, &sample_rec(0, 6, 1006, 0, &vals)));
    let got = all(&mut r);
    assert_eq!(got.len(), 4);
    assert_eq!(got[3], sample(0, 6, &vals));
    assert_eq!(f.tail(), 512 + 72);
}

/// A full ring drops records (the kernel never writes over unread bytes),
/// counts them in the ring, and reports them per CPU once there is room.
#[test]
fn full_ring_loses_records_and_says_how_many() {
    let f = Fake::new(256);
    let mut r = f.reader();
    let vals = [[5, 6]];
    let mut seq = 0;
    while f.emit(1, &sample_rec(1, seq, 1000 + seq, 0, &vals)) {
        seq += 1;
    }
    // 56-byte samples: 4 fit in 256 bytes (224), the fifth is dropped.
    assert_eq!(seq, 4);
    // The next one's LOST record fits in the 32 bytes left, itself not;
    // then not even a LOST record fits (8 bytes left).
    for s in 5..7 {
        assert!(!f.emit(1, &sample_rec(1, s, 1000 + s, 0, &vals)));
    }
    assert_eq!(r.control(word::LOST), 3);
    let got = all(&mut r);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[4], Record::Lost { cpu: 1, lost: 1 });
    // Room again: the two dropped since, after an 8-byte PAD.
    assert!(f.emit(1, &sample_rec(1, 7, 1007, 0, &vals)));
    assert_eq!(
        all(&mut r),
        [Record::Lost { cpu: 1, lost: 2 }, sample(1, 7, &vals)]
    );
    assert_eq!(f.tail(), 256 + 24 + 56);
}

fn errno(r: Result<Option<Record>>) -> Errno {
    r.unwrap_err().errno()
}

/// Every ABI violation is EBADMSG, read within the area: sizes under 16,
/// not a multiple of 8, past the head or the end of the area, a SAMPLE too
/// short for its `nr`, a head not part of the area, half a header.
#[test]
fn corrupt_records_are_errors() {
    let bad: [(&str, u64, Vec<u64>); 8] = [
        ("size 8", 16, header(1, 0, 8, 0).to_vec()),
        ("size 0", 16, header(3, 0, 0, 0).to_vec()),
        ("size 20", 24, header(3, 0, 20, 0).to_vec()),
        ("past the head", 32, header(3, 0, 40, 0).to_vec()),
        ("sample shorter than nr", 56, header(1, 0, 56, 2).to_vec()),
        (
            "online without its fields",
            16,
            header(3, 0, 16, 0).to_vec(),
        ),
        ("half a header", 8, header(3, 0, 32, 0).to_vec()),
        (
            "nr overflow",
            40,
            header(1, 0, 40, u32::MAX as usize).to_vec(),
        ),
    ];
    for (what, head, words) in bad {
        let f = Fake::new(256);
        let mut r = f.reader();
        for (i, w) in words.iter().enumerate() {
            f.data(i as u64 * 8, *w);
        }
        f.set_head(head);
        assert_eq!(errno(r.next()), Errno(libc::EBADMSG), "{what}");
        assert_eq!(f.tail(), 0, "{what}: nothing consumed");
    }
    // Running past the end of the area (from position 240, 32 bytes).
    let f = Fake::new(256);
    let mut r = f.reader();
    f.words[word::TAIL].store(240, Ordering::Relaxed);
    r.tail = 240;
    r.head = 240;
    f.data(240, header(3, 0, 32, 0)[0]);
    f.data(248, header(3, 0, 32, 0)[1]);
    f.set_head(272);
    assert_eq!(errno(r.next()), Errno(libc::EBADMSG));
    // A head more than the area ahead, behind the tail, or unaligned.
    for head in [264, u64::MAX - 7, 12] {
        let f = Fake::new(256);
        let mut r = f.reader();
        f.set_head(head);
        assert_eq!(errno(r.next()), Errno(libc::EBADMSG), "head {head}");
    }
}

/// The control page must describe a data area inside the mapping.
#[test]
fn bad_control_pages_are_refused() {
    let cases: [(&str, usize, u64); 5] = [
        ("version", word::VERSION_FLAGS, 2),
        ("data size not a power of two", word::DATA_SIZE, 3 * 64),
        ("data area past the mapping", word::DATA_SIZE, 2 * PAGE),
        ("data offset inside the control page", word::DATA_OFFSET, 64),
        ("data offset unaligned", word::DATA_OFFSET, PAGE + 4),
    ];
    for (what, i, v) in cases {
        let f = Fake::new(PAGE);
        f.words[i].store(v, Ordering::Relaxed);
        let e = RingReader::new(Arc::clone(&f), f.words.len()).unwrap_err();
        assert_eq!(e.errno(), Errno(libc::EBADMSG), "{what}");
    }
    let f = Fake::new(PAGE);
    let e = RingReader::new(Arc::clone(&f), 4).unwrap_err();
    assert_eq!(e.errno(), Errno(libc::EBADMSG), "mapping too small");
}

/// Whatever the data area and the head hold, reading ends in records, an
/// error or `None`: never a panic, never a read outside the area.
#[test]
fn garbage_never_panics() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..2000 {
        let f = Fake::new(256);
        for pos in (0..256).step_by(8) {
            // Mostly small sizes and known types, so that parsing goes deep.
            let w = rnd();
            let w = if w & 1 == 0 { w & 0x7_0000_00ff } else { w };
            f.data(pos, w);
        }
        f.set_head(rnd() % 320);
        let mut r = f.reader();
        for _ in 0..64 {
            match r.next() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(e.errno(), Errno(libc::EBADMSG));
                    break;
                }
            }
        }
    }
}

/// A producer thread and a reader thread on a small ring: every record
/// arrives whole and in order, or is counted as lost.
#[test]
fn concurrent_producer_and_reader() {
    const N: u64 = 20_000;
    let f = Fake::new(512);
    let mut r = f.reader();
    let producer = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || {
            for seq in 0..N {
                let vals: Vec<[u64; 2]> = (0..seq % 4).map(|i| [seq * 10 + i, !seq]).collect();
                f.emit(0, &sample_rec(0, seq, seq * 3, seq & 1, &vals));
                if seq % 16 == 0 {
                    std::thread::yield_now();
                }
            }
            // A last record once the reader has read everything, so the
            // final LOST count gets out.
            let head = f.producer.lock().unwrap().head;
            while f.tail() != head {
                std::thread::yield_now();
            }
            assert!(f.emit(0, &cpu_rec(MSRBATCH_REC_OFFLINE, 0, N, 0)));
        })
    };
    let (mut got, mut lost, mut last) = (0u64, 0u64, None);
    loop {
        match r.next().unwrap() {
            Some(Record::Sample(s)) => {
                assert!(last.is_none_or(|l| s.seq > l), "{} after {last:?}", s.seq);
                let want: Vec<[u64; 2]> =
                    (0..s.seq % 4).map(|i| [s.seq * 10 + i, !s.seq]).collect();
                assert_eq!((s.tsc, s.failed, &s.values), (s.seq * 3, s.seq & 1, &want));
                last = Some(s.seq);
                got += 1;
            }
            Some(Record::Lost { lost: n, .. }) => lost += n,
            Some(Record::Offline { seq, .. }) => {
                assert_eq!(seq, N);
                break;
            }
            Some(other) => panic!("{other:?}"),
            None => std::thread::yield_now(),
        }
    }
    producer.join().unwrap();
    assert_eq!(got + lost, N, "{got} read, {lost} lost");
    assert!(got > 1, "the reader kept up with none: {got}");
    assert_eq!(r.control(word::LOST), lost);
}

/// A sampler whose ring is a plain file holding `records` (each with its
/// CPU), appended as the kernel would, for `ops`; its STOP is refused.
pub(crate) fn file_sampler(records: &[(u32, Vec<u64>)], ops: &[(u32, Op)]) -> Sampler {
    use std::io::Write;
    let f = Fake::new(PAGE);
    for (cpu, r) in records {
        assert!(f.emit(*cpu, r));
    }
    let mut bytes = Vec::new();
    for w in &f.words {
        bytes.extend(w.load(Ordering::Relaxed).to_le_bytes());
    }
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&bytes).unwrap();
    Sampler::from_fd(file.into(), bytes.len() as u64, ops).unwrap()
}

/// A sampler reads a ring mapped from a file like the kernel's (here a
/// plain file holding a ring): records, the control page's fields, the
/// CPU's ops, and the values decoded as op results. STOP on a file that
/// is not a sampler is refused.
#[test]
fn sampler_on_a_mapped_file() {
    let cpuid = [0x1111_2222_0000_000d, 0x4444_5555_6666_7777];
    let records = [
        (2, cpu_rec(MSRBATCH_REC_ONLINE, 2, 0, 100)),
        (
            2,
            sample_rec(2, 0, 1000, 0b10, &[[5, 0xc0de], [0, 0], cpuid]),
        ),
    ];
    let cpuid_op = Op::Cpuid {
        leaf: 0,
        subleaf: 0,
    };
    let ops = [
        (2, Op::RdTscp),
        (0, Op::RdTsc),
        (2, Op::RdMsr { msr: 0x10 }),
        (2, cpuid_op),
    ];
    let mut s = file_sampler(&records, &ops);
    assert_eq!(
        (s.period_ns(), s.epoch_ns(), s.lost()),
        (1_000_000, 5_000_000_000, 0)
    );
    assert!(!s.is_stopped());
    assert_eq!(s.cpus().collect::<Vec<_>>(), [0, 2]);
    assert_eq!(
        s.cpu_ops(2),
        [Op::RdTscp, Op::RdMsr { msr: 0x10 }, cpuid_op]
    );
    assert_eq!(s.cpu_ops(5), []);
    assert_eq!(s.wait(Some(Duration::from_millis(1))).unwrap(), Wait::Ready);
    assert!(matches!(
        s.read().unwrap(),
        Some(Record::Online { cpu: 2, .. })
    ));
    let Some(Record::Sample(smp)) = s.read().unwrap() else {
        panic!("no sample");
    };
    let values: Vec<_> = s.results(&smp).map(|r| (r.index, r.value)).collect();
    assert_eq!(
        values,
        [
            (
                0,
                Ok(Value::Tscp {
                    tsc: 5,
                    aux: 0xc0de
                })
            ),
            (1, Err(Errno(libc::EIO))),
            (
                2,
                Ok(Value::Cpuid {
                    eax: 0xd,
                    ebx: 0x1111_2222,
                    ecx: 0x6666_7777,
                    edx: 0x4444_5555
                })
            ),
        ]
    );
    assert_eq!(s.read().unwrap(), None);
    assert_eq!(s.stop().unwrap_err().errno(), Errno(libc::ENOTTY));
}

#[test]
fn sampleable_ops() {
    let yes = [
        Op::RdMsr { msr: 1 },
        Op::RdPmc { ecx: 0 },
        Op::RdTsc,
        Op::RdTscp,
        Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        },
    ];
    let no = [
        Op::WrMsr { msr: 1, value: 0 },
        Op::RmwMsr {
            msr: 1,
            clear: 0,
            set: 0,
        },
        Op::Delay { ns: 1 },
        Op::RdCr4,
    ];
    assert!(yes.iter().all(Op::is_sampleable));
    assert!(!no.iter().any(Op::is_sampleable));
    assert_eq!(PERIOD_NS, 100_000..=60_000_000_000);
}
