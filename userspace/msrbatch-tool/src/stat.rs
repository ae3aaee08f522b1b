// SPDX-License-Identifier: GPL-2.0
//! `msrbatch stat`: count events while CMD runs pinned to one CPU, through
//! the library's counter API (`msrbatch::counters`).

use clap::Args;
use msrbatch::counters::{check_ownership, parse_events, EventSpec, Plan, Session};
use msrbatch::pmu::{probe_cpuid, CpuidCpu, CpuidDump, PmuInfo};
use msrbatch::sim::SimPmu;
use msrbatch::{script, Backend, Batch};
use std::cell::Cell;
use std::io::Write;

/// `msrbatch stat (-e EVENTS | --sweep EVENTS) [-C CPU] [-r N] [--dry-run [--cpuid-dump FILE]] [--force] -- CMD...`
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Events: names (instructions, cycles, branches, ...; on a Pentium the
    /// mnemonics of SDM Table A-19) or event=0x..:umask=0x..[:usr:os:cmask=..]
    /// items, comma-separated.
    #[arg(short = 'e', long = "events", required_unless_present = "sweep")]
    events: Vec<String>,
    /// Count every one of EVENTS exactly, as P5Stat did: CMD runs once to
    /// warm up, then once per group of events that fit the counters together
    /// (and -r times each); one table of counts, their spread over the -r
    /// runs, and which events shared a run. Nothing is multiplexed or scaled.
    #[arg(long, value_name = "EVENTS", conflicts_with = "events")]
    sweep: Vec<String>,
    /// CPU to pin CMD to and count on (with --cpuid-dump: the dump's Nth CPU).
    #[arg(short = 'C', long = "cpu", default_value_t = 0, value_parser = msrbatch::number::parse_u32)]
    cpu: u32,
    /// Run CMD N times per event group; the counts are averaged (with
    /// --sweep: and their spread shown).
    #[arg(short = 'r', long = "repeat", default_value_t = 1, value_parser = msrbatch::number::parse_u32)]
    repeat: u32,
    /// Print the batches it would issue, and touch nothing: the counter code
    /// runs against the PMU model of this CPU (or of --cpuid-dump's CPU).
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: the CPU to plan for, from a CPUID dump (`cpuid -r`
    /// or AIDA64 format) instead of this machine.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    cpuid_dump: Option<String>,
    /// With --dry-run on a CPU without a PMU: plan for an Intel architectural
    /// PMU version 2 with N counters.
    #[arg(long, value_parser = msrbatch::number::parse_u32)]
    counters: Option<u32>,
    /// Program the counters even if the NMI watchdog or someone else seems to use them.
    #[arg(long)]
    force: bool,
    /// Do not have the kernel restore the MSRs stat writes when the device
    /// is closed (by default it does, so a killed stat never leaves counters
    /// programmed; stat restores them itself too).
    #[arg(long)]
    no_restore: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<String>,
}

impl StatArgs {
    /// Whether it runs without the device (a dry run of a CPUID dump).
    pub fn offline(&self) -> bool {
        self.dry_run && self.cpuid_dump.is_some()
    }

    /// Whether the device should restore what stat writes when it is
    /// closed: unless --no-restore, and for counting (a dry run writes
    /// nothing).
    pub fn restore_on_close(&self) -> bool {
        !self.no_restore && !self.dry_run
    }
}

/// Runs CMD pinned to `cpu`; returns its exit code.
fn run_pinned(cpu: u32, cmd: &[String]) -> Result<i32, String> {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(&cmd[0]);
    c.args(&cmd[1..]);
    // SAFETY: Only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let st = c.status().map_err(|e| format!("{}: {e}", cmd[0]))?;
    Ok(if st.success() {
        0
    } else {
        st.code().unwrap_or(1)
    })
}

/// A backend that prints each batch in script form before running it.
struct Echo<'a, B: ?Sized> {
    inner: &'a B,
    out: std::cell::RefCell<&'a mut dyn Write>,
    batches: Cell<u32>,
}

impl<B: Backend + ?Sized> Backend for Echo<'_, B> {
    fn run(&self, batch: &mut Batch) -> msrbatch::Result<()> {
        self.batches.set(self.batches.get() + 1);
        let _ = write!(self.out.borrow_mut(), "{}", script::to_text(batch));
        self.inner.run(batch)
    }

    fn nmi_watchdog(&self) -> Option<bool> {
        self.inner.nmi_watchdog()
    }
}

/// Says what the next batches are for (dry run only).
trait Say {
    fn say(&self, s: &str);
}

