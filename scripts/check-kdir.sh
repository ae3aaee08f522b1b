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
if [ ! -f "$kdir/rust/libkernel.rmeta" ]; then
	release=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$kdir/include/generated/utsrelease.h" 2>/dev/null)
	# shellcheck disable=SC1090 # the distribution's own file
	. "${MSRBATCH_OS_RELEASE:-/etc/os-release}" 2>/dev/null || ID=
	if [ "${ID:-}" = ubuntu ]; then
		fail "no Rust artifacts (rust/libkernel.rmeta): Ubuntu ships them apart from the headers; install linux-lib-rust-${release:-\$(uname -r)}"
	elif [ -f "$kdir/.kernelvariables" ]; then
		fail "no Rust artifacts (rust/libkernel.rmeta): Debian's headers omit them; run 'make debian-kdir${release:+ KVER=$release}' and build with the KDIR it prints (Documentation/install.md)"
	fi
	fail "no Rust artifacts (rust/libkernel.rmeta); distribution header packages often omit them: build against a full kernel build tree (see README)"
fi
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$conf")
have=$("$rustc" --version 2>/dev/null | head -n1) && [ -n "$have" ] || fail "RUSTC=$rustc does not run"
[ "$want" = "$have" ] || fail "it was built by '$want' but RUSTC=$rustc is '$have'; pass RUSTC= the kernel's rustc"
# The C compiler: an LLVM= build needs clang (LLVM=1: clang, LLVM=-22:
# clang-22) and a clang-built kernel; a gcc-built kernel needs its gcc.
if [ -n "${LLVM:-}" ]; then
	case "$LLVM" in
	*/) clang=${LLVM}clang ;;
	-*) clang=clang$LLVM ;;
	*) clang=clang ;;
	esac
	grep -q '^CONFIG_CC_IS_CLANG=y' "$conf" || fail "LLVM=$LLVM, but the kernel was built with gcc: drop LLVM="
	command -v "$clang" >/dev/null || fail "LLVM=$LLVM wants $clang, which is not installed (Debian names it clang-NN: pass LLVM=-NN)"
elif grep -q '^CONFIG_CC_IS_CLANG=y' "$conf"; then
	fail "the kernel was built with clang: pass LLVM=1 (or LLVM=-NN for Debian's clang-NN)"
fi
# bindgen: the module's view of the ABI is generated from the uapi header at
# build time (rust/Kbuild), with the bindgen a Rust kernel build needs anyway.
bindgen=${BINDGEN:-bindgen}
command -v "$bindgen" >/dev/null ||
	fail "no bindgen ('$bindgen'), which generates the module's ABI view: install the kernel's bindgen (make debian-kdir names it) or pass BINDGEN=/path/to/bindgen"
exit 0
