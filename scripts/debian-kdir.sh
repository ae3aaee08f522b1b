#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make debian-kdir [KVER=...]: a kernel build tree against which the module
# builds for an installed Debian kernel, without building a kernel.
#
# Debian's Rust-enabled kernels ship headers without the Rust artifacts that
# an out-of-tree Rust module needs (rust/*.rmeta, the proc-macro libraries,
# scripts/target.json). They are a pure function of the kernel's source, its
# .config and the exact rustc that built it (the v0 symbol hashes depend only
# on the crate name and rustc's version string), so this script rebuilds them:
# the headers' .config and .kernelvariables over the matching Debian
# linux-source-X.Y, `make olddefconfig` (which must leave the config as it
# is), `make modules_prepare`, then Debian's Module.symvers and vmlinux. It
# checks that every Rust symbol name the rebuilt tree exports is the one
# Debian's kernel exports, and prints the tree's path as the last line of
# stdout: KDIR=... Cached per kernel and Debian version in
# $MSRBATCH_CACHE/debian-kdir.
#
# Usage: debian-kdir.sh [--deps | --install] [KVER]   (KVER: default uname -r)
#   --deps     print the Debian packages the build needs, in two lines, and
#              exit: the exact toolchain (name=version, from the suite that
#              built the kernel: apt-get install them without -t), then the
#              build tools (apt-get install them with the -t that brought the
#              headers, e.g. -t trixie-backports: their libraries must match)
#   --install  also copy the 12 missing files into the installed headers, so
#              that plain `make` and DKMS find them (no package owns them then)
# Every failure is one line on stderr naming what to do.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/common.sh"

mode=build
case "${1:-}" in
--deps) mode=deps; shift ;;
--install) mode=install; shift ;;
-*) msrb_die "usage: debian-kdir.sh [--deps | --install] [KVER]" ;;
esac
kver=${1:-$(uname -r)}
fail() {
	echo "msrbatch: debian-kdir: $kver: $*" >&2
	exit 1
}

