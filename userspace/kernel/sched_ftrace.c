// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Why compact_sched and not full sched_switch / sched_waking events: a full
 * event repeats prev_comm, next_comm (16 bytes each), the pids, prios and an
 * absolute timestamp, about 70 bytes a switch; the compact arrays hold a
 * delta timestamp, the state, the next pid, its prio and a comm index, about
 * 9 bytes, and the window's switches are most of a dump's kernel part. What
 * the full event adds, prev_pid, is the previous switch's next pid on the
 * same CPU, which Perfetto infers, so each CPU starts with two synthetic
 * switches (the first one only says who runs).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/partition.h"
#include "kernel/comm_cache.h"
#include "kernel/sched_ftrace.h"
#include "trace/perfetto_write.h"

/* The kernel's task states (include/linux/sched.h), as the recorder keeps prev_state. */
#define TASK_UNINTERRUPTIBLE 0x0002
#define EXIT_DEAD	     0x0010
#define TASK_DEAD	     0x0080
#define TASK_NOLOAD	     0x0400
#define TASK_RTLOCK_WAIT     0x1000
#define TASK_IDLE	     (TASK_UNINTERRUPTIBLE | TASK_NOLOAD)
#define TASK_REPORT	     0x7f
#define TASK_REPORT_IDLE     0x80
#define TASK_REPORT_MAX	     0x100

/* How far back and forward on its CPU a waking looks for its waker's time there. */
#define WAKER_SEARCH_SWITCHES 64
/* How far a sleep's switch-out, as its caller knows it, may lie from the recorded one. */
#define BLOCKED_MATCH_NS 100000

/* A task coming onto or leaving a CPU: the edges of its on-CPU intervals. */
struct task_edge {
	uint64_t ts;
	uint32_t tid;
	bool in;
};

struct waking {
	uint64_t ts;
	uint32_t pid;
	uint32_t target_cpu;
	uint32_t prio;
	uint32_t flags;
	unsigned int cpu; /* the bundle: the CPU its waker ran on */
};

/* A full FtraceEvent of a bundle: a new task, or the function a sleep blocked in. */
struct full_event {
	uint64_t ts;
	unsigned int cpu;
	uint32_t pid;	/* the task that ran it: the parent, the sleeper */
	uint32_t field; /* HT_FTF_EVENT_TASK_NEWTASK or HT_FTF_EVENT_SCHED_BLOCKED_REASON */
	uint32_t tid;	/* the child, the sleeper */
	uint64_t clone_flags;
	uint32_t caller_iid;
	bool io_wait;
};

struct builder {
	const struct ht_sched_ftrace_window *sw;
	struct task_edge *edges; /* by tid, then time */
	size_t nedges;
	uint32_t *tids; /* every task named in the window but the idle task, sorted */
	size_t ntids;
	char (*comms)[HT_COMM_LEN + 8]; /* of tids[i]; "" until looked up */
	struct waking *wakings;		/* by CPU, then time */
	size_t nwakings;
	bool *forked;		 /* of tids[i]: its task_newtask starts it, not the process tree */
	struct full_event *full; /* by CPU, then time */
	size_t nfull;
	const char **symbols; /* kernel_symbols: iid i + 1 */
	size_t nsymbols;
};

int64_t ht_ftrace_prev_state(uint32_t raw_state, int preempted)
{
	uint32_t report;
	int bit = 0;

	if (preempted)
		return TASK_REPORT_MAX;
	if ((raw_state & TASK_IDLE) == TASK_IDLE)
		return TASK_REPORT_IDLE;
	if (raw_state & TASK_RTLOCK_WAIT)
		return TASK_UNINTERRUPTIBLE;
	/*
	 * A task's last switch: the kernel ORs in its exit_state, which the
	 * record lacks; EXIT_DEAD ("X") says it is gone without guessing a zombie.
	 */
	if (raw_state & TASK_DEAD)
		return EXIT_DEAD;
	report = raw_state & TASK_REPORT;
	while (report >> (bit + 1))
		bit++;
	return report ? (int64_t)1 << bit : 0;
}

