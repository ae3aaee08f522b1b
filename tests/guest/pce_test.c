// SPDX-License-Identifier: GPL-2.0
/*
 * Guest test of the CR4.PCE grant (MSRBATCH_IOC_PCE_GRANT/REVOKE).
 *
 * A user-mode RDPMC probe tells PCE apart: with PCE clear it raises #GP
 * (SIGSEGV); with PCE set it runs, or under QEMU TCG (no PMU) raises #UD
 * (SIGILL). The MSRBATCH_OP_RDCR4 op shows each CPU's CR4.
 *
 * "pce_test --probe" prints "pce=on" or "pce=off" for the calling process
 * (used through "msrbatch exec --rdpmc").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define CR4_PCE (1ull << 8)

static int ncpus;

/* Bit mask of the CPUs whose CR4 has PCE set, or -1. */
static long pce_cpus(int fd)
{
	struct msrbatch_op ops[64];
	long mask = 0;
	int i;

	memset(ops, 0, sizeof(ops));
	for (i = 0; i < ncpus; i++) {
		ops[i].op = MSRBATCH_OP_RDCR4;
		ops[i].cpu = i;
	}
	if (batch(fd, ops, ncpus, 0, NULL))
		return -1;
	for (i = 0; i < ncpus; i++)
		if (ops[i].status == 0 && (ops[i].val[0] & CR4_PCE))
			mask |= 1l << i;
	return mask;
}

/*
 * Like pce_cpus(), but gives a thread that is still on its way out (join and
 * wait return before its last context switch) up to a second to get there.
 */
static long pce_cpus_settled(int fd)
{
	long m = -1;
	int i;

	for (i = 0; i < 100; i++) {
		m = pce_cpus(fd);
		if (m == 0)
			break;
		usleep(10000);
	}
	return m;
}

static void test_grant_revoke(int fd)
{
	char msg[160];
	long m;
	int i, off = 0;

	ksft_test_result(!pce_on(), "no grant: user RDPMC raises a general protection fault (PCE clear)\n");
	ksft_test_result(pce_grant(fd, 0) == 0, "grant\n");
	ksft_test_result(pce_on(), "granted: user RDPMC allowed (PCE set)\n");
	ksft_test_result(pce_grant(fd, 0) == -EBUSY, "second grant on the same thread -> EBUSY\n");
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_PCE_GRANT, MSRBATCH_PCE_F_INHERIT << 1) == -1 && errno == EINVAL,
			 "grant with an unknown flag -> EINVAL\n");

	for (i = 0; i < 300; i++) {
		pin(i % ncpus);
		if (i % 4 == 0)
			usleep(200);
		else if (i % 4 == 1)
			sched_yield();
		off += !pce_on();
	}
	snprintf(msg, sizeof(msg), "granted thread sees PCE in all 300 probes over %d CPUs, migrating and sleeping (%d misses)",
		 ncpus, off);
	ksft_test_result(off == 0, "%s\n", msg);

	pin(ncpus - 1);
	m = pce_cpus(fd);
	snprintf(msg, sizeof(msg), "while granted, pinned to CPU %d: PCE set on exactly that CPU (mask %#lx)",
		 ncpus - 1, m);
	ksft_test_result(m == 1l << (ncpus - 1), "%s\n", msg);

	ksft_test_result(pce_revoke(fd) == 0, "revoke\n");
	ksft_test_result(!pce_on(), "revoked: user RDPMC faults again\n");
	m = pce_cpus(fd);
	snprintf(msg, sizeof(msg), "after revoke: PCE clear on every CPU (mask %#lx)", m);
	ksft_test_result(m == 0, "%s\n", msg);
	ksft_test_result(pce_revoke(fd) == -ENOENT, "revoke without a grant -> ENOENT\n");
	unpin(ncpus);
}

/* An ungranted process shares the CPUs with a granted thread and never sees PCE. */
static void test_bystander(int fd)
{
	int pipefd[2], status, i, cpu, seen = 0, off = 0;
	char msg[160];
	pid_t pid;

	if (pipe(pipefd))
		return;
	pid = fork();
	if (pid == 0) {
		int leaks = 0;

		close(pipefd[0]);
		for (i = 0; i < 4000; i++) {
			pin((i / 200) % ncpus);
			leaks += pce_on();
			sched_yield();
		}
		if (write(pipefd[1], &leaks, sizeof(leaks)) != sizeof(leaks))
			_exit(2);
		_exit(0);
	}
	close(pipefd[1]);
	ksft_test_result(pce_grant(fd, 0) == 0, "grant (bystander test)\n");
	for (i = 0; i < 4000; i++) {
		cpu = (i / 200) % ncpus;
		pin(cpu);
		off += !pce_on();
		sched_yield();
	}
	if (read(pipefd[0], &seen, sizeof(seen)) != sizeof(seen))
		seen = -1;
	waitpid(pid, &status, 0);
	close(pipefd[0]);
	snprintf(msg, sizeof(msg), "bystander process on the same CPUs saw PCE %d times in 4000 probes", seen);
	ksft_test_result(seen == 0, "%s\n", msg);
	snprintf(msg, sizeof(msg), "granted thread kept PCE through 4000 switches with it (%d misses)", off);
	ksft_test_result(off == 0, "%s\n", msg);
	ksft_test_result(pce_revoke(fd) == 0, "revoke (bystander test)\n");
	unpin(ncpus);
}

