// SPDX-License-Identifier: GPL-2.0
/*
 * msrbatch: the small C part of the module.
 *
 * Everything here is a kernel interface that Rust cannot reach from an
 * out-of-tree module (but for three small wrappers on the path of every
 * batch, one call where the kernel crate makes several): macros and inline
 * functions (module_param_cb, pr_*_ratelimited, preempt_notifier_init,
 * irq_work, READ_ONCE on task state, per-CPU variables), and kernel
 * structures that the Rust bindings do not cover (perf's PMU device,
 * mm->context). helpers.h declares these
 * functions for both sides (the Rust prototypes are generated from it;
 * helpers.rs wraps them); each one is a thin wrapper with no policy of its
 * own, except allow_writes, which mirrors arch/x86/kernel/msr.c.
 */

#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/fdtable.h>
#include <linux/fs.h>
#include <linux/irq_work.h>
#include <linux/jiffies.h>
#include <linux/math64.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/pid.h>
#include <linux/perf_event.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <asm/cpufeature.h>
#include <asm/msr-index.h>
#include <asm/tsc.h>

#include "helpers.h"
#include "../include/uapi/linux/msrbatch.h"

/*
 * The version in modinfo (the Rust module! macro has no field for it). In C
 * because MODULE_VERSION's .modinfo entry is what every linker keeps as one
 * section: a Rust `#[used]` static there, which recent rustc emits as
 * used(linker), became a second .modinfo section under GNU ld, and the loader,
 * which reads only the first, refused the module (scripts/check-modinfo.sh).
 */
MODULE_VERSION(MSRBATCH_VERSION);

/* ---- allow_writes: msr.c's switch, for this module ---------------------- */

enum allow_writes {
	ALLOW_WRITES_ON,
	ALLOW_WRITES_OFF,
	ALLOW_WRITES_DEFAULT,
};

static const char *const allow_writes_names[] = {
	[ALLOW_WRITES_ON] = "on",
	[ALLOW_WRITES_OFF] = "off",
	[ALLOW_WRITES_DEFAULT] = "default",
};

static enum allow_writes allow_writes = ALLOW_WRITES_DEFAULT;

static int set_allow_writes(const char *val, const struct kernel_param *kp)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(allow_writes_names); i++) {
		if (sysfs_streq(val, allow_writes_names[i])) {
			WRITE_ONCE(allow_writes, i);
			return 0;
		}
	}
	return -EINVAL;
}

static int get_allow_writes(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", allow_writes_names[READ_ONCE(allow_writes)]);
}

static const struct kernel_param_ops allow_writes_ops = {
	.set = set_allow_writes,
	.get = get_allow_writes,
};

module_param_cb(allow_writes, &allow_writes_ops, NULL, 0600);
MODULE_PARM_DESC(allow_writes,
		 "MSR writes: on (allowed), off (refused with EPERM), default (allowed, logged)");

/*
 * Decides a batch that writes nr_writes MSRs, the first of them msr, for the
 * calling process: -EPERM when writes are off; otherwise 0, with a
 * rate-limited warning in "default" mode, as msr.c's filter_write() does
 * (which also lets MSR_IA32_ENERGY_PERF_BIAS pass silently).
 */
int msrbatch_filter_writes(u32 msr, u32 nr_writes)
{
	switch (READ_ONCE(allow_writes)) {
	case ALLOW_WRITES_ON:
		return 0;
	case ALLOW_WRITES_OFF:
		return -EPERM;
	default:
		if (nr_writes == 1 && msr == MSR_IA32_ENERGY_PERF_BIAS)
			return 0;
		pr_warn_ratelimited("msrbatch: write to MSR 0x%x (%u write ops in the batch) by %s (pid %d)\n",
				    msr, nr_writes, current->comm, task_pid_nr(current));
		return 0;
	}
}

/* ---- perf's rdpmc policy, read from the kernel, not from a path --------- */

/*
 * The x86 core PMU's "rdpmc" attribute (x86_pmu.attr_rdpmc, shown in sysfs
 * as /sys/bus/event_source/devices/cpu/rdpmc). It is found once, at load,
 * through a disabled kernel counter's PMU device, and read through the
 * attribute's own show method, so no mount namespace or file system is
 * involved. The buffer is a page because that is what show methods may
 * assume; the raw lock serialises its users (it may be taken in the
 * scheduler's notifiers, under the runqueue lock, as the innermost lock).
 */
