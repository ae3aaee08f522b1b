// SPDX-License-Identifier: GPL-2.0
//! What a CPU's core PMU is: the CPUID decode (live, through a
//! [`Backend`], or offline from a CPUID dump), the event select encoding and
//! the architectural event names.
//!
//! Intel: SDM Vol. 3B, "Architectural Performance Monitoring" (CPUID leaves
//! 0AH and 23H), and the original Pentium's counters (family 5, [`p5`]).
//! AMD: APM Vol. 2, "Performance Monitoring Counters" (CPUID 80000001H ECX
//! bit 23 and leaf 80000022H).
//!
//! The decode applies the quirks Linux applies where CPUID is wrong about
//! the PMU ([`Quirk`]), so that what `pmu` reports and what `stat` programs
//! is what the CPU has.

use crate::{msr, Backend, Batch, Op, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub mod p5;
pub mod quirks;
pub use p5::{
    cesr_decode, cesr_describe, cesr_encode, p5_event, p5_event_at, P5Event, P5_ALIASES, P5_EVENTS,
};
pub use quirks::EventConstraint;

/// Event select bits (IA32_PERFEVTSELx and AMD PERF_CTLx share bits 31:0).
pub mod evsel {
    /// Count at CPL > 0.
    pub const USR: u64 = 1 << 16;
    /// Count at CPL 0.
    pub const OS: u64 = 1 << 17;
    /// Edge detect.
    pub const EDGE: u64 = 1 << 18;
    /// Pin control (Intel).
    pub const PC: u64 = 1 << 19;
    /// Interrupt (PMI) on overflow.
    pub const INT: u64 = 1 << 20;
    /// AnyThread (Intel, version 3 and later).
    pub const ANY: u64 = 1 << 21;
    /// Enable.
    pub const EN: u64 = 1 << 22;
    /// Invert the counter-mask comparison.
    pub const INV: u64 = 1 << 23;
    /// Counter mask, bits 31:24.
    pub const CMASK_SHIFT: u32 = 24;
}

/// IA32_PERF_CAPABILITIES.FW_WRITE: IA32_A_PMCx take full-width writes.
pub const PERF_CAP_FW_WRITE: u64 = 1 << 13;

/// An Intel architectural event: its name, event select and umask. Its index
/// in [`ARCH_EVENTS`] is its bit in CPUID.0AH:EBX and CPUID.(23H,3):EAX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchEvent {
    /// The name used by `-e` and the tool's output.
    pub name: &'static str,
    /// Event select.
    pub event: u8,
    /// Unit mask.
    pub umask: u8,
}

const fn arch(name: &'static str, event: u8, umask: u8) -> ArchEvent {
    ArchEvent { name, event, umask }
}

/// The architectural events, in CPUID bit order (SDM Vol. 3B, Table
/// "UMask and Event Select Encodings for Pre-Defined Architectural
/// Performance Events").
pub const ARCH_EVENTS: &[ArchEvent] = &[
    arch("cycles", 0x3c, 0x00),
    arch("instructions", 0xc0, 0x00),
    arch("ref-cycles", 0x3c, 0x01),
    arch("llc-references", 0x2e, 0x4f),
    arch("llc-misses", 0x2e, 0x41),
    arch("branches", 0xc4, 0x00),
    arch("branch-misses", 0xc5, 0x00),
    arch("topdown-slots", 0xa4, 0x01),
    arch("topdown-be-bound", 0xa4, 0x02),
    arch("topdown-bad-spec", 0x73, 0x00),
    arch("topdown-fe-bound", 0x9c, 0x01),
    arch("topdown-retiring", 0xc2, 0x02),
    arch("lbr-inserts", 0xe4, 0x01),
];

/// The architectural event counted by Intel fixed counter `i` (0: instructions,
/// 1: cycles, 2: ref-cycles, 3: topdown-slots), as an index into [`ARCH_EVENTS`].
pub fn fixed_counter_event(i: u32) -> Option<usize> {
    [1, 0, 2, 7].get(i as usize).copied()
}

/// AMD core events with the same meaning as the named architectural events
/// (APM / PPR: PMCx076 cycles not in halt, PMCx0C0 retired instructions,
/// PMCx0C2 retired branches, PMCx0C3 retired mispredicted branches).
pub const AMD_EVENTS: &[(&str, u16, u8)] = &[
    ("cycles", 0x76, 0x00),
    ("instructions", 0xc0, 0x00),
    ("branches", 0xc2, 0x00),
    ("branch-misses", 0xc3, 0x00),
];

/// The (leaf, subleaf) pairs [`PmuInfo::decode`] reads.
pub const CPUID_LEAVES: &[(u32, u32)] = &[
    (0, 0),
    (1, 0),
    (7, 0),
    (0xa, 0),
    (0x1a, 0),
    (0x23, 0),
    (0x23, 1),
    (0x23, 3),
    (0x8000_0000, 0),
    (0x8000_0001, 0),
    (0x8000_0022, 0),
];

/// Hybrid core type (CPUID.1AH:EAX\[31:24\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreType {
    /// 20H: Intel Atom (E-core).
    Atom,
    /// 40H: Intel Core (P-core).
    Core,
    /// Another value.
    Other(u8),
}

