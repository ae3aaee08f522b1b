// SPDX-License-Identifier: GPL-2.0
//! Raw bindings for `/dev/msrbatch`, as `perf-event-open-sys` is for
//! `perf_event_open(2)`: the ABI's types, constants and ioctl numbers
//! generated from `include/uapi/linux/msrbatch.h` ([`uapi`]), and one thin
//! wrapper per ioctl on a raw file descriptor.
//!
//! This crate holds the userspace ioctl and `fcntl` calls, and so the `unsafe`
//! code they need. The safe API (batches, devices, results) is the `msrbatch`
//! crate, whose only other `unsafe` code is its C API (the `extern "C"` functions of `include/msrbatch.h`).
//!
//! The wrappers that are safe functions issue this driver's own commands with
//! arguments of the size each command announces; they assume, as every ioctl
//! wrapper does, that the descriptor is `/dev/msrbatch` (the `0xB9` command
//! space is this driver's). [`batch_raw`] and [`ioctl_ptr`], for tests of the
//! kernel's validation, are `unsafe`.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// msr-safe's ABI, generated from `include/uapi/linux/msrbatch_msr_safe.h`:
/// what `/dev/cpu/msr_batch` takes when the module is loaded with
/// `msr_safe=1` (`Documentation/msr-safe.md`); [`msr_safe_batch`] runs it.
#[allow(missing_docs)]
pub mod msr_safe;
mod sys;
#[allow(
    non_camel_case_types,
    missing_docs,
    clippy::all,
    unsafe_op_in_unsafe_fn
)]
pub mod uapi;

/// Fails the build unless [`uapi`] has every value of the frozen ABI
/// (`frozen_abi.rs`, made with it by `scripts/gen-uapi.sh`).
mod frozen_abi {
    use crate::uapi as view;
    macro_rules! view_name {
        () => {
            "userspace's view (userspace/msrbatch-sys/src/uapi.rs)"
        };
    }
    include!("frozen_abi.rs");
}

pub use sys::*;
