// SPDX-License-Identifier: GPL-2.0
/*
 * Restores are MSR writes (#30, item 6): they taint like writes, and a
 * lockdown that comes after the values were logged stops them like it stops
 * batch writes. Runs in a boot of its own WITHOUT lockdown= (check.sh's
 * lockdown stage): it needs a kernel not yet tainted CPU_OUT_OF_SPEC, and it
 * locks the kernel down itself (integrity) half-way, which cannot be undone.
 *
 * What it writes it puts back: PKRS is never changed (the write faults);
 * TSC_AUX of CPUs 1 and 2, which lockdown keeps us from restoring, the kernel
 * sets again itself when the CPU comes up (setup_getcpu()): the test takes
 * them offline and online at the end and checks the values.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u
/* A write that faults under QEMU TCG: IA32_PKRS with reserved bits 63:32. */
#define PKRS 0x6e1u
#define LOCKDOWN "/sys/kernel/security/lockdown"

/* Whether /dev/kmsg has a line with both needles after the position of kmsg. */
static int kmsg_has(int kmsg, const char *a, const char *b)
{
	char rec[512];
	ssize_t n;
	int found = 0;

	while ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE))
		if (n > 0) {
			rec[n] = 0;
			found |= strstr(rec, a) && strstr(rec, b);
		}
	return found;
}

int main(void)
{
	int ctl, fd, now_fd, close_fd, r, kmsg, lock;
	unsigned long t;
	__u64 v = 0, pkrs = 0, aux1 = 0, aux2 = 0, orig1 = 0, orig2 = 0;

	ksft_print_header();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 3) {
		ksft_test_result(0, "needs 3 CPUs\n");
		tests_done();
	}
	ctl = dev_open(O_RDWR);
	lock = open(LOCKDOWN, O_RDWR);
	ksft_test_result(ctl >= 0 && lock >= 0, "/dev/msrbatch and %s open\n", LOCKDOWN);
	if (ctl < 0 || lock < 0)
		tests_done();
	{
		char buf[128] = "";

		r = read(lock, buf, sizeof(buf) - 1);
		ksft_test_result(r > 0 && strstr(buf, "[none]"), "booted without lockdown (%s)\n", strtok(buf, "\n"));
	}
	t = tainted();
	ksft_test_result(!(t & 4), "fresh boot: not tainted CPU_OUT_OF_SPEC (tainted=%lu)\n", t);

	/* 1. A restore that writes taints, like a batch write. */
	fd = open_restoring();
	r = one_op(ctl, MSRBATCH_OP_RDMSR, 0, PKRS, 0, &pkrs);
	ksft_test_result(r == 0, "PKRS reads on CPU 0 (0x%llx, %d)\n", (unsigned long long)pkrs, r);
	r = one_op(fd, MSRBATCH_OP_WRMSR, 0, PKRS, pkrs | (1ull << 32), NULL);
	ksft_test_result(r == -EIO && !(tainted() & 4),
			 "a restoring descriptor's WRMSR that faults: -EIO, no taint (%d, tainted=%lu)\n", r, tainted());
	r = restore_now(fd);
	ksft_test_result(r == 0, "RESTORE_NOW writes the logged PKRS back (%d failed)\n", r);
	ksft_test_result(one_op(ctl, MSRBATCH_OP_RDMSR, 0, PKRS, 0, &v) == 0 && v == pkrs, "PKRS unchanged (0x%llx)\n",
			 (unsigned long long)v);
	t = tainted();
	ksft_test_result(t & 4, "the restore, a write that ran, tainted the kernel CPU_OUT_OF_SPEC (tainted=%lu)\n", t);
	close(fd);

	/* 2. Values staged before a run-time lockdown. */
	one_op(ctl, MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, &orig1);
	one_op(ctl, MSRBATCH_OP_RDMSR, 2, TSC_AUX, 0, &orig2);
	now_fd = open_restoring();
	close_fd = open_restoring();
	r = one_op(now_fd, MSRBATCH_OP_WRMSR, 1, TSC_AUX, 0x5a5, NULL);
	r |= one_op(close_fd, MSRBATCH_OP_WRMSR, 2, TSC_AUX, 0x5a6, NULL);
	ksft_test_result(r == 0, "before lockdown: TSC_AUX of CPU 1 and 2 written through restoring descriptors\n");
	r = write(lock, "integrity", 9) == 9 ? 0 : -errno;
	ksft_test_result(r == 0, "'integrity' written to %s (%d)\n", LOCKDOWN, r);
	r = one_op(ctl, MSRBATCH_OP_WRMSR, 1, TSC_AUX, 0x77, NULL);
	ksft_test_result(r == -EPERM, "locked down: a batch WRMSR is EPERM (%d)\n", r);

	r = restore_now(now_fd);
	one_op(ctl, MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, &aux1);
	ksft_test_result(r == -EPERM && aux1 == 0x5a5,
			 "locked down: RESTORE_NOW is EPERM and writes nothing (%d, CPU 1 TSC_AUX 0x%llx, logged 0x%llx)\n", r,
			 (unsigned long long)aux1, (unsigned long long)orig1);
	r = restore_now(now_fd);
	ksft_test_result(r == -EPERM, "... and keeps its log: EPERM again (%d)\n", r);

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	lseek(kmsg, 0, SEEK_END);
	close(close_fd);
	one_op(ctl, MSRBATCH_OP_RDMSR, 2, TSC_AUX, 0, &aux2);
	ksft_test_result(aux2 == 0x5a6, "locked down: close writes nothing (CPU 2 TSC_AUX 0x%llx, logged 0x%llx)\n",
			 (unsigned long long)aux2, (unsigned long long)orig2);
	ksft_test_result(kmsg_has(kmsg, "restore", "locked down"), "... and the kernel log says why\n");
	close(kmsg);
	close(now_fd);

	/* Put TSC_AUX back the only way left: the kernel sets it when a CPU comes up. */
	r = cpu_set_online(1, 0) | cpu_set_online(1, 1) | cpu_set_online(2, 0) | cpu_set_online(2, 1);
	one_op(ctl, MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, &aux1);
	one_op(ctl, MSRBATCH_OP_RDMSR, 2, TSC_AUX, 0, &aux2);
	ksft_test_result(r == 0 && aux1 == orig1 && aux2 == orig2,
			 "CPUs 1 and 2 off- and online: TSC_AUX is the kernel's again (0x%llx 0x%llx)\n",
			 (unsigned long long)aux1, (unsigned long long)aux2);
	close(ctl);
	close(lock);
	tests_done();
}
