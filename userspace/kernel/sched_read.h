/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A dump's native scheduling data (kernel/sched_ftrace.h) read back the way
 * Perfetto's importer reads it, into its thread states: what the
 * `thread_state` table of trace processor holds for the same file
 * (src/trace_processor/importers/ftrace/ftrace_sched_event_tracker.cc and
 * importers/common/thread_state_tracker.cc in the Perfetto sources):
 *  - events of every CPU's bundles in time order, a bundle's switches
 *    before its wakings at equal times;
 *  - a CPU's first compact switch only says who runs; a waking on a CPU
 *    before it is dropped; the waker of a waking is whoever runs on the
 *    bundle's CPU then (pid 0: the idle task);
 *  - a switch ends its prev's state and opens the prev_state it gives
 *    ("R", "R+", "S", "D", "I", ... as task_state.cc spells them), and
 *    opens "Running" on that CPU for its next; the idle task has no states;
 *    a prev not "Running" by its rows (a switch-in lost) keeps its state
 *    open (dur -1), as Perfetto does on data loss;
 *  - a waking of a thread in a blocked state (anything but "R" and
 *    "Running": "R+" too) ends it and opens "R" with its waker; any other
 *    waking is spurious and changes nothing;
 *  - task_newtask opens "R" for the child, woken by the event's task;
 *    sched_blocked_reason names the function of the thread's last blocked
 *    state.
 * Times are the file's (BOOTTIME) less BOOTTIME - MONOTONIC, which the
 * caller has from the dump's clock snapshot (tl_clock_snapshot() of the
 * TrackEvent reader's timeline): the clock of the rest of a dump.
 */
#ifndef HT_SCHED_READ_H
#define HT_SCHED_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HT_THREAD_STATE_LEN 8

struct ht_thread_state {
	uint32_t tid;
	uint64_t ts_ns;			 /* CLOCK_MONOTONIC */
	int64_t dur_ns;			 /* -1: still open at the end of the data */
	char state[HT_THREAD_STATE_LEN]; /* "Running", "R", "R+", "S", "D", "I", ... */
	int32_t cpu;			 /* Running: its CPU; else -1 */
	bool woken;			 /* R from a waking or a fork: waker_tid says who */
	uint32_t waker_tid;		 /* 0: the idle task */
	bool irq;			 /* that waking came from interrupt context */
	bool newtask;			 /* that R is a new task's, from task_newtask */
	const char *blocked_function;	 /* a blocked state's, from sched_blocked_reason */
	const char *comm;		 /* Running: the switch's next_comm; else NULL */
};

struct ht_native_sched {
	bool present; /* the file has native scheduling data */
	uint64_t switches, wakings, newtasks, blocked_reasons;
	uint64_t wakings_dropped;  /* on a CPU before its first switch */
	uint64_t wakings_spurious; /* of a thread not blocked: no state change */
	struct ht_thread_state *states; /* by thread, then time */
	size_t nstates;
	char **strings; /* what blocked_function and comm point into */
	size_t nstrings;
};

/*
 * Read the native scheduling data of a Perfetto file's bytes into OUT, its
 * times moved back by BOOTTIME_OFFSET_NS (BOOTTIME - MONOTONIC). A file
 * without any gives present = false and no states. Returns 0, or -1 with
 * ht_last_error() for malformed protobuf or no memory.
 */
int ht_native_sched_read(const void *data, size_t len, int64_t boottime_offset_ns,
			 struct ht_native_sched *out);
void ht_native_sched_free(struct ht_native_sched *s);

/* The states of TID, in time order: *N of them from the returned one on (NULL: none). */
const struct ht_thread_state *ht_native_sched_thread(const struct ht_native_sched *s,
						     uint32_t tid, size_t *n);

#endif /* HT_SCHED_READ_H */
