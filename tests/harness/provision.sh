#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Provision everything the kernel build and the QEMU harness need.
# Idempotent: a warm run checks and returns in about a second.
#
#  - Debian 12 packages (rustc-web, clang-22, qemu, busybox, kernel build deps)
#  - bindgen-cli $MSRB_BINDGEN_VERSION from crates.io into the cache
#  - cbindgen $MSRB_CBINDGEN_VERSION from crates.io into the cache (the check
#    of include/msrbatch.h against the C API, test-c-header.sh)
#  - the linux-source-7.3 package from trixie-backports, fetched with a
#    *private* apt configuration (own sources list, lists and cache dirs);
#    the system's apt sources are never touched.
#
# On success it writes $MSRB_CACHE/toolchain.env, which the other scripts source.
# Sourced (tests/harness/test-provision.sh), it runs none of its steps: it
# sets its variables and shell options (errexit, nounset, pipefail),
# defines its functions (msrb_die exits the shell that sourced it) and makes
# the cache's directory.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PKGS=(rustc-web rust-web-src "clang$MSRB_LLVM_SUFFIX" "lld$MSRB_LLVM_SUFFIX"
      "llvm$MSRB_LLVM_SUFFIX" "libclang$MSRB_LLVM_SUFFIX-dev" qemu-system-x86
      busybox-static flex bison bc libelf-dev libssl-dev cpio kmod python3 xz-utils debootstrap
      dkms gcc-multilib libc6-dev-i386 rust-web-clippy
      msr-tools man-db groff-base pkgconf)

mkdir -p "$MSRB_CACHE"

