// SPDX-License-Identifier: GPL-2.0
/*
 * Restore on close (MSRBATCH_IOC_RESTORE_ON_CLOSE / RESTORE_NOW): MSRs a file
 * wrote are put back when it is closed, when its process is killed (between
 * and during batches), and on RESTORE_NOW; an offline CPU is reported.
 * Uses IA32_TSC_AUX, which QEMU models and Linux only reads for getcpu().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u

static int ncpus, ctl;
static __u64 orig[64];

/* Writes value + cpu to TSC_AUX of every CPU (or reads into out[]). */
static int all_aux(int fd, int write, __u64 value, __u64 *out)
{
	struct msrbatch_op ops[64];
	int i, r;

	memset(ops, 0, sizeof(ops));
	for (i = 0; i < ncpus; i++) {
		ops[i].op = write ? MSRBATCH_OP_WRMSR : MSRBATCH_OP_RDMSR;
		ops[i].cpu = i;
		ops[i].reg = TSC_AUX;
		ops[i].arg[0] = write ? value + i : 0;
	}
	r = batch(fd, ops, ncpus, 0, NULL);
	for (i = 0; out && i < ncpus; i++)
		out[i] = ops[i].val[0];
	return r;
}

/* 1 if every CPU's TSC_AUX is what it was at the start. */
static int restored(void)
{
	__u64 now[64];
	int i;

	if (all_aux(ctl, 0, 0, now))
		return 0;
	for (i = 0; i < ncpus; i++)
		if (now[i] != orig[i])
			return 0;
	return 1;
}

static void test_close(void)
{
	int fd = open_restoring(), ro = dev_open(O_RDONLY);

	ksft_test_result(ioctl(ro, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0) == -1 && errno == EBADF,
			 "a read-only descriptor cannot ask for restore (EBADF)\n");
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 1) == -1 && errno == EINVAL, "argument not 0: EINVAL\n");
	close(ro);
	all_aux(fd, 1, 0x500, NULL);
	all_aux(fd, 1, 0x600, NULL);	/* the second write must not be what is restored */
	ksft_test_result(!restored(), "written: TSC_AUX changed on every CPU\n");
	close(fd);
	ksft_test_result(restored(), "close: TSC_AUX back to its first value on every CPU\n");
}

static void test_restore_now(void)
{
	int fd = open_restoring(), r;

	all_aux(fd, 1, 0x700, NULL);
	r = restore_now(fd);
	ksft_test_result(r == 0 && restored(), "RESTORE_NOW puts everything back and returns 0 failures\n");
	all_aux(ctl, 1, 0x800, NULL);	/* another file's write: not ours to undo */
	close(fd);
	ksft_test_result(!restored(), "after RESTORE_NOW the log is empty: close undoes nothing another file did\n");
	{
		int i;
		struct msrbatch_op ops[64];

		memset(ops, 0, sizeof(ops));
		for (i = 0; i < ncpus; i++) {
			ops[i].op = MSRBATCH_OP_WRMSR;
			ops[i].cpu = i;
			ops[i].reg = TSC_AUX;
			ops[i].arg[0] = orig[i];
		}
		batch(ctl, ops, ncpus, 0, NULL);
	}
	ksft_test_result(restored(), "(TSC_AUX put back by hand)\n");
}

/* A child writes in a loop; SIGKILL lands between or during batches. */
static void test_kill(int rounds)
{
	int i, good = 0;

	for (i = 0; i < rounds; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			int fd = open_restoring();
			__u64 v = 0x1000;

			for (;;)
				all_aux(fd, 1, v += 0x10, NULL);
		}
		usleep(2000 + (i % 7) * 1500);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		good += WIFSIGNALED(status) && restored();
	}
	ksft_test_result(good == rounds, "SIGKILL of a process writing in a loop: restored every time (%d of %d)\n", good, rounds);
}

static void test_offline(void)
{
	int fd = open_restoring(), cpu = ncpus - 1, kmsg, found = 0;
	char rec[512], needle[64];
	ssize_t n;

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	lseek(kmsg, 0, SEEK_END);
	all_aux(fd, 1, 0x900, NULL);
	if (cpu < 1 || cpu_set_online(cpu, 0)) {
		ksft_test_result_skip("offline CPU at close: cannot take CPU %d offline\n", cpu);
		close(fd);
		return;
	}
	close(fd);
	snprintf(needle, sizeof(needle), "CPU %d", cpu);
	while ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE))
		if (n > 0) {
			rec[n] = 0;
			found |= strstr(rec, "restore") && strstr(rec, needle);
		}
	cpu_set_online(cpu, 1);
	orig[cpu] = 0;	/* the kernel sets it again when the CPU comes up */
	{
		__u64 now[64];

		all_aux(ctl, 0, 0, now);
		orig[cpu] = now[cpu];
	}
	ksft_test_result(found && restored(), "close with CPU %d offline: the others restored, CPU %d reported in the log\n",
			 cpu, cpu);
	close(kmsg);
}

int main(int argc, char **argv)
{
	ksft_print_header();
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus > 64)
		ncpus = 64;
	ctl = dev_open(O_RDWR);
	if (ctl < 0 || all_aux(ctl, 0, 0, orig))
		ksft_exit_fail_msg("cannot read TSC_AUX on every CPU\n");
	printf("# msrbatch restore on close, %d CPUs\n", ncpus);
	test_close();
	test_restore_now();
	test_kill(argc > 1 ? atoi(argv[1]) : 10);
	test_offline();
	tests_done();
}
