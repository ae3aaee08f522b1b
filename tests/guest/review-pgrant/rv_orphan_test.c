// SPDX-License-Identifier: GPL-2.0
/* Reviewer probe (scratch): orphaned task-work references vs. module unload. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>
#include "testlib.h"

static int go[2];
static void *sleeper(void *a) { char c; (void)a; return (void *)(long)read(go[0], &c, 1); }

static int family(void)
{
	int fd = open("/dev/msrbatch", O_RDWR | O_CLOEXEC);
	pthread_t t;
	if (fd < 0 || pipe(go) || pthread_create(&t, NULL, sleeper, NULL)) return 1;
	usleep(20000);
	if (ioctl(fd, MSRBATCH_IOC_PCE_GRANT, MSRBATCH_PCE_F_THREAD | MSRBATCH_PCE_F_INHERIT)) return 2;
	ioctl(fd, MSRBATCH_IOC_PCE_REVOKE, 0);
	close(fd);
	/* The sleeper now runs its task work: a revoked family, an orphaned reference. */
	if (write(go[1], "x", 1) != 1) return 3;
	pthread_join(t, NULL);
	return 0;
}

static volatile int stop;
static void *unloader(void *arg)
{
	int *n = arg;
	while (!stop) {
		if (syscall(SYS_delete_module, "msrbatch", O_NONBLOCK) == 0) {
			int fd = open("/lib/modules/msrbatch.ko", O_RDONLY | O_CLOEXEC);
			++*n;
			if (fd < 0 || syscall(SYS_finit_module, fd, "", 0)) break;
			close(fd);
		}
		usleep(200);
	}
	return NULL;
}

int main(void)
{
	int i, unloads = 0, bad = 0;
	pthread_t u;
	time_t end = time(NULL) + 20;
	pthread_create(&u, NULL, unloader, &unloads);
	for (i = 0; time(NULL) < end; i++) {
		int st;
		pid_t p = fork();
		if (p == 0) _exit(family());
		waitpid(p, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) bad++;
		usleep(5000);
	}
	stop = 1;
	pthread_join(u, NULL);
	printf("# %d families, %d failed to start (module absent), %d unloads\n", i, bad, unloads);
	check(1, "survived (look for oops/KASAN in the console)");
	return tally();
}
