// SPDX-License-Identifier: GPL-2.0
//! `msrbatch stat`: count events on a list of CPUs while CMD runs pinned
//! to them, through the library's counter API (`msrbatch::counters`), and
//! print the counts as `perf stat` does (`print`).

mod print;

use clap::Args;
use msrbatch::counters::{check_ownership, parse_events, EventSpec, Plan, Reading, Session};
use msrbatch::number::{format_cpu_list, parse_cpu_list};
use msrbatch::pmu::{probe_cpuid, CpuidCpu, CpuidDump, PmuInfo};
use msrbatch::sim::SimPmu;
use msrbatch::{script, Backend, Batch};
use print::{Layout, Report, Style};
use std::cell::Cell;
use std::io::Write;
use std::time::{Duration, Instant};

/// `msrbatch stat (-e EVENTS | --sweep EVENTS) [-C CPUS | -a] [-A] [-r N] [-x SEP | -j] [-o FILE] [-I MSECS] [--dry-run [--cpuid-dump FILE]] [--force] -- CMD...`
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
    #[arg(long, value_name = "EVENTS", conflicts_with_all = ["events", "interval", "no_aggr", "field_separator", "json"])]
    sweep: Vec<String>,
    /// CPUs to pin CMD to and count on, as a list: 0-3,5 (with --cpuid-dump:
    /// the dump's CPUs by position).
    #[arg(
        short = 'C',
        long = "cpu",
        value_name = "CPUS",
        default_value = "0",
        conflicts_with = "all_cpus"
    )]
    cpu: String,
    /// Count on every online CPU (CMD may run on any).
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// One count per CPU instead of their sum (perf's --no-aggr).
    #[arg(short = 'A', long = "no-aggr")]
    no_aggr: bool,
    /// Run CMD N times (N >= 1) per event group; the counts are averaged
    /// and their relative standard deviation shown (with --sweep: their
    /// spread).
    #[arg(short = 'r', long = "repeat", default_value_t = 1, value_name = "N", value_parser = crate::parse_repeat)]
    repeat: u32,
    /// Print the counts as perf stat's CSV, fields separated by SEP: value,
    /// unit, event, [relative stddev with -r,] run time (ns), percent
    /// running, metric value, metric unit (with -I the time first, with -A
    /// the CPU before the value).
    #[arg(
        short = 'x',
        long = "field-separator",
        value_name = "SEP",
        conflicts_with = "json"
    )]
    field_separator: Option<String>,
    /// Print the counts as perf stat's JSON: one object per count and line.
    #[arg(short = 'j', long = "json")]
    json: bool,
    /// Write the counts to FILE instead of standard error.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
    /// Print the counts of every interval of MSECS milliseconds while CMD
    /// runs (as perf's -I; a unit may be given: 100ms, 1s); at least 10 ms.
    /// The events must fit the counters together, and -r is 1.
    #[arg(short = 'I', long = "interval-print", value_name = "MSECS", value_parser = parse_interval)]
    interval: Option<Duration>,
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
    #[arg(required = true, trailing_var_arg = true)]
    cmd: Vec<String>,
}

/// `-I`: milliseconds (perf's unit) as a bare number, or a duration with
/// a unit; at least 10 ms.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let ns = match msrbatch::number::parse_u64(s) {
        Ok(ms) => ms
            .checked_mul(1_000_000)
            .ok_or_else(|| format!("{s}: too long"))?,
        Err(_) => msrbatch::number::parse_duration(s).map_err(|e| e.to_string())?,
    };
    if ns < 10_000_000 {
        return Err(format!("{s}: the interval must be at least 10 ms"));
    }
    Ok(Duration::from_nanos(ns))
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

    /// The CPUs to count on: -a's online CPUs, or -C's list (`all`: the
    /// online CPUs).
    fn cpus(&self, online: &[u32]) -> Result<Vec<u32>, String> {
        if self.all_cpus {
            if online.is_empty() {
                return Err("-a: the online CPUs could not be read".into());
            }
            return Ok(online.to_vec());
        }
        parse_cpu_list(&self.cpu, online).map_err(|e| format!("-C {}: {e}", self.cpu))
    }

    /// The output format of the counts.
    fn style(&self) -> Style {
        match (&self.field_separator, self.json) {
            (Some(sep), _) => Style::Csv(sep.clone()),
            (None, true) => Style::Json,
            (None, false) => Style::Table,
        }
    }

    /// The counts' layout: format, per CPU or summed.
    fn layout(&self) -> Layout {
        Layout {
            style: self.style(),
            per_cpu: self.no_aggr,
        }
    }
}

