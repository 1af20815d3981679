// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What only hybtrace knows of the kernel's side of the window, as
 * TrackEvent: each target thread's syscalls as slices on its kernel track
 * (bound to the thread: Perfetto shows it under the thread's own), its
 * births, execs and exits as instants on its own track, and the breach as a
 * slice on its thread's kernel track and an instant on the hybtrace track,
 * with its threshold, what ran instead, its waker, the syscall and the
 * kernel stack it waited on. Who ran where, every wait in a run queue and
 * every sleep with its waker are the native scheduling data's
 * (sched_ftrace.c): Perfetto's thread states, which no slice here imitates.
 * Syscalls still open at the window's edges are cut there and marked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/breach_format.h"
#include "kernel/chain_format.h"
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

struct thread_build {
	uint32_t tid;
	int thread_track;
	int kernel_track; /* made with its first syscall or the breach; -1 until then */
	/* The syscall it is in. */
	bool in_syscall, syscall_before_window;
	uint64_t syscall_since_ns, syscall_arg0;
	int syscall_nr;
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
};

static const char *comm_of(struct builder *b, uint32_t pid, unsigned int cpu, char *buf, size_t len)
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
	struct tl_track_desc desc = {.kind = TL_TRACK_PROCESS, .pid = tgid};
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

/* Thread TID's state, made with its track (under its process's, HINT as process_of() says). */
static struct thread_build *thread_of(struct builder *b, uint32_t tid, uint32_t hint)
{
	struct thread_build *t = find_thread(b, tid);
	char comm[HT_COMM_LEN + 8];
	struct tl_track_desc desc = {0};
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
	t->kernel_track = -1;
	b->slots[slot_of(b, tid)] = (uint32_t)++b->nthreads;
	comm_of(b, tid, 0, comm, sizeof(comm));
	desc.kind = TL_TRACK_THREAD;
	desc.parent_uuid = tl_track(b->tl, (size_t)process)->uuid;
	desc.name = comm;
	desc.pid = tgid;
	desc.tid = (int32_t)tid;
	t->thread_track = tl_add_track(b->tl, &desc);
	return t->thread_track < 0 ? NULL : t;
}

int ht_timeline_kernel_track(struct timeline *tl, size_t thread)
{
	const struct tl_track *t = tl_track(tl, thread);
	char name[HT_COMM_LEN + 32];
	struct tl_track_desc desc = {
		.kind = TL_TRACK_THREAD_KERNEL,
		.parent_uuid = t->uuid,
		.pid = t->pid,
		.tid = t->tid,
		.name = name,
	};

	snprintf(name, sizeof(name), "%s" HT_TRACK_KERNEL_SUFFIX, tl_str_get(tl, t->name));
	return tl_add_track(tl, &desc);
}

/* T's kernel track, made on first use. -1: no memory. */
static int kernel_track_of(struct builder *b, struct thread_build *t)
{
	if (t->kernel_track < 0)
		t->kernel_track = ht_timeline_kernel_track(b->tl, (size_t)t->thread_track);
	return t->kernel_track;
}

static long add_slice(struct builder *b, int track, uint64_t start, uint64_t end, const char *name,
		      const char *cat)
{
	return tl_add_slice(b->tl, track, start, end > start ? end - start : 0, name, cat);
}

static void attach_breach_stack(struct builder *b, long ev)
{
	const struct ht_breach *br = b->kw->breach;
	int depth = br->kstack_bytes > 0 ? br->kstack_bytes / (int)sizeof(uint64_t) : 0;

	if (depth)
		ht_kernel_stack_attach(b->tl, ev, (const uint64_t *)br->kstack, depth,
				       b->kw->ksyms);
}

static void close_syscall(struct builder *b, struct thread_build *t, uint64_t end, bool exited,
			  int64_t ret)
{
	const char *name = ht_syscall_name(t->syscall_nr);
	int track = kernel_track_of(b, t);
	char fallback[32];
	long ev;

	t->in_syscall = false;
	if (track < 0)
		return;
	if (!name) {
		snprintf(fallback, sizeof(fallback), "syscall %d", t->syscall_nr);
		name = fallback;
	}
	ev = add_slice(b, track, t->syscall_since_ns, end, name, HT_CAT_SYSCALL);
	tl_event_arg_int(b->tl, ev, HT_ARG_SYSCALL_NR, t->syscall_nr);
	if (exited)
		tl_event_arg_int(b->tl, ev, HT_ARG_SYSCALL_RET, ret);
	if (!t->syscall_before_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_SYSCALL_ARG0, t->syscall_arg0);
	else
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
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
	long ev = tl_add_instant(b->tl, t->thread_track, ts, name, HT_CAT_SCHED);

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

/* Every target thread with a record in the window gets its track, so Perfetto names it. */
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
		if (is_prev && (e->rec.flags & HT_FRF_NEXT_TARGET) &&
		    !thread_of(b, e->rec.tid_b, 0))
			return ht_fail("out of memory building the timeline");
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
		break;
	default:
		/* Wakeups and migrations: the native scheduling data's. */
		break;
	}
	return 0;
}

