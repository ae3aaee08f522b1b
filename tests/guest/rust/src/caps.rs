// SPDX-License-Identifier: GPL-2.0
//! The calling thread's capabilities, for the guest tests that open
//! descriptors without CAP_SYS_RAWIO next to threads that keep it
//! (credentials are per thread when changed by raw system calls).

/// `<linux/capability.h>`.
const CAP_SYS_RAWIO: u32 = 17;

/// Drops CAP_SYS_RAWIO (only) from the calling thread, which stays uid 0.
pub fn drop_rawio() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: `h` and `d` are the header and the two data words capget and
    // capset take for version 3; both act on the calling thread.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &raw mut h, d.as_mut_ptr()),
            0
        );
        d[0].effective &= !(1 << CAP_SYS_RAWIO);
        d[0].permitted &= !(1 << CAP_SYS_RAWIO);
        assert_eq!(libc::syscall(libc::SYS_capset, &raw mut h, d.as_ptr()), 0);
    }
}
