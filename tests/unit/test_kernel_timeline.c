// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A flight-recorder window lowered into the timeline: syscalls, the breach, tracks, edges. */
#include "check.h"
#include "kernel/breach_format.h"
#include "kernel/comm_cache.h"
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "trace/timeline.h"
#include "window_fixtures.h"

#define TGID 4000
#define A    4001 /* a target thread */
#define B    4002 /* another target thread */
#define HOG  9000

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
	struct ht_kernel_window kw = {.tgid = target,
				      .target_comm = target ? "target" : NULL,
				      .t0 = t0,
				      .t1 = t1,
				      .w = &w,
				      .comms = &comms,
				      .breach = breach,
				      .threshold_ns = 1000};
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

static const struct tl_arg *arg(const struct timeline *tl, const struct tl_event *e,
				const char *name)
{
	return e ? tl_event_find_arg(tl, e, name) : NULL;
}

static const struct tl_track *track_of_kind(const struct timeline *tl, enum tl_track_kind kind,
					    uint32_t tid)
{
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (tl_track(tl, i)->kind == kind && (uint32_t)tl_track(tl, i)->tid == tid)
			return tl_track(tl, i);
	return NULL;
}

static const struct tl_track *thread_track(const struct timeline *tl, uint32_t tid)
{
	return track_of_kind(tl, TL_TRACK_THREAD, tid);
}

static const struct tl_track *kernel_track(const struct timeline *tl, uint32_t tid)
{
	return track_of_kind(tl, TL_TRACK_THREAD_KERNEL, tid);
}

/*
 * Who ran where, and every wait and sleep with its waker, are the native
 * scheduling data's (sched_ftrace.c): no track imitates a CPU, and no slice
 * or instant a thread's state.
 */
