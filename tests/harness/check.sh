#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make check: everything. Host checks, the kernel and module build, KUnit and
# the integration tests in a 4-CPU TCG guest, a lockdown guest, and the
# harness self-test. Exits non-zero when anything fails.
set -uo pipefail
. "$(dirname "$0")/guest.sh"

total_start=$(date +%s)
passed=0
failed=0
failures=()
stage() {
	if msrb_stage "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("$1")
	fi
}

host_checks() {
	cd "$MSRB_TOP" || return
	cargo fmt --all --check &&
	cargo clippy --quiet --workspace --all-targets -- -D warnings &&
	cargo test --quiet --workspace &&
	RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p msrbatch &&
	scripts/gen-uapi.sh --check &&
	tests/harness/test-check-kdir.sh &&
	tests/harness/test-abi-layout.py &&
	KSRC="$KSRC" tests/harness/test-c-api.sh &&
	tests/harness/test-man.sh &&
	"$KSRC/scripts/checkpatch.pl" --no-tree --quiet --strict -f include/uapi/linux/msrbatch.h
}

module_checks() {
	make -s -C "$KBUILD" M="$MSRB_TOP" LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" \
		CLIPPY=1 CLIPPY_DRIVER="$(dirname "$RUSTC")/clippy-driver" KCFLAGS= \
		-W "$MSRB_TOP/rust/msrbatch.rs" modules 2>&1 | tee "$GUEST_OUT/clippy.log" >&2
	if grep -qE '^(warning|error)' "$GUEST_OUT/clippy.log"; then
		echo "module: clippy or rustc warnings (see above)" >&2
		return 1
	fi
	local info
	info=$(/sbin/modinfo "$MSRB_TOP/rust/msrbatch.ko") || return
	printf '%s\n' "$info" | grep -E '^(license|description|version|name):' >&2
	printf '%s\n' "$info" | grep -q '^license: *GPL$' &&
	printf '%s\n' "$info" | grep -q '^description: *.' &&
	printf '%s\n' "$info" | grep -q '^version: *[0-9]'
}

ecosystem_checks() {
	LLVM="$LLVM" RUSTC="$RUSTC" BINDGEN="$BINDGEN" "$MSRB_TOP/tests/harness/test-install.sh" "$KBUILD"
}

GUEST_TESTS="abi_test abi_test-32 msrbatch-guest-tests /tests/tool_test.sh /tests/examples_test.sh /tests/udev_test.sh /tests/unload_test.sh pce_test"

guest_tests() {
	guest_boot tests "grep '^msrbatch ' /proc/modules && run-all.sh $GUEST_TESTS" \
		600 '' --expect-suite msrbatch_batch
}

lockdown_tests() {
	guest_boot lockdown 'run-all.sh /tests/lockdown_test.sh' 300 ''
}

vm_run_contract() {
	local out rc
	out=$(guest_boot vm-run-modules 'cat /proc/modules' 120 '' 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep '^msrbatch ' >&2
	[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^msrbatch '
}

# The debug kernel (KASAN, lockdep, UBSAN, KFENCE, DEBUG_LIST, Rust debug
# assertions, ...): KUnit, the guest tests that exercise the module's code
# paths (the ABI in 64 and 32 bit, the Rust library, PCE grants, unload), a
# short fuzz (100 000 ioctls) and a short hotplug stress. The tool, example
# and udev tests are left to the base kernel: they add userspace time under
# the slower debug kernel and no module path the others miss. Any checker
# report fails the stage.
DEBUG_TESTS="abi_test abi_test-32 msrbatch-guest-tests pce_test /tests/unload_test.sh"
debug_tests() {
	guest_prepare_debug || return
	GUEST_FLAVOUR=debug guest_boot debug-tests "run-all.sh $DEBUG_TESTS 'msrbatch-fuzz --ioctls 100000 --threads 4' 'msrbatch-stress --seconds 15'" \
		2400 '' --expect-suite msrbatch_batch
}

selftest() {
	"$MSRB_TOP/tests/harness/vm.sh" selftest-only
}

# make check-debug: only the debug-kernel stage (see debug_tests).
if [ "${1:-}" = --debug ]; then
	stage "provision" "$MSRB_TOP/tests/harness/provision.sh"
	. "$MSRB_CACHE/toolchain.env"
	if guest_prepare; then
		stage "debug kernel: KUnit, guest tests, short fuzz and stress" debug_tests
	else
		failed=$((failed + 1))
	fi
	echo "==> total: $(( $(date +%s) - total_start )) s" >&2
	echo "check-debug: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi

stage "provision" "$MSRB_TOP/tests/harness/provision.sh"
. "$MSRB_CACHE/toolchain.env" 2>/dev/null
stage "host: fmt, clippy, cargo test, doc, uapi bindings, checkpatch" host_checks
if guest_prepare; then
	passed=$((passed + 1))
	stage "module: clippy, modinfo" module_checks
	stage "ecosystem: make install/uninstall, DKMS build, rust-analyzer" ecosystem_checks
	stage "guest: KUnit + integration tests (4 CPUs)" guest_tests
	stage "guest: lockdown (integrity, raised at run time)" lockdown_tests
	stage "guest: vm-run shows msrbatch in /proc/modules" vm_run_contract
	stage "harness self-test (failing command, panic, timeout)" selftest
	# Opt-in for now: the debug kernel adds about 11 min to a cold run and
	# 2.5 min to a warm one (make check-debug runs it alone).
	if [ "${MSRBATCH_CHECK_DEBUG:-0}" = 1 ]; then
		stage "debug kernel: KUnit, guest tests, short fuzz and stress" debug_tests
	fi
else
	failed=$((failed + 1))
	failures+=("build (kernel, module, userspace, initramfs)")
fi

echo "==> total: $(( $(date +%s) - total_start )) s" >&2
for f in "${failures[@]}"; do
	echo "FAILED: $f" >&2
done
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
