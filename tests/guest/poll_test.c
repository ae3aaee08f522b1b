// SPDX-License-Identifier: GPL-2.0
/*
 * MSRBATCH_OP_POLL, read until changed: on the TSC, which changes at every
 * read (two reads, stamps between the RDTSCs around it), and under a mask of
 * one high bit, which changes at a known time; until a value (EQUAL); the
 * timeout on a value that never changes (mask 0), kept in TSC time; a
 * fault; what the module refuses (flags, timeouts, a CPU's waits,
 * timestamps, samplers); a prepared batch with a poll. The busy budget and
 * the confined caller's polls are in attack_test.c.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "testlib.h"

#define PAT 0x277u
#define TRIES 10

static int fd, cpu;
/* TSC ticks per millisecond, against CLOCK_MONOTONIC. */
static double tpm;

static struct msrbatch_op mkpoll(__u32 reg, __u16 flags, unsigned int us, __u64 mask, __u64 equals)
{
	struct msrbatch_op op = mkop(MSRBATCH_OP_POLL, cpu, reg, mask, equals);

	op.flags = flags | MSRBATCH_POLL_TIMEOUT_US(us);
	return op;
}

/*
 * A batch whose ops the CPU's busy credit left unrun (-ETIME) runs again
 * once the credit has refilled: a vCPU the host preempts with interrupts off
 * spends its credit too (the deficit is capped at 8 budgets, 160 ms).
 */
static int run(struct msrbatch_op *ops, unsigned int n, __u32 flags, struct msrbatch_batch *b)
{
	struct msrbatch_op *orig = malloc(n * sizeof(*ops));
	int r, tries = 0, again;
	unsigned int i;

	memcpy(orig, ops, n * sizeof(*ops));
	do {
		memcpy(ops, orig, n * sizeof(*ops));
		r = batch(fd, ops, n, flags, b);
		for (again = 0, i = 0; r == 0 && i < n; i++)
			again |= ops[i].status == -ETIME;
		if (again)
			sleep_ms(200);
	} while (again && ++tries < 10);
	free(orig);
	return r;
}

static __u32 reads_of(const struct msrbatch_op *op)
{
	return op->val[1] >> 32;
}

static __u32 ticks_of(const struct msrbatch_op *op)
{
	return (__u32)op->val[1];
}

static void test_tsc(void)
{
	struct msrbatch_op ops[3];
	__u64 first;
	int r;

	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[1] = mkpoll(0, MSRBATCH_POLL_F_TSC | MSRBATCH_POLL_F_COUNT, 100, ~0ull, 0);
	ops[2] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	r = run(ops, 3, 0, NULL);
	first = ops[1].val[0] - ticks_of(&ops[1]);
	ksft_test_result(r == 0 && ops[1].status == 0 && reads_of(&ops[1]) == 2 && ticks_of(&ops[1]) > 0 &&
				 ops[0].val[0] <= first && ops[1].val[0] <= ops[2].val[0],
			 "poll on the TSC: 2 reads, %u ticks apart, between the RDTSCs around it (%llu <= %llu <= %llu <= %llu)\n",
			 ticks_of(&ops[1]), (unsigned long long)ops[0].val[0], (unsigned long long)first,
			 (unsigned long long)ops[1].val[0], (unsigned long long)ops[2].val[0]);
	ops[1] = mkpoll(0, MSRBATCH_POLL_F_TSC, 100, ~0ull, 0);
	r = run(ops, 3, 0, NULL);
	ksft_test_result(r == 0 && ops[1].status == 0 && ops[1].val[0] == ops[1].val[1] &&
				 ops[0].val[0] < ops[1].val[1] && ops[1].val[1] <= ops[2].val[0],
			 "poll on the TSC without COUNT: val[1] is the stamp of the last read, the value itself\n");
}

/*
 * Bit 16 of the TSC flips every 65536 ticks: a poll under that mask sees
 * it change, or equal 1, within 65536 (or 131072) ticks and a read.
 */
