// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/log.h"
#include "cli/own_cpus.h"
#include "base/proc.h"

/*
 * Reading the target's CPUs is a system call per thread. A breach reads them
 * at most every BREACH_READ_NS, a refresh every REFRESH_NS, and each less
 * often where that would spend more than 1/SHARE of the time between its
 * reads (a target of many threads).
 */
#define BREACH_READ_NS 10000000ULL
#define BREACH_SHARE   100
#define REFRESH_NS     200000000ULL
#define REFRESH_SHARE  1000

void ht_own_cpus_choose(const cpu_set_t *allowed, const cpu_set_t *target, cpu_set_t *out)
{
	cpu_set_t both;

	CPU_AND(&both, allowed, target);
	CPU_XOR(out, allowed, &both);
	if (!CPU_COUNT(out))
		*out = *allowed;
}

/*
 * The CPU time this thread spent: what a read costs. Not the wall time, which
 * counts the waits for a CPU too, long on the target's busy CPU, where they
 * would put off the very read that moves hybtrace off it.
 */
static uint64_t thread_cpu_ns(void)
{
	return ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* Add the CPUs thread TID may run on; a thread that exited meanwhile adds none. */
static int add_thread_cpus(void *ctx, int tid)
{
	cpu_set_t *target = ctx, cpus;

	if (!sched_getaffinity(tid, sizeof(cpus), &cpus))
		CPU_OR(target, target, &cpus);
	return 0;
}

/* What keep_thread() keeps hybtrace's threads to, and the one that took longest. */
struct keep {
	const cpu_set_t *cpus;
	int slowest_tid;
	uint64_t slowest_ns;
};

static int keep_thread(void *ctx, int tid)
{
	struct keep *k = ctx;
	uint64_t start_ns = ht_clock_ns(CLOCK_MONOTONIC), took_ns;

	/* A thread that exited meanwhile needs nothing. */
	if (sched_setaffinity(tid, sizeof(*k->cpus), k->cpus) && errno != ESRCH)
		return ht_fail("cannot keep thread %d to its CPUs: %s", tid, strerror(errno));
	took_ns = ht_clock_ns(CLOCK_MONOTONIC) - start_ns;
	if (took_ns > k->slowest_ns) {
		k->slowest_ns = took_ns;
		k->slowest_tid = tid;
	}
	return 0;
}

bool ht_own_cpus_update(struct ht_own_cpus *o)
{
	uint64_t read_start_ns = thread_cpu_ns();
	cpu_set_t target, want;
	struct keep keep;
	int failed;

	CPU_ZERO(&target);
	if (ht_proc_cover_threads(o->tgid, add_thread_cpus, &target, true) || !CPU_COUNT(&target))
		return false;
	o->read_cost_ns = thread_cpu_ns() - read_start_ns;
	o->target = target;
	ht_own_cpus_choose(&o->allowed, &target, &want);
	if (CPU_EQUAL(&want, &o->current))
		return false;
	keep = (struct keep){ .cpus = &want };
	failed = ht_proc_cover_threads(getpid(), keep_thread, &keep, true);
	/* The move began at the breach where ht_own_cpus_leave_breached() came first. */
	o->slowest_tid = keep.slowest_tid;
	o->slowest_move_ns = keep.slowest_ns;
	if (o->early_slowest_ns > o->slowest_move_ns) {
		o->slowest_tid = o->early_slowest_tid;
		o->slowest_move_ns = o->early_slowest_ns;
	}
	o->early_slowest_tid = 0;
	o->early_slowest_ns = 0;
	if (failed) {
		/*
		 * Where that cannot be done (a CPU went offline, a cpuset
		 * changed), hybtrace gives back what it took and runs where the
		 * kernel puts it: never kept to CPUs it may not run on.
		 */
		ht_warn("%s; hybtrace's threads may run on the target's CPUs", ht_last_error());
		keep = (struct keep){ .cpus = &o->allowed };
		ht_proc_cover_threads(getpid(), keep_thread, &keep, true);
		o->current = o->allowed;
		o->on = false;
		return false;
	}
	o->current = want;
	o->moves++;
	return true;
}

/*
 * Whether a read is due, LAST_NS its last one of this kind: MIN_NS after it,
 * or later where a read costs more than 1/SHARE of the time between them.
 */
static bool read_due(const struct ht_own_cpus *o, uint64_t *last_ns, uint64_t now_ns,
		     uint64_t min_ns, uint64_t share)
{
	uint64_t every_ns = o->read_cost_ns * share;

	if (now_ns - *last_ns < (every_ns > min_ns ? every_ns : min_ns))
		return false;
	*last_ns = now_ns;
	return true;
}

/* "0-2,5": CPUS as the kernel lists them (Cpus_allowed_list). */
static void format_cpus(const cpu_set_t *cpus, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE && used < len; cpu++) {
		int last = cpu;

		if (!CPU_ISSET(cpu, cpus))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, cpus))
			last++;
		if (last > cpu)
			used += (size_t)snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "",
						 cpu, last);
		else
			used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "",
						 cpu);
		cpu = last;
	}
}

