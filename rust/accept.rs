// SPDX-License-Identifier: GPL-2.0

//! The accept pipeline: from a batch header and the ops array in user memory
//! to ops the module may run, for `MSRBATCH_IOC_BATCH` and
//! `MSRBATCH_IOC_PREPARE` alike.
//!
//! Each step refuses with the errno (and the op to blame) the ABI gives, in
//! this order:
//!
//! 1. [`Incoming::new`]: the header (`batch::check_header`), a descriptor
//!    open for reading (`EBADF`: every batch returns what it read), an ops
//!    address that fits (`EFAULT`).
//! 2. [`Incoming::accept`]: the ops are copied in (`EFAULT`), validated and
//!    planned (`batch::plan`), checked against the allowlist of a confined
//!    descriptor, which keeps only batches that read
//!    ([`Purpose::Keep`], `EPERM`), and pass the write checks
//!    (`policy::check_writes`).
//!
//! What comes out, an [`Accepted`] batch (or a [`Kept`] one), runs as the
//! checks found it: [`Accepted::run`] masks a confined descriptor's writes,
//! runs, taints after a write, and copies the results and the header's
//! outputs back.

use crate::allowlist::Snapshot;
use crate::batch::{self, Executed, Plan, Rejected};
use crate::policy::{self, Access};
use crate::uapi::{self, Batch, Op};
use core::mem::MaybeUninit;
use kernel::{prelude::*, uaccess::UserPtr};

use crate::helpers::{read_ops, write_ran, write_results};

/// Who asks: what the descriptor was opened for and, for one opened without
/// `CAP_SYS_RAWIO`, the allowlist in force at its open.
#[derive(Clone, Copy)]
pub(crate) struct Caller<'a> {
    access: Access,
    rules: Option<&'a Snapshot>,
}

impl<'a> Caller<'a> {
    /// A descriptor opened for `access`, confined by `rules` if given (one
    /// opened without `CAP_SYS_RAWIO`).
    pub(crate) fn new(access: Access, rules: Option<&'a Snapshot>) -> Self {
        Caller { access, rules }
    }
}

impl Caller<'_> {
    /// The batch flags `flags` as this caller's batches are planned with:
    /// [`batch::F_CONFINED`] added for a descriptor opened without
    /// `CAP_SYS_RAWIO` (its shares leave each CPU's busy credit its reserve).
    fn plan_flags(&self, flags: u32) -> u32 {
        if self.rules.is_some() {
            flags | batch::F_CONFINED
        } else {
            flags
        }
    }
}

/// What a batch is accepted for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// To run now (`MSRBATCH_IOC_BATCH`).
    Run,
    /// To keep and run again (`MSRBATCH_IOC_PREPARE`). Masked writes are not
    /// kept for reruns: a confined descriptor keeps batches that only read.
    Keep,
}

/// A batch whose header passed its checks: where its ops are, and how many.
pub(crate) struct Incoming {
    ptr: UserPtr,
    len: usize,
    flags: u32,
}

impl Incoming {
    /// Checks the header `hdr` for a descriptor opened for `access`.
    #[inline(always)]
    pub(crate) fn new(hdr: &Batch, access: Access) -> Result<Self, Rejected> {
        batch::check_header(hdr)?;
        // Every batch returns what it read: it needs a descriptor open for reading.
        if !access.read {
            return Err(EBADF.into());
        }
        Ok(Incoming {
            ptr: UserPtr::from_addr(usize::try_from(hdr.ops).map_err(|_| EFAULT)?),
            len: hdr.nr_ops as usize,
            flags: hdr.flags,
        })
    }

