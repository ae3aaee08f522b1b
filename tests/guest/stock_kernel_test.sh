#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# First test of a boot of Debian's own kernel (tests/harness/stock.sh), run
# before anything writes an MSR: the kernel is the one asked for, msrbatch
# loaded tainting it only out-of-tree (O) and unsigned (E), and the in-tree
# msr driver (Debian builds it as a module) loads beside it, for the msr-tools
# comparisons of tool_test.sh.
# Usage: stock_kernel_test.sh KERNELRELEASE
. /tests/lib.sh
want=$1
check "the kernel is Debian's $want ($(uname -r))" [ "$(uname -r)" = "$want" ]
check "msrbatch is loaded" grep -q '^msrbatch ' /proc/modules
t=$(cat /proc/sys/kernel/tainted)
# 4096: TAINT_OOT_MODULE (O), 8192: TAINT_UNSIGNED_MODULE (E).
check "taint is O and E only ($t)" sh -c "[ $((t & ~12288)) -eq 0 ] && [ $((t & 4096)) -ne 0 ]"
check "msrbatch's taint flags say (OE)" sh -c "grep -q '^msrbatch .*(OE)' /proc/modules"
check "Debian's msr.ko loads beside it" insmod /lib/modules/msr.ko
check "/dev/cpu/0/msr exists" test -c /dev/cpu/0/msr
finish
