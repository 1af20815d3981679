// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/breach_kinds.h"
#include "base/histogram.h"
#include "base/units.h"
#include "base/partition.h"
#include "cli/proc_stats.h"
#include "kernel/wait_for_work.h"

static void max_note(struct ht_breach_max *m, uint64_t dur_ns, uint32_t tid, const char *comm)
{
	m->count++;
	if (dur_ns > m->max_ns) {
		m->max_ns = dur_ns;
		m->max_tid = tid;
		snprintf(m->max_comm, sizeof(m->max_comm), "%.*s", HT_COMM_LEN, comm);
	}
}

void ht_kind_stats_note(struct ht_kind_stats *k, const struct ht_breach *b, uint64_t dur_ns)
{
	k->count++;
	max_note(ht_breach_waits_for_work(b) ? &k->idle : &k->worst, dur_ns, b->tid, b->comm);
}

static void max_add(struct ht_breach_max *m, const struct ht_breach_max *from)
{
	uint64_t count = m->count + from->count;

	if (from->count)
		max_note(m, from->max_ns, from->max_tid, from->max_comm);
	m->count = count;
}

void ht_kind_stats_add(struct ht_kind_stats *k, const struct ht_kind_stats *from)
{
	k->count += from->count;
	max_add(&k->worst, &from->worst);
	max_add(&k->idle, &from->idle);
}

static void hist_add(struct ht_proc_hist_counts *c, const struct ht_proc_hist_counts *from)
{
	for (unsigned int k = 0; k < HT_PROC_HIST_KINDS; k++)
		for (unsigned int i = 0; i < HT_HIST_SLOTS; i++)
			c->slots[k][i] += from->slots[k][i];
}

uint64_t ht_proc_hist_total(const struct ht_proc_hist_counts *c, unsigned int kind)
{
	uint64_t n = 0;

	if (kind < 1 || kind > HT_PROC_HIST_KINDS)
		return 0;
	for (unsigned int i = 0; i < HT_HIST_SLOTS; i++)
		n += c->slots[kind - 1][i];
	return n;
}

void ht_proc_stats_init(struct ht_proc_stats *s, size_t max_gone, size_t max_entries)
{
	memset(s, 0, sizeof(*s));
	s->max_gone = max_gone;
	s->max_entries = max_entries;
}

void ht_proc_stats_free(struct ht_proc_stats *s)
{
	free(s->v);
	s->v = NULL;
	s->count = s->cap = 0;
}

uint64_t ht_proc_entry_max_ns(const struct ht_proc_entry *e)
{
	uint64_t max = 0;

	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (e->kinds[k].worst.max_ns > max)
			max = e->kinds[k].worst.max_ns;
	return max;
}

int ht_proc_entry_cmp(const struct ht_proc_entry *a, const struct ht_proc_entry *b)
{
	uint64_t ma = ht_proc_entry_max_ns(a), mb = ht_proc_entry_max_ns(b);

	if (a->waits != b->waits)
		return a->waits > b->waits ? -1 : 1;
	if (ma != mb)
		return ma > mb ? -1 : 1;
	return a->tgid < b->tgid ? -1 : a->tgid > b->tgid;
}

/* Where TGID is, or would go, in the sorted list: its first entry. */
static size_t index_of(const struct ht_proc_stats *s, int tgid)
{
	return HT_PARTITION_POINT(0, s->count, i, s->v[i].tgid < tgid);
}

/* The entry of TGID, live (GONE false) or exited, or NULL. */
static struct ht_proc_entry *find(struct ht_proc_stats *s, int tgid, bool gone)
{
	for (size_t i = index_of(s, tgid); i < s->count && s->v[i].tgid == tgid; i++)
		if (s->v[i].gone == gone)
			return &s->v[i];
	return NULL;
}

static void fold(struct ht_proc_stats *s, const struct ht_proc_entry *e)
{
	s->rest.waits += e->waits;
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		ht_kind_stats_add(&s->rest.kinds[k], &e->kinds[k]);
	hist_add(&s->rest.hist, &e->hist);
	s->rest_processes++;
}

