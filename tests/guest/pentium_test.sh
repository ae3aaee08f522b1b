#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest tests of the Pentium (P5) counters (#31 item 4): what QEMU's TCG does
# with the P5 MSRs CESR (0x11), CTR0 (0x12) and CTR1 (0x13), and pmu, stat
# --dry-run and stat --sweep on the two Pentium CPUID dumps (tests/cpuid/,
# copied from userspace/msrbatch/testdata/cpuid by tests/harness/guest.sh),
# through the real binary.
#
# This runs in the harness's 64-bit TCG guest (-cpu max), not with QEMU's
# -cpu pentium: that model has no long mode (CPUID.80000001H:EDX[29] clear),
# so the 64-bit test kernel cannot boot on it, and a 32-bit kernel without
# the module's Rust toolchain target is not something this harness builds.
# The Pentium's counters are therefore tested here through the dumps, and
# the MSRs themselves as TCG implements them on -cpu max. Everything written
# is written back to the value read before (checked with msr-tools).
. /tests/lib.sh
ncpu=$(grep -c ^processor /proc/cpuinfo)
last=$((ncpu - 1))

# 1. What TCG does with 0x11-0x13. msr-tools (the in-tree msr driver) is the
# reference reader; msrbatch must print the same.
for m in 0x11 0x12 0x13; do
	rdmsr -a "$m" >/tmp/p5-$m.orig 2>&1
	rrc=$?
	ref=$(cat /tmp/p5-$m.orig)
	our=$(msrbatch rdmsr -a "$m" 2>&1)
	orc=$?
	vals=$(echo "$ref" | tr '\n' ' ')
	echo "# TCG rdmsr -a $m: msr-tools exit $rrc, '$vals'; msrbatch exit $orc"
	check "rdmsr -a $m: msrbatch prints what msr-tools prints (exit $orc, '$vals')" [ "$orc.$our" = "$rrc.$ref" ]
	check "TCG: MSR $m reads without a fault, as 0, on all $ncpu CPUs (exit $rrc, '$vals')" \
		sh -c "[ $rrc -eq 0 ] && [ \$(grep -cx 0 /tmp/p5-$m.orig) -eq $ncpu ] && [ \$(wc -l </tmp/p5-$m.orig) -eq $ncpu ]"
done
ref=$(rdmsr -p "$last" -0 -c 0x12 2>&1)
our=$(msrbatch rdmsr -p "$last" -0 -c 0x12 2>&1)
check "rdmsr -p $last -0 -c 0x12: '$our', as msr-tools" [ "$our" = "$ref" ]

# Writes: CESR with both halves programmed (INSTRUCTIONS_EXECUTED:os:usr on
# CTR0, INSTRUCTIONS_EXECUTED_V_PIPE:os:usr on CTR1), a 40-bit CTR0 value,
# CTR1 on every CPU.
# wrmsr_ignored CPU MSR NAME VALUE: under TCG the write does not fault and
# the MSR still reads 0.
wrmsr_ignored() {
	msrbatch wrmsr -p "$1" "$2" "$4" 2>/tmp/p5-w.err
	wrc=$?
	after=$(rdmsr -p "$1" "$2" 2>&1)
	echo "# TCG wrmsr -p $1 $2 $4: exit $wrc '$(cat /tmp/p5-w.err)'; $3 now reads '$after'"
	check "TCG: msrbatch wrmsr -p $1 of $3 $4 does not fault (exit $wrc) and is ignored: $3 reads '$after'" \
		[ "$wrc.$after" = "0.0" ]
}
wrmsr_ignored 1 0x11 CESR 0xd700d6
wrmsr_ignored 0 0x12 CTR0 0x123456789a
msrbatch wrmsr -a 0x13 0xffffffffff 2>/tmp/p5-w.err
wrc=$?
after=$(rdmsr -a 0x13 2>&1 | tr '\n' ' ')
check "TCG: msrbatch wrmsr -a of CTR1 0xffffffffff: exit $wrc, every CPU's CTR1 reads '$after'" \
	sh -c "[ $wrc -eq 0 ] && [ \$(rdmsr -a 0x13 | grep -cx 0) -eq $ncpu ]"
