// SPDX-License-Identifier: GPL-2.0
/*
 * The samplers' limits and contracts under attack (from an independent
 * review of #17, which found the stoprace, private and load defects with
 * these parts): each part tries to make happen what
 * Documentation/sampling.md says cannot.
 *
 *   sample_limits_test [PART...]
 *
 * PARTs (default: all, in this order):
 *   watermark  a valid watermark that a full ring must still reach
 *   stoprace   two STOPs at once: neither returns before the ring says stopped
 *   fail       EFAULT and EMFILE after the sampler was made: nothing leaks
 *   garbage    a reader scribbling data_tail and the mapping while CPUs sample
 *   private    a MAP_PRIVATE mapping is refused
 *   load       an unprivileged (allowlist-confined) user against the limits:
 *              the per-CPU op rate, its share of the samplers, root's room
 *   rootroom   a confined user takes all the rate it can on every CPU: root's
 *              samplers must still start (#30, item 4)
 *   expiries   six one-op samplers at 100 us on one CPU, as root and confined:
 *              refused beyond the timer expiry bound (#30, item 5)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "testlib.h"


static int ncpus;

/* @per_cpu ops of code @code (CPUID: leaf 0) on each of CPUs 0..@cpus-1,
 * the last of each CPU an RDTSC when @end_tsc. */
