// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's model of a dump: a flight-recorder window written as the
 * dump builder writes it (TrackEvent and native scheduling data), read back
 * (the native part by Perfetto's rules), and its threads' waits rebuilt as
 * an earlier dump drew them: slices, their arguments, the window's edges.
 */
#include <stdlib.h>
#include "check.h"
#include "cli/report_model.h"
#include "kernel/comm_cache.h"
#include "kernel/sched_read.h"
#include "trace/dump_schema.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "trace/timeline.h"
#include "window_fixtures.h"

#define TGID 4000
#define A    4001 /* a target thread */
#define B    4002 /* another target thread */
#define HOG  9000

static struct ht_fr_event events[128];
static size_t nevents;
static struct ht_comm_cache comms;

static void add(unsigned int cpu, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t a, uint32_t b,
		uint16_t aux, uint64_t arg)
{
	events[nevents++] = fx_fr_event(cpu, ts, kind, flags, a, b, aux, arg);
}

/* The events added, as a dump of the window T0..T1 holds them, then modelled. */
static struct timeline *model(uint64_t t0, uint64_t t1, const struct ht_breach *breach)
{
	struct ht_fr_window w = fx_fr_window(events, nevents, t0, t1);
	struct timeline *tl = tl_new(), *read = NULL;
	struct ht_kernel_window kw = {.tgid = TGID,
				      .target_comm = "target",
				      .t0 = t0,
				      .t1 = t1,
				      .w = &w,
				      .comms = &comms,
				      .breach = breach,
				      .threshold_ns = 1000};
	struct ht_native_sched ns;
	struct pftr_stats stats;
	struct pb_buf native;
	char err[256];
	uint8_t *file;
	void *data;
	size_t len;

	ht_comm_cache_free(&comms);
	ht_comm_cache_init(&comms, NULL);
	comms.offline = true;
	/* The hog is named by the native switches into it: no target's track names it. */
	CHECK(!ht_comm_cache_seed(&comms, HOG, "hog"));
	pb_buf_init(&native);
	CHECK(!fx_dump_lower(tl, &kw, &native));
	CHECK(!pftw_write_mem(tl, &data, &len, err, sizeof(err)));
	file = malloc(len + native.len);
	CHECK(file != NULL);
	memcpy(file, data, len);
	memcpy(file + len, native.data, native.len);
	read = pftr_read_mem(file, len + native.len, &stats, err, sizeof(err));
	CHECK(read != NULL);
	CHECK(!ht_native_sched_read(file, len + native.len, 500, &ns) && ns.present);
	ht_report_model_rebuild(read, &ns, t0, t1);
	ht_native_sched_free(&ns);
	free(file);
	free(data);
	pb_buf_free(&native);
	tl_free(tl);
	ht_comm_cache_free(&comms);
	return read;
}

static const struct tl_arg *arg(const struct timeline *tl, const struct tl_event *e,
				const char *name)
{
	return e ? tl_event_find_arg(tl, e, name) : NULL;
}

TEST(sleep_wakeup_runqueue)
{
	struct ht_breach br = {.kind = HT_BREACH_OFF_CPU,
			       .tid = A,
			       .tgid = TGID,
			       .start_ns = 1000,
			       .end_ns = 5000,
			       .state = 1};
	const struct tl_event *off, *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	/* B, running on CPU 1, wakes A; A is queued on CPU 0. */
	add(1, 3000, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 4100, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = model(500, 6000, &br);
	off = fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0);
	rq = fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(off && off->ts_ns == 1000 && off->dur_ns == 3100);
	CHECK(fx_arg_is(tl, off, HT_ARG_STATE, "S"));
	CHECK(rq && rq->ts_ns == 4100 && rq->dur_ns == 900);
	CHECK(fx_arg_is(tl, rq, HT_ARG_CAUSE, "woken") &&
	      fx_arg_is(tl, rq, HT_ARG_WAKE_SOURCE, "task"));
	CHECK(arg(tl, rq, HT_ARG_WAKER_TID) && arg(tl, rq, HT_ARG_WAKER_TID)->u == B);
	CHECK(arg(tl, rq, HT_ARG_CPU) && arg(tl, rq, HT_ARG_CPU)->u == 0);
	/* What ran instead: the hog held CPU 0 from 1000 to 5000. */
	CHECK(fx_arg_is(tl, rq, HT_ARG_RAN_INSTEAD ".0", "hog[9000]"));
	CHECK(arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns") &&
	      arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns")->u == 900);
	CHECK(!fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 1) &&
	      !fx_kernel_event(tl, A, HT_EV_OFF_CPU, 1));
	tl_free(tl);
}

/* Times from two CPUs' clocks: the wakeup may sort a little after the switch-in it allowed. */
TEST(wakeup_sorted_just_after_its_switch_in_still_names_the_waker)
{
	const struct tl_event *off, *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(1, 2000, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(1, 5010, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	tl = model(500, 6000, NULL);
	off = fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0);
	rq = fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(off && rq && off->ts_ns == 1000 && off->ts_ns + off->dur_ns == rq->ts_ns);
	CHECK(rq && rq->ts_ns <= 5000 && rq->ts_ns + rq->dur_ns == 5000);
	CHECK(arg(tl, rq, HT_ARG_WAKER_TID) && arg(tl, rq, HT_ARG_WAKER_TID)->u == B);
	/* Taken once: no second wait and no second off-CPU slice from the same record. */
	CHECK(!fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 1) &&
	      !fx_kernel_event(tl, A, HT_EV_OFF_CPU, 1));
	tl_free(tl);
}

/* A preempted thread needs no wakeup to run again: a later one changes nothing. */
TEST(wakeup_after_a_preempted_threads_switch_in_is_not_moved)
{
	const struct tl_event *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, A, HOG, 0, 0);
	add(1, 2000, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 4000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(1, 4010, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	tl = model(500, 5000, NULL);
	rq = fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->ts_ns == 1000 && rq->dur_ns == 3000 &&
	      !fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 1));
	CHECK(fx_arg_is(tl, rq, HT_ARG_CAUSE, "preempted") && !arg(tl, rq, HT_ARG_WAKER_TID));
	CHECK(!fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0));
	tl_free(tl);
}

