// SPDX-License-Identifier: GPL-2.0
//! Guest integration tests of the Rust library against the loaded module,
//! including the differential test against the in-tree msr driver.
//! Prints KTAP: one `ok N`/`not ok N` line per check (`tally.rs`).

use msrbatch::{Batch, Device, Errno, Op, Value};
use msrbatch_sys::uapi;
use std::fs::File;
use std::os::unix::fs::FileExt;

mod tally;
use tally::Tally;

use msrbatch::msr::IA32_TSC_AUX as TSC_AUX;

/// RDMSR through the in-tree driver: pread at offset MSR of /dev/cpu/N/msr.
fn msr_driver_read(cpu: u32, msr: u32) -> std::io::Result<u64> {
    let f = File::open(format!("/dev/cpu/{cpu}/msr"))?;
    let mut buf = [0u8; 8];
    f.read_exact_at(&mut buf, u64::from(msr))?;
    Ok(u64::from_le_bytes(buf))
}

fn differential(t: &mut Tally, dev: &Device, cpus: &[u32]) {
    // Constant per CPU while the test runs (TSC and FS/GS bases are not).
    let msrs = [
        0x1b,
        0x277,
        0xc000_0080,
        TSC_AUX,
        0xfe,
        0x1a0,
        0xc000_0081,
        0xc000_0082,
    ];
    let mut batch = Batch::new();
    for &cpu in cpus {
        for &msr in &msrs {
            batch.push(cpu, Op::RdMsr { msr });
        }
    }
    if let Err(e) = dev.run(&mut batch) {
        t.check(false, format!("differential batch: {e}"));
        return;
    }
    for r in batch.results() {
        let Op::RdMsr { msr } = r.op else { continue };
        let theirs = msr_driver_read(r.cpu, msr);
        let ours = r.value.map(|v| v.as_u64());
        let same = match (&theirs, ours) {
            (Ok(v), Ok(Some(o))) => *v == o,
            // Both refuse (the in-tree driver says EIO for a faulting MSR).
            (Err(e), Err(Errno(n))) => e.raw_os_error() == Some(n),
            _ => false,
        };
        t.check(
            same,
            format!(
                "cpu {} MSR {msr:#x}: msrbatch {ours:x?} == /dev/cpu/{}/msr {theirs:x?}",
                r.cpu, r.cpu
            ),
        );
    }
}

fn every_op(t: &mut Tally, dev: &Device, cpus: &[u32]) {
    let mut batch = Batch::new();
    for &cpu in cpus {
        for op in [
            Op::RdMsr { msr: TSC_AUX },
            Op::RmwMsr {
                msr: TSC_AUX,
                clear: 0,
                set: 0,
            },
            Op::RdTsc,
            Op::RdTscp,
            Op::Cpuid {
                leaf: 0,
                subleaf: 0,
            },
            Op::Delay { ns: 1000 },
            Op::RdCr4,
            Op::RdPmc { ecx: 0x7fff_0000 },
        ] {
            batch.push(cpu, op);
        }
    }
    t.check(
        dev.run(&mut batch).is_ok(),
        "library: every op on every CPU in one batch",
    );
    t.check(
        batch.nr_failed() == cpus.len() as u32,
        format!("nr_failed {} == one bad RDPMC per CPU", batch.nr_failed()),
    );
    for r in batch.results() {
        let ok = match (r.op, r.value) {
            (Op::RdMsr { .. }, Ok(Value::U64(v))) => v & 0xfff == u64::from(r.cpu),
            (Op::RmwMsr { .. }, Ok(Value::Rmw { old, new })) => {
                old == new && old & 0xfff == u64::from(r.cpu)
            }
            (Op::RdTsc, Ok(Value::U64(v))) => v > 0,
            (Op::RdTscp, Ok(Value::Tscp { aux, .. })) => aux & 0xfff == r.cpu,
            (Op::Cpuid { .. }, Ok(Value::Cpuid { eax, ebx, .. })) => eax >= 1 && ebx != 0,
            (Op::Delay { .. }, Ok(Value::Ticks(n))) => n > 0,
            (Op::RdCr4, Ok(Value::U64(cr4))) => cr4 & (1 << 5) != 0,
            (Op::RdPmc { .. }, Err(e)) => e == Errno(libc::EIO),
            _ => false,
        };
        t.check(
            ok,
            format!(
                "library: cpu {} {} -> {:x?}",
                r.cpu,
                r.op.mnemonic(),
                r.value
            ),
        );
    }
    // Reuse: run the same batch again without rebuilding it.
    let first_tsc = batch
        .result(2)
        .and_then(|r| r.value.ok())
        .and_then(|v| v.as_u64());
    t.check(dev.run(&mut batch).is_ok(), "library: batch reused");
    let second_tsc = batch
        .result(2)
        .and_then(|r| r.value.ok())
        .and_then(|v| v.as_u64());
    t.check(
        second_tsc > first_tsc,
        format!("library: rerun gives fresh values ({first_tsc:?} -> {second_tsc:?})"),
    );
}

