// SPDX-License-Identifier: GPL-2.0
/*
 * Guest integration test of /dev/msrbatch through the raw uapi header only:
 * every op, every errno class, multi-CPU targeting, stop vs continue, an
 * atomic write/read/restore per CPU, and "bad input changes nothing".
 * Built 64-bit and 32-bit (compat) from this one file.
 *
 * Prints one "ok"/"not ok" line per check and a closing "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define MSR_IA32_TSC_AUX	0xc0000103u
#define MSR_IA32_PAT		0x277u
#define MSR_IA32_EFER		0xc0000080u
#define BAD_PMC			0x7fff0000u	/* no counter anywhere */

static int fd, ncpus;

static int run_hdr(struct msrbatch_batch *b)
{
	return ioctl(fd, MSRBATCH_IOC_BATCH, b) < 0 ? -errno : 0;
}

static __u64 read_msr(__u32 cpu, __u32 msr)
{
	struct msrbatch_op op = mkop(MSRBATCH_OP_RDMSR, cpu, msr, 0, 0);

	if (batch(fd, &op, 1, 0, NULL) || op.status) {
		printf("# cannot read MSR %#x on CPU %u\n", msr, cpu);
		return ~0ull;
	}
	return op.val[0];
}

static void test_info(void)
{
	struct msrbatch_info info;

	memset(&info, 0xff, sizeof(info));
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_INFO, &info) == 0, "INFO ioctl\n");
	ksft_test_result(info.version == MSRBATCH_ABI_VERSION && info.max_ops == MSRBATCH_MAX_OPS &&
			 info.max_delay_ns == MSRBATCH_MAX_DELAY_NS &&
			 info.max_cpu_delay_ns == MSRBATCH_MAX_CPU_DELAY_NS &&
			 info.flags_supported == MSRBATCH_F_ALL &&
			 info.max_cpu_busy_ns == MSRBATCH_MAX_CPU_BUSY_NS && info.reserved[0] == 0,
			 "INFO reports version %u, max_ops %u\n", info.version, info.max_ops);
	ksft_test_result(info.ops_supported == (((1ull << (MSRBATCH_OP_MAX + 1)) - 1) & ~1ull),
			 "INFO lists op codes 1..%d\n", MSRBATCH_OP_MAX);
}

/* Linux keeps the CPU number in TSC_AUX bits 11:0: proof of where an op ran. */
static void test_every_op_on_every_cpu(void)
{
	struct msrbatch_op ops[64];
	int n = 0, cpu, i, good;

	for (cpu = 0; cpu < ncpus; cpu++) {
		ops[n++] = mkop(MSRBATCH_OP_RDMSR, cpu, MSR_IA32_TSC_AUX, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDTSCP, cpu, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_CPUID, cpu, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_DELAY, cpu, 0, 2000, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDCR4, cpu, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RMWMSR, cpu, MSR_IA32_TSC_AUX, 0, 0);
	}
	for (i = 0; i < n; i++)
		ops[i].status = 12345, ops[i].val[0] = ops[i].val[1] = 0xdead;
	ksft_test_result(batch(fd, ops, n, 0, NULL) == 0, "one batch, %d ops, all %d CPUs\n", n, ncpus);
	for (cpu = 0; cpu < ncpus; cpu++) {
		struct msrbatch_op *o = &ops[cpu * 8];

		good = 1;
		for (i = 0; i < 8; i++)
			good &= o[i].status == 0;
		ksft_test_result(good, "cpu %d: every op has status 0\n", cpu);
		ksft_test_result((o[0].val[0] & 0xfff) == (__u64)cpu && o[0].val[1] == 0,
				 "cpu %d: RDMSR TSC_AUX ran on that CPU (%#llx)\n", cpu,
				 (unsigned long long)o[0].val[0]);
		ksft_test_result(o[2].val[0] >= o[1].val[0] && o[2].val[1] == o[0].val[0],
				 "cpu %d: RDTSCP after RDTSC, aux == TSC_AUX\n", cpu);
		ksft_test_result((__u32)o[3].val[0] >= 1 && o[3].val[1] != 0,
				 "cpu %d: CPUID 0 gives max leaf %u and a vendor\n", cpu, (__u32)o[3].val[0]);
		ksft_test_result(o[4].val[0] > 0 && o[5].val[0] > o[2].val[0],
				 "cpu %d: DELAY 2us took %llu TSC ticks\n", cpu, (unsigned long long)o[4].val[0]);
		ksft_test_result(o[6].val[0] & (1u << 5), "cpu %d: CR4 %#llx has PAE\n", cpu,
				 (unsigned long long)o[6].val[0]);
		ksft_test_result(o[7].val[0] == o[0].val[0] && o[7].val[1] == o[0].val[0],
				 "cpu %d: RMW with empty masks writes back what it read\n", cpu);
	}
}

