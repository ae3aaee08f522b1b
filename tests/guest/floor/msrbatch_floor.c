// SPDX-License-Identifier: GPL-2.0
/*
 * TEST ONLY, loaded in the benchmark guest and nowhere else: the floor of
 * msrbatch's ioctl paths, measured. /dev/msrbatch_floor takes msrbatch's ABI
 * (struct msrbatch_batch and struct msrbatch_op, MSRBATCH_IOC_BATCH,
 * MSRBATCH_IOC_PREPARE and MSRBATCH_IOC_RUN) for the one case issue #26's
 * small shapes use, and does for it only what that ABI and msrbatch's
 * guarantees require, the least way this kernel allows:
 *
 *  - a batch of 1 to FLOOR_MAX_OPS RDMSR ops without flags or other
 *    inputs (arg 0, as msrbatch checks), from a descriptor opened with
 *    CAP_SYS_RAWIO (nothing to check per MSR) and for reading;
 *  - the header and the ops read word by word (a user copy of 64 bytes or
 *    more is a `rep movsb` here, one guest instruction a byte), each op's
 *    status and value written back, and the header's four outputs;
 *  - each op's CPU checked online, with preemption off from the check to
 *    the end of the cross-call, so none goes offline meanwhile (cheaper than
 *    the hotplug lock);
 *  - each CPU's ops in order with interrupts off (a cross-call's handler has
 *    them off; on the caller's CPU alone, local_irq_save()), each with its
 *    own status (-EIO when the RDMSR faults);
 *  - the busy budget: each CPU's credit, a TSC stamp from which it is full
 *    again, read before the ops (a CPU with no credit left runs none of
 *    them: -ETIME) and charged five times the ticks they took;
 *  - the start spread of a multi-CPU batch (each CPU's first TSC);
 *  - a prepared batch: validated once and kept under a handle (up to
 *    MSRBATCH_MAX_PREPARED a descriptor, until MSRBATCH_IOC_UNPREPARE or
 *    close), its CPUs' mask made once; a rerun finds it by its handle with
 *    preemption off (the run keeps it off anyway; UNPREPARE frees after
 *    synchronize_rcu()), runs it and puts each op's status and value
 *    straight into the batch's results (kernel memory, as msrbatch's
 *    mapped results are), one run at a time.
 *
 * Everything else msrbatch does (other ops and flags, allowlists, the
 * restore log, samplers, big batches) is left out: for these shapes it is
 * not the floor. tests/guest/icount_bench.c measures this driver's paths next
 * to msrbatch's; a target of the issue that lies below this floor is
 * replaced by the floor plus 10 %.
 */
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/uaccess.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "../../../include/uapi/linux/msrbatch.h"
#include "msrbatch_floor.h"

/* The end of a CPU's chain of ops. */
#define FLOOR_END 0xff

/* The TSC from which a CPU's busy credit is full again. */
static DEFINE_PER_CPU(u64, floor_full_at);
/* MSRBATCH_MAX_CPU_BUSY_NS in TSC ticks. */
static u64 floor_budget;

struct floor_batch {
	unsigned long running;
	unsigned int nr_ops;
	struct msrbatch_op ops[FLOOR_MAX_OPS];
	struct cpumask cpus;
	/* Each CPU's ops, in order: its first, each one's next, its last. */
	u8 first[NR_CPUS], next[FLOOR_MAX_OPS], last[NR_CPUS];
	/* A run's: each op's outputs, its failed ops, each CPU's first TSC. */
	struct msrbatch_result *out;
	atomic_t nr_failed;
	u64 start[NR_CPUS];
};

/* What a descriptor holds: its prepared batches, by handle (RCU). */
struct floor_file {
	struct floor_batch __rcu *prepared[MSRBATCH_MAX_PREPARED];
	/* Serialises PREPARE and UNPREPARE's changes of the slots. */
	struct mutex lock;
};

