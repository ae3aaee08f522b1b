// SPDX-License-Identifier: GPL-2.0
//! `msrbatch-stress --seconds S`: a thread per CPU issuing batches on every
//! CPU and taking PCE grants, while another thread takes CPUs offline and
//! online in a loop and another opens and closes the device. The only error
//! allowed is ENXIO (a target CPU went offline). Prints figures and KTAP
//! (`tally.rs`).

mod tally;
use msrbatch::{Batch, Device, Errno, Op};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tally::Tally;

fn set_online(cpu: usize, on: bool) -> bool {
    std::fs::write(
        format!("/sys/devices/system/cpu/cpu{cpu}/online"),
        if on { "1" } else { "0" },
    )
    .is_ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let ncpus = msrbatch::online_cpus().map_or(1, |c| c.len());
    let stop = Arc::new(AtomicBool::new(false));
    let batches = Arc::new(AtomicU64::new(0));
    let enxio = Arc::new(AtomicU64::new(0));
    let grants = Arc::new(AtomicU64::new(0));
    let hotplugs = Arc::new(AtomicU64::new(0));
    let opens = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));

    let mut handles = Vec::new();
    for t in 0..ncpus {
        let (stop, batches, enxio, grants, bad) = (
            stop.clone(),
            batches.clone(),
            enxio.clone(),
            grants.clone(),
            bad.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let dev = Device::open().expect("open");
            let mut b = Batch::new();
            for cpu in 0..ncpus as u32 {
                b.push(cpu, Op::RdMsr { msr: 0xc000_0103 });
                b.push(cpu, Op::RdTscp);
                b.push(
                    cpu,
                    Op::Cpuid {
                        leaf: 0,
                        subleaf: 0,
                    },
                );
            }
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                match dev.run(&mut b) {
                    Ok(()) => {
                        batches.fetch_add(1, Ordering::Relaxed);
                        for r in b.results() {
                            let ok = match r.op {
                                Op::RdMsr { .. } => {
                                    r.value.ok().and_then(|v| v.as_u64()).map(|v| v & 0xfff)
                                        == Some(u64::from(r.cpu))
                                }
                                _ => r.value.is_ok(),
                            };
                            if !ok {
                                bad.lock().unwrap().push(format!(
                                    "thread {t}: cpu {} {} -> {:?}",
                                    r.cpu,
                                    r.op.mnemonic(),
                                    r.value
                                ));
                            }
                        }
                    }
                    Err(e) if e.errno() == Errno(libc::ENXIO) => {
                        enxio.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => bad.lock().unwrap().push(format!("thread {t}: {e}")),
                }
                if i % 16 == t as u64 % 16 {
                    match dev.grant_rdpmc().and_then(|()| dev.revoke_rdpmc()) {
                        Ok(()) => {
                            grants.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => bad
                            .lock()
                            .unwrap()
                            .push(format!("thread {t}: grant/revoke: {e}")),
                    }
                }
            }
        }));
    }
    {
        let (stop, opens) = (stop.clone(), opens.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(d) = Device::open() {
                    let _ = d.grant_rdpmc();
                    drop(d);
                    opens.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let start = Instant::now();
    let mut cpu = 1;
    while start.elapsed() < Duration::from_secs(seconds) {
        if ncpus > 1 {
            if set_online(cpu, false) {
                hotplugs.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(20));
            if set_online(cpu, true) {
                hotplugs.fetch_add(1, Ordering::Relaxed);
            }
            cpu = cpu % (ncpus - 1) + 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let crashed = handles
        .into_iter()
        .map(|h| h.join().is_err())
        .filter(|&c| c)
        .count();
    let all_online = (1..ncpus).all(|c| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{c}/online"))
            .is_ok_and(|s| s.trim() == "1")
    });

    println!(
        "stress: {:.1} s, {} batches, {} ENXIO (CPU went offline), {} grant/revoke pairs, {} open/grant/close, {} hotplug transitions",
        start.elapsed().as_secs_f64(),
        batches.load(Ordering::Relaxed),
        enxio.load(Ordering::Relaxed),
        grants.load(Ordering::Relaxed),
        opens.load(Ordering::Relaxed),
        hotplugs.load(Ordering::Relaxed)
    );
    let bad = bad.lock().unwrap();
    for b in bad.iter().take(20) {
        println!("# {b}");
    }
    let checks = [
        (
            bad.is_empty(),
            "every batch consistent; only ENXIO while CPUs come and go",
        ),
        (crashed == 0, "no thread crashed"),
        (all_online, "every CPU online again"),
        (
            ncpus < 2 || hotplugs.load(Ordering::Relaxed) > 0,
            "CPUs actually went offline and online",
        ),
    ];
    let mut t = Tally::new();
    for (ok, what) in checks {
        t.check(ok, what);
    }
    t.finish();
}
