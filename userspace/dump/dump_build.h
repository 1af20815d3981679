/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Building one dump: what the sources held at the end of the window (the
 * capture, taken promptly by the event loop), lowered into the timeline and
 * written to a file (by the builder thread, at leisure).
 */
#ifndef HT_DUMP_BUILD_H
#define HT_DUMP_BUILD_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "kernel/block_stacks.h"
#include "dump/dump_policy.h"
#include "hybtrace/records.h"
#include "kernel/recorder.h"
#include "triggers/breakpoint.h"
#include "sources/marks/marks.h"
#include "sources/marks/marks_procs.h"
#include "sources/source.h"

struct ht_monitor;
struct ht_ksyms;
struct ht_comm_cache;
struct ht_symbolizer_set;

struct ht_dumper_config {
	const char *output_dir;
	uint64_t pre_ns, post_ns;
	struct ht_dump_policy policy;
	int tgid;		 /* the one target named (--pid's first, run's); 0: none */
	const char *target_comm; /* its name */
	const char *cmdline;
	bool json; /* report written dumps as JSON lines on json_out */
	FILE *json_out;
	const struct ht_monitor *monitor; /* NULL: offline (`hybtrace decode`) */
	const struct ht_ksyms *ksyms;
	const struct ht_open_source *sources; /* the on-CPU sources open, frozen for each dump */
	unsigned int nsources;
	const char *base_name;	  /* the file's name without suffix; NULL: from the dump */
	const char *decoded_from; /* `hybtrace decode`: the raw capture's path */
	const struct ht_marks_source *marks; /* NULL: no user marks are read */
	/* --trigger: threads left without breakpoints so far (the event loop's count); else NULL. */
	const uint64_t *trigger_threads_left_out;
	unsigned int chain_depth; /* levels of wakers a breach's wait chain follows; 0: none */
	/* Tests: the builder neither builds nor re-reads maps idle this long after its start. */
	uint64_t test_builder_late_ns;
	/*
	 * Tests: the builder starts on CPU test_builder_busy_cpu (the target's, kept
	 * busy) and re-reads the maps every 2 ms while idle, in and out of the kernel.
	 */
	bool test_builder_busy;
	unsigned int test_builder_busy_cpu;
};

struct ht_dump_job {
	char kind[16];	      /* rq-delay, off-cpu, syscall, off-cpu+syscall, manual, exit */
	bool has_breach;
	struct ht_breach breach;
	uint64_t threshold_ns;
	uint64_t start_ns, end_ns; /* the interval the window is built around */
	bool asked;		   /* manual or exit: not held to the minimum interval */
	bool deferred;		   /* it waited for another dump: its sources froze late */
	/* A code trigger's hit: the breakpoint, the spec, the function it stopped in. */
	bool has_hit;
	struct ht_bp_hit hit;
	char trigger[128];
	char function[256];
	/* --block-stacks: the breached thread's user stack where its wait began. */
	bool has_block_stack;
	struct ht_block_frames block_stack;
	/* The waker's stacks at the wakeup that ended the breach's wait. */
	bool has_waker_stack;
	struct ht_waker_stack waker_stack;
};

/*
 * User marks: read at each freeze from every target process with an event
 * in the window, through where each one's registries were found before,
 * with a (rdtsc, clock) pair from attach. The thread that freezes owns it.
 */
struct ht_marks_source {
	struct ht_tsc_pair attach_pair;
	struct ht_marks_procs *procs;
	/* Which process a thread of the window is of (the freezing thread's cache). */
	struct ht_comm_cache *comms;
};

/* Processes whose marks one dump reads at most: the dump's own first. */
#define HT_MARKS_DUMP_PROCESSES HT_MARKS_PROCS_MAX

/* One process's user marks in a dump's window. */
struct ht_proc_marks {
	int tgid;
	struct ht_mark_set set;
};

/* What the sources held at the end of a dump's window. */
struct ht_dump_capture {
	uint64_t t0, t1;
	uint64_t frozen_ns; /* CLOCK_MONOTONIC when the sources were frozen */
	struct ht_fr_window w;
	/* User marks, when looked for (marks_on): each process's that had any in the window. */
	bool marks_on;
	struct ht_proc_marks *marks;
	size_t nmarks;
	uint64_t marks_processes;      /* processes whose registries were read */
	uint64_t marks_lost_processes; /* with registries, but gone or unreadable: skipped */
	uint64_t marks_read_ns;	       /* the freeze's time finding and reading them */
	/* What each on-CPU source froze (Intel PT's: the rings and all a decode needs). */
	unsigned int nfrozen;
	struct ht_source_frozen frozen[HT_SOURCES_OPEN_MAX];
};

/* The builder's own symbol state, kept across dumps (one thread uses it). */
struct ht_dump_builder {
	const struct ht_dumper_config *cfg;
	FILE *json_out; /* its JSON lines (a wait chain's): cfg->json_out, or the dumper's own */
	struct ht_comm_cache *comms;
	/* Each target process's, for a source that asks (HT_SOURCE_SYMBOLS, _DWARF). */
	struct ht_symbolizer_set *symbols;
	/* The last dump written: its file (so that only it is ever removed) and its raw capture. */
	uint64_t written_dev, written_ino;
	char raw_path[PATH_MAX + 64]; /* "" when none was kept */
};

/* The window [t0, t1] of JOB. */
void ht_dump_window(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
		    uint64_t *t0, uint64_t *t1);

/* Freeze the sources and read the window now. Returns 0, or -1 with ht_last_error(). */
int ht_dump_capture_take(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
			 struct ht_dump_capture *c);
void ht_dump_capture_free(struct ht_dump_capture *c);

int ht_dump_builder_init(struct ht_dump_builder *b, const struct ht_dumper_config *cfg);
void ht_dump_builder_free(struct ht_dump_builder *b);

/* Re-read the target processes' mappings; a process that is gone keeps what was known. */
void ht_dump_builder_refresh(struct ht_dump_builder *b);

/* Read process TGID's maps again now: it runs a new program. The builder thread's. */
void ht_dump_builder_reread(struct ht_dump_builder *b, int tgid);

/*
 * Build the dump of JOB from C and write it into the output directory.
 * FINAL gets the file's path. NOT_DUMPED is recorded in its metadata.
 */
int ht_dump_builder_write(struct ht_dump_builder *b, const struct ht_dump_job *job,
			  const struct ht_dump_capture *c, uint64_t not_dumped, char *final,
			  size_t len, uint64_t *bytes, size_t *events);

/* CLOCK_MONOTONIC time as wall-clock nanoseconds, through a reading of both now. */
uint64_t ht_monotonic_to_realtime(uint64_t monotonic_ns);

#endif /* HT_DUMP_BUILD_H */
