#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# packaging/61-msrbatch-msr-safe.rules gives msr-safe's nodes (msr_safe=1)
# the groups msr-safe's README sets up: "msr-user" the per-CPU, batch and
# version nodes, "msr-admin" the allowlist too. The guest has no udev: apply
# what the rule does by hand (msr-user = 4242, msr-admin = 4243), check who
# may do what, and put the nodes back.
. /tests/lib.sh
rules=/tests/61-msrbatch-msr-safe.rules
nodes="/dev/cpu/0/msr_safe /dev/cpu/msr_batch /dev/cpu/msr_safe_version /dev/cpu/msr_allowlist"
check "the nodes are root's alone by default (0600, version 0400)" sh -c \
	'[ "$(stat -c %a:%u:%g '"$nodes"' | tr "\n" " ")" = "600:0:0 600:0:0 400:0:0 600:0:0 " ]'
saved=$(cat /dev/msrbatch_allowlist)
apply() { # SUBSYSTEM NODE...: the rule's GROUP and MODE for that subsystem
	sub=$1
	shift
	line=$(grep "^SUBSYSTEM==\"$sub\"" "$rules")
	mode=$(echo "$line" | sed -n 's/.*MODE="\([0-7]*\)".*/\1/p')
	case $(echo "$line" | sed -n 's/.*GROUP="\([a-z-]*\)".*/\1/p') in
	msr-user) gid=4242 ;;
	msr-admin) gid=4243 ;;
	*) return 1 ;;
	esac
	echo "# rule: $line"
	chgrp "$gid" "$@" && chmod "$mode" "$@"
}
apply msr_safe /dev/cpu/[0-9]*/msr_safe
apply msr_batch /dev/cpu/msr_batch
apply msr_safe_version /dev/cpu/msr_safe_version
apply msr_allowlist /dev/cpu/msr_allowlist
# IA32_EFER (0xc0000080 = 8 * 402653200: dd reaches it with lseek SEEK_CUR)
printf '0xc0000080 0\n' >/dev/cpu/msr_allowlist
out=$(runas 1000 4242 dd if=/dev/cpu/0/msr_safe bs=8 count=1 skip=402653200 2>/dev/null | od -An -tx8 | tr -d ' ')
echo "# msr-user reads IA32_EFER with dd: $out"
check "an msr-user member without capabilities reads a listed MSR" sh -c "[ -n '$out' ] && [ '$out' != 0000000000000000 ]"
check "... but not one outside the list (EACCES)" sh -c \
	"! runas 1000 4242 dd if=/dev/cpu/0/msr_safe bs=8 count=1 skip=3 of=/dev/null 2>/dev/null"
check "... reads the version node" sh -c "runas 1000 4242 cat /dev/cpu/msr_safe_version | grep -q '^1\.8\.0'"
check "... may not replace the allowlist (node mode)" sh -c \
	"! runas 1000 4242 sh -c 'printf \"0x1b 0\\n\" >/dev/cpu/msr_allowlist' 2>/dev/null"
check "an msr-admin member without capabilities replaces it" sh -c \
	"runas 1000 4243 sh -c 'printf \"0xc0000080 0\\n0x1b 0\\n\" >/dev/cpu/msr_allowlist' && grep -q 0x0000001B /dev/cpu/msr_allowlist"
check "a non-member opens none of them (EACCES)" sh -c \
	"! runas 1001 1001 cat /dev/cpu/msr_safe_version 2>/dev/null && ! runas 1001 1001 dd if=/dev/cpu/0/msr_safe bs=8 count=1 skip=402653200 of=/dev/null 2>/dev/null"
chgrp 0 $nodes /dev/cpu/[0-9]*/msr_safe && chmod 0600 /dev/cpu/[0-9]*/msr_safe /dev/cpu/msr_batch /dev/cpu/msr_allowlist &&
	chmod 0400 /dev/cpu/msr_safe_version
printf "%s\n" "$saved" >/dev/msrbatch_allowlist
finish
