/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When dumps happen. The event loop offers each breach (or a manual or exit
 * request) to the dump policy; a dump it takes is armed until its window
 * ends, when the event loop freezes the sources at once (ht_dumper_tick at
 * ht_dumper_deadline) and hands the capture to a builder thread, which
 * builds and writes the file at nice 19. So the monitor never waits on a
 * dump, and a slow dump never delays the next freeze.
 */
#ifndef HT_DUMPER_H
#define HT_DUMPER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "dump_build.h"
#include "dump_policy.h"

/* Captures that may wait for the builder while it writes another dump. */
#define HT_DUMP_QUEUE 1

struct ht_dumper_stats {
	unsigned int written;
	uint64_t bytes;
	unsigned int failed;
	uint64_t skipped[HT_DUMP_SKIP_DISK + 1]; /* by enum ht_dump_decision */
};

struct ht_dumper {
	struct ht_dumper_config cfg;
	struct ht_dump_builder builder; /* the builder thread's */
	pthread_t thread;
	bool started;
	uint64_t started_ns;
	int wake_fd; /* eventfd: the builder took a capture, a deferred dump may follow */
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	bool stopping;
	/* The event loop's: a dump waiting for its window's end, and one deferred. */
	bool armed, have_pending;
	struct ht_dump_job armed_job, pending;
	/* Under the lock: captures for the builder, and what it is doing. */
	struct {
		struct ht_dump_job job;
		struct ht_dump_capture capture;
	} queue[HT_DUMP_QUEUE];
	unsigned int queued;
	bool building;
	uint64_t building_t0; /* the window start of the dump being written */
	struct ht_dump_tally tally;
	struct ht_dumper_stats stats;
	uint64_t not_dumped_since_last; /* breaches seen but not dumped since the last dump */
	/* Skip reasons already printed since the last dump: each is said once. */
	bool said[HT_DUMP_SKIP_DISK + 1];
};

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg);

/* Offer a job; returns what the policy decided (and prints it). Event loop only. */
enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job);

/* Readable when the builder made room for a deferred dump: call ht_dumper_tick then. */
int ht_dumper_fd(const struct ht_dumper *d);

/* When ht_dumper_tick is next due (CLOCK_MONOTONIC ns), or 0 when nothing waits. */
uint64_t ht_dumper_deadline(struct ht_dumper *d);

/* Freeze what is due at NOW_NS and hand it to the builder. Event loop only. */
void ht_dumper_tick(struct ht_dumper *d, uint64_t now_ns);

/*
 * The start of the oldest window a dump not yet written covers (CLOCK_MONOTONIC
 * ns), or UINT64_MAX: tasks that exited before it appear in no dump to come.
 * Event loop only.
 */
uint64_t ht_dumper_oldest_window(struct ht_dumper *d);

/* Freeze what is armed or pending, then wait until every dump is written. */
void ht_dumper_wait_idle(struct ht_dumper *d);

/* Stop the builder (a dump being written is finished; what waits is dropped). */
void ht_dumper_stop(struct ht_dumper *d);

void ht_dumper_stats(struct ht_dumper *d, struct ht_dumper_stats *out);

/* Build a job for breach B. */
void ht_dump_job_for_breach(struct ht_dump_job *job, const struct ht_breach *b,
			    uint64_t threshold_ns);

/* Build a manual or exit job around NOW. */
void ht_dump_job_asked(struct ht_dump_job *job, const char *kind, uint64_t now_ns);

#endif /* HT_DUMPER_H */
