// SPDX-License-Identifier: GPL-2.0

//! The batch engine: validation, grouping by CPU, and execution.
//!
//! A batch flows through three steps:
//!
//! 1. [`check_header`] and [`Plan::new`] validate everything that can be
//!    validated without running anything. A batch whose ops are all on one
//!    CPU (the common case) needs nothing more; one of at most [`FEW`] ops
//!    that spans CPUs needs nothing more either (each CPU runs its ops
//!    where they are in the array), and a bigger one is grouped by CPU (a
//!    stable counting sort). Either way each CPU keeps the array order.
//! 2. [`execute`] runs a one-CPU batch directly with interrupts off when
//!    that is the calling CPU, else with one `smp_call_function_single()`
//!    (which fails with `-ENXIO`, running nothing, if that CPU is offline);
//!    a batch on several CPUs takes the CPU hotplug read lock, checks that
//!    every target CPU is online, and sends one cross-call to all of them at
//!    once with `on_each_cpu_cond_mask()`. The local CPU, when targeted, runs
//!    its share with interrupts off like the others.
//! 3. On each CPU, [`run_sequence`] runs that CPU's ops in array order with
//!    interrupts off, for as long as the CPU's busy
//!    [`Credit`](crate::busy::Credit) allows. It
//!    does not allocate, lock, copy to user space or panic: every lookup is
//!    a `get()`, every sum `wrapping_*`/`saturating_*`.

use crate::busy::{Credit, IrqsOff};
use crate::helpers::local_interrupt_disable;
use crate::insn;
use crate::uapi::{self, opcode, Batch, Op};
use core::ffi::{c_ulong, c_void};
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    bindings,
    cpu::{nr_cpu_ids, CpuId},
    cpumask::{Cpumask, CpumaskVar},
    prelude::*,
    types::Opaque,
};

/// A validation failure, with the index of the op to blame (or
/// [`uapi::NO_INDEX`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub(crate) err: Error,
    pub(crate) index: u32,
}

impl Rejected {
    fn at(err: Error, index: usize) -> Self {
        Rejected {
            err,
            index: u32::try_from(index).unwrap_or(uapi::NO_INDEX),
        }
    }

    fn batch(err: Error) -> Self {
        Rejected {
            err,
            index: uapi::NO_INDEX,
        }
    }
}

impl From<Error> for Rejected {
    fn from(err: Error) -> Self {
        Rejected::batch(err)
    }
}

impl From<kernel::alloc::AllocError> for Rejected {
    fn from(_: kernel::alloc::AllocError) -> Self {
        Rejected::batch(ENOMEM)
    }
}

/// Negative errno values stored in `Op::status`.
pub(crate) mod status {
    use kernel::bindings;

    /// The instruction faulted.
    pub(crate) const EIO: i32 = -(bindings::EIO as i32);
    /// Not run: an earlier op on the same CPU failed and the batch asked to stop.
    pub(crate) const ECANCELED: i32 = -(bindings::ECANCELED as i32);
    /// Not run: the target CPU never ran its share (it cannot go offline while
    /// the batch holds the hotplug lock, so this would be a bug).
    pub(crate) const ENXIO: i32 = -(bindings::ENXIO as i32);
    /// Not run: the CPU's busy credit had nothing left for it
    /// (`MSRBATCH_MAX_CPU_BUSY_NS`, see `busy::Credit`).
    pub(crate) const ETIME: i32 = -(bindings::ETIME as i32);
    /// A POLL saw no change within its timeout (or the share's time).
    pub(crate) const ETIMEDOUT: i32 = -(bindings::ETIMEDOUT as i32);
}

/// Not a flag of the ABI (`check_header` refuses it from user space): set
/// by the module when it plans a confined descriptor's masked writes again
/// (`allowlist.rs`), whose `RMWMSR`s stand for `WRMSR`s and report only their
/// timestamps, so `MSRBATCH_F_TIMESTAMPS` may take their `val[1]`.
pub(crate) const F_MASKED_WRITES: u32 = 1 << 31;
const _: () = assert!(uapi::F_ALL & F_MASKED_WRITES == 0);

/// Not a flag of the ABI either: set by the module on the batches of a
/// descriptor opened without `CAP_SYS_RAWIO` (`accept.rs`), whose shares
/// leave each CPU's busy credit its reserve (`busy::Credit`).
pub(crate) const F_CONFINED: u32 = 1 << 30;
const _: () = assert!(uapi::F_ALL & F_CONFINED == 0);

/// Checks the batch header. (Inlined: out of line, its result was made and
/// tested again by the caller.)
#[inline(always)]
pub(crate) fn check_header(b: &Batch) -> Result<(), Rejected> {
    if b.version != uapi::ABI_VERSION {
        return Err(crate::compat::eprotonosupport().into());
    }
    // `nr_failed`, `err_index`, `out_flags` and `start_spread` are outputs:
    // ignored here.
    if b.flags & !uapi::F_ALL != 0 || b.reserved0 != 0 {
        return Err(EINVAL.into());
    }
    if b.nr_ops == 0 {
        return Err(EINVAL.into());
    }
    if b.nr_ops > uapi::MAX_OPS {
        return Err(E2BIG.into());
    }
    if b.ops == 0 {
        return Err(EFAULT.into());
    }
    Ok(())
}

/// Whether `op` changes machine state (and so needs the write checks).
pub(crate) fn is_write(op: &Op) -> bool {
    matches!(op.op, opcode::WRMSR | opcode::RMWMSR)
}

/// Checks one op's code and operands; CPU existence is checked by the caller.
#[inline]
pub(crate) fn check_op(op: &Op) -> Result {
    if op.op == 0 || op.op > opcode::MAX {
        return Err(crate::compat::eopnotsupp());
    }
    if op.op == opcode::POLL {
        return check_poll(op);
    }
    if op.flags != 0 {
        return Err(EINVAL);
    }
    // Which inputs each op reads: (reg, arg[0], arg[1]). Unused ones must be 0
    // so that a later ABI revision can give them a meaning.
    let (reg, arg0, arg1) = match op.op {
        opcode::RDMSR | opcode::RDPMC => (true, false, false),
        opcode::WRMSR => (true, true, false),
        opcode::RMWMSR => (true, true, true),
        opcode::CPUID => (true, true, false),
        opcode::DELAY => (false, true, false),
        _ => (false, false, false), // RDTSC, RDTSCP, RDCR4
    };
    if (!reg && op.reg != 0) || (!arg0 && op.arg[0] != 0) || (!arg1 && op.arg[1] != 0) {
        return Err(EINVAL);
    }
    if op.op == opcode::CPUID && op.arg[0] > u64::from(u32::MAX) {
        return Err(EINVAL);
    }
    if op.op == opcode::DELAY && op.arg[0] > uapi::MAX_DELAY_NS {
        return Err(ERANGE);
    }
    Ok(())
}

/// Checks a POLL's flags and operands: known flag bits, one source, a
/// timeout of 1 us .. `MSRBATCH_MAX_POLL_NS` (`ERANGE` above), no register
/// for the TSC, `arg[1]` only with `F_EQUAL` and then inside the mask (a
/// value the masked reads can never equal is a mistake, not a wait). Out of
/// line: `check_op` runs for every op of every batch.
#[cold]
#[inline(never)]
fn check_poll(op: &Op) -> Result {
    use uapi::poll;
    let flags = op.flags & ((1 << poll::TIMEOUT_SHIFT) - 1);
    let timeout = poll::timeout_ns(op.flags);
    if flags & !poll::F_ALL != 0 || flags & (poll::F_RDPMC | poll::F_TSC) == poll::F_RDPMC | poll::F_TSC {
        return Err(EINVAL);
    }
    if timeout == 0 || (flags & poll::F_TSC != 0 && op.reg != 0) {
        return Err(EINVAL);
    }
    let equal = flags & poll::F_EQUAL != 0;
    if (!equal && op.arg[1] != 0) || op.arg[1] & !op.arg[0] != 0 {
        return Err(EINVAL);
    }
    if timeout > uapi::MAX_POLL_NS {
        return Err(ERANGE);
    }
    Ok(())
}

/// `op`'s code and flags, in one word: `Plan::new` compares them at once.
#[inline(always)]
fn code_and_flags(op: &Op) -> u32 {
    u32::from(op.op) | u32::from(op.flags) << 16
}

/// Whether `op` can carry a timestamp (`MSRBATCH_F_TIMESTAMPS`, in the batch
/// flags `flags`): it goes into `val[1]`, so not for the ops that return a
/// second value (a masked WRMSR run as an RMWMSR reports none).
fn stamps_fit(op: &Op, flags: u32) -> bool {
    !(matches!(op.op, opcode::RDTSCP | opcode::CPUID | opcode::POLL)
        || (op.op == opcode::RMWMSR && flags & F_MASKED_WRITES == 0))
}

// One op never waits longer than its CPU may (`Plan::one` relies on it).
const _: () = assert!(uapi::MAX_DELAY_NS <= uapi::MAX_CPU_DELAY_NS && uapi::MAX_POLL_NS <= uapi::MAX_CPU_DELAY_NS);

/// How long `op` may keep its CPU waiting, in nanoseconds: a DELAY's
/// delay, a POLL's timeout (both count towards `MSRBATCH_MAX_CPU_DELAY_NS`).
fn wait_ns(op: &Op) -> u64 {
    match op.op {
        opcode::DELAY => op.arg[0],
        opcode::POLL => uapi::poll::timeout_ns(op.flags),
        _ => 0,
    }
}

/// The ops of one CPU, in a batch grouped by CPU: `order[start..start + len]`
/// of its [`Targets::Many`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuRun {
    pub(crate) cpu: u32,
    pub(crate) start: u32,
    pub(crate) len: u32,
}

/// A batch of up to this many ops on several CPUs is planned and run without
/// an allocation and without grouping: each CPU runs its ops where they are
/// in the array ([`Targets::Few`]).
pub(crate) const FEW: usize = 32;

/// Where a validated batch runs.
pub(crate) enum Targets {
    /// Every op on this one CPU: array order is execution order, and no
    /// grouping is needed (the common case, and the fast path).
    One(u32),
    /// At most [`FEW`] ops on several CPUs, not grouped: each CPU runs its
    /// ops where they are in the array ([`few_outcomes`] finds each CPU's
    /// span of the array when the batch runs).
    Few,
    /// More ops on several CPUs, grouped.
    Many {
        /// Op indices, grouped by CPU (ascending), array order within a CPU.
        order: KVVec<u32>,
        /// One entry per target CPU, sorted by CPU number.
        runs: KVVec<CpuRun>,
    },
}

/// The index in `ops` of `op`, one of them, worked out from its address
/// (out of line: where it is called, the loop's compiler counted the ops
/// beside them, an instruction an op, to know it without a division).
#[inline(never)]
fn index_of(ops: &[Op], op: &Op) -> usize {
    (core::ptr::from_ref(op) as usize).wrapping_sub(ops.as_ptr() as usize) / size_of::<Op>()
}

/// The per-CPU delay sums of [`Plan::new`], while it validates.
enum Sums {
    /// Every op so far on the first op's CPU: their delay sum.
    One(u64),
    /// A batch of at most [`FEW`] ops, on several CPUs: each op that waits
    /// sums the waits of the earlier ones of its CPU (a few ops: no table).
    Few,
    /// A bigger one: per CPU number, room for its op count (which
    /// [`Plan::group`] counts) and its delay sum.
    Table(KVVec<(u32, u64)>),
}

/// A validated batch: where its ops run and what they do, as
/// [`execute`] and the write checks (`policy.rs`) read it.
///
/// # Invariants
///
/// Only [`Plan::one`] (one op) and [`Plan::many`] (more) make one, which
/// [`Plan::new`] and [`plan`] call, from the ops it describes (of which a
/// run changes only `status` and `val`):
///
/// - `targets` is `One(cpu)` when every op is on `cpu`. Otherwise, for at
///   most [`FEW`] ops on at least two CPUs, `Few`; for more,
///   `Many`, whose `order` holds every index below the number of ops exactly
///   once, grouped by CPU into `runs` (sorted by CPU; each the slice
///   `order[start..start + len]`, the slices tiling `order`).
/// - `first_write` is the index of the first WRMSR or RMWMSR, `nr_writes`
///   their number, `uniform` the code of every op if they all have the same,
///   `flags` the batch's `MSRBATCH_F_*` flags.
pub(crate) struct Plan {
    targets: Targets,
    first_write: Option<u32>,
    nr_writes: u32,
    uniform: Option<u16>,
    flags: u32,
}

impl Plan {
    /// Whether the batch writes MSRs.
    pub(crate) fn has_writes(&self) -> bool {
        self.first_write.is_some()
    }

    /// The index of the first op that writes (WRMSR or RMWMSR), if any.
    pub(crate) fn first_write(&self) -> Option<u32> {
        self.first_write
    }

    /// How many ops write.
    pub(crate) fn nr_writes(&self) -> u32 {
        self.nr_writes
    }

    /// Drops the plan, in line: only a grouped plan holds memory. (Its
    /// drop glue was a call, and a test of the variant, on every batch.)
    #[inline(always)]
    pub(crate) fn free(self) {
        match self.targets {
            Targets::Many { order, runs } => {
                drop(order);
                drop(runs);
            }
            // Nothing to free (the rest are plain values).
            targets @ (Targets::One(_) | Targets::Few) => core::mem::forget(targets),
        }
    }

    /// Validates `ops` (in array order: the first invalid op is the one
    /// named) and, for more than [`FEW`] ops on several CPUs, groups them by
    /// CPU. `nr_cpus` is `nr_cpu_ids` and `possible` tells whether a CPU
    /// number below it exists. Allocates only for such a batch (twice: a
    /// table per CPU number, and the grouping). Only the KUnit tests call
    /// it, with CPUs of their own: [`plan`] and [`plan_many`] take it apart.
    #[cfg(CONFIG_KUNIT = "y")]
    #[inline(always)]
    pub(crate) fn new(
        ops: &[Op],
        flags: u32,
        nr_cpus: u32,
        possible: impl Fn(u32) -> bool,
    ) -> Result<Plan, Rejected> {
        if let [op] = ops {
            return Self::one(op, flags, nr_cpus, possible);
        }
        Self::many(ops, flags, nr_cpus, possible)
    }

    /// [`Plan::new`] for a batch of any number of ops but one (for which
    /// [`plan`] does not call it). The commonest batch, plain reads (see
    /// below) only, is checked here in a loop that keeps nothing per op
    /// but its CPU; at the first op of another kind, [`Plan::checked`]
    /// goes on from that op with all the checks. (With every check in one
    /// loop, a 4-CPU batch of four reads took 227 instructions to plan.)
    #[inline(always)]
    fn many(ops: &[Op], flags: u32, nr_cpus: u32, possible: impl Fn(u32) -> bool) -> Result<Plan, Rejected> {
        const RDMSR: u32 = opcode::RDMSR as u32;
        const RDPMC: u32 = opcode::RDPMC as u32;
        // The CPU of the previous op, known to exist (batches name few CPUs,
        // usually one after the other: look each up once per run); before
        // the first op, no CPU number (which are `u32`s).
        let mut known_cpu = u64::MAX;
        // The bits in which the CPUs so far differ from the first op's: 0
        // while they are all on it.
        let mut other = 0u32;
        // The common op, a read of an MSR or a PMC with the code of the
        // first op, no flags and no `arg`, passes every check of an op and
        // changes nothing that is counted but, on a new CPU, the CPU's.
        // `plain` is its code and flags as `code_and_flags` reads them;
        // `start`, the first op that is not one.
        let start = 'plain: {
            let (plain, first_cpu) = match ops.first() {
                Some(op) if matches!(code_and_flags(op), RDMSR | RDPMC) => (code_and_flags(op), op.cpu),
                // All the checks from the first op.
                _ => return Self::checked_all(ops, flags, nr_cpus, possible),
            };
            for op in ops {
                // (Each op's index is worked out from its address where it
                // is needed, in `index_of`: counted beside the ops, it cost
                // the loop an instruction an op.)
                if code_and_flags(op) != plain || op.arg != [0, 0] {
                    break 'plain index_of(ops, op);
                }
                if u64::from(op.cpu) != known_cpu {
                    if op.cpu >= nr_cpus || !possible(op.cpu) {
                        return Err(Rejected::at(ENODEV, index_of(ops, op)));
                    }
                    known_cpu = u64::from(op.cpu);
                    other |= op.cpu ^ first_cpu;
                }
            }
            // Every op a plain read of the first op's code: none writes or
            // waits. (Made in each case, not from a `Targets` made first,
            // which was copied whole, a grouped one's room too: 15
            // instructions.)
            // INVARIANT: `targets` is `One` for a batch on one CPU, `Few`
            // for at most `FEW` ops on several, else grouped by `group`; no
            // op writes, and every op has the first's code.
            let plan = |targets| Plan {
                targets,
                first_write: None,
                nr_writes: 0,
                uniform: Some(plain as u16),
                flags,
            };
            return if other == 0 {
                Ok(plan(Targets::One(first_cpu)))
            } else if ops.len() <= FEW {
                Ok(plan(Targets::Few))
            } else {
                Self::plain_grouped(ops, flags, nr_cpus)
            };
        };
        // A mixed batch: all the checks from `start` on.
        Self::checked_from(ops, start, (known_cpu, other != 0), flags, nr_cpus, possible)
    }

    /// [`Plan::checked`] from the first op, out of line: in line, or
    /// called with the ops' start and what [`Plan::many`] found of those
    /// before it, its loop had fewer registers and took 7 instructions an
    /// op more (a batch of 4096 RDTSCs).
    #[inline(never)]
    fn checked_all(ops: &[Op], flags: u32, nr_cpus: u32, possible: impl Fn(u32) -> bool) -> Result<Plan, Rejected> {
        Self::checked(ops, 0, (u64::MAX, false), flags, nr_cpus, possible)
    }

    /// [`Plan::checked`] from op `start`, out of line (a batch that begins
    /// with plain reads and has other ops).
    #[inline(never)]
    fn checked_from(
        ops: &[Op],
        start: usize,
        seen: (u64, bool),
        flags: u32,
        nr_cpus: u32,
        possible: impl Fn(u32) -> bool,
    ) -> Result<Plan, Rejected> {
        Self::checked(ops, start, seen, flags, nr_cpus, possible)
    }

    /// [`Plan::many`]'s plan of more than [`FEW`] plain reads of one code on
    /// several CPUs: grouped, the per-CPU table holding no delay sum but 0.
    /// (Out of line: its allocations made the frame of every batch's plan
    /// bigger.)
    #[inline(never)]
    fn plain_grouped(ops: &[Op], flags: u32, nr_cpus: u32) -> Result<Plan, Rejected> {
        let table = KVVec::from_elem((0u32, 0u64), nr_cpus as usize, GFP_KERNEL_ACCOUNT)?;
        // INVARIANT: grouped by `group`; no op writes, and every op has the
        // first's code (`Plan::many`).
        Ok(Plan {
            targets: Self::group(ops, table)?,
            first_write: None,
            nr_writes: 0,
            uniform: ops.first().map(|op| op.op),
            flags,
        })
    }

    /// [`Plan::many`] from op `start` of `ops`, the first that is not a
    /// plain read, every check made of each op; `(known_cpu, several)` are
    /// what [`Plan::many`] found of the ops before it: the CPU of the last
    /// (`u64::MAX` if none) and whether one is not on the first op's CPU.
    #[inline(always)]
    fn checked(
        ops: &[Op],
        start: usize,
        (mut known_cpu, several): (u64, bool),
        flags: u32,
        nr_cpus: u32,
        possible: impl Fn(u32) -> bool,
    ) -> Result<Plan, Rejected> {
        let stamps = flags & uapi::F_TIMESTAMPS != 0;
        let first_cpu = ops.first().map_or(0, |op| op.cpu);
        let mut uniform = SameCode::of(ops);
        // The ops before `start` are plain reads: they waited nothing, and
        // on several CPUs their CPUs' sums are 0.
        let mut sums = match (several, ops.len() <= FEW) {
            (false, _) => Sums::One(0),
            (true, true) => Sums::Few,
            (true, false) => Sums::Table(KVVec::from_elem((0u32, 0u64), nr_cpus as usize, GFP_KERNEL_ACCOUNT)?),
        };
        let mut first_write = None;
        let mut nr_writes = 0u32;
        // As in `Plan::many`.
        let plain = ops.first().map_or(u64::MAX, |op| match op.op {
            opcode::RDMSR | opcode::RDPMC => u64::from(op.op),
            _ => u64::MAX,
        });
        let base = ops.as_ptr() as usize;
        let index = |op: &Op| (core::ptr::from_ref(op) as usize).wrapping_sub(base) / size_of::<Op>();
        for op in ops.get(start..).unwrap_or(&[]) {
            let is_plain = u64::from(code_and_flags(op)) == plain && op.arg == [0, 0];
            if is_plain && u64::from(op.cpu) == known_cpu {
                continue;
            }
            if !is_plain {
                check_op(op).map_err(|e| Rejected::at(e, index(op)))?;
                // Nothing of this is computed per op without timestamps.
                if stamps && !stamps_fit(op, flags) {
                    return Err(Rejected::at(EINVAL, index(op)));
                }
            }
            if u64::from(op.cpu) != known_cpu {
                if op.cpu >= nr_cpus || !possible(op.cpu) {
                    return Err(Rejected::at(ENODEV, index(op)));
                }
                known_cpu = u64::from(op.cpu);
                if let Sums::One(one_delay) = sums {
                    if op.cpu != first_cpu {
                        sums = if ops.len() <= FEW {
                            Sums::Few
                        } else {
                            let mut table = KVVec::from_elem((0u32, 0u64), nr_cpus as usize, GFP_KERNEL_ACCOUNT)?;
                            table[first_cpu as usize].1 = one_delay;
                            Sums::Table(table)
                        };
                    }
                }
                if is_plain {
                    continue;
                }
            }
            let d = wait_ns(op);
            let sum = match &mut sums {
                Sums::One(one_delay) => {
                    *one_delay += d;
                    *one_delay
                }
                // Each wait was bounded by `check_op`, and there are at most
                // `FEW` of them: no overflow.
                Sums::Few if d != 0 => ops.iter().take(index(op) + 1).filter(|o| o.cpu == op.cpu).map(wait_ns).sum(),
                Sums::Few => 0,
                // (The ops of each CPU are counted by `group`: the plain
                // ops skip this.)
                Sums::Table(table) => {
                    let delay = &mut table[op.cpu as usize].1;
                    *delay += d;
                    *delay
                }
            };
            if sum > uapi::MAX_CPU_DELAY_NS {
                return Err(Rejected::at(ERANGE, index(op)));
            }
            if is_write(op) {
                first_write = first_write.or(Some(index(op) as u32));
                nr_writes += 1;
            }
            uniform.see(op);
        }

        let targets = match sums {
            Sums::One(_) => Targets::One(first_cpu),
            Sums::Few => Targets::Few,
            Sums::Table(table) => Self::group(ops, table)?,
        };
        // INVARIANT: `targets` is `One` for a batch on one CPU, `Few` for
        // at most `FEW` ops on several, else grouped by `group`; the rest
        // was counted from the ops above.
        Ok(Plan {
            targets,
            first_write,
            nr_writes,
            uniform: uniform.code(),
            flags,
        })
    }

    /// [`Plan::new`] for a batch of one op, `op`: the same checks, in the
    /// same order, without the bookkeeping of several ops and CPUs.
    #[inline(always)]
    fn one(op: &Op, flags: u32, nr_cpus: u32, possible: impl Fn(u32) -> bool) -> Result<Plan, Rejected> {
        // A plain read passes the checks of an op (as in `Plan::new`).
        const RDMSR: u32 = opcode::RDMSR as u32;
        const RDPMC: u32 = opcode::RDPMC as u32;
        let plain = matches!(code_and_flags(op), RDMSR | RDPMC) && op.arg == [0, 0];
        if !plain {
            check_op(op).map_err(|e| Rejected::at(e, 0))?;
            if flags & uapi::F_TIMESTAMPS != 0 && !stamps_fit(op, flags) {
                return Err(Rejected::at(EINVAL, 0));
            }
        }
        if op.cpu >= nr_cpus || !possible(op.cpu) {
            return Err(Rejected::at(ENODEV, 0));
        }
        // One op's wait, bounded by `check_op`, is within the CPU's (the
        // const assertion after `stamps_fit`): no sum to check.
        let write = is_write(op);
        // INVARIANT: one op, on `op.cpu`; the rest is counted from it.
        Ok(Plan {
            targets: Targets::One(op.cpu),
            first_write: write.then_some(0),
            nr_writes: u32::from(write),
            uniform: Some(op.op),
            flags,
        })
    }

    /// Groups `ops` by CPU (a stable counting sort); `table` has a zero
    /// count for every CPU number (and each CPU's delay sum, unused here).
    fn group(ops: &[Op], mut table: KVVec<(u32, u64)>) -> Result<Targets, Rejected> {
        // Every CPU number was checked below `nr_cpus`, the table's length.
        for op in ops {
            if let Some((count, _)) = table.get_mut(op.cpu as usize) {
                *count += 1;
            }
        }
        let nr_runs = table.iter().filter(|(n, _)| *n != 0).count();
        let mut runs = KVVec::from_elem(CpuRun::default(), nr_runs, GFP_KERNEL_ACCOUNT)?;
        // Prefix sums: `table[cpu].0` becomes the next free slot of that CPU.
        let mut start = 0u32;
        let mut next = 0;
        for (cpu, (n, _)) in table.iter_mut().enumerate() {
            if *n == 0 {
                continue;
            }
            if let Some(run) = runs.get_mut(next) {
                *run = CpuRun {
                    cpu: cpu as u32,
                    start,
                    len: *n,
                };
            }
            next += 1;
            let len = *n;
            *n = start;
            start += len;
        }

        let mut order = KVVec::from_elem(0u32, ops.len(), GFP_KERNEL_ACCOUNT)?;
        for (i, op) in ops.iter().enumerate() {
            let slot = &mut table[op.cpu as usize].0;
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
        Ok(Targets::Many { order, runs })
    }
}

