#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: run msrbatch-bench in the guest; write target/bench/bench.json,
# target/bench/bench.txt and target/bench/bench.svg.
set -uo pipefail
# Figures from the base kernel: the debug kernel's checkers would dominate.
GUEST_FLAVOUR=base
. "$(dirname "$0")/guest.sh"
guest_prepare || exit 1
out="$MSRB_TOP/target/bench"
mkdir -p "$out"
msrb_stage "guest: msrbatch-bench" guest_boot bench 'msrbatch-bench' 1200 '' || exit 1
log="$out/output.log"
tr -d '\r' <"$GUEST_DIR/runs/bench/output.log" >"$log"
sed -n '/^BEGIN-BENCH-JSON$/,/^END-BENCH-JSON$/p' "$log" | sed '1d;$d' >"$out/bench.json"
sed '/^BEGIN-BENCH-JSON$/,$d' "$log" >"$out/bench.txt"
[ -s "$out/bench.json" ] || msrb_die "the benchmark printed no JSON (see $log)"
python3 "$MSRB_TOP/tests/harness/plot-bench.py" "$out/bench.json" "$out/bench.svg"
echo "bench: table $out/bench.txt, data $out/bench.json, plot $out/bench.svg"
