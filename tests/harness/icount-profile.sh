#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where every guest instruction of an ioctl goes: boots the base kernel
# under QEMU -icount shift=0,sleep=off with a TCG plugin
# (tests/harness/icount-profile/plugin.c) that counts each guest
# instruction executed, by address, in windows the guest marks; the guest
# runs tests/guest/icount_profile.c, which calls each SHAPE N times in its
# own window. Prints, per shape, each function's instructions per call
# (kernel: the base kernel's vmlinux; module: msrbatch.ko at the guest's
# section addresses; user space: the program), sorted, and the total next
# to icount_bench's figure (the RDTSC minimum of 31 calls in the same boot)
# and the budget in tests/harness/icount-budget.txt.
#
#   tests/harness/icount-profile.sh [-n N] [-t TOP] [-i INSNS] [-a REGEX] [-o FILE] [SHAPE...]
#   tests/harness/icount-profile.sh -c 'GUEST COMMAND'
#   tests/harness/icount-profile.sh -R [-t TOP] [-i INSNS] [-a REGEX]
#
# SHAPEs (tests/guest/icount_profile.c): batch_local_1 (default),
# prepared_local_1, batch_remote_1, prepared_remote_1, batch_cpus4x1,
# prepared_cpus4x1, batch_local_4096, prepared_local_4096, batch_cpus4x8,
# confined_batch_local_1, confined_batch_remote_1, confined_batch_cpus4x1,
# confined_prepared_cpus4x1, confined_batch_cpus4x8 (a descriptor confined
# by an allowlist that lists IA32_PAT), enotty, getppid, empty. N: calls per window (10000; at most 100 for the 4096-op shapes).
# TOP: functions per table (25); INSNS: also the INSNS hottest
# instructions; REGEX: also the disassembly of the functions it matches,
# each instruction with its executions per call. -c runs a guest command of your own instead: every window
# that a program of it marks (`mov $0x4d534250, %eax` ...
# `mov $0x4d534251, %eax`) is a table, per one call. -R: the tables of the
# last run again (other TOP, INSNS, REGEX), without a boot. The tables go to
# target/guest/base/icount-profile/profile.txt (and FILE).
#
# The plugin is built on demand into the cache against the plugin API
# header of the QEMU that runs the guest, taken from that QEMU's Debian
# source package (fetched with a private apt configuration, as
# provision.sh fetches the kernel; the system's apt sources are left alone).
set -euo pipefail
GUEST_FLAVOUR=base
. "$(dirname "$0")/guest.sh"
export GUEST_ICOUNT=1

n=10000 top=25 insns=0 annotate= copy= cmd= again=0
while getopts n:t:i:a:o:c:R opt; do
	case "$opt" in
	n) n=$OPTARG ;;
	t) top=$OPTARG ;;
	i) insns=$OPTARG ;;
	a) annotate=$OPTARG ;;
	o) copy=$OPTARG ;;
	c) cmd=$OPTARG ;;
	R) again=1 ;;
	*) msrb_die "usage: $0 [-n N] [-t TOP] [-i INSNS] [-a REGEX] [-o FILE] [SHAPE...] | -c 'GUEST COMMAND'" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- batch_local_1
case "$n" in '' | *[!0-9]*) msrb_die "-n wants a number of calls, not '$n'" ;; esac

# The plugin API header of the QEMU that runs the guest, from its Debian
# source package: prints the header's directory.
plugin_header() {
	local qemu=$1 ver src upstream dir apt suite mirror sec
	ver=$("$qemu" --version | sed -n 's/.*(Debian \(.*\)).*/\1/p' | tail -n1)
	[ -n "$ver" ] || msrb_die "$qemu is not Debian's QEMU ('$("$qemu" --version | head -n1)'): the plugin is built against the header of Debian's source package"
	src=${ver%+b[0-9]*}	# a binNMU (+bN) has its source's version
	dir="$MSRB_CACHE/qemu-plugin-api/${src//:/_}"
	if [ -f "$dir/qemu-plugin.h" ]; then
		echo "$dir"
		return
	fi
	apt="$MSRB_CACHE/apt-qemu-src"
	suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
	mirror=$(debian_mirror)
	rm -rf "$apt/dl"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl"
	{
		echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main"
		echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite-updates main"
		# Security updates (the system's QEMU is often one) live in their own archive.
		sec=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
			grep -Eo 'https?://[^ ]+/debian-security/?( |$)' | head -n1 | tr -d ' ')
		[ -z "$sec" ] || echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $sec $suite-security main"
	} >"$apt/sources.list"
	msrb_log "fetching the source of qemu $src for its plugin API header (private apt config in $apt)"
	msrb_private_apt "$apt" apt-get update -qq || msrb_die "apt update of the qemu sources failed (see above)"
	if ! msrb_private_apt "$apt" apt-cache showsrc qemu 2>/dev/null | grep -xF "Version: $src" >/dev/null; then
		# Another Debian revision of the same upstream release has the same API.
		upstream=${src#*:}
		upstream=${upstream%-*}
		local other
		other=$(msrb_private_apt "$apt" apt-cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p' |
			grep -F ":$upstream-" | sort -V | tail -n1)
		[ -n "$other" ] || msrb_die "Debian's $suite has no source of qemu $src nor of upstream $upstream: write the header by hand or use a QEMU whose source is there"
		msrb_log "qemu $src's source is gone; using $other (same upstream release, same plugin API)"
		src=$other
	fi
	(cd "$apt/dl" && msrb_private_apt "$apt" apt-get source --download-only -qq "qemu=$src") ||
		msrb_die "could not download the source of qemu $src"
	mkdir -p "$dir.tmp"
	tar -xJf "$apt"/dl/qemu_*.orig.tar.xz -C "$dir.tmp" --no-same-owner --wildcards --strip-components=3 '*/include/qemu/qemu-plugin.h' ||
		msrb_die "no include/qemu/qemu-plugin.h in qemu $src's source"
	rm -rf "$dir" "$apt/dl"
	mv "$dir.tmp" "$dir"
	echo "$dir"
}