/// How every CPU runs its ops.
#[derive(Clone, Copy)]
struct Mode {
    stop_on_error: bool,
    /// `MSRBATCH_F_TIMESTAMPS`.
    stamps: bool,
    /// How long after its start the sequence may start ops, in TSC ticks:
    /// `MSRBATCH_MAX_CPU_BUSY_NS` in [`Mode::of`], from which each CPU's
    /// share gets what its [`Credit`](crate::busy::Credit) allows.
    busy_tsc: u64,
    /// [`F_CONFINED`]: the shares may not draw the credit's reserve.
    confined: bool,
    /// The TSC the share's time counts from (read once, by [`run_share`]).
    start: u64,
    /// The code of every op, if they share one. Only read codes get a loop
    /// of their own: a wrong one makes wrong values, never a write.
    uniform: Option<u16>,
}

impl Mode {
    #[inline(always)]
    fn of(plan: &Plan) -> Self {
        Mode {
            stop_on_error: plan.flags & uapi::F_STOP_ON_ERROR != 0,
            stamps: plan.flags & uapi::F_TIMESTAMPS != 0,
            busy_tsc: crate::busy::budget_tsc(),
            confined: plan.flags & F_CONFINED != 0,
            start: 0,
            uniform: plan.uniform,
        }
    }
}

/// The rendezvous of a `MSRBATCH_F_SYNC_START` batch: every CPU arrives, the
/// last to arrive says go; a CPU that waits longer than the timeout calls the
/// batch off. One atomic state decides, so all CPUs agree: all run, or none.
struct Rendezvous {
    arrived: AtomicU32,
    /// `WAITING`, `GO` or `ABORT`.
    state: AtomicU32,
    expected: u32,
    timeout_tsc: u64,
}

const WAITING: u32 = 0;
const GO: u32 = 1;
const ABORT: u32 = 2;

impl Rendezvous {
    fn new(expected: u32) -> Self {
        Rendezvous {
            arrived: AtomicU32::new(0),
            state: AtomicU32::new(WAITING),
            expected,
            timeout_tsc: crate::helpers::ns_to_tsc(uapi::SYNC_TIMEOUT_NS),
        }
    }

    /// Calls the start off without arriving (a CPU with no busy credit).
    fn call_off(&self) {
        let _ = self.state.compare_exchange(WAITING, ABORT, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Arrives and waits (interrupts off), calling the start off once the
    /// timeout or `budget`, what this CPU's share may take, has passed since
    /// `t0`; whether to run.
    fn wait(&self, t0: u64, budget: u64) -> bool {
        let limit = self.timeout_tsc.min(budget);
        if self.arrived.fetch_add(1, Ordering::AcqRel).wrapping_add(1) == self.expected {
            let _ = self.state.compare_exchange(WAITING, GO, Ordering::AcqRel, Ordering::Acquire);
        }
        loop {
            match self.state.load(Ordering::Acquire) {
                GO => return true,
                ABORT => return false,
                _ => {}
            }
            if insn::clock().wrapping_sub(t0) >= limit {
                let _ = self.state.compare_exchange(WAITING, ABORT, Ordering::AcqRel, Ordering::Acquire);
            }
            core::hint::spin_loop();
        }
    }
}

/// How each CPU of a batch on several CPUs finds its ops: its share `k`,
/// whose [`Outcome`] names its CPU ([`Shared::find`]).
#[derive(Clone, Copy)]
enum Shares<'a> {
    /// A [`Targets::Few`]'s: share `k`'s ops are those of its outcome's CPU
    /// among the ops of its span, `first..end` ([`few_outcomes`]).
    Few,
    /// A [`Targets::Many`]'s: share `k` is `runs[k]`, its ops the indices
    /// `order[start..start + len]`.
    Grouped { order: &'a [u32], runs: &'a [CpuRun] },
}

impl Shares<'_> {
    /// The index of the first op of share `k`, whose outcome is `o`, of
    /// the batch `ops`.
    #[inline(always)]
    fn first_op(&self, ops: &[Op], k: usize, o: &Outcome) -> Option<u32> {
        match self {
            Shares::Few => Some(o.span(ops).start as u32),
            Shares::Grouped { order, runs } => order.get(runs.get(k)?.start as usize).copied(),
        }
    }

    /// Calls `f` with each op of share `k`, whose outcome is `o`, of the
    /// batch `ops`, in array order.
    fn for_each_op(&self, ops: &mut [Op], k: usize, o: &Outcome, mut f: impl FnMut(&mut Op)) {
        match self {
            Shares::Few => {
                let span = ops.get_mut(o.span(ops)).unwrap_or(&mut []);
                span.iter_mut().filter(|op| op.cpu == o.cpu).for_each(f);
            }
            Shares::Grouped { order, runs } => {
                if let Some(mine) = runs.get(k).and_then(|r| run_of(order, r)) {
                    for &i in mine {
                        if let Some(op) = ops.get_mut(i as usize) {
                            f(op);
                        }
                    }
                }
            }
        }
    }
}

/// The op indices of `run` in `order`.
fn run_of<'a>(order: &'a [u32], run: &CpuRun) -> Option<&'a [u32]> {
    let start = run.start as usize;
    order.get(start..start.checked_add(run.len as usize)?)
}

/// The first `n` outcomes of `buf`.
///
/// # Safety
///
/// They are initialised; `n` is at most `buf.len()`.
#[inline(always)]
unsafe fn made(buf: &[MaybeUninit<Outcome>], n: usize) -> &[Outcome] {
    // SAFETY: By our own requirements the first `n` items are initialised,
    // and `MaybeUninit<Outcome>` has the layout of `Outcome`.
    unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<Outcome>(), n) }
}

/// Outcomes for the CPUs of `cpus`, made in `buf` (whose items were
/// uninitialised), as many as both have.
#[inline(always)]
fn fill(buf: &mut [MaybeUninit<Outcome>], cpus: impl Iterator<Item = u32>) -> &[Outcome] {
    let mut n = 0;
    for (item, cpu) in buf.iter_mut().zip(cpus) {
        item.write(Outcome::new(cpu, core::ptr::null_mut()));
        n += 1;
    }
    // SAFETY: The first `n` items were initialised just above.
    unsafe { made(buf, n) }
}

/// The shares of a [`Targets::Few`] batch, the `nr` ops at `ops` (at most
/// [`FEW`] of them are looked at), made in `buf`: one outcome per CPU, in
/// the order of the CPUs' first ops, each with the span of the array from
/// its CPU's first op to past its last. One pass over the ops, when the
/// batch runs: a plan that kept each CPU's ops (a chain through the array)
/// was built in a pass of its own and moved with the plan, and each CPU
/// walked its chain. Also, if every CPU of them is below 64, their mask's
/// first word (bit `c` for CPU `c`; [`BatchMask::set_word`]).
///
/// # Safety
///
/// `ops` is valid for reads of `nr` ops, and their `cpu`s do not change
/// while the outcomes are used.
#[inline(always)]
unsafe fn few_outcomes(ops: *mut Op, nr: usize, buf: &mut [MaybeUninit<Outcome>; FEW]) -> (&[Outcome], Option<u64>) {
    let end = ops.wrapping_add(nr.min(FEW));
    // Outcomes made so far (at most one per op, so at most `FEW`: `% FEW`
    // below tells the compiler so, for no bounds check), and the one of the
    // op before.
    let (mut n, mut k) = (0usize, 0usize);
    // Bit `cpu % 64` set for the CPU of each outcome: a CPU whose bit is
    // clear is new without a look through the others.
    let mut seen = 0u64;
    // The CPUs' numbers ORed: below 64 if every one is, when `seen` has
    // exactly their bits.
    let mut high = 0u32;
    let mut at = ops;
    // Each turn, a run of ops of one CPU.
    while at != end {
        // SAFETY: `at` is one of the ops (by our own requirements).
        let cpu = unsafe { (*at).cpu };
        // The span of the share of the run before reaches this op; a look
        // through the outcomes finds this CPU's, if it was seen (batches
        // name few CPUs, usually one after the other).
        if n != 0 {
            // SAFETY: Outcome `k` is made (`k < n`).
            unsafe { buf[k % FEW].assume_init_mut() }.end = at;
        }
        let bit = 1u64 << (cpu % 64);
        let known = if seen & bit != 0 {
            // SAFETY: The first `n` are made.
            unsafe { made(buf, n) }.iter().position(|o| o.cpu == cpu)
        } else {
            None
        };
        if let Some(j) = known {
            k = j;
        } else {
            seen |= bit;
            high |= cpu;
            k = n % FEW;
            buf[k].write(Outcome::new(cpu, at));
            n = n.wrapping_add(1);
        }
        // The rest of the run: one comparison an op.
        at = at.wrapping_add(1);
        // SAFETY: `at` is one of the ops (checked against `end` first).
        while at != end && unsafe { (*at).cpu } == cpu {
            at = at.wrapping_add(1);
        }
    }
    if n != 0 {
        // SAFETY: Outcome `k` is made (`k < n`).
        unsafe { buf[k % FEW].assume_init_mut() }.end = end;
    }
    // SAFETY: The first `n` are made.
    (unsafe { made(buf, n) }, (high < 64).then_some(seen))
}

/// The ops of one CPU among a span of a batch's ops, in array order: what
/// its cross-call runs of a [`Targets::Few`] batch.
///
/// # Invariants
///
/// `at..end` is a span of the batch's ops (`at <= end`), of which those of
/// CPU `cpu` are this CPU's only while the cross-call runs; no CPU writes
/// any op's `cpu` meanwhile.
struct OfCpu<'a> {
    at: *mut Op,
    end: *mut Op,
    cpu: u32,
    _ops: PhantomData<&'a mut Op>,
}

impl<'a> Iterator for OfCpu<'a> {
    type Item = &'a mut Op;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut Op> {
        while self.at != self.end {
            let p = self.at;
            // INVARIANT: One op further, at most to `end`.
            self.at = p.wrapping_add(1);
            // SAFETY: `p` is an op of the span (the type invariants), valid
            // for reads. Only its `cpu` is read, through the raw pointer:
            // the CPU whose op it is, which may hold a `&mut` to it while
            // it runs, writes only its `status` and `val`, never `cpu`, so
            // no byte read here is written meanwhile (no data race). That
            // `&mut` covers `cpu` too: a read of bytes it never writes is
            // allowed beside it under Tree Borrows, not under Stacked
            // Borrows while it is a protected argument (noted in
            // design.md; a fix writes the outputs through raw pointers).
            if unsafe { (&raw const (*p).cpu).read() } == self.cpu {
                // SAFETY: An op of this CPU, which no other CPU touches
                // while the cross-call runs (the type invariants).
                return Some(unsafe { &mut *p });
            }
        }
        None
    }
}

/// What every CPU of one batch reads: shared, read-only, except for the ops,
/// which each CPU writes only at its own indices, and its own outcome.
struct Shared<'a> {
    ops: *mut Op,
    nr_ops: usize,
    shares: Shares<'a>,
    mode: Mode,
    /// Each share's CPU and outcome, by share index: one per share, in
    /// CPU order for [`Shares::Grouped`] (as its `runs`).
    outcomes: &'a [Outcome],
    sync: Option<&'a Rendezvous>,
}

impl Shared<'_> {
    /// The share of CPU `cpu`, if it has one: its index and outcome. (The
    /// CPU numbers are looked up beside the outcomes, which the share then
    /// writes: for a few CPUs, a look along one array, and no second look
    /// for the outcome.)
    #[inline(always)]
    fn find(&self, cpu: u32) -> Option<(usize, &Outcome)> {
        let k = match self.shares {
            Shares::Few => self.outcomes.iter().position(|o| o.cpu == cpu)?,
            Shares::Grouped { .. } => self.outcomes.binary_search_by_key(&cpu, |o| o.cpu).ok()?,
        };
        Some((k, self.outcomes.get(k)?))
    }
}

/// A share's CPU, and what that CPU reports back to the caller of the
/// cross-call.
///
/// # Invariants
///
/// For [`Shares::Few`] (made by [`few_outcomes`]), `first..end` is a span of
/// the batch's ops, `first` the first op of `cpu` and `end` past its last
/// (the cross-call runs the ops of `cpu` in it, [`OfCpu`]).
struct Outcome {
    /// The TSC its ops started at, once it ran.
    start: AtomicU64,
    /// Its ops whose status is not 0, once it ran; else [`REFUSED`] (its
    /// CPU's credit refused it) or [`UNRUN`]. (Markers here, not in `start`,
    /// which takes any TSC value: root may write the TSC.)
    failed: AtomicU32,
    /// The CPU that runs the share (the cross-call finds its share by it;
    /// C reads it to make the cross-call's mask).
    cpu: u32,
    /// For [`Shares::Few`]: the share's ops are those of `cpu` from op
    /// `first` to before `end`, its first op and past its last
    /// ([`few_outcomes`]; null for [`Shares::Grouped`]).
    first: *mut Op,
    end: *mut Op,
}

impl Outcome {
    /// A share on `cpu`, not run yet, whose first op is at `first` (and,
    /// so far, its last).
    #[inline(always)]
    fn new(cpu: u32, first: *mut Op) -> Self {
        Outcome {
            start: AtomicU64::new(0),
            failed: AtomicU32::new(UNRUN),
            cpu,
            first,
            end: first,
        }
    }

    /// The indices of the span `first..end` in the batch `ops`, which
    /// [`few_outcomes`] made it of (empty if it is not of `ops`).
    fn span(&self, ops: &[Op]) -> core::ops::Range<usize> {
        let base = ops.as_ptr() as usize;
        let at = |p: *mut Op| (p as usize).wrapping_sub(base) / size_of::<Op>();
        let (first, end) = (at(self.first), at(self.end));
        if first <= end && end <= ops.len() {
            first..end
        } else {
            0..0
        }
    }
}

/// [`Outcome::failed`] of a share its CPU's credit refused.
const REFUSED: u32 = u32::MAX - 1;
/// [`Outcome::failed`] of a share before its CPU ran it (after the
/// cross-call: never, which the hotplug lock rules out; its ops get
/// `-ENXIO`).
const UNRUN: u32 = u32::MAX;
// No share has as many ops as the markers.
const _: () = assert!(uapi::MAX_OPS < REFUSED);

/// Where a run puts each op's outputs, its status and values: into the op
/// itself ([`InPlace`]), or straight into a prepared batch's results
/// ([`ToResults`]), which then need no copy after the run.
trait Outputs: Copy {
    /// Where one op's outputs go, besides the op.
    type Slot;

    /// The ops of `ops`, in order, each with its slot.
    fn pair<'a>(self, ops: &'a mut [Op]) -> impl Iterator<Item = (&'a mut Op, Self::Slot)>;

    /// `op`'s status and values, into `slot`, `op`'s.
    fn put(self, op: &mut Op, slot: Self::Slot, status: i32, val: [u64; 2]);
}

/// Outputs into the ops themselves.
#[derive(Clone, Copy)]
struct InPlace;

impl Outputs for InPlace {
    type Slot = ();

    #[inline(always)]
    fn pair<'a>(self, ops: &'a mut [Op]) -> impl Iterator<Item = (&'a mut Op, ())> {
        in_place(ops.iter_mut())
    }

    #[inline(always)]
    fn put(self, op: &mut Op, (): (), status: i32, val: [u64; 2]) {
        op.status = status;
        op.val = val;
    }
}

/// The ops of `ops`, for [`InPlace`].
#[inline(always)]
fn in_place<'a>(ops: impl Iterator<Item = &'a mut Op>) -> impl Iterator<Item = (&'a mut Op, ())> {
    ops.map(|op| (op, ()))
}

