// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Building one dump (dump_build.h) offline: a flight-recorder window, a
 * sampling ring with known stacks, user marks and a trigger's hit, written
 * by the builder into a directory and read back from the file, checked
 * field by field against what went in. The sampling source is the real one
 * (sample_source.c), frozen and lowered through its operations, on a ring
 * mapped by hand. The target is this process, so the symbolizer names the
 * sampled frames after this file's functions.
 */
#include <limits.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "base/output.h"
#include "dump/dump_build.h"
#include "kernel/comm_cache.h"
#include "sources/sample/sample_source.h"
#include "sources/sample/sampler.h"
#include "trace/dump_schema.h"
#include "trace/perfetto_read.h"
#include "trace/timeline.h"
#include "window_fixtures.h"

#define HOG	   9000 /* another process, that ran while the target waited */
#define PERIOD_NS  100
#define RING_BYTES 4096

static char dir[] = "/tmp/hybtrace-test-dump-build-XXXXXX";
static int tgid; /* this process: its main thread is the breached one */

/* Functions of this test binary, called nowhere: the sampled stacks' frames. */
__attribute__((noinline)) void db_root_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void db_mid_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void db_leaf_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

/* The flight record: the target sleeps at 400, the hog runs, a timer wakes it at 1000, it runs at
 * 5000. */
static struct ht_fr_event events[8];

/*
 * A sampling ring's mapping as the kernel lays it out for the sampler: the
 * header page (the head the freeze reads), then the data, written backward.
 */
static struct {
	struct perf_event_mmap_page page;
	uint8_t data[RING_BYTES];
} mapping;
static uint8_t *const ring = mapping.data;
static uint64_t ring_head;

static void put_sample(uint32_t pid, uint32_t tid, uint64_t time_ns,
		       const uint64_t *user_leaf_first, int nuser)
{
	uint64_t rec[32];
	struct perf_event_header *h = (struct perf_event_header *)rec;
	int n = 1;

	rec[n++] = user_leaf_first[0];	      /* ip */
	rec[n++] = pid | (uint64_t)tid << 32; /* pid, tid */
	rec[n++] = time_ns;
	rec[n++] = 0;	      /* cpu */
	rec[n++] = PERIOD_NS; /* period */
	rec[n++] = (uint64_t)nuser + 1;
	rec[n++] = HT_PERF_CONTEXT_USER;
	for (int i = 0; i < nuser; i++)
		rec[n++] = user_leaf_first[i];
	h->type = PERF_RECORD_SAMPLE;
	h->misc = PERF_RECORD_MISC_USER;
	h->size = (uint16_t)(n * 8);
	ring_head -= (uint64_t)n * 8;
	for (size_t i = 0; i < (size_t)n * 8; i++)
		ring[(ring_head + i) & (RING_BYTES - 1)] = ((const uint8_t *)rec)[i];
}

/* A return address inside FN: what a frame-pointer walk finds for a caller. */
static uint64_t return_in(void (*fn)(void))
{
	return (uint64_t)(uintptr_t)fn + 1;
}

/* What every test's dump is made of; a change of the builder's inputs is an edit here. */
/* A second process, with marks only. */
#define OTHER_PID 424200
#define OTHER_TID 424201

struct inputs {
	struct ht_dumper_config cfg;
	/* The sampling source as its open op would leave it, but on the mapping above. */
	struct ht_sampler sampler;
	struct ht_sampler_ring sampler_ring;
	struct ht_open_source source;
	struct ht_dump_job job;
	struct ht_dump_capture c;
	struct ht_mark marks[3];
	struct ht_proc_marks procs[2];
};

static void make_config(struct inputs *in, bool sampling)
{
	memset(&in->cfg, 0, sizeof(in->cfg));
	in->cfg.output_dir = dir;
	in->cfg.pre_ns = 900;
	in->cfg.post_ns = 1000;
	in->cfg.tgid = tgid;
	in->cfg.target_comm = "before-exec";
	in->cfg.cmdline = "hybtrace run -- target";
	memset(&in->sampler, 0, sizeof(in->sampler));
	in->sampler.cfg.tgid = tgid;
	in->sampler.cfg.freq_hz = 10000000;
	in->sampler.cfg.ring_bytes = RING_BYTES;
	in->sampler.cfg.callgraph = HT_CALLGRAPH_FP;
	in->sampler.format.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
					 PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
					 PERF_SAMPLE_CALLCHAIN;
	in->sampler.period_ns = PERIOD_NS;
	/* No event behind the ring (fd -1): the freeze's pauses fail, its copy is made. */
	in->sampler_ring = (struct ht_sampler_ring){
		.fd = -1, .base = &mapping, .mmap_len = sizeof(mapping), .data_size = RING_BYTES};
	in->sampler.ncpus = 1;
	in->sampler.rings = &in->sampler_ring;
	in->sampler.open = true;
	in->source = (struct ht_open_source){.ops = &ht_sample_source, .state = &in->sampler};
	if (sampling) {
		in->cfg.sources = &in->source;
		in->cfg.nsources = 1;
	}
}

