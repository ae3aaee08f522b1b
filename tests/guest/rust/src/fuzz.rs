// SPDX-License-Identifier: GPL-2.0
//! `msrbatch-fuzz`: random and mutated ioctls against /dev/msrbatch from
//! several threads at once.
//!
//! Headers with garbage versions, flags, reserved fields and counts; ops with
//! every op code (and unknown ones), flags, CPUs (and nonexistent ones) and
//! operands; pointers that are NULL, unmapped, kernel addresses, misaligned,
//! or end at an unmapped page; unknown ioctl numbers; PCE grants and revokes;
//! prepared batches of random ops started as samplers with random (often
//! invalid) periods, ring sizes, watermarks, flags and handles, their rings
//! read, stopped, unmapped and closed in random order while other threads run
//! batches.
//! Writes go only to IA32_TSC_AUX, and every batch that writes it ends each
//! CPU's sequence with a write of the original value (batches with writes
//! never stop on error, so that restore always runs).
//!
//! Checks: only the errnos the ABI documents; on success every status is 0,
//! -EIO, -ECANCELED or -ETIME and `nr_failed` counts them; a rejected batch leaves the
//! ops untouched; IA32_PAT always reads the same; TSC_AUX names the CPU
//! outside write batches. Prints the figures and KTAP (`tally.rs`).
//!
//! Run without CAP_SYS_RAWIO (as a member of the node's group, with an
//! allowlist loaded that lists IA32_PAT and IA32_TSC_AUX), each thread learns
//! the list its descriptor got at open (the node's text read before and after
//! the open, equal) and reopens now and then, so that a root process may
//! reload lists meanwhile. Writes then also go to read-only and unlisted
//! MSRs, and the checks become: a batch with an op outside the rules never
//! runs and is refused with EACCES or EROFS naming exactly the first such op;
//! PCE grants follow `allow pce`; and, where TSC_AUX's bits 11:0 are outside
//! its write mask, TSC_AUX names its CPU even in write batches (a masked
//! write changes only the bits inside the mask).
//!
//! With `--msr-safe`, the msr-safe personality's nodes instead
//! (`fuzz_msr_safe.rs`).

mod caps;
mod fuzz_msr_safe;
mod tally;
use msrbatch::allowlist::{self, Allowlist, Extras};
use msrbatch_sys as sys;
use msrbatch_sys::uapi::*;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tally::Tally;

const PAT: u32 = 0x277;
const TSC_AUX: u32 = 0xc000_0103;
const SENTINEL: i32 = 0x5eed;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Default)]
struct Stats {
    ioctls: AtomicU64,
    ops: AtomicU64,
    /// Samplers started, and their rings' records checked.
    samplers: AtomicU64,
    /// Batches prepared and kept (against the memory limits).
    prepared: AtomicU64,
    records: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    problems: Mutex<Vec<String>>,
}

impl Stats {
    /// Prints the errors by errno and the problems found, the first line
    /// prefixed `what`; whether there was no problem.
    fn report(&self, what: &str) -> bool {
        let errors = self.errors.lock().unwrap();
        println!(
            "{what}: errors by errno: {}",
            errors
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let problems = self.problems.lock().unwrap();
        for p in problems.iter() {
            println!("# {p}");
        }
        problems.is_empty()
    }

    fn problem(&self, p: String) {
        let mut v = self.problems.lock().unwrap();
        if v.len() < 20 {
            v.push(p);
        }
    }
}

/// Pointer targets a header's `ops` can point at.
struct Memory {
    /// An unmapped page.
    hole: u64,
    /// The last bytes of a mapped page followed by an unmapped one.
    edge_end: u64,
}

fn memory() -> Memory {
    // SAFETY: Plain anonymous mappings; the pages unmapped again are only
    // ever passed to the kernel, never touched here.
    unsafe {
        let page = 4096usize;
        let p = libc::mmap(
            std::ptr::null_mut(),
            3 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(p != libc::MAP_FAILED, "mmap");
        let base = p as u64;
        libc::munmap((base + page as u64) as *mut libc::c_void, page);
        Memory {
            hole: base + page as u64,
            edge_end: base + page as u64,
        }
    }
}

/// Whether this thread may use the device without an allowlist.
fn has_rawio() -> bool {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 17) != 0)
}

/// Opens the device; without CAP_SYS_RAWIO, also the allowlist it got at
/// open (the list in force before and after the open, when they agree).
fn open_device() -> (msrbatch::Device, Option<Allowlist>) {
    let read = || {
        let text = allowlist::read(allowlist::ALLOWLIST_PATH).expect("read the allowlist");
        Allowlist::parse(&text).expect("the module's allowlist text parses")
    };
    if has_rawio() {
        return (msrbatch::Device::open().expect("open"), None);
    }
    loop {
        let before = read();
        let dev = msrbatch::Device::open().expect("open");
        if read() == before {
            return (dev, Some(before));
        }
    }
}

/// What the module says about a valid op under `rules`: `Some(errno)` if
/// the op is outside them.
fn violation(rules: &Allowlist, op: &msrbatch_op) -> Option<i32> {
    match u32::from(op.op) {
        MSRBATCH_OP_RDMSR => rules.mask(op.reg).is_none().then_some(libc::EACCES),
        MSRBATCH_OP_WRMSR | MSRBATCH_OP_RMWMSR => match rules.mask(op.reg) {
            None => Some(libc::EACCES),
            Some(0) => Some(libc::EROFS),
            Some(_) => None,
        },
        MSRBATCH_OP_RDPMC => (!rules.extras().has(Extras::RDPMC)).then_some(libc::EACCES),
        MSRBATCH_OP_RDCR4 => (!rules.extras().has(Extras::RDCR4)).then_some(libc::EACCES),
        // A poll reads what a read of its source may.
        MSRBATCH_OP_POLL => {
            let flags = u32::from(op.flags);
            if flags & MSRBATCH_POLL_F_TSC != 0 {
                None
            } else if flags & MSRBATCH_POLL_F_RDPMC != 0 {
                (!rules.extras().has(Extras::RDPMC)).then_some(libc::EACCES)
            } else {
                rules.mask(op.reg).is_none().then_some(libc::EACCES)
            }
        }
        _ => None,
    }
}

