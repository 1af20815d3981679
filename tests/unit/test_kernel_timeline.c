// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A flight-recorder window lowered into the timeline: slices, args, flows, edges. */
#include "check.h"
#include "kernel/comm_cache.h"
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "trace/timeline.h"
#include "window_fixtures.h"

#define TGID 4000
#define A 4001 /* a target thread */
#define B 4002 /* another target thread */
#define HOG 9000

static struct ht_fr_event events[128];
static size_t nevents;

static void add(unsigned int cpu, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t a, uint32_t b,
		uint16_t aux, uint64_t arg)
{
	events[nevents++] = fx_fr_event(cpu, ts, kind, flags, a, b, aux, arg);
}

static struct ht_comm_cache comms;

/* The window over the events added, the one target named TARGET (0: none, as --cgroup). */
static struct timeline *build_named(uint64_t t0, uint64_t t1, const struct ht_breach *breach,
				    int target)
{
	struct ht_fr_window w = fx_fr_window(events, nevents, t0, t1);
	struct timeline *tl = tl_new();
	struct ht_kernel_window kw = { .tgid = target, .target_comm = target ? "target" : NULL,
				       .t0 = t0, .t1 = t1, .w = &w, .comms = &comms,
				       .breach = breach, .threshold_ns = 1000 };
	char why[256];

	CHECK(!fx_kernel_timeline_lower(tl, &kw));
	CHECK(tl_validate(tl, why, sizeof(why)) == 0);
	if (tl_validate(tl, why, sizeof(why)))
		printf("     %s\n", why);
	ht_comm_cache_free(&comms);
	return tl;
}

/* Names and processes from the tests alone: this machine's pid 4001 is someone else. */
static void comms_offline(void)
{
	ht_comm_cache_free(&comms);
	ht_comm_cache_init(&comms, NULL);
	comms.offline = true;
}

static struct timeline *build(uint64_t t0, uint64_t t1, const struct ht_breach *breach)
{
	comms_offline();
	return build_named(t0, t1, breach, TGID);
}

/* The N-th slice named NAME on the kernel track of TID, or NULL. */
static const struct tl_event *kslice(const struct timeline *tl, uint32_t tid, const char *name,
				     int n)
{
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		const struct tl_track *t = tl_track(tl, e->track);

		if (t->kind == TL_TRACK_THREAD_KERNEL && (uint32_t)t->tid == tid &&
		    !strcmp(tl_str_get(tl, e->name), name) && n-- == 0)
			return e;
	}
	return NULL;
}

static const struct tl_arg *arg(const struct timeline *tl, const struct tl_event *e,
				const char *name)
{
	for (uint32_t i = e ? tl_event_lists(tl, e)->args.first : 0; i; i = tl_arg(tl, i)->next)
		if (!strcmp(tl_str_get(tl, tl_arg(tl, i)->name), name))
			return tl_arg(tl, i);
	return NULL;
}

