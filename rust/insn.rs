// SPDX-License-Identifier: GPL-2.0

//! Fault-safe wrappers around the privileged x86 instructions msrbatch uses.
//!
//! This is the only file of the module with inline assembly. Every instruction
//! that can fault carries its own `__ex_table` entry, so a #GP or #UD (an
//! unknown MSR, a bad counter index, RDPMC on a CPU without a PMU) resumes at
//! the instruction after it with an error register set, instead of an oops.
//!
//! The entry is three `.long`s: the faulting instruction and the fixup address,
//! both relative to the entry, and `EX_TYPE_IMM_REG | r8 << 8 | -EIO << 16`
//! (evaluated from the kernel's headers at build time, `kconsts.c`): the
//! kernel's fixup handler stores the immediate (-EIO) into r8 and jumps to
//! the fixup label (`arch/x86/include/asm/extable_fixup_types.h`,
//! `arch/x86/mm/extable.c`). Outputs of a faulted instruction are not
//! meaningful and are discarded by the callers.

use core::arch::asm;

/// The instruction faulted (#GP or #UD) and was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault;

/// Result of one instruction.
pub(crate) type InsnResult<T> = core::result::Result<T, Fault>;

/// The `data` word of the exception table entry: `EX_TYPE_IMM_REG`, r8,
/// -EIO, computed from the kernel's `extable_fixup_types.h` (`kconsts.c`).
const EX_DATA: i64 = crate::generated::EX_DATA_IMM_REG_R8_EIO;

/// Runs `$insn` with an exception table entry; r8 is 0 afterwards, or -EIO
/// when the instruction faulted.
///
/// With `@wrap`, `$pre` and `$post` run around it; the fixup resumes at `$post`.
macro_rules! safe_insn {
    ($insn:literal, $($operands:tt)*) => {
        safe_insn!(@wrap "", $insn, "", $($operands)*)
    };
    (@wrap $pre:literal, $insn:literal, $post:literal, $($operands:tt)*) => {
        asm!(
            $pre,
            "2:",
            $insn,
            "3:",
            $post,
            ".pushsection __ex_table, \"a\"",
            ".balign 4",
            ".long 2b - .",
            ".long 3b - .",
            ".long {data}",
            ".popsection",
            data = const EX_DATA,
            $($operands)*
        )
    };
}

/// Runs `$insn`, which returns a 64-bit value in EDX:EAX, with
/// [`safe_insn!`]: the value, or the fault. `$operands` are its inputs and
/// options.
macro_rules! safe_read_edx_eax {
    ($insn:literal, $($operands:tt)*) => {{
        let (lo, hi): (u32, u32);
        let err: u64;
        safe_insn!($insn, out("eax") lo, out("edx") hi, inout("r8") 0u64 => err, $($operands)*);
        check(err).map(|()| u64::from(lo) | (u64::from(hi) << 32))
    }};
}

fn check(err: u64) -> InsnResult<()> {
    if err == 0 {
        Ok(())
    } else {
        Err(Fault)
    }
}

/// Reads MSR `msr`.
pub(crate) fn rdmsr(msr: u32) -> InsnResult<u64> {
    // SAFETY: RDMSR only reads; a fault on an unimplemented MSR is caught by the
    // exception table entry. We run in ring 0 (module code).
    unsafe { safe_read_edx_eax!("rdmsr", in("ecx") msr, options(nostack, nomem)) }
}

/// Writes `value` to MSR `msr`.
///
/// # Safety
///
/// The caller has decided that this write is allowed: the file may write
/// (`FMODE_WRITE`), the kernel is not locked down, `allow_writes` permits it.
/// A write can change anything about the machine (e.g. `IA32_LSTAR`); a
/// fault (#GP) is caught by the exception table entry and is not a safety
/// concern.
pub(crate) unsafe fn wrmsr(msr: u32, value: u64) -> InsnResult<()> {
    let err: u64;
    // SAFETY: By the function's requirements. A fault is caught by the
    // exception table entry.
    unsafe {
        safe_insn!("wrmsr", in("ecx") msr, in("eax") value as u32,
                   in("edx") (value >> 32) as u32, inout("r8") 0u64 => err,
                   options(nostack))
    };
    check(err)
}

/// Reads performance counter `ecx` (bit 30 selects Intel fixed counters).
pub(crate) fn rdpmc(ecx: u32) -> InsnResult<u64> {
    // SAFETY: RDPMC only reads; #GP (bad index) and #UD (no PMU) are caught by
    // the exception table entry.
    unsafe { safe_read_edx_eax!("rdpmc", in("ecx") ecx, options(nostack, nomem)) }
}

/// Reads the time-stamp counter.
pub(crate) fn rdtsc() -> InsnResult<u64> {
    // SAFETY: RDTSC only reads; it cannot fault in ring 0, but carries an entry
    // like every other op so the guarantee does not depend on that.
    unsafe { safe_read_edx_eax!("rdtsc", options(nostack, nomem)) }
}

/// Reads the time-stamp counter for the module's own clock (a share's busy
/// budget and credit), not for an op: without [`rdtsc`]'s exception table
/// entry, whose error path costs three instructions a read. RDTSC cannot
/// fault in ring 0 (`CR4.TSD` stops only ring 3), and the kernel reads its
/// own clock so (`rdtsc()`); an op keeps the entry, as every op has one.
/// The halves are joined in the asm: RDTSC clears the upper halves of RAX
/// and RDX, which the compiler does not know (joining `u32` outputs, it
/// zero-extends EAX again and copies EDX first: 2 instructions a read).
#[inline(always)]
pub(crate) fn clock() -> u64 {
    let tsc: u64;
    // SAFETY: RDTSC only writes EDX:EAX (clearing the upper halves of RAX
    // and RDX), and does not fault in ring 0; the shift and OR only touch
    // RDX, RAX and the flags.
    unsafe {
        core::arch::asm!("rdtsc", "shl rdx, 32", "or rax, rdx", out("rax") tsc, out("rdx") _,
                         options(nostack, nomem))
    };
    tsc
}

