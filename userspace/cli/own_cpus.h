/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where hybtrace's own threads run: off the CPUs its target may run on, where
 * there are others. Each breach wakes the event loop, and a woken thread may
 * be placed on the CPU that woke it, the target's: there it would run
 * instead of the target and become a culprit in the breaches it reports.
 *
 * Only a target kept to some CPUs (sched_setaffinity, taskset, a cpuset) is
 * avoided: it cannot leave the CPU hybtrace would take. A target that may run
 * anywhere is moved by the kernel's balancing where hybtrace runs, and
 * chasing the CPU of its last breach would move hybtrace at every breach (on
 * two CPUs, from one to the other).
 */
#ifndef HT_OWN_CPUS_H
#define HT_OWN_CPUS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ht_own_cpus {
	int tgid; /* the target */
	bool on;
	cpu_set_t allowed; /* hybtrace's own CPUs at the start: it never takes more */
	cpu_set_t current; /* what its threads are kept to now */
	cpu_set_t target;  /* the CPUs the target's threads may run on, as last read */
	/* When a breach, and a refresh, last read the target's CPUs. */
	uint64_t breach_read_ns, refresh_read_ns;
	uint64_t read_cost_ns; /* the CPU time the last read took */
	unsigned int moves;    /* how often its threads were moved */
	/*
	 * The thread the last move waited on longest, and how long: the kernel
	 * moves a thread only once it may migrate (on PREEMPT_RT not inside a
	 * spinlock section, preemptible there), so a thread preempted inside one
	 * on the target's busy CPU holds the move until it runs there again.
	 */
	int slowest_tid;
	uint64_t slowest_move_ns;
	/* The last breach's thread's CPUs, and what moving off them at once waited on. */
	cpu_set_t breached;
	int early_slowest_tid;
	uint64_t early_slowest_ns;
};

/*
 * The CPUs hybtrace keeps to: ALLOWED less the TARGET's, or ALLOWED where that
 * leaves none. A target that may run anywhere is left to the kernel's
 * placement: keeping off where it was last is keeping to where it may go next.
 */
void ht_own_cpus_choose(const cpu_set_t *allowed, const cpu_set_t *target, cpu_set_t *out);

/*
 * Start keeping hybtrace's threads (all of them, and those they start later,
 * which inherit where they run) off TGID's CPUs: whether hybtrace may use
 * more than one CPU; then ht_own_cpus_update() makes the first move.
 */
bool ht_own_cpus_init(struct ht_own_cpus *o, int tgid, uint64_t now_ns);

/*
 * Read the target's CPUs now (its threads in /proc) and keep hybtrace's
 * threads off them. Whether that moved them. It may wait on hybtrace's own
 * threads (reading /proc, moving one): the caller raises the dump builder for
 * that time (dumper.h).
 */
bool ht_own_cpus_update(struct ht_own_cpus *o);

/*
 * Whether a breach of thread TID on CPU calls for ht_own_cpus_update() now:
 * where hybtrace may run there and the thread is kept to some of hybtrace's
 * CPUs, the target's CPUs may have changed since they were read (at most
 * every 10 ms). A thread that may run anywhere costs one system call.
 */
bool ht_own_cpus_breach_due(struct ht_own_cpus *o, unsigned int cpu, int tid, uint64_t now_ns);

/*
 * After ht_own_cpus_breach_due(): keep the threads TIDS (0: the calling one)
 * off the breached thread's CPUs at once, before ht_own_cpus_update() reads
 * the target's other threads and moves all of hybtrace's: reading /proc
 * takes long under emulation, and the dump builder, raised meanwhile
 * (dumper.h), would take its turns on the target's CPU all that time.
 */
void ht_own_cpus_leave_breached(struct ht_own_cpus *o, const int *tids, unsigned int n);

/* Now and then: the target's threads come and go, and may change their CPUs. */
bool ht_own_cpus_refresh_due(struct ht_own_cpus *o, uint64_t now_ns);

/*
 * Whether the last move waited on one thread longer than SLOW_NS: then BUF
 * says which and how long, for a line.
 */
bool ht_own_cpus_slow_move(const struct ht_own_cpus *o, uint64_t slow_ns, char *buf, size_t len);

/* Where they are kept now, for a line: "its threads keep to CPU 1, off its target's CPU 0". */
void ht_own_cpus_describe(const struct ht_own_cpus *o, char *buf, size_t len);

#endif /* HT_OWN_CPUS_H */
