// SPDX-License-Identifier: GPL-2.0
//! The counter API against the PMU model of real CPUs: every programming
//! sequence is judged by what the model counts and by the MSR state it
//! leaves, not by the text of the ops.

use super::*;
use crate::pmu::probe;
use crate::pmu::tests::dump;
use crate::sim::{Phase, SimPmu};

fn model(name: &str) -> SimPmu {
    SimPmu::new(&dump(name))
}

fn events(s: &str) -> Vec<EventSpec> {
    parse_events(&[s.to_string()]).unwrap()
}

fn session<'a>(m: &'a SimPmu, cpu: u32, ev: &str) -> Session<'a, SimPmu> {
    Session::open(m, cpu, ev, false).unwrap_or_else(|e| panic!("{ev}: {e}"))
}

/// What session `s` on CPU 0 counts while `m` runs `phases` there: started
/// before, stopped after.
fn counted(m: &SimPmu, s: &Session<'_, SimPmu>, phases: &[Phase]) -> Vec<u64> {
    let start = s.start().unwrap();
    m.execute(0, phases);
    let end = s.stop().unwrap();
    s.deltas(&start, &end)
}

/// `Session::open` refuses owned counters (`EBUSY`, saying who owns them)
/// unless forced, and a CPU without a PMU (`ENODEV`, saying why).
#[test]
fn open_refuses_unless_forced() {
    let m = model("skylake.txt");
    m.set_nmi_watchdog(Some(true));
    let e = Session::open(&m, 0, "branches", false).unwrap_err();
    assert_eq!(e.errno().0, libc::EBUSY, "{e}");
    assert!(e.what().contains("NMI watchdog"), "{e}");
    let mut s = Session::open(&m, 0, "branches", true).unwrap();
    s.restore().unwrap();
    let none = SimPmu::new(
        &crate::pmu::CpuidDump::parse("CPUID 00000000: 0000000D-756E6547-6C65746E-49656E69\n")
            .unwrap(),
    );
    let e = Session::open(&none, 0, "instructions", false).unwrap_err();
    assert_eq!(e.errno().0, libc::ENODEV, "{e}");
    assert!(e.what().starts_with("no PMU: "), "{e}");
}

#[test]
fn probe_finds_the_pmu_of_every_real_cpu() {
    // The bug of the seed: probe never set rdpmc_ok, so present() was false
    // on every CPU with a PMU. Probe decides it from RDPMC 0's status.
    for name in crate::pmu::tests::ALL_DUMPS {
        let m = model(name);
        for cpu in 0..m.nr_cpus() {
            let p = probe(&m, cpu).unwrap();
            // A Pentium without MMX has no RDPMC (#UD); its counters are
            // there all the same, read with RDMSR.
            let rdpmc = *name != "pentium-p54c.txt";
            assert_eq!(p.rdpmc_ok, Some(rdpmc), "{name} CPU {cpu}");
            assert_eq!(p.reads_with_rdpmc(), rdpmc, "{name} CPU {cpu}");
            assert!(p.present(), "{name} CPU {cpu}: {}", p.absence());
            assert!(p.report(&format!("CPU {cpu}")).contains("counters"));
        }
    }
}

#[test]
fn probe_without_a_pmu() {
    // TCG-like: CPUID.0AH all zero; RDPMC faults.
    let d = CpuidDump::parse(
        "CPUID 00000000: 0000000D-756E6547-6C65746E-49656E69\nCPUID 0000000A: 00000000-00000000-00000000-00000000\n",
    )
    .unwrap();
    let m = SimPmu::new(&d);
    let p = probe(&m, 0).unwrap();
    assert_eq!(p.rdpmc_ok, Some(false));
    assert!(!p.present());
    assert!(p.report("CPU 0").contains("no PMU: CPUID.0AH version 0"));
    let err = Plan::new(&p, 0, &events("instructions")).unwrap_err();
    assert_eq!(err.errno().0, libc::ENODEV);
    // A CPU the model does not have: the whole batch is refused.
    assert_eq!(probe(&m, 5).unwrap_err().errno().0, libc::ENXIO);
}

use crate::pmu::CpuidDump;

