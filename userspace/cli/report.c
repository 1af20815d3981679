// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A dump read back and reviewed: the breach headline, the culprits with
 * their share of the wait, why the thread was off the CPU and the kernel
 * stack it waited on, the chain of wakeups that led to it, losses and
 * clipping, and the window as one time-ordered timeline. The names it looks
 * for are those of dump_schema.h.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/breach_kinds.h"
#include "kernel/block_stacks.h"
#include "kernel/breach_format.h"
#include "kernel/sched_read.h"
#include "dump/dump_policy.h"
#include "trace/dump_schema.h"
#include "hybtrace/records.h"
#include "base/json.h"
#include "base/log.h"
#include "base/output.h"
#include "trace/perfetto_read.h"
#include "cli/report.h"
#include "cli/report_model.h"
#include "kernel/chain_format.h"
#include "base/syscalls.h"
#include "trace/timeline.h"
#include "base/units.h"

#define DEFAULT_TIMELINE_LINES 200
#define MAX_CHAIN	       8
#define HT_MAX_REPORT_CULPRITS 16

struct report_options {
	bool json;
	bool all;
	bool by_process; /* a directory's dumps grouped by the process each is of */
};

/* What a dump says about its breach, found once. */
struct dump_view {
	const struct timeline *tl;
	long stack_before, stack_after; /* the breached thread's user stacks around it */
	long block_stack;		/* --block-stacks: its user stack where it blocked, or -1 */
	long trigger;			/* a code trigger's hit on the hybtrace track, or -1 */
	const char *path;
	const char *kind;
	bool has_breach;
	bool wait_for_work; /* the breach is a thread parked waiting for new work */
	const char *not_traced; /* what the kernel did not trace of it (HT_ARG_NOT_TRACED); NULL */
	uint32_t tid;
	const char *comm;
	uint64_t start_ns, end_ns, threshold_ns;
	/* A syscall breach that slept past the off-CPU threshold too (0: not): that interval. */
	uint64_t off_cpu_start_ns, off_cpu_ns, off_cpu_threshold_ns;
	const char *kinds; /* "off-cpu+syscall"; the kind alone in older dumps */
	uint64_t window_start_ns, window_end_ns;
	long rq_slice, off_slice, syscall_slice, breach_instant;
	struct pftr_stats stats;      /* what reading the file found */
	struct ht_native_sched sched; /* its native scheduling data, as Perfetto reads it */
};

static bool arg_u64(const struct timeline *tl, const struct tl_event *e, const char *name,
		    uint64_t *v)
{
	const struct tl_arg *a = tl_event_find_arg(tl, e, name);

	if (!a)
		return false;
	switch (a->kind) {
	case TL_ARG_UINT:
		*v = a->u;
		return true;
	case TL_ARG_INT:
		*v = (uint64_t)a->i;
		return true;
	default:
		return false;
	}
}

static const char *arg_str(const struct timeline *tl, const struct tl_event *e, const char *name)
{
	const struct tl_arg *a = tl_event_find_arg(tl, e, name);

	return a && a->kind == TL_ARG_STR ? tl_str_get(tl, a->s) : NULL;
}

/* The state an off-CPU slice slept in; dumps before "unknown" wrote "?". */
static const char *sleep_state(const struct timeline *tl, const struct tl_event *e)
{
	const char *state = arg_str(tl, e, HT_ARG_STATE);

	return state && strcmp(state, "?") ? state : HT_STATE_UNKNOWN;
}

static const char *event_name(const struct timeline *tl, const struct tl_event *e)
{
	return tl_str_get(tl, e->name);
}

static const struct tl_track *track_of(const struct timeline *tl, const struct tl_event *e)
{
	return tl_track(tl, e->track);
}

static uint64_t meta_u64(const struct timeline *tl, const char *key, uint64_t dflt)
{
	const char *v = tl_meta_get(tl, key);

	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static const char *meta_str(const struct timeline *tl, const char *key)
{
	const char *v = tl_meta_get(tl, key);

	return v ? v : "";
}

/* The kernel-track slice of the breached thread named NAME that starts or ends where asked. */
static long find_kernel_slice(const struct dump_view *v, const char *name, const char *category,
			      uint64_t start, uint64_t end)
{
	const struct timeline *tl = v->tl;

	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t = track_of(tl, e);

		if (e->kind != TL_EVENT_SLICE || t->kind != TL_TRACK_THREAD_KERNEL ||
		    (uint32_t)t->tid != v->tid)
			continue;
		if (name && strcmp(event_name(tl, e), name))
			continue;
		if (category && strcmp(tl_str_get(tl, e->category), category))
			continue;
		if ((start && e->ts_ns == start) || (end && e->ts_ns + e->dur_ns == end))
			return (long)i;
	}
	return -1;
}

/* The breached thread's instant called NAME on its own track. */
static long find_thread_instant(const struct dump_view *v, const char *name)
{
	const struct timeline *tl = v->tl;

	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t = track_of(tl, e);

		if (e->kind == TL_EVENT_INSTANT && t->kind == TL_TRACK_THREAD &&
		    (uint32_t)t->tid == v->tid && !strcmp(event_name(tl, e), name))
			return (long)i;
	}
	return -1;
}

/* A trigger dump: the hit is the moment the report is built around. */
static void view_trigger(struct dump_view *v)
{
	const struct timeline *tl = v->tl;
	uint64_t tid = 0;

	v->start_ns = v->end_ns = v->window_end_ns;
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (e->kind != TL_EVENT_INSTANT || strcmp(event_name(tl, e), HT_EV_TRIGGER) ||
		    track_of(tl, e)->uuid != TL_HYBTRACE_UUID)
			continue;
		v->trigger = (long)i;
		v->start_ns = v->end_ns = e->ts_ns;
		arg_u64(tl, e, HT_ARG_TID, &tid);
		v->tid = (uint32_t)tid;
		break;
	}
	if (v->trigger < 0)
		return;
	v->stack_before = find_thread_instant(v, HT_EV_STACK_BEFORE);
	v->stack_after = find_thread_instant(v, HT_EV_STACK_AFTER);
}

static void view_init(struct dump_view *v, const struct timeline *tl, const char *path,
		      const struct pftr_stats *stats)
{
	memset(v, 0, sizeof(*v));
	v->stats = *stats;
	v->tl = tl;
	v->path = path;
	v->rq_slice = v->off_slice = v->syscall_slice = v->breach_instant = -1;
	v->stack_before = v->stack_after = v->block_stack = -1;
	v->trigger = -1;
	v->kind = meta_str(tl, HT_META_KIND);
	if (!*v->kind)
		v->kind = "unknown";
	v->window_start_ns = meta_u64(tl, HT_META_WINDOW_START, 0);
	v->window_end_ns = meta_u64(tl, HT_META_WINDOW_END, 0);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (e->kind != TL_EVENT_INSTANT || strcmp(event_name(tl, e), HT_EV_BREACH) ||
		    track_of(tl, e)->uuid != TL_HYBTRACE_UUID)
			continue;
		v->breach_instant = (long)i;
		v->has_breach = true;
		v->end_ns = e->ts_ns;
		arg_u64(tl, e, HT_ARG_THRESHOLD_NS, &v->threshold_ns);
		uint64_t dur = 0, tid = 0, idle = 0;

		arg_u64(tl, e, HT_ARG_DURATION_NS, &dur);
		arg_u64(tl, e, HT_ARG_TID, &tid);
		/* Dumps before it was written have no waits for work. */
		arg_u64(tl, e, HT_ARG_WAIT_FOR_WORK, &idle);
		v->wait_for_work = idle != 0;
		v->start_ns = e->ts_ns - dur;
		v->tid = (uint32_t)tid;
		v->comm = arg_str(tl, e, HT_ARG_COMM);
		v->kinds = arg_str(tl, e, HT_ARG_KINDS);
		v->not_traced = arg_str(tl, e, HT_ARG_NOT_TRACED);
		arg_u64(tl, e, HT_ARG_OFF_CPU_START_NS, &v->off_cpu_start_ns);
		arg_u64(tl, e, HT_ARG_OFF_CPU_NS, &v->off_cpu_ns);
		arg_u64(tl, e, HT_ARG_OFF_CPU_THRESHOLD_NS, &v->off_cpu_threshold_ns);
		break;
	}
	if (!v->comm)
		v->comm = "?";
	if (!v->kinds)
		v->kinds = v->kind;
	if (!v->has_breach) {
		view_trigger(v);
		return;
	}
	v->stack_before = find_thread_instant(v, HT_EV_STACK_BEFORE);
	v->stack_after = find_thread_instant(v, HT_EV_STACK_AFTER);
	v->block_stack = find_thread_instant(v, HT_EV_BLOCK_STACK);
}

/* The breached thread's wait slices, once the model has them (report_model.h). */
static void view_find_waits(struct dump_view *v)
{
	if (!v->has_breach)
		return;
	v->rq_slice = find_kernel_slice(v, HT_EV_RUNQUEUE, NULL, 0, v->end_ns);
	v->off_slice = find_kernel_slice(v, HT_EV_OFF_CPU, NULL,
					 v->off_cpu_ns ? v->off_cpu_start_ns : v->start_ns, 0);
	v->syscall_slice = find_kernel_slice(v, NULL, HT_CAT_SYSCALL, 0, v->end_ns);
}

/* Kernel stack of the event, root first, as "func+0xoff" strings. */
static size_t stack_of(const struct timeline *tl, long ev, const char **out, size_t max)
{
	const struct tl_event *e;
	size_t depth, n = 0;

	if (ev < 0)
		return 0;
	e = tl_event(tl, (size_t)ev);
	if (!e->callstack)
		return 0;
	depth = tl_callstack_depth(tl, e->callstack);
	for (size_t i = 0; i < depth && n < max; i++)
		out[n++] = tl_str_get(tl, tl_callstack_frame(tl, e->callstack, i)->function);
	return n;
}

