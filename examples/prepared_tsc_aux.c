// SPDX-License-Identifier: GPL-2.0
/*
 * A prepared batch with the msrbatch C API: read IA32_TSC_AUX on every online
 * CPU, with a timestamp per read, three times. The kernel validates the batch
 * once; each run is one ioctl that copies nothing, and the results appear in
 * a read-only mapping.
 *
 *   cc $(pkg-config --cflags msrbatch) -o prepared_tsc_aux \
 *      examples/prepared_tsc_aux.c $(pkg-config --libs msrbatch)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <msrbatch.h>

#define IA32_TSC_AUX 0xc0000103

/* Says which call failed and why; the exit status 1. */
static int fail(const char *call, int err)
{
	fprintf(stderr, "%s: %s\n", call, strerror(-err));
	return 1;
}

int main(void)
{
	struct msrbatch_batch_buf *batch;
	struct msrbatch_prepared *prep;
	struct msrbatch *dev;
	int err, run, failed = 0;
	uint32_t *cpus;
	long ncpus;
	size_t i;

	/* Only reads: a node the caller may only read is enough. */
	err = msrbatch_open_read_only(NULL, &dev);
	if (err)
		return fail("msrbatch_open", err);
	/* The online CPUs (not 0 to _SC_NPROCESSORS_ONLN: a CPU may be offline). */
	ncpus = msrbatch_online_cpus(NULL, 0);
	cpus = ncpus > 0 ? calloc(ncpus, sizeof(*cpus)) : NULL;
	if (!cpus || msrbatch_online_cpus(cpus, ncpus) != ncpus)
		return fail("msrbatch_online_cpus", ncpus < 0 ? (int)ncpus : -ENOMEM);
	batch = msrbatch_batch_new();
	msrbatch_batch_timestamps(batch, 1);
	for (long c = 0; c < ncpus; c++)
		msrbatch_batch_rdmsr(batch, cpus[c], IA32_TSC_AUX);
	err = msrbatch_prepare(dev, batch, &prep);
	if (err)
		return fail("msrbatch_prepare", err);
	for (run = 0; run < 3; run++) {
		err = msrbatch_prepared_run(prep);
		if (err < 0)
			return fail("msrbatch_prepared_run", err);
		failed |= err;
		for (i = 0; i < msrbatch_prepared_len(prep); i++) {
			uint64_t val[2];
			int status = msrbatch_prepared_result(prep, i, val);

			printf("run %d cpu %u: ", run, cpus[i]);
			if (status)
				printf("%s\n", msrbatch_errno_name(status));
			else
				printf("TSC_AUX 0x%llx at TSC %llu\n", (unsigned long long)val[0],
				       (unsigned long long)val[1]);
		}
	}
	msrbatch_prepared_free(prep);
	msrbatch_batch_free(batch);
	free(cpus);
	msrbatch_close(dev);
	return failed ? 1 : 0;
}
