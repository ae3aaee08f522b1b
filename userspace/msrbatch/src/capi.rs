// SPDX-License-Identifier: GPL-2.0
//! The C API (`include/msrbatch.h`): a thin FFI layer over [`Device`] and
//! [`Batch`]. Every function returns 0 or a non-negative value on success and
//! a negative errno on failure; handles are opaque pointers owned by the
//! caller and released with the matching `_close`/`_free` function.
//!
//! It is the one module of this crate with `unsafe` code (the ioctls are in
//! `msrbatch-sys`): C hands it raw pointers, whose validity is the C caller's
//! contract (documented in the header).
//!
//! The prototypes and their documentation are the header's;
//! `tests/harness/test-c-header.sh` (in `make check`) holds it to these
//! functions as cbindgen reads them (`cbindgen.toml`): the same names,
//! compatible prototypes, the same record and constants.

use crate::counters::{Reading, Session};
use crate::sampler::{Record, Sampler, SamplerConfig};
#[cfg(feature = "sim")]
use crate::sim::{SimPmu, Source};
use crate::uapi::{
    msrbatch_info, MSRBATCH_POLL_F_ALL, MSRBATCH_POLL_F_COUNT, MSRBATCH_POLL_F_EQUAL,
    MSRBATCH_POLL_F_RDPMC, MSRBATCH_POLL_F_TSC, MSRBATCH_REC_LOST, MSRBATCH_REC_OFFLINE,
    MSRBATCH_REC_ONLINE, MSRBATCH_REC_SAMPLE,
};
use crate::{Backend, Batch, Device, Errno, Op, Poll, PollSource, Prepared};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, CStr, CString};

/// An open device, or a simulated PMU standing in for one (`struct msrbatch`).
pub enum CDevice {
    /// `/dev/msrbatch`.
    Device(Device),
    /// A simulated PMU (`msrbatch_open_model`).
    #[cfg(feature = "sim")]
    Sim(SimPmu),
}

impl Backend for CDevice {
    fn run(&self, batch: &mut Batch) -> crate::Result<()> {
        match self {
            CDevice::Device(d) => Backend::run(d, batch),
            #[cfg(feature = "sim")]
            CDevice::Sim(m) => m.run(batch),
        }
    }

    fn nmi_watchdog(&self) -> Option<bool> {
        match self {
            CDevice::Device(d) => d.nmi_watchdog(),
            #[cfg(feature = "sim")]
            CDevice::Sim(m) => m.nmi_watchdog(),
        }
    }
}

impl CDevice {
    fn device(&self) -> Option<&Device> {
        match self {
            CDevice::Device(d) => Some(d),
            #[cfg(feature = "sim")]
            CDevice::Sim(_) => None,
        }
    }
}

/// Runs `f` on the device `dev` is: `-EINVAL` for NULL, `-EOPNOTSUPP` for a
/// simulated PMU, else what `f` returns or its error's negative errno.
///
/// # Safety
///
/// `dev` is NULL or came from `msrbatch_open`/`msrbatch_open_model`.
unsafe fn with_device(
    dev: *const CDevice,
    f: impl FnOnce(&Device) -> crate::Result<c_int>,
) -> c_int {
    // SAFETY: By the caller's contract.
    match unsafe { dev.as_ref() }.map(CDevice::device) {
        None => -libc::EINVAL,
        Some(None) => -libc::EOPNOTSUPP,
        Some(Some(d)) => f(d).unwrap_or_else(|e| neg(&e)),
    }
}

/// A batch (`struct msrbatch_batch_buf`).
pub struct CBatch(Batch);

fn neg(e: &crate::Error) -> c_int {
    -e.errno().0
}

/// The path a C caller named: NULL is [`crate::DEVICE_PATH`]; `None` for a
/// string that is not UTF-8.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
unsafe fn device_path<'a>(path: *const c_char) -> Option<&'a str> {
    if path.is_null() {
        return Some(crate::DEVICE_PATH);
    }
    // SAFETY: A NUL-terminated string, by the caller's contract.
    unsafe { CStr::from_ptr(path) }.to_str().ok()
}

/// Opens the device at `path` with `open` into `*dev`.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `dev` is NULL or valid for a
/// write.
unsafe fn open_into(
    path: *const c_char,
    dev: *mut *mut CDevice,
    open: fn(&str) -> crate::Result<Device>,
) -> c_int {
    if dev.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: By the caller's contract.
    let Some(path) = (unsafe { device_path(path) }) else {
        return -libc::EINVAL;
    };
    match open(path) {
        Ok(d) => {
            // SAFETY: `dev` is valid for a write, by the caller's contract.
            unsafe { *dev = Box::into_raw(Box::new(CDevice::Device(d))) };
            0
        }
        Err(e) => fail(&e),
    }
}

/// `msrbatch_open()`: for reading
/// and writing if the node lets the caller write, else read-only
/// ([`Device::open_path_best`]).
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `dev` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_open(path: *const c_char, dev: *mut *mut CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { open_into(path, dev, |p| Device::open_path_best(p)) }
}

/// `msrbatch_open_read_only()`:
/// read-only, for callers that will not write ([`Device::open_path_read_only`]).
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `dev` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_open_read_only(
    path: *const c_char,
    dev: *mut *mut CDevice,
) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { open_into(path, dev, |p| Device::open_path_read_only(p)) }
}

