// SPDX-License-Identifier: GPL-2.0
//! `stat` against the PMU model of real CPUs (the CPUID dumps in
//! userspace/msrbatch/testdata/cpuid): the counts are what the model
//! counted for a scripted CMD.

use super::*;
use clap::Parser;
use msrbatch::msr;
use msrbatch::sim::Phase;
use std::time::Duration;

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

/// CMD's run: exit status `status`, 1 ms.
fn ran(status: i32) -> Result<Ran, String> {
    Ok(Ran {
        status,
        elapsed: Duration::from_millis(1),
    })
}

/// Counts on CPU 0 of `dev`, warnings dropped.
fn count0<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    out: &mut dyn Write,
    run: &mut Workload<'_>,
) -> Result<i32, String> {
    count(dev, a, &[0], out, &mut Vec::new(), run)
}

/// Whether the table `text` has a row counting `n` of `event`.
fn has_count(text: &str, n: u64, event: &str) -> bool {
    let n = n.to_string();
    text.lines()
        .any(|l| l.split_whitespace().take(2).eq([n.as_str(), event]))
}

fn testdata(name: &str) -> String {
    format!(
        "{}/../msrbatch/testdata/cpuid/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// What `stat` prints for `argv` through `dev` (or the dump `argv` names);
/// CMD's exit status is 0.
fn stat_text(dev: Option<&dyn Backend>, argv: &[&str]) -> String {
    let mut out = Vec::new();
    assert_eq!(stat(dev, &args(argv), &mut out).unwrap(), 0, "{argv:?}");
    String::from_utf8(out).unwrap()
}

/// A dry run of `events` (`opt`: `-e` or `--sweep`) on the dump `path`.
fn dry_run(path: &str, opt: &str, events: &str) -> String {
    stat_text(
        None,
        &["--dry-run", "--cpuid-dump", path, opt, events, "--", "true"],
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
        let text = dry_run(&path, "-e", "event=0x0e:umask=0x01:usr");
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
        // The dry run's words the guest's pentium_test.sh looks for.
        assert!(
            text.contains(
                "# group 1: save every MSR it touches on CPU 0, stop, zero and program ("
            ),
            "{name}"
        );
    }
}

#[test]
fn stat_counts_what_the_model_counted_on_every_dump() {
    for &(name, _) in DUMPS {
        let m = SimPmu::from_file(testdata(name)).unwrap();
        let global = m.pmu(0).unwrap().global_ctrl();
        let has_global = m.pmu(0).unwrap().has_global();
        if has_global {
            assert!(m.wrmsr(0, global, 1 << 1), "{name}");
        }
        let (text, runs) = count_mix(&m, "3").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains("(3 runs)"), "{text}");
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
    let m = SimPmu::from_file(testdata("skylake.txt")).unwrap();
    m.set_nmi_watchdog(Some(true));
    let a = args(&["-e", "branches", "--", "cmd"]);
    let e = count0(&m, &a, &mut Vec::new(), &mut |_| ran(0)).unwrap_err();
    assert!(e.contains("refusing") && e.contains("NMI watchdog"), "{e}");
    let a = args(&["--force", "-e", "branches", "--", "cmd"]);
    assert_eq!(count0(&m, &a, &mut Vec::new(), &mut |_| ran(3)).unwrap(), 3);
    m.set_nmi_watchdog(Some(false));
    assert!(m.wrmsr(0, msr::IA32_PERFEVTSEL0, 0x43_00c4));
    let a = args(&["-e", "branches", "--", "cmd"]);
    let e = count0(&m, &a, &mut Vec::new(), &mut |_| ran(0)).unwrap_err();
    assert!(e.contains("IA32_PERFEVTSEL0 = 0x4300c4"), "{e}");
}

#[test]
fn stat_without_a_pmu() {
    let d = CpuidDump::parse("CPUID 00000000: 0000000D-756E6547-6C65746E-49656E69\n").unwrap();
    let m = SimPmu::new(&d);
    // As perf: CMD runs (-r times), its counts are <not supported>, and
    // stat exits with its status; the warning says why.
    let a = args(&["-r", "2", "-e", "instructions,cycles", "--", "cmd"]);
    let (mut out, mut warn, mut runs) = (Vec::new(), Vec::new(), 0);
    let status = count(&m, &a, &[0], &mut out, &mut warn, &mut |_| {
        runs += 1;
        ran(7)
    })
    .unwrap();
    assert_eq!((status, runs), (7, 2));
    let text = String::from_utf8(out).unwrap();
    for e in ["instructions", "cycles"] {
        let want = format!("{:>18}      {e}", "<not supported>");
        assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
    }
    assert!(text.contains(" seconds time elapsed"), "{text}");
    let warn = String::from_utf8(warn).unwrap();
    assert!(
        warn.contains("CPU 0: no PMU") && warn.contains("<not supported>"),
        "{warn}"
    );
    // A dry run there plans for a version 2 PMU with --counters counters
    // (and the 3 fixed counters of version 2, so general-purpose events
    // show the groups).
    let two = SimPmu::new(&CpuidDump {
        cpus: vec![d.cpus[0].clone(); 2],
    });
    let text = stat_text(
        Some(&two),
        &[
            "--dry-run",
            "--counters",
            "2",
            "-C",
            "1",
            "-e",
            "branches,branch-misses,llc-misses",
            "--",
            "true",
        ],
    );
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
        let text = dry_run(
            &path,
            "-e",
            "INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE:usr",
        );
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
    let m = SimPmu::from_file(testdata(MMX)).unwrap();
    let (_, runs) = count_mix(&m, "2").unwrap();
    // Two counters: two groups, twice each.
    assert_eq!(runs, 4);
    assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0), "restored");
}

