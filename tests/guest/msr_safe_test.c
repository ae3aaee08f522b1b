// SPDX-License-Identifier: GPL-2.0
/*
 * The msr-safe personality (module parameter msr_safe=1), driven as a
 * program written for LLNL msr-safe 1.8 drives it: through its four nodes
 * and its header's definitions only (include/uapi/linux/msrbatch_msr_safe.h
 * has msr_safe.h's names). Needs a boot whose module was loaded with
 * msr_safe=1 (tests/harness/check.sh, stage msr-safe); run as root, which
 * msr-safe checks against the allowlist too. 64-bit only, as msr-safe's batch
 * ABI (a 32-bit caller's structs differ).
 *
 * MSRs: IA32_PAT (read only here; TCG reads IA32_TIME_STAMP_COUNTER as 0),
 * IA32_TSC_AUX (QEMU models it; written and put back), IA32_APIC_BASE (never
 * listed: refused), and
 * IA32_PKRS, whose reserved bits 63:32 make a write fault under QEMU TCG.
 * The allowlist in force before is put back at the end (through
 * /dev/msrbatch_allowlist, which reads it back losslessly).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/msrbatch_msr_safe.h>
#include "kselftest.h"
#include "msr_safe_client.h"

#define PAT		0x277u
#define APIC_BASE	0x1bu
#define TSC_AUX		0xc0000103u
#define PKRS		0x6e1u
#define MAX_CPUS	64

static int ncpus;
static char saved_list[256 * 1024];
static ssize_t saved_len = -1;

static int load(const char *text)
{
	return write_list("/dev/cpu/msr_allowlist", text, strlen(text));
}

/* X86_IOC_MSR_BATCH: the ioctl's result, 0 or -errno. */
static int run(int fd, struct msr_batch_op *ops, unsigned int n, __u32 version)
{
	struct msr_batch_array a = { .numops = n, .version = version, .ops = ops };

	return ioctl(fd, X86_IOC_MSR_BATCH, &a) ? -errno : 0;
}

static struct msr_batch_op op(int cpu, int read, __u32 msr, __u64 data)
{
	struct msr_batch_op o = { .cpu = cpu, .isrdmsr = read, .msr = msr, .msrdata = data };

	return o;
}

static int cpu_fd(int cpu, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/cpu/%d/msr_safe", cpu);
	return open(path, flags);
}

static const char list1[] =
	"# MSR      Write mask         # Comment\n"
	"0x00000277 0x0000000000000000 # \"IA32_PAT\"\n"
	"0xC0000103 0x00000000FFFF0000 # \"IA32_TSC_AUX\": bits 31:16\n"
	"0x6e1 0xffffffffffffffff\n";

/* msr-safe's header ("%-10s %-18s\n"), then the entries in the text's order. */
static const char list1_read[] =
	"#MSR       Write mask        \n"
	"0x00000277 0x0000000000000000\n"
	"0xC0000103 0x00000000FFFF0000\n"
	"0x000006E1 0xFFFFFFFFFFFFFFFF\n";

static void test_version(void)
{
	char buf[64];
	ssize_t n = read_all("/dev/cpu/msr_safe_version", buf, sizeof(buf));

	ksft_test_result(n == 6 && !strcmp(buf, "1.8.0"),
			 "/dev/cpu/msr_safe_version reads \"1.8.0\" and its NUL (%zd bytes)\n", n);
}

static void test_allowlist_round_trip(void)
{
	static char buf[4096];
	ssize_t n;
	int fd;
	char small[59];

	ksft_test_result(load(list1) == 0, "write an allowlist to /dev/cpu/msr_allowlist\n");
	n = read_all("/dev/cpu/msr_allowlist", buf, sizeof(buf));
	ksft_test_result(n > 0 && !strcmp(buf, list1_read),
			 "read it back as msr-safe prints it (text order, no comments)\n");
	fd = open("/dev/cpu/msr_allowlist", O_RDONLY);
	ksft_test_result(fd >= 0 && read(fd, small, sizeof(small)) < 0 && errno == E2BIG,
			 "a read of fewer than 60 bytes: E2BIG\n");
	close(fd);
}

