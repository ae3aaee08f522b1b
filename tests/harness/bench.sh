#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench [ICOUNT=1]: run msrbatch-bench in the guest; write
# target/bench/bench.json, bench.txt and bench.svg (with ICOUNT=1:
# target/bench/icount/..., figures in guest instructions under QEMU -icount).
set -uo pipefail
# Figures from the base kernel: the debug kernel's checkers would dominate.
GUEST_FLAVOUR=base
. "$(dirname "$0")/guest.sh"
guest_prepare || exit 1
out="$MSRB_TOP/target/bench"
args=
if [ "${ICOUNT:-0}" = 1 ]; then
	export GUEST_ICOUNT=1
	out="$out/icount"
	args=--icount
fi
mkdir -p "$out"
msrb_stage "guest: msrbatch-bench $args" guest_boot bench "msrbatch-bench $args" 1200 '' || exit 1
log="$out/output.log"
tr -d '\r' <"$GUEST_DIR/runs/bench/output.log" >"$log"
sed -n '/^BEGIN-BENCH-JSON$/,/^END-BENCH-JSON$/p' "$log" | sed '1d;$d' >"$out/bench.json"
sed '/^BEGIN-BENCH-JSON$/,$d' "$log" >"$out/bench.txt"
[ -s "$out/bench.json" ] || msrb_die "the benchmark printed no JSON (see $log)"
python3 "$MSRB_TOP/tests/harness/plot-bench.py" "$out/bench.json" "$out/bench.svg"
echo "bench: table $out/bench.txt, data $out/bench.json, plot $out/bench.svg"
