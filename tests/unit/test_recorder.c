// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The flight-recorder reader on rings built by hand: wrapped, torn, clipped. */
#include "check.h"
#include "kernel/monitor.h"
#include "kernel/recorder.h"

#define NCPUS 2
#define SHIFT 4 /* 16 records per CPU */
#define SLOTS (1u << SHIFT)

struct fake_rings {
	struct ht_flight_record records[NCPUS * SLOTS];
	struct ht_fr_head heads[NCPUS];
	struct ht_recorder r;
};

static void rings_init(struct fake_rings *f)
{
	memset(f, 0, sizeof(*f));
	f->r.records = f->records;
	f->r.heads = f->heads;
	f->r.ncpus = NCPUS;
	f->r.slot_shift = SHIFT;
}

/* Append a record as the BPF writer would. */
static struct ht_flight_record *push(struct fake_rings *f, unsigned int cpu, uint64_t ts,
				     uint8_t kind, uint32_t a, uint32_t b)
{
	uint64_t index = f->heads[cpu].next_index++;
	struct ht_flight_record *r = &f->records[cpu * SLOTS + (index & (SLOTS - 1))];

	r->ts_ns = ts;
	r->kind = kind;
	r->tid_a = a;
	r->tid_b = b;
	r->seq = (uint32_t)(index + 1);
	return r;
}

TEST(merges_cpus_in_time_order)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	push(&f, 0, 100, HT_FR_SWITCH, 1, 2);
	push(&f, 1, 150, HT_FR_SWITCH, 3, 4);
	push(&f, 0, 200, HT_FR_SWITCH, 2, 1);
	push(&f, 1, 250, HT_FR_SWITCH, 4, 3);
	CHECK(!ht_recorder_read(&f.r, 0, 1000, &w));
	CHECK_EQ_U64(w.count, 4);
	CHECK_EQ_U64(w.events[0].rec.ts_ns, 100);
	CHECK_EQ_U64(w.events[1].rec.ts_ns, 150);
	CHECK(w.events[1].cpu == 1);
	CHECK_EQ_U64(w.events[3].rec.ts_ns, 250);
	CHECK(!w.clipped);
	CHECK_EQ_U64(w.skipped_records, 0);
	ht_fr_window_free(&w);
}

TEST(window_bounds_and_entry_switch)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	for (int i = 0; i < 10; i++)
		push(&f, 0, 1000 + (uint64_t)i * 100, HT_FR_SWITCH, (uint32_t)i, (uint32_t)i + 1);
	/* [1250, 1550] holds 1300, 1400, 1500; the last switch before 1250 is at 1200. */
	CHECK(!ht_recorder_read(&f.r, 1250, 1550, &w));
	CHECK_EQ_U64(w.count, 3);
	CHECK_EQ_U64(w.events[0].rec.ts_ns, 1300);
	CHECK_EQ_U64(w.events[2].rec.ts_ns, 1500);
	CHECK(w.entry_valid[0]);
	CHECK_EQ_U64(w.entry_switch[0].rec.ts_ns, 1200);
	CHECK(w.entry_switch[0].rec.tid_b == 3);
	CHECK(!w.entry_valid[1]);
	ht_fr_window_free(&w);
}

TEST(wrapped_ring_keeps_newest_and_clips)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	/* 40 records into 16 slots: indices 24..39 survive, timestamps 2400..3900. */
	for (int i = 0; i < 40; i++)
		push(&f, 0, (uint64_t)i * 100, HT_FR_SWITCH, 1, 2);
	CHECK(!ht_recorder_read(&f.r, 0, 10000, &w));
	CHECK_EQ_U64(w.count, SLOTS);
	CHECK_EQ_U64(w.events[0].rec.ts_ns, 2400);
	CHECK_EQ_U64(w.events[SLOTS - 1].rec.ts_ns, 3900);
	CHECK(w.clipped);
	CHECK_EQ_U64(w.covered_from_ns, 2400);
	ht_fr_window_free(&w);

	/* A window inside what survives is whole. */
	CHECK(!ht_recorder_read(&f.r, 3000, 3500, &w));
	CHECK(!w.clipped);
	CHECK_EQ_U64(w.count, 6);
	ht_fr_window_free(&w);
}

