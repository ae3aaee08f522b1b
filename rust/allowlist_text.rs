// SPDX-License-Identifier: GPL-2.0

//! The allowlist text format: one definition, included by the module
//! (`rust/allowlist.rs`) and by the library
//! (`userspace/msrbatch/src/allowlist.rs`). `core` only, no allocation, so
//! both build it unchanged; the library's host tests test it.
//!
//! It is msr-safe's format, so site allowlists load unchanged:
//!
//! ```text
//! # MSR      Write mask         # Comment
//! 0x00000010 0x0000000000000000 # "IA32_TIME_STAMP_COUNTER": read only
//! 0x00000199 0x000000000000ffff # "IA32_PERF_CTL": bits 15:0 writable
//! ```
//!
//! - One entry per line: an MSR address and its write mask, separated by
//!   blanks. Numbers are written as C's `strtoull` with base 0 reads them
//!   (msr-safe parses them with `kstrtoull(s, 0, ...)`): `0x` or `0X`
//!   hexadecimal, a leading `0` octal, otherwise decimal; an optional `+`.
//! - Fields are separated by blanks as the kernel's `isspace()` reads them
//!   (msr-safe skips them with `skip_spaces()`). A `#` where a field would
//!   start begins a comment that runs to the end of the line; inside a field
//!   it is part of the field (`0xff#x` is not a number, as in msr-safe).
//!   Blank lines and comment lines are ignored; a NUL ends the text (msr-safe
//!   reads it as a C string); CRLF line ends are fine (`\r` is a blank).
//! - msrbatch adds one line form: `allow rdpmc`, `allow rdcr4` and `allow pce`
//!   let descriptors opened without `CAP_SYS_RAWIO` use the RDPMC op, the
//!   RDCR4 op and PCE grants ([`Extras`]).
//! - An MSR fits in 32 bits and is listed at most once; an entry's write
//!   mask is followed by something (a blank, a newline, a comment), so a
//!   list cut short never loses the last digits of its last mask (msr-safe's
//!   "premature EOF"); the whole text is at most [`MAX_TEXT`] bytes.
//! - A text of more than 2 bytes with no entry (nor `allow` line) does not
//!   load ([`check_entries`], msr-safe's `ENOMSG`): msr-safe ships its
//!   per-CPU-model lists with every entry commented out, and loading one
//!   unedited must not empty the list in force. At most 2 bytes load the
//!   empty list, which [`render`] prints as nothing.
//!
//! Differences from msr-safe's parser, both refusing texts msr-safe takes:
//! msr-safe reads a stream of whitespace-separated pairs, so it also takes
//! an entry split over two lines or two entries on one line (here `EINVAL`:
//! one entry per line, so a forgotten mask cannot shift every later pair and
//! give MSRs the next MSR's address as write mask); it takes an MSR above 32
//! bits, which no access can name (here `ERANGE`). And after an error in its
//! second pass (a duplicate MSR) msr-safe is left with an empty list, while
//! here nothing changes on any error.

// The module includes this file in a private module; the library re-exports it.
#![allow(unreachable_pub)]

use core::fmt;

#[path = "heapsort.rs"]
pub(crate) mod heapsort;

/// The largest allowlist text, in bytes (msr-safe's limit too).
pub const MAX_TEXT: usize = 128 * 1024;

/// One entry: an MSR, the bits of it that may be written, and the line it
/// came from (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// MSR address.
    pub msr: u32,
    /// Bits that may be written; 0: read only.
    pub mask: u64,
    /// Line in the text (0 for entries that were not parsed).
    pub line: u32,
}

/// What descriptors opened without `CAP_SYS_RAWIO` may use besides MSRs:
/// the `allow` lines, as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras(pub u8);

