/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When dumps happen. The event loop offers each breach (or a trigger's hit,
 * a manual or exit request) to the dump policy (dump_policy.h); a candidate
 * it holds is frozen when its window ends, by the event loop at once
 * (ht_dumper_tick at ht_dumper_deadline), and the capture it chooses goes to
 * a builder thread, which builds and writes the file at nice 19 and removes
 * the dump it replaces. So the monitor never waits on a dump, and a slow
 * dump never delays the next freeze.
 */
#ifndef HT_DUMPER_H
#define HT_DUMPER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

struct ht_dumper {
	struct ht_dumper_config cfg;
	struct ht_dump_builder builder; /* the builder thread's */
	pthread_t thread;
	bool started;
	uint64_t started_ns;
	int wake_fd; /* eventfd: the builder is done, the next dump may go to it */
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	bool stopping;
	/* The event loop's: the candidates the policy holds, by the policy's ids. */
	struct ht_dump_held held[HT_DUMP_HELD];
	/* Under the lock: the policy, the dump handed to the builder, and what it is doing. */
	struct ht_dump_engine engine;
	bool queued;
	struct ht_dump_job queue_job;
	struct ht_dump_capture queue_capture;
	uint64_t queue_seq, queue_not_dumped;
	bool building;
	uint64_t building_t0; /* the window start of the dump being written */
	struct ht_dump_exec execs[HT_DUMP_EXECS];
	unsigned int nexecs;
	/* The builder's: its next idle re-read of the maps; no builds before late_until_ns. */
	uint64_t warm_due_ns, late_until_ns;
	/* Skip reasons already printed since the last dump: each is said once. */
	bool said[HT_DUMP_DECISIONS];
};

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg);

/* Offer a job; returns what the policy decided (and prints it). Event loop only. */
enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job);

/* Readable when the builder is done and the next dump may go to it: call ht_dumper_tick then. */
int ht_dumper_fd(const struct ht_dumper *d);

/* When ht_dumper_tick is next due (CLOCK_MONOTONIC ns), or 0 when nothing waits. */
uint64_t ht_dumper_deadline(struct ht_dumper *d);

/*
 * Process TGID runs a new program: the builder reads its maps now and again
 * shortly after (the dynamic loader maps its libraries), for a program that
 * may exit before the next dump. Any thread.
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