static void test_allowlist_errnos(void)
{
	static char big[128 * 1024 + 2];
	static char buf[4096];
	static const struct { const char *text; int err; const char *what; } cases[] = {
		{ "0x277 0", EILSEQ, "the text ends inside an entry: EILSEQ" },
		{ "0x277 0xzz\n", EINVAL, "a number that does not parse: EINVAL" },
		{ "# comments only\n\n", ENOMSG, "no entry: ENOMSG" },
		{ "0x277 0\n0x277 0xff\n", ENOTUNIQ, "an MSR twice: ENOTUNIQ" },
		{ "0x277 0x10000000000000000\n", ERANGE, "a mask over 64 bits: ERANGE" },
	};
	unsigned int i;
	int r;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = load(cases[i].text);
		ksft_test_result(r == -cases[i].err, "%s (%d)\n", cases[i].what, r);
	}
	memset(big, ' ', sizeof(big));
	r = write_list("/dev/cpu/msr_allowlist", big, 128 * 1024 + 1);
	ksft_test_result(r == -E2BIG, "more than 128 KiB: E2BIG (%d)\n", r);
	read_all("/dev/cpu/msr_allowlist", buf, sizeof(buf));
	ksft_test_result(!strcmp(buf, list1_read), "after each error the list in force is unchanged\n");
}

static void test_batch_read_write(void)
{
	struct msr_batch_op ops[2 * MAX_CPUS], back[MAX_CPUS];
	__u64 orig[MAX_CPUS];
	int fd = open("/dev/cpu/msr_batch", O_RDWR), i, r, ok = 1;

	for (i = 0; i < ncpus; i++) {
		/* A read's msrdata is output only: garbage in it changes nothing. */
		ops[2 * i] = op(i, 1, PAT, 0xdeadbeef);
		ops[2 * i + 1] = op(i, 1, TSC_AUX, 0);
	}
	r = run(fd, ops, 2 * ncpus, MSR_SAFE_VERSION_u32);
	for (i = 0; i < 2 * ncpus; i++)
		ok &= ops[i].err == 0;
	ksft_test_result(r == 0 && ok && ops[0].msrdata != 0xdeadbeef && ops[1].wmask == 0xffff0000ull,
			 "batch read of IA32_PAT and TSC_AUX on every CPU, wmask reported\n");
	for (i = 0; i < ncpus; i++) {
		orig[i] = ops[2 * i + 1].msrdata;
		back[i] = op(i, 0, TSC_AUX, 0xabcd0000ull | 0x1234 | orig[i]);
	}
	r = run(fd, back, ncpus, MSR_SAFE_VERSION_u32);
	for (i = 0; i < ncpus; i++)
		back[i] = op(i, 1, TSC_AUX, 0);
	r |= run(fd, back, ncpus, MSR_SAFE_VERSION_u32);
	ok = r == 0;
	for (i = 0; i < ncpus; i++)
		ok &= back[i].msrdata == (0xabcd0000ull | (orig[i] & ~0xffff0000ull));
	ksft_test_result(ok, "batch write: only the write mask's bits change\n");
	for (i = 0; i < ncpus; i++)
		back[i] = op(i, 0, TSC_AUX, orig[i]);
	ksft_test_result(run(fd, back, ncpus, MSR_SAFE_VERSION_u32) == 0, "and back\n");
	close(fd);
}

