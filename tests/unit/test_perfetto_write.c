// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Perfetto writer, and the reader on what it writes: round trips
 * through memory, files and streams; what the file holds, checked at the
 * wire level and by protoc against tests/perfetto/trace.proto.
 * (test_perfetto_read.c: the reader on other input; test_pb.c: the wire.)
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "trace/pb.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "sources/sample/sampler.h"
#include "trace/timeline.h"
#include "sources/sample/user_timeline.h"
#include "trace_fixtures.h"

#define PROTO_FILE "tests/perfetto/trace.proto"

/* Helpers. */

static struct timeline *round_trip(const struct timeline *tl, struct pftr_stats *stats)
{
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;
	struct timeline *back;

	if (pftw_write_mem(tl, &data, &len, err, sizeof(err))) {
		printf("     write: %s\n", err);
		return NULL;
	}
	back = pftr_read_mem(data, len, stats, err, sizeof(err));
	if (!back)
		printf("     read: %s\n", err);
	free(data);
	return back;
}

/* Round trips. */

TEST(round_trip_rich_timeline)
{
	struct timeline *tl = fx_make_rich();
	struct pftr_stats stats;
	struct timeline *back;

	CHECK(!tl_error(tl));
	back = round_trip(tl, &stats);
	CHECK(fx_same(tl, back));
	CHECK_EQ_U64(stats.events, tl_event_count(tl));
	CHECK_EQ_U64(stats.skipped_packets + stats.skipped_events + stats.skipped_details, 0);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_empty_timeline)
{
	struct timeline *tl = tl_new();
	struct timeline *back = round_trip(tl, NULL);

	CHECK(fx_same(tl, back));
	CHECK(tl_clock_snapshot(back) == NULL);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_deep_nesting_every_level_ends_together)
{
	struct timeline *tl = tl_new();
	int t = fx_add_track(tl, TL_TRACK_THREAD, "t", 0, 1, 1, 0);
	struct timeline *back;

	/* 64 levels that all start and end at the same two instants. */
	for (int i = 0; i < 64; i++) {
		char name[16];

		snprintf(name, sizeof(name), "l%d", i);
		tl_add_slice(tl, t, 100, 100, name, NULL);
	}
	back = round_trip(tl, NULL);
	CHECK(fx_same(tl, back));
	tl_free(back);
	tl_free(tl);
}

/* How many TrackDescriptors in DATA describe UUID. */
static size_t descriptors_of(const void *data, size_t len, uint64_t uuid)
{
	struct pb_reader top, packet, desc;
	struct pb_field f, g, h;
	size_t n = 0;

	pb_reader_init(&top, data, len);
	while (pb_next(&top, &f) == 1 && !pb_enter(&top, &f, &packet)) {
		while (pb_next(&packet, &g) == 1) {
			if (g.number != PFT_PACKET_TRACK_DESCRIPTOR || pb_enter(&packet, &g, &desc))
				continue;
			while (pb_next(&desc, &h) == 1)
				n += h.number == PFT_TRACK_UUID && h.value == uuid;
		}
	}
	return n;
}

TEST(round_trip_hybtrace_track_of_the_timeline)
{
	struct timeline *tl = tl_new(), *back;
	int own = tl_add_track(
		tl, &(struct tl_track_desc){.uuid = TL_HYBTRACE_UUID, .name = "hybtrace"});
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;
	long ev;

	tl_meta_set(tl, "dump_kind", "rq-delay");
	ev = tl_add_slice(tl, own, 100, 50, "breach", "breach");
	tl_event_arg_uint(tl, ev, "duration_ns", 50);
	/* Named like the writer's own instant, but interned: an event like any other. */
	tl_add_instant(tl, own, 150, PFTW_META_EVENT, NULL);
	tl_add_instant(tl, own, 150, PFTW_TRACK_KINDS_EVENT, "breach");
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	CHECK_EQ_U64(descriptors_of(data, len, TL_HYBTRACE_UUID), 1);
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	CHECK(fx_same(tl, back));
	free(data);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_metadata_without_hybtrace_track)
{
	struct timeline *tl = tl_new(), *back;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;

	tl_meta_set(tl, "kernel", "6.1");
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	/* The writer gives the metadata a track; reading it back does not add one. */
	CHECK_EQ_U64(descriptors_of(data, len, TL_HYBTRACE_UUID), 1);
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	CHECK(fx_same(tl, back));
	CHECK_EQ_U64(tl_track_count(back), 0);
	free(data);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_through_files_and_streams)
{
	struct timeline *tl = fx_make_rich(), *back;
	char *path = fx_tmp_path("rich.perfetto-trace");
	char err[256] = "";
	FILE *stream = tmpfile();
	char *data = malloc(1 << 20);
	size_t len;

	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	back = pftr_read_path(path, NULL, err, sizeof(err));
	CHECK(fx_same(tl, back));
	tl_free(back);
	/* Writing again replaces the file whole. */
	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	CHECK(!pftw_write_stream(tl, stream, err, sizeof(err)));
	rewind(stream);
	len = fread(data, 1, 1 << 20, stream);
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	CHECK(fx_same(tl, back));
	tl_free(back);
	fclose(stream);
	CHECK(pftw_write_path(tl, "/nonexistent-dir/x.perfetto-trace", err, sizeof(err)) < 0);
	CHECK(strstr(err, "/nonexistent-dir") != NULL);
	unlink(path);
	free(path);
	free(data);
	tl_free(tl);
}