/// A poll's flags and operands: a source (mostly an MSR: IA32_PAT, which
/// never changes, TSC_AUX or a random one; a counter; the TSC), a mask (0:
/// it times out; one TSC bit: it changes in time; all ones), sometimes a
/// value to wait for, a timeout of mostly a few microseconds (the whole 2 ms
/// now and then), and COUNT at random.
fn random_poll(r: &mut Rng, op: &mut msrbatch_op) {
    let (source, reg) = match r.below(6) {
        0 => (MSRBATCH_POLL_F_TSC, 0),
        1 => (MSRBATCH_POLL_F_RDPMC, r.next() as u32),
        2 => (0, TSC_AUX),
        3 => (0, r.next() as u32),
        _ => (0, PAT),
    };
    op.reg = reg;
    op.arg[0] = match r.below(4) {
        0 => 0,
        1 => 1 << r.below(20),
        _ => u64::MAX,
    };
    let mut flags = source;
    if r.chance(20) {
        flags |= MSRBATCH_POLL_F_EQUAL;
        op.arg[1] = r.next() & op.arg[0];
    }
    if r.chance(50) {
        flags |= MSRBATCH_POLL_F_COUNT;
    }
    let us = if r.chance(5) {
        MSRBATCH_MAX_POLL_NS / 1000
    } else {
        1 + r.below(20) as u32
    };
    op.flags = (flags | (us << MSRBATCH_POLL_TIMEOUT_SHIFT)) as u16;
}

/// A random op; with `mutate`, one of its fields is likely invalid. Under
/// `rules`, writes also go to IA32_PAT and to random MSRs, which the rules
/// must refuse.
fn random_op(
    r: &mut Rng,
    ncpus: u32,
    allow_writes: bool,
    mutate: bool,
    rules: Option<&Allowlist>,
) -> msrbatch_op {
    let mut op = msrbatch_op {
        status: SENTINEL,
        ..Default::default()
    };
    op.op = match r.below(if mutate { 6 } else { 1 << 40 }) {
        0 => 0,
        1 => (MSRBATCH_OP_MAX + 1 + r.below(100) as u32) as u16,
        2 => r.next() as u16,
        _ => (1 + r.below(u64::from(MSRBATCH_OP_MAX))) as u16,
    };
    if !allow_writes && matches!(u32::from(op.op), MSRBATCH_OP_WRMSR | MSRBATCH_OP_RMWMSR) {
        op.op = MSRBATCH_OP_RDMSR as u16;
    }
    op.cpu = if mutate && r.chance(20) {
        ncpus + r.below(5000) as u32
    } else {
        r.below(u64::from(ncpus)) as u32
    };
    if mutate && r.chance(20) {
        op.flags = r.next() as u16;
    }
    let garbage = mutate && r.chance(20);
    match u32::from(op.op) {
        MSRBATCH_OP_RDMSR => {
            op.reg = match r.below(4) {
                0 => PAT,
                1 => TSC_AUX,
                _ => r.next() as u32,
            }
        }
        MSRBATCH_OP_WRMSR | MSRBATCH_OP_RMWMSR => {
            op.reg = match (rules.is_some(), r.below(10)) {
                (true, 0) => PAT,
                (true, 1) => r.next() as u32,
                _ => TSC_AUX,
            };
            op.arg[0] = r.next() & 0xffff_ffff;
            if u32::from(op.op) == MSRBATCH_OP_RMWMSR {
                op.arg[1] = r.next() & 0xffff_ffff;
            }
        }
        MSRBATCH_OP_RDPMC => op.reg = r.next() as u32,
        MSRBATCH_OP_CPUID => {
            op.reg = r.next() as u32;
            op.arg[0] = r.next() & 0xffff_ffff;
        }
        MSRBATCH_OP_DELAY => {
            op.arg[0] = if mutate && r.chance(20) {
                r.next()
            } else {
                r.below(2000)
            }
        }
        MSRBATCH_OP_POLL => {
            let flags = op.flags;
            random_poll(r, &mut op);
            if mutate && flags != 0 {
                op.flags = flags;
            }
        }
        _ => {}
    }
    if garbage {
        op.reg ^= r.next() as u32;
        op.arg[r.below(2) as usize] ^= r.next();
    }
    // Under rules, most ops outside them become RDTSCs, so that about half of
    // the batches hold none and run.
    if let Some(l) = rules {
        if !mutate && violation(l, &op).is_some() && r.below(8) != 0 {
            op = msrbatch_op {
                op: MSRBATCH_OP_RDTSC as u16,
                cpu: op.cpu,
                status: SENTINEL,
                ..Default::default()
            };
        }
    }
    op
}

fn expected_errno(e: i32, restricted: bool) -> bool {
    (restricted && [libc::EACCES, libc::EROFS].contains(&e))
        || [
            libc::EINVAL,
            libc::E2BIG,
            libc::EFAULT,
            libc::EOPNOTSUPP,
            libc::ENODEV,
            libc::ENXIO,
            libc::ERANGE,
            libc::EPROTONOSUPPORT,
            libc::ENOTTY,
            // A MSRBATCH_F_SYNC_START batch whose CPUs did not all arrive in time.
            libc::ETIMEDOUT,
        ]
        .contains(&e)
}

fn errno_name(e: i32) -> String {
    msrbatch::Errno(e).name()
}

