// SPDX-License-Identifier: GPL-2.0

//! Who may do what: the module's access policy, in one place.
//!
//! It follows `arch/x86/kernel/msr.c`: a descriptor opened with
//! `CAP_SYS_RAWIO` ([`has_rawio`]) may do everything; one opened without (the
//! node's mode decides who may open) only what the allowlist in force at open
//! allows (`allowlist.rs`). What a descriptor was opened for ([`Access`])
//! decides the rest: a batch needs it open for reading, one that writes also
//! for writing (`EBADF`). Writes are refused under `LOCKDOWN_MSR`
//! ([`msr_writes_locked_down`]) and when the `allow_writes` parameter is `off`
//! (`EPERM`), logged when it is `default` (`helpers.c`); [`check_writes`] makes
//! these checks in msr.c's order. A write that ran taints the kernel
//! ([`taint_if_written`]).

use crate::batch::{self, Plan, Rejected};
use crate::uapi::Op;
use kernel::{bindings, fs::File, prelude::*};

/// What the descriptor was opened for (`O_ACCMODE`, as `FMODE_READ` and
/// `FMODE_WRITE` are derived from it).
#[derive(Clone, Copy)]
pub(crate) struct Access {
    pub(crate) read: bool,
    pub(crate) write: bool,
}

impl Access {
    /// How `file` was opened.
    #[inline(always)]
    pub(crate) fn of(file: &File) -> Self {
        // The C struct's address without `File::flags`, whose
        // `Opaque::get` is not inlined: a call on every ioctl. `File` and
        // `Opaque` are `repr(transparent)`, so the `File` is at the address
        // of its `struct file`.
        let raw = core::ptr::from_ref(file).cast::<bindings::file>();
        // SAFETY: `raw` is the address of the file's `struct file` (as just
        // said), valid while the reference is. `f_flags` is read as
        // `File::flags` reads it (a volatile read, for `READ_ONCE`).
        let flags = unsafe { core::ptr::addr_of!((*raw).f_flags).read_volatile() };
        let mode = flags & bindings::O_ACCMODE;
        Access {
            read: mode == bindings::O_RDONLY || mode == bindings::O_RDWR,
            write: mode == bindings::O_WRONLY || mode == bindings::O_RDWR,
        }
    }
}

/// Whether the caller holds `CAP_SYS_RAWIO`.
pub(crate) fn has_rawio() -> bool {
    // SAFETY: `capable` may be called from process context at any time.
    unsafe { bindings::capable(bindings::CAP_SYS_RAWIO as i32) }
}

/// Whether the kernel's lockdown forbids MSR writes.
pub(crate) fn msr_writes_locked_down() -> bool {
    #[cfg(CONFIG_SECURITY)]
    {
        // SAFETY: `security_locked_down` may be called from process context.
        unsafe { bindings::security_locked_down(bindings::lockdown_reason_LOCKDOWN_MSR) != 0 }
    }
    #[cfg(not(CONFIG_SECURITY))]
    {
        false
    }
}

/// The checks a batch that writes must pass, in msr.c's order: a descriptor
/// open for writing (`EBADF`), no lockdown (`EPERM`), `allow_writes`
/// (`EPERM`). `plan` is the plan of `ops`; a refusal names its first write.
pub(crate) fn check_writes(ops: &[Op], plan: &Plan, access: Access) -> Result<(), Rejected> {
    let Some(first) = plan.first_write() else {
        return Ok(());
    };
    let refuse = |err| Rejected { err, index: first };
    if !access.write {
        return Err(refuse(EBADF));
    }
    if msr_writes_locked_down() {
        return Err(refuse(EPERM));
    }
    let msr = ops.get(first as usize).map_or(0, |op| op.reg);
    crate::helpers::filter_writes(msr, plan.nr_writes()).map_err(refuse)
}

/// Like arch/x86/kernel/msr.c: a raw MSR write takes the CPU out of spec;
/// only a write that ran taints.
pub(crate) fn taint_if_written(ops: &[Op]) {
    if ops.iter().any(|op| batch::is_write(op) && op.status == 0) {
        // SAFETY: `add_taint` may be called from process context.
        unsafe { bindings::add_taint(bindings::TAINT_CPU_OUT_OF_SPEC, bindings::lockdep_ok_LOCKDEP_STILL_OK) };
    }
}