static struct module *rdpmc_pmu_module;
static struct device *rdpmc_dev;
static struct device_attribute *rdpmc_attr;
static char *rdpmc_buf;
static DEFINE_RAW_SPINLOCK(rdpmc_lock);
static int rdpmc_state = -EIO;	/* -ENODEV: no PMU; -EIO: PMU, knob unknown; 0: found */

static struct device_attribute *find_dev_attr(struct device *dev, const char *name)
{
	const struct attribute_group **g;
	struct attribute **a;

	for (g = dev->groups; g && *g; g++)
		for (a = (*g)->attrs; a && *a; a++)
			if (!strcmp((*a)->name, name))
				return container_of(*a, struct device_attribute, attr);
	return NULL;
}

void msrbatch_rdpmc_policy_init(void)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_HW_CPU_CYCLES,
		.disabled = 1,	/* never scheduled: takes no counter */
	};
	struct perf_event *event;
	struct device_attribute *da = NULL;
	int cpu;

	cpus_read_lock();
	cpu = cpumask_first(cpu_online_mask);
	event = perf_event_create_kernel_counter(&attr, cpu, NULL, NULL, NULL);
	if (PTR_ERR_OR_ZERO(event) == -ENOENT) {
		/*
		 * A PMU can lack the generic cycles event (Intel marks it
		 * unavailable from CPUID.0AH:EBX): ask for a raw event, which
		 * skips the event map, before concluding there is no PMU.
		 */
		attr.type = PERF_TYPE_RAW;
		attr.config = 0xc0;	/* instructions retired, Intel and AMD */
		event = perf_event_create_kernel_counter(&attr, cpu, NULL, NULL, NULL);
	}
	cpus_read_unlock();
	if (IS_ERR(event)) {
		/* ENOENT: no PMU handles hardware events, so perf has no policy. */
		rdpmc_state = PTR_ERR(event) == -ENOENT ? -ENODEV : -EIO;
		if (rdpmc_state == -EIO)
			pr_info("msrbatch: cannot read perf's rdpmc setting (%ld): PCE grants refused\n",
				PTR_ERR(event));
		return;
	}
	if (event->pmu->dev)
		da = find_dev_attr(event->pmu->dev, "rdpmc");
	/*
	 * The show method is the PMU driver's code: a modular PMU (none on x86
	 * but the test PMU of tests/guest/test-pmu) stays loaded while we may
	 * call it.
	 */
	if (da && da->show && try_module_get(event->pmu->module)) {
		rdpmc_buf = (char *)__get_free_page(GFP_KERNEL);
		if (rdpmc_buf) {
			rdpmc_pmu_module = event->pmu->module;
			rdpmc_dev = get_device(event->pmu->dev);
			rdpmc_attr = da;
			rdpmc_state = 0;
		} else {
			module_put(event->pmu->module);
		}
	}
	perf_event_release_kernel(event);
	if (rdpmc_state)
		pr_info("msrbatch: the PMU has no readable rdpmc setting: PCE grants refused\n");
}

void msrbatch_rdpmc_policy_exit(void)
{
	if (rdpmc_dev) {
		put_device(rdpmc_dev);
		module_put(rdpmc_pmu_module);
	}
	free_page((unsigned long)rdpmc_buf);
}

/*
 * perf's user-RDPMC policy now: 0 (never), 1 (processes with a perf event
 * mmapped), 2 (always); -ENODEV when there is no PMU and so no policy;
 * -EIO when it cannot be read. Any context.
 */
int msrbatch_rdpmc_policy(void)
{
	unsigned long flags;
	ssize_t n;
	int v;

	if (rdpmc_state)
		return rdpmc_state;
	raw_spin_lock_irqsave(&rdpmc_lock, flags);
	n = rdpmc_attr->show(rdpmc_dev, rdpmc_attr, rdpmc_buf);
	v = n > 0 && rdpmc_buf[0] >= '0' && rdpmc_buf[0] <= '2' ? rdpmc_buf[0] - '0' : -EIO;
	raw_spin_unlock_irqrestore(&rdpmc_lock, flags);
	return v;
}

/* Under Xen PV, CR4 is the hypervisor's: a grant could not set PCE. */
bool msrbatch_xen_pv(void)
{
	return boot_cpu_has(X86_FEATURE_XENPV);
}

/* ---- small wrappers for inline kernel helpers --------------------------- */

