// SPDX-License-Identifier: GPL-2.0
//! `msrbatch rdmsr` / `msrbatch wrmsr`: msr-tools' options, output, messages
//! and exit statuses, with `-a` as one ioctl for all CPUs instead of one
//! pread per CPU. Every argument is checked while the command line is parsed,
//! before the device is opened.

use crate::exit::{Exit, Failure};
use crate::Access;
use clap::Args;
use msrbatch::number::{parse_bit_range, parse_u32, parse_u64};
use msrbatch::{msr::parse_msr, Batch, Device, Errno, Op, OpResult};
use std::io::Write;

/// Output radix, as msr-tools' `mo_*` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Radix {
    Hex,
    CapHex,
    Signed,
    Unsigned,
    Octal,
    Raw,
}

/// The radix options: as with msr-tools' getopt loop, the last one given wins.
const RADIX: [&str; 6] = ["hex", "cap_hex", "signed", "unsigned", "octal", "raw"];

/// `msrbatch rdmsr [options] regno`. As with getopt, an option may be given
/// more than once (the last one counts).
#[derive(Args, Debug)]
#[command(args_override_self = true)]
pub struct RdmsrArgs {
    /// Hexadecimal output (lower case).
    #[arg(short = 'x', long = "hexadecimal", overrides_with_all = RADIX)]
    hex: bool,
    /// Hexadecimal output (upper case); also --capital-hexadecimal.
    #[arg(short = 'X', long = "capital-hex", alias = "capital-hexadecimal", overrides_with_all = RADIX)]
    cap_hex: bool,
    /// Signed decimal output; also --signed-decimal.
    #[arg(short = 'd', long = "decimal", alias = "signed-decimal", overrides_with_all = RADIX)]
    signed: bool,
    /// Unsigned decimal output; also --unsigned-decimal.
    #[arg(short = 'u', long = "unsigned", alias = "unsigned-decimal", overrides_with_all = RADIX)]
    unsigned: bool,
    /// Octal output.
    #[arg(short = 'o', long = "octal", overrides_with_all = RADIX)]
    octal: bool,
    /// Format output as a C language constant.
    #[arg(short = 'c', long = "c-language")]
    c_language: bool,
    /// Output leading zeroes; also --zero-fill.
    #[arg(short = '0', long = "zero-pad", alias = "zero-fill")]
    zero_pad: bool,
    /// Raw binary output.
    #[arg(short = 'r', long = "raw", overrides_with_all = RADIX)]
    raw: bool,
    #[command(flatten)]
    cpus: CpuArgs,
    /// Output bits [h:l] only.
    #[arg(short = 'f', long = "bitfield", value_name = "H:L", value_parser = parse_bit_range)]
    bitfield: Option<(u32, u32)>,
    /// The MSR (number or name).
    #[arg(value_parser = parse_msr)]
    regno: u32,
}

/// `msrbatch wrmsr [options] regno value...`.
#[derive(Args, Debug)]
#[command(args_override_self = true)]
pub struct WrmsrArgs {
    #[command(flatten)]
    cpus: CpuArgs,
    /// The MSR (number or name).
    #[arg(value_parser = parse_msr)]
    regno: u32,
    /// Values, written in order.
    #[arg(required = true, value_parser = parse_u64)]
    values: Vec<u64>,
    #[command(flatten)]
    restore: crate::RestoreArg,
}

/// `-a` and `-p`: the last one given wins, as in msr-tools.
#[derive(Args, Debug)]
pub struct CpuArgs {
    /// All processors (one ioctl).
    #[arg(short = 'a', long = "all", overrides_with = "processor")]
    all: bool,
    /// Select processor number; also --cpu.
    #[arg(short = 'p', long = "processor", alias = "cpu", value_name = "CPU",
          default_value_t = 0, value_parser = parse_u32, overrides_with = "all")]
    processor: u32,
}

