// SPDX-License-Identifier: GPL-2.0
//! `msrbatch rdmsr` / `msrbatch wrmsr`: msr-tools' options and output, with
//! `-a` as one ioctl for all CPUs instead of one pread per CPU.

use clap::Args;
use msrbatch::{Batch, Device, Op};

/// Output radix, as msr-tools' `mo_*` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Radix {
    Hex,
    CapHex,
    Signed,
    Unsigned,
    Octal,
    Raw,
}

/// `msrbatch rdmsr [options] regno`.
#[derive(Args, Debug)]
pub struct RdmsrArgs {
    /// Hexadecimal output (lower case).
    #[arg(short = 'x', long = "hexadecimal")]
    hex: bool,
    /// Hexadecimal output (upper case).
    #[arg(short = 'X', long = "capital-hex")]
    cap_hex: bool,
    /// Signed decimal output.
    #[arg(short = 'd', long = "decimal")]
    signed: bool,
    /// Unsigned decimal output.
    #[arg(short = 'u', long = "unsigned")]
    unsigned: bool,
    /// Octal output.
    #[arg(short = 'o', long = "octal")]
    octal: bool,
    /// Format output as a C language constant.
    #[arg(short = 'c', long = "c-language")]
    c_language: bool,
    /// Output leading zeroes.
    #[arg(short = '0', long = "zero-pad")]
    zero_pad: bool,
    /// Raw binary output.
    #[arg(short = 'r', long = "raw")]
    raw: bool,
    /// All processors (one ioctl).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Select processor number (default 0).
    #[arg(short = 'p', long = "processor", default_value_t = 0)]
    processor: u32,
    /// Output bits [h:l] only.
    #[arg(short = 'f', long = "bitfield", value_parser = parse_bitfield)]
    bitfield: Option<(u32, u32)>,
    /// The MSR (number or name).
    regno: String,
}

/// `msrbatch wrmsr [options] regno value...`.
#[derive(Args, Debug)]
pub struct WrmsrArgs {
    /// All processors (one ioctl).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Select processor number (default 0).
    #[arg(short = 'p', long = "processor", default_value_t = 0)]
    processor: u32,
    /// The MSR (number or name).
    regno: String,
    /// Values, written in order.
    #[arg(required = true)]
    values: Vec<String>,
}

fn parse_bitfield(s: &str) -> Result<(u32, u32), String> {
    let (h, l) = s.split_once(':').ok_or("want h:l")?;
    let (h, l) = (
        h.parse::<u32>().map_err(|e| e.to_string())?,
        l.parse::<u32>().map_err(|e| e.to_string())?,
    );
    if h > 63 || l > h {
        return Err("want 63 >= h >= l".into());
    }
    Ok((h, l))
}

/// `strtoul(s, NULL, 0)`-like parsing, plus MSR names.
fn parse_reg(s: &str) -> Result<u32, String> {
    msrbatch::msr_by_name(s)
        .or_else(|| parse_c_number(s).and_then(|v| u32::try_from(v).ok()))
        .ok_or_else(|| format!("bad MSR '{s}'"))
}

/// C-style number: `0x` hex, leading `0` octal, else decimal.
pub fn parse_c_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// Digits of the largest unsigned value of `bits` bits (msr-tools' table).
fn dec_digits(bits: u32) -> usize {
    if bits >= 64 {
        return 20;
    }
    ((1u64 << bits) - 1).max(1).to_string().len()
}

