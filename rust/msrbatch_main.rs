// SPDX-License-Identifier: GPL-2.0

//! msrbatch: batched, per-CPU atomic access to x86 MSRs, performance counters,
//! the TSC and CPUID.
//!
//! `/dev/msrbatch` takes one ioctl, `MSRBATCH_IOC_BATCH`, whose argument points
//! to an array of ops, each naming the CPU it runs on. Every CPU's ops run in
//! array order, with interrupts off, in one cross-call; the CPUs of one batch
//! run concurrently. Every op gets its own status; a faulting instruction is an
//! `-EIO` for that op, never an oops. The ABI is `include/uapi/linux/msrbatch.h`
//! and `Documentation/abi.md`.
//!
//! Security follows `arch/x86/kernel/msr.c`: a descriptor opened with
//! `CAP_SYS_RAWIO` may do everything; one opened without (the node's mode
//! decides who may open) only what the allowlist in force at open allows
//! (`allowlist.rs`, loaded through `/dev/msrbatch_allowlist`). A batch needs a
//! descriptor opened for reading, and one that writes also one opened for
//! writing (`EBADF`); writes are refused under `LOCKDOWN_MSR` and when the
//! `allow_writes` parameter is `off` (`EPERM`), logged when it is `default`,
//! and taint the kernel once one has run.

use core::mem::MaybeUninit;
use kernel::{
    bindings,
    fs::File,
    ioctl::{_IOC_NR, _IOC_SIZE, _IOC_TYPE, _IO, _IOR, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

mod allowlist;
mod batch;
mod glue;
mod insn;
#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
mod pce;
mod uapi;

use uapi::{Batch, Info, Op};

const MAGIC: u32 = 0xB9;
const IOC_INFO: u32 = _IOR::<Info>(MAGIC, 0x00);
const IOC_BATCH: u32 = _IOWR::<Batch>(MAGIC, 0x01);
const IOC_PCE_GRANT: u32 = _IO(MAGIC, 0x10);
const IOC_PCE_REVOKE: u32 = _IO(MAGIC, 0x11);

module! {
    type: MsrBatchModule,
    name: "msrbatch",
    authors: ["The msrbatch developers"],
    description: "Batched, per-CPU atomic x86 MSR, PMC, TSC and CPUID access",
    license: "GPL",
}

/// The module version; keep in step with [`MODINFO_VERSION`] and Cargo.toml.
const VERSION: &str = "0.1.0";

/// `modinfo` version field (the `module!` macro has none).
#[cfg(MODULE)]
#[link_section = ".modinfo"]
#[used]
static MODINFO_VERSION: [u8; 14] = *b"version=0.1.0\0";

#[pin_data]
struct MsrBatchModule {
    // Dropped in this order at unload: the devices first, then what they used.
    #[pin]
    _miscdev: MiscDeviceRegistration<MsrBatchFile>,
    #[pin]
    _allowlist_dev: MiscDeviceRegistration<allowlist::AllowlistFile>,
    _globals: Globals,
}

impl kernel::InPlaceModule for MsrBatchModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("msrbatch {VERSION}: ABI {}\n", uapi::ABI_VERSION);
        // Initialised in this order; if registering fails, `_globals` is dropped.
        try_pin_init!(Self {
            _globals: Globals::new(),
            _miscdev <- MiscDeviceRegistration::register(MiscDeviceOptions {
                name: c"msrbatch",
            }),
            _allowlist_dev <- MiscDeviceRegistration::register(MiscDeviceOptions {
                name: c"msrbatch_allowlist",
            }),
        })
    }
}

/// Module-wide state besides the devices: the allowlist in force, perf's
/// rdpmc policy reader and the PCE grant registry and reaper.
struct Globals;

impl Globals {
    fn new() -> Self {
        // SAFETY: Once, in module init, before the devices exist.
        unsafe { allowlist::init() };
        #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
        // SAFETY: Once, in module init, before the device exists.
        unsafe {
            pce::init_registry()
        };
        glue::rdpmc_policy_init();
        Globals
    }
}

