// SPDX-License-Identifier: GPL-2.0
//! `msrbatch-allowlist-test`: descriptors opened without CAP_SYS_RAWIO, run
//! as root (uid 0) with threads that become an unprivileged user of the
//! node's group. Credentials are per thread in the kernel: a thread that
//! calls the raw setresuid/setresgid/setgroups system calls (not the C
//! library's wrappers, which change every thread) drops its own privileges
//! and capabilities and nobody else's. So one process loads allowlists as
//! root while its other threads use the device as the user, at the same
//! time.
//!
//! Checks: loading (msr-safe's layout), refusals of bad lists (nothing
//! changes), who may load and read; as the user: reads allowed and refused
//! (EACCES, err_index, nothing ran), ops outside the rules (RDCR4, RDPMC,
//! grants), writes to read-only MSRs (EROFS) and to unlisted ones (EACCES),
//! masked WRMSR and RMWMSR change only the bits in the mask (root reads the
//! MSR), allow_writes=off; rules fixed at open (a reload neither widens nor
//! narrows an open descriptor); reloads while several user threads run
//! batches and read the list (never half a list); the empty list; msr-safe's
//! own sample allowlists when the harness passes some in /extra/msr-safe.

use msrbatch::allowlist::{self, Allowlist, ALLOWLIST_PATH};
use msrbatch::uapi::*;
use msrbatch::{Batch, Device, Op, DEVICE_PATH};
use msrbatch_sys as sys;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod caps;
mod tally;
use tally::Tally;

const USER: u32 = 1000;
const GROUP: u32 = 4242;
const OTHER: u32 = 1001;
const TSC: u32 = 0x10;
const APIC_BASE: u32 = 0x1b;
const PLATFORM_INFO: u32 = 0xce;
const PAT: u32 = 0x277;
const TSC_AUX: u32 = 0xc000_0103;
/// TSC_AUX's writable bits in the lists here: 31:12 (11:0 hold the CPU
/// number, which Linux reads back for getcpu()).
const AUX_MASK: u64 = 0xffff_f000;
const PARAM: &str = "/sys/module/msrbatch/parameters/allow_writes";

/// msr-safe's layout: its header comment, entries with quoted names.
const L1: &str = "# MSR # Write Mask # Comment\n\
    0x00000010 0x0000000000000000 # \"IA32_TIME_STAMP_COUNTER\"\n\
    0x000000CE 0x0000000000000000 # \"MSR_PLATFORM_INFO\"\n\
    0x00000277 0x0000000000000000 # \"IA32_PAT\"\n\
    0xC0000103 0x00000000FFFFF000 # \"IA32_TSC_AUX\": bits 31:12\n";

/// L1 without PLATFORM_INFO, with APIC_BASE, a narrower TSC_AUX mask and
/// RDCR4: everything an open descriptor must not pick up.
const L2: &str = "0x10 0\n0x1b 0\n0x277 0\n0xc0000103 0xff000\nallow rdcr4\n";

/// Drops the calling thread's credentials (only its own: raw system calls)
/// to `uid`:`gid` with no supplementary groups and no capabilities.
fn become_user(uid: u32, gid: u32) {
    // SAFETY: Plain system calls on the calling thread's credentials.
    let r = unsafe {
        [
            libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()),
            libc::syscall(libc::SYS_setresgid, gid, gid, gid),
            libc::syscall(libc::SYS_setresuid, uid, uid, uid),
        ]
    };
    assert!(r == [0, 0, 0], "dropping to {uid}:{gid}: {r:?}");
}

/// The calling thread's effective capabilities.
fn cap_eff() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_default()
}

/// Runs `f` on a new thread that first became `uid`:`gid`.
fn as_user<T: Send + 'static>(uid: u32, gid: u32, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        become_user(uid, gid);
        f()
    })
    .join()
    .expect("user thread panicked")
}

fn op(code: u32, cpu: u32, reg: u32, arg: [u64; 2]) -> msrbatch_op {
    msrbatch_op {
        op: code as u16,
        cpu,
        reg,
        arg,
        status: 0x5eed,
        ..Default::default()
    }
}

