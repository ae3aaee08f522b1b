#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Host checks of the C side: the raw uapi header alone compiles (64/32-bit,
# C and C++); the C API links through pkg-config against the shared library
# and runs (here, without the module, it must fail cleanly to open the
# device); the counter API runs against the PMU model of a real CPU's CPUID
# dump (count_instructions FILE, tests/harness/c_counters_test.c), and so
# do the batch flags, with the device-only calls' answers there; both
# headers pass checkpatch.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out="$top/target/c-api"
mkdir -p "$out/pkgconfig"
cd "$top"
cargo build --quiet --release -p msrbatch
version=$(scripts/version.sh)
sed -e "s|@PREFIX@|$top|; s|@INCLUDEDIR@|$top/include|; s|@UAPIDIR@|$top/include/uapi|" \
	-e "s|@LIBDIR@|$top/target/release|; s|@VERSION@|$version|" \
	userspace/msrbatch/msrbatch.pc.in >"$out/pkgconfig/msrbatch.pc"
export PKG_CONFIG_PATH="$out/pkgconfig"
flags=(-O2 -Wall -Wextra -Werror)

for m in -m64 -m32; do
	gcc "${flags[@]}" "$m" -Iinclude/uapi -o "$out/read_msrs_raw$m" examples/read_msrs_raw.c
done
echo "ok - examples/read_msrs_raw.c builds 64- and 32-bit with <linux/msrbatch.h> alone"
printf '#include <linux/msrbatch.h>\n#include <msrbatch.h>\n' |
	g++ -fsyntax-only -Wall -Werror $(pkg-config --cflags msrbatch) -x c++ -
echo "ok - both headers compile as C++"

# The C API's examples take the CPUs from msrbatch_online_cpus(): counting to
# _SC_NPROCESSORS_ONLN names the wrong CPUs as soon as one is offline.
for ex in read_msrs prepared_tsc_aux; do
	if grep -q "sysconf(_SC_NPROCESSORS_ONLN" "examples/$ex.c" || ! grep -q 'msrbatch_online_cpus(cpus' "examples/$ex.c"; then
		echo "not ok - examples/$ex.c loops to _SC_NPROCESSORS_ONLN instead of msrbatch_online_cpus()"
		exit 1
	fi
done
echo "ok - the C API's examples loop over msrbatch_online_cpus()"

# The shared library's SONAME (programs need that name: it gets its link
# beside cargo's output, as make install makes it), and the version query of
# the C API.
major=${version%%.*}
soname=$(readelf -d target/release/libmsrbatch.so | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libmsrbatch.so.$major" ]; then
	echo "not ok - libmsrbatch.so's SONAME is '$soname', not libmsrbatch.so.$major"
	exit 1
fi
ln -sf libmsrbatch.so "target/release/libmsrbatch.so.$major"
printf '#include <stdio.h>\n#include <msrbatch.h>\nint main(void) { puts(msrbatch_version()); return 0; }\n' >"$out/version.c"
# shellcheck disable=SC2046
gcc "${flags[@]}" $(pkg-config --cflags msrbatch) -o "$out/version" "$out/version.c" $(pkg-config --libs msrbatch)
got=$(LD_LIBRARY_PATH="$top/target/release" "$out/version")
if [ "$got" != "$version" ]; then
	echo "not ok - msrbatch_version() says '$got', not $version (scripts/version.sh)"
	exit 1
fi
echo "ok - libmsrbatch.so has SONAME $soname; msrbatch_version() says $got"

for ex in read_msrs count_instructions prepared_tsc_aux; do
	# shellcheck disable=SC2046
	gcc "${flags[@]}" $(pkg-config --cflags msrbatch) -o "$out/$ex" "examples/$ex.c" $(pkg-config --libs msrbatch)
	libs=$(LD_LIBRARY_PATH="$top/target/release" ldd "$out/$ex")
	case "$libs" in
	*"libmsrbatch.so.$major => $top/target/release/"*) ;;
	*) echo "not ok - $ex is not linked against libmsrbatch.so: $libs"; exit 1 ;;
	esac
	set +e
	err=$(LD_LIBRARY_PATH="$top/target/release" "$out/$ex" 2>&1 >/dev/null)
	rc=$?
	set -e
	if [ -e /dev/msrbatch ]; then
		echo "ok - $ex links against libmsrbatch.so (device present: not run)"
	elif [ $rc -eq 1 ] && [ "$err" = "msrbatch_open: No such file or directory" ]; then
		echo "ok - $ex links against libmsrbatch.so via pkg-config and reports the missing device"
	else
		echo "not ok - $ex: exit $rc: $err"
		exit 1
	fi
done
dumps="$top/userspace/msrbatch/testdata/cpuid"
out_model=$(LD_LIBRARY_PATH="$top/target/release" "$out/count_instructions" "$dumps/skylake.txt")
case "$out_model" in
"instructions retired on CPU 0 across a 10 us busy-wait: 0 (instructions: IA32_FIXED_CTR0"*)
	echo "ok - count_instructions runs against the Skylake PMU model ($out_model)" ;;
*) echo "not ok - count_instructions on the model: $out_model"; exit 1 ;;
esac
out_model=$(LD_LIBRARY_PATH="$top/target/release" "$out/count_instructions" "$dumps/no-pmu.txt")
if [ "$out_model" = "no PMU: CPUID.0AH version 0, 0 counters; nothing to count" ]; then
	echo "ok - count_instructions says there is no PMU on a CPU without one"
else
	echo "not ok - count_instructions without a PMU: $out_model"; exit 1
fi
# shellcheck disable=SC2046
gcc "${flags[@]}" $(pkg-config --cflags msrbatch) -o "$out/c_counters_test" tests/harness/c_counters_test.c $(pkg-config --libs msrbatch)
LD_LIBRARY_PATH="$top/target/release" "$out/c_counters_test" "$dumps/skylake.txt" "$dumps/no-pmu.txt"
# A userspace library header: stdint types, so no --strict (which asks for u64).
"$KSRC/scripts/checkpatch.pl" --no-tree --quiet -f include/msrbatch.h
echo "ok - checkpatch: include/msrbatch.h"
