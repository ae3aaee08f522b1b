// SPDX-License-Identifier: GPL-2.0
/*
 * Guest test of inherited RDPMC grants (MSRBATCH_PCE_F_INHERIT): a grant to
 * a whole program reaches the threads it has and creates and the processes
 * it starts (a fork, an exec'd shell wrapper and its child), nothing outside
 * it (a process forked before the grant, an unrelated process), and ends for
 * all of them when the root's grant ends (revoke, close of a file-bound
 * grant, the root's exit). A churn of forking, exiting and revoking families
 * must leave the module's reference count where it was.
 *
 * Each family lives in a process of its own, forked from the test, which
 * reports its checks over a pipe as the exit status of its steps. The probe
 * (testlib.h) tells CR4.PCE apart: SIGSEGV without it; with it, RDPMC runs
 * or, under QEMU TCG, raises SIGILL.
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define PROGRAM (MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT)

static char self[256];

static int pce_grant(int fd, unsigned long flags)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_GRANT, flags) ? -errno : 0;
}

static int pce_revoke(int fd)
{
	return ioctl(fd, MSRBATCH_IOC_PCE_REVOKE, 0) ? -errno : 0;
}

/* Runs fn in a forked process; its exit status (0..255), or -1. */
static int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		probe_setup();
		_exit(fn(arg));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int probe_fn(void *arg __attribute__((unused)))
{
	return pce_on();
}

/* 1 when a new process that `sh -c` starts (a child of the shell) has PCE. */
static int probe_via_shell(void)
{
	char cmd[600];
	int status;
	pid_t pid;

	/* "; exit $?" keeps the shell from exec'ing the probe itself. */
	snprintf(cmd, sizeof(cmd), "%s --probe-status; exit $?", self);
	pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void *thread_probe(void *arg __attribute__((unused)))
{
	return (void *)(long)pce_on();
}

static int new_thread_probe(void)
{
	pthread_t t;
	void *ret;

	if (pthread_create(&t, NULL, thread_probe, NULL))
		return -1;
	pthread_join(t, &ret);
	return (int)(long)ret;
}

/* A thread created before the grant: probes when told to through a pipe. */
struct waiter {
	pthread_t t;
	int go[2];
	int result;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	char c;

	if (read(w->go[0], &c, 1) == 1)
		w->result = pce_on();
	return NULL;
}

static int waiter_start(struct waiter *w)
{
	w->result = -1;
	if (pipe(w->go))
		return -1;
	return pthread_create(&w->t, NULL, waiter_main, w) ? -1 : 0;
}

static int waiter_probe(struct waiter *w)
{
	if (write(w->go[1], "x", 1) != 1)
		return -1;
	pthread_join(w->t, NULL);
	close(w->go[0]);
	close(w->go[1]);
	return w->result;
}

/* A process forked now that probes when told to; its answer via waitpid. */
struct proc {
	pid_t pid;
	int go;
};

static int proc_start(struct proc *p)
{
	int fds[2];

	if (pipe(fds))
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		char c;

		close(fds[1]);
		probe_setup();
		_exit(read(fds[0], &c, 1) == 1 ? pce_on() : 2);
	}
	close(fds[0]);
	p->go = fds[1];
	return p->pid < 0 ? -1 : 0;
}

