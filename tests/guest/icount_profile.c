// SPDX-License-Identifier: GPL-2.0
/*
 * icount_profile: the guest side of tests/harness/icount-profile.sh. Runs
 * one ioctl shape of icount_bench (tests/guest/icount_bench.c) N times in a
 * tight loop between two markers that the harness's QEMU plugin
 * (tests/harness/icount-profile/plugin.c) finds by their bytes:
 * `mov $0x4d534250, %eax` opens a window in which it counts every guest
 * instruction by address, `mov $0x4d534251, %eax` closes it. Usage:
 *
 *   icount_profile [-n N] SHAPE...
 *
 * one window per SHAPE, in order (the plugin numbers them from 0):
 * batch_local_1, prepared_local_1, batch_remote_1, prepared_remote_1,
 * batch_cpus4x1, prepared_cpus4x1 (one RDMSR of IA32_PAT per CPU, the
 * caller on CPU 0, as icount_bench's shapes), batch_local_4096 and
 * prepared_local_4096 (4096 of them on CPU 0), batch_cpus4x8 (8 on each of 4
 * CPUs), confined_batch_local_1, confined_batch_remote_1,
 * confined_batch_cpus4x1, confined_prepared_cpus4x1 and
 * confined_batch_cpus4x8 (those shapes on a descriptor opened without
 * CAP_SYS_RAWIO, confined by an allowlist that lists IA32_PAT, loaded for
 * the run and put back after it, as icount_bench's), floor_batch_local_1,
 * floor_prepared_local_1, floor_batch_remote_1, floor_prepared_remote_1,
 * floor_batch_cpus4x1 and floor_prepared_cpus4x1 (those shapes through
 * /dev/msrbatch_floor, the floor driver of tests/guest/floor, which the
 * harness loads), enotty (an ioctl the
 * driver refuses), getppid (a raw system call), empty (the loop alone). Each
 * shape runs 100 times before its window (translation, caches, the
 * prepared batch's first run), 31 times one by one between two RDTSCs
 * (the minimum, less the two RDTSCs, is icount_bench's figure for the
 * shape: under -icount shift=0 a TSC tick is a guest instruction), then N
 * times (default 10000) in its window.
 */
#define _GNU_SOURCE
#include <x86intrin.h>

#include "testlib.h"

#define PAT 0x277u
#define NCPU 4
#define MANY 4096

static struct msrbatch_op ops[MANY];
static struct msrbatch_batch hdr;

static inline void window_open(void)
{
	__asm__ volatile("mov $0x4d534250, %%eax" ::: "eax", "memory");
}

static inline void window_close(void)
{
	__asm__ volatile("mov $0x4d534251, %%eax" ::: "eax", "memory");
}

/* `per` ops on each of `ncpus` CPUs from `first_cpu`, grouped by CPU. */
static void fill(int ncpus, int first_cpu, int per)
{
	for (int i = 0; i < ncpus * per; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, first_cpu + i / per, PAT, 0, 0);
	memset(&hdr, 0, sizeof(hdr));
	hdr.version = MSRBATCH_ABI_VERSION;
	hdr.nr_ops = ncpus * per;
	hdr.ops = (__u64)(uintptr_t)ops;
}

enum kind { PLAIN, PREPARED, ENOTTY_IOCTL, GETPPID, EMPTY };

/* A shape's descriptor: the floor driver's (tests/guest/floor), not msrbatch's. */
#define FLOOR 2

