// SPDX-License-Identifier: GPL-2.0
/*
 * msr_safe_lists_test FILE...: allowlists in msr-safe's file format load
 * through both interfaces unchanged (issue #27). Needs msrbatch loaded with
 * msr_safe=1. For each FILE, through /dev/cpu/msr_allowlist and then
 * through /dev/msrbatch_allowlist, with a known list in force before:
 *
 * - the file's bytes in one write(2) (what `cat FILE >NODE` does with
 *   coreutils' 128 KiB buffer) are accepted, or refused with the errno
 *   msr-safe 1.8 gives (ENOMSG for a list with every entry commented out,
 *   as msr-safe ships them), the list before then still in force;
 * - once accepted, /dev/cpu/msr_allowlist prints exactly what msr-safe's
 *   read prints for that file (its header, the entries in the file's
 *   order), /dev/msrbatch_allowlist the same entries;
 * - a non-root member of the nodes' group (uid 1000, gid 4242, no
 *   capabilities) is allowed, through /dev/msrbatch and through
 *   /dev/cpu/msr_batch, exactly the listed MSRs and write masks: a read of
 *   each listed MSR and a write of each writable one pass the check, a write
 *   of a read-only one is EROFS, a read of an MSR the file lists commented
 *   out or does not list is EACCES; msr-safe's batch reports each listed
 *   MSR's write mask in wmask. Nothing is written: each op that must pass is
 *   paired with a read of an unlisted MSR, so the check refuses the batch
 *   and nothing runs.
 *
 * What msr-safe does with a file is computed here by msr_safe_model(),
 * written from msr-safe 1.8's parser (msr_allowlist.c:
 * parse_next_allowlist_entry() and write_allowlist()) as
 * Documentation/msr-safe.md describes it: whitespace-separated pairs read
 * with kstrtoull(s, 0), '#' where a pair would start skips the line, a mask
 * that ends the text is EILSEQ, no pair ENOMSG, a repeated MSR ENOTUNIQ,
 * over 128 KiB E2BIG; at most 2 bytes empty the list. Where msrbatch
 * differs on purpose (an entry over two lines or two on one line, an MSR
 * above 32 bits: msr-safe takes them, msrbatch refuses them with EINVAL and
 * ERANGE), the test expects msrbatch's refusal and says so.
 *
 * The lists come from tests/harness/gen-msr-safe-lists.py (check.sh's
 * msr-safe stage) and from a site's own directory (MSRBATCH_SITE_ALLOWLISTS).
 * The list in force and the nodes' modes are put back at the end.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/msrbatch.h>
#include <linux/msrbatch_msr_safe.h>
#include "kselftest.h"
#include "msr_safe_client.h"

#define MAX_TEXT	(128 * 1024)
#define MAX_ENTRIES	16384
#define USER		1000
#define GROUP		4242
#define MS_NODE		"/dev/cpu/msr_allowlist"
#define MB_NODE		"/dev/msrbatch_allowlist"
/* The list in force before each load: an MSR no file names. */
#define BEFORE_MSR	0x4d534246u
static const char before_text[] = "0x4D534246 0x0\n";
static const char before_print[] = "#MSR       Write mask        \n0x4D534246 0x0000000000000000\n";

struct entry {
	__u64 msr, mask;
	int line;
};

struct model {
	int err;		/* msr-safe's errno, 0: accepted */
	int differs;		/* msrbatch refuses on purpose: EINVAL or ERANGE */
	const char *why;
	int n;			/* the entries, in the text's order */
	struct entry e[MAX_ENTRIES];
	int nc;			/* MSRs on comment lines ("# 0xMSR 0xMASK ...") */
	__u32 commented[MAX_ENTRIES];
};

static struct model m;
static char text[MAX_TEXT + 2], buf[2 * MAX_TEXT];
static char saved[2 * MAX_TEXT];
static ssize_t saved_len;

/* The kernel's isspace() (lib/ctype.c): what msr-safe's skip_spaces() skips. */
static int kspace(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || c == 0xa0;
}