static int proc_probe(struct proc *p)
{
	int status;

	if (write(p->go, "x", 1) != 1)
		return -1;
	close(p->go);
	if (waitpid(p->pid, &status, 0) != p->pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/*
 * The results of a family's steps, reported by the family's root process:
 * one byte a step, in this order.
 */
enum step {
	S_GRANT,
	S_ROOT,
	S_OLD_THREAD,
	S_NEW_THREAD,
	S_THREAD_GRANT_BUSY,
	S_FORK,
	S_GRANDCHILD,
	S_SHELL,
	S_BYSTANDER,
	S_MEMBER_REVOKE,
	S_ROOT_AFTER_MEMBER_REVOKE,
	S_REVOKE,
	S_WAITING_AFTER_REVOKE,
	S_THREAD_AFTER_REVOKE,
	S_FORK_AFTER_REVOKE,
	S_NR
};

static int grandchild_fn(void *arg __attribute__((unused)))
{
	return in_child(probe_fn, NULL);
}

/* A forked member revokes its own grant: it loses PCE, the family does not. */
static int member_revoke_fn(void *arg)
{
	int fd = *(int *)arg;

	return pce_revoke(fd) == 0 && !pce_on();
}

static void *thread_grant(void *arg)
{
	return (void *)(long)pce_grant(*(int *)arg, PROGRAM);
}

static int family_root(int out)
{
	unsigned char r[S_NR];
	struct waiter old;
	struct proc bystander, waiting;
	pthread_t t;
	void *ret;
	int fd;

	memset(r, 0xff, sizeof(r));
	probe_setup();
	fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
	if (fd < 0 || waiter_start(&old) || proc_start(&bystander))
		return 1;
	r[S_GRANT] = -pce_grant(fd, PROGRAM);
	if (r[S_GRANT] == 0) {
		r[S_ROOT] = pce_on();
		r[S_OLD_THREAD] = waiter_probe(&old);
		r[S_NEW_THREAD] = new_thread_probe();
		pthread_create(&t, NULL, thread_grant, &fd);
		pthread_join(t, &ret);
		r[S_THREAD_GRANT_BUSY] = (long)ret == -EBUSY;
		r[S_FORK] = in_child(probe_fn, NULL);
		r[S_GRANDCHILD] = in_child(grandchild_fn, NULL);
		r[S_SHELL] = probe_via_shell();
		r[S_BYSTANDER] = proc_probe(&bystander);
		r[S_MEMBER_REVOKE] = in_child(member_revoke_fn, &fd);
		r[S_ROOT_AFTER_MEMBER_REVOKE] = pce_on();
		proc_start(&waiting);
		r[S_REVOKE] = -pce_revoke(fd);
		r[S_WAITING_AFTER_REVOKE] = proc_probe(&waiting);
		r[S_THREAD_AFTER_REVOKE] = new_thread_probe();
		r[S_FORK_AFTER_REVOKE] = in_child(probe_fn, NULL);
	}
	return write(out, r, sizeof(r)) == sizeof(r) ? 0 : 1;
}

/* 0 when the kernel has no inherited grants (the checks say why). */
static int test_family(void)
{
	unsigned char r[S_NR];
	int fds[2], status;
	struct proc unrelated;
	pid_t pid;

	if (pipe(fds)) {
		check(0, "pipe");
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(family_root(fds[1]));
	}
	close(fds[1]);
	/* Forked by the test (not by the family) while the family runs. */
	proc_start(&unrelated);
	memset(r, 0xff, sizeof(r));
	check(read(fds[0], r, sizeof(r)) == sizeof(r) && waitpid(pid, &status, 0) == pid &&
	      WIFEXITED(status) && WEXITSTATUS(status) == 0, "the family's root reports");
	close(fds[0]);
	if (r[S_GRANT] == EOPNOTSUPP) {
		proc_probe(&unrelated);
		skip("inherited grants", "EOPNOTSUPP: this kernel has no tracepoints (CONFIG_TRACEPOINTS)");
		return 0;
	}
	check(r[S_GRANT] == 0, "grant with MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT (errno %d)",
	      r[S_GRANT]);
	check(r[S_ROOT] == 1, "the granting thread has PCE");
	check(r[S_OLD_THREAD] == 1, "a thread created before the grant has PCE");
	check(r[S_NEW_THREAD] == 1, "a thread created after the grant has PCE");
	check(r[S_THREAD_GRANT_BUSY] == 1, "a member's own grant request is EBUSY (it holds one)");
	check(r[S_FORK] == 1, "a forked child has PCE");
	check(r[S_GRANDCHILD] == 1, "a child's child has PCE");
	check(r[S_SHELL] == 1, "a process started by an exec'd shell wrapper has PCE");
	check(r[S_BYSTANDER] == 0, "a process forked before the grant has no PCE");
	check(proc_probe(&unrelated) == 0, "an unrelated process has no PCE");
	check(r[S_MEMBER_REVOKE] == 1, "a member's revoke ends its own grant");
	check(r[S_ROOT_AFTER_MEMBER_REVOKE] == 1, "... and not the family's");
	check(r[S_REVOKE] == 0, "the root revokes");
	check(r[S_WAITING_AFTER_REVOKE] == 0, "a member alive at the revoke has no PCE after it");
	check(r[S_THREAD_AFTER_REVOKE] == 0, "a thread created after the revoke has no PCE");
	check(r[S_FORK_AFTER_REVOKE] == 0, "a child forked after the revoke has no PCE");
	return 1;
}

/* Probes a member until it has lost PCE, up to about a second; 1 if it did. */
static int member_loses_pce(void)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (in_child(probe_fn, NULL) == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* Runs one family whose root exits: the member reports the probe's result. */
static int root_exit_family(void)
{
	int fds[2], res[2], status;
	pid_t root;
	char c;

	if (pipe(fds) || pipe(res))
		return -1;
	root = fork();
	if (root == 0) {
		int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC), ready[2];
		pid_t member;

		probe_setup();
		if (fd < 0 || pce_grant(fd, PROGRAM))
			_exit(1);
		if (pipe(ready) || (member = fork()) < 0)
			_exit(1);
		if (member == 0) {
			unsigned char r;

			probe_setup();
			r = in_child(probe_fn, NULL) == 1;
			close(ready[1]);
			if (read(fds[0], &c, 1) != 1)
				_exit(3);
			r |= member_loses_pce() << 1;
			_exit(write(res[1], &r, 1) == 1 ? 0 : 4);
		}
		/* Exit once the member has probed with the family intact. */
		close(ready[1]);
		_exit(read(ready[0], &c, 1) == 0 ? 0 : 5);
	}
	close(fds[0]);
	close(res[1]);
	if (waitpid(root, &status, 0) != root || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	if (write(fds[1], "x", 1) != 1)
		return -1;
	close(fds[1]);
	status = read(res[0], &c, 1) == 1 ? (unsigned char)c : -1;
	close(res[0]);
	return status;
}

static void test_root_exit(void)
{
	int r = root_exit_family();

	check(r >= 0 && (r & 1), "a member's child has PCE while the root lives");
	check(r >= 0 && (r & 2), "after the root's exit, a member's new child loses PCE within 1 s");
}

/* A file-bound inherited grant: closing the root's file ends the family. */
static int close_fn(void *arg __attribute__((unused)))
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
	int before, after;

	if (fd < 0 || pce_grant(fd, MSRBATCH_PCE_F_INHERIT))
		return 10;
	before = in_child(probe_fn, NULL);
	close(fd);
	after = in_child(probe_fn, NULL);
	return (before == 1) | (after == 0) << 1 | (pce_on() == 0) << 2;
}

/* A one-thread grant reaches neither threads nor children. */
static int thread_only_fn(void *arg __attribute__((unused)))
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);

	if (fd < 0 || pce_grant(fd, MSRBATCH_PCE_F_THREAD))
		return 10;
	return pce_on() | (new_thread_probe() == 0) << 1 | (in_child(probe_fn, NULL) == 0) << 2;
}

