// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "culprits.h"

/* Running totals per (task, CPU), before the top ones are picked. */
struct tally {
	struct ht_culprit *v;
	size_t count, cap;
};

static void tally_add(struct tally *t, uint32_t pid, unsigned int cpu, uint64_t ns)
{
	if (!ns)
		return;
	for (size_t i = 0; i < t->count; i++) {
		if (t->v[i].pid == pid && t->v[i].cpu == cpu) {
			t->v[i].ns += ns;
			return;
		}
	}
	if (t->count == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct ht_culprit *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->count++] = (struct ht_culprit){ .pid = pid, .cpu = cpu, .ns = ns };
}

/* Charge [a, b) on CPU to whoever ran there, skipping the waiting thread itself. */
static void charge_segment(const struct ht_sched_index *idx, uint32_t tid,
			   const struct ht_queue_segment *seg, struct tally *t,
			   uint64_t *unknown_ns)
{
	const struct ht_cpu_switches *c;
	uint64_t since = seg->start_ns;
	uint32_t current = 0;
	bool known;
	size_t i;

	if (seg->cpu >= idx->ncpus || seg->end_ns <= seg->start_ns) {
		*unknown_ns += seg->end_ns > seg->start_ns ? seg->end_ns - seg->start_ns : 0;
		return;
	}
	c = &idx->cpu[seg->cpu];
	known = ht_sched_running_at(idx, seg->cpu, seg->start_ns, &current);
	/*
	 * Time charged to no task: before the recorder knew the CPU, or while
	 * the waiting thread itself still seemed to run there (the wait's start
	 * and the switch records come from clocks a few hundred ns apart).
	 */
	for (i = ht_sched_first_after(idx, seg->cpu, seg->start_ns);
	     i < c->count && c->ts[i] < seg->end_ns; i++) {
		if (!known || current == tid)
			*unknown_ns += c->ts[i] - since;
		else
			tally_add(t, current, seg->cpu, c->ts[i] - since);
		current = c->next[i];
		known = true;
		since = c->ts[i];
	}
	if (!known || current == tid)
		*unknown_ns += seg->end_ns - since;
	else
		tally_add(t, current, seg->cpu, seg->end_ns - since);
}

static int culprit_cmp(const void *a, const void *b)
{
	const struct ht_culprit *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Fold (pid, cpu) entries into one per pid, keeping the CPU with the most time. */
static void merge_by_pid(struct tally *t)
{
	size_t out = 0;

	if (t->count < 2)
		return;
	qsort(t->v, t->count, sizeof(*t->v), culprit_cmp);
	for (size_t i = 0; i < t->count; i++) {
		size_t j;

		for (j = 0; j < out; j++)
			if (t->v[j].pid == t->v[i].pid)
				break;
		if (j < out)
			t->v[j].ns += t->v[i].ns;
		else
			t->v[out++] = t->v[i];
	}
	t->count = out;
	qsort(t->v, t->count, sizeof(*t->v), culprit_cmp);
}

void ht_culprits_for_segments(const struct ht_sched_index *idx, uint32_t tid,
			      const struct ht_queue_segment *segs, size_t nsegs,
			      struct ht_culprits *out)
{
	struct tally t = { 0 };

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < nsegs; i++)
		charge_segment(idx, tid, &segs[i], &t, &out->unknown_ns);
	merge_by_pid(&t);
	for (size_t i = 0; i < t.count; i++) {
		if (out->count < HT_MAX_CULPRITS)
			out->top[out->count++] = t.v[i];
		else
			out->other_ns += t.v[i].ns;
	}
	free(t.v);
}

#define MAX_SEGMENTS 64

void ht_culprits_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			 uint32_t tid, uint64_t start, uint64_t end, unsigned int start_cpu,
			 struct ht_culprits *out)
{
	struct ht_queue_segment segs[MAX_SEGMENTS];
	size_t n = 0;

	segs[0] = (struct ht_queue_segment){ start_cpu, start, end };
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.ts_ns <= start)
			continue;
		if (e->rec.ts_ns >= end)
			break;
		if (e->rec.kind != HT_FR_MIGRATE || e->rec.tid_a != tid || n + 1 >= MAX_SEGMENTS)
			continue;
		segs[n].end_ns = e->rec.ts_ns;
		n++;
		segs[n] = (struct ht_queue_segment){ e->rec.aux, e->rec.ts_ns, end };
	}
	ht_culprits_for_segments(idx, tid, segs, n + 1, out);
}