TEST(sleep_wakeup_runqueue)
{
	struct ht_breach br = { .kind = HT_BREACH_OFF_CPU, .tid = A, .tgid = TGID,
				.start_ns = 1000, .end_ns = 5000, .kstack_bytes = 16 };
	const struct tl_event *off, *rq;
	struct timeline *tl;

	br.kstack[0] = 0xffffffff81000010ULL;
	br.kstack[1] = 0xffffffff81000020ULL;
	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	/* B woke A from CPU 1; A is queued on CPU 0. */
	add(0, 4100, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(500, 6000, &br);
	off = kslice(tl, A, HT_EV_OFF_CPU, 0);
	rq = kslice(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(off && off->ts_ns == 1000 && off->dur_ns == 3100);
	CHECK(off && off->callstack && tl_callstack_depth(tl, off->callstack) == 2);
	CHECK(arg(tl, off, HT_ARG_STATE) && !strcmp(tl_str_get(tl, arg(tl, off, HT_ARG_STATE)->s), "S"));
	CHECK(rq && rq->ts_ns == 4100 && rq->dur_ns == 900);
	CHECK(arg(tl, rq, HT_ARG_WAKER_TID) && arg(tl, rq, HT_ARG_WAKER_TID)->u == B);
	/* B is no thread of the target: its waking is in the native data, no flow here. */
	CHECK(rq && tl_event_lists(tl, rq)->flows_in.count == 0);
	/* What ran instead: the hog held CPU 0 from 1000 to 5000. */
	CHECK(arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns") && arg(tl, rq, HT_ARG_RAN_INSTEAD ".0.ns")->u == 900);
	tl_free(tl);
}

/* Times from two CPUs' clocks: the wakeup may sort a little after the switch-in it allowed. */
TEST(wakeup_sorted_just_after_its_switch_in_still_names_the_waker)
{
	const struct tl_event *off, *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(1, 5010, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	tl = build(500, 6000, NULL);
	off = kslice(tl, A, HT_EV_OFF_CPU, 0);
	rq = kslice(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(off && off->ts_ns == 1000 && off->dur_ns == 4000);
	CHECK(rq && rq->ts_ns == 5000 && rq->dur_ns == 0);
	CHECK(arg(tl, rq, HT_ARG_WAKER_TID) && arg(tl, rq, HT_ARG_WAKER_TID)->u == B);
	/* B is no thread of the target: its waking is in the native data, no flow here. */
	CHECK(rq && tl_event_lists(tl, rq)->flows_in.count == 0);
	/* Taken once: no second wait and no second off-CPU slice from the same record. */
	CHECK(!kslice(tl, A, HT_EV_RUNQUEUE, 1));
	CHECK(!kslice(tl, A, HT_EV_OFF_CPU, 1));
	tl_free(tl);
}

/* A preempted thread needs no wakeup to run again: a later one is not moved. */
TEST(wakeup_after_a_preempted_threads_switch_in_is_not_moved)
{
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, A, HOG, 0, 0);
	add(0, 4000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(1, 4010, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	tl = build(500, 5000, NULL);
	CHECK(kslice(tl, A, HT_EV_RUNQUEUE, 0) && !kslice(tl, A, HT_EV_RUNQUEUE, 1));
	CHECK(!arg(tl, kslice(tl, A, HT_EV_RUNQUEUE, 0), HT_ARG_WAKER_TID));
	tl_free(tl);
}

TEST(switch_from_an_exited_thread_to_another_target_thread)
{
	const struct tl_event *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, B, HOG, 0, 1);
	add(0, 2000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 2500, HT_FR_WAKEUP, HT_FRF_TARGET, B, 0, 0, 0);
	add(0, 3000, HT_FR_EXIT, HT_FRF_TARGET, A, 0, 0, 0);
	/* The dying A hands the CPU to B: B's wait must still end here. */
	add(0, 3500, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_NEXT_TARGET, A, B, 0, 0x80);
	tl = build(500, 4000, NULL);
	rq = kslice(tl, B, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->ts_ns == 2500 && rq->dur_ns == 1000);
	CHECK(!kslice(tl, A, HT_EV_OFF_CPU, 1));
	tl_free(tl);
}

TEST(preemption_is_a_runqueue_wait)
{
	const struct tl_event *rq;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, A, HOG, 0, 0);
	add(0, 4000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(500, 5000, NULL);
	rq = kslice(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(rq && rq->dur_ns == 3000);
	CHECK(arg(tl, rq, HT_ARG_CAUSE) &&
	      !strcmp(tl_str_get(tl, arg(tl, rq, HT_ARG_CAUSE)->s), "preempted"));
	CHECK(!kslice(tl, A, HT_EV_OFF_CPU, 0));
	tl_free(tl);
}

TEST(syscall_holds_its_sleep)
{
	const struct tl_event *sc, *off;
	struct timeline *tl;

	nevents = 0;
	add(0, 1000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 230, 0);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1);
	add(0, 3000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, 0);
	add(0, 3200, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 3300, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 230, 0);
	tl = build(500, 4000, NULL);
	sc = kslice(tl, A, "clock_nanosleep", 0);
	off = kslice(tl, A, HT_EV_OFF_CPU, 0);
	CHECK(sc && sc->ts_ns == 1000 && sc->dur_ns == 2300);
	CHECK(off && off->ts_ns == 1100 && off->ts_ns + off->dur_ns <= sc->ts_ns + sc->dur_ns);
	CHECK(arg(tl, off, HT_ARG_SYSCALL) &&
	      !strcmp(tl_str_get(tl, arg(tl, off, HT_ARG_SYSCALL)->s), "clock_nanosleep"));
	tl_free(tl);
}

TEST(states_older_than_the_window_are_cut_and_marked)
{
	const struct tl_event *sc, *off;
	struct timeline *tl;

	nevents = 0;
	/* A was asleep inside a syscall before the window began. */
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, 0);
	add(0, 2500, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 2600, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 202, 0);
	/* and B is still runnable when it ends. */
	add(1, 3000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, B, HOG, 0, 0);
	tl = build(1000, 4000, NULL);
	off = kslice(tl, A, HT_EV_OFF_CPU, 0);
	sc = kslice(tl, A, "futex", 0);
	CHECK(off && off->ts_ns == 1000 && arg(tl, off, HT_ARG_BEFORE_WINDOW));
	CHECK(off && !strcmp(tl_str_get(tl, arg(tl, off, HT_ARG_STATE)->s), HT_STATE_UNKNOWN));
	CHECK(sc && sc->ts_ns == 1000 && arg(tl, sc, HT_ARG_BEFORE_WINDOW));
	CHECK(kslice(tl, B, HT_EV_RUNQUEUE, 0) && kslice(tl, B, HT_EV_RUNQUEUE, 0)->dur_ns == 1000);
	tl_free(tl);
}

/*
 * A long off-CPU breach in a clipped window: the rings lost A's switch-out,
 * but the breach measured that sleep and knows its state and syscall.
 */
TEST(off_cpu_breach_older_than_the_rings_keeps_its_state)
{
	struct ht_breach br = { .kind = HT_BREACH_OFF_CPU, .tid = A, .tgid = TGID,
				.start_ns = 1500, .end_ns = 5000, .state = 1 /* S */,
				.syscall_nr = 202, .kstack_bytes = 8 };
	const struct tl_event *off, *other;
	struct timeline *tl;

	br.kstack[0] = 0xffffffff81000010ULL;
	nevents = 0;
	/* The rings begin at 3000: A's switch-out at 1500 and B's, earlier, are gone. */
	add(0, 4000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 4500, HT_FR_WAKEUP, HT_FRF_TARGET, B, 0, 0, HT_WAKE_TIMER);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(1000, 6000, &br);
	off = kslice(tl, A, HT_EV_OFF_CPU, 0);
	CHECK(off && off->ts_ns == 1500 && off->dur_ns == 2500);
	CHECK(off && !strcmp(tl_str_get(tl, arg(tl, off, HT_ARG_STATE)->s), "S"));
	CHECK(off && arg(tl, off, HT_ARG_SYSCALL) &&
	      !strcmp(tl_str_get(tl, arg(tl, off, HT_ARG_SYSCALL)->s), "futex"));
	CHECK(off && !arg(tl, off, HT_ARG_BEFORE_WINDOW));
	/* It is the breach's slice: the stack it waited on hangs on it. */
	CHECK(off && off->callstack && tl_callstack_depth(tl, off->callstack) == 1);
	/* B's sleep is older than anything known: said in words, never "?". */
	other = kslice(tl, B, HT_EV_OFF_CPU, 0);
	CHECK(other && other->ts_ns == 1000 && arg(tl, other, HT_ARG_BEFORE_WINDOW));
	CHECK(other && !strcmp(tl_str_get(tl, arg(tl, other, HT_ARG_STATE)->s), HT_STATE_UNKNOWN));
	tl_free(tl);
}

/*
 * Who ran on each CPU, and a waker that is no target, are the native
 * scheduling data's (sched_ftrace.c): no track imitates a CPU, and only a
 * target's waker has a "wakes" instant.
 */
TEST(no_track_imitates_the_cpus)
{
	struct timeline *tl;
	size_t cpu_tracks = 0, wakes = 0;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	add(0, 2000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	/* The hog, no target, wakes A from CPU 0. */
	add(0, 2500, HT_FR_WAKEUP, HT_FRF_TARGET, A, HOG, 0, HT_WAKE_TASK);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(500, 4000, NULL);
	for (size_t i = 0; i < tl_track_count(tl); i++)
		cpu_tracks += tl_track(tl, i)->kind == TL_TRACK_CPU;
	for (size_t i = 0; i < tl_event_count(tl); i++)
		wakes += !strcmp(tl_str_get(tl, tl_event(tl, i)->name), HT_EV_WAKES);
	CHECK_EQ_U64(cpu_tracks, 0);
	CHECK_EQ_U64(wakes, 0);
	/* A's wait still says who woke it. */
	CHECK(kslice(tl, A, HT_EV_RUNQUEUE, 0) != NULL);
	tl_free(tl);
}

/* A thread of the target that wakes another: an instant on its own track, a flow to the wait. */
TEST(a_targets_waker_has_its_instant_and_flow)
{
	const struct tl_event *rq;
	struct timeline *tl;
	size_t wakes = 0;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(1, 1500, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, B, 0, 0);
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(500, 4000, NULL);
	rq = kslice(tl, A, HT_EV_RUNQUEUE, 0);
	CHECK(rq && tl_event_lists(tl, rq)->flows_in.count == 1);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (strcmp(tl_str_get(tl, e->name), HT_EV_WAKES))
			continue;
		wakes++;
		CHECK(tl_track(tl, e->track)->tid == B && tl_event_lists(tl, e)->flows_out.count == 1);
	}
	CHECK_EQ_U64(wakes, 1);
	tl_free(tl);
}

TEST(many_thread_creations_keep_their_parent)
{
	struct timeline *tl;
	size_t created = 0;

	nevents = 0;
	/* More children than the builder's first allocation holds. */
	for (uint32_t i = 0; i < 40; i++)
		add(0, 1000 + i, HT_FR_FORK, HT_FRF_TARGET, A, 5000 + i, 0, TGID);
	tl = build(500, 2000, NULL);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (!strcmp(tl_str_get(tl, e->name), "thread created")) {
			CHECK((uint32_t)tl_track(tl, e->track)->tid == A);
			created++;
		}
	}
	CHECK_EQ_U64(created, 40);
	tl_free(tl);
}

/* Processes of another service beside the target's: two workers, each with a thread. */
#define P1 6000
#define P1_T 6001
#define P2 7000
#define P2_T 7002
#define P3 8000 /* a process of the set with no event in the window */

/* Process PID's track, or NULL. */
static const struct tl_track *process_track(const struct timeline *tl, int pid)
{
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (tl_track(tl, i)->kind == TL_TRACK_PROCESS && tl_track(tl, i)->pid == pid)
			return tl_track(tl, i);
	return NULL;
}

static size_t process_tracks(const struct timeline *tl)
{
	size_t n = 0;

	for (size_t i = 0; i < tl_track_count(tl); i++)
		n += tl_track(tl, i)->kind == TL_TRACK_PROCESS;
	return n;
}

/* Thread TID's track is under process PID's track, with PID, and so is its kernel track. */
static bool thread_in(const struct timeline *tl, uint32_t tid, int pid)
{
	const struct tl_track *p = process_track(tl, pid), *thread = NULL, *kernel = NULL;

	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_THREAD && (uint32_t)t->tid == tid)
			thread = t;
		if (t->kind == TL_TRACK_THREAD_KERNEL && (uint32_t)t->tid == tid)
			kernel = t;
	}
	return p && thread && kernel && thread->parent_uuid == p->uuid && thread->pid == pid &&
	       kernel->parent_uuid == thread->uuid && kernel->pid == pid;
}

static void seed(uint32_t tid, uint32_t tgid, const char *comm)
{
	CHECK(!ht_comm_cache_seed_tgid(&comms, tid, tgid));
	CHECK(!ht_comm_cache_seed(&comms, tid, comm));
}

TEST(each_process_its_own_track_group_breach_first)
{
	struct ht_breach br = { .kind = HT_BREACH_RQ_DELAY, .tid = P2_T, .tgid = P2,
				.start_ns = 2000, .end_ns = 3000 };
	const struct tl_track *first;
	struct timeline *tl;

	comms_offline();
	seed(P1, P1, "worker1");
	seed(P1_T, P1, "w1-thread");
	seed(P2, P2, "worker2");
	seed(P2_T, P2, "w2-thread");
	seed(P3, P3, "idle");
	nevents = 0;
	/* P1's thread runs, is preempted by P2's, which waited 1 us: the breach. */
	add(0, 1000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, P1_T, 0, 0);
	add(1, 1500, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, P1, 0, 0);
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, P2_T, P1_T, 0, HT_WAKE_TASK);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_NEXT_TARGET | HT_FRF_PREEMPT, P1_T,
	    P2_T, 0, 0);
	tl = build_named(500, 4000, &br, 0);
	/* The breach's process leads; no process of the set without an event has a track. */
	first = tl_track(tl, 0);
	CHECK(first->kind == TL_TRACK_PROCESS && first->pid == P2);
	CHECK_STR(tl_str_get(tl, first->name), "worker2");
	CHECK(process_track(tl, P1) && !strcmp(tl_str_get(tl, process_track(tl, P1)->name),
					       "worker1"));
	CHECK(!process_track(tl, P3) && !process_track(tl, 0));
	CHECK_EQ_U64(process_tracks(tl), 2);
	CHECK(thread_in(tl, P2_T, P2));
	CHECK(thread_in(tl, P1_T, P1));
	CHECK(thread_in(tl, P1, P1));
	/* The wakeup crosses processes: waker and wakee keep their own. */
	CHECK(kslice(tl, P2_T, HT_EV_RUNQUEUE, 0) != NULL);
	tl_free(tl);
}

