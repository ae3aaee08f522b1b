/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the C guest tests share, in one place: kselftest's KTAP output
 * (kselftest.h from the kernel tree's tools/testing/selftests, which
 * tests/harness/guest.sh puts on the include path), opening the device, one
 * wrapper per ioctl, building an op, counting the online CPUs, taking a CPU
 * off- and online, pinning, the user-mode RDPMC probe that tells CR4.PCE
 * apart, and the sampler's request. Included by one test program each, which
 * defines _GNU_SOURCE before its first include.
 *
 * A test prints ksft_print_header() first, one ksft_test_result*() line per
 * check (a skip says why: ksft_test_result_skip("what: why\n")), and ends with
 * tests_done(). tests/guest/run-all.sh nests each program's KTAP under its own
 * and counts the results.
 */
#ifndef MSRBATCH_TESTLIB_H
#define MSRBATCH_TESTLIB_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/msrbatch.h>

#include "kselftest.h"

#define PAGE 4096u

/*
 * Ends the program: the plan (known only now: which checks a run makes
 * depends on its CPUs), kselftest's totals, and exit status KSFT_PASS, or
 * KSFT_FAIL when a check failed.
 */
static inline __noreturn void tests_done(void)
{
	ksft_set_plan(ksft_test_num());
	ksft_finished();
}

/* A part of a test program that can be run alone (run_parts). */
struct test_part {
	const char *name;
	void (*run)(void);
};

/* Runs the parts named in argv[1..], or all n of them; an unknown name fails. */
static inline void run_parts(const struct test_part *parts, int n, int argc, char **argv)
{
	int i, j;

	for (i = 1; i < (argc > 1 ? argc : n + 1); i++) {
		const char *name = argc > 1 ? argv[i] : parts[i - 1].name;

		for (j = 0; j < n && strcmp(parts[j].name, name); j++)
			;
		ksft_print_msg("part %s\n", name);
		if (j < n)
			parts[j].run();
		else
			ksft_test_result_fail("unknown part %s\n", name);
	}
}

/* Opens /dev/msrbatch close-on-exec; the descriptor, or -1 with errno set (and said). */
static inline int dev_open(int flags)
{
	int fd = open("/dev/msrbatch", flags | O_CLOEXEC), err = errno;

	if (fd < 0) {
		ksft_print_msg("open /dev/msrbatch (flags %#x): %s\n", flags, strerror(err));
		errno = err;
	}
	return fd;
}

/* Runs n ops; 0 or -errno; the header is left in *out when given. */
static inline int batch(int fd, struct msrbatch_op *ops, unsigned int n, __u32 flags,
			struct msrbatch_batch *out)
{
	struct msrbatch_batch b = {
		.version = MSRBATCH_ABI_VERSION, .flags = flags, .nr_ops = n, .ops = (__u64)(uintptr_t)ops,
	};
	int r = ioctl(fd, MSRBATCH_IOC_BATCH, &b) ? -errno : 0;

	if (out)
		*out = b;
	return r;
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

/* One op: the ioctl's -errno, else the op's status; *val its value when given. */
static inline int one_op(int fd, __u16 code, __u32 cpu, __u32 reg, __u64 arg, __u64 *val)
{
	struct msrbatch_op op = mkop(code, cpu, reg, arg, 0);
	int r = batch(fd, &op, 1, 0, NULL);

	if (val)
		*val = op.val[0];
	return r ? r : op.status;
}

/* Prepares n ops; the handle or -errno; the request is left in *out when given. */
static inline int prepare(int fd, struct msrbatch_op *ops, unsigned int n,
			  struct msrbatch_prepare *out)
{
	struct msrbatch_prepare p = {
		.version = MSRBATCH_ABI_VERSION, .nr_ops = n, .ops = (__u64)(uintptr_t)ops,
	};
	int r = ioctl(fd, MSRBATCH_IOC_PREPARE, &p) ? -errno : (int)p.handle;

	if (out)
		*out = p;
	return r;
}

/* Runs a prepared batch; the ioctl's result or -errno. */
static inline int run_prepared(int fd, int handle)
{
	int r = ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)handle);

	return r < 0 ? -errno : r;
}

/* MSRBATCH_IOC_PCE_GRANT with arg (0: this thread); 0 or -errno. */
static inline int pce_grant(int fd, unsigned long arg)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_GRANT, arg) ? -errno : 0;
}

static inline int pce_revoke(int fd)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_REVOKE, 0) ? -errno : 0;
}

/* Opens the device read-write with MSRBATCH_IOC_RESTORE_ON_CLOSE set. */
static inline int open_restoring(void)
{
	int fd = dev_open(O_RDWR);

	if (fd >= 0 && ioctl(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0))
		ksft_perror("RESTORE_ON_CLOSE");
	return fd;
}

/* MSRBATCH_IOC_RESTORE_NOW: what it restored, or -errno. */
static inline int restore_now(int fd)
{
	int r = ioctl(fd, MSRBATCH_IOC_RESTORE_NOW, 0);

	return r < 0 ? -errno : r;
}

