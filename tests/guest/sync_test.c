// SPDX-License-Identifier: GPL-2.0
/*
 * MSRBATCH_F_SYNC_START and MSRBATCH_F_TIMESTAMPS: all CPUs start together
 * (or none runs), the start spread is reported, every op is stamped; CPU
 * hotplug during synchronised batches never leaves a batch half run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u
#define PAT 0x277u

static int ncpus, fd;

/* Did an op of this batch not run because its CPU's busy credit ran out? */
static int ran_out_of_credit(const struct msrbatch_op *ops, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (ops[i].status == -ETIME)
			return 1;
	return 0;
}

/*
 * Under TCG, 4 vCPUs share the host's cores: a vCPU the host does not run
 * for 20 ms makes a synchronised batch time out (nothing ran), and a vCPU
 * descheduled in the middle of a batch spends its busy credit, so the ops
 * after that get -ETIME (their val[1] is 0). Try again a few times; the
 * hotplug test counts these instead.
 */
static int run(struct msrbatch_op *ops, unsigned int n, __u32 flags, struct msrbatch_batch *b)
{
	int r, tries = 0;

	for (;;) {
		r = batch(fd, ops, n, flags, b);
		if (++tries == 10)
			break;
		if (r == -ETIMEDOUT)
			printf("# ETIMEDOUT, again\n");
		else if (r == 0 && ran_out_of_credit(ops, n))
			printf("# an op got ETIME (the vCPU was not scheduled), again\n");
		else
			break;
	}
	return r;
}

static void test_timestamps(void)
{
	struct msrbatch_op ops[9];
	struct msrbatch_batch b;
	int i, r, good = 1;

	for (i = 0; i < 8; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, 1, PAT, 0, 0);
	ops[8] = mkop(MSRBATCH_OP_DELAY, 1, 0, 100000, 0);
	r = run(ops, 9, MSRBATCH_F_TIMESTAMPS, &b);
	for (i = 1; i < 9; i++)
		good &= ops[i].val[1] > ops[i - 1].val[1];
	ksft_test_result(r == 0 && good && ops[0].val[1] != 0 && ops[0].val[0] != 0,
			 "F_TIMESTAMPS: val[1] of every op is the TSC right after it, increasing (last gap %llu ticks: the 100 us delay)\n",
			 (unsigned long long)(ops[8].val[1] - ops[7].val[1]));
	ops[3] = mkop(MSRBATCH_OP_RDTSCP, 1, 0, 0, 0);
	r = run(ops, 9, MSRBATCH_F_TIMESTAMPS, &b);
	ksft_test_result(r == -EINVAL && b.err_index == 3, "F_TIMESTAMPS with an op that returns val[1] (RDTSCP): EINVAL at its index\n");
}

/* Program the same register on every CPU at once, then read all at once. */
static void test_sync_program(void)
{
	struct msrbatch_op *ops = calloc(2 * ncpus, sizeof(*ops));
	struct msrbatch_batch b;
	__u64 *saved = calloc(ncpus, sizeof(*saved));
	int i, r, good = 1;

	for (i = 0; i < ncpus; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, i, TSC_AUX, 0, 0);
	run(ops, ncpus, 0, &b);
	for (i = 0; i < ncpus; i++)
		saved[i] = ops[i].val[0];
	for (i = 0; i < ncpus; i++) {
		ops[2 * i] = mkop(MSRBATCH_OP_WRMSR, i, TSC_AUX, 0x100 + i, 0);
		ops[2 * i + 1] = mkop(MSRBATCH_OP_RDTSCP, i, 0, 0, 0);
	}
	r = run(ops, 2 * ncpus, MSRBATCH_F_SYNC_START, &b);
	for (i = 0; i < ncpus; i++)
		good &= ops[2 * i].status == 0 && ops[2 * i + 1].val[1] == (__u64)(0x100 + i);
	ksft_test_result(r == 0 && good && b.out_flags == MSRBATCH_OUT_RAN,
			 "F_SYNC_START: the same register written on all %d CPUs together and read back on each (r=%d, start spread %llu ticks)\n",
			 ncpus, r, (unsigned long long)b.start_spread);
	for (i = 0; !good && i < ncpus; i++)
		printf("# cpu %d: write status %d, rdtscp status %d aux %#llx\n", i, ops[2 * i].status,
		       ops[2 * i + 1].status, (unsigned long long)ops[2 * i + 1].val[1]);
	for (i = 0; i < ncpus; i++)
		ops[i] = mkop(MSRBATCH_OP_WRMSR, i, TSC_AUX, saved[i], 0);
	r = run(ops, ncpus, MSRBATCH_F_SYNC_START, &b);
	ksft_test_result(r == 0, "TSC_AUX restored on every CPU\n");
	free(ops);
	free(saved);
}