/// Runs raw ops; returns the errno (0: it ran) and the header after.
fn raw(dev: &Device, ops: &mut [msrbatch_op]) -> (i32, msrbatch_batch) {
    let mut hdr = msrbatch_batch {
        version: MSRBATCH_ABI_VERSION,
        ..Default::default()
    };
    let r = sys::batch(dev.file().as_fd(), &mut hdr, ops);
    (r.err().and_then(|e| e.raw_os_error()).unwrap_or(0), hdr)
}

/// A batch refused with `errno` at op `index`, before anything ran: the ops
/// came back as they went in.
fn refused(dev: &Device, ops: &[msrbatch_op], errno: i32, index: u32) -> bool {
    let mut v = ops.to_vec();
    let (e, hdr) = raw(dev, &mut v);
    let ok = e == errno && hdr.err_index == index && hdr.out_flags == 0 && v == ops;
    if !ok {
        println!(
            "# want errno {errno} at {index}: got {e} at {} out_flags {}",
            hdr.err_index, hdr.out_flags
        );
    }
    ok
}

fn rdmsr(dev: &Device, cpu: u32, msr: u32) -> Option<u64> {
    let mut b = Batch::new();
    b.push(cpu, Op::RdMsr { msr });
    dev.run(&mut b).ok()?;
    b.result(0)?.value.ok()?.as_u64()
}

fn wrmsr(dev: &Device, cpu: u32, msr: u32, value: u64) -> bool {
    let mut b = Batch::new();
    b.push(cpu, Op::WrMsr { msr, value });
    dev.run(&mut b).is_ok() && b.nr_failed() == 0
}

fn errno_of(r: msrbatch::Result<()>) -> i32 {
    r.err().map_or(0, |e| e.errno().0)
}

fn io_errno(r: std::io::Result<impl Sized>) -> i32 {
    r.err().and_then(|e| e.raw_os_error()).unwrap_or(0)
}

fn load(text: &str) -> i32 {
    errno_of(allowlist::load(ALLOWLIST_PATH, text.as_bytes()))
}

fn in_force() -> Option<Allowlist> {
    Allowlist::parse(&allowlist::read(ALLOWLIST_PATH).ok()?).ok()
}

fn cpus() -> Vec<u32> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n as u32).collect()
}

fn loading(t: &mut Tally) {
    t.check(load(L1) == 0, "root loads a list in msr-safe's layout");
    let want = Allowlist::parse(L1).ok();
    t.check(in_force() == want, "reading the node gives the list loaded");
    let text = allowlist::read(ALLOWLIST_PATH).unwrap_or_default();
    println!("# in force:\n{}", text.trim_end().replace('\n', "\n# "));
    let big = "#".repeat(allowlist::MAX_TEXT + 1);
    let bad = [
        ("0x10 0\n0x10 0xff\n", libc::ENOTUNIQ, "an MSR listed twice"),
        ("0x10\n", libc::EINVAL, "an entry without a mask"),
        ("0x10 0xq\n", libc::EINVAL, "a bad number"),
        ("0x1ffffffff 0\n", libc::ERANGE, "an MSR over 32 bits"),
        (
            "0x10 0\n0x199 0xffff",
            libc::EINVAL,
            "a last entry without newline",
        ),
        ("allow wrmsr\n", libc::EINVAL, "an unknown allow line"),
        (big.as_str(), libc::E2BIG, "a text over 128 KiB"),
    ];
    for (text, errno, what) in bad {
        let e = load(text);
        t.check(
            e == errno && in_force() == want,
            format!("{what}: refused ({e}, want {errno}), the list in force unchanged"),
        );
    }
    // One write per open: a second one (a text cut in chunks) is refused.
    let second = std::fs::OpenOptions::new()
        .write(true)
        .open(ALLOWLIST_PATH)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(L1.as_bytes())?;
            f.write_all(L1.as_bytes())
        });
    t.check(
        io_errno(second) == libc::EINVAL,
        "a second write to the same open file: EINVAL",
    );
    let e = std::thread::spawn(|| {
        caps::drop_rawio();
        io_errno(std::fs::OpenOptions::new().write(true).open(ALLOWLIST_PATH))
    })
    .join()
    .unwrap_or(-1);
    t.check(
        e == libc::EPERM,
        format!("uid 0 without CAP_SYS_RAWIO cannot open the node for writing ({e})"),
    );
    let (w, r) = as_user(USER, GROUP, || {
        (
            io_errno(std::fs::OpenOptions::new().write(true).open(ALLOWLIST_PATH)),
            allowlist::read(ALLOWLIST_PATH).ok(),
        )
    });
    t.check(
        w == libc::EACCES,
        format!("a group member cannot open the node for writing (mode 0640: {w})"),
    );
    t.check(
        r.is_some_and(|r| r == text),
        "a group member reads the list in force",
    );
}

