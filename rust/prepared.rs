// SPDX-License-Identifier: GPL-2.0

//! Prepared batches: validated once, run many times, with the results in
//! memory the caller maps from the device.
//!
//! `MSRBATCH_IOC_PREPARE` copies the ops in, validates and plans them as a
//! plain batch would, and keeps that private copy: the caller cannot change
//! an op after it was checked. The results live in zeroed vmalloc memory
//! charged to the caller's memory cgroup, which `mmap()` of the descriptor
//! at the batch's offset maps into the caller, page by page
//! (`helpers::mappable_mmap`). `MSRBATCH_IOC_RUN` runs the private
//! copy and returns the number of failed ops: a batch that only reads, on
//! one CPU, puts every op's status and values straight into the results as
//! it runs (`batch::ToResults`); any other uses the copy's `status`/`val`
//! fields as scratch space and then publishes them into the results. No
//! user memory is read or written by a run.
//!
//! Lifetimes: the file's table holds an `Arc` per handle, which a run finds
//! without a lock ([`Table::get`]); a run counts itself among the batch's
//! users instead of taking a reference, so `UNPREPARE` or `close()` during a
//! run orphans the batch and the last user frees it when the run ends. A mapping holds its own references to the result pages, so it stays
//! valid (with the last results) after `UNPREPARE`, `close()` and `vfree()`.
//! Mappings are not inherited across `fork()` (`VM_DONTCOPY`).

use crate::accept::Kept;
use crate::batch::{self, Plan};
use crate::policy::{self, Access};
use crate::uapi::{self, Op, OpResult};
use crate::sys;
use core::cell::UnsafeCell;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, Mutex},
    time::{delay::fsleep, Delta},
};

/// The results of one prepared batch: zeroed vmalloc memory, whole pages,
/// charged to the caller's memory cgroup, mappable with
/// `helpers::mappable_mmap`.
///
/// # Invariants
///
/// `ptr` is the start of an area from `helpers::mappable_alloc` of `bytes`
/// bytes, which the `Results` owns until it drops; it has room for `len`
/// results (`len * size_of::<OpResult>() <= bytes`). User space may map it:
/// the kernel writes it only through raw pointers (volatile), never through
/// a reference to an `OpResult` (a run's `batch::ToResults` holds
/// references to `Opaque<OpResult>`, which allow that).
struct Results {
    ptr: NonNull<OpResult>,
    len: usize,
    bytes: usize,
}

// SAFETY: `Results` owns its allocation; it is written only by runs, which
// are serialised by `Prepared::ops`, and read by user space.
unsafe impl Send for Results {}
// SAFETY: As above.
unsafe impl Sync for Results {}

impl Results {
    fn new(len: usize) -> Result<Self> {
        let bytes = (len * size_of::<OpResult>()).next_multiple_of(PAGE_SIZE);
        let ptr = crate::helpers::mappable_alloc(bytes).ok_or(ENOMEM)?.cast::<OpResult>();
        // INVARIANT: `bytes` bytes from `mappable_alloc`, room for `len`.
        Ok(Results { ptr, len, bytes })
    }

    /// Where a run of `ops` (one per result) may put its outputs directly,
    /// for as long as `self` is borrowed.
    fn outputs(&self, ops: &[Op]) -> Option<batch::ToResults<'_>> {
        if ops.len() > self.len {
            return None;
        }
        // SAFETY: By the type invariants the area has room for `len >=
        // ops.len()` results, page-aligned, and it lives as long as `self`,
        // for which the value is borrowed.
        Some(unsafe { batch::ToResults::new(self.ptr.as_ptr(), ops.len()) })
    }

    /// Publishes the outputs of `ops` (one per result, at most `len`).
    #[inline(always)]
    fn publish(&self, ops: &[Op]) {
        let ops = ops.get(..self.len).unwrap_or(ops);
        if let Some(out) = self.outputs(ops) {
            out.publish(ops);
        }
    }
}

impl Drop for Results {
    fn drop(&mut self) {
        // SAFETY: By the type invariants the area is ours, from
        // `mappable_alloc`; it is not used afterwards, and user mappings keep
        // their own references to the pages.
        unsafe { crate::helpers::mappable_free(self.ptr.cast()) };
    }
}

