// SPDX-License-Identifier: GPL-2.0
/*
 * Restore on close (MSRBATCH_IOC_RESTORE_ON_CLOSE / RESTORE_NOW): MSRs a file
 * wrote are put back when it is closed, when its process is killed (between
 * and during batches), and on RESTORE_NOW; an offline CPU is reported; a
 * file shared with other processes (fork(), SCM_RIGHTS) is restored when
 * its owner dies, and refuses later writes.
 *
 *   restore_test [PART...]   (close now kill offline shared; default: all)
 * Uses IA32_TSC_AUX, which QEMU models and Linux only reads for getcpu().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/msrbatch.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u

static int ncpus, ctl;
static __u64 orig[64];

/* Writes value + cpu to TSC_AUX of every CPU (or reads into out[]). */
static int all_aux(int fd, int write, __u64 value, __u64 *out)
{
	struct msrbatch_op ops[64];
	int i, r;

	memset(ops, 0, sizeof(ops));
	for (i = 0; i < ncpus; i++) {
		ops[i].op = write ? MSRBATCH_OP_WRMSR : MSRBATCH_OP_RDMSR;
		ops[i].cpu = i;
		ops[i].reg = TSC_AUX;
		ops[i].arg[0] = write ? value + i : 0;
	}
	r = batch(fd, ops, ncpus, 0, NULL);
	for (i = 0; out && i < ncpus; i++)
		out[i] = ops[i].val[0];
	return r;
}

/* 1 if every CPU's TSC_AUX is what it was at the start. */
static int restored(void)
{
	__u64 now[64];
	int i;

	if (all_aux(ctl, 0, 0, now))
		return 0;
	for (i = 0; i < ncpus; i++)
		if (now[i] != orig[i])
			return 0;
	return 1;
}

/* Writes every CPU's first value back to TSC_AUX through the test's own descriptor. */
static void put_back(void)
{
	struct msrbatch_op ops[64];
	int i;

	memset(ops, 0, sizeof(ops));
	for (i = 0; i < ncpus; i++) {
		ops[i].op = MSRBATCH_OP_WRMSR;
		ops[i].cpu = i;
		ops[i].reg = TSC_AUX;
		ops[i].arg[0] = orig[i];
	}
	batch(ctl, ops, ncpus, 0, NULL);
}

static void test_close(void)
{
	int fd = open_restoring(), ro = dev_open(O_RDONLY);

	ksft_test_result(ioctl(ro, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0) == -1 && errno == EBADF,
			 "a read-only descriptor cannot ask for restore (EBADF)\n");
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 1) == -1 && errno == EINVAL, "argument not 0: EINVAL\n");
	close(ro);
	all_aux(fd, 1, 0x500, NULL);
	all_aux(fd, 1, 0x600, NULL);	/* the second write must not be what is restored */
	ksft_test_result(!restored(), "written: TSC_AUX changed on every CPU\n");
	close(fd);
	ksft_test_result(restored(), "close: TSC_AUX back to its first value on every CPU\n");
}

static void test_restore_now(void)
{
	int fd = open_restoring(), r;

	all_aux(fd, 1, 0x700, NULL);
	r = restore_now(fd);
	ksft_test_result(r == 0 && restored(), "RESTORE_NOW puts everything back and returns 0 failures\n");
	all_aux(ctl, 1, 0x800, NULL);	/* another file's write: not ours to undo */
	close(fd);
	ksft_test_result(!restored(), "after RESTORE_NOW the log is empty: close undoes nothing another file did\n");
	put_back();
	ksft_test_result(restored(), "(TSC_AUX put back by hand)\n");
}

/* A child writes in a loop; SIGKILL lands between or during batches. */
static void test_kill(int rounds)
{
	int i, good = 0;

	for (i = 0; i < rounds; i++) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			int fd = open_restoring();
			__u64 v = 0x1000;

			for (;;)
				all_aux(fd, 1, v += 0x10, NULL);
		}
		usleep(2000 + (i % 7) * 1500);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		good += WIFSIGNALED(status) && restored();
	}
	ksft_test_result(good == rounds, "SIGKILL of a process writing in a loop: restored every time (%d of %d)\n", good, rounds);
}