/* The rq-delay of the target's main thread from 1000 to 5000, over a 1000 ns threshold. */
static void make_breach_job(struct inputs *in)
{
	memset(&in->job, 0, sizeof(in->job));
	snprintf(in->job.kind, sizeof(in->job.kind), "rq-delay");
	in->job.has_breach = true;
	in->job.breach = (struct ht_breach){.kind = HT_BREACH_RQ_DELAY,
					    .tid = (uint32_t)tgid,
					    .tgid = (uint32_t)tgid,
					    .start_ns = 1000,
					    .end_ns = 5000};
	snprintf(in->job.breach.comm, sizeof(in->job.breach.comm), "target");
	in->job.threshold_ns = 1000;
	in->job.start_ns = 1000;
	in->job.end_ns = 5000;
	in->job.has_hit = true;
	in->job.hit = (struct ht_bp_hit){.time_ns = 800,
					 .ip = 0x401234,
					 .arg = {1, 2, 3},
					 .pid = (uint32_t)tgid,
					 .tid = (uint32_t)tgid,
					 .cpu = 1,
					 .regs_valid = 1};
	snprintf(in->job.trigger, sizeof(in->job.trigger), "db_leaf_fn");
	snprintf(in->job.function, sizeof(in->job.function), "db_leaf_fn");
}

/*
 * The capture of the window the job asks for: the flight record above, the
 * samples (two before the wait, two after, one on each side outside the
 * window) frozen by each source configured, as ht_dump_capture_take freezes
 * them, two marks.
 */
static void make_capture(struct inputs *in)
{
	const uint64_t three[] = {(uint64_t)(uintptr_t)db_leaf_fn, return_in(db_mid_fn),
				  return_in(db_root_fn)};
	const uint64_t two[] = {(uint64_t)(uintptr_t)db_mid_fn, return_in(db_root_fn)};
	struct ht_dump_capture *c = &in->c;
	struct ht_source_freeze f;
	size_t n = 0;

	memset(c, 0, sizeof(*c));
	ht_dump_window(&in->cfg, &in->job, &c->t0, &c->t1);
	c->frozen_ns = c->t1 + 250;
	events[n++] = fx_fr_event(0, 400, HT_FR_SWITCH, HT_FRF_PREV_TARGET, (uint32_t)tgid, 0, 0,
				  1 /* S */);
	events[n++] = fx_fr_event(0, 500, HT_FR_SWITCH, 0, 0, HOG, 0, 0);
	events[n++] = fx_fr_event(0, 1000, HT_FR_WAKEUP, HT_FRF_TARGET, (uint32_t)tgid, 0, 0,
				  HT_WAKE_TIMER);
	events[n++] =
		fx_fr_event(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, (uint32_t)tgid, 0, 0);
	c->w = fx_fr_window(events, n, c->t0, c->t1);
	c->w.skipped_records = 4;

	memset(&mapping, 0, sizeof(mapping));
	ring_head = 0;
	put_sample((uint32_t)tgid, (uint32_t)tgid, 50, three, 3); /* before t0 */
	put_sample((uint32_t)tgid, (uint32_t)tgid, 200, three, 3);
	put_sample((uint32_t)tgid, (uint32_t)tgid, 300, three, 3);
	put_sample((uint32_t)tgid, (uint32_t)tgid, 5100, two, 2);
	put_sample((uint32_t)tgid, (uint32_t)tgid, 5200, two, 2);
	put_sample((uint32_t)tgid, (uint32_t)tgid, 6500, two, 2); /* after t1 */
	mapping.page.data_head = ring_head;
	f = (struct ht_source_freeze){
		.frozen_ns = c->frozen_ns,
		.kind = in->job.kind,
		.threshold_ns = in->job.threshold_ns,
		.start_ns = in->job.start_ns,
		.end_ns = in->job.end_ns,
		.pre_ns = in->cfg.pre_ns,
		.post_ns = in->cfg.post_ns,
		.breach = in->job.has_breach ? &in->job.breach : NULL,
	};
	for (unsigned int i = 0; i < in->cfg.nsources && i < HT_SOURCES_OPEN_MAX; i++) {
		struct ht_source_frozen *slot = &c->frozen[c->nfrozen++];
		const struct ht_open_source *src = &in->cfg.sources[i];

		slot->ops = src->ops;
		slot->state = src->state;
		slot->frozen = !src->ops->freeze(src->state, &f, slot->u.bytes);
		CHECK(slot->frozen);
	}

	in->marks[0] = (struct ht_mark){.time_ns = 2500,
					.a = 11,
					.b = 22,
					.id = 7,
					.tid = tgid,
					.name = "checkpoint",
					.name_index = -1};
	in->marks[1] = (struct ht_mark){
		.time_ns = 5500, .a = 33, .b = 44, .id = 9, .tid = tgid, .name_index = -1};
	/* Another process's mark, on a thread the window has no track for. */
	in->marks[2] = (struct ht_mark){.time_ns = 3000,
					.a = 55,
					.id = 3,
					.tid = OTHER_TID,
					.name = "other",
					.name_index = -1};
	in->procs[0] = (struct ht_proc_marks){.tgid = tgid,
					      .set = {.v = in->marks,
						      .count = 2,
						      .cap = 2,
						      .torn = 1,
						      .overwritten = 2,
						      .unreadable = 3}};
	in->procs[1] = (struct ht_proc_marks){.tgid = OTHER_PID,
					      .set = {.v = &in->marks[2], .count = 1, .cap = 1}};
	c->marks_on = true;
	c->marks = in->procs;
	c->nmarks = 2;
	c->marks_processes = 2;
	c->marks_lost_processes = 1;
}

