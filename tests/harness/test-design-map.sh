#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Documentation/design.md is a map of the tree: every source file of the
# module, the library, the tool, the headers, scripts, examples and
# packaging is named there, and every file of the harness and the guest
# tests in Documentation/testing.md (or design.md), so that a new file
# cannot go unmapped. Tests (tests.rs, tests/), test data and generated
# files are not listed one by one.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
design=Documentation/design.md
testing=Documentation/testing.md
bad=0
mentions() { # FILE DOC...: the path or its name is in one of the docs
	local f=$1 base
	shift
	base=$(basename "$f")
	grep -qF -e "$f" -e "$base" "$@" && return 0
	# tests are named without their extension ("abi_test", "tool_test.sh")
	case $f in tests/*) grep -qw -e "${base%.*}" "$@" ;; *) return 1 ;; esac
}
while read -r f; do
	case $f in
	*/tests.rs | */tests/* | */testdata/* | tests/guest/rust/src/*) continue ;;
	rust/* | include/* | scripts/* | examples/* | packaging/* | userspace/*/src/* | Kbuild | Makefile | dkms.conf)
		mentions "$f" "$design" || { echo "not ok - $f is not in $design"; bad=1; } ;;
	tests/*)
		mentions "$f" "$testing" "$design" || { echo "not ok - $f is in neither $testing nor $design"; bad=1; } ;;
	esac
done < <(git ls-files)
[ "$bad" -eq 0 ] && echo "ok - $design and $testing name every file of the tree"
exit "$bad"
