// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Steady breaches for a soak: for SECONDS, one thread spins SPIN_US (so
 * sampling has user stacks to record) then sleeps SLEEP_MS, a syscall breach
 * above a lower threshold every round; every CHURN_MS a short-lived thread is
 * born, sleeps SLEEP_MS and exits, so thread tracking is exercised too.
 * Logs how many rounds and threads it made.
 * usage: steady [SECONDS [SLEEP_MS [SPIN_US [CHURN_MS]]]]
 */
#include "workload.h"

static uint64_t sleep_ns;

static void *short_lived(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "steady_churn");
	wl_sleep_ns(sleep_ns);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seconds = (uint64_t)wl_arg(argc, argv, 1, 30);
	uint64_t spin_ns, churn_ns, end, next_churn, rounds = 0, threads = 0;

	sleep_ns = (uint64_t)wl_arg(argc, argv, 2, 5) * 1000000ULL;
	spin_ns = (uint64_t)wl_arg(argc, argv, 3, 1000) * 1000ULL;
	churn_ns = (uint64_t)wl_arg(argc, argv, 4, 500) * 1000000ULL;
	prctl(PR_SET_NAME, "steady");
	wl_wait_start();
	wl_log("steady_start", "\"sleep_ns\":%llu,\"spin_ns\":%llu", (unsigned long long)sleep_ns,
	       (unsigned long long)spin_ns);
	end = wl_now_ns() + seconds * 1000000000ULL;
	next_churn = wl_now_ns() + churn_ns;
	while (wl_before(end)) {
		wl_spin_until(wl_now_ns() + spin_ns);
		if (churn_ns && wl_now_ns() >= next_churn) {
			pthread_t t;

			if (!pthread_create(&t, NULL, short_lived, NULL)) {
				pthread_detach(t);
				threads++;
			}
			next_churn += churn_ns;
		}
		wl_sleep_ns(sleep_ns);
		rounds++;
	}
	wl_log("steady_end", "\"rounds\":%llu,\"threads\":%llu", (unsigned long long)rounds,
	       (unsigned long long)threads);
	return 0;
}