/// AMD PMU facts (CPUID 80000001H ECX, 80000022H).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AmdPmu {
    /// 80000022H EAX\[0\]: PerfCntrGlobalCtl/Status.
    pub perfmon_v2: bool,
    /// 80000001H ECX\[23\]: six core counters at PERF_CTL0 (C001_0200H).
    pub core_ext: bool,
    /// 80000001H ECX\[24\]: northbridge / data fabric counters.
    pub nb_ext: bool,
    /// 80000001H ECX\[28\]: L3 (LLC) counters.
    pub llc_ext: bool,
    /// 80000022H EBX\[15:10\]: northbridge / data fabric counters.
    pub nb_counters: u32,
    /// 80000022H EBX\[21:16\]: UMC counters.
    pub umc_counters: u32,
    /// 80000022H EBX\[9:4\]: LBR v2 stack size.
    pub lbr_v2_stack: u32,
    /// 80000022H ECX: active UMC mask.
    pub active_umc_mask: u32,
}

/// The original Pentium's counters (CPUID family 5, with RDMSR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct P5Pmu {
    /// CPUID.01H:EDX\[23\]: MMX technology, which brings RDPMC of CTR0/CTR1
    /// and the events 2AH-3BH.
    pub mmx: bool,
    /// CESR as [`probe`] read it (None offline, or if the read faulted).
    pub cesr: Option<u64>,
}

/// A correction of what CPUID says, as Linux's PMU setup makes it
/// (arch/x86/events/intel/core.c, `intel_pmu_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quirk {
    /// Perfmon versions 2 to 4 may report fewer than 3 fixed counters
    /// (Core 2 reports none) although the CPU has 3: outside a hypervisor
    /// Linux assumes at least 3 ("Quirk: v2 perfmon does not report
    /// fixed-purpose events"), as wide as the general-purpose counters when
    /// CPUID gives no width.
    FixedCountersAssumed {
        /// The number CPUID.0AH:EDX\[4:0\] reports.
        reported: u32,
    },
    /// Linux counts some events on some general-purpose counters only on
    /// this model ([`quirks`]).
    EventConstraints {
        /// The kernel's table.
        table: &'static str,
        /// Its entries.
        constraints: &'static [EventConstraint],
    },
}

impl std::fmt::Display for Quirk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Quirk::FixedCountersAssumed { reported } => write!(
                f,
                "CPUID.0AH:EDX reports {reported} fixed counters; perfmon versions 2-4 have at least 3 outside a hypervisor, so 3 are used (as Linux does)"
            ),
            Quirk::EventConstraints { table, constraints } => {
                quirks::describe_constraints(f, table, constraints)
            }
        }
    }
}

/// What CPUID (and, live, RDPMC) says about the core PMU of one CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PmuInfo {
    /// CPUID.0 vendor string.
    pub vendor: String,
    /// CPUID.01H:EAX (family, model, stepping).
    pub signature: u32,
    /// Hybrid core type, when CPUID.07H:EDX\[15\] (hybrid) is set.
    pub core_type: Option<CoreType>,
    /// Intel: CPUID.0AH:EAX\[7:0\]. AMD: 2 with PerfMonV2, else 1.
    pub version: u32,
    /// Number of general-purpose counters.
    pub gp_counters: u32,
    /// Their width in bits.
    pub gp_width: u32,
    /// Which general-purpose counters exist (bit i: counter i).
    pub gp_mask: u64,
    /// Number of fixed counters (Intel).
    pub fixed_counters: u32,
    /// Their width in bits.
    pub fixed_width: u32,
    /// Which fixed counters exist (bit i: IA32_FIXED_CTRi).
    pub fixed_mask: u64,
    /// Intel architectural events available: bit i is `ARCH_EVENTS[i]`.
    pub arch_events: u32,
    /// Intel: number of architectural events CPUID enumerates (0AH EAX\[31:24\]).
    pub arch_events_len: u32,
    /// CPUID.0AH:EDX\[15\]: AnyThread deprecated.
    pub any_thread_deprecated: bool,
    /// CPUID.23H leaf present: (EBX\[0\] UMASK2, EBX\[1\] EQ).
    pub ext_leaf_23: Option<(bool, bool)>,
    /// CPUID.01H:ECX\[15\] PDCM: IA32_PERF_CAPABILITIES exists.
    pub pdcm: bool,
    /// IA32_PERF_CAPABILITIES as read by [`probe`] (None offline).
    pub perf_capabilities: Option<u64>,
    /// CPUID.07H:EBX HLE (4) or RTM (11): PERFEVTSEL IN_TX/IN_TXCP exist.
    pub tsx: bool,
    /// AMD facts; None on Intel.
    pub amd: Option<AmdPmu>,
    /// The original Pentium's counters (CESR, CTR0, CTR1); None on other CPUs.
    pub p5: Option<P5Pmu>,
    /// CPUID.01H:ECX\[31\]: running under a hypervisor.
    pub hypervisor: bool,
    /// The corrections applied to what CPUID says.
    pub quirks: Vec<Quirk>,
    /// RDPMC of counter 0 ran without faulting, as [`probe`] found; None for
    /// an offline decode (no CPU to ask).
    pub rdpmc_ok: Option<bool>,
}

fn bits(v: u32, lo: u32, n: u32) -> u32 {
    (v >> lo) & ((1u32 << n) - 1)
}

/// A mask of the `n` low bits (all bits for 64 and more).
pub(crate) fn low_mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

