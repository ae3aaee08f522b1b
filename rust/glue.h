/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msrbatch: the functions of glue.c, for the Rust side (declared again in
 * glue.rs, which must match) and for glue.c itself.
 */
#ifndef MSRBATCH_GLUE_H
#define MSRBATCH_GLUE_H

#include <linux/types.h>

struct preempt_notifier;
struct preempt_ops;
struct vm_area_struct;

int msrbatch_filter_writes(u32 msr, u32 nr_writes);
void msrbatch_rdpmc_policy_init(void);
void msrbatch_rdpmc_policy_exit(void);
int msrbatch_rdpmc_policy(void);
bool msrbatch_xen_pv(void);
void msrbatch_preempt_notifier_init(struct preempt_notifier *n, struct preempt_ops *ops);
bool msrbatch_current_is_dead(void);
u64 msrbatch_ns_to_tsc(u64 ns);
void msrbatch_log_refused_grant(const char *why);
void *msrbatch_results_alloc(unsigned long bytes);
void msrbatch_results_free(void *addr);
int msrbatch_results_mmap(struct vm_area_struct *vma, void *addr);
void msrbatch_kick_reaper(void);
void msrbatch_reaper_sync(void);

/* A CPU's busy credit: the storage only; batch.rs's Credit (same layout) has the rule. */
struct msrbatch_credit {
	u64 full_at;
};

struct msrbatch_credit *msrbatch_this_cpu_credit(void);

/* Implemented in Rust (pce.rs). */
void msrbatch_reap_grants(void);

#endif /* MSRBATCH_GLUE_H */