static void *thread_grant_and_exit(void *arg)
{
	int fd = *(int *)arg;

	return (void *)(long)(pce_grant(fd, 0) == 0 && pce_on());
}

static volatile int stop_flag, granted_flag;
static volatile long long saw_off_after_ns;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void *thread_spin_until_revoked(void *arg)
{
	int fd = *(int *)arg;
	long long start;

	if (pce_grant(fd, 0) || !pce_on()) {
		saw_off_after_ns = -1;
		granted_flag = -1;	/* the main thread waits for either */
		return NULL;
	}
	granted_flag = 1;
	while (!stop_flag)
		;
	start = now_ns();
	while (pce_on() && now_ns() - start < 5000000000ll)
		;
	saw_off_after_ns = pce_on() ? -1 : now_ns() - start;
	return NULL;
}

/* Grants itself, then naps in user mode, never calling msrbatch again. */
static void *thread_grant_then_nap(void *arg)
{
	int fd = *(int *)arg;

	if (pce_grant(fd, 0)) {
		granted_flag = -1;
		return NULL;
	}
	granted_flag = 1;
	while (!stop_flag)
		usleep(1000);
	return NULL;
}

static void test_lifetimes(void)
{
	char msg[160];
	pthread_t t;
	void *ret;
	int fd, fd2, refs, during, after;
	long m;

	/* close ends the grant (same thread) */
	fd = dev_open(O_RDWR);
	ksft_test_result(pce_grant(fd, 0) == 0 && pce_on(), "grant, then close the file\n");
	close(fd);
	ksft_test_result(!pce_on(), "close by the granted thread ends the grant\n");

	/* thread exit ends the grant; the file reaps it */
	fd = dev_open(O_RDWR);
	fd2 = dev_open(O_RDWR);
	pthread_create(&t, NULL, thread_grant_and_exit, &fd);
	pthread_join(t, &ret);
	ksft_test_result(ret == (void *)1, "a thread granted itself and saw PCE\n");
	m = pce_cpus_settled(fd2);
	snprintf(msg, sizeof(msg), "after that thread exited: PCE clear on every CPU (mask %#lx)", m);
	ksft_test_result(m == 0, "%s\n", msg);
	ksft_test_result(pce_grant(fd, 0) == 0 && pce_revoke(fd) == 0, "the file still works after its granted thread died\n");
	close(fd);

	/* close by another thread while the granted one spins in user mode */
	fd = dev_open(O_RDWR);
	stop_flag = granted_flag = 0;
	pthread_create(&t, NULL, thread_spin_until_revoked, &fd);
	while (!granted_flag)
		usleep(1000);
	close(fd);
	stop_flag = 1;
	pthread_join(t, NULL);
	snprintf(msg, sizeof(msg), "close by another thread ends a running thread's grant (PCE off after %lld ns)",
		 saw_off_after_ns);
	ksft_test_result(saw_off_after_ns >= 0, "%s\n", msg);
	m = pce_cpus_settled(fd2);
	snprintf(msg, sizeof(msg), "afterwards PCE clear on every CPU (mask %#lx)", m);
	ksft_test_result(m == 0, "%s\n", msg);
	close(fd2);

	/*
	 * close by another thread while the granted one lives on, returning to
	 * user mode but never calling msrbatch: its revoked grant ends there,
	 * and with it the grant's module reference (it held the module until
	 * the thread exited). No descriptor of ours is open; the grants of the
	 * threads that exited above are freed by the reaper, a work item, soon
	 * after: their references are not in the baseline (one was, and hid
	 * the reference this case looks for).
	 */
	refs = module_refcnt_becomes(0);
	fd = dev_open(O_RDWR);
	/*
	 * Where the kernel cannot wait for a task work to leave the module's
	 * code (preemption without RCU Tasks: no inherited grants either), the
	 * module queues none, and the grant waits for its thread's exit.
	 */
	if (pce_grant(fd, MSRBATCH_PCE_F_INHERIT) == -EOPNOTSUPP) {
		ksft_test_result_skip("a grant revoked by another thread's close: inherited grants are EOPNOTSUPP here, "
				      "so the kernel may lack what ending it from its thread needs (RCU Tasks)\n");
		close(fd);
		return;
	}
	pce_revoke(fd);
	stop_flag = granted_flag = 0;
	pthread_create(&t, NULL, thread_grant_then_nap, &fd);
	while (!granted_flag)
		usleep(1000);
	during = module_refcnt();
	close(fd);
	after = module_refcnt_becomes(refs);
	stop_flag = 1;
	pthread_join(t, NULL);
	ksft_test_result(granted_flag == 1 && refs >= 0 && during > refs && after == refs,
			 "a grant revoked by another thread's close ends when its thread next returns to user mode: "
			 "module refcnt %d, %d with the file and the grant, %d with the thread alive after the close\n",
			 refs, during, after);
}

