/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When dumps happen. The event loop offers each breach (or a trigger's hit,
 * a manual or exit request) to the dump policy (dump_policy.h); a candidate
 * it holds is frozen when its window ends, by the event loop at once
 * (ht_dumper_tick at ht_dumper_deadline), and the capture it chooses goes to
 * a builder thread, which builds and writes the file at nice 19 and removes
 * the dump it replaces. So the monitor never waits on a dump, and a slow
 * dump never delays the next freeze.
 *
 * Nor does the event loop ever wait on the builder: they share no lock. A
 * thread at nice 19 on a CPU its target keeps busy gets a sliver of it, and
 * priority inheritance does not lift a nice value: a lock it held would stall
 * the event loop for as long (on PREEMPT_RT, until RCU boosting frees it,
 * half a second on). Work goes to the builder, and its results and lines
 * come back, through slots with one writer and one reader each, turned over
 * with atomic flags, and eventfds that wake the other side. The builder's
 * lines go through a text ring (text_ring.h); the event loop alone writes
 * to stderr and the output stream. What the event loop allocates, the event
 * loop frees: a free() of it elsewhere takes the lock of its malloc arena.
 */
#ifndef HT_DUMPER_H
#define HT_DUMPER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "base/text_ring.h"
#include "dump/builder_guard.h"
#include "dump/dump_build.h"
#include "dump/dump_policy.h"

/*
 * What the policy holds (dump_policy.h: the interval's best, the choice, a
 * manual dump and one behind it) and the one being offered: the policy
 * knows each by its index here.
 */
#define HT_DUMP_HELD 5

/* Processes that ran a new program whose maps the builder is to read (a few at once). */
#define HT_DUMP_EXECS 16

struct ht_dump_exec {
	int tgid;
	unsigned int step; /* how many of its reads are done */
	uint64_t exec_ns;  /* when the event loop heard of it (CLOCK_MONOTONIC) */
};

struct ht_dump_held {
	bool used;
	struct ht_dump_job job;
	bool have_capture;
	struct ht_dump_capture capture;
};

/* What the builder gives back: a dump written (or not), or a replaced one removed. */
enum ht_dump_result_kind {
	HT_DUMP_RESULT_BUILT,
	HT_DUMP_RESULT_REMOVED,
};

struct ht_dump_result {
	enum ht_dump_result_kind what;
	/* BUILT: the dump SEQ, its file (when OK), and the capture for the event loop to free. */
	uint64_t seq;
	bool ok;
	uint64_t bytes;
	char path[PATH_MAX + 64];
	char raw_path[PATH_MAX + 64]; /* "" when none was kept */
	uint64_t dev, ino;
	struct ht_dump_capture capture;
	/* REMOVED: whether the replaced dump's file is gone. */
	bool gone;
};

struct ht_dumper {
	struct ht_dumper_config cfg;
	pthread_t thread;
	bool started;
	uint64_t started_ns;
	int wake_fd;	/* eventfd: the builder gave something back (read ht_dumper_tick) */
	int builder_fd; /* eventfd: the builder has work, or is to stop */

	/*
	 * Shared, each with one writer and one reader: a flag is 1 while its slot
	 * is the reader's, 0 while it is the writer's (__atomic, acquire and release).
	 */
	int build_full; /* the event loop's dump for the builder: */
	struct ht_dump_job build_job;
	struct ht_dump_capture build_capture;
	uint64_t build_seq, build_not_dumped;
	int remove_full;	   /* the dump for the builder to remove: the event loop's */
	struct ht_dump_kept remove; /* copy, which the builder only reads */
	int result_full;	   /* the builder's answer, one at a time */
	struct ht_dump_result result;
	int ready; /* the builder is set up (1), or could not be (-1, why in setup_error) */
	int builder_tid; /* set before ready */
	char setup_error[512];
	int stopping, exited;
	/* Execs for the builder: the event loop moves the head, the builder the tail. */
	struct ht_dump_exec exec_ring[HT_DUMP_EXECS];
	uint32_t exec_head, exec_tail;
	struct ht_text_ring lines; /* the builder's lines: stream 0 stderr, 1 the JSON stream */

	/* The event loop's: the candidates the policy holds (by its ids) and the policy. */
	struct ht_dump_held held[HT_DUMP_HELD];
	struct ht_dump_engine engine;
	/* The builder's raise (ht_dumper_raise), by the event loop and the guard. */
	pthread_mutex_t raise_lock;
	unsigned int raise_holds;
	bool raised;	/* it runs at loop_nice, not BUILDER_NICE */
	bool rushed;	/* it runs at SCHED_FIFO, the guard's turn for it */
	int loop_nice;	/* the event loop's nice value at the start */
	/* The event loop keeps the beat around its epoll_wait; the guard reads it. */
	struct ht_loop_beat beat;
	struct ht_guard_idle builder_idle;
	struct ht_builder_guard guard;
	bool building;	      /* a dump is with the builder */
	uint64_t building_t0; /* the window start of that dump */
	struct ht_dump_rank building_rank;
	bool removing; /* a replaced dump is with the builder, for the dump at: */
	char replacing_path[PATH_MAX + 64];
	struct ht_dump_rank replacing_rank;
	/* Skip reasons already printed since the last dump: each is said once. */
	bool said[HT_DUMP_DECISIONS];

