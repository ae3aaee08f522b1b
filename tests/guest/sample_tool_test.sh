#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest tests of msrbatch sample (a sampler run by the kernel): rows per CPU,
# the ONLINE/OFFLINE lines, JSON and CSV shapes, and the refusals.
. /tests/lib.sh
ncpu=$(grep -c ^processor /proc/cpuinfo)
n=20
# TCG reads APERF and MPERF as 0; TSC_AUX holds the CPU number.
printf 'cpu all\nrdtsc\nrdmsr IA32_TSC_AUX\nrdmsr IA32_APERF\nrdmsr IA32_MPERF\n' >/tmp/sample.msr

msrbatch sample -i 1ms --count $n /tmp/sample.msr >/tmp/sample.txt 2>/tmp/sample.err
rc=$?
sed 's/^/# /' /tmp/sample.txt | head -n 12
sed 's/^/# stderr: /' /tmp/sample.err
check "sample -i 1ms --count $n exits 0 (exit $rc)" [ $rc -eq 0 ]
check "the table's header names the derived columns and the ops" \
	sh -c "head -n1 /tmp/sample.txt | grep -q '^cpu  *seq  *tsc  *TSC_MHz  *Avg_MHz  *Busy%  *Bzy_MHz  *rdtsc  *rdmsr IA32_TSC_AUX  *rdmsr IA32_APERF  *rdmsr IA32_MPERF$'"
for c in $(seq 0 $((ncpu - 1))); do
	rows=$(awk -v c="$c" '$1 == c' /tmp/sample.txt | wc -l)
	check "cpu $c: $n sample rows ($rows)" [ "$rows" -eq $n ]
	check "cpu $c: its seq numbers increase" \
		sh -c "awk -v c=$c '\$1 == c { if (seen && \$2 <= last) bad = 1; last = \$2; seen = 1 } END { exit bad }' /tmp/sample.txt"
	check "cpu $c: one online line" [ "$(grep -c "^# cpu $c online at seq " /tmp/sample.txt)" -eq 1 ]
	check "cpu $c: one offline line after the stop" [ "$(grep -c "^# cpu $c offline at seq " /tmp/sample.txt)" -eq 1 ]
done

msrbatch sample -i 1ms --count $n --format csv /tmp/sample.msr >/tmp/sample.csv 2>/dev/null
rc=$?
check "--format csv exits 0 (exit $rc)" [ $rc -eq 0 ]
check "--format csv: the header" \
	sh -c "head -n1 /tmp/sample.csv | grep -qx 'type,cpu,seq,tsc,lost,TSC_MHz,Avg_MHz,Busy%,Bzy_MHz,rdtsc,rdmsr IA32_TSC_AUX,rdmsr IA32_APERF,rdmsr IA32_MPERF'"
check "--format csv: every row has the header's 13 fields" \
	sh -c "awk -F, 'NF != 13 { bad = 1 } END { exit bad }' /tmp/sample.csv"
check "--format csv: $((n * ncpu)) sample rows" [ "$(grep -c '^sample,' /tmp/sample.csv)" -eq $((n * ncpu)) ]
bad=0
while IFS=, read -r type cpu seq tsc lost tscmhz avg busy bzy rdtsc aux aperf mperf; do
	[ "$type" = sample ] || continue
	[ $((aux & 0xfff)) -eq "$cpu" ] || bad=$((bad + 1))
	[ $((rdtsc)) -ge "$tsc" ] || bad=$((bad + 1))
done </tmp/sample.csv
check "--format csv: every sample's TSC_AUX names its CPU, its rdtsc follows its tsc ($bad bad)" [ $bad -eq 0 ]
check "--format csv: TSC_MHz from the second sample of a CPU on" \
	sh -c "[ \$(awk -F, '\$1 == \"sample\" && \$6 != \"\"' /tmp/sample.csv | wc -l) -eq $(((n - 1) * ncpu)) ]"

msrbatch sample -i 1ms --count $n --format json /tmp/sample.msr >/tmp/sample.json 2>/dev/null
rc=$?
check "--format json exits 0 (exit $rc)" [ $rc -eq 0 ]
check "--format json: $((n * ncpu)) sample objects" [ "$(grep -c '^{"type":"sample",' /tmp/sample.json)" -eq $((n * ncpu)) ]
check "--format json: every line is one object of a known type" \
	sh -c "! grep -v '^{\"type\":\"\(sample\|online\|offline\|lost\)\",\"cpu\":[0-9][0-9]*,.*}$' /tmp/sample.json | grep -q ."
check "--format json: samples carry 4 values each" \
	sh -c "! grep '^{\"type\":\"sample\"' /tmp/sample.json | grep -v '\"values\":\[{\"op\":\"rdtsc\",\"register\":\"\",\"value\":[0-9]*,\"value_hex\":\"0x[0-9a-f]*\",\"error\":null},{\"op\":\"rdmsr\",\"register\":\"0xc0000103\",\"name\":\"IA32_TSC_AUX\",\"value\":[0-9]*,\"value_hex\":\"0x[0-9a-f]*\",\"error\":null},{[^]]*},{[^]]*}\]}$' | grep -q ."

# Refusals: nothing is sampled.
printf 'cpu 0\nrdtsc\nwrmsr 0x10 1\n' >/tmp/sample-write.msr
msrbatch sample -i 1ms --count 2 /tmp/sample-write.msr >/tmp/sample-write.out 2>&1
rc=$?
check "a script that writes exits 2 (exit $rc)" [ $rc -eq 2 ]
check "a script that writes is refused naming its line" \
	grep -q "/tmp/sample-write.msr:3: 'wrmsr IA32_TSC 0x1' cannot be sampled: a sampled script may only read" /tmp/sample-write.out
for i in 0 50us 61s 1xs; do
	msrbatch sample -i $i --count 2 /tmp/sample.msr >/tmp/sample-i.out 2>&1
	rc=$?
	check "-i $i exits 2 (exit $rc)" sh -c "[ $rc -eq 2 ] && grep -q -- '--interval' /tmp/sample-i.out"
done
printf 'cpu 0\nrdtsc\n' | msrbatch sample -i 1ms --count 2 --ring-pages 3 - >/tmp/sample-ring.out 2>&1
rc=$?
check "--ring-pages 3 (not a power of two): exit 2, says so before the ioctl (exit $rc)" sh -c "[ $rc -eq 2 ] && grep -q '3 ring pages: the ring.s pages must be a power of two' /tmp/sample-ring.out"
finish