/*
 * The next ones Rust could reach through the kernel crate (CpuId, Cpumask),
 * at five calls and four calls where these make one: they are on the path of
 * every batch (Documentation/benchmarks.md). (Whether a CPU is possible Rust
 * reads in __cpu_possible_mask itself, cheaper than any call: batch.rs's
 * cpu_possible.)
 */

/*
 * Makes mask (cpumask_size() bytes, any contents) the nr CPU numbers at
 * cpus, each stride bytes after the last (a batch's CPUs: a field of an
 * array of structures), in one call where one per CPU cost a call and a
 * conversion each; the mask is cleared here, where only cpumask_size()
 * bytes are, not in Rust, which cleared all of a mask for 512 CPUs and
 * moved it. 0, or -ENODEV if one is no CPU number (below nr_cpu_ids; mask
 * left part set), or -ENXIO if one is offline (the caller holds the hotplug
 * lock): a batch checks its CPUs in one call, not one to set and one to
 * look.
 */
int msrbatch_cpumask_of(struct cpumask *mask, const u32 *cpus, size_t nr, size_t stride)
{
	const char *at = (const char *)cpus;

	cpumask_clear(mask);
	for (; nr; nr--, at += stride) {
		u32 cpu = *(const u32 *)at;

		if (cpu >= nr_cpu_ids)
			return -ENODEV;
		__cpumask_set_cpu(cpu, mask);
	}
	return cpumask_subset(mask, cpu_online_mask) ? 0 : -ENXIO;
}

/*
 * The bytes of a struct cpumask that the kernel's cpumask functions touch,
 * and that alloc_cpumask_var() allocates (with CONFIG_CPUMASK_OFFSTACK, less
 * than sizeof(struct cpumask)).
 */
size_t msrbatch_cpumask_bytes(void)
{
	return cpumask_size();
}

/*
 * Whether every CPU of mask (one msrbatch_cpumask_of() made) is online: a
 * prepared batch's kept mask, checked at each run under the hotplug lock.
 */
bool msrbatch_cpumask_online(const struct cpumask *mask)
{
	return cpumask_subset(mask, cpu_online_mask);
}

/* Clears cpu in mask, if it is a CPU number (below nr_cpu_ids). */
void msrbatch_cpumask_clear(struct cpumask *mask, u32 cpu)
{
	if (cpu < nr_cpu_ids)
		__cpumask_clear_cpu(cpu, mask);
}

void msrbatch_preempt_notifier_init(struct preempt_notifier *n, struct preempt_ops *ops)
{
	preempt_notifier_init(n, ops);
}

/* Whether the current task is making its final switch (do_task_dead()). */
bool msrbatch_current_is_dead(void)
{
	return READ_ONCE(current->__state) == TASK_DEAD;
}

/* ns to TSC ticks (1 tick per ns when the TSC rate is unknown). */
u64 msrbatch_ns_to_tsc(u64 ns)
{
	unsigned int khz = READ_ONCE(tsc_khz);

	return khz ? mul_u64_u32_div(ns, khz, 1000000) : ns;
}

void msrbatch_log_refused_grant(const char *why)
{
	pr_info_ratelimited("msrbatch: PCE grant refused for %s (pid %d): %s\n",
			    current->comm, task_pid_nr(current), why);
}

/* ---- memory user space maps: prepared results, sampler rings ----------- */

/*
 * Zeroed, page-aligned memory, a whole number of pages, charged to the
 * caller's memory cgroup. vmalloc_user() would mark it VM_USERMAP for
 * remap_vmalloc_range() but charges nobody, and the allocator it calls with
 * its flags is not exported: so __vmalloc() with __GFP_ACCOUNT, zeroed as
 * vmalloc_user()'s memory is (nothing of the kernel's reaches the mapping),
 * and msrbatch_mappable_mmap() inserts the pages itself.
 */
void *msrbatch_mappable_alloc(unsigned long bytes)
{
	return __vmalloc(bytes, GFP_KERNEL_ACCOUNT | __GFP_ZERO);
}

void msrbatch_mappable_free(void *addr)
{
	vfree(addr);
}

/*
 * Maps the first pages of an area of @bytes bytes from
 * msrbatch_mappable_alloc() into vma, from its start, as
 * remap_vmalloc_range() does: page by page, vm_insert_page() taking a
 * reference on each (the mapping outlives vfree()).
 */