hdr=/usr/src/linux-headers-$kver
[ -f "$hdr/.config" ] || hdr=/lib/modules/$kver/build
[ -f "$hdr/.config" ] || fail "no kernel headers; install them: apt-get install linux-headers-$kver"
hdr=$(realpath "$hdr")
[ -f "$hdr/.kernelvariables" ] || fail "$hdr is not a Debian kernel headers tree (no .kernelvariables); build a kernel with CONFIG_RUST=y and point KDIR at it"
conf_text() { sed -n "s/^$1=\"\(.*\)\"$/\1/p" "$hdr/.config"; }
grep -q '^CONFIG_RUST=y' "$hdr/.config" || fail "this kernel was built without CONFIG_RUST=y: it cannot load Rust modules"
want_rustc=$(conf_text CONFIG_RUSTC_VERSION_TEXT)
want_bindgen=$(conf_text CONFIG_BINDGEN_VERSION_TEXT)
want_pahole=$(sed -n 's/^CONFIG_PAHOLE_VERSION=//p' "$hdr/.config")
cc=$(sed -n 's/^CC = .*)\(.*\)$/\1/p; s/^CC = \([^$]*\)$/\1/p' "$hdr/.kernelvariables")
cc=${cc//\$(CROSS_COMPILE)/$(sed -n 's/^override CROSS_COMPILE = //p' "$hdr/.kernelvariables")}
hdrpkg=$(dpkg-query -S "$hdr/.config" 2>/dev/null | cut -d: -f1) || true
[ -n "$hdrpkg" ] || fail "no package owns $hdr/.config: cannot tell which Debian source built it"
srcver=$(dpkg-query -W -f='${source:Version}' "$hdrpkg")
series=$(echo "$kver" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
srcpkg=linux-source-$series

# The Debian package version whose binary prints TEXT (e.g. rustc's
# "rustc 1.85.1 (...)" is rustc 1.85.1+dfsg1-*), the newest the apt sources
# offer; empty when none does.
debian_version_for() { # PACKAGE UPSTREAM_VERSION
	{ apt-cache madison "$1" 2>/dev/null || true; } | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
		{ grep -E "^([0-9]+:)?$(printf '%s' "$2" | sed 's/\./\\./g')([+~-]|$)" || true; } |
		sort -V | tail -n1
}
# pkg_for PACKAGE TEXT: "PACKAGE=VERSION" for the Debian package whose binary
# prints TEXT ("rustc 1.85.1 (...)" -> rustc=1.85.1+dfsg1-1+deb13u1), or a
# sentence saying that no apt source offers it. Looked up only when needed.
pkg_for() {
	local ver
	ver=$(debian_version_for "$1" "$(echo "$2" | awk '{print $2}')")
	if [ -n "$ver" ]; then
		echo "$1=$ver"
	else
		echo "$1 of that version, which no apt source here offers (add the Debian suite that built this kernel: trixie for +deb13 kernels, sid for +deb14)"
	fi
}

if [ "$mode" = deps ]; then
	toolchain=("$(pkg_for rustc "$want_rustc")" "$(pkg_for rust-src "$want_rustc")")
	[ -z "$want_bindgen" ] || toolchain+=("$(pkg_for bindgen "$want_bindgen")")
	case "${toolchain[*]}" in
	*" which no apt source"*) fail "the kernel was built by '$want_rustc'${want_bindgen:+ and '$want_bindgen'}: install $(printf '%s\n' "${toolchain[@]}" | grep -m1 'which no apt source')" ;;
	esac
	tools=(make flex bison bc openssl libelf-dev libssl-dev xz-utils)
	[ -z "$want_pahole" ] || [ "$want_pahole" = 0 ] || tools+=(dwarves)
	echo "${toolchain[*]}"
	echo "${tools[*]}"
	exit 0
fi

# The toolchain must be the one that built the kernel, to the letter.
have_rustc=$(${RUSTC:-rustc} --version 2>/dev/null | head -n1) || have_rustc=none
[ "$have_rustc" = "$want_rustc" ] ||
	fail "built by '$want_rustc' but ${RUSTC:-rustc} is '$have_rustc': install $(pkg_for rustc "$want_rustc") $(pkg_for rust-src "$want_rustc" | cut -d' ' -f1) (a newer rustc, e.g. from backports, names every symbol differently)"
sysroot=$(${RUSTC:-rustc} --print sysroot)
[ -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ] ||
	fail "the Rust standard library source is missing: install $(pkg_for rust-src "$want_rustc")"
if [ -n "$want_bindgen" ]; then
	have_bindgen=$(${BINDGEN:-bindgen} --version 2>/dev/null | head -n1) || have_bindgen=none
	[ "$have_bindgen" = "$want_bindgen" ] ||
		fail "built with '$want_bindgen' but ${BINDGEN:-bindgen} is '$have_bindgen': install $(pkg_for bindgen "$want_bindgen")"
fi
command -v "$cc" >/dev/null || fail "the kernel's C compiler $cc is missing: install ${cc#x86_64-linux-gnu-}"
if [ -n "$want_pahole" ] && [ "$want_pahole" != 0 ]; then
	have_pahole=$(pahole --version 2>/dev/null | tr -d 'v.') || have_pahole=none
	[ "$have_pahole" = "$want_pahole" ] ||
		fail "built with pahole $want_pahole (CONFIG_PAHOLE_VERSION) but pahole here is '$have_pahole': install the dwarves package of the kernel's suite"
fi
for tool in make flex bison bc openssl; do
	command -v "$tool" >/dev/null || fail "$tool is missing: install $tool"
done

# The matching Debian source, shared with the test harness's cache.
src=$MSRB_CACHE/src/$srcpkg-$srcver
if [ ! -f "$src/Makefile" ]; then
	mkdir -p "$MSRB_CACHE/src"
	dl=$(mktemp -d "$MSRB_CACHE/dl.XXXXXX")
	msrb_log "fetching $srcpkg=$srcver"
	(cd "$dl" && apt-get download -qq "$srcpkg=$srcver" 2>/dev/null) ||
		{ rm -rf "$dl"; fail "apt cannot download $srcpkg=$srcver: add the Debian suite of this kernel to apt's sources"; }
	msrb_unpack_linux_source "$dl"/"$srcpkg"_*.deb "$src" "$srcver"
	rm -rf "$dl"
fi

[ "$mode" != install ] || [ -w "$hdr" ] || fail "--install writes into $hdr: run it as root"

# The tree, built once per kernel and Debian version (and source path: the
# tree's Makefile names it), stamped only once its symbols were checked.
out=$MSRB_CACHE/debian-kdir/$kver-$srcver
[ "$(readlink "$out/source" 2>/dev/null)" = "$src" ] || rm -f "$out/.msrbatch-built"
kmake=(make -s -C "$src" O="$out" RUSTC="${RUSTC:-rustc}" HOSTRUSTC="${RUSTC:-rustc}" BINDGEN="${BINDGEN:-bindgen}")
if [ ! -f "$out/.msrbatch-built" ]; then
	rm -rf "$out"
	mkdir -p "$out"
	cp "$hdr/.config" "$hdr/.kernelvariables" "$out/"
	msrb_log "rebuilding the Rust artifacts of $kver in $out (a few minutes on 2 cores)"
	"${kmake[@]}" olddefconfig >"$out/.olddefconfig.log" 2>&1 ||
		fail "make olddefconfig failed: see $out/.olddefconfig.log"
	# Only the C toolchain's version numbers may differ (a newer Debian
	# revision of the same gcc, binutils of the same series): they name no
	# option and no Rust symbol. Any option they would turn on or off, and
	# any Rust tool's version, must be Debian's.
	versions='^CONFIG_(CC_VERSION_TEXT|GCC_VERSION|AS_VERSION|LD_VERSION)='
	changed=$(diff <(grep '^CONFIG_' "$hdr/.config" | grep -Ev "$versions" | sort) \
		<(grep '^CONFIG_' "$out/.config" | grep -Ev "$versions" | sort) |
		sed -n 's/^[<>] //p' | tr '\n' ' ') || true
	[ -z "$changed" ] ||
		fail "this toolchain changes the kernel's configuration ($changed): the build would not match Debian's kernel"
	moved=$({ diff <(grep -E "$versions" "$hdr/.config" | sort) <(grep -E "$versions" "$out/.config" | sort) || true; } |
		sed -n 's/^> //p' | tr '\n' ' ')
	[ -z "$moved" ] || msrb_log "$kver: C toolchain versions differ from Debian's build (no option changed): $moved"
	"${kmake[@]}" -j"$(nproc)" modules_prepare >"$out/.modules_prepare.log" 2>&1 ||
		fail "make modules_prepare failed: see $out/.modules_prepare.log"
	cp "$hdr/Module.symvers" "$out/"
	[ ! -f "$hdr/vmlinux" ] || cp "$hdr/vmlinux" "$out/"
fi

# Every Rust symbol this tree exports must be one Debian's kernel exports.
ours=$(sed -n 's/^EXPORT_SYMBOL_RUST_GPL(\(_R[^)]*\));$/\1/p' "$out"/rust/exports_*_generated.h | sort -u)
debian=$(awk '$2 ~ /^_R/ {print $2}' "$out/Module.symvers" | sort -u)
n_ours=$(printf '%s\n' "$ours" | grep -c .)
n_debian=$(printf '%s\n' "$debian" | grep -c .)
missing=$({ comm -23 <(printf '%s\n' "$ours") <(printf '%s\n' "$debian") || true; } | head -n3 | tr '\n' ' ')
[ -z "$missing" ] && [ "$n_ours" -eq "$n_debian" ] ||
	fail "the rebuilt Rust symbols differ from Debian's Module.symvers ($n_ours here, $n_debian there; e.g. $missing): the toolchain or source does not match"
msrb_log "$kver: all $n_ours Rust symbol names equal those in Debian's Module.symvers"
touch "$out/.msrbatch-built"

if [ "$mode" = install ]; then
	kbuild_scripts=$(realpath "$hdr/scripts")
	# The crates' metadata and the proc-macro libraries (7.3: 9 and 3).
	files=("$out"/rust/*.rmeta "$out"/rust/*.so)
	[ -f "$out/rust/libkernel.rmeta" ] || fail "the rebuilt tree lacks rust/libkernel.rmeta"
	# target.json first: headers with rust/libkernel.rmeta but no target.json
	# would pass check-kdir.sh and then fail to build.
	install -m 0644 "$out/scripts/target.json" "$kbuild_scripts/target.json"
	mkdir -p "$hdr/rust"
	install -m 0644 "${files[@]}" "$hdr/rust/"
	msrb_log "installed ${#files[@]} files into $hdr/rust and $kbuild_scripts/target.json; no package owns them: remove them by hand after removing the headers package"
	out=$hdr
fi
echo "KDIR=$out"
