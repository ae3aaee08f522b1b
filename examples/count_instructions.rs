// SPDX-License-Identifier: GPL-2.0
//! Program IA32_PERFEVTSEL0 for instructions retired, read the counter with
//! RDPMC between CPUID fences around a 10 us busy-wait, and restore the
//! MSRs: one batch, atomically on CPU 0. Needs an Intel architectural PMU
//! (CPUID leaf 0AH); without one it says so and exits 0.

use msrbatch::msr::{IA32_PERFEVTSEL0, IA32_PERF_GLOBAL_CTRL, IA32_PMC0};
use msrbatch::{Batch, Device, Op, Value};

const USR: u64 = 1 << 16;
const OS: u64 = 1 << 17;
const EN: u64 = 1 << 22;
const INST_RETIRED: u64 = 0xc0;

fn value(batch: &Batch, i: usize) -> Result<u64, String> {
    match batch.result(i).map(|r| r.value) {
        Some(Ok(v)) => Ok(v.as_u64().unwrap_or(0)),
        Some(Err(e)) => Err(format!("op {i}: {e}")),
        None => Err(format!("op {i}: no such op")),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::open()?;
    let cpu = 0;
    let mut probe = Batch::new();
    probe.push(
        cpu,
        Op::Cpuid {
            leaf: 0xa,
            subleaf: 0,
        },
    );
    probe.push(
        cpu,
        Op::RdMsr {
            msr: IA32_PERFEVTSEL0,
        },
    );
    probe.push(
        cpu,
        Op::RdMsr {
            msr: IA32_PERF_GLOBAL_CTRL,
        },
    );
    dev.run(&mut probe)?;
    let Some(Ok(Value::Cpuid { eax, .. })) = probe.result(0).map(|r| r.value) else {
        return Err("CPUID failed".into());
    };
    let (version, counters) = (eax & 0xff, (eax >> 8) & 0xff);
    if version == 0 || counters == 0 {
        println!("no PMU: CPUID.0AH version {version}, {counters} counters; nothing to count");
        return Ok(());
    }
    let evtsel = value(&probe, 1)?;
    let global = if version >= 2 { value(&probe, 2)? } else { 0 };
    if evtsel & EN != 0 {
        return Err(format!(
            "counter 0 is in use (PERFEVTSEL0={evtsel:#x}): NMI watchdog or perf?"
        )
        .into());
    }

    let mut b = Batch::new();
    b.push(
        cpu,
        Op::WrMsr {
            msr: IA32_PMC0,
            value: 0,
        },
    );
    b.push(
        cpu,
        Op::WrMsr {
            msr: IA32_PERFEVTSEL0,
            value: INST_RETIRED | USR | OS | EN,
        },
    );
    if version >= 2 {
        b.push(
            cpu,
            Op::RmwMsr {
                msr: IA32_PERF_GLOBAL_CTRL,
                clear: 0,
                set: 1,
            },
        );
    }
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        },
    );
    let first = b.push(cpu, Op::RdPmc { ecx: 0 });
    b.push(cpu, Op::Delay { ns: 10_000 });
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        },
    );
    let second = b.push(cpu, Op::RdPmc { ecx: 0 });
    b.push(
        cpu,
        Op::WrMsr {
            msr: IA32_PERFEVTSEL0,
            value: evtsel,
        },
    );
    if version >= 2 {
        b.push(
            cpu,
            Op::WrMsr {
                msr: IA32_PERF_GLOBAL_CTRL,
                value: global,
            },
        );
    }
    dev.run(&mut b)?;
    let n = value(&b, second)?.wrapping_sub(value(&b, first)?);
    println!("PMU version {version}, {counters} counters; instructions retired on CPU {cpu} across a 10 us busy-wait: {n}");
    Ok(())
}