impl PmuInfo {
    /// Decodes the PMU from CPUID, `cpuid(leaf, subleaf)` giving EAX..EDX.
    /// Leaves above the maximum leaf CPUID reports are not read.
    pub fn decode(cpuid: impl Fn(u32, u32) -> [u32; 4]) -> PmuInfo {
        let leaf0 = cpuid(0, 0);
        let max = leaf0[0];
        let max_ext = cpuid(0x8000_0000, 0)[0];
        let get = |leaf: u32, sub: u32| {
            let ok = if leaf >= 0x8000_0000 {
                max_ext >= leaf
            } else {
                max >= leaf
            };
            if ok {
                cpuid(leaf, sub)
            } else {
                [0; 4]
            }
        };
        let mut vendor = Vec::new();
        for r in [leaf0[1], leaf0[3], leaf0[2]] {
            vendor.extend_from_slice(&r.to_le_bytes());
        }
        let vendor = String::from_utf8_lossy(&vendor)
            .trim_end_matches('\0')
            .to_string();
        let leaf1 = get(1, 0);
        let leaf7 = get(7, 0);
        let mut p = PmuInfo {
            vendor,
            signature: leaf1[0],
            pdcm: leaf1[2] & (1 << 15) != 0,
            tsx: leaf7[1] & ((1 << 4) | (1 << 11)) != 0,
            hypervisor: leaf1[2] & (1 << 31) != 0,
            ..Default::default()
        };
        // The original Pentium: family 5 (CPUID.01H:EAX[11:8]) with RDMSR
        // (CPUID.01H:EDX[5]); its counters are not architectural.
        if p.vendor == "GenuineIntel" && bits(leaf1[0], 8, 4) == 5 && leaf1[3] & (1 << 5) != 0 {
            p.p5 = Some(P5Pmu {
                mmx: leaf1[3] & (1 << 23) != 0,
                cesr: None,
            });
            p.gp_counters = 2;
            p.gp_width = p5::P5_WIDTH;
            p.gp_mask = 0b11;
            return p;
        }
        if leaf7[3] & (1 << 15) != 0 {
            p.core_type = Some(match bits(get(0x1a, 0)[0], 24, 8) as u8 {
                0x20 => CoreType::Atom,
                0x40 => CoreType::Core,
                t => CoreType::Other(t),
            });
        }
        if p.vendor == "AuthenticAMD" || p.vendor == "HygonGenuine" {
            let ecx = get(0x8000_0001, 0)[2];
            let [eax22, ebx22, ecx22, _] = get(0x8000_0022, 0);
            let amd = AmdPmu {
                perfmon_v2: eax22 & 1 != 0,
                core_ext: ecx & (1 << 23) != 0,
                nb_ext: ecx & (1 << 24) != 0,
                llc_ext: ecx & (1 << 28) != 0,
                nb_counters: bits(ebx22, 10, 6),
                umc_counters: bits(ebx22, 16, 6),
                lbr_v2_stack: bits(ebx22, 4, 6),
                active_umc_mask: ecx22,
            };
            p.version = if amd.perfmon_v2 { 2 } else { 1 };
            p.gp_counters = if amd.perfmon_v2 {
                bits(ebx22, 0, 4)
            } else if amd.core_ext {
                6
            } else {
                4
            };
            p.gp_width = 48;
            p.gp_mask = low_mask(p.gp_counters);
            p.amd = Some(amd);
            return p;
        }
        let [eax, ebx, ecx, edx] = get(0xa, 0);
        p.version = bits(eax, 0, 8);
        p.gp_counters = bits(eax, 8, 8);
        p.gp_width = bits(eax, 16, 8);
        p.gp_mask = low_mask(p.gp_counters);
        p.arch_events_len = bits(eax, 24, 8);
        p.arch_events = (0..p.arch_events_len.min(32))
            .filter(|i| ebx & (1 << i) == 0)
            .fold(0, |m, i| m | (1 << i));
        if p.version > 1 {
            p.fixed_counters = bits(edx, 0, 5);
            p.fixed_width = bits(edx, 5, 8);
            p.fixed_mask = low_mask(p.fixed_counters);
            // Bit 15 is AnyThread deprecation from version 5 (Linux reads it
            // there only); before, it is reserved.
            p.any_thread_deprecated = p.version >= 5 && edx & (1 << 15) != 0;
            if p.version >= 5 {
                // Fixed counter i exists if ECX[i] or EDX[4:0] > i.
                p.fixed_mask |= u64::from(ecx);
            }
        }
        let leaf23 = get(0x23, 0);
        if leaf23[0] & 1 != 0 {
            p.ext_leaf_23 = Some((leaf23[1] & 1 != 0, leaf23[1] & 2 != 0));
            if leaf23[0] & (1 << 1) != 0 {
                let [gp, fixed, _, _] = get(0x23, 1);
                p.gp_mask = u64::from(gp);
                p.fixed_mask = u64::from(fixed);
            }
            if leaf23[0] & (1 << 3) != 0 {
                p.arch_events = get(0x23, 3)[0];
            }
        }
        p.gp_counters = p.gp_mask.count_ones();
        p.fixed_counters = p.fixed_mask.count_ones();
        if (2..=4).contains(&p.version) && p.fixed_counters < 3 && !p.hypervisor {
            p.quirks.push(Quirk::FixedCountersAssumed {
                reported: p.fixed_counters,
            });
            p.fixed_counters = 3;
            p.fixed_mask = 0b111;
            if p.fixed_width == 0 {
                p.fixed_width = p.gp_width;
            }
        }
        quirks::apply(&mut p);
        p
    }

    /// Whether this is the original Pentium's PMU (CESR, CTR0, CTR1).
    pub fn is_p5(&self) -> bool {
        self.p5.is_some()
    }

