// SPDX-License-Identifier: GPL-2.0

//! The bindings bindgen generates at build time from `bindings_helper.h`
//! (`rust/Kbuild`): the uapi header's constants and structures, the ioctl
//! numbers, and the prototypes of `helpers.h`. Used through [`crate::uapi`]
//! (the ABI) and [`crate::helpers`], [`crate::sampler`], [`crate::busy`]
//! (the C functions); never edited.

#![allow(
    dead_code,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::undocumented_unsafe_blocks
)]

use kernel::ffi;

include!("bindings_generated.rs");

/// Fails the build unless `$f`, a function of the module that C calls, has
/// the type of its prototype in `helpers.h` (`sys::$f`): an array of the two
/// makes them one function pointer type.
macro_rules! assert_prototype {
    ($f:ident) => {
        const _: () = {
            let _ = [$crate::sys::$f, $f];
        };
    };
}
pub(crate) use assert_prototype;
