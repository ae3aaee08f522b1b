// SPDX-License-Identifier: GPL-2.0
//! The sampler section of `msrbatch-bench` (`MSRBATCH_IOC_SAMPLE`).
//!
//! - **Cost per sample.** A user loop on CPU 0 reads the TSC again and
//!   again; whenever two reads are further apart than 64 times the loop's
//!   own step, the CPU was away (an interrupt, another task) and the excess
//!   is counted as stolen. The loop runs for a fixed window without a
//!   sampler, then with a sampler of K RDMSR on CPU 0 (its wake-ups off: the
//!   ring is read after the window): the extra stolen ticks divided by the
//!   samples taken in the window are the cost of one sample on that CPU
//!   (timer interrupt, the ops, the record). The same is done with a
//!   user-space poller on CPU 0 (`SCHED_FIFO` if allowed) that sleeps until
//!   each period (`clock_nanosleep`, absolute) and then reads the same K
//!   MSRs with `pread` on `/dev/cpu/0/msr`: the extra stolen ticks per
//!   period are its cost at the same rate.
//! - **Period jitter.** The TSC deltas between consecutive samples (periods
//!   N and N + 1) of CPU 0, at 1 ms and at the minimum period.
//! - **Lost samples.** At the minimum period with a one-page ring that is
//!   read every 50 ms: samples read and lost per second.
//!
//! The cost is measured only under `--icount`: without it the TSC runs
//! on the host's clock, and the time the host does not run the vCPU
//! swamps what a sample costs (measured: negative "costs").
//!
//! Under `--icount` the guest TSC advances one tick per guest instruction
//! (of all vCPUs, which run one at a time), so ticks are instructions.