#[test]
fn seed_example_counts_user_uops_only() {
    // event=0x0e:umask=0x01:usr (UOPS_ISSUED.ANY) on Skylake: PERFEVTSEL0 =
    // 0x41010E, started through IA32_PERF_GLOBAL_CTRL bit 0.
    let m = model("skylake.txt");
    m.wrmsr(0, msr::IA32_PMC0, 0x1234);
    m.wrmsr(0, msr::IA32_PERF_GLOBAL_CTRL, 1 << 33);
    let mut s = session(&m, 0, "event=0x0e:umask=0x01:usr");
    assert_eq!(s.plan().slots[0].counter, Counter::Gp(0));
    assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0), Some(0x41_010e));
    assert_eq!(
        m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL),
        Some(1 << 33),
        "programmed, not started"
    );
    m.execute(0, &[Phase::user(100).raw(0x0e, 0x01, 4)]);
    let start = s.start().unwrap();
    assert_eq!(start, [0], "nothing counted before start");
    assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL), Some(1 << 33 | 1));
    m.execute(
        0,
        &[
            Phase::user(1000).raw(0x0e, 0x01, 3),
            Phase::kernel(500).raw(0x0e, 0x01, 2),
        ],
    );
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [3000]);
    m.execute(0, &[Phase::user(1000).raw(0x0e, 0x01, 3)]);
    assert_eq!(s.read().unwrap(), [3000], "stopped");
    s.restore().unwrap();
    assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0), Some(0));
    assert_eq!(m.rdmsr(0, msr::IA32_PMC0), Some(0x1234));
    assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL), Some(1 << 33));
}

#[test]
fn usr_os_and_both() {
    let m = model("nehalem-ep.txt");
    let s = session(
        &m,
        0,
        "event=0xc4:umask=0:usr,event=0xc4:umask=0:os,branches",
    );
    let phases = [
        Phase::user(100).with("branches", 2),
        Phase::kernel(10).with("branches", 5),
    ];
    assert_eq!(counted(&m, &s, &phases), [200, 50, 250]);
}

#[test]
fn fixed_counters_count_instructions_and_cycles() {
    let m = model("skylake.txt");
    let s = session(&m, 0, "instructions,cycles,ref-cycles,instructions:usr");
    let c: Vec<Counter> = s.plan().slots.iter().map(|s| s.counter).collect();
    assert_eq!(
        c,
        [
            Counter::Fixed(0),
            Counter::Fixed(1),
            Counter::Fixed(2),
            Counter::Gp(0)
        ]
    );
    // OS|USR field 3 for fixed 0-2.
    assert_eq!(m.rdmsr(0, msr::IA32_FIXED_CTR_CTRL), Some(0x333));
    let phases = [
        Phase::user(1000).with("instructions", 2),
        Phase::kernel(300).with("instructions", 1),
    ];
    assert_eq!(counted(&m, &s, &phases), [2300, 1300, 1300, 2000]);
}

#[test]
fn a_counter_off_in_global_ctrl_counts_nothing() {
    let m = model("skylake.txt");
    let s = session(&m, 0, "instructions:usr:int,cycles:usr:edge");
    let start = s.start().unwrap();
    // Clear counter 0's enable bit behind the session's back.
    let g = m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL).unwrap();
    assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_CTRL, g & !1));
    m.execute(0, &[Phase::user(100).with("instructions", 2)]);
    let end = s.stop().unwrap();
    // Counter 0 off; counter 1 (cycles, edge) counts one rising edge.
    assert_eq!(s.deltas(&start, &end), [0, 1]);
}

#[test]
fn cmask_inv_edge() {
    let m = model("sandybridge.txt");
    let s = session(
        &m,
        0,
        "instructions:usr:cmask=2,instructions:usr:cmask=2:inv,instructions:usr:cmask=2:edge,instructions:usr",
    );
    // cmask=2: cycles with >= 2: 10 + 30 + 7. inv: cycles with < 2 (user): 20.
    // edge: starts of >= 2 runs: at 0, at 30, at 65 (after the kernel phase,
    // where a usr-only counter sees nothing). Plain: 30 + 20 + 60 + 28.
    let phases = [
        Phase::user(10).with("instructions", 3),
        Phase::user(20).with("instructions", 1),
        Phase::user(30).with("instructions", 2),
        Phase::kernel(5).with("instructions", 4),
        Phase::user(7).with("instructions", 4),
    ];
    assert_eq!(counted(&m, &s, &phases), [47, 20, 3, 138]);
}

