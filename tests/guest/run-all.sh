#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs guest tests and prints KTAP (tools/testing/kunit/kunit.py parse reads
# it): each test's own TAP/KTAP output nested as a subtest
# (tests/guest/ktap.sh), then its result. Counts the checks of all of them
# and fails if a check failed, a test exited non-zero, or a test's output has
# no plan (it died before its end) or a plan its results do not match.
. "$(dirname "$0")/ktap.sh"
total_p=0
total_f=0
total_s=0
bad=0
i=0
echo "KTAP version 1"
echo "1..$#"
for t in "$@"; do
	i=$((i + 1))
	out=/tmp/test-$$.log
	start=$(date +%s)
	sh -c "$t" >"$out" 2>&1
	rc=$?
	ktap_nest "$t" "$out" "$out.counts"
	rm -f "$out"
	echo "# $t: $(($(date +%s) - start)) s, $ktap_p passed, $ktap_f failed, $ktap_s skipped"
	total_p=$((total_p + ktap_p))
	total_f=$((total_f + ktap_f))
	total_s=$((total_s + ktap_s))
	why=$(ktap_why "$rc")
	if [ -z "$why" ]; then
		echo "ok $i $t"
	else
		echo "# $t: $why: FAILED"
		echo "not ok $i $t"
		bad=$((bad + 1))
	fi
done
echo "# guest: $total_p passed, $((total_f + bad)) failed, $total_s skipped"
echo "# Totals: pass:$total_p fail:$((total_f + bad)) xfail:0 xpass:0 skip:$total_s error:0"
[ "$bad" -eq 0 ] && [ "$total_f" -eq 0 ]
