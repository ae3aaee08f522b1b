// SPDX-License-Identifier: GPL-2.0
/*
 * Samplers (MSRBATCH_IOC_SAMPLE, the sampler descriptor, its ring): the
 * records and their meaning, every refusal and its errno, a reader that
 * stops reading (lost counts, nothing overwritten, nothing leaked), CPU
 * hotplug while sampling, munmap and close while the timers run, and
 * threads that race start, stop, close and hotplug.
 *
 *   sample_test [ROUNDS]    ROUNDS of the race part (default 30)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#include "testlib.h"

#define TSC_AUX 0xc0000103u

static int ncpus;

struct ring {
	int fd;
	size_t size;
	struct msrbatch_ring *page;
	unsigned char *data;
};

static int ring_map(struct ring *rg, int sfd, size_t size)
{
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);

	if (m == MAP_FAILED)
		return -errno;
	rg->fd = sfd;
	rg->size = size;
	rg->page = m;
	rg->data = (unsigned char *)m + rg->page->data_offset;
	return 0;
}

/* What the reader saw. */
struct seen {
	unsigned long samples[64], online[64], offline[64], lost[64];
	unsigned long long last_seq[64], last_tsc[64];
	unsigned long bad;		/* records that break a rule */
	unsigned long aux_wrong;	/* RDTSCP's TSC_AUX not the record's CPU */
	unsigned long seq_back;		/* seq not increasing on a CPU */
	unsigned long faults;		/* samples with a failed bit */
	unsigned long pads;
	unsigned int nr;		/* ops per sample expected (0: any) */
	int aux_op;			/* index of the RDTSCP op, or -1 */
};