static int bad_flags_fn(void *arg __attribute__((unused)))
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);

	return fd >= 0 && pce_grant(fd, PROGRAM | (1u << 2)) == -EINVAL && !pce_on();
}

/* The exit status of `sh -c CMD`, or -1. */
static int shell(const char *fmt, const char *arg)
{
	char cmd[800];
	int status;

	snprintf(cmd, sizeof(cmd), fmt, arg, arg);
	status = system(cmd);
	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* msrbatch exec --rdpmc: a wrapper's child has PCE; --rdpmc-thread: only the first thread. */
static void test_tool(int inherit)
{
	const char *wrapped = "msrbatch exec %s -- sh -c '%s --probe-status; exit $?' 2>/dev/null";
	char fmt[200];

	snprintf(fmt, sizeof(fmt), "msrbatch exec --rdpmc -- %%s --probe-status%%.0s 2>/dev/null");
	check(shell(fmt, self) == 1, "msrbatch exec --rdpmc: CMD has PCE");
	snprintf(fmt, sizeof(fmt), wrapped, "--rdpmc", "%s");
	if (inherit)
		check(shell(fmt, self) == 1, "msrbatch exec --rdpmc: a child of an exec'd shell wrapper has PCE");
	else
		skip("exec --rdpmc through a wrapper", "no inherited grants on this kernel");
	snprintf(fmt, sizeof(fmt), wrapped, "--rdpmc-thread", "%s");
	check(shell(fmt, self) == 0, "msrbatch exec --rdpmc-thread: a child of the wrapper has no PCE");
	check(shell("%s --probe-status%.0s", self) == 0, "the probe without exec --rdpmc has no PCE");
}

static int refcnt(void)
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

/*
 * Churn: families whose threads fork children that exit at once, while the
 * root revokes or exits at a random moment; children still being made when
 * the family ends take no grant, and their module references go back.
 */
static void *churn_thread(void *arg __attribute__((unused)))
{
	int i;

	for (i = 0; i < 5; i++) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		if (p > 0)
			waitpid(p, NULL, 0);
	}
	return NULL;
}

