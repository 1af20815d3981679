// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Wait chains on windows built by hand: who the breached thread was really waiting on. */
#include "check.h"
#include "kernel/chain_format.h"
#include "kernel/wait_chain.h"
#include "window_fixtures.h"

/* A reads a pipe from B, B one from C; C sleeps on a timer. */
#define A   100
#define B   200
#define C   300
#define HOG 400

#define SLEEP	   1 /* TASK_INTERRUPTIBLE */
#define DEAD	   0x80
#define NR_READ	   0
#define NR_NANOSLP 230

static struct ht_fr_event events[64];
static size_t nevents;

static int by_time(const void *x, const void *y)
{
	const struct ht_fr_event *a = x, *b = y;

	return (a->rec.ts_ns > b->rec.ts_ns) - (a->rec.ts_ns < b->rec.ts_ns);
}

static void add(unsigned int cpu, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t a, uint32_t b,
		uint16_t aux, uint64_t arg)
{
	events[nevents++] = fx_fr_event(cpu, ts, kind, flags, a, b, aux, arg);
}

/* PREV leaves CPU asleep (STATE) in syscall NR, or runnable when NR < -1. */
static void sleeps(unsigned int cpu, uint64_t ts, uint32_t prev, uint32_t next, uint32_t state,
		   int nr)
{
	add(cpu, ts, HT_FR_SWITCH, 0, prev, next, 120,
	    state | (uint64_t)(nr + 1) << HT_FR_SWITCH_SYSCALL_SHIFT);
}

static void runs(unsigned int cpu, uint64_t ts, uint32_t prev, uint32_t next)
{
	add(cpu, ts, HT_FR_SWITCH, HT_FRF_PREEMPT, prev, next, 120, 0);
}

static void wakes(unsigned int cpu, uint64_t ts, uint32_t wakee, uint32_t waker, uint32_t source)
{
	uint8_t flags = source == HT_WAKE_TIMER ? HT_FRF_FROM_TIMER
			: source == HT_WAKE_IRQ ? HT_FRF_FROM_IRQ
						: 0;

	add(cpu, ts, HT_FR_WAKEUP, flags, wakee, waker, (uint16_t)cpu, source);
}

/*
 * B asleep in read since 500; C runs on CPU 1 from 500, sleeps at 2000 for
 * 20 us (timer), wakes B at 22500 and sleeps again; B wakes A at 23000.
 * A slept from 1000 on CPU 0 and runs again at 23100. WOKEN_BY_A: B is
 * woken by A instead of C (a cycle).
 */
static struct ht_fr_window pipe_chain(uint32_t b_waker, uint32_t b_cpu_holder)
{
	nevents = 0;
	sleeps(1, 500, B, C, SLEEP, NR_READ);
	sleeps(0, 1000, A, 0, SLEEP, NR_READ);
	sleeps(1, 2000, C, 0, SLEEP, NR_NANOSLP);
	wakes(1, 22000, C, 0, HT_WAKE_TIMER);
	runs(1, 22100, 0, C);
	wakes(1, 22500, B, b_waker, HT_WAKE_TASK);
	if (b_cpu_holder != C) {
		runs(1, 22520, C, b_cpu_holder);
		sleeps(1, 22600, b_cpu_holder, B, SLEEP, -1);
	} else {
		sleeps(1, 22600, C, B, SLEEP, NR_READ);
	}
	wakes(1, 23000, A, B, HT_WAKE_TASK);
	runs(0, 23100, 0, A);
	return fx_fr_window(events, nevents, 0, 30000);
}

static struct ht_breach off_cpu_breach(void)
{
	struct ht_breach b = {
		.kind = HT_BREACH_OFF_CPU,
		.kinds = HT_KIND_BIT(HT_BREACH_OFF_CPU),
		.tid = A,
		.tgid = A,
		.start_ns = 1000,
		.end_ns = 23100,
		.wake_ns = 23000,
		.wake_source = HT_WAKE_TASK,
		.waker_tid = B,
		.state = SLEEP,
		.syscall_nr = NR_READ,
	};
	return b;
}

