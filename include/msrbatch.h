/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msrbatch C API: batched, per-CPU atomic access to x86 MSRs, performance
 * counters, the TSC and CPUID through /dev/msrbatch.
 *
 * Link with -lmsrbatch (pkg-config: msrbatch). Every function returns 0 or a
 * non-negative value on success and a negative errno on failure. Op codes,
 * limits and the meaning of val[0]/val[1] are those of <linux/msrbatch.h>
 * (Documentation/abi.md); programs that prefer raw ioctls can use that header
 * alone.
 */
#ifndef MSRBATCH_H
#define MSRBATCH_H

#include <stddef.h>
#include <stdint.h>
#include <linux/msrbatch.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open /dev/msrbatch (Rust: msrbatch::Device). */
struct msrbatch;
/*
 * A batch (Rust: msrbatch::Batch): its ops and, after a run, their results.
 * The library hands it to the kernel as the struct msrbatch_batch of
 * <linux/msrbatch.h> and the ops array that points to. Reusable: run it again
 * to get fresh results.
 */
struct msrbatch_batch_buf;

/*
 * Opens @path (NULL: "/dev/msrbatch"); without CAP_SYS_RAWIO, the descriptor
 * may do what the allowlist in force at open allows. msrbatch_open() opens
 * for reading and writing when the node lets the caller write, else
 * read-only (a node of mode 0640 for a group); msrbatch_open_read_only()
 * always read-only, for programs that only read. On a read-only descriptor,
 * batches that write, restore on close and RDPMC grants fail with -EBADF.
 */
/*
 * The library's version, "MAJOR.MINOR.PATCH" (a static string); the shared
 * library's SONAME is libmsrbatch.so.MAJOR.
 */
const char *msrbatch_version(void);

int msrbatch_open(const char *path, struct msrbatch **dev);
int msrbatch_open_read_only(const char *path, struct msrbatch **dev);
/* 1 if @dev was opened read-only, 0 if not, -EINVAL for a model. */
int msrbatch_is_read_only(const struct msrbatch *dev);
void msrbatch_close(struct msrbatch *dev);
int msrbatch_info(const struct msrbatch *dev, struct msrbatch_info *info);

/*
 * The online CPUs (/sys/devices/system/cpu/online), ascending: the first @max
 * go to @cpus (NULL if @max is 0); returns how many there are (more than @max:
 * call again with more room), or a negative errno. Loop over these, not to
 * sysconf(_SC_NPROCESSORS_ONLN), which misses CPUs above an offline one.
 */
long msrbatch_online_cpus(uint32_t *cpus, size_t max);

struct msrbatch_batch_buf *msrbatch_batch_new(void);
void msrbatch_batch_free(struct msrbatch_batch_buf *batch);
/* On each CPU, stop at the first failing op (the rest get -ECANCELED). */
void msrbatch_batch_stop_on_error(struct msrbatch_batch_buf *batch, int stop);
/*
 * Synchronised start (MSRBATCH_F_SYNC_START): the CPUs start together, or
 * nothing runs and the run fails with -ETIMEDOUT.
 */
void msrbatch_batch_sync_start(struct msrbatch_batch_buf *batch, int on);
/*
 * Per-op timestamps (MSRBATCH_F_TIMESTAMPS): val[1] of every op that ran is
 * the TSC right after it. A batch with RDTSCP, CPUID or RMWMSR is refused
 * (-EINVAL, the op named by msrbatch_batch_err_index()).
 */
void msrbatch_batch_timestamps(struct msrbatch_batch_buf *batch, int on);
size_t msrbatch_batch_len(const struct msrbatch_batch_buf *batch);

/* Each appends one op for @cpu and returns its index, or a negative errno. */
long msrbatch_batch_rdmsr(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t msr);
long msrbatch_batch_wrmsr(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t msr,
			  uint64_t value);
long msrbatch_batch_rmwmsr(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t msr,
			   uint64_t clear, uint64_t set);
long msrbatch_batch_rdpmc(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t ecx);
long msrbatch_batch_rdtsc(struct msrbatch_batch_buf *batch, uint32_t cpu);
long msrbatch_batch_rdtscp(struct msrbatch_batch_buf *batch, uint32_t cpu);
long msrbatch_batch_cpuid(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t leaf,
			  uint32_t subleaf);