static void test_atomic_write_read_restore(void)
{
	struct msrbatch_op ops[4 * 16];
	__u64 orig[16];
	int cpu, n = 0;

	for (cpu = 0; cpu < ncpus; cpu++)
		orig[cpu] = read_msr(cpu, MSR_IA32_TSC_AUX);
	for (cpu = 0; cpu < ncpus; cpu++) {
		ops[n++] = mkop(MSRBATCH_OP_RDMSR, cpu, MSR_IA32_TSC_AUX, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_WRMSR, cpu, MSR_IA32_TSC_AUX, 0xabc00 + cpu, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDMSR, cpu, MSR_IA32_TSC_AUX, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_WRMSR, cpu, MSR_IA32_TSC_AUX, orig[cpu], 0);
	}
	ksft_test_result(batch(fd, ops, n, MSRBATCH_F_STOP_ON_ERROR, NULL) == 0,
			 "write/read/restore batch on all CPUs\n");
	for (cpu = 0; cpu < ncpus; cpu++) {
		struct msrbatch_op *o = &ops[cpu * 4];

		ksft_test_result(o[0].status == 0 && o[1].status == 0 && o[2].status == 0 &&
				 o[3].status == 0 && o[0].val[0] == orig[cpu] &&
				 o[2].val[0] == 0xabc00u + cpu,
				 "cpu %d: read %#llx, wrote and read back %#llx\n", cpu,
				 (unsigned long long)o[0].val[0], (unsigned long long)o[2].val[0]);
		ksft_test_result(read_msr(cpu, MSR_IA32_TSC_AUX) == orig[cpu], "cpu %d: TSC_AUX restored\n", cpu);
	}
}

static void test_rmw(void)
{
	__u64 orig = read_msr(0, MSR_IA32_TSC_AUX);
	struct msrbatch_op ops[2] = {
		mkop(MSRBATCH_OP_RMWMSR, 0, MSR_IA32_TSC_AUX, 0xff, 0x5a),
		mkop(MSRBATCH_OP_WRMSR, 0, MSR_IA32_TSC_AUX, orig, 0),
	};

	ksft_test_result(batch(fd, ops, 2, 0, NULL) == 0 && ops[0].status == 0 && ops[0].val[0] == orig &&
			 ops[0].val[1] == ((orig & ~0xffull) | 0x5a),
			 "RMW clear 0xff set 0x5a: %#llx -> %#llx\n", (unsigned long long)ops[0].val[0],
			 (unsigned long long)ops[0].val[1]);
	ksft_test_result(read_msr(0, MSR_IA32_TSC_AUX) == orig, "RMW test restored TSC_AUX\n");
}

