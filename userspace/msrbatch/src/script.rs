// SPDX-License-Identifier: GPL-2.0
//! The text form of ops and batches: the script language of `msrbatch run`
//! (Documentation/scripts.md).
//!
//! An [`Op`] prints as one script statement (`Display`) and parses back from
//! one (`FromStr`); [`parse`] reads a whole script into a [`Batch`] and
//! [`to_text`] writes a batch as a script that [`parse`] turns back into the
//! same batch.
//!
//! One statement per line; `#` starts a comment. `cpu LIST` chooses the CPUs
//! the following ops run on (`all`, `3`, `0,2-3`; default CPU 0); every op
//! line adds one op per chosen CPU. `stop-on-error`, `sync-start` and
//! `timestamps` set the batch's flags of those names ([`Batch::stop_on_error`],
//! [`Batch::sync_start`], [`Batch::timestamps`]), wherever they stand.
//! Numbers follow the [one number grammar](crate::number); registers are
//! [MSR names or numbers](crate::msr::parse_msr).

use crate::msr::{parse_msr, Reg};
use crate::number::{parse_bit_range, parse_cpu_list, parse_duration, parse_u32, parse_u64};
use crate::{Batch, Op, Poll, PollSource, MAX_POLL_US, RDPMC_FIXED};
use std::fmt;
use std::str::FromStr;

/// A parse error, pointing at a line and column (both 1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// Where an op of a parsed script came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// Script line (1-based).
    pub line: usize,
}

/// A parsed script: the batch and, per op, its origin.
#[derive(Debug, Default)]
pub struct Script {
    /// The batch, in script order.
    pub batch: Batch,
    /// `origins[i]` is where op `i` of the batch came from.
    pub origins: Vec<Origin>,
}

/// The op as one script statement, e.g. `rdmsr IA32_PAT`, `rdpmc fixed 1`,
/// `cpuid 0xa 0`.
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.mnemonic();
        match *self {
            Op::RdMsr { msr } => write!(f, "{m} {}", Reg(msr)),
            Op::WrMsr { msr, value } => write!(f, "{m} {} {value:#x}", Reg(msr)),
            Op::RmwMsr { msr, clear, set } => {
                write!(f, "{m} {} clear={clear:#x} set={set:#x}", Reg(msr))
            }
            Op::RdPmc { ecx } if ecx & RDPMC_FIXED != 0 => {
                write!(f, "{m} fixed {}", ecx & !RDPMC_FIXED)
            }
            Op::RdPmc { ecx } => write!(f, "{m} {ecx}"),
            Op::Cpuid { leaf, subleaf } => write!(f, "{m} {leaf:#x} {subleaf}"),
            Op::Delay { ns } => write!(f, "{m} {ns}ns"),
            Op::RdTsc | Op::RdTscp | Op::RdCr4 => f.write_str(m),
            Op::Poll(poll) => poll.fmt(f),
        }
    }
}

/// The poll as its script statement, e.g. `poll tsc mask 0x100 count`: the
/// fields that differ from [`Poll::new`]'s follow the source.
impl fmt::Display for Poll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            PollSource::Msr(msr) => write!(f, "poll {}", Reg(msr))?,
            PollSource::Pmc(ecx) if ecx & RDPMC_FIXED != 0 => {
                write!(f, "poll pmc fixed {}", ecx & !RDPMC_FIXED)?
            }
            PollSource::Pmc(ecx) => write!(f, "poll pmc {ecx}")?,
            PollSource::Tsc => f.write_str("poll tsc")?,
        }
        let default = Poll::new(self.source);
        if self.mask != default.mask {
            write!(f, " mask {:#x}", self.mask)?;
        }
        if let Some(v) = self.equals {
            write!(f, " equals {v:#x}")?;
        }
        if self.timeout_us != default.timeout_us {
            write!(f, " timeout {}us", self.timeout_us)?;
        }
        if self.count {
            f.write_str(" count")?;
        }
        Ok(())
    }
}

/// The usage of the `poll` statement.
const POLL_USAGE: &str =
    "usage: poll REG|tsc|pmc [fixed] N [mask M] [equals V] [timeout DURATION] [count]";