/* What the sources froze; the rest of the capture is this file's. */
static void free_inputs(struct inputs *in)
{
	for (unsigned int i = 0; i < in->c.nfrozen; i++)
		if (in->c.frozen[i].frozen)
			in->c.frozen[i].ops->frozen_free(in->c.frozen[i].u.bytes);
	in->c.nfrozen = 0;
}

struct written {
	int rc;
	char path[PATH_MAX + 64];
	uint64_t bytes;
	size_t events;
};

/* The builder, as the dumper runs it: init, names known to it, write, free. */
static struct written build_and_write(struct inputs *in, uint64_t not_dumped)
{
	struct ht_dump_builder b;
	struct written out = {.rc = -1};

	CHECK(!ht_dump_builder_init(&b, &in->cfg));
	/* Names as the live comm map would give them; not this machine's /proc. */
	b.comms->offline = true;
	CHECK(!ht_comm_cache_seed(b.comms, (uint32_t)tgid, "target"));
	CHECK(!ht_comm_cache_seed(b.comms, HOG, "hog"));
	out.rc = ht_dump_builder_write(&b, &in->job, &in->c, not_dumped, out.path, sizeof(out.path),
				       &out.bytes, &out.events);
	ht_dump_builder_free(&b);
	return out;
}

static struct timeline *read_back(const char *path)
{
	char err[256] = "";
	struct timeline *tl = pftr_read_path(path, NULL, err, sizeof(err));

	CHECK(tl != NULL);
	if (!tl)
		printf("     %s: %s\n", path, err);
	return tl;
}

static void check_meta(const struct timeline *tl, const char *key, const char *want)
{
	const char *got = tl_meta_get(tl, key);

	if (!got || strcmp(got, want))
		printf("     %s: want \"%s\"\n", key, want);
	CHECK_STR(got, want);
}

static void check_meta_u64(const struct timeline *tl, const char *key, uint64_t want)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)want);
	check_meta(tl, key, buf);
}

/* The events named NAME on tracks of thread TID (0: the hybtrace track), in canonical order. */
static size_t find_events_on(const struct timeline *tl, enum tl_track_kind kind, int tid,
			     const char *name, const struct tl_event **out, size_t cap)
{
	uint32_t *order = tl_sorted_order(tl);
	size_t n = 0;

	for (size_t k = 0; order && k < tl_event_count(tl); k++) {
		const struct tl_event *e = tl_event(tl, order[k]);
		const struct tl_track *t = tl_track(tl, e->track);
		bool on = tid ? t->kind == kind && t->tid == tid : t->uuid == TL_HYBTRACE_UUID;

		if (on && !strcmp(tl_str_get(tl, e->name), name) && n < cap)
			out[n++] = e;
	}
	free(order);
	return n;
}