static void test_timed_change(void)
{
	const __u64 bit = 1ull << 16;
	struct msrbatch_op op;
	__u32 best = ~0u;
	int i, r, ok = 1;
	__u64 first;

	for (i = 0; i < TRIES; i++) {
		op = mkpoll(0, MSRBATCH_POLL_F_TSC | MSRBATCH_POLL_F_COUNT, 2000, bit, 0);
		r = run(&op, 1, 0, NULL);
		first = op.val[0] - ticks_of(&op);
		ok &= r == 0 && op.status == 0 && ((first ^ op.val[0]) & bit) && reads_of(&op) >= 2;
		if (ticks_of(&op) < best)
			best = ticks_of(&op);
	}
	ksft_test_result(ok && best <= 2 * bit, "poll under TSC bit 16: it changes, after %u ticks at best (<= 65536 and a read)\n",
			 best);
	best = ~0u;
	for (ok = 1, i = 0; i < TRIES; i++) {
		op = mkpoll(0, MSRBATCH_POLL_F_TSC | MSRBATCH_POLL_F_EQUAL | MSRBATCH_POLL_F_COUNT, 2000, bit, bit);
		r = run(&op, 1, 0, NULL);
		ok &= r == 0 && op.status == 0 && (op.val[0] & bit);
		if (ticks_of(&op) < best)
			best = ticks_of(&op);
	}
	ksft_test_result(ok && best <= 3 * bit, "poll until TSC bit 16 equals 1: it does, after %u ticks at best\n", best);
	op = mkpoll(PAT, MSRBATCH_POLL_F_EQUAL | MSRBATCH_POLL_F_COUNT, 100, 0, 0);
	r = run(&op, 1, 0, NULL);
	ksft_test_result(r == 0 && op.status == 0 && reads_of(&op) == 1,
			 "poll until (PAT & 0) == 0: true at the first read, 1 read (%u)\n", reads_of(&op));
}

/* Mask 0: nothing changes; the poll ends at its timeout, in TSC time. */
static void test_timeout(void)
{
	struct msrbatch_op op;
	struct timespec t0, t1;
	double want = 0.2 * tpm, over = 1e9, us = 1e9, t;
	int i, r, ok = 1;
	__u64 pat = 0;

	one_op(fd, MSRBATCH_OP_RDMSR, cpu, PAT, 0, &pat);
	for (i = 0; i < TRIES; i++) {
		op = mkpoll(PAT, MSRBATCH_POLL_F_COUNT, 200, 0, 0);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = run(&op, 1, 0, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		t = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
		ok &= r == 0 && op.status == -ETIMEDOUT && op.val[0] == pat && reads_of(&op) >= 2 &&
		      ticks_of(&op) >= 0.9 * want;
		if (ticks_of(&op) - want < over)
			over = ticks_of(&op) - want;
		if (t < us)
			us = t;
	}
	ksft_test_result(ok, "poll of PAT under mask 0: -ETIMEDOUT, val[0] PAT (0x%llx), at least the 200 us (%.0f ticks)\n",
			 (unsigned long long)pat, want);
	ksft_test_result(over <= 0.05 * tpm && us >= 200,
			 "the timeout is kept: %.0f ticks past it at best (<= 50 us), the ioctl took %.0f us\n", over, us);
}

static void test_fault(void)
{
	struct msrbatch_op op = mkpoll(0x7fff0000, MSRBATCH_POLL_F_RDPMC, 10, ~0ull, 0);
	int r = run(&op, 1, 0, NULL);

	ksft_test_result(r == 0 && op.status == -EIO && op.val[0] == 0 && op.val[1] == 0,
			 "poll of RDPMC of no counter: -EIO, val zero (%d)\n", op.status);
}

static void test_refusals(void)
{
	static const struct {
		__u16 flags;
		__u32 reg;
		unsigned int us;
		__u64 mask, equals;
		int err;
		const char *what;
	} bad[] = {
		{ 0, PAT, 0, 1, 0, -EINVAL, "no timeout" },
		{ 0, PAT, MSRBATCH_MAX_POLL_NS / 1000 + 1, 1, 0, -ERANGE, "a timeout over MSRBATCH_MAX_POLL_NS" },
		{ MSRBATCH_POLL_F_RDPMC | MSRBATCH_POLL_F_TSC, 0, 10, 1, 0, -EINVAL, "two sources" },
		{ MSRBATCH_POLL_F_TSC, 1, 10, 1, 0, -EINVAL, "the TSC with a register" },
		{ 0, PAT, 10, 1, 1, -EINVAL, "arg[1] without EQUAL" },
		{ MSRBATCH_POLL_F_EQUAL, PAT, 10, 0xf0, 1, -EINVAL, "EQUAL with a value outside the mask" },
	};
	struct msrbatch_op ops[6];
	struct msrbatch_batch b;
	struct msrbatch_info info;
	unsigned int i;
	int r, good;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
		ops[1] = mkpoll(bad[i].reg, bad[i].flags, bad[i].us, bad[i].mask, bad[i].equals);
		r = batch(fd, ops, 2, 0, &b);
		ksft_test_result(r == bad[i].err && b.err_index == 1, "poll with %s: %s at its index (%d)\n", bad[i].what,
				 bad[i].err == -EINVAL ? "EINVAL" : "ERANGE", r);
	}
	/* A CPU's poll timeouts count with its delays: 5 x 2 ms fit, one more does not. */
	for (i = 0; i < 6; i++)
		ops[i] = mkpoll(PAT, 0, i < 5 ? MSRBATCH_MAX_POLL_NS / 1000 : 1, 0, 0);
	r = batch(fd, ops, 6, 0, &b);
	ksft_test_result(r == -ERANGE && b.err_index == 5,
			 "a CPU's poll timeouts add up to at most MSRBATCH_MAX_CPU_DELAY_NS: ERANGE at the 6th (%d)\n", r);
	/* (A vCPU the host preempts spends the credit: the last may get -ETIME.) */
	r = run(ops, 5, 0, NULL);
	for (good = 1, i = 0; i < 5; i++)
		good &= ops[i].status == -ETIMEDOUT || (i && ops[i].status == -ETIME);
	ksft_test_result(r == 0 && good, "5 polls of 2 ms each run and time out (%d; %d .. %d)\n", r, ops[0].status,
			 ops[4].status);
	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[1] = mkpoll(0, MSRBATCH_POLL_F_TSC, 10, 1, 0);
	r = batch(fd, ops, 2, MSRBATCH_F_TIMESTAMPS, &b);
	ksft_test_result(r == -EINVAL && b.err_index == 1, "poll with MSRBATCH_F_TIMESTAMPS: EINVAL at its index\n");
	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[0].flags = MSRBATCH_POLL_F_TSC;
	r = batch(fd, ops, 1, 0, &b);
	ksft_test_result(r == -EINVAL, "poll flags on another op: EINVAL\n");
	r = ioctl(fd, MSRBATCH_IOC_INFO, &info);
	ksft_test_result(r == 0 && (info.ops_supported >> MSRBATCH_OP_POLL & 1) && MSRBATCH_OP_MAX == MSRBATCH_OP_POLL,
			 "INFO lists MSRBATCH_OP_POLL among the ops\n");
}

