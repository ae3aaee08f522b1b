// SPDX-License-Identifier: GPL-2.0

//! User-mode RDPMC for one thread: CR4.PCE while, and only while, it runs.
//!
//! Linux keeps a per-CPU shadow of CR4 and recomputes PCE from it on every mm
//! switch (`cr4_update_pce_mm()`); a module cannot update that shadow (its
//! accessors are exported to KVM only). So a grant never changes the shadow:
//! it changes the hardware bit around the granted thread's time on a CPU.
//!
//! - `sched_in` (after the switch, the thread about to run): if the grant
//!   stands and perf's `rdpmc` policy allows user RDPMC at all, and PCE is
//!   clear, set it and remember that we did (`we_set`).
//! - `sched_out` (before the switch away): if we set it, clear it again —
//!   unless perf's policy is now "always" (2), where the kernel's shadow says
//!   set too. It fails closed: the shadow, which only the kernel can read,
//!   may say "set" for other reasons that arose while the thread ran (its
//!   process mmapped a perf event; the knob went from 1 to 2 and back), and
//!   then the kernel's next CR4 write gives PCE back; a PCE bit the kernel
//!   did not choose is never left behind for another task. (Computing the
//!   shadow's value from the policy and the address space instead, as
//!   `cr4_update_pce_mm()` does, races with perf's own updates, which reach
//!   this CPU by an IPI after the rule changed.)
//!
//! Both run on the granted thread's own context switches, via a preempt
//! notifier registered on that thread, with interrupts off.
//!
//! **Who holds a grant.** All grants are in one registry, [`GRANTS`]; a
//! thread has at most one (`EBUSY` for a second, through any file). A grant
//! is *file-bound* (ends when the file that made it is closed) or
//! *thread-bound* (`MSRBATCH_PCE_F_THREAD`: ends only on revoke or exit, so
//! `msrbatch exec --rdpmc` needs to hand the command no descriptor).
//!
//! **How grants end, and who frees them.** A preempt notifier may only be
//! unregistered by its own thread, outside its notifier chain.
//! - Revoke, or close by the granted thread itself: unregistered and PCE
//!   restored at once, freed at once (in an ioctl or `release`, where the
//!   open file keeps the module loaded).
//! - Close by another thread: the grant is *revoked*: never applied again,
//!   and an IPI restores PCE at once if the thread is running. The inert
//!   notifier stays registered until the thread next calls into msrbatch (a
//!   grant or revoke cleans it up) or exits.
//! - Exit: the thread's final `sched_out` restores PCE, marks the grant
//!   dead and kicks the reaper (irq_work, then a work item), which frees dead
//!   grants after an RCU grace period: the scheduler may still be walking the
//!   notifier list that holds the grant when `sched_out` returns, with
//!   interrupts off, i.e. inside an RCU read-side section.
//!
//! Every grant holds a module reference. The last one is dropped either under
//! an open file or by the reaper, which module exit flushes
//! ([`helpers::reaper_sync`]), so no module code runs after `module_put` without
//! unload waiting for it.

use crate::compat::local_interrupt_disable;
use crate::{helpers, insn};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    bindings,
    prelude::*,
    sync::{aref::ARef, Arc},
    task::Task,
    types::Opaque,
};

kernel::sync::global_lock! {
    // SAFETY: `init_registry` initialises it in module init, before any use.
    unsafe(uninit) static GRANTS: Mutex<KVec<Arc<Grant>>> = KVec::new();
}

/// Initialises the registry; module init calls it once, first.
///
/// # Safety
///
/// Called once, before any other function of this module.
pub(crate) unsafe fn init_registry() {
    // SAFETY: By the function's requirements.
    unsafe { GRANTS.init() };
}

/// What a grant is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// Ends when the file with this identity is released.
    File(usize),
    /// Ends only on revoke or thread exit.
    Thread,
}

/// One thread's grant.
#[pin_data(PinnedDrop)]
pub(crate) struct Grant {
    #[pin]
    notifier: Opaque<bindings::preempt_notifier>,
    task: ARef<Task>,
    module: *mut bindings::module,
    binding: Binding,
    /// Not applied any more (its file was closed by another thread).
    revoked: AtomicBool,
    /// PCE was clear when the thread came in and the grant set it. Touched
    /// only on the thread's CPU with interrupts off (its notifiers, the
    /// revoking IPI, `end_on_current`).
    we_set: AtomicBool,
    /// The thread has made its final switch: nothing calls us again.
    dead: AtomicBool,
    /// Seen dead by the reaper before its grace period: free after it.
    reapable: AtomicBool,
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

