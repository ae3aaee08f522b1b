#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest tests of the msrbatch tool's script runner.
. /tests/lib.sh
ncpu=$(grep -c ^processor /proc/cpuinfo)

out=$(msrbatch run /tests/scripts/demo.msr)
echo "$out" | sed 's/^/# /'
check "demo script runs" msrbatch run /tests/scripts/demo.msr
rows=$(echo "$out" | grep -c ' rdmsr ')
check "demo reads 3 MSRs on each of $ncpu CPUs ($rows rows)" [ "$rows" -eq $((3 * ncpu)) ]
check "every demo op succeeded" sh -c "! echo \"\$1\" | awk 'NR > 1 && \$NF != \"ok\"' | grep -q ." _ "$out"
# TSC_AUX holds the CPU number: the rdmsr row of CPU N shows N in its low bits.
for c in $(seq 0 $((ncpu - 1))); do
	v=$(echo "$out" | awk -v c="$c" '$2 == c && $3 == "rdmsr" && $4 == "IA32_TSC_AUX" {print $5}')
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
check "a batch on a CPU that does not exist is refused before the ioctl, naming the line and the CPUs" grep -q -- "^msrbatch: -:2: ENODEV: CPU 4095 does not exist: this machine's CPUs are 0-" /tmp/nodev.out

# IA32_PAT as the kernel set it (Debian's kernels and the harness's differ),
# read through the in-tree driver with msr-tools.
pat=$(rdmsr -p 0 0x277)
pat16=$(printf '%016x' "0x$pat")
# --json: one object per op result; --csv: a header and one row per op.
msrbatch run --json /tests/scripts/demo.msr >/tmp/demo.json
n=$(wc -l </tmp/demo.json)
check "--json prints one object per op ($n for $((5 * ncpu)) ops)" [ "$n" -eq $((5 * ncpu)) ]
check "--json objects carry cpu, op, register, value and error" \
	sh -c "! grep -v '\"cpu\":[0-9]*,\"op\":\"[a-z]*\",\"register\":\"[^\"]*\".*\"value\":[0-9]*,.*\"error\":null}$' /tmp/demo.json | grep -q ."
check "--json names MSRs" grep -q '"name":"IA32_PAT","value":[0-9]*,"value_hex":"0x'"$pat"'"' /tmp/demo.json
msrbatch run --csv /tests/scripts/demo.msr >/tmp/demo.csv
check "--csv has a header and $((5 * ncpu)) rows" sh -c "head -n1 /tmp/demo.csv | grep -qx 'iteration,line,cpu,op,register,value,error,tsc,start_spread,old,aux,ebx,ecx,edx,reads,ticks' && [ \$(wc -l </tmp/demo.csv) -eq $((5 * ncpu + 1)) ]"
check "--csv rows: rdmsr of IA32_PAT on cpu 0, no timestamp, the start spread" grep -qx "0,4,0,rdmsr,0x277,0x$pat,,,[0-9][0-9]*,,,,,,," /tmp/demo.csv
printf 'cpu 1\nrdtsc\n' | msrbatch run --csv --repeat 3 --interval 10ms - >/tmp/rep.csv
check "--repeat 3 runs the batch 3 times" sh -c "[ \$(grep -c ',rdtsc,' /tmp/rep.csv) -eq 3 ] && [ \$(cut -d, -f1 /tmp/rep.csv | sort -u | wc -l) -eq 4 ]"
t1=$(sed -n 2p /tmp/rep.csv | cut -d, -f6)
t3=$(sed -n 4p /tmp/rep.csv | cut -d, -f6)
check "--repeat samples advance ($t1 < $t3)" [ $((t1)) -lt $((t3)) ]
check "--repeat reruns a prepared batch: no start spread" sh -c "! cut -d, -f9 /tmp/rep.csv | grep -q '[0-9]'"
# --repeat in the table: one table per run, each named.
printf 'cpu 0\nrdmsr IA32_PAT\ncpu 1\nrdmsr IA32_TSC_AUX\n' | msrbatch run --repeat 3 - >/tmp/rep.txt
rc=$?
sed 's/^/# /' /tmp/rep.txt
check "run --repeat 3: exit $rc, three tables named iteration 0, 1, 2" \
	sh -c "[ $rc -eq 0 ] && [ \"\$(grep '^# iteration' /tmp/rep.txt | tr '\n' ' ')\" = '# iteration 0 # iteration 1 # iteration 2 ' ]"
