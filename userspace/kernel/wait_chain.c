// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/breach_kinds.h"
#include "base/units.h"
#include "kernel/culprits.h"
#include "kernel/wait_chain.h"

/* How long after its waker's switch-out a wakeup's record may come (walk()). */
#define HT_CHAIN_WAKE_LATE_NS 1000000ULL

/* One state of a task, from its records in the window. */
struct span {
	uint64_t start_ns, end_ns;
	enum ht_stretch_kind kind;
	int cpu;
	uint32_t state;
	int32_t syscall;
	bool before_window; /* blocked since before the window: start and state unknown */
	bool lost_wakeup;   /* blocked, then ran again with no wakeup on record */
	bool untraced_in;   /* ... through a switch-in the kernel did not trace */
	bool untraced_out;  /* runnable: left so by a switch the kernel did not trace */
	/* blocked: the wakeup that ended it, and when its waker raised it */
	bool woken;
	uint32_t wake_source, waker;
	uint64_t waking_ns;
};

struct spans {
	struct span *v;
	size_t count, cap;
	bool exited;
};

struct chain_walk {
	const struct ht_fr_window *w;
	const struct ht_sched_index *idx;
	uint64_t window_start, window_end;
	unsigned int max_depth;
	uint32_t path[HT_CHAIN_MAX_DEPTH + 1]; /* the tasks followed so far, by depth */
	struct ht_wait_chain *out;
	size_t cap;
	bool failed;
};

static struct span *spans_push(struct spans *s)
{
	if (s->count == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		struct span *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	return memset(&s->v[s->count++], 0, sizeof(s->v[0]));
}

/* End the current span at T and open one of KIND from there. */
static struct span *spans_next(struct spans *s, uint64_t t, enum ht_stretch_kind kind, int cpu)
{
	struct span *cur = &s->v[s->count - 1], *n;