impl Extras {
    /// `allow rdpmc`: the RDPMC op.
    pub const RDPMC: u8 = 1 << 0;
    /// `allow rdcr4`: the RDCR4 op.
    pub const RDCR4: u8 = 1 << 1;
    /// `allow pce`: user-mode RDPMC grants (`MSRBATCH_IOC_PCE_GRANT`).
    pub const PCE: u8 = 1 << 2;
    /// Each `allow` word and its bit, in the order they are printed.
    pub const NAMES: [(&'static str, u8); 3] = [
        ("rdpmc", Self::RDPMC),
        ("rdcr4", Self::RDCR4),
        ("pce", Self::PCE),
    ];

    /// Whether `bit` (one of the constants) is allowed.
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// What is wrong with a line (or with the whole text, on line 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text is longer than [`MAX_TEXT`] (`E2BIG`).
    TooLong,
    /// A field is not a number in C's notation (`EINVAL`).
    BadNumber,
    /// A number does not fit in 64 bits, or an MSR in 32 (`ERANGE`).
    TooLarge,
    /// Neither `MSR WRITEMASK` nor `allow WHAT` (`EINVAL`).
    BadLine,
    /// `allow` with a word other than `rdpmc`, `rdcr4` or `pce` (`EINVAL`).
    UnknownAllow,
    /// The last line has an entry but no newline (`EINVAL`).
    Unterminated,
    /// The MSR was listed before, on the line given (`ENOTUNIQ`).
    Duplicate(u32),
    /// No entry in a text of more than 2 bytes (`ENOMSG`).
    NoEntry,
}

impl ErrorKind {
    /// The error in words.
    pub fn message(self) -> &'static str {
        match self {
            ErrorKind::TooLong => "the allowlist is longer than 128 KiB",
            ErrorKind::BadNumber => {
                "not a number (C notation: 0x hexadecimal, leading 0 octal, else decimal)"
            }
            ErrorKind::TooLarge => "number too large (an MSR has 32 bits, a write mask 64)",
            ErrorKind::BadLine => "want 'MSR WRITEMASK' or 'allow rdpmc|rdcr4|pce'",
            ErrorKind::UnknownAllow => "'allow' takes rdpmc, rdcr4 or pce",
            ErrorKind::Unterminated => {
                "the text ends right after the last write mask (was the list cut short?)"
            }
            ErrorKind::Duplicate(_) => "this MSR is listed twice",
            ErrorKind::NoEntry => {
                "no entry (every MSR commented out?); write at most 2 bytes to empty the list"
            }
        }
    }
}

/// An error and the line it is on (1-based; 0: the whole text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line.
    pub line: u32,
    /// What is wrong.
    pub kind: ErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line != 0 {
            write!(f, "line {}: ", self.line)?;
        }
        f.write_str(self.kind.message())?;
        if let ErrorKind::Duplicate(first) = self.kind {
            write!(f, " (first on line {first})")?;
        }
        Ok(())
    }
}

/// A number as `kstrtoull(s, 0, ...)` reads it.
fn parse_number(tok: &[u8]) -> Result<u64, ErrorKind> {
    let tok = tok.strip_prefix(b"+").unwrap_or(tok);
    let (radix, digits) = match tok {
        [b'0', b'x' | b'X', d, ..] if d.is_ascii_hexdigit() => (16, &tok[2..]),
        [b'0', ..] => (8, tok),
        _ => (10, tok),
    };
    if digits.is_empty() {
        return Err(ErrorKind::BadNumber);
    }
    let mut v: u64 = 0;
    for &c in digits {
        let d = match char::from(c).to_digit(radix) {
            Some(d) => u64::from(d),
            None => return Err(ErrorKind::BadNumber),
        };
        v = v
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(d))
            .ok_or(ErrorKind::TooLarge)?;
    }
    Ok(v)
}

/// Whitespace as the kernel's `isspace()` reads it (`lib/ctype.c`: tab, line
/// feed, vertical tab, form feed, carriage return, space and Latin-1's
/// no-break space 0xA0): what msr-safe's parser (`skip_spaces()`) skips.
fn is_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0xa0)
}

/// One line's fields up to its comment: a `#` starts a comment where a
/// field would start (as msr-safe reads it; inside a field it is part of the
/// field, which then is not a number). Each field with its end in the line.
fn fields(line: &[u8]) -> impl Iterator<Item = (&[u8], usize)> {
    let mut at = 0;
    core::iter::from_fn(move || {
        while at < line.len() && is_space(line[at]) {
            at += 1;
        }
        if at == line.len() || line[at] == b'#' {
            return None;
        }
        let start = at;
        while at < line.len() && !is_space(line[at]) {
            at += 1;
        }
        Some((&line[start..at], at))
    })
}

/// One line without its newline: its entry, if any, and whether its write
/// mask is the line's last byte.
fn parse_line(line: &[u8], extras: &mut Extras) -> Result<Option<(u32, u64, bool)>, ErrorKind> {
    let mut fields = fields(line);
    let ((a, _), (b, end)) = match (fields.next(), fields.next(), fields.next()) {
        (None, _, _) => return Ok(None),
        (Some(a), Some(b), None) => (a, b),
        _ => return Err(ErrorKind::BadLine),
    };
    if a == b"allow" {
        let bit = Extras::NAMES
            .iter()
            .find(|(name, _)| name.as_bytes() == b)
            .map(|&(_, bit)| bit)
            .ok_or(ErrorKind::UnknownAllow)?;
        extras.0 |= bit;
        return Ok(None);
    }
    if !a.first().is_some_and(|c| c.is_ascii_digit() || *c == b'+') {
        return Err(ErrorKind::BadLine);
    }
    let msr = u32::try_from(parse_number(a)?).map_err(|_| ErrorKind::TooLarge)?;
    Ok(Some((msr, parse_number(b)?, end == line.len())))
}

