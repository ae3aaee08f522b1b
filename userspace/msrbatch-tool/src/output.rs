// SPDX-License-Identifier: GPL-2.0
//! Output formats: the table, JSON and CSV forms of op results. An op itself
//! is shown in its script form (`Display` of [`Op`], from the library).

use clap::ValueEnum;
use msrbatch::script::Origin;
use msrbatch::{msr_name, Op, OpResult, Poll, PollSource, PollStamp, Value};
use serde::ser::SerializeMap;
use serde::Serialize;
use serde_json::value::RawValue;

/// Output formats of `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

impl Format {
    /// The format of `--format`, unless `--json` or `--csv` is given.
    pub fn chosen(format: Format, json: bool, csv: bool) -> Format {
        match (json, csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => format,
        }
    }
}

/// The CSV header line.
/// The CSV header line (the columns of [`CSV_EXTRA`] last, after those of
/// earlier versions).
pub const CSV_HEADER: &str =
    "iteration,line,cpu,op,register,value,error,tsc,start_spread,old,aux,ebx,ecx,edx,reads,ticks";

/// One run of a script, as its output names it.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Which run (from 0).
    pub iteration: u32,
    /// Whether the script runs more than once (the table then names the
    /// iteration).
    pub repeat: bool,
    /// Whether the batch asked for a synchronised start or timestamps (the
    /// table then has a `tsc` column and shows the start spread).
    pub timing: bool,
    /// The run's start spread in TSC ticks, where the kernel reports it
    /// (plain runs; a rerun of a prepared batch reports none).
    pub start_spread: Option<u64>,
}

/// What an op returned, for the table.
pub fn describe_value(value: &Result<Value, msrbatch::Errno>) -> String {
    match value {
        Ok(Value::None) | Err(_) => String::new(),
        Ok(Value::U64(v)) => format!("{v:#018x}"),
        Ok(Value::Rmw { old, new }) => format!("{old:#018x} -> {new:#018x}"),
        Ok(Value::Tscp { tsc, aux }) => format!("{tsc:#018x} aux={aux:#x}"),
        Ok(Value::Cpuid { eax, ebx, ecx, edx }) => {
            format!("eax={eax:08x} ebx={ebx:08x} ecx={ecx:08x} edx={edx:08x}")
        }
        Ok(Value::Ticks(t)) => format!("{t} TSC ticks"),
        Ok(Value::Poll {
            value,
            at: PollStamp::Tsc(t),
        }) => format!("{value:#018x} at TSC {t}"),
        Ok(Value::Poll {
            value,
            at: PollStamp::Count { reads, ticks },
        }) => format!("{value:#018x} after {reads} reads, {ticks} TSC ticks"),
    }
}

/// The register or index of an op as a number, for JSON and CSV (empty if
/// the op has none).
pub fn csv_reg(op: &Op) -> String {
    match *op {
        Op::RdMsr { msr } | Op::WrMsr { msr, .. } | Op::RmwMsr { msr, .. } => format!("{msr:#x}"),
        Op::Poll(Poll {
            source: PollSource::Msr(msr),
            ..
        }) => format!("{msr:#x}"),
        Op::RdPmc { ecx }
        | Op::Poll(Poll {
            source: PollSource::Pmc(ecx),
            ..
        }) => format!("{ecx:#x}"),
        Op::Cpuid { leaf, subleaf } => format!("{leaf:#x}.{subleaf}"),
        Op::Delay { ns } => ns.to_string(),
        Op::RdTsc
        | Op::RdTscp
        | Op::RdCr4
        | Op::Poll(Poll {
            source: PollSource::Tsc,
            ..
        }) => String::new(),
    }
}

/// A JSON object whose members keep the order they were added in (as
/// scripts and the guest tests read them), written by serde_json.
#[derive(Clone, Debug, Default)]
pub struct JsonObject(Vec<(String, Box<RawValue>)>);