long msrbatch_batch_delay(struct msrbatch_batch_buf *batch, uint32_t cpu, uint64_t ns);
long msrbatch_batch_rdcr4(struct msrbatch_batch_buf *batch, uint32_t cpu);
/*
 * Appends a POLL (<linux/msrbatch.h>'s MSRBATCH_OP_POLL): @flags are
 * MSRBATCH_POLL_F_* (RDPMC: @reg is an RDPMC selector; TSC: the TSC, @reg 0;
 * neither: MSR @reg; EQUAL: until (value & @mask) == @equals, else @equals
 * is 0; COUNT: val[1] is reads << 32 | ticks), @timeout_us 1 ..
 * MSRBATCH_MAX_POLL_NS / 1000. Its result (msrbatch_result()) is val[0] the
 * last value read, val[1] the TSC of that read (or reads and ticks), status
 * 0 or -ETIMEDOUT (no change in time; val still set). -EINVAL for unknown
 * or conflicting flags.
 */
long msrbatch_batch_poll(struct msrbatch_batch_buf *batch, uint32_t cpu, uint32_t flags,
			 uint32_t reg, uint64_t mask, uint64_t equals, uint32_t timeout_us);

/*
 * Runs @batch: 0 when it ran (look at each op's result), a negative errno when
 * the kernel refused it and nothing ran; then msrbatch_batch_err_index() names
 * the op it blamed, or returns -1.
 */
int msrbatch_run(const struct msrbatch *dev, struct msrbatch_batch_buf *batch);
/*
 * Checks @batch against the kernel's limits that need nothing but the batch
 * (MSRBATCH_MAX_OPS, MSRBATCH_MAX_DELAY_NS, MSRBATCH_MAX_CPU_DELAY_NS,
 * MSRBATCH_MAX_POLL_NS, timestamps with RDTSCP/CPUID/RMWMSR/POLL) without an ioctl: 0, or the negative
 * errno the kernel would return (msrbatch_batch_err_index() names the op).
 * When this or msrbatch_run(), msrbatch_prepare(), msrbatch_prepared_run() or
 * msrbatch_sampler_start() fails, msrbatch_last_error() says why in words,
 * naming the limit and the value that broke it.
 */
int msrbatch_batch_check(struct msrbatch_batch_buf *batch);
uint32_t msrbatch_batch_nr_failed(const struct msrbatch_batch_buf *batch);
long msrbatch_batch_err_index(const struct msrbatch_batch_buf *batch);
/* TSC ticks between the first and the last CPU starting the last run (0 on one CPU). */
uint64_t msrbatch_batch_start_spread(const struct msrbatch_batch_buf *batch);

/*
 * Copies op @index's outputs to @val (may be NULL) and returns its status:
 * 0, -EIO (the instruction faulted), -ECANCELED or -ETIME (not run),
 * -ETIMEDOUT (a poll saw no change in time); -ERANGE for an index past the end.
 */
int msrbatch_result(const struct msrbatch_batch_buf *batch, size_t index, uint64_t val[2]);

/*
 * Prepared batches (Rust: msrbatch::Prepared): the kernel validates and keeps
 * a copy of @batch (its flags too); each msrbatch_prepared_run() runs that
 * copy again without copying or checking anything, and writes the results
 * into a read-only mapping that msrbatch_prepared_result() reads.
 * msrbatch_prepare() fails as msrbatch_run() does (msrbatch_batch_err_index()
 * names the op), with -ENOSPC (64 prepared batches on @dev already), or with
 * -EOPNOTSUPP on a model. @dev stays open until msrbatch_prepared_free().
 */
struct msrbatch_prepared;

int msrbatch_prepare(const struct msrbatch *dev, struct msrbatch_batch_buf *batch,
		     struct msrbatch_prepared **prep);
