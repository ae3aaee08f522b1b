// SPDX-License-Identifier: GPL-2.0
//! turbostat's derived columns, from two samples of one CPU
//! ([`sampler::Sample`](crate::sampler::Sample)).
//!
//! Each column exists only where the CPU's sampled ops include what it is
//! computed from ([`Sources::of`]). The interval is measured, not nominal:
//! the TSC ticks between the two samples (every sample carries the TSC)
//! over the TSC's rate, which the caller measures against a clock (TSC
//! ticks per second of `CLOCK_MONOTONIC`; not the periods the samples were
//! due in, since a timer runs late or early, nor CPUID leaf 15H):
//!
//! - `TSC_MHz`: the TSC's measured rate.
//! - `Avg_MHz`: IA32_APERF ticks over the interval.
//! - `Busy%`: 100 × IA32_MPERF ticks / TSC ticks.
//! - `Bzy_MHz`: `TSC_MHz` × APERF ticks / MPERF ticks.
//! - `Pkg_J`, `PkgWatt` (and `Cor_J`, `CorWatt`): the energy counter's
//!   increase (32 bits, wrapping) times its unit, and that over the
//!   interval. Intel: MSR_PKG_ENERGY_STATUS (0x611) with
//!   MSR_RAPL_POWER_UNIT (0x606); AMD: MSR_AMD_PKG_ENERGY_STATUS
//!   (0xC001029B) and MSR_AMD_CORE_ENERGY_STATUS (0xC001029A) with
//!   MSR_AMD_RAPL_POWER_UNIT (0xC0010299). The unit MSR must be sampled on
//!   the same CPU (its value from the later sample is used).

use crate::msr::{
    IA32_APERF, IA32_MPERF, MSR_AMD_CORE_ENERGY_STATUS, MSR_AMD_PKG_ENERGY_STATUS,
    MSR_AMD_RAPL_POWER_UNIT, MSR_PKG_ENERGY_STATUS, MSR_RAPL_POWER_UNIT,
};
use crate::sampler::Sample;
use crate::Op;
use std::collections::BTreeMap;

/// Joules per count of the energy status counters, from a RAPL power unit
/// MSR's value (Intel 0x606, AMD 0xC0010299): bits 12:8 are the energy
/// status unit ESU, a count is 1/2^ESU J.
pub(crate) fn energy_unit_joules(power_unit: u64) -> f64 {
    let esu = (power_unit >> 8) & 0x1f;
    1.0 / (1u64 << esu) as f64
}

/// Counts an energy status counter advanced from `old` to `new`: its low
/// 32 bits, which wrap.
pub(crate) fn energy_counts(old: u64, new: u64) -> u64 {
    u64::from((new as u32).wrapping_sub(old as u32))
}

/// Which of a CPU's ops (indices in its sample's values) feed the derived
/// columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    aperf: Option<usize>,
    mperf: Option<usize>,
    /// Package energy and its unit.
    pkg: Option<(usize, usize)>,
    /// Core energy and its unit.
    core: Option<(usize, usize)>,
}

impl Sources {
    /// Finds the ops of a CPU (in sample order) the columns need.
    pub fn of(ops: &[Op]) -> Self {
        let find = |m: u32| ops.iter().position(|op| *op == Op::RdMsr { msr: m });
        let energy = |counter: u32, unit: u32| Some((find(counter)?, find(unit)?));
        Sources {
            aperf: find(IA32_APERF),
            mperf: find(IA32_MPERF),
            pkg: energy(MSR_PKG_ENERGY_STATUS, MSR_RAPL_POWER_UNIT)
                .or_else(|| energy(MSR_AMD_PKG_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT)),
            core: energy(MSR_AMD_CORE_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT),
        }
    }

    /// Whether `Avg_MHz`, `Busy%` and `Bzy_MHz` can be computed.
    pub fn has_frequency(&self) -> bool {
        self.aperf.is_some() && self.mperf.is_some()
    }

    /// Whether `Pkg_J` and `PkgWatt` can be computed.
    pub fn has_package_energy(&self) -> bool {
        self.pkg.is_some()
    }

    /// Whether `Cor_J` and `CorWatt` can be computed.
    pub fn has_core_energy(&self) -> bool {
        self.core.is_some()
    }
}

/// The derived columns of one CPU over one interval; `None` where the CPU
/// does not sample the source, or a source op faulted in either sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Derived {
    /// The interval in nanoseconds.
    pub interval_ns: u64,
    /// TSC ticks per microsecond.
    pub tsc_mhz: f64,
    /// APERF ticks per microsecond.
    pub avg_mhz: Option<f64>,
    /// Percent of TSC ticks the CPU was in C0 (MPERF / TSC).
    pub busy_pct: Option<f64>,
    /// Frequency while in C0.
    pub bzy_mhz: Option<f64>,
    /// Package energy over the interval, joules.
    pub pkg_joules: Option<f64>,
    /// Package power, watts.
    pub pkg_watts: Option<f64>,
    /// Core energy over the interval, joules.
    pub core_joules: Option<f64>,
    /// Core power, watts.
    pub core_watts: Option<f64>,
}

