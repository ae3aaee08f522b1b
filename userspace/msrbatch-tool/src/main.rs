// SPDX-License-Identifier: GPL-2.0
//! `msrbatch`: run batch MSR scripts through /dev/msrbatch.

mod allowlist;
mod msrtools;
mod pmu;
mod script;
mod stat;

use clap::{Parser, Subcommand, ValueEnum};
use msrbatch::{msr_name, Device, Op, OpResult, Value};
use std::io::Read;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "msrbatch",
    version,
    about = "Batched, per-CPU atomic MSR, PMC, TSC and CPUID access",
    long_about = "Batched, per-CPU atomic MSR, PMC, TSC and CPUID access through /dev/msrbatch. \
A script (msrbatch run) or a command becomes one ioctl; each CPU runs its ops in order with \
interrupts off, and every op has its own status. Needs the msrbatch module; without CAP_SYS_RAWIO, \
a descriptor may do what the allowlist allows (msrbatch allowlist show). \
Scripts: Documentation/scripts.md; the ioctl ABI: msrbatch(4)."
)]
struct Cli {
    /// Device node.
    #[arg(long, global = true, default_value = msrbatch::DEVICE_PATH)]
    device: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show what the loaded module supports.
    Info,
    /// Run a batch script (FILE, or - for stdin) as one ioctl.
    Run {
        /// Script file, or - for standard input.
        file: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Same as --format json (one JSON object per op result and line).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Same as --format csv.
        #[arg(long, conflicts_with_all = ["format", "json"])]
        csv: bool,
        /// Run the script N times (one ioctl each).
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        /// Pause between repetitions, e.g. 100ms, 1s.
        #[arg(long, default_value = "0")]
        interval: String,
    },
    /// Read an MSR, with msr-tools' rdmsr options and output.
    Rdmsr(msrtools::RdmsrArgs),
    /// Write an MSR, with msr-tools' wrmsr options.
    Wrmsr(msrtools::WrmsrArgs),
    /// Decode the CPU's performance monitoring unit (CPUID leaves 0AH and
    /// 23H; AMD 80000001H and 80000022H), live or from a CPUID dump.
    Pmu {
        /// CPU to ask.
        #[arg(short = 'C', long = "cpu", default_value_t = 0)]
        cpu: u32,
        /// Decode every CPU of this CPUID dump (`cpuid -r` or AIDA64
        /// format) instead of asking the device.
        #[arg(long, value_name = "FILE")]
        cpuid_dump: Option<String>,
        /// One JSON object per CPU and line.
        #[arg(long)]
        json: bool,
    },
    /// Encode 'event=0x..,umask=0x..,usr,os,en' into an IA32_PERFEVTSEL
    /// value, or decode a value (a number) into its fields.
    Evsel {
        /// A spec to encode, or a number to decode.
        spec: String,
    },
    /// Count events while CMD runs pinned to one CPU.
    Stat(stat::StatArgs),
    /// Write the man page (roff) to stdout.
    #[command(hide = true, name = "__man")]
    Man,
    /// Write a shell completion script to stdout.
    #[command(hide = true, name = "__completions")]
    Completions {
        /// bash, zsh or fish.
        shell: clap_complete::Shell,
    },
    /// Show CR4 and its PCE bit (user-mode RDPMC) on every online CPU.
    Cr4,
    /// Load or show the allowlist: what descriptors opened without
    /// CAP_SYS_RAWIO may do.
    Allowlist(allowlist::AllowlistArgs),
    /// Run CMD with user-mode RDPMC granted to it (like taskset).
    Exec {
        /// Grant user-mode RDPMC (CR4.PCE) to CMD's thread.
        #[arg(long, required = true)]
        rdpmc: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
}

/// Why a grant was refused, in words.
fn grant_hint(e: &msrbatch::Error) -> &'static str {
    match e.errno().0 {
        libc::EACCES => "perf's rdpmc setting (/sys/bus/event_source/devices/cpu/rdpmc) is 0; write 1 or 2 there to allow user RDPMC",
        libc::EOPNOTSUPP => "the kernel lacks CONFIG_PREEMPT_NOTIFIERS (it comes with CONFIG_KVM), so a grant could not follow the thread",
        libc::EBUSY => "this thread already holds a grant",
        libc::EBADF => "the device is not open for writing",
        _ => "",
    }
}

fn exec_rdpmc(dev: &Device, cmd: &[String]) -> Result<bool, String> {
    use std::os::unix::process::CommandExt;
    dev.grant_rdpmc_thread()
        .map_err(|e| format!("{e}: {}", grant_hint(&e)))?;
    // execve() keeps this thread, so the grant (tied to the thread alone)
    // follows CMD. The device is close-on-exec: CMD gets no descriptor that
    // could write MSRs.
    let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    Err(format!("{}: {err}", cmd[0]))
}

