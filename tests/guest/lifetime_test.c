// SPDX-License-Identifier: GPL-2.0
/*
 * Lifetime races of PCE grants (#13, items 6 and 7), each driven into its
 * window on purpose rather than by chance:
 *
 * 1. A grant freed while the scheduler still walks the notifier list that
 *    links it. A thread's final switch calls the grant's sched_out, which
 *    marks it dead; whoever frees dead grants must not do so until the
 *    scheduler has read the list entry's next pointer. Here threads on CPU 0
 *    take a grant through a shared file and exit at once, two at a time,
 *    while a thread on CPU 1 asks for grants through the same file, with a
 *    short sleep between calls (every grant call is a chance to free the
 *    dead ones), and the file is replaced and closed every 128 exits (so is
 *    a release). The window is a few instructions with interrupts off:
 *    nothing in the guest can stretch it, but the host can. make check runs
 *    this test with vCPUs 0 and 1 on one host CPU (GUEST_VCPU_SHARE in
 *    tests/harness/guest.sh): whenever the host switches from vCPU 0 to
 *    vCPU 1 (CPU 1 woke from its sleep, or vCPU 0's host time slice ran
 *    out), CPU 0 stands still wherever it is while CPU 1 makes its grant
 *    calls. Hitting the window is a matter of chance: see
 *    Documentation/pce.md ("Tests") for how long it took the old design.
 *
 * 2. Module code running after the module's last reference is gone. A grant
 *    holds a module reference; after its file is closed by another thread,
 *    that reference is the module's last one. The current design drops it in
 *    its reaper, after the grant's thread has exited (and module exit waits
 *    for the reaper); the old one dropped it in task work when the thread
 *    returned to user mode. A thread on CPU 1 calls delete_module() without
 *    pause while that happens, so unload starts the moment the reference
 *    goes. Unload waits for an RCU grace period before it frees the module's
 *    text, so the code after the last module_put() must be preempted for the
 *    race to be lost; a SCHED_FIFO thread on the grant thread's CPU preempts
 *    it every few microseconds of its progress and, once the module's
 *    refcnt reads 0, holds the CPU until the unload has finished (or 300
 *    ms). Where the last module_put() is followed by module code that an
 *    unload does not wait for, some round preempts it there, and the grant
 *    thread resumes in freed text (an oops).
 *
 * 3. The same with an inherited grant's pending inheritance as the last
 *    reference: a thread asleep in read() is passed a family (a task work
 *    that will make its grant), and the family is revoked and its file
 *    closed before it wakes. Its task work then finds nothing to make and
 *    hands the reference on; the preemptor and the unloader wait for it as
 *    in part 2. Where the hand-over lets the module go while the task work
 *    still returns through module code, some round resumes it in freed text.
 *    Skipped on a kernel without inherited grants (EOPNOTSUPP).
 *
 * On the debug kernel (KASAN), a grant read after its free is a KASAN report,
 * and module text run after its unload an oops; the harness fails the run on
 * either (Documentation/pce.md, "Tests", says how often this caught the old
 * design).
 *
 * "lifetime_test [SECONDS [ROUNDS]]": part 1 runs SECONDS (default 8), part 2
 * ROUNDS unloads (default 10), part 3 a third of ROUNDS (rounded up).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define MODULE_PATH "/lib/modules/msrbatch.ko"
#define REFCNT_PATH "/sys/module/msrbatch/refcnt"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Where the threads run: the racing ones on CPUs 0 and 1, main on the last
 * CPU it may use above those (CPU 1 if none). A thread that cannot be
 * placed says so; the test counts it as a failure (misplaced, it would
 * prove nothing).
 */
static int spare;
static volatile int misplaced;

static void place(int cpu, const char *who)
{
	if (pin(cpu)) {
		printf("# %s: cannot run on CPU %d: %s\n", who, cpu, strerror(errno));
		misplaced = 1;
	}
}

