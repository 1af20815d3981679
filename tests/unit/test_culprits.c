// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What ran instead, on windows built by hand. */
#include "check.h"
#include "culprits.h"

#define VICTIM 100

static struct ht_fr_event events[64];
static struct ht_fr_event entries[2];
static bool entry_valid[2];

static struct ht_fr_window window(size_t n)
{
	struct ht_fr_window w = { 0 };

	w.events = events;
	w.count = n;
	w.ncpus = 2;
	w.entry_switch = entries;
	w.entry_valid = entry_valid;
	return w;
}

static void ev(size_t i, unsigned int cpu, uint64_t ts, uint8_t kind, uint32_t a, uint32_t b,
	       uint16_t aux)
{
	memset(&events[i], 0, sizeof(events[i]));
	events[i].cpu = cpu;
	events[i].rec.ts_ns = ts;
	events[i].rec.kind = kind;
	events[i].rec.tid_a = a;
	events[i].rec.tid_b = b;
	events[i].rec.aux = aux;
}

static void compute(const struct ht_fr_window *w, uint32_t tid, uint64_t start, uint64_t end,
		    unsigned int cpu, struct ht_culprits *out)
{
	struct ht_sched_index idx;

	CHECK(!ht_sched_index_build(w, &idx));
	ht_culprits_compute(w, &idx, tid, start, end, cpu, out);
	ht_sched_index_free(&idx);
}

TEST(one_hog_holds_the_cpu)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	/* The hog (200) runs from 0; the victim is woken at 1000 and runs at 5000. */
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 0, 1000, HT_FR_WAKEUP, VICTIM, 0, 0);
	ev(2, 0, 5000, HT_FR_SWITCH, 200, VICTIM, 0);
	w = window(3);
	compute(&w, VICTIM, 1000, 5000, 0, &c);
	CHECK(c.count == 1);
	CHECK(c.top[0].pid == 200);
	CHECK_EQ_U64(c.top[0].ns, 4000);
	CHECK_EQ_U64(c.unknown_ns, 0);
}

TEST(several_tasks_longest_first)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	entries[0].rec.tid_b = 300; /* 300 was running when the window opened */
	entries[0].rec.kind = HT_FR_SWITCH;
	entry_valid[0] = true;
	ev(0, 0, 2000, HT_FR_SWITCH, 300, 400, 0);
	ev(1, 1, 2500, HT_FR_SWITCH, 1, 2, 0); /* another CPU: ignored */
	ev(2, 0, 2600, HT_FR_SWITCH, 400, 300, 0);
	ev(3, 0, 9000, HT_FR_SWITCH, 300, VICTIM, 0);
	w = window(4);
	compute(&w, VICTIM, 1000, 9000, 0, &c);
	CHECK(c.count == 2);
	CHECK(c.top[0].pid == 300);
	CHECK_EQ_U64(c.top[0].ns, 1000 + 6400);
	CHECK(c.top[1].pid == 400);
	CHECK_EQ_U64(c.top[1].ns, 600);
}

TEST(follows_a_migration)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 1, 0, HT_FR_SWITCH, 0, 500, 0);
	ev(2, 0, 1000, HT_FR_WAKEUP, VICTIM, 0, 0);
	/* Moved to CPU 1 at 3000, where 500 keeps running until 7000. */
	ev(3, 1, 3000, HT_FR_MIGRATE, VICTIM, 0, 1);
	ev(4, 1, 7000, HT_FR_SWITCH, 500, VICTIM, 0);
	w = window(5);
	compute(&w, VICTIM, 1000, 7000, 0, &c);
	CHECK(c.count == 2);
	CHECK(c.top[0].pid == 500);
	CHECK_EQ_U64(c.top[0].ns, 4000);
	CHECK(c.top[0].cpu == 1);
	CHECK(c.top[1].pid == 200);
	CHECK_EQ_U64(c.top[1].ns, 2000);
	CHECK(c.top[1].cpu == 0);
}

TEST(unknown_time_is_counted_not_invented)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	/* Nothing says what ran before 4000. */
	ev(0, 0, 4000, HT_FR_SWITCH, 600, 700, 0);
	ev(1, 0, 6000, HT_FR_SWITCH, 700, VICTIM, 0);
	w = window(2);
	compute(&w, VICTIM, 1000, 6000, 0, &c);
	CHECK_EQ_U64(c.unknown_ns, 3000);
	CHECK(c.count == 1);
	CHECK(c.top[0].pid == 700);
	CHECK_EQ_U64(c.top[0].ns, 2000);
}

TEST(more_tasks_than_the_top_fold_into_others)
{
	struct ht_culprits c;
	struct ht_fr_window w;
	size_t n = 0;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(n++, 0, 0, HT_FR_SWITCH, 0, 1000, 0);
	for (uint32_t i = 0; i < HT_MAX_CULPRITS + 3; i++)
		ev(n++, 0, 100 + i * 100, HT_FR_SWITCH, 1000 + i, 1001 + i, 0);
	ev(n++, 0, 100 + (HT_MAX_CULPRITS + 3) * 100, HT_FR_SWITCH, 0, VICTIM, 0);
	w = window(n);
	compute(&w, VICTIM, 0, 100 + (HT_MAX_CULPRITS + 3) * 100, 0, &c);
	CHECK(c.count == HT_MAX_CULPRITS);
	CHECK(c.other_ns > 0);
}