/// The number of the CPU this runs on, read as the kernel's
/// `raw_smp_processor_id()` reads it: one load of `cpu_number` through the
/// per-CPU segment (GS), not a call to the kernel crate's C helper
/// (`CpuId::current`), which the hot paths made once per share. As stable as
/// the kernel's: the caller keeps the CPU (interrupts off) if it must.
#[inline(always)]
pub(crate) fn this_cpu_id() -> u32 {
    let cpu: u32;
    // SAFETY: A load of this CPU's `cpu_number`, which the kernel sets up
    // before any module runs; GS is the per-CPU base in the kernel, and the
    // variable is addressed as the kernel's own `this_cpu_read()` does.
    unsafe {
        asm!("mov {0:e}, gs:[rip + {1}]", out(reg) cpu, sym kernel::bindings::cpu_number,
             options(nostack, readonly, preserves_flags))
    };
    cpu
}

/// This CPU's copy of the per-CPU variable `var`, as the kernel's
/// `this_cpu_ptr()` makes it: `var` plus this CPU's `this_cpu_off`, one
/// load through the per-CPU segment.
///
/// # Safety
///
/// `var` is a per-CPU variable's address (`DEFINE_PER_CPU`).
#[inline(always)]
pub(crate) unsafe fn this_cpu_ptr<T>(var: *const T) -> *mut T {
    let off: usize;
    // SAFETY: A load of this CPU's `this_cpu_off`, as `this_cpu_ptr()`
    // makes it.
    unsafe {
        asm!("mov {0}, gs:[rip + {1}]", out(reg) off, sym kernel::bindings::this_cpu_off,
             options(nostack, readonly, preserves_flags))
    };
    var.cast_mut().wrapping_byte_add(off)
}

/// Reads the time-stamp counter and IA32_TSC_AUX.
pub(crate) fn rdtscp() -> InsnResult<(u64, u32)> {
    let (lo, hi, aux): (u32, u32, u32);
    let err: u64;
    // SAFETY: RDTSCP only reads; #UD on CPUs without it is caught by the
    // exception table entry.
    unsafe {
        safe_insn!("rdtscp", out("eax") lo, out("edx") hi, out("ecx") aux,
                   inout("r8") 0u64 => err, options(nostack, nomem))
    };
    check(err).map(|()| (u64::from(lo) | (u64::from(hi) << 32), aux))
}

/// Executes CPUID for `leaf`/`subleaf`; returns eax, ebx, ecx, edx.
pub(crate) fn cpuid(leaf: u32, subleaf: u32) -> InsnResult<[u32; 4]> {
    let (a, b, c, d): (u32, u32, u32, u32);
    let err: u64;
    // SAFETY: CPUID only reads (and serializes). rbx is reserved by LLVM, so it
    // is saved in rsi around the instruction. A fault (CPUID faulting) is caught.
    unsafe {
        safe_insn!(@wrap "xchg rsi, rbx", "cpuid", "xchg rsi, rbx",
                   inout("eax") leaf => a, out("esi") b, inout("ecx") subleaf => c,
                   out("edx") d, inout("r8") 0u64 => err, options(nostack, nomem))
    };
    check(err).map(|()| [a, b, c, d])
}

/// Reads CR4 of the current CPU (the hardware register, not the kernel's shadow).
pub(crate) fn read_cr4() -> InsnResult<u64> {
    let cr4: u64;
    let err: u64;
    // SAFETY: Reading CR4 has no side effects in ring 0.
    unsafe {
        safe_insn!("mov {cr4}, cr4", cr4 = out(reg) cr4, inout("r8") 0u64 => err,
                   options(nostack, nomem))
    };
    check(err).map(|()| cr4)
}

/// CR4.PCE: RDPMC allowed in ring 3.
pub(crate) const CR4_PCE: u64 = 1 << 8;

/// Whether CR4.PCE is set on the current CPU.
pub(crate) fn cr4_pce() -> bool {
    read_cr4().is_ok_and(|cr4| cr4 & CR4_PCE != 0)
}

/// Sets or clears CR4.PCE on the current CPU; writes CR4 only when the bit
/// changes. Only the PCE bit is touched, in one read-modify-write.
///
/// # Safety
///
/// Interrupts are off (an interrupt that updates CR4 between the read and
/// the write would be lost), and the caller keeps the kernel's CR4 shadow
/// truthful for every other task: it sets PCE only for a granted thread and
/// puts back the shadow's value before any other task runs on this CPU.
pub(crate) unsafe fn cr4_write_pce(on: bool) {
    let want = if on { CR4_PCE } else { 0 };
    // SAFETY: By the function's requirements; ring 0.
    unsafe {
        asm!(
            "mov {cr4}, cr4",
            "mov {old}, {cr4}",
            "and {old}, {pce}",
            "cmp {old}, {want}",
            "je 2f",
            "xor {cr4}, {pce}",
            "mov cr4, {cr4}",
            "2:",
            cr4 = out(reg) _,
            old = out(reg) _,
            pce = in(reg) CR4_PCE,
            want = in(reg) want,
            options(nomem, nostack),
        )
    };
}