TEST(thread_of_an_unknown_process_after_its_fork_record)
{
	struct timeline *tl;

	comms_offline();
	seed(P1, P1, "worker1");
	nevents = 0;
	/* P1 forks a new process (9100) and a thread (9101); neither is known to the cache. */
	add(0, 1000, HT_FR_FORK, HT_FRF_TARGET, P1, 9100, 0, 9100);
	add(0, 1100, HT_FR_FORK, HT_FRF_TARGET, P1, 9101, 0, P1);
	add(0, 1200, HT_FR_EXIT, HT_FRF_TARGET, 9100, 0, 0, 0);
	tl = build_named(500, 2000, NULL, 0);
	CHECK(thread_in(tl, P1, P1));
	CHECK(thread_in(tl, 9100, 9100));
	CHECK(thread_in(tl, 9101, P1));
	CHECK_EQ_U64(process_tracks(tl), 2);
	tl_free(tl);
}

TEST(one_target_named_keeps_its_track_even_without_events)
{
	struct timeline *tl;

	comms_offline();
	nevents = 0;
	/* A manual dump of a quiet target: its process track, named as the session named it. */
	tl = build_named(500, 2000, NULL, TGID);
	CHECK(tl_track(tl, 0)->kind == TL_TRACK_PROCESS && tl_track(tl, 0)->pid == TGID);
	CHECK_STR(tl_str_get(tl, tl_track(tl, 0)->name), "target");
	CHECK_EQ_U64(process_tracks(tl), 1);
	tl_free(tl);
	/* Its threads, unknown to the cache (offline), are its own. */
	comms_offline();
	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build_named(500, 2000, NULL, TGID);
	CHECK(thread_in(tl, A, TGID));
	CHECK_EQ_U64(process_tracks(tl), 1);
	tl_free(tl);
}