impl Drop for Globals {
    fn drop(&mut self) {
        // No grant exists (each holds a module reference), but the reaper
        // that freed the last one may still be returning.
        #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
        pce::exit();
        glue::rdpmc_policy_exit();
        allowlist::exit();
    }
}

/// Per-open state: what the descriptor may do, fixed at open. (PCE grants
/// record the `struct file` that made them, see [`file_id`].)
struct MsrBatchFile {
    /// `None`: opened with `CAP_SYS_RAWIO`, everything. Otherwise the
    /// allowlist in force at open.
    rules: Option<allowlist::Snapshot>,
}

/// An open file's identity while it is open, as file-bound grants record it.
fn file_id(file: &File) -> usize {
    file.as_ptr() as usize
}

/// What the descriptor was opened for (`O_ACCMODE`, as `FMODE_READ` and
/// `FMODE_WRITE` are derived from it).
#[derive(Clone, Copy)]
struct Access {
    read: bool,
    write: bool,
}

impl Access {
    fn of(file: &File) -> Self {
        let mode = file.flags() & bindings::O_ACCMODE;
        Access {
            read: mode == bindings::O_RDONLY || mode == bindings::O_RDWR,
            write: mode == bindings::O_WRONLY || mode == bindings::O_RDWR,
        }
    }
}

#[vtable]
impl MiscDevice for MsrBatchFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        let rules = (!has_rawio()).then(allowlist::snapshot);
        Ok(KBox::pin(MsrBatchFile { rules }, GFP_KERNEL_ACCOUNT)?)
    }

    fn release(this: Pin<KBox<Self>>, file: &File) {
        #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
        pce::release_file(file_id(file));
        drop(this);
    }

    fn ioctl(this: Pin<&MsrBatchFile>, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let access = Access::of(file);
        let rules = this.get_ref().rules.as_ref();
        match cmd {
            IOC_INFO => info(arg),
            IOC_BATCH => run_batch(arg, access, rules),
            // Without CAP_SYS_RAWIO, only with the allowlist's `allow pce`.
            IOC_PCE_GRANT if rules.is_some_and(|r| !r.allows_pce()) => Err(EPERM),
            IOC_PCE_GRANT => pce_grant(file, arg, access).map(|()| 0),
            IOC_PCE_REVOKE if arg == 0 => pce_revoke().map(|()| 0),
            IOC_PCE_REVOKE => Err(EINVAL),
            _ => Err(ENOTTY),
        }
    }
}

#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
fn pce_grant(file: &File, arg: usize, access: Access) -> Result {
    let binding = match arg {
        0 => pce::Binding::File(file_id(file)),
        uapi::PCE_F_THREAD => pce::Binding::Thread,
        _ => return Err(EINVAL),
    };
    if !access.write {
        return Err(EBADF);
    }
    pce::grant(binding, <MsrBatchModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr())
}

/// Without preempt notifiers a grant could not follow the thread.
#[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
fn pce_grant(_file: &File, _arg: usize, _access: Access) -> Result {
    pr_info_once!("PCE grants need a kernel with CONFIG_PREEMPT_NOTIFIERS\n");
    Err(EOPNOTSUPP)
}

#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
fn pce_revoke() -> Result {
    pce::revoke()
}

#[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
fn pce_revoke() -> Result {
    Err(EOPNOTSUPP)
}

/// Whether the caller holds `CAP_SYS_RAWIO`.
fn has_rawio() -> bool {
    // SAFETY: `capable` may be called from process context at any time.
    unsafe { bindings::capable(bindings::CAP_SYS_RAWIO as i32) }
}