use crate::{pin, rdtsc};
use msrbatch::sampler::{Record, Sample, Sampler, SamplerConfig};
use msrbatch::{Batch, Device, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The sampled CPU.
const CPU: u32 = 0;
/// Ops per sample measured.
pub const OPS: [usize; 3] = [1, 8, 32];
/// The period of the cost measurement and of the first jitter measurement.
const PERIOD_NS: u64 = 1_000_000;
/// The minimum period the kernel accepts.
const MIN_PERIOD_NS: u64 = *msrbatch::sampler::PERIOD_NS.start();
/// How long each busy-loop window lasts, in ns of the guest clock.
const WINDOW_NS: u64 = 250_000_000;
/// Samples taken for each jitter measurement.
const JITTER_SAMPLES: u64 = 1000;
/// How long the slow reader runs, and how often it reads.
const LOST_RUN: Duration = Duration::from_secs(1);
const LOST_READ_EVERY: Duration = Duration::from_millis(50);

/// What a busy loop saw of one window.
struct Window {
    start: u64,
    end: u64,
    /// Ticks the loop did not run (above its own step), and in how many
    /// gaps.
    stolen: u64,
    gaps: Vec<u64>,
}

/// The smallest step of the RDTSC loop: what one iteration costs.
fn loop_step() -> u64 {
    let mut prev = rdtsc();
    let mut step = u64::MAX;
    for _ in 0..100_000 {
        let t = rdtsc();
        step = step.min(t.wrapping_sub(prev));
        prev = t;
    }
    step.max(1)
}

/// Runs the RDTSC loop for `ticks` TSC ticks on the calling CPU.
fn busy(ticks: u64, step: u64) -> Window {
    let threshold = step * 64;
    let mut gaps = Vec::with_capacity(1 << 16);
    let start = rdtsc();
    let (mut prev, mut stolen) = (start, 0u64);
    loop {
        let t = rdtsc();
        let d = t.wrapping_sub(prev);
        if d > threshold {
            stolen += d - step;
            if gaps.len() < gaps.capacity() {
                gaps.push(d - step);
            }
        }
        prev = t;
        if t.wrapping_sub(start) >= ticks {
            break;
        }
    }
    Window {
        start,
        end: prev,
        stolen,
        gaps,
    }
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// A batch of `k` RDMSR of `msr` on [`CPU`].
fn batch(k: usize, msr: u32) -> Batch {
    let mut b = Batch::new();
    for _ in 0..k {
        b.push(CPU, Op::RdMsr { msr });
    }
    b
}

/// Reads every record left in a stopped sampler's ring.
fn drain(s: &mut Sampler) -> Vec<Record> {
    let mut out = Vec::new();
    while let Some(r) = s.read().expect("sampler read") {
        out.push(r);
    }
    out
}

fn samples(records: &[Record]) -> impl Iterator<Item = &Sample> {
    records.iter().filter_map(|r| match r {
        Record::Sample(s) if s.cpu == CPU => Some(s),
        _ => None,
    })
}

/// The cost of K ops per period, through a sampler and through a pread
/// poller, in TSC ticks.
pub struct Cost {
    pub ops: usize,
    pub samples: u64,
    pub per_sample: f64,
    pub median_gap: Option<u64>,
    pub pread_periods: u64,
    pub pread_per_period: Option<f64>,
    pub pread_median_gap: Option<u64>,
}

/// Period jitter of CPU 0's samples, in TSC ticks.
pub struct Jitter {
    pub period_ns: u64,
    /// Deltas between samples of consecutive periods.
    pub deltas: usize,
    /// Periods with no sample between the first and the last.
    pub missing: u64,
    pub mean: f64,
    pub stddev: f64,
    pub min: u64,
    pub max: u64,
}

/// The slow reader at the minimum period.
pub struct Lost {
    pub seconds: f64,
    pub read: u64,
    pub lost_records: u64,
    pub ring_lost: u64,
}

pub struct Figures {
    pub step: u64,
    pub baseline_stolen: u64,
    pub baseline_ticks: u64,
    pub fifo: bool,
    pub costs: Vec<Cost>,
    pub jitter: Vec<Jitter>,
    pub lost: Lost,
}

/// A thread on [`CPU`] that wakes every `period_ns` and reads `msr` `k`
/// times with pread; counts its periods in `done`, and sets `fifo` if it
/// got `SCHED_FIFO`.
fn poller(f: File, k: usize, msr: u32, stop: &AtomicBool, done: &AtomicU64, fifo: &AtomicBool) {
    pin(CPU as usize);
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: Sets the calling thread's policy from a valid parameter.
    let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    fifo.store(ok, Ordering::Relaxed);
    let mut buf = [0u8; 8];
    let mut next = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `next` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut next) };
    while !stop.load(Ordering::Relaxed) {
        next.tv_nsec += PERIOD_NS as libc::c_long;
        if next.tv_nsec >= 1_000_000_000 {
            next.tv_nsec -= 1_000_000_000;
            next.tv_sec += 1;
        }
        // SAFETY: Sleeps until `next`, a valid timespec; no remainder.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &next,
                std::ptr::null_mut(),
            )
        };
        for _ in 0..k {
            f.read_exact_at(&mut buf, u64::from(msr)).expect("pread");
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn measure(dev: &Device, msr: u32, tsc_per_ns: f64) -> Figures {
    pin(CPU as usize);
    let window = (WINDOW_NS as f64 * tsc_per_ns) as u64;
    let step = loop_step();
    let base = busy(window, step);
    let baseline_ticks = base.end - base.start;
    let base_rate = base.stolen as f64 / baseline_ticks as f64;
    let excess = |w: &Window| w.stolen as f64 - base_rate * (w.end - w.start) as f64;
    let fifo = AtomicBool::new(false);

    let mut costs = Vec::new();
    // Without icount the TSC is the host's clock: the ticks a vCPU is not
    // scheduled by the host (4 vCPUs share 2 cores) swamp the sampler's.
    for k in OPS.into_iter().filter(|_| crate::icount()) {
        let prepared = dev.prepare(&batch(k, msr)).expect("prepare");
        // A ring that holds the whole window; wake-ups never due.
        let cfg = SamplerConfig {
            period_ns: PERIOD_NS,
            ring_pages: 256,
            watermark: 256 * 4096 - 16,
        };
        let mut sampler = prepared.sample(&cfg).expect("sample");
        let w = busy(window, step);
        sampler.stop().expect("stop");
        let records = drain(&mut sampler);
        let n = samples(&records)
            .filter(|s| (w.start..=w.end).contains(&s.tsc))
            .count() as u64;
        let per_sample = if n > 0 {
            excess(&w) / n as f64
        } else {
            f64::NAN
        };
        let median_gap = median(w.gaps);

        let (mut pread_periods, mut pread_per_period, mut pread_median_gap) = (0, None, None);
        if let Ok(f) = File::open(format!("/dev/cpu/{CPU}/msr")) {
            let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
            let w = std::thread::scope(|s| {
                s.spawn(|| poller(f, k, msr, &stop, &done, &fifo));
                // Let it start sleeping on its period.
                std::thread::sleep(Duration::from_millis(5));
                let before = done.load(Ordering::Relaxed);
                let w = busy(window, step);
                pread_periods = done.load(Ordering::Relaxed) - before;
                stop.store(true, Ordering::Relaxed);
                w
            });
            pread_per_period = (pread_periods > 0).then(|| excess(&w) / pread_periods as f64);
            pread_median_gap = median(w.gaps);
        }
        costs.push(Cost {
            ops: k,
            samples: n,
            per_sample,
            median_gap,
            pread_periods,
            pread_per_period,
            pread_median_gap,
        });
    }

    let mut jitter = Vec::new();
    for period_ns in [PERIOD_NS, MIN_PERIOD_NS] {
        let prepared = dev.prepare(&batch(1, msr)).expect("prepare");
        let cfg = SamplerConfig {
            period_ns,
            ring_pages: 256,
            watermark: 256 * 4096 - 16,
        };
        let mut sampler = prepared.sample(&cfg).expect("sample");
        std::thread::sleep(Duration::from_nanos(period_ns * JITTER_SAMPLES));
        sampler.stop().expect("stop");
        let records = drain(&mut sampler);
        let s: Vec<(u64, u64)> = samples(&records).map(|s| (s.seq, s.tsc)).collect();
        let deltas: Vec<u64> = s
            .windows(2)
            .filter(|p| p[1].0 == p[0].0 + 1)
            .map(|p| p[1].1.wrapping_sub(p[0].1))
            .collect();
        let missing = match (s.first(), s.last()) {
            (Some(a), Some(b)) => (b.0 - a.0 + 1).saturating_sub(s.len() as u64),
            _ => 0,
        };
        let n = deltas.len().max(1) as f64;
        let mean = deltas.iter().sum::<u64>() as f64 / n;
        let var = deltas
            .iter()
            .map(|&d| (d as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        jitter.push(Jitter {
            period_ns,
            deltas: deltas.len(),
            missing,
            mean,
            stddev: var.sqrt(),
            min: deltas.iter().copied().min().unwrap_or(0),
            max: deltas.iter().copied().max().unwrap_or(0),
        });
    }

    // The slow reader: a one-page ring at the minimum period.
    let prepared = dev.prepare(&batch(1, msr)).expect("prepare");
    let mut sampler = prepared
        .sample(&SamplerConfig {
            period_ns: MIN_PERIOD_NS,
            ring_pages: 1,
            watermark: 0,
        })
        .expect("sample");
    let (mut read, mut lost_records) = (0u64, 0u64);
    let mut count = |records: Vec<Record>| {
        for r in records {
            match r {
                Record::Sample(_) => read += 1,
                Record::Lost { lost, .. } => lost_records += lost,
                _ => {}
            }
        }
    };
    let t0 = Instant::now();
    while t0.elapsed() < LOST_RUN {
        std::thread::sleep(LOST_READ_EVERY);
        count(drain(&mut sampler));
    }
    sampler.stop().expect("stop");
    let seconds = t0.elapsed().as_secs_f64();
    count(drain(&mut sampler));
    let lost = Lost {
        seconds,
        read,
        lost_records,
        ring_lost: sampler.lost(),
    };

    Figures {
        step,
        baseline_stolen: base.stolen,
        baseline_ticks,
        fifo: fifo.load(Ordering::Relaxed),
        costs,
        jitter,
        lost,
    }
}
