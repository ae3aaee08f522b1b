// SPDX-License-Identifier: GPL-2.0
//! The batch script language (see Documentation/scripts.md).
//!
//! One statement per line; `#` starts a comment. `cpu LIST` chooses the CPUs
//! the following ops run on (`all`, `3`, `0,2-3`; default CPU 0); every op
//! line adds one op per chosen CPU. The whole script is one batch.

use msrbatch::{msr_by_name, Batch, Op};
use std::fmt;

/// A parse error, pointing at a line and column (both 1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.msg)
    }
}

/// Where each op of the batch came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub line: usize,
}

/// A parsed script: the batch and, per op, its origin.
#[derive(Debug, Default)]
pub struct Script {
    pub batch: Batch,
    pub origins: Vec<Origin>,
}

/// A token with its 1-based column.
struct Tok<'a> {
    text: &'a str,
    col: usize,
}

fn tokens(line: &str) -> Vec<Tok<'_>> {
    let code = line.split('#').next().unwrap_or("");
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in code
        .char_indices()
        .chain(std::iter::once((code.len(), ' ')))
    {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push(Tok {
                    text: &code[s..i],
                    col: s + 1,
                });
                start = None;
            }
            _ => {}
        }
    }
    out
}

pub use msrbatch::parse_u64;

/// Parses a CPU list (`all`, `3`, `0,2-3`); `all` is `online`.
pub fn parse_cpus(s: &str, online: &[u32]) -> Result<Vec<u32>, String> {
    if s == "all" {
        return Ok(online.to_vec());
    }
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = match (a.parse::<u32>(), b.parse::<u32>()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(format!("bad CPU list '{s}' (want all, N, or N-M,...)")),
        };
        for c in a..=b {
            if !cpus.contains(&c) {
                cpus.push(c);
            }
        }
    }
    Ok(cpus)
}

/// Parses a duration: `10us`, `2ms`, `500ns`, `1s`, or a bare number of ns.
pub fn parse_duration(s: &str) -> Option<u64> {
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n = parse_u64(num)?;
    let mult = match unit {
        "" | "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn parse_reg(t: &Tok<'_>) -> Result<u32, String> {
    if let Some(v) = msr_by_name(t.text) {
        return Ok(v);
    }
    parse_u64(t.text)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("'{}' is neither an MSR name nor a 32-bit number", t.text))
}

fn parse_value(t: &Tok<'_>) -> Result<u64, String> {
    parse_u64(t.text).ok_or_else(|| format!("'{}' is not a number", t.text))
}

/// Parses `hi:lo=value` into (clear mask, set bits).
fn parse_field(spec: &str) -> Option<Result<(u64, u64), String>> {
    let (range, value) = spec.split_once('=')?;
    let (hi, lo) = range.split_once(':')?;
    let (hi, lo) = (hi.parse::<u32>().ok()?, lo.parse::<u32>().ok()?);
    Some((|| {
        if hi > 63 || lo > hi {
            return Err(format!(
                "bad bit field {hi}:{lo} (want hi:lo with 63 >= hi >= lo)"
            ));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            ((1u64 << width) - 1) << lo
        };
        let v = parse_u64(value).ok_or_else(|| format!("'{value}' is not a number"))?;
        if width < 64 && v >> width != 0 {
            return Err(format!("value {value} does not fit in bits {hi}:{lo}"));
        }
        Ok((mask, v << lo))
    })())
}

