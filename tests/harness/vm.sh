#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# vm.sh run:      boot a fresh guest with msrbatch loaded, run $CMD (files in
#                 $EXTRA under /extra), exit with its status (125 on a
#                 panic, oops, splat, timeout or failed load/unload).
# vm.sh demo:     the newcomer's tour: a sample batch script on every CPU.
# vm.sh selftest: proves the harness fails on a failing command, a panic and
#                 a timeout, that run-all.sh fails a failing test, and that
#                 make vm-run's CMD reaches the guest's shell byte for byte.
set -uo pipefail
. "$(dirname "$0")/guest.sh"

total_start=$(date +%s)
trap 'echo "==> total: $(( $(date +%s) - total_start )) s" >&2' EXIT

# A command that make, an unquoted shell or a lossy hand-over would change:
# '$' and '$$' (make variables), quotes, backslashes, a loop, $(...) and
# backquotes, '#', '%', ',' and a newline.
SELFTEST_CMD='v='"'"'a b'"'"'; for w in '"'"'$v'"'"' "$v" \$v '"'"'$$'"'"' "$((6 * 7))" '"'"'it'"'"'\'"'"''"'"'s'"'"' "c,d" '"'"'e#f'"'"' 100% "$(echo sub)" `echo tick` '"'"'g\h'"'"' $(printf '"'"'%s'"'"' x); do
	printf '"'"'[%s]'"'"' "$w"
done; echo " # not a comment"'

# make vm-run hands CMD, EXTRA and APPEND to vm.sh unchanged (a stand-in
# vm.sh records what it gets; no guest is involved).
selftest_make() {
	local fake rc=0 v
	fake=$(mktemp -d)
	printf '#!/bin/sh\nprintf %%s "$CMD" >"$(dirname "$0")/CMD"\nprintf %%s "$EXTRA" >"$(dirname "$0")/EXTRA"\nprintf %%s "$APPEND" >"$(dirname "$0")/APPEND"\n' >"$fake/vm.sh"
	chmod +x "$fake/vm.sh"
	make -s -C "$MSRB_TOP" vm-run HARNESS="$fake" CMD="$SELFTEST_CMD" EXTRA='a$b c' APPEND='x=$y z="1 2"' || rc=1
	for v in "CMD:$SELFTEST_CMD" 'EXTRA:a$b c' 'APPEND:x=$y z="1 2"'; do
		if [ "$rc" -eq 0 ] && [ "$(cat "$fake/${v%%:*}"; echo .)" = "${v#*:}." ]; then
			echo "selftest: make vm-run passes ${v%%:*} on byte for byte: ok"
		else
			echo "selftest: make vm-run changed ${v%%:*}: '$(cat "$fake/${v%%:*}" 2>/dev/null)': FAIL"
			rc=1
		fi
	done
	rm -rf "$fake"
	return $rc
}

# run-all.sh (run here by busybox sh, as in the guest) passes tests that pass
# or skip, and fails a failed check, a test that exits non-zero, one that
# stops before its plan and one whose plan its results do not match.
selftest_run_all() {
	local rc=0 want cmd got out
	while IFS='|' read -r want cmd; do
		out=$(cd /tmp && /bin/busybox sh "$MSRB_TOP/tests/guest/run-all.sh" "$cmd" 2>&1)
		got=$?
		[ "$got" -eq 0 ] && got=pass || got=fail
		if [ "$got" = "$want" ] && grep -q '^# guest: ' <<<"$out"; then
			echo "selftest: run-all.sh: $want: $cmd: ok"
		else
			echo "selftest: run-all.sh gave $got, not $want, for: $cmd: FAIL"
			printf '%s\n' "$out" | sed 's/^/  /'
			rc=1
		fi
	done <<-'EOF'
		pass|printf 'TAP version 13\nok 1 a\nok 2 b # SKIP why\n1..2\n'
		fail|printf 'TAP version 13\nok 1 a\nnot ok 2 b\n1..2\n'
		fail|printf 'TAP version 13\nok 1 a\n1..1\n'; exit 1
		fail|printf 'TAP version 13\nok 1 a\n'
		fail|printf 'TAP version 13\nok 1 a\n1..2\n'
	EOF
	return $rc
}

