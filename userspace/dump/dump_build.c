// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include "kernel/comm_cache.h"
#include "dump/dump_build.h"
#include "base/json.h"
#include "kernel/chain_format.h"
#include "kernel/wait_chain.h"
#include "kernel/waker_stacks.h"
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "symbols/ksyms.h"
#include "kernel/blocked_function.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/machine.h"
#include "kernel/monitor.h"
#include "base/output.h"
#include "trace/perfetto_write.h"
#include "kernel/sched_ftrace.h"
#include "kernel/sched_index.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "trace/timeline.h"
#include "kernel/wait_for_work.h"

uint64_t ht_monotonic_to_realtime(uint64_t monotonic_ns)
{
	uint64_t mono = ht_clock_ns(CLOCK_MONOTONIC), real = ht_clock_ns(CLOCK_REALTIME);

	return real - (mono - monotonic_ns);
}

static void format_wall_clock(uint64_t realtime_ns, char *buf, size_t len)
{
	time_t secs = (time_t)(realtime_ns / 1000000000ULL);
	struct tm tm;
	char date[32], zone[8];

	localtime_r(&secs, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	snprintf(buf, len, "%s.%03u%s", date, (unsigned int)(realtime_ns / 1000000ULL % 1000), zone);
}

/* Where and when the capture says it was made (a kept raw capture does); false: here, now. */
static bool capture_origin(const struct ht_dump_capture *c, struct ht_source_origin *o)
{
	for (unsigned int i = 0; i < c->nfrozen; i++) {
		const struct ht_source_frozen *f = &c->frozen[i];

		if (f->frozen && f->ops->origin && f->ops->origin(f->u.bytes, o))
			return true;
	}
	return false;
}

/* CLOCK_MONOTONIC T as wall-clock time: through the capture's moment on both clocks if any. */
static uint64_t realtime_of(const struct ht_dump_capture *c, uint64_t t)
{
	struct ht_source_origin o;

	if (capture_origin(c, &o) && o.mono_ns && o.real_ns)
		return o.real_ns - (o.mono_ns - t);
	return ht_monotonic_to_realtime(t);
}

static void meta_u64(struct timeline *tl, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	tl_meta_set(tl, key, buf);
}

/*
 * The process a dump is of: the breach's (or the trigger's hit's), else the
 * one target named; 0 for a manual dump of a cgroup or of every task.
 */
static int dump_process(const struct ht_dumper_config *cfg, const struct ht_dump_job *job)
{
	if (job->has_breach && job->breach.tgid)
		return (int)job->breach.tgid;
	if (job->has_hit && job->hit.pid)
		return (int)job->hit.pid;
	return cfg->tgid;
}

/*
 * Where and when the dump was made: this machine and now live; what the raw
 * capture recorded when one is decoded (MADE has the machine then).
 */
static void set_metadata(const struct ht_dumper_config *cfg, struct timeline *tl,
			 const struct ht_dump_job *job, const struct ht_dump_capture *c,
			 uint64_t not_dumped)
{
	struct ht_source_origin origin;
	const struct ht_source_origin *made =
		capture_origin(c, &origin) && origin.kernel ? &origin : NULL;
	const struct ht_fr_window *w = &c->w;
	struct ht_monitor_counters mc;
	struct utsname u;
	char buf[256];

	tl_meta_set(tl, HT_META_VERSION, HT_VERSION);
	uname(&u);
	tl_meta_set(tl, HT_META_KERNEL, made ? made->kernel : u.release);
	tl_meta_set(tl, HT_META_CPU_MODEL,
		    made ? made->cpu_model : ht_machine_cpu_model(buf, sizeof(buf)));
	tl_meta_set(tl, HT_META_CMDLINE, made ? made->cmdline : cfg->cmdline);
	meta_u64(tl, HT_META_TARGET_PID, (uint64_t)dump_process(cfg, job));
	tl_meta_set(tl, HT_META_TARGET_COMM, cfg->target_comm);
	tl_meta_set(tl, HT_META_KIND, job->kind);
	format_wall_clock(realtime_of(c, job->end_ns), buf, sizeof(buf));
	tl_meta_set(tl, HT_META_WALL_CLOCK, buf);
	if (job->has_breach) {
		meta_u64(tl, HT_META_BREACH_TID, job->breach.tid);
		snprintf(buf, sizeof(buf), "%.*s", HT_COMM_LEN, job->breach.comm);
		tl_meta_set(tl, HT_META_BREACH_COMM, buf);
		meta_u64(tl, HT_META_BREACH_START, job->breach.start_ns);
		meta_u64(tl, HT_META_BREACH_END, job->breach.end_ns);
		meta_u64(tl, HT_META_THRESHOLD, job->threshold_ns);
		meta_u64(tl, HT_META_WAIT_FOR_WORK, ht_breach_waits_for_work(&job->breach));
	}
	meta_u64(tl, HT_META_WINDOW_START, c->t0);
	meta_u64(tl, HT_META_WINDOW_END, c->t1);
	if (w->clipped)
		meta_u64(tl, HT_META_CLIPPED_TO, w->covered_from_ns);
	meta_u64(tl, HT_META_LOSS_FR_SKIP, w->skipped_records);
	/* Offline, the live counters are not at hand (the window's own losses are). */
	if (cfg->monitor)
		meta_u64(tl, HT_META_RECORDING_START, cfg->monitor->attached_ns);
	if (cfg->monitor && !ht_monitor_read_counters(cfg->monitor, &mc)) {
		meta_u64(tl, HT_META_LOSS_RB, mc.value[HT_CNT_RB_DROPS]);
		meta_u64(tl, HT_META_LOSS_STORAGE, mc.value[HT_CNT_STORAGE_FAILS]);
		meta_u64(tl, HT_META_LOSS_COMM, mc.value[HT_CNT_COMM_UPDATE_FAILS]);
		meta_u64(tl, HT_META_LOSS_RECURSION, mc.recursion_misses);
		meta_u64(tl, HT_META_LOSS_UNSEEN_SWITCH_IN, mc.value[HT_CNT_UNSEEN_SWITCH_INS]);
	}
	if (cfg->trigger_threads_left_out)
		meta_u64(tl, HT_META_LOSS_TRIGGER_THREADS,
			 __atomic_load_n(cfg->trigger_threads_left_out, __ATOMIC_RELAXED));
	/* What the live session saw around the dump is not in the capture. */
	if (cfg->decoded_from)
		tl_meta_set(tl, HT_META_DECODED_FROM, cfg->decoded_from);
	else
		meta_u64(tl, HT_META_BREACHES_MISSED, not_dumped);
	meta_u64(tl, HT_META_DEFERRED, job->deferred);
}

/* What the symbols of the processes could not be had for, once each. */
static void say_symbol_notes(struct ht_dump_builder *b)
{
	const char *note;

	while (b->symbols && (note = ht_symbolizer_set_next_note(b->symbols)))
		ht_warn("%s", note);
}

void ht_dump_builder_refresh(struct ht_dump_builder *b)
{
	if (b->symbols)
		ht_symbolizer_set_refresh(b->symbols);
}

void ht_dump_builder_reread(struct ht_dump_builder *b, int tgid)
{
	if (b->symbols)
		ht_symbolizer_set_reread(b->symbols, tgid);
}

void ht_dump_window(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
		    uint64_t *t0, uint64_t *t1)
{
	*t0 = job->start_ns > cfg->pre_ns ? job->start_ns - cfg->pre_ns : 0;
	*t1 = job->end_ns + cfg->post_ns;
}

/* Distinct ids (tids, then processes): open addressing, grown at half full; 0 is no id. */
struct id_set {
	uint32_t *v;
	size_t cap, count;
};

static int id_set_add(struct id_set *s, uint32_t id)
{
	size_t i;

	if (!id)
		return 0;
	if ((s->count + 1) * 2 > s->cap) {
		struct id_set bigger = { .cap = s->cap ? s->cap * 2 : 256 };

		bigger.v = calloc(bigger.cap, sizeof(*bigger.v));
		if (!bigger.v)
			return -1;
		for (size_t k = 0; k < s->cap; k++)
			if (s->v[k])
				id_set_add(&bigger, s->v[k]);
		free(s->v);
		*s = bigger;
	}
	for (i = (id * 2654435761u) & (s->cap - 1); s->v[i]; i = (i + 1) & (s->cap - 1))
		if (s->v[i] == id)
			return 0;
	s->v[i] = id;
	s->count++;
	return 1;
}

/* The target threads of the window: those its records name as targets, and those running at t0. */
static int window_target_threads(const struct ht_fr_window *w, struct id_set *tids)
{
	int rc = 0;

	for (size_t i = 0; i < w->count && rc >= 0; i++) {
		const struct ht_flight_record *r = &w->events[i].rec;

		if (r->kind == HT_FR_SWITCH) {
			if (r->flags & HT_FRF_PREV_TARGET)
				rc = id_set_add(tids, r->tid_a);
			if (rc >= 0 && (r->flags & HT_FRF_NEXT_TARGET))
				rc = id_set_add(tids, r->tid_b);
		} else if (r->flags & HT_FRF_TARGET) {
			rc = id_set_add(tids, r->tid_a);
		}
	}
	for (unsigned int cpu = 0; cpu < w->ncpus && rc >= 0; cpu++)
		if (w->entry_valid[cpu] && (w->entry_switch[cpu].rec.flags & HT_FRF_NEXT_TARGET))
			rc = id_set_add(tids, w->entry_switch[cpu].rec.tid_b);
	return rc < 0 ? -1 : 0;
}

/*
 * The target processes to read marks from, the dump's own first: those with
 * an event in the window (a process that ran nowhere in it wrote no mark in
 * it), still targets now (one that left cannot be read).
 */
static size_t window_processes(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
			       const struct ht_dump_capture *c, int **out)
{
	const struct ht_targets *t = &cfg->monitor->targets;
	struct id_set tids = { 0 }, seen = { 0 };
	int own = dump_process(cfg, job);
	size_t n = 0;
	int *v;

	*out = NULL;
	if (window_target_threads(&c->w, &tids))
		goto out;
	v = malloc((tids.count + 1) * sizeof(*v));
	if (!v)
		goto out;
	if (own > 0 && ht_targets_has(t, own) && id_set_add(&seen, (uint32_t)own) > 0)
		v[n++] = own;
	for (size_t i = 0; i < tids.cap; i++) {
		uint32_t tid = tids.v[i], tgid;

		if (!tid)
			continue;
		/* A thread whose id is a target process's is that process's first thread. */
		tgid = !t->spec.all && ht_targets_has(t, (int)tid)
			       ? tid
			       : ht_comm_tgid(cfg->marks->comms, tid);
		if (tgid && ht_targets_has(t, (int)tgid) && id_set_add(&seen, tgid) > 0)
			v[n++] = (int)tgid;
	}
	*out = v;
out:
	free(tids.v);
	free(seen.v);
	return n;
}

static int add_proc_marks(struct ht_dump_capture *c, int tgid, struct ht_mark_set *set)
{
	struct ht_proc_marks *v = realloc(c->marks, (c->nmarks + 1) * sizeof(*v));

	if (!v)
		return -1;
	c->marks = v;
	c->marks[c->nmarks++] = (struct ht_proc_marks){ .tgid = tgid, .set = *set };
	return 0;
}

/*
 * The user marks in the window of every target process with an event in it,
 * read from their memory now (after the freeze), within one budget of bytes
 * for the dump. A process gone since, or whose memory cannot be read, is
 * skipped and counted; never a reason to fail the dump.
 */
static void capture_marks(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
			  struct ht_dump_capture *c)
{
	struct ht_marks_window w = { .t0_ns = c->t0, .t1_ns = c->t1 };
	size_t budget = HT_MARKS_DEFAULT_BUDGET, used = 0, n;
	uint64_t began = ht_monotonic_ns();
	int *procs;

	if (!cfg->marks || !cfg->monitor)
		return;
	c->marks_on = true;
	w.a = cfg->marks->attach_pair;
	ht_tsc_pair_take(&w.b);
	ht_marks_procs_round(cfg->marks->procs);
	n = window_processes(cfg, job, c, &procs);
	for (size_t i = 0; i < n; i++) {
		struct ht_mark_set set;
		const uint64_t *addrs;
		size_t naddrs;
		int rc;

		if (i >= HT_MARKS_DUMP_PROCESSES || used >= budget) {
			/* Not looked at: counted only where marks were known to be. */
			c->marks_lost_processes += ht_marks_procs_known(cfg->marks->procs, procs[i]);
			continue;
		}
		rc = ht_marks_procs_find(cfg->marks->procs, procs[i], &addrs, &naddrs);
		if (rc > 0)
			c->marks_lost_processes++;
		/* A program without the mark header has no registry: nothing to say. */
		if (rc || !naddrs)
			continue;
		w.budget_bytes = budget - used;
		if (ht_marks_read(procs[i], addrs, naddrs, &w, &set)) {
			/* Exited since it was located, or unreadable: located afresh next time. */
			ht_mark_set_free(&set);
			ht_marks_procs_stale(cfg->marks->procs, procs[i]);
			c->marks_lost_processes++;
			continue;
		}
		c->marks_processes++;
		used += set.bytes_read;
		if ((!set.count && !set.torn && !set.overwritten && !set.unreadable) ||
		    add_proc_marks(c, procs[i], &set))
			ht_mark_set_free(&set);
	}
	free(procs);
	c->marks_read_ns = ht_monotonic_ns() - began;
}

static void free_frozen(struct ht_dump_capture *c)
{
	for (unsigned int i = 0; i < c->nfrozen; i++) {
		if (c->frozen[i].frozen)
			c->frozen[i].ops->frozen_free(c->frozen[i].u.bytes);
		c->frozen[i].frozen = false;
	}
	c->nfrozen = 0;
}

int ht_dump_capture_take(const struct ht_dumper_config *cfg, const struct ht_dump_job *job,
			 struct ht_dump_capture *c)
{
	const struct ht_monitor *m = cfg->monitor;
	struct ht_source_freeze f;

	memset(c, 0, sizeof(*c));
	ht_dump_window(cfg, job, &c->t0, &c->t1);
	c->frozen_ns = ht_clock_ns(CLOCK_MONOTONIC);
	f = (struct ht_source_freeze){
		.frozen_ns = c->frozen_ns,
		.kind = job->kind,
		.threshold_ns = job->threshold_ns,
		.start_ns = job->start_ns,
		.end_ns = job->end_ns,
		.pre_ns = cfg->pre_ns,
		.post_ns = cfg->post_ns,
		.t0 = c->t0,
		.t1 = c->t1,
		.breach = job->has_breach ? &job->breach : NULL,
	};
	for (unsigned int i = 0; i < cfg->nsources && i < HT_SOURCES_OPEN_MAX; i++) {
		struct ht_source_frozen *slot = &c->frozen[c->nfrozen++];
		const struct ht_open_source *src = &cfg->sources[i];

		slot->ops = src->ops;
		slot->state = src->state;
		slot->frozen = !src->ops->freeze(src->state, &f, slot->u.bytes);
	}
	if (ht_recorder_read(&m->recorder, c->t0, c->t1, &c->w)) {
		free_frozen(c);
		return -1;
	}
	capture_marks(cfg, job, c);
	/* Nothing was recorded before attach: that part of the window is clipped too. */
	if (c->t0 < m->attached_ns) {
		c->w.clipped = true;
		if (c->w.covered_from_ns < m->attached_ns)
			c->w.covered_from_ns = m->attached_ns;
	}
	return 0;
}

void ht_dump_capture_free(struct ht_dump_capture *c)
{
	ht_fr_window_free(&c->w);
	for (size_t i = 0; i < c->nmarks; i++)
		ht_mark_set_free(&c->marks[i].set);
	free(c->marks);
	c->marks = NULL;
	c->nmarks = 0;
	free_frozen(c);
}

/* The on-CPU sources' part of the window: their stacks on the thread tracks. */
static void add_sources(struct ht_dump_builder *b, struct timeline *tl,
			const struct ht_dump_job *job, const struct ht_dump_capture *c)
{
	const struct ht_source_lowering l = {
		.tl = tl,
		.tgid = b->cfg->tgid,
		.t0 = c->t0,
		.t1 = c->t1,
		.frozen_ns = c->frozen_ns,
		.live = b->cfg->monitor != NULL,
		.breach = job->has_breach ? &job->breach : NULL,
		.ksyms = b->cfg->ksyms,
		.comms = b->comms,
		.symbols = b->symbols,
	};

	/* Each process's maps are read again when its first stack is named. */
	if (b->symbols)
		ht_symbolizer_set_stale(b->symbols);
	if (!c->nfrozen)
		tl_meta_set(tl, HT_META_SOURCE, "none");
	for (unsigned int i = 0; i < c->nfrozen; i++) {
		const struct ht_source_frozen *f = &c->frozen[i];

		f->ops->lower(f->state, f->frozen ? f->u.bytes : NULL, &l);
	}
	say_symbol_notes(b);
}

static void add_hit_args(struct timeline *tl, long ev, const struct ht_dump_job *job)
{
	tl_event_arg_str(tl, ev, HT_ARG_TRIGGER, job->trigger);
	tl_event_arg_str(tl, ev, HT_ARG_FUNCTION, job->function);
	tl_event_arg_uint(tl, ev, HT_ARG_TID, job->hit.tid);
	tl_event_arg_uint(tl, ev, HT_ARG_CPU, job->hit.cpu);
	tl_event_arg_uint(tl, ev, HT_ARG_IP, job->hit.ip);
	if (!job->hit.regs_valid)
		return;
	tl_event_arg_uint(tl, ev, HT_ARG_RDI, job->hit.arg[0]);
	tl_event_arg_uint(tl, ev, HT_ARG_RSI, job->hit.arg[1]);
	tl_event_arg_uint(tl, ev, HT_ARG_RDX, job->hit.arg[2]);
}

/* A trigger's hit: on the hybtrace track, and on the track of the thread that hit it. */
static void add_trigger_hit(struct timeline *tl, const struct ht_dump_job *job)
{
	long hybtrace = tl_track_find(tl, TL_HYBTRACE_UUID);
	int thread;

	if (!job->has_hit)
		return;
	tl_meta_set(tl, HT_META_TRIGGER, job->trigger);
	if (hybtrace >= 0)
		add_hit_args(tl, tl_add_instant(tl, (int)hybtrace, job->hit.time_ns, HT_EV_TRIGGER,
						HT_CAT_BREACH), job);
	thread = tl_thread_track(tl, (int)job->hit.pid, (int)job->hit.tid);
	if (thread >= 0)
		add_hit_args(tl, tl_add_instant(tl, thread, job->hit.time_ns, HT_EV_TRIGGER,
						HT_CAT_USER), job);
}

/* A thread's track, remembered by tid: a process's marks come in time order, threads mixed. */
struct mark_track {
	int tid, track;
};

static int mark_track_cmp(const void *x, const void *y)
{
	const struct mark_track *a = x, *b = y;

	return (a->tid > b->tid) - (a->tid < b->tid);
}

/* Thread TID's track under process TGID's group (made when the window had none). */
static int mark_thread_track(struct timeline *tl, struct ht_comm_cache *comms, int tgid, int tid,
			     struct mark_track **known, size_t *n)
{
	struct mark_track key = { .tid = tid }, *hit, *v;
	size_t at;

	hit = *n ? bsearch(&key, *known, *n, sizeof(key), mark_track_cmp) : NULL;
	if (hit)
		return hit->track;
	if (ht_timeline_process_track(tl, comms, tgid) < 0)
		return -1;
	key.track = tl_thread_track(tl, tgid, tid);
	v = realloc(*known, (*n + 1) * sizeof(*v));
	if (!v)
		return key.track;
	for (at = *n; at > 0 && v[at - 1].tid > tid; at--)
		v[at] = v[at - 1];
	v[at] = key;
	*known = v;
	(*n)++;
	return key.track;
}

/*
 * User marks as instants on their threads' tracks, each under its own
 * process's group, named as the program named them.
 */
static void add_marks(struct timeline *tl, struct ht_comm_cache *comms,
		      const struct ht_dump_capture *c)
{
	uint64_t lost = 0;
	char name[32];

	if (!c->marks_on)
		return;
	for (size_t p = 0; p < c->nmarks; p++) {
		const struct ht_proc_marks *pm = &c->marks[p];
		struct mark_track *known = NULL;
		size_t nknown = 0;

		lost += pm->set.torn + pm->set.overwritten + pm->set.unreadable;
		for (size_t i = 0; i < pm->set.count; i++) {
			const struct ht_mark *mk = &pm->set.v[i];
			int track = mark_thread_track(tl, comms, pm->tgid, mk->tid, &known, &nknown);
			long ev;

			if (track < 0)
				continue;
			snprintf(name, sizeof(name), HT_EV_MARK " %u", mk->id);
			ev = tl_add_instant(tl, track, mk->time_ns, mk->name ? mk->name : name,
					    HT_CAT_USER);
			tl_event_arg_uint(tl, ev, HT_ARG_MARK_ID, mk->id);
			tl_event_arg_uint(tl, ev, HT_ARG_MARK_A, mk->a);
			tl_event_arg_uint(tl, ev, HT_ARG_MARK_B, mk->b);
		}
		free(known);
	}
	meta_u64(tl, HT_META_LOSS_MARKS, lost);
	meta_u64(tl, HT_META_LOSS_MARK_PROCESSES, c->marks_lost_processes);
	meta_u64(tl, HT_META_MARK_PROCESSES, c->marks_processes);
	meta_u64(tl, HT_META_MARKS_READ_NS, c->marks_read_ns);
}

/*
 * When the sleep the breach's kernel stack was taken on began: an off-CPU
 * breach's own; a syscall's off-CPU interval over its threshold; else the
 * syscall's last switch-out (its stack is kept at each switch-in once it is
 * too long). 0 for a wait on the run queue, which has no blocked function.
 */
static uint64_t breach_sleep_start(const struct ht_breach *br, const struct ht_fr_window *w)
{
	uint64_t last = 0;

	if (br->kind == HT_BREACH_OFF_CPU)
		return br->start_ns;
	if (br->kind != HT_BREACH_SYSCALL)
		return 0;
	if (br->off_cpu_end_ns)
		return br->off_cpu_start_ns;
	for (size_t i = 0; i < w->count; i++) {
		const struct ht_flight_record *r = &w->events[i].rec;

		if (r->kind == HT_FR_SWITCH && r->tid_a == br->tid && r->ts_ns < br->end_ns &&
		    r->ts_ns >= br->start_ns && r->ts_ns > last)
			last = r->ts_ns;
	}
	return last;
}

/* The function the breached thread blocked in, from the kernel stack it slept on. */
static size_t breach_blocked_reason(const struct ht_dump_builder *b, const struct ht_dump_job *job,
				    const struct ht_dump_capture *c, char *fn, size_t len,
				    struct ht_blocked_reason *out)
{
	const struct ht_breach *br = &job->breach;
	int depth = br->kstack_bytes > 0 ? br->kstack_bytes / (int)sizeof(uint64_t) : 0;
	bool io_wait;

	if (!job->has_breach || depth > HT_MAX_KSTACK_DEPTH)
		return 0;
	*out = (struct ht_blocked_reason){
		.tid = br->tid,
		.switch_out_ns = breach_sleep_start(br, &c->w),
	};
	if (!out->switch_out_ns ||
	    !ht_blocked_function((const uint64_t *)br->kstack, depth, b->cfg->ksyms, fn, len, &io_wait))
		return 0;
	out->function = fn;
	out->io_wait = io_wait;
	return 1;
}

/*
 * The window's scheduling data in Perfetto's native form (kernel/sched_ftrace.h),
 * into NATIVE; nothing without a clock snapshot to put it on BOOTTIME.
 */
static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return (a > b) - (a < b);
}

