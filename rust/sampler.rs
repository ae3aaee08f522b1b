// SPDX-License-Identifier: GPL-2.0

//! Samplers: a prepared batch that only reads, run by a timer on every CPU
//! it names, into a ring the caller maps (`Documentation/sampling.md`).
//!
//! `MSRBATCH_IOC_SAMPLE` copies the prepared batch's ops (they are already
//! validated), keeps those of each CPU as that CPU's *lane*, allocates the
//! ring (`helpers::mappable_alloc()`, charged to the caller: one control page, `struct msrbatch_ring`, then the
//! data area) and hands the sampler to `sampler_file.c`, which makes it a
//! file and starts one pinned hrtimer per CPU through a CPU hotplug state.
//!
//! Every period, on each CPU, the timer (hard interrupt context) runs the
//! lane's ops and appends a record under the ring's raw spinlock. Nothing in
//! that path allocates, sleeps or touches user memory. The ring never
//! overwrites unread bytes: a record that does not fit is counted as lost
//! (per CPU, reported by a LOST record once there is room, and in the control
//! page's `lost`). The kernel trusts nothing in the mapping: it keeps its own
//! head, reads only `data_tail` (and treats a tail that makes no sense as a
//! full ring), and writes only within the mapping.
//!
//! Lifetimes: the sampler belongs to its file. The last close stops the
//! timers (the hotplug state's teardown cancels each on its CPU), waits for
//! a pending wake-up, and frees; mappings keep their own references to the
//! ring's pages. The sampler keeps nothing of the device file that made it.

use crate::batch;
use crate::uapi::{self, opcode, rec, rec_layout as lay, Op, RingPage};
use core::cell::UnsafeCell;
use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use core::mem::offset_of;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{page::PAGE_SIZE, prelude::*};

use crate::sys::{
    self, msrbatch_sampler_exit, msrbatch_sampler_free, msrbatch_sampler_init, msrbatch_sampler_install,
    msrbatch_sampler_lock, msrbatch_sampler_new, msrbatch_sampler_stop, msrbatch_sampler_unlock,
    msrbatch_sampler_wake, msrbatch_sampler_wake_all, MSRBATCH_SAMPLER_HUP as HUP,
    MSRBATCH_SAMPLER_READABLE as READABLE,
};

/// `struct msrbatch_sampler` of `sampler_file.c` (the C half), opaque here.
pub(crate) type CHalf = sys::msrbatch_sampler;

/// Sets up the samplers' load registry and CPU hotplug state (module init).
pub(crate) fn init() -> Result {
    // SAFETY: Once, in module init, before any sampler exists.
    unsafe { LOAD.init() };
    // SAFETY: Process context, once, before any sampler exists.
    kernel::error::to_result(unsafe { msrbatch_sampler_init() })
}

/// Removes it (module exit, when no sampler exists: each file holds a
/// module reference).
pub(crate) fn exit() {
    // SAFETY: Once, after `init`, with no instance left.
    unsafe { msrbatch_sampler_exit() }
}

/// What all samplers together ask of the machine (the limits of
/// `Documentation/sampling.md`): how many exist, how many of them descriptors
/// confined by the allowlist made, and each CPU's ops per second.
struct Load {
    samplers: u32,
    confined: u32,
    /// By CPU number (grown on demand): ops per second of all samplers.
    rate: KVec<u64>,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised in module init (`init`), before any sampler.
    unsafe(uninit) static LOAD: Mutex<Load> = Load { samplers: 0, confined: 0, rate: KVec::new() };
}

/// A lane's ops per second: `nr` ops every `period_ns`, rounded up.
fn ops_per_sec(nr: usize, period_ns: u64) -> u64 {
    (nr as u64 * 1_000_000_000).div_ceil(period_ns.max(1))
}

/// One CPU's share of a sampler.
///
/// # Invariants
///
/// Every op of `ops` is one a sampler may run ([`may_sample`]): none writes.
struct Lane {
    cpu: u32,
    /// The code of every op, if they share one (the batch's fast loops).
    uniform: Option<u16>,
    /// The CPU's ops in array order, as run by its timer, which alone
    /// touches them (an hrtimer's callback never runs twice at once).
    ops: UnsafeCell<KVec<Op>>,
    /// Records of this CPU lost since its last LOST record (ring lock).
    lost: AtomicU64,
}

