// SPDX-License-Identifier: GPL-2.0
//! The command line as a user meets it, without a device: exit statuses of
//! usage errors, msr-tools' long options, the number grammar, and the man
//! page against `--help`. (With the module, tests/guest/tool_test.sh runs the
//! same commands against msr-tools.)

use std::process::{Command, Output};
use std::sync::RwLock;

/// Held for reading while a test starts a child, and for writing while
/// [`a_closed_pipe_ends_quietly`] holds the read end of its pipe: the tests
/// run in parallel threads, and a child forked meanwhile would inherit that
/// read end and keep the pipe open (the tool's write then succeeds).
static SPAWN: RwLock<()> = RwLock::new(());

/// Runs `cmd` to its end (stdout and stderr captured unless set).
fn output(cmd: &mut Command) -> Output {
    let _spawn = SPAWN.read().unwrap_or_else(|e| e.into_inner());
    cmd.output().expect("run msrbatch")
}

/// Runs the tool against a device node that does not exist; returns the
/// exit status and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_msrbatch"))
            .args(["--device", "/nonexistent/msrbatch"])
            .args(args),
    );
    (
        out.status.code().expect("exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

#[test]
fn usage_errors_exit_as_documented() {
    // rdmsr and wrmsr: msr-tools' 127 (never 2, which is "no such CPU").
    for line in [
        "rdmsr -f 4:7 0x10",
        "rdmsr -f 64:0 0x10",
        "rdmsr -p x 0x10",
        "rdmsr",
        "rdmsr 0x10 0x20",
        "rdmsr -Z 0x10",
        "rdmsr NOPE",
        "wrmsr 0x10",
        "wrmsr 0x10 zz",
        "wrmsr --bogus 0x10 1",
    ] {
        let (code, _, err) = run(&words(line));
        assert_eq!(code, 127, "{line}: {err}");
        assert!(
            !err.contains("open"),
            "{line}: a usage error, not an open error: {err}"
        );
    }
    // Every other command: 2.
    for line in [
        "bogus",
        "run",
        "run --repeat x f",
        "run --interval 5parsecs f",
        "pmu -C x",
        "cr4 extra",
    ] {
        let (code, _, err) = run(&words(line));
        assert_eq!(code, 2, "{line}: {err}");
    }
    for line in [
        "--help",
        "--version",
        "rdmsr --help",
        "rdmsr -V",
        "wrmsr --version",
    ] {
        assert_eq!(run(&words(line)).0, 0, "{line}");
    }
}

#[test]
fn a_failed_open_masks_no_usage_error() {
    let (code, _, err) = run(&["rdmsr", "NOPE"]);
    assert_eq!(code, 127);
    assert!(
        err.contains("'NOPE' is neither an MSR name nor a number"),
        "{err}"
    );
    let dir = std::env::temp_dir().join(format!("msrbatch-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("bad.msr");
    std::fs::write(&script, "cpu 0\nrdmsr IA32_PAT\nwrmsr 0x10 010\n").unwrap();
    let (code, _, err) = run(&["run", script.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.msr:3:12: '010': a decimal number must not start with 0"),
        "{err}"
    );
    // The new batch statements are read like the others: a misuse is a
    // script error, before the device.
    std::fs::write(&script, "rdtsc\ntimestamps on\n").unwrap();
    let (code, _, err) = run(&["run", "--sync-start", script.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.msr:2:12: usage: timestamps"), "{err}");
    // A good script with every run option gets as far as the device.
    std::fs::write(&script, "sync-start\ntimestamps\ncpu 0\nrdtsc\n").unwrap();
    let line = format!(
        "run --sync-start --timestamps --restore --repeat 3 --interval 1ms --json {}",
        script.display()
    );
    fails_at_open(&line, 2, "msrbatch");
    std::fs::remove_dir_all(&dir).unwrap();
    // Well-formed commands get as far as opening the device: msr-tools'
    // status for its commands, 2 for the others.
    fails_at_open("rdmsr 0x10", 127, "rdmsr");
    fails_at_open("wrmsr --restore -p 1 0xc0000103 5", 127, "wrmsr");
    fails_at_open("stat --no-restore -e instructions -- true", 2, "msrbatch");
    fails_at_open("info", 2, "msrbatch");
}

/// `line` is well formed: it fails only at opening the device.
fn fails_at_open(line: &str, code: i32, prog: &str) {
    let (got, _, err) = run(&words(line));
    assert_eq!(got, code, "{line}: {err}");
    let want = format!("{prog}: open /nonexistent/msrbatch: ENOENT (No such file or directory)");
    assert_eq!(err.trim_end(), want, "{line}");
}

#[test]
fn msr_tools_long_options_are_accepted() {
    for line in [
        "rdmsr --hexadecimal --capital-hexadecimal --capital-hex --signed-decimal --decimal \
         --unsigned-decimal --unsigned --octal --c-language --zero-fill --zero-pad --raw \
         --bitfield 7:0 --cpu 1 --processor 0 --all 0x10",
        "rdmsr --cpu=3 --bitfield=63:32 IA32_PAT",
    ] {
        fails_at_open(line, 127, "rdmsr");
    }
    fails_at_open("wrmsr --cpu 1 --processor=0 --all 0x10 1 2", 127, "wrmsr");
}

#[test]
fn one_number_grammar() {
    // The same word means the same everywhere: a leading 0 is refused, with
    // the same reason, in arguments, options, fields and scripts.
    for (line, code) in [
        ("evsel 010", 2),
        ("evsel event=010", 2),
        ("rdmsr 010", 127),
        ("rdmsr -p 010 0x10", 127),
        ("rdmsr -f 010:0 0x10", 127),
        ("wrmsr 0x10 010", 127),
        ("run --repeat 010 f", 2),
        ("run --interval 010ms f", 2),
    ] {
        let (got, _, err) = run(&words(line));
        assert_eq!(got, code, "{line}: {err}");
        assert!(
            err.contains("'010': a decimal number must not start with 0"),
            "{line}: {err}"
        );
    }
    for (line, want) in [
        ("evsel event=10,umask=0x1", "0x10a"),
        ("evsel event=0o12,umask=0b1", "0x10a"),
        ("evsel event=0xa,umask=1", "0x10a"),
        // A named event without flags: usr, os and en, as perf and libpfm.
        ("evsel instructions", "0x4300c0"),
        ("evsel instructions,usr", "0x100c0"),
        ("evsel 0x10a", "event=0x0a,umask=0x01"),
        ("evsel 266", "event=0x0a,umask=0x01"),
    ] {
        let (code, out, err) = run(&words(line));
        assert_eq!((code, out.trim()), (0, want), "{line}: {err}");
    }
}

#[test]
fn evsel_pentium_cesr() {
    // P5Stat's pair: both pipes on CTR0, the V-pipe on CTR1, every CPL.
    let (code, out, err) = run(&words(
        "evsel --pentium ctr0=INSTRUCTIONS_EXECUTED:os:usr,ctr1=INSTRUCTIONS_EXECUTED_V_PIPE:os:usr",
    ));
    assert_eq!((code, out.trim()), (0, "0xd700d6"), "{err}");
    let (code, out, err) = run(&words("evsel --pentium 0xd700d6"));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "ctr0=INSTRUCTIONS_EXECUTED:os:usr,ctr1=INSTRUCTIONS_EXECUTED_V_PIPE:os:usr",
            "  # CTR0: ES0=0x16 (INSTRUCTIONS_EXECUTED), CC0=011: counts events at any CPL; PC0=0: the PM0/BP0 pin signals when it increments",
            "  # CTR1: ES1=0x17 (INSTRUCTIONS_EXECUTED_V_PIPE), CC1=011: counts events at any CPL; PC1=0: the PM1/BP1 pin signals when it increments",
        ]
    );
    // Bad input says which limit, and nothing ran (status 2).
    let (code, _, err) = run(&words("evsel --pentium ctr0=event=0x40"));
    assert_eq!(code, 2);
    assert!(err.contains("want a number up to 0x3f"), "{err}");
    let (code, _, err) = run(&words("evsel --pentium 0x400"));
    assert_eq!(code, 2);
    assert!(err.contains("not CESR fields"), "{err}");
}

/// The roff source of the man page section of `sub`, with `\-` as `-`.
fn man_section(man: &str, sub: &str) -> String {
    let start = man
        .find(&format!(".SS \"msrbatch {sub}\""))
        .unwrap_or_else(|| panic!("no man section for {sub}"));
    let rest = &man[start + 4..];
    let end = rest
        .find("\n.SS ")
        .or_else(|| rest.find("\n.SH "))
        .unwrap_or(rest.len());
    rest[..end].replace("\\-", "-")
}

/// The long options `--help` lists (with `=`-less spelling), including the
/// aliases named in the help text.
fn long_options(help: &str) -> Vec<String> {
    let mut v: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == ';')
        .filter_map(|w| {
            // The option's name, without what follows it in prose
            // ("--cpuid-dump's", "--force).").
            let name: String = w
                .strip_prefix("--")?
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (!name.is_empty()).then(|| format!("--{name}"))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn the_man_page_says_what_help_says() {
    let (code, man, _) = run(&["__man"]);
    assert_eq!(code, 0);
    let (_, top_help, _) = run(&["--help"]);
    let subs: Vec<&str> = top_help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .collect();
    assert!(subs.contains(&"rdmsr") && subs.contains(&"run"), "{subs:?}");
    for sub in subs {
        let (code, help, _) = run(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help");
        let section = man_section(&man, sub);
        for opt in long_options(&help) {
            // Options of every command (--device, --help, --version) are in
            // the page's main OPTIONS section.
            let found = section.contains(&opt)
                || ["--device", "--help", "--version"].contains(&opt.as_str());
            assert!(
                found,
                "msrbatch {sub}: {opt} is in --help but not in the man page"
            );
        }
    }
    // The numbers and exit statuses: the same text in both.
    let man_text = man.replace("\\-", "-").replace("\\e", "\\");
    let grammar = msrbatch::number::GRAMMAR;
    assert!(
        man_text.contains(grammar),
        "man page lacks the number grammar"
    );
    assert!(
        top_help.contains(grammar),
        "--help lacks the number grammar"
    );
    let statuses: Vec<(&str, &str)> = top_help
        .lines()
        .skip_while(|l| !l.starts_with("Exit status:"))
        .skip(1)
        .filter_map(|l| l.trim().split_once(' '))
        .filter(|(c, _)| c.parse::<u8>().is_ok())
        .map(|(c, what)| (c, what.trim()))
        .collect();
    assert_eq!(statuses.len(), 6, "{top_help}");
    for (code, what) in statuses {
        assert!(
            man_text.contains(&format!(".TP\n{code}\n{what}\n")),
            "man page: exit status {code}"
        );
    }
}

/// `sample` refuses bad periods and counts, and scripts a sampler cannot
/// run, before it opens the device (exit 2, naming the line).
#[test]
fn sample_refuses_before_the_device() {
    let dir = std::env::temp_dir().join(format!("msrbatch-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = script("good.msr", "cpu 0\nrdtsc\nrdmsr IA32_APERF\n");
    for i in ["0", "50us", "61s", "1xs", "ms"] {
        let (code, _, err) = run(&["sample", "-i", i, &good]);
        assert_eq!(code, 2, "-i {i}: {err}");
        assert!(err.contains("--interval"), "-i {i}: {err}");
    }
    let (code, _, err) = run(&["sample", "-i", "1ms", "--count", "0", &good]);
    assert_eq!(code, 2, "{err}");
    for (text, line, op) in [
        ("cpu 0\nrdtsc\nwrmsr 0x10 1\n", 3, "wrmsr IA32_TSC 0x1"),
        ("rdmsr 0x10\nrmw 0x1a0 0:0=1\n", 2, "rmw"),
        ("# a comment\ndelay 100ns\n", 2, "delay 100ns"),
        ("rdcr4\n", 1, "rdcr4"),
    ] {
        let f = script("bad.msr", text);
        let (code, _, err) = run(&["sample", "-i", "1ms", &f]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(
            err.contains(&format!("{f}:{line}: '{op}"))
                && err.contains("cannot be sampled: a sampled script may only read"),
            "{text}: {err}"
        );
    }
    // A good script gets as far as the device.
    let (code, _, err) = run(&["sample", "-i", "1ms", "--count", "20", &good]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("open /nonexistent/msrbatch"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs the tool against `device`; returns the exit status and stderr.
fn run_on(device: &str, args: &[&str]) -> (i32, String) {
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_msrbatch"))
            .args(["--device", device])
            .args(args),
    );
    (
        out.status.code().expect("exit status"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Commands that only read open the device read-only; commands that write
/// (or restore) open it for writing. Tried on a node anyone may read but
/// nobody write (sysfs refuses even root): a read-only open gets as far as
/// the ioctl (ENOTTY, it is no msrbatch device), a read-write one fails at
/// the open (EACCES).
#[test]
fn only_writers_open_for_writing() {
    let node = "/sys/devices/system/cpu/online";
    assert!(
        std::fs::OpenOptions::new().write(true).open(node).is_err(),
        "{node} is writable: no read-only node to test with"
    );
    let dir = std::env::temp_dir().join(format!("msrbatch-ro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reads = dir.join("reads.msr");
    std::fs::write(&reads, "rdmsr IA32_PAT\nrdtsc\n").unwrap();
    let writes = dir.join("writes.msr");
    std::fs::write(&writes, "rmw IA32_TSC_AUX 15:8=1\n").unwrap();
    let (reads, writes) = (reads.to_str().unwrap(), writes.to_str().unwrap());
    for line in [
        vec!["info"],
        vec!["rdmsr", "0x10"],
        vec!["run", reads],
        vec!["sample", "-i", "1ms", reads],
        vec!["cr4"],
        vec!["pmu"],
    ] {
        let (_, err) = run_on(node, &line);
        assert!(
            err.contains("ENOTTY") && !err.contains("open "),
            "{line:?} should open {node} read-only: {err}"
        );
    }
    for line in [
        vec!["wrmsr", "0x10", "1"],
        vec!["run", writes],
        vec!["run", "--restore", reads],
        vec!["exec", "--rdpmc", "--", "true"],
    ] {
        let (_, err) = run_on(node, &line);
        assert!(
            err.contains(&format!("open {node}: EACCES")),
            "{line:?} should open {node} for writing: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Durations need a unit everywhere one is read (a bare number is seconds to
/// turbostat and milliseconds to perf), and counts of 0 are refused, before
/// any file or device is touched.
#[test]
fn durations_need_a_unit_and_counts_start_at_1() {
    for (line, want) in [
        (
            "run --interval 5 f",
            "'5' has no unit: write 5ns, 5us, 5ms or 5s",
        ),
        ("run --interval 0 f", "'0' has no unit"),
        ("sample -i 5 f", "'5' has no unit"),
        ("sample -i 1000000 f", "'1000000' has no unit"),
        ("run --repeat 0 f", "--repeat"),
        ("sample -i 1ms --count 0 f", "--count"),
    ] {
        let (code, _, err) = run(&words(line));
        assert_eq!(code, 2, "{line}: {err}");
        assert!(err.contains(want), "{line}: {err}");
    }
    let (_, _, err) = run(&words("run --repeat 0 f"));
    assert!(err.contains("must be at least 1"), "{err}");
    let dir = std::env::temp_dir().join(format!("msrbatch-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("d.msr");
    std::fs::write(&f, "delay 100\n").unwrap();
    let (code, _, err) = run(&["run", f.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("d.msr:1:7: '100' has no unit"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the kernel would refuse is refused before the device is opened,
/// naming the limit (as <linux/msrbatch.h> names it), its value and the
/// value that broke it, and the script line.
#[test]
fn limits_are_named_before_the_ioctl() {
    let dir = std::env::temp_dir().join(format!("msrbatch-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |text: &str| {
        let p = dir.join("s.msr");
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let many = "rdtsc\n".repeat(65_537);
    for (args, text, want) in [
        (
            vec!["run"],
            many.as_str(),
            "s.msr: E2BIG: the batch has 65537 ops, over the 65536 a batch may have \
             (MSRBATCH_MAX_OPS)",
        ),
        (
            vec!["run"],
            "rdtsc\ndelay 2ms\n",
            "s.msr:2: ERANGE: a delay of 2ms is over the 1ms one delay op may last \
             (MSRBATCH_MAX_DELAY_NS)",
        ),
        (
            vec!["run"],
            "delay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\n\
             delay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1us\n",
            "s.msr:11: ERANGE: the delays and poll timeouts on CPU 0 add up to 10001us, over \
             the 10ms one CPU's waits in a batch may last (MSRBATCH_MAX_CPU_DELAY_NS)",
        ),
        (
            vec!["run"],
            "delay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\ndelay 1ms\n\
             delay 1ms\npoll tsc\npoll tsc timeout 1us\n",
            "s.msr:10: ERANGE: the delays and poll timeouts on CPU 0 add up to 10001us, over \
             the 10ms one CPU's waits in a batch may last (MSRBATCH_MAX_CPU_DELAY_NS)",
        ),
        (
            vec!["run"],
            "timestamps\npoll tsc\n",
            "s.msr:2: EINVAL: 'poll' returns a second value itself",
        ),
        (
            vec!["run"],
            "timestamps\nrdtsc\nrdtscp\n",
            "s.msr:3: EINVAL: 'rdtscp' returns a second value itself",
        ),
        (
            vec!["run"],
            "cpu 99999\nrdtsc\n",
            "s.msr:2: ENODEV: CPU 99999 does not exist: this machine's CPUs are 0",
        ),
        (
            vec!["sample", "-i", "100us"],
            &"rdtsc\n".repeat(10),
            "s.msr:1: ERANGE: CPU 0's 10 ops every 100us are 100000 ops a second, over the \
             64000 a sampler may run on one CPU (MSRBATCH_SAMPLE_MAX_OPS_PER_SEC)",
        ),
        (
            vec!["sample", "-i", "1s"],
            &"rdtsc\n".repeat(65),
            "s.msr:65: E2BIG: CPU 0 has 65 ops, over the 64 a sampler runs on one CPU \
             (MSRBATCH_SAMPLE_MAX_OPS)",
        ),
        (
            vec!["sample", "-i", "1ms", "--ring-pages", "3"],
            "rdtsc\n",
            "3 ring pages: the ring's pages must be a power of two",
        ),
        (
            vec!["sample", "-i", "1ms", "--ring-pages", "2048"],
            "rdtsc\n",
            "2048 ring pages are over the 1024 a ring may have (MSRBATCH_SAMPLE_MAX_RING_PAGES)",
        ),
    ] {
        let f = script(text);
        let mut line = args.clone();
        line.push(&f);
        let (code, _, err) = run(&line);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in: {err}");
        assert!(!err.contains("open /nonexistent"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A closed pipe on stdout (`| head`) ends the tool by SIGPIPE, as it ends
/// C tools: no "Broken pipe" message, no panic.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let mut fds = [0; 2];
    let w = {
        // No child starts while the read end exists (`SPAWN`).
        let _no_spawn = SPAWN.write().unwrap_or_else(|e| e.into_inner());
        // SAFETY: pipe2() writes two new descriptors into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are new, and owned here alone.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(r);
        w
    };
    for args in [&["evsel", "0x4300c0"][..], &["__man"], &["evsel", "--help"]] {
        let out = output(
            Command::new(env!("CARGO_BIN_EXE_msrbatch"))
                .args(args)
                .stdout(w.try_clone().unwrap()),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}, {stderr}",
            out.status
        );
        assert_eq!(stderr, "", "{args:?}");
    }
}