/* Reads every record up to data_head; returns how many. */
static unsigned long ring_read(struct ring *rg, struct seen *sn)
{
	__u64 head = __atomic_load_n(&rg->page->data_head, __ATOMIC_ACQUIRE);
	__u64 tail = rg->page->data_tail, size = rg->page->data_size;
	unsigned long n = 0;

	while (tail < head) {
		struct msrbatch_record *h = (void *)(rg->data + (tail & (size - 1)));
		unsigned int cpu = h->cpu;

		if (h->size < 16 || h->size % 16 || h->size > head - tail || cpu >= 64) {
			sn->bad++;
			break;
		}
		switch (h->type) {
		case MSRBATCH_REC_PAD:
			sn->pads++;
			break;
		case MSRBATCH_REC_SAMPLE: {
			struct msrbatch_rec_sample *r = (void *)h;

			if ((sn->nr && h->nr != sn->nr) || h->size != 48 + 16 * h->nr)
				sn->bad++;
			if (sn->samples[cpu] && r->seq <= sn->last_seq[cpu])
				sn->seq_back++;
			if (r->failed)
				sn->faults++;
			if (sn->aux_op >= 0 && (r->val[sn->aux_op][1] & 0xfff) != cpu)
				sn->aux_wrong++;
			sn->last_seq[cpu] = r->seq;
			sn->last_tsc[cpu] = r->tsc;
			sn->samples[cpu]++;
			break;
		}
		case MSRBATCH_REC_LOST:
			sn->lost[cpu] += ((struct msrbatch_rec_lost *)h)->lost;
			break;
		case MSRBATCH_REC_ONLINE:
			sn->online[cpu]++;
			break;
		case MSRBATCH_REC_OFFLINE:
			sn->offline[cpu]++;
			sn->last_seq[cpu] = ((struct msrbatch_rec_cpu *)h)->seq;
			break;
		default:
			sn->bad++;
		}
		tail += h->size;
		n++;
	}
	__atomic_store_n(&rg->page->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

/*
 * A batch for every online CPU: RDTSC, RDTSCP, RDMSR TSC_AUX, CPUID 0 (and,
 * with @more, RDPMC 0 and another RDTSC: 144-byte records, which do not
 * divide a page, so the ring needs PAD records).
 */
static int prepare_all(int fd, int more)
{
	struct msrbatch_op ops[384];
	unsigned int n = 0;
	int c;

	for (c = 0; c < ncpus && n + 6 <= 384; c++) {
		ops[n++] = mkop(MSRBATCH_OP_RDTSC, c, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDTSCP, c, 0, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_RDMSR, c, TSC_AUX, 0, 0);
		ops[n++] = mkop(MSRBATCH_OP_CPUID, c, 0, 0, 0);
		if (more) {
			ops[n++] = mkop(MSRBATCH_OP_RDPMC, c, 0, 0, 0);
			ops[n++] = mkop(MSRBATCH_OP_RDTSC, c, 0, 0, 0);
		}
	}
	return prepare(fd, ops, n, NULL);
}

/* The status a plain batch gets for RDPMC 0 on CPU 0. */
static int rdpmc_status(int fd)
{
	return one_op(fd, MSRBATCH_OP_RDPMC, 0, 0, 0, NULL);
}

/* ---- the records, and stop ------------------------------------------------ */

static void test_basic(void)
{
	struct msrbatch_sample_req r;
	struct ring rg;
	struct seen sn;
	struct pollfd pfd;
	int fd = dev_open(O_RDONLY), h, s, c, ok_online = 1, ok_samples = 1, ok_offline = 1;
	__u64 head;

	h = prepare_all(fd, 0);
	req_init(&r, h, 1000000, 64);
	r.err_index = 7;
	s = sample(fd, &r);
	ksft_test_result(s >= 0, "sampler on %d CPUs at 1 ms from an O_RDONLY descriptor (%d)\n", ncpus, s);
	if (s < 0)
		return;
	ksft_test_result(r.err_index == MSRBATCH_NO_INDEX && r.mmap_size == 65 * PAGE,
			 "answer: err_index none, mmap_size %llu (control page + 64)\n", (unsigned long long)r.mmap_size);
	ksft_test_result(fcntl(s, F_GETFD) == FD_CLOEXEC, "sampler descriptor is close-on-exec\n");
	/* The device and the batch may go: the sampler keeps its copy. */
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_UNPREPARE, h) == 0, "unprepare while sampling\n");
	close(fd);
	ksft_test_result(ring_map(&rg, s, r.mmap_size) == 0, "mmap the ring\n");
	ksft_test_result(rg.page->version == MSRBATCH_RING_VERSION && rg.page->data_offset == PAGE &&
			 rg.page->data_size == 64 * PAGE && rg.page->period_ns == 1000000 && rg.page->flags == 0,
			 "control page: version, data at one page, 64 pages, period, not stopped\n");
	memset(&sn, 0, sizeof(sn));
	sn.nr = 4;
	sn.aux_op = 1;
	for (int i = 0; i < 40; i++) {
		sleep_ms(5);
		ring_read(&rg, &sn);
	}
	for (c = 0; c < ncpus; c++) {
		ok_online &= sn.online[c] == 1;
		ok_samples &= sn.samples[c] >= 20;
	}
	ksft_test_result(ok_online, "one ONLINE record per CPU at start\n");
	ksft_test_result(ok_samples, "samples of every CPU (cpu0: %lu in ~200 ms at 1 ms)\n", sn.samples[0]);
	ksft_test_result(!sn.bad && !sn.seq_back && !sn.faults,
			 "every record well formed, seq rising per CPU, no faults (bad %lu, back %lu, faults %lu)\n",
			 sn.bad, sn.seq_back, sn.faults);
	ksft_test_result(!sn.aux_wrong, "each CPU's ops ran on that CPU (RDTSCP's TSC_AUX is the record's CPU)\n");
	ksft_test_result(rg.page->lost == 0, "a reader that keeps up (256 KiB ring) loses nothing (%llu lost)\n",
			 (unsigned long long)rg.page->lost);
	ksft_test_result(ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 1) == -1 && errno == EINVAL, "STOP with an argument: EINVAL\n");
	ksft_test_result(ioctl(s, MSRBATCH_IOC_INFO, 0) == -1 && errno == ENOTTY, "a device ioctl on a sampler: ENOTTY\n");
	ksft_test_result(ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0) == 0, "STOP\n");
	ksft_test_result(ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0) == 0, "STOP again: 0\n");
	ring_read(&rg, &sn);
	for (c = 0; c < ncpus; c++)
		ok_offline &= sn.offline[c] == 1;
	ksft_test_result(ok_offline, "one OFFLINE record per CPU at stop\n");
	ksft_test_result(rg.page->flags & MSRBATCH_RING_STOPPED, "ring says stopped\n");
	head = rg.page->data_head;
	sleep_ms(20);
	ksft_test_result(rg.page->data_head == head, "nothing appended after stop\n");
	pfd.fd = s;
	pfd.events = POLLIN;
	ksft_test_result(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP) && !(pfd.revents & POLLIN),
			 "poll after stop, all read: POLLHUP, no POLLIN (revents 0x%x)\n", pfd.revents);
	close(s);
	ksft_test_result(rg.page->data_head == head && rg.page->version == MSRBATCH_RING_VERSION,
			 "mapping readable after the last close\n");
	munmap(rg.page, rg.size);
}

