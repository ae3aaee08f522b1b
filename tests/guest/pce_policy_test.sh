#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# #13 item 8 (perf's rdpmc policy changing while a grant stands): loads the
# test PMU (tests/guest/test-pmu: the guest has none, so the knob does not
# exist), reloads msrbatch so that it finds the knob, runs pce_policy_test,
# then unloads both and loads msrbatch again, as the tests that follow expect.
. /tests/lib.sh
check "insmod the test PMU" insmod /lib/modules/msrbatch_test_pmu.ko
check "perf has a cpu PMU with an rdpmc knob" test -f /sys/bus/event_source/devices/cpu/rdpmc
check "msrbatch reloaded after it" sh -c "rmmod msrbatch && insmod /lib/modules/msrbatch.ko"
# Its checks count as this script's.
out=/tmp/pce_policy_test.$$
pce_policy_test >"$out" 2>&1
rc=$?
grep -vE '^[0-9]+ passed, [0-9]+ failed' "$out"
tally=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
rm -f "$out"
if [ -n "$tally" ]; then
	p=$((p + ${tally%% passed*}))
	t=${tally#*passed, }
	f=$((f + ${t%% failed*}))
fi
check "pce_policy_test printed its tally and exited 0 (exit $rc)" test -n "$tally" -a "$rc" -eq 0
check "msrbatch and the test PMU unloaded, msrbatch loaded again" \
	sh -c "rmmod msrbatch && rmmod msrbatch_test_pmu && insmod /lib/modules/msrbatch.ko"
check "no cpu PMU left behind" test ! -e /sys/bus/event_source/devices/cpu
finish