TEST(round_trip_fd_output_equals_memory_output)
{
	struct timeline *tl = fx_make_rich();
	char *path = fx_tmp_path("fd.perfetto-trace");
	char err[256] = "";
	void *mem = NULL, *file = NULL;
	size_t mem_len = 0, file_len = 0;
	FILE *f = fopen(path, "w+b");

	CHECK(f && !pftw_write_fd(tl, fileno(f), err, sizeof(err)));
	CHECK(!pftw_write_mem(tl, &mem, &mem_len, err, sizeof(err)));
	file = malloc(mem_len + 1);
	rewind(f);
	file_len = fread(file, 1, mem_len + 1, f);
	CHECK_EQ_U64(file_len, mem_len);
	CHECK(!memcmp(file, mem, mem_len));
	fclose(f);
	unlink(path);
	free(path);
	free(mem);
	free(file);
	tl_free(tl);
}

/* A big timeline: 4 threads, nested slices, pooled names and stacks. */
static struct timeline *make_big(size_t nevents)
{
	struct timeline *tl = tl_new();
	int proc = fx_add_track(tl, TL_TRACK_PROCESS, "big", 0, 1, 0, 0);
	int threads[4];
	struct tl_frame_desc frames[8];
	char name[32], fn[8][16];

	for (int i = 0; i < 4; i++)
		threads[i] =
			fx_add_track(tl, TL_TRACK_THREAD, "w", fx_uuid_of(tl, proc), 1, 10 + i, 0);
	for (int i = 0; i < 8; i++) {
		snprintf(fn[i], sizeof(fn[i]), "fn%d", i);
		frames[i] = (struct tl_frame_desc){fn[i], "/bin/big", (uint64_t)i * 64};
	}
	for (size_t i = 0; tl_event_count(tl) < nevents; i++) {
		int t = threads[i % 4];
		uint64_t base = 1000000 + (i / 4) * 1000;
		long outer, inner;

		snprintf(name, sizeof(name), "op%zu", i % 200);
		outer = tl_add_slice(tl, t, base, 900, name, "user");
		tl_event_arg_uint(tl, outer, "i", i);
		tl_event_callstack(tl, outer, frames, 1 + i % 8);
		inner = tl_add_slice(tl, t, base + 100, 500, "inner", "user");
		tl_event_arg_str(tl, inner, "what", name);
		if (i % 10 == 0)
			tl_event_flow_out(tl, inner, i);
		tl_add_instant(tl, t, base + 950, "tick", NULL);
	}
	return tl;
}

TEST(round_trip_over_100k_events_fast)
{
	struct timeline *tl = make_big(120000), *back;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;
	double t0, t1, t2;

	CHECK(!tl_error(tl));
	t0 = fx_now_s();
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	t1 = fx_now_s();
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	t2 = fx_now_s();
	CHECK(fx_same(tl, back));
	if (t1 - t0 > 1.0 || t2 - t1 > 1.0)
		printf("     slow: %zu events, %zu bytes: write %.2f s, read %.2f s\n",
		       tl_event_count(tl), len, t1 - t0, t2 - t1);
	free(data);
	tl_free(back);
	tl_free(tl);
}

/* What the file holds. */

struct packet_summary {
	size_t packets;
	size_t first_flags, later_flags_wrong, missing_seq;
	uint64_t event_seq;	  /* the sequence of the first packet */
	size_t descriptors;	  /* track descriptors, all on another sequence ... */
	size_t descriptors_wrong; /* ... or on the events', or with incremental state flags */
	bool defaults_monotonic;
	size_t flow_fixed64, flow_other_wire;
	size_t interned_twice;
	size_t time_order_errors; /* TrackEvent packets earlier than the one before them */
	uint64_t last_event_ts;
};

/* Count (table, iid) pairs: a table field times 2^32 plus the iid, in a small open table. */
static bool seen_before(uint64_t *seen, size_t cap, uint64_t key)
{
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (cap - 1);

	while (seen[i] && seen[i] != key)
		i = (i + 1) & (cap - 1);
	if (seen[i])
		return true;
	seen[i] = key;
	return false;
}

