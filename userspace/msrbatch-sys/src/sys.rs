// SPDX-License-Identifier: GPL-2.0
//! One wrapper per ioctl of `/dev/msrbatch` and of a sampler descriptor (and
//! the `fcntl` that keeps the descriptor across `execve`, the `poll` that
//! waits for a sampler), [`Mapping`], the read-only mapping of a prepared
//! batch's results, and [`SharedWords`], the read-write mapping of a
//! sampler's ring.

use crate::msr_safe::{msr_batch_array, msr_batch_op, X86_IOC_MSR_BATCH};
use crate::uapi::{
    msrbatch_batch, msrbatch_info, msrbatch_op, msrbatch_prepare, msrbatch_result,
    msrbatch_sample_req, MSRBATCH_IOC_BATCH, MSRBATCH_IOC_INFO, MSRBATCH_IOC_MAGIC,
    MSRBATCH_IOC_PCE_GRANT, MSRBATCH_IOC_PCE_REVOKE, MSRBATCH_IOC_PREPARE,
    MSRBATCH_IOC_RESTORE_NOW, MSRBATCH_IOC_RESTORE_ON_CLOSE, MSRBATCH_IOC_RUN, MSRBATCH_IOC_SAMPLE,
    MSRBATCH_IOC_UNPREPARE, MSRBATCH_SAMPLER_IOC_STOP,
};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

fn check(ret: libc::c_int) -> io::Result<()> {
    count(ret).map(drop)
}

/// The non-negative value an ioctl returned, or its errno.
fn count(ret: libc::c_int) -> io::Result<u32> {
    u32::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// An `_IO` command whose argument is a number passed by value (0 where it
/// takes none).
fn ioctl_value(fd: BorrowedFd<'_>, cmd: u32, arg: libc::c_ulong) -> io::Result<u32> {
    // SAFETY: The commands this is called with take their argument by value
    // and never dereference it.
    count(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg) })
}

/// An `_IOR`/`_IOW`/`_IOWR` command whose argument points to `arg`.
///
/// # Safety
///
/// `cmd` reads and writes at most `arg`'s size at `arg`, and what it reaches
/// through pointers in `arg` is valid for what `cmd` does with it for the
/// whole call.
unsafe fn ioctl_struct<T>(fd: BorrowedFd<'_>, cmd: u32, arg: &mut T) -> io::Result<u32> {
    // SAFETY: By the caller's contract.
    count(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, std::ptr::from_mut(arg)) })
}

/// The length of an ops array as its header's `u32` count (`E2BIG` if it
/// does not fit).
fn nr_ops(len: usize) -> io::Result<u32> {
    u32::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))
}

/// `X86_IOC_MSR_BATCH` on msr-safe's `/dev/cpu/msr_batch` (the module's
/// msr-safe personality, or msr-safe itself): runs `ops` with the version
/// word `version`. Each op's error is in its `err`; the ioctl fails with the
/// first of them.
pub fn msr_safe_batch(
    fd: BorrowedFd<'_>,
    version: u32,
    ops: &mut [msr_batch_op],
) -> io::Result<()> {
    let mut a = msr_batch_array {
        numops: nr_ops(ops.len())?,
        version,
        ops: ops.as_mut_ptr(),
    };
    // SAFETY: `a` is a valid `msr_batch_array`, the size the ioctl number
    // announces; it points to `ops`, valid for reads and writes of `numops`
    // entries for the whole call.
    unsafe { ioctl_struct(fd, X86_IOC_MSR_BATCH, &mut a) }.map(drop)
}

/// `MSRBATCH_IOC_INFO`: what the module supports.
pub fn info(fd: BorrowedFd<'_>) -> io::Result<msrbatch_info> {
    let mut info = msrbatch_info::default();
    // SAFETY: `info` is a valid, writable `msrbatch_info`, the size the
    // ioctl number announces.
    unsafe { ioctl_struct(fd, MSRBATCH_IOC_INFO, &mut info) }?;
    Ok(info)
}

/// `MSRBATCH_IOC_BATCH` on `ops`; `hdr.ops` and `hdr.nr_ops` are set from the
/// slice here, so they always describe valid memory.
pub fn batch(
    fd: BorrowedFd<'_>,
    hdr: &mut msrbatch_batch,
    ops: &mut [msrbatch_op],
) -> io::Result<()> {
    hdr.ops = ops.as_mut_ptr() as u64;
    hdr.nr_ops = nr_ops(ops.len())?;
    // SAFETY: `hdr` is a valid `msrbatch_batch`; it points to `ops`, which is
    // valid for reads and writes of `nr_ops` entries for the whole call.
    unsafe { ioctl_struct(fd, MSRBATCH_IOC_BATCH, hdr) }.map(drop)
}