/// `msrbatch_is_read_only()`: 1 if `dev` was
/// opened read-only (writes, restore on close and RDPMC grants fail with
/// `-EBADF`), 0 if not, `-EINVAL` for NULL or a model.
///
/// # Safety
///
/// `dev` is NULL or came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_is_read_only(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    match unsafe { dev.as_ref() }.and_then(CDevice::device) {
        Some(d) => c_int::from(d.is_read_only()),
        None => -libc::EINVAL,
    }
}

/// `msrbatch_close()`
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

/// `msrbatch_info()`
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
    let Some(d) = dev.device() else {
        return -libc::EOPNOTSUPP;
    };
    match msrbatch_sys::info(std::os::fd::AsFd::as_fd(d.file())) {
        Ok(i) => {
            // SAFETY: `info` is valid for a write, by the caller's contract.
            unsafe { info.write(i) };
            0
        }
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// `msrbatch_batch_new()`
#[no_mangle]
pub extern "C" fn msrbatch_batch_new() -> *mut CBatch {
    Box::into_raw(Box::new(CBatch(Batch::new())))
}

/// `msrbatch_batch_free()`
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

/// `msrbatch_batch_stop_on_error()`
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

macro_rules! flag_fns {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `batch` is NULL or came from `msrbatch_batch_new`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(batch: *mut CBatch, on: c_int) {
            // SAFETY: By the caller's contract.
            if let Some(b) = unsafe { batch_mut(batch) } {
                b.$method(on != 0);
            }
        }
    )*};
}

flag_fns! {
    /// `msrbatch_batch_sync_start()`:
    /// synchronised start (`MSRBATCH_F_SYNC_START`).
    msrbatch_batch_sync_start => sync_start;
    /// `msrbatch_batch_timestamps()`:
    /// per-op timestamps in `val[1]` (`MSRBATCH_F_TIMESTAMPS`).
    msrbatch_batch_timestamps => timestamps;
}

/// `msrbatch_batch_start_spread()`:
/// the last run's start spread in TSC ticks (0 before a run, and on one CPU).
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_start_spread(batch: *const CBatch) -> u64 {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }.map_or(0, Batch::start_spread)
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

/// `msrbatch_batch_poll()`: appends a POLL on `cpu`: `flags` are the uapi
/// header's `MSRBATCH_POLL_F_*` (`MSRBATCH_POLL_F_RDPMC`: `reg` is an RDPMC
/// selector; `MSRBATCH_POLL_F_TSC`: the TSC, `reg` 0; neither: MSR `reg`;
/// `MSRBATCH_POLL_F_EQUAL`: until `(value & mask) == equals`, else `equals`
/// must be 0; `MSRBATCH_POLL_F_COUNT`), `timeout_us` 1 ..
/// `MSRBATCH_MAX_POLL_NS / 1000`.
///
/// Returns the op's index, or a negative errno (`-EINVAL`: unknown flags,
/// both sources, a register with the TSC, `equals` without
/// `MSRBATCH_POLL_F_EQUAL`; the kernel checks the rest).
///
/// # Safety
///
/// `batch` came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_poll(
    batch: *mut CBatch,
    cpu: u32,
    flags: u32,
    reg: u32,
    mask: u64,
    equals: u64,
    timeout_us: u32,
) -> c_long {
    let source = match flags & (MSRBATCH_POLL_F_RDPMC | MSRBATCH_POLL_F_TSC) {
        0 => PollSource::Msr(reg),
        MSRBATCH_POLL_F_RDPMC => PollSource::Pmc(reg),
        MSRBATCH_POLL_F_TSC if reg == 0 => PollSource::Tsc,
        _ => return -c_long::from(libc::EINVAL),
    };
    let equal = flags & MSRBATCH_POLL_F_EQUAL != 0;
    if flags & !MSRBATCH_POLL_F_ALL != 0 || (!equal && equals != 0) {
        return -c_long::from(libc::EINVAL);
    }
    let op = Op::Poll(Poll {
        source,
        mask,
        equals: equal.then_some(equals),
        timeout_us: u16::try_from(timeout_us).unwrap_or(u16::MAX),
        count: flags & MSRBATCH_POLL_F_COUNT != 0,
    });
    // SAFETY: By the caller's contract.
    unsafe { push(batch, cpu, op) }
}

/// `msrbatch_batch_len()`
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_len(batch: *const CBatch) -> usize {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }.map_or(0, Batch::len)
}

/// `msrbatch_run()`
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
    match dev.run(b) {
        Ok(()) => 0,
        Err(e) => fail_with_reason(&e),
    }
}

/// `msrbatch_batch_check()`: checks
/// `batch` against the kernel's limits that need nothing but the batch (ops
/// per batch, delays, timestamps; [`crate::refusal::check_batch`]) without
/// an ioctl: 0, or the negative errno the kernel would return, with
/// `msrbatch_batch_err_index()` naming the op and `msrbatch_last_error()`
/// saying why in words.
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_check(batch: *mut CBatch) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(b) = (unsafe { batch_mut(batch) }) else {
        return -libc::EINVAL;
    };
    match b.check() {
        Ok(()) => 0,
        Err(r) => {
            b.set_refused(r.index);
            set_last_error(&r.to_string());
            -r.errno.0
        }
    }
}

/// `msrbatch_batch_nr_failed()`
///
/// # Safety
///
/// `batch` is NULL or came from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_batch_nr_failed(batch: *const CBatch) -> u32 {
    // SAFETY: By the caller's contract.
    unsafe { batch_ref(batch) }.map_or(0, Batch::nr_failed)
}

