// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "kernel/recorder.h"

/* How far to look for a whole record when one is being rewritten. */
#define VALID_PROBE_LIMIT 32

struct event_vec {
	struct ht_fr_event *v;
	size_t count, cap;
};

static int vec_push(struct event_vec *vec, const struct ht_flight_record *rec, unsigned int cpu)
{
	if (vec->count == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 1024;
		struct ht_fr_event *v = realloc(vec->v, cap * sizeof(*v));

		if (!v)
			return ht_fail("out of memory reading the flight recorder");
		vec->v = v;
		vec->cap = cap;
	}
	vec->v[vec->count].rec = *rec;
	vec->v[vec->count].cpu = cpu;
	vec->count++;
	return 0;
}

uint64_t ht_recorder_written(const struct ht_recorder *r, unsigned int cpu)
{
	return __atomic_load_n(&r->heads[cpu].next_index, __ATOMIC_ACQUIRE);
}

/* Copy record INDEX of CPU into *out if it is whole and still the one with that index. */
static bool read_record(const struct ht_recorder *r, unsigned int cpu, uint64_t index,
			struct ht_flight_record *out)
{
	uint64_t mask = (1ULL << r->slot_shift) - 1;
	const struct ht_flight_record *src =
		&r->records[((uint64_t)cpu << r->slot_shift) | (index & mask)];
	uint32_t expect = (uint32_t)(index + 1);

	if (__atomic_load_n(&src->seq, __ATOMIC_ACQUIRE) != expect)
		return false;
	memcpy(out, (const void *)src, sizeof(*out));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&src->seq, __ATOMIC_RELAXED) == expect;
}

/* Timestamp of the first whole record at or after INDEX (below END); UINT64_MAX if none. */
static uint64_t ts_from(const struct ht_recorder *r, unsigned int cpu, uint64_t index, uint64_t end)
{
	struct ht_flight_record rec;

	for (unsigned int i = 0; i < VALID_PROBE_LIMIT && index < end; i++, index++)
		if (read_record(r, cpu, index, &rec))
			return rec.ts_ns;
	return UINT64_MAX;
}

/* First index in [lo, hi) whose record is at or after t (records are nearly time-ordered). */
static uint64_t lower_bound(const struct ht_recorder *r, unsigned int cpu, uint64_t lo,
			    uint64_t hi, uint64_t t)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (ts_from(r, cpu, mid, hi) < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void find_entry_switch(const struct ht_recorder *r, unsigned int cpu, uint64_t lo,
			      uint64_t start, uint64_t t0, struct ht_fr_window *w)
{
	struct ht_flight_record rec;

	for (uint64_t i = start; i > lo; i--) {
		if (!read_record(r, cpu, i - 1, &rec))
			continue;
		if (rec.kind == HT_FR_SWITCH && rec.ts_ns < t0) {
			w->entry_switch[cpu].rec = rec;
			w->entry_switch[cpu].cpu = cpu;
			w->entry_valid[cpu] = true;
			return;
		}
	}
}

static int read_cpu(const struct ht_recorder *r, unsigned int cpu, struct ht_fr_window *w,
		    struct event_vec *vec)
{
	uint64_t slots = 1ULL << r->slot_shift;
	uint64_t head = ht_recorder_written(r, cpu);
	uint64_t lo = head > slots ? head - slots : 0;
	uint64_t start, oldest_ts, i;
	struct ht_flight_record rec;
	bool wrapped = head > slots, past_end = false;

	if (head == lo)
		return 0;
	oldest_ts = ts_from(r, cpu, lo, head);
	if (wrapped && oldest_ts > w->t0) {
		w->clipped = true;
		if (oldest_ts != UINT64_MAX && oldest_ts > w->covered_from_ns)
			w->covered_from_ns = oldest_ts;
	}
	start = lower_bound(r, cpu, lo, head, w->t0);
	find_entry_switch(r, cpu, lo, start, w->t0, w);
	/*
	 * Step back over records that a nested program wrote slightly out of
	 * order. Past the window's end, read on to the head: a switch-in the
	 * kernel did not trace is written at the task's next switch-out, after
	 * its events, with the time it began to run (untraced_switch_in() in
	 * bpf/monitor.bpf.c); it may end a wait inside the window.
	 */
	i = start > lo + 8 ? start - 8 : lo;
	for (; i < head; i++) {
		if (!read_record(r, cpu, i, &rec)) {
			/* One past the end (maybe still being written at the head) is no loss. */
			w->skipped_records += !past_end;
			continue;
		}
		past_end = past_end || rec.ts_ns > w->t1 + HT_FR_REORDER_SLACK_NS;
		if (rec.ts_ns < w->t0 || rec.ts_ns > w->t1)
			continue;
		if (vec_push(vec, &rec, cpu))
			return -1;
	}
	return 0;
}

static int event_cmp(const void *a, const void *b)
{
	const struct ht_fr_event *x = a, *y = b;

	if (x->rec.ts_ns != y->rec.ts_ns)
		return x->rec.ts_ns < y->rec.ts_ns ? -1 : 1;
	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->rec.seq < y->rec.seq ? -1 : x->rec.seq > y->rec.seq;
}

int ht_recorder_read(const struct ht_recorder *r, uint64_t t0, uint64_t t1,
		     struct ht_fr_window *w)
{
	struct event_vec vec = { 0 };

	memset(w, 0, sizeof(*w));
	w->t0 = t0;
	w->t1 = t1;
	w->covered_from_ns = t0;
	w->ncpus = r->ncpus;
	w->entry_switch = calloc(r->ncpus, sizeof(*w->entry_switch));
	w->entry_valid = calloc(r->ncpus, sizeof(*w->entry_valid));
	if (!w->entry_switch || !w->entry_valid) {
		ht_fr_window_free(w);
		return ht_fail("out of memory reading the flight recorder");
	}
	for (unsigned int cpu = 0; cpu < r->ncpus; cpu++) {
		if (read_cpu(r, cpu, w, &vec)) {
			free(vec.v);
			ht_fr_window_free(w);
			return -1;
		}
	}
	if (vec.count > 1)
		qsort(vec.v, vec.count, sizeof(*vec.v), event_cmp);
	w->events = vec.v;
	w->count = vec.count;
	return 0;
}

void ht_fr_window_free(struct ht_fr_window *w)
{
	free(w->events);
	free(w->entry_switch);
	free(w->entry_valid);
	memset(w, 0, sizeof(*w));
}