static void summarize_interned(struct pb_reader *packet, struct pb_field *f, uint64_t *seen,
			       size_t cap, struct packet_summary *s)
{
	struct pb_reader interned, entry;
	struct pb_field g, h;

	pb_enter(packet, f, &interned);
	while (pb_next(&interned, &g) == 1) {
		pb_enter(&interned, &g, &entry);
		while (pb_next(&entry, &h) == 1)
			if (h.number == PFT_INTERNED_IID &&
			    seen_before(seen, cap, (uint64_t)g.number << 40 | h.value))
				s->interned_twice++;
	}
}

static void summarize_event(struct pb_reader *packet, struct pb_field *f, struct packet_summary *s)
{
	struct pb_reader ev;
	struct pb_field g;

	pb_enter(packet, f, &ev);
	while (pb_next(&ev, &g) == 1) {
		if (g.number != PFT_EVENT_FLOW_IDS && g.number != PFT_EVENT_TERMINATING_FLOW_IDS)
			continue;
		if (g.wire == PB_WIRE_FIXED64)
			s->flow_fixed64++;
		else
			s->flow_other_wire++;
	}
}

static void summarize(const void *data, size_t len, struct packet_summary *s)
{
	static uint64_t seen[1 << 16];
	struct pb_reader top, packet, sub;
	struct pb_field f, g;

	memset(seen, 0, sizeof(seen));
	memset(s, 0, sizeof(*s));
	pb_reader_init(&top, data, len);
	while (pb_next(&top, &f) == 1) {
		uint64_t flags = 0, ts = 0, seq = 0;
		bool event = false, descriptor = false;

		pb_enter(&top, &f, &packet);
		while (pb_next(&packet, &g) == 1) {
			if (g.number == PFT_PACKET_TIMESTAMP)
				ts = g.value;
			if (g.number == PFT_PACKET_SEQUENCE_FLAGS)
				flags = g.value;
			if (g.number == PFT_PACKET_SEQUENCE_ID)
				seq = g.value;
			if (g.number == PFT_PACKET_TRACK_DESCRIPTOR)
				descriptor = true;
			if (g.number == PFT_PACKET_INTERNED_DATA)
				summarize_interned(&packet, &g, seen, 1 << 16, s);
			if (g.number == PFT_PACKET_TRACK_EVENT) {
				summarize_event(&packet, &g, s);
				event = true;
			}
			if (g.number == PFT_PACKET_DEFAULTS) {
				struct pb_field h;

				pb_enter(&packet, &g, &sub);
				while (pb_next(&sub, &h) == 1)
					if (h.number == PFT_DEFAULTS_TIMESTAMP_CLOCK_ID)
						s->defaults_monotonic = h.value == 3;
			}
		}
		if (!s->packets) {
			s->first_flags = flags;
			s->event_seq = seq;
		} else if (descriptor) {
			s->descriptors++;
			s->descriptors_wrong += seq == s->event_seq || flags;
		} else if (flags != PFT_SEQ_NEEDS_INCREMENTAL_STATE) {
			s->later_flags_wrong++;
		}
		s->missing_seq += !seq;
		s->packets++;
		if (event) {
			s->time_order_errors += ts < s->last_event_ts;
			s->last_event_ts = ts;
		}
	}
}

TEST(writer_packets_follow_perfetto_rules)
{
	struct timeline *tl = fx_make_rich();
	struct packet_summary s;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;

	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	summarize(data, len, &s);
	CHECK(s.packets > tl_event_count(tl));
	CHECK_EQ_U64(s.first_flags, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	CHECK_EQ_U64(s.later_flags_wrong, 0);
	CHECK_EQ_U64(s.missing_seq, 0);
	/*
	 * A thread descriptor on the events' sequence would make Perfetto
	 * give every event of a global track that thread
	 * (legacy_event.passthrough_utid).
	 */
	CHECK_EQ_U64(s.descriptors, tl_track_count(tl) + 1);
	CHECK_EQ_U64(s.descriptors_wrong, 0);
	CHECK(s.defaults_monotonic);
	/* Flow ids are fixed64 on the wire, as Perfetto declares them. */
	CHECK_EQ_U64(s.flow_fixed64, 6);
	CHECK_EQ_U64(s.flow_other_wire, 0);
	/* Each interned entry is sent once, in the first packet that uses it. */
	CHECK_EQ_U64(s.interned_twice, 0);
	free(data);
	tl_free(tl);
}

/*
 * Random nested slices and instants on a few tracks, added in shuffled
 * order, with many equal times and empty slices: the writer's canonical
 * order and its merge of the tracks by time are exercised on the ties.
 */
static uint32_t rnd_state;

static uint32_t rnd(uint32_t n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 8) % n;
}

struct rnd_event {
	int track;
	uint64_t ts, dur;
	bool instant;
	const char *name;
};