static int build_native_sched(struct ht_dump_builder *b, const struct timeline *tl,
			      const struct ht_dump_job *job, const struct ht_dump_capture *c,
			      const struct ht_sched_index *idx, struct pb_buf *native)
{
	struct ht_blocked_reason blocked;
	char blocked_fn[128];
	const struct tl_clock_snapshot *snap = tl_clock_snapshot(tl);
	const char *release = tl_meta_get(tl, HT_META_KERNEL);
	struct ht_sched_ftrace_window sw = {
		.t0 = c->t0,
		.t1 = c->t1,
		.w = &c->w,
		.idx = idx,
		.comms = b->comms,
		.kernel_release = release ? release : "",
		.blocked = &blocked,
	};

	uint32_t *described;
	int rc;

	if (!snap)
		return 0;
	sw.nblocked = breach_blocked_reason(b, job, c, blocked_fn, sizeof(blocked_fn), &blocked);
	sw.boottime_offset_ns = (int64_t)(snap->boottime_ns - snap->monotonic_ns);
	/*
	 * The processes of the threads the timeline describes, where the comm
	 * map and /proc no longer know them (an exited thread; a decode, whose
	 * raw capture keeps comms only): the native part names the same.
	 */
	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_THREAD && t->pid > 0 && t->tid > 0 &&
		    !ht_comm_tgid(b->comms, (uint32_t)t->tid) &&
		    ht_comm_cache_seed_tgid(b->comms, (uint32_t)t->tid, (uint32_t)t->pid))
			return -1;
	}
	described = malloc((tl_track_count(tl) + 1) * sizeof(*described));
	if (!described)
		return ht_fail("out of memory");
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (tl_track(tl, i)->kind == TL_TRACK_THREAD && tl_track(tl, i)->tid > 0)
			described[sw.ndescribed++] = (uint32_t)tl_track(tl, i)->tid;
	qsort(described, sw.ndescribed, sizeof(*described), cmp_u32);
	sw.described = described;
	rc = ht_sched_ftrace_write(&sw, native);
	free(described);
	return rc;
}

