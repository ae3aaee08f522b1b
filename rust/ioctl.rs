// SPDX-License-Identifier: GPL-2.0

//! The ioctls of `/dev/msrbatch`, which `MsrBatchFile::ioctl` dispatches to
//! (`msrbatch_main.rs`): a batch, prepared batches, samplers, the module's
//! limits, and PCE grants. A batch or a prepared one comes in through the
//! accept pipeline (`accept.rs`); an ioctl whose argument is answered in
//! place (a batch, `PREPARE`, `SAMPLE`) writes it back through [`answer`].

use crate::accept::{Caller, Incoming, Purpose, Ran};
use crate::batch::Rejected;
use crate::policy::Access;
use crate::uapi::{self, Batch, Info, Op};
use crate::{prepared, sampler, MsrBatchFile};
use core::mem::MaybeUninit;
use kernel::{
    fs::File,
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// An ioctl argument that is answered in place: read, then carried out or
/// refused, then written back, its `err_index` naming the op to blame.
trait Answer: FromBytes + AsBytes + Sized {
    /// What carrying the request out made.
    type Done;
    /// Fills in the answer to a request carried out.
    fn done(&mut self, done: &Self::Done);
    /// Fills in the answer to a refused request; `index` names the op to
    /// blame (or is `MSRBATCH_NO_INDEX`).
    fn refused(&mut self, index: u32);
    /// Writes the answer over the request at `arg`: all of it, or what
    /// [`Answer::done`] and [`Answer::refused`] change.
    fn write_to(&self, arg: usize) -> Result {
        UserSlice::new(UserPtr::from_addr(arg), size_of::<Self>()).writer().write(self)
    }
}

/// Answers `req`, read from `arg`, in place by `made` and writes it back
/// over `arg`: carried out ([`Answer::done`]) or refused
/// ([`Answer::refused`], returning its errno). `EFAULT` is not answered:
/// like any `EFAULT`, it leaves the argument alone. The rule is the same for
/// every request; `MSRBATCH_IOC_SAMPLE` only never meets it here, as making
/// a sampler reads no user memory (its `EFAULT`s are those of reading and
/// writing the request itself). When the answer cannot
/// be written, a request that was carried out fails with what `lost` makes
/// of what it made and the error.
#[inline(always)]
fn answer<T: Answer>(
    arg: usize,
    req: &mut T,
    made: Result<T::Done, Rejected>,
    lost: impl FnOnce(T::Done, Error) -> Error,
) -> Result<T::Done> {
    let ret = match made {
        Ok(done) => {
            req.done(&done);
            Ok(done)
        }
        Err(r) if r.err == EFAULT => return Err(EFAULT),
        Err(r) => {
            req.refused(r.index);
            Err(r.err)
        }
    };
    match req.write_to(arg) {
        Ok(()) => ret,
        Err(e) => match ret {
            Ok(done) => Err(lost(done, e)),
            Err(_) => Err(e),
        },
    }
}

/// Reads the ioctl argument at `arg`.
#[inline(always)]
fn read_arg<T: FromBytes>(arg: usize) -> Result<T> {
    crate::helpers::read_arg(UserPtr::from_addr(arg))
}

/// [`read_arg`] into `slot`, where the argument stays.
fn read_arg_in<T: FromBytes>(arg: usize, slot: &mut MaybeUninit<T>) -> Result<&mut T> {
    crate::helpers::read_arg_in(UserPtr::from_addr(arg), slot)
}

// A batch that ran writes its answer itself, with its results, in one call
// (`Accepted::run`): `done` is what that call writes.
impl Answer for Batch {
    type Done = Ran;

    fn done(&mut self, done: &Ran) {
        self.nr_failed = done.ran.nr_failed;
        self.start_spread = done.ran.start_spread;
        self.err_index = uapi::NO_INDEX;
        self.out_flags = uapi::OUT_RAN;
    }

    fn refused(&mut self, index: u32) {
        self.nr_failed = 0;
        self.start_spread = 0;
        self.err_index = index;
        self.out_flags = 0;
    }

    fn write_to(&self, arg: usize) -> Result {
        crate::helpers::write_batch_out(UserPtr::from_addr(arg), self)
    }
}

/// A batch `MSRBATCH_IOC_PREPARE` kept: its handle and its results' size.
struct Stored {
    handle: u32,
    mmap_size: u64,
}

impl Answer for uapi::Prepare {
    type Done = Stored;

    fn done(&mut self, done: &Stored) {
        self.handle = done.handle;
        self.mmap_offset = prepared::mmap_offset(done.handle);
        self.mmap_size = done.mmap_size;
        self.err_index = uapi::NO_INDEX;
    }

    fn refused(&mut self, index: u32) {
        self.err_index = index;
    }
}

impl Answer for uapi::SampleReq {
    type Done = sampler::NewSampler;

    fn done(&mut self, done: &sampler::NewSampler) {
        self.err_index = uapi::NO_INDEX;
        self.mmap_size = done.mmap_size();
    }

    fn refused(&mut self, index: u32) {
        self.err_index = index;
    }
}

/// Batches of up to this many ops are copied to the stack, not to the heap.
const INLINE_OPS: usize = 16;

impl MsrBatchFile {
    fn caller(&self, access: Access) -> Caller<'_> {
        Caller::new(access, self.rules.as_ref())
    }

    /// `MSRBATCH_IOC_BATCH`: validates, runs and copies back one batch;
    /// returns 0.
    // (In line: see `MsrBatchFile::ioctl`, as `run_batch` and
    // `run_prepared`.)
    #[inline(always)]
    pub(crate) fn batch(&self, arg: usize, access: Access) -> Result<isize> {
        let mut slot = MaybeUninit::uninit();
        let hdr: &mut Batch = read_arg_in(arg, &mut slot)?;
        match self.run_batch(hdr, arg, access) {
            // The run wrote the answer, the results and the header's outputs.
            Ok(ran) if ran.copied => Ok(0),
            // The ops ran but their results or the header's outputs could not
            // be copied back (another thread unmapped or write-protected the
            // array or the header meanwhile): never EFAULT, which says that
            // nothing ran.
            Ok(_) => Err(crate::compat::enotrecoverable()),
            Err(r) => answer(arg, hdr, Err(r), |_, e| e).map(|_| 0),
        }
    }

    /// Accepts and runs the batch whose header, `hdr`, was read from `arg`.
    #[inline(always)]
    fn run_batch(&self, hdr: &Batch, arg: usize, access: Access) -> Result<Ran, Rejected> {
        let incoming = Incoming::new(hdr, access)?;
        let n = incoming.len();
        if n <= INLINE_OPS {
            let mut buf = [const { MaybeUninit::<Op>::uninit() }; INLINE_OPS];
            self.run_accepted(&incoming, &mut buf[..n], access, (hdr, arg))
        } else {
            let mut heap = KVVec::<Op>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
            self.run_accepted(&incoming, &mut heap.spare_capacity_mut()[..n], access, (hdr, arg))
        }
    }

    /// Accepts the ops of `incoming` into `dst` and runs them; `hdr` is the
    /// batch's header, read from the address beside it.
    fn run_accepted(
        &self,
        incoming: &Incoming,
        dst: &mut [MaybeUninit<Op>],
        access: Access,
        (hdr, hdr_addr): (&Batch, usize),
    ) -> Result<Ran, Rejected> {
        incoming.accept(dst, self.caller(access), Purpose::Run, |batch| {
            // A file that restores on close logs what the writes will
            // overwrite, and keeps the log locked until they have run.
            let mut log = batch.has_writes().then(|| self.restore.lock());
            if let Some(log) = log.as_mut().and_then(|l| Option::as_mut(&mut **l)) {
                log.save(batch.ops())?;
            }
            if batch.has_writes() {
                // Make sure the results can be copied back before anything
                // is written: a batch whose array or header is not writable
                // fails with EFAULT and changes nothing. Writing back the
                // bytes just read (where the answer will go) leaves both as
                // they were. (A batch that
                // only reads changes nothing either way.)
                batch.write_back()?;
                hdr.write_to(hdr_addr)?;
            }
            batch.run(UserPtr::from_addr(hdr_addr))
        })
    }

    /// `MSRBATCH_IOC_PREPARE`: validates and keeps a batch; returns 0.
    pub(crate) fn prepare(&self, arg: usize, access: Access) -> Result<isize> {
        let mut req: uapi::Prepare = read_arg(arg)?;
        let hdr = Batch {
            version: req.version,
            flags: req.flags,
            nr_ops: req.nr_ops,
            ops: req.ops,
            ..Batch::default()
        };
        let made = (|| -> Result<Stored, Rejected> {
            if req.reserved != 0 {
                return Err(EINVAL.into());
            }
            let kept = Incoming::new(&hdr, access)?.keep(self.caller(access))?;
            let p = prepared::Prepared::new(kept)?;
            let mmap_size = p.mmap_size() as u64;
            let handle = self.prepared.insert(p)?;
            Ok(Stored { handle, mmap_size })
        })();
        answer(arg, &mut req, made, |stored, e| {
            // The caller cannot learn the handle: do not keep the batch.
            let _ = self.prepared.remove(stored.handle as usize);
            e
        })
        .map(|_| 0)
    }

    /// `MSRBATCH_IOC_SAMPLE`: starts a sampler on a prepared batch; returns
    /// its descriptor.
    pub(crate) fn sample(&self, arg: usize, access: Access) -> Result<isize> {
        let mut req: uapi::SampleReq = read_arg(arg)?;
        let made = (|| -> Result<sampler::NewSampler, Rejected> {
            if req.version != uapi::ABI_VERSION || req.flags != 0 || req.reserved != 0 {
                return Err(EINVAL.into());
            }
            if !access.read {
                return Err(EBADF.into());
            }
            if !(uapi::SAMPLE_MIN_PERIOD_NS..=uapi::SAMPLE_MAX_PERIOD_NS).contains(&req.period_ns) {
                return Err(ERANGE.into());
            }
            if !req.ring_pages.is_power_of_two() {
                return Err(EINVAL.into());
            }
            if req.ring_pages > uapi::SAMPLE_MAX_RING_PAGES {
                return Err(E2BIG.into());
            }
            let ops = self.prepared.get(req.handle as usize)?.ops_copy()?;
            sampler::NewSampler::new(&req, &ops, self.rules.is_some())
        })();
        // The answer first: a caller that cannot read it gets no sampler.
        answer(arg, &mut req, made, |_, e| e)?.install()
    }

    /// `MSRBATCH_IOC_RUN`: runs prepared batch `handle`; returns the number
    /// of failed ops.
    #[inline(always)]
    pub(crate) fn run_prepared(&self, handle: usize, access: Access) -> Result<isize> {
        let nr_failed = self.prepared.run(handle, |p| {
            if !p.has_writes() {
                return p.run_reads();
            }
            // The restore log matters only to batches that write.
            let mut log = self.restore.lock();
            p.run(access, |ops| match Option::as_mut(&mut *log) {
                Some(log) => log.save(ops),
                None => Ok(()),
            })
        })?;
        Ok(nr_failed as isize)
    }
}