	cur->end_ns = t > cur->start_ns ? t : cur->start_ns;
	n = spans_push(s);
	if (!n)
		return NULL;
	n->start_ns = t;
	n->kind = kind;
	n->cpu = cpu;
	n->syscall = -1;
	return n;
}

/* Who a wakeup record names as its waker, and from where. */
static void take_wakeup(struct span *blocked, const struct ht_flight_record *r)
{
	blocked->woken = true;
	blocked->wake_source = (uint32_t)(r->arg & 0xff);
	blocked->waker = r->tid_b;
	blocked->waking_ns = ht_fr_wakeup_waking_ns(r);
}

static bool is_wakeup_of(const struct ht_fr_event *e, uint32_t tid)
{
	return (e->rec.kind == HT_FR_WAKEUP || e->rec.kind == HT_FR_WAKEUP_NEW) &&
	       e->rec.tid_a == tid;
}

/* Whether wakeup record R was raised (its sched_waking) between SINCE and T, give or take the skew. */
static bool raised_within(const struct ht_flight_record *r, uint64_t since, uint64_t t)
{
	uint64_t raised = ht_fr_wakeup_waking_ns(r);

	return raised + HT_FR_WAKEUP_SKEW_NS >= since && raised <= t + HT_FR_WAKEUP_SKEW_NS;
}

/*
 * Switch-in I of a thread its records left asleep since SINCE: the wakeup
 * that allowed it, recorded on another clock, may sort just after that
 * switch-in or just before the switch-out (HT_FR_WAKEUP_SKEW_NS). Its
 * enqueue's time, the run queue's clock plus an offset measured once a
 * millisecond, may be later still (seen beside stress-ng: raised 3 us before
 * the switch-in, recorded more than 20 us after it): a wakeup recorded up to
 * HT_CHAIN_WAKE_LATE_NS after the switch-in is this sleep's if it was
 * raised within it, as the dump's sched_waking has it (sched_ftrace.c).
 */
static const struct ht_fr_event *skewed_wakeup(const struct ht_fr_window *w, size_t i, uint32_t tid,
					       uint64_t since)
{
	uint64_t t = w->events[i].rec.ts_ns;

	for (size_t j = i + 1; j < w->count && w->events[j].rec.ts_ns <= t + HT_CHAIN_WAKE_LATE_NS;
	     j++)
		if (is_wakeup_of(&w->events[j], tid) &&
		    (w->events[j].rec.ts_ns <= t + HT_FR_WAKEUP_SKEW_NS ||
		     raised_within(&w->events[j].rec, since, t)))
			return &w->events[j];
	/* Back to its switch-in before: a wakeup before that ended the sleep before. */
	for (size_t j = i; j-- > 0 && w->events[j].rec.ts_ns + HT_FR_WAKEUP_SKEW_NS >= since;) {
		if (w->events[j].rec.kind == HT_FR_SWITCH && w->events[j].rec.tid_b == tid)
			break;
		if (is_wakeup_of(&w->events[j], tid))
			return &w->events[j];
	}
	return NULL;
}

/*
 * TID's states over the walk's window, in time order, from its records:
 * a switch-out leaves it runnable or blocked (its state, its syscall), a
 * wakeup of a blocked task makes it runnable and names the waker, a
 * switch-in makes it run. What it did before its first record is unknown
 * (but a switch-out says it ran, and a new task's wakeup that it did not
 * exist: blocked, "woken" by its parent, as Perfetto has it).
 */
static bool task_spans(const struct chain_walk *k, uint32_t tid, struct spans *s)
{
	const struct ht_fr_window *w = k->w;
	struct span *cur = spans_push(s);
	bool first = true;

	if (!cur)
		return false;
	cur->start_ns = k->window_start;
	cur->kind = HT_STRETCH_UNKNOWN;
	cur->cpu = -1;
	cur->syscall = -1;
	for (size_t i = 0; i < w->count && cur; i++) {
		const struct ht_fr_event *e = &w->events[i];
		const struct ht_flight_record *r = &e->rec;
		uint64_t t = r->ts_ns < k->window_start ? k->window_start : r->ts_ns;

		if (r->ts_ns > k->window_end)
			break;
		if (r->kind == HT_FR_SWITCH && r->tid_a == tid && r->tid_a != r->tid_b) {
			bool runnable = ht_fr_switch_left_runnable(r);

			if (first && cur->kind == HT_STRETCH_UNKNOWN)
				cur->kind = HT_STRETCH_RUNNING;
			cur = spans_next(s, t, runnable ? HT_STRETCH_RUNNABLE : HT_STRETCH_BLOCKED,
					 runnable ? (int)e->cpu : -1);
			if (cur && runnable)
				cur->untraced_out = (r->flags & HT_FRF_UNTRACED) != 0;
			if (cur && !runnable) {
				cur->state = ht_fr_switch_prev_state(r);
				cur->syscall = ht_fr_switch_syscall(r);
				s->exited |= ht_task_state_letter(cur->state) == 'X';
			}
		} else if (r->kind == HT_FR_SWITCH && r->tid_b == tid && r->tid_a != r->tid_b) {
			const struct ht_fr_event *late;

			/*
			 * Left runnable by an untraced switch's record and woken,
			 * that wakeup recorded after this switch-in (its enqueue's
			 * clock): it slept, as below for one recorded in time.
			 */
			if (cur->kind == HT_STRETCH_RUNNABLE && cur->untraced_out &&
			    (late = skewed_wakeup(w, i, tid, cur->start_ns)) &&
			    raised_within(&late->rec, cur->start_ns, r->ts_ns)) {
				cur->kind = HT_STRETCH_BLOCKED;
				cur->state = HT_CHAIN_STATE_UNKNOWN;
				cur->cpu = -1;
				take_wakeup(cur, &late->rec);
			}
			if ((cur->kind == HT_STRETCH_BLOCKED || cur->kind == HT_STRETCH_UNKNOWN) &&
			    !cur->woken) {
				late = skewed_wakeup(w, i, tid, cur->start_ns);
				if (late && late->rec.kind == HT_FR_WAKEUP &&
				    cur->kind == HT_STRETCH_UNKNOWN) {
					cur->kind = HT_STRETCH_BLOCKED;
					cur->before_window = true;
					cur->state = HT_CHAIN_STATE_UNKNOWN;
				}
				if (late && cur->kind == HT_STRETCH_BLOCKED)
					take_wakeup(cur, &late->rec);
				/* Ran again with no wakeup on record: a tracepoint missed it. */
				cur->lost_wakeup = !cur->woken && cur->kind == HT_STRETCH_BLOCKED;
				cur->untraced_in = cur->lost_wakeup && (r->flags & HT_FRF_UNTRACED);
			}
			cur = spans_next(s, t, HT_STRETCH_RUNNING, (int)e->cpu);
		} else if (is_wakeup_of(e, tid)) {
			if (cur->kind == HT_STRETCH_RUNNABLE && cur->untraced_out &&
			    raised_within(r, cur->start_ns, r->ts_ns)) {
				/*
				 * Its record, written at the CPU's next traced
				 * switch, found it woken already: it slept, as the
				 * kernel traces no wakeup of a runnable task.
				 */
				cur->kind = HT_STRETCH_BLOCKED;
				cur->state = HT_CHAIN_STATE_UNKNOWN;
				cur->cpu = -1;
			}
			if (cur->kind == HT_STRETCH_UNKNOWN) {
				/*
				 * Woken, so blocked since before the window (state
				 * unknown); or not yet born: the parent's fork is what
				 * it waited for.
				 */
				cur->kind = HT_STRETCH_BLOCKED;
				cur->before_window = r->kind != HT_FR_WAKEUP_NEW;
				cur->state = HT_CHAIN_STATE_UNKNOWN;
			} else if (cur->kind != HT_STRETCH_BLOCKED &&
				   cur->kind != HT_STRETCH_UNKNOWN) {
				continue; /* spurious, or the late one of a switch-in */
			} else if (!raised_within(r, cur->start_ns, r->ts_ns)) {
				continue; /* raised before this sleep: an earlier one's, late */
			}
			take_wakeup(cur, r);
			cur = spans_next(s, t, HT_STRETCH_RUNNABLE, (int)r->aux);
		} else if (r->kind == HT_FR_MIGRATE && r->tid_a == tid) {
			if (cur->kind == HT_STRETCH_RUNNABLE)
				cur->cpu = (int)r->aux;
			continue;
		} else if (r->kind == HT_FR_EXIT && r->tid_a == tid) {
			s->exited = true;
			continue;
		} else {
			continue;
		}
		first = false;
	}
	if (!cur)
		return false;
	cur->end_ns = k->window_end > cur->start_ns ? k->window_end : cur->start_ns;
	return true;
}

static struct ht_chain_stretch *emit(struct chain_walk *k, uint32_t tid, unsigned int depth,
				     enum ht_stretch_kind kind, uint64_t start, uint64_t end)
{
	struct ht_wait_chain *c = k->out;
	struct ht_chain_stretch *st;