/// `msrbatch_batch_err_index()`: the op the
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

/// `msrbatch_result()`
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
    // SAFETY: By the caller's contract.
    unsafe { store_result(b.raw_ops().get(index).map(|r| (r.status, r.val)), val) }
}

/// An op's result for C: copies its outputs to `val` (if not NULL) and
/// returns its status; `-ERANGE` for `None` (an index past the end).
///
/// # Safety
///
/// `val` is NULL or valid for two writes.
unsafe fn store_result(result: Option<(i32, [u64; 2])>, val: *mut u64) -> c_int {
    let Some((status, v)) = result else {
        return -libc::ERANGE;
    };
    if !val.is_null() {
        // SAFETY: `val` is valid for two writes, by the caller's contract.
        unsafe {
            val.write(v[0]);
            val.add(1).write(v[1]);
        }
    }
    status
}

/// A prepared batch (`struct msrbatch_prepared`).
pub struct CPrepared(Prepared<'static>);

/// `msrbatch_prepare()`
///
/// Validates `batch` once and has the kernel keep it (its flags included):
/// 0, or a negative errno as `msrbatch_run` (`msrbatch_batch_err_index`
/// names the op to blame), `-ENOSPC` (64 prepared batches on this device
/// already), `-EOPNOTSUPP` on a model.
///
/// # Safety
///
/// `dev` came from `msrbatch_open` and stays open until
/// `msrbatch_prepared_free()`; `batch` came from `msrbatch_batch_new`;
/// `prep` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_prepare(
    dev: *const CDevice,
    batch: *mut CBatch,
    prep: *mut *mut CPrepared,
) -> c_int {
    // SAFETY: By the caller's contract, `dev` outlives the prepared batch.
    let (Some(dev), Some(b)) = (unsafe { dev.as_ref::<'static>() }, unsafe {
        batch_mut(batch)
    }) else {
        return -libc::EINVAL;
    };
    if prep.is_null() {
        return -libc::EINVAL;
    }
    let Some(d) = dev.device() else {
        return -libc::EOPNOTSUPP;
    };
    match d.prepare(b) {
        Ok(p) => {
            b.set_refused(None);
            // SAFETY: `prep` is valid for a write, by the caller's contract.
            unsafe { *prep = Box::into_raw(Box::new(CPrepared(p))) };
            0
        }
        Err(e) => {
            b.set_refused(e.op_index());
            fail_with_reason(&e)
        }
    }
}

/// # Safety
///
/// `prep` is NULL or came from `msrbatch_prepare`.
unsafe fn prepared<'a>(prep: *const CPrepared) -> Option<&'a Prepared<'static>> {
    // SAFETY: By the caller's contract.
    unsafe { prep.as_ref() }.map(|p| &p.0)
}

/// `msrbatch_prepared_run()`: runs it
/// again; the number of failed ops, or a negative errno (nothing ran).
///
/// # Safety
///
/// `prep` came from `msrbatch_prepare`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_prepared_run(prep: *const CPrepared) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(p) = (unsafe { prepared(prep) }) else {
        return -libc::EINVAL;
    };
    match p.run() {
        Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Err(e) => fail_with_reason(&e),
    }
}

/// `msrbatch_prepared_len()`
///
/// # Safety
///
/// `prep` is NULL or came from `msrbatch_prepare`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_prepared_len(prep: *const CPrepared) -> usize {
    // SAFETY: By the caller's contract.
    unsafe { prepared(prep) }.map_or(0, Prepared::len)
}

/// `msrbatch_prepared_result()`
///
/// As `msrbatch_result`, for the last run of a prepared batch (read from the
/// kernel's result area now; zero before the first run).
///
/// # Safety
///
/// `prep` came from `msrbatch_prepare`; `val` is NULL or valid for two writes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_prepared_result(
    prep: *const CPrepared,
    index: usize,
    val: *mut u64,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(p) = (unsafe { prepared(prep) }) else {
        return -libc::EINVAL;
    };
    // SAFETY: By the caller's contract.
    unsafe { store_result(p.raw_result(index).map(|r| (r.status, r.val)), val) }
}

/// `msrbatch_prepared_free()`: unmaps its
/// results and frees the kernel's copy.
///
/// # Safety
///
/// `prep` is NULL or came from `msrbatch_prepare` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_prepared_free(prep: *mut CPrepared) {
    if !prep.is_null() {
        // SAFETY: Ownership returns from C, by the caller's contract.
        drop(unsafe { Box::from_raw(prep) });
    }
}

/// A sampler (`struct msrbatch_sampler`).
pub struct CSampler(Sampler);

/// A record as C reads it (`struct msrbatch_sampler_record`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CSamplerRecord {
    /// `MSRBATCH_REC_*`.
    pub r#type: u32,
    /// The CPU.
    pub cpu: u32,
    /// SAMPLE, ONLINE, OFFLINE: the period.
    pub seq: u64,
    /// SAMPLE, ONLINE, OFFLINE: the TSC.
    pub tsc: u64,
    /// SAMPLE: bit i set when op i faulted.
    pub failed: u64,
    /// LOST: how many.
    pub lost: u64,
    /// SAMPLE: the number of value pairs.
    pub nr: u32,
    /// 0.
    pub reserved: u32,
}