/// The ops of a prepared batch, which one run at a time may use: their
/// `status` and `val` are a run's scratch space ([`RunLock::lock`]).
///
/// A lock of its own, not a kernel `Mutex`: taken and released in line, one
/// atomic instruction each way when no other run waits (a `Mutex`, with its
/// calls to `mutex_lock()`, `mutex_unlock()` and the kernel crate's
/// `assert_is_held` helper, cost a rerun 12 instructions more). A ticket
/// lock: a run takes the next ticket and runs when the lock serves it, so
/// the runs of one batch take turns in the order they came (a lock that a
/// release left free for whoever came first, as this one was at e154d05,
/// let a thread rerunning a batch in a loop keep another waiting for half
/// a second in the guest, where the `Mutex`, which hands itself over, kept
/// it 26 ms). A run whose ticket is not served sleeps, uninterruptibly as in
/// `Mutex::lock`, until it is (`msrbatch_run_lock_wait()` in `helpers.c`);
/// a release that sees a later ticket taken wakes the waiters. Lockdep sees
/// it as one lock for all batches (`msrbatch_run_lock_acquire()`, kernels
/// with `CONFIG_LOCKDEP` only): a run takes it inside the restore log's
/// lock (a batch that writes), and inside it only the CPU hotplug read lock
/// (a batch on several CPUs), which nothing that waits for it holds.
///
/// # Invariants
///
/// `serving` is the ticket of the one [`RunGuard`] of the lock, if one
/// exists; `next` is the ticket the next run takes: `next == serving`
/// while no guard exists, and each ticket from `serving` to before `next`
/// is that of the guard or of a run waiting for it (modulo 2^32). Only the
/// guard accesses `ops`.
struct RunLock {
    next: AtomicU32,
    serving: AtomicU32,
    ops: UnsafeCell<KVVec<Op>>,
}

// SAFETY: The ops are accessed only through the one `RunGuard` (the type
// invariants), by whichever thread holds it; `KVVec<Op>` may move between
// threads.
unsafe impl Sync for RunLock {}

impl RunLock {
    fn new(ops: KVVec<Op>) -> Self {
        // INVARIANT: No guard yet.
        RunLock {
            next: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            ops: UnsafeCell::new(ops),
        }
    }

    /// Takes the lock, waiting for the run that holds it if another does.
    /// Process context.
    #[inline(always)]
    fn lock(&self) -> RunGuard<'_> {
        // Before waiting, so that lockdep can tell a wait that could never
        // end.
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: No requirements.
        unsafe {
            sys::msrbatch_run_lock_acquire()
        };
        // SeqCst, this add and the load after it, as the release's add and
        // load: then the release sees this ticket taken, or we see it
        // served. (In Rust's model a `SeqCst` add is no barrier before a
        // weaker load after it, and both could miss the other; on x86 a
        // `SeqCst` load is a plain one, as an `Acquire` load is.) Acquire:
        // the last run's use of the ops before ours.
        let ticket = self.next.fetch_add(1, Ordering::SeqCst);
        if self.serving.load(Ordering::SeqCst) != ticket {
            // SAFETY: `serving` is an `atomic_t` (an `int`, as the
            // `AtomicU32` is, of the same size and alignment), valid while
            // `self` is borrowed, which lasts the call; the helper sleeps
            // until it serves `ticket`, and reads it with acquire ordering.
            unsafe { sys::msrbatch_run_lock_wait(self.serving.as_ptr().cast(), ticket) };
        }
        // INVARIANT: The lock serves our ticket: we are its one guard.
        RunGuard { lock: self }
    }
}

/// The ops of a prepared batch while a run holds their [`RunLock`].
///
/// # Invariants
///
/// `lock` serves this guard's ticket: it is the lock's only guard.
struct RunGuard<'a> {
    lock: &'a RunLock,
}

impl Deref for RunGuard<'_> {
    type Target = KVVec<Op>;

    #[inline(always)]
    fn deref(&self) -> &KVVec<Op> {
        // SAFETY: By the type invariants we are the lock's only guard, the
        // only one that accesses the ops, for as long as we live.
        unsafe { &*self.lock.ops.get() }
    }
}

impl DerefMut for RunGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut KVVec<Op> {
        // SAFETY: As in `deref`; borrowed mutably through `self`.
        unsafe { &mut *self.lock.ops.get() }
    }
}