/* Runs it: the number of failed ops, or a negative errno (nothing ran). */
int msrbatch_prepared_run(const struct msrbatch_prepared *prep);
size_t msrbatch_prepared_len(const struct msrbatch_prepared *prep);
/* As msrbatch_result(), for the last run (all zero before the first). */
int msrbatch_prepared_result(const struct msrbatch_prepared *prep, size_t index, uint64_t val[2]);
/* Unmaps the results and frees the kernel's copy. */
void msrbatch_prepared_free(struct msrbatch_prepared *prep);

/*
 * Samplers (MSRBATCH_IOC_SAMPLE): every @period_ns, each CPU of @prep runs its
 * ops (RDMSR, RDPMC, RDTSC, RDTSCP, CPUID only) and appends a record to a ring
 * of @ring_pages pages (a power of two, at most 1024) that
 * msrbatch_sampler_read() copies records out of, one at a time. The fd polls
 * readable (POLLIN) once @watermark bytes are unread (0: one record), POLLHUP
 * once stopped. msrbatch_sampler_start() returns 0 or a negative errno:
 * -EINVAL (an op that cannot be sampled; ring pages; the watermark), -E2BIG (over 64 ops on a CPU; ring pages), -ERANGE (period not
 * within 100 us..60 s), -ENOSPC (64 samplers in the system); then
 * msrbatch_last_error() says why, naming the op to blame. The sampler
 * outlives @prep and its device: they may be freed while it runs.
 */
struct msrbatch_sampler;

/*
 * A record: @type is MSRBATCH_REC_SAMPLE, _LOST, _ONLINE or _OFFLINE (of
 * <linux/msrbatch.h>); @seq and @tsc for SAMPLE, ONLINE and OFFLINE; @failed
 * (bit i: op i faulted) and @nr (the CPU's ops) for SAMPLE; @lost for LOST.
 */
struct msrbatch_sampler_record {
	uint32_t type;
	uint32_t cpu;
	uint64_t seq;
	uint64_t tsc;
	uint64_t failed;
	uint64_t lost;
	uint32_t nr;
	uint32_t reserved;
};

int msrbatch_sampler_start(const struct msrbatch_prepared *prep, uint64_t period_ns,
			   uint32_t ring_pages, uint32_t watermark,
			   struct msrbatch_sampler **sampler);
/* The sampler's descriptor, for poll(); owned by the sampler. */
int msrbatch_sampler_fd(const struct msrbatch_sampler *sampler);
/*
 * Reads the next record into @rec: 1, or 0 if none is unread, or -EBADMSG
 * (the ring breaks the ABI). A SAMPLE's values go to @vals as pairs:
 * @vals[2 * i] and @vals[2 * i + 1] are val[0] and val[1] of the CPU's op i,
 * in batch order, for at most @max_pairs of the @rec->nr ops;
 * MSRBATCH_SAMPLE_MAX_OPS pairs always suffice.
 */
int msrbatch_sampler_read(struct msrbatch_sampler *sampler, struct msrbatch_sampler_record *rec,
			  uint64_t *vals, size_t max_pairs);
/* Stops sampling; each CPU appends an OFFLINE record; the ring stays readable. */
int msrbatch_sampler_stop(const struct msrbatch_sampler *sampler);
/* Records lost so far because the ring was full, on all CPUs. */
uint64_t msrbatch_sampler_lost(const struct msrbatch_sampler *sampler);
/* Unmaps the ring and closes the descriptor, which stops and frees the sampler. */
void msrbatch_sampler_free(struct msrbatch_sampler *sampler);

/*
 * Restore on close (MSRBATCH_IOC_RESTORE_ON_CLOSE): from now on, every MSR a
 * batch on @dev writes is written back when @dev is closed, also when the
 * process is killed; -EBADF if @dev was opened read-only.
 * msrbatch_restore_now() writes them back at once and returns how many could
 * not be. Both are -EOPNOTSUPP on a model.
 */
int msrbatch_restore_on_close(const struct msrbatch *dev);
int msrbatch_restore_now(const struct msrbatch *dev);

/*
 * User-mode RDPMC (CR4.PCE) for the calling thread (Documentation/pce.md).
 * msrbatch_grant_rdpmc() grants it to the calling thread until revoke, close
 * of @dev or the thread's exit; msrbatch_grant_rdpmc_program() to the calling
 * thread, the other threads of its process and every thread and process they
 * create from then on, until revoke or the calling thread's exit
 * (-EOPNOTSUPP on a kernel without tracepoints).
 */
