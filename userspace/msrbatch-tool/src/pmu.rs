// SPDX-License-Identifier: GPL-2.0
//! Counter programming helpers: CPUID leaf 0AH (and AMD) decode, the
//! IA32_PERFEVTSEL encoding, architectural event names, and `stat`.

use msrbatch::{Batch, Device, Op, Value};
use std::fmt::Write as _;

/// Architectural events: name, event select, umask, CPUID.0AH EBX bit.
pub const ARCH_EVENTS: &[(&str, u8, u8)] = &[
    ("cycles", 0x3c, 0x00),
    ("instructions", 0xc0, 0x00),
    ("ref-cycles", 0x3c, 0x01),
    ("llc-references", 0x2e, 0x4f),
    ("llc-misses", 0x2e, 0x41),
    ("branches", 0xc4, 0x00),
    ("branch-misses", 0xc5, 0x00),
    ("topdown-slots", 0xa4, 0x01),
];

/// What CPUID says about the core PMU of one CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PmuInfo {
    pub vendor: String,
    /// Intel: CPUID.0AH EAX[7:0]; AMD: 2 with PerfMonV2, 1 with counters, else 0.
    pub version: u32,
    pub gp_counters: u32,
    pub gp_width: u32,
    pub fixed_counters: u32,
    pub fixed_width: u32,
    /// Architectural events available (Intel), by index into `ARCH_EVENTS`.
    pub events: Vec<bool>,
    /// AMD: PERF_CTL/PERF_CTR MSR base and stride.
    pub amd: bool,
    /// RDPMC of counter 0 ran without faulting (AMD enumerates its legacy
    /// counters nowhere, and a hypervisor may hide the PMU).
    pub rdpmc_ok: bool,
}

fn cpuid(b: &Batch, i: usize) -> [u32; 4] {
    match b.result(i).map(|r| r.value) {
        Some(Ok(Value::Cpuid { eax, ebx, ecx, edx })) => [eax, ebx, ecx, edx],
        _ => [0; 4],
    }
}

/// Decodes the PMU from CPUID leaves 0, 0AH, 80000001H and 80000022H.
pub fn decode(
    leaf0: [u32; 4],
    leaf_a: [u32; 4],
    ext1: [u32; 4],
    ext22: [u32; 4],
    max_ext: u32,
) -> PmuInfo {
    let mut vendor = Vec::new();
    for r in [leaf0[1], leaf0[3], leaf0[2]] {
        vendor.extend_from_slice(&r.to_le_bytes());
    }
    let vendor = String::from_utf8_lossy(&vendor)
        .trim_end_matches('\0')
        .to_string();
    let mut p = PmuInfo {
        vendor,
        ..Default::default()
    };
    if p.vendor == "AuthenticAMD" || p.vendor == "HygonGenuine" {
        p.amd = true;
        let core_ext = ext1[2] & (1 << 23) != 0;
        if max_ext >= 0x8000_0022 && ext22[0] & 1 != 0 {
            p.version = 2;
            p.gp_counters = ext22[1] & 0xf;
        } else {
            p.version = 1;
            p.gp_counters = if core_ext { 6 } else { 4 };
        }
        p.gp_width = 48;
        return p;
    }
    let [eax, ebx, ecx, edx] = leaf_a;
    p.version = eax & 0xff;
    p.gp_counters = (eax >> 8) & 0xff;
    p.gp_width = (eax >> 16) & 0xff;
    let len = ((eax >> 24) & 0xff) as usize;
    if p.version > 1 {
        p.fixed_counters = edx & 0x1f;
        p.fixed_width = (edx >> 5) & 0xff;
        if p.version >= 5 && ecx != 0 {
            p.fixed_counters = p.fixed_counters.max(32 - ecx.leading_zeros());
        }
    }
    p.events = (0..ARCH_EVENTS.len())
        .map(|i| i < len && ebx & (1 << i) == 0)
        .collect();
    p
}

