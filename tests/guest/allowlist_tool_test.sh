#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The tool as root and as an unprivileged member of the node's group (uid
# 1000, gid 4242, no capabilities: runas): msrbatch allowlist load/show, and
# rdmsr, wrmsr and run working unchanged within the allowlist, saying why
# when they are refused. The guest has no udev: the nodes get the rule's
# mode and group by hand, and are put back.
. /tests/lib.sh
u() { runas 1000 4242 "$@"; }
list=/tests/scripts/site.allowlist
chgrp 4242 /dev/msrbatch /dev/msrbatch_allowlist
chmod 0660 /dev/msrbatch
chmod 0640 /dev/msrbatch_allowlist
aux0=$(msrbatch rdmsr -p 0 0xc0000103)

out=$(msrbatch allowlist load $list 2>&1)
echo "# $out"
check "root loads $list" sh -c "echo \"\$1\" | grep -q 'loaded: 8 MSRs, 3 with writable bits'" _ "$out"
msrbatch allowlist show >/tmp/show.out
sed 's/^/# /' /tmp/show.out
check "show prints the list in force, msr-safe's number format" grep -qx '0x00000199 0x000000000000FFFF' /tmp/show.out
check "what show prints loads again" msrbatch allowlist load /tmp/show.out
check "a group member shows it too" sh -c "runas 1000 4242 msrbatch allowlist show | cmp -s - /tmp/show.out"
printf '0x10 0\n0x10 0xff\n' >/tmp/dup.allowlist
out=$(msrbatch allowlist load /tmp/dup.allowlist 2>&1)
rc=$?
echo "# $out"
check "a duplicate MSR: exit 2, file and line named" sh -c "[ $rc -eq 2 ] && echo \"\$1\" | grep -q 'dup.allowlist: line 2: this MSR is listed twice (first on line 1)'" _ "$out"
check "... and the list in force is unchanged" sh -c "msrbatch allowlist show | cmp -s - /tmp/show.out"
out=$(u msrbatch allowlist load $list 2>&1)
echo "# $out"
check "a group member cannot load (EACCES from the node's mode)" sh -c "echo \"\$1\" | grep -q EACCES" _ "$out"

check "the user: msrbatch info" u msrbatch info
check "the user: rdmsr IA32_PAT on all CPUs, as root reads it" sh -c "[ \"\$(runas 1000 4242 msrbatch rdmsr -a 0x277)\" = \"\$(msrbatch rdmsr -a 0x277)\" ]"
out=$(u msrbatch rdmsr 0x1b 2>&1)
rc=$?
echo "# $out"
check "the user: rdmsr of an unlisted MSR fails and says the allowlist refused it" sh -c "[ $rc -ne 0 ] && echo \"\$1\" | grep -q 'EACCES.*allowlist'" _ "$out"
out=$(u msrbatch wrmsr 0x277 0 2>&1)
echo "# $out"
check "the user: wrmsr of a read-only MSR says EROFS, write mask 0" sh -c "echo \"\$1\" | grep -q 'EROFS.*write mask 0'" _ "$out"
out=$(u msrbatch wrmsr -p 0 0xc0000103 0xabcde123 2>&1)
rc=$?
echo "# $out"
check "the user: wrmsr -p 0 IA32_TSC_AUX 0xabcde123 runs" [ $rc -eq 0 ]
check "... and says the write mask kept the other bits" sh -c "echo \"\$1\" | grep -q '^msrbatch: note: IA32_TSC_AUX: the allowlist.s write mask 0x[0-9a-f]* kept bits 0x[0-9a-f]* at the MSR.s value'" _ "$out"
aux=$(msrbatch rdmsr -p 0 0xc0000103)
check "only bits 31:12 changed: TSC_AUX of CPU 0 is abcde000 ($aux)" [ "$aux" = abcde000 ]
printf 'cpu 0\nrmw IA32_TSC_AUX clear=0xffffffff set=0x12345fff\nrdmsr IA32_TSC_AUX\nrdtsc\ncpuid 0\n' >/tmp/user.msr
out=$(u msrbatch run /tmp/user.msr 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "the user: a script with rmw, rdmsr, rdtsc and cpuid runs" [ $rc -eq 0 ]
check "... the rmw changed only the mask: 0x12345000" sh -c "echo \"\$1\" | grep -q 'rdmsr.*0x0000000012345000'" _ "$out"
check "... and says so" sh -c "echo \"\$1\" | grep -q 'note: IA32_TSC_AUX: the allowlist.s write mask'" _ "$out"
printf 'cpu 0\nrdtsc\nrdcr4\n' | u msrbatch run - >/tmp/cr4.out 2>&1
check "the user: a script with rdcr4 is refused, naming the line" grep -q 'EACCES.*script line 3' /tmp/cr4.out
check "root's wrmsr putting TSC_AUX of CPU 0 back notes nothing (no mask)" sh -c "[ -z \"\$(msrbatch wrmsr -p 0 0xc0000103 0x$aux0 2>&1)\" ]"
check "TSC_AUX of CPU 0 put back" [ "$(msrbatch rdmsr -p 0 0xc0000103)" = "$aux0" ]
msrbatch allowlist load /dev/null >/dev/null
chgrp 0 /dev/msrbatch /dev/msrbatch_allowlist
chmod 0600 /dev/msrbatch /dev/msrbatch_allowlist
finish
