// SPDX-License-Identifier: GPL-2.0

//! The msr-safe personality (module parameter `msr_safe=1`): LLNL msr-safe
//! 1.8's four device nodes, with its ABI (`include/uapi/linux/msrbatch_msr_safe.h`)
//! and errnos, on msrbatch's engine, allowlist and checks. `msr_safe.c`
//! registers the nodes; their file operations call the functions here.
//! `Documentation/msr-safe.md` compares the two.
//!
//! - **Every access is checked against the allowlist**, root's too, as
//!   msr-safe does; writes within their write masks (merged with the MSR's
//!   other bits, `allowlist.rs`), under the same write checks as
//!   `/dev/msrbatch`'s (a descriptor open for writing, lockdown,
//!   `allow_writes`: `policy.rs`).
//! - **Fixed at open** (stricter than msr-safe, whose descriptors use each
//!   new list): a descriptor keeps the allowlist in force when it was
//!   opened ([`MsFile`]).
//! - **`/dev/cpu/msr_batch`**: every op is checked first (`ENXIO`: CPU
//!   offline; `EACCES`: MSR not listed; `EROFS`: a write to a read-only MSR),
//!   each failure in its op's `err`; if one failed, none runs. Then all run
//!   in one batch; a fault is `EIO` in its op. The ioctl returns the first
//!   op's error.