	if (c->count == HT_CHAIN_MAX_STRETCHES) {
		c->truncated = true;
		return NULL;
	}
	if (c->count == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct ht_chain_stretch *v = realloc(c->stretches, cap * sizeof(*v));

		if (!v) {
			k->failed = true;
			return NULL;
		}
		c->stretches = v;
		k->cap = cap;
	}
	st = memset(&c->stretches[c->count++], 0, sizeof(*st));
	st->start_ns = start;
	st->end_ns = end;
	st->tid = tid;
	st->depth = depth;
	st->kind = kind;
	st->cpu = -1;
	st->syscall = -1;
	if (depth > c->depth)
		c->depth = depth;
	return st;
}

/* Why the waker of blocked span SP at DEPTH is not followed, or HT_CHAIN_FOLLOWED. */
static enum ht_chain_stop stop_of(const struct chain_walk *k, const struct span *sp,
				  unsigned int depth)
{
	if (sp->untraced_in)
		return HT_CHAIN_STOP_UNTRACED;
	if (!sp->woken)
		return sp->lost_wakeup ? HT_CHAIN_STOP_WAKEUP_LOST : HT_CHAIN_STOP_NOT_WOKEN;
	switch (sp->wake_source) {
	case HT_WAKE_TIMER:
		return HT_CHAIN_STOP_TIMER;
	case HT_WAKE_IRQ:
		return HT_CHAIN_STOP_IRQ;
	case HT_WAKE_SOFTIRQ:
		if (!sp->waker)
			return HT_CHAIN_STOP_SOFTIRQ;
		break;
	case HT_WAKE_TASK:
		if (!sp->waker)
			return HT_CHAIN_STOP_UNKNOWN;
		break;
	default:
		return HT_CHAIN_STOP_UNKNOWN;
	}
	if (depth + 1 > k->max_depth)
		return HT_CHAIN_STOP_DEPTH;
	for (unsigned int d = 0; d <= depth; d++)
		if (k->path[d] == sp->waker)
			return HT_CHAIN_STOP_CYCLE;
	return HT_CHAIN_FOLLOWED;
}

static uint64_t walk(struct chain_walk *k, uint32_t tid, uint64_t s, uint64_t e,
		     unsigned int depth);

/*
 * Blocked span SP of TID, [LO, HI] of it within the walk: a waker that can
 * be followed (or that the walk stops at for depth, a cycle, or not knowing
 * it) is the critical path back to S, so the stretch reaches back to S and
 * the walk of TID ends; after an interrupt's or a timer's wakeup it goes on
 * back through TID. Returns where TID's walk goes on from (S: ended).
 */
static uint64_t blocked_stretch(struct chain_walk *k, uint32_t tid, const struct span *sp,
				uint64_t s, uint64_t lo, uint64_t hi, unsigned int depth)
{
	enum ht_chain_stop stop = stop_of(k, sp, depth);
	uint64_t woken;
	size_t index;
	bool to_start = stop == HT_CHAIN_FOLLOWED || stop == HT_CHAIN_STOP_DEPTH ||
			stop == HT_CHAIN_STOP_CYCLE || stop == HT_CHAIN_STOP_UNKNOWN;
	struct ht_chain_stretch *st;

	if (to_start)
		lo = s;
	st = emit(k, tid, depth, HT_STRETCH_BLOCKED, lo, hi);
	if (!st)
		return s;
	index = (size_t)(st - k->out->stretches);
	st->state = sp->state;
	st->syscall = sp->syscall;
	st->before_window = sp->before_window;
	if (sp->before_window)
		k->out->cut_by_window = true;
	st->wake_source = sp->woken ? sp->wake_source : HT_WAKE_NONE;
	st->waker = sp->woken ? sp->waker : 0;
	st->stop = stop;
	if (stop == HT_CHAIN_FOLLOWED) {
		/* The waker's part ends where it raised the wakeup: maybe well before. */
		uint64_t raised = sp->waking_ns < hi ? sp->waking_ns : hi;

		k->path[depth + 1] = sp->waker;
		woken = walk(k, sp->waker, lo, raised > lo ? raised : lo, depth + 1);
		/* Its waker was done by then: it was woken, and waited to run, from there on. */
		if (woken < hi && !k->failed) {
			k->out->stretches[index].end_ns = woken;
			emit(k, tid, depth, HT_STRETCH_RUNNABLE, woken, hi);
		}
	}
	return to_start ? s : lo;
}

/*
 * TID's part of [S, E], at DEPTH: walking back from E (where TID woke the
 * task one level up, or the breach's end), its running and runnable
 * stretches, until a blocked one whose waker takes over the rest. Returns
 * when TID's part ends: E, or earlier where TID had gone to sleep before
 * the wakeup's record.
 */
static uint64_t walk(struct chain_walk *k, uint32_t tid, uint64_t s, uint64_t e, unsigned int depth)
{
	struct spans spans = {0};
	uint64_t t = e, ends = e;
	size_t i;

	if (k->failed || k->out->truncated)
		return e;
	if (!task_spans(k, tid, &spans)) {
		k->failed = true;
		free(spans.v);
		return e;
	}
	for (i = spans.count; i-- > 0 && t > s && !k->failed && !k->out->truncated;) {
		const struct span *sp = &spans.v[i];
		uint64_t lo = sp->start_ns > s ? sp->start_ns : s;
		uint64_t hi = sp->end_ns < t ? sp->end_ns : t;
		struct ht_chain_stretch *st;
		struct ht_culprits culprits;

		if (sp->start_ns >= t)
			continue;
		/*
		 * A waker seems asleep as it wakes: the wakeup is recorded where
		 * the wakee is queued, a remote CPU's interrupt later (an idle
		 * vCPU's can take a hundred microseconds), by when the waker may
		 * have gone to sleep. It ran until then.
		 */
		if (depth && t == e && sp->kind == HT_STRETCH_BLOCKED &&
		    e - sp->start_ns <= HT_CHAIN_WAKE_LATE_NS && sp->start_ns > s) {
			t = ends = sp->start_ns;
			continue;
		}
		if (hi <= lo) {
			t = lo;
			continue;
		}
		switch (sp->kind) {
		case HT_STRETCH_BLOCKED:
			t = blocked_stretch(k, tid, sp, s, lo, hi, depth);
			continue;
		case HT_STRETCH_UNKNOWN:
			k->out->cut_by_window = true;
			break;
		default:
			break;
		}
		st = emit(k, tid, depth, sp->kind, lo, hi);
		if (st && sp->kind == HT_STRETCH_RUNNING) {
			st->cpu = sp->cpu;
		} else if (st && sp->kind == HT_STRETCH_RUNNABLE) {
			/* Where it was queued last, following its migrations. */
			ht_culprits_compute(k->w, k->idx, tid, lo, hi, true,
					    sp->cpu >= 0 ? (unsigned int)sp->cpu : 0, &culprits);
			if (culprits.count) {
				st->behind = culprits.top[0].pid;
				st->behind_ns = culprits.top[0].ns;
			}
			st->cpu = (int)culprits.last_cpu;
		}
		t = lo;
	}
	/* Nothing of it before its first record in the window. */
	if (t > s && !k->failed && !k->out->truncated) {
		k->out->cut_by_window = true;
		emit(k, tid, depth, HT_STRETCH_UNKNOWN, s, t);
	}
	for (size_t j = 0; spans.exited && j < k->out->count; j++)
		if (k->out->stretches[j].tid == tid)
			k->out->stretches[j].exited = true;
	free(spans.v);
	return ends;
}

/*
 * Where the breached thread's wait begins: an off-CPU or run-queue
 * breach's start (the off-CPU interval of a syscall breach that has one),
 * else the switch-out of the syscall's last sleep.
 */
static bool wait_interval(const struct ht_fr_window *w, const struct ht_breach *b, uint64_t *s,
			  uint64_t *e)
{
	uint32_t kinds = ht_breach_kinds_of(b->kinds, b->kind);

	*s = b->start_ns;
	*e = b->end_ns;
	if (b->kind == HT_BREACH_OFF_CPU || b->kind == HT_BREACH_RQ_DELAY)
		return true;
	if (kinds & HT_KIND_BIT(HT_BREACH_OFF_CPU)) {
		*s = b->off_cpu_start_ns;
		*e = b->off_cpu_end_ns;
		return *e > *s;
	}
	if (b->wake_source == HT_WAKE_NONE || !b->wake_ns)
		return false;
	/* Its last sleep: the last switch-out that left it blocked before the wakeup. */
	*s = 0;
	for (size_t i = 0; i < w->count && w->events[i].rec.ts_ns <= b->wake_ns; i++) {
		const struct ht_flight_record *r = &w->events[i].rec;

		if (r->kind == HT_FR_SWITCH && r->tid_a == b->tid && r->ts_ns >= b->start_ns &&
		    !ht_fr_switch_left_runnable(r))
			*s = r->ts_ns;
	}
	/* It runs again at its first switch-in after the wakeup. */
	for (size_t i = 0; *s && i < w->count; i++) {
		const struct ht_flight_record *r = &w->events[i].rec;

		if (r->kind == HT_FR_SWITCH && r->tid_b == b->tid && r->ts_ns > b->wake_ns &&
		    r->ts_ns <= b->end_ns) {
			*e = r->ts_ns;
			break;
		}
	}
	return *s != 0;
}

static int stretch_order(const void *x, const void *y)
{
	const struct ht_chain_stretch *a = x, *b = y;

	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	return a->depth < b->depth ? -1 : a->depth > b->depth;
}

/*
 * Two runnable stretches of one task back to back, as the walk makes them
 * when a wakeup's record came late (blocked_stretch()): one.
 */
static void merge_runnable(struct ht_wait_chain *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->count; i++) {
		struct ht_chain_stretch *prev = n ? &c->stretches[n - 1] : NULL;
		const struct ht_chain_stretch *st = &c->stretches[i];

		if (prev && prev->kind == HT_STRETCH_RUNNABLE && st->kind == HT_STRETCH_RUNNABLE &&
		    prev->tid == st->tid && prev->depth == st->depth &&
		    prev->end_ns == st->start_ns) {
			prev->end_ns = st->end_ns;
			if (st->cpu >= 0)
				prev->cpu = st->cpu;
			if (st->behind_ns > prev->behind_ns) {
				prev->behind = st->behind;
				prev->behind_ns = st->behind_ns;
			}
			continue;
		}
		c->stretches[n++] = *st;
	}
	c->count = n;
}

