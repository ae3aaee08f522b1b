// SPDX-License-Identifier: GPL-2.0
/*
 * Read a few MSRs on every online CPU with one ioctl, using nothing but the
 * uapi header <linux/msrbatch.h>.
 *
 *   cc -I include/uapi -o read_msrs_raw examples/read_msrs_raw.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/msrbatch.h>

static const struct { uint32_t msr; const char *name; } msrs[] = {
	{ 0x277, "IA32_PAT" },
	{ 0xc0000080, "IA32_EFER" },
	{ 0xc0000103, "IA32_TSC_AUX" },
};
#define NMSRS (sizeof(msrs) / sizeof(msrs[0]))
#define MAXCPUS 256

/*
 * The online CPUs, from the kernel's list ("0-2,4"): CPU numbers need not be
 * contiguous once a CPU is offline. Returns how many fit in cpus[].
 */
static unsigned int online_cpus(unsigned int *cpus, unsigned int max)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	unsigned int first, last, n = 0;
	char sep;

	if (!f)
		return 0;
	while (fscanf(f, "%u", &first) == 1) {
		last = first;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u%c", &last, &sep) < 1)
			break;
		for (; first <= last && n < max; first++)
			cpus[n++] = first;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n;
}

int main(void)
{
	static struct msrbatch_op ops[MAXCPUS * NMSRS];
	static unsigned int cpus[MAXCPUS];
	struct msrbatch_batch batch;
	unsigned int ncpus = online_cpus(cpus, MAXCPUS);
	unsigned int c, i, n = 0;
	int fd;

	fd = open("/dev/msrbatch", O_RDONLY);
	if (fd < 0) {
		perror("open /dev/msrbatch");
		return 1;
	}
	memset(ops, 0, sizeof(ops));
	for (c = 0; c < ncpus; c++) {
		for (i = 0; i < NMSRS; i++, n++) {
			ops[n].op = MSRBATCH_OP_RDMSR;
			ops[n].cpu = cpus[c];
			ops[n].reg = msrs[i].msr;
		}
	}
	memset(&batch, 0, sizeof(batch));
	batch.version = MSRBATCH_ABI_VERSION;
	batch.nr_ops = n;
	batch.ops = (uintptr_t)ops;
	if (ioctl(fd, MSRBATCH_IOC_BATCH, &batch)) {
		fprintf(stderr, "MSRBATCH_IOC_BATCH: %s (op %u)\n", strerror(errno), batch.err_index);
		return 1;
	}
	for (i = 0; i < n; i++) {
		printf("cpu %u %-13s ", ops[i].cpu, msrs[i % NMSRS].name);
		if (ops[i].status)
			printf("error %s\n", strerror(-ops[i].status));
		else
			printf("0x%016llx\n", (unsigned long long)ops[i].val[0]);
	}
	close(fd);
	return batch.nr_failed ? 1 : 0;
}
