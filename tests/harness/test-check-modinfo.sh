#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/check-modinfo.sh against modules made the way the defect arose: a
# .modinfo entry marked SHF_GNU_RETAIN (what rustc makes of `#[used]`, as
# used(linker)) beside the usual ones, linked by GNU ld -r (as Kbuild links a
# .ko with GNU ld), stays a second .modinfo section the loader never reads.
set -u
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-modinfo.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
entries() { for e in "$@"; do printf '.asciz "%s"\n' "$e"; done; }
{ echo '.section .modinfo,"a"'; entries "vermagic=7.3.4 SMP mod_unload" name=msrbatch license=GPL; } >base.s
{ echo '.section .modinfo,"aR"'; entries version=1.0; } >retained.s
{ echo '.section .modinfo,"a"'; entries version=1.0; } >plain.s
{ echo '.section .modinfo,"a"'; entries name=msrbatch license=GPL version=1.0; } >novermagic.s
for s in *.s; do as -o "${s%.s}.o" "$s" || exit 1; done
ld -r -o gnu-retained.ko base.o retained.o &&
	ld -r -o gnu-plain.ko base.o plain.o &&
	ld -r -o novermagic.ko novermagic.o || exit 1
expect() { # expect ok|refused DESCRIPTION PATTERN KO [RELEASE]
	local out got
	if out=$("$check" "$4" ${5:+"$5"} 2>&1); then got=ok; else got=refused; fi
	if [ "$got" = "$1" ] && printf '%s' "$out" | grep -q "$3"; then
		echo "ok - $2: $out"
	else
		echo "not ok - $2 ($got): $out"
		fails=1
	fi
}
expect refused "GNU ld, a retained .modinfo entry" "2 sections named .modinfo" gnu-retained.ko
expect ok "GNU ld, plain entries" "one .modinfo section, vermagic=7.3.4 " gnu-plain.ko 7.3.4
expect refused "no vermagic" "no vermagic=" novermagic.ko
expect refused "vermagic of another kernel" "is not for kernel 7.2.13" gnu-plain.ko 7.2.13
# Many entries after the ones checked (a module with 3000 aliases): `grep
# -q` leaves at its match, long before the end. (Bash's printf writes line
# by line; piped into grep -q under pipefail, a write after grep left got
# SIGPIPE, and a good module was refused: once in a DKMS build, by a
# timing race that this size makes certain.)
{
	echo '.section .modinfo,"a"'
	entries "vermagic=7.3.4 SMP mod_unload" name=msrbatch license=GPL version=1.0
	for i in $(seq 3000); do entries "alias=cpu:type:x86,ven*fam*mod*:feature:*$i*"; done
} >aliases.s
as -o aliases.o aliases.s && ld -r -o aliases.ko aliases.o || exit 1
expect ok "3000 aliases after the entries checked" "one .modinfo section" aliases.ko 7.3.4
if command -v ld.lld-22 >/dev/null; then
	ld.lld-22 -r -o lld-retained.ko base.o retained.o || exit 1
	expect ok "ld.lld merges the retained entry (why the harness never saw it)" "one .modinfo" lld-retained.ko
fi
exit $fails