static bool compute(const struct ht_fr_window *w, const struct ht_breach *b, unsigned int depth,
		    struct ht_wait_chain *c)
{
	struct ht_sched_index idx;
	bool ok;

	CHECK(!ht_sched_index_build(w, &idx));
	ok = ht_wait_chain_compute(w, &idx, b, depth, c);
	ht_sched_index_free(&idx);
	return ok;
}

static uint64_t leaves_ns(const struct ht_wait_chain *c)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < c->count; i++)
		if (ht_chain_stretch_is_leaf(c, i))
			sum += c->stretches[i].end_ns - c->stretches[i].start_ns;
	return sum;
}

static void check_stretch(const struct ht_chain_stretch *s, uint32_t tid, unsigned int depth,
			  enum ht_stretch_kind kind, uint64_t start, uint64_t end)
{
	CHECK_EQ_U64(s->tid, tid);
	CHECK_EQ_U64(s->depth, depth);
	CHECK_EQ_U64(s->kind, kind);
	CHECK_EQ_U64(s->start_ns, start);
	CHECK_EQ_U64(s->end_ns, end);
}

TEST(the_switch_record_carries_the_syscall)
{
	struct ht_flight_record r = {.kind = HT_FR_SWITCH};

	r.arg = SLEEP | (uint64_t)(NR_NANOSLP + 1) << HT_FR_SWITCH_SYSCALL_SHIFT;
	CHECK_EQ_U64(ht_fr_switch_prev_state(&r), SLEEP);
	CHECK(ht_fr_switch_syscall(&r) == NR_NANOSLP);
	CHECK(!ht_fr_switch_left_runnable(&r));
	r.arg = 0;
	CHECK(ht_fr_switch_syscall(&r) == -1);
	CHECK(ht_fr_switch_left_runnable(&r));
	/* A runnable task in a syscall is still runnable. */
	r.arg = (uint64_t)(NR_READ + 1) << HT_FR_SWITCH_SYSCALL_SHIFT;
	CHECK(ht_fr_switch_syscall(&r) == NR_READ);
	CHECK(ht_fr_switch_left_runnable(&r));
}

TEST(a_pipe_chain_divides_the_wait_among_its_wakers)
{
	struct ht_fr_window w = pipe_chain(C, C);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	CHECK(compute(&w, &b, 3, &c));
	CHECK_EQ_U64(c.count, 9);
	if (c.count != 9)
		goto out;
	check_stretch(&c.stretches[0], A, 0, HT_STRETCH_BLOCKED, 1000, 23000);
	CHECK(c.stretches[0].stop == HT_CHAIN_FOLLOWED);
	CHECK_EQ_U64(c.stretches[0].waker, B);
	check_stretch(&c.stretches[1], B, 1, HT_STRETCH_BLOCKED, 1000, 22500);
	CHECK_EQ_U64(c.stretches[1].waker, C);
	CHECK(c.stretches[1].syscall == NR_READ);
	/* C ran before it slept: on the critical path too (its timer's wakeup stops no walk). */
	check_stretch(&c.stretches[2], C, 2, HT_STRETCH_RUNNING, 1000, 2000);
	check_stretch(&c.stretches[3], C, 2, HT_STRETCH_BLOCKED, 2000, 22000);
	CHECK(c.stretches[3].stop == HT_CHAIN_STOP_TIMER);
	CHECK(c.stretches[3].syscall == NR_NANOSLP);
	CHECK_EQ_U64(c.stretches[3].wake_source, HT_WAKE_TIMER);
	check_stretch(&c.stretches[4], C, 2, HT_STRETCH_RUNNABLE, 22000, 22100);
	check_stretch(&c.stretches[5], C, 2, HT_STRETCH_RUNNING, 22100, 22500);
	check_stretch(&c.stretches[6], B, 1, HT_STRETCH_RUNNABLE, 22500, 22600);
	CHECK_EQ_U64(c.stretches[6].behind, C);
	check_stretch(&c.stretches[7], B, 1, HT_STRETCH_RUNNING, 22600, 23000);
	check_stretch(&c.stretches[8], A, 0, HT_STRETCH_RUNNABLE, 23000, 23100);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	CHECK_EQ_U64(c.depth, 2);
	CHECK(!c.cut_by_window);
out:
	ht_wait_chain_free(&c);
}