check "run --repeat 3: every run read IA32_PAT and TSC_AUX of CPU 1" \
	sh -c "[ \$(grep -c ' rdmsr IA32_PAT  *0x$pat16  *ok$' /tmp/rep.txt) -eq 3 ] && [ \$(grep -c '^4  *1  *rdmsr IA32_TSC_AUX  *0x0*1  *ok$' /tmp/rep.txt) -eq 3 ]"

# A synchronised start: the table gets a tsc column and the start spread.
# Emulation can keep a CPU from arriving in time (ETIMEDOUT): tried again.
printf 'sync-start\ncpu all\nrdtsc\n' >/tmp/sync.msr
for try in 1 2 3 4 5; do
	msrbatch run /tmp/sync.msr >/tmp/sync.out 2>&1
	rc=$?
	grep -q ETIMEDOUT /tmp/sync.out || break
done
sed 's/^/# /' /tmp/sync.out
check "a sync-start script runs on $ncpu CPUs (exit $rc, try $try)" \
	sh -c "[ $rc -eq 0 ] && [ \$(grep -c ' rdtsc ' /tmp/sync.out) -eq $ncpu ] && head -n1 /tmp/sync.out | grep -q 'status  *tsc$'"
check "a sync-start script shows the start spread" grep -qx 'start spread: [0-9][0-9]* TSC ticks' /tmp/sync.out
# Timestamps in JSON: every op has one, after its own value, in order.
printf 'timestamps\ncpu 1\nrdtsc\nrdmsr IA32_PAT\nrdtsc\n' | msrbatch run --json - >/tmp/ts.json
sed 's/^/# /' /tmp/ts.json
tscs=$(sed -n 's/.*"tsc":\([0-9]*\).*/\1/p' /tmp/ts.json | tr '\n' ' ')
v1=$(sed -n '1s/.*"value":\([0-9]*\),.*/\1/p' /tmp/ts.json)
check "--json with timestamps: a tsc per op ($tscs), in order, after the value read ($v1)" \
	sh -c "set -- $tscs; [ \$# -eq 3 ] && [ \$1 -ge $v1 ] && [ \$2 -ge \$1 ] && [ \$3 -ge \$2 ]"
check "--json with timestamps: the start spread (one CPU: 0)" sh -c "[ \$(grep -c '\"start_spread\":0,' /tmp/ts.json) -eq 3 ]"
printf 'cpu 0\nrdtsc\nrdtscp\n' | msrbatch run --timestamps - >/tmp/tsbad.out 2>&1
rc=$?
check "run --timestamps with rdtscp: exit $rc, refused at line 3, saying why" sh -c "[ $rc -eq 2 ] && grep -q '^msrbatch: -:3: EINVAL: .rdtscp. returns a second value itself' /tmp/tsbad.out"
check "info shows the busy budget per CPU" sh -c "msrbatch info | grep -qx 'max busy per CPU:   20000000 ns'"

# msr-tools compatibility: the same options give the same text as msr-tools'
# rdmsr, which reads the in-tree driver's /dev/cpu/N/msr. Each option set runs
# once; the CPU selection alternates between one CPU and all, and the register
# rotates so that both selections meet all four values (large, small,
# per-CPU, address-like).
mismatch=0
total=0
set -- 0x277 0xc0000080 0xc0000103 0x1b
for opts in "" -x -X -d -u -o -c -0 "-0 -c" "-X -0 -c" "-u -0" "-u -c" "-d -0" "-o -0" "-o -c" "-o -0 -c" \
	"-f 7:0" "-f 63:32 -0" "-f 11:0 -d" "-f 3:0 -d -0" "-c -r" "-r"; do
	if [ $((total % 2)) -eq 0 ]; then sel="-p 2"; else sel=-a; fi
	eval "reg=\${$(((total + total / 4) % 4 + 1))}"
	total=$((total + 1))
	# shellcheck disable=SC2086
	rdmsr $sel $opts $reg >/tmp/ref.out 2>&1
	# shellcheck disable=SC2086
	msrbatch rdmsr $sel $opts $reg >/tmp/our.out 2>&1
	if ! cmp -s /tmp/ref.out /tmp/our.out; then
		mismatch=$((mismatch + 1))
		echo "# rdmsr $sel $opts $reg: msr-tools '$(od -c /tmp/ref.out | head -n2)' msrbatch '$(od -c /tmp/our.out | head -n2)'"
	fi