static void remove_at(struct ht_proc_stats *s, size_t i)
{
	s->gone -= s->v[i].gone;
	memmove(&s->v[i], &s->v[i + 1], (s->count - i - 1) * sizeof(*s->v));
	s->count--;
}

struct ht_proc_entry *ht_proc_stats_breach(struct ht_proc_stats *s, int tgid, const char *comm)
{
	struct ht_proc_entry *e = find(s, tgid, false);
	size_t i;

	if (!e) {
		if (s->count >= s->max_entries)
			goto rest;
		if (s->count == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			struct ht_proc_entry *v = realloc(s->v, cap * sizeof(*v));

			if (!v)
				goto rest;
			s->v = v;
			s->cap = cap;
		}
		/* After its pid's exited processes: a new process of a reused pid. */
		i = index_of(s, tgid);
		while (i < s->count && s->v[i].tgid == tgid)
			i++;
		memmove(&s->v[i + 1], &s->v[i], (s->count - i) * sizeof(*s->v));
		s->count++;
		e = &s->v[i];
		memset(e, 0, sizeof(*e));
		e->tgid = tgid;
	}
	if (comm && *comm)
		snprintf(e->comm, sizeof(e->comm), "%.*s", HT_COMM_LEN, comm);
	e->waits++;
	return e;
rest:
	/* Counted as one more of the rest at its first breach, which is all that is known. */
	s->rest.waits++;
	return &s->rest;
}

/* Past the bound, the exited process with the fewest breaches goes to the rest. */
static void bound_gone(struct ht_proc_stats *s)
{
	size_t least = s->count;

	if (s->gone <= s->max_gone)
		return;
	for (size_t i = 0; i < s->count; i++)
		if (s->v[i].gone &&
		    (least == s->count || ht_proc_entry_cmp(&s->v[i], &s->v[least]) > 0))
			least = i;
	if (least == s->count)
		return;
	fold(s, &s->v[least]);
	remove_at(s, least);
}

void ht_proc_stats_gone(struct ht_proc_stats *s, int tgid, const struct ht_proc_hist_counts *counts)
{
	struct ht_proc_entry *e = find(s, tgid, false);

	if (!e) {
		struct ht_proc_entry none = { .tgid = tgid, .hist = *counts };

		/*
		 * Its process's other slot, taken by a thread that outlived the
		 * first mark; or a process that never breached, folded at once.
		 */
		e = find(s, tgid, true);
		if (e)
			hist_add(&e->hist, counts);
		else
			fold(s, &none);
		return;
	}
	e->gone = true;
	hist_add(&e->hist, counts);
	s->gone++;
	bound_gone(s);
}

static int row_cmp(const void *a, const void *b)
{
	return ht_proc_entry_cmp(a, b);
}

long ht_proc_stats_rows(const struct ht_proc_stats *s, const struct ht_proc_hist *slots,
			unsigned int nslots, const char *(*comm_of)(void *ctx, int tgid), void *ctx,
			struct ht_proc_entry **rows, struct ht_proc_entry *rest)
{
	struct ht_proc_hist_counts counts;
	size_t n = 0, cap = s->count + nslots;
	struct ht_proc_entry *v = calloc(cap ? cap : 1, sizeof(*v));

