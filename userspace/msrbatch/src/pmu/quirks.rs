// SPDX-License-Identifier: GPL-2.0
//! The per-model rules Linux's PMU setup adds to what CPUID says
//! (arch/x86/events/intel/core.c, `intel_pmu_init` and
//! `intel_pmu_hw_config`), where they change what `pmu` reports and what
//! `stat` programs:
//!
//! - event constraints: on Core 2, Nehalem and Westmere some events count
//!   on one or two of the general-purpose counters only
//!   (`intel_core2_event_constraints`, `intel_nehalem_event_constraints`,
//!   `intel_westmere_event_constraints`); CPUID does not say so;
//! - AnyThread (IA32_PERFEVTSELx bit 21): Linux refuses it before perfmon
//!   version 3 (`intel_pmu_hw_config`: "if (x86_pmu.version < 3) return
//!   -EINVAL") and, from version 5, where CPUID.0AH:EDX\[15\] deprecates it
//!   (the `any` format attribute is then not offered).
//!
//! The fixed-counter quirk of perfmon versions 2-4 is applied by the decode
//! itself ([`Quirk::FixedCountersAssumed`]).

use super::{PmuInfo, Quirk};

/// An event Linux counts on some general-purpose counters only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventConstraint {
    /// The event select (IA32_PERFEVTSELx bits 7:0); any umask.
    pub event: u8,
    /// The counters that count it (bit i: IA32_PMCi).
    pub counters: u64,
    /// The event's name in the kernel's table.
    pub name: &'static str,
}

const fn ec(event: u8, counters: u64, name: &'static str) -> EventConstraint {
    EventConstraint {
        event,
        counters,
        name,
    }
}

/// The models (CPUID family 6) a table of constraints applies to, and the
/// kernel's name for the table.
struct ModelConstraints {
    table: &'static str,
    models: &'static [u32],
    constraints: &'static [EventConstraint],
}

/// The `INTEL_EVENT_CONSTRAINT` lines of the kernel's tables (the
/// `FIXED_EVENT_CONSTRAINT` lines are the fixed counters, which the counter
/// planner knows); models from arch/x86/include/asm/intel-family.h as
/// `intel_pmu_init`'s switch lists them.
const MODELS: &[ModelConstraints] = &[
    ModelConstraints {
        table: "intel_core2_event_constraints",
        // INTEL_CORE2_MEROM, _MEROM_L, _PENRYN, _DUNNINGTON
        models: &[0x0f, 0x16, 0x17, 0x1d],
        constraints: &[
            ec(0x10, 0x1, "FP_COMP_OPS_EXE"),
            ec(0x11, 0x2, "FP_ASSIST"),
            ec(0x12, 0x2, "MUL"),
            ec(0x13, 0x2, "DIV"),
            ec(0x14, 0x1, "CYCLES_DIV_BUSY"),
            ec(0x18, 0x1, "IDLE_DURING_DIV"),
            ec(0x19, 0x2, "DELAYED_BYPASS"),
            ec(0xa1, 0x1, "RS_UOPS_DISPATCH_CYCLES"),
            ec(0xc9, 0x1, "ITLB_MISS_RETIRED"),
            ec(0xcb, 0x1, "MEM_LOAD_RETIRED"),
        ],
    },
    ModelConstraints {
        table: "intel_nehalem_event_constraints",
        // INTEL_NEHALEM, _NEHALEM_EP, _NEHALEM_EX
        models: &[0x1e, 0x1a, 0x2e],
        constraints: &[
            ec(0x40, 0x3, "L1D_CACHE_LD"),
            ec(0x41, 0x3, "L1D_CACHE_ST"),
            ec(0x42, 0x3, "L1D_CACHE_LOCK"),
            ec(0x43, 0x3, "L1D_ALL_REF"),
            ec(0x48, 0x3, "L1D_PEND_MISS"),
            ec(0x4e, 0x3, "L1D_PREFETCH"),
            ec(0x51, 0x3, "L1D"),
            ec(0x63, 0x3, "CACHE_LOCK_CYCLES"),
        ],
    },
    ModelConstraints {
        table: "intel_westmere_event_constraints",
        // INTEL_WESTMERE, _WESTMERE_EP, _WESTMERE_EX
        models: &[0x25, 0x2c, 0x2f],
        constraints: &[
            ec(0x51, 0x3, "L1D"),
            ec(0x60, 0x1, "OFFCORE_REQUESTS_OUTSTANDING"),
            ec(0x63, 0x3, "CACHE_LOCK_CYCLES"),
            ec(0xb3, 0x1, "SNOOPQ_REQUEST_OUTSTANDING"),
        ],
    },
];

