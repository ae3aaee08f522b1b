// SPDX-License-Identifier: GPL-2.0
//! Read a few MSRs on every online CPU in one batch with the Rust API.

use msrbatch::msr::{IA32_EFER, IA32_PAT, IA32_TSC_AUX};
use msrbatch::{msr_name, online_cpus, Batch, Device, Op};

fn main() -> Result<(), msrbatch::Error> {
    let dev = Device::open()?;
    let mut batch = Batch::new();
    for cpu in online_cpus()? {
        for msr in [IA32_PAT, IA32_EFER, IA32_TSC_AUX] {
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
