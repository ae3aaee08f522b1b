// SPDX-License-Identifier: GPL-2.0
//! `stat` against the PMU model of real CPUs (the CPUID dumps in
//! userspace/msrbatch/testdata/cpuid): the counts are what the model
//! counted for a scripted CMD.

use super::*;
use clap::Parser;
use msrbatch::model::Phase;
use msrbatch::msr;

#[derive(Parser)]
struct T {
    #[command(flatten)]
    a: StatArgs,
}

fn args(argv: &[&str]) -> StatArgs {
    T::try_parse_from(std::iter::once("stat").chain(argv.iter().copied()))
        .unwrap()
        .a
}

fn testdata(name: &str) -> String {
    format!(
        "{}/../msrbatch/testdata/cpuid/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

const DUMPS: &[(&str, bool)] = &[
    ("core2-conroe.txt", false),
    ("nehalem-ep.txt", false),
    ("sandybridge.txt", false),
    ("sandybridge-cpuid-r.txt", false),
    ("skylake.txt", false),
    ("icelake-u.txt", false),
    ("raptorlake-hybrid.txt", false),
    ("zen2-matisse.txt", true),
    ("zen4-raphael.txt", true),
];

#[test]
fn dry_run_of_the_seed_event_on_every_dump() {
    for &(name, amd) in DUMPS {
        let path = testdata(name);
        let a = args(&[
            "--dry-run",
            "--cpuid-dump",
            &path,
            "-e",
            "event=0x0e:umask=0x01:usr",
            "--",
            "true",
        ]);
        let mut out = Vec::new();
        assert_eq!(stat(None, &a, &mut out).unwrap(), 0, "{name}");
        let text = String::from_utf8(out).unwrap();
        let has = |l: &str| text.lines().any(|x| x == l);
        let pmu = CpuidDump::read(&path).unwrap().cpus[0].pmu();
        match (amd, pmu.version >= 2) {
            (false, true) => {
                assert!(has("wrmsr IA32_PERFEVTSEL0 0x41010e"), "{name}:\n{text}");
                assert!(
                    has("rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0x1"),
                    "{name}:\n{text}"
                );
                assert!(
                    has("wrmsr IA32_PERF_GLOBAL_CTRL 0x0"),
                    "{name}: restore\n{text}"
                );
            }
            (true, true) => {
                assert!(has("wrmsr AMD_PERF_CTL0 0x41010e"), "{name}:\n{text}");
                assert!(
                    has("rmw AMD_PERF_CNTR_GLOBAL_CTL clear=0x0 set=0x1"),
                    "{name}:\n{text}"
                );
            }
            (true, false) => {
                // No global control: programmed with EN clear, started by EN.
                assert!(has("wrmsr AMD_PERF_CTL0 0x1010e"), "{name}:\n{text}");
                assert!(has("wrmsr AMD_PERF_CTL0 0x41010e"), "{name}:\n{text}");
            }
            (false, false) => unreachable!("no Intel version 1 dump here"),
        }
        assert!(text.contains("# group 1: restore what was saved"), "{name}");
    }
}

#[test]
fn stat_counts_what_the_model_counted_on_every_dump() {
    for &(name, _) in DUMPS {
        let m = Model::from_file(testdata(name)).unwrap();
        let global = m.pmu(0).unwrap().global_ctrl();
        let has_global = m.pmu(0).unwrap().has_global();
        if has_global {
            assert!(m.wrmsr(0, global, 1 << 1), "{name}");
        }
        let a = args(&[
            "-r",
            "3",
            "-e",
            "instructions:usr,cycles,branches:os",
            "--",
            "cmd",
        ]);
        let mut out = Vec::new();
        let mut runs = 0;
        let code = count(&m, &a, &mut out, &mut || {
            runs += 1;
            m.execute(
                0,
                &[
                    Phase::user(1000)
                        .with("instructions", 2)
                        .with("branches", 1),
                    Phase::kernel(100)
                        .with("instructions", 1)
                        .with("branches", 3),
                ],
            );
            Ok(0)
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(code, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("(3 runs)"), "{text}");
        for want in ["2000  instructions:usr", "1100  cycles", "300  branches:os"] {
            assert!(
                text.lines().any(|l| l.trim() == want),
                "{name}: {want} in\n{text}"
            );
        }
        // Core 2 enumerates no fixed counters but has 3 (the quirk):
        // instructions and cycles go there, one group.
        let groups = 1;
        assert_eq!(runs, 3 * groups, "{name}");
        if has_global {
            assert_eq!(m.rdmsr(0, global), Some(1 << 1), "{name}: restored");
        }
        assert_eq!(
            m.rdmsr(0, m.pmu(0).unwrap().counter_msrs(0).0),
            Some(0),
            "{name}"
        );
    }
}

#[test]
fn stat_refuses_owned_counters_unless_forced() {
    let m = Model::from_file(testdata("skylake.txt")).unwrap();
    m.set_nmi_watchdog(Some(true));
    let a = args(&["-e", "branches", "--", "cmd"]);
    let e = count(&m, &a, &mut Vec::new(), &mut || Ok(0)).unwrap_err();
    assert!(e.contains("refusing") && e.contains("NMI watchdog"), "{e}");
    let a = args(&["--force", "-e", "branches", "--", "cmd"]);
    assert_eq!(count(&m, &a, &mut Vec::new(), &mut || Ok(3)).unwrap(), 3);
    m.set_nmi_watchdog(Some(false));
    assert!(m.wrmsr(0, msr::IA32_PERFEVTSEL0, 0x43_00c4));
    let a = args(&["-e", "branches", "--", "cmd"]);
    let e = count(&m, &a, &mut Vec::new(), &mut || Ok(0)).unwrap_err();
    assert!(e.contains("IA32_PERFEVTSEL0 = 0x4300c4"), "{e}");
}

#[test]
fn stat_without_a_pmu() {
    let d = CpuidDump::parse("CPUID 00000000: 0000000D-756E6547-6C65746E-49656E69\n").unwrap();
    let m = Model::new(&d);
    let a = args(&["-e", "instructions", "--", "cmd"]);
    let e = count(&m, &a, &mut Vec::new(), &mut || Ok(0)).unwrap_err();
    assert!(e.contains("no PMU"), "{e}");
    // A dry run there plans for a version 2 PMU with --counters counters
    // (and the 3 fixed counters of version 2, so general-purpose events
    // show the groups).
    let a = args(&[
        "--dry-run",
        "--counters",
        "2",
        "-C",
        "1",
        "-e",
        "branches,branch-misses,llc-misses",
        "--",
        "true",
    ]);
    let two = Model::new(&CpuidDump {
        cpus: vec![d.cpus[0].clone(); 2],
    });
    let mut out = Vec::new();
    stat(Some(&two), &a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for l in [
        "# group 1 (branches, branch-misses): ownership check",
        "# group 2 (llc-misses): ownership check",
        "wrmsr IA32_PERFEVTSEL0 0x4300c4",
        "wrmsr IA32_PERFEVTSEL1 0x4300c5",
        "rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0x3",
        "cpu 1",
    ] {
        assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
    }
}

const MMX: &str = "pentium-mmx-tillamook.txt";

#[test]
fn dry_run_on_a_pentium_dump() {
    // P5Stat's pair on a Pentium MMX's CPUID: one CESR half per counter,
    // each write a read-modify-write, read with RDPMC.
    for (name, read) in [(MMX, "rdpmc 1"), ("pentium-p54c.txt", "rdmsr P5_CTR1")] {
        let path = testdata(name);
        let a = args(&[
            "--dry-run",
            "--cpuid-dump",
            &path,
            "-e",
            "INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE:usr",
            "--",
            "true",
        ]);
        let mut out = Vec::new();
        assert_eq!(stat(None, &a, &mut out).unwrap(), 0, "{name}");
        let text = String::from_utf8(out).unwrap();
        let has = |l: &str| text.lines().any(|x| x == l);
        for l in [
            "rdmsr P5_CESR",
            "rmw P5_CESR clear=0x1c001c0 set=0x0",
            "wrmsr P5_CTR0 0x0",
            "wrmsr P5_CTR1 0x0",
            "rmw P5_CESR clear=0x3ff03ff set=0x170016",
            "rmw P5_CESR clear=0x1c001c0 set=0x8000c0",
            read,
            "# group 1 (INSTRUCTIONS_EXECUTED, INSTRUCTIONS_EXECUTED_V_PIPE:usr): ownership check",
        ] {
            assert!(has(l), "{name}: {l} in\n{text}");
        }
        for arch in [
            "IA32_PERFEVTSEL",
            "IA32_PMC",
            "IA32_PERF_GLOBAL",
            "IA32_FIXED",
        ] {
            assert!(!text.contains(arch), "{name}: no {arch}\n{text}");
        }
    }
}

#[test]
fn stat_on_a_pentium_model() {
    let m = Model::from_file(testdata(MMX)).unwrap();
    let a = args(&[
        "-r",
        "2",
        "-e",
        "instructions:usr,cycles,branches:os",
        "--",
        "cmd",
    ]);
    let mut out = Vec::new();
    let mut runs = 0;
    count(&m, &a, &mut out, &mut || {
        runs += 1;
        m.execute(
            0,
            &[
                Phase::user(1000)
                    .with("instructions", 2)
                    .with("branches", 1),
                Phase::kernel(100)
                    .with("instructions", 1)
                    .with("branches", 3),
            ],
        );
        Ok(0)
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    for want in ["2000  instructions:usr", "1100  cycles", "300  branches:os"] {
        assert!(text.lines().any(|l| l.trim() == want), "{want} in\n{text}");
    }
    // Two counters: two groups, twice each.
    assert_eq!(runs, 4);
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0), "restored");
}

/// A CMD for the model: run `k` (from 1) retires `k * base` of each event
/// listed, so repetitions differ and the spread shows.
fn varying<'a>(
    m: &'a Model,
    runs: &'a std::cell::Cell<u64>,
    per: &'a [(&'static str, u32)],
) -> impl FnMut() -> Result<i32, String> + 'a {
    move || {
        runs.set(runs.get() + 1);
        let mut p = Phase::user(1000 + runs.get());
        for &(name, n) in per {
            p = p.with(name, n);
        }
        m.execute(0, &[p]);
        Ok(0)
    }
}

#[test]
fn sweep_counts_every_event_exactly_on_a_pentium() {
    let m = Model::from_file(testdata(MMX)).unwrap();
    // Two counter-0-only events and two free ones: two runs of two.
    let a = args(&[
        "--sweep",
        "cycles,RETURNS,INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE",
        "--",
        "cmd",
    ]);
    let runs = std::cell::Cell::new(0);
    let per = [
        ("RETURNS", 1),
        ("INSTRUCTIONS_EXECUTED", 3),
        ("INSTRUCTIONS_EXECUTED_V_PIPE", 1),
    ];
    let mut out = Vec::new();
    assert_eq!(
        count(&m, &a, &mut out, &mut varying(&m, &runs, &per)).unwrap(),
        0
    );
    // One warm-up run, then one per group.
    assert_eq!(runs.get(), 3);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Sweep of 'cmd' on CPU 0: 1 warm-up run, then 2 counting runs (2 groups x 1); every count exact, none scaled:"
    );
    // Run 2 (1002 cycles) counts cycles and both-pipe instructions; run 3
    // (1003 cycles) returns and V-pipe instructions.
    let row = |count: u64, group: usize, name: &str| {
        format!("{count:>20}  {:>9}  {group:>5}  {name}", "-")
    };
    assert_eq!(
        lines[2..6],
        [
            row(1002, 1, "cycles"),
            row(1003, 2, "RETURNS"),
            row(3006, 1, "INSTRUCTIONS_EXECUTED"),
            row(1003, 2, "INSTRUCTIONS_EXECUTED_V_PIPE"),
        ]
    );
    assert_eq!(
        lines[6..9],
        [
            "events that shared a run:",
            "  group 1: cycles, INSTRUCTIONS_EXECUTED",
            "  group 2: RETURNS, INSTRUCTIONS_EXECUTED_V_PIPE",
        ]
    );
}

