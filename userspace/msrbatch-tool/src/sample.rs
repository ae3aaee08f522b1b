// SPDX-License-Identifier: GPL-2.0
//! `msrbatch sample`: a script that only reads, run by the kernel on each of
//! its CPUs every period (a sampler), printed as turbostat prints: per
//! period a block (header, summary row, a row per CPU in CPU order), with
//! turbostat's derived columns where the script reads their MSRs
//! ([`msrbatch::derived`], on the TSC rate this command measures), `--add`
//! columns, `--show`/`--hide`; a CPU without a sample in a period shows, and
//! so does every CPU going online or offline and every loss.

use crate::exit::{Exit, Failure};
use crate::output::{describe_value, format_row, json_op, values, Format, JsonObject};
use crate::parse_count;
use msrbatch::derived::{derive, Derived, Sources};
use msrbatch::number::{parse_duration, parse_u32};
use msrbatch::sampler::{Record, Sample, Sampler, SamplerConfig, Wait, PERIOD_NS};
use msrbatch::script::{Origin, Script};
use msrbatch::{msr_name, refusal, Device, Errno, Op, OpResult, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `msrbatch sample`'s arguments.
#[derive(clap::Args, Debug)]
pub struct SampleArgs {
    /// The period, e.g. 1ms, 500us, 2s (100us to 60s).
    #[arg(short = 'i', long = "interval", value_parser = parse_period)]
    pub interval: u64,
    /// Print N samples of each CPU, then stop (default: until killed).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub count: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as --format json (one JSON object per record and line; each
    /// op's result is the object run --json prints for it).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Same as --format csv.
    #[arg(long, conflicts_with_all = ["format", "json"])]
    pub csv: bool,
    /// Add a column, as turbostat's --add: msrDDD or msr0xXXX (an MSR every
    /// CPU of the script then reads), and optionally u32 or u64, cpu, raw
    /// (the value in hex), delta (its increase over the interval, the
    /// default) or percent (that in percent of the TSC ticks), and the
    /// column's name (default M0xXXX). May be repeated.
    #[arg(long = "add", value_name = "ATTRIBUTES", value_parser = parse_add)]
    pub add: Vec<Add>,
    /// Show only these columns (comma-separated names, as the header has
    /// them; CPU is always shown), as turbostat's --show.
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',')]
    pub show: Vec<String>,
    /// Hide these columns, as turbostat's --hide.
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',')]
    pub hide: Vec<String>,
    /// Pages of the ring's data area: a power of two, at most 1024
    /// (MSRBATCH_SAMPLE_MAX_RING_PAGES).
    #[arg(long, default_value_t = 16, value_parser = parse_ring_pages)]
    pub ring_pages: u32,
    /// Script file, or - for standard input: ops that only read (rdmsr,
    /// rdpmc, rdtsc, rdtscp, cpuid).
    pub file: String,
}

/// `--ring-pages`: a number the kernel takes as a ring's size.
fn parse_ring_pages(s: &str) -> Result<u32, String> {
    let n = parse_u32(s).map_err(|e| e.to_string())?;
    refusal::check_ring_pages(n).map_err(|r| r.text)?;
    Ok(n)
}

impl SampleArgs {
    /// The sampler's configuration.
    pub fn config(&self) -> SamplerConfig {
        SamplerConfig {
            period_ns: self.interval,
            ring_pages: self.ring_pages,
            watermark: 0,
        }
    }

    /// The format asked for, by --format, --json or --csv.
    pub fn output_format(&self) -> Format {
        Format::chosen(self.format, self.json, self.csv)
    }

    /// The printer of samples of `cpus` (each CPU's ops) for these options.
    fn printer(&self, cpus: BTreeMap<u32, Vec<Op>>) -> Result<Printer, String> {
        Printer::new(
            self.output_format(),
            cpus,
            &self.add,
            &self.show,
            &self.hide,
        )
    }

    /// Checks --show and --hide against the columns `script` gives.
    pub fn check_columns(&self, script: &Script) -> Result<(), String> {
        let mut cpus: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        for (cpu, op) in script.batch.cpu_ops() {
            cpus.entry(cpu).or_default().push(op);
        }
        self.printer(cpus).map(|_| ())
    }
}

/// A period in the number grammar with a unit, within what the kernel
/// accepts.
fn parse_period(s: &str) -> Result<u64, String> {
    let ns = parse_duration(s).map_err(|e| e.to_string())?;
    if PERIOD_NS.contains(&ns) {
        Ok(ns)
    } else {
        Err(format!(
            "{s}: the period must be from {}us to {}s",
            PERIOD_NS.start() / 1_000,
            PERIOD_NS.end() / 1_000_000_000
        ))
    }
}

/// The first op of `script` a sampler cannot run, as an error naming its
/// line.
pub fn check_sampleable(file: &str, script: &Script) -> Result<(), Failure> {
    let bad = (0..script.batch.len())
        .filter_map(|i| Some((script.batch.op(i)?.1, script.origins.get(i)?.line)))
        .find(|(op, _)| !op.is_sampleable());
    match bad {
        Some((op, line)) => Err(Failure::nothing_ran(format!(
            "{file}:{line}: '{op}' cannot be sampled: a sampled script may only read \
             (rdmsr, rdpmc, rdtsc, rdtscp, cpuid)"
        ))),
        None => Ok(()),
    }
}

/// How an `--add` column shows its MSR, as turbostat's `--add` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddFormat {
    /// The MSR's value, in hex.
    Raw,
    /// Its increase over the interval.
    Delta,
    /// Its increase as a percentage of the TSC ticks of the interval.
    Percent,
}

/// A column added with `--add`: an MSR every CPU of the script reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Add {
    pub msr: u32,
    pub name: String,
    /// `u32`: only the low 32 bits count (and wrap).
    pub bits32: bool,
    pub format: AddFormat,
}