impl<B: Backend + ?Sized> Say for Echo<'_, B> {
    fn say(&self, s: &str) {
        let _ = writeln!(self.out.borrow_mut(), "# {s}");
    }
}

struct Quiet;

impl Say for Quiet {
    fn say(&self, _: &str) {}
}

/// Probes CPU `a.cpu` and parses `list`: the PMU (with counters) and the events.
fn probe_events<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    say: &dyn Say,
    list: &[String],
) -> Result<(PmuInfo, Vec<EventSpec>), String> {
    let events = parse_events(list).map_err(|e| e.to_string())?;
    say.say(&format!(
        "probe CPU {}: CPUID leaves, RDPMC 0, IA32_PERF_CAPABILITIES",
        a.cpu
    ));
    let (_, info) = probe_cpuid(dev, a.cpu).map_err(|e| e.to_string())?;
    if !info.present() {
        return Err(format!(
            "CPU {}: {}; nothing to count",
            a.cpu,
            info.absence()
        ));
    }
    Ok((info, events))
}

/// Checks that nobody owns the counters of any group (unless --force).
fn check_groups<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    say: &dyn Say,
    groups: &[Plan],
) -> Result<(), String> {
    for (g, plan) in groups.iter().enumerate() {
        let names: Vec<&str> = plan.slots.iter().map(|s| s.event.name.as_str()).collect();
        say.say(&format!(
            "group {} ({}): ownership check",
            g + 1,
            names.join(", ")
        ));
        let why = check_ownership(dev, plan).map_err(|e| e.to_string())?;
        if !why.is_empty() && !a.force {
            let why: Vec<String> = why.iter().map(ToString::to_string).collect();
            return Err(format!(
                "refusing to program counters on CPU {} (use --force):\n  {}",
                a.cpu,
                why.join("\n  ")
            ));
        }
    }
    Ok(())
}

/// What a sweep counted: per event (in the order given) its name, the run
/// (group, from 1) that counted it and its count in each repetition.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sweep {
    events: Vec<(String, usize, Vec<u64>)>,
    groups: usize,
    status: i32,
}

/// What stat counts with: the device (or the model for a dry run), the
/// arguments, what says what the batches are for, where warnings go, and
/// CMD (`run`).
struct Counting<'a, B: ?Sized> {
    dev: &'a B,
    a: &'a StatArgs,
    say: &'a dyn Say,
    warn: &'a mut dyn Write,
    run: &'a mut dyn FnMut() -> Result<i32, String>,
}

impl<B: Backend + ?Sized> Counting<'_, B> {
    /// One run of CMD counting group `g`: program, start, run, stop, restore.
    /// Returns the counts of its slots and CMD's exit code.
    fn count_group(&mut self, g: usize, plan: &Plan) -> Result<(Vec<u64>, i32), String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        say.say(&format!(
            "group {}: save every MSR it touches, stop, zero and program ({})",
            g + 1,
            plan.describe().join("; ")
        ));
        let mut s = Session::program(dev, plan.clone()).map_err(|e| e.to_string())?;
        say.say(&format!("group {}: start, fence, read", g + 1));
        let start = s.start().map_err(|e| e.to_string())?;
        say.say(&format!("group {}: CMD runs: {}", g + 1, a.cmd.join(" ")));
        let st = (self.run)();
        say.say(&format!("group {}: fence, read, stop", g + 1));
        let end = s.stop();
        say.say(&format!("group {}: restore what was saved", g + 1));
        let report = s.restore().map_err(|e| e.to_string())?;
        for line in report.inexact {
            let _ = writeln!(self.warn, "msrbatch: stat: warning: {line}");
        }
        let end = end.map_err(|e| e.to_string())?;
        let code = st?;
        Ok((s.deltas(&start, &end), code))
    }

    /// The stat sequence on `dev` (the device, or the model for a dry run):
    /// plan groups, check ownership, then per repetition and group program,
    /// start, run CMD (`run`), stop and restore. Returns the totals per event
    /// and CMD's last non-zero exit code.
    fn measure(&mut self) -> Result<(Vec<String>, Vec<u128>, i32), String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        let (info, events) = probe_events(dev, a, say, &a.events)?;
        let groups = Plan::groups(&info, a.cpu, &events).map_err(|e| e.to_string())?;
        if groups.len() > 1 {
            say.say(&format!(
                "{} events, {} groups: CMD runs once per group and repetition",
                events.len(),
                groups.len()
            ));
        }
        check_groups(dev, a, say, &groups)?;
        let mut totals = vec![0u128; events.len()];
        let mut status = 0;
        for _ in 0..a.repeat.max(1) {
            let mut first = 0;
            for (g, plan) in groups.iter().enumerate() {
                let n = plan.slots.len();
                let (deltas, code) = self.count_group(g, plan)?;
                if code != 0 {
                    status = code;
                }
                for (t, d) in totals[first..first + n].iter_mut().zip(deltas) {
                    *t += u128::from(d);
                }
                first += n;
            }
        }
        let names = groups
            .iter()
            .flat_map(|p| p.slots.iter().map(|s| s.event.name.clone()))
            .collect();
        Ok((names, totals, status))
    }

    /// `stat --sweep`: CMD once to warm up (nothing counted), then each group
    /// of events that fit the counters together -r times.
    fn sweep(&mut self) -> Result<Sweep, String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        let (info, events) = probe_events(dev, a, say, &a.sweep)?;
        let packed = Plan::pack(&info, a.cpu, &events).map_err(|e| e.to_string())?;
        let groups: Vec<Plan> = packed.iter().map(|(p, _)| p.clone()).collect();
        say.say(&format!(
        "sweep: {} events in {} groups of at most {} (the counters of CPU {}); CMD runs once to warm up, then {} time(s) per group",
        events.len(),
        groups.len(),
        info.gp_counters + info.fixed_counters,
        a.cpu,
        a.repeat.max(1)
    ));
        check_groups(dev, a, say, &groups)?;
        let mut out = Sweep {
            events: events
                .iter()
                .map(|e| (e.name.clone(), 0, Vec::new()))
                .collect(),
            groups: groups.len(),
            status: 0,
        };
        say.say(&format!(
            "warm-up: CMD runs, nothing counted: {}",
            a.cmd.join(" ")
        ));
        let code = (self.run)()?;
        if code != 0 {
            out.status = code;
        }
        for _ in 0..a.repeat.max(1) {
            for (g, (plan, idx)) in packed.iter().enumerate() {
                let (deltas, code) = self.count_group(g, plan)?;
                if code != 0 {
                    out.status = code;
                }
                // Plan slots are in the order of the group's events.
                for (&k, d) in idx.iter().zip(deltas) {
                    out.events[k].1 = g + 1;
                    out.events[k].2.push(d);
                }
            }
        }
        Ok(out)
    }
}