static const struct {
	const char *name;
	enum kind kind;
	int ncpus, first, per, confined;	/* confined: 2 for the floor driver */
} shapes[] = {
	{ "batch_local_1", PLAIN, 1, 0, 1, 0 },
	{ "prepared_local_1", PREPARED, 1, 0, 1, 0 },
	{ "batch_remote_1", PLAIN, 1, 1, 1, 0 },
	{ "prepared_remote_1", PREPARED, 1, 1, 1, 0 },
	{ "batch_cpus4x1", PLAIN, NCPU, 0, 1, 0 },
	{ "prepared_cpus4x1", PREPARED, NCPU, 0, 1, 0 },
	{ "batch_local_4096", PLAIN, 1, 0, MANY, 0 },
	{ "prepared_local_4096", PREPARED, 1, 0, MANY, 0 },
	{ "batch_cpus4x8", PLAIN, NCPU, 0, 8, 0 },
	{ "confined_batch_local_1", PLAIN, 1, 0, 1, 1 },
	{ "confined_batch_remote_1", PLAIN, 1, 1, 1, 1 },
	{ "confined_batch_cpus4x1", PLAIN, NCPU, 0, 1, 1 },
	{ "confined_prepared_cpus4x1", PREPARED, NCPU, 0, 1, 1 },
	{ "confined_batch_cpus4x8", PLAIN, NCPU, 0, 8, 1 },
	{ "floor_batch_local_1", PLAIN, 1, 0, 1, FLOOR },
	{ "floor_prepared_local_1", PREPARED, 1, 0, 1, FLOOR },
	{ "floor_batch_remote_1", PLAIN, 1, 1, 1, FLOOR },
	{ "floor_prepared_remote_1", PREPARED, 1, 1, 1, FLOOR },
	{ "floor_batch_cpus4x1", PLAIN, NCPU, 0, 1, FLOOR },
	{ "floor_prepared_cpus4x1", PREPARED, NCPU, 0, 1, FLOOR },
	{ "enotty", ENOTTY_IOCTL, 0, 0, 0, 0 },
	{ "getppid", GETPPID, 0, 0, 0, 0 },
	{ "empty", EMPTY, 0, 0, 0, 0 },
};

/* n calls of the shape; the number that failed. */
static long run(int fd, enum kind kind, int h, long n)
{
	long bad = 0;

	switch (kind) {
	case PLAIN:
		for (long i = 0; i < n; i++)
			bad += ioctl(fd, MSRBATCH_IOC_BATCH, &hdr) != 0 || hdr.nr_failed;
		break;
	case PREPARED:
		/* A run returns its number of failed ops. */
		for (long i = 0; i < n; i++)
			bad += ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)h) != 0;
		break;
	case ENOTTY_IOCTL:
		for (long i = 0; i < n; i++)
			bad += ioctl(fd, _IO(MSRBATCH_IOC_MAGIC, 0x7f), 0) != -1 || errno != ENOTTY;
		break;
	case GETPPID:
		for (long i = 0; i < n; i++)
			bad += syscall(SYS_getppid) <= 0;
		break;
	case EMPTY:
		for (long i = 0; i < n; i++)
			__asm__ volatile("" ::: "memory");
		break;
	}
	return bad;
}

/*
 * icount_bench's figure, measured as it measures it: the cheapest of 31
 * calls, each alone between two RDTSCs, less two RDTSCs.
 */
#define CHEAPEST(call)                                                         \
	({                                                                     \
		unsigned long long best_ = ~0ULL;                              \
		for (int r_ = 0; r_ < 31; r_++) {                              \
			unsigned long long t0_ = __rdtsc();                    \
			call;                                                  \
			unsigned long long d_ = __rdtsc() - t0_;               \
			if (d_ < best_)                                        \
				best_ = d_;                                    \
		}                                                              \
		best_;                                                         \
	})

static unsigned long long cheapest(int fd, enum kind kind, int h)
{
	unsigned long long best = 0, overhead = ~0ULL, t0, t1;

	for (int i = 0; i < 1000; i++) {
		t0 = __rdtsc();
		t1 = __rdtsc();
		if (t1 - t0 < overhead)
			overhead = t1 - t0;
	}
	switch (kind) {
	case PLAIN:
		best = CHEAPEST(ioctl(fd, MSRBATCH_IOC_BATCH, &hdr));
		break;
	case PREPARED:
		best = CHEAPEST(ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)h));
		break;
	case ENOTTY_IOCTL:
		best = CHEAPEST(ioctl(fd, _IO(MSRBATCH_IOC_MAGIC, 0x7f), 0));
		break;
	case GETPPID:
		best = CHEAPEST(syscall(SYS_getppid));
		break;
	case EMPTY:
		best = CHEAPEST(__asm__ volatile("" ::: "memory"));
		break;
	}
	return best > overhead ? best - overhead : 0;
}

