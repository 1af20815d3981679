// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Protobuf wire helpers, the Perfetto writer and the reader: round trips
 * through memory, files and streams; what the file holds, checked at the
 * wire level and by protoc against tests/perfetto/trace.proto; and the
 * reader on input that is broken, foreign or hostile.
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

#define PROTO_FILE "tests/perfetto/trace.proto"

/* Helpers. */

static int add_track(struct timeline *tl, enum tl_track_kind kind, const char *name,
		     uint64_t parent, int32_t pid, int32_t tid, int32_t cpu)
{
	return tl_add_track(tl, &(struct tl_track_desc){
					.kind = kind,
					.name = name,
					.parent_uuid = parent,
					.pid = pid,
					.tid = tid,
					.cpu = cpu,
				});
}

static uint64_t uuid_of(const struct timeline *tl, int track)
{
	return tl_track(tl, track)->uuid;
}

/* A timeline with every kind of track, argument, flow and call stack the model has. */
static struct timeline *make_rich(void)
{
	struct timeline *tl = tl_new();
	int proc = add_track(tl, TL_TRACK_PROCESS, "demo", 0, 100, 0, 0);
	int main_thr = add_track(tl, TL_TRACK_THREAD, "main", uuid_of(tl, proc), 100, 100, 0);
	int worker = add_track(tl, TL_TRACK_THREAD, "worker", uuid_of(tl, proc), 100, 102, 0);
	int main_k = add_track(tl, TL_TRACK_THREAD_KERNEL, "main (kernel)", uuid_of(tl, main_thr),
			       0, 0, 0);
	int worker_k = add_track(tl, TL_TRACK_THREAD_KERNEL, "worker (kernel)", uuid_of(tl, worker),
				 0, 0, 0);
	int cpu0 = add_track(tl, TL_TRACK_CPU, "CPU 0", 0, 0, 0, 0);
	int cpu3 = add_track(tl, TL_TRACK_CPU, "CPU 3", uuid_of(tl, proc), 0, 0, 3);
	int glob = add_track(tl, TL_TRACK_GLOBAL, "triggers", 0, 0, 0, 0);
	struct tl_frame_desc frames[64];
	long ev;

	tl_meta_set(tl, "hybtrace_version", "0.1.0");
	tl_meta_set(tl, "kernel", "Linux 6.1.0-18-amd64");
	tl_meta_set(tl, "cpu_model", "AMD EPYC 7B13");
	tl_meta_set(tl, "cmdline", "hybtrace --pid 100 -o \"out file\"");
	tl_meta_set(tl, "wall_clock", "2024-05-01T12:00:00Z");
	tl_meta_set(tl, "loss.flight_recorder_overwritten", "0");
	tl_set_clock_snapshot(tl, &(struct tl_clock_snapshot){
					  .boottime_ns = 5000000123ull,
					  .monotonic_ns = 4000000456ull,
					  .realtime_ns = 1714564800000000789ull,
				  });

	/* 64 levels, each with the call stack that got there (root first). */
	for (int i = 0; i < 64; i++) {
		char name[16], fn[16];

		snprintf(name, sizeof(name), "f%d", i);
		snprintf(fn, sizeof(fn), "fn_%d", i);
		frames[i] = (struct tl_frame_desc){NULL, i % 3 ? "/usr/bin/demo" : NULL,
						   0x401000 + 16 * (uint64_t)i};
		frames[i].function = i % 5 == 4 ? NULL : strdup(fn);
		ev = tl_add_slice(tl, main_thr, 1000 + 10 * (uint64_t)i, 10000 - 20 * (uint64_t)i,
				  name, i % 2 ? "user" : NULL);
		tl_event_arg_uint(tl, ev, "depth", (uint64_t)i);
		tl_event_callstack(tl, ev, frames, (size_t)i + 1);
	}
	for (int i = 0; i < 64; i++)
		free((char *)frames[i].function);

	/* Siblings that touch, a zero-length slice, instants on the edges. */
	tl_add_slice(tl, worker, 2000, 500, "a", "user");
	tl_add_slice(tl, worker, 2500, 500, "b", "user");
	tl_add_slice(tl, worker, 2600, 400, "b.tail", "user");
	tl_add_slice(tl, worker, 3000, 0, "zero", NULL);
	tl_add_instant(tl, worker, 2500, "edge", NULL);
	tl_add_instant(tl, worker, 3000, "end edge", NULL);
	tl_add_slice(tl, worker, 4000, 10, NULL, NULL);

	/* Every argument kind, extreme values included. */
	ev = tl_add_instant(tl, glob, 1500, "breach", "trigger");
	tl_event_arg_int(tl, ev, "negative", -42);
	tl_event_arg_int(tl, ev, "min", INT64_MIN);
	tl_event_arg_uint(tl, ev, "max", UINT64_MAX);
	tl_event_arg_double(tl, ev, "nan", NAN);
	tl_event_arg_double(tl, ev, "minus_inf", -INFINITY);
	tl_event_arg_double(tl, ev, "tenth", 0.1);
	tl_event_arg_str(tl, ev, "text", "na\xc3\xafve \"quoted\" \\ tab\t");
	tl_event_arg_str(tl, ev, "empty", "");
	tl_event_arg_int(tl, ev, NULL, 7);

	/* A wakeup: the waker's flow ends at the wakee's run-queue wait; one flow passes through.
	 */
	ev = tl_add_slice(tl, worker_k, 5000, 100, "write", "syscall");
	tl_event_flow_out(tl, ev, 0xfeedfacecafebeefull);
	tl_event_flow_out(tl, ev, 77);
	ev = tl_add_slice(tl, main_k, 5050, 200, "runnable", "sched");
	tl_event_flow_in(tl, ev, 0xfeedfacecafebeefull);
	tl_event_arg_str(tl, ev, "culprit", "kworker/0:1");
	ev = tl_add_instant(tl, main_k, 5300, "switch in", "sched");
	tl_event_flow_out(tl, ev, 77);
	tl_event_flow_in(tl, ev, 78);