/// Family and model from a CPUID.01H:EAX signature (the extended model
/// counts for families 6 and 15, the extended family for 15).
pub fn family_model(signature: u32) -> (u32, u32) {
    let family = (signature >> 8) & 0xf;
    let mut model = (signature >> 4) & 0xf;
    if family == 6 || family == 0xf {
        model |= ((signature >> 16) & 0xf) << 4;
    }
    let family = if family == 0xf {
        family + ((signature >> 20) & 0xff)
    } else {
        family
    };
    (family, model)
}

fn model_constraints(p: &PmuInfo) -> Option<&'static ModelConstraints> {
    if p.vendor != "GenuineIntel" || p.is_p5() {
        return None;
    }
    match family_model(p.signature) {
        (6, model) => MODELS.iter().find(|m| m.models.contains(&model)),
        _ => None,
    }
}

/// Adds the model's quirks to a decoded PMU (called by the decode).
pub(super) fn apply(p: &mut PmuInfo) {
    if let Some(m) = model_constraints(p) {
        if p.version > 0 {
            p.quirks.push(Quirk::EventConstraints {
                table: m.table,
                constraints: m.constraints,
            });
        }
    }
}

impl PmuInfo {
    /// The events Linux counts on some general-purpose counters only, on
    /// this model.
    pub fn event_constraints(&self) -> &'static [EventConstraint] {
        self.quirks
            .iter()
            .find_map(|q| match q {
                Quirk::EventConstraints { constraints, .. } => Some(*constraints),
                _ => None,
            })
            .unwrap_or(&[])
    }

    /// The general-purpose counters that count the event select `config`
    /// (bit i: counter i): all of them, less those the model's constraints
    /// exclude.
    pub fn event_counter_mask(&self, config: u64) -> u64 {
        let event = (config & 0xff) as u8;
        self.event_constraints()
            .iter()
            .find(|c| c.event == event && config & (0xf << 32) == 0)
            .map_or(self.gp_mask, |c| self.gp_mask & c.counters)
    }

    /// Why this PMU does not take AnyThread (IA32_PERFEVTSELx bit 21), or
    /// None if it does.
    pub fn any_thread_refusal(&self) -> Option<String> {
        if self.is_amd() {
            Some(format!(
                "{}'s PERF_CTL has no AnyThread bit (bit 21 is reserved)",
                self.vendor
            ))
        } else if self.version < 3 {
            Some(format!(
                "AnyThread needs architectural perfmon version 3 (this CPU has version {}); Linux refuses it too",
                self.version
            ))
        } else if self.any_thread_deprecated {
            Some("CPUID.0AH:EDX[15] says AnyThread is deprecated on this CPU (it counts this thread only); Linux does not offer it".into())
        } else {
            None
        }
    }
}

