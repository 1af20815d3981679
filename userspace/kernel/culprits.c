// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/culprits.h"
#include "base/partition.h"

/* Part of a wait spent queued on one CPU. */
struct ht_queue_segment {
	unsigned int cpu;
	uint64_t start_ns, end_ns;
};

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
	t->v[t->count++] = (struct ht_culprit){.pid = pid, .cpu = cpu, .ns = ns};
}

/*
 * Charge SINCE to T on SEG's CPU to CURRENT. The idle task (pid 0 on each
 * CPU) is no culprit: a CPU idle while the thread was queued on it is the
 * time it took that CPU to pick it up, counted apart.
 */
static void charge_to(struct tally *t, bool known, uint32_t current, uint32_t tid, unsigned int cpu,
		      uint64_t ns, struct ht_culprits *out)
{
	if (!known || current == tid)
		out->unknown_ns += ns;
	else if (!current)
		out->idle_ns += ns;
	else
		tally_add(t, current, cpu, ns);
}

/* Charge [a, b) on CPU to whoever ran there, skipping the waiting thread itself. */
static void charge_segment(const struct ht_sched_index *idx, uint32_t tid,
			   const struct ht_queue_segment *seg, struct tally *t,
			   struct ht_culprits *out)
{
	const struct ht_cpu_switches *c;
	uint64_t since = seg->start_ns;
	uint32_t current = 0;
	bool known;
	size_t i;

	if (seg->cpu >= idx->ncpus || seg->end_ns <= seg->start_ns) {
		out->unknown_ns += seg->end_ns > seg->start_ns ? seg->end_ns - seg->start_ns : 0;
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
		charge_to(t, known, current, tid, seg->cpu, c->ts[i] - since, out);
		current = c->next[i];
		known = true;
		since = c->ts[i];
	}
	charge_to(t, known, current, tid, seg->cpu, seg->end_ns - since, out);
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

/* What the walk knows of the thread at the record it reached. */
enum wait_state { WS_UNKNOWN, WS_RUNNING, WS_QUEUED, WS_SLEEPING };

struct walk {
	uint32_t tid;
	enum wait_state state;
	unsigned int cpu; /* where it runs, or is queued */
	uint64_t ts;	  /* the time of the last record of it */
};

/*
 * Apply record E to the walk when it concerns the thread: a switch-in runs
 * it, a switch-out queues it again (*PREEMPTED) or puts it to sleep, a
 * wakeup queues it (nothing, for a thread that runs: that wakeup sorted
 * after the switch-in it allowed), a migration moves it.
 */
static bool walk_record(struct walk *k, const struct ht_fr_event *e, bool *preempted)
{
	const struct ht_flight_record *r = &e->rec;

	*preempted = false;
	switch (r->kind) {
	case HT_FR_SWITCH:
		if (r->tid_b == k->tid) {
			k->state = WS_RUNNING;
		} else if (r->tid_a == k->tid) {
			*preempted = ht_fr_switch_left_runnable(r);
			k->state = *preempted ? WS_QUEUED : WS_SLEEPING;
		} else {
			return false;
		}
		k->cpu = e->cpu;
		break;
	case HT_FR_WAKEUP:
	case HT_FR_WAKEUP_NEW:
		if (r->tid_a != k->tid || k->state == WS_RUNNING)
			return false;
		k->state = WS_QUEUED;
		k->cpu = r->aux;
		break;
	case HT_FR_MIGRATE:
		if (r->tid_a != k->tid)
			return false;
		k->cpu = r->aux;
		break;
	case HT_FR_EXIT:
		if (r->tid_a != k->tid)
			return false;
		k->state = WS_SLEEPING;
		break;
	default:
		return false;
	}
	k->ts = r->ts_ns;
	return true;
}

/* Index of the first event of W at or after T. */
static size_t first_at(const struct ht_fr_window *w, uint64_t t)
{
	return HT_PARTITION_POINT(0, w->count, i, w->events[i].rec.ts_ns < t);
}

/* The part of a wait from SINCE to T, queued on the walk's CPU. */
static void charge_queued(const struct ht_sched_index *idx, const struct walk *k, uint64_t since,
			  uint64_t t, struct tally *tally, struct ht_culprits *out)
{
	struct ht_queue_segment seg = {k->cpu, since, t};

	if (t <= since)
		return;
	out->runnable_ns += t - since;
	out->last_cpu = k->cpu;
	charge_segment(idx, k->tid, &seg, tally, out);
}

void ht_culprits_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			 uint32_t tid, uint64_t start, uint64_t end, bool queued, unsigned int cpu,
			 struct ht_culprits *out)
{
	struct walk k = {.tid = tid, .state = WS_UNKNOWN};
	uint64_t from = start > HT_CULPRITS_LOOKBACK_NS ? start - HT_CULPRITS_LOOKBACK_NS : 0;
	struct tally tally = {0};
	uint64_t since = start;
	bool preempted;
	size_t i;

	memset(out, 0, sizeof(*out));
	out->last_cpu = cpu;
	/* Where it was at START, as its records before then say. */
	for (i = first_at(w, from); i < w->count && w->events[i].rec.ts_ns <= start; i++)
		walk_record(&k, &w->events[i], &preempted);
	if (!queued) {
		k.state = WS_RUNNING;
	} else if (k.state == WS_RUNNING && start - k.ts <= HT_FR_WAKEUP_SKEW_NS) {
		/* The wakeup that START is the time of sorted after the switch-in it allowed. */
	} else {
		/* Queued: where its last preemption, wakeup or migration put it, else on CPU. */
		if (k.state != WS_QUEUED)
			k.cpu = cpu;
		k.state = WS_QUEUED;
	}
	for (; i < w->count && w->events[i].rec.ts_ns < end; i++) {
		const struct ht_fr_event *e = &w->events[i];
		struct walk before = k;

		if (!walk_record(&k, e, &preempted))
			continue;
		if (before.state == WS_QUEUED)
			charge_queued(idx, &before, since, e->rec.ts_ns, &tally, out);
		since = e->rec.ts_ns;
		out->preemptions += preempted;
	}
	if (k.state == WS_QUEUED)
		charge_queued(idx, &k, since, end, &tally, out);
	/*
	 * Its records never showed it queued, though the wait is longer than the
	 * skew that excuses that (a move by sched_setaffinity: the thread's own
	 * records sorted around the wait): it was queued on CPU throughout, as
	 * the breach says, and what ran there is what ran instead.
	 */
	if (queued && !out->runnable_ns && end > start && end - start > HT_FR_WAKEUP_SKEW_NS) {
		k.state = WS_QUEUED;
		k.cpu = cpu;
		charge_queued(idx, &k, start, end, &tally, out);
	}
	merge_by_pid(&tally);
	for (i = 0; i < tally.count; i++) {
		if (out->count < HT_MAX_CULPRITS)
			out->top[out->count++] = tally.v[i];
		else
			out->other_ns += tally.v[i].ns;
	}
	free(tally.v);
}

bool ht_breach_culprit_interval(const struct ht_breach *b, uint64_t *from, bool *queued)
{
	*from = b->start_ns;
	*queued = true;
	if (b->kind == HT_BREACH_RQ_DELAY)
		return true;
	if (b->wake_source != HT_WAKE_NONE && b->wake_ns) {
		*from = b->wake_ns;
		return true;
	}
	*queued = false;
	return b->kind == HT_BREACH_SYSCALL;
}
