#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs the examples (C raw ioctl, C API, Rust) against the module.
. /tests/lib.sh
ncpu=$(grep -c ^processor /proc/cpuinfo)
for ex in read_msrs_raw read_msrs rust-read-msrs; do
	out=$($ex 2>&1)
	rc=$?
	echo "$out" | sed "s/^/# $ex: /"
	rows=$(echo "$out" | grep -c '^cpu [0-9]')
	check "$ex exits 0 with 3 MSRs x $ncpu CPUs ($rows rows)" [ $rc -eq 0 ] && [ "$rows" -eq $((3 * ncpu)) ]
	check "$ex shows TSC_AUX = CPU number" sh -c "echo \"\$1\" | grep -Ei 'cpu 3 .*(TSC_AUX|0xc0000103).* 0x0*3$' >/dev/null" _ "$out"
done
# CPUID.0AH EAX[7:0] is the architectural PMU version (0: none, as under TCG).
eax=$(printf 'cpuid 0xa\n' | msrbatch run - | awk 'NR == 2 {print $5}')
version=$((0x${eax#eax=} & 0xff))
for ex in count_instructions rust-count-instructions; do
	out=$($ex 2>&1)
	rc=$?
	echo "# $ex: $out"
	if [ "$version" -eq 0 ]; then
		check "$ex says there is no PMU (CPUID.0AH version 0) and exits 0" \
			sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q '^no PMU: CPUID.0AH version 0'" _ "$out"
	else
		check "$ex counted instructions (PMU version $version)" \
			sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q 'instructions retired'" _ "$out"
	fi
done
finish