#[test]
fn overflow_sets_global_status_and_restore_clears_it() {
    let m = model("skylake.txt");
    // Someone's pending overflow on counter 2 must survive.
    assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_STATUS_SET, 1 << 2));
    let mut s = session(&m, 0, "event=0x0e:umask=1:usr:int");
    s.start().unwrap();
    // The counter is 48 bits wide: push it to just below the top.
    assert!(!m.wrmsr(0, msr::IA32_PMC0 + 8, 0), "no PMC8 on Skylake");
    assert!(m.wrmsr(0, msr::IA32_PMC0, 0xffff_fff0)); // sign-extends
    assert_eq!(m.rdmsr(0, msr::IA32_PMC0), Some(0xffff_ffff_fff0));
    m.execute(0, &[Phase::user(20).raw(0x0e, 1, 1)]);
    assert_eq!(s.read().unwrap(), [4], "wrapped at 48 bits");
    assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_STATUS), Some(0b101));
    assert_eq!(m.pmis(0), 1);
    s.restore().unwrap();
    assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_STATUS), Some(0b100));
}

#[test]
fn reserved_bits_fault_and_nothing_stays_changed() {
    // AnyThread (bit 21) is reserved before version 3: Core 2 is version 2.
    let m = model("core2-conroe.txt");
    m.wrmsr(0, msr::IA32_PMC0, 77);
    let info = probe(&m, 0).unwrap();
    // The planner refuses it, as Linux does (pmu::quirks)...
    let err = Plan::new(&info, 0, &events("event=0xc0:umask=0:any")).unwrap_err();
    assert_eq!(err.errno().0, libc::EINVAL);
    assert!(
        err.what()
            .contains("AnyThread needs architectural perfmon version 3"),
        "{err}"
    );
    // ...and a plan made by hand that sets it faults in the model.
    let mut plan = Plan::new(&info, 0, &events("event=0xc4:umask=0")).unwrap();
    plan.slots[0].config |= evsel::ANY;
    let err = Session::program(&m, plan).unwrap_err();
    assert_eq!(err.errno().0, libc::EIO);
    // The faulting op, in its text form (the one printer of ops).
    assert!(
        err.what()
            .starts_with("programming CPU 0: wrmsr IA32_PERFEVTSEL0 0x"),
        "{err}"
    );
    assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0), Some(0));
    assert_eq!(m.rdmsr(0, msr::IA32_PMC0), Some(77));
    assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL), Some(0));
    // On Nehalem (version 3) the same event programs.
    let m = model("nehalem-ep.txt");
    drop(session(&m, 0, "event=0xc0:umask=0:any"));
}

#[test]
fn ownership_conflicts() {
    let m = model("skylake.txt");
    let info = probe(&m, 0).unwrap();
    let plan = Plan::new(&info, 0, &events("branches,instructions")).unwrap();
    assert!(check_ownership(&m, &plan).unwrap().is_empty());
    m.wrmsr(0, msr::IA32_PERFEVTSEL0, 0x43_00c4);
    m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0x2);
    m.set_nmi_watchdog(Some(true));
    let c = check_ownership(&m, &plan).unwrap();
    assert_eq!(
        c,
        [
            Conflict::Enabled {
                counter: Counter::Gp(0),
                msr: msr::IA32_PERFEVTSEL0,
                value: 0x43_00c4
            },
            Conflict::Enabled {
                counter: Counter::Fixed(0),
                msr: msr::IA32_FIXED_CTR_CTRL,
                value: 2
            },
            Conflict::InUse {
                counter: Counter::Gp(0),
                inuse: 1 | 1 << 32
            },
            Conflict::InUse {
                counter: Counter::Fixed(0),
                inuse: 1 | 1 << 32
            },
            Conflict::NmiWatchdog,
        ]
    );
    // IA32_PERF_GLOBAL_INUSE alone (event select written, EN clear).
    m.set_nmi_watchdog(Some(false));
    m.wrmsr(0, msr::IA32_PERFEVTSEL0, 0xc4);
    m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0);
    assert_eq!(
        check_ownership(&m, &plan).unwrap(),
        [Conflict::InUse {
            counter: Counter::Gp(0),
            inuse: 1
        }]
    );
}