/// Formats one value exactly as msr-tools' rdmsr does (without the newline).
/// `None` for raw output, which is written as bytes.
pub fn format(radix: Radix, c: bool, fill: bool, bits: u32, data: u64) -> Option<String> {
    let mut data = data;
    if radix == Radix::Signed && bits > 0 && data & (1u64 << (bits - 1)) != 0 {
        // msr-tools' sign handling, kept bit for bit.
        data &= !(1u64 << (bits - 1));
        data = data.wrapping_neg();
    }
    let hexw = (bits as usize).div_ceil(4);
    let octw = (bits as usize).div_ceil(3);
    Some(match (radix, fill, c) {
        (Radix::Raw, _, false) => return None,
        (Radix::Raw, _, true) => {
            let bytes: Vec<String> = data
                .to_le_bytes()
                .iter()
                .map(|b| format!("0x{b:02x}"))
                .collect();
            format!("{{{}}}", bytes.join(","))
        }
        (Radix::Hex, false, false) => format!("{data:x}"),
        (Radix::CapHex, false, false) => format!("{data:X}"),
        (Radix::Hex, false, true) => format!("0x{data:x}"),
        (Radix::CapHex, false, true) => format!("0x{data:X}"),
        (Radix::Hex, true, false) => format!("{data:0hexw$x}"),
        (Radix::CapHex, true, false) => format!("{data:0hexw$X}"),
        (Radix::Hex, true, true) => format!("0x{data:0hexw$x}"),
        (Radix::CapHex, true, true) => format!("0x{data:0hexw$X}"),
        (Radix::Signed, true, false) => {
            let w = dec_digits(bits - 1) + 1;
            format!("{:0w$}", data as i64)
        }
        (Radix::Signed, _, _) => format!("{}", data as i64),
        (Radix::Unsigned, false, false) => format!("{data}"),
        (Radix::Unsigned, true, false) => format!("{data:0w$}", w = dec_digits(bits)),
        (Radix::Unsigned, _, true) => format!("{data}U"),
        (Radix::Octal, false, false) => format!("{data:o}"),
        (Radix::Octal, false, true) => format!("0{data:o}"),
        (Radix::Octal, true, false) => format!("{data:0octw$o}"),
        (Radix::Octal, true, true) => format!("0{data:0octw$o}"),
    })
}

impl RdmsrArgs {
    fn radix(&self) -> Radix {
        // Like getopt, the last radix option wins; clap keeps no order, so
        // use a fixed precedence (scripts pass one).
        if self.raw {
            Radix::Raw
        } else if self.octal {
            Radix::Octal
        } else if self.unsigned {
            Radix::Unsigned
        } else if self.signed {
            Radix::Signed
        } else if self.cap_hex && !self.hex {
            Radix::CapHex
        } else {
            Radix::Hex
        }
    }
}

/// Reports a batch the kernel refused, with msr-tools' message and exit code.
fn refused(tool: &str, cpu: u32, e: &msrbatch::Error) -> i32 {
    if matches!(e.errno().0, libc::ENODEV | libc::ENXIO) {
        eprintln!("{tool}: No CPU {cpu}");
        2
    } else {
        eprintln!("{tool}: {e}");
        127
    }
}

/// Runs `msrbatch rdmsr`; returns the process exit status (msr-tools' codes).
pub fn rdmsr(dev: &Device, a: &RdmsrArgs, online: &[u32]) -> i32 {
    let Ok(reg) = parse_reg(&a.regno) else {
        eprintln!("rdmsr: bad register '{}'", a.regno);
        return 127;
    };
    let cpus = if a.all {
        online.to_vec()
    } else {
        vec![a.processor]
    };
    let mut batch = Batch::new();
    for &cpu in &cpus {
        batch.push(cpu, Op::RdMsr { msr: reg });
    }
    if let Err(e) = dev.run(&mut batch) {
        return refused("rdmsr", a.processor, &e);
    }
    let (hi, lo) = a.bitfield.unwrap_or((63, 0));
    let bits = hi - lo + 1;
    let mut out = std::io::stdout().lock();
    for r in batch.results() {
        let Ok(v) = r.value else {
            eprintln!("rdmsr: CPU {} cannot read MSR 0x{reg:08x}", r.cpu);
            return 4;
        };
        let mut data = v.as_u64().unwrap_or(0);
        if bits < 64 {
            data = (data >> lo) & ((1u64 << bits) - 1);
        }
        use std::io::Write;
        let written = match format(a.radix(), a.c_language, a.zero_pad, bits, data) {
            Some(s) => writeln!(out, "{s}"),
            None => out.write_all(&data.to_le_bytes()),
        };
        if written.is_err() {
            return 127;
        }
    }
    0
}

