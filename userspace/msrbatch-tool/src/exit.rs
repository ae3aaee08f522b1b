// SPDX-License-Identifier: GPL-2.0
//! How a run of the tool ends: every exit status, in one place. `main` maps
//! the result of the one `run` through [`Exit::code`]; the man page's EXIT
//! STATUS section is written from [`Exit::TABLE`].

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Everything succeeded.
    Success,
    /// The batch ran, but some ops failed (each op's status says which; for
    /// sample: an op faulted in some sample printed).
    OpsFailed,
    /// Nothing ran: a usage error, a bad script, the device could not be
    /// used, or the kernel refused the batch (for rdmsr/wrmsr: no such CPU).
    NothingRan,
    /// sample: the sampler started but could not go on.
    SamplerFailed,
    /// rdmsr/wrmsr: the MSR access faulted.
    Fault,
    /// rdmsr/wrmsr: a usage error, or another error (msr-tools' 127).
    MsrToolsError,
    /// stat: the command's own exit status.
    Command(u8),
}

impl Exit {
    /// The exit status of each outcome, as msrbatch(1) documents it.
    pub const TABLE: &[(u8, &str)] = &[
        (0, "success"),
        (1, "the batch ran but some ops failed (see each op's status; sample: in some sample printed)"),
        (2, "nothing ran: a usage error, a bad script, the device could not be opened or used, or the kernel refused the batch; for rdmsr and wrmsr (msr-tools' codes): no such CPU"),
        (3, "sample: sampling started but could not go on (the ring broke the ABI, waiting for it or writing the output failed)"),
        (4, "rdmsr, wrmsr: the MSR access faulted"),
        (127, "rdmsr, wrmsr: a usage error or any other error"),
    ];

    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::OpsFailed => 1,
            Exit::NothingRan => 2,
            Exit::SamplerFailed => 3,
            Exit::Fault => 4,
            Exit::MsrToolsError => 127,
            Exit::Command(c) => c,
        }
    }

    /// Success, or [`Exit::OpsFailed`] when some op of a batch failed.
    pub fn of_batch(nr_failed: u32) -> Self {
        if nr_failed == 0 {
            Exit::Success
        } else {
            Exit::OpsFailed
        }
    }
}

/// A command that failed: how, and what to tell the user.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub msg: String,
}

impl Failure {
    pub fn new(exit: Exit, msg: impl Into<String>) -> Self {
        Failure {
            exit,
            msg: msg.into(),
        }
    }

    /// Nothing ran (exit status 2).
    pub fn nothing_ran(msg: impl std::fmt::Display) -> Self {
        Failure::new(Exit::NothingRan, msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_documents_every_fixed_status() {
        let fixed = [
            Exit::Success,
            Exit::OpsFailed,
            Exit::NothingRan,
            Exit::SamplerFailed,
            Exit::Fault,
            Exit::MsrToolsError,
        ];
        let codes: Vec<u8> = fixed.iter().map(|e| e.code()).collect();
        let table: Vec<u8> = Exit::TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, table);
        assert_eq!(Exit::Command(42).code(), 42);
        assert_eq!(Exit::of_batch(0), Exit::Success);
        assert_eq!(Exit::of_batch(3), Exit::OpsFailed);
    }
}
