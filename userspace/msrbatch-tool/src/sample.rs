// SPDX-License-Identifier: GPL-2.0
//! `msrbatch sample`: a script that only reads, run by the kernel on each of
//! its CPUs every period (a sampler); one row per sample, with turbostat's
//! derived columns where the script reads their MSRs
//! ([`msrbatch::derived`]), and a line for every CPU going online or
//! offline and every loss.

use crate::exit::{Exit, Failure};
use crate::output::{describe_value, format_row, json_op, Format, JsonObject};
use crate::parse_count;
use msrbatch::derived::{Derived, Sources, Tracker};
use msrbatch::number::{parse_duration, parse_u32};
use msrbatch::sampler::{Record, Sample, Sampler, SamplerConfig, Wait, PERIOD_NS};
use msrbatch::script::Script;
use msrbatch::{refusal, Device, Op, OpResult};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

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

/// A derived column: its name and how to get it from [`Derived`].
struct Column {
    name: &'static str,
    get: fn(&Derived) -> Option<f64>,
    decimals: usize,
}

/// Whether a CPU's sources give a column.
type Has = fn(&Sources) -> bool;

/// The derived columns, in turbostat's order, each with whether a CPU's
/// sources give it.
const COLUMNS: &[(Column, Has)] = &[
    (
        Column {
            name: "TSC_MHz",
            get: |d| Some(d.tsc_mhz),
            decimals: 0,
        },
        |_| true,
    ),
    (
        Column {
            name: "Avg_MHz",
            get: |d| d.avg_mhz,
            decimals: 0,
        },
        Sources::has_frequency,
    ),
    (
        Column {
            name: "Busy%",
            get: |d| d.busy_pct,
            decimals: 2,
        },
        Sources::has_frequency,
    ),
    (
        Column {
            name: "Bzy_MHz",
            get: |d| d.bzy_mhz,
            decimals: 0,
        },
        Sources::has_frequency,
    ),
    (
        Column {
            name: "Pkg_J",
            get: |d| d.pkg_joules,
            decimals: 6,
        },
        Sources::has_package_energy,
    ),
    (
        Column {
            name: "PkgWatt",
            get: |d| d.pkg_watts,
            decimals: 2,
        },
        Sources::has_package_energy,
    ),
    (
        Column {
            name: "Cor_J",
            get: |d| d.core_joules,
            decimals: 6,
        },
        Sources::has_core_energy,
    ),
    (
        Column {
            name: "CorWatt",
            get: |d| d.core_watts,
            decimals: 2,
        },
        Sources::has_core_energy,
    ),
];

/// How samples are printed: the columns the script's ops give.
struct Printer {
    format: Format,
    period_ns: u64,
    /// Each CPU's ops and their sources of derived columns.
    cpus: BTreeMap<u32, (Vec<Op>, Sources)>,
    /// The derived columns some CPU has.
    derived: Vec<&'static Column>,
    /// The name of each value column: the op at that position on every CPU,
    /// or `opN` where the CPUs differ.
    values: Vec<String>,
    tracker: Tracker,
    /// Table: each column's width.
    width: Vec<usize>,
}

/// The width of a table's value cell (`0x` and 16 hex digits).
const VALUE_WIDTH: usize = 18;

impl Printer {
    fn new(format: Format, period_ns: u64, cpus: BTreeMap<u32, Vec<Op>>) -> Self {
        let cpus: BTreeMap<u32, (Vec<Op>, Sources)> = cpus
            .into_iter()
            .map(|(c, ops)| {
                let src = Sources::of(&ops);
                (c, (ops, src))
            })
            .collect();
        let derived = COLUMNS
            .iter()
            .filter(|(_, has)| cpus.values().any(|(_, s)| has(s)))
            .map(|(c, _)| c)
            .collect();
        let n = cpus.values().map(|(ops, _)| ops.len()).max().unwrap_or(0);
        let values = (0..n)
            .map(|i| {
                let names: BTreeSet<String> = cpus
                    .values()
                    .map(|(ops, _)| ops.get(i).map(ToString::to_string).unwrap_or_default())
                    .collect();
                match names.into_iter().collect::<Vec<_>>().as_slice() {
                    [one] => one.clone(),
                    _ => format!("op{i}"),
                }
            })
            .collect();
        let mut p = Printer {
            format,
            period_ns,
            cpus,
            derived,
            values,
            tracker: Tracker::new(),
            width: Vec::new(),
        };
        let minimum = [3, 8, 20]
            .into_iter()
            .chain(p.derived.iter().map(|_| 8))
            .chain(p.values.iter().map(|_| VALUE_WIDTH));
        p.width = p
            .header()
            .iter()
            .zip(minimum)
            .map(|(h, w)| h.len().max(w))
            .collect();
        p
    }

