// SPDX-License-Identifier: GPL-2.0
/*
 * vcpu-preempt: takes one of a QEMU guest's vCPUs off its host CPU at random
 * moments, so that a race window a few guest instructions wide, with the
 * guest's interrupts off, is sometimes hundreds of microseconds wide: while
 * the vCPU is off its host CPU, the other vCPUs run on. Used by make check
 * for tests/guest/lifetime_test.c (a grant freed while the scheduler walks
 * the list that links it); it changes nothing in the guest's code.
 *
 * It pins the thread of vCPU VCPU (QEMU names it "CPU VCPU/TCG" when run
 * with -name ...,debug-threads=on) to host CPU HOST_CPU, every other vCPU
 * thread to the other host CPUs, and itself to HOST_CPU at SCHED_FIFO; then
 * it alternates busy-waiting there for STOP_US and sleeping for RUN_US (each
 * drawn uniformly from half to one and a half times the value), until QEMU
 * exits. It prints what it did when it ends.
 *
 * usage: vcpu-preempt QEMU_PID VCPU HOST_CPU RUN_US STOP_US
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Uniform in [v / 2, 3 v / 2). */
static double jitter(double v)
{
	return v * (0.5 + drand48());
}

/*
 * Pins QEMU's vCPU threads: vCPU `vcpu` to `host`, the others away from it.
 * Returns how many vCPU threads it found, with the chosen one counted only
 * if found.
 */
static int pin_vcpus(int pid, int vcpu, int host, int *found)
{
	char path[64], comm[64], want[32];
	cpu_set_t one, rest;
	struct dirent *e;
	int n = 0, i;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	snprintf(want, sizeof(want), "CPU %d/TCG\n", vcpu);
	CPU_ZERO(&one);
	CPU_SET(host, &one);
	CPU_ZERO(&rest);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (i != host)
			CPU_SET(i, &rest);
	*found = 0;
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		FILE *f;
		int tid = atoi(e->d_name);

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		if (strncmp(comm, "CPU ", 4) || !strstr(comm, "/TCG"))
			continue;
		n++;
		if (!strcmp(comm, want)) {
			*found = sched_setaffinity(tid, sizeof(one), &one) == 0;
		} else if (sched_setaffinity(tid, sizeof(rest), &rest)) {
			fprintf(stderr, "vcpu-preempt: pinning %s", comm);
		}
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	struct sched_param sp = { .sched_priority = 1 };
	double run_us, stop_us, start, stopped = 0;
	int pid, vcpu, host, found = 0, n = 0, tries;
	long stops = 0;
	cpu_set_t one;

	if (argc != 6) {
		fprintf(stderr, "usage: vcpu-preempt QEMU_PID VCPU HOST_CPU RUN_US STOP_US\n");
		return 2;
	}
	pid = atoi(argv[1]);
	vcpu = atoi(argv[2]);
	host = atoi(argv[3]);
	run_us = atof(argv[4]);
	stop_us = atof(argv[5]);
	if (pid <= 0 || vcpu < 0 || host < 0 || host >= CPU_SETSIZE || run_us <= 0 || stop_us <= 0) {
		fprintf(stderr, "vcpu-preempt: bad arguments\n");
		return 2;
	}
	srand48(getpid());
	/* QEMU starts its vCPU threads before the guest's first instruction. */
	for (tries = 0; tries < 200 && !found && kill(pid, 0) == 0; tries++) {
		n = pin_vcpus(pid, vcpu, host, &found);
		if (!found)
			usleep(50000);
	}
	if (!found) {
		fprintf(stderr, "vcpu-preempt: no thread \"CPU %d/TCG\" in process %d (%d vCPU threads)\n",
			vcpu, pid, n);
		return 1;
	}
	CPU_ZERO(&one);
	CPU_SET(host, &one);
	if (sched_setaffinity(0, sizeof(one), &one) || sched_setscheduler(0, SCHED_FIFO, &sp)) {
		fprintf(stderr, "vcpu-preempt: pinning or SCHED_FIFO: %s\n", strerror(errno));
		return 1;
	}
	start = now();
	while (kill(pid, 0) == 0) {
		double t0 = now(), until = t0 + jitter(stop_us) / 1e6;
		struct timespec ts;
		double sleep_us = jitter(run_us);

		while (now() < until)
			;
		stopped += now() - t0;
		stops++;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(sleep_us * 1e3);
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "vcpu-preempt: vCPU %d off host CPU %d %ld times, %.0f %% of %.1f s\n",
		vcpu, host, stops, 100 * stopped / (now() - start), now() - start);
	return 0;
}
