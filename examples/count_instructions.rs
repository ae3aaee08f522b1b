// SPDX-License-Identifier: GPL-2.0
//! Count instructions retired across a 10 us busy-wait on CPU 0 with the
//! counter API: `Session::open` probes the PMU, places the event, checks
//! nobody owns the counter and programs it; then one batch starts it, reads
//! it between CPUID fences around the busy-wait and stops it, atomically on
//! CPU 0; restore every PMU MSR. `rust-count-instructions FILE` runs on the
//! simulated PMU of the CPU in the CPUID dump FILE instead of /dev/msrbatch.
//! Without a PMU it says so and exits 0.

use msrbatch::counters::Session;
use msrbatch::{Backend, Batch, Device, Op};

/// What the example prints, counted through `dev` (device or simulation).
fn count<B: Backend + ?Sized>(dev: &B, cpu: u32) -> Result<String, msrbatch::Error> {
    let mut s = match Session::open(dev, cpu, "instructions", false) {
        Err(e) if e.errno().0 == libc::ENODEV => {
            return Ok(format!("{}; nothing to count", e.what()))
        }
        s => s?,
    };
    let what = s.plan().describe().remove(0);
    let mut b = Batch::new();
    s.push_start(&mut b);
    let first = s.push_read(&mut b);
    b.push(cpu, Op::Delay { ns: 10_000 });
    let second = s.push_read(&mut b);
    s.push_stop(&mut b);
    let ran = dev.run(&mut b);
    s.restore()?;
    ran?;
    let n = s.deltas(&s.values(&b, first)?, &s.values(&b, second)?)[0];
    Ok(format!(
        "instructions retired on CPU {cpu} across a 10 us busy-wait: {n} ({what})"
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = match std::env::args().nth(1) {
        Some(dump) => count(&msrbatch::sim::SimPmu::from_file(dump)?, 0)?,
        None => count(&Device::open()?, 0)?,
    };
    println!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use msrbatch::sim::{SimPmu, Source};

    fn model(name: &str) -> SimPmu {
        SimPmu::from_file(format!(
            "{}/testdata/cpuid/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn counts_the_busy_wait_on_the_model() {
        // The model runs a 10 us DELAY as 10000 kernel cycles; say 2
        // instructions retire per cycle.
        for (name, counter) in [
            ("skylake.txt", "IA32_FIXED_CTR0"),
            // Core 2 has the fixed counters CPUID does not enumerate.
            ("core2-conroe.txt", "IA32_FIXED_CTR0"),
            ("zen2-matisse.txt", "AMD_PERF_CTL0"),
            ("pentium-mmx-tillamook.txt", "P5_CESR bits 9:0"),
            ("zen4-raphael.txt", "AMD_PERF_CTL0"),
        ] {
            let m = model(name);
            m.set_delay_mix(vec![(Source::Named("instructions"), 2)]);
            let out = count(&m, 0).unwrap();
            assert!(
                out.starts_with(
                    "instructions retired on CPU 0 across a 10 us busy-wait: 20000 (instructions: "
                ) && out.contains(counter),
                "{name}: {out}"
            );
        }
    }

    #[test]
    fn without_a_pmu_it_says_so() {
        let d = msrbatch::pmu::CpuidDump::parse(
            "CPUID 00000000: 0000000D-756E6547-6C65746E-49656E69\n",
        )
        .unwrap();
        let out = count(&SimPmu::new(&d), 0).unwrap();
        assert!(out.starts_with("no PMU: CPUID.0AH version 0"), "{out}");
    }

    #[test]
    fn refuses_an_owned_counter() {
        let m = model("skylake.txt");
        assert!(m.wrmsr(0, msrbatch::msr::IA32_FIXED_CTR_CTRL, 3));
        let e = count(&m, 0).unwrap_err();
        assert_eq!(e.errno().0, libc::EBUSY, "{e}");
    }
}