/// `stat -r REPS -e instructions:usr,cycles,branches:os` on CPU 0 of `m`,
/// where each run of CMD is 1000 user cycles retiring 2 instructions and 1
/// branch per cycle and 100 kernel cycles retiring 1 and 3: checks the
/// counts (2000, 1100, 300); returns what stat printed and how often CMD ran.
fn count_mix(m: &SimPmu, reps: &str) -> Result<(String, u32), String> {
    let a = args(&[
        "-r",
        reps,
        "-e",
        "instructions:usr,cycles,branches:os",
        "--",
        "cmd",
    ]);
    let mut out = Vec::new();
    let mut runs = 0;
    let code = count0(m, &a, &mut out, &mut |_| {
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
        ran(0)
    })?;
    assert_eq!(code, 0);
    let text = String::from_utf8(out).unwrap();
    for (n, want) in [
        (2000, "instructions:usr"),
        (1100, "cycles"),
        (300, "branches:os"),
    ] {
        assert!(has_count(&text, n, want), "{n} {want} in\n{text}");
    }
    Ok((text, runs))
}

/// A CMD for the model: run `k` (from 1) retires `k * base` of each event
/// listed, so repetitions differ and the spread shows.
fn varying<'a>(
    m: &'a SimPmu,
    runs: &'a std::cell::Cell<u64>,
    per: &'a [(&'static str, u32)],
) -> impl FnMut(&mut dyn FnMut() -> Result<(), String>) -> Result<Ran, String> + 'a {
    move |_| {
        runs.set(runs.get() + 1);
        let mut p = Phase::user(1000 + runs.get());
        for &(name, n) in per {
            p = p.with(name, n);
        }
        m.execute(0, &[p]);
        ran(0)
    }
}

