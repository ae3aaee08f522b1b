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
	check "$ex exits 0 with 3 MSRs x $ncpu CPUs ($rows rows)" sh -c "[ $rc -eq 0 ] && [ $rows -eq $((3 * ncpu)) ]"
	check "$ex shows TSC_AUX = CPU number" sh -c "echo \"\$1\" | grep -Ei 'cpu 3 .*(TSC_AUX|0xc0000103).* 0x0*3$' >/dev/null" _ "$out"
done
# With a CPU offline, CPU numbers have a hole: the examples read the online
# ones (they used to ask for CPUs 0..N-1 and failed).
if echo 0 > /sys/devices/system/cpu/cpu1/online; then
	for ex in read_msrs_raw read_msrs rust-read-msrs; do
		out=$($ex 2>&1)
		rc=$?
		rows=$(echo "$out" | grep -c '^cpu [0-9]')
		check "$ex with CPU 1 offline: exits 0 with 3 MSRs x $((ncpu - 1)) CPUs ($rows rows), none of CPU 1" \
			sh -c "[ $rc -eq 0 ] && [ $rows -eq $((3 * (ncpu - 1))) ] && ! echo \"\$1\" | grep -q '^cpu 1 '" _ "$out"
	done
	echo 1 > /sys/devices/system/cpu/cpu1/online
	check "CPU 1 back online" grep -qx 1 /sys/devices/system/cpu/cpu1/online
else
	skip "examples with a CPU offline" "CPU 1 cannot be taken offline"
fi
# The prepared-batch example: three runs of one prepared batch, TSC_AUX with
# a timestamp on every CPU; each CPU's timestamps advance from run to run.
out=$(prepared_tsc_aux 2>&1)
rc=$?
echo "$out" | sed "s/^/# prepared_tsc_aux: /"
rows=$(echo "$out" | grep -c '^run [0-2] cpu [0-9]*: TSC_AUX 0x[0-9a-f]* at TSC [0-9]*$')
check "prepared_tsc_aux exits 0 with 3 runs x $ncpu CPUs ($rows rows)" sh -c "[ $rc -eq 0 ] && [ $rows -eq $((3 * ncpu)) ]"
bad=$(echo "$out" | grep '^run ' | while read -r _ run _ cpu _ aux _ _ tsc; do
	cpu=${cpu%:}
	[ $((aux & 0xfff)) -eq "$cpu" ] || echo "run $run cpu $cpu: TSC_AUX $aux"
	last=$(eval echo "\${last_$cpu:-0}")
	[ "$tsc" -gt "$last" ] || echo "run $run cpu $cpu: TSC $tsc after $last"
	eval "last_$cpu=$tsc"
done)
check "prepared_tsc_aux: TSC_AUX names each CPU, and each CPU's timestamps advance across runs" [ -z "$bad" ]
[ -z "$bad" ] || echo "$bad" | sed 's/^/# /'
# Whether CPU 0 has a usable PMU, as the library's probe (which the examples
# use too) decides it: counters enumerated and RDPMC 0 not faulting. Under
# TCG there is none (CPUID may still enumerate counters; RDPMC faults).
if msrbatch pmu --json | grep -q '"present":true'; then present=1; else present=0; fi
nopmu=$(msrbatch pmu | grep '^no PMU: ')
for ex in count_instructions rust-count-instructions; do
	out=$($ex 2>&1)
	rc=$?
	echo "# $ex: $out"
	if [ "$present" -eq 0 ]; then
		check "$ex says why there is no PMU, as msrbatch pmu does, and exits 0" \
			sh -c "[ $rc -eq 0 ] && [ -n \"\$2\" ] && [ \"\$1\" = \"\$2; nothing to count\" ]" _ "$out" "$nopmu"
	else
		check "$ex counted instructions" \
			sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q 'instructions retired'" _ "$out"
	fi
done
finish