fn fuzz_thread(seed: u64, ncpus: u32, budget: u64, confine: bool, stop: &AtomicBool, st: &Stats) {
    if confine {
        // Credentials are per thread: this one alone opens confined
        // descriptors, under the allowlist in force, next to root's threads.
        caps::drop_rawio();
    }
    let (mut dev, mut rules) = open_device();
    let mut kept: Vec<(u32, usize)> = Vec::new();
    let mem = memory();
    let mut r = Rng(seed | 1);
    let mut granted = false;
    let mut samplers: Vec<OpenSampler> = Vec::new();
    for n in 0..budget {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if rules.is_some() && n % 500 == 499 {
            // A new descriptor, with the list in force now.
            if granted {
                let _ = sys::pce_revoke(dev.file().as_fd());
                granted = false;
            }
            (dev, rules) = open_device();
            kept.clear();
        }
        let rules = rules.as_ref();
        let fd = dev.file().as_fd();
        st.ioctls.fetch_add(1, Ordering::Relaxed);
        match r.below(100) {
            0 => {
                // Unknown or mis-sized ioctl numbers.
                let cmd = match r.below(3) {
                    0 => r.next() as u32,
                    1 => {
                        (0xb9 << 8)
                            | r.below(256) as u32
                            | ((r.below(4) as u32) << 30)
                            | ((r.below(0x4000) as u32) << 16)
                    }
                    _ => 0x5401,
                };
                if cmd == MSRBATCH_IOC_BATCH
                    || cmd == MSRBATCH_IOC_INFO
                    || cmd == MSRBATCH_IOC_PCE_GRANT
                    || cmd == MSRBATCH_IOC_PCE_REVOKE
                {
                    continue;
                }
                let mut buf = [0u8; 256];
                // SAFETY: `buf` covers any size field of 0xB9 commands we know
                // (checked by `ioctl_ptr`); unknown commands must not touch it.
                let ret = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, buf.as_mut_ptr()) };
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if ret == 0 || e != libc::ENOTTY {
                    st.problem(format!(
                        "ioctl {cmd:#x}: ret {ret}, errno {}",
                        errno_name(e)
                    ));
                }
                *st.errors.lock().unwrap().entry(errno_name(e)).or_default() += 1;
                continue;
            }
            1 => {
                let r2 = if granted {
                    sys::pce_revoke(fd)
                } else {
                    sys::pce_grant(fd, 0)
                };
                let refused = rules.is_some_and(|l| !l.extras().has(Extras::PCE));
                if refused {
                    if r2.as_ref().err().and_then(|e| e.raw_os_error()) != Some(libc::EPERM) {
                        st.problem(format!("PCE grant without 'allow pce': {r2:?}"));
                    }
                } else if r2.is_ok() {
                    granted = !granted;
                } else {
                    st.problem(format!(
                        "PCE {}: {r2:?}",
                        if granted { "revoke" } else { "grant" }
                    ));
                }
                continue;
            }
            2 => {
                if sys::info(fd).map(|i| i.version).ok() != Some(MSRBATCH_ABI_VERSION) {
                    st.problem("INFO failed".into());
                }
                continue;
            }
            3 | 4 => {
                fuzz_sampler(&mut r, fd, ncpus, rules, &mut samplers, st);
                continue;
            }
            5 | 6 => {
                // A burst, so that the limits are reached between reopens.
                for _ in 0..1 + r.below(24) {
                    fuzz_prepare(&mut r, fd, ncpus, rules.is_some(), &mut kept, st);
                }
                continue;
            }
            _ => {}
        }
        // A batch.
        let writes = r.chance(20);
        let n = match r.below(2000) {
            0..=99 => 0,
            100 => 1 + r.below(4096) as usize,
            _ => 1 + r.below(24) as usize,
        };
        // Most batches are valid (so that ops run); some carry one mutated op.
        let bad = if r.chance(25) {
            r.below(n as u64) as usize
        } else {
            usize::MAX
        };
        let mut ops: Vec<msrbatch_op> = (0..n)
            .map(|i| random_op(&mut r, ncpus, writes, i == bad, rules))
            .collect();
        if writes {
            // Restore TSC_AUX (Linux keeps the CPU number there) at the end of
            // every CPU's sequence that wrote it.
            let mut cpus: Vec<u32> = ops
                .iter()
                .filter(|o| matches!(u32::from(o.op), MSRBATCH_OP_WRMSR | MSRBATCH_OP_RMWMSR))
                .map(|o| o.cpu)
                .collect();
            cpus.sort_unstable();
            cpus.dedup();
            for c in cpus {
                ops.push(msrbatch_op {
                    op: MSRBATCH_OP_WRMSR as u16,
                    cpu: c,
                    reg: TSC_AUX,
                    arg: [u64::from(c), 0],
                    status: SENTINEL,
                    ..Default::default()
                });
            }
        }
        let mut hdr = msrbatch_batch {
            version: MSRBATCH_ABI_VERSION,
            ..Default::default()
        };
        if !writes && r.chance(30) {
            hdr.flags = MSRBATCH_F_STOP_ON_ERROR;
        }
        if r.chance(3) {
            match r.below(4) {
                0 => hdr.version = r.next() as u32,
                1 => hdr.flags = r.next() as u32,
                // An output field: whatever the caller leaves there is ignored.
                2 => hdr.out_flags = r.next() as u32,
                _ => hdr.reserved0 = r.next() | 1,
            }
            if writes {
                hdr.flags &= !MSRBATCH_F_STOP_ON_ERROR;
            }
        }
        let ptr_kind = r.below(100);
        hdr.ops = match ptr_kind {
            0 => 0,
            1 => mem.hole,
            2 => 0xffff_8880_0000_0000 + (r.next() & 0xffff_f000),
            3 => mem.edge_end - 48,
            4 => r.next() | (1 << 63),
            _ => ops.as_mut_ptr() as u64,
        };
        hdr.nr_ops = match r.below(50) {
            0 => MSRBATCH_MAX_OPS + 1 + r.below(1000) as u32,
            1 => r.next() as u32,
            _ => ops.len() as u32,
        };
        let valid_memory = hdr.ops == ops.as_mut_ptr() as u64 && hdr.nr_ops as usize <= ops.len();
        if !valid_memory && hdr.ops == ops.as_mut_ptr() as u64 {
            // Too many ops for our buffer: the kernel must refuse the count
            // before it touches memory past the end; make sure it would.
            if hdr.nr_ops <= MSRBATCH_MAX_OPS {
                hdr.nr_ops = ops.len() as u32;
            }
        }
        if ptr_kind == 3 && hdr.nr_ops == 1 {
            // Fully mapped single op at the page edge: it could really run.
            continue;
        }
        // SAFETY: `hdr.ops` is either our own `ops` with `nr_ops` within it,
        // or memory the kernel cannot access (NULL, unmapped, kernel, a random
        // address above the user range or unmapped, a page edge with the op
        // crossing into the hole); a huge `nr_ops` is refused before any copy.
        let before = ops.clone();
        // A write batch changes TSC_AUX and puts it back at the end of each
        // CPU's sequence, interrupts off: no other batch can see it changed,
        // unless the CPU's busy credit runs out in between (-ETIME for the
        // rest, the put-back included; the credit is per CPU, shared by all
        // callers). So write batches run alone, and put TSC_AUX back
        // themselves when that happens, before other batches run again.
        let _write_guard;
        let _read_guard;
        if writes {
            _write_guard = AUX_LOCK.write().unwrap_or_else(|e| e.into_inner());
        } else {
            _read_guard = AUX_LOCK.read().unwrap_or_else(|e| e.into_inner());
        }
        let res = unsafe { sys::batch_raw(fd, &mut hdr) };
        if writes && res.is_ok() && valid_memory {
            put_tsc_aux_back(fd, &ops[..hdr.nr_ops as usize], st);
        }
        match res {
            Ok(()) => {
                if !valid_memory {
                    // Random addresses may happen to be mapped user memory of
                    // ours (never written: that would need a write batch whose
                    // array we own). Count it, check nothing.
                    if hdr.ops != ops.as_mut_ptr() as u64 {
                        continue;
                    }
                }
                st.ops.fetch_add(u64::from(hdr.nr_ops), Ordering::Relaxed);
                if let Some(i) =
                    rules.and_then(|l| ops.iter().position(|o| violation(l, o).is_some()))
                {
                    st.problem(format!(
                        "op {i} (code {}, MSR {:#x}) is outside the rules, yet the batch ran",
                        ops[i].op, ops[i].reg
                    ));
                }
                if hdr.out_flags != MSRBATCH_OUT_RAN {
                    st.problem(format!("batch ran but out_flags is {:#x}", hdr.out_flags));
                }
                let ran = &ops[..hdr.nr_ops as usize];
                // Under rules that keep TSC_AUX's bits 11:0, they name the CPU
                // even in batches that write it.
                let aux_cpu_fixed = rules
                    .and_then(|l| l.mask(TSC_AUX))
                    .is_some_and(|m| m & 0xfff == 0);
                let failed = ran.iter().filter(|o| o.status != 0).count() as u32;
                if failed != hdr.nr_failed {
                    st.problem(format!(
                        "nr_failed {} but {failed} statuses are not 0",
                        hdr.nr_failed
                    ));
                }
                for o in ran {
                    let poll = u32::from(o.op) == MSRBATCH_OP_POLL;
                    let documented = [0, -libc::EIO, -libc::ECANCELED, -libc::ETIME]
                        .contains(&o.status)
                        || (poll && o.status == -libc::ETIMEDOUT);
                    if !documented {
                        st.problem(format!("op {} status {}", o.op, o.status));
                    }
                    // A poll of IA32_PAT ends with its value (changed or not).
                    if poll
                        && o.reg == PAT
                        && u32::from(o.flags) & (MSRBATCH_POLL_F_TSC | MSRBATCH_POLL_F_RDPMC) == 0
                        && [0, -libc::ETIMEDOUT].contains(&o.status)
                        && o.val[0] != PAT_VALUE.load(Ordering::Relaxed)
                    {
                        st.problem(format!(
                            "poll of PAT ended with {:#x} on cpu {}",
                            o.val[0], o.cpu
                        ));
                    }
                    if u32::from(o.op) == MSRBATCH_OP_RDMSR && o.status == 0 {
                        if o.reg == PAT && o.val[0] != PAT_VALUE.load(Ordering::Relaxed) {
                            st.problem(format!("PAT read {:#x} on cpu {}", o.val[0], o.cpu));
                        }
                        if o.reg == TSC_AUX
                            && (!writes || aux_cpu_fixed)
                            && o.val[0] & 0xfff != u64::from(o.cpu)
                        {
                            st.problem(format!("TSC_AUX {:#x} on cpu {}", o.val[0], o.cpu));
                        }
                    }
                    if let (Some(mask), MSRBATCH_OP_RMWMSR, 0) =
                        (rules.and_then(|l| l.mask(o.reg)), u32::from(o.op), o.status)
                    {
                        if (o.val[0] ^ o.val[1]) & !mask != 0 {
                            st.problem(format!(
                                "RMW of {:#x} under mask {mask:#x}: {:#x} -> {:#x}",
                                o.reg, o.val[0], o.val[1]
                            ));
                        }
                    }
                }
            }
            Err(e) => {
                let e = e.raw_os_error().unwrap_or(0);
                *st.errors.lock().unwrap().entry(errno_name(e)).or_default() += 1;
                if let (Some(l), libc::EACCES | libc::EROFS, true) = (rules, e, valid_memory) {
                    let first = ops[..hdr.nr_ops as usize]
                        .iter()
                        .enumerate()
                        .find_map(|(i, o)| violation(l, o).map(|v| (i as u32, v)));
                    if first != Some((hdr.err_index, e)) {
                        st.problem(format!(
                            "refused with {} at op {}, but the first op outside the rules is {first:?}",
                            errno_name(e),
                            hdr.err_index
                        ));
                    }
                }
                if !expected_errno(e, rules.is_some()) {
                    st.problem(format!(
                        "unexpected errno {} (version {:#x} flags {:#x} nr_ops {})",
                        errno_name(e),
                        hdr.version,
                        hdr.flags,
                        hdr.nr_ops
                    ));
                }
                if e != libc::EFAULT && ops != before {
                    st.problem(format!(
                        "rejected batch ({}) changed the ops array",
                        errno_name(e)
                    ));
                }
            }
        }
    }
    if granted {
        let _ = sys::pce_revoke(dev.file().as_fd());
    }
}

