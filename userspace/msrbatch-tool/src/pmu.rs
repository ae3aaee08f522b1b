// SPDX-License-Identifier: GPL-2.0
//! `msrbatch pmu`, live or offline from a CPUID dump. The PMU knowledge
//! itself is the library's (`msrbatch::pmu`).

pub use msrbatch::pmu::{cesr_decode, cesr_describe, cesr_encode, event_name};
use msrbatch::pmu::{evsel, ARCH_EVENTS};
use msrbatch::pmu::{probe, CpuidDump};
use msrbatch::Backend;
use std::io::Write;

/// Encodes an evsel spec as `msrbatch evsel` does: a spec that names an
/// event by name (`instructions`) and no flag counts in user and kernel mode
/// and is enabled (`usr,os,en` added), as perf and libpfm encode a named
/// event without modifiers. Raw fields (`event=`, `umask=`, what decoding a
/// value prints) and any named flag are taken as written, so a decoded value
/// encodes back to itself.
pub fn evsel_encode_default(spec: &str) -> msrbatch::Result<u64> {
    let v = evsel::encode(spec)?;
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    let names_an_event = items
        .iter()
        .any(|i| ARCH_EVENTS.iter().any(|e| e.name == *i));
    let names_a_flag = items.iter().any(|i| evsel::flag(i).is_some());
    Ok(if names_an_event && !names_a_flag {
        v | evsel::USR | evsel::OS | evsel::EN
    } else {
        v
    })
}