impl JsonObject {
    /// Adds member `key`.
    pub fn push(&mut self, key: impl Into<String>, value: impl Serialize) {
        let value = serde_json::value::to_raw_value(&value).expect("plain data serializes");
        self.0.push((key.into(), value));
    }

    /// Adds member `key` and returns the object.
    pub fn with(mut self, key: &'static str, value: impl Serialize) -> Self {
        self.push(key, value);
        self
    }

    /// Adds member `key`, the number `text` exactly as written (`null` if
    /// empty).
    pub fn push_number(&mut self, key: impl Into<String>, text: &str) {
        let text = if text.is_empty() { "null" } else { text };
        let value = RawValue::from_string(text.to_string()).expect("a number is JSON");
        self.0.push((key.into(), value));
    }
}

impl Serialize for JsonObject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl JsonObject {
    /// The object as `perf stat -j` prints it: `{"key" : value, ...}`.
    pub fn perf_text(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, PerfFormatter);
        self.serialize(&mut ser).expect("plain data serializes");
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

/// serde_json's compact layout with perf's separators: `" : "` between a
/// key and its value, `", "` between members.
struct PerfFormatter;

impl serde_json::ser::Formatter for PerfFormatter {
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b" : ")
    }
}

impl std::fmt::Display for JsonObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}