	/* It begins a flow that ends on the instant: flows cross tracks both ways. */
	ev = tl_add_slice(tl, cpu0, 5050, 200, "kworker/0:1", NULL);
	tl_event_flow_out(tl, ev, 78);
	tl_add_slice(tl, cpu3, 5000, 100, "worker", NULL);
	return tl;
}

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

static bool same(const struct timeline *a, const struct timeline *b)
{
	char why[512];

	if (b && tl_equal(a, b, why, sizeof(why)))
		return true;
	if (b)
		printf("     differ: %s\n", why);
	return false;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Read LEN bytes and expect an error whose message contains WANT. */
static bool read_fails(const void *data, size_t len, const char *want)
{
	char err[256] = "";
	struct timeline *tl = pftr_read_mem(data, len, NULL, err, sizeof(err));

	if (tl) {
		tl_free(tl);
		printf("     read succeeded, wanted an error with \"%s\"\n", want);
		return false;
	}
	if (!strstr(err, want)) {
		printf("     error \"%s\" lacks \"%s\"\n", err, want);
		return false;
	}
	return true;
}

static char tmp_dir[64];

__attribute__((destructor)) static void remove_tmp_dir(void)
{
	if (tmp_dir[0])
		rmdir(tmp_dir);
}

/* PATH in a directory of this run's own, removed at exit (tests unlink their files). */
static char *tmp_path(const char *name)
{
	char *dir = tmp_dir;
	char *path;

	if (!dir[0]) {
		snprintf(dir, sizeof(tmp_dir), "/tmp/ht-test-perfetto-XXXXXX");
		if (!mkdtemp(dir))
			return NULL;
	}
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	return path;
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

/* Hand-made packets, for input the writer never produces. */

static size_t packet_begin(struct pb_buf *b, uint32_t seq, uint64_t flags)
{
	size_t p = pb_begin(b, PFT_TRACE_PACKET);

	pb_varint(b, PFT_PACKET_SEQUENCE_ID, seq);
	if (flags)
		pb_varint(b, PFT_PACKET_SEQUENCE_FLAGS, flags);
	return p;
}

static void track_packet(struct pb_buf *b, uint64_t uuid, const char *name)
{
	size_t p = packet_begin(b, 1, 0);
	size_t d = pb_begin(b, PFT_PACKET_TRACK_DESCRIPTOR);

	pb_varint(b, PFT_TRACK_UUID, uuid);
	pb_string(b, PFT_TRACK_NAME, name);
	pb_end(b, d);
	pb_end(b, p);
}

/* An event with an inline name (no interning), on track UUID. */
static void event_packet(struct pb_buf *b, uint32_t seq, uint64_t flags, uint64_t ts, uint64_t type,
			 uint64_t uuid, const char *name)
{
	size_t p = packet_begin(b, seq, flags);
	size_t e;

	pb_varint(b, PFT_PACKET_TIMESTAMP, ts);
	e = pb_begin(b, PFT_PACKET_TRACK_EVENT);
	pb_varint(b, PFT_EVENT_TYPE, type);
	if (uuid)
		pb_varint(b, PFT_EVENT_TRACK_UUID, uuid);
	if (name)
		pb_string(b, PFT_EVENT_NAME, name);
	pb_end(b, e);
	pb_end(b, p);
}

/* pb: the wire helpers. */

TEST(pb_varints_round_trip)
{
	static const uint64_t values[] = {0,	 1,	127,	    128,	300,
					  16383, 16384, UINT32_MAX, 1ull << 63, UINT64_MAX};
	struct pb_buf b;
	struct pb_reader r;
	struct pb_field f;

	pb_buf_init(&b);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		pb_varint(&b, (uint32_t)i + 1, values[i]);
	pb_int(&b, 20, -1);
	pb_fixed64(&b, 21, 0x0102030405060708ull);
	pb_double(&b, 22, -2.5);
	pb_string(&b, PB_MAX_FIELD, "x");
	CHECK(!b.err);
	pb_reader_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		CHECK(pb_next(&r, &f) == 1);
		CHECK(f.number == i + 1 && f.wire == PB_WIRE_VARINT);
		CHECK_EQ_U64(f.value, values[i]);
	}
	CHECK(pb_next(&r, &f) == 1 && f.value == UINT64_MAX); /* -1 takes ten bytes */
	CHECK(pb_next(&r, &f) == 1 && f.wire == PB_WIRE_FIXED64);
	CHECK_EQ_U64(f.value, 0x0102030405060708ull);
	CHECK(pb_next(&r, &f) == 1 && pb_field_double(&f) == -2.5);
	CHECK(pb_next(&r, &f) == 1 && f.number == PB_MAX_FIELD && f.len == 1);
	CHECK(pb_next(&r, &f) == 0);
	pb_buf_free(&b);
}

TEST(pb_nested_lengths_are_patched)
{
	static const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 70000};
	struct pb_buf b;
	struct pb_reader r, sub, inner;
	struct pb_field f, g;
	char *body = calloc(1, 70000);

	pb_buf_init(&b);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t outer = pb_begin(&b, 1);
		size_t mid = pb_begin(&b, 2);

		pb_bytes(&b, 3, body, sizes[i]);
		pb_end(&b, mid);
		pb_varint(&b, 4, i);
		pb_end(&b, outer);
	}
	CHECK(!b.err);
	pb_reader_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK(pb_next(&r, &f) == 1 && !pb_enter(&r, &f, &sub));
		CHECK(pb_next(&sub, &g) == 1 && g.number == 2 && !pb_enter(&sub, &g, &inner));
		CHECK(pb_next(&inner, &g) == 1 && g.number == 3);
		CHECK_EQ_U64(g.len, sizes[i]);
		CHECK(pb_next(&sub, &g) == 1 && g.number == 4 && g.value == i);
		CHECK(pb_next(&sub, &g) == 0);
	}
	CHECK(pb_next(&r, &f) == 0);
	free(body);
	pb_buf_free(&b);
}