#[test]
fn counter_restore_needs_full_width_writes() {
    for fw in [false, true] {
        let m = model("skylake.txt");
        m.set_perf_capabilities(0, PERF_CAP_FW_WRITE);
        assert!(m.wrmsr(0, msr::IA32_A_PMC0, 0x1_0000_0005));
        assert!(
            !m.wrmsr(0, msr::IA32_A_PMC0, 1 << 48),
            "above the width: #GP"
        );
        if !fw {
            m.set_perf_capabilities(0, 0);
        }
        let mut s = session(&m, 0, "event=0x0e:umask=1");
        let report = s.restore().unwrap();
        let want = if fw { 0x1_0000_0005 } else { 5 };
        assert_eq!(m.rdmsr(0, msr::IA32_PMC0), Some(want));
        assert_eq!(report.inexact.len(), usize::from(!fw), "{report:?}");
    }
}

use crate::pmu::PERF_CAP_FW_WRITE;

#[test]
fn amd_legacy_and_perfmon_v2() {
    // Zen 2: no global control, EN starts and stops.
    let m = model("zen2-matisse.txt");
    let s = session(
        &m,
        0,
        "cycles,instructions:usr,branches,branch-misses,cycles:os,instructions",
    );
    assert_eq!(
        m.rdmsr(0, msr::AMD_PERF_CTL0),
        Some(0x3_0076),
        "programmed, EN clear"
    );
    let start = s.start().unwrap();
    assert_eq!(m.rdmsr(0, msr::AMD_PERF_CTL0), Some(0x43_0076));
    assert_eq!(
        m.rdmsr(0, msr::AMD_K7_PERF_CTL0 + 1),
        m.rdmsr(0, msr::AMD_PERF_CTL0 + 2),
        "legacy MSRs alias counters 0-3"
    );
    m.execute(
        0,
        &[Phase::user(100)
            .with("instructions", 2)
            .with("branches", 1)
            .raw(0xc3, 0, 0)],
    );
    m.execute(0, &[Phase::kernel(50).with("instructions", 1)]);
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [150, 200, 100, 0, 50, 250]);
    drop(s);
    assert_eq!(m.rdmsr(0, msr::AMD_PERF_CTL0), Some(0), "dropped: restored");
    // Zen 4: PerfMonV2 global control.
    let m = model("zen4-raphael.txt");
    m.wrmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL, 0x20);
    let mut s = session(&m, 0, "instructions");
    assert_eq!(m.rdmsr(0, msr::AMD_PERF_CTL0), Some(0x43_00c0));
    let start = s.start().unwrap();
    assert_eq!(m.rdmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL), Some(0x21));
    m.execute(0, &[Phase::user(10).with("instructions", 3)]);
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [30]);
    s.restore().unwrap();
    assert_eq!(m.rdmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL), Some(0x20));
    // AMD has no architectural ref-cycles.
    let info = probe(&m, 0).unwrap();
    let e = Plan::new(&info, 0, &events("ref-cycles")).unwrap_err();
    assert_eq!(e.errno().0, libc::EOPNOTSUPP);
}

#[test]
fn unavailable_events_and_groups() {
    let m = model("skylake.txt");
    let info = probe(&m, 0).unwrap();
    // 0AH EAX[31:24] = 7: topdown-slots (bit 7) is not enumerated.
    let e = Plan::new(&info, 0, &events("topdown-slots")).unwrap_err();
    assert_eq!(e.errno().0, libc::EOPNOTSUPP);
    // 12 events: 3 fixed + 8 general-purpose fit; the 12th opens group 2.
    let ev = events("instructions,cycles,ref-cycles,branches,branch-misses,llc-misses,llc-references,event=0x0e:umask=1,event=0x0e:umask=2,event=0x0e:umask=3,event=0x0e:umask=4,event=0x0e:umask=5");
    let g = Plan::groups(&info, 0, &ev).unwrap();
    assert_eq!(g.iter().map(|p| p.slots.len()).collect::<Vec<_>>(), [11, 1]);
    assert_eq!(
        Plan::new(&info, 0, &ev).unwrap_err().errno().0,
        libc::ENOSPC
    );
    assert!(EventSpec::parse("instructions:event=0xc0").is_err());
    assert!(EventSpec::parse("usr").is_err());
    assert!(EventSpec::parse("bogus").is_err());
}

#[test]
fn hybrid_cpus_program_independently() {
    let m = model("raptorlake-hybrid.txt");
    let p = session(&m, 0, "instructions");
    let e = session(&m, 1, "instructions");
    let (a, b) = (p.start().unwrap(), e.start().unwrap());
    m.execute(0, &[Phase::user(10).with("instructions", 5)]);
    m.execute(1, &[Phase::user(10).with("instructions", 2)]);
    assert_eq!(p.deltas(&a, &p.stop().unwrap()), [50]);
    assert_eq!(e.deltas(&b, &e.stop().unwrap()), [20]);
}

