// SPDX-License-Identifier: GPL-2.0

//! Restore on close: a file that asks for it (`MSRBATCH_IOC_RESTORE_ON_CLOSE`)
//! has every MSR it writes put back, per CPU, when the process that asked
//! (the log's *owner*, a thread group) closes a descriptor of it or exits,
//! also when it is killed, or on `MSRBATCH_IOC_RESTORE_NOW`.
//!
//! A file outlives its descriptors: a `fork()` child inherits it, another
//! process gets it by `SCM_RIGHTS` or `pidfd_getfd()`, and only the last
//! close releases it. So the restore does not wait for the release: the
//! file's `flush`, which every close of a descriptor runs (also the closes at
//! exit), restores when the closing task is of the owner's thread group
//! ([`RestoreLog::owner_closes`]). From then on the log is *closed*: batches
//! that write through the file, whoever holds it, are refused (`EPIPE`), so
//! nothing the restore promised to undo can be written after it. The
//! release restores whatever is left (a log that was never closed).
//!
//! Before a batch that writes runs, the log reads, on the CPUs concerned and
//! in one batch, every (CPU, MSR) pair the batch writes that it has not seen
//! yet: the value there just before the file's first write to it. Restoring
//! writes them back, one batch per CPU, so an offline CPU does not keep the
//! others from being restored; what cannot be restored (CPU offline, write
//! faulted) is logged, never an oops.
//!
//! Restores are MSR writes like any other: under `LOCKDOWN_MSR` (also a
//! lockdown that came after the values were logged) nothing is written
//! (`MSRBATCH_IOC_RESTORE_NOW` fails with `EPERM` and keeps the log; a close
//! logs what it could not put back), and a restore that wrote taints the
//! kernel (`TAINT_CPU_OUT_OF_SPEC`).

use crate::batch::{self, is_write};
use crate::helpers::ThreadGroup;
use crate::uapi::{opcode, Op};
use kernel::prelude::*;

/// The value of one MSR on one CPU before the file first wrote it.
#[derive(Clone, Copy)]
struct Saved {
    cpu: u32,
    msr: u32,
    value: u64,
}

/// A file's restore log: sorted by (CPU, MSR), one entry per pair.
pub(crate) struct RestoreLog {
    saved: KVec<Saved>,
    /// The process that asked for it.
    owner: ThreadGroup,
    /// The owner closed a descriptor of the file, or exited: restored, and
    /// no more writes.
    closed: bool,
}

impl RestoreLog {
    /// A log owned by the caller's process; `EXDEV` while its descriptor
    /// table is shared outside it (its exit would close nothing).
    pub(crate) fn new() -> Result<Self> {
        if crate::helpers::files_shared_outside_group() {
            return Err(EXDEV);
        }
        Ok(RestoreLog {
            saved: KVec::new(),
            owner: ThreadGroup::current()?,
            closed: false,
        })
    }

    /// `MSRBATCH_IOC_RESTORE_ON_CLOSE` on a file that has a log: nothing to
    /// do for its owner; `EBUSY` for another process (the log restores when
    /// the owner closes, not when the caller does), `EPIPE` once closed.
    pub(crate) fn ask_again(&self) -> Result {
        if self.closed {
            Err(EPIPE)
        } else if !self.owner.is_current() {
            Err(EBUSY)
        } else {
            Ok(())
        }
    }

    /// A descriptor of the file is being closed (its `flush`): if the
    /// closing task is of the owner's process, restores and closes the log.
    pub(crate) fn owner_closes(&mut self) {
        if self.closed || !self.owner.is_current() {
            return;
        }
        self.close();
    }

    /// Restores and closes the log, as the owner's close does.
    fn close(&mut self) {
        self.closed = true;
        if self.restore() == Err(EPERM) {
            pr_warn!("restore on close: kernel locked down, MSRs not restored\n");
        }
    }

    fn find(&self, cpu: u32, msr: u32) -> core::result::Result<usize, usize> {
        self.saved.binary_search_by_key(&(cpu, msr), |s| (s.cpu, s.msr))
    }