/// The CPUID of the CPU a dry run plans for.
fn dry_run_cpu(
    dev: Option<&dyn Backend>,
    a: &StatArgs,
    out: &mut dyn Write,
) -> Result<Vec<CpuidCpu>, String> {
    let mut cpus = match (&a.cpuid_dump, dev) {
        (Some(path), _) => {
            let d = CpuidDump::read(path).map_err(|e| e.what().to_string())?;
            if a.cpu as usize >= d.cpus.len() {
                return Err(format!(
                    "{path}: no CPU {} (it has {})",
                    a.cpu,
                    d.cpus.len()
                ));
            }
            d.cpus
        }
        (None, Some(dev)) => {
            let (leaves, info) = probe_cpuid(dev, a.cpu).map_err(|e| e.to_string())?;
            let leaves = if info.present() {
                leaves
            } else {
                let n = a.counters.unwrap_or(4);
                let _ = writeln!(
                    out,
                    "# CPU {}: {}; this dry run plans for an Intel architectural PMU v2 with {n} counters (--counters)",
                    a.cpu,
                    info.absence()
                );
                let mut c = CpuidCpu::default();
                c.leaves
                    .insert((0, 0), [0xa, 0x756e_6547, 0x6c65_746e, 0x4965_6e69]);
                c.leaves.insert(
                    (0xa, 0),
                    [2 | (n & 0xff) << 8 | 48 << 16 | 7 << 24, 0, 0, 0],
                );
                // A hypervisor's PMU (CPUID.01H:ECX[31]): its CPUID is taken
                // at its word, without the Core 2 quirk's 3 fixed counters,
                // so the plan uses exactly the n counters asked for.
                c.leaves.insert((1, 0), [0, 0, 1 << 31, 0]);
                c
            };
            vec![leaves; a.cpu as usize + 1]
        }
        (None, None) => return Err("no device and no --cpuid-dump".into()),
    };
    if let Some(n) = a.counters {
        // Intel: CPUID.0AH EAX[15:8] is the number of counters.
        let c = &mut cpus[a.cpu as usize];
        if let Some(l) = c.leaves.get_mut(&(0xa, 0)) {
            let have = (l[0] >> 8) & 0xff;
            l[0] = (l[0] & !0xff00) | have.min(n) << 8;
        }
    }
    Ok(cpus)
}