static void test_batch_errnos(void)
{
	struct msr_batch_op ops[4];
	int fd = open("/dev/cpu/msr_batch", O_RDWR), ro = open("/dev/cpu/msr_batch", O_WRONLY), r;

	ops[0] = op(0, 1, PAT, 0);
	ops[1] = op(0, 1, APIC_BASE, 0);
	ops[2] = op(0, 0, PAT, 5);
	ops[3] = op(ncpus + 100, 1, PAT, 0);
	ops[0].err = 77;
	r = run(fd, ops, 4, MSR_SAFE_VERSION_u32);
	ksft_test_result(r == -EACCES && ops[0].err == 0 && ops[1].err == -EACCES &&
			 ops[2].err == -EROFS && ops[3].err == -ENXIO && ops[0].msrdata == 0,
			 "each op's own error (EACCES, EROFS, ENXIO), the first one the ioctl's; none ran (%d: %d %d %d %d)\n",
			 r, ops[0].err, ops[1].err, ops[2].err, ops[3].err);
	ops[0] = op(0, 1, PAT, 0);
	ops[1] = op(0, 0, PKRS, 1ull << 32);
	r = run(fd, ops, 2, MSR_SAFE_VERSION_u32);
	ksft_test_result(r == -EIO && ops[0].err == 0 && ops[0].msrdata && ops[1].err == -EIO,
			 "a write that faults: EIO in its op and from the ioctl, the rest ran (%d)\n", r);
	r = run(fd, ops, 1, MSR_SAFE_VERSION_u32 + (1 << 16));
	ksft_test_result(r == -ENOPROTOOPT, "another major version: ENOPROTOOPT (%d)\n", r);
	r = run(fd, ops, 1, (MSR_SAFE_VERSION_MAJOR << 16) | (7 << 8));
	ksft_test_result(r == 0, "another minor version of the same major: runs (%d)\n", r);
	r = run(fd, ops, 0, MSR_SAFE_VERSION_u32);
	ksft_test_result(r == -EINVAL, "no op: EINVAL (%d)\n", r);
	r = run(ro, ops, 1, MSR_SAFE_VERSION_u32);
	ksft_test_result(r == -EBADF, "a descriptor not open for reading: EBADF (%d)\n", r);
	r = ioctl(fd, X86_IOC_MSR_BATCH + 1, ops) ? -errno : 0;
	ksft_test_result(r == -ENOTTY, "another ioctl: ENOTTY (%d)\n", r);
	close(ro);
	close(fd);
}

static void test_per_cpu(void)
{
	__u64 v = 0, orig = 0, w;
	int fd = cpu_fd(ncpus - 1, O_RDWR), ok;
	off_t pos;

	ksft_test_result(pread(fd, &v, 8, PAT) == 8 && v != 0, "pread IA32_PAT on /dev/cpu/%d/msr_safe\n",
			 ncpus - 1);
	ok = pread(fd, &orig, 8, TSC_AUX) == 8;
	w = 0x5a5a0000ull | (orig & 0xffff);
	ok &= pwrite(fd, &w, 8, TSC_AUX) == 8 && pread(fd, &v, 8, TSC_AUX) == 8 && v == w;
	ksft_test_result(ok, "pwrite TSC_AUX within its mask, pread it back\n");
	ksft_test_result(pwrite(fd, &orig, 8, TSC_AUX) == 8, "and back\n");
	ksft_test_result(pread(fd, &v, 8, APIC_BASE) < 0 && errno == EACCES,
			 "root reading an MSR not listed: EACCES\n");
	errno = 0;
	ksft_test_result(pwrite(fd, &v, 8, PAT) < 0 && errno == EACCES,
			 "a write to a read-only MSR: EACCES, msr-safe's per-CPU errno for it (%s)\n",
			 strerror(errno));
	ksft_test_result(pread(fd, &v, 4, PAT) < 0 && errno == EINVAL, "a read of 4 bytes: EINVAL\n");
	pos = lseek(fd, TSC_AUX - 3, SEEK_SET);
	pos = pos == (off_t)TSC_AUX - 3 ? lseek(fd, 3, SEEK_CUR) : -1;
	ksft_test_result(pos == (off_t)TSC_AUX && read(fd, &v, 8) == 8 && v == orig,
			 "llseek SEEK_SET then SEEK_CUR, then read(2) there\n");
	ksft_test_result(lseek(fd, 0, SEEK_END) < 0 && errno == EINVAL, "SEEK_END: EINVAL\n");
	close(fd);
}