TEST(a_runnable_stretch_names_who_held_its_cpu)
{
	struct ht_fr_window w = pipe_chain(C, HOG);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;
	bool found = false;

	CHECK(compute(&w, &b, 3, &c));
	for (size_t i = 0; i < c.count; i++) {
		if (c.stretches[i].tid == B && c.stretches[i].kind == HT_STRETCH_RUNNABLE) {
			found = true;
			CHECK_EQ_U64(c.stretches[i].behind, HOG);
			CHECK_EQ_U64(c.stretches[i].behind_ns, 80);
		}
	}
	CHECK(found);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(the_walk_stops_at_the_depth_asked)
{
	struct ht_fr_window w = pipe_chain(C, C);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	CHECK(compute(&w, &b, 1, &c));
	CHECK_EQ_U64(c.depth, 1);
	for (size_t i = 0; i < c.count; i++)
		CHECK(c.stretches[i].tid != C);
	CHECK(c.count >= 2 && c.stretches[1].stop == HT_CHAIN_STOP_DEPTH);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

/*
 * B's switch out into its read the kernel did not trace: the CPU's next
 * traced switch recorded it (at C's arrival), after C had woken it already,
 * so as left runnable. C's wakeup says B slept: blocked, its state unknown.
 */
TEST(a_sleeper_recorded_runnable_by_an_untraced_switch_is_blocked_once_woken)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	pipe_chain(C, C);
	CHECK(events[0].rec.tid_a == B && events[0].rec.ts_ns == 500);
	events[0] = fx_fr_event(1, 500, HT_FR_SWITCH, HT_FRF_UNTRACED, B, C, 120, 0);
	w = fx_fr_window(events, nevents, 0, 30000);
	CHECK(compute(&w, &b, 1, &c));
	CHECK(c.count >= 2);
	if (c.count >= 2) {
		check_stretch(&c.stretches[1], B, 1, HT_STRETCH_BLOCKED, 1000, 22500);
		CHECK(c.stretches[1].stop == HT_CHAIN_STOP_DEPTH);
		CHECK_EQ_U64(c.stretches[1].waker, C);
		CHECK_EQ_U64(c.stretches[1].state, HT_CHAIN_STATE_UNKNOWN);
	}
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);

	/* Left runnable for real (preempted, traced): the wakeup changes nothing. */
	events[0].rec.flags = HT_FRF_PREEMPT;
	w = fx_fr_window(events, nevents, 0, 30000);
	CHECK(compute(&w, &b, 1, &c));
	CHECK(c.count >= 2 && c.stretches[1].tid == B && c.stretches[1].kind != HT_STRETCH_BLOCKED);
	ht_wait_chain_free(&c);
}

/*
 * The wakeup of WAKEE raised at RAISED recorded at LATE instead (its
 * enqueue's clock), the records in time order again: the window.
 */
static struct ht_fr_window record_wakeup_late(uint32_t wakee, uint64_t raised, uint64_t late)
{
	for (size_t i = 0; i < nevents; i++)
		if (events[i].rec.kind == HT_FR_WAKEUP && events[i].rec.tid_a == wakee) {
			events[i].rec.ts_ns = late;
			events[i].rec.arg |= (late - raised) / 1000 << HT_FR_WAKE_DELAY_SHIFT;
		}
	qsort(events, nevents, sizeof(events[0]), by_time);
	return fx_fr_window(events, nevents, 0, 30000);
}

/*
 * As above, and C's wakeup of B, raised at 22500, recorded at LATE, after
 * B's switch-in at 22600 by more than the skew (its enqueue's clock): B
 * still slept until C woke it (seen under load: B runnable 20 ms behind a
 * spinner in the chain, the wakeup 3 us before its switch-in).
 */
