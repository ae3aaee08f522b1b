// SPDX-License-Identifier: GPL-2.0
//! `msrbatch stat`: program counters, run CMD pinned to one CPU, read them.

use crate::pmu::{self, PmuInfo, StatEvent};
use clap::Args;
use msrbatch::{Batch, Device, Op, Value};

/// `msrbatch stat -e EVENTS [-C CPU] [-r N] [--dry-run] [--force] -- CMD...`
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Events: architectural names (instructions, cycles, ...) or
    /// event=0x..:umask=0x..[:usr:os:cmask=..] items, comma-separated.
    #[arg(short = 'e', long = "events", required = true)]
    events: Vec<String>,
    /// CPU to pin CMD to and count on.
    #[arg(short = 'C', long = "cpu", default_value_t = 0, value_parser = msrbatch::number::parse_u32)]
    cpu: u32,
    /// Runs per event group (the counts are averaged).
    #[arg(short = 'r', long = "repeat", default_value_t = 1, value_parser = msrbatch::number::parse_u32)]
    repeat: u32,
    /// Print the batches it would issue, and touch nothing.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run on a machine without a PMU: the number of counters to plan for.
    #[arg(long, value_parser = msrbatch::number::parse_u32)]
    counters: Option<u32>,
    /// Program the counters even if the NMI watchdog or perf seem to use them.
    #[arg(long)]
    force: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<String>,
}

/// Reasons not to touch the counters, unless forced.
fn counters_in_use(dev: &Device, pmu: &PmuInfo, cpu: u32, n: u32) -> Result<Vec<String>, String> {
    let mut why = Vec::new();
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/nmi_watchdog") {
        if s.trim() != "0" {
            why.push("the NMI watchdog is on (/proc/sys/kernel/nmi_watchdog); it owns a counter (echo 0 > /proc/sys/kernel/nmi_watchdog)".into());
        }
    }
    let mut b = Batch::new();
    for i in 0..n {
        b.push(
            cpu,
            Op::RdMsr {
                msr: pmu.counter_msrs(i).0,
            },
        );
    }
    dev.run(&mut b).map_err(|e| e.to_string())?;
    for r in b.results() {
        if let Ok(Value::U64(v)) = r.value {
            if v & (1 << 22) != 0 {
                why.push(format!(
                    "counter {} is enabled (PERFEVTSEL {v:#x}): perf or another tool owns it",
                    r.index
                ));
            }
        }
    }
    Ok(why)
}

/// Runs CMD pinned to `cpu`; returns its exit status.
fn run_pinned(cpu: u32, cmd: &[String]) -> Result<std::process::ExitStatus, String> {
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
    c.status().map_err(|e| format!("{}: {e}", cmd[0]))
}

fn values(b: &Batch) -> Vec<u64> {
    b.results()
        .filter(|r| matches!(r.op, Op::RdPmc { .. }))
        .map(|r| r.value.ok().and_then(|v| v.as_u64()).unwrap_or(0))
        .collect()
}

/// Runs `msrbatch stat`; returns the exit status.
pub fn stat(dev: &Device, a: &StatArgs) -> Result<i32, String> {
    let events = pmu::parse_events(&a.events)?;
    let mut info = pmu::probe(dev, a.cpu)?;
    if !info.present() {
        if !a.dry_run {
            return Err(format!(
                "CPU {}: {}; nothing to count",
                a.cpu,
                info.absence()
            ));
        }
        let n = a.counters.unwrap_or(4);
        println!(
            "# CPU {}: {}; this dry run plans for an Intel architectural PMU v2 with {n} counters (--counters)",
            a.cpu,
            info.absence()
        );
        info = PmuInfo {
            version: 2,
            gp_counters: n,
            gp_width: 48,
            rdpmc_ok: true,
            ..PmuInfo::default()
        };
    } else if let Some(n) = a.counters {
        info.gp_counters = info.gp_counters.min(n);
    }
    let per_group = info.gp_counters.max(1) as usize;
    let groups: Vec<&[StatEvent]> = events.chunks(per_group).collect();
    if groups.len() > 1 {
        println!(
            "# {} events, {} counters: {} runs of CMD per repetition, rotating event groups",
            events.len(),
            per_group,
            groups.len()
        );
    }
    let global = info.has_global().then_some(0u64);

    if a.dry_run {
        for (g, group) in groups.iter().enumerate() {
            let saved = vec![0; group.len()];
            let (before, after) = pmu::stat_batches(&info, a.cpu, group, &saved, global);
            let names: Vec<&str> = group.iter().map(|e| e.name.as_str()).collect();
            println!("# group {} ({}): before CMD (saved PERFEVTSEL and global control values are read first and restored after)", g + 1, names.join(", "));
            print!("{}", pmu::batch_as_script(&before));
            println!("# group {}: after CMD", g + 1);
            print!("{}", pmu::batch_as_script(&after));
        }
        return Ok(0);
    }

    let used = (per_group.min(events.len())) as u32;
    let why = counters_in_use(dev, &info, a.cpu, used)?;
    if !why.is_empty() && !a.force {
        return Err(format!(
            "refusing to program counters on CPU {} (use --force):\n  {}",
            a.cpu,
            why.join("\n  ")
        ));
    }

    let mut totals = vec![0u128; events.len()];
    let mut status = 0;
    for _ in 0..a.repeat.max(1) {
        for (g, group) in groups.iter().enumerate() {
            let mut save = Batch::new();
            for i in 0..group.len() {
                save.push(
                    a.cpu,
                    Op::RdMsr {
                        msr: info.counter_msrs(i as u32).0,
                    },
                );
            }
            if info.has_global() {
                save.push(
                    a.cpu,
                    Op::RdMsr {
                        msr: info.global_ctrl(),
                    },
                );
            }
            dev.run(&mut save).map_err(|e| e.to_string())?;
            let saved: Vec<u64> = save
                .results()
                .map(|r| r.value.ok().and_then(|v| v.as_u64()).unwrap_or(0))
                .collect();
            let global = info
                .has_global()
                .then(|| saved.last().copied().unwrap_or(0));
            let (mut before, mut after) = pmu::stat_batches(&info, a.cpu, group, &saved, global);
            dev.run(&mut before).map_err(|e| e.to_string())?;
            let st = run_pinned(a.cpu, &a.cmd);
            dev.run(&mut after).map_err(|e| e.to_string())?;
            let st = st?;
            if !st.success() {
                status = st.code().unwrap_or(1);
            }
            if before.nr_failed() + after.nr_failed() > 0 {
                return Err(format!(
                    "{} ops failed while counting (faulting MSR or RDPMC)",
                    before.nr_failed() + after.nr_failed()
                ));
            }
            let width = if info.gp_width > 0 && info.gp_width < 64 {
                info.gp_width
            } else {
                64
            };
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            for (i, (b, e)) in values(&before).iter().zip(values(&after)).enumerate() {
                totals[g * per_group + i] += u128::from(e.wrapping_sub(*b) & mask);
            }
        }
    }
    println!(
        "Performance counter stats for '{}' on CPU {} ({} run{}):",
        a.cmd.join(" "),
        a.cpu,
        a.repeat.max(1),
        if a.repeat > 1 { "s" } else { "" }
    );
    for (ev, total) in events.iter().zip(&totals) {
        println!("{:>20}  {}", total / u128::from(a.repeat.max(1)), ev.name);
    }
    println!("(counts include everything that ran on CPU {} while CMD ran, user and kernel unless the event says otherwise)", a.cpu);
    Ok(status)
}
