// SPDX-License-Identifier: GPL-2.0
//! `msrbatch energy`: how often the RAPL energy counters update, measured
//! with polls (`MSRBATCH_OP_POLL`): in one batch, polls that each wait for
//! the next change of the counter, stamped with the TSC of the read that saw
//! it; the gaps between those stamps are the update intervals (turbostat and
//! likwid read the counters at their own period and cannot see them).

use crate::exit::{Exit, Failure};
use crate::output::JsonObject;
use crate::sample::TscClock;
use msrbatch::msr::parse_msr;
use msrbatch::MAX_POLL_US;
use msrbatch::{
    msr_by_name, msr_name, Batch, Device, Errno, Op, Poll, PollSource, PollStamp, Value,
};
use std::time::Duration;

/// The energy status counters measured by default, where they count: Intel's
/// package, cores (PP0), graphics (PP1), DRAM and platform, AMD's package
/// and core (names from the kernel's msr-index.h, through the library).
const DEFAULT_MSRS: [&str; 7] = [
    "MSR_PKG_ENERGY_STATUS",
    "MSR_PP0_ENERGY_STATUS",
    "MSR_PP1_ENERGY_STATUS",
    "MSR_DRAM_ENERGY_STATUS",
    "MSR_PLATFORM_ENERGY_STATUS",
    "MSR_AMD_PKG_ENERGY_STATUS",
    "MSR_AMD_CORE_ENERGY_STATUS",
];

/// Polls per batch: the first waits for an update, each of the others for
/// the next one. Three polls of at most 2 ms each keep a batch's
/// interrupts-off time at 6 ms.
const POLLS: usize = 3;

/// The energy counters are 32 bits wide (the rest of the MSR is reserved).
const COUNTER_MASK: u64 = 0xffff_ffff;

/// Bars of the distribution.
const BINS: usize = 10;

#[derive(clap::Args, Debug)]
pub struct EnergyArgs {
    /// The CPU whose counters are polled (a package counter: any CPU of
    /// the package).
    #[arg(short = 'C', long = "cpu", default_value_t = 0)]
    cpu: u32,
    /// An energy status MSR to measure, by name or number (repeatable;
    /// default: every Intel and AMD package, core, graphics, DRAM and
    /// platform counter).
    #[arg(long = "msr", value_name = "MSR", value_parser = |s: &str| parse_msr(s).map_err(|e| e.to_string()))]
    msrs: Vec<u32>,
    /// Update intervals to measure per counter.
    #[arg(short = 'n', long, default_value_t = 100, value_parser = crate::parse_count)]
    count: u64,
    /// One JSON object per counter and line.
    #[arg(long)]
    json: bool,
}

/// What polling one counter found.
enum Outcome {
    /// RDMSR of it faults: the CPU has no such MSR.
    Faults,
    /// It read `value` and did not change within a poll's timeout.
    Still(u64),
    /// The gaps between updates, in TSC ticks (fewer than asked for if it
    /// stopped updating); and how many polls saw no update within their
    /// timeout.
    Intervals(Vec<u64>, u64),
}

/// `msrbatch energy`.
pub fn energy(dev: &Device, a: &EnergyArgs) -> Result<Exit, Failure> {
    let msrs: Vec<u32> = if a.msrs.is_empty() {
        DEFAULT_MSRS.iter().filter_map(|n| msr_by_name(n)).collect()
    } else {
        a.msrs.clone()
    };
    let clock = TscClock::start();
    let mut found = Vec::new();
    for &m in &msrs {
        found.push((m, measure(dev, a.cpu, m, a.count)?));
    }
    // Ticks to microseconds, from the TSC's rate over the whole measurement
    // (at least 100 us have passed: every counter was polled for some).
    std::thread::sleep(Duration::from_millis(1));
    let us_per_tick = clock.hz().map_or(0.0, |hz| 1e6 / hz);
    let mut counted = false;
    for (m, outcome) in &found {
        let name = msr_name(*m).unwrap_or_else(|| format!("MSR {m:#x}"));
        if let Outcome::Intervals(..) = outcome {
            counted = true;
        }
        if a.json {
            println!("{}", json(*m, &name, a.cpu, outcome, us_per_tick));
        } else {
            print!("{}", text(&name, *m, a.cpu, outcome, us_per_tick));
        }
    }
    if counted {
        Ok(Exit::Success)
    } else {
        Err(Failure::new(
            Exit::OpsFailed,
            format!(
                "no RAPL energy counter updates on CPU {}: none of the {} counters polled changed \
                 within {} us (an emulated CPU, such as QEMU's TCG, has no RAPL)",
                a.cpu,
                msrs.len(),
                MAX_POLL_US
            ),
        ))
    }
}

