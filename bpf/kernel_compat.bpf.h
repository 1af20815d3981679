/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading the kernel's structs on every kernel hybtrace runs on (README
 * "Requirements"): what vmlinux.h lacks, fields that moved or were renamed
 * (CO-RE fallbacks), and direct reads through BTF pointers, so that the hot
 * paths pay no probe_read helper call.
 */
#ifndef HT_KERNEL_COMPAT_BPF_H
#define HT_KERNEL_COMPAT_BPF_H

#include "settings.bpf.h"

/* Not in vmlinux.h (macros): the kernel's values. */
#define TASK_RUNNING	     0
#define TASK_DEAD	     0x80
#define PF_EXITING	     0x00000004
#define PF_KTHREAD	     0x00200000
#define TASK_ON_RQ_MIGRATING 2 /* task_struct::on_rq */

/* Kernels before 5.14 name the state field "state". */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/* PREEMPT_RT counts a task's disabled bottom halves in the task. */
struct task_struct___rt {
	int softirq_disable_cnt;
} __attribute__((preserve_access_index));

/* Direct reads through the BTF pointer: no probe_read helper call on the hot path. */
static __always_inline __u32 task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return p->thread_info.cpu;
	return p->wake_cpu;
}

/* The run queue T is on (or being enqueued on), or NULL without group scheduling. */
static __always_inline struct rq *rq_of(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(t->se.cfs_rq))
		return NULL;
	cfs = t->se.cfs_rq;
	return cfs ? cfs->rq : NULL;
}

/* Two 8-byte loads through the BTF pointer instead of a helper call. */
static __always_inline void copy_comm(char *dst, struct task_struct *p)
{
	__u64 *d = (__u64 *)dst;

	d[0] = *(__u64 *)&p->comm[0];
	d[1] = *(__u64 *)&p->comm[8];
}

/*
 * The state PREV leaves the CPU in, at sched_switch: the tracepoint's last
 * argument since 5.18 (prev_state_from_arg), else task_struct's field.
 */
static __always_inline __u32 switch_prev_state(unsigned long long *ctx, struct task_struct *prev)
{
	if (prev_state_from_arg)
		return (__u32)ctx[3];
	if (bpf_core_field_exists(prev->__state))
		return prev->__state;
	return BPF_CORE_READ((struct task_struct___pre514 *)prev, state);
}

#endif /* HT_KERNEL_COMPAT_BPF_H */
