// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Walk the window in time order with a small state machine per target
 * thread: running -> (switch out) sleeping or runnable -> (wakeup) runnable
 * -> (switch in) running. Each state left becomes a slice on the thread's
 * kernel track; syscalls become slices around them. Slices still open at
 * the window's edges are cut there and marked. Who ran on each CPU is the
 * native scheduling data's (sched_ftrace.c): no track here imitates it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/breach_format.h"
#include "base/breach_kinds.h"
#include "kernel/comm_cache.h"
#include "kernel/culprits.h"
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "symbols/ksyms.h"
#include "base/log.h"
#include "base/syscalls.h"
#include "trace/timeline.h"
#include "base/units.h"
#include "kernel/wait_for_work.h"

#define NO_EVENT ((size_t)-1)

enum thread_state { TS_UNKNOWN, TS_RUNNING, TS_SLEEPING, TS_RUNNABLE, TS_EXITED };

struct thread_build {
	uint32_t tid;
	int thread_track, kernel_track;
	enum thread_state state;
	uint64_t since_ns;	  /* start of the current sleeping or runnable state */
	bool since_before_window; /* that start is really earlier than the window */
	uint32_t sleep_state;
	bool sleep_state_known;
	/* The wait in a run queue: why it began, where it queued, who woke it. */
	const char *cause;
	unsigned int queue_cpu;
	uint64_t flow_in;
	uint32_t wake_source, waker_tid, softirq_vec;
	/* The syscall it is in. */
	bool in_syscall, syscall_before_window;
	uint64_t syscall_since_ns, syscall_arg0;
	int syscall_nr;
	/* A wakeup record already applied before its switch-in (see HT_FR_WAKEUP_SKEW_NS). */
	size_t early_wakeup;
};

struct builder {
	struct timeline *tl;
	const struct ht_kernel_window *kw;
	struct thread_build *threads;
	size_t nthreads, cap;
	/* tid -> index + 1 into threads, open addressing; a power of two, at most half full. */
	uint32_t *slots;
	size_t nslots;
	int hybtrace_track;
	uint64_t next_flow;
	size_t cursor; /* the index of the record being walked */
};

static const char *comm_of(struct builder *b, uint32_t pid, unsigned int cpu, char *buf,
			   size_t len)
{
	return ht_comm_lookup(b->kw->comms, pid, cpu, buf, len);
}

static size_t slot_of(const struct builder *b, uint32_t tid)
{
	size_t i = (tid * 2654435761u) & (b->nslots - 1);

	while (b->slots[i] && b->threads[b->slots[i] - 1].tid != tid)
		i = (i + 1) & (b->nslots - 1);
	return i;
}

static struct thread_build *find_thread(struct builder *b, uint32_t tid)
{
	size_t i;

	if (!b->nslots)
		return NULL;
	i = slot_of(b, tid);
	return b->slots[i] ? &b->threads[b->slots[i] - 1] : NULL;
}

/* Make room for one more thread in both the array and the index. */
static int grow_threads(struct builder *b)
{
	if (b->nthreads == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		struct thread_build *v = realloc(b->threads, cap * sizeof(*v));

		if (!v)
			return -1;
		b->threads = v;
		b->cap = cap;
	}
	if ((b->nthreads + 1) * 2 > b->nslots) {
		size_t n = b->nslots ? b->nslots * 2 : 64;
		uint32_t *slots = calloc(n, sizeof(*slots));

		if (!slots)
			return -1;
		free(b->slots);
		b->slots = slots;
		b->nslots = n;
		for (size_t i = 0; i < b->nthreads; i++)
			b->slots[slot_of(b, b->threads[i].tid)] = (uint32_t)i + 1;
	}
	return 0;
}

/*
 * The process of thread TID: HINT when a record says (a fork's child), the
 * breach's for its thread, else the comm cache's (the comm map keeps a
 * thread that exited); unknown (offline), the target's, else its own.
 */