#[test]
fn one_batch_measurement() {
    // start, a busy-wait, read and stop in one batch: the model runs the
    // DELAY as kernel cycles with the configured mix.
    let m = model("icelake-u.txt");
    m.set_delay_mix(vec![(crate::sim::Source::Named("instructions"), 3)]);
    let s = session(&m, 0, "instructions,cycles:usr");
    let mut b = Batch::new();
    s.push_start(&mut b);
    let r0 = s.push_read(&mut b);
    b.push(0, Op::Delay { ns: 1000 });
    let r1 = s.push_read(&mut b);
    s.push_stop(&mut b);
    m.run(&mut b).unwrap();
    let (a, z) = (s.values(&b, r0).unwrap(), s.values(&b, r1).unwrap());
    assert_eq!(s.deltas(&a, &z), [3000, 0]);
}

#[test]
fn intel_version_1_starts_with_en() {
    // No dump of a version 1 CPU (Core Solo/Duo era) here: synthetic CPUID
    // from the SDM: 0AH EAX = version 1, 2 counters of 40 bits, 7 events.
    let d = CpuidDump::parse(
        "CPUID 00000000: 0000000A-756E6547-6C65746E-49656E69\nCPUID 0000000A: 07280201-00000000-00000000-00000000\n",
    )
    .unwrap();
    let m = SimPmu::new(&d);
    assert_eq!(
        m.rdmsr(0, msr::IA32_PERF_GLOBAL_CTRL),
        None,
        "no global control"
    );
    let mut s = session(&m, 0, "instructions,cycles:os");
    assert_eq!(
        s.plan().slots[0].counter,
        Counter::Gp(0),
        "no fixed counters"
    );
    assert_eq!(
        m.rdmsr(0, msr::IA32_PERFEVTSEL0),
        Some(0x3_00c0),
        "EN clear"
    );
    let start = s.start().unwrap();
    assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0), Some(0x43_00c0));
    m.execute(
        0,
        &[Phase::user(10).with("instructions", 1), Phase::kernel(5)],
    );
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [10, 5]);
    s.restore().unwrap();
    assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0 + 1), Some(0));
}

// The original Pentium (SDM 18.26), on the CPUID dumps of a Pentium MMX and
// a P54C: CESR at 11H, CTR0/CTR1 at 12H/13H.

const MMX: &str = "pentium-mmx-tillamook.txt";
const P54C: &str = "pentium-p54c.txt";

#[test]
fn pentium_p5stat_pair_both_pipes_and_v_pipe() {
    // P5Stat's measurement of dual pipe use: instructions executed (both
    // pipes) on CTR0, those executed in the V-pipe on CTR1.
    let m = model(MMX);
    let mut s = session(&m, 0, "INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE");
    let ctrs: Vec<Counter> = s.plan().slots.iter().map(|s| s.counter).collect();
    assert_eq!(ctrs, [Counter::Gp(0), Counter::Gp(1)]);
    // Programmed stopped: ES0=16H, ES1=17H, both CC 000.
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0x17_0016));
    let start = s.start().unwrap();
    // Started: CC 011 (every CPL) in both halves, in one write.
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0xd7_00d6));
    m.execute(
        0,
        &[
            Phase::user(1000)
                .with("INSTRUCTIONS_EXECUTED", 2)
                .with("INSTRUCTIONS_EXECUTED_V_PIPE", 1),
            Phase::kernel(100).with("instructions", 1),
        ],
    );
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [2100, 1000]);
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0x17_0016), "stopped");
    s.restore().unwrap();
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0));
    assert_eq!(m.rdmsr(0, msr::P5_CTR0), Some(0));
}