#[test]
fn sweep_spread_over_repetitions_on_8_counters() {
    let m = Model::from_file(testdata("skylake.txt")).unwrap();
    // 3 fixed and 8 general-purpose counters: the 11 events in one group;
    // -r 3: three counting runs after the warm-up.
    let raw: Vec<String> = (0..8).map(|i| format!("event=0x{:x}", 0x10 + i)).collect();
    let list = format!("instructions,cycles,ref-cycles,{}", raw.join(","));
    let a = args(&["-r", "3", "--sweep", &list, "--", "cmd"]);
    let runs = std::cell::Cell::new(0);
    let mut out = Vec::new();
    count(
        &m,
        &a,
        &mut out,
        &mut varying(&m, &runs, &[("instructions", 2)]),
    )
    .unwrap();
    assert_eq!(runs.get(), 4);
    let text = String::from_utf8(out).unwrap();
    // Cycles: 1002, 1003, 1004: mean 1003, half the range 1 = 0.10%.
    let want = format!("{:>20}  {:>9}  {:>5}  cycles", 1003, "±0.10%", 1);
    assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
    let want = format!("{:>20}  {:>9}  {:>5}  event=0x10", 0, "±0%", 1);
    assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
    assert!(
        text.contains("1 warm-up run, then 3 counting runs (1 group x 3)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  group 1: {list}").replace(',', ", ")),
        "{text}"
    );
}