fn errors(t: &mut Tally, dev: &Device) {
    let mut b = Batch::new();
    b.push(0, Op::RdTsc);
    b.push(4096, Op::RdTsc);
    let e = dev.run(&mut b).unwrap_err();
    t.check(
        e.errno() == Errno(libc::ENODEV) && e.op_index() == Some(1),
        format!("library: bad CPU -> {e}"),
    );
    let mut b = Batch::new();
    b.push(
        0,
        Op::Delay {
            ns: u64::from(uapi::MSRBATCH_MAX_DELAY_NS) + 1,
        },
    );
    let e = dev.run(&mut b).unwrap_err();
    t.check(
        e.errno() == Errno(libc::ERANGE) && e.op_index() == Some(0),
        format!("library: long delay -> {e}"),
    );
    let e = dev.run(&mut Batch::new()).unwrap_err();
    t.check(
        e.errno() == Errno(libc::EINVAL),
        format!("library: empty batch -> {e}"),
    );
    let mut hdr = uapi::msrbatch_batch {
        version: 1,
        nr_ops: 1,
        ops: 8,
        ..Default::default()
    };
    // SAFETY: address 8 is never mapped: the kernel must fail to read it.
    let r = unsafe { msrbatch_sys::batch_raw(std::os::fd::AsFd::as_fd(dev.file()), &mut hdr) };
    t.check(
        r.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::EFAULT),
        format!("raw: ops at address 8 -> {r:?}"),
    );
    let mut big = Batch::new();
    for _ in 0..=uapi::MSRBATCH_MAX_OPS {
        big.push(0, Op::RdTsc);
    }
    let e = dev.run(&mut big).unwrap_err();
    t.check(
        e.errno() == Errno(libc::E2BIG),
        format!("library: {} ops -> {e}", big.len()),
    );
    // Offline CPU: take the last one down for a moment.
    let last = msrbatch::online_cpus()
        .ok()
        .and_then(|c| c.last().copied())
        .unwrap_or(0);
    let online = format!("/sys/devices/system/cpu/cpu{last}/online");
    if last > 0 && std::fs::write(&online, "0").is_ok() {
        let mut b = Batch::new();
        b.push(last, Op::RdTsc);
        let r = dev.run(&mut b);
        let restored = std::fs::write(&online, "1").is_ok();
        let e = r.err();
        t.check(
            e.as_ref().map(|e| (e.errno(), e.op_index())) == Some((Errno(libc::ENXIO), Some(0)))
                && restored,
            format!("library: offline CPU {last} -> {e:?}, back online: {restored}"),
        );
    } else {
        t.skip("library: offline CPU", "cannot take a CPU offline");
    }
    // What the safe API cannot express, through the raw layer.
    let fd = std::os::fd::AsFd::as_fd(dev.file());
    let mut ops = [Op::RdTsc.encode(0)];
    let mut hdr = uapi::msrbatch_batch {
        version: 2,
        ..Default::default()
    };
    let r = msrbatch_sys::batch(fd, &mut hdr, &mut ops);
    t.check(
        r.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::EPROTONOSUPPORT),
        format!("raw: version 2 -> {r:?}"),
    );
    ops[0].op = 99;
    let mut hdr = uapi::msrbatch_batch {
        version: 1,
        ..Default::default()
    };
    let r = msrbatch_sys::batch(fd, &mut hdr, &mut ops);
    t.check(
        r.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::EOPNOTSUPP)
            && hdr.err_index == 0,
        format!("raw: op code 99 -> {r:?}, err_index {}", hdr.err_index),
    );
    let mut junk = [0u8; 64];
    // SAFETY: The descriptor is /dev/msrbatch, and TCGETS (0x5401) touches at
    // most a `struct termios` (60 bytes) even where it is implemented.
    let r =
        unsafe { msrbatch_sys::ioctl_ptr(std::os::fd::AsFd::as_fd(dev.file()), 0x5401, &mut junk) };
    t.check(
        r.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::ENOTTY),
        format!("TCGETS -> {r:?}"),
    );
}

/// Reads `msr` on `cpu` through `dev`.
fn read_msr(dev: &Device, cpu: u32, msr: u32) -> Option<u64> {
    let mut b = Batch::new();
    b.push(cpu, Op::RdMsr { msr });
    dev.run(&mut b).ok()?;
    b.result(0)?.value.ok()?.as_u64()
}