/// `--add`: turbostat's attributes, comma-separated in any order: the
/// location `msrDDD` or `msr0xXXX` (required), `u32` or `u64`, the scope
/// `cpu` (sampling is per CPU: `core` and `package` are refused), `raw`,
/// `delta` or `percent`, and any other word names the column.
fn parse_add(s: &str) -> Result<Add, String> {
    let (mut msr, mut name, mut bits32, mut format) = (None, None, false, AddFormat::Delta);
    for item in s.split(',').map(str::trim) {
        match item {
            "u32" => bits32 = true,
            "u64" => bits32 = false,
            "cpu" => {}
            "core" | "package" => {
                return Err(format!(
                    "{item}: a sampler reads each CPU's MSRs on that CPU; only the scope cpu exists here"
                ))
            }
            "raw" => format = AddFormat::Raw,
            "delta" => format = AddFormat::Delta,
            "percent" => format = AddFormat::Percent,
            _ => match item.strip_prefix("msr") {
                Some(n) if n.starts_with(|c: char| c.is_ascii_digit()) => {
                    msr = Some(parse_u32(n).map_err(|e| format!("{item}: {e}"))?);
                }
                _ if item.is_empty() || item.contains(char::is_whitespace) => {
                    return Err(format!("'{item}' is not a column name"))
                }
                _ => name = Some(item.to_string()),
            },
        }
    }
    let msr = msr.ok_or_else(|| format!("{s}: no location (msrDDD or msr0xXXX)"))?;
    Ok(Add {
        msr,
        name: name.unwrap_or_else(|| format!("M{msr:#x}")),
        bits32,
        format,
    })
}

/// Adds to `script` an RDMSR of each `--add` MSR on every CPU of the script
/// that does not read it yet (its origin is line 0: the command line).
pub fn apply_adds(script: &mut Script, adds: &[Add]) {
    let cpus: BTreeSet<u32> = script.batch.cpu_ops().iter().map(|(c, _)| *c).collect();
    for add in adds {
        let op = Op::RdMsr { msr: add.msr };
        for &cpu in &cpus {
            if !script.batch.cpu_ops().contains(&(cpu, op)) {
                script.batch.push(cpu, op);
                script.origins.push(Origin { line: 0 });
            }
        }
    }
}

/// The derived columns, in turbostat's order: name, value, decimals, and
/// whether a CPU's sources give it.
type DerivedColumn = (
    &'static str,
    fn(&Derived) -> Option<f64>,
    usize,
    fn(&Sources) -> bool,
);

const DERIVED: &[DerivedColumn] = &[
    ("Avg_MHz", |d| d.avg_mhz, 0, Sources::has_frequency),
    ("Busy%", |d| d.busy_pct, 2, Sources::has_frequency),
    ("Bzy_MHz", |d| d.bzy_mhz, 0, Sources::has_frequency),
    ("TSC_MHz", |d| Some(d.tsc_mhz), 0, |_| true),
    ("Pkg_J", |d| d.pkg_joules, 6, Sources::has_package_energy),
    ("PkgWatt", |d| d.pkg_watts, 2, Sources::has_package_energy),
    ("Cor_J", |d| d.core_joules, 6, Sources::has_core_energy),
    ("CorWatt", |d| d.core_watts, 2, Sources::has_core_energy),
];

/// Where a column's cells come from.
#[derive(Clone, Debug)]
enum Source {
    /// A derived column (an index into [`DERIVED`]).
    Derived(usize),
    /// An `--add` column (an index into the adds).
    Added(usize),
    /// The `nth` (from 0) of a CPU's ops equal to `op`: its value.
    Value(Op, usize),
}

/// A column of the table.
#[derive(Clone, Debug)]
struct Column {
    name: String,
    source: Source,
}

impl Column {
    /// The values besides the main one its op returns, which CSV gives
    /// columns of their own (`NAME_aux`, `NAME_ebx`..): RDTSCP's TSC_AUX,
    /// CPUID's EBX, ECX and EDX.
    fn csv_extras(&self) -> &'static [&'static str] {
        match self.source {
            Source::Value(Op::RdTscp, _) => &["aux"],
            Source::Value(Op::Cpuid { .. }, _) => &["ebx", "ecx", "edx"],
            _ => &[],
        }
    }
}

/// A column's name for an op's value: the MSR's name (`MSR_0x..` when it
/// has none), `TSC`, `TSCP`, `PMCn` (`FIXED_CTRn`), `CPUID_leaf.sub`.
fn value_name(op: &Op) -> String {
    match *op {
        Op::RdMsr { msr } => msr_name(msr).unwrap_or_else(|| format!("MSR_{msr:#x}")),
        Op::RdTsc => "TSC".into(),
        Op::RdTscp => "TSCP".into(),
        Op::RdPmc { ecx } if ecx & (1 << 30) != 0 => format!("FIXED_CTR{}", ecx & !(1 << 30)),
        Op::RdPmc { ecx } => format!("PMC{ecx}"),
        Op::Cpuid { leaf, subleaf } => format!("CPUID_{leaf:#x}.{subleaf}"),
        _ => op.mnemonic().to_string(),
    }
}

/// One CPU's row: its cells, one per column.
#[derive(Clone, Debug)]
struct Row {
    seq: u64,
    tsc: u64,
    cells: Vec<Cell>,
    /// The JSON objects of its ops' results.
    values: Vec<JsonObject>,
}

/// A cell: a number (derived, delta, percent), a raw MSR value, an op's
/// result, or nothing (the CPU does not read it, or not yet).
#[derive(Clone, Debug, PartialEq)]
enum Cell {
    Num(f64, usize),
    Hex(u64, bool),
    Result(Result<Value, Errno>),
    Empty,
}

impl Cell {
    fn table(&self) -> String {
        match self {
            Cell::Num(v, d) => format!("{v:.*}", d),
            Cell::Hex(v, true) => format!("{v:#010x}"),
            Cell::Hex(v, false) => format!("{v:#018x}"),
            Cell::Result(Ok(v)) => describe_value(&Ok(*v)),
            Cell::Result(Err(e)) => e.name(),
            Cell::Empty => String::new(),
        }
    }

    fn csv(&self) -> String {
        match self {
            Cell::Hex(v, _) => format!("{v:#x}"),
            Cell::Result(Ok(v)) => v.as_u64().map(|v| format!("{v:#x}")).unwrap_or_default(),
            other => other.table(),
        }
    }

    /// Adds the cell to `o` as member `key`: a number (as the table prints
    /// it, its decimals), a raw value, or null.
    fn push_json(&self, o: &mut JsonObject, key: &str) {
        match self {
            Cell::Num(..) => o.push_number(key, &self.table()),
            Cell::Hex(v, _) => o.push(key, v),
            _ => o.push(key, ()),
        }
    }

