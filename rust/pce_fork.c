// SPDX-License-Identifier: GPL-2.0
/*
 * Inherited PCE grants (MSRBATCH_PCE_F_INHERIT), the C half; the rules are
 * in pce.rs. A probe on the scheduler's sched_process_fork tracepoint calls
 * msrbatch_pce_fork() for every new thread and process, in the parent's
 * context; pce.rs hands a child of a thread whose grant is inherited a task
 * work that makes the child's own grant before it first returns to user
 * mode. The tracepoint is not exported to modules by name, so it is looked
 * up among the kernel's tracepoints, as out-of-tree tracers do.
 */
#include <linux/module.h>
#include <linux/printk.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/string.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>

#include "pce_fork.h"

/*
 * A task work hands a module reference it cannot drop itself to the reaper,
 * which drops it after an RCU Tasks grace period (msrbatch_pce_sync_task_work):
 * with preemption, that needs RCU Tasks (without it, plain RCU is enough).
 * Where neither is there, pce.rs queues no task work (inherited grants, and
 * ending another thread's revoked grant, need one).
 */
#if defined(CONFIG_TASKS_RCU) || !defined(CONFIG_PREEMPTION)
#define MSRBATCH_TASK_WORK_SYNC 1

/*
 * Waits until no task runs in code it was in when this was called, unless it
 * sleeps there: each has passed through user mode or a voluntary switch.
 */
void msrbatch_pce_sync_task_work(void)
{
	synchronize_rcu_tasks();
}

bool msrbatch_pce_task_work_supported(void)
{
	return true;
}
#else
void msrbatch_pce_sync_task_work(void)
{
}

bool msrbatch_pce_task_work_supported(void)
{
	return false;
}
#endif

#if defined(CONFIG_TRACEPOINTS) && defined(CONFIG_PREEMPT_NOTIFIERS) && \
	defined(MSRBATCH_TASK_WORK_SYNC)
static struct tracepoint *fork_tp;

static void find_fork_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_process_fork"))
		fork_tp = tp;
}

/* Worker threads of io_uring, vhost and kernel threads run no user code. */
static bool runs_user_code(struct task_struct *t)
{
	return !(t->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER));
}

static void fork_probe(void *data, struct task_struct *parent, struct task_struct *child)
{
	if (runs_user_code(child))
		msrbatch_pce_fork(child);
}

void msrbatch_pce_fork_init(void)
{
	int ret;

	for_each_kernel_tracepoint(find_fork_tp, NULL);
	if (!fork_tp)
		return;
	ret = tracepoint_probe_register(fork_tp, fork_probe, NULL);
	if (ret) {
		pr_warn("msrbatch: no inherited RDPMC grants: sched_process_fork probe: %d\n", ret);
		fork_tp = NULL;
	}
}

void msrbatch_pce_fork_exit(void)
{
	if (!fork_tp)
		return;
	tracepoint_probe_unregister(fork_tp, fork_probe, NULL);
	/* No probe runs module code after this returns. */
	tracepoint_synchronize_unregister();
}

bool msrbatch_pce_fork_supported(void)
{
	return fork_tp;
}

/* Calls func (which must not sleep) for every other thread of current's process. */
void msrbatch_for_each_other_thread(void (*func)(void *task, void *data),
				    void *data)
{
	struct task_struct *t;

	rcu_read_lock();
	for_each_thread(current, t)
		if (t != current && runs_user_code(t))
			func(t, data);
	rcu_read_unlock();
}
#else
void msrbatch_pce_fork_init(void)
{
}

void msrbatch_pce_fork_exit(void)
{
}

bool msrbatch_pce_fork_supported(void)
{
	return false;
}

void msrbatch_for_each_other_thread(void (*func)(void *task, void *data),
				    void *data)
{
}
#endif

/*
 * The current task's preempt notifier with these ops, if any. Only the task
 * itself adds or removes its notifiers, so its own walk needs no lock.
 */
struct preempt_notifier *msrbatch_current_notifier(const struct preempt_ops *ops)
{
#ifdef CONFIG_PREEMPT_NOTIFIERS
	struct preempt_notifier *n;

	hlist_for_each_entry(n, &current->preempt_notifiers, link)
		if (n->ops == ops)
			return n;
#endif
	return NULL;
}

/* Runs func in task's context before it next returns to user mode. */
int msrbatch_task_work_add(void *task, struct callback_head *work,
			   void (*func)(struct callback_head *))
{
	init_task_work(work, func);
	return task_work_add(task, work, TWA_RESUME);
}

bool msrbatch_current_exiting(void)
{
	return current->flags & PF_EXITING;
}
