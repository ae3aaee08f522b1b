// SPDX-License-Identifier: GPL-2.0
//! `msrbatch`: run batch MSR scripts through /dev/msrbatch.

mod allowlist;
mod energy;
mod exec;
mod exit;
mod man;
mod msrtools;
mod output;
mod pmu;
mod sample;
mod stat;

use clap::{CommandFactory, Parser, Subcommand};
use exit::{Exit, Failure};
use msrbatch::number::{parse_duration, parse_u64};
use msrbatch::{refusal, script, Backend, Device};
use output::Format;
use std::io::Read;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "msrbatch",
    version,
    propagate_version = true,
    about = "Batched, per-CPU atomic MSR, PMC, TSC and CPUID access",
    long_about = "Batched, per-CPU atomic MSR, PMC, TSC and CPUID access through /dev/msrbatch. \
A script (msrbatch run) or a command becomes one ioctl; each CPU runs its ops in order with \
interrupts off, and every op has its own status. Needs the msrbatch module; without CAP_SYS_RAWIO, \
a descriptor may do what the allowlist allows (msrbatch allowlist show). Commands that write \
nothing open the device read-only. \
Scripts: man 5 msrbatch-script; the ioctl ABI and access without root: man 4 msrbatch.",
    after_long_help = man::epilogue()
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
        /// Run the script N times (N >= 1): with N > 1 the kernel validates
        /// it once (a prepared batch) and each run is one ioctl; the start
        /// spread is then not reported.
        #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_repeat)]
        repeat: u32,
        /// Pause between repetitions, with a unit: e.g. 100ms, 1s (default:
        /// none).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        interval: Option<u64>,
        /// Synchronised start, as the script statement sync-start.
        #[arg(long)]
        sync_start: bool,
        /// A timestamp (TSC) after every op, as the script statement
        /// timestamps.
        #[arg(long)]
        timestamps: bool,
        #[command(flatten)]
        restore: RestoreArg,
    },
    /// Sample a script that only reads: the kernel runs it on each of its
    /// CPUs every period (-i) into a ring; turbostat's table: per period a
    /// header, a summary row (CPU -) and a row per CPU, with Avg_MHz, Busy%,
    /// Bzy_MHz, TSC_MHz (and Pkg/Cor energy) where the script reads their
    /// MSRs, --add columns, and each op's value.
    #[command(
        long_about = "Sample a script that only reads (rdmsr, rdpmc, rdtsc, rdtscp, cpuid): the \
kernel runs each CPU's ops every period (-i) into a ring this command reads. As turbostat prints \
it: per period a header, a summary row (CPU '-': each derived column's mean over the CPUs, each \
--add delta column's sum) and one row per CPU in CPU order; a CPU that produced no sample in a \
period has a row of '-' (CSV and JSON: a 'missed' record), periods without any sample a line. \
Columns: CPU, Avg_MHz, Busy% and Bzy_MHz (IA32_APERF and IA32_MPERF), TSC_MHz (the TSC's rate \
measured against CLOCK_MONOTONIC; the time between two samples is their TSC ticks over it), Pkg_J \
and PkgWatt (Intel MSR_PKG_ENERGY_STATUS with MSR_RAPL_POWER_UNIT; AMD \
MSR_AMD_PKG_ENERGY_STATUS with MSR_AMD_RAPL_POWER_UNIT), Cor_J and CorWatt \
(MSR_AMD_CORE_ENERGY_STATUS), each where the script reads its sources; the --add columns; then \
each op's value, named after its MSR (MSR_0x.. without a name), TSC, TSCP, PMCn or CPUID_leaf.sub. \
--show and --hide pick columns. CPUs going online or offline and samples lost to a full ring are \
lines of their own (table: '#' lines). Ctrl-C stops sampling and prints the last period; a closed \
output pipe ends the command quietly. The script's batch flags are ignored."
    )]
    Sample(sample::SampleArgs),
    /// Measure how often the RAPL energy counters update: polls
    /// (read-until-changed ops) stamp each update with the TSC; prints the
    /// intervals' distribution per counter. Exit status 1 when no counter
    /// updates (e.g. under an emulated CPU without RAPL).
    Energy(energy::EnergyArgs),
    /// Read an MSR, with msr-tools' rdmsr options, output and exit statuses.
    Rdmsr(msrtools::RdmsrArgs),
    /// Write an MSR, with msr-tools' wrmsr options and exit statuses.
    Wrmsr(msrtools::WrmsrArgs),
    /// Decode the CPU's performance monitoring unit (CPUID leaves 0AH and
    /// 23H; AMD 80000001H and 80000022H; the original Pentium's CESR, CTR0
    /// and CTR1 on family 5), live or from a CPUID dump.
    Pmu {
        /// CPUs to ask, as a list: 0-3,5 (all: every online CPU).
        #[arg(short = 'C', long = "cpu", value_name = "CPUS", default_value = "0")]
        cpu: String,
        /// Decode every CPU of this CPUID dump (`cpuid -r` or AIDA64
        /// format) instead of asking the device.
        #[arg(long, value_name = "FILE")]
        cpuid_dump: Option<String>,
        /// One JSON object per CPU and line.
        #[arg(long)]
        json: bool,
    },
    /// Encode 'event=0x..,umask=0x..,usr,os,en' into an IA32_PERFEVTSEL
    /// value (an event named without flags, e.g. 'instructions', gets
    /// usr,os,en, as perf and libpfm encode it), or decode a value (a
    /// number) into its fields. With --pentium, the original Pentium's CESR:
    /// 'ctr0=EVENT:os:usr,ctr1=EVENT:usr:clocks:pc'.
    Evsel {
        /// A spec to encode, or a number to decode.
        spec: String,
        /// The Pentium's (P5) CESR (MSR 11H) instead of IA32_PERFEVTSEL: per
        /// counter an event of SDM Table A-19 (or event=N up to 0x3f) and
        /// the flags os (CPL 0-2), usr (CPL 3), clocks (duration), pc (pin
        /// on overflow). A number is decoded with both halves in words.
        #[arg(long)]
        pentium: bool,
    },
    /// Count events on a list of CPUs while CMD runs pinned to them, and
    /// print the counts as perf stat does (on standard error, or -o FILE).
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
    /// Run CMD with user-mode RDPMC granted to it (like taskset: its threads
    /// and children inherit it).
    Exec {
        /// Grant user-mode RDPMC (CR4.PCE) to CMD: every thread it has and
        /// creates and every process it starts, until CMD exits (nothing
        /// else). On a kernel that cannot pass a grant on (no
        /// sched_process_fork tracepoint), CMD's first thread only, with a
        /// warning.
        #[arg(long, required_unless_present = "rdpmc_thread")]
        rdpmc: bool,
        /// Grant it to CMD's first thread only (not to threads it creates or
        /// processes it starts).
        #[arg(long, conflicts_with = "rdpmc")]
        rdpmc_thread: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
}