fn show_cr4(dev: &Device) -> Result<bool, String> {
    let mut batch = msrbatch::Batch::new();
    for cpu in online_cpus() {
        batch.push(cpu, Op::RdCr4);
    }
    dev.run(&mut batch).map_err(|e| e.to_string())?;
    let rows: Vec<[String; 3]> = batch
        .results()
        .map(|r| match r.value {
            Ok(Value::U64(cr4)) => [
                r.cpu.to_string(),
                format!("{cr4:#010x}"),
                u8::from(cr4 & (1 << 8) != 0).to_string(),
            ],
            Ok(_) | Err(_) => [r.cpu.to_string(), "?".into(), format!("{:?}", r.value)],
        })
        .collect();
    print_table(&["cpu", "cr4", "pce"], &rows);
    Ok(batch.nr_failed() == 0)
}

/// Output formats of `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
    Csv,
}

/// CPUs the kernel lists as online.
fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| script::parse_cpus(s.trim(), &[]).ok())
        .unwrap_or_else(|| vec![0])
}

fn describe_reg(op: &Op) -> String {
    let msr = |m: u32| match msr_name(m) {
        Some(n) => format!("{n} ({m:#x})"),
        None => format!("{m:#x}"),
    };
    match *op {
        Op::RdMsr { msr: m } | Op::WrMsr { msr: m, .. } | Op::RmwMsr { msr: m, .. } => msr(m),
        Op::RdPmc { ecx } if ecx & (1 << 30) != 0 => format!("fixed {}", ecx & !(1 << 30)),
        Op::RdPmc { ecx } => format!("{ecx}"),
        Op::Cpuid { leaf, subleaf } => format!("{leaf:#x}.{subleaf}"),
        Op::Delay { ns } => format!("{ns} ns"),
        Op::RdTsc | Op::RdTscp | Op::RdCr4 => String::new(),
    }
}

fn describe_value(r: &OpResult) -> String {
    match (&r.op, r.value) {
        (Op::WrMsr { value, .. }, Ok(_)) => format!("{value:#018x} (written)"),
        (_, Ok(Value::None)) => String::new(),
        (_, Ok(Value::U64(v))) => format!("{v:#018x}"),
        (_, Ok(Value::Rmw { old, new })) => format!("{old:#018x} -> {new:#018x}"),
        (_, Ok(Value::Tscp { tsc, aux })) => format!("{tsc:#018x} aux={aux:#x}"),
        (_, Ok(Value::Cpuid { eax, ebx, ecx, edx })) => {
            format!("eax={eax:08x} ebx={ebx:08x} ecx={ecx:08x} edx={edx:08x}")
        }
        (_, Ok(Value::Ticks(t))) => format!("{t} TSC ticks"),
        (_, Err(_)) => String::new(),
    }
}

fn run_script(
    dev: &Device,
    file: &str,
    format: Format,
    repeat: u32,
    interval: &str,
) -> Result<bool, String> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?
    };
    let pause = match interval {
        "0" => 0,
        i => script::parse_duration(i)
            .ok_or_else(|| format!("--interval {i}: want a duration like 100ms"))?,
    };
    let mut s = script::parse(&text, &online_cpus()).map_err(|e| format!("{file}:{e}"))?;
    let mut all_ok = true;
    if format == Format::Csv {
        println!("iteration,line,cpu,op,register,value,error");
    }
    for iteration in 0..repeat.max(1) {
        if iteration > 0 && pause > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(pause));
        }
        dev.run(&mut s.batch).map_err(|e| {
            let at = e
                .op_index()
                .and_then(|i| s.origins.get(i as usize))
                .map(|o| format!(" (script line {})", o.line))
                .unwrap_or_default();
            format!("{e}{at}")
        })?;
        all_ok &= s.batch.nr_failed() == 0;
        let results = s.batch.results().zip(&s.origins);
        match format {
            Format::Table => {
                if repeat > 1 {
                    println!("# iteration {iteration}");
                }
                let rows: Vec<[String; 6]> = results
                    .map(|(r, o)| {
                        [
                            o.line.to_string(),
                            r.cpu.to_string(),
                            r.op.mnemonic().to_string(),
                            describe_reg(&r.op),
                            describe_value(&r),
                            r.value.map_or_else(|e| e.name(), |_| "ok".to_string()),
                        ]
                    })
                    .collect();
                print_table(&["line", "cpu", "op", "register", "value", "status"], &rows);
            }
            Format::Json => {
                for (r, o) in results {
                    println!("{}", json_result(iteration, o.line, &r));
                }
            }
            Format::Csv => {
                for (r, o) in results {
                    let value = r
                        .value
                        .ok()
                        .and_then(|v| v.as_u64())
                        .map(|v| format!("{v:#x}"))
                        .unwrap_or_default();
                    let err = r.value.err().map(|e| e.name()).unwrap_or_default();
                    println!(
                        "{iteration},{},{},{},{},{value},{err}",
                        o.line,
                        r.cpu,
                        r.op.mnemonic(),
                        csv_reg(&r.op)
                    );
                }
            }
        }
    }
    Ok(all_ok)
}