/// Whether the kernel's lockdown forbids MSR writes.
fn msr_writes_locked_down() -> bool {
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

fn info(arg: usize) -> Result<isize> {
    let info = Info {
        version: uapi::ABI_VERSION,
        max_ops: uapi::MAX_OPS,
        max_delay_ns: uapi::MAX_DELAY_NS as u32,
        max_cpu_delay_ns: uapi::MAX_CPU_DELAY_NS as u32,
        ops_supported: (1u64 << (uapi::opcode::MAX + 1)) - 2,
        flags_supported: uapi::F_ALL,
        max_cpu_busy_ns: uapi::MAX_CPU_BUSY_NS as u32,
        ..Info::default()
    };
    UserSlice::new(UserPtr::from_addr(arg), size_of::<Info>())
        .writer()
        .write(&info)?;
    Ok(0)
}

fn run_batch(arg: usize, access: Access, rules: Option<&allowlist::Snapshot>) -> Result<isize> {
    let (mut hdr_reader, mut hdr_writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<Batch>()).reader_writer();
    let mut hdr: Batch = hdr_reader.read()?;

    let (ret, nr_failed, err_index, out_flags) = match run_checked(&hdr, access, rules) {
        Ok(Ran { nr_failed, copied: true }) => (Ok(0), nr_failed, uapi::NO_INDEX, uapi::OUT_RAN),
        // The ops ran but their results could not be copied back (another
        // thread unmapped or write-protected the array meanwhile): never
        // EFAULT, which says that nothing ran.
        Ok(Ran { nr_failed, copied: false }) => (Err(ENOTRECOVERABLE), nr_failed, uapi::NO_INDEX, uapi::OUT_RAN),
        // EFAULT on the ops array leaves the header alone, like any EFAULT.
        Err(r) if r.err == EFAULT => return Err(EFAULT),
        Err(r) => (Err(r.err), 0, r.index, 0),
    };
    hdr.nr_failed = nr_failed;
    hdr.err_index = err_index;
    hdr.out_flags = out_flags;
    match hdr_writer.write(&hdr) {
        Err(_) if out_flags & uapi::OUT_RAN != 0 => Err(ENOTRECOVERABLE),
        Err(e) => Err(e),
        Ok(()) => ret,
    }
}

/// Batches of up to this many ops are copied to the stack, not to the heap.
const INLINE_OPS: usize = 16;

/// Copies `dst.len()` ops in from user space, straight into uninitialised
/// memory (no zero-fill pass: the copy is the batch's biggest cost per op).
fn read_ops(ptr: UserPtr, dst: &mut [MaybeUninit<Op>]) -> Result<&mut [Op]> {
    // SAFETY: `dst` is `dst.len()` `MaybeUninit<Op>`, i.e. that many times
    // `size_of::<Op>()` bytes that may be uninitialised, which is what
    // `MaybeUninit<u8>` allows.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<MaybeUninit<u8>>(), size_of_val(dst))
    };
    UserSlice::new(ptr, bytes.len()).reader().read_raw(bytes)?;
    // SAFETY: `read_raw` succeeded, so every op is initialised, and any bit
    // pattern is a valid `Op` (`FromBytes`).
    Ok(unsafe { &mut *(core::ptr::from_mut(dst) as *mut [Op]) })
}

/// Copies `ops` out to the user's array at `ptr`.
fn write_ops(ptr: UserPtr, ops: &[Op]) -> Result {
    UserSlice::new(ptr, size_of_val(ops))
        .writer()
        .write_slice(AsBytes::as_bytes(ops))
}

/// A batch that ran.
struct Ran {
    /// Ops whose status is not 0.
    nr_failed: u32,
    /// The results reached the caller's array.
    copied: bool,
}

