// SPDX-License-Identifier: GPL-2.0

//! The Rust side of `helpers.c`: safe wrappers of its functions where a call
//! has no precondition (their prototypes are `helpers.h`'s, which bindgen
//! turns into `sys.rs`).

use core::ffi::c_int;
use crate::uapi::Op;
use core::mem::MaybeUninit;
use kernel::{bindings, prelude::*, transmute::FromBytes, uaccess::UserPtr};

use crate::sys;

/// The `allow_writes` parameter's verdict on a batch with `nr_writes` write
/// ops, the first to `msr`: `EPERM` when writes are off. Logs a rate-limited
/// warning naming the process in `default` mode. Process context.
pub(crate) fn filter_writes(msr: u32, nr_writes: u32) -> Result {
    // SAFETY: No preconditions; process context.
    kernel::error::to_result(unsafe { sys::msrbatch_filter_writes(msr, nr_writes) })
}

/// perf's user-RDPMC policy, as the kernel holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RdpmcPolicy {
    /// `rdpmc` = 0: never.
    Never,
    /// `rdpmc` = 1: in processes that mmap a perf event of their own.
    PerfMmap,
    /// `rdpmc` = 2: always.
    Always,
    /// No PMU is registered with perf: there is no policy.
    NoPmu,
    /// A PMU exists but its setting could not be read.
    Unknown,
}

impl RdpmcPolicy {
    /// Decodes `msrbatch_rdpmc_policy()`'s return value.
    pub(crate) fn from_raw(v: c_int) -> Self {
        match v {
            0 => Self::Never,
            1 => Self::PerfMmap,
            2 => Self::Always,
            v if v == -(bindings::ENODEV as c_int) => Self::NoPmu,
            _ => Self::Unknown,
        }
    }

    /// Reads the policy now. Any context (it is read in the scheduler's
    /// notifiers; `helpers.c` explains how).
    pub(crate) fn now() -> Self {
        // SAFETY: No preconditions.
        Self::from_raw(unsafe { sys::msrbatch_rdpmc_policy() })
    }

    /// Whether a grant may apply PCE under this policy (fails closed).
    pub(crate) fn grant_applies(self) -> bool {
        matches!(self, Self::PerfMmap | Self::Always | Self::NoPmu)
    }
}

/// Finds perf's rdpmc setting (at module load; process context).
pub(crate) fn rdpmc_policy_init() {
    // SAFETY: Process context, once, before any grant.
    unsafe { sys::msrbatch_rdpmc_policy_init() }
}

/// Releases what [`rdpmc_policy_init`] took (at module unload).
pub(crate) fn rdpmc_policy_exit() {
    // SAFETY: Called once at unload, when no grant exists any more.
    unsafe { sys::msrbatch_rdpmc_policy_exit() }
}

/// Whether this is a Xen PV guest (CR4 belongs to the hypervisor).
pub(crate) fn xen_pv() -> bool {
    // SAFETY: No preconditions.
    unsafe { sys::msrbatch_xen_pv() }
}

/// Whether `current` is in its final switch (a volatile read of `__state`).
pub(crate) fn current_is_dead() -> bool {
    // SAFETY: Reads `current->__state`; any context.
    unsafe { sys::msrbatch_current_is_dead() }
}

/// Converts nanoseconds to TSC ticks.
pub(crate) fn ns_to_tsc(ns: u64) -> u64 {
    // SAFETY: No preconditions.
    unsafe { sys::msrbatch_ns_to_tsc(ns) }
}

