// SPDX-License-Identifier: GPL-2.0
/*
 * Review probes that are too slow or too host-dependent for make check:
 * each tries to make happen what the documentation or a kernel maintainer
 * says must not, and prints "ok" only if it does not.
 *
 *   review_test leak N   N cycles of 1024 grants, unload, load: the grant
 *                        registry's storage must be freed at unload
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

static int ncpus;

/* ---- the grant registry's memory at unload --------------------------------- */

static int grant_fd;
static pthread_barrier_t grant_bar;

static void *grant_wait_revoke(void *p)
{
	(void)p;
	if (pce_grant(grant_fd, 0))
		printf("# grant: %s\n", strerror(errno));
	pthread_barrier_wait(&grant_bar);
	pce_revoke(grant_fd);
	return NULL;
}

static long slab_objects(const char *cache)
{
	char path[128], buf[64];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), "/sys/kernel/slab/%s/objects", cache);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/*
 * 1024 threads hold a grant at once, so the registry (a vector of 1024
 * pointers, 8 KiB) lives in kmalloc-8k; then all revoke and the module is
 * unloaded and loaded again. Repeated: kmalloc-8k must not grow by one
 * object a cycle.
 */
static void probe_leak(int cycles)
{
	enum { NTHREADS = 1024 };
	pthread_t *t = calloc(NTHREADS, sizeof(*t));
	pthread_attr_t attr;
	long before, after;
	int c, i, done = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	before = slab_objects("kmalloc-8k");
	for (c = 0; c < cycles; c++) {
		grant_fd = dev_open(O_RDWR);
		if (grant_fd < 0)
			break;
		pthread_barrier_init(&grant_bar, NULL, NTHREADS);
		for (i = 0; i < NTHREADS; i++)
			if (pthread_create(&t[i], &attr, grant_wait_revoke, NULL))
				break;
		if (i < NTHREADS) {
			printf("# only %d threads\n", i);
			exit(1);
		}
		for (i = 0; i < NTHREADS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&grant_bar);
		close(grant_fd);
		for (i = 0; i < 200 && system("rmmod msrbatch 2>/dev/null"); i++)
			usleep(10000);
		if (i == 200 || system("insmod /lib/modules/msrbatch.ko"))
			break;
		done++;
	}
	after = slab_objects("kmalloc-8k");
	/*
	 * Freed 8 KiB objects that KASAN's quarantine still holds count too:
	 * about one every other cycle here (30 cycles: +15 with the registry
	 * freed at unload, +40 without).
	 */
	ksft_test_result(done == cycles && after - before < cycles,
			 "%d cycles of 1024 grants, revoke, unload, load: kmalloc-8k objects %ld -> %ld (a leaked registry a cycle adds %d more)\n",
			 done, before, after, cycles);
}

int main(int argc, char **argv)
{
	int i;

	ksft_print_header();
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("# msrbatch review probes, %d CPUs\n", ncpus);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "leak") && i + 1 < argc)
			probe_leak(atoi(argv[++i]));
	}
	tests_done();
}
