// SPDX-License-Identifier: GPL-2.0
//! Names of architectural MSRs, for scripts and tables.

/// Fixed names.
const FIXED: &[(&str, u32)] = &[
    ("IA32_TSC", 0x10),
    ("IA32_APIC_BASE", 0x1b),
    ("IA32_FEATURE_CONTROL", 0x3a),
    ("IA32_TSC_ADJUST", 0x3b),
    ("IA32_MPERF", 0xe7),
    ("IA32_APERF", 0xe8),
    ("IA32_MTRRCAP", 0xfe),
    ("IA32_MISC_ENABLE", 0x1a0),
    ("IA32_PAT", 0x277),
    ("IA32_PERF_CAPABILITIES", 0x345),
    ("IA32_FIXED_CTR_CTRL", 0x38d),
    ("IA32_PERF_GLOBAL_STATUS", 0x38e),
    ("IA32_PERF_GLOBAL_CTRL", 0x38f),
    ("IA32_PERF_GLOBAL_OVF_CTRL", 0x390),
    ("IA32_PERF_GLOBAL_STATUS_SET", 0x391),
    ("IA32_PERF_GLOBAL_INUSE", 0x392),
    ("IA32_TSC_DEADLINE", 0x6e0),
    ("IA32_EFER", 0xc000_0080),
    ("IA32_FS_BASE", 0xc000_0100),
    ("IA32_GS_BASE", 0xc000_0101),
    ("IA32_KERNEL_GS_BASE", 0xc000_0102),
    ("IA32_TSC_AUX", 0xc000_0103),
    ("AMD_PERF_CNTR_GLOBAL_STATUS", 0xc000_0300),
    ("AMD_PERF_CNTR_GLOBAL_CTL", 0xc000_0301),
    ("AMD_PERF_CNTR_GLOBAL_STATUS_CLR", 0xc000_0302),
    ("AMD_PERF_CNTR_GLOBAL_STATUS_SET", 0xc000_0303),
];

/// Numbered ranges: `PREFIX<n>` is `base + n * stride` for `n < count`.
const RANGES: &[(&str, u32, u32, u32)] = &[
    ("IA32_PMC", 0xc1, 8, 1),
    ("IA32_PERFEVTSEL", 0x186, 8, 1),
    ("IA32_FIXED_CTR", 0x309, 4, 1),
    ("IA32_A_PMC", 0x4c1, 8, 1),
    // AMD legacy (K7) counters, and the core extension (PerfCtrExtCore).
    ("AMD_K7_PERF_CTL", 0xc001_0000, 4, 1),
    ("AMD_K7_PERF_CTR", 0xc001_0004, 4, 1),
    ("AMD_PERF_CTL", 0xc001_0200, 6, 2),
    ("AMD_PERF_CTR", 0xc001_0201, 6, 2),
];

/// Looks up an MSR by name (case-insensitive), e.g. `IA32_PERFEVTSEL0`.
pub fn msr_by_name(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    if let Some(&(_, v)) = FIXED.iter().find(|(n, _)| *n == upper) {
        return Some(v);
    }
    RANGES.iter().find_map(|&(prefix, base, count, stride)| {
        let n: u32 = upper.strip_prefix(prefix)?.parse().ok()?;
        (n < count).then(|| base + n * stride)
    })
}

/// The name of an MSR, if it has one here.
pub fn msr_name(msr: u32) -> Option<String> {
    if let Some(&(n, _)) = FIXED.iter().find(|(_, v)| *v == msr) {
        return Some(n.to_string());
    }
    RANGES.iter().find_map(|&(prefix, base, count, stride)| {
        let off = msr.checked_sub(base)?;
        (off % stride == 0 && off / stride < count).then(|| format!("{prefix}{}", off / stride))
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
        ] {
            assert_eq!(msr_by_name(name), Some(msr), "{name}");
            assert_eq!(msr_name(msr).unwrap(), name.to_ascii_uppercase());
        }
        assert_eq!(msr_by_name("IA32_PERFEVTSEL8"), None);
        assert_eq!(msr_by_name("IA32_PERFEVTSELx"), None);
        assert_eq!(msr_by_name("NOPE"), None);
        assert_eq!(msr_name(0xc001_0206 + 1), Some("AMD_PERF_CTR3".into()));
        assert_eq!(msr_name(0x1234), None);
    }
}
