// SPDX-License-Identifier: GPL-2.0
//! Safe Rust API for `/dev/msrbatch`.
//!
//! Build a [`Batch`] of [`Op`]s, each naming the CPU it runs on; run it with
//! [`Device::run`]. Each CPU runs its ops in the order they were pushed, with
//! interrupts off, in one cross-call; the CPUs of a batch run concurrently.
//! Every op gets its own result: a faulting instruction is an `EIO` for that
//! op, not an error of the whole call.
//!
//! ```no_run
//! use msrbatch::{msr, online_cpus, Batch, Device, Op};
//!
//! let dev = Device::open()?;
//! let mut batch = Batch::new();
//! for cpu in online_cpus()? {
//!     batch.push(cpu, Op::RdMsr { msr: msr::IA32_PAT });
//! }
//! dev.run(&mut batch)?;
//! for r in batch.results() {
//!     println!("cpu {}: {}: {:?}", r.cpu, r.op, r.value);
//! }
//! # Ok::<(), msrbatch::Error>(())
//! ```
//!
//! A batch can be run again without rebuilding it; the results are replaced.
//! To run one many times, [`Device::prepare`] has the kernel check and keep it
//! once: each [`Prepared::run`] is then one ioctl that copies nothing, and the
//! results are read from a mapping of the kernel's. [`Batch::sync_start`]
//! starts the CPUs of a batch together ([`Batch::start_spread`] says how
//! closely), [`Batch::timestamps`] stamps each op with the TSC
//! ([`OpResult::tsc`]), and [`Device::restore_on_close`] has the kernel put
//! back every MSR the device's batches write when it is closed.
//! [`Prepared::sample`] has the kernel run a batch that only reads on each of
//! its CPUs every period, into a ring read with a [`sampler::Sampler`];
//! [`derived`] computes turbostat's columns from such samples.
//!
//! Text: an [`Op`] prints as, and parses from, a statement of the script
//! language ([`script`]); numbers follow [one grammar](number) everywhere;
//! [`msr`] names the architectural MSRs.
//!
//! Counters: [`counters::Session::open`] probes a CPU's PMU, places events on
//! its counters, checks nobody owns them and programs them; [`pmu`] decodes
//! what a PMU is. With the feature `sim` (on by default), `sim::SimPmu` is
//! a simulated PMU, built from a real CPU's CPUID dump, on which counter code
//! runs without the hardware or the module.
//!
//! This crate has no `unsafe` code except its C API (the `extern "C"`
//! functions `include/msrbatch.h` declares); the ioctls are in the
//! `msrbatch-sys` crate, which also has the raw interface.

#![deny(unsafe_code, unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod allowlist;
// The C API is the one module with `unsafe` code (C hands it raw pointers);
// the ioctls themselves are in the `msrbatch-sys` crate.
#[allow(unsafe_code)]
mod capi;
pub mod counters;
pub mod derived;
mod error;
pub mod msr;
mod msr_index;
pub mod number;
pub mod pmu;
pub mod refusal;
pub mod sampler;
pub mod script;
#[cfg(feature = "sim")]
pub mod sim;

/// The ABI's types and constants (generated from `<linux/msrbatch.h>`), for
/// [`Batch::raw_ops`] and [`Op::encode`].
pub use msrbatch_sys::uapi;

pub use error::{Errno, Error, Result};
pub use msr::{msr_by_name, msr_name};

use msrbatch_sys as sys;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::path::Path;
use uapi::*;

/// The device node.
pub const DEVICE_PATH: &str = "/dev/msrbatch";

/// The bit of an RDPMC selector (`ecx`) that selects Intel's fixed counters.
pub const RDPMC_FIXED: u32 = 1 << 30;

/// The CPUs the kernel lists as online (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Result<Vec<u32>> {
    sysfs_cpus("/sys/devices/system/cpu/online")
}

/// The CPUs that may exist on this machine, online or not
/// (`/sys/devices/system/cpu/possible`): a batch naming another CPU is
/// refused (`ENODEV`).
pub fn possible_cpus() -> Result<Vec<u32>> {
    sysfs_cpus("/sys/devices/system/cpu/possible")
}

/// The CPU list in the sysfs file `path`.
fn sysfs_cpus(path: &str) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::from_io(path, &e))?;
    number::parse_cpu_list(text.trim(), &[])
        .map_err(|_| Error::from_io(path, &std::io::Error::from_raw_os_error(libc::EINVAL)))
}

/// One operation. Each runs on the CPU it is pushed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read an MSR.
    RdMsr {
        /// MSR index.
        msr: u32,
    },
    /// Write an MSR.
    WrMsr {
        /// MSR index.
        msr: u32,
        /// Value to write.
        value: u64,
    },
    /// Read-modify-write: `new = (old & !clear) | set`, back to back.
    RmwMsr {
        /// MSR index.
        msr: u32,
        /// Bits to clear.
        clear: u64,
        /// Bits to set (after clearing).
        set: u64,
    },
    /// Read a performance counter ([`RDPMC_FIXED`] in `ecx` selects Intel's
    /// fixed counters).
    RdPmc {
        /// The RDPMC selector.
        ecx: u32,
    },
    /// Read the time-stamp counter.
    RdTsc,
    /// Read the time-stamp counter and IA32_TSC_AUX.
    RdTscp,
    /// Execute CPUID (also a serializing fence).
    Cpuid {
        /// EAX input.
        leaf: u32,
        /// ECX input.
        subleaf: u32,
    },
    /// Busy-wait with interrupts off (at most `MSRBATCH_MAX_DELAY_NS`).
    Delay {
        /// Nanoseconds.
        ns: u64,
    },
    /// Read CR4 of the CPU.
    RdCr4,
    /// Wait for a change: see [`Poll`]. Its result is a [`Value::Poll`]; a
    /// poll that saw no change in time fails with `ETIMEDOUT`.
    Poll(Poll),
}