# One batch: the write, the read-modify-write of CESR's upper half (the way
# stat programs one counter) and the reads, with the device's restore on.
printf 'cpu %s\nrdmsr P5_CESR\nwrmsr P5_CESR 0x16\nrdmsr P5_CESR\nrmw P5_CESR clear=0x3ff0000 set=0x170000\nrdmsr P5_CESR\nwrmsr P5_CTR0 0xff\nrdmsr P5_CTR0\nrdmsr P5_CTR1\n' "$last" |
	msrbatch run --restore --csv - >/tmp/p5-batch.csv 2>&1
rc=$?
sed 's/^/# /' /tmp/p5-batch.csv
reads=$(awk -F, '$4 == "rdmsr" {printf "%s ", $6}' /tmp/p5-batch.csv)
check "TCG: a batch writing CESR, RMW of its upper half and CTR0 on CPU $last: exit $rc, no op failed, every read 0 ($reads)" \
	sh -c "[ $rc -eq 0 ] && [ \$(awk -F, 'NR > 1 && \$7 == \"\"' /tmp/p5-batch.csv | wc -l) -eq 8 ] && [ '$reads' = '0x0 0x0 0x0 0x0 0x0 ' ]"
# RDPMC, the way stat reads a Pentium with MMX: TCG raises #UD for every
# counter (it implements none), so live counting there is impossible.
printf 'cpu 0\nrdpmc 0\n' | msrbatch run - >/tmp/p5-rdpmc.out 2>&1
rc=$?
sed 's/^/# /' /tmp/p5-rdpmc.out
check "TCG: RDPMC 0 (CTR0 on a Pentium with MMX) faults: exit $rc, EIO" sh -c "[ $rc -eq 1 ] && grep -q EIO /tmp/p5-rdpmc.out"
# msrbatch wrmsr --restore: back to the value before when the tool exits.
msrbatch wrmsr --restore -p 2 0x11 0x3ff03ff
rc=$?
after=$(rdmsr -p 2 0x11)
check "wrmsr --restore -p 2 of CESR: exit $rc, CESR ($after) is its value before ($(sed -n 3p /tmp/p5-0x11.orig))" \
	[ "$rc.$after" = "0.$(sed -n 3p /tmp/p5-0x11.orig)" ]
# Restore every CPU's 0x11-0x13 to what was read first (msrbatch writes,
# msr-tools reads).
for m in 0x11 0x12 0x13; do
	c=0
	while read -r v; do
		msrbatch wrmsr -p "$c" "$m" "0x$v"
		c=$((c + 1))
	done </tmp/p5-$m.orig
	check "MSR $m restored on every CPU ($(tr '\n' ' ' </tmp/p5-$m.orig))" sh -c "rdmsr -a $m | cmp -s - /tmp/p5-$m.orig"
done

# 2. pmu on the dumps: the P5 counters decoded through the real binary.
mmx=/tests/cpuid/pentium-mmx-tillamook.txt
p54c=/tests/cpuid/pentium-p54c.txt
msrbatch pmu --cpuid-dump $mmx >/tmp/p5-pmu-mmx.out 2>&1
rc=$?
msrbatch pmu --cpuid-dump $p54c >/tmp/p5-pmu-p54c.out 2>&1
rc2=$?
head -n 3 /tmp/p5-pmu-mmx.out /tmp/p5-pmu-p54c.out | sed 's/^/# /'
p5line='Pentium (P5) counters: 2, 40 bits wide (CTR0 at 0x12, CTR1 at 0x13), controlled by CESR at 0x11'
check "pmu on the Tillamook dump (exit $rc): signature 0x582, P5 counters, MMX: RDPMC" \
	sh -c "[ $rc -eq 0 ] && grep -q 'signature 0x582\$' /tmp/p5-pmu-mmx.out && grep -qxF '$p5line' /tmp/p5-pmu-mmx.out && grep -qx 'MMX technology: yes; counters read with RDPMC (ECX 0 and 1)' /tmp/p5-pmu-mmx.out"