/* ---- a reader blocked in poll() when the sampler stops -------------------- */

struct waiter {
	int fd;
	short revents;
	int r;
};

static void *wait_in_poll(void *arg)
{
	struct waiter *w = arg;
	struct pollfd pfd = { .fd = w->fd, .events = POLLIN };

	w->r = poll(&pfd, 1, 5000);
	w->revents = pfd.revents;
	return NULL;
}

static void test_stop_wakes(void)
{
	struct msrbatch_sample_req r;
	struct waiter w = { 0 };
	pthread_t t;
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 0), s;
	struct timespec t0, t1;

	/* A watermark no record reaches while the waiter sleeps. */
	req_init(&r, h, 50000000, 64);
	r.watermark = 64 * PAGE - 16;
	s = sample(fd, &r);
	w.fd = s;
	pthread_create(&t, NULL, wait_in_poll, &w);
	sleep_ms(100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0);
	pthread_join(t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_test_result(w.r == 1 && (w.revents & POLLHUP) && (w.revents & POLLIN) &&
			 (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 2000,
			 "STOP wakes a reader in poll() with POLLHUP and POLLIN (the unread records) (r %d, revents 0x%x)\n",
			 w.r, w.revents);
	close(s);
	close(fd);
}

/* ---- refusals ------------------------------------------------------------- */

static void test_refusals(void)
{
	struct msrbatch_sample_req r;
	struct msrbatch_op ops[80];
	int fd = dev_open(O_RDWR), wfd = dev_open(O_WRONLY), h, s, i;

	h = prepare_all(fd, 0);
#define REFUSE(setup, err, what)                                               \
	do {                                                                   \
		req_init(&r, h, 1000000, 1);                                   \
		setup;                                                         \
		s = sample(fd, &r);                                            \
		ksft_test_result(s == -(err), what ": %s (got %d)\n", #err, s); \
		if (s >= 0)                                                    \
			close(s);                                              \
	} while (0)
	REFUSE(r.version = 99, EINVAL, "unknown version");
	REFUSE(r.flags = 1, EINVAL, "flags");
	REFUSE(r.reserved = 1, EINVAL, "reserved");
	REFUSE(r.period_ns = MSRBATCH_SAMPLE_MIN_PERIOD_NS - 1, ERANGE, "period below the minimum");
	REFUSE(r.period_ns = MSRBATCH_SAMPLE_MAX_PERIOD_NS + 1, ERANGE, "period above the maximum");
	REFUSE(r.period_ns = 0, ERANGE, "period 0");
	REFUSE(r.ring_pages = 0, EINVAL, "0 ring pages");
	REFUSE(r.ring_pages = 3, EINVAL, "3 ring pages (not a power of two)");
	REFUSE(r.ring_pages = 2 * MSRBATCH_SAMPLE_MAX_RING_PAGES, E2BIG, "too many ring pages");
	REFUSE(r.watermark = PAGE, EINVAL, "watermark of the whole ring");
	REFUSE(r.handle = 63, ENOENT, "no such prepared batch");
	req_init(&r, h, 1000000, 1);
	ksft_test_result(ioctl(wfd, MSRBATCH_IOC_SAMPLE, &r) == -1 && errno == EBADF,
			 "O_WRONLY descriptor: EBADF\n");
	ksft_test_result(ioctl(fd, MSRBATCH_IOC_SAMPLE, (void *)16) == -1 && errno == EFAULT, "bad pointer: EFAULT\n");

	/* Ops a sampler may not run: the first is named. */
	ops[0] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	ops[1] = mkop(MSRBATCH_OP_WRMSR, 0, TSC_AUX, 0, 0);
	h = prepare(fd, ops, 2, NULL);
	REFUSE((void)0, EINVAL, "a batch that writes");
	ksft_test_result(r.err_index == 1, "err_index names the WRMSR (%u)\n", r.err_index);
	ops[1] = mkop(MSRBATCH_OP_DELAY, 0, 0, 1000, 0);
	h = prepare(fd, ops, 2, NULL);
	REFUSE((void)0, EINVAL, "a batch with a DELAY");
	ops[1] = mkop(MSRBATCH_OP_RDCR4, 0, 0, 0, 0);
	h = prepare(fd, ops, 2, NULL);
	REFUSE((void)0, EINVAL, "a batch with RDCR4");
	/* 65 ops on CPU 0, interleaved with another CPU's: the 65th of CPU 0. */
	for (i = 0; i < 80; i++)
		ops[i] = mkop(MSRBATCH_OP_RDTSC, (ncpus > 1 && i % 10 == 9) ? 1 : 0, 0, 0, 0);
	h = prepare(fd, ops, 80, NULL);
	REFUSE((void)0, E2BIG, "65 ops on one CPU");
	{
		int cpu0 = 0, want = -1;

		for (i = 0; i < 80; i++)
			if (ops[i].cpu == 0 && ++cpu0 == 65)
				want = i;
		ksft_test_result((int)r.err_index == want, "err_index names CPU 0's 65th op (%u, want %d)\n",
				 r.err_index, want);
	}
	/* The per-CPU op rate: 7 ops every 100 us are 70000 a second. */
	for (i = 0; i < 7; i++)
		ops[i] = mkop(MSRBATCH_OP_RDTSC, ncpus > 1 ? i % 2 : 0, 0, 0, 0);
	ops[7] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	ops[8] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	ops[9] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
	h = prepare(fd, ops, 10, NULL);	/* CPU 0: 7 ops (with 2 CPUs), else 10 */
	req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
	s = sample(fd, &r);
	ksft_test_result(s == -ERANGE && r.err_index == 0,
			 "over %d ops a second on one CPU: ERANGE naming its first op (%d, %u)\n",
			 MSRBATCH_SAMPLE_MAX_OPS_PER_SEC, s, r.err_index);
	if (s >= 0)
		close(s);
	{
		int a, b, c;

		for (i = 0; i < 6; i++)
			ops[i] = mkop(MSRBATCH_OP_RDTSC, 0, 0, 0, 0);
		h = prepare(fd, ops, 6, NULL);
		req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
		a = sample(fd, &r);
		h = prepare(fd, ops, 1, NULL);
		req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
		b = sample(fd, &r);
		ksft_test_result(a >= 0 && b == -EBUSY,
				 "60000 ops/s on CPU 0, then 10000 more: the first runs, the second EBUSY (%d, %d)\n", a, b);
		if (a >= 0)
			close(a);
		c = sample(fd, &r);
		ksft_test_result(c >= 0, "after the first is closed, the second runs (%d)\n", c);
		if (b >= 0)
			close(b);
		if (c >= 0)
			close(c);
	}
	for (i = 0; i < 80; i++)
		ops[i] = mkop(MSRBATCH_OP_RDTSC, (ncpus > 1 && i % 10 == 9) ? 1 : 0, 0, 0, 0);
	h = prepare(fd, ops, 64, NULL);
	req_init(&r, h, 1000000, 1);
	s = sample(fd, &r);
	ksft_test_result(s >= 0, "64 ops on one CPU: allowed (%d)\n", s);
	if (s >= 0) {
		void *m;

		m = mmap(NULL, r.mmap_size + PAGE, PROT_READ, MAP_SHARED, s, 0);
		ksft_test_result(m == MAP_FAILED && errno == EINVAL, "mmap larger than the ring: EINVAL\n");
		m = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, s, PAGE);
		ksft_test_result(m == MAP_FAILED && errno == EINVAL, "mmap at an offset: EINVAL\n");
		close(s);
	}
	close(fd);
	close(wfd);
}

/* ---- MSRBATCH_MAX_SAMPLERS ------------------------------------------------ */

static void test_limit(void)
{
	struct msrbatch_sample_req r;
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 0), s[MSRBATCH_MAX_SAMPLERS + 1], n, x;

	for (n = 0; n < MSRBATCH_MAX_SAMPLERS; n++) {
		req_init(&r, h, 50000000, 1);
		s[n] = sample(fd, &r);
		if (s[n] < 0)
			break;
	}
	ksft_test_result(n == MSRBATCH_MAX_SAMPLERS, "%d samplers at once (%d)\n", MSRBATCH_MAX_SAMPLERS, n);
	req_init(&r, h, 50000000, 1);
	x = sample(fd, &r);
	ksft_test_result(x == -ENOSPC, "one more: ENOSPC (%d)\n", x);
	if (x >= 0)
		close(x);
	if (n > 0)
		close(s[--n]);
	x = sample(fd, &r);
	ksft_test_result(x >= 0, "after a close: another one (%d)\n", x);
	if (x >= 0)
		close(x);
	while (n > 0)
		close(s[--n]);
	close(fd);
}

