// SPDX-License-Identifier: GPL-2.0
//! `msrbatch-bench`: msrbatch against the in-tree msr driver and against the
//! instructions themselves, measured side by side in one run.
//!
//! Every figure is the median of repeated runs. Prints a table of ns/op and
//! the ratios the project targets, then the same data as one JSON document
//! between `BEGIN-BENCH-JSON` and `END-BENCH-JSON` lines (or, with
//! `--json FILE`, into FILE).
//!
//! Prepared batches (`Device::prepare`) are measured next to plain ones: the
//! cost of rerunning an N-op RDMSR batch, a 4096-op RDTSC batch and a one-op
//! batch. The start spread of a batch of 64 RDTSC on each of 4 CPUs is
//! measured over many batches with and without a synchronised start.
//!
//! Samplers (`MSRBATCH_IOC_SAMPLE`, see `bench_sampler.rs`): the cost of
//! one sample of K RDMSR on a CPU against a user-space poller doing the
//! same reads with pread at the same rate, the period jitter, and the
//! samples a slow reader loses.
//!
//! With `--icount` (the guest runs under QEMU `-icount shift=0,sleep=off`,
//! where the clock advances one ns per guest instruction) every figure is the
//! *minimum* of the repeated runs, i.e. an instruction count without the
//! interrupts that hit some runs, and the targets are the instruction-count
//! targets. `--budget` then prints only the `BUDGET name value` lines that
//! `tests/harness/icount-budget.sh` compares with the recorded budgets.

mod bench_sampler;

