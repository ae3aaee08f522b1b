# SPDX-License-Identifier: GPL-2.0
# Shared by the guest test scripts: check DESCRIPTION COMMAND... runs the
# command quietly and prints "ok - ..." or "not ok - ..."; finish prints the
# tally line run-all.sh reads and sets the exit status.
p=0
f=0
check() {
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then echo "ok - $d"; p=$((p + 1)); else echo "not ok - $d"; f=$((f + 1)); fi
}
finish() {
	echo "$p passed, $f failed"
	[ "$f" -eq 0 ]
}
