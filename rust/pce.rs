// SPDX-License-Identifier: GPL-2.0

//! User-mode RDPMC for one thread: CR4.PCE while, and only while, it runs.
//!
//! Linux keeps a per-CPU shadow of CR4 and recomputes PCE from it on every mm
//! switch (`cr4_update_pce_mm()`); a module cannot update that shadow (its
//! accessors are exported to KVM only). So a grant never changes the shadow:
//! it changes the hardware bit around the granted thread's time on a CPU.
//!
//! - `sched_in` (after the switch, the thread about to run): if PCE is clear,
//!   set it and remember that we did.
//! - `sched_out` (before the switch away): if we set it, clear it again. The
//!   CPU is back to exactly what the kernel's shadow says before any other
//!   task runs, so no other task ever runs with PCE because of a grant.
//!
//! Both run on the granted thread's own context switches, via a preempt
//! notifier registered on that thread. Each CR4 update is a read-modify-write
//! of the PCE bit alone with interrupts off (`insn::cr4_set_pce`).
//!
//! A grant ends on revoke (by the thread itself), on close of the file that
//! made it, and on exit of the thread. Unregistering a preempt notifier is only
//! safe from the thread itself, so a close from another thread marks the grant
//! revoked (it is no longer applied) and queues a task work that tears it
//! down in the thread as soon as it next returns to user mode, or as it exits.
//! A thread that exits while its grant is still open clears PCE in its last
//! `sched_out` and marks the grant dead; the file reaps it. Every grant holds
//! a reference on the module, so the module cannot be unloaded while one
//! exists.

use crate::insn;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    bindings,
    interrupt::local_interrupt_disable,
    prelude::*,
    sync::{aref::ARef, Arc},
    task::Task,
    types::Opaque,
};

/// One thread's grant.
#[pin_data(PinnedDrop)]
pub(crate) struct Grant {
    #[pin]
    notifier: Opaque<bindings::preempt_notifier>,
    #[pin]
    work: Opaque<bindings::callback_head>,
    task: ARef<Task>,
    module: *mut bindings::module,
    /// PCE was clear when the thread was scheduled in and we set it.
    /// Only touched on the thread's own CPU, from its own context.
    we_set: AtomicBool,
    /// No longer applied at `sched_in` (closed by another thread).
    revoked: AtomicBool,
    /// The thread has done its last `sched_out`: nothing will call us again.
    dead: AtomicBool,
}

// SAFETY: The raw fields are only used from the granted thread (notifier
// callbacks, task work) or, for `dead` grants, after the thread has gone; the
// module pointer is the module's own, valid while the grant holds a reference.
unsafe impl Send for Grant {}
// SAFETY: As above; the shared state is atomics.
unsafe impl Sync for Grant {}

/// `enum task_work_notify_mode`: `TWA_RESUME`.
const TWA_RESUME: c_int = 1;

extern "C" {
    // `linux/task_work.h` is not part of the Rust bindings; the function is
    // exported (GPL) and has this prototype.
    fn task_work_add(
        task: *mut core::ffi::c_void,
        twork: *mut bindings::callback_head,
        mode: c_int,
    ) -> c_int;
}

static OPS: bindings::preempt_ops = bindings::preempt_ops {
    sched_in: Some(sched_in),
    sched_out: Some(sched_out),
};

impl Grant {
    /// `container_of!(notifier, Grant, notifier)`.
    ///
    /// # Safety
    ///
    /// `n` is the `notifier` field of a live `Grant`.
    unsafe fn from_notifier<'a>(n: *mut bindings::preempt_notifier) -> &'a Grant {
        // SAFETY: By the function's requirements.
        unsafe { &*kernel::container_of!(Opaque::cast_from(n), Grant, notifier) }
    }

    /// Whether this grant belongs to the calling thread.
    pub(crate) fn is_current(&self) -> bool {
        self.task.as_ptr() == Task::current_raw()
    }

    /// Whether the thread has exited.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }
}

/// Preempt notifier: the granted thread is about to run on `_cpu`.
///
/// # Safety
///
/// Called by the scheduler for a registered notifier of a live grant.
unsafe extern "C" fn sched_in(n: *mut bindings::preempt_notifier, _cpu: c_int) {
    // SAFETY: The notifier is registered, so its grant is alive.
    let g = unsafe { Grant::from_notifier(n) };
    if !g.revoked.load(Ordering::Relaxed) && insn::cr4_set_pce() {
        g.we_set.store(true, Ordering::Relaxed);
    }
}

/// Preempt notifier: the granted thread stops running (interrupts off).
///
/// # Safety
///
/// Called by the scheduler for a registered notifier of a live grant.
unsafe extern "C" fn sched_out(n: *mut bindings::preempt_notifier, _next: *mut bindings::task_struct) {
    // SAFETY: The notifier is registered, so its grant is alive.
    let g = unsafe { Grant::from_notifier(n) };
    if g.we_set.swap(false, Ordering::Relaxed) {
        insn::cr4_clear_pce();
    }
    // SAFETY: `current` is the granted thread, valid while it switches out.
    let state = unsafe { (*Task::current_raw()).__state };
    if state == bindings::TASK_DEAD {
        // Its last switch: the notifier will never be called again.
        g.dead.store(true, Ordering::Release);
    }
}

