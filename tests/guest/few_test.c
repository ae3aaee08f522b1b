// SPDX-License-Identifier: GPL-2.0
/*
 * Batches on several CPUs, small (up to 32 ops: each CPU runs the ops of
 * its span of the array that name it) and one op more (grouped): every op
 * runs once, on the CPU it names (TSC_AUX holds the CPU number), in array
 * order per CPU (RDTSC stamps); a batch that names an offline CPU runs
 * nothing and blames the first op of the lowest-numbered offline CPU.
 * (Review of c1e5330: few_outcomes, OfCpu, Shares::first_op.)
 */
#define _GNU_SOURCE
#include "testlib.h"

#define MSR_IA32_TSC_AUX 0xc0000103u
#define MAXOPS 33

static int fd, ncpus;

static __u64 rng = 0x9e3779b97f4a7c15ull;

static unsigned int next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng >> 17);
}

/*
 * n ops on the CPUs of cpus[], alternately RDMSR TSC_AUX and RDTSC with
 * F_TIMESTAMPS: each must be on its CPU, and each CPU's stamps rise in
 * array order. Returns 1 if all is well.
 */
static int check_batch(const unsigned int *cpus, unsigned int n, char *why, size_t len)
{
	struct msrbatch_op ops[MAXOPS];
	struct msrbatch_batch out;
	__u64 last[64] = { 0 };
	int r;

	for (unsigned int i = 0; i < n; i++) {
		ops[i] = mkop(i % 2 ? MSRBATCH_OP_RDTSC : MSRBATCH_OP_RDMSR, cpus[i],
			      i % 2 ? 0 : MSR_IA32_TSC_AUX, 0, 0);
		ops[i].status = 4242;
		ops[i].val[0] = ops[i].val[1] = ~0ull;
	}
	r = batch(fd, ops, n, MSRBATCH_F_TIMESTAMPS, &out);
	if (r) {
		snprintf(why, len, "batch: %s", strerror(-r));
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		/* A timestamp: the TSC when the op ran. */
		__u64 t = ops[i].val[1];

		if (ops[i].status == -ETIME)
			continue;	/* the CPU's credit: no verdict */
		if (ops[i].status) {
			snprintf(why, len, "op %u (cpu %u): status %d", i, cpus[i], ops[i].status);
			return 0;
		}
		if (i % 2 == 0 && (ops[i].val[0] & 0xfff) != cpus[i]) {
			snprintf(why, len, "op %u: named cpu %u, ran on %llu", i, cpus[i],
				 (unsigned long long)(ops[i].val[0] & 0xfff));
			return 0;
		}
		if (t <= last[cpus[i]]) {
			snprintf(why, len, "op %u (cpu %u): stamp %llu not after the CPU's op before (%llu)", i,
				 cpus[i], (unsigned long long)t, (unsigned long long)last[cpus[i]]);
			return 0;
		}
		last[cpus[i]] = t;
	}
	if (out.out_flags != MSRBATCH_OUT_RAN || out.err_index != MSRBATCH_NO_INDEX) {
		snprintf(why, len, "header: out_flags %#x err_index %u", out.out_flags, out.err_index);
		return 0;
	}
	return 1;
}

static void test_placement(void)
{
	unsigned int cpus[MAXOPS];
	char why[256] = "";
	int ok = 1, tried = 0;

	for (int iter = 0; iter < 3000 && ok; iter++) {
		unsigned int n = 2 + next_rand() % (MAXOPS - 1), k = 2 + next_rand() % (ncpus - 1);
		unsigned int c0 = next_rand() % ncpus;

		for (unsigned int i = 0; i < n; i++) {
			/* Runs of one CPU, and CPUs that come back. */
			if (i && next_rand() % 3 == 0)
				cpus[i] = cpus[i - 1];
			else
				cpus[i] = (c0 + next_rand() % k) % ncpus;
		}
		ok = check_batch(cpus, n, why, sizeof(why));
		tried++;
	}
	ksft_test_result(ok, "%d batches of 2 to %d ops on several CPUs: each op on its CPU, once, in array order%s%s\n",
			 tried, MAXOPS, ok ? "" : ": ", why);
}

/* cpus[] names CPUs a and b offline: ENXIO, nothing run, err_index want. */
static void offline_case(const unsigned int *cpus, unsigned int n, unsigned int want, const char *what)
{
	struct msrbatch_op ops[MAXOPS];
	struct msrbatch_batch out;
	int r, untouched = 1;

	for (unsigned int i = 0; i < n; i++) {
		ops[i] = mkop(MSRBATCH_OP_RDTSC, cpus[i], 0, 0, 0);
		ops[i].status = 4242;
	}
	r = batch(fd, ops, n, 0, &out);
	for (unsigned int i = 0; i < n; i++)
		untouched &= ops[i].status == 4242;
	ksft_test_result(r == -ENXIO && out.err_index == want && untouched && !(out.out_flags & MSRBATCH_OUT_RAN),
			 "%s: ENXIO, err_index %u (the first op of the lowest offline CPU), nothing run (r=%d, err_index %u, untouched %d)\n",
			 what, want, r, out.err_index, untouched);
}

static void test_offline(void)
{
	unsigned int few[] = { 0, 3, 1, 3, 2, 0, 2, 1 };
	unsigned int many[MAXOPS];
	int a = 2, b = 3;

	if (ncpus < 4 || cpu_set_online(b, 0)) {
		ksft_test_result_skip("offline: need 4 CPUs, CPU 3 offline\n");
		ksft_test_result_skip("offline: grouped\n");
		return;
	}
	if (cpu_set_online(a, 0)) {
		cpu_set_online(b, 1);
		ksft_test_result_skip("offline: cannot take CPU 2 offline\n");
		ksft_test_result_skip("offline: grouped\n");
		return;
	}
	/* CPU 3's first op is op 1, CPU 2's op 4: the lowest offline is 2. */
	offline_case(few, 8, 4, "8 ops on CPUs 0-3, CPUs 2 and 3 offline");
	for (unsigned int i = 0; i < MAXOPS; i++)
		many[i] = i < 10 ? (i % 2 ? 3 : 0) : i == 20 ? 2 : 1;
	offline_case(many, MAXOPS, 20, "33 ops (grouped), CPUs 2 and 3 offline");
	cpu_set_online(a, 1);
	cpu_set_online(b, 1);
}

int main(void)
{
	ksft_print_header();
	ncpus = online_cpus(64);
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("cannot open /dev/msrbatch\n");
	if (ncpus < 2)
		ksft_exit_skip("one CPU\n");
	ksft_set_plan(3);
	test_placement();
	test_offline();
	close(fd);
	tests_done();
}