/// `msrbatch_sampler_start()`
///
/// # Safety
///
/// `prep` came from `msrbatch_prepare`; `sampler` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_start(
    prep: *const CPrepared,
    period_ns: u64,
    ring_pages: u32,
    watermark: u32,
    sampler: *mut *mut CSampler,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(p) = (unsafe { prepared(prep) }) else {
        return -libc::EINVAL;
    };
    if sampler.is_null() {
        return -libc::EINVAL;
    }
    let cfg = SamplerConfig {
        period_ns,
        ring_pages,
        watermark,
    };
    match p.sample(&cfg) {
        Ok(s) => {
            // SAFETY: `sampler` is valid for a write, by the caller's contract.
            unsafe { *sampler = Box::into_raw(Box::new(CSampler(s))) };
            0
        }
        Err(e) => {
            set_last_error(&e.to_string());
            neg(&e)
        }
    }
}

/// # Safety
///
/// `s` is NULL or came from `msrbatch_sampler_start`.
unsafe fn sampler_ref<'a>(s: *const CSampler) -> Option<&'a Sampler> {
    // SAFETY: By the caller's contract.
    unsafe { s.as_ref() }.map(|s| &s.0)
}

/// `msrbatch_sampler_fd()`: its
/// descriptor, or -EINVAL.
///
/// # Safety
///
/// `sampler` is NULL or came from `msrbatch_sampler_start`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_fd(sampler: *const CSampler) -> c_int {
    use std::os::fd::{AsFd, AsRawFd};
    // SAFETY: By the caller's contract.
    unsafe { sampler_ref(sampler) }.map_or(-libc::EINVAL, |s| s.as_fd().as_raw_fd())
}

/// `msrbatch_sampler_read()`:
/// 1 (a record), 0 (none unread) or a negative errno.
///
/// # Safety
///
/// `sampler` came from `msrbatch_sampler_start`; `rec` is valid for a
/// write; `vals` is NULL or valid for `2 * max_pairs` u64 writes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_read(
    sampler: *mut CSampler,
    rec: *mut CSamplerRecord,
    vals: *mut u64,
    max_pairs: usize,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(s) = (unsafe { sampler.as_mut() }) else {
        return -libc::EINVAL;
    };
    if rec.is_null() {
        return -libc::EINVAL;
    }
    let r = match s.0.read() {
        Ok(Some(r)) => r,
        Ok(None) => return 0,
        Err(e) => {
            set_last_error(&e.to_string());
            return neg(&e);
        }
    };
    let mut out = CSamplerRecord::default();
    match r {
        Record::Sample(smp) => {
            out.r#type = MSRBATCH_REC_SAMPLE;
            (out.cpu, out.seq, out.tsc, out.failed) = (smp.cpu, smp.seq, smp.tsc, smp.failed);
            out.nr = u32::try_from(smp.values.len()).unwrap_or(u32::MAX);
            if !vals.is_null() {
                for (i, v) in smp.values.iter().take(max_pairs).enumerate() {
                    // SAFETY: `2 * i + 1 < 2 * max_pairs`, valid for writes
                    // by the caller's contract.
                    unsafe {
                        vals.add(2 * i).write(v[0]);
                        vals.add(2 * i + 1).write(v[1]);
                    }
                }
            }
        }
        Record::Lost { cpu, lost } => {
            (out.r#type, out.cpu, out.lost) = (MSRBATCH_REC_LOST, cpu, lost);
        }
        Record::Online { cpu, seq, tsc } => {
            (out.r#type, out.cpu, out.seq, out.tsc) = (MSRBATCH_REC_ONLINE, cpu, seq, tsc);
        }
        Record::Offline { cpu, seq, tsc } => {
            (out.r#type, out.cpu, out.seq, out.tsc) = (MSRBATCH_REC_OFFLINE, cpu, seq, tsc);
        }
    }
    // SAFETY: `rec` is valid for a write, by the caller's contract.
    unsafe { rec.write(out) };
    1
}

/// `msrbatch_sampler_stop()`
///
/// # Safety
///
/// `sampler` is NULL or came from `msrbatch_sampler_start`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_stop(sampler: *const CSampler) -> c_int {
    // SAFETY: By the caller's contract.
    match unsafe { sampler_ref(sampler) } {
        Some(s) => s.stop().map_or_else(|e| neg(&e), |()| 0),
        None => -libc::EINVAL,
    }
}

/// `msrbatch_sampler_lost()`
/// (0 for NULL).
///
/// # Safety
///
/// `sampler` is NULL or came from `msrbatch_sampler_start`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_lost(sampler: *const CSampler) -> u64 {
    // SAFETY: By the caller's contract.
    unsafe { sampler_ref(sampler) }.map_or(0, Sampler::lost)
}

/// `msrbatch_sampler_free()`
///
/// # Safety
///
/// `sampler` is NULL or came from `msrbatch_sampler_start` and is not used
/// afterwards.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_sampler_free(sampler: *mut CSampler) {
    if !sampler.is_null() {
        // SAFETY: Ownership returns from C, by the caller's contract.
        drop(unsafe { Box::from_raw(sampler) });
    }
}

/// `msrbatch_restore_on_close()`: every MSR a
/// batch on `dev` writes from now on is written back when it is closed.
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_restore_on_close(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { with_device(dev, |d| d.restore_on_close().map(|()| 0)) }
}