/// `--restore`, for the commands that write MSRs.
#[derive(clap::Args, Debug)]
pub struct RestoreArg {
    /// Write every MSR the command writes back to its value before the
    /// command when the command ends, also when it is killed (restore on
    /// close).
    #[arg(long)]
    pub restore: bool,
}

impl RestoreArg {
    /// Turns on restore on close for `dev` if asked to; `fail` makes the
    /// command's failure from the error.
    pub fn apply<F>(&self, dev: &Device, fail: impl FnOnce(msrbatch::Error) -> F) -> Result<(), F> {
        if self.restore {
            dev.restore_on_close().map_err(fail)?;
        }
        Ok(())
    }
}

/// The name messages start with: msr-tools' own for its commands (whose
/// usage errors also get msr-tools' status), else "msrbatch". Found from the
/// command line even when clap refuses it.
fn prog(args: &[String]) -> &'static str {
    let sub = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_string));
    match sub.as_deref() {
        Some("rdmsr") => "rdmsr",
        Some("wrmsr") => "wrmsr",
        _ => "msrbatch",
    }
}

/// Whether a command opens the device for writing. Only one that writes
/// does: a group given a read-only node (mode 0640) can then read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    /// Write if `writes`, else read.
    pub fn writing(writes: bool) -> Self {
        if writes {
            Access::Write
        } else {
            Access::Read
        }
    }

    /// Opens `device` this way.
    pub fn open(self, device: &str) -> msrbatch::Result<Device> {
        match self {
            Access::Read => Device::open_path_read_only(device),
            Access::Write => Device::open_path(device),
        }
    }
}