bool ht_wait_chain_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			   const struct ht_breach *b, unsigned int max_depth,
			   struct ht_wait_chain *out)
{
	struct chain_walk k = {.w = w, .idx = idx, .out = out};
	uint64_t s, e;

	memset(out, 0, sizeof(*out));
	out->tid = b->tid;
	out->max_depth = max_depth;
	if (max_depth > HT_CHAIN_MAX_DEPTH)
		max_depth = HT_CHAIN_MAX_DEPTH;
	k.max_depth = max_depth;
	if (!wait_interval(w, b, &s, &e))
		return false;
	k.window_start = w->t0;
	if (w->clipped && w->covered_from_ns > k.window_start)
		k.window_start = w->covered_from_ns;
	if (idx->complete_from_ns > k.window_start)
		k.window_start = idx->complete_from_ns;
	k.window_end = w->t1 > e ? w->t1 : e;
	if (s < k.window_start) {
		s = k.window_start;
		out->cut_by_window = true;
	}
	if (e <= s)
		return false;
	out->start_ns = s;
	out->end_ns = e;
	k.path[0] = b->tid;
	walk(&k, b->tid, s, e, 0);
	if (k.failed) {
		ht_wait_chain_free(out);
		return false;
	}
	qsort(out->stretches, out->count, sizeof(out->stretches[0]), stretch_order);
	merge_runnable(out);
	return true;
}