/// `msrbatch_restore_now()`: writes them back
/// now; how many could not be, or a negative errno.
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_restore_now(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe {
        with_device(dev, |d| {
            d.restore_now()
                .map(|n| c_int::try_from(n).unwrap_or(c_int::MAX))
        })
    }
}

/// `msrbatch_grant_rdpmc()`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_grant_rdpmc(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { with_device(dev, |d| d.grant_rdpmc().map(|()| 0)) }
}

/// `msrbatch_grant_rdpmc_program()`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_grant_rdpmc_program(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { with_device(dev, |d| d.grant_rdpmc_program().map(|()| 0)) }
}

/// `msrbatch_revoke_rdpmc()`
///
/// # Safety
///
/// `dev` came from `msrbatch_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_revoke_rdpmc(dev: *const CDevice) -> c_int {
    // SAFETY: By the caller's contract.
    unsafe { with_device(dev, |d| d.revoke_rdpmc().map(|()| 0)) }
}

/// `msrbatch_online_cpus()`: the CPUs the
/// kernel lists as online ([`crate::online_cpus`]), in ascending order: the
/// first `max` of them go to `cpus` (which may be NULL when `max` is 0), and
/// the return value is how many there are (call again with more room if
/// that is over `max`), or a negative errno.
///
/// # Safety
///
/// `cpus` is NULL or valid for `max` writes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_online_cpus(cpus: *mut u32, max: usize) -> c_long {
    if cpus.is_null() && max != 0 {
        return -c_long::from(libc::EINVAL);
    }
    match crate::online_cpus() {
        Ok(list) => {
            let n = list.len().min(max);
            if n > 0 {
                // SAFETY: `cpus` is valid for `max >= n` writes, by the
                // caller's contract.
                unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), cpus, n) };
            }
            c_long::try_from(list.len()).unwrap_or(c_long::MAX)
        }
        Err(e) => -c_long::from(fail(&e).abs()),
    }
}

/// `msrbatch_errno_name()`: `"EIO"` for `EIO` or `-EIO`;
/// NULL for values this API does not produce. The string is static.
#[no_mangle]
pub extern "C" fn msrbatch_errno_name(err: c_int) -> *const c_char {
    Errno(err.saturating_abs())
        .c_name()
        .map_or(std::ptr::null(), CStr::as_ptr)
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `e` as this thread's last counter error and returns its negative errno.
fn fail(e: &crate::Error) -> c_int {
    set_last_error(e.what());
    neg(e)
}

/// Records `e` in full (what failed, the errno and why, naming the limit) as
/// this thread's last error and returns its negative errno.
fn fail_with_reason(e: &crate::Error) -> c_int {
    set_last_error(&e.to_string());
    neg(e)
}

fn set_last_error(msg: &str) {
    let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = msg);
}

/// `msrbatch_last_error()`: what the calling thread's last
/// failed call said ("" if none): for a refused batch, prepared batch or
/// sampler, the errno and why in words, naming the kernel's limit and the
/// value that broke it. Valid until its next failing call.
#[no_mangle]
pub extern "C" fn msrbatch_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// `msrbatch_open_model()`:
/// a PMU model of the CPUs of a CPUID dump, usable wherever a device is.
///
/// # Safety
///
/// `cpuid_dump` is a NUL-terminated string; `dev` is valid for a write.
#[cfg(feature = "sim")]
#[no_mangle]
pub unsafe extern "C" fn msrbatch_open_model(
    cpuid_dump: *const c_char,
    dev: *mut *mut CDevice,
) -> c_int {
    if dev.is_null() || cpuid_dump.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: A NUL-terminated string, by the caller's contract.
    let Ok(path) = unsafe { CStr::from_ptr(cpuid_dump) }.to_str() else {
        return -libc::EINVAL;
    };
    match SimPmu::from_file(path) {
        Ok(m) => {
            // SAFETY: `dev` is valid for a write, by the caller's contract.
            unsafe { *dev = Box::into_raw(Box::new(CDevice::Sim(m))) };
            0
        }
        Err(e) => fail(&crate::Error::new(libc::EINVAL, e.what())),
    }
}

/// `msrbatch_model_delay_mix()`:
/// on a model, each cycle of a DELAY op adds `per_cycle` to `event`.
///
/// # Safety
///
/// `dev` came from `msrbatch_open_model`; `event` is a NUL-terminated string.
#[cfg(feature = "sim")]
#[no_mangle]
pub unsafe extern "C" fn msrbatch_model_delay_mix(
    dev: *const CDevice,
    event: *const c_char,
    per_cycle: u32,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(CDevice::Sim(m)) = (unsafe { dev.as_ref() }) else {
        return -libc::EINVAL;
    };
    if event.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: A NUL-terminated string, by the caller's contract.
    let name = unsafe { CStr::from_ptr(event) }.to_str().unwrap_or("");
    let Some(name) = crate::pmu::known_event_name(name) else {
        return fail(&crate::Error::new(
            libc::EINVAL,
            format!("no event called '{name}'"),
        ));
    };
    m.set_delay_mix(vec![(Source::Named(name), per_cycle)]);
    0
}

