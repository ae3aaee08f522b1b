/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the C guest tests share: the TAP-like check lines and the closing
 * "N passed, N failed" tally that run-all.sh reads, building an op, taking a
 * CPU off- and online, pinning, and the user-mode RDPMC probe that tells
 * CR4.PCE apart. Included by one test program each, which defines
 * _GNU_SOURCE before its first include.
 */
#ifndef MSRBATCH_TESTLIB_H
#define MSRBATCH_TESTLIB_H

#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/msrbatch.h>

static int passed, failed;

/* Prints "ok - ..." or "not ok - ..." and counts it. */
static inline __attribute__((format(printf, 2, 3))) void check(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", cond ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (cond)
		passed++;
	else
		failed++;
}

/* A check that could not run, and why. */
static inline void skip(const char *what, const char *why)
{
	printf("ok - # SKIP %s: %s\n", what, why);
}

/* Prints the tally; the program's exit status. */
static inline int tally(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

static inline struct msrbatch_op mkop(__u16 code, __u32 cpu, __u32 reg, __u64 a0, __u64 a1)
{
	struct msrbatch_op op;

	memset(&op, 0, sizeof(op));
	op.op = code;
	op.cpu = cpu;
	op.reg = reg;
	op.arg[0] = a0;
	op.arg[1] = a1;
	return op;
}

/* Takes CPU cpu offline (on = 0) or online (on = 1); 0 or -1. */
static inline int cpu_set_online(int cpu, int on)
{
	char path[64];
	int fd, r;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	r = write(fd, on ? "1" : "0", 1) == 1 ? 0 : -1;
	close(fd);
	return r;
}

/* Pins the calling thread to cpu; 0, or -1 with errno set. */
static inline int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* Lets the calling thread run on CPUs 0 .. ncpus - 1 again. */
static inline void unpin(int ncpus)
{
	cpu_set_t set;
	int i;

	CPU_ZERO(&set);
	for (i = 0; i < ncpus; i++)
		CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * The RDPMC probe: with CR4.PCE clear, user-mode RDPMC raises #GP (SIGSEGV);
 * with it set it runs, or under QEMU TCG (no PMU) raises #UD (SIGILL).
 * probe_setup() installs the handler once per process.
 */
static __thread sigjmp_buf probe_jb __attribute__((unused));

static inline void probe_fault(int sig)
{
	siglongjmp(probe_jb, sig);
}

static inline void probe_setup(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = probe_fault;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
}

/* 1 when this thread may execute RDPMC in user mode (CR4.PCE set). */
static inline int pce_on(void)
{
	unsigned int lo, hi;
	int sig = sigsetjmp(probe_jb, 1);

	if (sig)
		return sig != SIGSEGV;
	asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(0));
	return 1;
}

#endif /* MSRBATCH_TESTLIB_H */