/// The result of a user copy of `helpers.c`, which returns 0 or `-EFAULT`
/// (inline: the kernel crate's `to_result` is a call on every batch).
#[inline(always)]
fn copied(ret: c_int) -> Result {
    if ret == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Copies `size_of_val(dst)` bytes, a whole number of words, in from user
/// memory at `ptr`, straight into uninitialised memory, word by word
/// (`msrbatch_read_words`).
fn read_words<T: FromBytes>(ptr: UserPtr, dst: &mut [MaybeUninit<T>]) -> Result<&mut [T]> {
    const { assert!(size_of::<T>() % size_of::<u64>() == 0) };
    let words = size_of_val(dst) / size_of::<u64>();
    // SAFETY: `dst` has room for `words` words, which the function writes
    // (any bit pattern) or fails; user memory is only read through `uaccess`.
    copied(unsafe { sys::msrbatch_read_words(dst.as_mut_ptr().cast(), ptr.as_const_ptr() as usize, words) })?;
    // SAFETY: The copy succeeded, so every `T` is initialised, and any bit
    // pattern is a valid `T` (`FromBytes`).
    Ok(unsafe { &mut *(core::ptr::from_mut(dst) as *mut [T]) })
}

/// Copies `dst.len()` ops in from the user's array at `ptr` (no zero-fill
/// pass: the copy is the batch's biggest cost per op).
pub(crate) fn read_ops(ptr: UserPtr, dst: &mut [MaybeUninit<Op>]) -> Result<&mut [Op]> {
    read_words(ptr, dst)
}

/// Reads an ioctl's argument, a `T`, from `ptr`.
pub(crate) fn read_arg<T: FromBytes>(ptr: UserPtr) -> Result<T> {
    let mut v = MaybeUninit::<T>::uninit();
    read_arg_in(ptr, &mut v)?;
    // SAFETY: `read_arg_in` succeeded, so it initialised `v`.
    Ok(unsafe { v.assume_init() })
}

/// Reads an ioctl's argument, a `T`, from `ptr` into `slot`, where it stays
/// (returned by value, a batch's header was copied once more, `rep movs`).
pub(crate) fn read_arg_in<T: FromBytes>(ptr: UserPtr, slot: &mut MaybeUninit<T>) -> Result<&mut T> {
    match read_words(ptr, core::slice::from_mut(slot))? {
        [v] => Ok(v),
        // `read_words` returns the slice it was given, of one.
        _ => Err(EFAULT),
    }
}

/// Writes the outputs of batch header `b` (`nr_failed`, `err_index`,
/// `out_flags`, `start_spread`) to the header at `ptr`.
pub(crate) fn write_batch_out(ptr: UserPtr, b: &crate::uapi::Batch) -> Result {
    // SAFETY: `b` is a valid header, only read; user memory is only written
    // through `uaccess`.
    copied(unsafe { sys::msrbatch_write_batch_out(ptr.as_const_ptr() as usize, b) })
}

/// Writes what a run changes of `ops` (each op's status and values) to the
/// user's array at `ptr` (`msrbatch_write_results`).
pub(crate) fn write_results(ptr: UserPtr, ops: &[Op]) -> Result {
    let n = u32::try_from(ops.len()).map_err(|_| EINVAL)?;
    // SAFETY: `ops` is `n` initialised ops, only read; user memory is only
    // written through `uaccess`.
    copied(unsafe { sys::msrbatch_write_results(ptr.as_const_ptr() as usize, ops.as_ptr(), n) })
}

/// Writes the answer of a batch that ran, in one call
/// (`msrbatch_write_ran`): what the run changed of `ops` to the user's array
/// at `ptr` (as [`write_results`]), then the outputs of the header at `hdr`
/// (`nr_failed`, no op blamed, `MSRBATCH_OUT_RAN`, `start_spread`), also
/// when the results could not be written. `EFAULT` when either could not be.
pub(crate) fn write_ran(ptr: UserPtr, ops: &[Op], hdr: UserPtr, nr_failed: u32, start_spread: u64) -> Result {
    let n = u32::try_from(ops.len()).map_err(|_| EINVAL)?;
    // SAFETY: `ops` is `n` initialised ops, only read; user memory is only
    // written through `uaccess`.
    copied(unsafe {
        sys::msrbatch_write_ran(ptr.as_const_ptr() as usize, ops.as_ptr(), n, hdr.as_const_ptr() as usize, nr_failed, start_spread)
    })
}

/// Logs (rate-limited) why a PCE grant was refused.
pub(crate) fn log_refused_grant(why: &'static core::ffi::CStr) {
    // SAFETY: `why` is a NUL-terminated string.
    unsafe { sys::msrbatch_log_refused_grant(why.as_char_ptr()) }
}

/// Zeroed, page-aligned memory that [`mappable_mmap`] can map into user
/// space (`__vmalloc()`, charged to the caller's memory cgroup); `bytes` is
/// a multiple of the page size.
pub(crate) fn mappable_alloc(bytes: usize) -> Option<core::ptr::NonNull<core::ffi::c_void>> {
    // SAFETY: Process context.
    core::ptr::NonNull::new(unsafe { sys::msrbatch_mappable_alloc(bytes) })
}

/// Frees memory from [`mappable_alloc`] (`vfree()`; mappings keep their pages).
///
/// # Safety
///
/// `addr` came from [`mappable_alloc`] and is not used afterwards.
pub(crate) unsafe fn mappable_free(addr: core::ptr::NonNull<core::ffi::c_void>) {
    // SAFETY: By the function's requirements.
    unsafe { sys::msrbatch_mappable_free(addr.as_ptr()) }
}

/// Maps memory from [`mappable_alloc`], `bytes` long, into `vma`, from its
/// start, page by page as `remap_vmalloc_range()` does (`EINVAL` for a VMA
/// larger than `bytes`).
///
/// # Safety
///
/// `vma` is being set up by `mmap()`, and `addr` came from
/// [`mappable_alloc`] with `bytes`, and is still allocated.
pub(crate) unsafe fn mappable_mmap(
    vma: *mut bindings::vm_area_struct,
    addr: core::ptr::NonNull<core::ffi::c_void>,
    bytes: usize,
) -> Result {
    // SAFETY: By the function's requirements.
    kernel::error::to_result(unsafe { sys::msrbatch_mappable_mmap(vma.cast(), addr.as_ptr(), bytes) })
}

/// Queues the grant reaper; callable in any context, even the scheduler's.
pub(crate) fn kick_reaper() {
    // SAFETY: `irq_work_queue` is NMI-safe.
    unsafe { sys::msrbatch_kick_reaper() }
}

/// Waits until the reaper is neither queued nor running (module unload).
pub(crate) fn reaper_sync() {
    // SAFETY: Process context.
    unsafe { sys::msrbatch_reaper_sync() }
}

/// Gives misc device `misc`, registered by this module, a copy of its file
/// operations (`slot`: one of `helpers.c`'s two copies) that names this
/// module as their owner (7.2's registration leaves it empty, and the module
/// could be unloaded under an open file: seen, an oops in `filp_flush` of the
/// file's close, in freed module memory), and for slot 0, `/dev/msrbatch`, a
/// `flush` that calls [`crate::MsrBatchFile::flush`] at every close of a
/// descriptor (the Rust misc device abstraction has no `flush`).
pub(crate) fn own_misc_fops(misc: *mut bindings::miscdevice, slot: u32) -> Result {
    // SAFETY: `misc` is a misc device this module registered and keeps
    // registered until it unloads.
    kernel::error::to_result(unsafe { sys::msrbatch_misc_own_fops(misc.cast(), slot) })
}

/// `EAGAIN` for a file opened through a misc device's operations before
/// [`own_misc_fops`] replaced them (while the module initialises): such a
/// file would hold no module reference on 7.2, and a descriptor of
/// `/dev/msrbatch` would not be flushed.
pub(crate) fn file_has_own_fops(file: &kernel::fs::File) -> Result {
    // SAFETY: `file` is a valid file, being opened.
    if unsafe { sys::msrbatch_file_has_own_fops(file.as_ptr().cast()) } {
        Ok(())
    } else {
        Err(EAGAIN)
    }
}

/// The thread group (process) of the caller, as its `struct pid`, which
/// stays the group's also when another thread of it calls `exec()`, and is
/// never another group's while referenced.
///
/// # Invariants
///
/// `0` is a `struct pid` this value holds a reference to.
pub(crate) struct ThreadGroup(core::ptr::NonNull<sys::pid>);

// SAFETY: A reference to a `struct pid` may be dropped on any thread.
unsafe impl Send for ThreadGroup {}
// SAFETY: `ThreadGroup` only compares the pointer.
unsafe impl Sync for ThreadGroup {}

impl ThreadGroup {
    /// The caller's (`ESRCH` if it has none: a task being reaped).
    pub(crate) fn current() -> Result<Self> {
        // SAFETY: No preconditions; a reference to the caller's own, or NULL.
        let p = unsafe { sys::msrbatch_tgid_get() };
        // INVARIANT: the reference `msrbatch_tgid_get` took.
        core::ptr::NonNull::new(p).map(ThreadGroup).ok_or(ESRCH)
    }

    /// Whether the caller belongs to it.
    pub(crate) fn is_current(&self) -> bool {
        // SAFETY: `self.0` is referenced (type invariants).
        unsafe { sys::msrbatch_current_in_tgid(self.0.as_ptr()) }
    }

    /// Whether a thread of it has not exited yet.
    pub(crate) fn is_alive(&self) -> bool {
        // SAFETY: `self.0` is referenced (type invariants).
        unsafe { sys::msrbatch_tgid_alive(self.0.as_ptr()) }
    }
}

/// Whether the caller's descriptor table is shared with a process outside
/// its thread group (`clone(CLONE_FILES)` without `CLONE_THREAD`): its exit
/// then closes none of its descriptors.
pub(crate) fn files_shared_outside_group() -> bool {
    // SAFETY: No preconditions (process context).
    unsafe { sys::msrbatch_files_shared_outside_group() }
}

impl Drop for ThreadGroup {
    fn drop(&mut self) {
        // SAFETY: The reference this value holds (type invariants).
        unsafe { sys::msrbatch_tgid_put(self.0.as_ptr()) }
    }
}

/// A xorshift64 generator of the KUnit tests' random batches (the same
/// from run to run, for a seed other than 0).
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) struct XorShift(pub(crate) u64);