/* The breach kind of the dump, by its name; NULL for a wait of two kinds or no breach. */
static const struct ht_breach_kind_info *kind_of(const struct dump_view *v)
{
	return ht_breach_kind(ht_breach_kind_by_name(v->kind));
}

/* The slice found for what a kind measures (base/breach_kinds.h), or -1. */
static long interval_slice(const struct dump_view *v, const struct ht_breach_kind_info *ki)
{
	if (!ki)
		return -1;
	switch (ki->interval) {
	case HT_INTERVAL_RUNQUEUE:
		return v->rq_slice;
	case HT_INTERVAL_OFF_CPU:
		return v->off_slice;
	case HT_INTERVAL_SYSCALL:
		return v->syscall_slice;
	}
	return -1;
}

static bool has_callstack(const struct dump_view *v, long ev)
{
	return ev >= 0 && tl_event(v->tl, (size_t)ev)->callstack;
}

/* The event whose kernel stack tells why the thread waited. */
static long stack_event(const struct dump_view *v)
{
	const struct ht_breach_kind_info *ki = kind_of(v);
	long ev = interval_slice(v, ki);

	/* The breach carries it: dumps since its slice moved to the thread's kernel track. */
	if (has_callstack(v, v->breach_instant))
		return v->breach_instant;
	/* One wait of both kinds: the sleep inside the syscall, where its stack was taken. */
	if (v->off_cpu_ns && v->off_slice >= 0)
		return v->off_slice;
	/* The last run-queue slice found is the breach's only when it has the stack. */
	if (ev >= 0 && (ki->interval != HT_INTERVAL_RUNQUEUE || has_callstack(v, ev)))
		return ev;
	if (has_callstack(v, v->rq_slice))
		return v->rq_slice;
	return v->breach_instant;
}

/* ------------------------------------------------------------------ */
/* The wakeup chain: who woke the thread, who woke that one, ...        */

struct chain_link {
	uint32_t tid;
	const char *comm;
	const char *source;  /* how this one was woken: task, irq, timer, preempted ... */
	const char *softirq; /* source softirq: which ("net_rx") */
	uint32_t waker_tid;  /* a task; a softirq's, the task it ran in */
	const char *waker_comm;
	uint64_t at_ns;
};

/* The last run-queue wait of TID that ended after FROM, at or before T. */
static long last_wait_of(const struct timeline *tl, uint32_t tid, uint64_t from, uint64_t t)
{
	long best = -1;
	uint64_t best_end = 0;

	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *tr = track_of(tl, e);
		uint64_t end = e->ts_ns + e->dur_ns;

		if (tr->kind != TL_TRACK_THREAD_KERNEL || (uint32_t)tr->tid != tid ||
		    strcmp(event_name(tl, e), HT_EV_RUNQUEUE) || end > t || end <= from)
			continue;
		if (best < 0 || end >= best_end) {
			best = (long)i;
			best_end = end;
		}
	}
	return best;
}

static size_t wakeup_chain(const struct dump_view *v, struct chain_link *chain)
{
	const struct timeline *tl = v->tl;
	uint32_t tid = v->tid;
	uint64_t t = v->end_ns;
	const char *comm = v->comm;
	size_t n = 0;

	while (n < MAX_CHAIN) {
		/*
		 * The breached thread's: one that ended in the breach (where the
		 * kernel did not trace the wakeup that began its wait, none: not
		 * an older wait's).
		 */
		long w = last_wait_of(tl, tid, n ? 0 : v->start_ns, t);
		const struct tl_event *e;
		uint64_t waker = 0;

		if (w < 0)
			break;
		e = tl_event(tl, (size_t)w);
		chain[n].tid = tid;
		chain[n].comm = comm;
		chain[n].source = arg_str(tl, e, HT_ARG_WAKE_SOURCE);
		if (!chain[n].source)
			chain[n].source = arg_str(tl, e, HT_ARG_CAUSE);
		chain[n].softirq = arg_str(tl, e, HT_ARG_SOFTIRQ);
		arg_u64(tl, e, HT_ARG_WAKER_TID, &waker);
		chain[n].waker_tid = (uint32_t)waker;
		chain[n].waker_comm = arg_str(tl, e, HT_ARG_WAKER_COMM);
		chain[n].at_ns = e->ts_ns;
		n++;
		if (!waker || waker == tid)
			break;
		/* Follow the waker back: its own waits are there if it is a thread of the target.
		 */
		comm = chain[n - 1].waker_comm;
		tid = (uint32_t)waker;
		t = e->ts_ns;
	}
	return n;
}

static void print_strings_json(struct ht_json *j, const char *key, const char **v, size_t n)
{
	ht_json_array(j, key);
	for (size_t i = 0; i < n; i++)
		ht_json_str(j, NULL, v[i]);
	ht_json_close(j);
}

/* ------------------------------------------------------------------ */
/* The wait chain: the stretches the builder wrote under the breach.    */

#define MAX_CHAIN_LINES HT_CHAIN_MAX_STRETCHES

static int chain_line_order(const void *x, const void *y)
{
	const struct ht_chain_line *a = x, *b = y;

	if (a->start_ns != b->start_ns)
		return a->start_ns < b->start_ns ? -1 : 1;
	return a->depth < b->depth ? -1 : a->depth > b->depth;
}

/* One chain slice of the dump as a line: the arguments kernel_timeline.c wrote. */
static void chain_line_of(const struct timeline *tl, const struct tl_event *e,
			  struct ht_chain_line *l)
{
	uint64_t u = 0;

	memset(l, 0, sizeof(*l));
	l->start_ns = e->ts_ns;
	l->end_ns = e->ts_ns + e->dur_ns;
	if (arg_u64(tl, e, HT_ARG_DEPTH, &u))
		l->depth = (unsigned int)u;
	if (arg_u64(tl, e, HT_ARG_TID, &u))
		l->tid = (uint32_t)u;
	l->comm = arg_str(tl, e, HT_ARG_COMM);
	l->stretch = arg_str(tl, e, HT_ARG_STRETCH) ?: "unknown";
	l->cpu = arg_u64(tl, e, HT_ARG_CPU, &u) ? (int)u : -1;
	l->exited = arg_u64(tl, e, HT_ARG_EXITED, &u) && u;
	l->before_window = arg_u64(tl, e, HT_ARG_BEFORE_WINDOW, &u) && u;
	if (arg_u64(tl, e, HT_ARG_BEHIND_TID, &u)) {
		l->behind = (uint32_t)u;
		l->behind_comm = arg_str(tl, e, HT_ARG_BEHIND_COMM);
		arg_u64(tl, e, HT_ARG_BEHIND_NS, &l->behind_ns);
	}
	l->state = arg_str(tl, e, HT_ARG_STATE);
	l->syscall = arg_str(tl, e, HT_ARG_SYSCALL);
	l->woken_by = arg_str(tl, e, HT_ARG_WAKE_SOURCE);
	if (arg_u64(tl, e, HT_ARG_WAKER_TID, &u)) {
		l->waker = (uint32_t)u;
		l->waker_comm = arg_str(tl, e, HT_ARG_WAKER_COMM);
	}
	l->stop = arg_str(tl, e, HT_ARG_CHAIN_STOP);
	/* A blocked stretch without a stop was followed: its waker's stretches are under it. */
	l->leaf = !l->state || l->stop;
}

static int slice_nesting_order(const void *x, const void *y)
{
	const struct tl_event *a = *(const struct tl_event *const *)x;
	const struct tl_event *b = *(const struct tl_event *const *)y;

	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	return a->dur_ns > b->dur_ns ? -1 : a->dur_ns < b->dur_ns;
}

/*
 * A running stretch of a thread the on-CPU source sampled: the user frames
 * its slices show at the stretch's middle (nested slices are the stack),
 * root first, into L.
 */
static void sampled_user_stack(const struct timeline *tl, struct ht_chain_line *l)
{
	const struct tl_event *on[HT_CHAIN_USER_FRAMES];
	uint64_t mid = l->start_ns + (l->end_ns - l->start_ns) / 2;
	unsigned int n = 0;

	for (size_t i = 0; i < tl_event_count(tl) && n < HT_CHAIN_USER_FRAMES; i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t;

		if (e->kind != TL_EVENT_SLICE || e->ts_ns > mid || e->ts_ns + e->dur_ns <= mid)
			continue;
		t = track_of(tl, e);
		if (t->kind != TL_TRACK_THREAD || (uint32_t)t->tid != l->tid ||
		    strcmp(tl_str_get(tl, e->category), HT_CAT_USER))
			continue;
		on[n++] = e;
	}
	qsort(on, n, sizeof(on[0]), slice_nesting_order);
	for (unsigned int i = 0; i < n; i++)
		l->user_stack[i] = event_name(tl, on[i]);
	l->user_depth = n;
}

/*
 * The breach's wait chain from its slices on the breached thread's kernel
 * track, in walk order (time, then depth). Returns how many; 0 when the
 * dump has none (older dumps, --chain-depth 0, a syscall that never slept).
 */
static size_t wait_chain_of(const struct dump_view *v, struct ht_chain_line *lines, size_t max,
			    struct ht_chain_summary *sum)
{
	const struct timeline *tl = v->tl;
	uint64_t u = 0;
	size_t n = 0;