    /// Whether counters are read with RDPMC: everywhere but on a Pentium
    /// without MMX technology (RDPMC came with it), or one whose RDPMC
    /// faulted when probed; those read CTR0/CTR1 with RDMSR.
    pub fn reads_with_rdpmc(&self) -> bool {
        match self.p5 {
            Some(p) => p.mmx && self.rdpmc_ok != Some(false),
            None => true,
        }
    }

    /// The Pentium event `name` stands for on this CPU (an SDM mnemonic or
    /// an alias), and whether this CPU has it (the MMX events need MMX).
    pub fn p5_event(&self, name: &str) -> Option<(&'static P5Event, bool)> {
        let p = self.p5?;
        p5::p5_event(name).map(|e| (e, p.mmx || !e.mmx))
    }

    /// Whether this is an AMD (or Hygon) PMU.
    pub fn is_amd(&self) -> bool {
        self.amd.is_some()
    }

    /// Whether there are programmable counters: CPUID enumerates some and, if
    /// probed live, RDPMC of counter 0 did not fault.
    pub fn present(&self) -> bool {
        if self.is_p5() {
            // Read with RDMSR where RDPMC is missing or faults.
            return true;
        }
        self.version > 0 && self.gp_counters > 0 && self.rdpmc_ok != Some(false)
    }

    /// Why there is no PMU, in words.
    pub fn absence(&self) -> String {
        if self.version == 0 || self.gp_counters == 0 {
            if self.is_amd() {
                format!("no PMU: {} enumerates no core counters", self.vendor)
            } else {
                format!(
                    "no PMU: CPUID.0AH version {}, {} counters",
                    self.version, self.gp_counters
                )
            }
        } else {
            format!(
                "no PMU: CPUID enumerates {} counters but RDPMC 0 faults (a hypervisor hiding the PMU?)",
                self.gp_counters
            )
        }
    }

    /// Whether there is a global enable register (Intel version 2 and later,
    /// AMD PerfMonV2).
    pub fn has_global(&self) -> bool {
        self.version >= 2
    }

    fn intel_or_amd(&self, intel: u32, amd: u32) -> u32 {
        if self.is_amd() {
            amd
        } else {
            intel
        }
    }

    /// IA32_PERF_GLOBAL_CTRL, or AMD's PerfCntrGlobalCtl.
    pub fn global_ctrl(&self) -> u32 {
        self.intel_or_amd(msr::IA32_PERF_GLOBAL_CTRL, msr::AMD_PERF_CNTR_GLOBAL_CTL)
    }

    /// IA32_PERF_GLOBAL_STATUS, or AMD's PerfCntrGlobalStatus.
    pub fn global_status(&self) -> u32 {
        self.intel_or_amd(
            msr::IA32_PERF_GLOBAL_STATUS,
            msr::AMD_PERF_CNTR_GLOBAL_STATUS,
        )
    }

    /// The write-1-to-clear overflow MSR (IA32_PERF_GLOBAL_OVF_CTRL /
    /// STATUS_RESET, or AMD's PerfCntrGlobalStatusClr).
    pub fn global_status_clear(&self) -> u32 {
        self.intel_or_amd(
            msr::IA32_PERF_GLOBAL_OVF_CTRL,
            msr::AMD_PERF_CNTR_GLOBAL_STATUS_CLR,
        )
    }

    /// Whether IA32_PERF_GLOBAL_INUSE exists (Intel version 4 and later).
    pub fn has_inuse(&self) -> bool {
        !self.is_amd() && self.version >= 4
    }

    /// The MSRs of general-purpose counter `i`: (event select, counter).
    /// On the Pentium both counters share CESR.
    pub fn counter_msrs(&self, i: u32) -> (u32, u32) {
        if self.is_p5() {
            return (msr::P5_CESR, msr::P5_CTR0 + i);
        }
        match self.amd {
            Some(a) if a.core_ext || a.perfmon_v2 => {
                (msr::AMD_PERF_CTL0 + 2 * i, msr::AMD_PERF_CTR0 + 2 * i)
            }
            Some(_) => (msr::AMD_K7_PERF_CTL0 + i, msr::AMD_K7_PERF_CTR0 + i),
            None => (msr::IA32_PERFEVTSEL0 + i, msr::IA32_PMC0 + i),
        }
    }

    /// The MSR that takes a full-width write of general-purpose counter `i`
    /// (AMD counters, IA32_A_PMCi with FW_WRITE), or None: then only EAX,
    /// sign-extended, can be written (IA32_PMCi).
    pub fn counter_full_write_msr(&self, i: u32) -> Option<u32> {
        if self.is_amd() || self.is_p5() {
            Some(self.counter_msrs(i).1)
        } else if self.perf_capabilities.unwrap_or(0) & PERF_CAP_FW_WRITE != 0 {
            Some(msr::IA32_A_PMC0 + i)
        } else {
            None
        }
    }

    /// Whether architectural event `i` (index into [`ARCH_EVENTS`]) is available.
    pub fn arch_event_available(&self, i: usize) -> bool {
        !self.is_amd() && i < 32 && self.arch_events & (1 << i) != 0
    }

