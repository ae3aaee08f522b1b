// SPDX-License-Identifier: GPL-2.0
/*
 * #13 item 8: perf's rdpmc policy changing while a grant stands. Run by
 * pce_policy_test.sh, against the real knob where there is a PMU, or else
 * with the test PMU loaded (tests/guest/test-pmu: the TCG guest has no PMU,
 * so the real knob does not exist) and msrbatch loaded after it, so that
 * msrbatch reads that knob.
 *
 * rdpmc 1 -> 0 must end user RDPMC for a thread whose grant stands: the
 * kernel writes no CR4 for it (the granted thread's CR4 shadow has PCE clear
 * before and after), so a grant that checks the policy only when it is made
 * leaves PCE set for as long as the thread lives. 0 -> 1 gives the standing
 * grant PCE back at its next switch; a new grant under 0 is refused.
 *
 * The probe is testlib.h's: RDPMC in user mode raises #GP with PCE clear,
 * #UD with it set (QEMU TCG has no counters). The knob is put back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define KNOB "/sys/bus/event_source/devices/cpu/rdpmc"

static int knob_read(void)
{
	char buf[8];
	ssize_t n = file_read(KNOB, buf, sizeof(buf));

	return n > 0 ? atoi(buf) : n < 0 ? (int)n : -EIO;
}

static int knob_write(int v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d\n", v);
	return file_write(KNOB, buf);
}

/* A context switch of the calling thread: it sleeps, then runs again. */
static void switch_out_and_in(void)
{
	usleep(2000);
}

static int dev_fd;

static void *grant_in_new_thread(void *arg)
{
	int r = pce_grant(dev_fd, 0);

	if (r == 0)
		pce_revoke(dev_fd);
	*(int *)arg = r;
	return NULL;
}

int main(void)
{
	int saved, r, other = 1;
	pthread_t t;

	ksft_print_header();
	printf("# perf's rdpmc policy changing while a PCE grant stands\n");
	saved = knob_read();
	if (saved < 0) {
		ksft_test_result_skip("rdpmc policy changes: perf has no rdpmc knob (run through pce_policy_test.sh)\n");
		tests_done();
	}
	probe_setup();
	pin(0);
	dev_fd = dev_open(O_RDWR);
	if (dev_fd < 0) {
		ksft_test_result(0, "open /dev/msrbatch: %s\n", strerror(errno));
		tests_done();
	}
	ksft_test_result(knob_write(1) == 0 && knob_read() == 1, "rdpmc set to 1 (user RDPMC for processes with a perf mapping)\n");
	ksft_test_result(!pce_on(), "no PCE before the grant\n");
	r = pce_grant(dev_fd, 0);
	ksft_test_result(r == 0, "grant under rdpmc=1 (%s)\n", r ? strerror(-r) : "0");
	ksft_test_result(pce_on(), "PCE with the grant\n");

	ksft_test_result(knob_write(0) == 0, "rdpmc 1 -> 0 while the grant stands\n");
	switch_out_and_in();
	ksft_test_result(!pce_on(), "after the thread's next switch: no PCE (the grant no longer applies)\n");
	pin(1);
	ksft_test_result(!pce_on(), "nor on another CPU\n");
	pthread_create(&t, NULL, grant_in_new_thread, &other);
	pthread_join(t, NULL);
	ksft_test_result(other == -EACCES, "a new grant under rdpmc=0 is refused with EACCES (%s)\n",
			 other ? strerror(-other) : "granted");

	ksft_test_result(knob_write(1) == 0, "rdpmc 0 -> 1\n");
	switch_out_and_in();
	ksft_test_result(pce_on(), "the standing grant applies again after the next switch\n");
	pin(0);
	ksft_test_result(pce_on(), "on another CPU too\n");
	pthread_create(&t, NULL, grant_in_new_thread, &other);
	pthread_join(t, NULL);
	ksft_test_result(other == 0, "a new grant under rdpmc=1 succeeds (%s)\n", other ? strerror(-other) : "0");
	r = pce_revoke(dev_fd);
	ksft_test_result(r == 0 && !pce_on(), "revoke: no PCE\n");
	close(dev_fd);
	ksft_test_result(knob_write(saved) == 0 && knob_read() == saved, "rdpmc put back to %d\n", saved);
	tests_done();
}
