// SPDX-License-Identifier: GPL-2.0
//! `msrbatch allowlist load FILE` and `msrbatch allowlist show`.

use clap::{Args, Subcommand};
use msrbatch::allowlist::{self, Allowlist, Extras};
use std::io::Read;

/// Options of `msrbatch allowlist`.
#[derive(Args)]
pub struct AllowlistArgs {
    /// The allowlist's device node.
    #[arg(long, global = true, value_name = "PATH", default_value = allowlist::ALLOWLIST_PATH)]
    node: String,
    #[command(subcommand)]
    cmd: AllowlistCmd,
}

#[derive(Subcommand)]
enum AllowlistCmd {
    /// Check FILE (msr-safe's format: 'MSR WRITEMASK' per line, # comments)
    /// and make it the allowlist in force, atomically. Needs CAP_SYS_RAWIO.
    /// Descriptors opened before keep the list they had.
    Load {
        /// Allowlist file, or - for standard input.
        file: String,
    },
    /// Print the allowlist in force (the module's canonical text).
    Show,
}

/// What to do about an errno from the allowlist's node, when loading
/// (`load`) or reading the list.
fn hint(e: &msrbatch::Error, load: bool) -> &'static str {
    match e.errno().0 {
        libc::EPERM => ": loading an allowlist needs CAP_SYS_RAWIO",
        libc::EACCES if load => {
            ": loading an allowlist needs root (CAP_SYS_RAWIO); the msrbatch udev rule lets \
             the group read the list, never write it"
        }
        libc::EACCES => {
            ": the node's mode does not let you read it (the msrbatch udev rule \
             gives group msrbatch read access: are you in the group?)"
        }
        libc::ENOENT => ": is the msrbatch module loaded?",
        _ => "",
    }
}

/// One line about a list: how many MSRs, how many writable, what it allows.
fn summary(list: &Allowlist) -> String {
    let writable = list.entries().iter().filter(|e| e.mask != 0).count();
    let allows: Vec<&str> = Extras::NAMES
        .iter()
        .filter(|(_, bit)| list.extras().has(*bit))
        .map(|(name, _)| *name)
        .collect();
    let mut s = format!(
        "{} MSRs, {writable} with writable bits",
        list.entries().len()
    );
    if !allows.is_empty() {
        s += &format!("; allows {}", allows.join(", "));
    }
    s
}

fn load(node: &str, file: &str) -> Result<bool, String> {
    let mut text = String::new();
    if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    }
    .map_err(|e| format!("{file}: {e}"))?;
    // The module would refuse it too, with an errno only: say where here.
    let list = Allowlist::parse(&text).map_err(|e| format!("{file}: {e}"))?;
    list.loadable(text.len())
        .map_err(|e| format!("{file}: {e}"))?;
    allowlist::load(node, text.as_bytes()).map_err(|e| format!("{e}{}", hint(&e, true)))?;
    println!("{file}: loaded: {}", summary(&list));
    Ok(true)
}

fn show(node: &str) -> Result<bool, String> {
    let text = allowlist::read(node).map_err(|e| format!("{e}{}", hint(&e, false)))?;
    print!("{text}");
    Ok(true)
}

/// Runs `msrbatch allowlist`: Ok(true) on success.
pub fn run(a: &AllowlistArgs) -> Result<bool, String> {
    match &a.cmd {
        AllowlistCmd::Load { file } => load(&a.node, file),
        AllowlistCmd::Show => show(&a.node),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_and_allows() {
        let l = Allowlist::parse("0x10 0\n0x199 0xffff\nallow pce\nallow rdpmc\n").unwrap();
        assert_eq!(
            summary(&l),
            "2 MSRs, 1 with writable bits; allows rdpmc, pce"
        );
        assert_eq!(
            summary(&Allowlist::default()),
            "0 MSRs, 0 with writable bits"
        );
    }

    #[test]
    fn a_bad_file_is_refused_before_the_node_is_touched() {
        let dir = std::env::temp_dir().join(format!("msrbatch-al-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad");
        std::fs::write(&file, "0x10 0\n0x10 0xff\n").unwrap();
        // The node does not exist: a load that reached it would say so.
        let node = dir.join("node");
        let err = load(node.to_str().unwrap(), file.to_str().unwrap()).unwrap_err();
        assert!(
            err.ends_with("line 2: this MSR is listed twice (first on line 1)"),
            "{err}"
        );
        assert!(!node.exists());
        std::fs::write(&file, "0x10 0\n").unwrap();
        let err = load(node.to_str().unwrap(), file.to_str().unwrap()).unwrap_err();
        assert!(err.contains("ENOENT"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A member of the group (read-only node) who tries to load is told
    /// that loading needs root, not pointed at the udev rule.
    #[test]
    fn eacces_hints_say_what_to_do() {
        let e = msrbatch::Error::new(libc::EACCES, "open /dev/msrbatch_allowlist");
        assert!(hint(&e, true).contains("needs root"), "{}", hint(&e, true));
        assert!(hint(&e, false).contains("are you in the group"));
        let e = msrbatch::Error::new(libc::EPERM, "write");
        assert!(hint(&e, true).contains("CAP_SYS_RAWIO"));
    }
}