static void test_slow_reader(void)
{
	struct msrbatch_sample_req r;
	struct ring rg;
	struct seen sn;
	struct pollfd pfd;
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 1), s, c, i;
	unsigned long samples = 0, lost = 0;
	__u64 unread;
	long before, after;

	/* At 1 ms, 2 CPUs fill a page in ~14 ms; reading every 2 ms keeps up. */
	req_init(&r, h, 1000000, 1);
	r.watermark = PAGE / 2;
	s = sample(fd, &r);
	ksft_test_result(s >= 0, "sampler at 1 ms, one page, watermark half a page (%d)\n", s);
	if (s < 0)
		return;
	ring_map(&rg, s, r.mmap_size);
	pfd.fd = s;
	pfd.events = POLLIN;
	i = poll(&pfd, 1, 2000);
	unread = rg.page->data_head - rg.page->data_tail;
	ksft_test_result(i == 1 && (pfd.revents & POLLIN) && unread >= PAGE / 2,
			 "poll wakes at the watermark (%llu unread)\n", (unsigned long long)unread);
	sleep_ms(100);	/* ~100 samples per CPU: far more than a page */
	unread = rg.page->data_head - rg.page->data_tail;
	ksft_test_result(unread <= PAGE, "never more unread than the ring holds (%llu)\n", (unsigned long long)unread);
	ksft_test_result(rg.page->lost > 0, "a full ring counts lost records (%llu)\n", (unsigned long long)rg.page->lost);
	memset(&sn, 0, sizeof(sn));
	sn.nr = 6;
	sn.aux_op = 1;
	ring_read(&rg, &sn);
	ksft_test_result(!sn.bad && !sn.aux_wrong && !sn.seq_back, "records written before the ring filled are intact\n");
	i = rdpmc_status(fd);
	ksft_test_result((i != 0) == (sn.faults > 0), "failed bits agree with a plain batch's RDPMC status (%d): %lu samples with one\n",
			 i, sn.faults);
	for (i = 0; i < 20; i++) {
		sleep_ms(2);
		ring_read(&rg, &sn);
	}
	ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0);
	ring_read(&rg, &sn);
	for (c = 0; c < ncpus; c++) {
		samples += sn.samples[c];
		lost += sn.lost[c];
	}
	ksft_test_result(lost > 0 && lost == rg.page->lost,
			 "once read again, LOST records account for every lost record (%lu of %llu)\n", lost,
			 (unsigned long long)rg.page->lost);
	ksft_test_result(!sn.bad && sn.pads > 0, "the ring wrapped, with PAD records (%lu), and stayed well formed\n",
			 sn.pads);
	printf("# slow reader: %lu samples read, %lu lost\n", samples, lost);
	munmap(rg.page, rg.size);
	close(s);

	/* No leak: 16 rings of 1024 pages made and closed. */
	before = vmalloc_used_kb();
	for (i = 0; i < 16; i++) {
		req_init(&r, h, 1000000, MSRBATCH_SAMPLE_MAX_RING_PAGES);
		s = sample(fd, &r);
		if (s < 0)
			break;
		sleep_ms(2);
		close(s);
	}
	sleep_ms(50);
	after = vmalloc_used_kb();
	ksft_test_result(i == 16 && after - before < 8192, "16 x 4 MiB rings made and closed: VmallocUsed %ld -> %ld kB\n",
			 before, after);
	close(fd);
}