    fn num(&self) -> Option<f64> {
        match self {
            Cell::Num(v, _) => Some(*v),
            _ => None,
        }
    }
}

/// When a CPU is expected to have a sample in a period.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    /// From this period (its ONLINE record's, or its first sample's).
    since: u64,
    /// Until before this one (its OFFLINE record's).
    until: Option<u64>,
    /// Through this one (its last sample printed, with --count).
    through: Option<u64>,
    /// Its latest sample's period.
    last: Option<u64>,
}

impl Span {
    fn expects(&self, seq: u64) -> bool {
        self.since <= seq
            && self.until.is_none_or(|u| seq < u)
            && self.through.is_none_or(|t| seq <= t)
    }
}

/// How samples are printed: turbostat's table (a block per period: the
/// header, a summary row `-`, a row per CPU in CPU order), or CSV and JSON
/// records in the same order.
struct Printer {
    format: Format,
    /// Each CPU's ops and their sources of derived columns.
    cpus: BTreeMap<u32, (Vec<Op>, Sources)>,
    adds: Vec<Add>,
    /// The columns shown.
    columns: Vec<Column>,
    /// Each CPU's previous sample.
    prev: BTreeMap<u32, Sample>,
    spans: BTreeMap<u32, Span>,
    /// Rows not printed yet, per period and CPU.
    blocks: BTreeMap<u64, BTreeMap<u32, Row>>,
    /// The last period printed.
    printed: Option<u64>,
    /// Table: each column's width (CPU first).
    width: Vec<usize>,
}

/// The width of a table's value cell (`0x` and 16 hex digits).
const VALUE_WIDTH: usize = 18;

impl Printer {
    /// A printer of samples of `cpus` (each CPU's ops); `--add` columns
    /// `adds`; `show`/`hide`: the columns to show (empty: all) and to hide.
    fn new(
        format: Format,
        cpus: BTreeMap<u32, Vec<Op>>,
        adds: &[Add],
        show: &[String],
        hide: &[String],
    ) -> Result<Self, String> {
        let cpus: BTreeMap<u32, (Vec<Op>, Sources)> = cpus
            .into_iter()
            .map(|(c, ops)| {
                let src = Sources::of(&ops);
                (c, (ops, src))
            })
            .collect();
        let mut columns: Vec<Column> = DERIVED
            .iter()
            .enumerate()
            .filter(|(_, d)| cpus.values().any(|(_, s)| (d.3)(s)))
            .map(|(i, d)| Column {
                name: d.0.to_string(),
                source: Source::Derived(i),
            })
            .collect();
        columns.extend(adds.iter().enumerate().map(|(i, a)| Column {
            name: a.name.clone(),
            source: Source::Added(i),
        }));
        let added = |op: &Op| adds.iter().any(|a| *op == Op::RdMsr { msr: a.msr });
        let mut keys: Vec<(Op, usize)> = Vec::new();
        for (ops, _) in cpus.values() {
            for (i, op) in ops.iter().enumerate() {
                let nth = ops[..i].iter().filter(|o| *o == op).count();
                let skip = keys.contains(&(*op, nth)) || (nth == 0 && added(op));
                if !skip {
                    keys.push((*op, nth));
                }
            }
        }
        columns.extend(keys.into_iter().map(|(op, nth)| {
            let name = value_name(&op);
            Column {
                name: if nth == 0 {
                    name
                } else {
                    format!("{name}#{}", nth + 1)
                },
                source: Source::Value(op, nth),
            }
        }));
        for (opt, names) in [("--show", show), ("--hide", hide)] {
            let known = |n: &String| n == "CPU" || columns.iter().any(|c| &c.name == n);
            if let Some(bad) = names.iter().find(|n| !known(n)) {
                let all: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
                return Err(format!(
                    "{opt} {bad}: no such column (the columns: {})",
                    all.join(",")
                ));
            }
        }
        columns.retain(|c| (show.is_empty() || show.contains(&c.name)) && !hide.contains(&c.name));
        let width = std::iter::once(3)
            .chain(columns.iter().map(|c| {
                let min = match c.source {
                    Source::Value(..) => VALUE_WIDTH,
                    Source::Added(i) if adds[i].format == AddFormat::Raw => VALUE_WIDTH,
                    _ => 7,
                };
                c.name.len().max(min)
            }))
            .collect();
        Ok(Printer {
            format,
            cpus,
            adds: adds.to_vec(),
            columns,
            prev: BTreeMap::new(),
            spans: BTreeMap::new(),
            blocks: BTreeMap::new(),
            printed: None,
            width,
        })
    }

    fn header(&self) -> Vec<String> {
        std::iter::once("CPU".to_string())
            .chain(self.columns.iter().map(|c| c.name.clone()))
            .collect()
    }

    /// What comes before the first record: CSV's header.
    fn start(&self) -> Option<String> {
        (self.format == Format::Csv).then(|| {
            let mut h: Vec<String> = ["type", "CPU", "seq", "tsc", "lost"]
                .map(String::from)
                .to_vec();
            for c in &self.columns {
                h.push(c.name.clone());
                h.extend(c.csv_extras().iter().map(|x| format!("{}_{x}", c.name)));
            }
            h.join(",")
        })
    }

    /// The lines a record makes printable now, on a TSC measured at
    /// `tsc_hz` (None: not measured yet). A sample waits in its period's
    /// block until every CPU expected in that period has reached it.
    fn record(&mut self, r: &Record, tsc_hz: Option<f64>) -> Vec<String> {
        match r {
            Record::Sample(s) => {
                let row = self.row(s, tsc_hz);
                let span = self.spans.entry(s.cpu).or_insert(Span {
                    since: s.seq,
                    ..Span::default()
                });
                span.last = Some(s.seq);
                self.blocks.entry(s.seq).or_default().insert(s.cpu, row);
                self.flush(false)
            }
            Record::Online { cpu, seq, tsc } | Record::Offline { cpu, seq, tsc } => {
                let online = matches!(r, Record::Online { .. });
                let span = self.spans.entry(*cpu).or_default();
                if online {
                    *span = Span {
                        since: *seq,
                        ..Span::default()
                    };
                } else {
                    span.until = Some(*seq);
                    // Its counters' deltas across the gap mean nothing.
                    self.prev.remove(cpu);
                }
                let mut lines = self.flush(false);
                let what = if online { "online" } else { "offline" };
                lines.push(match self.format {
                    Format::Table => format!("# cpu {cpu} {what} at seq {seq} (tsc {tsc})"),
                    Format::Json => JsonObject::default()
                        .with("type", what)
                        .with("cpu", cpu)
                        .with("seq", seq)
                        .with("tsc", tsc)
                        .to_string(),
                    Format::Csv => self.csv_event(
                        what,
                        &cpu.to_string(),
                        &seq.to_string(),
                        &tsc.to_string(),
                        "",
                    ),
                });
                lines
            }
            Record::Lost { cpu, lost } => vec![match self.format {
                Format::Table => format!("# cpu {cpu} lost {lost} samples (ring full)"),
                Format::Json => JsonObject::default()
                    .with("type", "lost")
                    .with("cpu", cpu)
                    .with("lost", lost)
                    .to_string(),
                Format::Csv => self.csv_event("lost", &cpu.to_string(), "", "", &lost.to_string()),
            }],
        }
    }