/// The register/index of an op, for JSON and CSV (a number; empty if none).
fn csv_reg(op: &Op) -> String {
    match *op {
        Op::RdMsr { msr } | Op::WrMsr { msr, .. } | Op::RmwMsr { msr, .. } => format!("{msr:#x}"),
        Op::RdPmc { ecx } => format!("{ecx:#x}"),
        Op::Cpuid { leaf, subleaf } => format!("{leaf:#x}.{subleaf}"),
        Op::Delay { ns } => ns.to_string(),
        Op::RdTsc | Op::RdTscp | Op::RdCr4 => String::new(),
    }
}

/// One op result as a JSON object (numbers as JSON numbers and hex strings).
fn json_result(iteration: u32, line: usize, r: &OpResult) -> String {
    let mut f = vec![
        format!("\"iteration\":{iteration}"),
        format!("\"line\":{line}"),
        format!("\"index\":{}", r.index),
        format!("\"cpu\":{}", r.cpu),
        format!("\"op\":\"{}\"", r.op.mnemonic()),
        format!("\"register\":\"{}\"", csv_reg(&r.op)),
    ];
    if let Op::RdMsr { msr } | Op::WrMsr { msr, .. } | Op::RmwMsr { msr, .. } = r.op {
        if let Some(n) = msr_name(msr) {
            f.push(format!("\"name\":\"{n}\""));
        }
    }
    let mut num = |k: &str, v: u64| {
        f.push(format!("\"{k}\":{v}"));
        f.push(format!("\"{k}_hex\":\"{v:#x}\""));
    };
    match r.value {
        Ok(Value::Rmw { old, new }) => {
            num("value", new);
            num("old", old);
            num("new", new);
        }
        Ok(Value::Tscp { tsc, aux }) => {
            num("value", tsc);
            num("aux", u64::from(aux));
        }
        Ok(Value::Cpuid { eax, ebx, ecx, edx }) => {
            num("value", u64::from(eax));
            for (k, v) in [("eax", eax), ("ebx", ebx), ("ecx", ecx), ("edx", edx)] {
                num(k, u64::from(v));
            }
        }
        Ok(Value::None) => {
            if let Op::WrMsr { value, .. } = r.op {
                num("value", value);
            }
        }
        Ok(v) => num("value", v.as_u64().unwrap_or(0)),
        Err(_) => f.push("\"value\":null".into()),
    }
    match r.value {
        Ok(_) => f.push("\"error\":null".into()),
        Err(e) => f.push(format!("\"error\":\"{}\"", e.name())),
    }
    format!("{{{}}}", f.join(","))
}

fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut width = header.map(str::len);
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that need no device.
    match &cli.cmd {
        Cmd::Evsel { spec } => return evsel(spec),
        Cmd::Pmu {
            cpu,
            cpuid_dump: Some(f),
            json,
        } => return exit_code_of(pmu::pmu(None, *cpu, Some(f), *json, &mut std::io::stdout())),
        Cmd::Stat(a) if a.offline() => {
            return match stat::stat(None, a, &mut std::io::stdout()) {
                Ok(code) => exit_code(code),
                Err(e) => exit_code_of(Err(e)),
            }
        }
        Cmd::Man => return man_page(),
        Cmd::Allowlist(a) => return exit_code_of(allowlist::run(a)),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "msrbatch",
                &mut std::io::stdout(),
            );
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let dev = match Device::open_path(&cli.device) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("msrbatch: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.cmd {
        Cmd::Info => dev.info().map_err(|e| e.to_string()).map(|i| {
            let ops: Vec<String> = (1..64)
                .filter(|b| i.ops_supported & (1 << b) != 0)
                .map(|b| b.to_string())
                .collect();
            println!("ABI version:        {}", i.version);
            println!("max ops per batch:  {}", i.max_ops);
            println!("max delay per op:   {} ns", i.max_delay_ns);
            println!("max delay per CPU:  {} ns", i.max_cpu_delay_ns);
            println!("op codes:           {}", ops.join(" "));
            println!("batch flags:        {:#x}", i.flags_supported);
            true
        }),
        Cmd::Run {
            file,
            format,
            json,
            csv,
            repeat,
            interval,
        } => {
            let format = if json {
                Format::Json
            } else if csv {
                Format::Csv
            } else {
                format
            };
            run_script(&dev, &file, format, repeat, &interval)
        }
        Cmd::Rdmsr(a) => return exit_code(msrtools::rdmsr(&dev, &a, &online_cpus())),
        Cmd::Wrmsr(a) => return exit_code(msrtools::wrmsr(&dev, &a, &online_cpus())),
        Cmd::Pmu { cpu, json, .. } => pmu::pmu(Some(&dev), cpu, None, json, &mut std::io::stdout()),
        Cmd::Stat(a) => match stat::stat(Some(&dev), &a, &mut std::io::stdout()) {
            Ok(code) => return exit_code(code),
            Err(e) => Err(e),
        },
        Cmd::Cr4 => show_cr4(&dev),
        Cmd::Exec { rdpmc: _, cmd } => exec_rdpmc(&dev, &cmd),
        Cmd::Evsel { .. } | Cmd::Man | Cmd::Completions { .. } | Cmd::Allowlist(_) => {
            unreachable!("handled above")
        }
    };
    exit_code_of(result)
}

