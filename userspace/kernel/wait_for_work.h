/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A thread parked waiting for new work: an event loop in epoll_wait, a
 * listener in accept, a parent joining its threads. Such a wait breaches
 * any threshold whenever the program is idle, and says nothing of its
 * latency; it is reported as such and ranks below every other breach.
 */
#ifndef HT_WAIT_FOR_WORK_H
#define HT_WAIT_FOR_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

/*
 * Whether B is a wait for work: an off-CPU or syscall breach in epoll_wait,
 * epoll_pwait(2), poll, ppoll, select, pselect6, accept(4), io_uring_enter
 * waiting for completions, or a futex wait ended by one of its own
 * process's threads as it exited (pthread_join). A run-queue wait never is:
 * the thread had work and waited for a CPU. Nor is an epoll wait on
 * notifications alone (HT_BRF_WAITS_ON_NOTICES, ht_wait_sets_judge()).
 */
bool ht_breach_waits_for_work(const struct ht_breach *b);

/*
 * What an epoll set watches. An event loop watches sockets, timers or a
 * terminal: input from outside, work. A set of eventfds, signalfds and
 * pipes alone is how a thread waits for another one to set a latch or
 * release a lock (postgres's WaitLatch, a lock wait, sits in epoll_wait).
 */
enum ht_wait_set {
	HT_WAIT_SET_UNKNOWN, /* not an epoll set, gone, or unreadable */
	HT_WAIT_SET_INPUT,   /* at least one descriptor brings outside input */
	HT_WAIT_SET_NOTICES, /* only notifications between threads or processes */
};

/*
 * The epoll set an off-CPU or syscall breach in an epoll wait waited on: its
 * descriptor in FD. False for any other breach, or where its argument was not read.
 */
bool ht_breach_epoll_fd(const struct ht_breach *b, uint32_t *fd);

/* Whether the target of a /proc/PID/fd link ("pipe:[12]") is a notification. */
bool ht_fd_link_is_notice(const char *link);

/*
 * The kind of the set whose /proc/PID/fdinfo text is FDINFO, each watched
 * descriptor's link read by LINK_OF (returns false when unreadable).
 */
enum ht_wait_set ht_wait_set_of(const char *fdinfo,
				bool (*link_of)(void *ctx, int fd, char *link, size_t len), void *ctx);

/* Sets read recently, by process and descriptor: one /proc read a second per set at most. */
#define HT_WAIT_SETS_CACHED 64
struct ht_wait_sets {
	struct {
		uint32_t tgid;
		uint32_t fd;
		uint64_t read_ns; /* 0: free */
		enum ht_wait_set kind;
	} set[HT_WAIT_SETS_CACHED];
	uint64_t reads; /* /proc reads made */
};

/*
 * For an off-CPU or syscall breach in an epoll wait whose set is read from
 * /proc at NOW_NS (or cached less than a second), set
 * HT_BRF_WAITS_ON_NOTICES when it watches notifications alone.
 */
void ht_wait_sets_judge(struct ht_wait_sets *sets, struct ht_breach *b, uint64_t now_ns);

#endif /* HT_WAIT_FOR_WORK_H */