    /// `cpu` prints no sample after period `seq` (--count).
    fn finished(&mut self, cpu: u32, seq: u64) {
        self.spans.entry(cpu).or_default().through = Some(seq);
    }

    /// Every block still waiting (at the end).
    fn finish(&mut self) -> Vec<String> {
        self.flush(true)
    }

    fn csv_event(&self, what: &str, cpu: &str, seq: &str, tsc: &str, lost: &str) -> String {
        format!(
            "{what},{cpu},{seq},{tsc},{lost}{}",
            ",".repeat(self.csv_cells(&[]).len())
        )
    }

    /// A sample's row (the derived and delta cells from the CPU's
    /// previous sample).
    fn row(&mut self, s: &Sample, tsc_hz: Option<f64>) -> Row {
        let (ops, src) = self
            .cpus
            .get(&s.cpu)
            .map(|(o, s)| (o.clone(), *s))
            .unwrap_or_default();
        let prev = self.prev.get(&s.cpu);
        let d = prev.zip(tsc_hz).and_then(|(p, hz)| derive(&src, hz, p, s));
        let results: Vec<OpResult> = s.results(&ops).collect();
        let value = |smp: &Sample, i: usize| {
            let failed = i < 64 && smp.failed & (1 << i) != 0;
            (!failed).then(|| smp.values.get(i).map(|v| v[0])).flatten()
        };
        let cells = self
            .columns
            .iter()
            .map(|c| match c.source {
                Source::Derived(i) => {
                    let (_, get, dec, has) = DERIVED[i];
                    d.as_ref()
                        .filter(|_| has(&src))
                        .and_then(get)
                        .map_or(Cell::Empty, |v| Cell::Num(v, dec))
                }
                Source::Added(i) => {
                    let a = &self.adds[i];
                    let mask = if a.bits32 {
                        u64::from(u32::MAX)
                    } else {
                        u64::MAX
                    };
                    let Some(k) = ops.iter().position(|o| *o == Op::RdMsr { msr: a.msr }) else {
                        return Cell::Empty;
                    };
                    let delta = prev
                        .filter(|p| s.seq > p.seq)
                        .and_then(|p| Some(value(s, k)?.wrapping_sub(value(p, k)?) & mask));
                    match a.format {
                        AddFormat::Raw => {
                            value(s, k).map_or(Cell::Empty, |v| Cell::Hex(v & mask, a.bits32))
                        }
                        AddFormat::Delta => delta.map_or(Cell::Empty, |v| Cell::Num(v as f64, 0)),
                        AddFormat::Percent => delta
                            .zip(prev.map(|p| s.tsc.wrapping_sub(p.tsc)).filter(|&t| t > 0))
                            .map_or(Cell::Empty, |(v, t)| {
                                Cell::Num(100.0 * v as f64 / t as f64, 2)
                            }),
                    }
                }
                Source::Value(op, nth) => ops
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| **o == op)
                    .nth(nth)
                    .and_then(|(i, _)| results.get(i))
                    .map_or(Cell::Empty, |r| Cell::Result(r.value)),
            })
            .collect();
        self.prev.insert(s.cpu, s.clone());
        Row {
            seq: s.seq,
            tsc: s.tsc,
            cells,
            values: results.iter().map(|r| json_op(r, &[])).collect(),
        }
    }

    /// A row's CSV fields: per column its cell, and for RDTSCP and CPUID
    /// the values besides the main one (missing cells: empty fields).
    fn csv_cells(&self, cells: &[Cell]) -> Vec<String> {
        let mut f = Vec::new();
        for (k, c) in self.columns.iter().enumerate() {
            let cell = cells.get(k).unwrap_or(&Cell::Empty);
            f.push(cell.csv());
            let all = match (cell, &c.source) {
                (Cell::Result(Ok(v)), Source::Value(op, _)) => values(op, v),
                _ => Vec::new(),
            };
            f.extend(c.csv_extras().iter().map(|x| {
                all.iter()
                    .find(|(k, _)| k == x)
                    .map(|(_, v)| format!("{v:#x}"))
                    .unwrap_or_default()
            }));
        }
        f
    }

    /// Whether every CPU expected in period `seq` has reached it.
    fn complete(&self, seq: u64) -> bool {
        self.spans
            .values()
            .all(|s| !s.expects(seq) || s.last.is_some_and(|l| l >= seq))
    }

    /// Prints the blocks that are complete (`all`: every block).
    fn flush(&mut self, all: bool) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(&seq) = self.blocks.keys().next() {
            if !all && !self.complete(seq) {
                break;
            }
            let rows = self.blocks.remove(&seq).unwrap_or_default();
            if let Some(p) = self.printed.filter(|&p| seq > p + 1) {
                if self.spans.values().any(|s| s.expects(p + 1)) {
                    lines.push(self.gap(p + 1, seq - p - 1));
                }
            }
            self.printed = Some(seq);
            lines.extend(self.block(seq, &rows));
        }
        lines
    }

    /// Periods `first`.. (`n` of them) without a sample from any CPU.
    fn gap(&self, first: u64, n: u64) -> String {
        match self.format {
            Format::Table => format!(
                "# periods {first}-{}: no sample from any CPU",
                first + n - 1
            ),
            Format::Csv => self.csv_event("missed", "-", &first.to_string(), "", &n.to_string()),
            Format::Json => JsonObject::default()
                .with("type", "missed")
                .with("cpu", ())
                .with("seq", first)
                .with("periods", n)
                .to_string(),
        }
    }

    /// The summary of a block's rows: each derived and percent column's
    /// mean over the CPUs that have it, each delta column's sum.
    fn summary(&self, rows: &BTreeMap<u32, Row>) -> Vec<Cell> {
        self.columns
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let nums: Vec<f64> = rows.values().filter_map(|r| r.cells[k].num()).collect();
                let dec = match c.source {
                    Source::Derived(i) => DERIVED[i].2,
                    Source::Added(i) if self.adds[i].format == AddFormat::Percent => 2,
                    Source::Added(i) if self.adds[i].format == AddFormat::Delta => {
                        return if nums.is_empty() {
                            Cell::Empty
                        } else {
                            Cell::Num(nums.iter().sum(), 0)
                        };
                    }
                    _ => return Cell::Empty,
                };
                if nums.is_empty() {
                    Cell::Empty
                } else {
                    Cell::Num(nums.iter().sum::<f64>() / nums.len() as f64, dec)
                }
            })
            .collect()
    }

    /// The lines of period `seq`: the summary, then each CPU expected in it
    /// by CPU number, its row or, without a sample, a row of `-`.
    fn block(&self, seq: u64, rows: &BTreeMap<u32, Row>) -> Vec<String> {
        let summary = self.summary(rows);
        let missed: Vec<u32> = self
            .spans
            .iter()
            .filter(|(cpu, s)| s.expects(seq) && !rows.contains_key(cpu))
            .map(|(&cpu, _)| cpu)
            .collect();
        let mut cpus: Vec<u32> = rows.keys().copied().chain(missed.iter().copied()).collect();
        cpus.sort_unstable();
        let mut lines = Vec::new();
        match self.format {
            Format::Table => {
                lines.push(format_row(&self.header(), &self.width));
                let mut cells = vec!["-".to_string()];
                cells.extend(summary.iter().map(Cell::table));
                lines.push(format_row(&cells, &self.width));
                for cpu in cpus {
                    let mut cells = vec![cpu.to_string()];
                    match rows.get(&cpu) {
                        Some(r) => cells.extend(r.cells.iter().map(Cell::table)),
                        None => cells.extend(self.columns.iter().map(|_| "-".to_string())),
                    }
                    lines.push(format_row(&cells, &self.width));
                }
            }
            Format::Csv => {
                let mut cells = vec![
                    "summary".to_string(),
                    "-".into(),
                    seq.to_string(),
                    String::new(),
                    String::new(),
                ];
                cells.extend(self.csv_cells(&summary));
                lines.push(cells.join(","));
                for cpu in cpus {
                    lines.push(match rows.get(&cpu) {
                        Some(r) => {
                            let mut cells = vec![
                                "sample".to_string(),
                                cpu.to_string(),
                                r.seq.to_string(),
                                r.tsc.to_string(),
                                String::new(),
                            ];
                            cells.extend(self.csv_cells(&r.cells));
                            cells.join(",")
                        }
                        None => {
                            self.csv_event("missed", &cpu.to_string(), &seq.to_string(), "", "")
                        }
                    });
                }
            }
            Format::Json => {
                let named = |o: &mut JsonObject, cells: &[Cell]| {
                    for (c, v) in self.columns.iter().zip(cells) {
                        if !matches!(c.source, Source::Value(..)) {
                            v.push_json(o, &c.name);
                        }
                    }
                };
                let mut o = JsonObject::default()
                    .with("type", "summary")
                    .with("seq", seq);
                named(&mut o, &summary);
                lines.push(o.to_string());
                for cpu in cpus {
                    lines.push(match rows.get(&cpu) {
                        Some(r) => {
                            let mut o = JsonObject::default()
                                .with("type", "sample")
                                .with("cpu", cpu)
                                .with("seq", r.seq)
                                .with("tsc", r.tsc);
                            named(&mut o, &r.cells);
                            o.with("values", &r.values).to_string()
                        }
                        None => JsonObject::default()
                            .with("type", "missed")
                            .with("cpu", cpu)
                            .with("seq", seq)
                            .to_string(),
                    });
                }
            }
        }
        lines
    }
}