TEST(switch_from_an_exited_thread_to_another_target_thread)
{
	const struct tl_event *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, B, HOG, 0, 1);
	add(0, 2000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 2500, HT_FR_WAKEUP, HT_FRF_TARGET, B, 0, 0, HT_WAKE_TIMER);
	add(0, 3000, HT_FR_EXIT, HT_FRF_TARGET, A, 0, 0, 0);
	/* The dying A hands the CPU to B: B's wait must still end here. */
	add(0, 3500, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_NEXT_TARGET, A, B, 0, 0x80);
	tl = model(500, 4000, NULL);
	rq = fx_kernel_event(tl, B, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->ts_ns == 2500 && rq->dur_ns == 1000);
	/* Woken by a timer: from interrupt context, no task. */
	CHECK(fx_arg_is(tl, rq, HT_ARG_WAKE_SOURCE, "irq") && !arg(tl, rq, HT_ARG_WAKER_TID));
	CHECK(!fx_kernel_event(tl, A, HT_EV_OFF_CPU, 1));
	tl_free(tl);
}

TEST(syscall_holds_its_sleep)
{
	const struct tl_event *sc, *off;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 230, 0);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1);
	add(0, 3000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 3200, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 3300, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 230, 0);
	tl = model(500, 4000, NULL);
	sc = fx_kernel_event(tl, A, "clock_nanosleep", 0);
	off = fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0);
	CHECK(sc && sc->ts_ns == 1000 && sc->dur_ns == 2300);
	CHECK(off && off->ts_ns == 1100 && off->dur_ns == 1900);
	CHECK(fx_arg_is(tl, off, HT_ARG_SYSCALL, "clock_nanosleep"));
	tl_free(tl);
}

TEST(states_older_than_the_window_are_cut_and_marked)
{
	const struct tl_event *sc, *off, *rq;
	struct timeline *tl;

	nevents = 0;
	/* A was asleep inside a syscall before the window began. */
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 2500, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 2600, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 202, 0);
	/* and B is still runnable when it ends. */
	add(1, 3000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, B, HOG, 0, 0);
	tl = model(1000, 4000, NULL);
	off = fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0);
	sc = fx_kernel_event(tl, A, "futex", 0);
	CHECK(off && off->ts_ns == 1000 && off->dur_ns == 1000 &&
	      arg(tl, off, HT_ARG_BEFORE_WINDOW));
	CHECK(fx_arg_is(tl, off, HT_ARG_STATE, HT_STATE_UNKNOWN));
	CHECK(fx_arg_is(tl, off, HT_ARG_SYSCALL, "futex"));
	CHECK(sc && sc->ts_ns == 1000 && arg(tl, sc, HT_ARG_BEFORE_WINDOW));
	rq = fx_kernel_event(tl, B, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->ts_ns == 3000 && rq->dur_ns == 1000);
	tl_free(tl);
}

/*
 * A long off-CPU breach in a clipped window: the rings lost A's switch-out,
 * but the breach measured that sleep and knows its state and syscall.
 */
