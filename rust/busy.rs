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

/// `MSRBATCH_MAX_CPU_BUSY_NS` in TSC ticks, computed once, by [`init`],
/// before any batch can run (the devices are registered after it, and the
/// KUnit suites run once the module is live).
static BUDGET_TSC: AtomicU64 = AtomicU64::new(0);

/// Computes the budget in TSC ticks (module init, before the devices).
/// (Computed at the first batch, its every read was tested for 0: 2
/// instructions a batch.)
pub(crate) fn init() {
    BUDGET_TSC.store(crate::helpers::ns_to_tsc(uapi::MAX_CPU_BUSY_NS), Ordering::Relaxed);
}

/// `MSRBATCH_MAX_CPU_BUSY_NS` in TSC ticks: the budget `B` of [`Credit`].
#[inline(always)]
pub(crate) fn budget_tsc() -> u64 {
    BUDGET_TSC.load(Ordering::Relaxed)
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
/// (a synchronised start's wait included); a share starting with credit `c`
/// may start ops for `5c/4` (it earns a fifth of its own time back
/// meanwhile). So a CPU with full credit runs one share for `B`; shares that
/// follow each other without a pause split one `B` between them; over any
/// span `T` a CPU spends at most `4B/5 + T/5` on shares, plus what the last
/// op of each share overran (which is charged).
///
/// The credit below `3B/5` is the reserve of descriptors opened with
/// `CAP_SYS_RAWIO`: a confined share may start ops for `5(c - 3B/5)/4` only
/// (`B/4` with full credit), so however confined callers keep a CPU busy,
/// the credit they leave is `3B/5` less one overrun ([`most_charged`]), and
/// a privileged share may start ops for `3B/4` less that overrun: longer
/// than a confined share keeps the CPU, so a privileged synchronised start
/// that waits for one still starts.
///
/// Kept as one TSC value, when the credit is full again (`full_at`): a
/// deficit of `d` ticks of time is a credit of `4B/5 - d/5`, so a share may
/// start ops for `B - d/4` (confined: `B/4 - d/4`), and a share of `t` ticks
/// (`4t/5` of credit, `4t` of refill time, after `t` passed) puts it `5t`
/// after the share's start. The deficit is capped at `8B`: a TSC that went
/// backwards, or a share that overran by more than a budget, costs at most
/// that.
///
/// One per CPU, used only by that CPU with interrupts off
/// ([`Credit::this_cpu`]). Starts at zero: full; unloading the module resets
/// every credit.
#[repr(transparent)]
pub(crate) struct Credit(sys::msrbatch_credit);

extern "C" {
    /// Each CPU's credit, `DEFINE_PER_CPU` in `helpers.c` (bindgen does not
    /// see per-CPU variables): found by [`Credit::this_cpu`].
    static msrbatch_credits: sys::msrbatch_credit;
}

/// What of a budget `B` only privileged shares may start ops for: `3B/4`,
/// the reserve of `3B/5` of credit (see [`Credit`]).
#[inline(always)]
const fn reserve(budget: u64) -> u64 {
    budget / 4 * 3
}

/// The most a share that [`Credit::refill`] let start ops for `left` ticks
/// of a budget `budget` is charged: all of its time for a privileged share;
/// for a confined one, `left` and one op's overrun, `B/16` (the longest op,
/// a DELAY of `MSRBATCH_MAX_DELAY_NS`, is shorter). Time beyond that is time
/// the CPU was taken from the share (a hypervisor that stopped the vCPU,
/// firmware), not the caller's doing: charged, it would take the reserve.
/// Never more than `u64::MAX / 5` ticks (a century at 5 GHz), the bound of
/// [`Credit::charge`]'s arithmetic, which it takes from this one ([`Most`]).
#[inline(always)]
pub(crate) fn most_charged(left: u64, budget: u64, confined: bool) -> Most {
    // INVARIANT: Both at most `u64::MAX / 5`.
    Most(if confined {
        left.saturating_add(budget / 16).min(u64::MAX / 5)
    } else {
        u64::MAX / 5
    })
}

/// The most a share is charged, [`most_charged`]'s: what
/// [`Credit::charge`] takes, which relies on its bound (the compiler did not
/// see through `most_charged`'s select that it is at most `u64::MAX / 5`,
/// and bounded the charge again: 3 instructions a share).
///
/// # Invariants
///
/// At most `u64::MAX / 5` ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Most(u64);
const _: () = assert!(uapi::MAX_DELAY_NS * 16 <= uapi::MAX_CPU_BUSY_NS);

impl Credit {
    /// The running CPU's credit, for as long as `irqs`, the token of the
    /// interrupts-off section the caller runs in, is borrowed.
    #[inline(always)]
    pub(crate) fn this_cpu(irqs: &mut IrqsOff) -> &mut Credit {
        let _ = irqs;
        // SAFETY: `msrbatch_credits` is a per-CPU variable.
        let this = unsafe { crate::insn::this_cpu_ptr(&raw const msrbatch_credits) };
        // SAFETY: `this` is this CPU's copy, valid for the module's lifetime;
        // `Credit` is its transparent wrapper. By `IrqsOff`'s invariants
        // interrupts stay off while the reference lives, so nothing else runs
        // on this CPU meanwhile but the holder of the one token, which is
        // borrowed mutably as long as the reference; no other CPU ever uses
        // this CPU's credit.
        unsafe { &mut *this.cast::<Credit>() }
    }

    /// A share starts at `now` with busy budget `budget`, for a descriptor
    /// opened without `CAP_SYS_RAWIO` if `confined`: returns how many ticks
    /// from `now` it may start ops for (0: none).
    #[inline(always)]
    pub(crate) fn refill(&mut self, now: u64, budget: u64, confined: bool) -> u64 {
        let deficit = self.0.full_at.saturating_sub(now);
        // The cap of `8B` on the deficit: a deficit under `4B` leaves a
        // credit, so only a credit that left nothing may be past the cap (and
        // capped, it still leaves nothing). So a share that may run does
        // not compute the cap. (Tested as `deficit / 4 >= budget`, not
        // `budget.saturating_sub(deficit / 4) == 0`: the same, and `left`
        // is then a plain subtraction, without the saturation's select.)
        if deficit / 4 >= budget {
            let most = budget.saturating_mul(8);
            if deficit > most {
                self.0.full_at = now.saturating_add(most);
            }
            return 0;
        }
        let left = budget - deficit / 4;
        if confined {
            left.saturating_sub(reserve(budget))
        } else {
            left
        }
    }

    /// How many ticks from `now` this credit refuses confined shares for
    /// (0: it does not), with budget `budget`: while the deficit is at least
    /// four times what a confined share may start ops for with full credit.
    pub(crate) fn confined_refusal(&self, now: u64, budget: u64) -> u64 {
        let deficit = self.0.full_at.saturating_sub(now).min(budget.saturating_mul(8));
        let quarter = budget - reserve(budget);
        deficit.saturating_sub(quarter.saturating_mul(4).saturating_sub(1))
    }

    /// Charges a share that ran from `start` to `now`, at most `most`
    /// ticks of it ([`most_charged`]).
    #[inline(always)]
    pub(crate) fn charge(&mut self, start: u64, now: u64, most: Most) {
        // Five times at most `u64::MAX / 5` (the invariants of `Most`):
        // `u64::MAX` is a multiple of 5, so this is `ran.saturating_mul(5)`
        // exactly, without the multiplication's overflow check (KUnit
        // checks the edge).
        let ran = now.saturating_sub(start).min(most.0);
        self.0.full_at = self.0.full_at.max(start).saturating_add(ran.wrapping_mul(5));
    }
}

/// This CPU refused a confined share, and refuses them for `ticks` more
/// ([`Credit::confined_refusal`]): until then, callers on other CPUs refuse
/// such shares without a cross-call ([`refuses_confined`]), for whole ticks
/// of the kernel's clock, at least the rest of this one. So a caller that
/// sends shares to a CPU whose credit refuses them costs it at most one
/// cross-call per tick (and one per CPU racing it), not one per batch. The
/// hint is never longer than the refusal but for that one tick: a confined
/// share is refused at most a tick early.
pub(crate) fn refused_confined(irqs: &IrqsOff, ticks: u64) {
    let _ = irqs;
    // SAFETY: Interrupts are off (the token): the helper writes this CPU's
    // hint, which only this CPU writes, and moves the latest of all hints
    // forward with a cmpxchg.
    unsafe { sys::msrbatch_this_cpu_refuses(ticks) }
}

/// Whether `cpu` said it refuses confined shares now ([`refused_confined`]):
/// a hint read without a lock, from any CPU.
pub(crate) fn refuses_confined(cpu: u32) -> bool {
    // SAFETY: The helper reads `cpu`'s hint once (`READ_ONCE`), for any
    // possible CPU; `cpu` is one (the plan checked it).
    unsafe { sys::msrbatch_cpu_refuses(cpu) }
}

/// Whether some CPU may have said it refuses confined shares now; `false`:
/// [`refuses_confined`] is `false` for every CPU (as racy as it: a hint being
/// written may be missed). One look for a batch with shares for many CPUs.
pub(crate) fn some_cpu_refuses_confined() -> bool {
    // SAFETY: No preconditions: the helper reads one word (`READ_ONCE`).
    unsafe { sys::msrbatch_some_cpu_refuses() }
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
    let mut nr_failed = unsafe { batch::execute_cold(ops, &plan) }?.nr_failed;
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
        let done = unsafe { batch::execute_cold(&mut retry, &plan) }?;
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

    /// A privileged share's bound: all it ran, up to `u64::MAX / 5` ticks.
    const ALL: Most = Most(u64::MAX / 5);

    #[test]
    fn clock_is_the_tsc() -> Result {
        // `insn::clock` joins RDTSC's halves in its asm: the value lies
        // between two reads of the op's `rdtsc` (which joins them in Rust)
        // on one CPU with interrupts off: a half lost or shifted wrongly
        // puts it outside (the guest's TSC passes 2^32 in its first seconds).
        // SAFETY: The only guard of the test, dropped at its end.
        let _irq = unsafe { crate::helpers::local_interrupt_disable() };
        let before = crate::insn::rdtsc().map_err(|_| EIO)?;
        let t = crate::insn::clock();
        let after = crate::insn::rdtsc().map_err(|_| EIO)?;
        assert!(before <= t && t <= after);
        Ok(())
    }

    #[test]
    fn this_cpu_is_the_kernels() -> Result {
        // SAFETY: The only guard of the test, dropped at its end.
        let _irq = unsafe { crate::helpers::local_interrupt_disable() };
        // SAFETY: Interrupts are off until `_irq` is dropped, after this
        // token; no other token is made meanwhile.
        let mut irqs = unsafe { IrqsOff::new() };
        // The CPU number, as the kernel crate reads it.
        let cpu = kernel::cpu::CpuId::current().as_u32();
        assert_eq!(crate::insn::this_cpu_id(), cpu);
        // The credit, where the kernel's per-CPU offset of this CPU puts it.
        let offsets: *const [usize] = &raw const kernel::bindings::__per_cpu_offset;
        assert!((cpu as usize) < offsets.len());
        // SAFETY: `__per_cpu_offset`, set up at boot, has an offset for
        // every CPU number below its length (checked just above).
        let off = unsafe { offsets.cast::<usize>().add(cpu as usize).read() };
        let expected = (&raw const msrbatch_credits).wrapping_byte_add(off);
        assert_eq!(core::ptr::from_mut(Credit::this_cpu(&mut irqs)).cast::<sys::msrbatch_credit>().cast_const(), expected);
        Ok(())
    }

    #[test]
    fn credit_bounds_a_cpu_not_a_batch() -> Result {
        const B: u64 = 20_000_000;
        let mut c = Credit(sys::msrbatch_credit { full_at: 0 });
        // Full at first: one share may run the whole budget.
        let t = 1_000_000_000;
        assert_eq!(c.refill(t, B, false), B);
        c.charge(t, t + B, ALL);
        // A share queued right behind it gets nothing, and one after a
        // pause gets what the pause earned: a fifth of it, a quarter more
        // for what it earns while it runs.
        let t = t + B;
        assert_eq!(c.refill(t, B, false), 0);
        c.charge(t, t, ALL);
        assert_eq!(c.refill(t + 40_000_000, B, false), 10_000_000);
        // Two shares with no pause between them split one budget.
        let t = t + 40_000_000;
        c.charge(t, t + 6_000_000, ALL);
        assert_eq!(c.refill(t + 6_000_000, B, false), 4_000_000);
        // An overrun is charged: the credit goes below zero (-0.8 ms) and
        // needs 4 ms to be back at zero.
        c.charge(t + 6_000_000, t + 11_000_000, ALL);
        assert_eq!(c.refill(t + 15_000_000, B, false), 0);
        assert_eq!(c.refill(t + 16_000_000, B, false), 250_000);
        // Full again once the deficit (95 ms from the first share here) is
        // past, and never more than full.
        assert_eq!(c.refill(t + 94_000_000, B, false), B - 250_000);
        assert_eq!(c.refill(t + 95_000_000, B, false), B);
        assert_eq!(c.refill(t + 10 * B, B, false), B);
        // A TSC that went backwards costs at most 8 budgets of time.
        assert_eq!(c.refill(1, B, false), 0);
        assert_eq!(c.refill(1 + 4 * B, B, false), 0);
        assert_eq!(c.refill(1 + 8 * B, B, false), B);
        // A share of more than `u64::MAX / 5` ticks saturates the charge,
        // and one of exactly that reaches the same end.
        for ran in [u64::MAX / 5, u64::MAX / 5 + 1, u64::MAX - 1] {
            let mut c = Credit(sys::msrbatch_credit { full_at: 0 });
            c.charge(1, ran + 1, ALL);
            assert_eq!(c.0.full_at, u64::MAX);
        }
        let mut c = Credit(sys::msrbatch_credit { full_at: 0 });
        c.charge(1, u64::MAX / 5, ALL);
        assert_eq!(c.0.full_at, u64::MAX / 5 * 5 - 4);
        Ok(())
    }

    #[test]
    fn confined_shares_leave_the_reserve() -> Result {
        const B: u64 = 20_000_000;
        let mut c = Credit(sys::msrbatch_credit { full_at: 0 });
        // Full: a confined share may start ops for B/4, root's for B.
        let t = 1_000_000_000;
        let left = c.refill(t, B, true);
        assert_eq!(left, 5_000_000);
        assert_eq!(c.refill(t, B, false), B);
        // Confined shares back to back draw the credit down to 3B/5 (a
        // deficit of 20 ms), here with a last op that overran by 1 ms (0.8 ms
        // of credit, 1 ms of root's next share): then none of them may start
        // ops, root's still may for 3B/4 less the overrun.
        c.charge(t, t + 6_000_000, most_charged(left, B, true));
        let t = t + 6_000_000;
        assert_eq!(c.refill(t, B, true), 0);
        assert_eq!(c.refill(t, B, false), 14_000_000);
        // It says how long it refuses them (the hint other CPUs read): as
        // long as refill gives them nothing, not a tick longer.
        assert_eq!(c.confined_refusal(t, B), 4_000_001);
        assert_eq!(c.refill(t + 4_000_000, B, true), 0);
        assert_eq!(c.refill(t + 4_000_001, B, true), 1);
        assert_eq!(c.confined_refusal(t + 4_000_001, B), 0);
        // Confined shares start again once the deficit is below 20 ms.
        assert_eq!(c.refill(t + 4_000_000, B, true), 0);
        let t = t + 4_004_000;
        let left = c.refill(t, B, true);
        assert_eq!(left, 1_000);
        // One the host stopped for 50 ms is charged as if it had run its
        // time and one op's overrun (1.25 ms): right after that, root's
        // share would still start ops for 3B/4 less the overrun.
        c.charge(t, t + 50_000_000, most_charged(left, B, true));
        assert_eq!(c.refill(t + 1_251_000, B, false), 15_000_000 - 1_250_000);
        let t = t + 50_000_000;
        // A confined share never resets a privileged deficit: the cap is
        // that of the whole budget.
        c.charge(t, t + 10 * B, most_charged(B, B, false));
        assert_eq!(c.refill(t + 10 * B, B, true), 0);
        assert_eq!(c.refill(t + 10 * B + 4 * B, B, false), 0);
        assert_eq!(c.refill(t + 10 * B + 8 * B, B, false), B);
        // The most charged is never more than `charge` charges anyway, so
        // that its bound and the charge's are one.
        assert_eq!(most_charged(B, B, false), ALL);
        assert_eq!(most_charged(u64::MAX - B, B, true), ALL);
        assert_eq!(most_charged(B, B, true).0, B + B / 16);
        Ok(())
    }
}
