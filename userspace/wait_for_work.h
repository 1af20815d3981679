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
#include "hybtrace/records.h"

/*
 * Whether B is a wait for work: an off-CPU or syscall breach in epoll_wait,
 * epoll_pwait(2), poll, ppoll, select, pselect6, accept(4), io_uring_enter
 * waiting for completions, or a futex wait ended by one of its own
 * process's threads as it exited (pthread_join). A run-queue wait never is:
 * the thread had work and waited for a CPU.
 */
bool ht_breach_waits_for_work(const struct ht_breach *b);

#endif /* HT_WAIT_FOR_WORK_H */
