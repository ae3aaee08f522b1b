#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench [ICOUNT=1]: run msrbatch-bench in the guest; write
# target/bench/bench.json, bench.txt and bench.svg (with ICOUNT=1:
# target/bench/icount/..., figures in guest instructions under QEMU -icount,
# and, from tests/guest/icount_bench.c in the same boot, the table of each
# ioctl path's instructions against the targets of issue #26: icount.txt).
set -uo pipefail
# Figures from the base kernel: the debug kernel's checkers would dominate.
GUEST_FLAVOUR=base
. "$(dirname "$0")/guest.sh"
guest_prepare || exit 1
out="$MSRB_TOP/target/bench"
args=
cbench=
if [ "${ICOUNT:-0}" = 1 ]; then
	export GUEST_ICOUNT=1
	out="$out/icount"
	args=--icount
	# icount_bench's own verdict (its ops ran, the floor driver agreed) is
	# the boot's, not the echo's after it.
	cbench='; echo BEGIN-ICOUNT-TABLE; icount_bench; r=$?; echo END-ICOUNT-TABLE; [ $r = 0 ]'
fi
mkdir -p "$out"
msrb_stage "guest: msrbatch-bench $args" guest_boot bench "msrbatch-bench $args$cbench" 1500 '' || exit 1
log="$out/output.log"
tr -d '\r' <"$GUEST_DIR/runs/bench/output.log" >"$log"
sed -n '/^BEGIN-BENCH-JSON$/,/^END-BENCH-JSON$/p' "$log" | sed '1d;$d' >"$out/bench.json"
sed '/^BEGIN-BENCH-JSON$/,$d' "$log" >"$out/bench.txt"
if [ -n "$cbench" ]; then
	sed -n '/^BEGIN-ICOUNT-TABLE$/,/^END-ICOUNT-TABLE$/p' "$log" | sed '1d;$d' >"$out/icount.txt"
	grep -q '^| ' "$out/icount.txt" || msrb_die "icount_bench printed no table (see $log)"
	cat "$out/icount.txt"
fi
[ -s "$out/bench.json" ] || msrb_die "the benchmark printed no JSON (see $log)"
python3 "$MSRB_TOP/tests/harness/plot-bench.py" "$out/bench.json" "$out/bench.svg"
echo "bench: table $out/bench.txt${cbench:+, ioctl paths $out/icount.txt}, data $out/bench.json, plot $out/bench.svg"
