// SPDX-License-Identifier: GPL-2.0
/*
 * Lifetime races of PCE grants (#13, items 6 and 7), each driven into its
 * window on purpose rather than by chance:
 *
 * 1. A grant freed while the scheduler still walks the notifier list that
 *    links it. A thread's final switch calls the grant's sched_out, which
 *    marks it dead; whoever frees dead grants must not do so until the
 *    scheduler has read the list entry's next pointer. Here threads take a
 *    grant through a shared file and exit at once, while another thread asks
 *    for grants through the same file without pause (every grant call is a
 *    chance to free the dead ones) and the file is closed while the last of
 *    them exit (so is a release).
 *
 * 2. Module code running after the module's last reference is gone. A grant
 *    holds a module reference; after its file is closed by another thread,
 *    that reference is the module's last one, and it is dropped when the
 *    grant's thread exits (or, in the old design, returns to user mode). Here
 *    a thread calls delete_module() without pause while that happens, so
 *    unload starts the moment the reference goes, then the module is loaded
 *    again.
 *
 * On the debug kernel (KASAN), a grant read after its free is a KASAN report,
 * and module text run after its unload an oops; the harness fails the run on
 * either. The windows are a few instructions wide in a correct-looking but
 * wrong design; tests/guest/lifetime-widen/ has the demonstration builds that
 * widen them with a delay, against which this test fails in seconds.
 *
 * "lifetime_test [SECONDS [ROUNDS]]": part 1 runs SECONDS (default 8), part 2
 * ROUNDS unloads (default 10).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

static int dev_open(void)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		printf("# open /dev/msrbatch: %s\n", strerror(errno));
	return fd;
}

static int pce_grant(int fd)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_GRANT, 0) ? -errno : 0;
}

static int pce_revoke(int fd)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_REVOKE, 0) ? -errno : 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- 1. freed while on the notifier list ---------------------------------- */

static int shared_fd;
static volatile int stop_churn;
static volatile long churn_grants, exit_grants;

static void *grant_and_exit(void *arg)
{
	(void)arg;
	if (pce_grant(shared_fd) == 0)
		__atomic_add_fetch(&exit_grants, 1, __ATOMIC_RELAXED);
	return NULL;	/* exits with the grant in force */
}

static void *churn(void *arg)
{
	(void)arg;
	while (!stop_churn) {
		if (pce_grant(shared_fd) == 0) {
			churn_grants++;
			pce_revoke(shared_fd);
		}
	}
	return NULL;
}

static void test_free_on_list(int seconds)
{
	double end = now() + seconds;
	int rounds = 0, i;
	pthread_t t[4], c;

	exit_grants = churn_grants = 0;
	while (now() < end) {
		shared_fd = dev_open();
		if (shared_fd < 0)
			break;
		stop_churn = 0;
		pthread_create(&c, NULL, churn, NULL);
		for (i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, grant_and_exit, NULL);
		for (i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		/*
		 * pthread_join() returns when the thread's exit clears its TID,
		 * before its final switch: the churn goes on a little longer.
		 */
		usleep(20000);
		stop_churn = 1;
		pthread_join(c, NULL);
		/* The last exits' grants may be dead or dying: the release frees them. */
		for (i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, grant_and_exit, NULL);
		close(shared_fd);
		for (i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		rounds++;
	}
	check(rounds > 0 && exit_grants > 0 && churn_grants > 0,
	      "%d rounds: %ld grants of threads that exited with them in force, %ld churned grants on the same file",
	      rounds, exit_grants, churn_grants);
}

/* ---- 2. the module's last reference ---------------------------------------- */

static int wake_pipe[2];
static volatile int granted, stop_unload;
static volatile double unloaded_at;

static void *grant_then_wait(void *arg)
{
	int fd = *(int *)arg;
	char c;

	granted = pce_grant(fd) == 0 ? 1 : -1;
	if (read(wake_pipe[0], &c, 1) != 1)
		granted = -1;
	return NULL;	/* returns to user mode, then exits */
}

static void *unload_loop(void *arg)
{
	(void)arg;
	while (!stop_unload) {
		if (syscall(SYS_delete_module, "msrbatch", O_NONBLOCK) == 0) {
			unloaded_at = now();
			return NULL;
		}
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

static void test_last_reference(int rounds)
{
	int round, unloads = 0, refused = 0, loaded = 1, fd;
	double worst = 0;
	pthread_t g, u;

	for (round = 0; round < rounds && loaded; round++) {
		double woke;

		fd = dev_open();
		if (fd < 0 || pipe(wake_pipe))
			break;
		granted = 0;
		pthread_create(&g, NULL, grant_then_wait, &fd);
		while (!granted)
			usleep(1000);
		/* Another thread's close: the grant now holds the module's last reference. */
		close(fd);
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
		woke = now();
		if (write(wake_pipe[1], "x", 1) != 1)
			printf("# round %d: write: %s\n", round, strerror(errno));
		pthread_join(g, NULL);
		/* The reaper needs a grace period; 10 s is far beyond it. */
		while (!unloaded_at && now() < woke + 10)
			usleep(1000);
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
	check(refused == rounds, "rmmod refused in %d of %d rounds while only an exiting thread's grant held the module",
	      refused, rounds);
	check(unloads == rounds && loaded,
	      "%d of %d rounds: unloaded the moment that grant let go (at most %.0f ms after the thread was woken), loaded again",
	      unloads, rounds, worst * 1e3);
	fd = loaded ? dev_open() : -1;
	check(fd >= 0 && pce_grant(fd) == 0 && pce_revoke(fd) == 0, "the reloaded module grants and revokes");
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# msrbatch grant lifetime races\n");
	test_free_on_list(argc > 1 ? atoi(argv[1]) : 8);
	test_last_reference(argc > 2 ? atoi(argv[2]) : 10);
	return tally();
}