/// `MSRBATCH_IOC_INFO`: the module's ABI version and limits.
pub(crate) fn info(arg: usize) -> Result<isize> {
    let info = Info {
        version: uapi::ABI_VERSION,
        max_ops: uapi::MAX_OPS,
        max_delay_ns: uapi::MAX_DELAY_NS as u32,
        max_cpu_delay_ns: uapi::MAX_CPU_DELAY_NS as u32,
        ops_supported: (1u64 << (uapi::opcode::MAX + 1)) - 2,
        flags_supported: uapi::F_ALL,
        max_cpu_busy_ns: uapi::MAX_CPU_BUSY_NS as u32,
        ..Info::default()
    };
    UserSlice::new(UserPtr::from_addr(arg), size_of::<Info>())
        .writer()
        .write(&info)?;
    Ok(0)
}

/// `MSRBATCH_IOC_PCE_GRANT`: grants the caller's thread (`arg`
/// `MSRBATCH_PCE_F_THREAD`) or file (0) user-space RDPMC; with
/// `MSRBATCH_PCE_F_INHERIT` also the caller's other threads and every thread
/// and process they create.
#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
pub(crate) fn pce_grant(file: &File, arg: usize, access: Access) -> Result {
    use crate::pce;
    if arg & !(uapi::PCE_F_THREAD | uapi::PCE_F_INHERIT) != 0 {
        return Err(EINVAL);
    }
    let binding = match arg & uapi::PCE_F_THREAD {
        0 => pce::Binding::File(crate::file_id(file)),
        _ => pce::Binding::Thread,
    };
    if !access.write {
        return Err(EBADF);
    }
    pce::grant(binding, arg & uapi::PCE_F_INHERIT != 0, crate::compat::this_module())
}

/// Without preempt notifiers a grant could not follow the thread.
#[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
pub(crate) fn pce_grant(_file: &File, _arg: usize, _access: Access) -> Result {
    pr_info_once!("PCE grants need a kernel with CONFIG_PREEMPT_NOTIFIERS\n");
    Err(crate::compat::eopnotsupp())
}

/// `MSRBATCH_IOC_PCE_REVOKE`: ends the caller's grant.
#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
pub(crate) fn pce_revoke() -> Result {
    crate::pce::revoke()
}

#[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
pub(crate) fn pce_revoke() -> Result {
    Err(crate::compat::eopnotsupp())
}