static void test_faults_and_stop(void)
{
	struct msrbatch_op ops[3];
	struct msrbatch_batch b;
	int cpu = ncpus - 1;

	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[1] = mkop(MSRBATCH_OP_RDPMC, cpu, BAD_PMC, 0, 0);
	ops[2] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ksft_test_result(batch(fd, ops, 3, 0, &b) == 0 && b.nr_failed == 1, "faulting RDPMC: batch still runs\n");
	ksft_test_result(ops[0].status == 0 && ops[1].status == -EIO && ops[2].status == 0 &&
			 ops[1].val[0] == 0, "continue: RDPMC gets -EIO, the next op runs\n");

	ops[0] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ops[1] = mkop(MSRBATCH_OP_RDPMC, cpu, BAD_PMC, 0, 0);
	ops[2] = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	ksft_test_result(batch(fd, ops, 3, MSRBATCH_F_STOP_ON_ERROR, &b) == 0 && b.nr_failed == 2,
			 "stop-on-error: nr_failed counts the cancelled op\n");
	ksft_test_result(ops[0].status == 0 && ops[1].status == -EIO && ops[2].status == -ECANCELED &&
			 ops[2].val[0] == 0, "stop-on-error: the op after the fault gets -ECANCELED\n");

	/* Stopping is per CPU: the other CPU's sequence still runs. */
	if (ncpus > 1) {
		ops[0] = mkop(MSRBATCH_OP_RDPMC, 0, BAD_PMC, 0, 0);
		ops[1] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
		ops[2] = mkop(MSRBATCH_OP_RDTSC, 1, 0, 0, 0);
		ksft_test_result(batch(fd, ops, 3, MSRBATCH_F_STOP_ON_ERROR, &b) == 0 &&
				 ops[1].status == -ECANCELED && ops[2].status == 0 && b.nr_failed == 2,
				 "stop-on-error stops only the failing CPU's sequence; nr_failed counts its two ops (%u)\n",
				 b.nr_failed);
		/* Each CPU counts its own failures; the caller adds them up. */
		ops[0] = mkop(MSRBATCH_OP_RDPMC, 0, BAD_PMC, 0, 0);
		ops[1] = mkop(MSRBATCH_OP_RDTSC, 1, 0, 0, 0);
		ops[2] = mkop(MSRBATCH_OP_RDPMC, 1, BAD_PMC, 0, 0);
		ksft_test_result(batch(fd, ops, 3, 0, &b) == 0 && b.nr_failed == 2 && ops[0].status == -EIO &&
				 ops[1].status == 0 && ops[2].status == -EIO,
				 "a fault on each of two CPUs: nr_failed 2 (%u)\n", b.nr_failed);
	}
}

/* A rejected batch runs nothing: the TSC_AUX write before the bad op must not happen. */
static void expect_rejected(struct msrbatch_op *bad, int err, const char *what)
{
	__u64 orig = read_msr(0, MSR_IA32_TSC_AUX);
	struct msrbatch_op ops[2];
	struct msrbatch_batch b;
	int r;

	ops[0] = mkop(MSRBATCH_OP_WRMSR, 0, MSR_IA32_TSC_AUX, 0x777, 0);
	ops[1] = *bad;
	ops[0].status = ops[1].status = 4242;
	r = batch(fd, ops, 2, 0, &b);
	ksft_test_result(r == -err && b.err_index == 1, "%s -> %s (got %s), err_index %u\n", what,
			 strerror(err), strerror(-r), b.err_index);
	ksft_test_result(read_msr(0, MSR_IA32_TSC_AUX) == orig && ops[0].status == 4242,
			 "%s: nothing ran, ops untouched\n", what);
}

