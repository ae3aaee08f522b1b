// SPDX-License-Identifier: GPL-2.0
/*
 * The batch C API without the device: flags, timestamps and the start spread
 * against the PMU model (argv[1]: a CPUID dump), and the answers of the
 * prepared-batch and restore calls where there is no device to do them.
 * Prints TAP lines; exits 1 if a check failed.
 */
#include <errno.h>
#include <stdio.h>
#include <msrbatch.h>

static int failed;

static void ok(int cond, const char *what)
{
	printf("%s - C API: %s\n", cond ? "ok" : "not ok", what);
	if (!cond)
		failed = 1;
}

int main(int argc, char **argv)
{
	struct msrbatch_prepared *prep = NULL;
	struct msrbatch_batch_buf *batch;
	struct msrbatch *dev, *none = NULL;
	uint64_t a[2], b[2];

	if (argc != 2 || msrbatch_open_model(argv[1], &dev))
		return 2;
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
	msrbatch_close(dev);
	return failed;
}