/// `MSRBATCH_IOC_BATCH` with a header exactly as given, including its `ops`
/// pointer and `nr_ops`: for tests of the kernel's validation (a NULL or
/// unmapped pointer must give `EFAULT`, not a crash).
///
/// # Safety
///
/// The kernel writes results to `hdr.ops` when the batch runs, so `hdr.ops`
/// must be either invalid for the kernel (NULL, unmapped, kernel address) or
/// valid for writes of `hdr.nr_ops` ops.
pub unsafe fn batch_raw(fd: BorrowedFd<'_>, hdr: &mut msrbatch_batch) -> io::Result<()> {
    // SAFETY: `hdr` is valid; what it points to is the caller's contract.
    unsafe { ioctl_struct(fd, MSRBATCH_IOC_BATCH, hdr) }.map(drop)
}

/// `MSRBATCH_IOC_PCE_GRANT`: user-mode RDPMC for the calling thread. `flags`
/// is 0 (the grant ends when the file is closed) or
/// [`MSRBATCH_PCE_F_THREAD`](crate::uapi::MSRBATCH_PCE_F_THREAD) (it ends
/// only on revoke or thread exit); other bits get `EINVAL`.
pub fn pce_grant(fd: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    ioctl_value(fd, MSRBATCH_IOC_PCE_GRANT, flags.into()).map(drop)
}

/// `MSRBATCH_IOC_PCE_REVOKE`: ends the calling thread's grant.
pub fn pce_revoke(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_value(fd, MSRBATCH_IOC_PCE_REVOKE, 0).map(drop)
}

/// Any ioctl command with a buffer argument: for tests of how the driver
/// answers commands it does not know (`ENOTTY`). This driver's own commands
/// get `EINVAL` here, without a call, when `arg` is smaller than their size.
///
/// # Safety
///
/// `fd` is `/dev/msrbatch`, or `cmd` reads and writes at most `arg.len()`
/// bytes at its argument on the file `fd` refers to.
pub unsafe fn ioctl_ptr(fd: BorrowedFd<'_>, cmd: u32, arg: &mut [u8]) -> io::Result<()> {
    let size = ((cmd >> 16) & 0x3fff) as usize;
    if (cmd >> 8) & 0xff == MSRBATCH_IOC_MAGIC && arg.len() < size {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `arg` is valid for reads and writes of its length, which covers
    // what `cmd` touches: this driver's commands by the check above, other
    // drivers' by the caller's contract.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg.as_mut_ptr()) })
}

/// `MSRBATCH_IOC_PREPARE` of `ops`; `p.ops` and `p.nr_ops` are set from the
/// slice here. The kernel reads the ops once, during the call. On success
/// `p.handle`, `p.mmap_offset` and `p.mmap_size` describe the prepared batch;
/// on a validation error `p.err_index` names the op to blame.
pub fn prepare(
    fd: BorrowedFd<'_>,
    p: &mut msrbatch_prepare,
    ops: &[msrbatch_op],
) -> io::Result<()> {
    p.ops = ops.as_ptr() as u64;
    p.nr_ops = nr_ops(ops.len())?;
    // SAFETY: `p` is a valid `msrbatch_prepare`; it points to `ops`, valid for
    // reads of `nr_ops` entries for the whole call, and PREPARE only reads
    // them.
    unsafe { ioctl_struct(fd, MSRBATCH_IOC_PREPARE, p) }.map(drop)
}

/// `MSRBATCH_IOC_RUN`: runs prepared batch `handle`; returns the number of
/// failed ops. The results are in the batch's [`Mapping`].
pub fn run_prepared(fd: BorrowedFd<'_>, handle: u32) -> io::Result<u32> {
    ioctl_value(fd, MSRBATCH_IOC_RUN, handle.into())
}

/// `MSRBATCH_IOC_UNPREPARE`: frees prepared batch `handle`.
pub fn unprepare(fd: BorrowedFd<'_>, handle: u32) -> io::Result<()> {
    ioctl_value(fd, MSRBATCH_IOC_UNPREPARE, handle.into()).map(drop)
}

/// `MSRBATCH_IOC_RESTORE_ON_CLOSE`: from now on, the MSRs that batches on
/// this descriptor write are written back when it is closed.
pub fn restore_on_close(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_value(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0).map(drop)
}

/// `MSRBATCH_IOC_RESTORE_NOW`: writes the logged values back now; returns
/// how many could not be.
pub fn restore_now(fd: BorrowedFd<'_>) -> io::Result<u32> {
    ioctl_value(fd, MSRBATCH_IOC_RESTORE_NOW, 0)
}

/// The results of a prepared batch, `struct msrbatch_result[len]`, mapped
/// read-only (`PROT_READ`, `MAP_SHARED`) from the descriptor at the offset
/// `MSRBATCH_IOC_PREPARE` returned. Unmapped when dropped.
///
/// The kernel writes the results during each `MSRBATCH_IOC_RUN`; [`get`]
/// copies one out with volatile loads, so every read sees the memory as it
/// is then. A run's results are complete when `run_prepared` returns; read
/// while another thread or process runs the same batch, an entry may mix two
/// runs. The type is `Send` but not `Sync`, so the thread that runs the batch
/// through its owner reads it. The mapping is not inherited by `fork()`
/// (the kernel sets `VM_DONTCOPY`): a child must not use a copy of it.
///
/// [`get`]: Mapping::get
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<msrbatch_result>,
    len: usize,
    size: usize,
}

