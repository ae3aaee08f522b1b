// SPDX-License-Identifier: GPL-2.0
//! A decoded PMU for people and programs: the report `msrbatch pmu` prints,
//! and the same as one JSON object.

use super::{
    cesr_describe, CoreType, P5Pmu, PmuInfo, AMD_EVENTS, ARCH_EVENTS, P5_ALIASES, P5_EVENTS,
};
use serde::Serialize;
use std::fmt::Write as _;

impl PmuInfo {
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
        let hex = |v: u64| format!("{v:#x}");
        let events = if let Some(p) = self.p5 {
            P5_EVENTS
                .iter()
                .filter(|e| p.mmx || !e.mmx)
                .map(|e| e.name)
                .collect()
        } else if self.is_amd() {
            AMD_EVENTS.iter().map(|e| e.0).collect()
        } else {
            ARCH_EVENTS
                .iter()
                .enumerate()
                .filter(|(i, _)| self.arch_event_available(*i))
                .map(|(_, e)| e.name)
                .collect()
        };
        let intel = self.amd.is_none();
        let json = Json {
            cpu,
            vendor: &self.vendor,
            signature: hex(self.signature.into()),
            present: self.present(),
            version: self.version,
            gp_counters: self.gp_counters,
            gp_width: self.gp_width,
            gp_mask: hex(self.gp_mask),
            fixed_counters: self.fixed_counters,
            fixed_width: self.fixed_width,
            fixed_mask: hex(self.fixed_mask),
            core_type: self.core_type.map(|t| match t {
                CoreType::Core => "core".into(),
                CoreType::Atom => "atom".into(),
                CoreType::Other(t) => hex(t.into()),
            }),
            events,
            rdpmc_ok: self.rdpmc_ok,
            quirks: self.quirks.iter().map(ToString::to_string).collect(),
            hypervisor: self.hypervisor,
            p5: self.p5.map(|p| P5Json {
                mmx: p.mmx,
                rdpmc: self.reads_with_rdpmc(),
                cesr: p.cesr.map(hex),
            }),
            amd: self.amd.map(|a| AmdJson {
                perfmon_v2: a.perfmon_v2,
                core_ext: a.core_ext,
                nb_ext: a.nb_ext,
                llc_ext: a.llc_ext,
                nb_counters: a.nb_counters,
                umc_counters: a.umc_counters,
                lbr_v2_stack: a.lbr_v2_stack,
                active_umc_mask: hex(a.active_umc_mask.into()),
            }),
            any_thread_deprecated: intel.then_some(self.any_thread_deprecated),
            leaf_23h: intel.then_some(
                self.ext_leaf_23
                    .map(|(umask2, eq)| Leaf23Json { umask2, eq }),
            ),
        };
        serde_json::to_string(&json).expect("plain data serializes")
    }
}

/// [`PmuInfo::to_json`]'s object, its fields in this order; `amd` only for
/// AMD, `any_thread_deprecated` and `leaf_23h` only for the others.
#[derive(Serialize)]
struct Json<'a> {
    cpu: &'a str,
    vendor: &'a str,
    signature: String,
    present: bool,
    version: u32,
    gp_counters: u32,
    gp_width: u32,
    gp_mask: String,
    fixed_counters: u32,
    fixed_width: u32,
    fixed_mask: String,
    core_type: Option<String>,
    events: Vec<&'static str>,
    rdpmc_ok: Option<bool>,
    quirks: Vec<String>,
    hypervisor: bool,
    p5: Option<P5Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    amd: Option<AmdJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    any_thread_deprecated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leaf_23h: Option<Option<Leaf23Json>>,
}

#[derive(Serialize)]
struct P5Json {
    mmx: bool,
    rdpmc: bool,
    cesr: Option<String>,
}

#[derive(Serialize)]
struct AmdJson {
    perfmon_v2: bool,
    core_ext: bool,
    nb_ext: bool,
    llc_ext: bool,
    nb_counters: u32,
    umc_counters: u32,
    lbr_v2_stack: u32,
    active_umc_mask: String,
}

#[derive(Serialize)]
struct Leaf23Json {
    umask2: bool,
    eq: bool,
}
