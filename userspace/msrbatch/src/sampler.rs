// SPDX-License-Identifier: GPL-2.0
//! Samplers: a prepared batch that only reads, run by the kernel on each of
//! its CPUs every period, its results appended to a ring this process maps
//! (`MSRBATCH_IOC_SAMPLE`).
//!
//! ```no_run
//! use msrbatch::sampler::{Record, SamplerConfig};
//! use msrbatch::{msr, Batch, Device, Op};
//! use std::time::Duration;
//!
//! let dev = Device::open_read_only()?;
//! let mut batch = Batch::new();
//! batch.push(0, Op::RdMsr { msr: msr::IA32_APERF });
//! batch.push(0, Op::RdMsr { msr: msr::IA32_MPERF });
//! let mut sampler = dev.prepare(&batch)?.sample(&SamplerConfig::new(1_000_000))?;
//! // The device and the prepared batch may go; the sampler keeps running.
//! drop(dev);
//! for _ in 0..10 {
//!     sampler.wait(Some(Duration::from_millis(100)))?;
//!     while let Some(r) = sampler.read()? {
//!         if let Record::Sample(s) = r {
//!             println!("cpu {} period {}: {:?}", s.cpu, s.seq, s.values);
//!         }
//!     }
//! }
//! sampler.stop()?;
//! # Ok::<(), msrbatch::Error>(())
//! ```
//!
//! The ring is memory the kernel writes while this process reads it, so it
//! is never borrowed: [`Sampler::read`] copies each record out word by word
//! with atomic loads after an acquire load of the kernel's head, checks it
//! against the ABI, and only then releases the space (the tail). A record
//! that breaks the ABI (a size under 16 bytes, not a multiple of 8, running
//! past the head or the data area) is an `EBADMSG` error, never a read
//! outside the mapping.

use crate::uapi::{
    msrbatch_ring, msrbatch_sample_req, MSRBATCH_ABI_VERSION, MSRBATCH_REC_LOST,
    MSRBATCH_REC_OFFLINE, MSRBATCH_REC_ONLINE, MSRBATCH_REC_PAD, MSRBATCH_REC_SAMPLE,
    MSRBATCH_RING_STOPPED, MSRBATCH_RING_VERSION, MSRBATCH_SAMPLE_MAX_PERIOD_NS,
    MSRBATCH_SAMPLE_MIN_PERIOD_NS,
};
use crate::{blamed, sys, Error, Op, OpResult, Prepared, Result};
use std::collections::BTreeMap;
use std::mem::offset_of;
use std::ops::RangeInclusive;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// The periods the kernel accepts, in nanoseconds (100 µs to 60 s).
/// (bindgen types the minimum `u32`: it fits one).
pub const PERIOD_NS: RangeInclusive<u64> =
    MSRBATCH_SAMPLE_MIN_PERIOD_NS as u64..=MSRBATCH_SAMPLE_MAX_PERIOD_NS;

/// How to sample ([`Prepared::sample`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// The period in nanoseconds, within [`PERIOD_NS`] (else `ERANGE`).
    pub period_ns: u64,
    /// Pages of the ring's data area: a power of two (else `EINVAL`), at
    /// most `MSRBATCH_SAMPLE_MAX_RING_PAGES` (else `E2BIG`).
    pub ring_pages: u32,
    /// [`Sampler::wait`] returns once this many bytes are unread; 0: once
    /// one record is. Less than the data area (else `EINVAL`).
    pub watermark: u32,
}

impl SamplerConfig {
    /// Sampling every `period_ns` into a ring of 16 pages, woken by every
    /// record.
    pub fn new(period_ns: u64) -> Self {
        SamplerConfig {
            period_ns,
            ring_pages: 16,
            watermark: 0,
        }
    }
}