/* ---- hotplug while sampling ----------------------------------------------- */

static void test_hotplug(void)
{
	struct msrbatch_sample_req r;
	struct ring rg;
	struct seen sn;
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 0), s, cpu = ncpus - 1;
	unsigned long before, during;
	unsigned long long off_seq;

	if (ncpus < 2) {
		ksft_test_result_skip("hotplug while sampling: one CPU\n");
		close(fd);
		return;
	}
	req_init(&r, h, 1000000, 64);
	s = sample(fd, &r);
	ring_map(&rg, s, r.mmap_size);
	memset(&sn, 0, sizeof(sn));
	sn.aux_op = 1;
	sleep_ms(30);
	ring_read(&rg, &sn);
	before = sn.samples[cpu];
	if (cpu_set_online(cpu, 0)) {
		ksft_test_result_skip("hotplug while sampling: cannot take the CPU offline\n");
		close(s);
		close(fd);
		return;
	}
	sleep_ms(10);
	ring_read(&rg, &sn);
	off_seq = sn.last_seq[cpu];
	during = sn.samples[cpu];
	sleep_ms(30);
	ring_read(&rg, &sn);
	ksft_test_result(sn.offline[cpu] == 1 && sn.samples[cpu] == during,
			 "CPU %d offline: an OFFLINE record (%lu), then no samples (%lu then %lu; %llu lost)\n", cpu,
			 sn.offline[cpu], during, sn.samples[cpu], (unsigned long long)rg.page->lost);
	ksft_test_result(sn.samples[0] > before, "the other CPU kept sampling\n");
	cpu_set_online(cpu, 1);
	sleep_ms(30);
	ring_read(&rg, &sn);
	ksft_test_result(sn.online[cpu] == 2 && sn.samples[cpu] > during && sn.last_seq[cpu] > off_seq,
			 "CPU %d back: ONLINE again, samples resume at a later period\n", cpu);
	ksft_test_result(!sn.bad && !sn.aux_wrong && !sn.seq_back, "records stayed well formed and on their CPU\n");
	munmap(rg.page, rg.size);
	close(s);
	close(fd);
}