static int prepare_n(int fd, int cpus, unsigned int per_cpu, __u16 code, int end_tsc)
{
	struct msrbatch_op *ops = calloc(cpus * per_cpu, sizeof(*ops));
	unsigned int n = 0, i;
	int c, h;

	for (c = 0; c < cpus; c++)
		for (i = 0; i < per_cpu; i++)
			ops[n++] = mkop(end_tsc && i == per_cpu - 1 ? MSRBATCH_OP_RDTSC : code, c, 0, 0, 0);
	h = prepare(fd, ops, n, NULL);
	free(ops);
	return h;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads and checks every record up to data_head; returns -1 on a malformed one. */
static long ring_drain(struct msrbatch_ring *pg, unsigned char *data, unsigned long *lost_recs)
{
	__u64 head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	__u64 tail = pg->data_tail, size = pg->data_size;
	long n = 0;

	while (tail < head) {
		struct msrbatch_record *h = (void *)(data + (tail & (size - 1)));

		if (h->size < 16 || h->size % 16 || h->size > head - tail || h->type > 4 ||
		    (tail & (size - 1)) + h->size > size)
			return -1;
		if (h->type == MSRBATCH_REC_LOST && lost_recs)
			*lost_recs += ((struct msrbatch_rec_lost *)h)->lost;
		tail += h->size;
		n++;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

/* ---- 1. a watermark that nothing reaches ---------------------------------- */

/*
 * sampling.md: "watermark: poll() reports EPOLLIN once this many bytes are
 * unread; ... Less than the data area". A record is appended only if it fits
 * whole (and a PAD before it, if it would wrap), so the unread bytes of a full
 * ring stop short of data_size by up to a record plus a PAD. A watermark in
 * that gap is accepted, is never reached, and poll() sleeps while every
 * record is lost.
 */
static void test_watermark(void)
{
	static const struct { unsigned int nr_ops, watermark; } cases[] = {
		{ 6, PAGE - 16 },	/* 144-byte records: a full ring holds 4032 */
		/* #30: 176-byte records after a 32-byte ONLINE: a full ring holds 4080 */
		{ 8, PAGE - 8 },
		{ 64, 3300 },		/* 1072-byte records: a full ring holds 3216 */
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct msrbatch_sample_req r;
		struct pollfd pfd;
		struct msrbatch_ring *pg;
		int fd = dev_open(O_RDONLY), h, s, pr;
		unsigned long long unread, lost;

		h = prepare_n(fd, 1, cases[i].nr_ops, MSRBATCH_OP_RDTSC, 0);
		req_init(&r, h, 1000000, 1);
		r.watermark = cases[i].watermark;
		s = sample(fd, &r);
		ksft_test_result(s >= 0, "watermark %u of a %u-byte data area: accepted (%d)\n", r.watermark, PAGE, s);
		if (s < 0) {
			close(fd);
			continue;
		}
		pg = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
		pfd.fd = s;
		pfd.events = POLLIN;
		pfd.revents = 0;
		pr = poll(&pfd, 1, 1500);	/* ~1500 records of ~4 fit */
		unread = pg->data_head - pg->data_tail;
		lost = pg->lost;
		ksft_test_result(pr == 1 && (pfd.revents & POLLIN),
				 "%u-op records, watermark %u: poll() wakes the reader of a full ring "
				 "(poll %d, revents 0x%x, %llu unread, %llu lost)\n",
				 cases[i].nr_ops, r.watermark, pr, pfd.revents, unread, lost);
		ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0);
		munmap(pg, r.mmap_size);
		close(s);
		close(fd);
	}
}

/* ---- 2. STOP racing STOP --------------------------------------------------- */

/*
 * sampling.md: STOP "stops every timer ..., then sets MSRBATCH_RING_STOPPED in
 * the control page and wakes poll() (which then reports EPOLLHUP ...). It
 * returns 0, also when the sampler is already stopped". msrbatch_sampler_stop()
 * returns false to the second caller as soon as the first drops stop_lock,
 * before the first has set `stopped` and the page's flag.
 */
struct racer {
	int s, cpu;
	long delay_us;
	struct msrbatch_ring *pg;
	pthread_barrier_t *b;
	int ret, flag_seen, hup_seen;
};

static void *stop_racer(void *arg)
{
	struct racer *rc = arg;
	struct pollfd pfd = { .fd = rc->s, .events = POLLIN };

	pin(rc->cpu);
	pthread_barrier_wait(rc->b);
	if (rc->delay_us)
		sleep_us(rc->delay_us);
	rc->ret = ioctl(rc->s, MSRBATCH_SAMPLER_IOC_STOP, 0);
	rc->flag_seen = !!(__atomic_load_n(&rc->pg->flags, __ATOMIC_ACQUIRE) & MSRBATCH_RING_STOPPED);
	poll(&pfd, 1, 0);
	rc->hup_seen = !!(pfd.revents & POLLHUP);
	return NULL;
}

static void test_stoprace(void)
{
	enum { rounds = 60 };
	static const struct { int cpu_b; long delay_b; const char *what; } variants[] = {
		{ 0, 0, "both on CPU 0" },
		{ 0, 300, "both on CPU 0, the second 300 us later" },
		{ 1, 300, "on CPUs 0 and 1, the second 300 us later" },
	};
	int fd = dev_open(O_RDONLY), h = prepare_n(fd, ncpus, 2, MSRBATCH_OP_RDTSC, 0);
	unsigned int v;

	for (v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		int i, made = 0, no_flag = 0, no_hup = 0, nonzero = 0;

		if (variants[v].cpu_b >= ncpus)
			continue;
		for (i = 0; i < rounds; i++) {
			struct msrbatch_sample_req r;
			pthread_barrier_t b;
			struct racer rc[2];
			pthread_t t[2];
			void *m;
			int s, k;

			req_init(&r, h, 1000000, 1);
			s = sample(fd, &r);
			if (s < 0)
				continue;
			m = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
			if (m == MAP_FAILED) {
				close(s);
				continue;
			}
			made++;
			pthread_barrier_init(&b, NULL, 2);
			for (k = 0; k < 2; k++) {
				memset(&rc[k], 0, sizeof(rc[k]));
				rc[k].s = s;
				rc[k].pg = m;
				rc[k].b = &b;
				rc[k].cpu = k ? variants[v].cpu_b : 0;
				rc[k].delay_us = k ? variants[v].delay_b : 0;
				pthread_create(&t[k], NULL, stop_racer, &rc[k]);
			}
			for (k = 0; k < 2; k++) {
				pthread_join(t[k], NULL);
				nonzero += rc[k].ret != 0;
				no_flag += rc[k].ret == 0 && !rc[k].flag_seen;
				no_hup += rc[k].ret == 0 && !rc[k].hup_seen;
			}
			pthread_barrier_destroy(&b);
			munmap(m, r.mmap_size);
			close(s);
		}
		ksft_test_result(made == rounds && !nonzero, "%s: %d rounds of two STOPs, every STOP returned 0 (%d did not)\n",
				 variants[v].what, made, nonzero);
		ksft_test_result(!no_flag && !no_hup,
				 "%s: after a STOP returned 0 the ring says STOPPED and poll() says POLLHUP "
				 "(%d STOPs returned before the flag, %d before POLLHUP)\n",
				 variants[v].what, no_flag, no_hup);
	}
	close(fd);
}

/* ---- 3. failures after the sampler was made -------------------------------- */

static int count_samplers_possible(int fd, int h)
{
	struct msrbatch_sample_req r;
	int s[MSRBATCH_MAX_SAMPLERS + 1], n = 0, k;

	for (n = 0; n <= MSRBATCH_MAX_SAMPLERS; n++) {
		req_init(&r, h, 50000000, 1);
		s[n] = sample(fd, &r);
		if (s[n] < 0)
			break;
	}
	for (k = 0; k < n; k++)
		close(s[k]);
	return n;
}

static void test_fail(void)
{
	int fd = dev_open(O_RDONLY), h = prepare_n(fd, ncpus, 4, MSRBATCH_OP_RDTSC, 0);
	struct msrbatch_sample_req *ro, r;
	struct rlimit old, lim;
	long before, after;
	int i, efault = 0, emfile = 0, probe, wrote_back = 0;

	before = vmalloc_used_kb();
	/* The request readable but not writable: the answer cannot be written. */
	ro = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	req_init(ro, h, 1000000, 64);
	mprotect(ro, PAGE, PROT_READ);
	for (i = 0; i < 100; i++)
		efault += sample(fd, ro) == -EFAULT;
	ksft_test_result(efault == 100, "a request that cannot be written back: EFAULT, 100 of 100 (%d)\n", efault);
	munmap(ro, PAGE);

	/* No descriptor left: EMFILE from get_unused_fd_flags(). */
	probe = dup(0);
	close(probe);
	getrlimit(RLIMIT_NOFILE, &old);
	lim = old;
	lim.rlim_cur = probe;
	setrlimit(RLIMIT_NOFILE, &lim);
	for (i = 0; i < 100; i++) {
		req_init(&r, h, 1000000, 64);
		r.err_index = 7;
		emfile += sample(fd, &r) == -EMFILE;
		wrote_back += r.mmap_size != 0;
	}
	setrlimit(RLIMIT_NOFILE, &old);
	ksft_test_result(emfile == 100, "no descriptor left: EMFILE, 100 of 100 (%d)\n", emfile);
	printf("# EMFILE: the request was written back as a success %d times (mmap_size %llu, err_index 0x%x)\n",
	      wrote_back, (unsigned long long)r.mmap_size, r.err_index);
	sleep_us(50000);
	after = vmalloc_used_kb();
	ksft_test_result(after - before < 1024, "200 failed starts with 256 KiB rings leaked no ring (VmallocUsed %ld -> %ld kB)\n",
			 before, after);
	i = count_samplers_possible(fd, h);
	ksft_test_result(i == MSRBATCH_MAX_SAMPLERS, "and no sampler count: %d samplers can still start (%d)\n",
			 MSRBATCH_MAX_SAMPLERS, i);
	close(fd);
}

/* ---- 4. a reader that writes garbage --------------------------------------- */

static void test_garbage(void)
{
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h = prepare_n(fd, ncpus, 5, MSRBATCH_OP_RDTSCP, 0), s, i;
	struct msrbatch_ring *pg;
	unsigned char *data;
	__u64 head, saved[4];
	unsigned long lost_recs = 0;
	long n, bad = 0, over = 0;
	unsigned int seed = 12345;
	double end;

	req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
	s = sample(fd, &r);
	ksft_test_result(s >= 0, "sampler at the minimum period, one page (%d)\n", s);
	if (s < 0)
		return;
	pg = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
	data = (unsigned char *)pg + PAGE;
	end = now_s() + 2.0;
	for (i = 0; now_s() < end; i++) {
		__u64 x = ((__u64)rand_r(&seed) << 33) ^ ((__u64)rand_r(&seed) << 11) ^ rand_r(&seed);

		head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		switch (i % 8) {
		case 0: pg->data_tail = x; break;				/* anything */
		case 1: pg->data_tail = head + 16 + (x & 0xff0); break;	/* ahead */
		case 2: pg->data_tail = head - PAGE - 16; break;		/* too far behind */
		case 3: pg->data_tail = head - PAGE; break;			/* exactly full */
		case 4: pg->data_tail = head - (x & (PAGE - 1)); break;	/* sane, not on a record */
		case 5: /* the whole data area and the constant fields */
			memset(data, x & 0xff, PAGE);
			saved[0] = pg->data_size;
			saved[1] = pg->data_offset;
			pg->data_size = 0;
			pg->data_offset = x;
			pg->version = x;
			sleep_us(200);
			pg->data_size = saved[0];
			pg->data_offset = saved[1];
			break;
		case 6: pg->data_tail = ~0ULL; break;
		default: pg->data_tail = head; break;
		}
		sleep_us(x % 400);
	}
	/* A sane tail again: what the kernel appends from now on is well formed. */
	pg->data_tail = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	for (i = 0; i < 50; i++) {
		sleep_us(1000);
		head = pg->data_head;
		if (head - pg->data_tail > PAGE)
			over++;
		n = ring_drain(pg, data, &lost_recs);
		if (n < 0) {
			bad++;
			pg->data_tail = pg->data_head;
		}
	}
	ksft_test_result(!bad && !over, "after 2 s of garbage tails and scribbles, a sane tail reads well-formed records "
			 "(%ld malformed, %ld times more unread than the ring)\n", bad, over);
	ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0);
	ksft_test_result(pg->flags & MSRBATCH_RING_STOPPED, "STOP still works\n");
	munmap(pg, r.mmap_size);
	close(s);
	close(fd);
}

/* ---- 5. MAP_PRIVATE --------------------------------------------------------- */

static void test_private(void)
{
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h = prepare_n(fd, ncpus, 4, MSRBATCH_OP_RDTSC, 0), s, i;
	struct msrbatch_ring *pg;
	__u64 h0;

	req_init(&r, h, 1000000, 1);
	s = sample(fd, &r);
	pg = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, s, 0);
	ksft_test_result(pg == MAP_FAILED && errno == EINVAL,
			 "a MAP_PRIVATE mapping (the kernel would never see its data_tail) is refused with EINVAL "
			 "(as perf does)\n");
	if (pg != MAP_FAILED) {
		/* What a reader of it gets: the first store to data_tail makes the
		 * control page a private copy; data_head then never moves again. */
		for (i = 0; i < 5; i++) {
			sleep_us(5000);
			ring_drain(pg, (unsigned char *)pg + PAGE, NULL);
		}
		h0 = pg->data_head;
		sleep_us(50000);
		printf("# MAP_PRIVATE: data_head %llu -> %llu over 50 ms at 1 ms on %d CPUs\n",
		       (unsigned long long)h0, (unsigned long long)pg->data_head, ncpus);
		munmap(pg, r.mmap_size);
	}
	close(s);
	close(fd);
}

