// SPDX-License-Identifier: GPL-2.0
//! The one number grammar of msrbatch: every number the tool, its scripts and
//! its msr-tools compatible commands read, and the CPU lists and durations
//! built from them.
//!
//! A number is decimal (`42`), hexadecimal (`0x2a`), octal (`0o52`) or binary
//! (`0b101010`); the prefix may be upper case, and `_` may separate digits
//! (`0xffff_ffff`). A decimal number other than `0` must not start with `0`:
//! C reads `010` as 8 and most other tools as 10, so it is refused rather than
//! guessed (as Python 3 does). No sign, no spaces.

use std::fmt;

/// The grammar in one sentence, as the tool's `--help` and man page state it.
pub const GRAMMAR: &str = "Every number msrbatch reads (registers, values, CPUs, bit fields, \
durations, evsel fields, in scripts and on the command line) is decimal (42), hexadecimal (0x2a), \
octal (0o52) or binary (0b101010), with _ allowed between digits (0xffff_ffff). A decimal number \
other than 0 must not start with 0: 010 is refused, because C reads it as 8 and other tools as 10.";

/// Why a text is not the number (or CPU list, or duration) wanted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumberError {
    text: String,
    kind: NumberErrorKind,
}

/// The kinds of [`NumberError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberErrorKind {
    /// Not a number in any of the forms.
    Invalid,
    /// A decimal number with a leading `0`.
    LeadingZero,
    /// Larger than the given number of bits holds.
    TooLarge(u32),
    /// A duration with an unknown unit.
    BadUnit,
    /// A duration without a unit (turbostat reads a bare number as seconds,
    /// perf as milliseconds: msrbatch refuses to guess).
    NoUnit,
    /// A CPU list that is not `all`, `N`, `N-M` or a comma-separated list of those.
    BadCpuList,
    /// A bit range that is not `HI:LO` with 63 >= HI >= LO.
    BadBitRange,
    /// `all` where the list of CPUs it stands for is empty (unknown).
    NoCpus,
}