TEST(torn_and_stale_records_are_skipped)
{
	struct fake_rings f;
	struct ht_fr_window w;
	struct ht_flight_record *torn, *stale;

	rings_init(&f);
	for (int i = 0; i < 8; i++)
		push(&f, 1, 500 + (uint64_t)i * 10, HT_FR_SWITCH, 7, 8);
	torn = &f.records[1 * SLOTS + 3];
	torn->seq = 0; /* being rewritten */
	stale = &f.records[1 * SLOTS + 5];
	stale->seq = 5 + 1 + SLOTS; /* already overwritten by a later lap */
	CHECK(!ht_recorder_read(&f.r, 0, 10000, &w));
	CHECK_EQ_U64(w.count, 6);
	CHECK_EQ_U64(w.skipped_records, 2);
	for (size_t i = 0; i < w.count; i++)
		CHECK(w.events[i].rec.ts_ns != 530 && w.events[i].rec.ts_ns != 550);
	ht_fr_window_free(&w);
}

TEST(empty_rings)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	CHECK(!ht_recorder_read(&f.r, 0, 10000, &w));
	CHECK_EQ_U64(w.count, 0);
	CHECK(!w.clipped);
	ht_fr_window_free(&w);
}

TEST(slightly_out_of_order_records_are_kept)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	push(&f, 0, 100, HT_FR_SWITCH, 1, 2);
	push(&f, 0, 300, HT_FR_WAKEUP, 5, 0);
	/* A nested program took its timestamp earlier but reserved later. */
	push(&f, 0, 250, HT_FR_MIGRATE, 5, 6);
	push(&f, 0, 400, HT_FR_SWITCH, 2, 5);
	CHECK(!ht_recorder_read(&f.r, 200, 500, &w));
	CHECK_EQ_U64(w.count, 3);
	CHECK_EQ_U64(w.events[0].rec.ts_ns, 250);
	CHECK_EQ_U64(w.events[1].rec.ts_ns, 300);
	ht_fr_window_free(&w);
}

/*
 * The kernel gave task 5 the CPU without its tracepoint: the monitor writes
 * that switch-in at 5's next switch-out, after 5's own events, with the time
 * 5 began to run. It ends a wait inside the window, and is read, however
 * long 5 ran past the window's end.
 */
TEST(a_switch_in_written_late_is_read_where_it_happened)
{
	struct fake_rings f;
	struct ht_fr_window w;

	rings_init(&f);
	push(&f, 0, 100, HT_FR_SWITCH, 1, 77);
	push(&f, 0, 2 * HT_FR_REORDER_SLACK_NS, HT_FR_SYS_ENTER, 5, 0);
	push(&f, 0, 3 * HT_FR_REORDER_SLACK_NS, HT_FR_SYS_EXIT, 5, 0);
	push(&f, 0, 300, HT_FR_SWITCH, 77, 5)->flags = HT_FRF_UNTRACED;
	push(&f, 0, 4 * HT_FR_REORDER_SLACK_NS, HT_FR_SWITCH, 5, 1);
	/* Still being written at the head: past the end, no loss. */
	push(&f, 0, 5 * HT_FR_REORDER_SLACK_NS, HT_FR_SWITCH, 1, 5)->seq = 0;
	CHECK(!ht_recorder_read(&f.r, 0, 1000, &w));
	CHECK_EQ_U64(w.count, 2);
	CHECK(w.count == 2 && w.events[1].rec.ts_ns == 300 && w.events[1].rec.tid_b == 5);
	CHECK_EQ_U64(w.skipped_records, 0);
	ht_fr_window_free(&w);
}

TEST(ring_and_thread_slot_sizes)
{
	/* 32-byte records: 1 MiB a CPU is 2^15 of them; one more rounds up to 2^16. */
	CHECK_EQ_U64(ht_monitor_slot_shift(1 << 20), 15);
	CHECK_EQ_U64(ht_monitor_slot_shift((1 << 20) + 32), 16);
	/* One slot per possible tid, a power of two, within bounds. */
	CHECK_EQ_U64(ht_monitor_thread_slots(32768), 32768);
	CHECK_EQ_U64(ht_monitor_thread_slots(32769), HT_THREAD_SLOTS_MAX);
	CHECK_EQ_U64(ht_monitor_thread_slots(4194304), HT_THREAD_SLOTS_MAX);
	CHECK_EQ_U64(ht_monitor_thread_slots(5000), 8192);
	CHECK_EQ_U64(ht_monitor_thread_slots(300), HT_THREAD_SLOTS_MIN);
	CHECK_EQ_U64(ht_monitor_thread_slots(-1), HT_THREAD_SLOTS_MIN);
}
