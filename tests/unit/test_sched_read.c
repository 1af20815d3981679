// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Native scheduling data built by hand from Perfetto's protos (not by
 * hybtrace's writer), read back into thread states by the importer's rules.
 */
#include "check.h"
#include "kernel/sched_ftrace.h"
#include "kernel/sched_read.h"
#include "trace/pb.h"

#define A   101
#define B   102
#define C   103
#define HOG 104

static void packed(struct pb_buf *b, uint32_t field, const uint64_t *v, size_t n, bool deltas)
{
	struct pb_buf body;

	pb_buf_init(&body);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = deltas && i ? v[i] - v[i - 1] : v[i];
		uint8_t tmp[10];
		size_t len = 0;

		do {
			tmp[len++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
			x >>= 7;
		} while (x);
		pb_raw(&body, tmp, len);
	}
	pb_bytes(b, field, body.data, body.len);
	pb_buf_free(&body);
}

static size_t begin_packet(struct pb_buf *b)
{
	return pb_begin(b, 1);
}

struct compact {
	size_t nsw, nwk, ncomms;
	const char *comms[4];
	uint64_t sw_ts[8], sw_state[8], sw_pid[8], sw_comm[8];
	uint64_t wk_ts[8], wk_pid[8], wk_flags[8];
};

static void bundle(struct pb_buf *b, uint32_t cpu, const struct compact *c,
		   void (*full)(struct pb_buf *))
{
	size_t p = begin_packet(b), bu = pb_begin(b, HT_FTF_PACKET_FTRACE_EVENTS), cs;

	pb_varint(b, HT_FTF_BUNDLE_CPU, cpu);
	cs = pb_begin(b, HT_FTF_BUNDLE_COMPACT_SCHED);
	packed(b, HT_FTF_COMPACT_SWITCH_TIMESTAMP, c->sw_ts, c->nsw, true);
	packed(b, HT_FTF_COMPACT_SWITCH_PREV_STATE, c->sw_state, c->nsw, false);
	packed(b, HT_FTF_COMPACT_SWITCH_NEXT_PID, c->sw_pid, c->nsw, false);
	for (size_t i = 0; i < c->ncomms; i++)
		pb_string(b, HT_FTF_COMPACT_INTERN_TABLE, c->comms[i]);
	if (c->ncomms)
		packed(b, HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX, c->sw_comm, c->nsw, false);
	packed(b, HT_FTF_COMPACT_WAKING_TIMESTAMP, c->wk_ts, c->nwk, true);
	packed(b, HT_FTF_COMPACT_WAKING_PID, c->wk_pid, c->nwk, false);
	packed(b, HT_FTF_COMPACT_WAKING_COMMON_FLAGS, c->wk_flags, c->nwk, false);
	pb_end(b, cs);
	if (full)
		full(b);
	pb_end(b, bu);
	pb_end(b, p);
}

/* On CPU 1: B forks C at 1120; A's sleep (from 1200) blocked in futex_wait_queue. */
static void cpu1_full_events(struct pb_buf *b)
{
	size_t e = pb_begin(b, HT_FTF_BUNDLE_EVENT), m;

	pb_varint(b, HT_FTF_EVENT_TIMESTAMP, 1120);
	pb_varint(b, HT_FTF_EVENT_PID, B);
	m = pb_begin(b, HT_FTF_EVENT_TASK_NEWTASK);
	pb_varint(b, HT_FTF_NEWTASK_PID, C);
	pb_string(b, HT_FTF_NEWTASK_COMM, "child");
	pb_end(b, m);
	pb_end(b, e);
	e = pb_begin(b, HT_FTF_BUNDLE_EVENT);
	pb_varint(b, HT_FTF_EVENT_TIMESTAMP, 1210);
	pb_varint(b, HT_FTF_EVENT_PID, A);
	m = pb_begin(b, HT_FTF_EVENT_SCHED_BLOCKED_REASON);
	pb_varint(b, HT_FTF_BLOCKED_REASON_PID, A);
	pb_varint(b, HT_FTF_BLOCKED_REASON_CALLER, 7);
	pb_end(b, m);
	pb_end(b, e);
}

static void kernel_symbols(struct pb_buf *b)
{
	size_t p = begin_packet(b), in = pb_begin(b, 12), s;

	s = pb_begin(b, HT_FTF_INTERNED_KERNEL_SYMBOLS);
	pb_varint(b, 1, 7);
	pb_string(b, 2, "futex_wait_queue");
	pb_end(b, s);
	pb_end(b, in);
	pb_end(b, p);
}

static void check_state(const struct ht_thread_state *s, uint64_t ts, int64_t dur,
			const char *state, int32_t cpu, bool woken, uint32_t waker)
{
	CHECK_EQ_U64(s->ts_ns, ts);
	CHECK(s->dur_ns == dur);
	CHECK(!strcmp(s->state, state));
	CHECK(s->cpu == cpu);
	CHECK(s->woken == woken);
	if (woken)
		CHECK_EQ_U64(s->waker_tid, waker);
}