static void put_varint(struct pb_buf *b, uint64_t v)
{
	uint8_t *p = pb_claim(b, 10), *start = p;

	if (!p)
		return;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len += (size_t)(p - start);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_edge(const void *a, const void *b)
{
	const struct task_edge *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return (int)x->in - (int)y->in; /* at one time a task leaves before it comes back */
}

static int cmp_waking(const void *a, const void *b)
{
	const struct waking *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int cmp_full_event(const void *a, const void *b)
{
	const struct full_event *x = a, *y = b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static bool is_wakeup(const struct ht_fr_event *e)
{
	return e->rec.kind == HT_FR_WAKEUP || e->rec.kind == HT_FR_WAKEUP_NEW;
}

static int collect_tasks(struct builder *b)
{
	const struct ht_fr_window *w = b->sw->w;
	size_t n = 0, nedges = 0;

	b->tids = malloc((2 * w->count + w->ncpus + 1) * sizeof(*b->tids));
	b->edges = malloc((2 * w->count + 1) * sizeof(*b->edges));
	if (!b->tids || !b->edges)
		return ht_fail("out of memory for the window's scheduling data");
	for (unsigned int c = 0; c < w->ncpus; c++)
		if (w->entry_valid[c])
			b->tids[n++] = w->entry_switch[c].rec.tid_b;
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.kind == HT_FR_SWITCH) {
			b->tids[n++] = e->rec.tid_a;
			b->tids[n++] = e->rec.tid_b;
			b->edges[nedges++] = (struct task_edge){e->rec.ts_ns, e->rec.tid_a, false};
			b->edges[nedges++] = (struct task_edge){e->rec.ts_ns, e->rec.tid_b, true};
		} else if (is_wakeup(e) || e->rec.kind == HT_FR_FORK) {
			b->tids[n++] = e->rec.tid_a;
			if (e->rec.kind == HT_FR_FORK)
				b->tids[n++] = e->rec.tid_b;
		}
	}
	qsort(b->tids, n, sizeof(*b->tids), cmp_u32);
	b->ntids = 0;
	for (size_t i = 0; i < n; i++)
		if (b->tids[i] && (!b->ntids || b->tids[b->ntids - 1] != b->tids[i]))
			b->tids[b->ntids++] = b->tids[i];
	qsort(b->edges, nedges, sizeof(*b->edges), cmp_edge);
	b->nedges = nedges;
	b->comms = calloc(b->ntids ? b->ntids : 1, sizeof(*b->comms));
	b->forked = calloc(b->ntids ? b->ntids : 1, sizeof(*b->forked));
	if (!b->comms || !b->forked)
		return ht_fail("out of memory for the window's scheduling data");
	return 0;
}

static size_t tid_index(const struct builder *b, uint32_t tid)
{
	return HT_PARTITION_POINT(0, b->ntids, i, b->tids[i] < tid);
}

/* [first, end) of TID's edges. */
static void edges_of(const struct builder *b, uint32_t tid, size_t *first, size_t *end)
{
	*first = HT_PARTITION_POINT(0, b->nedges, i, b->edges[i].tid < tid);
	*end = HT_PARTITION_POINT(*first, b->nedges, i, b->edges[i].tid == tid);
}

/*
 * The span a waking of WAKEE recorded at TS must lie in for Perfetto to
 * take it: after the switch-out it sleeps from (a waking of a task that is
 * not blocked is ignored), before its switch-in. The recorded time comes
 * from the wakee's run-queue clock, up to HT_FR_WAKEUP_SKEW_NS off.
 */
static void waking_span(const struct builder *b, uint32_t wakee, uint64_t ts, uint64_t *lo,
			uint64_t *hi)
{
	size_t first, end, k;

	*lo = 0;
	*hi = UINT64_MAX;
	edges_of(b, wakee, &first, &end);
	if (first == end)
		return;
	/* k: the first edge after TS. */
	k = HT_PARTITION_POINT(first, end, i, b->edges[i].ts <= ts);
	if (k > first && !b->edges[k - 1].in) {
		*lo = b->edges[k - 1].ts + 1;
		if (k < end && b->edges[k].in)
			*hi = b->edges[k].ts - 1;
	} else if (k > first && b->edges[k - 1].ts + HT_FR_WAKEUP_SKEW_NS >= ts) {
		/* Switched in just before its waking's time: the skew. */
		*hi = b->edges[k - 1].ts - 1;
		if (k - 1 > first && !b->edges[k - 2].in)
			*lo = b->edges[k - 2].ts + 1;
	} else if (k < end && !b->edges[k].in && b->edges[k].ts <= ts + HT_FR_WAKEUP_SKEW_NS) {
		/* Its switch-out is just after its waking's time: the skew the other way. */
		*lo = b->edges[k].ts + 1;
		if (k + 1 < end && b->edges[k + 1].in)
			*hi = b->edges[k + 1].ts - 1;
	} else if (k < end && b->edges[k].in) {
		*hi = b->edges[k].ts - 1;
	}
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t dist(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/*
 * Perfetto takes a waking's waker to be whatever runs on its bundle's CPU
 * at its time: move TS (inside [LO, HI]) into WAKER's nearest time on CPU
 * when the recorded time falls just outside it. TS unchanged when none fits.
 */
static uint64_t place_in_waker(const struct builder *b, unsigned int cpu, uint32_t waker,
			       uint64_t ts, uint64_t lo, uint64_t hi)
{
	const struct ht_sched_index *idx = b->sw->idx;
	const struct ht_cpu_switches *c = &idx->cpu[cpu];
	uint64_t best = ts, best_dist = UINT64_MAX;
	uint32_t running;
	size_t after;

	if (ht_sched_running_at(idx, cpu, ts, &running) && running == waker)
		return ts;
	after = ht_sched_first_after(idx, cpu, ts);
	/*
	 * Earlier: the last interval of WAKER that began at or before TS (it
	 * ended before TS); the first one on CPU began with the window.
	 */
	for (size_t n = 0, i = after; n < WAKER_SEARCH_SWITCHES; n++, i--) {
		uint64_t end = i < c->count ? c->ts[i] : b->sw->t1, start, t;
		uint32_t who;

		if (i > 0) {
			who = c->next[i - 1];
			start = c->ts[i - 1];
		} else {
			who = c->entry_valid ? c->entry_next : c->count ? c->prev[0] : 0;
			start = b->sw->t0;
		}
		if (who == waker) {
			t = end - 1 < hi ? end - 1 : hi;
			if (end > start + 1 && t > start && t >= lo) {
				best = t;
				best_dist = dist(t, ts);
			}
			break;
		}
		if (!i)
			break;
	}
	/* Later: the first interval of WAKER that begins after TS. */
	for (size_t n = 0, i = after; n < WAKER_SEARCH_SWITCHES && i < c->count; n++, i++) {
		uint64_t end = i + 1 < c->count ? c->ts[i + 1] : b->sw->t1, t;

		if (c->next[i] != waker)
			continue;
		t = c->ts[i] + 1 > lo ? c->ts[i] + 1 : lo;
		if (t < end && t <= hi && dist(t, ts) < best_dist)
			best = t;
		break;
	}
	return best;
}

/*
 * Who runs on CPU at TS as the bundle will say it: before the CPU's first
 * switch, the task its synthetic switches name (entry_task()).
 */
static bool bundle_running_at(const struct builder *b, unsigned int cpu, uint64_t ts,
			      uint32_t *pid)
{
	const struct ht_cpu_switches *c = &b->sw->idx->cpu[cpu];

	if (c->count && ts >= c->ts[0])
		return ht_sched_running_at(b->sw->idx, cpu, ts, pid);
	if (c->entry_valid)
		*pid = c->entry_next;
	else if (c->count)
		*pid = c->prev[0];
	else
		return false;
	return true;
}

/* The irq/softirq bits of the kernel's trace_entry.flags for a wakeup record's source. */
static uint32_t waking_flags(const struct ht_flight_record *r)
{
	switch ((enum ht_wake_source)(r->arg & 0xff)) {
	case HT_WAKE_IRQ:
	case HT_WAKE_TIMER: /* an hrtimer's or timer's callback: interrupt context either way */
		return HT_FTRACE_FLAG_HARDIRQ;
	case HT_WAKE_SOFTIRQ:
		return HT_FTRACE_FLAG_SOFTIRQ;
	case HT_WAKE_TASK:
		/*
		 * The idle task wakes no one of its own: a task wakeup raised on
		 * an idle CPU ran in a callback no irq tracepoint announces (an
		 * IPI's irq_work, a remote function call flushed by the idle
		 * loop). Interrupt context is what it is to Perfetto, which
		 * would otherwise give it swapper for its waker.
		 */
		return r->tid_b ? 0 : HT_FTRACE_FLAG_HARDIRQ;
	default:
		return 0;
	}
}

static int collect_wakings(struct builder *b)
{
	const struct ht_fr_window *w = b->sw->w;

	b->wakings = malloc((w->count + 1) * sizeof(*b->wakings));
	if (!b->wakings)
		return ht_fail("out of memory for the window's scheduling data");
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];
		uint32_t waker_cpu = ht_fr_wakeup_waker_cpu(&e->rec);
		struct waking *wk;
		uint64_t lo, hi, ts;
		uint32_t running;

		/*
		 * A waker the monitor did not learn (a task not targeted, its
		 * note taken by another; a target whose sched_waking came
		 * before it was one): no waking, rather than one Perfetto
		 * would give to whatever ran where it was recorded.
		 */
		if (!is_wakeup(e) || (e->rec.arg & 0xff) == HT_WAKE_NONE)
			continue;
		wk = &b->wakings[b->nwakings++];
		wk->cpu = waker_cpu < w->ncpus ? waker_cpu : e->cpu;
		wk->pid = e->rec.tid_a;
		wk->target_cpu = e->rec.aux;
		wk->prio = (uint32_t)(e->rec.arg >> HT_FR_WAKE_PRIO_SHIFT) & 0xff;
		wk->flags = waking_flags(&e->rec);
		waking_span(b, wk->pid, e->rec.ts_ns, &lo, &hi);
		/*
		 * At its sched_waking, as ftrace has it: the record's time is
		 * the enqueue. A waking raised before the window began is
		 * written at its start, where the window's CPUs are known.
		 */
		ts = ht_fr_wakeup_waking_ns(&e->rec);
		ts = ts > b->sw->t0 ? ts : b->sw->t0;
		lo = lo > b->sw->t0 ? lo : b->sw->t0;
		ts = lo <= hi ? clamp_u64(ts, lo, hi) : ts;
		if (e->rec.tid_b && !wk->flags && wk->cpu < b->sw->idx->ncpus) {
			ts = place_in_waker(b, wk->cpu, e->rec.tid_b, ts, lo, hi);
			/*
			 * Its waker is nowhere on its CPU near then (that CPU's
			 * ring no longer reaches back so far): no waking, rather
			 * than one Perfetto would give to whatever ran there.
			 */
			if (!bundle_running_at(b, wk->cpu, ts, &running) ||
			    running != e->rec.tid_b) {
				b->nwakings--;
				continue;
			}
		}
		wk->ts = ts;
	}
	qsort(b->wakings, b->nwakings, sizeof(*b->wakings), cmp_waking);
	return 0;
}

static uint32_t intern_symbol(struct builder *b, const char *name)
{
	for (size_t i = 0; i < b->nsymbols; i++)
		if (!strcmp(b->symbols[i], name))
			return (uint32_t)i + 1;
	b->symbols[b->nsymbols++] = name;
	return (uint32_t)b->nsymbols;
}

/*
 * A new thread the recorder holds the fork of as Perfetto's task_newtask
 * (CLONE_THREAD), on the CPU that recorded it. Perfetto starts a new thread
 * of its parent's process there, so it must come before anything else of
 * the child's: a switch-in, or a waking whose time came from the run-queue
 * clock.
 */
static void add_newtask(struct builder *b, const struct ht_fr_event *e,
			const uint64_t *first_waking)
{
	uint32_t child = e->rec.tid_b, tgid = (uint32_t)e->rec.arg;
	uint64_t ts = e->rec.ts_ns;
	size_t i = tid_index(b, child), first, end, k;

	if (!child || i >= b->ntids || b->tids[i] != child || b->forked[i])
		return;
	/* Already a thread of its process in Perfetto, by its track's descriptor. */
	k = HT_PARTITION_POINT(0, b->sw->ndescribed, j, b->sw->described[j] < child);
	if (k < b->sw->ndescribed && b->sw->described[k] == child)
		return;
	edges_of(b, child, &first, &end);
	if (first < end && b->edges[first].ts <= ts)
		ts = b->edges[first].ts - 1;
	if (first_waking[i] <= ts)
		ts = first_waking[i] - 1;
	if (!tgid)
		tgid = ht_comm_tgid(b->sw->comms, child);
	/*
	 * A thread's tgid is its parent's, a new process's its own tid. A new
	 * process stays in the process tree: Perfetto's process of a
	 * task_newtask without CLONE_THREAD keeps no name from the dump's
	 * process descriptor (a child that execs, as procs_spin's, is unnamed).
	 */
	if (!tgid || tgid == child)
		return;
	b->forked[i] = true;
	b->full[b->nfull++] = (struct full_event){
		.ts = ts,
		.cpu = e->cpu,
		.pid = e->rec.tid_a,
		.field = HT_FTF_EVENT_TASK_NEWTASK,
		.tid = child,
		.clone_flags = HT_CLONE_THREAD,
	};
}

/*
 * The function BR's sleep blocked in, just after the switch-out that began
 * it (Perfetto gives it to the thread's last blocked state) and before its
 * next switch-in, on the CPU it left, as the task running there then. None
 * when the window has no such switch-out, or the thread left runnable.
 */
static void add_blocked_reason(struct builder *b, const struct ht_blocked_reason *br)
{
	const struct ht_fr_window *w = b->sw->w;
	const struct ht_fr_event *out = NULL;
	size_t first, end, k;
	int64_t state;

	for (size_t i = 0; i < w->count && br->function; i++) {
		const struct ht_fr_event *e = &w->events[i];
		uint64_t d = dist(e->rec.ts_ns, br->switch_out_ns);

		if (e->rec.kind == HT_FR_SWITCH && e->rec.tid_a == br->tid &&
		    d <= BLOCKED_MATCH_NS && (!out || d < dist(out->rec.ts_ns, br->switch_out_ns)))
			out = e;
	}
	if (!out)
		return;
	state = ht_ftrace_prev_state(ht_fr_switch_prev_state(&out->rec),
				     (out->rec.flags & HT_FRF_PREEMPT) != 0);
	if (!state || state == TASK_REPORT_MAX)
		return;
	edges_of(b, br->tid, &first, &end);
	k = HT_PARTITION_POINT(first, end, i, b->edges[i].ts <= out->rec.ts_ns);
	if (k < end && b->edges[k].ts <= out->rec.ts_ns + 1)
		return;
	b->full[b->nfull++] = (struct full_event){
		.ts = out->rec.ts_ns + 1,
		.cpu = out->cpu,
		.pid = out->rec.tid_b,
		.field = HT_FTF_EVENT_SCHED_BLOCKED_REASON,
		.tid = br->tid,
		.caller_iid = intern_symbol(b, br->function),
		.io_wait = br->io_wait,
	};
}

static int collect_full_events(struct builder *b)
{
	const struct ht_fr_window *w = b->sw->w;
	uint64_t *first_waking = NULL;
	size_t nforks = 0;

	for (size_t i = 0; i < w->count; i++)
		nforks += w->events[i].rec.kind == HT_FR_FORK;
	b->full = malloc((nforks + b->sw->nblocked + 1) * sizeof(*b->full));
	b->symbols = malloc((b->sw->nblocked + 1) * sizeof(*b->symbols));
	if (nforks)
		first_waking = malloc((b->ntids ? b->ntids : 1) * sizeof(*first_waking));
	if (!b->full || !b->symbols || (nforks && !first_waking)) {
		free(first_waking);
		return ht_fail("out of memory for the window's scheduling data");
	}
	if (nforks) {
		memset(first_waking, 0xff, (b->ntids ? b->ntids : 1) * sizeof(*first_waking));
		for (size_t i = 0; i < b->nwakings; i++) {
			size_t t = tid_index(b, b->wakings[i].pid);

			if (t < b->ntids && b->wakings[i].ts < first_waking[t])
				first_waking[t] = b->wakings[i].ts;
		}
	}
	for (size_t i = 0; i < w->count; i++)
		if (w->events[i].rec.kind == HT_FR_FORK)
			add_newtask(b, &w->events[i], first_waking);
	for (size_t i = 0; i < b->sw->nblocked; i++)
		add_blocked_reason(b, &b->sw->blocked[i]);
	qsort(b->full, b->nfull, sizeof(*b->full), cmp_full_event);
	free(first_waking);
	return 0;
}

/* The compact_sched arrays, in the order written. */
enum bundle_array {
	SW_TS,
	SW_STATE,
	SW_PID,
	SW_PRIO,
	SW_COMM,
	WK_TS,
	WK_PID,
	WK_CPU,
	WK_PRIO,
	WK_COMM,
	WK_FLAGS,
	NARRAYS,
};

static const uint32_t array_fields[NARRAYS] = {
	[SW_TS] = HT_FTF_COMPACT_SWITCH_TIMESTAMP,
	[SW_STATE] = HT_FTF_COMPACT_SWITCH_PREV_STATE,
	[SW_PID] = HT_FTF_COMPACT_SWITCH_NEXT_PID,
	[SW_PRIO] = HT_FTF_COMPACT_SWITCH_NEXT_PRIO,
	[SW_COMM] = HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX,
	[WK_TS] = HT_FTF_COMPACT_WAKING_TIMESTAMP,
	[WK_PID] = HT_FTF_COMPACT_WAKING_PID,
	[WK_CPU] = HT_FTF_COMPACT_WAKING_TARGET_CPU,
	[WK_PRIO] = HT_FTF_COMPACT_WAKING_PRIO,
	[WK_COMM] = HT_FTF_COMPACT_WAKING_COMM_INDEX,
	[WK_FLAGS] = HT_FTF_COMPACT_WAKING_COMMON_FLAGS,
};

/* One CPU's compact_sched arrays (packed varints) and their comm table. */
struct bundle {
	unsigned int cpu;
	int32_t *comm_index; /* per tid index: -1 until interned */
	int32_t swapper_index;
	uint32_t ncomms;
	struct pb_buf intern;
	struct pb_buf a[NARRAYS];
	uint64_t last_switch_ts, last_waking_ts;
};

/* TID's comm (not the idle task's), looked up once. */
static const char *task_comm(struct builder *b, uint32_t tid, unsigned int cpu)
{
	size_t i = tid_index(b, tid);

	if (!b->comms[i][0])
		ht_comm_lookup(b->sw->comms, tid, cpu, b->comms[i], sizeof(b->comms[i]));
	return b->comms[i];
}

static uint32_t bundle_comm(struct builder *b, struct bundle *bu, uint32_t tid)
{
	char buf[HT_COMM_LEN + 8];
	int32_t *slot;
	size_t i;

	if (!tid) {
		slot = &bu->swapper_index;
		if (*slot < 0)
			pb_string(&bu->intern, HT_FTF_COMPACT_INTERN_TABLE,
				  ht_comm_lookup(b->sw->comms, 0, bu->cpu, buf, sizeof(buf)));
	} else {
		i = tid_index(b, tid);
		slot = &bu->comm_index[i];
		if (*slot < 0)
			pb_string(&bu->intern, HT_FTF_COMPACT_INTERN_TABLE,
				  task_comm(b, tid, bu->cpu));
	}
	if (*slot < 0)
		*slot = (int32_t)bu->ncomms++;
	return (uint32_t)*slot;
}

static uint64_t boottime(const struct builder *b, uint64_t mono_ns)
{
	return (uint64_t)((int64_t)mono_ns + b->sw->boottime_offset_ns);
}

static void add_switch(struct builder *b, struct bundle *bu, uint64_t ts, int64_t prev_state,
		       uint32_t next, uint32_t next_prio)
{
	uint64_t boot = boottime(b, ts);

	put_varint(&bu->a[SW_TS], boot - bu->last_switch_ts);
	bu->last_switch_ts = boot;
	put_varint(&bu->a[SW_STATE], (uint64_t)prev_state);
	put_varint(&bu->a[SW_PID], next);
	put_varint(&bu->a[SW_PRIO], next_prio);
	put_varint(&bu->a[SW_COMM], bundle_comm(b, bu, next));
}

static void add_waking(struct builder *b, struct bundle *bu, const struct waking *wk)
{
	uint64_t boot = boottime(b, wk->ts);

	put_varint(&bu->a[WK_TS], boot - bu->last_waking_ts);
	bu->last_waking_ts = boot;
	put_varint(&bu->a[WK_PID], wk->pid);
	put_varint(&bu->a[WK_CPU], wk->target_cpu);
	put_varint(&bu->a[WK_PRIO], wk->prio);
	put_varint(&bu->a[WK_COMM], bundle_comm(b, bu, wk->pid));
	put_varint(&bu->a[WK_FLAGS], wk->flags);
}

/*
 * What ran on CPU when the window began, and its prio: known, else what its
 * first switch took off, of a prio the records do not say.
 */
static bool entry_task(const struct builder *b, unsigned int cpu, size_t first_switch,
		       uint32_t *tid, uint32_t *prio)
{
	const struct ht_fr_window *w = b->sw->w;

	if (w->entry_valid[cpu]) {
		*tid = w->entry_switch[cpu].rec.tid_b;
		*prio = w->entry_switch[cpu].rec.aux;
		return true;
	}
	if (first_switch < w->count) {
		*tid = w->events[first_switch].rec.tid_a;
		*prio = HT_FTRACE_PRIO;
		return true;
	}
	return false;
}

/* One full FtraceEvent: its time and task first, as Perfetto's tokenizer reads them fastest. */
static void write_full_event(struct builder *b, const struct full_event *f, struct pb_buf *out)
{
	size_t event = pb_begin(out, HT_FTF_BUNDLE_EVENT);
	size_t msg;

	pb_varint(out, HT_FTF_EVENT_TIMESTAMP, boottime(b, f->ts));
	pb_varint(out, HT_FTF_EVENT_PID, f->pid);
	msg = pb_begin(out, f->field);
	if (f->field == HT_FTF_EVENT_TASK_NEWTASK) {
		pb_varint(out, HT_FTF_NEWTASK_PID, f->tid);
		pb_string(out, HT_FTF_NEWTASK_COMM, task_comm(b, f->tid, f->cpu));
		pb_varint(out, HT_FTF_NEWTASK_CLONE_FLAGS, f->clone_flags);
	} else {
		pb_varint(out, HT_FTF_BLOCKED_REASON_PID, f->tid);
		pb_varint(out, HT_FTF_BLOCKED_REASON_CALLER, f->caller_iid);
		pb_varint(out, HT_FTF_BLOCKED_REASON_IO_WAIT, f->io_wait);
	}
	pb_end(out, msg);
	pb_end(out, event);
}

static void write_bundle_packet(struct builder *b, struct pb_buf *out, struct bundle *bu,
				const struct full_event *full, size_t nfull)
{
	size_t packet = pb_begin(out, PFT_TRACE_PACKET);
	size_t bundle, compact;

	pb_varint(out, PFT_PACKET_SEQUENCE_ID, HT_FTRACE_SEQUENCE_ID);
	bundle = pb_begin(out, HT_FTF_PACKET_FTRACE_EVENTS);
	pb_varint(out, HT_FTF_BUNDLE_CPU, bu->cpu);
	for (size_t i = 0; i < nfull; i++)
		write_full_event(b, &full[i], out);
	compact = pb_begin(out, HT_FTF_BUNDLE_COMPACT_SCHED);
	pb_raw(out, bu->intern.data, bu->intern.len);
	for (size_t i = 0; i < NARRAYS; i++)
		if (bu->a[i].len)
			pb_bytes(out, array_fields[i], bu->a[i].data, bu->a[i].len);
	pb_end(out, compact);
	pb_end(out, bundle);
	pb_end(out, packet);
}

/*
 * Every switch on CPU in the window, the wakings its tasks raised there and
 * its full events; the cursors walk the wakings and full events by CPU.
 */
static int write_cpu(struct builder *b, unsigned int cpu, size_t *waking_cursor,
		     size_t *full_cursor, struct pb_buf *out)
{
	const struct ht_fr_window *w = b->sw->w;
	struct bundle bu = {.cpu = cpu, .swapper_index = -1};
	size_t first_switch = w->count, wk_first = *waking_cursor, wk_end = wk_first;
	size_t full_first = *full_cursor, full_end = full_first;
	uint64_t sync_ns;
	uint32_t entry, entry_prio;

	while (wk_end < b->nwakings && b->wakings[wk_end].cpu == cpu)
		wk_end++;
	*waking_cursor = wk_end;
	while (full_end < b->nfull && b->full[full_end].cpu == cpu)
		full_end++;
	*full_cursor = full_end;
	for (size_t i = 0; i < w->count && first_switch == w->count; i++)
		if (w->events[i].rec.kind == HT_FR_SWITCH && w->events[i].cpu == cpu)
			first_switch = i;
	if (!entry_task(b, cpu, first_switch, &entry, &entry_prio)) {
		/*
		 * No switch there: the task of its first full event ran
		 * throughout. With none either, the wakings raised there are
		 * interrupts' (collect_wakings() keeps a task's only where its
		 * waker is seen running) on a CPU no switch was seen on since
		 * the recording began: its idle task's, interrupted.
		 */
		if (full_first == full_end && wk_first == wk_end)
			return 0; /* nothing ran there that the recorder saw */
		entry = full_first < full_end ? b->full[full_first].pid : 0;
		entry_prio = HT_FTRACE_PRIO;
	}
	bu.comm_index = malloc((b->ntids ? b->ntids : 1) * sizeof(*bu.comm_index));
	if (!bu.comm_index)
		return ht_fail("out of memory for the window's scheduling data");
	memset(bu.comm_index, 0xff, (b->ntids ? b->ntids : 1) * sizeof(*bu.comm_index));
	pb_buf_init(&bu.intern);
	for (size_t i = 0; i < NARRAYS; i++)
		pb_buf_init(&bu.a[i]);
	/*
	 * Perfetto's first compact switch on a CPU only names who runs, and it
	 * drops the CPU's wakings before it: two switches just before anything
	 * else there, to the idle task, then to the task running then.
	 */
	sync_ns = b->sw->t0;
	if (first_switch < w->count && w->events[first_switch].rec.ts_ns < sync_ns)
		sync_ns = w->events[first_switch].rec.ts_ns;
	if (wk_first < wk_end && b->wakings[wk_first].ts < sync_ns)
		sync_ns = b->wakings[wk_first].ts;
	if (full_first < full_end && b->full[full_first].ts < sync_ns)
		sync_ns = b->full[full_first].ts;
	add_switch(b, &bu, sync_ns - 2, 0, 0, HT_FTRACE_PRIO);
	add_switch(b, &bu, sync_ns - 1, 0, entry, entry_prio);
	for (size_t i = first_switch; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.kind != HT_FR_SWITCH || e->cpu != cpu)
			continue;
		add_switch(b, &bu, e->rec.ts_ns,
			   ht_ftrace_prev_state(ht_fr_switch_prev_state(&e->rec),
						(e->rec.flags & HT_FRF_PREEMPT) != 0),
			   e->rec.tid_b, e->rec.aux);
	}
	for (size_t i = wk_first; i < wk_end; i++)
		add_waking(b, &bu, &b->wakings[i]);
	write_bundle_packet(b, out, &bu, &b->full[full_first], full_end - full_first);
	out->err = out->err ? out->err : bu.intern.err;
	pb_buf_free(&bu.intern);
	for (size_t i = 0; i < NARRAYS; i++) {
		out->err = out->err ? out->err : bu.a[i].err;
		pb_buf_free(&bu.a[i]);
	}
	free(bu.comm_index);
	return 0;
}