/// The samplers' limits (`Documentation/sampling.md`), as the fuzzer's model
/// of every sampler in the system: all of them are this process's (the
/// fuzzer runs alone), made and released under the model's lock, so the
/// errno of each start is known before it is asked for.
#[derive(Default)]
struct SamplerModel {
    samplers: u32,
    confined: u32,
    /// By CPU: (all samplers', confined samplers') ops and expiries a second.
    cpus: BTreeMap<u32, [(u64, u64); 2]>,
}

static SAMPLERS: Mutex<SamplerModel> = Mutex::new(SamplerModel {
    samplers: 0,
    confined: 0,
    cpus: BTreeMap::new(),
});

/// What a sampler holds of the model: (CPU, ops/s, expiries/s) per lane.
#[derive(Clone, Default)]
struct Held {
    confined: bool,
    lanes: Vec<(u32, u64, u64)>,
}

impl SamplerModel {
    /// The errno a start of `held` gets now (after its request checks): None
    /// if it starts.
    fn verdict(&self, held: &Held) -> Option<i32> {
        let (ops_cap, exp_cap) = if held.confined {
            (
                u64::from(MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED),
                u64::from(MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC_CONFINED),
            )
        } else {
            (
                u64::from(MSRBATCH_SAMPLE_MAX_OPS_PER_SEC),
                u64::from(MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC),
            )
        };
        if held.lanes.iter().any(|&(_, ops, _)| ops > ops_cap) {
            return Some(libc::ERANGE);
        }
        if self.samplers >= MSRBATCH_MAX_SAMPLERS
            || (held.confined && self.confined >= MSRBATCH_MAX_SAMPLERS_CONFINED)
        {
            return Some(libc::ENOSPC);
        }
        let busy = held.lanes.iter().any(|&(cpu, ops, exp)| {
            let [all, conf] = self.cpus.get(&cpu).copied().unwrap_or_default();
            all.0 + ops > u64::from(MSRBATCH_SAMPLE_MAX_OPS_PER_SEC)
                || all.1 + exp > u64::from(MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC)
                || (held.confined && (conf.0 + ops > ops_cap || conf.1 + exp > exp_cap))
        });
        busy.then_some(libc::EBUSY)
    }

