#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Unloading is refused while the device is open, and works after close; the
# module is loaded again afterwards for the tests that follow.
. /tests/lib.sh
sleep 30 </dev/msrbatch &
holder=$!
sleep 1
check "rmmod is refused while /dev/msrbatch is open" sh -c "! rmmod msrbatch"
kill "$holder"
wait "$holder" 2>/dev/null
check "rmmod succeeds after close" rmmod msrbatch
check "no msrbatch in /proc/modules after unload" sh -c "! grep -q '^msrbatch ' /proc/modules"
check "no /dev/msrbatch after unload" sh -c "[ ! -e /dev/msrbatch ]"
check "module loads again" insmod /lib/modules/msrbatch.ko
check "reloaded module answers" msrbatch info
# allow_writes given at load time (msrbatch.allow_writes=off in modprobe.d).
# TSC_AUX of CPU 0 is 0 (the kernel sets it to the CPU number), so a write that
# wrongly ran would leave it as it was.
P=/sys/module/msrbatch/parameters/allow_writes
check "unload again" rmmod msrbatch
check "load with allow_writes=off" insmod /lib/modules/msrbatch.ko allow_writes=off
check "the parameter reads off" sh -c "[ \"\$(cat $P)\" = off ]"
check "a write is refused" sh -c "! msrbatch wrmsr -p 0 0xc0000103 0"
check "reads still work" msrbatch rdmsr -p 0 0x277
check "allow_writes=bogus at load is refused" sh -c "rmmod msrbatch && ! insmod /lib/modules/msrbatch.ko allow_writes=bogus"
check "module loads again with the default" insmod /lib/modules/msrbatch.ko
check "the parameter reads default" sh -c "[ \"\$(cat $P)\" = default ]"
finish
