// SPDX-License-Identifier: GPL-2.0
/*
 * Prepared batches (MSRBATCH_IOC_PREPARE / RUN / UNPREPARE and mmap of the
 * results): what they return, and their lifetimes: close, munmap, fork,
 * UNPREPARE during runs, runs of one batch taking turns, CPU hotplug,
 * allow_writes changing between runs.
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define PAT 0x277u
#define TSC_AUX 0xc0000103u
#define PARAM "/sys/module/msrbatch/parameters/allow_writes"

static int ncpus;

static struct msrbatch_result *map(int fd, struct msrbatch_prepare *p)
{
	void *m = mmap(NULL, p->mmap_size, PROT_READ, MAP_SHARED, fd, p->mmap_offset);

	return m == MAP_FAILED ? NULL : m;
}

static void write_param(const char *v)
{
	int r = file_write(PARAM, v);

	if (r && r != -ENOENT)
		ksft_print_msg("%s: %s\n", PARAM, strerror(-r));
}

static void test_basics(void)
{
	int fd = dev_open(O_RDWR), h, i, r, good = 1;
	struct msrbatch_op ops[64];
	struct msrbatch_prepare p;
	struct msrbatch_result *res;
	__u64 t0;

	for (i = 0; i < 64; i++)
		ops[i] = mkop(i % 2 ? MSRBATCH_OP_RDTSC : MSRBATCH_OP_RDMSR, 0, i % 2 ? 0 : PAT, 0, 0);
	h = prepare(fd, ops, 64, &p);
	ksft_test_result(h >= 0 && p.err_index == MSRBATCH_NO_INDEX && p.mmap_size >= 64 * sizeof(*res) &&
			 p.mmap_offset == (__u64)h * MSRBATCH_PREPARED_STRIDE,
			 "prepare 64 ops: handle %d, results at offset %#llx, %llu bytes\n", h,
			 (unsigned long long)p.mmap_offset, (unsigned long long)p.mmap_size);
	res = map(fd, &p);
	ksft_test_result(res != NULL, "the results map read-only\n");
	if (!res)
		return;
	ksft_test_result(res[0].status == 0 && res[0].val[0] == 0, "before the first run the results are zero\n");
	/* Changing the caller's copy after PREPARE changes nothing. */
	ops[0] = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, 0x777, 0);
	r = run_prepared(fd, h);
	ksft_test_result(r == 0, "run returns the number of failed ops (%d)\n", r);
	t0 = res[1].val[0];
	for (i = 0; i < 64; i++)
		good &= res[i].status == 0 && res[i].val[0] != 0;
	ksft_test_result(good && res[0].val[0] == res[2].val[0], "every op's result is in the mapping (PAT %#llx)\n",
			 (unsigned long long)res[0].val[0]);
	r = run_prepared(fd, h);
	ksft_test_result(r == 0 && res[1].val[0] > t0, "a second run updates them (TSC %llu -> %llu)\n",
			 (unsigned long long)t0, (unsigned long long)res[1].val[0]);
	ksft_test_result(mmap(NULL, p.mmap_size + 4096, PROT_READ, MAP_SHARED, fd, p.mmap_offset) == MAP_FAILED &&
			 errno == EINVAL, "a mapping larger than the results: EINVAL\n");
	ksft_test_result(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, p.mmap_offset + 4096) == MAP_FAILED &&
			 errno == EINVAL, "a mapping inside a results area: EINVAL\n");
	ksft_test_result(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 7ull * MSRBATCH_PREPARED_STRIDE) == MAP_FAILED &&
			 errno == EINVAL, "a mapping of no prepared batch: EINVAL\n");
	ksft_test_result(run_prepared(fd, 63) == -ENOENT && run_prepared(fd, -1) == -ENOENT, "run of no such handle: ENOENT\n");
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h) == 0, "unprepare\n");
	ksft_test_result(run_prepared(fd, h) == -ENOENT && ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h) == -1 &&
			 errno == ENOENT, "after unprepare: run and unprepare ENOENT\n");
	ksft_test_result(res[1].val[0] != 0, "the mapping still shows the last results after unprepare\n");
	munmap(res, p.mmap_size);
	close(fd);
}

/*
 * Failed ops' results reach the mapping too, with their values zeroed, on
 * every path a run takes: a batch on the calling CPU, on another CPU (both
 * put their outputs straight into the results) and on two CPUs (copied
 * after the run). ECX 0x7fff0000 is no counter: the RDPMC faults (#GP, or
 * #UD without a PMU), and with MSRBATCH_F_STOP_ON_ERROR the op after it on
 * its CPU is cancelled.
 */