    /// Adds (`add`) or takes away what `held` holds.
    fn count(&mut self, held: &Held, add: bool) {
        let f = |a: u64, b: u64| if add { a + b } else { a - b };
        self.samplers = f(self.samplers.into(), 1) as u32;
        self.confined = f(self.confined.into(), held.confined.into()) as u32;
        for &(cpu, ops, exp) in &held.lanes {
            let e = self.cpus.entry(cpu).or_default();
            for (i, slot) in e.iter_mut().enumerate() {
                if i == 0 || held.confined {
                    *slot = (f(slot.0, ops), f(slot.1, exp));
                }
            }
        }
    }
}

/// The errno the request checks of `MSRBATCH_IOC_SAMPLE` give `req` on `ops`
/// (prepared under `handle`), in the kernel's order, and else what the
/// sampler would hold.
fn sample_checks(
    req: &msrbatch_sample_req,
    handle: u32,
    ops: &[msrbatch_op],
    confined: bool,
) -> Result<Held, i32> {
    if req.version != MSRBATCH_ABI_VERSION || req.flags != 0 || req.reserved != 0 {
        return Err(libc::EINVAL);
    }
    let min = u64::from(MSRBATCH_SAMPLE_MIN_PERIOD_NS);
    if !(min..=MSRBATCH_SAMPLE_MAX_PERIOD_NS).contains(&req.period_ns) {
        return Err(libc::ERANGE);
    }
    if !req.ring_pages.is_power_of_two() {
        return Err(libc::EINVAL);
    }
    if req.ring_pages > MSRBATCH_SAMPLE_MAX_RING_PAGES {
        return Err(libc::E2BIG);
    }
    if req.handle != handle {
        return Err(libc::ENOENT);
    }
    let sampleable = [
        MSRBATCH_OP_RDMSR,
        MSRBATCH_OP_RDPMC,
        MSRBATCH_OP_RDTSC,
        MSRBATCH_OP_RDTSCP,
        MSRBATCH_OP_CPUID,
    ];
    if ops.iter().any(|o| !sampleable.contains(&u32::from(o.op))) {
        return Err(libc::EINVAL);
    }
    let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    for o in ops {
        *per_cpu.entry(o.cpu).or_default() += 1;
    }
    if per_cpu
        .values()
        .any(|&n| n > u64::from(MSRBATCH_SAMPLE_MAX_OPS))
    {
        return Err(libc::E2BIG);
    }
    if u64::from(req.watermark) >= u64::from(req.ring_pages) * 4096 {
        return Err(libc::EINVAL);
    }
    let per_sec = |n: u64| (n * 1_000_000_000).div_ceil(req.period_ns);
    Ok(Held {
        confined,
        lanes: per_cpu
            .into_iter()
            .map(|(cpu, n)| (cpu, per_sec(n), per_sec(1)))
            .collect(),
    })
}

