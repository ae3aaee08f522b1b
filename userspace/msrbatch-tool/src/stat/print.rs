// SPDX-License-Identifier: GPL-2.0
//! How `msrbatch stat` prints its counts: perf stat's table, its CSV
//! (`-x SEP`) and its JSON (`-j`), summed over the CPUs or per CPU (`-A`),
//! whole or per interval (`-I`); `<not supported>` for a CPU without a PMU,
//! and the instructions per cycle where both were counted.

use crate::output::JsonObject;
use std::fmt::Write;
use std::time::Duration;

/// perf's word for a count there is no counter for.
pub const NOT_SUPPORTED: &str = "<not supported>";

/// The metric perf prints beside instructions.
const IPC_UNIT: &str = "insn per cycle";

/// The format of the counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Style {
    /// perf stat's table.
    Table,
    /// perf stat's CSV with this separator (`-x`).
    Csv(String),
    /// perf stat's JSON lines (`-j`).
    Json,
}

/// The format and the arrangement of the counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub style: Style,
    /// One count per CPU (`-A`), else their sum.
    pub per_cpu: bool,
}

/// One event's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// The event as given.
    pub event: String,
    /// Per CPU of the report (in its order): the sum over the runs.
    pub per_cpu: Vec<u128>,
    /// Per run: the sum over the CPUs.
    pub per_run: Vec<u128>,
    /// How long the counter counted, summed over the runs.
    pub runtime: Duration,
}

/// What a stat counted, over its runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// CMD as typed.
    pub cmd: String,
    /// The CPUs counted on.
    pub cpus: Vec<u32>,
    /// Per CPU: whether it has a PMU (else its counts are not supported).
    pub has_pmu: Vec<bool>,
    /// Runs of CMD per event (`-r`).
    pub runs: u32,
    /// Per event, in the order given.
    pub counts: Vec<Count>,
    /// How long each run of CMD took.
    pub elapsed: Vec<Duration>,
}

impl Report {
    /// Nothing counted yet of `events` on `cpus` (none with a PMU yet).
    pub fn new(cmd: &str, cpus: &[u32], runs: u32, events: &[String]) -> Self {
        Report {
            cmd: cmd.to_string(),
            cpus: cpus.to_vec(),
            has_pmu: vec![false; cpus.len()],
            runs,
            counts: events
                .iter()
                .map(|e| Count {
                    event: e.clone(),
                    per_cpu: vec![0; cpus.len()],
                    ..Count::default()
                })
                .collect(),
            elapsed: Vec::new(),
        }
    }

    /// `cpu` has a PMU.
    pub fn supported(&mut self, cpu: u32) {
        if let Some(i) = self.cpus.iter().position(|&c| c == cpu) {
            self.has_pmu[i] = true;
        }
    }

    /// Adds a run of CMD that took `elapsed` and counted events `events`
    /// (indices into the report's events): per CPU, each event's count in
    /// the order of `events`.
    pub fn add_run(&mut self, events: &[usize], counted: &[(u32, Vec<u64>)], elapsed: Duration) {
        self.elapsed.push(elapsed);
        for (slot, &e) in events.iter().enumerate() {
            let c = &mut self.counts[e];
            let mut sum = 0;
            for (cpu, values) in counted {
                if let (Some(i), Some(&v)) =
                    (self.cpus.iter().position(|x| x == cpu), values.get(slot))
                {
                    c.per_cpu[i] += u128::from(v);
                    sum += u128::from(v);
                }
            }
            c.per_run.push(sum);
            c.runtime += elapsed;
        }
    }

    /// The CPUs as perf names them: `0-3,5`.
    fn cpu_list(&self) -> String {
        msrbatch::number::format_cpu_list(&self.cpus)
    }

