#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test kernel out of tree into the cache, keyed by
# (Debian source version, config fragment, rustc, bindgen, clang, this script).
# A build whose key already has a finished stamp is reused as is.
# Prints "KBUILD=<dir>" on stdout as its last line.
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -f "$MSRB_CACHE/toolchain.env" ] || msrb_die "run tests/harness/provision.sh first"
. "$MSRB_CACHE/toolchain.env"

FLAVOUR=${MSRB_FLAVOUR:-base}
FRAGMENTS=("$MSRB_TOP/tests/harness/kernel.config")
[ "$FLAVOUR" = base ] || FRAGMENTS+=("$MSRB_TOP/tests/harness/kernel-$FLAVOUR.config")

key=$( { echo "$KSRC_VERSION"; echo "$RUSTC_VERSION"; echo "$BINDGEN_VERSION";
	 echo "$CLANG_VERSION"; cat "${FRAGMENTS[@]}" "$0"; } | sha256sum | cut -c1-16)
KBUILD="$MSRB_CACHE/kbuild/$FLAVOUR-$key"
msrb_log "kernel key $FLAVOUR-$key: $MSRB_LINUX_SERIES $KSRC_VERSION, $RUSTC_VERSION, $BINDGEN_VERSION, $CLANG_VERSION"

if [ -f "$KBUILD/.msrbatch-built" ]; then
	msrb_log "kernel cached: $KBUILD"
	echo "KBUILD=$KBUILD"
	exit 0
fi

MAKEARGS=(-C "$KSRC" O="$KBUILD" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN")
mkdir -p "$KBUILD"
make -s "${MAKEARGS[@]}" tinyconfig >/dev/null
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$KBUILD" "$KBUILD/.config" "${FRAGMENTS[@]}" >/dev/null
make -s "${MAKEARGS[@]}" olddefconfig >/dev/null

# Every symbol of the fragments must have stuck.
missing=()
while IFS= read -r line; do
	case "$line" in CONFIG_*=*) grep -qxF "$line" "$KBUILD/.config" || missing+=("$line") ;; esac
done < <(cat "${FRAGMENTS[@]}")
[ ${#missing[@]} -eq 0 ] || msrb_die "config symbols did not stick (dependency missing or renamed): ${missing[*]}"

make -s "${MAKEARGS[@]}" rustavailable >/dev/null || msrb_die "the kernel build does not accept this Rust toolchain (make rustavailable failed)"
msrb_log "building kernel in $KBUILD (cold: about 7-9 minutes on 2 cores)"
make -s "${MAKEARGS[@]}" -j"$(nproc)" all
touch "$KBUILD/.msrbatch-built"
echo "KBUILD=$KBUILD"