    fn is_current(&self) -> bool {
        self.task.as_ptr() == Task::current_raw()
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Ends the grant; runs in the granted thread, outside its notifier chain.
    fn end_on_current(&self) {
        let _irq = local_interrupt_disable();
        // SAFETY: We are the granted thread and not inside its notifier
        // chain, so our entry can be unlinked; interrupts are off, so no
        // switch happens between unlinking and restoring PCE.
        unsafe { bindings::preempt_notifier_unregister(self.notifier.get()) };
        self.unapply();
    }

    /// Sets PCE for the granted thread if perf's policy allows user RDPMC
    /// and it is clear. Interrupts must be off; `current` is the thread.
    fn apply(&self) {
        if helpers::RdpmcPolicy::now().grant_applies() && !insn::cr4_pce() {
            // SAFETY: `current` is the granted thread; `unapply` clears the
            // bit again before any other task runs on this CPU.
            unsafe { insn::cr4_write_pce(true) };
            self.we_set.store(true, Ordering::Relaxed);
        }
    }

    /// Takes back a PCE bit `apply` set, unless perf now allows user RDPMC
    /// everywhere (then the kernel's shadow says set as well). Interrupts
    /// must be off; `current` is the thread.
    fn unapply(&self) {
        if self.we_set.swap(false, Ordering::Relaxed) && helpers::RdpmcPolicy::now() != helpers::RdpmcPolicy::Always {
            // SAFETY: Clearing PCE gives no task anything; the kernel's next
            // CR4 write from its shadow sets it again where it should be set.
            unsafe { insn::cr4_write_pce(false) };
        }
    }
}

/// Preempt notifier: the granted thread is about to run on `_cpu`
/// (interrupts on, preemption off).
///
/// # Safety
///
/// Called by the scheduler for a registered notifier of a live grant.
unsafe extern "C" fn sched_in(n: *mut bindings::preempt_notifier, _cpu: c_int) {
    // SAFETY: The notifier is registered, so its grant is alive.
    let g = unsafe { Grant::from_notifier(n) };
    // Interrupts off: an IPI of a revoking close sees either PCE not yet set
    // or set, never the moment in between.
    let _irq = local_interrupt_disable();
    if !g.revoked.load(Ordering::Acquire) {
        g.apply();
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
    g.unapply();
    if helpers::current_is_dead() {
        // Its final switch: the notifier is never called again. The grant is
        // freed by the reaper, after a grace period (the scheduler still walks
        // the list that links it when we return).
        g.dead.store(true, Ordering::Release);
        helpers::kick_reaper();
    }
}

/// IPI: ends PCE at once on the CPU where a revoked grant's thread runs.
///
/// # Safety
///
/// `info` points to a live [`Grant`].
unsafe extern "C" fn revoke_on_cpu(info: *mut core::ffi::c_void) {
    // SAFETY: By the function's requirements.
    let g = unsafe { &*info.cast::<Grant>() };
    if g.is_current() {
        // Interrupts are off in an IPI.
        g.unapply();
    }
}

/// Refuses a grant on this system or under perf's current policy.
fn grant_allowed() -> Result {
    if helpers::xen_pv() {
        helpers::log_refused_grant(c"Xen PV owns CR4");
        return Err(crate::compat::eopnotsupp());
    }
    match helpers::RdpmcPolicy::now() {
        helpers::RdpmcPolicy::Never => {
            helpers::log_refused_grant(c"perf's rdpmc setting is 0 (user RDPMC disabled)");
            Err(EACCES)
        }
        helpers::RdpmcPolicy::Unknown => {
            helpers::log_refused_grant(c"perf's rdpmc setting cannot be read");
            Err(EACCES)
        }
        _ => Ok(()),
    }
}

/// Removes and ends the calling thread's revoked grants (their file was
/// closed by another thread). Returns them, to be dropped after the lock.
fn take_own_revoked(grants: &mut KVec<Arc<Grant>>) -> Option<Arc<Grant>> {
    let i = grants
        .iter()
        .position(|g| g.is_current() && !g.is_dead() && g.revoked.load(Ordering::Relaxed))?;
    let g = grants.remove(i).ok()?;
    g.end_on_current();
    Some(g)
}

/// Grants user-mode RDPMC to the calling thread.
pub(crate) fn grant(binding: Binding, module: *mut bindings::module) -> Result {
    let mut grants = GRANTS.lock();
    // A thread has one grant at most; an inert one of ours is ended first.
    // (At most one exists: a thread gets a new grant only after this.)
    let old = take_own_revoked(&mut grants);
    if grants.iter().any(|g| g.is_current() && !g.is_dead()) {
        drop(grants);
        drop(old);
        return Err(EBUSY);
    }
    grant_allowed()?;
    grants.reserve(1, GFP_KERNEL_ACCOUNT)?;
    // `ARef::from` takes a reference on the current thread.
    let task = ARef::from(&**kernel::current!());
    let g = Arc::pin_init(
        pin_init!(Grant {
            notifier <- Opaque::ffi_init(|n: *mut bindings::preempt_notifier| {
                // SAFETY: `n` is valid for writes; `OPS` lives forever (the
                // kernel never writes through this pointer).
                unsafe { crate::sys::msrbatch_preempt_notifier_init(n.cast(), (&raw const OPS).cast_mut().cast()) }
            }),
            task,
            module,
            binding,
            revoked: AtomicBool::new(false),
            we_set: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            reapable: AtomicBool::new(false),
        }),
        GFP_KERNEL_ACCOUNT,
    )?;
    // SAFETY: Our own module is live (we are running its code under an open
    // file); paired with `module_put` in `Drop`.
    unsafe { bindings::__module_get(module) };
    // SAFETY: Paired with `preempt_notifier_dec` in `Drop`.
    unsafe { bindings::preempt_notifier_inc() };
    // The registry owns the grant before it is registered, so nothing below
    // can free a registered notifier.
    grants.push_within_capacity(g.clone()).map_err(|_| ENOMEM)?;
    // No switch between registering and applying.
    let _irq = local_interrupt_disable();
    // SAFETY: `notifier` is initialised and pinned inside the `Arc`, which the
    // registry keeps until the notifier is unregistered (by this thread) or
    // the thread is dead and a grace period has passed.
    unsafe { bindings::preempt_notifier_register(g.notifier.get()) };
    g.apply();
    Ok(())
}

/// Ends the calling thread's grant, whichever file made it. `ENOENT` when
/// none is in force (also when a close by another thread already ended it).
pub(crate) fn revoke() -> Result {
    let mut grants = GRANTS.lock();
    if let Some(old) = take_own_revoked(&mut grants) {
        drop(grants);
        drop(old);
        return Err(ENOENT);
    }
    let i = grants
        .iter()
        .position(|g| g.is_current() && !g.is_dead())
        .ok_or(ENOENT)?;
    let g = grants.remove(i).map_err(|_| ENOENT)?;
    g.end_on_current();
    drop(grants);
    drop(g);
    Ok(())
}

/// Ends the grants bound to the file `file` (its `release`).
pub(crate) fn release_file(file: usize) {
    let mut grants = GRANTS.lock();
    let mut own = None;
    let mut i = 0;
    while let Some(g) = grants.get(i) {
        if g.binding != Binding::File(file) || g.is_dead() {
            i += 1;
            continue;
        }
        if g.is_current() {
            own = grants.remove(i).ok();
            if let Some(g) = &own {
                g.end_on_current();
            }
            continue;
        }
        if !g.revoked.swap(true, Ordering::AcqRel) {
            // SAFETY: `revoke_on_cpu` gets a grant that the registry keeps
            // alive while we hold its lock and wait for the IPIs (`wait`).
            unsafe {
                bindings::on_each_cpu_cond_mask(
                    None,
                    Some(revoke_on_cpu),
                    Arc::as_ptr(g).cast_mut().cast(),
                    true,
                    &raw const bindings::__cpu_online_mask,
                )
            };
        }
        i += 1;
    }
    drop(grants);
    drop(own);
}

/// The reaper: frees the grants of threads that have exited.
///
/// # Safety
///
/// Called by `helpers.c`'s reaper work item only (process context, the
/// registry not locked by the caller). `unsafe`, as bindgen makes
/// `helpers.h`'s prototype: an older rustc (Debian trixie's 1.85.1) does not
/// unify a safe and an unsafe `extern "C" fn` in `assert_prototype!`.
#[no_mangle]
unsafe extern "C" fn msrbatch_reap_grants() {
    let mut any = false;
    for g in GRANTS.lock().iter() {
        if g.is_dead() {
            g.reapable.store(true, Ordering::Relaxed);
            any = true;
        }
    }
    if !any {
        return;
    }
    // Every `sched_out` that marked a grant dead has returned, and the
    // scheduler's walk of that thread's notifier list has finished.
    // SAFETY: Process context (a work item).
    unsafe { bindings::synchronize_rcu() };
    let mut grants = GRANTS.lock();
    // Dropping the last reference ends with `module_put`; module exit waits
    // for this work item to return (`helpers::reaper_sync`).
    grants.retain(|g| !g.reapable.load(Ordering::Relaxed));
}

// `helpers.c`'s reaper calls it with `helpers.h`'s prototype.
crate::sys::assert_prototype!(msrbatch_reap_grants);

/// Module unload: waits for the reaper, then frees the registry's storage (a
/// static is never dropped). No grant exists any more (each held a module
/// reference).
pub(crate) fn exit() {
    helpers::reaper_sync();
    drop(core::mem::take(&mut *GRANTS.lock()));
}

#[pinned_drop]
impl PinnedDrop for Grant {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Paired with `preempt_notifier_inc` in `grant`.
        unsafe { bindings::preempt_notifier_dec() };
        // SAFETY: Paired with `__module_get` in `grant`.
        unsafe { bindings::module_put(self.module) };
    }
}

// SAFETY: The notifier is only touched by the granted thread (registration,
// unregistration, the scheduler's callbacks) or, once the grant is dead, by
// nobody; the module pointer is our own module, valid while the grant holds
// the reference its drop (just above) puts; the rest is atomics and an
// `ARef`.
unsafe impl Send for Grant {}
// SAFETY: As above.
unsafe impl Sync for Grant {}