/// The text of [`Quirk::EventConstraints`].
pub(super) fn describe_constraints(
    f: &mut std::fmt::Formatter<'_>,
    table: &str,
    constraints: &[EventConstraint],
) -> std::fmt::Result {
    write!(f, "Linux's {table}: events counted on some counters only:")?;
    for (i, c) in constraints.iter().enumerate() {
        let counters: Vec<String> = (0..64)
            .filter(|b| c.counters & (1 << b) != 0)
            .map(|b| format!("PMC{b}"))
            .collect();
        write!(
            f,
            "{} 0x{:02x} {} on {}",
            if i == 0 { "" } else { "," },
            c.event,
            c.name,
            counters.join("/")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::tests::dump;

    #[test]
    fn family_and_model_of_real_signatures() {
        // Core 2 Conroe 000006F6, Nehalem-EP 000106A2, Skylake 000506E3,
        // Zen 2 00870F10 (family 0xf + 8 = 0x17).
        assert_eq!(family_model(0x6f6), (6, 0x0f));
        assert_eq!(family_model(0x106a2), (6, 0x1a));
        assert_eq!(family_model(0x506e3), (6, 0x5e));
        assert_eq!(family_model(0x870f10), (0x17, 0x71));
    }

    #[test]
    fn core2_and_nehalem_get_linuxs_event_constraints() {
        let p = dump("core2-conroe.txt").cpus[0].pmu();
        assert_eq!(p.event_constraints().len(), 10);
        // MUL (0x12) on PMC1 only, FP_COMP_OPS_EXE (0x10) on PMC0 only,
        // whatever the umask and flags; an unconstrained event anywhere.
        assert_eq!(p.event_counter_mask(0x43_0112), 0b10);
        assert_eq!(p.event_counter_mask(0x0110), 0b01);
        assert_eq!(p.event_counter_mask(0xc4), 0b11);
        assert!(p.report("CPU 0").contains(
            "quirk: Linux's intel_core2_event_constraints: events counted on some counters only: 0x10 FP_COMP_OPS_EXE on PMC0, 0x11 FP_ASSIST on PMC1,"
        ));
        let n = dump("nehalem-ep.txt").cpus[0].pmu();
        assert_eq!(n.gp_mask, 0b1111);
        assert_eq!(n.event_counter_mask(0x0151), 0b0011);
        assert_eq!(n.event_counter_mask(0x0110), 0b1111);
        // Later models have none: their constraints concern the fixed
        // counters and PEBS, which the planner handles or does not use.
        let constrained = ["core2-conroe.txt", "nehalem-ep.txt"];
        for &name in crate::pmu::tests::ALL_DUMPS
            .iter()
            .filter(|n| !constrained.contains(n))
        {
            let p = dump(name).cpus[0].pmu();
            assert!(p.event_constraints().is_empty(), "{name}");
            assert_eq!(p.event_counter_mask(0x0151), p.gp_mask, "{name}");
        }
    }

    #[test]
    fn any_thread_as_linux_allows_it() {
        // Core 2: version 2 (0AH EAX[7:0] = 2).
        let p = dump("core2-conroe.txt").cpus[0].pmu();
        assert!(p.any_thread_refusal().unwrap().contains("version 3"));
        // Nehalem v3, Skylake v4 (EDX 0x603: bit 15 clear): allowed.
        for name in ["nehalem-ep.txt", "skylake.txt", "sandybridge.txt"] {
            let p = dump(name).cpus[0].pmu();
            assert_eq!(p.any_thread_refusal(), None, "{name}");
        }
        // Ice Lake: version 5, EDX 0x8604 bit 15 set: deprecated.
        let p = dump("icelake-u.txt").cpus[0].pmu();
        assert!(p.any_thread_deprecated);
        assert!(p.any_thread_refusal().unwrap().contains("deprecated"));
        // Zen: no such bit.
        let p = dump("zen2-matisse.txt").cpus[0].pmu();
        assert!(p.any_thread_refusal().is_some());
    }

    #[test]
    fn edx_bit_15_means_anythread_deprecated_from_version_5_only() {
        // Linux reads it only "on arch perfmon v5 or later"; before, the
        // bit is reserved. Skylake (v4) with bit 15 set is not deprecated.
        let mut c = dump("skylake.txt").cpus[0].clone();
        c.leaves.get_mut(&(0xa, 0)).unwrap()[3] |= 1 << 15;
        assert!(!c.pmu().any_thread_deprecated);
    }
}