    /// The event select and umask of the event `name` on this PMU (Intel
    /// architectural, or the AMD core event of the same meaning), and whether
    /// CPUID says it is available.
    pub fn event_by_name(&self, name: &str) -> Option<(u16, u8, bool)> {
        if self.is_p5() {
            self.p5_event(name)
                .map(|(e, avail)| (u16::from(e.event), 0, avail))
        } else if self.is_amd() {
            AMD_EVENTS
                .iter()
                .find(|e| e.0 == name)
                .map(|&(_, ev, um)| (ev, um, true))
        } else {
            ARCH_EVENTS.iter().position(|e| e.name == name).map(|i| {
                let e = ARCH_EVENTS[i];
                (u16::from(e.event), e.umask, self.arch_event_available(i))
            })
        }
    }

    /// Human-readable report, as `msrbatch pmu` prints it.
    pub fn report(&self, cpu: &str) -> String {
        let mut s = String::new();
        let kind = match self.core_type {
            Some(CoreType::Core) => " (hybrid: Core)".to_string(),
            Some(CoreType::Atom) => " (hybrid: Atom)".to_string(),
            Some(CoreType::Other(t)) => format!(" (hybrid: core type {t:#x})"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "{cpu}: {} signature {:#x}{kind}",
            self.vendor, self.signature
        );
        if !self.present() {
            let _ = writeln!(s, "{}", self.absence());
            return s;
        }
        for q in &self.quirks {
            let _ = writeln!(s, "quirk: {q}");
        }
        if let Some(p) = self.p5 {
            self.report_p5(p, &mut s);
            return s;
        }
        if let Some(a) = self.amd {
            let (ctl, _) = self.counter_msrs(0);
            let _ = writeln!(
                s,
                "AMD core performance counters: {}, {} bits wide (PERF_CTL0 at {ctl:#x})",
                self.gp_counters, self.gp_width
            );
            let yes = |b: bool| if b { "yes" } else { "no" };
            let _ = writeln!(
                s,
                "PerfCtrExtCore: {}, PerfCtrExtNB: {}, PerfCtrExtLLC: {}",
                yes(a.core_ext),
                yes(a.nb_ext),
                yes(a.llc_ext)
            );
            let _ = writeln!(s, "PerfMonV2 (global control): {}", yes(a.perfmon_v2));
            if a.perfmon_v2 {
                let _ = writeln!(
                    s,
                    "PerfMonV2 counters: {} core, {} northbridge, {} UMC (active UMC mask {:#x}); LBR v2 stack {}",
                    self.gp_counters, a.nb_counters, a.umc_counters, a.active_umc_mask, a.lbr_v2_stack
                );
            }
            let _ = writeln!(s, "events by name:");
            for (name, ev, um) in AMD_EVENTS {
                let _ = writeln!(s, "  {name:<17} event=0x{ev:02x},umask=0x{um:02x}");
            }
            return s;
        }
        let _ = writeln!(s, "architectural perfmon version {}", self.version);
        let _ = writeln!(
            s,
            "general-purpose counters: {} per logical CPU, {} bits wide (IA32_PMC0.., IA32_PERFEVTSEL0..)",
            self.gp_counters, self.gp_width
        );
        let _ = writeln!(
            s,
            "fixed counters: {}, {} bits wide (IA32_FIXED_CTR0.., RDPMC with bit 30)",
            self.fixed_counters, self.fixed_width
        );
        if let Some((umask2, eq)) = self.ext_leaf_23 {
            let _ = writeln!(
                s,
                "CPUID.23H: GP counter bitmap {:#x}, fixed counter bitmap {:#x}, UMASK2 {umask2}, EQ {eq}",
                self.gp_mask, self.fixed_mask
            );
        }
        if let Some(cap) = self.perf_capabilities {
            let _ = writeln!(s, "IA32_PERF_CAPABILITIES: {cap:#x}");
        }
        let _ = writeln!(s, "architectural events:");
        for (i, e) in ARCH_EVENTS.iter().enumerate() {
            let avail = self.arch_event_available(i);
            let _ = writeln!(
                s,
                "  {:<17} event=0x{:02x},umask=0x{:02x}  {}",
                e.name,
                e.event,
                e.umask,
                if avail { "available" } else { "not available" }
            );
        }
        s
    }

    fn report_p5(&self, p: P5Pmu, s: &mut String) {
        let _ = writeln!(
            s,
            "Pentium (P5) counters: 2, {} bits wide (CTR0 at 0x12, CTR1 at 0x13), controlled by CESR at 0x11",
            self.gp_width
        );
        let _ = writeln!(
            s,
            "MMX technology: {}; counters read with {}",
            if p.mmx { "yes" } else { "no" },
            if self.reads_with_rdpmc() {
                "RDPMC (ECX 0 and 1)"
            } else if p.mmx {
                "RDMSR (RDPMC faulted)"
            } else {
                "RDMSR (no RDPMC before MMX)"
            }
        );
        if let Some(v) = p.cesr {
            let _ = writeln!(s, "CESR = {v:#x}:");
            for l in cesr_describe(v, p.mmx) {
                let _ = writeln!(s, "  {l}");
            }
        }
        let _ = writeln!(
            s,
            "events (SDM Table A-19; flags: os = CPL 0-2, usr = CPL 3, clocks = duration, pc = pin on overflow):"
        );
        for e in P5_EVENTS.iter().filter(|e| p.mmx || !e.mmx) {
            let only = e
                .counter
                .map_or(String::new(), |c| format!("  CTR{c} only"));
            let _ = writeln!(s, "  {:<46} event=0x{:02x}{only}", e.name, e.event);
        }
        for (alias, name) in P5_ALIASES {
            if self.p5_event(alias).is_some_and(|(_, ok)| ok) {
                let _ = writeln!(s, "  {alias} is {name}");
            }
        }
    }

    /// The decode as one JSON object.
    pub fn to_json(&self, cpu: &str) -> String {
        let mut f = vec![
            format!("\"cpu\":{}", json_str(cpu)),
            format!("\"vendor\":{}", json_str(&self.vendor)),
            format!("\"signature\":\"{:#x}\"", self.signature),
            format!("\"present\":{}", self.present()),
            format!("\"version\":{}", self.version),
            format!("\"gp_counters\":{}", self.gp_counters),
            format!("\"gp_width\":{}", self.gp_width),
            format!("\"gp_mask\":\"{:#x}\"", self.gp_mask),
            format!("\"fixed_counters\":{}", self.fixed_counters),
            format!("\"fixed_width\":{}", self.fixed_width),
            format!("\"fixed_mask\":\"{:#x}\"", self.fixed_mask),
        ];
        let core = match self.core_type {
            Some(CoreType::Core) => "\"core\"".to_string(),
            Some(CoreType::Atom) => "\"atom\"".to_string(),
            Some(CoreType::Other(t)) => format!("\"{t:#x}\""),
            None => "null".to_string(),
        };
        f.push(format!("\"core_type\":{core}"));
        let events: Vec<String> = if let Some(p) = self.p5 {
            P5_EVENTS
                .iter()
                .filter(|e| p.mmx || !e.mmx)
                .map(|e| json_str(e.name))
                .collect()
        } else if self.is_amd() {
            AMD_EVENTS.iter().map(|e| json_str(e.0)).collect()
        } else {
            ARCH_EVENTS
                .iter()
                .enumerate()
                .filter(|(i, _)| self.arch_event_available(*i))
                .map(|(_, e)| json_str(e.name))
                .collect()
        };
        f.push(format!("\"events\":[{}]", events.join(",")));
        f.push(format!(
            "\"rdpmc_ok\":{}",
            self.rdpmc_ok.map_or("null".into(), |b| b.to_string())
        ));
        let quirks: Vec<String> = self
            .quirks
            .iter()
            .map(|q| json_str(&q.to_string()))
            .collect();
        f.push(format!("\"quirks\":[{}]", quirks.join(",")));
        f.push(format!("\"hypervisor\":{}", self.hypervisor));
        f.push(match self.p5 {
            Some(p) => format!(
                "\"p5\":{{\"mmx\":{},\"rdpmc\":{},\"cesr\":{}}}",
                p.mmx,
                self.reads_with_rdpmc(),
                p.cesr.map_or("null".into(), |v| format!("\"{v:#x}\""))
            ),
            None => "\"p5\":null".into(),
        });
        if let Some(a) = self.amd {
            f.push(format!(
                "\"amd\":{{\"perfmon_v2\":{},\"core_ext\":{},\"nb_ext\":{},\"llc_ext\":{},\"nb_counters\":{},\"umc_counters\":{},\"lbr_v2_stack\":{},\"active_umc_mask\":\"{:#x}\"}}",
                a.perfmon_v2, a.core_ext, a.nb_ext, a.llc_ext, a.nb_counters, a.umc_counters, a.lbr_v2_stack, a.active_umc_mask
            ));
        } else {
            f.push(format!(
                "\"any_thread_deprecated\":{}",
                self.any_thread_deprecated
            ));
            f.push(match self.ext_leaf_23 {
                Some((u, e)) => format!("\"leaf_23h\":{{\"umask2\":{u},\"eq\":{e}}}"),
                None => "\"leaf_23h\":null".into(),
            });
        }
        format!("{{{}}}", f.join(","))
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Reads CPUID on `cpu` and RDPMC of general-purpose counter 0 in one batch,
/// and decodes the PMU. RDPMC's status decides [`PmuInfo::rdpmc_ok`]: a
/// hypervisor may enumerate counters it does not provide, and TCG has none.
/// With PDCM, IA32_PERF_CAPABILITIES is read too.
pub fn probe<B: Backend + ?Sized>(dev: &B, cpu: u32) -> crate::Result<PmuInfo> {
    Ok(probe_cpuid(dev, cpu)?.1)
}

/// [`probe`], also returning the CPUID leaves it read (as [`CPUID_LEAVES`]).
pub fn probe_cpuid<B: Backend + ?Sized>(dev: &B, cpu: u32) -> crate::Result<(CpuidCpu, PmuInfo)> {
    let mut b = Batch::new();
    for &(leaf, subleaf) in CPUID_LEAVES {
        b.push(cpu, Op::Cpuid { leaf, subleaf });
    }
    let rdpmc = b.push(cpu, Op::RdPmc { ecx: 0 });
    let cap = b.push(
        cpu,
        Op::RdMsr {
            msr: msr::IA32_PERF_CAPABILITIES,
        },
    );
    dev.run(&mut b)?;
    let leaves = CPUID_LEAVES
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let v = match b.result(i).map(|r| r.value) {
                Some(Ok(Value::Cpuid { eax, ebx, ecx, edx })) => [eax, ebx, ecx, edx],
                _ => [0; 4],
            };
            (k, v)
        })
        .collect();
    let leaves = CpuidCpu {
        label: format!("CPU {cpu}"),
        leaves,
    };
    let mut p = leaves.pmu();
    p.rdpmc_ok = Some(matches!(b.result(rdpmc).map(|r| r.value), Some(Ok(_))));
    if p.pdcm && !p.is_amd() {
        p.perf_capabilities = match b.result(cap).map(|r| r.value) {
            Some(Ok(Value::U64(v))) => Some(v),
            _ => None,
        };
    }
    if let Some(p5) = p.p5.as_mut() {
        // Only a Pentium has CESR: read it once CPUID said so.
        let mut b = Batch::new();
        b.push(cpu, Op::RdMsr { msr: msr::P5_CESR });
        dev.run(&mut b)?;
        if let Some(Ok(Value::U64(v))) = b.result(0).map(|r| r.value) {
            p5.cesr = Some(v);
        }
    }
    Ok((leaves, p))
}

/// The CPUID leaves of one CPU of a dump. Leaves absent from the dump read as zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuidCpu {
    /// The CPU's label in the dump (`CPU 0`, `Logical CPU #19`).
    pub label: String,
    /// (leaf, subleaf) -> EAX, EBX, ECX, EDX.
    pub leaves: BTreeMap<(u32, u32), [u32; 4]>,
}