	memset(sum, 0, sizeof(*sum));
	if (!v->has_breach)
		return 0;
	for (size_t i = 0; i < tl_event_count(tl) && n < max; i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t = track_of(tl, e);

		if (e->kind != TL_EVENT_SLICE || t->kind != TL_TRACK_THREAD_KERNEL ||
		    (uint32_t)t->tid != v->tid || strcmp(tl_str_get(tl, e->category), HT_CAT_CHAIN))
			continue;
		chain_line_of(tl, e, &lines[n++]);
	}
	if (!n)
		return 0;
	qsort(lines, n, sizeof(*lines), chain_line_order);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(lines[i].stretch, "running"))
			sampled_user_stack(tl, &lines[i]);
	sum->tid = v->tid;
	sum->start_ns = lines[0].start_ns;
	for (size_t i = 0; i < n; i++)
		if (lines[i].depth == 0 && lines[i].end_ns > sum->end_ns)
			sum->end_ns = lines[i].end_ns;
	sum->truncated = n == max;
	if (v->breach_instant >= 0) {
		const struct tl_event *b = tl_event(tl, (size_t)v->breach_instant);

		if (arg_u64(tl, b, HT_ARG_CHAIN_DEPTH, &u))
			sum->max_depth = (unsigned int)u;
		sum->cut_by_window = arg_u64(tl, b, HT_ARG_CHAIN_CUT, &u) && u;
	}
	return n;
}

/* The waker's stacks as it woke the breached thread: its "woke" instant, or -1. */
static long waker_stack_event(const struct dump_view *v)
{
	const struct timeline *tl = v->tl;
	uint64_t wakee = 0;

	for (size_t i = 0; v->has_breach && i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (e->kind == TL_EVENT_INSTANT && !strcmp(event_name(tl, e), HT_EV_WOKE) &&
		    arg_u64(tl, e, HT_ARG_WAKEE_TID, &wakee) && wakee == v->tid && e->callstack)
			return (long)i;
	}
	return -1;
}

static void print_waker_stack_text(const struct dump_view *v)
{
	const char *stack[2 * HT_WAKER_STACK_DEPTH];
	long ev = waker_stack_event(v);
	size_t n = stack_of(v->tl, ev, stack, 2 * HT_WAKER_STACK_DEPTH);
	const struct tl_event *e;
	uint64_t tid = 0;

	if (!n)
		return;
	e = tl_event(v->tl, (size_t)ev);
	arg_u64(v->tl, e, HT_ARG_WAKER_TID, &tid);
	printf("\nthe waker's stack as it woke it, %s[%llu] (innermost last):\n",
	       arg_str(v->tl, e, HT_ARG_WAKER_COMM) ?: "?", (unsigned long long)tid);
	for (size_t i = 0; i < n; i++)
		printf("  %s\n", stack[i]);
}

static void print_wait_chain_text(const struct dump_view *v)
{
	struct ht_chain_line *lines = calloc(MAX_CHAIN_LINES, sizeof(*lines));
	struct ht_chain_summary sum;
	char dur[32], line[512];
	size_t n = lines ? wait_chain_of(v, lines, MAX_CHAIN_LINES, &sum) : 0;

	if (n) {
		printf("\nwait chain of the %s wait (wakers followed to depth %u%s):\n",
		       ht_format_duration(sum.end_ns - sum.start_ns, dur, sizeof(dur)),
		       sum.max_depth, sum.cut_by_window ? "; cut at the window's start" : "");
		for (size_t i = 0; i < n; i++) {
			ht_chain_text(&sum, &lines[i], line, sizeof(line));
			printf("  %s\n", line);
		}
	}
	free(lines);
	print_waker_stack_text(v);
}

static void print_wait_chain_json(struct ht_json *j, const struct dump_view *v)
{
	struct ht_chain_line *lines = calloc(MAX_CHAIN_LINES, sizeof(*lines));
	struct ht_chain_summary sum;
	size_t n = lines ? wait_chain_of(v, lines, MAX_CHAIN_LINES, &sum) : 0;

	const char *stack[2 * HT_WAKER_STACK_DEPTH];
	size_t depth = stack_of(v->tl, waker_stack_event(v), stack, 2 * HT_WAKER_STACK_DEPTH);

	/* Left out where the dump has none: a dump of an earlier version reads as it did. */
	if (n)
		ht_chain_json(j, "wait_chain", &sum, lines, n);
	free(lines);
	/* Root first, as a call stack reads (the live line's lists are innermost first). */
	if (depth)
		print_strings_json(j, "waker_stack", stack, depth);
}

/* ------------------------------------------------------------------ */
/* The timeline of the window.                                          */

/* Which CPU TID was on at T, from the CPU tracks; -1 if none says. */
static int cpu_of(const struct timeline *tl, uint32_t tid, uint64_t t)
{
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *tr = track_of(tl, e);
		uint64_t v;

		if (tr->kind != TL_TRACK_CPU || e->ts_ns > t || e->ts_ns + e->dur_ns < t)
			continue;
		if (arg_u64(tl, e, HT_ARG_TID, &v) && v == tid)
			return tr->cpu;
	}
	return -1;
}

static bool is_target_thread(const struct timeline *tl, uint32_t tid)
{
	return ht_report_thread_track(tl, tid) != NULL;
}

/* The name of target thread TID, from its track; "?" when it has none. */
static const char *thread_name(const struct timeline *tl, uint32_t tid)
{
	const struct tl_track *t = ht_report_thread_track(tl, tid);

	return t ? tl_str_get(tl, t->name) : "?";
}

/* Whether event E belongs in the report's timeline. */
static bool timeline_wants(const struct dump_view *v, const struct tl_event *e)
{
	const struct timeline *tl = v->tl;
	const struct tl_track *t = track_of(tl, e);
	uint64_t tid;

	switch (t->kind) {
	case TL_TRACK_THREAD:
	case TL_TRACK_THREAD_KERNEL:
		return true;
	case TL_TRACK_CPU:
		/* Other tasks, while the breach lasted: the ones that held the CPU. */
		if (!v->has_breach || !arg_u64(tl, e, HT_ARG_TID, &tid) ||
		    is_target_thread(tl, (uint32_t)tid))
			return false;
		return e->ts_ns < v->end_ns && e->ts_ns + e->dur_ns > v->start_ns;
	default:
		return !strcmp(event_name(tl, e), HT_EV_BREACH) ||
		       !strcmp(event_name(tl, e), HT_EV_CLIPPED);
	}
}

static void describe_runqueue(const struct timeline *tl, const struct tl_event *e, char *buf,
			      size_t len)
{
	const char *source = arg_str(tl, e, HT_ARG_WAKE_SOURCE),
		   *cause = arg_str(tl, e, HT_ARG_CAUSE);
	const char *waker = arg_str(tl, e, HT_ARG_WAKER_COMM), *culprit;
	const char *softirq = arg_str(tl, e, HT_ARG_SOFTIRQ);
	uint64_t waker_tid = 0, ns;
	char dur[32], name[64];
	size_t used;

	arg_u64(tl, e, HT_ARG_WAKER_TID, &waker_tid);
	if (source && !strcmp(source, "task"))
		used = (size_t)snprintf(buf, len, "woken by %s[%" PRIu64 "]", waker ? waker : "?",
					waker_tid);
	else if (softirq && waker_tid)
		used = (size_t)snprintf(buf, len, "woken by softirq (%s) in %s[%" PRIu64 "]",
					softirq, waker ? waker : "?", waker_tid);
	else if (softirq)
		used = (size_t)snprintf(buf, len, "woken by softirq (%s)", softirq);
	else if (source)
		used = (size_t)snprintf(buf, len, "woken by %s", source);
	else
		used = (size_t)snprintf(buf, len, "%s", cause ? cause : "waiting");
	for (unsigned int i = 0; i < 3 && used < len; i++) {
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u", i);
		culprit = arg_str(tl, e, name);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u.ns", i);
		if (!culprit || !arg_u64(tl, e, name, &ns))
			break;
		used += (size_t)snprintf(buf + used, len - used, "%s %s %s",
					 i ? "," : "; ran instead", culprit,
					 ht_format_duration(ns, dur, sizeof(dur)));
	}
}

/* One line's "what happened", from the event's name and arguments. */
static void describe(const struct timeline *tl, const struct tl_event *e, char *buf, size_t len)
{
	const char *name = event_name(tl, e), *cat = tl_str_get(tl, e->category);
	const struct tl_track *t = track_of(tl, e);
	char dur[32], detail[256] = "";
	uint64_t v = 0;
	const char *s;

	ht_format_duration(e->dur_ns, dur, sizeof(dur));
	if (t->kind == TL_TRACK_CPU) {
		snprintf(buf, len, "%s runs %s", name, dur);
		return;
	}
	if (!strcmp(name, HT_EV_RUNQUEUE)) {
		describe_runqueue(tl, e, detail, sizeof(detail));
		snprintf(buf, len, "runqueue %s: %s", dur, detail);
	} else if (!strcmp(name, HT_EV_OFF_CPU)) {
		s = arg_str(tl, e, HT_ARG_SYSCALL);
		snprintf(buf, len, "off-cpu %s state %s%s%s", dur, sleep_state(tl, e),
			 s ? " in " : "", s ? s : "");
	} else if (!strcmp(cat, HT_CAT_SYSCALL)) {
		if (arg_u64(tl, e, HT_ARG_SYSCALL_RET, &v))
			snprintf(buf, len, "%s %s = %s", name, dur,
				 ht_syscall_ret_format((int64_t)v, detail, sizeof(detail)));
		else
			snprintf(buf, len, "%s %s (unfinished)", name, dur);
	} else if (!strcmp(name, HT_EV_WAKES)) {
		arg_u64(tl, e, HT_ARG_WAKEE_TID, &v);
		snprintf(buf, len, "wakes tid %" PRIu64, v);
	} else if (!strcmp(cat, HT_CAT_USER) && e->kind == TL_EVENT_SLICE) {
		arg_u64(tl, e, HT_ARG_SAMPLES, &v);
		snprintf(buf, len, "%s %s (%" PRIu64 " samples)", name, dur, v);
	} else if (!strcmp(name, HT_EV_BREACH)) {
		arg_u64(tl, e, HT_ARG_DURATION_NS, &v);
		snprintf(buf, len, "%s %s %s", e->kind == TL_EVENT_SLICE ? "BREACH begins" : "BREACH ends",
			 arg_str(tl, e, HT_ARG_KINDS) ?: arg_str(tl, e, HT_ARG_KIND) ?: "",
			 ht_format_duration(v, dur, sizeof(dur)));
	} else if (e->kind == TL_EVENT_SLICE) {
		snprintf(buf, len, "%s %s", name, dur);
	} else {
		snprintf(buf, len, "%s", name);
	}
}