static void rnd_tree(struct rnd_event *v, size_t *n, size_t cap, int track, uint64_t start,
		     uint64_t end, int depth)
{
	static const char *const names[] = {"a", "b", "c", "d"};
	uint64_t t = start;

	v[(*n)++] = (struct rnd_event){track, start, end - start, false, names[rnd(4)]};
	while (depth < 5 && *n + 2 < cap && t <= end && rnd(3)) {
		uint64_t a = t + rnd((uint32_t)(end - t) / 3 + 1),
			 b = a + rnd((uint32_t)(end - a) + 1);

		if (!rnd(4))
			v[(*n)++] = (struct rnd_event){track, a, 0, true, names[rnd(4)]};
		else
			rnd_tree(v, n, cap, track, a, b, depth + 1);
		t = b;
	}
}

TEST(round_trip_random_nesting_and_ties)
{
	enum { CAP = 4000 };
	static struct rnd_event v[CAP];

	for (uint32_t seed = 1; seed <= 200; seed++) {
		struct timeline *tl = tl_new(), *back;
		struct packet_summary sum;
		int tracks[5], ntracks = 1 + (int)(seed % 5);
		char err[256] = "";
		void *data = NULL;
		size_t n = 0, len = 0;

		rnd_state = seed;
		for (int i = 0; i < ntracks; i++)
			tracks[i] = fx_add_track(tl, TL_TRACK_GLOBAL, "t", 0, 0, 0, 0);
		for (int i = 0; i < ntracks; i++)
			for (uint64_t t = 1000, r = 0; r < 1 + seed % 4; r++) {
				uint64_t s0 = t + rnd(3), e0 = s0 + rnd(60);

				rnd_tree(v, &n, CAP, tracks[i], s0, e0, 0);
				t = e0;
			}
		for (size_t i = n; seed % 2 && i > 1; i--) {
			size_t j = rnd((uint32_t)i);
			struct rnd_event x = v[i - 1];

			v[i - 1] = v[j];
			v[j] = x;
		}
		for (size_t i = 0; i < n; i++)
			if (v[i].instant)
				tl_add_instant(tl, v[i].track, v[i].ts, v[i].name, "c");
			else
				tl_add_slice(tl, v[i].track, v[i].ts, v[i].dur, v[i].name, "c");
		CHECK(!tl_error(tl));
		CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
		summarize(data, len, &sum);
		CHECK_EQ_U64(sum.time_order_errors, 0);
		back = pftr_read_mem(data, len, NULL, err, sizeof(err));
		CHECK(fx_same(tl, back));
		free(data);
		tl_free(back);
		tl_free(tl);
	}
}

/*
 * The file's track events in file order, walked at the wire level: the
 * order Perfetto imports events of one time in, which decides what nests in
 * what and which flows it keeps.
 */
struct walked_point {
	uint64_t ts, uuid, type, name_iid;
	uint64_t out[8], in[8];
	unsigned int nout, nin;
	unsigned int depth; /* the track's open slices when it came: Perfetto's depth */
};

static void walk_event(struct pb_reader *packet, struct pb_field *f, struct walked_point *w)
{
	struct pb_reader ev;
	struct pb_field g;

	pb_enter(packet, f, &ev);
	while (pb_next(&ev, &g) == 1) {
		if (g.number == PFT_EVENT_TYPE)
			w->type = g.value;
		else if (g.number == PFT_EVENT_TRACK_UUID)
			w->uuid = g.value;
		else if (g.number == PFT_EVENT_NAME_IID)
			w->name_iid = g.value;
		else if (g.number == PFT_EVENT_FLOW_IDS && w->nout < 8)
			w->out[w->nout++] = g.value;
		else if (g.number == PFT_EVENT_TERMINATING_FLOW_IDS && w->nin < 8)
			w->in[w->nin++] = g.value;
	}
}

/* Up to CAP track events of the file, with the depth a begin takes on its track. */
static size_t walk_points(const void *data, size_t len, struct walked_point *v, size_t cap)
{
	struct pb_reader top, packet;
	struct pb_field f, g;
	uint64_t open_uuid[64];
	unsigned int open_depth[64], nopen = 0;
	size_t n = 0;

	pb_reader_init(&top, data, len);
	while (n < cap && pb_next(&top, &f) == 1) {
		struct walked_point w = {0};
		bool event = false;

		pb_enter(&top, &f, &packet);
		while (pb_next(&packet, &g) == 1) {
			if (g.number == PFT_PACKET_TIMESTAMP)
				w.ts = g.value;
			if (g.number == PFT_PACKET_TRACK_EVENT) {
				walk_event(&packet, &g, &w);
				event = true;
			}
		}
		if (!event)
			continue;
		/* Each track's stack of open slices, as Perfetto's slice tracker keeps it. */
		unsigned int t = 0;

		while (t < nopen && open_uuid[t] != w.uuid)
			t++;
		if (t == nopen && nopen < 64) {
			open_uuid[nopen] = w.uuid;
			open_depth[nopen++] = 0;
		}
		if (t < nopen) {
			if (w.type == PFT_TYPE_SLICE_END && open_depth[t])
				open_depth[t]--;
			w.depth = open_depth[t];
			if (w.type == PFT_TYPE_SLICE_BEGIN)
				open_depth[t]++;
		}
		v[n++] = w;
	}
	return n;
}

