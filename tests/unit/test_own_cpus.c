// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Where hybtrace's own threads run: off the target's CPUs, where there is another. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "cli/own_cpus.h"

static cpu_set_t cpus(int n, ...)
{
	cpu_set_t s;
	va_list ap;

	CPU_ZERO(&s);
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		CPU_SET(va_arg(ap, int), &s);
	va_end(ap);
	return s;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

TEST(off_a_pinned_targets_cpus)
{
	cpu_set_t allowed = cpus(4, 0, 1, 2, 3), target = cpus(2, 0, 2), out, want = cpus(2, 1, 3);

	ht_own_cpus_choose(&allowed, &target, &out);
	CHECK(CPU_EQUAL(&out, &want));
}

/* Where the target was last is where it may go next: the kernel places hybtrace. */
TEST(anywhere_it_may_when_the_target_may_run_anywhere)
{
	cpu_set_t allowed = cpus(2, 0, 1), target = cpus(4, 0, 1, 2, 3), out;

	ht_own_cpus_choose(&allowed, &target, &out);
	CHECK(CPU_EQUAL(&out, &allowed));
}

TEST(never_more_than_its_own_cpus_nor_none)
{
	cpu_set_t allowed = cpus(2, 2, 3), target = cpus(1, 0), out;

	ht_own_cpus_choose(&allowed, &target, &out);
	CHECK(CPU_EQUAL(&out, &allowed));
	target = cpus(1, 3);
	ht_own_cpus_choose(&allowed, &target, &out);
	CHECK(CPU_COUNT(&out) == 1 && CPU_ISSET(2, &out));
	/* All it may use is the target's: it stays where it may. */
	allowed = cpus(1, 3);
	ht_own_cpus_choose(&allowed, &target, &out);
	CHECK(CPU_EQUAL(&out, &allowed));
}

/* Whether this thread may run on CPUs 0 and 1; where it may run, in BEFORE. */
static bool may_use_cpus_0_and_1(cpu_set_t *before)
{
	return !sched_getaffinity(0, sizeof(*before), before) && CPU_ISSET(0, before) &&
	       CPU_ISSET(1, before);
}

/*
 * For real: a child pinned to CPU 0 is the target; this process keeps off
 * CPU 0. The child moves to CPU 1: a breach there moves this process back.
 */
TEST(the_threads_follow_the_targets_cpus)
{
	cpu_set_t mine, before, zero = cpus(1, 0), one = cpus(1, 1);
	int ready[2], go[2];
	struct ht_own_cpus o;
	pid_t child;
	char byte;

	if (!may_use_cpus_0_and_1(&before))
		SKIP_TEST("needs CPUs 0 and 1");
	CHECK(!pipe(ready) && !pipe(go));
	child = fork();
	if (child == 0) {
		if (sched_setaffinity(0, sizeof(zero), &zero) || write(ready[1], "x", 1) != 1 ||
		    read(go[0], &byte, 1) != 1 || sched_setaffinity(0, sizeof(one), &one) ||
		    write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(child > 0 && read(ready[0], &byte, 1) == 1);
	CHECK(ht_own_cpus_init(&o, child, now_ns()) && ht_own_cpus_update(&o));
	CHECK(!sched_getaffinity(0, sizeof(mine), &mine));
	CHECK(!CPU_ISSET(0, &mine) && CPU_COUNT(&mine) == CPU_COUNT(&before) - 1);
	/* A breach on a CPU it already avoids changes nothing. */
	CHECK(!ht_own_cpus_breach_due(&o, 0, child, now_ns()));
	CHECK(!sched_getaffinity(0, sizeof(mine), &mine) && !CPU_ISSET(0, &mine));
	CHECK(write(go[1], "x", 1) == 1 && read(ready[0], &byte, 1) == 1);
	CHECK(ht_own_cpus_breach_due(&o, 1, child, now_ns()) && ht_own_cpus_update(&o));
	CHECK(!sched_getaffinity(0, sizeof(mine), &mine));
	CHECK(CPU_ISSET(0, &mine) && !CPU_ISSET(1, &mine));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	sched_setaffinity(0, sizeof(before), &before);
}

/*
 * A child that may run anywhere until told (a byte on GO[1]), then pins
 * itself to CPU 0 and says so (a byte on READY[0]).
 */
static pid_t late_pinner(int ready[2], int go[2])
{
	cpu_set_t zero = cpus(1, 0);
	pid_t child;
	char byte;

	if (pipe(ready) || pipe(go))
		return -1;
	child = fork();
	if (child == 0) {
		if (read(go[0], &byte, 1) != 1 || sched_setaffinity(0, sizeof(zero), &zero) ||
		    write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	return child;
}

/*
 * A target that pins itself after the start: its first breach there moves
 * this process at once, however recent the last read (under emulation a read
 * takes milliseconds, and waiting for the next left hybtrace on the target's
 * CPU for hundreds): off the breached thread's CPUs even before the read.
 */
TEST(the_first_breach_of_a_thread_pinned_later_moves_it)
{
	cpu_set_t mine, before;
	int ready[2], go[2], self[1] = { 0 };
	struct ht_own_cpus o;
	pid_t child;
	char byte;

	if (!may_use_cpus_0_and_1(&before))
		SKIP_TEST("needs CPUs 0 and 1");
	child = late_pinner(ready, go);
	CHECK(child > 0);
	/* It may run anywhere: nothing moves, not even at its breach. */
	CHECK(ht_own_cpus_init(&o, child, now_ns()) && !ht_own_cpus_update(&o));
	CHECK(!ht_own_cpus_breach_due(&o, 0, child, now_ns()));
	CHECK(write(go[1], "x", 1) == 1 && read(ready[0], &byte, 1) == 1);
	CHECK(ht_own_cpus_breach_due(&o, 0, child, now_ns()));
	/* Off the breached thread's CPUs before the read; the read's move is the one counted. */
	ht_own_cpus_leave_breached(&o, self, 1);
	CHECK(!sched_getaffinity(0, sizeof(mine), &mine) && !CPU_ISSET(0, &mine));
	CHECK(o.moves == 0 && CPU_EQUAL(&o.current, &before));
	CHECK(ht_own_cpus_update(&o) && o.moves == 1 && !CPU_ISSET(0, &o.current));
	CHECK(!sched_getaffinity(0, sizeof(mine), &mine) && !CPU_ISSET(0, &mine));
	/* Its one thread, the one the move waited on, and not for long. */
	CHECK(o.slowest_tid == getpid() && o.slowest_move_ns > 0 &&
	      o.slowest_move_ns < 1000000000ULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	sched_setaffinity(0, sizeof(before), &before);
}

/*
 * A move that waited on one of its threads says which and how long (the
 * kernel moves a thread only once it may migrate); a quick one says nothing.
 * The time is the move's own: the real move above took far less.
 */
TEST(a_move_that_waited_on_a_thread_says_which_and_how_long)
{
	struct ht_own_cpus o;
	char line[256], want[128];

	memset(&o, 0, sizeof(o));
	o.allowed = cpus(3, 0, 1, 2);
	o.current = cpus(2, 1, 2);
	o.slowest_tid = (int)syscall(SYS_gettid);
	o.slowest_move_ns = 473100000;
	CHECK(ht_own_cpus_slow_move(&o, 10000000, line, sizeof(line)));
	snprintf(want, sizeof(want), "moving its thread %d (test_own_cpus) off CPU 0 took 473.1 ms:",
		 o.slowest_tid);
	CHECK(!strncmp(line, want, strlen(want)));
	o.slowest_move_ns = 9000000;
	CHECK(!ht_own_cpus_slow_move(&o, 10000000, line, sizeof(line)));
	/* Given back to all of its CPUs: from nowhere in particular. */
	o.current = o.allowed;
	o.slowest_move_ns = 20000000;
	CHECK(ht_own_cpus_slow_move(&o, 10000000, line, sizeof(line)));
	snprintf(want, sizeof(want), "moving its thread %d (test_own_cpus) took 20.0 ms:",
		 o.slowest_tid);
	CHECK(!strncmp(line, want, strlen(want)));
}
