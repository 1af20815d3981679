/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Why the waker was late: a breach's wait divided, from the flight
 * recorder's window, among the tasks it was really waiting on.
 *
 * The wait of a thread that slept runs from its switch-out to its
 * switch-in: blocked until its waker woke it, then runnable. The blocked
 * part is the waker's (depth 1): walking back from the wakeup, its time
 * running and runnable (behind whom), until its own last wakeup; before
 * that it was blocked itself (state, syscall), and that stretch is its own
 * waker's (depth 2), and so on to the chosen depth: the critical path that
 * Perfetto's thread_executing_span computes, followed from the breach. A
 * sleep that an interrupt or a timer ended has no waker to follow: the
 * walk goes on back through the same task (as Perfetto's executing span
 * does). The walk stops at the depth asked for, at a cycle, at a wakeup
 * whose waker the recorder does not know, and at the window's edge.
 *
 * The stretches form a tree in walk order: a blocked stretch whose waker
 * was followed is the parent of that waker's stretches (depth + 1), which
 * cover it exactly. The leaves add up to the wait.
 */
#ifndef HT_WAIT_CHAIN_H
#define HT_WAIT_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"
#include "kernel/recorder.h"
#include "kernel/sched_index.h"

#define HT_CHAIN_DEFAULT_DEPTH 3
#define HT_CHAIN_MAX_DEPTH     16
/* Stretches kept of one chain: past them the chain is cut (truncated). */
#define HT_CHAIN_MAX_STRETCHES 256

enum ht_stretch_kind {
	HT_STRETCH_RUNNING = 1,
	HT_STRETCH_RUNNABLE,
	HT_STRETCH_BLOCKED,
	HT_STRETCH_UNKNOWN, /* before the window's edge: nothing is known of it */
};

/* Why a blocked stretch's waker was not followed. */
enum ht_chain_stop {
	HT_CHAIN_FOLLOWED = 0,	 /* its children are its waker's stretches */
	HT_CHAIN_STOP_IRQ,	 /* woken from an interrupt: nobody to follow */
	HT_CHAIN_STOP_TIMER,	 /* woken by an expiring timer */
	HT_CHAIN_STOP_SOFTIRQ,	 /* woken by a softirq that ran on behalf of no task */
	HT_CHAIN_STOP_DEPTH,	 /* the waker is past --chain-depth */
	HT_CHAIN_STOP_CYCLE,	 /* the waker is already on the chain */
	HT_CHAIN_STOP_UNKNOWN,	 /* the recorder does not know who woke it */
	HT_CHAIN_STOP_NOT_WOKEN, /* still blocked at the window's end */
	/*
	 * It ran again with no wakeup on record: the kernel's tracepoints
	 * skip one now and then (a loaded KVM guest; every program alike).
	 */
	HT_CHAIN_STOP_WAKEUP_LOST,
	/*
	 * It ran again through a switch the kernel did not trace
	 * (HT_FRF_UNTRACED: some kernels hand a CPU over from a few tasks
	 * without the tracepoint), and its wakeup went untraced with it.
	 */
	HT_CHAIN_STOP_UNTRACED,
};

struct ht_chain_stretch {
	uint64_t start_ns, end_ns;
	uint32_t tid;
	unsigned int depth; /* 0: the breached thread itself */
	enum ht_stretch_kind kind;
	int cpu;	 /* running: where; runnable: where it was queued last; else -1 */
	uint32_t behind; /* runnable: who held its CPU the longest (0: idle or unknown) */
	uint64_t behind_ns;
	uint32_t state; /* blocked: the raw task state it left the CPU in, or: */
#define HT_CHAIN_STATE_UNKNOWN UINT32_MAX
	bool before_window; /* blocked since before the window: its start and state unknown */
	int32_t syscall;    /* blocked: the syscall it slept in, or -1 */
	/* blocked: what ended it */
	uint32_t wake_source; /* enum ht_wake_source; HT_WAKE_NONE: not woken in the window */
	uint32_t waker;	      /* the waking task (a softirq's: the task it ran in), 0: none */
	enum ht_chain_stop stop;
	bool exited; /* the task exited within the window */
};

struct ht_wait_chain {
	uint32_t tid;		   /* the breached thread */
	uint64_t start_ns, end_ns; /* the wait divided: the breach's, cut at the window */
	bool cut_by_window;	   /* the wait or a chain in it reaches back past the window */
	bool truncated;		   /* more than HT_CHAIN_MAX_STRETCHES */
	unsigned int max_depth;	   /* as asked */
	unsigned int depth;	   /* the deepest level reached */
	struct ht_chain_stretch *stretches; /* walk order: parents before their children */
	size_t count;
};

/*
 * The wait chain of breach B in window W (IDX: W's switches): off-CPU and
 * run-queue breaches, and a syscall breach's last sleep. MAX_DEPTH levels
 * of wakers at most (1: the direct waker). False when B has no wait to
 * divide (a syscall that never slept) or no memory; OUT is then empty.
 */
bool ht_wait_chain_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			   const struct ht_breach *b, unsigned int max_depth,
			   struct ht_wait_chain *out);
void ht_wait_chain_free(struct ht_wait_chain *c);

/* A stretch with no children: the leaves add up to the chain's wait. */
bool ht_chain_stretch_is_leaf(const struct ht_wait_chain *c, size_t i);

/* "running", "runnable", "blocked", "unknown". */
const char *ht_stretch_kind_name(enum ht_stretch_kind kind);
/* Why a blocked stretch ends its branch: "timer", "irq", "depth", ...; NULL when followed. */
const char *ht_chain_stop_name(enum ht_chain_stop stop);

#endif /* HT_WAIT_CHAIN_H */