static void check_untraced_sleep_woken_late(uint64_t late)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	pipe_chain(C, C);
	events[0] = fx_fr_event(1, 500, HT_FR_SWITCH, HT_FRF_UNTRACED, B, C, 120, 0);
	w = record_wakeup_late(B, 22500, late);
	CHECK(compute(&w, &b, 1, &c));
	CHECK(c.count >= 2);
	if (c.count >= 2) {
		CHECK(c.stretches[1].tid == B && c.stretches[1].kind == HT_STRETCH_BLOCKED);
		CHECK_EQ_U64(c.stretches[1].start_ns, 1000);
		CHECK(c.stretches[1].stop == HT_CHAIN_STOP_DEPTH);
		CHECK_EQ_U64(c.stretches[1].waker, C);
		CHECK_EQ_U64(c.stretches[1].state, HT_CHAIN_STATE_UNKNOWN);
	}
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(a_sleeper_recorded_runnable_and_woken_late_is_blocked_once_woken)
{
	check_untraced_sleep_woken_late(22600 + 25000);
	check_untraced_sleep_woken_late(22600 + 900000);
}

TEST(a_cycle_ends_the_walk)
{
	struct ht_fr_window w = pipe_chain(A, C);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	CHECK(compute(&w, &b, 3, &c));
	CHECK(c.count >= 2 && c.stretches[1].tid == B &&
	      c.stretches[1].stop == HT_CHAIN_STOP_CYCLE);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(a_window_shorter_than_the_chain_cuts_it)
{
	struct ht_fr_window w = pipe_chain(C, C);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	/* The window opens at 10000: C's sleep began before it, the breach too. */
	w.events += 3;
	w.count -= 3;
	w.t0 = 10000;
	CHECK(compute(&w, &b, 3, &c));
	CHECK(c.cut_by_window);
	CHECK_EQ_U64(c.start_ns, 10000);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 10000);
	/* Each asleep since before it, woken as the records say: followed all the same. */
	CHECK(c.count >= 3);
	if (c.count < 3)
		goto out;
	check_stretch(&c.stretches[0], A, 0, HT_STRETCH_BLOCKED, 10000, 23000);
	check_stretch(&c.stretches[1], B, 1, HT_STRETCH_BLOCKED, 10000, 22500);
	check_stretch(&c.stretches[2], C, 2, HT_STRETCH_BLOCKED, 10000, 22000);
	CHECK(c.stretches[2].before_window);
	CHECK(c.stretches[2].state == HT_CHAIN_STATE_UNKNOWN);
	CHECK(c.stretches[2].stop == HT_CHAIN_STOP_TIMER);
out:
	ht_wait_chain_free(&c);
}

TEST(a_waker_that_exits_keeps_its_stretches)
{
	struct ht_fr_window w = pipe_chain(C, C);
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;
	bool seen = false;

	/* B exits right after waking A. */
	sleeps(1, 23050, B, 0, DEAD, 231);
	w = fx_fr_window(events, nevents, 0, 30000);
	CHECK(compute(&w, &b, 3, &c));
	for (size_t i = 0; i < c.count; i++) {
		if (c.stretches[i].tid == B) {
			CHECK(c.stretches[i].exited);
			seen = true;
		}
	}
	CHECK(seen);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(a_wakeup_recorded_after_its_waker_slept_is_its_wakees_to_wait_out)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	/* B woke A, then slept at 22900; A's CPU, idle, recorded the wakeup at 23000. */
	pipe_chain(C, C);
	events[nevents - 2].rec.ts_ns = 23000;
	sleeps(1, 22900, B, 0, SLEEP, NR_READ);
	w = fx_fr_window(events, nevents, 0, 30000);
	/* In time order: B's switch-out before A's wakeup. */
	{
		struct ht_fr_event t = events[nevents - 1];

		events[nevents - 1] = events[nevents - 2];
		events[nevents - 2] = events[nevents - 3];
		events[nevents - 3] = t;
	}
	CHECK(compute(&w, &b, 3, &c));
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	CHECK(c.count == 9);
	if (c.count == 9) {
		check_stretch(&c.stretches[0], A, 0, HT_STRETCH_BLOCKED, 1000, 22900);
		check_stretch(&c.stretches[7], B, 1, HT_STRETCH_RUNNING, 22600, 22900);
		check_stretch(&c.stretches[8], A, 0, HT_STRETCH_RUNNABLE, 22900, 23100);
	}
	ht_wait_chain_free(&c);
}