static int pb_first_error(const void *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int ret;

	pb_reader_init(&r, data, len);
	while ((ret = pb_next(&r, &f)) > 0)
		;
	return ret;
}

TEST(pb_reader_rejects_malformed_input)
{
	CHECK(pb_first_error("\x08", 1) == PB_ERR_TRUNCATED);
	CHECK(pb_first_error("\x08\x80\x80", 3) == PB_ERR_TRUNCATED);
	/* Eleven bytes, and ten whose last carries more than bit 63. */
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12) ==
	      PB_ERR_VARINT_LONG);
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11) ==
	      PB_ERR_VARINT_LONG);
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11) == 0);
	CHECK(pb_first_error("\x0a\x05"
			     "abc",
			     5) == PB_ERR_LENGTH);
	CHECK(pb_first_error("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10) == PB_ERR_LENGTH);
	CHECK(pb_first_error("\x09\x01\x02", 3) == PB_ERR_TRUNCATED);
	CHECK(pb_first_error("\x0d\x01\x02\x03\x04", 5) == 0);
	CHECK(pb_first_error("\x0b", 1) == PB_ERR_WIRE_TYPE); /* start group */
	CHECK(pb_first_error("\x0c", 1) == PB_ERR_WIRE_TYPE); /* end group */
	CHECK(pb_first_error("\x0e\x00", 2) == PB_ERR_WIRE_TYPE);
	CHECK(pb_first_error("\x0f\x00", 2) == PB_ERR_WIRE_TYPE);
	CHECK(pb_first_error("\x00\x00", 2) == PB_ERR_FIELD_NUMBER);
	CHECK(pb_first_error("\x80\x80\x80\x80\x10\x00", 6) == PB_ERR_FIELD_NUMBER);
	CHECK(strlen(pb_strerror(PB_ERR_DEPTH)) > 0);
}

TEST(pb_reader_limits_depth)
{
	struct pb_buf b;
	struct pb_reader r[PB_MAX_DEPTH + 2];
	struct pb_field f;
	size_t tokens[PB_MAX_DEPTH + 1];
	int depth = 0, err = 0;

	pb_buf_init(&b);
	for (int i = 0; i <= PB_MAX_DEPTH; i++)
		tokens[i] = pb_begin(&b, 1);
	pb_varint(&b, 2, 1);
	for (int i = PB_MAX_DEPTH; i >= 0; i--)
		pb_end(&b, tokens[i]);
	pb_reader_init(&r[0], b.data, b.len);
	while (!err && pb_next(&r[depth], &f) == 1 && f.wire == PB_WIRE_LEN) {
		err = pb_enter(&r[depth], &f, &r[depth + 1]);
		if (!err)
			depth++;
	}
	CHECK(err == PB_ERR_DEPTH);
	CHECK(depth == PB_MAX_DEPTH);
	pb_buf_free(&b);
}

/* Round trips. */

TEST(round_trip_rich_timeline)
{
	struct timeline *tl = make_rich();
	struct pftr_stats stats;
	struct timeline *back;

	CHECK(!tl_error(tl));
	back = round_trip(tl, &stats);
	CHECK(same(tl, back));
	CHECK_EQ_U64(stats.events, tl_event_count(tl));
	CHECK_EQ_U64(stats.skipped_packets + stats.skipped_events + stats.skipped_details, 0);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_empty_timeline)
{
	struct timeline *tl = tl_new();
	struct timeline *back = round_trip(tl, NULL);

	CHECK(same(tl, back));
	CHECK(tl_clock_snapshot(back) == NULL);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_deep_nesting_every_level_ends_together)
{
	struct timeline *tl = tl_new();
	int t = add_track(tl, TL_TRACK_THREAD, "t", 0, 1, 1, 0);
	struct timeline *back;

	/* 64 levels that all start and end at the same two instants. */
	for (int i = 0; i < 64; i++) {
		char name[16];

		snprintf(name, sizeof(name), "l%d", i);
		tl_add_slice(tl, t, 100, 100, name, NULL);
	}
	back = round_trip(tl, NULL);
	CHECK(same(tl, back));
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
	CHECK(same(tl, back));
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
	CHECK(same(tl, back));
	CHECK_EQ_U64(tl_track_count(back), 0);
	free(data);
	tl_free(back);
	tl_free(tl);
}

TEST(round_trip_through_files_and_streams)
{
	struct timeline *tl = make_rich(), *back;
	char *path = tmp_path("rich.perfetto-trace");
	char err[256] = "";
	FILE *stream = tmpfile();
	char *data = malloc(1 << 20);
	size_t len;

	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	back = pftr_read_path(path, NULL, err, sizeof(err));
	CHECK(same(tl, back));
	tl_free(back);
	/* Writing again replaces the file whole. */
	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	CHECK(!pftw_write_stream(tl, stream, err, sizeof(err)));
	rewind(stream);
	len = fread(data, 1, 1 << 20, stream);
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	CHECK(same(tl, back));
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
	struct timeline *tl = make_rich();
	char *path = tmp_path("fd.perfetto-trace");
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
	int proc = add_track(tl, TL_TRACK_PROCESS, "big", 0, 1, 0, 0);
	int threads[4];
	struct tl_frame_desc frames[8];
	char name[32], fn[8][16];

	for (int i = 0; i < 4; i++)
		threads[i] = add_track(tl, TL_TRACK_THREAD, "w", uuid_of(tl, proc), 1, 10 + i, 0);
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
	t0 = now_s();
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	t1 = now_s();
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	t2 = now_s();
	CHECK(same(tl, back));
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
	uint64_t event_seq;	    /* the sequence of the first packet */
	size_t descriptors;	    /* track descriptors, all on another sequence ... */
	size_t descriptors_wrong;   /* ... or on the events', or with incremental state flags */
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
	struct timeline *tl = make_rich();
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
			tracks[i] = add_track(tl, TL_TRACK_GLOBAL, "t", 0, 0, 0, 0);
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
		CHECK(same(tl, back));
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
					printf("     flow %llu ends at point %zu before it begins at "
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
	CHECK(same(tl, back));
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
	int t = add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
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
		CHECK(b < n && b + 3 + (2 - i) < n && v[b + 3 + (2 - i)].type == PFT_TYPE_SLICE_END);
	}
	free(data);
	tl_free(tl);
}

/* One sample's frames, through the builder of sampled slices and the writer: root at depth 0. */
TEST(sample_frames_nest_root_first_in_the_file)
{
	struct ht_sample_set set = {0};
	struct ht_sample smp = {.time_ns = 1000, .pid = 7, .tid = 7, .nr_user = 4};
	struct ht_user_window uw = {.tgid = 7, .t0 = 0, .t1 = 5000, .period_ns = 1000,
				    .samples = &set};
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
			rnd_tree(v, &n, (size_t)(i + 1) * CAP / 5, tracks[i], 1000 + 10 * rnd(3), 1040, 0);
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
		CHECK(same(tl, back));
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
	int t = add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
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
	t = add_track(tl, TL_TRACK_THREAD, "worker", 0, 1, 2, 0);
	tl_add_slice(tl, t + 1, 0, 1, "nowhere", NULL);
	CHECK(pftw_write_mem(tl, &data, &len, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "incomplete") != NULL);
	tl_free(tl);
}

/* protoc, when it is installed, decodes the file with our .proto and finds no unknown field. */
TEST(protoc_decodes_written_file)
{
	struct timeline *tl = make_rich();
	char *path = tmp_path("protoc.perfetto-trace");
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

/* The reader and bad input. */

TEST(reader_missing_empty_and_directory)
{
	char *path = tmp_path("empty.perfetto-trace");
	char err[256] = "";

	CHECK(pftr_read_path("/nonexistent-dir/none.perfetto-trace", NULL, err, sizeof(err)) ==
	      NULL);
	CHECK(strstr(err, "cannot open /nonexistent-dir/none.perfetto-trace") != NULL);
	CHECK(pftr_read_path("/", NULL, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "directory") != NULL);
	CHECK(!write_file(path, "", 0));
	CHECK(pftr_read_path(path, NULL, err, sizeof(err)) == NULL);
	CHECK(strstr(err, path) && strstr(err, "empty"));
	unlink(path);
	free(path);
}

TEST(reader_other_formats)
{
	char err[256] = "";

	CHECK(pftr_read_path("/proc/self/exe", NULL, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "ELF") != NULL);
	CHECK(read_fails("hello, world\n", 13, "text"));
	CHECK(read_fails("{\"traceEvents\": []}", 19, "JSON"));
	CHECK(read_fails("\x1f\x8b\x08\x00\x00\x00", 6, "gzip"));
	CHECK(read_fails("PERFILE2\x00\x01", 10, "perf.data"));
	CHECK(read_fails("\x02\x03\x04\x80", 4, "does not start with a TracePacket"));
	/* A packet, then something that is not one. */
	CHECK(read_fails("\x0a\x00\x10\x01", 4, "where a TracePacket should be"));
}

TEST(reader_truncated_files_fail_cleanly)
{
	struct timeline *tl = tl_new();
	int t = add_track(tl, TL_TRACK_THREAD, "t", 0, 1, 2, 0);
	char err[256] = "";
	void *data = NULL;
	size_t len = 0, failed = 0;
	long ev = tl_add_slice(tl, t, 10, 100, "outer", "cat");

	tl_event_arg_str(tl, ev, "k", "value");
	tl_event_callstack(tl, ev, &(struct tl_frame_desc){"main", "/bin/x", 16}, 1);
	tl_add_slice(tl, t, 20, 10, "inner", "cat");
	tl_meta_set(tl, "kernel", "6.1");
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	/* Every prefix: an error or (cut between packets) a shorter trace, never a crash. */
	for (size_t cut = 1; cut < len; cut++) {
		struct timeline *part = pftr_read_mem(data, cut, NULL, err, sizeof(err));

		failed += !part;
		if (!part && !err[0])
			CHECK(!"an error without a message");
		tl_free(part);
	}
	CHECK(failed > len / 2);
	CHECK(read_fails(data, len - 1, "truncated"));
	free(data);
	tl_free(tl);
}

TEST(reader_length_larger_than_file)
{
	/* A packet that claims 60000 bytes, in a 7-byte file. */
	CHECK(read_fails("\x0a\xe0\xd4\x03\x08\x01\x00", 7, "length larger than"));
	/* The same inside a packet: a track event that claims more than its packet has. */
	CHECK(read_fails("\x0a\x04\x5a\x7f\x48\x01", 6, "length larger than"));
}

TEST(reader_random_bytes_never_crash)
{
	uint64_t x = 0x2545f4914f6cdd1dull;
	uint8_t buf[2048];
	char err[256];
	size_t accepted = 0;

	for (int round = 0; round < 3000; round++) {
		size_t len = 1 + (size_t)(x % sizeof(buf));

		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = (uint8_t)x;
		}
		/* Half of them start like a trace, to get past the first check. */
		if (round % 2)
			buf[0] = 0x0a;
		struct timeline *tl = pftr_read_mem(buf, len, NULL, err, sizeof(err));

		accepted += tl != NULL;
		tl_free(tl);
	}
	CHECK(accepted < 30);
}

TEST(reader_skips_unknown_fields_and_deep_unknown_nesting)
{
	struct pb_buf b;
	struct timeline *tl;
	struct pftr_stats stats;
	char err[256] = "";
	size_t p, e, deep[200];

	pb_buf_init(&b);
	track_packet(&b, 5, "t");
	p = packet_begin(&b, 1, 0);
	pb_varint(&b, 999, 1);			   /* unknown varint */
	pb_fixed64(&b, 1000, 2);		   /* unknown fixed64 */
	pb_raw(&b, "\xc5\x3e\x01\x02\x03\x04", 6); /* field 1000, fixed32 */
	for (int i = 0; i < 200; i++)		   /* an unknown message 200 deep */
		deep[i] = pb_begin(&b, 77);
	pb_varint(&b, 1, 1);
	for (int i = 199; i >= 0; i--)
		pb_end(&b, deep[i]);
	pb_varint(&b, PFT_PACKET_TIMESTAMP, 10);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&b, PFT_EVENT_TRACK_UUID, 5);
	pb_string(&b, PFT_EVENT_NAME, "mark");
	pb_string(&b, 9000, "an extension field");
	pb_end(&b, e);
	pb_end(&b, p);
	tl = pftr_read_mem(b.data, b.len, &stats, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		CHECK_EQ_U64(tl_event_count(tl), 1);
		CHECK_STR(tl_str_get(tl, tl_event(tl, 0)->name), "mark");
	}
	tl_free(tl);
	pb_buf_free(&b);
}

