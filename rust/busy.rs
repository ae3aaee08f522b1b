// SPDX-License-Identifier: GPL-2.0

//! The busy credit: how long each CPU runs batch ops with interrupts off.
//!
//! The rule is the ABI's, stated once for users at `MSRBATCH_MAX_CPU_BUSY_NS`
//! in `include/uapi/linux/msrbatch.h` (`Documentation/abi.md` points there).
//! This file is its one home in the module: the budget in TSC ticks
//! ([`budget_tsc`]), the credit and how it is kept ([`Credit`]), the running
//! CPU's credit for an interrupts-off section ([`Credit::this_cpu`]), and the
//! retry of ops a credit left unrun ([`execute_until_run`], for the restore
//! log). `batch.rs` asks a [`Credit`] how long a share may start ops, and
//! charges it after.
//!
//! The per-CPU storage is C's (`DEFINE_PER_CPU` in `helpers.c`: the kernel
//! crate has no per-CPU variables), of the type `helpers.h` declares,
//! `struct msrbatch_credit`, which bindgen makes [`Credit`]'s only field.

use crate::batch;
use crate::sys;
use crate::uapi::{self, Op};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    prelude::*,
    time::{delay::fsleep, Delta},
};

/// `MSRBATCH_MAX_CPU_BUSY_NS` in TSC ticks, computed once (0: not yet).
static BUDGET_TSC: AtomicU64 = AtomicU64::new(0);

/// `MSRBATCH_MAX_CPU_BUSY_NS` in TSC ticks: the budget `B` of [`Credit`].
pub(crate) fn budget_tsc() -> u64 {
    match BUDGET_TSC.load(Ordering::Relaxed) {
        0 => {
            let t = crate::helpers::ns_to_tsc(uapi::MAX_CPU_BUSY_NS);
            BUDGET_TSC.store(t, Ordering::Relaxed);
            t
        }
        t => t,
    }
}

/// Interrupts are off on this CPU for as long as this token lives: the
/// context of a batch's cross-call. Not `Send`: it stands for this CPU only.
///
/// # Invariants
///
/// Interrupts are off on the CPU that made the token from its making until
/// it is dropped, and no other token exists on that CPU meanwhile.
pub(crate) struct IrqsOff {
    _not_send: PhantomData<*mut ()>,
}

impl IrqsOff {
    /// The token of the interrupts-off section the caller runs in.
    ///
    /// # Safety
    ///
    /// Interrupts are off on this CPU until the token is dropped, and the
    /// caller makes no other token until then.
    pub(crate) unsafe fn new() -> Self {
        // INVARIANT: By the function's requirements.
        IrqsOff { _not_send: PhantomData }
    }
}

/// A CPU's busy credit, the rule of `MSRBATCH_MAX_CPU_BUSY_NS`. With `B` the
/// budget in TSC ticks, the credit holds at most `4B/5`, grows by a fifth of
/// the time that passes and shrinks by the time the CPU spends on shares
/// (not counting a synchronised start's wait); a share starting with credit
/// `c` may start ops for `5c/4` (it earns a fifth of its own time back
/// meanwhile). So a CPU with full credit runs one share for `B`; shares that
/// follow each other without a pause split one `B` between them; over any
/// span `T` a CPU spends at most `4B/5 + T/5` on shares, plus what the last
/// op of each share overran (which is charged).
///
/// Kept as one TSC value, when the credit is full again (`full_at`): a
/// deficit of `d` ticks of time is a credit of `4B/5 - d/5`, so a share may
/// start ops for `B - d/4`, and a share of `t` ticks (`4t/5` of credit, `4t`
/// of refill time, after `t` passed) puts it `5t` after the share's start.
/// The deficit is capped at `8B`: a TSC that went backwards, or a share that
/// overran by more than a budget, costs at most that.
///
/// One per CPU, used only by that CPU with interrupts off
/// ([`Credit::this_cpu`]). Starts at zero: full; unloading the module resets
/// every credit.
#[repr(transparent)]
pub(crate) struct Credit(sys::msrbatch_credit);

impl Credit {
    /// The running CPU's credit, for as long as `irqs`, the token of the
    /// interrupts-off section the caller runs in, is borrowed.
    pub(crate) fn this_cpu(irqs: &mut IrqsOff) -> &mut Credit {
        let _ = irqs;
        // SAFETY: `msrbatch_this_cpu_credit()` returns this CPU's object,
        // valid for the module's lifetime; `Credit` is its transparent
        // wrapper. By `IrqsOff`'s invariants interrupts stay off while the
        // reference lives, so nothing else runs on this CPU meanwhile but the
        // holder of the one token, which is borrowed mutably as long as the
        // reference; no other CPU ever uses this CPU's credit.
        unsafe { &mut *sys::msrbatch_this_cpu_credit().cast::<Credit>() }
    }