/*
 * The pipe chain with C's timer wakeup missing (its read before that sleep
 * was woken at 1990); with UNTRACED, the switch that took C in after it is
 * one the monitor made up (the kernel did not trace it). Checks how C's
 * sleep stops, with no waker borrowed, and that the chain still adds up.
 */
static void check_sleep_without_its_wakeup(bool untraced, enum ht_chain_stop want,
					   const char *want_name)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;
	bool found = false;
	size_t n = 0;

	pipe_chain(C, C);
	for (size_t i = 0; i < nevents; i++)
		if (!(events[i].rec.kind == HT_FR_WAKEUP && events[i].rec.tid_a == C))
			events[n++] = events[i];
	nevents = n;
	events[0] = fx_fr_event(1, 500, HT_FR_SWITCH, 0, B, C, 120, SLEEP);
	add(1, 1985, HT_FR_SWITCH, 0, C, 0, 120, SLEEP);
	add(1, 1990, HT_FR_WAKEUP, 0, C, A, 1, HT_WAKE_TASK);
	add(1, 1995, HT_FR_SWITCH, 0, 0, C, 120, 0);
	qsort(events, nevents, sizeof(events[0]), by_time);
	for (size_t i = 0; untraced && i < nevents; i++)
		if (events[i].rec.kind == HT_FR_SWITCH && events[i].rec.tid_b == C &&
		    events[i].rec.ts_ns == 22100)
			events[i].rec.flags |= HT_FRF_UNTRACED;
	w = fx_fr_window(events, nevents, 0, 30000);
	CHECK(compute(&w, &b, 3, &c));
	for (size_t i = 0; i < c.count; i++) {
		if (c.stretches[i].tid == C && c.stretches[i].start_ns == 2000) {
			check_stretch(&c.stretches[i], C, 2, HT_STRETCH_BLOCKED, 2000, 22100);
			CHECK(c.stretches[i].stop == want);
			CHECK(!strcmp(ht_chain_stop_name(c.stretches[i].stop), want_name));
			CHECK_EQ_U64(c.stretches[i].waker, 0);
			found = true;
		}
	}
	CHECK(found);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(a_wakeup_the_tracepoints_missed_is_said_and_not_borrowed)
{
	check_sleep_without_its_wakeup(false, HT_CHAIN_STOP_WAKEUP_LOST, "wakeup not recorded");
}

/* The kernel switched C in without the tracepoint: its wakeup went untraced with it. */
TEST(a_switch_in_the_kernel_did_not_trace_is_said_apart)
{
	check_sleep_without_its_wakeup(true, HT_CHAIN_STOP_UNTRACED, "switched in untraced");
}

/*
 * C's timer wakeup raised at 22000, before its switch-in at 22100, but its
 * enqueue recorded at LATE: later by more than the skew, past C's next
 * sleep at 22600 too. Its sleep is still the timer's, and that next sleep
 * does not take it.
 */
static void check_wakeup_recorded_late(uint64_t late)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;
	bool found = false;

	pipe_chain(C, C);
	w = record_wakeup_late(C, 22000, late);
	CHECK(compute(&w, &b, 3, &c));
	for (size_t i = 0; i < c.count; i++) {
		if (c.stretches[i].tid == C && c.stretches[i].start_ns == 2000) {
			check_stretch(&c.stretches[i], C, 2, HT_STRETCH_BLOCKED, 2000, 22100);
			CHECK_STR(ht_chain_stop_name(c.stretches[i].stop), "timer");
			found = true;
		}
	}
	CHECK(found);
	CHECK_EQ_U64(leaves_ns(&c), 23100 - 1000);
	ht_wait_chain_free(&c);
}