/// The value of op `i` in `s`, if it did not fault.
fn value(s: &Sample, i: usize) -> Option<u64> {
    let failed = i < 64 && s.failed & (1 << i) != 0;
    (!failed).then(|| s.values.get(i).map(|v| v[0])).flatten()
}

/// The columns between `prev` and `cur`, two samples of one CPU with
/// sources `src`, on a TSC that ticks `tsc_hz` times a second. `None` if
/// `cur` is not a later period than `prev`, the TSC did not advance, or
/// `tsc_hz` is not positive.
pub fn derive(src: &Sources, tsc_hz: f64, prev: &Sample, cur: &Sample) -> Option<Derived> {
    cur.seq.checked_sub(prev.seq).filter(|&n| n > 0)?;
    let tsc = cur.tsc.wrapping_sub(prev.tsc);
    if tsc == 0 || tsc > i64::MAX as u64 || tsc_hz.is_nan() || tsc_hz <= 0.0 {
        return None;
    }
    let ticks = tsc as f64;
    // Per second of the interval: x * tsc_hz / ticks (in this order, exact
    // for round figures).
    let rate = |x: f64| x * tsc_hz / ticks;
    let delta = |i: Option<usize>| Some(value(cur, i?)?.wrapping_sub(value(prev, i?)?) as f64);
    let (aperf, mperf) = (delta(src.aperf), delta(src.mperf));
    let tsc_mhz = tsc_hz / 1e6;
    let energy = |e: Option<(usize, usize)>| {
        let (counter, unit) = e?;
        let counts = energy_counts(value(prev, counter)?, value(cur, counter)?);
        let joules = counts as f64 * energy_unit_joules(value(cur, unit)?);
        Some((joules, rate(joules)))
    };
    let (pkg, core) = (energy(src.pkg), energy(src.core));
    Some(Derived {
        interval_ns: (ticks / tsc_hz * 1e9).round() as u64,
        tsc_mhz,
        avg_mhz: aperf.map(|a| rate(a) / 1e6),
        busy_pct: mperf.map(|m| 100.0 * m / tsc as f64),
        bzy_mhz: aperf
            .zip(mperf)
            .filter(|&(_, m)| m > 0.0)
            .map(|(a, m)| tsc_mhz * a / m),
        pkg_joules: pkg.map(|p| p.0),
        pkg_watts: pkg.map(|p| p.1),
        core_joules: core.map(|c| c.0),
        core_watts: core.map(|c| c.1),
    })
}

/// The last sample of each CPU, to derive the columns of the next.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    last: BTreeMap<u32, Sample>,
}

impl Tracker {
    /// No samples yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The columns from `s`'s CPU's previous sample to `s` (`None` for its
    /// first), on a TSC of `tsc_hz`; `s` becomes the previous one.
    pub fn push(&mut self, src: &Sources, tsc_hz: f64, s: &Sample) -> Option<Derived> {
        let d = self
            .last
            .get(&s.cpu)
            .and_then(|prev| derive(src, tsc_hz, prev, s));
        self.last.insert(s.cpu, s.clone());
        d
    }