/// Reads CPUID on `cpu` and decodes the PMU.
pub fn probe(dev: &Device, cpu: u32) -> Result<PmuInfo, String> {
    let mut b = Batch::new();
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        },
    );
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0xa,
            subleaf: 0,
        },
    );
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0x8000_0000,
            subleaf: 0,
        },
    );
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0x8000_0001,
            subleaf: 0,
        },
    );
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0x8000_0022,
            subleaf: 0,
        },
    );
    dev.run(&mut b).map_err(|e| e.to_string())?;
    let leaf0 = cpuid(&b, 0);
    let leaf_a = if leaf0[0] >= 0xa {
        cpuid(&b, 1)
    } else {
        [0; 4]
    };
    Ok(decode(
        leaf0,
        leaf_a,
        cpuid(&b, 3),
        cpuid(&b, 4),
        cpuid(&b, 2)[0],
    ))
}

impl PmuInfo {
    /// Whether there are programmable counters at all.
    pub fn present(&self) -> bool {
        self.version > 0 && self.gp_counters > 0 && self.rdpmc_ok
    }

    /// Why there is no PMU, in words.
    pub fn absence(&self) -> String {
        if self.amd {
            format!(
                "no PMU: {} counters do not answer (RDPMC 0 faults)",
                self.vendor
            )
        } else if self.version == 0 || self.gp_counters == 0 {
            format!(
                "no PMU: CPUID.0AH version {}, {} counters",
                self.version, self.gp_counters
            )
        } else {
            format!(
                "no PMU: CPUID.0AH version {} but RDPMC 0 faults",
                self.version
            )
        }
    }

    /// The MSRs of general-purpose counter `i`: (event select, counter).
    pub fn counter_msrs(&self, i: u32) -> (u32, u32) {
        if self.amd {
            (0xc001_0200 + 2 * i, 0xc001_0201 + 2 * i)
        } else {
            (0x186 + i, 0xc1 + i)
        }
    }

    /// Human-readable report, as `msrbatch pmu` prints it.
    pub fn report(&self, cpu: u32) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "CPU {cpu}: {}", self.vendor);
        if !self.present() {
            let _ = writeln!(s, "{}", self.absence());
            return s;
        }
        if self.amd {
            let _ = writeln!(
                s,
                "AMD core performance counters: {} (PERF_CTL/PERF_CTR {}), {} bits wide",
                self.gp_counters,
                if self.gp_counters > 4 {
                    "at 0xc0010200"
                } else {
                    "legacy or extended"
                },
                self.gp_width
            );
            let _ = writeln!(
                s,
                "PerfMonV2 (global control): {}",
                if self.version >= 2 { "yes" } else { "no" }
            );
            return s;
        }
        if !self.present() {
            let _ = writeln!(
                s,
                "no PMU: CPUID.0AH version {}, {} counters",
                self.version, self.gp_counters
            );
            return s;
        }
        let _ = writeln!(s, "architectural perfmon version {}", self.version);
        let _ = writeln!(s, "general-purpose counters: {} per logical CPU, {} bits wide (IA32_PMC0.., IA32_PERFEVTSEL0..)",
            self.gp_counters, self.gp_width);
        let _ = writeln!(
            s,
            "fixed counters: {}, {} bits wide (IA32_FIXED_CTR0.., RDPMC with bit 30)",
            self.fixed_counters, self.fixed_width
        );
        let _ = writeln!(s, "architectural events:");
        for (i, (name, ev, um)) in ARCH_EVENTS.iter().enumerate() {
            let avail = self.events.get(i).copied().unwrap_or(false);
            let _ = writeln!(
                s,
                "  {name:<15} event=0x{ev:02x},umask=0x{um:02x}  {}",
                if avail { "available" } else { "not available" }
            );
        }
        s
    }
}

/// PERFEVTSEL flag bits and their names, in canonical order.
const FLAGS: &[(&str, u32)] = &[
    ("usr", 16),
    ("os", 17),
    ("edge", 18),
    ("pc", 19),
    ("int", 20),
    ("any", 21),
    ("en", 22),
    ("inv", 23),
];