/// One CPU's ops, run once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The CPU.
    pub cpu: u32,
    /// The period it was due in: at [`Sampler::epoch_ns`] + `seq` ×
    /// [`Sampler::period_ns`] (`CLOCK_MONOTONIC`).
    pub seq: u64,
    /// The TSC just before the first op.
    pub tsc: u64,
    /// Bit i set: op i faulted (`EIO`) and its values are 0.
    pub failed: u64,
    /// `val[0]` and `val[1]` of each of the CPU's ops, in the prepared
    /// batch's order (the meaning of a batch op's outputs).
    pub values: Vec<[u64; 2]>,
}

impl Sample {
    /// The sample decoded as op results, given the CPU's ops (in batch
    /// order, [`Sampler::cpu_ops`]); `index` is the position among them. A
    /// faulted op is `EIO`. Values without an op, and ops without a value,
    /// are left out.
    pub fn results<'a>(&'a self, ops: &'a [Op]) -> impl Iterator<Item = OpResult> + 'a {
        self.values
            .iter()
            .zip(ops)
            .enumerate()
            .map(|(i, (val, op))| {
                let failed = i < 64 && self.failed & (1 << i) != 0;
                let status = if failed { -libc::EIO } else { 0 };
                OpResult::decode(i, self.cpu, *op, status, *val, false)
            })
    }
}

/// A record of the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A CPU's ops ran.
    Sample(Sample),
    /// A CPU could not append this many records (the ring was full) since
    /// its last `Lost` record.
    Lost {
        /// The CPU.
        cpu: u32,
        /// How many.
        lost: u64,
    },
    /// A CPU starts sampling (at the start, and back from hotplug).
    Online {
        /// The CPU.
        cpu: u32,
        /// The first period it samples.
        seq: u64,
        /// Its TSC then.
        tsc: u64,
    },
    /// A CPU stops sampling (hotplug, or the sampler stopped).
    Offline {
        /// The CPU.
        cpu: u32,
        /// The period due next.
        seq: u64,
        /// Its TSC then.
        tsc: u64,
    },
}

/// What [`Sampler::wait`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Records are unread (at least the watermark).
    Ready,
    /// The sampler has stopped and nothing is left to read at the
    /// watermark (less may be: read until [`Sampler::read`] gives `None`).
    Stopped,
    /// The timeout passed.
    TimedOut,
}

/// Word access to a ring's memory: the mapping, or a test's buffer.
pub(crate) trait Words {
    /// Word `i`, `None` past the end.
    fn load(&self, i: usize) -> Option<u64>;
    /// Word `i` with acquire ordering.
    fn load_acquire(&self, i: usize) -> Option<u64>;
    /// Stores word `i` with release ordering; `None` past the end.
    fn store_release(&self, i: usize, v: u64) -> Option<()>;
}

impl Words for sys::SharedWords {
    fn load(&self, i: usize) -> Option<u64> {
        sys::SharedWords::load(self, i)
    }
    fn load_acquire(&self, i: usize) -> Option<u64> {
        sys::SharedWords::load_acquire(self, i)
    }
    fn store_release(&self, i: usize, v: u64) -> Option<()> {
        sys::SharedWords::store_release(self, i, v)
    }
}

/// Word indices of `struct msrbatch_ring`'s fields.
mod word {
    use super::{msrbatch_ring, offset_of};
    /// `version` (low half) and `flags` (high half).
    pub const VERSION_FLAGS: usize = offset_of!(msrbatch_ring, version) / 8;
    pub const DATA_OFFSET: usize = offset_of!(msrbatch_ring, data_offset) / 8;
    pub const DATA_SIZE: usize = offset_of!(msrbatch_ring, data_size) / 8;
    pub const PERIOD: usize = offset_of!(msrbatch_ring, period_ns) / 8;
    pub const EPOCH: usize = offset_of!(msrbatch_ring, epoch_ns) / 8;
    pub const LOST: usize = offset_of!(msrbatch_ring, lost) / 8;
    pub const HEAD: usize = offset_of!(msrbatch_ring, data_head) / 8;
    pub const TAIL: usize = offset_of!(msrbatch_ring, data_tail) / 8;
}

/// The error of a ring that breaks the ABI.
fn corrupt(what: impl std::fmt::Display) -> Error {
    Error::new(libc::EBADMSG, format!("sampler ring: {what}"))
}

