#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# vm.sh run:      boot a fresh guest with msrbatch loaded, run $CMD (files in
#                 $EXTRA under /extra), exit with its status (125 on a
#                 panic, oops, splat, timeout or failed load/unload).
# vm.sh demo:     the newcomer's tour: a sample batch script on every CPU.
# vm.sh selftest: proves the harness fails on a failing command, a panic and
#                 a timeout.
set -uo pipefail
. "$(dirname "$0")/guest.sh"

total_start=$(date +%s)
trap 'echo "==> total: $(( $(date +%s) - total_start )) s" >&2' EXIT

selftest() {
	local rc fails=0
	guest_boot selftest-false 'false' 120 '' --allow-unload-failure
	rc=$?
	if [ $rc -ne 0 ]; then echo "selftest: failing command -> exit $rc: ok"; else echo "selftest: failing command gave 0: FAIL"; fails=1; fi
	guest_boot selftest-panic 'echo c > /proc/sysrq-trigger' 120 ''
	rc=$?
	if [ $rc -eq 125 ]; then echo "selftest: guest panic -> exit $rc: ok"; else echo "selftest: guest panic gave $rc: FAIL"; fails=1; fi
	guest_boot selftest-timeout 'sleep 600' 8 ''
	rc=$?
	if [ $rc -eq 125 ]; then echo "selftest: guest timeout -> exit $rc: ok"; else echo "selftest: guest timeout gave $rc: FAIL"; fails=1; fi
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
