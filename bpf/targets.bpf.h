/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The target set: which tasks hybtrace watches (userspace/kernel/targets.h).
 * One bit per process (tgid) in target_procs, an mmapable array user space
 * seeds and the programs keep as processes fork, move between cgroups and
 * exit; or, with --all, every task but hybtrace's own. is_target() is the
 * test every program makes: sched_switch makes it twice per switch on every
 * CPU, so it is a load, an array lookup the JIT inlines and a shift.
 *
 * Included by monitor.bpf.c, which keeps the set; sample_filter.bpf.c
 * defines HT_TARGETS_TEST_ONLY and gets the map (the monitor's fd) and the
 * test alone.
 */
#ifndef HT_TARGETS_BPF_H
#define HT_TARGETS_BPF_H

#include "settings.bpf.h"

/* PID_MAX_LIMIT on 64-bit (2^22): pid_max can be raised to it at run time. */
#define TARGET_PID_LIMIT (1U << 22)
#define TARGET_WORDS	 (TARGET_PID_LIMIT / 64)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, TARGET_WORDS);
} target_procs SEC(".maps");

/* Whether the process TGID (with a thread PID of it) is watched. */
static __always_inline bool tgid_is_target(__u32 tgid, __u32 pid)
{
	__u32 word = tgid >> 6;
	__u64 *w;

	if (test_one_tgid)
		return tgid == test_one_tgid;
	/* Each CPU's idle task has pid 0: never a target. */
	if (targets_all)
		return tgid != self_tgid && pid;
	w = bpf_map_lookup_elem(&target_procs, &word);
	return w && ((*w >> (tgid & 63)) & 1);
}

/* Deeper cgroups than this are not looked through (the kernel allows more; none seen). */
#define TARGET_CGROUP_MAX_DEPTH 64

/*
 * Whether P's cgroup v2 is the watched one or under it: up through
 * self.parent comparing kernfs ids. bpf_task_under_cgroup() would do it,
 * but Linux 6.1 lacks it, and the verifier refuses ancestors[] indexing.
 */
static __always_inline bool in_target_cgroup(struct task_struct *p)
{
	struct cgroup *cg = p->cgroups->dfl_cgrp;

	for (int i = 0; i < TARGET_CGROUP_MAX_DEPTH && cg; i++) {
		if (cg->kn->id == target_cgroup_id)
			return true;
		if (!cg->self.parent)
			return false;
		/* self is a cgroup's own css: its cgroup is the cgroup itself. */
		cg = cg->self.parent->cgroup;
	}
	return false;
}

static __always_inline bool is_target(struct task_struct *p)
{
	if (test_cgroup_walk)
		return p->pid && in_target_cgroup(p);
	return tgid_is_target(p->tgid, p->pid);
}

#ifndef HT_TARGETS_TEST_ONLY

#include "kernel_compat.bpf.h"

/*
 * Processes that are targets by name (--pid, run's child) or by descent
 * (--children): a move out of the watched cgroup leaves them targets. One
 * bit per tgid as in target_procs; sized to one word (never read) without
 * --cgroup.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, TARGET_WORDS);
} pinned_procs SEC(".maps");

/* A process joined or left the set (struct ht_target_event); user space keeps its list. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} target_events SEC(".maps");

/* Events the ring had no room for: user space then checks its list against the bitmap. */
__u64 target_event_drops = 0;

static __always_inline __u64 *target_word(void *map, __u32 tgid)
{
	__u32 word = tgid >> 6;

	return bpf_map_lookup_elem(map, &word);
}

static __always_inline void target_event(__u32 kind, struct task_struct *p, __u32 reason,
					 __u32 parent_tgid)
{
	struct ht_target_event *e;

	e = bpf_ringbuf_reserve(&target_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&target_event_drops, 1);
		return;
	}
	e->time_ns = bpf_ktime_get_ns();
	e->kind = kind;
	e->tgid = p->tgid;
	e->reason = reason;
	e->parent_tgid = parent_tgid;
	/* The group leader's name: a thread's own may differ. */
	copy_comm(e->comm, p->group_leader);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* Set TGID's bit in MAP; whether it was clear before. */
