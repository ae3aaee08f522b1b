// SPDX-License-Identifier: GPL-2.0
/*
 * The C API against the PMU model (msrbatch_open_model): the counter API and
 * the batch flags; argv[1] is the Skylake CPUID dump, argv[2] a dump without
 * a PMU. Prints TAP lines; exits 1 if a check failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <msrbatch.h>

static int failed;

static void ok(int cond, const char *what)
{
	printf("%s - C API: %s\n", cond ? "ok" : "not ok", what);
	if (!cond)
		failed = 1;
}

/*
 * The batch flags on the model (timestamps as the kernel gives them, the
 * start spread), and what the device-only calls answer there.
 */
static void batch_flags(struct msrbatch *dev)
{
	struct msrbatch_prepared *prep = NULL;
	struct msrbatch_batch_buf *batch;
	struct msrbatch *none = NULL;
	uint64_t a[2], b[2];

	batch = msrbatch_batch_new();
	msrbatch_batch_timestamps(batch, 1);
	msrbatch_batch_rdtsc(batch, 0);
	msrbatch_batch_delay(batch, 0, 1000);
	msrbatch_batch_rdtsc(batch, 0);
	ok(msrbatch_run(dev, batch) == 0 && msrbatch_result(batch, 0, a) == 0 &&
	   msrbatch_result(batch, 2, b) == 0,
	   "a batch with timestamps runs on the model");
	ok(a[1] == a[0] && b[1] == b[0] && b[0] == a[0] + 1000,
	   "val[1] is the TSC after each op (a 1000 ns delay in between)");
	ok(msrbatch_batch_start_spread(batch) == 0, "one CPU: start spread 0");
	msrbatch_batch_rdtscp(batch, 0);
	ok(msrbatch_run(dev, batch) == -EINVAL && msrbatch_batch_err_index(batch) == 3,
	   "timestamps with RDTSCP: -EINVAL, op 3 blamed");
	msrbatch_batch_timestamps(batch, 0);
	msrbatch_batch_sync_start(batch, 1);
	ok(msrbatch_run(dev, batch) == 0 && msrbatch_result(batch, 0, a) == 0 && a[1] == 0,
	   "without timestamps val[1] of RDTSC is 0; sync start runs");
	ok(msrbatch_prepare(dev, batch, &prep) == -EOPNOTSUPP && !prep,
	   "msrbatch_prepare on a model: -EOPNOTSUPP");
	ok(msrbatch_prepare(none, batch, &prep) == -EINVAL && msrbatch_prepare(dev, NULL, &prep) == -EINVAL &&
	   msrbatch_prepare(dev, batch, NULL) == -EINVAL, "msrbatch_prepare with NULL: -EINVAL");
	ok(msrbatch_prepared_run(NULL) == -EINVAL && msrbatch_prepared_len(NULL) == 0 &&
	   msrbatch_prepared_result(NULL, 0, a) == -EINVAL, "prepared calls on NULL: -EINVAL, 0");
	msrbatch_prepared_free(NULL);
	ok(msrbatch_restore_on_close(dev) == -EOPNOTSUPP && msrbatch_restore_now(dev) == -EOPNOTSUPP,
	   "restore on a model: -EOPNOTSUPP");
	ok(msrbatch_restore_on_close(none) == -EINVAL && msrbatch_restore_now(none) == -EINVAL,
	   "restore with NULL: -EINVAL");
	msrbatch_batch_free(batch);
}

int main(int argc, char **argv)
{
	uint64_t a[2], z[2], d[2];
	struct msrbatch_counters *ctr, *other;
	struct msrbatch *dev, *none;
	struct msrbatch_info info;
	struct msrbatch_batch_buf *batch;
	char buf[96];
	long r0, r1;

	if (argc != 3)
		return 2;
	ok(msrbatch_open_model(argv[1], &dev) == 0, "msrbatch_open_model opens a CPUID dump");
	ok(msrbatch_open_model("/nonexistent", &none) == -EINVAL && strstr(msrbatch_last_error(), "/nonexistent"),
	   "a missing dump is -EINVAL and named");
	ok(msrbatch_info(dev, &info) == -EOPNOTSUPP, "msrbatch_info on a model is -EOPNOTSUPP");
	ok(msrbatch_model_delay_mix(dev, "instructions", 3) == 0, "delay mix: 3 instructions per cycle");
	ok(msrbatch_counters_open(dev, 0, "bogus", 0, &ctr) == -EINVAL, "unknown event: -EINVAL");
	ok(msrbatch_counters_open(dev, 0, "topdown-slots", 0, &ctr) == -EOPNOTSUPP,
	   "an event CPUID does not enumerate: -EOPNOTSUPP");
	ok(msrbatch_counters_open(dev, 0, "instructions,branches:usr", 0, &ctr) == 0, "open two events");
	ok(msrbatch_counters_len(ctr) == 2, "two events");
	ok(msrbatch_counters_describe(ctr, 0, buf, sizeof(buf)) > 0 && strstr(buf, "IA32_FIXED_CTR0"),
	   "instructions on IA32_FIXED_CTR0");
	ok(msrbatch_counters_describe(ctr, 2, buf, sizeof(buf)) == -ERANGE, "describe past the end: -ERANGE");
	ok(msrbatch_counters_open(dev, 0, "instructions", 0, &other) == -EBUSY,
	   "a second open of the same counter: -EBUSY");
	ok(msrbatch_counters_start(ctr, a) == 0, "start");
	batch = msrbatch_batch_new();
	msrbatch_batch_delay(batch, 0, 1000);
	ok(msrbatch_run(dev, batch) == 0, "a 1 us DELAY runs on the model");
	ok(msrbatch_counters_stop(ctr, z) == 0, "stop");
	msrbatch_counters_deltas(ctr, a, z, d);
	ok(d[0] == 3000 && d[1] == 0, "counted 3000 instructions (kernel mode) and 0 user branches");
	msrbatch_batch_free(batch);
	batch = msrbatch_batch_new();
	msrbatch_counters_push_start(ctr, batch);
	r0 = msrbatch_counters_push_read(ctr, batch);
	msrbatch_batch_delay(batch, 0, 2000);
	r1 = msrbatch_counters_push_read(ctr, batch);
	msrbatch_counters_push_stop(ctr, batch);
	ok(msrbatch_run(dev, batch) == 0 && msrbatch_counters_values(ctr, batch, r0, a) == 0 &&
	   msrbatch_counters_values(ctr, batch, r1, z) == 0, "one batch: start, read, delay, read, stop");
	msrbatch_counters_deltas(ctr, a, z, d);
	ok(d[0] == 6000, "counted 6000 instructions within the batch");
	ok(msrbatch_counters_values(ctr, batch, r1 + 1, a) == -ERANGE, "a bad reading handle: -ERANGE");
	ok(msrbatch_counters_restore(ctr) == 0, "restore");
	ok(msrbatch_counters_open(dev, 0, "instructions", 0, &other) == 0, "after restore the counter is free");
	msrbatch_counters_close(other);
	msrbatch_counters_close(ctr);
	msrbatch_batch_free(batch);
	batch_flags(dev);
	msrbatch_close(dev);
	ok(msrbatch_open_model(argv[2], &none) == 0 &&
	   msrbatch_counters_open(none, 0, "instructions", 0, &ctr) == -ENODEV &&
	   strstr(msrbatch_last_error(), "no PMU"), "no PMU: -ENODEV and why");
	msrbatch_close(none);
	return failed;
}