/// Runs `msrbatch stat`; returns CMD's exit status. `dev` is None when a
/// dry run has a dump and no device.
pub fn stat(dev: Option<&dyn Backend>, a: &StatArgs, out: &mut dyn Write) -> Result<i32, String> {
    if a.dry_run {
        let cpus = dry_run_cpu(dev, a, out)?;
        let model = SimPmu::new(&CpuidDump { cpus });
        let cmd = a.cmd.join(" ");
        let echo = Echo {
            inner: &model,
            out: std::cell::RefCell::new(out),
            batches: Cell::new(0),
        };
        let mut c = Counting {
            dev: &echo,
            a,
            say: &echo,
            warn: &mut std::io::sink(),
            run: &mut || Ok(0),
        };
        if a.sweep.is_empty() {
            c.measure()?;
        } else {
            c.sweep()?;
        }
        echo.say(&format!(
            "{} batches; CMD ({cmd}) would run between each group's start and stop",
            echo.batches.get()
        ));
        return Ok(0);
    }
    let dev = dev.ok_or("stat needs the device")?;
    let (cpu, cmd) = (a.cpu, a.cmd.clone());
    count(dev, a, out, &mut || run_pinned(cpu, &cmd))
}

/// Counts with `run` standing for CMD, and prints the counts.
fn count<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    out: &mut dyn Write,
    run: &mut dyn FnMut() -> Result<i32, String>,
) -> Result<i32, String> {
    let mut c = Counting {
        dev,
        a,
        say: &Quiet,
        warn: &mut std::io::stderr(),
        run,
    };
    if !a.sweep.is_empty() {
        let s = c.sweep()?;
        print_sweep(a, &s, out);
        return Ok(s.status);
    }
    let (names, totals, status) = c.measure()?;
    print_counts(a, &names, &totals, out);
    Ok(status)
}

/// The spread of `v` around its mean: half the range, in percent of the
/// mean (`-` for one value; `0` for a mean of zero with no range).
fn spread(v: &[u64]) -> String {
    if v.len() < 2 {
        return "-".into();
    }
    let (lo, hi) = (v.iter().min().unwrap(), v.iter().max().unwrap());
    let mean = v.iter().map(|&x| u128::from(x)).sum::<u128>() as f64 / v.len() as f64;
    if hi == lo {
        "±0%".into()
    } else if mean == 0.0 {
        format!("±{}", (hi - lo) / 2)
    } else {
        format!("±{:.2}%", (hi - lo) as f64 / 2.0 / mean * 100.0)
    }
}

fn print_sweep(a: &StatArgs, s: &Sweep, out: &mut dyn Write) {
    let reps = a.repeat.max(1);
    let runs = s.groups as u64 * u64::from(reps);
    let _ = writeln!(
        out,
        "Sweep of '{}' on CPU {}: 1 warm-up run, then {runs} counting run{} ({} group{} x {reps}); every count exact, none scaled:",
        a.cmd.join(" "),
        a.cpu,
        if runs > 1 { "s" } else { "" },
        s.groups,
        if s.groups > 1 { "s" } else { "" },
    );
    let _ = writeln!(
        out,
        "{:>20}  {:>9}  {:>5}  event",
        "count", "spread", "group"
    );
    for (name, g, v) in &s.events {
        let mean = v.iter().map(|&x| u128::from(x)).sum::<u128>() / v.len().max(1) as u128;
        let _ = writeln!(out, "{mean:>20}  {:>9}  {g:>5}  {name}", spread(v));
    }
    let _ = writeln!(out, "events that shared a run:");
    for g in 1..=s.groups {
        let names: Vec<&str> = s
            .events
            .iter()
            .filter(|e| e.1 == g)
            .map(|e| e.0.as_str())
            .collect();
        let _ = writeln!(out, "  group {g}: {}", names.join(", "));
    }
    let _ = writeln!(out, "(counts include everything that ran on CPU {} while CMD ran, user and kernel unless the event says otherwise; the spread is half the range over the {reps} run{} of each group)", a.cpu, if reps > 1 { "s" } else { "" });
}

fn print_counts(a: &StatArgs, names: &[String], totals: &[u128], out: &mut dyn Write) {
    let runs = a.repeat.max(1);
    let _ = writeln!(
        out,
        "Performance counter stats for '{}' on CPU {} ({runs} run{}):",
        a.cmd.join(" "),
        a.cpu,
        if runs > 1 { "s" } else { "" }
    );
    for (name, total) in names.iter().zip(totals) {
        let _ = writeln!(out, "{:>20}  {name}", total / u128::from(runs));
    }
    let _ = writeln!(out, "(counts include everything that ran on CPU {} while CMD ran, user and kernel unless the event says otherwise)", a.cpu);
}

#[cfg(test)]
mod tests;