/// The ring: `helpers::mappable_alloc()` memory, the control page then the data
/// area.
///
/// # Invariants
///
/// `base` is the start of an area from `helpers::mappable_alloc` of `bytes`
/// bytes (page-aligned), which the ring owns until it drops: `PAGE_SIZE`
/// bytes of control page (`struct msrbatch_ring`), then `data_size` bytes of
/// data area, a power of two. User space maps it and may write it at any
/// time: the kernel accesses it through raw pointers, volatile or atomic,
/// never through a reference to its bytes.
struct Ring {
    base: NonNull<u8>,
    bytes: usize,
    data_size: u64,
    /// Bytes appended: the producers' own head (written under the lock;
    /// read without it by `poll()`). `data_head` in the page is a copy.
    head: AtomicU64,
    /// Records lost in all (under the lock); `lost` in the page is a copy.
    lost: AtomicU64,
}

/// Where a reserved record goes: its offset in the data area and the head
/// after it.
struct Slot {
    off: usize,
    next_head: u64,
}

impl Ring {
    fn new(data_pages: u32, period_ns: u64) -> Result<Self> {
        let data_size = data_pages as usize * PAGE_SIZE;
        let bytes = PAGE_SIZE + data_size;
        let base = crate::helpers::mappable_alloc(bytes).ok_or(ENOMEM)?.cast::<u8>();
        // INVARIANT: `bytes` bytes from `mappable_alloc`, the control page and
        // `data_pages` pages (a power of two: `MSRBATCH_IOC_SAMPLE` checks).
        let ring = Ring {
            base,
            bytes,
            data_size: data_size as u64,
            head: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        };
        ring.put32(offset_of!(RingPage, version), uapi::RING_VERSION);
        ring.put64(offset_of!(RingPage, data_offset), PAGE_SIZE as u64);
        ring.put64(offset_of!(RingPage, data_size), data_size as u64);
        ring.put64(offset_of!(RingPage, period_ns), period_ns);
        Ok(ring)
    }

    /// Writes `v` at byte `off` of the mapping (the control page, or the data
    /// area at `PAGE_SIZE + off`).
    fn put64(&self, off: usize, v: u64) {
        if off + 8 <= self.bytes && off % 8 == 0 {
            // SAFETY: In bounds and aligned (checked; `base` is page-aligned
            // by the type invariants), through a raw pointer, as they ask.
            unsafe { self.base.as_ptr().add(off).cast::<u64>().write_volatile(v) };
        }
    }

    fn put32(&self, off: usize, v: u32) {
        if off + 4 <= self.bytes && off % 4 == 0 {
            // SAFETY: As in `put64`.
            unsafe { self.base.as_ptr().add(off).cast::<u32>().write_volatile(v) };
        }
    }

    /// The control page's field at `off`, as an atomic (user space writes
    /// `data_tail` concurrently).
    fn atomic(&self, off: usize) -> &AtomicU64 {
        const { assert!(offset_of!(RingPage, data_tail) + 8 <= 4096) };
        // SAFETY: `off` is one of the control page's u64 fields (callers pass
        // an `offset_of!`), 8-byte aligned, inside the first page of the area,
        // which by the type invariants lives as long as `self`; all accesses
        // to it from here are atomic.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast::<u64>()) }
    }

    /// Reserves `size` bytes (a multiple of `ALIGN`, at most the data area)
    /// for `cpu`'s record; writes a PAD record first if it would not fit
    /// before the end. `None`: the ring is full (or its tail is garbage).
    /// Under the lock.
    fn reserve(&self, cpu: u32, size: u64) -> Option<Slot> {
        let mut head = self.head.load(Ordering::Relaxed);
        let tail = self.atomic(offset_of!(RingPage, data_tail)).load(Ordering::Acquire);
        let unread = head.wrapping_sub(tail);
        let off = head & (self.data_size - 1);
        let to_end = self.data_size - off;
        let pad = if size > to_end { to_end } else { 0 };
        if unread > self.data_size || unread + pad + size > self.data_size {
            return None;
        }
        if pad != 0 {
            self.put_header(off as usize, rec::PAD, cpu, pad, 0);
            head += pad;
        }
        Some(Slot {
            off: (head & (self.data_size - 1)) as usize,
            next_head: head + size,
        })
    }

