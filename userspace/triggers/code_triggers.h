/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --trigger SPEC, for the event loop: specs resolved in every target
 * process whose mappings hold their code (again after exec and dlopen),
 * hardware breakpoints on them, and their hits, each a reason to dump.
 *
 * Each armed process has its own breakpoints (one ht_breakpoints: rings,
 * events per thread and CPU) and symbolizer. A process forked by an armed
 * one is covered by the events it inherits (perf's inherit): from its
 * first instruction, with no descriptor of its own, its hits in its
 * parent's rings. It is armed on its own when it execs (the kernel removes
 * what it inherited) or when the process it inherited from leaves (closing
 * those events takes the inherited ones with them).
 */
#ifndef HT_CODE_TRIGGERS_H
#define HT_CODE_TRIGGERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "triggers/breakpoint.h"
#include "triggers/trigger_spec.h"

struct ht_symbolizer;
struct ht_targets;

/* One target process the triggers know. */
struct ht_trigger_proc {
	int tgid;
	/* > 0: forked from that armed process, covered by the events it inherited. */
	int covered_by;
	bool open; /* bps and specs are its own */
	struct ht_triggers specs;
	struct ht_breakpoints bps;
	struct ht_symbolizer *symbolizer;
	size_t left_said; /* threads left out already said on stderr */
};

struct ht_code_triggers {
	struct ht_triggers specs; /* as given; ever_resolved: in some process */
	struct ht_trigger_proc *procs;
	size_t nprocs, cap;
	const struct ht_targets *targets;      /* NULL until the monitor runs */
	uint64_t targets_joined, targets_left; /* the set's counts at the last sync */
	int *execs;			       /* target processes that exec'd, not synced yet */
	size_t nexecs, execs_cap;
	bool multi;
	bool children;		 /* forks of targets are targets: their hits (inherited) count */
	bool fired;		 /* one-shot: the hit was had, in some process */
	bool fds_changed;	 /* rings came or went: poll them again */
	uint64_t left_gone;	 /* threads left without breakpoints in processes no longer armed */
	uint64_t foreign;	 /* hits in processes that are not targets */
	struct ht_bp_hits carry; /* hits of processes that left, for the next drain */
	bool open;
	bool never_fire; /* hardware breakpoints do not fire on this machine (ht_bp_fires()) */
};

/*
 * Parse SPECS (up to four); resolve them in TGID (0: none yet, --cgroup)
 * and set its breakpoints. CHILDREN: forks of targets are targets too.
 * WAIT, flags of ht_triggers_resolve(): HT_TRIGGERS_WAIT, what is not
 * mapped yet is no error (`run`, before its exec); HT_TRIGGERS_WAIT_MODULES,
 * a spec of a module not mapped yet waits for it (--pid, a library loaded
 * later). Returns 0, or -1 with one line in ht_last_error() (unknown symbol
 * with suggestions, ambiguity with candidates, a line with no code, more
 * than four).
 */
int ht_code_triggers_open(struct ht_code_triggers *ct, int tgid, char *const *specs, size_t n,
			  bool multi, bool children, unsigned int wait);
void ht_code_triggers_close(struct ht_code_triggers *ct);

/* From now on, follow TARGETS: ht_code_triggers_sync() arms what joins it. */
void ht_code_triggers_follow(struct ht_code_triggers *ct, const struct ht_targets *targets);

/* Target process TGID runs a new program (the target ring's exec event). */
void ht_code_triggers_exec(struct ht_code_triggers *ct, int tgid);

/*
 * Arm the processes that joined the target set (or exec'd) since the last
 * call; close what the ones that left held (their hits wait for the next
 * drain). Cheap when the set did not change.
 */
void ht_code_triggers_sync(struct ht_code_triggers *ct);

/* The descriptors to poll; each readable one means: call ht_code_triggers_drain(). */
size_t ht_code_triggers_fds(const struct ht_code_triggers *ct, int *fds, size_t max);

/*
 * The hits since the last call, in time order, after following execs and
 * newly mapped code (triggers resolved and moved again). One-shot: one hit
 * in all processes. The caller frees OUT with ht_bp_hits_free().
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
 * Why trigger SLOT never resolved in any process ("no module libz.so.9 is
 * mapped in process 42 (yet)"; "" when no reason is known), or NULL when it
 * did: the summary names the specs that never armed.
 */
const char *ht_code_trigger_unresolved(const struct ht_code_triggers *ct, size_t slot);

/* "send_order+0x4" for the hit H, from its process's symbols, into BUF. */
const char *ht_code_trigger_function(struct ht_code_triggers *ct, const struct ht_bp_hit *h,
				     char *buf, size_t len);

/* Threads left without breakpoints for want of descriptors (RLIMIT_NOFILE), in all. */
uint64_t ht_code_triggers_left_out(const struct ht_code_triggers *ct);

#endif /* HT_CODE_TRIGGERS_H */