use crate::accept::{self, Caller};
use crate::allowlist::{self, Snapshot};
use crate::batch;
use crate::policy::Access;
use crate::sys::{self, assert_prototype};
use crate::uapi::{self, opcode, Op};
use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use kernel::{
    ioctl::_IOC_SIZE,
    prelude::*,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// `struct msr_batch_op`.
type MsOp = sys::msr_batch_op;
/// `struct msr_batch_array`.
type MsArray = sys::msr_batch_array;

const IOC_BATCH: u32 = sys::X86_IOC_MSR_BATCH;

const _: () = assert!(_IOC_SIZE(IOC_BATCH) == size_of::<MsArray>());

// SAFETY: `repr(C)`, integer fields only, padding an explicit field
// (`--explicit-padding`): every bit pattern is valid, no byte uninitialised.
unsafe impl FromBytes for MsOp {}
// SAFETY: As above.
unsafe impl AsBytes for MsOp {}
// SAFETY: `repr(C)`: two `u32` and a raw pointer, for which every bit
// pattern is a valid value (the pointer is only turned into an address).
unsafe impl FromBytes for MsArray {}

/// An open msr-safe node: the allowlist in force at open and, for
/// `/dev/cpu/msr_allowlist` opened for reading, its text then.
struct MsFile {
    rules: Snapshot,
    text: KVVec<u8>,
}

/// Opens a node: the state `msr_safe.c` keeps as the file's private data,
/// or null (`ENOMEM`). `render`: keep the allowlist's text for reading.
///
/// # Safety
///
/// Called by `msr_safe.c`'s open (process context); the result is released
/// once, by [`msrbatch_ms_release`]. `unsafe`, as bindgen makes `helpers.h`'s
/// prototype: an older rustc (Debian trixie's 1.85.1) does not unify a safe
/// and an unsafe `extern "C" fn` in `assert_prototype!`.
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_open(render: bool) -> *mut c_void {
    let rules = allowlist::snapshot();
    let text = if render {
        match rules.render_msr_safe() {
            Ok(t) => t,
            Err(_) => return core::ptr::null_mut(),
        }
    } else {
        KVVec::new()
    };
    match KBox::new(MsFile { rules, text }, GFP_KERNEL_ACCOUNT) {
        Ok(b) => KBox::into_raw(b).cast(),
        Err(_) => core::ptr::null_mut(),
    }
}
assert_prototype!(msrbatch_ms_open);

/// The open node's state.
///
/// # Safety
///
/// `f` is what [`msrbatch_ms_open`] returned, not yet released.
unsafe fn ms_file<'a>(f: *mut c_void) -> &'a MsFile {
    // SAFETY: By the function's requirements, `f` is a live `MsFile`.
    unsafe { &*f.cast::<MsFile>() }
}

/// Frees an open node's state (its file's release).
///
/// # Safety
///
/// `f` is what [`msrbatch_ms_open`] returned; called once, after which
/// nothing uses it.
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_release(f: *mut c_void) {
    // SAFETY: By the function's requirements: `f` came from `KBox::into_raw`
    // and is not used again.
    drop(unsafe { KBox::from_raw(f.cast::<MsFile>()) });
}
assert_prototype!(msrbatch_ms_release);

/// The allowlist text kept at open, and its length in `*len`.
///
/// # Safety
///
/// As [`ms_file`]; `len` is valid for a write. The text lives as long as `f`.
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_text(f: *mut c_void, len: *mut usize) -> *const u8 {
    // SAFETY: By the function's requirements.
    let me = unsafe { ms_file(f) };
    // SAFETY: By the function's requirements, `len` is valid for a write.
    unsafe { *len = me.text.len() };
    me.text.as_ptr()
}
assert_prototype!(msrbatch_ms_text);

/// Replaces the allowlist by `len` bytes of text at `text`, as msr-safe's
/// `/dev/cpu/msr_allowlist` does (`allowlist::load_msr_safe`): 0 or a
/// negative errno.
///
/// # Safety
///
/// `text` is valid for reads of `len` bytes.
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_load(text: *const u8, len: usize) -> c_int {
    // SAFETY: By the function's requirements.
    let text = unsafe { core::slice::from_raw_parts(text, len) };
    match allowlist::load_msr_safe(text) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
assert_prototype!(msrbatch_ms_load);

/// `/dev/cpu/<cpu>/msr_safe`: reads (`write` false) the MSR `msr` into
/// `*val` or writes `*val` to it, within the allowlist: 0 or a negative
/// errno (`EACCES`, `EBADF`, `EPERM`, `ENXIO`, `EIO`).
///
/// # Safety
///
/// As [`ms_file`]; `val` is valid for reads and writes.
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_msr(
    f: *mut c_void,
    cpu: c_uint,
    msr: u32,
    val: *mut u64,
    writable: bool,
    write: bool,
) -> c_int {
    // SAFETY: By the function's requirements.
    let me = unsafe { ms_file(f) };
    // SAFETY: By the function's requirements.
    let v = unsafe { &mut *val };
    let mut op = [ms_op(cpu, msr, write.then_some(*v))];
    let access = Access { read: true, write: writable };
    match one_by_one(me, &mut op, access) {
        Ok(()) => {
            if !write {
                *v = op[0].val[0];
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}
assert_prototype!(msrbatch_ms_msr);

/// The op of this ABI that reads `msr` on `cpu`, or writes `value` to it.
/// (A read's `msrdata` is not an operand: the engine wants unused operands 0.)
fn ms_op(cpu: u32, msr: u32, write: Option<u64>) -> Op {
    Op {
        op: if write.is_some() { opcode::WRMSR } else { opcode::RDMSR },
        cpu,
        reg: msr,
        arg: [write.unwrap_or(0), 0],
        ..Op::default()
    }
}

/// Runs one op for the per-CPU node; an op's failure is its errno. A write
/// to a read-only MSR is `EACCES` there, as msr-safe's per-CPU node says it
/// (its batch node says `EROFS`).
fn one_by_one(me: &MsFile, ops: &mut [Op; 1], access: Access) -> Result {
    let caller = Caller::new(access, Some(&me.rules));
    accept::run_in_kernel(ops, caller).map_err(|r| if r.err == EROFS { EACCES } else { r.err })?;
    match ops[0].status {
        0 => Ok(()),
        s => Err(Error::from_errno(s)),
    }
}

/// `/dev/cpu/msr_batch`'s ioctl: 0 or a negative errno.
///
/// # Safety
///
/// As [`ms_file`].
#[no_mangle]
unsafe extern "C" fn msrbatch_ms_ioctl(
    f: *mut c_void,
    cmd: c_uint,
    arg: c_ulong,
    readable: bool,
    writable: bool,
) -> c_long {
    // SAFETY: By the function's requirements.
    let me = unsafe { ms_file(f) };
    let access = Access {
        read: readable,
        write: writable,
    };
    let r = match cmd {
        IOC_BATCH => read_arg::<MsArray>(arg).and_then(|a| {
            batch(me, access, a.numops, a.version, a.ops as usize)
        }),
        _ => Err(ENOTTY),
    };
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno() as c_long,
    }
}
assert_prototype!(msrbatch_ms_ioctl);

fn read_arg<T: FromBytes>(arg: c_ulong) -> Result<T> {
    UserSlice::new(UserPtr::from_addr(arg), size_of::<T>()).reader().read()
}

/// One batch: `numops` ops at `ops`, of msr-safe version `version`.
fn batch(me: &MsFile, access: Access, numops: u32, version: u32, ops: usize) -> Result {
    if !access.read {
        return Err(EBADF);
    }
    if version >> 16 != sys::MSR_SAFE_VERSION_MAJOR {
        return Err(crate::compat::enoprotoopt());
    }
    if numops == 0 {
        return Err(EINVAL);
    }
    if numops > uapi::MAX_OPS {
        return Err(E2BIG);
    }
    let n = numops as usize;
    let user = UserSlice::new(UserPtr::from_addr(ops), n * size_of::<MsOp>());
    let (mut reader, mut writer) = user.reader_writer();
    let mut ms = KVVec::<MsOp>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
    let mut run = KVVec::<Op>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
    let mut first: Option<Error> = None;
    for _ in 0..n {
        let mut m: MsOp = reader.read()?;
        m.err = 0;
        if let Err(e) = check_op(me, &mut m) {
            m.err = e.to_errno();
            first.get_or_insert(e);
        }
        let write = (m.isrdmsr == 0).then_some(m.msrdata);
        run.push(ms_op(m.cpu.into(), m.msr, write), GFP_KERNEL_ACCOUNT)?;
        ms.push(m, GFP_KERNEL_ACCOUNT)?;
    }
    if first.is_none() {
        let caller = Caller::new(access, Some(&me.rules));
        match accept::run_in_kernel(&mut run, caller) {
            Ok(_) => {
                for (m, op) in ms.iter_mut().zip(run.iter()) {
                    if op.status != 0 {
                        m.err = op.status;
                        first.get_or_insert(Error::from_errno(op.status));
                    } else if m.isrdmsr != 0 {
                        m.msrdata = op.val[0];
                    }
                }
            }
            // Refused as a whole (the write checks): the op to blame gets it.
            Err(r) => {
                if let Some(m) = ms.get_mut(r.index as usize) {
                    m.err = r.err.to_errno();
                }
                first = Some(r.err);
            }
        }
    }
    let copied = writer.write_slice(AsBytes::as_bytes(&ms[..]));
    match first {
        Some(e) => Err(e),
        None => copied,
    }
}

/// msr-safe's checks of one op, before any runs: the CPU (`ENXIO`), the MSR
/// listed (`EACCES`), a write to a read-only one (`EROFS`); records the
/// write mask in `wmask`.
fn check_op(me: &MsFile, m: &mut MsOp) -> Result {
    if !batch::cpu_online_now(m.cpu.into()) {
        return Err(ENXIO);
    }
    let mask = me.rules.mask(m.msr).ok_or(EACCES)?;
    m.wmask = mask;
    if m.isrdmsr == 0 && mask == 0 {
        return Err(EROFS);
    }
    Ok(())
}

/// Registers the nodes if `msr_safe=1` (process context, module init, after
/// the allowlist exists).
pub(crate) fn init() -> Result {
    // SAFETY: No preconditions; module init.
    kernel::error::to_result(unsafe { sys::msrbatch_ms_init() })
}

/// Removes the nodes, if they were registered (module exit).
pub(crate) fn exit() {
    // SAFETY: No preconditions; module exit (or a failed init).
    unsafe { sys::msrbatch_ms_exit() }
}
