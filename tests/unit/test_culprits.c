// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What ran instead, on windows built by hand. */
#include "check.h"
#include "kernel/culprits.h"
#include "window_fixtures.h"

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

/* A record; a switch's prev_state is 1 (S): it slept, unless flagged a preemption. */
static void ev(size_t i, unsigned int cpu, uint64_t ts, uint8_t kind, uint32_t a, uint32_t b,
	       uint16_t aux)
{
	events[i] = fx_fr_event(cpu, ts, kind, 0, a, b, aux, kind == HT_FR_SWITCH ? 1 : 0);
}

/* The switch I leaves its prev task runnable: preempted. */
static void preempts(size_t i)
{
	events[i].rec.flags |= HT_FRF_PREEMPT;
}

static void compute_from(const struct ht_fr_window *w, uint32_t tid, uint64_t start, uint64_t end,
			 bool queued, unsigned int cpu, struct ht_culprits *out)
{
	struct ht_sched_index idx;

	CHECK(!ht_sched_index_build(w, &idx));
	ht_culprits_compute(w, &idx, tid, start, end, queued, cpu, out);
	ht_sched_index_free(&idx);
}

/* A run-queue wait: TID queued on CPU from START. */
static void compute(const struct ht_fr_window *w, uint32_t tid, uint64_t start, uint64_t end,
		    unsigned int cpu, struct ht_culprits *out)
{
	compute_from(w, tid, start, end, true, cpu, out);
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
	/* Nothing says what ran before 4000: the ring wrapped, what came before is gone. */
	ev(0, 0, 4000, HT_FR_SWITCH, 600, 700, 0);
	ev(1, 0, 6000, HT_FR_SWITCH, 700, VICTIM, 0);
	w = window(2);
	w.clipped = true;
	w.covered_from_ns = 4000;
	compute(&w, VICTIM, 1000, 6000, 0, &c);
	CHECK_EQ_U64(c.unknown_ns, 3000);
	CHECK(c.count == 1);
	CHECK(c.top[0].pid == 700);
	CHECK_EQ_U64(c.top[0].ns, 2000);
}

TEST(a_task_running_since_before_attach_is_the_first_switchs_prev)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	/* The ring kept every switch: 600 ran from before the recorder started until 4000. */
	ev(0, 0, 4000, HT_FR_SWITCH, 600, 700, 0);
	ev(1, 0, 6000, HT_FR_SWITCH, 700, VICTIM, 0);
	w = window(2);
	compute(&w, VICTIM, 1000, 6000, 0, &c);
	CHECK_EQ_U64(c.unknown_ns, 0);
	CHECK(c.count == 2);
	CHECK(c.top[0].pid == 600);
	CHECK_EQ_U64(c.top[0].ns, 3000);
	CHECK(c.top[1].pid == 700);
	CHECK_EQ_U64(c.top[1].ns, 2000);
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

/*
 * Debian's 6.1: the victim, preempted on CPU 1 at 1000, is moved to CPU 0's
 * queue at 1500, and the kernel times the wait from its enqueue there
 * (1600), after the migration's record. It waited behind 200 on CPU 0, not
 * behind CPU 1's idle task.
 */
TEST(a_migration_just_before_the_start_is_followed)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 1, 1000, HT_FR_SWITCH, VICTIM, 0, 0);
	preempts(1);
	ev(2, 1, 1500, HT_FR_MIGRATE, VICTIM, 0, 0);
	ev(3, 0, 9000, HT_FR_SWITCH, 200, VICTIM, 0);
	w = window(4);
	compute(&w, VICTIM, 1600, 9000, 1, &c);
	CHECK(c.count == 1);
	CHECK(c.top[0].pid == 200);
	CHECK(c.top[0].cpu == 0);
	CHECK_EQ_U64(c.top[0].ns, 7400);
	CHECK(c.last_cpu == 0);
	/* The same wait from its true start: CPU 1's idle time (no culprit), then 200's. */
	compute(&w, VICTIM, 1000, 9000, 1, &c);
	CHECK(c.count == 1);
	CHECK(c.top[0].pid == 200);
	CHECK_EQ_U64(c.top[0].ns, 7500);
	CHECK_EQ_U64(c.idle_ns, 500);
	CHECK_EQ_U64(c.unknown_ns, 0);
	CHECK_EQ_U64(c.runnable_ns, 8000);
}

/*
 * A syscall's time after its wakeup: woken on CPU 0 at 1000 while 200 ran,
 * on the CPU at 1200, preempted at 3000 by 300, back at 4000, out at 5000.
 * The wakeup stays the wakeup; the preemption is counted and charged.
 */
TEST(a_preemption_after_the_wakeup_is_charged_as_such)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 0, 1000, HT_FR_WAKEUP, VICTIM, 0, 0);
	ev(2, 0, 1200, HT_FR_SWITCH, 200, VICTIM, 0);
	ev(3, 0, 3000, HT_FR_SWITCH, VICTIM, 300, 0);
	preempts(3);
	ev(4, 0, 4000, HT_FR_SWITCH, 300, VICTIM, 0);
	w = window(5);
	compute(&w, VICTIM, 1000, 5000, 0, &c);
	CHECK(c.count == 2);
	CHECK(c.top[0].pid == 300);
	CHECK_EQ_U64(c.top[0].ns, 1000);
	CHECK(c.top[1].pid == 200);
	CHECK_EQ_U64(c.top[1].ns, 200);
	CHECK(c.preemptions == 1);
	CHECK_EQ_U64(c.runnable_ns, 1200);
	/* A syscall that never slept: running from its start, the preemption alone. */
	compute_from(&w, VICTIM, 2000, 5000, false, 0, &c);
	CHECK(c.count == 1 && c.top[0].pid == 300);
	CHECK_EQ_U64(c.runnable_ns, 1000);
	CHECK(c.preemptions == 1);
}