/// `msrbatch pmu`: decodes each of `cpus` through `dev`, or every CPU of
/// the CPUID dump `dump` (then `dev` is not used); `json` prints one JSON
/// object per CPU and line.
pub fn pmu(
    dev: Option<&dyn Backend>,
    cpus: &[u32],
    dump: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let decoded: Vec<(String, msrbatch::pmu::PmuInfo)> = match (dump, dev) {
        (Some(path), _) => CpuidDump::read(path)
            .map_err(|e| e.what().to_string())?
            .cpus
            .iter()
            .map(|c| (c.label.clone(), c.pmu()))
            .collect(),
        (None, Some(dev)) => cpus
            .iter()
            .map(|&cpu| {
                Ok((
                    format!("CPU {cpu}"),
                    probe(dev, cpu).map_err(|e| e.to_string())?,
                ))
            })
            .collect::<Result<_, String>>()?,
        (None, None) => return Err("no device and no --cpuid-dump".into()),
    };
    let w = |e: std::io::Error| e.to_string();
    for (label, p) in &decoded {
        if json {
            writeln!(out, "{}", p.to_json(label)).map_err(w)?;
        } else {
            write!(out, "{}", p.report(label)).map_err(w)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evsel_defaults_like_perf() {
        let encode = |s: &str| evsel_encode_default(s).ok();
        assert_eq!(encode("instructions"), Some(0x4300c0));
        assert_eq!(encode("cycles"), Some(0x43003c));
        assert_eq!(encode("instructions,usr,en"), Some(0x4100c0));
        // Raw fields, as decoding prints them, stay as written.
        assert_eq!(encode("event=0xc0"), Some(0xc0));
        for v in [0x4300c0u64, 0x41013c, 0x0, 0xf00ff00ff] {
            let spec = evsel::decode(v).unwrap();
            assert_eq!(encode(&spec), Some(v), "{spec}");
        }
        assert!(evsel_encode_default("nope").is_err());
    }
    use msrbatch::sim::SimPmu;

    fn testdata(name: &str) -> String {
        format!(
            "{}/../msrbatch/testdata/cpuid/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    fn run(dev: Option<&dyn Backend>, dump: Option<&str>, json: bool) -> String {
        let mut out = Vec::new();
        pmu(dev, &[0], dump, json, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn pmu_decodes_a_hybrid_dump_per_cpu() {
        let text = run(None, Some(&testdata("raptorlake-hybrid.txt")), false);
        assert!(
            text.contains("Logical CPU #0: GenuineIntel signature 0xb0671 (hybrid: Core)"),
            "{text}"
        );
        assert!(
            text.contains("Logical CPU #19: GenuineIntel signature 0xb0671 (hybrid: Atom)"),
            "{text}"
        );
        assert_eq!(text.matches("architectural perfmon version 5").count(), 2);
        let json = run(None, Some(&testdata("raptorlake-hybrid.txt")), true);
        let cpus: Vec<serde_json::Value> = json
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(cpus.len(), 2);
        assert_eq!(cpus[1]["core_type"], "atom");
        for c in &cpus {
            assert_eq!(c["vendor"], "GenuineIntel");
            assert_eq!(
                (c["version"].as_u64(), c["gp_counters"].as_u64()),
                (Some(5), Some(6))
            );
            assert_eq!(
                (
                    c["gp_width"].as_u64(),
                    c["fixed_counters"].as_u64(),
                    c["fixed_width"].as_u64()
                ),
                (Some(48), Some(3), Some(48))
            );
            assert_eq!(c["events"].as_array().unwrap().len(), 7);
        }
    }

    #[test]
    fn pmu_live_through_the_model() {
        // The path `msrbatch pmu` takes on a device: probe, then report.
        let path = testdata("zen4-raphael.txt");
        let m = SimPmu::from_file(&path).unwrap();
        let text = run(Some(&m), None, false);
        assert!(text.contains("PerfMonV2 (global control): yes"), "{text}");
        assert!(!text.contains("no PMU"), "{text}");
        let j: serde_json::Value = serde_json::from_str(run(Some(&m), None, true).trim()).unwrap();
        assert_eq!(
            (j["rdpmc_ok"].as_bool(), j["present"].as_bool()),
            (Some(true), Some(true))
        );
        assert_eq!(j["amd"]["umc_counters"], 8);
    }

    #[test]
    fn pmu_on_pentium_and_core2_dumps() {
        let text = run(None, Some(&testdata("pentium-mmx-tillamook.txt")), false);
        assert!(
            text.starts_with(
                "CPU 0: GenuineIntel signature 0x582\nPentium (P5) counters: 2, 40 bits wide"
            ),
            "{text}"
        );
        assert!(
            text.contains("  TRANSITIONS_BETWEEN_MMX_AND_FP_INSTRUCTIONS    event=0x2d  CTR1 only"),
            "{text}"
        );
        // Live, through the model: probe reads CESR and says both halves in words.
        let m = SimPmu::from_file(testdata("pentium-mmx-tillamook.txt")).unwrap();
        assert!(m.wrmsr(0, 0x11, 0x00d7_01d6));
        let text = run(Some(&m), None, false);
        for l in [
            "CESR = 0xd701d6:",
            "  CTR0: ES0=0x16 (INSTRUCTIONS_EXECUTED), CC0=111: counts clocks (duration) at any CPL; PC0=0: the PM0/BP0 pin signals when it increments",
            "  CTR1: ES1=0x17 (INSTRUCTIONS_EXECUTED_V_PIPE), CC1=011: counts events at any CPL; PC1=0: the PM1/BP1 pin signals when it increments",
        ] {
            assert!(text.lines().any(|x| x == l), "{l} in\n{text}");
        }
        let j: serde_json::Value = serde_json::from_str(run(Some(&m), None, true).trim()).unwrap();
        assert_eq!(j["p5"]["cesr"], "0xd701d6");
        assert_eq!(j["p5"]["rdpmc"], true);
        let j: serde_json::Value =
            serde_json::from_str(run(None, Some(&testdata("pentium-p54c.txt")), true).trim())
                .unwrap();
        assert_eq!(
            (j["p5"]["mmx"].as_bool(), j["p5"]["rdpmc"].as_bool()),
            (Some(false), Some(false))
        );
        assert_eq!(j["events"].as_array().unwrap().len(), 38);
        // Core 2: the fixed counters CPUID leaves out, and why.
        let text = run(None, Some(&testdata("core2-conroe.txt")), false);
        assert!(text.contains("fixed counters: 3, 40 bits wide"), "{text}");
        assert!(
            text.contains("quirk: CPUID.0AH:EDX reports 0 fixed counters"),
            "{text}"
        );
        let j: serde_json::Value =
            serde_json::from_str(run(None, Some(&testdata("core2-conroe.txt")), true).trim())
                .unwrap();
        assert_eq!(j["fixed_counters"], 3);
        // That and Linux's Core 2 event constraints (msrbatch::pmu::quirks).
        let quirks = j["quirks"].as_array().unwrap();
        assert_eq!(quirks.len(), 2);
        assert!(quirks[1]
            .as_str()
            .unwrap()
            .starts_with("Linux's intel_core2_event_constraints: "));
    }

    /// -C takes a list: one report per CPU asked for.
    #[test]
    fn pmu_live_on_a_cpu_list() {
        let m = SimPmu::from_file(testdata("raptorlake-hybrid.txt")).unwrap();
        let mut out = Vec::new();
        pmu(Some(&m), &[1, 0], None, true, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let v: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v.len(), 2, "{text}");
        assert_eq!(
            (&v[0]["core_type"], &v[1]["core_type"]),
            (&"atom".into(), &"core".into())
        );
    }

    #[test]
    fn pmu_dump_errors() {
        let mut out = Vec::new();
        let e = pmu(None, &[0], Some("/nonexistent/dump"), false, &mut out).unwrap_err();
        assert!(e.contains("/nonexistent/dump"), "{e}");
    }
}
