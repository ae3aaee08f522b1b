# SPDX-License-Identifier: GPL-2.0
# KTAP for the guest tests, sourced by lib.sh and run-all.sh.
#
# ktap_nest NAME LOG COUNTS prints LOG, one test's TAP/KTAP output (kselftest's
# "TAP version 13", a result line per check, the plan at the end, since which
# checks a run makes depends on its CPUs), as a KTAP subtest named NAME:
# indented four spaces, its header and plan in front. It writes "PASS FAIL
# SKIP PLAN RESULTS" to COUNTS: the results at every depth (a nested test's
# own and its parent's line each count), LOG's plan (-1 when it has none: the
# test died before its end) and its number of top-level results, and sets
# them as ktap_p, ktap_f, ktap_s, ktap_plan and ktap_top.
ktap_nest() {
	awk -v name="$1" -v counts="$3" '
		{ sub(/\r$/, "") }
		!header && /^K?TAP version [0-9]+$/ { header = 1; next }
		/^1\.\.[0-9]+$/ { plan = substr($0, 4) + 0; next }
		/^ *(not ok|ok) [0-9]+/ {
			if ($0 ~ /^(not ok|ok) /)
				top++
			if ($0 ~ /^ *not ok /)
				f++
			else if ($0 ~ /# SKIP/)
				s++
			else
				p++
		}
		{ buf[n++] = $0 }
		END {
			print "    KTAP version 1"
			print "    # Subtest: " name
			print "    1.." top + 0
			for (i = 0; i < n; i++)
				print (buf[i] == "" ? "" : "    " buf[i])
			print p + 0, f + 0, s + 0, (plan == "" ? -1 : plan), top + 0 >counts
		}' plan= "$2"
	read -r ktap_p ktap_f ktap_s ktap_plan ktap_top <"$3"
	rm -f "$3"
}

# ktap_why RC, after ktap_nest: why that test failed (its exit status RC, its
# failed checks, a missing or wrong plan), or nothing when it passed.
ktap_why() {
	why=
	[ "$ktap_plan" -ge 0 ] || why="no plan: it stopped before its end"
	[ "$ktap_plan" -lt 0 ] || [ "$ktap_plan" -eq "$ktap_top" ] || why="plan 1..$ktap_plan but $ktap_top results"
	[ "$1" -eq 0 ] || why="${why:+$why, }exit $1"
	[ "$ktap_f" -eq 0 ] || why="${why:+$why, }$ktap_f failed"
	echo "$why"
}
