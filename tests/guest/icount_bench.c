// SPDX-License-Identifier: GPL-2.0
/*
 * icount_bench: what each ioctl path of msrbatch costs, in guest
 * instructions, next to the in-tree msr driver and the floors, against the
 * targets of issue #26. Run by `make bench ICOUNT=1` (tests/harness/bench.sh)
 * in a guest under QEMU -icount shift=0,sleep=off, where the TSC advances one
 * tick per guest instruction (checked at the start: the program says so when
 * it does not). Reads IA32_PAT through the raw ioctls of the uapi header.
 *
 * Each figure is the minimum over its repetitions of the TSC ticks around
 * the call(s), less the ticks of an empty measurement (the two RDTSCs).
 * Shapes: one op with the caller on the op's CPU (local) or on another
 * (remote); one op on each of 4 CPUs, the whole call; per op at 8, 64, 512
 * and 4096 ops on each of 4 CPUs and 4096 ops on one CPU. Paths: a plain
 * batch and the rerun of a prepared one, on a descriptor opened with
 * CAP_SYS_RAWIO and on one opened without it (confined by an allowlist
 * that lists IA32_PAT, loaded for the run and put back after it); the
 * in-tree driver's pread of /dev/cpu/N/msr. Floors: a raw getppid syscall,
 * an ioctl the driver refuses (an unknown command), a user RDTSC. Sampler:
 * the cheapest interruption of a user loop by an hrtimer whose expiry does
 * next to nothing (an unread timerfd's) against that by one sample of one
 * RDMSR. msr-safe's figures are issue #26's (msr-safe is not in the tree).
 * The floor of a small batch's path: the same batch through
 * /dev/msrbatch_floor (tests/guest/floor/msrbatch_floor.c, msrbatch's ABI
 * and guarantees for RDMSR ops done the least way this kernel allows; the
 * program loads it and unloads it after), plain and prepared; where one of
 * the targets lies below that floor, it is replaced by the floor
 * plus 10 %, as the issue says.
 * With --budget it also prints a `BUDGET name value` line for each of
 * msrbatch's own figures, which tests/harness/icount-budget.sh compares with
 * tests/harness/icount-budget.txt.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <x86intrin.h>

#include "testlib.h"
#include "floor/msrbatch_floor.h"

#define PAT 0x277u
#define NCPU 4
#define MAXN 4096
#define NO_TARGET -1.0

static unsigned long long overhead;

static inline unsigned long long tsc(void)
{
	return __rdtsc();
}

/* The repetitions of a measurement of n ops: 31, fewer for big batches. */
static int reps_for(int n)
{
	return n >= 4096 ? 5 : n >= 512 ? 11 : 31;
}

#define MEASURE(reps, body)                                                    \
	({                                                                     \
		unsigned long long best_ = ~0ULL;                              \
		for (int r_ = 0; r_ <= (reps); r_++) {                         \
			unsigned long long t0_ = tsc();                        \
			body;                                                  \
			unsigned long long d_ = tsc() - t0_;                   \
			if (r_ && d_ < best_) /* the first run warms up */     \
				best_ = d_;                                    \
		}                                                              \
		best_ > overhead ? best_ - overhead : 0;                       \
	})

static struct msrbatch_op ops[NCPU * MAXN];
static struct msrbatch_batch hdr;
static int failed;

static void fill(int ncpus, int per_cpu, int first_cpu)
{
	for (int c = 0; c < ncpus; c++)
		for (int i = 0; i < per_cpu; i++)
			ops[c * per_cpu + i] = mkop(MSRBATCH_OP_RDMSR, first_cpu + c, PAT, 0, 0);
	memset(&hdr, 0, sizeof(hdr));
	hdr.version = MSRBATCH_ABI_VERSION;
	hdr.nr_ops = ncpus * per_cpu;
	hdr.ops = (__u64)(uintptr_t)ops;
}

/* A plain batch of ops[] as fill() left them: instructions of one call. */
static double plain(int fd, int reps)
{
	if (ioctl(fd, MSRBATCH_IOC_BATCH, &hdr) || hdr.nr_failed) {
		printf("# batch of %u ops: %s, %u failed\n", hdr.nr_ops, strerror(errno), hdr.nr_failed);
		failed = 1;
		return -1;
	}
	return MEASURE(reps, ioctl(fd, MSRBATCH_IOC_BATCH, &hdr));
}

