/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msrbatch: what bindgen reads to make bindings_generated.rs (rust/Kbuild),
 * the Rust view of the module's C definitions, used through sys.rs:
 *
 * - include/uapi/linux/msrbatch.h, the ABI: its constants and structures
 *   (uapi.rs names them for the rest of the module);
 * - include/uapi/linux/msrbatch_msr_safe.h, msr-safe's ABI as its
 *   documentation gives it (msr_safe.rs);
 * - helpers.h: the prototypes of helpers.c and sampler_file.c, the C
 *   functions the Rust code calls and the Rust functions they call back, and
 *   the busy credit's per-CPU storage (busy.rs);
 * - pce_fork.h: pce_fork.c's, the fork probe of inherited PCE grants.
 *
 * So neither is typed twice: a change in either header changes the Rust
 * view, and what no longer fits fails the build.
 */
#include "../include/uapi/linux/msrbatch.h"
#include "../include/uapi/linux/msrbatch_msr_safe.h"
#include "helpers.h"
#include "pce_fork.h"

/*
 * The ioctl numbers are function-like macros (_IOWR, ...), which bindgen does
 * not expand: each is evaluated here by libclang as a constant's initialiser
 * (as the kernel's rust/bindings/bindings_helper.h does for its own
 * constants), and rust/Kbuild drops the RUST_CONST_HELPER_ prefix.
 */
#define MSRBATCH_RUST_CONST(name) const __u32 RUST_CONST_HELPER_##name = name

MSRBATCH_RUST_CONST(MSRBATCH_IOC_INFO);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_BATCH);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_PREPARE);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_RUN);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_UNPREPARE);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_RESTORE_ON_CLOSE);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_RESTORE_NOW);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_SAMPLE);
MSRBATCH_RUST_CONST(MSRBATCH_SAMPLER_IOC_STOP);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_PCE_GRANT);
MSRBATCH_RUST_CONST(MSRBATCH_IOC_PCE_REVOKE);

/* msr-safe's ioctl: the same macro, the name its header gives it. */
MSRBATCH_RUST_CONST(X86_IOC_MSR_BATCH);
MSRBATCH_RUST_CONST(MSR_SAFE_VERSION_MAJOR);
