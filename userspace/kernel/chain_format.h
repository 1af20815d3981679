/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A wait chain as users read it: each stretch with its tasks named and its
 * state, syscall and waker spelled, whether it comes from the flight
 * recorder (the builder's ht_wait_chain) or from a dump's chain slices
 * (the report's). One JSON form and one text form for both.
 */
#ifndef HT_CHAIN_FORMAT_H
#define HT_CHAIN_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/json.h"
#include "kernel/wait_chain.h"

#define HT_CHAIN_USER_FRAMES 16

/* One stretch, spelled; the strings are the caller's (NULL: not said). */
struct ht_chain_line {
	uint64_t start_ns, end_ns;
	unsigned int depth;
	uint32_t tid;
	const char *comm;
	const char *stretch; /* ht_stretch_kind_name() */
	int cpu;	     /* -1: not said */
	bool exited, before_window;
	bool leaf; /* no stretches under it: the leaves add up to the wait */
	/* runnable */
	uint32_t behind;
	const char *behind_comm;
	uint64_t behind_ns;
	/* blocked */
	const char *state; /* "S", "D", ..., HT_STATE_UNKNOWN */
	const char *syscall;
	const char *woken_by; /* ht_wake_source_name() */
	uint32_t waker;
	const char *waker_comm;
	const char *stop; /* ht_chain_stop_name(); NULL: followed */
	/* running, a target's: the user frames its samples show there, root first */
	const char *user_stack[HT_CHAIN_USER_FRAMES];
	unsigned int user_depth;
};

/* What a chain says of itself, beside its lines. */
struct ht_chain_summary {
	uint32_t tid;
	uint64_t start_ns, end_ns;
	unsigned int max_depth; /* asked */
	bool cut_by_window, truncated;
};

/* Names of tasks, for the stretches of a chain from the flight recorder. */
typedef const char *(*ht_task_namer)(void *ctx, uint32_t tid, char *buf, size_t len);

/*
 * Stretch I of C spelled into *L, its names from NAME into BUFS (three
 * names of HT_CHAIN_NAME_LEN: the task, who it was behind, its waker) and
 * STATE (4 bytes at least).
 */
#define HT_CHAIN_NAME_LEN 32
void ht_chain_line_of(const struct ht_wait_chain *c, size_t i, ht_task_namer name, void *ctx,
		      char bufs[3][HT_CHAIN_NAME_LEN], char *state, size_t state_len,
		      struct ht_chain_line *l);

/* The chain as member KEY of J's object: an array of stretches in walk order. */
void ht_chain_json(struct ht_json *j, const char *key, const struct ht_chain_summary *sum,
		   const struct ht_chain_line *lines, size_t n);

/*
 * LINE as a report line: duration, share of the wait, then the task and
 * what it did, indented by depth ("  18.20ms  91.0%    chain_c[412] blocked
 * S in clock_nanosleep, woken by timer").
 */
void ht_chain_text(const struct ht_chain_summary *sum, const struct ht_chain_line *line, char *buf,
		   size_t len);

#endif /* HT_CHAIN_FORMAT_H */