/*
 * The waker's stacks as the frames of one call stack, root first: its user
 * frames (named by its process's symbols, made for it when no source made
 * them), then its kernel frames.
 */
static size_t waker_frames(struct ht_dump_builder *b, const struct ht_waker_stack *ws,
			   struct tl_frame_desc *frames, char (*names)[256])
{
	int uframes = ws->ustack_bytes > 0 ? ws->ustack_bytes / (int)sizeof(uint64_t) : 0;
	int kframes = ws->kstack_bytes > 0 ? ws->kstack_bytes / (int)sizeof(uint64_t) : 0;
	int kstart = ht_waker_stack_kernel_start(ws, b->cfg->ksyms);
	struct ht_symbolizer *sym = NULL;
	size_t n = 0;

	if (uframes > HT_WAKER_STACK_DEPTH)
		uframes = HT_WAKER_STACK_DEPTH;
	if (kframes > HT_WAKER_STACK_DEPTH)
		kframes = HT_WAKER_STACK_DEPTH;
	if (uframes && !b->symbols)
		b->symbols = ht_symbolizer_set_new(false, 0);
	/* The maps read before, unless a frame lies outside them: reading them costs most. */
	if (uframes && b->symbols) {
		sym = ht_symbolizer_set_held(b->symbols, (int)ws->waker_tgid);
		for (int i = 0; sym && i < uframes; i++) {
			struct ht_symbol s = { 0 };

			if (ht_symbolize(sym, ws->ustack[i], &s) || !s.module) {
				sym = ht_symbolizer_set_get(b->symbols, (int)ws->waker_tgid);
				break;
			}
		}
	}
	for (int i = uframes - 1; i >= 0; i--, n++) {
		struct ht_symbol s = { 0 };
		uint64_t addr = ws->ustack[i];

		/* A return address points past its call: name the call's own line. */
		if (sym && !ht_symbolize(sym, i ? addr - 1 : addr, &s))
			ht_symbol_format(&s, addr, names[n], sizeof(names[n]));
		else
			snprintf(names[n], sizeof(names[n]), "0x%llx", (unsigned long long)addr);
		frames[n] = (struct tl_frame_desc){ .function = names[n],
						    .module = s.module ? s.module : "",
						    .address = addr };
	}
	for (int i = kframes - 1; i >= kstart; i--, n++) {
		frames[n] = (struct tl_frame_desc){
			.function = ht_ksyms_format(b->cfg->ksyms, ws->kstack[i], names[n],
						    sizeof(names[n])),
			.module = "[kernel]",
			.address = ws->kstack[i],
		};
	}
	return n;
}