/// Encodes `event=..,umask=..,cmask=..,usr,os,...` (or an event name) into
/// an IA32_PERFEVTSEL value. Event selects above 0xff put bits 11:8 into
/// 35:32 (AMD's extended event select).
pub fn evsel_encode(spec: &str) -> Result<u64, String> {
    let mut v = 0u64;
    let num = |k: &str, s: &str, max: u64| match msrbatch::number::parse_u64(s) {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(format!("{k}={s}: want a number up to {max:#x}")),
        Err(e) => Err(format!("{k}={s}: {e}")),
    };
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some((k, val)) = item.split_once('=') {
            match k {
                "event" => {
                    let e = num(k, val, 0xfff)?;
                    v = (v & !0xf_0000_00ff) | (e & 0xff) | ((e >> 8) << 32);
                }
                "umask" => v = (v & !0xff00) | (num(k, val, 0xff)? << 8),
                "cmask" => v = (v & !0xff00_0000) | (num(k, val, 0xff)? << 24),
                _ => return Err(format!("unknown field '{k}' (event, umask, cmask)")),
            }
        } else if let Some(&(_, bit)) = FLAGS.iter().find(|(n, _)| *n == item) {
            v |= 1 << bit;
        } else if let Some(&(_, ev, um)) = ARCH_EVENTS.iter().find(|(n, _, _)| *n == item) {
            v = (v & !0xf_0000_ffff) | u64::from(ev) | (u64::from(um) << 8);
        } else {
            return Err(format!("unknown item '{item}' (fields: event=, umask=, cmask=; flags: usr os edge pc int any en inv; names: {})",
                ARCH_EVENTS.iter().map(|e| e.0).collect::<Vec<_>>().join(" ")));
        }
    }
    Ok(v)
}

/// Decodes an IA32_PERFEVTSEL value into the canonical spec that
/// [`evsel_encode`] turns back into the same value.
pub fn evsel_decode(v: u64) -> Result<String, String> {
    let known = 0xf_ffff_ffffu64;
    if v & !known != 0 {
        return Err(format!("bits {:#x} are not PERFEVTSEL fields", v & !known));
    }
    let event = (v & 0xff) | (((v >> 32) & 0xf) << 8);
    let mut s = format!("event=0x{event:02x},umask=0x{:02x}", (v >> 8) & 0xff);
    let cmask = (v >> 24) & 0xff;
    if cmask != 0 {
        let _ = write!(s, ",cmask=0x{cmask:02x}");
    }
    for (name, bit) in FLAGS {
        if v & (1 << bit) != 0 {
            let _ = write!(s, ",{name}");
        }
    }
    Ok(s)
}

/// The architectural name of an event select/umask pair, if it has one.
pub fn event_name(v: u64) -> Option<&'static str> {
    let (ev, um) = ((v & 0xff) as u8, ((v >> 8) & 0xff) as u8);
    ARCH_EVENTS
        .iter()
        .find(|(_, e, u)| *e == ev && *u == um && v >> 32 & 0xf == 0)
        .map(|e| e.0)
}

/// An event of `stat`: its spec as given and its PERFEVTSEL value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatEvent {
    pub name: String,
    pub evsel: u64,
}

/// Parses `-e` lists: `instructions,cycles` or `event=0xc0:umask=0` items
/// separated by commas, `:` inside an item standing for `,`. Each event gets
/// usr, os and en unless it names its own flags.
pub fn parse_events(list: &[String]) -> Result<Vec<StatEvent>, String> {
    let mut out = Vec::new();
    for spec in list
        .iter()
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let inner = spec.replace(':', ",");
        let mut evsel = evsel_encode(&inner)?;
        if evsel & 0x3f_0000 == 0 {
            evsel |= (1 << 16) | (1 << 17);
        }
        evsel |= 1 << 22;
        out.push(StatEvent {
            name: spec.to_string(),
            evsel,
        });
    }
    if out.is_empty() {
        return Err("no events".into());
    }
    Ok(out)
}

/// CPUID (the serializing fence the RDPMC reference asks for), then RDPMC of
/// counters `0..n`.
fn push_fenced_reads(b: &mut Batch, cpu: u32, n: usize) {
    b.push(
        cpu,
        Op::Cpuid {
            leaf: 0,
            subleaf: 0,
        },
    );
    for i in 0..n {
        b.push(cpu, Op::RdPmc { ecx: i as u32 });
    }
}

