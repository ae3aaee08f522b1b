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
//! batch that writes is refused under `LOCKDOWN_MSR` and taints the kernel.

use kernel::{
    bindings,
    fs::File,
    ioctl::{_IOC_NR, _IOC_SIZE, _IOC_TYPE, _IO, _IOR, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    new_mutex,
    prelude::*,
    sync::Mutex,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice},
};

mod batch;
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
    #[pin]
    _miscdev: MiscDeviceRegistration<MsrBatchFile>,
}

impl kernel::InPlaceModule for MsrBatchModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("msrbatch {VERSION}: ABI {}\n", uapi::ABI_VERSION);
        try_pin_init!(Self {
            _miscdev <- MiscDeviceRegistration::register(MiscDeviceOptions {
                name: c"msrbatch",
            }),
        })
    }
}

/// Per-open state: the PCE grants made through this file.
#[pin_data]
struct MsrBatchFile {
    #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
    #[pin]
    grants: Mutex<KVec<kernel::sync::Arc<pce::Grant>>>,
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
                #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
                grants <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    fn release(this: Pin<KBox<Self>>, _file: &File) {
        #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
        {
            let grants = core::mem::take(&mut *this.grants.lock());
            for g in grants {
                if g.is_current() {
                    g.end_on_current();
                } else {
                    g.end_from_other_thread();
                }
            }
        }
        drop(this);
    }

    fn ioctl(this: Pin<&MsrBatchFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            IOC_INFO => info(arg),
            IOC_BATCH => run_batch(arg),
            IOC_PCE_GRANT if arg == 0 => this.pce_grant().map(|()| 0),
            IOC_PCE_REVOKE if arg == 0 => this.pce_revoke().map(|()| 0),
            IOC_PCE_GRANT | IOC_PCE_REVOKE => Err(EINVAL),
            _ => Err(ENOTTY),
        }
    }
}

impl MsrBatchFile {
    #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
    fn pce_grant(&self) -> Result {
        let mut grants = self.grants.lock();
        // Grants of threads that have exited are over: free them now.
        grants.retain(|g| !g.is_dead());
        if grants.iter().any(|g| g.is_current()) {
            return Err(EBUSY);
        }
        grants.reserve(1, GFP_KERNEL)?;
        let g = pce::Grant::new(<MsrBatchModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr())?;
        grants.push_within_capacity(g).map_err(|_| ENOMEM)
    }

    #[cfg(CONFIG_PREEMPT_NOTIFIERS)]
    fn pce_revoke(&self) -> Result {
        let mut grants = self.grants.lock();
        let i = grants.iter().position(|g| g.is_current()).ok_or(ENOENT)?;
        let g = grants.remove(i).map_err(|_| ENOENT)?;
        g.end_on_current();
        Ok(())
    }

    /// Without preempt notifiers a grant could not follow the thread.
    #[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
    fn pce_grant(&self) -> Result {
        pr_info_once!("PCE grants need a kernel with CONFIG_PREEMPT_NOTIFIERS\n");
        Err(EOPNOTSUPP)
    }

    #[cfg(not(CONFIG_PREEMPT_NOTIFIERS))]
    fn pce_revoke(&self) -> Result {
        Err(EOPNOTSUPP)
    }
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
        ..Info::default()
    };
    UserSlice::new(UserPtr::from_addr(arg), size_of::<Info>())
        .writer()
        .write(&info)?;
    Ok(0)
}

fn run_batch(arg: usize) -> Result<isize> {
    let (mut hdr_reader, mut hdr_writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<Batch>()).reader_writer();
    let mut hdr: Batch = hdr_reader.read()?;

    let outcome = run_checked(&hdr);
    let (ret, nr_failed, err_index) = match outcome {
        Ok(nr_failed) => (Ok(0), nr_failed, uapi::NO_INDEX),
        // EFAULT on the ops array leaves the header alone, like any EFAULT.
        Err(r) if r.err == EFAULT => return Err(EFAULT),
        Err(r) => (Err(r.err), 0, r.index),
    };
    hdr.nr_failed = nr_failed;
    hdr.err_index = err_index;
    hdr_writer.write(&hdr)?;
    ret
}

/// Copies `n` ops in from user space, straight into uninitialised memory
/// (no zero-fill pass: the copy is the batch's biggest cost per op).
fn read_ops(ptr: UserPtr, n: usize) -> Result<KVVec<Op>> {
    let mut ops = KVVec::<Op>::with_capacity(n, GFP_KERNEL)?;
    let spare = &mut ops.spare_capacity_mut()[..n];
    // SAFETY: `spare` is `n` `MaybeUninit<Op>`, i.e. `n * size_of::<Op>()`
    // bytes that may be uninitialised, which is what `MaybeUninit<u8>` allows.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<core::mem::MaybeUninit<u8>>(), n * size_of::<Op>())
    };
    UserSlice::new(ptr, bytes.len()).reader().read_raw(bytes)?;
    // SAFETY: `read_raw` succeeded, so all `n` ops are initialised, and any
    // bit pattern is a valid `Op` (`FromBytes`).
    unsafe { ops.inc_len(n) };
    Ok(ops)
}

/// Copies `ops` out to the user's array at `ptr`.
fn write_ops(ptr: UserPtr, ops: &[Op]) -> Result {
    UserSlice::new(ptr, size_of_val(ops))
        .writer()
        .write_slice(AsBytes::as_bytes(ops))
}

/// Validates, runs and copies back one batch; returns the number of failed ops.
fn run_checked(hdr: &Batch) -> Result<u32, batch::Rejected> {
    batch::check_header(hdr)?;
    let ptr = UserPtr::from_addr(usize::try_from(hdr.ops).map_err(|_| EFAULT)?);
    let mut ops = read_ops(ptr, hdr.nr_ops as usize)?;

    let plan = batch::plan(&ops)?;
    if plan.has_writes {
        // Make sure the results can be copied back before anything is
        // written: a batch whose array is not writable fails with EFAULT and
        // changes nothing. Writing back the bytes just read leaves the array
        // as it was. (A batch that only reads changes nothing either way.)
        write_ops(ptr, &ops)?;
        if msr_writes_locked_down() {
            return Err(EPERM.into());
        }
        // Like arch/x86/kernel/msr.c: a raw MSR write takes the CPU out of spec.
        // SAFETY: `add_taint` may be called from process context.
        unsafe { bindings::add_taint(bindings::TAINT_CPU_OUT_OF_SPEC, bindings::lockdep_ok_LOCKDEP_STILL_OK) };
    }
    let stop = hdr.flags & uapi::F_STOP_ON_ERROR != 0;
    let nr_failed = batch::execute(&mut ops, &plan, stop)?;
    write_ops(ptr, &ops)?;
    Ok(nr_failed)
}

// Silence "unused" for the decoding helpers until another ioctl needs them.
const _: () = assert!(_IOC_TYPE(IOC_BATCH) == MAGIC && _IOC_NR(IOC_BATCH) == 1);
const _: () = assert!(_IOC_SIZE(IOC_BATCH) == size_of::<Batch>());