/// A count of at least 1 (`--count`, `--repeat`): 0 is refused, not read
/// as 1 or as "for ever".
pub fn parse_count(s: &str) -> Result<u64, String> {
    match parse_u64(s) {
        Ok(0) => Err("must be at least 1".into()),
        r => r.map_err(|e| e.to_string()),
    }
}

/// `--repeat`: a count of at least 1 that fits in 32 bits.
fn parse_repeat(s: &str) -> Result<u32, String> {
    let n = parse_count(s)?;
    u32::try_from(n).map_err(|_| format!("'{s}' does not fit in 32 bits"))
}

fn open(device: &str, access: Access) -> Result<Device, Failure> {
    access.open(device).map_err(Failure::nothing_ran)
}

/// What `msrbatch run` was asked to do besides the script.
struct RunArgs<'a> {
    format: Format,
    repeat: u32,
    pause_ns: u64,
    sync_start: bool,
    timestamps: bool,
    restore: &'a RestoreArg,
}

/// Reads and parses script `file` (`-`: standard input).
fn read_script(file: &str) -> Result<script::Script, Failure> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| Failure::nothing_ran(format!("stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| Failure::nothing_ran(format!("{file}: {e}")))?
    };
    // What `cpu all` stands for (a script that uses it fails to parse if the
    // online CPUs cannot be read).
    let online = msrbatch::online_cpus().unwrap_or_default();
    script::parse(&text, &online).map_err(|e| Failure::nothing_ran(format!("{file}:{e}")))
}

/// A batch the kernel refused, naming the script line (from the script's
/// `origins`) of the op it blamed.
fn refused(origins: &[script::Origin], e: msrbatch::Error) -> Failure {
    let at = e
        .op_index()
        .and_then(|i| origins.get(i as usize))
        .map(|o| format!(" (script line {})", o.line))
        .unwrap_or_default();
    Failure::nothing_ran(format!("{e}{at}"))
}

/// A refusal the tool found before the ioctl (the kernel's limits, in
/// words), naming the script line of the op it blames.
fn refused_before(file: &str, origins: &[script::Origin], r: &refusal::Refusal) -> Failure {
    let line = r
        .index
        .and_then(|i| origins.get(i as usize))
        .map(|o| format!(":{}", o.line))
        .unwrap_or_default();
    Failure::nothing_ran(format!("{file}{line}: {}: {}", r.errno, r.text))
}

/// Every CPU of script `s` exists (where the possible CPUs can be read;
/// else the kernel checks).
fn check_cpus(file: &str, s: &script::Script) -> Result<(), Failure> {
    match msrbatch::possible_cpus() {
        Ok(possible) => refusal::check_cpus(&s.batch.cpu_ops(), &possible)
            .map_err(|r| refused_before(file, &s.origins, &r)),
        Err(_) => Ok(()),
    }
}

/// `msrbatch sample`: the script is read, parsed and checked (against the
/// sampler's limits too) before the device is opened; its batch flags are
/// cleared (a sampler has none).
fn sample_script(device: &str, a: &sample::SampleArgs) -> Result<Exit, Failure> {
    let mut s = read_script(&a.file)?;
    sample::apply_adds(&mut s, &a.add);
    sample::check_sampleable(&a.file, &s)?;
    a.check_columns(&s).map_err(Failure::nothing_ran)?;
    s.batch
        .stop_on_error(false)
        .sync_start(false)
        .timestamps(false);
    check_cpus(&a.file, &s)?;
    refusal::check_sampler(&s.batch.cpu_ops(), &a.config())
        .map_err(|r| refused_before(&a.file, &s.origins, &r))?;
    let dev = open(device, Access::Read)?;
    sample::sample(&dev, &s, a, |e| refused(&s.origins, e))
}