/// The sampler went wrong after it started (exit status 3).
fn broken(e: impl std::fmt::Display) -> Failure {
    Failure::new(Exit::SamplerFailed, format!("sample: {e}"))
}

/// The TSC, read in user mode.
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86")]
    use core::arch::x86::_rdtsc;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64::_rdtsc;
    // SAFETY: RDTSC reads a register and touches no memory; Linux lets user
    // mode run it (CR4.TSD clear) unless the process asked otherwise.
    unsafe { _rdtsc() }
}

/// The TSC's rate measured against `CLOCK_MONOTONIC` (`Instant`) from a
/// start: what `TSC_MHz` is, and what turns the TSC ticks between two
/// samples into time.
pub(crate) struct TscClock {
    at: Instant,
    tsc: u64,
}

impl TscClock {
    /// A TSC reading and the clock's, taken together: of 5 tries, the one
    /// whose two TSC reads around the clock's are closest (a vCPU or a
    /// thread preempted in between would skew the pair), the TSC halfway.
    fn now() -> (Instant, u64) {
        (0..5)
            .map(|_| {
                let a = rdtsc();
                let t = Instant::now();
                let b = rdtsc();
                (b.wrapping_sub(a), t, a.wrapping_add(b.wrapping_sub(a) / 2))
            })
            .min_by_key(|p| p.0)
            .map(|(_, t, tsc)| (t, tsc))
            .unwrap_or_else(|| (Instant::now(), rdtsc()))
    }

    pub(crate) fn start() -> Self {
        let (at, tsc) = Self::now();
        TscClock { at, tsc }
    }

    /// Ticks per second since the start (None before 100 us).
    pub(crate) fn hz(&self) -> Option<f64> {
        let (t, tsc) = Self::now();
        let secs = t.duration_since(self.at).as_secs_f64();
        (secs >= 1e-4).then(|| tsc.wrapping_sub(self.tsc) as f64 / secs)
    }
}

/// Set by SIGINT while sampling: stop, print the last period, end.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Has SIGINT set [`INTERRUPTED`] (without SA_RESTART, so that a wait for
/// the ring returns).
fn catch_interrupt() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
    // the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// Runs `script` (already checked) as a sampler on `dev` and prints its