check "pmu on the P54C dump (exit $rc2): signature 0x525, P5 counters, no MMX: RDMSR" \
	sh -c "[ $rc2 -eq 0 ] && grep -q 'signature 0x525\$' /tmp/p5-pmu-p54c.out && grep -qxF '$p5line' /tmp/p5-pmu-p54c.out && grep -qx 'MMX technology: no; counters read with RDMSR (no RDPMC before MMX)' /tmp/p5-pmu-p54c.out"
n=$(grep -c ' event=0x' /tmp/p5-pmu-p54c.out)
n1=$(grep -c ' event=0x.*CTR[01] only$' /tmp/p5-pmu-p54c.out)
check "pmu on the P54C dump lists 38 events ($n), none for one counter only ($n1), no cycles alias" \
	sh -c "[ $n -eq 38 ] && [ $n1 -eq 0 ] && ! grep -q '^  cycles is' /tmp/p5-pmu-p54c.out"
n=$(grep -c ' event=0x' /tmp/p5-pmu-mmx.out)
n0=$(grep -c ' event=0x.* CTR0 only$' /tmp/p5-pmu-mmx.out)
n1=$(grep -c ' event=0x.* CTR1 only$' /tmp/p5-pmu-mmx.out)
check "pmu on the Tillamook dump lists 73 events ($n): 2AH-3BH, $n0 CTR0 only, $n1 CTR1 only; cycles is CTR0's 30H" \
	sh -c "[ $n -eq 73 ] && [ $n0 -eq 18 ] && [ $n1 -eq 17 ] && grep -q '^  NUMBER_OF_CYCLES_NOT_IN_HALT_STATE  *event=0x30  CTR0 only\$' /tmp/p5-pmu-mmx.out && grep -qx '  cycles is NUMBER_OF_CYCLES_NOT_IN_HALT_STATE' /tmp/p5-pmu-mmx.out"
msrbatch pmu --json --cpuid-dump $p54c >/tmp/p5-pmu.json
check "pmu --json on the P54C dump: 2 counters 40 bits wide, no fixed ones" \
	grep -q '"signature":"0x525","present":true,.*"gp_counters":2,"gp_width":40,"gp_mask":"0x3","fixed_counters":0,' /tmp/p5-pmu.json
msrbatch evsel --pentium 0xd700d6 >/tmp/p5-evsel.out
d=$(head -n1 /tmp/p5-evsel.out)
check "evsel --pentium 0xd700d6 decodes both halves ($d)" [ "$d" = "ctr0=INSTRUCTIONS_EXECUTED:os:usr,ctr1=INSTRUCTIONS_EXECUTED_V_PIPE:os:usr" ]

# 3. stat --dry-run on the Tillamook dump: the CESR programming batch.
# dry OUT ARGS...: the dry run's output in OUT, its exit status in rc.
dry() {
	out=$1
	shift
	msrbatch stat --dry-run --cpuid-dump "$@" -- true >"$out" 2>&1
	rc=$?
}
dry /tmp/p5-both.out $mmx -e INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE:usr
sed -n '/group 1: save/,$p' /tmp/p5-both.out | sed 's/^/# /'
check "stat --dry-run, both halves (exit $rc): the plan is CESR bits 9:0 = 0x0d6 and 25:16 = 0x097" \
	sh -c "[ $rc -eq 0 ] && grep -q 'INSTRUCTIONS_EXECUTED: P5_CESR bits 9:0 = 0x0d6 (counts events at any CPL); INSTRUCTIONS_EXECUTED_V_PIPE:usr: P5_CESR bits 25:16 = 0x097 (counts events while CPL is 3)' /tmp/p5-both.out"