static __always_inline bool target_bit_set(void *map, __u32 tgid)
{
	__u64 *w = target_word(map, tgid), bit = 1ULL << (tgid & 63);

	return w && !(__sync_fetch_and_or(w, bit) & bit);
}

/* Clear TGID's bit in MAP; whether it was set before. */
static __always_inline bool target_bit_clear(void *map, __u32 tgid)
{
	__u64 *w = target_word(map, tgid), bit = 1ULL << (tgid & 63);

	return w && (__sync_fetch_and_and(w, ~bit) & bit);
}

static __always_inline bool target_bit_test(void *map, __u32 tgid)
{
	__u64 *w = target_word(map, tgid);

	return w && ((*w >> (tgid & 63)) & 1);
}

/*
 * A new process (CHILD, forked by PARENT): a target as its parent's child
 * with --children, or by its cgroup, which the kernel set before this
 * tracepoint (cgroup_post_fork, CLONE_INTO_CGROUP included). New threads
 * share their process's bit.
 */
static __always_inline void targets_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 tgid = child->tgid, reason = 0;

	if (targets_all || child->pid != tgid || tgid == self_tgid)
		return;
	if (targets_children && tgid_is_target(parent->tgid, parent->pid)) {
		reason = HT_TARGET_BY_FORK;
		if (targets_cgroup_on)
			target_bit_set(&pinned_procs, tgid);
	} else if (targets_cgroup_on && in_target_cgroup(child)) {
		reason = HT_TARGET_BY_CGROUP;
	}
	/* Its pid's bit was cleared at the last switch of the process that had it before. */
	if (reason && target_bit_set(&target_procs, tgid))
		target_event(HT_TARGET_JOINED, child, reason, parent->tgid);
}

/* TASK's process moved between cgroups: into the watched subtree, or out of it. */
static __always_inline void targets_cgroup_moved(struct task_struct *task)
{
	__u32 tgid = task->tgid;

	if (!targets_cgroup_on || targets_all || tgid == self_tgid)
		return;
	if (in_target_cgroup(task)) {
		if (target_bit_set(&target_procs, tgid))
			target_event(HT_TARGET_JOINED, task, HT_TARGET_BY_CGROUP, 0);
	} else if (!target_bit_test(&pinned_procs, tgid)) {
		if (target_bit_clear(&target_procs, tgid))
			target_event(HT_TARGET_LEFT, task, HT_TARGET_BY_CGROUP, 0);
	}
}

/*
 * P, a target thread, switches out for the last time (TASK_DEAD): once the
 * whole group is exiting, its bits are cleared. Not at sched_process_exit:
 * what that last switch judges (a switch-in the kernel did not trace, made
 * up there, and what the thread held) is a target's. Linux 6.1's exit
 * tracepoint has no group_dead; signal->live, decremented in do_exit()
 * before, says it here too (several threads may see 0: the first clears).
 * Its pid is reaped by then at the earliest, and a new process gets it
 * only once the pids wrapped around.
 */
static __always_inline void targets_exit(struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (targets_all || p->signal->live.counter)
		return;
	if (targets_cgroup_on)
		target_bit_clear(&pinned_procs, tgid);
	if (target_bit_clear(&target_procs, tgid))
		target_event(HT_TARGET_LEFT, p, 0, 0);
}

/*
 * P, a target, runs a new program: user space reads its maps again at once,
 * or a program that exits soon after would be symbolized with the maps of
 * the one before (run's child: hybtrace's own). Not with --all: every exec
 * on the machine would be read.
 */
static __always_inline void targets_exec(struct task_struct *p)
{
	if (!targets_all && tgid_is_target(p->tgid, p->pid))
		target_event(HT_TARGET_EXEC, p, 0, 0);
}

/* The watched cgroup is removed: the session ends (--cgroup). */
static __always_inline void targets_cgroup_removed(struct cgroup *cgrp)
{
	struct ht_target_event *e;

	if (!targets_cgroup_on || cgrp->kn->id != target_cgroup_id)
		return;
	e = bpf_ringbuf_reserve(&target_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&target_event_drops, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->time_ns = bpf_ktime_get_ns();
	e->kind = HT_TARGET_CGROUP_REMOVED;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

#endif /* HT_TARGETS_TEST_ONLY */

#endif /* HT_TARGETS_BPF_H */
