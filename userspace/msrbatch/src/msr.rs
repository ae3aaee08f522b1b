// SPDX-License-Identifier: GPL-2.0
//! Architectural MSRs, and the model-specific ones the library computes
//! with (RAPL): named constants, and the names scripts and tables use.
//!
//! A register is written as a name (any case) or as a number in the [one
//! number grammar](crate::number); [`parse_msr`] reads both. The names are
//! this module's constants and numbered ranges, and every `MSR_*` name of the
//! kernel's `arch/x86/include/asm/msr-index.h` (generated into `msr_index.rs`
//! by `scripts/gen-msr-names.sh`), an `MSR_IA32_*` one also without its
//! `MSR_` (the SDM's spelling: `IA32_PERF_CTL`). An unknown name gets the
//! nearest known one as a suggestion.

use crate::msr_index::KERNEL_MSRS;
use crate::number::{parse_u32, NumberError, NumberErrorKind};

/// Defines each constant and the table of fixed names from one list.
macro_rules! msrs {
    ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
        $($(#[$doc])* pub const $name: u32 = $value;)*
        /// Every fixed name with its MSR.
        const FIXED: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
    };
}

msrs! {
    /// Time-stamp counter.
    IA32_TSC = 0x10;
    /// Pentium (P5) control and event select register: ES0/CC0/PC0 in bits
    /// 9:0 for CTR0, ES1/CC1/PC1 in bits 25:16 for CTR1 (SDM 18.26.1).
    P5_CESR = 0x11;
    /// Pentium (P5) counter 0, 40 bits.
    P5_CTR0 = 0x12;
    /// Pentium (P5) counter 1, 40 bits.
    P5_CTR1 = 0x13;
    /// Local APIC base.
    IA32_APIC_BASE = 0x1b;
    /// Feature control (VMX, SGX locks).
    IA32_FEATURE_CONTROL = 0x3a;
    /// TSC adjust.
    IA32_TSC_ADJUST = 0x3b;
    /// Maximum-frequency clock count.
    IA32_MPERF = 0xe7;
    /// Actual-frequency clock count.
    IA32_APERF = 0xe8;
    /// MTRR capabilities.
    IA32_MTRRCAP = 0xfe;
    /// Miscellaneous enables.
    IA32_MISC_ENABLE = 0x1a0;
    /// Page attribute table.
    IA32_PAT = 0x277;
    /// Performance monitoring capabilities (CPUID.01H:ECX.PDCM); bit 13 is
    /// FW_WRITE.
    IA32_PERF_CAPABILITIES = 0x345;
    /// Fixed-function counter control: four bits per fixed counter.
    IA32_FIXED_CTR_CTRL = 0x38d;
    /// Counter overflow status (version 2 and later), read-only.
    IA32_PERF_GLOBAL_STATUS = 0x38e;
    /// Global counter enables (architectural perfmon version 2 and later).
    IA32_PERF_GLOBAL_CTRL = 0x38f;
    /// Counter overflow clear (versions 2, 3), the same MSR as
    /// IA32_PERF_GLOBAL_STATUS_RESET (version 4 and later): write 1 to clear.
    IA32_PERF_GLOBAL_OVF_CTRL = 0x390;
    /// Counter overflow set (version 4 and later): write 1 to set.
    IA32_PERF_GLOBAL_STATUS_SET = 0x391;
    /// Counters in use (version 4 and later), read-only.
    IA32_PERF_GLOBAL_INUSE = 0x392;
    /// Intel RAPL units (model-specific, not architectural): bits 12:8 are
    /// the energy status unit, 1/2^ESU joules.
    MSR_RAPL_POWER_UNIT = 0x606;
    /// Intel package energy consumed (model-specific), 32 bits that wrap,
    /// in MSR_RAPL_POWER_UNIT's energy units.
    MSR_PKG_ENERGY_STATUS = 0x611;
    /// TSC deadline.
    IA32_TSC_DEADLINE = 0x6e0;
    /// Extended feature enables.
    IA32_EFER = 0xc000_0080;
    /// FS base.
    IA32_FS_BASE = 0xc000_0100;
    /// GS base.
    IA32_GS_BASE = 0xc000_0101;
    /// Kernel GS base (SWAPGS).
    IA32_KERNEL_GS_BASE = 0xc000_0102;
    /// TSC auxiliary value (RDTSCP, RDPID).
    IA32_TSC_AUX = 0xc000_0103;
    /// AMD RAPL units (family 17h and later): bits 12:8 are the energy
    /// status unit, as Intel's MSR_RAPL_POWER_UNIT.
    MSR_AMD_RAPL_POWER_UNIT = 0xc001_0299;
    /// AMD core energy consumed, 32 bits that wrap.
    MSR_AMD_CORE_ENERGY_STATUS = 0xc001_029a;
    /// AMD package energy consumed, 32 bits that wrap.
    MSR_AMD_PKG_ENERGY_STATUS = 0xc001_029b;
    /// AMD PerfMonV2 counter overflow status (PerfCntrGlobalStatus), read-only.
    AMD_PERF_CNTR_GLOBAL_STATUS = 0xc000_0300;
    /// AMD PerfMonV2 global counter enables (PerfCntrGlobalCtl).
    AMD_PERF_CNTR_GLOBAL_CTL = 0xc000_0301;
    /// AMD PerfMonV2 counter overflow clear (PerfCntrGlobalStatusClr): write 1
    /// to clear.
    AMD_PERF_CNTR_GLOBAL_STATUS_CLR = 0xc000_0302;
    /// AMD PerfMonV2 counter overflow set (PerfCntrGlobalStatusSet): write 1
    /// to set.
    AMD_PERF_CNTR_GLOBAL_STATUS_SET = 0xc000_0303;
}

/// General-purpose counter 0 (`IA32_PMC<n>` is `IA32_PMC0 + n`; writes take
/// EAX sign-extended).
pub const IA32_PMC0: u32 = 0xc1;
/// Event select of counter 0 (`IA32_PERFEVTSEL<n>` is `IA32_PERFEVTSEL0 + n`).
pub const IA32_PERFEVTSEL0: u32 = 0x186;
/// Fixed-function counter 0 (`IA32_FIXED_CTR<n>` is `IA32_FIXED_CTR0 + n`).
pub const IA32_FIXED_CTR0: u32 = 0x309;
/// Full-width alias of counter 0 (`IA32_A_PMC<n>` is `IA32_A_PMC0 + n`), for
/// writes when IA32_PERF_CAPABILITIES.FW_WRITE is set.
pub const IA32_A_PMC0: u32 = 0x4c1;
/// AMD legacy (K7) event select 0 (`AMD_K7_PERF_CTL<n>` is `+ n`; four
/// counters, aliases of the first four core counters).
pub const AMD_K7_PERF_CTL0: u32 = 0xc001_0000;
/// AMD legacy (K7) counter 0 (`AMD_K7_PERF_CTR<n>` is `+ n`).
pub const AMD_K7_PERF_CTR0: u32 = 0xc001_0004;
/// AMD core event select 0 (PerfCtrExtCore; `AMD_PERF_CTL<n>` is `+ 2n`).
pub const AMD_PERF_CTL0: u32 = 0xc001_0200;
/// AMD core counter 0 (PerfCtrExtCore; `AMD_PERF_CTR<n>` is `+ 2n`).
pub const AMD_PERF_CTR0: u32 = 0xc001_0201;

/// Numbered ranges: `PREFIX<n>` is `base + n * stride` for `n < count`.
const RANGES: &[(&str, u32, u32, u32)] = &[
    ("IA32_PMC", IA32_PMC0, 8, 1),
    ("IA32_PERFEVTSEL", IA32_PERFEVTSEL0, 8, 1),
    ("IA32_FIXED_CTR", IA32_FIXED_CTR0, 4, 1),
    ("IA32_A_PMC", IA32_A_PMC0, 8, 1),
    ("AMD_K7_PERF_CTL", AMD_K7_PERF_CTL0, 4, 1),
    ("AMD_K7_PERF_CTR", AMD_K7_PERF_CTR0, 4, 1),
    ("AMD_PERF_CTL", AMD_PERF_CTL0, 6, 2),
    ("AMD_PERF_CTR", AMD_PERF_CTR0, 6, 2),
];

/// The name a kernel MSR is shown by: `MSR_IA32_X` as the SDM's `IA32_X`,
/// others as the kernel names them.
fn shown(kernel_name: &'static str) -> &'static str {
    match kernel_name.strip_prefix("MSR_") {
        Some(sdm) if sdm.starts_with("IA32_") => sdm,
        _ => kernel_name,
    }
}

/// Looks up an MSR by name (case-insensitive), e.g. `IA32_PERFEVTSEL0`,
/// `MSR_PLATFORM_INFO`, `IA32_PERF_CTL` (the kernel's `MSR_IA32_PERF_CTL`).
pub fn msr_by_name(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    if let Some(&(_, v)) = FIXED.iter().find(|(n, _)| *n == upper) {
        return Some(v);
    }
    // This module's names first: where the kernel spells one differently
    // (its MSR_IA32_PMC0 is the SDM's IA32_A_PMC0), the SDM's wins.
    let ranged = RANGES.iter().find_map(|&(prefix, base, count, stride)| {
        let n = upper.strip_prefix(prefix)?;
        // The index is plain decimal (so IA32_PMC01 and IA32_PMC0x1 are no names).
        if !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = parse_u32(n).ok()?;
        (n < count).then(|| base + n * stride)
    });
    ranged.or_else(|| {
        KERNEL_MSRS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&upper) || shown(n).eq_ignore_ascii_case(&upper))
            .map(|&(_, v)| v)
    })
}

