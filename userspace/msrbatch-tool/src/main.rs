// SPDX-License-Identifier: GPL-2.0
//! `msrbatch`: run batch MSR scripts through /dev/msrbatch.

mod script;

use clap::{Parser, Subcommand};
use msrbatch::{msr_name, Device, Op, OpResult, Value};
use std::io::Read;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "msrbatch",
    version,
    about = "Batched, per-CPU atomic MSR, PMC, TSC and CPUID access"
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
    },
    /// Show CR4 and its PCE bit (user-mode RDPMC) on every online CPU.
    Cr4,
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
        _ => "",
    }
}

fn exec_rdpmc(dev: &Device, cmd: &[String]) -> Result<bool, String> {
    use std::os::unix::process::CommandExt;
    dev.grant_rdpmc()
        .map_err(|e| format!("{e}: {}", grant_hint(&e)))?;
    dev.keep_across_exec().map_err(|e| e.to_string())?;
    // execve() keeps this thread, so the grant (tied to the thread and to the
    // open device, which CMD inherits) follows CMD.
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

fn run_script(dev: &Device, file: &str) -> Result<bool, String> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?
    };
    let mut s = script::parse(&text, &online_cpus()).map_err(|e| format!("{file}:{e}"))?;
    dev.run(&mut s.batch).map_err(|e| {
        let at = e
            .op_index()
            .and_then(|i| s.origins.get(i as usize))
            .map(|o| format!(" (script line {})", o.line))
            .unwrap_or_default();
        format!("{e}{at}")
    })?;

    let rows: Vec<[String; 6]> = s
        .batch
        .results()
        .zip(&s.origins)
        .map(|(r, o)| {
            [
                o.line.to_string(),
                r.cpu.to_string(),
                r.op.mnemonic().to_string(),
                describe_reg(&r.op),
                describe_value(&r),
                match r.value {
                    Ok(_) => "ok".to_string(),
                    Err(e) => e.name(),
                },
            ]
        })
        .collect();
    print_table(&["line", "cpu", "op", "register", "value", "status"], &rows);
    Ok(s.batch.nr_failed() == 0)
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
        Cmd::Run { file } => run_script(&dev, &file),
        Cmd::Cr4 => show_cr4(&dev),
        Cmd::Exec { rdpmc: _, cmd } => exec_rdpmc(&dev, &cmd),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("msrbatch: {e}");
            ExitCode::from(2)
        }
    }
}