/// Programmed counters (`struct msrbatch_counters`).
pub struct CCounters(Session<'static, CDevice>);

/// Do not refuse counters that seem owned (`MSRBATCH_COUNTERS_FORCE`).
pub const MSRBATCH_COUNTERS_FORCE: u32 = 1;

/// `msrbatch_counters_open()`
///
/// Probes CPU `cpu`'s PMU, places `events` (the `-e` syntax of `msrbatch
/// stat`) on its counters, checks that nobody owns them and programs them
/// (stopped). Errors: `-EINVAL` (bad events), `-ENODEV` (no PMU),
/// `-EOPNOTSUPP` (an event the CPU does not have), `-ENOSPC` (too many
/// events), `-EBUSY` (owned, without `MSRBATCH_COUNTERS_FORCE`), `-EIO` (an
/// MSR faulted; nothing stays changed); `msrbatch_last_error()` says more.
///
/// # Safety
///
/// `dev` came from `msrbatch_open`/`msrbatch_open_model` and stays open until
/// `msrbatch_counters_close()`; `events` is a NUL-terminated string;
/// `ctr` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_open(
    dev: *const CDevice,
    cpu: u32,
    events: *const c_char,
    flags: u32,
    ctr: *mut *mut CCounters,
) -> c_int {
    // SAFETY: By the caller's contract, `dev` outlives the session.
    let Some(dev) = (unsafe { dev.as_ref::<'static>() }) else {
        return -libc::EINVAL;
    };
    if events.is_null() || ctr.is_null() || flags & !MSRBATCH_COUNTERS_FORCE != 0 {
        return -libc::EINVAL;
    }
    // SAFETY: A NUL-terminated string, by the caller's contract.
    let Ok(events) = unsafe { CStr::from_ptr(events) }.to_str() else {
        return -libc::EINVAL;
    };
    match Session::open(dev, cpu, events, flags & MSRBATCH_COUNTERS_FORCE != 0) {
        Ok(s) => {
            // SAFETY: `ctr` is valid for a write, by the caller's contract.
            unsafe { *ctr = Box::into_raw(Box::new(CCounters(s))) };
            0
        }
        Err(e) => fail(&e),
    }
}

/// # Safety
///
/// `ctr` is NULL or came from `msrbatch_counters_open`.
unsafe fn session<'a>(ctr: *const CCounters) -> Option<&'a Session<'static, CDevice>> {
    // SAFETY: By the caller's contract.
    unsafe { ctr.as_ref() }.map(|c| &c.0)
}

/// `msrbatch_counters_len()`: the number of events.
///
/// # Safety
///
/// `ctr` is NULL or came from `msrbatch_counters_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_len(ctr: *const CCounters) -> usize {
    // SAFETY: By the caller's contract.
    unsafe { session(ctr) }.map_or(0, |s| s.plan().slots.len())
}

/// `msrbatch_counters_describe()`:
/// writes "EVENT: COUNTER ..." for event `i` (truncated, NUL-terminated) and
/// returns its full length, like snprintf; `-ERANGE` past the end.
///
/// # Safety
///
/// `ctr` came from `msrbatch_counters_open`; `buf` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_describe(
    ctr: *const CCounters,
    i: usize,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(s) = (unsafe { session(ctr) }) else {
        return -libc::EINVAL;
    };
    let Some(line) = s.plan().describe().into_iter().nth(i) else {
        return -libc::ERANGE;
    };
    if !buf.is_null() && len > 0 {
        let n = line.len().min(len - 1);
        // SAFETY: `buf` is valid for `len` bytes, by the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(line.as_ptr().cast(), buf, n);
            buf.add(n).write(0);
        }
    }
    c_int::try_from(line.len()).unwrap_or(c_int::MAX)
}

/// # Safety
///
/// `values` is NULL or valid for `n` writes.
unsafe fn store(r: crate::Result<Vec<u64>>, values: *mut u64) -> c_int {
    match r {
        Ok(v) => {
            if !values.is_null() {
                // SAFETY: Valid for one write per event, by the caller's contract.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), values, v.len()) };
            }
            0
        }
        Err(e) => fail(&e),
    }
}

macro_rules! counter_fns {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `ctr` came from `msrbatch_counters_open`; `values` is NULL or valid
        /// for `msrbatch_counters_len(ctr)` writes.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ctr: *const CCounters, values: *mut u64) -> c_int {
            // SAFETY: By the caller's contract.
            let Some(s) = (unsafe { session(ctr) }) else {
                return -libc::EINVAL;
            };
            // SAFETY: By the caller's contract.
            unsafe { store(s.$method(), values) }
        }
    )*};
}

counter_fns! {
    /// `msrbatch_counters_start()`:
    /// starts the counters and reads them (one batch).
    msrbatch_counters_start => start;
    /// `msrbatch_counters_stop()`:
    /// reads the counters and stops them (one batch).
    msrbatch_counters_stop => stop;
    /// `msrbatch_counters_read()`:
    /// reads the counters (CPUID fence, then RDPMC).
    msrbatch_counters_read => read;
}

macro_rules! counter_push_fns {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `ctr` came from `msrbatch_counters_open`, `batch` from `msrbatch_batch_new`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ctr: *const CCounters, batch: *mut CBatch) -> c_int {
            // SAFETY: By the caller's contract.
            let (Some(s), Some(b)) = (unsafe { session(ctr) }, unsafe { batch_mut(batch) }) else {
                return -libc::EINVAL;
            };
            s.$method(b);
            0
        }
    )*};
}

counter_push_fns! {
    /// `msrbatch_counters_push_start()`:
    /// appends the ops that start the counters.
    msrbatch_counters_push_start => push_start;
    /// `msrbatch_counters_push_stop()`:
    /// appends the ops that stop them.
    msrbatch_counters_push_stop => push_stop;
}