static void test_op_validation(void)
{
	struct msrbatch_op op;

	op = mkop(0, 0, 0, 0, 0);
	expect_rejected(&op, EOPNOTSUPP, "op code 0");
	op = mkop(MSRBATCH_OP_MAX + 1, 0, 0, 0, 0);
	expect_rejected(&op, EOPNOTSUPP, "unknown op code");
	/* Its code and flags were once the "no plain op" value of the kernel's validation. */
	op = mkop(0xffff, 0, 0x1234, 0, 0);
	op.flags = 0xffff;
	expect_rejected(&op, EOPNOTSUPP, "op code 0xffff, flags 0xffff");
	op = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	op.flags = 1;
	expect_rejected(&op, EINVAL, "non-zero op flags");
	op = mkop(MSRBATCH_OP_RDMSR, 0, MSR_IA32_PAT, 1, 0);
	expect_rejected(&op, EINVAL, "non-zero unused arg");
	op = mkop(MSRBATCH_OP_RDTSC, 0, 5, 0, 0);
	expect_rejected(&op, EINVAL, "non-zero unused reg");
	op = mkop(MSRBATCH_OP_RDTSC, 4096, 0, 0, 0);
	expect_rejected(&op, ENODEV, "nonexistent CPU 4096");
	op = mkop(MSRBATCH_OP_RDTSC, ~0u, 0, 0, 0);
	expect_rejected(&op, ENODEV, "nonexistent CPU 0xffffffff");
	op = mkop(MSRBATCH_OP_DELAY, 0, 0, MSRBATCH_MAX_DELAY_NS + 1, 0);
	expect_rejected(&op, ERANGE, "DELAY over the per-op limit");
}

static void test_delay_budget(void)
{
	int per = MSRBATCH_MAX_CPU_DELAY_NS / MSRBATCH_MAX_DELAY_NS, i;
	struct msrbatch_op ops[64];
	struct msrbatch_batch b;

	for (i = 0; i <= per; i++)
		ops[i] = mkop(MSRBATCH_OP_DELAY, 0, 0, MSRBATCH_MAX_DELAY_NS, 0);
	ksft_test_result(batch(fd, ops, per + 1, 0, &b) == -ERANGE && b.err_index == (__u32)per,
			 "DELAY total over %d ns on one CPU -> ERANGE at op %d\n", MSRBATCH_MAX_CPU_DELAY_NS, per);
}

static void test_header_validation(void)
{
	struct msrbatch_op op = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	struct msrbatch_batch b, good;
	int r;

	memset(&good, 0, sizeof(good));
	good.version = MSRBATCH_ABI_VERSION;
	good.nr_ops = 1;
	good.ops = (__u64)(uintptr_t)&op;

	b = good, b.version = 0;
	ksft_test_result(run_hdr(&b) == -EPROTONOSUPPORT, "version 0 -> EPROTONOSUPPORT\n");
	b = good, b.version = MSRBATCH_ABI_VERSION + 1;
	ksft_test_result(run_hdr(&b) == -EPROTONOSUPPORT, "version 2 -> EPROTONOSUPPORT\n");
	b = good, b.flags = 1u << 31;
	ksft_test_result(run_hdr(&b) == -EINVAL, "unknown batch flag -> EINVAL\n");
	b = good, b.reserved0 = 1;
	ksft_test_result(run_hdr(&b) == -EINVAL, "reserved0 -> EINVAL\n");
	b = good, b.out_flags = ~0u, b.nr_failed = 9, b.err_index = 3, b.start_spread = 7;
	ksft_test_result(run_hdr(&b) == 0 && b.out_flags == MSRBATCH_OUT_RAN && b.nr_failed == 0 &&
			 b.err_index == MSRBATCH_NO_INDEX,
			 "outputs left in the header are ignored and rewritten (out_flags %#x)\n", b.out_flags);
	b = good, b.flags = 1u << 3;
	ksft_test_result(run_hdr(&b) == -EINVAL, "batch flag bit 3 -> EINVAL\n");
	b = good, b.nr_ops = 0;
	ksft_test_result(run_hdr(&b) == -EINVAL, "nr_ops 0 -> EINVAL\n");
	b = good, b.nr_ops = MSRBATCH_MAX_OPS + 1;
	ksft_test_result(run_hdr(&b) == -E2BIG, "nr_ops %d -> E2BIG\n", MSRBATCH_MAX_OPS + 1);
	b = good, b.nr_ops = ~0u;
	ksft_test_result(run_hdr(&b) == -E2BIG, "nr_ops 0xffffffff -> E2BIG\n");
	b = good, b.ops = 0;
	ksft_test_result(run_hdr(&b) == -EFAULT, "NULL ops -> EFAULT\n");
	b = good, b.ops = 0xffff888000000000ull;
	ksft_test_result(run_hdr(&b) == -EFAULT, "kernel address as ops -> EFAULT\n");
	b = good;
	r = ioctl(fd, MSRBATCH_IOC_BATCH, NULL) < 0 ? -errno : 0;
	ksft_test_result(r == -EFAULT, "NULL header -> EFAULT\n");
	r = ioctl(fd, _IOWR(MSRBATCH_IOC_MAGIC, 0x7f, struct msrbatch_batch), &b) < 0 ? -errno : 0;
	ksft_test_result(r == -ENOTTY, "unknown ioctl -> ENOTTY\n");
	r = ioctl(fd, _IOWR(MSRBATCH_IOC_MAGIC, 0x01, __u32), &b) < 0 ? -errno : 0;
	ksft_test_result(r == -ENOTTY, "BATCH number with a wrong size -> ENOTTY\n");
}