#[test]
fn pentium_one_half_is_changed_the_other_left_alone() {
    // Someone counts V-pipe instructions on CTR1 with its pin on overflow
    // (ES1=17H, CC1=010, PC1); stat takes CTR0 for a counter-0-only MMX
    // event. Every CESR write is a read-modify-write of CTR0's half: CTR1
    // keeps counting and its half never changes.
    let m = model(MMX);
    let theirs = (0x17 | 2 << 6 | 1 << 9) << 16;
    assert!(m.wrmsr(0, msr::P5_CESR, theirs | 0x3f));
    assert!(m.wrmsr(0, msr::P5_CTR1, 7));
    let mut s = session(&m, 0, "MMX_INSTRUCTIONS_EXECUTED_U_PIPE:usr");
    assert_eq!(s.plan().slots[0].counter, Counter::Gp(0));
    let high = |m: &SimPmu| m.rdmsr(0, msr::P5_CESR).unwrap() & 0xffff_0000;
    assert_eq!(high(&m), theirs);
    let start = s.start().unwrap();
    assert_eq!(high(&m), theirs);
    m.execute(
        0,
        &[Phase::user(50)
            .with("MMX_INSTRUCTIONS_EXECUTED_U_PIPE", 1)
            .with("INSTRUCTIONS_EXECUTED_V_PIPE", 1)],
    );
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [50]);
    s.restore().unwrap();
    assert_eq!(
        m.rdmsr(0, msr::P5_CESR),
        Some(theirs | 0x3f),
        "CTR0's half back"
    );
    assert_eq!(
        m.rdmsr(0, msr::P5_CTR1),
        Some(57),
        "CTR1 counted throughout"
    );
}

#[test]
fn pentium_modes_clocks_and_wrap() {
    let m = model(MMX);
    let s = session(&m, 0, "DATA_READ:usr,DATA_READ:os");
    let phases = [
        Phase::user(10).with("DATA_READ", 2),
        Phase::kernel(5).with("DATA_READ", 3),
    ];
    assert_eq!(
        counted(&m, &s, &phases),
        [20, 15],
        "CC 010 (CPL 3), CC 001 (CPL 0-2)"
    );
    drop(s);
    // Clocks: the cycles in which the event happens, not how often.
    let s = session(&m, 0, "PIPELINE_AGI_STALLS:clocks,PIPELINE_AGI_STALLS");
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0x1f_001f));
    let start = s.start().unwrap();
    assert_eq!(
        m.rdmsr(0, msr::P5_CESR),
        Some(0xdf_01df),
        "CC0 111, CC1 011"
    );
    m.execute(
        0,
        &[
            Phase::user(30).with("PIPELINE_AGI_STALLS", 2),
            Phase::user(70),
        ],
    );
    let end = s.stop().unwrap();
    assert_eq!(s.deltas(&start, &end), [30, 60]);
    drop(s);
    // 40-bit counters wrap, and the deltas with them.
    let s = session(&m, 0, "cycles");
    assert!(m.wrmsr(0, msr::P5_CTR0, (1 << 40) - 4));
    assert!(!m.wrmsr(0, msr::P5_CTR0, 1 << 40), "bits above 39");
    let start = s.start().unwrap();
    m.execute(0, &[Phase::user(10)]);
    let end = s.stop().unwrap();
    assert_eq!(end, [6]);
    assert_eq!(s.deltas(&start, &end), [10]);
}

#[test]
fn pentium_without_mmx_reads_with_rdmsr() {
    let m = model(P54C);
    let s = session(&m, 0, "instructions,BRANCHES:usr");
    let mut b = Batch::new();
    let r = s.push_read(&mut b);
    let ops: Vec<Op> = (r.fence() + 1..b.len())
        .map(|i| b.op(i).unwrap().1)
        .collect();
    assert_eq!(
        ops,
        [
            Op::RdMsr { msr: msr::P5_CTR0 },
            Op::RdMsr { msr: msr::P5_CTR1 }
        ]
    );
    let phases = [Phase::user(10).with("instructions", 1).with("BRANCHES", 1)];
    assert_eq!(counted(&m, &s, &phases), [10, 10]);
    // RDPMC came with MMX: without it, it faults.
    let mut b = Batch::new();
    b.push(0, Op::RdPmc { ecx: 0 });
    m.run(&mut b).unwrap();
    assert!(b.result(0).unwrap().value.is_err());
    // With MMX, RDPMC reads CTR0 and CTR1, nothing else.
    let mmx = model(MMX);
    let s = session(&mmx, 0, "instructions");
    let mut b = Batch::new();
    let r = s.push_read(&mut b);
    assert_eq!(b.op(r.fence() + 1).unwrap().1, Op::RdPmc { ecx: 0 });
    let mut b = Batch::new();
    b.push(0, Op::RdPmc { ecx: 2 });
    mmx.run(&mut b).unwrap();
    assert!(b.result(0).unwrap().value.is_err());
}