/* Index of the first point of NAME_IID of TYPE, or N. */
static size_t point_of(const struct walked_point *v, size_t n, uint64_t name_iid, uint64_t type)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].name_iid == name_iid && v[i].type == type)
			return i;
	return n;
}

/* Index of the first point that begins flow ID, or N. */
static size_t flow_begin_of(const struct walked_point *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned int k = 0; k < v[i].nout; k++)
			if (v[i].out[k] == id)
				return i;
	return n;
}

/* Flows whose terminating point comes before the point that begins them, in file order. */
static size_t flows_ended_before_begun(const struct walked_point *v, size_t n)
{
	size_t bad = 0;

	for (size_t j = 0; j < n; j++)
		for (unsigned int k = 0; k < v[j].nin; k++) {
			size_t i = flow_begin_of(v, n, v[j].in[k]);

			if (i < n && i > j) {
				if (bad < 3)
					printf("     flow %llu ends at point %zu before it begins "
					       "at "
					       "%zu\n",
					       (unsigned long long)v[j].in[k], j, i);
				bad++;
			}
		}
	return bad;
}

static int add_track_uuid(struct timeline *tl, enum tl_track_kind kind, const char *name,
			  uint64_t uuid)
{
	return tl_add_track(tl, &(struct tl_track_desc){.kind = kind, .name = name, .uuid = uuid});
}

/*
 * The standing rule of the writer: at one time, the point that begins a
 * flow is written before the point that terminates it, whatever the tracks'
 * uuids say. Perfetto keeps file order among equal times and drops a
 * terminating id whose flow has not begun (the 20 of 21 wakeup arrows
 * lost when a wakee's kernel track had the lower uuid).
 */
TEST(writer_begins_flows_before_ending_them_at_equal_times)
{
	struct timeline *tl = tl_new(), *back;
	/* Uuids against the flows: each flow runs from a higher uuid to a lower one. */
	int wakee_k = add_track_uuid(tl, TL_TRACK_GLOBAL, "wakee (kernel)", 4100);
	int cpu = add_track_uuid(tl, TL_TRACK_GLOBAL, "CPU 1", 4101);
	int p = add_track_uuid(tl, TL_TRACK_GLOBAL, "p", 10);
	int q = add_track_uuid(tl, TL_TRACK_GLOBAL, "q", 11);
	int g = add_track_uuid(tl, TL_TRACK_GLOBAL, "g", 12);
	int z = add_track_uuid(tl, TL_TRACK_GLOBAL, "z", 20);
	int y = add_track_uuid(tl, TL_TRACK_GLOBAL, "y", 21);
	int x = add_track_uuid(tl, TL_TRACK_GLOBAL, "x", 22);
	struct walked_point v[64];
	struct pftr_stats st;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0, n;
	long ev;

	/* A wakeup: the waker's instant on a CPU track, the wakee's wait on its kernel track. */
	ev = tl_add_slice(tl, wakee_k, 1000, 50, "runqueue", "sched");
	tl_event_flow_in(tl, ev, 1);
	ev = tl_add_instant(tl, cpu, 1000, "wakes", "sched");
	tl_event_flow_out(tl, ev, 1);
	/* The begin of F waits behind Q0 on its track, and Q0's flow begins on a third track. */
	ev = tl_add_slice(tl, p, 2000, 50, "P", NULL);
	tl_event_flow_in(tl, ev, 2);
	ev = tl_add_instant(tl, q, 2000, "Q0", NULL);
	tl_event_flow_in(tl, ev, 3);
	ev = tl_add_instant(tl, q, 2000, "Q", NULL);
	tl_event_flow_out(tl, ev, 2);
	ev = tl_add_instant(tl, g, 2000, "G", NULL);
	tl_event_flow_out(tl, ev, 3);
	/* A chain X -> Y -> Z at one time. */
	ev = tl_add_instant(tl, z, 3000, "Z", NULL);
	tl_event_flow_in(tl, ev, 5);
	ev = tl_add_instant(tl, y, 3000, "Y", NULL);
	tl_event_flow_in(tl, ev, 4);
	tl_event_flow_out(tl, ev, 5);
	ev = tl_add_instant(tl, x, 3000, "X", NULL);
	tl_event_flow_out(tl, ev, 4);
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	n = walk_points(data, len, v, 64);
	CHECK(n >= 10);
	CHECK_EQ_U64(flows_ended_before_begun(v, n), 0);
	CHECK(point_of(v, n, tl_intern(tl, "wakes"), PFT_TYPE_INSTANT) <
	      point_of(v, n, tl_intern(tl, "runqueue"), PFT_TYPE_SLICE_BEGIN));
	CHECK(point_of(v, n, tl_intern(tl, "X"), PFT_TYPE_INSTANT) <
	      point_of(v, n, tl_intern(tl, "Y"), PFT_TYPE_INSTANT));
	CHECK(point_of(v, n, tl_intern(tl, "Y"), PFT_TYPE_INSTANT) <
	      point_of(v, n, tl_intern(tl, "Z"), PFT_TYPE_INSTANT));
	/* The reader, which applies Perfetto's rule, keeps every flow. */
	back = pftr_read_mem(data, len, &st, err, sizeof(err));
	CHECK(fx_same(tl, back));
	CHECK_EQ_U64(st.flows_begun, 5);
	CHECK_EQ_U64(st.flow_ends_dropped, 0);
	free(data);
	tl_free(back);
	tl_free(tl);
}