/// Runs `msrbatch wrmsr`; returns the process exit status (msr-tools' codes).
pub fn wrmsr(dev: &Device, a: &WrmsrArgs, online: &[u32]) -> i32 {
    let Ok(reg) = parse_reg(&a.regno) else {
        eprintln!("wrmsr: bad register '{}'", a.regno);
        return 127;
    };
    let mut values = Vec::new();
    for v in &a.values {
        match parse_c_number(v) {
            Some(n) => values.push(n),
            None => {
                eprintln!("wrmsr: bad value '{v}'");
                return 127;
            }
        }
    }
    let cpus = if a.all {
        online.to_vec()
    } else {
        vec![a.processor]
    };
    let mut batch = Batch::new();
    batch.stop_on_error(true);
    for &cpu in &cpus {
        for &value in &values {
            batch.push(cpu, Op::WrMsr { msr: reg, value });
        }
    }
    if let Err(e) = dev.run(&mut batch) {
        return refused("wrmsr", a.processor, &e);
    }
    for r in batch.results() {
        if let (Err(e), Op::WrMsr { value, .. }) = (r.value, r.op) {
            if e.0 == libc::EIO {
                eprintln!(
                    "wrmsr: CPU {} cannot set MSR 0x{reg:08x} to 0x{value:016x}",
                    r.cpu
                );
                return 4;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are what msr-tools' printf patterns produce.
    #[test]
    fn formats_like_msr_tools() {
        let v = 0x0007_0406_0007_0406u64;
        // (radix, C syntax, zero-fill, bits, value, msr-tools' text)
        let cases = [
            (Radix::Hex, false, false, 64, v, "7040600070406"),
            (Radix::Hex, false, true, 64, v, "0007040600070406"),
            (Radix::Hex, true, false, 64, v, "0x7040600070406"),
            (Radix::Hex, true, true, 64, v, "0x0007040600070406"),
            (Radix::CapHex, false, false, 64, 0xabc, "ABC"),
            (Radix::Hex, false, true, 12, 0xa, "00a"),
            (Radix::Unsigned, false, false, 64, 1234, "1234"),
            (
                Radix::Unsigned,
                false,
                true,
                64,
                1234,
                "00000000000000001234",
            ),
            (Radix::Unsigned, false, true, 8, 7, "007"),
            (Radix::Unsigned, true, false, 64, 7, "7U"),
            (Radix::Signed, false, false, 8, 0x80, "0"),
            (Radix::Signed, false, false, 8, 0xff, "-127"),
            (Radix::Signed, false, true, 8, 5, "0005"),
            (Radix::Octal, false, false, 64, 8, "10"),
            (Radix::Octal, true, false, 64, 8, "010"),
            (Radix::Octal, false, true, 6, 8, "10"),
            (
                Radix::Raw,
                true,
                false,
                64,
                1,
                "{0x01,0x00,0x00,0x00,0x00,0x00,0x00,0x00}",
            ),
        ];
        for (radix, c, fill, bits, value, want) in cases {
            assert_eq!(
                format(radix, c, fill, bits, value).as_deref(),
                Some(want),
                "{radix:?} c={c} fill={fill} bits={bits} value={value:#x}"
            );
        }
        assert_eq!(format(Radix::Raw, false, false, 64, 1), None);
        assert_eq!(dec_digits(64), 20);
        assert_eq!(dec_digits(1), 1);
        assert_eq!(dec_digits(4), 2);
    }

    #[test]
    fn numbers_like_strtoul() {
        assert_eq!(parse_c_number("0x1b"), Some(0x1b));
        assert_eq!(parse_c_number("010"), Some(8));
        assert_eq!(parse_c_number("10"), Some(10));
        assert_eq!(parse_c_number("0"), Some(0));
        assert_eq!(parse_reg("IA32_PAT"), Ok(0x277));
        assert_eq!(parse_bitfield("7:4"), Ok((7, 4)));
        assert!(parse_bitfield("4:7").is_err());
    }
}