#[test]
fn pentium_placement_and_errors() {
    let info = probe(&model(MMX), 0).unwrap();
    // A counter-0-only event placed after a free one still gets CTR0.
    let p = Plan::new(&info, 0, &events("BRANCHES,cycles")).unwrap();
    let ctrs: Vec<Counter> = p.slots.iter().map(|s| s.counter).collect();
    assert_eq!(ctrs, [Counter::Gp(1), Counter::Gp(0)]);
    assert_eq!(
        p.describe(),
        [
            "BRANCHES: P5_CESR bits 25:16 = 0x0d2 (counts events at any CPL)",
            "cycles: P5_CESR bits 9:0 = 0x0f0 (counts events at any CPL)",
        ]
    );
    let err = |ev: &str| Plan::new(&info, 0, &events(ev)).unwrap_err();
    let e = err("cycles,RETURNS");
    assert_eq!(e.errno().0, libc::ENOSPC);
    assert!(
        e.to_string()
            .contains("counts only on P5_CTR0, which 'cycles' has"),
        "{e}"
    );
    let e = err("DATA_READ,DATA_WRITE,BRANCHES");
    assert_eq!(e.errno().0, libc::ENOSPC);
    assert!(
        e.to_string()
            .contains("3 events do not fit CPU 0's 2 Pentium counters"),
        "{e}"
    );
    let e = err("event=0x40");
    assert!(e.to_string().contains("6 bits, up to 0x3f"), "{e}");
    let e = err("BRANCHES:cmask=1:edge");
    assert_eq!(e.errno().0, libc::EINVAL);
    assert!(e.to_string().contains("CESR has no cmask, edge"), "{e}");
    let e = err("llc-misses");
    assert_eq!(e.errno().0, libc::EOPNOTSUPP);
    // Without MMX the MMX events (and the cycles counter) are missing.
    let p54c = probe(&model(P54C), 0).unwrap();
    let e = Plan::new(&p54c, 0, &events("cycles")).unwrap_err();
    assert_eq!(e.errno().0, libc::EOPNOTSUPP);
    assert!(
        e.to_string()
            .contains("needs a Pentium with MMX technology"),
        "{e}"
    );
    // And `clocks` is the Pentium's alone.
    let sky = probe(&model("skylake.txt"), 0).unwrap();
    let e = Plan::new(&sky, 0, &events("branches:clocks")).unwrap_err();
    assert!(
        e.to_string()
            .contains("clocks is a Pentium (P5) counter control"),
        "{e}"
    );
}

#[test]
fn pentium_ownership() {
    let m = model(MMX);
    let info = probe(&m, 0).unwrap();
    assert_eq!(info.p5.and_then(|p| p.cesr), Some(0), "probe reads CESR");
    let plan = Plan::new(&info, 0, &events("DATA_READ,DATA_WRITE")).unwrap();
    // CC 100 counts nothing: free.
    assert!(m.wrmsr(0, msr::P5_CESR, 0x16 | 4 << 6));
    assert!(check_ownership(&m, &plan).unwrap().is_empty());
    // CC1 001 counts: CTR1 is taken.
    assert!(m.wrmsr(0, msr::P5_CESR, 0x17_0000 | 1 << 22));
    let c = check_ownership(&m, &plan).unwrap();
    assert_eq!(
        c,
        [Conflict::Enabled {
            counter: Counter::Gp(1),
            msr: msr::P5_CESR,
            value: 0x57_0000
        }]
    );
    assert!(c[0].to_string().contains("P5_CESR = 0x570000"), "{}", c[0]);
}