static int find_spare_cpu(void)
{
	cpu_set_t allowed;
	int i;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) || !CPU_ISSET(0, &allowed) || !CPU_ISSET(1, &allowed))
		return -1;
	for (i = CPU_SETSIZE - 1; i > 1; i--)
		if (CPU_ISSET(i, &allowed))
			return i;
	return 1;
}

/* ---- 1. freed while on the notifier list ---------------------------------- */

#define EXITS_PER_FILE 128

static volatile int shared_fd;
static volatile int stop_churn;
static volatile long churn_grants, exit_grants;

static void *grant_and_exit(void *arg)
{
	(void)arg;
	if (pce_grant(shared_fd, 0) == 0)
		__atomic_add_fetch(&exit_grants, 1, __ATOMIC_RELAXED);
	return NULL;	/* exits with the grant in force */
}

/*
 * Holds a grant of its own on another file while part 1 runs, so that the
 * other grants' preempt_notifier_inc()/dec() never take the static key's
 * slow path (text patching, which waits for every CPU, vCPU 0 included):
 * more exits and churned grants per second.
 */
static void *keeper(void *arg)
{
	int fd = dev_open(O_RDWR);

	(void)arg;
	place(spare, "keeper");
	if (fd >= 0 && pce_grant(fd, 0) == 0)
		while (!stop_churn)
			usleep(10000);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void *churn(void *arg)
{
	(void)arg;
	place(1, "churn");
	while (!stop_churn) {
		int fd = shared_fd;

		if (pce_grant(fd, 0) == 0) {
			churn_grants++;
			pce_revoke(fd);
		}
		/* Idle, so that CPU 1 wakes again (see above). */
		usleep(20);
	}
	return NULL;
}

static void test_free_on_list(int seconds)
{
	double start = now(), end = start + seconds;
	long exits = 0, files = 1;
	pthread_attr_t attr;
	cpu_set_t cpu0;
	pthread_t t[2], c, k;
	int i, fd;

	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(cpu0), &cpu0);
	place(spare, "main");
	exit_grants = churn_grants = 0;
	shared_fd = dev_open(O_RDWR);
	if (shared_fd < 0)
		return;
	stop_churn = 0;
	pthread_create(&k, NULL, keeper, NULL);
	pthread_create(&c, NULL, churn, NULL);
	while (now() < end) {
		for (i = 0; i < 2; i++) {
			errno = pthread_create(&t[i], &attr, grant_and_exit, NULL);
			if (errno) {
				printf("# a thread on CPU 0: %s\n", strerror(errno));
				misplaced = 1;
				break;
			}
		}
		while (i-- > 0) {
			pthread_join(t[i], NULL);
			exits++;
		}
		if (misplaced)
			break;
		if (exits % EXITS_PER_FILE == 0) {
			/* The last exits' grants may be dead or dying: the release frees them. */
			fd = dev_open(O_RDWR);
			if (fd < 0)
				break;
			i = shared_fd;
			shared_fd = fd;
			close(i);
			files++;
		}
	}
	stop_churn = 1;
	pthread_join(c, NULL);
	pthread_join(k, NULL);
	close(shared_fd);
	pthread_attr_destroy(&attr);
	ksft_test_result(!misplaced && exit_grants > 0 && churn_grants > 0,
			 "%ld threads on CPU 0 exited with a grant in force (%.0f/s), %ld grants churned on CPU 1 through the same %ld files\n",
			 exit_grants, exits / (now() - start), churn_grants, files);
}

/* ---- 2. the module's last reference ---------------------------------------- */

static int wake_pipe[2];
static volatile int granted, stop_unload, preempting, stop_preemptor;
static volatile double unloaded_at;
static volatile long preemptions, held_unloaded, held_timeout;

static void *grant_then_wait(void *arg)
{
	int fd = *(int *)arg;
	char c;

	place(0, "grant thread");
	granted = pce_grant(fd, 0) == 0 ? 1 : -1;
	if (read(wake_pipe[0], &c, 1) != 1)
		granted = -1;
	return NULL;	/* returns to user mode, then exits */
}