    /// Reads, before `ops` run, every MSR they write that is not logged yet.
    /// An MSR whose read faults is not logged (its write will fault too).
    /// `EPIPE` once the log is closed: the batch must not run; also once the
    /// owner has exited without closing the file (another process shared
    /// its descriptor table, so its exit closed nothing): the log restores
    /// and closes then. `EXDEV` while the caller's descriptor table is shared
    /// outside its process (the owner's, or a `clone(CLONE_FILES)` process
    /// that shares the owner's): the owner's exit would not restore what the
    /// batch writes.
    pub(crate) fn save(&mut self, ops: &[Op]) -> Result<(), batch::Rejected> {
        if self.closed {
            return Err(EPIPE.into());
        }
        if !self.owner.is_current() && !self.owner.is_alive() {
            self.close();
            return Err(EPIPE.into());
        }
        if crate::helpers::files_shared_outside_group() {
            return Err(EXDEV.into());
        }
        let mut reads = KVVec::new();
        for op in ops.iter().filter(|op| is_write(op) && self.find(op.cpu, op.reg).is_err()) {
            let read = Op {
                op: opcode::RDMSR,
                cpu: op.cpu,
                reg: op.reg,
                ..Op::default()
            };
            reads.push(read, GFP_KERNEL_ACCOUNT)?;
        }
        if reads.is_empty() {
            return Ok(());
        }
        // One read per (CPU, MSR): sort, then keep the first of each run.
        crate::compat::sort_by_key(&mut reads, |r| (r.cpu, r.reg));
        let mut kept = 0;
        for i in 0..reads.len() {
            if kept == 0 || (reads[i].cpu, reads[i].reg) != (reads[kept - 1].cpu, reads[kept - 1].reg) {
                reads[kept] = reads[i];
                kept += 1;
            }
        }
        reads.truncate(kept);
        // SAFETY: Reads only.
        unsafe { crate::busy::execute_until_run(&mut reads) }?;
        // A read the busy credit never let run would leave its MSR
        // unrestorable: the batch does not run (nothing was written).
        if reads.iter().any(|r| r.status == batch::status::ETIME) {
            return Err(EAGAIN.into());
        }
        // The pairs read are none of the logged ones: append, then sort.
        self.saved.reserve(reads.len(), GFP_KERNEL_ACCOUNT)?;
        for r in reads.iter().filter(|r| r.status == 0) {
            let s = Saved {
                cpu: r.cpu,
                msr: r.reg,
                value: r.val[0],
            };
            self.saved.push_within_capacity(s).map_err(|_| ENOMEM)?;
        }
        crate::compat::sort_by_key(&mut self.saved, |s| (s.cpu, s.msr));
        Ok(())
    }

    /// Writes every logged value back and empties the log. Returns how many
    /// could not be restored (each CPU's failures are logged); `EPERM`, with
    /// the log kept and nothing written, when the kernel's lockdown forbids
    /// MSR writes.
    pub(crate) fn restore(&mut self) -> Result<usize> {
        if self.saved.is_empty() {
            return Ok(0);
        }
        if crate::policy::msr_writes_locked_down() {
            return Err(EPERM);
        }
        let saved = core::mem::take(&mut self.saved);
        let mut failed = 0;
        let mut rest = &saved[..];
        while let Some(first) = rest.first() {
            let n = rest.iter().take_while(|s| s.cpu == first.cpu).count();
            let (mine, later) = rest.split_at(n);
            rest = later;
            let bad = restore_cpu(first.cpu, mine);
            if bad != 0 {
                pr_warn!("restore: {bad} of {n} MSRs of CPU {} not restored\n", first.cpu);
            }
            failed += bad;
        }
        Ok(failed)
    }
}

/// Restores `saved`, all of CPU `cpu`, in one batch; returns the failures.
fn restore_cpu(cpu: u32, saved: &[Saved]) -> usize {
    let mut ops = KVVec::new();
    for s in saved {
        let op = Op {
            op: opcode::WRMSR,
            cpu,
            reg: s.msr,
            arg: [s.value, 0],
            // Until it runs: an op whose batch fails before it runs did
            // not write (and does not taint).
            status: batch::status::ETIME,
            ..Op::default()
        };
        if ops.push(op, GFP_KERNEL_ACCOUNT).is_err() {
            return saved.len();
        }
    }
    // SAFETY: These writes put back values that were in these MSRs before
    // this file wrote them: they undo writes that were allowed, and the
    // caller checked that lockdown does not forbid MSR writes now.
    let done = unsafe { crate::busy::execute_until_run(&mut ops) };
    // Whatever ran, also when some ops failed: a restore is a raw MSR write.
    crate::policy::taint_if_written(&ops);
    match done {
        Ok(nr_failed) => nr_failed as usize,
        Err(r) => {
            pr_warn!("restore: CPU {cpu}: error {:?} (offline?)\n", r.err);
            saved.len()
        }
    }
}
