#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Preflight for building the module: is KDIR a kernel build tree that can
# build an out-of-tree Rust module with this rustc? One line per problem,
# instead of a wall of compiler errors.
# Usage: check-kdir.sh KDIR RUSTC
kdir=$1
rustc=${2:-rustc}
fail() {
	echo "msrbatch: cannot build against KDIR=$kdir: $*" >&2
	exit 1
}
[ -d "$kdir" ] || fail "no such directory; install the kernel's build tree or pass KDIR=/path/to/a/Rust-enabled kernel build (make vm-demo uses its own)"
conf="$kdir/include/config/auto.conf"
[ -f "$conf" ] || fail "no include/config/auto.conf: not a configured kernel build tree (run 'make modules_prepare' there)"
grep -q '^CONFIG_RUST=y' "$conf" || fail "the kernel was built without CONFIG_RUST=y; msrbatch is a Rust module"
[ -f "$kdir/rust/libkernel.rmeta" ] || fail "no Rust artifacts (rust/libkernel.rmeta); distribution header packages often omit them: build against a full kernel build tree (see README)"
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$conf")
have=$("$rustc" --version 2>/dev/null) || fail "RUSTC=$rustc does not run"
[ "$want" = "$have" ] || fail "it was built by '$want' but RUSTC=$rustc is '$have'; pass RUSTC= the kernel's rustc"
exit 0