/// Parses the arguments of `rmw REG ...` into (clear, set).
fn parse_rmw(args: &[Tok<'_>]) -> Result<(u64, u64), (usize, String)> {
    let (mut clear, mut set) = (0u64, 0u64);
    if args.is_empty() {
        return Err((0, "rmw needs set=MASK, clear=MASK or HI:LO=VALUE".into()));
    }
    for (i, t) in args.iter().enumerate() {
        let r = if let Some(m) = t.text.strip_prefix("set=") {
            parse_u64(m)
                .map(|m| (0, m))
                .ok_or_else(|| format!("'{m}' is not a number"))
        } else if let Some(m) = t.text.strip_prefix("clear=") {
            parse_u64(m)
                .map(|m| (m, 0))
                .ok_or_else(|| format!("'{m}' is not a number"))
        } else if let Some(r) = parse_field(t.text) {
            r
        } else {
            Err(format!(
                "'{}': expected set=MASK, clear=MASK or HI:LO=VALUE",
                t.text
            ))
        };
        let (c, s) = r.map_err(|m| (i, m))?;
        clear |= c;
        set = (set & !c) | s;
    }
    Ok((clear, set))
}

/// Parses a script. `online` is the list `cpu all` stands for.
pub fn parse(text: &str, online: &[u32]) -> Result<Script, ParseError> {
    let mut script = Script::default();
    let mut cpus = vec![0u32];
    for (n, line) in text.lines().enumerate() {
        let toks = tokens(line);
        let Some(head) = toks.first() else { continue };
        let err = |t: &Tok<'_>, msg: String| ParseError {
            line: n + 1,
            col: t.col,
            msg,
        };
        let args = &toks[1..];
        let want = |count: std::ops::RangeInclusive<usize>, usage: &str| {
            if count.contains(&args.len()) {
                Ok(())
            } else {
                let at = args.get(*count.end()).unwrap_or(head);
                Err(err(at, format!("usage: {usage}")))
            }
        };
        let op = match head.text {
            "cpu" | "cpus" => {
                want(1..=1, "cpu all|N|N-M,...")?;
                cpus = parse_cpus(args[0].text, online).map_err(|m| err(&args[0], m))?;
                continue;
            }
            "stop-on-error" => {
                want(0..=0, "stop-on-error")?;
                script.batch.stop_on_error(true);
                continue;
            }
            "rdmsr" => {
                want(1..=1, "rdmsr REG")?;
                Op::RdMsr {
                    msr: parse_reg(&args[0]).map_err(|m| err(&args[0], m))?,
                }
            }
            "wrmsr" => {
                want(2..=2, "wrmsr REG VALUE")?;
                Op::WrMsr {
                    msr: parse_reg(&args[0]).map_err(|m| err(&args[0], m))?,
                    value: parse_value(&args[1]).map_err(|m| err(&args[1], m))?,
                }
            }
            "rmw" => {
                if args.is_empty() {
                    return Err(err(
                        head,
                        "usage: rmw REG [set=MASK] [clear=MASK] [HI:LO=VALUE]...".into(),
                    ));
                }
                let msr = parse_reg(&args[0]).map_err(|m| err(&args[0], m))?;
                let (clear, set) = parse_rmw(&args[1..])
                    .map_err(|(i, m)| err(args.get(i + 1).unwrap_or(head), m))?;
                Op::RmwMsr { msr, clear, set }
            }
            "rdpmc" => {
                want(1..=2, "rdpmc N | rdpmc fixed N")?;
                let (fixed, idx) = match args {
                    [f, i] if f.text == "fixed" => (1u32 << 30, i),
                    [i] => (0, i),
                    _ => return Err(err(&args[0], "usage: rdpmc N | rdpmc fixed N".into())),
                };
                let n = parse_u64(idx.text)
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| err(idx, format!("'{}' is not a 32-bit number", idx.text)))?;
                Op::RdPmc { ecx: fixed | n }
            }
            "rdtsc" => {
                want(0..=0, "rdtsc")?;
                Op::RdTsc
            }
            "rdtscp" => {
                want(0..=0, "rdtscp")?;
                Op::RdTscp
            }
            "rdcr4" => {
                want(0..=0, "rdcr4")?;
                Op::RdCr4
            }
            "cpuid" => {
                want(1..=2, "cpuid LEAF [SUBLEAF]")?;
                let num = |t: &Tok<'_>| {
                    parse_u64(t.text)
                        .and_then(|v| u32::try_from(v).ok())
                        .ok_or_else(|| err(t, format!("'{}' is not a 32-bit number", t.text)))
                };
                Op::Cpuid {
                    leaf: num(&args[0])?,
                    subleaf: args.get(1).map(num).transpose()?.unwrap_or(0),
                }
            }
            "delay" => {
                want(1..=1, "delay DURATION (e.g. 100us)")?;
                let ns = parse_duration(args[0].text).ok_or_else(|| {
                    err(
                        &args[0],
                        format!("'{}' is not a duration (ns, us, ms, s)", args[0].text),
                    )
                })?;
                Op::Delay { ns }
            }
            other => return Err(err(head, format!("unknown statement '{other}'"))),
        };
        for &cpu in &cpus {
            script.batch.push(cpu, op);
            script.origins.push(Origin { line: n + 1 });
        }
    }
    if script.batch.is_empty() {
        return Err(ParseError {
            line: text.lines().count().max(1),
            col: 1,
            msg: "the script has no ops".into(),
        });
    }
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(s: &Script) -> Vec<(u32, Op)> {
        s.batch.results().map(|r| (r.cpu, r.op)).collect()
    }

    #[test]
    fn parses_every_statement() {
        let text = "\
# comment
cpu 1,3           # trailing comment
rdmsr IA32_PAT
wrmsr 0x10 42
rmw IA32_TSC_AUX set=0x1 clear=0x6 15:8=0xab
rdpmc 1
rdpmc fixed 2
cpu 2
rdtsc
rdtscp
rdcr4
cpuid 0xa
cpuid 7 1
delay 10us
stop-on-error
";
        let s = parse(text, &[0, 1, 2, 3]).unwrap();
        assert_eq!(
            ops(&s),
            vec![
                (1, Op::RdMsr { msr: 0x277 }),
                (3, Op::RdMsr { msr: 0x277 }),
                (
                    1,
                    Op::WrMsr {
                        msr: 0x10,
                        value: 42
                    }
                ),
                (
                    3,
                    Op::WrMsr {
                        msr: 0x10,
                        value: 42
                    }
                ),
                (
                    1,
                    Op::RmwMsr {
                        msr: 0xc000_0103,
                        clear: 0xff06,
                        set: 0xab01
                    }
                ),
                (
                    3,
                    Op::RmwMsr {
                        msr: 0xc000_0103,
                        clear: 0xff06,
                        set: 0xab01
                    }
                ),
                (1, Op::RdPmc { ecx: 1 }),
                (3, Op::RdPmc { ecx: 1 }),
                (1, Op::RdPmc { ecx: (1 << 30) | 2 }),
                (3, Op::RdPmc { ecx: (1 << 30) | 2 }),
                (2, Op::RdTsc),
                (2, Op::RdTscp),
                (2, Op::RdCr4),
                (
                    2,
                    Op::Cpuid {
                        leaf: 0xa,
                        subleaf: 0
                    }
                ),
                (
                    2,
                    Op::Cpuid {
                        leaf: 7,
                        subleaf: 1
                    }
                ),
                (2, Op::Delay { ns: 10_000 }),
            ]
        );
        assert_eq!(s.origins[0].line, 3);
        assert_eq!(s.origins.last().unwrap().line, 14);
    }

    #[test]
    fn cpu_all_and_default() {
        let s = parse("rdtsc\ncpu all\nrdtsc", &[0, 1, 2, 3]).unwrap();
        let cpus: Vec<u32> = s.batch.results().map(|r| r.cpu).collect();
        assert_eq!(cpus, [0, 0, 1, 2, 3]);
    }

    #[test]
    fn errors_point_at_line_and_column() {
        let cases = [
            ("rdmsr NOPE", 1, 7, "neither an MSR name"),
            ("\n\n  bogus 1", 3, 3, "unknown statement"),
            ("wrmsr 0x10", 1, 1, "usage: wrmsr"),
            ("wrmsr 0x10 zz", 1, 12, "not a number"),
            ("cpu 3-1", 1, 5, "bad CPU list"),
            ("rmw 0x10 7:0=0x100", 1, 10, "does not fit"),
            ("rmw 0x10 what", 1, 10, "expected set="),
            ("delay 5 parsecs", 1, 9, "usage: delay"),
            ("delay 5parsecs", 1, 7, "not a duration"),
            ("rdmsr 0x1_0000_0000", 1, 7, "32-bit"),
            ("# only a comment", 1, 1, "no ops"),
        ];
        for (text, line, col, msg) in cases {
            let e = parse(text, &[0]).unwrap_err();
            assert_eq!((e.line, e.col), (line, col), "{text}: {e}");
            assert!(e.msg.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn numbers_and_fields() {
        assert_eq!(parse_u64("0x1F"), Some(31));
        assert_eq!(parse_u64("0b101"), Some(5));
        assert_eq!(parse_u64("1_000"), Some(1000));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_field("63:0=1"), Some(Ok((u64::MAX, 1))));
        assert_eq!(parse_field("3:3=1"), Some(Ok((8, 8))));
        assert!(matches!(parse_field("1:2=0"), Some(Err(_))));
        assert_eq!(parse_duration("2ms"), Some(2_000_000));
    }
}
