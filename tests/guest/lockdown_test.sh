#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Raises the kernel's lockdown to integrity (it cannot be lowered again; this
# runs in its own guest boot), then: reads work, any batch with a write is
# EPERM and runs nothing. lockdown= on the command line would also forbid
# loading the unsigned test module, so the level is raised after insmod.
. /tests/lib.sh
echo integrity >/sys/kernel/security/lockdown
check "kernel is locked down" grep -q '\[integrity\]' /sys/kernel/security/lockdown
check "reads work under lockdown" sh -c "printf 'cpu all\nrdmsr IA32_TSC_AUX\nrdtscp\n' | msrbatch run -"
before=$(printf 'rdmsr IA32_TSC_AUX\n' | msrbatch run - | awk 'NR == 2 {print $6}')
printf 'rdmsr IA32_TSC_AUX\nwrmsr IA32_TSC_AUX 0x55\n' | msrbatch run - >/tmp/w.out 2>&1
rc=$?
cat /tmp/w.out | sed 's/^/# /'
check "a batch with WRMSR fails with EPERM" sh -c "[ $rc -eq 2 ] && grep -q EPERM /tmp/w.out"
printf 'rmw IA32_TSC_AUX set=0x1\n' | msrbatch run - >/tmp/w.out 2>&1
check "a batch with RMW fails with EPERM" grep -q EPERM /tmp/w.out
after=$(printf 'rdmsr IA32_TSC_AUX\n' | msrbatch run - | awk 'NR == 2 {print $6}')
check "TSC_AUX unchanged ($before == $after)" [ "$before" = "$after" ]
# Should the write have gone through, put the value back (refused when locked down).
[ "$before" = "$after" ] || printf 'wrmsr IA32_TSC_AUX %s\n' "$before" | msrbatch run - >/dev/null 2>&1
check "no taint from refused writes" sh -c "[ \$(( \$(cat /proc/sys/kernel/tainted) & 4 )) -eq 0 ]"
finish
