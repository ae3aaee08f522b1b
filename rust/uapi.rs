// SPDX-License-Identifier: GPL-2.0

//! The module's view of `include/uapi/linux/msrbatch.h`.
//!
//! The C header is the definition. bindgen turns it into Rust at build time
//! (`bindings_helper.h`, `rust/Kbuild`, [`crate::sys`]): the structures are
//! the generated ones, and every constant here is the header's value, typed
//! as the module uses it; a value that does not fit its type fails the build.
//! The ioctl numbers are the header's own `_IOR`/`_IOWR`/`_IO` definitions,
//! evaluated by libclang. What this file adds: the names the rest of the
//! module uses, the byte-copy traits, and assertions of what the module
//! assumes of the header (each flag is a bit of its own; each ioctl's size
//! field is its argument's size).

use crate::sys;
use core::mem::{offset_of, size_of};
use kernel::ioctl::{_IOC_SIZE, _IOC_TYPE};
use kernel::transmute::{AsBytes, FromBytes};

/// `v`, which must fit a `u16` (checked at compile time where `v` is const).
const fn u16_of(v: u32) -> u16 {
    assert!(v <= u16::MAX as u32);
    v as u16
}

/// `MSRBATCH_ABI_VERSION`.
pub(crate) const ABI_VERSION: u32 = sys::MSRBATCH_ABI_VERSION;
/// `MSRBATCH_MAX_OPS`.
pub(crate) const MAX_OPS: u32 = sys::MSRBATCH_MAX_OPS;
/// `MSRBATCH_MAX_DELAY_NS`.
pub(crate) const MAX_DELAY_NS: u64 = sys::MSRBATCH_MAX_DELAY_NS as u64;
/// `MSRBATCH_MAX_CPU_DELAY_NS`.
pub(crate) const MAX_CPU_DELAY_NS: u64 = sys::MSRBATCH_MAX_CPU_DELAY_NS as u64;
/// `MSRBATCH_MAX_POLL_NS`.
pub(crate) const MAX_POLL_NS: u64 = sys::MSRBATCH_MAX_POLL_NS as u64;
/// `MSRBATCH_MAX_CPU_BUSY_NS`.
pub(crate) const MAX_CPU_BUSY_NS: u64 = sys::MSRBATCH_MAX_CPU_BUSY_NS as u64;

/// `MSRBATCH_OP_*` codes.
pub(crate) mod opcode {
    use super::{sys, u16_of};
    pub(crate) const RDMSR: u16 = u16_of(sys::MSRBATCH_OP_RDMSR);
    pub(crate) const WRMSR: u16 = u16_of(sys::MSRBATCH_OP_WRMSR);
    pub(crate) const RMWMSR: u16 = u16_of(sys::MSRBATCH_OP_RMWMSR);
    pub(crate) const RDPMC: u16 = u16_of(sys::MSRBATCH_OP_RDPMC);
    pub(crate) const RDTSC: u16 = u16_of(sys::MSRBATCH_OP_RDTSC);
    pub(crate) const RDTSCP: u16 = u16_of(sys::MSRBATCH_OP_RDTSCP);
    pub(crate) const CPUID: u16 = u16_of(sys::MSRBATCH_OP_CPUID);
    pub(crate) const DELAY: u16 = u16_of(sys::MSRBATCH_OP_DELAY);
    pub(crate) const RDCR4: u16 = u16_of(sys::MSRBATCH_OP_RDCR4);
    pub(crate) const POLL: u16 = u16_of(sys::MSRBATCH_OP_POLL);
    pub(crate) const MAX: u16 = u16_of(sys::MSRBATCH_OP_MAX);

    // A new op code in the header comes with its implementation: `check_op`,
    // `run_op` and INFO's `ops_supported` know the codes up to POLL, and
    // would otherwise accept (and advertise) a code they cannot run.
    const _: () = assert!(MAX == POLL);
}