/* At the window's end, a syscall still open is cut there. */
static void close_open_syscalls(struct builder *b)
{
	for (size_t i = 0; i < b->nthreads; i++)
		if (b->threads[i].in_syscall)
			close_syscall(b, &b->threads[i], b->kw->t1, false, 0);
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
	tl_event_arg_uint(b->tl, ev, HT_ARG_RUNNABLE_NS, c->runnable_ns);
	if (c->other_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_OTHER_NS, c->other_ns);
	if (c->unknown_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_UNKNOWN_NS, c->unknown_ns);
	if (c->idle_ns)
		tl_event_arg_uint(b->tl, ev, HT_ARG_IDLE_NS, c->idle_ns);
}

/* Who woke the breached thread, as the monitor saw it: the native waking cannot name a softirq. */
static void add_waker_args(struct builder *b, long ev, const struct ht_breach *br)
{
	char comm[HT_COMM_LEN + 1];

	if (br->wake_source == HT_WAKE_NONE)
		return;
	tl_event_arg_str(b->tl, ev, HT_ARG_WAKE_SOURCE, ht_wake_source_name(br->wake_source));
	if (br->wake_source == HT_WAKE_SOFTIRQ)
		tl_event_arg_str(b->tl, ev, HT_ARG_SOFTIRQ, ht_softirq_name(br->softirq_vec));
	/* A softirq's waker is the task it ran in, when it ran in one's context. */
	if (br->waker_tid &&
	    (br->wake_source == HT_WAKE_TASK || br->wake_source == HT_WAKE_SOFTIRQ)) {
		snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, br->waker_comm);
		tl_event_arg_uint(b->tl, ev, HT_ARG_WAKER_TID, br->waker_tid);
		tl_event_arg_str(b->tl, ev, HT_ARG_WAKER_COMM, comm);
	}
}

