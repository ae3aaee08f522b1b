#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make install DESTDIR=... PREFIX=/usr lays out exactly the files of
# packaging/install-manifest.txt; the installed C API builds a program through
# pkg-config (shared: through the SONAME; static: small and without glibc's
# warnings); the library is in the multiarch directory with its SONAME
# links; make uninstall removes everything; a DKMS build (private DKMS
# trees, nothing installed) succeeds against the test kernel; and
# make rust-analyzer finds the module's crate root.
# Usage: test-install.sh KBUILD (the toolchain variables in the environment).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
kb=$1
cd "$top"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kver=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$kb/include/generated/utsrelease.h")
mk=(make -s KDIR="$kb" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" DESTDIR="$tmp/root" PREFIX=/usr)

ver=$(scripts/version.sh)
# The library directory: the distribution's multiarch one where it has one.
libdir=$("${mk[@]}" libdir)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || true)
if [ "$libdir" != "/usr/lib${multiarch:+/$multiarch}" ]; then
	echo "not ok - make install puts the library in $libdir, not /usr/lib${multiarch:+/$multiarch}"
	exit 1
fi
echo "ok - the library's directory is $libdir (multiarch: ${multiarch:-none})"

"${mk[@]}" install >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
(cd "$tmp/root" && find . -type f | sed 's|^\.||' | sort) >"$tmp/got"
sed "s|@KVER@|$kver|; s|@LIBDIR@|$libdir|; s|@VERSION@|$ver|" packaging/install-manifest.txt | sort >"$tmp/want"
if ! diff -u "$tmp/want" "$tmp/got"; then
	echo "not ok - make install DESTDIR: layout differs from packaging/install-manifest.txt"
	exit 1
fi
echo "ok - make install DESTDIR=... PREFIX=/usr installs the $(wc -l <"$tmp/want") files of the manifest"