/*
 * Slices that begin together nest in Perfetto in the order they begin: the
 * writer begins the outermost first and ends the innermost first, whether
 * their spans differ or are equal (the frames of one sample).
 */
TEST(writer_nests_equal_time_begins_outermost_first)
{
	static const char *const equal[] = {"start_thread", "worker", "clock_gettime"};
	static const char *const longer[] = {"a", "b", "c"};
	struct timeline *tl = tl_new();
	int t = fx_add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
	struct walked_point v[64];
	char err[256] = "";
	void *data = NULL;
	size_t len = 0, n;

	for (int i = 0; i < 3; i++)
		tl_add_slice(tl, t, 1000, 100, equal[i], "user"); /* parents added first */
	for (int i = 2; i >= 0; i--)
		tl_add_slice(tl, t, 2000, 300 - 100 * (uint64_t)i, longer[i], "user");
	tl_add_slice(tl, t, 2000, 0, "empty", "user"); /* ends before the next begins */
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	n = walk_points(data, len, v, 64);
	for (unsigned int i = 0; i < 3; i++) {
		size_t b = point_of(v, n, tl_intern(tl, equal[i]), PFT_TYPE_SLICE_BEGIN);
		size_t c = point_of(v, n, tl_intern(tl, longer[i]), PFT_TYPE_SLICE_BEGIN);

		CHECK(b < n && c < n);
		if (b < n)
			CHECK_EQ_U64(v[b].depth, i);
		if (c < n)
			CHECK_EQ_U64(v[c].depth, i);
		/* The ends at 1100: innermost first. */
		CHECK(b < n && b + 3 + (2 - i) < n &&
		      v[b + 3 + (2 - i)].type == PFT_TYPE_SLICE_END);
	}
	free(data);
	tl_free(tl);
}

/* One sample's frames, through the builder of sampled slices and the writer: root at depth 0. */
TEST(sample_frames_nest_root_first_in_the_file)
{
	struct ht_sample_set set = {0};
	struct ht_sample smp = {.time_ns = 1000, .pid = 7, .tid = 7, .nr_user = 4};
	struct ht_user_window uw = {
		.t0 = 0, .t1 = 5000, .period_ns = 1000, .samples = &set};
	/* Leaf first, as perf gives a callchain; no symbolizer: named by address. */
	static const uint64_t chain[] = {0x4000, 0x3000, 0x2000, 0x1000};
	struct timeline *tl = tl_new();
	struct walked_point v[64];
	char err[256] = "", name[32];
	void *data = NULL;
	size_t len = 0, n;

	memcpy(smp.frames, chain, sizeof(chain));
	set.v = &smp;
	set.count = 1;
	CHECK(!ht_user_timeline_build(tl, &uw));
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	n = walk_points(data, len, v, 64);
	for (unsigned int depth = 0; depth < 4; depth++) {
		size_t b;

		snprintf(name, sizeof(name), "0x%llx", (unsigned long long)chain[3 - depth]);
		b = point_of(v, n, tl_intern(tl, name), PFT_TYPE_SLICE_BEGIN);
		CHECK(b < n);
		if (b < n)
			CHECK_EQ_U64(v[b].depth, depth);
	}
	free(data);
	tl_free(tl);
}

/*
 * The same at random: nested slices and instants on tracks with random
 * uuids, few distinct times, and flows between events of different tracks
 * that a file could honour (each from an event placed before the other in
 * some order of the events that keeps every track's own order and time).
 */