/// How a run of CMD ended: its exit status (128 + N when a signal N killed
/// it, as a shell reports it) and how long it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    pub status: i32,
    pub elapsed: Duration,
}

/// The exit status a shell gives `st`: the code, or 128 + the signal.
fn shell_status(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code()
        .or_else(|| st.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// What CMD stands for: runs it once, calling `tick` every interval (with
/// -I) while it runs.
type Workload<'a> = dyn FnMut(&mut dyn FnMut() -> Result<(), String>) -> Result<Ran, String> + 'a;

/// A handler that does nothing: while CMD runs, SIGINT and SIGQUIT reach
/// CMD and leave stat running. (Ignoring them instead would be inherited:
/// exec resets handled signals to their default, not ignored ones.)
extern "C" fn pass_on(_: libc::c_int) {}

/// Has SIGINT and SIGQUIT run `pass_on` (SA_RESTART); returns what they had.
fn hold_interrupts() -> [libc::sigaction; 2] {
    [libc::SIGINT, libc::SIGQUIT].map(|s| {
        // SAFETY: zeroed sigactions are valid (no handler, empty mask, no
        // flags); the handler installed does nothing, which is
        // async-signal-safe.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(s, &new, &mut old);
            old
        }
    })
}

/// Puts back what [`hold_interrupts`] returned.
fn release_interrupts(old: [libc::sigaction; 2]) {
    for (s, a) in [libc::SIGINT, libc::SIGQUIT].into_iter().zip(old) {
        // SAFETY: `a` is what sigaction() returned for `s`.
        unsafe { libc::sigaction(s, &a, std::ptr::null_mut()) };
    }
}

/// Calls `f` with this thread's affinity set to `cpus` (a child it spawns
/// inherits it), then puts the thread's affinity back.
fn with_affinity<T>(cpus: &[u32], f: impl FnOnce() -> T) -> Result<T, String> {
    let size = size_of::<libc::cpu_set_t>();
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is empty.
    let (mut old, mut set): (libc::cpu_set_t, libc::cpu_set_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as u32 {
            return Err(format!("CPU {cpu} is beyond what an affinity mask holds"));
        }
        // SAFETY: sets bit `cpu` of `set`, which has CPU_SETSIZE bits.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: both sets are cpu_set_t of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut old) } != 0 {
        return Err(err("sched_getaffinity"));
    }
    // SAFETY: as above.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(err(&format!("pinning to CPUs {}", format_cpu_list(cpus))));
    }
    let r = f();
    // SAFETY: as above; `old` is what the thread had.
    unsafe { libc::sched_setaffinity(0, size, &old) };
    Ok(r)
}