/// What an [`Op::Poll`] does: read `source` again and again, interrupts off,
/// until `value & mask` differs from the first read's (or, with `equals`, is
/// that value), for at most `timeout_us` microseconds (and the CPU's busy
/// time).
///
/// [`Poll::new`] gives the poll of the script's bare `poll` statement;
/// the `with_` methods change one field each:
///
/// ```
/// use msrbatch::{Op, Poll, PollSource};
///
/// // Wait up to 100 us for bit 0 of the package's energy counter to
/// // change, and report how many reads that took.
/// let poll = Poll::new(PollSource::Msr(0x611))
///     .with_mask(1)
///     .with_timeout_us(100)
///     .with_count(true);
/// let op = Op::Poll(poll);
/// assert_eq!(op.to_string(), "poll MSR_PKG_ENERGY_STATUS mask 0x1 timeout 100us count");
/// ```
///
/// The fields are not checked here: a batch with an `equals` outside `mask`
/// never sees it, and the kernel refuses a timeout of 0 (`EINVAL`) or over
/// [`MAX_POLL_US`] (`ERANGE`), as [`refusal::check_batch`] tells beforehand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Poll {
    /// What it reads.
    pub source: PollSource,
    /// The bits that count.
    pub mask: u64,
    /// Stop when `value & mask` equals this (inside `mask`), instead of
    /// when it changes.
    pub equals: Option<u64>,
    /// The timeout, 1 ..= [`MAX_POLL_US`] microseconds.
    pub timeout_us: u16,
    /// Report the number of reads and the ticks they took
    /// ([`PollStamp::Count`]) instead of the TSC of the last read.
    pub count: bool,
}

impl Poll {
    /// A poll of `source` for any change of any bit, for the longest time
    /// ([`MAX_POLL_US`]), reporting the TSC of the read that saw it.
    pub const fn new(source: PollSource) -> Self {
        Poll {
            source,
            mask: u64::MAX,
            equals: None,
            timeout_us: MAX_POLL_US,
            count: false,
        }
    }

    /// The poll with only the bits of `mask` counting.
    pub const fn with_mask(self, mask: u64) -> Self {
        Poll { mask, ..self }
    }

    /// The poll ending when `value & mask` is `value` (give `value` inside
    /// the mask), instead of at any change.
    pub const fn with_equals(self, value: u64) -> Self {
        Poll {
            equals: Some(value),
            ..self
        }
    }

    /// The poll with a timeout of `timeout_us` microseconds.
    pub const fn with_timeout_us(self, timeout_us: u16) -> Self {
        Poll { timeout_us, ..self }
    }

    /// The poll reporting the number of reads and their ticks (`true`) or
    /// the TSC of the last read (`false`).
    pub const fn with_count(self, count: bool) -> Self {
        Poll { count, ..self }
    }

    /// The timeout in nanoseconds, as the kernel's limits count it.
    pub const fn timeout_ns(&self) -> u64 {
        self.timeout_us as u64 * 1000
    }

    /// The poll in the ABI's layout, for `cpu`.
    fn encode(&self, cpu: u32) -> msrbatch_op {
        let (reg, mut flags) = match self.source {
            PollSource::Msr(msr) => (msr, 0),
            PollSource::Pmc(ecx) => (ecx, MSRBATCH_POLL_F_RDPMC),
            PollSource::Tsc => (0, MSRBATCH_POLL_F_TSC),
        };
        if self.equals.is_some() {
            flags |= MSRBATCH_POLL_F_EQUAL;
        }
        if self.count {
            flags |= MSRBATCH_POLL_F_COUNT;
        }
        // A timeout too long for its field stays too long (ERANGE).
        let field = u32::from(u16::MAX) >> MSRBATCH_POLL_TIMEOUT_SHIFT;
        flags |= u32::from(self.timeout_us).min(field) << MSRBATCH_POLL_TIMEOUT_SHIFT;
        msrbatch_op {
            op: MSRBATCH_OP_POLL as u16,
            flags: flags as u16,
            cpu,
            reg,
            arg: [self.mask, self.equals.unwrap_or(0)],
            ..Default::default()
        }
    }
}

/// The longest timeout of an [`Op::Poll`], in microseconds
/// (`MSRBATCH_MAX_POLL_NS`).
pub const MAX_POLL_US: u16 = (MSRBATCH_MAX_POLL_NS / 1000) as u16;

/// What an [`Op::Poll`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PollSource {
    /// An MSR.
    Msr(u32),
    /// A performance counter, by RDPMC selector.
    Pmc(u32),
    /// The time-stamp counter.
    Tsc,
}

/// When an [`Op::Poll`] saw what it waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollStamp {
    /// The TSC right after the read that saw it.
    Tsc(u64),
    /// How many reads it took (the first included), and the TSC ticks
    /// from the first to the last (both at most `u32::MAX`).
    Count {
        /// Reads.
        reads: u32,
        /// Ticks.
        ticks: u32,
    },
}