/// Outputs into the results of a prepared batch (`prepared.rs`): op `i` of
/// a run's ops writes result `i` (`struct msrbatch_result`: `status`,
/// `reserved` 0, `val`), through raw pointers, since user space may map and
/// read the results at any time. The op's own `status` and `val` are left
/// as they were. The loop that runs the ops walks the two arrays side by
/// side ([`Outputs::pair`]): no result is found from its op.
///
/// Not `Send` (`Opaque` is not `Sync`): a run hands it to the CPU it
/// cross-calls inside its job ([`OneCpu`]), which it waits for.
#[derive(Clone, Copy)]
pub(crate) struct ToResults<'a> {
    /// One per op of the run.
    results: &'a [Opaque<uapi::OpResult>],
}

impl ToResults<'_> {
    /// The `nr` results at `results`.
    ///
    /// # Safety
    ///
    /// `results` is non-null, aligned and valid for reads and writes of `nr`
    /// results for the lifetime the value is given.
    pub(crate) unsafe fn new(results: *mut uapi::OpResult, nr: usize) -> Self {
        // SAFETY: By our own requirements; an `Opaque<T>` has the layout of
        // a `T`, and any value and any concurrent access is allowed in it.
        let results = unsafe { core::slice::from_raw_parts(results.cast::<Opaque<uapi::OpResult>>(), nr) };
        ToResults { results }
    }

    /// The number of results.
    pub(crate) fn len(self) -> usize {
        self.results.len()
    }

    /// Puts the outputs the ops of `ops` hold (a run's in place) into their
    /// results, op `i`'s into result `i`, for as many as both have.
    pub(crate) fn publish(self, ops: &[Op]) {
        for (op, slot) in ops.iter().zip(self.results) {
            write_result(slot, op.status, op.val);
        }
    }
}

/// Writes one result: `status` (with `reserved`, 0) and `val`.
#[inline(always)]
fn write_result(slot: &Opaque<uapi::OpResult>, status: i32, val: [u64; 2]) {
    let r = slot.get().cast::<u64>();
    // SAFETY: `slot` is one result (a reference), its three words (the
    // assertion below) written through raw pointers, since user space may
    // read them at any time; the first is `status` then `reserved` (0),
    // little-endian.
    unsafe {
        r.write_volatile(u64::from(status as u32));
        r.add(1).write_volatile(val[0]);
        r.add(2).write_volatile(val[1]);
    }
}

/// A result's fields, as the three words [`write_result`] writes.
const _: () = assert!(
    size_of::<uapi::OpResult>() == 24
        && core::mem::offset_of!(uapi::OpResult, status) == 0
        && core::mem::offset_of!(uapi::OpResult, reserved) == 4
        && core::mem::offset_of!(uapi::OpResult, val) == 8
);

/// [`ToResults::pair`]'s iterator: the two arrays walked with one bound,
/// the ops'. (A `zip` of the two keeps an index beside both: three more
/// instructions an op, a sixth of a prepared run's.)
///
/// # Invariants
///
/// `results` is the first of at least as many results as `ops` has ops
/// left, each valid for `'r`.
struct WithResults<'a, 'r> {
    ops: core::slice::IterMut<'a, Op>,
    results: *const Opaque<uapi::OpResult>,
    _results: PhantomData<&'r [Opaque<uapi::OpResult>]>,
}

impl<'a, 'r> Iterator for WithResults<'a, 'r> {
    type Item = (&'a mut Op, &'r Opaque<uapi::OpResult>);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let op = self.ops.next()?;
        // SAFETY: An op was left, so a result is (the type invariants),
        // valid for `'r`.
        let result = unsafe { &*self.results };
        // INVARIANT: One op fewer is left, and one result fewer is ahead (the
        // pointer goes at most one past the last result).
        self.results = self.results.wrapping_add(1);
        Some((op, result))
    }
}

impl<'r> Outputs for ToResults<'r> {
    type Slot = &'r Opaque<uapi::OpResult>;

    /// Op `i` with result `i`, for as many ops as there are results: ops
    /// past the last result would neither run nor get a status, so a run
    /// checks that they are as many ([`execute_into`], before any op runs:
    /// no assertion here, which would panic in a cross-call).
    #[inline(always)]
    fn pair<'a>(self, ops: &'a mut [Op]) -> impl Iterator<Item = (&'a mut Op, &'r Opaque<uapi::OpResult>)> {
        let n = ops.len().min(self.results.len());
        // INVARIANT: `results` has `n` results, one per op of `ops[..n]`.
        WithResults {
            ops: ops[..n].iter_mut(),
            results: self.results.as_ptr(),
            _results: PhantomData,
        }
    }

    #[inline(always)]
    fn put(self, _: &mut Op, slot: &'r Opaque<uapi::OpResult>, status: i32, val: [u64; 2]) {
        write_result(slot, status, val);
    }
}

/// Runs one op on the current CPU as op `code` (its own code, or the same
/// value as a constant, for a loop specialised to one code); returns its
/// status and values.
///
/// # Safety
///
/// If `code` is `WRMSR` or `RMWMSR`, the write it makes to `op.reg` is
/// allowed (see [`insn::wrmsr`]).
#[inline(always)]
unsafe fn run_op(code: u16, op: &Op, busy: (u64, u64)) -> (i32, [u64; 2]) {
    let result: insn::InsnResult<[u64; 2]> = match code {
        opcode::RDMSR => insn::rdmsr(op.reg).map(|v| [v, 0]),
        // SAFETY: `code` is WRMSR: by the function's requirements.
        opcode::WRMSR => unsafe { insn::wrmsr(op.reg, op.arg[0]) }.map(|()| [0, 0]),
        opcode::RMWMSR => match insn::rdmsr(op.reg) {
            Ok(old) => {
                let new = (old & !op.arg[0]) | op.arg[1];
                // SAFETY: `code` is RMWMSR: by the function's requirements.
                match unsafe { insn::wrmsr(op.reg, new) } {
                    Ok(()) => Ok([old, new]),
                    // A failed write still reports what was read and tried.
                    Err(insn::Fault) => return (status::EIO, [old, new]),
                }
            }
            Err(fault) => Err(fault),
        },
        opcode::RDPMC => insn::rdpmc(op.reg).map(|v| [v, 0]),
        opcode::RDTSC => insn::rdtsc().map(|v| [v, 0]),
        opcode::RDTSCP => insn::rdtscp().map(|(tsc, aux)| [tsc, u64::from(aux)]),
        opcode::CPUID => insn::cpuid(op.reg, op.arg[0] as u32).map(|[a, b, c, d]| {
            [
                u64::from(a) | (u64::from(b) << 32),
                u64::from(c) | (u64::from(d) << 32),
            ]
        }),
        opcode::DELAY => insn::rdtsc().and_then(|t0| {
            // SAFETY: `__ndelay` busy-waits; it is callable with interrupts off.
            // The argument was bounded by `MAX_DELAY_NS` in `check_op`.
            unsafe { bindings::__ndelay(op.arg[0] as usize) };
            insn::rdtsc().map(|t1| [t1.wrapping_sub(t0), 0])
        }),
        opcode::RDCR4 => insn::read_cr4().map(|v| [v, 0]),
        opcode::POLL => return run_poll(op, busy),
        // Unreachable after `check_op`, but never trust that in IRQ context.
        _ => return (-(bindings::EOPNOTSUPP as i32), [0, 0]),
    };
    match result {
        Ok(val) => (0, val),
        Err(insn::Fault) => (status::EIO, [0, 0]),
    }
}

/// One read of a POLL's source: the value and the TSC right after it (the
/// TSC itself for the TSC).
#[inline(always)]
fn poll_read(flags: u16, reg: u32) -> insn::InsnResult<(u64, u64)> {
    use uapi::poll;
    if flags & poll::F_TSC != 0 {
        return insn::rdtsc().map(|t| (t, t));
    }
    let v = if flags & poll::F_RDPMC != 0 { insn::rdpmc(reg) } else { insn::rdmsr(reg) }?;
    insn::rdtsc().map(|t| (v, t))
}

/// Runs a POLL (checked by [`check_poll`]): reads its source until
/// `(value & arg[0])` differs from the first read's (or equals `arg[1]`),
/// for at most its timeout from the first read and never past the share's
/// time, `busy` (`(ticks, start)`, as [`run_loop`]'s): each read starts
/// before the end, so a poll holds the CPU past it by one read at most. A
/// POLL whose first read comes after the share's time does not poll
/// (`-ETIME`, as an op not started). Returns the status and `val`.
#[inline(never)]
fn run_poll(op: &Op, (busy_tsc, start): (u64, u64)) -> (i32, [u64; 2]) {
    use uapi::poll;
    let (flags, mask, want) = (op.flags, op.arg[0], op.arg[1]);
    let Ok((first, t0)) = poll_read(flags, op.reg) else {
        return (status::EIO, [0, 0]);
    };
    if t0.wrapping_sub(start) >= busy_tsc {
        return (status::ETIME, [0, 0]);
    }
    let ticks = crate::helpers::ns_to_tsc(poll::timeout_ns(flags));
    let done = |v: u64| {
        if flags & poll::F_EQUAL != 0 {
            v & mask == want
        } else {
            (v ^ first) & mask != 0
        }
    };
    let (mut v, mut t, mut reads) = (first, t0, 1u64);
    let mut result = 0;
    while !done(v) {
        if t.wrapping_sub(t0) >= ticks || t.wrapping_sub(start) >= busy_tsc {
            result = status::ETIMEDOUT;
            break;
        }
        match poll_read(flags, op.reg) {
            Ok((nv, nt)) => (v, t, reads) = (nv, nt, reads.wrapping_add(1)),
            Err(insn::Fault) => return (status::EIO, [0, 0]),
        }
    }
    let stamp = if flags & poll::F_COUNT != 0 {
        let max = u64::from(u32::MAX);
        (reads.min(max) << 32) | t.wrapping_sub(t0).min(max)
    } else {
        t
    };
    (result, [v, stamp])
}

/// How many ops run between two looks at the clock (and before every DELAY).
const BUSY_CHECK_EVERY: u32 = 16;

/// Runs the ops of one CPU in order. `ops` yields each of them once. Ops not
/// started within `mode.busy_tsc` ticks of `mode.start` get `-ETIME` (all of
/// them when `busy_tsc` is 0; the clock is read before every
/// `BUSY_CHECK_EVERY`th op and every DELAY, the first op excepted). Returns the
/// number of ops whose status is not 0. Where every op has the same code
/// (`mode.uniform`), the hot read ops run in a loop specialised to that code,
/// without the dispatch. The outputs go where `out` puts them.
///
/// # Safety
///
/// Every write among `ops` is allowed (see [`insn::wrmsr`]).
#[inline(always)]
unsafe fn run_sequence<'a, O: Outputs>(ops: impl Iterator<Item = (&'a mut Op, O::Slot)>, mode: Mode, out: O) -> u32 {
    let (stop, busy) = (mode.stop_on_error, (mode.busy_tsc, mode.start));
    match mode.uniform {
        // Timestamps cost a TSC read per op: not in the hot loops.
        // SAFETY: Each op runs as its own code; its writes are allowed by the
        // function's requirements.
        _ if mode.stamps => unsafe {
            run_loop(ops, stop, busy, true, out, |op| {
                let (status, val) = run_op(op.op, op, busy);
                (status, [val[0], insn::rdtsc().unwrap_or(0)])
            })
        },
        // The hot loops: no op is a DELAY, none looks at the clock itself.
        // SAFETY: RDMSR does not write.
        Some(opcode::RDMSR) => unsafe { run_loop(ops, stop, busy, false, out, |op| run_op(opcode::RDMSR, op, busy)) },
        // SAFETY: RDPMC does not write.
        Some(opcode::RDPMC) => unsafe { run_loop(ops, stop, busy, false, out, |op| run_op(opcode::RDPMC, op, busy)) },
        // SAFETY: RDTSC does not write.
        Some(opcode::RDTSC) => unsafe { run_loop(ops, stop, busy, false, out, |op| run_op(opcode::RDTSC, op, busy)) },
        // SAFETY: Each op runs as its own code; its writes are allowed by the
        // function's requirements.
        _ => unsafe { run_loop(ops, stop, busy, true, out, |op| run_op(op.op, op, busy)) },
    }
}

/// The loop of [`run_sequence`], with `exec` running one op, its status and
/// values put by `out`. `delays`: some op may be a DELAY (false only where
/// every op has one read code).
///
/// # Safety
///
/// `exec` may be called on every op of `ops`.
#[inline(always)]
unsafe fn run_loop<'a, O: Outputs>(
    mut ops: impl Iterator<Item = (&'a mut Op, O::Slot)>,
    stop_on_error: bool,
    (busy_tsc, start): (u64, u64),
    delays: bool,
    out: O,
    exec: impl Fn(&Op) -> (i32, [u64; 2]),
) -> u32 {
    let mut nr_failed = 0u32;
    // The share started just now: the first look at the clock is due after
    // a full stretch of ops (or at a DELAY), unless there is no budget at all.
    // (Counted down before each op: one decrement and branch per op.)
    let mut until_check = if busy_tsc == 0 { 1 } else { BUSY_CHECK_EVERY + 1 };
    let mut skip = 0;
    for (op, slot) in ops.by_ref() {
        until_check -= 1;
        if until_check == 0 || (delays && op.op == opcode::DELAY) {
            if insn::clock().wrapping_sub(start) >= busy_tsc {
                skip = status::ETIME;
                out.put(op, slot, skip, [0, 0]);
                nr_failed = nr_failed.wrapping_add(1);
                break;
            }
            until_check = BUSY_CHECK_EVERY;
        }
        let (status, val) = exec(op);
        // (Two puts, so that the common case is a branch on the op's own
        // outcome, not a selection among outputs.)
        if status == 0 {
            out.put(op, slot, 0, val);
        } else {
            out.put(op, slot, status, val);
            nr_failed = nr_failed.wrapping_add(1);
            // A POLL found the share's time over: so are the ops after it.
            if status == status::ETIME {
                skip = status::ETIME;
                break;
            }
            if stop_on_error {
                skip = status::ECANCELED;
                break;
            }
        }
    }
    // After the budget ran out, or the first failure with stop-on-error.
    for (op, slot) in ops {
        out.put(op, slot, skip, [0, 0]);
        nr_failed = nr_failed.wrapping_add(1);
    }
    nr_failed
}

/// Runs `ops` on the current CPU, in order, with no busy budget and without
/// stopping at a failure: a sampler's ops (`sampler.rs`), which are few and
/// only read, with interrupts off. `uniform` is [`uniform_code`] of `ops`.
/// Returns the number of failed ops.
///
/// # Safety
///
/// No op of `ops` writes an MSR.
pub(crate) unsafe fn run_reads_here(ops: &mut [Op], uniform: Option<u16>) -> u32 {
    let mode = Mode {
        stop_on_error: false,
        stamps: false,
        busy_tsc: u64::MAX,
        confined: false,
        start: 0,
        uniform,
    };
    // SAFETY: By our own requirements, no op writes.
    unsafe { run_sequence(InPlace.pair(ops), mode, InPlace) }
}

/// Whether the ops seen so far all have the code of a batch's first op: the
/// `uniform` of a [`Plan`] (whose single pass over the ops feeds it) and of
/// a sampler's lane ([`uniform_code`]).
struct SameCode {
    code: u16,
    same: bool,
}

impl SameCode {
    /// For the ops of `ops`, none seen yet.
    #[inline(always)]
    fn of(ops: &[Op]) -> Self {
        SameCode {
            code: ops.first().map_or(0, |op| op.op),
            same: true,
        }
    }

    /// Sees `op`.
    #[inline(always)]
    fn see(&mut self, op: &Op) {
        self.same &= op.op == self.code;
    }

    /// The code of every op seen, if they all have the same.
    #[inline(always)]
    fn code(&self) -> Option<u16> {
        self.same.then_some(self.code)
    }
}

/// The code of every op of `ops`, if they all have the same (what a
/// [`Plan`] keeps as `uniform`).
pub(crate) fn uniform_code(ops: &[Op]) -> Option<u16> {
    let mut uniform = SameCode::of(ops);
    ops.iter().for_each(|op| uniform.see(op));
    uniform.code()
}

/// How a CPU's share of a batch went ([`run_share`]).
enum Share {
    /// The ops started at this TSC; this many failed.
    Ran(u64, u32),
    /// The CPU's credit had nothing for it: no op ran, and none was looked
    /// at (the caller marks them `-ETIME` after the cross-call). Not charged:
    /// it cost one look at the clock, as the cross-call's own entry, never
    /// the time of marking up to `MSRBATCH_MAX_OPS` ops with interrupts off.
    Refused,
    /// The synchronised start was called off: nothing ran on any CPU.
    CalledOff,
}

/// Runs `ops`, this CPU's share of a batch, under this CPU's
/// [`Credit`](crate::busy::Credit), in the interrupts-off section `irqs`:
/// after `sync`'s rendezvous if given, the ops start while the credit lasts;
/// the rest get `-ETIME`. A confined share's time runs from its arrival:
/// its rendezvous wait is charged as the ops are, and lasts at most what the
/// credit allows (the timeout being the other bound); a privileged share's
/// wait is bounded by the timeout and not charged. A CPU with no credit
/// refuses the share, and calls a synchronised start off. A confined share
/// is charged at most [`most_charged`](crate::busy::most_charged).
///
/// # Safety
///
/// As [`run_sequence`] for `ops` and `mode`.
#[inline(always)]
unsafe fn run_share<'a, O: Outputs>(
    irqs: &mut IrqsOff,
    ops: impl Iterator<Item = (&'a mut Op, O::Slot)>,
    mode: &Mode,
    sync: Option<&Rendezvous>,
    out: O,
) -> Share {
    let credit = Credit::this_cpu(irqs);
    let mut start = insn::clock();
    let budget = credit.refill(start, mode.busy_tsc, mode.confined);
    if budget == 0 {
        if let Some(rv) = sync {
            rv.call_off();
        }
        if mode.confined {
            let ticks = credit.confined_refusal(start, mode.busy_tsc);
            crate::busy::refused_confined(irqs, ticks);
        }
        return Share::Refused;
    }
    let most = crate::busy::most_charged(budget, mode.busy_tsc, mode.confined);
    if let Some(rv) = sync {
        // A confined share's wait is its time: no longer than its budget,
        // and charged. A privileged one's is bounded by the timeout alone
        // and not charged (charged, one long wait would leave root's next
        // synchronised starts, its retries, no credit to arrive with).
        let limit = if mode.confined { budget } else { u64::MAX };
        if !rv.wait(start, limit) {
            if mode.confined {
                credit.charge(start, insn::clock(), most);
            }
            return Share::CalledOff;
        }
        if !mode.confined {
            start = insn::clock();
        }
    }
    // SAFETY: By our own requirements.
    // (`mode` by reference: its fields are read where used, not each loaded
    // and kept on the stack across the calls above.)
    let nr_failed = unsafe { run_sequence(ops, Mode { busy_tsc: budget, start, ..*mode }, out) };
    credit.charge(start, insn::clock(), most);
    Share::Ran(start, nr_failed)
}

/// Marks `op`, of a share the CPU's credit refused, `-ETIME` (in process
/// context, after the cross-call), where `out` puts its outputs (`slot`).
fn refuse<O: Outputs>(op: &mut Op, slot: O::Slot, out: O) {
    out.put(op, slot, status::ETIME, [0, 0]);
}

/// The one-CPU cross-call's argument.
struct OneCpu<O> {
    ops: *mut Op,
    nr_ops: usize,
    mode: Mode,
    out: O,
    /// Out: failed ops.
    nr_failed: u32,
    /// Out: the CPU's credit refused the share (no op ran or got a status).
    refused: bool,
}

/// The cross-call of a batch on one CPU, normally another: runs all of its
/// ops.
///
/// # Safety
///
/// `info` points to a [`OneCpu`] that outlives the call (with its `out`,
/// whose results stay valid meanwhile), nothing else accesses it or its ops
/// meanwhile, and the batch's writes are allowed (see [`insn::wrmsr`]).
unsafe extern "C" fn run_one_cpu<O: Outputs>(info: *mut c_void) {
    // SAFETY: By the function's safety requirements.
    let job = unsafe { &mut *info.cast::<OneCpu<O>>() };
    // SAFETY: `ops` and `nr_ops` describe the caller's slice, which nothing
    // else touches until the cross-call returns.
    let ops = unsafe { core::slice::from_raw_parts_mut(job.ops, job.nr_ops) };
    // SAFETY: A cross-call runs with interrupts off until it returns; this
    // is its one token.
    let mut irqs = unsafe { IrqsOff::new() };
    // SAFETY: By the function's requirements, the writes are allowed.
    match unsafe { run_share(&mut irqs, job.out.pair(ops), &job.mode, None, job.out) } {
        Share::Ran(_, nr_failed) => job.nr_failed = nr_failed,
        Share::Refused => job.refused = true,
        Share::CalledOff => {}
    }
}

