#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs in a guest booted with lockdown=integrity (the harness loaded the
# signed module). An unsigned build is refused, reads work, any batch with a
# write is EPERM and runs nothing, for an unprivileged descriptor under an
# allowlist too.
. /tests/lib.sh
check "kernel booted locked down (integrity)" grep -q '\[integrity\]' /sys/kernel/security/lockdown
check "the signed module is loaded" grep -q '^msrbatch ' /proc/modules
insmod /lib/modules/msrbatch-unsigned.ko >/tmp/insmod.out 2>&1
rc=$?
sed 's/^/# /' /tmp/insmod.out
check "an unsigned module is refused (EPERM)" sh -c "[ $rc -ne 0 ] && grep -q 'Operation not permitted' /tmp/insmod.out"
check "the kernel log says why" sh -c "dmesg | grep -q 'Lockdown: insmod: unsigned module loading is restricted'"
check "reads work under lockdown" sh -c "printf 'cpu all\nrdmsr IA32_TSC_AUX\nrdtscp\n' | msrbatch run -"
# The value is the table's next-to-last column (the status is the last).
before=$(printf 'rdmsr IA32_TSC_AUX\n' | msrbatch run - | awk 'NR == 2 {print $(NF - 1)}')
printf 'rdmsr IA32_TSC_AUX\nwrmsr IA32_TSC_AUX 0x55\n' | msrbatch run - >/tmp/w.out 2>&1
rc=$?
sed 's/^/# /' /tmp/w.out
check "a batch with WRMSR fails with EPERM" sh -c "[ $rc -eq 2 ] && grep -q EPERM /tmp/w.out"
printf 'rmw IA32_TSC_AUX set=0x1\n' | msrbatch run - >/tmp/w.out 2>&1
check "a batch with RMW fails with EPERM" grep -q EPERM /tmp/w.out
after=$(printf 'rdmsr IA32_TSC_AUX\n' | msrbatch run - | awk 'NR == 2 {print $(NF - 1)}')
check "TSC_AUX read before and after, unchanged ($before == $after)" \
	sh -c "[ \"\$1\" = \"\$2\" ] && echo \"\$1\" | grep -q '^0x[0-9a-f]\{16\}$'" _ "$before" "$after"
# Should the write have gone through, put the value back (refused when locked down).
[ "$before" = "$after" ] || printf 'wrmsr IA32_TSC_AUX %s\n' "$before" | msrbatch run - >/dev/null 2>&1
# A descriptor opened without CAP_SYS_RAWIO, under an allowlist that lets it
# write TSC_AUX's bits 31:12: reads work, its masked write is refused too.
chgrp 4242 /dev/msrbatch /dev/msrbatch_allowlist && chmod 0660 /dev/msrbatch && chmod 0640 /dev/msrbatch_allowlist
msrbatch allowlist load /tests/scripts/site.allowlist >/dev/null
check "an unprivileged group member reads under lockdown" runas 1000 4242 msrbatch rdmsr 0xc0000103
runas 1000 4242 msrbatch wrmsr 0xc0000103 0xabcde000 >/tmp/w.out 2>&1
sed 's/^/# /' /tmp/w.out
check "... and its masked write (allowed by the list) is EPERM" grep -q EPERM /tmp/w.out
after=$(printf 'rdmsr IA32_TSC_AUX\n' | msrbatch run - | awk 'NR == 2 {print $(NF - 1)}')
check "TSC_AUX still unchanged ($before == $after)" [ "$before" = "$after" ]
msrbatch allowlist load /dev/null >/dev/null
chgrp 0 /dev/msrbatch /dev/msrbatch_allowlist && chmod 0600 /dev/msrbatch /dev/msrbatch_allowlist
check "no taint from refused writes" sh -c "[ \$(( \$(cat /proc/sys/kernel/tainted) & 4 )) -eq 0 ]"
finish