/* The rerun of ops[] prepared: instructions of one call. */
static double rerun(int fd, int reps)
{
	int h = prepare(fd, ops, hdr.nr_ops, NULL);
	double t;

	if (h < 0) {
		/* A confined descriptor holds at most 1 MiB of prepared ops. */
		printf("# prepare of %u ops: %s%s\n", hdr.nr_ops, strerror(-h),
		       h == -EDQUOT ? " (the limit of a confined descriptor)" : "");
		failed |= h != -EDQUOT;
		return -1;
	}
	t = MEASURE(reps, ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)h));
	ioctl(fd, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
	return t;
}

/*
 * Whether the floor driver's batch of ops[] read what msrbatch reads: a
 * floor that skipped work would be no floor.
 */
static int floor_agrees(int fd, int priv)
{
	static struct msrbatch_op mine[FLOOR_MAX_OPS];
	struct msrbatch_batch h = hdr;
	unsigned int n = hdr.nr_ops;

	memcpy(mine, ops, n * sizeof(ops[0]));
	h.ops = (__u64)(uintptr_t)mine;
	for (unsigned int i = 0; i < n; i++)
		ops[i].status = -EINPROGRESS, ops[i].val[0] = ops[i].val[1] = ~0ULL;
	if (ioctl(fd, MSRBATCH_IOC_BATCH, &hdr) || hdr.nr_failed) {
		printf("# floor driver: batch of %u ops: %s, %u failed\n", n, strerror(errno), hdr.nr_failed);
		return 0;
	}
	if (ioctl(priv, MSRBATCH_IOC_BATCH, &h) || h.nr_failed) {
		printf("# msrbatch: batch of %u ops: %s, %u failed\n", n, strerror(errno), h.nr_failed);
		return 0;
	}
	/*
	 * And refuse what msrbatch refuses on this path (an RDMSR's unused
	 * inputs must be 0): a floor that skipped the check would be no
	 * floor. On copies, so that ops[] stays as fill() left it.
	 */
	{
		static struct msrbatch_op bad_f[FLOOR_MAX_OPS], bad_m[FLOOR_MAX_OPS];
		struct msrbatch_batch hf = hdr, hm = hdr;
		int ef, em;

		memcpy(bad_f, ops, n * sizeof(ops[0]));
		bad_f[n - 1].arg[1] = 1;
		memcpy(bad_m, bad_f, n * sizeof(ops[0]));
		hf.ops = (__u64)(uintptr_t)bad_f;
		hm.ops = (__u64)(uintptr_t)bad_m;
		ef = ioctl(fd, MSRBATCH_IOC_BATCH, &hf) ? errno : 0;
		em = ioctl(priv, MSRBATCH_IOC_BATCH, &hm) ? errno : 0;
		if (ef != em || hf.err_index != hm.err_index) {
			printf("# floor driver: an RDMSR with arg[1] = 1: %s, err_index %u; msrbatch's %s, err_index %u\n",
			       strerror(ef), hf.err_index, strerror(em), hm.err_index);
			return 0;
		}
	}
	for (unsigned int i = 0; i < n; i++) {
		if (ops[i].status || ops[i].val[0] != mine[i].val[0] || ops[i].val[1] != mine[i].val[1]) {
			printf("# floor driver: op %u: status %d, values %#llx %#llx; msrbatch's %#llx %#llx\n", i,
			       ops[i].status, (unsigned long long)ops[i].val[0], (unsigned long long)ops[i].val[1],
			       (unsigned long long)mine[i].val[0], (unsigned long long)mine[i].val[1]);
			return 0;
		}
	}
	return 1;
}

/* The floor driver's batch of ops[] as fill() left them: instructions of one call. */
static double floor_plain(int priv, int reps)
{
	int fd = open("/dev/msrbatch_floor", O_RDWR | O_CLOEXEC);
	double t = -1;

	if (fd < 0)
		return -1;
	if (!floor_agrees(fd, priv))
		failed = 1;
	else
		t = MEASURE(reps, ioctl(fd, MSRBATCH_IOC_BATCH, &hdr));
	close(fd);
	return t;
}

