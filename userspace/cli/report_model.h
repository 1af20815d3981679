/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The report's model of a dump. A dump of this version leaves who ran on
 * each CPU, and each thread's waits in run queues and sleeps with their
 * wakers, to its native scheduling data (kernel/sched_ftrace.h), which the
 * report reads by Perfetto's rules (kernel/sched_read.h). Here those thread
 * states are turned back into what earlier dumps drew with TrackEvent, in
 * the timeline the report reads, so one reading serves dumps of every
 * version: CPU tracks of "comm[pid]" slices, and on each target thread's
 * kernel track "runqueue" slices (cause, CPU, waker, what ran instead) and
 * "off-cpu" slices (state, syscall), with "wakes" instants on a target
 * waker's. The breach's own wait takes what only the monitor knew from
 * the breach's arguments (its culprits, a softirq's name, its state before
 * the window), as an earlier dump had it.
 */
#ifndef HT_REPORT_MODEL_H
#define HT_REPORT_MODEL_H

#include <stdint.h>
#include "kernel/sched_read.h"
#include "trace/timeline.h"

/* The thread track of target thread TID, or NULL: a thread with no track is no target. */
const struct tl_track *ht_report_thread_track(const struct timeline *tl, uint32_t tid);

/* A task's name: its thread track's, else the comm the native switches into it give; "?". */
const char *ht_report_task_name(const struct timeline *tl, const struct ht_native_sched *ns,
				uint32_t tid);

/*
 * Add to TL what NS holds for the window [WINDOW_START, WINDOW_END], where
 * TL has none of its own (an earlier dump drew it): nothing when NS is not
 * present. Allocation failures leave the model as far as it got.
 */
void ht_report_model_rebuild(struct timeline *tl, const struct ht_native_sched *ns,
			     uint64_t window_start, uint64_t window_end);

#endif /* HT_REPORT_MODEL_H */
