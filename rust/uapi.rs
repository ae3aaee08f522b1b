// SPDX-License-Identifier: GPL-2.0

//! The module's view of `include/uapi/linux/msrbatch.h`.
//!
//! The C header is the definition; these types mirror it field by field, and
//! the `const` assertions below pin every size and offset. The userspace crate
//! generates its types from the header with bindgen and a host test compares
//! both against the C compiler's layout, so the three cannot drift apart.

use core::mem::{offset_of, size_of};
use kernel::transmute::{AsBytes, FromBytes};

/// `MSRBATCH_ABI_VERSION`.
pub(crate) const ABI_VERSION: u32 = 1;
/// `MSRBATCH_MAX_OPS`.
pub(crate) const MAX_OPS: u32 = 65536;
/// `MSRBATCH_MAX_DELAY_NS`.
pub(crate) const MAX_DELAY_NS: u64 = 1_000_000;
/// `MSRBATCH_MAX_CPU_DELAY_NS`.
pub(crate) const MAX_CPU_DELAY_NS: u64 = 10_000_000;
/// `MSRBATCH_MAX_CPU_BUSY_NS`.
pub(crate) const MAX_CPU_BUSY_NS: u64 = 20_000_000;

/// `MSRBATCH_OP_*` codes.
pub(crate) mod opcode {
    pub(crate) const RDMSR: u16 = 1;
    pub(crate) const WRMSR: u16 = 2;
    pub(crate) const RMWMSR: u16 = 3;
    pub(crate) const RDPMC: u16 = 4;
    pub(crate) const RDTSC: u16 = 5;
    pub(crate) const RDTSCP: u16 = 6;
    pub(crate) const CPUID: u16 = 7;
    pub(crate) const DELAY: u16 = 8;
    pub(crate) const RDCR4: u16 = 9;
    pub(crate) const MAX: u16 = RDCR4;
}

/// `MSRBATCH_F_STOP_ON_ERROR`.
pub(crate) const F_STOP_ON_ERROR: u32 = 1 << 0;
/// `MSRBATCH_F_SYNC_START`.
pub(crate) const F_SYNC_START: u32 = 1 << 1;
/// `MSRBATCH_F_TIMESTAMPS`.
pub(crate) const F_TIMESTAMPS: u32 = 1 << 2;
/// `MSRBATCH_F_ALL`.
pub(crate) const F_ALL: u32 = F_STOP_ON_ERROR | F_SYNC_START | F_TIMESTAMPS;
/// `MSRBATCH_SYNC_TIMEOUT_NS`.
pub(crate) const SYNC_TIMEOUT_NS: u64 = 20_000_000;
/// `MSRBATCH_OUT_RAN`.
pub(crate) const OUT_RAN: u32 = 1 << 0;
/// `MSRBATCH_PCE_F_THREAD`.
pub(crate) const PCE_F_THREAD: usize = 1 << 0;
/// `MSRBATCH_PCE_F_INHERIT`.
pub(crate) const PCE_F_INHERIT: usize = 1 << 1;
/// `MSRBATCH_MAX_PREPARED`.
pub(crate) const MAX_PREPARED: usize = 64;
/// `MSRBATCH_PREPARED_STRIDE`.
pub(crate) const PREPARED_STRIDE: usize = 2 << 20;
/// `MSRBATCH_NO_INDEX`.
pub(crate) const NO_INDEX: u32 = u32::MAX;

/// `struct msrbatch_op`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) op: u16,
    pub(crate) flags: u16,
    pub(crate) cpu: u32,
    pub(crate) reg: u32,
    pub(crate) status: i32,
    pub(crate) arg: [u64; 2],
    pub(crate) val: [u64; 2],
}

/// `struct msrbatch_batch`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Batch {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) nr_ops: u32,
    pub(crate) nr_failed: u32,
    pub(crate) ops: u64,
    pub(crate) err_index: u32,
    pub(crate) out_flags: u32,
    pub(crate) reserved0: u64,
    pub(crate) start_spread: u64,
}

/// `struct msrbatch_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Info {
    pub(crate) version: u32,
    pub(crate) max_ops: u32,
    pub(crate) max_delay_ns: u32,
    pub(crate) max_cpu_delay_ns: u32,
    pub(crate) ops_supported: u64,
    pub(crate) flags_supported: u32,
    pub(crate) max_cpu_busy_ns: u32,
    pub(crate) reserved: [u64; 4],
}

/// `struct msrbatch_prepare`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Prepare {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) nr_ops: u32,
    pub(crate) handle: u32,
    pub(crate) ops: u64,
    pub(crate) mmap_offset: u64,
    pub(crate) mmap_size: u64,
    pub(crate) err_index: u32,
    pub(crate) reserved: u32,
}

/// `struct msrbatch_result`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct OpResult {
    pub(crate) status: i32,
    pub(crate) reserved: u32,
    pub(crate) val: [u64; 2],
}

// SAFETY: `Prepare` is `repr(C)`, integers only, no padding (checked below).
unsafe impl FromBytes for Prepare {}
// SAFETY: As above.
unsafe impl AsBytes for Prepare {}

// SAFETY: `Op` is `repr(C)`, made of integers only, with no padding (checked
// below); every bit pattern is a valid value.
unsafe impl FromBytes for Op {}
// SAFETY: As above: no padding, no interior mutability.
unsafe impl AsBytes for Op {}
// SAFETY: `Batch` is `repr(C)`, integers only, no padding (checked below).
unsafe impl FromBytes for Batch {}
// SAFETY: As above.
unsafe impl AsBytes for Batch {}
// SAFETY: `Info` is `repr(C)`, integers only, no padding (checked below).
unsafe impl AsBytes for Info {}