/// The name of an MSR, if it has one here (this module's first, then the
/// kernel's first for it).
pub fn msr_name(msr: u32) -> Option<String> {
    if let Some(&(n, _)) = FIXED.iter().find(|(_, v)| *v == msr) {
        return Some(n.to_string());
    }
    let ranged = RANGES.iter().find_map(|&(prefix, base, count, stride)| {
        let off = msr.checked_sub(base)?;
        (off % stride == 0 && off / stride < count).then(|| format!("{prefix}{}", off / stride))
    });
    ranged.or_else(|| {
        KERNEL_MSRS
            .iter()
            .find(|(_, v)| *v == msr)
            .map(|(n, _)| shown(n).to_string())
    })
}

/// Every name [`msr_by_name`] knows, for suggestions (ranges by their
/// first member).
fn known_names() -> impl Iterator<Item = String> {
    FIXED
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(KERNEL_MSRS.iter().map(|(n, _)| shown(n).to_string()))
        .chain(RANGES.iter().map(|(p, ..)| format!("{p}0")))
}

/// Edit distance (insertions, deletions, substitutions) between `a` and `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The known name nearest to `name`, if one is near enough to be meant: at
/// most a third of its length away, or one it is the end of
/// (`PLATFORM_INFO` for `MSR_PLATFORM_INFO`).
pub(crate) fn suggest(name: &str) -> Option<String> {
    let upper = name.to_ascii_uppercase();
    let (best, d) = known_names()
        .map(|n| (distance(&upper, &n.to_ascii_uppercase()), n))
        .min_by_key(|(d, _)| *d)
        .map(|(d, n)| (n, d))?;
    if d <= (upper.len() / 3).max(2) {
        return Some(best);
    }
    let tail = format!("_{upper}");
    known_names().find(|n| n.to_ascii_uppercase().ends_with(&tail))
}