/// records until `a.count` samples of each CPU, or until SIGINT (then the
/// last period too).
pub fn sample(
    dev: &Device,
    script: &Script,
    a: &SampleArgs,
    refused: impl Fn(msrbatch::Error) -> Failure,
) -> Result<Exit, Failure> {
    let cfg = a.config();
    let clock = TscClock::start();
    let mut sampler = dev
        .prepare(&script.batch)
        .and_then(|p| p.sample(&cfg))
        .map_err(refused)?;
    let cpus = sampler
        .cpus()
        .map(|c| (c, sampler.cpu_ops(c).to_vec()))
        .collect();
    let mut p = a.printer(cpus).map_err(Failure::nothing_ran)?;
    catch_interrupt();
    let mut out = std::io::stdout().lock();
    let mut put = |lines: &[String]| {
        lines
            .iter()
            .try_for_each(|l| writeln!(out, "{l}"))
            .and_then(|()| out.flush())
            .map_err(|e| broken(format!("stdout: {e}")))
    };
    if let Some(h) = p.start() {
        put(&[h])?;
    }
    // The CPUs whose samples are awaited: those of the script that are
    // online now, and any that comes online.
    let online = msrbatch::online_cpus().unwrap_or_default();
    let mut pending: BTreeSet<u32> = sampler.cpus().filter(|c| online.contains(c)).collect();
    let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
    let (mut all_ok, mut stopping, mut last, mut waits) = (true, false, false, 0);
    loop {
        let hz = clock.hz();
        while let Some(r) = sampler.read().map_err(broken)? {
            match &r {
                Record::Sample(s) => {
                    let n = counts.entry(s.cpu).or_default();
                    if a.count.is_some_and(|c| *n >= c) {
                        continue;
                    }
                    *n += 1;
                    all_ok &= s.failed == 0;
                    if a.count == Some(*n) {
                        p.finished(s.cpu, s.seq);
                    }
                }
                Record::Online { cpu, .. } => {
                    pending.insert(*cpu);
                }
                Record::Offline { cpu, .. } => {
                    pending.remove(cpu);
                }
                Record::Lost { .. } => {}
            }
            put(&p.record(&r, hz))?;
        }
        if last {
            break;
        }
        let done = |c: u64| {
            pending
                .iter()
                .all(|cpu| counts.get(cpu).is_some_and(|&n| n >= c))
        };
        if !stopping && (a.count.is_some_and(done) || INTERRUPTED.load(Ordering::Relaxed)) {
            sampler.stop().map_err(broken)?;
            stopping = true;
        }
        match sampler.wait(Some(Duration::from_secs(1))) {
            Ok(Wait::Ready) => {}
            // Once more for what the CPUs appended while stopping.
            Ok(Wait::Stopped) => last = true,
            Ok(Wait::TimedOut) if stopping => {
                waits += 1;
                if waits > 5 {
                    return Err(broken("the sampler did not stop within 5 s"));
                }
            }
            Ok(Wait::TimedOut) => {}
            // SIGINT: stopped above, on the next turn.
            Err(e) if e.errno().0 == libc::EINTR => {}
            Err(e) => return Err(broken(e)),
        }
    }
    put(&p.finish())?;
    report_lost(&sampler);
    Ok(if all_ok {
        Exit::Success
    } else {
        Exit::OpsFailed
    })
}