    fn header(&self) -> Vec<String> {
        let mut h: Vec<String> = ["cpu", "seq", "tsc"].map(String::from).to_vec();
        h.extend(self.derived.iter().map(|c| c.name.to_string()));
        h.extend(self.values.iter().cloned());
        h
    }

    /// The CSV header: the record's type and the lost count before the
    /// table's columns.
    fn csv_header(&self) -> String {
        let mut h = vec!["type".to_string(), "cpu".into(), "seq".into(), "tsc".into()];
        h.push("lost".into());
        h.extend(self.header().into_iter().skip(3));
        h.join(",")
    }

    fn start(&self) -> String {
        match self.format {
            Format::Table => format_row(&self.header(), &self.width),
            Format::Csv => self.csv_header(),
            Format::Json => String::new(),
        }
    }

    /// The derived cells of a sample (empty: not available).
    fn derived_cells(&self, d: Option<&Derived>) -> Vec<String> {
        self.derived
            .iter()
            .map(|c| {
                d.and_then(|d| (c.get)(d))
                    .map(|v| format!("{v:.*}", c.decimals))
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The line for a record (a sample updates the derived columns' state).
    fn record(&mut self, r: &Record) -> String {
        match r {
            Record::Sample(s) => self.sample(s),
            Record::Online { cpu, seq, tsc } | Record::Offline { cpu, seq, tsc } => {
                let what = if matches!(r, Record::Online { .. }) {
                    "online"
                } else {
                    self.tracker.forget(*cpu);
                    "offline"
                };
                match self.format {
                    Format::Table => format!("# cpu {cpu} {what} at seq {seq} (tsc {tsc})"),
                    Format::Json => JsonObject::default()
                        .with("type", what)
                        .with("cpu", cpu)
                        .with("seq", seq)
                        .with("tsc", tsc)
                        .to_string(),
                    Format::Csv => {
                        self.csv_event(what, *cpu, &seq.to_string(), &tsc.to_string(), "")
                    }
                }
            }
            Record::Lost { cpu, lost } => match self.format {
                Format::Table => format!("# cpu {cpu} lost {lost} samples (ring full)"),
                Format::Json => JsonObject::default()
                    .with("type", "lost")
                    .with("cpu", cpu)
                    .with("lost", lost)
                    .to_string(),
                Format::Csv => self.csv_event("lost", *cpu, "", "", &lost.to_string()),
            },
        }
    }

    fn csv_event(&self, what: &str, cpu: u32, seq: &str, tsc: &str, lost: &str) -> String {
        let empty = self.derived.len() + self.values.len();
        format!("{what},{cpu},{seq},{tsc},{lost}{}", ",".repeat(empty))
    }

    fn sample(&mut self, s: &Sample) -> String {
        let (ops, src) = self
            .cpus
            .get(&s.cpu)
            .map(|(o, s)| (o.as_slice(), *s))
            .unwrap_or_default();
        let d = self.tracker.push(&src, self.period_ns, s);
        let derived = self.derived_cells(d.as_ref());
        let results: Vec<OpResult> = s.results(ops).collect();
        match self.format {
            Format::Table => {
                let mut cells = vec![s.cpu.to_string(), s.seq.to_string(), s.tsc.to_string()];
                cells.extend(derived);
                cells.extend(results.iter().map(|r| match r.value {
                    Ok(_) => describe_value(&r.value),
                    Err(e) => e.name(),
                }));
                format_row(&cells, &self.width)
            }
            Format::Csv => {
                let mut cells = vec![
                    "sample".to_string(),
                    s.cpu.to_string(),
                    s.seq.to_string(),
                    s.tsc.to_string(),
                    String::new(),
                ];
                cells.extend(derived);
                cells.extend(results.iter().map(|r| match r.value {
                    Ok(v) => v.as_u64().map(|v| format!("{v:#x}")).unwrap_or_default(),
                    Err(e) => e.name(),
                }));
                cells.resize(5 + self.derived.len() + self.values.len(), String::new());
                cells.join(",")
            }
            Format::Json => {
                let mut o = JsonObject::default()
                    .with("type", "sample")
                    .with("cpu", s.cpu)
                    .with("seq", s.seq)
                    .with("tsc", s.tsc);
                for (c, v) in self.derived.iter().zip(derived) {
                    // The number as the table prints it (its decimals).
                    o.push_number(c.name, &v);
                }
                let values: Vec<JsonObject> = results.iter().map(|r| json_op(r, &[])).collect();
                o.with("values", values).to_string()
            }
        }
    }
}

/// The sampler went wrong after it started (exit status 3).
fn broken(e: impl std::fmt::Display) -> Failure {
    Failure::new(Exit::SamplerFailed, format!("sample: {e}"))
}

/// Runs `script` (already checked) as a sampler on `dev` and prints its
/// records until `a.count` samples of each CPU (or for ever).
pub fn sample(
    dev: &Device,
    script: &Script,
    a: &SampleArgs,
    refused: impl Fn(msrbatch::Error) -> Failure,
) -> Result<Exit, Failure> {
    let cfg = a.config();
    let mut sampler = dev
        .prepare(&script.batch)
        .and_then(|p| p.sample(&cfg))
        .map_err(refused)?;
    let cpus = sampler
        .cpus()
        .map(|c| (c, sampler.cpu_ops(c).to_vec()))
        .collect();
    let mut p = Printer::new(a.output_format(), sampler.period_ns(), cpus);
    let mut out = std::io::stdout().lock();
    let mut put = |line: &str| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| broken(format!("stdout: {e}")))
    };
    let start = p.start();
    if !start.is_empty() {
        put(&start)?;
    }
    // The CPUs whose samples are awaited: those of the script that are
    // online now, and any that comes online.
    let online = msrbatch::online_cpus().unwrap_or_default();
    let mut pending: BTreeSet<u32> = sampler.cpus().filter(|c| online.contains(c)).collect();
    let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
    let (mut all_ok, mut stopping, mut last, mut waits) = (true, false, false, 0);
    loop {
        while let Some(r) = sampler.read().map_err(broken)? {
            match &r {
                Record::Sample(s) => {
                    let n = counts.entry(s.cpu).or_default();
                    if a.count.is_some_and(|c| *n >= c) {
                        continue;
                    }
                    *n += 1;
                    all_ok &= s.failed == 0;
                }
                Record::Online { cpu, .. } => {
                    pending.insert(*cpu);
                }
                Record::Offline { cpu, .. } => {
                    pending.remove(cpu);
                }
                Record::Lost { .. } => {}
            }
            put(&p.record(&r))?;
        }
        if last {
            break;
        }
        let done = |c: u64| {
            pending
                .iter()
                .all(|cpu| counts.get(cpu).is_some_and(|&n| n >= c))
        };
        if !stopping && a.count.is_some_and(done) {
            sampler.stop().map_err(broken)?;
            stopping = true;
        }
        match sampler.wait(Some(Duration::from_secs(1))).map_err(broken)? {
            Wait::Ready => {}
            // Once more for what the CPUs appended while stopping.
            Wait::Stopped => last = true,
            Wait::TimedOut if stopping => {
                waits += 1;
                if waits > 5 {
                    return Err(broken("the sampler did not stop within 5 s"));
                }
            }
            Wait::TimedOut => {}
        }
    }
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
        Printer::new(format, 1_000_000, cpus.iter().cloned().collect())
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

    /// The table: APERF/MPERF give the frequency columns from the second
    /// sample of a CPU on; a faulted op shows its errno.
    #[test]
    fn table_rows_with_derived_columns() {
        let ops = vec![Op::RdMsr { msr: IA32_APERF }, Op::RdMsr { msr: IA32_MPERF }];
        let mut p = printer(Format::Table, &[(0, ops.clone()), (1, ops)]);
        assert_eq!(
            p.header(),
            [
                "cpu",
                "seq",
                "tsc",
                "TSC_MHz",
                "Avg_MHz",
                "Busy%",
                "Bzy_MHz",
                "rdmsr IA32_APERF",
                "rdmsr IA32_MPERF"
            ]
        );
        let first = p.record(&smp(0, 0, 1000, 0, &[0, 0]));
        assert!(first.starts_with("0    0         1000"), "{first}");
        let second = p.record(&smp(0, 1, 2_401_000, 0, &[3_000_000, 2_000_000]));
        let cells: Vec<&str> = second.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "0",
                "1",
                "2401000",
                "2400",
                "3000",
                "83.33",
                "3600",
                "0x00000000002dc6c0",
                "0x00000000001e8480"
            ]
        );
        let faulted = p.record(&smp(1, 0, 5, 0b10, &[1, 0]));
        assert!(faulted.ends_with("0x0000000000000001  EIO"), "{faulted}");
        assert_eq!(
            p.record(&Record::Offline {
                cpu: 0,
                seq: 2,
                tsc: 9
            }),
            "# cpu 0 offline at seq 2 (tsc 9)"
        );
        // After going offline, a CPU's next sample has no derived columns.
        let again = p.record(&smp(0, 5, 9_000_000, 0, &[1, 1]));
        assert_eq!(again.split_whitespace().count(), 5, "{again}");
    }

