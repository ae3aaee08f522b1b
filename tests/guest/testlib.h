/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the C guest tests share: the TAP-like check lines and the closing
 * "N passed, N failed" tally that run-all.sh reads, building an op, and
 * taking a CPU off- and online. Included by one test program each.
 */
#ifndef MSRBATCH_TESTLIB_H
#define MSRBATCH_TESTLIB_H

#include <fcntl.h>
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

#endif /* MSRBATCH_TESTLIB_H */