struct line {
	size_t event;
	uint64_t distance; /* from the breach, to keep the nearest when there are many */
};

static int line_by_distance(const void *a, const void *b)
{
	const struct line *x = a, *y = b;

	return x->distance < y->distance ? -1 : x->distance > y->distance;
}

static int line_by_time(const void *a, const void *b, void *ctx)
{
	const struct timeline *tl = ctx;
	const struct line *x = a, *y = b;
	const struct tl_event *ex = tl_event(tl, x->event), *ey = tl_event(tl, y->event);

	if (ex->ts_ns != ey->ts_ns)
		return ex->ts_ns < ey->ts_ns ? -1 : 1;
	/*
	 * A stack outermost first: on one track longer first, then as Perfetto
	 * nests them, in file order (where a flow's begin also comes first).
	 */
	if (ex->track == ey->track && ex->dur_ns != ey->dur_ns)
		return ex->dur_ns > ey->dur_ns ? -1 : 1;
	return x->event < y->event ? -1 : x->event > y->event;
}

static uint64_t distance(const struct dump_view *v, const struct tl_event *e)
{
	uint64_t end = e->ts_ns + e->dur_ns;

	if (end < v->start_ns)
		return v->start_ns - end;
	if (e->ts_ns > v->end_ns)
		return e->ts_ns - v->end_ns;
	return 0;
}

/* The events to show, nearest the breach when there are too many, in time order. */
static size_t pick_lines(const struct dump_view *v, const struct report_options *o,
			 struct line **out, size_t *omitted)
{
	const struct timeline *tl = v->tl;
	size_t n = 0, limit = o->all ? SIZE_MAX : DEFAULT_TIMELINE_LINES;
	struct line *lines = malloc((tl_event_count(tl) + 1) * sizeof(*lines));

	*omitted = 0;
	*out = lines;
	if (!lines)
		return 0;
	for (size_t i = 0; i < tl_event_count(tl); i++)
		if (timeline_wants(v, tl_event(tl, i)))
			lines[n++] = (struct line){i, distance(v, tl_event(tl, i))};
	if (n > limit) {
		qsort(lines, n, sizeof(*lines), line_by_distance);
		*omitted = n - limit;
		n = limit;
	}
	qsort_r(lines, n, sizeof(*lines), line_by_time, (void *)tl);
	return n;
}

/* How many processes have tracks in the dump: with several, threads are named with theirs. */
static size_t process_count(const struct timeline *tl)
{
	size_t n = 0;

	for (size_t i = 0; i < tl_track_count(tl); i++)
		n += tl_track(tl, i)->kind == TL_TRACK_PROCESS;
	return n;
}

/* The thread track of event E's thread (a kernel track's parent), or NULL. */
static const struct tl_track *thread_track_of(const struct timeline *tl, const struct tl_event *e)
{
	const struct tl_track *t = track_of(tl, e);
	long p;

	if (t->kind == TL_TRACK_THREAD)
		return t;
	/* A kernel track's name is "comm (kernel)": the thread's track has the comm. */
	if (t->kind == TL_TRACK_THREAD_KERNEL)
		return (p = tl_track_find(tl, t->parent_uuid)) >= 0 ? tl_track(tl, (size_t)p) : t;
	return NULL;
}

/* The track of thread track T's process: its parent, else the one of its pid; or NULL. */
static const struct tl_track *process_of(const struct timeline *tl, const struct tl_track *t)
{
	long p = t->parent_uuid ? tl_track_find(tl, t->parent_uuid) : -1;

	if (p >= 0 && tl_track(tl, (size_t)p)->kind == TL_TRACK_PROCESS)
		return tl_track(tl, (size_t)p);
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (tl_track(tl, i)->kind == TL_TRACK_PROCESS && tl_track(tl, i)->pid == t->pid)
			return tl_track(tl, i);
	return NULL;
}

/*
 * Who event E is of: "comm[tid]" for a thread, with its process when
 * WITH_PROCESS ("worker[7604] pid 7600 (server)"), "-" for a CPU's track.
 */
static const char *thread_label(const struct timeline *tl, const struct tl_event *e,
				bool with_process, char *buf, size_t len)
{
	const struct tl_track *t = track_of(tl, e), *thread = thread_track_of(tl, e), *process;

	if (thread) {
		int used = snprintf(buf, len, "%s[%d]", tl_str_get(tl, thread->name), t->tid);

		process = with_process ? process_of(tl, thread) : NULL;
		if (process && used >= 0 && (size_t)used < len)
			snprintf(buf + used, len - (size_t)used, " pid %d (%s)", process->pid,
				 tl_str_get(tl, process->name));
	} else if (t->kind == TL_TRACK_CPU) {
		snprintf(buf, len, "-");
	} else {
		snprintf(buf, len, "%s", tl_str_get(tl, t->name));
	}
	return buf;
}

static int line_cpu(const struct timeline *tl, const struct tl_event *e)
{
	const struct tl_track *t = track_of(tl, e);
	uint64_t cpu;

	if (t->kind == TL_TRACK_CPU)
		return t->cpu;
	if (arg_u64(tl, e, HT_ARG_CPU, &cpu))
		return (int)cpu;
	if (t->kind == TL_TRACK_THREAD || t->kind == TL_TRACK_THREAD_KERNEL)
		return cpu_of(tl, (uint32_t)t->tid, e->ts_ns);
	return -1;
}

static void print_timeline_text(const struct dump_view *v, const struct report_options *o)
{
	const struct timeline *tl = v->tl;
	char who[128], what[512], cpu[16];
	bool several = process_count(tl) > 1;
	size_t omitted, n;
	struct line *lines;

	n = pick_lines(v, o, &lines, &omitted);
	printf("\ntimeline (ms from the %s; kernel and user events):\n",
	       v->has_breach	 ? "breach's start"
	       : v->trigger >= 0 ? "trigger's hit"
				 : "window's end");
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = tl_event(tl, lines[i].event);
		int c = line_cpu(tl, e);

		snprintf(cpu, sizeof(cpu), c >= 0 ? "cpu %d" : "", c);
		describe(tl, e, what, sizeof(what));
		printf("  %+10.3f  %-6s %-22s %s\n", ((double)e->ts_ns - (double)v->start_ns) / 1e6,
		       cpu, thread_label(tl, e, several, who, sizeof(who)), what);
	}
	if (omitted)
		printf("  (%zu events further from the breach not shown; --all shows them)\n",
		       omitted);
	free(lines);
}

static void print_timeline_json(struct ht_json *j, const struct dump_view *v,
				const struct report_options *o)
{
	const struct timeline *tl = v->tl;
	const struct tl_track *thread, *process;
	char who[128], what[512];
	size_t omitted, n;
	struct line *lines;

	n = pick_lines(v, o, &lines, &omitted);
	ht_json_array(j, "timeline");
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = tl_event(tl, lines[i].event);

		describe(tl, e, what, sizeof(what));
		ht_json_object(j, NULL);
		ht_json_i64(j, "t_ns", (int64_t)(e->ts_ns - v->start_ns));
		ht_json_u64(j, "dur_ns", e->dur_ns);
		ht_json_i64(j, "cpu", line_cpu(tl, e));
		ht_json_str(j, "thread", thread_label(tl, e, false, who, sizeof(who)));
		/* The thread's process, by its own fields: "thread" keeps its "comm[tid]". */
		thread = thread_track_of(tl, e);
		process = thread ? process_of(tl, thread) : NULL;
		if (process) {
			ht_json_i64(j, "pid", process->pid);
			ht_json_str(j, "process", tl_str_get(tl, process->name));
		}
		ht_json_str(j, "name", event_name(tl, e));
		/* A sampled libc frame may share a syscall's name: the category tells them apart.
		 */
		ht_json_str(j, "category", tl_str_get(tl, e->category));
		ht_json_str(j, "what", what);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_u64(j, "timeline_omitted", omitted);
	free(lines);
}

/* ------------------------------------------------------------------ */
/* Sections.                                                            */

struct culprit_row {
	const char *task; /* "comm[pid]", as the dump names it */
	uint64_t ns;
	uint64_t cpu;
	bool has_cpu;
};

/*
 * "comm[pid]" into its comm and pid, split at the last '[' since a comm may
 * hold brackets of its own. Anything else is all comm, pid 0.
 */
static void split_task(const char *task, char *comm, size_t len, uint32_t *pid)
{
	const char *open = strrchr(task, '[');
	char *end;
	unsigned long v;

	*pid = 0;
	snprintf(comm, len, "%s", task);
	if (!open || open[1] < '0' || open[1] > '9')
		return;
	errno = 0;
	v = strtoul(open + 1, &end, 10);
	if (errno || strcmp(end, "]") || v > UINT32_MAX)
		return;
	*pid = (uint32_t)v;
	snprintf(comm, len, "%.*s", (int)(open - task), task);
}

