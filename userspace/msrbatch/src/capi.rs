// SPDX-License-Identifier: GPL-2.0
//! The C API (`include/msrbatch.h`): a thin FFI layer over [`Device`] and
//! [`Batch`]. Every function returns 0 or a non-negative value on success and
//! a negative errno on failure; handles are opaque pointers owned by the
//! caller and released with the matching `_close`/`_free` function.
//!
//! It is the one module of this crate with `unsafe` code (the ioctls are in
//! `msrbatch-sys`): C hands it raw pointers, whose validity is the C caller's
//! contract (documented in the header).

use crate::{uapi::msrbatch_info, Batch, Device, Errno, Op};
use std::ffi::{c_char, c_int, c_long, CStr};

/// An open device (`struct msrbatch`).
pub struct CDevice(Device);

/// A batch (`struct msrbatch_batch_buf`).
pub struct CBatch(Batch);

fn neg(e: &crate::Error) -> c_int {
    -e.errno().0
}

/// `int msrbatch_open(const char *path, struct msrbatch **dev)`
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `dev` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_open(path: *const c_char, dev: *mut *mut CDevice) -> c_int {
    if dev.is_null() {
        return -libc::EINVAL;
    }
    let path = if path.is_null() {
        crate::DEVICE_PATH
    } else {
        // SAFETY: A NUL-terminated string, by the caller's contract.
        match unsafe { CStr::from_ptr(path) }.to_str() {
            Ok(p) => p,
            Err(_) => return -libc::EINVAL,
        }
    };
    match Device::open_path(path) {
        Ok(d) => {
            // SAFETY: `dev` is valid for a write, by the caller's contract.
            unsafe { *dev = Box::into_raw(Box::new(CDevice(d))) };
            0
        }
        Err(e) => neg(&e),
    }
}

/// `void msrbatch_close(struct msrbatch *dev)`
///
/// # Safety
///
/// `dev` is NULL or came from `msrbatch_open` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_close(dev: *mut CDevice) {
    if !dev.is_null() {
        // SAFETY: Ownership returns from C, by the caller's contract.
        drop(unsafe { Box::from_raw(dev) });
    }
}

/// `int msrbatch_info(struct msrbatch *dev, struct msrbatch_info *info)`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`; `info` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_info(dev: *const CDevice, info: *mut msrbatch_info) -> c_int {
    // SAFETY: By the caller's contract (NULL is refused).
    let (Some(dev), false) = (unsafe { dev.as_ref() }, info.is_null()) else {
        return -libc::EINVAL;
    };
    match msrbatch_sys::info(std::os::fd::AsFd::as_fd(dev.0.file())) {
        Ok(i) => {
            // SAFETY: `info` is valid for a write, by the caller's contract.
            unsafe { info.write(i) };
            0
        }
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// `struct msrbatch_batch_buf *msrbatch_batch_new(void)`
#[no_mangle]
pub extern "C" fn msrbatch_batch_new() -> *mut CBatch {
    Box::into_raw(Box::new(CBatch(Batch::new())))
}

/// `void msrbatch_batch_free(struct msrbatch_batch_buf *batch)`
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_free(batch: *mut CBatch) {
    if !batch.is_null() {
        // SAFETY: Ownership returns from C, by the caller's contract.
        drop(unsafe { Box::from_raw(batch) });
    }
}

/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
unsafe fn batch_mut<'a>(batch: *mut CBatch) -> Option<&'a mut Batch> {
    // SAFETY: By the caller's contract.
    unsafe { batch.as_mut() }.map(|r| &mut r.0)
}

/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
unsafe fn batch_ref<'a>(batch: *const CBatch) -> Option<&'a Batch> {
    // SAFETY: By the caller's contract.
    unsafe { batch.as_ref() }.map(|r| &r.0)
}

/// `void msrbatch_batch_stop_on_error(struct msrbatch_batch_buf *batch, int stop)`
///
/// # Safety
///
/// `batch` came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_stop_on_error(batch: *mut CBatch, stop: c_int) {
    // SAFETY: By the caller's contract.
    if let Some(b) = unsafe { batch_mut(batch) } {
        b.stop_on_error(stop != 0);
    }
}

