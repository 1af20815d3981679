/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The dump worker: a thread that turns a breach (or a manual or exit
 * request) into one trace file, so the event loop never waits on a dump.
 * It waits out the post window, reads the flight recorder, builds the
 * timeline, writes the file safely. The dump policy decides what is dumped;
 * a breach that arrives while a dump is written may follow it.
 */
#ifndef HT_DUMPER_H
#define HT_DUMPER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "dump_policy.h"
#include "hybtrace/records.h"

struct ht_monitor;
struct ht_ksyms;
struct ht_comm_cache;
struct ht_sampler;
struct ht_symbolizer;
struct ht_dwarf_unwinder;

struct ht_dumper_config {
	const char *output_dir;
	uint64_t pre_ns, post_ns;
	struct ht_dump_policy policy;
	int tgid;
	const char *target_comm;
	const char *cmdline;
	bool json; /* report written dumps as JSON lines on stdout */
	const struct ht_monitor *monitor;
	const struct ht_ksyms *ksyms;
	struct ht_sampler *sampler; /* NULL: no on-CPU source */
};

struct ht_dump_job {
	char kind[16];	      /* rq-delay, off-cpu, syscall, manual, exit */
	bool has_breach;
	struct ht_breach breach;
	uint64_t threshold_ns;
	uint64_t start_ns, end_ns; /* the interval the window is built around */
	bool asked;		   /* manual or exit: not held to the minimum interval */
};

struct ht_dumper_stats {
	unsigned int written;
	uint64_t bytes;
	unsigned int failed;
	uint64_t skipped[HT_DUMP_SKIP_DISK + 1]; /* by enum ht_dump_decision */
};

struct ht_dumper {
	struct ht_dumper_config cfg;
	struct ht_comm_cache *comms; /* the worker's own */
	struct ht_symbolizer *symbolizer; /* the worker's own, kept across dumps */
	struct ht_dwarf_unwinder *unwinder; /* with --callgraph dwarf */
	pthread_t thread;
	bool started;
	uint64_t started_ns;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	bool stopping;
	bool have_job, have_pending;
	struct ht_dump_job job, pending;
	struct ht_dump_tally tally;
	struct ht_dumper_stats stats;
	uint64_t not_dumped_since_last; /* breaches seen but not dumped since the last dump */
	/* Skip reasons already printed since the last dump: each is said once. */
	bool said[HT_DUMP_SKIP_DISK + 1];
};

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg);

/* Offer a job; returns what the policy decided (and prints it). */
enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job);

/* Wait until no dump is being written or waiting. */
void ht_dumper_wait_idle(struct ht_dumper *d);

/* Finish the dump in progress (a pending one is dropped), stop the thread. */
void ht_dumper_stop(struct ht_dumper *d);

void ht_dumper_stats(struct ht_dumper *d, struct ht_dumper_stats *out);

/* Build a job for breach B. */
void ht_dump_job_for_breach(struct ht_dump_job *job, const struct ht_breach *b,
			    uint64_t threshold_ns);

/* Build a manual or exit job around NOW. */
void ht_dump_job_asked(struct ht_dump_job *job, const char *kind, uint64_t now_ns);

#endif /* HT_DUMPER_H */