    /// Writes a record header (`type`, `cpu`, `size`, `nr`: two u64s) at
    /// data offset `off`.
    fn put_header(&self, off: usize, ty: u32, cpu: u32, size: u64, nr: u32) {
        const { assert!(lay::HEADER == 16 && lay::SAMPLE_SEQ == lay::HEADER) };
        let at = PAGE_SIZE + off;
        self.put64(at, u64::from(ty) | (u64::from(cpu) << 32));
        self.put64(at + 8, size | (u64::from(nr) << 32));
    }

    /// Writes field `field` (byte offset in the record) of the record at `slot`.
    fn put_field(&self, slot: &Slot, field: usize, v: u64) {
        self.put64(PAGE_SIZE + slot.off + field, v);
    }

    /// Publishes the records written up to `slot`.
    fn commit(&self, slot: Slot) {
        self.head.store(slot.next_head, Ordering::Relaxed);
        // Release: the record's bytes before the head that shows them.
        self.atomic(offset_of!(RingPage, data_head)).store(slot.next_head, Ordering::Release);
    }

    /// Unread bytes (garbage tails make this large).
    fn unread(&self) -> u64 {
        let tail = self.atomic(offset_of!(RingPage, data_tail)).load(Ordering::Acquire);
        self.head.load(Ordering::Acquire).wrapping_sub(tail)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: By the type invariants the area is ours, from
        // `mappable_alloc`; it is not used afterwards, and mappings keep their
        // own references to the pages.
        unsafe { crate::helpers::mappable_free(self.base.cast()) };
    }
}

/// A sampler: its lanes, its ring and its C half.
///
/// # Invariants
///
/// - `c_half`, when `Some`, is the C half `msrbatch_sampler_new` made for this
///   sampler, live until the sampler drops and frees it.
/// - `lanes` are sorted by CPU, one per CPU. Each lane's `ops` are touched
///   only by its CPU's timer once installed (an hrtimer's callbacks never
///   overlap), and before that only by whoever holds the sampler.
/// - Once installed, the sampler is reached only through the owner pointer
///   the C half holds, by shared references, until
///   `msrbatch_sampler_release` stops the timers and frees it.
pub(crate) struct Sampler {
    c_half: Option<NonNull<CHalf>>,
    ring: Ring,
    /// Sorted by CPU.
    lanes: KVec<Lane>,
    watermark: u64,
    /// One more than the head at which a record last did not fit (0: none
    /// yet): while the head has not moved since, the ring is full, and
    /// readable whatever the watermark (records are whole, so a full ring
    /// may stop short of a watermark near the data area's size).
    full_at: AtomicU64,
    stopped: AtomicBool,
    _reserved: Reservation,
}

// SAFETY: By the type invariants the lanes' ops are touched only by their
// CPU's timer; everything else shared is atomic or written under the C
// half's lock.
unsafe impl Sync for Sampler {}
// SAFETY: As above; nothing is tied to a thread.
unsafe impl Send for Sampler {}

/// Takes the ring's lock (interrupts off) until dropped.
struct Locked(NonNull<CHalf>, c_ulong);

impl Locked {
    fn new(g: NonNull<CHalf>) -> Self {
        // SAFETY: `g` is a sampler's `c_half`, live while the sampler is (its
        // type invariants); callers hold the sampler.
        Locked(g, unsafe { msrbatch_sampler_lock(g.as_ptr()) })
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: Taken in `new` with these flags.
        unsafe { msrbatch_sampler_unlock(self.0.as_ptr(), self.1) };
    }
}

