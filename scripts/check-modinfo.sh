#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# check-modinfo.sh MODULE.ko [KERNELRELEASE]: is the module's .modinfo what
# the kernel's loader reads? The loader takes the first section named
# .modinfo (find_sec() in kernel/module/main.c) and refuses a module whose
# vermagic it cannot find there ("invalid module format"). A second .modinfo
# section is what GNU ld makes of a `#[used]` static that rustc emits as
# `used(linker)` (SHF_GNU_RETAIN): ld.lld merges the two, so only GNU ld
# builds show it. Checks: exactly one .modinfo section, and in it vermagic
# (starting with KERNELRELEASE when given), name, license and version.
set -euo pipefail
ko=$1
release=${2:-}
fail() {
	echo "msrbatch: $ko: $*" >&2
	exit 1
}
[ -f "$ko" ] || fail "no such file"
mapfile -t secs < <(readelf -SW "$ko" | sed -n 's/^ *\[ *\([0-9]*\)\] \.modinfo .*/\1/p')
[ ${#secs[@]} -eq 1 ] || fail "${#secs[@]} sections named .modinfo (sections ${secs[*]}); the loader reads only the first"
info=$(readelf -p "${secs[0]}" "$ko" | sed -n 's/^ *\[ *[0-9a-f]*\] *//p')
for key in vermagic name license version; do
	# Not `printf | grep -q`: bash's printf writes line by line, and under
	# pipefail a write after grep -q found its line and left fails the pipe
	# (SIGPIPE): a DKMS build once refused a good module "no license=".
	grep -q "^$key=." <<<"$info" || fail "no $key= in its .modinfo section"
done
vermagic=$(printf '%s\n' "$info" | sed -n 's/^vermagic=//p')
if [ -n "$release" ]; then
	case "$vermagic" in
	"$release "*) ;;
	*) fail "vermagic '$vermagic' is not for kernel $release" ;;
	esac
fi
echo "msrbatch: $(basename "$ko"): one .modinfo section, vermagic=$vermagic"
