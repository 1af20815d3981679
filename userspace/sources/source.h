/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The on-CPU source interface: all that the session, the dump builder and
 * `hybtrace check` know of a source (Intel PT, sampling), in the manner of
 * perf's struct auxtrace_record. A source is opened for the target, reaps
 * the threads that exit, is frozen at a window's end on the event loop
 * (copies only: the loop must stay fast), and its frozen capture is lowered
 * into the timeline on the dump builder's thread, then freed.
 */
#ifndef HT_SOURCE_H
#define HT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hybtrace/records.h"
#include "trace/timeline.h"

struct ht_ksyms;
struct ht_comm_cache;
struct ht_fr_window;
struct ht_symbolizer_set;

/*
 * What a frozen capture of any source fits in, inside the dump's capture:
 * Intel PT's raw capture, the largest, so that a capture is no larger than it was.
 */
#define HT_SOURCE_FROZEN_BYTES 2200
/* Sources open at once: --source picks one. */
#define HT_SOURCES_OPEN_MAX 1

/* ops->symbols: what the builder keeps for a source's user-space stacks. */
#define HT_SOURCE_SYMBOLS 1u /* each target process's symbols */
#define HT_SOURCE_DWARF	  2u /* and DWARF unwinding */

/* The dump a source is frozen for: a capture kept for later decoding records it. */
struct ht_source_freeze {
	uint64_t frozen_ns; /* CLOCK_MONOTONIC when the sources were frozen */
	const char *kind;   /* the dump's kind */
	uint64_t threshold_ns, start_ns, end_ns, pre_ns, post_ns;
	uint64_t t0, t1; /* the window: what a source copies need reach no further back than t0 */
	const struct ht_breach *breach; /* NULL: no breach */
};

/* What lowering a frozen capture into the dump's timeline has at hand (builder thread). */
struct ht_source_lowering {
	struct timeline *tl;
	int tgid;			/* the first target named; 0: none (--cgroup, --all alone) */
	uint64_t t0, t1;		/* the window */
	uint64_t frozen_ns;		/* when the sources were frozen */
	bool live;			/* false: `hybtrace decode` of a kept capture */
	const struct ht_breach *breach; /* NULL: no breach */
	const struct ht_ksyms *ksyms;
	struct ht_comm_cache *comms; /* names (and processes) of tasks, for tracks it makes */
	/*
	 * Each process's user-space symbols: ht_symbolizer_set_get(symbols, tgid),
	 * and ht_symbolizer_set_unwinder() with HT_SOURCE_DWARF, for the process
	 * of each stack (symbols/symbolizer_set.h); maps read again once per
	 * dump. NULL unless ops->symbols asked for them.
	 */
	struct ht_symbolizer_set *symbols;
};

/* Where and when a capture was made, when it says so itself (a kept raw capture). */
struct ht_source_origin {
	uint64_t mono_ns, boot_ns, real_ns;	  /* one moment on three clocks; 0: not recorded */
	const char *kernel, *cpu_model, *cmdline; /* NULL: not recorded (this machine, now) */
};

/* A dump just written: what a source may keep beside it (its own raw capture). */
struct ht_source_written {
	const char *dump_path;
	const char *output_dir;
	const char *cmdline;
	bool json; /* say nothing on stderr */
	int tgid;
	const struct ht_fr_window *w;
	struct ht_comm_cache *comms;
	const struct ht_ksyms *ksyms;
	char *kept_path; /* gets the file kept, which goes with the dump */
	size_t kept_len;
};

struct ht_source_ops {
	const char *name;  /* as --source names it: "pt", "sample" */
	const char *title; /* in messages: "Intel PT", "sampling" */
	/*
	 * It opens no perf event (it reads, say, a language runtime's own
	 * stacks): kernel.perf_event_paranoid does not stop it, and `hybtrace
	 * check` does not ask perf events for it.
	 */
	bool no_perf_events;
	size_t state_bytes;
	/* `hybtrace check`: print its rows through ROW; returns whether it works here. */
	bool (*check)(void (*row)(const char *what, bool ok, const char *detail));
	/* `hybtrace check`'s "on-CPU source (--source auto)" line when auto picks it. */
	const char *check_auto;
	/* Whether `auto` may pick it here (cheap); 0, or -1 with why in ht_last_error(). */
	int (*usable)(void);
	/* What it maps (its share of --max-memory), for CONFIG on NCPUS CPUs. */
	uint64_t (*memory_bytes)(const void *config, unsigned int ncpus);
	/* Open for the target CONFIG names; STATE is state_bytes of zeros. 0, or -1. */
	int (*open)(void *state, const void *config);
	/*
	 * Threads it could not cover, their events past the descriptor limit:
	 * counted once opened, in the summary; may be NULL (it opens no events per thread).
	 */
	uint64_t (*threads_left_out)(const void *state);
	/* Exited threads give back what was opened for them (event loop, 4 Hz); may be NULL. */
	void (*reap)(void *state);
	/* The name dumps and the "attached" line give it: "pt", "pt-sideband-only", "sample". */
	const char *(*dump_name)(const void *state);
	/* The "hybtrace: on-CPU source: ..." line of a session. */
	void (*announce)(const void *state, FILE *f);
	/* HT_SOURCE_SYMBOLS, HT_SOURCE_DWARF: what lowering needs of the builder; may be NULL. */
	unsigned int (*symbols)(const void *state);
	/*
	 * At a window's end, on the event loop: copy what the window needs into
	 * FROZEN (HT_SOURCE_FROZEN_BYTES, zeroed) and return 0; nothing slower
	 * than the copies. -1 when nothing was frozen (it warns itself).
	 */
	int (*freeze)(void *state, const struct ht_source_freeze *f, void *frozen);
	/*
	 * Into the timeline, on the builder thread. FROZEN NULL: its freeze
	 * failed; STATE NULL: offline (`hybtrace decode`).
	 */
	void (*lower)(const void *state, const void *frozen, const struct ht_source_lowering *l);
	/* The capture's own time and machine, if it recorded them; false if not. May be NULL. */
	bool (*origin)(const void *frozen, struct ht_source_origin *o);
	/* After the dump is written (builder thread); may be NULL. */
	void (*written)(const void *state, const void *frozen, struct ht_source_written *w);
	void (*frozen_free)(void *frozen);
	void (*close)(void *state);
};

/* A number as a dump's metadata value. */
static inline void ht_source_meta_u64(struct timeline *tl, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	tl_meta_set(tl, key, buf);
}

/* One open source. */
struct ht_open_source {
	const struct ht_source_ops *ops;
	void *state;
};

/* A source's frozen capture inside a dump's capture. */
struct ht_source_frozen {
	const struct ht_source_ops *ops; /* NULL: an empty slot */
	const void *state;		 /* the source that froze it; NULL offline */
	bool frozen;			 /* false: its freeze failed */
	union {
		max_align_t align;
		unsigned char bytes[HT_SOURCE_FROZEN_BYTES];
	} u;
};

#endif /* HT_SOURCE_H */