impl CpuArgs {
    fn cpus(&self) -> Result<Vec<u32>, Failure> {
        if self.all {
            msrbatch::online_cpus().map_err(|e| Failure::new(Exit::MsrToolsError, e.to_string()))
        } else {
            Ok(vec![self.processor])
        }
    }
}

/// Digits of the largest unsigned value of `bits` bits (msr-tools' table).
fn dec_digits(bits: u32) -> usize {
    if bits >= 64 {
        return 20;
    }
    ((1u64 << bits) - 1).max(1).to_string().len()
}

/// Formats one value exactly as msr-tools' rdmsr does (without the newline).
/// `None` for raw output, which is written as bytes.
pub fn format(radix: Radix, c: bool, fill: bool, bits: u32, data: u64) -> Option<String> {
    let mut data = data;
    if radix == Radix::Signed && bits > 0 && data & (1u64 << (bits - 1)) != 0 {
        // msr-tools' sign handling, kept bit for bit.
        data &= !(1u64 << (bits - 1));
        data = data.wrapping_neg();
    }
    let hexw = (bits as usize).div_ceil(4);
    let octw = (bits as usize).div_ceil(3);
    Some(match (radix, fill, c) {
        (Radix::Raw, _, false) => return None,
        (Radix::Raw, _, true) => {
            let bytes: Vec<String> = data
                .to_le_bytes()
                .iter()
                .map(|b| format!("0x{b:02x}"))
                .collect();
            format!("{{{}}}", bytes.join(","))
        }
        (Radix::Hex, false, false) => format!("{data:x}"),
        (Radix::CapHex, false, false) => format!("{data:X}"),
        (Radix::Hex, false, true) => format!("0x{data:x}"),
        (Radix::CapHex, false, true) => format!("0x{data:X}"),
        (Radix::Hex, true, false) => format!("{data:0hexw$x}"),
        (Radix::CapHex, true, false) => format!("{data:0hexw$X}"),
        (Radix::Hex, true, true) => format!("0x{data:0hexw$x}"),
        (Radix::CapHex, true, true) => format!("0x{data:0hexw$X}"),
        (Radix::Signed, true, false) => {
            let w = dec_digits(bits - 1) + 1;
            format!("{:0w$}", data as i64)
        }
        (Radix::Signed, _, _) => format!("{}", data as i64),
        (Radix::Unsigned, false, false) => format!("{data}"),
        (Radix::Unsigned, true, false) => format!("{data:0w$}", w = dec_digits(bits)),
        (Radix::Unsigned, _, true) => format!("{data}U"),
        (Radix::Octal, false, false) => format!("{data:o}"),
        (Radix::Octal, false, true) => format!("0{data:o}"),
        (Radix::Octal, true, false) => format!("{data:0octw$o}"),
        (Radix::Octal, true, true) => format!("0{data:0octw$o}"),
    })
}

impl RdmsrArgs {
    fn radix(&self) -> Radix {
        // At most one is set: each overrides the others.
        [
            (self.raw, Radix::Raw),
            (self.octal, Radix::Octal),
            (self.unsigned, Radix::Unsigned),
            (self.signed, Radix::Signed),
            (self.cap_hex, Radix::CapHex),
        ]
        .into_iter()
        .find_map(|(set, r)| set.then_some(r))
        .unwrap_or(Radix::Hex)
    }
}

/// A batch the kernel refused (nothing ran), with msr-tools' message and
/// status: no such CPU is 2, anything else 127. `cpu` is the CPU of the op
/// the kernel blamed, or the one asked for.
fn refused(errno: Errno, cpu: u32, what: &str) -> Failure {
    if matches!(errno.0, libc::ENODEV | libc::ENXIO) {
        Failure::new(Exit::NothingRan, format!("No CPU {cpu}"))
    } else {
        Failure::new(Exit::MsrToolsError, what.to_string())
    }
}

/// Runs `batch`; a refusal names the CPU of the op the kernel blamed.
fn run(dev: &Device, batch: &mut Batch, cpus: &[u32]) -> Result<(), Failure> {
    dev.run(batch).map_err(|e| {
        let cpu = e
            .op_index()
            .and_then(|i| batch.result(i as usize))
            .map_or(cpus[0], |r| r.cpu);
        refused(e.errno(), cpu, &e.to_string())
    })
}