static int process_of(const struct builder *b, uint32_t tid, uint32_t hint)
{
	const struct ht_breach *br = b->kw->breach;
	uint32_t tgid = hint;

	if (!tgid && br && br->tid == tid)
		tgid = br->tgid;
	if (!tgid)
		tgid = ht_comm_tgid(b->kw->comms, tid);
	if (!tgid)
		tgid = b->kw->tgid > 0 ? (uint32_t)b->kw->tgid : tid;
	return (int)tgid;
}

int ht_timeline_process_track(struct timeline *tl, struct ht_comm_cache *comms, int tgid)
{
	struct tl_track_desc desc = { .kind = TL_TRACK_PROCESS, .pid = tgid };
	char comm[HT_COMM_LEN + 8];

	for (size_t i = tl_track_count(tl); i-- > 0;) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_PROCESS && t->pid == tgid)
			return (int)i;
	}
	/* A process is named as its main thread is. */
	if (comms)
		ht_comm_lookup(comms, (uint32_t)tgid, 0, comm, sizeof(comm));
	else
		snprintf(comm, sizeof(comm), "pid %d", tgid);
	desc.name = comm;
	return tl_add_track(tl, &desc);
}

/* Thread TID's state, made with its tracks (under its process's, HINT as process_of() says). */
static struct thread_build *thread_of(struct builder *b, uint32_t tid, uint32_t hint)
{
	struct thread_build *t = find_thread(b, tid);
	char comm[HT_COMM_LEN + 8], name[HT_COMM_LEN + 32];
	struct tl_track_desc desc = { 0 };
	int tgid, process;

	if (t)
		return t;
	tgid = process_of(b, tid, hint);
	process = ht_timeline_process_track(b->tl, b->kw->comms, tgid);
	if (process < 0 || grow_threads(b))
		return NULL;
	t = &b->threads[b->nthreads];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->early_wakeup = NO_EVENT;
	b->slots[slot_of(b, tid)] = (uint32_t)++b->nthreads;
	comm_of(b, tid, 0, comm, sizeof(comm));
	desc.kind = TL_TRACK_THREAD;
	desc.parent_uuid = tl_track(b->tl, (size_t)process)->uuid;
	desc.name = comm;
	desc.pid = tgid;
	desc.tid = (int32_t)tid;
	t->thread_track = tl_add_track(b->tl, &desc);
	snprintf(name, sizeof(name), "%s" HT_TRACK_KERNEL_SUFFIX, comm);
	desc.kind = TL_TRACK_THREAD_KERNEL;
	desc.parent_uuid = t->thread_track >= 0 ? tl_track(b->tl, (size_t)t->thread_track)->uuid : 0;
	desc.name = name;
	t->kernel_track = tl_add_track(b->tl, &desc);
	if (t->thread_track < 0 || t->kernel_track < 0)
		return NULL;
	return t;
}

static long add_slice(struct builder *b, int track, uint64_t start, uint64_t end,
		      const char *name, const char *cat)
{
	return tl_add_slice(b->tl, track, start, end > start ? end - start : 0, name, cat);
}

static const char *state_name(uint32_t state, bool preempted, char *buf, size_t len)
{
	snprintf(buf, len, "%c%s", ht_task_state_letter(state), preempted ? "+" : "");
	return buf;
}

/* The off-CPU interval of a breach: its own, or the one inside its syscall. */
static uint64_t breach_off_cpu_start(const struct ht_breach *br)
{
	return br->kind == HT_BREACH_OFF_CPU || !br->off_cpu_end_ns ? br->start_ns
								    : br->off_cpu_start_ns;
}

static uint64_t breach_off_cpu_end(const struct ht_breach *br)
{
	return br->kind == HT_BREACH_OFF_CPU || !br->off_cpu_end_ns ? br->end_ns
								    : br->off_cpu_end_ns;
}

/* Whether one of the kinds BR breached measures INTERVAL (their rows say what each measures). */
static bool breach_measures(const struct ht_breach *br, enum ht_breach_interval interval)
{
	uint32_t kinds = ht_breach_kinds_of(br->kinds, br->kind);

	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if ((kinds & HT_KIND_BIT(k)) && ht_breach_kinds[k].interval == interval)
			return true;
	return false;
}

