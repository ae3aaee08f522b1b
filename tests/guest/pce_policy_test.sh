#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# #13 item 8 (perf's rdpmc policy changing while a grant stands): runs
# pce_policy_test against perf's "rdpmc" knob. The TCG guest has no PMU and
# so no knob: then the test PMU (tests/guest/test-pmu) stands in for it,
# msrbatch is reloaded so that it finds it, and afterwards msrbatch is
# unloaded first (it holds the stand-in), the stand-in second, and msrbatch
# loaded again, as the tests that follow expect.
. /tests/lib.sh
stand_in=0
if [ ! -e /sys/bus/event_source/devices/cpu ]; then
	stand_in=1
	check "insmod the test PMU" insmod /lib/modules/msrbatch_test_pmu.ko
	check "msrbatch reloaded after it" sh -c "rmmod msrbatch && insmod /lib/modules/msrbatch.ko"
fi
check "perf has a cpu PMU with an rdpmc knob" test -f /sys/bus/event_source/devices/cpu/rdpmc
check "with the stand-in, msrbatch holds it (rmmod refused)" sh -c "[ $stand_in = 0 ] || ! rmmod msrbatch_test_pmu"
# Its checks nested as a subtest of this script.
subtest pce_policy_test pce_policy_test
if [ "$stand_in" = 1 ]; then
	check "msrbatch unloaded" rmmod msrbatch
	if grep -q '^msrbatch ' /proc/modules; then
		check "the test PMU left loaded: msrbatch still holds it" false
	else
		check "the test PMU unloaded" rmmod msrbatch_test_pmu
	fi
	check "msrbatch loaded again" sh -c "grep -q '^msrbatch ' /proc/modules || insmod /lib/modules/msrbatch.ko"
	check "no cpu PMU left behind" test ! -e /sys/bus/event_source/devices/cpu
fi
finish