/// Prints rdmsr's results as msr-tools does, stopping at the first failed
/// read (after the values of the CPUs before it, as msr-tools' `-a` does).
fn print_reads(
    a: &RdmsrArgs,
    results: impl Iterator<Item = OpResult>,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let (hi, lo) = a.bitfield.unwrap_or((63, 0));
    let bits = hi - lo + 1;
    let write_err = |e: std::io::Error| Failure::new(Exit::MsrToolsError, format!("write: {e}"));
    for r in results {
        let v = r.value.map_err(|e| match e.0 {
            libc::EIO => Failure::new(
                Exit::Fault,
                format!("CPU {} cannot read MSR 0x{:08x}", r.cpu, a.regno),
            ),
            _ => Failure::new(
                Exit::MsrToolsError,
                format!("CPU {}: MSR 0x{:08x}: {e}", r.cpu, a.regno),
            ),
        })?;
        let mut data = v.as_u64().unwrap_or(0);
        if bits < 64 {
            data = (data >> lo) & ((1u64 << bits) - 1);
        }
        match format(a.radix(), a.c_language, a.zero_pad, bits, data) {
            Some(s) => writeln!(out, "{s}"),
            None => out.write_all(&data.to_le_bytes()),
        }
        .map_err(write_err)?;
    }
    out.flush().map_err(write_err)
}

/// Checks wrmsr's results: the first failed write decides the status.
fn check_writes(reg: u32, results: impl Iterator<Item = OpResult>) -> Result<(), Failure> {
    for r in results {
        let (Err(e), Op::WrMsr { value, .. }) = (r.value, r.op) else {
            continue;
        };
        return Err(match e.0 {
            libc::EIO => Failure::new(
                Exit::Fault,
                format!("CPU {} cannot set MSR 0x{reg:08x} to 0x{value:016x}", r.cpu),
            ),
            _ => Failure::new(
                Exit::MsrToolsError,
                format!("CPU {}: MSR 0x{reg:08x}: {e}", r.cpu),
            ),
        });
    }
    Ok(())
}

/// Opens the device as msr-tools' open (rdmsr read-only, wrmsr for
/// writing): a failure is status 127.
fn open(device: &str, access: Access) -> Result<Device, Failure> {
    access
        .open(device)
        .map_err(|e| Failure::new(Exit::MsrToolsError, e.to_string()))
}

/// `msrbatch rdmsr`.
pub fn rdmsr(device: &str, a: &RdmsrArgs) -> Result<Exit, Failure> {
    let cpus = a.cpus.cpus()?;
    let dev = open(device, Access::Read)?;
    let mut batch = Batch::new();
    for &cpu in &cpus {
        batch.push(cpu, Op::RdMsr { msr: a.regno });
    }
    run(&dev, &mut batch, &cpus)?;
    print_reads(a, batch.results(), &mut std::io::stdout().lock())?;
    Ok(Exit::Success)
}