/// A sampler the fuzzer keeps for a while, and maybe its ring; it counts in
/// the model until both are gone.
struct OpenSampler {
    fd: Option<std::os::fd::OwnedFd>,
    ring: Option<sys::SharedWords>,
    held: Held,
    /// Shorter than 10 ms: a load on the timers that is not kept long.
    fast: bool,
}

impl Drop for OpenSampler {
    fn drop(&mut self) {
        let mut m = SAMPLERS.lock().unwrap_or_else(|e| e.into_inner());
        // Closed and unmapped (the sampler released) before the model says so.
        drop(self.ring.take());
        drop(self.fd.take());
        m.count(&self.held, false);
    }
}

/// The limits of a confined descriptor's prepared batches
/// (`Documentation/security.md`, "Limits of a confined descriptor"): how
/// many, and the memory they hold together.
const MAX_PREPARED_CONFINED: usize = 16;
const MAX_PREPARED_BYTES_CONFINED: usize = 1 << 20;

/// What a prepared batch of `n` ops holds as those limits count it: its ops
/// and its results, whole pages.
fn prepared_bytes(n: usize) -> usize {
    n * size_of::<msrbatch_op>() + (n * size_of::<msrbatch_result>()).next_multiple_of(4096)
}

/// Prepares a batch of RDTSCs of random size (up to 4096 ops) and keeps it,
/// or unprepares one kept: the per-descriptor count and memory limits must
/// refuse exactly where documented (`ENOSPC` beyond 16 batches confined, 64
/// otherwise; `EDQUOT` beyond 1 MiB confined).
fn fuzz_prepare(
    r: &mut Rng,
    fd: std::os::fd::BorrowedFd<'_>,
    ncpus: u32,
    confined: bool,
    kept: &mut Vec<(u32, usize)>,
    st: &Stats,
) {
    if !kept.is_empty() && r.chance(15) {
        let (h, _) = kept.swap_remove(r.below(kept.len() as u64) as usize);
        if let Err(e) = sys::unprepare(fd, h) {
            st.problem(format!("UNPREPARE of kept handle {h}: {e}"));
        }
        return;
    }
    let n = if r.chance(30) {
        1 + r.below(u64::from(MSRBATCH_MAX_OPS).min(4096)) as usize
    } else {
        1 + r.below(64) as usize
    };
    let ops: Vec<msrbatch_op> = (0..n)
        .map(|_| msrbatch_op {
            op: MSRBATCH_OP_RDTSC as u16,
            cpu: r.below(u64::from(ncpus)) as u32,
            ..Default::default()
        })
        .collect();
    let bytes = prepared_bytes(n);
    let held: usize = kept.iter().map(|&(_, b)| b).sum();
    let most = if confined {
        MAX_PREPARED_CONFINED
    } else {
        MSRBATCH_MAX_PREPARED as usize
    };
    let expected = if kept.len() >= most {
        Some(libc::ENOSPC)
    } else if confined && held + bytes > MAX_PREPARED_BYTES_CONFINED {
        Some(libc::EDQUOT)
    } else {
        None
    };
    let mut p = msrbatch_prepare {
        version: MSRBATCH_ABI_VERSION,
        ..Default::default()
    };
    let got = sys::prepare(fd, &mut p, &ops).map_err(|e| e.raw_os_error().unwrap_or(0));
    if let Err(e) = got {
        *st.errors.lock().unwrap().entry(errno_name(e)).or_default() += 1;
    }
    if got.err() != expected {
        st.problem(format!(
            "PREPARE of {n} ops ({bytes} bytes) holding {} batches of {held} bytes{}: {} where {} was due",
            kept.len(),
            if confined { ", confined" } else { "" },
            got.err().map_or("success".into(), errno_name),
            expected.map_or("success".into(), errno_name)
        ));
    }
    if got.is_ok() {
        st.prepared.fetch_add(1, Ordering::Relaxed);
        kept.push((p.handle, bytes));
    }
}

/// Walks a ring's unread records: each must be well formed (the ABI's
/// rules: 16-byte multiples, within head, a known type, a SAMPLE's size
/// matching its op count, an existing CPU). Consumes them.
fn check_ring(ring: &sys::SharedWords, ncpus: u32, st: &Stats) {
    const HEAD: usize = 64 / 8;
    const TAIL: usize = 128 / 8;
    let (Some(data_size), Some(head), Some(mut tail)) =
        (ring.load(2), ring.load_acquire(HEAD), ring.load(TAIL))
    else {
        return st.problem("ring: control page unreadable".into());
    };
    if !data_size.is_power_of_two() || head.wrapping_sub(tail) > data_size {
        return st.problem(format!("ring: size {data_size}, head {head}, tail {tail}"));
    }
    while tail < head {
        let at = 4096 / 8 + ((tail & (data_size - 1)) / 8) as usize;
        let (Some(w0), Some(w1)) = (ring.load(at), ring.load(at + 1)) else {
            return st.problem("ring: record outside the mapping".into());
        };
        let (ty, cpu, size, nr) = (w0 as u32, (w0 >> 32) as u32, w1 as u32, (w1 >> 32) as u32);
        let ok = size >= 16
            && size % 16 == 0
            && u64::from(size) <= head - tail
            && ty <= MSRBATCH_REC_OFFLINE
            && cpu < ncpus
            && (ty != MSRBATCH_REC_SAMPLE || size == 48 + 16 * nr)
            && (ty == MSRBATCH_REC_SAMPLE || nr == 0);
        if !ok {
            return st.problem(format!(
                "ring: bad record type {ty} cpu {cpu} size {size} nr {nr}"
            ));
        }
        tail += u64::from(size);
        st.records.fetch_add(1, Ordering::Relaxed);
    }
    ring.store_release(TAIL, tail);
}

