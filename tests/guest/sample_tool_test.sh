#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest tests of msrbatch sample (a sampler run by the kernel), against
# turbostat's habits: per-period blocks with a summary row, columns in
# turbostat's order, TSC_MHz measured, --add/--show/--hide, Ctrl-C and
# | head; the ONLINE/OFFLINE lines, JSON and CSV shapes, and the refusals.
. /tests/lib.sh
ncpu=$(grep -c ^processor /proc/cpuinfo)
n=20
# TCG reads APERF and MPERF as 0; TSC_AUX holds the CPU number.
printf 'cpu all\nrdtsc\nrdmsr IA32_TSC_AUX\nrdmsr IA32_APERF\nrdmsr IA32_MPERF\n' >/tmp/sample.msr

msrbatch sample -i 1ms --count $n /tmp/sample.msr >/tmp/sample.txt 2>/tmp/sample.err
rc=$?
sed 's/^/# /' /tmp/sample.txt | head -n 16
sed 's/^/# stderr: /' /tmp/sample.err
check "sample -i 1ms --count $n exits 0 (exit $rc)" [ $rc -eq 0 ]
# turbostat's table: per period a header, the summary row (CPU -), then
# one row per CPU in CPU order; turbostat's column order, then each op's
# value named after it.
hdr='CPU  *Avg_MHz  *Busy%  *Bzy_MHz  *TSC_MHz  *TSC  *IA32_TSC_AUX  *IA32_APERF  *IA32_MPERF'
check "the header: turbostat's columns, then the ops' values by name" \
	sh -c "grep -v '^#' /tmp/sample.txt | head -n1 | grep -qx '$hdr'"
blocks=$(grep -c "^$hdr\$" /tmp/sample.txt)
check "a block per period: at least $n headers ($blocks)" [ "$blocks" -ge $n ]
check "every block: the summary row first, then CPUs in increasing order" \
	sh -c "awk '/^#/ { next } /^CPU / { state = 1; next } state == 1 { if (\$1 != \"-\") bad = 1; state = 2; last = -1; next } state == 2 { if (\$1 + 0 <= last) bad = 1; last = \$1 + 0 } END { exit bad }' /tmp/sample.txt"
