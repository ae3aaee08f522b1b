// SPDX-License-Identifier: GPL-2.0
//! What a CPU's core PMU is: the CPUID decode (live, through a
//! [`Backend`], or offline from a [`CpuidDump`]) and the architectural event
//! names. Beside it: [`evsel`] (event select values and their text form),
//! [`p5`] (the original Pentium's CESR), the dump formats, and the report
//! and JSON of a decode ([`PmuInfo::report`], [`PmuInfo::to_json`]).
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

mod dump;
pub mod evsel;
pub mod p5;
pub mod quirks;
mod render;
pub use dump::{CpuidCpu, CpuidDump};
pub use p5::{
    cesr_decode, cesr_describe, cesr_encode, p5_event, p5_event_at, P5Event, P5_ALIASES, P5_EVENTS,
};
pub use quirks::EventConstraint;

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
