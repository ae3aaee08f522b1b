#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The deterministic budget test: boots the base kernel under QEMU
# -icount shift=0,sleep=off (the guest clock advances one ns per guest
# instruction), runs `msrbatch-bench --icount --budget` and `icount_bench
# --budget` (tests/guest/icount_bench.c: each ioctl path and shape, plain,
# prepared and confined), and fails when an instruction count of msrbatch's
# own paths exceeds its budget in tests/harness/icount-budget.txt by more
# than 2 %. Counts repeat to the
# instruction from run to run, but a rare boot reads a few percent higher
# throughout (Documentation/benchmarks.md): a failing boot is retried once and
# each figure is the lower of the two.
# UPDATE=1 writes the measured figures as the new budgets (two boots, each
# figure the higher of the two; the 4-CPU figures at 512 and 4096 ops, which
# differ by up to 5 % between boots, 3 % above it).
set -uo pipefail
GUEST_FLAVOUR=base
. "$(dirname "$0")/guest.sh"
export GUEST_ICOUNT=1
budgets="$MSRB_TOP/tests/harness/icount-budget.txt"
[ "${1:-}" = --prepared ] || { guest_prepare || exit 1; }

measure() { # prints "name value" lines
	guest_boot "icount-budget-$1" 'msrbatch-bench --icount --budget && icount_bench --budget' 900 '' >/dev/null 2>&1 || return 1
	tr -d '\r' <"$GUEST_DIR/runs/icount-budget-$1/output.log" | sed -n 's/^BUDGET //p'
}

compare() { # FILE: prints the table, returns the number of figures over budget
	python3 - "$budgets" "$1" <<'PY'
import sys
budget = {}
for line in open(sys.argv[1]):
    line = line.split("#")[0].split()
    if len(line) == 2:
        budget[line[0]] = float(line[1])
got = dict((l.split()[0], float(l.split()[1])) for l in open(sys.argv[2]) if l.strip())
over = 0
for name, limit in budget.items():
    v = got.get(name)
    if v is None or v != v:
        print(f"not ok - {name}: not measured")
        over += 1
        continue
    ok = v <= limit * 1.02
    over += not ok
    print(f"{'ok' if ok else 'not ok'} - {name}: {v:.1f} guest instructions (budget {limit:.1f}, limit +2 %: {limit * 1.02:.1f})")
for name in sorted(set(got) - set(budget)):
    print(f"# {name}: {got[name]:.1f} (informational, no budget)")
sys.exit(min(over, 100))
PY
}

out="$GUEST_DIR/icount-budget"
mkdir -p "$out"
measure 1 >"$out/run1.txt" || msrb_die "the icount boot failed (see $GUEST_DIR/runs/icount-budget-1)"
if [ "${UPDATE:-0}" = 1 ]; then
	# Two boots, each figure the higher of the two: the multi-CPU figures
	# at 512 ops and more differ from boot to boot by up to 5 % (53.4 and
	# 55.8 per op for a confined prepared 4 x 512, the same module), more
	# than the +2 % a check allows above its budget.
	measure 2 >"$out/run2.txt" || msrb_die "the second icount boot failed (see $GUEST_DIR/runs/icount-budget-2)"
	{
		echo "# Guest instructions (QEMU -icount shift=0), base kernel; written by UPDATE=1 $0"
		echo "# (each the higher figure of two boots; the 4-CPU figures at 512 and 4096 ops, which differ by up to 5 % between boots, 3 % above it)"
		python3 - "$out/run1.txt" "$out/run2.txt" <<'PY'
import re, sys
a = [(l.split()[0], float(l.split()[1])) for l in open(sys.argv[1]) if l.strip()]
b = dict((l.split()[0], float(l.split()[1])) for l in open(sys.argv[2]) if l.strip())
for k, v in a:
    high = max(v, b.get(k, v))
    # With the check's +2 %, 5 % above the higher of two boots.
    if re.search(r"cpus4x(512|4096)_", k):
        high *= 1.03
    print(k, f"{high:.1f}")
PY
	} >"$budgets"
	cat "$budgets"
	exit 0
fi
if compare "$out/run1.txt" >"$out/verdict.txt"; then
	cat "$out/verdict.txt"
	echo "icount budget: 1 boot; $(grep -c '^ok' "$out/verdict.txt") passed, 0 failed"
	exit 0
fi
echo "icount budget: over budget in the first boot; a second boot decides (the lower figure of the two counts):" >&2
cat "$out/verdict.txt" >&2
measure 2 >"$out/run2.txt" || msrb_die "the second icount boot failed"
python3 - "$out/run1.txt" "$out/run2.txt" >"$out/min.txt" <<'PY'
import sys
a = dict((l.split()[0], float(l.split()[1])) for l in open(sys.argv[1]) if l.strip())
b = dict((l.split()[0], float(l.split()[1])) for l in open(sys.argv[2]) if l.strip())
for k in a:
    print(k, min(a[k], b.get(k, a[k])))
PY
compare "$out/min.txt" >"$out/verdict.txt"
rc=$?
cat "$out/verdict.txt"
echo "icount budget: 2 boots; $(grep -c '^ok' "$out/verdict.txt") passed, $(grep -c '^not ok' "$out/verdict.txt") failed"
[ $rc -eq 0 ]