/* Part 3: asleep in read() while main grants its family and revokes it. */
static volatile int asleep;

static void *wait_for_family(void *arg)
{
	char c;

	(void)arg;
	place(0, "member thread");
	asleep = 1;
	if (read(wake_pipe[0], &c, 1) != 1)
		granted = -1;
	return NULL;	/* its task work runs on the way out of read() */
}

/*
 * Gives the module's last reference to a thread of ours (*g): part 2's
 * grant closed by another thread, or part 3's pending inheritance of a
 * revoked family. 1, 0 when the grant failed, -EOPNOTSUPP.
 */
static int hand_last_reference(int fd, int inherited, pthread_t *g)
{
	int r;

	granted = asleep = 0;
	if (!inherited) {
		pthread_create(g, NULL, grant_then_wait, &fd);
		while (!granted)
			usleep(1000);
		close(fd);
		return granted > 0;
	}
	pthread_create(g, NULL, wait_for_family, NULL);
	while (!asleep)
		usleep(1000);
	usleep(20000);	/* in read() */
	r = pce_grant(fd, MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT);
	if (r == 0)
		r = pce_revoke(fd);
	close(fd);
	granted = r == 0 ? 1 : -1;
	return r == -EOPNOTSUPP ? r : r == 0;
}

static void *unload_loop(void *arg)
{
	(void)arg;
	place(1, "unloader");
	while (!stop_unload) {
		if (syscall(SYS_delete_module, "msrbatch", O_NONBLOCK) == 0) {
			unloaded_at = now();
			return NULL;
		}
	}
	return NULL;
}