check "stat --dry-run, both halves: save, stop both CC fields, zero both counters, program both ES fields in one RMW" \
	sh -c "sed -n '/group 1: save/,/group 1: start/p' /tmp/p5-both.out | grep -v '^#' | tr '\n' ';' | grep -qx 'stop-on-error;cpu 0;rdmsr P5_CESR;rdmsr P5_CTR0;rdmsr P5_CESR;rdmsr P5_CTR1;rmw P5_CESR clear=0x1c001c0 set=0x0;wrmsr P5_CTR0 0x0;wrmsr P5_CTR1 0x0;rmw P5_CESR clear=0x3ff03ff set=0x170016;'"
check "stat --dry-run, both halves: start sets CC0=011 and CC1=010 in one RMW, read with RDPMC 0 and 1 after a CPUID fence" \
	sh -c "sed -n '/group 1: start/,/group 1: CMD/p' /tmp/p5-both.out | grep -v '^#' | tr '\n' ';' | grep -qx 'cpu 0;rmw P5_CESR clear=0x1c001c0 set=0x8000c0;cpuid 0x0 0;rdpmc 0;rdpmc 1;'"
check "stat --dry-run, both halves: the restore puts both halves and counters back" \
	sh -c "sed -n '/group 1: restore/,/batches;/p' /tmp/p5-both.out | grep -v '^#' | tr '\n' ';' | grep -qx 'cpu 0;rmw P5_CESR clear=0x1c001c0 set=0x0;wrmsr P5_CTR0 0x0;wrmsr P5_CTR1 0x0;rmw P5_CESR clear=0x3ff03ff set=0x0;'"
check "stat --dry-run: CESR is never written whole, only read-modify-written" sh -c "! grep -q '^wrmsr P5_CESR' /tmp/p5-both.out"
# One event: only its half is touched; CTR1's half and CTR1 are left alone.
dry /tmp/p5-low.out $mmx -e INSTRUCTIONS_EXECUTED_V_PIPE:os
check "stat --dry-run, one event on CTR0 (exit $rc): every CESR RMW within bits 9:0 (clear=0x3ff set=0x17, start set=0x40)" \
	sh -c "[ $rc -eq 0 ] && grep -q '^rmw P5_CESR clear=0x3ff set=0x17\$' /tmp/p5-low.out && grep -q '^rmw P5_CESR clear=0x1c0 set=0x40\$' /tmp/p5-low.out && ! grep '^rmw P5_CESR' /tmp/p5-low.out | grep -Eqv 'clear=0x(3ff|1c0) ' && ! grep -Eq 'P5_CTR1|^rdpmc 1' /tmp/p5-low.out && ! grep -q '^wrmsr P5_CESR' /tmp/p5-low.out"
dry /tmp/p5-high.out $mmx -e BUS_OWNERSHIP_TRANSFERS
check "stat --dry-run, a CTR1-only event (exit $rc): every CESR RMW within bits 25:16 (clear=0x3ff0000 set=0x2a0000, start set=0xc00000)" \
	sh -c "[ $rc -eq 0 ] && grep -q '^rmw P5_CESR clear=0x3ff0000 set=0x2a0000\$' /tmp/p5-high.out && grep -q '^rmw P5_CESR clear=0x1c00000 set=0xc00000\$' /tmp/p5-high.out && ! grep '^rmw P5_CESR' /tmp/p5-high.out | grep -Eqv 'clear=0x(3ff0000|1c00000) ' && ! grep -q 'P5_CTR0' /tmp/p5-high.out && grep -q '^rdpmc 1\$' /tmp/p5-high.out"
dry /tmp/p5-nommx.out $p54c -e cycles
check "stat --dry-run on the P54C dump refuses cycles (CTR0's 30H needs MMX): exit $rc, EOPNOTSUPP" \
	sh -c "[ $rc -eq 2 ] && grep -q 'needs a Pentium with MMX technology: EOPNOTSUPP' /tmp/p5-nommx.out"

