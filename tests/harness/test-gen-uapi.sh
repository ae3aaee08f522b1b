#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/gen-uapi.sh without a bindgen to run must say so in one line and
# fail, not exit silently: with no bindgen on PATH and none in the cache, its
# look into the cache (a `ls | head` under pipefail) once ended the script
# with status 2 and no word.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cache"
out=$(BINDGEN="$tmp/no-bindgen" MSRBATCH_CACHE="$tmp/cache" "$top/scripts/gen-uapi.sh" --check 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "bindgen not found"; then
	echo "ok - gen-uapi.sh without bindgen: $out (exit $rc)"
else
	echo "not ok - gen-uapi.sh without bindgen: exit $rc, said: ${out:-nothing}"
	exit 1
fi