    /// The number of ops (at most `MSRBATCH_MAX_OPS`).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies the ops into `dst` (as many as it holds: [`Incoming::len`]),
    /// validates and plans them, checks them against `caller`'s rules and
    /// the write checks, and hands the [`Accepted`] batch to `then`. (The
    /// batch is lent, not returned: it is built once, where it stays.)
    #[inline(always)]
    pub(crate) fn accept<R>(
        &self,
        dst: &mut [MaybeUninit<Op>],
        caller: Caller<'_>,
        purpose: Purpose,
        then: impl FnOnce(Accepted<'_>) -> Result<R, Rejected>,
    ) -> Result<R, Rejected> {
        let ops = read_ops(self.ptr, dst)?;
        // The plan stays where `batch::plan` made it: moved out of the
        // `Result`, it would be copied (`rep movs`) on the path of
        // every batch.
        let flags = caller.plan_flags(self.flags);
        let mut planned = batch::plan(ops, flags);
        let plan = planned.as_mut().map_err(|r| *r)?;
        check(ops, plan, caller, purpose)?;
        // INVARIANT: `plan` was made from `ops`, which passed `caller`'s
        // checks.
        let ran = then(Accepted {
            ops,
            plan,
            ptr: self.ptr,
            flags,
            rules: caller.rules,
        });
        if let Ok(plan) = planned {
            plan.free();
        }
        ran
    }

    /// Copies the ops, for [`Purpose::Keep`], into memory of their own and
    /// checks them as [`Incoming::accept`] does.
    pub(crate) fn keep(&self, caller: Caller<'_>) -> Result<Kept, Rejected> {
        let mut ops = KVVec::<Op>::with_capacity(self.len, GFP_KERNEL_ACCOUNT)?;
        let read = read_ops(self.ptr, &mut ops.spare_capacity_mut()[..self.len])?;
        let plan = batch::plan(read, caller.plan_flags(self.flags))?;
        check(read, &plan, caller, Purpose::Keep)?;
        // SAFETY: `read_ops` initialised the first `len` ops.
        unsafe { ops.inc_len(self.len) };
        // INVARIANT: `plan` was made from these ops, which passed the checks.
        Ok(Kept { ops, plan })
    }
}

/// Checks and runs `ops`, made in the kernel (the msr-safe personality,
/// `msr_safe.rs`), for `caller`, as [`Incoming::accept`] and
/// [`Accepted::run`] check and run a batch from user space: the results stay
/// in `ops`.
pub(crate) fn run_in_kernel(ops: &mut [Op], caller: Caller<'_>) -> Result<Executed, Rejected> {
    let mut plan = batch::plan(ops, 0)?;
    check(ops, &plan, caller, Purpose::Run)?;
    // INVARIANT: `plan` was made from `ops`, which passed `caller`'s checks;
    // `ptr` is never used (`run_here`).
    Accepted {
        ops,
        plan: &mut plan,
        ptr: UserPtr::from_addr(0),
        flags: 0,
        rules: caller.rules,
    }
    .run_here()
    .map(|(ran, _)| ran)
}

/// Checks `ops`, planned as `plan`, against `caller`'s rules (for
/// `purpose`) and the write checks.
#[inline(always)]
fn check(ops: &[Op], plan: &Plan, caller: Caller<'_>, purpose: Purpose) -> Result<(), Rejected> {
    if let Some(r) = caller.rules {
        r.check(ops)?;
        if let (Purpose::Keep, Some(index)) = (purpose, plan.first_write()) {
            return Err(Rejected { err: EPERM, index });
        }
    }
    // (Not a call for a batch that only reads.)
    if plan.has_writes() {
        policy::check_writes(ops, plan, caller.access)?;
    }
    Ok(())
}

/// A batch accepted to run now, as `caller` of [`Incoming::accept`].
///
/// # Invariants
///
/// `plan` was made from `ops` (by `batch::plan`, with `flags`), which passed
/// the checks of [`Incoming::accept`]: in `rules` if these are given, and
/// the write checks.
pub(crate) struct Accepted<'a> {
    ops: &'a mut [Op],
    plan: &'a mut Plan,
    ptr: UserPtr,
    flags: u32,
    rules: Option<&'a Snapshot>,
}

/// A batch that ran.
pub(crate) struct Ran {
    pub(crate) ran: Executed,
    /// The results reached the caller's array, and the header's outputs its
    /// header.
    pub(crate) copied: bool,
}

impl Accepted<'_> {
    /// The ops, as copied in.
    pub(crate) fn ops(&self) -> &[Op] {
        self.ops
    }

    /// Whether the batch writes MSRs.
    pub(crate) fn has_writes(&self) -> bool {
        self.plan.has_writes()
    }

    /// Writes the ops' status and values back to the caller's array
    /// unchanged (what a run will write there): whether it is writable.
    pub(crate) fn write_back(&self) -> Result {
        write_results(self.ptr, self.ops)
    }

    /// Runs the batch and copies back the results and the outputs of its
    /// header, at `hdr` (with one call: `helpers::write_ran`). On a
    /// descriptor the allowlist confines, writes are masked: each becomes
    /// the RMWMSR its rules mean, and the caller's op fields are put back
    /// afterwards. The batch is consumed: after the masking its plan
    /// describes the masked ops, not the caller's, so it must not run again.
    #[inline(always)]
    pub(crate) fn run(self, hdr: UserPtr) -> Result<Ran, Rejected> {
        let ptr = self.ptr;
        let (ran, ops) = self.run_here()?;
        let copied = write_ran(ptr, ops, hdr, ran.nr_failed, ran.start_spread).is_ok();
        Ok(Ran { ran, copied })
    }
}

impl<'a> Accepted<'a> {
    /// Runs the batch as [`Accepted::run`] does; the results stay in the
    /// ops, which it gives back.
    #[inline(always)]
    fn run_here(self) -> Result<(Executed, &'a mut [Op]), Rejected> {
        let Accepted {
            ops,
            plan,
            ptr: _,
            flags,
            rules,
        } = self;
        // Masked writes become the RMWMSRs the rules mean; the plan is made
        // again from the ops that will run.
        let masked = match rules {
            Some(r) if plan.has_writes() => Some(r.mask_writes(ops)?),
            _ => None,
        };
        if masked.as_ref().is_some_and(|m| !m.is_empty()) {
            *plan = batch::plan(ops, flags | batch::F_MASKED_WRITES)?;
        }
        // SAFETY: By the type invariants the write checks allowed the batch's
        // writes (and, without CAP_SYS_RAWIO, the rules did, each within its
        // write mask, as masked just above). `plan` is made from `ops`.
        let ran = unsafe { batch::execute(ops, plan) }?;
        if plan.has_writes() {
            policy::taint_if_written(ops);
        }
        if let Some(m) = masked {
            m.unmask(ops, flags & uapi::F_TIMESTAMPS != 0);
        }
        Ok((ran, ops))
    }
}

/// A batch accepted to be kept: its own copy of the ops, and their plan.
///
/// # Invariants
///
/// As [`Accepted`]'s: `plan` was made from `ops`, which passed the checks
/// of [`Incoming::accept`] for [`Purpose::Keep`].
pub(crate) struct Kept {
    ops: KVVec<Op>,
    plan: Plan,
}

impl Kept {
    /// The ops and their plan, for a holder that keeps them together (a
    /// `prepared::Prepared`, whose invariants carry these on).
    pub(crate) fn into_parts(self) -> (KVVec<Op>, Plan) {
        (self.ops, self.plan)
    }
}