/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
unsafe fn push(batch: *mut CBatch, cpu: u32, op: Op) -> c_long {
    // SAFETY: By the caller's contract.
    match unsafe { batch_mut(batch) } {
        Some(b) if b.len() < c_long::MAX as usize => b.push(cpu, op) as c_long,
        Some(_) => -c_long::from(libc::E2BIG),
        None => -c_long::from(libc::EINVAL),
    }
}

macro_rules! push_fns {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $op:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// Returns the op's index, or a negative errno.
        ///
        /// # Safety
        ///
        /// `batch` came from `msrbatch_batch_new`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(batch: *mut CBatch, cpu: u32 $(, $arg: $ty)*) -> c_long {
            // SAFETY: By the caller's contract.
            unsafe { push(batch, cpu, $op) }
        }
    )*};
}

push_fns! {
    /// Appends RDMSR `msr` on `cpu`.
    msrbatch_batch_rdmsr(msr: u32) => Op::RdMsr { msr };
    /// Appends WRMSR `msr` = `value` on `cpu`.
    msrbatch_batch_wrmsr(msr: u32, value: u64) => Op::WrMsr { msr, value };
    /// Appends `msr = (msr & ~clear) | set` on `cpu`.
    msrbatch_batch_rmwmsr(msr: u32, clear: u64, set: u64) => Op::RmwMsr { msr, clear, set };
    /// Appends RDPMC `ecx` on `cpu`.
    msrbatch_batch_rdpmc(ecx: u32) => Op::RdPmc { ecx };
    /// Appends RDTSC on `cpu`.
    msrbatch_batch_rdtsc() => Op::RdTsc;
    /// Appends RDTSCP on `cpu`.
    msrbatch_batch_rdtscp() => Op::RdTscp;
    /// Appends CPUID `leaf`/`subleaf` on `cpu`.
    msrbatch_batch_cpuid(leaf: u32, subleaf: u32) => Op::Cpuid { leaf, subleaf };
    /// Appends a busy-wait of `ns` nanoseconds on `cpu`.
    msrbatch_batch_delay(ns: u64) => Op::Delay { ns };
    /// Appends a CR4 read on `cpu`.
    msrbatch_batch_rdcr4() => Op::RdCr4;
}

/// `size_t msrbatch_batch_len(const struct msrbatch_batch_buf *batch)`
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_len(batch: *const CBatch) -> usize {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }.map_or(0, Batch::len)
}

/// `int msrbatch_run(struct msrbatch *dev, struct msrbatch_batch_buf *batch)`
///
/// 0: the batch ran (per-op results via `msrbatch_result`); negative errno:
/// nothing ran (`msrbatch_batch_err_index` names the op to blame, if any).
///
/// # Safety
///
/// `dev` came from `msrbatch_open`, `batch` from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_run(dev: *const CDevice, batch: *mut CBatch) -> c_int {
    // SAFETY: By the caller's contract.
    let (Some(dev), Some(b)) = (unsafe { dev.as_ref() }, unsafe { batch_mut(batch) }) else {
        return -libc::EINVAL;
    };
    match dev.0.run(b) {
        Ok(()) => 0,
        Err(e) => neg(&e),
    }
}

/// `uint32_t msrbatch_batch_nr_failed(const struct msrbatch_batch_buf *batch)`
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_nr_failed(batch: *const CBatch) -> u32 {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }.map_or(0, Batch::nr_failed)
}

/// `long msrbatch_batch_err_index(const struct msrbatch_batch_buf *batch)`: the op the
/// kernel blamed when the last run was rejected, or -1.
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_err_index(batch: *const CBatch) -> c_long {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }
        .and_then(Batch::err_index)
        .map_or(-1, c_long::from)
}

