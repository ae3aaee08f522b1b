// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel series the module builds for (7.2 and
//! 7.3), bridged here and nowhere else.
//!
//! `rust/Kbuild` passes `--cfg kernel_7_2` for a 7.2 kernel. The rest of the
//! module takes these items from here and compiles unchanged on both:
//!
//! - [`this_module`]: 7.3 has `ModuleMetadata::THIS_MODULE`, 7.2 the
//!   `THIS_MODULE` static that `module!` puts at the crate root.
//! - [`smp_call_function_single`]: its `wait` is a C `int` in 7.2 and a
//!   `bool` in 7.3.
//! - [`sort_by_key`]: core's slice sorts call `panic_on_ord_violation()`,
//!   which 7.3.4's objtool does not know never returns: built by Debian's
//!   rustc 1.85 they made it warn "falls through to next function". The
//!   module sorts with `heapsort.rs` instead.
//! - [`enotuniq`], [`eprotonosupport`], [`eopnotsupp`], [`enotrecoverable`],
//!   [`edquot`]:
//!   7.2's `kernel::error::code` lacks them (7.3 added about a hundred codes),
//!   and its `Error` has no constant constructor, so on both series they are
//!   made from the C constants when used.

use core::ffi::{c_int, c_void};
use kernel::{bindings, prelude::*};

// `heapsort.rs` is compiled once, in `allowlist_text.rs`, which the
// library shares.
pub(crate) use crate::allowlist::text::heapsort::sort_by_key;

/// This module's `struct module`, for references that keep it loaded.
pub(crate) fn this_module() -> *mut bindings::module {
    #[cfg(not(kernel_7_2))]
    let this = <crate::MsrBatchModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
    #[cfg(kernel_7_2)]
    let this = crate::THIS_MODULE.as_ptr();
    this
}

/// `smp_call_function_single(cpu, func, info, wait = true)`: runs `func(info)`
/// on `cpu` and returns when it has run; 0, or `-ENXIO` for an offline CPU.
///
/// # Safety
///
/// `func` may be called with `info` on `cpu` in hard-interrupt context before
/// this returns: `info` must be valid for what `func` does with it until then.
#[allow(
    clippy::useless_conversion,
    reason = "`true.into()` is a bool on 7.3 and a C int on 7.2"
)]
pub(crate) unsafe fn smp_call_function_single(
    cpu: c_int,
    func: unsafe extern "C" fn(*mut c_void),
    info: *mut c_void,
) -> c_int {
    // SAFETY: as this function's own requirements; process context.
    unsafe { bindings::smp_call_function_single(cpu, Some(func), info, true.into()) }
}

/// An errno from its C constant.
fn errno(code: u32) -> Error {
    Error::from_errno(-(code as c_int))
}

/// `ENOTUNIQ`: an allowlist names an MSR twice.
pub(crate) fn enotuniq() -> Error {
    errno(bindings::ENOTUNIQ)
}

/// `EILSEQ`: an msr-safe allowlist text ends inside an entry.
pub(crate) fn eilseq() -> Error {
    errno(bindings::EILSEQ)
}

/// `ENOMSG`: an msr-safe allowlist text names no MSR.
pub(crate) fn enomsg() -> Error {
    errno(bindings::ENOMSG)
}

/// `ENOPROTOOPT`: an msr-safe batch of another major version.
pub(crate) fn enoprotoopt() -> Error {
    errno(bindings::ENOPROTOOPT)
}

/// `EPROTONOSUPPORT`: a batch of another ABI version.
pub(crate) fn eprotonosupport() -> Error {
    errno(bindings::EPROTONOSUPPORT)
}

/// `EOPNOTSUPP`: an opcode or request this module or kernel does not do.
pub(crate) fn eopnotsupp() -> Error {
    errno(bindings::EOPNOTSUPP)
}

/// `ENOTRECOVERABLE`: a batch ran but its results could not be copied out.
pub(crate) fn enotrecoverable() -> Error {
    errno(bindings::ENOTRECOVERABLE)
}

/// `EDQUOT`: a confined descriptor's prepared batches would hold more than
/// its share of memory.
pub(crate) fn edquot() -> Error {
    errno(bindings::EDQUOT)
}

#[kunit_tests(msrbatch_compat)]
mod tests {
    use super::*;

    #[test]
    fn sort_by_key_sorts() -> Result {
        let cases: [&[u32]; 6] = [
            &[],
            &[1],
            &[2, 1],
            &[3, 1, 2, 3, 0],
            &[5, 4, 3, 2, 1, 0, 9],
            &[7, 7, 7, 1, 7],
        ];
        for case in cases {
            let mut v = KVec::new();
            v.extend_from_slice(case, GFP_KERNEL)?;
            sort_by_key(&mut v, |&x| x);
            assert!(v.windows(2).all(|w| w[0] <= w[1]));
            // The same values: each count unchanged.
            for x in case {
                assert_eq!(
                    v.iter().filter(|&y| y == x).count(),
                    case.iter().filter(|&y| y == x).count()
                );
            }
        }
        // A key: pairs by their second element, descending.
        let mut p = [(1u32, 3u32), (2, 9), (3, 1), (4, 5)];
        sort_by_key(&mut p, |&(_, b)| core::cmp::Reverse(b));
        assert_eq!(p, [(2, 9), (4, 5), (1, 3), (3, 1)]);
        Ok(())
    }
}