/* The floor driver's rerun of ops[] prepared (one batch a descriptor). */
static double floor_rerun(int reps)
{
	int fd = open("/dev/msrbatch_floor", O_RDWR | O_CLOEXEC), h;
	double t = -1;

	if (fd < 0)
		return -1;
	h = prepare(fd, ops, hdr.nr_ops, NULL);
	if (h < 0 || ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)h)) {
		printf("# floor driver: prepared batch of %u ops: %s\n", hdr.nr_ops,
		       strerror(h < 0 ? -h : errno));
		failed = 1;
	} else {
		t = MEASURE(reps, ioctl(fd, MSRBATCH_IOC_RUN, (unsigned long)h));
	}
	close(fd);
	return t;
}

static int msr_fd[NCPU];

/* per_cpu preads on each of CPUs first .. first + ncpus - 1. */
static double preads(int ncpus, int per_cpu, int first, int reps)
{
	__u64 v;

	for (int c = first; c < first + ncpus; c++)
		if (msr_fd[c] < 0)
			return -1;
	return MEASURE(reps, for (int c = first; c < first + ncpus; c++) for (int i = 0; i < per_cpu; i++)
				     pread(msr_fd[c], &v, 8, PAT));
}

struct row {
	const char *shape, *path;
	const char *key;	/* of a BUDGET line (--budget), or NULL */
	double value;	/* -1: not measured */
	double target;	/* NO_TARGET: none */
	const char *why;
};

static void print_row(const struct row *r)
{
	char v[32], t[48];

	if (r->value < 0)
		snprintf(v, sizeof(v), "n/a");
	else
		snprintf(v, sizeof(v), "%.1f", r->value);
	if (r->target < 0)
		snprintf(t, sizeof(t), "-");
	else
		snprintf(t, sizeof(t), "<= %.1f (%s)", r->target, r->why);
	printf("| %-34s | %-22s | %9s | %-31s | %-6s |\n", r->shape, r->path, v, t,
	       r->target < 0 ? "" : r->value < 0 ? "MISSED" : r->value <= r->target ? "met" : "MISSED");
}

/* msr-safe in the same kind of run (issue #26; LLNL msr-safe 1.8). */
struct shape {
	const char *name, *key;
	int ncpus, per_cpu, caller;	/* caller: the CPU the program runs on */
	double msr_safe;		/* per call (1 op shapes) or per op */
	double plain_target, prepared_target;
};

static const struct shape shapes[] = {
	{ "1 op, caller local", "local_1", 1, 1, 0, 1152, 700, 450 },
	{ "1 op, caller remote", "remote_1", 1, 1, 1, 1750, NO_TARGET, NO_TARGET },
	{ "4 CPUs x 1 op, whole call", "cpus4x1", NCPU, 1, 0, 3590, 2500, 2000 },
	{ "per op, 4 CPUs x 8", "cpus4x8_per_op", NCPU, 8, 0, 324, NO_TARGET, NO_TARGET },
	{ "per op, 4 CPUs x 64", "cpus4x64_per_op", NCPU, 64, 0, 256, NO_TARGET, NO_TARGET },
	{ "per op, 4 CPUs x 512", "cpus4x512_per_op", NCPU, 512, 0, -1, NO_TARGET, NO_TARGET },
	{ "per op, 4 CPUs x 4096", "cpus4x4096_per_op", NCPU, 4096, 0, -1, NO_TARGET, NO_TARGET },
	{ "per op, 1 CPU x 4096", "cpu1x4096_per_op", 1, 4096, 0, 212.7, 120, 20 },
};


/*
 * The stricter of a target and msr-safe's figure; a target below the floor
 * of its path (floor: the floor driver's figure, or -1) is the floor plus
 * 10 %.
 */