/// The two batches that measure one group of events on `cpu` around CMD:
/// before (program, fence, first read) and after (fence, second read,
/// restore). `saved` are the PERFEVTSELs' and global control's values to
/// restore; `global` is whether the PMU has IA32_PERF_GLOBAL_CTRL.
pub fn stat_batches(
    pmu: &PmuInfo,
    cpu: u32,
    group: &[StatEvent],
    saved: &[u64],
    global: Option<u64>,
) -> (Batch, Batch) {
    let mut before = Batch::new();
    let mut after = Batch::new();
    let mask: u64 = (0..group.len()).fold(0, |m, i| m | (1 << i));
    for (i, ev) in group.iter().enumerate() {
        let (sel, ctr) = pmu.counter_msrs(i as u32);
        before.push(cpu, Op::WrMsr { msr: sel, value: 0 });
        before.push(cpu, Op::WrMsr { msr: ctr, value: 0 });
        before.push(
            cpu,
            Op::WrMsr {
                msr: sel,
                value: ev.evsel,
            },
        );
    }
    if global.is_some() {
        before.push(
            cpu,
            Op::RmwMsr {
                msr: pmu.global_ctrl(),
                clear: 0,
                set: mask,
            },
        );
    }
    push_fenced_reads(&mut before, cpu, group.len());
    push_fenced_reads(&mut after, cpu, group.len());
    for i in 0..group.len() {
        let (sel, _) = pmu.counter_msrs(i as u32);
        after.push(
            cpu,
            Op::WrMsr {
                msr: sel,
                value: saved.get(i).copied().unwrap_or(0),
            },
        );
    }
    if let Some(g) = global {
        after.push(
            cpu,
            Op::WrMsr {
                msr: pmu.global_ctrl(),
                value: g,
            },
        );
    }
    (before, after)
}

impl PmuInfo {
    /// IA32_PERF_GLOBAL_CTRL, or AMD's PerfCntrGlobalCtl.
    pub fn global_ctrl(&self) -> u32 {
        if self.amd {
            0xc000_0301
        } else {
            0x38f
        }
    }

    /// Whether the PMU has a global enable register.
    pub fn has_global(&self) -> bool {
        self.version >= 2
    }
}