    /// The rows to print: per CPU with -A, else one per event.
    fn rows(&self, per_cpu: bool) -> Vec<Row<'_>> {
        let runs = f64::from(self.runs.max(1));
        let nr_pmu = self.has_pmu.iter().filter(|&&h| h).count() as u32;
        let mut rows = Vec::new();
        let mean_runtime = |c: &Count| c.runtime / self.runs.max(1);
        if per_cpu {
            for (i, &cpu) in self.cpus.iter().enumerate() {
                for c in &self.counts {
                    rows.push(Row {
                        cpu: Some(cpu),
                        event: &c.event,
                        value: self.has_pmu[i].then(|| c.per_cpu[i] as f64 / runs),
                        runtime: if self.has_pmu[i] {
                            mean_runtime(c)
                        } else {
                            Duration::ZERO
                        },
                        noise: None,
                        metric: None,
                    });
                }
            }
        } else {
            for c in &self.counts {
                let supported = nr_pmu > 0;
                rows.push(Row {
                    cpu: None,
                    event: &c.event,
                    value: supported.then(|| c.per_cpu.iter().sum::<u128>() as f64 / runs),
                    runtime: mean_runtime(c) * nr_pmu,
                    noise: (supported && self.runs > 1).then(|| rel_stddev(&c.per_run)),
                    metric: None,
                });
            }
        }
        ipc(&mut rows);
        rows
    }
}

/// One printed count.
#[derive(Clone, Debug, PartialEq)]
struct Row<'a> {
    /// With -A: its CPU.
    cpu: Option<u32>,
    event: &'a str,
    /// The mean over the runs; None: not supported.
    value: Option<f64>,
    runtime: Duration,
    /// With -r: the relative standard deviation of the mean, percent.
    noise: Option<f64>,
    /// A metric and its unit.
    metric: Option<(f64, &'static str)>,
}

/// perf's relative standard deviation of the mean of `v`, in percent (0
/// for fewer than 2 values or a mean of 0).
fn rel_stddev(v: &[u128]) -> f64 {
    let n = v.len() as f64;
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    100.0 * (var / n).sqrt() / mean
}

