#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make fuzz: the long run on the debug kernel (KASAN, lockdep, UBSAN, KFENCE,
# ...): FUZZ_IOCTLS ioctls (default 1 000 000) from 4 threads, a quarter as
# many again as an unprivileged group member under the allowlist while root
# reloads it (tests/guest/fuzz_user.sh), a tenth as many on the msr-safe
# personality's nodes (the module is loaded with msr_safe=1,
# Documentation/msr-safe.md), then STRESS_SECONDS (default 600)
# of batches, grants and open/close while CPUs
# go offline and online. Any checker report fails the run ("splats: 0" is
# printed only when the console is clean).
set -uo pipefail
GUEST_FLAVOUR=debug
. "$(dirname "$0")/guest.sh"
ioctls=${FUZZ_IOCTLS:-1000000}
seconds=${STRESS_SECONDS:-600}
start=$(date +%s)
guest_prepare || exit 1
msrb_stage "guest (debug kernel): fuzz $ioctls ioctls (+ $((ioctls / 4)) unprivileged, + $((ioctls / 10)) msr-safe), stress ${seconds} s" \
	guest_boot fuzz "msrbatch-fuzz --ioctls $ioctls --threads 4 && /tests/fuzz_user.sh --ioctls $((ioctls / 4)) --threads 4 && msrbatch-fuzz --msr-safe --ioctls $((ioctls / 10)) --threads 4 && msrbatch-stress --seconds $seconds" \
	$((seconds + ioctls / 40 + 1800)) 'msrbatch.msr_safe=1' --expect-suite msrbatch_batch
rc=$?
[ $rc -eq 0 ] && echo "splats: 0 (no panic, oops, BUG, WARNING, KASAN, UBSAN, KFENCE or lockdep report)"
echo "fuzz: wall time $(( $(date +%s) - start )) s"
exit $rc