static void test_bad_memory(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct msrbatch_op *ops;
	struct msrbatch_batch b;
	int r;

	if (map == MAP_FAILED) {
		ksft_test_result(0, "mmap\n");
		return;
	}
	munmap(map + page, page);
	/* Two ops: the first fits the mapped page's end, the second does not. */
	ops = (struct msrbatch_op *)(map + page - sizeof(*ops));
	ops[0] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	memset(&b, 0, sizeof(b));
	b.version = MSRBATCH_ABI_VERSION;
	b.nr_ops = 2;
	b.ops = (__u64)(uintptr_t)ops;
	ksft_test_result(run_hdr(&b) == -EFAULT, "ops ending in an unmapped page -> EFAULT\n");
	b.nr_ops = 1;
	ksft_test_result(run_hdr(&b) == 0 && ops[0].status == 0 && ops[0].val[0] != 0,
			 "the same single op, fully mapped, runs\n");
	b.ops = (__u64)(uintptr_t)(map + page);
	ksft_test_result(run_hdr(&b) == -EFAULT, "unmapped ops -> EFAULT\n");
	/* Read-only ops: readable but results cannot be written back. */
	/* A write batch in a read-only array: EFAULT before anything runs. */
	ops[0] = mkop(MSRBATCH_OP_WRMSR, 0, MSR_IA32_TSC_AUX, 0x999, 0);
	ops[0].status = 4242;
	mprotect(map, page, PROT_READ);
	b.ops = (__u64)(uintptr_t)ops;
	r = run_hdr(&b);
	ksft_test_result(r == -EFAULT && ops[0].status == 4242 && read_msr(0, MSR_IA32_TSC_AUX) != 0x999,
			 "write batch in a read-only ops array -> EFAULT, nothing written\n");
	munmap(map, page);
}

/*
 * The largest batch. Each CPU runs its 16384 ops in order until its share
 * has kept it busy for MSRBATCH_MAX_CPU_BUSY_NS; under emulation with the
 * debug kernel's checkers that can come first, and the rest get -ETIME.
 */