/*
 * The event that names what ran instead, and the run-queue time it splits:
 * the wait that ended the breach; else (a syscall breach, which ends at its
 * exit) the breach, which has them as the live line had them.
 */
static long culprits_event(const struct dump_view *v, uint64_t *wait_ns)
{
	if (v->rq_slice >= 0) {
		/* The breach's run-queue time, where the model's slice took it from the breach. */
		if (!arg_u64(v->tl, tl_event(v->tl, (size_t)v->rq_slice), HT_ARG_RUNNABLE_NS,
			     wait_ns))
			*wait_ns = tl_event(v->tl, (size_t)v->rq_slice)->dur_ns;
		return v->rq_slice;
	}
	if (v->breach_instant >= 0 &&
	    arg_u64(v->tl, tl_event(v->tl, (size_t)v->breach_instant), HT_ARG_RUNNABLE_NS, wait_ns))
		return v->breach_instant;
	return -1;
}

static size_t culprits_of(const struct dump_view *v, struct culprit_row *rows, size_t max,
			  uint64_t *wait_ns)
{
	const struct tl_event *e;
	char name[64];
	size_t n = 0;

	*wait_ns = 0;
	if (culprits_event(v, wait_ns) < 0)
		return 0;
	e = tl_event(v->tl, (size_t)culprits_event(v, wait_ns));
	for (unsigned int i = 0; n < max; i++) {
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u", i);
		rows[n].task = arg_str(v->tl, e, name);
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u.ns", i);
		if (!rows[n].task || !arg_u64(v->tl, e, name, &rows[n].ns))
			break;
		snprintf(name, sizeof(name), HT_ARG_RAN_INSTEAD ".%u.cpu", i);
		rows[n].has_cpu = arg_u64(v->tl, e, name, &rows[n].cpu);
		n++;
	}
	return n;
}

static const char *const loss_keys[] = {HT_META_LOSS_FR_SKIP,	HT_META_LOSS_RB,
					HT_META_LOSS_STORAGE,	HT_META_LOSS_COMM,
					HT_META_LOSS_RECURSION, HT_META_LOSS_UNSEEN_SWITCH_IN,
					HT_META_BREACHES_MISSED};
/* Only in dumps that looked for user marks. */
static const char *const mark_loss_keys[] = {HT_META_LOSS_MARKS, HT_META_LOSS_MARK_PROCESSES};

static void print_headline(const struct dump_view *v)
{
	const struct timeline *tl = v->tl;
	char dur[32], thr[32], win[32];

	if (v->has_breach) {
		printf("%s %s (threshold %s)", v->kind,
		       ht_format_duration(v->end_ns - v->start_ns, dur, sizeof(dur)),
		       ht_format_duration(v->threshold_ns, thr, sizeof(thr)));
		if (v->off_cpu_ns)
			printf(", off-cpu %s of it (threshold %s)",
			       ht_format_duration(v->off_cpu_ns, dur, sizeof(dur)),
			       ht_format_duration(v->off_cpu_threshold_ns, thr, sizeof(thr)));
		printf(" in tid %u (%s) of pid %s (%s)%s\n", v->tid, v->comm,
		       meta_str(tl, HT_META_TARGET_PID), meta_str(tl, HT_META_TARGET_COMM),
		       v->wait_for_work ? ", waiting for work" : "");
		/* Why it names no waker or no stack where it slept. */
		if (v->not_traced)
			printf("  the kernel did not trace its %s\n",
			       ht_not_traced_words(v->not_traced));
	} else if (v->trigger >= 0) {
		const struct tl_event *e = tl_event(tl, (size_t)v->trigger);
		uint64_t rdi = 0, rsi = 0, rdx = 0;

		arg_u64(tl, e, HT_ARG_RDI, &rdi);
		arg_u64(tl, e, HT_ARG_RSI, &rsi);
		arg_u64(tl, e, HT_ARG_RDX, &rdx);
		printf("trigger %s hit in tid %u of pid %s (%s) at %s: rdi=%#" PRIx64
		       " rsi=%#" PRIx64 " rdx=%#" PRIx64 "\n",
		       arg_str(tl, e, HT_ARG_TRIGGER) ?: "?", v->tid,
		       meta_str(tl, HT_META_TARGET_PID), meta_str(tl, HT_META_TARGET_COMM),
		       arg_str(tl, e, HT_ARG_FUNCTION) ?: "?", rdi, rsi, rdx);
	} else
		printf("%s dump of pid %s (%s)\n", v->kind, meta_str(tl, HT_META_TARGET_PID),
		       meta_str(tl, HT_META_TARGET_COMM));
	printf("  at %s; window %s\n", meta_str(tl, HT_META_WALL_CLOCK),
	       ht_format_duration(v->window_end_ns - v->window_start_ns, win, sizeof(win)));
	/* Said up front: such a dump has no user-space call stacks, and not for want of any. */
	if (!strcmp(meta_str(tl, HT_META_SOURCE), HT_SOURCE_PT_SIDEBAND_ONLY))
		printf("  test capture (HYBTRACE_TEST_PT_SIDEBAND_ONLY): Intel PT sideband only, "
		       "no PT event was opened, no PT data\n");
}

static void print_user_stack_text(const struct dump_view *v, long ev, const char *title)
{
	const char *stack[128];
	size_t n = stack_of(v->tl, ev, stack, 128);

	if (!n)
		return;
	printf("\n%s (%+.3fms, innermost last):\n", title,
	       ((double)tl_event(v->tl, (size_t)ev)->ts_ns - (double)v->start_ns) / 1e6);
	for (size_t i = 0; i < n; i++)
		printf("  %s\n", stack[i]);
}

/* When the breached thread went off the CPU: where it blocked, else the breach's start. */
static uint64_t blocked_ns(const struct dump_view *v)
{
	return v->block_stack >= 0 ? tl_event(v->tl, (size_t)v->block_stack)->ts_ns : v->start_ns;
}

static const char *blocked_what(const struct dump_view *v)
{
	const struct ht_breach_kind_info *ki = kind_of(v);

	if (v->block_stack >= 0)
		return "it blocked";
	return ki ? ki->began : "the wait began";
}

/* The last sample is not where it blocked: it says how long before, and is labelled so. */
static void print_user_stacks_text(const struct dump_view *v)
{
	const char *stack[128];
	char title[96];
	uint64_t at, blocked = blocked_ns(v);
	size_t n;

	print_user_stack_text(v, v->block_stack, "user stack where it blocked");
	n = stack_of(v->tl, v->block_stack, stack, 128);
	if (n == 1 &&
	    !strcmp(arg_str(v->tl, tl_event(v->tl, (size_t)v->block_stack), HT_ARG_CALLGRAPH) ?: "",
		    "fp"))
		printf("  (one frame deep: that code has no frame pointers; try --callgraph "
		       "dwarf)\n");
	if (v->stack_before >= 0) {
		at = tl_event(v->tl, (size_t)v->stack_before)->ts_ns;
		ht_last_sample_label(blocked > at ? blocked - at : 0, blocked_what(v), title,
				     sizeof(title));
		print_user_stack_text(v, v->stack_before, title);
		n = stack_of(v->tl, v->stack_before, stack, 128);
		if (n == 1 && !strcmp(meta_str(v->tl, HT_META_CALLGRAPH), "fp"))
			printf("  (one frame deep: that code has no frame pointers; try "
			       "--callgraph dwarf)\n");
	}
	print_user_stack_text(v, v->stack_after, "user stack just after it came back");
}

/* The breached thread's states as Perfetto's thread_state table has them; N of them. */
static const struct ht_thread_state *thread_states(const struct dump_view *v, size_t *n)
{
	*n = 0;
	if (!v->sched.present || !v->tid)
		return NULL;
	return ht_native_sched_thread(&v->sched, v->tid, n);
}

static void print_thread_states_text(const struct dump_view *v)
{
	size_t n;
	const struct ht_thread_state *st = thread_states(v, &n);
	bool header = false;
	char dur[32];

	for (size_t i = 0; i < n; i++) {
		uint64_t end =
			st[i].dur_ns < 0 ? v->window_end_ns : st[i].ts_ns + (uint64_t)st[i].dur_ns;

		/* Those around the breach: the rest are in --json and in Perfetto. */
		if (end < v->start_ns || st[i].ts_ns > v->end_ns)
			continue;
		if (!header)
			printf("\nthread states during the breach (Perfetto's thread_state):\n");
		header = true;
		printf("  %+10.3fms  %-7s %10s", ((double)st[i].ts_ns - (double)v->start_ns) / 1e6,
		       st[i].state,
		       st[i].dur_ns < 0
			       ? "(open)"
			       : ht_format_duration((uint64_t)st[i].dur_ns, dur, sizeof(dur)));
		if (st[i].cpu >= 0)
			printf("  cpu %d", st[i].cpu);
		if (st[i].woken && st[i].irq)
			printf("  woken from interrupt context");
		else if (st[i].woken)
			printf("  woken by %s[%u]",
			       st[i].waker_tid
				       ? ht_report_task_name(v->tl, &v->sched, st[i].waker_tid)
				       : "swapper",
			       st[i].waker_tid);
		if (st[i].blocked_function)
			printf("  in %s", st[i].blocked_function);
		printf("\n");
	}
}

