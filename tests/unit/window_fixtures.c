// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only, linked into the tests that use it: see window_fixtures.h. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "base/log.h"
#include "kernel/sched_ftrace.h"
#include "kernel/sched_index.h"
#include "window_fixtures.h"

struct ht_fr_event fx_fr_event(unsigned int cpu, uint64_t ts_ns, uint8_t kind, uint8_t flags,
			       uint32_t tid_a, uint32_t tid_b, uint16_t aux, uint64_t arg)
{
	struct ht_fr_event e;

	memset(&e, 0, sizeof(e));
	e.cpu = cpu;
	e.rec.ts_ns = ts_ns;
	e.rec.kind = kind;
	e.rec.flags = flags;
	e.rec.tid_a = tid_a;
	e.rec.tid_b = tid_b;
	e.rec.aux = aux;
	e.rec.arg = arg;
	return e;
}

static struct ht_fr_event no_entry_switch[2];
static bool no_entry_valid[2];

struct ht_fr_window fx_fr_window(struct ht_fr_event *events, size_t count, uint64_t t0, uint64_t t1)
{
	return (struct ht_fr_window){.t0 = t0,
				     .t1 = t1,
				     .events = events,
				     .count = count,
				     .ncpus = 2,
				     .entry_switch = no_entry_switch,
				     .entry_valid = no_entry_valid};
}

int fx_kernel_timeline_lower(struct timeline *tl, struct ht_kernel_window *kw)
{
	struct ht_sched_index idx;
	int rc = 0;

	if (ht_sched_index_build(kw->w, &idx)) {
		printf("     sched index: %s\n", ht_last_error());
		return -1;
	}
	kw->idx = &idx;
	if (ht_kernel_timeline_build(tl, kw)) {
		printf("     kernel timeline: %s\n", ht_last_error());
		rc = -1;
	}
	kw->idx = NULL;
	ht_sched_index_free(&idx);
	return rc;
}

int fx_dump_lower(struct timeline *tl, struct ht_kernel_window *kw, struct pb_buf *native)
{
	struct tl_clock_snapshot snap = {
		.boottime_ns = kw->t0 + 500, .monotonic_ns = kw->t0, .realtime_ns = kw->t0};
	struct ht_sched_ftrace_window sw = {.t0 = kw->t0,
					    .t1 = kw->t1,
					    .w = kw->w,
					    .comms = kw->comms,
					    .boottime_offset_ns = 500,
					    .kernel_release = "6.18.0"};
	struct ht_sched_index idx;
	int rc = 0;

	tl_set_clock_snapshot(tl, &snap);
	if (fx_kernel_timeline_lower(tl, kw))
		return -1;
	if (ht_sched_index_build(kw->w, &idx)) {
		printf("     sched index: %s\n", ht_last_error());
		return -1;
	}
	sw.idx = &idx;
	if (ht_sched_ftrace_write(&sw, native)) {
		printf("     native scheduling data: %s\n", ht_last_error());
		rc = -1;
	}
	ht_sched_index_free(&idx);
	return rc;
}

const struct tl_event *fx_kernel_event(const struct timeline *tl, uint32_t tid, const char *name,
				       int n)
{
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t = tl_track(tl, e->track);

		if (t->kind == TL_TRACK_THREAD_KERNEL && (uint32_t)t->tid == tid &&
		    !strcmp(tl_str_get(tl, e->name), name) && n-- == 0)
			return e;
	}
	return NULL;
}

bool fx_arg_is(const struct timeline *tl, const struct tl_event *e, const char *name,
	       const char *want)
{
	const struct tl_arg *a = e ? tl_event_find_arg(tl, e, name) : NULL;

	return a && a->kind == TL_ARG_STR && !strcmp(tl_str_get(tl, a->s), want);
}
