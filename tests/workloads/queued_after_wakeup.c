// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A run-queue wait after each wakeup: a "queued" thread sleeps on a futex
 * until a SCHED_FIFO "fifo_waker" thread, on the same CPU, wakes it and
 * then spins HOLD_MS there before it sleeps PERIOD_MS again. The woken
 * thread cannot preempt a real-time task: each round it waits in the run
 * queue for the whole hold. Each round logs the wake's time once all are
 * over ("round": waker_tid, wake_ns, just before the futex wake, and ran_ns, once the
 * queued thread ran). Needs root (SCHED_FIFO).
 * usage: queued_after_wakeup [ROUNDS [HOLD_MS [PERIOD_MS]]]
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include "workload.h"

#define MAX_ROUNDS 1000

static long rounds;
static uint64_t hold_ns, period_ns;
static int turn, waker_tid;
static uint64_t wake_ns[MAX_ROUNDS], ran_ns[MAX_ROUNDS];

static void *fifo_waker(void *arg)
{
	struct sched_param fifo = { .sched_priority = 1 };

	(void)arg;
	prctl(PR_SET_NAME, "fifo_waker");
	waker_tid = wl_gettid();
	wl_pin(0);
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) {
		perror("sched_setscheduler");
		exit(1);
	}
	for (long i = 0; i < rounds; i++) {
		wl_sleep_ns(period_ns);
		wake_ns[i] = wl_now_ns();
		__atomic_store_n(&turn, (int)i + 1, __ATOMIC_RELEASE);
		syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		/* The woken thread waits in the run queue until this sleeps. */
		wl_spin_until(wl_now_ns() + hold_ns);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	rounds = wl_arg(argc, argv, 1, 30);
	hold_ns = (uint64_t)wl_arg(argc, argv, 2, 2) * 1000000ULL;
	period_ns = (uint64_t)wl_arg(argc, argv, 3, 3) * 1000000ULL;
	if (rounds < 1 || rounds > MAX_ROUNDS)
		return 2;
	prctl(PR_SET_NAME, "queued");
	wl_pin(0);
	if (pthread_create(&t, NULL, fifo_waker, NULL))
		return 1;
	for (long i = 0; i < rounds; i++) {
		while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) <= i)
			syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, (int)i, NULL, NULL, 0);
		ran_ns[i] = wl_now_ns();
	}
	pthread_join(t, NULL);
	for (long i = 0; i < rounds; i++)
		wl_log("round", "\"round\":%ld,\"waker_tid\":%d,\"wake_ns\":%llu,\"ran_ns\":%llu",
		       i, waker_tid, (unsigned long long)wake_ns[i], (unsigned long long)ran_ns[i]);
	return 0;
}
