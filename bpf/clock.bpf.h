/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The time of scheduler events, CLOCK_MONOTONIC, mostly from the run
 * queue's own clock rather than a helper call: switch_now() at
 * sched_switch, enqueue_now() at sched_wakeup{,_new}, which call
 * note_wake_clock() first. User space sizes clock_syncs to the possible
 * CPUs.
 */
#ifndef HT_CLOCK_BPF_H
#define HT_CLOCK_BPF_H

#include "kernel_compat.bpf.h"

/*
 * bpf_ktime_get_ns() costs about 90 ns in a KVM guest, most of a context
 * switch's budget. The scheduler has just read its clock into rq->clock
 * when sched_wakeup{,_new} run, and usually when sched_switch runs; their
 * time is that plus the rq's offset to CLOCK_MONOTONIC, which each CPU's
 * sched_switch measures again once a millisecond. An offset older than
 * CLOCK_STALE_NS (an idle CPU) is not trusted: bpf_ktime_get_ns() then.
 *
 * But a wakeup that preempts the running task asks the next __schedule to
 * skip its clock update (rq_clock_skip_update), so at that switch rq->clock
 * is as old as the wakeup: tens of microseconds, up to a tick where the
 * kernel does not preempt. Every wakeup therefore notes the clock it left
 * on its rq; a switch of a target thread that finds rq->clock still at
 * that value reads the clock itself (about half of them where threads
 * preempt each other, none where they sleep), and every other switch takes
 * rq->clock, kept from going back before the last time written on the CPU.
 */
#define CLOCK_SYNC_NS  1000000ULL
#define CLOCK_STALE_NS 10000000ULL
/*
 * A measurement is the true offset plus the little, varying time __schedule
 * spends between reading its clock and the tracepoint (or much more, when
 * the update was skipped). The offset follows the smallest measurements at
 * once and larger ones (the clocks drift apart as NTP slews
 * CLOCK_MONOTONIC) by at most CLOCK_CREEP_NS per sync: timestamps stay
 * steady, and intervals measured across a sync stay exact to a few hundred ns.
 */
#define CLOCK_CREEP_NS 50

struct clock_sync {
	__u64 rq_clock;	  /* when the offset was last measured; 0: never */
	__s64 offset;	  /* CLOCK_MONOTONIC - rq->clock */
	__u64 last_ns;	  /* the latest switch time written on this CPU */
	__u64 wake_clock; /* rq->clock as the latest wakeup on this rq left it */
	__u32 last_next;  /* 1 + pid of the task the latest switch took in; 0: none yet */
	__u32 pad32;
	__u64 last_next_task; /* and that task (read only through probes: it may be gone) */
	__u64 pad[2];	      /* one cache line per CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct clock_sync);
	__uint(max_entries, 1); /* set by user space: possible CPUs */
} clock_syncs SEC(".maps");

/* The time of a context switch: the rq's clock and CLOCK_MONOTONIC. */
struct switch_time {
	__u64 clock;  /* rq->clock; 0 when the kernel has no such thing to read */
	__s64 offset; /* CLOCK_MONOTONIC - rq->clock on this CPU */
	__u64 now;    /* CLOCK_MONOTONIC */
	/*
	 * prev is not the task this CPU's latest switch took in: the kernel
	 * switched to prev without the tracepoint (untraced_switch_in()).
	 */
	bool untraced;
	__u32 last_next;      /* that task's pid */
	__u64 last_task;      /* that task (untraced_left_state()) */
	__u64 last_switch_ns; /* and the time of that switch */
};

/*
 * CLOCK_MONOTONIC at sched_switch, PREV leaving this CPU: see clock_sync.
 * EXACT (a target thread switches) reads the clock itself when rq->clock
 * may not have been updated for this switch.
 */
static __always_inline void switch_now(struct task_struct *prev, struct task_struct *next,
				       struct switch_time *t, bool exact)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rq *rq = rq_of(prev);
	struct clock_sync *sync;
	__u64 fresh = 0;
	__s64 measured;

	t->untraced = false;
	sync = bpf_map_lookup_elem(&clock_syncs, &cpu);
	if (sync) {
		if (sync->last_next && sync->last_next != (__u32)prev->pid + 1) {
			t->untraced = true;
			t->last_next = sync->last_next - 1;
			t->last_task = sync->last_next_task;
			t->last_switch_ns = sync->last_ns;
		}
		sync->last_next = (__u32)next->pid + 1;
		sync->last_next_task = (__u64)next;
	}
	if (!rq || !sync) {
		t->clock = 0;
		t->offset = 0;
		t->now = bpf_ktime_get_ns();
		if (sync)
			sync->last_ns = t->now;
		return;
	}
	t->clock = rq->clock;
	if (exact && t->clock == sync->wake_clock)
		fresh = bpf_ktime_get_ns();
	if (!sync->rq_clock || t->clock < sync->rq_clock ||
	    t->clock - sync->rq_clock >= CLOCK_SYNC_NS) {
		measured = (__s64)((fresh ?: bpf_ktime_get_ns()) - t->clock);
		if (!sync->rq_clock || measured < sync->offset)
			sync->offset = measured;
		else
			sync->offset += measured - sync->offset < CLOCK_CREEP_NS
						? measured - sync->offset
						: CLOCK_CREEP_NS;
		sync->rq_clock = t->clock;
	}
	t->offset = sync->offset;
	t->now = fresh ?: t->clock + sync->offset;
	/* A skipped clock update must not put this switch before the one it follows. */
	if (t->now < sync->last_ns)
		t->now = sync->last_ns;
	sync->last_ns = t->now;
}

/* P is being woken: note the clock its rq is left at (see clock_sync). */
static __always_inline void note_wake_clock(struct task_struct *p)
{
	struct rq *rq = rq_of(p);
	struct clock_sync *sync;
	__u32 cpu;

	if (!rq)
		return;
	cpu = rq->cpu;
	sync = bpf_map_lookup_elem(&clock_syncs, &cpu);
	if (sync)
		sync->wake_clock = rq->clock;
}

/* CLOCK_MONOTONIC as P is enqueued: its rq's clock was just updated. */
static __always_inline __u64 enqueue_now(struct task_struct *p)
{
	struct rq *rq = rq_of(p);
	struct clock_sync *sync;
	__u64 clock;
	__u32 cpu;

	if (!rq)
		return bpf_ktime_get_ns();
	cpu = rq->cpu;
	sync = bpf_map_lookup_elem(&clock_syncs, &cpu);
	if (!sync || !sync->rq_clock)
		return bpf_ktime_get_ns();
	clock = rq->clock;
	if (clock < sync->rq_clock || clock - sync->rq_clock > CLOCK_STALE_NS)
		return bpf_ktime_get_ns();
	return clock + sync->offset;
}

#endif /* HT_CLOCK_BPF_H */