static void test_spread(void)
{
	struct msrbatch_op ops[64];
	struct msrbatch_batch b;
	__u64 lo = ~0ull, hi = 0;
	int i, r;

	for (i = 0; i < ncpus && i < 64; i++)
		ops[i] = mkop(MSRBATCH_OP_RDTSC, i, 0, 0, 0);
	r = run(ops, i, 0, &b);
	ksft_test_result(r == 0 && b.start_spread < 1000000000ull,
			 "without F_SYNC_START a batch on %d CPUs reports its start spread too (%llu ticks)\n", i,
			 (unsigned long long)b.start_spread);
	r = run(ops, i, MSRBATCH_F_SYNC_START, &b);
	for (i = 0; i < ncpus && i < 64; i++) {
		lo = ops[i].val[0] < lo ? ops[i].val[0] : lo;
		hi = ops[i].val[0] > hi ? ops[i].val[0] : hi;
	}
	/* Each CPU stamps its start, then reads the TSC as its first op. */
	ksft_test_result(r == 0 && b.start_spread <= hi - lo + 100000,
			 "the reported spread (%llu) matches the CPUs' first reads (%llu apart)\n",
			 (unsigned long long)b.start_spread, (unsigned long long)(hi - lo));
	r = run(ops, 1, MSRBATCH_F_SYNC_START, &b);
	ksft_test_result(r == 0 && b.start_spread == 0, "one CPU: spread 0\n");
}

static volatile int stop_hotplug;

static void *hotplug(void *arg)
{
	long n = 0;
	int r;

	(void)arg;
	while (!stop_hotplug) {
		r = cpu_set_online(ncpus - 1, n % 2);
		if (r == -ENOENT || r == -EACCES)
			break;
		if (r == 0)
			n++;
		usleep(3000);
	}
	r = cpu_set_online(ncpus - 1, 1);
	if (r && r != -ENOENT)
		ksft_print_msg("CPU %d back online: %s\n", ncpus - 1, strerror(-r));
	return (void *)n;
}

static void test_hotplug(int seconds)
{
	struct msrbatch_op ops[64];
	struct msrbatch_batch b;
	time_t end = time(NULL) + seconds;
	long ok = 0, offline = 0, timeouts = 0, other = 0, partial = 0, flips;
	pthread_t t;
	void *ret;
	int i, r, n = ncpus < 64 ? ncpus : 64;

	stop_hotplug = 0;
	pthread_create(&t, NULL, hotplug, NULL);
	while (time(NULL) < end) {
		for (i = 0; i < n; i++) {
			ops[i] = mkop(MSRBATCH_OP_RDTSC, i, 0, 0, 0);
			ops[i].status = 4242;
		}
		r = batch(fd, ops, n, MSRBATCH_F_SYNC_START, &b);
		if (r == 0) {
			ok++;
			for (i = 0; i < n; i++)
				partial += ops[i].status != 0;
		} else if (r == -ENXIO || r == -ETIMEDOUT) {
			/* Nothing ran: nothing was copied back either. */
			if (r == -ENXIO)
				offline++;
			else
				timeouts++;
			for (i = 0; i < n; i++)
				partial += ops[i].status != 4242;
		} else {
			other++;
			printf("# unexpected %d\n", r);
		}
	}
	stop_hotplug = 1;
	pthread_join(t, &ret);
	flips = (long)ret;
	ksft_test_result(ok > 0 && other == 0 && partial == 0,
			 "%d s of synchronised batches while CPU %d went off and on %ld times: %ld ran whole, %ld ENXIO, %ld ETIMEDOUT (a vCPU not scheduled in time), none half run\n",
			 seconds, ncpus - 1, flips, ok, offline, timeouts);
}

int main(int argc, char **argv)
{
	ksft_print_header();
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("cannot open /dev/msrbatch\n");
	printf("# msrbatch synchronised start and timestamps, %d CPUs\n", ncpus);
	test_timestamps();
	test_sync_program();
	test_spread();
	test_hotplug(argc > 1 ? atoi(argv[1]) : 5);
	tests_done();
}
