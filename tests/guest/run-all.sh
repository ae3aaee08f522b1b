#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs every guest test program; each prints "ok"/"not ok" lines and a
# closing "N passed, N failed". Sums them up and fails if any test failed,
# any program exited non-zero, or any program printed no tally.
total_p=0
total_f=0
bad=0
for t in "$@"; do
	echo "### $t"
	out=/tmp/test-$$.log
	start=$(date +%s)
	sh -c "$t" >"$out" 2>&1
	rc=$?
	cat "$out"
	echo "### $t: $(($(date +%s) - start)) s"
	tally=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
	if [ -z "$tally" ]; then
		echo "### $t: no tally line (exit $rc): FAILED"
		bad=$((bad + 1))
		continue
	fi
	p=${tally%% passed*}
	f=${tally#*passed, }
	f=${f%% failed*}
	total_p=$((total_p + p))
	total_f=$((total_f + f))
	if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
		echo "### $t: exit $rc, $f failed: FAILED"
		bad=$((bad + 1))
	fi
done
echo "guest: $total_p passed, $((total_f + bad)) failed"
[ "$bad" -eq 0 ] && [ "$total_f" -eq 0 ]