static void test_max_ops(void)
{
	struct msrbatch_op *ops = calloc(MSRBATCH_MAX_OPS, sizeof(*ops));
	int i, good = 1, ran = 0, r;
	char *late = calloc(ncpus, 1);
	struct msrbatch_batch b;

	for (i = 0; i < MSRBATCH_MAX_OPS; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, i % ncpus, MSR_IA32_TSC_AUX, 0, 0);
	r = batch(fd, ops, MSRBATCH_MAX_OPS, 0, &b);
	for (i = 0; i < MSRBATCH_MAX_OPS; i++) {
		int cpu = i % ncpus;

		if (ops[i].status == 0) {
			/* In order: nothing runs on a CPU after its first -ETIME. */
			good &= !late[cpu] && (ops[i].val[0] & 0xfff) == (__u64)cpu;
			ran++;
		} else {
			good &= ops[i].status == -ETIME && ops[i].val[0] == 0;
			late[cpu] = 1;
		}
	}
	ksft_test_result(r == 0 && b.nr_failed == (__u32)(MSRBATCH_MAX_OPS - ran) && ran >= ncpus,
			 "%d ops spread over %d CPUs: %d ran, %d over the busy budget\n", MSRBATCH_MAX_OPS, ncpus,
			 ran, MSRBATCH_MAX_OPS - ran);
	ksft_test_result(good, "each ran on its CPU, in order; the rest are -ETIME\n");
	free(late);
	free(ops);
}

/* Writes s to the tracefs file name (file_write()); whether it took. */
static int trace_write(const char *name, const char *s)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/tracing/%s", name);
	return file_write(path, s) == 0;
}

/* Reads the tracefs file name into buf (file_read()); bytes read, or -errno. */
static ssize_t trace_read(const char *name, char *buf, size_t len)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/tracing/%s", name);
	return file_read(path, buf, len);
}

/*
 * kmem:kmalloc events of this process in the trace buffer, which is emptied;
 * -1 if it cannot be read (it always has its header).
 */
static int kmallocs_traced(void)
{
	static char trace[1 << 16];
	const char *at;
	int n = 0;

	if (trace_read("trace", trace, sizeof(trace)) <= 0)
		return -1;
	for (at = trace; (at = strstr(at, " kmalloc: ")); at++)
		n++;
	trace_write("trace", "");
	return n;
}

/*
 * A batch on several CPUs allocates nothing per call (issue #26): counted
 * with the kmem:kmalloc trace event, for this process only. On a kernel
 * with CONFIG_CPUMASK_OFFSTACK (Debian's) the cpumask of its cross-call
 * was allocated at every call. The control, a batch of more ops than the
 * driver keeps on its stack, must be seen to allocate, so that a trace
 * that records nothing cannot pass. What cannot be put back: the trace
 * buffer is emptied, and the event's buffer stays as enabling it grew it.
 */
static void test_no_allocation_per_batch(void)
{
	enum { CALLS = 100, BIG = 64 };
	char pid_before[4096], enable_before[8], pid[16];
	struct msrbatch_op ops[2], big[BIG];
	int mounted = 0, ran = 1, kmallocs = 0, control = 0;
	ssize_t got;

	if (ncpus < 2) {
		ksft_test_result_skip("no allocation per batch: one CPU, no batch on several\n");
		return;
	}
	if (access("/sys/kernel/tracing/events/kmem/kmalloc/enable", W_OK) != 0) {
		mounted = mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0;
		if (access("/sys/kernel/tracing/events/kmem/kmalloc/enable", W_OK) != 0) {
			ksft_test_result_skip("no allocation per batch: no kmem:kmalloc trace event (%s)\n",
					      strerror(errno));
			if (mounted)
				umount("/sys/kernel/tracing");
			return;
		}
	}
	/* (A list of pids that fills the buffer could not be put back whole.) */
	got = trace_read("set_event_pid", pid_before, sizeof(pid_before));
	if (got < 0 || got >= (ssize_t)sizeof(pid_before) - 1 ||
	    trace_read("events/kmem/kmalloc/enable", enable_before, sizeof(enable_before)) < 0) {
		ksft_test_result_fail("no allocation per batch: cannot read the trace settings\n");
		if (mounted)
			umount("/sys/kernel/tracing");
		return;
	}
	snprintf(pid, sizeof(pid), "%d", getpid());
	ops[0] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	ops[1] = mkop(MSRBATCH_OP_RDTSC, 1, 0, 0, 0);
	for (int i = 0; i < BIG; i++)
		big[i] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	/* Each window is read with the event off: reading allocates too. */
	if (trace_write("set_event_pid", pid) && trace_write("trace", "") &&
	    trace_write("events/kmem/kmalloc/enable", "1")) {
		for (int i = 0; i < CALLS; i++)
			ran &= batch(fd, ops, 2, 0, NULL) == 0;
		trace_write("events/kmem/kmalloc/enable", "0");
		kmallocs = kmallocs_traced();
		ran &= trace_write("events/kmem/kmalloc/enable", "1");
		for (int i = 0; i < CALLS / 2; i++)
			ran &= batch(fd, big, BIG, 0, NULL) == 0;
		trace_write("events/kmem/kmalloc/enable", "0");
		control = kmallocs_traced();
	} else {
		ran = 0;
	}
	/* The settings as they were (set_event_pid lists one pid a line). */
	trace_write("events/kmem/kmalloc/enable", enable_before[0] == '1' ? "1" : "0");
	trace_write("set_event_pid", pid_before);
	trace_write("trace", "");
	if (mounted)
		umount("/sys/kernel/tracing");
	/* The control's own: over what a window holds besides (turning the event off). */
	ksft_test_result(ran && kmallocs >= 0 && kmallocs < CALLS / 10 && control - kmallocs >= CALLS / 4,
			 "%d batches of one op on each of CPUs 0 and 1: %d kmallocs in this process (fewer than %d; "
			 "%d batches of %d ops, the control, one each: %d, at least %d more)\n",
			 CALLS, kmallocs, CALLS / 10, CALLS / 2, BIG, control, CALLS / 4);
}

