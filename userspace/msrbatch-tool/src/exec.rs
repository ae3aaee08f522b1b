// SPDX-License-Identifier: GPL-2.0
//! `msrbatch cr4` and `msrbatch exec --rdpmc`: user-mode RDPMC (CR4.PCE).

use crate::exit::{Exit, Failure};
use crate::output::print_table;
use msrbatch::{Batch, Device, Op, Value};

/// CR4.PCE: RDPMC allowed in user mode.
const CR4_PCE: u64 = 1 << 8;

/// `msrbatch exec --rdpmc[-thread] CMD...`: returns only if CMD could not
/// be run.
pub fn exec_rdpmc(dev: &Device, one_thread: bool, cmd: &[String]) -> Result<Exit, Failure> {
    use std::os::unix::process::CommandExt;
    // The error says why in words (the library's refusal table).
    let granted = match one_thread {
        true => dev.grant_rdpmc_thread(),
        false => dev.grant_rdpmc_program().or_else(|e| {
            // A kernel without tracepoints cannot pass a grant on to new
            // threads and processes: CMD's first thread still gets it.
            if e.errno() != msrbatch::Errno(libc::EOPNOTSUPP) {
                return Err(e);
            }
            dev.grant_rdpmc_thread()?;
            eprintln!(
                "msrbatch: warning: this kernel cannot pass the grant on to new threads and \
                 processes (it lacks the sched_process_fork tracepoint): only CMD's first thread has RDPMC"
            );
            Ok(())
        }),
    };
    granted.map_err(Failure::nothing_ran)?;
    // execve() keeps this thread, so the grant (tied to the thread, not to
    // the device) follows CMD, and with it to CMD's threads and children;
    // it ends when CMD's first thread exits. The device is close-on-exec:
    // CMD gets no descriptor that could write MSRs.
    let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    Err(Failure::nothing_ran(format!("{}: {err}", cmd[0])))
}

/// `msrbatch cr4`: CR4 and its PCE bit on every online CPU.
pub fn show_cr4(dev: &Device) -> Result<Exit, Failure> {
    let mut batch = Batch::new();
    for cpu in msrbatch::online_cpus().map_err(Failure::nothing_ran)? {
        batch.push(cpu, Op::RdCr4);
    }
    dev.run(&mut batch).map_err(Failure::nothing_ran)?;
    let rows: Vec<[String; 3]> = batch
        .results()
        .map(|r| match r.value {
            Ok(Value::U64(cr4)) => [
                r.cpu.to_string(),
                format!("{cr4:#010x}"),
                u8::from(cr4 & CR4_PCE != 0).to_string(),
            ],
            Ok(_) | Err(_) => [r.cpu.to_string(), "?".into(), format!("{:?}", r.value)],
        })
        .collect();
    print_table(&["cpu", "cr4", "pce"], &rows);
    Ok(Exit::of_batch(batch.nr_failed()))
}