#[test]
fn sweep_dry_run_and_misuse() {
    let path = testdata("nehalem-ep.txt");
    let a = args(&[
        "--dry-run",
        "--cpuid-dump",
        &path,
        "--sweep",
        "branches,branch-misses,event=0x10,event=0x11,event=0x12,instructions",
        "--",
        "true",
    ]);
    let mut out = Vec::new();
    stat(None, &a, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for l in [
        "# sweep: 6 events in 2 groups of at most 7 (the counters of CPU 0); CMD runs once to warm up, then 1 time(s) per group",
        "# warm-up: CMD runs, nothing counted: true",
        "# group 1 (branches, branch-misses, event=0x10, event=0x11, instructions): ownership check",
        "# group 2 (event=0x12): ownership check",
    ] {
        assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
    }
    // -e and --sweep are one or the other; one of them is needed.
    #[derive(Parser)]
    struct T2 {
        #[command(flatten)]
        a: StatArgs,
    }
    for argv in [
        &["stat", "-e", "cycles", "--sweep", "cycles", "--", "x"][..],
        &["stat", "--", "x"][..],
    ] {
        assert!(T2::try_parse_from(argv).is_err(), "{argv:?}");
    }
}

#[test]
fn dry_run_follows_linuxs_core2_event_constraints() {
    // Core 2: MUL (0x12) counts on PMC1 only, FP_COMP_OPS_EXE (0x10) on PMC0
    // only (msrbatch::pmu::quirks); `any` needs perfmon version 3.
    let path = testdata("core2-conroe.txt");
    let a = args(&[
        "--dry-run",
        "--cpuid-dump",
        &path,
        "-e",
        "event=0x12,event=0x10",
        "--",
        "true",
    ]);
    let mut out = Vec::new();
    assert_eq!(stat(None, &a, &mut out).unwrap(), 0);
    let text = String::from_utf8(out).unwrap();
    let has = |l: &str| text.lines().any(|x| x == l);
    assert!(has("wrmsr IA32_PERFEVTSEL1 0x430012"), "{text}");
    assert!(has("wrmsr IA32_PERFEVTSEL0 0x430010"), "{text}");
    let a = args(&[
        "--dry-run",
        "--cpuid-dump",
        &path,
        "-e",
        "event=0xc4:any",
        "--",
        "true",
    ]);
    let err = stat(None, &a, &mut Vec::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("AnyThread needs architectural perfmon version 3"),
        "{err}"
    );
}