use msrbatch::{Batch, Device, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

/// IA32_PAT: readable everywhere, never changes.
const MSR: u32 = 0x277;
const SIZES: [usize; 5] = [1, 8, 64, 512, 4096];

fn pin(cpu: usize) {
    // SAFETY: A zeroed cpu_set_t is valid; the calls only read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Whether the guest clock counts instructions (`--icount`).
static ICOUNT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn icount() -> bool {
    ICOUNT.load(std::sync::atomic::Ordering::Relaxed)
}

/// Nanoseconds of `f` over `reps` runs (after one warm-up run): the median,
/// or under `--icount` the minimum (the run no interrupt hit).
fn median_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_nanos() as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    if icount() {
        t[0]
    } else {
        t[t.len() / 2]
    }
}

/// Repetitions for a measurement of `n` items: enough for a stable median,
/// bounded so that large sizes do not take minutes under emulation.
fn reps_for(n: usize) -> usize {
    (20_000 / n).clamp(11, 201)
}

fn rdtsc() -> u64 {
    // SAFETY: RDTSC is allowed in user mode unless CR4.TSD is set, which
    // Linux does not do for normal tasks.
    unsafe { core::arch::x86_64::_rdtsc() }
}

struct Row {
    name: &'static str,
    n: usize,
    ns_per_op: f64,
}

/// How many batches the start spread is measured over.
const SPREAD_BATCHES: usize = 201;

/// The start spread of one kind of batch, in TSC ticks (`None`: no batch
/// ran).
struct Spread {
    sync: bool,
    median: Option<u64>,
    max: Option<u64>,
    runs: usize,
    timeouts: u32,
}

fn main() {
    let json_path = std::env::args().skip_while(|a| a != "--json").nth(1);
    ICOUNT.store(
        std::env::args().any(|a| a == "--icount"),
        std::sync::atomic::Ordering::Relaxed,
    );
    let budget_only = std::env::args().any(|a| a == "--budget");
    let unit = if icount() { "instr" } else { "ns" };
    let dev = Device::open().unwrap_or_else(|e| {
        eprintln!("msrbatch-bench: {e}");
        std::process::exit(2)
    });
    let msr = File::open("/dev/cpu/0/msr").ok();
    let ncpus = msrbatch::online_cpus().map_or(1, |c| c.len());
    pin(0);
    let mut rows = Vec::new();

    for n in SIZES {
        let mut b = Batch::new();
        for _ in 0..n {
            b.push(0, Op::RdMsr { msr: MSR });
        }
        let t = median_ns(reps_for(n), || dev.run(&mut b).expect("batch"));
        rows.push(Row {
            name: "msrbatch_rdmsr",
            n,
            ns_per_op: t / n as f64,
        });
        let prepared = dev.prepare(&b).expect("prepare");
        let t = median_ns(reps_for(n), || {
            prepared.run().expect("prepared run");
        });
        rows.push(Row {
            name: "msrbatch_prepared_rdmsr",
            n,
            ns_per_op: t / n as f64,
        });
        drop(prepared);
        if let Some(f) = &msr {
            let mut buf = [0u8; 8];
            let t = median_ns(reps_for(n), || {
                for _ in 0..n {
                    f.read_exact_at(&mut buf, u64::from(MSR)).expect("pread");
                }
            });
            rows.push(Row {
                name: "intree_pread",
                n,
                ns_per_op: t / n as f64,
            });
        }
        let mut b = Batch::new();
        for _ in 0..n {
            b.push(0, Op::RdTsc);
        }
        let t = median_ns(reps_for(n), || dev.run(&mut b).expect("batch"));
        rows.push(Row {
            name: "msrbatch_rdtsc",
            n,
            ns_per_op: t / n as f64,
        });
        let t = median_ns(reps_for(n), || {
            let mut x = 0u64;
            for _ in 0..n {
                x = x.wrapping_add(rdtsc());
            }
            std::hint::black_box(x);
        });
        rows.push(Row {
            name: "user_rdtsc",
            n,
            ns_per_op: t / n as f64,
        });
    }

    // Where the time of a 4096-RDTSC batch goes: the TSC values the ops
    // return time the execution on the CPU; the rest of the ioctl is copying,
    // validation, grouping and the cross-call.
    let tsc_per_ns = {
        let (t0, i0) = (rdtsc(), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(100));
        (rdtsc() - t0) as f64 / i0.elapsed().as_nanos() as f64
    };
    let n = 4096;
    let mut b = Batch::new();
    for _ in 0..n {
        b.push(0, Op::RdTsc);
    }
    let mut exec_ns = Vec::new();
    let total = median_ns(reps_for(n), || {
        dev.run(&mut b).expect("batch");
        let first = b
            .result(0)
            .and_then(|r| r.value.ok())
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        let last = b
            .result(n - 1)
            .and_then(|r| r.value.ok())
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        exec_ns.push(last.wrapping_sub(first) as f64 / tsc_per_ns);
    });
    exec_ns.sort_by(f64::total_cmp);
    let exec = exec_ns[exec_ns.len() / 2];
    // Reference for the copies around the ops: the ioctl moves the 48-byte
    // ops array in (and, for write batches, back out twice): time one
    // user-space copy of the same size.
    let src = vec![0x5au8; n * 48];
    let mut dst = vec![0u8; n * 48];
    let copy_ns = median_ns(reps_for(n), || {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
    });

    // One batch, 64 RDTSC per CPU, on 1, 2 and 4 CPUs: ns per batch.
    let mut cpu_rows = Vec::new();
    for k in [1usize, 2, 4].into_iter().filter(|&k| k <= ncpus) {
        let mut b = Batch::new();
        for cpu in 0..k {
            for _ in 0..64 {
                b.push(cpu as u32, Op::RdTsc);
            }
        }
        cpu_rows.push((k, median_ns(201, || dev.run(&mut b).expect("batch"))));
    }

    // The prepared 4096-RDTSC batch: per-op cost of a rerun.
    let prepared = dev.prepare(&b).expect("prepare");
    let prepared_rdtsc4096 = median_ns(reps_for(n), || {
        prepared.run().expect("prepared run");
    }) / n as f64;
    drop(prepared);

    // Start spread: 64 RDTSC on each of (up to) 4 CPUs, plain and with a
    // synchronised start, over many batches: median and max in TSC ticks.
    // A synchronised batch that timed out (a CPU did not arrive within 20 ms,
    // which emulation can cause) ran nothing: it is counted, not measured.
    let spread_cpus = ncpus.min(4);
    let mut spreads = Vec::new();
    for sync in [false, true] {
        let mut b = Batch::new();
        b.sync_start(sync);
        for cpu in 0..spread_cpus {
            for _ in 0..64 {
                b.push(cpu as u32, Op::RdTsc);
            }
        }
        let (mut ticks, mut timeouts) = (Vec::new(), 0u32);
        for _ in 0..SPREAD_BATCHES {
            match dev.run(&mut b) {
                Ok(()) => ticks.push(b.start_spread()),
                Err(e) if e.errno().0 == libc::ETIMEDOUT => timeouts += 1,
                Err(e) => panic!("start spread batch: {e}"),
            }
        }
        ticks.sort_unstable();
        spreads.push(Spread {
            sync,
            median: ticks.get(ticks.len() / 2).copied(),
            max: ticks.last().copied(),
            runs: ticks.len(),
            timeouts,
        });
    }

    // Fixed cost: a one-op batch against a null system call.
    let mut one = Batch::new();
    one.push(0, Op::RdTsc);
    let ioctl_ns = median_ns(1001, || dev.run(&mut one).expect("batch"));
    let prepared = dev.prepare(&one).expect("prepare");
    let prepared_one_ns = median_ns(1001, || {
        prepared.run().expect("prepared run");
    });
    drop(prepared);
    // SAFETY: getppid has no arguments and no side effects.
    let syscall_ns = median_ns(1001, || unsafe {
        std::hint::black_box(libc::syscall(libc::SYS_getppid));
    });

    let get = |name: &str, n: usize| {
        rows.iter()
            .find(|r| r.name == name && r.n == n)
            .map(|r| r.ns_per_op)
    };
    // The fixed cost of one op through each interface.
    let pread_one = get("intree_pread", 1).unwrap_or(f64::NAN);
    let rdmsr_one = get("msrbatch_rdmsr", 1).unwrap_or(f64::NAN);
    let exec_per_op = exec / (n - 1) as f64;
    let around_per_op = (total - exec) / n as f64;

    let mut targets = Vec::new();
    if icount() {
        // Issue #15's targets, in guest instructions.
        targets.push(("one_op_ioctl_vs_pread", rdmsr_one / pread_one, 1.0, false));
        targets.push(("exec_loop_instr_per_op", exec_per_op, 12.0, false));
        if let (Some(ours), Some(theirs)) = (get("msrbatch_rdmsr", 64), get("intree_pread", 64)) {
            targets.push(("rdmsr64_vs_intree_per_msr", theirs / ours, 5.0, true));
        }
        // Issue #15's targets for the prepared path.
        if let (Some(ours), Some(theirs)) =
            (get("msrbatch_prepared_rdmsr", 64), get("intree_pread", 64))
        {
            targets.push((
                "prepared_rdmsr64_vs_intree_per_msr",
                theirs / ours,
                30.0,
                true,
            ));
        }
        if let Some(floor) = get("user_rdtsc", 4096) {
            targets.push((
                "prepared_rdtsc4096_vs_user_loop",
                prepared_rdtsc4096 / floor,
                2.0,
                false,
            ));
        }
        targets.push((
            "prepared_one_op_minus_null_syscall",
            prepared_one_ns - syscall_ns,
            100.0,
            false,
        ));
    } else {
        // Emulation timings: the three ratios, compared with the same targets
        // as on hardware.
        if let (Some(ours), Some(theirs)) = (get("msrbatch_rdmsr", 64), get("intree_pread", 64)) {
            targets.push(("rdmsr64_throughput_vs_intree", theirs / ours, 20.0, true));
        }
        if let (Some(ours), Some(floor)) = (get("msrbatch_rdtsc", 4096), get("user_rdtsc", 4096)) {
            targets.push(("rdtsc4096_cost_vs_user_loop", ours / floor, 1.5, false));
        }
        if let (Some((_, one)), Some((_, four))) = (
            cpu_rows.iter().find(|r| r.0 == 1),
            cpu_rows.iter().find(|r| r.0 == 4),
        ) {
            targets.push(("four_cpus_vs_one", four / one, 2.0, false));
        }
    }

    if budget_only {
        // What the budget test compares: instruction counts of our paths.
        for (name, v) in [
            ("null_syscall", syscall_ns),
            ("pread_one_msr", pread_one),
            ("ioctl_one_rdmsr", rdmsr_one),
            ("ioctl_one_rdtsc", ioctl_ns),
            (
                "rdmsr64_per_op",
                get("msrbatch_rdmsr", 64).unwrap_or(f64::NAN),
            ),
            (
                "rdtsc4096_per_op",
                get("msrbatch_rdtsc", 4096).unwrap_or(f64::NAN),
            ),
            ("exec_loop_per_op", exec_per_op),
            (
                "prepared_rdmsr64_per_op",
                get("msrbatch_prepared_rdmsr", 64).unwrap_or(f64::NAN),
            ),
            ("prepared_one_op", prepared_one_ns),
            ("prepared_rdtsc4096_per_op", prepared_rdtsc4096),
        ] {
            println!("BUDGET {name} {v:.1}");
        }
        return;
    }

    let samp = bench_sampler::measure(&dev, MSR, tsc_per_ns);

    let hypervisor =
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" hypervisor"));
    if icount() {
        println!("msrbatch-bench --icount: guest instructions (QEMU -icount shift=0: the clock advances 1 ns per instruction), minimum of repeated runs, CPU 0, {ncpus} CPUs");
        println!("icount counts every iteration of a rep-prefixed instruction: the kernel's user copies of 64 bytes or more (rep movsb) cost one count per byte, far more than on hardware.");
    } else {
        println!("msrbatch-bench: medians of repeated runs, CPU 0 (caller pinned there), {ncpus} CPUs online");
        if hypervisor {
            println!("Running under a hypervisor (in a QEMU TCG guest these are emulation timings): only the ratios mean something.");
        }
    }
    println!();
    println!(
        "{:>6}  {:>18}  {:>18}  {:>18}  {:>18}  {:>18}",
        "N", "msrbatch RDMSR", "prepared RDMSR", "in-tree pread", "msrbatch RDTSC", "user RDTSC"
    );
    for n in SIZES {
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} {unit}/op"));
        println!(
            "{n:>6}  {:>18}  {:>18}  {:>18}  {:>18}  {:>18}",
            cell(get("msrbatch_rdmsr", n)),
            cell(get("msrbatch_prepared_rdmsr", n)),
            cell(get("intree_pread", n)),
            cell(get("msrbatch_rdtsc", n)),
            cell(get("user_rdtsc", n))
        );
    }
    println!();
    for (k, t) in &cpu_rows {
        println!("one batch of 64 RDTSC per CPU on {k} CPU(s): {t:.0} {unit}");
    }
    println!(
        "4096-RDTSC batch: {total:.0} {unit} per ioctl, of which {exec:.0} {unit} ({exec_per_op:.1} {unit}/op) executing the ops on the CPU and {:.0} {unit} ({around_per_op:.1} {unit}/op) around them (copies, validation, grouping, cross-call); TSC {tsc_per_ns:.3} ticks per {unit}",
        total - exec,
    );
    println!("reference: one user-space copy of that 196 KiB ops array: {copy_ns:.0} {unit}");
    println!("one-op RDTSC batch ioctl: {ioctl_ns:.0} {unit}; null system call (getppid): {syscall_ns:.0} {unit}; ratio {:.2}", ioctl_ns / syscall_ns);
    println!("one-op RDMSR batch ioctl: {rdmsr_one:.0} {unit}; in-tree pread of one MSR: {pread_one:.0} {unit}");
    println!(
        "prepared batches (reruns): one-op RDTSC {prepared_one_ns:.0} {unit} (null system call + {:.0}); 4096-op RDTSC {prepared_rdtsc4096:.1} {unit}/op (user-space RDTSC loop: {} {unit}/op)",
        prepared_one_ns - syscall_ns,
        get("user_rdtsc", 4096).map_or("-".to_string(), |v| format!("{v:.1}"))
    );
    let ticks = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    for s in &spreads {
        println!(
            "start spread, 64 RDTSC on each of {spread_cpus} CPUs, {}: median {} max {} TSC ticks over {} batches{}",
            if s.sync { "synchronised start" } else { "plain start" },
            ticks(s.median),
            ticks(s.max),
            s.runs,
            if s.sync { format!(" ({} timed out)", s.timeouts) } else { String::new() }
        );
    }
    print_sampler(&samp, unit, tsc_per_ns, pread_one);
    println!();
    for (name, value, target, higher_is_better) in &targets {
        let met = if *higher_is_better {
            value >= target
        } else {
            value <= target
        };
        let rel = if *higher_is_better {
            "at least"
        } else {
            "at most"
        };
        println!(
            "{name}: {value:.2} (target {rel} {target}) {}",
            if met { "met" } else { "MISSED" }
        );
    }

    let mut json = format!(
        "{{\"hypervisor\":{hypervisor},\"icount\":{},\"unit\":\"{unit}\",\"cpus\":{ncpus},\"msr\":{MSR},\"rows\":[",
        icount()
    );
    json += &rows
        .iter()
        .map(|r| {
            format!(
                "{{\"series\":\"{}\",\"n\":{},\"ns_per_op\":{:.3}}}",
                r.name, r.n, r.ns_per_op
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    json += "],\"cpu_scaling\":[";
    json += &cpu_rows
        .iter()
        .map(|(k, t)| format!("{{\"cpus\":{k},\"ns_per_batch\":{t:.1}}}"))
        .collect::<Vec<_>>()
        .join(",");
    json += &format!(
        "],\"ioctl_one_op_ns\":{ioctl_ns:.1},\"null_syscall_ns\":{syscall_ns:.1},\"prepared_one_op_ns\":{prepared_one_ns:.1},\"prepared_rdtsc4096_ns_per_op\":{prepared_rdtsc4096:.3},\"start_spread\":["
    );
    let num = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    json += &spreads
        .iter()
        .map(|s| {
            format!(
                "{{\"cpus\":{spread_cpus},\"ops_per_cpu\":64,\"sync_start\":{},\"batches\":{},\"timeouts\":{},\"median_ticks\":{},\"max_ticks\":{}}}",
                s.sync,
                s.runs,
                s.timeouts,
                num(s.median),
                num(s.max)
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    json += "],";
    json += &sampler_json(&samp);
    json += ",\"targets\":[";
    json += &targets
        .iter()
        .map(|(n, v, t, h)| {
            format!("{{\"name\":\"{n}\",\"value\":{v:.3},\"target\":{t},\"higher_is_better\":{h}}}")
        })
        .collect::<Vec<_>>()
        .join(",");
    json += "]}";
    match json_path {
        Some(p) => std::fs::write(&p, json + "\n")
            .unwrap_or_else(|e| eprintln!("msrbatch-bench: {p}: {e}")),
        None => println!("BEGIN-BENCH-JSON\n{json}\nEND-BENCH-JSON"),
    }
}

/// The sampler section of the report.
fn print_sampler(f: &bench_sampler::Figures, unit: &str, tsc_per_ns: f64, pread_one: f64) {
    println!();
    println!(
        "samplers (MSRBATCH_IOC_SAMPLE), IA32_PAT on CPU 0; {}",
        if icount() {
            "TSC ticks are guest instructions (of all vCPUs; they run one at a time)"
        } else {
            "TCG emulation timings: they say nothing about hardware"
        }
    );
    if icount() {
        println!(
        "cost per sample: a user RDTSC loop on CPU 0 ({} ticks per step) counts the ticks it did not run, for {:.0} ms without a sampler ({} ticks stolen) and then with one (period 1 ms, no wake-ups, ring read afterwards); the extra ticks per sample taken. The same against a user poller on CPU 0 ({}) sleeping to each 1 ms period (clock_nanosleep) then reading the MSR K times with pread of /dev/cpu/0/msr.",
        f.step,
        f.baseline_ticks as f64 / tsc_per_ns / 1e6,
        f.baseline_stolen,
        if f.fifo { "SCHED_FIFO" } else { "SCHED_OTHER: SCHED_FIFO refused" }
    );
    } else {
        println!("cost per sample: not measured without --icount (the TSC then runs on the host's clock, and the time the host does not run the vCPU swamps a sample's cost)");
    }
    if !f.costs.is_empty() {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let optu = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "{:>4}  {:>8}  {:>16}  {:>12}  {:>8}  {:>16}  {:>12}  {:>14}",
            "K",
            "samples",
            "ticks/sample",
            "median gap",
            "periods",
            "pread ticks/per",
            "median gap",
            "K x pread"
        );
        for c in f.costs.iter() {
            println!(
                "{:>4}  {:>8}  {:>16.0}  {:>12}  {:>8}  {:>16}  {:>12}  {:>14}",
                c.ops,
                c.samples,
                c.per_sample,
                optu(c.median_gap),
                c.pread_periods,
                opt(c.pread_per_period),
                optu(c.pread_median_gap),
                format!("{:.0} {unit}", c.ops as f64 * pread_one)
            );
        }
        println!("(K x pread: K times the one-MSR pread above, without the sleep and wake-up; TSC {tsc_per_ns:.3} ticks per {unit})");
    }
    for j in &f.jitter {
        println!(
            "period jitter at {} us, CPU 0, 1 RDMSR: {} deltas between consecutive periods ({} periods missing): mean {:.1} stddev {:.1} min {} max {} ticks; stddev {:.1} ns, min {:.0} max {:.0} ns",
            j.period_ns / 1000,
            j.deltas,
            j.missing,
            j.mean,
            j.stddev,
            j.min,
            j.max,
            j.stddev / tsc_per_ns,
            j.min as f64 / tsc_per_ns,
            j.max as f64 / tsc_per_ns
        );
    }
    if !icount() {
        println!("(under TCG the jitter is the emulator's: it says nothing about hardware)");
    } else {
        println!("(under icount the jitter is instruction counts of the emulated path: it says nothing about hardware)");
    }
    let l = &f.lost;
    println!(
        "slow reader (1-page ring, 100 us period, read every 50 ms, {:.2} s): {:.0} samples/s read, {:.0}/s lost (LOST records), ring lost {} in all",
        l.seconds,
        l.read as f64 / l.seconds,
        l.lost_records as f64 / l.seconds,
        l.ring_lost
    );
}

/// The sampler section of bench.json: `"sampler":{...}`.
fn sampler_json(f: &bench_sampler::Figures) -> String {
    let num = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.1}"));
    let numu = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    let costs = f
        .costs
        .iter()
        .map(|c| {
            format!(
                "{{\"ops\":{},\"samples\":{},\"ticks_per_sample\":{},\"median_gap_ticks\":{},\"pread_periods\":{},\"pread_ticks_per_period\":{},\"pread_median_gap_ticks\":{}}}",
                c.ops,
                c.samples,
                num(c.per_sample.is_finite().then_some(c.per_sample)),
                numu(c.median_gap),
                c.pread_periods,
                num(c.pread_per_period),
                numu(c.pread_median_gap)
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let jitter = f
        .jitter
        .iter()
        .map(|j| {
            format!(
                "{{\"period_ns\":{},\"deltas\":{},\"missing\":{},\"mean_ticks\":{:.1},\"stddev_ticks\":{:.1},\"min_ticks\":{},\"max_ticks\":{}}}",
                j.period_ns, j.deltas, j.missing, j.mean, j.stddev, j.min, j.max
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let l = &f.lost;
    format!(
        "\"sampler\":{{\"cpu\":0,\"loop_step_ticks\":{},\"baseline_ticks\":{},\"baseline_stolen_ticks\":{},\"poller_fifo\":{},\"cost\":[{costs}],\"jitter\":[{jitter}],\"slow_reader\":{{\"period_ns\":100000,\"ring_pages\":1,\"read_every_ms\":50,\"seconds\":{:.3},\"read\":{},\"lost_records\":{},\"ring_lost\":{}}}}}",
        f.step, f.baseline_ticks, f.baseline_stolen, f.fifo, l.seconds, l.read, l.lost_records, l.ring_lost
    )
}