/* kstrtoull(s, 0, v) on a field [s, end): 0, -EINVAL or -ERANGE. */
static int kstrtoull0(const char *s, const char *end, __u64 *v)
{
	unsigned int base = 10, d;
	int any = 0, over = 0;
	__u64 r = 0;

	if (s < end && *s == '+')
		s++;
	if (end - s >= 1 && s[0] == '0') {
		base = 8;
		if (end - s >= 3 && (s[1] | 0x20) == 'x' && isxdigit((unsigned char)s[2])) {
			base = 16;
			s += 2;
		}
	}
	for (; s < end; s++, any = 1) {
		unsigned char c = *s;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			break;
		if (d >= base)
			break;
		if (r > (UINT64_MAX - d) / base)
			over = 1;
		r = r * base + d;
	}
	if (over)
		return -ERANGE;
	if (!any || s != end)
		return -EINVAL;
	*v = r;
	return 0;
}

/* What msr-safe 1.8 does with a write of text[0..len). */
static void msr_safe_model(size_t len)
{
	const char *s = text, *f, *end = text + len;
	int line = 1, i, pair_line[2] = { 0, 0 }, last_line = 0;
	__u64 v[2];

	memset(&m, 0, sizeof(m));
	if (len <= 2)
		return;
	if (len > MAX_TEXT) {
		m.err = E2BIG;
		return;
	}
	text[len] = 0;		/* msr-safe copies into a zeroed buffer */
	end = text + strlen(text);
	for (;;) {
		while (s < end && kspace(*s))
			line += *s++ == '\n';
		while (s < end && *s == '#') {
			__u64 a;
			const char *c = s + 1;

			while (c < end && kspace(*c) && *c != '\n')
				c++;
			f = c;
			while (c < end && !kspace(*c))
				c++;
			if (c > f && !kstrtoull0(f, c, &a) && m.nc < MAX_ENTRIES && a <= UINT32_MAX)
				m.commented[m.nc++] = a;
			while (s < end && *s != '\n')
				s++;
			while (s < end && kspace(*s))
				line += *s++ == '\n';
		}
		if (s == end)
			break;
		for (i = 0; i < 2; i++) {
			while (s < end && kspace(*s))
				line += *s++ == '\n';
			f = s;
			pair_line[i] = line;
			while (s < end && !kspace(*s))
				s++;
			if (s == end) {
				m.err = EILSEQ;
				return;
			}
			m.err = -kstrtoull0(f, s, &v[i]);
			if (m.err)
				return;
			line += *s++ == '\n';
		}
		if (m.n == MAX_ENTRIES) {
			m.err = ENOMEM;
			return;
		}
		if (!m.differs && pair_line[0] != pair_line[1]) {
			m.differs = EINVAL;
			m.why = "an entry over two lines";
		} else if (!m.differs && pair_line[0] == last_line) {
			m.differs = EINVAL;
			m.why = "two entries on one line";
		} else if (!m.differs && v[0] > UINT32_MAX) {
			m.differs = ERANGE;
			m.why = "an MSR above 32 bits";
		}
		last_line = pair_line[1];
		m.e[m.n++] = (struct entry){ v[0], v[1], pair_line[0] };
	}
	if (!m.n) {
		m.err = ENOMSG;
		return;
	}
	for (i = 0; i < m.n; i++)
		for (int j = 0; j < i; j++)
			if (m.e[i].msr == m.e[j].msr) {
				m.err = ENOTUNIQ;
				return;
			}
}

/* What msr-safe's read prints for the model's entries. */
static void msr_safe_print(char *out)
{
	out[0] = 0;
	if (!m.n)
		return;
	out += sprintf(out, "%-10s %-18s\n", "#MSR", "Write mask");
	for (int i = 0; i < m.n; i++)
		out += sprintf(out, "0x%08llX 0x%016llX\n", (unsigned long long)m.e[i].msr,
			       (unsigned long long)m.e[i].mask);
}

static int by_msr(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->msr < y->msr ? -1 : x->msr > y->msr;
}

/* /dev/msrbatch_allowlist's text holds exactly the model's entries. */
static int same_entries(const char *t)
{
	static struct entry got[MAX_ENTRIES], want[MAX_ENTRIES];
	unsigned long long a, b;
	int n = 0, i;

	for (const char *l = t; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		if (*l == '#' || !strncmp(l, "allow ", 6) || *l == '\n')
			continue;
		if (sscanf(l, "%llx %llx", &a, &b) != 2 || n == MAX_ENTRIES)
			return 0;
		got[n++] = (struct entry){ a, b, 0 };
	}
	if (n != m.n)
		return 0;
	memcpy(want, m.e, n * sizeof(*want));
	qsort(got, n, sizeof(*got), by_msr);
	qsort(want, n, sizeof(*want), by_msr);
	for (i = 0; i < n; i++)
		if (got[i].msr != want[i].msr || got[i].mask != want[i].mask)
			return 0;
	return 1;
}