/// The cross-call: runs the current CPU's share of the batch.
///
/// # Safety
///
/// `info` points to a [`Shared`] that outlives the call, whose shares name
/// valid, distinct op indices below `nr_ops`, each in one share only (for
/// [`Shares::Few`], the ops of each outcome's CPU), whose outcomes name each
/// share's CPU, no CPU twice, and whose writes are allowed (see
/// [`insn::wrmsr`]).
unsafe extern "C" fn run_on_this_cpu(info: *mut c_void) {
    // SAFETY: By the function's safety requirements.
    let shared = unsafe { &*info.cast::<Shared<'_>>() };
    let cpu = insn::this_cpu_id();
    let Some((k, outcome)) = shared.find(cpu) else {
        return;
    };
    match shared.shares {
        Shares::Few => {
            // INVARIANT: The span of `outcome` ([`few_outcomes`]) is of the
            // ops; by our own requirements the ops of `cpu` are this share's
            // only, and a run writes no op's `cpu`.
            let mine = OfCpu {
                at: outcome.first,
                end: outcome.end,
                cpu,
                _ops: PhantomData,
            };
            // SAFETY: By our own requirements.
            unsafe { run_this_share(shared, outcome, in_place(mine)) }
        }
        Shares::Grouped { order, runs } => {
            let op_at = |i: usize| {
                // SAFETY: `i < nr_ops` is checked; the index belongs to this
                // CPU's share only, so no other reference to this op exists
                // while we hold this one.
                (i < shared.nr_ops).then(|| unsafe { &mut *shared.ops.add(i) })
            };
            let mine = runs.get(k).and_then(|r| run_of(order, r)).unwrap_or(&[]);
            // SAFETY: By our own requirements.
            unsafe { run_this_share(shared, outcome, in_place(mine.iter().filter_map(|&i| op_at(i as usize)))) }
        }
    }
}

/// Runs `ops`, a share of `shared`, on this CPU (in the cross-call), and
/// notes in its `outcome` when it started.
///
/// # Safety
///
/// As [`run_sequence`] for `ops`; called from a cross-call, which runs with
/// interrupts off.
#[inline(always)]
unsafe fn run_this_share<'a>(shared: &Shared<'_>, outcome: &Outcome, ops: impl Iterator<Item = (&'a mut Op, ())>) {
    // SAFETY: A cross-call runs with interrupts off until it returns; this is
    // its one token.
    let mut irqs = unsafe { IrqsOff::new() };
    // SAFETY: By our own requirements. Called off: nothing runs here, nor on
    // any other CPU.
    let (start, failed) = match unsafe { run_share(&mut irqs, ops, &shared.mode, shared.sync, InPlace) } {
        Share::Ran(start, failed) => (start, failed),
        Share::Refused => (0, REFUSED),
        Share::CalledOff => return,
    };
    outcome.start.store(start, Ordering::Relaxed);
    outcome.failed.store(failed, Ordering::Relaxed);
}

/// Holds the CPU hotplug read lock: no CPU goes on- or offline meanwhile.
struct CpusReadGuard;

impl CpusReadGuard {
    fn new() -> Self {
        // SAFETY: Called in process context; released in `drop`.
        unsafe { bindings::cpus_read_lock() };
        CpusReadGuard
    }
}

impl Drop for CpusReadGuard {
    fn drop(&mut self) {
        // SAFETY: Paired with the lock taken in `new`.
        unsafe { bindings::cpus_read_unlock() };
    }
}

/// Whether `cpu` (below `nr_cpu_ids`) exists: its bit in the kernel's
/// `__cpu_possible_mask`, read here (a call to a C helper, and the
/// registers saved around it, cost more than the read; the kernel crate's
/// `CpuId` and `Cpumask` make five calls, none inlined into a module).
#[inline(always)]
pub(crate) fn cpu_possible(cpu: u32) -> bool {
    let mask = &raw const bindings::__cpu_possible_mask;
    // SAFETY: `mask` is the kernel's possible mask, valid for its lifetime:
    // only the address of its words is taken here, nothing is read.
    let bits = unsafe { &raw const (*mask).bits };
    let i = cpu as usize / c_ulong::BITS as usize;
    // The mask has `NR_CPUS` bits: a CPU number beyond it does not exist.
    if i >= size_of::<bindings::cpumask>() / size_of::<c_ulong>() {
        return false;
    }
    // SAFETY: Word `i` is inside the mask (checked just above). The mask is
    // made at boot and not changed after (the possible CPUs are fixed), but
    // it is the kernel's, so it is read as the kernel reads it, with one
    // load that the compiler does not assume anything of.
    let word = unsafe { bits.cast::<c_ulong>().add(i).read_volatile() };
    word >> (cpu % c_ulong::BITS) & 1 != 0
}

/// Words of a [`BatchMask`] kept in place: 512 CPU numbers.
const MASK_WORDS: usize = 8;

/// The CPUs of one batch's cross-call, a `struct cpumask`: in place where
/// this kernel's cpumasks take at most [`MASK_WORDS`] words, else allocated.
/// (A `CpumaskVar` is allocated at each batch on a kernel with
/// `CONFIG_CPUMASK_OFFSTACK`, as Debian's are: `MAXSMP`, 8192 CPUs.) Used only
/// through raw pointers, by the kernel's cpumask functions, which touch no
/// more of a mask than `cpumask_size()` bytes, what `alloc_cpumask_var()`
/// allocates. Made empty by `msrbatch_cpumask_of()` ([`BatchMask::set`]),
/// which clears only those bytes: in place, the words start uninitialised,
/// not zeroed and then moved (16 instructions a batch).
///
/// # Invariants
///
/// `InPlace`'s words hold at least `cpumask_size()` bytes (which depends
/// only on `nr_cpu_ids`, fixed at boot).
enum BatchMask {
    InPlace(MaybeUninit<[c_ulong; MASK_WORDS]>),
    Allocated(CpumaskVar),
}

impl BatchMask {
    /// A mask to be set ([`BatchMask::set`]).
    #[inline(always)]
    fn new() -> Result<Self> {
        const IN_PLACE: usize = size_of::<[c_ulong; MASK_WORDS]>();
        // `cpumask_size()` is at most a `struct cpumask`: on a kernel whose
        // masks fit (`NR_CPUS` at most 512), no call to ask it.
        // SAFETY: No preconditions.
        if size_of::<bindings::cpumask>() <= IN_PLACE || unsafe { crate::sys::msrbatch_cpumask_bytes() } <= IN_PLACE {
            // INVARIANT: Checked just above.
            Ok(BatchMask::InPlace(MaybeUninit::uninit()))
        } else {
            Ok(BatchMask::Allocated(CpumaskVar::new_zero(GFP_KERNEL_ACCOUNT)?))
        }
    }

    /// The mask, for the kernel's cpumask functions (valid while `self` is
    /// neither moved nor dropped).
    #[inline(always)]
    fn as_raw(&mut self) -> *mut bindings::cpumask {
        match self {
            // By the type invariants, as many bytes as a cpumask function
            // touches.
            BatchMask::InPlace(words) => words.as_mut_ptr().cast(),
            BatchMask::Allocated(mask) => mask.as_raw(),
        }
    }

    /// The mask, for the kernel's cpumask functions that only read it (valid
    /// while `self` is neither moved nor dropped).
    #[inline(always)]
    fn as_ptr(&self) -> *const bindings::cpumask {
        match self {
            // By the type invariants, as many bytes as a cpumask function
            // touches.
            BatchMask::InPlace(words) => words.as_ptr().cast(),
            BatchMask::Allocated(mask) => mask.as_raw().cast_const(),
        }
    }

    /// Whether the CPUs of the mask, made by [`BatchMask::set`], are all
    /// online (the caller holds the hotplug lock): `ENXIO` if one is not.
    #[inline(always)]
    fn online(&self) -> Result {
        // SAFETY: `as_ptr` is a valid cpumask (made by `set`), which the
        // helper only reads.
        if unsafe { crate::sys::msrbatch_cpumask_online(self.as_ptr().cast()) } {
            Ok(())
        } else {
            Err(ENXIO)
        }
    }

    /// Makes the mask the CPUs of `outcomes`, and says whether they are all
    /// online (the caller holds the hotplug lock): `ENODEV` if one is no CPU
    /// number, `ENXIO` if one is offline.
    #[inline(always)]
    fn set(&mut self, outcomes: &[Outcome]) -> Result {
        let cpus = outcomes.as_ptr().cast::<u8>().wrapping_add(core::mem::offset_of!(Outcome, cpu));
        // SAFETY: `as_raw` is `cpumask_size()` bytes (the type invariants),
        // ours to write; `cpus` is where the `outcomes.len()` CPU numbers
        // of `outcomes` are, `size_of::<Outcome>()` bytes apart, which live
        // and do not change for the call.
        let r = unsafe {
            crate::sys::msrbatch_cpumask_of(self.as_raw().cast(), cpus.cast(), outcomes.len(), size_of::<Outcome>())
        };
        // (Not `to_result`, which is not inlined.)
        match r {
            0 => Ok(()),
            r => Err(Error::from_errno(r)),
        }
    }

    /// Makes the mask, as [`BatchMask::new`] made it, the CPUs of `bits`
    /// (bit `c` for CPU `c`: CPUs below 64), and says whether they are all
    /// online (the caller holds the hotplug lock): `ENXIO` if one is not.
    /// As [`BatchMask::set`] does, without a call (46 instructions a batch
    /// where it calls): a batch of a few ops on a machine of up to 64 CPUs.
    #[inline(always)]
    fn set_word(&mut self, bits: u64) -> Result {
        match self {
            // Every word of it, by the type invariants at least the
            // `cpumask_size()` bytes a cpumask function touches.
            BatchMask::InPlace(words) => words.write([0; MASK_WORDS])[0] = bits,
            // SAFETY: A mask of at least one word, ours to write; its other
            // words are zero, as `new_zero` made them.
            BatchMask::Allocated(mask) => unsafe { mask.as_raw().cast::<c_ulong>().write(bits) },
        }
        online_word(bits)
    }

    /// Takes `cpu` out of the mask (nothing, if it is no CPU number).
    fn clear(&mut self, cpu: u32) {
        // SAFETY: `as_raw` is a valid cpumask (made by `set`), ours to
        // change; the helper checks `cpu` against `nr_cpu_ids`.
        unsafe { crate::sys::msrbatch_cpumask_clear(self.as_raw().cast(), cpu) }
    }
}

/// The shares of a prepared [`Targets::Few`] batch and the mask of their
/// CPUs, made once, when it is prepared, instead of at each run (a pass over
/// the ops and a call to make the mask, 130 instructions a run of 4 CPUs x 1
/// op): a run takes the hotplug lock and checks the mask's CPUs online
/// ([`execute_kept`]). Between runs each outcome's report is [`UNRUN`]:
/// made so, and each run's [`execute_many`] leaves it so as it reads it.
///
/// # Invariants
///
/// `outcomes` are [`few_outcomes`] of the `nr` ops at `base` (one per CPU,
/// no CPU twice, each with its span of those ops), `mask` holds their
/// CPUs (made by [`BatchMask::set`]), and `word`, if any, is its first word,
/// its only one with a bit set. The pointers are used only by
/// [`execute_kept`], and only when the ops it is given are at `base` and
/// `nr` long; the outcomes' reports are atomics, written by one run's
/// CPUs (the runs of a prepared batch are serialised by the lock of its
/// ops, which [`execute_kept`]'s caller holds).
pub(crate) struct KeptShares {
    base: *mut Op,
    nr: usize,
    outcomes: KVVec<Outcome>,
    mask: BatchMask,
    /// The mask's first word, if its CPUs are all below 64: a run checks
    /// them online with it ([`online_word`]), not with a call.
    word: Option<u64>,
}

// SAFETY: Nothing in it is tied to a thread: the pointers are dereferenced
// only by a run that holds the ops they point to mutably (the type
// invariants), and the mask is read, never written, after it was made.
unsafe impl Send for KeptShares {}
// SAFETY: As above: shared, it is read (the reports are atomics).
unsafe impl Sync for KeptShares {}

impl KeptShares {
    /// The shares of the batch `ops`, planned as `plan`, to keep with it
    /// while its ops stay where they are: `None` unless it is a
    /// [`Targets::Few`] (or its mask cannot be made: its runs make theirs).
    pub(crate) fn of(ops: &mut [Op], plan: &Plan) -> Result<Option<Self>> {
        if !matches!(plan.targets, Targets::Few) {
            return Ok(None);
        }
        let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
        let base = ops.as_mut_ptr();
        // SAFETY: `base` is the `ops.len()` ops, which do not change while
        // the outcomes are made.
        let (made, word) = unsafe { few_outcomes(base, ops.len(), &mut buf) };
        let mut outcomes = KVVec::with_capacity(made.len(), GFP_KERNEL_ACCOUNT)?;
        for o in made {
            let kept = Outcome { end: o.end, ..Outcome::new(o.cpu, o.first) };
            outcomes.push(kept, GFP_KERNEL_ACCOUNT)?;
        }
        let mut mask = BatchMask::new()?;
        match mask.set(&outcomes) {
            // A CPU offline now may be online at a run, which checks.
            Ok(()) => {}
            Err(e) if e == ENXIO => {}
            Err(_) => return Ok(None),
        }
        // INVARIANT: The outcomes of the ops at `base`, and their mask.
        Ok(Some(KeptShares { base, nr: ops.len(), outcomes, mask, word }))
    }
}

/// Runs a validated batch as [`execute`] does, with the shares `kept` from
/// its prepare if they were made of `ops` (else as [`execute`]).
///
/// # Safety
///
/// As [`execute`].
#[inline(always)]
pub(crate) unsafe fn execute_kept(ops: &mut [Op], plan: &Plan, kept: Option<&KeptShares>) -> Result<Executed, Rejected> {
    match kept {
        // SAFETY: By our own requirements; `kept` was made of these ops (by
        // its type invariants, as they are at `base`, `nr` of them), which a
        // `Targets::Few` plan runs as `Shares::Few`.
        Some(kept) if kept.base == ops.as_mut_ptr() && kept.nr == ops.len() => unsafe {
            execute_many(ops, Shares::Few, Mode::of(plan), plan.flags & uapi::F_SYNC_START != 0, Some(kept))
        },
        // SAFETY: By our own requirements.
        _ => unsafe { execute(ops, plan) },
    }
}

/// Whether the CPUs of `bits` (bit `c` for CPU `c`: CPUs below 64) are all
/// online (the caller holds the hotplug lock): `ENXIO` if one is not. One
/// word of the kernel's online mask, read here, not by a call.
#[inline(always)]
fn online_word(bits: u64) -> Result {
    let online = &raw const bindings::__cpu_online_mask;
    // SAFETY: The kernel's online mask, valid for its lifetime, has at least
    // one word; it is read as the kernel reads it (the hotplug lock keeps it
    // as it is), with one load the compiler assumes nothing of.
    let word = unsafe { online.cast::<c_ulong>().read_volatile() };
    if bits & !word == 0 {
        Ok(())
    } else {
        Err(ENXIO)
    }
}

/// Whether `cpu` exists and is online now.
pub(crate) fn cpu_online_now(cpu: u32) -> bool {
    CpuId::from_u32(cpu).is_some_and(cpu_online)
}

fn cpu_online(cpu: CpuId) -> bool {
    // SAFETY: `__cpu_online_mask` is a valid cpumask for the kernel's lifetime.
    let mask = unsafe { Cpumask::from_raw(&raw const bindings::__cpu_online_mask) };
    mask.test(cpu)
}

/// Validates and groups `ops` for this machine. One op is planned where
/// this is called (inlined, the plan is made in the caller's frame, and not
/// in that of the loop over many ops, which saves and restores every
/// register).
#[inline(always)]
pub(crate) fn plan(ops: &[Op], flags: u32) -> Result<Plan, Rejected> {
    match ops {
        [op] => Plan::one(op, flags, nr_cpu_ids(), cpu_possible),
        _ => plan_many(ops, flags),
    }
}

/// [`plan`] for any number of ops but one, out of line: [`Plan::many`], as
/// [`Plan::new`] (which the KUnit tests call with CPUs of their own) calls
/// it for such a batch, without `Plan::new`'s test for one op (two
/// instructions a batch).
#[inline(never)]
fn plan_many(ops: &[Op], flags: u32) -> Result<Plan, Rejected> {
    Plan::many(ops, flags, nr_cpu_ids(), cpu_possible)
}

/// What a batch's execution reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Executed {
    /// Ops whose status is not 0.
    pub(crate) nr_failed: u32,
    /// TSC ticks between the first and the last CPU starting (0 on one CPU).
    pub(crate) start_spread: u64,
}

/// Runs a validated batch, `ops` as `plan` (made from them) places them:
/// one cross-call to all target CPUs at once, which run concurrently, each
/// its own ops in array order with interrupts off. Every op gets a status.
///
/// # Safety
///
/// Every write among `ops` is allowed (see [`insn::wrmsr`]).
///
/// Inlined into its callers (a checked batch's run, `accept`'s
/// `Accepted::run_here`, for the batches of user space and of the msr-safe
/// personality, and a prepared batch's that reads, where a call cost 30 instructions a
/// batch); the other paths call [`execute_cold`], so that the loops are not
/// copied into every one.
#[inline(always)]
pub(crate) unsafe fn execute(ops: &mut [Op], plan: &Plan) -> Result<Executed, Rejected> {
    let sync = plan.flags & uapi::F_SYNC_START != 0;
    let mode = || Mode::of(plan);
    match &plan.targets {
        // SAFETY: By our own requirements.
        Targets::One(cpu) => unsafe { execute_one(ops, *cpu, plan, InPlace) },
        // SAFETY: By our own requirements; each CPU's share is its ops
        // (`few_outcomes` makes one share per CPU).
        Targets::Few => unsafe { execute_many(ops, Shares::Few, mode(), sync, None) },
        // SAFETY: By our own requirements; `order` and `runs` are a plan's.
        Targets::Many { order, runs } => unsafe { execute_many(ops, Shares::Grouped { order, runs }, mode(), sync, None) },
    }
}

/// [`execute`], out of line: for the paths that are not hot (a prepared batch
/// that writes, the restore log's runs).
///
/// # Safety
///
/// As [`execute`].
#[inline(never)]
pub(crate) unsafe fn execute_cold(ops: &mut [Op], plan: &Plan) -> Result<Executed, Rejected> {
    // SAFETY: By our own requirements.
    unsafe { execute(ops, plan) }
}

/// Runs a validated batch as [`execute`] does, each op's status and values
/// put straight into `out` (a prepared batch's results) and not into the
/// op, op `i`'s into result `i`: for a batch whose ops are all on one CPU.
/// `None`, running nothing, for a batch on several CPUs (run it with
/// [`execute`]), or when `out` does not have one result per op.
///
/// # Safety
///
/// As [`execute`].
#[inline(always)]
pub(crate) unsafe fn execute_into(ops: &mut [Op], plan: &Plan, out: ToResults<'_>) -> Option<Result<Executed, Rejected>> {
    match plan.targets {
        // SAFETY: By our own requirements. One result per op: every op runs.
        Targets::One(cpu) if out.len() == ops.len() => Some(unsafe { execute_one(ops, cpu, plan, out) }),
        _ => None,
    }
}

/// Runs a batch whose ops are all on `cpu`: directly, with interrupts off,
/// when that is the calling CPU; otherwise with one
/// `smp_call_function_single()`, which fails with `-ENXIO`, running nothing,
/// when the CPU is offline. So no hotplug lock is needed. (A synchronised
/// start of one CPU is just a start.)
///
/// # Safety
///
/// As [`execute`].
#[inline(always)]
unsafe fn execute_one<O: Outputs>(ops: &mut [Op], cpu: u32, plan: &Plan, out: O) -> Result<Executed, Rejected> {
    // One copy for a batch of one op, the commonest, and one for more.
    if ops.len() == 1 {
        // SAFETY: By our own requirements.
        unsafe { execute_on::<O, true>(ops, cpu, plan, out) }
    } else {
        // SAFETY: By our own requirements.
        unsafe { execute_on::<O, false>(ops, cpu, plan, out) }
    }
}