TEST(a_wakeup_recorded_late_is_the_sleep_it_was_raised_in)
{
	check_wakeup_recorded_late(22100 + 25000);
	check_wakeup_recorded_late(22100 + 900000);
}

/* A's timer wakeup at 50 us, recorded at 200 us, after A ran and slept again: B woke that sleep. */
TEST(a_late_wakeup_record_is_not_the_next_sleeps)
{
	struct ht_fr_window w;
	struct ht_breach b = off_cpu_breach();
	struct ht_wait_chain c;

	nevents = 0;
	sleeps(0, 1000, A, 0, SLEEP, NR_NANOSLP);
	runs(0, 51000, 0, A);
	sleeps(0, 100000, A, 0, SLEEP, NR_READ);
	add(0, 200000, HT_FR_WAKEUP, HT_FRF_FROM_TIMER, A, 0, 0,
	    HT_WAKE_TIMER | (uint64_t)150 << HT_FR_WAKE_DELAY_SHIFT);
	wakes(1, 300000, A, B, HT_WAKE_TASK);
	runs(0, 301000, 0, A);
	w = fx_fr_window(events, nevents, 0, 400000);
	b.start_ns = 100000;
	b.end_ns = 301000;
	b.wake_ns = 300000;
	CHECK(compute(&w, &b, 3, &c));
	CHECK(c.count >= 1);
	if (c.count >= 1) {
		check_stretch(&c.stretches[0], A, 0, HT_STRETCH_BLOCKED, 100000, 300000);
		CHECK_EQ_U64(c.stretches[0].waker, B);
	}
	CHECK_EQ_U64(leaves_ns(&c), 301000 - 100000);
	ht_wait_chain_free(&c);
}

TEST(a_run_queue_breach_is_its_own_runnable_stretch)
{
	struct ht_fr_window w = pipe_chain(C, HOG);
	struct ht_breach b = {
		.kind = HT_BREACH_RQ_DELAY,
		.tid = B,
		.start_ns = 22500,
		.end_ns = 22600,
	};
	struct ht_wait_chain c;

	CHECK(compute(&w, &b, 3, &c));
	CHECK_EQ_U64(c.count, 1);
	if (c.count)
		check_stretch(&c.stretches[0], B, 0, HT_STRETCH_RUNNABLE, 22500, 22600);
	ht_wait_chain_free(&c);
}

static const char *name_of(void *ctx, uint32_t tid, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "%s", tid == A ? "chain_a" : tid == B ? "chain_b" : "chain_c");
	return buf;
}

TEST(a_chain_reads_as_the_report_prints_it)
{
	struct ht_fr_window w = pipe_chain(C, C);
	struct ht_breach b = off_cpu_breach();
	char names[3][HT_CHAIN_NAME_LEN], state[8], text[512];
	struct ht_chain_summary sum = {.start_ns = 1000, .end_ns = 23100, .max_depth = 3};
	struct ht_chain_line l;
	struct ht_wait_chain c;

	CHECK(compute(&w, &b, 3, &c));
	if (c.count != 9)
		goto out;
	ht_chain_line_of(&c, 1, name_of, NULL, names, state, sizeof(state), &l);
	ht_chain_text(&sum, &l, text, sizeof(text));
	CHECK_STR(text,
		  "   21.5us  97.3%    chain_b[200] blocked S in read, woken by chain_c[300]");
	CHECK(!l.leaf);
	ht_chain_line_of(&c, 3, name_of, NULL, names, state, sizeof(state), &l);
	ht_chain_text(&sum, &l, text, sizeof(text));
	CHECK_STR(
		text,
		"   20.0us  90.5%      chain_c[300] blocked S in clock_nanosleep, woken by timer");
	CHECK(l.leaf);
	ht_chain_line_of(&c, 6, name_of, NULL, names, state, sizeof(state), &l);
	ht_chain_text(&sum, &l, text, sizeof(text));
	CHECK_STR(text, "    100ns   0.5%    chain_b[200] runnable, behind chain_c[300]");
out:
	ht_wait_chain_free(&c);
}
