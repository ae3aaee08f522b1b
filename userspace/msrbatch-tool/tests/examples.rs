// SPDX-License-Identifier: GPL-2.0
//! Scripts users paste leave the machine as they found it: every script in
//! the README, Documentation/scripts.md and tests/guest/scripts/*.msr that
//! writes an MSR says, in the script, to run it with `--restore` (which has
//! the kernel write every MSR it wrote back when msrbatch exits).

use msrbatch::script;
use std::path::{Path, PathBuf};

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fenced code blocks of a Markdown text, each with its first line.
fn code_blocks(md: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some(b) => blocks.push(b),
                None => open = Some((n + 2, String::new())),
            }
        } else if let Some((_, text)) = open.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    blocks
}

/// The scripts users are shown: (where, text). A Markdown block is a script
/// if it parses as one.
fn shown_scripts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in ["README.md", "Documentation/scripts.md"] {
        let md = std::fs::read_to_string(top().join(doc)).unwrap();
        for (line, text) in code_blocks(&md) {
            if script::parse(&text, &[0, 1]).is_ok() {
                out.push((format!("{doc}:{line}"), text));
            }
        }
    }
    let dir = top().join("tests/guest/scripts");
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "msr") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

#[test]
fn scripts_that_write_say_to_restore() {
    let scripts = shown_scripts();
    assert!(
        scripts.iter().any(|(w, _)| w.starts_with("README.md")),
        "no script found in the README: {scripts:?}"
    );
    for (at, text) in scripts {
        let s = script::parse(&text, &[0, 1]).unwrap_or_else(|e| panic!("{at}: {e}"));
        if s.batch.has_writes() {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with('#') && l.contains("run --restore")),
                "{at}: a script that writes must say in a comment to run it with \
                 `msrbatch run --restore` (else its writes outlast it):\n{text}"
            );
        }
    }
}

#[test]
fn the_check_sees_writes() {
    let blocks = code_blocks("text\n```\ncpu all\nrmw IA32_TSC_AUX 15:8=0xab\n```\n");
    assert_eq!(blocks.len(), 1);
    let s = script::parse(&blocks[0].1, &[0, 1]).unwrap();
    assert!(s.batch.has_writes());
}
