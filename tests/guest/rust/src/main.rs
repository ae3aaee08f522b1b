// SPDX-License-Identifier: GPL-2.0
//! Guest integration tests of the Rust library against the loaded module,
//! including the differential test against the in-tree msr driver.
//! Prints one `ok`/`not ok` line per check and `N passed, N failed`.

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
        batch.push(cpu, Op::RdMsr { msr: TSC_AUX });
        batch.push(
            cpu,
            Op::RmwMsr {
                msr: TSC_AUX,
                clear: 0,
                set: 0,
            },
        );
        batch.push(cpu, Op::RdTsc);
        batch.push(cpu, Op::RdTscp);
        batch.push(
            cpu,
            Op::Cpuid {
                leaf: 0,
                subleaf: 0,
            },
        );
        batch.push(cpu, Op::Delay { ns: 1000 });
        batch.push(cpu, Op::RdCr4);
        batch.push(cpu, Op::RdPmc { ecx: 0x7fff_0000 });
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
        println!("ok - # SKIP library: offline CPU: cannot take a CPU offline");
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

fn main() {
    let mut t = Tally::default();
    println!("# msrbatch Rust library guest tests");
    let dev = match Device::open() {
        Ok(d) => d,
        Err(e) => {
            println!("not ok - open: {e}");
            println!("0 passed, 1 failed");
            std::process::exit(1);
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
    differential(&mut t, &dev, &cpus);
    t.finish();
}