/// `msrbatch run`: the script is read, parsed and checked against the
/// kernel's limits before the device is opened. One run is one plain batch;
/// more are runs of one prepared batch.
fn run_script(device: &str, file: &str, a: &RunArgs<'_>) -> Result<Exit, Failure> {
    let mut s = read_script(file)?;
    if a.sync_start {
        s.batch.sync_start(true);
    }
    if a.timestamps {
        s.batch.timestamps(true);
    }
    check_cpus(file, &s)?;
    s.batch
        .check()
        .map_err(|r| refused_before(file, &s.origins, &r))?;
    let refused = |e| refused(&s.origins, e);
    let dev = open(
        device,
        Access::writing(s.batch.has_writes() || a.restore.restore),
    )?;
    a.restore.apply(&dev, Failure::nothing_ran)?;
    if a.format == Format::Csv {
        println!("{}", output::CSV_HEADER);
    }
    let repeat = a.repeat;
    let mut run = output::Run {
        iteration: 0,
        repeat: repeat > 1,
        timing: s.batch.syncs_start() || s.batch.has_timestamps(),
        start_spread: None,
    };
    let mut all_ok = true;
    let mut not_run = output::NotRun::default();
    if repeat == 1 {
        dev.run(&mut s.batch).map_err(refused)?;
        all_ok = s.batch.nr_failed() == 0;
        run.start_spread = Some(s.batch.start_spread());
        not_run.count(s.batch.results());
        output::print_results(a.format, &run, s.batch.results().zip(&s.origins));
        output::report_masked_writes(s.batch.results().map(|r| (r.op, r.value.is_ok())));
    } else {
        let prepared = dev.prepare(&s.batch).map_err(refused)?;
        for iteration in 0..repeat {
            if iteration > 0 && a.pause_ns > 0 {
                std::thread::sleep(std::time::Duration::from_nanos(a.pause_ns));
            }
            all_ok &= prepared.run().map_err(refused)? == 0;
            run.iteration = iteration;
            not_run.count(prepared.results());
            output::print_results(a.format, &run, prepared.results().zip(&s.origins));
        }
        output::report_masked_writes(prepared.results().map(|r| (r.op, r.value.is_ok())));
    }
    not_run.report();
    Ok(if all_ok {
        Exit::Success
    } else {
        Exit::OpsFailed
    })
}

fn info(device: &str) -> Result<Exit, Failure> {
    let i = open(device, Access::Read)?
        .info()
        .map_err(Failure::nothing_ran)?;
    let ops: Vec<String> = (1..64)
        .filter(|b| i.ops_supported & (1 << b) != 0)
        .map(|b| b.to_string())
        .collect();
    println!("ABI version:        {}", i.version);
    println!("max ops per batch:  {}", i.max_ops);
    println!("max delay per op:   {} ns", i.max_delay_ns);
    println!("max delay per CPU:  {} ns", i.max_cpu_delay_ns);
    println!("op codes:           {}", ops.join(" "));
    println!("max busy per CPU:   {} ns", i.max_cpu_busy_ns);
    println!("batch flags:        {:#x}", i.flags_supported);
    Ok(Exit::Success)
}

/// `msrbatch evsel`: decode a number, or encode a spec. A word that starts
/// with a digit is a number (in the one number grammar).
fn evsel(spec: &str, pentium: bool) -> Result<Exit, Failure> {
    let number = spec.starts_with(|c: char| c.is_ascii_digit());
    let out = if pentium && number {
        let v = parse_u64(spec).map_err(|e| Failure::nothing_ran(format!("evsel: {e}")))?;
        pmu::cesr_decode(v).map(|s| {
            let words = pmu::cesr_describe(v, true);
            format!("{s}\n  # {}", words.join("\n  # "))
        })
    } else if pentium {
        pmu::cesr_encode(spec).map(|v| format!("{v:#x}"))
    } else if number {
        let v = parse_u64(spec).map_err(|e| Failure::nothing_ran(format!("evsel: {e}")))?;
        msrbatch::pmu::evsel::decode(v).map(|s| {
            let name = pmu::event_name(v)
                .map(|n| format!("  # {n}"))
                .unwrap_or_default();
            format!("{s}{name}")
        })
    } else {
        pmu::evsel_encode_default(spec).map(|v| format!("{v:#x}"))
    };
    let s = out.map_err(|e| Failure::nothing_ran(format!("evsel: {}", e.what())))?;
    println!("{s}");
    Ok(Exit::Success)
}