    /// Forgets `cpu`'s previous sample (it went offline: its counters'
    /// deltas across the gap mean nothing).
    pub fn forget(&mut self, cpu: u32) {
        self.last.remove(&cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rd(msr: u32) -> Op {
        Op::RdMsr { msr }
    }

    fn sample(seq: u64, tsc: u64, failed: u64, values: &[u64]) -> Sample {
        Sample {
            cpu: 0,
            seq,
            tsc,
            failed,
            values: values.iter().map(|&v| [v, 0]).collect(),
        }
    }

    /// RAPL units: 0xA0E03 (a common Intel value) has ESU 14: 1/16384 J,
    /// 61.035 µJ; AMD's usual 0xA1003 has ESU 16: 15.259 µJ.
    #[test]
    fn energy_units() {
        assert_eq!(energy_unit_joules(0xA0E03), 1.0 / 16384.0);
        assert_eq!((energy_unit_joules(0xA0E03) * 1e9).round(), 61035.0);
        assert_eq!((energy_unit_joules(0xA1003) * 1e9).round(), 15259.0);
        assert_eq!(energy_unit_joules(0), 1.0);
        // The counters are 32 bits: a wrap still counts forward.
        assert_eq!(energy_counts(0xFFFF_FF00, 0x100), 0x200);
        assert_eq!(energy_counts(0x1_0000_0005, 0x7), 2);
    }

    /// A 2.4 GHz TSC: 4.8 M TSC ticks is 2 ms; APERF 6 M and
    /// MPERF 4 M ticks: Avg_MHz 3000, Busy% 83.3, Bzy_MHz 3600; 0x200
    /// counts of 61 µJ is 31.25 mJ, 15.625 W over 2 ms.
    #[test]
    fn turbostat_columns() {
        let ops = [
            rd(IA32_APERF),
            rd(IA32_MPERF),
            rd(MSR_PKG_ENERGY_STATUS),
            rd(MSR_RAPL_POWER_UNIT),
        ];
        let src = Sources::of(&ops);
        assert!(src.has_frequency() && src.has_package_energy() && !src.has_core_energy());
        let a = sample(10, 1_000_000, 0, &[100, 50, 0xFFFF_FF00, 0xA0E03]);
        let b = sample(12, 5_800_000, 0, &[6_000_100, 4_000_050, 0x100, 0xA0E03]);
        let d = derive(&src, 2.4e9, &a, &b).unwrap();
        assert_eq!(d.interval_ns, 2_000_000);
        assert_eq!(d.tsc_mhz, 2400.0);
        assert_eq!(d.avg_mhz, Some(3000.0));
        assert_eq!(d.busy_pct.map(|p| (p * 10.0).round()), Some(833.0));
        assert_eq!(d.bzy_mhz, Some(3600.0));
        assert_eq!(d.pkg_joules, Some(0.03125));
        assert_eq!(d.pkg_watts, Some(15.625));
        assert_eq!((d.core_joules, d.core_watts), (None, None));
        // Not a later period: nothing.
        assert_eq!(derive(&src, 2.4e9, &b, &a), None);
        assert_eq!(derive(&src, 2.4e9, &b, &b), None);
        // No measured rate: nothing.
        assert_eq!(derive(&src, 0.0, &a, &b), None);
        assert_eq!(derive(&src, f64::NAN, &a, &b), None);
        // The rate, not the periods the samples were due in: a timer that
        // ran late (2 periods of 1 ms, 4 ms of TSC ticks) does not make
        // the TSC look twice as fast.
        let late = sample(
            12,
            1_000_000 + 9_600_000,
            0,
            &[12_000_100, 8_000_050, 0x100, 0xA0E03],
        );
        let d = derive(&src, 2.4e9, &a, &late).unwrap();
        assert_eq!(
            (d.interval_ns, d.tsc_mhz, d.avg_mhz),
            (4_000_000, 2400.0, Some(3000.0))
        );
        // A faulted APERF: no frequency columns, the rest still.
        let c = sample(13, 8_200_000, 0b1, &[0, 6_000_050, 0x300, 0xA0E03]);
        let d = derive(&src, 2.4e9, &b, &c).unwrap();
        assert_eq!((d.avg_mhz, d.bzy_mhz), (None, None));
        assert_eq!(d.busy_pct.map(|p| (p * 1e6).round()), Some(83_333_333.0));
        assert_eq!(d.pkg_joules, Some(512.0 / 16384.0));
    }

    /// AMD: package and core energy with the AMD unit; MPERF that did not
    /// advance (TCG reads 0) gives no Bzy_MHz rather than a division by 0.
    #[test]
    fn amd_energy_and_idle_counters() {
        let ops = [
            rd(MSR_AMD_RAPL_POWER_UNIT),
            rd(MSR_AMD_CORE_ENERGY_STATUS),
            rd(MSR_AMD_PKG_ENERGY_STATUS),
            rd(IA32_APERF),
            rd(IA32_MPERF),
        ];
        let src = Sources::of(&ops);
        assert!(src.has_core_energy() && src.has_package_energy());
        let a = sample(0, 0, 0, &[0xA1003, 1000, 5000, 0, 0]);
        let b = sample(
            1,
            1_000_000,
            0,
            &[0xA1003, 1000 + 65536, 5000 + 4 * 65536, 0, 0],
        );
        let d = derive(&src, 1e9, &a, &b).unwrap();
        assert_eq!(d.tsc_mhz, 1000.0);
        assert_eq!((d.core_joules, d.core_watts), (Some(1.0), Some(1000.0)));
        assert_eq!((d.pkg_joules, d.pkg_watts), (Some(4.0), Some(4000.0)));
        assert_eq!(
            (d.avg_mhz, d.busy_pct, d.bzy_mhz),
            (Some(0.0), Some(0.0), None)
        );
        // Energy without its unit MSR: no column.
        let src = Sources::of(&[rd(MSR_PKG_ENERGY_STATUS), rd(IA32_APERF)]);
        assert!(!src.has_package_energy() && !src.has_frequency());
    }

    #[test]
    fn tracker_pairs_samples_of_one_cpu() {
        let src = Sources::of(&[rd(IA32_APERF), rd(IA32_MPERF)]);
        let mut t = Tracker::new();
        let mut s = sample(0, 1000, 0, &[0, 0]);
        assert_eq!(t.push(&src, 2e9, &s), None);
        let other = Sample {
            cpu: 1,
            ..s.clone()
        };
        assert_eq!(t.push(&src, 2e9, &other), None);
        s = sample(1, 2_001_000, 0, &[2_000_000, 1_000_000]);
        let d = t.push(&src, 2e9, &s).unwrap();
        assert_eq!((d.tsc_mhz, d.bzy_mhz), (2000.0, Some(4000.0)));
        t.forget(0);
        assert_eq!(t.push(&src, 2e9, &sample(2, 4_001_000, 0, &[0, 0])), None);
    }
}