done
check "msrbatch rdmsr prints what msr-tools rdmsr prints ($((total - mismatch))/$total option sets)" [ "$mismatch" -eq 0 ]
# Whole command lines, with msr-tools' long options and repeated options
# (the last radix or CPU option wins): the same output and exit status.
same=0
n=0
for args in "--cpu 1 0xc0000103" "--processor=2 --zero-fill 0x277" "--cpu 1 --all 0xc0000103" \
	"--all --cpu 1 0xc0000103" "--capital-hexadecimal --zero-pad 0x277" "--signed-decimal --bitfield 11:0 0x277" \
	"--unsigned-decimal --c-language 0xc0000080" "--hexadecimal --zero-fill --c-language 0x1b" \
	"-d -x 0x277" "-x -d -f 15:0 0x277" "-X -o -c 0x277" "-p 1 -p 2 0xc0000103" "-0 -0 0x277" \
	"-f 4:7 0x10" "" "0x10 0x20" "-Z 0x10" "-p x 0x10" "-f 70:0 0x10" "-f 7 0x10"; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	rdmsr $args >/tmp/ref.out 2>/dev/null
	ref=$?
	# shellcheck disable=SC2086
	msrbatch rdmsr $args >/tmp/our.out 2>/dev/null
	our=$?
	if [ "$ref" -eq "$our" ] && cmp -s /tmp/ref.out /tmp/our.out; then
		same=$((same + 1))
	else
		echo "# rdmsr $args: msr-tools exit $ref '$(head -c 40 /tmp/ref.out)', msrbatch exit $our '$(head -c 40 /tmp/our.out)'"
	fi
done
check "msr-tools' long options, repeats and usage errors: same output and exit status ($same/$n)" [ "$same" -eq "$n" ]
same=0
n=0
for args in "0x10" "" "-Z 0x10 1" "-p x 0x10 1" "--bogus 0x10 1"; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	wrmsr $args >/dev/null 2>&1
	ref=$?
	# shellcheck disable=SC2086
	msrbatch wrmsr $args >/dev/null 2>&1
	our=$?
	if [ "$ref" -eq "$our" ]; then same=$((same + 1)); else echo "# wrmsr $args: msr-tools exit $ref, msrbatch exit $our"; fi
done
check "wrmsr usage errors: msr-tools' exit status ($same/$n)" [ "$same" -eq "$n" ]
# No such CPU: msr-tools' status 2 and message, for a CPU that does not exist
# and for one that is offline (msr-tools itself says 127 there, because the
# in-tree driver removes the offline CPU's node: "open: No such file").
err=$(msrbatch rdmsr -p 4095 0x10 2>&1)
rc=$?
check "rdmsr -p 4095: exit $rc, '$err'" [ "$rc.$err" = "2.rdmsr: No CPU 4095" ]
last=$((ncpu - 1))
if [ "$last" -gt 0 ] && echo 0 >/sys/devices/system/cpu/cpu$last/online; then
	err=$(msrbatch rdmsr -p $last 0x10 2>&1)
	rc=$?
	werr=$(msrbatch wrmsr -p $last 0xc0000103 1 2>&1)
	wrc=$?
	echo 1 >/sys/devices/system/cpu/cpu$last/online
	check "rdmsr -p $last with CPU $last offline: exit $rc, '$err'" [ "$rc.$err" = "2.rdmsr: No CPU $last" ]
	check "wrmsr -p $last with CPU $last offline: exit $wrc, '$werr'" [ "$wrc.$werr" = "2.wrmsr: No CPU $last" ]
else
	echo "# skipped: the offline-CPU test needs a second CPU that can go offline"
fi
rdmsr -a 0xc0000103 >/tmp/aux.orig
msrbatch wrmsr -p 1 0xc0000103 0x77
check "msrbatch wrmsr -p 1: msr-tools reads 77 back" [ "$(rdmsr -p 1 0xc0000103)" = 77 ]
msrbatch wrmsr -a 0xc0000103 0x5 0x6
check "msrbatch wrmsr -a with two values: every CPU has the last" sh -c "[ \$(rdmsr -a 0xc0000103 | grep -cx 6) -eq $ncpu ]"
c=0
while read -r v; do wrmsr -p "$c" 0xc0000103 "0x$v"; c=$((c + 1)); done </tmp/aux.orig
check "TSC_AUX restored on every CPU" sh -c "rdmsr -a 0xc0000103 | cmp -s - /tmp/aux.orig"
# --restore: the write happens (the same batch reads it back) and is undone
# when the tool exits.
aux1=$(rdmsr -p 1 0xc0000103)
msrbatch wrmsr --restore -p 1 0xc0000103 0x99
rc=$?
check "wrmsr --restore -p 1 of TSC_AUX: exit $rc, TSC_AUX ($aux1) unchanged after the tool exits" \
	sh -c "[ $rc -eq 0 ] && [ \$(rdmsr -p 1 0xc0000103) = $aux1 ]"