#[test]
fn sweep_packing_on_2_4_and_8_counters() {
    let packed = |name: &str, ev: &str| -> Vec<Vec<usize>> {
        let info = probe(&model(name), 0).unwrap();
        Plan::pack(&info, 0, &events(ev))
            .unwrap()
            .into_iter()
            .map(|(plan, idx)| {
                assert_eq!(plan.slots.len(), idx.len());
                idx
            })
            .collect()
    };
    // Pentium, 2 counters: two counter-0-only events cannot share a run;
    // each takes a free event beside it. Two runs, where the events in
    // order (Plan::groups) take three.
    let ev = "cycles,RETURNS,DATA_READ,DATA_WRITE";
    assert_eq!(
        packed("pentium-mmx-tillamook.txt", ev),
        [vec![0, 2], vec![1, 3]]
    );
    let info = probe(&model("pentium-mmx-tillamook.txt"), 0).unwrap();
    assert_eq!(Plan::groups(&info, 0, &events(ev)).unwrap().len(), 3);
    // P5Stat's 38 events without MMX: 19 runs of two.
    let all: Vec<&str> = pmu::P5_EVENTS
        .iter()
        .filter(|e| !e.mmx)
        .map(|e| e.name)
        .collect();
    let g = packed("pentium-p54c.txt", &all.join(","));
    assert_eq!(all.len(), 38);
    assert_eq!(g.len(), 19);
    assert!(g.iter().all(|r| r.len() == 2));
    // Nehalem, 4 general-purpose and 3 fixed counters.
    let raw: Vec<String> = (0..8)
        .map(|i| format!("event=0x{:x}:umask=1", 0x10 + i))
        .collect();
    let ev = format!("instructions,{},cycles", raw.join(","));
    assert_eq!(
        packed("nehalem-ep.txt", &ev),
        [vec![0, 1, 2, 3, 4, 9], vec![5, 6, 7, 8]]
    );
    // Skylake, 8 general-purpose counters.
    assert_eq!(
        packed("skylake.txt", &ev),
        [vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]
    );
    let ev10 = format!("{},event=0x20,event=0x21", raw.join(","));
    assert_eq!(
        packed("skylake.txt", &ev10),
        [(0..8).collect::<Vec<_>>(), vec![8, 9]]
    );
    // An event no CPU counter can take is an error, not an endless sweep.
    let info = probe(&model("pentium-p54c.txt"), 0).unwrap();
    assert_eq!(
        Plan::pack(&info, 0, &events("DATA_READ,cycles"))
            .unwrap_err()
            .errno()
            .0,
        libc::EOPNOTSUPP
    );
}

#[test]
fn linuxs_event_constraints_place_events_on_core2_and_nehalem() {
    // Core 2 (pmu::quirks): MUL (0x12) counts on PMC1 only, FP_COMP_OPS_EXE
    // (0x10) on PMC0 only. In the order given, a planner without the
    // constraints put MUL on PMC0.
    let m = model("core2-conroe.txt");
    let info = probe(&m, 0).unwrap();
    let plan = Plan::new(&info, 0, &events("event=0x12,event=0x10")).unwrap();
    let counters: Vec<Counter> = plan.slots.iter().map(|s| s.counter).collect();
    assert_eq!(counters, [Counter::Gp(1), Counter::Gp(0)]);
    // Two PMC0-only events do not fit, and the error says why.
    let err = Plan::new(&info, 0, &events("event=0x10,event=0x14")).unwrap_err();
    assert_eq!(err.errno().0, libc::ENOSPC);
    assert!(
        err.what()
            .contains("event 'event=0x14' counts only on IA32_PMC0, which 'event=0x10' has"),
        "{err}"
    );
    // ... so stat's groups split them.
    let groups = Plan::groups(&info, 0, &events("event=0x10,event=0x14,event=0x12")).unwrap();
    assert_eq!(groups.len(), 2);
    // Nehalem: L1D (0x51) on PMC0/PMC1 only; with both taken, a third does
    // not fit though PMC2 and PMC3 are free.
    let m = model("nehalem-ep.txt");
    let info = probe(&m, 0).unwrap();
    let plan = Plan::new(&info, 0, &events("branches,event=0x51:umask=1,event=0x63")).unwrap();
    let counters: Vec<Counter> = plan.slots.iter().map(|s| s.counter).collect();
    assert_eq!(counters, [Counter::Gp(2), Counter::Gp(0), Counter::Gp(1)]);
    let err = Plan::new(&info, 0, &events("event=0x51,event=0x63,event=0x40")).unwrap_err();
    assert!(
        err.what().contains(
            "counts only on IA32_PMC0 and IA32_PMC1, which 'event=0x51' and 'event=0x63' have"
        ),
        "{err}"
    );
}

#[test]
fn any_thread_only_where_linux_allows_it() {
    for (name, ok) in [
        ("core2-conroe.txt", false),
        ("nehalem-ep.txt", true),
        ("skylake.txt", true),
        ("icelake-u.txt", false),
        ("zen4-raphael.txt", false),
    ] {
        let info = dump(name).cpus[0].pmu();
        let r = Plan::new(&info, 0, &events("event=0x3c:any"));
        assert_eq!(r.is_ok(), ok, "{name}: {r:?}");
    }
}