TEST(reader_reads_traces_with_other_packet_types)
{
	struct timeline *rich = make_rich(), *tl;
	struct pftr_stats stats;
	struct pb_buf b;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0, p, q;

	/* Packets of kinds the model has no place for, around a trace of ours. */
	pb_buf_init(&b);
	p = pb_begin(&b, PFT_TRACE_PACKET);
	q = pb_begin(&b, 1); /* ftrace_events */
	pb_varint(&b, 1, 3);
	pb_end(&b, q);
	pb_varint(&b, PFT_PACKET_SEQUENCE_ID, 9);
	pb_end(&b, p);
	CHECK(!pftw_write_mem(rich, &data, &len, err, sizeof(err)));
	pb_raw(&b, data, len);
	p = pb_begin(&b, PFT_TRACE_PACKET);
	q = pb_begin(&b, 35); /* trace_stats */
	pb_end(&b, q);
	pb_end(&b, p);
	p = pb_begin(&b, PFT_TRACE_PACKET);
	q = pb_begin(&b, 2); /* process_tree */
	pb_varint(&b, 1, 1);
	pb_end(&b, q);
	pb_end(&b, p);
	tl = pftr_read_mem(b.data, b.len, &stats, err, sizeof(err));
	CHECK(same(rich, tl));
	CHECK_EQ_U64(stats.skipped_packets, 3);
	free(data);
	pb_buf_free(&b);
	tl_free(tl);
	tl_free(rich);
}