static int churn_fn(void *arg)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
	long seed = (long)arg;
	pthread_t t[3];
	int i;

	if (fd < 0 || pce_grant(fd, PROGRAM))
		return 1;
	for (i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, churn_thread, NULL);
	usleep(seed % 3000);
	if (seed & 1)
		pce_revoke(fd);
	else
		_exit(0); /* the root exits with threads still forking */
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/*
 * Beside the churn, unload the module whenever nothing holds it (between
 * families) and load it again: a family's last reference may be dropped by
 * its task work's or its grants' end, and unload must wait for every bit of
 * module code that runs after it.
 */
static volatile int stop_unloader;

static void *unloader(void *arg)
{
	int *unloads = arg;

	while (!stop_unloader) {
		if (syscall(SYS_delete_module, "msrbatch", O_NONBLOCK) == 0) {
			int fd = open("/lib/modules/msrbatch.ko", O_RDONLY | O_CLOEXEC);

			++*unloads;
			if (fd < 0 || syscall(SYS_finit_module, fd, "", 0))
				break;
			close(fd);
		}
		usleep(500);
	}
	return NULL;
}

static void test_churn(int before)
{
	int after = -1, i, unloads = 0, started = 0;
	struct timespec end, now;
	pthread_t u;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += 5;
	for (i = 0;; i++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec > end.tv_nsec))
			break;
		in_child(churn_fn, (void *)(long)(rand() ^ i));
		if (i == 2)
			started = pthread_create(&u, NULL, unloader, &unloads) == 0;
	}
	stop_unloader = 1;
	if (started)
		pthread_join(u, NULL);
	/* The reaper frees the grants and drops what no grant took. */
	for (int j = 0; j < 300 && (after = refcnt()) != before; j++)
		usleep(10000);
	check(before >= 0 && after == before,
	      "%d churned families, the module unloaded and reloaded %d times between them: "
	      "references back to %d (now %d)", i, unloads, before, after);
}

int main(int argc, char **argv)
{
	int inherit, refs = refcnt();
	ssize_t n;

	if (argc > 1 && !strcmp(argv[1], "--probe-status")) {
		probe_setup();
		return pce_on();
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	probe_setup();
	srand(time(NULL));
	check(in_child(bad_flags_fn, NULL) == 1, "an unknown PCE flag is EINVAL and grants nothing");
	check(in_child(thread_only_fn, NULL) == 7,
	      "a one-thread grant: the thread has PCE, a new thread and a child do not");
	inherit = test_family();
	test_tool(inherit);
	if (inherit) {
		int r = in_child(close_fn, NULL);

		check(r == 7, "a file-bound inherited grant: a child has PCE until the root closes "
			      "the file, and nobody after (%d)", r);
		test_root_exit();
		test_churn(refs);
	}
	return tally();
}