/* ---- munmap and close while running --------------------------------------- */

static void test_unmap(void)
{
	struct msrbatch_sample_req r;
	struct ring rg, rg2;
	struct seen sn;
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 0), s;
	long before = vmalloc_used_kb(), during, after;
	__u64 head;

	req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, MSRBATCH_SAMPLE_MAX_RING_PAGES);
	s = sample(fd, &r);
	during = vmalloc_used_kb();
	ksft_test_result(during - before >= 3072, "a 4 MiB ring shows in VmallocUsed (%ld -> %ld kB)\n", before, during);
	ring_map(&rg, s, r.mmap_size);
	munmap(rg.page, rg.size);
	sleep_ms(20);
	ksft_test_result(ring_map(&rg2, s, r.mmap_size) == 0, "unmap while running, map again\n");
	memset(&sn, 0, sizeof(sn));
	sn.aux_op = 1;
	sleep_ms(5);
	ring_read(&rg2, &sn);
	ksft_test_result(!sn.bad && sn.samples[0] > 0, "records readable in the new mapping\n");
	/* A mapping holds the file, as with perf: the last reference stops it. */
	close(s);
	head = rg2.page->data_head;
	sleep_ms(10);
	ksft_test_result(rg2.page->data_head != head && !(rg2.page->flags & MSRBATCH_RING_STOPPED),
			 "close while mapped: the mapping holds the sampler, which keeps running\n");
	munmap(rg2.page, rg2.size);
	sleep_ms(20);
	after = vmalloc_used_kb();
	ksft_test_result(after - before < 1024, "munmap of the last reference frees the 4 MiB ring (VmallocUsed %ld -> %ld kB)\n",
			 before, after);
	close(fd);
}

