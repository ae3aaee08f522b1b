// SPDX-License-Identifier: GPL-2.0
//! One wrapper per ioctl of `/dev/msrbatch` (and the `fcntl` that keeps the
//! descriptor across `execve`).

use crate::uapi::{
    msrbatch_batch, msrbatch_info, msrbatch_op, MSRBATCH_IOC_BATCH, MSRBATCH_IOC_INFO,
    MSRBATCH_IOC_MAGIC, MSRBATCH_IOC_PCE_GRANT, MSRBATCH_IOC_PCE_REVOKE,
};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `MSRBATCH_IOC_INFO`: what the module supports.
pub fn info(fd: BorrowedFd<'_>) -> io::Result<msrbatch_info> {
    let mut info = msrbatch_info::default();
    // SAFETY: `info` is a valid, writable `msrbatch_info`, the size the
    // ioctl number announces.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), MSRBATCH_IOC_INFO as _, &raw mut info) })?;
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
    hdr.nr_ops = u32::try_from(ops.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    // SAFETY: `hdr` is a valid `msrbatch_batch`; it points to `ops`, which is
    // valid for reads and writes of `nr_ops` entries for the whole call.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            MSRBATCH_IOC_BATCH as _,
            std::ptr::from_mut(hdr),
        )
    })
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
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            MSRBATCH_IOC_BATCH as _,
            std::ptr::from_mut(hdr),
        )
    })
}

/// `MSRBATCH_IOC_PCE_GRANT`: user-mode RDPMC for the calling thread. `flags`
/// is 0 (the grant ends when the file is closed) or
/// [`MSRBATCH_PCE_F_THREAD`](crate::uapi::MSRBATCH_PCE_F_THREAD) (it ends
/// only on revoke or thread exit); other bits get `EINVAL`.
pub fn pce_grant(fd: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    // SAFETY: The argument is a flag word passed by value, never dereferenced.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            MSRBATCH_IOC_PCE_GRANT as _,
            flags as libc::c_ulong,
        )
    })
}

/// `MSRBATCH_IOC_PCE_REVOKE`: ends the calling thread's grant.
pub fn pce_revoke(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: The command takes no argument; 0 is passed.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), MSRBATCH_IOC_PCE_REVOKE as _, 0usize) })
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