static int listed(__u64 msr)
{
	for (int i = 0; i < m.n; i++)
		if (m.e[i].msr == msr)
			return 1;
	return 0;
}

/* An MSR the list does not name. */
static __u32 unlisted(void)
{
	__u32 u = 0x40000100;	/* the hypervisor range: no MSR of a CPU model */

	while (listed(u))
		u++;
	return u;
}

/*
 * /dev/msrbatch, as the member: op (a read, or a write of 0) of msr, with a
 * read of u after it. Wants the check to stop at want_index with want.
 */
static int mb_check(int fd, int write, __u32 msr, __u32 u, int want, unsigned int want_index)
{
	struct msrbatch_op ops[2];
	struct msrbatch_batch b = {
		.version = MSRBATCH_ABI_VERSION, .nr_ops = 2, .ops = (__u64)(uintptr_t)ops,
	};
	int r;

	memset(ops, 0, sizeof(ops));
	ops[0].op = write ? MSRBATCH_OP_WRMSR : MSRBATCH_OP_RDMSR;
	ops[0].reg = msr;
	ops[1].op = MSRBATCH_OP_RDMSR;
	ops[1].reg = u;
	r = ioctl(fd, MSRBATCH_IOC_BATCH, &b) ? errno : 0;
	if (r == want && b.err_index == want_index)
		return 1;
	ksft_print_msg("/dev/msrbatch: %s %#x then read %#x: errno %d at op %u, want %d at op %u\n",
		       write ? "write" : "read", msr, u, r, b.err_index, want, want_index);
	return 0;
}

/* The same through /dev/cpu/msr_batch: each op's own err, the wmask. */
static int ms_check(int fd, int write, __u32 msr, __u32 u, int want0, __u64 wmask)
{
	struct msr_batch_op ops[2];
	struct msr_batch_array a = { .numops = 2, .version = MSR_SAFE_VERSION_u32, .ops = ops };
	int r;

	memset(ops, 0, sizeof(ops));
	ops[0].isrdmsr = !write;
	ops[0].msr = msr;
	ops[1].isrdmsr = 1;
	ops[1].msr = u;
	r = ioctl(fd, X86_IOC_MSR_BATCH, &a) ? errno : 0;
	if (r == (want0 ? want0 : EACCES) && ops[0].err == -want0 && ops[1].err == -EACCES &&
	    (want0 == EACCES || ops[0].wmask == wmask))
		return 1;
	ksft_print_msg("/dev/cpu/msr_batch: %s %#x then read %#x: errno %d, err %d %d, wmask %#llx; want err %d, wmask %#llx\n",
		       write ? "write" : "read", msr, u, r, ops[0].err, ops[1].err,
		       (unsigned long long)ops[0].wmask, -want0, (unsigned long long)wmask);
	return 0;
}

/*
 * As uid 1000 in group 4242, no capabilities: every listed MSR, every MSR
 * the file lists commented out, one it does not name. Exit status: bit 0 a
 * wrong answer from /dev/msrbatch, bit 1 from /dev/cpu/msr_batch, 4 setup.
 */
static int member_checks(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int mb, ms, bad = 0, i;
		__u32 u = unlisted();

		if (setgroups(0, NULL) || setgid(GROUP) || setuid(USER))
			_exit(4);
		mb = open("/dev/msrbatch", O_RDWR);
		ms = open("/dev/cpu/msr_batch", O_RDWR);
		if (mb < 0 || ms < 0)
			_exit(4);
		for (i = 0; i < m.n; i++) {
			__u32 msr = m.e[i].msr;
			__u64 mask = m.e[i].mask;

			if (!mb_check(mb, 0, msr, u, EACCES, 1) ||
			    !mb_check(mb, 1, msr, u, mask ? EACCES : EROFS, mask ? 1 : 0))
				bad |= 1;
			if (!ms_check(ms, 0, msr, u, 0, mask) || !ms_check(ms, 1, msr, u, mask ? 0 : EROFS, mask))
				bad |= 2;
		}
		for (i = 0; i <= m.nc; i++) {
			__u32 msr = i < m.nc ? m.commented[i] : u;

			if (listed(msr))
				continue;
			if (!mb_check(mb, 0, msr, u, EACCES, 0))
				bad |= 1;
			if (!ms_check(ms, 0, msr, u, EACCES, 0))
				bad |= 2;
		}
		_exit(bad);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 4;
	return WEXITSTATUS(st);
}