/* ---- 6. what an unprivileged user may ask of every CPU ---------------------- */

static inline __u64 rdtsc(void)
{
	unsigned int lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((__u64)hi << 32) | lo;
}

/*
 * A child that drops to uid 1000 without capabilities (an allowlist-confined
 * descriptor: RDTSC and CPUID need no allowlist entry), runs @fn, which fills
 * @size bytes of result and may leave samplers open, hands the result to the
 * parent and holds what it made until confined_finish().
 */
struct confined {
	pid_t pid;
	int up, down;
	mode_t mode;
};

static int confined_start(struct confined *c, void (*fn)(void *res), void *res, size_t size)
{
	int up[2], down[2], x;
	struct stat sb;
	char go;

	stat("/dev/msrbatch", &sb);
	c->mode = sb.st_mode & 07777;
	chmod("/dev/msrbatch", 0666);
	if (pipe(up) || pipe(down))
		return 0;
	memset(res, 0, size);
	c->pid = fork();
	if (c->pid == 0) {
		close(up[0]);
		close(down[1]);
		if (setgroups(0, NULL) || setgid(1000) || setuid(1000))
			_exit(1);
		fn(res);
		if (write(up[1], res, size) != (ssize_t)size || read(down[0], &go, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	c->up = up[0];
	c->down = down[1];
	x = read(c->up, res, size) == (ssize_t)size;
	return x;
}

/* Lets the child go (closing what it holds) and puts the node's mode back. */
static void confined_finish(struct confined *c)
{
	int st;

	if (write(c->down, "g", 1) != 1)
		kill(c->pid, SIGKILL);
	waitpid(c->pid, &st, 0);
	close(c->up);
	close(c->down);
	chmod("/dev/msrbatch", c->mode);
}

struct load_result {
	int opened, too_fast, started, refusal;
	unsigned int too_fast_index;
	double cost_us;
};

/*
 * As uid 1000: what the limits allow one such user, and what one sample
 * costs; the parent (root) checks that the confined user's samplers leave
 * room for root's. Keeps its samplers open.
 */
static void load_child(void *arg)
{
	struct load_result *res = arg;
	struct msrbatch_sample_req r;
	int fd, h, n = 0, k;
	double tsc_per_us, t0;
	__u64 c0;

	fd = dev_open(O_RDONLY);
	res->opened = fd >= 0;
	if (fd < 0)
		return;
	t0 = now_s();
	c0 = rdtsc();
	sleep_us(100000);
	tsc_per_us = (rdtsc() - c0) / ((now_s() - t0) * 1e6);
	/* 64 CPUIDs per CPU at 100 us: 640000 a second, over the per-CPU rate. */
	h = prepare_n(fd, ncpus, MSRBATCH_SAMPLE_MAX_OPS, MSRBATCH_OP_CPUID, 1);
	req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 64);
	res->too_fast = sample(fd, &r);
	res->too_fast_index = r.err_index;
	/* At 2 ms (the confined op rate) they are allowed: one sample's cost, 63 CPUIDs then an RDTSC. */
	req_init(&r, h, 2000000, 64);
	k = sample(fd, &r);
	if (k >= 0) {
		struct msrbatch_ring *pg = mmap(NULL, r.mmap_size, PROT_READ, MAP_SHARED, k, 0);
		unsigned char *data = (unsigned char *)pg + PAGE;
		__u64 tail = 0, head, sum = 0, cnt = 0;

		sleep_us(50000);
		head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		while (tail < head) {
			struct msrbatch_rec_sample *rec = (void *)(data + (tail & (pg->data_size - 1)));

			if (rec->hdr.type == MSRBATCH_REC_SAMPLE && rec->hdr.nr == MSRBATCH_SAMPLE_MAX_OPS) {
				sum += rec->val[MSRBATCH_SAMPLE_MAX_OPS - 1][0] - rec->tsc;
				cnt++;
			}
			tail += rec->hdr.size;
		}
		res->cost_us = cnt ? (double)sum / cnt / tsc_per_us : -1;
		close(k);
		munmap(pg, r.mmap_size);
	}
	/* As many samplers of one RDTSC at 50 ms as the limits allow (left open). */
	h = prepare_n(fd, 1, 1, MSRBATCH_OP_RDTSC, 0);
	for (n = 0; n < MSRBATCH_MAX_SAMPLERS; n++) {
		req_init(&r, h, 50000000, 1);
		k = sample(fd, &r);
		if (k < 0) {
			res->refusal = k;
			break;
		}
	}
	res->started = n;
}

static void test_load(void)
{
	struct load_result res;
	struct msrbatch_sample_req r;
	struct confined c;
	int fd, h, x;
	double worst;

	x = confined_start(&c, load_child, &res, sizeof(res));
	ksft_test_result(x && res.opened, "uid 1000, no capabilities, opens /dev/msrbatch (allowlist-confined)\n");
	ksft_test_result(res.too_fast == -ERANGE && res.too_fast_index == 0,
			 "64 CPUIDs per CPU every 100 us (over %d ops/s on a CPU): ERANGE naming CPU 0's first op (%d, %u)\n",
			 MSRBATCH_SAMPLE_MAX_OPS_PER_SEC, res.too_fast, res.too_fast_index);
	ksft_test_result(res.started == MSRBATCH_MAX_SAMPLERS_CONFINED && res.refusal == -ENOSPC,
			 "a confined user starts %d samplers, then ENOSPC (%d, %d)\n", MSRBATCH_MAX_SAMPLERS_CONFINED,
			 res.started, res.refusal);
	fd = dev_open(O_RDONLY);
	h = prepare_n(fd, 1, 1, MSRBATCH_OP_RDTSC, 0);
	req_init(&r, h, 1000000, 1);
	x = sample(fd, &r);
	ksft_test_result(x >= 0, "while uid 1000 holds %d samplers, root can still start one (%d)\n", res.started, x);
	if (x >= 0)
		close(x);
	close(fd);
	confined_finish(&c);
	/*
	 * The worst case the limits allow on one CPU: MSRBATCH_SAMPLE_MAX_OPS_PER_SEC
	 * ops a second, at this guest's measured cost per op.
	 */
	worst = res.cost_us / MSRBATCH_SAMPLE_MAX_OPS * MSRBATCH_SAMPLE_MAX_OPS_PER_SEC / 1e6;
	ksft_test_result(res.cost_us > 0 && worst < 0.5,
			 "the limits bound the timer load: %d ops/s x %.3f us per op = %.1f%% of a CPU\n",
			 MSRBATCH_SAMPLE_MAX_OPS_PER_SEC, res.cost_us / MSRBATCH_SAMPLE_MAX_OPS, 100 * worst);
}

/* ---- 7. room for CAP_SYS_RAWIO (#30, item 4) -------------------------------- */

struct room_result {
	int opened, full_1ms, half_2ms, small, refusal;
};

/*
 * As uid 1000: takes all the sampler rate the limits let a confined user
 * have on every CPU: 64 RDTSCs per CPU every 1 ms (the whole 64000 ops/s),
 * else every 2 ms, then one-RDTSC samplers at 100 us and at 1 ms until
 * refused. Keeps them.
 */
static void room_child(void *arg)
{
	struct room_result *res = arg;
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h64, h1, i;
	static const __u64 periods[] = { MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1000000 };

	res->opened = fd >= 0;
	if (fd < 0)
		return;
	h64 = prepare_n(fd, ncpus, MSRBATCH_SAMPLE_MAX_OPS, MSRBATCH_OP_RDTSC, 0);
	req_init(&r, h64, 1000000, 1);
	res->full_1ms = sample(fd, &r);
	if (res->full_1ms < 0) {
		req_init(&r, h64, 2000000, 1);
		res->half_2ms = sample(fd, &r);
	}
	h1 = prepare_n(fd, ncpus, 1, MSRBATCH_OP_RDTSC, 0);
	for (i = 0; i < 2; i++)
		res->small += take_samplers(fd, h1, periods[i], &res->refusal);
}

/* Root's sampler of @per_cpu RDTSCs on every CPU at @period: its descriptor or -errno (closed). */
static int root_sampler(unsigned int per_cpu, __u64 period)
{
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h = prepare_n(fd, ncpus, per_cpu, MSRBATCH_OP_RDTSC, 0), s;

	req_init(&r, h, period, 1);
	s = sample(fd, &r);
	if (s >= 0)
		close(s);
	close(fd);
	return s;
}

static void test_rootroom(void)
{
	struct room_result res;
	struct confined c;
	int x, a, b, d;

	x = confined_start(&c, room_child, &res, sizeof(res));
	ksft_test_result(x && res.opened, "uid 1000 opens /dev/msrbatch (allowlist-confined)\n");
	printf("# uid 1000 took: 64 ops/CPU at 1 ms: %d, at 2 ms: %d, then %d one-op samplers (refused %d)\n",
	       res.full_1ms, res.half_2ms, res.small, res.refusal);
	ksft_test_result(res.full_1ms == -ERANGE,
			 "a confined sampler of 64 ops per CPU every 1 ms (over the confined %d ops/s): ERANGE (%d)\n",
			 MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED, res.full_1ms);
	a = root_sampler(1, MSRBATCH_SAMPLE_MAX_PERIOD_NS);
	/* Every 1 ms: 1000 ops/s per op; what confined samplers leave root. */
	b = root_sampler((MSRBATCH_SAMPLE_MAX_OPS_PER_SEC - MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED) / 1000, 1000000);
	d = root_sampler(1, MSRBATCH_SAMPLE_MIN_PERIOD_NS);
	ksft_test_result(a >= 0, "while uid 1000 holds all it can, root's one-op sampler every 60 s starts (%d)\n", a);
	ksft_test_result(b >= 0, "and root's sampler of %d ops/s per CPU (what confined samplers leave) starts (%d)\n",
			 MSRBATCH_SAMPLE_MAX_OPS_PER_SEC - MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED, b);
	ksft_test_result(d >= 0, "and root's one-op sampler at the minimum period (%d timer expiries/s per CPU) starts (%d)\n",
			 (int)(1000000000ULL / MSRBATCH_SAMPLE_MIN_PERIOD_NS), d);
	confined_finish(&c);
}

/* ---- 8. timer expiries, not only ops (#30, item 5) --------------------------- */

struct exp_result {
	int opened, started, refusal;
};

/* Up to six one-RDTSC samplers on CPU 0 at the minimum period: how many start. Keeps them. */
static void six_fast(void *arg)
{
	struct exp_result *res = arg;
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h, s;

	res->opened = fd >= 0;
	h = prepare_n(fd, 1, 1, MSRBATCH_OP_RDTSC, 0);
	for (res->started = 0; res->started < 6; res->started++) {
		req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
		s = sample(fd, &r);
		if (s < 0) {
			res->refusal = s;
			break;
		}
	}
}

static void test_expiries(void)
{
	const int per = 1000000000ULL / MSRBATCH_SAMPLE_MIN_PERIOD_NS;
	struct exp_result root, user;
	struct confined c;
	pid_t pid;
	int p[2], st;

	/* Root, in a child so that its samplers go with it. */
	if (pipe(p))
		return;
	pid = fork();
	if (pid == 0) {
		six_fast(&root);
		_exit(write(p[1], &root, sizeof(root)) != sizeof(root));
	}
	memset(&root, 0, sizeof(root));
	if (read(p[0], &root, sizeof(root)) != sizeof(root))
		root.started = -1;
	waitpid(pid, &st, 0);
	close(p[0]);
	close(p[1]);
	ksft_test_result(root.started == MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC / per && root.refusal == -EBUSY,
			 "root: one-op samplers at 100 us on CPU 0 (%d expiries/s each): %d start, the next EBUSY "
			 "(%d started, %d)\n", per, MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC / per, root.started, root.refusal);
	if (!confined_start(&c, six_fast, &user, sizeof(user)))
		user.started = -1;
	ksft_test_result(user.opened && user.started == MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC_CONFINED / per &&
			 user.refusal == -EBUSY,
			 "uid 1000: the same, %d start, the next EBUSY (%d started, %d)\n",
			 MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC_CONFINED / per, user.started, user.refusal);
	confined_finish(&c);
}

int main(int argc, char **argv)
{
	static const struct test_part parts[] = {
		{ "watermark", test_watermark },
		{ "stoprace", test_stoprace },
		{ "fail", test_fail },
		{ "garbage", test_garbage },
		{ "private", test_private },
		{ "load", test_load },
		{ "rootroom", test_rootroom },
		{ "expiries", test_expiries },
	};

	ksft_print_header();
	ncpus = online_cpus(64);
	run_parts(parts, ARRAY_SIZE(parts), argc, argv);
	tests_done();
}
