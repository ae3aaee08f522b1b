// SPDX-License-Identifier: GPL-2.0
/*
 * A prepared batch of one op puts its outputs straight into its mapped
 * result, in a copy of the run of its own (execute_on for one op): its
 * status, its value and its stamp reach the mapping as those of a batch of
 * several ops do, on the calling CPU and on another, for a read, a read
 * with MSRBATCH_F_TIMESTAMPS and a faulting RDPMC. (Review of h17-one:
 * b1697f9 took these cases out of the KUnit test.)
 */
#define _GNU_SOURCE
#include "testlib.h"
#include <sys/mman.h>

#define PAT 0x277u

static int fd, ncpus;

/* Prepares op with flags, runs it from CPU 0 and checks its mapped result. */
static void one(const char *what, struct msrbatch_op op, __u32 flags, int want_run, __s32 want_status,
		__u64 want_val0, int want_stamp)
{
	struct msrbatch_prepare p;
	struct msrbatch_result *res;
	int h, r, ok;

	memset(&p, 0, sizeof(p));
	p.version = MSRBATCH_ABI_VERSION;
	p.flags = flags;
	p.nr_ops = 1;
	p.ops = (__u64)(uintptr_t)&op;
	h = ioctl(fd, MSRBATCH_IOC_PREPARE, &p) ? -errno : (int)p.handle;
	res = h < 0 ? MAP_FAILED : mmap(NULL, p.mmap_size, PROT_READ, MAP_SHARED, fd, p.mmap_offset);
	if (res == MAP_FAILED) {
		ksft_test_result_fail("%s: prepare %d, no mapping\n", what, h);
		return;
	}
	/* Twice: the second run's outputs over the first's. */
	r = run_prepared(fd, h);
	r = r == want_run ? run_prepared(fd, h) : r;
	ok = r == want_run && res[0].status == want_status && res[0].val[0] == want_val0 &&
	     (want_stamp ? res[0].val[1] != 0 : res[0].val[1] == 0) && res[0].reserved == 0;
	ksft_test_result(ok, "%s: run %d (want %d), status %d (want %d), values %#llx %#llx\n", what, r, want_run,
			 res[0].status, want_status, (unsigned long long)res[0].val[0],
			 (unsigned long long)res[0].val[1]);
	munmap(res, p.mmap_size);
	ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
}

int main(void)
{
	struct msrbatch_op pat;
	__u64 v;
	char what[96];

	ksft_print_header();
	ncpus = online_cpus(64);
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("cannot open /dev/msrbatch\n");
	ksft_set_plan(6);
	pat = mkop(MSRBATCH_OP_RDMSR, 0, PAT, 0, 0);
	if (batch(fd, &pat, 1, 0, NULL) || pat.status)
		ksft_exit_fail_msg("cannot read PAT\n");
	v = pat.val[0];
	if (pin(0))
		ksft_exit_fail_msg("cannot run on CPU 0\n");
	for (int cpu = 0; cpu < 2; cpu++) {
		const char *where = cpu ? "another CPU" : "the calling CPU";

		if (cpu >= ncpus) {
			ksft_test_result_skip("%s: needs 2 CPUs\n", where);
			ksft_test_result_skip("%s: needs 2 CPUs\n", where);
			ksft_test_result_skip("%s: needs 2 CPUs\n", where);
			continue;
		}
		snprintf(what, sizeof(what), "one RDMSR on %s", where);
		one(what, mkop(MSRBATCH_OP_RDMSR, cpu, PAT, 0, 0), 0, 0, 0, v, 0);
		snprintf(what, sizeof(what), "one RDMSR with MSRBATCH_F_TIMESTAMPS on %s", where);
		one(what, mkop(MSRBATCH_OP_RDMSR, cpu, PAT, 0, 0), MSRBATCH_F_TIMESTAMPS, 0, 0, v, 1);
		/* ECX 0x7fff0000 is no counter: #GP, or #UD without a PMU. */
		snprintf(what, sizeof(what), "one faulting RDPMC with MSRBATCH_F_STOP_ON_ERROR on %s", where);
		one(what, mkop(MSRBATCH_OP_RDPMC, cpu, 0x7fff0000, 0, 0), MSRBATCH_F_STOP_ON_ERROR, 1, -EIO, 0, 0);
	}
	unpin(ncpus);
	close(fd);
	tests_done();
}