TEST(reader_rejects_unmatched_and_unended_slices)
{
	struct pb_buf b;

	pb_buf_init(&b);
	track_packet(&b, 5, "t");
	event_packet(&b, 1, 0, 10, PFT_TYPE_SLICE_END, 5, NULL);
	CHECK(read_fails(b.data, b.len, "no slice open"));
	pb_buf_reset(&b);
	track_packet(&b, 5, "t");
	event_packet(&b, 1, 0, 10, PFT_TYPE_SLICE_BEGIN, 5, "forever");
	CHECK(read_fails(b.data, b.len, "'forever' on track 't' begins at 10 ns and never ends"));
	pb_buf_reset(&b);
	track_packet(&b, 5, "t");
	event_packet(&b, 1, 0, 10, PFT_TYPE_SLICE_BEGIN, 5, "backwards");
	event_packet(&b, 1, 0, 5, PFT_TYPE_SLICE_END, 5, NULL);
	CHECK(read_fails(b.data, b.len, "before it begins"));
	pb_buf_free(&b);
}

TEST(reader_rejects_iids_never_interned)
{
	struct pb_buf b;
	size_t p, e;

	pb_buf_init(&b);
	track_packet(&b, 5, "t");
	p = packet_begin(&b, 1, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&b, PFT_EVENT_TRACK_UUID, 5);
	pb_varint(&b, PFT_EVENT_NAME_IID, 3);
	pb_end(&b, e);
	pb_end(&b, p);
	CHECK(read_fails(b.data, b.len, "event name iid 3 was never interned"));
	pb_buf_free(&b);
}