/* Runs this CPU's ops of @info, a struct floor_batch, interrupts off. */
static void floor_run_here(void *info)
{
	struct floor_batch *b = info;
	unsigned int cpu = smp_processor_id(), i;
	u64 *full_at = this_cpu_ptr(&floor_full_at);
	u64 start = rdtsc(), deficit;
	int refused, failed = 0;

	deficit = *full_at > start ? *full_at - start : 0;
	refused = deficit / 4 >= floor_budget;
	b->start[cpu] = start;
	for (i = b->first[cpu]; i != FLOOR_END; i = b->next[i]) {
		const struct msrbatch_op *op = &b->ops[i];
		struct msrbatch_result *r = &b->out[i];
		u64 v = 0;

		if (refused)
			r->status = -ETIME;
		else
			r->status = rdmsrq_safe(op->reg, &v) ? -EIO : 0;
		r->val[0] = v;
		r->val[1] = 0;
		failed += r->status != 0;
	}
	if (!refused)
		*full_at = max(*full_at, start) + 5 * (rdtsc() - start);
	if (failed)
		atomic_add(failed, &b->nr_failed);
}

/* Runs @b on its CPUs, its outputs into @out; returns its failed ops. */
static u32 floor_run(struct floor_batch *b, struct msrbatch_result *out)
{
	unsigned int cpu;

	b->out = out;
	atomic_set(&b->nr_failed, 0);
	preempt_disable();
	cpu = smp_processor_id();
	if (!cpumask_subset(&b->cpus, cpu_online_mask)) {
		preempt_enable();
		return U32_MAX;
	}
	if (cpumask_equal(&b->cpus, cpumask_of(cpu))) {
		unsigned long flags;

		local_irq_save(flags);
		floor_run_here(b);
		local_irq_restore(flags);
	} else {
		on_each_cpu_mask(&b->cpus, floor_run_here, b, true);
	}
	preempt_enable();
	return atomic_read(&b->nr_failed);
}

/* The spread of the CPUs' starts of the run of @b just done. */
static u64 floor_spread(const struct floor_batch *b)
{
	u64 first = U64_MAX, last = 0;
	unsigned int cpu;

	for_each_cpu(cpu, &b->cpus) {
		first = min(first, b->start[cpu]);
		last = max(last, b->start[cpu]);
	}
	return last - first;
}

/*
 * Reads @nr ops from @uops into @b, checks them (RDMSR without flags on a
 * possible CPU) and chains each CPU's. Returns 0, -EFAULT, or -EINVAL with
 * *@bad the op's index.
 */
static int floor_read_ops(struct floor_batch *b, u64 uops, u32 nr, u32 *bad)
{
	const u64 __user *src = u64_to_user_ptr(uops);
	u64 *dst = (u64 *)b->ops;
	unsigned int i, w, words = nr * sizeof(struct msrbatch_op) / sizeof(u64);

	if (!user_read_access_begin(src, words * sizeof(u64)))
		return -EFAULT;
	for (w = 0; w < words; w += 6) {
		unsafe_get_user(dst[w], &src[w], fault);
		unsafe_get_user(dst[w + 1], &src[w + 1], fault);
		unsafe_get_user(dst[w + 2], &src[w + 2], fault);
		unsafe_get_user(dst[w + 3], &src[w + 3], fault);
		unsafe_get_user(dst[w + 4], &src[w + 4], fault);
		unsafe_get_user(dst[w + 5], &src[w + 5], fault);
	}
	user_read_access_end();
	b->nr_ops = nr;
	cpumask_clear(&b->cpus);
	for (i = 0; i < nr; i++) {
		const struct msrbatch_op *op = &b->ops[i];

		if (op->op != MSRBATCH_OP_RDMSR || op->flags || op->arg[0] || op->arg[1] ||
		    op->cpu >= nr_cpu_ids || !cpu_possible(op->cpu)) {
			*bad = i;
			return -EINVAL;
		}
		if (cpumask_test_cpu(op->cpu, &b->cpus))
			b->next[b->last[op->cpu]] = i;
		else
			b->first[op->cpu] = i;
		__cpumask_set_cpu(op->cpu, &b->cpus);
		b->last[op->cpu] = i;
		b->next[i] = FLOOR_END;
	}
	return 0;
fault:
	user_read_access_end();
	return -EFAULT;
}