/* The waker's stacks at the wakeup that ended the breach's wait, on the waker's own track. */
static void add_waker_stack(struct ht_dump_builder *b, struct timeline *tl,
			    const struct ht_dump_job *job)
{
	struct tl_frame_desc frames[2 * HT_WAKER_STACK_DEPTH];
	const struct ht_waker_stack *ws = &job->waker_stack;
	char (*names)[256] = calloc(2 * HT_WAKER_STACK_DEPTH, sizeof(*names));
	char comm[HT_COMM_LEN + 8];
	int track;
	long ev;

	if (!names)
		return;
	if (ht_timeline_process_track(tl, b->comms, (int)ws->waker_tgid) >= 0 &&
	    (track = tl_thread_track(tl, (int)ws->waker_tgid, (int)ws->waker_tid)) >= 0 &&
	    (ev = tl_add_instant(tl, track, ws->time_ns, HT_EV_WOKE, HT_CAT_CHAIN)) >= 0) {
		snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, job->breach.comm);
		tl_event_arg_uint(tl, ev, HT_ARG_WAKEE_TID, ws->wakee_tid);
		tl_event_arg_str(tl, ev, HT_ARG_WAKEE_COMM, comm);
		snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, ws->waker_comm);
		tl_event_arg_uint(tl, ev, HT_ARG_WAKER_TID, ws->waker_tid);
		tl_event_arg_str(tl, ev, HT_ARG_WAKER_COMM, comm);
		tl_event_callstack(tl, ev, frames, waker_frames(b, ws, frames, names));
	}
	free(names);
}