impl Op {
    /// The op's mnemonic, the first word of its [script form](script).
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Op::RdMsr { .. } => "rdmsr",
            Op::WrMsr { .. } => "wrmsr",
            Op::RmwMsr { .. } => "rmw",
            Op::RdPmc { .. } => "rdpmc",
            Op::RdTsc => "rdtsc",
            Op::RdTscp => "rdtscp",
            Op::Cpuid { .. } => "cpuid",
            Op::Delay { .. } => "delay",
            Op::RdCr4 => "rdcr4",
            Op::Poll(_) => "poll",
        }
    }

    /// Whether the op changes machine state.
    pub fn is_write(&self) -> bool {
        matches!(self, Op::WrMsr { .. } | Op::RmwMsr { .. })
    }

    /// Whether a sampler may run the op ([`Prepared::sample`]): RDMSR, RDPMC,
    /// RDTSC, RDTSCP and CPUID, the ops that only read and take no time.
    pub fn is_sampleable(&self) -> bool {
        matches!(
            self,
            Op::RdMsr { .. } | Op::RdPmc { .. } | Op::RdTsc | Op::RdTscp | Op::Cpuid { .. }
        )
    }

    /// Encodes the op for `cpu` in the ABI's layout.
    pub fn encode(&self, cpu: u32) -> msrbatch_op {
        let (op, reg, arg) = match *self {
            Op::RdMsr { msr } => (MSRBATCH_OP_RDMSR, msr, [0, 0]),
            Op::WrMsr { msr, value } => (MSRBATCH_OP_WRMSR, msr, [value, 0]),
            Op::RmwMsr { msr, clear, set } => (MSRBATCH_OP_RMWMSR, msr, [clear, set]),
            Op::RdPmc { ecx } => (MSRBATCH_OP_RDPMC, ecx, [0, 0]),
            Op::RdTsc => (MSRBATCH_OP_RDTSC, 0, [0, 0]),
            Op::RdTscp => (MSRBATCH_OP_RDTSCP, 0, [0, 0]),
            Op::Cpuid { leaf, subleaf } => (MSRBATCH_OP_CPUID, leaf, [u64::from(subleaf), 0]),
            Op::Delay { ns } => (MSRBATCH_OP_DELAY, 0, [ns, 0]),
            Op::RdCr4 => (MSRBATCH_OP_RDCR4, 0, [0, 0]),
            Op::Poll(poll) => return poll.encode(cpu),
        };
        msrbatch_op {
            op: op as u16,
            cpu,
            reg,
            arg,
            ..Default::default()
        }
    }
}

/// What a successful op returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// WRMSR: nothing.
    None,
    /// RDMSR, RDPMC, RDTSC, RDCR4: one value.
    U64(u64),
    /// Read-modify-write: the value read and the value written.
    Rmw {
        /// Value before.
        old: u64,
        /// Value written.
        new: u64,
    },
    /// RDTSCP.
    Tscp {
        /// Time-stamp counter.
        tsc: u64,
        /// IA32_TSC_AUX.
        aux: u32,
    },
    /// CPUID registers.
    Cpuid {
        /// EAX.
        eax: u32,
        /// EBX.
        ebx: u32,
        /// ECX.
        ecx: u32,
        /// EDX.
        edx: u32,
    },
    /// DELAY: TSC ticks that elapsed.
    Ticks(u64),
    /// POLL: the value that ended it, and when.
    Poll {
        /// The value of the last read (the one that saw the change).
        value: u64,
        /// When.
        at: PollStamp,
    },
}

impl Value {
    /// The main 64-bit value (the new value of a read-modify-write, the TSC
    /// of RDTSCP, EAX of CPUID), if any.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::None => None,
            Value::U64(v) | Value::Ticks(v) | Value::Poll { value: v, .. } => Some(v),
            Value::Rmw { new, .. } => Some(new),
            Value::Tscp { tsc, .. } => Some(tsc),
            Value::Cpuid { eax, .. } => Some(u64::from(eax)),
        }
    }
}

/// The result of one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpResult {
    /// Index in the batch.
    pub index: usize,
    /// The CPU it ran on.
    pub cpu: u32,
    /// The op.
    pub op: Op,
    /// Its value, or its error (`EIO`: the instruction faulted; `ECANCELED`:
    /// not run because an earlier op of this CPU failed with stop-on-error;
    /// `ETIME`: not run, the CPU's busy credit ran out).
    pub value: std::result::Result<Value, Errno>,
    /// With [`Batch::timestamps`]: the TSC right after the op ran (also when
    /// it faulted); `None` for an op that did not run, and without
    /// timestamps.
    pub tsc: Option<u64>,
}

impl OpResult {
    /// Op `index` (`op` for `cpu`) as the kernel left it: `status` 0 or a
    /// negative errno, and its outputs `val`. The one decoder of results,
    /// for a batch's ops array and a prepared batch's mapping alike.
    fn decode(index: usize, cpu: u32, op: Op, status: i32, val: [u64; 2], stamps: bool) -> Self {
        let ran = !matches!(-status, libc::ECANCELED | libc::ETIME);
        let [v0, v1] = val;
        let value = if status != 0 {
            Err(Errno(-status))
        } else {
            Ok(match op {
                Op::WrMsr { .. } => Value::None,
                Op::RmwMsr { .. } => Value::Rmw { old: v0, new: v1 },
                Op::RdTscp => Value::Tscp {
                    tsc: v0,
                    aux: v1 as u32,
                },
                Op::Cpuid { .. } => Value::Cpuid {
                    eax: v0 as u32,
                    ebx: (v0 >> 32) as u32,
                    ecx: v1 as u32,
                    edx: (v1 >> 32) as u32,
                },
                Op::Delay { .. } => Value::Ticks(v0),
                Op::Poll(poll) => Value::Poll {
                    value: v0,
                    at: if poll.count {
                        PollStamp::Count {
                            reads: (v1 >> 32) as u32,
                            ticks: v1 as u32,
                        }
                    } else {
                        PollStamp::Tsc(v1)
                    },
                },
                _ => Value::U64(v0),
            })
        };
        OpResult {
            index,
            cpu,
            op,
            value,
            tsc: (stamps && ran).then_some(v1),
        }
    }
}

/// A batch of ops, reusable across runs.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    ops: Vec<Op>,
    raw: Vec<msrbatch_op>,
    stop_on_error: bool,
    sync_start: bool,
    timestamps: bool,
    nr_failed: u32,
    err_index: Option<u32>,
    start_spread: u64,
}

