/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The dump builder's guard: it raises the builder while the event loop is
 * stalled, whatever the event loop waits on.
 *
 * The builder runs at nice 19 and shares kernel locks with the event loop:
 * their process's mmap lock, its file table, the target's task lock (what a
 * sampler of their kernel stacks caught: README, "Privileges and what
 * hybtrace does to a process"). Preempted inside one of them on a CPU its
 * target keeps busy, it holds the event loop up for hundreds of ms, and the
 * event loop, stuck, cannot raise it: the guard, a thread of its own, does.
 * Every tick while the builder has work it reads the event loop's beat (one
 * count of turns, one flag around epoll_wait) and CPU clock; where the event
 * loop is in the turn it was in at the last tick and used almost no CPU
 * since, and is not merely waiting for its CPU (its state in /proc: a loaded
 * machine's), the guard raises the builder until that turn ends, and gives it a
 * short turn at SCHED_FIFO at each such tick: a nice value the scheduler
 * may honour late (before EEVDF, 6.6, a raised thread keeps the virtual
 * runtime nice 19 gave it), a real-time one it honours at once. While the
 * builder waits for work, so does the guard, on a futex: no ticks then,
 * unless the event loop asks it to watch (it does around what waits on the
 * builder even while the builder waits: its moves, its reads of the
 * target's threads).
 *
 * It allocates nothing and opens nothing, and its stack and path are touched
 * once at its start: a page fault takes the mmap lock for reading, behind the
 * event loop when that waits to write it.
 */
#ifndef HT_BUILDER_GUARD_H
#define HT_BUILDER_GUARD_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* How often the guard looks while the builder works: a stall is ended within two ticks. */
#define HT_GUARD_TICK_NS 20000000ULL
/*
 * The builder's turn at SCHED_FIFO: until the event loop runs again, at most
 * this long per tick (a fifth of a CPU while a stall lasts), the guard
 * looking every HT_GUARD_RUSH_LOOK_NS meanwhile.
 */
#define HT_GUARD_RUSH_NS 4000000ULL
#define HT_GUARD_RUSH_LOOK_NS 250000ULL
/* The guard's own priority during such a turn: above the builder's, to end it. */
#define HT_GUARD_RUSH_PRIO 2

/* The event loop's beat, kept by the event loop alone. */
struct ht_loop_beat {
	uint32_t busy;	/* 1 from epoll_wait's return to its next call */
	uint32_t turns; /* epoll_wait's returns so far */
};

static inline void ht_loop_beat_waits(struct ht_loop_beat *b)
{
	__atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

static inline void ht_loop_beat_woke(struct ht_loop_beat *b)
{
	__atomic_store_n(&b->turns, b->turns + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&b->busy, 1, __ATOMIC_RELEASE);
}

/*
 * Whether the guard may sleep: the builder's side, before and after each of
 * its waits for work, and the event loop's watch.
 */
struct ht_guard_idle {
	uint32_t idle;	   /* 1 while the builder waits */
	uint32_t watch;	   /* the event loop's watches begun and not ended */
	uint32_t sleeping; /* the guard waits for the builder to leave that wait */
	uint32_t gen;	   /* the futex word: moved by each wake of the guard */
};

void ht_guard_idle_enter(struct ht_guard_idle *w);
void ht_guard_idle_leave(struct ht_guard_idle *w);

/*
 * The guard ticks from ht_guard_watch_begin to its ht_guard_watch_end
 * (nested), the builder waiting or not.
 */
void ht_guard_watch_begin(struct ht_guard_idle *w);
void ht_guard_watch_end(struct ht_guard_idle *w);

struct ht_builder_guard {
	/* Set before ht_builder_guard_start. */
	const struct ht_loop_beat *beat;
	struct ht_guard_idle *builder;
	/* Raise the builder (whether it is raised) and lower it again: called in pairs. */
	bool (*raise)(void *ctx);
	void (*lower)(void *ctx);
	/*
	 * Put the builder at SCHED_FIFO below HT_GUARD_RUSH_PRIO (whether it
	 * is) and back where it was: called in pairs; NULL: no such turns.
	 */
	bool (*rush)(void *ctx);
	void (*end_rush)(void *ctx);
	void *ctx;
	uint64_t tick_ns; /* 0: HT_GUARD_TICK_NS */

	/* The event loop, taken by ht_builder_guard_start from its caller. */
	clockid_t loop_clock; /* its CPU clock */
	/*
	 * Its /proc/thread-self/stat, open: a loop that waits for its CPU is no
	 * stall the builder can end. -1: not known, every stall is the builder's.
	 */
	int loop_stat_fd;

	pthread_t thread;
	bool started;
	int tid; /* the guard thread's id, set at its first step */
	uint32_t stop;
	uint64_t lifts;	 /* stalled turns it raised the builder in */
	uint64_t rushes; /* the builder's turns at SCHED_FIFO */
	/* The guard's own scheduling, taken at its start, and back after each rush. */
	int own_policy;
	struct sched_param own_param;
	bool cannot_rush; /* the guard could not be put at SCHED_FIFO */
};

/*
 * Start the guard thread, watching the calling thread as the event loop; a
 * failure is said and leaves the session without one.
 */
int ht_builder_guard_start(struct ht_builder_guard *g);

/* Stop it, the builder lowered if the guard had raised it. */
void ht_builder_guard_stop(struct ht_builder_guard *g);

/* How many of the event loop's turns stalled with the builder lifted so far. */
uint64_t ht_builder_guard_lifts(const struct ht_builder_guard *g);

/* The guard thread's id, or 0 (not started, or not yet at its first step). */
int ht_builder_guard_tid(const struct ht_builder_guard *g);

/* How many turns at SCHED_FIFO it gave the builder so far. */
uint64_t ht_builder_guard_rushes(const struct ht_builder_guard *g);

#endif