TEST(off_cpu_breach_older_than_the_rings_keeps_its_state)
{
	struct ht_breach br = {.kind = HT_BREACH_OFF_CPU,
			       .tid = A,
			       .tgid = TGID,
			       .start_ns = 1500,
			       .end_ns = 5000,
			       .state = 1 /* S */,
			       .syscall_nr = 202};
	const struct tl_event *off, *other;
	struct timeline *tl;

	nevents = 0;
	/* The rings begin at 3000: A's switch-out at 1500 and B's, earlier, are gone. */
	add(0, 4000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 4500, HT_FR_WAKEUP, HT_FRF_TARGET, B, 0, 0, HT_WAKE_TIMER);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = model(1000, 6000, &br);
	off = fx_kernel_event(tl, A, HT_EV_OFF_CPU, 0);
	CHECK(off && off->ts_ns == 1500 && off->dur_ns == 2500);
	CHECK(fx_arg_is(tl, off, HT_ARG_STATE, "S"));
	CHECK(fx_arg_is(tl, off, HT_ARG_SYSCALL, "futex"));
	CHECK(off && !arg(tl, off, HT_ARG_BEFORE_WINDOW));
	/* B's sleep is older than anything known: said in words, never "?". */
	other = fx_kernel_event(tl, B, HT_EV_OFF_CPU, 0);
	CHECK(other && other->ts_ns == 1000 && arg(tl, other, HT_ARG_BEFORE_WINDOW));
	CHECK(fx_arg_is(tl, other, HT_ARG_STATE, HT_STATE_UNKNOWN));
	tl_free(tl);
}

/* The breach's own wait takes its culprits and its softirq waker from the breach, as live. */
TEST(the_breachs_wait_is_the_live_lines)
{
	struct ht_breach br = {.kind = HT_BREACH_OFF_CPU,
			       .tid = A,
			       .tgid = TGID,
			       .start_ns = 1000,
			       .end_ns = 5000,
			       .state = 1,
			       .wake_source = HT_WAKE_SOFTIRQ,
			       .softirq_vec = 3 /* net_rx */,
			       .waker_tid = B,
			       .waker_comm = "sender",
			       .wake_ns = 4100,
			       .wake_cpu = 0};
	const struct tl_event *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(1, 3000, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 4100, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0,
	    HT_WAKE_SOFTIRQ | 1 << 8 | 3ULL << HT_FR_WAKE_VEC_SHIFT);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = model(500, 6000, &br);
	rq = fx_kernel_event(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->ts_ns + rq->dur_ns == 5000);
	CHECK(fx_arg_is(tl, rq, HT_ARG_WAKE_SOURCE, "softirq") &&
	      fx_arg_is(tl, rq, HT_ARG_SOFTIRQ, "net_rx"));
	CHECK(arg(tl, rq, HT_ARG_WAKER_TID) && arg(tl, rq, HT_ARG_WAKER_TID)->u == B);
	/* ht_culprits_compute() over the flight records, from the wakeup on: the hog's 900 ns. */
	CHECK(arg(tl, rq, HT_ARG_RUNNABLE_NS) && arg(tl, rq, HT_ARG_RUNNABLE_NS)->u == 900);
	CHECK(arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns") &&
	      arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns")->u == 900);
	tl_free(tl);
}

/* A thread of the target that wakes another: a "wakes" instant on its kernel track. */
TEST(a_targets_waker_has_its_wakes_instant)
{
	struct timeline *tl;
	size_t wakes = 0;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(1, 1500, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, B, 0, 0);
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = model(500, 4000, NULL);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (strcmp(tl_str_get(tl, e->name), HT_EV_WAKES))
			continue;
		wakes++;
		CHECK(tl_track(tl, e->track)->tid == B && e->ts_ns == 2000);
		CHECK(arg(tl, e, HT_ARG_WAKEE_TID) && arg(tl, e, HT_ARG_WAKEE_TID)->u == A);
	}
	CHECK_EQ_U64(wakes, 1);
	tl_free(tl);
}

/* Who ran on the CPUs the target's threads ran on, as the report's lines read them. */
TEST(cpu_tracks_where_the_targets_ran)
{
	size_t cpu_tracks = 0, hog = 0;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = model(500, 4000, NULL);
	for (size_t i = 0; i < tl_track_count(tl); i++)
		cpu_tracks += tl_track(tl, i)->kind == TL_TRACK_CPU;
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (tl_track(tl, e->track)->kind == TL_TRACK_CPU && arg(tl, e, HT_ARG_TID) &&
		    arg(tl, e, HT_ARG_TID)->u == HOG)
			hog += e->ts_ns == 1000 && e->dur_ns == 2000;
	}
	CHECK_EQ_U64(cpu_tracks, 1);
	CHECK_EQ_U64(hog, 1);
	tl_free(tl);
}