    /// CSV: one header, every row as many fields; events fill the type,
    /// CPU and their own fields. Ops that differ between CPUs are named by
    /// position.
    #[test]
    fn csv_rows_have_the_header_s_fields() {
        let mut p = printer(
            Format::Csv,
            &[
                (0, vec![Op::RdTsc, Op::RdMsr { msr: 0x10 }]),
                (1, vec![Op::RdTscp]),
            ],
        );
        let header = p.start();
        assert_eq!(header, "type,cpu,seq,tsc,lost,TSC_MHz,op0,op1");
        let n = header.split(',').count();
        let rows = [
            p.record(&smp(0, 0, 10, 0, &[7, 8])),
            p.record(&smp(1, 0, 10, 0, &[7])),
            p.record(&smp(0, 2, 2_000_010, 0, &[9, 10])),
            p.record(&Record::Lost { cpu: 1, lost: 4 }),
            p.record(&Record::Online {
                cpu: 1,
                seq: 3,
                tsc: 5,
            }),
        ];
        for r in &rows {
            assert_eq!(r.split(',').count(), n, "{r}");
        }
        assert_eq!(rows[0], "sample,0,0,10,,,0x7,0x8");
        assert_eq!(rows[2], "sample,0,2,2000010,,1000,0x9,0xa");
        assert_eq!(rows[3], "lost,1,,,4,,,");
        assert_eq!(rows[4], "online,1,3,5,,,,");
    }