/// The exit status of a command's outcome: 0, 1 (some ops failed), 2 (error).
fn exit_code_of(result: Result<bool, String>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("msrbatch: {e}");
            ExitCode::from(2)
        }
    }
}

/// msrbatch(1): the clap definitions rendered by clap_mangen, one section per
/// subcommand, plus the exit status and files.
fn man_page() -> ExitCode {
    use clap::CommandFactory;
    let mut out = Vec::new();
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone())
        .date("2026-11-21")
        .source(concat!("msrbatch ", env!("CARGO_PKG_VERSION")));
    let ok = man.render_title(&mut out).is_ok()
        && man.render_name_section(&mut out).is_ok()
        && man.render_synopsis_section(&mut out).is_ok()
        && man.render_description_section(&mut out).is_ok()
        && man.render_options_section(&mut out).is_ok();
    if !ok {
        return ExitCode::from(2);
    }
    out.extend_from_slice(b".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut sec = Vec::new();
        let sub_man =
            clap_mangen::Man::new(sub.clone().bin_name(format!("msrbatch {}", sub.get_name())));
        if sub_man.render_synopsis_section(&mut sec).is_err()
            || sub_man.render_options_section(&mut sec).is_err()
        {
            return ExitCode::from(2);
        }
        // Each command is a subsection: its synopsis, what it does, its options.
        let sec = String::from_utf8_lossy(&sec)
            .replace(".SH SYNOPSIS\n", "")
            .replace(".SH OPTIONS\n", "");
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        out.extend_from_slice(
            format!(".SS \"msrbatch {}\"\n{sec}.PP\n{about}\n", sub.get_name()).as_bytes(),
        );
    }
    out.extend_from_slice(
        b".SH \"EXIT STATUS\"\n0: every op succeeded. 1: the batch ran but some ops failed (see each op's status). \
2: nothing ran (bad script, device error, batch refused). rdmsr and wrmsr use msr-tools' codes \
(2: no such CPU, 4: the MSR access faulted, 127: usage).\n\
.SH FILES\n/dev/msrbatch\n.SH \"SEE ALSO\"\nmsrbatch(4), rdmsr(1), wrmsr(1), perf(1)\n",
    );
    match std::io::Write::write_all(&mut std::io::stdout(), &out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(2),
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// `msrbatch evsel`: encode a spec, or decode a number.
fn evsel(spec: &str) -> ExitCode {
    let decoded =
        msrtools::parse_c_number(spec).filter(|_| spec.starts_with(|c: char| c.is_ascii_digit()));
    let out = match decoded {
        Some(v) => pmu::evsel_decode(v).map(|s| {
            let name = pmu::event_name(v)
                .map(|n| format!("  # {n}"))
                .unwrap_or_default();
            format!("{s}{name}")
        }),
        None => pmu::evsel_encode(spec).map(|v| format!("{v:#x}")),
    };
    match out {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("msrbatch: evsel: {e}");
            ExitCode::from(2)
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
        }
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
            (
                result(
                    Op::Cpuid {
                        leaf: 0xa,
                        subleaf: 1,
                    },
                    Ok(Value::Cpuid {
                        eax: 1,
                        ebx: 2,
                        ecx: 3,
                        edx: 4,
                    }),
                ),
                "edx",
                Some(4),
            ),
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
            let text = json_result(7, 12, &r);
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
        let v: serde_json::Value = serde_json::from_str(&json_result(0, 1, &cases_pat())).unwrap();
        assert_eq!(v["name"], "IA32_PAT");
        assert_eq!(v["value_hex"], "0x7040600070406");
    }

    fn cases_pat() -> OpResult {
        result(Op::RdMsr { msr: 0x277 }, Ok(Value::U64(0x7040600070406)))
    }
}
