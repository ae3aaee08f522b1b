// SPDX-License-Identifier: GPL-2.0
/*
 * Count instructions retired across a 10 us busy-wait on CPU 0 with the
 * counter API: msrbatch_counters_open() probes the PMU, places the event
 * (a fixed counter on Intel version 2 and later, else a general-purpose
 * one), checks nobody owns the counter and programs it; then one batch
 * starts it, reads it between CPUID fences around the busy-wait and stops
 * it, atomically on CPU 0; msrbatch_counters_restore() puts every PMU MSR
 * back.
 *
 * With a CPUID dump as argument (count_instructions FILE) it runs against
 * the library's PMU model of that CPU instead of /dev/msrbatch. Without a
 * PMU (for example under QEMU TCG) it says so and exits 0. It refuses
 * (exit 1) when the counter is owned by someone else (NMI watchdog, perf).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <msrbatch.h>

int main(int argc, char **argv)
{
	uint64_t first[1], second[1], delta[1];
	struct msrbatch_counters *ctr;
	const uint32_t cpu = 0;
	struct msrbatch_batch_buf *batch;
	struct msrbatch *dev;
	char what[128];
	long a, b;
	int err;

	err = argc > 1 ? msrbatch_open_model(argv[1], &dev) : msrbatch_open(NULL, &dev);
	if (err) {
		fprintf(stderr, "msrbatch_open: %s\n",
			argc > 1 ? msrbatch_last_error() : strerror(-err));
		return 1;
	}
	err = msrbatch_counters_open(dev, cpu, "instructions", 0, &ctr);
	if (err == -ENODEV) {
		printf("%s; nothing to count\n", msrbatch_last_error());
		msrbatch_close(dev);
		return 0;
	}
	if (err) {
		fprintf(stderr, "msrbatch_counters_open: %s: %s\n", msrbatch_errno_name(err),
			msrbatch_last_error());
		msrbatch_close(dev);
		return 1;
	}
	msrbatch_counters_describe(ctr, 0, what, sizeof(what));

	batch = msrbatch_batch_new();
	msrbatch_counters_push_start(ctr, batch);
	a = msrbatch_counters_push_read(ctr, batch);
	msrbatch_batch_delay(batch, cpu, 10000);
	b = msrbatch_counters_push_read(ctr, batch);
	msrbatch_counters_push_stop(ctr, batch);
	err = msrbatch_run(dev, batch);
	if (!err)
		err = msrbatch_counters_values(ctr, batch, a, first);
	if (!err)
		err = msrbatch_counters_values(ctr, batch, b, second);
	if (msrbatch_counters_restore(ctr) < 0 && !err)
		err = -EIO;
	if (err) {
		fprintf(stderr, "counting failed: %s %s\n", msrbatch_errno_name(err),
			msrbatch_last_error());
		return 1;
	}
	msrbatch_counters_deltas(ctr, first, second, delta);
	printf("instructions retired on CPU %u across a 10 us busy-wait: %llu (%s)\n", cpu,
	       (unsigned long long)delta[0], what);
	msrbatch_batch_free(batch);
	msrbatch_counters_close(ctr);
	msrbatch_close(dev);
	return 0;
}