/// Puts instructions per cycle beside each instructions count that has a
/// cycles count (with the same modifiers, else plain `cycles`) for the same
/// CPU, as perf does.
fn ipc(rows: &mut [Row<'_>]) {
    for i in 0..rows.len() {
        let Some(mods) = rows[i].event.strip_prefix("instructions") else {
            continue;
        };
        if !(mods.is_empty() || mods.starts_with(':')) {
            continue;
        }
        let cycles = |name: &str| {
            rows.iter()
                .find(|r| r.cpu == rows[i].cpu && r.event == name)
                .and_then(|r| r.value)
        };
        let c = cycles(&format!("cycles{mods}")).or_else(|| cycles("cycles"));
        if let (Some(insn), Some(c)) = (rows[i].value, c.filter(|&c| c > 0.0)) {
            rows[i].metric = Some((insn / c, IPC_UNIT));
        }
    }
}

/// A count as perf prints it: a whole number, or `<not supported>`.
fn value_text(v: Option<f64>) -> String {
    v.map_or_else(|| NOT_SUPPORTED.to_string(), |v| format!("{v:.0}"))
}

/// One row in `layout`'s style, `time` first with -I.
fn row_text(layout: &Layout, r: &Row<'_>, time: Option<Duration>) -> String {
    match &layout.style {
        Style::Table => {
            let mut l = String::new();
            if let Some(t) = time {
                let _ = write!(l, "{:>16.9} ", t.as_secs_f64());
            }
            if let Some(cpu) = r.cpu {
                let _ = write!(l, "CPU{cpu:<4} ");
            }
            let _ = write!(l, "{:>18}      {:<25}", value_text(r.value), r.event);
            if let Some((m, unit)) = r.metric {
                let _ = write!(l, " #  {m:>6.2}  {unit:<15}");
            }
            if let Some(n) = r.noise {
                let _ = write!(l, "  ( +-{n:>6.2}% )");
            }
            l.trim_end().to_string()
        }
        Style::Csv(sep) => {
            let mut f: Vec<String> = Vec::new();
            if let Some(t) = time {
                f.push(format!("{:.9}", t.as_secs_f64()));
            }
            if let Some(cpu) = r.cpu {
                f.push(format!("CPU{cpu}"));
            }
            f.extend([value_text(r.value), String::new(), r.event.to_string()]);
            if let Some(n) = r.noise {
                f.push(format!("{n:.2}%"));
            }
            f.push(r.runtime.as_nanos().to_string());
            f.push("100.00".into());
            match r.metric {
                Some((m, unit)) => f.extend([format!("{m:.2}"), unit.to_string()]),
                None => f.extend([String::new(), String::new()]),
            }
            f.join(sep)
        }
        Style::Json => {
            let mut o = JsonObject::default();
            if let Some(t) = time {
                o.push_number("interval", &format!("{:.9}", t.as_secs_f64()));
            }
            if let Some(cpu) = r.cpu {
                o.push("cpu", cpu.to_string());
            }
            let value = r
                .value
                .map_or_else(|| NOT_SUPPORTED.to_string(), |v| format!("{v:.6}"));
            o.push("counter-value", value);
            o.push("unit", "");
            o.push("event", r.event);
            if let Some(n) = r.noise {
                o.push_number("variance", &format!("{n:.2}"));
            }
            o.push_number("event-runtime", &r.runtime.as_nanos().to_string());
            o.push_number("pcnt-running", "100.00");
            if let Some((m, unit)) = r.metric {
                o.push_number("metric-value", &format!("{m:.6}"));
                o.push("metric-unit", unit);
            }
            o.perf_text()
        }
    }
}

/// The counts of a whole stat, as perf stat prints them after CMD ends
/// (the table with its header and the elapsed time).
pub fn counts(layout: &Layout, r: &Report) -> String {
    let mut out = String::new();
    let table = layout.style == Style::Table;
    if table {
        let runs = if r.runs > 1 {
            format!(" ({} runs)", r.runs)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "\n Performance counter stats for 'CPU(s) {}' while '{}' ran{runs}:\n\n",
            r.cpu_list(),
            r.cmd
        );
    }
    for row in r.rows(layout.per_cpu) {
        let _ = writeln!(out, "{}", row_text(layout, &row, None));
    }
    if table {
        let secs: Vec<f64> = r.elapsed.iter().map(Duration::as_secs_f64).collect();
        let mean = secs.iter().sum::<f64>() / secs.len().max(1) as f64;
        let _ = write!(out, "\n {mean:>17.9} seconds time elapsed");
        if r.runs > 1 {
            let ns: Vec<u128> = r.elapsed.iter().map(Duration::as_nanos).collect();
            let _ = write!(out, "  ( +-{:>6.2}% )", rel_stddev(&ns));
        }
        let _ = write!(out, "\n\n");
    }
    out
}

/// The counts of one interval, ending `t` after the start (`header`: the
/// first interval, which the table's header comes before).
pub fn interval(layout: &Layout, r: &Report, t: Duration, header: bool) -> String {
    let mut out = String::new();
    if header && layout.style == Style::Table {
        let cpu = if layout.per_cpu { " CPU   " } else { "" };
        let _ = writeln!(out, "#           time{cpu}             counts unit events");
    }
    for row in r.rows(layout.per_cpu) {
        let _ = writeln!(out, "{}", row_text(layout, &row, Some(t)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(runs: &[&[u64]], has_pmu: &[bool]) -> Report {
        let names: Vec<String> = ["instructions", "cycles"].map(String::from).to_vec();
        let cpus: Vec<u32> = (0..has_pmu.len() as u32).collect();
        let mut r = Report::new("cmd", &cpus, runs.len() as u32, &names);
        for (&c, &h) in cpus.iter().zip(has_pmu) {
            if h {
                r.supported(c);
            }
        }
        for run in runs {
            let counted: Vec<(u32, Vec<u64>)> = cpus
                .iter()
                .zip(has_pmu)
                .filter(|(_, &h)| h)
                .map(|(&c, _)| (c, run.to_vec()))
                .collect();
            r.add_run(&[0, 1], &counted, Duration::from_millis(2));
        }
        r
    }

    fn layout(style: Style, per_cpu: bool) -> Layout {
        Layout { style, per_cpu }
    }

    #[test]
    fn the_table_as_perf_prints_it() {
        let text = counts(
            &layout(Style::Table, false),
            &report(&[&[3000, 2000]], &[true]),
        );
        let want = format!(
            "\n Performance counter stats for 'CPU(s) 0' while 'cmd' ran:\n\n{:>18}      {:<25} #  {:>6.2}  insn per cycle\n{:>18}      cycles\n\n {:>17.9} seconds time elapsed\n\n",
            3000, "instructions", 1.5, 2000, 0.002
        );
        assert_eq!(text, want);
        // -r: the mean, and the relative standard deviation of the mean.
        let text = counts(
            &layout(Style::Table, false),
            &report(&[&[900, 1000], &[1100, 1000]], &[true]),
        );
        assert!(text.contains("(2 runs):"), "{text}");
        let line = text.lines().find(|l| l.contains("instructions")).unwrap();
        assert!(line.ends_with("( +- 10.00% )"), "{line}");
        assert!(line.contains(" 1000      instructions"), "{line}");
    }

    #[test]
    fn csv_and_json_as_perf_prints_them() {
        let r = report(&[&[3000, 2000]], &[true, false]);
        let csv = counts(&layout(Style::Csv(";".into()), false), &r);
        assert_eq!(
            csv,
            "3000;;instructions;2000000;100.00;1.50;insn per cycle\n2000;;cycles;2000000;100.00;;\n"
        );
        let csv = counts(&layout(Style::Csv(",".into()), true), &r);
        assert_eq!(
            csv.lines().collect::<Vec<_>>(),
            [
                "CPU0,3000,,instructions,2000000,100.00,1.50,insn per cycle",
                "CPU0,2000,,cycles,2000000,100.00,,",
                "CPU1,<not supported>,,instructions,0,100.00,,",
                "CPU1,<not supported>,,cycles,0,100.00,,",
            ]
        );
        let json = counts(&layout(Style::Json, false), &r);
        let lines: Vec<&str> = json.lines().collect();
        assert_eq!(
            lines[0],
            "{\"counter-value\" : \"3000.000000\", \"unit\" : \"\", \"event\" : \"instructions\", \"event-runtime\" : 2000000, \"pcnt-running\" : 100.00, \"metric-value\" : 1.500000, \"metric-unit\" : \"insn per cycle\"}"
        );
        for l in &lines {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        }
        let none = counts(&layout(Style::Json, false), &report(&[&[1, 1]], &[false]));
        let v: serde_json::Value = serde_json::from_str(none.lines().next().unwrap()).unwrap();
        assert_eq!(v["counter-value"], NOT_SUPPORTED);
        assert!(v.get("metric-value").is_none());
        let table = counts(&layout(Style::Table, false), &report(&[&[1, 1]], &[false]));
        assert!(
            table.contains(&format!("{NOT_SUPPORTED:>18}      instructions\n")),
            "{table}"
        );
    }

    #[test]
    fn intervals_as_perf_prints_them() {
        let r = report(&[&[10, 20]], &[true]);
        let t = Duration::from_millis(1001);
        let text = interval(&layout(Style::Table, false), &r, t, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#           time             counts unit events");
        assert_eq!(
            lines[1],
            format!(
                "{:>16.9} {:>18}      {:<25} #  {:>6.2}  insn per cycle",
                1.001, 10, "instructions", 0.5
            )
        );
        assert_eq!(
            interval(&layout(Style::Table, false), &r, t, false)
                .lines()
                .count(),
            2
        );
        let csv = interval(&layout(Style::Csv(",".into()), false), &r, t, true);
        assert!(csv.starts_with("1.001000000,10,,instructions,"), "{csv}");
        let json = interval(&layout(Style::Json, false), &r, t, true);
        let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(v["interval"], 1.001);
    }

    #[test]
    fn ipc_pairs_modifiers() {
        let names: Vec<String> = ["instructions:u", "cycles", "cycles:u", "instructionsx"]
            .map(String::from)
            .to_vec();
        let mut r = Report::new("c", &[0], 1, &names);
        r.supported(0);
        r.add_run(
            &[0, 1, 2, 3],
            &[(0, vec![100, 400, 200, 5])],
            Duration::from_secs(1),
        );
        let rows = r.rows(false);
        assert_eq!(rows[0].metric, Some((0.5, IPC_UNIT)));
        assert_eq!(rows[3].metric, None);
    }
}
