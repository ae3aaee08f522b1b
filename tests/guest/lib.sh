# SPDX-License-Identifier: GPL-2.0
# Shared by the guest test scripts: KTAP, as the C tests print it through
# kselftest.h. check DESCRIPTION COMMAND... runs the command quietly and
# prints "ok N DESCRIPTION" or "not ok N DESCRIPTION"; subtest NAME
# COMMAND... runs a test program and nests its KTAP, one result of this
# script; finish prints the plan and the totals and sets the exit status.
. "$(dirname "$0")/ktap.sh"
n=0
p=0
f=0
echo "TAP version 13"
result() { # OK DESCRIPTION
	n=$((n + 1))
	if [ "$1" = 1 ]; then echo "ok $n $2"; p=$((p + 1)); else echo "not ok $n $2"; f=$((f + 1)); fi
}
check() {
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then result 1 "$d"; else result 0 "$d"; fi
}
subtest() {
	d=$1
	shift
	"$@" >/tmp/subtest.$$ 2>&1
	rc=$?
	ktap_nest "$d" /tmp/subtest.$$ /tmp/subtest.$$.counts
	rm -f /tmp/subtest.$$
	why=$(ktap_why "$rc")
	[ -z "$why" ] || echo "# $d: $why"
	if [ -z "$why" ]; then result 1 "$d"; else result 0 "$d"; fi
}
finish() {
	echo "1..$n"
	echo "# Totals: pass:$p fail:$f xfail:0 xpass:0 skip:0 error:0"
	[ "$f" -eq 0 ]
}
