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
//! Security follows `arch/x86/kernel/msr.c`: opening needs `CAP_SYS_RAWIO`; a
//! batch needs a descriptor opened for reading, and one that writes also one
//! opened for writing (`EBADF`); writes are refused under `LOCKDOWN_MSR` and
//! when the `allow_writes` parameter is `off` (`EPERM`), logged when it is
//! `default`, and taint the kernel once one has run.

use core::mem::MaybeUninit;
use kernel::{
    bindings,
    new_mutex,
    sync::Mutex,
    fs::File,
    ioctl::{_IOC_NR, _IOC_SIZE, _IOC_TYPE, _IO, _IOR, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

mod batch;
mod glue;
mod insn;
#[cfg(CONFIG_PREEMPT_NOTIFIERS)]
mod pce;
mod prepared;
mod uapi;

use uapi::{Batch, Info, Op};

const MAGIC: u32 = 0xB9;
const IOC_INFO: u32 = _IOR::<Info>(MAGIC, 0x00);
const IOC_BATCH: u32 = _IOWR::<Batch>(MAGIC, 0x01);
const IOC_PREPARE: u32 = _IOWR::<uapi::Prepare>(MAGIC, 0x02);
const IOC_RUN: u32 = _IO(MAGIC, 0x03);
const IOC_UNPREPARE: u32 = _IO(MAGIC, 0x04);
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
    // Dropped in this order at unload: the device first, then what it used.
    #[pin]
    _miscdev: MiscDeviceRegistration<MsrBatchFile>,
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
        })
    }
}

/// Module-wide state besides the device: perf's rdpmc policy reader and the
/// PCE grant registry and reaper.
struct Globals;

impl Globals {
    fn new() -> Self {
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
    }
}

/// Per-open state: the file's prepared batches. (PCE grants record the
/// `struct file` that made them, see [`file_id`].)
#[pin_data]
struct MsrBatchFile {
    #[pin]
    prepared: Mutex<prepared::Table>,
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
        if !has_rawio() {
            return Err(EPERM);
        }
        KBox::try_pin_init(
            try_pin_init!(MsrBatchFile {
                prepared <- new_mutex!(prepared::Table::new()),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    fn release(this: Pin<KBox<Self>>, file: &File) {
        #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
        pce::release_file(file_id(file));
        drop(this);
    }

    fn ioctl(this: Pin<&MsrBatchFile>, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let access = Access::of(file);
        match cmd {
            IOC_INFO => info(arg),
            IOC_BATCH => run_batch(arg, access),
            IOC_PREPARE => this.prepare(arg, access),
            IOC_RUN => this.run_prepared(arg, access),
            IOC_UNPREPARE => this.prepared.lock().remove(arg).map(|_| 0),
            IOC_PCE_GRANT => pce_grant(file, arg, access).map(|()| 0),
            IOC_PCE_REVOKE if arg == 0 => pce_revoke().map(|()| 0),
            IOC_PCE_REVOKE => Err(EINVAL),
            _ => Err(ENOTTY),
        }
    }

    fn mmap(this: Pin<&MsrBatchFile>, _file: &File, vma: &kernel::mm::virt::VmaNew) -> Result {
        // SAFETY: `vma` is a valid VMA being set up by `mmap()`.
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff } as usize;
        let p = this.prepared.lock().get(prepared::handle_of(pgoff)?).map_err(|_| EINVAL)?;
        p.mmap(vma)
    }
}

impl MsrBatchFile {
    /// `MSRBATCH_IOC_PREPARE`: validates and keeps a batch; returns 0.
    fn prepare(&self, arg: usize, access: Access) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<uapi::Prepare>()).reader_writer();
        let mut req: uapi::Prepare = reader.read()?;
        let hdr = Batch {
            version: req.version,
            flags: req.flags,
            nr_ops: req.nr_ops,
            ops: req.ops,
            ..Batch::default()
        };
        let made = (|| -> Result<(u32, u64), batch::Rejected> {
            if req.reserved != 0 {
                return Err(EINVAL.into());
            }
            batch::check_header(&hdr)?;
            if !access.read {
                return Err(EBADF.into());
            }
            let ptr = UserPtr::from_addr(usize::try_from(hdr.ops).map_err(|_| EFAULT)?);
            let n = hdr.nr_ops as usize;
            let mut ops = KVVec::<Op>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
            read_ops(ptr, &mut ops.spare_capacity_mut()[..n])?;
            // SAFETY: `read_ops` initialised the first `n` ops.
            unsafe { ops.inc_len(n) };
            let plan = batch::plan(&ops)?;
            check_writes(&ops, &plan, access)?;
            let p = prepared::Prepared::new(ops, plan, hdr.flags & uapi::F_STOP_ON_ERROR != 0)?;
            let size = p.mmap_size() as u64;
            let handle = self.prepared.lock().insert(p)?;
            Ok((handle, size))
        })();
        let ret = match made {
            Ok((handle, size)) => {
                req.handle = handle;
                req.mmap_offset = prepared::mmap_offset(handle);
                req.mmap_size = size;
                req.err_index = uapi::NO_INDEX;
                Ok(0)
            }
            Err(r) if r.err == EFAULT => return Err(EFAULT),
            Err(r) => {
                req.err_index = r.index;
                Err(r.err)
            }
        };
        if let Err(e) = writer.write(&req) {
            if ret.is_ok() {
                // The caller cannot learn the handle: do not keep the batch.
                let _ = self.prepared.lock().remove(req.handle as usize);
            }
            return Err(e);
        }
        ret
    }

