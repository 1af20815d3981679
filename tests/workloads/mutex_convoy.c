// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A mutex convoy: THREADS threads take one mutex in turn through
 * take_convoy_lock() and hold it HOLD_MS, spinning; the others wait in
 * pthread_mutex_lock, asleep on its futex, for several holds. Each waiter
 * logs how long it waited, when its lock and unlock calls ran and how many
 * times the kernel counts it slept in each (voluntary context switches:
 * the unlock's futex wake never sleeps, yet may take long); the first logs
 * "convoy_start" with the address of take_convoy_lock, the function that
 * calls pthread_mutex_lock.
 * Built twice: with frame pointers (mutex_convoy) and without
 * (mutex_convoy_nofp), where a frame-pointer walk stops short.
 * usage: mutex_convoy [HOLD_MS [ROUNDS [THREADS]]]
 */
#include <sys/resource.h>
#include "workload.h"

#define MAX_THREADS 16

static pthread_mutex_t convoy_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t hold_ns;
static long rounds;

/* Named and never inlined: the stack where a waiter blocked must show it. */
__attribute__((noinline)) void take_convoy_lock(void)
{
	pthread_mutex_lock(&convoy_lock);
	__asm__ __volatile__("" ::: "memory");
}

/* The kernel's count of the calling thread's voluntary context switches: its sleeps. */
static long sleeps(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nvcsw;
}

__attribute__((noinline)) static void convoy_round(void)
{
	long s0 = sleeps(), s1, s2;
	uint64_t t0 = wl_now_ns(), t1, t2, t3;

	take_convoy_lock();
	t1 = wl_now_ns();
	s1 = sleeps();
	wl_spin_until(t1 + hold_ns);
	t2 = wl_now_ns();
	pthread_mutex_unlock(&convoy_lock);
	t3 = wl_now_ns();
	s2 = sleeps();
	wl_log("waited",
	       "\"wait_ns\":%llu,\"lock_ns\":[%llu,%llu],\"lock_sleeps\":%ld,"
	       "\"unlock_ns\":[%llu,%llu],\"unlock_sleeps\":%ld",
	       (unsigned long long)(t1 - t0), (unsigned long long)t0, (unsigned long long)t1,
	       s1 - s0, (unsigned long long)t2, (unsigned long long)t3, s2 - s1);
	/* Out of the way for a moment, so the lock goes round the convoy. */
	wl_sleep_ns(200000);
	__asm__ __volatile__("" ::: "memory");
}

static void *convoy_thread(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "convoy");
	for (long done = 0; wl_more_rounds(done, rounds); done++)
		convoy_round();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[MAX_THREADS];
	long nthreads;

	hold_ns = (uint64_t)wl_arg(argc, argv, 1, 5) * 1000000ULL;
	rounds = wl_arg(argc, argv, 2, 50);
	nthreads = wl_arg(argc, argv, 3, 4);
	if (nthreads < 1 || nthreads > MAX_THREADS)
		nthreads = 4;
	wl_wait_start();
	wl_log("convoy_start", "\"take_convoy_lock\":\"%p\",\"threads\":%ld",
	       (void *)take_convoy_lock, nthreads);
	for (long i = 0; i < nthreads; i++)
		pthread_create(&threads[i], NULL, convoy_thread, NULL);
	for (long i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	wl_log("convoy_end", NULL);
	return 0;
}
