// SPDX-License-Identifier: GPL-2.0
/*
 * Read a few MSRs on every online CPU with the msrbatch C API.
 *
 *   cc $(pkg-config --cflags msrbatch) -o read_msrs examples/read_msrs.c \
 *      $(pkg-config --libs msrbatch)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <msrbatch.h>

int main(void)
{
	static const uint32_t msrs[] = { 0x277, 0xc0000080, 0xc0000103 };
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct msrbatch_req *req;
	struct msrbatch *dev;
	size_t i;
	int err;

	err = msrbatch_open(NULL, &dev);
	if (err) {
		fprintf(stderr, "msrbatch_open: %s\n", strerror(-err));
		return 1;
	}
	req = msrbatch_req_new();
	for (long cpu = 0; cpu < ncpus; cpu++)
		for (i = 0; i < sizeof(msrs) / sizeof(msrs[0]); i++)
			msrbatch_req_rdmsr(req, cpu, msrs[i]);
	err = msrbatch_run(dev, req);
	if (err) {
		fprintf(stderr, "msrbatch_run: %s (op %ld)\n", msrbatch_errno_name(err),
			msrbatch_req_err_index(req));
		return 1;
	}
	for (i = 0; i < msrbatch_req_len(req); i++) {
		uint64_t val[2];
		int status = msrbatch_result(req, i, val);

		printf("cpu %zu msr %#x: ", i / 3, msrs[i % 3]);
		if (status)
			printf("%s\n", msrbatch_errno_name(status));
		else
			printf("0x%016llx\n", (unsigned long long)val[0]);
	}
	err = msrbatch_req_nr_failed(req) ? 1 : 0;
	msrbatch_req_free(req);
	msrbatch_close(dev);
	return err;
}
