/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the sampler guest tests (sample_test, sample_limits_test) share:
 * opening the device, preparing a batch, filling and sending a
 * MSRBATCH_IOC_SAMPLE request, and sleeping. Included after testlib.h.
 */
#ifndef MSRBATCH_SAMPLELIB_H
#define MSRBATCH_SAMPLELIB_H

#include <errno.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <time.h>

#define PAGE 4096u

static inline int dev_open(int flags)
{
	return open("/dev/msrbatch", flags | O_CLOEXEC);
}

/* Prepares ops on fd; the handle or -errno. */
static inline int prepare(int fd, struct msrbatch_op *ops, unsigned int n)
{
	struct msrbatch_prepare p;

	memset(&p, 0, sizeof(p));
	p.version = MSRBATCH_ABI_VERSION;
	p.nr_ops = n;
	p.ops = (__u64)(uintptr_t)ops;
	return ioctl(fd, MSRBATCH_IOC_PREPARE, &p) ? -errno : (int)p.handle;
}

static inline void req_init(struct msrbatch_sample_req *r, int handle, __u64 period, __u32 pages)
{
	memset(r, 0, sizeof(*r));
	r->version = MSRBATCH_ABI_VERSION;
	r->handle = handle;
	r->period_ns = period;
	r->ring_pages = pages;
}

/* Starts a sampler; its descriptor or -errno. */
static inline int sample(int fd, struct msrbatch_sample_req *r)
{
	int s = ioctl(fd, MSRBATCH_IOC_SAMPLE, r);

	return s < 0 ? -errno : s;
}

static inline void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static inline void sleep_ms(long ms)
{
	sleep_us(ms * 1000);
}

#endif /* MSRBATCH_SAMPLELIB_H */
