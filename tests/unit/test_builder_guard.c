// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The dump builder's guard (dump/builder_guard.h), with a builder of the
 * test's own: a thread at nice 19 on a CPU two spinning threads keep busy,
 * holding a lock the "event loop" (this thread) then waits on.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "base/clock.h"
#include "dump/builder_guard.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The last CPU this thread may use, or -1 where it has fewer than two. */
static int last_of_two_cpus(void)
{
	cpu_set_t all;
	int last = -1;

	if (sched_getaffinity(0, sizeof(all), &all) || CPU_COUNT(&all) < 2)
		return -1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &all))
			last = cpu;
	return last;
}

static void pin_to(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

/* The test's builder: on its CPU at nice 19, it holds LOCK while it computes WORK_NS. */
struct fake_builder {
	int cpu, tid;
	struct ht_guard_idle idle;
	pthread_mutex_t lock;
	int go, holding, release, done;
	uint64_t work_ns;
	/* It says it waits for work while it holds LOCK: preempted on its way into a wait. */
	bool waits_while_holding;
	/* The raise the guard calls, nested as the dumper's, and its turns at SCHED_FIFO. */
	int holds, raised_to;
	int rushing, rushes;
};

static bool fake_raise(void *ctx)
{
	struct fake_builder *b = ctx;

	if (b->holds++ == 0 && b->tid)
		setpriority(PRIO_PROCESS, (id_t)b->tid, b->raised_to);
	return true;
}

static void fake_lower(void *ctx)
{
	struct fake_builder *b = ctx;

	if (--b->holds == 0 && b->tid)
		setpriority(PRIO_PROCESS, (id_t)b->tid, 19);
}

static bool fake_rush(void *ctx)
{
	struct sched_param fifo = { .sched_priority = 1 };
	struct fake_builder *b = ctx;

	if (!b->tid || sched_setscheduler(b->tid, SCHED_FIFO, &fifo))
		return false;
	b->rushing = 1;
	b->rushes++;
	return true;
}

static void fake_end_rush(void *ctx)
{
	struct sched_param normal = { 0 };
	struct fake_builder *b = ctx;

	if (b->rushing)
		sched_setscheduler(b->tid, SCHED_OTHER, &normal);
	b->rushing = 0;
}

static void *fake_builder_main(void *arg)
{
	struct fake_builder *b = arg;

	pin_to(b->cpu);
	setpriority(PRIO_PROCESS, 0, 19);
	__atomic_store_n(&b->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	ht_guard_idle_enter(&b->idle);
	while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	ht_guard_idle_leave(&b->idle);
	pthread_mutex_lock(&b->lock);
	if (b->waits_while_holding)
		ht_guard_idle_enter(&b->idle);
	__atomic_store_n(&b->holding, 1, __ATOMIC_RELEASE);
	/* Its own CPU time: on its busy CPU at nice 19 that takes long. */
	for (uint64_t t0 = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	     ht_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < b->work_ns &&
	     !__atomic_load_n(&b->release, __ATOMIC_ACQUIRE);)
		;
	pthread_mutex_unlock(&b->lock);
	ht_guard_idle_enter(&b->idle);
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * B's CPU (the last of two), the nice value a raise gives it (this
 * thread's), its lock. Whether this thread may go down to LOWEST_NICE (0:
 * one step below its own) is tried first. Returns why the test cannot run,
 * or NULL.
 */
static const char *fake_builder_setup(struct fake_builder *b, int lowest_nice)
{
	b->cpu = last_of_two_cpus();
	if (b->cpu < 0)
		return "needs two CPUs";
	errno = 0;
	b->raised_to = getpriority(PRIO_PROCESS, 0);
	if (setpriority(PRIO_PROCESS, 0, lowest_nice ? lowest_nice : b->raised_to - 1))
		return "cannot lower a thread's nice value (CAP_SYS_NICE)";
	setpriority(PRIO_PROCESS, 0, b->raised_to);
	pthread_mutex_init(&b->lock, NULL);
	return NULL;
}

static volatile int hogs_stop;
/* The hogs' nice value: 0, or -20 where a raise to 0 leaves the builder 0.6% of the CPU. */
static int hogs_nice;

static void *hog(void *arg)
{
	pin_to(*(int *)arg);
	setpriority(PRIO_PROCESS, 0, hogs_nice);
	while (!hogs_stop)
		;
	return NULL;
}

/*
 * How long this thread, as the event loop in a turn, waits for the builder's
 * lock, at most LIMIT_MS: the builder takes it before the hogs start, then
 * computes behind them.
 */
static long stall_ms(struct fake_builder *b, struct ht_loop_beat *beat, long limit_ms)
{
	pthread_t thread, hogs[2];
	struct timespec deadline;
	uint64_t t0;
	long ms;
	int rc;

	b->go = b->holding = b->release = b->done = b->tid = 0;
	CHECK(!pthread_create(&thread, NULL, fake_builder_main, b));
	while (!__atomic_load_n(&b->tid, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	__atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&b->holding, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	hogs_stop = 0;
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&hogs[i], NULL, hog, &b->cpu));
	ht_loop_beat_woke(beat);
	t0 = ht_clock_ns(CLOCK_MONOTONIC);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += limit_ms / 1000;
	deadline.tv_nsec += (limit_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	rc = pthread_mutex_timedlock(&b->lock, &deadline);
	ms = (long)((ht_clock_ns(CLOCK_MONOTONIC) - t0) / 1000000);
	if (rc) {
		/* Still held: let it go, and wait until it has. */
		__atomic_store_n(&b->release, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	hogs_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(hogs[i], NULL);
	pthread_join(thread, NULL);
	ht_loop_beat_waits(beat);
	return ms;
}

/*
 * The event loop waits on a lock the builder holds while it computes 20 ms
 * of CPU at nice 19 behind two spinning threads (0.7% of that CPU: seconds).
 * Without the guard it waits on; with it, the builder is raised within two
 * ticks and gives the lock back, raised once, and is lowered when the turn
 * ends.
 */
TEST(a_stalled_event_loop_gets_the_builder_raised)
{
	struct fake_builder b = { .work_ns = 20000000ULL };
	struct ht_loop_beat beat = { 0 };
	struct ht_builder_guard g = { 0 };
	long alone_ms, guarded_ms;
	const char *skip;

	skip = fake_builder_setup(&b, 0);
	if (skip)
		SKIP_TEST(skip);

	alone_ms = stall_ms(&b, &beat, 1000);
	b.tid = 0;

	g = (struct ht_builder_guard){ .beat = &beat, .builder = &b.idle, .raise = fake_raise,
				       .lower = fake_lower, .ctx = &b };
	CHECK(!ht_builder_guard_start(&g));
	guarded_ms = stall_ms(&b, &beat, 1000);
	/* The turn ended: lowered at the next tick. */
	sleep_ms(3 * HT_GUARD_TICK_NS / 1000000);
	CHECK(b.holds == 0);
	ht_builder_guard_stop(&g);
	if (alone_ms < 1000 || guarded_ms > 500 || ht_builder_guard_lifts(&g) != 1)
		printf("     waited %ld ms alone, %ld ms with the guard (%llu lifts)\n", alone_ms,
		       guarded_ms, (unsigned long long)ht_builder_guard_lifts(&g));
	/* Alone, the premise: the builder keeps the lock past the limit. */
	CHECK(alone_ms >= 1000);
	/* Two ticks and 20 ms at a third of the CPU: 100 ms; 500 on a loaded machine. */
	CHECK(guarded_ms <= 500);
	CHECK(ht_builder_guard_lifts(&g) == 1);
}

/* The id of this process's thread named NAME (0: none such). */
static int tid_of(const char *name)
{
	char path[300], line[64];
	struct dirent *e;
	int tid = 0;
	DIR *dir = opendir("/proc/self/task");

	while (dir && !tid && (e = readdir(dir))) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) && !strncmp(line, name, strlen(name)))
			tid = atoi(e->d_name);
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return tid;
}

/*
 * A raise the scheduler honours late: behind two threads at nice -20 the
 * builder raised to nice 0 still has 0.6% of its CPU (on 6.1 it is the
 * virtual runtime nice 19 gave it that keeps it waiting). The guard's turns
 * at SCHED_FIFO give it the CPU at once, 4 ms a tick, and put it and the
 * guard back where they were.
 */
TEST(a_stalled_event_loop_gets_the_builder_a_turn_at_sched_fifo)
{
	struct fake_builder b = { .work_ns = 20000000ULL };
	struct ht_loop_beat beat = { 0 };
	struct ht_builder_guard g = { 0 };
	long raised_ms, rushed_ms;
	int guard_tid, guard_policy, rushing;
	const char *skip;

	skip = fake_builder_setup(&b, -20);
	if (skip)
		SKIP_TEST(skip);
	hogs_nice = -20;

	/* Raised alone. */
	g = (struct ht_builder_guard){ .beat = &beat, .builder = &b.idle, .raise = fake_raise,
				       .lower = fake_lower, .ctx = &b };
	CHECK(!ht_builder_guard_start(&g));
	raised_ms = stall_ms(&b, &beat, 1000);
	ht_builder_guard_stop(&g);
	b.tid = 0;

	/* Raised, and its turns. */
	g.rush = fake_rush;
	g.end_rush = fake_end_rush;
	CHECK(!ht_builder_guard_start(&g));
	rushed_ms = stall_ms(&b, &beat, 1000);
	/* The turn ended: no rush is left at the next tick. */
	sleep_ms(3 * HT_GUARD_TICK_NS / 1000000);
	guard_tid = tid_of("hybtrace-guard");
	guard_policy = guard_tid ? sched_getscheduler(guard_tid) : -1;
	rushing = b.rushing;
	ht_builder_guard_stop(&g);
	hogs_nice = 0;
	if (raised_ms < 1000 || rushed_ms > 500 || !ht_builder_guard_rushes(&g))
		printf("     waited %ld ms raised, %ld ms with turns at SCHED_FIFO (%llu turns)\n",
		       raised_ms, rushed_ms, (unsigned long long)ht_builder_guard_rushes(&g));
	/* The premise: raised, the builder keeps the lock past the limit. */
	CHECK(raised_ms >= 1000);
	/* 20 ms of work in turns of 4 ms, a tick apart: about 120 ms; 500 on a loaded machine. */
	CHECK(rushed_ms <= 500);
	CHECK(ht_builder_guard_rushes(&g) >= 1);
	CHECK(ht_builder_guard_lifts(&g) == 1);
	/* Each turn ended, the guard back at its own policy. */
	CHECK(b.rushes == (int)ht_builder_guard_rushes(&g));
	CHECK(!rushing);
	CHECK(guard_policy == SCHED_OTHER);
}

/*
 * A builder can hold up the event loop on its way into a wait for work (on
 * PREEMPT_RT a move waits for it to leave a section it may not migrate in):
 * the guard, asleep while the builder waits, ticks while the event loop
 * watches.
 */
TEST(the_guard_ticks_while_the_event_loop_watches_a_waiting_builder)
{
	struct fake_builder b = { .work_ns = 20000000ULL, .waits_while_holding = true };
	struct ht_loop_beat beat = { 0 };
	struct ht_builder_guard g = { 0 };
	long unwatched_ms, watched_ms;
	const char *skip;

	skip = fake_builder_setup(&b, 0);
	if (skip)
		SKIP_TEST(skip);
	g = (struct ht_builder_guard){ .beat = &beat, .builder = &b.idle, .raise = fake_raise,
				       .lower = fake_lower, .rush = fake_rush,
				       .end_rush = fake_end_rush, .ctx = &b };
	CHECK(!ht_builder_guard_start(&g));
	unwatched_ms = stall_ms(&b, &beat, 1000);
	b.tid = 0;
	ht_guard_watch_begin(&b.idle);
	watched_ms = stall_ms(&b, &beat, 1000);
	ht_guard_watch_end(&b.idle);
	ht_builder_guard_stop(&g);
	if (unwatched_ms < 1000 || watched_ms > 500 || ht_builder_guard_lifts(&g) != 1)
		printf("     waited %ld ms unwatched, %ld ms watched (%llu lifts)\n", unwatched_ms,
		       watched_ms, (unsigned long long)ht_builder_guard_lifts(&g));
	/* Asleep with the builder: no raise. */
	CHECK(unwatched_ms >= 1000);
	CHECK(watched_ms <= 500);
	CHECK(ht_builder_guard_lifts(&g) == 1);
}

/*
 * A turn without CPU time because the event loop waits for its CPU (here
 * behind two threads at nice -20) is the machine's load: raising the
 * builder would not end it, and a turn at SCHED_FIFO would take a CPU from
 * whatever runs there. The guard reads the event loop's state and leaves
 * the builder alone.
 */
TEST(an_event_loop_waiting_for_its_cpu_is_no_stall)
{
	struct fake_builder b = { 0 };
	struct ht_loop_beat beat = { 0 };
	struct ht_builder_guard g = { 0 };
	cpu_set_t all, other;
	pthread_t hogs[2];
	int cpu, guard_tid;
	uint64_t t0, cpu_used;

	cpu = last_of_two_cpus();
	if (cpu < 0)
		SKIP_TEST("needs two CPUs");
	if (setpriority(PRIO_PROCESS, 0, -20))
		SKIP_TEST("cannot lower a thread's nice value (CAP_SYS_NICE)");
	setpriority(PRIO_PROCESS, 0, 0);
	CHECK(!sched_getaffinity(0, sizeof(all), &all));
	g = (struct ht_builder_guard){ .beat = &beat, .builder = &b.idle, .raise = fake_raise,
				       .lower = fake_lower, .rush = fake_rush,
				       .end_rush = fake_end_rush, .ctx = &b };
	CHECK(!ht_builder_guard_start(&g));
	/* It reads the event loop's state. */
	CHECK(g.loop_stat_fd >= 0);
	/* The guard away from the busy CPU, where it gets its ticks. */
	sleep_ms(20);
	guard_tid = tid_of("hybtrace-guard");
	CHECK(guard_tid > 0);
	other = all;
	CPU_CLR(cpu, &other);
	CHECK(!sched_setaffinity(guard_tid, sizeof(other), &other));
	/* The event loop in one turn, 300 ms on the CPU two threads at nice -20 keep busy. */
	hogs_nice = -20;
	hogs_stop = 0;
	pin_to(cpu);
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&hogs[i], NULL, hog, &cpu));
	ht_loop_beat_woke(&beat);
	t0 = ht_clock_ns(CLOCK_MONOTONIC);
	cpu_used = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	while (ht_clock_ns(CLOCK_MONOTONIC) - t0 < 300000000ULL)
		;
	cpu_used = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_used;
	ht_loop_beat_waits(&beat);
	hogs_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(hogs[i], NULL);
	hogs_nice = 0;
	sched_setaffinity(0, sizeof(all), &all);
	ht_builder_guard_stop(&g);
	if (ht_builder_guard_lifts(&g) || cpu_used >= 60000000ULL)
		printf("     the event loop ran %llu ms of 300 in its turn; %llu lifts, %llu turns\n",
		       (unsigned long long)(cpu_used / 1000000),
		       (unsigned long long)ht_builder_guard_lifts(&g),
		       (unsigned long long)ht_builder_guard_rushes(&g));
	/* The premise: its turn used under 5 ms of CPU in most ticks (0.6% of 300 ms is 2 ms). */
	CHECK(cpu_used < 60000000ULL);
	CHECK(ht_builder_guard_lifts(&g) == 0);
	CHECK(ht_builder_guard_rushes(&g) == 0);
}

/* The voluntary switches of this process's thread named NAME so far (-1: none such). */
static long switches_of(const char *name)
{
	char path[64], line[128];
	int tid = tid_of(name);
	long n = -1;
	FILE *f;

	if (!tid)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static int raises;

static bool count_raise(void *ctx)
{
	(void)ctx;
	raises++;
	return true;
}

static void count_lower(void *ctx)
{
	(void)ctx;
}

/*
 * No stall, no raise: an event loop waiting for events, or computing in a
 * turn, is left alone while the builder works; while the builder waits for
 * work the guard does too, with no ticks.
 */
TEST(the_guard_raises_for_stalls_only_and_sleeps_with_the_builder)
{
	struct ht_guard_idle idle = { 0 };
	struct ht_loop_beat beat = { 0 };
	struct ht_builder_guard g = { .beat = &beat, .builder = &idle, .raise = count_raise,
				      .lower = count_lower };
	long before, ticks_working, ticks_idle;
	uint64_t t0;

	CHECK(!ht_builder_guard_start(&g));
	sleep_ms(50);
	raises = 0;
	/* The builder works; the event loop waits in epoll_wait. */
	before = switches_of("hybtrace-guard");
	sleep_ms(300);
	ticks_working = switches_of("hybtrace-guard") - before;
	/* The event loop computes for 300 ms in one turn. */
	ht_loop_beat_woke(&beat);
	t0 = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	while (ht_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < 300000000ULL)
		;
	ht_loop_beat_waits(&beat);
	CHECK(raises == 0);
	/* The builder waits for work: so does the guard. */
	ht_guard_idle_enter(&idle);
	sleep_ms(50);
	before = switches_of("hybtrace-guard");
	sleep_ms(300);
	ticks_idle = switches_of("hybtrace-guard") - before;
	/* And it wakes when the builder does. */
	ht_guard_idle_leave(&idle);
	before = switches_of("hybtrace-guard");
	sleep_ms(100);
	CHECK(switches_of("hybtrace-guard") - before >= 2);
	ht_builder_guard_stop(&g);
	if (ticks_working < 5 || ticks_idle > 1)
		printf("     guard's switches in 300 ms: %ld while the builder works, %ld while "
		       "it waits\n", ticks_working, ticks_idle);
	/* 15 ticks in 300 ms while it works, none while it waits. */
	CHECK(ticks_working >= 5);
	CHECK(ticks_idle <= 1);
	CHECK(ht_builder_guard_lifts(&g) == 0);
}