fn user_batches(t: &mut Tally, root: &Device) {
    let cpus = cpus();
    let (caps, opened) = as_user(USER, GROUP, || (cap_eff(), Device::open().is_ok()));
    t.check(
        caps == "0000000000000000" && opened,
        format!("uid {USER} gid {GROUP} (CapEff {caps}) opens {DEVICE_PATH} O_RDWR"),
    );
    let e = as_user(OTHER, OTHER, || {
        Device::open().err().map_or(0, |e| e.errno().0)
    });
    t.check(
        e == libc::EACCES,
        format!("a non-member gets EACCES from the node's mode ({e})"),
    );

    let root_vals: Vec<_> = cpus
        .iter()
        .flat_map(|&c| [PAT, PLATFORM_INFO, TSC_AUX].map(|m| rdmsr(root, c, m)))
        .collect();
    let cpus2 = cpus.clone();
    let user_vals: Vec<_> = as_user(USER, GROUP, move || {
        let dev = Device::open().expect("open");
        cpus2
            .iter()
            .flat_map(|&c| [PAT, PLATFORM_INFO, TSC_AUX].map(|m| rdmsr(&dev, c, m)))
            .collect()
    });
    t.check(
        user_vals == root_vals && user_vals.iter().all(Option::is_some),
        "the user reads listed MSRs on every CPU, the values root reads",
    );

    let results = as_user(USER, GROUP, || {
        let dev = Device::open().expect("open");
        let rd = |m| op(MSRBATCH_OP_RDMSR, 0, m, [0, 0]);
        let mut grant = 0;
        if let Err(e) = dev.grant_rdpmc() {
            grant = e.errno().0;
        }
        let mut fine = [
            op(MSRBATCH_OP_RDTSC, 0, 0, [0, 0]),
            op(MSRBATCH_OP_RDTSCP, 0, 0, [0, 0]),
            op(MSRBATCH_OP_CPUID, 0, 0, [0, 0]),
            op(MSRBATCH_OP_DELAY, 0, 0, [1000, 0]),
            rd(TSC),
        ];
        let (e, hdr) = raw(&dev, &mut fine);
        let mut b = Batch::new();
        b.push(0, Op::RdMsr { msr: PAT });
        b.push(0, Op::RdMsr { msr: APIC_BASE });
        let lib = dev.run(&mut b).unwrap_err();
        [
            refused(
                &dev,
                &[rd(PAT), rd(TSC_AUX), rd(APIC_BASE)],
                libc::EACCES,
                2,
            ),
            refused(
                &dev,
                &[rd(PAT), op(MSRBATCH_OP_RDCR4, 0, 0, [0, 0])],
                libc::EACCES,
                1,
            ),
            refused(
                &dev,
                &[op(MSRBATCH_OP_RDPMC, 0, 0, [0, 0])],
                libc::EACCES,
                0,
            ),
            grant == libc::EPERM,
            e == 0 && hdr.nr_failed == 0 && fine.iter().all(|o| o.status == 0),
            lib.op_index() == Some(1) && lib.to_string().contains("allowlist"),
            refused(
                &dev,
                &[op(MSRBATCH_OP_WRMSR, 0, PAT, [0, 0])],
                libc::EROFS,
                0,
            ),
            refused(
                &dev,
                &[op(MSRBATCH_OP_RMWMSR, 0, PAT, [0, 1])],
                libc::EROFS,
                0,
            ),
            refused(
                &dev,
                &[op(MSRBATCH_OP_WRMSR, 0, APIC_BASE, [0, 0])],
                libc::EACCES,
                0,
            ),
            refused(
                &dev,
                &[
                    op(MSRBATCH_OP_WRMSR, 0, TSC_AUX, [0xabc_d000, 0]),
                    op(MSRBATCH_OP_WRMSR, 0, PAT, [0, 0]),
                ],
                libc::EROFS,
                1,
            ),
        ]
    });
    let names = [
        "a read of an unlisted MSR: EACCES at its index, nothing ran",
        "RDCR4 without 'allow rdcr4': EACCES",
        "RDPMC without 'allow rdpmc': EACCES",
        "a PCE grant without 'allow pce': EPERM",
        "RDTSC, RDTSCP, CPUID, DELAY and a listed RDMSR run",
        "the library's error names the op and says the allowlist refused it",
        "WRMSR of a read-only (mask 0) MSR: EROFS",
        "RMWMSR of a read-only MSR: EROFS",
        "WRMSR of an unlisted MSR: EACCES",
        "a masked write batched with a read-only one: EROFS at 1, nothing ran",
    ];
    for (ok, what) in results.iter().zip(names) {
        t.check(*ok, what);
    }
    let pat: Vec<_> = cpus.iter().map(|&c| rdmsr(root, c, PAT)).collect();
    let aux: Vec<_> = cpus.iter().map(|&c| rdmsr(root, c, TSC_AUX)).collect();
    t.check(
        pat == root_vals.iter().step_by(3).copied().collect::<Vec<_>>()
            && aux
                == root_vals
                    .iter()
                    .skip(2)
                    .step_by(3)
                    .copied()
                    .collect::<Vec<_>>(),
        "PAT and TSC_AUX unchanged on every CPU after the refusals",
    );
}

