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
//! notifier registered on that thread, with interrupts off. The scheduler
//! calls preempt notifiers only while its preempt-notifier static key is on:
//! the module turns it on at its first grant and off at unload
//! ([`hold_notifier_key`]), not at every grant and revoke.
//!
//! **Who holds a grant.** All grants are in one registry, [`GRANTS`]; a
//! thread has at most one (`EBUSY` for a second, through any file). A grant
//! is *file-bound* (ends when the file that made it is closed) or
//! *thread-bound* (`MSRBATCH_PCE_F_THREAD`: ends only on revoke or exit, so
//! `msrbatch exec --rdpmc` needs to hand the command no descriptor).
//!
//! **Inherited grants** (`MSRBATCH_PCE_F_INHERIT`) make a [`Family`]: the
//! thread that asked (its root), the other threads of its process, and every
//! thread and process that a member creates from then on (not io_uring's or
//! vhost's worker threads). A probe on the `sched_process_fork` tracepoint
//! (`pce_fork.c`) sees each new task in its parent's context; a member's
//! child gets a task work that makes its own thread-bound grant, in the
//! child, before it first returns to user mode. A task has at most one such
//! task work pending ([`PENDING`]): a second inheritance only names the newer
//! family. A task whose parent's grant is still pending (the root granted
//! while it was cloning) inherits that pending family. When the root's grant
//! ends (revoke, close, exit), the family is revoked: no member's grant
//! applies again, an IPI takes PCE back wherever one runs, and a task work
//! has each member end its inert grant before it next returns to user mode
//! (a thread the root made a member may never call into msrbatch itself).
//!
//! **How grants end, and who frees them.** A preempt notifier may only be
//! unregistered by its own thread, outside its notifier chain.
//! - Revoke, or close by the granted thread itself: unregistered and PCE
//!   restored at once, freed at once (in an ioctl or `release`, where the
//!   open file keeps the module loaded).
//! - Close by another thread: the grant is *revoked*: never applied again,
//!   and an IPI restores PCE at once if the thread is running. The inert
//!   notifier stays registered until the thread ends it: a task work does
//!   when it next returns to user mode ([`end_by_its_thread`]), or a grant
//!   or revoke of its own first; if it exits first, the reaper frees it.
//! - Exit: the thread's final `sched_out` restores PCE, marks the grant
//!   dead and kicks the reaper (irq_work, then a work item), which frees dead
//!   grants after an RCU grace period: the scheduler may still be walking the
//!   notifier list that holds the grant when `sched_out` returns, with
//!   interrupts off, i.e. inside an RCU read-side section.
//!
//! Every grant, and every pending inheritance, holds a module reference. The
//! last one is dropped either under an open file or by the reaper, which
//! module exit flushes ([`helpers::reaper_sync`]), so no module code runs
//! after `module_put` without unload waiting for it. A task work never drops
//! a reference that may be the last: it hands its grant's reference to the
//! new grant, drops it where the thread's own grant holds another, or hands
//! it to the reaper, which drops it only after an RCU Tasks grace period,
//! when no task is still returning through the task work's code.

use crate::helpers::local_interrupt_disable;
use crate::{helpers, insn};
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    // SAFETY: By the function's requirements.
    unsafe { PENDING.init() };
    // SAFETY: Once; `exit` undoes it.
    unsafe { crate::sys::msrbatch_pce_fork_init() };
}

/// The grants of one inherited grant's tasks, which end together.
pub(crate) struct Family {
    /// The root's grant has ended: no member's grant applies again.
    revoked: AtomicBool,
}

/// Module references taken for inherited grants that were never made (the
/// new task exited first, its family ended, or memory ran out). The reaper
/// drops them after an RCU Tasks grace period: module code must not run after
/// a `module_put` that unload does not wait for.
static ORPHANED_REFS: AtomicUsize = AtomicUsize::new(0);

/// A task's pending inheritance: its task work will make a grant in
/// `family`. At most one per task; each holds a module reference (taken in
/// [`inherit_to`], handed on by [`make_inherited`]).
struct Pending {
    task: *mut bindings::task_struct,
    family: Arc<Family>,
}