TEST(thread_states_follow_the_importers_rules)
{
	struct compact c0 = {
		/* The first switch only says A runs; then A sleeps, the hog runs; A preempts it. */
		.nsw = 3,
		.sw_ts = { 1100, 1200, 1400 },
		.sw_state = { 0, 0x1, 0x100 },
		.sw_pid = { A, HOG, A },
		.ncomms = 2,
		.comms = { "victim", "hog" },
		.sw_comm = { 0, 1, 0 },
		/*
		 * Before CPU 0's first switch: dropped. Then the hog wakes A; A
		 * wakes the preempted hog, which Perfetto takes for blocked ("R+"
		 * is not "R").
		 */
		.nwk = 3,
		.wk_ts = { 1050, 1300, 1450 },
		.wk_pid = { B, A, HOG },
		.wk_flags = { 0, 0, 0 },
	};
	struct compact c1 = {
		.nsw = 1,
		.sw_ts = { 1100 },
		.sw_state = { 0 },
		.sw_pid = { B },
		/* A runnable already, the hog running: both spurious. */
		.nwk = 2,
		.wk_ts = { 1350, 1360 },
		.wk_pid = { HOG, A },
		.wk_flags = { HT_FTRACE_FLAG_HARDIRQ, 0 },
	};
	struct ht_native_sched ns;
	const struct ht_thread_state *s;
	struct pb_buf b;
	size_t n;

	pb_buf_init(&b);
	kernel_symbols(&b);
	bundle(&b, 0, &c0, NULL);
	bundle(&b, 1, &c1, cpu1_full_events);
	/* BOOTTIME 100 ns ahead of MONOTONIC: every time 100 earlier. */
	CHECK(!ht_native_sched_read(b.data, b.len, 100, &ns));
	CHECK(ns.present);
	CHECK_EQ_U64(ns.switches, 4);
	CHECK_EQ_U64(ns.wakings, 5);
	CHECK_EQ_U64(ns.wakings_dropped, 1);
	CHECK_EQ_U64(ns.wakings_spurious, 2);
	CHECK_EQ_U64(ns.newtasks, 1);
	CHECK_EQ_U64(ns.blocked_reasons, 1);
	s = ht_native_sched_thread(&ns, A, &n);
	CHECK_EQ_U64(n, 3);
	if (n == 3) {
		check_state(&s[0], 1100, 100, "S", -1, false, 0);
		CHECK(s[0].blocked_function && !strcmp(s[0].blocked_function, "futex_wait_queue"));
		check_state(&s[1], 1200, 100, "R", -1, true, HOG);
		CHECK(!s[1].irq);
		check_state(&s[2], 1300, -1, "Running", 0, false, 0);
		CHECK(s[2].comm && !strcmp(s[2].comm, "victim") && !s[1].comm);
	}
	s = ht_native_sched_thread(&ns, HOG, &n);
	CHECK_EQ_U64(n, 3);
	if (n == 3) {
		check_state(&s[0], 1100, 200, "Running", 0, false, 0);
		CHECK(s[0].comm && !strcmp(s[0].comm, "hog"));
		check_state(&s[1], 1300, 50, "R+", -1, false, 0);
		check_state(&s[2], 1350, -1, "R", -1, true, A);
	}
	s = ht_native_sched_thread(&ns, C, &n);
	CHECK_EQ_U64(n, 1);
	if (n == 1)
		check_state(&s[0], 1020, -1, "R", -1, true, B);
	/* B's only switch was CPU 1's first: no state. */
	CHECK(!ht_native_sched_thread(&ns, B, &n) && !n);
	ht_native_sched_free(&ns);
	pb_buf_free(&b);
}

/*
 * A thread switched out where it was not running by its rows (a switch-in
 * lost): Perfetto leaves the state it was in open (dur -1) rather than end it.
 */
TEST(a_switch_out_of_a_thread_not_running_leaves_its_state_open)
{
	struct compact c0 = { .nsw = 2, .sw_ts = { 100, 200 }, .sw_state = { 0, 0x1 },
			      .sw_pid = { A, B } };
	struct compact c1 = { .nsw = 2, .sw_ts = { 120, 250 }, .sw_state = { 0, 0x1 },
			      .sw_pid = { A, C } };
	struct ht_native_sched ns;
	const struct ht_thread_state *s;
	struct pb_buf b;
	size_t n;

	pb_buf_init(&b);
	bundle(&b, 0, &c0, NULL);
	bundle(&b, 1, &c1, NULL);
	CHECK(!ht_native_sched_read(b.data, b.len, 0, &ns));
	s = ht_native_sched_thread(&ns, A, &n);
	CHECK_EQ_U64(n, 2);
	if (n == 2) {
		check_state(&s[0], 200, -1, "S", -1, false, 0);
		check_state(&s[1], 250, -1, "S", -1, false, 0);
	}
	ht_native_sched_free(&ns);
	pb_buf_free(&b);
}

/* A file without native scheduling data (a dump of an earlier version) has none. */
TEST(no_bundles_no_states)
{
	struct ht_native_sched ns;
	struct pb_buf b;
	size_t n;

	pb_buf_init(&b);
	kernel_symbols(&b);
	CHECK(!ht_native_sched_read(b.data, b.len, 0, &ns));
	CHECK(!ns.present && !ns.nstates);
	CHECK(!ht_native_sched_thread(&ns, A, &n) && !n);
	ht_native_sched_free(&ns);
	pb_buf_free(&b);
}

/* Bytes that are no protobuf: one error, nothing kept. */
TEST(malformed_input_fails_cleanly)
{
	static const uint8_t junk[] = { 0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01 };
	struct ht_native_sched ns;

	CHECK(ht_native_sched_read(junk, sizeof(junk), 0, &ns) == -1);
	CHECK(!ns.nstates && !ns.states);
}