int msrbatch_mappable_mmap(struct vm_area_struct *vma, void *addr, unsigned long bytes)
{
	unsigned long uaddr = vma->vm_start, size = vma->vm_end - vma->vm_start;
	int ret;

	if (!PAGE_ALIGNED(addr) || !is_vmalloc_addr(addr) || size > PAGE_ALIGN(bytes))
		return -EINVAL;
	for (; uaddr < vma->vm_end; uaddr += PAGE_SIZE, addr += PAGE_SIZE) {
		ret = vm_insert_page(vma, uaddr, vmalloc_to_page(addr));
		if (ret)
			return ret;
	}
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	return 0;
}

/* ---- the grant reaper ---------------------------------------------------- */

/*
 * A granted thread's final switch marks its grant dead from the scheduler
 * (runqueue lock held, interrupts off), where nothing may sleep or queue
 * work directly. It raises an irq_work, which queues the reaper work, which
 * frees dead grants after an RCU grace period (pce.rs). Module exit waits
 * for both, so no module code runs after the module's last reference is
 * dropped by the reaper.
 */
static void reap_workfn(struct work_struct *work)
{
	msrbatch_reap_grants();
}

static DECLARE_WORK(reap_work, reap_workfn);

static void reap_irq_workfn(struct irq_work *work)
{
	schedule_work(&reap_work);
}

static DEFINE_IRQ_WORK(reap_irq_work, reap_irq_workfn);

void msrbatch_kick_reaper(void)
{
	irq_work_queue(&reap_irq_work);
}

void msrbatch_reaper_sync(void)
{
	irq_work_sync(&reap_irq_work);
	flush_work(&reap_work);
}

/* ---- the busy credit's storage: one per CPU (busy.rs has the rule) ------ */

/*
 * Not static: busy.rs's Credit::this_cpu() finds this CPU's copy itself
 * (insn::this_cpu_ptr, as this_cpu_ptr() does), for a batch's cross-call on
 * its own CPU, with interrupts off: nothing else touches it until they are
 * on again. (A call to a helper here cost a call and a return a share.)
 */
DEFINE_PER_CPU(struct msrbatch_credit, msrbatch_credits);

/*
 * Each CPU's refusal hint: jiffies until which this CPU refuses shares of
 * descriptors opened without CAP_SYS_RAWIO (its credit is below their
 * reserve). Written by the CPU itself when it refuses one, read by the
 * others, which then refuse such a share without a cross-call (busy.rs).
 */
static DEFINE_PER_CPU(unsigned long, msrbatch_refuse_until);

/*
 * The latest of the CPUs' hints: while it is out of range, no CPU's hint is
 * in range, and a caller with shares for several CPUs looks at none of them
 * (msrbatch_some_cpu_refuses). Only ever moved forward (cmpxchg), by the CPU
 * that writes a later hint of its own.
 */
static unsigned long msrbatch_refuse_any_until;

/* The longest a hint may say: a deficit is at most 8 budgets (busy.rs). */
#define MSRBATCH_REFUSE_MAX_MS (8 * MSRBATCH_MAX_CPU_BUSY_NS / NSEC_PER_MSEC + 1)

/* Whether a hint's jiffies (until) are still to come, and within its longest. */
static bool msrbatch_hint_in_range(unsigned long until)
{
	long left = (long)(until - jiffies);

	return left > 0 && left <= (long)msecs_to_jiffies(MSRBATCH_REFUSE_MAX_MS) + 1;
}

/*
 * This CPU refuses confined shares for the next tsc ticks at least: those
 * sent here are refused by their callers until the tick in which that time
 * ends, or, for less than a tick, for the rest of this one.
 */
void msrbatch_this_cpu_refuses(u64 tsc)
{
	unsigned int khz = READ_ONCE(tsc_khz);
	u64 ns = khz ? mul_u64_u32_div(tsc, 1000000, khz) : tsc;
	unsigned long n = nsecs_to_jiffies(min_t(u64, ns, MSRBATCH_REFUSE_MAX_MS * NSEC_PER_MSEC));
	unsigned long until = jiffies + max(n, 1UL);
	unsigned long any = READ_ONCE(msrbatch_refuse_any_until);

	lockdep_assert_irqs_disabled();
	this_cpu_write(msrbatch_refuse_until, until);
	/* Another CPU's later hint, or a hint out of range (ours is in it). */
	while (!msrbatch_hint_in_range(any) || time_after(until, any)) {
		if (try_cmpxchg(&msrbatch_refuse_any_until, &any, until))
			break;
	}
}