/// The tool: one command, run to its end.
fn run(cli: Cli) -> Result<Exit, Failure> {
    let device = cli.device.as_str();
    match cli.cmd {
        Cmd::Info => info(device),
        Cmd::Run {
            file,
            format,
            json,
            csv,
            repeat,
            interval,
            sync_start,
            timestamps,
            restore,
        } => {
            let format = Format::chosen(format, json, csv);
            let a = RunArgs {
                format,
                repeat,
                pause_ns: interval.unwrap_or(0),
                sync_start,
                timestamps,
                restore: &restore,
            };
            run_script(device, &file, &a)
        }
        Cmd::Sample(a) => sample_script(device, &a),
        Cmd::Energy(a) => energy::energy(&open(device, Access::Read)?, &a),
        Cmd::Rdmsr(a) => msrtools::rdmsr(device, &a),
        Cmd::Wrmsr(a) => msrtools::wrmsr(device, &a),
        Cmd::Pmu {
            cpu,
            cpuid_dump,
            json,
        } => {
            let online = msrbatch::online_cpus().unwrap_or_default();
            let cpus = msrbatch::number::parse_cpu_list(&cpu, &online)
                .map_err(|e| Failure::nothing_ran(format!("-C {cpu}: {e}")))?;
            // A dump is decoded without the device.
            let dev = match cpuid_dump {
                Some(_) => None,
                None => Some(open(device, Access::Read)?),
            };
            let dev = dev.as_ref().map(|d| d as &dyn Backend);
            pmu::pmu(
                dev,
                &cpus,
                cpuid_dump.as_deref(),
                json,
                &mut std::io::stdout(),
            )
            .map_err(Failure::nothing_ran)?;
            Ok(Exit::Success)
        }
        Cmd::Evsel { spec, pentium } => evsel(&spec, pentium),
        Cmd::Stat(a) => {
            // A dry run of a CPUID dump needs no device.
            let dev = if a.offline() {
                None
            } else {
                Some(open(device, Access::Write)?)
            };
            if let (Some(d), true) = (&dev, a.restore_on_close()) {
                d.restore_on_close().map_err(|e| {
                    Failure::nothing_ran(format!("stat: {e} (--no-restore counts without it)"))
                })?;
            }
            let dev = dev.as_ref().map(|d| d as &dyn Backend);
            stat::stat(dev, &a, &mut std::io::stdout())
                .map(|code| Exit::Command(u8::try_from(code).unwrap_or(1)))
                .map_err(Failure::nothing_ran)
        }
        Cmd::Cr4 => exec::show_cr4(&open(device, Access::Read)?),
        Cmd::Exec {
            rdpmc: _,
            rdpmc_thread,
            cmd,
        } => exec::exec_rdpmc(&open(device, Access::Write)?, rdpmc_thread, &cmd),
        Cmd::Allowlist(a) => allowlist::run(&a)
            .map(|_| Exit::Success)
            .map_err(Failure::nothing_ran),
        Cmd::Man => {
            let page = man::render(&Cli::command(), "2026-11-21")
                .map_err(|e| Failure::nothing_ran(format!("man page: {e}")))?;
            std::io::Write::write_all(&mut std::io::stdout(), &page)
                .map_err(|e| Failure::nothing_ran(format!("stdout: {e}")))?;
            Ok(Exit::Success)
        }
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "msrbatch",
                &mut std::io::stdout(),
            );
            Ok(Exit::Success)
        }
    }
}

fn main() -> ExitCode {
    // A reader that goes away ends the tool quietly, as it ends C tools
    // (`msrbatch sample ... | head`): SIGPIPE's default action, not Rust's
    // EPIPE errors (and println!'s panic on them).
    // SAFETY: SIG_DFL installs no handler.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<String> = std::env::args().collect();
    let prog = prog(&args);
    let exit = match Cli::try_parse_from(&args) {
        Ok(cli) => run(cli).unwrap_or_else(|f| {
            eprintln!("{prog}: {}", f.msg);
            f.exit
        }),
        Err(e) => {
            let _ = e.print();
            if !e.use_stderr() {
                Exit::Success // --help, --version
            } else if prog == "msrbatch" {
                Exit::NothingRan
            } else {
                Exit::MsrToolsError
            }
        }
    };
    ExitCode::from(exit.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn which_commands_are_msr_tools() {
        for (line, want) in [
            ("msrbatch rdmsr -f 4:7 0x10", "rdmsr"),
            ("msrbatch --device /dev/x wrmsr", "wrmsr"),
            ("msrbatch --device=/dev/x rdmsr -Z", "rdmsr"),
            ("msrbatch run", "msrbatch"),
            ("msrbatch --device rdmsr run", "msrbatch"),
            ("msrbatch", "msrbatch"),
            ("msrbatch --bogus rdmsr", "msrbatch"),
        ] {
            assert_eq!(prog(&words(line)), want, "{line}");
        }
    }

    #[test]
    fn the_clap_definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