/* The breach's wait chain as a JSON line of its own, once its dump is written. */
static void print_chain(struct ht_dump_builder *b, const struct ht_dump_job *job,
			const struct ht_wait_chain *chain, const char *path)
{
	struct ht_chain_summary sum = {
		.tid = chain->tid,
		.start_ns = chain->start_ns,
		.end_ns = chain->end_ns,
		.max_depth = chain->max_depth,
		.cut_by_window = chain->cut_by_window,
		.truncated = chain->truncated,
	};
	char (*names)[3][HT_CHAIN_NAME_LEN] = calloc(chain->count, sizeof(*names));
	char (*states)[16] = calloc(chain->count, sizeof(*states));
	struct ht_chain_line *lines = calloc(chain->count, sizeof(*lines));
	FILE *out = b->json_out;
	struct ht_json j;

	if (chain->count && (!names || !states || !lines))
		goto out;
	for (size_t i = 0; i < chain->count; i++)
		ht_chain_line_of(chain, i, ht_comm_name, b->comms, names[i], states[i],
				 sizeof(states[i]), &lines[i]);
	ht_json_begin(&j, out);
	ht_json_str(&j, "type", "chain");
	ht_json_str(&j, "kind", job->kind);
	ht_json_u64(&j, "tid", job->breach.tid);
	ht_json_u64(&j, "pid", job->breach.tgid);
	ht_json_u64(&j, "breach_start_ns", job->breach.start_ns);
	ht_json_u64(&j, "breach_end_ns", job->breach.end_ns);
	ht_json_str(&j, "dump", path);
	ht_chain_json(&j, "chain", &sum, lines, chain->count);
	ht_json_end_line(&j);
	fflush(out);
out:
	free(names);
	free(states);
	free(lines);
}

