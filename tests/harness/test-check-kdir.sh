#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The module build's preflight must refuse each bad KDIR with one line.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # expect DESCRIPTION PATTERN KDIR [RUSTC]
	local out lines
	out=$("$top/scripts/check-kdir.sh" "$3" "${4:-rustc}" 2>&1) && { echo "not ok - $1: accepted"; fails=1; return; }
	lines=$(printf '%s\n' "$out" | wc -l)
	if [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -q "$2"; then
		echo "ok - $1: $out"
	else
		echo "not ok - $1: $out"
		fails=1
	fi
}
expect "missing KDIR" "no such directory" "$tmp/nope"
mkdir -p "$tmp/k1"
expect "unconfigured KDIR" "not a configured kernel build tree" "$tmp/k1"
mkdir -p "$tmp/k2/include/config" && echo 'CONFIG_SMP=y' >"$tmp/k2/include/config/auto.conf"
expect "KDIR without CONFIG_RUST" "without CONFIG_RUST" "$tmp/k2"
printf 'CONFIG_RUST=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 0.0.1"\n' >"$tmp/k2/include/config/auto.conf"
expect "KDIR without Rust artifacts" "no Rust artifacts" "$tmp/k2"
mkdir -p "$tmp/k2/rust" && touch "$tmp/k2/rust/libkernel.rmeta"
printf '#!/bin/sh\necho "rustc 9.9.9"\n' >"$tmp/rustc" && chmod +x "$tmp/rustc"
expect "KDIR built by another rustc" "built by 'rustc 0.0.1'" "$tmp/k2" "$tmp/rustc"
exit $fails