TEST(no_slice_imitates_the_scheduler)
{
	struct timeline *tl;
	size_t cpu_tracks = 0, sched = 0;

	nevents = 0;
	add(0, 1000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	add(0, 2000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	add(1, 2200, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, B, 0, 0);
	add(0, 2500, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET | HT_FRF_PREEMPT, HOG, A, 0, 0);
	tl = build(500, 4000, NULL);
	for (size_t i = 0; i < tl_track_count(tl); i++)
		cpu_tracks += tl_track(tl, i)->kind == TL_TRACK_CPU;
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const char *name = tl_str_get(tl, tl_event(tl, i)->name);

		sched += !strcmp(name, HT_EV_WAKES) || !strcmp(name, HT_EV_RUNQUEUE) ||
			 !strcmp(name, HT_EV_OFF_CPU);
	}
	CHECK_EQ_U64(cpu_tracks, 0);
	CHECK_EQ_U64(sched, 0);
	/* Both threads still have their tracks: Perfetto names them from these. */
	CHECK(thread_track(tl, A) && thread_track(tl, B));
	/* Without syscalls or a breach, no kernel track either. */
	CHECK(!kernel_track(tl, A) && !kernel_track(tl, B));
	tl_free(tl);
}

/* Syscalls on the thread's kernel track, cut at the window's edges and marked there. */
TEST(syscalls_on_the_kernel_track)
{
	const struct tl_event *sleep, *futex, *read;
	struct timeline *tl;

	nevents = 0;
	/* A was in futex before the window began, then sleeps, then reads into the window's end. */
	add(0, 1200, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 202, 0);
	add(0, 2000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 230, 7);
	add(0, 2100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1);
	add(0, 3000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 3200, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 3300, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 230, (uint64_t)-4);
	add(0, 3500, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 0, 3);
	tl = build(1000, 4000, NULL);
	futex = fx_kernel_event(tl, A, "futex", 0);
	sleep = fx_kernel_event(tl, A, "clock_nanosleep", 0);
	read = fx_kernel_event(tl, A, "read", 0);
	CHECK(futex && futex->ts_ns == 1000 && futex->dur_ns == 200 &&
	      arg(tl, futex, HT_ARG_BEFORE_WINDOW) && !arg(tl, futex, HT_ARG_SYSCALL_ARG0));
	CHECK(sleep && sleep->ts_ns == 2000 && sleep->dur_ns == 1300);
	CHECK(arg(tl, sleep, HT_ARG_SYSCALL_RET) && arg(tl, sleep, HT_ARG_SYSCALL_RET)->i == -4);
	CHECK(arg(tl, sleep, HT_ARG_SYSCALL_ARG0) && arg(tl, sleep, HT_ARG_SYSCALL_ARG0)->u == 7);
	/* Still in read at the window's end: cut there, no return value. */
	CHECK(read && read->ts_ns == 3500 && read->dur_ns == 500 &&
	      !arg(tl, read, HT_ARG_SYSCALL_RET));
	CHECK(kernel_track(tl, A) && kernel_track(tl, A)->parent_uuid == thread_track(tl, A)->uuid);
	tl_free(tl);
}

/*
 * The breach: a slice on its thread's kernel track, nested in the syscall it
 * slept in, and an instant on the hybtrace track; both with its stack, its
 * waker and what ran instead, as the live line computes them.
 */
TEST(the_breach_on_its_threads_kernel_track)
{
	struct ht_breach br = {.kind = HT_BREACH_OFF_CPU,
			       .tid = A,
			       .tgid = TGID,
			       .start_ns = 1100,
			       .end_ns = 5000,
			       .state = 1 /* S */,
			       .syscall_nr = 230,
			       .kstack_bytes = 16,
			       .wake_source = HT_WAKE_TASK,
			       .waker_tid = B,
			       .waker_comm = "waker",
			       .wake_ns = 4100,
			       .comm = "a"};
	const struct tl_event *slice = NULL, *instant = NULL, *sc;
	struct timeline *tl;
	char why[256];

	br.kstack[0] = 0xffffffff81000010ULL;
	br.kstack[1] = 0xffffffff81000020ULL;
	nevents = 0;
	add(0, 1000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 230, 0);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(0, 4100, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 5100, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 230, 0);
	tl = build(500, 6000, &br);
	CHECK(tl_validate(tl, why, sizeof(why)) == 0);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (strcmp(tl_str_get(tl, e->name), HT_EV_BREACH))
			continue;
		if (e->kind == TL_EVENT_SLICE)
			slice = e;
		else
			instant = e;
	}
	sc = fx_kernel_event(tl, A, "clock_nanosleep", 0);
	CHECK(slice && tl_track(tl, slice->track) == kernel_track(tl, A));
	CHECK(slice && slice->ts_ns == 1100 && slice->dur_ns == 3900);
	CHECK(sc && slice && sc->ts_ns <= slice->ts_ns &&
	      sc->ts_ns + sc->dur_ns >= slice->ts_ns + slice->dur_ns);
	CHECK(instant && tl_track(tl, instant->track)->uuid == TL_HYBTRACE_UUID &&
	      instant->ts_ns == 5000);
	for (int i = 0; i < 2; i++) {
		const struct tl_event *e = i ? instant : slice;

		CHECK(e && e->callstack && tl_callstack_depth(tl, e->callstack) == 2);
		CHECK(fx_arg_is(tl, e, HT_ARG_STATE, "S") &&
		      fx_arg_is(tl, e, HT_ARG_SYSCALL, "clock_nanosleep"));
		CHECK(fx_arg_is(tl, e, HT_ARG_WAKE_SOURCE, "task") &&
		      fx_arg_is(tl, e, HT_ARG_WAKER_COMM, "waker"));
		CHECK(arg(tl, e, HT_ARG_WAKER_TID) && arg(tl, e, HT_ARG_WAKER_TID)->u == B);
		CHECK(arg(tl, e, HT_ARG_THRESHOLD_NS) &&
		      arg(tl, e, HT_ARG_THRESHOLD_NS)->u == 1000);
		/* From the wakeup at 4100 to the switch-in at 5000, the hog held CPU 0. */
		CHECK(arg(tl, e, HT_ARG_RUNNABLE_NS) && arg(tl, e, HT_ARG_RUNNABLE_NS)->u == 900);
		CHECK(arg(tl, e, HT_ARG_RAN_INSTEAD ".0.ns") &&
		      arg(tl, e, HT_ARG_RAN_INSTEAD ".0.ns")->u == 900);
	}
	tl_free(tl);
}

/* A breach older than the window: its slice starts with the window, and says so. */
TEST(a_breach_older_than_the_window_is_cut_there)
{
	struct ht_breach br = {.kind = HT_BREACH_OFF_CPU,
			       .tid = A,
			       .tgid = TGID,
			       .start_ns = 200,
			       .end_ns = 3000,
			       .state = 1};
	const struct tl_event *slice;
	struct timeline *tl;

	nevents = 0;
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	tl = build(1000, 4000, &br);
	slice = fx_kernel_event(tl, A, HT_EV_BREACH, 0);
	CHECK(slice && slice->ts_ns == 1000 && slice->dur_ns == 2000 &&
	      arg(tl, slice, HT_ARG_BEFORE_WINDOW));
	/* Its length is the breach's, not the slice's. */
	CHECK(arg(tl, slice, HT_ARG_DURATION_NS) && arg(tl, slice, HT_ARG_DURATION_NS)->u == 2800);
	tl_free(tl);
}

/*
 * A breach that says all it can: three kinds, its pids in its namespace, a
 * softirq's waker in a task, eight tasks ran instead, a chain asked for, cut
 * by the window. Its two events hold every argument (a postgres backend's
 * breach with eight culprits once failed its dump: "more than 32 arguments").
 */