/*
 * Lower the captured window into TL, and its native scheduling data into
 * NATIVE; a breach's wait chain, computed on the way, into CHAIN.
 */
static int build_timeline(struct ht_dump_builder *b, struct timeline *tl,
			  const struct ht_dump_job *job, const struct ht_dump_capture *c,
			  uint64_t not_dumped, struct pb_buf *native, struct ht_wait_chain *chain)
{
	char target_comm[HT_COMM_LEN + 8], dump_comm[HT_COMM_LEN + 8];
	int process = dump_process(b->cfg, job);
	struct tl_clock_snapshot snap;
	struct ht_source_origin origin;
	struct ht_kernel_window kw;
	struct ht_sched_index idx;
	int rc;

	/* `run` named the target before its exec: what it is called now is what counts. */
	ht_comm_lookup(b->comms, (uint32_t)b->cfg->tgid, 0, target_comm, sizeof(target_comm));
	ht_comm_lookup(b->comms, (uint32_t)process, 0, dump_comm, sizeof(dump_comm));
	if (ht_sched_index_build(&c->w, &idx))
		return -1;
	kw = (struct ht_kernel_window){
		.tgid = b->cfg->tgid,
		.target_comm = target_comm,
		.t0 = c->t0,
		.t1 = c->t1,
		.w = &c->w,
		.idx = &idx,
		.comms = b->comms,
		.ksyms = b->cfg->ksyms,
		.breach = job->has_breach ? &job->breach : NULL,
		.threshold_ns = job->threshold_ns,
		.chain_depth = job->has_breach ? b->cfg->chain_depth : 0,
	};
	if (kw.chain_depth &&
	    ht_wait_chain_compute(&c->w, &idx, &job->breach, kw.chain_depth, chain))
		kw.chain = chain;
	/* A raw capture's moment on the three clocks, so a decode elsewhere lines up the same. */
	if (capture_origin(c, &origin) && origin.mono_ns) {
		snap = (struct tl_clock_snapshot){ .monotonic_ns = origin.mono_ns,
						   .boottime_ns = origin.boot_ns,
						   .realtime_ns = origin.real_ns };
		tl_set_clock_snapshot(tl, &snap);
	} else if (!tl_clock_snapshot_now(&snap)) {
		tl_set_clock_snapshot(tl, &snap);
	}
	set_metadata(b->cfg, tl, job, c, not_dumped);
	tl_meta_set(tl, HT_META_TARGET_COMM, process ? dump_comm : "");
	/* Of several target processes, the one this dump is of (`report DIR --by-process`). */
	if (job->has_breach || job->has_hit) {
		uint32_t pid = job->has_breach ? job->breach.tgid : job->hit.pid;
		char comm[HT_COMM_LEN + 8];

		meta_u64(tl, HT_META_PROCESS_PID, pid);
		tl_meta_set(tl, HT_META_PROCESS_COMM,
			    ht_comm_lookup(b->comms, pid, 0, comm, sizeof(comm)));
	}
	rc = ht_kernel_timeline_build(tl, &kw);
	if (!rc) {
		add_sources(b, tl, job, c);
		if (job->has_block_stack &&
		    ht_block_frames_to_timeline(tl, process, &job->block_stack))
			ht_warn("dump without the stack where it blocked: %s", ht_last_error());
		add_trigger_hit(tl, job);
		if (job->has_waker_stack)
			add_waker_stack(b, tl, job);
		add_marks(tl, b->comms, c);
		meta_u64(tl, HT_META_UNTANGLED, tl_untangle(tl));
		/* Last: it reads which threads the rest gave a track. */
		rc = build_native_sched(b, tl, job, c, &idx, native);
	}
	ht_sched_index_free(&idx);
	return rc;
}