#[cfg(CONFIG_KUNIT = "y")]
impl XorShift {
    /// The next number, taken below `n` (not 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x % n
    }
}

#[kunit_tests(msrbatch_helpers)]
mod tests {
    use super::*;

    #[test]
    fn rdpmc_policy_rules() -> Result {
        use RdpmcPolicy::*;
        let enodev = -(bindings::ENODEV as c_int);
        let raw = [(0, Never), (1, PerfMmap), (2, Always), (enodev, NoPmu), (3, Unknown), (-5, Unknown)];
        for (v, p) in raw {
            assert_eq!(RdpmcPolicy::from_raw(v), p);
        }
        // A grant applies PCE unless perf forbids user RDPMC or we cannot tell.
        let applies = [(Never, false), (PerfMmap, true), (Always, true), (NoPmu, true), (Unknown, false)];
        for (p, a) in applies {
            assert_eq!(p.grant_applies(), a);
        }
        Ok(())
    }

    #[test]
    fn policy_matches_this_machine() -> Result {
        // The guest has no PMU (QEMU TCG): perf has no policy here. On a machine
        // with a PMU this reads the real knob, one of the three values.
        let p = RdpmcPolicy::now();
        assert!(p != RdpmcPolicy::Unknown);
        Ok(())
    }
}