static void write_system_info(const struct builder *b, struct pb_buf *out)
{
	size_t packet = pb_begin(out, PFT_TRACE_PACKET);
	size_t info = pb_begin(out, HT_FTF_PACKET_SYSTEM_INFO);
	size_t uts = pb_begin(out, HT_FTF_SYSTEM_INFO_UTSNAME);

	pb_string(out, HT_FTF_UTSNAME_SYSNAME, "Linux");
	pb_string(out, HT_FTF_UTSNAME_RELEASE, b->sw->kernel_release);
	pb_end(out, uts);
	pb_end(out, info);
	pb_end(out, packet);
}

/* Each task's process, so that Perfetto puts the threads of one process together. */
static void write_process_tree(const struct builder *b, struct pb_buf *out)
{
	size_t packet = pb_begin(out, PFT_TRACE_PACKET);
	size_t tree;

	/* The packet's time (Perfetto's default clock, BOOTTIME): the window's start. */
	pb_varint(out, PFT_PACKET_TIMESTAMP, boottime(b, b->sw->t0));
	tree = pb_begin(out, HT_FTF_PACKET_PROCESS_TREE);
	for (size_t i = 0; i < b->ntids; i++) {
		uint32_t tgid = ht_comm_tgid(b->sw->comms, b->tids[i]);
		size_t thread;

		if (!tgid || b->forked[i])
			continue;
		thread = pb_begin(out, HT_FTF_PROCESS_TREE_THREADS);
		pb_varint(out, HT_FTF_THREAD_TID, b->tids[i]);
		pb_varint(out, HT_FTF_THREAD_TGID, tgid);
		pb_end(out, thread);
	}
	pb_end(out, tree);
	pb_end(out, packet);
}

