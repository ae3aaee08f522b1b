#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest tests of the msrbatch tool's script runner.
p=0
f=0
check() { # check DESCRIPTION COMMAND...
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then echo "ok - $d"; p=$((p + 1)); else echo "not ok - $d"; f=$((f + 1)); fi
}
ncpu=$(grep -c ^processor /proc/cpuinfo)

out=$(msrbatch run /tests/scripts/demo.msr)
echo "$out" | sed 's/^/# /'
check "demo script runs" msrbatch run /tests/scripts/demo.msr
rows=$(echo "$out" | grep -c ' rdmsr ')
check "demo reads 3 MSRs on each of $ncpu CPUs ($rows rows)" [ "$rows" -eq $((3 * ncpu)) ]
check "every demo op succeeded" sh -c "! echo \"\$1\" | awk 'NR > 1 && \$NF != \"ok\"' | grep -q ." _ "$out"
# TSC_AUX holds the CPU number: the rdmsr row of CPU N shows N in its low bits.
for c in $(seq 0 $((ncpu - 1))); do
	v=$(echo "$out" | awk -v c="$c" '$2 == c && $3 == "rdmsr" && $4 == "IA32_TSC_AUX" {print $6}')
	check "cpu $c: TSC_AUX ($v) names cpu $c" [ $((v & 0xfff)) -eq "$c" ]
done

printf 'cpu 0\nrdmsr IA32_PAT\nbogus\n' >/tmp/bad.msr
err=$(msrbatch run /tmp/bad.msr 2>&1)
check "a script error names file, line and column ($err)" sh -c "echo \"\$1\" | grep -q '/tmp/bad.msr:3:1: unknown statement'" _ "$err"
msrbatch run /tmp/bad.msr >/dev/null 2>&1
check "a script error exits 2" [ $? -eq 2 ]
printf 'cpu 0\nrdpmc 0x7fff0000\n' | msrbatch run - >/tmp/fault.out 2>&1
rc=$?
check "a faulting op exits 1 and reports EIO" sh -c "[ $rc -eq 1 ] && grep -q EIO /tmp/fault.out"
printf 'cpu 4095\nrdtsc\n' | msrbatch run - >/tmp/nodev.out 2>&1
check "a rejected batch names the errno and the script line" grep -q 'ENODEV.*script line 2' /tmp/nodev.out
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