# The shared library's SONAME and links, as ldconfig and the linker want them.
lib="$tmp/root$libdir"
major=${ver%%.*}
soname=$(readelf -d "$lib/libmsrbatch.so.$ver" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libmsrbatch.so.$major" ] ||
	[ "$(readlink "$lib/libmsrbatch.so.$major")" != "libmsrbatch.so.$ver" ] ||
	[ "$(readlink "$lib/libmsrbatch.so")" != "libmsrbatch.so.$major" ]; then
	echo "not ok - libmsrbatch.so.$ver has SONAME '$soname'; links: $(cd "$lib" && ls -l libmsrbatch.so*)"
	exit 1
fi
echo "ok - libmsrbatch.so.$ver has SONAME libmsrbatch.so.$major, with the .so.$major and .so links"

# One version (scripts/version.sh) in everything installed that names one.
have=(
	"module:$(/sbin/modinfo -F version "$tmp/root/lib/modules/$kver/extra/rust/msrbatch.ko")"
	"tool:$("$tmp/root/usr/bin/msrbatch" --version)"
	"pkg-config:$(sed -n 's/^Version: //p' "$lib/pkgconfig/msrbatch.pc")"
	"msrbatch.1:$(sed -n 's/^\.TH .*"msrbatch \([^"]*\)".*/\1/p' "$tmp/root/usr/share/man/man1/msrbatch.1")"
	"msrbatch.4:$(sed -n 's/^\.TH .*"msrbatch \([^"]*\)".*/\1/p' "$tmp/root/usr/share/man/man4/msrbatch.4")"
	"msrbatch-script.5:$(sed -n 's/^\.TH .*"msrbatch \([^"]*\)".*/\1/p' "$tmp/root/usr/share/man/man5/msrbatch-script.5")"
)
for h in "${have[@]}"; do
	case "${h#*:}" in
	"$ver" | "msrbatch $ver") ;;
	*) echo "not ok - ${h%%:*} says version '${h#*:}', not $ver (scripts/version.sh)"; exit 1 ;;
	esac
done
echo "ok - module, tool, pkg-config file and man pages all say version $ver"
export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_LIBDIR=
# shellcheck disable=SC2046
gcc -Wall -Werror $(pkg-config --cflags msrbatch) -o "$tmp/read_msrs" examples/read_msrs.c $(pkg-config --libs msrbatch)
# The program needs the SONAME, so a later libmsrbatch.so.N+1 cannot break it.
needed=$(readelf -d "$tmp/read_msrs" | sed -n 's/.*(NEEDED).*\[\(libmsrbatch[^]]*\)\]/\1/p')
[ "$needed" = "libmsrbatch.so.$major" ] || { echo "not ok - read_msrs needs '$needed', not libmsrbatch.so.$major"; exit 1; }
# grep without -q reads all of ldd's output: with -q it could exit at the
# match while ldd still writes, and pipefail would fail on ldd's SIGPIPE
# (seen once in a clean-clone make check).
LD_LIBRARY_PATH="$lib" ldd "$tmp/read_msrs" | grep "$lib/libmsrbatch.so.$major" >/dev/null
echo "ok - the installed headers, library and pkg-config file build examples/read_msrs.c, which needs libmsrbatch.so.$major"
# Statically: small, and no glibc warning about Rust's std (getaddrinfo,
# getpwuid_r) from the link. Before the LTO build: 6.5 MB and two warnings.
# shellcheck disable=SC2046
gcc -static -O2 -Wall -Werror $(pkg-config --cflags msrbatch) -o "$tmp/read_msrs_static" examples/read_msrs.c \
	$(pkg-config --static --libs msrbatch) 2>"$tmp/static.log" || { cat "$tmp/static.log"; exit 1; }
size=$(stat -c %s "$tmp/read_msrs_static")
if [ -s "$tmp/static.log" ] || [ "$size" -gt 2000000 ]; then
	cat "$tmp/static.log"
	echo "not ok - a static examples/read_msrs.c is $size bytes (at most 2 000 000) or its link warned (above)"
	exit 1
fi
echo "ok - a static examples/read_msrs.c links without warnings, $size bytes"
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH PKG_CONFIG_LIBDIR

"${mk[@]}" uninstall >/dev/null
left=$(find "$tmp/root" -type f -o -type l)
if [ -n "$left" ]; then
	echo "not ok - make uninstall left: $left"
	exit 1
fi
echo "ok - make uninstall removes every installed file"

# DKMS, in private trees (nothing goes to /var/lib/dkms or /lib/modules).
d="$tmp/dkms"
mkdir -p "$d/src/msrbatch-$ver" "$d/tree" "$d/inst"
git ls-files -co --exclude-standard | grep -v '^target/' | tar -cf - -T - | tar -x -C "$d/src/msrbatch-$ver"
dk=(dkms --dkmstree "$d/tree" --sourcetree "$d/src" --installtree "$d/inst")
export LLVM RUSTC BINDGEN
"${dk[@]}" add -m msrbatch -v "$ver" >"$d/log" 2>&1
if ! "${dk[@]}" build -m msrbatch -v "$ver" -k "$kver" --kernelsourcedir "$kb" >>"$d/log" 2>&1; then
	cat "$d/log" "$d/tree/msrbatch/$ver/build/make.log" 2>/dev/null | tail -30
	echo "not ok - dkms build"
	exit 1
fi
ko="$d/tree/msrbatch/$ver/$kver/$(uname -m)/module/msrbatch.ko"
[ -f "$ko" ] && /sbin/modinfo -F license "$ko" | grep -x GPL >/dev/null
echo "ok - dkms build of msrbatch $ver (dkms.conf reads the version) for $kver (the test kernel) produced msrbatch.ko"

rm -f rust-project.json
"${mk[@]}" rust-analyzer >/dev/null 2>&1
python3 - <<'PY'
import json
crates = json.load(open("rust-project.json"))["crates"]
roots = [c["root_module"] for c in crates]
assert any(r.endswith("rust/msrbatch_main.rs") for r in roots), roots
PY
echo "ok - make rust-analyzer writes rust-project.json with rust/msrbatch_main.rs as a crate root"