static void test_failures_reach_the_mapping(void)
{
	static const struct {
		const char *where;
		int cpu_ok, cpu_bad;
	} shapes[] = { { "the calling CPU", 0, 0 }, { "another CPU", 1, 1 }, { "two CPUs", 0, 1 } };
	int fd = dev_open(O_RDWR);

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		struct msrbatch_op ops[3];
		struct msrbatch_prepare p;
		struct msrbatch_result *res;
		int h, r, ok;

		if (shapes[s].cpu_bad >= ncpus) {
			ksft_test_result_skip("failed ops' results on %s: needs 2 CPUs\n", shapes[s].where);
			continue;
		}
		ops[0] = mkop(MSRBATCH_OP_RDTSC, shapes[s].cpu_ok, 0, 0, 0);
		ops[1] = mkop(MSRBATCH_OP_RDPMC, shapes[s].cpu_bad, 0x7fff0000, 0, 0);
		ops[2] = mkop(MSRBATCH_OP_RDTSC, shapes[s].cpu_bad, 0, 0, 0);
		memset(&p, 0, sizeof(p));
		p.version = MSRBATCH_ABI_VERSION;
		p.flags = MSRBATCH_F_STOP_ON_ERROR;
		p.nr_ops = 3;
		p.ops = (__u64)(uintptr_t)ops;
		h = ioctl(fd, MSRBATCH_IOC_PREPARE, &p) ? -errno : (int)p.handle;
		res = h >= 0 ? map(fd, &p) : NULL;
		if (!res) {
			ksft_test_result_fail("failed ops' results on %s: prepare %d, no mapping\n", shapes[s].where, h);
			continue;
		}
		if (pin(0)) {	/* the caller on CPU 0 */
			ksft_test_result_skip("failed ops' results on %s: cannot run on CPU 0\n", shapes[s].where);
			munmap(res, p.mmap_size);
			ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
			continue;
		}
		r = run_prepared(fd, h);
		/* (The zeroed values of failed ops: KUnit outputs_go_straight_to_the_results.) */
		ok = r == 2 && res[0].status == 0 && res[0].val[0] != 0 && res[0].val[1] == 0 &&
		     res[1].status == -EIO && res[1].val[0] == 0 && res[1].val[1] == 0 &&
		     res[2].status == -ECANCELED && res[2].val[0] == 0 && res[2].val[1] == 0;
		for (int i = 0; i < 3; i++)
			ok &= res[i].reserved == 0;
		ksft_test_result(ok, "failed ops' results on %s reach the mapping: run %d, statuses %d %d %d\n",
				 shapes[s].where, r, res[0].status, res[1].status, res[2].status);
		munmap(res, p.mmap_size);
		ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
	}
	unpin(ncpus);
	close(fd);
}

static void test_validation(void)
{
	int fd = dev_open(O_RDWR), ro = dev_open(O_RDONLY), i, h;
	struct msrbatch_op ops[3] = { mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0), mkop(99, 0, 0, 0, 0) };
	struct msrbatch_prepare p;

	h = prepare(fd, ops, 2, &p);
	ksft_test_result(h == -EOPNOTSUPP && p.err_index == 1, "an invalid op is refused with its index (%d, %u)\n", h,
			 p.err_index);
	h = prepare(fd, ops, 0, &p);
	ksft_test_result(h == -EINVAL, "no ops: EINVAL\n");
	memset(&p, 0, sizeof(p));
	p.version = MSRBATCH_ABI_VERSION;
	p.nr_ops = 1;
	p.ops = (__u64)(uintptr_t)ops;
	p.reserved = 1;
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_PREPARE, &p) == -1 && errno == EINVAL, "reserved field: EINVAL\n");
	ops[0] = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, 0, 0);
	h = prepare(ro, ops, 1, &p);
	ksft_test_result(h == -EBADF && p.err_index == 0, "a write batch on a read-only descriptor: EBADF\n");
	ops[0] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	for (i = 0; i < MSRBATCH_MAX_PREPARED; i++)
		if (prepare(fd, ops, 1, &p) != i)
			break;
	ksft_test_result(i == MSRBATCH_MAX_PREPARED && prepare(fd, ops, 1, &p) == -ENOSPC,
			 "%d prepared batches per descriptor, then ENOSPC\n", i);
	close(fd);	/* frees them all: KASAN and kmemleak-free if right */
	close(ro);
}

static void test_writes_rechecked(void)
{
	int fd = dev_open(O_RDWR), h, r;
	struct msrbatch_op op;
	struct msrbatch_prepare p;

	op = mkop(MSRBATCH_OP_WRMSR, 1, TSC_AUX, 1, 0);	/* CPU 1's own TSC_AUX value */
	h = prepare(fd, &op, 1, &p);
	ksft_test_result(h >= 0 && run_prepared(fd, h) == 0, "a prepared write runs\n");
	write_param("off");
	r = run_prepared(fd, h);
	write_param("default");
	ksft_test_result(r == -EPERM, "allow_writes=off after prepare: the next run is EPERM (%d)\n", r);
	ksft_test_result(run_prepared(fd, h) == 0, "and runs again once allowed\n");
	close(fd);
}