# 4. stat --sweep --dry-run on the P54C dump: groups of 2, read with RDMSR.
dry /tmp/p5-sweep.out $p54c --sweep DATA_READ,DATA_WRITE,INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE,BRANCHES
grep -E '^# sweep|ownership check|batches;' /tmp/p5-sweep.out | sed 's/^/# /'
check "sweep of 5 events on the P54C (exit $rc): 3 groups of at most 2" \
	sh -c "[ $rc -eq 0 ] && grep -qx '# sweep: 5 events in 3 groups of at most 2 (the counters of CPU 0); CMD runs once to warm up, then 1 time(s) per group' /tmp/p5-sweep.out"
check "sweep of 5 events: (DATA_READ, DATA_WRITE), (INSTRUCTIONS_EXECUTED, INSTRUCTIONS_EXECUTED_V_PIPE), (BRANCHES)" \
	sh -c "[ \"\$(grep 'ownership check' /tmp/p5-sweep.out | tr '\n' ';')\" = '# group 1 (DATA_READ, DATA_WRITE): ownership check;# group 2 (INSTRUCTIONS_EXECUTED, INSTRUCTIONS_EXECUTED_V_PIPE): ownership check;# group 3 (BRANCHES): ownership check;' ]"
check "sweep: one warm-up run before the first group, nothing programmed" \
	sh -c "grep -En '^# warm-up: CMD runs, nothing counted: true\$|^# group 1: save' /tmp/p5-sweep.out | cut -d: -f2- | tr '\n' ';' | grep -q '^# warm-up.*;# group 1: save'"
check "sweep on the P54C: CESR programmed per group by RMW (0x10000, 0x170016, 0x12 in bits 9:0 only)" \
	sh -c "[ \"\$(grep '^rmw P5_CESR clear=0x3ff' /tmp/p5-sweep.out | grep -v 'set=0x0\$' | tr '\n' ';')\" = 'rmw P5_CESR clear=0x3ff03ff set=0x10000;rmw P5_CESR clear=0x3ff03ff set=0x170016;rmw P5_CESR clear=0x3ff set=0x12;' ]"
check "sweep on the P54C: counters read with RDMSR after a CPUID fence, never RDPMC (only the probe's RDPMC 0)" \
	sh -c "[ \$(grep -c '^rdpmc' /tmp/p5-sweep.out) -eq 1 ] && [ \$(grep -A1 '^cpuid 0x0 0\$' /tmp/p5-sweep.out | grep -c '^rdmsr P5_CTR0\$') -eq 6 ]"
ev=$(awk '/ event=0x/ {print $1}' /tmp/p5-pmu-p54c.out | paste -sd, -)
dry /tmp/p5-sweep38.out $p54c --sweep "$ev"
pairs=$(grep -c '^# group [0-9]* ([A-Z0-9_]*, [A-Z0-9_]*): ownership check$' /tmp/p5-sweep38.out)
check "sweep of the P54C's 38 events, as P5Stat (exit $rc): 19 groups, each of 2 ($pairs)" \
	sh -c "[ $rc -eq 0 ] && grep -q '^# sweep: 38 events in 19 groups of at most 2 ' /tmp/p5-sweep38.out && [ $pairs -eq 19 ] && [ \$(grep -c 'ownership check' /tmp/p5-sweep38.out) -eq 19 ]"
dry /tmp/p5-sweepmmx.out $mmx --sweep RETURNS,cycles,INSTRUCTIONS_EXECUTED,INSTRUCTIONS_EXECUTED_V_PIPE
check "sweep on the Tillamook (exit $rc): two CTR0-only events (RETURNS, cycles) in separate groups, each filled by another event" \
	sh -c "[ \"\$(grep 'ownership check' /tmp/p5-sweepmmx.out | tr '\n' ';')\" = '# group 1 (RETURNS, INSTRUCTIONS_EXECUTED): ownership check;# group 2 (cycles, INSTRUCTIONS_EXECUTED_V_PIPE): ownership check;' ]"

finish
