// SPDX-License-Identifier: GPL-2.0
//! CPUID dumps: `cpuid -r` output and AIDA64 / InstLatx64 dumps, read into
//! the leaves of each CPU they list, to decode a PMU offline.

use super::PmuInfo;
use crate::{Error, Result};
use std::collections::BTreeMap;

/// The CPUID leaves of one CPU of a dump. Leaves absent from the dump read as zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuidCpu {
    /// The CPU's label in the dump (`CPU 0`, `Logical CPU #19`).
    pub label: String,
    /// (leaf, subleaf) -> EAX, EBX, ECX, EDX.
    pub leaves: BTreeMap<(u32, u32), [u32; 4]>,
}

impl CpuidCpu {
    /// CPUID `leaf`/`subleaf` as the dump has it, zero if absent.
    pub fn get(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        self.leaves.get(&(leaf, subleaf)).copied().unwrap_or([0; 4])
    }

    /// Decodes this CPU's PMU.
    pub fn pmu(&self) -> PmuInfo {
        PmuInfo::decode(|l, s| self.get(l, s))
    }
}

/// A CPUID dump: `cpuid -r` output or an AIDA64 / InstLatx64 CPUID dump,
/// one or more CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuidDump {
    /// The CPUs in the order the dump lists them.
    pub cpus: Vec<CpuidCpu>,
}

/// A register or leaf field of a dump: up to 8 hex digits, with or without
/// `0x`. This is the dump tools' own format (always hex, zero-padded, as in
/// `0000000A`), not a number a user writes, so it is not read by the
/// [number grammar](crate::number), whose leading-zero rule is for decimal.
fn hex32(s: &str) -> Option<u32> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    (!s.is_empty() && s.len() <= 8)
        .then(|| u32::from_str_radix(s, 16).ok())
        .flatten()
}

/// `CPUID 0000000A: 07300403-00000000-00000000-00000603 [SL 00] ...`
fn parse_aida(rest: &str) -> Option<(u32, Option<u32>, [u32; 4])> {
    let (leaf, rest) = rest.split_once(':')?;
    let leaf = hex32(leaf.trim())?;
    let mut words = rest.split_whitespace();
    let regs: Vec<u32> = words.next()?.split('-').map(hex32).collect::<Option<_>>()?;
    let regs: [u32; 4] = regs.try_into().ok()?;
    let tail: Vec<&str> = words.collect();
    let sub = tail
        .windows(2)
        .find(|w| w[0] == "[SL")
        .and_then(|w| hex32(w[1].trim_end_matches(']')));
    Some((leaf, sub, regs))
}

/// `   0x0000000a 0x00: eax=0x07300403 ebx=0x00000000 ecx=0x00000000 edx=0x00000603`
fn parse_cpuid_r(line: &str) -> Option<(u32, u32, [u32; 4])> {
    let (head, regs) = line.split_once(':')?;
    let mut h = head.split_whitespace();
    let leaf = hex32(h.next()?.strip_prefix("0x")?)?;
    let sub = hex32(h.next()?.strip_prefix("0x")?)?;
    if h.next().is_some() {
        return None;
    }
    let mut out = [0u32; 4];
    let mut seen = 0;
    for (i, name) in ["eax=", "ebx=", "ecx=", "edx="].iter().enumerate() {
        let w = regs.split_whitespace().find(|w| w.starts_with(name))?;
        out[i] = hex32(&w[name.len()..])?;
        seen += 1;
    }
    (seen == 4).then_some((leaf, sub, out))
}

impl CpuidDump {
    /// Parses a dump. Lines that are neither CPUID lines nor CPU headers are
    /// skipped (AIDA64 dumps carry much else); a CPUID line that does not
    /// parse is an error naming its line.
    pub fn parse(text: &str) -> Result<CpuidDump> {
        let mut cpus: Vec<CpuidCpu> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            let bad = || Error::invalid(format!("line {}: not a CPUID line: {t}", n + 1));
            if t.starts_with('#') || t.is_empty() {
                continue;
            }
            if let Some(label) = t
                .strip_prefix("------[")
                .and_then(|r| r.split(']').next())
                .filter(|l| l.contains("CPU #"))
            {
                let label = label.rsplit(" / ").next().unwrap_or(label).trim();
                cpus.push(CpuidCpu {
                    label: label.to_string(),
                    ..Default::default()
                });
                continue;
            }
            if let Some(label) = t.strip_suffix(':').filter(|l| {
                l.strip_prefix("CPU")
                    .is_some_and(|r| r.trim().chars().all(|c| c.is_ascii_digit()))
            }) {
                cpus.push(CpuidCpu {
                    label: label.to_string(),
                    ..Default::default()
                });
                continue;
            }
            let entry = if let Some(rest) = t.strip_prefix("CPUID ") {
                let (leaf, sub, regs) = parse_aida(rest).ok_or_else(bad)?;
                Some((leaf, sub, regs))
            } else if t.starts_with("0x") && t.contains("eax=") {
                let (leaf, sub, regs) = parse_cpuid_r(t).ok_or_else(bad)?;
                Some((leaf, Some(sub), regs))
            } else {
                None
            };
            let Some((leaf, sub, regs)) = entry else {
                continue;
            };
            if cpus.is_empty() {
                cpus.push(CpuidCpu {
                    label: "CPU 0".into(),
                    ..Default::default()
                });
            }
            let cpu = cpus.last_mut().expect("pushed above");
            // Old AIDA64 dumps repeat a leaf without [SL nn]: successive subleaves.
            let sub = sub
                .unwrap_or_else(|| cpu.leaves.range((leaf, 0)..=(leaf, u32::MAX)).count() as u32);
            cpu.leaves.insert((leaf, sub), regs);
        }
        cpus.retain(|c| !c.leaves.is_empty());
        if cpus.is_empty() {
            return Err(Error::invalid(
                "no CPUID lines (want `cpuid -r` or AIDA64 `CPUID 0000000A: ...` lines)",
            ));
        }
        Ok(CpuidDump { cpus })
    }

    /// Reads and parses a dump file; an error's [`Error::what`] names the file.
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<CpuidDump> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::new(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("{}: {e}", path.display()),
            )
        })?;
        Self::parse(&text)
            .map_err(|e| Error::new(e.errno().0, format!("{}: {}", path.display(), e.what())))
    }
}
