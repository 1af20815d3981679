// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/report_model.h"
#include "hybtrace/records.h"
#include "kernel/kernel_timeline.h"
#include "trace/dump_schema.h"

#define MODEL_CULPRITS 3 /* as many as a run-queue line names */

struct model {
	struct timeline *tl;
	const struct ht_native_sched *ns;
	uint64_t ws, we;
	/* The Running states, by CPU then time: who held a CPU when. */
	const struct ht_thread_state **running;
	size_t nrunning;
	long breach; /* the breach's instant on the hybtrace track, or -1 */
	uint32_t breach_tid;
	uint64_t breach_end_ns;
	/* The syscall slices of the thread being modelled, by start: those a sleep lies in. */
	const struct tl_event **syscalls;
	size_t nsyscalls;
	/* An off-CPU breach's sleep (of one wait of two kinds, the one inside): when, how, where.
	 */
	bool breach_slept;
	uint64_t breach_sleep_ns;
	const char *breach_state, *breach_syscall;
};

/* The index of target thread TID's track, or -1. */
static long thread_track_index(const struct timeline *tl, uint32_t tid)
{
	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_THREAD && (uint32_t)t->tid == tid)
			return (long)i;
	}
	return -1;
}

const struct tl_track *ht_report_thread_track(const struct timeline *tl, uint32_t tid)
{
	long i = thread_track_index(tl, tid);

	return i >= 0 ? tl_track(tl, (size_t)i) : NULL;
}

static const char *arg_str(const struct timeline *tl, const struct tl_event *e, const char *name)
{
	const struct tl_arg *a = tl_event_find_arg(tl, e, name);

	return a && a->kind == TL_ARG_STR ? tl_str_get(tl, a->s) : NULL;
}

static uint64_t state_end(const struct model *m, const struct ht_thread_state *st)
{
	uint64_t end = st->dur_ns < 0 ? m->we : st->ts_ns + (uint64_t)st->dur_ns;

	return end > m->we ? m->we : end;
}

static bool is_running(const struct ht_thread_state *st)
{
	return !strcmp(st->state, "Running");
}

static bool is_runnable(const struct ht_thread_state *st)
{
	return !strcmp(st->state, "R") || !strcmp(st->state, "R+");
}

const char *ht_report_task_name(const struct timeline *tl, const struct ht_native_sched *ns,
				uint32_t tid)
{
	const struct tl_track *t = ht_report_thread_track(tl, tid);
	const struct ht_thread_state *st;
	size_t n;

	if (t)
		return tl_str_get(tl, t->name);
	st = ht_native_sched_thread(ns, tid, &n);
	for (size_t i = 0; i < n; i++)
		if (st[i].comm)
			return st[i].comm;
	return "?";
}

static const char *task_name(const struct model *m, uint32_t tid)
{
	return ht_report_task_name(m->tl, m->ns, tid);
}