selftest() {
	# Four independent boots, side by side (faster than one after another:
	# about 25 s against 41 s for three on the debug kernel here): what make
	# vm-run promises (the module is loaded, CMD's output is streamed, its exit
	# status is the run's, CMD runs as written), a guest panic, and a guest
	# that does not finish in time (before msrbatch is loaded: booted once
	# more). Then, alone, one that hangs after msrbatch was loaded. Without
	# KUnit (kunit.enable=0; the debug guest stage runs it): four debug
	# guests each running its 40 tests at the module's load ran out of
	# their 300 s at c504cc2 on a loaded host.
	local logs="$GUEST_DIR/runs" fails=0
	mkdir -p "$logs"
	selftest_make || fails=1
	selftest_run_all || fails=1
	guest_boot selftest-bytes "$SELFTEST_CMD" 300 'kunit.enable=0' >"$logs/selftest-bytes.txt" 2>&1 &
	local bytes_pid=$!
	guest_boot selftest-exit 'cat /proc/modules; exit 3' 300 'kunit.enable=0' --allow-unload-failure >"$logs/selftest-exit.txt" 2>&1 &
	local exit_pid=$!
	guest_boot selftest-panic 'echo c > /proc/sysrq-trigger' 300 'kunit.enable=0' >"$logs/selftest-panic.txt" 2>&1 &
	local panic_pid=$!
	guest_boot selftest-timeout 'sleep 600' 8 'kunit.enable=0' >"$logs/selftest-timeout.txt" 2>&1 &
	local timeout_pid=$!
	report() { # NAME WANTED RC WHAT
		sed "s/^/  [$1] /" "$logs/$1.txt"
		if [ "$3" -eq "$2" ]; then echo "selftest: $4 -> exit $3: ok"; else echo "selftest: $4 gave $3, not $2: FAIL"; fails=1; fi
	}
	wait $bytes_pid
	report selftest-bytes 0 $? "CMD with quotes, \$, a loop and a newline"
	# The guest's shell printed what the same shell prints here for CMD.
	local want got
	want=$(/bin/busybox sh -c "$SELFTEST_CMD" 2>&1)
	got=$(tr -d '\r' <"$GUEST_DIR/runs/selftest-bytes/output.log")
	if [ -n "$want" ] && [ "$got" = "$want" ]; then echo "selftest: the guest ran CMD as written ($got): ok"; else echo "selftest: the guest printed '$got', not '$want': FAIL"; fails=1; fi
	wait $exit_pid
	report selftest-exit 3 $? "failing command (exit 3)"
	if grep -q '^msrbatch ' "$logs/selftest-exit.txt"; then echo "selftest: msrbatch in the guest's /proc/modules: ok"; else echo "selftest: msrbatch not in the guest's /proc/modules: FAIL"; fails=1; fi
	wait $panic_pid
	report selftest-panic 125 $? "guest panic"
	wait $timeout_pid
	report selftest-timeout 125 $? "guest timeout"
	# 8 s is before /init loads msrbatch: guest_boot booted it once more.
	if [ -f "$logs/selftest-timeout.hung-console.log" ]; then
		echo "selftest: a guest that hung before msrbatch was loaded booted once more: ok"
	else
		echo "selftest: a guest that hung before msrbatch was loaded was not booted again: FAIL"
		fails=1
	fi
	# A hang once msrbatch began to load fails at once (alone: it loads in
	# about 10 s here).
	guest_boot selftest-hang 'sleep 600' 60 'kunit.enable=0' >"$logs/selftest-hang.txt" 2>&1
	report selftest-hang 125 $? "a hang after msrbatch was loaded"
	if [ -f "$logs/selftest-hang.hung-console.log" ]; then
		echo "selftest: a guest that hung after msrbatch was loaded booted again: FAIL"
		fails=1
	else
		echo "selftest: a guest that hung after msrbatch was loaded was not booted again: ok"
	fi
	return $fails
}

case "${1:-}" in
run)
	[ -n "${CMD:-}" ] || msrb_die "usage: make vm-run CMD='command' [EXTRA='files'] [TIMEOUT=s] [APPEND='kernel args']"
	guest_prepare || exit 1
	msrb_stage "guest: $CMD" guest_boot vm-run "$CMD" "${TIMEOUT:-300}" "${APPEND:-}"
	;;
demo)
	guest_prepare || exit 1
	msrb_stage "guest: demo" guest_boot vm-demo \
		'msrbatch info && echo && cat /tests/scripts/demo.msr && echo && msrbatch run /tests/scripts/demo.msr' 300 ''
	;;
selftest)
	guest_prepare || exit 1
	msrb_stage "harness self-test" selftest
	;;
selftest-only) # for check.sh, which has prepared the guest already
	trap - EXIT
	guest_kernel 2>/dev/null && selftest
	;;
*)
	msrb_die "usage: vm.sh run|demo|selftest"
	;;
esac