/* Whether T's slice [START, END), of what INTERVAL says, is the breach's: it gets its stack. */
static bool is_breach_slice(const struct builder *b, const struct thread_build *t,
			    enum ht_breach_interval interval, uint64_t start, uint64_t end)
{
	const struct ht_breach *br = b->kw->breach;

	if (!br || br->tid != t->tid || !breach_measures(br, interval))
		return false;
	switch (interval) {
	case HT_INTERVAL_OFF_CPU:
		return start == breach_off_cpu_start(br);
	default:
		return end == br->end_ns;
	}
}

static void attach_breach_stack(struct builder *b, long ev)
{
	const struct ht_breach *br = b->kw->breach;
	int depth = br->kstack_bytes > 0 ? br->kstack_bytes / (int)sizeof(uint64_t) : 0;

	if (depth)
		ht_kernel_stack_attach(b->tl, ev, (const uint64_t *)br->kstack, depth, b->kw->ksyms);
}

/* Sleeping [since, end): an off-CPU slice with the state it slept in. */
static void close_sleep(struct builder *b, struct thread_build *t, uint64_t end)
{
	bool breach = is_breach_slice(b, t, HT_INTERVAL_OFF_CPU, t->since_ns, end);
	int syscall_nr = t->in_syscall ? t->syscall_nr : -1;
	char state[8];
	long ev;

	/* The rings may have lost its sys_enter; the breach knows the syscall it slept in. */
	if (syscall_nr < 0 && breach)
		syscall_nr = b->kw->breach->syscall_nr;
	ev = add_slice(b, t->kernel_track, t->since_ns, end, HT_EV_OFF_CPU, HT_CAT_SCHED);
	tl_event_arg_str(b->tl, ev, HT_ARG_STATE,
			 t->sleep_state_known
				 ? state_name(t->sleep_state, false, state, sizeof(state))
				 : HT_STATE_UNKNOWN);
	if (syscall_nr >= 0)
		tl_event_arg_str(b->tl, ev, HT_ARG_SYSCALL,
				 ht_syscall_name(syscall_nr) ?: "unknown");
	if (t->since_before_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
	if (breach)
		attach_breach_stack(b, ev);
}

/*
 * T was off the CPU when the rings begin, and is seen again at NOW. How it
 * left is known only for the thread of an off-CPU breach that covers NOW:
 * the monitor measured that sleep from its switch-out, with the state it
 * left in, even when a clipped window lost the record. Anyone else's sleep
 * began at some unknown time before the window, in an unknown state.
 */
static void asleep_since_before(struct builder *b, struct thread_build *t, uint64_t now)
{
	const struct ht_breach *br = b->kw->breach;

	if (br && (ht_breach_kinds_of(br->kinds, br->kind) & HT_KIND_BIT(HT_BREACH_OFF_CPU)) &&
	    br->tid == t->tid && breach_off_cpu_start(br) <= now && now <= breach_off_cpu_end(br)) {
		t->since_ns = breach_off_cpu_start(br);
		t->since_before_window = t->since_ns < b->kw->t0;
		t->sleep_state = br->state;
		t->sleep_state_known = true;
		return;
	}
	t->since_ns = b->kw->t0;
	t->since_before_window = true;
	t->sleep_state_known = false;
}

static void add_culprit_args(struct builder *b, long ev, const struct ht_culprits *c)
{
	char name[64], value[HT_COMM_LEN + 32], comm[HT_COMM_LEN + 8];

	for (unsigned int i = 0; i < c->count; i++) {
		comm_of(b, c->top[i].pid, c->top[i].cpu, comm, sizeof(comm));
		snprintf(value, sizeof(value), "%s[%u]", comm, c->top[i].pid);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u", i);
		tl_event_arg_str(b->tl, ev, name, value);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u.ns", i);
		tl_event_arg_uint(b->tl, ev, name, c->top[i].ns);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u.cpu", i);
		tl_event_arg_uint(b->tl, ev, name, c->top[i].cpu);
	}
	if (c->other_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_OTHER_NS, c->other_ns);
	if (c->unknown_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_UNKNOWN_NS, c->unknown_ns);
	if (c->idle_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_IDLE_NS, c->idle_ns);
}

/* Runnable [since, end): a run-queue slice with what ran instead and who woke it. */
static void close_runnable(struct builder *b, struct thread_build *t, uint64_t end)
{
	struct ht_culprits culprits;
	char comm[HT_COMM_LEN + 8];
	long ev;

	/* As the live line computes it: one breach, the same culprits. */
	ht_culprits_compute(b->kw->w, b->kw->idx, t->tid, t->since_ns, end, true, t->queue_cpu,
			    &culprits);
	ev = add_slice(b, t->kernel_track, t->since_ns, end, HT_EV_RUNQUEUE, HT_CAT_SCHED);
	tl_event_arg_str(b->tl, ev, HT_ARG_CAUSE, t->cause ? t->cause : "unknown");
	tl_event_arg_uint(b->tl, ev, HT_ARG_CPU, culprits.last_cpu);
	if (t->wake_source != HT_WAKE_NONE)
		tl_event_arg_str(b->tl, ev, HT_ARG_WAKE_SOURCE,
				 ht_wake_source_name(t->wake_source));
	if (t->wake_source == HT_WAKE_SOFTIRQ)
		tl_event_arg_str(b->tl, ev, HT_ARG_SOFTIRQ, ht_softirq_name(t->softirq_vec));
	/* A softirq's waker is the task it ran in, when it ran in one's context. */
	if (t->wake_source == HT_WAKE_TASK || (t->wake_source == HT_WAKE_SOFTIRQ && t->waker_tid)) {
		tl_event_arg_uint(b->tl, ev, HT_ARG_WAKER_TID, t->waker_tid);
		tl_event_arg_str(b->tl, ev, HT_ARG_WAKER_COMM,
				 comm_of(b, t->waker_tid, 0, comm, sizeof(comm)));
	}
	add_culprit_args(b, ev, &culprits);
	if (t->flow_in)
		tl_event_flow_in(b->tl, ev, t->flow_in);
	if (t->since_before_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
	if (is_breach_slice(b, t, HT_INTERVAL_RUNQUEUE, t->since_ns, end))
		attach_breach_stack(b, ev);
}

static void become_runnable(struct thread_build *t, uint64_t ts, unsigned int cpu,
			    const char *cause)
{
	t->state = TS_RUNNABLE;
	t->since_ns = ts;
	t->since_before_window = false;
	t->cause = cause;
	t->queue_cpu = cpu;
}

static void on_switch_out(struct thread_build *t, const struct ht_fr_event *e)
{
	bool preempted = ht_fr_switch_left_runnable(&e->rec);

	if (preempted) {
		become_runnable(t, e->rec.ts_ns, e->cpu, "preempted");
		t->wake_source = HT_WAKE_NONE;
		t->flow_in = 0;
		return;
	}
	t->state = TS_SLEEPING;
	t->since_ns = e->rec.ts_ns;
	t->since_before_window = false;
	t->sleep_state = (uint32_t)e->rec.arg;
	t->sleep_state_known = true;
}

static void on_enqueue(struct builder *b, struct thread_build *t, const struct ht_fr_event *e);

/*
 * The wakeup of sleeping T that sorted just after its switch-in S, if any:
 * the first one within HT_FR_WAKEUP_SKEW_NS, before any other switch of T.
 */
static size_t wakeup_sorted_after(const struct builder *b, const struct thread_build *t,
				  const struct ht_fr_event *s)
{
	const struct ht_fr_window *w = b->kw->w;

	for (size_t i = b->cursor + 1; i < w->count; i++) {
		const struct ht_fr_event *e = &w->events[i];

		if (e->rec.ts_ns > s->rec.ts_ns + HT_FR_WAKEUP_SKEW_NS)
			break;
		if (e->rec.kind == HT_FR_SWITCH &&
		    (((e->rec.flags & HT_FRF_PREV_TARGET) && e->rec.tid_a == t->tid) ||
		     ((e->rec.flags & HT_FRF_NEXT_TARGET) && e->rec.tid_b == t->tid)))
			break;
		if ((e->rec.kind == HT_FR_WAKEUP || e->rec.kind == HT_FR_WAKEUP_NEW) &&
		    (e->rec.flags & HT_FRF_TARGET) && e->rec.tid_a == t->tid)
			return i;
	}
	return NO_EVENT;
}

static void on_switch_in(struct builder *b, struct thread_build *t, const struct ht_fr_event *e)
{
	if (t->state == TS_SLEEPING || t->state == TS_UNKNOWN) {
		size_t i = wakeup_sorted_after(b, t, e);

		if (i != NO_EVENT) {
			struct ht_fr_event wakeup = b->kw->w->events[i];

			wakeup.rec.ts_ns = e->rec.ts_ns;
			on_enqueue(b, t, &wakeup);
			t->early_wakeup = i;
		}
	}
	if (t->state == TS_UNKNOWN) {
		asleep_since_before(b, t, e->rec.ts_ns);
		close_sleep(b, t, e->rec.ts_ns);
	} else if (t->state == TS_SLEEPING) {
		close_sleep(b, t, e->rec.ts_ns);
	} else if (t->state == TS_RUNNABLE) {
		close_runnable(b, t, e->rec.ts_ns);
	}
	t->state = TS_RUNNING;
	t->flow_in = 0;
	t->wake_source = HT_WAKE_NONE;
}

/*
 * The waker's side of a wakeup: an instant on the waker's kernel track when
 * it is a thread of the target, with a flow to the wait it ended. Any other
 * waker is in the native scheduling data (sched_ftrace.c), as Perfetto's
 * own waker of the wakee's thread state.
 */
static void add_waker_instant(struct builder *b, struct thread_build *wakee,
			      const struct ht_fr_event *e)
{
	uint32_t source = (uint32_t)(e->rec.arg & 0xff);
	uint32_t vec = (uint32_t)(e->rec.arg >> HT_FR_WAKE_VEC_SHIFT) & 0xff;
	struct thread_build *waker = e->rec.tid_b ? find_thread(b, e->rec.tid_b) : NULL;
	int track = waker ? waker->kernel_track : -1;
	uint64_t flow = ++b->next_flow;
	long ev;

	wakee->wake_source = source;
	wakee->waker_tid = e->rec.tid_b;
	wakee->softirq_vec = vec;
	if (track < 0)
		return;
	ev = tl_add_instant(b->tl, track, e->rec.ts_ns, HT_EV_WAKES, HT_CAT_SCHED);
	tl_event_arg_uint(b->tl, ev, HT_ARG_WAKEE_TID, wakee->tid);
	tl_event_arg_str(b->tl, ev, HT_ARG_WAKE_SOURCE, ht_wake_source_name(source));
	if (source == HT_WAKE_SOFTIRQ)
		tl_event_arg_str(b->tl, ev, HT_ARG_SOFTIRQ, ht_softirq_name(vec));
	tl_event_flow_out(b->tl, ev, flow);
	wakee->flow_in = flow;
}

static void on_enqueue(struct builder *b, struct thread_build *t, const struct ht_fr_event *e)
{
	uint64_t ts = e->rec.ts_ns;

	if (t->state == TS_RUNNING || t->state == TS_RUNNABLE || t->state == TS_EXITED)
		return;
	if (t->state == TS_UNKNOWN)
		asleep_since_before(b, t, ts);
	if (e->rec.kind == HT_FR_WAKEUP_NEW) {
		become_runnable(t, ts, e->rec.aux, "new task");
	} else {
		close_sleep(b, t, ts);
		become_runnable(t, ts, e->rec.aux, "woken");
	}
	add_waker_instant(b, t, e);
}

static void close_syscall(struct builder *b, struct thread_build *t, uint64_t end, bool exited,
			  int64_t ret)
{
	const char *name = ht_syscall_name(t->syscall_nr);
	char fallback[32];
	long ev;

	if (!name) {
		snprintf(fallback, sizeof(fallback), "syscall %d", t->syscall_nr);
		name = fallback;
	}
	ev = add_slice(b, t->kernel_track, t->syscall_since_ns, end, name, HT_CAT_SYSCALL);
	tl_event_arg_int(b->tl, ev, HT_ARG_SYSCALL_NR, t->syscall_nr);
	if (exited)
		tl_event_arg_int(b->tl, ev, HT_ARG_SYSCALL_RET, ret);
	if (!t->syscall_before_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_SYSCALL_ARG0, t->syscall_arg0);
	else
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
	if (exited && is_breach_slice(b, t, HT_INTERVAL_SYSCALL, t->syscall_since_ns, end))
		attach_breach_stack(b, ev);
	t->in_syscall = false;
}

static void on_sys_enter(struct builder *b, struct thread_build *t, const struct ht_fr_event *e)
{
	if (t->in_syscall)
		close_syscall(b, t, e->rec.ts_ns, false, 0);
	t->in_syscall = true;
	t->syscall_before_window = false;
	t->syscall_since_ns = e->rec.ts_ns;
	t->syscall_nr = e->rec.aux;
	t->syscall_arg0 = e->rec.arg;
}

static void on_sys_exit(struct builder *b, struct thread_build *t, const struct ht_fr_event *e)
{
	if (!t->in_syscall) {
		t->syscall_before_window = true;
		t->syscall_since_ns = b->kw->t0;
		t->syscall_nr = e->rec.aux;
	}
	close_syscall(b, t, e->rec.ts_ns, true, (int64_t)e->rec.arg);
}

static void lifecycle_instant(struct builder *b, struct thread_build *t, const char *name,
			      uint64_t ts, const char *arg, int64_t value)
{
	long ev = tl_add_instant(b->tl, t->kernel_track, ts, name, HT_CAT_SCHED);

	if (arg)
		tl_event_arg_int(b->tl, ev, arg, value);
}

/* Whether record E concerns a target thread, and which: its tid, or 0. */
static uint32_t target_tid(const struct ht_fr_event *e, bool *is_prev)
{
	*is_prev = false;
	switch (e->rec.kind) {
	case HT_FR_SWITCH:
		if (e->rec.flags & HT_FRF_PREV_TARGET) {
			*is_prev = true;
			return e->rec.tid_a;
		}
		return e->rec.flags & HT_FRF_NEXT_TARGET ? e->rec.tid_b : 0;
	default:
		return e->rec.flags & HT_FRF_TARGET ? e->rec.tid_a : 0;
	}
}

static int walk_event(struct builder *b, const struct ht_fr_event *e)
{
	struct thread_build *t;
	bool is_prev;
	uint32_t tid = target_tid(e, &is_prev);

	if (!tid)
		return 0;
	t = thread_of(b, tid, 0);
	if (!t)
		return ht_fail("out of memory building the timeline");
	switch (e->rec.kind) {
	case HT_FR_SWITCH:
		/* After its exit record, a thread's last switch-out is no sleep. */
		if (is_prev && t->state != TS_EXITED)
			on_switch_out(t, e);
		if (e->rec.flags & HT_FRF_NEXT_TARGET) {
			/* May move the array too; t is not used after this. */
			t = thread_of(b, e->rec.tid_b, 0);
			if (!t)
				return ht_fail("out of memory building the timeline");
			on_switch_in(b, t, e);
		}
		break;
	case HT_FR_WAKEUP:
	case HT_FR_WAKEUP_NEW:
		if (t->early_wakeup == b->cursor)
			t->early_wakeup = NO_EVENT;
		else
			on_enqueue(b, t, e);
		break;
	case HT_FR_MIGRATE:
		/* Where a wait moves is the culprits' to follow (close_runnable). */
			break;
	case HT_FR_SYS_ENTER:
		on_sys_enter(b, t, e);
		break;
	case HT_FR_SYS_EXIT:
		on_sys_exit(b, t, e);
		break;
	case HT_FR_FORK:
		/* Adding the child may move the array: look the parent up again after. */
		if (!thread_of(b, e->rec.tid_b, (uint32_t)e->rec.arg) || !(t = find_thread(b, tid)))
			return ht_fail("out of memory building the timeline");
		lifecycle_instant(b, t, "thread created", e->rec.ts_ns, HT_ARG_TID, e->rec.tid_b);
		break;
	case HT_FR_EXEC:
		lifecycle_instant(b, t, "exec", e->rec.ts_ns, NULL, 0);
		break;
	case HT_FR_EXIT:
		if (t->in_syscall)
			close_syscall(b, t, e->rec.ts_ns, false, 0);
		lifecycle_instant(b, t, "exit", e->rec.ts_ns, "code", (int64_t)e->rec.arg);
		t->state = TS_EXITED;
		break;
	}
	return 0;
}

/* At the window's end, what is still open is cut there. */
static void close_open_states(struct builder *b)
{
	for (size_t i = 0; i < b->nthreads; i++) {
		struct thread_build *t = &b->threads[i];

		if (t->state == TS_SLEEPING)
			close_sleep(b, t, b->kw->t1);
		else if (t->state == TS_RUNNABLE)
			close_runnable(b, t, b->kw->t1);
		if (t->in_syscall)
			close_syscall(b, t, b->kw->t1, false, 0);
	}
}

static void add_breach(struct builder *b)
{
	const struct ht_breach *br = b->kw->breach;
	char comm[HT_COMM_LEN + 1], kinds[64];
	uint32_t kind_bits;
	long events[2];

	if (!br)
		return;
	kind_bits = ht_breach_kinds_of(br->kinds, br->kind);
	ht_breach_kinds_name(kind_bits, kinds, sizeof(kinds));
	snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, br->comm);
	events[0] = add_slice(b, b->hybtrace_track, br->start_ns, br->end_ns, HT_EV_BREACH,
			      HT_CAT_BREACH);
	events[1] = tl_add_instant(b->tl, b->hybtrace_track, br->end_ns, HT_EV_BREACH,
				   HT_CAT_BREACH);
	for (int i = 0; i < 2; i++) {
		tl_event_arg_str(b->tl, events[i], HT_ARG_KIND, ht_breach_kind_name(br->kind));
		tl_event_arg_uint(b->tl, events[i], HT_ARG_DURATION_NS, br->end_ns - br->start_ns);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_THRESHOLD_NS, b->kw->threshold_ns);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_TID, br->tid);
		tl_event_arg_str(b->tl, events[i], HT_ARG_COMM, comm);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_CPU, br->cpu);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_WAIT_FOR_WORK,
				  ht_breach_waits_for_work(br));
		tl_event_arg_str(b->tl, events[i], HT_ARG_KINDS, kinds);
		if (br->ns_tid) {
			tl_event_arg_uint(b->tl, events[i], HT_ARG_NS_PID, br->ns_tgid);
			tl_event_arg_uint(b->tl, events[i], HT_ARG_NS_TID, br->ns_tid);
		}
		/* One wait of two kinds: the off-CPU interval in its syscall, its threshold. */
		if (br->kind == HT_BREACH_OFF_CPU || !(kind_bits & HT_KIND_BIT(HT_BREACH_OFF_CPU)))
			continue;
		tl_event_arg_uint(b->tl, events[i], HT_ARG_OFF_CPU_START_NS, br->off_cpu_start_ns);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_OFF_CPU_NS,
				  br->off_cpu_end_ns - br->off_cpu_start_ns);
		tl_event_arg_uint(b->tl, events[i], HT_ARG_OFF_CPU_THRESHOLD_NS,
				  br->off_cpu_threshold_ns);
	}
	attach_breach_stack(b, events[1]);
}