	*rows = NULL;
	if (!v)
		return -1;
	for (size_t i = 0; i < s->count; i++) {
		const struct ht_proc_hist *h;

		v[n] = s->v[i];
		h = v[n].gone ? NULL : ht_proc_hists_find(slots, nslots, (uint32_t)v[n].tgid);
		if (h)
			ht_proc_hist_read(h, &v[n].hist);
		n++;
	}
	/* Live processes without a breach, by their slots. */
	for (unsigned int i = 0; i < nslots; i++) {
		const char *comm;
		bool gone;
		uint32_t tgid = ht_proc_hist_owner(&slots[i], &gone);
		struct ht_proc_entry *e;

		if (!tgid || gone || ht_proc_hists_find(slots, nslots, tgid) != &slots[i])
			continue;
		e = find((struct ht_proc_stats *)s, (int)tgid, false);
		if (e)
			continue;
		memset(&v[n], 0, sizeof(v[n]));
		v[n].tgid = (int)tgid;
		comm = comm_of ? comm_of(ctx, (int)tgid) : NULL;
		snprintf(v[n].comm, sizeof(v[n].comm), "%.*s", HT_COMM_LEN, comm ? comm : "");
		ht_proc_hist_read(&slots[i], &v[n].hist);
		n++;
	}
	qsort(v, n, sizeof(*v), row_cmp);
	*rest = s->rest;
	/* The intervals of processes no slot could take: after the last slot. */
	if (nslots) {
		ht_proc_hist_read(&slots[nslots], &counts);
		hist_add(&rest->hist, &counts);
	}
	*rows = v;
	return (long)n;
}

/* ---- the summary's part by process ---- */

bool ht_summary_measures(const uint64_t *threshold_ns, unsigned int kind)
{
	return ht_breach_kinds[kind].always_measured || threshold_ns[kind];
}

void ht_print_largest(FILE *f, const struct ht_breach_max *m)
{
	char dur[32];

	fprintf(f, "largest %s (tid %u %s)", ht_format_duration(m->max_ns, dur, sizeof(dur)),
		m->max_tid, m->max_comm);
}

/* "12 waits breached: off-cpu 10, largest 35.1ms (tid 1240 worker); rq-delay 2, ..." */
static void print_counts_text(FILE *f, const uint64_t *threshold_ns, const struct ht_proc_entry *e)
{
	const char *sep = ":";

	fprintf(f, "%llu wait%s breached", (unsigned long long)e->waits, e->waits == 1 ? "" : "s");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		const struct ht_kind_stats *ks = &e->kinds[k];

		if (!threshold_ns[k] || !ks->count)
			continue;
		fprintf(f, "%s %s %llu", sep, ht_breach_kind_name(k),
			(unsigned long long)ks->count);
		if (ks->worst.count) {
			fputs(", ", f);
			ht_print_largest(f, &ks->worst);
		}
		if (ks->idle.count)
			fprintf(f, ", %llu waiting for work", (unsigned long long)ks->idle.count);
		sep = ";";
	}
	fputc('\n', f);
}

static void print_hists_text(FILE *f, const uint64_t *threshold_ns, const struct ht_proc_entry *e,
			     const char *whose)
{
	char title[160];

	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		if (!ht_summary_measures(threshold_ns, k) || !ht_proc_hist_total(&e->hist, k))
			continue;
		snprintf(title, sizeof(title),
			 "  %s of %s, log2 buckets:", ht_breach_kinds[k].title, whose);
		ht_hist_print_used(f, title, e->hist.slots[k - 1], HT_HIST_SLOTS);
	}
}

/* Whether E has anything to show: a breach, or an interval judged. */
static bool seen(const struct ht_proc_entry *e)
{
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (ht_proc_hist_total(&e->hist, k))
			return true;
	return e->waits != 0;
}

static void entry_add(struct ht_proc_entry *sum, const struct ht_proc_entry *e)
{
	sum->waits += e->waits;
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		ht_kind_stats_add(&sum->kinds[k], &e->kinds[k]);
	hist_add(&sum->hist, &e->hist);
}

/*
 * After the session's: the processes with the most breaches, each with its
 * counts and histograms, then the others summed; only when there were
 * several.
 */
