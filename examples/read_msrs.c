// SPDX-License-Identifier: GPL-2.0
/*
 * Read a few MSRs on every online CPU with the msrbatch C API.
 *
 *   cc $(pkg-config --cflags msrbatch) -o read_msrs examples/read_msrs.c \
 *      $(pkg-config --libs msrbatch)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <msrbatch.h>

int main(void)
{
	static const uint32_t msrs[] = { 0x277, 0xc0000080, 0xc0000103 };
	struct msrbatch_batch_buf *batch;
	struct msrbatch *dev;
	uint32_t *cpus;
	long ncpus;
	size_t i;
	int err;

	/* Only reads: a node the caller may only read is enough. */
	err = msrbatch_open_read_only(NULL, &dev);
	if (err) {
		fprintf(stderr, "msrbatch_open: %s\n", strerror(-err));
		return 1;
	}
	/* The online CPUs (not 0 to _SC_NPROCESSORS_ONLN: a CPU may be offline). */
	ncpus = msrbatch_online_cpus(NULL, 0);
	cpus = ncpus > 0 ? calloc(ncpus, sizeof(*cpus)) : NULL;
	if (!cpus || msrbatch_online_cpus(cpus, ncpus) != ncpus) {
		fprintf(stderr, "msrbatch_online_cpus: %s\n", msrbatch_last_error());
		return 1;
	}
	batch = msrbatch_batch_new();
	for (long c = 0; c < ncpus; c++)
		for (i = 0; i < sizeof(msrs) / sizeof(msrs[0]); i++)
			msrbatch_batch_rdmsr(batch, cpus[c], msrs[i]);
	err = msrbatch_run(dev, batch);
	if (err) {
		fprintf(stderr, "msrbatch_run: %s (op %ld)\n", msrbatch_errno_name(err),
			msrbatch_batch_err_index(batch));
		return 1;
	}
	for (i = 0; i < msrbatch_batch_len(batch); i++) {
		uint64_t val[2];
		int status = msrbatch_result(batch, i, val);

		printf("cpu %u msr %#x: ", cpus[i / 3], msrs[i % 3]);
		if (status)
			printf("%s\n", msrbatch_errno_name(status));
		else
			printf("0x%016llx\n", (unsigned long long)val[0]);
	}
	err = msrbatch_batch_nr_failed(batch) ? 1 : 0;
	msrbatch_batch_free(batch);
	free(cpus);
	msrbatch_close(dev);
	return err;
}