    /// `MSRBATCH_IOC_RUN`: runs prepared batch `handle`; returns the number
    /// of failed ops.
    fn run_prepared(&self, handle: usize, access: Access) -> Result<isize> {
        let p = self.prepared.lock().get(handle)?;
        let nr_failed = p.run(|ops, plan| check_writes(ops, plan, access))?;
        Ok(nr_failed as isize)
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

fn run_batch(arg: usize, access: Access) -> Result<isize> {
    let (mut hdr_reader, mut hdr_writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<Batch>()).reader_writer();
    let mut hdr: Batch = hdr_reader.read()?;

    let (ret, nr_failed, err_index, out_flags) = match run_checked(&hdr, access) {
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
fn run_checked(hdr: &Batch, access: Access) -> Result<Ran, batch::Rejected> {
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
        run_ops(hdr, access, ptr, ops)
    } else {
        let mut heap = KVVec::<Op>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        let ops = read_ops(ptr, &mut heap.spare_capacity_mut()[..n])?;
        run_ops(hdr, access, ptr, ops)
    }
}

/// Like arch/x86/kernel/msr.c: a raw MSR write takes the CPU out of spec;
/// only a write that ran taints.
pub(crate) fn taint_if_written(ops: &[Op]) {
    if ops.iter().any(|op| batch::is_write(op) && op.status == 0) {
        // SAFETY: `add_taint` may be called from process context.
        unsafe { bindings::add_taint(bindings::TAINT_CPU_OUT_OF_SPEC, bindings::lockdep_ok_LOCKDEP_STILL_OK) };
    }
}

/// Validates and runs `ops`, read from `ptr`, and copies them back.
fn run_ops(hdr: &Batch, access: Access, ptr: UserPtr, ops: &mut [Op]) -> Result<Ran, batch::Rejected> {
    let plan = batch::plan(ops)?;
    check_writes(ops, &plan, access)?;
    if plan.has_writes() {
        // Make sure the results can be copied back before anything is
        // written: a batch whose array is not writable fails with EFAULT and
        // changes nothing. Writing back the bytes just read leaves the array
        // as it was. (A batch that only reads changes nothing either way.)
        write_ops(ptr, ops)?;
    }
    let stop = hdr.flags & uapi::F_STOP_ON_ERROR != 0;
    // SAFETY: `check_writes` allowed the batch's writes.
    let nr_failed = unsafe { batch::execute(ops, &plan, stop) }?;
    taint_if_written(ops);
    let copied = write_ops(ptr, ops).is_ok();
    Ok(Ran { nr_failed, copied })
}

// Silence "unused" for the decoding helpers until another ioctl needs them.
const _: () = assert!(_IOC_TYPE(IOC_BATCH) == MAGIC && _IOC_NR(IOC_BATCH) == 1);
const _: () = assert!(_IOC_SIZE(IOC_BATCH) == size_of::<Batch>());