static void test_offline_cpu(void)
{
	struct msrbatch_op op;
	int cpu = ncpus - 1;

	if (ncpus < 2 || cpu_set_online(cpu, 0)) {
		ksft_test_result_skip("offline CPU: cannot take CPU %d offline\n", cpu);
		return;
	}
	op = mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0);
	expect_rejected(&op, ENXIO, "offline CPU");
	ksft_test_result(cpu_set_online(cpu, 1) == 0, "CPU %d back online\n", cpu);
	op = mkop(MSRBATCH_OP_RDMSR, cpu, MSR_IA32_TSC_AUX, 0, 0);
	ksft_test_result(batch(fd, &op, 1, 0, NULL) == 0 && (op.val[0] & 0xfff) == (__u64)cpu,
			 "CPU %d runs ops again after onlining\n", cpu);
}

static void test_unprivileged_open(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		int f;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		f = dev_open(O_RDWR);
		_exit(f >= 0 ? 0 : errno == EPERM || errno == EACCES ? 1 : 2);
	}
	waitpid(pid, &status, 0);
	ksft_test_result(WIFEXITED(status) && WEXITSTATUS(status) == 1,
			 "uid 65534 without CAP_SYS_RAWIO cannot open the device\n");
}

static void test_taint(void)
{
	unsigned long t = tainted();

	if (t == ~0ul) {
		ksft_test_result_skip("taint: /proc/sys/kernel/tainted unreadable\n");
		return;
	}
	ksft_test_result(t & (1ul << 2), "a write batch set TAINT_CPU_OUT_OF_SPEC (tainted=%lu)\n", t);
}

int main(void)
{
	ksft_print_header();
	ncpus = online_cpus(16);
	printf("# msrbatch ABI test (%zu-bit), %d CPUs\n", sizeof(void *) * 8, ncpus);
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("cannot open /dev/msrbatch\n");
	test_info();
	test_every_op_on_every_cpu();
	test_atomic_write_read_restore();
	test_rmw();
	test_faults_and_stop();
	test_op_validation();
	test_delay_budget();
	test_header_validation();
	test_bad_memory();
	test_max_ops();
	test_offline_cpu();
	test_no_allocation_per_batch();
	test_unprivileged_open();
	test_taint();
	close(fd);
	tests_done();
}