// SAFETY: `task` is only compared, never dereferenced; the rest is an `Arc`.
unsafe impl Send for Pending {}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` initialises it in module init, before any use.
    unsafe(uninit) static PENDING: SpinLock<KVec<Pending>> = KVec::new();
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
    /// The family of an inherited grant.
    family: Option<Arc<Family>>,
    /// The grant of the thread that asked for the family: its end ends the
    /// family.
    root: bool,
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
    /// The task work that has the thread end its revoked grant
    /// ([`end_by_its_thread`]), queued at most once (`end_queued`).
    #[pin]
    end_work: Opaque<bindings::callback_head>,
    end_queued: AtomicBool,
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

    /// Not applied any more: its own file was closed by another thread, or
    /// its family's root grant has ended.
    fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
            || self
                .family
                .as_ref()
                .is_some_and(|f| f.revoked.load(Ordering::Acquire))
    }

    /// The family that a new task of this grant's thread joins, if any.
    fn inherited_family(&self) -> Option<&Arc<Family>> {
        self.family
            .as_ref()
            .filter(|_| !self.is_revoked() && !self.is_dead())
    }

    /// Ends the grant; runs in the granted thread, outside its notifier chain.
    fn end_on_current(&self) {
        // SAFETY: Dropped at the end of the function, the only guard in it.
        let _irq = unsafe { local_interrupt_disable() };
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
    // SAFETY: Dropped at the end of the function, the only guard in it.
    let _irq = unsafe { local_interrupt_disable() };
    if !g.is_revoked() {
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

/// The grant of the current thread whose notifier is registered, if any.
fn current_grant<'a>() -> Option<&'a Grant> {
    // SAFETY: `OPS` is ours; only `current` changes its notifier list, with
    // interrupts off, so an interrupt sees it whole too.
    let n = unsafe { crate::sys::msrbatch_current_notifier((&raw const OPS).cast()) };
    // SAFETY: A registered notifier of ours belongs to a live grant: grants
    // are freed only after their thread unregistered them, or after it exited
    // and an RCU grace period passed (we run on it, or with interrupts off).
    (!n.is_null()).then(|| unsafe { Grant::from_notifier(n.cast()) })
}

/// IPI: ends PCE at once on a CPU where a member of a revoked family runs.
///
/// # Safety
///
/// `info` points to a live [`Family`].
unsafe extern "C" fn revoke_family_on_cpu(info: *mut core::ffi::c_void) {
    let family = info.cast::<Family>().cast_const();
    if let Some(g) = current_grant() {
        if g.family.as_ref().is_some_and(|f| core::ptr::eq(Arc::as_ptr(f), family)) {
            // Interrupts are off in an IPI.
            g.unapply();
        }
    }
}

/// Ends a family (its root's grant has ended): no member's grant applies
/// again, and when this returns no member holds PCE on any CPU; each other
/// member ends its grant when it next returns to user mode. The calling
/// thread's own grant, if it is a member, is the caller's to end
/// ([`release_file`] does). Called with the registry, `grants`, locked, as
/// the making of every member's grant is.
fn revoke_family(grants: &KVec<Arc<Grant>>, family: &Family) {
    if family.revoked.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: `family` lives until the IPIs have run (`wait`).
    unsafe {
        bindings::on_each_cpu_cond_mask(
            None,
            Some(revoke_family_on_cpu),
            core::ptr::from_ref(family).cast_mut().cast(),
            true,
            &raw const bindings::__cpu_online_mask,
        )
    };
    for g in grants.iter() {
        if g.family.as_ref().is_some_and(|f| core::ptr::eq(Arc::as_ptr(f), family)) {
            end_by_its_thread(g);
        }
    }
}

/// Has the thread of `g`, another thread's revoked grant, end it (and drop
/// its module reference) before it next returns to user mode: a thread that
/// never calls into msrbatch again, such as a thread that a family's root
/// made a member or one whose file another thread closed, would otherwise
/// hold the module until it exits. Called with the registry locked; if the
/// thread is exiting, its final switch marks the grant dead instead. Not
/// where the kernel cannot wait for the task work to leave our code
/// ([`task_work_supported`]; no family exists there).
fn end_by_its_thread(g: &Arc<Grant>) {
    if g.is_current() || g.is_dead() || !task_work_supported() || g.end_queued.swap(true, Ordering::AcqRel) {
        return;
    }
    let module = crate::compat::this_module();
    // SAFETY: `g` holds a reference on our live module; `end_revoked` hands
    // this one to the reaper.
    unsafe { bindings::__module_get(module) };
    let raw = Arc::into_raw(g.clone());
    // SAFETY: The task is live (the grant holds a reference on it); `end_work`
    // is pinned in the grant, which the reference from `into_raw` keeps alive
    // until the callback has run.
    let ret = unsafe {
        crate::sys::msrbatch_task_work_add(g.task.as_ptr().cast(), (*raw).end_work.get().cast(), Some(end_revoked))
    };
    if ret != 0 {
        // SAFETY: From `into_raw` above, and not queued.
        drop(unsafe { Arc::from_raw(raw) });
        // SAFETY: Taken above; `g` holds another one.
        unsafe { bindings::module_put(module) };
    }
}

/// Task work of [`end_by_its_thread`]: ends the current thread's revoked
/// grant.
///
/// # Safety
///
/// `work` is the `end_work` field of a grant that `end_by_its_thread` passed
/// to `Arc::into_raw`.
unsafe extern "C" fn end_revoked(work: *mut crate::sys::callback_head) {
    let work = work.cast::<bindings::callback_head>();
    let g = kernel::container_of!(Opaque::cast_from(work), Grant, end_work);
    // SAFETY: By the function's requirements.
    let g = unsafe { Arc::from_raw(g) };
    let mut grants = GRANTS.lock();
    // Ours, unless a grant or revoke of the thread took it out already.
    let old = take_own_revoked(&mut grants);
    drop(grants);
    drop(old);
    // Not the last reference: `end_by_its_thread` took another one for us.
    drop(g);
    // The last thing we do: the reaper may drop it at once.
    orphan_ref();
}

/// Ends the calling thread's grant `g`, just taken out of the registry,
/// and its family if it is the family's root.
fn end_own(grants: &KVec<Arc<Grant>>, g: &Grant) {
    g.end_on_current();
    if let (true, Some(f)) = (g.root, &g.family) {
        revoke_family(grants, f);
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
        .position(|g| g.is_current() && !g.is_dead() && g.is_revoked())?;
    let g = grants.remove(i).ok()?;
    g.end_on_current();
    Some(g)
}

/// Grants user-mode RDPMC to the calling thread; with `inherit`, also to the
/// other threads of its process and to every thread and process a member
/// creates from now on (`EOPNOTSUPP` where the kernel does not tell us of new
/// tasks).
pub(crate) fn grant(binding: Binding, inherit: bool, module: *mut bindings::module) -> Result {
    if inherit && !fork_probe_supported() {
        helpers::log_refused_grant(c"inherited grants need the kernel's sched_process_fork tracepoint");
        return Err(crate::compat::eopnotsupp());
    }
    let family = match inherit {
        true => Some(Arc::new(Family { revoked: AtomicBool::new(false) }, GFP_KERNEL_ACCOUNT)?),
        false => None,
    };
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
    // SAFETY: Our own module is live (we are running its code under an open
    // file); `register` hands the reference to the grant or back to us.
    unsafe { bindings::__module_get(module) };
    if let Err(e) = register(&mut grants, binding, family.clone(), true, module, &mut None) {
        // SAFETY: Taken above; the open file holds another reference.
        unsafe { bindings::module_put(module) };
        return Err(e);
    }
    if let Some(f) = family {
        // SAFETY: `inherit_to_thread` gets `f`, which lives across the call.
        unsafe { crate::sys::msrbatch_for_each_other_thread(Some(inherit_to_thread), (&raw const f).cast_mut().cast()) };
    }
    Ok(())
}

/// Makes and registers the calling thread's grant. On success the grant owns
/// the module reference the caller took for it; on failure the caller still
/// does. The registry holds no live grant of the calling thread; a revoked
/// one is taken out into `old` once nothing can fail any more (the caller
/// drops it after the new grant holds its reference).
fn register(
    grants: &mut KVec<Arc<Grant>>,
    binding: Binding,
    family: Option<Arc<Family>>,
    root: bool,
    module: *mut bindings::module,
    old: &mut Option<Arc<Grant>>,
) -> Result {
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
            family,
            root,
            revoked: AtomicBool::new(false),
            we_set: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            reapable: AtomicBool::new(false),
            end_work: Opaque::uninit(),
            end_queued: AtomicBool::new(false),
        }),
        GFP_KERNEL_ACCOUNT,
    )?;
    // From here the grant owns the module reference (`module_put` in `Drop`).
    hold_notifier_key();
    // SAFETY: Paired with `preempt_notifier_dec` in `Drop`.
    unsafe { bindings::preempt_notifier_inc() };
    // An inert grant of ours leaves the registry (and our notifier list)
    // before the new one comes in: taking one out leaves the room reserved.
    *old = take_own_revoked(grants);
    // The registry owns the grant before it is registered, so nothing below
    // can free a registered notifier. (It cannot fail: reserved above.)
    grants.push_within_capacity(g.clone()).map_err(|_| ENOMEM)?;
    // No switch between registering and applying.
    // SAFETY: Dropped at the end of the function, the only guard in it.
    let _irq = unsafe { local_interrupt_disable() };
    // SAFETY: `notifier` is initialised and pinned inside the `Arc`, which the
    // registry keeps until the notifier is unregistered (by this thread) or
    // the thread is dead and a grace period has passed.
    unsafe { bindings::preempt_notifier_register(g.notifier.get()) };
    // A new member's family may have been revoked since the fork; revocation
    // holds the registry's lock, as we do.
    if !g.is_revoked() {
        g.apply();
    }
    Ok(())
}

/// Whether a task work may hand its module reference to the reaper (the
/// kernel can wait for tasks to leave our code: `pce_fork.c`). Where it
/// cannot, a revoked grant of another thread waits for that thread's next
/// grant, revoke or exit.
fn task_work_supported() -> bool {
    // SAFETY: No preconditions.
    unsafe { crate::sys::msrbatch_pce_task_work_supported() }
}

fn fork_probe_supported() -> bool {
    // SAFETY: No preconditions.
    unsafe { crate::sys::msrbatch_pce_fork_supported() }
}

/// Hands a module reference that no grant took to the reaper. The caller
/// returns at once: the reaper may drop the reference as soon as the caller
/// has left the module's code.
fn orphan_ref() {
    ORPHANED_REFS.fetch_add(1, Ordering::Relaxed);
    helpers::kick_reaper();
}

/// The task work of a pending inheritance ([`Pending`] says for what).
struct Inheritance {
    work: Opaque<bindings::callback_head>,
}

/// Makes `task` a member of `family`: queues the task work that makes its
/// grant, or, if one is pending, makes that one join `family` instead.
/// Does not sleep: called from the fork tracepoint and under `rcu_read_lock`.
/// The caller holds a module reference (its grant's, or its pending
/// inheritance's, which only the caller's own task work hands on), so the
/// one taken here is never the last one dropped here.
fn inherit_to(task: *mut bindings::task_struct, family: &Arc<Family>) {
    let mut pending = PENDING.lock();
    if let Some(p) = pending.iter_mut().find(|p| p.task == task) {
        p.family = family.clone();
        return;
    }
    let entry = Pending { task, family: family.clone() };
    let Ok(b) = KBox::new(Inheritance { work: Opaque::uninit() }, GFP_ATOMIC | __GFP_NOWARN) else {
        helpers::log_refused_grant(c"no memory to pass an inherited grant to a new task");
        return;
    };
    if pending.push(entry, GFP_ATOMIC | __GFP_NOWARN).is_err() {
        helpers::log_refused_grant(c"no memory to pass an inherited grant to a new task");
        return;
    }
    let module = crate::compat::this_module();
    // SAFETY: The caller holds a reference on our live module.
    unsafe { bindings::__module_get(module) };
    let raw = KBox::into_raw(b);
    // SAFETY: `task` is live (a new child, or a thread under RCU); `work`
    // stays where it is, in the box, until the callback frees it.
    let ret = unsafe { crate::sys::msrbatch_task_work_add(task.cast(), (*raw).work.get().cast(), Some(make_inherited)) };
    if ret != 0 {
        // The task is exiting and runs no more task work.
        drop(pending.pop());
        // SAFETY: From `into_raw` above, and not queued.
        drop(unsafe { KBox::from_raw(raw) });
        // SAFETY: Taken above; the caller holds another one.
        unsafe { bindings::module_put(module) };
    }
}

/// `sched_process_fork` (`pce_fork.c`), in the parent's context: a member of
/// a family, or a thread whose inheritance is pending, passes its family on
/// to `child` (not a worker thread: `pce_fork.c` filters them).
///
/// # Safety
///
/// `child` is a live task.
#[no_mangle]
unsafe extern "C" fn msrbatch_pce_fork(child: *mut crate::sys::task_struct) {
    let family = match current_grant().and_then(Grant::inherited_family) {
        Some(f) => Some(f.clone()),
        // A clone that a root's grant raced with: the root's walk of its
        // threads missed the child, but saw its parent.
        None => {
            let me = Task::current_raw();
            PENDING.lock().iter().find(|p| p.task == me).map(|p| p.family.clone())
        }
    };
    if let Some(f) = family.filter(|f| !f.revoked.load(Ordering::Acquire)) {
        inherit_to(child.cast(), &f);
    }
}

/// `msrbatch_for_each_other_thread`'s callback in [`grant`].
///
/// # Safety
///
/// `data` points to the family of a root grant, live across the call; `task`
/// is live.
unsafe extern "C" fn inherit_to_thread(task: *mut core::ffi::c_void, data: *mut core::ffi::c_void) {
    // SAFETY: By the function's requirements.
    let f = unsafe { &*data.cast::<Arc<Family>>() };
    inherit_to(task.cast(), f);
}

/// Task work: makes the grant of a family's new member, in that member,
/// before it returns to user mode.
///
/// # Safety
///
/// `work` is the `work` field of an [`Inheritance`] boxed by `inherit_to`.
unsafe extern "C" fn make_inherited(work: *mut crate::sys::callback_head) {
    let work = work.cast::<bindings::callback_head>();
    let inheritance = kernel::container_of!(Opaque::cast_from(work), Inheritance, work);
    // SAFETY: By the function's requirements, from `KBox::into_raw`.
    drop(unsafe { KBox::from_raw(inheritance.cast_mut()) });
    let me = Task::current_raw();
    let family = {
        let mut pending = PENDING.lock();
        let i = pending.iter().position(|p| p.task == me);
        i.and_then(|i| pending.remove(i).ok()).map(|p| p.family)
    };
    // SAFETY: No preconditions.
    let exiting = unsafe { crate::sys::msrbatch_current_exiting() };
    let mut old = None;
    let mut grants = GRANTS.lock();
    // A thread of the root's process may have a grant of its own, and keeps
    // it; a revoked family passes nothing on.
    let made = family.is_some_and(|family| {
        !exiting
            && !family.revoked.load(Ordering::Acquire)
            && !grants.iter().any(|g| g.is_current() && !g.is_dead() && !g.is_revoked())
            && grant_allowed().is_ok()
            && register(&mut grants, Binding::Thread, Some(family), false, crate::compat::this_module(), &mut old)
                .is_ok()
    });
    drop(grants);
    if made {
        // The new grant holds a reference: dropping the old one's is safe.
        drop(old);
    } else {
        // Nothing was taken out (`register` takes `old` out only once it
        // cannot fail). The last thing we do: the reaper may drop it at once.
        orphan_ref();
    }
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
    end_own(&grants, &g);
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
                end_own(&grants, g);
            }
            continue;
        }
        if let (true, Some(f)) = (g.root, &g.family) {
            revoke_family(&grants, f);
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
            // Its thread, which may never call msrbatch again, ends it (and
            // drops its module reference) when it next returns to user mode.
            end_by_its_thread(g);
        }
        i += 1;
    }
    // If the calling thread is a member of a family this close ended, its
    // grant is revoked now and `revoke_family` left it to us: end it here, or
    // it would hold the module until the thread next calls msrbatch or exits.
    let member = take_own_revoked(&mut grants);
    drop(grants);
    drop(own);
    drop(member);
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
    {
        let grants = GRANTS.lock();
        for g in grants.iter() {
            if g.is_dead() {
                g.reapable.store(true, Ordering::Relaxed);
                any = true;
                // The root has exited: its family ends with it.
                if let (true, Some(f)) = (g.root, &g.family) {
                    revoke_family(&grants, f);
                }
            }
        }
    }
    // References that no grant took: dropped here, where unload waits for
    // us, once every task work that handed one over has returned out of our
    // code (it may have been preempted on its way out).
    let orphans = ORPHANED_REFS.swap(0, Ordering::Relaxed);
    if orphans != 0 {
        // SAFETY: Process context (a work item).
        unsafe { crate::sys::msrbatch_pce_sync_task_work() };
    }
    for _ in 0..orphans {
        // SAFETY: Each was taken on our module by `inherit_to`.
        unsafe { bindings::module_put(crate::compat::this_module()) };
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
// `pce_fork.c`'s probe calls it with `pce_fork.h`'s prototype.
crate::sys::assert_prototype!(msrbatch_pce_fork);

/// Module unload: waits for the reaper, then frees the registry's storage (a
/// static is never dropped). No grant exists any more (each held a module
/// reference).
pub(crate) fn exit() {
    // No fork probe runs our code after this.
    // SAFETY: Process context (module exit), after `init_registry`.
    unsafe { crate::sys::msrbatch_pce_fork_exit() };
    helpers::reaper_sync();
    drop(core::mem::take(&mut *GRANTS.lock()));
    drop(core::mem::take(&mut *PENDING.lock()));
    if KEY_HELD.swap(false, Ordering::AcqRel) {
        // SAFETY: Paired with `preempt_notifier_inc` in `hold_notifier_key`;
        // no grant of ours is registered any more.
        unsafe { bindings::preempt_notifier_dec() };
    }
}

/// The module holds the scheduler's preempt-notifier key enabled
/// ([`hold_notifier_key`]).
static KEY_HELD: AtomicBool = AtomicBool::new(false);

/// Keeps the preempt-notifier key enabled from the first grant until unload.
/// Each grant counts itself in the key too, but without this a thread's grant
/// and revoke, with no other grant in force, would turn the key on and off
/// each time. Each turn patches the kernel's code at the key's sites in the
/// scheduler and synchronises every CPU by IPIs (three rounds on x86): a
/// loop of grants would cost every CPU of the machine interrupts (and under
/// QEMU TCG it meets the emulator's fault with code patched while tasks
/// switch, `tests/harness/stock-kernels.txt`). Once enabled, each context
/// switch of every task looks at its (empty) notifier list: a few
/// instructions, only while the module is loaded and after a grant.
/// Process context (it may sleep).
fn hold_notifier_key() {
    if !KEY_HELD.swap(true, Ordering::AcqRel) {
        // SAFETY: Paired with `preempt_notifier_dec` in `exit`.
        unsafe { bindings::preempt_notifier_inc() };
    }
}

#[pinned_drop]
impl PinnedDrop for Grant {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Paired with `preempt_notifier_inc` in `register`.
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