    /// A share starts at `now` with busy budget `budget`: returns how many
    /// ticks from `now` it may start ops for (0: none).
    #[inline(always)]
    pub(crate) fn refill(&mut self, now: u64, budget: u64) -> u64 {
        let most = budget.saturating_mul(8);
        let mut deficit = self.0.full_at.saturating_sub(now);
        if deficit > most {
            deficit = most;
            self.0.full_at = now.saturating_add(most);
        }
        budget.saturating_sub(deficit / 4)
    }

    /// Charges a share that ran from `start` to `now`.
    #[inline(always)]
    pub(crate) fn charge(&mut self, start: u64, now: u64) {
        let ran = now.saturating_sub(start);
        self.0.full_at = self.0.full_at.max(start).saturating_add(ran.saturating_mul(5));
    }
}

/// How many times [`execute_until_run`] runs again the ops a credit left
/// unrun, and how long it sleeps first each time: long enough to refill a
/// credit that was empty (it holds `4B/5` and earns a fifth of the time that
/// passes: `4B`, checked below).
pub(crate) const RETRIES: usize = 10;
pub(crate) const RETRY_SLEEP_MS: u32 = 100;
const _: () = assert!(RETRY_SLEEP_MS as u64 * 1_000_000 >= 4 * uapi::MAX_CPU_BUSY_NS);

/// Runs the batch `ops`; those that got `-ETIME` (the CPU's credit ran out:
/// they did nothing) run again after a sleep, up to [`RETRIES`] times.
/// Returns how many ops failed in the end. Process context.
///
/// # Safety
///
/// As [`batch::execute`]: the writes among `ops` are allowed.
pub(crate) unsafe fn execute_until_run(ops: &mut [Op]) -> Result<u32, batch::Rejected> {
    let plan = batch::plan(ops, 0)?;
    // SAFETY: By our own requirements.
    let mut nr_failed = unsafe { batch::execute(ops, &plan) }?.nr_failed;
    for _ in 0..RETRIES {
        let mut again = KVVec::new();
        for (i, op) in ops.iter().enumerate().filter(|(_, op)| op.status == batch::status::ETIME) {
            again.push((i, *op), GFP_KERNEL_ACCOUNT)?;
        }
        if again.is_empty() {
            break;
        }
        // Process context (by the function's requirements).
        fsleep(Delta::from_millis(RETRY_SLEEP_MS.into()));
        let mut retry = KVVec::with_capacity(again.len(), GFP_KERNEL_ACCOUNT)?;
        for (_, op) in again.iter() {
            retry.push(*op, GFP_KERNEL_ACCOUNT)?;
        }
        let plan = batch::plan(&retry, 0)?;
        // SAFETY: The same ops as above, none of which ran.
        let done = unsafe { batch::execute(&mut retry, &plan) }?;
        nr_failed = nr_failed - again.len() as u32 + done.nr_failed;
        for ((i, _), op) in again.iter().zip(retry.iter()) {
            ops[*i] = *op;
        }
    }
    Ok(nr_failed)
}

#[kunit_tests(msrbatch_busy)]
mod tests {
    use super::*;

    #[test]
    fn credit_bounds_a_cpu_not_a_batch() -> Result {
        const B: u64 = 20_000_000;
        let mut c = Credit(sys::msrbatch_credit { full_at: 0 });
        // Full at first: one share may run the whole budget.
        let t = 1_000_000_000;
        assert_eq!(c.refill(t, B), B);
        c.charge(t, t + B);
        // A share queued right behind it gets nothing, and one after a
        // pause gets what the pause earned: a fifth of it, a quarter more
        // for what it earns while it runs.
        let t = t + B;
        assert_eq!(c.refill(t, B), 0);
        c.charge(t, t);
        assert_eq!(c.refill(t + 40_000_000, B), 10_000_000);
        // Two shares with no pause between them split one budget.
        let t = t + 40_000_000;
        c.charge(t, t + 6_000_000);
        assert_eq!(c.refill(t + 6_000_000, B), 4_000_000);
        // An overrun is charged: the credit goes below zero (-0.8 ms) and
        // needs 4 ms to be back at zero.
        c.charge(t + 6_000_000, t + 11_000_000);
        assert_eq!(c.refill(t + 15_000_000, B), 0);
        assert_eq!(c.refill(t + 16_000_000, B), 250_000);
        // Full again once the deficit (95 ms from the first share here) is
        // past, and never more than full.
        assert_eq!(c.refill(t + 94_000_000, B), B - 250_000);
        assert_eq!(c.refill(t + 95_000_000, B), B);
        assert_eq!(c.refill(t + 10 * B, B), B);
        // A TSC that went backwards costs at most 8 budgets of time.
        assert_eq!(c.refill(1, B), 0);
        assert_eq!(c.refill(1 + 4 * B, B), 0);
        assert_eq!(c.refill(1 + 8 * B, B), B);
        Ok(())
    }
}