/* The allowlist is fixed at open (msrbatch's rule; msr-safe uses the new one). */
static void test_fixed_at_open(void)
{
	int fd = open("/dev/cpu/msr_batch", O_RDWR), fd2, r, r2;
	struct msr_batch_op o = op(0, 1, TSC_AUX, 0);

	load("0x277 0\n");
	r = run(fd, &o, 1, MSR_SAFE_VERSION_u32);
	fd2 = open("/dev/cpu/msr_batch", O_RDWR);
	o = op(0, 1, TSC_AUX, 0);
	r2 = run(fd2, &o, 1, MSR_SAFE_VERSION_u32);
	ksft_test_result(r == 0 && r2 == -EACCES,
			 "a descriptor keeps the list in force at its open; a new one gets the new list (%d %d)\n",
			 r, r2);
	close(fd2);
	close(fd);
	load(list1);
}

/*
 * msrsave's cycle: read the allowlist, save every writable MSR on every CPU,
 * change them, restore them, check.
 */
static void test_save_restore(void)
{
	static char text[4096];
	struct msr_batch_op ops[16 * MAX_CPUS], chk[16 * MAX_CPUS];
	unsigned int msr[16], n = 0, i, k = 0;
	unsigned long long a, m, mask[16];
	char *line;
	int fd = open("/dev/cpu/msr_batch", O_RDWR), ok = 1, r;

	read_all("/dev/cpu/msr_allowlist", text, sizeof(text));
	for (line = strtok(text, "\n"); line && n < 16; line = strtok(NULL, "\n"))
		if (sscanf(line, "%llx %llx", &a, &m) == 2 && m != 0 && a != PKRS) {
			msr[n] = a;
			mask[n++] = m;
		}
	for (i = 0; i < n; i++)
		for (int c = 0; c < ncpus; c++)
			ops[k++] = op(c, 1, msr[i], 0);
	r = run(fd, ops, k, MSR_SAFE_VERSION_u32);
	ksft_test_result(n == 1 && r == 0, "msrsave: %u writable MSR(s) saved on %d CPUs\n", n, ncpus);
	for (i = 0; i < k; i++) {
		chk[i] = op(ops[i].cpu, 0, ops[i].msr, ops[i].msrdata ^ mask[i / ncpus]);
	}
	r = run(fd, chk, k, MSR_SAFE_VERSION_u32);
	for (i = 0; i < k; i++)
		chk[i] = op(ops[i].cpu, 1, ops[i].msr, 0);
	r |= run(fd, chk, k, MSR_SAFE_VERSION_u32);
	for (i = 0; i < k; i++)
		ok &= chk[i].msrdata == (ops[i].msrdata ^ mask[i / ncpus]);
	ksft_test_result(r == 0 && ok, "msrsave: every writable bit flipped\n");
	for (i = 0; i < k; i++)
		chk[i] = op(ops[i].cpu, 0, ops[i].msr, ops[i].msrdata);
	r = run(fd, chk, k, MSR_SAFE_VERSION_u32);
	for (i = 0; i < k; i++)
		chk[i] = op(ops[i].cpu, 1, ops[i].msr, 0);
	r |= run(fd, chk, k, MSR_SAFE_VERSION_u32);
	ok = r == 0;
	for (i = 0; i < k; i++)
		ok &= chk[i].msrdata == ops[i].msrdata;
	ksft_test_result(ok, "msrsave: restored, every value as saved\n");
	close(fd);
}

int main(void)
{
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus > MAX_CPUS)
		ncpus = MAX_CPUS;
	ksft_print_header();
	if (access("/dev/cpu/msr_batch", F_OK))
		ksft_exit_skip("no /dev/cpu/msr_batch: load msrbatch with msr_safe=1\n");
	saved_len = read_all("/dev/msrbatch_allowlist", saved_list, sizeof(saved_list));
	test_version();
	test_allowlist_round_trip();
	test_allowlist_errnos();
	test_batch_read_write();
	test_batch_errnos();
	test_per_cpu();
	test_fixed_at_open();
	test_save_restore();
	ksft_test_result(saved_len >= 0 &&
			 write_list("/dev/msrbatch_allowlist", saved_list, saved_len) == 0,
			 "the allowlist in force before is back\n");
	ksft_set_plan(ksft_test_num());
	ksft_finished();
}