/// The poll of `msr` for the next change of its counter bits.
fn poll(msr: u32) -> Op {
    Op::Poll(Poll::new(PollSource::Msr(msr)).with_mask(COUNTER_MASK))
}

/// Polls `msr` on `cpu` until `count` intervals are measured (or it shows
/// that it does not count).
fn measure(dev: &Device, cpu: u32, msr: u32, count: u64) -> Result<Outcome, Failure> {
    let fail = |e: msrbatch::Error| Failure::nothing_ran(format!("energy: {e}"));
    let mut probe = Batch::new();
    probe.push(cpu, Op::RdMsr { msr });
    probe.push(cpu, poll(msr));
    run(dev, &mut probe).map_err(fail)?;
    let mut r = probe.results();
    match (r.next().map(|r| r.value), r.next().map(|r| r.value)) {
        (Some(Err(Errno(libc::EIO))), _) => return Ok(Outcome::Faults),
        (Some(Ok(v)), Some(Err(Errno(libc::ETIMEDOUT)))) => {
            return Ok(Outcome::Still(v.as_u64().unwrap_or(0)))
        }
        _ => {}
    }
    let mut batch = Batch::new();
    for _ in 0..POLLS {
        batch.push(cpu, poll(msr));
    }
    let (mut gaps, mut timeouts) = (Vec::new(), 0);
    // A counter that stops updating ends the measurement after as many
    // waits without an update as intervals were asked for.
    while (gaps.len() as u64) < count && timeouts <= count {
        run(dev, &mut batch).map_err(fail)?;
        let mut prev = None;
        for r in batch.results() {
            prev = match r.value {
                Ok(Value::Poll {
                    at: PollStamp::Tsc(t),
                    ..
                }) => {
                    if let Some(p) = prev {
                        gaps.push(t.wrapping_sub(p));
                    }
                    Some(t)
                }
                Err(Errno(libc::ETIMEDOUT)) => {
                    timeouts += 1;
                    None
                }
                _ => None,
            };
        }
    }
    gaps.truncate(count as usize);
    Ok(Outcome::Intervals(gaps, timeouts))
}

