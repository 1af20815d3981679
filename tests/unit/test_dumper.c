// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The dumper's builder thread: where its test mode starts it, and that it stays moved. */
#include <sched.h>
#include <stdlib.h>
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
