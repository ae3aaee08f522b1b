#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The module's ABI view and C prototypes are generated from the headers
# (rust/Kbuild), so a change to a header cannot go unnoticed. This proves it:
# each mutation below is applied, alone, to a scratch copy of the tree, the
# module is built against KBUILD, and the result must be the expected one:
#
#   fails    the module build fails (a type error or a compile-time
#            assertion);
#   follows  the change is one the module can take (the ABI is still
#            self-consistent): it builds and uses the new value, which must
#            be in the generated bindings and, where given, an immediate of
#            the module's code that the unmutated module does not have. The
#            released ABI is pinned by userspace's checked-in bindings, so
#            scripts/gen-uapi.sh --check must then call those stale.
#
# Exits non-zero if any mutation does not apply or is not caught as expected.
# Usage: test-abi-mutations.sh KBUILD   (LLVM, RUSTC, BINDGEN from the
# environment, as for the module build)
set -uo pipefail
kbuild=${1:?usage: test-abi-mutations.sh KBUILD}
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
hdr=include/uapi/linux/msrbatch.h
helpers=rust/helpers.h

# What the module build and gen-uapi.sh read, copied once (the tree may
# change while this runs); each mutation starts from a fresh copy of it.
src=$tmp/src
mkdir -p "$src/rust" "$src/include/uapi/linux" "$src/scripts" "$src/userspace/msrbatch-sys/src"
cp "$top/rust/Kbuild" "$top"/rust/*.rs "$top"/rust/*.[ch] "$src/rust/"
rm -f "$src/rust/generated.rs" "$src/rust/bindings_generated.rs"
cp "$top/Cargo.toml" "$src/"
cp "$top/$hdr" "$src/$hdr"
cp "$top/scripts/gen-uapi.sh" "$src/scripts/"
cp "$top/userspace/msrbatch-sys/src/uapi.rs" "$src/userspace/msrbatch-sys/src/"
echo 'obj-m += rust/' >"$src/Kbuild"

scratch() {
	rm -rf "$tmp/t"
	cp -r "$src" "$tmp/t"
}

build() {
	make -s -C "$kbuild" M="$tmp/t" LLVM="${LLVM:-}" RUSTC="${RUSTC:-rustc}" BINDGEN="${BINDGEN:-bindgen}" \
		modules >"$tmp/build.log" 2>&1
}

# has_imm VALUE: the module's code has VALUE as an immediate operand.
has_imm() {
	objdump -d --no-show-raw-insn "$tmp/t/rust/msrbatch.ko" >"$tmp/code" &&
		grep -qE "\\\$$(printf '%#x' "$1")(\$|[^0-9a-f])" "$tmp/code"
}

# mutate FILE PERL-SUBSTITUTION: applies it to the scratch copy; fails if it
# changed nothing (the mutation no longer matches the file).
mutate() {
	cp "$tmp/t/$1" "$tmp/before"
	perl -0pi -e "$2" "$tmp/t/$1"
	! cmp -s "$tmp/before" "$tmp/t/$1"
}

# expect fails|follows DESCRIPTION FILE SUBST [NAME VALUE [IMMEDIATE]]
expect() {
	local want=$1 what=$2 file=$3 subst=$4 name=${5:-} value=${6:-} imm=${7:-}
	scratch
	if ! mutate "$file" "$subst"; then
		echo "not ok - $what: the mutation does not apply to $file"
		fails=1
		return
	fi
	if ! build; then
		if [ "$want" = fails ]; then
			echo "ok - $what: the module build fails: $(grep -m1 -E '^(error|.*error:)' "$tmp/build.log")"
		else
			echo "not ok - $what: the module build fails:"
			sed -n 1,20p "$tmp/build.log"
			fails=1
		fi
		return
	fi
	if [ "$want" = fails ]; then
		echo "not ok - $what: the module still builds"
		fails=1
		return
	fi
	local why=
	grep -qE "pub const $name *: *[a-z0-9_]+ *= *$value *;" "$tmp/t/rust/bindings_generated.rs" ||
		why="the generated bindings lack $name = $value"
	[ -z "$imm" ] || has_imm "$imm" || why="${why:+$why; }the module's code has no immediate $imm"
	"$tmp/t/scripts/gen-uapi.sh" --check >/dev/null 2>&1 &&
		why="${why:+$why; }userspace's pinned bindings do not notice the change"
	if [ -n "$why" ]; then
		echo "not ok - $what: $why"
		fails=1
	else
		echo "ok - $what: the module builds with $name = $value${imm:+ (immediate $imm in its code)}; gen-uapi.sh --check calls userspace's bindings stale"
	fi
}

# The unmutated tree builds, userspace's bindings match it, and the
# immediates the "follows" cases look for are not already in the code.
scratch
if ! build; then
	echo "not ok - the unmutated module does not build:"
	sed -n 1,20p "$tmp/build.log"
	exit 1
fi
"$tmp/t/scripts/gen-uapi.sh" --check >/dev/null || { echo "not ok - gen-uapi.sh --check fails unmutated"; exit 1; }
for v in 40000 30000000; do
	has_imm "$v" && { echo "not ok - the unmutated module already has the immediate $v"; exit 1; }
done
echo "ok - unmutated: builds; userspace's bindings up to date"

expect follows "swap MSRBATCH_F_SYNC_START and MSRBATCH_F_TIMESTAMPS" "$hdr" \
	's/(F_SYNC_START\s+\(1U << )1\)/${1}@@)/; s/(F_TIMESTAMPS\s+\(1U << )2\)/${1}1)/; s/@@\)/2)/' \
	MSRBATCH_F_SYNC_START 4
expect fails "MSRBATCH_F_TIMESTAMPS on MSRBATCH_F_SYNC_START's bit" "$hdr" \
	's/(F_TIMESTAMPS\s+\(1U << )2\)/${1}1)/'
expect follows "MSRBATCH_MAX_OPS 65536 -> 40000" "$hdr" \
	's/(define MSRBATCH_MAX_OPS\s+)65536/${1}40000/' MSRBATCH_MAX_OPS 40000 40000
expect follows "MSRBATCH_SYNC_TIMEOUT_NS 20 ms -> 30 ms" "$hdr" \
	's/(define MSRBATCH_SYNC_TIMEOUT_NS\s+)20000000/${1}30000000/' MSRBATCH_SYNC_TIMEOUT_NS 30000000 30000000
expect follows "MSRBATCH_PREPARED_STRIDE 2 MiB -> 4 MiB" "$hdr" \
	's/(define MSRBATCH_PREPARED_STRIDE\s+)\(2U << 20\)/${1}(4U << 20)/' MSRBATCH_PREPARED_STRIDE 4194304
expect fails "a new op code (MSRBATCH_OP_MAX 11) without its implementation" "$hdr" \
	's/(define MSRBATCH_OP_MAX\s+)MSRBATCH_OP_POLL/${1}11/'
expect fails "drop status from struct msrbatch_op" "$hdr" \
	's/(struct msrbatch_op \{.*?)\t__s32 status;\n/$1/s'
expect fails "MSRBATCH_IOC_BATCH with struct msrbatch_info's size" "$hdr" \
	's/(_IOWR\(MSRBATCH_IOC_MAGIC, 0x01, struct )msrbatch_batch/${1}msrbatch_info/'
expect fails "a C helper's prototype (msrbatch_ns_to_tsc returns u32)" "$helpers" \
	's/^u64 msrbatch_ns_to_tsc\(u64 ns\);/u32 msrbatch_ns_to_tsc(u64 ns);/m'
expect fails "a Rust callback's prototype (msrbatch_sampler_tick's seq u32)" "$helpers" \
	's/(void msrbatch_sampler_tick\(void \*owner, unsigned int cpu, )u64 seq\)/${1}u32 seq)/'
exit $fails