/// `MSRBATCH_POLL_*`: a POLL op's flags.
pub(crate) mod poll {
    use super::{sys, u16_of};
    pub(crate) const F_EQUAL: u16 = u16_of(sys::MSRBATCH_POLL_F_EQUAL);
    pub(crate) const F_RDPMC: u16 = u16_of(sys::MSRBATCH_POLL_F_RDPMC);
    pub(crate) const F_TSC: u16 = u16_of(sys::MSRBATCH_POLL_F_TSC);
    pub(crate) const F_COUNT: u16 = u16_of(sys::MSRBATCH_POLL_F_COUNT);
    pub(crate) const F_ALL: u16 = u16_of(sys::MSRBATCH_POLL_F_ALL);
    /// `MSRBATCH_POLL_TIMEOUT_SHIFT`.
    pub(crate) const TIMEOUT_SHIFT: u32 = sys::MSRBATCH_POLL_TIMEOUT_SHIFT;

    // The flags are bits of their own below the timeout's field, which holds
    // the longest timeout in microseconds.
    const _: () = assert!(F_ALL == F_EQUAL | F_RDPMC | F_TSC | F_COUNT);
    const _: () = assert!(F_EQUAL & F_RDPMC == 0 && (F_EQUAL | F_RDPMC) & F_TSC == 0);
    const _: () = assert!((F_EQUAL | F_RDPMC | F_TSC) & F_COUNT == 0);
    const _: () = assert!((F_ALL as u32) < 1 << TIMEOUT_SHIFT);
    const _: () = assert!(super::MAX_POLL_NS / 1000 < 1 << (16 - TIMEOUT_SHIFT));

    /// The timeout of a POLL whose flags are `flags`, in nanoseconds.
    pub(crate) const fn timeout_ns(flags: u16) -> u64 {
        (flags >> TIMEOUT_SHIFT) as u64 * 1000
    }
}

/// `MSRBATCH_F_STOP_ON_ERROR`.
pub(crate) const F_STOP_ON_ERROR: u32 = sys::MSRBATCH_F_STOP_ON_ERROR;
/// `MSRBATCH_F_SYNC_START`.
pub(crate) const F_SYNC_START: u32 = sys::MSRBATCH_F_SYNC_START;
/// `MSRBATCH_F_TIMESTAMPS`.
pub(crate) const F_TIMESTAMPS: u32 = sys::MSRBATCH_F_TIMESTAMPS;
/// `MSRBATCH_F_ALL`.
pub(crate) const F_ALL: u32 = sys::MSRBATCH_F_ALL;
/// `MSRBATCH_SYNC_TIMEOUT_NS`.
pub(crate) const SYNC_TIMEOUT_NS: u64 = sys::MSRBATCH_SYNC_TIMEOUT_NS as u64;
/// `MSRBATCH_OUT_RAN`.
pub(crate) const OUT_RAN: u32 = sys::MSRBATCH_OUT_RAN;
/// `MSRBATCH_PCE_F_THREAD`.
pub(crate) const PCE_F_THREAD: usize = sys::MSRBATCH_PCE_F_THREAD as usize;
/// `MSRBATCH_MAX_PREPARED`.
pub(crate) const MAX_PREPARED: usize = sys::MSRBATCH_MAX_PREPARED as usize;
/// `MSRBATCH_PREPARED_STRIDE`.
pub(crate) const PREPARED_STRIDE: usize = sys::MSRBATCH_PREPARED_STRIDE as usize;
/// `MSRBATCH_NO_INDEX`.
pub(crate) const NO_INDEX: u32 = sys::MSRBATCH_NO_INDEX;

// Every flag is one bit of its own, and `F_ALL` is exactly their union.
const _: () = assert!(F_STOP_ON_ERROR.is_power_of_two() && F_SYNC_START.is_power_of_two());
const _: () = assert!(F_TIMESTAMPS.is_power_of_two());
const _: () = assert!(F_STOP_ON_ERROR & F_SYNC_START == 0 && (F_STOP_ON_ERROR | F_SYNC_START) & F_TIMESTAMPS == 0);
const _: () = assert!(F_ALL == F_STOP_ON_ERROR | F_SYNC_START | F_TIMESTAMPS);