/// `msrbatch wrmsr`: each CPU writes the values in order and stops at its
/// first failure.
pub fn wrmsr(device: &str, a: &WrmsrArgs) -> Result<Exit, Failure> {
    let cpus = a.cpus.cpus()?;
    let dev = open(device, Access::Write)?;
    a.restore
        .apply(&dev, |e| Failure::new(Exit::MsrToolsError, e.to_string()))?;
    let mut batch = Batch::new();
    batch.stop_on_error(true);
    for &cpu in &cpus {
        for &value in &a.values {
            batch.push(
                cpu,
                Op::WrMsr {
                    msr: a.regno,
                    value,
                },
            );
        }
    }
    run(&dev, &mut batch, &cpus)?;
    crate::output::report_masked_writes(batch.results().map(|r| (r.op, r.value.is_ok())));
    check_writes(a.regno, batch.results())?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use msrbatch::Value;

    #[derive(Parser)]
    struct Rd {
        #[command(flatten)]
        a: RdmsrArgs,
    }

    fn rd(args: &[&str]) -> Result<RdmsrArgs, clap::Error> {
        Rd::try_parse_from(std::iter::once("rdmsr").chain(args.iter().copied())).map(|r| r.a)
    }

    // Expected strings are what msr-tools' printf patterns produce.
    #[test]
    fn formats_like_msr_tools() {
        let v = 0x0007_0406_0007_0406u64;
        // (radix, C syntax, zero-fill, bits, value, msr-tools' text)
        let cases = [
            (Radix::Hex, false, false, 64, v, "7040600070406"),
            (Radix::Hex, false, true, 64, v, "0007040600070406"),
            (Radix::Hex, true, false, 64, v, "0x7040600070406"),
            (Radix::Hex, true, true, 64, v, "0x0007040600070406"),
            (Radix::CapHex, false, false, 64, 0xabc, "ABC"),
            (Radix::Hex, false, true, 12, 0xa, "00a"),
            (Radix::Unsigned, false, false, 64, 1234, "1234"),
            (
                Radix::Unsigned,
                false,
                true,
                64,
                1234,
                "00000000000000001234",
            ),
            (Radix::Unsigned, false, true, 8, 7, "007"),
            (Radix::Unsigned, true, false, 64, 7, "7U"),
            (Radix::Signed, false, false, 8, 0x80, "0"),
            (Radix::Signed, false, false, 8, 0xff, "-127"),
            (Radix::Signed, false, true, 8, 5, "0005"),
            (Radix::Octal, false, false, 64, 8, "10"),
            (Radix::Octal, true, false, 64, 8, "010"),
            (Radix::Octal, false, true, 6, 8, "10"),
            (
                Radix::Raw,
                true,
                false,
                64,
                1,
                "{0x01,0x00,0x00,0x00,0x00,0x00,0x00,0x00}",
            ),
        ];
        for (radix, c, fill, bits, value, want) in cases {
            assert_eq!(
                format(radix, c, fill, bits, value).as_deref(),
                Some(want),
                "{radix:?} c={c} fill={fill} bits={bits} value={value:#x}"
            );
        }
        assert_eq!(format(Radix::Raw, false, false, 64, 1), None);
        assert_eq!(dec_digits(64), 20);
        assert_eq!(dec_digits(1), 1);
        assert_eq!(dec_digits(4), 2);
    }

    #[test]
    fn msr_tools_long_options() {
        let a = rd(&[
            "--capital-hexadecimal",
            "--zero-fill",
            "--cpu",
            "3",
            "--c-language",
            "--bitfield",
            "7:4",
            "IA32_PAT",
        ])
        .unwrap();
        assert_eq!(
            (
                a.radix(),
                a.zero_pad,
                a.c_language,
                a.cpus.processor,
                a.cpus.all
            ),
            (Radix::CapHex, true, true, 3, false)
        );
        assert_eq!((a.bitfield, a.regno), (Some((7, 4)), 0x277));
        for (opt, radix) in [
            ("--signed-decimal", Radix::Signed),
            ("--decimal", Radix::Signed),
            ("--unsigned-decimal", Radix::Unsigned),
            ("--unsigned", Radix::Unsigned),
            ("--hexadecimal", Radix::Hex),
            ("--capital-hex", Radix::CapHex),
            ("--octal", Radix::Octal),
            ("--raw", Radix::Raw),
        ] {
            assert_eq!(rd(&[opt, "0x10"]).unwrap().radix(), radix, "{opt}");
        }
        assert!(
            rd(&["--zero-pad", "--processor=2", "--all", "0x10"])
                .unwrap()
                .cpus
                .all
        );
    }

    #[test]
    fn the_last_radix_and_cpu_option_wins() {
        assert_eq!(rd(&["-d", "-x", "0x10"]).unwrap().radix(), Radix::Hex);
        assert_eq!(rd(&["-x", "-d", "0x10"]).unwrap().radix(), Radix::Signed);
        assert_eq!(
            rd(&["-r", "-o", "-X", "0x10"]).unwrap().radix(),
            Radix::CapHex
        );
        assert_eq!(
            rd(&["-X", "-u", "-c", "0x10"]).unwrap().radix(),
            Radix::Unsigned
        );
        let a = rd(&["-a", "-p", "2", "0x10"]).unwrap();
        assert_eq!((a.cpus.all, a.cpus.processor), (false, 2));
        assert!(rd(&["-p", "2", "-a", "0x10"]).unwrap().cpus.all);
        assert_eq!(
            rd(&["-p", "2", "-p", "3", "-0", "-0", "0x10"])
                .unwrap()
                .cpus
                .processor,
            3
        );
    }

    #[test]
    fn usage_errors_are_found_while_parsing() {
        for args in [
            &["-f", "4:7", "0x10"][..],
            &["-f", "64:0", "0x10"],
            &["-f", "7", "0x10"],
            &["-p", "x", "0x10"],
            &["-p", "010", "0x10"],
            &["NOPE"],
            &["010"],
            &["0x1_0000_0000"],
            &[],
            &["0x10", "0x20"],
            &["-Z", "0x10"],
        ] {
            assert!(rd(args).is_err(), "{args:?}");
        }
        assert_eq!(rd(&["-p", "0x1", "631"]).unwrap().cpus.processor, 1);
    }

    fn res(cpu: u32, op: Op, value: Result<Value, Errno>) -> OpResult {
        OpResult {
            index: 0,
            cpu,
            op,
            value,
            tsc: None,
        }
    }

    #[test]
    fn read_results_print_until_the_first_fault() {
        let a = rd(&["-a", "-0", "0x10"]).unwrap();
        let rd_op = Op::RdMsr { msr: 0x10 };
        let mut out = Vec::new();
        let results = [
            res(0, rd_op, Ok(Value::U64(0x77))),
            res(1, rd_op, Err(Errno(libc::EIO))),
            res(2, rd_op, Ok(Value::U64(1))),
        ];
        let f = print_reads(&a, results.into_iter(), &mut out).unwrap_err();
        assert_eq!(out, b"0000000000000077\n");
        assert_eq!(
            (f.exit, f.msg.as_str()),
            (Exit::Fault, "CPU 1 cannot read MSR 0x00000010")
        );
        let f = print_reads(
            &a,
            [res(3, rd_op, Err(Errno(libc::ECANCELED)))].into_iter(),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(f.exit, Exit::MsrToolsError);
        assert!(print_reads(
            &a,
            [res(0, rd_op, Ok(Value::U64(5)))].into_iter(),
            &mut Vec::new()
        )
        .is_ok());
    }

    #[test]
    fn write_results_name_the_failed_cpu() {
        let wr = |value| Op::WrMsr { msr: 0x10, value };
        let results = [
            res(0, wr(1), Ok(Value::None)),
            res(2, wr(5), Err(Errno(libc::EIO))),
            res(2, wr(6), Err(Errno(libc::ECANCELED))),
        ];
        let f = check_writes(0x10, results.into_iter()).unwrap_err();
        assert_eq!(
            (f.exit, f.msg.as_str()),
            (
                Exit::Fault,
                "CPU 2 cannot set MSR 0x00000010 to 0x0000000000000005"
            )
        );
        assert!(check_writes(0x10, [res(0, wr(1), Ok(Value::None))].into_iter()).is_ok());
    }

    #[test]
    fn refusals_name_the_cpu() {
        let f = refused(Errno(libc::ENXIO), 3, "MSRBATCH_IOC_BATCH: ENXIO");
        assert_eq!((f.exit, f.msg.as_str()), (Exit::NothingRan, "No CPU 3"));
        assert_eq!(refused(Errno(libc::ENODEV), 4095, "").msg, "No CPU 4095");
        assert_eq!(
            refused(Errno(libc::EPERM), 0, "EPERM").exit,
            Exit::MsrToolsError
        );
    }
}