/*
 * Writes s to the existing file at path (a knob: never created, so a
 * missing device node does not become a file in /dev), truncated as a
 * shell's `>` does (tracefs's files clear on it; sysfs, procfs, cgroupfs
 * and devices ignore it), in one write(); 0 when all of it was written,
 * else -errno (-EIO for a short write).
 */
static inline int file_write(const char *path, const char *s)
{
	size_t len = strlen(s);
	int fd = open(path, O_WRONLY | O_TRUNC), r;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, len);
	r = n < 0 ? -errno : (size_t)n == len ? 0 : -EIO;
	close(fd);
	return r;
}

/*
 * Reads the file at path into buf, at most len - 1 bytes, NUL-terminated
 * (empty if it cannot be read); the bytes read, or -errno.
 */
static inline ssize_t file_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = 0, got = 0;

	if (len)
		buf[0] = 0;
	if (fd < 0)
		return -errno;
	while (got < (ssize_t)len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += n;
	if (n < 0)
		got = -errno;
	close(fd);
	buf[got < 0 ? 0 : got] = 0;
	return got;
}

/* The first line of the file at path, without its newline, in buf (file_read()); 0 or -errno. */
static inline int file_read_line(const char *path, char *buf, size_t len)
{
	ssize_t n = file_read(path, buf, len);

	buf[strcspn(buf, "\n")] = 0;
	return n < 0 ? (int)n : 0;
}

/* The kernel's taint mask, or ~0 if unreadable. */
static inline unsigned long tainted(void)
{
	char buf[32];

	return file_read("/proc/sys/kernel/tainted", buf, sizeof(buf)) <= 0 ? ~0ul : strtoul(buf, NULL, 10);
}

/* Takes CPU cpu offline (on = 0) or online (on = 1); 0 or -errno. */
static inline int cpu_set_online(int cpu, int on)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	return file_write(path, on ? "1" : "0");
}

/* Pins the calling thread to cpu; 0, or -1 with errno set. */
static inline int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* The number of online CPUs, at most max (the size of a test's per-CPU arrays). */
static inline int online_cpus(int max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > max ? max : n;
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

/* ---- the sampler (MSRBATCH_IOC_SAMPLE) ------------------------------------ */

static inline void req_init(struct msrbatch_sample_req *r, int handle, __u64 period, __u32 pages)
{
	memset(r, 0, sizeof(*r));
	r->version = MSRBATCH_ABI_VERSION;
	r->handle = handle;
	r->period_ns = period;
	r->ring_pages = pages;
}

/* Starts a sampler; its descriptor or -errno. */
static inline int sample(int fd, struct msrbatch_sample_req *r)
{
	int s = ioctl(fd, MSRBATCH_IOC_SAMPLE, r);

	return s < 0 ? -errno : s;
}

/*
 * Starts one-page samplers of prepared batch handle at period until one is
 * refused: how many started (their descriptors stay open), the refusal's
 * -errno in *refusal.
 */
static inline int take_samplers(int fd, int handle, __u64 period, int *refusal)
{
	struct msrbatch_sample_req r;
	int n = 0, s;

	for (;;) {
		req_init(&r, handle, period, 1);
		s = sample(fd, &r);
		if (s < 0) {
			*refusal = s;
			return n;
		}
		n++;
	}
}

/* VmallocUsed from /proc/meminfo in KiB, or -1. */
static inline long vmalloc_used_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmallocUsed: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * Sleeps `us` microseconds, or ends the test. The 32-bit build makes the
 * time64 syscall itself: the guest kernels have no 32-bit time syscalls
 * (CONFIG_COMPAT_32BIT_TIME is off), and 32-bit glibc (2.36) makes the
 * 32-bit clock_nanosleep whenever the time fits in 32 bits, so its
 * nanosleep(), usleep() and sleep() fail at once with ENOSYS there and a
 * test would not wait at all.
 */
static inline void sleep_us(long us)
{
#ifdef __i386__
	struct {
		long long tv_sec, tv_nsec;
	} ts = { us / 1000000, (us % 1000000) * 1000LL };
	long r;

	while ((r = syscall(SYS_clock_nanosleep_time64, CLOCK_MONOTONIC, 0, &ts, &ts)) && errno == EINTR)
		;
#else
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };
	long r;

	while ((r = nanosleep(&ts, &ts)) && errno == EINTR)
		;
#endif
	if (r)
		ksft_exit_fail_msg("sleeping %ld us: %s\n", us, strerror(errno));
}

static inline void sleep_ms(long ms)
{
	sleep_us(ms * 1000);
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/*
 * Function call interrupts taken so far (/proc/interrupts' CAL line) by CPU
 * `cpu`, or by every CPU for -1; -1 if the line or the CPU's count is not
 * there.
 */
static inline long cal_count(int cpu)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[4096];
	long v = -1, sum = 0;
	int i;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		while (*p == ' ')
			p++;
		if (strncmp(p, "CAL:", 4))
			continue;
		p += 4;
		for (i = 0; cpu < 0 || i <= cpu; i++, p = end) {
			v = strtol(p, &end, 10);
			if (end == p)
				break;
			sum += v;
		}
		if (cpu < 0)
			v = i > 0 ? sum : -1;
		else if (i <= cpu)
			v = -1;
		break;
	}
	fclose(f);
	return v;
}

