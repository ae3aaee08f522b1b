// SPDX-License-Identifier: GPL-2.0
/*
 * What a descriptor opened without CAP_SYS_RAWIO (an allowlist-confined
 * group member) may hold and do, against the limits of
 * Documentation/security.md ("Limits of a confined descriptor", #30):
 *
 *   fairshare_test [PART...]
 *
 * PARTs (default: all, in this order):
 *   stamps    a confined masked WRMSR with MSRBATCH_F_TIMESTAMPS runs as
 *             root's does (it was EINVAL: re-planned as an RMWMSR)
 *   prepared  a confined descriptor holds at most 16 prepared batches
 *             (ENOSPC) and 1 MiB of them (EDQUOT); all confined descriptors
 *             together 64 MiB (ENOSPC); root still prepares meanwhile
 *
 * Each part's confined side runs in a child as uid 1000, gid 4242, with no
 * capabilities; root (the parent) loads the allowlist and opens the node to
 * the child, and puts back the list, the node's mode and any MSR written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u
#define MAX_PREPARED_CONFINED 16
#define MAX_PREPARED_BYTES_CONFINED (1u << 20)
#define MAX_PREPARED_BYTES_ALL_CONFINED (64u << 20)

/* ---- stamps --------------------------------------------------------------- */

struct stamps_result {
	int opened, r, status;
	__u64 val0, val1;
};

static void stamps_child(int wfd)
{
	struct stamps_result res = { 0 };
	struct msrbatch_op op = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, 0xabcde000, 0);
	int fd = dev_open(O_RDWR);

	res.opened = fd >= 0;
	res.r = batch(fd, &op, 1, MSRBATCH_F_TIMESTAMPS, NULL);
	res.status = op.status;
	res.val0 = op.val[0];
	res.val1 = op.val[1];
	if (write(wfd, &res, sizeof(res)) != sizeof(res))
		_exit(1);
}

static void test_stamps(void)
{
	struct stamps_result res;
	struct msrbatch_op op;
	int root = dev_open(O_RDWR), r;
	__u64 orig, now;

	op = mkop(MSRBATCH_OP_RDMSR, 0, TSC_AUX, 0, 0);
	r = batch(root, &op, 1, 0, NULL);
	orig = op.val[0];
	ksft_test_result(r == 0 && op.status == 0, "root reads CPU 0's TSC_AUX (0x%llx)\n", (unsigned long long)orig);
	/* Root's WRMSR with timestamps: the reference. */
	op = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, orig, 0);
	r = batch(root, &op, 1, MSRBATCH_F_TIMESTAMPS, NULL);
	ksft_test_result(r == 0 && op.status == 0 && op.val[0] == 0 && op.val[1] != 0,
			 "root: WRMSR with MSRBATCH_F_TIMESTAMPS runs, val[0] 0, val[1] the stamp (%d, %d, 0x%llx, 0x%llx)\n", r,
			 op.status, (unsigned long long)op.val[0], (unsigned long long)op.val[1]);
	/* TSC_AUX bits 31:12 writable by the group. */
	ksft_test_result(load_list("0xc0000103 0x00000000fffff000\n") == 0, "root loads a list with TSC_AUX, mask 0xfffff000\n");
	open_node();
	r = as_user(stamps_child, &res, sizeof(res));
	close_node();
	ksft_test_result(r == 0 && res.opened, "uid 1000, no capabilities, opens /dev/msrbatch O_RDWR (confined)\n");
	ksft_test_result(res.r == 0 && res.status == 0 && res.val0 == 0 && res.val1 != 0,
			 "confined: a masked WRMSR with MSRBATCH_F_TIMESTAMPS runs as root's, val[0] 0, val[1] the stamp "
			 "(%d, %d, 0x%llx, 0x%llx)\n",
			 res.r, res.status, (unsigned long long)res.val0, (unsigned long long)res.val1);
	op = mkop(MSRBATCH_OP_RDMSR, 0, TSC_AUX, 0, 0);
	batch(root, &op, 1, 0, NULL);
	now = op.val[0];
	ksft_test_result(res.r != 0 || now == ((orig & ~0xfffff000ull) | 0xabcde000),
			 "... and wrote only the mask's bits (0x%llx -> 0x%llx)\n", (unsigned long long)orig,
			 (unsigned long long)now);
	op = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, orig, 0);
	r = batch(root, &op, 1, 0, NULL);
	ksft_test_result(r == 0 && op.status == 0, "(TSC_AUX of CPU 0 put back: 0x%llx)\n", (unsigned long long)orig);
	load_list("# empty\n");
	close(root);
}

/* ---- prepared ------------------------------------------------------------- */

/* One-op batches, and batches of BIG ops: BIG * 48 bytes of ops plus BIG * 24
 * of results (whole pages) = 288 KiB, 3 of which fit in 1 MiB. */
#define BIG 4096u

struct prepared_result {
	int opened;
	int small;		/* one-op batches prepared before the refusal */
	int small_err;
	int after_unprepare;	/* a prepare after one UNPREPARE */
	int big;		/* BIG-op batches on a fresh descriptor */
	int big_err;
	int descs, fds_big;	/* descriptors and batches until the system-wide refusal */
	int all_err;
};