/// Prints a batch in script form (what `stat --dry-run` shows).
pub fn batch_as_script(b: &Batch) -> String {
    let mut s = String::new();
    let mut cpu = None;
    for r in b.results() {
        if cpu != Some(r.cpu) {
            let _ = writeln!(s, "cpu {}", r.cpu);
            cpu = Some(r.cpu);
        }
        let name = |m: u32| msrbatch::msr_name(m).unwrap_or_else(|| format!("{m:#x}"));
        let _ = match r.op {
            Op::WrMsr { msr, value } => writeln!(s, "wrmsr {} {value:#x}", name(msr)),
            Op::RmwMsr { msr, clear, set } => {
                writeln!(s, "rmw {} clear={clear:#x} set={set:#x}", name(msr))
            }
            Op::RdMsr { msr } => writeln!(s, "rdmsr {}", name(msr)),
            Op::RdPmc { ecx } if ecx & (1 << 30) != 0 => {
                writeln!(s, "rdpmc fixed {}", ecx & !(1 << 30))
            }
            Op::RdPmc { ecx } => writeln!(s, "rdpmc {ecx}"),
            Op::Cpuid { leaf, subleaf } => writeln!(s, "cpuid {leaf:#x} {subleaf}"),
            Op::Delay { ns } => writeln!(s, "delay {ns}ns"),
            Op::RdTsc => writeln!(s, "rdtsc"),
            Op::RdTscp => writeln!(s, "rdtscp"),
            Op::RdCr4 => writeln!(s, "rdcr4"),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_intel_leaf_0a() {
        let leaf0 = [
            0x16,
            u32::from_le_bytes(*b"Genu"),
            u32::from_le_bytes(*b"ntel"),
            u32::from_le_bytes(*b"ineI"),
        ];
        // Version 4, 8 counters of 48 bits, 7 events (ref-cycles missing), 3 fixed of 48 bits.
        let mut p = decode(
            leaf0,
            [0x0730_0804, 0b100, 0, (48 << 5) | 3],
            [0; 4],
            [0; 4],
            0,
        );
        assert!(!p.present(), "RDPMC not probed yet");
        p.rdpmc_ok = true;
        assert_eq!(p.vendor, "GenuineIntel");
        assert_eq!(
            (
                p.version,
                p.gp_counters,
                p.gp_width,
                p.fixed_counters,
                p.fixed_width
            ),
            (4, 8, 48, 3, 48)
        );
        assert_eq!(p.events, [true, true, false, true, true, true, true, false]);
        assert!(p.present() && p.has_global());
        assert_eq!(p.counter_msrs(2), (0x188, 0xc3));
        assert!(p
            .report(0)
            .contains("ref-cycles      event=0x3c,umask=0x01  not available"));
        let none = decode(leaf0, [0; 4], [0; 4], [0; 4], 0);
        assert!(!none.present());
        assert!(none.report(1).contains("no PMU: CPUID.0AH version 0"));
    }

    #[test]
    fn decodes_amd() {
        let leaf0 = [
            0x10,
            u32::from_le_bytes(*b"Auth"),
            u32::from_le_bytes(*b"cAMD"),
            u32::from_le_bytes(*b"enti"),
        ];
        let mut p = decode(leaf0, [0; 4], [0, 0, 1 << 23, 0], [1, 6, 0, 0], 0x8000_0022);
        assert!(p.amd && !p.present());
        assert!(p
            .report(0)
            .contains("no PMU: AuthenticAMD counters do not answer"));
        p.rdpmc_ok = true;
        assert!(p.present());
        assert_eq!((p.version, p.gp_counters), (2, 6));
        assert_eq!(p.counter_msrs(1), (0xc001_0202, 0xc001_0203));
        assert_eq!(p.global_ctrl(), 0xc000_0301);
    }

    #[test]
    fn evsel_round_trips() {
        assert_eq!(
            evsel_encode("event=0xc0,umask=0x00,usr,os,en"),
            Ok(0x4300c0)
        );
        assert_eq!(evsel_encode("instructions,usr,os,en"), Ok(0x4300c0));
        assert_eq!(evsel_encode("llc-misses,usr"), Ok(0x1412e));
        assert_eq!(evsel_encode("event=0x1c0,umask=1"), Ok(0x1_0000_01c0));
        assert!(evsel_encode("event=0x1000").is_err());
        assert!(evsel_encode("bogus").is_err());
        for v in [0x4300c0u64, 0xffff_ffff, 0xf_0000_00ff, 0, 0x1_0100_41c0] {
            let spec = evsel_decode(v).unwrap();
            assert_eq!(evsel_encode(&spec), Ok(v), "{spec}");
        }
        assert_eq!(
            evsel_decode(0x4300c0).unwrap(),
            "event=0xc0,umask=0x00,usr,os,en"
        );
        assert!(evsel_decode(1 << 40).is_err());
        assert_eq!(event_name(0x43003c), Some("cycles"));
        assert_eq!(event_name(0x41013c), Some("ref-cycles"));
    }

    #[test]
    fn stat_events_and_batches() {
        let evs = parse_events(&[
            "instructions,cycles".into(),
            "event=0x2e:umask=0x41:usr".into(),
        ])
        .unwrap();
        assert_eq!(
            evs.iter().map(|e| e.evsel).collect::<Vec<_>>(),
            [0x4300c0, 0x43003c, 0x41412e]
        );
        let pmu = PmuInfo {
            version: 2,
            gp_counters: 2,
            ..Default::default()
        };
        let (before, after) = stat_batches(&pmu, 3, &evs[..2], &[0, 0], Some(0x7_0000_0003));
        let script = batch_as_script(&before);
        assert!(script.starts_with("cpu 3\nwrmsr IA32_PERFEVTSEL0 0x0\nwrmsr IA32_PMC0 0x0\nwrmsr IA32_PERFEVTSEL0 0x4300c0\n"), "{script}");
        assert!(
            script.contains(
                "rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0x3\ncpuid 0x0 0\nrdpmc 0\nrdpmc 1\n"
            ),
            "{script}"
        );
        let script = batch_as_script(&after);
        assert!(
            script
                .ends_with("wrmsr IA32_PERFEVTSEL1 0x0\nwrmsr IA32_PERF_GLOBAL_CTRL 0x700000003\n"),
            "{script}"
        );
    }
}