static void print_thread_states_json(struct ht_json *j, const struct dump_view *v)
{
	size_t n;
	const struct ht_thread_state *st = thread_states(v, &n);

	/* Dumps without native scheduling data report as they always did. */
	if (!v->sched.present)
		return;
	ht_json_object(j, "thread_states");
	ht_json_u64(j, "switches", v->sched.switches);
	ht_json_u64(j, "wakings", v->sched.wakings);
	ht_json_u64(j, "wakings_dropped", v->sched.wakings_dropped);
	ht_json_u64(j, "wakings_spurious", v->sched.wakings_spurious);
	ht_json_array(j, "states");
	for (size_t i = 0; i < n; i++) {
		ht_json_object(j, NULL);
		ht_json_i64(j, "t_ns", (int64_t)(st[i].ts_ns - v->start_ns));
		if (st[i].dur_ns < 0)
			ht_json_null(j, "dur_ns");
		else
			ht_json_u64(j, "dur_ns", (uint64_t)st[i].dur_ns);
		ht_json_str(j, "state", st[i].state);
		if (st[i].cpu >= 0)
			ht_json_u64(j, "cpu", (uint64_t)st[i].cpu);
		else
			ht_json_null(j, "cpu");
		if (st[i].woken) {
			ht_json_u64(j, "waker_tid", st[i].waker_tid);
			ht_json_bool(j, "irq", st[i].irq);
		} else {
			ht_json_null(j, "waker_tid");
		}
		if (st[i].blocked_function)
			ht_json_str(j, "blocked_function", st[i].blocked_function);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_close(j);
}

static void print_sections_text(const struct dump_view *v)
{
	const struct timeline *tl = v->tl;
	struct culprit_row rows[HT_MAX_REPORT_CULPRITS];
	struct chain_link chain[MAX_CHAIN];
	const char *stack[64];
	uint64_t wait_ns, clipped, unknown = 0, idle = 0;
	size_t n;
	char dur[32];

	long culprits = culprits_event(v, &wait_ns);

	n = culprits_of(v, rows, HT_MAX_REPORT_CULPRITS, &wait_ns);
	if (culprits >= 0) {
		arg_u64(tl, tl_event(tl, (size_t)culprits), HT_ARG_UNKNOWN_NS, &unknown);
		arg_u64(tl, tl_event(tl, (size_t)culprits), HT_ARG_IDLE_NS, &idle);
	}
	if (n || unknown || idle) {
		printf("\nran instead, during the %s run-queue wait:\n",
		       ht_format_duration(wait_ns, dur, sizeof(dur)));
		for (size_t i = 0; i < n; i++)
			printf("  %-28s %10s  %5.1f%%\n", rows[i].task,
			       ht_format_duration(rows[i].ns, dur, sizeof(dur)),
			       wait_ns ? 100.0 * (double)rows[i].ns / (double)wait_ns : 0);
		if (unknown)
			printf("  %-28s %10s  %5.1f%%\n", "(before the recording)",
			       ht_format_duration(unknown, dur, sizeof(dur)),
			       wait_ns ? 100.0 * (double)unknown / (double)wait_ns : 0);
		/* Not a culprit: the time its idle CPU took to pick it up. */
		if (idle)
			printf("  %-28s %10s  %5.1f%%\n", "(its CPU idle)",
			       ht_format_duration(idle, dur, sizeof(dur)),
			       wait_ns ? 100.0 * (double)idle / (double)wait_ns : 0);
	}
	if (v->off_slice >= 0) {
		const struct tl_event *e = tl_event(tl, (size_t)v->off_slice);
		const char *sc = arg_str(tl, e, HT_ARG_SYSCALL);

		printf("\noff the CPU: state %s%s%s for %s\n", sleep_state(tl, e), sc ? " in " : "",
		       sc ? sc : "", ht_format_duration(e->dur_ns, dur, sizeof(dur)));
	}
	print_thread_states_text(v);
	n = stack_of(tl, stack_event(v), stack, 64);
	if (n) {
		printf("\nkernel stack where it waited (innermost last):\n");
		for (size_t i = 0; i < n; i++)
			printf("  %s\n", stack[i]);
	}
	print_user_stacks_text(v);
	n = v->has_breach ? wakeup_chain(v, chain) : 0;
	if (n) {
		printf("\nwakeup chain:\n");
		for (size_t i = 0; i < n; i++) {
			printf("  %s[%u] ", chain[i].comm ? chain[i].comm : "?", chain[i].tid);
			if (chain[i].softirq) {
				printf("woken by softirq (%s)", chain[i].softirq);
				if (chain[i].waker_tid)
					printf(" in %s[%u]",
					       chain[i].waker_comm ? chain[i].waker_comm : "?",
					       chain[i].waker_tid);
			} else if (chain[i].waker_tid)
				printf("woken by %s[%u]",
				       chain[i].waker_comm ? chain[i].waker_comm : "?",
				       chain[i].waker_tid);
			else if (chain[i].source && strcmp(chain[i].source, "preempted") &&
				 strcmp(chain[i].source, "new task"))
				printf("woken by %s", chain[i].source);
			else
				printf("%s", chain[i].source ? chain[i].source : "?");
			printf(" at %+.3fms\n",
			       ((double)chain[i].at_ns - (double)v->start_ns) / 1e6);
		}
	}
	print_wait_chain_text(v);
	printf("\nlosses:");
	for (size_t i = 0; i < sizeof(loss_keys) / sizeof(loss_keys[0]); i++)
		printf("%s %s %s", i ? "," : "", loss_keys[i],
		       meta_str(tl, loss_keys[i])[0] ? meta_str(tl, loss_keys[i]) : "?");
	for (size_t i = 0; i < sizeof(mark_loss_keys) / sizeof(mark_loss_keys[0]); i++)
		if (tl_meta_get(tl, mark_loss_keys[i]))
			printf(", %s %s", mark_loss_keys[i], meta_str(tl, mark_loss_keys[i]));
	printf("\n");
	clipped = meta_u64(tl, HT_META_CLIPPED_TO, 0);
	if (clipped && clipped == meta_u64(tl, HT_META_RECORDING_START, 0))
		printf("clipped: recording began %s into the window\n",
		       ht_format_duration(clipped - v->window_start_ns, dur, sizeof(dur)));
	else if (clipped)
		printf("clipped: the rings no longer held the window's first %s\n",
		       ht_format_duration(clipped - v->window_start_ns, dur, sizeof(dur)));
}

static void print_frames_json(struct ht_json *j, const char *key, const struct timeline *tl,
			      long ev)
{
	const char *stack[128];
	size_t n = stack_of(tl, ev, stack, 128);

	print_strings_json(j, key, stack, n);
}

static void print_stack_json(struct ht_json *j, const struct dump_view *v)
{
	const char *stack[64];
	size_t n = stack_of(v->tl, stack_event(v), stack, 64);

	print_frames_json(j, "user_stack_blocked", v->tl, v->block_stack);
	print_frames_json(j, "user_stack_before", v->tl, v->stack_before);
	if (v->stack_before >= 0) {
		uint64_t at = tl_event(v->tl, (size_t)v->stack_before)->ts_ns;

		ht_json_u64(j, "user_stack_before_gap_ns",
			    blocked_ns(v) > at ? blocked_ns(v) - at : 0);
	}
	print_frames_json(j, "user_stack_after", v->tl, v->stack_after);
	print_strings_json(j, "kernel_stack", stack, n);
}

/*
 * The wakeup that ended the breached thread's last wait, as the live
 * breach's woken_by (breach_format.c): source, at_ns, softirq, and the
 * waker's tid, pid and comm. The dump knows the pid of the target's
 * threads only: another's is null.
 */
static void print_woken_by_json(struct ht_json *j, const struct dump_view *v,
				const struct chain_link *c)
{
	const char *source = c ? c->source : NULL;
	bool woken = source && (!strcmp(source, "task") || !strcmp(source, "irq") ||
				!strcmp(source, "timer") || !strcmp(source, "softirq"));

	if (!woken) {
		ht_json_null(j, "woken_by");
		return;
	}
	ht_json_object(j, "woken_by");
	ht_json_str(j, "source", source);
	ht_json_u64(j, "at_ns", c->at_ns);
	if (c->softirq)
		ht_json_str(j, "softirq", c->softirq);
	if (c->waker_tid) {
		ht_json_u64(j, "tid", c->waker_tid);
		if (is_target_thread(v->tl, c->waker_tid) && meta_u64(v->tl, HT_META_TARGET_PID, 0))
			ht_json_u64(j, "pid", meta_u64(v->tl, HT_META_TARGET_PID, 0));
		else
			ht_json_null(j, "pid");
		ht_json_str(j, "comm", c->waker_comm ? c->waker_comm : "?");
	}
	ht_json_close(j);
}

static void print_sections_json(struct ht_json *j, const struct dump_view *v)
{
	const struct timeline *tl = v->tl;
	struct culprit_row rows[HT_MAX_REPORT_CULPRITS];
	struct chain_link chain[MAX_CHAIN];
	uint64_t wait_ns, other_ns = 0, unknown_ns = 0, idle_ns = 0;
	uint64_t clipped = meta_u64(tl, HT_META_CLIPPED_TO, 0);
	size_t n = culprits_of(v, rows, HT_MAX_REPORT_CULPRITS, &wait_ns);
	char comm[HT_COMM_LEN + 32];
	uint32_t pid;

	/* The live breach's fields (breach_format.c), so one parser reads both. */
	ht_json_array(j, "ran_instead");
	for (size_t i = 0; i < n; i++) {
		split_task(rows[i].task, comm, sizeof(comm), &pid);
		ht_json_object(j, NULL);
		ht_json_u64(j, "pid", pid);
		ht_json_str(j, "comm", comm);
		if (rows[i].has_cpu)
			ht_json_u64(j, "cpu", rows[i].cpu);
		else
			ht_json_null(j, "cpu");
		ht_json_u64(j, "ns", rows[i].ns);
		ht_json_close(j);
	}
	ht_json_close(j);
	long culprits = culprits_event(v, &wait_ns);

	if (culprits >= 0) {
		arg_u64(tl, tl_event(tl, (size_t)culprits), HT_ARG_OTHER_NS, &other_ns);
		arg_u64(tl, tl_event(tl, (size_t)culprits), HT_ARG_UNKNOWN_NS, &unknown_ns);
		arg_u64(tl, tl_event(tl, (size_t)culprits), HT_ARG_IDLE_NS, &idle_ns);
	}
	ht_json_u64(j, "ran_instead_other_ns", other_ns);
	ht_json_u64(j, "ran_instead_unknown_ns", unknown_ns);
	ht_json_u64(j, "ran_instead_idle_ns", idle_ns);
	if (v->off_slice >= 0) {
		const struct tl_event *e = tl_event(tl, (size_t)v->off_slice);

		ht_json_object(j, "off_cpu");
		ht_json_str(j, "state", sleep_state(tl, e));
		ht_json_str(j, "syscall", arg_str(tl, e, HT_ARG_SYSCALL) ?: "");
		ht_json_u64(j, "ns", e->dur_ns);
		ht_json_close(j);
	}
	print_stack_json(j, v);
	n = v->has_breach ? wakeup_chain(v, chain) : 0;
	print_woken_by_json(j, v, n ? &chain[0] : NULL);
	ht_json_array(j, "wakeup_chain");
	for (size_t i = 0; i < n; i++) {
		ht_json_object(j, NULL);
		ht_json_u64(j, "tid", chain[i].tid);
		ht_json_str(j, "comm", chain[i].comm ? chain[i].comm : "?");
		ht_json_str(j, "woken_by", chain[i].source ? chain[i].source : "?");
		if (chain[i].softirq)
			ht_json_str(j, "softirq", chain[i].softirq);
		ht_json_u64(j, "waker_tid", chain[i].waker_tid);
		ht_json_str(j, "waker_comm", chain[i].waker_comm ? chain[i].waker_comm : "");
		ht_json_close(j);
	}
	ht_json_close(j);
	print_wait_chain_json(j, v);
	ht_json_object(j, "losses");
	for (size_t i = 0; i < sizeof(loss_keys) / sizeof(loss_keys[0]); i++)
		ht_json_u64(j, loss_keys[i], meta_u64(tl, loss_keys[i], 0));
	for (size_t i = 0; i < sizeof(mark_loss_keys) / sizeof(mark_loss_keys[0]); i++)
		if (tl_meta_get(tl, mark_loss_keys[i]))
			ht_json_u64(j, mark_loss_keys[i], meta_u64(tl, mark_loss_keys[i], 0));
	ht_json_close(j);
	ht_json_bool(j, "clipped", clipped);
	if (clipped)
		ht_json_u64(j, "clipped_to_ns", clipped);
	print_thread_states_json(j, v);
}

static void print_header_json(struct ht_json *j, const struct dump_view *v)
{
	const struct timeline *tl = v->tl;

	ht_json_str(j, "file", v->path);
	ht_json_str(j, "kind", v->kind);
	ht_json_bool(j, "breach", v->has_breach);
	if (v->trigger >= 0) {
		const struct tl_event *e = tl_event(tl, (size_t)v->trigger);
		uint64_t r[3] = {0};

		arg_u64(tl, e, HT_ARG_RDI, &r[0]);
		arg_u64(tl, e, HT_ARG_RSI, &r[1]);
		arg_u64(tl, e, HT_ARG_RDX, &r[2]);
		ht_json_object(j, "trigger");
		ht_json_str(j, "spec", arg_str(tl, e, HT_ARG_TRIGGER) ?: "");
		ht_json_str(j, "function", arg_str(tl, e, HT_ARG_FUNCTION) ?: "");
		ht_json_u64(j, "tid", v->tid);
		ht_json_u64(j, "time_ns", e->ts_ns);
		ht_json_array(j, "args");
		for (size_t i = 0; i < 3; i++)
			ht_json_u64(j, NULL, r[i]);
		ht_json_close(j);
		ht_json_close(j);
	}
	if (v->has_breach) {
		/* "kinds":["off-cpu","syscall"] from "off-cpu+syscall". */
		ht_json_split(j, "kinds", v->kinds, '+');
		if (v->off_cpu_ns) {
			ht_json_u64(j, "off_cpu_duration_ns", v->off_cpu_ns);
			ht_json_u64(j, "off_cpu_threshold_ns", v->off_cpu_threshold_ns);
		}
		ht_json_u64(j, "duration_ns", v->end_ns - v->start_ns);
		ht_json_u64(j, "threshold_ns", v->threshold_ns);
		ht_json_u64(j, "tid", v->tid);
		ht_json_str(j, "comm", v->comm);
		ht_json_u64(j, "start_ns", v->start_ns);
		ht_json_u64(j, "end_ns", v->end_ns);
		ht_json_bool(j, "wait_for_work", v->wait_for_work);
		/* Why it names no waker or no stack where it slept. */
		ht_json_split(j, "not_traced", v->not_traced, ',');
	}
	ht_json_u64(j, "pid", meta_u64(tl, HT_META_TARGET_PID, 0));
	ht_json_str(j, "process", meta_str(tl, HT_META_TARGET_COMM));
	ht_json_str(j, "wall_clock", meta_str(tl, HT_META_WALL_CLOCK));
	ht_json_object(j, "window");
	ht_json_u64(j, "start_ns", v->window_start_ns);
	ht_json_u64(j, "end_ns", v->window_end_ns);
	ht_json_close(j);
	ht_json_object(j, "metadata");
	for (size_t i = 0; i < tl_meta_count(tl); i++)
		ht_json_data_str(j, tl_meta_key(tl, i), tl_meta_value(tl, i));
	ht_json_close(j);
	ht_json_object(j, "flows");
	ht_json_u64(j, "begun", v->stats.flows_begun);
	ht_json_u64(j, "ends_dropped", v->stats.flow_ends_dropped);
	ht_json_close(j);
}

/*
 * The dump at PATH as a timeline, and with SCHED its native scheduling data
 * (none where it has none) read from the same bytes.
 */
static struct timeline *read_dump(const char *path, struct pftr_stats *stats,
				  struct ht_native_sched *sched)
{
	const struct tl_clock_snapshot *snap;
	struct timeline *tl;
	char err[512];
	uint8_t *data;
	size_t len;

	if (sched)
		memset(sched, 0, sizeof(*sched));
	if (pftr_read_file(path, &data, &len, err, sizeof(err))) {
		ht_fail("%s", err);
		return NULL;
	}
	tl = pftr_read_mem(data, len, stats, err, sizeof(err));
	if (!tl) {
		ht_fail("%s: %s", path, err);
	} else if (!tl_meta_get(tl, HT_META_KIND)) {
		tl_free(tl);
		tl = NULL;
		ht_fail("%s: a Perfetto trace, but not a hybtrace dump (no %s metadata)", path,
			HT_META_KIND);
	} else if (sched) {
		/* A failure here leaves the rest of the report as it is, and says so. */
		snap = tl_clock_snapshot(tl);
		if (ht_native_sched_read(
			    data, len, snap ? (int64_t)(snap->boottime_ns - snap->monotonic_ns) : 0,
			    sched))
			ht_warn("%s: its scheduling data: %s", path, ht_last_error());
	}
	free(data);
	return tl;
}

static int report_file(const char *path, const struct report_options *o)
{
	struct pftr_stats stats;
	struct ht_native_sched sched;
	struct timeline *tl = read_dump(path, &stats, &sched);
	struct dump_view v;

	if (!tl) {
		ht_error("%s", ht_last_error());
		return HT_EXIT_USAGE;
	}
	view_init(&v, tl, path, &stats);
	v.sched = sched;
	ht_report_model_rebuild(tl, &v.sched, v.window_start_ns, v.window_end_ns);
	view_find_waits(&v);
	if (o->json) {
		struct ht_json j;

		ht_json_begin(&j, stdout);
		print_header_json(&j, &v);
		print_sections_json(&j, &v);
		print_timeline_json(&j, &v, o);
		ht_json_end_line(&j);
	} else {
		print_headline(&v);
		print_sections_text(&v);
		print_timeline_text(&v, o);
		if (stats.flow_ends_dropped)
			printf("\n%" PRIu64 " flow arrows of this file end before they begin: "
			       "Perfetto drops them.\n",
			       stats.flow_ends_dropped);
	}
	ht_native_sched_free(&v.sched);
	tl_free(tl);
	return 0;
}

/* ------------------------------------------------------------------ */
/* A directory of dumps, worst first.                                   */

struct dir_row {
	char *path;
	char *headline; /* NULL: unreadable, see error */
	char *error;
	uint64_t duration_ns, threshold_ns;
	double ratio; /* to its threshold, as the dump policy ranks breaches; 0: no breach */
	bool wait_for_work;
	char kind[16];
	char wall_clock[48];
	bool has_thread; /* a breach's or a trigger's; manual and exit dumps have none */
	uint32_t tid;
	char comm[HT_COMM_LEN + 8];
	uint64_t pid;
	char process[HT_COMM_LEN + 8];
	/* The process its breach or hit is of; 0: none (manual, exit, unreadable). */
	uint64_t of_pid;
	char of_comm[HT_COMM_LEN + 8];
	size_t order, group; /* --by-process: its place worst first, its process's worst's */
};

/* Breaches first, then trigger, manual and exit dumps, then waits for work. */
static int row_group(const struct dir_row *r)
{
	return r->wait_for_work ? 2 : r->ratio > 0 ? 0 : 1;
}

static int row_cmp(const void *a, const void *b)
{
	const struct dir_row *x = a, *y = b;

	if (row_group(x) != row_group(y))
		return row_group(x) - row_group(y);
	if (x->ratio != y->ratio)
		return x->ratio > y->ratio ? -1 : 1;
	if (x->duration_ns != y->duration_ns)
		return x->duration_ns > y->duration_ns ? -1 : 1;
	return strcmp(x->path, y->path);
}

static void fill_row(struct dir_row *r)
{
	struct pftr_stats stats;
	struct timeline *tl = read_dump(r->path, &stats, NULL);
	struct dump_view v;

	if (!tl) {
		r->error = strdup(ht_last_error());
		return;
	}
	view_init(&v, tl, r->path, &stats);
	r->duration_ns = v.has_breach ? v.end_ns - v.start_ns : 0;
	r->threshold_ns = v.has_breach ? v.threshold_ns : 0;
	r->wait_for_work = v.has_breach && v.wait_for_work;
	if (v.has_breach) {
		uint64_t dur[2] = {r->duration_ns, v.off_cpu_ns};
		uint64_t thr[2] = {v.threshold_ns, v.off_cpu_ns ? v.off_cpu_threshold_ns : 0};

		/* As the dump policy ranked it: by the larger of its two ratios. */
		r->ratio = ht_dump_rank_breach(r->wait_for_work ? HT_RANK_WAIT_FOR_WORK
								: HT_RANK_BREACH,
					       dur, thr, 2)
				   .ratio;
	}
	snprintf(r->kind, sizeof(r->kind), "%s", v.kind);
	snprintf(r->wall_clock, sizeof(r->wall_clock), "%s", meta_str(tl, HT_META_WALL_CLOCK));
	r->has_thread = v.has_breach || v.trigger >= 0;
	r->tid = v.tid;
	snprintf(r->comm, sizeof(r->comm), "%s", v.has_breach ? v.comm : thread_name(tl, v.tid));
	r->pid = meta_u64(tl, HT_META_TARGET_PID, 0);
	snprintf(r->process, sizeof(r->process), "%s", meta_str(tl, HT_META_TARGET_COMM));
	/* Dumps made before they named their process had one target process. */
	if (tl_meta_get(tl, HT_META_PROCESS_PID)) {
		r->of_pid = meta_u64(tl, HT_META_PROCESS_PID, 0);
		snprintf(r->of_comm, sizeof(r->of_comm), "%s", meta_str(tl, HT_META_PROCESS_COMM));
	} else if (r->has_thread) {
		r->of_pid = r->pid;
		snprintf(r->of_comm, sizeof(r->of_comm), "%s", r->process);
	}
	r->headline = strdup(r->kind);
	tl_free(tl);
}

static bool is_dump_name(const char *name)
{
	size_t n = strlen(name), s = strlen(HT_DUMP_SUFFIX);

	return name[0] != '.' && n > s && !strcmp(name + n - s, HT_DUMP_SUFFIX);
}

static void print_row_json(struct ht_json *j, const struct dir_row *r)
{
	ht_json_object(j, NULL);
	ht_json_str(j, "file", r->path);
	if (r->error) {
		ht_json_str(j, "error", r->error);
	} else {
		ht_json_str(j, "kind", r->kind);
		ht_json_u64(j, "duration_ns", r->duration_ns);
		if (r->threshold_ns)
			ht_json_u64(j, "threshold_ns", r->threshold_ns);
		if (r->has_thread) {
			ht_json_u64(j, "tid", r->tid);
			ht_json_str(j, "comm", r->comm);
		}
		ht_json_u64(j, "pid", r->pid);
		ht_json_str(j, "process", r->process);
		ht_json_str(j, "wall_clock", r->wall_clock);
		ht_json_bool(j, "wait_for_work", r->wait_for_work);
	}
	ht_json_close(j);
}

static void print_row_text(const struct dir_row *r)
{
	char dur[32], who[HT_COMM_LEN + 48];

	if (r->error) {
		printf("  %-10s %-9s %-24s %s\n", "?", "unreadable", r->error, "");
		return;
	}
	/* Whose dump: the thread that breached or hit, else the whole process. */
	if (r->has_thread)
		snprintf(who, sizeof(who), "tid %u (%s)%s", r->tid, r->comm,
			 r->wait_for_work ? ", waiting for work" : "");
	else
		snprintf(who, sizeof(who), "pid %" PRIu64 " (%s)", r->pid, r->process);
	printf("  %-10s %-9s %-24s %-24s  %s\n",
	       r->duration_ns ? ht_format_duration(r->duration_ns, dur, sizeof(dur)) : "-", r->kind,
	       r->wall_clock, who, r->path);
}

/*
 * --by-process: each process's dumps together, worst first, the process
 * whose worst dump is worst first; the dumps of no process (manual, exit,
 * unreadable) last. Each row's group is the place of its process's worst.
 */
static int by_process_cmp(const void *a, const void *b)
{
	const struct dir_row *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void group_by_process(struct dir_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		rows[i].order = i;
		while (k < i && rows[k].of_pid != rows[i].of_pid)
			k++;
		rows[i].group = !rows[i].of_pid ? n : k < i ? rows[k].group : i;
	}
	qsort(rows, n, sizeof(*rows), by_process_cmp);
}

static size_t group_end(const struct dir_row *rows, size_t n, size_t from)
{
	size_t to = from + 1;

	while (to < n && rows[to].of_pid == rows[from].of_pid)
		to++;
	return to;
}

static void print_groups_json(struct ht_json *j, const struct dir_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i = group_end(rows, n, i)) {
		ht_json_object(j, NULL);
		if (rows[i].of_pid) {
			ht_json_u64(j, "pid", rows[i].of_pid);
			ht_json_str(j, "process", rows[i].of_comm);
		} else {
			ht_json_null(j, "pid");
			ht_json_null(j, "process");
		}
		ht_json_array(j, "dumps");
		for (size_t k = i; k < group_end(rows, n, i); k++)
			print_row_json(j, &rows[k]);
		ht_json_close(j);
		ht_json_close(j);
	}
}