/// Parses `text`: calls `entry` with each entry in text order and returns the
/// `allow` lines. Duplicates are found by [`sort_entries`].
pub fn parse(text: &[u8], mut entry: impl FnMut(Entry)) -> Result<Extras, ParseError> {
    if text.len() > MAX_TEXT {
        return Err(ParseError {
            line: 0,
            kind: ErrorKind::TooLong,
        });
    }
    // msr-safe reads the text as a C string: a NUL ends it.
    let text = match text.iter().position(|&c| c == 0) {
        Some(n) => &text[..n],
        None => text,
    };
    let mut extras = Extras::default();
    let mut line = 0u32;
    let mut rest = text;
    while !rest.is_empty() {
        line += 1;
        let (this, next, last) = match rest.iter().position(|&c| c == b'\n') {
            Some(n) => (&rest[..n], &rest[n + 1..], false),
            None => (rest, &rest[rest.len()..], true),
        };
        rest = next;
        let err = |kind| ParseError { line, kind };
        if let Some((msr, mask, at_end)) = parse_line(this, &mut extras).map_err(err)? {
            // The text ends right after the mask: it may have been cut short.
            if last && at_end {
                return Err(err(ErrorKind::Unterminated));
            }
            entry(Entry { msr, mask, line });
        }
    }
    Ok(extras)
}

/// Whether a text of `len` bytes that parsed to `entries` entries and
/// `extras` may load: msr-safe refuses a text without an entry (`ENOMSG`),
/// such as its per-CPU-model lists as shipped (every entry commented out),
/// unless it has at most 2 bytes, which empties the list. An `allow` line
/// counts as an entry here (`/dev/msrbatch_allowlist`; msr-safe's node
/// counts MSRs only).
pub fn check_entries(len: usize, entries: usize, extras: Extras) -> Result<(), ParseError> {
    if len > 2 && entries == 0 && extras == Extras::default() {
        return Err(ParseError {
            line: 0,
            kind: ErrorKind::NoEntry,
        });
    }
    Ok(())
}

/// Sorts `entries` by MSR; an MSR listed twice is an error on its second line.
pub fn sort_entries(entries: &mut [Entry]) -> Result<(), ParseError> {
    heapsort::sort_by_key(entries, |e| (e.msr, e.line));
    match entries.windows(2).find(|w| w[0].msr == w[1].msr) {
        Some(w) => Err(ParseError {
            line: w[1].line,
            kind: ErrorKind::Duplicate(w[0].line),
        }),
        None => Ok(()),
    }
}

/// Writes the canonical text of a list (`entries` sorted): a header comment,
/// one `0xMSR 0xMASK` line per entry as msr-safe prints them, then the
/// `allow` lines; nothing for the empty list (as msr-safe prints it, and
/// what a write of at most 2 bytes loads). [`parse`] reads it back to the
/// same list.
pub fn render(w: &mut impl fmt::Write, entries: &[Entry], extras: Extras) -> fmt::Result {
    if entries.is_empty() && extras == Extras::default() {
        return Ok(());
    }
    writeln!(w, "# msrbatch allowlist: {} MSRs", entries.len())?;
    writeln!(w, "# MSR      Write mask")?;
    for e in entries {
        writeln!(w, "0x{:08X} 0x{:016X}", e.msr, e.mask)?;
    }
    for (name, bit) in Extras::NAMES {
        if extras.has(bit) {
            writeln!(w, "allow {name}")?;
        }
    }
    Ok(())
}

/// msr-safe's header line, which its `/dev/cpu/msr_allowlist` prints before
/// the first entry (`"%-10s %-18s\n"` of `#MSR` and `Write mask`).
#[allow(dead_code)] // The library prints no msr-safe text.
pub const MSR_SAFE_HEADER: &str = "#MSR       Write mask        \n";