/// Interrupts stay off on this CPU while this guard lives: `local_irq_save()`
/// when it is made, `local_irq_restore()` when it is dropped (two C helpers).
/// Not the kernel crate's `kernel::interrupt::local_interrupt_disable()`,
/// which 7.2 lacks and which on 7.3 also counts nesting in the preempt count
/// and, from a module, calls an exported function to save the flags: 27
/// instructions a batch where these take 12 (`make bench ICOUNT=1`: every
/// batch on one CPU 13 to 15 fewer). The module takes no lock that needs
/// that count inside one. Each guard restores the flags it saved, so guards
/// must end in the reverse order of their making ([`local_interrupt_disable`]
/// is `unsafe` for it). A scoped section taking a closure would need no such
/// rule, but its closure was not inlined into the hot path: 49 instructions
/// a batch more.
///
/// # Invariants
///
/// `flags` is what `local_irq_save()` returned on this CPU when the guard was
/// made, and interrupts have been off since.
pub(crate) struct LocalInterruptDisabled {
    flags: kernel::ffi::c_ulong,
    // Restoring interrupts on another CPU than the one that saved them would
    // be wrong: the guard must not move between threads.
    _not_send: core::marker::PhantomData<*mut ()>,
}

/// Turns interrupts off on this CPU until the returned guard is dropped.
///
/// # Safety
///
/// The guard is dropped before any guard made before it (as the end of a
/// block drops it, the inner first): dropped after, the outer guard's drop
/// would turn interrupts on while it still lives, and code that holds an
/// [`IrqsOff`](crate::busy::IrqsOff) token on its strength (this CPU's busy
/// credit, borrowed mutably) could be interrupted or moved.
#[inline(always)]
pub(crate) unsafe fn local_interrupt_disable() -> LocalInterruptDisabled {
    // INVARIANT: the flags `local_irq_save()` returned, interrupts now off.
    LocalInterruptDisabled {
        // SAFETY: No preconditions.
        flags: unsafe { sys::msrbatch_irq_save() },
        _not_send: core::marker::PhantomData,
    }
}

impl Drop for LocalInterruptDisabled {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: By the type invariants, `flags` was saved on this CPU,
        // interrupts off since; the guard ends here, and guards end in the
        // reverse order of their making, so no other guard is still alive
        // that this one's restore would cut short.
        unsafe { sys::msrbatch_irq_restore(self.flags) };
    }
}
