# SPDX-License-Identifier: GPL-2.0
# Guest build and boot functions, sourced by vm.sh and check.sh.

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

GUEST_OUT="$MSRB_TOP/target/guest"
GUEST_TARGET=x86_64-unknown-linux-gnu
GUEST_CPUS=${MSRBATCH_GUEST_CPUS:-4}

# Sets KBUILD and the toolchain variables; builds the kernel when its key changed.
guest_kernel() {
	"$MSRB_TOP/tests/harness/provision.sh" || return
	local out
	out=$("$MSRB_TOP/tests/harness/build-kernel.sh") || return
	KBUILD=${out##*KBUILD=}
	# Keep only the current key's build of this flavour (each is about 400 MB).
	local old
	for old in "${KBUILD%-*}"-*; do
		[ "$old" = "$KBUILD" ] || rm -rf "$old"
	done
	. "$MSRB_CACHE/toolchain.env"
	echo "msrbatch: toolchain: $MSRB_LINUX_SERIES $KSRC_VERSION; $RUSTC_VERSION; $BINDGEN_VERSION; $CLANG_VERSION" >&2
}

guest_module() {
	make -s -C "$MSRB_TOP" KDIR="$KBUILD" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" modules >&2
}

# Static binaries: the guest has busybox and nothing else.
guest_userspace() {
	(cd "$MSRB_TOP" &&
		RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release \
			--workspace --lib --bins --examples --target "$GUEST_TARGET" \
			--target-dir "$MSRB_TOP/target/guest-cargo") >&2 || return
	local c
	mkdir -p "$GUEST_OUT/cbin"
	# The C examples: the raw one with the uapi header alone, the others
	# against the C API's static library.
	for c in "$MSRB_TOP"/examples/*.c; do
		local name
		name=$(basename "$c" .c)
		if grep -q '#include <msrbatch.h>' "$c"; then
			gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include" -I"$MSRB_TOP/include/uapi" \
				-o "$GUEST_OUT/cbin/$name" "$c" \
				"$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release/libmsrbatch.a" -lpthread -ldl -lm || return
		else
			gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -o "$GUEST_OUT/cbin/$name" "$c" || return
		fi
	done
	# Each C test is built 64-bit and, as NAME-32, 32-bit (compat ioctl path).
	for c in "$MSRB_TOP"/tests/guest/*.c; do
		[ -e "$c" ] || continue
		local bin="$GUEST_OUT/cbin/$(basename "$c" .c)"
		gcc -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -o "$bin" "$c" || return
		gcc -m32 -static -O2 -Wall -Wextra -Werror -I"$MSRB_TOP/include/uapi" -o "$bin-32" "$c" || return
	done
}

# An initramfs: busybox, init, module, tools, tests.
# guest_rootfs [MODULE.ko OUTPUT.cpio.gz] (default: the base kernel's)
guest_rootfs() {
	local ko=${1:-$MSRB_TOP/rust/msrbatch.ko} cpio=${2:-$GUEST_OUT/base.cpio.gz}
	local root="$GUEST_OUT/root" rel="$MSRB_TOP/target/guest-cargo/$GUEST_TARGET/release" f
	rm -rf "$root"
	mkdir -p "$root"/{bin,usr/bin,lib/modules,tests,proc,sys,dev,tmp,extra,root}
	cp /bin/busybox "$root/bin/"
	ln -s busybox "$root/bin/sh"
	cp "$MSRB_TOP/tests/harness/init" "$root/init"
	cp "$ko" "$root/lib/modules/msrbatch.ko"
	for f in "$rel"/*; do
		[ -f "$f" ] && [ -x "$f" ] && cp "$f" "$root/usr/bin/"
	done
	for f in "$rel"/examples/*; do
		[ -f "$f" ] && [ -x "$f" ] && case "$f" in *-*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]) ;; *) cp "$f" "$root/usr/bin/" ;; esac
	done
	cp "$GUEST_OUT"/cbin/* "$root/usr/bin/" 2>/dev/null
	# msr-tools (dynamically linked) as the reference for msrbatch rdmsr/wrmsr.
	mkdir -p "$root/usr/sbin" "$root/lib64" "$root/lib/x86_64-linux-gnu"
	cp /usr/sbin/rdmsr /usr/sbin/wrmsr "$root/usr/sbin/"
	cp /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
	cp /lib/x86_64-linux-gnu/libc.so.6 "$root/lib/x86_64-linux-gnu/"
	cp "$MSRB_TOP"/tests/guest/*.sh "$root/tests/" 2>/dev/null
	cp -r "$MSRB_TOP"/tests/guest/scripts "$root/tests/" 2>/dev/null
	chmod +x "$root"/tests/*.sh 2>/dev/null
	(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$cpio"
}

# The debug flavour (KASAN, lockdep, UBSAN, KFENCE, ...): its own kernel, and
# the module built for it from a copy of the sources (so that the base
# kernel's rust/msrbatch.ko stays as it is). Sets KBUILD_DEBUG.
guest_prepare_debug() {
	local out
	out=$(MSRB_FLAVOUR=debug "$MSRB_TOP/tests/harness/build-kernel.sh") || return
	KBUILD_DEBUG=${out##*KBUILD=}
	local mod="$GUEST_OUT/debug-module"
	rm -rf "$mod"
	mkdir -p "$mod/rust"
	cp "$MSRB_TOP/rust/Kbuild" "$MSRB_TOP"/rust/*.rs "$mod/rust/"
	echo 'obj-m += rust/' >"$mod/Kbuild"
	make -s -C "$KBUILD_DEBUG" M="$mod" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" modules >&2 || return
	guest_rootfs "$mod/rust/msrbatch.ko" "$GUEST_OUT/debug.cpio.gz"
}

guest_prepare() {
	msrb_stage "provision + kernel" guest_kernel &&
	msrb_stage "module" guest_module &&
	msrb_stage "userspace (static, for the guest)" guest_userspace &&
	msrb_stage "initramfs" guest_rootfs
}

# guest_boot NAME CMD [TIMEOUT] [APPEND] [ANALYZE_ARGS...]
# Files named in $EXTRA are copied to /extra. Streams the command's output;
# returns the command's exit status, or 125 when the harness found a problem
# (panic, oops, splat, timeout, failed load/unload, KUnit failure).
guest_boot() {
	local name=$1 cmd=$2 timeout=${3:-300} append=${4:-}
	shift 4 2>/dev/null || shift $#
	local dir="$GUEST_OUT/runs/$name" f
	rm -rf "$dir"
	mkdir -p "$dir/overlay/extra"
	printf '%s\n' "$cmd" >"$dir/overlay/cmd"
	for f in ${EXTRA:-}; do
		cp -r "$f" "$dir/overlay/extra/" || return 125
	done
	(cd "$dir/overlay" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/overlay.cpio.gz"
	local kimage="$KBUILD/arch/x86/boot/bzImage" base="$GUEST_OUT/base.cpio.gz" mem=1024
	if [ "${GUEST_FLAVOUR:-base}" = debug ]; then
		kimage="$KBUILD_DEBUG/arch/x86/boot/bzImage" base="$GUEST_OUT/debug.cpio.gz" mem=2048
	fi
	cat "$base" "$dir/overlay.cpio.gz" >"$dir/initrd.gz"
	: >"$dir/console.log"
	: >"$dir/output.log"

	local accel=(-accel tcg -cpu max)
	[ "${MSRBATCH_KVM:-0}" = 1 ] && accel=(-accel kvm -cpu host)
	timeout --kill-after=10 "$timeout" qemu-system-x86_64 "${accel[@]}" \
		-smp "$GUEST_CPUS" -m "$mem" -display none -monitor none -no-reboot \
		-kernel "$kimage" -initrd "$dir/initrd.gz" \
		-append "console=ttyS0 panic=-1 rdinit=/init printk.time=1 kunit.filter_glob=msrbatch* $append" \
		-serial "file:$dir/console.log" -serial "file:$dir/output.log" </dev/null &
	local qemu=$!
	tail -n +1 -f --pid="$qemu" "$dir/output.log" 2>/dev/null
	wait "$qemu"
	local qrc=$? timed=()
	[ $qrc -eq 124 ] || [ $qrc -eq 137 ] && timed=(--timed-out)
	local verdict vrc
	verdict=$(python3 "$MSRB_TOP/tests/harness/analyze.py" "$dir/console.log" "${timed[@]}" "$@")
	vrc=$?
	printf '%s\n' "$verdict" | grep -v '^guest-exit=' >&2
	if [ $vrc -ne 0 ]; then
		echo "msrbatch: guest run '$name' failed; console log: $dir/console.log" >&2
		tail -n 25 "$dir/console.log" | sed 's/^/  console: /' >&2
		return 125
	fi
	local rc
	rc=$(printf '%s\n' "$verdict" | sed -n 's/^guest-exit=//p')
	return "$rc"
}