/// The reading side of a ring.
#[derive(Debug)]
pub(crate) struct RingReader<M> {
    mem: M,
    /// First word of the data area.
    data_word: usize,
    /// Bytes of the data area (a power of two).
    data_size: u64,
    /// Bytes consumed (our copy of `data_tail`).
    tail: u64,
    /// The last head loaded.
    head: u64,
}

impl<M: Words> RingReader<M> {
    /// Checks the control page's constant fields against the memory's
    /// size (`words` words).
    pub(crate) fn new(mem: M, words: usize) -> Result<Self> {
        let ld = |i| {
            mem.load(i)
                .ok_or_else(|| corrupt("mapping smaller than its control page"))
        };
        let version = ld(word::VERSION_FLAGS)? as u32;
        if version != MSRBATCH_RING_VERSION {
            return Err(corrupt(format!(
                "version {version}, not {MSRBATCH_RING_VERSION}"
            )));
        }
        let (offset, size) = (ld(word::DATA_OFFSET)?, ld(word::DATA_SIZE)?);
        let fits = offset % 8 == 0
            && offset >= size_of::<msrbatch_ring>() as u64
            && size.is_power_of_two()
            && size >= 16
            && offset
                .checked_add(size)
                .is_some_and(|end| end / 8 <= words as u64);
        if !fits {
            return Err(corrupt(format!(
                "data area of {size} bytes at {offset} does not fit a mapping of {} bytes",
                words * 8
            )));
        }
        let tail = ld(word::TAIL)?;
        Ok(RingReader {
            data_word: (offset / 8) as usize,
            data_size: size,
            tail,
            head: tail,
            mem,
        })
    }

    /// A constant or kernel-written word of the control page (in range:
    /// checked by `new`).
    fn control(&self, i: usize) -> u64 {
        self.mem.load_acquire(i).unwrap_or(0)
    }

    /// Data word at byte position `pos` of the area (bounds: the caller's).
    fn data(&self, pos: u64) -> Result<u64> {
        self.mem
            .load(self.data_word + (pos / 8) as usize)
            .ok_or_else(|| corrupt("read past the mapping"))
    }

    /// Consumes `size` bytes: the kernel may reuse them.
    fn advance(&mut self, size: u64) -> Result<()> {
        self.tail = self.tail.wrapping_add(size);
        self.mem
            .store_release(word::TAIL, self.tail)
            .ok_or_else(|| corrupt("no tail word"))
    }

    /// The next record, copied out and consumed; `None` when none is
    /// unread. Padding and records of unknown types are skipped.
    pub(crate) fn next(&mut self) -> Result<Option<Record>> {
        loop {
            if self.head == self.tail {
                self.head = self.control(word::HEAD);
                if self.head == self.tail {
                    return Ok(None);
                }
            }
            let avail = self.head.wrapping_sub(self.tail);
            if avail > self.data_size || avail % 8 != 0 || self.tail % 8 != 0 {
                return Err(corrupt(format!(
                    "head {} and tail {} are not a part of a {}-byte area",
                    self.head, self.tail, self.data_size
                )));
            }
            let pos = self.tail & (self.data_size - 1);
            let to_end = self.data_size - pos;
            let w0 = self.data(pos)?;
            if w0 as u32 == MSRBATCH_REC_PAD && to_end == 8 {
                // Only a padding record's first word fits before the end.
                self.advance(8)?;
                continue;
            }
            if avail < 16 {
                return Err(corrupt(format!("{avail} bytes at {pos}: no whole header")));
            }
            let w1 = self.data(pos + 8)?;
            let size = u64::from(w1 as u32);
            if size < 16 || size % 8 != 0 || size > avail || size > to_end {
                return Err(corrupt(format!(
                    "record of size {size} at {pos} ({avail} bytes unread, {to_end} to the end)"
                )));
            }
            let words = (2..size / 8)
                .map(|i| self.data(pos + i * 8))
                .collect::<Result<Vec<u64>>>()?;
            let record = decode(w0, w1, &words)?;
            self.advance(size)?;
            if record.is_some() {
                return Ok(record);
            }
        }
    }