impl Batch {
    /// An empty batch (continue after a failed op).
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop each CPU's sequence at its first failing op (the rest get
    /// `ECANCELED`) instead of continuing.
    pub fn stop_on_error(&mut self, stop: bool) -> &mut Self {
        self.stop_on_error = stop;
        self
    }

    /// Synchronised start (`MSRBATCH_F_SYNC_START`): every CPU of the batch
    /// waits, interrupts off, until all have arrived, then all start
    /// together. If one does not arrive within `MSRBATCH_SYNC_TIMEOUT_NS`,
    /// nothing runs and the run fails with `ETIMEDOUT`.
    pub fn sync_start(&mut self, sync: bool) -> &mut Self {
        self.sync_start = sync;
        self
    }

    /// Per-op timestamps (`MSRBATCH_F_TIMESTAMPS`): each result's
    /// [`OpResult::tsc`] is the TSC right after the op ran. The kernel
    /// refuses (`EINVAL`, naming the op) a batch with timestamps and an op
    /// that returns a second value itself: RDTSCP, CPUID, read-modify-write.
    pub fn timestamps(&mut self, on: bool) -> &mut Self {
        self.timestamps = on;
        self
    }

    /// Appends `op` for `cpu`; returns its index.
    pub fn push(&mut self, cpu: u32, op: Op) -> usize {
        self.ops.push(op);
        self.raw.push(op.encode(cpu));
        self.ops.len() - 1
    }

    /// Whether each CPU's sequence stops at its first failing op.
    pub fn stops_on_error(&self) -> bool {
        self.stop_on_error
    }

    /// Whether the batch asks for a synchronised start.
    pub fn syncs_start(&self) -> bool {
        self.sync_start
    }

    /// Whether the batch asks for per-op timestamps.
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no ops.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether any op writes.
    pub fn has_writes(&self) -> bool {
        self.ops.iter().any(Op::is_write)
    }

    /// Number of failed ops of the last run.
    pub fn nr_failed(&self) -> u32 {
        self.nr_failed
    }

    /// After a run the kernel rejected: the index of the op it blamed.
    pub fn err_index(&self) -> Option<u32> {
        self.err_index
    }

    /// The last run's start spread: TSC ticks between the first and the last
    /// CPU starting its ops (0 on one CPU; smaller with
    /// [`Batch::sync_start`]).
    pub fn start_spread(&self) -> u64 {
        self.start_spread
    }

    /// The result of op `index` from the last run.
    pub fn result(&self, index: usize) -> Option<OpResult> {
        let (op, raw) = (self.ops.get(index)?, self.raw.get(index)?);
        Some(OpResult::decode(
            index,
            raw.cpu,
            *op,
            raw.status,
            raw.val,
            self.timestamps,
        ))
    }

    /// All results of the last run, in batch order.
    pub fn results(&self) -> impl Iterator<Item = OpResult> + '_ {
        (0..self.len()).filter_map(|i| self.result(i))
    }

    /// Every op with its CPU, in batch order.
    pub fn cpu_ops(&self) -> Vec<(u32, Op)> {
        (0..self.len()).filter_map(|i| self.op(i)).collect()
    }

    /// Checks the batch against the kernel's limits that need nothing but
    /// the batch ([`refusal::check_batch`]): the refusal the kernel would
    /// make, in words, without an ioctl.
    pub fn check(&self) -> std::result::Result<(), refusal::Refusal> {
        refusal::check_batch(&self.cpu_ops(), self.timestamps)
    }

    /// The op at `index`.
    pub fn op(&self, index: usize) -> Option<(u32, Op)> {
        Some((self.raw.get(index)?.cpu, *self.ops.get(index)?))
    }

    /// Stores op `index`'s outcome as the kernel would (for backends other
    /// than the device): `status` 0 or a negative errno, and the outputs.
    #[cfg(feature = "sim")]
    pub(crate) fn set_result(&mut self, index: usize, status: i32, val: [u64; 2]) {
        if let Some(r) = self.raw.get_mut(index) {
            r.status = status;
            r.val = val;
        }
    }

    /// Records a completed run with `nr_failed` failed ops and start spread
    /// `start_spread`.
    pub(crate) fn set_ran(&mut self, nr_failed: u32, start_spread: u64) {
        self.nr_failed = nr_failed;
        self.err_index = None;
        self.start_spread = start_spread;
    }

    /// Records a refused run (or preparation) that blamed op `index`.
    pub(crate) fn set_refused(&mut self, index: Option<u32>) {
        self.err_index = index;
    }

    /// The ops in the ABI's layout (for callers that want the raw view).
    pub fn raw_ops(&self) -> &[msrbatch_op] {
        &self.raw
    }

    /// The batch's `MSRBATCH_F_*` flags.
    fn flags(&self) -> u32 {
        [
            (self.stop_on_error, MSRBATCH_F_STOP_ON_ERROR),
            (self.sync_start, MSRBATCH_F_SYNC_START),
            (self.timestamps, MSRBATCH_F_TIMESTAMPS),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |f, (_, bit)| f | bit)
    }

    fn header(&self) -> msrbatch_batch {
        msrbatch_batch {
            version: MSRBATCH_ABI_VERSION,
            flags: self.flags(),
            ..Default::default()
        }
    }
}