// SAFETY: The mapping belongs to the process, not to a thread; moving its
// owner to another thread moves every access there.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` results of a prepared batch: `size` bytes of `fd` at
    /// `offset` (the `mmap_size` and `mmap_offset` of its
    /// `msrbatch_prepare`). `EINVAL` if `len` results do not fit in `size`
    /// bytes or `len` is 0.
    pub fn results(fd: BorrowedFd<'_>, offset: u64, size: u64, len: usize) -> io::Result<Self> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let size = usize::try_from(size).map_err(|_| einval())?;
        let offset = libc::off_t::try_from(offset).map_err(|_| einval())?;
        let need = len
            .checked_mul(size_of::<msrbatch_result>())
            .ok_or_else(einval)?;
        if len == 0 || need > size {
            return Err(einval());
        }
        // SAFETY: A new shared read-only mapping chosen by the kernel; it
        // overlaps nothing of ours.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast()).ok_or_else(einval)?;
        Ok(Mapping { ptr, len, size })
    }

    /// Number of results.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (never: a prepared batch has at least one op).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Result `i`, read from the mapping now (volatile loads); `None` past
    /// the end.
    pub fn get(&self, i: usize) -> Option<msrbatch_result> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len`, and `len` results fit in the mapping, which is
        // readable, aligned (page-aligned start, 8-byte multiple stride) and
        // lives as long as `self`.
        Some(unsafe { self.ptr.as_ptr().add(i).read_volatile() })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: The mapping `results` made, unmapped once; no reference
        // into it outlives `self` (`get` returns copies).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.size) };
    }
}

/// `MSRBATCH_IOC_SAMPLE`: starts a sampler of prepared batch `req.handle`
/// and returns its descriptor (the ioctl's return value, `O_CLOEXEC`). On
/// success `req.mmap_size` is the size of its ring; on a validation error
/// `req.err_index` names the op to blame.
pub fn sample(fd: BorrowedFd<'_>, req: &mut msrbatch_sample_req) -> io::Result<OwnedFd> {
    // SAFETY: `req` is a valid, writable `msrbatch_sample_req`, the size the
    // ioctl number announces.
    let raw = unsafe { ioctl_struct(fd, MSRBATCH_IOC_SAMPLE, req) }?;
    let raw = libc::c_int::try_from(raw).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: A successful MSRBATCH_IOC_SAMPLE returns a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `MSRBATCH_SAMPLER_IOC_STOP` on a sampler descriptor: no CPU samples again.
pub fn sampler_stop(fd: BorrowedFd<'_>) -> io::Result<()> {
    ioctl_value(fd, MSRBATCH_SAMPLER_IOC_STOP, 0).map(drop)
}

/// `poll(2)` of one descriptor for `POLLIN`: the `revents` (0 when the
/// timeout passed). `timeout_ms` < 0 waits for ever. `EINTR` is an error,
/// as from `poll`.
pub fn poll_in(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<libc::c_short> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: One valid, writable `pollfd`.
    check(unsafe { libc::poll(&raw mut pfd, 1, timeout_ms) })?;
    Ok(pfd.revents)
}

/// A shared read-write mapping (`MAP_SHARED`, `PROT_READ | PROT_WRITE`) of a
/// file from offset 0, seen as 64-bit words: a sampler's ring (its control
/// page, then its data area). Unmapped when dropped.
///
/// Another party (the kernel) writes the memory while it is mapped, so it is
/// only ever accessed through atomic loads and stores of whole aligned words,
/// by index, bounds-checked: no reference to it is handed out, and no access
/// can tear a word or leave the mapping. Ordering across words is the
/// caller's: [`load_acquire`](SharedWords::load_acquire) and
/// [`store_release`](SharedWords::store_release) are the ring's head and
/// tail protocol. Not inherited usefully by `fork()`: a child must not use a
/// copy.
#[derive(Debug)]
pub struct SharedWords {
    ptr: NonNull<u64>,
    size: usize,
}

// SAFETY: The mapping belongs to the process; every access is atomic.
unsafe impl Send for SharedWords {}

impl SharedWords {
    /// Maps `size` bytes of `fd` from offset 0 (`EINVAL` if `size` is 0 or
    /// not a multiple of 8).
    pub fn map(fd: BorrowedFd<'_>, size: u64) -> io::Result<Self> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let size = usize::try_from(size).map_err(|_| einval())?;
        if size == 0 || size % 8 != 0 {
            return Err(einval());
        }
        // SAFETY: A new shared mapping chosen by the kernel; it overlaps
        // nothing of ours.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast()).ok_or_else(einval)?;
        Ok(SharedWords { ptr, size })
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.size / 8
    }

    /// Whether there are none (never: `map` refuses a size of 0).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Word `i` as an atomic, if it is inside the mapping.
    fn word(&self, i: usize) -> Option<&AtomicU64> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: `i` is inside the mapping, which is page-aligned (so the
        // word is 8-byte aligned), readable and writable, and lives as long
        // as `self`, which the reference cannot outlive. It is only ever
        // accessed atomically here; the kernel's writes are whole words.
        Some(unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(i)) })
    }

    /// Word `i` (relaxed atomic load), `None` past the end.
    pub fn load(&self, i: usize) -> Option<u64> {
        Some(self.word(i)?.load(Ordering::Relaxed))
    }

    /// Word `i` with acquire ordering: what the writer stored before
    /// releasing it is visible after. `None` past the end.
    pub fn load_acquire(&self, i: usize) -> Option<u64> {
        Some(self.word(i)?.load(Ordering::Acquire))
    }

    /// Stores `v` to word `i` with release ordering: every load before it
    /// happens before a reader of it sees `v`. `None` (nothing stored) past
    /// the end.
    pub fn store_release(&self, i: usize, v: u64) -> Option<()> {
        self.word(i)?.store(v, Ordering::Release);
        Some(())
    }
}

impl Drop for SharedWords {
    fn drop(&mut self) {
        // SAFETY: The mapping `map` made, unmapped once; the only references
        // into it (`word`) do not outlive a method call.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.size) };
    }
}

/// The size of a page in bytes (a sampler's ring is counted in pages).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).unwrap_or(4096)
}

/// Clears `FD_CLOEXEC` so that the descriptor stays open across `execve`.
pub fn keep_across_exec(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFD/F_SETFD on a valid descriptor have no memory effects.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: As above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags & !libc::FD_CLOEXEC) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The generated numbers carry the direction and the argument size that
    /// `<asm-generic/ioctl.h>` encodes: `_IOR` of `msrbatch_info`, `_IOWR` of
    /// `msrbatch_batch`, and `_IO` (no argument) for the grants.
    #[test]
    fn ioctl_numbers_encode_direction_and_size() {
        let decode = |cmd: u32| {
            (
                cmd >> 30,
                (cmd >> 16) & 0x3fff,
                (cmd >> 8) & 0xff,
                cmd & 0xff,
            )
        };
        let size = |n: usize| u32::try_from(n).unwrap();
        assert_eq!(
            decode(MSRBATCH_IOC_INFO),
            (2, size(size_of::<msrbatch_info>()), MSRBATCH_IOC_MAGIC, 0)
        );
        assert_eq!(
            decode(MSRBATCH_IOC_BATCH),
            (3, size(size_of::<msrbatch_batch>()), MSRBATCH_IOC_MAGIC, 1)
        );
        assert_eq!(
            decode(MSRBATCH_IOC_PCE_GRANT),
            (0, 0, MSRBATCH_IOC_MAGIC, 0x10)
        );
        assert_eq!(
            decode(MSRBATCH_IOC_PCE_REVOKE),
            (0, 0, MSRBATCH_IOC_MAGIC, 0x11)
        );
        assert_eq!(
            decode(MSRBATCH_IOC_PREPARE),
            (
                3,
                size(size_of::<msrbatch_prepare>()),
                MSRBATCH_IOC_MAGIC,
                2
            )
        );
        for (cmd, nr) in [
            (MSRBATCH_IOC_RUN, 3),
            (MSRBATCH_IOC_UNPREPARE, 4),
            (MSRBATCH_IOC_RESTORE_ON_CLOSE, 5),
            (MSRBATCH_IOC_RESTORE_NOW, 6),
            (MSRBATCH_SAMPLER_IOC_STOP, 0x20),
        ] {
            assert_eq!(decode(cmd), (0, 0, MSRBATCH_IOC_MAGIC, nr), "{cmd:#x}");
        }
    }

    /// SAMPLE is `_IOWR` of the 48-byte request, number 7.
    #[test]
    fn sample_ioctl_number() {
        assert_eq!(size_of::<msrbatch_sample_req>(), 48);
        assert_eq!(
            MSRBATCH_IOC_SAMPLE,
            (3 << 30) | (48 << 16) | (MSRBATCH_IOC_MAGIC << 8) | 7
        );
    }

    /// Shared words read what the file holds and write through to it, and
    /// refuse every index past the end.
    #[test]
    fn shared_words_read_and_write_the_file() {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsFd;
        let mut f = tempfile::tempfile().unwrap();
        let mut bytes = vec![0u8; 4096];
        bytes[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        f.write_all(&bytes).unwrap();
        let w = SharedWords::map(f.as_fd(), 4096).unwrap();
        assert_eq!((w.len(), w.is_empty()), (512, false));
        assert_eq!(w.load(1), Some(0x1122_3344_5566_7788));
        assert_eq!(w.load_acquire(0), Some(0));
        assert_eq!(w.store_release(511, 42), Some(()));
        assert_eq!((w.load(512), w.load_acquire(512)), (None, None));
        assert_eq!(w.store_release(512, 1), None);
        drop(w);
        let mut back = Vec::new();
        f.rewind().unwrap();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back[4088..], 42u64.to_le_bytes());
        for size in [0, 12] {
            let e = SharedWords::map(f.as_fd(), size).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{size}");
        }
    }

    /// poll of a descriptor with data says `POLLIN`; STOP on a descriptor
    /// that is not a sampler is refused.
    #[test]
    fn poll_and_stop_on_other_files() {
        use std::os::fd::AsFd;
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let r = poll_in(zero.as_fd(), 0).unwrap();
        assert_ne!(r & libc::POLLIN, 0);
        let e = sampler_stop(zero.as_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTTY));
    }

    /// A mapping reads what the file holds at its offset (here /dev/zero,
    /// which maps like any shared file), refuses a size its results do not
    /// fit in, and ends at its length.
    #[test]
    fn mapping_reads_within_its_length() {
        use std::os::fd::AsFd;
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let m = Mapping::results(zero.as_fd(), 0, 4096, 170).unwrap();
        assert_eq!((m.len(), m.is_empty()), (170, false));
        let r = m.get(169).unwrap();
        assert_eq!((r.status, r.reserved, r.val), (0, 0, [0, 0]));
        assert!(m.get(170).is_none());
        drop(m);
        for (offset, size, len) in [(0, 4096, 171), (0, 4096, 0), (u64::MAX, 4096, 1)] {
            let e = Mapping::results(zero.as_fd(), offset, size, len).unwrap_err();
            assert_eq!(
                e.raw_os_error(),
                Some(libc::EINVAL),
                "{offset} {size} {len}"
            );
        }
        // A write-only descriptor cannot be mapped for reading.
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let e = Mapping::results(null.as_fd(), 0, 4096, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn short_buffer_for_own_command_is_einval_without_a_call() {
        use std::os::fd::AsFd;
        // /dev/null would answer a call with ENOTTY.
        let null = std::fs::File::open("/dev/null").unwrap();
        let mut small = [0u8; 8];
        // SAFETY: A command of this driver with too small a buffer is refused
        // before any call.
        let own = unsafe { ioctl_ptr(null.as_fd(), MSRBATCH_IOC_INFO, &mut small) };
        assert_eq!(own.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let mut big = [0u8; 64];
        // SAFETY: /dev/null implements no ioctl.
        let other = unsafe { ioctl_ptr(null.as_fd(), MSRBATCH_IOC_INFO, &mut big) };
        assert_eq!(other.unwrap_err().raw_os_error(), Some(libc::ENOTTY));
    }
}
