/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msrbatch: inherited PCE grants, the C half (pce_fork.c); the Rust half is
 * pce.rs.
 */
#ifndef MSRBATCH_PCE_FORK_H
#define MSRBATCH_PCE_FORK_H

#include <linux/types.h>

struct callback_head;
struct preempt_notifier;
struct preempt_ops;
struct task_struct;

void msrbatch_pce_fork_init(void);
void msrbatch_pce_fork_exit(void);
bool msrbatch_pce_fork_supported(void);
void msrbatch_pce_sync_task_work(void);
bool msrbatch_pce_task_work_supported(void);
struct preempt_notifier *msrbatch_current_notifier(const struct preempt_ops *ops);
int msrbatch_task_work_add(void *task, struct callback_head *work,
			   void (*func)(struct callback_head *));
bool msrbatch_current_exiting(void);
void msrbatch_for_each_other_thread(void (*func)(void *task, void *data),
				    void *data);

/* Implemented in Rust (pce.rs). */
void msrbatch_pce_fork(struct task_struct *child);

#endif