impl CpuidCpu {
    /// CPUID `leaf`/`subleaf` as the dump has it, zero if absent.
    pub fn get(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        self.leaves.get(&(leaf, subleaf)).copied().unwrap_or([0; 4])
    }

    /// Decodes this CPU's PMU.
    pub fn pmu(&self) -> PmuInfo {
        PmuInfo::decode(|l, s| self.get(l, s))
    }
}

/// A CPUID dump: `cpuid -r` output or an AIDA64 / InstLatx64 CPUID dump,
/// one or more CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuidDump {
    /// The CPUs in the order the dump lists them.
    pub cpus: Vec<CpuidCpu>,
}

/// A register or leaf field of a dump: up to 8 hex digits, with or without
/// `0x`. This is the dump tools' own format (always hex, zero-padded, as in
/// `0000000A`), not a number a user writes, so it is not read by the
/// [number grammar](crate::number), whose leading-zero rule is for decimal.
fn hex32(s: &str) -> Option<u32> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    (!s.is_empty() && s.len() <= 8)
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

/// `CPUID 0000000A: 07300403-00000000-00000000-00000603 [SL 00] ...`
fn parse_aida(rest: &str) -> Option<(u32, Option<u32>, [u32; 4])> {
    let (leaf, rest) = rest.split_once(':')?;
    let leaf = hex32(leaf.trim())?;
    let mut words = rest.split_whitespace();
    let regs: Vec<u32> = words.next()?.split('-').map(hex32).collect::<Option<_>>()?;
    let regs: [u32; 4] = regs.try_into().ok()?;
    let tail: Vec<&str> = words.collect();
    let sub = tail
        .windows(2)
        .find(|w| w[0] == "[SL")
        .and_then(|w| hex32(w[1].trim_end_matches(']')));
    Some((leaf, sub, regs))
}

