// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Perfetto reader on input that is broken, foreign or hostile: missing,
 * truncated and random files, other producers' packets, wire types and ids
 * that lie, incremental state, Perfetto's own rules for flows, and limits.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trace/pb.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "trace/timeline.h"
#include "trace_fixtures.h"

/* Helpers. */

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

/*
 * A packet at TS holding an event of TYPE with an inline name (no
 * interning), on track UUID; the packet is returned and the event is *E,
 * both left open for more fields: pb_end() them.
 */
static size_t event_packet_begin(struct pb_buf *b, uint32_t seq, uint64_t flags, uint64_t ts,
				 uint64_t type, uint64_t uuid, const char *name, size_t *e)
{
	size_t p = packet_begin(b, seq, flags);

	pb_varint(b, PFT_PACKET_TIMESTAMP, ts);
	*e = pb_begin(b, PFT_PACKET_TRACK_EVENT);
	pb_varint(b, PFT_EVENT_TYPE, type);
	if (uuid)
		pb_varint(b, PFT_EVENT_TRACK_UUID, uuid);
	if (name)
		pb_string(b, PFT_EVENT_NAME, name);
	return p;
}

/* An event with an inline name (no interning), on track UUID. */
static void event_packet(struct pb_buf *b, uint32_t seq, uint64_t flags, uint64_t ts, uint64_t type,
			 uint64_t uuid, const char *name)
{
	size_t e, p = event_packet_begin(b, seq, flags, ts, type, uuid, name, &e);

	pb_end(b, e);
	pb_end(b, p);
}

/* An instant event on track UUID (0: none), left open for the caller's fields: pb_end() it. */
static size_t instant_begin(struct pb_buf *b, uint64_t uuid)
{
	size_t e = pb_begin(b, PFT_PACKET_TRACK_EVENT);

	pb_varint(b, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	if (uuid)
		pb_varint(b, PFT_EVENT_TRACK_UUID, uuid);
	return e;
}

/* Interned callstack IID: NFRAMES frames, each the interned frame FRAME_IID. */
static void interned_callstack(struct pb_buf *b, uint64_t iid, uint64_t frame_iid, int nframes)
{
	size_t entry = pb_begin(b, PFT_INTERNED_CALLSTACKS);

	pb_varint(b, PFT_CALLSTACK_IID, iid);
	for (int n = 0; n < nframes; n++)
		pb_varint(b, PFT_CALLSTACK_FRAME_IDS, frame_iid);
	pb_end(b, entry);
}

/* The reader and bad input. */

TEST(reader_missing_empty_and_directory)
{
	char *path = fx_tmp_path("empty.perfetto-trace");
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
	int t = fx_add_track(tl, TL_TRACK_THREAD, "t", 0, 1, 2, 0);
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
	e = instant_begin(&b, 5);
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
	struct timeline *rich = fx_make_rich(), *tl;
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
	CHECK(fx_same(rich, tl));
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
	e = instant_begin(&b, 5);
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
	size_t e, p = event_packet_begin(b, 8, PFT_SEQ_NEEDS_INCREMENTAL_STATE, ts,
					 PFT_TYPE_INSTANT, uuid, name, &e);

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
	e = instant_begin(&b, 0);
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
	e = instant_begin(&b, TL_HYBTRACE_UUID);
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
	t0 = fx_now_s();
	tl = pftr_read_mem(b.data, b.len, NULL, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		CHECK_EQ_U64(tl_meta_count(tl), KEYS);
		CHECK_EQ_U64(tl_track_count(tl), TRACKS);
		CHECK_STR(tl_meta_get(tl, "key.99999"), "v");
	}
	CHECK(fx_now_s() - t0 < 10.0);
	if (fx_now_s() - t0 > 1.0)
		printf("     slow: %zu bytes read in %.2f s\n", b.len, fx_now_s() - t0);
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
	interned_callstack(&b, 1, 1, TL_MAX_FRAMES + 1);
	pb_end(&b, i);
	e = instant_begin(&b, 5);
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
	interned_callstack(&b, 1, 1, 1);
	pb_end(&b, i);
	e = instant_begin(&b, 5);
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