/*
 * A sleep in the middle: preempted at 2000, run at 2500, asleep at 3000,
 * woken at 4000 onto CPU 1 where 500 runs until 4600. The sleep is no wait.
 */
TEST(a_sleep_is_not_a_wait)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 1, 0, HT_FR_SWITCH, 0, 500, 0);
	ev(2, 0, 1000, HT_FR_SWITCH, 200, VICTIM, 0);
	ev(3, 0, 2000, HT_FR_SWITCH, VICTIM, 200, 0);
	preempts(3);
	ev(4, 0, 2500, HT_FR_SWITCH, 200, VICTIM, 0);
	ev(5, 0, 3000, HT_FR_SWITCH, VICTIM, 200, 0);
	ev(6, 1, 4000, HT_FR_WAKEUP, VICTIM, 0, 1);
	ev(7, 1, 4600, HT_FR_SWITCH, 500, VICTIM, 0);
	w = window(8);
	compute_from(&w, VICTIM, 1500, 5000, false, 0, &c);
	CHECK(c.count == 2);
	CHECK(c.top[0].pid == 500 && c.top[0].cpu == 1);
	CHECK_EQ_U64(c.top[0].ns, 600);
	CHECK(c.top[1].pid == 200 && c.top[1].cpu == 0);
	CHECK_EQ_U64(c.top[1].ns, 500);
	CHECK_EQ_U64(c.runnable_ns, 1100);
	CHECK(c.last_cpu == 1);
}

/*
 * The wakeup's time comes from its run queue's clock and may sort a little
 * after the switch-in it allowed: from that wakeup on, the thread runs. A
 * wakeup of a running thread queues nothing either.
 */
TEST(a_wakeup_sorted_after_its_switch_in_queues_nothing)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 0, 1000, HT_FR_SWITCH, 200, VICTIM, 0);
	ev(2, 0, 1005, HT_FR_WAKEUP, VICTIM, 0, 0);
	ev(3, 0, 2000, HT_FR_WAKEUP, VICTIM, 0, 0);
	ev(4, 0, 3000, HT_FR_SWITCH, VICTIM, 200, 0);
	preempts(4);
	ev(5, 0, 3500, HT_FR_SWITCH, 200, VICTIM, 0);
	w = window(6);
	compute(&w, VICTIM, 1005, 4000, 0, &c);
	CHECK(c.count == 1 && c.top[0].pid == 200);
	CHECK_EQ_U64(c.runnable_ns, 500);
	CHECK(c.preemptions == 1);
}

/*
 * A wait its own records do not show: last seen switched in on CPU 1 just
 * before the wait's start (a move by sched_setaffinity sorted its records
 * around it), next seen switched in on CPU 0 at the end. It was queued on
 * the breach's CPU throughout: what ran there ran instead, and the times
 * add up to the wait.
 */
TEST(a_wait_its_records_do_not_show_is_charged_where_it_was_queued)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 0, 0, HT_FR_SWITCH, 0, 200, 0);
	ev(1, 1, 1000000, HT_FR_SWITCH, 0, VICTIM, 0);
	ev(2, 0, 4800000, HT_FR_SWITCH, 200, VICTIM, 0);
	w = window(3);
	compute(&w, VICTIM, 1010000, 4800000, 0, &c);
	CHECK(c.count == 1 && c.top[0].pid == 200);
	CHECK_EQ_U64(c.top[0].ns, 3790000);
	CHECK_EQ_U64(c.runnable_ns, 3790000);
	CHECK_EQ_U64(c.top[0].ns + c.other_ns + c.unknown_ns + c.idle_ns, 3790000);
}

/*
 * The idle task (pid 0) held the CPU from the wakeup until it switched to
 * the thread, then a hog preempted it: only the hog is a culprit; the idle
 * stretch is counted apart.
 */
TEST(the_idle_task_is_no_culprit)
{
	struct ht_culprits c;
	struct ht_fr_window w;

	memset(entry_valid, 0, sizeof(entry_valid));
	ev(0, 1, 0, HT_FR_SWITCH, 200, 0, 0);
	ev(1, 1, 1000, HT_FR_WAKEUP, VICTIM, 0, 1);
	ev(2, 1, 1300, HT_FR_SWITCH, 0, VICTIM, 0);
	ev(3, 1, 2000, HT_FR_SWITCH, VICTIM, 200, 0);
	preempts(3);
	ev(4, 1, 6000, HT_FR_SWITCH, 200, VICTIM, 0);
	w = window(5);
	compute(&w, VICTIM, 1000, 7000, 1, &c);
	CHECK(c.count == 1 && c.top[0].pid == 200);
	CHECK_EQ_U64(c.top[0].ns, 4000);
	CHECK_EQ_U64(c.idle_ns, 300);
	CHECK_EQ_U64(c.runnable_ns, 4300);
	CHECK_EQ_U64(c.unknown_ns, 0);
}
