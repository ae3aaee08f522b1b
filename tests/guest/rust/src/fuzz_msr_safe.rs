// SPDX-License-Identifier: GPL-2.0
//! `msrbatch-fuzz --msr-safe`: random requests against the msr-safe
//! personality's nodes (module parameter `msr_safe=1`) from several threads
//! at once, while one of them replaces the allowlist through
//! `/dev/cpu/msr_allowlist` with one of two lists or with texts that must be
//! refused.
//!
//! Batches on `/dev/cpu/msr_batch` with random CPUs (and nonexistent ones),
//! reads and writes, MSRs listed, read-only and unlisted, and random version
//! words; `pread`/`pwrite` of random sizes at random offsets and `lseek`s on
//! `/dev/cpu/N/msr_safe`. Writes go only to IA32_TSC_AUX, whose write mask
//! never holds bits 11:0 (the CPU number Linux keeps there); both lists read
//! IA32_PAT.
//!
//! Checks: only the errnos msr-safe documents; every op's `err` one of 0,
//! `EACCES`, `EROFS`, `ENXIO`, `EIO` (or msrbatch's `ETIME`), `ENXIO` exactly for CPUs that do not
//! exist, `EROFS` only on writes; the ioctl's result is the first op's error;
//! when a check refused an op, no op ran (reads keep their input); a reported
//! write mask is one of the lists'; IA32_PAT always reads the same; TSC_AUX
//! names its CPU throughout and its values are put back at the end.

use crate::tally::Tally;
use crate::{Rng, Stats};
use msrbatch_sys::msr_safe::{msr_batch_op, MSR_SAFE_VERSION_u32};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const TSC: u32 = 0x10;
const PAT: u32 = 0x277;
const APIC_BASE: u32 = 0x1b;
const TSC_AUX: u32 = 0xc000_0103;
const MSRS: [u32; 5] = [TSC, PAT, APIC_BASE, TSC_AUX, 0xdead_beef];

/// The two lists the allowlist thread switches between: TSC and PAT read
/// only in both; TSC_AUX with write masks above bit 11 (or read only, or
/// absent).
const LISTS: [&str; 2] = [
    "0x10 0\n0x277 0\n0xC0000103 0x00000000FFFFF000\n",
    "# the second list\n0x277 0x0\n0x10 0x0\n0xc0000103 0xff000\n",
];
/// The write masks the lists give TSC_AUX.
const AUX_MASKS: [u64; 2] = [0xffff_f000, 0xf_f000];
/// Texts the allowlist node must refuse, and with what.
const BAD: [(&str, i32); 4] = [
    ("0x10 0", libc::EILSEQ),
    ("0x10 zz\n", libc::EINVAL),
    ("# nothing\n", libc::ENOMSG),
    ("0x10 0\n0x10 0\n", libc::ENOTUNIQ),
];

fn open(path: &str) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn note(st: &Stats, e: i32) {
    *st.errors
        .lock()
        .unwrap()
        .entry(crate::errno_name(e))
        .or_default() += 1;
}

fn random_op(rng: &mut Rng, ncpus: u32) -> msr_batch_op {
    // Mostly ops that pass the checks (so that batches run), now and then a
    // CPU that does not exist, an unlisted MSR or a write to a read-only one.
    let cpu = if rng.chance(2) {
        ncpus + rng.below(3) as u32
    } else {
        rng.below(ncpus.into()) as u32
    };
    let msr = if rng.chance(4) {
        MSRS[rng.below(MSRS.len() as u64) as usize]
    } else {
        [PAT, TSC_AUX, TSC][rng.below(3) as usize]
    };
    // Writes only ever to TSC_AUX (masked, so bits 11:0 stay) and to MSRs the
    // lists do not let anyone write.
    let write = rng.chance(30) && (msr == TSC_AUX || (msr != PAT && rng.chance(5)));
    msr_batch_op {
        cpu: cpu as u16,
        isrdmsr: u16::from(!write) * (1 + rng.below(3) as u16),
        err: rng.next() as i32,
        msr,
        msrdata: rng.next() & 0x00ff_ffff,
        wmask: rng.next(),
    }
}

