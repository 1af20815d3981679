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
#define PF_IO_WORKER	     0x00000010
#define PF_USER_WORKER	     0x00004000 /* 6.4; a hole before, never set */
#define PF_KTHREAD	     0x00200000
#define EINVAL		     22
#define ENOSYS		     38
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

/* The kernel's MAX_PID_NS_LEVEL: pid namespaces nest at most this deep. */
#define PID_NS_MAX_LEVEL 32

/* The number PID has at LEVEL, its innermost namespace's when LEVEL is pid->level. */
static __always_inline __u32 pid_nr_at(struct pid *pid, unsigned int level)
{
	struct upid upid = {};

	/* numbers[] at a variable index: a probe read, which the verifier lets take it. */
	bpf_probe_read_kernel(&upid, sizeof(upid),
			      (void *)((unsigned long)pid + bpf_core_field_offset(pid->numbers) +
				       level * sizeof(upid)));
	return upid.nr;
}

/*
 * P's pid and its process's in P's own pid namespace where that is not the
 * initial one (a container's); both 0 where it is. For breaches, not the
 * hot path: a few loads and two probe reads. A thread already released in
 * its exit has no pid left: 0.
 */
static __always_inline void task_ns_pids(struct task_struct *p, __u32 *ns_tid, __u32 *ns_tgid)
{
	struct pid *tid_pid = p->thread_pid, *tgid_pid = p->signal->pids[PIDTYPE_TGID];
	unsigned int level = tid_pid ? tid_pid->level : 0;

	*ns_tid = 0;
	*ns_tgid = 0;
	if (!level || level > PID_NS_MAX_LEVEL)
		return;
	*ns_tid = pid_nr_at(tid_pid, level);
	/* A process's threads share its pid namespace: the same level. */
	if (tgid_pid)
		*ns_tgid = pid_nr_at(tgid_pid, level);
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

/*
 * The user registers P saved as it entered the kernel, or NULL for a task
 * without any: kernel threads, and the io_uring and vhost workers, whose
 * saved registers are zeroes (syscall 0, read). The helper came in 5.15.
 */
static __always_inline struct pt_regs *user_regs_of(struct task_struct *p)
{
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return NULL;
	if (p->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER))
		return NULL;
	return (struct pt_regs *)bpf_task_pt_regs(p);
}

/*
 * The syscall a task is inside, from its saved user registers, or -1: the
 * entry code keeps the number in orig_ax and puts -ENOSYS in ax until the
 * syscall returns; an exception (a page fault waiting for I/O) saves an
 * error code in orig_ax and keeps the user's ax, an interrupt -1 or its
 * vector, and neither is a syscall. x86-64 registers.
 */
static __always_inline __s32 syscall_in_regs(struct pt_regs *regs)
{
	if ((long)regs->ax == -ENOSYS && (long)regs->orig_ax >= 0 &&
	    (long)regs->orig_ax < HT_MAX_SYSCALLS)
		return (__s32)regs->orig_ax;
	return -1;
}

#endif /* HT_KERNEL_COMPAT_BPF_H */
