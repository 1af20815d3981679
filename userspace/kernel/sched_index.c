// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/partition.h"
#include "kernel/sched_index.h"

static int cpu_alloc(struct ht_cpu_switches *c, size_t n)
{
	if (!n)
		return 0;
	c->ts = malloc(n * sizeof(*c->ts));
	c->next = malloc(n * sizeof(*c->next));
	c->prev = malloc(n * sizeof(*c->prev));
	c->prev_state = malloc(n * sizeof(*c->prev_state));
	return c->ts && c->next && c->prev && c->prev_state ? 0 : -1;
}

int ht_sched_index_build(const struct ht_fr_window *w, struct ht_sched_index *idx)
{
	size_t *counts;

	memset(idx, 0, sizeof(*idx));
	idx->ncpus = w->ncpus;
	idx->complete_from_ns = w->clipped ? w->covered_from_ns : 0;
	idx->cpu = calloc(w->ncpus ? w->ncpus : 1, sizeof(*idx->cpu));
	counts = calloc(w->ncpus ? w->ncpus : 1, sizeof(*counts));
	if (!idx->cpu || !counts)
		goto oom;
	for (size_t i = 0; i < w->count; i++)
		if (w->events[i].rec.kind == HT_FR_SWITCH && w->events[i].cpu < w->ncpus)
			counts[w->events[i].cpu]++;
	for (unsigned int c = 0; c < w->ncpus; c++) {
		if (cpu_alloc(&idx->cpu[c], counts[c]))
			goto oom;
		idx->cpu[c].entry_valid = w->entry_valid[c];
		idx->cpu[c].entry_next = w->entry_switch[c].rec.tid_b;
	}
	/* The window is in time order, so each CPU's list is too. */
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];
		struct ht_cpu_switches *c;

		if (e->rec.kind != HT_FR_SWITCH || e->cpu >= w->ncpus)
			continue;
		c = &idx->cpu[e->cpu];
		c->ts[c->count] = e->rec.ts_ns;
		c->next[c->count] = e->rec.tid_b;
		c->prev[c->count] = e->rec.tid_a;
		c->prev_state[c->count] = ht_fr_switch_prev_state(&e->rec);
		c->count++;
	}
	free(counts);
	return 0;
oom:
	free(counts);
	ht_sched_index_free(idx);
	return ht_fail("out of memory indexing context switches");
}

void ht_sched_index_free(struct ht_sched_index *idx)
{
	for (unsigned int c = 0; idx->cpu && c < idx->ncpus; c++) {
		free(idx->cpu[c].ts);
		free(idx->cpu[c].next);
		free(idx->cpu[c].prev);
		free(idx->cpu[c].prev_state);
	}
	free(idx->cpu);
	memset(idx, 0, sizeof(*idx));
}

size_t ht_sched_first_after(const struct ht_sched_index *idx, unsigned int cpu, uint64_t t)
{
	const struct ht_cpu_switches *c = &idx->cpu[cpu];

	return HT_PARTITION_POINT(0, c->count, i, c->ts[i] <= t);
}

bool ht_sched_running_at(const struct ht_sched_index *idx, unsigned int cpu, uint64_t t,
			 uint32_t *pid)
{
	const struct ht_cpu_switches *c;
	size_t after;

	if (cpu >= idx->ncpus)
		return false;
	c = &idx->cpu[cpu];
	after = ht_sched_first_after(idx, cpu, t);
	if (after > 0) {
		*pid = c->next[after - 1];
		return true;
	}
	if (c->entry_valid) {
		*pid = c->entry_next;
		return true;
	}
	/*
	 * Before the CPU's first switch the recorder kept: the task that switch
	 * took off the CPU (one that ran there since before attach, as a pinned
	 * spinner does), unless a wrapped ring lost what came before.
	 */
	if (after < c->count && t >= idx->complete_from_ns) {
		*pid = c->prev[after];
		return true;
	}
	return false;
}
