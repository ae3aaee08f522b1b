#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The module's ABI view and C prototypes are generated from the headers
# (rust/Kbuild), and the released ABI is frozen
# (userspace/msrbatch-sys/src/frozen_abi.rs, checked by the module build
# against the header and userspace's checked-in view), so a change to a header
# cannot go unnoticed. This proves it: each mutation below is applied, alone,
# to a scratch copy of the tree, in one of two ways, and the module is built
# against KBUILD:
#
#   alone    the file is changed and nothing else, as a mistake would be;
#   bumped   a deliberate ABI change: the header also gets MSRBATCH_ABI_VERSION
#            2 and scripts/gen-uapi.sh regenerates userspace's view and the
#            frozen ABI (which it refuses to do without the new version);
#
# and the result must be the expected one:
#
#   fails PATTERN [ABI_PATTERN]
#                   the module build fails, and its log has PATTERN (an
#                   extended regular expression): the specific error the
#                   mutation must cause, not any error; with ABI_PATTERN,
#                   scripts/check-abi.sh (what `make userspace` checks the
#                   header with) fails too, and says ABI_PATTERN;
#   follows NAME VALUE [IMMEDIATE]
#                   the module can take the change: it builds and uses the new
#                   value, which must be in the generated bindings, in the
#                   regenerated frozen ABI and, where given, an immediate of
#                   the module's code that the unmutated module does not have.
#
# Exits non-zero if any mutation does not apply or is not caught as expected.
# Usage: test-abi-mutations.sh KBUILD   (LLVM, RUSTC, BINDGEN from the
# environment, as for the module build; BINDGEN also runs gen-uapi.sh)
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
sysrc=userspace/msrbatch-sys/src
mkdir -p "$src/rust" "$src/include/uapi/linux" "$src/scripts" "$src/$sysrc"
cp "$top/rust/Kbuild" "$top"/rust/*.rs "$top"/rust/*.[ch] "$src/rust/"
rm -f "$src/rust/generated.rs" "$src/rust/bindings_generated.rs"
cp "$top/Cargo.toml" "$src/"
cp "$top/$hdr" "$src/$hdr"
cp "$top/include/uapi/linux/msrbatch_msr_safe.h" "$src/include/uapi/linux/"
cp "$top/scripts/gen-uapi.sh" "$top/scripts/check-abi.sh" "$src/scripts/"
cp "$top/$sysrc/uapi.rs" "$top/$sysrc/frozen_abi.rs" "$top/$sysrc/msr_safe.rs" "$src/$sysrc/"
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

# The message of a frozen value the build finds changed in VIEW ("the header"
# or "userspace's view"): what, then the start of rust/uapi.rs's message.
frozen() {
	printf '%s in %s \\(.*\\) is not %s, as ABI v1 froze it' "$1" "$2" "$3"
}

# check-abi.sh's message for a frozen value WHAT the header changed.
abi() {
	printf 'msrbatch: %s in the header \\(include/uapi/linux/msrbatch.h\\) is not as the frozen ABI' "$1"
}

# expect alone|bumped DESCRIPTION FILE SUBST fails PATTERN [ABI_PATTERN]
# expect alone|bumped DESCRIPTION FILE SUBST follows NAME VALUE [IMMEDIATE]
expect() {
	local how=$1 what="$2 ($1)" file=$3 subst=$4 want=$5
	shift 5
	scratch
	if ! mutate "$file" "$subst"; then
		echo "not ok - $what: the mutation does not apply to $file"
		fails=1
		return
	fi
	if [ "$how" = bumped ]; then
		if ! mutate "$hdr" 's/(define MSRBATCH_ABI_VERSION\s+)1\b/${1}2/' ||
			! "$tmp/t/scripts/gen-uapi.sh" >"$tmp/gen.log" 2>&1; then
			echo "not ok - $what: no version 2, or gen-uapi.sh fails with it:"
			sed -n 1,20p "$tmp/gen.log"
			fails=1
			return
		fi
	fi
	if [ "$want" = fails ] && [ -n "${2:-}" ]; then
		if "$tmp/t/scripts/check-abi.sh" >"$tmp/abi.log" 2>&1; then
			echo "not ok - $what: scripts/check-abi.sh passes"
			fails=1
			return
		elif ! grep -qE -- "$2" "$tmp/abi.log"; then
			echo "not ok - $what: scripts/check-abi.sh fails, but not with /$2/:"
			head -n 5 "$tmp/abi.log"
			fails=1
			return
		fi
	fi
	if ! build; then
		if [ "$want" != fails ]; then
			echo "not ok - $what: the module build fails:"
			sed -n 1,20p "$tmp/build.log"
			fails=1
		elif grep -qE -- "$1" "$tmp/build.log"; then
			echo "ok - $what: the module build fails: $(grep -m1 -oE -- "$1" "$tmp/build.log")${2:+; so does check-abi.sh}"
		else
			echo "not ok - $what: the module build fails, but not with /$1/:"
			grep -m5 -E '^error|panicked' "$tmp/build.log"
			fails=1
		fi
		return
	fi
	if [ "$want" = fails ]; then
		echo "not ok - $what: the module still builds"
		fails=1
		return
	fi
	local name=$1 value=$2 imm=${3:-} why=
	grep -qE "pub const $name *: *[a-z0-9_]+ *= *$value *;" "$tmp/t/rust/bindings_generated.rs" ||
		why="the generated bindings lack $name = $value"
	grep -qFx "frozen!(const $name = $value);" "$tmp/t/$sysrc/frozen_abi.rs" ||
		why="${why:+$why; }the regenerated frozen ABI lacks $name = $value"
	[ -z "$imm" ] || has_imm "$imm" || why="${why:+$why; }the module's code has no immediate $imm"
	if [ -n "$why" ]; then
		echo "not ok - $what: $why"
		fails=1
	else
		echo "ok - $what: the module builds with $name = $value${imm:+ (immediate $imm in its code)}"
	fi
}

# The unmutated tree builds, userspace's bindings and the frozen ABI match
# it, and the immediates the "follows" cases look for are not already in the
# code.
scratch
if ! build; then
	echo "not ok - the unmutated module does not build:"
	sed -n 1,20p "$tmp/build.log"
	exit 1
fi
"$tmp/t/scripts/gen-uapi.sh" --check >/dev/null || { echo "not ok - gen-uapi.sh --check fails unmutated"; exit 1; }
"$tmp/t/scripts/check-abi.sh" || { echo "not ok - check-abi.sh fails unmutated"; exit 1; }
for v in 40000 30000000; do
	has_imm "$v" && { echo "not ok - the unmutated module already has the immediate $v"; exit 1; }
done
echo "ok - unmutated: builds; userspace's bindings and the frozen ABI up to date; check-abi.sh passes"

# gen-uapi.sh will not change a frozen value while the version stays.
scratch
mutate "$hdr" 's/(define MSRBATCH_MAX_OPS\s+)65536/${1}40000/'
if "$tmp/t/scripts/gen-uapi.sh" >"$tmp/gen.log" 2>&1; then
	echo "not ok - gen-uapi.sh changes MSRBATCH_MAX_OPS without a new MSRBATCH_ABI_VERSION"
	fails=1
elif grep -qF 'was: frozen!(const MSRBATCH_MAX_OPS = 65536);' "$tmp/gen.log"; then
	echo "ok - gen-uapi.sh refuses to change the frozen MSRBATCH_MAX_OPS without a new MSRBATCH_ABI_VERSION"
else
	echo "not ok - gen-uapi.sh fails, but not naming the frozen MSRBATCH_MAX_OPS:"
	cat "$tmp/gen.log"
	fails=1
fi

swap='s/(F_SYNC_START\s+\(1U << )1\)/${1}@@)/; s/(F_TIMESTAMPS\s+\(1U << )2\)/${1}1)/; s/@@\)/2)/'
expect alone "swap MSRBATCH_F_SYNC_START and MSRBATCH_F_TIMESTAMPS" "$hdr" "$swap" \
	fails "$(frozen MSRBATCH_F_SYNC_START 'the header' 2)" "$(abi MSRBATCH_F_SYNC_START)"
expect bumped "swap MSRBATCH_F_SYNC_START and MSRBATCH_F_TIMESTAMPS" "$hdr" "$swap" \
	follows MSRBATCH_F_SYNC_START 4
expect alone "swap them in userspace's view" "$sysrc/uapi.rs" \
	's/(F_SYNC_START: u32 = )2;/${1}@@;/; s/(F_TIMESTAMPS: u32 = )4;/${1}2;/; s/@@;/4;/' \
	fails "$(frozen MSRBATCH_F_SYNC_START "userspace's view" 2)"
expect bumped "MSRBATCH_F_TIMESTAMPS on MSRBATCH_F_SYNC_START's bit" "$hdr" \
	's/(F_TIMESTAMPS\s+\(1U << )2\)/${1}1)/' \
	fails 'assertion failed: F_STOP_ON_ERROR & F_SYNC_START == 0 &&'
# limit DESCRIPTION SUBST NAME OLD NEW [IMMEDIATE]: a limit changed alone
# fails as frozen; bumped, the module follows it.
limit() {
	expect alone "$1" "$hdr" "$2" fails "$(frozen "$3" 'the header' "$4")" "$(abi "$3")"
	expect bumped "$1" "$hdr" "$2" follows "$3" "$5" "${6:-}"
}
limit "MSRBATCH_MAX_OPS 65536 -> 40000" 's/(define MSRBATCH_MAX_OPS\s+)65536/${1}40000/' \
	MSRBATCH_MAX_OPS 65536 40000 40000
limit "MSRBATCH_SYNC_TIMEOUT_NS 20 ms -> 30 ms" 's/(define MSRBATCH_SYNC_TIMEOUT_NS\s+)20000000/${1}30000000/' \
	MSRBATCH_SYNC_TIMEOUT_NS 20000000 30000000 30000000
limit "MSRBATCH_PREPARED_STRIDE 2 MiB -> 4 MiB" 's/(define MSRBATCH_PREPARED_STRIDE\s+)\(2U << 20\)/${1}(4U << 20)/' \
	MSRBATCH_PREPARED_STRIDE 2097152 4194304
# MSRBATCH_OP_MAX is not frozen (a new op is a compatible change), but the
# module asserts it implements every op up to it.
expect alone "a new op code (MSRBATCH_OP_MAX 11) without its implementation" "$hdr" \
	's/(define MSRBATCH_OP_MAX\s+)MSRBATCH_OP_POLL/${1}11/' \
	fails 'assertion failed: MAX == POLL'
expect bumped "a new op code (MSRBATCH_OP_MAX 11) without its implementation" "$hdr" \
	's/(define MSRBATCH_OP_MAX\s+)MSRBATCH_OP_POLL/${1}11/' \
	fails 'assertion failed: MAX == POLL'
drop='s/(struct msrbatch_op \{.*?)\t__s32 status;\n/$1/s'
# (struct msrbatch_op keeps its size: status's bytes become padding)
expect alone "drop status from struct msrbatch_op" "$hdr" "$drop" \
	fails 'error\[E0609\]: no field `status` on type `[^`]*msrbatch_op`' 'has no member named .{1,3}status'
expect bumped "drop status from struct msrbatch_op" "$hdr" "$drop" \
	fails 'error\[E0609\]: no field `status` on type `[^`]*`'
ioc='s/(_IOWR\(MSRBATCH_IOC_MAGIC, 0x01, struct )msrbatch_batch/${1}msrbatch_info/'
expect alone "MSRBATCH_IOC_BATCH with struct msrbatch_info's size" "$hdr" "$ioc" \
	fails "$(frozen MSRBATCH_IOC_BATCH 'the header' 0xc030b901)" "$(abi MSRBATCH_IOC_BATCH)"
expect bumped "MSRBATCH_IOC_BATCH with struct msrbatch_info's size" "$hdr" "$ioc" \
	fails 'assertion failed: _IOC_SIZE\(IOC_BATCH\) == size_of::<Batch>\(\)'
expect alone "a C helper's prototype (msrbatch_ns_to_tsc returns u32)" "$helpers" \
	's/^u64 msrbatch_ns_to_tsc\(u64 ns\);/u32 msrbatch_ns_to_tsc(u64 ns);/m' \
	fails 'error\[E0308\]: mismatched types'
expect alone "a Rust callback's prototype (msrbatch_sampler_tick's seq u32)" "$helpers" \
	's/(void msrbatch_sampler_tick\(void \*owner, unsigned int cpu, )u64 seq\)/${1}u32 seq)/' \
	fails 'error\[E0308\]: mismatched types'
exit $fails