/// `   0x0000000a 0x00: eax=0x07300403 ebx=0x00000000 ecx=0x00000000 edx=0x00000603`
fn parse_cpuid_r(line: &str) -> Option<(u32, u32, [u32; 4])> {
    let (head, regs) = line.split_once(':')?;
    let mut h = head.split_whitespace();
    let leaf = hex32(h.next()?.strip_prefix("0x")?)?;
    let sub = hex32(h.next()?.strip_prefix("0x")?)?;
    if h.next().is_some() {
        return None;
    }
    let mut out = [0u32; 4];
    let mut seen = 0;
    for (i, name) in ["eax=", "ebx=", "ecx=", "edx="].iter().enumerate() {
        let w = regs.split_whitespace().find(|w| w.starts_with(name))?;
        out[i] = hex32(&w[name.len()..])?;
        seen += 1;
    }
    (seen == 4).then_some((leaf, sub, out))
}

impl CpuidDump {
    /// Parses a dump. Lines that are neither CPUID lines nor CPU headers are
    /// skipped (AIDA64 dumps carry much else); a CPUID line that does not
    /// parse is an error naming its line.
    pub fn parse(text: &str) -> Result<CpuidDump, String> {
        let mut cpus: Vec<CpuidCpu> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            let bad = || format!("line {}: not a CPUID line: {t}", n + 1);
            if t.starts_with('#') || t.is_empty() {
                continue;
            }
            if let Some(label) = t
                .strip_prefix("------[")
                .and_then(|r| r.split(']').next())
                .filter(|l| l.contains("CPU #"))
            {
                let label = label.rsplit(" / ").next().unwrap_or(label).trim();
                cpus.push(CpuidCpu {
                    label: label.to_string(),
                    ..Default::default()
                });
                continue;
            }
            if let Some(label) = t.strip_suffix(':').filter(|l| {
                l.strip_prefix("CPU")
                    .is_some_and(|r| r.trim().chars().all(|c| c.is_ascii_digit()))
            }) {
                cpus.push(CpuidCpu {
                    label: label.to_string(),
                    ..Default::default()
                });
                continue;
            }
            let entry = if let Some(rest) = t.strip_prefix("CPUID ") {
                let (leaf, sub, regs) = parse_aida(rest).ok_or_else(bad)?;
                Some((leaf, sub, regs))
            } else if t.starts_with("0x") && t.contains("eax=") {
                let (leaf, sub, regs) = parse_cpuid_r(t).ok_or_else(bad)?;
                Some((leaf, Some(sub), regs))
            } else {
                None
            };
            let Some((leaf, sub, regs)) = entry else {
                continue;
            };
            if cpus.is_empty() {
                cpus.push(CpuidCpu {
                    label: "CPU 0".into(),
                    ..Default::default()
                });
            }
            let cpu = cpus.last_mut().expect("pushed above");
            // Old AIDA64 dumps repeat a leaf without [SL nn]: successive subleaves.
            let sub = sub
                .unwrap_or_else(|| cpu.leaves.range((leaf, 0)..=(leaf, u32::MAX)).count() as u32);
            cpu.leaves.insert((leaf, sub), regs);
        }
        cpus.retain(|c| !c.leaves.is_empty());
        if cpus.is_empty() {
            return Err(
                "no CPUID lines (want `cpuid -r` or AIDA64 `CPUID 0000000A: ...` lines)".into(),
            );
        }
        Ok(CpuidDump { cpus })
    }

    /// Reads and parses a dump file.
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<CpuidDump, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// PERFEVTSEL flag bits and their names, in canonical order.
const FLAGS: &[(&str, u64)] = &[
    ("usr", evsel::USR),
    ("os", evsel::OS),
    ("edge", evsel::EDGE),
    ("pc", evsel::PC),
    ("int", evsel::INT),
    ("any", evsel::ANY),
    ("en", evsel::EN),
    ("inv", evsel::INV),
];