/* What the breach's two events say: one set of arguments, written on each. */
static void add_breach_args(struct builder *b, long ev, const struct ht_culprits *culprits)
{
	const struct ht_breach *br = b->kw->breach;
	uint32_t kind_bits = ht_breach_kinds_of(br->kinds, br->kind);
	char comm[HT_COMM_LEN + 1], kinds[64], state[4];

	ht_breach_kinds_name(kind_bits, kinds, sizeof(kinds));
	snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, br->comm);
	tl_event_arg_str(b->tl, ev, HT_ARG_KIND, ht_breach_kind_name(br->kind));
	tl_event_arg_uint(b->tl, ev, HT_ARG_DURATION_NS, br->end_ns - br->start_ns);
	tl_event_arg_uint(b->tl, ev, HT_ARG_THRESHOLD_NS, b->kw->threshold_ns);
	tl_event_arg_uint(b->tl, ev, HT_ARG_TID, br->tid);
	tl_event_arg_str(b->tl, ev, HT_ARG_COMM, comm);
	tl_event_arg_uint(b->tl, ev, HT_ARG_CPU, br->cpu);
	tl_event_arg_uint(b->tl, ev, HT_ARG_WAIT_FOR_WORK, ht_breach_waits_for_work(br));
	tl_event_arg_str(b->tl, ev, HT_ARG_KINDS, kinds);
	if (ht_breach_not_traced(br))
		tl_event_arg_str(b->tl, ev, HT_ARG_NOT_TRACED, ht_breach_not_traced(br));
	if (br->ns_tid) {
		tl_event_arg_uint(b->tl, ev, HT_ARG_NS_PID, br->ns_tgid);
		tl_event_arg_uint(b->tl, ev, HT_ARG_NS_TID, br->ns_tid);
	}
	if (kind_bits & HT_KIND_BIT(HT_BREACH_OFF_CPU)) {
		snprintf(state, sizeof(state), "%c", ht_task_state_letter(br->state));
		tl_event_arg_str(b->tl, ev, HT_ARG_STATE, state);
	}
	if (br->syscall_nr >= 0)
		tl_event_arg_str(b->tl, ev, HT_ARG_SYSCALL,
				 ht_syscall_name(br->syscall_nr) ?: "unknown");
	add_waker_args(b, ev, br);
	if (culprits)
		add_culprit_args(b, ev, culprits);
	/* One wait of two kinds: the off-CPU interval in its syscall, its threshold. */
	if (br->kind == HT_BREACH_OFF_CPU || !(kind_bits & HT_KIND_BIT(HT_BREACH_OFF_CPU)))
		return;
	tl_event_arg_uint(b->tl, ev, HT_ARG_OFF_CPU_START_NS, br->off_cpu_start_ns);
	tl_event_arg_uint(b->tl, ev, HT_ARG_OFF_CPU_NS, br->off_cpu_end_ns - br->off_cpu_start_ns);
	tl_event_arg_uint(b->tl, ev, HT_ARG_OFF_CPU_THRESHOLD_NS, br->off_cpu_threshold_ns);
}

static void add_task_args(struct builder *b, long ev, const char *tid_arg, const char *comm_arg,
			  uint32_t tid, const char *comm)
{
	tl_event_arg_uint(b->tl, ev, tid_arg, tid);
	tl_event_arg_str(b->tl, ev, comm_arg, comm);
}

/*
 * Stretch I of the wait chain: a slice named by its task and what it did,
 * its arguments spelled as the report's and the JSON line's are.
 */
