// SPDX-License-Identifier: GPL-2.0
//! msrbatch(1): the clap definitions rendered by clap_mangen, one subsection
//! per command, then the number grammar, the exit statuses and the files.
//! The number grammar and the exit statuses come from the same text as the
//! end of `msrbatch --help` ([`epilogue`]).

use crate::exit::Exit;
use msrbatch::number::GRAMMAR;
use std::io::Write;

/// What stat's exit status is (it is CMD's).
const COMMAND_STATUS: &str = "stat exits with the status of CMD once CMD has run.";

/// The end of `msrbatch --help`: numbers and exit statuses.
pub fn epilogue() -> String {
    let mut s = format!("Numbers:\n  {GRAMMAR}\n\nExit status:\n");
    for (code, what) in Exit::TABLE {
        s.push_str(&format!("  {code:<3} {what}\n"));
    }
    s.push_str(&format!("  {COMMAND_STATUS}"));
    s
}

/// Escapes text for a roff text line.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}

/// Renders the man page of `cmd` (the tool's top-level command).
pub fn render(cmd: &clap::Command, date: &str) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone())
        .date(date)
        .source(concat!("msrbatch ", env!("CARGO_PKG_VERSION")));
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    out.write_all(b".SH COMMANDS\n")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut sec = Vec::new();
        let sub_man =
            clap_mangen::Man::new(sub.clone().bin_name(format!("msrbatch {}", sub.get_name())));
        sub_man.render_synopsis_section(&mut sec)?;
        sub_man.render_options_section(&mut sec)?;
        // Each command is a subsection: its synopsis, what it does, its options.
        let sec = String::from_utf8_lossy(&sec)
            .replace(".SH SYNOPSIS\n", "")
            .replace(".SH OPTIONS\n", "");
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        writeln!(
            out,
            ".SS \"msrbatch {}\"\n{sec}.PP\n{about}",
            sub.get_name()
        )?;
    }
    writeln!(out, ".SH NUMBERS\n{}", roff_text(GRAMMAR))?;
    out.write_all(b".SH \"EXIT STATUS\"\n")?;
    for (code, what) in Exit::TABLE {
        writeln!(out, ".TP\n{code}\n{}", roff_text(what))?;
    }
    writeln!(out, ".PP\n{}", roff_text(COMMAND_STATUS))?;
    out.write_all(
        b".SH FILES\n/dev/msrbatch\n.SH \"SEE ALSO\"\nmsrbatch-script(5), msrbatch(4), rdmsr(1), wrmsr(1), perf(1)\n",
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_escapes() {
        assert_eq!(roff_text("a-b \\ c"), "a\\-b \\e c");
        assert_eq!(roff_text(".x"), "\\&.x");
    }

    #[test]
    fn epilogue_lists_every_status() {
        let e = epilogue();
        for (code, what) in Exit::TABLE {
            assert!(e.contains(&format!("  {code:<3} {what}\n")), "{code}");
        }
        assert!(e.contains(GRAMMAR));
    }
}