/// Runs `batch`; ops the CPU's busy credit left unrun (`ETIME`) run again
/// after a pause that refills it.
fn run(dev: &Device, batch: &mut Batch) -> msrbatch::Result<()> {
    for _ in 0..10 {
        dev.run(batch)?;
        if !batch.results().any(|r| r.value == Err(Errno(libc::ETIME))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Summary figures of some intervals, in microseconds.
struct Summary {
    min: f64,
    median: f64,
    mean: f64,
    max: f64,
    /// `BINS` equal bins from `min` to `max`: their lower bounds and counts.
    bins: Vec<(f64, usize)>,
    width: f64,
}

fn summary(ticks: &[u64], us_per_tick: f64) -> Option<Summary> {
    let mut us: Vec<f64> = ticks.iter().map(|&t| t as f64 * us_per_tick).collect();
    us.sort_by(f64::total_cmp);
    let (&min, &max) = (us.first()?, us.last()?);
    let width = ((max - min) / BINS as f64).max(f64::MIN_POSITIVE);
    let mut bins: Vec<(f64, usize)> = (0..BINS).map(|i| (min + i as f64 * width, 0)).collect();
    for &v in &us {
        let i = (((v - min) / width) as usize).min(BINS - 1);
        bins[i].1 += 1;
    }
    Some(Summary {
        min,
        median: us[us.len() / 2],
        mean: us.iter().sum::<f64>() / us.len() as f64,
        max,
        bins,
        width,
    })
}

/// The table form of one counter's outcome.
fn text(name: &str, m: u32, cpu: u32, outcome: &Outcome, us_per_tick: f64) -> String {
    let head = format!("{name} ({m:#x}) on CPU {cpu}");
    match outcome {
        Outcome::Faults => format!("{head}: not implemented (RDMSR faults)\n"),
        Outcome::Still(v) => format!(
            "{head}: reads {v:#x} and did not change within {MAX_POLL_US} us: it does not count here\n"
        ),
        Outcome::Intervals(gaps, timeouts) => {
            let Some(s) = summary(gaps, us_per_tick) else {
                return format!("{head}: no intervals\n");
            };
            let mut out = format!(
                "{head}: {} updates {:.1} us apart (median; min {:.1}, mean {:.1}, max {:.1}); \
                 {timeouts} waits of {MAX_POLL_US} us without an update\n",
                gaps.len(),
                s.median,
                s.min,
                s.mean,
                s.max
            );
            let most = s.bins.iter().map(|b| b.1).max().unwrap_or(1).max(1);
            for &(from, n) in &s.bins {
                out += &format!(
                    "  {:>9.1} - {:>9.1} us {n:>6} {}\n",
                    from,
                    from + s.width,
                    "#".repeat(n * 40 / most)
                );
            }
            out
        }
    }
}

/// The JSON form of one counter's outcome.
fn json(m: u32, name: &str, cpu: u32, outcome: &Outcome, us_per_tick: f64) -> JsonObject {
    let mut o = JsonObject::default()
        .with("msr", format!("{m:#x}"))
        .with("name", name)
        .with("cpu", cpu);
    match outcome {
        Outcome::Faults => o.push("counts", "no: RDMSR faults"),
        Outcome::Still(v) => o.push(
            "counts",
            format!("no: reads {v:#x}, no change within {MAX_POLL_US} us"),
        ),
        Outcome::Intervals(gaps, timeouts) => {
            o.push("counts", "yes");
            o.push("intervals", gaps.len());
            o.push("timeouts", timeouts);
            if let Some(s) = summary(gaps, us_per_tick) {
                for (k, v) in [
                    ("min_us", s.min),
                    ("median_us", s.median),
                    ("mean_us", s.mean),
                    ("max_us", s.max),
                ] {
                    o.push(k, v);
                }
                let bins: Vec<JsonObject> = s
                    .bins
                    .iter()
                    .map(|&(from, n)| {
                        JsonObject::default()
                            .with("from_us", from)
                            .with("to_us", from + s.width)
                            .with("count", n)
                    })
                    .collect();
                o.push("histogram", bins);
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_counters_have_names() {
        for n in DEFAULT_MSRS {
            assert!(msr_by_name(n).is_some(), "{n}");
        }
        assert_eq!(
            msr_by_name(DEFAULT_MSRS[0]),
            Some(msrbatch::msr::MSR_PKG_ENERGY_STATUS)
        );
    }

    #[test]
    fn summary_and_distribution() {
        // 976 us (a RAPL update at 1/1024 s) at 1 tick per us, one late one.
        let mut ticks = vec![976; 9];
        ticks.push(1952);
        let s = summary(&ticks, 1.0).unwrap();
        assert_eq!((s.min, s.median, s.max), (976.0, 976.0, 1952.0));
        assert!((s.mean - 1073.6).abs() < 1e-9);
        assert_eq!(s.bins.len(), BINS);
        assert_eq!((s.bins[0].1, s.bins[BINS - 1].1), (9, 1));
        assert_eq!(s.bins.iter().map(|b| b.1).sum::<usize>(), 10);
        assert!(summary(&[], 1.0).is_none());
        let t = text(
            "MSR_PKG_ENERGY_STATUS",
            0x611,
            0,
            &Outcome::Intervals(ticks, 2),
            1.0,
        );
        assert!(
            t.starts_with("MSR_PKG_ENERGY_STATUS (0x611) on CPU 0: 10 updates 976.0 us apart"),
            "{t}"
        );
        assert!(t.contains("2 waits of 2000 us without an update"), "{t}");
        let t = text("MSR_PKG_ENERGY_STATUS", 0x611, 1, &Outcome::Still(0), 1.0);
        assert!(
            t.contains("reads 0x0 and did not change within 2000 us: it does not count here"),
            "{t}"
        );
        let j = json(0x611, "MSR_PKG_ENERGY_STATUS", 0, &Outcome::Faults, 1.0).to_string();
        assert_eq!(
            j,
            r#"{"msr":"0x611","name":"MSR_PKG_ENERGY_STATUS","cpu":0,"counts":"no: RDMSR faults"}"#
        );
    }
}