printf 'cpu 1\nwrmsr IA32_TSC_AUX 0x99\nrdmsr IA32_TSC_AUX\n' | msrbatch run --restore --csv - >/tmp/restore.csv
rc=$?
check "run --restore: the script read its write back (exit $rc)" grep -q '^0,3,1,rdmsr,0xc0000103,0x99,' /tmp/restore.csv
check "run --restore: TSC_AUX of CPU 1 is $aux1 again after the tool exits" [ "$(rdmsr -p 1 0xc0000103)" = "$aux1" ]
# A faulting write: IA32_PKRS (0x6e1) with a reserved bit set raises #GP, so
# nothing changes. Same message and exit status (4) as msr-tools; with -a the
# message names the CPU that failed.
ref=$(wrmsr -p 1 0x6e1 0x100000000 2>&1)
rrc=$?
if [ "$rrc" -eq 4 ]; then
	our=$(msrbatch wrmsr -p 1 0x6e1 0x100000000 2>&1)
	orc=$?
	check "wrmsr -p 1 of a faulting write: exit $orc, '$our', as msr-tools" [ "$orc.$our" = "$rrc.$ref" ]
	our=$(msrbatch wrmsr -a 0x6e1 0x100000000 2>&1)
	orc=$?
	check "wrmsr -a of a faulting write: exit $orc, '$our'" \
		[ "$orc.$our" = "4.wrmsr: CPU 0 cannot set MSR 0x000006e1 to 0x0000000100000000" ]
else
	echo "# skipped: writing IA32_PKRS bit 32 did not fault here (msr-tools: exit $rrc, '$ref'), so there is no faulting write to compare"
fi