TEST(reader_rejects_wrong_wire_types)
{
	/* TracePacket.timestamp as a string. */
	CHECK(read_fails("\x0a\x03\x42\x01\x00", 5, "wire type"));
	/* TrackEvent as a varint. */
	CHECK(read_fails("\x0a\x02\x58\x01", 4, "wire type"));
	/* A varint of eleven bytes inside a packet. */
	CHECK(read_fails("\x0a\x0c\x40\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14, "varint"));
}

/* A thread descriptor as another system writes it: tid is int64 in Perfetto's .proto. */
static void thread_packet(struct pb_buf *b, uint64_t uuid, int64_t tid)
{
	size_t p = packet_begin(b, 1, 0);
	size_t d = pb_begin(b, PFT_PACKET_TRACK_DESCRIPTOR);
	size_t t;

	pb_varint(b, PFT_TRACK_UUID, uuid);
	t = pb_begin(b, PFT_TRACK_THREAD);
	pb_int(b, PFT_THREAD_PID, 7);
	pb_int(b, PFT_THREAD_TID, tid);
	pb_string(b, PFT_THREAD_NAME, "t");
	pb_end(b, t);
	pb_end(b, d);
	pb_end(b, p);
}

TEST(reader_refuses_tids_wider_than_32_bits)
{
	struct pb_buf b;
	struct timeline *tl;
	char err[256] = "";

	pb_buf_init(&b);
	thread_packet(&b, 5, -42);
	tl = pftr_read_mem(b.data, b.len, NULL, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		CHECK_EQ_U64(tl_track_count(tl), 1);
		CHECK_EQ_U64((uint64_t)(int64_t)tl_track(tl, 0)->tid, (uint64_t)-42);
	}
	tl_free(tl);

	/* 2^32 + 5 would wrap onto thread 5. */
	pb_buf_reset(&b);
	thread_packet(&b, 5, ((int64_t)1 << 32) + 5);
	CHECK(read_fails(b.data, b.len, "thread id 4294967301 does not fit in 32 bits"));
	pb_buf_reset(&b);
	thread_packet(&b, 5, (int64_t)INT32_MIN - 1);
	CHECK(read_fails(b.data, b.len, "does not fit in 32 bits"));
	pb_buf_free(&b);
}

/* Incremental state: lost state skips packets until the sequence is cleared again. */
TEST(reader_follows_incremental_state_per_sequence)
{
	struct pb_buf b;
	struct timeline *tl;
	struct pftr_stats stats;
	char err[256] = "";

	pb_buf_init(&b);
	track_packet(&b, 5, "t");
	/* Sequence 7 never cleared: its packet needing state is skipped. */
	event_packet(&b, 7, PFT_SEQ_NEEDS_INCREMENTAL_STATE, 10, PFT_TYPE_INSTANT, 5, "lost");
	/* Sequence 8: cleared, used, dropped packets, skipped, cleared again. */
	event_packet(&b, 8, PFT_SEQ_INCREMENTAL_STATE_CLEARED, 20, PFT_TYPE_INSTANT, 5, "one");
	event_packet(&b, 8, PFT_SEQ_NEEDS_INCREMENTAL_STATE, 30, PFT_TYPE_INSTANT, 5, "two");
	{
		size_t p = packet_begin(&b, 8, PFT_SEQ_NEEDS_INCREMENTAL_STATE);

		pb_varint(&b, PFT_PACKET_PREVIOUS_PACKET_DROPPED, 1);
		pb_end(&b, p);
	}
	event_packet(&b, 8, PFT_SEQ_NEEDS_INCREMENTAL_STATE, 40, PFT_TYPE_INSTANT, 5, "gone");
	event_packet(&b, 8, PFT_SEQ_INCREMENTAL_STATE_CLEARED, 50, PFT_TYPE_INSTANT, 5, "three");
	tl = pftr_read_mem(b.data, b.len, &stats, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		CHECK_EQ_U64(tl_event_count(tl), 3);
		CHECK_STR(tl_str_get(tl, tl_event(tl, 2)->name), "three");
	}
	CHECK_EQ_U64(stats.skipped_events, 2);
	tl_free(tl);
	pb_buf_free(&b);
}

/* An instant on sequence 8 that begins flow OUT and terminates flow IN (0: none). */
static void flow_instant(struct pb_buf *b, uint64_t ts, uint64_t uuid, const char *name,
			 uint64_t out, uint64_t in)
{
	size_t p = packet_begin(b, 8, PFT_SEQ_NEEDS_INCREMENTAL_STATE);
	size_t e;

	pb_varint(b, PFT_PACKET_TIMESTAMP, ts);
	e = pb_begin(b, PFT_PACKET_TRACK_EVENT);
	pb_varint(b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(b, PFT_EVENT_TRACK_UUID, uuid);
	pb_string(b, PFT_EVENT_NAME, name);
	if (out)
		pb_fixed64(b, PFT_EVENT_FLOW_IDS, out);
	if (in)
		pb_fixed64(b, PFT_EVENT_TERMINATING_FLOW_IDS, in);
	pb_end(b, e);
	pb_end(b, p);
}

/* The flows of the event named NAME: begun (or passed) and terminated there. */
static void flows_of(const struct timeline *tl, const char *name, size_t *out, size_t *in)
{
	*out = *in = SIZE_MAX;
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (!strcmp(tl_str_get(tl, e->name), name)) {
			*out = tl_event_lists(tl, e)->flows_out.count;
			*in = tl_event_lists(tl, e)->flows_in.count;
		}
	}
}

/*
 * Perfetto's importer takes events by time, then file order; a terminating
 * flow id whose flow is not active then is skipped (track_event_event_importer.h,
 * `if (!IsActive(flow_id)) continue;`), and an ended flow is no longer active.
 * The reader drops and counts those ids, so report sees the arrows the UI shows.
 */
TEST(reader_drops_flow_ends_perfetto_drops)
{
	static const struct {
		const char *name;
		size_t out, in;
	} want[] = {{"a", 0, 0}, {"b", 1, 0}, {"c", 0, 1}, {"d", 1, 0}, {"e", 1, 0},
		    {"f", 0, 1}, {"g", 0, 0}, {"h", 1, 0}, {"i", 1, 0}, {"j", 0, 1}};
	struct pftr_stats st;
	struct timeline *tl;
	char err[256] = "";
	struct pb_buf b;

	pb_buf_init(&b);
	track_packet(&b, 5, "t5");
	track_packet(&b, 6, "t6");
	event_packet(&b, 8, PFT_SEQ_INCREMENTAL_STATE_CLEARED, 1, PFT_TYPE_INSTANT, 5, "start");
	flow_instant(&b, 100, 5, "a", 0, 1); /* ends flow 1 before it begins: dropped */
	flow_instant(&b, 100, 6, "b", 1, 0); /* ... which then stays open */
	flow_instant(&b, 200, 5, "c", 0, 2); /* earlier in the file, later in time: kept */
	flow_instant(&b, 150, 6, "d", 2, 0);
	flow_instant(&b, 300, 6, "e", 3, 0);
	flow_instant(&b, 300, 5, "f", 0, 3);
	flow_instant(&b, 400, 5, "g", 0, 3); /* flow 3 has ended: dropped */
	flow_instant(&b, 500, 6, "h", 4, 0);
	flow_instant(&b, 600, 5, "i", 4, 0); /* passes flow 4 on */
	flow_instant(&b, 700, 6, "j", 0, 4);
	tl = pftr_read_mem(b.data, b.len, &st, err, sizeof(err));
	CHECK(tl != NULL);
	for (size_t i = 0; tl && i < sizeof(want) / sizeof(want[0]); i++) {
		size_t out, in;

		flows_of(tl, want[i].name, &out, &in);
		if (out != want[i].out || in != want[i].in)
			printf("     %s: %zu out, %zu in\n", want[i].name, out, in);
		CHECK(out == want[i].out && in == want[i].in);
	}
	CHECK_EQ_U64(st.flows_begun, 4);
	CHECK_EQ_U64(st.flow_ends_dropped, 2);
	tl_free(tl);
	pb_buf_free(&b);
}

/* Other writers pack repeated fields and use defaults; the reader follows. */
TEST(reader_accepts_packed_fields_and_defaults)
{
	struct pb_buf b, packed;
	struct timeline *tl;
	char err[256] = "";
	size_t p, i, e, entry;
	const struct tl_event *ev;

	pb_buf_init(&b);
	pb_buf_init(&packed);
	track_packet(&b, 5, "t");
	p = packet_begin(&b, 3, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	e = pb_begin(&b, PFT_PACKET_DEFAULTS);
	entry = pb_begin(&b, PFT_DEFAULTS_TRACK_EVENT_DEFAULTS);
	pb_varint(&b, PFT_TRACK_EVENT_DEFAULTS_TRACK_UUID, 5);
	pb_end(&b, entry);
	pb_end(&b, e);
	pb_varint(&b, PFT_PACKET_TIMESTAMP, 100);
	i = pb_begin(&b, PFT_PACKET_INTERNED_DATA);
	entry = pb_begin(&b, PFT_INTERNED_FUNCTION_NAMES);
	pb_varint(&b, PFT_INTERNED_IID, 1);
	pb_string(&b, PFT_INTERNED_STRING, "leaf");
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_FRAMES);
	pb_varint(&b, PFT_FRAME_IID, 4);
	pb_varint(&b, PFT_FRAME_FUNCTION_NAME_ID, 1);
	pb_varint(&b, PFT_FRAME_REL_PC, 0x99);
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_CALLSTACKS);
	pb_varint(&b, PFT_CALLSTACK_IID, 2);
	pb_raw(&packed, "\x04\x04", 2);
	pb_bytes(&b, PFT_CALLSTACK_FRAME_IDS, packed.data, packed.len);
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_EVENT_CATEGORIES);
	pb_varint(&b, PFT_INTERNED_IID, 1);
	pb_string(&b, PFT_INTERNED_STRING, "cat");
	pb_end(&b, entry);
	pb_end(&b, i);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_string(&b, PFT_EVENT_NAME, "packed");
	pb_bytes(&b, PFT_EVENT_CATEGORY_IIDS, "\x01\x01", 2);
	pb_bytes(&b, PFT_EVENT_FLOW_IDS, "\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 16);
	/* Ends flow 2, which the same event began: Perfetto reads its flow ids first. */
	pb_bytes(&b, PFT_EVENT_TERMINATING_FLOW_IDS_OLD, "\x02", 1);
	pb_varint(&b, PFT_EVENT_CALLSTACK_IID, 2);
	pb_end(&b, e);
	pb_end(&b, p);
	tl = pftr_read_mem(b.data, b.len, NULL, err, sizeof(err));
	CHECK(tl != NULL);
	if (!tl)
		printf("     %s\n", err);
	ev = tl ? tl_event(tl, 0) : NULL;
	CHECK(ev != NULL);
	if (ev) {
		CHECK_STR(tl_str_get(tl, ev->category), "cat");
		CHECK_EQ_U64(tl_event_lists(tl, ev)->flows_out.count, 2);
		CHECK_EQ_U64(tl_event_lists(tl, ev)->flows_in.count, 1);
		if (tl_event_lists(tl, ev)->flows_in.count)
			CHECK_EQ_U64(tl_flow(tl, tl_event_lists(tl, ev)->flows_in.first)->id, 2);
		CHECK_EQ_U64(tl_callstack_depth(tl, ev->callstack), 2);
		CHECK_STR(tl_str_get(tl, tl_callstack_frame(tl, ev->callstack, 1)->function),
			  "leaf");
		CHECK_EQ_U64(tl_callstack_frame(tl, ev->callstack, 1)->address, 0x99);
	}
	tl_free(tl);
	pb_buf_free(&b);
	pb_buf_free(&packed);
}

/* Work grows with the input, not its square: many metadata keys, a long chain of parents. */
TEST(reader_large_crafted_input_is_linear)
{
	enum { KEYS = 100000, TRACKS = 20000 };
	struct pb_buf b;
	struct timeline *tl;
	char err[256] = "", key[32];
	size_t p, e, ann, d;
	double t0;

	pb_buf_init(&b);
	/* Each track's parent comes after it in the file: the worst order for a reader. */
	for (uint64_t i = 1; i <= TRACKS; i++) {
		p = packet_begin(&b, 1, 0);
		d = pb_begin(&b, PFT_PACKET_TRACK_DESCRIPTOR);
		pb_varint(&b, PFT_TRACK_UUID, i);
		if (i < TRACKS)
			pb_varint(&b, PFT_TRACK_PARENT_UUID, i + 1);
		pb_end(&b, d);
		pb_end(&b, p);
	}
	p = packet_begin(&b, 1, 0);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&b, PFT_EVENT_TRACK_UUID, TL_HYBTRACE_UUID);
	pb_string(&b, PFT_EVENT_NAME, PFTW_META_EVENT);
	for (int i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "key.%d", i);
		ann = pb_begin(&b, PFT_EVENT_DEBUG_ANNOTATIONS);
		pb_string(&b, PFT_ANNOTATION_NAME, key);
		pb_string(&b, PFT_ANNOTATION_STRING, "v");
		pb_end(&b, ann);
	}
	pb_end(&b, e);
	pb_end(&b, p);
	t0 = now_s();
	tl = pftr_read_mem(b.data, b.len, NULL, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		CHECK_EQ_U64(tl_meta_count(tl), KEYS);
		CHECK_EQ_U64(tl_track_count(tl), TRACKS);
		CHECK_STR(tl_meta_get(tl, "key.99999"), "v");
	}
	CHECK(now_s() - t0 < 10.0);
	if (now_s() - t0 > 1.0)
		printf("     slow: %zu bytes read in %.2f s\n", b.len, now_s() - t0);
	tl_free(tl);
	pb_buf_free(&b);
}

