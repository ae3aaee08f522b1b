// SPDX-License-Identifier: GPL-2.0
//! The guest tests' KTAP output, as kselftest.h prints it for the C tests:
//! the header, one `ok N`/`not ok N` line per check, a skip with its reason,
//! and at the end the plan and kselftest's totals line.
//! tests/guest/run-all.sh nests it under its own KTAP and counts it.

/// Counts checks.
pub struct Tally {
    passed: u32,
    failed: u32,
    skipped: u32,
}

impl Tally {
    /// Prints the header.
    pub fn new() -> Self {
        println!("TAP version 13");
        Tally {
            passed: 0,
            failed: 0,
            skipped: 0,
        }
    }

    fn number(&self) -> u32 {
        self.passed + self.failed + self.skipped + 1
    }

    /// Prints and counts one check.
    pub fn check(&mut self, ok: bool, what: impl AsRef<str>) {
        let n = self.number();
        println!("{} {n} {}", if ok { "ok" } else { "not ok" }, what.as_ref());
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Prints and counts a check that could not run, and why.
    // Not every binary that shares this module skips.
    #[allow(dead_code)]
    pub fn skip(&mut self, what: &str, why: &str) {
        println!("ok {} {what} # SKIP {why}", self.number());
        self.skipped += 1;
    }

    /// Prints the plan and the totals and exits: 0 when nothing failed.
    pub fn finish(&self) -> ! {
        let n = self.number() - 1;
        println!("1..{n}");
        println!(
            "# Totals: pass:{} fail:{} xfail:0 xpass:0 skip:{} error:0",
            self.passed, self.failed, self.skipped
        );
        std::process::exit(i32::from(self.failed > 0));
    }
}