for c in $(seq 0 $((ncpu - 1))); do
	rows=$(awk -v c="$c" '$1 == c && $NF != "-"' /tmp/sample.txt | wc -l)
	check "cpu $c: $n sample rows ($rows)" [ "$rows" -eq $n ]
	check "cpu $c: one online line" [ "$(grep -c "^# cpu $c online at seq " /tmp/sample.txt)" -eq 1 ]
	check "cpu $c: one offline line after the stop" [ "$(grep -c "^# cpu $c offline at seq " /tmp/sample.txt)" -eq 1 ]
done
msrbatch sample -i 1ms --count $n --format csv /tmp/sample.msr >/tmp/sample.csv 2>/dev/null
rc=$?
check "--format csv exits 0 (exit $rc)" [ $rc -eq 0 ]
check "--format csv: the header" \
	sh -c "head -n1 /tmp/sample.csv | grep -qx 'type,CPU,seq,tsc,lost,Avg_MHz,Busy%,Bzy_MHz,TSC_MHz,TSC,IA32_TSC_AUX,IA32_APERF,IA32_MPERF'"
check "--format csv: every row has the header's 13 fields" \
	sh -c "awk -F, 'NF != 13 { bad = 1 } END { exit bad }' /tmp/sample.csv"
check "--format csv: $((n * ncpu)) sample rows" [ "$(grep -c '^sample,' /tmp/sample.csv)" -eq $((n * ncpu)) ]
check "--format csv: a summary row per period, before its samples" \
	sh -c "awk -F, '\$1 == \"summary\" { s[\$3] = 1 } \$1 == \"sample\" && !s[\$3] { bad = 1 } END { exit bad }' /tmp/sample.csv"
bad=0
while IFS=, read -r type cpu seq tsc lost avg busy bzy tscmhz rdtsc aux aperf mperf; do
	[ "$type" = sample ] || continue
	[ $((aux & 0xfff)) -eq "$cpu" ] || bad=$((bad + 1))
	[ $((rdtsc)) -ge "$tsc" ] || bad=$((bad + 1))
done </tmp/sample.csv
check "--format csv: every sample's TSC_AUX names its CPU, its rdtsc follows its tsc ($bad bad)" [ $bad -eq 0 ]
# TSC_MHz is the TSC's rate measured against CLOCK_MONOTONIC: one figure
# for all rows, within 2 %, and the kernel's calibration within 5 %. (Over
# the nominal periods, TCG's late and early timers made it 16 to 26062 MHz.)
awk -F, '$1 == "sample" && $9 != "" { print $9 }' /tmp/sample.csv | sort -n >/tmp/tscmhz.txt
lo=$(head -n1 /tmp/tscmhz.txt) hi=$(tail -n1 /tmp/tscmhz.txt)
check "TSC_MHz from $lo to $hi over $(wc -l </tmp/tscmhz.txt) rows: within 2 %" \
	sh -c "[ -n '$lo' ] && [ $((hi * 100)) -le $((lo * 102)) ]"
tsc_khz=$(dmesg | sed -n 's/.*tsc: Refined TSC clocksource calibration: \([0-9]*\)\.\([0-9]\{3\}\) MHz.*/\1\2/p;s/.*tsc: Detected \([0-9]*\)\.\([0-9]\{3\}\) MHz processor.*/\1\2/p' | tail -n1)
if [ -n "$tsc_khz" ] && [ -n "$lo" ]; then
	check "TSC_MHz ($lo..$hi) is the kernel's TSC calibration ($tsc_khz kHz) within 5 %" \
		sh -c "[ $((hi * 1000 * 100)) -le $((tsc_khz * 105)) ] && [ $((lo * 1000 * 100)) -ge $((tsc_khz * 95)) ]"
fi
check "--format csv: TSC_MHz from the second sample of a CPU on" \
	sh -c "[ \$(awk -F, '\$1 == \"sample\" && \$9 != \"\"' /tmp/sample.csv | wc -l) -eq $(((n - 1) * ncpu)) ]"

msrbatch sample -i 1ms --count $n --format json /tmp/sample.msr >/tmp/sample.json 2>/dev/null
rc=$?
check "--format json exits 0 (exit $rc)" [ $rc -eq 0 ]
check "--format json: $((n * ncpu)) sample objects" [ "$(grep -c '^{"type":"sample",' /tmp/sample.json)" -eq $((n * ncpu)) ]
check "--format json: every line is one object of a known type" \
	sh -c "! grep -v '^{\"type\":\"\(sample\|online\|offline\|lost\|missed\)\",\"cpu\":[0-9][0-9]*,.*}$' /tmp/sample.json | grep -v '^{\"type\":\"summary\",\"seq\":[0-9]*,.*}$' | grep -v '^{\"type\":\"missed\",\"cpu\":null,\"seq\":[0-9]*,\"periods\":[0-9]*}$' | grep -q ."
check "--format json: samples carry 4 values each" \
	sh -c "! grep '^{\"type\":\"sample\"' /tmp/sample.json | grep -v '\"values\":\[{\"op\":\"rdtsc\",\"register\":\"\",\"value\":[0-9]*,\"value_hex\":\"0x[0-9a-f]*\",\"error\":null},{\"op\":\"rdmsr\",\"register\":\"0xc0000103\",\"name\":\"IA32_TSC_AUX\",\"value\":[0-9]*,\"value_hex\":\"0x[0-9a-f]*\",\"error\":null},{[^]]*},{[^]]*}\]}$' | grep -q ."

# turbostat's --add and --show: TSC_AUX (the CPU's number) raw in 32 bits,
# and its delta (0), under the names given, and only the columns shown.
add='--add msr0xc0000103,u32,cpu,raw,AUX --add msr0xc0000103,delta,AUX_D --show TSC_MHz,AUX,AUX_D'
msrbatch sample -i 2ms --count 5 $add /tmp/sample.msr >/tmp/add.txt 2>&1
rc=$?
sed 's/^/# /' /tmp/add.txt | sed -n '5,8p'
check "--add ... --show: exit 0 ($rc), the columns asked for" \
	sh -c "[ $rc -eq 0 ] && grep -v '^#' /tmp/add.txt | head -n1 | grep -qx 'CPU  *TSC_MHz  *AUX  *AUX_D'"
msrbatch sample -i 2ms --count 5 --csv $add /tmp/sample.msr >/tmp/add.csv 2>&1
check "--add --csv: the header" sh -c "head -n1 /tmp/add.csv | grep -qx 'type,CPU,seq,tsc,lost,TSC_MHz,AUX,AUX_D'"
check "--add raw,u32: every sample's AUX is its CPU (0x%08x), its delta 0 from the second on" \
	sh -c "awk -F, '\$1 == \"sample\" { n++; if (\$7 != sprintf(\"0x%x\", \$2)) bad = 1; if (\$8 != \"\" && \$8 != 0) bad = 1; if (\$8 == 0 && \$8 != \"\") d++ } END { exit bad || n != $((5 * ncpu)) || d != $((4 * ncpu)) }' /tmp/add.csv"
msrbatch sample -i 1ms --count 2 --hide Nope /tmp/sample.msr >/tmp/hide.out 2>&1
rc=$?
check "--hide of a column that is not there: exit 2, naming the columns ($rc)" \
	sh -c "[ $rc -eq 2 ] && grep -q -- '--hide Nope: no such column (the columns: Avg_MHz,Busy%,Bzy_MHz,TSC_MHz,TSC,IA32_TSC_AUX,IA32_APERF,IA32_MPERF)' /tmp/hide.out"

# Ctrl-C: the sampler stops, the last period and every CPU's OFFLINE line
# are printed, exit 0. A reader that goes away (| head): SIGPIPE, quietly.
msrbatch sample -i 50ms /tmp/sample.msr >/tmp/int.out 2>/tmp/int.err &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
tail -n 6 /tmp/int.out | sed 's/^/# /'
check "SIGINT: exit 0 ($rc), nothing on stderr" sh -c "[ $rc -eq 0 ] && [ ! -s /tmp/int.err ]"
check "SIGINT: every CPU's offline line, after the last period's block" \
	sh -c "[ \$(grep -c '^# cpu [0-9]* offline at seq ' /tmp/int.out) -eq $ncpu ] && grep -v '^#' /tmp/int.out | tail -n 1 | grep -q '^[0-9]'"
{ msrbatch sample -i 10ms /tmp/sample.msr; echo $? >/tmp/head.rc; } 2>/tmp/head.err | head -n 3 >/dev/null
check "sample | head -n 3: SIGPIPE ($(cat /tmp/head.rc)), no 'Broken pipe' or panic" \
	sh -c "[ \"\$(cat /tmp/head.rc)\" -eq 141 ] && [ ! -s /tmp/head.err ]"

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
