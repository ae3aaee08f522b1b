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
 *   starve    group members flood CPU 1 with DELAY batches and collide
 *             synchronised batches on CPUs 0,1; meanwhile every op of root's
 *             batches on CPU 1 runs, root's synchronised batches start, and
 *             root's logged writes through a restoring descriptor run (the
 *             reserve of each CPU's busy credit that confined callers cannot
 *             draw, abi.md "Interrupts-off time")
 *   rendezvous a member's synchronised batch whose rendezvous waits for a
 *             CPU root keeps busy is charged for the wait: the member's next
 *             batch on the waiting CPU has only what the wait left of its
 *             credit (needs 4 CPUs; the bound of the wait: KUnit
 *             a_rendezvous_wait_is_charged)
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
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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
	load_list("\n");
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

/* ---- starve --------------------------------------------------------------- */

#define NR_DELAYERS 3
#define NR_SYNCERS 2

/* What the members did, counted in memory shared with root. */
struct attack {
	long delays_ran, delay_batches, syncs_ran, syncs_timedout;
};

static struct attack *attack;

/* A member: opens the node confined and sends batches until killed. */
static pid_t start_member(int sync)
{
	pid_t pid = fork();
	struct msrbatch_op ops[10];
	int fd, i, r;

	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (drop_to_user())
		_exit(2);
	fd = dev_open(O_RDONLY);
	if (fd < 0)
		_exit(3);
	for (;;) {
		if (sync) {
			/* 2 ms of DELAYs on each of CPUs 0 and 1, started together. */
			for (i = 0; i < 4; i++)
				ops[i] = mkop(MSRBATCH_OP_DELAY, i / 2, 0, 1000000, 0);
			r = batch(fd, ops, 4, MSRBATCH_F_SYNC_START, NULL);
			__atomic_add_fetch(r == -ETIMEDOUT ? &attack->syncs_timedout : &attack->syncs_ran, 1,
					   __ATOMIC_RELAXED);
		} else {
			/* Ten 1 ms DELAYs on CPU 1, again and again. */
			for (i = 0; i < 10; i++)
				ops[i] = mkop(MSRBATCH_OP_DELAY, 1, 0, 1000000, 0);
			batch(fd, ops, 10, 0, NULL);
			for (i = 0; i < 10; i++)
				if (ops[i].status == 0)
					__atomic_add_fetch(&attack->delays_ran, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&attack->delay_batches, 1, __ATOMIC_RELAXED);
		}
	}
}

/*
 * Root's synchronised reads on CPUs 0 and 1, fifty times: how many timed out,
 * how many ops got -ETIME, how many other errors.
 */
static void root_syncs(int root, int *timedout, int *etime, int *errors)
{
	struct msrbatch_op ops[2];
	int k, r;

	for (k = 0; k < 50; k++) {
		ops[0] = mkop(MSRBATCH_OP_RDMSR, 0, TSC_AUX, 0, 0);
		ops[1] = mkop(MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, 0);
		r = batch(root, ops, 2, MSRBATCH_F_SYNC_START, NULL);
		if (r == -ETIMEDOUT)
			(*timedout)++;
		else if (r)
			(*errors)++;
		else
			*etime += (ops[0].status == -ETIME) + (ops[1].status == -ETIME);
		sleep_ms(1);
	}
}