/* msrbatch's module reference count, or -1 if it cannot be read. */
static inline int module_refcnt(void)
{
	FILE *f = fopen("/sys/module/msrbatch/refcnt", "r");
	int n = -1;

	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

/* The module's reference count once it is `want`, or as it is after 10 s. */
static inline int module_refcnt_becomes(int want)
{
	int n = module_refcnt();

	for (int j = 0; j < 1000 && n != want; j++) {
		usleep(10000);
		n = module_refcnt();
	}
	return n;
}

/* ---- the TSC's rate ------------------------------------------------------ */

/* The TSC, read in user mode. */
static inline __u64 rdtsc_user(void)
{
	unsigned int lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (__u64)hi << 32 | lo;
}

/*
 * CLOCK_MONOTONIC (ns) and the TSC read together: of 5 tries, the one whose
 * two clock reads bracket the TSC read most tightly (a vCPU the host
 * preempts between them would skew the pair).
 */
static inline void clock_and_tsc(double *ns, __u64 *tsc)
{
	double best = 1e18, a, b;
	struct timespec t0, t1;
	__u64 t;
	int i;

	*ns = 0;
	*tsc = 0;
	for (i = 0; i < 5; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		t = rdtsc_user();
		clock_gettime(CLOCK_MONOTONIC, &t1);
		a = t0.tv_sec * 1e9 + t0.tv_nsec;
		b = t1.tv_sec * 1e9 + t1.tv_nsec;
		if (b - a < best) {
			best = b - a;
			*ns = (a + b) / 2;
			*tsc = t;
		}
	}
}

/* TSC ticks per millisecond against CLOCK_MONOTONIC, over 200 ms. */
static inline double tsc_per_ms(void)
{
	double n0, n1;
	__u64 a, b;

	clock_and_tsc(&n0, &a);
	sleep_us(200000);
	clock_and_tsc(&n1, &b);
	return (b - a) / ((n1 - n0) / 1e6);
}

/* ---- a confined caller (uid 1000 without CAP_SYS_RAWIO) ------------------ */

/* Loads allowlist text (root); 0 or -1. "\n" (at most 2 bytes) is the empty list. */
static inline int load_list(const char *text)
{
	int fd = open("/dev/msrbatch_allowlist", O_WRONLY);
	ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The allowlist in force, as save_list() found it ("\n" if empty). */
static char saved_list[1 << 16] __attribute__((unused));

/* Saves the allowlist in force in saved_list, for load_list(saved_list). */
static inline int save_list(void)
{
	int fd = open("/dev/msrbatch_allowlist", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, saved_list, sizeof(saved_list) - 1);

	if (fd >= 0)
		close(fd);
	/* A list that fills the buffer may be longer: not saved, not replaced. */
	if (n < 0 || n == (ssize_t)sizeof(saved_list) - 1)
		return -1;
	saved_list[n] = 0;
	if (!n)
		strcpy(saved_list, "\n");
	return 0;
}

/* CAP_SYS_RAWIO in (on) or out of this thread's effective set; 0 or -1. */
static inline int rawio(int on)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	if (on)
		d[0].effective |= 1u << CAP_SYS_RAWIO;
	else
		d[0].effective &= ~(1u << CAP_SYS_RAWIO);
	return syscall(SYS_capset, &h, d);
}

/*
 * A descriptor opened without CAP_SYS_RAWIO (confined) under the allowlist
 * text list, which replaces the list in force: *loaded says whether it was
 * saved and replaced (put it back with load_list(saved_list)). The
 * descriptor, or -1 with errno set.
 */
static inline int open_confined(const char *list, int *loaded)
{
	int fd = -1, err;

	*loaded = save_list() == 0 && load_list(list) == 0;
	if (*loaded && rawio(0) == 0) {
		fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
		err = errno;
		if (rawio(1))
			perror("CAP_SYS_RAWIO back");
		errno = err;
	}
	return fd;
}

static mode_t dev_mode __attribute__((unused));

/* Lets uid 1000 open the node (restored by close_node). */
static inline void open_node(void)
{
	struct stat sb;

	stat("/dev/msrbatch", &sb);
	dev_mode = sb.st_mode & 07777;
	chmod("/dev/msrbatch", 0666);
}

static inline void close_node(void)
{
	chmod("/dev/msrbatch", dev_mode);
}

/* Becomes uid 1000, gid 4242, no supplementary groups (no capabilities). */
static inline int drop_to_user(void)
{
	return setgroups(0, NULL) || setgid(4242) || setuid(1000) ? -1 : 0;
}

/* Runs fn in a child as uid 1000; its results come back through *out. */
static inline int as_user(void (*fn)(int wfd), void *out, size_t len)
{
	int p[2], st, ok;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (drop_to_user())
			_exit(2);
		fn(p[1]);
		_exit(0);
	}
	close(p[1]);
	ok = read(p[0], out, len) == (ssize_t)len;
	close(p[0]);
	waitpid(pid, &st, 0);
	return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

#endif /* MSRBATCH_TESTLIB_H */