static void add_window(struct builder *b)
{
	const struct ht_fr_window *w = b->kw->w;
	long ev = add_slice(b, b->hybtrace_track, b->kw->t0, b->kw->t1, HT_EV_WINDOW, HT_CAT_WINDOW);

	tl_event_arg_uint(b->tl, ev, HT_ARG_START_NS, b->kw->t0);
	tl_event_arg_uint(b->tl, ev, HT_ARG_END_NS, b->kw->t1);
	if (w->clipped && w->covered_from_ns > b->kw->t0)
		add_slice(b, b->hybtrace_track, b->kw->t0,
			  w->covered_from_ns < b->kw->t1 ? w->covered_from_ns : b->kw->t1,
			  HT_EV_CLIPPED, HT_CAT_WINDOW);
}

/*
 * The dump's process first, with the track of its name: the breach's, else
 * the one target named. Every other process's track comes with its first
 * thread, so only processes with an event in the window have one.
 */
static int add_base_tracks(struct builder *b)
{
	const struct ht_breach *br = b->kw->breach;
	int lead = br && br->tgid ? (int)br->tgid : b->kw->tgid;
	struct tl_track_desc process = {
		.kind = TL_TRACK_PROCESS,
		.name = b->kw->target_comm,
		.pid = lead,
	};
	/* The writer keeps its metadata on the same track. */
	struct tl_track_desc hybtrace = {
		.kind = TL_TRACK_GLOBAL,
		.uuid = TL_HYBTRACE_UUID,
		.name = HT_TRACK_HYBTRACE,
	};
	int lead_track = 0;

	if (lead > 0)
		lead_track = lead == b->kw->tgid && b->kw->target_comm
				     ? tl_add_track(b->tl, &process)
				     : ht_timeline_process_track(b->tl, b->kw->comms, lead);
	b->hybtrace_track = tl_add_track(b->tl, &hybtrace);
	if (lead_track < 0 || b->hybtrace_track < 0)
		return ht_fail("cannot add tracks: %s", tl_strerror(b->tl));
	return 0;
}

