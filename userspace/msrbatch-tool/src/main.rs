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
