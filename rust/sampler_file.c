// SPDX-License-Identifier: GPL-2.0
/*
 * msrbatch: the C plumbing of samplers (sampler.rs has the policy and the
 * ring).
 *
 * A sampler is a file of its own (anon inode, like a perf event), because
 * the Rust misc device abstraction has no poll(). Its file operations forward
 * to Rust. Each CPU the sampler's batch names gets an hrtimer, started and
 * stopped on that CPU by a CPU hotplug multi-instance state: adding the
 * sampler's instance starts the timers of the online CPUs, removing it stops
 * them, and a CPU going down (or coming up) stops (or starts) its own timer
 * while it is still (already) online. A timer runs in hard interrupt context
 * on its CPU (HRTIMER_MODE_ABS_PINNED_HARD); all CPUs' timers are due at the
 * same instants, epoch + N * period.
 */

#include <linux/anon_inodes.h>
#include <linux/cpuhotplug.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/irq_work.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

#include "helpers.h"

struct msrbatch_sampler;

struct msrbatch_sampler_timer {
	struct hrtimer timer;
	struct msrbatch_sampler *s;
	u64 seq;		/* the period this timer is due in next */
	unsigned int cpu;
	bool armed;		/* started on its CPU and not cancelled */
};

struct msrbatch_sampler {
	struct hlist_node node;	/* the CPU hotplug instance */
	raw_spinlock_t lock;	/* serialises the ring's producers */
	wait_queue_head_t wq;	/* poll() */
	struct irq_work wake;	/* wakes wq from the timers */
	struct mutex stop_lock;
	bool started, stopped;
	u64 period_ns;
	u64 epoch_ns;
	void *owner;		/* the Rust half */
	struct msrbatch_sampler_timer timers[];	/* nr_cpu_ids */
};

static int sampler_state = -1;	/* the dynamic hotplug state, once set up */

static enum hrtimer_restart sampler_timer_fn(struct hrtimer *t)
{
	struct msrbatch_sampler_timer *st = container_of(t, struct msrbatch_sampler_timer, timer);
	u64 seq = st->seq;

	st->seq += hrtimer_forward_now(t, ns_to_ktime(st->s->period_ns));
	/* Never another CPU's ops (a timer is cancelled before its CPU goes). */
	if (WARN_ON_ONCE(smp_processor_id() != st->cpu))
		return HRTIMER_NORESTART;
	msrbatch_sampler_tick(st->s->owner, st->cpu, seq);
	return HRTIMER_RESTART;
}

/* Runs on @cpu (its hotplug thread) when it comes up, or at start. */
static int sampler_cpu_online(unsigned int cpu, struct hlist_node *node)
{
	struct msrbatch_sampler *s = hlist_entry(node, struct msrbatch_sampler, node);
	struct msrbatch_sampler_timer *st = &s->timers[cpu];
	u64 now, k;

	if (!msrbatch_sampler_samples(s->owner, cpu) || st->armed)
		return 0;
	now = ktime_get_ns();
	/* The first period due after now. */
	k = now < s->epoch_ns ? 0 : div64_u64(now - s->epoch_ns, s->period_ns) + 1;
	st->seq = k;
	msrbatch_sampler_cpu_event(s->owner, cpu, true, k);
	hrtimer_start(&st->timer, ns_to_ktime(s->epoch_ns + k * s->period_ns),
		      HRTIMER_MODE_ABS_PINNED_HARD);
	st->armed = true;
	return 0;
}

/* Runs on @cpu (its hotplug thread) before it goes down, or at stop. */
static int sampler_cpu_offline(unsigned int cpu, struct hlist_node *node)
{
	struct msrbatch_sampler *s = hlist_entry(node, struct msrbatch_sampler, node);
	struct msrbatch_sampler_timer *st = &s->timers[cpu];

	if (!st->armed)
		return 0;
	hrtimer_cancel(&st->timer);
	st->armed = false;
	msrbatch_sampler_cpu_event(s->owner, cpu, false, st->seq);
	return 0;
}

int msrbatch_sampler_init(void)
{
	int ret = cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, "msrbatch/sampler:online",
					  sampler_cpu_online, sampler_cpu_offline);

	if (ret < 0)
		return ret;
	sampler_state = ret;
	return 0;
}

void msrbatch_sampler_exit(void)
{
	/* Every sampler file holds a module reference: none is left. */
	if (sampler_state >= 0)
		cpuhp_remove_multi_state(sampler_state);
}

static void sampler_wake_fn(struct irq_work *w)
{
	struct msrbatch_sampler *s = container_of(w, struct msrbatch_sampler, wake);

	wake_up_all(&s->wq);
}

/* The Rust half (owner) is given at install: nothing calls back before. */
struct msrbatch_sampler *msrbatch_sampler_new(u64 period_ns, u64 *epoch_ns)
{
	struct msrbatch_sampler *s;
	unsigned int cpu;