/// Asserts the C layout: total size, then `(field, offset)` pairs in order.
macro_rules! assert_layout {
    ($t:ty, $size:expr, $(($f:ident, $off:expr)),* $(,)?) => {
        const _: () = assert!(size_of::<$t>() == $size);
        $(const _: () = assert!(offset_of!($t, $f) == $off);)*
    };
}

assert_layout!(Op, 48, (op, 0), (flags, 2), (cpu, 4), (reg, 8), (status, 12),
               (arg, 16), (val, 32));
assert_layout!(Batch, 48, (version, 0), (flags, 4), (nr_ops, 8), (nr_failed, 12),
               (ops, 16), (err_index, 24), (out_flags, 28), (reserved0, 32),
               (start_spread, 40));
assert_layout!(Prepare, 48, (version, 0), (flags, 4), (nr_ops, 8), (handle, 12), (ops, 16),
               (mmap_offset, 24), (mmap_size, 32), (err_index, 40), (reserved, 44));
assert_layout!(OpResult, 24, (status, 0), (reserved, 4), (val, 8));
assert_layout!(Info, 64, (version, 0), (max_ops, 4), (max_delay_ns, 8),
               (max_cpu_delay_ns, 12), (ops_supported, 16), (flags_supported, 24),
               (max_cpu_busy_ns, 28), (reserved, 32));

/// `MSRBATCH_SAMPLE_MIN_PERIOD_NS`.
pub(crate) const SAMPLE_MIN_PERIOD_NS: u64 = 100_000;
/// `MSRBATCH_SAMPLE_MAX_PERIOD_NS`.
pub(crate) const SAMPLE_MAX_PERIOD_NS: u64 = 60_000_000_000;
/// `MSRBATCH_SAMPLE_MAX_OPS`.
pub(crate) const SAMPLE_MAX_OPS: usize = 64;
/// `MSRBATCH_SAMPLE_MAX_RING_PAGES`.
pub(crate) const SAMPLE_MAX_RING_PAGES: u32 = 1024;
/// `MSRBATCH_MAX_SAMPLERS`.
pub(crate) const MAX_SAMPLERS: u32 = 64;
/// `MSRBATCH_MAX_SAMPLERS_CONFINED`.
pub(crate) const MAX_SAMPLERS_CONFINED: u32 = 16;
/// `MSRBATCH_SAMPLE_MAX_OPS_PER_SEC`.
pub(crate) const SAMPLE_MAX_OPS_PER_SEC: u64 = 64000;
/// `MSRBATCH_RING_VERSION`.
pub(crate) const RING_VERSION: u32 = 1;
/// `MSRBATCH_RING_STOPPED`.
pub(crate) const RING_STOPPED: u32 = 1 << 0;

/// `MSRBATCH_REC_*` record types.
pub(crate) mod rec {
    pub(crate) const PAD: u32 = 0;
    pub(crate) const SAMPLE: u32 = 1;
    pub(crate) const LOST: u32 = 2;
    pub(crate) const ONLINE: u32 = 3;
    pub(crate) const OFFLINE: u32 = 4;
}

/// `struct msrbatch_sample_req`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SampleReq {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) handle: u32,
    pub(crate) ring_pages: u32,
    pub(crate) period_ns: u64,
    pub(crate) watermark: u32,
    pub(crate) err_index: u32,
    pub(crate) mmap_size: u64,
    pub(crate) reserved: u64,
}

// SAFETY: `SampleReq` is `repr(C)`, integers only, no padding (checked below).
unsafe impl FromBytes for SampleReq {}
// SAFETY: As above.
unsafe impl AsBytes for SampleReq {}

/// `struct msrbatch_ring`: the sampler mapping's first page. The kernel
/// never makes a reference to it (user space writes `data_tail` at any time):
/// it reaches each field through its offset.
#[repr(C)]
pub(crate) struct RingPage {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) data_offset: u64,
    pub(crate) data_size: u64,
    pub(crate) period_ns: u64,
    pub(crate) epoch_ns: u64,
    pub(crate) lost: u64,
    pub(crate) reserved0: [u64; 2],
    pub(crate) data_head: u64,
    pub(crate) reserved1: [u64; 7],
    pub(crate) data_tail: u64,
    pub(crate) reserved2: [u64; 7],
}

/// `struct msrbatch_record`'s size, and the offsets of the fields after it
/// in `struct msrbatch_rec_sample` (`seq`, `tsc`, `failed`, `val`) and
/// `struct msrbatch_rec_lost` / `struct msrbatch_rec_cpu`.
pub(crate) mod rec_layout {
    pub(crate) const HEADER: usize = 16;
    pub(crate) const SAMPLE_SEQ: usize = 16;
    pub(crate) const SAMPLE_TSC: usize = 24;
    pub(crate) const SAMPLE_FAILED: usize = 32;
    pub(crate) const SAMPLE_VAL: usize = 40;
    pub(crate) const LOST_LOST: usize = 16;
    pub(crate) const LOST_SIZE: usize = 24;
    pub(crate) const CPU_SEQ: usize = 16;
    pub(crate) const CPU_TSC: usize = 24;
    pub(crate) const CPU_SIZE: usize = 32;
    /// Records start and end on this boundary.
    pub(crate) const ALIGN: usize = 16;
}

assert_layout!(SampleReq, 48, (version, 0), (flags, 4), (handle, 8), (ring_pages, 12),
               (period_ns, 16), (watermark, 24), (err_index, 28), (mmap_size, 32),
               (reserved, 40));
assert_layout!(RingPage, 192, (version, 0), (flags, 4), (data_offset, 8), (data_size, 16),
               (period_ns, 24), (epoch_ns, 32), (lost, 40), (reserved0, 48), (data_head, 64),
               (reserved1, 72), (data_tail, 128), (reserved2, 136));