fn masked_writes(t: &mut Tally, root: &Device) {
    let cpus = cpus();
    // Outside bits that differ from the MSR's: 11:0 (the CPU number) and 40.
    let value = 0x0000_0100_abcd_efff_u64;
    let cpus2 = cpus.clone();
    let (ran, fields) = as_user(USER, GROUP, move || {
        let dev = Device::open().expect("open");
        let mut ops: Vec<_> = cpus2
            .iter()
            .map(|&c| op(MSRBATCH_OP_WRMSR, c, TSC_AUX, [value, 0]))
            .collect();
        let (e, _) = raw(&dev, &mut ops);
        let fields = ops.iter().all(|o| {
            o.status == 0
                && u32::from(o.op) == MSRBATCH_OP_WRMSR
                && o.arg == [value, 0]
                && o.val == [0, 0]
        });
        (e, fields)
    });
    t.check(
        ran == 0,
        "the user's WRMSR of TSC_AUX (mask 31:12) on every CPU runs",
    );
    t.check(
        fields,
        "each op comes back as it went in: WRMSR, its value, val 0, status 0",
    );
    let merged = cpus
        .iter()
        .all(|&c| rdmsr(root, c, TSC_AUX) == Some(u64::from(c) | (value & AUX_MASK)));
    t.check(
        merged,
        "TSC_AUX = CPU number | 0xabcde000: bits in the mask written, the others kept (merged, not refused)",
    );
    let c = *cpus.last().expect("a CPU");
    let old = u64::from(c) | 0xabcd_e000;
    let (e, o) = as_user(USER, GROUP, move || {
        let dev = Device::open().expect("open");
        let mut ops = [op(MSRBATCH_OP_RMWMSR, c, TSC_AUX, [u64::MAX, 0x1234_5fff])];
        let (e, _) = raw(&dev, &mut ops);
        (e, ops[0])
    });
    t.check(
        e == 0
            && o.status == 0
            && o.arg == [u64::MAX, 0x1234_5fff]
            && o.val == [old, (old & !AUX_MASK) | 0x1234_5000]
            && rdmsr(root, c, TSC_AUX) == Some(u64::from(c) | 0x1234_5000),
        format!("RMWMSR clear=all set=0x12345fff on CPU {c}: only the mask changes, val = [old, new] ({:x?})", o.val),
    );
    // allow_writes=off and lockdown apply to everyone.
    let before = rdmsr(root, 0, TSC_AUX);
    let set = |v: &str| std::fs::write(PARAM, v).is_ok();
    let off = set("off");
    let e = as_user(USER, GROUP, || {
        let dev = Device::open().expect("open");
        let mut ops = [op(MSRBATCH_OP_WRMSR, 0, TSC_AUX, [0, 0])];
        raw(&dev, &mut ops).0
    });
    let restored = set("default");
    t.check(
        off && restored && e == libc::EPERM && rdmsr(root, 0, TSC_AUX) == before,
        format!(
            "allow_writes=off refuses the user's masked write too (errno {e}), nothing written"
        ),
    );
}

