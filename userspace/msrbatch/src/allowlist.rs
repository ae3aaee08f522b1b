// SPDX-License-Identifier: GPL-2.0
//! Allowlists: what a descriptor opened without `CAP_SYS_RAWIO` may do.
//!
//! Root loads an allowlist into the module through [`ALLOWLIST_PATH`] in
//! msr-safe's format (an MSR and its write mask per line, `#` comments; the
//! format is defined once, in the module's `rust/allowlist_text.rs`, which
//! this library includes). A descriptor opened without `CAP_SYS_RAWIO` gets
//! the list in force at open and keeps it: RDMSR of listed MSRs, WRMSR and
//! RMWMSR of listed MSRs with a non-zero write mask (only the bits in the mask
//! change), RDTSC, RDTSCP, CPUID and DELAY, and what the list's `allow` lines
//! add (RDPMC, RDCR4, PCE grants). See `Documentation/security.md`.
//!
//! ```no_run
//! use msrbatch::allowlist::{self, Allowlist};
//!
//! let text = std::fs::read_to_string("site.allowlist")?;
//! let list = Allowlist::parse(&text).map_err(|e| format!("site.allowlist: {e}"))?;
//! println!("{} MSRs", list.entries().len());
//! allowlist::load(allowlist::ALLOWLIST_PATH, text.as_bytes())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[path = "../../../rust/allowlist_text.rs"]
mod text;

pub use text::{Entry, ErrorKind, Extras, ParseError, MAX_TEXT};

use crate::{Error, Result};
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;

/// The allowlist's device node: written (by a process with `CAP_SYS_RAWIO`)
/// to load a list, read to see the list in force.
pub const ALLOWLIST_PATH: &str = "/dev/msrbatch_allowlist";

/// A parsed allowlist: its entries sorted by MSR, and its `allow` lines.
/// Two lists are equal when they allow the same (whatever their lines).
#[derive(Clone, Debug, Default)]
pub struct Allowlist {
    entries: Vec<Entry>,
    extras: Extras,
}

impl Allowlist {
    /// Parses allowlist text as the module does; the error names the line.
    pub fn parse(text: &str) -> std::result::Result<Self, ParseError> {
        let mut entries = Vec::new();
        let extras = text::parse(text.as_bytes(), |e| entries.push(e))?;
        text::sort_entries(&mut entries)?;
        Ok(Allowlist { entries, extras })
    }

    /// Whether the module takes this list, parsed from a text of `len`
    /// bytes: a text of more than 2 bytes needs an entry or an `allow` line
    /// (`ENOMSG` otherwise, as msr-safe: its lists as shipped comment every
    /// entry out).
    pub fn loadable(&self, len: usize) -> std::result::Result<(), ParseError> {
        text::check_entries(len, self.entries.len(), self.extras)
    }

    /// The entries, sorted by MSR.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The `allow` lines.
    pub fn extras(&self) -> Extras {
        self.extras
    }

    /// The write mask of `msr` (0: read only), or `None` if it is not listed.
    pub fn mask(&self, msr: u32) -> Option<u64> {
        self.entries
            .binary_search_by_key(&msr, |e| e.msr)
            .ok()
            .map(|i| self.entries[i].mask)
    }
}

impl PartialEq for Allowlist {
    fn eq(&self, other: &Self) -> bool {
        let rules = |l: &Self| {
            l.entries
                .iter()
                .map(|e| (e.msr, e.mask))
                .collect::<Vec<_>>()
        };
        self.extras == other.extras && rules(self) == rules(other)
    }
}

impl Eq for Allowlist {}

/// The canonical text, as the module prints the list in force.
impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        text::render(f, &self.entries, self.extras)
    }
}

/// Loads `text` as the module's allowlist, in one write to the node at
/// `path`. The module parses it as [`Allowlist::parse`] does and replaces
/// the list in force atomically, or changes nothing. Errors: `EPERM` (no
/// `CAP_SYS_RAWIO`), `EACCES` (the node's mode), `EINVAL`, `ERANGE`,
/// `ENOTUNIQ`, `ENOMSG`, `E2BIG` (the text; see [`ErrorKind`]).
pub fn load(path: impl AsRef<Path>, text: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let what = || format!("load the allowlist into {}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::from_io(what(), &e))?;
    // write_all() would write nothing for an empty text: send a blank line,
    // which loads the empty list (at most 2 bytes).
    let text = if text.is_empty() { b"\n" } else { text };
    f.write_all(text).map_err(|e| Error::from_io(what(), &e))
}

/// The text of the list in force, as the module prints it.
pub fn read(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    let mut s = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut s))
        .map_err(|e| Error::from_io(format!("read {}", path.display()), &e))?;
    Ok(s)
}

/// Why the module refused a batch (`MSRBATCH_IOC_BATCH`) with `errno`
/// (positive), when the allowlist or the write rules are the reason: for
/// messages. [`crate::Device::run`]'s errors carry it.
pub(crate) fn batch_refusal_reason(errno: i32) -> Option<&'static str> {
    match errno {
        libc::EACCES => Some(
            "this descriptor was opened without CAP_SYS_RAWIO and the allowlist it got at open \
             does not allow the op (an MSR not listed, or RDPMC or RDCR4 without an 'allow' line)",
        ),
        libc::EROFS => {
            Some("the allowlist lists this MSR with write mask 0: it may be read, not written")
        }
        libc::EPERM => Some(
            "writes are refused for every descriptor: the kernel is locked down or \
             msrbatch.allow_writes is off",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_lookup_and_display() {
        let l = Allowlist::parse("0x199 0xffff\n0x10 0 # TSC\nallow rdcr4\n").unwrap();
        assert_eq!(l.mask(0x10), Some(0));
        assert_eq!(l.mask(0x199), Some(0xffff));
        assert_eq!(l.mask(0x11), None);
        assert!(l.extras().has(Extras::RDCR4) && !l.extras().has(Extras::PCE));
        assert_eq!(Allowlist::parse(&l.to_string()), Ok(l));
        let e = Allowlist::parse("0x10 0\n0x10 1\n").unwrap_err();
        assert_eq!((e.line, e.kind), (2, ErrorKind::Duplicate(1)));
    }

    #[test]
    fn reasons() {
        for e in [libc::EACCES, libc::EROFS, libc::EPERM] {
            assert!(batch_refusal_reason(e).is_some());
        }
        assert_eq!(batch_refusal_reason(libc::EINVAL), None);
    }
}