# The plugin, built when its source or header changed: prints its path.
plugin_build() {
	local qemu=$1 hdr src="$MSRB_TOP/tests/harness/icount-profile/plugin.c" key so
	hdr=$(plugin_header "$qemu")
	key=$(cat "$src" "$hdr/qemu-plugin.h" | sha256sum | cut -c1-16)
	so="$MSRB_CACHE/icount-profile/plugin-$key.so"
	if [ ! -f "$so" ]; then
		mkdir -p "$MSRB_CACHE/icount-profile"
		gcc -O2 -Wall -Wextra -Werror -shared -fPIC -I"$hdr" -o "$so.tmp" "$src" >&2 ||
			msrb_die "building the plugin $src failed"
		mv "$so.tmp" "$so"
	fi
	echo "$so"
}

out="$GUEST_DIR/icount-profile"
if [ "$again" = 1 ]; then
	[ -s "$out/windows.txt" ] || msrb_die "no earlier run in $out to report again"
	guest_kernel || msrb_die "no base kernel (see above)"
else
	qemu=$(command -v "${GUEST_QEMU:-qemu-system-x86_64}") || msrb_die "no ${GUEST_QEMU:-qemu-system-x86_64}"
	so=$(plugin_build "$qemu")
	msrb_log "plugin: $so"
	guest_prepare || msrb_die "could not build the guest (see above)"
	mkdir -p "$out"
	rm -f "$out/windows.txt"
	[ -n "$cmd" ] || cmd="icount_profile -n $n $*"
	# The module's code sections and the kernel's _stext (KASLR's offset, if
	# any; the boot asks for nokaslr), for the symbols.
	setup='for s in /sys/module/msrbatch/sections/.text* /sys/module/msrbatch/sections/.noinstr*; do [ -e "$s" ] && echo "SECTION ${s##*/} $(cat "$s")"; done; grep " _stext$" /proc/kallsyms | sed "s/^/KALLSYMS /"'
	# The floor driver's (tests/guest/floor), for the floor_ shapes.
	setup="$setup; insmod /lib/modules/msrbatch_floor.ko && for s in /sys/module/msrbatch_floor/sections/.text*; do echo \"FSECTION \${s##*/} \$(cat \"\$s\")\"; done"
	rc=0
	GUEST_QEMU_EXTRA="-plugin $so,out=$out/windows.txt" guest_boot icount-profile "$setup; $cmd" 1800 nokaslr || rc=$?
	[ $rc -eq 0 ] || msrb_die "the guest run failed (exit $rc; see $GUEST_DIR/runs/icount-profile)"
	[ -s "$out/windows.txt" ] || msrb_die "the plugin wrote no window: did the guest run a marked program?"
	tr -d '\r' <"$GUEST_DIR/runs/icount-profile/output.log" >"$out/output.log"
fi
user_bin="$GUEST_OUT/cbin/icount_profile"
python3 "$MSRB_TOP/tests/harness/icount-profile/report.py" "$out/windows.txt" "$out/output.log" \
	"$KBUILD/vmlinux" "$GUEST_DIR/msrbatch-unsigned.ko" "$user_bin" \
	"$MSRB_TOP/tests/harness/icount-budget.txt" "$top" "$insns" "$annotate" \
	"$GUEST_DIR/module/tests/guest/floor/msrbatch_floor.ko" >"$out/profile.txt" ||
	msrb_die "report.py failed on $out/windows.txt"
cat "$out/profile.txt"
[ -z "$copy" ] || cp "$out/profile.txt" "$copy"