int ht_kernel_timeline_build(struct timeline *tl, const struct ht_kernel_window *kw)
{
	struct builder b = { .tl = tl, .kw = kw };
	int rc = -1;

	if (add_base_tracks(&b))
		goto out;
	/* The breached thread first, so it leads the process's threads. */
	if (kw->breach && !thread_of(&b, kw->breach->tid, kw->breach->tgid))
		goto out;
	for (b.cursor = 0; b.cursor < kw->w->count; b.cursor++)
		if (walk_event(&b, &kw->w->events[b.cursor]))
			goto out;
	close_open_states(&b);
	add_breach(&b);
	add_window(&b);
	if (tl_error(tl)) {
		ht_fail("cannot build the timeline: %s", tl_strerror(tl));
		goto out;
	}
	rc = 0;
out:
	free(b.threads);
	free(b.slots);
	return rc;
}

int ht_kernel_stack_attach(struct timeline *tl, long ev, const uint64_t *addrs, int depth,
			   const struct ht_ksyms *ksyms)
{
	struct tl_frame_desc frames[HT_MAX_KSTACK_DEPTH];
	char names[HT_MAX_KSTACK_DEPTH][128];

	if (depth > HT_MAX_KSTACK_DEPTH)
		depth = HT_MAX_KSTACK_DEPTH;
	for (int i = 0; i < depth; i++) {
		/* BPF gives the leaf first; the model wants the root first. */
		const struct tl_frame_desc f = {
			.function = ht_ksyms_format(ksyms, addrs[depth - 1 - i], names[i],
						    sizeof(names[i])),
			.module = "[kernel]",
			.address = addrs[depth - 1 - i],
		};

		frames[i] = f;
	}
	return tl_event_callstack(tl, ev, frames, (size_t)depth);
}