/// The flag bit called `name` (usr, os, edge, pc, int, any, en, inv).
pub fn evsel_flag(name: &str) -> Option<u64> {
    FLAGS.iter().find(|(n, _)| *n == name).map(|f| f.1)
}

/// A field's value in the [number grammar](crate::number), at most `max`.
fn field(k: &str, s: &str, max: u64) -> Result<u64, String> {
    match crate::number::parse_u64(s) {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(format!("{k}={s}: want a number up to {max:#x}")),
        Err(e) => Err(format!("{k}={s}: {e}")),
    }
}

/// Sets field `k` (event, umask, cmask) of `v` to `val`.
pub fn evsel_set_field(v: u64, k: &str, val: &str) -> Result<u64, String> {
    Ok(match k {
        "event" => {
            let e = field(k, val, 0xfff)?;
            (v & !0xf_0000_00ff) | (e & 0xff) | ((e >> 8) << 32)
        }
        "umask" => (v & !0xff00) | (field(k, val, 0xff)? << 8),
        "cmask" => (v & !0xff00_0000) | (field(k, val, 0xff)? << evsel::CMASK_SHIFT),
        _ => return Err(format!("unknown field '{k}' (event, umask, cmask)")),
    })
}

/// Encodes `event=..,umask=..,cmask=..,usr,os,...` (or an Intel architectural
/// event name) into an IA32_PERFEVTSEL value. Event selects above 0xff put
/// bits 11:8 into 35:32 (AMD's extended event select).
pub fn evsel_encode(spec: &str) -> Result<u64, String> {
    let mut v = 0u64;
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some((k, val)) = item.split_once('=') {
            v = evsel_set_field(v, k, val)?;
        } else if let Some(bit) = evsel_flag(item) {
            v |= bit;
        } else if let Some(e) = ARCH_EVENTS.iter().find(|e| e.name == item) {
            v = (v & !0xf_0000_ffff) | u64::from(e.event) | (u64::from(e.umask) << 8);
        } else {
            return Err(format!("unknown item '{item}' (fields: event=, umask=, cmask=; flags: usr os edge pc int any en inv; names: {})",
                ARCH_EVENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(" ")));
        }
    }
    Ok(v)
}

/// Decodes an IA32_PERFEVTSEL value into the canonical spec that
/// [`evsel_encode`] turns back into the same value.
pub fn evsel_decode(v: u64) -> Result<String, String> {
    let known = 0xf_ffff_ffffu64;
    if v & !known != 0 {
        return Err(format!("bits {:#x} are not PERFEVTSEL fields", v & !known));
    }
    let event = (v & 0xff) | (((v >> 32) & 0xf) << 8);
    let mut s = format!("event=0x{event:02x},umask=0x{:02x}", (v >> 8) & 0xff);
    let cmask = (v >> evsel::CMASK_SHIFT) & 0xff;
    if cmask != 0 {
        let _ = write!(s, ",cmask=0x{cmask:02x}");
    }
    for (name, bit) in FLAGS {
        if v & bit != 0 {
            let _ = write!(s, ",{name}");
        }
    }
    Ok(s)
}

/// The canonical form of an event name some PMU knows: an Intel
/// architectural name, an AMD one, or a Pentium (P5) mnemonic of SDM Table
/// A-19 (any case). Whether a given CPU has it is [`PmuInfo::event_by_name`]'s
/// question.
pub fn known_event_name(name: &str) -> Option<&'static str> {
    ARCH_EVENTS
        .iter()
        .map(|e| e.name)
        .chain(AMD_EVENTS.iter().map(|e| e.0))
        .find(|k| *k == name)
        .or_else(|| {
            P5_EVENTS
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(name))
                .map(|e| e.name)
        })
}

/// The Intel architectural name of an event select/umask pair, if it has one.
pub fn event_name(v: u64) -> Option<&'static str> {
    let (ev, um) = ((v & 0xff) as u8, ((v >> 8) & 0xff) as u8);
    ARCH_EVENTS
        .iter()
        .find(|e| e.event == ev && e.umask == um && v >> 32 & 0xf == 0)
        .map(|e| e.name)
}

#[cfg(test)]
pub(crate) mod tests;