static void test_prepared(void)
{
	struct msrbatch_op ops[2];
	struct msrbatch_prepare p;
	struct msrbatch_sample_req req;
	const struct msrbatch_result *res;
	int h, r, tries = 0;

	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[1] = mkpoll(0, MSRBATCH_POLL_F_TSC | MSRBATCH_POLL_F_COUNT, 100, ~0ull, 0);
	h = prepare(fd, ops, 2, &p);
	res = h < 0 ? MAP_FAILED : mmap(NULL, p.mmap_size, PROT_READ, MAP_SHARED, fd, p.mmap_offset);
	if (res == MAP_FAILED) {
		ksft_test_result_fail("prepare a batch with a poll: %d\n", h);
		return;
	}
	while ((r = run_prepared(fd, h)) > 0 && (res[0].status == -ETIME || res[1].status == -ETIME) && ++tries < 10)
		sleep_ms(200);
	ksft_test_result(r == 0 && res[1].status == 0 && res[1].val[1] >> 32 == 2 && res[1].val[0] >= res[0].val[0],
			 "a prepared batch polls: status 0, 2 reads, the value after the RDTSC before it (%d; %d, %llu reads)\n",
			 r, res[1].status, (unsigned long long)(res[1].val[1] >> 32));
	req_init(&req, h, 1000000, 1);
	r = sample(fd, &req);
	ksft_test_result(r == -EINVAL && req.err_index == 1, "a sampler refuses a batch with a poll: EINVAL at its index (%d)\n", r);
	if (r >= 0)
		close(r);
	munmap((void *)res, p.mmap_size);
	ioctl(fd, MSRBATCH_IOC_UNPREPARE, h);
}

int main(void)
{
	ksft_print_header();
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("no device\n");
	cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1;
	tpm = tsc_per_ms();
	printf("# CPU %d, %.0f TSC ticks per ms\n", cpu, tpm);
	test_tsc();
	test_timed_change();
	test_timeout();
	test_fault();
	test_refusals();
	test_prepared();
	close(fd);
	tests_done();
}