/* Events called NAME on thread TID's own track, or with TID 0 on the hybtrace track. */
static size_t find_events(const struct timeline *tl, int tid, const char *name,
			  const struct tl_event **out, size_t cap)
{
	return find_events_on(tl, TL_TRACK_THREAD, tid, name, out, cap);
}

/* Argument NAME of E as an unsigned number, or as text in TEXT; false when it has none. */
static bool arg_of(const struct timeline *tl, const struct tl_event *e, const char *name,
		   uint64_t *value, const char **text)
{
	const struct tl_event_lists *l = tl_event_lists(tl, e);

	for (uint32_t i = l->args.first; i; i = tl_arg(tl, i)->next) {
		const struct tl_arg *a = tl_arg(tl, i);

		if (strcmp(tl_str_get(tl, a->name), name))
			continue;
		if (value)
			*value = a->kind == TL_ARG_INT ? (uint64_t)a->i : a->u;
		if (text)
			*text = a->kind == TL_ARG_STR ? tl_str_get(tl, a->s) : "";
		return true;
	}
	return false;
}

static uint64_t arg_u64(const struct timeline *tl, const struct tl_event *e, const char *name)
{
	uint64_t v = UINT64_MAX;

	CHECK(arg_of(tl, e, name, &v, NULL));
	return v;
}

static void setup(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	tgid = getpid();
	CHECK(mkdtemp(dir) != NULL);
}

static void remove_dir(void)
{
	sh("rm -rf '%s'", dir);
}

__attribute__((constructor)) static void cleanup_at_exit(void)
{
	atexit(remove_dir);
}

/* The window is the job's interval widened by the configured times before and after. */
TEST(window_is_the_interval_widened)
{
	struct inputs in;
	uint64_t t0, t1;

	setup();
	make_config(&in, false);
	make_breach_job(&in);
	ht_dump_window(&in.cfg, &in.job, &t0, &t1);
	CHECK_EQ_U64(t0, 100);
	CHECK_EQ_U64(t1, 6000);
	/* A window that would start before the clock's zero starts at it. */
	in.job.start_ns = 500;
	ht_dump_window(&in.cfg, &in.job, &t0, &t1);
	CHECK_EQ_U64(t0, 0);
}

/*
 * The dump of a breach with sampling: its file named by pid, time and kind;
 * the metadata the job, the configuration and the capture say; the breach and
 * its wait from the flight record; the samples in the window as slices of
 * this file's functions, with the stacks before and after the wait; the
 * trigger's hit on both tracks; the marks on the thread's track.
 */