static void test_offline(void)
{
	int fd = open_restoring(), cpu = ncpus - 1, kmsg, found = 0;
	char rec[512], needle[64];
	ssize_t n;

	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	lseek(kmsg, 0, SEEK_END);
	all_aux(fd, 1, 0x900, NULL);
	if (cpu < 1 || cpu_set_online(cpu, 0)) {
		ksft_test_result_skip("offline CPU at close: cannot take CPU %d offline\n", cpu);
		close(fd);
		return;
	}
	close(fd);
	snprintf(needle, sizeof(needle), "CPU %d", cpu);
	while ((n = read(kmsg, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE))
		if (n > 0) {
			rec[n] = 0;
			found |= strstr(rec, "restore") && strstr(rec, needle);
		}
	cpu_set_online(cpu, 1);
	orig[cpu] = 0;	/* the kernel sets it again when the CPU comes up */
	{
		__u64 now[64];

		all_aux(ctl, 0, 0, now);
		orig[cpu] = now[cpu];
	}
	ksft_test_result(found && restored(), "close with CPU %d offline: the others restored, CPU %d reported in the log\n",
			 cpu, cpu);
	close(kmsg);
}

static void test_kill10(void)
{
	test_kill(10);
}

/* Writes @value + cpu to TSC_AUX of every CPU through @fd; -errno of the batch. */
static int write_aux(int fd, __u64 value)
{
	return all_aux(fd, 1, value, NULL) < 0 ? -errno : 0;
}

/* What a later holder of a restoring file saw, reported to the test. */
struct holder_report {
	int got_fd, write_after, restore_now, ask_again;
};

/*
 * A later holder of the restoring file @fd (inherited or taken): tells the
 * test it has it (on @rep), waits until the test says the owner is gone (on
 * @go), tries what it may still do, reports, and waits to be told to close.
 */
static void holder(int fd, int rep_fd, int go_fd)
{
	struct holder_report rep = { .got_fd = fd >= 0 };
	char c;

	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep) || read(go_fd, &c, 1) != 1)
		_exit(1);
	rep.write_after = write_aux(fd, 0xd00);
	rep.restore_now = restore_now(fd);
	rep.ask_again = ioctl(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0) < 0 ? -errno : 0;
	if (write(rep_fd, &rep, sizeof(rep)) != sizeof(rep) || read(go_fd, &c, 1) != 1)
		_exit(1);
	close(fd);
	_exit(0);
}

/*
 * The owner (the process that asked for restore) writes TSC_AUX and shares
 * the file with a holder: a fork() child (@how 0), or a process that takes
 * it with pidfd_getfd() (1; SCM_RIGHTS would do the same, but the test
 * kernels have no sockets); a second process closes a copy (not the owner:
 * nothing restored). The owner is SIGKILLed: restored at once, while the
 * holder still has the file; the holder's writes through it are refused
 * (EPIPE).
 */
static void shared_case(int how)
{
	static const char *const hows[] = { "a fork() child", "a process that took it with pidfd_getfd()" };
	int rep[2], go[2], own[2], early, later, said[2] = { -1, -1 };
	struct holder_report got, after;
	pid_t owner, h;
	char c = 'g';

	if (pipe(rep) || pipe(go) || pipe(own))
		return;
	owner = fork();
	if (owner == 0) {
		int fd = open_restoring(), copy;

		said[0] = fd;
		said[1] = write_aux(fd, 0xc00);
		if (how == 0 && fork() == 0)
			holder(fd, rep[1], go[0]);
		/* A copy that another process closes: not the owner. */
		copy = fork();
		if (copy == 0) {
			close(fd);
			_exit(0);
		}
		waitpid(copy, NULL, 0);
		if (write(own[1], said, sizeof(said)) != sizeof(said))
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(own[0], said, sizeof(said)) != sizeof(said))
		said[1] = -1;
	if (how == 1) {
		h = fork();
		if (h == 0) {
			int pidfd = syscall(SYS_pidfd_open, owner, 0);

			holder(pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, said[0], 0), rep[1], go[0]);
		}
	}
	if (read(rep[0], &got, sizeof(got)) != sizeof(got))
		got.got_fd = 0;
	early = !restored();
	ksft_test_result(said[1] == 0 && got.got_fd && early,
			 "%s holds the restoring file; the owner wrote and a copy closed by another process restored "
			 "nothing (write %d, still written %d)\n", hows[how], said[1], early);
	kill(owner, SIGKILL);
	waitpid(owner, NULL, 0);
	later = restored();
	ksft_test_result(later, "owner SIGKILLed while %s still holds the file: TSC_AUX restored on every CPU\n",
			 hows[how]);
	if (write(go[1], &c, 1) != 1 || read(rep[0], &after, sizeof(after)) != sizeof(after))
		after.got_fd = 0;
	ksft_test_result(after.got_fd && after.write_after == -EPIPE && restored(),
			 "then the holder's write through it is refused with EPIPE, nothing written (%d)\n",
			 after.write_after);
	ksft_test_result(after.restore_now == 0 && after.ask_again == -EPIPE,
			 "the holder's RESTORE_NOW restores nothing (%d), RESTORE_ON_CLOSE again: EPIPE (%d)\n",
			 after.restore_now, after.ask_again);
	if (write(go[1], &c, 1) != 1)
		ksft_print_msg("holder gone early\n");
	/* The fork() holder is the dead owner's child: its exit closes the last copy. */
	close(rep[1]);
	while (read(rep[0], &c, 1) > 0)
		;
	while (wait(NULL) > 0)
		;
	close(rep[0]);
	close(go[0]);
	close(go[1]);
	close(own[0]);
	close(own[1]);
	put_back();
}

/* A process that shares the caller's descriptor table (clone(CLONE_FILES),
 * not a thread) and waits to be killed; its pid. */