impl NumberError {
    fn new(text: &str, kind: NumberErrorKind) -> Self {
        NumberError {
            text: text.to_string(),
            kind,
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> NumberErrorKind {
        self.kind
    }
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.text;
        match self.kind {
            NumberErrorKind::Invalid => write!(
                f,
                "'{t}' is not a number (decimal, 0x hex, 0o octal or 0b binary)"
            ),
            NumberErrorKind::LeadingZero => write!(
                f,
                "'{t}': a decimal number must not start with 0 (drop the zeros, or write octal as 0o...)"
            ),
            NumberErrorKind::TooLarge(bits) => write!(f, "'{t}' does not fit in {bits} bits"),
            NumberErrorKind::BadUnit => write!(
                f,
                "'{t}' is not a duration (a number and a unit: ns, us, ms or s)"
            ),
            NumberErrorKind::NoUnit => write!(
                f,
                "'{t}' has no unit: write {t}ns, {t}us, {t}ms or {t}s"
            ),
            NumberErrorKind::BadBitRange => {
                write!(f, "'{t}' is not a bit range (HI:LO with 63 >= HI >= LO)")
            }
            NumberErrorKind::NoCpus => write!(f, "'{t}': the online CPUs are unknown"),
            NumberErrorKind::BadCpuList => {
                write!(f, "'{t}' is not a CPU list (all, N, N-M, or a comma-separated list of those)")
            }
        }
    }
}

impl std::error::Error for NumberError {}

/// Parses a number of at most `bits` bits (see the module documentation).
pub fn parse_bits(s: &str, bits: u32) -> Result<u64, NumberError> {
    let err = |kind| NumberError::new(s, kind);
    let (radix, digits) = match s.get(..2) {
        Some("0x" | "0X") => (16, &s[2..]),
        Some("0o" | "0O") => (8, &s[2..]),
        Some("0b" | "0B") => (2, &s[2..]),
        _ => (10, s),
    };
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && digits.chars().all(|c| c == '_' || c.is_digit(radix));
    if !well_formed {
        return Err(err(NumberErrorKind::Invalid));
    }
    if radix == 10 && digits.len() > 1 && digits.starts_with('0') {
        return Err(err(NumberErrorKind::LeadingZero));
    }
    let v = u64::from_str_radix(&digits.replace('_', ""), radix)
        .map_err(|_| err(NumberErrorKind::TooLarge(bits)))?;
    if bits < 64 && v >> bits != 0 {
        return Err(err(NumberErrorKind::TooLarge(bits)));
    }
    Ok(v)
}

/// Parses a 64-bit number.
pub fn parse_u64(s: &str) -> Result<u64, NumberError> {
    parse_bits(s, 64)
}

/// Parses a 32-bit number.
pub fn parse_u32(s: &str) -> Result<u32, NumberError> {
    parse_bits(s, 32).map(|v| v as u32)
}

/// Parses a duration into nanoseconds: a number followed by `ns`, `us`, `ms`
/// or `s` (`500ns`, `10us`, `1ms`). The unit is required, also for 0: tools
/// disagree on what a bare number means (turbostat's `-i` is seconds, perf's
/// `-I` milliseconds).
pub fn parse_duration(s: &str) -> Result<u64, NumberError> {
    let Some((num, mult)) = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .into_iter()
    .find_map(|(unit, mult)| Some((s.strip_suffix(unit)?, mult))) else {
        return Err(match parse_u64(s) {
            Ok(_) => NumberError::new(s, NumberErrorKind::NoUnit),
            Err(e) if e.kind != NumberErrorKind::Invalid => e,
            Err(_) => NumberError::new(s, NumberErrorKind::BadUnit),
        });
    };
    let n = parse_u64(num).map_err(|e| match e.kind {
        NumberErrorKind::Invalid => NumberError::new(s, NumberErrorKind::BadUnit),
        _ => e,
    })?;
    n.checked_mul(mult)
        .ok_or_else(|| NumberError::new(s, NumberErrorKind::TooLarge(64)))
}

/// Parses a bit range `HI:LO` of a 64-bit register (63 >= HI >= LO), as
/// `rdmsr -f` and the fields of a script's `rmw` take it.
pub fn parse_bit_range(s: &str) -> Result<(u32, u32), NumberError> {
    let bad = || NumberError::new(s, NumberErrorKind::BadBitRange);
    let (hi, lo) = s.split_once(':').ok_or_else(bad)?;
    let (hi, lo) = (parse_u32(hi)?, parse_u32(lo)?);
    if hi > 63 || lo > hi {
        return Err(bad());
    }
    Ok((hi, lo))
}

/// Parses a CPU list: `all` (which stands for `all`, and is an error if that
/// is empty), `3`, `0,2-3`. Each CPU appears once, in the order of the list.
pub fn parse_cpu_list(s: &str, all: &[u32]) -> Result<Vec<u32>, NumberError> {
    if s == "all" {
        if all.is_empty() {
            return Err(NumberError::new(s, NumberErrorKind::NoCpus));
        }
        return Ok(all.to_vec());
    }
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = match (parse_u32(a), parse_u32(b)) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            (Err(e), _) | (_, Err(e)) if e.kind != NumberErrorKind::Invalid => return Err(e),
            _ => return Err(NumberError::new(s, NumberErrorKind::BadCpuList)),
        };
        for c in a..=b {
            if !cpus.contains(&c) {
                cpus.push(c);
            }
        }
    }
    Ok(cpus)
}