/// `msrbatch_counters_push_read()`:
/// appends a CPUID fence and one RDPMC per event; returns a handle for
/// `msrbatch_counters_values`.
///
/// # Safety
///
/// `ctr` came from `msrbatch_counters_open`, `batch` from `msrbatch_batch_new`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_push_read(
    ctr: *const CCounters,
    batch: *mut CBatch,
) -> c_long {
    // SAFETY: By the caller's contract.
    let (Some(s), Some(b)) = (unsafe { session(ctr) }, unsafe { batch_mut(batch) }) else {
        return -c_long::from(libc::EINVAL);
    };
    let first = b.len();
    s.push_read(b);
    c_long::try_from(first).unwrap_or(-c_long::from(libc::E2BIG))
}

/// `msrbatch_counters_values()`:
/// the counts a `msrbatch_counters_push_read` of the run `batch` got.
///
/// # Safety
///
/// `ctr` came from `msrbatch_counters_open`, `batch` from `msrbatch_batch_new`;
/// `values` is valid for `msrbatch_counters_len(ctr)` writes.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_values(
    ctr: *const CCounters,
    batch: *const CBatch,
    reading: c_long,
    values: *mut u64,
) -> c_int {
    // SAFETY: By the caller's contract.
    let (Some(s), Some(b)) = (unsafe { session(ctr) }, unsafe { batch_ref(batch) }) else {
        return -libc::EINVAL;
    };
    let Ok(first) = usize::try_from(reading) else {
        return -libc::EINVAL;
    };
    let n = s.plan().slots.len();
    let fence_ok = matches!(b.op(first), Some((_, Op::Cpuid { .. })));
    if !fence_ok || first + n >= b.len() {
        return -libc::ERANGE;
    }
    // SAFETY: By the caller's contract.
    unsafe { store(s.values(b, Reading::after_fence(first)), values) }
}

/// `msrbatch_counters_deltas()`:
/// `end - start` per event, modulo each counter's width.
///
/// # Safety
///
/// `ctr` came from `msrbatch_counters_open`; each array holds
/// `msrbatch_counters_len()` values.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_deltas(
    ctr: *const CCounters,
    start: *const u64,
    end: *const u64,
    out: *mut u64,
) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(s) = (unsafe { session(ctr) }) else {
        return -libc::EINVAL;
    };
    if start.is_null() || end.is_null() || out.is_null() {
        return -libc::EINVAL;
    }
    let n = s.plan().slots.len();
    // SAFETY: Each array holds `n` values, by the caller's contract.
    let (a, z) = unsafe {
        (
            std::slice::from_raw_parts(start, n),
            std::slice::from_raw_parts(end, n),
        )
    };
    let d = s.deltas(a, z);
    // SAFETY: `out` is valid for `n` writes.
    unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), out, n) };
    0
}

/// `msrbatch_counters_restore()`: puts back
/// every MSR the counters touched; 1 if a counter value could not be
/// restored exactly (no full-width writes; `msrbatch_last_error()` says
/// which), 0 if all was, a negative errno if a restore faulted.
///
/// # Safety
///
/// `ctr` came from `msrbatch_counters_open`.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_restore(ctr: *mut CCounters) -> c_int {
    // SAFETY: By the caller's contract.
    let Some(c) = (unsafe { ctr.as_mut() }) else {
        return -libc::EINVAL;
    };
    match c.0.restore() {
        Ok(r) if r.inexact.is_empty() => 0,
        Ok(r) => {
            set_last_error(&r.inexact.join("; "));
            1
        }
        Err(e) => fail(&e),
    }
}

/// `msrbatch_counters_close()`: restores
/// (if `msrbatch_counters_restore` was not called) and frees.
///
/// # Safety
///
/// `ctr` is NULL or came from `msrbatch_counters_open` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn msrbatch_counters_close(ctr: *mut CCounters) {
    if !ctr.is_null() {
        // SAFETY: Ownership returns from C, by the caller's contract.
        drop(unsafe { Box::from_raw(ctr) });
    }
}