static void add_floored(struct row *rows, int *n, const char *shape, const char *path, double v,
			double target, double msr_safe, double floor)
{
	struct row r = { shape, path, NULL, v, NO_TARGET, "" };

	if (target >= 0 && floor >= 0 && target < floor) {
		target = 1.1 * floor;
		r.why = "floor driver + 10 %";
	} else {
		r.why = "issue #26";
	}
	if (target >= 0 && (msr_safe < 0 || target <= msr_safe)) {
		r.target = target;
	} else if (msr_safe >= 0) {
		r.target = msr_safe;
		r.why = "1.0x msr-safe";
	}
	rows[(*n)++] = r;
}

static void add(struct row *rows, int *n, const char *shape, const char *path, double v,
		double target, double msr_safe)
{
	add_floored(rows, n, shape, path, v, target, msr_safe, -1);
}

static char keys[64][64];
static int nkeys;

/* Names the row for a BUDGET line: PATH_SHAPE. */
static void budget_key(struct row *r, const char *path, const char *shape)
{
	if (nkeys == 64 || r->value < 0)
		return;
	snprintf(keys[nkeys], sizeof(keys[nkeys]), "%s_%s", path, shape);
	r->key = keys[nkeys++];
}

/* The cheapest step of a user loop that reads the TSC, over 1000 steps. */
static unsigned long long loop_step(void)
{
	unsigned long long step = ~0ULL, prev, t;

	prev = tsc();
	for (int i = 0; i < 1000; i++, prev = t) {
		t = tsc();
		if (t - prev < step)
			step = t - prev;
	}
	return step;
}

/*
 * The cheapest interruption of a user loop on this CPU while arm() arms
 * something that interrupts it, over 31 interruptions: the loop's own step
 * is subtracted.
 */
static double cheapest_gap(int (*arm)(void *), void *ctx)
{
	unsigned long long best = ~0ULL, step = loop_step(), prev, t;

	for (int k = 0; k < 31; k++) {
		unsigned long long until;

		if (arm(ctx))
			return -1;
		prev = tsc();
		until = prev + 2000000;
		for (;; prev = t) {
			t = tsc();
			if (t - prev > 64 * step) {
				if (t - prev - step < best)
					best = t - prev - step;
				break;
			}
			if (t > until)
				break;
		}
	}
	return best == ~0ULL ? -1 : (double)best;
}

/* Arms the timerfd *ctx to expire once, 50 us from now. */
static int arm_timerfd(void *ctx)
{
	struct itimerspec it = { .it_value = { 0, 50000 } };

	return timerfd_settime(*(int *)ctx, 0, &it, NULL);
}

#define SAMPLE_GAPS 64

/*
 * The cheapest interruption of a user loop on CPU 0 in which the sampler
 * sfd (mapped with size bytes) took a sample of CPU 0, over up to
 * SAMPLE_GAPS interruptions, the loop's own step subtracted; -1 if none
 * had one. A gap counts only if a sample record's TSC (read just before
 * its first op) falls inside it: the cheapest interruption of any kind
 * may be another (a tick, an IPI), cheaper than a sample, which would
 * make a sample look cheaper than it is. *matched: how many gaps had a
 * sample (one or more).
 */
static double sample_gap(int sfd, size_t size, int *matched)
{
	unsigned long long from[SAMPLE_GAPS], to[SAMPLE_GAPS], best = ~0ULL, step, prev, t, until;
	char had[SAMPLE_GAPS] = { 0 };
	struct msrbatch_ring *ring;
	__u64 head, tail;
	int n = 0;
	void *m;

	*matched = 0;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	if (m == MAP_FAILED)
		return -1;
	ring = m;
	step = loop_step();
	/* Room for every sample of the window: what came before is read. */
	__atomic_store_n(&ring->data_tail, __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	prev = tsc();
	until = prev + SAMPLE_GAPS * 2000000ULL;
	while (n < SAMPLE_GAPS) {
		t = tsc();
		if (t - prev > 64 * step) {
			from[n] = prev;
			to[n++] = t;
		}
		if (t > until)
			break;
		prev = t;
	}
	head = __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE);
	for (tail = ring->data_tail; tail < head;) {
		const struct msrbatch_record *rec =
			(const void *)((char *)m + ring->data_offset + (tail & (ring->data_size - 1)));
		const struct msrbatch_rec_sample *s = (const void *)rec;

		if (rec->size < sizeof(*rec))
			break;
		tail += rec->size;
		if (rec->type != MSRBATCH_REC_SAMPLE || rec->cpu != 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (from[i] < s->tsc && s->tsc < to[i]) {
				/* Counted once a gap, however many samples it had. */
				*matched += !had[i];
				had[i] = 1;
				if (to[i] - from[i] - step < best)
					best = to[i] - from[i] - step;
				break;
			}
		}
	}
	munmap(m, size);
	return best == ~0ULL ? -1 : (double)best;
}