int msrbatch_grant_rdpmc(const struct msrbatch *dev);
int msrbatch_grant_rdpmc_program(const struct msrbatch *dev);
int msrbatch_revoke_rdpmc(const struct msrbatch *dev);

/*
 * Counter programming (Documentation/counters.md). A PMU model of the CPUs of
 * a CPUID dump can stand in for the device: msrbatch_open_model() returns a
 * struct msrbatch that every function here (and msrbatch_run()) accepts;
 * msrbatch_info() and the RDPMC grants return -EOPNOTSUPP on it.
 */
int msrbatch_open_model(const char *cpuid_dump, struct msrbatch **dev);
/* On a model: each cycle of a DELAY op adds @per_cycle to @event. */
int msrbatch_model_delay_mix(const struct msrbatch *dev, const char *event, uint32_t per_cycle);

/* Counters programmed on one CPU. */
struct msrbatch_counters;

/* Do not refuse counters that seem owned (enabled, in use, NMI watchdog). */
#define MSRBATCH_COUNTERS_FORCE 1u

/*
 * Probes @cpu's PMU, places @events ("instructions,cycles",
 * "event=0x0e:umask=0x01:usr", as msrbatch stat -e) on its counters, checks
 * nobody owns them and programs them, stopped. @dev stays open until
 * msrbatch_counters_close(). Errors: -EINVAL, -ENODEV (no PMU), -EOPNOTSUPP
 * (an event this CPU lacks), -ENOSPC (too many events), -EBUSY (owned), -EIO
 * (an MSR faulted; nothing stays changed). msrbatch_last_error() says more.
 */
int msrbatch_counters_open(const struct msrbatch *dev, uint32_t cpu, const char *events,
			   unsigned int flags, struct msrbatch_counters **ctr);
size_t msrbatch_counters_len(const struct msrbatch_counters *ctr);
/* "EVENT: COUNTER ..." of event @i, like snprintf; -ERANGE past the end. */
int msrbatch_counters_describe(const struct msrbatch_counters *ctr, size_t i, char *buf,
			       size_t len);
/* Each runs one batch; @values (may be NULL) gets one count per event. */
int msrbatch_counters_start(const struct msrbatch_counters *ctr, uint64_t *values);
int msrbatch_counters_stop(const struct msrbatch_counters *ctr, uint64_t *values);
int msrbatch_counters_read(const struct msrbatch_counters *ctr, uint64_t *values);
/* The same ops appended to your own batch, to measure within it. */
int msrbatch_counters_push_start(const struct msrbatch_counters *ctr,
				 struct msrbatch_batch_buf *batch);
int msrbatch_counters_push_stop(const struct msrbatch_counters *ctr,
				struct msrbatch_batch_buf *batch);
/* Returns a handle for msrbatch_counters_values(), or a negative errno. */
long msrbatch_counters_push_read(const struct msrbatch_counters *ctr,
				 struct msrbatch_batch_buf *batch);
int msrbatch_counters_values(const struct msrbatch_counters *ctr,
			     const struct msrbatch_batch_buf *batch, long reading, uint64_t *values);
/* @out[i] = @end[i] - @start[i] modulo the counter's width. */
int msrbatch_counters_deltas(const struct msrbatch_counters *ctr, const uint64_t *start,
			     const uint64_t *end, uint64_t *out);
/*
 * Puts back every MSR the counters touched: 0, 1 if a counter value could not
 * be restored exactly (see msrbatch_last_error()), or a negative errno.
 */
int msrbatch_counters_restore(struct msrbatch_counters *ctr);
/* Restores (unless msrbatch_counters_restore() ran) and frees. */
void msrbatch_counters_close(struct msrbatch_counters *ctr);
/*
 * What this thread's last failed call said; "" if none. For a refused batch,
 * prepared batch or sampler: the errno and why, naming the limit.
 */
const char *msrbatch_last_error(void);

/* "EIO" for EIO or -EIO; NULL for values this API does not produce. */
const char *msrbatch_errno_name(int err);

#ifdef __cplusplus
}
#endif

#endif /* MSRBATCH_H */
