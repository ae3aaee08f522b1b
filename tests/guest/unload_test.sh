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
finish