TEST(a_breach_with_every_argument_fits_its_events)
{
	struct ht_breach br = {.kind = HT_BREACH_SYSCALL,
			       .kinds = HT_KIND_BIT(HT_BREACH_SYSCALL) |
					HT_KIND_BIT(HT_BREACH_OFF_CPU) |
					HT_KIND_BIT(HT_BREACH_RQ_DELAY),
			       .tid = A,
			       .tgid = TGID,
			       .ns_tid = 7,
			       .ns_tgid = 7,
			       .start_ns = 900,
			       .end_ns = 3000,
			       .off_cpu_start_ns = 1100,
			       .off_cpu_end_ns = 2000,
			       .off_cpu_threshold_ns = 500,
			       .state = 1 /* S */,
			       .syscall_nr = 230,
			       .wake_source = HT_WAKE_SOFTIRQ,
			       .softirq_vec = 3,
			       .waker_tid = B,
			       .waker_comm = "waker",
			       .wake_ns = 2000,
			       .comm = "a"};
	struct ht_fr_window w;
	struct ht_kernel_window kw;
	const struct tl_event *slice, *instant = NULL;
	struct timeline *tl = tl_new();
	char why[256];

	nevents = 0;
	add(0, 900, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 230, 0);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 1 /* S */);
	add(0, 2000, HT_FR_WAKEUP, HT_FRF_TARGET | HT_FRF_FROM_IRQ, A, B, 0, HT_WAKE_SOFTIRQ);
	for (uint32_t i = 0; i < 8; i++)
		add(0, 2100 + 100 * i, HT_FR_SWITCH, 0, HOG + i, HOG + i + 1, 0, 0);
	add(0, 3000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG + 8, A, 0, 0);
	add(0, 3100, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 230, 0);
	comms_offline();
	w = fx_fr_window(events, nevents, 950, 4000);
	kw = (struct ht_kernel_window){.tgid = TGID,
				       .target_comm = "target",
				       .t0 = 950,
				       .t1 = 4000,
				       .w = &w,
				       .comms = &comms,
				       .breach = &br,
				       .threshold_ns = 1000,
				       .chain_depth = 3};
	CHECK(!fx_kernel_timeline_lower(tl, &kw));
	CHECK(tl_validate(tl, why, sizeof(why)) == 0);
	if (tl_validate(tl, why, sizeof(why)))
		printf("     %s\n", why);
	slice = fx_kernel_event(tl, A, HT_EV_BREACH, 0);
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (e->kind == TL_EVENT_INSTANT && !strcmp(tl_str_get(tl, e->name), HT_EV_BREACH))
			instant = e;
	}
	for (int i = 0; i < 2; i++) {
		const struct tl_event *e = i ? instant : slice;

		CHECK(e && arg(tl, e, HT_ARG_RAN_INSTEAD ".7.cpu") &&
		      arg(tl, e, HT_ARG_OFF_CPU_THRESHOLD_NS) && arg(tl, e, HT_ARG_CHAIN_DEPTH) &&
		      fx_arg_is(tl, e, HT_ARG_SOFTIRQ, ht_softirq_name(3)));
	}
	CHECK(slice && arg(tl, slice, HT_ARG_BEFORE_WINDOW));
	ht_comm_cache_free(&comms);
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
#define P1   6000
#define P1_T 6001
#define P2   7000
#define P2_T 7002
#define P3   8000 /* a process of the set with no event in the window */

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

/* Thread TID's track is under process PID's track, with PID, and so is its kernel track if any. */
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
	return p && thread && thread->parent_uuid == p->uuid && thread->pid == pid &&
	       (!kernel || (kernel->parent_uuid == thread->uuid && kernel->pid == pid));
}

static void seed(uint32_t tid, uint32_t tgid, const char *comm)
{
	CHECK(!ht_comm_cache_seed_tgid(&comms, tid, tgid));
	CHECK(!ht_comm_cache_seed(&comms, tid, comm));
}

TEST(each_process_its_own_track_group_breach_first)
{
	struct ht_breach br = {.kind = HT_BREACH_RQ_DELAY,
			       .tid = P2_T,
			       .tgid = P2,
			       .start_ns = 2000,
			       .end_ns = 3000};
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
	CHECK(process_track(tl, P1) &&
	      !strcmp(tl_str_get(tl, process_track(tl, P1)->name), "worker1"));
	CHECK(!process_track(tl, P3) && !process_track(tl, 0));
	CHECK_EQ_U64(process_tracks(tl), 2);
	CHECK(thread_in(tl, P2_T, P2));
	CHECK(thread_in(tl, P1_T, P1));
	CHECK(thread_in(tl, P1, P1));
	/* The breach's slice is on its thread's kernel track, under its own process. */
	CHECK(fx_kernel_event(tl, P2_T, HT_EV_BREACH, 0) != NULL && kernel_track(tl, P2_T));
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