fn fixed_at_open(t: &mut Tally, root: &Device) {
    load(L1);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (back_tx, back_rx) = std::sync::mpsc::channel();
    let user = std::thread::spawn(move || {
        become_user(USER, GROUP);
        let a = Device::open().expect("open");
        back_tx.send(()).ok();
        rx.recv().ok(); // root has loaded L2
        let b = Device::open().expect("open");
        let rd = |d: &Device, m| {
            let mut ops = [op(MSRBATCH_OP_RDMSR, 0, m, [0, 0])];
            raw(d, &mut ops).0
        };
        let cr4 = |d: &Device| raw(d, &mut [op(MSRBATCH_OP_RDCR4, 0, 0, [0, 0])]).0;
        let wr = |d: &Device, v| raw(d, &mut [op(MSRBATCH_OP_WRMSR, 0, TSC_AUX, [v, 0])]).0;
        let a_res = [rd(&a, APIC_BASE), rd(&a, PLATFORM_INFO), cr4(&a)];
        let b_res = [rd(&b, APIC_BASE), rd(&b, PLATFORM_INFO), cr4(&b)];
        let a_wr = wr(&a, 0xffff_ffff);
        back_tx.send(()).ok();
        rx.recv().ok(); // root has read TSC_AUX
        let b_wr = wr(&b, 0);
        (a_res, b_res, a_wr, b_wr)
    });
    back_rx.recv().ok();
    t.check(
        load(L2) == 0,
        "root loads a second list while the user holds a descriptor",
    );
    tx.send(()).ok();
    back_rx.recv().ok();
    let after_a = rdmsr(root, 0, TSC_AUX);
    tx.send(()).ok();
    let (a_res, b_res, a_wr, b_wr) = user.join().expect("user thread");
    let after_b = rdmsr(root, 0, TSC_AUX);
    t.check(
        a_res == [libc::EACCES, 0, libc::EACCES],
        format!("the descriptor opened before keeps its list: not widened (APIC_BASE, RDCR4 refused), not narrowed (PLATFORM_INFO read): {a_res:?}"),
    );
    t.check(
        b_res == [0, libc::EACCES, 0],
        format!("a descriptor opened after gets the new list: {b_res:?}"),
    );
    t.check(
        a_wr == 0 && after_a == Some(0xffff_f000),
        format!("the old descriptor writes with its old mask 31:12 ({after_a:x?})"),
    );
    t.check(
        b_wr == 0 && after_b == Some(0xfff0_0000),
        format!("the new one with the new mask 19:12 ({after_b:x?})"),
    );
}

/// The lists the reload test swaps: TSC_AUX writable in both, and eight
/// MSRs each that only one of them has (any MSR reads under TCG).
fn swap_lists() -> [String; 2] {
    let set = |base: u32| {
        let mut s = format!("0xc0000103 {AUX_MASK:#x}\n");
        for i in 0..8 {
            s += &format!("{:#x} 0\n", base + i);
        }
        s
    };
    [set(0x200), set(0x210)]
}