fn batch_once(dev: &File, rng: &mut Rng, ncpus: u32, pat: u64, st: &Stats) {
    let n = 1 + rng.below(24) as usize;
    let mut ops: Vec<msr_batch_op> = (0..n).map(|_| random_op(rng, ncpus)).collect();
    let input = ops.clone();
    let version = match rng.below(10) {
        0 => rng.next() as u32,
        1 => MSR_SAFE_VERSION_u32 & !0xffff | rng.below(0x1_0000) as u32,
        _ => MSR_SAFE_VERSION_u32,
    };
    let r = msrbatch_sys::msr_safe_batch(dev.as_fd(), version, &mut ops);
    st.ioctls.fetch_add(1, Ordering::Relaxed);
    if version >> 16 != MSR_SAFE_VERSION_u32 >> 16 {
        if r.as_ref().map_err(errno_of) != Err(libc::ENOPROTOOPT) {
            st.problem(format!("version {version:#x}: {r:?}, want ENOPROTOOPT"));
        }
        return;
    }
    let first = ops.iter().map(|o| -o.err).find(|&e| e != 0);
    let got = r.as_ref().err().map(errno_of);
    if got != first {
        st.problem(format!("ioctl result {got:?}, first op error {first:?}"));
    }
    if let Some(e) = got {
        note(st, e);
    }
    let refused = ops
        .iter()
        .any(|o| matches!(-o.err, libc::EACCES | libc::EROFS | libc::ENXIO));
    for (o, i) in ops.iter().zip(input.iter()) {
        let e = -o.err;
        let ok = match e {
            // In a refused batch, an op that passed its checks did not run.
            0 => u32::from(o.cpu) < ncpus,
            // ETIME: the CPU's busy budget ran out (a descheduled vCPU).
            libc::EIO | libc::ETIME => !refused && u32::from(o.cpu) < ncpus,
            libc::ENXIO => u32::from(o.cpu) >= ncpus,
            libc::EACCES => {
                u32::from(o.cpu) < ncpus && (o.msr == APIC_BASE || o.msr == 0xdead_beef)
            }
            libc::EROFS => i.isrdmsr == 0 && u32::from(o.cpu) < ncpus,
            _ => false,
        };
        if !ok {
            st.problem(format!(
                "op cpu {} msr {:#x} read {}: err {}",
                o.cpu, o.msr, i.isrdmsr, o.err
            ));
        }
        if refused && o.msrdata != i.msrdata {
            st.problem(format!("refused batch changed msrdata of {:#x}", o.msr));
        }
        if e == 0 && o.msr == TSC_AUX && !AUX_MASKS.contains(&o.wmask) {
            st.problem(format!("TSC_AUX write mask {:#x} is no list's", o.wmask));
        }
        if e == 0 && i.isrdmsr != 0 && !refused {
            if o.msr == PAT && o.msrdata != pat {
                st.problem(format!("PAT read {:#x}, was {pat:#x}", o.msrdata));
            }
            if o.msr == TSC_AUX && o.msrdata & 0xfff != u64::from(o.cpu) {
                st.problem(format!("TSC_AUX of CPU {} reads {:#x}", o.cpu, o.msrdata));
            }
        }
        st.ops
            .fetch_add(u64::from(e == 0 && !refused), Ordering::Relaxed);
    }
}

fn per_cpu_once(rng: &mut Rng, ncpus: u32, st: &Stats) {
    let cpu = rng.below(ncpus.into());
    let Ok(f) = open(&format!("/dev/cpu/{cpu}/msr_safe")) else {
        st.problem(format!("cannot open /dev/cpu/{cpu}/msr_safe"));
        return;
    };
    for _ in 0..4 {
        let size = if rng.chance(80) {
            8
        } else {
            rng.below(17) as usize
        };
        let off = if rng.chance(90) {
            u64::from(MSRS[rng.below(MSRS.len() as u64) as usize])
        } else {
            rng.next() >> 1
        };
        let mut buf = vec![0u8; size];
        let write = rng.chance(20) && off == u64::from(TSC_AUX);
        let r = if write {
            // Only a value that keeps the CPU number: read it first.
            let mut cur = [0u8; 8];
            match f.read_at(&mut cur, off) {
                Ok(8) => {
                    let v = u64::from_ne_bytes(cur) & 0xfff | (rng.next() & 0xff_f000);
                    let n = size.min(8);
                    buf[..n].copy_from_slice(&v.to_ne_bytes()[..n]);
                    f.write_at(&buf, off)
                }
                other => other,
            }
        } else {
            f.read_at(&mut buf, off)
        };
        st.ioctls.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(n) if n == 8 && size == 8 && off <= u64::from(u32::MAX) => {}
            Ok(n) => st.problem(format!(
                "{} of {size} bytes at {off:#x} gave {n}",
                if write { "pwrite" } else { "pread" }
            )),
            Err(e) => {
                let e = errno_of(&e);
                note(st, e);
                if !matches!(e, libc::EINVAL | libc::EACCES | libc::EIO) {
                    st.problem(format!(
                        "per-CPU access at {off:#x}, {size} bytes: errno {e}"
                    ));
                }
            }
        }
    }
}