install_packages() {
	local missing=() p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || msrb_die "missing packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"
	msrb_log "installing: ${missing[*]}"
	apt-get update -qq
	for p in "${missing[@]}"; do
		apt-cache show "$p" >/dev/null 2>&1 ||
			msrb_die "Debian package '$p' is not available from the configured apt sources (the pinned series may have been removed); update PKGS in $0"
	done
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# cargo install --locked crate NAME at VERSION, whose binary is BIN, into
# $MSRB_CACHE/BIN-VERSION, once.
install_crate() {
	local name=$1 version=$2 bin=$3 root="$MSRB_CACHE/$3-$2"
	[ -x "$root/bin/$bin" ] && return 0
	command -v cargo >/dev/null || msrb_die "cargo is needed to install $name"
	msrb_log "installing $name $version into $root"
	LIBCLANG_PATH="/usr/lib/llvm$MSRB_LLVM_SUFFIX/lib" \
		cargo install --quiet --locked --version "=$version" --root "$root.tmp" "$name"
	rm -rf "$root"
	mv "$root.tmp" "$root"
}

fetch_linux_source() {
	local apt="$MSRB_CACHE/apt" srcroot="$MSRB_CACHE/src" deb ver
	# A previous run may have left the extracted tree: reuse it.
	if [ -f "$srcroot/current" ] && [ -f "$(cat "$srcroot/current")/Makefile" ]; then
		return 0
	fi
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$srcroot"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $MSRB_LINUX_SUITE main" \
		>"$apt/sources.list"
	msrb_log "fetching $MSRB_LINUX_SERIES from $MSRB_LINUX_SUITE (private apt config in $apt)"
	msrb_private_apt "$apt" apt-get update -qq ||
		msrb_die "apt update of $MSRB_LINUX_SUITE failed (see above)"
	# `|| true`: apt-cache fails for a package it does not know, and under
	# pipefail that ended the script with no word; the check below says why.
	ver=$(msrb_private_apt "$apt" apt-cache show "$MSRB_LINUX_SERIES" 2>/dev/null |
		sed -n 's/^Version: //p' | head -n1) || true
	[ -n "$ver" ] || msrb_die "$MSRB_LINUX_SERIES is no longer in Debian $MSRB_LINUX_SUITE: the pinned kernel series is gone; pick a new series in tests/harness/common.sh"
	(cd "$apt" && msrb_private_apt "$apt" apt-get download -qq "$MSRB_LINUX_SERIES=$ver")
	deb=$(ls "$apt"/"$MSRB_LINUX_SERIES"_*.deb | head -n1)
	local dest="$srcroot/$MSRB_LINUX_SERIES-$ver"
	msrb_unpack_linux_source "$deb" "$dest" "$ver"
	echo "$dest" >"$srcroot/current"
	rm -f "$deb"
}

# A newer QEMU for the stock-kernel stages (tests/harness/stock.sh) from the
# host release's backports, unpacked into the cache, not installed: Debian
# 12's QEMU 7.2 TCG oopses Debian's kernels when they patch a static key
# (tests/harness/stock-kernels.txt). The other stages keep the system's QEMU,
# which the icount budgets were measured with.
fetch_stock_qemu() {
	local apt="$MSRB_CACHE/apt-qemu" suite ver dest
	suite=$(. /etc/os-release && echo "$VERSION_CODENAME")-backports
	if [ -f "$MSRB_CACHE/qemu/current" ] && [ -x "$(cat "$MSRB_CACHE/qemu/current")/usr/bin/qemu-system-x86_64" ]; then
		return 0
	fi
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$MSRB_CACHE/qemu"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) $suite main" >"$apt/sources.list"
	# Only the stock-kernel stages need it: a failure here is theirs alone.
	msrb_private_apt "$apt" apt-get update -qq || { msrb_log "apt update of $suite failed: the stock-kernel stages will fail"; return 0; }
	ver=$(msrb_private_apt "$apt" apt-cache show qemu-system-x86 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n1) || true
	[ -n "$ver" ] || { msrb_log "qemu-system-x86 is not in Debian $suite: the stock-kernel stages will fail"; return 0; }
	dest="$MSRB_CACHE/qemu/qemu-system-x86-${ver//:/_}"
	rm -rf "$dest" "$dest.tmp" "$apt/dl"
	mkdir -p "$apt/dl"
	(cd "$apt/dl" && msrb_private_apt "$apt" apt-get download -qq "qemu-system-x86=$ver") &&
		dpkg-deb -x "$apt"/dl/qemu-system-x86_*.deb "$dest.tmp" && mv "$dest.tmp" "$dest" &&
		"$dest/usr/bin/qemu-system-x86_64" --version >/dev/null ||
		{ msrb_log "could not unpack and run qemu-system-x86=$ver from $suite: the stock-kernel stages will fail"; rm -rf "$apt/dl"; return 0; }
	rm -rf "$apt/dl"
	echo "$dest" >"$MSRB_CACHE/qemu/current"
}

main() {
	install_packages
	install_crate bindgen-cli "$MSRB_BINDGEN_VERSION" bindgen
	install_crate cbindgen "$MSRB_CBINDGEN_VERSION" cbindgen
	fetch_linux_source
	fetch_stock_qemu

	KSRC=$(cat "$MSRB_CACHE/src/current")
	RUSTC=/usr/bin/rustc
	[ -x "$RUSTC" ] || msrb_die "$RUSTC missing: rustc-web did not install"
	cat >"$MSRB_CACHE/toolchain.env" <<ENV
KSRC=$KSRC
KSRC_VERSION=$(cat "$KSRC/.msrbatch-debian-version")
RUSTC=$RUSTC
RUSTC_VERSION="$($RUSTC --version)"
BINDGEN=$MSRB_CACHE/bindgen-$MSRB_BINDGEN_VERSION/bin/bindgen
BINDGEN_VERSION="$("$MSRB_CACHE/bindgen-$MSRB_BINDGEN_VERSION/bin/bindgen" --version)"
LLVM=$MSRB_LLVM_SUFFIX
CLANG_VERSION="$(clang$MSRB_LLVM_SUFFIX --version | head -n1)"
STOCK_QEMU=$(cat "$MSRB_CACHE/qemu/current" 2>/dev/null)/usr/bin/qemu-system-x86_64
ENV
	msrb_log "toolchain: $(tr '\n' ' ' <"$MSRB_CACHE/toolchain.env")"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
