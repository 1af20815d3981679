// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The dumper's builder thread: where its test mode starts it, that it stays moved, its raise. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "dump/dumper.h"

/* The first and the last CPU this thread may use (-1 where it has fewer than two). */
static void two_cpus(int *first, int *last)
{
	cpu_set_t all;

	*first = *last = -1;
	if (sched_getaffinity(0, sizeof(all), &all) || CPU_COUNT(&all) < 2)
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &all))
			continue;
		if (*first < 0)
			*first = cpu;
		*last = cpu;
	}
}

static bool kept_to(int tid, int cpu)
{
	cpu_set_t now;

	return !sched_getaffinity(tid, sizeof(now), &now) && CPU_COUNT(&now) == 1 &&
	       CPU_ISSET(cpu, &now);
}

/*
 * HYBTRACE_TEST_BUILDER_BUSY_CPU starts the builder on its CPU before it runs:
 * a move of hybtrace's threads right after the start (own_cpus.h) is never
 * undone. The builder set its own CPU once ready, and at nice 19 on a loaded
 * machine did so after such a move (the kernel matrix's running kernel beside
 * stress-ng: it ran on its target's CPU after hybtrace had moved it).
 */
TEST(the_test_modes_start_cpu_is_set_before_a_move_can_come)
{
	struct ht_dumper_config cfg = { .output_dir = "/tmp", .test_builder_busy = true };
	struct timespec settle = { 0, 100 * 1000000L };
	int first, last;

	two_cpus(&first, &last);
	if (first < 0)
		SKIP_TEST("needs two CPUs");
	cfg.test_builder_busy_cpu = (unsigned int)last;
	for (int round = 0; round < 20; round++) {
		struct ht_dumper *d = calloc(1, sizeof(*d));
		cpu_set_t to;
		int tid;

		CHECK(d != NULL);
		if (!d)
			return;
		CHECK(ht_dumper_start(d, &cfg) == 0);
		tid = ht_dumper_builder_tid(d);
		CHECK(tid > 0 && tid != getpid());
		CHECK(kept_to(tid, last));
		/* The move own_cpus makes, at once. */
		CPU_ZERO(&to);
		CPU_SET(first, &to);
		CHECK(!sched_setaffinity(tid, sizeof(to), &to));
		nanosleep(&settle, NULL);
		CHECK(kept_to(tid, first));
		ht_dumper_stop(d);
		free(d);
	}
}

/* Its voluntary switches so far: one per wait, so one per run after a wakeup. */
static long waits_of(int tid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static volatile int hogs_stop;

static void *hog(void *arg)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(*(int *)arg, &one);
	sched_setaffinity(0, sizeof(one), &one);
	while (!hogs_stop)
		;
	return NULL;
}

/* How often the builder ran in PERIOD_MS: it waits 2 ms between its reads in the test mode. */
static long runs_in(int tid, long period_ms)
{
	struct timespec period = { 0, period_ms * 1000000L };
	long before = waits_of(tid);

	nanosleep(&period, NULL);
	return waits_of(tid) - before;
}

/*
 * Raised to this thread's nice value, the builder runs as often as it wakes
 * on a CPU two busy threads share with it, where at nice 19 it waits its turn
 * (what holds up the event loop when it waits on a kernel section the builder
 * was preempted in); lowered, it is back at nice 19.
 */
TEST(a_raised_builder_runs_at_once_where_its_cpu_is_busy)
{
	struct ht_dumper_config cfg = { .output_dir = "/tmp", .test_builder_busy = true };
	struct timespec tick = { 0, 10 * 1000000L };
	struct ht_dumper *d = calloc(1, sizeof(*d));
	long lowered, raised;
	pthread_t hogs[2];
	int first, last, tid;

	two_cpus(&first, &last);
	if (first < 0 || !d)
		SKIP_TEST("needs two CPUs");
	cfg.test_builder_busy_cpu = (unsigned int)last;
	CHECK(ht_dumper_start(d, &cfg) == 0);
	/* This thread sleeps as an event loop in epoll_wait would: no stall for the guard. */
	ht_loop_beat_waits(&d->beat);
	tid = ht_dumper_builder_tid(d);
	/* It lowers itself to nice 19 once ready. */
	for (int i = 0; i < 100 && getpriority(PRIO_PROCESS, (id_t)tid) != 19; i++)
		nanosleep(&tick, NULL);
	CHECK(getpriority(PRIO_PROCESS, (id_t)tid) == 19);
	hogs_stop = 0;
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&hogs[i], NULL, hog, &last));
	nanosleep(&tick, NULL);
	lowered = runs_in(tid, 400);
	if (!ht_dumper_raise(d)) {
		hogs_stop = 1;
		for (int i = 0; i < 2; i++)
			pthread_join(hogs[i], NULL);
		ht_dumper_stop(d);
		free(d);
		SKIP_TEST("cannot lower a thread's nice value (CAP_SYS_NICE)");
	}
	CHECK(getpriority(PRIO_PROCESS, (id_t)tid) == getpriority(PRIO_PROCESS, 0));
	/* Raises nest (the event loop's, the guard's): lowered with the last. */
	CHECK(ht_dumper_raise(d));
	raised = runs_in(tid, 400);
	ht_dumper_lower(d);
	CHECK(getpriority(PRIO_PROCESS, (id_t)tid) == getpriority(PRIO_PROCESS, 0));
	ht_dumper_lower(d);
	hogs_stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(hogs[i], NULL);
	CHECK(getpriority(PRIO_PROCESS, (id_t)tid) == 19);
	/* Every 2 ms raised: 200 runs in 400 ms, at least a quarter of that on a loaded machine. */
	if (raised < 50 || raised < 2 * lowered)
		printf("     runs in 400 ms: %ld lowered, %ld raised\n", lowered, raised);
	CHECK(raised >= 50 && raised >= 2 * lowered);
	ht_dumper_stop(d);
	CHECK(!ht_dumper_raise(d));
	free(d);
}