/// A CPU list as the kernel writes one (`0-3,8`): sorted, each CPU once,
/// runs as ranges; what [`parse_cpu_list`] reads.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use NumberErrorKind::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(format_cpu_list(&[5, 0, 1, 2, 3, 3, 8, 7]), "0-3,5,7-8");
        assert_eq!(format_cpu_list(&[]), "");
        let cpus = [0, 2, 3, 4, 9];
        assert_eq!(
            parse_cpu_list(&format_cpu_list(&cpus), &[]),
            Ok(cpus.to_vec())
        );
    }

    #[test]
    fn the_number_grammar() {
        let cases: &[(&str, Result<u64, NumberErrorKind>)] = &[
            ("0", Ok(0)),
            ("10", Ok(10)),
            ("0x1F", Ok(31)),
            ("0X1f", Ok(31)),
            ("0o17", Ok(15)),
            ("0b101", Ok(5)),
            ("1_000", Ok(1000)),
            ("0xffff_ffff_ffff_ffff", Ok(u64::MAX)),
            ("18446744073709551615", Ok(u64::MAX)),
            // One reading for a leading zero: none.
            ("010", Err(LeadingZero)),
            ("00", Err(LeadingZero)),
            ("08", Err(LeadingZero)),
            ("0_1", Err(LeadingZero)),
            ("18446744073709551616", Err(TooLarge(64))),
            ("0x1_0000_0000_0000_0000", Err(TooLarge(64))),
            ("", Err(Invalid)),
            ("0x", Err(Invalid)),
            ("_1", Err(Invalid)),
            ("1_", Err(Invalid)),
            ("-1", Err(Invalid)),
            ("+1", Err(Invalid)),
            (" 1", Err(Invalid)),
            ("0x1g", Err(Invalid)),
            ("0o8", Err(Invalid)),
            ("0b2", Err(Invalid)),
            ("1e3", Err(Invalid)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_u64(text).map_err(|e| e.kind()), *want, "{text:?}");
        }
        assert_eq!(parse_u32("0xffffffff"), Ok(u32::MAX));
        assert_eq!(parse_u32("0x1_0000_0000").unwrap_err().kind(), TooLarge(32));
        assert_eq!(
            parse_u64("010").unwrap_err().to_string(),
            "'010': a decimal number must not start with 0 (drop the zeros, or write octal as 0o...)"
        );
    }

    #[test]
    fn durations() {
        for (text, ns) in [
            ("0ns", 0),
            ("500ns", 500),
            ("10us", 10_000),
            ("2ms", 2_000_000),
            ("1s", 1_000_000_000),
            ("1_000us", 1_000_000),
            ("0x10ns", 16),
        ] {
            assert_eq!(parse_duration(text), Ok(ns), "{text}");
        }
        for (text, kind) in [
            ("5parsecs", BadUnit),
            ("ms", BadUnit),
            ("5 ms", BadUnit),
            ("500", NoUnit),
            ("0", NoUnit),
            ("0x10", NoUnit),
            ("5h", BadUnit),
            ("010us", LeadingZero),
            ("18446744073709551615s", TooLarge(64)),
        ] {
            assert_eq!(
                parse_duration(text).map_err(|e| e.kind()),
                Err(kind),
                "{text}"
            );
        }
        assert_eq!(
            parse_duration("5").unwrap_err().to_string(),
            "'5' has no unit: write 5ns, 5us, 5ms or 5s"
        );
    }

    #[test]
    fn bit_ranges() {
        assert_eq!(parse_bit_range("7:4"), Ok((7, 4)));
        assert_eq!(parse_bit_range("63:0"), Ok((63, 0)));
        assert_eq!(parse_bit_range("0x3f:0"), Ok((63, 0)));
        for (text, kind) in [
            ("4:7", BadBitRange),
            ("64:0", BadBitRange),
            ("7", BadBitRange),
            ("", BadBitRange),
            ("a:b", Invalid),
            ("07:4", LeadingZero),
        ] {
            assert_eq!(
                parse_bit_range(text).map_err(|e| e.kind()),
                Err(kind),
                "{text}"
            );
        }
    }

    #[test]
    fn cpu_lists() {
        let online = [0, 1, 2, 3];
        assert_eq!(parse_cpu_list("all", &online), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("3", &online), Ok(vec![3]));
        assert_eq!(parse_cpu_list("2,0-1,1", &online), Ok(vec![2, 0, 1]));
        assert_eq!(parse_cpu_list("0x2", &online), Ok(vec![2]));
        assert_eq!(parse_cpu_list("0-3\n".trim(), &[]), Ok(vec![0, 1, 2, 3]));
        for (text, kind) in [
            ("3-1", BadCpuList),
            ("", BadCpuList),
            ("1,,2", BadCpuList),
            ("x", BadCpuList),
            ("01", LeadingZero),
        ] {
            assert_eq!(
                parse_cpu_list(text, &online).map_err(|e| e.kind()),
                Err(kind),
                "{text}"
            );
        }
    }
}
