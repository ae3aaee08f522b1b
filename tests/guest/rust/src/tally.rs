// SPDX-License-Identifier: GPL-2.0
//! The guest tests' tally: one `ok`/`not ok` line per check, and the closing
//! `N passed, N failed` line that run-all.sh reads.

/// Counts checks.
#[derive(Default)]
pub struct Tally {
    pub passed: u32,
    pub failed: u32,
}

impl Tally {
    /// Prints and counts one check.
    pub fn check(&mut self, ok: bool, what: impl AsRef<str>) {
        println!("{} - {}", if ok { "ok" } else { "not ok" }, what.as_ref());
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Prints the closing line and exits: 0 when nothing failed.
    pub fn finish(&self) -> ! {
        println!("{} passed, {} failed", self.passed, self.failed);
        std::process::exit(i32::from(self.failed > 0));
    }
}