static void test_fork_and_close(void)
{
	int fd = dev_open(O_RDWR), h, status = -1;
	struct msrbatch_op op = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	struct msrbatch_result *res;
	struct msrbatch_prepare p;
	__u64 before;
	pid_t pid;

	h = prepare(fd, &op, 1, &p);
	res = map(fd, &p);
	if (h < 0 || !res)
		return;
	run_prepared(fd, h);
	before = res[0].val[0];
	pid = fork();
	if (pid == 0) {
		/* The mapping is not inherited (msync of it: ENOMEM); the
		 * descriptor is. */
		int unmapped = msync(res, 4096, MS_ASYNC) == -1 && errno == ENOMEM;

		_exit(unmapped && run_prepared(fd, h) == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	ksft_test_result(WIFEXITED(status) && WEXITSTATUS(status) == 0 && res[0].val[0] > before,
			 "a child has no mapping but runs the inherited descriptor's batch; the parent's mapping shows it\n");
	close(fd);
	ksft_test_result(res[0].val[0] > before, "after close the mapping still reads (the last results)\n");
	munmap(res, p.mmap_size);
}

static int churn_fd, churn_handle;
static volatile int churn_stop;

static void *run_churn(void *arg)
{
	long n = 0;

	(void)arg;
	while (!churn_stop)
		if (run_prepared(churn_fd, churn_handle) >= 0)
			n++;
	return (void *)n;
}

/*
 * 20 rounds of UNPREPARE while 3 threads rerun a batch of nr ops on all CPUs.
 * With hotplug, a batch of a few ops (whose shares and cpumask are kept from
 * its prepare, batch::KeptShares) whose last CPU goes off- and online in
 * the middle of each round: on the debug kernel, KASAN and lockdep watch
 * the kept shares being reset, run, and freed with the batch.
 */
static void unprepare_during_runs(int nr, int hotplug)
{
	struct msrbatch_op ops[256];
	struct msrbatch_prepare p;
	pthread_t t[3];
	long total = 0;
	void *n;
	int i, rounds, last = 0, cpu = ncpus - 1;

	if (hotplug && cpu < 1) {
		ksft_test_result_skip("unprepare and hotplug during runs: one CPU\n");
		return;
	}
	churn_fd = dev_open(O_RDWR);
	for (i = 0; i < nr; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, i % ncpus, PAT, 0, 0);
	for (rounds = 0; rounds < 20; rounds++) {
		churn_handle = prepare(churn_fd, ops, nr, &p);
		churn_stop = 0;
		for (i = 0; i < 3; i++)
			pthread_create(&t[i], NULL, run_churn, NULL);
		usleep(1000);
		if (hotplug) {
			cpu_set_online(cpu, 0);
			usleep(500);
			cpu_set_online(cpu, 1);
		}
		usleep(1000);
		ioctl(churn_fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)churn_handle);
		usleep(1000);
		churn_stop = 1;
		for (i = 0; i < 3; i++) {
			pthread_join(t[i], &n);
			total += (long)n;
		}
	}
	/* Once the CPU is back, a batch prepared before the last hotplug runs on all of them. */
	churn_handle = prepare(churn_fd, ops, nr, &p);
	if (hotplug) {
		cpu_set_online(cpu, 0);
		cpu_set_online(cpu, 1);
	}
	/* (An op's -ETIME: a vCPU the host did not run spent the credit; again after a refill.) */
	for (i = 0; i < 3 && (i == 0 || last > 0); i++, usleep(100000))
		last = run_prepared(churn_fd, churn_handle);
	close(churn_fd);
	ksft_test_result(total > 0 && last == 0,
			 "20 rounds of unprepare%s while 3 threads run a batch of %d ops (%ld runs) end cleanly (last run %d)\n",
			 hotplug ? " and hotplug" : "", nr, total, last);
}

static void test_unprepare_during_runs(void)
{
	unprepare_during_runs(256, 0);
	unprepare_during_runs(8, 1);
}

/*
 * Runs of one batch take turns (its ops are a run's scratch space), and a
 * run that waits for its turn gets it while another thread keeps rerunning
 * the batch: the lock is a ticket lock (prepared.rs's RunLock), so the
 * thread that released it and came straight back waits behind the waiter.
 * The other thread reruns a batch of 1024 ops on CPU 1 for 8 s at most;
 * this one, on another CPU, runs it 100 times meanwhile. (a96ba0c, TCG: the
 * longest wait 10 to 480 ms, when a release left the lock free for whoever
 * came first; with the Mutex before it, 6 to 62 ms; 17ab4d5's ticket lock,
 * debug kernel, 21 and 73 ms.)
 */
static int hog_fd, hog_handle;
static volatile int hog_stop;

static void *run_hog(void *arg)
{
	double end = now_ms() + 8000;
	long n = 0;

	(void)arg;
	pin(1);
	while (!hog_stop && now_ms() < end) {
		run_prepared(hog_fd, hog_handle);
		n++;
	}
	return (void *)n;
}

static void test_runs_take_turns(void)
{
	static struct msrbatch_op ops[1024];
	struct msrbatch_prepare p;
	double longest = 0, total = 0, t0, t;
	int i, failed = 0;
	pthread_t hog;
	void *hog_runs;

	if (ncpus < 2) {
		ksft_test_result_skip("runs of one batch take turns: needs 2 CPUs\n");
		return;
	}
	hog_fd = dev_open(O_RDWR);
	for (i = 0; i < 1024; i++)
		ops[i] = mkop(MSRBATCH_OP_RDMSR, 1, PAT, 0, 0);
	hog_handle = prepare(hog_fd, ops, 1024, &p);
	hog_stop = 0;
	pthread_create(&hog, NULL, run_hog, NULL);
	pin(ncpus > 2 ? 2 : 0);
	sleep_ms(50);
	for (i = 0; i < 100; i++) {
		t0 = now_ms();
		failed += run_prepared(hog_fd, hog_handle) < 0;
		t = now_ms() - t0;
		total += t;
		if (t > longest)
			longest = t;
	}
	hog_stop = 1;
	pthread_join(hog, &hog_runs);
	unpin(ncpus);
	close(hog_fd);
	ksft_test_result(hog_handle >= 0 && !failed && longest < 1000,
			 "a run gets its turn while another thread reruns the batch: 100 runs in %.1f ms, the longest %.1f ms (%d failed; the other thread's runs: %ld)\n",
			 total, longest, failed, (long)hog_runs);
}

/*
 * Lockdep sees the run locks (one class for all, taken by the runs above):
 * on a kernel with lockdep (make check's debug kernel), /proc/lockdep lists
 * it, with the locks taken inside it.
 */
static void test_lockdep_sees_the_run_lock(void)
{
	FILE *f = fopen("/proc/lockdep", "r");
	char line[512];
	int found = 0;

	if (!f) {
		ksft_test_result_skip("lockdep sees the run lock: no /proc/lockdep\n");
		return;
	}
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "msrbatch_run_lock") != NULL;
	fclose(f);
	ksft_test_result(found, "lockdep sees the run lock (/proc/lockdep)\n");
}

