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
	out=$(MSRBATCH_OS_RELEASE=${OS_RELEASE:-/dev/null} "$top/scripts/check-kdir.sh" "$3" "${4:-rustc}" 2>&1) &&
		{ echo "not ok - $1: accepted"; fails=1; return; }
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
mkdir -p "$tmp/k2/include/generated"
echo '#define UTS_RELEASE "7.3.4+deb13-amd64"' >"$tmp/k2/include/generated/utsrelease.h"
echo 'ID=ubuntu' >"$tmp/os-release"
OS_RELEASE=$tmp/os-release expect "Ubuntu headers without Rust artifacts" "install linux-lib-rust-7.3.4+deb13-amd64" "$tmp/k2"
touch "$tmp/k2/.kernelvariables"
expect "Debian headers without Rust artifacts" "run 'make debian-kdir KVER=7.3.4+deb13-amd64'" "$tmp/k2"
mkdir -p "$tmp/k2/rust" && touch "$tmp/k2/rust/libkernel.rmeta"
printf '#!/bin/sh\necho "rustc 9.9.9"\n' >"$tmp/rustc" && chmod +x "$tmp/rustc"
expect "KDIR built by another rustc" "built by 'rustc 0.0.1'" "$tmp/k2" "$tmp/rustc"
printf '#!/bin/sh\necho "rustc 0.0.1"\n' >"$tmp/rustc" && chmod +x "$tmp/rustc"
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_GCC=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 0.0.1"\n' >"$tmp/k2/include/config/auto.conf"
LLVM=1 expect "LLVM=1 for a gcc-built kernel" "built with gcc: drop LLVM=" "$tmp/k2" "$tmp/rustc"
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 0.0.1"\n' >"$tmp/k2/include/config/auto.conf"
LLVM=-999 expect "LLVM=-999 without clang-999" "wants clang-999, which is not installed" "$tmp/k2" "$tmp/rustc"
expect "a clang-built kernel without LLVM=" "pass LLVM=1" "$tmp/k2" "$tmp/rustc"
LLVM= "$top/scripts/check-kdir.sh" "$tmp/k2" "$tmp/rustc" 2>/dev/null && { echo "not ok - the clang check ignores an empty LLVM"; fails=1; }
LLVM=/nonexistent/ PATH=/usr/bin:/bin "$top/scripts/check-kdir.sh" "$tmp/k2" "$tmp/rustc" 2>/dev/null &&
	{ echo "not ok - LLVM=/nonexistent/ accepted"; fails=1; }
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_GCC=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 0.0.1"\n' >"$tmp/k2/include/config/auto.conf"
BINDGEN=/nonexistent/bindgen expect "no bindgen" "no bindgen ('/nonexistent/bindgen')" "$tmp/k2" "$tmp/rustc"
exit $fails