/* The module's refcnt, or 0 once it is going (no sysfs file, or unreadable). */
static long refcnt(int fd)
{
	char buf[32];
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

/*
 * On CPU 0 at SCHED_FIFO: while a round runs, wakes every few microseconds,
 * preempting the grant's thread wherever it is. Once the module's refcnt
 * reads 0, keeps the CPU while it stays 0, until the unload has finished or
 * 300 ms have passed (the unload may wait for work queued on this CPU, as the
 * current design's does for its reaper). A failed delete_module() takes the
 * count to 0 for a moment too; when it comes back, the stepping goes on.
 */
static void *preemptor(void *arg)
{
	struct sched_param sp = { .sched_priority = 10 };
	struct timespec step = { 0, 2000 };
	int r;

	(void)arg;
	place(0, "preemptor");
	r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (r) {
		printf("# preemptor: SCHED_FIFO: %s\n", strerror(r));
		misplaced = 1;
	}
	while (!stop_preemptor) {
		int fd;

		if (!preempting) {
			usleep(1000);
			continue;
		}
		fd = open(REFCNT_PATH, O_RDONLY | O_CLOEXEC);
		while (preempting) {
			double until;

			clock_nanosleep(CLOCK_MONOTONIC, 0, &step, NULL);
			preemptions++;
			if (refcnt(fd) > 0)
				continue;
			until = now() + 0.3;
			while (!unloaded_at && now() < until && refcnt(fd) <= 0)
				;
			if (unloaded_at) {
				held_unloaded++;
				break;
			}
			if (now() >= until) {
				held_timeout++;
				break;
			}
		}
		if (fd >= 0)
			close(fd);
		while (preempting)
			usleep(1000);
	}
	return NULL;
}

static int load_module(void)
{
	int fd = open(MODULE_PATH, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return r;
}

static void test_last_reference(int rounds, int inherited)
{
	const char *holder = inherited ? "a pending inheritance of a revoked family" : "an exiting thread's grant";
	int round, unloads = 0, refused = 0, loaded = 1, fd;
	double worst = 0;
	pthread_t g, u, p;

	place(spare, "main");
	preemptions = held_unloaded = held_timeout = 0;
	stop_preemptor = preempting = 0;
	pthread_create(&p, NULL, preemptor, NULL);
	for (round = 0; round < rounds && loaded; round++) {
		double woke;

		fd = dev_open(O_RDWR);
		if (fd < 0 || pipe(wake_pipe))
			break;
		/* The thread's grant or inheritance now holds the module's last reference. */
		if (hand_last_reference(fd, inherited, &g) == -EOPNOTSUPP) {
			if (write(wake_pipe[1], "x", 1) != 1)
				printf("# write: %s\n", strerror(errno));
			pthread_join(g, NULL);
			close(wake_pipe[0]);
			close(wake_pipe[1]);
			stop_preemptor = 1;
			pthread_join(p, NULL);
			ksft_test_result_skip("the last reference held by %s: no inherited grants here\n", holder);
			return;
		}
		if (granted < 0) {
			printf("# round %d: the grant failed\n", round);
			if (write(wake_pipe[1], "x", 1) != 1)
				printf("# write: %s\n", strerror(errno));
			pthread_join(g, NULL);
			close(wake_pipe[0]);
			close(wake_pipe[1]);
			break;
		}
		/* The reference held: nothing else may unload the module now. */
		if (syscall(SYS_delete_module, "msrbatch", O_NONBLOCK) == 0) {
			printf("# round %d: delete_module succeeded while a grant was in force\n", round);
			loaded = load_module() == 0;
			refused = -1;
		} else if (errno == EWOULDBLOCK && refused >= 0) {
			refused++;
		}
		unloaded_at = 0;
		stop_unload = 0;
		pthread_create(&u, NULL, unload_loop, NULL);
		preempting = 1;
		woke = now();
		if (write(wake_pipe[1], "x", 1) != 1)
			printf("# round %d: write: %s\n", round, strerror(errno));
		pthread_join(g, NULL);
		/* The reaper needs a grace period; 10 s is far beyond it. */
		while (!unloaded_at && now() < woke + 10)
			usleep(1000);
		preempting = 0;
		stop_unload = 1;
		pthread_join(u, NULL);
		close(wake_pipe[0]);
		close(wake_pipe[1]);
		if (!unloaded_at) {
			printf("# round %d: the module was not unloadable 10 s after the grant's thread exited\n", round);
			break;
		}
		unloads++;
		if (unloaded_at - woke > worst)
			worst = unloaded_at - woke;
		loaded = load_module() == 0;
	}
	stop_preemptor = 1;
	pthread_join(p, NULL);
	ksft_test_result(refused == rounds, "rmmod refused in %d of %d rounds while only %s held the module\n",
			 refused, rounds, holder);
	ksft_test_result(unloads == rounds && loaded,
			 "%d of %d rounds: unloaded the moment %s let go (at most %.0f ms after the thread was woken), loaded again\n",
			 unloads, rounds, holder, worst * 1e3);
	ksft_test_result(!misplaced && held_unloaded + held_timeout > 0,
			 "the grant's thread was preempted %ld times; its CPU was held with the module's refcnt at 0 until the unload %ld times, for 300 ms %ld times\n",
			 preemptions, held_unloaded, held_timeout);
	fd = loaded ? dev_open(O_RDWR) : -1;
	ksft_test_result(fd >= 0 && pce_grant(fd, 0) == 0 && pce_revoke(fd) == 0, "the reloaded module grants and revokes\n");
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	ksft_print_header();
	printf("# msrbatch grant lifetime races\n");
	spare = find_spare_cpu();
	if (spare < 0) {
		ksft_test_result_skip("grant lifetime races: CPUs 0 and 1 are not both available\n");
		tests_done();
	}
	test_free_on_list(argc > 1 ? atoi(argv[1]) : 8);
	test_last_reference(argc > 2 ? atoi(argv[2]) : 10, 0);
	/* Part 3 a third as many rounds: it adds to make check's stage. */
	test_last_reference(((argc > 2 ? atoi(argv[2]) : 10) + 2) / 3, 1);
	tests_done();
}