/// Prepares a random batch and starts a sampler on it with a random
/// request; keeps up to four samplers, reading, stopping, unmapping and
/// closing them at random.
fn fuzz_sampler(
    r: &mut Rng,
    fd: std::os::fd::BorrowedFd<'_>,
    ncpus: u32,
    rules: Option<&Allowlist>,
    samplers: &mut Vec<OpenSampler>,
    st: &Stats,
) {
    // Something to do with the ones we hold.
    if !samplers.is_empty() {
        let i = r.below(samplers.len() as u64) as usize;
        match r.below(4) {
            0 => drop(samplers.swap_remove(i)),
            1 => {
                if let Some(Err(e)) = samplers[i]
                    .fd
                    .as_ref()
                    .map(|f| sys::sampler_stop(f.as_fd()))
                {
                    st.problem(format!("sampler STOP: {e}"));
                }
            }
            2 => samplers[i].ring = None,
            _ => {
                if let Some(ring) = &samplers[i].ring {
                    check_ring(ring, ncpus, st);
                }
            }
        }
    }
    let max = if r.chance(10) { 80 } else { 6 };
    let n = 1 + r.below(max) as usize;
    let ops: Vec<msrbatch_op> = (0..n)
        .map(|_| {
            let mutate = r.chance(5);
            let mut op = random_op(r, ncpus, false, mutate, rules);
            op.status = 0;
            op
        })
        .collect();
    let mut p = msrbatch_prepare {
        version: MSRBATCH_ABI_VERSION,
        ..Default::default()
    };
    if sys::prepare(fd, &mut p, &ops).is_err() {
        return;
    }
    let mut req = msrbatch_sample_req {
        version: if r.chance(3) {
            r.next() as u32
        } else {
            MSRBATCH_ABI_VERSION
        },
        flags: if r.chance(3) { r.next() as u32 } else { 0 },
        handle: if r.chance(5) {
            r.next() as u32
        } else {
            p.handle
        },
        ring_pages: match r.below(10) {
            0 => r.next() as u32,
            1 => 0,
            2 => 3,
            _ => 1 << r.below(4),
        },
        period_ns: match r.below(10) {
            0 => r.next(),
            1 => u64::from(MSRBATCH_SAMPLE_MIN_PERIOD_NS) - 1,
            2..=5 => 1_000_000_000 * (1 + r.below(60)),
            _ => u64::from(MSRBATCH_SAMPLE_MIN_PERIOD_NS) * (1 + r.below(20)),
        },
        watermark: if r.chance(20) {
            r.next() as u32
        } else {
            r.below(2048) as u32
        },
        reserved: if r.chance(3) { r.next() } else { 0 },
        ..Default::default()
    };
    // The model and the kernel decide under the model's lock.
    let confined = rules.is_some();
    let mut model = SAMPLERS.lock().unwrap_or_else(|e| e.into_inner());
    let expected = sample_checks(&req, p.handle, &ops, confined)
        .and_then(|held| model.verdict(&held).map_or(Ok(held), Err));
    let res = sys::sample(fd, &mut req);
    let got = res.as_ref().map_err(|e| e.raw_os_error().unwrap_or(0));
    if got.as_ref().err() != expected.as_ref().err()
        && !matches!(got, Err(libc::ENOMEM | libc::EMFILE))
    {
        st.problem(format!(
            "sampler {}: {} where {} was due (period {} ns, {} pages, {} ops)",
            if confined {
                "confined"
            } else {
                "with CAP_SYS_RAWIO"
            },
            got.as_ref()
                .err()
                .map_or("success".into(), |&e| errno_name(e)),
            expected
                .as_ref()
                .err()
                .map_or("success".into(), |&e| errno_name(e)),
            req.period_ns,
            req.ring_pages,
            ops.len()
        ));
    }
    let held = match (&res, expected) {
        (Ok(_), Ok(held)) => held,
        // Counted as the kernel holds it, whatever the model said.
        (Ok(_), Err(_)) => sample_checks(&req, p.handle, &ops, confined).unwrap_or_default(),
        _ => Held::default(),
    };
    if res.is_ok() {
        model.count(&held, true);
    }
    drop(model);
    let _ = sys::unprepare(fd, p.handle);
    match res {
        Ok(sfd) => {
            st.samplers.fetch_add(1, Ordering::Relaxed);
            let ring = if r.chance(70) {
                match sys::SharedWords::map(sfd.as_fd(), req.mmap_size) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        st.problem(format!("mmap of a sampler's ring: {e}"));
                        None
                    }
                }
            } else {
                None
            };
            if let Some(ring) = &ring {
                check_ring(ring, ncpus, st);
            }
            samplers.push(OpenSampler {
                fd: Some(sfd),
                ring,
                held,
                fast: req.period_ns < 10_000_000,
            });
            // Up to 20 held (the sampler counts' limits), of which at most two
            // fast ones (enough for the per-CPU rates' limits; more would
            // spend the debug guest's CPUs on timers).
            if samplers.iter().filter(|s| s.fast).count() > 2 {
                if let Some(i) = samplers.iter().position(|s| s.fast) {
                    samplers.remove(i);
                }
            }
            if samplers.len() > 20 {
                samplers.remove(0);
            }
        }
        Err(e) => {
            let e = e.raw_os_error().unwrap_or(0);
            *st.errors.lock().unwrap().entry(errno_name(e)).or_default() += 1;
            let documented = [
                libc::EINVAL,
                libc::E2BIG,
                libc::ERANGE,
                libc::ENOENT,
                libc::ENOSPC,
                libc::EBUSY,
            ];
            if !documented.contains(&e) {
                st.problem(format!(
                    "sampler refused with undocumented {}",
                    errno_name(e)
                ));
            }
        }
    }
}

