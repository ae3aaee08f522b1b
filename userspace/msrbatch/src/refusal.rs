// SPDX-License-Identifier: GPL-2.0
//! Why the kernel refuses a call, in words: each refusal names the limit
//! (its name in `<linux/msrbatch.h>` and its value, from the generated
//! [`crate::uapi`], never a copy) and the value that broke it.
//!
//! [`check_batch`] and [`check_sampler`] make the checks the kernel makes
//! that need nothing but the request (the number of ops, delays, timestamps,
//! the period, the ring, ops per CPU and per second), so a caller can refuse
//! before the ioctl with the kernel's errno and op index; [`explain`] gives
//! the words for a refusal the kernel made, from those checks where one
//! matches and from a table keyed by the errno and the call otherwise. The
//! library's errors ([`crate::Error`]) carry these words, and so does the C
//! API's `msrbatch_last_error()`.

use crate::number::format_cpu_list;
use crate::sampler::{SamplerConfig, PERIOD_NS};
use crate::uapi::*;
use crate::{Errno, Op};
use std::collections::BTreeMap;
use std::fmt;

/// The ioctl refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call<'a> {
    /// `MSRBATCH_IOC_BATCH`: a batch run once.
    Batch,
    /// `MSRBATCH_IOC_PREPARE`: a batch kept for reruns.
    Prepare,
    /// `MSRBATCH_IOC_RUN`: a rerun of a prepared batch.
    Run,
    /// `MSRBATCH_IOC_SAMPLE`: a sampler of a prepared batch with this
    /// configuration.
    Sample(&'a SamplerConfig),
    /// `MSRBATCH_IOC_RESTORE_ON_CLOSE`.
    RestoreOnClose,
    /// `MSRBATCH_IOC_PCE_GRANT`: user-mode RDPMC for the calling thread.
    Grant,
}

/// A refusal: the errno, the op to blame (if one is) and why, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The errno the kernel returns (or would).
    pub errno: Errno,
    /// The index of the op to blame.
    pub index: Option<u32>,
    /// Why, naming the limit and the value.
    pub text: String,
}

impl Refusal {
    fn new(errno: i32, index: Option<usize>, text: String) -> Self {
        Refusal {
            errno: Errno(errno),
            index: index.map(|i| u32::try_from(i).unwrap_or(u32::MAX)),
            text,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.errno, self.text)?;
        if let Some(i) = self.index {
            write!(f, " (op {i})")?;
        }
        Ok(())
    }
}