fn reload_while_running(t: &mut Tally) {
    let lists = swap_lists();
    let texts: Vec<String> = lists
        .iter()
        .map(|l| Allowlist::parse(l).expect("list").to_string())
        .collect();
    load(&lists[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    // Masked writes that ran, and those the CPU's busy credit held back
    // (-ETIME: nothing ran, nothing written).
    let writes = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let problems = Arc::new(Mutex::new(Vec::<String>::new()));
    let ncpu = cpus().len() as u32;
    let mut users = Vec::new();
    for n in 0..3u32 {
        let (stop, seen, problems) = (stop.clone(), seen.clone(), problems.clone());
        let writes = writes.clone();
        users.push(std::thread::spawn(move || {
            become_user(USER, GROUP);
            let probe = |dev: &Device, base: u32| {
                let mut ops: Vec<_> = (0..8)
                    .map(|i| op(MSRBATCH_OP_RDMSR, n % ncpu, base + i, [0, 0]))
                    .collect();
                let (e, h) = raw(dev, &mut ops);
                (e, h.err_index)
            };
            let classify = |dev: &Device| match (probe(dev, 0x200), probe(dev, 0x210)) {
                ((0, _), (libc::EACCES, 0)) => Some(0),
                ((libc::EACCES, 0), (0, _)) => Some(1),
                _ => None,
            };
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let dev = Device::open().expect("open");
                let Some(k) = classify(&dev) else {
                    problems
                        .lock()
                        .unwrap()
                        .push(format!("thread {n}: a descriptor saw half a list"));
                    break;
                };
                seen[k].fetch_add(1, Ordering::Relaxed);
                let cpu = n % ncpu;
                let v = (rounds << 12) | 0xfff;
                let mut w = [
                    op(MSRBATCH_OP_WRMSR, cpu, TSC_AUX, [v, 0]),
                    op(MSRBATCH_OP_RDMSR, cpu, TSC_AUX, [0, 0]),
                ];
                let (e, _) = raw(&dev, &mut w);
                let held_back = e == 0 && w.iter().all(|o| o.status == -libc::ETIME);
                writes[usize::from(held_back)].fetch_add(1, Ordering::Relaxed);
                if !held_back && (e != 0 || w[1].val[0] & 0xfff != u64::from(cpu)) {
                    problems.lock().unwrap().push(format!(
                        "thread {n}: masked write: errno {e}, statuses {} {}, read {:#x}",
                        w[0].status, w[1].status, w[1].val[0]
                    ));
                }
                std::thread::yield_now();
                if classify(&dev) != Some(k) {
                    problems
                        .lock()
                        .unwrap()
                        .push(format!("thread {n}: a reload changed an open descriptor"));
                    break;
                }
                rounds += 1;
            }
            rounds
        }));
    }
    let reader = {
        let (stop, problems, texts) = (stop.clone(), problems.clone(), texts.clone());
        std::thread::spawn(move || {
            become_user(USER, GROUP);
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match allowlist::read(ALLOWLIST_PATH) {
                    Ok(s) if texts.contains(&s) => reads += 1,
                    other => {
                        problems.lock().unwrap().push(format!("reader: {other:?}"));
                        break;
                    }
                }
            }
            reads
        })
    };
    let start = Instant::now();
    let mut reloads = 0u32;
    // 8 s, and at least 50 reloads however slow the host is.
    while start.elapsed() < Duration::from_secs(8) || reloads < 50 {
        if load(&lists[(reloads % 2) as usize]) != 0 {
            problems.lock().unwrap().push("a reload failed".into());
            break;
        }
        reloads += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds: u64 = users.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let reads = reader.join().unwrap_or(0);
    let seen = [
        seen[0].load(Ordering::Relaxed),
        seen[1].load(Ordering::Relaxed),
    ];
    let writes = [
        writes[0].load(Ordering::Relaxed),
        writes[1].load(Ordering::Relaxed),
    ];
    println!("# {reloads} reloads; 3 user threads: {rounds} descriptors ({seen:?} per list); {reads} reads of the node; masked writes: {} ran, {} held back by the busy credit (ETIME)", writes[0], writes[1]);
    let problems = problems.lock().unwrap();
    for p in problems.iter() {
        println!("# {p}");
    }
    t.check(problems.is_empty() && writes[0] > 0, "reloads under load: every descriptor and every read saw one whole list, open descriptors never changed, masked writes kept TSC_AUX's CPU bits");
    t.check(
        reloads >= 50 && seen[0] > 0 && seen[1] > 0 && reads > 0,
        "both lists were seen by descriptors opened during the reloads",
    );
}

fn empty_list(t: &mut Tally) {
    let loaded = load(L1);
    let before = in_force();
    t.check(
        load("# nothing\n# 0x10 0x0 # \"commented out\"\n") == libc::ENOMSG
            && loaded == 0
            && in_force() == before
            && before.as_ref().is_some_and(|l| !l.entries().is_empty()),
        "a list of comments is refused (ENOMSG, as msr-safe) and the list in force stays",
    );
    t.check(
        load("\n") == 0 && allowlist::read(ALLOWLIST_PATH).is_ok_and(|s| s.is_empty()),
        "a write of at most 2 bytes loads the empty list, which reads as nothing",
    );
    let r = as_user(USER, GROUP, || {
        let dev = Device::open().expect("open");
        (
            refused(
                &dev,
                &[op(MSRBATCH_OP_RDMSR, 0, PAT, [0, 0])],
                libc::EACCES,
                0,
            ),
            raw(&dev, &mut [op(MSRBATCH_OP_RDTSC, 0, 0, [0, 0])]).0,
        )
    });
    t.check(r == (true, 0), "with the empty list: no MSR, RDTSC still");
}

/// msr-safe's own allowlists, when the harness was given some (EXTRA).
fn msr_safe_samples(t: &mut Tally) {
    let dir = "/extra/msr-safe";
    let Ok(files) = std::fs::read_dir(dir) else {
        t.skip(
            "msr-safe sample allowlists",
            &format!("none in {dir} (pass files with EXTRA=DIR named msr-safe)"),
        );
        return;
    };
    for f in files.flatten() {
        let path = f.path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let parsed = Allowlist::parse(&text);
        let e = load(&text);
        // msr-safe's lists as shipped comment every entry out: ENOMSG.
        let none = parsed.as_ref().is_ok_and(|l| l.entries().is_empty());
        t.check(
            (none && e == libc::ENOMSG)
                || (e == 0 && parsed.is_ok() && in_force().as_ref() == parsed.as_ref().ok()),
            format!(
                "msr-safe's {} loads ({} MSRs; errno {e})",
                path.display(),
                parsed.map_or(0, |l| l.entries().len())
            ),
        );
    }
}

/// The nodes' mode and group as the udev rule sets them, and back.
fn nodes(set: bool, saved: &mut Vec<(u32, u32)>) {
    use std::os::unix::fs::chown;
    for (i, (path, mode)) in [(DEVICE_PATH, 0o660), (ALLOWLIST_PATH, 0o640)]
        .into_iter()
        .enumerate()
    {
        if set {
            let m = std::fs::metadata(path).expect(path);
            saved.push((m.mode() & 0o7777, m.gid()));
            chown(path, None, Some(GROUP)).expect("chown");
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        } else {
            let (mode, gid) = saved[i];
            chown(path, None, Some(gid)).ok();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).ok();
        }
    }
}

fn main() {
    let mut t = Tally::new();
    let root = Device::open().expect("open as root");
    let cpus = cpus();
    let aux: Vec<_> = cpus.iter().map(|&c| rdmsr(&root, c, TSC_AUX)).collect();
    let mut saved = Vec::new();
    nodes(true, &mut saved);
    println!(
        "# {DEVICE_PATH} 0660 and {ALLOWLIST_PATH} 0640, group {GROUP}, as the udev rule sets them"
    );
    loading(&mut t);
    user_batches(&mut t, &root);
    masked_writes(&mut t, &root);
    fixed_at_open(&mut t, &root);
    reload_while_running(&mut t);
    empty_list(&mut t);
    msr_safe_samples(&mut t);
    load("");
    nodes(false, &mut saved);
    let restored = cpus.iter().zip(&aux).all(|(&c, v)| {
        v.is_some_and(|v| wrmsr(&root, c, TSC_AUX, v)) && rdmsr(&root, c, TSC_AUX) == *v
    });
    t.check(restored, "TSC_AUX restored on every CPU");
    t.finish();
}
