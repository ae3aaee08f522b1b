// SPDX-License-Identifier: GPL-2.0
//! Read a few MSRs on every online CPU in one batch with the Rust API.

use msrbatch::{msr_name, Batch, Device, Op};

fn main() -> Result<(), msrbatch::Error> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let dev = Device::open()?;
    let mut batch = Batch::new();
    for cpu in 0..cpus {
        for msr in [0x277, 0xc000_0080, 0xc000_0103] {
            batch.push(cpu, Op::RdMsr { msr });
        }
    }
    dev.run(&mut batch)?;
    for r in batch.results() {
        let Op::RdMsr { msr } = r.op else { continue };
        let name = msr_name(msr).unwrap_or_default();
        match r.value {
            Ok(v) => println!("cpu {} {name:<13} {:#018x}", r.cpu, v.as_u64().unwrap_or(0)),
            Err(e) => println!("cpu {} {name:<13} {e}", r.cpu),
        }
    }
    std::process::exit(i32::from(batch.nr_failed() > 0));
}
