/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What ran instead: for a thread that waited in a run queue, the tasks that
 * held the CPUs it was queued on, following its migrations, from the flight
 * recorder's context switches. The idle task is never one of them.
 */
#ifndef HT_CULPRITS_H
#define HT_CULPRITS_H

#include <stdbool.h>
#include <stdint.h>
#include "hybtrace/records.h"
#include "kernel/recorder.h"
#include "kernel/sched_index.h"

#define HT_MAX_CULPRITS 8

/*
 * How far before an interval its thread's records are read: where it was
 * queued at the interval's start may come from a record a little before it
 * (the kernel times a wait from its enqueue on the CPU it migrated to, after
 * the migration's record).
 */
#define HT_CULPRITS_LOOKBACK_NS 1000000ULL

struct ht_culprit {
	uint32_t pid;
	uint32_t cpu; /* where it held the CPU the longest */
	uint64_t ns;
};

struct ht_culprits {
	struct ht_culprit top[HT_MAX_CULPRITS]; /* longest first */
	unsigned int count;
	uint64_t other_ns;	  /* tasks beyond the top ones */
	uint64_t unknown_ns;	  /* time the recorder cannot account for */
	uint64_t idle_ns;	  /* its CPU idle (pid 0, no culprit) while it was queued */
	uint64_t runnable_ns;	  /* the thread's time in run queues: all of the above */
	unsigned int preemptions; /* times it was preempted (or yielded) within the interval */
	unsigned int last_cpu;	  /* the CPU it was queued on last */
};

/*
 * What ran instead of TID while it waited in a run queue within [START, END]:
 * whoever held the CPUs it was queued on, following its migrations. Its waits
 * come from W's records of it (a preemption or a wakeup queues it, a
 * migration moves it, its switch-in ends the wait); QUEUED and CPU say where
 * the caller knows it was at START (queued on CPU, or running), a record of
 * W at most HT_CULPRITS_LOOKBACK_NS before START where it was queued then.
 * One computation for the live line and the dump: both give the same
 * interval the same answer.
 */
void ht_culprits_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			 uint32_t tid, uint64_t start, uint64_t end, bool queued, unsigned int cpu,
			 struct ht_culprits *out);

/*
 * The part of breach B whose run-queue waits are its culprits', as
 * ht_culprits_compute() takes it: a run-queue breach's whole wait; an
 * off-CPU or syscall breach from the wakeup that ended its sleep (or the
 * syscall's start, if it never slept, where it was queued only when
 * preempted) to its end. False for a sleep that no wakeup ended. The live
 * line and the dump ask the same.
 */
bool ht_breach_culprit_interval(const struct ht_breach *b, uint64_t *from, bool *queued);

#endif /* HT_CULPRITS_H */