bool ht_own_cpus_slow_move(const struct ht_own_cpus *o, uint64_t slow_ns, char *buf, size_t len)
{
	char comm[32] = "", from[256];
	cpu_set_t left;

	if (!o->slowest_tid || o->slowest_move_ns <= slow_ns)
		return false;
	ht_proc_thread_comm(o->slowest_tid, comm, sizeof(comm));
	CPU_XOR(&left, &o->allowed, &o->current);
	from[0] = 0;
	if (CPU_COUNT(&left)) {
		strcpy(from, " off CPU ");
		format_cpus(&left, from + strlen(from), sizeof(from) - strlen(from));
	}
	snprintf(buf, len, "moving its thread %d (%s)%s took %.1f ms: the kernel moves a thread "
		 "only once it may migrate (one preempted where it may not runs there first)",
		 o->slowest_tid, comm[0] ? comm : "?", from, (double)o->slowest_move_ns / 1e6);
	return true;
}

void ht_own_cpus_describe(const struct ht_own_cpus *o, char *buf, size_t len)
{
	char own[256], target[256];

	format_cpus(&o->current, own, sizeof(own));
	if (CPU_EQUAL(&o->current, &o->allowed)) {
		snprintf(buf, len, "its threads run on CPU %s, all of its own", own);
		return;
	}
	format_cpus(&o->target, target, sizeof(target));
	snprintf(buf, len, "its threads keep to CPU %s, off its target's CPU %s", own, target);
}

bool ht_own_cpus_init(struct ht_own_cpus *o, int tgid, uint64_t now_ns)
{
	memset(o, 0, sizeof(*o));
	o->tgid = tgid;
	if (sched_getaffinity(0, sizeof(o->allowed), &o->allowed) || CPU_COUNT(&o->allowed) < 2)
		return false;
	o->current = o->allowed;
	o->on = true;
	o->refresh_read_ns = now_ns;
	return true;
}

bool ht_own_cpus_breach_due(struct ht_own_cpus *o, unsigned int cpu, int tid, uint64_t now_ns)
{
	cpu_set_t thread;

	if (!o->on || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &o->current))
		return false;
	/*
	 * A thread that may run on every CPU hybtrace may use changes nothing;
	 * one kept to fewer may have been kept there since the last read.
	 */
	if (sched_getaffinity(tid, sizeof(thread), &thread))
		return false;
	CPU_AND(&thread, &thread, &o->allowed);
	if (CPU_EQUAL(&thread, &o->allowed) ||
	    !read_due(o, &o->breach_read_ns, now_ns, BREACH_READ_NS, BREACH_SHARE))
		return false;
	o->breached = thread;
	return true;
}

void ht_own_cpus_leave_breached(struct ht_own_cpus *o, const int *tids, unsigned int n)
{
	cpu_set_t want;
	struct keep keep = { .cpus = &want };

	ht_own_cpus_choose(&o->allowed, &o->breached, &want);
	/* What fails here fails again in ht_own_cpus_update(), which says so. */
	for (unsigned int i = 0; i < n; i++)
		keep_thread(&keep, tids[i] ? tids[i] : (int)gettid());
	/* The slowest of this breach's early moves, one call or several. */
	if (keep.slowest_ns > o->early_slowest_ns) {
		o->early_slowest_tid = keep.slowest_tid;
		o->early_slowest_ns = keep.slowest_ns;
	}
}

bool ht_own_cpus_refresh_due(struct ht_own_cpus *o, uint64_t now_ns)
{
	return o->on && read_due(o, &o->refresh_read_ns, now_ns, REFRESH_NS, REFRESH_SHARE);
}