/*
 * Whether cpu's hint says it refuses confined shares now. Racy: a hint
 * being written is read as the old one (a cross-call the CPU refuses) or
 * the new one. One never set (0), or set long ago, is out of range.
 */
bool msrbatch_cpu_refuses(unsigned int cpu)
{
	if (cpu >= nr_cpu_ids)
		return false;
	return msrbatch_hint_in_range(READ_ONCE(*per_cpu_ptr(&msrbatch_refuse_until, cpu)));
}

/*
 * Whether some CPU's hint may be in range (msrbatch_cpu_refuses may say
 * true of it); false: none is. As racy as one CPU's hint: a hint being
 * written is read as the old latest or the new one.
 */
bool msrbatch_some_cpu_refuses(void)
{
	return msrbatch_hint_in_range(READ_ONCE(msrbatch_refuse_any_until));
}

/* ---- a prepared batch's run lock (prepared.rs's RunLock) ------------------ */

/*
 * Sleeps until the lock whose ticket being served is at @serving serves
 * @ticket, the caller's (RunLock::lock found it serving another), and reads
 * it so with acquire ordering. As mutex_lock(), uninterruptible.
 */
void msrbatch_run_lock_wait(atomic_t *serving, unsigned int ticket)
{
	wait_var_event(serving, (unsigned int)atomic_read_acquire(serving) == ticket);
}

/*
 * Wakes the runs waiting for the lock at @serving, which the caller has
 * just moved to the next ticket: the barrier orders that before the look
 * for waiters (wake_up_var()'s rule), so a waiter either sees its ticket
 * served or is woken.
 */
void msrbatch_run_lock_wake(atomic_t *serving)
{
	smp_mb();
	wake_up_var(serving);
}

/*
 * What lockdep sees of the run locks (called only in kernels with
 * CONFIG_LOCKDEP): one lock for all of them, as a workqueue's lockdep_map
 * stands for all its works. Enough for the order of the locks around them
 * (the restore log's mutex, then a run lock, then the CPU hotplug read
 * lock) and for a run lock taken inside another.
 */
#ifdef CONFIG_LOCKDEP
static struct lock_class_key msrbatch_run_lock_key;
static struct lockdep_map msrbatch_run_lock_map =
	STATIC_LOCKDEP_MAP_INIT("msrbatch_run_lock", &msrbatch_run_lock_key);
#endif

void msrbatch_run_lock_acquire(void)
{
#ifdef CONFIG_LOCKDEP
	lock_map_acquire(&msrbatch_run_lock_map);
#endif
}

void msrbatch_run_lock_release(void)
{
#ifdef CONFIG_LOCKDEP
	lock_map_release(&msrbatch_run_lock_map);
#endif
}

/* ---- interrupts off (helpers.rs's LocalInterruptDisabled) ---------------- */

unsigned long msrbatch_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

void msrbatch_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

/* ---- the misc devices' file operations (helpers.rs) ---------------------- */

/*
 * The copies of the two devices' file operations: the owner set (7.2's
 * registration leaves it empty, and the module could be unloaded under an
 * open file), and for /dev/msrbatch a flush, which the Rust misc device
 * abstraction has no method for: every close of a descriptor of the file,
 * also at exit, calls it (restore.rs: the process that asked for restore
 * closed it).
 */
static struct file_operations msrbatch_owned_fops[2];

static int msrbatch_flush(struct file *file, fl_owner_t id)
{
	msrbatch_dev_flush(file);
	return 0;
}

int msrbatch_misc_own_fops(struct miscdevice *misc, unsigned int slot)
{
	if (slot >= ARRAY_SIZE(msrbatch_owned_fops))
		return -EINVAL;
	msrbatch_owned_fops[slot] = *misc->fops;
	msrbatch_owned_fops[slot].owner = THIS_MODULE;
	if (slot == 0)
		msrbatch_owned_fops[slot].flush = msrbatch_flush;
	/*
	 * misc_open() reads the pointer at each open (under misc_mtx, which this
	 * does not hold): publish the copy's contents before the pointer. A
	 * file opened before this has neither the owner nor the flush and is
	 * refused by msrbatch_file_has_own_fops().
	 */
	smp_store_release(&misc->fops, &msrbatch_owned_fops[slot]);
	return 0;
}