static void print_text(FILE *f, const uint64_t *threshold_ns, const struct ht_proc_entry *rows,
		       long n, const struct ht_proc_entry *rest, uint64_t rest_processes,
		       const struct ht_proc_hist_counts *outside)
{
	bool unslotted = false;
	long shown = n < HT_SUMMARY_TEXT_PROCESSES ? n : HT_SUMMARY_TEXT_PROCESSES;
	uint64_t others = rest_processes + (uint64_t)(n - shown);
	struct ht_proc_entry sum = *rest;
	char whose[64];

	if ((uint64_t)n + rest_processes < 2 && !seen(rest))
		return;
	fprintf(f, "\nby process, the most breaches first (%llu processes):\n",
		(unsigned long long)((uint64_t)n + rest_processes));
	for (long i = 0; i < shown; i++) {
		const struct ht_proc_entry *e = &rows[i];

		fprintf(f, "\npid %d (%s)%s: ", e->tgid, e->comm, e->gone ? ", exited" : "");
		print_counts_text(f, threshold_ns, e);
		snprintf(whose, sizeof(whose), "pid %d (%s)", e->tgid, e->comm);
		print_hists_text(f, threshold_ns, e, whose);
	}
	for (long i = shown; i < n; i++)
		entry_add(&sum, &rows[i]);
	if (!seen(&sum))
		return;
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		unslotted |= ht_proc_hist_total(outside, k) != 0;
	fprintf(f, "\n%llu other process%s%s: ", (unsigned long long)others,
		others == 1 ? "" : "es", unslotted ? ", and those no histogram slot took" : "");
	print_counts_text(f, threshold_ns, &sum);
	print_hists_text(f, threshold_ns, &sum, "the other processes");
}

static void print_entry_json(struct ht_json *j, const uint64_t *threshold_ns,
			     const struct ht_proc_entry *e)
{
	ht_json_u64(j, "waits_breached", e->waits);
	ht_json_object(j, "breaches");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		const struct ht_kind_stats *ks = &e->kinds[k];

		ht_json_object(j, ht_breach_kind_name(k));
		ht_json_u64(j, "count", ks->count);
		ht_json_u64(j, "max_ns", ks->worst.max_ns);
		if (ks->worst.count) {
			ht_json_u64(j, "max_tid", ks->worst.max_tid);
			ht_json_str(j, "max_comm", ks->worst.max_comm);
		}
		ht_json_object(j, "wait_for_work");
		ht_json_u64(j, "count", ks->idle.count);
		ht_json_u64(j, "max_ns", ks->idle.max_ns);
		ht_json_close(j);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_object(j, "histograms");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (ht_summary_measures(threshold_ns, k))
			ht_hist_print_json(j, ht_breach_kind_name(k), e->hist.slots[k - 1],
					   HT_HIST_SLOTS);
	ht_json_close(j);
}

/*
 * "processes": each process with breaches or a histogram slot, the most
 * breaches first; "other_processes": those folded together (the bounds),
 * with the intervals of processes no slot took.
 */
static void print_json(struct ht_json *j, const uint64_t *threshold_ns,
		       const struct ht_proc_entry *rows, long n, const struct ht_proc_entry *rest,
		       uint64_t rest_processes, const struct ht_proc_hist_counts *outside,
		       unsigned int nslots)
{
	uint64_t without_slot = 0;

	ht_json_array(j, "processes");
	for (long i = 0; i < n; i++) {
		ht_json_object(j, NULL);
		ht_json_i64(j, "pid", rows[i].tgid);
		ht_json_str(j, "comm", rows[i].comm);
		ht_json_bool(j, "running", !rows[i].gone);
		print_entry_json(j, threshold_ns, &rows[i]);
		ht_json_close(j);
	}
	ht_json_close(j);
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		without_slot += ht_proc_hist_total(outside, k);
	ht_json_object(j, "other_processes");
	ht_json_u64(j, "processes", rest_processes);
	ht_json_u64(j, "intervals_without_slot", without_slot);
	ht_json_u64(j, "histogram_slots", nslots);
	print_entry_json(j, threshold_ns, rest);
	ht_json_close(j);
}

void ht_proc_stats_print(FILE *f, struct ht_json *j, const uint64_t *threshold_ns,
			 const struct ht_proc_entry *rows, long n, const struct ht_proc_entry *rest,
			 uint64_t rest_processes, const struct ht_proc_hist_counts *outside,
			 unsigned int nslots)
{
	if (j)
		print_json(j, threshold_ns, rows, n, rest, rest_processes, outside, nslots);
	else
		print_text(f, threshold_ns, rows, n, rest, rest_processes, outside);
}