static pid_t share_files(void)
{
	pid_t pid = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

/*
 * An owner whose descriptor table another process shares (clone(CLONE_FILES)
 * without CLONE_THREAD) closes nothing when it exits: the table lives on in
 * the other process, so its exit could not restore. So the module refuses
 * restore on close while the caller's table is shared outside its thread
 * group (EXDEV, no log made), and a write through a restoring file by its
 * owner while the table is shared (EXDEV, nothing written): what is logged
 * is restored when the owner closes the descriptor.
 */
static void test_clone_files(void)
{
	int rep[2], said[4] = { 1, 1, 1, 1 };
	pid_t owner;

	if (pipe(rep))
		return;
	owner = fork();
	if (owner == 0) {
		int fd = dev_open(O_RDWR), rfd;
		pid_t sharer = share_files();
		__u64 now[64];

		/* Asked while shared: refused, the descriptor stays a plain one. */
		said[0] = ioctl(fd, MSRBATCH_IOC_RESTORE_ON_CLOSE, 0) < 0 ? -errno : 0;
		kill(sharer, SIGKILL);
		waitpid(sharer, NULL, 0);
		/* Asked alone, then shared: the owner's write is refused. */
		rfd = open_restoring();
		said[1] = write_aux(rfd, 0xe00);
		sharer = share_files();
		said[2] = write_aux(rfd, 0xf00);
		said[3] = all_aux(ctl, 0, 0, now) == 0 && now[0] == 0xe00 ? 0 : -1;
		close(rfd);
		kill(sharer, SIGKILL);
		waitpid(sharer, NULL, 0);
		if (write(rep[1], said, sizeof(said)) != sizeof(said))
			_exit(1);
		_exit(0);
	}
	if (read(rep[0], said, sizeof(said)) != sizeof(said))
		said[0] = said[1] = said[2] = said[3] = 1;
	waitpid(owner, NULL, 0);
	close(rep[0]);
	close(rep[1]);
	ksft_test_result(said[0] == -EXDEV,
			 "RESTORE_ON_CLOSE while another process shares the descriptor table (clone(CLONE_FILES)): "
			 "EXDEV (%d)\n", said[0]);
	ksft_test_result(said[1] == 0 && said[2] == -EXDEV && said[3] == 0,
			 "a restoring file's owner that shares its table after writing: its next write is refused "
			 "with EXDEV, nothing written (first write %d, next %d, TSC_AUX kept %d)\n",
			 said[1], said[2], said[3]);
	ksft_test_result(restored(), "... and closing the descriptor restores what it wrote\n");
	put_back();
}

/*
 * The owner asked alone and wrote, then shared its table with a
 * clone(CLONE_FILES) process and exited, closing nothing: that process's
 * writes are refused, with EXDEV while the owner lives, and once the owner is
 * gone with EPIPE, the first of them restoring what the owner wrote.
 */
static void test_clone_files_holder(void)
{
	int rep[2], first[2], go[2], said[3] = { 1, 1, 1 };
	pid_t owner, holder;
	char b = 0;

	if (pipe(rep) || pipe(first) || pipe(go))
		return;
	owner = fork();
	if (owner == 0) {
		int rfd = open_restoring();

		said[0] = write_aux(rfd, 0xe00);
		holder = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0);
		if (holder == 0) {
			said[1] = write_aux(rfd, 0xf00);
			if (write(first[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
				_exit(1);
			said[2] = write_aux(rfd, 0x1100);
			if (write(rep[1], said, sizeof(said)) != sizeof(said))
				_exit(1);
			_exit(0);
		}
		/* The owner exits once the holder wrote while it lived. */
		if (read(first[0], &b, 1) != 1)
			_exit(1);
		_exit(0);
	}
	waitpid(owner, NULL, 0);
	if (write(go[1], &b, 1) != 1 || read(rep[0], said, sizeof(said)) != sizeof(said))
		said[0] = said[1] = said[2] = 1;
	close(rep[0]);
	close(rep[1]);
	close(first[0]);
	close(first[1]);
	close(go[0]);
	close(go[1]);
	ksft_test_result(said[0] == 0 && said[1] == -EXDEV,
			 "a clone(CLONE_FILES) process sharing a restoring owner's table: its write is refused "
			 "with EXDEV while the owner lives (owner's write %d, its %d)\n", said[0], said[1]);
	ksft_test_result(said[2] == -EPIPE && restored(),
			 "... and once the owner exited, closing nothing, with EPIPE, and what the owner wrote "
			 "is restored (%d)\n", said[2]);
	put_back();
}

static void test_shared(void)
{
	shared_case(0);
	shared_case(1);
	test_clone_files();
	test_clone_files_holder();
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "close", test_close },
		{ "now", test_restore_now },
		{ "kill", test_kill10 },
		{ "offline", test_offline },
		{ "shared", test_shared },
	};

	ksft_print_header();
	ncpus = online_cpus(64);
	ctl = dev_open(O_RDWR);
	if (ctl < 0 || all_aux(ctl, 0, 0, orig))
		ksft_exit_fail_msg("cannot read TSC_AUX on every CPU\n");
	printf("# msrbatch restore on close, %d CPUs\n", ncpus);
	run_parts(parts, ARRAY_SIZE(parts), argc, argv);
	tests_done();
}
