/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msrbatch: the C functions of the module (helpers.c, sampler_file.c) and
 * the Rust functions they call, for both sides: the C files include it, and
 * bindgen makes the Rust prototypes from it at build time
 * (bindings_helper.h, rust/Kbuild), so the two cannot disagree.
 *
 * Kernel structures appear only as pointers to declared, undefined types:
 * bindgen makes them opaque, and the Rust side casts the kernel crate's
 * pointers to them (the kernel crate's full types reach lock_class_key,
 * which has no fields without lockdep, and rustc would call them not
 * FFI-safe).
 */
#ifndef MSRBATCH_HELPERS_H
#define MSRBATCH_HELPERS_H

#include <linux/types.h>

struct cpumask;
struct preempt_notifier;
struct preempt_ops;
struct vm_area_struct;

int msrbatch_filter_writes(u32 msr, u32 nr_writes);
void msrbatch_rdpmc_policy_init(void);
void msrbatch_rdpmc_policy_exit(void);
int msrbatch_rdpmc_policy(void);
bool msrbatch_xen_pv(void);
void msrbatch_preempt_notifier_init(struct preempt_notifier *n, struct preempt_ops *ops);
int msrbatch_cpumask_of(struct cpumask *mask, const u32 *cpus, size_t nr, size_t stride);
size_t msrbatch_cpumask_bytes(void);
bool msrbatch_cpumask_online(const struct cpumask *mask);
void msrbatch_cpumask_clear(struct cpumask *mask, u32 cpu);
bool msrbatch_current_is_dead(void);
u64 msrbatch_ns_to_tsc(u64 ns);
void msrbatch_log_refused_grant(const char *why);
void *msrbatch_mappable_alloc(unsigned long bytes);
void msrbatch_mappable_free(void *addr);
int msrbatch_mappable_mmap(struct vm_area_struct *vma, void *addr, unsigned long bytes);
void msrbatch_kick_reaper(void);
void msrbatch_reaper_sync(void);
struct miscdevice;
int msrbatch_misc_own_fops(struct miscdevice *misc, unsigned int slot);
struct file;
bool msrbatch_file_has_own_fops(struct file *file);
struct pid;
struct pid *msrbatch_tgid_get(void);
void msrbatch_tgid_put(struct pid *pid);
bool msrbatch_current_in_tgid(struct pid *pid);
bool msrbatch_tgid_alive(struct pid *pid);
bool msrbatch_files_shared_outside_group(void);
unsigned long msrbatch_irq_save(void);

/*
 * User copies without a byte-sized copy loop (helpers.c): words in (an
 * ioctl's argument, a batch's ops), and back out only what a batch changes:
 * each op's status and values, the header's outputs. 0 or -EFAULT.
 */
struct msrbatch_op;
struct msrbatch_batch;
int msrbatch_read_words(void *dst, unsigned long uaddr, unsigned long words);
int msrbatch_write_results(unsigned long uaddr, const struct msrbatch_op *ops, u32 n);
int msrbatch_write_batch_out(unsigned long uaddr, const struct msrbatch_batch *b);
int msrbatch_write_ran(unsigned long uaddr, const struct msrbatch_op *ops, u32 n, unsigned long hdr_uaddr,
		      u32 nr_failed, u64 start_spread);
void msrbatch_irq_restore(unsigned long flags);

/*
 * A CPU's busy credit: the per-CPU storage only (helpers.c's
 * msrbatch_credits). Its one field is busy.rs's Credit, which has the rule
 * and is the only user.
 */
struct msrbatch_credit {
	u64 full_at;
};

/*
 * A prepared batch's run lock (prepared.rs's RunLock, which takes and
 * releases it in line): the slow paths, where a run waits for its ticket
 * and where the run that releases it wakes the waiters.
 */
void msrbatch_run_lock_wait(atomic_t *serving, unsigned int ticket);
void msrbatch_run_lock_wake(atomic_t *serving);
void msrbatch_run_lock_acquire(void);
void msrbatch_run_lock_release(void);

void msrbatch_this_cpu_refuses(u64 tsc);
bool msrbatch_cpu_refuses(unsigned int cpu);
bool msrbatch_some_cpu_refuses(void);

/* Implemented in Rust (pce.rs; its definition is checked against this). */
void msrbatch_reap_grants(void);
/* Implemented in Rust (msrbatch_main.rs): a descriptor of /dev/msrbatch closes. */
void msrbatch_dev_flush(struct file *file);

/* Samplers (sampler_file.c; the Rust half is sampler.rs). */
struct msrbatch_sampler;

#define MSRBATCH_SAMPLER_READABLE	1u	/* msrbatch_sampler_ready() bits */
#define MSRBATCH_SAMPLER_HUP		2u

int msrbatch_sampler_init(void);
void msrbatch_sampler_exit(void);
struct msrbatch_sampler *msrbatch_sampler_new(u64 period_ns, u64 *epoch_ns);
void msrbatch_sampler_free(struct msrbatch_sampler *s);
bool msrbatch_sampler_stop(struct msrbatch_sampler *s);
unsigned long msrbatch_sampler_lock(struct msrbatch_sampler *s);
void msrbatch_sampler_unlock(struct msrbatch_sampler *s, unsigned long flags);
void msrbatch_sampler_wake(struct msrbatch_sampler *s);
void msrbatch_sampler_wake_all(struct msrbatch_sampler *s);
int msrbatch_sampler_install(struct msrbatch_sampler *s, void *owner);

/*
 * Implemented in Rust (sampler.rs, whose definitions are checked against
 * these); owner is the Rust half.
 */
bool msrbatch_sampler_samples(void *owner, unsigned int cpu);
void msrbatch_sampler_tick(void *owner, unsigned int cpu, u64 seq);
void msrbatch_sampler_cpu_event(void *owner, unsigned int cpu, bool online, u64 seq);
void msrbatch_sampler_mark_stopped(void *owner);
unsigned int msrbatch_sampler_ready(void *owner);
int msrbatch_sampler_mmap(void *owner, struct vm_area_struct *vma, unsigned long len);
long msrbatch_sampler_ioctl(void *owner, unsigned int cmd, unsigned long arg);
void msrbatch_sampler_release(void *owner);

/*
 * The msr-safe personality (msr_safe.c; the Rust half is msr_safe.rs, whose
 * definitions are checked against these). An open node's private data is
 * the Rust half's per-open state.
 */
int msrbatch_ms_init(void);
void msrbatch_ms_exit(void);
void *msrbatch_ms_open(bool render);
void msrbatch_ms_release(void *f);
const u8 *msrbatch_ms_text(void *f, size_t *len);
long msrbatch_ms_ioctl(void *f, unsigned int cmd, unsigned long arg, bool readable, bool writable);
int msrbatch_ms_msr(void *f, unsigned int cpu, u32 msr, u64 *val, bool writable, bool write);
int msrbatch_ms_load(const u8 *text, size_t len);

#endif /* MSRBATCH_HELPERS_H */