/// Parses the arguments of a `poll` statement; errors carry the column.
fn parse_poll(head: &Tok<'_>, args: &[Tok<'_>]) -> Result<Op, (usize, String)> {
    let err = |t: &Tok<'_>, msg: String| (t.col, msg);
    let u32_at = |t: &Tok<'_>| parse_u32(t.text).map_err(|e| err(t, e.to_string()));
    let (source, mut rest) = match args {
        [] => return Err((head.col, POLL_USAGE.into())),
        [t, rest @ ..] if t.text == "tsc" => (PollSource::Tsc, rest),
        [t, f, i, rest @ ..] if t.text == "pmc" && f.text == "fixed" => {
            (PollSource::Pmc(RDPMC_FIXED | u32_at(i)?), rest)
        }
        [t, i, rest @ ..] if t.text == "pmc" => (PollSource::Pmc(u32_at(i)?), rest),
        [t, rest @ ..] => (
            PollSource::Msr(parse_msr(t.text).map_err(|e| err(t, e.to_string()))?),
            rest,
        ),
    };
    let mut poll = Poll::new(source);
    while let Some((word, tail)) = rest.split_first() {
        let value = |name: &str| {
            tail.first()
                .ok_or_else(|| err(word, format!("'{name}' needs a value; {POLL_USAGE}")))
        };
        let u64_at = |t: &Tok<'_>| parse_u64(t.text).map_err(|e| err(t, e.to_string()));
        rest = match word.text {
            "mask" => {
                poll.mask = u64_at(value("mask")?)?;
                &tail[1..]
            }
            "equals" => {
                poll.equals = Some(u64_at(value("equals")?)?);
                &tail[1..]
            }
            "timeout" => {
                let t = value("timeout")?;
                let ns = parse_duration(t.text).map_err(|e| err(t, e.to_string()))?;
                poll.timeout_us = match u16::try_from(ns / 1000) {
                    Ok(us) if ns % 1000 == 0 && (1..=MAX_POLL_US).contains(&us) => us,
                    _ => {
                        return Err(err(
                            t,
                            format!(
                                "a poll's timeout is whole microseconds, 1us to {MAX_POLL_US}us \
                                 (MSRBATCH_MAX_POLL_NS)"
                            ),
                        ))
                    }
                };
                &tail[1..]
            }
            "count" => {
                poll.count = true;
                tail
            }
            _ => return Err(err(word, POLL_USAGE.into())),
        };
    }
    if let Some(v) = poll.equals {
        if v & !poll.mask != 0 {
            return Err((
                head.col,
                format!("equals {v:#x} has bits outside mask {:#x}", poll.mask),
            ));
        }
    }
    Ok(Op::Poll(poll))
}

/// Parses one op statement (not `cpu` or `stop-on-error`); errors point at
/// line 1.
impl FromStr for Op {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let toks = tokens(s);
        let at = |col, msg| ParseError { line: 1, col, msg };
        let Some((head, args)) = toks.split_first() else {
            return Err(at(1, "no op".into()));
        };
        match parse_statement(head, args) {
            Ok(Statement::Op(op)) => Ok(op),
            Ok(_) => Err(at(
                head.col,
                format!("'{}' is a script statement, not an op", head.text),
            )),
            Err((col, msg)) => Err(at(col, msg)),
        }
    }
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

/// Parses `HI:LO=VALUE` into (clear mask, set bits); `None` if `spec` is not
/// of that shape.
fn parse_field(spec: &str) -> Option<Result<(u64, u64), String>> {
    let (range, value) = spec.split_once('=').filter(|(r, _)| r.contains(':'))?;
    Some((|| {
        let (hi, lo) = parse_bit_range(range).map_err(|e| e.to_string())?;
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            ((1u64 << width) - 1) << lo
        };
        let v = parse_u64(value).map_err(|e| e.to_string())?;
        if width < 64 && v >> width != 0 {
            return Err(format!("value {value} does not fit in bits {hi}:{lo}"));
        }
        Ok((mask, v << lo))
    })())
}

