// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel memory a group member causes is charged to its memory cgroup
 * (Documentation/security.md, "Limits of a confined descriptor"): in a
 * cgroup v2 group with memory.max 8 MiB, uid 1000 (an allowlist-confined
 * descriptor) prepares batches on many descriptors, or opens the allowlist
 * node again and again under a 9000-entry list, and runs into the group's
 * limit (ENOMEM, or the group's OOM killer) instead of growing kernel memory
 * that nothing accounts; memory.current grows by what it prepared. Needs
 * CONFIG_MEMCG: the harness kernels lack it (skipped there), Debian's have
 * it (make check's stock kernel boots).
 *
 *   memcg_test [PART...]   (prepare allowlist; default: both)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testlib.h"

#define CG "/sys/fs/cgroup"
#define GROUP CG "/msrbatch-memcg"
#define LIMIT (8 << 20)

static int have_memcg;

static long long cg_read(const char *file, const char *key)
{
	char path[128], line[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), GROUP "/%s", file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(key);

		if (!key[0]) {
			v = atoll(line);
			break;
		}
		if (!strncmp(line, key, n) && line[n] == ' ') {
			v = atoll(line + n + 1);
			break;
		}
	}
	fclose(f);
	return v;
}

/* A fresh group of LIMIT bytes; 0 if it could be made. */
static int group_make(void)
{
	char max[32];

	rmdir(GROUP);
	if (mkdir(GROUP, 0755) && errno != EEXIST)
		return -1;
	snprintf(max, sizeof(max), "%d", LIMIT);
	return file_write(GROUP "/memory.max", max);
}

/* What a child in the group reports. */
struct report {
	int entered, fds, prepared, first_err;
	long long bytes, current_before, current_after;
};

static int report_fd = -1;

/* The child's report so far (it may be OOM-killed before the next). */
static void send_report(const struct report *r)
{
	if (write(report_fd, r, sizeof(*r)) != sizeof(*r))
		_exit(1);
}

/*
 * Forks a child that joins the group, drops to uid 1000 and runs @fn; the
 * parent gets its last report and its status.
 */
static int in_group(void (*fn)(struct report *), struct report *rep)
{
	struct report got;
	int p[2], st = 0;
	pid_t pid;

	memset(rep, 0, sizeof(*rep));
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct rlimit lim = { 4096, 4096 };

		close(p[0]);
		report_fd = p[1];
		setrlimit(RLIMIT_NOFILE, &lim);
		rep->entered = !file_write(GROUP "/cgroup.procs", "0") &&
			       !setgroups(0, NULL) && !setgid(1000) && !setuid(1000);
		send_report(rep);
		if (rep->entered)
			fn(rep);
		/* Reported before the descriptors go (and their memory with them). */
		send_report(rep);
		_exit(0);
	}
	close(p[1]);
	while (read(p[0], &got, sizeof(got)) == sizeof(got))
		*rep = got;
	close(p[0]);
	waitpid(pid, &st, 0);
	return st;
}

/* 4096 RDTSCs on CPU 0: 192 KiB of ops, 96 KiB of results. */
static int prepare_big(int fd)
{
	static struct msrbatch_op ops[4096];
	unsigned int i;

	for (i = 0; i < 4096; i++)
		ops[i] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	return prepare(fd, ops, 4096, NULL);
}

#define BIG_BYTES (4096 * (48 + 24))

/* 4 descriptors with 3 big batches each (3.4 MiB), then more until refused. */
static void prepare_child(struct report *r)
{
	int fd, i, h;

	r->current_before = cg_read("memory.current", "");
	for (r->fds = 0; r->fds < 4; r->fds++) {
		fd = dev_open(O_RDONLY);
		for (i = 0; fd >= 0 && i < 3; i++)
			if (prepare_big(fd) >= 0)
				r->prepared++;
	}
	r->bytes = (long long)r->prepared * BIG_BYTES;
	r->current_after = cg_read("memory.current", "");
	send_report(r);
	while (r->fds < 400) {
		fd = open("/dev/msrbatch", O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r->first_err = errno;
			return;
		}
		r->fds++;
		for (i = 0; i < 3; i++) {
			h = prepare_big(fd);
			if (h < 0) {
				r->first_err = -h;
				return;
			}
			r->prepared++;
		}
	}
}

