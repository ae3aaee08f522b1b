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
//! copy (its `status`/`val` fields are the run's scratch space), then
//! publishes every op's status and values into the results, and returns the
//! number of failed ops: no user memory is read or written by a run.
//!
//! Lifetimes: the file's table holds an `Arc` per handle; a run holds one
//! too, so `UNPREPARE` or `close()` during a run frees the batch when the run
//! ends. A mapping holds its own references to the result pages, so it stays
//! valid (with the last results) after `UNPREPARE`, `close()` and `vfree()`.
//! Mappings are not inherited across `fork()` (`VM_DONTCOPY`).

use crate::accept::Kept;
use crate::batch::{self, Plan};
use crate::policy::{self, Access};
use crate::uapi::{self, Op, OpResult};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, Mutex},
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
/// a reference.
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

    /// Publishes the outputs of `ops` (one per result).
    fn publish(&self, ops: &[Op]) {
        for (i, op) in ops.iter().enumerate().take(self.len) {
            let r = OpResult {
                status: op.status,
                reserved: 0,
                val: op.val,
            };
            // SAFETY: `i < len`: by the type invariants, within the area,
            // written through a raw pointer (user space may read or scribble
            // on it at any time).
            unsafe { self.ptr.as_ptr().add(i).write_volatile(r) };
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

/// One prepared batch.
///
/// # Invariants
///
/// `plan` was made from `ops`, which passed the checks of the accept
/// pipeline (a [`Kept`]'s); a run changes only their `status` and `val`.
#[pin_data]
pub(crate) struct Prepared {
    /// The validated private copy of the ops; locked for the length of a run,
    /// which uses their `status`/`val` as scratch space.
    #[pin]
    ops: Mutex<KVVec<Op>>,
    plan: Plan,
    results: Results,
}

impl Prepared {
    /// Keeps the accepted batch `kept`.
    pub(crate) fn new(kept: Kept) -> Result<Arc<Self>> {
        let (ops, plan) = kept.into_parts();
        let results = Results::new(ops.len())?;
        // INVARIANT: `ops` and `plan` as the `Kept` held them.
        Arc::pin_init(
            pin_init!(Prepared {
                ops <- new_mutex!(ops),
                plan,
                results,
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
        let nr_failed = unsafe { batch::execute(&mut ops, &self.plan) }.map_err(|r| r.err)?.nr_failed;
        if self.plan.has_writes() {
            policy::taint_if_written(&ops);
        }
        self.results.publish(&ops);
        Ok(nr_failed)
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
pub(crate) struct Table {
    slots: KVec<Option<Arc<Prepared>>>,
    confined: bool,
    /// Bytes the batches in `slots` hold (counted for confined tables only).
    held: usize,
}

impl Table {
    /// `confined`: the descriptor was opened without `CAP_SYS_RAWIO`.
    pub(crate) const fn new(confined: bool) -> Self {
        Table {
            slots: KVec::new(),
            confined,
            held: 0,
        }
    }

    /// Stores `p` under the lowest free handle. `ENOSPC` when the file holds
    /// `MSRBATCH_MAX_PREPARED` already, or, confined, [`MAX_PREPARED_CONFINED`],
    /// or when all confined descriptors together would hold more than
    /// [`MAX_PREPARED_BYTES_ALL_CONFINED`]; `EDQUOT` when this confined
    /// descriptor would hold more than [`MAX_PREPARED_BYTES_CONFINED`].
    pub(crate) fn insert(&mut self, p: Arc<Prepared>) -> Result<u32> {
        let free = self.slots.iter().position(Option::is_none);
        let used = self.slots.iter().filter(|s| s.is_some()).count();
        if free.is_none() && self.slots.len() >= uapi::MAX_PREPARED {
            return Err(ENOSPC);
        }
        let bytes = if self.confined { p.held_bytes() } else { 0 };
        if self.confined {
            if used >= MAX_PREPARED_CONFINED {
                return Err(ENOSPC);
            }
            if self.held + bytes > MAX_PREPARED_BYTES_CONFINED {
                return Err(crate::compat::edquot());
            }
            CONFINED_HELD
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |all| {
                    (all + bytes <= MAX_PREPARED_BYTES_ALL_CONFINED).then_some(all + bytes)
                })
                .map_err(|_| ENOSPC)?;
        }
        let handle = match free {
            Some(i) => {
                self.slots[i] = Some(p);
                i
            }
            None => match self.slots.push(Some(p), GFP_KERNEL_ACCOUNT) {
                Ok(()) => self.slots.len() - 1,
                Err(e) => {
                    CONFINED_HELD.fetch_sub(bytes, Ordering::Relaxed);
                    return Err(e.into());
                }
            },
        };
        self.held += bytes;
        Ok(handle as u32)
    }

    /// The batch under `handle` (`ENOENT` if none).
    pub(crate) fn get(&self, handle: usize) -> Result<Arc<Prepared>> {
        self.slots.get(handle).and_then(Option::clone).ok_or(ENOENT)
    }

    /// Removes the batch under `handle` (`ENOENT` if none).
    pub(crate) fn remove(&mut self, handle: usize) -> Result<Arc<Prepared>> {
        let p = self.slots.get_mut(handle).and_then(Option::take).ok_or(ENOENT)?;
        self.release(&p);
        Ok(p)
    }

    /// Gives back what `p`, just taken out of the table, held.
    fn release(&mut self, p: &Prepared) {
        if self.confined {
            let bytes = p.held_bytes();
            self.held -= bytes;
            CONFINED_HELD.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for Table {
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