/// The checks a batch that writes must pass, in msr.c's order: a descriptor
/// open for writing (`EBADF`), no lockdown (`EPERM`), `allow_writes` (`EPERM`).
fn check_writes(ops: &[Op], plan: &batch::Plan, access: Access) -> Result<(), batch::Rejected> {
    let Some(first) = plan.first_write else {
        return Ok(());
    };
    let refuse = |err| batch::Rejected { err, index: first };
    if !access.write {
        return Err(refuse(EBADF));
    }
    if msr_writes_locked_down() {
        return Err(refuse(EPERM));
    }
    let msr = ops.get(first as usize).map_or(0, |op| op.reg);
    glue::filter_writes(msr, plan.nr_writes).map_err(refuse)
}

/// Validates, runs and copies back one batch.
fn run_checked(hdr: &Batch, access: Access, rules: Option<&allowlist::Snapshot>) -> Result<Ran, batch::Rejected> {
    batch::check_header(hdr)?;
    // Every batch returns what it read: it needs a descriptor open for reading.
    if !access.read {
        return Err(EBADF.into());
    }
    let ptr = UserPtr::from_addr(usize::try_from(hdr.ops).map_err(|_| EFAULT)?);
    let n = hdr.nr_ops as usize;
    if n <= INLINE_OPS {
        let mut buf = [const { MaybeUninit::<Op>::uninit() }; INLINE_OPS];
        let ops = read_ops(ptr, &mut buf[..n])?;
        run_ops(hdr, access, rules, ptr, ops)
    } else {
        let mut heap = KVVec::<Op>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        let ops = read_ops(ptr, &mut heap.spare_capacity_mut()[..n])?;
        run_ops(hdr, access, rules, ptr, ops)
    }
}

/// Validates and runs `ops`, read from `ptr`, and copies them back. With
/// `rules` (a descriptor opened without `CAP_SYS_RAWIO`), every op must be
/// inside them, and writes are masked.
fn run_ops(
    hdr: &Batch,
    access: Access,
    rules: Option<&allowlist::Snapshot>,
    ptr: UserPtr,
    ops: &mut [Op],
) -> Result<Ran, batch::Rejected> {
    let mut plan = batch::plan(ops)?;
    if let Some(r) = rules {
        r.check(ops)?;
    }
    check_writes(ops, &plan, access)?;
    if plan.has_writes() {
        // Make sure the results can be copied back before anything is
        // written: a batch whose array is not writable fails with EFAULT and
        // changes nothing. Writing back the bytes just read leaves the array
        // as it was. (A batch that only reads changes nothing either way.)
        write_ops(ptr, ops)?;
    }
    // Masked writes become the RMWMSRs the rules mean; the plan is made
    // again from the ops that will run.
    let masked = match rules {
        Some(r) if plan.has_writes() => Some(r.mask_writes(ops)?),
        _ => None,
    };
    if masked.as_ref().is_some_and(|m| !m.is_empty()) {
        plan = batch::plan(ops)?;
    }
    let stop = hdr.flags & uapi::F_STOP_ON_ERROR != 0;
    // SAFETY: `check_writes` allowed the batch's writes (and, without
    // CAP_SYS_RAWIO, the rules did, each within its write mask).
    let nr_failed = unsafe { batch::execute(ops, &plan, stop) }?;
    if plan.has_writes() && ops.iter().any(|op| batch::is_write(op) && op.status == 0) {
        // Like arch/x86/kernel/msr.c: a raw MSR write takes the CPU out of
        // spec; only a write that ran taints.
        // SAFETY: `add_taint` may be called from process context.
        unsafe { bindings::add_taint(bindings::TAINT_CPU_OUT_OF_SPEC, bindings::lockdep_ok_LOCKDEP_STILL_OK) };
    }
    if let Some(m) = masked {
        m.restore(ops);
    }
    let copied = write_ops(ptr, ops).is_ok();
    Ok(Ran { nr_failed, copied })
}

// Silence "unused" for the decoding helpers until another ioctl needs them.
const _: () = assert!(_IOC_TYPE(IOC_BATCH) == MAGIC && _IOC_NR(IOC_BATCH) == 1);
const _: () = assert!(_IOC_SIZE(IOC_BATCH) == size_of::<Batch>());