/// `int msrbatch_result(const struct msrbatch_batch_buf *batch, size_t index, uint64_t val[2])`
///
/// Stores op `index`'s outputs (`val[0]`, `val[1]` as in the uapi header) and
/// returns its status: 0, or a negative errno (`-EIO` fault, `-ECANCELED` not
/// run). `-ERANGE` for an index past the end. `val` may be NULL.
///
/// # Safety
///
/// `batch` came from `msrbatch_batch_new`; `val` is NULL or valid for two writes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_result(
    batch: *const CBatch,
    index: usize,
    val: *mut u64,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(b) = (unsafe { batch_ref(batch) }) else {
        return -libc::EINVAL;
    };
    let Some(raw) = b.raw_ops().get(index) else {
        return -libc::ERANGE;
    };
    if !val.is_null() {
        // SAFETY: `val` is valid for two writes, by the caller's contract.
        unsafe {
            val.write(raw.val[0]);
            val.add(1).write(raw.val[1]);
        }
    }
    raw.status
}

/// `int msrbatch_grant_rdpmc(struct msrbatch *dev)`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_grant_rdpmc(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    match unsafe { dev.as_ref() } {
        Some(d) => d.0.grant_rdpmc().map_or_else(|e| neg(&e), |()| 0),
        None => -libc::EINVAL,
    }
}

/// `int msrbatch_revoke_rdpmc(struct msrbatch *dev)`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_revoke_rdpmc(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    match unsafe { dev.as_ref() } {
        Some(d) => d.0.revoke_rdpmc().map_or_else(|e| neg(&e), |()| 0),
        None => -libc::EINVAL,
    }
}

/// `const char *msrbatch_errno_name(int err)`: `"EIO"` for `EIO` or `-EIO`;
/// NULL for values this API does not produce. The string is static.
#[no_mangle]
pub extern "C" fn msrbatch_errno_name(err: c_int) -> *const c_char {
    Errno(err.saturating_abs())
        .c_name()
        .map_or(std::ptr::null(), CStr::as_ptr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_api_without_a_device() {
        let batch = msrbatch_batch_new();
        // SAFETY: `batch` is fresh; every call follows the header's contract.
        unsafe {
            assert_eq!(msrbatch_batch_rdmsr(batch, 1, 0x277), 0);
            assert_eq!(msrbatch_batch_cpuid(batch, 0, 0xa, 0), 1);
            assert_eq!(msrbatch_batch_delay(batch, 2, 100), 2);
            assert_eq!(msrbatch_batch_len(batch), 3);
            let mut val = [7u64; 2];
            assert_eq!(msrbatch_result(batch, 0, val.as_mut_ptr()), 0);
            assert_eq!(val, [0, 0]);
            assert_eq!(msrbatch_result(batch, 3, val.as_mut_ptr()), -libc::ERANGE);
            assert_eq!(msrbatch_batch_err_index(batch), -1);
            assert_eq!(
                msrbatch_batch_rdtsc(std::ptr::null_mut(), 0),
                -c_long::from(libc::EINVAL)
            );
            let mut dev = std::ptr::null_mut();
            let path = c"/nonexistent/msrbatch";
            assert_eq!(msrbatch_open(path.as_ptr(), &mut dev), -libc::ENOENT);
            assert!(dev.is_null());
            assert_eq!(msrbatch_run(dev, batch), -libc::EINVAL);
            msrbatch_batch_free(batch);
            msrbatch_close(std::ptr::null_mut());
        }
        let name = |e| {
            let p = msrbatch_errno_name(e);
            // SAFETY: Non-NULL results are static C strings.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string())
        };
        assert_eq!(name(-libc::EIO).as_deref(), Some("EIO"));
        assert_eq!(name(libc::ECANCELED).as_deref(), Some("ECANCELED"));
        assert_eq!(name(i32::MIN), None);
    }
}