TEST(breach_dump_holds_what_the_inputs_say)
{
	const struct tl_event *ev[16];
	struct inputs in;
	struct written w;
	struct timeline *tl;
	char prefix[PATH_MAX + 64];
	const char *text = NULL;
	struct stat st;
	size_t n;

	setup();
	make_config(&in, true);
	make_breach_job(&in);
	make_capture(&in);
	w = build_and_write(&in, 3);
	free_inputs(&in);
	CHECK(w.rc == 0);
	if (w.rc)
		return;
	/* The file: in the directory, named hybtrace-PID-...-KIND, as big as the builder said. */
	snprintf(prefix, sizeof(prefix), "%s/hybtrace-%d-", dir, tgid);
	CHECK(!strncmp(w.path, prefix, strlen(prefix)));
	CHECK(strlen(w.path) > strlen("-rq-delay" HT_DUMP_SUFFIX) &&
	      !strcmp(w.path + strlen(w.path) - strlen("-rq-delay" HT_DUMP_SUFFIX),
		      "-rq-delay" HT_DUMP_SUFFIX));
	CHECK(!stat(w.path, &st) && (uint64_t)st.st_size == w.bytes);
	tl = read_back(w.path);
	if (!tl)
		return;
	CHECK_EQ_U64(w.events, tl_event_count(tl));

	check_meta(tl, HT_META_KIND, "rq-delay");
	check_meta_u64(tl, HT_META_TARGET_PID, (uint64_t)tgid);
	/* What the target is called now, not what `run` named it before its exec. */
	check_meta(tl, HT_META_TARGET_COMM, "target");
	check_meta(tl, HT_META_CMDLINE, "hybtrace run -- target");
	check_meta_u64(tl, HT_META_BREACH_TID, (uint64_t)tgid);
	check_meta(tl, HT_META_BREACH_COMM, "target");
	check_meta_u64(tl, HT_META_BREACH_START, 1000);
	check_meta_u64(tl, HT_META_BREACH_END, 5000);
	check_meta_u64(tl, HT_META_THRESHOLD, 1000);
	check_meta_u64(tl, HT_META_WINDOW_START, 100);
	check_meta_u64(tl, HT_META_WINDOW_END, 6000);
	check_meta_u64(tl, HT_META_LOSS_FR_SKIP, 4);
	check_meta_u64(tl, HT_META_BREACHES_MISSED, 3);
	check_meta_u64(tl, HT_META_DEFERRED, 0);
	check_meta(tl, HT_META_SOURCE, "sample");
	check_meta(tl, HT_META_SAMPLE_FREQ, "10000000");
	check_meta(tl, HT_META_CALLGRAPH, "fp");
	check_meta_u64(tl, HT_META_FREEZE_LATE, 250);
	check_meta_u64(tl, HT_META_SAMPLES, 4);
	check_meta(tl, HT_META_TRIGGER, "db_leaf_fn");
	check_meta_u64(tl, HT_META_LOSS_MARKS, 6);
	check_meta_u64(tl, HT_META_LOSS_MARK_PROCESSES, 1);
	check_meta_u64(tl, HT_META_MARK_PROCESSES, 2);
	/* Offline: no monitor, so no recording start and no live counters. */
	CHECK(!tl_meta_get(tl, HT_META_RECORDING_START));
	CHECK(!tl_meta_get(tl, HT_META_CLIPPED_TO));

	/* The breach over its interval on its thread's kernel track, and at its end on hybtrace's. */
	n = find_events_on(tl, TL_TRACK_THREAD_KERNEL, tgid, HT_EV_BREACH, ev, 16);
	CHECK(n == 1 && ev[0]->kind == TL_EVENT_SLICE && ev[0]->ts_ns == 1000 &&
	      ev[0]->dur_ns == 4000);
	n = find_events(tl, 0, HT_EV_BREACH, ev, 16);
	CHECK(n == 1 && ev[0]->kind == TL_EVENT_INSTANT && ev[0]->ts_ns == 5000);
	n = find_events(tl, 0, HT_EV_WINDOW, ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 100 && ev[0]->dur_ns == 5900);

	/* Sampled slices: before the wait root > mid > leaf from 200, one period past 300. */
	n = find_events(tl, tgid, "db_root_fn", ev, 16);
	CHECK_EQ_U64(n, 2);
	if (n == 2) {
		CHECK(ev[0]->ts_ns == 200 && ev[0]->dur_ns == 200 &&
		      arg_u64(tl, ev[0], HT_ARG_SAMPLES) == 2);
		/* After it, root > mid from 5100; the samples outside the window are not in it. */
		CHECK(ev[1]->ts_ns == 5100 && ev[1]->dur_ns == 200 &&
		      arg_u64(tl, ev[1], HT_ARG_SAMPLES) == 2);
	}
	n = find_events(tl, tgid, "db_mid_fn", ev, 16);
	CHECK(n == 2 && ev[0]->ts_ns == 200 && ev[1]->ts_ns == 5100);
	n = find_events(tl, tgid, "db_leaf_fn", ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 200 && ev[0]->dur_ns == 200);
	n = find_events(tl, tgid, HT_EV_STACK_BEFORE, ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 300 && tl_callstack_depth(tl, ev[0]->callstack) == 3);
	n = find_events(tl, tgid, HT_EV_STACK_AFTER, ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 5100 && tl_callstack_depth(tl, ev[0]->callstack) == 2);

	/* The trigger's hit, with its registers, on the hybtrace track and on its thread's. */
	for (int tid = 0; tid <= tgid; tid += tgid) {
		n = find_events(tl, tid, HT_EV_TRIGGER, ev, 16);
		CHECK_EQ_U64(n, 1);
		if (n != 1)
			continue;
		CHECK(ev[0]->kind == TL_EVENT_INSTANT && ev[0]->ts_ns == 800);
		CHECK(arg_of(tl, ev[0], HT_ARG_TRIGGER, NULL, &text) &&
		      !strcmp(text, "db_leaf_fn"));
		CHECK(arg_of(tl, ev[0], HT_ARG_FUNCTION, NULL, &text) &&
		      !strcmp(text, "db_leaf_fn"));
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_TID), (uint64_t)tgid);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_CPU), 1);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_IP), 0x401234);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_RDI), 1);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_RSI), 2);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_RDX), 3);
	}

	/* Marks: by the name the program gave, else "mark ID"; with their id and values. */
	n = find_events(tl, tgid, "checkpoint", ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 2500);
	if (n == 1) {
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_MARK_ID), 7);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_MARK_A), 11);
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_MARK_B), 22);
	}
	n = find_events(tl, tgid, HT_EV_MARK " 9", ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 5500);
	if (n == 1)
		CHECK_EQ_U64(arg_u64(tl, ev[0], HT_ARG_MARK_A), 33);
	/* Another process's mark: on its thread's track, under that process's group. */
	n = find_events(tl, OTHER_TID, "other", ev, 16);
	CHECK(n == 1 && ev[0]->ts_ns == 3000);
	if (n == 1) {
		const struct tl_track *t = tl_track(tl, ev[0]->track), *parent = NULL;

		CHECK(t->pid == OTHER_PID);
		for (size_t i = 0; i < tl_track_count(tl); i++)
			if (tl_track(tl, i)->uuid == t->parent_uuid)
				parent = tl_track(tl, i);
		CHECK(parent && parent->kind == TL_TRACK_PROCESS && parent->pid == OTHER_PID);
	}
	tl_free(tl);
}