static struct msrbatch_op *big_ops(void)
{
	static struct msrbatch_op *ops;
	unsigned int i;

	if (!ops) {
		ops = calloc(BIG, sizeof(*ops));
		for (i = 0; ops && i < BIG; i++)
			ops[i] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	}
	return ops;
}

static int rfd_go = -1;

static void prepared_child(int wfd)
{
	struct prepared_result res;
	struct msrbatch_op one = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	static int fds[200];
	int fd, h, i, n;

	memset(&res, 0, sizeof(res));
	fd = dev_open(O_RDONLY);
	res.opened = fd >= 0;
	for (n = 0; n < MSRBATCH_MAX_PREPARED + 1; n++) {
		h = prepare(fd, &one, 1, NULL);
		if (h < 0) {
			res.small_err = h;
			break;
		}
	}
	res.small = n;
	ioctl(fd, MSRBATCH_IOC_UNPREPARE, 0);
	res.after_unprepare = prepare(fd, &one, 1, NULL);
	close(fd);

	fd = dev_open(O_RDONLY);
	for (n = 0; n < MSRBATCH_MAX_PREPARED; n++) {
		h = prepare(fd, big_ops(), BIG, NULL);
		if (h < 0) {
			res.big_err = h;
			break;
		}
	}
	res.big = n;
	close(fd);

	/* Many descriptors, 3 big batches each, until the system-wide limit. */
	res.all_err = 0;
	for (i = 0; i < 200 && !res.all_err; i++) {
		fds[i] = dev_open(O_RDONLY);
		if (fds[i] < 0) {
			res.all_err = -errno;
			break;
		}
		res.descs++;
		for (n = 0; n < 3; n++) {
			h = prepare(fds[i], big_ops(), BIG, NULL);
			if (h < 0) {
				res.all_err = h;
				break;
			}
			res.fds_big++;
		}
	}
	/* Tell root, then hold everything until it has tried its own (it
	 * closes the pipe); exiting closes the descriptors. */
	if (write(wfd, &res, sizeof(res)) != sizeof(res))
		_exit(1);
	while (read(rfd_go, &res, 1) > 0)
		;
}

static void test_prepared(void)
{
	struct prepared_result res;
	int p[2], go[2], st, root, h = 0, n;
	pid_t pid;

	open_node();
	if (pipe(p) || pipe(go))
		return;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		close(go[1]);
		rfd_go = go[0];
		if (drop_to_user())
			_exit(2);
		prepared_child(p[1]);
		_exit(0);
	}
	close(p[1]);
	close(go[0]);
	memset(&res, 0, sizeof(res));
	n = read(p[0], &res, sizeof(res)) == sizeof(res);
	ksft_test_result(n && res.opened, "uid 1000, no capabilities, opens /dev/msrbatch (confined)\n");
	ksft_test_result(res.small == MAX_PREPARED_CONFINED && res.small_err == -ENOSPC,
			 "confined: %d one-op prepared batches, then ENOSPC (%d, %d)\n", MAX_PREPARED_CONFINED, res.small,
			 res.small_err);
	ksft_test_result(res.after_unprepare >= 0, "confined: after an UNPREPARE there is room for one more (%d)\n",
			 res.after_unprepare);
	ksft_test_result(res.big == 3 && res.big_err == -EDQUOT,
			 "confined: %u-op batches (288 KiB each): 3 fit in %u KiB, the 4th is EDQUOT (%d, %d)\n", BIG,
			 MAX_PREPARED_BYTES_CONFINED >> 10, res.big, res.big_err);
	/* 3 * 288 KiB = 864 KiB per descriptor: the 64 MiB fill in the 76th. */
	ksft_test_result(res.all_err == -ENOSPC && res.fds_big == (int)(MAX_PREPARED_BYTES_ALL_CONFINED / (288u << 10)),
			 "all confined descriptors: %u MiB of prepared batches, then ENOSPC (%d descriptors, %d batches, %d)\n",
			 MAX_PREPARED_BYTES_ALL_CONFINED >> 20, res.descs, res.fds_big, res.all_err);
	root = dev_open(O_RDONLY);
	for (n = 0; n < 8; n++) {
		h = prepare(root, big_ops(), BIG, NULL);
		if (h < 0)
			break;
	}
	ksft_test_result(n == 8, "meanwhile root (CAP_SYS_RAWIO) prepares 8 more such batches (%d, %d)\n", n, h);
	close(root);
	close(go[1]);
	close(p[0]);
	waitpid(pid, &st, 0);
	close_node();
	/* The child's descriptors are closed: confined descriptors have their room again. */
	open_node();
	pid = fork();
	if (pid == 0) {
		int fd;

		if (drop_to_user())
			_exit(2);
		fd = dev_open(O_RDONLY);
		_exit(prepare(fd, big_ops(), BIG, NULL) >= 0 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	close_node();
	ksft_test_result(WIFEXITED(st) && WEXITSTATUS(st) == 0, "after the confined descriptors closed, their room is back\n");
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "stamps", test_stamps },
		{ "prepared", test_prepared },
	};

	ksft_print_header();
	run_parts(parts, ARRAY_SIZE(parts), argc, argv);
	tests_done();
}