/// A duration in nanoseconds in the largest unit that keeps it whole.
fn duration(ns: u64) -> String {
    [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")]
        .into_iter()
        .find(|(unit, _)| ns >= *unit && ns % unit == 0)
        .map_or_else(
            || format!("{ns}ns"),
            |(unit, u)| format!("{}{u}", ns / unit),
        )
}

/// The ops that return a second value themselves (no room for a timestamp).
fn has_own_second_value(op: &Op) -> bool {
    matches!(
        op,
        Op::RdTscp | Op::Cpuid { .. } | Op::RmwMsr { .. } | Op::Poll(_)
    )
}

/// How long `op` may keep its CPU waiting, in nanoseconds: a delay's
/// delay, a poll's timeout (both count towards `MSRBATCH_MAX_CPU_DELAY_NS`).
fn wait_ns(op: &Op) -> u64 {
    match *op {
        Op::Delay { ns } => ns,
        Op::Poll(poll) => poll.timeout_ns(),
        _ => 0,
    }
}

/// The checks of a batch (`ops`: each op with its CPU) that need nothing but
/// the batch, in the kernel's order: at least one op, at most
/// `MSRBATCH_MAX_OPS`, no delay over `MSRBATCH_MAX_DELAY_NS`, no poll's
/// timeout over `MSRBATCH_MAX_POLL_NS` and no CPU's delays and poll timeouts
/// over `MSRBATCH_MAX_CPU_DELAY_NS`, no timestamps with an op that returns a
/// second value.
pub fn check_batch(ops: &[(u32, Op)], timestamps: bool) -> Result<(), Refusal> {
    if ops.is_empty() {
        return Err(Refusal::new(
            libc::EINVAL,
            None,
            "the batch has no ops".into(),
        ));
    }
    if ops.len() > MSRBATCH_MAX_OPS as usize {
        return Err(Refusal::new(
            libc::E2BIG,
            None,
            format!(
                "the batch has {} ops, over the {} a batch may have (MSRBATCH_MAX_OPS)",
                ops.len(),
                MSRBATCH_MAX_OPS
            ),
        ));
    }
    let mut delays: BTreeMap<u32, u64> = BTreeMap::new();
    for (i, (cpu, op)) in ops.iter().enumerate() {
        if let Op::Delay { ns } = *op {
            if ns > u64::from(MSRBATCH_MAX_DELAY_NS) {
                return Err(Refusal::new(
                    libc::ERANGE,
                    Some(i),
                    format!(
                        "a delay of {} is over the {} one delay op may last \
                         (MSRBATCH_MAX_DELAY_NS)",
                        duration(ns),
                        duration(MSRBATCH_MAX_DELAY_NS.into())
                    ),
                ));
            }
        }
        if let Op::Poll(poll) = op {
            let ns = poll.timeout_ns();
            if ns == 0 || ns > u64::from(MSRBATCH_MAX_POLL_NS) {
                return Err(Refusal::new(
                    if ns == 0 { libc::EINVAL } else { libc::ERANGE },
                    Some(i),
                    format!(
                        "a poll's timeout of {} is not within 1us to {} (MSRBATCH_MAX_POLL_NS)",
                        duration(ns),
                        duration(MSRBATCH_MAX_POLL_NS.into())
                    ),
                ));
            }
        }
        if timestamps && has_own_second_value(op) {
            return Err(Refusal::new(
                libc::EINVAL,
                Some(i),
                format!(
                    "'{}' returns a second value itself, where a timestamp would go: \
                     a batch with timestamps may not have rdtscp, cpuid, rmw or poll",
                    op.mnemonic()
                ),
            ));
        }
        let wait = wait_ns(op);
        if wait != 0 {
            let sum = delays.entry(*cpu).or_default();
            *sum += wait;
            if *sum > u64::from(MSRBATCH_MAX_CPU_DELAY_NS) {
                return Err(Refusal::new(
                    libc::ERANGE,
                    Some(i),
                    format!(
                        "the delays and poll timeouts on CPU {cpu} add up to {}, over the {} \
                         one CPU's waits in a batch may last (MSRBATCH_MAX_CPU_DELAY_NS)",
                        duration(*sum),
                        duration(MSRBATCH_MAX_CPU_DELAY_NS.into())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks that every CPU of `ops` is one of `possible` (the kernel refuses
/// others with `ENODEV`, naming the first op on one).
pub fn check_cpus(ops: &[(u32, Op)], possible: &[u32]) -> Result<(), Refusal> {
    match ops.iter().position(|(cpu, _)| !possible.contains(cpu)) {
        Some(i) => Err(Refusal::new(
            libc::ENODEV,
            Some(i),
            format!(
                "CPU {} does not exist: this machine's CPUs are {}",
                ops[i].0,
                format_cpu_list(possible)
            ),
        )),
        None => Ok(()),
    }
}

/// The checks of a sampler of `ops` with `cfg` that need nothing but those,
/// in the kernel's order: the period within `MSRBATCH_SAMPLE_MIN_PERIOD_NS`
/// and `MSRBATCH_SAMPLE_MAX_PERIOD_NS`, the ring pages a power of two and at
/// most `MSRBATCH_SAMPLE_MAX_RING_PAGES`, only ops that read, at most
/// `MSRBATCH_SAMPLE_MAX_OPS` on a CPU, the watermark within the ring, at
/// most `MSRBATCH_SAMPLE_MAX_OPS_PER_SEC` on a CPU.
pub fn check_sampler(ops: &[(u32, Op)], cfg: &SamplerConfig) -> Result<(), Refusal> {
    if !PERIOD_NS.contains(&cfg.period_ns) {
        return Err(Refusal::new(
            libc::ERANGE,
            None,
            format!(
                "a period of {} is not from {} (MSRBATCH_SAMPLE_MIN_PERIOD_NS) to {} \
                 (MSRBATCH_SAMPLE_MAX_PERIOD_NS)",
                duration(cfg.period_ns),
                duration(*PERIOD_NS.start()),
                duration(*PERIOD_NS.end())
            ),
        ));
    }
    check_ring_pages(cfg.ring_pages)?;
    if let Some(i) = ops.iter().position(|(_, op)| !op.is_sampleable()) {
        return Err(Refusal::new(
            libc::EINVAL,
            Some(i),
            format!(
                "'{}' cannot be sampled: a sampler runs only rdmsr, rdpmc, rdtsc, rdtscp \
                 and cpuid",
                ops[i].1
            ),
        ));
    }
    let mut per_cpu: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut over = None;
    for (i, (cpu, _)) in ops.iter().enumerate() {
        let (n, _) = per_cpu.entry(*cpu).or_insert((0, i));
        *n += 1;
        if *n == MSRBATCH_SAMPLE_MAX_OPS as usize + 1 && over.is_none() {
            over = Some((i, *cpu));
        }
    }
    if let Some((i, cpu)) = over {
        let n = per_cpu[&cpu].0;
        return Err(Refusal::new(
            libc::E2BIG,
            Some(i),
            format!(
                "CPU {cpu} has {n} ops, over the {} a sampler runs on one CPU \
                 (MSRBATCH_SAMPLE_MAX_OPS)",
                MSRBATCH_SAMPLE_MAX_OPS
            ),
        ));
    }
    let data = u64::from(cfg.ring_pages) * crate::sys::page_size();
    if u64::from(cfg.watermark) >= data {
        return Err(Refusal::new(
            libc::EINVAL,
            None,
            format!(
                "a watermark of {} bytes is not less than the ring's {} pages ({data} bytes)",
                cfg.watermark, cfg.ring_pages
            ),
        ));
    }
    for (cpu, (n, first)) in per_cpu {
        let rate = (n as u64 * 1_000_000_000).div_ceil(cfg.period_ns.max(1));
        if rate > u64::from(MSRBATCH_SAMPLE_MAX_OPS_PER_SEC) {
            return Err(Refusal::new(
                libc::ERANGE,
                Some(first),
                format!(
                    "CPU {cpu}'s {n} ops every {} are {rate} ops a second, over the {} a \
                     sampler may run on one CPU (MSRBATCH_SAMPLE_MAX_OPS_PER_SEC): a longer \
                     period or fewer ops",
                    duration(cfg.period_ns),
                    MSRBATCH_SAMPLE_MAX_OPS_PER_SEC
                ),
            ));
        }
    }
    Ok(())
}

/// The ring's pages: a power of two, at most `MSRBATCH_SAMPLE_MAX_RING_PAGES`.
pub fn check_ring_pages(pages: u32) -> Result<(), Refusal> {
    if !pages.is_power_of_two() {
        return Err(Refusal::new(
            libc::EINVAL,
            None,
            format!("{pages} ring pages: the ring's pages must be a power of two"),
        ));
    }
    if pages > MSRBATCH_SAMPLE_MAX_RING_PAGES {
        return Err(Refusal::new(
            libc::E2BIG,
            None,
            format!(
                "{pages} ring pages are over the {} a ring may have \
                 (MSRBATCH_SAMPLE_MAX_RING_PAGES)",
                MSRBATCH_SAMPLE_MAX_RING_PAGES
            ),
        ));
    }
    Ok(())
}

/// Why the kernel refused `call` of `ops` (each op with its CPU) with
/// `errno`, blaming op `index`: the words of the check the refusal matches,
/// else those the table has for the errno and the call. `None` for an errno
/// the table does not know.
pub fn explain(
    call: Call<'_>,
    ops: &[(u32, Op)],
    timestamps: bool,
    errno: i32,
    index: Option<u32>,
) -> Option<String> {
    let checked = match call {
        Call::Batch | Call::Prepare => check_batch(ops, timestamps),
        Call::Sample(cfg) => check_sampler(ops, cfg),
        Call::Run | Call::RestoreOnClose | Call::Grant => Ok(()),
    };
    match (call, errno) {
        (Call::RestoreOnClose, libc::EPERM) => {
            return Some(
                "restore on close needs CAP_SYS_RAWIO: this descriptor was opened without it \
                 (write back what you changed yourself, or run with the capability)"
                    .into(),
            )
        }
        (Call::RestoreOnClose, libc::EBUSY) => {
            return Some(
                "another process asked for restore on close of this file already: it restores \
                 when that process closes it or exits"
                    .into(),
            )
        }
        (Call::RestoreOnClose, libc::EPIPE) => {
            return Some(
                "the process that asked for restore on close of this file has closed it or \
                 exited: the file restored and writes no more"
                    .into(),
            )
        }
        (Call::RestoreOnClose, libc::EXDEV) => {
            return Some(
                "this process shares its descriptor table with another process \
                 (clone(CLONE_FILES)): its exit would close nothing, so nothing would restore"
                    .into(),
            )
        }
        (Call::Batch | Call::Run, libc::EXDEV) => {
            return Some(
                "this descriptor restores on close, and this process shares its descriptor table \
                 with another process (clone(CLONE_FILES)): the owner's exit would close nothing, \
                 so writes through it are refused"
                    .into(),
            )
        }
        (Call::RestoreOnClose | Call::Grant, libc::EBADF) => {
            return Some("the device is open read-only; this needs it opened for writing".into())
        }
        (Call::Grant, libc::EPERM) => {
            return Some(
                "this descriptor was opened without CAP_SYS_RAWIO and the allowlist in force \
                 at open has no 'allow pce' line (root: add it, msrbatch allowlist load FILE)"
                    .into(),
            )
        }
        (Call::Grant, libc::EACCES) => {
            return Some(
                "perf's rdpmc setting (/sys/bus/event_source/devices/cpu/rdpmc) is 0; write 1 \
                 or 2 there to allow user RDPMC"
                    .into(),
            )
        }
        (Call::Grant, libc::EOPNOTSUPP) => {
            return Some(
                "the kernel lacks CONFIG_PREEMPT_NOTIFIERS (it comes with CONFIG_KVM), or runs \
                 as a Xen PV guest, so a grant could not follow the thread; or, for a grant to \
                 a whole program, it lacks CONFIG_TRACEPOINTS (or, preemptible, CONFIG_TASKS_RCU), \
                 so the grant could not follow new threads and processes (a grant to one thread may still work: \
                 `exec --rdpmc-thread`)"
                    .into(),
            )
        }
        (Call::Grant, libc::EBUSY) => return Some("this thread already holds a grant".into()),
        (Call::RestoreOnClose | Call::Grant, _) => return None,
        _ => {}
    }
    if let Err(r) = checked {
        if r.errno.0 == errno && (index.is_none() || r.index == index) {
            return Some(r.text);
        }
    }
    let op = index.and_then(|i| ops.get(i as usize));
    if errno == libc::ENODEV {
        if let Some(Err(r)) = crate::possible_cpus().ok().map(|p| check_cpus(ops, &p)) {
            return Some(r.text);
        }
    }
    let batch_call = matches!(call, Call::Batch | Call::Prepare | Call::Run);
    Some(match errno {
        libc::ENODEV => match op {
            Some((cpu, _)) => format!(
                "CPU {cpu} does not exist: the op names a CPU number that is not a possible \
                 CPU of this machine (see /sys/devices/system/cpu/possible)"
            ),
            None => "a CPU the batch names does not exist".into(),
        },
        libc::ENXIO => "a CPU the batch names went offline".into(),
        libc::ETIMEDOUT if batch_call => format!(
            "synchronised start: a CPU did not arrive within {} (MSRBATCH_SYNC_TIMEOUT_NS), \
             so nothing ran",
            duration(MSRBATCH_SYNC_TIMEOUT_NS.into())
        ),
        libc::EBADF if batch_call => {
            "the device is open read-only: a batch that writes needs it opened for writing".into()
        }
        libc::EBADF => "the device is not open for reading".into(),
        libc::EPROTONOSUPPORT => format!(
            "the module does not speak this library's ABI version {MSRBATCH_ABI_VERSION} \
             (MSRBATCH_ABI_VERSION)"
        ),
        libc::EOPNOTSUPP => "the module does not know the op's code (an older module?)".into(),
        libc::ENOSPC if batch_call => format!(
            "this descriptor already holds {MSRBATCH_MAX_PREPARED} prepared batches \
             (MSRBATCH_MAX_PREPARED): free one first"
        ),
        libc::ENOSPC => format!(
            "{MSRBATCH_MAX_SAMPLERS} samplers run in the system (MSRBATCH_MAX_SAMPLERS), or \
             {MSRBATCH_MAX_SAMPLERS_CONFINED} of descriptors without CAP_SYS_RAWIO \
             (MSRBATCH_MAX_SAMPLERS_CONFINED)"
        ),
        libc::EBUSY if !batch_call => format!(
            "the samplers already running leave a CPU of this one too little of the {} ops \
             or {} timer expiries a second all samplers may take on one CPU \
             (MSRBATCH_SAMPLE_MAX_OPS_PER_SEC, MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC; \
             without CAP_SYS_RAWIO, {} and {} for all such samplers together)",
            MSRBATCH_SAMPLE_MAX_OPS_PER_SEC,
            MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC,
            MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED,
            MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC_CONFINED
        ),
        libc::ENOENT if !batch_call || matches!(call, Call::Run) => {
            "the prepared batch is gone (freed, or its descriptor closed)".into()
        }
        libc::ENOTRECOVERABLE => "the ops ran, but their results could not be copied back \
             (the batch's memory became unwritable meanwhile)"
            .into(),
        e => return crate::allowlist::batch_refusal_reason(e).map(str::to_string),
    })
}

/// Why an op was not run, for the per-op statuses that say so: `ETIME`
/// (the CPU's busy budget ran out) and `ECANCELED` (stop-on-error).
pub fn not_run(errno: Errno) -> Option<String> {
    match errno.0 {
        libc::ETIME => Some(format!(
            "not run: the CPU had used up its busy budget, the {} of interrupts-off time one \
             CPU may spend in msrbatch ops at a time, for all callers together \
             (MSRBATCH_MAX_CPU_BUSY_NS; a fifth of the time in the long run): split the \
             batch, or run fewer ops per CPU",
            duration(MSRBATCH_MAX_CPU_BUSY_NS.into())
        )),
        libc::ECANCELED => {
            Some("not run: an earlier op on its CPU failed, with stop-on-error".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(cpu: u32, ops: &[Op]) -> Vec<(u32, Op)> {
        ops.iter().map(|&o| (cpu, o)).collect()
    }

    #[test]
    fn batches_over_a_limit_are_named() {
        let many = on(0, &vec![Op::RdTsc; MSRBATCH_MAX_OPS as usize + 1]);
        let r = check_batch(&many, false).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::E2BIG), None));
        assert_eq!(
            r.text,
            "the batch has 65537 ops, over the 65536 a batch may have (MSRBATCH_MAX_OPS)"
        );
        assert!(check_batch(&many[1..], false).is_ok());
        let r = check_batch(&on(0, &[Op::RdTsc, Op::Delay { ns: 2_000_000 }]), false).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ERANGE), Some(1)));
        assert!(
            r.text.contains("a delay of 2ms is over the 1ms")
                && r.text.contains("MSRBATCH_MAX_DELAY_NS"),
            "{r}"
        );
        let ms = Op::Delay { ns: 1_000_000 };
        let mut ops = on(1, &[ms; 10]);
        ops.push((0, ms));
        assert!(check_batch(&ops, false).is_ok());
        ops.push((1, Op::Delay { ns: 1 }));
        let r = check_batch(&ops, false).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ERANGE), Some(11)));
        assert!(
            r.text.contains(
                "the delays and poll timeouts on CPU 1 add up to 10000001ns, over the 10ms"
            ),
            "{r}"
        );
        // Poll timeouts count as delays; a poll's own timeout is bounded.
        let poll = |timeout_us| {
            Op::Poll(
                crate::Poll::new(crate::PollSource::Tsc)
                    .with_mask(1)
                    .with_timeout_us(timeout_us),
            )
        };
        let mut ops = on(0, &[ms; 8]);
        ops.push((0, poll(crate::MAX_POLL_US)));
        assert!(check_batch(&ops, false).is_ok());
        ops.push((0, poll(1)));
        let r = check_batch(&ops, false).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ERANGE), Some(9)));
        let r = check_batch(&on(0, &[poll(crate::MAX_POLL_US + 1)]), false).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ERANGE), Some(0)));
        assert!(r.text.contains("MSRBATCH_MAX_POLL_NS"), "{r}");
        let r = check_batch(&on(0, &[poll(0)]), false).unwrap_err();
        assert_eq!(r.errno, Errno(libc::EINVAL));
        let r = check_batch(&on(0, &[poll(1)]), true).unwrap_err();
        assert!(r.text.contains("'poll' returns a second value"), "{r}");
        let r = check_batch(&on(0, &[Op::RdTsc, Op::RdTscp]), true).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::EINVAL), Some(1)));
        assert!(r.text.contains("'rdtscp' returns a second value"), "{r}");
        assert!(check_batch(&on(0, &[Op::RdTscp]), false).is_ok());
        assert_eq!(
            check_batch(&[], false).unwrap_err().errno,
            Errno(libc::EINVAL)
        );
    }

    #[test]
    fn samplers_over_a_limit_are_named() {
        let ops = on(0, &[Op::RdTsc]);
        let cfg = |period_ns, ring_pages| SamplerConfig {
            period_ns,
            ring_pages,
            watermark: 0,
        };
        assert!(check_sampler(&ops, &cfg(1_000_000, 16)).is_ok());
        let r = check_sampler(&ops, &cfg(50_000, 16)).unwrap_err();
        assert_eq!(r.errno, Errno(libc::ERANGE));
        assert!(r.text.contains("a period of 50us is not from 100us"), "{r}");
        let r = check_sampler(&ops, &cfg(1_000_000, 3)).unwrap_err();
        assert_eq!(
            (r.errno, r.text.as_str()),
            (
                Errno(libc::EINVAL),
                "3 ring pages: the ring's pages must be a power of two"
            )
        );
        let r = check_sampler(&ops, &cfg(1_000_000, 2048)).unwrap_err();
        assert_eq!(r.errno, Errno(libc::E2BIG));
        assert!(r.text.contains("over the 1024"), "{r}");
        let r = check_sampler(&on(2, &[Op::RdTsc; 65]), &cfg(1_000_000_000, 16)).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::E2BIG), Some(64)));
        assert!(r.text.contains("CPU 2 has 65 ops, over the 64"), "{r}");
        let r = check_sampler(&on(0, &[Op::RdTsc; 10]), &cfg(100_000, 16)).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ERANGE), Some(0)));
        assert!(
            r.text.contains("100000 ops a second, over the 64000"),
            "{r}"
        );
        let r = check_sampler(&on(0, &[Op::RdCr4]), &cfg(1_000_000, 16)).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::EINVAL), Some(0)));
    }

    /// The cases: each refusal the kernel makes gets words naming
    /// the limit, from the checks where one matches, from the table
    /// otherwise.
    #[test]
    fn kernel_refusals_in_words() {
        let ops = on(9999, &[Op::RdTsc]);
        let t = explain(Call::Batch, &ops, false, libc::ENODEV, Some(0)).unwrap();
        assert!(t.contains("CPU 9999 does not exist"), "{t}");
        let ops = on(0, &[Op::Delay { ns: 2_000_000 }]);
        let t = explain(Call::Batch, &ops, false, libc::ERANGE, Some(0)).unwrap();
        assert!(t.contains("MSRBATCH_MAX_DELAY_NS"), "{t}");
        let t = explain(Call::Batch, &ops, false, libc::ETIMEDOUT, None).unwrap();
        assert!(t.contains("20ms (MSRBATCH_SYNC_TIMEOUT_NS)"), "{t}");
        let t = explain(Call::Prepare, &ops, false, libc::ENOSPC, None).unwrap();
        assert!(t.contains("64 prepared batches"), "{t}");
        let cfg = SamplerConfig {
            period_ns: 1_000_000,
            ring_pages: 3,
            watermark: 0,
        };
        let ops = on(0, &[Op::RdTsc]);
        let t = explain(Call::Sample(&cfg), &ops, false, libc::EINVAL, None).unwrap();
        assert!(t.contains("power of two"), "{t}");
        let t = not_run(Errno(libc::ETIME)).unwrap();
        assert!(
            t.contains("20ms") && t.contains("MSRBATCH_MAX_CPU_BUSY_NS"),
            "{t}"
        );
        assert_eq!(explain(Call::Batch, &ops, false, libc::EFAULT, None), None);
        assert!(explain(Call::Batch, &ops, false, libc::EACCES, Some(0)).is_some());
        // The hints a user without CAP_SYS_RAWIO meets.
        let t = explain(Call::Sample(&cfg), &ops, false, libc::EACCES, Some(0)).unwrap();
        assert!(t.contains("allowlist"), "{t}");
        let t = explain(Call::Grant, &[], false, libc::EPERM, None).unwrap();
        assert!(t.contains("'allow pce'"), "{t}");
        let t = explain(Call::RestoreOnClose, &[], false, libc::EPERM, None).unwrap();
        assert!(t.contains("needs CAP_SYS_RAWIO"), "{t}");
        assert_eq!(explain(Call::Grant, &[], false, libc::ENOENT, None), None);
    }

    #[test]
    fn cpus_that_do_not_exist() {
        let ops = [(0, Op::RdTsc), (1, Op::RdTsc), (9999, Op::RdTsc)];
        assert!(check_cpus(&ops[..2], &[0, 1, 2, 3]).is_ok());
        let r = check_cpus(&ops, &[0, 1, 2, 3, 8]).unwrap_err();
        assert_eq!((r.errno, r.index), (Errno(libc::ENODEV), Some(2)));
        assert_eq!(
            r.text,
            "CPU 9999 does not exist: this machine's CPUs are 0-3,8"
        );
    }

    #[test]
    fn durations_in_words() {
        assert_eq!(duration(1_000_000), "1ms");
        assert_eq!(duration(20_000_000), "20ms");
        assert_eq!(duration(60_000_000_000), "60s");
        assert_eq!(duration(100_000), "100us");
        assert_eq!(duration(10_000_001), "10000001ns");
    }
}
