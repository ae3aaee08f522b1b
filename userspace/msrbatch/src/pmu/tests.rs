// SPDX-License-Identifier: GPL-2.0
//! The CPUID decode on dumps of real CPUs (testdata/cpuid/, each file names
//! its source). Every expectation is written from the SDM / APM bit fields,
//! spelled out beside it.

use super::*;

/// Every real CPU's dump in `testdata`.
pub(crate) const ALL_DUMPS: &[&str] = &[
    "core2-conroe.txt",
    "nehalem-ep.txt",
    "sandybridge.txt",
    "sandybridge-cpuid-r.txt",
    "skylake.txt",
    "icelake-u.txt",
    "raptorlake-hybrid.txt",
    "zen2-matisse.txt",
    "zen4-raphael.txt",
    "pentium-mmx-tillamook.txt",
    "pentium-p54c.txt",
];

pub(crate) fn dump(name: &str) -> CpuidDump {
    let path = format!("{}/testdata/cpuid/{name}", env!("CARGO_MANIFEST_DIR"));
    CpuidDump::read(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// (version, gp, gp width, gp mask, fixed, fixed width, fixed mask, arch events)
type Shape = (u32, u32, u32, u64, u32, u32, u64, u32);

fn shape(p: &PmuInfo) -> Shape {
    (
        p.version,
        p.gp_counters,
        p.gp_width,
        p.gp_mask,
        p.fixed_counters,
        p.fixed_width,
        p.fixed_mask,
        p.arch_events,
    )
}

#[test]
fn core2_conroe() {
    let d = dump("core2-conroe.txt");
    assert_eq!(d.cpus.len(), 1);
    let p = d.cpus[0].pmu();
    assert_eq!(p.vendor, "GenuineIntel");
    assert_eq!(p.signature, 0x6f6);
    // 0AH EAX=07280202: [7:0] version 2, [15:8] 2 counters, [23:16] 0x28 = 40
    // bits, [31:24] 7 events; EBX=0: all 7 available. EDX=0: [4:0] no fixed
    // counters enumerated, though the CPU has 3: the decode assumes 3, as
    // Linux does for versions 2-4 outside a hypervisor, as wide as the
    // general-purpose ones (EDX[12:5] gives no width either).
    assert_eq!(shape(&p), (2, 2, 40, 0b11, 3, 40, 0b111, 0x7f));
    assert_eq!(p.quirks[0], Quirk::FixedCountersAssumed { reported: 0 });
    // And Linux's event constraints for Core 2 (tested in pmu::quirks).
    assert!(matches!(
        p.quirks[1..],
        [Quirk::EventConstraints {
            table: "intel_core2_event_constraints",
            ..
        }]
    ));
    assert!(p.report("CPU 0").contains(
        "quirk: CPUID.0AH:EDX reports 0 fixed counters; perfmon versions 2-4 have at least 3"
    ));
    // 01H ECX=0000E3BD: bit 15 PDCM set, bit 31 (hypervisor) clear. 07H all
    // zero: no HLE/RTM, not hybrid.
    assert!(p.pdcm && !p.tsx && p.core_type.is_none() && !p.is_amd() && !p.hypervisor);
    assert!(p.present() && p.has_global() && !p.has_inuse());
    assert_eq!(p.rdpmc_ok, None, "offline decode does not claim RDPMC");
}

#[test]
fn core2_under_a_hypervisor_gets_no_assumed_fixed_counters() {
    // The same Core 2 with CPUID.01H:ECX[31] set, as a hypervisor shows it:
    // Linux assumes nothing there (the hypervisor may not give the fixed
    // counters), and neither does the decode.
    let mut c = dump("core2-conroe.txt").cpus[0].clone();
    c.leaves.get_mut(&(1, 0)).unwrap()[2] |= 1 << 31;
    let p = c.pmu();
    assert!(
        p.hypervisor
            && p.quirks
                .iter()
                .all(|q| matches!(q, Quirk::EventConstraints { .. }))
    );
    assert_eq!(shape(&p), (2, 2, 40, 0b11, 0, 0, 0, 0x7f));
}

#[test]
fn the_quirk_leaves_cpus_that_report_their_fixed_counters_alone() {
    // Nehalem (v3), Sandy Bridge (v3), Skylake (v4) report 3; Ice Lake (v5)
    // is outside the quirk's versions.
    for name in [
        "nehalem-ep.txt",
        "sandybridge.txt",
        "skylake.txt",
        "icelake-u.txt",
    ] {
        let p = dump(name).cpus[0].pmu();
        assert!(
            !p.quirks
                .iter()
                .any(|q| matches!(q, Quirk::FixedCountersAssumed { .. })),
            "{name}: {:?}",
            p.quirks
        );
    }
}

#[test]
fn pentium_mmx() {
    let p = dump("pentium-mmx-tillamook.txt").cpus[0].pmu();
    // 00H EAX=1: leaves 0 and 1 only. 01H EAX=00000582: family 5, model 8;
    // EDX=008001BF: bit 5 MSR (RDMSR/WRMSR), bit 23 MMX.
    assert_eq!(p.signature, 0x582);
    assert_eq!(
        p.p5,
        Some(P5Pmu {
            mmx: true,
            cesr: None
        })
    );
    // Two 40-bit counters, no architectural perfmon, no fixed counters.
    assert_eq!(shape(&p), (0, 2, 40, 0b11, 0, 0, 0, 0));
    assert!(p.present() && !p.has_global() && !p.has_inuse() && p.reads_with_rdpmc());
    assert_eq!(p.counter_msrs(1), (0x11, 0x13));
    assert_eq!(p.counter_full_write_msr(0), Some(0x12));
    // Named events: the SDM's mnemonics in any case, the generic names, and
    // the MMX events (counter 0's and counter 1's at the same select).
    assert_eq!(p.event_by_name("instructions"), Some((0x16, 0, true)));
    assert_eq!(
        p.event_by_name("instructions_executed_v_pipe"),
        Some((0x17, 0, true))
    );
    assert_eq!(p.event_by_name("cycles"), Some((0x30, 0, true)));
    let (e, ok) = p.p5_event("MMX_INSTRUCTIONS_EXECUTED_V_PIPE").unwrap();
    assert_eq!((e.event, e.counter, ok), (0x2b, Some(1), true));
    assert_eq!(p.event_by_name("llc-misses"), None);
    let r = p.report("CPU 0");
    for l in [
        "Pentium (P5) counters: 2, 40 bits wide (CTR0 at 0x12, CTR1 at 0x13), controlled by CESR at 0x11",
        "MMX technology: yes; counters read with RDPMC (ECX 0 and 1)",
        "  MMX_INSTRUCTIONS_EXECUTED_U_PIPE               event=0x2b  CTR0 only",
        "  INSTRUCTIONS_EXECUTED_V_PIPE                   event=0x17",
        "  cycles is NUMBER_OF_CYCLES_NOT_IN_HALT_STATE",
    ] {
        assert!(r.lines().any(|x| x == l), "{l} in\n{r}");
    }
    assert!(!r.contains("architectural"), "{r}");
    let j: String = p.to_json("CPU 0");
    assert!(
        j.contains("\"p5\":{\"mmx\":true,\"rdpmc\":true,\"cesr\":null}"),
        "{j}"
    );
    assert!(j.contains("\"MMX_INSTRUCTIONS_EXECUTED_V_PIPE\""), "{j}");
}

#[test]
fn pentium_without_mmx() {
    let p = dump("pentium-p54c.txt").cpus[0].pmu();
    // 01H EAX=00000525: family 5, model 2; EDX=000001BF: MSR, no MMX.
    assert_eq!(p.p5.map(|p| p.mmx), Some(false));
    assert_eq!(shape(&p), (0, 2, 40, 0b11, 0, 0, 0, 0));
    // No RDPMC before MMX: the counters are read with RDMSR.
    assert!(p.present() && !p.reads_with_rdpmc());
    assert_eq!(p.event_by_name("instructions"), Some((0x16, 0, true)));
    // Events 2AH-3BH (and so `cycles`) need MMX.
    assert_eq!(p.event_by_name("cycles"), Some((0x30, 0, false)));
    let r = p.report("CPU 0");
    assert!(
        r.contains("counters read with RDMSR (no RDPMC before MMX)"),
        "{r}"
    );
    assert!(
        !r.contains("MMX_INSTRUCTIONS") && !r.contains("cycles is"),
        "{r}"
    );
    assert!(r.contains("  PIPELINE_AGI_STALLS"), "{r}");
    // Family 5 without RDMSR (CPUID.01H:EDX[5] clear) has no counters to use.
    let mut c = dump("pentium-p54c.txt").cpus[0].clone();
    c.leaves.get_mut(&(1, 0)).unwrap()[3] &= !(1 << 5);
    assert!(!c.pmu().is_p5());
}

#[test]
fn cesr_fields_round_trip() {
    // P5Stat's pair: instructions in both pipes on CTR0, in the V-pipe on
    // CTR1, both at every CPL: ES0=16H, CC0=011; ES1=17H, CC1=011.
    let v =
        cesr_encode("ctr0=INSTRUCTIONS_EXECUTED:os:usr,ctr1=instructions_executed_v_pipe:usr:os")
            .unwrap();
    assert_eq!(v, 0x00d7_00d6);
    assert_eq!(
        cesr_decode(v).unwrap(),
        "ctr0=INSTRUCTIONS_EXECUTED:os:usr,ctr1=INSTRUCTIONS_EXECUTED_V_PIPE:os:usr"
    );
    // Every field of both halves: ES, each CC bit, PC.
    for (spec, want) in [
        ("ctr0=event=0x3f", 0x3f),
        ("ctr0=event=0:os", 1 << 6),
        ("ctr0=event=0:usr", 1 << 7),
        ("ctr0=event=0:clocks", 1 << 8),
        ("ctr0=event=0:pc", 1 << 9),
        ("ctr1=event=0x3f", 0x3f << 16),
        ("ctr1=event=0:os", 1 << 22),
        ("ctr1=event=0:usr", 1 << 23),
        ("ctr1=event=0:clocks", 1 << 24),
        ("ctr1=event=0:pc", 1 << 25),
    ] {
        assert_eq!(cesr_encode(spec).ok(), Some(want), "{spec}");
        assert_eq!(
            cesr_encode(&cesr_decode(want).unwrap()).ok(),
            Some(want),
            "{spec}"
        );
    }
    for v in [0u64, 0x03ff_03ff, 0x0255_01aa, 0x01c0_0030] {
        let spec = cesr_decode(v).unwrap();
        assert_eq!(cesr_encode(&spec).ok(), Some(v), "{spec}");
    }
    // The MMX events are per counter.
    assert_eq!(
        cesr_encode("ctr1=MMX_INSTRUCTIONS_EXECUTED_V_PIPE:usr").ok(),
        Some(0x2b_0000 | 1 << 23)
    );
    assert_eq!(
        cesr_decode(0x2b_002b).unwrap(),
        "ctr0=MMX_INSTRUCTIONS_EXECUTED_U_PIPE,ctr1=MMX_INSTRUCTIONS_EXECUTED_V_PIPE"
    );
    // Errors say which limit.
    let e = cesr_encode("ctr0=event=0x40")
        .unwrap_err()
        .what()
        .to_string();
    assert!(e.contains("up to 0x3f") && e.contains("6 bits"), "{e}");
    let e = cesr_encode("ctr0=MMX_INSTRUCTIONS_EXECUTED_V_PIPE")
        .unwrap_err()
        .what()
        .to_string();
    assert_eq!(
        e,
        "MMX_INSTRUCTIONS_EXECUTED_V_PIPE counts only on CTR1, not on CTR0"
    );
    let e = cesr_encode("ctr2=BRANCHES").unwrap_err().what().to_string();
    assert!(e.contains("two counters, ctr0 and ctr1"), "{e}");
    assert!(cesr_encode("ctr0=BRANCHES,ctr0=BTB_HITS")
        .unwrap_err()
        .what()
        .to_string()
        .contains("twice"));
    assert!(cesr_encode("ctr0=bogus")
        .unwrap_err()
        .what()
        .to_string()
        .contains("unknown item 'bogus'"));
    let e = cesr_decode(1 << 10).unwrap_err().what().to_string();
    assert!(
        e.contains("0x400") && e.contains("bits 9:0 and 25:16"),
        "{e}"
    );
}

#[test]
fn cesr_in_words() {
    let w = cesr_describe(0x02d7_01d6, true);
    assert_eq!(
        w,
        [
            "CTR0: ES0=0x16 (INSTRUCTIONS_EXECUTED), CC0=111: counts clocks (duration) at any CPL; PC0=0: the PM0/BP0 pin signals when it increments",
            "CTR1: ES1=0x17 (INSTRUCTIONS_EXECUTED_V_PIPE), CC1=011: counts events at any CPL; PC1=1: the PM1/BP1 pin signals when it overflows",
        ]
    );
    // Every counter control code.
    let words: Vec<&str> = (0..8).map(p5::cc_words).collect();
    assert_eq!(words[0], words[4]);
    assert!(words[0].contains("disabled"));
    assert!(words[1].contains("events") && words[1].contains("0, 1 or 2"));
    assert!(words[2].contains("events") && words[2].contains("CPL is 3"));
    assert!(
        words[5].contains("clocks") && words[6].contains("clocks") && words[7].contains("any CPL")
    );
    // Without MMX, 2BH is reserved.
    assert!(cesr_describe(0x2b, false)[0].contains("(reserved)"));
}

#[test]
fn nehalem_ep() {
    let p = dump("nehalem-ep.txt").cpus[0].pmu();
    // 0AH EAX=07300403: version 3, 4 counters of 0x30 = 48 bits, 7 events;
    // EDX=00000603: [4:0] 3 fixed, [12:5] 0x30 = 48 bits, [15] 0.
    assert_eq!(shape(&p), (3, 4, 48, 0xf, 3, 48, 0x7, 0x7f));
    assert!(!p.any_thread_deprecated);
    assert_eq!(p.signature, 0x106a2);
}

#[test]
fn sandy_bridge_both_formats() {
    let p = dump("sandybridge.txt").cpus[0].pmu();
    // 0AH EAX=07300803: version 3, 8 counters, 48 bits, 7 events; EDX=603.
    assert_eq!(shape(&p), (3, 8, 48, 0xff, 3, 48, 0x7, 0x7f));
    // 01H ECX=1FBAE3FF: PDCM (bit 15) set.
    assert!(p.pdcm);
    let r = dump("sandybridge-cpuid-r.txt");
    assert_eq!(
        r.cpus.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
        ["CPU 0", "CPU 1"]
    );
    for c in &r.cpus {
        let q = c.pmu();
        assert_eq!(q.signature, p.signature);
        assert_eq!(shape(&q), shape(&p), "{}", c.label);
    }
    assert_eq!(
        r.cpus[1].get(1, 0)[1],
        0x0210_0800,
        "CPU 1 has its own leaves"
    );
}

#[test]
fn skylake() {
    let p = dump("skylake.txt").cpus[0].pmu();
    // 0AH EAX=07300804: version 4, 8 counters, 48 bits, 7 events; EDX=603.
    assert_eq!(shape(&p), (4, 8, 48, 0xff, 3, 48, 0x7, 0x7f));
    // 07H EBX=029C67AF: bit 4 (HLE) and bit 11 (RTM) clear.
    assert!(!p.tsx && p.has_inuse());
}

#[test]
fn ice_lake() {
    let p = dump("icelake-u.txt").cpus[0].pmu();
    // 0AH EAX=08300805: version 5, 8 counters, 48 bits, 8 events (EBX=0:
    // topdown slots too); ECX=0000000F: fixed counters 0-3; EDX=00008604:
    // 4 fixed, 48 bits, bit 15 AnyThread deprecated.
    assert_eq!(shape(&p), (5, 8, 48, 0xff, 4, 48, 0xf, 0xff));
    assert!(p.any_thread_deprecated);
    assert!(p.arch_event_available(7), "topdown-slots");
    // 07H EDX=BC000410: bit 15 (hybrid) clear.
    assert!(p.core_type.is_none());
}

#[test]
fn raptor_lake_hybrid_per_cpu() {
    let d = dump("raptorlake-hybrid.txt");
    let labels: Vec<&str> = d.cpus.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["Logical CPU #0", "Logical CPU #19"]);
    let (p, e) = (d.cpus[0].pmu(), d.cpus[1].pmu());
    // 07H EDX=FC1CC410: bit 15 hybrid. 1AH EAX[31:24]: 40H Core, 20H Atom.
    assert_eq!(p.core_type, Some(CoreType::Core));
    assert_eq!(e.core_type, Some(CoreType::Atom));
    // Both report 0AH EAX=07300605 (version 5, 6 counters, 48 bits, 7
    // events), ECX=00000007 (fixed 0-2), EDX=00008603 (3 fixed, 48 bits,
    // AnyThread deprecated).
    for q in [&p, &e] {
        assert_eq!(shape(q), (5, 6, 48, 0x3f, 3, 48, 0x7, 0x7f));
        assert!(q.any_thread_deprecated && q.pdcm && !q.tsx);
    }
}

#[test]
fn zen2_matisse() {
    let p = dump("zen2-matisse.txt").cpus[0].pmu();
    assert_eq!(p.vendor, "AuthenticAMD");
    // 80000000H EAX=80000020: no leaf 80000022H, so no PerfMonV2.
    // 80000001H ECX=75C237FF: bit 23 PerfCtrExtCore (6 counters at
    // C001_0200H), bit 24 PerfCtrExtNB, bit 28 PerfCtrExtLLC.
    let a = p.amd.expect("AMD");
    assert!(!a.perfmon_v2 && a.core_ext && a.nb_ext && a.llc_ext);
    assert_eq!(shape(&p), (1, 6, 48, 0x3f, 0, 0, 0, 0));
    assert_eq!(p.counter_msrs(5), (0xc001_020a, 0xc001_020b));
    assert!(!p.has_global());
}

#[test]
fn zen4_raphael() {
    let p = dump("zen4-raphael.txt").cpus[0].pmu();
    // 80000022H EAX=00000003: bit 0 PerfMonV2; EBX=00084106: [3:0] 6 core
    // counters, [9:4] 16 LBR entries, [15:10] 16 NB (DF) counters, [21:16]
    // 8 UMC counters; ECX=3: UMCs 0 and 1 active.
    let a = p.amd.expect("AMD");
    assert!(a.perfmon_v2 && a.core_ext);
    assert_eq!(
        (
            a.lbr_v2_stack,
            a.nb_counters,
            a.umc_counters,
            a.active_umc_mask
        ),
        (16, 16, 8, 3)
    );
    assert_eq!(shape(&p), (2, 6, 48, 0x3f, 0, 0, 0, 0));
    assert_eq!(p.global_ctrl(), msr::AMD_PERF_CNTR_GLOBAL_CTL);
}

#[test]
fn legacy_amd_without_core_extension() {
    // A synthetic AMD CPU (no dump): 80000001H ECX without bit 23: the four
    // legacy counters at C001_0000H / C001_0004H.
    let p = PmuInfo::decode(|l, _| match l {
        0 => [1, 0x6874_7541, 0x444d_4163, 0x6974_6e65],
        0x8000_0000 => [0x8000_0001, 0, 0, 0],
        _ => [0; 4],
    });
    assert_eq!(shape(&p), (1, 4, 48, 0xf, 0, 0, 0, 0));
    assert_eq!(p.counter_msrs(3), (0xc001_0003, 0xc001_0007));
}

#[test]
fn leaf_23h_bitmaps() {
    // No dump we have enumerates leaf 23H, so this CPUID is synthetic, built
    // from the SDM's definitions: 23H.0 EAX bit 1 (counters subleaf) and bit
    // 3 (events subleaf), EBX bit 0 UMASK2, bit 1 EQ; 23H.1 EAX the GP
    // counter bitmap, EBX the fixed one; 23H.3 EAX the events bitmap (1 =
    // available, unlike 0AH EBX).
    let p = PmuInfo::decode(|l, s| match (l, s) {
        (0, 0) => [0x23, 0x756e_6547, 0x6c65_746e, 0x4965_6e69],
        (0xa, 0) => [0x0830_0a05, 0xff, 0, 0x8603],
        (0x23, 0) => [0b1011, 0b11, 0, 0],
        (0x23, 1) => [0x0f0f, 0x77, 0, 0],
        (0x23, 3) => [0x1fff, 0, 0, 0],
        _ => [0; 4],
    });
    assert_eq!(shape(&p), (5, 8, 48, 0xf0f, 6, 48, 0x77, 0x1fff));
    assert_eq!(p.ext_leaf_23, Some((true, true)));
    // Leaf 23H past the maximum leaf is not read.
    let q = PmuInfo::decode(|l, s| match (l, s) {
        (0, 0) => [0x20, 0x756e_6547, 0x6c65_746e, 0x4965_6e69],
        (0xa, 0) => [0x0830_0a05, 0, 0, 0x8603],
        (0x23, _) => [u32::MAX; 4],
        _ => [0; 4],
    });
    assert_eq!((q.gp_mask, q.ext_leaf_23), (0x3ff, None));
}

#[test]
fn json_has_the_fields() {
    let p = dump("skylake.txt").cpus[0].pmu();
    let j = p.to_json("Logical CPU #0");
    for k in [
        "\"vendor\":\"GenuineIntel\"",
        "\"version\":4",
        "\"gp_counters\":8",
        "\"gp_width\":48",
        "\"fixed_counters\":3",
        "\"fixed_width\":48",
        "\"events\":[\"cycles\",\"instructions\",\"ref-cycles\",\"llc-references\",\"llc-misses\",\"branches\",\"branch-misses\"]",
    ] {
        assert!(j.contains(k), "{k} in {j}");
    }
}

#[test]
fn dump_errors_name_the_line() {
    let e = CpuidDump::parse("CPU 0:\n   0x0000000a 0x00: eax=0x07300403 ebx=zz\n")
        .unwrap_err()
        .what()
        .to_string();
    assert!(e.starts_with("line 2: "), "{e}");
    let e = CpuidDump::parse("CPUID 0000000A: 07300403-00000000\n")
        .unwrap_err()
        .what()
        .to_string();
    assert!(e.starts_with("line 1: "), "{e}");
    assert!(CpuidDump::parse("hello\n")
        .unwrap_err()
        .what()
        .to_string()
        .contains("no CPUID lines"));
    // Old AIDA64 dumps repeat a leaf for its subleaves.
    let d = CpuidDump::parse("CPUID 0000000B: 00000001-00000001-00000100-00000000\nCPUID 0000000B: 00000004-00000004-00000201-00000000\n").unwrap();
    assert_eq!(d.cpus[0].get(0xb, 1)[0], 4);
    assert_eq!(d.cpus[0].get(0x23, 0), [0; 4], "absent leaves read as zero");
}

#[test]
fn evsel_round_trips() {
    assert_eq!(
        evsel::encode("event=0xc0,umask=0x00,usr,os,en").ok(),
        Some(0x4300c0)
    );
    assert_eq!(evsel::encode("instructions,usr,os,en").ok(), Some(0x4300c0));
    assert_eq!(evsel::encode("llc-misses,usr").ok(), Some(0x1412e));
    assert_eq!(
        evsel::encode("event=0x1c0,umask=1").ok(),
        Some(0x1_0000_01c0)
    );
    assert!(evsel::encode("event=0x1000").is_err());
    assert!(evsel::encode("bogus").is_err());
    for v in [0x4300c0u64, 0xffff_ffff, 0xf_0000_00ff, 0, 0x1_0100_41c0] {
        let spec = evsel::decode(v).unwrap();
        assert_eq!(evsel::encode(&spec).ok(), Some(v), "{spec}");
    }
    assert_eq!(
        evsel::decode(0x4300c0).unwrap(),
        "event=0xc0,umask=0x00,usr,os,en"
    );
    assert!(evsel::decode(1 << 40).is_err());
    assert_eq!(event_name(0x43003c), Some("cycles"));
    assert_eq!(event_name(0x41013c), Some("ref-cycles"));
}
