# SPDX-License-Identifier: GPL-2.0
# Guest build and boot functions, sourced by vm.sh and check.sh.

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

GUEST_OUT="$MSRB_TOP/target/guest"
GUEST_TARGET=x86_64-unknown-linux-gnu
GUEST_CPUS=${MSRBATCH_GUEST_CPUS:-4}
# The test kernel's flavour: base (tinyconfig plus what the module needs) or
# debug (base plus KASAN, lockdep, UBSAN, KFENCE, ...: kernel-debug.config).
# Each flavour has its own cached kernel, module build and initramfs.
GUEST_FLAVOUR=${GUEST_FLAVOUR:-base}
case "$GUEST_FLAVOUR" in
base | debug) ;;
*) msrb_die "unknown test kernel flavour '$GUEST_FLAVOUR' (base or debug)" ;;
esac
GUEST_DIR="$GUEST_OUT/$GUEST_FLAVOUR"

# Sets KBUILD and the toolchain variables; builds the kernel when its key changed.
guest_kernel() {
	"$MSRB_TOP/tests/harness/provision.sh" || return
	local out
	out=$(MSRB_FLAVOUR=$GUEST_FLAVOUR "$MSRB_TOP/tests/harness/build-kernel.sh") || return
	KBUILD=${out##*KBUILD=}
	# Keep only the current key's build of this flavour (each is about 400 MB).
	local old
	for old in "${KBUILD%-*}"-*; do
		[ "$old" = "$KBUILD" ] || rm -rf "$old"
	done
	. "$MSRB_CACHE/toolchain.env"
	echo "msrbatch: toolchain: $MSRB_LINUX_SERIES $KSRC_VERSION; $RUSTC_VERSION; $BINDGEN_VERSION; $CLANG_VERSION" >&2
}

# The module for this flavour's kernel, built from a copy of the sources (the
# tree's rust/msrbatch.ko is left to `make`), then signed with that kernel's
# own build key: lockdown=integrity refuses unsigned modules. The unsigned
# build goes into the guest too, for the test that proves that refusal.
# Skipped when its inputs (the sources, the kernel build, the toolchain) are
# those of the last build (guest_stamp).
guest_module() {
	local mod="$GUEST_DIR/module" stamp
	stamp=$(guest_module_key) || return
	if guest_stamp_ok "$GUEST_DIR/module.stamp" "$stamp" \
		"$GUEST_DIR/msrbatch.ko" "$GUEST_DIR/msrbatch-unsigned.ko" "$GUEST_DIR/msrbatch_test_pmu.ko" \
		"$GUEST_DIR/msrbatch_floor.ko"; then
		echo "msrbatch: module: up to date" >&2
		return 0
	fi
	rm -f "$GUEST_DIR/module.stamp"
	rm -rf "$mod"
	mkdir -p "$mod/rust" "$mod/include/uapi/linux" "$mod/userspace/msrbatch-sys/src"
	cp "$MSRB_TOP/rust/Kbuild" "$MSRB_TOP"/rust/*.rs "$MSRB_TOP"/rust/*.[ch] "$mod/rust/"
	rm -f "$mod/rust/generated.rs" "$mod/rust/bindings_generated.rs"
	cp "$MSRB_TOP/Cargo.toml" "$mod/"	# the version's one source
	cp "$MSRB_TOP"/include/uapi/linux/msrbatch*.h "$mod/include/uapi/linux/"	# the ABIs
	# userspace's view of the ABI and the frozen ABI, which the build checks
	cp "$MSRB_TOP"/userspace/msrbatch-sys/src/{uapi,frozen_abi}.rs "$mod/userspace/msrbatch-sys/src/"
	echo 'obj-m += rust/' >"$mod/Kbuild"
	make -s -C "$KBUILD" M="$mod" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" modules >&2 || return
	"$MSRB_TOP/scripts/check-modinfo.sh" "$mod/rust/msrbatch.ko" "$(cat "$KBUILD/include/config/kernel.release")" >&2 || return
	local hash key="$KBUILD/certs/signing_key.pem" cert="$KBUILD/certs/signing_key.x509"
	hash=$(sed -n 's/^CONFIG_MODULE_SIG_HASH="\(.*\)"$/\1/p' "$KBUILD/.config")
	if [ -z "$hash" ] || [ ! -f "$key" ] || [ ! -f "$cert" ]; then
		echo "msrbatch: $KBUILD has no module signing key (CONFIG_MODULE_SIG, which SECURITY_LOCKDOWN_LSM selects)" >&2
		return 1
	fi
	cp "$mod/rust/msrbatch.ko" "$GUEST_DIR/msrbatch-unsigned.ko"
	"$KBUILD/scripts/sign-file" "$hash" "$key" "$cert" "$mod/rust/msrbatch.ko" "$GUEST_DIR/msrbatch.ko" || return
	# The test PMU (a perf "rdpmc" knob in a guest without a PMU), loaded by
	# tests/guest/pce_policy_test.sh only.
	mkdir -p "$mod/test-pmu"
	cp "$MSRB_TOP"/tests/guest/test-pmu/Kbuild "$MSRB_TOP"/tests/guest/test-pmu/*.c "$mod/test-pmu/"
	make -s -C "$KBUILD" M="$mod/test-pmu" LLVM="$LLVM" W=1 modules >&2 || return
	"$KBUILD/scripts/sign-file" "$hash" "$key" "$cert" "$mod/test-pmu/msrbatch_test_pmu.ko" \
		"$GUEST_DIR/msrbatch_test_pmu.ko" || return
	# The floor of the small batches' paths (msrbatch's ABI, the least a
	# driver does for it), loaded by icount_bench's runs only; at the
	# tree's relative place, for its include of the uapi header.
	mkdir -p "$mod/tests/guest/floor"
	cp "$MSRB_TOP"/tests/guest/floor/Kbuild "$MSRB_TOP"/tests/guest/floor/*.[ch] "$mod/tests/guest/floor/"
	make -s -C "$KBUILD" M="$mod/tests/guest/floor" LLVM="$LLVM" W=1 modules >&2 || return
	"$KBUILD/scripts/sign-file" "$hash" "$key" "$cert" "$mod/tests/guest/floor/msrbatch_floor.ko" \
		"$GUEST_DIR/msrbatch_floor.ko" || return
	echo "$stamp" >"$GUEST_DIR/module.stamp"
}

# What the guest's modules are built from: the sources' contents (the uapi
# header, userspace's view of it and the frozen ABI too, which the module's
# build reads), the kernel
# build (its directory is named by its cache key; its signing key and
# release), and the toolchain.
guest_module_key() {
	(
		cd "$MSRB_TOP" &&
			sha256sum rust/Kbuild rust/*.rs rust/*.[ch] include/uapi/linux/msrbatch*.h \
				userspace/msrbatch-sys/src/uapi.rs userspace/msrbatch-sys/src/frozen_abi.rs Cargo.toml tests/guest/test-pmu/Kbuild \
				tests/guest/test-pmu/*.c tests/guest/floor/Kbuild tests/guest/floor/*.[ch] tests/harness/guest.sh "$KBUILD/include/config/kernel.release" \
				"$KBUILD/certs/signing_key.x509" &&
			echo "$KBUILD $LLVM $RUSTC $BINDGEN"
	) | sha256sum | cut -d' ' -f1
}

# guest_stamp_ok STAMP KEY OUTPUT...: STAMP holds KEY and every OUTPUT exists.
guest_stamp_ok() {
	local stamp=$1 key=$2 f
	shift 2
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] || return 1
	for f; do
		[ -f "$f" ] || return 1
	done
}

# guest_stale OUT DEP...: OUT is missing or older than a DEP (as make decides).
guest_stale() {
	local out=$1 d
	shift
	[ -e "$out" ] || return 0
	for d; do
		[ "$d" -nt "$out" ] && return 0
	done
	return 1
}

# Static binaries: the guest has busybox and nothing else.
guest_userspace() {
	(cd "$MSRB_TOP" &&
		RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
			--workspace --lib --bins --examples --target "$GUEST_TARGET" \
			--target-dir "$MSRB_TOP/target/guest-cargo") >&2 || return
	local c uapi="$MSRB_TOP/include/uapi/linux/msrbatch.h"
	local lib="$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release/libmsrbatch.a"
	mkdir -p "$GUEST_OUT/cbin"
	# Each C program is linked again only when it, a header or the static
	# library is newer than the binary (cargo leaves an unchanged library alone).
	# The C examples: the raw one with the uapi header alone, the others
	# against the C API's static library.
	for c in "$MSRB_TOP"/examples/*.c; do
		local name
		name=$(basename "$c" .c)
		guest_stale "$GUEST_OUT/cbin/$name" "$c" "$uapi" "$MSRB_TOP/include/msrbatch.h" "$lib" || continue
		if grep -q '#include <msrbatch.h>' "$c"; then
			# glibc's linker warnings about getpwuid_r and getaddrinfo in a
			# static binary concern Rust's std, not code these examples run.
			local log="$GUEST_OUT/cbin/link.log"
			gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include" -I"$MSRB_TOP/include/uapi" \
				-o "$GUEST_OUT/cbin/$name" "$c" \
				"$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release/libmsrbatch.a" -lpthread -ldl -lm \
				2>"$log" || { cat "$log" >&2; return 1; }
			grep -v -e 'in statically linked applications requires at runtime' -e ': in function `' "$log" >&2
			rm -f "$log"
		else
			gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -o "$GUEST_OUT/cbin/$name" "$c" || return
		fi
	done
	# Each C test is built 64-bit and, as NAME-32, 32-bit (compat ioctl path),
	# with kselftest.h from the kernel tree's selftests (KTAP output).
	local ksft="$KSRC/tools/testing/selftests"
	[ -f "$ksft/kselftest.h" ] || { echo "msrbatch: no $ksft/kselftest.h (KSRC, tests/harness/provision.sh)" >&2; return 1; }
	for c in "$MSRB_TOP"/tests/guest/*.c; do
		[ -e "$c" ] || continue
		local bin="$GUEST_OUT/cbin/$(basename "$c" .c)"
		guest_stale "$bin" "$c" "$uapi" "$MSRB_TOP/include/uapi/linux/msrbatch_msr_safe.h" "$MSRB_TOP"/tests/guest/*.h "$MSRB_TOP"/tests/guest/floor/*.h "$ksft/kselftest.h" ||
			guest_stale "$bin-32" "$c" "$uapi" "$MSRB_TOP/include/uapi/linux/msrbatch_msr_safe.h" "$MSRB_TOP"/tests/guest/*.h "$MSRB_TOP"/tests/guest/floor/*.h "$ksft/kselftest.h" || continue
		gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -I"$ksft" -o "$bin" "$c" || return
		gcc -m32 -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -I"$ksft" -o "$bin-32" "$c" || return
	done
}

# An initramfs: busybox, init, module (signed and unsigned), tools, tests.
# Skipped when nothing it packs (nor this script) is newer than the last one.
guest_rootfs() {
	local root="$GUEST_DIR/root" rel="$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release" f
	if [ -f "$GUEST_DIR/rootfs.cpio" ] && [ -z "$(find /bin/busybox /usr/sbin/rdmsr /usr/sbin/wrmsr \
		/lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/libc.so.6 "$MSRB_TOP/tests/harness/init" \
		"$MSRB_TOP/tests/harness/guest.sh" "$MSRB_TOP/tests/harness/common.sh" "$GUEST_DIR"/*.ko \
		"$rel" -maxdepth 1 ! -name "*.d" -newer "$GUEST_DIR/rootfs.cpio" -print -quit 2>/dev/null)" ] &&
		[ -z "$(find "$rel/examples" "$GUEST_OUT/cbin" "$MSRB_TOP/tests/guest" \
			"$MSRB_TOP/userspace/msrbatch/testdata/cpuid" "$MSRB_TOP"/packaging/*.rules \
			! -name "*.d" -newer "$GUEST_DIR/rootfs.cpio" -print -quit 2>/dev/null)" ]; then
		echo "msrbatch: initramfs: up to date" >&2
		return 0
	fi
	rm -rf "$root"
	mkdir -p "$root"/{bin,usr/bin,lib/modules,tests,proc,sys,dev,tmp,extra,root}
	cp /bin/busybox "$root/bin/"
	ln -s busybox "$root/bin/sh"
	cp "$MSRB_TOP/tests/harness/init" "$root/init"
	cp "$GUEST_DIR/msrbatch.ko" "$GUEST_DIR/msrbatch-unsigned.ko" "$GUEST_DIR/msrbatch_test_pmu.ko" \
		"$GUEST_DIR/msrbatch_floor.ko" "$root/lib/modules/"
	# Our binaries stripped: the initramfs is unpacked by the guest kernel,
	# which is slow under TCG (and slower still with KASAN).
	for f in "$rel"/* "$rel"/examples/* "$GUEST_OUT"/cbin/*; do
		[ -f "$f" ] && [ -x "$f" ] || continue
		case "$f" in */examples/*-*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]) continue ;; esac
		strip -o "$root/usr/bin/$(basename "$f")" "$f" || return
	done
	# msr-tools (dynamically linked) as the reference for msrbatch rdmsr/wrmsr.
	mkdir -p "$root/usr/sbin" "$root/lib64" "$root/lib/x86_64-linux-gnu"
	cp /usr/sbin/rdmsr /usr/sbin/wrmsr "$root/usr/sbin/"
	cp /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
	cp /lib/x86_64-linux-gnu/libc.so.6 "$root/lib/x86_64-linux-gnu/"
	cp "$MSRB_TOP"/tests/guest/*.sh "$root/tests/" 2>/dev/null
	cp -r "$MSRB_TOP"/tests/guest/scripts "$root/tests/" 2>/dev/null
	# The CPUID dumps, for the tests of --cpuid-dump (pentium_test.sh).
	mkdir -p "$root/tests/cpuid"
	cp "$MSRB_TOP"/userspace/msrbatch/testdata/cpuid/*.txt "$root/tests/cpuid/" || return
	cp "$MSRB_TOP"/packaging/*.rules "$root/tests/"
	chmod +x "$root"/tests/*.sh 2>/dev/null
	(cd "$root" && find . | cpio -o -H newc --quiet) >"$GUEST_DIR/rootfs.cpio.tmp" &&
		mv "$GUEST_DIR/rootfs.cpio.tmp" "$GUEST_DIR/rootfs.cpio"
}

guest_prepare() {
	msrb_stage "provision + kernel ($GUEST_FLAVOUR)" guest_kernel &&
	msrb_stage "module" guest_module &&
	msrb_stage "userspace (static, for the guest)" guest_userspace &&
	msrb_stage "initramfs" guest_rootfs
}

# guest_vcpu_share QEMU_PID A B [C D ...]: QEMU's vCPUs A and B run on one
# host CPU (the first this harness may use), C and D on the next, and so on
# (round robin over the host CPUs); its other vCPUs on the host CPUs no pair
# has. Whenever the host switches from A to B (B woke from its idle halt, or
# A's time slice ended while B was waiting), A stands still wherever it is,
# even with the guest's interrupts off, while B runs: a race window a few
# instructions wide on CPU A is, now and then, as wide as what B does before
# the host switches back. It changes nothing in the guest.
guest_vcpu_share() {
	local q=$1 i j t c n range cpus=() pairs=() host desc=
	shift
	# The host CPUs this harness may use (its cpuset and affinity).
	for range in $(taskset -pc $$ | sed 's/.*: //; s/,/ /g'); do
		case "$range" in
		*-*) mapfile -t -O ${#cpus[@]} cpus < <(seq "${range%-*}" "${range#*-}") ;;
		*) cpus+=("$range") ;;
		esac
	done
	if [ ${#cpus[@]} -lt 2 ]; then
		echo "msrbatch: one host CPU: all vCPUs share it already" >&2
		return 0
	fi
	if [ -z "$q" ] || [ $(($# % 2)) -ne 0 ]; then
		echo "msrbatch: guest_vcpu_share QEMU_PID A B [C D ...]" >&2
		return 1
	fi
	pairs=("$@")
	for ((j = 0; j < ${#pairs[@]}; j += 2)); do
		desc+="${desc:+, }vCPUs ${pairs[j]} and ${pairs[j + 1]} on host CPU ${cpus[$((j / 2 % ${#cpus[@]}))]}"
	done
	local others=("${cpus[@]:$(($# / 2))}") rest
	[ ${#others[@]} -gt 0 ] || others=("${cpus[@]}")
	rest=$(IFS=,; echo "${others[*]}")
	for i in $(seq 100); do
		n=0
		for t in /proc/"$q"/task/*; do
			c=$(cat "$t/comm" 2>/dev/null) || continue
			case "$c" in
			"ALL CPUs/"*)
				echo "msrbatch: QEMU runs all vCPUs in one thread (round robin): nothing to pin" >&2
				return 0
				;;
			"CPU "*/*) ;;
			*) continue ;;
			esac
			c=${c#CPU }
			c=${c%%/*}
			host=$rest
			for ((j = 0; j < ${#pairs[@]}; j++)); do
				[ "${pairs[j]}" = "$c" ] && host=${cpus[$((j / 2 % ${#cpus[@]}))]}
			done
			taskset -pc "$host" "${t##*/}" >/dev/null || return 1
			case " ${pairs[*]} " in *" $c "*) n=$((n + 1)) ;; esac
		done
		if [ "$n" -eq ${#pairs[@]} ]; then
			echo "msrbatch: $desc" >&2
			return 0
		fi
		sleep 0.1
	done
	echo "msrbatch: not all of QEMU's vCPU threads ${pairs[*]} found in process $q" >&2
	return 1
}

# guest_boot NAME CMD [TIMEOUT] [APPEND] [ANALYZE_ARGS...]
# GUEST_VCPU_SHARE="A B": see guest_vcpu_share. GUEST_KERNEL and GUEST_ROOTFS
# boot another kernel image and initramfs, GUEST_QEMU with another QEMU
# (tests/harness/stock.sh). GUEST_QEMU_EXTRA: more QEMU arguments, split at
# blanks (tests/harness/icount-profile.sh loads its plugin with it).
# Files named in $EXTRA are copied to /extra. Streams the command's output;
# returns the command's exit status, or 125 when the harness found a problem
# (panic, oops, splat, timeout, failed load/unload, KUnit failure).
guest_boot() {
	local name=$1 cmd=$2 timeout=${3:-300} append=${4:-}
	shift 4 2>/dev/null || shift $#
	local dir="$GUEST_DIR/runs/$name" f
	rm -rf "$dir"
	# The first boot's console, kept when this is its second (below).
	[ -n "${GUEST_BOOT_AGAIN:-}" ] || rm -f "$GUEST_DIR/runs/$name".*-console.log "$GUEST_DIR/runs/$name".*-output.log
	mkdir -p "$dir/overlay/extra"
	printf '%s\n' "$cmd" >"$dir/overlay/cmd"
	for f in ${EXTRA:-}; do
		cp -r "$f" "$dir/overlay/extra/" || return 125
	done
	(cd "$dir/overlay" && find . | cpio -o -H newc --quiet) >"$dir/overlay.cpio"
	# KASAN's shadow memory needs the extra room.
	local mem=1024
	[ "$GUEST_FLAVOUR" = debug ] && mem=2048
	cat "${GUEST_ROOTFS:-$GUEST_DIR/rootfs.cpio}" "$dir/overlay.cpio" >"$dir/initrd"
	: >"$dir/console.log"
	: >"$dir/output.log"

	# pty.legacy_count=0: creating the legacy PTYs is 2.5 s of every
	# debug-kernel boot under TCG, and nothing here uses them. no5lvl: with
	# 5-level paging (-cpu max has LA57), an interrupt taken in identify_cpu
	# early in boot made KASAN report a wild access in rcu_is_watching (seen
	# once, on a loaded host, before the module was loaded): a kernel issue,
	# kept out of this project's runs.
	local accel=(-accel tcg -cpu max)
	# GUEST_ICOUNT=1: the guest clock (TSC, CLOCK_MONOTONIC) advances one ns
	# per guest instruction, so timings are instruction counts, the same on
	# every run (vCPUs then run one at a time).
	[ "${GUEST_ICOUNT:-0}" = 1 ] && accel+=(-icount shift=0,sleep=off)
	[ "${MSRBATCH_KVM:-0}" = 1 ] && accel=(-accel kvm -cpu host)
	local extra=()
	# shellcheck disable=SC2206 # split at blanks, as documented above
	[ -n "${GUEST_QEMU_EXTRA:-}" ] && extra=($GUEST_QEMU_EXTRA)
	# debug-threads: QEMU names its vCPU threads ("CPU 0/TCG"), for guest_vcpu_share.
	timeout --kill-after=10 "$timeout" "${GUEST_QEMU:-qemu-system-x86_64}" "${accel[@]}" -name msrbatch,debug-threads=on \
		-smp "$GUEST_CPUS" -m "$mem" -display none -monitor none -no-reboot \
		-kernel "${GUEST_KERNEL:-$KBUILD/arch/x86/boot/bzImage}" -initrd "$dir/initrd" \
		-append "console=ttyS0 panic=-1 rdinit=/init printk.time=1 kunit.filter_glob=msrbatch* pty.legacy_count=0 no5lvl $append" \
		-serial "file:$dir/console.log" -serial "file:$dir/output.log" "${extra[@]}" </dev/null &
	local qemu=$!
	if [ -n "${GUEST_VCPU_SHARE:-}" ]; then
		local qpid='' i
		for i in $(seq 50); do
			qpid=$(pgrep -P "$qemu" -x qemu-system-x86) && break
			sleep 0.1
		done
		# shellcheck disable=SC2086 # a list of numbers
		guest_vcpu_share "$qpid" $GUEST_VCPU_SHARE || { kill "$qemu"; wait "$qemu"; return 125; }
	fi
	tail -n +1 -f --pid="$qemu" "$dir/output.log" 2>/dev/null
	wait "$qemu"
	local qrc=$? timed=()
	[ $qrc -eq 124 ] || [ $qrc -eq 137 ] && timed=(--timed-out)
	local verdict vrc again=
	verdict=$(python3 "$MSRB_TOP/tests/harness/analyze.py" "$dir/console.log" "${timed[@]}" "$@")
	vrc=$?
	# Boots that ran into what is not msrbatch's doing boot once more (not
	# a third time), and say so ("KIND:WHY"):
	# - a kernel that hung in its boot, before /init began to load msrbatch,
	#   ran nothing of ours (the stock trixie kernel once stopped after SMP
	#   bring-up for its full 900 s, on a loaded host, under TCG); a hang
	#   once msrbatch began to load is a failure;
	# - GUEST_INT3_AGAIN=1 (the stock kernels' boots): QEMU's TCG, also 10.0,
	#   now and then executes a static-key site of the kernel while another
	#   vCPU patches it, and the kernel dies of "Oops: int3" there, in its
	#   own code (tests/harness/stock-kernels.txt has the reproducer and the
	#   counts); but only if that oops is the first splat, at a kernel
	#   function (`RIP: 0010:sym+0x..`, no module), and no test had failed
	#   before it. Module code run after its unload is int3 too on these
	#   kernels (freed module text is filled with int3), but at a bare
	#   address or in a module.
	if [ ${#timed[@]} -gt 0 ] && ! grep -q 'msrbatch-harness: loading msrbatch' "$dir/console.log"; then
		again="hung:hung in the kernel's boot, before msrbatch was loaded (last console line: $(tail -n 1 "$dir/console.log" | tr -d '\r'))"
	elif [ $vrc -ne 0 ] && [ "${GUEST_INT3_AGAIN:-0}" = 1 ] &&
		grep -q '^harness: FAIL: kernel splat: Oops: int3' <<<"$verdict"; then
		local rip
		rip=$(awk '/Oops: int3/ { f = 1 } f && /RIP: 0010:/ { sub(/\r$/, ""); print; exit }' "$dir/console.log")
		if grep -qE 'RIP: 0010:[A-Za-z_][A-Za-z0-9_.]*\+0x[0-9a-f]+/0x[0-9a-f]+[[:space:]]*$' <<<"$rip" &&
			! grep -qE '^[[:space:]]*not ok ' "$dir/output.log"; then
			again="int3:died of QEMU TCG's int3 fault at a patched static-key site ($rip)"
		fi
	fi
	if [ -n "$again" ] && [ -z "${GUEST_BOOT_AGAIN:-}" ]; then
		cp "$dir/console.log" "$GUEST_DIR/runs/$name.${again%%:*}-console.log"
		cp "$dir/output.log" "$GUEST_DIR/runs/$name.${again%%:*}-output.log"
		echo "msrbatch: guest run '$name' ${again#*:}; booting it once more (the first boot's console: $GUEST_DIR/runs/$name.${again%%:*}-console.log)" >&2
		[ -z "${MSRB_RETRYLOG:-}" ] || echo "$name: ${again#*:}; booted once more" >>"$MSRB_RETRYLOG"
		GUEST_BOOT_AGAIN=1 guest_boot "$name" "$cmd" "$timeout" "$append" "$@"
		return
	fi
	printf '%s\n' "$verdict" | grep -v '^guest-exit=' >&2
	# make check lists every failed test again at its end (MSRB_FAILLOG): CI
	# shows only the tail of a long log.
	if [ -n "${MSRB_FAILLOG:-}" ]; then
		{
			grep -E '^[[:space:]]*not ok ' "$dir/output.log"
			# The verdict's problems, then of its first splat the lines
			# that say what and where (its message, RIP, the call trace).
			[ $vrc -eq 0 ] || printf '%s\n' "$verdict" | grep '^harness: FAIL:'
			[ $vrc -eq 0 ] || printf '%s\n' "$verdict" | awk '
				/^---- console around the first splat/ { blk = 1; n = 0; next }
				blk && /^----$/ { blk = 0; next }
				blk { n++; if (n > 5 && /BUG|Oops|#PF|Comm:|RIP:|Call Trace|panic|WARNING|KASAN|UBSAN|fault|Modules linked|\+0x/) print }' |
				head -n 30
		} | awk -v run="$name" '{ sub(/\r$/, ""); sub(/^[ \t]+/, "") } NF { print run ": " substr($0, 1, 240) }' >>"$MSRB_FAILLOG"
	fi
	if [ $vrc -ne 0 ]; then
		echo "msrbatch: guest run '$name' failed; console log: $dir/console.log" >&2
		tail -n 25 "$dir/console.log" | sed 's/^/  console: /' >&2
		return 125
	fi
	local rc
	rc=$(printf '%s\n' "$verdict" | sed -n 's/^guest-exit=//p')
	return "$rc"
}
