// SPDX-License-Identifier: GPL-2.0
/* Reviewer probes for inherited grants (scratch, not for commit). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/msrbatch.h>
#include "testlib.h"

#define PROGRAM (MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT)

static int grant(int fd, unsigned long f) { return ioctl(fd, MSRBATCH_IOC_PCE_GRANT, f) ? -errno : 0; }
static int pce_rev(int fd) { return ioctl(fd, MSRBATCH_IOC_PCE_REVOKE, 0) ? -errno : 0; }

static int refcnt(void)
{
	FILE *f = fopen("/sys/module/msrbatch/refcnt", "r");
	int n = -1;
	if (f) { if (fscanf(f, "%d", &n) != 1) n = -1; fclose(f); }
	return n;
}

/* A thread of the root's process that sleeps in read() and probes on command. */
static int cmd[2], res[2];
static void *sleeper(void *a)
{
	char c;
	(void)a;
	while (read(cmd[0], &c, 1) == 1) {
		int r = -1;
		if (c == 'p')
			r = pce_on();
		else if (c == 'f') {
			pid_t p = fork();
			int st;
			if (p == 0) _exit(pce_on());
			r = (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
		}
		char o = (char)r;
		if (write(res[1], &o, 1) != 1) break;
	}
	return NULL;
}
static int ask(char c)
{
	char o;
	if (write(cmd[1], &c, 1) != 1 || read(res[0], &o, 1) != 1) return -2;
	return o;
}

/* A: grant+revoke loops while another thread sleeps in read(). */
static int pin_fn(void)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC), i, n = 3000, r0, r1, r2 = -1;
	pthread_t t;
	if (fd < 0 || pipe(cmd) || pipe(res) || pthread_create(&t, NULL, sleeper, NULL)) return 1;
	usleep(100000);
	r0 = refcnt();
	for (i = 0; i < n; i++)
		if (grant(fd, PROGRAM) || pce_rev(fd)) break;
	r1 = refcnt();
	printf("# A: %d grant/revoke rounds with one thread asleep in read(): refcnt %d -> %d\n", i, r0, r1);
	check(i == n && r1 - r0 < 10, "A: module references pinned by pending task works stay bounded (%d pinned)", r1 - r0);
	ask('p');
	for (int j = 0; j < 200 && (r2 = refcnt()) != r0; j++) usleep(10000);
	printf("# A: after the sleeper wakes: refcnt %d\n", r2);
	return 0;
}

/* B: grant, revoke, grant again: does the old thread get the second family? */
static int regrant_fn(void)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC), a, b, c, d;
	pthread_t t;
	if (fd < 0 || pipe(cmd) || pipe(res) || pthread_create(&t, NULL, sleeper, NULL)) return 1;
	usleep(100000);
	if (grant(fd, PROGRAM)) return 2;
	a = ask('p');
	pce_rev(fd);
	b = ask('p');
	if (grant(fd, PROGRAM)) return 3;
	c = ask('p');
	d = ask('f');
	printf("# B: old thread: family1 %d, after revoke %d, family2 %d, its child in family2 %d; root %d\n",
	       a, b, c, d, pce_on());
	check(a == 1 && b == 0, "B: old thread in family 1, not after revoke");
	check(c == 1, "B: after grant/revoke/grant the old thread has PCE again (%d)", c);
	check(d == 1, "B: ... and its new child too (%d)", d);
	return 0;
}

/* C: a member running on CPU 1 loses PCE at once when the root on CPU 0 revokes. */
static volatile int phase;
static void *spinner(void *a)
{
	cpu_set_t s;
	int before = 0, after = 0, n = 0;
	(void)a;
	CPU_ZERO(&s); CPU_SET(1, &s);
	sched_setaffinity(0, sizeof(s), &s);
	while (phase == 0) before = pce_on();
	phase = 2;
	while (phase == 2) ;
	after = pce_on();
	n = pce_on();
	return (void *)(long)(before | after << 1 | n << 2);
}
static int ipi_fn(void)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
	cpu_set_t s;
	pthread_t t;
	void *ret;
	CPU_ZERO(&s); CPU_SET(0, &s);
	sched_setaffinity(0, sizeof(s), &s);
	if (fd < 0 || grant(fd, PROGRAM)) return 1;
	pthread_create(&t, NULL, spinner, NULL);
	usleep(200000);
	phase = 1;
	while (phase != 2) ;
	pce_rev(fd);
	phase = 3;
	pthread_join(t, &ret);
	printf("# C: spinner result %ld\n", (long)ret);
	check(((long)ret & 1) == 1 && ((long)ret & 2) == 0, "C: running member loses PCE at the root's revoke");
	return 0;
}

static int run(int (*fn)(void))
{
	pid_t p;
	int st;
	fflush(stdout);
	p = fork();
	if (p == 0) { probe_setup(); int r = fn(); fflush(stdout); _exit(r ? r : failed); }
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
	int a, b, c;
	probe_setup();
	a = run(regrant_fn);
	b = run(ipi_fn);
	c = run(pin_fn);
	printf("# statuses B=%d C=%d A=%d\n", a, b, c);
	check(a == 0, "B process"); check(b == 0, "C process"); check(c == 0, "A process");
	return tally();
}