/// Prepared batches through the library: the same results as a plain run,
/// fresh values on each rerun, errors naming the op, and a drop that frees
/// the kernel's copy (64 at most per descriptor).
fn prepared(t: &mut Tally, dev: &Device, cpus: &[u32]) {
    // Ops whose results do not change from run to run.
    let mut batch = Batch::new();
    for &cpu in cpus {
        for op in [
            Op::RdMsr { msr: 0x277 },
            Op::RdMsr { msr: TSC_AUX },
            Op::Cpuid {
                leaf: 0,
                subleaf: 0,
            },
            Op::RdPmc { ecx: 0x7fff_0000 },
            Op::RdCr4,
        ] {
            batch.push(cpu, op);
        }
    }
    let p = match dev.prepare(&batch) {
        Ok(p) => p,
        Err(e) => {
            t.check(false, format!("library: prepare: {e}"));
            return;
        }
    };
    let zero = p.results().all(|r| {
        r.value == Ok(Value::U64(0))
            || r.value
                == Ok(Value::Cpuid {
                    eax: 0,
                    ebx: 0,
                    ecx: 0,
                    edx: 0,
                })
    });
    t.check(
        zero,
        "library: a prepared batch's results are zero before its first run",
    );
    let failed = p.run();
    let ran = dev.run(&mut batch);
    t.check(
        failed.as_ref().ok() == Some(&(cpus.len() as u32)) && ran.is_ok(),
        format!("library: prepared run -> {failed:?} failed ops (one bad RDPMC per CPU), plain run -> {ran:?}"),
    );
    let same = p.results().eq(batch.results());
    t.check(
        same && p.len() == batch.len(),
        format!(
            "library: the prepared run's {} results equal the plain run's",
            p.len()
        ),
    );
    let mut stamped = Batch::new();
    stamped.timestamps(true);
    for _ in 0..8 {
        stamped.push(0, Op::RdTsc);
    }
    match dev.prepare(&stamped) {
        Ok(p) => {
            let first = p.run().ok().and_then(|_| p.result(7)?.tsc);
            let second = p.run().ok().and_then(|_| p.result(0)?.tsc);
            let ordered = p.results().all(|r| {
                let v = r.value.ok().and_then(|v| v.as_u64());
                r.tsc.is_some() && v <= r.tsc
            }) && p
                .results()
                .zip(p.results().skip(1))
                .all(|(a, b)| a.tsc <= b.tsc);
            t.check(
                ordered && first.is_some() && second > first,
                format!("library: a prepared batch with timestamps: each op's TSC follows its value, in order, and a rerun is later ({first:?} -> {second:?})"),
            );
        }
        Err(e) => t.check(false, format!("library: prepare with timestamps: {e}")),
    }
    let mut bad = Batch::new();
    bad.push(0, Op::RdTsc);
    bad.push(4096, Op::RdTsc);
    let e = dev.prepare(&bad).err();
    t.check(
        e.as_ref().map(|e| (e.errno(), e.op_index())) == Some((Errno(libc::ENODEV), Some(1))),
        format!("library: prepare of a bad CPU -> {e:?}"),
    );
    drop(p);
    // 64 at once; the 65th is refused; after the drops, 64 more.
    let mut one = Batch::new();
    one.push(0, Op::RdTsc);
    let held: Vec<_> = (0..uapi::MSRBATCH_MAX_PREPARED)
        .map_while(|_| dev.prepare(&one).ok())
        .collect();
    let beyond = dev.prepare(&one).err().map(|e| e.errno());
    t.check(
        held.len() == uapi::MSRBATCH_MAX_PREPARED as usize && beyond == Some(Errno(libc::ENOSPC)),
        format!(
            "library: {} prepared batches held, the next -> {beyond:?}",
            held.len()
        ),
    );
    drop(held);
    let again: Vec<_> = (0..uapi::MSRBATCH_MAX_PREPARED)
        .map_while(|_| dev.prepare(&one).ok())
        .collect();
    let all_run = again.iter().all(|p| p.run().is_ok_and(|n| n == 0));
    t.check(
        again.len() == uapi::MSRBATCH_MAX_PREPARED as usize && all_run,
        format!(
            "library: after dropping them, {} more prepare and run",
            again.len()
        ),
    );
}