/// Writes `entries` as msr-safe's `/dev/cpu/msr_allowlist` prints them:
/// nothing for the empty list, else [`MSR_SAFE_HEADER`] and one
/// `0x%08llX 0x%016llX` line per entry, in the order given (msr-safe's is
/// the text's: sort by [`Entry::line`] first).
#[allow(dead_code)] // The library prints no msr-safe text.
pub fn render_msr_safe(w: &mut impl fmt::Write, entries: &[Entry]) -> fmt::Result {
    if entries.is_empty() {
        return Ok(());
    }
    w.write_str(MSR_SAFE_HEADER)?;
    for e in entries {
        writeln!(w, "0x{:08X} 0x{:016X}", e.msr, e.mask)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (MSR, mask, line) of each entry, sorted.
    type Rows = Vec<(u32, u64, u32)>;

    fn entries(text: &str) -> Result<(Rows, Extras), ParseError> {
        let mut v = Vec::new();
        let extras = parse(text.as_bytes(), |e| v.push(e))?;
        sort_entries(&mut v)?;
        Ok((v.iter().map(|e| (e.msr, e.mask, e.line)).collect(), extras))
    }

    fn error(text: &str) -> ParseError {
        entries(text).expect_err(text)
    }

    #[test]
    fn msr_safe_lines() {
        let text = "# MSR # Write Mask # Comment\n\
                    0x00000199 0x000000000000ffff # \"SMSR_PERF_CTL\"\n\
                    \t0x00000010   0x0000000000000000 # \"SMSR_TIME_STAMP_COUNTER\"\r\n\
                    \n   # indented comment\n\
                    0x00000620 0x0000000000007F7F\n\
                    0X1AD 0xffffffffffffffff\x0b#vertical tab before the comment\n";
        let (e, extras) = entries(text).unwrap();
        assert_eq!(
            e,
            [
                (0x10, 0, 3),
                (0x199, 0xffff, 2),
                (0x1ad, u64::MAX, 7),
                (0x620, 0x7f7f, 6)
            ]
        );
        assert_eq!(extras, Extras(0));
    }

    #[test]
    fn numbers_as_kstrtoull_base_0() {
        let n = |s: &str| parse_number(s.as_bytes());
        assert_eq!(n("0x10"), Ok(16));
        assert_eq!(n("0XfF"), Ok(255));
        assert_eq!(n("010"), Ok(8));
        assert_eq!(n("0"), Ok(0));
        assert_eq!(n("+42"), Ok(42));
        assert_eq!(n("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(n("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(n("0x10000000000000000"), Err(ErrorKind::TooLarge));
        assert_eq!(n("18446744073709551616"), Err(ErrorKind::TooLarge));
        for bad in ["0x", "08", "0xg", "1a", "-1", "+", "++1", "0b1", "1_0", ""] {
            assert_eq!(n(bad), Err(ErrorKind::BadNumber), "{bad}");
        }
    }

    #[test]
    fn allow_lines() {
        let (e, extras) = entries("allow pce\nallow rdcr4 # comment\n0x10 0\n").unwrap();
        assert_eq!(e, [(0x10, 0, 3)]);
        assert!(extras.has(Extras::PCE) && extras.has(Extras::RDCR4) && !extras.has(Extras::RDPMC));
        assert_eq!(error("allow rdmsr\n").kind, ErrorKind::UnknownAllow);
        assert_eq!(error("allow\n").kind, ErrorKind::BadLine);
        assert_eq!(error("allow pce rdcr4\n").kind, ErrorKind::BadLine);
    }

    #[test]
    fn empty_lists() {
        for text in [
            "",
            "\n",
            "  \n\t\n",
            "# only\n# comments",
            "# x\n# 0x10 0xff\n",
        ] {
            assert_eq!(entries(text), Ok((Vec::new(), Extras(0))), "{text:?}");
        }
        // Loadable: at most 2 bytes, or an entry, or an allow line.
        let ok = |len, n, x| check_entries(len, n, Extras(x)).is_ok();
        assert!(ok(0, 0, 0) && ok(2, 0, 0) && ok(3, 1, 0) && ok(30, 0, Extras::PCE));
        let no = check_entries(3, 0, Extras(0)).unwrap_err();
        assert_eq!((no.line, no.kind), (0, ErrorKind::NoEntry));
    }

    /// Texts as msr-safe's parser (`parse_next_allowlist_entry()`: fields
    /// separated by the kernel's `isspace()`, a `#` where a field would start
    /// skips to the end of the line, a write mask must be followed by a
    /// byte, a NUL ends the text) reads them, which this parser read
    /// otherwise before.
    #[test]
    fn as_msr_safe_reads_them() {
        let rows = |text: &str| entries(text).map(|(e, _)| e);
        // The last line an uncommented entry with its comment, no newline
        // (a shipped list's last line, uncommented, in a file without a
        // final newline); or a blank after the mask.
        let last = "# MSR # Write Mask # Comment\n0x00000010 0x0000000000000000 # \"TSC\"";
        assert_eq!(rows(last), Ok(vec![(0x10, 0, 2)]));
        assert_eq!(rows("0x10 0\r"), Ok(vec![(0x10, 0, 1)]));
        assert_eq!(rows("0x10 0 "), Ok(vec![(0x10, 0, 1)]));
        // The kernel's isspace(): vertical tab and Latin-1's no-break space.
        assert_eq!(
            entries_bytes(b"\x0b0x10\xa00xff\x0b\n"),
            Ok(vec![(0x10, 0xff, 1)])
        );
        // A NUL ends the text: what follows is not read.
        assert_eq!(entries_bytes(b"0x10 0\n\0garbage"), Ok(vec![(0x10, 0, 1)]));
        assert_eq!(error_bytes(b"0x10 0xff\0\n").kind, ErrorKind::Unterminated);
        // A '#' inside a field is part of it: not a number.
        for text in ["0x10 0xff#comment\n", "0x10#c 0\n"] {
            assert_eq!(error(text).kind, ErrorKind::BadNumber, "{text:?}");
        }
        // Still refused: the text ends with the mask (cut short?).
        assert_eq!(error("0x10 0\n0x20 0xff").kind, ErrorKind::Unterminated);
    }

    fn entries_bytes(text: &[u8]) -> Result<Rows, ParseError> {
        let mut v = Vec::new();
        parse(text, |e| v.push(e))?;
        sort_entries(&mut v)?;
        Ok(v.iter().map(|e| (e.msr, e.mask, e.line)).collect())
    }

    fn error_bytes(text: &[u8]) -> ParseError {
        entries_bytes(text).expect_err("an error")
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("0x10\n", 1, ErrorKind::BadLine),
            ("0x10 0x0\n0x11 0x0 0x0\n", 2, ErrorKind::BadLine),
            ("# c\nIA32_PAT 0\n", 2, ErrorKind::BadLine),
            ("0x10 0xz\n", 1, ErrorKind::BadNumber),
            ("0x100000000 0\n", 1, ErrorKind::TooLarge),
            ("0x10 0x1ffffffffffffffff\n", 1, ErrorKind::TooLarge),
            ("0x10 0\n0x199 0xffff", 2, ErrorKind::Unterminated),
            ("0x10 0\n\n0x20 0\n0x10 0xff\n", 4, ErrorKind::Duplicate(1)),
        ];
        for (text, line, kind) in cases {
            assert_eq!(error(text), ParseError { line, kind }, "{text:?}");
        }
        // A last line with no newline is fine when it holds no entry.
        assert!(entries("0x10 0\n# end").is_ok());
        assert!(entries("0x10 0\nallow pce").is_ok());
        let big = "#".repeat(MAX_TEXT + 1);
        assert_eq!(
            error(&big),
            ParseError {
                line: 0,
                kind: ErrorKind::TooLong
            }
        );
        assert!(entries(&"#".repeat(MAX_TEXT)).is_ok());
        let e = error("0x10 0\n0x10 1\n");
        assert_eq!(
            e.to_string(),
            "line 2: this MSR is listed twice (first on line 1)"
        );
    }

    #[test]
    fn render_reads_back() {
        let text = "allow rdpmc\n0xc0000103 0xfffff000\n0x10 0\nallow pce\n";
        let (e, extras) = entries(text).unwrap();
        let list: Vec<Entry> = e
            .iter()
            .map(|&(msr, mask, line)| Entry { msr, mask, line })
            .collect();
        let mut out = String::new();
        render(&mut out, &list, extras).unwrap();
        assert_eq!(
            out,
            "# msrbatch allowlist: 2 MSRs\n# MSR      Write mask\n\
             0x00000010 0x0000000000000000\n0xC0000103 0x00000000FFFFF000\n\
             allow rdpmc\nallow pce\n"
        );
        let (again, extras2) = entries(&out).unwrap();
        let strip = |v: &[(u32, u64, u32)]| v.iter().map(|&(m, k, _)| (m, k)).collect::<Vec<_>>();
        assert_eq!((strip(&again), extras2), (strip(&e), extras));
        // The empty list prints nothing, which loads the empty list again.
        let mut out = String::new();
        render(&mut out, &[], Extras(0)).unwrap();
        assert_eq!(out, "");
        // msr-safe's print: its header, the entries in the order given.
        let mut out = String::new();
        render_msr_safe(&mut out, &[list[1], list[0]]).unwrap();
        assert_eq!(
            out,
            "#MSR       Write mask        \n\
             0xC0000103 0x00000000FFFFF000\n0x00000010 0x0000000000000000\n"
        );
        let mut out = String::new();
        render_msr_safe(&mut out, &[]).unwrap();
        assert_eq!(out, "");
    }
}