/*
 * A manual dump without an on-CPU source, under the name it is given: no
 * breach metadata, the source "none", no sampled slices; a clipped window
 * says where its data begins.
 */
TEST(manual_dump_without_a_source)
{
	const struct tl_event *ev[4];
	struct inputs in;
	struct written w;
	struct timeline *tl;
	char want[PATH_MAX + 64];

	setup();
	make_config(&in, false);
	in.cfg.base_name = "named-by-the-caller";
	memset(&in.job, 0, sizeof(in.job));
	snprintf(in.job.kind, sizeof(in.job.kind), "manual");
	in.job.start_ns = in.job.end_ns = 5000;
	in.job.asked = true;
	in.job.deferred = true;
	make_capture(&in);
	in.c.marks_on = false;
	in.c.nmarks = 0;
	in.c.w.clipped = true;
	in.c.w.covered_from_ns = 450;
	w = build_and_write(&in, 0);
	free_inputs(&in);
	CHECK(w.rc == 0);
	if (w.rc)
		return;
	snprintf(want, sizeof(want), "%s/named-by-the-caller" HT_DUMP_SUFFIX, dir);
	CHECK_STR(w.path, want);
	tl = read_back(w.path);
	if (!tl)
		return;
	check_meta(tl, HT_META_KIND, "manual");
	check_meta(tl, HT_META_SOURCE, "none");
	check_meta_u64(tl, HT_META_WINDOW_START, 4100);
	check_meta_u64(tl, HT_META_WINDOW_END, 6000);
	check_meta_u64(tl, HT_META_CLIPPED_TO, 450);
	check_meta_u64(tl, HT_META_DEFERRED, 1);
	check_meta_u64(tl, HT_META_BREACHES_MISSED, 0);
	CHECK(!tl_meta_get(tl, HT_META_BREACH_TID));
	CHECK(!tl_meta_get(tl, HT_META_THRESHOLD));
	CHECK(!tl_meta_get(tl, HT_META_SAMPLES));
	CHECK(!tl_meta_get(tl, HT_META_TRIGGER));
	CHECK(!tl_meta_get(tl, HT_META_LOSS_MARKS));
	CHECK_EQ_U64(find_events(tl, tgid, "db_root_fn", ev, 4), 0);
	CHECK_EQ_U64(find_events(tl, 0, HT_EV_BREACH, ev, 4), 0);
	tl_free(tl);
}

/* An output directory that is not there: an error that names it, and no file. */
TEST(missing_directory_fails_cleanly)
{
	struct inputs in;
	struct written w;

	setup();
	make_config(&in, false);
	in.cfg.output_dir = "/nonexistent/hybtrace-dumps";
	make_breach_job(&in);
	make_capture(&in);
	w = build_and_write(&in, 0);
	free_inputs(&in);
	CHECK(w.rc != 0);
	CHECK(strstr(ht_last_error(), "/nonexistent/hybtrace-dumps") != NULL);
	if (!strstr(ht_last_error(), "/nonexistent"))
		printf("     %s\n", ht_last_error());
}