static void test_starve(void)
{
	pid_t members[NR_DELAYERS + NR_SYNCERS];
	struct msrbatch_op ops[8];
	int root, rfd, i, k, r;
	int ran_nothing = 0, some_etime = 0, etime_ops = 0, errors = 0;
	int timedout = 0, sync_etime = 0, sync_errors = 0;
	int base_timedout = 0, base_etime = 0, base_errors = 0;
	int eagain = 0, write_errors = 0, read_errors = 0, not_restored = 0;
	__u64 orig = 0, now = 0;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		ksft_test_result_skip("starve: needs 2 CPUs\n");
		return;
	}
	attack = mmap(NULL, sizeof(*attack), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (attack == MAP_FAILED) {
		ksft_test_result_fail("starve: mmap: %s\n", strerror(errno));
		return;
	}
	memset(attack, 0, sizeof(*attack));
	root = dev_open(O_RDONLY);
	load_list("\n");
	open_node();
	/*
	 * Under TCG a synchronised start also times out when the host does not
	 * run one of the vCPUs for 20 ms: the same fifty batches before the
	 * attack say how often that happens in this boot.
	 */
	root_syncs(root, &base_timedout, &base_etime, &base_errors);
	for (i = 0; i < NR_DELAYERS + NR_SYNCERS; i++)
		members[i] = start_member(i >= NR_DELAYERS);
	/* Let the attack drain what it can. */
	sleep_ms(300);

	/* Root's monitoring: 8 MSR reads on CPU 1, a hundred times. */
	for (k = 0; k < 100; k++) {
		int n = 0;

		for (i = 0; i < 8; i++)
			ops[i] = mkop(MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, 0);
		r = batch(root, ops, 8, 0, NULL);
		if (r) {
			errors++;
			continue;
		}
		for (i = 0; i < 8; i++)
			n += ops[i].status == -ETIME;
		etime_ops += n;
		some_etime += n > 0;
		ran_nothing += n == 8;
		sleep_ms(1);
	}
	/* Root's synchronised reads on CPUs 0 and 1, fifty times. */
	root_syncs(root, &timedout, &sync_etime, &sync_errors);
	/* Root's logged writes: each reads TSC_AUX of CPU 1 first (the log). */
	rfd = open_restoring();
	for (k = 0; k < 5; k++) {
		if (one_op(root, MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, &orig)) {
			read_errors++;
			continue;
		}
		r = one_op(rfd, MSRBATCH_OP_WRMSR, 1, TSC_AUX, orig ^ 5, NULL);
		if (r == -EAGAIN)
			eagain++;
		else if (r)
			write_errors++;
		if (restore_now(rfd) != 0)
			not_restored++;
		else if (one_op(root, MSRBATCH_OP_RDMSR, 1, TSC_AUX, 0, &now))
			read_errors++;
		else if (now != orig)
			not_restored++;
	}
	close(rfd);

	for (i = 0; i < NR_DELAYERS + NR_SYNCERS; i++)
		kill(members[i], SIGKILL);
	for (i = 0; i < NR_DELAYERS + NR_SYNCERS; i++)
		waitpid(members[i], NULL, 0);
	close_node();
	close(root);

	ksft_test_result(attack->delays_ran > 0 && attack->syncs_ran + attack->syncs_timedout > 0,
			 "%d members flood CPU 1 with 10 ms DELAY batches, %d collide synchronised batches on CPUs 0,1 "
			 "(%ld of %ld DELAYs ran; %ld synchronised batches ran, %ld ETIMEDOUT)\n",
			 NR_DELAYERS, NR_SYNCERS, attack->delays_ran, attack->delay_batches * 10, attack->syncs_ran,
			 attack->syncs_timedout);
	ksft_test_result(errors == 0 && etime_ops == 0,
			 "meanwhile root's 100 batches of 8 RDMSR on CPU 1 run every op (%d ran nothing, %d some ops "
			 "-ETIME, %d ops -ETIME, %d errors)\n",
			 ran_nothing, some_etime, etime_ops, errors);
	ksft_test_result(timedout <= base_timedout + 5 && sync_errors == 0 && sync_etime == 0 &&
				 base_errors == 0 && base_etime == 0,
			 "meanwhile root's 50 synchronised batches on CPUs 0,1 start and run as often as with no attack, "
			 "give or take 5 (%d ETIMEDOUT, before the attack %d; %d ops -ETIME, %d other errors)\n",
			 timedout, base_timedout, sync_etime, sync_errors);
	ksft_test_result(eagain == 0 && write_errors == 0 && read_errors == 0 && not_restored == 0,
			 "meanwhile root's 5 logged writes to CPU 1 through a restoring descriptor run and are restored "
			 "(%d EAGAIN, %d other errors, %d not restored, %d of root's reads around them failed)\n",
			 eagain, write_errors, not_restored, read_errors);
	munmap(attack, sizeof(*attack));
}