/// A batch validated once and kept by the kernel ([`Device::prepare`]), to
/// be run again and again: [`Prepared::run`] is one ioctl that reads and
/// writes no memory of the caller's; the results appear in a read-only
/// mapping of the kernel's result area, which [`Prepared::result`] decodes
/// exactly as [`Batch::result`] does. Dropping it unmaps the results and
/// frees the kernel's copy (`MSRBATCH_IOC_UNPREPARE`).
///
/// Not `Sync`: runs and reads happen on the thread that owns it, so a
/// result is never read while a run of it writes there.
#[derive(Debug)]
pub struct Prepared<'d> {
    dev: &'d Device,
    handle: u32,
    ops: Vec<(u32, Op)>,
    timestamps: bool,
    results: sys::Mapping,
}

impl Prepared<'_> {
    /// Runs the batch; returns the number of failed ops (each op's status is
    /// in its result). `Err` means nothing ran: `ENXIO` (a CPU went
    /// offline), `ETIMEDOUT` (synchronised start), `EPERM`/`EBADF` for
    /// writes (checked at every run).
    pub fn run(&self) -> Result<u32> {
        sys::run_prepared(self.dev.file.as_fd(), self.handle).map_err(|e| {
            let why = refusal::explain(
                refusal::Call::Run,
                &self.ops,
                self.timestamps,
                e.raw_os_error().unwrap_or(libc::EIO),
                None,
            );
            Error::from_io("MSRBATCH_IOC_RUN", &e).with_reason(why)
        })
    }

    /// The result of op `index` from the last run, read from the mapping
    /// now (all zero, i.e. a success with value 0, before the first run).
    pub fn result(&self, index: usize) -> Option<OpResult> {
        let (cpu, op) = *self.ops.get(index)?;
        let r = self.raw_result(index)?;
        Some(OpResult::decode(
            index,
            cpu,
            op,
            r.status,
            r.val,
            self.timestamps,
        ))
    }

    /// All results of the last run, in batch order.
    pub fn results(&self) -> impl Iterator<Item = OpResult> + '_ {
        (0..self.len()).filter_map(|i| self.result(i))
    }

    /// Op `index`'s result as the kernel wrote it (for the raw view, as
    /// [`Batch::raw_ops`]).
    pub fn raw_result(&self, index: usize) -> Option<msrbatch_result> {
        self.results.get(index)
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no ops (never: the kernel refuses those).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The kernel's handle (`MSRBATCH_IOC_RUN`'s argument).
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        // Only a handle the descriptor no longer has fails (ENOENT); there
        // is nothing to free then.
        let _ = sys::unprepare(self.dev.file.as_fd(), self.handle);
    }
}

/// Something that runs a [`Batch`]: the device, or the simulated PMU
/// (`sim::SimPmu`, feature `sim`) on which the same code runs without hardware.
pub trait Backend {
    /// Runs `batch` like [`Device::run`]: `Ok` means it ran and each op has
    /// its own result; `Err` means nothing ran.
    fn run(&self, batch: &mut Batch) -> Result<()>;

    /// Whether the kernel's NMI watchdog is on (it owns a counter); None if
    /// unknown.
    fn nmi_watchdog(&self) -> Option<bool> {
        None
    }
}

impl Backend for Device {
    fn run(&self, batch: &mut Batch) -> Result<()> {
        Device::run(self, batch)
    }

    fn nmi_watchdog(&self) -> Option<bool> {
        std::fs::read_to_string("/proc/sys/kernel/nmi_watchdog")
            .ok()
            .map(|s| s.trim() != "0")
    }
}

/// The op a refused ioctl blamed: its `err_index`, when that names one of
/// its `nr_ops` ops.
fn blamed(err_index: u32, nr_ops: u32) -> Option<u32> {
    (err_index != MSRBATCH_NO_INDEX && err_index < nr_ops).then_some(err_index)
}

/// What the loaded module supports (`MSRBATCH_IOC_INFO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// ABI version of the module.
    pub version: u32,
    /// Maximum ops per batch.
    pub max_ops: u32,
    /// Maximum nanoseconds of one DELAY op.
    pub max_delay_ns: u32,
    /// Maximum nanoseconds of all DELAY ops of one CPU in one batch.
    pub max_cpu_delay_ns: u32,
    /// Bit N set when op code N is supported.
    pub ops_supported: u64,
    /// Batch flags the module accepts.
    pub flags_supported: u32,
    /// How long one CPU may run msrbatch ops without a pause, for all
    /// batches together (0 from modules older than this field).
    pub max_cpu_busy_ns: u32,
}

/// An open `/dev/msrbatch`.
#[derive(Debug)]
pub struct Device {
    file: File,
    read_only: bool,
}

impl Device {
    /// Opens [`DEVICE_PATH`]. With `CAP_SYS_RAWIO` the descriptor may do
    /// everything; without, what the allowlist in force at open allows
    /// ([`allowlist`]), whoever the node's mode lets open it.
    pub fn open() -> Result<Self> {
        Self::open_path(DEVICE_PATH)
    }

