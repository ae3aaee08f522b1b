#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Not a test of msrbatch (no suite runs it): the reproducer of why the stock
# kernel stages run in a newer QEMU (tests/harness/stock-kernels.txt).
# It flips a static key with sites in __schedule (sched_schedstats) while
# pipelines switch tasks on every CPU, using no msrbatch at all; a kernel with
# JUMP_LABEL=y under QEMU 7.2 TCG oopses ("Oops: int3" in __schedule) in
# seconds; under QEMU 10.0.2 too, after half a minute to a few minutes
# (stock-kernels.txt). Its argument: seconds to flip (40).
# Run in a boot of a stock kernel: EXTRA=tests/guest/static_key_flip.sh
# [GUEST_QEMU=...] GUEST_KERNEL=.../vmlinuz GUEST_ROOTFS=... guest_boot NAME "sh /extra/static_key_flip.sh [SECONDS]"
# (functions of tests/harness/guest.sh; the image and rootfs as stock.sh makes them).
ls /proc/sys/kernel/sched_schedstats || exit 2
for k in 1 2 3; do (while :; do echo x; done | while read l; do :; done) & done
n=0
end=$(( $(date +%s) + ${1:-40} ))
while [ $(date +%s) -lt $end ]; do
	echo 1 >/proc/sys/kernel/sched_schedstats; echo 0 >/proc/sys/kernel/sched_schedstats
	n=$((n + 1))
done
echo "flipped $n times"