/* ---- rendezvous ------------------------------------------------------------- */

#define TRIALS 20
#define HOLD_MS 10	/* root keeps CPU 1 busy this long (10 DELAYs) */
#define AFTER 4		/* the member's 1 ms DELAYs on CPU 0 after the rendezvous
			 * (a confined share with full credit: 5 ms) */

struct rv_result {
	int sync_r;	/* the synchronised batch: 0 or -errno */
	int after_etime;	/* -ETIME ops of the next batch on CPU 0 */
	long issued;	/* CLOCK_MONOTONIC (µs) just before the synchronised batch */
	long gap;	/* µs from its return to the next batch (the credit refills
			 * a fifth of the time that passes) */
};

/* CLOCK_MONOTONIC in µs: the one clock all CPUs agree on (the TSCs of a
 * TCG guest's vCPUs differ). */
static long mono_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

/* Root's trial number, which the member polls (a pipe's wakeup is too slow). */
static int *rv_trial;
static long *rv_issued;	/* when root issued its share (CLOCK_MONOTONIC, µs) */

static void rendezvous_member(int wfd)
{
	struct msrbatch_op ops[AFTER];
	struct rv_result res;
	int fd, i, seen = 0;
	long t0;

	fd = dev_open(O_RDONLY);
	if (fd < 0)
		_exit(3);
	for (;;) {
		while (__atomic_load_n(rv_trial, __ATOMIC_ACQUIRE) == seen)
			;
		seen = __atomic_load_n(rv_trial, __ATOMIC_ACQUIRE);
		if (seen < 0)
			_exit(0);
		/* Root starts its share on CPU 1 now: arrive 2 ms into it. */
		t0 = mono_us();
		while (mono_us() - t0 < 2000)
			;
		memset(&res, 0, sizeof(res));
		ops[0] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
		ops[1] = mkop(MSRBATCH_OP_RDTSC, 1, 0, 0, 0);
		res.issued = mono_us();
		res.sync_r = batch(fd, ops, 2, MSRBATCH_F_SYNC_START, NULL);
		t0 = mono_us();
		for (i = 0; i < AFTER; i++)
			ops[i] = mkop(MSRBATCH_OP_DELAY, 0, 0, 1000000, 0);
		res.gap = mono_us() - t0;
		batch(fd, ops, AFTER, 0, NULL);
		for (i = 0; i < AFTER; i++)
			res.after_etime += ops[i].status == -ETIME;
		if (write(wfd, &res, sizeof(res)) != sizeof(res))
			_exit(1);
	}
}

/* Parts named on the command line (not all parts by default). */
static int named;