/* Reads the header fields at @uhdr that a batch and a prepare share. */
static int floor_header(const struct msrbatch_batch __user *uhdr, struct msrbatch_batch *h)
{
	const u64 __user *src = (const u64 __user *)uhdr;
	u64 *dst = (u64 *)h;

	if (!user_read_access_begin(src, sizeof(*h)))
		return -EFAULT;
	unsafe_get_user(dst[0], &src[0], fault);
	unsafe_get_user(dst[1], &src[1], fault);
	unsafe_get_user(dst[2], &src[2], fault);
	unsafe_get_user(dst[3], &src[3], fault);
	unsafe_get_user(dst[4], &src[4], fault);
	unsafe_get_user(dst[5], &src[5], fault);
	user_read_access_end();
	if (h->version != MSRBATCH_ABI_VERSION || h->flags || h->reserved0 || !h->nr_ops ||
	    h->nr_ops > FLOOR_MAX_OPS)
		return -EINVAL;
	return 0;
fault:
	user_read_access_end();
	return -EFAULT;
}

static long floor_ioctl_batch(struct msrbatch_batch __user *uhdr)
{
	/* Not zeroed first (CONFIG_INIT_STACK_ALL_ZERO): read before used. */
	struct floor_batch b __uninitialized;
	struct msrbatch_result out[FLOOR_MAX_OPS] __uninitialized;
	struct msrbatch_batch h __uninitialized;
	struct msrbatch_op __user *dst;
	u32 bad = MSRBATCH_NO_INDEX, failed, i;
	int err;

	err = floor_header(uhdr, &h);
	if (!err)
		err = floor_read_ops(&b, h.ops, h.nr_ops, &bad);
	if (err)
		goto answer;
	failed = floor_run(&b, out);
	if (failed == U32_MAX) {
		err = -ENXIO;
		goto answer;
	}
	dst = u64_to_user_ptr(h.ops);
	if (!user_write_access_begin(dst, h.nr_ops * sizeof(*dst)))
		return -EFAULT;
	for (i = 0; i < h.nr_ops; i++) {
		unsafe_put_user(out[i].status, &dst[i].status, wfault);
		unsafe_put_user(out[i].val[0], &dst[i].val[0], wfault);
		unsafe_put_user(out[i].val[1], &dst[i].val[1], wfault);
	}
	user_write_access_end();
	h.nr_failed = failed;
	h.out_flags = MSRBATCH_OUT_RAN;
	h.start_spread = floor_spread(&b);
answer:
	if (err == -EFAULT)
		return err;
	if (err) {
		h.nr_failed = 0;
		h.out_flags = 0;
		h.start_spread = 0;
	}
	h.err_index = bad;
	if (!user_write_access_begin(uhdr, sizeof(*uhdr)))
		return -EFAULT;
	unsafe_put_user(h.nr_failed, &uhdr->nr_failed, wfault);
	unsafe_put_user(h.err_index, &uhdr->err_index, wfault);
	unsafe_put_user(h.out_flags, &uhdr->out_flags, wfault);
	unsafe_put_user(h.start_spread, &uhdr->start_spread, wfault);
	user_write_access_end();
	return err;
wfault:
	user_write_access_end();
	return -EFAULT;
}

static long floor_ioctl_prepare(struct floor_file *ff, struct msrbatch_prepare __user *ureq)
{
	struct msrbatch_prepare req;
	struct floor_batch *b;
	struct msrbatch_result *results;
	u32 bad = MSRBATCH_NO_INDEX, h;
	int err;

	if (copy_from_user(&req, ureq, sizeof(req)))
		return -EFAULT;
	if (req.version != MSRBATCH_ABI_VERSION || req.flags || req.reserved || !req.nr_ops ||
	    req.nr_ops > FLOOR_MAX_OPS)
		return -EINVAL;
	b = kmalloc_obj(*b, GFP_KERNEL_ACCOUNT);
	results = kzalloc_objs(*results, req.nr_ops, GFP_KERNEL_ACCOUNT);
	if (!b || !results) {
		err = -ENOMEM;
		goto fail;
	}
	b->out = results;
	b->running = 0;
	err = floor_read_ops(b, req.ops, req.nr_ops, &bad);
	if (err)
		goto fail;
	mutex_lock(&ff->lock);
	for (h = 0; h < MSRBATCH_MAX_PREPARED; h++)
		if (!rcu_access_pointer(ff->prepared[h]))
			break;
	if (h == MSRBATCH_MAX_PREPARED) {
		mutex_unlock(&ff->lock);
		err = -ENOSPC;
		goto fail;
	}
	req.handle = h;
	req.mmap_offset = 0;
	req.mmap_size = 0;
	req.err_index = MSRBATCH_NO_INDEX;
	if (copy_to_user(ureq, &req, sizeof(req))) {
		mutex_unlock(&ff->lock);
		err = -EFAULT;
		goto fail;
	}
	rcu_assign_pointer(ff->prepared[h], b);
	mutex_unlock(&ff->lock);
	return 0;
fail:
	kfree(b);
	kfree(results);
	if (err == -EINVAL && put_user(bad, &ureq->err_index))
		return -EFAULT;
	return err;
}