    /// `flags` of the control page.
    pub(crate) fn flags(&self) -> u32 {
        (self.control(word::VERSION_FLAGS) >> 32) as u32
    }
}

/// A record from its header words and the rest of its words; `None` for
/// padding and unknown types.
fn decode(w0: u64, w1: u64, body: &[u64]) -> Result<Option<Record>> {
    let (kind, cpu, nr) = (w0 as u32, (w0 >> 32) as u32, (w1 >> 32) as usize);
    let short = |need: usize| {
        corrupt(format!(
            "record of type {kind} for cpu {cpu} has {} bytes, needs {}",
            16 + body.len() * 8,
            16 + need * 8
        ))
    };
    let field = |i: usize, need: usize| body.get(i).copied().ok_or_else(|| short(need));
    Ok(Some(match kind {
        MSRBATCH_REC_SAMPLE => {
            let need = nr.checked_mul(2).and_then(|n| n.checked_add(3));
            let need = need.ok_or_else(|| short(usize::MAX / 8))?;
            if body.len() < need {
                return Err(short(need));
            }
            Record::Sample(Sample {
                cpu,
                seq: body[0],
                tsc: body[1],
                failed: body[2],
                values: body[3..need]
                    .chunks_exact(2)
                    .map(|v| [v[0], v[1]])
                    .collect(),
            })
        }
        MSRBATCH_REC_LOST => Record::Lost {
            cpu,
            lost: field(0, 1)?,
        },
        MSRBATCH_REC_ONLINE | MSRBATCH_REC_OFFLINE => {
            let (seq, tsc) = (field(0, 2)?, field(1, 2)?);
            if kind == MSRBATCH_REC_ONLINE {
                Record::Online { cpu, seq, tsc }
            } else {
                Record::Offline { cpu, seq, tsc }
            }
        }
        _ => return Ok(None),
    }))
}

/// A running (or stopped, not yet closed) sampler: its descriptor and the
/// mapping of its ring. Dropping it unmaps the ring and closes the
/// descriptor, which stops and frees the sampler.
///
/// `Send`, not `Sync`: reading advances the ring's tail, so one thread
/// reads. The ring is not inherited usefully by `fork()`.
#[derive(Debug)]
pub struct Sampler {
    ring: RingReader<sys::SharedWords>,
    fd: OwnedFd,
    ops: BTreeMap<u32, Vec<Op>>,
}

impl Sampler {
    /// A sampler of `ops` (each with its CPU, in batch order) from its
    /// descriptor, whose ring is `mmap_size` bytes.
    pub(crate) fn from_fd(fd: OwnedFd, mmap_size: u64, ops: &[(u32, Op)]) -> Result<Self> {
        let mem = sys::SharedWords::map(fd.as_fd(), mmap_size)
            .map_err(|e| Error::from_io("mmap of the sampler's ring", &e))?;
        let words = mem.len();
        let mut by_cpu: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        for &(cpu, op) in ops {
            by_cpu.entry(cpu).or_default().push(op);
        }
        Ok(Sampler {
            ring: RingReader::new(mem, words)?,
            fd,
            ops: by_cpu,
        })
    }

    /// The next record, copied out of the ring, or `None` if none is unread
    /// now. Records of types this library does not know are skipped.
    /// `EBADMSG`: the ring breaks the ABI (nothing more can be read).
    pub fn read(&mut self) -> Result<Option<Record>> {
        self.ring.next()
    }