	s = kvzalloc(struct_size(s, timers, nr_cpu_ids), GFP_KERNEL_ACCOUNT);
	if (!s)
		return NULL;
	raw_spin_lock_init(&s->lock);
	init_waitqueue_head(&s->wq);
	init_irq_work(&s->wake, sampler_wake_fn);
	mutex_init(&s->stop_lock);
	s->period_ns = period_ns;
	s->epoch_ns = ktime_get_ns();
	for (cpu = 0; cpu < nr_cpu_ids; cpu++) {
		s->timers[cpu].s = s;
		s->timers[cpu].cpu = cpu;
		hrtimer_setup(&s->timers[cpu].timer, sampler_timer_fn, CLOCK_MONOTONIC,
			      HRTIMER_MODE_ABS_PINNED_HARD);
	}
	*epoch_ns = s->epoch_ns;
	return s;
}

/* After msrbatch_sampler_stop(): no timer, hotplug call or wake-up is left. */
void msrbatch_sampler_free(struct msrbatch_sampler *s)
{
	irq_work_sync(&s->wake);
	mutex_destroy(&s->stop_lock);
	kvfree(s);
}

/*
 * Stops every timer; each CPU that was sampling appends an OFFLINE record;
 * then the ring is marked stopped, before any caller returns. Returns true
 * the first time (that caller then wakes the waiters). Process context.
 */
bool msrbatch_sampler_stop(struct msrbatch_sampler *s)
{
	bool first;

	mutex_lock(&s->stop_lock);
	first = !s->stopped;
	if (first && s->started)
		cpuhp_state_remove_instance(sampler_state, &s->node);
	if (first)
		msrbatch_sampler_mark_stopped(s->owner);
	s->stopped = true;
	mutex_unlock(&s->stop_lock);
	return first;
}

/* Wakes every poll() waiter (after a stop). Process context. */
void msrbatch_sampler_wake_all(struct msrbatch_sampler *s)
{
	wake_up_all(&s->wq);
}

unsigned long msrbatch_sampler_lock(struct msrbatch_sampler *s)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&s->lock, flags);
	return flags;
}

void msrbatch_sampler_unlock(struct msrbatch_sampler *s, unsigned long flags)
{
	raw_spin_unlock_irqrestore(&s->lock, flags);
}

/* Wakes poll() waiters, if any. Any context. */
void msrbatch_sampler_wake(struct msrbatch_sampler *s)
{
	if (wq_has_sleeper(&s->wq))
		irq_work_queue(&s->wake);
}

/* ---- the sampler's file --------------------------------------------------- */

static int sampler_release(struct inode *inode, struct file *file)
{
	struct msrbatch_sampler *s = file->private_data;

	msrbatch_sampler_release(s->owner);
	return 0;
}

static __poll_t sampler_poll(struct file *file, poll_table *wait)
{
	struct msrbatch_sampler *s = file->private_data;
	unsigned int ready;
	__poll_t mask = 0;

	poll_wait(file, &s->wq, wait);
	ready = msrbatch_sampler_ready(s->owner);
	if (ready & MSRBATCH_SAMPLER_READABLE)
		mask |= EPOLLIN | EPOLLRDNORM;
	if (ready & MSRBATCH_SAMPLER_HUP)
		mask |= EPOLLHUP;
	return mask;
}

static int sampler_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct msrbatch_sampler *s = file->private_data;

	/* A private copy would hide data_head from the reader, data_tail from us. */
	if (vma->vm_pgoff != 0 || !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	vm_flags_set(vma, VM_DONTCOPY);
	return msrbatch_sampler_mmap(s->owner, vma, vma->vm_end - vma->vm_start);
}

static long sampler_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct msrbatch_sampler *s = file->private_data;

	return msrbatch_sampler_ioctl(s->owner, cmd, arg);
}

static const struct file_operations sampler_fops = {
	.owner = THIS_MODULE,
	.release = sampler_release,
	.poll = sampler_poll,
	.mmap = sampler_mmap,
	.unlocked_ioctl = sampler_ioctl,
	.compat_ioctl = sampler_ioctl,	/* no argument is a pointer */
	.llseek = noop_llseek,
};

/*
 * Starts @s, whose Rust half is @owner, and returns a descriptor for it, or a
 * negative errno. Takes ownership of both in every case: on failure they are
 * stopped and released.
 */
int msrbatch_sampler_install(struct msrbatch_sampler *s, void *owner)
{
	struct file *file;
	int fd, err;

	s->owner = owner;

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		msrbatch_sampler_release(s->owner);
		return fd;
	}
	file = anon_inode_getfile("[msrbatch-sampler]", &sampler_fops, s, O_RDWR);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		msrbatch_sampler_release(s->owner);
		return PTR_ERR(file);
	}
	/* From here on the file owns @s: its release frees it. */
	mutex_lock(&s->stop_lock);
	err = cpuhp_state_add_instance(sampler_state, &s->node);
	s->started = !err;
	mutex_unlock(&s->stop_lock);
	if (err) {
		put_unused_fd(fd);
		fput(file);
		return err;
	}
	fd_install(fd, file);
	return fd;
}
