// SPDX-License-Identifier: GPL-2.0
//! The checked-in MSR name table (src/msr_index.rs) is what
//! scripts/gen-msr-names.sh makes of the kernel source the harness keeps
//! (`$MSRBATCH_KSRC`, else the tree `$MSRBATCH_CACHE/src/current` names,
//! `~/.cache/msrbatch` by default). Without a source tree there is nothing
//! to compare with: the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel source tree, or why there is none.
fn kernel_source() -> Result<PathBuf, String> {
    if let Some(k) = std::env::var_os("MSRBATCH_KSRC") {
        return Ok(PathBuf::from(k));
    }
    let cache = std::env::var_os("MSRBATCH_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/msrbatch")))
        .ok_or("neither MSRBATCH_KSRC, MSRBATCH_CACHE nor HOME is set")?;
    let current = cache.join("src/current");
    let name = std::fs::read_to_string(&current).map_err(|e| {
        format!(
            "{}: {e} (provisioning has not fetched the kernel source)",
            current.display()
        )
    })?;
    let tree = PathBuf::from(name.trim());
    Ok(if tree.is_absolute() {
        tree
    } else {
        cache.join("src").join(tree)
    })
}

#[test]
fn the_table_is_what_the_script_generates() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ksrc = match kernel_source() {
        Ok(k) if k.join("arch/x86/include/asm/msr-index.h").is_file() => k,
        Ok(k) => {
            eprintln!(
                "skipped: {} has no arch/x86/include/asm/msr-index.h",
                k.display()
            );
            return;
        }
        Err(why) => {
            eprintln!("skipped: no kernel source to compare with: {why}");
            return;
        }
    };
    let out = Command::new(top.join("scripts/gen-msr-names.sh"))
        .arg(&ksrc)
        .arg("-")
        .output()
        .expect("run scripts/gen-msr-names.sh");
    assert!(
        out.status.success(),
        "gen-msr-names.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let checked_in =
        std::fs::read_to_string(top.join("userspace/msrbatch/src/msr_index.rs")).unwrap();
    assert!(
        generated == checked_in,
        "src/msr_index.rs is not what the kernel source makes of it: run \
         scripts/gen-msr-names.sh {}",
        ksrc.display()
    );
    assert!(generated.lines().filter(|l| l.contains("(\"MSR_")).count() > 400);
}