impl Drop for RunGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: No requirements; taken in `RunLock::lock`.
        unsafe {
            sys::msrbatch_run_lock_release()
        };
        // INVARIANT: The lock serves the next ticket, and this guard ends.
        // (Release: our use of the ops before the next run's. SeqCst, the
        // add and the look at `next`, as in `RunLock::lock`: a run that took
        // a later ticket sees it served, or is seen and woken.)
        let served = self.lock.serving.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        if self.lock.next.load(Ordering::SeqCst) != served {
            // SAFETY: As in `RunLock::lock`; the helper orders the release
            // above before it looks for waiters, and wakes them.
            unsafe { sys::msrbatch_run_lock_wake(self.lock.serving.as_ptr().cast()) };
        }
    }
}

/// One prepared batch.
///
/// # Invariants
///
/// `plan` was made from `ops`, which passed the checks of the accept
/// pipeline (a [`Kept`]'s); a run changes only their `status` and `val`.
/// `shares`, if any, were made of `ops` and `plan` ([`batch::KeptShares::of`]).
#[pin_data]
pub(crate) struct Prepared {
    /// The validated private copy of the ops; locked for the length of a run,
    /// which may use their `status`/`val` as scratch space (stale after a
    /// run that put its outputs straight into the results).
    ops: RunLock,
    plan: Plan,
    /// A batch on several CPUs: its shares and their mask, made once.
    shares: Option<batch::KeptShares>,
    results: Results,
    /// Runs under way that found the batch in its table ([`Table::run`]),
    /// and [`ORPHANED`] once the table let go of it: then the last of them
    /// drops the table's reference.
    users: AtomicUsize,
}

/// In [`Prepared::users`]: the batch left its table, whose reference the
/// last run under way drops.
const ORPHANED: usize = 1 << (usize::BITS - 1);