/// `const char *msrbatch_version(void)`: the library's version
/// (`MAJOR.MINOR.PATCH`, Cargo.toml's one version), a static string.
#[no_mangle]
pub extern "C" fn msrbatch_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
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
            assert_eq!(msrbatch_batch_check(batch), 0);
            msrbatch_batch_timestamps(batch, 1);
            assert_eq!(msrbatch_batch_check(batch), -libc::EINVAL);
            assert_eq!(msrbatch_batch_err_index(batch), 1);
            let why = CStr::from_ptr(msrbatch_last_error()).to_str().unwrap();
            assert!(
                why.contains("'cpuid' returns a second value itself"),
                "{why}"
            );
            msrbatch_batch_timestamps(batch, 0);
            assert_eq!(
                msrbatch_batch_rdtsc(std::ptr::null_mut(), 0),
                -c_long::from(libc::EINVAL)
            );
            let mut dev = std::ptr::null_mut();
            let path = c"/nonexistent/msrbatch";
            assert_eq!(msrbatch_open(path.as_ptr(), &mut dev), -libc::ENOENT);
            assert!(dev.is_null());
            assert_eq!(
                msrbatch_open_read_only(path.as_ptr(), &mut dev),
                -libc::ENOENT
            );
            assert_eq!(msrbatch_is_read_only(dev), -libc::EINVAL);
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

    /// A node the caller may read but not write (sysfs refuses writes to a
    /// 0444 file even to root) opens read-only with `msrbatch_open`, and
    /// with `msrbatch_open_read_only`; it is no device, so the ioctl fails.
    #[test]
    fn c_open_falls_back_to_read_only() {
        let path = c"/sys/devices/system/cpu/online";
        let writable = std::fs::OpenOptions::new()
            .write(true)
            .open(path.to_str().unwrap())
            .is_ok();
        assert!(
            !writable,
            "{path:?} is writable: no read-only node to test with"
        );
        for open in [msrbatch_open, msrbatch_open_read_only] {
            let mut dev = std::ptr::null_mut();
            let mut info = msrbatch_info::default();
            // SAFETY: Every pointer is valid, as the header asks.
            unsafe {
                assert_eq!(open(path.as_ptr(), &mut dev), 0);
                assert_eq!(msrbatch_is_read_only(dev), 1);
                assert_eq!(msrbatch_info(dev, &mut info), -libc::ENOTTY);
                msrbatch_close(dev);
            }
        }
    }

    /// The online CPUs, as the Rust API and sysfs list them; a short buffer
    /// gets the first ones and the full count.
    #[test]
    fn c_online_cpus() {
        let want = crate::online_cpus().unwrap();
        // SAFETY: Every pointer is valid for the room given, as the header asks.
        unsafe {
            let n = msrbatch_online_cpus(std::ptr::null_mut(), 0);
            assert_eq!(n, want.len() as c_long);
            let mut cpus = vec![u32::MAX; want.len() + 1];
            assert_eq!(msrbatch_online_cpus(cpus.as_mut_ptr(), cpus.len()), n);
            assert_eq!(&cpus[..want.len()], want.as_slice());
            assert_eq!(cpus[want.len()], u32::MAX);
            let mut one = [u32::MAX];
            assert_eq!(msrbatch_online_cpus(one.as_mut_ptr(), 1), n);
            assert_eq!(one[0], want[0]);
            assert_eq!(
                msrbatch_online_cpus(std::ptr::null_mut(), 1),
                -c_long::from(libc::EINVAL)
            );
        }
    }

    /// The sampler calls refuse NULL; a sampler over a ring (a mapped file
    /// here, not the kernel's) reads records one at a time into the C
    /// struct, values up to the caller's room.
    #[test]
    fn c_sampler_calls() {
        use crate::sampler::tests::{cpu_rec, file_sampler, sample_rec};
        assert_eq!(size_of::<CSamplerRecord>(), 48);
        let ops = [(1, Op::RdTsc), (1, Op::RdMsr { msr: 0x10 })];
        let records = [
            (1, cpu_rec(MSRBATCH_REC_ONLINE, 1, 0, 77)),
            (1, sample_rec(1, 0, 1000, 0b10, &[[11, 0], [0, 0]])),
        ];
        let s = Box::into_raw(Box::new(CSampler(file_sampler(&records, &ops))));
        let mut rec = CSamplerRecord::default();
        let mut val = [[9u64; 2]; 1];
        // SAFETY: Every pointer is valid or NULL, as the header allows.
        unsafe {
            let mut out = std::ptr::null_mut();
            let null = std::ptr::null();
            assert_eq!(
                msrbatch_sampler_start(null, 1_000_000, 1, 0, &mut out),
                -libc::EINVAL
            );
            assert!(out.is_null());
            assert_eq!(msrbatch_sampler_fd(null.cast()), -libc::EINVAL);
            assert!(msrbatch_sampler_fd(s) >= 0);
            assert_eq!(
                msrbatch_sampler_read(
                    std::ptr::null_mut(),
                    &mut rec,
                    val.as_mut_ptr().cast::<u64>(),
                    1
                ),
                -libc::EINVAL
            );
            assert_eq!(
                msrbatch_sampler_read(s, std::ptr::null_mut(), val.as_mut_ptr().cast::<u64>(), 1),
                -libc::EINVAL
            );
            assert_eq!(
                msrbatch_sampler_read(s, &mut rec, val.as_mut_ptr().cast::<u64>(), 1),
                1
            );
            assert_eq!(
                (rec.r#type, rec.cpu, rec.seq, rec.tsc),
                (MSRBATCH_REC_ONLINE, 1, 0, 77)
            );
            assert_eq!(
                msrbatch_sampler_read(s, &mut rec, val.as_mut_ptr().cast::<u64>(), 1),
                1
            );
            assert_eq!(
                (rec.r#type, rec.cpu, rec.seq, rec.tsc, rec.failed, rec.nr),
                (MSRBATCH_REC_SAMPLE, 1, 0, 1000, 0b10, 2)
            );
            // One pair of room: the first op's values only.
            assert_eq!(val, [[11, 0]]);
            assert_eq!(
                msrbatch_sampler_read(s, &mut rec, val.as_mut_ptr().cast::<u64>(), 1),
                0
            );
            assert_eq!(msrbatch_sampler_lost(s), 0);
            assert_eq!(msrbatch_sampler_lost(null.cast()), 0);
            assert_eq!(msrbatch_sampler_stop(s), -libc::ENOTTY);
            assert_eq!(msrbatch_sampler_stop(null.cast()), -libc::EINVAL);
            msrbatch_sampler_free(s);
            msrbatch_sampler_free(std::ptr::null_mut());
        }
    }
}