	/* The builder's: its symbol state, its own streams, its schedule of map reads. */
	struct ht_dump_builder builder;
	FILE *err_lines, *out_lines;
	char *err_buf, *out_buf;
	size_t err_len, out_len;
	struct ht_dump_exec execs[HT_DUMP_EXECS];
	unsigned int nexecs;
	/* Its next idle re-read of the maps; no builds before late_until_ns. */
	uint64_t warm_due_ns, late_until_ns;
};

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg);

/* The builder thread's id, once ht_dumper_start returned 0. */
int ht_dumper_builder_tid(const struct ht_dumper *d);

/* Its guard thread's id, or 0 where it has none yet (builder_guard.h). */
int ht_dumper_guard_tid(const struct ht_dumper *d);

/*
 * Run the builder at the event loop's own nice value until ht_dumper_lower(),
 * while the event loop reads the target's threads in /proc and moves
 * hybtrace's own off its CPUs (own_cpus.h), and while the guard finds the
 * event loop stalled (builder_guard.h). At nice 19 on the target's busy CPU
 * the builder may wait there hundreds of ms, preempted inside a kernel
 * section that the event loop then waits on too: their process's mmap lock,
 * its file table's lock, on PREEMPT_RT a sleeping spinlock (a /proc dentry's,
 * the target's task lock), or a migrate-disabled section that holds up the
 * builder's own move. Priority inheritance does not lift a nice value;
 * raised, it gets its turn there within milliseconds and leaves the section
 * where the kernel has EEVDF (6.6 on; before it a runnable thread keeps the
 * virtual runtime nice 19 gave it, and raised waits for the threads beside
 * it to catch up: there the guard's short turns at SCHED_FIFO end a stall).
 * Not above the event loop: at SCHED_FIFO, once moved to the event loop's
 * CPU, the builder could keep it from the event loop, which is to lower it,
 * for as long as it had work. Raises nest: each ht_dumper_raise() has its
 * ht_dumper_lower(), and the builder is lowered with the last. The guard
 * watches from the raise to its lower, the builder waiting for work or not.
 * Whether it is raised (that needs CAP_SYS_NICE).
 */
bool ht_dumper_raise(struct ht_dumper *d);

/* The raise's end: back at nice 19 once no raise holds. */
void ht_dumper_lower(struct ht_dumper *d);

/* The event loop's turns that stalled with the builder raised by the guard, so far. */
uint64_t ht_dumper_stalls_lifted(const struct ht_dumper *d);

/* The builder's turns at SCHED_FIFO in those stalls, so far. */
uint64_t ht_dumper_stall_rushes(const struct ht_dumper *d);

/* Offer a job; returns what the policy decided (and prints it). Event loop only. */
enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job);

/* Readable when the builder is done and the next dump may go to it: call ht_dumper_tick then. */
int ht_dumper_fd(const struct ht_dumper *d);

/* When ht_dumper_tick is next due (CLOCK_MONOTONIC ns), or 0 when nothing waits. */
uint64_t ht_dumper_deadline(struct ht_dumper *d);

/*
 * Process TGID runs a new program: the builder reads its maps now and again
 * shortly after (the dynamic loader maps its libraries), for a program that
 * may exit before the next dump. Event loop only.
 */
void ht_dumper_exec(struct ht_dumper *d, int tgid);

/* The event loop has read every breach sent before READ_NS (ht_dump_engine_read). */
void ht_dumper_read(struct ht_dumper *d, uint64_t read_ns);

/* Freeze what is due at NOW_NS and hand it to the builder. Event loop only. */
void ht_dumper_tick(struct ht_dumper *d, uint64_t now_ns);

/*
 * The start of the oldest window a dump not yet written covers (CLOCK_MONOTONIC
 * ns), or UINT64_MAX: tasks that exited before it appear in no dump to come.
 * Event loop only.
 */
uint64_t ht_dumper_oldest_window(struct ht_dumper *d);

/* The session ends: make each choice now, freeze what is held, wait until all is written. */
void ht_dumper_wait_idle(struct ht_dumper *d);

/* Stop the builder (a dump being written is finished; what is held is dropped). */
void ht_dumper_stop(struct ht_dumper *d);

void ht_dumper_stats(struct ht_dumper *d, struct ht_dump_stats *out);

/* Build a job for breach B. */
void ht_dump_job_for_breach(struct ht_dump_job *job, const struct ht_breach *b,
			    uint64_t threshold_ns);

/*
 * How bad JOB's moment is, for the policy: a breach by its ratio to its
 * threshold, a trigger's hit and a manual or exit dump by their class.
 */
struct ht_dump_rank ht_dump_job_rank(const struct ht_dump_job *job);

/* Build a manual or exit job around NOW. */
void ht_dump_job_asked(struct ht_dump_job *job, const char *kind, uint64_t now_ns);

#endif /* HT_DUMPER_H */