void ht_wait_chain_free(struct ht_wait_chain *c)
{
	free(c->stretches);
	c->stretches = NULL;
	c->count = 0;
}

bool ht_chain_stretch_is_leaf(const struct ht_wait_chain *c, size_t i)
{
	const struct ht_chain_stretch *st = &c->stretches[i];

	return !(st->kind == HT_STRETCH_BLOCKED && st->stop == HT_CHAIN_FOLLOWED);
}

const char *ht_stretch_kind_name(enum ht_stretch_kind kind)
{
	switch (kind) {
	case HT_STRETCH_RUNNING:
		return "running";
	case HT_STRETCH_RUNNABLE:
		return "runnable";
	case HT_STRETCH_BLOCKED:
		return "blocked";
	default:
		return "unknown";
	}
}

const char *ht_chain_stop_name(enum ht_chain_stop stop)
{
	switch (stop) {
	case HT_CHAIN_STOP_IRQ:
		return "irq";
	case HT_CHAIN_STOP_TIMER:
		return "timer";
	case HT_CHAIN_STOP_SOFTIRQ:
		return "softirq";
	case HT_CHAIN_STOP_DEPTH:
		return "depth";
	case HT_CHAIN_STOP_CYCLE:
		return "cycle";
	case HT_CHAIN_STOP_UNKNOWN:
		return "unknown waker";
	case HT_CHAIN_STOP_NOT_WOKEN:
		return "not woken";
	case HT_CHAIN_STOP_WAKEUP_LOST:
		return "wakeup not recorded";
	case HT_CHAIN_STOP_UNTRACED:
		return "switched in untraced";
	default:
		return NULL;
	}
}