TEST(writer_orders_random_flows_at_equal_times)
{
	enum { CAP = 600, FLOWS = 24 };
	static struct rnd_event v[CAP];
	static struct walked_point w[4 * CAP];
	static uint32_t merged[CAP], rank_of[CAP];

	for (uint32_t seed = 1; seed <= 300; seed++) {
		struct timeline *tl = tl_new(), *back;
		int tracks[5], ntracks = 2 + (int)(seed % 4);
		size_t n = 0, len = 0, nw, at[5] = {0}, end[5] = {0}, nflows = 0;
		struct pftr_stats st;
		char err[256] = "";
		void *data = NULL;
		uint32_t *order;

		rnd_state = seed * 7919;
		for (int i = 0; i < ntracks; i++)
			tracks[i] = add_track_uuid(tl, TL_TRACK_GLOBAL, "t",
						   100 + rnd(1000) * 8 + (uint64_t)i);
		for (int i = 0; i < ntracks; i++)
			rnd_tree(v, &n, (size_t)(i + 1) * CAP / 5, tracks[i], 1000 + 10 * rnd(3),
				 1040, 0);
		for (size_t i = 0; i < n; i++)
			if (v[i].instant)
				tl_add_instant(tl, v[i].track, v[i].ts, v[i].name, "c");
			else
				tl_add_slice(tl, v[i].track, v[i].ts, v[i].dur, v[i].name, "c");
		/* A random merge of the tracks' canonical orders, stably sorted by time. */
		order = tl_sorted_order(tl);
		for (size_t i = 0, t = 0; i < n; i++) {
			if (i && tl_event(tl, order[i])->track != tl_event(tl, order[i - 1])->track)
				end[t++] = i, at[t] = i;
			end[t] = i + 1;
		}
		for (size_t k = 0; k < n; k++) {
			int t;

			do
				t = (int)rnd((uint32_t)ntracks);
			while (at[t] == end[t]);
			merged[k] = order[at[t]++];
		}
		for (size_t k = 1; k < n; k++)
			for (size_t j = k; j > 0 && tl_event(tl, merged[j - 1])->ts_ns >
							    tl_event(tl, merged[j])->ts_ns;
			     j--) {
				uint32_t x = merged[j];

				merged[j] = merged[j - 1];
				merged[j - 1] = x;
			}
		for (size_t k = 0; k < n; k++)
			rank_of[merged[k]] = (uint32_t)k;
		/* Flows forward in that order, mostly between events of one time. */
		for (int tries = 0; tries < 400 && nflows < FLOWS; tries++) {
			uint32_t a = rnd((uint32_t)n), b = rnd((uint32_t)n);
			const struct tl_event *ea = tl_event(tl, a), *eb = tl_event(tl, b);

			if (ea->track == eb->track || rank_of[a] >= rank_of[b] ||
			    (ea->ts_ns != eb->ts_ns && rnd(4)) ||
			    tl_event_lists(tl, ea)->flows_out.count >= 8 ||
			    tl_event_lists(tl, eb)->flows_in.count >= 8)
				continue;
			nflows++;
			tl_event_flow_out(tl, a, 1000 * seed + nflows);
			tl_event_flow_in(tl, b, 1000 * seed + nflows);
		}
		free(order);

		CHECK(!tl_error(tl));
		CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
		nw = walk_points(data, len, w, 4 * CAP);
		CHECK_EQ_U64(flows_ended_before_begun(w, nw), 0);
		back = pftr_read_mem(data, len, &st, err, sizeof(err));
		CHECK(fx_same(tl, back));
		CHECK_EQ_U64(st.flows_begun, nflows);
		CHECK_EQ_U64(st.flow_ends_dropped, 0);
		free(data);
		tl_free(back);
		tl_free(tl);
		if (ht_current_failed) {
			printf("     seed %u\n", seed);
			break;
		}
	}
}

TEST(writer_refuses_bad_nesting_and_incomplete_timelines)
{
	struct timeline *tl = tl_new();
	int t = fx_add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;

	tl_add_slice(tl, t, 100, 100, "first", NULL);
	tl_add_slice(tl, t, 150, 100, "second", NULL);
	CHECK(pftw_write_mem(tl, &data, &len, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "'second'") != NULL);
	CHECK(data == NULL);
	tl_free(tl);

	tl = tl_new();
	t = fx_add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
	tl_add_slice(tl, t + 1, 0, 1, "nowhere", NULL);
	CHECK(pftw_write_mem(tl, &data, &len, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "incomplete") != NULL);
	tl_free(tl);
}

