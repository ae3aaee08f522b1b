# SPDX-License-Identifier: GPL-2.0
# Shared by the guest test scripts: KTAP, as the C tests print it through
# kselftest.h. check DESCRIPTION COMMAND... runs the command quietly and
# prints "ok N DESCRIPTION" or "not ok N DESCRIPTION"; subtest NAME
# COMMAND... runs a test program and nests its KTAP, one check of this
# script; skip WHAT WHY reports a check that could not run; finish prints
# the plan and the totals and sets the exit status.
# Its variables start with ktap_: the scripts have their own.
. "$(dirname "$0")/ktap.sh"
ktap_n=0
ktap_pass=0
ktap_fail=0
ktap_skip=0
echo "TAP version 13"
ktap_result() { # 1|0 DESCRIPTION
	ktap_n=$((ktap_n + 1))
	if [ "$1" = 1 ]; then
		echo "ok $ktap_n $2"
		ktap_pass=$((ktap_pass + 1))
	else
		echo "not ok $ktap_n $2"
		ktap_fail=$((ktap_fail + 1))
	fi
}
check() {
	ktap_d=$1
	shift
	if "$@" >/dev/null 2>&1; then ktap_result 1 "$ktap_d"; else ktap_result 0 "$ktap_d"; fi
}
# skip WHAT WHY: a check that could not run here, and why.
skip() {
	ktap_n=$((ktap_n + 1))
	ktap_skip=$((ktap_skip + 1))
	echo "ok $ktap_n # SKIP $1: $2"
}
subtest() {
	ktap_d=$1
	shift
	"$@" >/tmp/subtest.$$ 2>&1
	ktap_rc=$?
	ktap_nest "$ktap_d" /tmp/subtest.$$ /tmp/subtest.$$.counts
	rm -f /tmp/subtest.$$
	ktap_why=$(ktap_why "$ktap_rc")
	[ -z "$ktap_why" ] || echo "# $ktap_d: $ktap_why"
	if [ -z "$ktap_why" ]; then ktap_result 1 "$ktap_d"; else ktap_result 0 "$ktap_d"; fi
}
finish() {
	echo "1..$ktap_n"
	echo "# Totals: pass:$ktap_pass fail:$ktap_fail xfail:0 xpass:0 skip:$ktap_skip error:0"
	[ "$ktap_fail" -eq 0 ]
}
