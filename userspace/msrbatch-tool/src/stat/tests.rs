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
            (false, false) => unreachable!("no Intel version 1 dump"),
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
        // Core 2 enumerates 2 counters and no fixed ones: two groups, CMD twice per run.
        let groups = if name == "core2-conroe.txt" { 2 } else { 1 };
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
    // A dry run there plans for a version 2 PMU with --counters counters.
    let a = args(&[
        "--dry-run",
        "--counters",
        "2",
        "-C",
        "1",
        "-e",
        "instructions,cycles,branches",
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
        "# group 1 (instructions, cycles): ownership check",
        "# group 2 (branches): ownership check",
        "wrmsr IA32_PERFEVTSEL0 0x4300c0",
        "wrmsr IA32_PERFEVTSEL1 0x43003c",
        "rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0x3",
        "cpu 1",
    ] {
        assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
    }
}