/// [`execute_one`], for a batch of one op if `ONE`, else of several.
///
/// # Safety
///
/// As [`execute`]; `ops` is of one op if `ONE`.
#[inline(always)]
unsafe fn execute_on<O: Outputs, const ONE: bool>(ops: &mut [Op], cpu: u32, plan: &Plan, out: O) -> Result<Executed, Rejected> {
    // For several ops the mode is made before the interrupts-off section,
    // and kept on the stack across its calls, which leaves the loop its
    // registers (made in the section, a prepared 1 x 4096 cost 2 an op
    // more). For one op, where each branch uses it: kept, it was a store
    // and a load a field (about 15 instructions a batch).
    // (Matches, not `Option::then` and `unwrap_or_else`, whose closures
    // were calls.)
    let made = if ONE { None } else { Some(Mode::of(plan)) };
    let local = {
        // With interrupts off we stay on this CPU, as a cross-call would run.
        // SAFETY: Dropped at the end of this block, the only guard in it.
        let _irq = unsafe { local_interrupt_disable() };
        // (An `if`, not `bool::then`, whose closure is not inlined; nor a
        // scoped section taking a closure, which cost 49 a batch.)
        if insn::this_cpu_id() == cpu {
            // SAFETY: Interrupts are off until `_irq` is dropped, after this
            // token; it is the only one of this section.
            let mut irqs = unsafe { IrqsOff::new() };
            let mut pairs = out.pair(ops);
            let mode = match made {
                Some(mode) => mode,
                None => Mode::of(plan),
            };
            // SAFETY: We run on `cpu` with interrupts off; the writes are
            // allowed by our own requirements.
            Some(unsafe {
                if ONE {
                    // A sequence the compiler knows to be of one op at
                    // most, whose loop is no loop.
                    run_share(&mut irqs, pairs.next().into_iter(), &mode, None, out)
                } else {
                    run_share(&mut irqs, pairs, &mode, None, out)
                }
            })
        } else {
            None
        }
    };
    let (nr_failed, refused) = match local {
        Some(Share::Ran(_, nr_failed)) => (nr_failed, false),
        Some(Share::Refused) => (0, true),
        // Without a rendezvous a share is never called off.
        Some(Share::CalledOff) => (0, false),
        // A confined share for a CPU that said it refuses them: refused
        // here, without a cross-call.
        None if plan.flags & F_CONFINED != 0 && crate::busy::refuses_confined(cpu) => (0, true),
        None => {
            let mut job = OneCpu {
                ops: ops.as_mut_ptr(),
                nr_ops: ops.len(),
                mode: match made {
                    Some(mode) => mode,
                    None => Mode::of(plan),
                },
                out,
                nr_failed: 0,
                refused: false,
            };
            let cpu = i32::try_from(cpu).map_err(|_| ENODEV)?;
            // SAFETY: `run_one_cpu` gets a `OneCpu` that lives until this
            // call returns (`wait`), describing `ops`, which we do not touch
            // meanwhile; the writes are allowed by our own requirements.
            // Process context, interrupts on.
            let r = unsafe { crate::compat::smp_call_function_single(cpu, run_one_cpu::<O>, (&raw mut job).cast()) };
            if r != 0 {
                return Err(Rejected { err: ENXIO, index: 0 });
            }
            (job.nr_failed, job.refused)
        }
    };
    // Interrupts are on again: a refused share's ops are marked here.
    if refused {
        out.pair(ops).for_each(|(op, slot)| refuse(op, slot, out));
        return Ok(Executed { nr_failed: ops.len() as u32, start_spread: 0 });
    }
    Ok(Executed { nr_failed, start_spread: 0 })
}

/// Runs a batch on several CPUs: one cross-call to all of them at once, with
/// the hotplug lock held so that every CPU checked online runs its share;
/// with `sync`, through a [`Rendezvous`] (`ETIMEDOUT` when it was called off:
/// nothing ran). The shares' outcomes and the cross-call's mask are made
/// here, or, for a prepared batch, `kept` from its prepare.
///
/// # Safety
///
/// As [`execute`]; `shares` is [`Shares::Few`] for at most [`FEW`] ops, or
/// names each op index in exactly one share, and no CPU twice (as a
/// [`Plan`]'s, by its type invariants); `kept`, if given, is
/// [`Shares::Few`]'s and was made of `ops` ([`KeptShares::of`]).
unsafe fn execute_many(
    ops: &mut [Op],
    shares: Shares<'_>,
    mode: Mode,
    sync: bool,
    kept: Option<&KeptShares>,
) -> Result<Executed, Rejected> {
    // Each share's CPU and outcome: in place for a few CPUs (only those
    // initialised), else one allocation.
    let mut few = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
    // Not made, so not dropped, for a few (an empty `KVVec`'s drop still
    // calls the allocator).
    let mut many = None;
    // The ops as the CPUs reach them, and the shares' spans of a few.
    let base = ops.as_mut_ptr();
    // A few's mask word, when its CPUs are below 64.
    let mut word = None;
    let outcomes: &[Outcome] = match (kept, shares) {
        // Each `UNRUN` (the invariants of `KeptShares`): no share has run.
        (Some(kept), _) => &kept.outcomes,
        // SAFETY: `base` is the `ops.len()` ops, whose `cpu` no run changes;
        // they are used through `base` until the cross-call returns.
        (None, Shares::Few) => {
            // SAFETY: As above.
            let (outcomes, bits) = unsafe { few_outcomes(base, ops.len(), &mut few) };
            word = bits;
            outcomes
        }
        (None, Shares::Grouped { runs, .. }) => match few.get_mut(..runs.len()) {
            // All of them.
            Some(few) => fill(few, runs.iter().map(|r| r.cpu)),
            None => {
                let many = many.insert(KVVec::with_capacity(runs.len(), GFP_KERNEL_ACCOUNT)?);
                for r in runs.iter() {
                    many.push(Outcome::new(r.cpu, core::ptr::null_mut()), GFP_KERNEL_ACCOUNT)?;
                }
                many
            }
        },
    };
    let nr = outcomes.len();
    // (Made for a kept one too, unused: a test of an `Option` of it cost
    // more than making it, two instructions where its masks are in place.)
    let mut made = BatchMask::new()?;
    let rendezvous = sync.then(|| Rendezvous::new(nr as u32));

    let _hotplug = CpusReadGuard::new();
    // The mask of the cross-call, and whether its CPUs are all online.
    let (mask, online) = match kept {
        Some(kept) => (
            kept.mask.as_ptr(),
            match kept.word {
                Some(bits) => online_word(bits),
                None => kept.mask.online(),
            },
        ),
        None => {
            let online = match word {
                Some(bits) => made.set_word(bits),
                None => made.set(outcomes),
            };
            (made.as_ptr(), online)
        }
    };
    // A confined batch with a share for a CPU that said it refuses them:
    // a synchronised start is called off, other shares refused, without
    // a cross-call to that CPU.
    // Only when some CPU may have said so: one look, not one per CPU.
    // That look decides both cases: a synchronised start goes on only if
    // it found none of its CPUs hinted, and then none of its shares is
    // refused below, whatever the hints say by then (a share refused there
    // leaves its CPU out of the call, and the others would spin out the
    // rendezvous's timeout waiting for it). A CPU hinted since gets the
    // cross-call, as one hinted after the look always does: its credit
    // refuses the share and calls the start off at once, or it runs.
    let hinted = crate::busy::refuses_confined;
    let refusing = mode.confined && crate::busy::some_cpu_refuses_confined() && outcomes.iter().any(|o| hinted(o.cpu));
    if sync && refusing {
        return Err(ETIMEDOUT.into());
    }
    match online {
        Ok(()) => {}
        Err(e) if e == ENXIO => {
            // The first op of the lowest-numbered CPU that is offline (as
            // for a grouped batch, whose shares are in CPU order).
            let offline = (outcomes.iter().enumerate())
                .filter(|(_, o)| !cpu_online_now(o.cpu))
                .filter_map(|(k, o)| Some((o.cpu, shares.first_op(ops, k, o)?)))
                .min_by_key(|&(cpu, _)| cpu);
            return Err(Rejected {
                err: ENXIO,
                index: offline.map_or(uapi::NO_INDEX, |(_, first)| first),
            });
        }
        Err(e) => return Err(e.into()),
    }
    // A confined share for a CPU that said it refuses them: refused here,
    // without a cross-call to that CPU, whose mask is then one of this
    // call's own (a kept one stays as it is).
    let mut own = None;
    let mut mask = mask;
    if refusing {
        let own = own.insert(BatchMask::new()?);
        own.set(outcomes)?;
        for o in outcomes {
            if hinted(o.cpu) {
                o.failed.store(REFUSED, Ordering::Relaxed);
                own.clear(o.cpu);
            }
        }
        mask = own.as_ptr();
    }

    let shared = Shared {
        ops: base,
        nr_ops: ops.len(),
        shares,
        mode,
        outcomes,
        sync: rendezvous.as_ref(),
    };
    // SAFETY: `run_on_this_cpu` gets a `Shared` that lives until this call
    // returns (`wait` is true). By our own requirements every index is in
    // one share only (`few_outcomes`: each CPU's ops are its share's), and
    // `outcomes` has each share's CPU, no CPU twice, so the CPUs write
    // disjoint ops (each checks its indices against `nr_ops`). The writes are allowed by our own
    // requirements. We are in process context with interrupts on, as the
    // function requires.
    unsafe {
        bindings::on_each_cpu_cond_mask(
            None,
            Some(run_on_this_cpu),
            (&raw const shared).cast_mut().cast(),
            true,
            mask,
        )
    };
    if rendezvous.is_some_and(|rv| rv.state.load(Ordering::Acquire) != GO) {
        // No share ran; a refused one's marker goes (kept ones stay `UNRUN`).
        outcomes.iter().for_each(|o| o.failed.store(UNRUN, Ordering::Relaxed));
        return Err(ETIMEDOUT.into());
    }
    // Each share that ran gave each of its ops a status, and counted those
    // that failed; the others' ops get theirs here (none runs any more).
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut nr_failed = 0u32;
    for (k, o) in outcomes.iter().enumerate() {
        let failed = o.failed.load(Ordering::Relaxed);
        // Read: `UNRUN` again, for a kept share's next run (one store here,
        // not a loop over the shares before the run; made ones are dropped).
        o.failed.store(UNRUN, Ordering::Relaxed);
        // (Each share's ops at most `MAX_OPS`, all of them at most that: no
        // overflow, and no check of it.)
        // (One comparison for both markers, the cold case.)
        nr_failed = nr_failed.wrapping_add(match failed {
            marker @ REFUSED.. => {
                let status = if marker == REFUSED { status::ETIME } else { status::ENXIO };
                unrun(ops, shares, k, o, status)
            }
            failed => {
                let t = o.start.load(Ordering::Relaxed);
                first = first.min(t);
                last = last.max(t);
                failed
            }
        });
    }
    Ok(Executed {
        nr_failed,
        start_spread: last.saturating_sub(first),
    })
}

/// Gives each op of share `k` of `ops`, whose outcome `o` says it did not
/// run, `status`; returns how many. (Out of line: a share that ran is the
/// rule, and the closure's frame was made for each share.)
#[cold]
#[inline(never)]
fn unrun(ops: &mut [Op], shares: Shares<'_>, k: usize, o: &Outcome, status: i32) -> u32 {
    let mut n = 0u32;
    shares.for_each_op(ops, k, o, |op| {
        InPlace.put(op, (), status, [0, 0]);
        n += 1;
    });
    n
}

#[kunit_tests(msrbatch_batch)]
mod tests {
    use super::*;

    fn op(code: u16, cpu: u32, reg: u32, arg: [u64; 2]) -> Op {
        Op {
            op: code,
            cpu,
            reg,
            arg,
            ..Op::default()
        }
    }

    fn header(nr_ops: u32) -> Batch {
        Batch {
            version: uapi::ABI_VERSION,
            nr_ops,
            ops: 0x1000,
            ..Batch::default()
        }
    }

    #[test]
    fn header_checks() -> Result {
        assert_eq!(check_header(&header(1)), Ok(()));
        assert_eq!(check_header(&header(uapi::MAX_OPS)), Ok(()));
        // Outputs left over from an earlier run are ignored.
        let reused =
            Batch { nr_failed: 3, err_index: 7, out_flags: uapi::OUT_RAN, start_spread: 9, ..header(1) };
        assert_eq!(check_header(&reused), Ok(()));
        let bad = [
            (Batch { version: 0, ..header(1) }, crate::compat::eprotonosupport()),
            (Batch { version: 2, ..header(1) }, crate::compat::eprotonosupport()),
            (Batch { reserved0: 1, ..header(1) }, EINVAL),
            (Batch { flags: 1 << 3, ..header(1) }, EINVAL),
            (header(0), EINVAL),
            (header(uapi::MAX_OPS + 1), E2BIG),
            (Batch { ops: 0, ..header(1) }, EFAULT),
        ];
        for (b, err) in bad {
            assert_eq!(check_header(&b), Err(Rejected::batch(err)));
        }
        Ok(())
    }

    #[test]
    fn op_checks() -> Result {
        let good = [
            op(opcode::RDMSR, 0, 0x10, [0, 0]),
            op(opcode::WRMSR, 0, 0x10, [u64::MAX, 0]),
            op(opcode::RMWMSR, 0, 0x10, [0xff, 0x1]),
            op(opcode::RDPMC, 0, 1 << 30, [0, 0]),
            op(opcode::RDTSC, 0, 0, [0, 0]),
            op(opcode::RDTSCP, 0, 0, [0, 0]),
            op(opcode::CPUID, 0, 7, [u64::from(u32::MAX), 0]),
            op(opcode::DELAY, 0, 0, [uapi::MAX_DELAY_NS, 0]),
            op(opcode::RDCR4, 0, 0, [0, 0]),
        ];
        for o in &good {
            assert_eq!(check_op(o), Ok(()));
        }
        let bad = [
            (op(0, 0, 0, [0, 0]), crate::compat::eopnotsupp()),
            (op(opcode::MAX + 1, 0, 0, [0, 0]), crate::compat::eopnotsupp()),
            (op(u16::MAX, 0, 0, [0, 0]), crate::compat::eopnotsupp()),
            (Op { flags: 1, ..good[0] }, EINVAL),
            (op(opcode::RDMSR, 0, 0x10, [1, 0]), EINVAL),
            (op(opcode::WRMSR, 0, 0x10, [1, 1]), EINVAL),
            (op(opcode::RDTSC, 0, 1, [0, 0]), EINVAL),
            (op(opcode::RDCR4, 0, 0, [0, 1]), EINVAL),
            (op(opcode::CPUID, 0, 0, [1 << 32, 0]), EINVAL),
            (op(opcode::DELAY, 0, 0, [uapi::MAX_DELAY_NS + 1, 0]), ERANGE),
        ];
        for (o, err) in &bad {
            assert_eq!(check_op(o), Err(*err));
        }
        assert!(is_write(&good[1]) && is_write(&good[2]) && !is_write(&good[0]));
        Ok(())
    }

    /// A POLL of `reg` with `flags` and a timeout of `us` microseconds.
    fn poll_op(cpu: u32, reg: u32, flags: u16, us: u16, arg: [u64; 2]) -> Op {
        Op { flags: flags | (us << uapi::poll::TIMEOUT_SHIFT), ..op(opcode::POLL, cpu, reg, arg) }
    }

    #[test]
    fn poll_checks() -> Result {
        use uapi::poll;
        let max_us = (uapi::MAX_POLL_NS / 1000) as u16;
        let good = [
            poll_op(0, 0x611, 0, 1, [u64::MAX, 0]),
            poll_op(0, 0x611, 0, max_us, [0, 0]),
            poll_op(0, 0, poll::F_TSC | poll::F_COUNT, 10, [1 << 20, 0]),
            poll_op(0, 1 << 30, poll::F_RDPMC, 10, [0xff, 0]),
            poll_op(0, 0x19c, poll::F_EQUAL, 10, [0xff, 0x12]),
        ];
        for o in &good {
            assert_eq!(check_op(o), Ok(()));
        }
        let bad = [
            (poll_op(0, 0x611, 0, 0, [1, 0]), EINVAL),                         // no timeout
            (poll_op(0, 0x611, 0, max_us + 1, [1, 0]), ERANGE),                // too long
            (poll_op(0, 0x611, 1 << 3 | 1 << 2 | 1 << 1, 1, [1, 0]), EINVAL), // two sources
            (poll_op(0, 1, poll::F_TSC, 1, [1, 0]), EINVAL),                   // TSC with a register
            (poll_op(0, 0x611, 0, 1, [1, 1]), EINVAL),                         // a value without F_EQUAL
            (poll_op(0, 0x611, poll::F_EQUAL, 1, [0xf0, 0x1]), EINVAL),        // outside the mask
        ];
        for (o, err) in &bad {
            assert_eq!(check_op(o), Err(*err));
        }
        // Timeouts count towards a CPU's waits, with its delays; timestamps
        // have no room in a POLL's val[1].
        let d = op(opcode::DELAY, 0, 0, [uapi::MAX_DELAY_NS, 0]);
        let p = poll_op(0, 0x611, 0, max_us, [1, 0]);
        // 4 x 1 ms and 3 x 2 ms: the 10 ms of one CPU, then 1 us more.
        let mut ops = [d, p, d, p, d, p, d, poll_op(0, 0x611, 0, 1, [1, 0])];
        assert_eq!(uapi::MAX_CPU_DELAY_NS, 4 * uapi::MAX_DELAY_NS + 3 * uapi::MAX_POLL_NS);
        assert!(Plan::new(&ops[..7], 0, 1, |_| true).is_ok());
        let r = Plan::new(&ops, 0, 1, |_| true).err();
        assert_eq!(r, Some(Rejected { err: ERANGE, index: 7 }));
        // On another CPU it counts there.
        ops[7].cpu = 1;
        assert!(Plan::new(&ops, 0, 2, |_| true).is_ok());
        let r = Plan::new(&[p], uapi::F_TIMESTAMPS, 1, |_| true).err();
        assert_eq!(r, Some(Rejected { err: EINVAL, index: 0 }));
        Ok(())
    }

    /// [`run_poll`] with its values put into the op.
    fn poll(op: &mut Op, busy: (u64, u64)) -> i32 {
        let (status, val) = run_poll(op, busy);
        op.val = val;
        status
    }

    #[test]
    fn poll_reads_until_change_within_bounds() -> Result {
        use uapi::poll;
        // The TSC changes at every read: two reads, the second's value is
        // its stamp, the ticks between them are counted.
        let mut o = poll_op(0, 0, poll::F_TSC | poll::F_COUNT, 100, [u64::MAX, 0]);
        assert_eq!(poll(&mut o, (u64::MAX, 0)), 0);
        assert_eq!(o.val[1] >> 32, 2);
        assert!(o.val[1] & 0xffff_ffff > 0);
        let mut o = poll_op(0, 0, poll::F_TSC, 100, [u64::MAX, 0]);
        assert_eq!(poll(&mut o, (u64::MAX, 0)), 0);
        assert_eq!(o.val[0], o.val[1]);
        // Mask 0: nothing can change; the timeout ends it, measured in TSC
        // ticks, and the share's time ends it earlier.
        let ticks = crate::helpers::ns_to_tsc(20_000);
        let mut o = poll_op(0, 0, poll::F_TSC | poll::F_COUNT, 20, [0, 0]);
        assert_eq!(poll(&mut o, (u64::MAX, 0)), status::ETIMEDOUT);
        assert!(o.val[1] & 0xffff_ffff >= ticks && o.val[1] >> 32 >= 2);
        // (A vCPU the host preempts between `now` and the first read may
        // start the poll past the share's time: -ETIME; one it preempts
        // for 2 ms between two reads sees the timeout's time pass as well:
        // both tried again. A poll that ignored the share's time would
        // take the whole 2 ms every time.)
        let mut o = poll_op(0, 0, poll::F_TSC | poll::F_COUNT, 2000, [0, 0]);
        let mut r = status::ETIME;
        for _ in 0..10 {
            let now = insn::rdtsc().unwrap_or(0);
            r = poll(&mut o, (ticks, now));
            if r != status::ETIME && o.val[1] & 0xffff_ffff < crate::helpers::ns_to_tsc(2_000_000) {
                break;
            }
        }
        assert_eq!(r, status::ETIMEDOUT);
        assert!(o.val[1] & 0xffff_ffff < crate::helpers::ns_to_tsc(2_000_000));
        // Past the share's time already: no poll.
        let mut o = poll_op(0, 0, poll::F_TSC, 20, [0, 0]);
        assert_eq!(poll(&mut o, (0, 0)), status::ETIME);
        // Equal: ends at the first read whose masked value is the one asked
        // for. Bit 12 of the TSC takes the value it does not have now within
        // 4096 ticks; the TSC's low bits are not used, since a TSC may step by
        // more than one between reads (bit 0 never changed in one TCG host's
        // guest). A vCPU the host preempts for the whole poll may miss the
        // window: tried again.
        let bit = 1u64 << 12;
        let mut hit = false;
        for _ in 0..10 {
            let want = !insn::rdtsc().unwrap_or(0) & bit;
            let mut o = poll_op(0, 0, poll::F_TSC | poll::F_EQUAL, 100, [bit, want]);
            if poll(&mut o, (u64::MAX, 0)) == 0 {
                assert_eq!(o.val[0] & bit, want);
                hit = true;
                break;
            }
        }
        assert!(hit);
        // Equal to what the mask cannot give: only the timeout ends it.
        let mut o = poll_op(0, 0, poll::F_TSC | poll::F_EQUAL, 20, [0, 1]);
        assert_eq!(poll(&mut o, (u64::MAX, 0)), status::ETIMEDOUT);
        Ok(())
    }