    /// JSON: one object per record, every one well-formed.
    #[test]
    fn json_objects() {
        let mut p = printer(
            Format::Json,
            &[(2, vec![Op::RdTsc, Op::RdMsr { msr: 0xe8 }])],
        );
        assert_eq!(p.start(), "");
        let lines = [
            p.record(&Record::Online {
                cpu: 2,
                seq: 0,
                tsc: 1,
            }),
            p.record(&smp(2, 0, 100, 0b10, &[5, 0])),
            p.record(&smp(2, 1, 1_000_100, 0, &[6, 7])),
            p.record(&Record::Lost { cpu: 2, lost: 3 }),
        ];
        let v: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert_eq!(v[0]["type"], "online");
        assert_eq!(v[1]["TSC_MHz"], serde_json::Value::Null);
        assert_eq!(v[1]["values"][1]["error"], "EIO");
        assert_eq!(v[1]["values"][0]["value"], 5);
        assert_eq!(v[2]["TSC_MHz"], 1000);
        assert_eq!(v[2]["values"][1]["name"], "IA32_APERF");
        assert_eq!(v[2]["values"][1]["value_hex"], "0x7");
        assert_eq!(v[2]["values"][1]["register"], "0xe8");
        assert_eq!(v[3]["lost"], 3);
        // The bytes: members in this order, no spaces.
        assert_eq!(
            lines[0],
            "{\"type\":\"online\",\"cpu\":2,\"seq\":0,\"tsc\":1}"
        );
        assert_eq!(lines[1], "{\"type\":\"sample\",\"cpu\":2,\"seq\":0,\"tsc\":100,\"TSC_MHz\":null,\"values\":[{\"op\":\"rdtsc\",\"register\":\"\",\"value\":5,\"value_hex\":\"0x5\",\"error\":null},{\"op\":\"rdmsr\",\"register\":\"0xe8\",\"name\":\"IA32_APERF\",\"value\":null,\"error\":\"EIO\"}]}");
        assert_eq!(lines[2], "{\"type\":\"sample\",\"cpu\":2,\"seq\":1,\"tsc\":1000100,\"TSC_MHz\":1000,\"values\":[{\"op\":\"rdtsc\",\"register\":\"\",\"value\":6,\"value_hex\":\"0x6\",\"error\":null},{\"op\":\"rdmsr\",\"register\":\"0xe8\",\"name\":\"IA32_APERF\",\"value\":7,\"value_hex\":\"0x7\",\"error\":null}]}");
        assert_eq!(lines[3], "{\"type\":\"lost\",\"cpu\":2,\"lost\":3}");
    }
}
