// SPDX-License-Identifier: GPL-2.0
//! The thin ioctl layer: the only `unsafe` code of the crate.

use crate::uapi::{msrbatch_batch, msrbatch_info, MSRBATCH_IOC_MAGIC};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)` from `<asm-generic/ioctl.h>`.
const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (MSRBATCH_IOC_MAGIC << 8) | nr
}

/// `MSRBATCH_IOC_INFO`.
pub const IOC_INFO: u32 = ioc(IOC_READ, 0x00, size_of::<msrbatch_info>());
/// `MSRBATCH_IOC_PCE_GRANT`.
pub const IOC_PCE_GRANT: u32 = ioc(0, 0x10, 0);
/// `MSRBATCH_IOC_PCE_REVOKE`.
pub const IOC_PCE_REVOKE: u32 = ioc(0, 0x11, 0);
/// `MSRBATCH_IOC_BATCH`.
pub const IOC_BATCH: u32 = ioc(IOC_READ | IOC_WRITE, 0x01, size_of::<msrbatch_batch>());

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Issues `MSRBATCH_IOC_INFO`.
pub fn info(fd: BorrowedFd<'_>) -> io::Result<msrbatch_info> {
    let mut info = msrbatch_info::default();
    // SAFETY: `info` is a valid, writable `msrbatch_info`, the size the
    // ioctl number announces.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), IOC_INFO as _, &raw mut info) })?;
    Ok(info)
}

/// Issues an ioctl without argument (`MSRBATCH_IOC_PCE_*`).
pub fn ioctl_none(fd: BorrowedFd<'_>, cmd: u32) -> io::Result<()> {
    ioctl_flags(fd, cmd, 0)
}

/// Issues a command whose argument is a flag word, not a pointer
/// (`MSRBATCH_IOC_PCE_GRANT`).
pub fn ioctl_flags(fd: BorrowedFd<'_>, cmd: u32, flags: usize) -> io::Result<()> {
    // SAFETY: The argument is an integer, never dereferenced by the module.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, flags) })
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

/// Issues `MSRBATCH_IOC_BATCH` on `ops`; `hdr.ops` and `hdr.nr_ops` are set
/// from the slice here, so they always describe valid memory.
pub fn batch(
    fd: BorrowedFd<'_>,
    hdr: &mut msrbatch_batch,
    ops: &mut [crate::uapi::msrbatch_op],
) -> io::Result<()> {
    hdr.ops = ops.as_mut_ptr() as u64;
    hdr.nr_ops = u32::try_from(ops.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    // SAFETY: `hdr` is a valid `msrbatch_batch`; it points to `ops`, which is
    // valid for reads and writes of `nr_ops` entries for the whole call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), IOC_BATCH as _, std::ptr::from_mut(hdr)) })
}

/// Issues `MSRBATCH_IOC_BATCH` with a header exactly as given, including its
/// `ops` pointer and `nr_ops`: for tests of the kernel's validation (a NULL or
/// unmapped pointer must give `EFAULT`, not a crash).
///
/// # Safety
///
/// The kernel writes results to `hdr.ops` when the batch runs, so `hdr.ops`
/// must be either invalid for the kernel (NULL, unmapped, kernel address) or
/// valid for writes of `hdr.nr_ops` ops.
pub unsafe fn batch_raw(fd: BorrowedFd<'_>, hdr: &mut msrbatch_batch) -> io::Result<()> {
    // SAFETY: `hdr` is valid; what it points to is the caller's contract.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), IOC_BATCH as _, std::ptr::from_mut(hdr)) })
}

/// Issues an arbitrary ioctl with a pointer argument (tests of ENOTTY).
/// Commands the module knows get `EINVAL` here unless `arg` is big enough.
pub fn ioctl_ptr(fd: BorrowedFd<'_>, cmd: u32, arg: &mut [u8]) -> io::Result<()> {
    let size = ((cmd >> 16) & 0x3fff) as usize;
    if (cmd >> 8) & 0xff == MSRBATCH_IOC_MAGIC && arg.len() < size {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `arg` is valid for reads and writes of its length, which covers
    // the size any command of this driver reads or writes.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg.as_mut_ptr()) })
}