/// Whether a sampler may run `op` (read-only ops that take no time).
fn may_sample(op: &Op) -> bool {
    matches!(op.op, opcode::RDMSR | opcode::RDPMC | opcode::RDTSC | opcode::RDTSCP | opcode::CPUID)
}

/// Splits `ops` into lanes (EINVAL for an op a sampler may not run, E2BIG
/// past `SAMPLE_MAX_OPS` on one CPU; each names the first such op).
fn lanes_of(ops: &[Op]) -> Result<KVec<Lane>, batch::Rejected> {
    if let Some(i) = ops.iter().position(|op| !may_sample(op)) {
        return Err(batch::Rejected { err: EINVAL, index: i as u32 });
    }
    let mut order = KVec::<(u32, u32)>::with_capacity(ops.len(), GFP_KERNEL_ACCOUNT)?;
    for (i, op) in ops.iter().enumerate() {
        order.push((op.cpu, i as u32), GFP_KERNEL_ACCOUNT)?;
    }
    crate::compat::sort_by_key(&mut order, |&p| p);
    // The first op, in array order, that is its CPU's 65th or later.
    let too_many = order
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(|run| run.get(uapi::SAMPLE_MAX_OPS).map(|&(_, i)| i))
        .min();
    if let Some(index) = too_many {
        return Err(batch::Rejected { err: E2BIG, index });
    }
    let mut lanes = KVec::new();
    for run in order.chunk_by(|a, b| a.0 == b.0) {
        let mut lane_ops = KVec::with_capacity(run.len(), GFP_KERNEL_ACCOUNT)?;
        for &(_, i) in run {
            let mut op = *ops.get(i as usize).ok_or(EINVAL)?;
            op.status = 0;
            op.val = [0, 0];
            lane_ops.push(op, GFP_KERNEL_ACCOUNT)?;
        }
        let uniform = batch::uniform_code(&lane_ops);
        lanes.push(
            // INVARIANT: every op passed `may_sample` above.
            Lane {
                cpu: run[0].0,
                uniform,
                ops: UnsafeCell::new(lane_ops),
                lost: AtomicU64::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(lanes)
}

/// A sampler's share of the [`Load`], held for its life: one of the
/// `MAX_SAMPLERS` (of the `MAX_SAMPLERS_CONFINED`, for a confined
/// descriptor's), and its lanes' ops per second on their CPUs.
struct Reservation {
    confined: bool,
    /// (CPU, ops per second), one per lane.
    rates: KVec<(u32, u64)>,
}

impl Reservation {
    /// Reserves `lanes` at `period_ns`: `ERANGE` when a lane alone runs more
    /// than `SAMPLE_MAX_OPS_PER_SEC` (naming its first op, `first_op`),
    /// `EBUSY` when the other samplers leave a CPU too little, `ENOSPC` when
    /// all samplers (or all a confined descriptor may have) exist.
    fn new(
        lanes: &[Lane],
        first_op: impl Fn(u32) -> u32,
        period_ns: u64,
        confined: bool,
    ) -> Result<Self, batch::Rejected> {
        let mut rates = KVec::with_capacity(lanes.len(), GFP_KERNEL_ACCOUNT)?;
        for l in lanes {
            // SAFETY: The lane's sampler is not installed yet: nothing else
            // touches its ops (the `Sampler` invariants).
            let nr = unsafe { &*l.ops.get() }.len();
            let rate = ops_per_sec(nr, period_ns);
            if rate > uapi::SAMPLE_MAX_OPS_PER_SEC {
                return Err(batch::Rejected { err: ERANGE, index: first_op(l.cpu) });
            }
            rates.push((l.cpu, rate), GFP_KERNEL_ACCOUNT)?;
        }
        let top = lanes.last().map_or(0, |l| l.cpu as usize + 1);
        let mut load = LOAD.lock();
        if load.samplers >= uapi::MAX_SAMPLERS
            || (confined && load.confined >= uapi::MAX_SAMPLERS_CONFINED)
        {
            return Err(ENOSPC.into());
        }
        if load.rate.len() < top {
            let more = top - load.rate.len();
            load.rate.extend_with(more, 0, GFP_KERNEL)?;
        }
        let busy = rates.iter().any(|&(cpu, r)| {
            load.rate.get(cpu as usize).is_none_or(|&used| used + r > uapi::SAMPLE_MAX_OPS_PER_SEC)
        });
        if busy {
            return Err(EBUSY.into());
        }
        for &(cpu, r) in rates.iter() {
            if let Some(used) = load.rate.get_mut(cpu as usize) {
                *used += r;
            }
        }
        load.samplers += 1;
        load.confined += u32::from(confined);
        Ok(Reservation { confined, rates })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut load = LOAD.lock();
        for &(cpu, r) in self.rates.iter() {
            if let Some(used) = load.rate.get_mut(cpu as usize) {
                *used = used.saturating_sub(r);
            }
        }
        load.samplers = load.samplers.saturating_sub(1);
        load.confined = load.confined.saturating_sub(u32::from(self.confined));
    }
}

/// A sampler being made: the `MSRBATCH_IOC_SAMPLE` checks have passed.
pub(crate) struct NewSampler(KBox<Sampler>);

impl NewSampler {
    /// Checks `req` and `ops` (a prepared batch's ops, validated) and makes
    /// a sampler, not yet started.
    /// `confined`: the descriptor is confined by the allowlist.
    pub(crate) fn new(req: &uapi::SampleReq, ops: &[Op], confined: bool) -> Result<Self, batch::Rejected> {
        let lanes = lanes_of(ops)?;
        let data_size = u64::from(req.ring_pages) * PAGE_SIZE as u64;
        if u64::from(req.watermark) >= data_size {
            return Err(EINVAL.into());
        }
        let first_op = |cpu| ops.iter().position(|op| op.cpu == cpu).map_or(uapi::NO_INDEX, |i| i as u32);
        let reserved = Reservation::new(&lanes, first_op, req.period_ns, confined)?;
        let ring = Ring::new(req.ring_pages, req.period_ns)?;
        let mut s = KBox::new(
            Sampler {
                c_half: None,
                ring,
                lanes,
                watermark: u64::from(req.watermark),
                full_at: AtomicU64::new(0),
                stopped: AtomicBool::new(false),
                _reserved: reserved,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut epoch = 0u64;
        // SAFETY: No preconditions; the C half knows no owner until
        // `install`, and calls nothing back before.
        let g = unsafe { msrbatch_sampler_new(req.period_ns, &mut epoch) };
        // INVARIANT: the C half made for this sampler, freed by its drop.
        s.c_half = Some(NonNull::new(g).ok_or(ENOMEM)?);
        s.ring.put64(offset_of!(RingPage, epoch_ns), epoch);
        Ok(NewSampler(s))
    }

    /// Bytes to map.
    pub(crate) fn mmap_size(&self) -> u64 {
        self.0.ring.bytes as u64
    }

    /// Starts the timers and returns the sampler's new descriptor.
    pub(crate) fn install(self) -> Result<isize> {
        let Some(g) = self.0.c_half else {
            return Err(ENOMEM);
        };
        // From here on the C half owns the box: its release reclaims it.
        // The owner pointer is the one `into_raw` returns, and from now on
        // the sampler is reached only through it, by shared references.
        let owner = KBox::into_raw(self.0).cast::<c_void>();
        // SAFETY: `g` is the sampler's C half, `owner` the leaked box that
        // holds it; `msrbatch_sampler_install` gives both to the file, or
        // releases them.
        let fd = unsafe { msrbatch_sampler_install(g.as_ptr(), owner) };
        kernel::error::to_result(fd).map(|()| fd as isize)
    }
}

impl Sampler {
    fn lane(&self, cpu: u32) -> Option<&Lane> {
        self.lanes.binary_search_by_key(&cpu, |l| l.cpu).ok().and_then(|i| self.lanes.get(i))
    }

    fn lock(&self) -> Option<Locked> {
        self.c_half.map(Locked::new)
    }

    /// Counts a record of `lane` that did not fit. Under the lock.
    fn lose(&self, lane: &Lane) {
        let head = self.ring.head.load(Ordering::Relaxed);
        self.full_at.store(head.wrapping_add(1), Ordering::Release);
        lane.lost.fetch_add(1, Ordering::Relaxed);
        let total = self.ring.lost.fetch_add(1, Ordering::Relaxed) + 1;
        self.ring.put64(offset_of!(RingPage, lost), total);
    }

    /// Appends `lane`'s LOST record if it has lost any and it fits. Under
    /// the lock; returns whether the ring has room for more.
    fn flush_lost(&self, lane: &Lane) -> bool {
        let lost = lane.lost.load(Ordering::Relaxed);
        if lost == 0 {
            return true;
        }
        let size = lay::LOST_SIZE.next_multiple_of(lay::ALIGN);
        let Some(slot) = self.ring.reserve(lane.cpu, size as u64) else {
            return false;
        };
        self.ring.put_header(slot.off, rec::LOST, lane.cpu, size as u64, 0);
        self.ring.put_field(&slot, lay::LOST_LOST, lost);
        // The padding up to the 16-byte boundary.
        self.ring.put_field(&slot, lay::LOST_SIZE, 0);
        self.ring.commit(slot);
        lane.lost.store(0, Ordering::Relaxed);
        true
    }

    /// Whether `unread` bytes are worth waking a reader for: the watermark
    /// is reached, or the ring is full (a record did not fit, and nothing
    /// was appended since).
    fn worth_reading(&self, unread: u64) -> bool {
        let full = self.full_at.load(Ordering::Acquire) == self.ring.head.load(Ordering::Acquire).wrapping_add(1);
        unread != 0 && (unread >= self.watermark.max(1) || full)
    }

    /// Wakes `poll()` if the watermark is reached or the ring is full.
    fn wake_if_ready(&self) {
        if let Some(g) = self.c_half {
            if self.worth_reading(self.ring.unread()) {
                // SAFETY: `g` is this sampler's live C half (type invariants).
                unsafe { msrbatch_sampler_wake(g.as_ptr()) };
            }
        }
    }

    /// Appends a record of type `ty` for `lane`'s CPU, `fields` bytes long
    /// before padding, with `nr` in its header; `body` writes what follows
    /// the header. Reports the lane's lost records first; a record that does
    /// not fit is lost. Then wakes `poll()` if the watermark is reached.
    fn append(&self, lane: &Lane, ty: u32, fields: usize, nr: u32, body: impl FnOnce(&Ring, &Slot)) {
        let size = fields.next_multiple_of(lay::ALIGN);
        {
            let Some(_locked) = self.lock() else {
                return;
            };
            let slot = if self.flush_lost(lane) { self.ring.reserve(lane.cpu, size as u64) } else { None };
            match slot {
                Some(slot) => {
                    self.ring.put_header(slot.off, ty, lane.cpu, size as u64, nr);
                    body(&self.ring, &slot);
                    if size > fields {
                        self.ring.put_field(&slot, fields, 0);
                    }
                    self.ring.commit(slot);
                }
                None => self.lose(lane),
            }
        }
        self.wake_if_ready();
    }

    /// One period on `cpu`: runs its ops and appends the sample. Hard
    /// interrupt context, on `cpu`.
    fn tick(&self, cpu: u32, seq: u64) {
        let Some(lane) = self.lane(cpu) else {
            return;
        };
        let tsc = crate::insn::rdtsc().unwrap_or(0);
        // SAFETY: By the `Sampler` invariants only this CPU's timer touches
        // the lane's ops, and its callbacks never overlap.
        let ops = unsafe { &mut *lane.ops.get() };
        // SAFETY: By the `Lane` invariants no op writes.
        unsafe { batch::run_reads_here(ops, lane.uniform) };
        let failed = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.status != 0)
            .fold(0u64, |m, (i, _)| m | (1u64 << (i % 64)));
        let fields = lay::SAMPLE_VAL + 16 * ops.len();
        self.append(lane, rec::SAMPLE, fields, ops.len() as u32, |ring, slot| {
            ring.put_field(slot, lay::SAMPLE_SEQ, seq);
            ring.put_field(slot, lay::SAMPLE_TSC, tsc);
            ring.put_field(slot, lay::SAMPLE_FAILED, failed);
            for (i, op) in ops.iter().enumerate() {
                ring.put_field(slot, lay::SAMPLE_VAL + 16 * i, op.val[0]);
                ring.put_field(slot, lay::SAMPLE_VAL + 16 * i + 8, op.val[1]);
            }
        });
    }

    /// `cpu` starts (`online`) or stops sampling at period `seq`.
    fn cpu_event(&self, cpu: u32, online: bool, seq: u64) {
        let Some(lane) = self.lane(cpu) else {
            return;
        };
        let tsc = crate::insn::rdtsc().unwrap_or(0);
        let ty = if online { rec::ONLINE } else { rec::OFFLINE };
        self.append(lane, ty, lay::CPU_SIZE, 0, |ring, slot| {
            ring.put_field(slot, lay::CPU_SEQ, seq);
            ring.put_field(slot, lay::CPU_TSC, tsc);
        });
    }

    /// Stops the timers (idempotent); the ring says so.
    fn stop(&self) {
        let Some(g) = self.c_half else {
            return;
        };
        // SAFETY: `g` is this sampler's live C half (type invariants);
        // process context.
        // The C half marks the ring stopped (`mark_stopped`) under its stop
        // lock, so every STOP returns with the ring saying so.
        if unsafe { msrbatch_sampler_stop(g.as_ptr()) } {
            // SAFETY: As above.
            unsafe { msrbatch_sampler_wake_all(g.as_ptr()) };
        }
    }

    /// The timers are stopped and every OFFLINE record is in: the ring says
    /// so, and `poll()` reports HUP.
    fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::Release);
        self.ring.put32(offset_of!(RingPage, flags), uapi::RING_STOPPED);
    }

    /// What `poll()` reports.
    fn ready(&self) -> c_uint {
        let unread = self.ring.unread();
        let stopped = self.stopped.load(Ordering::Acquire);
        let mut r = 0;
        if self.worth_reading(unread) || (unread != 0 && stopped) {
            r |= READABLE;
        }
        if stopped {
            r |= HUP;
        }
        r
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(g) = self.c_half.take() {
            // SAFETY: Nothing refers to `g` any more: either the sampler was
            // never installed (no timer, hotplug callback or wake-up was ever
            // set up, and the C half never knew this owner), or
            // `msrbatch_sampler_release` stopped it before dropping it. No
            // callback forms a reference to `self` while this `&mut` lives.
            unsafe { msrbatch_sampler_free(g.as_ptr()) };
        }
    }
}

/// The sampler behind `owner`.
///
/// # Safety
///
/// `owner` is the owner pointer of a live C half: an installed `Sampler`
/// that `msrbatch_sampler_release` has not freed, and does not free while the
/// returned reference lives.
unsafe fn sampler<'a>(owner: *mut c_void) -> &'a Sampler {
    // SAFETY: By the function's requirements; once installed, the sampler is
    // reached by shared references only (its type invariants).
    unsafe { &*owner.cast::<Sampler>() }
}

// The functions below are the C half's calls into the sampler
// (`sampler_file.c`, declared in `helpers.h`). Each takes the owner pointer that
// `msrbatch_sampler_install` gave the C half, and requires what
// [`sampler`] requires of it; the C half calls each only while the sampler
// is installed and not yet released.

/// Whether the sampler samples `cpu` (the hotplug state asks).
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_samples(owner: *mut c_void, cpu: c_uint) -> bool {
    // SAFETY: By the function's requirements: the hotplug state calls this
    // while the instance exists, which is between install and stop.
    unsafe { sampler(owner) }.lane(cpu).is_some()
}

/// One period of the sampler's timer on `cpu` (hard interrupt context, on
/// `cpu`).
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_tick(owner: *mut c_void, cpu: c_uint, seq: u64) {
    // SAFETY: By the function's requirements: timers run between install and
    // stop, which cancels them before the sampler is freed.
    unsafe { sampler(owner) }.tick(cpu, seq);
}

/// `cpu` starts (`online`) or stops sampling at period `seq`.
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_cpu_event(owner: *mut c_void, cpu: c_uint, online: bool, seq: u64) {
    // SAFETY: By the function's requirements, as `msrbatch_sampler_samples`.
    unsafe { sampler(owner) }.cpu_event(cpu, online, seq);
}

/// The timers are stopped: the ring says so.
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_mark_stopped(owner: *mut c_void) {
    // SAFETY: By the function's requirements: `msrbatch_sampler_stop` calls
    // this, and its caller holds the sampler.
    unsafe { sampler(owner) }.mark_stopped();
}

/// What `poll()` of the sampler's file reports.
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_ready(owner: *mut c_void) -> c_uint {
    // SAFETY: By the function's requirements: the file's poll() calls this,
    // and the file holds the sampler.
    unsafe { sampler(owner) }.ready()
}

/// `mmap()` of the sampler's file: maps the ring into `vma`.
///
/// # Safety
///
/// As [`sampler`] for `owner`; `vma` is a VMA being set up by `mmap()`, `len`
/// bytes long.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_mmap(owner: *mut c_void, vma: *mut sys::vm_area_struct, len: c_ulong) -> c_int {
    // SAFETY: By the function's requirements: the file's mmap() calls this,
    // and the file holds the sampler.
    let s = unsafe { sampler(owner) };
    if len > s.ring.bytes {
        return EINVAL.to_errno();
    }
    // SAFETY: `vma` is being set up by mmap(), no larger than the ring, which
    // by its type invariants is an area from `mappable_alloc` of `bytes`
    // bytes, alive while the sampler is.
    match unsafe { crate::helpers::mappable_mmap(vma.cast(), s.ring.base.cast(), s.ring.bytes) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `ioctl()` of the sampler's file.
///
/// # Safety
///
/// As [`sampler`] for `owner`.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_ioctl(owner: *mut c_void, cmd: c_uint, arg: c_ulong) -> c_long {
    // SAFETY: By the function's requirements: the file's ioctl() calls this,
    // and the file holds the sampler.
    let s = unsafe { sampler(owner) };
    match cmd {
        uapi::SAMPLER_IOC_STOP if arg == 0 => {
            s.stop();
            0
        }
        uapi::SAMPLER_IOC_STOP => EINVAL.to_errno() as c_long,
        _ => ENOTTY.to_errno() as c_long,
    }
}

/// Stops and frees the sampler: the file's release, or a failed install.
///
/// # Safety
///
/// `owner` is the owner pointer `NewSampler::install` gave the C half, of a
/// live sampler; called once, after which nothing uses the sampler.
#[no_mangle]
unsafe extern "C" fn msrbatch_sampler_release(owner: *mut c_void) {
    // First stop, through a shared reference: the stop cancels the timers,
    // whose callbacks (and the hotplug state's, and the stop's own
    // `mark_stopped`) form `&Sampler` from the same pointer meanwhile; a
    // `&mut` or a `KBox` must not exist while they may run.
    // SAFETY: By the function's requirements, a live sampler: the C half
    // calls this once, from the file's release or a failed install, with the
    // owner it was installed with.
    unsafe { sampler(owner) }.stop();
    // Then free: no timer, hotplug callback or wake-up is left, and no file
    // operation runs (the file is being released, or never existed).
    // SAFETY: `owner` is the box `NewSampler::install` leaked; nothing uses
    // the sampler afterwards.
    drop(unsafe { KBox::from_raw(owner.cast::<Sampler>()) });
}

// The functions `sampler_file.c` calls have `helpers.h`'s prototypes.
crate::sys::assert_prototype!(msrbatch_sampler_samples);
crate::sys::assert_prototype!(msrbatch_sampler_tick);
crate::sys::assert_prototype!(msrbatch_sampler_cpu_event);
crate::sys::assert_prototype!(msrbatch_sampler_mark_stopped);
crate::sys::assert_prototype!(msrbatch_sampler_ready);
crate::sys::assert_prototype!(msrbatch_sampler_mmap);
crate::sys::assert_prototype!(msrbatch_sampler_ioctl);
crate::sys::assert_prototype!(msrbatch_sampler_release);
