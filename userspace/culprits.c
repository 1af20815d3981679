// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "culprits.h"

/* Running totals per task, before the top ones are picked. */
struct tally {
	struct ht_culprit *v;
	size_t count, cap;
};

static void tally_add(struct tally *t, uint32_t pid, unsigned int cpu, uint64_t ns)
{
	if (!ns)
		return;
	for (size_t i = 0; i < t->count; i++) {
		if (t->v[i].pid != pid)
			continue;
		/* Keep the CPU where this task held the wait longest: sum per (pid, cpu) first. */
		if (t->v[i].cpu == cpu) {
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

/* What ran on CPU at time T: the last switch at or before T, else the window's entry. */
static bool running_at(const struct ht_fr_window *w, unsigned int cpu, uint64_t t, uint32_t *pid)
{
	bool found = false;

	for (size_t i = 0; i < w->count && w->events[i].rec.ts_ns <= t; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->cpu == cpu && e->rec.kind == HT_FR_SWITCH) {
			*pid = e->rec.tid_b;
			found = true;
		}
	}
	if (!found && cpu < w->ncpus && w->entry_valid[cpu]) {
		*pid = w->entry_switch[cpu].rec.tid_b;
		found = true;
	}
	return found;
}

/* Charge [a, b) on CPU to whoever ran there, skipping the waiting thread itself. */
static void charge_segment(const struct ht_fr_window *w, uint32_t tid, unsigned int cpu,
			   uint64_t a, uint64_t b, struct tally *t, uint64_t *unknown_ns)
{
	uint64_t since = a;
	uint32_t current = 0;
	bool known = running_at(w, cpu, a, &current);

	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.ts_ns <= a)
			continue;
		if (e->rec.ts_ns >= b)
			break;
		if (e->cpu != cpu || e->rec.kind != HT_FR_SWITCH)
			continue;
		if (!known)
			*unknown_ns += e->rec.ts_ns - since;
		else if (current != tid)
			tally_add(t, current, cpu, e->rec.ts_ns - since);
		current = e->rec.tid_b;
		known = true;
		since = e->rec.ts_ns;
	}
	if (!known)
		*unknown_ns += b - since;
	else if (current != tid)
		tally_add(t, current, cpu, b - since);
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

void ht_culprits_compute(const struct ht_fr_window *w, uint32_t tid, uint64_t start,
			 uint64_t end, unsigned int start_cpu, struct ht_culprits *out)
{
	struct tally t = { 0 };
	unsigned int cpu = start_cpu;
	uint64_t seg_start = start;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.ts_ns <= start)
			continue;
		if (e->rec.ts_ns >= end)
			break;
		if (e->rec.kind != HT_FR_MIGRATE || e->rec.tid_a != tid)
			continue;
		charge_segment(w, tid, cpu, seg_start, e->rec.ts_ns, &t, &out->unknown_ns);
		cpu = e->rec.aux;
		seg_start = e->rec.ts_ns;
	}
	charge_segment(w, tid, cpu, seg_start, end, &t, &out->unknown_ns);
	merge_by_pid(&t);
	for (size_t i = 0; i < t.count; i++) {
		if (out->count < HT_MAX_CULPRITS)
			out->top[out->count++] = t.v[i];
		else
			out->other_ns += t.v[i].ns;
	}
	free(t.v);
}