static int by_cpu_then_time(const void *a, const void *b)
{
	const struct ht_thread_state *x = *(const struct ht_thread_state *const *)a;
	const struct ht_thread_state *y = *(const struct ht_thread_state *const *)b;

	if (x->cpu != y->cpu)
		return x->cpu < y->cpu ? -1 : 1;
	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

static int index_running(struct model *m)
{
	const struct ht_native_sched *ns = m->ns;

	m->running = malloc((ns->nstates ? ns->nstates : 1) * sizeof(*m->running));
	if (!m->running)
		return -1;
	for (size_t i = 0; i < ns->nstates; i++)
		if (is_running(&ns->states[i]) && ns->states[i].cpu >= 0)
			m->running[m->nrunning++] = &ns->states[i];
	qsort(m->running, m->nrunning, sizeof(*m->running), by_cpu_then_time);
	return 0;
}

/*
 * A CPU track of "comm[pid]" slices for each CPU a target's thread ran on:
 * an earlier dump drew these, and the report's lines take their CPUs and
 * the tasks that held the breached thread's CPU from them.
 */
static void add_cpu_tracks(struct model *m)
{
	char name[HT_COMM_LEN + 32];
	int track = -1;
	int32_t cpu = -1;
	bool used = false;

	for (size_t i = 0; i < m->nrunning; i++) {
		const struct ht_thread_state *st = m->running[i];
		uint64_t start = st->ts_ns < m->ws ? m->ws : st->ts_ns, end = state_end(m, st);
		long ev;

		if (st->cpu != cpu) {
			cpu = st->cpu;
			used = false;
			for (size_t j = i; j < m->nrunning && m->running[j]->cpu == cpu && !used;
			     j++)
				used = ht_report_thread_track(m->tl, m->running[j]->tid) != NULL;
			track = -1;
			if (used) {
				snprintf(name, sizeof(name), HT_TRACK_CPU_FMT, (unsigned int)cpu);
				track = tl_add_track(m->tl, &(struct tl_track_desc){
								    .kind = TL_TRACK_CPU,
								    .cpu = cpu,
								    .name = name,
							    });
			}
		}
		if (track < 0 || end <= start)
			continue;
		snprintf(name, sizeof(name), "%s[%u]", st->comm ? st->comm : task_name(m, st->tid),
			 st->tid);
		ev = tl_add_slice(m->tl, track, start, end - start, name, HT_CAT_SCHED);
		tl_event_arg_uint(m->tl, ev, HT_ARG_TID, st->tid);
	}
}

/* The kernel track of thread track THREAD (index), made in the model when the dump drew none. */
static int kernel_track(struct model *m, size_t thread)
{
	for (size_t i = 0; i < tl_track_count(m->tl); i++)
		if (tl_track(m->tl, i)->kind == TL_TRACK_THREAD_KERNEL &&
		    tl_track(m->tl, i)->parent_uuid == tl_track(m->tl, thread)->uuid)
			return (int)i;
	return ht_timeline_kernel_track(m->tl, thread);
}

static int by_start(const void *a, const void *b)
{
	const struct tl_event *x = *(const struct tl_event *const *)a;
	const struct tl_event *y = *(const struct tl_event *const *)b;

	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

/* The syscall slices on TRACK, by start, into the model; -1 without memory. */
static int index_syscalls(struct model *m, int track)
{
	m->nsyscalls = 0;
	for (size_t i = 0; i < tl_event_count(m->tl); i++) {
		const struct tl_event *e = tl_event(m->tl, i);

		if ((int)e->track != track || e->kind != TL_EVENT_SLICE ||
		    strcmp(tl_str_get(m->tl, e->category), HT_CAT_SYSCALL))
			continue;
		if (!(m->nsyscalls & (m->nsyscalls + 1))) {
			const struct tl_event **v =
				realloc(m->syscalls, (m->nsyscalls * 2 + 2) * sizeof(*v));

			if (!v)
				return -1;
			m->syscalls = v;
		}
		m->syscalls[m->nsyscalls++] = e;
	}
	if (m->nsyscalls)
		qsort(m->syscalls, m->nsyscalls, sizeof(*m->syscalls), by_start);
	return 0;
}

/* The syscall that holds [START, END] (index_syscalls()), by name; NULL if none. */
static const char *syscall_around(const struct model *m, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = m->nsyscalls;

	/* The last one that starts at or before START: a thread's syscalls never overlap. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syscalls[mid]->ts_ns <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || m->syscalls[lo - 1]->ts_ns + m->syscalls[lo - 1]->dur_ns < end)
		return NULL;
	return tl_str_get(m->tl, m->syscalls[lo - 1]->name);
}

/* Copy the breach instant's arguments whose names begin with one of PREFIXES onto EV. */
static void copy_breach_args(struct model *m, long ev, const char *const *prefixes, size_t n)
{
	uint32_t i = tl_event_lists(m->tl, tl_event(m->tl, (size_t)m->breach))->args.first;

	while (i) {
		/* By value: adding an argument may move the pool. */
		struct tl_arg a = *tl_arg(m->tl, i);
		const char *name = tl_str_get(m->tl, a.name);

		for (size_t p = 0; p < n; p++)
			if (!strncmp(name, prefixes[p], strlen(prefixes[p]))) {
				tl_event_arg(m->tl, ev, &a);
				break;
			}
		i = a.next;
	}
}

struct culprit {
	uint32_t tid;
	uint64_t ns;
};

#define MODEL_HOLDERS 64 /* tasks told apart on one CPU over one wait; the rest are "other" */

static int by_time_held(const void *a, const void *b)
{
	const struct culprit *x = a, *y = b;

	return x->ns > y->ns ? -1 : x->ns < y->ns;
}

/*
 * Who held CPU over [START, END): the Running states there, the longest
 * MODEL_CULPRITS named, the rest summed, and the time nobody ran (the idle
 * task has no states) as the CPU's idle time.
 */
static void add_culprits(struct model *m, long ev, int32_t cpu, uint64_t start, uint64_t end)
{
	struct culprit held[MODEL_HOLDERS];
	uint64_t covered = 0, other = 0;
	char name[64], value[HT_COMM_LEN + 32];
	size_t lo = 0, hi = m->nrunning, n = 0;

	/* The first Running state of CPU that ends after START. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ht_thread_state *st = m->running[mid];

		if (st->cpu < cpu || (st->cpu == cpu && state_end(m, st) <= start))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < m->nrunning && m->running[i]->cpu == cpu; i++) {
		const struct ht_thread_state *st = m->running[i];
		uint64_t a = st->ts_ns > start ? st->ts_ns : start, b = state_end(m, st);
		size_t k;

		if (a >= end)
			break;
		b = b < end ? b : end;
		if (b <= a)
			continue;
		covered += b - a;
		for (k = 0; k < n && held[k].tid != st->tid; k++)
			;
		if (k == n && n == MODEL_HOLDERS) {
			other += b - a;
			continue;
		}
		if (k == n)
			held[n++] = (struct culprit){.tid = st->tid};
		held[k].ns += b - a;
	}
	qsort(held, n, sizeof(held[0]), by_time_held);
	for (size_t i = 0; i < n; i++) {
		if (i >= MODEL_CULPRITS) {
			other += held[i].ns;
			continue;
		}
		snprintf(value, sizeof(value), "%s[%u]", task_name(m, held[i].tid), held[i].tid);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%zu", i);
		tl_event_arg_str(m->tl, ev, name, value);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%zu.ns", i);
		tl_event_arg_uint(m->tl, ev, name, held[i].ns);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%zu.cpu", i);
		tl_event_arg_uint(m->tl, ev, name, (uint64_t)cpu);
	}
	if (other)
		tl_event_arg_uint(m->tl, ev, HT_ARG_OTHER_NS, other);
	if (end - start > covered)
		tl_event_arg_uint(m->tl, ev, HT_ARG_IDLE_NS, end - start - covered);
}

static void add_waker(struct model *m, long ev, const struct ht_thread_state *st);

/*
 * Run-queue wait ST of thread TID, switched in on CPU (-1: not in the
 * window): why it began, who woke it, what ran instead. The breach's own
 * wait takes its waker and culprits from the breach, as the live line
 * gave them.
 */
static void add_runqueue(struct model *m, int track, const struct ht_thread_state *st, uint32_t tid,
			 int32_t cpu)
{
	static const char *const from_breach[] = {HT_ARG_WAKE_SOURCE, HT_ARG_SOFTIRQ,
						  HT_ARG_WAKER_TID, HT_ARG_WAKER_COMM};
	static const char *const culprits[] = {HT_ARG_RAN_INSTEAD, HT_ARG_RUNNABLE_NS};
	uint64_t start = st->ts_ns, end = state_end(m, st);
	const struct tl_event *b = m->breach >= 0 ? tl_event(m->tl, (size_t)m->breach) : NULL;
	bool breach = b && tid == m->breach_tid && end == m->breach_end_ns;
	long ev = tl_add_slice(m->tl, track, start, end - start, HT_EV_RUNQUEUE, HT_CAT_SCHED);

	tl_event_arg_str(m->tl, ev, HT_ARG_CAUSE,
			 st->newtask ? "new task"
			 : st->woken ? "woken"
				     : "preempted");
	if (cpu >= 0)
		tl_event_arg_uint(m->tl, ev, HT_ARG_CPU, (uint64_t)cpu);
	if (breach && st->woken && tl_event_find_arg(m->tl, b, HT_ARG_WAKE_SOURCE))
		copy_breach_args(m, ev, from_breach, sizeof(from_breach) / sizeof(from_breach[0]));
	else
		add_waker(m, ev, st);
	if (breach && tl_event_find_arg(m->tl, b, HT_ARG_RUNNABLE_NS))
		copy_breach_args(m, ev, culprits, sizeof(culprits) / sizeof(culprits[0]));
	else if (cpu >= 0)
		add_culprits(m, ev, cpu, start, end);
}

/* Who woke ST, as its native waking says. */
static void add_waker(struct model *m, long ev, const struct ht_thread_state *st)
{
	if (st->woken && st->irq) {
		tl_event_arg_str(m->tl, ev, HT_ARG_WAKE_SOURCE, "irq");
	} else if (st->woken) {
		tl_event_arg_str(m->tl, ev, HT_ARG_WAKE_SOURCE, "task");
		tl_event_arg_uint(m->tl, ev, HT_ARG_WAKER_TID, st->waker_tid);
		tl_event_arg_str(m->tl, ev, HT_ARG_WAKER_COMM,
				 st->waker_tid ? task_name(m, st->waker_tid) : "swapper");
	}
}

/* Off-CPU [START, END) of the thread on TRACK, in STATE (NULL: unknown). */
static void add_off_cpu(struct model *m, int track, uint64_t start, uint64_t end, const char *state,
			bool before_window)
{
	const char *syscall = syscall_around(m, start, end);
	long ev;

	/* The rings may have lost its sys_enter; the breach knows the syscall it slept in. */
	if (!syscall && m->breach_slept && start == m->breach_sleep_ns &&
	    (uint32_t)tl_track(m->tl, (size_t)track)->tid == m->breach_tid)
		syscall = m->breach_syscall;
	ev = tl_add_slice(m->tl, track, start, end - start, HT_EV_OFF_CPU, HT_CAT_SCHED);
	tl_event_arg_str(m->tl, ev, HT_ARG_STATE, state ? state : HT_STATE_UNKNOWN);
	if (syscall)
		tl_event_arg_str(m->tl, ev, HT_ARG_SYSCALL, syscall);
	if (before_window)
		tl_event_arg_uint(m->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
}

/*
 * Before a thread's first state, when that is a switch-in or a waking, it
 * slept since some time the window does not hold: from its start, in a state
 * unknown; the breached thread's off-CPU breach knows when and how it began.
 */
static void add_sleep_before(struct model *m, int track, uint32_t tid, uint64_t until)
{
	if (m->breach_slept && tid == m->breach_tid && m->breach_sleep_ns <= until) {
		add_off_cpu(m, track, m->breach_sleep_ns, until, m->breach_state,
			    m->breach_sleep_ns < m->ws);
		return;
	}
	if (until > m->ws)
		add_off_cpu(m, track, m->ws, until, NULL, true);
}

/* A target waker's side of a wakeup: an instant on its kernel track. */
static void add_wakes(struct model *m, const struct ht_thread_state *st, uint32_t wakee)
{
	long waker = st->waker_tid ? thread_track_index(m->tl, st->waker_tid) : -1;
	int track;
	long ev;

	if (waker < 0 || !st->woken || st->irq || st->newtask)
		return;
	track = kernel_track(m, (size_t)waker);
	if (track < 0)
		return;
	ev = tl_add_instant(m->tl, track, st->ts_ns, HT_EV_WAKES, HT_CAT_SCHED);
	tl_event_arg_uint(m->tl, ev, HT_ARG_WAKEE_TID, wakee);
	tl_event_arg_str(m->tl, ev, HT_ARG_WAKE_SOURCE, "task");
}

/* Thread track THREAD's waits and sleeps, from its states. */
static void add_thread_waits(struct model *m, size_t thread)
{
	uint32_t tid = (uint32_t)tl_track(m->tl, thread)->tid;
	size_t n;
	const struct ht_thread_state *st = ht_native_sched_thread(m->ns, tid, &n);
	int track;

	if (!st || !n)
		return;
	track = kernel_track(m, thread);
	if (track < 0 || index_syscalls(m, track))
		return;
	if ((is_running(&st[0]) || (st[0].woken && !st[0].newtask)) && st[0].ts_ns > m->ws)
		add_sleep_before(m, track, tid, st[0].ts_ns);
	for (size_t i = 0; i < n; i++) {
		struct ht_thread_state wait = st[i];
		uint64_t end = state_end(m, &st[i]);

		/* A task gone (X, Z) waits for nothing. */
		if (st[i].ts_ns >= end || is_running(&st[i]) || !strcmp(st[i].state, "X") ||
		    !strcmp(st[i].state, "Z"))
			continue;
		if (!is_runnable(&st[i])) {
			add_off_cpu(m, track, st[i].ts_ns, end, st[i].state, false);
			continue;
		}
		/*
		 * Preempted, then woken before it ran (it was preempted on its
		 * way to sleep): one wait in the run queue, as the monitor saw it.
		 */
		while (!strcmp(wait.state, "R+") && i + 1 < n && is_runnable(&st[i + 1])) {
			wait.dur_ns = st[i + 1].dur_ns < 0
					      ? -1
					      : (int64_t)(st[i + 1].ts_ns +
							  (uint64_t)st[i + 1].dur_ns - wait.ts_ns);
			snprintf(wait.state, sizeof(wait.state), "%s", st[++i].state);
		}
		add_runqueue(m, track, &wait, tid,
			     i + 1 < n && is_running(&st[i + 1]) ? st[i + 1].cpu : -1);
		add_wakes(m, &wait, tid);
	}
}

/* Whether the dump drew its threads' waits itself: an earlier version's. */
static bool has_waits(const struct timeline *tl)
{
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const char *name = tl_str_get(tl, e->name);

		if (tl_track(tl, e->track)->kind == TL_TRACK_THREAD_KERNEL &&
		    (!strcmp(name, HT_EV_RUNQUEUE) || !strcmp(name, HT_EV_OFF_CPU)))
			return true;
	}
	return false;
}

static bool has_cpu_tracks(const struct timeline *tl)
{
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (tl_track(tl, i)->kind == TL_TRACK_CPU)
			return true;
	return false;
}

static void find_breach(struct model *m)
{
	m->breach = -1;
	for (size_t i = 0; i < tl_event_count(m->tl); i++) {
		const struct tl_event *e = tl_event(m->tl, i);
		const struct tl_arg *tid, *dur, *off;

		if (e->kind != TL_EVENT_INSTANT ||
		    strcmp(tl_str_get(m->tl, e->name), HT_EV_BREACH) ||
		    tl_track(m->tl, e->track)->uuid != TL_HYBTRACE_UUID)
			continue;
		tid = tl_event_find_arg(m->tl, e, HT_ARG_TID);
		dur = tl_event_find_arg(m->tl, e, HT_ARG_DURATION_NS);
		off = tl_event_find_arg(m->tl, e, HT_ARG_OFF_CPU_START_NS);
		m->breach = (long)i;
		m->breach_tid = tid ? (uint32_t)tid->u : 0;
		m->breach_end_ns = e->ts_ns;
		/* The breach has a state only when it slept past the off-CPU threshold. */
		m->breach_state = arg_str(m->tl, e, HT_ARG_STATE);
		m->breach_syscall = arg_str(m->tl, e, HT_ARG_SYSCALL);
		m->breach_slept = m->breach_state && (off || (dur && dur->u <= e->ts_ns));
		m->breach_sleep_ns = off ? off->u : dur ? e->ts_ns - dur->u : 0;
		return;
	}
}

void ht_report_model_rebuild(struct timeline *tl, const struct ht_native_sched *ns,
			     uint64_t window_start, uint64_t window_end)
{
	struct model m = {.tl = tl, .ns = ns, .ws = window_start, .we = window_end};
	bool cpus = has_cpu_tracks(tl), waits = has_waits(tl);
	size_t nthreads = tl_track_count(tl);

	if (!ns->present || (cpus && waits) || index_running(&m))
		return;
	find_breach(&m);
	if (!waits)
		/* Only the tracks there before: those made here are no thread's. */
		for (size_t i = 0; i < nthreads; i++)
			if (tl_track(tl, i)->kind == TL_TRACK_THREAD)
				add_thread_waits(&m, i);
	if (!cpus)
		add_cpu_tracks(&m);
	free(m.running);
	free(m.syscalls);
}