    /// Opens the device at `path` for reading and writing.
    pub fn open_path(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), true)
    }

    /// Opens [`DEVICE_PATH`] read-only: batches that only read work; a batch
    /// that writes, and an RDPMC grant, fail with `EBADF`.
    pub fn open_read_only() -> Result<Self> {
        Self::open_path_read_only(DEVICE_PATH)
    }

    /// Opens the device at `path` read-only (as [`Device::open_read_only`]):
    /// what a caller that will not write opens, so that a node only readable
    /// by the caller (mode `0640` for a group, as msr-safe's example) works.
    pub fn open_path_read_only(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), false)
    }

    /// Opens the device at `path` for reading and writing if the node lets
    /// the caller write, else (`EACCES`, `EROFS`) read-only; see
    /// [`Device::is_read_only`].
    pub fn open_path_best(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        match Self::open_with(path, true) {
            Err(e) if matches!(e.errno().0, libc::EACCES | libc::EROFS) => {
                Self::open_with(path, false)
            }
            r => r,
        }
    }

    /// Whether the device was opened read-only (writes, restore on close and
    /// RDPMC grants then fail with `EBADF`).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn open_with(path: &Path, write: bool) -> Result<Self> {
        OpenOptions::new()
            .read(true)
            .write(write)
            .open(path)
            .map(|file| Device {
                file,
                read_only: !write,
            })
            .map_err(|e| Error::from_io(format!("open {}", path.display()), &e))
    }

    /// Asks the module what it supports.
    pub fn info(&self) -> Result<Info> {
        let i =
            sys::info(self.file.as_fd()).map_err(|e| Error::from_io("MSRBATCH_IOC_INFO", &e))?;
        Ok(Info {
            version: i.version,
            max_ops: i.max_ops,
            max_delay_ns: i.max_delay_ns,
            max_cpu_delay_ns: i.max_cpu_delay_ns,
            ops_supported: i.ops_supported,
            flags_supported: i.flags_supported,
            max_cpu_busy_ns: i.max_cpu_busy_ns,
        })
    }

    /// Runs `batch`. `Ok` means it ran: per-op failures are in its results
    /// (see [`Batch::nr_failed`]). `Err` means nothing ran, except
    /// `ENOTRECOVERABLE`: the ops ran but their results could not be copied
    /// back (the batch's memory became unwritable meanwhile).
    pub fn run(&self, batch: &mut Batch) -> Result<()> {
        let mut hdr = batch.header();
        let r = sys::batch(self.file.as_fd(), &mut hdr, &mut batch.raw);
        match r {
            Ok(()) => {
                batch.set_ran(hdr.nr_failed, hdr.start_spread);
                Ok(())
            }
            Err(e) => {
                let index = blamed(hdr.err_index, hdr.nr_ops);
                batch.set_refused(index);
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                let why = refusal::explain(
                    refusal::Call::Batch,
                    &batch.cpu_ops(),
                    batch.timestamps,
                    errno,
                    index,
                );
                Err(Error::from_io("MSRBATCH_IOC_BATCH", &e)
                    .with_index(index)
                    .with_reason(why))
            }
        }
    }

    /// Validates `batch` once and has the kernel keep it, to run again and
    /// again without copying or validating it ([`Prepared`]). Errors are
    /// those of [`Device::run`] (naming the op to blame), and `ENOSPC`: this
    /// device already holds `MSRBATCH_MAX_PREPARED` (64) prepared batches.
    pub fn prepare(&self, batch: &Batch) -> Result<Prepared<'_>> {
        let fd = self.file.as_fd();
        let mut p = msrbatch_prepare {
            version: MSRBATCH_ABI_VERSION,
            flags: batch.flags(),
            ..Default::default()
        };
        if let Err(e) = sys::prepare(fd, &mut p, &batch.raw) {
            let index = blamed(p.err_index, p.nr_ops);
            let why = refusal::explain(
                refusal::Call::Prepare,
                &batch.cpu_ops(),
                batch.timestamps,
                e.raw_os_error().unwrap_or(libc::EIO),
                index,
            );
            return Err(Error::from_io("MSRBATCH_IOC_PREPARE", &e)
                .with_index(index)
                .with_reason(why));
        }
        let unprepare = |e: std::io::Error| {
            let _ = sys::unprepare(fd, p.handle);
            Error::from_io("mmap of the prepared batch's results", &e)
        };
        let results = sys::Mapping::results(fd, p.mmap_offset, p.mmap_size, batch.len())
            .map_err(unprepare)?;
        Ok(Prepared {
            dev: self,
            handle: p.handle,
            ops: (0..batch.len()).filter_map(|i| batch.op(i)).collect(),
            timestamps: batch.timestamps,
            results,
        })
    }

    /// Restore on close (`MSRBATCH_IOC_RESTORE_ON_CLOSE`): from now on, every
    /// MSR a batch on this device writes is read on its CPU just before the
    /// first write, and written back when this process closes the device (or
    /// any other descriptor of its file) or exits, also when it is killed,
    /// whoever else holds the file; then batches that write through it fail
    /// with `EPIPE`. The device is opened `O_CLOEXEC` (as every descriptor
    /// the library opens), so an `execve` restores too. `EBADF` on a device
    /// opened read-only, `EBUSY` when another process asked already.
    pub fn restore_on_close(&self) -> Result<()> {
        sys::restore_on_close(self.file.as_fd()).map_err(|e| {
            Error::from_io("MSRBATCH_IOC_RESTORE_ON_CLOSE", &e)
                .with_reason(Self::why(refusal::Call::RestoreOnClose, &e))
        })
    }

    /// Writes the values [`Device::restore_on_close`] logged back now and
    /// forgets them; returns how many could not be (CPU offline, fault: the
    /// kernel log says which).
    pub fn restore_now(&self) -> Result<u32> {
        sys::restore_now(self.file.as_fd())
            .map_err(|e| Error::from_io("MSRBATCH_IOC_RESTORE_NOW", &e))
    }

    /// Grants user-mode RDPMC (CR4.PCE) to the calling thread until
    /// [`Device::revoke_rdpmc`], until this device is closed, or until the
    /// thread exits. Errors: `EBUSY` (the thread already holds a grant,
    /// through any descriptor), `EBADF` (device opened read-only), `EACCES`
    /// (perf's `rdpmc` setting is 0), `EOPNOTSUPP` (kernel without
    /// `CONFIG_PREEMPT_NOTIFIERS`, or Xen PV).
    pub fn grant_rdpmc(&self) -> Result<()> {
        sys::pce_grant(self.file.as_fd(), 0).map_err(|e| {
            Error::from_io("MSRBATCH_IOC_PCE_GRANT", &e)
                .with_reason(Self::why(refusal::Call::Grant, &e))
        })
    }

    /// Like [`Device::grant_rdpmc`], but the grant does not end when this
    /// device is closed: only on [`Device::revoke_rdpmc`] (through any
    /// descriptor) or when the thread exits. So the thread can close every
    /// descriptor and `execve` a program that gets none.
    pub fn grant_rdpmc_thread(&self) -> Result<()> {
        sys::pce_grant(self.file.as_fd(), MSRBATCH_PCE_F_THREAD).map_err(|e| {
            Error::from_io("MSRBATCH_IOC_PCE_GRANT", &e)
                .with_reason(Self::why(refusal::Call::Grant, &e))
        })
    }

    /// Grants user-mode RDPMC to the calling program: the calling thread,
    /// the other threads of its process, and every thread and process that
    /// any of them creates from now on (forked children, `execve`d wrappers
    /// and what they start), as perf's `rdpmc=1` covers every thread of a
    /// process. The grant ends for all of them when the calling thread's own
    /// grant ends: [`Device::revoke_rdpmc`] or the thread's exit (closing
    /// this device does not end it, as with [`Device::grant_rdpmc_thread`]).
    /// No process outside that family gets it. Errors as
    /// [`Device::grant_rdpmc`], and `EOPNOTSUPP` on a kernel without
    /// tracepoints.
    pub fn grant_rdpmc_program(&self) -> Result<()> {
        sys::pce_grant(
            self.file.as_fd(),
            MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT,
        )
        .map_err(|e| {
            Error::from_io("MSRBATCH_IOC_PCE_GRANT", &e)
                .with_reason(Self::why(refusal::Call::Grant, &e))
        })
    }

    /// Ends the calling thread's grant, whichever descriptor made it
    /// (`ENOENT` if it has none in force).
    pub fn revoke_rdpmc(&self) -> Result<()> {
        sys::pce_revoke(self.file.as_fd())
            .map_err(|e| Error::from_io("MSRBATCH_IOC_PCE_REVOKE", &e))
    }

    /// Keeps the device open across `execve` (a grant lasts as long as the
    /// device stays open, so this is how a grant reaches an exec'd program).
    pub fn keep_across_exec(&self) -> Result<()> {
        sys::keep_across_exec(self.file.as_fd()).map_err(|e| Error::from_io("fcntl(F_SETFD)", &e))
    }

    /// Why the kernel refused `call` with `e`, in words ([`refusal::explain`]).
    fn why(call: refusal::Call<'_>, e: &std::io::Error) -> Option<String> {
        refusal::explain(call, &[], false, e.raw_os_error()?, None)
    }

    /// The underlying file, for raw ioctls.
    pub fn file(&self) -> &File {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_every_op() {
        let cases = [
            (Op::RdMsr { msr: 0x10 }, 1, 0x10, [0, 0]),
            (
                Op::WrMsr {
                    msr: 0x10,
                    value: 7,
                },
                2,
                0x10,
                [7, 0],
            ),
            (
                Op::RmwMsr {
                    msr: 0x10,
                    clear: 3,
                    set: 4,
                },
                3,
                0x10,
                [3, 4],
            ),
            (Op::RdPmc { ecx: 1 << 30 }, 4, 1 << 30, [0, 0]),
            (Op::RdTsc, 5, 0, [0, 0]),
            (Op::RdTscp, 6, 0, [0, 0]),
            (
                Op::Cpuid {
                    leaf: 0xa,
                    subleaf: 2,
                },
                7,
                0xa,
                [2, 0],
            ),
            (Op::Delay { ns: 500 }, 8, 0, [500, 0]),
            (Op::RdCr4, 9, 0, [0, 0]),
        ];
        for (op, code, reg, arg) in cases {
            let raw = op.encode(3);
            assert_eq!(
                (raw.op, raw.cpu, raw.reg, raw.arg),
                (code, 3, reg, arg),
                "{op:?}"
            );
            assert_eq!((raw.flags, raw.status, raw.val), (0, 0, [0, 0]));
        }
    }

    #[test]
    fn poll_builder_sets_one_field_each() {
        let tsc = Poll::new(PollSource::Tsc);
        assert_eq!(
            tsc,
            Poll {
                source: PollSource::Tsc,
                mask: u64::MAX,
                equals: None,
                timeout_us: MAX_POLL_US,
                count: false,
            }
        );
        assert_eq!(tsc.with_mask(3), Poll { mask: 3, ..tsc });
        assert_eq!(
            tsc.with_equals(0),
            Poll {
                equals: Some(0),
                ..tsc
            }
        );
        assert_eq!(
            tsc.with_timeout_us(7),
            Poll {
                timeout_us: 7,
                ..tsc
            }
        );
        assert_eq!(tsc.with_count(true), Poll { count: true, ..tsc });
        assert_eq!(tsc.with_count(true).with_count(false), tsc);
        assert_eq!(tsc.with_timeout_us(7).timeout_ns(), 7000);
        assert_eq!(tsc.timeout_ns(), u64::from(MSRBATCH_MAX_POLL_NS));
    }

    #[test]
    fn encode_polls() {
        let poll = |source, equals, timeout_us, count| {
            Op::Poll(Poll {
                source,
                mask: 0xff00,
                equals,
                timeout_us,
                count,
            })
        };
        let t = |us: u32| us << MSRBATCH_POLL_TIMEOUT_SHIFT;
        let cases = [
            (
                poll(PollSource::Msr(0x611), None, 1000, false),
                0x611,
                t(1000),
                [0xff00, 0],
            ),
            (
                poll(PollSource::Pmc(1 << 30), Some(0x100), 5, true),
                1 << 30,
                MSRBATCH_POLL_F_RDPMC | MSRBATCH_POLL_F_EQUAL | MSRBATCH_POLL_F_COUNT | t(5),
                [0xff00, 0x100],
            ),
            (
                poll(PollSource::Tsc, None, 1, false),
                0,
                MSRBATCH_POLL_F_TSC | t(1),
                [0xff00, 0],
            ),
            // Too long for the field: still too long for the kernel.
            (
                poll(PollSource::Tsc, None, u16::MAX, false),
                0,
                MSRBATCH_POLL_F_TSC | t(0xfff),
                [0xff00, 0],
            ),
        ];
        for (op, reg, flags, arg) in cases {
            let raw = op.encode(2);
            assert_eq!(
                (raw.op, raw.cpu, raw.reg, u32::from(raw.flags), raw.arg),
                (MSRBATCH_OP_POLL as u16, 2, reg, flags, arg),
                "{op:?}"
            );
        }
        assert!(u32::from(MAX_POLL_US) < 1 << (16 - MSRBATCH_POLL_TIMEOUT_SHIFT));
    }

    /// The value `OpResult::decode` gives op `op` with outputs `val` and
    /// `status`, without timestamps.
    fn decode(op: Op, status: i32, val: [u64; 2]) -> std::result::Result<Value, Errno> {
        OpResult::decode(0, 0, op, status, val, false).value
    }

    #[test]
    fn decode_results() {
        let val = [0x1111_2222_0000_000d, 0x4444_5555_6666_7777];
        let cpuid = Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        };
        assert_eq!(
            decode(cpuid, 0, val),
            Ok(Value::Cpuid {
                eax: 0xd,
                ebx: 0x1111_2222,
                ecx: 0x6666_7777,
                edx: 0x4444_5555
            })
        );
        let val = [5, 0xc0de];
        assert_eq!(
            decode(Op::RdTscp, 0, val),
            Ok(Value::Tscp {
                tsc: 5,
                aux: 0xc0de
            })
        );
        let rmw = Op::RmwMsr {
            msr: 1,
            clear: 0,
            set: 0,
        };
        assert_eq!(
            decode(rmw, 0, val),
            Ok(Value::Rmw {
                old: 5,
                new: 0xc0de
            })
        );
        assert_eq!(
            decode(Op::WrMsr { msr: 1, value: 2 }, 0, val),
            Ok(Value::None)
        );
        assert_eq!(decode(Op::RdTsc, -libc::EIO, val), Err(Errno(libc::EIO)));
        let poll = |count| {
            Op::Poll(
                Poll::new(PollSource::Tsc)
                    .with_mask(1)
                    .with_timeout_us(10)
                    .with_count(count),
            )
        };
        assert_eq!(
            decode(poll(false), 0, [9, 10]),
            Ok(Value::Poll {
                value: 9,
                at: PollStamp::Tsc(10)
            })
        );
        assert_eq!(
            decode(poll(true), 0, [9, 3 << 32 | 700]),
            Ok(Value::Poll {
                value: 9,
                at: PollStamp::Count {
                    reads: 3,
                    ticks: 700
                }
            })
        );
        assert_eq!(
            decode(poll(true), -libc::ETIMEDOUT, [9, 1]),
            Err(Errno(libc::ETIMEDOUT))
        );
        assert_eq!(Errno(libc::ECANCELED).name(), "ECANCELED");
        assert_eq!(Errno(libc::ETIMEDOUT).name(), "ETIMEDOUT");
        assert_eq!(Errno(4095).name(), "E4095");
        assert_eq!(
            Errno(libc::ENOENT).description(),
            "No such file or directory"
        );
    }

    /// With timestamps, val[1] of an op that ran (succeeded or faulted) is
    /// its TSC; ops that did not run have none, and without timestamps no op
    /// has one.
    #[test]
    fn decode_timestamps() {
        let rd = Op::RdMsr { msr: 0x277 };
        let r = OpResult::decode(4, 2, rd, 0, [7, 1234], true);
        assert_eq!(
            (r.index, r.cpu, r.value, r.tsc),
            (4, 2, Ok(Value::U64(7)), Some(1234))
        );
        let r = OpResult::decode(0, 0, rd, -libc::EIO, [0, 99], true);
        assert_eq!((r.value, r.tsc), (Err(Errno(libc::EIO)), Some(99)));
        for errno in [libc::ECANCELED, libc::ETIME] {
            assert_eq!(OpResult::decode(0, 0, rd, -errno, [0, 0], true).tsc, None);
        }
        assert_eq!(OpResult::decode(0, 0, rd, 0, [7, 1234], false).tsc, None);
    }

    #[test]
    fn batch_reuse_and_header() {
        let mut b = Batch::new();
        assert!(b.is_empty());
        assert_eq!(b.push(1, Op::RdTsc), 0);
        assert_eq!(
            b.push(
                0,
                Op::WrMsr {
                    msr: 0x10,
                    value: 1
                }
            ),
            1
        );
        assert!(b.has_writes());
        assert_eq!(b.header().flags, 0);
        b.stop_on_error(true);
        let h = b.header();
        assert_eq!(
            (h.version, h.flags),
            (MSRBATCH_ABI_VERSION, MSRBATCH_F_STOP_ON_ERROR)
        );
        let r: Vec<_> = b.results().map(|r| (r.index, r.cpu)).collect();
        assert_eq!(r, [(0, 1), (1, 0)]);
        b.stop_on_error(false).sync_start(true);
        assert_eq!(b.header().flags, MSRBATCH_F_SYNC_START);
        b.timestamps(true);
        assert_eq!(
            b.header().flags,
            MSRBATCH_F_SYNC_START | MSRBATCH_F_TIMESTAMPS
        );
        assert!(b.syncs_start() && b.has_timestamps() && !b.stops_on_error());
        assert_eq!(b.start_spread(), 0);
        b.set_ran(0, 77);
        assert_eq!(b.start_spread(), 77);
    }
}