/// An MSR as text: its name if it has one here, else its number in hex. This
/// is how scripts, the text form of ops and messages write a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(pub u32);

impl std::fmt::Display for Reg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match msr_name(self.0) {
            Some(n) => f.write_str(&n),
            None => write!(f, "{:#x}", self.0),
        }
    }
}

/// Why a text names no MSR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MsrError {
    /// Not a name this module knows, and not a number.
    Unknown(String),
    /// A number, but not a 32-bit one in the number grammar.
    Number(NumberError),
}

impl std::fmt::Display for MsrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MsrError::Unknown(t) => {
                write!(f, "'{t}' is neither an MSR name nor a number")?;
                match suggest(t) {
                    Some(s) => write!(f, " (did you mean {s}?)"),
                    None => Ok(()),
                }
            }
            MsrError::Number(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for MsrError {}

/// Reads a register: an MSR name ([`msr_by_name`]) or a 32-bit number.
pub fn parse_msr(s: &str) -> Result<u32, MsrError> {
    if let Some(v) = msr_by_name(s) {
        return Ok(v);
    }
    parse_u32(s).map_err(|e| match e.kind() {
        NumberErrorKind::Invalid if !s.starts_with(|c: char| c.is_ascii_digit()) => {
            MsrError::Unknown(s.to_string())
        }
        _ => MsrError::Number(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, msr) in [
            ("IA32_PAT", 0x277),
            ("ia32_tsc_aux", 0xc000_0103),
            ("IA32_PERFEVTSEL3", 0x189),
            ("IA32_FIXED_CTR2", 0x30b),
            ("AMD_PERF_CTL1", 0xc001_0202),
            ("AMD_PERF_CTR5", 0xc001_020b),
            ("AMD_PERF_CNTR_GLOBAL_CTL", 0xc000_0301),
            ("P5_CESR", 0x11),
            ("p5_ctr1", 0x13),
        ] {
            assert_eq!(msr_by_name(name), Some(msr), "{name}");
            assert_eq!(msr_name(msr).unwrap(), name.to_ascii_uppercase());
        }
        assert_eq!(msr_by_name("IA32_PERFEVTSEL8"), None);
        assert_eq!(msr_by_name("IA32_PERFEVTSELx"), None);
        assert_eq!(msr_by_name("IA32_PERFEVTSEL01"), None);
        assert_eq!(msr_by_name("IA32_PERFEVTSEL0x1"), None);
        assert_eq!(msr_by_name("IA32_PERFEVTSEL0b1"), None);
        assert_eq!(msr_by_name("NOPE"), None);
        assert_eq!(msr_name(0xc001_0206 + 1), Some("AMD_PERF_CTR3".into()));
        assert_eq!(msr_name(0x1234), None);
        assert_eq!(Reg(0x38f).to_string(), "IA32_PERF_GLOBAL_CTRL");
        assert_eq!(Reg(0x1234).to_string(), "0x1234");
        for (name, _) in FIXED {
            assert_eq!(msr_name(msr_by_name(name).unwrap()).as_deref(), Some(*name));
        }
        // Every kernel name reads as its MSR, and every MSR's name back.
        for &(name, msr) in KERNEL_MSRS {
            assert!(msr_by_name(name).is_some(), "{name}");
            let shown = msr_name(msr).unwrap();
            // The full-width counter aliases, which the kernel calls
            // MSR_IA32_PMCn, are shown by the SDM's name.
            let pmc = name.strip_prefix("MSR_IA32_PMC");
            if pmc.is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
                assert!(shown.starts_with("IA32_A_PMC"), "{name}: {shown}");
            }
            assert_eq!(msr_by_name(&shown), Some(msr), "{name} shown as {shown}");
        }
    }

    /// The names the issue found missing, in the SDM's and the kernel's
    /// spelling.
    #[test]
    fn the_kernel_s_names() {
        for (name, msr) in [
            ("IA32_ENERGY_PERF_BIAS", 0x1b0),
            ("MSR_IA32_ENERGY_PERF_BIAS", 0x1b0),
            ("MSR_PLATFORM_INFO", 0xce),
            ("IA32_THERM_STATUS", 0x19c),
            ("IA32_PERF_CTL", 0x199),
            ("msr_pkg_power_limit", 0x610),
        ] {
            assert_eq!(msr_by_name(name), Some(msr), "{name}");
        }
        assert_eq!(msr_name(0x199).as_deref(), Some("IA32_PERF_CTL"));
        assert_eq!(msr_name(0x610).as_deref(), Some("MSR_PKG_POWER_LIMIT"));
        // This module's names come first.
        assert_eq!(msr_name(0xc000_0080).as_deref(), Some("IA32_EFER"));
        assert_eq!(msr_name(0x186).as_deref(), Some("IA32_PERFEVTSEL0"));
    }

    #[test]
    fn did_you_mean() {
        assert_eq!(suggest("IA32_PERF_CTRL").as_deref(), Some("IA32_PERF_CTL"));
        assert_eq!(suggest("ia32_pat_").as_deref(), Some("IA32_PAT"));
        assert_eq!(
            suggest("PLATFORM_INFO").as_deref(),
            Some("MSR_PLATFORM_INFO")
        );
        assert_eq!(suggest("FROBNICATOR_XYZZY"), None);
        assert_eq!(
            parse_msr("IA32_THERM_STATU").unwrap_err().to_string(),
            "'IA32_THERM_STATU' is neither an MSR name nor a number \
             (did you mean IA32_THERM_STATUS?)"
        );
    }

    #[test]
    fn registers_are_names_or_numbers() {
        assert_eq!(parse_msr("IA32_PAT"), Ok(IA32_PAT));
        assert_eq!(parse_msr("0x277"), Ok(0x277));
        assert_eq!(parse_msr("631"), Ok(0x277));
        assert_eq!(parse_msr("NOPE"), Err(MsrError::Unknown("NOPE".into())));
        assert_eq!(
            parse_msr("NOPE").unwrap_err().to_string(),
            "'NOPE' is neither an MSR name nor a number"
        );
        assert!(
            matches!(parse_msr("0631"), Err(MsrError::Number(e)) if e.kind() == NumberErrorKind::LeadingZero)
        );
        assert!(
            matches!(parse_msr("0x1_0000_0000"), Err(MsrError::Number(e)) if e.kind() == NumberErrorKind::TooLarge(32))
        );
    }
}