/// Restore on close and restore now through the library, on TSC_AUX of the
/// last CPU.
fn restore(t: &mut Tally, dev: &Device, cpus: &[u32]) {
    let cpu = *cpus.last().unwrap_or(&0);
    let Some(orig) = read_msr(dev, cpu, TSC_AUX) else {
        t.check(false, "library: restore: TSC_AUX unreadable");
        return;
    };
    let new = orig ^ 0x5a0;
    let write = |d: &Device| {
        let mut b = Batch::new();
        b.push(
            cpu,
            Op::WrMsr {
                msr: TSC_AUX,
                value: new,
            },
        );
        d.run(&mut b).is_ok() && b.nr_failed() == 0
    };
    let r = Device::open().and_then(|d| {
        d.restore_on_close()?;
        let wrote = write(&d);
        let during = read_msr(dev, cpu, TSC_AUX);
        drop(d);
        Ok((wrote, during))
    });
    let after = read_msr(dev, cpu, TSC_AUX);
    t.check(
        matches!(r, Ok((true, Some(v))) if v == new) && after == Some(orig),
        format!("library: restore on close: TSC_AUX {orig:#x} -> {r:x?} while open -> {after:x?} after close"),
    );
    let r = Device::open().and_then(|d| {
        d.restore_on_close()?;
        let wrote = write(&d);
        let n = d.restore_now()?;
        let now = read_msr(dev, cpu, TSC_AUX);
        // The log starts over: a later write is logged again (the value
        // before it is the restored one) and undone on close.
        let kept = write(&d);
        drop(d);
        Ok((wrote, n, now, kept))
    });
    let after = read_msr(dev, cpu, TSC_AUX);
    t.check(
        matches!(r, Ok((true, 0, Some(v), true)) if v == orig) && after == Some(orig),
        format!(
            "library: restore now: {r:x?}; a write after it is undone on close too ({after:x?})"
        ),
    );
    let mut b = Batch::new();
    b.push(
        cpu,
        Op::WrMsr {
            msr: TSC_AUX,
            value: orig,
        },
    );
    let back = dev.run(&mut b).is_ok() && read_msr(dev, cpu, TSC_AUX) == Some(orig);
    t.check(back, "library: TSC_AUX put back");
    let ro = Device::open_read_only().and_then(|d| d.restore_on_close());
    t.check(
        ro.as_ref().err().map(|e| e.errno()) == Some(Errno(libc::EBADF)),
        format!("library: restore on close of a read-only device -> {ro:?}"),
    );
}

/// Synchronised start and timestamps through the library.
fn sync_and_timestamps(t: &mut Tally, dev: &Device, cpus: &[u32]) {
    let mut b = Batch::new();
    b.sync_start(true).timestamps(true);
    for &cpu in cpus {
        for _ in 0..4 {
            b.push(cpu, Op::RdTsc);
        }
    }
    // Emulation can keep a CPU from arriving within 20 ms: try again.
    let mut r = dev.run(&mut b);
    let mut tries = 1;
    while tries < 5
        && r.as_ref()
            .is_err_and(|e| e.errno() == Errno(libc::ETIMEDOUT))
    {
        r = dev.run(&mut b);
        tries += 1;
    }
    let stamped = b.results().all(|r| {
        let v = r.value.ok().and_then(|v| v.as_u64());
        v.is_some() && r.tsc.is_some() && v <= r.tsc
    });
    t.check(
        r.is_ok() && stamped,
        format!(
            "library: a synchronised batch with timestamps on {} CPUs ({tries} tries: {r:?}; start spread {} ticks)",
            cpus.len(),
            b.start_spread()
        ),
    );
    let mut bad = Batch::new();
    bad.timestamps(true);
    bad.push(0, Op::RdTsc);
    bad.push(0, Op::RdTscp);
    let e = dev.run(&mut bad).err();
    t.check(
        e.as_ref().map(|e| (e.errno(), e.op_index())) == Some((Errno(libc::EINVAL), Some(1))),
        format!("library: timestamps with RDTSCP -> {e:?}"),
    );
}

fn main() {
    let mut t = Tally::new();
    println!("# msrbatch Rust library guest tests");
    let dev = match Device::open() {
        Ok(d) => d,
        Err(e) => {
            t.check(false, format!("open: {e}"));
            t.finish();
        }
    };
    let info = dev.info();
    t.check(
        info.as_ref()
            .is_ok_and(|i| i.version == uapi::MSRBATCH_ABI_VERSION),
        format!("info: {info:?}"),
    );
    let cpus = msrbatch::online_cpus().expect("/sys/devices/system/cpu/online");
    every_op(&mut t, &dev, &cpus);
    errors(&mut t, &dev);
    prepared(&mut t, &dev, &cpus);
    restore(&mut t, &dev, &cpus);
    sync_and_timestamps(&mut t, &dev, &cpus);
    differential(&mut t, &dev, &cpus);
    t.finish();
}