    /// Waits until [`Sampler::read`] has records at the watermark, the
    /// sampler stops, or `timeout` passes (`None`: no timeout). An
    /// interrupted wait (`EINTR`) is an error.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Wait> {
        let ms = timeout.map_or(-1, |t| {
            // Round up, so that a short timeout still waits.
            let ms = t.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        });
        let r = sys::poll_in(self.fd.as_fd(), ms).map_err(|e| Error::from_io("poll", &e))?;
        Ok(if r & libc::POLLIN != 0 {
            Wait::Ready
        } else if r & libc::POLLHUP != 0 {
            Wait::Stopped
        } else if r & libc::POLLNVAL != 0 {
            return Err(Error::new(libc::EBADF, "poll of the sampler"));
        } else if r & libc::POLLERR != 0 {
            return Err(Error::new(libc::EIO, "poll of the sampler"));
        } else {
            Wait::TimedOut
        })
    }

    /// Stops sampling (`MSRBATCH_SAMPLER_IOC_STOP`): each CPU appends an
    /// `Offline` record; the ring stays readable.
    pub fn stop(&self) -> Result<()> {
        sys::sampler_stop(self.fd.as_fd())
            .map_err(|e| Error::from_io("MSRBATCH_SAMPLER_IOC_STOP", &e))
    }

    /// Whether the kernel has marked the ring stopped: no CPU will append
    /// again (records may still be unread).
    pub fn is_stopped(&self) -> bool {
        self.ring.flags() & MSRBATCH_RING_STOPPED != 0
    }

    /// Records lost so far because the ring was full, on all CPUs (the
    /// ring's count, ahead of the `Lost` records read).
    pub fn lost(&self) -> u64 {
        self.ring.control(word::LOST)
    }

    /// The period in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.ring.control(word::PERIOD)
    }

    /// `CLOCK_MONOTONIC` nanoseconds when period 0 was due.
    pub fn epoch_ns(&self) -> u64 {
        self.ring.control(word::EPOCH)
    }

    /// The ops `cpu` runs each period, in batch order (the order of a
    /// [`Sample`]'s values); empty for a CPU the batch does not name.
    pub fn cpu_ops(&self, cpu: u32) -> &[Op] {
        self.ops.get(&cpu).map_or(&[], Vec::as_slice)
    }

    /// The CPUs the batch names, in order.
    pub fn cpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.ops.keys().copied()
    }

    /// A sample's values as op results (see [`Sample::results`]).
    pub fn results<'a>(&'a self, s: &'a Sample) -> impl Iterator<Item = OpResult> + 'a {
        s.results(self.cpu_ops(s.cpu))
    }
}

impl AsFd for Sampler {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Prepared<'_> {
    /// Starts a sampler of this batch (`MSRBATCH_IOC_SAMPLE`): every
    /// `cfg.period_ns`, each CPU the batch names runs its ops and appends a
    /// [`Record::Sample`]. The batch's ops must be RDMSR, RDPMC, RDTSC,
    /// RDTSCP or CPUID (`EINVAL` naming the op, see [`Op::is_sampleable`]), at
    /// most `MSRBATCH_SAMPLE_MAX_OPS` per CPU (`E2BIG` naming the first op
    /// over); other errors: `ERANGE` (period), `EINVAL`/`E2BIG` (ring
    /// pages, watermark), `EBADF` (device not opened for reading), `ENOSPC`
    /// (`MSRBATCH_MAX_SAMPLERS` samplers in the system).
    ///
    /// The sampler outlives the batch and the device.
    pub fn sample(&self, cfg: &SamplerConfig) -> Result<Sampler> {
        let mut req = msrbatch_sample_req {
            version: MSRBATCH_ABI_VERSION,
            handle: self.handle,
            ring_pages: cfg.ring_pages,
            period_ns: cfg.period_ns,
            watermark: cfg.watermark,
            ..Default::default()
        };
        let nr_ops = u32::try_from(self.len()).unwrap_or(u32::MAX);
        let fd = sys::sample(self.dev.file.as_fd(), &mut req).map_err(|e| {
            let index = blamed(req.err_index, nr_ops);
            let why = crate::refusal::explain(
                crate::refusal::Call::Sample(cfg),
                &self.ops,
                false,
                e.raw_os_error().unwrap_or(libc::EIO),
                index,
            );
            Error::from_io("MSRBATCH_IOC_SAMPLE", &e)
                .with_index(index)
                .with_reason(why)
        })?;
        Sampler::from_fd(fd, req.mmap_size, &self.ops)
    }
}

#[cfg(test)]
pub(crate) mod tests;