    /// A RDTSC on each CPU of `cpus`, in that order.
    fn rdtscs(cpus: &[u32]) -> Result<KVVec<Op>> {
        let mut ops = KVVec::with_capacity(cpus.len(), GFP_KERNEL)?;
        for &c in cpus {
            ops.push(op(opcode::RDTSC, c, 0, [0, 0]), GFP_KERNEL)?;
        }
        Ok(ops)
    }

    /// The shares of the [`Targets::Few`] batch `ops`, made in `buf`.
    fn few<'b>(ops: &mut [Op], buf: &'b mut [MaybeUninit<Outcome>; FEW]) -> &'b [Outcome] {
        // SAFETY: `ops` is `ops.len()` ops, unchanged while the outcomes are
        // used (they only name them).
        unsafe { few_outcomes(ops.as_mut_ptr(), ops.len(), buf) }.0
    }

    /// The op indices a cross-call on the CPU of outcome `o` runs of a
    /// [`Targets::Few`] batch `ops` (its [`OfCpu`] over its span), in its
    /// order.
    fn of_cpu(ops: &mut [Op], o: &Outcome) -> Result<KVVec<usize>> {
        let span = o.span(ops);
        let base = ops.as_mut_ptr();
        // INVARIANT: A span of `ops`, which nothing else touches meanwhile.
        let mine = OfCpu { at: base.wrapping_add(span.start), end: base.wrapping_add(span.end), cpu: o.cpu, _ops: PhantomData };
        let mut got = KVVec::new();
        for op in mine {
            got.push((core::ptr::from_mut(op) as usize - base as usize) / size_of::<Op>(), GFP_KERNEL)?;
        }
        Ok(got)
    }

    /// Checks what a plan of RDTSCs on `cpus` (as CPU numbers, in array
    /// order) must be: one CPU, `One`; more than `FEW` ops on several,
    /// `Many`; else `Few`, whose shares ([`few_outcomes`], one per CPU, and
    /// what each CPU's cross-call runs of them, [`OfCpu`]) give each op to
    /// the CPU it names, once, in array order (the cross-call's soundness
    /// rests on it).
    fn check_shares(cpus: &[u32]) -> Result {
        let mut ops = rdtscs(cpus)?;
        let p = Plan::new(&ops, 0, 1024, |_| true).map_err(|r| r.err)?;
        let distinct = cpus.iter().enumerate().filter(|&(i, c)| !cpus[..i].contains(c)).count();
        match &p.targets {
            Targets::One(c) => {
                assert!(distinct == 1 && *c == cpus[0]);
                return Ok(());
            }
            Targets::Many { .. } => {
                assert!(cpus.len() > FEW && distinct >= 2);
                return Ok(());
            }
            Targets::Few => {}
        }
        assert!(cpus.len() <= FEW && distinct >= 2);
        let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
        // The mask word: each CPU's bit when all are below 64, else none.
        // SAFETY: `ops` is `ops.len()` ops, unchanged meanwhile.
        let (_, word) = unsafe { few_outcomes(ops.as_mut_ptr(), ops.len(), &mut buf) };
        let bits = cpus.iter().fold(0u64, |b, &c| b | 1u64.checked_shl(c).unwrap_or(0));
        assert_eq!(word, cpus.iter().all(|&c| c < 64).then_some(bits));
        let outcomes = few(&mut ops, &mut buf);
        assert_eq!(outcomes.len(), distinct);
        let mut seen = [0u32; FEW];
        for (k, o) in outcomes.iter().enumerate() {
            // Each share's span runs from its CPU's first op to past its
            // last; the shares' CPUs are distinct, in the order of their
            // first ops, not yet run.
            let (f, e) = (o.span(&ops).start, o.span(&ops).end);
            assert!(f < e && e <= cpus.len() && cpus[f] == o.cpu && cpus[e - 1] == o.cpu);
            assert!(!cpus[..f].contains(&o.cpu) && !cpus[e..].contains(&o.cpu));
            assert!(outcomes[..k].iter().all(|p| p.cpu != o.cpu && p.first < o.first));
            assert!(o.span(&ops) == (f..e) && (f..e).len() <= FEW);
            assert_eq!(o.failed.load(Ordering::Relaxed), UNRUN);
            // Each op its cross-call runs is its CPU's, after the one before.
            let mut prev = None;
            for i in of_cpu(&mut ops, o)? {
                assert!(i < cpus.len() && cpus[i] == o.cpu && prev < Some(i));
                seen[i] += 1;
                prev = Some(i);
            }
        }
        // Every op in exactly one share.
        assert!(seen[..cpus.len()].iter().all(|&n| n == 1));
        Ok(())
    }

    #[test]
    fn few_shares_hold_for_every_pattern() -> Result {
        // Shapes (one CPU then others, alternating, each op its own CPU,
        // runs, a CPU that comes back, high CPU numbers, CPUs 64 apart, whom
        // `few_outcomes`'s first look cannot tell apart) at every length up to
        // one past `FEW` (helper-18's review).
        for n in 2..=FEW as u32 + 1 {
            for shape in 0..14u32 {
                let mut cpus = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
                for i in 0..n {
                    let c = match shape {
                        0 => u32::from(i != 0),
                        1 => u32::from(i + 1 == n),
                        2 => i % 2,
                        3 => i,
                        4 => (n - 1 - i) * 31,
                        5 if i < n / 2 => 7,
                        5 => 1023 - i,
                        6 => i % 3 * 255 + i % 2,
                        7 => [0, 1, 0, 2, 1, 3, 0][i as usize % 7],
                        8 if i == 0 || i + 1 == n => 5,
                        8 => 6,
                        9 => i / 3,
                        10 => u32::from(i % 5 == 4) * 1000,
                        11 => 1023 - (i * i) % 17,
                        12 => i % 3 * 64,
                        _ => [0, 64, 0, 128, 64, 1, 65][i as usize % 7],
                    };
                    cpus.push(c, GFP_KERNEL)?;
                }
                check_shares(&cpus)?;
            }
        }
        // And 1000 pseudo-random ones (xorshift): 2 to `FEW + 1` ops on up
        // to six CPUs. (5000 took about 19 s a module load on the debug
        // kernel with two vCPUs on one host CPU, which loads the module
        // some 30 times: make check's lifetime stage ran out of its 900 s.
        // tests/guest/few_test.c runs 3000 random batches end to end.)
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = 2 + (x % (FEW as u64 + 2)) as usize;
            let k = 1 + ((x >> 8) % 6) as u32;
            let mut y = x;
            let mut cpus = KVVec::with_capacity(n, GFP_KERNEL)?;
            for _ in 0..n {
                y = y.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                cpus.push(((y >> 33) as u32 % k) * 97 % 1024, GFP_KERNEL)?;
            }
            check_shares(&cpus)?;
        }
        Ok(())
    }

    /// The share a cross-call on `cpu` finds ([`Shared::find`]), of
    /// `shares`, whose CPUs are `cpus`.
    fn find(shares: Shares<'_>, cpus: &[u32], cpu: u32) -> Option<usize> {
        let outcomes = [0, 1, 2].map(|k| Outcome::new(cpus.get(k).copied().unwrap_or(u32::MAX), core::ptr::null_mut()));
        let shared = Shared {
            ops: core::ptr::null_mut(),
            nr_ops: 0,
            shares,
            mode: Mode { stop_on_error: false, stamps: false, busy_tsc: 0, confined: false, start: 0, uniform: None },
            outcomes: outcomes.get(..cpus.len()).unwrap_or(&outcomes),
            sync: None,
        };
        let (k, o) = shared.find(cpu)?;
        assert!(core::ptr::eq(o, &shared.outcomes[k]) && o.cpu == cpu);
        Some(k)
    }

    #[test]
    fn grouping_keeps_array_order_per_cpu() -> Result {
        let ops = rdtscs(&[2, 0, 2, 1, 0, 2])?;
        let p = Plan::new(&ops, 0, 4, |_| true).map_err(|r| r.err)?;
        // At most `FEW` ops: a share per CPU, in the order of their first
        // ops, each CPU's span from its first op to past its last, and each
        // CPU finds its own ops in array order.
        assert!(matches!(p.targets, Targets::Few));
        let mut ops = ops;
        let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
        let outcomes = few(&mut ops, &mut buf);
        let spans = [0, 1, 2].map(|k| outcomes.get(k).map(|o| (o.cpu, o.span(&ops))));
        assert_eq!((outcomes.len(), spans), (3, [Some((2, 0..6)), Some((0, 1..5)), Some((1, 3..4))]));
        let cpus = [2, 0, 1];
        assert_eq!((find(Shares::Few, &cpus, 0), find(Shares::Few, &cpus, 1), find(Shares::Few, &cpus, 3)), (Some(1), Some(2), None));
        for (k, want) in [&[0usize, 2, 5][..], &[1, 4], &[3]].into_iter().enumerate() {
            assert_eq!(Shares::Few.first_op(&ops, k, &outcomes[k]), Some(want[0] as u32));
            assert_eq!(&of_cpu(&mut ops, &outcomes[k])?[..], want);
            // As the caller marks a share that did not run.
            let mut copy = KVVec::new();
            copy.extend_from_slice(&ops, GFP_KERNEL)?;
            let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
            let theirs = few(&mut copy, &mut buf);
            // Outcomes of other ops name none of them.
            let mut none = true;
            Shares::Few.for_each_op(&mut copy, k, &outcomes[k], |_| none = false);
            assert!(none);
            let mut got = KVVec::new();
            let mut pushed = Ok(());
            Shares::Few.for_each_op(&mut copy, k, &theirs[k], |op| {
                op.status = status::ENXIO;
                pushed = pushed.and(got.push(op.cpu, GFP_KERNEL));
            });
            pushed?;
            assert_eq!(got.len(), want.len());
            assert!(copy.iter().enumerate().all(|(i, op)| (op.status == status::ENXIO) == want.contains(&i)));
        }
        // A first CPU's ops before any other's are its share too.
        let mut two = rdtscs(&[1, 1, 1, 0, 1, 0])?;
        let p2 = Plan::new(&two, 0, 4, |_| true).map_err(|r| r.err)?;
        assert!(matches!(p2.targets, Targets::Few));
        let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
        let outcomes = few(&mut two, &mut buf);
        let spans = [0, 1, 2].map(|k| outcomes.get(k).map(|o| (o.cpu, o.span(&two))));
        assert_eq!(spans, [Some((1, 0..5)), Some((0, 3..6)), None]);
        assert_eq!(&of_cpu(&mut two, &outcomes[0])?[..], &[0, 1, 2, 4]);
        assert_eq!(&of_cpu(&mut two, &outcomes[1])?[..], &[3, 5]);
        // Exactly `FEW` ops: a few, every op in one share, that of its CPU,
        // in array order; one more: grouped. On `FEW` CPUs, a share each.
        for (ncpus, pattern) in [(FEW as u32, 1u32), (5, 7), (2, 3)] {
            let mut many = KVVec::new();
            for i in 0..=FEW as u32 {
                many.push(op(opcode::RDTSC, i * pattern % ncpus, 0, [0, 0]), GFP_KERNEL)?;
            }
            let p = Plan::new(&many[..FEW], 0, 64, |_| true).map_err(|r| r.err)?;
            assert!(matches!(p.targets, Targets::Few));
            let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
            let outcomes = few(&mut many[..FEW], &mut buf);
            let mut seen = [0u32; FEW];
            for o in outcomes {
                let mut prev = None;
                for i in of_cpu(&mut many[..FEW], o)? {
                    assert!(many[i].cpu == o.cpu && prev < Some(i));
                    seen[i] += 1;
                    prev = Some(i);
                }
            }
            assert!(seen.iter().all(|&n| n == 1));
            assert_eq!(outcomes.len(), ncpus.min(FEW as u32) as usize);
            let p = Plan::new(&many, 0, 64, |_| true).map_err(|r| r.err)?;
            assert!(matches!(p.targets, Targets::Many { .. }));
        }
        assert!(!p.has_writes());
        // More than `FEW` ops: grouped through the per-CPU table, the same
        // order within a CPU.
        let mut big = KVVec::new();
        while big.len() <= FEW {
            big.extend_from_slice(&ops, GFP_KERNEL)?;
        }
        let p = Plan::new(&big, 0, 4, |_| true).map_err(|r| r.err)?;
        let Targets::Many { order, runs } = &p.targets else {
            panic!("three CPUs planned as one");
        };
        assert_eq!(big.len(), 36);
        assert_eq!(&order[..6], &[1, 4, 7, 10, 13, 16]);
        assert_eq!(
            &runs[..],
            &[
                CpuRun { cpu: 0, start: 0, len: 12 },
                CpuRun { cpu: 1, start: 12, len: 6 },
                CpuRun { cpu: 2, start: 18, len: 18 },
            ]
        );
        let shares = Shares::Grouped { order, runs };
        assert_eq!(shares.first_op(&big, 1, &Outcome::new(1, core::ptr::null_mut())), Some(3));
        let found = [0, 1, 2, 3].map(|cpu| find(shares, &[0, 1, 2], cpu));
        assert_eq!(found, [Some(0), Some(1), Some(2), None]);
        // All on one CPU: no grouping.
        let same = [ops[0], ops[2], ops[5]];
        let p = Plan::new(&same, 0, 4, |_| true).map_err(|r| r.err)?;
        assert!(matches!(p.targets, Targets::One(2)));
        let w = [ops[0], op(opcode::WRMSR, 1, 0x10, [1, 0]), op(opcode::RMWMSR, 0, 0x10, [1, 1])];
        let p = Plan::new(&w, 0, 4, |_| true).map_err(|r| r.err)?;
        assert_eq!((p.first_write, p.nr_writes), (Some(1), 2));
        Ok(())
    }

    #[test]
    fn rendezvous_all_or_none() -> Result {
        // The last of the expected CPUs to arrive says go.
        let now = || insn::rdtsc().unwrap_or(0);
        let rv = Rendezvous::new(1);
        assert!(rv.wait(now(), u64::MAX));
        // One of two never arrives: the other times out and calls it off,
        // and a latecomer does not run either.
        let mut rv = Rendezvous::new(2);
        rv.timeout_tsc = 1000;
        assert!(!rv.wait(now(), u64::MAX));
        assert_eq!(rv.state.load(Ordering::Relaxed), ABORT);
        assert!(!rv.wait(now(), u64::MAX));
        // The wait is the share's time: it ends with the CPU's credit, also
        // before the timeout (and with none left at arrival, at once).
        let rv = Rendezvous::new(2);
        let t0 = now();
        assert!(!rv.wait(t0, 1000));
        assert_eq!(rv.state.load(Ordering::Relaxed), ABORT);
        assert!(now().wrapping_sub(t0) < rv.timeout_tsc);
        let rv = Rendezvous::new(2);
        assert!(!rv.wait(now(), 0));
        // A CPU without credit calls it off, even as the last to arrive.
        let rv = Rendezvous::new(1);
        rv.call_off();
        assert!(!rv.wait(now(), u64::MAX));
        Ok(())
    }

    #[test]
    fn a_rendezvous_wait_is_charged() -> Result {
        // A confined share whose partner never arrives waits no longer than
        // its credit allows (a quarter of the budget when full, not the
        // 20 ms timeout), and the wait is charged: the next confined share
        // on this CPU gets (almost) nothing. A host that stops the vCPU
        // meanwhile stretches the wait in TSC time: tried up to 30 times,
        // 100 ms apart (the credit full again); the first wait that was not
        // stretched ends it (on a host at load 10, all of 5 tries were, in
        // one of 4 module loads).
        let b = crate::busy::budget_tsc();
        let mode = Mode { stop_on_error: false, stamps: false, busy_tsc: b, confined: true, start: 0, uniform: None };
        use kernel::time::{delay::fsleep, Delta};
        let mut within = false;
        for _ in 0..30 {
            fsleep(Delta::from_millis(100));
            let rv = Rendezvous::new(2);
            let (called_off, waited, left) = {
                // SAFETY: Dropped at the end of this block, the only guard
                // in it.
                let _irq = unsafe { local_interrupt_disable() };
                // SAFETY: Interrupts are off until `_irq` is dropped, after
                // `irqs`; this is the section's one token.
                let mut irqs = unsafe { IrqsOff::new() };
                let t0 = insn::rdtsc().unwrap_or(0);
                // SAFETY: No ops.
                let share = unsafe { run_share(&mut irqs, InPlace.pair(&mut []), &mode, Some(&rv), InPlace) };
                let now = insn::rdtsc().unwrap_or(0);
                let left = Credit::this_cpu(&mut irqs).refill(now, b, true);
                (matches!(share, Share::CalledOff), now.wrapping_sub(t0), left)
            };
            assert!(called_off);
            // A wait longer than a confined share may be charged (its
            // budget, at most B/4, plus B/16) was stretched by the host:
            // the excess is not charged, and the credit earns it back.
            if waited <= b / 4 + b / 16 {
                assert!(left < b / 100);
                within = true;
                break;
            }
        }
        assert!(within);
        Ok(())
    }

    #[test]
    fn timestamps_need_a_free_val1() -> Result {
        let ok = op(opcode::RDMSR, 0, 0x10, [0, 0]);
        for (code, reg) in [(opcode::RDTSCP, 0), (opcode::CPUID, 7), (opcode::RMWMSR, 0x10)] {
            let ops = [ok, op(code, 0, reg, [0, 0])];
            let r = Plan::new(&ops, uapi::F_TIMESTAMPS, 4, |_| true).err();
            assert_eq!(r, Some(Rejected { err: EINVAL, index: 1 }));
            assert!(Plan::new(&ops, 0, 4, |_| true).is_ok());
        }
        // A confined descriptor's masked WRMSR, run as an RMWMSR, reports
        // only its timestamp.
        let ops = [ok, op(opcode::RMWMSR, 0, 0x10, [0, 0])];
        assert!(Plan::new(&ops, uapi::F_TIMESTAMPS | F_MASKED_WRITES, 4, |_| true).is_ok());
        Ok(())
    }

    #[test]
    fn plan_rejections_name_the_op() -> Result {
        let ok = op(opcode::RDTSC, 0, 0, [0, 0]);
        let cases = [
            ([ok, op(opcode::RDTSC, 4, 0, [0, 0])], ENODEV, 1),
            ([op(opcode::RDTSC, 3, 0, [0, 0]), ok], ENODEV, 0),
            ([ok, op(99, 0, 0, [0, 0])], crate::compat::eopnotsupp(), 1),
        ];
        for (ops, err, index) in cases {
            let r = Plan::new(&ops, 0, 4, |cpu| cpu != 3).err();
            assert_eq!(r, Some(Rejected { err, index }));
        }
        // The per-CPU delay budget counts each CPU separately: `ops` fit,
        // and `extra`, one more DELAY on one of their CPUs, is one too many.
        let d = |cpu| op(opcode::DELAY, cpu, 0, [uapi::MAX_DELAY_NS, 0]);
        let full = uapi::MAX_CPU_DELAY_NS / uapi::MAX_DELAY_NS;
        let one_too_many = |mut ops: KVVec<Op>, extra: Op| -> Result {
            assert!(Plan::new(&ops, 0, 2, |_| true).is_ok());
            ops.push(extra, GFP_KERNEL)?;
            let r = Plan::new(&ops, 0, 2, |_| true).err();
            assert_eq!(r, Some(Rejected { err: ERANGE, index: ops.len() as u32 - 1 }));
            Ok(())
        };
        // More than `FEW` ops (the per-CPU table), and at most `FEW`.
        let (mut big, mut few) = (KVVec::new(), KVVec::new());
        for _ in 0..FEW {
            big.push(op(opcode::RDTSC, 0, 0, [0, 0]), GFP_KERNEL)?;
        }
        for _ in 0..full {
            big.push(d(0), GFP_KERNEL)?;
            big.push(d(1), GFP_KERNEL)?;
            few.push(d(0), GFP_KERNEL)?;
        }
        few.push(d(1), GFP_KERNEL)?;
        assert!(big.len() > FEW && few.len() < FEW);
        one_too_many(big, d(1))?;
        one_too_many(few, d(0))?;
        // A POLL's timeout counts as a DELAY does, also in a few ops on
        // several CPUs (where they were not summed: five 2 ms POLLs and one
        // more on CPU 0 passed).
        let p = |cpu| poll_op(cpu, 0, uapi::poll::F_TSC, (uapi::MAX_POLL_NS / 1000) as u16, [1, 0]);
        let mut polls = KVVec::new();
        polls.push(op(opcode::RDTSC, 1, 0, [0, 0]), GFP_KERNEL)?;
        for _ in 0..uapi::MAX_CPU_DELAY_NS / uapi::MAX_POLL_NS {
            polls.push(p(0), GFP_KERNEL)?;
        }
        one_too_many(polls, p(0))?;
        Ok(())
    }

    /// (helper-24's review.) The sentinel `u32::MAX` of `Plan::many`'s `plain` (first op
    /// neither RDMSR nor RDPMC) is `code_and_flags` of an op with code
    /// 0xffff and flags 0xffff: such an op is taken as a plain read.
    #[test]
    fn no_op_is_plain_unless_it_reads() -> Result {
        let bad = Op { op: 0xffff, flags: 0xffff, ..op(opcode::RDTSC, 0, 0x1234, [0, 0]) };
        let r = Plan::new(&[op(opcode::RDTSC, 0, 0, [0, 0]), bad], 0, 5, |_| true).err();
        assert_eq!(r, Some(Rejected { err: crate::compat::eopnotsupp(), index: 1 }));
        let r = Plan::new(&[bad, bad], 0, 5, |_| true).err();
        assert_eq!(r, Some(Rejected { err: crate::compat::eopnotsupp(), index: 0 }));
        Ok(())
    }

    /// (helper-24's review.) `Plan::new` against a reference of the checks it must make,
    /// op by op in array order, on random batches.
    #[test]
    fn plan_matches_a_reference_of_its_checks() -> Result {
        let possible = |cpu: u32| cpu != 3;
        let mut seed = crate::helpers::XorShift(0x9e37_79b9_7f4a_7c15);
        let mut rnd = move |n: u64| seed.below(n);
        let mut ops = KVVec::with_capacity(80, GFP_KERNEL)?;
        for _ in 0..4000 {
            ops.clear();
            let n = 2 + rnd(70) as usize;
            let bad_rate = [0u64, 0, 4, 32, 200][rnd(5) as usize];
            let ncpus = 1 + rnd(3) as u32;
            let base = if rnd(4) == 0 { opcode::RDPMC } else { opcode::RDMSR };
            let flags = if rnd(2) == 0 { uapi::F_TIMESTAMPS } else { 0 };
            let mut cpu = 0u32;
            for _ in 0..n {
                if rnd(4) == 0 {
                    cpu = rnd(u64::from(ncpus)) as u32;
                }
                let mut o = op(base, cpu, 0x10, [0, 0]);
                if bad_rate != 0 && rnd(bad_rate) == 0 {
                    o = match rnd(14) {
                        0 => Op { flags: 1, ..o },
                        1 => Op { arg: [0, 1], ..o },
                        2 => Op { cpu: 3, ..o },
                        3 => Op { cpu: 5, ..o },
                        4 => op(opcode::RDTSCP, cpu, 0, [0, 0]),
                        5 => op(opcode::RMWMSR, cpu, 0x10, [1, 1]),
                        6 => Op { op: 0xffff, flags: 0xffff, ..o },
                        7 => Op { op: 0, ..o },
                        8 => op(opcode::RDTSC, cpu, 1, [0, 0]),
                        9 => Op { arg: [1, 0], ..o },
                        _ => op(opcode::DELAY, cpu, 0, [uapi::MAX_DELAY_NS, 0]),
                    };
                } else if rnd(6) == 0 {
                    o = match rnd(6) {
                        0 => op(opcode::RDTSC, cpu, 0, [0, 0]),
                        1 => op(opcode::WRMSR, cpu, 0x10, [5, 0]),
                        2 => op(opcode::DELAY, cpu, 0, [uapi::MAX_DELAY_NS, 0]),
                        3 => op(if base == opcode::RDMSR { opcode::RDPMC } else { opcode::RDMSR }, cpu, 0, [0, 0]),
                        4 => op(opcode::CPUID, cpu, 7, [0, 0]),
                        _ => op(opcode::RDCR4, cpu, 0, [0, 0]),
                    };
                }
                if rnd(50) == 0 {
                    o.op = opcode::RDTSC;
                    o.reg = 0;
                    o.arg = [0, 0];
                    o.flags = 0;
                }
                ops.push(o, GFP_KERNEL)?;
            }
            if rnd(5) == 0 {
                // A first op of another kind.
                ops[0] = op(opcode::RDTSC, ops[0].cpu, 0, [0, 0]);
            }
            let want = reference_plan(&ops, flags, 5, possible);
            let got = Plan::new(&ops, flags, 5, possible);
            match (&want, &got) {
                (Err(w), Err(g)) => {
                    if w != g {
                        pr_err!("plan and reference differ: want {:?} got {:?} flags {}\n", w, g, flags);
                        for (i, o) in ops.iter().enumerate() {
                            pr_err!("  op {}: op {} flags {} cpu {} reg {} arg {:?}\n", i, o.op, o.flags, o.cpu, o.reg, o.arg);
                        }
                    }
                    assert_eq!(w, g)
                }
                (Ok((uniform, first_write, nr_writes, _)), Ok(p)) => {
                    assert_eq!((p.uniform, p.first_write, p.nr_writes), (*uniform, *first_write, *nr_writes));
                    let one = ops.iter().all(|o| o.cpu == ops[0].cpu);
                    match &p.targets {
                        Targets::One(c) => assert!(one && *c == ops[0].cpu),
                        Targets::Few => assert!(!one && ops.len() <= FEW),
                        Targets::Many { order, runs } => {
                            assert!(!one && ops.len() > FEW);
                            let mut total = 0;
                            for run in runs.iter() {
                                let count = ops.iter().filter(|o| o.cpu == run.cpu).count();
                                assert_eq!(run.len as usize, count);
                                total += count;
                            }
                            assert_eq!((total, order.len()), (ops.len(), ops.len()));
                        }
                    }
                }
                _ => panic!("plan and reference disagree: {:?} vs {:?}", want.as_ref().err(), got.as_ref().err()),
            }
        }
        Ok(())
    }

    #[test]
    fn plain_reads_are_checked_as_any_op() -> Result {
        // Runs of reads on CPUs 0, 1 and 2 (of 5; 3 does not exist), in a
        // few ops and in many, each a plain op (`Plan::new` skips the checks
        // for those on the CPU of the op before them): op `k` made invalid
        // in one way is named, with the errno of the full checks.
        for code in [opcode::RDMSR, opcode::RDPMC] {
            for n in [2usize, FEW, FEW + 1, 3 * FEW] {
                let base = |i: usize| op(code, (i * 3 / n) as u32, 0x10, [0, 0]);
                let mut ops = KVVec::new();
                for i in 0..n {
                    ops.push(base(i), GFP_KERNEL)?;
                }
                let p = Plan::new(&ops, uapi::F_TIMESTAMPS, 5, |cpu| cpu != 3).map_err(|r| r.err)?;
                assert_eq!((p.uniform, p.first_write), (Some(code), None));
                if let Targets::Many { runs, .. } = &p.targets {
                    // Each CPU's plain ops are counted too.
                    for run in runs.iter() {
                        let count = ops.iter().filter(|o| o.cpu == run.cpu).count();
                        assert_eq!(run.len as usize, count);
                    }
                    assert_eq!(runs.len(), 3);
                }
                let other = if code == opcode::RDMSR { opcode::RDPMC } else { opcode::RDMSR };
                for k in [1, n / 2, n - 1] {
                    let b = base(k);
                    let cases = [
                        (Op { flags: 1, ..b }, 0, EINVAL),
                        (Op { arg: [1, 0], ..b }, 0, EINVAL),
                        (Op { arg: [0, 1], ..b }, 0, EINVAL),
                        (Op { cpu: 3, ..b }, 0, ENODEV),
                        (Op { cpu: 5, ..b }, 0, ENODEV),
                        (Op { op: 0, ..b }, 0, crate::compat::eopnotsupp()),
                        (Op { op: opcode::MAX + 1, ..b }, 0, crate::compat::eopnotsupp()),
                        (Op { op: opcode::RDTSCP, reg: 0, ..b }, uapi::F_TIMESTAMPS, EINVAL),
                        (Op { op: opcode::RDTSC, ..b }, 0, EINVAL),
                        (Op { op: opcode::DELAY, reg: 0, arg: [uapi::MAX_DELAY_NS + 1, 0], ..b }, 0, ERANGE),
                    ];
                    for (bad, flags, err) in cases {
                        let saved = ops[k];
                        ops[k] = bad;
                        let r = Plan::new(&ops, flags, 5, |cpu| cpu != 3).err();
                        ops[k] = saved;
                        assert_eq!(r, Some(Rejected { err, index: k as u32 }));
                    }
                    // Another read among them: valid, and not uniform.
                    ops[k].op = other;
                    let p = Plan::new(&ops, 0, 5, |cpu| cpu != 3).map_err(|r| r.err)?;
                    ops[k].op = code;
                    assert_eq!(p.uniform, None);
                }
            }
        }
        Ok(())
    }

    /// What `reference_plan` says a plan holds: the uniform code, the first
    /// write, the number of writes, and the op indices grouped by CPU.
    type Reference = (Option<u16>, Option<u32>, u32, KVVec<u32>);

    /// What [`Plan::new`] must make of `ops`, by a straightforward model of
    /// the documented checks (each op in array order: its code and operands,
    /// timestamps, its CPU, its CPU's waits) on a machine of `nr_cpus` CPU
    /// numbers, `possible` saying which exist: the uniform code, the first
    /// write, the number of writes, and the op indices grouped by CPU
    /// (ascending), array order within each (a stable sort).
    fn reference_plan(ops: &[Op], flags: u32, nr_cpus: u32, possible: impl Fn(u32) -> bool) -> Result<Reference, Rejected> {
        let mut sums = KVVec::from_elem(0u64, nr_cpus as usize, GFP_KERNEL).map_err(|_| Rejected::batch(ENOMEM))?;
        let (mut first_write, mut nr_writes) = (None, 0u32);
        for (i, o) in ops.iter().enumerate() {
            check_op(o).map_err(|e| Rejected::at(e, i))?;
            if flags & uapi::F_TIMESTAMPS != 0 && !stamps_fit(o, flags) {
                return Err(Rejected::at(EINVAL, i));
            }
            if o.cpu >= nr_cpus || !possible(o.cpu) {
                return Err(Rejected::at(ENODEV, i));
            }
            sums[o.cpu as usize] += wait_ns(o);
            if sums[o.cpu as usize] > uapi::MAX_CPU_DELAY_NS {
                return Err(Rejected::at(ERANGE, i));
            }
            if is_write(o) {
                first_write = first_write.or(Some(i as u32));
                nr_writes += 1;
            }
        }
        let uniform = ops.iter().all(|o| o.op == ops[0].op).then_some(ops[0].op);
        let mut order = KVVec::new();
        let mut cpu = 0u32;
        // Each CPU named, in ascending order: its ops.
        while let Some(next) = ops.iter().map(|o| o.cpu).filter(|&c| c >= cpu).min() {
            for (i, o) in ops.iter().enumerate() {
                if o.cpu == next {
                    order.push(i as u32, GFP_KERNEL).map_err(|_| Rejected::batch(ENOMEM))?;
                }
            }
            match next.checked_add(1) {
                Some(c) => cpu = c,
                None => break,
            }
        }
        Ok((uniform, first_write, nr_writes, order))
    }

    #[test]
    fn plain_loop_hands_over_as_the_reference_checks() -> Result {
        // `Plan::many`'s loop of plain reads (the first op's read code, no
        // flags, no `arg`: it checks only their CPUs), and `Plan::checked`,
        // which goes on from the first op of another kind with what that
        // loop knows, against `reference_plan`: batches of 2 .. 4096 ops on
        // CPU patterns that come back to earlier CPUs, or differ from the
        // first op's only at the last op or in bits past 63 (a machine of
        // 200 CPU numbers, 3 and 100 not possible), with the hand-over at
        // op 0, 1, 31, 32, 33 or the last, to an op of every other kind,
        // valid or not, and after it a write, an impossible or a new CPU,
        // or waits past a CPU's limit. The same errno and op, or the same
        // writes, uniform code and each CPU's ops (the shares of a few ops,
        // the grouping of more) in array order.
        const NR: u32 = 200;
        let possible = |cpu: u32| cpu != 3 && cpu != 100;
        let patterns: [fn(usize, usize) -> u32; 8] = [
            |_, _| 2,
            |i, _| (i % 2) as u32,
            // (`checked_div`: no panic path, which objtool would find.)
            |i, n| (i * 3).checked_div(n).unwrap_or(0) as u32,
            |i, _| [64, 0, 127, 64, 199, 1][i % 6],
            |i, n| if i < n / 3 || i >= 2 * n / 3 { 65 } else { 1 },
            |_, _| 128,
            |i, n| if i + 1 == n { 64 } else { 0 },
            |i, _| [5, 6, 5, 5, 6][i % 5],
        ];
        let mut ops = KVVec::with_capacity(4096, GFP_KERNEL)?;
        let (mut count, mut seen) = (0u64, 0u64);
        for n in [2usize, 3, 31, 32, 33, 64, 4096] {
            for (pat, cpu_of) in patterns.iter().enumerate() {
                for p in [usize::MAX, 0, 1, 31, 32, 33, n - 1] {
                    if p != usize::MAX && p >= n {
                        continue;
                    }
                    for kind in 0..24u32 {
                        for tail in 0..5u32 {
                            // Of a batch of 4096, and of the tails, a few of
                            // the combinations: the debug kernel runs KUnit
                            // at every load of the module (82 s there with
                            // all of them).
                            if n > 64 && !(pat == 3 && p == 4095 && kind == 21 && tail == 0) {
                                continue;
                            }
                            if tail != 0 && (kind + tail) % 4 != 0 {
                                continue;
                            }
                            if p == usize::MAX && (kind != 0 || tail != 0) {
                                continue;
                            }
                            // And of the rest, one in twelve, by turns (30 s
                            // a load on the debug kernel with all of them,
                            // which make check's lifetime stage loads some 40
                            // times).
                            seen += 1;
                            if n <= 64 && seen % 12 != 0 {
                                continue;
                            }
                            count += 1;
                            let code = if (pat + kind as usize) % 3 == 0 { opcode::RDPMC } else { opcode::RDMSR };
                            let other = if code == opcode::RDMSR { opcode::RDPMC } else { opcode::RDMSR };
                            let flags = [0, uapi::F_TIMESTAMPS, uapi::F_STOP_ON_ERROR | F_CONFINED][(count % 3) as usize];
                            ops.clear();
                            for i in 0..n {
                                ops.push(op(code, cpu_of(i, n), 0x10 + i as u32, [0, 0]), GFP_KERNEL)?;
                            }
                            if p != usize::MAX {
                                let b = ops[p];
                                let c = b.cpu;
                                ops[p] = match kind {
                                    0 => op(opcode::WRMSR, c, 0x10, [5, 0]),
                                    1 => op(opcode::RMWMSR, c, 0x10, [1, 1]),
                                    2 => op(opcode::RDTSC, c, 0, [0, 0]),
                                    3 => op(other, c, 0x10, [0, 0]),
                                    4 => op(opcode::DELAY, c, 0, [uapi::MAX_DELAY_NS, 0]),
                                    5 => Op { flags: 1 << uapi::poll::TIMEOUT_SHIFT, ..op(opcode::POLL, c, 0x10, [1, 0]) },
                                    6 => op(opcode::CPUID, c, 7, [0, 0]),
                                    7 => op(opcode::RDCR4, c, 0, [0, 0]),
                                    8 => op(opcode::RDTSCP, c, 0, [0, 0]),
                                    9 => Op { flags: 1, ..b },
                                    10 => Op { flags: 1 << uapi::poll::TIMEOUT_SHIFT, ..b },
                                    11 => Op { arg: [0, 1], ..b },
                                    12 => Op { arg: [1, 0], ..b },
                                    13 => Op { cpu: 3, ..b },
                                    14 => Op { cpu: 100, ..b },
                                    15 => Op { cpu: NR, ..b },
                                    16 => Op { cpu: u32::MAX, ..b },
                                    17 => Op { op: 0, ..b },
                                    18 => Op { op: 0xffff, flags: 0xffff, ..b },
                                    19 => Op { op: opcode::MAX + 1, ..b },
                                    20 => op(opcode::RDTSC, c, 1, [0, 0]),
                                    21 => Op { cpu: 199, ..b },
                                    22 => Op { op: opcode::WRMSR, ..b },
                                    _ => op(opcode::DELAY, c, 0, [uapi::MAX_DELAY_NS + 1, 0]),
                                };
                                let first = ops[0].cpu;
                                match tail {
                                    1 if p + 1 < n => ops[p + 1] = op(opcode::WRMSR, ops[p + 1].cpu, 0x10, [0, 0]),
                                    2 if p + 1 < n => ops[n - 1].cpu = 3,
                                    3 if p + 1 < n => ops[p + 1].cpu = 199,
                                    4 => {
                                        for o in ops.iter_mut().skip(p + 1).take(11) {
                                            *o = op(opcode::DELAY, first, 0, [uapi::MAX_DELAY_NS, 0]);
                                        }
                                    }
                                    _ => {}
                                }
                            }
                            let want = reference_plan(&ops, flags, NR, possible);
                            let got = Plan::new(&ops, flags, NR, possible);
                            let same = match (&want, &got) {
                                (Err(w), Err(g)) => w == g,
                                (Ok((uniform, first_write, nr_writes, order)), Ok(plan)) => {
                                    let one = ops.iter().all(|o| o.cpu == ops[0].cpu);
                                    (plan.uniform, plan.first_write, plan.nr_writes) == (*uniform, *first_write, *nr_writes)
                                        && match &plan.targets {
                                            Targets::One(c) => one && *c == ops[0].cpu,
                                            Targets::Few => {
                                                // Each CPU's share runs its ops, in
                                                // array order: together, `order`.
                                                let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
                                                let mut shares: KVVec<(u32, KVVec<usize>)> = KVVec::new();
                                                for o in few(&mut ops, &mut buf) {
                                                    shares.push((o.cpu, of_cpu(&mut ops, o)?), GFP_KERNEL)?;
                                                }
                                                shares.sort_unstable_by_key(|s| s.0);
                                                let flat = shares.iter().flat_map(|s| s.1.iter().map(|&i| i as u32));
                                                !one && n <= FEW && flat.eq(order.iter().copied())
                                            }
                                            Targets::Many { order: o, runs } => {
                                                let mut at = 0u32;
                                                let runs_fit = runs.iter().enumerate().all(|(k, r)| {
                                                    let fits = r.start == at
                                                        && r.len != 0
                                                        && (k == 0 || runs[k - 1].cpu < r.cpu)
                                                        && o[r.start as usize..(r.start + r.len) as usize]
                                                            .iter()
                                                            .all(|&i| ops[i as usize].cpu == r.cpu);
                                                    at += r.len;
                                                    fits
                                                });
                                                !one && n > FEW && runs_fit && at as usize == n && o[..] == order[..]
                                            }
                                        }
                                }
                                _ => false,
                            };
                            if !same {
                                pr_err!(
                                    "plain_loop_hands_over: n {} pattern {} at {} kind {} tail {} flags {:#x}: want {:?} got {:?} (targets {})\n",
                                    n,
                                    pat,
                                    p as isize,
                                    kind,
                                    tail,
                                    flags,
                                    want.as_ref().map(|w| (w.0, w.1, w.2)),
                                    got.as_ref().map(|g| (g.uniform, g.first_write, g.nr_writes)),
                                    match got.as_ref().map(|g| &g.targets) {
                                        Ok(Targets::One(_)) => "one CPU",
                                        Ok(Targets::Few) => "a few",
                                        Ok(Targets::Many { .. }) => "grouped",
                                        Err(_) => "none",
                                    }
                                );
                            }
                            assert!(same);
                        }
                    }
                }
            }
        }
        pr_info!("plain_loop_hands_over_as_the_reference_checks: {count} batches\n");
        Ok(())
    }

    #[test]
    fn possible_cpus_as_the_kernel_says() -> Result {
        // `cpu_possible` reads the kernel's mask itself: the same answer as
        // the kernel crate's for every CPU number, none beyond the mask.
        // SAFETY: `__cpu_possible_mask` is a valid cpumask for the kernel's
        // lifetime.
        let mask = unsafe { Cpumask::from_raw(&raw const bindings::__cpu_possible_mask) };
        for cpu in 0..nr_cpu_ids() {
            let id = CpuId::from_u32(cpu).ok_or(EINVAL)?;
            assert_eq!(cpu_possible(cpu), mask.test(id));
        }
        assert!(cpu_possible(0));
        let beyond = (size_of::<bindings::cpumask>() * 8) as u32;
        for cpu in [beyond, beyond + 1, u32::MAX - 63, u32::MAX] {
            assert!(!cpu_possible(cpu));
        }
        Ok(())
    }

    #[test]
    fn one_op_plans_as_the_first_of_two() -> Result {
        use uapi::poll;
        let rdmsr = op(opcode::RDMSR, 0, 0x10, [0, 0]);
        let mut ops = KVVec::new();
        for code in 0..=opcode::MAX + 1 {
            for cpu in [0, 3, 4] {
                ops.push(op(code, cpu, 0, [0, 0]), GFP_KERNEL)?;
                ops.push(op(code, cpu, 0x10, [0xff, 0x1]), GFP_KERNEL)?;
            }
        }
        for o in [
            Op { flags: 1, ..rdmsr },
            // (A plain read, which `Plan::one` does not check as an op, but
            // for its flags and `arg` in one test.)
            Op { flags: 1 << 15, ..rdmsr },
            Op { op: opcode::RDPMC, flags: 1, ..rdmsr },
            op(opcode::RDMSR, 1, 0x10, [0, 1]),
            op(opcode::RDPMC, 1, 0x10, [1, 0]),
            op(opcode::RDPMC, 2, 0, [0, 0]),
            op(opcode::CPUID, 1, 7, [u64::from(u32::MAX), 0]),
            op(opcode::CPUID, 1, 7, [1 << 32, 0]),
            op(opcode::DELAY, 1, 0, [uapi::MAX_DELAY_NS, 0]),
            op(opcode::DELAY, 1, 0, [uapi::MAX_DELAY_NS + 1, 0]),
            poll_op(1, 0, poll::F_TSC, (uapi::MAX_POLL_NS / 1000) as u16, [1, 0]),
            poll_op(1, 0, poll::F_TSC, 0, [1, 0]),
            poll_op(1, 0, poll::F_TSC, (uapi::MAX_POLL_NS / 1000) as u16 + 1, [1, 0]),
            poll_op(1, 0x10, 0, 10, [1, 0]),
        ] {
            ops.push(o, GFP_KERNEL)?;
        }
        // `Plan::one` against `Plan::new`'s loop, which checks the same op
        // first in a batch of two (the second, an RDTSC on its CPU, is
        // valid wherever the first's CPU is).
        for flags in [0, uapi::F_TIMESTAMPS, uapi::F_TIMESTAMPS | F_MASKED_WRITES, F_CONFINED | uapi::F_STOP_ON_ERROR] {
            for o in ops.iter() {
                let one = Plan::new(&[*o], flags, 4, |cpu| cpu != 3);
                let two = Plan::new(&[*o, op(opcode::RDTSC, o.cpu, 0, [0, 0])], flags, 4, |cpu| cpu != 3);
                match (one, two) {
                    (Ok(a), Ok(b)) => {
                        assert!(matches!(a.targets, Targets::One(cpu) if cpu == o.cpu));
                        assert!(matches!(b.targets, Targets::One(cpu) if cpu == o.cpu));
                        assert_eq!((a.first_write, a.nr_writes, a.flags), (b.first_write, b.nr_writes, b.flags));
                        assert_eq!(a.uniform, Some(o.op));
                    }
                    (Err(a), Err(b)) => assert_eq!((a, a.index), (b, 0)),
                    (a, b) => panic!("op {} on CPU {}: one op {}, two {}", o.op, o.cpu, a.is_ok(), b.is_ok()),
                }
            }
        }
        Ok(())
    }

    /// Runs `ops` (no writes) on the current CPU through the real cross-call path.
    fn run_here(ops: &mut [Op], stop: bool) -> Result<u32, Rejected> {
        let p = plan(ops, if stop { uapi::F_STOP_ON_ERROR } else { 0 })?;
        assert!(!p.has_writes());
        // SAFETY: The batch does not write.
        unsafe { execute(ops, &p) }.map(|e| e.nr_failed)
    }

    #[test]
    fn executes_every_op_locally() -> Result {
        use crate::busy::{RETRIES, RETRY_SLEEP_MS};
        use kernel::time::{delay::fsleep, Delta};
        let cpu = CpuId::current().as_u32();
        let batch = [
            op(opcode::RDTSC, cpu, 0, [0, 0]),
            op(opcode::CPUID, cpu, 0, [0, 0]),
            op(opcode::DELAY, cpu, 0, [1000, 0]),
            op(opcode::RDTSCP, cpu, 0, [0, 0]),
            op(opcode::RDMSR, cpu, 0x277, [0, 0]), // IA32_PAT
            op(opcode::RDCR4, cpu, 0, [0, 0]),
        ];
        // The ops may run on another CPU than `cpu` if we migrate; that is
        // fine: every op is still executed by the CPU it names.
        let mut ops = batch;
        let mut failed = run_here(&mut ops, false);
        // The CPU's busy credit is wall time, which a vCPU the host preempts
        // with interrupts off spends too: a batch whose only failures are
        // -ETIME (those ops did nothing) runs again once the credit has
        // refilled, as `busy::execute_until_run` retries. Any other failure
        // fails at once.
        let only_etime = |ops: &[Op]| {
            ops.iter().any(|o| o.status == status::ETIME)
                && ops.iter().all(|o| o.status == 0 || o.status == status::ETIME)
        };
        for _ in 0..RETRIES {
            if !only_etime(&ops) {
                break;
            }
            fsleep(Delta::from_millis(RETRY_SLEEP_MS.into()));
            ops = batch;
            failed = run_here(&mut ops, false);
        }
        assert_eq!(failed, Ok(0));
        for o in &ops {
            assert_eq!(o.status, 0);
        }
        assert!(ops[3].val[0] > ops[0].val[0]);
        assert!(ops[1].val[0] as u32 >= 1); // max basic leaf
        assert!(ops[2].val[0] > 0); // TSC ticks across the delay
        assert!(ops[4].val[0] != 0); // PAT is never all-UC
        assert!(ops[5].val[0] & (1 << 5) != 0); // CR4.PAE is set on x86-64
        Ok(())
    }

    #[test]
    fn busy_budget_stops_the_sequence() -> Result {
        let mut ops = [op(opcode::RDTSC, 0, 0, [0, 0]); 40];
        let mode = |busy_tsc, uniform| Mode { stop_on_error: false, stamps: false, busy_tsc, confined: false, start: 0, uniform };
        // SAFETY: No op writes.
        let failed = unsafe { run_sequence(InPlace.pair(&mut ops), mode(0, None), InPlace) };
        assert!(failed == 40 && ops.iter().all(|o| o.status == status::ETIME && o.val == [0, 0]));
        // SAFETY: No op writes.
        let failed = unsafe { run_sequence(InPlace.pair(&mut ops), mode(u64::MAX, Some(opcode::RDTSC)), InPlace) };
        assert!(failed == 0 && ops.iter().all(|o| o.status == 0 && o.val[0] != 0));
        Ok(())
    }

    /// A batch of one op runs in a copy of its own (`execute_on`, `ONE`):
    /// each op, with each mode, gets the status and the values it gets as
    /// the first op of a batch of two, which the copy for several ops runs.
    /// (The copy that puts them straight into a prepared batch's result is
    /// the same code, and `prepared_test` checks its results; calling it
    /// here too moved the module's code: a prepared rerun cost 6 more.)
    #[test]
    fn one_op_runs_as_the_first_of_two() -> Result {
        let cpu = CpuId::current().as_u32();
        // ECX 0x7fff_0000 is no counter on any CPU: #GP with a PMU, #UD without.
        let ops = [
            op(opcode::RDMSR, cpu, 0x277, [0, 0]), // IA32_PAT
            op(opcode::RDPMC, cpu, 0x7fff_0000, [0, 0]),
            op(opcode::CPUID, cpu, 0, [0, 0]),
            op(opcode::RDCR4, cpu, 0, [0, 0]),
            op(opcode::DELAY, cpu, 0, [1000, 0]),
            op(opcode::RDTSC, cpu, 0, [0, 0]),
        ];
        // The values that do not change from one read to the next.
        let same = |code| matches!(code, opcode::RDMSR | opcode::RDPMC | opcode::CPUID | opcode::RDCR4);
        let etime = |o: &Op| o.status == status::ETIME;
        let mut compared = 0;
        for flags in [0, uapi::F_TIMESTAMPS, uapi::F_STOP_ON_ERROR] {
            for o in ops {
                let mut one = [o];
                let mut two = [o, op(opcode::RDTSC, cpu, 0, [0, 0])];
                let (Ok(p1), Ok(p2)) = (plan(&one, flags), plan(&two, flags)) else {
                    // (A CPUID with timestamps: both refused.)
                    assert!(plan(&one, flags).is_err() && plan(&two, flags).is_err());
                    continue;
                };
                // SAFETY: No op writes.
                let (r1, r2) = unsafe { (execute(&mut one, &p1), execute(&mut two, &p2)) };
                let (r1, r2) = (r1.map_err(|r| r.err)?, r2.map_err(|r| r.err)?);
                // The CPU's credit is wall time, which a host that preempts
                // the vCPU spends too: an op it left unrun is not compared.
                if etime(&one[0]) || etime(&two[0]) {
                    continue;
                }
                assert_eq!(one[0].status, two[0].status);
                assert_eq!(r1.nr_failed, u32::from(one[0].status != 0));
                if same(o.op) {
                    assert_eq!(one[0].val[0], two[0].val[0]);
                }
                if flags & uapi::F_TIMESTAMPS != 0 && one[0].status == 0 {
                    assert!(one[0].val[1] != 0);
                }
                assert_eq!(r2.nr_failed, u32::from(two[0].status != 0) + u32::from(two[1].status != 0));
                compared += 1;
            }
        }
        assert!(compared > 0);
        Ok(())
    }

    #[test]
    fn outputs_go_straight_to_the_results() -> Result {
        let cpu = CpuId::current().as_u32();
        // ECX 0x7fff_0000 is no counter on any CPU: #GP with a PMU, #UD without.
        let bad = op(opcode::RDPMC, cpu, 0x7fff_0000, [0, 0]);
        let tsc = op(opcode::RDTSC, cpu, 0, [0, 0]);
        let mode = Mode { stop_on_error: true, stamps: false, busy_tsc: u64::MAX, confined: false, start: 0, uniform: None };
        let mut ops = [tsc, bad, tsc, tsc];
        for o in ops.iter_mut() {
            (o.status, o.val) = (99, [5, 6]);
        }
        // Four results, and a word either side that must stay as it is.
        let mut area = [u64::MAX; 3 * 4 + 2];
        // SAFETY: `area[1..]` has room for the four results, 8-byte aligned,
        // and outlives `out`.
        let out = unsafe { ToResults::new(area[1..].as_mut_ptr().cast(), ops.len()) };
        // SAFETY: No op writes.
        assert_eq!(unsafe { run_sequence(out.pair(&mut ops), mode, out) }, 3);
        // The ops keep what they had; each result has its op's outputs.
        assert!(ops.iter().all(|o| o.status == 99 && o.val == [5, 6]));
        assert!(area[1] == 0 && area[2] != 0 && area[3] == 0);
        assert_eq!(area[4..7], [u64::from(status::EIO as u32), 0, 0]);
        assert_eq!(area[7..10], [u64::from(status::ECANCELED as u32), 0, 0]);
        assert_eq!(area[10..13], [u64::from(status::ECANCELED as u32), 0, 0]);
        assert_eq!((area[0], area[13]), (u64::MAX, u64::MAX));
        // A run needs one result per op: with one result fewer, or more,
        // nothing runs and nothing is written.
        let mut ops = [tsc; 4];
        let plan = plan(&ops, 0).map_err(|r| r.err)?;
        let mut spare = [u64::MAX; 3 * 5];
        for nr in [ops.len() - 1, ops.len() + 1] {
            // SAFETY: `spare` has room for five results, 8-byte aligned, and
            // outlives `out`.
            let out = unsafe { ToResults::new(spare.as_mut_ptr().cast(), nr) };
            // SAFETY: No op writes.
            assert!(unsafe { execute_into(&mut ops, &plan, out) }.is_none());
        }
        assert!(spare == [u64::MAX; 3 * 5] && ops.iter().all(|o| o.status == 0 && o.val == [0, 0]));
        Ok(())
    }

    #[test]
    fn faults_become_eio_and_stop_cancels() -> Result {
        let cpu = CpuId::current().as_u32();
        // ECX 0x7fff_0000 is no counter on any CPU: #GP with a PMU, #UD without.
        let bad = op(opcode::RDPMC, cpu, 0x7fff_0000, [0, 0]);
        let tsc = op(opcode::RDTSC, cpu, 0, [0, 0]);
        // No busy budget: the CPU's credit is wall time, which a vCPU the host
        // preempts with interrupts off spends too (in a clean-clone CI run
        // beside make fuzz, this test's second batch, run through `execute`,
        // came back with another failure count, most likely ETIME).
        let mode = |stop_on_error| Mode { stop_on_error, stamps: false, busy_tsc: u64::MAX, confined: false, start: 0, uniform: None };
        let mut ops = [tsc, bad, tsc];
        // SAFETY: No op writes.
        assert_eq!(unsafe { run_sequence(InPlace.pair(&mut ops), mode(false), InPlace) }, 1);
        assert_eq!([ops[0].status, ops[1].status, ops[2].status], [0, status::EIO, 0]);
        assert_eq!(ops[1].val, [0, 0]);
        let mut ops = [tsc, bad, tsc];
        // SAFETY: No op writes.
        assert_eq!(unsafe { run_sequence(InPlace.pair(&mut ops), mode(true), InPlace) }, 2);
        assert_eq!(
            [ops[0].status, ops[1].status, ops[2].status],
            [0, status::EIO, status::ECANCELED]
        );
        Ok(())
    }

    /// Batches on CPUs 0 and 1, chained (24 ops) and grouped (40), each
    /// mode (stop-on-error, synchronised, confined, timestamps) with DELAYs
    /// that drain the credit, POLLs that time out and a faulting RDPMC: every
    /// op gets a status, `nr_failed` counts those not 0, and a start called
    /// off leaves the ops as they were (helper-19's review test). Last: it
    /// leaves CPUs 0 and 1 with little credit.
    #[test]
    fn every_op_gets_a_status_and_is_counted() -> Result {
        if !(cpu_online_now(0) && cpu_online_now(1)) {
            pr_info!("every_op_gets_a_status_and_is_counted: CPUs 0 and 1 not both online\n");
            return Ok(());
        }
        let flags = [
            0,
            uapi::F_STOP_ON_ERROR,
            uapi::F_SYNC_START,
            F_CONFINED,
            F_CONFINED | uapi::F_STOP_ON_ERROR,
            uapi::F_TIMESTAMPS,
            F_CONFINED | uapi::F_SYNC_START,
        ];
        let (mut ran, mut failed) = (0, 0);
        for round in 0..60usize {
            let flags = flags[round % flags.len()];
            let n = if round % 3 == 0 { FEW + 8 } else { 24 };
            let mut ops = KVVec::with_capacity(n, GFP_KERNEL)?;
            for i in 0..n {
                let c = (i % 2) as u32;
                let mut o = match i % 8 {
                    1 | 2 => op(opcode::DELAY, c, 0, [1_000_000, 0]),
                    5 if flags & uapi::F_TIMESTAMPS == 0 => poll_op(c, 0, uapi::poll::F_TSC, 500, [0, 0]),
                    7 if round % 2 == 0 => op(opcode::RDPMC, c, 0x7fff_0000, [0, 0]),
                    _ => op(opcode::RDTSC, c, 0, [0, 0]),
                };
                (o.status, o.val) = (99, [5, 6]);
                ops.push(o, GFP_KERNEL)?;
            }
            let p = plan(&ops, flags).map_err(|r| r.err)?;
            // SAFETY: The batch does not write.
            match unsafe { execute(&mut ops, &p) } {
                Ok(e) => {
                    assert!(ops.iter().all(|o| o.status != 99));
                    let nonzero = ops.iter().filter(|o| o.status != 0).count();
                    assert_eq!(e.nr_failed as usize, nonzero);
                    ran += 1;
                    failed += nonzero;
                }
                Err(r) => {
                    assert_eq!(r.err, ETIMEDOUT);
                    assert!(ops.iter().all(|o| o.status == 99 && o.val == [5, 6]));
                }
            }
        }
        pr_info!("every_op_gets_a_status_and_is_counted: {ran} of 60 ran, {failed} ops failed\n");
        Ok(())
    }

    #[test]
    fn a_mask_word_is_the_mask_set_makes() -> Result {
        // Each set of CPUs among the first four (those there are), and one
        // past the CPU numbers if the machine has fewer than 64.
        let n = nr_cpu_ids().min(4);
        for set in 1u64..1 << n {
            let cpus: KVVec<u32> = {
                let mut v = KVVec::new();
                for c in (0..n).filter(|c| set >> c & 1 != 0) {
                    v.push(c, GFP_KERNEL)?;
                }
                v
            };
            let outcomes: KVVec<Outcome> = {
                let mut v = KVVec::new();
                for &c in cpus.iter() {
                    v.push(Outcome::new(c, core::ptr::null_mut()), GFP_KERNEL)?;
                }
                v
            };
            let (mut by_word, mut by_set) = (BatchMask::new()?, BatchMask::new()?);
            let _hotplug = CpusReadGuard::new();
            assert_eq!(by_word.set_word(set), by_set.set(&outcomes));
            let (w, s) = (by_word.as_ptr().cast_mut(), by_set.as_ptr().cast_mut());
            for c in 0..nr_cpu_ids() as i32 {
                // SAFETY: Masks `set_word` and `set` made, alive meanwhile,
                // which the kernel's function only reads.
                assert_eq!(unsafe { bindings::cpumask_test_cpu(c, w) }, unsafe { bindings::cpumask_test_cpu(c, s) });
            }
        }
        if nr_cpu_ids() < 64 {
            let mut mask = BatchMask::new()?;
            let _hotplug = CpusReadGuard::new();
            assert_eq!(mask.set_word(1 << nr_cpu_ids()), Err(ENXIO));
        }
        Ok(())
    }

    #[test]
    fn kept_shares_run_as_made_ones() -> Result {
        if !(cpu_online_now(0) && cpu_online_now(1)) {
            pr_info!("kept_shares_run_as_made_ones: CPUs 0 and 1 not both online\n");
            return Ok(());
        }
        for flags in [0, uapi::F_SYNC_START, F_CONFINED, uapi::F_TIMESTAMPS] {
            let mut ops = rdtscs(&[1, 0, 1, 1, 0, 1])?;
            let p = plan(&ops, flags).map_err(|r| r.err)?;
            let Some(kept) = KeptShares::of(&mut ops, &p)? else {
                panic!("a batch on two CPUs keeps its shares");
            };
            // The shares a run would make, and their CPUs' mask.
            let mut buf = [const { MaybeUninit::<Outcome>::uninit() }; FEW];
            let made = few(&mut ops, &mut buf);
            assert_eq!(made.len(), kept.outcomes.len());
            for (m, k) in made.iter().zip(kept.outcomes.iter()) {
                assert!(m.cpu == k.cpu && m.first == k.first && m.end == k.end);
            }
            // CPUs 0 and 1: a run checks them online with one word.
            assert_eq!(kept.word, Some(0b11));
            let mask = kept.mask.as_ptr();
            // SAFETY: A mask `BatchMask::set` made, alive meanwhile, which
            // the kernel's function only reads.
            let bits = |c: u32| unsafe { bindings::cpumask_test_cpu(c as i32, mask.cast_mut()) };
            // Each run, on the kept shares and then on a copy of the ops
            // elsewhere (whose shares are made anew), gives every op a
            // status and counts the failed ones.
            for round in 0..4 {
                let mut copy = KVVec::with_capacity(ops.len(), GFP_KERNEL)?;
                copy.extend_from_slice(&ops, GFP_KERNEL)?;
                let on = if round % 2 == 0 { &mut ops } else { &mut copy };
                on.iter_mut().for_each(|o| (o.status, o.val) = (99, [5, 6]));
                // SAFETY: The batch does not write.
                match unsafe { execute_kept(on, &p, Some(&kept)) } {
                    Ok(e) => {
                        assert!(on.iter().all(|o| o.status != 99));
                        assert_eq!(e.nr_failed as usize, on.iter().filter(|o| o.status != 0).count());
                    }
                    Err(r) => assert_eq!(r.err, ETIMEDOUT),
                }
                // The kept reports are `UNRUN` again for the next run.
                assert!(kept.outcomes.iter().all(|o| o.failed.load(Ordering::Relaxed) == UNRUN));
                // The kept mask stays that of the shares' CPUs.
                assert!(bits(0) && bits(1) && (2..nr_cpu_ids()).all(|c| !bits(c)));
            }
        }
        Ok(())
    }
}