bool msrbatch_file_has_own_fops(struct file *file)
{
	return file->f_op == &msrbatch_owned_fops[0] || file->f_op == &msrbatch_owned_fops[1];
}

/* ---- thread groups (restore.rs) ----------------------------------------- */

/* The caller's thread group, referenced (its struct pid survives exec by any thread). */
struct pid *msrbatch_tgid_get(void)
{
	return get_pid(task_tgid(current));
}

void msrbatch_tgid_put(struct pid *pid)
{
	put_pid(pid);
}

bool msrbatch_current_in_tgid(struct pid *pid)
{
	return task_tgid(current) == pid;
}

/* Whether a thread of the group @pid (referenced) has not exited yet. */
bool msrbatch_tgid_alive(struct pid *pid)
{
	struct task_struct *t;
	bool alive;

	rcu_read_lock();
	t = pid_task(pid, PIDTYPE_TGID);
	alive = t && atomic_read(&t->signal->live) > 0;
	rcu_read_unlock();
	return alive;
}

/*
 * Whether the caller's descriptor table is shared with a task outside its
 * thread group (clone(CLONE_FILES) without CLONE_THREAD): then its exit
 * closes nothing. Counts the group's threads that use the table against
 * the table's references; a thread being cloned into the group right now
 * may make it say shared once.
 */
bool msrbatch_files_shared_outside_group(void)
{
	struct files_struct *files = current->files;
	struct task_struct *t;
	int users = 0;

	if (!files)
		return false;
	rcu_read_lock();
	for_each_thread(current, t)
		users += READ_ONCE(t->files) == files;
	rcu_read_unlock();
	return atomic_read(&files->count) > users;
}

/*
 * Six words (a batch header, one op) from user @src to @d, in a user read
 * access section; to @label on a fault.
 */
#define msrbatch_get6(d, src, label)                       \
	do {                                               \
		unsafe_get_user((d)[0], &(src)[0], label); \
		unsafe_get_user((d)[1], &(src)[1], label); \
		unsafe_get_user((d)[2], &(src)[2], label); \
		unsafe_get_user((d)[3], &(src)[3], label); \
		unsafe_get_user((d)[4], &(src)[4], label); \
		unsafe_get_user((d)[5], &(src)[5], label); \
	} while (0)

/*
 * The user copies of a batch's ops. copy_{from,to}_user() copy 64 bytes or
 * more with `rep movsb` on CPUs without FSRM, one byte per iteration; these
 * move whole words, and write back only the fields a run changes.
 */
static_assert(sizeof(struct msrbatch_op) % sizeof(u64) == 0);

int msrbatch_read_words(void *dst, unsigned long uaddr, unsigned long words)
{
	const u64 __user *src = (const u64 __user *)uaddr;
	u64 *d = dst;
	unsigned long i;

	/*
	 * A batch header or one op, six words: every batch's first copy, and
	 * a batch of one op's second. A size the compiler knows needs no
	 * overflow check and no pass through the steps below (41
	 * instructions a copy, 22 here).
	 */
	if (words == 6) {
		if (!user_read_access_begin(src, 6 * sizeof(u64)))
			return -EFAULT;
		msrbatch_get6(d, src, fault);
		user_read_access_end();
		return 0;
	}
	if (words > ULONG_MAX / sizeof(u64) || !user_read_access_begin(src, words * sizeof(u64)))
		return -EFAULT;
	/*
	 * An op and a batch header are six words each: two ops a round, a
	 * load and a store a word; then one op (or a header); then, for
	 * other arguments, the rest in at most three steps. The rounds count
	 * an index (pointers moved in them were moved a word at a time); the
	 * steps move the pointers (indices took a register and an `or` for
	 * some words).
	 */
	for (i = 0; i + 12 <= words; i += 12) {
		unsafe_get_user(d[i], &src[i], fault);
		unsafe_get_user(d[i + 1], &src[i + 1], fault);
		unsafe_get_user(d[i + 2], &src[i + 2], fault);
		unsafe_get_user(d[i + 3], &src[i + 3], fault);
		unsafe_get_user(d[i + 4], &src[i + 4], fault);
		unsafe_get_user(d[i + 5], &src[i + 5], fault);
		unsafe_get_user(d[i + 6], &src[i + 6], fault);
		unsafe_get_user(d[i + 7], &src[i + 7], fault);
		unsafe_get_user(d[i + 8], &src[i + 8], fault);
		unsafe_get_user(d[i + 9], &src[i + 9], fault);
		unsafe_get_user(d[i + 10], &src[i + 10], fault);
		unsafe_get_user(d[i + 11], &src[i + 11], fault);
	}
	src += i;
	d += i;
	words -= i;
	if (words >= 6) {
		msrbatch_get6(d, src, fault);
		words -= 6;
		src += 6;
		d += 6;
	}
	if (words) {
		if (words >= 4) {
			unsafe_get_user(d[0], &src[0], fault);
			unsafe_get_user(d[1], &src[1], fault);
			unsafe_get_user(d[2], &src[2], fault);
			unsafe_get_user(d[3], &src[3], fault);
			words -= 4;
			src += 4;
			d += 4;
		}
		if (words >= 2) {
			unsafe_get_user(d[0], &src[0], fault);
			unsafe_get_user(d[1], &src[1], fault);
			words -= 2;
			src += 2;
			d += 2;
		}
		if (words)
			unsafe_get_user(d[0], &src[0], fault);
	}
	user_read_access_end();
	return 0;
fault:
	user_read_access_end();
	return -EFAULT;
}