#[test]
fn sweep_counts_every_event_exactly_on_a_pentium() {
    let m = SimPmu::from_file(testdata(MMX)).unwrap();
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
        count0(&m, &a, &mut out, &mut varying(&m, &runs, &per)).unwrap(),
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
    let m = SimPmu::from_file(testdata("skylake.txt")).unwrap();
    // 3 fixed and 8 general-purpose counters: the 11 events in one group;
    // -r 3: three counting runs after the warm-up.
    let raw: Vec<String> = (0..8).map(|i| format!("event=0x{:x}", 0x10 + i)).collect();
    let list = format!("instructions,cycles,ref-cycles,{}", raw.join(","));
    let a = args(&["-r", "3", "--sweep", &list, "--", "cmd"]);
    let runs = std::cell::Cell::new(0);
    let mut out = Vec::new();
    count0(
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
    let text = dry_run(
        &path,
        "--sweep",
        "branches,branch-misses,event=0x10,event=0x11,event=0x12,instructions",
    );
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

/// A 4-CPU Skylake: the dump's CPU four times.
fn skylake4() -> SimPmu {
    let d = CpuidDump::read(testdata("skylake.txt")).unwrap();
    SimPmu::new(&CpuidDump {
        cpus: vec![d.cpus[0].clone(); 4],
    })
}

#[test]
fn cpu_lists_sum_or_split_the_counts() {
    let m = skylake4();
    for (argv, want) in [
        (
            &["-C", "0,2-3"][..],
            &[(3, "instructions"), (600, "cycles")][..],
        ),
        (
            &["-C", "0-3"][..],
            &[(1003, "instructions"), (1600, "cycles")][..],
        ),
        (
            &["-C", "2"][..],
            &[(2, "instructions"), (200, "cycles")][..],
        ),
    ] {
        let mut v = argv.to_vec();
        v.extend(["-e", "instructions,cycles", "--", "cmd"]);
        let a = args(&v);
        let cpus = a.cpus(&[0, 1, 2, 3]).unwrap();
        let mut out = Vec::new();
        count(&m, &a, &cpus, &mut out, &mut Vec::new(), &mut |_| {
            // CPU 0 retires 1 instruction in 101 cycles, CPU 2 two in
            // 200, CPU 3 none in 299, CPU 1 1000 in 1000.
            m.execute(0, &[Phase::user(100).with("instructions", 0)]);
            m.execute(0, &[Phase::user(0)]);
            m.execute(0, &[Phase::user(1).with("instructions", 1)]);
            m.execute(
                2,
                &[Phase::user(198), Phase::user(2).with("instructions", 1)],
            );
            m.execute(3, &[Phase::user(299)]);
            m.execute(1, &[Phase::user(1000).with("instructions", 1)]);
            ran(0)
        })
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        for &(n, e) in want {
            assert!(has_count(&text, n, e), "{argv:?}: {n} {e} in\n{text}");
        }
        assert!(
            text.contains(&format!("for 'CPU(s) {}'", argv[1])),
            "{text}"
        );
    }
    // -A: one row per CPU and event.
    let a = args(&["-A", "-C", "1,3", "-x", ",", "-e", "cycles", "--", "cmd"]);
    let mut out = Vec::new();
    count(&m, &a, &[1, 3], &mut out, &mut Vec::new(), &mut |_| {
        m.execute(1, &[Phase::user(10)]);
        m.execute(3, &[Phase::user(30)]);
        ran(0)
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "CPU1,10,,cycles,1000000,100.00,,",
            "CPU3,30,,cycles,1000000,100.00,,"
        ]
    );
    for bad in ["0-", "3-1", "x", ""] {
        assert!(
            args(&["-C", bad, "-e", "cycles", "--", "c"])
                .cpus(&[0])
                .is_err(),
            "{bad}"
        );
    }
    assert_eq!(
        args(&["-a", "-e", "cycles", "--", "c"]).cpus(&[0, 1, 5]),
        Ok(vec![0, 1, 5])
    );
}

#[test]
fn ipc_csv_and_json_of_a_model_run() {
    let m = SimPmu::from_file(testdata("skylake.txt")).unwrap();
    // `stat ARGS -e instructions,cycles -- cmd` where CMD retires 2
    // instructions per cycle for 1000 user cycles: what it printed.
    let stat = |opts: &[&str]| {
        let mut argv = opts.to_vec();
        argv.extend(["-e", "instructions,cycles", "--", "cmd"]);
        let mut out = Vec::new();
        count0(&m, &args(&argv), &mut out, &mut |_| {
            m.execute(0, &[Phase::user(1000).with("instructions", 2)]);
            ran(0)
        })
        .unwrap();
        String::from_utf8(out).unwrap()
    };
    let text = stat(&[]);
    let line = text.lines().find(|l| l.contains("instructions")).unwrap();
    assert!(line.ends_with("#    2.00  insn per cycle"), "{line}");
    assert_eq!(
        stat(&["-x", ";"]),
        "2000;;instructions;1000000;100.00;2.00;insn per cycle\n1000;;cycles;1000000;100.00;;\n"
    );
    let text = stat(&["-j"]);
    let v: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["counter-value"], "2000.000000");
    assert_eq!(v[0]["metric-value"], 2.0);
    assert_eq!(v[1]["event"], "cycles");
    assert!(T::try_parse_from(["stat", "-j", "-x", ",", "-e", "c", "--", "c"]).is_err());
}

#[test]
fn intervals_print_what_each_counted() {
    let m = SimPmu::from_file(testdata("skylake.txt")).unwrap();
    let a = args(&[
        "-I",
        "100",
        "-x",
        ",",
        "-e",
        "instructions,cycles",
        "--",
        "cmd",
    ]);
    let mut out = Vec::new();
    let mut elapsed = 0;
    count0(&m, &a, &mut out, &mut |tick| {
        for n in [100, 200] {
            m.execute(0, &[Phase::user(n).with("instructions", 3)]);
            elapsed += 1;
            tick()?;
        }
        m.execute(0, &[Phase::user(50)]);
        ran(0)
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    // Two ticks and the end: three intervals of two events, no totals.
    assert_eq!(rows.len(), 6, "{text}");
    let counts: Vec<(&str, &str)> = rows.iter().map(|r| (r[1], r[3])).collect();
    assert_eq!(
        counts,
        [
            ("300", "instructions"),
            ("100", "cycles"),
            ("600", "instructions"),
            ("200", "cycles"),
            ("0", "instructions"),
            ("50", "cycles"),
        ]
    );
    assert_eq!(elapsed, 2);
    // -I counts every event at once, one run: refused before CMD runs.
    for argv in [
        &["-I", "100", "-r", "2", "-e", "cycles", "--", "cmd"][..],
        &[
            "-I",
            "100",
            "--counters",
            "1",
            "-e",
            "branches,branch-misses,llc-misses,llc-references,event=0x10",
            "--",
            "cmd",
        ][..],
    ] {
        let a = args(argv);
        let mut ran_cmd = false;
        let m = SimPmu::new(&CpuidDump {
            cpus: vec![stand_in_pmu(2)],
        });
        let e = count0(&m, &a, &mut Vec::new(), &mut |_| {
            ran_cmd = true;
            ran(0)
        })
        .unwrap_err();
        assert!(e.contains("-I") && !ran_cmd, "{argv:?}: {e}");
    }
}

#[test]
fn options_as_perf_takes_them() {
    assert_eq!(parse_interval("100"), Ok(Duration::from_millis(100)));
    assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
    for bad in ["5", "9ms", "x", "0"] {
        assert!(parse_interval(bad).is_err(), "{bad}");
    }
    // -r 0 is refused, not read as 1.
    let e = T::try_parse_from(["stat", "-r", "0", "-e", "cycles", "--", "c"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at least 1"), "{e}");
    assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
    // perf's spellings: -x, and -x; attached (CMD's own options after it
    // or after --).
    for (argv, sep, cmd) in [
        (&["-x,", "-e", "c", "--", "true"][..], ",", &["true"][..]),
        (
            &["-x;", "-e", "c", "sh", "-c", "-x"],
            ";",
            &["sh", "-c", "-x"],
        ),
        (
            &["-x", ":", "-e", "c", "--", "-weird", "-a"],
            ":",
            &["-weird", "-a"],
        ),
    ] {
        let a = args(argv);
        assert_eq!(a.style(), Style::Csv(sep.into()), "{argv:?}");
        assert_eq!(a.cmd, cmd, "{argv:?}");
    }
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_n() {
    let mut ticks = 0;
    let r = run_cmd(
        None,
        &["sh".into(), "-c".into(), "kill -TERM $$".into()],
        None,
        &mut || Ok(()),
    )
    .unwrap();
    assert_eq!(r.status, 128 + libc::SIGTERM);
    let r = run_cmd(
        Some(&[0]),
        &["sh".into(), "-c".into(), "exit 3".into()],
        None,
        &mut || Ok(()),
    )
    .unwrap();
    assert_eq!(r.status, 3);
    let r = run_cmd(
        None,
        &["sleep".into(), "0.35".into()],
        Some(Duration::from_millis(100)),
        &mut || {
            ticks += 1;
            Ok(())
        },
    )
    .unwrap();
    assert_eq!((r.status, ticks), (0, 3));
    assert!(r.elapsed >= Duration::from_millis(350), "{:?}", r.elapsed);
    assert!(run_cmd(None, &["/nonexistent/cmd".into()], None, &mut || Ok(())).is_err());
    // SIGINT reaches CMD with its default action (stat's own handler is
    // not inherited), and CMD runs on the CPUs asked for while stat's
    // affinity is put back.
    let sh = |script: &str| -> Vec<String> { ["sh", "-c", script].map(String::from).to_vec() };
    let r = run_cmd(None, &sh("kill -INT $$; sleep 1"), None, &mut || Ok(())).unwrap();
    assert_eq!(r.status, 128 + libc::SIGINT);
    let before = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
    };
    let r = run_cmd(
        Some(&[0]),
        &sh("grep -q '^Cpus_allowed_list:[[:space:]]*0$' /proc/self/status"),
        None,
        &mut || Ok(()),
    )
    .unwrap();
    assert_eq!(r.status, 0, "CMD pinned to CPU 0");
    let after = std::fs::read_to_string("/proc/self/status").unwrap();
    assert_eq!(allowed(&before), allowed(&after));
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