/// Waits until `child` exits or `until` passes; whether it exited.
fn wait_until(child: &mut std::process::Child, until: Instant) -> Result<bool, String> {
    let err = |e: std::io::Error| format!("waiting for CMD: {e}");
    loop {
        if child.try_wait().map_err(err)?.is_some() {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(false);
        }
        // Woken by SIGCHLD's EINTR or the timeout; at most 10 ms late to
        // see an exit.
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

/// Runs CMD with its affinity `cpus` (None: unchanged), calling `tick`
/// every `every` while it runs. Meanwhile SIGINT and SIGQUIT reach CMD and
/// leave this process running, so a Ctrl-C that ends CMD still prints its
/// counts, as perf stat does. CMD is spawned without code between fork and
/// exec (posix_spawn, which needs no socket: the test kernel has none), with
/// the affinity this thread has while spawning it.
fn run_cmd(
    cpus: Option<&[u32]>,
    cmd: &[String],
    every: Option<Duration>,
    tick: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Ran, String> {
    let mut c = std::process::Command::new(&cmd[0]);
    c.args(&cmd[1..]);
    let old = hold_interrupts();
    let start = Instant::now();
    let r = (|| {
        let spawned = match cpus {
            Some(cpus) => with_affinity(cpus, || c.spawn())?,
            None => c.spawn(),
        };
        let mut child = spawned.map_err(|e| format!("{}: {e}", cmd[0]))?;
        if let Some(every) = every {
            let mut next = start + every;
            while !wait_until(&mut child, next)? {
                tick()?;
                next += every;
            }
        }
        let st = child.wait().map_err(|e| format!("{}: {e}", cmd[0]))?;
        Ok(Ran {
            status: shell_status(st),
            elapsed: start.elapsed(),
        })
    })();
    release_interrupts(old);
    r
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

/// The CPUs to count on and their PMUs.
struct Cpus {
    /// Every CPU asked for, in order.
    all: Vec<u32>,
    /// Those with a PMU.
    present: Vec<(u32, PmuInfo)>,
}

/// Probes each of `cpus` and parses `list`: the PMUs and the events. A CPU
/// without a PMU is named on `warn`; its counts are `<not supported>`.
fn probe_events<B: Backend + ?Sized>(
    dev: &B,
    cpus: &[u32],
    say: &dyn Say,
    warn: &mut dyn Write,
    list: &[String],
) -> Result<(Cpus, Vec<EventSpec>), String> {
    let events = parse_events(list).map_err(|e| e.to_string())?;
    let mut present = Vec::new();
    for &cpu in cpus {
        say.say(&format!(
            "probe CPU {cpu}: CPUID leaves, RDPMC 0, IA32_PERF_CAPABILITIES"
        ));
        let (_, info) = probe_cpuid(dev, cpu).map_err(|e| e.to_string())?;
        if info.present() {
            present.push((cpu, info));
        } else {
            let _ = writeln!(
                warn,
                "msrbatch: stat: CPU {cpu}: {}; its counts are <not supported>",
                info.absence()
            );
        }
    }
    let all = cpus.to_vec();
    Ok((Cpus { all, present }, events))
}

/// Events counted together in one run of CMD: their indices in the event
/// list and a plan on every CPU that has a PMU.
#[derive(Clone, Debug)]
struct Group {
    events: Vec<usize>,
    plans: Vec<Plan>,
}

/// Places each group's events (indices in `events`, planned on the first
/// CPU with a PMU) on every CPU with a PMU.
fn plan_groups(
    cpus: &Cpus,
    events: &[EventSpec],
    groups: Vec<Vec<usize>>,
) -> Result<Vec<Group>, String> {
    groups
        .into_iter()
        .map(|idx| {
            let evs: Vec<EventSpec> = idx.iter().map(|&i| events[i].clone()).collect();
            let plans = cpus
                .present
                .iter()
                .map(|(cpu, info)| {
                    Plan::new(info, *cpu, &evs).map_err(|e| {
                        let names: Vec<&str> = evs.iter().map(|e| e.name.as_str()).collect();
                        format!("CPU {cpu} cannot count {} together: {e}", names.join(", "))
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(Group { events: idx, plans })
        })
        .collect()
}

/// Checks that nobody owns the counters of any group (unless --force).
fn check_groups<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    say: &dyn Say,
    groups: &[Group],
) -> Result<(), String> {
    for (g, group) in groups.iter().enumerate() {
        for plan in &group.plans {
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
                    plan.cpu,
                    why.join("\n  ")
                ));
            }
        }
    }
    Ok(())
}

/// One batch over every CPU's session: with `start` the counters start
/// first, with `stop` they stop after; each CPU's counters are read
/// between. The values read, per session.
fn read_all<B: Backend + ?Sized>(
    dev: &B,
    sessions: &[Session<'_, B>],
    start: bool,
    stop: bool,
) -> Result<Vec<Vec<u64>>, String> {
    if sessions.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = Batch::new();
    let readings: Vec<Reading> = sessions
        .iter()
        .map(|s| {
            if start {
                s.push_start(&mut b);
            }
            let r = s.push_read(&mut b);
            if stop {
                s.push_stop(&mut b);
            }
            r
        })
        .collect();
    dev.run(&mut b).map_err(|e| e.to_string())?;
    sessions
        .iter()
        .zip(readings)
        .map(|(s, r)| s.values(&b, r).map_err(|e| e.to_string()))
        .collect()
}

/// The increase of each session's counters from `from` to `to`.
fn deltas<B: Backend + ?Sized>(
    sessions: &[Session<'_, B>],
    from: &[Vec<u64>],
    to: &[Vec<u64>],
) -> Vec<Vec<u64>> {
    sessions
        .iter()
        .zip(from.iter().zip(to))
        .map(|(s, (a, b))| s.deltas(a, b))
        .collect()
}

/// What one interval (or one whole run) counted: per CPU with a PMU (the
/// plan's CPU), the increase of each of the group's events.
type Counted = Vec<(u32, Vec<u64>)>;

/// Takes one interval's counts (-I): where to print, the time since the
/// start, what each CPU counted.
type OnInterval<'a> = dyn FnMut(&mut dyn Write, Duration, &Counted) -> Result<(), String> + 'a;

/// The CPUs `a` names (a dry run of a dump: the dump's CPUs by position).
fn chosen_cpus(a: &StatArgs, nr_dump_cpus: Option<usize>) -> Result<Vec<u32>, String> {
    let online = match nr_dump_cpus {
        Some(n) => (0..n as u32).collect(),
        None => msrbatch::online_cpus().unwrap_or_default(),
    };
    a.cpus(&online)
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
/// arguments, the CPUs it counts on, what says what the batches are for,
/// where warnings and the intervals (-I) go, and CMD (`run`).
struct Counting<'a, B: ?Sized> {
    dev: &'a B,
    a: &'a StatArgs,
    cpus: &'a [u32],
    say: &'a dyn Say,
    warn: &'a mut dyn Write,
    out: &'a mut dyn Write,
    run: &'a mut Workload<'a>,
}

impl<B: Backend + ?Sized> Counting<'_, B> {
    /// One run of CMD counting group `g` on every CPU: program, start (one
    /// batch for all CPUs), run CMD, stop (one batch), restore. With
    /// `interval`, it is called at every tick of CMD's run with the time
    /// since the start and what each CPU counted since the last tick.
    fn count_group(
        &mut self,
        g: usize,
        group: &Group,
        interval: &mut OnInterval<'_>,
    ) -> Result<(Counted, Ran), String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        let mut sessions = Vec::new();
        for plan in &group.plans {
            say.say(&format!(
                "group {}: save every MSR it touches on CPU {}, stop, zero and program ({})",
                g + 1,
                plan.cpu,
                plan.describe().join("; ")
            ));
            sessions.push(Session::program(dev, plan.clone()).map_err(|e| e.to_string())?);
        }
        let label =
            |v: Vec<Vec<u64>>| -> Counted { group.plans.iter().map(|p| p.cpu).zip(v).collect() };
        say.say(&format!("group {}: start, fence, read", g + 1));
        let begin = Instant::now();
        let start = read_all(dev, &sessions, true, false)?;
        say.say(&format!("group {}: CMD runs: {}", g + 1, a.cmd.join(" ")));
        let mut last = start.clone();
        let out = &mut *self.out;
        let mut tick = || {
            let now = read_all(dev, &sessions, false, false)?;
            let d = deltas(&sessions, &last, &now);
            last = now;
            interval(out, begin.elapsed(), &label(d))
        };
        let ran = (self.run)(&mut tick);
        say.say(&format!("group {}: fence, read, stop", g + 1));
        let end = read_all(dev, &sessions, false, true);
        say.say(&format!("group {}: restore what was saved", g + 1));
        for s in &mut sessions {
            let report = s.restore().map_err(|e| e.to_string())?;
            for line in report.inexact {
                let _ = writeln!(self.warn, "msrbatch: stat: warning: {line}");
            }
        }
        let end = end?;
        let ran = ran?;
        if a.interval.is_some() {
            let d = label(deltas(&sessions, &last, &end));
            interval(self.out, begin.elapsed(), &d)?;
        }
        Ok((label(deltas(&sessions, &start, &end)), ran))
    }

    /// The stat sequence on `dev` (the device, or the model for a dry run):
    /// plan groups, check ownership, then per repetition and group program,
    /// start, run CMD (`run`), stop and restore; the intervals (with -I) go
    /// to `out`. Returns the counts and CMD's last non-zero exit status.
    fn measure(&mut self) -> Result<(Report, i32), String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        let (cpus, events) = probe_events(dev, self.cpus, say, self.warn, &a.events)?;
        let groups: Vec<Vec<usize>> = match cpus.present.first() {
            Some((cpu, info)) => Plan::groups(info, *cpu, &events)
                .map_err(|e| e.to_string())?
                .iter()
                .scan(0, |first, p| {
                    let idx = (*first..*first + p.slots.len()).collect();
                    *first += p.slots.len();
                    Some(idx)
                })
                .collect(),
            None => vec![(0..events.len()).collect()],
        };
        if groups.len() > 1 {
            if a.interval.is_some() {
                return Err(format!(
                    "-I counts every event at once, and these {} events need {} runs of CMD (they do not fit CPU {}'s counters together)",
                    events.len(),
                    groups.len(),
                    cpus.present[0].0
                ));
            }
            say.say(&format!(
                "{} events, {} groups: CMD runs once per group and repetition",
                events.len(),
                groups.len()
            ));
        }
        if a.interval.is_some() && a.repeat > 1 {
            return Err("-I prints one run of CMD: -r must be 1".into());
        }
        let groups = plan_groups(&cpus, &events, groups)?;
        check_groups(dev, a, say, &groups)?;
        let layout = a.layout();
        let names: Vec<String> = events.iter().map(|e| e.name.clone()).collect();
        let cmd = a.cmd.join(" ");
        let empty = || {
            let mut r = Report::new(&cmd, &cpus.all, 1, &names);
            for &(cpu, _) in &cpus.present {
                r.supported(cpu);
            }
            r
        };
        let mut report = empty();
        report.runs = a.repeat;
        let mut header = true;
        let mut status = 0;
        for _ in 0..a.repeat {
            for (g, group) in groups.iter().enumerate() {
                let mut interval =
                    |out: &mut dyn Write, t: Duration, c: &Counted| -> Result<(), String> {
                        let mut r = empty();
                        r.add_run(&group.events, c, t);
                        let text = print::interval(&layout, &r, t, header);
                        header = false;
                        out.write_all(text.as_bytes())
                            .map_err(|e| format!("writing the counts: {e}"))
                    };
                let (counted, ran) = self.count_group(g, group, &mut interval)?;
                if ran.status != 0 {
                    status = ran.status;
                }
                report.add_run(&group.events, &counted, ran.elapsed);
            }
        }
        Ok((report, status))
    }

    /// `stat --sweep`: CMD once to warm up (nothing counted), then each group
    /// of events that fit the counters together -r times.
    fn sweep(&mut self) -> Result<Sweep, String> {
        let (dev, a, say) = (self.dev, self.a, self.say);
        let (cpus, events) = probe_events(dev, self.cpus, say, self.warn, &a.sweep)?;
        let Some((cpu, info)) = cpus.present.first() else {
            return Err("no CPU with a PMU; nothing to sweep".into());
        };
        let packed = Plan::pack(info, *cpu, &events).map_err(|e| e.to_string())?;
        let groups = plan_groups(&cpus, &events, packed.into_iter().map(|(_, i)| i).collect())?;
        say.say(&format!(
            "sweep: {} events in {} groups of at most {} (the counters of CPU {cpu}); CMD runs once to warm up, then {} time(s) per group",
            events.len(),
            groups.len(),
            info.gp_counters + info.fixed_counters,
            a.repeat
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
        let ran = (self.run)(&mut || Ok(()))?;
        if ran.status != 0 {
            out.status = ran.status;
        }
        for _ in 0..a.repeat {
            for (g, group) in groups.iter().enumerate() {
                let (counted, ran) = self.count_group(g, group, &mut |_, _, _| Ok(()))?;
                if ran.status != 0 {
                    out.status = ran.status;
                }
                // Each event's count, summed over the CPUs.
                for (slot, &k) in group.events.iter().enumerate() {
                    let sum = counted.iter().map(|(_, v)| v[slot]).sum();
                    out.events[k].1 = g + 1;
                    out.events[k].2.push(sum);
                }
            }
        }
        Ok(out)
    }
}

/// The CPUIDs of the CPUs a dry run plans for, and the CPUs it counts on.
fn dry_run_cpus(
    dev: Option<&dyn Backend>,
    a: &StatArgs,
    out: &mut dyn Write,
) -> Result<(Vec<CpuidCpu>, Vec<u32>), String> {
    let (mut leaves, chosen) = match (&a.cpuid_dump, dev) {
        (Some(path), _) => {
            let d = CpuidDump::read(path).map_err(|e| e.what().to_string())?;
            let chosen = chosen_cpus(a, Some(d.cpus.len()))?;
            if let Some(c) = chosen.iter().find(|&&c| c as usize >= d.cpus.len()) {
                return Err(format!("{path}: no CPU {c} (it has {})", d.cpus.len()));
            }
            (d.cpus, chosen)
        }
        (None, Some(dev)) => {
            let chosen = chosen_cpus(a, None)?;
            let max = chosen.iter().copied().max().unwrap_or(0);
            let mut cpus = vec![CpuidCpu::default(); max as usize + 1];
            for &cpu in &chosen {
                let (leaves, info) = probe_cpuid(dev, cpu).map_err(|e| e.to_string())?;
                cpus[cpu as usize] = if info.present() {
                    leaves
                } else {
                    let n = a.counters.unwrap_or(4);
                    let _ = writeln!(
                        out,
                        "# CPU {cpu}: {}; this dry run plans for an Intel architectural PMU v2 with {n} counters (--counters)",
                        info.absence()
                    );
                    stand_in_pmu(n)
                };
            }
            (cpus, chosen)
        }
        (None, None) => return Err("no device and no --cpuid-dump".into()),
    };
    if let Some(n) = a.counters {
        for &cpu in &chosen {
            // Intel: CPUID.0AH EAX[15:8] is the number of counters.
            if let Some(l) = leaves[cpu as usize].leaves.get_mut(&(0xa, 0)) {
                let have = (l[0] >> 8) & 0xff;
                l[0] = (l[0] & !0xff00) | have.min(n) << 8;
            }
        }
    }
    Ok((leaves, chosen))
}

/// The CPUID of a hypervisor's Intel architectural PMU version 2 with `n`
/// counters: a dry run's stand-in on a CPU without a PMU.
fn stand_in_pmu(n: u32) -> CpuidCpu {
    let mut c = CpuidCpu::default();
    c.leaves
        .insert((0, 0), [0xa, 0x756e_6547, 0x6c65_746e, 0x4965_6e69]);
    c.leaves.insert(
        (0xa, 0),
        [2 | (n & 0xff) << 8 | 48 << 16 | 7 << 24, 0, 0, 0],
    );
    // A hypervisor's PMU (CPUID.01H:ECX[31]): its CPUID is taken at its
    // word, without the Core 2 quirk's 3 fixed counters, so the plan uses
    // exactly the n counters asked for.
    c.leaves.insert((1, 0), [0, 0, 1 << 31, 0]);
    c
}

/// Runs `msrbatch stat`; returns CMD's exit status. `dev` is None when a
/// dry run has a dump and no device. A dry run prints on `plan_out`; the
/// counts go to -o's file, else to standard error.
pub fn stat(
    dev: Option<&dyn Backend>,
    a: &StatArgs,
    plan_out: &mut dyn Write,
) -> Result<i32, String> {
    if a.dry_run {
        let (leaves, cpus) = dry_run_cpus(dev, a, plan_out)?;
        let model = SimPmu::new(&CpuidDump { cpus: leaves });
        let cmd = a.cmd.join(" ");
        let echo = Echo {
            inner: &model,
            out: std::cell::RefCell::new(plan_out),
            batches: Cell::new(0),
        };
        let mut nothing = |_: &mut dyn FnMut() -> Result<(), String>| {
            Ok(Ran {
                status: 0,
                elapsed: Duration::ZERO,
            })
        };
        let mut c = Counting {
            dev: &echo,
            a,
            cpus: &cpus,
            say: &echo,
            warn: &mut std::io::sink(),
            out: &mut std::io::sink(),
            run: &mut nothing,
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
    let online = msrbatch::online_cpus().unwrap_or_default();
    let cpus = a.cpus(&online)?;
    if let Ok(possible) = msrbatch::possible_cpus() {
        if let Some(c) = cpus.iter().find(|c| !possible.contains(c)) {
            return Err(format!(
                "-C: no CPU {c} (this machine has CPUs {})",
                format_cpu_list(&possible)
            ));
        }
    }
    let mut out: Box<dyn Write> = match &a.output {
        Some(path) => Box::new(std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?),
        None => Box::new(std::io::stderr()),
    };
    // -a counts on every CPU: CMD runs where the scheduler puts it.
    let pin = (!a.all_cpus).then_some(cpus.as_slice());
    let cmd = a.cmd.clone();
    let every = a.interval;
    count(
        dev,
        a,
        &cpus,
        &mut out,
        &mut std::io::stderr(),
        &mut |tick: &mut dyn FnMut() -> Result<(), String>| run_cmd(pin, &cmd, every, tick),
    )
}

/// Counts on `cpus` with `run` standing for CMD, and prints the counts on
/// `out`; warnings go to `warn`.
fn count<B: Backend + ?Sized>(
    dev: &B,
    a: &StatArgs,
    cpus: &[u32],
    out: &mut dyn Write,
    warn: &mut dyn Write,
    run: &mut Workload<'_>,
) -> Result<i32, String> {
    let w = |e: std::io::Error| format!("writing the counts: {e}");
    let mut c = Counting {
        dev,
        a,
        cpus,
        say: &Quiet,
        warn,
        out: &mut *out,
        run,
    };
    if !a.sweep.is_empty() {
        let s = c.sweep()?;
        out.write_all(print_sweep(a, cpus, &s).as_bytes())
            .map_err(w)?;
        return Ok(s.status);
    }
    let (report, status) = c.measure()?;
    if a.interval.is_none() {
        out.write_all(print::counts(&a.layout(), &report).as_bytes())
            .map_err(w)?;
    }
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

fn print_sweep(a: &StatArgs, cpus: &[u32], s: &Sweep) -> String {
    use std::fmt::Write;
    let reps = a.repeat;
    let runs = s.groups as u64 * u64::from(reps);
    let on = format_cpu_list(cpus);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Sweep of '{}' on CPU {on}: 1 warm-up run, then {runs} counting run{} ({} group{} x {reps}); every count exact, none scaled:",
        a.cmd.join(" "),
        if runs > 1 { "s" } else { "" },
        s.groups,
        if s.groups > 1 { "s" } else { "" },
    );
    let _ = writeln!(t, "{:>20}  {:>9}  {:>5}  event", "count", "spread", "group");
    for (name, g, v) in &s.events {
        let mean = v.iter().map(|&x| u128::from(x)).sum::<u128>() / v.len().max(1) as u128;
        let _ = writeln!(t, "{mean:>20}  {:>9}  {g:>5}  {name}", spread(v));
    }
    let _ = writeln!(t, "events that shared a run:");
    for g in 1..=s.groups {
        let names: Vec<&str> = s
            .events
            .iter()
            .filter(|e| e.1 == g)
            .map(|e| e.0.as_str())
            .collect();
        let _ = writeln!(t, "  group {g}: {}", names.join(", "));
    }
    let _ = writeln!(t, "(counts include everything that ran on CPU {on} while CMD ran, user and kernel unless the event says otherwise; the spread is half the range over the {reps} run{} of each group)", if reps > 1 { "s" } else { "" });
    t
}

#[cfg(test)]
mod tests;