static __always_inline int write_results(unsigned long uaddr, const struct msrbatch_op *ops, u32 n)
{
	struct msrbatch_op __user *dst = (struct msrbatch_op __user *)uaddr;
	u32 i;

	if (!user_write_access_begin(dst, (size_t)n * sizeof(*dst)))
		return -EFAULT;
	for (i = 0; i < n; i++) {
		unsafe_put_user(ops[i].status, &dst[i].status, fault);
		unsafe_put_user(ops[i].val[0], &dst[i].val[0], fault);
		unsafe_put_user(ops[i].val[1], &dst[i].val[1], fault);
	}
	user_write_access_end();
	return 0;
fault:
	user_write_access_end();
	return -EFAULT;
}

int msrbatch_write_results(unsigned long uaddr, const struct msrbatch_op *ops, u32 n)
{
	return write_results(uaddr, ops, n);
}

/*
 * The answer of a batch that ran, in one call: its n ops' results to the
 * array at uaddr (as msrbatch_write_results), then the outputs of the
 * header at hdr_uaddr (as msrbatch_write_batch_out writes them: nr_failed,
 * no op blamed, MSRBATCH_OUT_RAN, start_spread), also when the results
 * could not be written. 0, or -EFAULT when either could not be. (Two
 * calls, the header's outputs first made in a copy of it, cost a batch 15
 * instructions more.)
 */
int msrbatch_write_ran(unsigned long uaddr, const struct msrbatch_op *ops, u32 n, unsigned long hdr_uaddr,
		       u32 nr_failed, u64 start_spread)
{
	struct msrbatch_batch __user *dst = (struct msrbatch_batch __user *)hdr_uaddr;
	int ret;

	/*
	 * One op, the commonest batch, in a copy of its own: a size the
	 * compiler knows needs no overflow check and no loop.
	 */
	if (n == 1)
		ret = write_results(uaddr, ops, 1);
	else
		ret = write_results(uaddr, ops, n);
	if (!user_write_access_begin(dst, sizeof(*dst)))
		return -EFAULT;
	unsafe_put_user(nr_failed, &dst->nr_failed, fault);
	unsafe_put_user(MSRBATCH_NO_INDEX, &dst->err_index, fault);
	unsafe_put_user(MSRBATCH_OUT_RAN, &dst->out_flags, fault);
	unsafe_put_user(start_spread, &dst->start_spread, fault);
	user_write_access_end();
	return ret;
fault:
	user_write_access_end();
	return -EFAULT;
}

int msrbatch_write_batch_out(unsigned long uaddr, const struct msrbatch_batch *b)
{
	struct msrbatch_batch __user *dst = (struct msrbatch_batch __user *)uaddr;

	if (!user_write_access_begin(dst, sizeof(*dst)))
		return -EFAULT;
	unsafe_put_user(b->nr_failed, &dst->nr_failed, fault);
	unsafe_put_user(b->err_index, &dst->err_index, fault);
	unsafe_put_user(b->out_flags, &dst->out_flags, fault);
	unsafe_put_user(b->start_spread, &dst->start_spread, fault);
	user_write_access_end();
	return 0;
fault:
	user_write_access_end();
	return -EFAULT;
}