int main(int argc, char **argv)
{
	int budget = argc > 1 && !strcmp(argv[1], "--budget");
	struct row rows[64];
	int nrows = 0, priv, conf = -1, list_loaded = 0, floor_loaded;
	double floor_batch, floor_prepared;
	unsigned long long t0, t1;
	struct timespec a, b;
	double ratio;
	char name[32];

	ksft_print_header();
	pin(0);
	/* Is the TSC an instruction counter? 1 tick per guest ns under icount. */
	clock_gettime(CLOCK_MONOTONIC, &a);
	t0 = tsc();
	for (volatile int i = 0; i < 1000000; i++)
		;
	t1 = tsc();
	clock_gettime(CLOCK_MONOTONIC, &b);
	ratio = (double)(t1 - t0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
	printf("# TSC ticks per guest ns: %.3f%s\n", ratio,
	       ratio > 0.99 && ratio < 1.01 ? " (icount: figures are guest instructions)"
					    : " (NOT icount: figures are TSC ticks, not instructions)");
	overhead = ~0ULL;
	for (int i = 0; i < 1000; i++) {
		t0 = tsc();
		t1 = tsc();
		if (t1 - t0 < overhead)
			overhead = t1 - t0;
	}

	priv = dev_open(O_RDWR);
	if (priv < 0)
		ksft_exit_fail_msg("no /dev/msrbatch\n");
	for (int c = 0; c < NCPU; c++) {
		snprintf(name, sizeof(name), "/dev/cpu/%d/msr", c);
		msr_fd[c] = open(name, O_RDONLY);
	}
	if (msr_fd[0] < 0)
		printf("# the in-tree driver: %s: %s (no CONFIG_X86_MSR, or msr.ko not loaded)\n", "/dev/cpu/0/msr",
		       strerror(errno));

	/* A descriptor confined by an allowlist that lists IA32_PAT. */
	conf = open_confined("0x00000277 0x0000000000000000\n", &list_loaded);
	if (conf < 0)
		printf("# no confined descriptor: %s\n", strerror(errno));

	/* The floor driver, loaded for the run (unloaded at the end). */
	floor_loaded = !system("insmod /lib/modules/msrbatch_floor.ko");
	if (!floor_loaded)
		printf("# no floor driver: insmod /lib/modules/msrbatch_floor.ko failed\n");

	/* Floors. */
	add(rows, &nrows, "floor", "getppid (raw syscall)", MEASURE(31, syscall(SYS_getppid)), NO_TARGET, -1);
	add(rows, &nrows, "floor", "ioctl refused (ENOTTY)",
	    MEASURE(31, ioctl(priv, _IO(MSRBATCH_IOC_MAGIC, 0x7f), 0)), NO_TARGET, -1);
	add(rows, &nrows, "floor", "user RDTSC", MEASURE(31, (void)tsc()), NO_TARGET, -1);

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		const struct shape *sh = &shapes[s];
		int n = sh->ncpus * sh->per_cpu, reps = reps_for(sh->per_cpu);
		double div = n == sh->ncpus ? 1 : n;
		/* The ops' CPUs: the caller's, or (remote) the next one. */
		int first = sh->caller == 1 ? 1 : 0;

		if (sh->ncpus + first > NCPU)
			continue;
		pin(0);
		fill(sh->ncpus, sh->per_cpu, first);
		if (n <= FLOOR_MAX_OPS) {
			floor_batch = floor_plain(priv, reps) / div;
			floor_prepared = floor_rerun(reps) / div;
		} else {
			floor_batch = floor_prepared = -1;
		}
		add_floored(rows, &nrows, sh->name, "msrbatch batch", plain(priv, reps) / div,
			    sh->plain_target, sh->msr_safe, floor_batch);
		budget_key(&rows[nrows - 1], "c_batch", sh->key);
		add_floored(rows, &nrows, sh->name, "msrbatch prepared", rerun(priv, reps) / div,
			    sh->prepared_target, sh->msr_safe, floor_prepared);
		budget_key(&rows[nrows - 1], "c_prepared", sh->key);
		if (conf >= 0) {
			add(rows, &nrows, sh->name, "confined batch", plain(conf, reps) / div, NO_TARGET,
			    sh->msr_safe);
			budget_key(&rows[nrows - 1], "c_confined_batch", sh->key);
			add(rows, &nrows, sh->name, "confined prepared", rerun(conf, reps) / div, NO_TARGET,
			    sh->msr_safe);
			budget_key(&rows[nrows - 1], "c_confined_prepared", sh->key);
		}
		add(rows, &nrows, sh->name, "in-tree pread",
		    n > 4096 ? -1 : preads(sh->ncpus, sh->per_cpu, first, reps) / div, NO_TARGET, -1);
		if (floor_loaded && n <= FLOOR_MAX_OPS) {
			add(rows, &nrows, sh->name, "floor driver batch", floor_batch, NO_TARGET, -1);
			add(rows, &nrows, sh->name, "floor driver prepared", floor_prepared, NO_TARGET, -1);
		}
	}

	/*
	 * Sampler: an hrtimer expiry doing next to nothing, one sample of one
	 * RDMSR, both on CPU 0, where the loop must run (its gaps are matched
	 * to CPU 0's samples).
	 */
	if (pin(0))
		ksft_exit_fail_msg("pinning to CPU 0: %s\n", strerror(errno));
	{
		int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		double floor = tfd < 0 ? -1 : cheapest_gap(arm_timerfd, &tfd);
		double one = -1;
		struct msrbatch_sample_req req;
		int h, sfd = -1;

		if (tfd >= 0)
			close(tfd);
		add(rows, &nrows, "sampler", "hrtimer expiry (floor)", floor, NO_TARGET, -1);
		fill(1, 1, 0);
		h = prepare(priv, ops, 1, NULL);
		if (h >= 0) {
			req_init(&req, h, MSRBATCH_SAMPLE_MIN_PERIOD_NS, 4);
			sfd = sample(priv, &req);
		}
		if (sfd >= 0) {
			int matched;

			one = sample_gap(sfd, req.mmap_size, &matched);
			printf("# sampler: %d of the loop's interruptions on CPU 0 had a sample in them\n", matched);
			close(sfd);
		} else {
			printf("# no sampler: %s\n", strerror(h < 0 ? -h : -sfd));
		}
		if (h >= 0)
			ioctl(priv, MSRBATCH_IOC_UNPREPARE, (unsigned long)h);
		add(rows, &nrows, "sampler", "one sample, 1 RDMSR", one, floor < 0 ? NO_TARGET : 2 * floor, -1);
		if (floor >= 0)
			rows[nrows - 1].why = "2x the floor";
	}

	if (list_loaded && load_list(saved_list))
		printf("# could not put the allowlist back\n");
	if (floor_loaded && system("rmmod msrbatch_floor"))
		printf("# could not unload the floor driver\n");

	printf("| %-34s | %-22s | %9s | %-31s | %-6s |\n", "guest instructions", "path", "figure", "target",
	       "");
	printf("|%s|%s|%s|%s|%s|\n", "------------------------------------", "------------------------",
	       "-----------", "---------------------------------", "--------");
	for (int i = 0; i < nrows; i++)
		print_row(&rows[i]);
	{
		int met = 0, missed = 0;

		for (int i = 0; i < nrows; i++) {
			if (rows[i].target < 0)
				continue;
			if (rows[i].value >= 0 && rows[i].value <= rows[i].target)
				met++;
			else
				missed++;
		}
		printf("# targets: %d met, %d MISSED\n", met, missed);
	}
	/* For tests/harness/icount-budget.sh: msrbatch's own paths. */
	for (int i = 0; budget && i < nrows; i++)
		if (rows[i].key)
			printf("BUDGET %s %.1f\n", rows[i].key, rows[i].value);
	ksft_test_result(!failed, "every measured batch ran\n");
	tests_done();
}