/// `MSRBATCH_IOC_INFO`.
pub(crate) const IOC_INFO: u32 = sys::MSRBATCH_IOC_INFO;
/// `MSRBATCH_IOC_BATCH`.
pub(crate) const IOC_BATCH: u32 = sys::MSRBATCH_IOC_BATCH;
/// `MSRBATCH_IOC_PREPARE`.
pub(crate) const IOC_PREPARE: u32 = sys::MSRBATCH_IOC_PREPARE;
/// `MSRBATCH_IOC_RUN`.
pub(crate) const IOC_RUN: u32 = sys::MSRBATCH_IOC_RUN;
/// `MSRBATCH_IOC_UNPREPARE`.
pub(crate) const IOC_UNPREPARE: u32 = sys::MSRBATCH_IOC_UNPREPARE;
/// `MSRBATCH_IOC_RESTORE_ON_CLOSE`.
pub(crate) const IOC_RESTORE_ON_CLOSE: u32 = sys::MSRBATCH_IOC_RESTORE_ON_CLOSE;
/// `MSRBATCH_IOC_RESTORE_NOW`.
pub(crate) const IOC_RESTORE_NOW: u32 = sys::MSRBATCH_IOC_RESTORE_NOW;
/// `MSRBATCH_IOC_SAMPLE`.
pub(crate) const IOC_SAMPLE: u32 = sys::MSRBATCH_IOC_SAMPLE;
/// `MSRBATCH_IOC_PCE_GRANT`.
pub(crate) const IOC_PCE_GRANT: u32 = sys::MSRBATCH_IOC_PCE_GRANT;
/// `MSRBATCH_IOC_PCE_REVOKE`.
pub(crate) const IOC_PCE_REVOKE: u32 = sys::MSRBATCH_IOC_PCE_REVOKE;
/// `MSRBATCH_SAMPLER_IOC_STOP`.
pub(crate) const SAMPLER_IOC_STOP: u32 = sys::MSRBATCH_SAMPLER_IOC_STOP;

/// `struct msrbatch_op`.
pub(crate) type Op = sys::msrbatch_op;
/// `struct msrbatch_batch`.
pub(crate) type Batch = sys::msrbatch_batch;
/// `struct msrbatch_info`.
pub(crate) type Info = sys::msrbatch_info;
/// `struct msrbatch_prepare`.
pub(crate) type Prepare = sys::msrbatch_prepare;
/// `struct msrbatch_result`.
pub(crate) type OpResult = sys::msrbatch_result;
/// `struct msrbatch_sample_req`.
pub(crate) type SampleReq = sys::msrbatch_sample_req;
/// `struct msrbatch_ring`: the sampler mapping's first page. The kernel
/// never makes a reference to it (user space writes `data_tail` at any time):
/// it reaches each field through its offset.
pub(crate) type RingPage = sys::msrbatch_ring;

// Each ioctl's number says how many bytes its argument has: the structure
// the module copies.
const _: () = assert!(_IOC_TYPE(IOC_BATCH) == sys::MSRBATCH_IOC_MAGIC);
const _: () = assert!(_IOC_SIZE(IOC_INFO) == size_of::<Info>());
const _: () = assert!(_IOC_SIZE(IOC_BATCH) == size_of::<Batch>());
const _: () = assert!(_IOC_SIZE(IOC_PREPARE) == size_of::<Prepare>());
const _: () = assert!(_IOC_SIZE(IOC_SAMPLE) == size_of::<SampleReq>());

// The byte-copy traits: each of these structures is `repr(C)` and every byte
// of it belongs to a field of integer type, as bindgen makes any padding an
// explicit byte-array field (`--explicit-padding`, `rust/Kbuild`); so every bit
// pattern is a valid value and no byte is uninitialised. None has interior
// mutability.

// SAFETY: `Op` is as stated above.
unsafe impl FromBytes for Op {}
// SAFETY: As above.
unsafe impl AsBytes for Op {}
// SAFETY: `Batch` is as stated above.
unsafe impl FromBytes for Batch {}
// SAFETY: As above.
unsafe impl AsBytes for Batch {}
// SAFETY: `Info` is as stated above.
unsafe impl AsBytes for Info {}
// SAFETY: `Prepare` is as stated above.
unsafe impl FromBytes for Prepare {}
// SAFETY: As above.
unsafe impl AsBytes for Prepare {}
// SAFETY: `SampleReq` is as stated above.
unsafe impl FromBytes for SampleReq {}
// SAFETY: As above.
unsafe impl AsBytes for SampleReq {}