/* protoc, when it is installed, decodes the file with our .proto and finds no unknown field. */
TEST(protoc_decodes_written_file)
{
	struct timeline *tl = fx_make_rich();
	char *path = fx_tmp_path("protoc.perfetto-trace");
	char err[256] = "", line[512], cmd[1024];
	size_t unknown = 0, flows = 0, callstacks = 0, lines = 0;
	FILE *out;
	int status;

	if (system("command -v protoc >/dev/null 2>&1") != 0 || access(PROTO_FILE, R_OK)) {
		/* CI installs protobuf-compiler (make deps) and runs from the repository root. */
		CHECK(!getenv("CI") || strcmp(getenv("CI"), "true"));
		tl_free(tl);
		free(path);
		SKIP_TEST("protoc or " PROTO_FILE " is missing");
	}
	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	snprintf(cmd, sizeof(cmd),
		 "protoc --proto_path=tests/perfetto --decode=hybtrace_check.Trace %s < %s 2>&1",
		 PROTO_FILE, path);
	out = popen(cmd, "r");
	CHECK(out != NULL);
	while (out && fgets(line, sizeof(line), out)) {
		const char *p = line + strspn(line, " ");

		lines++;
		/* protoc prints a field it does not know as its bare number. */
		if (*p >= '0' && *p <= '9') {
			if (unknown++ < 3)
				printf("     unknown field: %s", line);
		}
		flows += !strncmp(p, "flow_ids:", 9) || !strncmp(p, "terminating_flow_ids:", 21);
		callstacks += !strncmp(p, "callstack_iid:", 14);
	}
	status = out ? pclose(out) : -1;
	CHECK(status == 0);
	CHECK(lines > 100);
	CHECK_EQ_U64(unknown, 0);
	CHECK_EQ_U64(flows, 6);
	CHECK_EQ_U64(callstacks, 64);
	unlink(path);
	free(path);
	tl_free(tl);
}

/* A descriptor's packet time and clock, by the track's uuid: 0 when it has none. */
static void descriptor_time(const void *data, size_t len, uint64_t uuid, uint64_t *ts,
			    uint64_t *clock)
{
	struct pb_reader top, packet, desc;
	struct pb_field f, g, h;

	*ts = *clock = 0;
	pb_reader_init(&top, data, len);
	while (pb_next(&top, &f) == 1 && !pb_enter(&top, &f, &packet)) {
		uint64_t packet_ts = 0, packet_clock = 0;

		while (pb_next(&packet, &g) == 1) {
			if (g.number == PFT_PACKET_TIMESTAMP)
				packet_ts = g.value;
			if (g.number == PFT_PACKET_TIMESTAMP_CLOCK_ID)
				packet_clock = g.value;
			if (g.number != PFT_PACKET_TRACK_DESCRIPTOR || pb_enter(&packet, &g, &desc))
				continue;
			while (pb_next(&desc, &h) == 1)
				if (h.number == PFT_TRACK_UUID && h.value == uuid) {
					*ts = packet_ts;
					*clock = packet_clock;
				}
		}
	}
}

/*
 * A process, thread or kernel track's descriptor carries the time of the
 * first event on its track or under it (MONOTONIC, on the snapshot's
 * clocks): Perfetto binds it to the task its tid names when it reads it,
 * which must come after the native data's task_newtask of that task.
 * Global tracks, and a timeline without a clock snapshot, have none.
 */
TEST(task_descriptors_carry_their_first_event_time)
{
	struct timeline *tl = tl_new(), *back;
	int proc = tl_add_track(
		tl, &(struct tl_track_desc){
			    .kind = TL_TRACK_PROCESS, .uuid = 10, .name = "p", .pid = 10});
	int thr = tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_THREAD,
							   .uuid = 11,
							   .parent_uuid = 10,
							   .name = "t",
							   .pid = 10,
							   .tid = 11});
	int kern = tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_THREAD_KERNEL,
							    .uuid = 12,
							    .parent_uuid = 11,
							    .name = "(kernel)"});
	int glob = add_track_uuid(tl, TL_TRACK_GLOBAL, "g", 13);
	uint64_t ts, clock;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;

	CHECK(proc >= 0 && thr >= 0 && kern >= 0 && glob >= 0);
	tl_add_slice(tl, glob, 100, 10, "early", "c");
	tl_add_slice(tl, thr, 700, 10, "late", "c");
	tl_add_slice(tl, kern, 500, 10, "first", "c");
	tl_set_clock_snapshot(tl, &(struct tl_clock_snapshot){.boottime_ns = 2000,
							      .monotonic_ns = 1000,
							      .realtime_ns = 3000});
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	descriptor_time(data, len, 10, &ts, &clock);
	CHECK(ts == 500 && clock == PFT_CLOCK_MONOTONIC);
	descriptor_time(data, len, 11, &ts, &clock);
	CHECK(ts == 500 && clock == PFT_CLOCK_MONOTONIC);
	descriptor_time(data, len, 12, &ts, &clock);
	CHECK(ts == 500 && clock == PFT_CLOCK_MONOTONIC);
	descriptor_time(data, len, 13, &ts, &clock);
	CHECK(ts == 0);
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	CHECK(back && fx_same(tl, back));
	free(data);
	tl_free(back);
	tl_free(tl);
	/* Without a snapshot, MONOTONIC is no clock Perfetto could convert. */
	tl = tl_new();
	thr = tl_add_track(tl, &(struct tl_track_desc){
				       .kind = TL_TRACK_THREAD, .uuid = 11, .pid = 10, .tid = 11});
	tl_add_slice(tl, thr, 700, 10, "late", "c");
	data = NULL;
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	descriptor_time(data, len, 11, &ts, &clock);
	CHECK(ts == 0);
	free(data);
	tl_free(tl);
}
