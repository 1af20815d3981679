/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --trigger SPEC, for the event loop: specs resolved against the target's
 * mappings (again after exec and dlopen), hardware breakpoints on them,
 * and their hits, each a reason to dump.
 */
#ifndef HT_CODE_TRIGGERS_H
#define HT_CODE_TRIGGERS_H

#include <stdbool.h>
#include <stddef.h>
#include "triggers/breakpoint.h"
#include "triggers/trigger_spec.h"

struct ht_symbolizer;

struct ht_code_triggers {
	struct ht_triggers specs;
	struct ht_breakpoints bps;
	struct ht_symbolizer *symbolizer; /* the event loop's own */
	int tgid;
	bool open;
};

/*
 * Parse SPECS (up to four), resolve them in TGID, set the breakpoints.
 * WAIT, flags of ht_triggers_resolve(): HT_TRIGGERS_WAIT, what is not
 * mapped yet is no error (`run`, before its exec); HT_TRIGGERS_WAIT_MODULES, a
 * spec of a module not mapped yet waits for it (--pid, a library loaded
 * later). Returns 0, or -1 with one line in ht_last_error() (unknown symbol
 * with suggestions, ambiguity with candidates, a line with no code, more
 * than four).
 */
int ht_code_triggers_open(struct ht_code_triggers *ct, int tgid, char *const *specs, size_t n,
			  bool multi, unsigned int wait);
void ht_code_triggers_close(struct ht_code_triggers *ct);

/* The descriptors to poll; each readable one means: call ht_code_triggers_drain(). */
size_t ht_code_triggers_fds(const struct ht_code_triggers *ct, int *fds, size_t max);

/*
 * The hits since the last call, in time order, after following execs and
 * newly mapped code (triggers resolved and moved again). The caller frees
 * OUT with ht_bp_hits_free().
 */
int ht_code_triggers_drain(struct ht_code_triggers *ct, struct ht_bp_hits *out);

/*
 * The session ends: the breakpoints stop, and OUT gets the hits still in
 * the rings, as ht_code_triggers_drain() would (the target may be gone).
 */
int ht_code_triggers_finish(struct ht_code_triggers *ct, struct ht_bp_hits *out);

/* Every second: close the events of exited threads. */
void ht_code_triggers_reap(struct ht_code_triggers *ct);

/* The spec of trigger SLOT, as the user gave it. */
const char *ht_code_trigger_text(const struct ht_code_triggers *ct, int slot);

/* How many triggers there are (slots 0..count-1). */
size_t ht_code_triggers_count(const struct ht_code_triggers *ct);

/*
 * Why trigger SLOT never resolved since the target's last exec ("no module
 * libz.so.9 is mapped in process 42 (yet)"; "" when no reason is known), or
 * NULL when it did: the summary names the specs that never armed.
 */
const char *ht_code_trigger_unresolved(const struct ht_code_triggers *ct, size_t slot);

#endif /* HT_CODE_TRIGGERS_H */
