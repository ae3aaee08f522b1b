// SPDX-License-Identifier: GPL-2.0
/*
 * Program a general-purpose counter and read it, the classic way: write
 * IA32_PERFEVTSEL0 (instructions retired, user+kernel, enabled), then read
 * the counter with RDPMC between CPUID fences, around a 10 us busy-wait, and
 * put everything back; all of it in one batch, atomically on one CPU.
 *
 * Needs an Intel architectural PMU (CPUID leaf 0AH). Without one (for
 * example under QEMU TCG) it says so and exits 0. It refuses (exit 1) when
 * counter 0 is already enabled by someone else (NMI watchdog, perf).
 */
#include <stdio.h>
#include <string.h>
#include <msrbatch.h>

#define IA32_PMC0		0xc1
#define IA32_PERFEVTSEL0	0x186
#define IA32_PERF_GLOBAL_CTRL	0x38f
#define EVTSEL_USR		(1ull << 16)
#define EVTSEL_OS		(1ull << 17)
#define EVTSEL_EN		(1ull << 22)
#define INST_RETIRED		0xc0	/* architectural event, umask 0 */

static struct msrbatch *dev;

static int run(struct msrbatch_batch_buf *batch)
{
	int err = msrbatch_run(dev, batch);

	if (err)
		fprintf(stderr, "msrbatch_run: %s (op %ld)\n", msrbatch_errno_name(err),
			msrbatch_batch_err_index(batch));
	return err;
}

int main(void)
{
	uint64_t v[2], evtsel, global = 0, first, second;
	struct msrbatch_batch_buf *probe, *batch;
	unsigned int version, counters;
	const uint32_t cpu = 0;
	long a, b;
	int err;

	err = msrbatch_open(NULL, &dev);
	if (err) {
		fprintf(stderr, "msrbatch_open: %s\n", strerror(-err));
		return 1;
	}
	probe = msrbatch_batch_new();
	msrbatch_batch_cpuid(probe, cpu, 0xa, 0);
	if (run(probe) || msrbatch_result(probe, 0, v))
		return 1;
	version = v[0] & 0xff;
	counters = (v[0] >> 8) & 0xff;
	if (version == 0 || counters == 0) {
		printf("no PMU: CPUID.0AH version %u, %u counters; nothing to count\n", version, counters);
		return 0;
	}
	msrbatch_batch_rdmsr(probe, cpu, IA32_PERFEVTSEL0);
	if (version >= 2)
		msrbatch_batch_rdmsr(probe, cpu, IA32_PERF_GLOBAL_CTRL);
	if (run(probe) || msrbatch_result(probe, 1, v))
		return 1;
	evtsel = v[0];
	if (version >= 2 && msrbatch_result(probe, 2, v) == 0)
		global = v[0];
	if (evtsel & EVTSEL_EN) {
		fprintf(stderr, "counter 0 is in use (PERFEVTSEL0=%#llx): NMI watchdog or perf?\n",
			(unsigned long long)evtsel);
		return 1;
	}

	batch = msrbatch_batch_new();
	msrbatch_batch_stop_on_error(batch, 0);	/* always reach the restores */
	msrbatch_batch_wrmsr(batch, cpu, IA32_PMC0, 0);
	msrbatch_batch_wrmsr(batch, cpu, IA32_PERFEVTSEL0,
			     INST_RETIRED | EVTSEL_USR | EVTSEL_OS | EVTSEL_EN);
	if (version >= 2)
		msrbatch_batch_rmwmsr(batch, cpu, IA32_PERF_GLOBAL_CTRL, 0, 1);
	msrbatch_batch_cpuid(batch, cpu, 0, 0);
	a = msrbatch_batch_rdpmc(batch, cpu, 0);
	msrbatch_batch_delay(batch, cpu, 10000);
	msrbatch_batch_cpuid(batch, cpu, 0, 0);
	b = msrbatch_batch_rdpmc(batch, cpu, 0);
	msrbatch_batch_wrmsr(batch, cpu, IA32_PERFEVTSEL0, evtsel);
	if (version >= 2)
		msrbatch_batch_wrmsr(batch, cpu, IA32_PERF_GLOBAL_CTRL, global);
	if (run(batch))
		return 1;
	if (msrbatch_result(batch, a, v) || (first = v[0], msrbatch_result(batch, b, v))) {
		fprintf(stderr, "RDPMC failed\n");
		return 1;
	}
	second = v[0];
	printf("PMU version %u, %u counters; instructions retired on CPU %u across a 10 us busy-wait: %llu\n",
	       version, counters, cpu, (unsigned long long)(second - first));
	msrbatch_batch_free(batch);
	msrbatch_batch_free(probe);
	msrbatch_close(dev);
	return 0;
}
