/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The summary's counts, for the session and by process: breaches of each
 * kind with the largest of each, and each process's histograms (the
 * monitor's, kept here once the process exits). Bounded: past
 * max_gone exited processes with breaches, the one with the fewest is
 * folded into the rest (its counts added, its name dropped), and so is
 * every exited process without a breach; past max_entries processes, new
 * ones count in the rest at once. Pure: the unit tests play it.
 */
#ifndef HT_PROC_STATS_H
#define HT_PROC_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "base/json.h"
#include "hybtrace/records.h"
#include "kernel/proc_hists.h"

/* The largest of some breaches, and how many. */
struct ht_breach_max {
	uint64_t count;
	uint64_t max_ns;
	uint32_t max_tid;
	char max_comm[HT_COMM_LEN + 1];
};

/*
 * The breaches of one kind: COUNT all of them, the largest among those that
 * are not waits for work, which are counted apart with their own largest,
 * so an idle event loop never stands for the worst wait of a session.
 */
struct ht_kind_stats {
	uint64_t count;
	struct ht_breach_max worst, idle;
};

/* B breached K's threshold for DUR_NS. */
void ht_kind_stats_note(struct ht_kind_stats *k, const struct ht_breach *b, uint64_t dur_ns);

/* "largest 35.1ms (tid 1240 worker)": the longest of the breaches M counts. */
void ht_print_largest(FILE *f, const struct ht_breach_max *m);

/* K and what it counts of FROM, added. */
void ht_kind_stats_add(struct ht_kind_stats *k, const struct ht_kind_stats *from);

/* One process, or the rest (tgid 0). */
struct ht_proc_entry {
	int tgid;
	bool gone; /* exited: hist holds its histograms */
	char comm[HT_COMM_LEN + 1];
	uint64_t waits; /* breach records: one per wait, whatever kinds it breached */
	struct ht_kind_stats kinds[HT_BREACH_KIND_MAX];
	struct ht_proc_hist_counts hist;
};

#define HT_PROC_STATS_MAX_GONE 256
#define HT_PROC_STATS_MAX      16384

struct ht_proc_stats {
	struct ht_proc_entry *v; /* sorted by tgid; of a tgid reused, the gone first */
	size_t count, cap;
	size_t gone; /* of them, exited */
	size_t max_gone, max_entries;
	/* Processes folded together, and how many. */
	struct ht_proc_entry rest;
	uint64_t rest_processes;
};

void ht_proc_stats_init(struct ht_proc_stats *s, size_t max_gone, size_t max_entries);
void ht_proc_stats_free(struct ht_proc_stats *s);

/*
 * The entry a breach of process TGID (named COMM) counts in, its waits
 * counted: its own, made at its first breach, or the rest's when there is
 * no room. The caller notes each kind the wait breached in it.
 */
struct ht_proc_entry *ht_proc_stats_breach(struct ht_proc_stats *s, int tgid, const char *comm);

/*
 * Process TGID exited with the histograms COUNTS: its entry keeps them
 * (the bound may fold it into the rest), or, without a breach, the rest.
 */
void ht_proc_stats_gone(struct ht_proc_stats *s, int tgid,
			const struct ht_proc_hist_counts *counts);

/* <0 when A ranks before B: more waits breached, a larger breach, then the lower pid. */
int ht_proc_entry_cmp(const struct ht_proc_entry *a, const struct ht_proc_entry *b);

/* The largest breach of E, of any kind, waits for work aside. */
uint64_t ht_proc_entry_max_ns(const struct ht_proc_entry *e);

/* E's intervals in its histogram of kind K (1..): how many were judged. */
uint64_t ht_proc_hist_total(const struct ht_proc_hist_counts *c, unsigned int kind);

/*
 * The summary's processes: an entry for each process with breaches or a
 * live histogram slot, live ones with their slot's counts (a live process
 * without breaches named by COMM_OF), ranked by ht_proc_entry_cmp; and the
 * rest with the intervals no slot took. *ROWS is the caller's to free.
 * Returns how many, or -1 out of memory.
 */
long ht_proc_stats_rows(const struct ht_proc_stats *s, const struct ht_proc_hist *slots,
			unsigned int nslots, const char *(*comm_of)(void *ctx, int tgid), void *ctx,
			struct ht_proc_entry **rows, struct ht_proc_entry *rest);

/*
 * Whether the summary has histograms of KIND: run-queue delays always, the
 * others when their breach is on (THRESHOLD_NS by kind, 0: off).
 */
bool ht_summary_measures(const uint64_t *threshold_ns, unsigned int kind);

/* Processes the text summary shows one by one; the others are summed. */
#define HT_SUMMARY_TEXT_PROCESSES 10

/*
 * The summary's part by process, from ht_proc_stats_rows: as text on F
 * (only when there were several processes), or as members of J when J is
 * not NULL ("processes", "other_processes"). OUTSIDE: the intervals of
 * processes no slot took (already in REST's histograms), NSLOTS the slots.
 */
void ht_proc_stats_print(FILE *f, struct ht_json *j, const uint64_t *threshold_ns,
			 const struct ht_proc_entry *rows, long n, const struct ht_proc_entry *rest,
			 uint64_t rest_processes, const struct ht_proc_hist_counts *outside,
			 unsigned int nslots);

#endif /* HT_PROC_STATS_H */