static void test_hotplug(void)
{
	int fd = dev_open(O_RDWR), h1, h2, h3, cpu = ncpus - 1;
	struct msrbatch_op one = mkop(MSRBATCH_OP_RDTSCP, cpu, 0, 0, 0);
	struct msrbatch_op two[2] = { mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0), mkop(MSRBATCH_OP_RDTSC, cpu, 0, 0, 0) };
	struct msrbatch_prepare p;

	h1 = prepare(fd, &one, 1, &p);
	h2 = prepare(fd, two, 2, &p);
	if (cpu < 1 || cpu_set_online(cpu, 0)) {
		ksft_test_result_skip("hotplug: cannot take CPU %d offline\n", cpu);
		close(fd);
		return;
	}
	ksft_test_result(run_prepared(fd, h1) == -ENXIO && run_prepared(fd, h2) == -ENXIO,
			 "CPU %d offline: batches prepared for it are ENXIO\n", cpu);
	/* Prepared while its CPU is offline: the CPUs kept with it are checked at each run. */
	h3 = prepare(fd, two, 2, &p);
	ksft_test_result(h3 >= 0 && run_prepared(fd, h3) == -ENXIO,
			 "CPU %d offline: a batch on it prepares, and its runs are ENXIO\n", cpu);
	cpu_set_online(cpu, 1);
	ksft_test_result(run_prepared(fd, h1) == 0 && run_prepared(fd, h2) == 0 && run_prepared(fd, h3) == 0,
			 "CPU %d back: they run again\n", cpu);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "basics", test_basics },
		{ "failures_reach_the_mapping", test_failures_reach_the_mapping },
		{ "validation", test_validation },
		{ "writes_rechecked", test_writes_rechecked },
		{ "fork_and_close", test_fork_and_close },
		{ "unprepare_during_runs", test_unprepare_during_runs },
		{ "runs_take_turns", test_runs_take_turns },
		{ "lockdep_sees_the_run_lock", test_lockdep_sees_the_run_lock },
		{ "hotplug", test_hotplug },
	};

	ksft_print_header();
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("# msrbatch prepared batches, %d CPUs\n", ncpus);
	run_parts(parts, sizeof(parts) / sizeof(parts[0]), argc, argv);
	tests_done();
}
