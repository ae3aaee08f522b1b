#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# provision.sh must say why it stops when Debian no longer has a package it
# fetches through its private apt configuration (the pinned kernel series,
# or the stock stages' QEMU): `apt-cache show` fails for a package it does
# not know, and under pipefail that once ended the script with no word, the
# check after it, with its message, never reached. Runs provision.sh's
# functions with a stand-in for the private apt: its update works, and its
# apt-cache knows no package (apt's status 100). Nothing is fetched.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# run FUNCTION: runs provision.sh's FUNCTION in a shell of its own, with the
# stand-in; prints what it said and returns its status.
run() {
	MSRBATCH_CACHE="$tmp/cache" MSRBATCH_DEBIAN_MIRROR=http://deb.invalid/debian bash -c '
		. "$1/tests/harness/provision.sh"
		msrb_private_apt() {
			case $2 in
			apt-cache) echo "E: No packages found" >&2; return 100 ;;
			*) return 0 ;;
			esac
		}
		"$2"' _ "$top" "$1" 2>&1
}

# expect FUNCTION fails|returns WORDS: FUNCTION stops provisioning (a status
# other than 0) or returns 0 and lets it go on, and says WORDS.
expect() {
	local out rc ended=returns
	out=$(run "$1")
	rc=$?
	[ "$rc" -eq 0 ] || ended=fails
	if [ "$ended" = "$2" ] && printf '%s' "$out" | grep -qF "$3"; then
		echo "ok - provision.sh $1 without the package $2 (exit $rc), saying '$3'"
	else
		echo "not ok - provision.sh $1 without the package $ended (exit $rc), not $2 saying '$3'; it said: ${out:-nothing}"
		failed=1
	fi
}

# The pinned kernel series is what everything builds: provisioning stops.
expect fetch_linux_source fails "is no longer in Debian"
# Only the stock-kernel stages need the newer QEMU: provisioning goes on.
expect fetch_stock_qemu returns "is not in Debian"
exit "$failed"