/// Parses the arguments of `rmw REG ...` into (clear, set); errors carry the
/// index of the argument to blame.
fn parse_rmw(args: &[Tok<'_>]) -> Result<(u64, u64), (usize, String)> {
    let (mut clear, mut set) = (0u64, 0u64);
    for (i, t) in args.iter().enumerate() {
        let r = if let Some(m) = t.text.strip_prefix("set=") {
            parse_u64(m).map(|m| (0, m)).map_err(|e| e.to_string())
        } else if let Some(m) = t.text.strip_prefix("clear=") {
            parse_u64(m).map(|m| (m, 0)).map_err(|e| e.to_string())
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

/// A batch flag's statement: its word, how it sets the flag on a batch and
/// how it reads it.
struct Flag {
    word: &'static str,
    set: fn(&mut Batch),
    get: fn(&Batch) -> bool,
}

/// The batch-level statements, in the order [`to_text`] writes them.
const FLAGS: [Flag; 3] = [
    Flag {
        word: "stop-on-error",
        set: |b| {
            b.stop_on_error(true);
        },
        get: Batch::stops_on_error,
    },
    Flag {
        word: "sync-start",
        set: |b| {
            b.sync_start(true);
        },
        get: Batch::syncs_start,
    },
    Flag {
        word: "timestamps",
        set: |b| {
            b.timestamps(true);
        },
        get: Batch::has_timestamps,
    },
];

/// One statement of a script.
enum Statement<'a> {
    Cpus(&'a Tok<'a>),
    Flag(&'static Flag),
    Op(Op),
}

/// Parses one non-empty statement; errors carry the column to blame.
fn parse_statement<'a>(
    head: &Tok<'_>,
    args: &'a [Tok<'a>],
) -> Result<Statement<'a>, (usize, String)> {
    let want = |count: std::ops::RangeInclusive<usize>, usage: &str| {
        if count.contains(&args.len()) {
            Ok(())
        } else {
            let at = args.get(*count.end()).unwrap_or(head);
            Err((at.col, format!("usage: {usage}")))
        }
    };
    let reg = |t: &Tok<'_>| parse_msr(t.text).map_err(|e| (t.col, e.to_string()));
    let u32_at = |t: &Tok<'_>| parse_u32(t.text).map_err(|e| (t.col, e.to_string()));
    if let Some(flag) = FLAGS.iter().find(|f| f.word == head.text) {
        want(0..=0, flag.word)?;
        return Ok(Statement::Flag(flag));
    }
    let op = match head.text {
        "cpu" | "cpus" => {
            want(1..=1, "cpu all|N|N-M,...")?;
            return Ok(Statement::Cpus(&args[0]));
        }
        "rdmsr" => {
            want(1..=1, "rdmsr REG")?;
            Op::RdMsr {
                msr: reg(&args[0])?,
            }
        }
        "wrmsr" => {
            want(2..=2, "wrmsr REG VALUE")?;
            Op::WrMsr {
                msr: reg(&args[0])?,
                value: parse_u64(args[1].text).map_err(|e| (args[1].col, e.to_string()))?,
            }
        }
        "rmw" => {
            if args.len() < 2 {
                return Err((
                    head.col,
                    "usage: rmw REG [set=MASK] [clear=MASK] [HI:LO=VALUE]...".into(),
                ));
            }
            let msr = reg(&args[0])?;
            let (clear, set) = parse_rmw(&args[1..]).map_err(|(i, m)| (args[i + 1].col, m))?;
            Op::RmwMsr { msr, clear, set }
        }
        "rdpmc" => {
            want(1..=2, "rdpmc N | rdpmc fixed N")?;
            match args {
                [f, i] if f.text == "fixed" => Op::RdPmc {
                    ecx: RDPMC_FIXED | u32_at(i)?,
                },
                [i] => Op::RdPmc { ecx: u32_at(i)? },
                _ => return Err((args[0].col, "usage: rdpmc N | rdpmc fixed N".into())),
            }
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
            Op::Cpuid {
                leaf: u32_at(&args[0])?,
                subleaf: args.get(1).map(u32_at).transpose()?.unwrap_or(0),
            }
        }
        "delay" => {
            want(1..=1, "delay DURATION (e.g. 100us)")?;
            Op::Delay {
                ns: parse_duration(args[0].text).map_err(|e| (args[0].col, e.to_string()))?,
            }
        }
        "poll" => parse_poll(head, args)?,
        other => return Err((head.col, format!("unknown statement '{other}'"))),
    };
    Ok(Statement::Op(op))
}

/// Parses a script. `online` is the list `cpu all` stands for.
pub fn parse(text: &str, online: &[u32]) -> Result<Script, ParseError> {
    let mut script = Script::default();
    let mut cpus = vec![0u32];
    for (n, line) in text.lines().enumerate() {
        let toks = tokens(line);
        let Some((head, args)) = toks.split_first() else {
            continue;
        };
        let at = |(col, msg)| ParseError {
            line: n + 1,
            col,
            msg,
        };
        match parse_statement(head, args).map_err(at)? {
            Statement::Cpus(list) => {
                cpus =
                    parse_cpu_list(list.text, online).map_err(|e| at((list.col, e.to_string())))?;
            }
            Statement::Flag(flag) => (flag.set)(&mut script.batch),
            Statement::Op(op) => {
                for &cpu in &cpus {
                    script.batch.push(cpu, op);
                    script.origins.push(Origin { line: n + 1 });
                }
            }
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

/// Writes `batch` as a script: a statement for each flag the batch has
/// (`stop-on-error`, `sync-start`, `timestamps`), a `cpu N` line whenever the
/// CPU changes, and one statement per op. [`parse`] turns it back into the
/// same batch.
pub fn to_text(batch: &Batch) -> String {
    use fmt::Write as _;
    let mut s = String::new();
    for flag in FLAGS.iter().filter(|f| (f.get)(batch)) {
        let _ = writeln!(s, "{}", flag.word);
    }
    let mut cpu = None;
    for r in batch.results() {
        if cpu != Some(r.cpu) {
            let _ = writeln!(s, "cpu {}", r.cpu);
            cpu = Some(r.cpu);
        }
        let _ = writeln!(s, "{}", r.op);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(b: &Batch) -> Vec<(u32, Op)> {
        b.results().map(|r| (r.cpu, r.op)).collect()
    }

    /// One op of every kind, with values that exercise names, numbers, the
    /// fixed-counter bit and full-width fields.
    fn every_op() -> Vec<Op> {
        vec![
            Op::RdMsr { msr: 0x277 },
            Op::RdMsr { msr: 0x1234 },
            Op::WrMsr {
                msr: 0x10,
                value: 42,
            },
            Op::WrMsr {
                msr: u32::MAX,
                value: u64::MAX,
            },
            Op::RmwMsr {
                msr: 0xc000_0103,
                clear: 0xff06,
                set: 0xab01,
            },
            Op::RmwMsr {
                msr: 0x38f,
                clear: 0,
                set: u64::MAX,
            },
            Op::RdPmc { ecx: 1 },
            Op::RdPmc {
                ecx: RDPMC_FIXED | 2,
            },
            Op::RdPmc { ecx: u32::MAX },
            Op::RdPmc { ecx: 0x8000_0001 },
            Op::RdTsc,
            Op::RdTscp,
            Op::RdCr4,
            Op::Cpuid {
                leaf: 0xa,
                subleaf: 0,
            },
            Op::Cpuid {
                leaf: 0x8000_0022,
                subleaf: 7,
            },
            Op::Delay { ns: 10_000 },
            Op::Delay { ns: 0 },
            Op::Poll(Poll::new(PollSource::Msr(0x611))),
            Op::Poll(
                Poll::new(PollSource::Tsc)
                    .with_mask(0x100)
                    .with_equals(0x100)
                    .with_timeout_us(5)
                    .with_count(true),
            ),
            Op::Poll(
                Poll::new(PollSource::Pmc(RDPMC_FIXED | 1))
                    .with_mask(0)
                    .with_timeout_us(1),
            ),
        ]
    }

    #[test]
    fn ops_print_as_script_statements() {
        let text: Vec<String> = every_op().iter().map(Op::to_string).collect();
        assert_eq!(
            text,
            [
                "rdmsr IA32_PAT",
                "rdmsr 0x1234",
                "wrmsr IA32_TSC 0x2a",
                "wrmsr 0xffffffff 0xffffffffffffffff",
                "rmw IA32_TSC_AUX clear=0xff06 set=0xab01",
                "rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0xffffffffffffffff",
                "rdpmc 1",
                "rdpmc fixed 2",
                "rdpmc fixed 3221225471",
                "rdpmc 2147483649",
                "rdtsc",
                "rdtscp",
                "rdcr4",
                "cpuid 0xa 0",
                "cpuid 0x80000022 7",
                "delay 10000ns",
                "delay 0ns",
                "poll MSR_PKG_ENERGY_STATUS",
                "poll tsc mask 0x100 equals 0x100 timeout 5us count",
                "poll pmc fixed 1 mask 0x0 timeout 1us",
            ]
        );
    }

    #[test]
    fn op_text_round_trips() {
        for op in every_op() {
            let text = op.to_string();
            assert_eq!(text.parse::<Op>(), Ok(op), "{text}");
        }
        // Every other spelling of an op reads as the op it prints as.
        for (text, op) in [
            ("rdmsr 631", Op::RdMsr { msr: 0x277 }),
            ("rdmsr ia32_pat   # comment", Op::RdMsr { msr: 0x277 }),
            (
                "rmw 0x10 15:8=0xab set=1 clear=0b110",
                Op::RmwMsr {
                    msr: 0x10,
                    clear: 0xff06,
                    set: 0xab01,
                },
            ),
            (
                "rdpmc 0x40000002",
                Op::RdPmc {
                    ecx: RDPMC_FIXED | 2,
                },
            ),
            (
                "cpuid 10",
                Op::Cpuid {
                    leaf: 0xa,
                    subleaf: 0,
                },
            ),
            ("delay 10us", Op::Delay { ns: 10_000 }),
            (
                "poll 0x611 count timeout 1ms mask 0xffffffff",
                Op::Poll(
                    Poll::new(PollSource::Msr(0x611))
                        .with_mask(0xffff_ffff)
                        .with_timeout_us(1000)
                        .with_count(true),
                ),
            ),
            (
                "poll pmc 3 equals 0",
                Op::Poll(Poll::new(PollSource::Pmc(3)).with_equals(0)),
            ),
        ] {
            let parsed: Op = text.parse().unwrap();
            assert_eq!(parsed, op, "{text}");
            assert_eq!(parsed.to_string().parse::<Op>(), Ok(op), "{text}");
        }
        for (text, col, msg) in [
            ("", 1, "no op"),
            ("cpu 1", 1, "a script statement, not an op"),
            ("timestamps", 1, "a script statement, not an op"),
            ("rdmsr", 1, "usage: rdmsr"),
            ("rdmsr 010", 7, "must not start with 0"),
            ("frobnicate", 1, "unknown statement"),
            ("poll", 1, "usage: poll"),
            ("poll tsc mask", 10, "'mask' needs a value"),
            (
                "poll tsc timeout 3ms",
                18,
                "whole microseconds, 1us to 2000us",
            ),
            ("poll tsc timeout 1500ns", 18, "whole microseconds"),
            ("poll tsc often", 10, "usage: poll"),
            ("poll tsc mask 0xf0 equals 1", 1, "outside mask"),
        ] {
            let e = text.parse::<Op>().unwrap_err();
            assert_eq!((e.line, e.col), (1, col), "{text}: {e}");
            assert!(e.msg.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn batch_text_round_trips() {
        let mut b = Batch::new();
        for (i, op) in every_op().into_iter().enumerate() {
            b.push([0, 0, 3, 1, 1][i % 5], op);
        }
        let text = to_text(&b);
        assert!(
            text.starts_with("cpu 0\nrdmsr IA32_PAT\nrdmsr 0x1234\ncpu 3\n"),
            "{text}"
        );
        let back = parse(&text, &[]).unwrap();
        assert_eq!(ops(&back.batch), ops(&b));
        assert!(!back.batch.stops_on_error());
        b.stop_on_error(true);
        let back = parse(&to_text(&b), &[]).unwrap();
        assert!(back.batch.stops_on_error());
        assert!(!back.batch.syncs_start() && !back.batch.has_timestamps());
        assert_eq!(ops(&back.batch), ops(&b));
        // Every combination of the flags round-trips.
        for bits in 0..8 {
            let mut b = Batch::new();
            b.push(2, Op::RdTsc);
            b.stop_on_error(bits & 1 != 0)
                .sync_start(bits & 2 != 0)
                .timestamps(bits & 4 != 0);
            let text = to_text(&b);
            let back = parse(&text, &[]).unwrap().batch;
            assert_eq!(
                (
                    back.stops_on_error(),
                    back.syncs_start(),
                    back.has_timestamps()
                ),
                (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0),
                "{text}"
            );
            assert_eq!(ops(&back), ops(&b));
        }
        b.sync_start(true).timestamps(true);
        let text = to_text(&b);
        assert!(
            text.starts_with("stop-on-error\nsync-start\ntimestamps\ncpu 0\n"),
            "{text}"
        );
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
sync-start
";
        let s = parse(text, &[0, 1, 2, 3]).unwrap();
        let rmw = Op::RmwMsr {
            msr: 0xc000_0103,
            clear: 0xff06,
            set: 0xab01,
        };
        let wr = Op::WrMsr {
            msr: 0x10,
            value: 42,
        };
        assert_eq!(
            ops(&s.batch),
            vec![
                (1, Op::RdMsr { msr: 0x277 }),
                (3, Op::RdMsr { msr: 0x277 }),
                (1, wr),
                (3, wr),
                (1, rmw),
                (3, rmw),
                (1, Op::RdPmc { ecx: 1 }),
                (3, Op::RdPmc { ecx: 1 }),
                (
                    1,
                    Op::RdPmc {
                        ecx: RDPMC_FIXED | 2
                    }
                ),
                (
                    3,
                    Op::RdPmc {
                        ecx: RDPMC_FIXED | 2
                    }
                ),
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
        assert!(s.batch.stops_on_error() && s.batch.syncs_start());
        assert!(!s.batch.has_timestamps());
        assert_eq!(s.origins[0].line, 3);
        assert_eq!(s.origins.last().unwrap().line, 14);
    }

    #[test]
    fn cpu_all_and_default() {
        let s = parse("rdtsc\ncpu all\nrdtsc", &[0, 1, 2, 3]).unwrap();
        let cpus: Vec<u32> = s.batch.results().map(|r| r.cpu).collect();
        assert_eq!(cpus, [0, 0, 1, 2, 3]);
        let s = parse("cpus all\nrdtsc", &[1, 2]).unwrap();
        assert_eq!(s.batch.results().map(|r| r.cpu).collect::<Vec<_>>(), [1, 2]);
        let e = parse("cpus all\nrdtsc", &[]).unwrap_err();
        assert_eq!((e.line, e.col), (1, 6));
        assert!(e.msg.contains("the online CPUs are unknown"), "{e}");
    }

    #[test]
    fn errors_point_at_line_and_column() {
        let cases = [
            ("rdmsr NOPE", 1, 7, "neither an MSR name"),
            ("\n\n  bogus 1", 3, 3, "unknown statement"),
            ("wrmsr 0x10", 1, 1, "usage: wrmsr"),
            ("wrmsr 0x10 zz", 1, 12, "not a number"),
            ("wrmsr 0x10 010", 1, 12, "must not start with 0"),
            ("cpu 3-1", 1, 5, "not a CPU list"),
            ("cpu 01", 1, 5, "must not start with 0"),
            ("rmw 0x10", 1, 1, "usage: rmw"),
            ("rmw 0x10 7:0=0x100", 1, 10, "does not fit"),
            ("rmw 0x10 64:0=1", 1, 10, "'64:0' is not a bit range"),
            ("rmw 0x10 what", 1, 10, "expected set="),
            ("rmw 0x10 set=1 clear=08", 1, 16, "must not start with 0"),
            ("rdpmc fixed", 1, 7, "not a number"),
            ("rdpmc one two", 1, 7, "usage: rdpmc"),
            ("cpuid 0xa 1 2", 1, 13, "usage: cpuid"),
            ("delay 5 parsecs", 1, 9, "usage: delay"),
            ("delay 5parsecs", 1, 7, "not a duration"),
            ("rdmsr 0x1_0000_0000", 1, 7, "does not fit in 32 bits"),
            ("rdtsc now", 1, 7, "usage: rdtsc"),
            ("rdtsc\nsync-start now", 2, 12, "usage: sync-start"),
            ("timestamps 1\nrdtsc", 1, 12, "usage: timestamps"),
            ("timestamps", 1, 1, "no ops"),
            ("# only a comment", 1, 1, "no ops"),
        ];
        for (text, line, col, msg) in cases {
            let e = parse(text, &[0]).unwrap_err();
            assert_eq!((e.line, e.col), (line, col), "{text}: {e}");
            assert!(e.msg.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn fields() {
        assert_eq!(parse_field("63:0=1"), Some(Ok((u64::MAX, 1))));
        assert_eq!(parse_field("3:3=1"), Some(Ok((8, 8))));
        assert!(matches!(parse_field("1:2=0"), Some(Err(_))));
        assert_eq!(parse_field("set=1"), None);
    }
}