/* The index of the shape called name, or -1. */
static int shape_of(const char *name)
{
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		if (!strcmp(name, shapes[s].name))
			return s;
	return -1;
}

int main(int argc, char **argv)
{
	long n = 10000;
	int priv, conf = -1, loaded = 0, window = 0, rc = 0, a = 1;

	if (argc > 2 && !strcmp(argv[1], "-n")) {
		n = atol(argv[2]);
		a = 3;
	}
	if (n <= 0 || a >= argc) {
		fprintf(stderr, "usage: icount_profile [-n N] SHAPE...\n");
		return 2;
	}
	for (int b = a; b < argc; b++) {
		if (shape_of(argv[b]) < 0) {
			fprintf(stderr, "icount_profile: unknown shape '%s'\n", argv[b]);
			return 2;
		}
	}
	priv = dev_open(O_RDWR);
	if (priv < 0) {
		perror("/dev/msrbatch");
		return 1;
	}
	for (int b = a; b < argc && conf < 0; b++) {
		if (shapes[shape_of(argv[b])].confined == 1) {
			/* As icount_bench's: an allowlist that lists IA32_PAT. */
			conf = open_confined("0x00000277 0x0000000000000000\n", &loaded);
			if (conf < 0) {
				fprintf(stderr, "icount_profile: no confined descriptor (%s)\n",
					loaded ? strerror(errno) : "the allowlist could not be saved and replaced");
				rc = 1;
				goto out;
			}
		}
	}
	if (pin(0)) {
		perror("sched_setaffinity");
		rc = 1;
		goto out;
	}
	for (; a < argc; a++) {
		int s = shape_of(argv[a]), h = -1, many = shapes[s].per == MANY;
		int fd = shapes[s].confined == FLOOR ? open("/dev/msrbatch_floor", O_RDWR | O_CLOEXEC)
			 : shapes[s].confined ? conf : priv;
		long bad, calls;
		unsigned long long best;

		if (fd < 0) {
			fprintf(stderr, "icount_profile: /dev/msrbatch_floor: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		fill(shapes[s].ncpus, shapes[s].first, shapes[s].per);
		if (shapes[s].kind == PREPARED) {
			h = prepare(fd, ops, hdr.nr_ops, NULL);
			if (h < 0) {
				fprintf(stderr, "icount_profile: prepare: %s\n", strerror(-h));
				rc = 1;
				break;
			}
		}
		/*
		 * The 4096-op shapes spend more than a fifth of their time in
		 * their share: the CPU's busy credit (MSRBATCH_MAX_CPU_BUSY_NS)
		 * would refuse their ops (-ETIME) after about 200 calls. So they
		 * run 10 times to warm up, their window has at most 100 calls,
		 * and the credit rests (fills at a fifth of the time that
		 * passes) before the 31 timed calls and before the window.
		 */
		bad = run(fd, shapes[s].kind, h, many ? 10 : 100);
		if (many)
			usleep(100000);
		best = cheapest(fd, shapes[s].kind, h);
		if (many)
			usleep(100000);
		calls = many && n > 100 ? 100 : n;
		window_open();
		bad += run(fd, shapes[s].kind, h, calls);
		window_close();
		printf("icount_profile: window %d: %s: %ld calls, %ld failed, rdtsc min %llu\n", window++, argv[a], calls,
		       bad, best);
		fflush(stdout);
		if (bad)
			rc = 1;
		if (h >= 0)
			ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
		if (shapes[s].confined == FLOOR)
			close(fd);	/* and its prepared batch with it */
	}
out:
	if (conf >= 0)
		close(conf);
	if (loaded && load_list(saved_list)) {
		fprintf(stderr, "icount_profile: could not put the allowlist back\n");
		rc = 1;
	}
	return rc;
}