/// The JSON fields of one op's result, the same in `run` and `sample`: the
/// op's mnemonic, its register or index (`register`, a number as text; and
/// `name` for a named MSR), every value it returned (as a JSON number and a
/// `_hex` string: `value`, and `old`/`new`, `aux`, `eax`..`edx` where the op
/// returns them) and last `error` (null, or the errno's name). `extra` goes
/// before `error`.
pub fn json_op(r: &OpResult, extra: &[(&'static str, u64)]) -> JsonObject {
    let mut o = JsonObject::default()
        .with("op", r.op.mnemonic())
        .with("register", csv_reg(&r.op));
    if let Op::RdMsr { msr }
    | Op::WrMsr { msr, .. }
    | Op::RmwMsr { msr, .. }
    | Op::Poll(Poll {
        source: PollSource::Msr(msr),
        ..
    }) = r.op
    {
        if let Some(n) = msr_name(msr) {
            o.push("name", n);
        }
    }
    match r.value {
        Ok(v) => {
            for (k, v) in values(&r.op, &v) {
                o.push(k, v);
                o.push(format!("{k}_hex"), format!("{v:#x}"));
            }
        }
        Err(_) => o.push("value", ()),
    }
    for &(k, v) in extra {
        o.push(k, v);
    }
    match r.value {
        Ok(_) => o.push("error", ()),
        Err(e) => o.push("error", e.name()),
    }
    o
}

/// Every value an op returned, named: `value` (the main one: the value
/// written for WRMSR, the new value of an RMW, the TSC of RDTSCP, EAX of
/// CPUID, the last value a poll read), then `old` and `new` (RMW), `aux`
/// (RDTSCP), `eax`..`edx` (CPUID), a poll's `tsc` or `reads` and `ticks`.
pub fn values(op: &Op, v: &Value) -> Vec<(&'static str, u64)> {
    let main = match (v, op) {
        (Value::None, Op::WrMsr { value, .. }) => Some(*value),
        _ => v.as_u64(),
    };
    let mut out: Vec<(&'static str, u64)> = main.map(|m| ("value", m)).into_iter().collect();
    match *v {
        Value::Rmw { old, new } => out.extend([("old", old), ("new", new)]),
        Value::Tscp { aux, .. } => out.push(("aux", u64::from(aux))),
        Value::Cpuid { eax, ebx, ecx, edx } => out.extend(
            [("eax", eax), ("ebx", ebx), ("ecx", ecx), ("edx", edx)]
                .map(|(k, v)| (k, u64::from(v))),
        ),
        Value::Poll {
            at: PollStamp::Tsc(t),
            ..
        } => out.push(("tsc", t)),
        Value::Poll {
            at: PollStamp::Count { reads, ticks },
            ..
        } => out.extend([("reads", u64::from(reads)), ("ticks", u64::from(ticks))]),
        _ => {}
    }
    out
}

/// One op result of `run` as a JSON object: where it came from (iteration,
/// script line, index in the batch, CPU), then [`json_op`], with the op's
/// `tsc` and the run's `start_spread` where there are some.
pub fn json_result(run: &Run, line: usize, r: &OpResult) -> String {
    let extra: Vec<(&'static str, u64)> = [("tsc", r.tsc), ("start_spread", run.start_spread)]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    let mut o = JsonObject::default()
        .with("iteration", run.iteration)
        .with("line", line)
        .with("index", r.index)
        .with("cpu", r.cpu);
    o.0.extend(json_op(r, &extra).0);
    o.to_string()
}

/// The CSV columns of the values an op may return besides its main one
/// (empty for ops without them): RMW's old value, RDTSCP's TSC_AUX, CPUID's
/// EBX, ECX and EDX (its EAX is the value), a counting poll's reads and
/// ticks (a poll's TSC goes into the `tsc` column).
pub const CSV_EXTRA: [&str; 7] = ["old", "aux", "ebx", "ecx", "edx", "reads", "ticks"];

/// An op's cells for [`CSV_EXTRA`].
fn csv_extra(r: &OpResult) -> Vec<String> {
    let vals = r.value.map(|v| values(&r.op, &v)).unwrap_or_default();
    CSV_EXTRA
        .iter()
        .map(|col| {
            vals.iter()
                .find(|(k, _)| k == col)
                .map(|(_, v)| format!("{v:#x}"))
                .unwrap_or_default()
        })
        .collect()
}

/// One op result as a CSV row (see [`CSV_HEADER`]).
fn csv_result(run: &Run, line: usize, r: &OpResult) -> String {
    let value = r
        .value
        .ok()
        .and_then(|v| v.as_u64())
        .map(|v| format!("{v:#x}"))
        .unwrap_or_default();
    let err = r.value.err().map(|e| e.name()).unwrap_or_default();
    let num = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let tsc = r.tsc.or(match r.value {
        Ok(Value::Poll {
            at: PollStamp::Tsc(t),
            ..
        }) => Some(t),
        _ => None,
    });
    format!(
        "{},{line},{},{},{},{value},{err},{},{},{}",
        run.iteration,
        r.cpu,
        r.op.mnemonic(),
        csv_reg(&r.op),
        num(tsc),
        num(run.start_spread),
        csv_extra(r).join(",")
    )
}

/// The ops a run did not run for a reason the user should hear once
/// (`ETIME`: the busy budget), counted over the runs.
#[derive(Debug, Default)]
pub struct NotRun {
    etime: usize,
}

impl NotRun {
    /// Counts the ops of `results` the busy budget kept from running.
    pub fn count(&mut self, results: impl Iterator<Item = OpResult>) {
        self.etime += results
            .filter(|r| r.value == Err(msrbatch::Errno(libc::ETIME)))
            .count();
    }

    /// The note for stderr, if any op was not run.
    pub fn note(&self) -> Option<String> {
        let why = msrbatch::refusal::not_run(msrbatch::Errno(libc::ETIME))?;
        (self.etime > 0).then(|| format!("{} ops ETIME, {why}", self.etime))
    }

    /// Prints the note on stderr.
    pub fn report(&self) {
        if let Some(n) = self.note() {
            eprintln!("msrbatch: {n}");
        }
    }
}

/// What the allowlist's write masks did to `ops`' writes that ran (those
/// `ran` says did): one note per MSR whose mask is not all ones, naming
/// the bits the write could not change (the kernel merges a masked write,
/// as msr-safe does: bits outside the mask keep the MSR's value). For a
/// descriptor opened without CAP_SYS_RAWIO, against the list in force.
pub fn masked_write_notes(
    list: &msrbatch::allowlist::Allowlist,
    ops: impl Iterator<Item = (Op, bool)>,
) -> Vec<String> {
    let mut notes: Vec<(u32, u64, u64)> = Vec::new();
    for (op, ran) in ops {
        let (msr, asked) = match op {
            // A WRMSR writes every bit: those outside the mask are kept.
            Op::WrMsr { msr, .. } => (msr, u64::MAX),
            Op::RmwMsr { msr, clear, set } => (msr, clear | set),
            _ => continue,
        };
        let Some(mask) = list.mask(msr).filter(|&m| m != u64::MAX) else {
            continue;
        };
        let kept = asked & !mask;
        if ran && kept != 0 && !notes.iter().any(|n| n.0 == msr) {
            notes.push((msr, mask, kept));
        }
    }
    notes
        .into_iter()
        .map(|(msr, mask, kept)| {
            let name = msr_name(msr).unwrap_or_else(|| format!("{msr:#x}"));
            format!(
                "{name}: the allowlist's write mask {mask:#x} kept bits {kept:#x} at the MSR's value \
                 (a masked write changes only the mask's bits, as msr-safe's does)"
            )
        })
        .collect()
}

/// Prints [`masked_write_notes`] on stderr when this process lacks
/// CAP_SYS_RAWIO (its descriptor then got the allowlist) and can read the
/// list in force.
pub fn report_masked_writes(ops: impl Iterator<Item = (Op, bool)>) {
    if has_rawio() {
        return;
    }
    let Ok(text) = msrbatch::allowlist::read(msrbatch::allowlist::ALLOWLIST_PATH) else {
        return;
    };
    let Ok(list) = msrbatch::allowlist::Allowlist::parse(&text) else {
        return;
    };
    for n in masked_write_notes(&list, ops) {
        eprintln!("msrbatch: note: {n}");
    }
}

/// Whether this process has CAP_SYS_RAWIO (bit 17 of CapEff in
/// /proc/self/status); unknown counts as having it (no note).
fn has_rawio() -> bool {
    const CAP_SYS_RAWIO: u32 = 17;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_none_or(|caps| caps & (1 << CAP_SYS_RAWIO) != 0)
}

/// One table line: the cells padded to `width`, two spaces apart, no
/// trailing blanks.
pub fn format_row<S: AsRef<str>>(cells: &[S], width: &[usize]) -> String {
    let parts: Vec<String> = cells
        .iter()
        .zip(width)
        .map(|(c, w)| format!("{:<w$}", c.as_ref()))
        .collect();
    parts.join("  ").trim_end().to_string()
}

/// Prints a table: a header and rows, columns padded to their widest cell.
pub fn print_table<R: AsRef<[String]>>(header: &[&str], rows: &[R]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row.as_ref()) {
            *w = (*w).max(cell.len());
        }
    }
    println!("{}", format_row(header, &width));
    for row in rows {
        println!("{}", format_row(row.as_ref(), &width));
    }
}

/// The table's rows: line, CPU, op, value, status, and with `timing` the
/// op's TSC.
fn table_rows<'a>(
    timing: bool,
    results: impl Iterator<Item = (OpResult, &'a Origin)>,
) -> Vec<Vec<String>> {
    results
        .map(|(r, o)| {
            let mut row = vec![
                o.line.to_string(),
                r.cpu.to_string(),
                r.op.to_string(),
                describe_value(&r.value),
                r.value.map_or_else(|e| e.name(), |_| "ok".to_string()),
            ];
            if timing {
                row.push(r.tsc.map(|t| t.to_string()).unwrap_or_default());
            }
            row
        })
        .collect()
}

/// Prints the results of one run of a script in `format`.
pub fn print_results<'a>(
    format: Format,
    run: &Run,
    results: impl Iterator<Item = (OpResult, &'a Origin)>,
) {
    match format {
        Format::Table => {
            if run.repeat {
                println!("# iteration {}", run.iteration);
            }
            let header = ["line", "cpu", "op", "value", "status", "tsc"];
            let columns = if run.timing { 6 } else { 5 };
            print_table(&header[..columns], &table_rows(run.timing, results));
            if let (true, Some(s)) = (run.timing, run.start_spread) {
                println!("start spread: {s} TSC ticks");
            }
        }
        Format::Json => {
            for (r, o) in results {
                println!("{}", json_result(run, o.line, &r));
            }
        }
        Format::Csv => {
            for (r, o) in results {
                println!("{}", csv_result(run, o.line, &r));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use msrbatch::Errno;

    fn result(op: Op, value: Result<Value, Errno>) -> OpResult {
        OpResult {
            index: 3,
            cpu: 2,
            op,
            value,
            tsc: None,
        }
    }

    fn run(iteration: u32, start_spread: Option<u64>) -> Run {
        Run {
            iteration,
            repeat: false,
            timing: false,
            start_spread,
        }
    }

    /// CPUID 0xa.1 that returned EAX..EDX 1..4.
    fn cpuid_result() -> OpResult {
        let op = Op::Cpuid {
            leaf: 0xa,
            subleaf: 1,
        };
        let regs = Value::Cpuid {
            eax: 1,
            ebx: 2,
            ecx: 3,
            edx: 4,
        };
        result(op, Ok(regs))
    }

    #[test]
    fn json_is_valid_and_complete() {
        let cases = [
            (
                result(Op::RdMsr { msr: 0x277 }, Ok(Value::U64(u64::MAX))),
                "value",
                Some(u64::MAX),
            ),
            (
                result(
                    Op::RmwMsr {
                        msr: 0x10,
                        clear: 1,
                        set: 2,
                    },
                    Ok(Value::Rmw { old: 1, new: 2 }),
                ),
                "old",
                Some(1),
            ),
            (cpuid_result(), "edx", Some(4)),
            (
                result(Op::RdTscp, Ok(Value::Tscp { tsc: 9, aux: 3 })),
                "aux",
                Some(3),
            ),
            (
                result(
                    Op::WrMsr {
                        msr: 0x10,
                        value: 5,
                    },
                    Ok(Value::None),
                ),
                "value",
                Some(5),
            ),
            (
                result(Op::RdPmc { ecx: 1 << 30 }, Err(Errno(libc::EIO))),
                "value",
                None,
            ),
        ];
        for (r, key, want) in cases {
            let text = json_result(&run(7, None), 12, &r);
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(v["iteration"], 7);
            assert_eq!(v["line"], 12);
            assert_eq!(v["cpu"], 2);
            assert_eq!(v["op"], r.op.mnemonic());
            assert!(v["register"].is_string());
            assert_eq!(v[key].as_u64(), want, "{text}");
            match r.value {
                Ok(_) => assert!(v["error"].is_null()),
                Err(_) => assert_eq!(v["error"], "EIO"),
            }
        }
        let pat = result(Op::RdMsr { msr: 0x277 }, Ok(Value::U64(0x7040600070406)));
        let v: serde_json::Value =
            serde_json::from_str(&json_result(&run(0, None), 1, &pat)).unwrap();
        assert_eq!(v["name"], "IA32_PAT");
        assert_eq!(v["value_hex"], "0x7040600070406");
        assert!(v.get("tsc").is_none() && v.get("start_spread").is_none());
        // A timestamp and a start spread, where there are some.
        let stamped = OpResult {
            tsc: Some(123_456),
            ..pat
        };
        let text = json_result(&run(0, Some(42)), 1, &stamped);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (v["tsc"].as_u64(), v["start_spread"].as_u64()),
            (Some(123_456), Some(42)),
            "{text}"
        );
    }

    /// The bytes, which scripts and the guest tests match: members in this
    /// order, no spaces.
    #[test]
    fn json_bytes() {
        let pat = result(Op::RdMsr { msr: 0x277 }, Ok(Value::U64(0x7040600070406)));
        let stamped = OpResult {
            tsc: Some(123_456),
            ..pat
        };
        assert_eq!(
            json_result(&run(3, Some(42)), 1, &stamped),
            format!(
                "{{\"iteration\":3,\"line\":1,\"index\":{},\"cpu\":2,\"op\":\"rdmsr\",\"register\":\"0x277\",\"name\":\"IA32_PAT\",\"value\":1974748653749254,\"value_hex\":\"0x7040600070406\",\"tsc\":123456,\"start_spread\":42,\"error\":null}}",
                pat.index
            )
        );
        let failed = result(Op::RdPmc { ecx: 1 << 30 }, Err(Errno(libc::EIO)));
        assert_eq!(
            json_result(&run(0, None), 2, &failed),
            format!(
                "{{\"iteration\":0,\"line\":2,\"index\":{},\"cpu\":2,\"op\":\"rdpmc\",\"register\":\"0x40000000\",\"value\":null,\"error\":\"EIO\"}}",
                failed.index
            )
        );
        let cpuid = cpuid_result();
        assert_eq!(
            json_result(&run(0, None), 2, &cpuid),
            format!(
                "{{\"iteration\":0,\"line\":2,\"index\":{},\"cpu\":2,\"op\":\"cpuid\",\"register\":\"0xa.1\",\"value\":1,\"value_hex\":\"0x1\",\"eax\":1,\"eax_hex\":\"0x1\",\"ebx\":2,\"ebx_hex\":\"0x2\",\"ecx\":3,\"ecx_hex\":\"0x3\",\"edx\":4,\"edx_hex\":\"0x4\",\"error\":null}}",
                cpuid.index
            )
        );
    }

    #[test]
    fn csv_rows() {
        let pat = result(Op::RdMsr { msr: 0x277 }, Ok(Value::U64(0x7040600070406)));
        assert_eq!(
            csv_result(&run(0, None), 4, &pat),
            "0,4,2,rdmsr,0x277,0x7040600070406,,,,,,,,,,"
        );
        let fault = result(Op::RdPmc { ecx: 1 << 30 }, Err(Errno(libc::EIO)));
        assert_eq!(
            csv_result(&run(1, Some(0)), 2, &fault),
            "1,2,2,rdpmc,0x40000000,,EIO,,0,,,,,,,"
        );
        let stamped = OpResult {
            tsc: Some(99),
            ..pat
        };
        assert_eq!(
            csv_result(&run(0, Some(7)), 4, &stamped),
            "0,4,2,rdmsr,0x277,0x7040600070406,,99,7,,,,,,,"
        );
        // Every value an op returns has its column.
        let rmw = Op::RmwMsr {
            msr: 0x10,
            clear: 1,
            set: 2,
        };
        let cpuid = Op::Cpuid {
            leaf: 0xa,
            subleaf: 0,
        };
        for (r, want) in [
            (
                result(rmw, Ok(Value::Rmw { old: 3, new: 2 })),
                "0,1,2,rmw,0x10,0x2,,,,0x3,,,,,,",
            ),
            (
                result(Op::RdTscp, Ok(Value::Tscp { tsc: 9, aux: 0x103 })),
                "0,1,2,rdtscp,,0x9,,,,,0x103,,,,,",
            ),
            (
                result(
                    cpuid,
                    Ok(Value::Cpuid {
                        eax: 1,
                        ebx: 2,
                        ecx: 3,
                        edx: 4,
                    }),
                ),
                "0,1,2,cpuid,0xa.0,0x1,,,,,,0x2,0x3,0x4,,",
            ),
            (
                result(
                    Op::Poll(Poll::new(PollSource::Msr(0x611)).with_timeout_us(100)),
                    Ok(Value::Poll {
                        value: 5,
                        at: PollStamp::Tsc(77),
                    }),
                ),
                "0,1,2,poll,0x611,0x5,,77,,,,,,,,",
            ),
            (
                result(
                    Op::Poll(
                        Poll::new(PollSource::Tsc)
                            .with_timeout_us(100)
                            .with_count(true),
                    ),
                    Ok(Value::Poll {
                        value: 5,
                        at: PollStamp::Count {
                            reads: 2,
                            ticks: 40,
                        },
                    }),
                ),
                "0,1,2,poll,,0x5,,,,,,,,,0x2,0x28",
            ),
        ] {
            assert_eq!(csv_result(&run(0, None), 1, &r), want);
        }
        assert_eq!(
            CSV_HEADER.split(',').count(),
            csv_result(&run(0, None), 4, &pat).split(',').count()
        );
    }

    #[test]
    fn masked_writes_say_what_they_kept() {
        let list = msrbatch::allowlist::Allowlist::parse(
            "0x10 0xffffffffffffffff\n0xc0000103 0xff\n0x1a0 0x0\n",
        )
        .unwrap();
        let ops = [
            (
                Op::WrMsr {
                    msr: 0xc0000103,
                    value: 0x1ff,
                },
                true,
            ),
            (
                Op::WrMsr {
                    msr: 0xc0000103,
                    value: 1,
                },
                true,
            ),
            (
                Op::WrMsr {
                    msr: 0x10,
                    value: 5,
                },
                true,
            ),
            (
                Op::RmwMsr {
                    msr: 0xc0000103,
                    clear: 0xf,
                    set: 1,
                },
                true,
            ),
        ];
        let notes = masked_write_notes(&list, ops.into_iter());
        assert_eq!(
            notes,
            ["IA32_TSC_AUX: the allowlist's write mask 0xff kept bits 0xffffffffffffff00 at the MSR's value (a masked write changes only the mask's bits, as msr-safe's does)"]
        );
        // An RMW within the mask, a write that did not run: nothing to say.
        let quiet = [
            (
                Op::RmwMsr {
                    msr: 0xc0000103,
                    clear: 0xf,
                    set: 1,
                },
                true,
            ),
            (
                Op::WrMsr {
                    msr: 0xc0000103,
                    value: 0x1ff,
                },
                false,
            ),
            (Op::RdMsr { msr: 0xc0000103 }, true),
        ];
        assert!(masked_write_notes(&list, quiet.into_iter()).is_empty());
        let rmw = [(
            Op::RmwMsr {
                msr: 0xc0000103,
                clear: 0xf00,
                set: 0,
            },
            true,
        )];
        assert!(masked_write_notes(&list, rmw.into_iter())[0].contains("kept bits 0xf00"));
    }

    #[test]
    fn etime_is_explained_once() {
        let mut n = NotRun::default();
        assert_eq!(n.note(), None);
        let late = result(Op::RdTsc, Err(Errno(libc::ETIME)));
        let ok = result(Op::RdTsc, Ok(Value::U64(1)));
        n.count([late, ok, late].into_iter());
        let note = n.note().unwrap();
        assert!(
            note.starts_with("2 ops ETIME, not run: the CPU had used up its busy budget")
                && note.contains("MSRBATCH_MAX_CPU_BUSY_NS"),
            "{note}"
        );
    }

    #[test]
    fn table_values() {
        assert_eq!(
            describe_value(&Ok(Value::Rmw { old: 1, new: 2 })),
            "0x0000000000000001 -> 0x0000000000000002"
        );
        assert_eq!(describe_value(&Ok(Value::None)), "");
        assert_eq!(describe_value(&Err(Errno(libc::EIO))), "");
        assert_eq!(describe_value(&Ok(Value::Ticks(5))), "5 TSC ticks");
        let origin = Origin { line: 3 };
        let stamped = OpResult {
            tsc: Some(99),
            ..result(Op::RdTsc, Ok(Value::U64(1)))
        };
        let rows = table_rows(true, [(stamped, &origin)].into_iter());
        assert_eq!(rows[0][4..], ["ok", "99"]);
        let rows = table_rows(false, [(stamped, &origin)].into_iter());
        assert_eq!(rows[0].len(), 5);
    }
}