/* More than the model holds is skipped and counted; a mapping path too long is an error. */
TEST(reader_keeps_within_model_limits)
{
	struct pb_buf b;
	struct timeline *tl;
	struct pftr_stats stats;
	char err[256] = "";
	size_t p, i, e, entry;
	const struct tl_event *ev;

	pb_buf_init(&b);
	track_packet(&b, 5, "t");
	p = packet_begin(&b, 1, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	i = pb_begin(&b, PFT_PACKET_INTERNED_DATA);
	entry = pb_begin(&b, PFT_INTERNED_FRAMES);
	pb_varint(&b, PFT_FRAME_IID, 1);
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_CALLSTACKS);
	pb_varint(&b, PFT_CALLSTACK_IID, 1);
	for (int n = 0; n <= TL_MAX_FRAMES; n++)
		pb_varint(&b, PFT_CALLSTACK_FRAME_IDS, 1);
	pb_end(&b, entry);
	pb_end(&b, i);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&b, PFT_EVENT_TRACK_UUID, 5);
	pb_string(&b, PFT_EVENT_CATEGORIES, "inline category");
	pb_varint(&b, PFT_EVENT_CALLSTACK_IID, 1);
	for (int n = 0; n < TL_MAX_ARGS + 3; n++) {
		size_t ann = pb_begin(&b, PFT_EVENT_DEBUG_ANNOTATIONS);

		pb_string(&b, PFT_ANNOTATION_NAME, "a");
		pb_varint(&b, PFT_ANNOTATION_UINT, (uint64_t)n);
		pb_end(&b, ann);
	}
	for (int n = 0; n < TL_MAX_FLOWS + 2; n++)
		pb_varint(&b, PFT_EVENT_FLOW_IDS_OLD, (uint64_t)n + 1);
	pb_end(&b, e);
	pb_end(&b, p);
	tl = pftr_read_mem(b.data, b.len, &stats, err, sizeof(err));
	ev = tl ? tl_event(tl, 0) : NULL;
	CHECK(ev != NULL);
	if (ev) {
		CHECK_STR(tl_str_get(tl, ev->category), "inline category");
		CHECK_EQ_U64(tl_event_lists(tl, ev)->args.count, TL_MAX_ARGS);
		CHECK_EQ_U64(tl_event_lists(tl, ev)->flows_out.count, TL_MAX_FLOWS);
		CHECK_EQ_U64(ev->callstack, 0);
	}
	CHECK_EQ_U64(stats.skipped_details, 3 + 2 + 1);
	tl_free(tl);

	/* A mapping whose path parts add up to more than a path can be. */
	pb_buf_reset(&b);
	track_packet(&b, 5, "t");
	p = packet_begin(&b, 1, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	i = pb_begin(&b, PFT_PACKET_INTERNED_DATA);
	entry = pb_begin(&b, PFT_INTERNED_MAPPING_PATHS);
	pb_varint(&b, PFT_INTERNED_IID, 1);
	pb_string(&b, PFT_INTERNED_STRING, "a-directory-name-of-forty-bytes-or-so--");
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_MAPPINGS);
	pb_varint(&b, PFT_MAPPING_IID, 1);
	for (int n = 0; n < 200; n++)
		pb_varint(&b, PFT_MAPPING_PATH_STRING_IDS, 1);
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_FRAMES);
	pb_varint(&b, PFT_FRAME_IID, 1);
	pb_varint(&b, PFT_FRAME_MAPPING_ID, 1);
	pb_end(&b, entry);
	entry = pb_begin(&b, PFT_INTERNED_CALLSTACKS);
	pb_varint(&b, PFT_CALLSTACK_IID, 1);
	pb_varint(&b, PFT_CALLSTACK_FRAME_IDS, 1);
	pb_end(&b, entry);
	pb_end(&b, i);
	e = pb_begin(&b, PFT_PACKET_TRACK_EVENT);
	pb_varint(&b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&b, PFT_EVENT_TRACK_UUID, 5);
	pb_varint(&b, PFT_EVENT_CALLSTACK_IID, 1);
	pb_end(&b, e);
	pb_end(&b, p);
	CHECK(read_fails(b.data, b.len, "mapping path is longer"));
	pb_buf_free(&b);
}

TEST(reader_limits_packet_sequences)
{
	struct pb_buf b;

	pb_buf_init(&b);
	for (uint32_t seq = 1; seq <= PFTR_MAX_SEQUENCES + 1; seq++) {
		size_t p = packet_begin(&b, seq, 0);

		pb_end(&b, p);
	}
	CHECK(read_fails(b.data, b.len, "packet sequences"));
	pb_buf_free(&b);
}