static long floor_ioctl_unprepare(struct floor_file *ff, unsigned long handle)
{
	struct floor_batch *b;

	if (handle >= MSRBATCH_MAX_PREPARED)
		return -ENOENT;
	mutex_lock(&ff->lock);
	b = rcu_replace_pointer(ff->prepared[handle], NULL, lockdep_is_held(&ff->lock));
	mutex_unlock(&ff->lock);
	if (!b)
		return -ENOENT;
	synchronize_rcu();
	kfree(b->out);
	kfree(b);
	return 0;
}

static long floor_ioctl_run(struct floor_file *ff, unsigned long handle)
{
	struct floor_batch *b;
	long ret;

	if (handle >= MSRBATCH_MAX_PREPARED)
		return -ENOENT;
	/*
	 * A run is a read-side section (preemption off, which the run keeps
	 * off anyway): UNPREPARE frees after it (synchronize_rcu()).
	 */
	preempt_disable();
	b = rcu_dereference_sched(ff->prepared[handle]);
	if (!b) {
		ret = -ENOENT;
	} else if (test_and_set_bit_lock(0, &b->running)) {
		/* One run at a time: the ops' statuses are the run's scratch space. */
		ret = -EBUSY;
	} else {
		u32 failed = floor_run(b, b->out);

		clear_bit_unlock(0, &b->running);
		ret = failed == U32_MAX ? -ENXIO : failed;
	}
	preempt_enable();
	return ret;
}

static long floor_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct floor_file *ff = file->private_data;

	switch (cmd) {
	case MSRBATCH_IOC_BATCH:
		if (!(file->f_mode & FMODE_READ))
			return -EBADF;
		return floor_ioctl_batch((struct msrbatch_batch __user *)arg);
	case MSRBATCH_IOC_UNPREPARE:
		return floor_ioctl_unprepare(ff, arg);
	case MSRBATCH_IOC_RUN:
		return floor_ioctl_run(ff, arg);
	case MSRBATCH_IOC_PREPARE:
		return floor_ioctl_prepare(ff, (struct msrbatch_prepare __user *)arg);
	default:
		return -ENOTTY;
	}
}

static int floor_open(struct inode *inode, struct file *file)
{
	struct floor_file *ff;

	if (!capable(CAP_SYS_RAWIO))
		return -EPERM;
	ff = kzalloc_obj(*ff, GFP_KERNEL_ACCOUNT);
	if (!ff)
		return -ENOMEM;
	mutex_init(&ff->lock);
	file->private_data = ff;
	return 0;
}

static int floor_release(struct inode *inode, struct file *file)
{
	struct floor_file *ff = file->private_data;
	unsigned int h;

	for (h = 0; h < MSRBATCH_MAX_PREPARED; h++) {
		struct floor_batch *b = rcu_dereference_protected(ff->prepared[h], 1);

		if (b) {
			kfree(b->out);
			kfree(b);
		}
	}
	kfree(ff);
	return 0;
}

static const struct file_operations floor_fops = {
	.owner = THIS_MODULE,
	.open = floor_open,
	.release = floor_release,
	.unlocked_ioctl = floor_ioctl,
};

static struct miscdevice floor_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "msrbatch_floor",
	.fops = &floor_fops,
	.mode = 0600,
};

static int __init floor_init(void)
{
	if (!boot_cpu_has(X86_FEATURE_TSC) || !tsc_khz)
		return -ENODEV;
	floor_budget = div_u64((u64)MSRBATCH_MAX_CPU_BUSY_NS * tsc_khz, 1000000);
	return misc_register(&floor_dev);
}

static void __exit floor_exit(void)
{
	misc_deregister(&floor_dev);
}

module_init(floor_init);
module_exit(floor_exit);
MODULE_DESCRIPTION("TEST ONLY: the floor of msrbatch's small-batch ioctl paths, for its benchmark");
MODULE_LICENSE("GPL");