static void test_prepare(void)
{
	struct report r;
	long long events, peak;
	int st;

	if (!have_memcg) {
		ksft_test_result_skip("prepare: no memory controller (CONFIG_MEMCG)\n");
		return;
	}
	if (group_make()) {
		ksft_test_result_fail("cannot make a group with memory.max %d\n", LIMIT);
		return;
	}
	chmod("/dev/msrbatch", 0666);
	st = in_group(prepare_child, &r);
	chmod("/dev/msrbatch", 0600);
	events = cg_read("memory.events", "max");
	peak = cg_read("memory.peak", "");
	printf("# uid 1000 in a group of %d bytes: %d descriptors, %d batches of %d bytes, first error %d (%s), "
	       "status 0x%x; memory.events max %lld oom_kill %lld, peak %lld\n", LIMIT, r.fds, r.prepared, BIG_BYTES,
	       r.first_err, strerror(r.first_err), st, events, cg_read("memory.events", "oom_kill"), peak);
	ksft_test_result(r.entered && r.prepared >= 12, "uid 1000 joins the group and prepares 12 batches (%d)\n",
			 r.prepared);
	ksft_test_result(r.current_after - r.current_before >= 12LL * BIG_BYTES &&
			 r.current_after - r.current_before < 12LL * BIG_BYTES + (2 << 20),
			 "memory.current grows by what they hold: %lld bytes for %lld prepared\n",
			 r.current_after - r.current_before, 12LL * BIG_BYTES);
	ksft_test_result((r.first_err == ENOMEM || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) && events > 0,
			 "more descriptors and batches hit the group's limit: ENOMEM or its OOM kill, memory.events max %lld\n",
			 events);
	/* A task the group's OOM killer picked may exceed it a little while it dies. */
	ksft_test_result(peak > 0 && peak <= LIMIT + (1 << 20),
			 "and the group never held more than its limit, give or take a dying task's last charges "
			 "(peak %lld)\n", peak);
	rmdir(GROUP);
}

/* Opens the allowlist node until refused, holding every descriptor. */
static void allowlist_child(struct report *r)
{
	for (r->fds = 0; r->fds < 4000; r->fds++) {
		if (open("/dev/msrbatch_allowlist", O_RDONLY | O_CLOEXEC) < 0) {
			r->first_err = errno;
			return;
		}
		send_report(r);	/* how far it got, should the OOM killer end it */
	}
}

static void test_allowlist(void)
{
	static char text[131072];
	size_t n = 0;
	struct report r;
	long long events;
	int i, st;

	if (!have_memcg) {
		ksft_test_result_skip("allowlist: no memory controller (CONFIG_MEMCG)\n");
		return;
	}
	/* 9000 entries: each open renders about 120 KiB of text. */
	for (i = 0; i < 9000; i++)
		n += snprintf(text + n, sizeof(text) - n, "0x%x 0\n", 0x40000000 + i);
	if (file_write("/dev/msrbatch_allowlist", text) || group_make()) {
		ksft_test_result_fail("cannot load a 9000-entry allowlist or make the group\n");
		return;
	}
	chmod("/dev/msrbatch_allowlist", 0644);
	st = in_group(allowlist_child, &r);
	chmod("/dev/msrbatch_allowlist", 0600);
	file_write("/dev/msrbatch_allowlist", "\n");
	events = cg_read("memory.events", "max");
	printf("# uid 1000 opened the allowlist node %d times: first error %d (%s), status 0x%x, memory.events max %lld\n",
	       r.fds, r.first_err, strerror(r.first_err), st, events);
	ksft_test_result(r.entered && r.fds > 0 && r.fds < 4000 && (r.first_err == ENOMEM || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) &&
			 events > 0,
			 "opening the allowlist node again and again hits the group's limit (%d opens)\n", r.fds);
	rmdir(GROUP);
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "prepare", test_prepare },
		{ "allowlist", test_allowlist },
	};
	char ctl[256] = "";
	int fd;

	ksft_print_header();
	mkdir(CG, 0755);
	mount("none", CG, "cgroup2", 0, NULL);
	fd = open(CG "/cgroup.controllers", O_RDONLY);
	if (fd >= 0 && read(fd, ctl, sizeof(ctl) - 1) > 0)
		have_memcg = strstr(ctl, "memory") != NULL;
	if (fd >= 0)
		close(fd);
	if (have_memcg && file_write(CG "/cgroup.subtree_control", "+memory"))
		ksft_print_msg("cannot enable the memory controller for the groups\n");
	run_parts(parts, ARRAY_SIZE(parts), argc, argv);
	tests_done();
}