/// Task work: tears the grant down in the granted thread.
///
/// # Safety
///
/// `head` is the `work` field of a grant whose `Arc` reference was leaked by
/// [`Grant::end_from_other_thread`].
unsafe extern "C" fn teardown_work(head: *mut bindings::callback_head) {
    // SAFETY: By the function's requirements.
    let g = unsafe { kernel::container_of!(Opaque::cast_from(head), Grant, work) };
    // SAFETY: The reference leaked when the work was queued comes back here.
    let g = unsafe { Arc::from_raw(g) };
    g.end_on_current();
}

/// Refuses a grant when perf says user RDPMC is never allowed (`rdpmc` = 0).
fn check_perf_rdpmc() -> Result {
    for path in [
        c"/sys/bus/event_source/devices/cpu/rdpmc",
        c"/sys/bus/event_source/devices/cpu_core/rdpmc",
        c"/sys/bus/event_source/devices/cpu_atom/rdpmc",
    ] {
        // SAFETY: `path` is a NUL-terminated string; process context.
        let f = unsafe { bindings::filp_open(path.as_char_ptr(), bindings::O_RDONLY as c_int, 0) };
        if kernel::error::from_err_ptr(f).is_err() {
            continue; // No such PMU (e.g. no PMU at all): nothing forbids it.
        }
        let mut buf = [0u8; 8];
        let mut pos: bindings::loff_t = 0;
        // SAFETY: `f` is an open file; `buf` is valid for `buf.len()` bytes.
        let n = unsafe { bindings::kernel_read(f, buf.as_mut_ptr().cast(), buf.len(), &mut pos) };
        // SAFETY: `f` was opened above and is not used afterwards.
        unsafe { bindings::filp_close(f, core::ptr::null_mut()) };
        if n > 0 && buf[0] == b'0' {
            pr_info!("PCE grant refused: perf's {} is 0 (user RDPMC disabled)\n", path.to_str().unwrap_or("rdpmc"));
            return Err(EACCES);
        }
    }
    Ok(())
}

impl Grant {
    /// Grants user-mode RDPMC to the calling thread.
    pub(crate) fn new(module: *mut bindings::module) -> Result<Arc<Grant>> {
        check_perf_rdpmc()?;
        // SAFETY: `current` is valid; `ARef::from` takes a reference on it.
        let task = ARef::from(unsafe { &*Task::current_raw().cast::<Task>() });
        let g = Arc::pin_init(
            pin_init!(Grant {
                notifier <- Opaque::ffi_init(|n: *mut bindings::preempt_notifier| {
                    // SAFETY: `n` is valid for writes (preempt_notifier_init()).
                    unsafe {
                        (*n).link.next = core::ptr::null_mut();
                        (*n).link.pprev = core::ptr::null_mut();
                        (*n).ops = (&raw const OPS).cast_mut();
                    }
                }),
                work <- Opaque::ffi_init(|w: *mut bindings::callback_head| {
                    // SAFETY: `w` is valid for writes (init_task_work()).
                    unsafe {
                        (*w).next = core::ptr::null_mut();
                        (*w).func = Some(teardown_work);
                    }
                }),
                task,
                module,
                we_set: AtomicBool::new(false),
                revoked: AtomicBool::new(false),
                dead: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: Our own module is live (we are running its code); paired with
        // `module_put` in `Drop`.
        unsafe { bindings::__module_get(g.module) };
        // SAFETY: Paired with `preempt_notifier_dec` in `Drop`.
        unsafe { bindings::preempt_notifier_inc() };
        {
            // No switch between registering and applying.
            let _irq = local_interrupt_disable();
            // SAFETY: `notifier` is initialised and pinned inside the `Arc`, and
            // stays registered on `current` until `end_on_current` or its death.
            unsafe { bindings::preempt_notifier_register(g.notifier.get()) };
            if insn::cr4_set_pce() {
                g.we_set.store(true, Ordering::Relaxed);
            }
        }
        Ok(g)
    }

    /// Ends the grant; must run in the granted thread.
    pub(crate) fn end_on_current(&self) {
        let _irq = local_interrupt_disable();
        // SAFETY: We are the granted thread and not inside its notifier chain,
        // so our entry can be unlinked; interrupts are off, so no switch can
        // happen between unlinking and restoring PCE.
        unsafe { bindings::preempt_notifier_unregister(self.notifier.get()) };
        if self.we_set.swap(false, Ordering::Relaxed) {
            insn::cr4_clear_pce();
        }
    }

    /// Ends the grant of another, live or exiting, thread.
    pub(crate) fn end_from_other_thread(self: Arc<Self>) {
        if self.is_dead() {
            return;
        }
        self.revoked.store(true, Ordering::Relaxed);
        let raw = Arc::into_raw(self.clone());
        // SAFETY: `work` lives as long as the leaked reference, which the task
        // work gets back; the task is referenced by the grant.
        let r = unsafe { task_work_add(self.task.as_ptr().cast(), self.work.get(), TWA_RESUME) };
        if r == 0 {
            return;
        }
        // SAFETY: The work was not queued: take the leaked reference back.
        drop(unsafe { Arc::from_raw(raw) });
        // The thread is past its last task work, on its way to its final
        // switch, where `sched_out` restores PCE and marks it dead.
        while !self.is_dead() {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(100));
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Grant {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Paired with `preempt_notifier_inc` in `new`.
        unsafe { bindings::preempt_notifier_dec() };
        // SAFETY: Paired with `__module_get` in `new`.
        unsafe { bindings::module_put(self.module) };
    }
}