static void print_groups_text(const struct dir_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i = group_end(rows, n, i)) {
		size_t count = group_end(rows, n, i) - i;

		if (rows[i].of_pid)
			printf("%spid %" PRIu64 " (%s): %zu dump%s\n", i ? "\n" : "",
			       rows[i].of_pid, rows[i].of_comm, count, count == 1 ? "" : "s");
		else
			printf("%sof no process (manual, exit or unreadable): %zu dump%s\n",
			       i ? "\n" : "", count, count == 1 ? "" : "s");
		for (size_t k = i; k < i + count; k++)
			print_row_text(&rows[k]);
	}
}

static int report_dir(const char *dir, const struct report_options *o)
{
	struct dir_row *rows = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct ht_json j;
	DIR *d = opendir(dir);

	if (!d) {
		ht_error("%s: %s", dir, strerror(errno));
		return HT_EXIT_USAGE;
	}
	while ((de = readdir(d))) {
		if (!is_dump_name(de->d_name))
			continue;
		if (n == cap) {
			struct dir_row *grown =
				realloc(rows, (cap = cap ? cap * 2 : 16) * sizeof(*rows));

			if (!grown)
				break;
			rows = grown;
		}
		memset(&rows[n], 0, sizeof(rows[n]));
		if (asprintf(&rows[n].path, "%s/%s", dir, de->d_name) < 0)
			break;
		fill_row(&rows[n++]);
	}
	closedir(d);
	if (n > 1)
		qsort(rows, n, sizeof(*rows), row_cmp);
	if (o->by_process && n > 1)
		group_by_process(rows, n);
	if (o->json)
		ht_json_begin_array(&j, stdout);
	else if (!n)
		printf("no dumps (*" HT_DUMP_SUFFIX ") in %s\n", dir);
	if (o->by_process && o->json)
		print_groups_json(&j, rows, n);
	else if (o->by_process)
		print_groups_text(rows, n);
	for (size_t i = 0; i < n && !o->by_process; i++) {
		if (o->json)
			print_row_json(&j, &rows[i]);
		else
			print_row_text(&rows[i]);
	}
	for (size_t i = 0; i < n; i++) {
		free(rows[i].path);
		free(rows[i].headline);
		free(rows[i].error);
	}
	if (o->json)
		ht_json_end_line(&j);
	free(rows);
	return 0;
}