static void one_node(const char *file, size_t len, const char *node)
{
	const char *name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	int want = m.err ? m.err : m.differs, r, st;
	ssize_t n;

	if (write_list(MS_NODE, before_text, strlen(before_text))) {
		ksft_test_result_fail("%s: load the list before\n", node);
		return;
	}
	r = -write_list(node, text, len);
	if (m.differs && !m.err)
		ksft_print_msg("%s: msr-safe takes it, msrbatch refuses %s (Documentation/msr-safe.md)\n",
			       name, m.why);
	ksft_test_result(r == want, "%s through %s: %s%s (errno %d, want %d)\n", name, node,
			 want ? "refused with " : "accepted", want ? strerror(want) : "", r, want);
	if (want) {
		n = read_all(MS_NODE, buf, sizeof(buf));
		ksft_test_result(n >= 0 && !strcmp(buf, before_print),
				 "%s through %s: nothing changed, the list before in force\n", name, node);
		return;
	}
	msr_safe_print(saved + sizeof(saved) / 2);
	n = read_all(MS_NODE, buf, sizeof(buf));
	ksft_test_result(n >= 0 && !strcmp(buf, saved + sizeof(saved) / 2),
			 "%s through %s: %s prints what msr-safe prints (%d entries, file order)\n",
			 name, node, MS_NODE, m.n);
	n = read_all(MB_NODE, buf, sizeof(buf));
	ksft_test_result(n >= 0 && same_entries(buf), "%s through %s: %s has the same entries\n",
			 name, node, MB_NODE);
	st = member_checks();
	ksft_test_result(!(st & 5), "%s through %s: the member's batches on /dev/msrbatch: exactly the listed MSRs and write masks\n",
			 name, node);
	ksft_test_result(!(st & 6), "%s through %s: the member's batches on /dev/cpu/msr_batch: exactly the listed MSRs, wmask the write masks\n",
			 name, node);
}

int main(int argc, char **argv)
{
	const char *nodes[] = { "/dev/msrbatch", "/dev/cpu/msr_batch" };
	struct stat sb[2];
	int i, fd;

	ksft_print_header();
	if (access("/dev/cpu/msr_batch", F_OK))
		ksft_exit_skip("no /dev/cpu/msr_batch: load msrbatch with msr_safe=1\n");
	if (argc < 2)
		ksft_exit_fail_msg("usage: msr_safe_lists_test FILE...\n");
	saved_len = read_all(MB_NODE, saved, sizeof(saved));
	for (i = 0; i < 2; i++) {
		stat(nodes[i], &sb[i]);
		if (chown(nodes[i], -1, GROUP) || chmod(nodes[i], 0660))
			ksft_exit_fail_msg("chgrp/chmod %s: %s\n", nodes[i], strerror(errno));
	}
	for (int a = 1; a < argc; a++) {
		ssize_t len = -1;

		fd = open(argv[a], O_RDONLY);
		if (fd >= 0) {
			len = read(fd, text, sizeof(text) - 1);
			close(fd);
		}
		if (len < 0) {
			ksft_test_result_fail("read %s: %s\n", argv[a], strerror(errno));
			continue;
		}
		msr_safe_model(len);
		ksft_print_msg("%s: %zd bytes, %d entries, %d commented out; msr-safe: %s\n", argv[a],
			       len, m.n, m.nc, m.err ? strerror(m.err) : "accepted");
		one_node(argv[a], len, MS_NODE);
		one_node(argv[a], len, MB_NODE);
	}
	for (i = 0; i < 2; i++)
		if (chown(nodes[i], -1, sb[i].st_gid) || chmod(nodes[i], sb[i].st_mode & 07777))
			ksft_print_msg("put back %s: %s\n", nodes[i], strerror(errno));
	ksft_test_result(saved_len >= 0 && write_list(MB_NODE, saved, saved_len) == 0,
			 "the allowlist in force before is back\n");
	ksft_set_plan(ksft_test_num());
	ksft_finished();
}