/*
 * The kernel symbols the sched_blocked_reason events name, on the bundles'
 * sequence, which this packet starts (Perfetto keeps interned data only
 * on a sequence whose incremental state was cleared).
 */
static void write_kernel_symbols(const struct builder *b, struct pb_buf *out)
{
	size_t packet, interned;

	if (!b->nsymbols)
		return;
	packet = pb_begin(out, PFT_TRACE_PACKET);
	pb_varint(out, PFT_PACKET_SEQUENCE_ID, HT_FTRACE_SEQUENCE_ID);
	pb_varint(out, PFT_PACKET_SEQUENCE_FLAGS, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	interned = pb_begin(out, PFT_PACKET_INTERNED_DATA);
	for (size_t i = 0; i < b->nsymbols; i++) {
		size_t sym = pb_begin(out, HT_FTF_INTERNED_KERNEL_SYMBOLS);

		pb_varint(out, PFT_INTERNED_IID, i + 1);
		pb_string(out, PFT_INTERNED_STRING, b->symbols[i]);
		pb_end(out, sym);
	}
	pb_end(out, interned);
	pb_end(out, packet);
}

int ht_sched_ftrace_write(const struct ht_sched_ftrace_window *sw, struct pb_buf *out)
{
	struct builder b = {.sw = sw};
	size_t waking_cursor = 0, full_cursor = 0;
	int rc = -1;

	if (collect_tasks(&b) || collect_wakings(&b) || collect_full_events(&b))
		goto out;
	write_system_info(&b, out);
	write_process_tree(&b, out);
	write_kernel_symbols(&b, out);
	for (unsigned int cpu = 0; cpu < sw->w->ncpus; cpu++)
		if (write_cpu(&b, cpu, &waking_cursor, &full_cursor, out))
			goto out;
	rc = out->err ? ht_fail("out of memory for the window's scheduling data") : 0;
out:
	free(b.tids);
	free(b.edges);
	free(b.comms);
	free(b.wakings);
	free(b.forked);
	free(b.full);
	free(b.symbols);
	return rc;
}