static void usage(void)
{
	printf("usage: hybtrace report FILE [--json] [--all]\n"
	       "       hybtrace report DIR [--json] [--by-process]\n"
	       "\n"
	       "Reviews a dump: the breach, what ran instead, why the thread waited and the\n"
	       "kernel stack, the wakeup chain, losses, and the window's timeline. A\n"
	       "directory lists its dumps, worst first.\n"
	       "  --json        one JSON document instead of text\n"
	       "  --all         every event of the window, not the 200 nearest the breach\n"
	       "  --by-process  a directory's dumps by the process each is of, worst first\n");
}

int ht_report_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"all", no_argument, NULL, 'a'},
		{"by-process", no_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct report_options o = {0};
	struct stat st;
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			o.json = true;
			break;
		case 'a':
			o.all = true;
			break;
		case 'p':
			o.by_process = true;
			break;
		case 'h':
			usage();
			return 0;
		default:
			ht_error("report: unknown option '%s' (see hybtrace report --help)",
				 argv[optind - 1]);
			return HT_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		ht_error("report needs one FILE or DIR (see hybtrace report --help)");
		return HT_EXIT_USAGE;
	}
	if (stat(argv[optind], &st)) {
		ht_error("%s: %s", argv[optind], strerror(errno));
		return HT_EXIT_USAGE;
	}
	if (S_ISDIR(st.st_mode))
		return report_dir(argv[optind], &o);
	if (o.by_process) {
		ht_error("report: --by-process groups the dumps of a directory, and %s is a file",
			 argv[optind]);
		return HT_EXIT_USAGE;
	}
	return report_file(argv[optind], &o);
}