static PAT_VALUE: AtomicU64 = AtomicU64::new(0);

/// Write batches hold it exclusively, every other batch shared.
static AUX_LOCK: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// After a write batch that ran: where its final TSC_AUX put-back did not
/// run (-ETIME: the CPU's busy credit ran out), writes it again until it does.
fn put_tsc_aux_back(fd: std::os::fd::BorrowedFd<'_>, ran: &[msrbatch_op], st: &Stats) {
    let mut cpus: Vec<u32> = Vec::new();
    for o in ran.iter().rev() {
        if u32::from(o.op) == MSRBATCH_OP_WRMSR && o.reg == TSC_AUX && o.arg[0] == u64::from(o.cpu)
        {
            if o.status != 0 && !cpus.contains(&o.cpu) {
                cpus.push(o.cpu);
            }
        } else {
            break; // the put-backs are the batch's last ops
        }
    }
    for _ in 0..2000 {
        if cpus.is_empty() {
            return;
        }
        let mut ops: Vec<msrbatch_op> = cpus
            .iter()
            .map(|&c| msrbatch_op {
                op: MSRBATCH_OP_WRMSR as u16,
                cpu: c,
                reg: TSC_AUX,
                arg: [u64::from(c), 0],
                ..Default::default()
            })
            .collect();
        let mut hdr = msrbatch_batch {
            version: MSRBATCH_ABI_VERSION,
            nr_ops: ops.len() as u32,
            ops: ops.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: `hdr` describes `ops`, ours, for the whole call.
        if unsafe { sys::batch_raw(fd, &mut hdr) }.is_ok() {
            let done: Vec<u32> = ops
                .iter()
                .filter(|o| o.status == 0)
                .map(|o| o.cpu)
                .collect();
            cpus.retain(|c| !done.contains(c));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    st.problem(format!("TSC_AUX could not be put back on CPUs {cpus:?}"));
}

/// Starts `threads` fuzzing threads sharing `stop` and `st`: thread `t`
/// runs `body(t, its seed, stop, st)`, each seed its own stream of `seed`.
fn spawn_fuzzers<F>(
    threads: u64,
    seed: u64,
    stop: &Arc<AtomicBool>,
    st: &Arc<Stats>,
    body: F,
) -> Vec<std::thread::JoinHandle<()>>
where
    F: Fn(u64, u64, &AtomicBool, &Stats) + Clone + Send + 'static,
{
    (0..threads)
        .map(|t| {
            let (stop, st, body) = (stop.clone(), st.clone(), body.clone());
            std::thread::spawn(move || body(t, seed.wrapping_add(t * 0x9e37_79b9), &stop, &st))
        })
        .collect()
}

/// Waits for the threads of [`spawn_fuzzers`]: how many panicked.
fn join_fuzzers(handles: Vec<std::thread::JoinHandle<()>>) -> u32 {
    handles
        .into_iter()
        .map(|h| u32::from(h.join().is_err()))
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let total = arg("--ioctls", 100_000);
    let threads = arg("--threads", 4).max(1);
    let seconds = arg("--seconds", 0);
    let seed = arg("--seed", 0x5eed_1234);
    let ncpus = msrbatch::online_cpus().map_or(1, |c| c.len()) as u32;
    if args.iter().any(|a| a == "--msr-safe") {
        fuzz_msr_safe::main(total, threads, seed, ncpus);
    }

    let (dev, rules) = open_device();
    if let Some(l) = &rules {
        println!(
            "# without CAP_SYS_RAWIO: {} MSRs in the allowlist at open",
            l.entries().len()
        );
    }
    let mut b = msrbatch::Batch::new();
    b.push(0, msrbatch::Op::RdMsr { msr: PAT });
    dev.run(&mut b).expect("read PAT");
    PAT_VALUE.store(
        b.result(0)
            .and_then(|r| r.value.ok())
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
        Ordering::Relaxed,
    );

    let st = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    // With CAP_SYS_RAWIO and two threads or more, the second thread opens
    // confined descriptors: samplers and prepared batches of both kinds at
    // once.
    let rawio = rules.is_none();
    let handles = spawn_fuzzers(threads, seed, &stop, &st, move |t, seed, stop, st| {
        fuzz_thread(seed, ncpus, total / threads, t == 1 && rawio, stop, st)
    });
    if seconds > 0 {
        while start.elapsed() < Duration::from_secs(seconds)
            && !handles.iter().all(|h| h.is_finished())
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
    }
    let crashed = join_fuzzers(handles);
    let elapsed = start.elapsed();

    // TSC_AUX must name its CPU again everywhere.
    let mut b = msrbatch::Batch::new();
    for c in 0..ncpus {
        b.push(c, msrbatch::Op::RdMsr { msr: TSC_AUX });
    }
    dev.run(&mut b).expect("read TSC_AUX");
    let restored = b.results().all(|r| {
        r.value.ok().and_then(|v| v.as_u64()).map(|v| v & 0xfff) == Some(u64::from(r.cpu))
    });

    println!(
        "fuzz: {} ioctls, {} ops executed, {} threads, {:.1} s, seed {seed:#x}",
        st.ioctls.load(Ordering::Relaxed),
        st.ops.load(Ordering::Relaxed),
        threads,
        elapsed.as_secs_f64()
    );
    println!(
        "fuzz: {} samplers started, {} of their records checked, {} batches prepared and kept",
        st.samplers.load(Ordering::Relaxed),
        st.records.load(Ordering::Relaxed),
        st.prepared.load(Ordering::Relaxed)
    );
    let consistent = st.report("fuzz");
    let mut t = Tally::new();
    t.check(
        consistent,
        "every result consistent, every errno documented",
    );
    t.check(crashed == 0, "no fuzz thread crashed");
    t.check(restored, "TSC_AUX names its CPU on every CPU afterwards");
    t.finish();
}