static void test_rendezvous(void)
{
	struct msrbatch_op ops[HOLD_MS];
	struct rv_result res;
	int root, back[2], i, k, r;
	int charged = 0, ran = 0, timedout = 0, waited = 0, waited_charged = 0;
	pid_t pid;

	if (!named) {
		/*
		 * Two boots of the debug guest on a loaded host: 3 of 8 and 7
		 * of 12 such trials charged; members arrived 3 to 24 ms late.
		 */
		ksft_test_result_skip("rendezvous: run only when named (fairshare_test rendezvous): whether a member's "
				      "rendezvous waits for root's share depends on when the host runs each vCPU; "
				      "make check has the charge's bound in KUnit a_rendezvous_wait_is_charged\n");
		return;
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 4) {
		ksft_test_result_skip("rendezvous: needs 4 CPUs\n");
		return;
	}
	root = dev_open(O_RDONLY);
	load_list("\n");
	open_node();
	rv_trial = mmap(NULL, 2 * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rv_trial == MAP_FAILED || pipe(back)) {
		ksft_test_result_fail("rendezvous: mmap or pipe: %s\n", strerror(errno));
		return;
	}
	*rv_trial = 0;
	rv_issued = (long *)rv_trial + 1;
	pid = fork();
	if (pid == 0) {
		close(back[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin(3);
		if (drop_to_user())
			_exit(2);
		rendezvous_member(back[1]);
	}
	close(back[1]);
	pin(2);
	for (k = 0; k < TRIALS; k++) {
		/* Every credit full again (80 ms refill it from empty). */
		sleep_ms(150);
		for (i = 0; i < HOLD_MS; i++)
			ops[i] = mkop(MSRBATCH_OP_DELAY, 1, 0, 1000000, 0);
		*rv_issued = mono_us();
		__atomic_store_n(rv_trial, k + 1, __ATOMIC_RELEASE);
		r = batch(root, ops, HOLD_MS, 0, NULL);
		if (read(back[0], &res, sizeof(res)) != sizeof(res))
			break;
		/* Whether the member's rendezvous waited while root's share ran
		 * depends on when each vCPU ran: the kernel's answer is in the
		 * member's next batch on CPU 0. */
		timedout += res.sync_r == -ETIMEDOUT;
		ran += res.sync_r == 0;
		charged += res.after_etime >= AFTER / 2;
		/*
		 * A rendezvous that timed out waited its whole share; if the
		 * next batch followed within 2 ms, the credit refilled by at
		 * most 0.4 ms since. (A host that does not run the member for
		 * longer refills it, and the trial says nothing.)
		 */
		if (res.sync_r == -ETIMEDOUT && res.gap < 2000) {
			waited++;
			waited_charged += res.after_etime >= AFTER / 2;
		}
		ksft_print_msg("trial %d: root's share %d; member's synchronised batch %d, issued %ld us after root's; "
			       "its next %d ms of DELAYs on CPU 0, %ld us later: %d -ETIME\n",
			       k, r, res.sync_r, res.issued - *rv_issued, AFTER, res.gap, res.after_etime);
	}
	__atomic_store_n(rv_trial, -1, __ATOMIC_RELEASE);
	close(back[0]);
	waitpid(pid, NULL, 0);
	munmap(rv_trial, 2 * sizeof(long));
	unpin(sysconf(_SC_NPROCESSORS_ONLN));
	close_node();
	close(root);
	/* Not charged, the wait would leave CPU 0's credit full: 4 ms of
	 * DELAYs run whole in the 5 ms (20 ms before #30) a full credit
	 * gives. A host that stops a vCPU can cost a trial some DELAYs. */
	if (waited < 3) {
		ksft_test_result_skip("rendezvous: only %d of %d trials had a member's rendezvous that waited its whole "
				      "share followed within 2 ms by its next batch (the host did not run the vCPUs in "
				      "time; the bound of the wait: KUnit a_rendezvous_wait_is_charged)\n",
				      waited, TRIALS);
		return;
	}
	ksft_test_result(waited_charged * 2 >= waited,
			 "a member's synchronised batch on CPUs 0,1 that waits for CPU 1 (root's %d ms share) is charged "
			 "for the wait: its next %d ms of DELAYs on CPU 0 lose half or more to -ETIME (%d of the %d trials "
			 "whose rendezvous waited its whole share and whose next batch followed within 2 ms; %d of all %d; "
			 "the synchronised batches: %d ran, %d ETIMEDOUT)\n",
			 HOLD_MS, AFTER, waited_charged, waited, charged, TRIALS, ran, timedout);
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "stamps", test_stamps },
		{ "prepared", test_prepared },
		{ "starve", test_starve },
		{ "rendezvous", test_rendezvous },
	};

	ksft_print_header();
	named = argc > 1;
	run_parts(parts, ARRAY_SIZE(parts), argc, argv);
	tests_done();
}