fn allowlist_once(rng: &mut Rng, st: &Stats) {
    let (text, want) = if rng.chance(70) {
        (LISTS[rng.below(2) as usize], 0)
    } else {
        BAD[rng.below(BAD.len() as u64) as usize]
    };
    let r = OpenOptions::new()
        .write(true)
        .open("/dev/cpu/msr_allowlist")
        .and_then(|mut f| f.write(text.as_bytes()));
    let got = r.as_ref().err().map_or(0, errno_of);
    if got != want {
        st.problem(format!("allowlist {text:?}: errno {got}, want {want}"));
    }
}

fn thread(
    seed: u64,
    ncpus: u32,
    budget: u64,
    pat: u64,
    lists: bool,
    stop: &AtomicBool,
    st: &Stats,
) {
    let mut rng = Rng(seed | 1);
    let mut dev = open("/dev/cpu/msr_batch").expect("open /dev/cpu/msr_batch");
    for i in 0..budget {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match rng.below(10) {
            0..=5 => batch_once(&dev, &mut rng, ncpus, pat, st),
            6..=7 => per_cpu_once(&mut rng, ncpus, st),
            // A new descriptor, which gets the list in force now.
            8 => dev = open("/dev/cpu/msr_batch").expect("reopen /dev/cpu/msr_batch"),
            _ if lists && i % 4 == 0 => allowlist_once(&mut rng, st),
            _ => batch_once(&dev, &mut rng, ncpus, pat, st),
        }
    }
}

/// Reads (or with `values`, writes) TSC_AUX of every CPU.
fn all_aux(dev: &File, ncpus: u32, values: Option<&[u64]>) -> std::io::Result<Vec<u64>> {
    let mut ops: Vec<msr_batch_op> = (0..ncpus)
        .map(|c| msr_batch_op {
            cpu: c as u16,
            isrdmsr: u16::from(values.is_none()),
            msr: TSC_AUX,
            msrdata: values.map_or(0, |v| v[c as usize]),
            ..Default::default()
        })
        .collect();
    msrbatch_sys::msr_safe_batch(dev.as_fd(), MSR_SAFE_VERSION_u32, &mut ops)?;
    Ok(ops.iter().map(|o| o.msrdata).collect())
}

pub(crate) fn main(total: u64, threads: u64, seed: u64, ncpus: u32) -> ! {
    let mut t = Tally::new();
    let saved_list =
        std::fs::read("/dev/msrbatch_allowlist").expect("read /dev/msrbatch_allowlist");
    let load = |text: &str| {
        OpenOptions::new()
            .write(true)
            .open("/dev/cpu/msr_allowlist")
            .and_then(|mut f| f.write(text.as_bytes()))
    };
    load(LISTS[0]).expect("load the first list");
    let dev = open("/dev/cpu/msr_batch").expect("open /dev/cpu/msr_batch");
    let mut pat = [msr_batch_op {
        isrdmsr: 1,
        msr: PAT,
        ..Default::default()
    }];
    msrbatch_sys::msr_safe_batch(dev.as_fd(), MSR_SAFE_VERSION_u32, &mut pat).expect("read PAT");
    let aux = all_aux(&dev, ncpus, None).expect("read TSC_AUX");
    let st = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let pat = pat[0].msrdata;
    let handles = crate::spawn_fuzzers(threads, seed, &stop, &st, move |i, seed, stop, st| {
        thread(seed, ncpus, total / threads, pat, i == 0, stop, st)
    });
    let crashed = crate::join_fuzzers(handles);
    // Put TSC_AUX back (the first list lets its bits 31:12 be written).
    load(LISTS[0]).expect("load the first list");
    let dev = open("/dev/cpu/msr_batch").expect("open /dev/cpu/msr_batch");
    let restored = all_aux(&dev, ncpus, Some(&aux)).and_then(|_| all_aux(&dev, ncpus, None));
    let list_back = OpenOptions::new()
        .write(true)
        .open("/dev/msrbatch_allowlist")
        .and_then(|mut f| f.write(&saved_list));
    println!(
        "fuzz --msr-safe: {} requests, {} ops run, {threads} threads, {:.1} s, seed {seed:#x}",
        st.ioctls.load(Ordering::Relaxed),
        st.ops.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    let consistent = st.report("fuzz --msr-safe");
    t.check(
        consistent,
        "msr-safe nodes: every result consistent, every errno documented",
    );
    t.check(crashed == 0, "no fuzz thread crashed");
    t.check(
        restored.as_ref().is_ok_and(|v| v == &aux),
        "TSC_AUX of every CPU put back",
    );
    t.check(list_back.is_ok(), "the allowlist in force before put back");
    t.finish();
}