impl Prepared {
    /// Keeps the accepted batch `kept`.
    pub(crate) fn new(kept: Kept) -> Result<Arc<Self>> {
        let (mut ops, plan) = kept.into_parts();
        // (Of the ops where they stay: a `KVVec` that moves keeps its buffer.)
        let shares = batch::KeptShares::of(&mut ops, &plan)?;
        let results = Results::new(ops.len())?;
        // INVARIANT: `ops` and `plan` as the `Kept` held them, `shares` of them.
        Arc::pin_init(
            pin_init!(Prepared {
                ops: RunLock::new(ops),
                plan,
                shares,
                results,
                users: AtomicUsize::new(0),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Whether the batch writes MSRs.
    pub(crate) fn has_writes(&self) -> bool {
        self.plan.has_writes()
    }

    /// A copy of the batch's ops, as validated (a sampler runs its own).
    pub(crate) fn ops_copy(&self) -> Result<KVVec<Op>> {
        let ops = self.ops.lock();
        let mut copy = KVVec::with_capacity(ops.len(), GFP_KERNEL_ACCOUNT)?;
        copy.extend_from_slice(&ops, GFP_KERNEL_ACCOUNT)?;
        Ok(copy)
    }

    /// Bytes of the results mapping.
    pub(crate) fn mmap_size(&self) -> usize {
        self.results.bytes
    }

    /// The memory the batch holds, as the confined limits count it: its ops
    /// and its results (whole pages).
    fn held_bytes(&self) -> usize {
        // The ops were validated: at most `MAX_OPS`, no overflow.
        self.results.len * size_of::<Op>() + self.results.bytes
    }

    /// Runs the batch for a descriptor opened for `access`: its writes (if
    /// any) must pass the write checks again at each run; then `before_writes`
    /// sees the ops. Returns the number of failed ops.
    pub(crate) fn run(
        &self,
        access: Access,
        before_writes: impl FnOnce(&[Op]) -> Result<(), batch::Rejected>,
    ) -> Result<u32> {
        let mut ops = self.ops.lock();
        policy::check_writes(&ops, &self.plan, access).map_err(|r| r.err)?;
        before_writes(&ops).map_err(|r| r.err)?;
        // SAFETY: By the type invariants `plan` is made from these ops, the
        // kernel's own copy, which passed the rules when prepared (a confined
        // descriptor's batches do not write); `check_writes` allowed the
        // writes now.
        let nr_failed = unsafe { batch::execute_cold(&mut ops, &self.plan) }.map_err(|r| r.err)?.nr_failed;
        if self.plan.has_writes() {
            policy::taint_if_written(&ops);
        }
        self.results.publish(&ops);
        Ok(nr_failed)
    }

    /// Runs a batch that does not write (see [`Prepared::has_writes`]): no
    /// write checks, no restore log, no taint. Returns the number of failed
    /// ops.
    // (In line in the ioctl's one frame: see `MsrBatchFile::ioctl`.)
    #[inline(always)]
    pub(crate) fn run_reads(&self) -> Result<u32> {
        if self.plan.has_writes() {
            return Err(EINVAL);
        }
        let mut ops = self.ops.lock();
        // A batch on one CPU puts its outputs straight into the results: no
        // copy after the run (and the private copy's outputs go stale).
        let direct = self.results.outputs(&ops).and_then(|out| {
            // SAFETY: By the type invariants `plan` is made from these ops,
            // the kernel's own copy; it has no writes (checked above).
            unsafe { batch::execute_into(&mut ops, &self.plan, out) }
        });
        let ran = match direct {
            Some(ran) => ran,
            None => {
                // SAFETY: As above.
                let ran = unsafe { batch::execute_kept(&mut ops, &self.plan, self.shares.as_ref()) };
                if ran.is_ok() {
                    self.results.publish(&ops);
                }
                ran
            }
        };
        Ok(ran.map_err(|r| r.err)?.nr_failed)
    }

    /// Maps the results into `vma`, which must not be larger than they are.
    pub(crate) fn mmap(&self, vma: &kernel::mm::virt::VmaNew) -> Result {
        if vma.end() - vma.start() > self.results.bytes {
            return Err(EINVAL);
        }
        vma.set_dontcopy();
        // SAFETY: `vma` is being set up by `mmap()`, no larger than the
        // results: by their type invariants an area from `mappable_alloc` of
        // `bytes` bytes, alive while `self` is.
        unsafe { crate::helpers::mappable_mmap(vma.as_ptr(), self.results.ptr.cast(), self.results.bytes) }
    }
}

/// How many prepared batches a descriptor opened without `CAP_SYS_RAWIO`
/// may hold at once (`ENOSPC` beyond; `MSRBATCH_MAX_PREPARED` for others).
pub(crate) const MAX_PREPARED_CONFINED: usize = 16;
/// How much memory (ops and results, see [`Prepared::held_bytes`]) the
/// prepared batches of one such descriptor may hold together (`EDQUOT`).
pub(crate) const MAX_PREPARED_BYTES_CONFINED: usize = 1 << 20;
/// How much all such descriptors' prepared batches may hold together in the
/// system (`ENOSPC`): what descriptors with `CAP_SYS_RAWIO` never compete for.
pub(crate) const MAX_PREPARED_BYTES_ALL_CONFINED: usize = 64 << 20;

/// The memory all confined descriptors' tables hold (see
/// [`MAX_PREPARED_BYTES_ALL_CONFINED`]).
static CONFINED_HELD: AtomicUsize = AtomicUsize::new(0);

/// A file's prepared batches, by handle, and for a descriptor confined by
/// the allowlist what they hold, against its limits.
///
/// A run finds its batch without a lock: the handle indexes `slots`, read
/// under a count of `readers` (see [`Table::get`]). `PREPARE` and
/// `UNPREPARE` change the slots under `counts`' lock; `UNPREPARE` empties a
/// slot, waits until no reader may still be taking a reference to what it
/// held, then drops the table's.
///
/// # Invariants
///
/// Each slot is null or holds the reference of an `Arc<Prepared>` turned
/// into a raw pointer (`Arc::into_raw`), which the table owns: only a slot's
/// writer (under `counts`' lock, or the table's drop) takes it out. A
/// reader increments `readers` before it loads a slot and decrements it
/// after it has taken its own reference (an `Arc`, or a count in the
/// batch's `users`), and a writer that took a pointer out of a slot lets go
/// of the table's reference ([`orphan`]) only once it has seen `readers` at
/// 0 after emptying the slot.
#[pin_data]
pub(crate) struct Table {
    #[pin]
    counts: Mutex<Counts>,
    slots: Slots,
}

/// The slots of a [`Table`] and the count of their readers.
struct Slots {
    slots: [AtomicPtr<Prepared>; uapi::MAX_PREPARED],
    readers: AtomicUsize,
}

/// What a [`Table`]'s batches hold, against a confined descriptor's limits.
struct Counts {
    confined: bool,
    /// Bytes the batches in the slots hold (counted for confined tables only).
    held: usize,
}

impl Table {
    /// `confined`: the descriptor was opened without `CAP_SYS_RAWIO`.
    pub(crate) fn new(confined: bool) -> impl PinInit<Self> {
        pin_init!(Table {
            counts <- new_mutex!(Counts { confined, held: 0 }),
            slots: Slots {
                slots: [const { AtomicPtr::new(core::ptr::null_mut()) }; uapi::MAX_PREPARED],
                readers: AtomicUsize::new(0),
            },
        })
    }

    /// Stores `p` under the lowest free handle. `ENOSPC` when the file holds
    /// `MSRBATCH_MAX_PREPARED` already, or, confined, [`MAX_PREPARED_CONFINED`],
    /// or when all confined descriptors together would hold more than
    /// [`MAX_PREPARED_BYTES_ALL_CONFINED`]; `EDQUOT` when this confined
    /// descriptor would hold more than [`MAX_PREPARED_BYTES_CONFINED`].
    pub(crate) fn insert(&self, p: Arc<Prepared>) -> Result<u32> {
        let mut counts = self.counts.lock();
        let slots = &self.slots.slots;
        let empty = |s: &AtomicPtr<Prepared>| s.load(Ordering::Relaxed).is_null();
        let free = slots.iter().position(empty).ok_or(ENOSPC)?;
        let bytes = if counts.confined { p.held_bytes() } else { 0 };
        if counts.confined {
            if slots.iter().filter(|s| !empty(s)).count() >= MAX_PREPARED_CONFINED {
                return Err(ENOSPC);
            }
            if counts.held + bytes > MAX_PREPARED_BYTES_CONFINED {
                return Err(crate::compat::edquot());
            }
            CONFINED_HELD
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |all| {
                    (all + bytes <= MAX_PREPARED_BYTES_ALL_CONFINED).then_some(all + bytes)
                })
                .map_err(|_| ENOSPC)?;
        }
        counts.held += bytes;
        // INVARIANT: an empty slot (we hold the lock) gets `p`'s reference.
        // Release: the batch's making before the pointer that shows it.
        slots[free].store(Arc::into_raw(p).cast_mut(), Ordering::Release);
        Ok(free as u32)
    }

    /// The batch under `handle` (`ENOENT` if none), without a lock: the
    /// common path of a run.
    #[inline]
    pub(crate) fn get(&self, handle: usize) -> Result<Arc<Prepared>> {
        let Slots { slots, readers } = &self.slots;
        let slot = slots.get(handle).ok_or(ENOENT)?;
        // SeqCst, against `remove`'s: either it sees this count, or this
        // load sees the slot it emptied.
        readers.fetch_add(1, Ordering::SeqCst);
        let ptr = slot.load(Ordering::SeqCst);
        let p = if ptr.is_null() {
            None
        } else {
            // SAFETY: By the type invariants `ptr` is an `Arc::into_raw`
            // reference the table still holds: a writer that took it out
            // since waits for `readers`, which we hold, before dropping it.
            // `ManuallyDrop`: we only clone it (our own reference).
            Some(Arc::clone(&ManuallyDrop::new(unsafe { Arc::from_raw(ptr) })))
        };
        readers.fetch_sub(1, Ordering::Release);
        p.ok_or(ENOENT)
    }

    /// Calls `f` with the batch under `handle` (`ENOENT` if none), found
    /// without a lock and kept alive without a reference count of its own:
    /// the common path of a run. The batch counts the call in its `users`;
    /// if the table lets go of the batch meanwhile, the call drops the
    /// table's reference when it ends, the last such call if several.
    /// (`f`'s own errors are returned as they are: a `Result` in a `Result`
    /// cost a run 6 instructions to take apart.)
    #[inline]
    pub(crate) fn run<R>(&self, handle: usize, f: impl FnOnce(&Prepared) -> Result<R>) -> Result<R> {
        let Slots { slots, readers } = &self.slots;
        let slot = slots.get(handle).ok_or(ENOENT)?;
        // As in `get`.
        readers.fetch_add(1, Ordering::SeqCst);
        let ptr = slot.load(Ordering::SeqCst);
        if ptr.is_null() {
            readers.fetch_sub(1, Ordering::Release);
            return Err(ENOENT);
        }
        // SAFETY: As in `get`, a live batch, whose reference the table holds
        // at least until `readers` is 0 again.
        let p = unsafe { &*ptr };
        // Counted before `readers` lets `remove` see the batch out of the
        // table: its `orphan` sees the count.
        p.users.fetch_add(1, Ordering::Relaxed);
        readers.fetch_sub(1, Ordering::Release);
        let user = User(ptr);
        let r = f(p);
        drop(user);
        r
    }

    /// Removes the batch under `handle` (`ENOENT` if none); it is freed once
    /// no run uses it and no other reference (a sampler's request, a
    /// mapping's set-up) is left.
    pub(crate) fn remove(&self, handle: usize) -> Result {
        let ptr = {
            let mut counts = self.counts.lock();
            let slot = self.slots.slots.get(handle).ok_or(ENOENT)?;
            let ptr = slot.swap(core::ptr::null_mut(), Ordering::SeqCst);
            if ptr.is_null() {
                return Err(ENOENT);
            }
            // SAFETY: By the type invariants a live batch, whose reference
            // the table holds until we drop it below.
            let bytes = unsafe { &*ptr }.held_bytes();
            counts.release(bytes);
            ptr
        };
        self.slots.quiesce();
        // SAFETY: Taken out of its slot by us (under the lock); no reader can
        // be taking a reference from it any more (`quiesce`): the table's
        // reference is ours.
        unsafe { orphan(ptr) };
        Ok(())
    }
}

/// A run under way, counted in its batch's `users` ([`Table::run`]).
///
/// # Invariants
///
/// `.0` is a batch whose `users` counts this `User`; while it does, the
/// batch's table reference is not dropped.
struct User(*mut Prepared);

impl Drop for User {
    // In line, and the batch's drop out of line: a call and a frame cost
    // every run 7 instructions.
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: By the type invariants alive while counted.
        let users = &unsafe { &*self.0 }.users;
        // AcqRel: the run's use of the batch before the drop that follows.
        if users.fetch_sub(1, Ordering::AcqRel) == ORPHANED | 1 {
            // SAFETY: The last user of a batch its table let go of (`orphan`
            // saw users): the table's reference, `Arc::into_raw`'s, is ours.
            unsafe { drop_table_ref(self.0) };
        }
    }
}

/// Drops the table's reference to `ptr`, which a run's [`User`] took over.
///
/// # Safety
///
/// The reference, `Arc::into_raw`'s, is the caller's, and not used after.
#[cold]
#[inline(never)]
unsafe fn drop_table_ref(ptr: *mut Prepared) {
    // SAFETY: By our own requirements.
    drop(unsafe { Arc::from_raw(ptr) });
}

/// Lets go of the table's reference to `ptr`: dropped now if no run uses
/// the batch, else by the last run ([`User`]).
///
/// # Safety
///
/// `ptr` is the table's reference (`Arc::into_raw`), taken out of its slot,
/// and no reader may still be taking it from there ([`Slots::quiesce`]).
unsafe fn orphan(ptr: *mut Prepared) {
    // SAFETY: The table's reference keeps it alive until dropped below or by
    // the last user.
    let users = &unsafe { &*ptr }.users;
    if users.fetch_or(ORPHANED, Ordering::AcqRel) == 0 {
        // SAFETY: No user: the table's reference is ours to drop.
        drop(unsafe { Arc::from_raw(ptr) });
    }
}

impl Slots {
    /// Waits until no reader of a slot emptied before the call may still be
    /// taking a reference from it. A reader holds `readers` for a few
    /// instructions, never across a sleep: spin a little, then sleep.
    fn quiesce(&self) {
        let mut spins = 0u32;
        while self.readers.load(Ordering::SeqCst) != 0 {
            if spins < 1000 {
                spins += 1;
                core::hint::spin_loop();
            } else {
                fsleep(Delta::from_micros(10));
            }
        }
    }
}

impl Counts {
    /// Gives back what a batch taken out of the table held (`bytes`).
    fn release(&mut self, bytes: usize) {
        if self.confined {
            self.held -= bytes;
            CONFINED_HELD.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        for slot in &self.slots {
            let ptr = slot.swap(core::ptr::null_mut(), Ordering::Relaxed);
            if !ptr.is_null() {
                // SAFETY: By the type invariants the table's reference, and
                // the table is going away: no reader is left (`&mut self`).
                unsafe { orphan(ptr) };
            }
        }
    }
}

impl Drop for Counts {
    fn drop(&mut self) {
        if self.confined {
            CONFINED_HELD.fetch_sub(self.held, Ordering::Relaxed);
        }
    }
}

/// The handle whose results a mapping at page offset `pgoff` shows.
pub(crate) fn handle_of(pgoff: usize) -> Result<usize> {
    let stride = uapi::PREPARED_STRIDE / PAGE_SIZE;
    if pgoff % stride != 0 {
        return Err(EINVAL);
    }
    Ok(pgoff / stride)
}

/// The mmap offset of `handle`'s results.
pub(crate) fn mmap_offset(handle: u32) -> u64 {
    u64::from(handle) * uapi::PREPARED_STRIDE as u64
}

#[kunit_tests(msrbatch_prepared)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicBool;

    /// Sleeps a millisecond at a time until `cond` holds, for a second at
    /// most; whether it held.
    fn within_a_second(cond: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if cond() {
                return true;
            }
            fsleep(Delta::from_millis(1));
        }
        cond()
    }

    /// Takes `lock` for a run of its own, and starts a worker that then
    /// wants it too: the guard, and whether that worker has had its run
    /// (taken the lock, and released it).
    fn waiter(lock: &Arc<RunLock>) -> Result<(RunGuard<'_>, Arc<AtomicBool>)> {
        let ran = Arc::new(AtomicBool::new(false), GFP_KERNEL)?;
        let first = lock.lock();
        let (second, done) = (lock.clone(), ran.clone());
        kernel::workqueue::system().try_spawn(GFP_KERNEL, move || {
            let _ops = second.lock();
            done.store(true, Ordering::Relaxed);
        })?;
        Ok((first, ran))
    }

    /// The lock's `(serving, next)`.
    fn tickets(lock: &RunLock) -> (u32, u32) {
        (lock.serving.load(Ordering::Relaxed), lock.next.load(Ordering::Relaxed))
    }

    #[test]
    fn a_run_waits_for_the_run_before() -> Result {
        // A second run (a worker) finds the ops locked: it takes the next
        // ticket, sleeps while the first holds the lock, and is woken by its
        // release; then it releases the lock in turn.
        let lock = Arc::new(RunLock::new(KVVec::new()), GFP_KERNEL)?;
        let (first, ran) = waiter(&lock)?;
        assert!(within_a_second(|| tickets(&lock) == (0, 2)));
        fsleep(Delta::from_millis(10));
        assert!(!ran.load(Ordering::Relaxed));
        drop(first);
        assert!(within_a_second(|| ran.load(Ordering::Relaxed)));
        assert!(within_a_second(|| tickets(&lock) == (2, 2)));
        // Free, it is taken and released in line.
        drop(lock.lock());
        assert_eq!(tickets(&lock), (3, 3));
        Ok(())
    }

    #[test]
    fn tickets_wrap_around() -> Result {
        // The lock's counts wrap at 2^32 runs (tickets are only compared for
        // equality): a run that holds the last ticket hands the lock over to
        // a waiter that took ticket 0, and no overflow check fires.
        let lock = Arc::new(RunLock::new(KVVec::new()), GFP_KERNEL)?;
        // INVARIANT: No guard: `next == serving`.
        lock.next.store(u32::MAX, Ordering::Relaxed);
        lock.serving.store(u32::MAX, Ordering::Relaxed);
        let (first, ran) = waiter(&lock)?;
        assert!(within_a_second(|| tickets(&lock) == (u32::MAX, 1)));
        fsleep(Delta::from_millis(10));
        assert!(!ran.load(Ordering::Relaxed));
        drop(first);
        assert!(within_a_second(|| ran.load(Ordering::Relaxed)));
        assert!(within_a_second(|| tickets(&lock) == (1, 1)));
        Ok(())
    }

    #[test]
    fn runs_take_turns_in_order() -> Result {
        // A run that releases the lock while another waits, and at once
        // wants it again, gets it after the one that waited: at e154d05 it
        // took it back before the waiter woke, and could again and again.
        let lock = Arc::new(RunLock::new(KVVec::new()), GFP_KERNEL)?;
        let (first, ran) = waiter(&lock)?;
        assert!(within_a_second(|| lock.next.load(Ordering::Relaxed) == 2));
        drop(first);
        let again = lock.lock();
        assert!(ran.load(Ordering::Relaxed));
        drop(again);
        Ok(())
    }
}