/// Says on stderr how many records the ring lost, if any.
fn report_lost(s: &Sampler) {
    let lost = s.lost();
    if lost > 0 {
        eprintln!("msrbatch: sample: {lost} records lost (ring full; try --ring-pages)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use msrbatch::msr::{IA32_APERF, IA32_MPERF};

    fn printer(format: Format, cpus: &[(u32, Vec<Op>)]) -> Printer {
        Printer::new(format, cpus.iter().cloned().collect(), &[], &[], &[]).unwrap()
    }

    fn smp(cpu: u32, seq: u64, tsc: u64, failed: u64, v: &[u64]) -> Record {
        Record::Sample(Sample {
            cpu,
            seq,
            tsc,
            failed,
            values: v.iter().map(|&x| [x, 0]).collect(),
        })
    }

    fn online(cpu: u32, seq: u64) -> Record {
        Record::Online { cpu, seq, tsc: 0 }
    }

    fn words(l: &str) -> Vec<&str> {
        l.split_whitespace().collect()
    }

    /// A 2.4 GHz TSC.
    const HZ: Option<f64> = Some(2.4e9);

    #[test]
    fn periods_and_counts() {
        assert_eq!(parse_period("1ms"), Ok(1_000_000));
        assert_eq!(parse_period("100us"), Ok(100_000));
        assert_eq!(parse_period("60s"), Ok(60_000_000_000));
        for bad in ["50us", "61s", "0", "1xs", "ms", "-1ms"] {
            assert!(parse_period(bad).is_err(), "{bad}");
        }
        assert!(parse_period("99999ns")
            .unwrap_err()
            .contains("from 100us to 60s"));
        assert!(parse_period("99999").unwrap_err().contains("has no unit"));
        assert_eq!(parse_count("20"), Ok(20));
        assert!(parse_count("0").is_err());
    }

    /// turbostat's table: per period a header, the summary row, a row per
    /// CPU in CPU order (whatever order the samples came in); the columns
    /// in turbostat's order, then the ops' values named after them; the
    /// frequencies from the measured TSC rate, not the periods.
    #[test]
    fn blocks_as_turbostat_prints_them() {
        let ops = vec![
            Op::RdMsr { msr: IA32_APERF },
            Op::RdMsr { msr: IA32_MPERF },
            Op::RdTsc,
            Op::RdMsr { msr: 0x10 },
        ];
        let mut p = printer(Format::Table, &[(0, ops.clone()), (1, ops)]);
        assert_eq!(
            p.header(),
            [
                "CPU",
                "Avg_MHz",
                "Busy%",
                "Bzy_MHz",
                "TSC_MHz",
                "IA32_APERF",
                "IA32_MPERF",
                "TSC",
                "IA32_TSC"
            ]
        );
        let mut out = Vec::new();
        for r in [online(0, 0), online(1, 0)] {
            out.extend(p.record(&r, HZ));
        }
        // CPU 1's sample first: period 0 waits for CPU 0.
        assert!(p.record(&smp(1, 0, 1000, 0, &[0, 0, 1, 2]), HZ).is_empty());
        let first = p.record(&smp(0, 0, 1000, 0, &[0, 0, 3, 4]), HZ);
        assert_eq!(words(&first[0]), words(&p.header().join(" ")));
        assert_eq!(words(&first[1])[0], "-");
        assert_eq!(words(&first[2])[0], "0");
        assert_eq!(words(&first[3])[0], "1");
        // Period 1, 1 ms of TSC ticks later (the timer ran 5 periods late
        // for CPU 0: its period 6 is 2 ms of ticks after its period 0).
        assert!(p
            .record(&smp(0, 6, 4_801_000, 0, &[6_000_000, 4_000_000, 0, 0]), HZ)
            .is_empty());
        let two = p.record(&smp(1, 1, 2_401_000, 0, &[1_200_000, 2_400_000, 0, 0]), HZ);
        // Period 1: CPU 0 had no sample in it.
        assert_eq!(words(&two[1])[..5], ["-", "1200", "100.00", "1200", "2400"]);
        assert_eq!(words(&two[2])[..5], ["0", "-", "-", "-", "-"]);
        assert_eq!(words(&two[3])[..5], ["1", "1200", "100.00", "1200", "2400"]);
        assert_eq!(two.len(), 4);
        // Period 6: CPU 1 has not reached it; at the end it is printed,
        // after a line for the periods between.
        let end = p.finish();
        assert_eq!(end[0], "# periods 2-5: no sample from any CPU");
        assert_eq!(words(&end[2])[..5], ["-", "3000", "83.33", "3600", "2400"]);
        assert_eq!(words(&end[3])[..5], ["0", "3000", "83.33", "3600", "2400"]);
        assert_eq!(words(&end[4])[..5], ["1", "-", "-", "-", "-"]);
        // A faulted op shows its errno; an offline CPU is no longer awaited.
        out = p.record(
            &Record::Offline {
                cpu: 0,
                seq: 7,
                tsc: 9,
            },
            HZ,
        );
        assert_eq!(out, ["# cpu 0 offline at seq 7 (tsc 9)"]);
        let faulted = p.record(&smp(1, 7, 5_000_000, 0b1000, &[1, 0, 0, 0]), HZ);
        assert!(
            faulted[2].starts_with("1 ") && faulted[2].ends_with("  EIO"),
            "{faulted:?}"
        );
        assert_eq!(faulted.len(), 3, "{faulted:?}");
    }

    /// CSV: one header; a summary record and one per CPU per period, every
    /// one with the header's fields. JSON: the same records as objects.
    #[test]
    fn csv_and_json_records() {
        let ops = vec![Op::RdTsc, Op::RdMsr { msr: 0x10 }];
        let cpus = [(0, ops.clone()), (1, vec![Op::RdTscp])];
        let mut p = printer(Format::Csv, &cpus);
        let header = p.start().unwrap();
        assert_eq!(
            header,
            "type,CPU,seq,tsc,lost,TSC_MHz,TSC,IA32_TSC,TSCP,TSCP_aux"
        );
        let n = header.split(',').count();
        let mut rows = Vec::new();
        for r in [
            online(0, 0),
            online(1, 0),
            smp(0, 0, 10, 0, &[7, 8]),
            smp(1, 0, 10, 0, &[7]),
            smp(0, 1, 2_400_010, 0, &[9, 10]),
            Record::Lost { cpu: 1, lost: 4 },
        ] {
            rows.extend(p.record(&r, HZ));
        }
        rows.extend(p.finish());
        for r in &rows {
            assert_eq!(r.split(',').count(), n, "{r}");
        }
        assert_eq!(
            rows[2..],
            [
                "summary,-,0,,,,,,,",
                "sample,0,0,10,,,0x7,0x8,,",
                "sample,1,0,10,,,,,0x7,0x0",
                "lost,1,,,4,,,,,",
                "summary,-,1,,,2400,,,,",
                "sample,0,1,2400010,,2400,0x9,0xa,,",
                "missed,1,1,,,,,,,",
            ]
        );
        // CPUID's EBX..EDX and RDTSCP's TSC_AUX have columns of their own.
        let cpuid = Op::Cpuid {
            leaf: 0xa,
            subleaf: 0,
        };
        let mut p = printer(Format::Csv, &[(2, vec![Op::RdTscp, cpuid])]);
        assert_eq!(
            p.start().unwrap(),
            "type,CPU,seq,tsc,lost,TSC_MHz,TSCP,TSCP_aux,CPUID_0xa.0,CPUID_0xa.0_ebx,CPUID_0xa.0_ecx,CPUID_0xa.0_edx"
        );
        p.record(&online(2, 0), HZ);
        let r = Record::Sample(Sample {
            cpu: 2,
            seq: 0,
            tsc: 1,
            failed: 0,
            values: vec![[9, 0x102], [0x1 | 0x2 << 32, 0x3 | 0x4 << 32]],
        });
        let lines = p.record(&r, HZ);
        assert_eq!(
            lines[1], "sample,2,0,1,,,0x9,0x102,0x1,0x2,0x3,0x4",
            "{lines:?}"
        );
        let mut p = printer(Format::Json, &cpus);
        assert_eq!(p.start(), None);
        let mut lines = Vec::new();
        for r in [
            online(0, 0),
            smp(0, 0, 100, 0b10, &[5, 0]),
            smp(0, 1, 2_400_100, 0, &[6, 7]),
        ] {
            lines.extend(p.record(&r, HZ));
        }
        lines.extend(p.finish());
        let v: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert_eq!(v[0]["type"], "online");
        assert_eq!(
            (&v[1]["type"], &v[1]["seq"]),
            (&"summary".into(), &0.into())
        );
        assert_eq!(v[2]["TSC_MHz"], serde_json::Value::Null);
        assert_eq!(v[2]["values"][1]["error"], "EIO");
        assert_eq!(v[2]["values"][0]["value"], 5);
        assert_eq!(v[4]["TSC_MHz"], 2400);
        assert_eq!(v[4]["values"][1]["name"], "IA32_TSC");
        assert_eq!(v[4]["values"][1]["value_hex"], "0x7");
        assert_eq!(v[4]["values"][1]["register"], "0x10");
        // The bytes: members in this order, no spaces.
        assert_eq!(
            lines[..2],
            [
                "{\"type\":\"online\",\"cpu\":0,\"seq\":0,\"tsc\":0}",
                "{\"type\":\"summary\",\"seq\":0,\"TSC_MHz\":null}"
            ]
        );
        assert_eq!(
            lines[3],
            "{\"type\":\"summary\",\"seq\":1,\"TSC_MHz\":2400}"
        );
        assert_eq!(lines[4], "{\"type\":\"sample\",\"cpu\":0,\"seq\":1,\"tsc\":2400100,\"TSC_MHz\":2400,\"values\":[{\"op\":\"rdtsc\",\"register\":\"\",\"value\":6,\"value_hex\":\"0x6\",\"error\":null},{\"op\":\"rdmsr\",\"register\":\"0x10\",\"name\":\"IA32_TSC\",\"value\":7,\"value_hex\":\"0x7\",\"error\":null}]}");
        assert_eq!(
            p.record(&Record::Lost { cpu: 0, lost: 3 }, HZ),
            ["{\"type\":\"lost\",\"cpu\":0,\"lost\":3}"]
        );
    }

    /// --add: turbostat's attributes; the MSR added to every CPU that does
    /// not read it; delta, percent (of the TSC ticks) and raw columns, the
    /// summary's sum of deltas; --show and --hide.
    #[test]
    fn added_and_chosen_columns() {
        assert_eq!(
            parse_add("msr0x10,u32,cpu,percent,MY_TSC"),
            Ok(Add {
                msr: 0x10,
                name: "MY_TSC".into(),
                bits32: true,
                format: AddFormat::Percent,
            })
        );
        assert_eq!(
            parse_add("msr16"),
            Ok(Add {
                msr: 16,
                name: "M0x10".into(),
                bits32: false,
                format: AddFormat::Delta,
            })
        );
        for bad in ["u64,delta", "msr0x10,package", "msrx,X", "msr0x10,a b"] {
            assert!(parse_add(bad).is_err(), "{bad}");
        }
        let mut script =
            msrbatch::script::parse("cpu 0\nrdtsc\ncpu 1\nrdmsr 0xe7\n", &[0, 1]).unwrap();
        let adds = [
            parse_add("msr0xe7,MPERF_D").unwrap(),
            parse_add("msr0xe7,percent,C0%").unwrap(),
            parse_add("msr0x10,raw,u32,TSC_LO").unwrap(),
        ];
        apply_adds(&mut script, &adds);
        let mut cpus: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        for (c, op) in script.batch.cpu_ops() {
            cpus.entry(c).or_default().push(op);
        }
        assert_eq!(
            cpus[&0],
            [Op::RdTsc, Op::RdMsr { msr: 0xe7 }, Op::RdMsr { msr: 0x10 }]
        );
        assert_eq!(cpus[&1], [Op::RdMsr { msr: 0xe7 }, Op::RdMsr { msr: 0x10 }]);
        assert_eq!(script.origins.len(), script.batch.len());
        let mut p = Printer::new(Format::Table, cpus.clone(), &adds, &[], &[]).unwrap();
        // The added MSRs have no value column of their own.
        assert_eq!(
            p.header(),
            ["CPU", "TSC_MHz", "MPERF_D", "C0%", "TSC_LO", "TSC"]
        );
        for r in [
            online(0, 0),
            online(1, 0),
            smp(0, 0, 0, 0, &[0, 100, 0x1_0000_0001]),
            smp(1, 0, 0, 0, &[50, 7]),
        ] {
            p.record(&r, HZ);
        }
        p.record(&smp(0, 1, 1000, 0, &[1000, 350, 0x1_0000_0002]), HZ);
        let block = p.record(&smp(1, 1, 2000, 0, &[550, 8]), HZ);
        assert_eq!(words(&block[1]), ["-", "2400", "750", "25.00"]);
        assert_eq!(
            words(&block[2]),
            [
                "0",
                "2400",
                "250",
                "25.00",
                "0x00000002",
                "0x00000000000003e8"
            ]
        );
        assert_eq!(
            words(&block[3]),
            ["1", "2400", "500", "25.00", "0x00000008"]
        );
        // CPU is always shown; turbostat's users name it.
        let p = Printer::new(
            Format::Table,
            cpus.clone(),
            &adds,
            &["CPU".into(), "C0%".into()],
            &[],
        );
        assert_eq!(p.unwrap().header(), ["CPU", "C0%"]);
        let show = ["C0%".to_string(), "TSC".to_string()];
        let p = Printer::new(Format::Table, cpus.clone(), &adds, &show, &["TSC".into()]).unwrap();
        assert_eq!(p.header(), ["CPU", "C0%"]);
        let e = Printer::new(Format::Table, cpus, &[], &[], &["Busy%".into()])
            .err()
            .unwrap();
        assert!(
            e.contains(
                "--hide Busy%: no such column (the columns: TSC_MHz,TSC,IA32_MPERF,IA32_TSC)"
            ),
            "{e}"
        );
    }

    #[test]
    fn value_columns_are_named_after_the_op() {
        for (op, name) in [
            (Op::RdMsr { msr: 0x1234_5678 }, "MSR_0x12345678"),
            (Op::RdMsr { msr: IA32_APERF }, "IA32_APERF"),
            (Op::RdPmc { ecx: 1 }, "PMC1"),
            (Op::RdPmc { ecx: 1 << 30 | 2 }, "FIXED_CTR2"),
            (Op::RdTscp, "TSCP"),
            (
                Op::Cpuid {
                    leaf: 0xa,
                    subleaf: 0,
                },
                "CPUID_0xa.0",
            ),
        ] {
            assert_eq!(value_name(&op), name);
        }
        // The same op twice on a CPU: two columns; CPUs with other ops get
        // columns of their own, not positions.
        let p = printer(
            Format::Table,
            &[
                (0, vec![Op::RdTsc, Op::RdTsc]),
                (3, vec![Op::RdPmc { ecx: 0 }]),
            ],
        );
        assert_eq!(p.header(), ["CPU", "TSC_MHz", "TSC", "TSC#2", "PMC0"]);
    }

    #[test]
    fn the_tsc_clock_measures_a_rate() {
        let c = TscClock::start();
        std::thread::sleep(Duration::from_millis(20));
        let hz = c.hz().unwrap();
        // Any TSC of this century: 100 MHz to 10 GHz.
        assert!((1e8..1e10).contains(&hz), "{hz}");
    }
}