# Counter programming helpers.
eax=$(printf 'cpuid 0xa\n' | msrbatch run - | awk 'NR == 2 {print $6}')
version=$((0x${eax#eax=} & 0xff))
msrbatch pmu >/tmp/pmu.out
sed 's/^/# /' /tmp/pmu.out
if [ "$version" -eq 0 ]; then
	check "pmu reports no PMU (CPUID.0AH version 0, RDPMC faults)" grep -q "^no PMU: " /tmp/pmu.out
	check "pmu --json: not present, RDPMC 0 faulted" \
		sh -c "msrbatch pmu --json | grep -q '\"present\":false.*\"rdpmc_ok\":false'"
	# perf stat's habits without a PMU: CMD runs, its output alone on
	# stdout, the counts <not supported> on stderr, CMD's exit status.
	msrbatch stat -e instructions,cycles -- sh -c 'echo out; exit 3' >/tmp/stat.out 2>/tmp/stat.err
	rc=$?
	sed 's/^/# /' /tmp/stat.err
	check "stat without a PMU runs CMD and exits with its status (3: $rc)" [ $rc -eq 3 ]
	check "... CMD's output alone on stdout" [ "$(cat /tmp/stat.out)" = out ]
	check "... <not supported> per event, perf's table on stderr" \
		sh -c "grep -q '^ Performance counter stats for .CPU(s) 0. while .sh -c echo out; exit 3. ran:$' /tmp/stat.err && grep -qx '   <not supported>      instructions' /tmp/stat.err && grep -qx '   <not supported>      cycles' /tmp/stat.err"
	check "... the elapsed time, and why on stderr" \
		sh -c "grep -q '^ *[0-9]*\.[0-9]\{9\} seconds time elapsed$' /tmp/stat.err && grep -q 'CPU 0: no PMU.*<not supported>' /tmp/stat.err"
	out=$(msrbatch stat -x, -e instructions -C 0-1 -A -- true 2>&1 | grep -v '^msrbatch:')
	check "stat -x, -A -C 0-1: perf's CSV per CPU ($out)" \
		[ "$out" = "$(printf 'CPU0,<not supported>,,instructions,0,100.00,,\nCPU1,<not supported>,,instructions,0,100.00,,')" ]
	out=$(msrbatch stat -j -e instructions -a -- true 2>&1 | grep -v '^msrbatch:')
	check "stat -j -a: perf's JSON ($out)" \
		[ "$out" = '{"counter-value" : "<not supported>", "unit" : "", "event" : "instructions", "event-runtime" : 0, "pcnt-running" : 100.00}' ]
	rm -f /tmp/stat.o
	msrbatch stat -o /tmp/stat.o -e cycles -- sh -c 'kill -TERM $$' 2>/tmp/stat.err
	rc=$?
	check "stat: a CMD killed by SIGTERM exits 128+15 ($rc)" [ $rc -eq 143 ]
	check "stat -o FILE: the counts in FILE, not on stderr" \
		sh -c "grep -q '<not supported>      cycles' /tmp/stat.o && ! grep -q 'not supported>  ' /tmp/stat.err"
	msrbatch stat -I 100 -x, -e cycles -- sleep 0.45 >/tmp/stat.out 2>&1
	rows=$(grep -c '^[0-9]*\.[0-9]*,<not supported>,,cycles,' /tmp/stat.out)
	check "stat -I 100 -x,: a row per interval of 100 ms and the last part, time first ($rows rows for 0.45 s)" \
		sh -c "[ $rows -ge 5 ] && [ $rows -le 8 ]"
	msrbatch stat -r 0 -e cycles -- true >/tmp/stat.out 2>&1
	rc=$?
	check "stat -r 0 is refused with words ($rc)" sh -c "[ $rc -eq 2 ] && grep -q 'at least 1' /tmp/stat.out"
	check "pmu -C 0-1: one report per CPU" [ "$(msrbatch pmu -C 0-1 --json | wc -l)" -eq 2 ]
else
	check "pmu reports version $version" grep -q "architectural perfmon version $version" /tmp/pmu.out
fi
rt=0
for v in 0x4300c0 0x41013c 0x1d300c5 0x10043412e 0xf00ff00ff 0x0; do
	spec=$(msrbatch evsel "$v" | sed 's/  #.*//')
	back=$(msrbatch evsel "$spec")
	[ "$((back))" -eq "$((v))" ] || { rt=$((rt + 1)); echo "# evsel $v -> $spec -> $back"; }
done
check "evsel decode/encode round trips" [ "$rt" -eq 0 ]
# A reader that goes away ends the tool by SIGPIPE, without a word.
{ sleep 0.3; msrbatch evsel 0x4300c0; echo $? >/tmp/pipe.rc; } 2>/tmp/pipe.err | true
check "evsel | (closed pipe): SIGPIPE, 141 ($(cat /tmp/pipe.rc)), nothing on stderr" \
	sh -c "[ \"\$(cat /tmp/pipe.rc)\" -eq 141 ] && [ ! -s /tmp/pipe.err ]"
check "evsel encodes instructions,usr,os,en" [ "$(msrbatch evsel instructions,usr,os,en)" = 0x4300c0 ]
check "evsel names architectural events" sh -c "msrbatch evsel 0x43003c | grep -q '# cycles'"
msrbatch stat -e instructions,cycles,branches -C 1 --counters 2 --dry-run -- true >/tmp/dry.out
sed 's/^/# /' /tmp/dry.out
check "stat --dry-run rotates 3 events over 2 counters in 2 groups" \
	sh -c "grep -q '^# group 1 (instructions, cycles)' /tmp/dry.out && grep -q '^# group 2 (branches)' /tmp/dry.out"
check "stat --dry-run shows the programming batch" \
	sh -c "grep -q '^wrmsr IA32_PERFEVTSEL0 0x4300c0$' /tmp/dry.out && grep -q '^wrmsr IA32_PERFEVTSEL1 0x43003c$' /tmp/dry.out && grep -q '^rmw IA32_PERF_GLOBAL_CTRL clear=0x0 set=0x3$' /tmp/dry.out"
check "stat --dry-run fences RDPMC with CPUID and restores" \
	sh -c "grep -A1 '^cpuid 0x0 0$' /tmp/dry.out | grep -q '^rdpmc 0$' && grep -q '^wrmsr IA32_PERF_GLOBAL_CTRL 0x0$' /tmp/dry.out"

finish
