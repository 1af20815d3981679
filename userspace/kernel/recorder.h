/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading the flight recorder: per-CPU rings of ht_flight_record that the
 * BPF programs keep writing while we read. A window [t0, t1] of all CPUs
 * comes back merged in time order; records torn or overwritten during the
 * read are skipped and counted, and a window that reaches back past what a
 * wrapped ring still holds is marked clipped.
 */
#ifndef HT_RECORDER_H
#define HT_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

/* Rings as mapped from the BPF maps (or built by a test). */
struct ht_recorder {
	const struct ht_flight_record *records; /* ncpus << slot_shift records */
	const struct ht_fr_head *heads;		/* ncpus heads */
	unsigned int ncpus;
	unsigned int slot_shift;		/* log2 of records per CPU */
};

struct ht_fr_event {
	struct ht_flight_record rec;
	unsigned int cpu;
};

struct ht_fr_window {
	uint64_t t0, t1;
	/* The window reaches back past a wrapped ring: data before covered_from_ns is gone. */
	bool clipped;
	uint64_t covered_from_ns;
	/* Records that changed under the reader (overwritten or being written). */
	uint64_t skipped_records;
	struct ht_fr_event *events; /* time order */
	size_t count;
	/* Per CPU: the last context switch before t0, i.e. what ran at t0. */
	unsigned int ncpus;
	struct ht_fr_event *entry_switch;
	bool *entry_valid;
};

/* Records written on each CPU may be out of order by at most this much. */
#define HT_FR_REORDER_SLACK_NS 100000ULL

/*
 * A wakeup's time comes from its run queue's clock plus an estimated offset
 * to CLOCK_MONOTONIC, and a switch-in on another CPU may read the clock
 * itself: a few nanoseconds to microseconds apart, the switch-in that a
 * wakeup allowed can sort before it. A wakeup this close after the
 * switch-in of a sleeping thread is taken as the one that woke it.
 */
#define HT_FR_WAKEUP_SKEW_NS 20000ULL

/* The state a context switch left its previous task in (its raw prev_state). */
static inline uint32_t ht_fr_switch_prev_state(const struct ht_flight_record *r)
{
	return (uint32_t)r->arg;
}

/* The syscall a context switch's previous task was in, or -1 (none, or not known). */
static inline int32_t ht_fr_switch_syscall(const struct ht_flight_record *r)
{
	return (int32_t)((r->arg >> HT_FR_SWITCH_SYSCALL_SHIFT) & 0xffff) - 1;
}

/* The CPU a wakeup record's waker raised it on. */
static inline uint32_t ht_fr_wakeup_waker_cpu(const struct ht_flight_record *r)
{
	return (uint32_t)(r->arg >> 8) & 0xffff;
}

/*
 * When a wakeup record's waker raised it (its sched_waking): the record's
 * time is the enqueue, on a remote CPU maybe much later; the same when
 * not known.
 */
static inline uint64_t ht_fr_wakeup_waking_ns(const struct ht_flight_record *r)
{
	uint64_t delay = (r->arg >> HT_FR_WAKE_DELAY_SHIFT & HT_FR_WAKE_DELAY_MAX_US) * 1000;

	return r->ts_ns > delay ? r->ts_ns - delay : r->ts_ns;
}

/* A context switch left its previous task runnable: preempted, or yielding. */
static inline bool ht_fr_switch_left_runnable(const struct ht_flight_record *r)
{
	return (r->flags & HT_FRF_PREEMPT) || ht_fr_switch_prev_state(r) == 0;
}

/* Read [t0, t1] into *w (initialised here). Returns 0, or -1 with ht_last_error(). */
int ht_recorder_read(const struct ht_recorder *r, uint64_t t0, uint64_t t1,
		     struct ht_fr_window *w);

void ht_fr_window_free(struct ht_fr_window *w);

/* Records ever written on CPU (the head), for rates and loss figures. */
uint64_t ht_recorder_written(const struct ht_recorder *r, unsigned int cpu);

#endif /* HT_RECORDER_H */