static void test_exec(void)
{
	FILE *p = popen("msrbatch exec --rdpmc -- pce_test --probe", "r");
	char line[64] = "";
	int fd, rc;
	char msg[160];
	long m;

	if (!p || !fgets(line, sizeof(line), p))
		line[0] = 0;
	rc = p ? pclose(p) : -1;
	line[strcspn(line, "\n")] = 0;
	snprintf(msg, sizeof(msg), "msrbatch exec --rdpmc runs CMD with PCE (%s, exit %d)", line, rc);
	ksft_test_result(strcmp(line, "pce=on") == 0 && rc == 0, "%s\n", msg);
	p = popen("pce_test --probe", "r");
	if (!p || !fgets(line, sizeof(line), p))
		line[0] = 0;
	if (p)
		pclose(p);
	line[strcspn(line, "\n")] = 0;
	ksft_test_result(strcmp(line, "pce=off") == 0, "the same CMD without exec --rdpmc has no PCE\n");
	fd = dev_open(O_RDWR);
	m = pce_cpus_settled(fd);
	snprintf(msg, sizeof(msg), "after exec --rdpmc ended: PCE clear on every CPU (mask %#lx)", m);
	ksft_test_result(m == 0, "%s\n", msg);
	close(fd);
}

/*
 * Grants and revokes in a loop, the thread's the only grant: the kernel's
 * preempt-notifier key stays on (the module holds it from its first grant),
 * so its code is not patched each time; each patch synchronises every CPU
 * by IPIs (three rounds on x86). Only where a static key patches code
 * (JUMP_LABEL: its functions are in the kernel).
 */
static void test_no_key_flips(int fd)
{
	int n = 300, i, ok = 1;
	long before, after;

	if (system("grep -q ' static_key_slow_inc$' /proc/kallsyms")) {
		ksft_test_result_skip("grant loop: this kernel has no JUMP_LABEL, so a static key patches no code\n");
		return;
	}
	ok = pce_grant(fd, 0) == 0 && pce_revoke(fd) == 0;
	before = cal_count(-1);
	for (i = 0; i < n && ok; i++)
		ok = pce_grant(fd, 0) == 0 && pce_revoke(fd) == 0;
	after = cal_count(-1);
	ksft_test_result(ok && before >= 0 && after >= before && after - before < n,
			 "%d grants and revokes, the thread's the only grant: %ld function-call IPIs (fewer than one "
			 "each: the preempt-notifier key is not flipped)\n", n, after - before);
}

static int sleeper_pipe[2];

static void *thread_grant_then_block(void *arg)
{
	int fd = *(int *)arg;
	char c;

	if (pce_grant(fd, 0)) {
		granted_flag = -1;
		return NULL;
	}
	granted_flag = 1;
	/* Blocks in the kernel; the close by the main thread leaves this
	 * thread an inert grant until it exits. */
	if (read(sleeper_pipe[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

/* A grant keeps the module loaded even after its file is closed. */
static void test_unload(void)
{
	char msg[160];
	pthread_t t;
	int fd, rc, i;
	long m;

	if (pipe(sleeper_pipe))
		return;
	fd = dev_open(O_RDWR);
	granted_flag = 0;
	pthread_create(&t, NULL, thread_grant_then_block, &fd);
	while (!granted_flag)
		usleep(1000);
	close(fd);
	rc = system("rmmod msrbatch 2>/dev/null");
	ksft_test_result(granted_flag == 1 && rc != 0,
			 "rmmod refused while a grant (of a blocked thread) outlives its file\n");
	if (write(sleeper_pipe[1], "x", 1) != 1)
		return;
	pthread_join(t, NULL);
	/* The thread's exit frees its grant through the reaper (a work item). */
	for (i = 0; i < 100 && (rc = system("rmmod msrbatch 2>/dev/null")); i++)
		usleep(10000);
	snprintf(msg, sizeof(msg), "rmmod succeeds once that thread has exited and its grant is freed (%d retries)", i);
	ksft_test_result(rc == 0, "%s\n", msg);
	rc = system("insmod /lib/modules/msrbatch.ko");
	ksft_test_result(rc == 0, "module loads again\n");
	fd = dev_open(O_RDWR);
	m = fd < 0 ? -1 : pce_cpus_settled(fd);
	snprintf(msg, sizeof(msg), "after unload and reload: PCE clear on every CPU (mask %#lx)", m);
	ksft_test_result(m == 0, "%s\n", msg);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	int fd;

	probe_setup();
	if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
		printf("pce=%s\n", pce_on() ? "on" : "off");
		return 0;
	}
	ksft_print_header();
	ncpus = online_cpus(64);
	printf("# msrbatch PCE grant test, %d CPUs\n", ncpus);
	fd = dev_open(O_RDWR);
	if (fd < 0)
		ksft_exit_fail_msg("cannot open /dev/msrbatch\n");
	test_grant_revoke(fd);
	test_bystander(fd);
	test_no_key_flips(fd);
	close(fd);
	test_lifetimes();
	test_exec();
	test_unload();
	tests_done();
}