/* ---- races ---------------------------------------------------------------- */

static atomic_int stop_all;
static atomic_int shared_fd = -1;

static void *stopper(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_all)) {
		int s = atomic_load(&shared_fd);

		if (s >= 0)
			ioctl(s, MSRBATCH_SAMPLER_IOC_STOP, 0);	/* may be EBADF, or another file */
		sched_yield();
	}
	return NULL;
}

static void *plugger(void *arg)
{
	int cpu = ncpus - 1;

	(void)arg;
	while (!atomic_load(&stop_all)) {
		if (cpu_set_online(cpu, 0) == 0) {
			sleep_ms(3);
			cpu_set_online(cpu, 1);
		}
		sleep_ms(3);
	}
	cpu_set_online(cpu, 1);
	return NULL;
}

static void *poller(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_all)) {
		struct pollfd pfd = { .fd = atomic_load(&shared_fd), .events = POLLIN };

		if (pfd.fd >= 0)
			poll(&pfd, 1, 1);
		else
			sched_yield();
	}
	return NULL;
}

static void test_races(int rounds)
{
	struct msrbatch_sample_req r;
	pthread_t t[3];
	int fd = dev_open(O_RDONLY), h = prepare_all(fd, 0), i, made = 0, nt = 0, err = 0;
	long before = vmalloc_used_kb(), after;

	pthread_create(&t[nt++], NULL, stopper, NULL);
	pthread_create(&t[nt++], NULL, poller, NULL);
	if (ncpus > 1)
		pthread_create(&t[nt++], NULL, plugger, NULL);
	for (i = 0; i < rounds; i++) {
		struct ring rg;
		int s;

		req_init(&r, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 1);
		/*
		 * The last round's sampler counts until its file is released,
		 * which the stopper or poller thread may do a moment after our
		 * close(), if it was in a call on it: wait for that (EBUSY).
		 */
		for (int t = 0; (s = sample(fd, &r)) == -EBUSY && t < 1000; t++)
			sleep_ms(1);
		if (s < 0) {
			err = s;
			continue;
		}
		made++;
		atomic_store(&shared_fd, s);
		if (i % 2 == 0 && ring_map(&rg, s, r.mmap_size) == 0) {
			struct seen sn;

			memset(&sn, 0, sizeof(sn));
			sn.aux_op = 1;
			sleep_ms(2);
			ring_read(&rg, &sn);
			if (sn.bad || sn.aux_wrong)
				ksft_test_result(0, "round %d: bad records under races\n", i);
			if (i % 4 == 0)
				munmap(rg.page, rg.size);	/* else: unmapped after close */
			atomic_store(&shared_fd, -1);
			close(s);
			if (i % 4 != 0)
				munmap(rg.page, rg.size);
		} else {
			sleep_ms(1);
			atomic_store(&shared_fd, -1);
			close(s);
		}
	}
	atomic_store(&stop_all, 1);
	while (nt > 0)
		pthread_join(t[--nt], NULL);
	sleep_ms(50);
	after = vmalloc_used_kb();
	ksft_test_result(made == rounds, "%d start/close rounds racing STOP, poll, munmap%s (%d started; %d)\n", rounds,
			 ncpus > 1 ? " and hotplug" : "", made, err);
	ksft_test_result(after - before < 2048, "no ring leaked (VmallocUsed %ld -> %ld kB)\n", before, after);
	close(fd);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 30;

	ksft_print_header();
	ncpus = online_cpus(64);
	test_basic();
	test_stop_wakes();
	test_refusals();
	test_limit();
	test_slow_reader();
	test_hotplug();
	test_unmap();
	test_races(rounds);
	tests_done();
}