static void add_stretch(struct builder *b, int track, size_t i)
{
	char names[3][HT_CHAIN_NAME_LEN], state[16], name[HT_CHAIN_NAME_LEN + 16];
	struct ht_chain_line l;
	long ev;

	ht_chain_line_of(b->kw->chain, i, ht_comm_name, b->kw->comms, names, state, sizeof(state),
			 &l);
	snprintf(name, sizeof(name), "%s %s", l.comm, l.stretch);
	ev = add_slice(b, track, l.start_ns, l.end_ns, name, HT_CAT_CHAIN);
	tl_event_arg_uint(b->tl, ev, HT_ARG_DEPTH, l.depth);
	add_task_args(b, ev, HT_ARG_TID, HT_ARG_COMM, l.tid, l.comm);
	tl_event_arg_str(b->tl, ev, HT_ARG_STRETCH, l.stretch);
	if (l.cpu >= 0)
		tl_event_arg_uint(b->tl, ev, HT_ARG_CPU, (uint64_t)l.cpu);
	if (l.exited)
		tl_event_arg_uint(b->tl, ev, HT_ARG_EXITED, 1);
	if (l.before_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
	if (l.behind) {
		add_task_args(b, ev, HT_ARG_BEHIND_TID, HT_ARG_BEHIND_COMM, l.behind,
			      l.behind_comm);
		tl_event_arg_uint(b->tl, ev, HT_ARG_BEHIND_NS, l.behind_ns);
	}
	if (l.state)
		tl_event_arg_str(b->tl, ev, HT_ARG_STATE, l.state);
	if (l.syscall)
		tl_event_arg_str(b->tl, ev, HT_ARG_SYSCALL, l.syscall);
	if (l.woken_by)
		tl_event_arg_str(b->tl, ev, HT_ARG_WAKE_SOURCE, l.woken_by);
	if (l.waker)
		add_task_args(b, ev, HT_ARG_WAKER_TID, HT_ARG_WAKER_COMM, l.waker, l.waker_comm);
	if (l.stop)
		tl_event_arg_str(b->tl, ev, HT_ARG_CHAIN_STOP, l.stop);
}

/* The chain's stretches, under the breach's slice on TRACK: parents first, they nest. */
static void add_chain(struct builder *b, int track)
{
	const struct ht_wait_chain *c = b->kw->chain;

	for (size_t i = 0; c && i < c->count; i++)
		add_stretch(b, track, i);
}

static void add_chain_args(struct builder *b, long ev)
{
	if (!b->kw->chain_depth)
		return;
	tl_event_arg_uint(b->tl, ev, HT_ARG_CHAIN_DEPTH, b->kw->chain_depth);
	if (b->kw->chain && b->kw->chain->cut_by_window)
		tl_event_arg_uint(b->tl, ev, HT_ARG_CHAIN_CUT, 1);
}

/*
 * The breach: a slice on its thread's kernel track, where its syscalls
 * are (a wait never straddles a syscall's edge, so it nests there; cut at
 * the window's start as they are), and an instant at its end on the
 * hybtrace track, where every dump's breach is found.
 */
static void add_breach(struct builder *b)
{
	const struct ht_breach *br = b->kw->breach;
	struct ht_culprits culprits, *have = NULL;
	struct thread_build *t;
	uint64_t from, start;
	bool queued;
	int track;
	long ev;

	if (!br)
		return;
	/* As the live line computes them: one breach, the same culprits. */
	if (ht_breach_culprit_interval(br, &from, &queued)) {
		ht_culprits_compute(b->kw->w, b->kw->idx, br->tid, from, br->end_ns, queued,
				    br->wake_cpu, &culprits);
		have = &culprits;
	}
	t = find_thread(b, br->tid);
	track = t ? kernel_track_of(b, t) : -1;
	if (track >= 0) {
		start = br->start_ns < b->kw->t0 ? b->kw->t0 : br->start_ns;
		ev = add_slice(b, track, start, br->end_ns, HT_EV_BREACH, HT_CAT_BREACH);
		add_breach_args(b, ev, have);
		add_chain_args(b, ev);
		if (start != br->start_ns)
			tl_event_arg_uint(b->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
		attach_breach_stack(b, ev);
		add_chain(b, track);
	}
	ev = tl_add_instant(b->tl, b->hybtrace_track, br->end_ns, HT_EV_BREACH, HT_CAT_BREACH);
	add_breach_args(b, ev, have);
	add_chain_args(b, ev);
	attach_breach_stack(b, ev);
}

static void add_window(struct builder *b)
{
	const struct ht_fr_window *w = b->kw->w;
	long ev =
		add_slice(b, b->hybtrace_track, b->kw->t0, b->kw->t1, HT_EV_WINDOW, HT_CAT_WINDOW);

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
	struct builder b = {.tl = tl, .kw = kw};
	int rc = -1;

	if (add_base_tracks(&b))
		goto out;
	/* The breached thread first, so it leads the process's threads. */
	if (kw->breach && !thread_of(&b, kw->breach->tid, kw->breach->tgid))
		goto out;
	for (size_t i = 0; i < kw->w->count; i++)
		if (walk_event(&b, &kw->w->events[i]))
			goto out;
	close_open_syscalls(&b);
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
