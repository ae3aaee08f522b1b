#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The man pages render without warnings, and msrbatch.1 is what the tool's
# argument definitions generate (msrbatch __man).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
cargo build --quiet -p msrbatch-tool
if ! ./target/debug/msrbatch __man | diff -u Documentation/man/msrbatch.1 - >/dev/null; then
	echo "not ok - Documentation/man/msrbatch.1 is stale: ./target/debug/msrbatch __man > Documentation/man/msrbatch.1"
	exit 1
fi
echo "ok - msrbatch.1 matches the tool's argument definitions"
# msrbatch.4 as make install writes it (the version filled in).
stamped=$(mktemp)
trap 'rm -f "$stamped"' EXIT
sed "s|@VERSION@|$(scripts/version.sh)|" Documentation/man/msrbatch.4 >"$stamped"
for page in Documentation/man/msrbatch.1 "$stamped:Documentation/man/msrbatch.4 (version filled in)"; do
	name=${page#*:}
	page=${page%%:*}
	warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	lines=$(MANWIDTH=80 man -l "$page" 2>/dev/null | wc -l)
	if [ -n "$warn" ] || [ "$lines" -lt 20 ]; then
		echo "not ok - man -l $name: $lines lines, warnings: $warn"
		exit 1
	fi
	echo "ok - man -l $name renders ($lines lines, no warnings)"
done