/* What the sources keep beside the dump just written (--keep-raw: Intel PT's raw capture). */
static void sources_written(struct ht_dump_builder *b, const struct ht_dump_capture *c,
			    const char *dump_path)
{
	struct ht_source_written wr = {
		.dump_path = dump_path,
		.output_dir = b->cfg->output_dir,
		.cmdline = b->cfg->cmdline,
		.json = b->cfg->json,
		.tgid = b->cfg->tgid,
		.w = &c->w,
		.comms = b->comms,
		.ksyms = b->cfg->ksyms,
		.kept_path = b->raw_path,
		.kept_len = sizeof(b->raw_path),
	};

	for (unsigned int i = 0; i < c->nfrozen; i++) {
		const struct ht_source_frozen *f = &c->frozen[i];

		if (f->frozen && f->ops->written)
			f->ops->written(f->state, f->u.bytes, &wr);
	}
}

/* Packets after the ones pftw_write_fd() wrote: a trace is packets one after another. */
static int append_packets(int fd, const struct pb_buf *packets)
{
	const uint8_t *p = packets->data;
	size_t left = packets->len;

	while (left) {
		ssize_t n = write(fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

int ht_dump_builder_write(struct ht_dump_builder *b, const struct ht_dump_job *job,
			  const struct ht_dump_capture *c, uint64_t not_dumped, char *path,
			  size_t len, uint64_t *bytes, size_t *events)
{
	struct timeline *tl = tl_new();
	struct ht_wait_chain chain = {0};
	struct ht_output_file f;
	struct pb_buf native;
	char base[256], err[256];
	struct stat st;
	int rc = -1;

	b->raw_path[0] = '\0';
	pb_buf_init(&native);
	if (!tl)
		return ht_fail("out of memory");
	if (build_timeline(b, tl, job, c, not_dumped, &native, &chain))
		goto out;
	*events = tl_event_count(tl);
	if (b->cfg->base_name)
		snprintf(base, sizeof(base), "%s", b->cfg->base_name);
	else
		ht_dump_base_name(dump_process(b->cfg, job), ht_monotonic_to_realtime(job->end_ns),
				  job->kind, base, sizeof(base));
	if (ht_output_begin(b->cfg->output_dir, &f))
		goto out;
	if (pftw_write_fd(tl, f.fd, err, sizeof(err))) {
		ht_output_abort(&f);
		ht_fail("cannot write the dump in %s: %s", b->cfg->output_dir, err);
		goto out;
	}
	rc = append_packets(f.fd, &native);
	if (rc) {
		ht_output_abort(&f);
		ht_fail("cannot write the dump in %s: %s", b->cfg->output_dir, strerror(-rc));
		rc = -1;
		goto out;
	}
	if (fstat(f.fd, &st))
		memset(&st, 0, sizeof(st));
	*bytes = (uint64_t)st.st_size;
	b->written_dev = (uint64_t)st.st_dev;
	b->written_ino = (uint64_t)st.st_ino;
	rc = ht_output_commit(&f, b->cfg->output_dir, base, path, len);
	if (!rc)
		sources_written(b, c, path);
	if (!rc && b->cfg->json && chain.stretches)
		print_chain(b, job, &chain, path);
out:
	ht_wait_chain_free(&chain);
	pb_buf_free(&native);
	tl_free(tl);
	return rc;
}

/*
 * Symbols (and DWARF unwinding) for every target process, kept across
 * dumps, made for a process when a dump first has its samples. The target
 * named gets its own now, so that its files are held from the start (it
 * may exit right after a breach). Without them dumps still come, with
 * addresses for names; a process that is already gone needs no word.
 */
static int start_symbolizing(struct ht_dump_builder *b, bool dwarf)
{
	b->symbols = ht_symbolizer_set_new(dwarf, 0);
	if (!b->symbols)
		return -1;
	if (b->cfg->tgid > 0 && ht_symbolizer_set_get(b->symbols, b->cfg->tgid) && dwarf)
		ht_symbolizer_set_unwinder(b->symbols, b->cfg->tgid);
	say_symbol_notes(b);
	return 0;
}

int ht_dump_builder_init(struct ht_dump_builder *b, const struct ht_dumper_config *cfg)
{
	unsigned int symbols = 0;

	memset(b, 0, sizeof(*b));
	b->cfg = cfg;
	b->json_out = cfg->json_out;
	b->comms = malloc(sizeof(*b->comms));
	if (!b->comms)
		return ht_fail("out of memory");
	ht_comm_cache_init(b->comms, cfg->monitor);
	for (unsigned int i = 0; i < cfg->nsources; i++)
		if (cfg->sources[i].ops->symbols)
			symbols |= cfg->sources[i].ops->symbols(cfg->sources[i].state);
	if ((symbols & HT_SOURCE_SYMBOLS) && start_symbolizing(b, symbols & HT_SOURCE_DWARF)) {
		ht_dump_builder_free(b);
		return -1;
	}
	return 0;
}

void ht_dump_builder_free(struct ht_dump_builder *b)
{
	ht_symbolizer_set_free(b->symbols);
	if (b->comms)
		ht_comm_cache_free(b->comms);
	free(b->comms);
	memset(b, 0, sizeof(*b));
}