/// `MSRBATCH_SAMPLE_MIN_PERIOD_NS`.
pub(crate) const SAMPLE_MIN_PERIOD_NS: u64 = sys::MSRBATCH_SAMPLE_MIN_PERIOD_NS as u64;
/// `MSRBATCH_SAMPLE_MAX_PERIOD_NS`.
pub(crate) const SAMPLE_MAX_PERIOD_NS: u64 = sys::MSRBATCH_SAMPLE_MAX_PERIOD_NS;
/// `MSRBATCH_SAMPLE_MAX_OPS`.
pub(crate) const SAMPLE_MAX_OPS: usize = sys::MSRBATCH_SAMPLE_MAX_OPS as usize;
/// `MSRBATCH_SAMPLE_MAX_RING_PAGES`.
pub(crate) const SAMPLE_MAX_RING_PAGES: u32 = sys::MSRBATCH_SAMPLE_MAX_RING_PAGES;
/// `MSRBATCH_MAX_SAMPLERS`.
pub(crate) const MAX_SAMPLERS: u32 = sys::MSRBATCH_MAX_SAMPLERS;
/// `MSRBATCH_MAX_SAMPLERS_CONFINED`.
pub(crate) const MAX_SAMPLERS_CONFINED: u32 = sys::MSRBATCH_MAX_SAMPLERS_CONFINED;
/// `MSRBATCH_SAMPLE_MAX_OPS_PER_SEC`.
pub(crate) const SAMPLE_MAX_OPS_PER_SEC: u64 = sys::MSRBATCH_SAMPLE_MAX_OPS_PER_SEC as u64;
/// `MSRBATCH_RING_VERSION`.
pub(crate) const RING_VERSION: u32 = sys::MSRBATCH_RING_VERSION;
/// `MSRBATCH_RING_STOPPED`.
pub(crate) const RING_STOPPED: u32 = sys::MSRBATCH_RING_STOPPED;

/// `MSRBATCH_REC_*` record types.
pub(crate) mod rec {
    use super::sys;
    pub(crate) const PAD: u32 = sys::MSRBATCH_REC_PAD;
    pub(crate) const SAMPLE: u32 = sys::MSRBATCH_REC_SAMPLE;
    pub(crate) const LOST: u32 = sys::MSRBATCH_REC_LOST;
    pub(crate) const ONLINE: u32 = sys::MSRBATCH_REC_ONLINE;
    pub(crate) const OFFLINE: u32 = sys::MSRBATCH_REC_OFFLINE;
}

/// `struct msrbatch_record`'s size, and the offsets of the fields after it
/// in `struct msrbatch_rec_sample` (`seq`, `tsc`, `failed`, `val`) and
/// `struct msrbatch_rec_lost` / `struct msrbatch_rec_cpu`.
pub(crate) mod rec_layout {
    use super::{offset_of, size_of, sys};
    pub(crate) const HEADER: usize = size_of::<sys::msrbatch_record>();
    pub(crate) const SAMPLE_SEQ: usize = offset_of!(sys::msrbatch_rec_sample, seq);
    pub(crate) const SAMPLE_TSC: usize = offset_of!(sys::msrbatch_rec_sample, tsc);
    pub(crate) const SAMPLE_FAILED: usize = offset_of!(sys::msrbatch_rec_sample, failed);
    pub(crate) const SAMPLE_VAL: usize = offset_of!(sys::msrbatch_rec_sample, val);
    pub(crate) const LOST_LOST: usize = offset_of!(sys::msrbatch_rec_lost, lost);
    pub(crate) const LOST_SIZE: usize = size_of::<sys::msrbatch_rec_lost>();
    pub(crate) const CPU_SEQ: usize = offset_of!(sys::msrbatch_rec_cpu, seq);
    pub(crate) const CPU_TSC: usize = offset_of!(sys::msrbatch_rec_cpu, tsc);
    pub(crate) const CPU_SIZE: usize = size_of::<sys::msrbatch_rec_cpu>();
    /// Records start and end on this boundary (the header's "16-byte
    /// aligned").
    pub(crate) const ALIGN: usize = 16;
}
