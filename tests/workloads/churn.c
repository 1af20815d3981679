// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Process churn: the parent ("churn") forks RATE children a second, evenly
 * spaced on an absolute schedule, for SECONDS (or until $HT_STOP_FILE
 * exists), and reaps them as it goes. Each child ("churn_child") sleeps
 * SLEEP_MS in one nanosleep as soon as it is born, and exits.
 *
 * Ground truth: each child logs sleep_start and sleep_end (its own pid);
 * the parent logs churn_start, then churn_end with the children it forked
 * and reaped once every one is reaped.
 *
 * usage: churn [RATE [SECONDS [SLEEP_MS]]]
 */
#include <sys/wait.h>
#include "workload.h"

static long reap(int options)
{
	long n = 0;

	while (waitpid(-1, NULL, options) > 0)
		n++;
	return n;
}

int main(int argc, char **argv)
{
	long rate = wl_arg(argc, argv, 1, 100), seconds = wl_arg(argc, argv, 2, 20);
	uint64_t sleep_ns = (uint64_t)wl_arg(argc, argv, 3, 25) * 1000000ULL;
	uint64_t period_ns, next_ns, end_ns;
	long forked = 0, reaped = 0;

	if (rate <= 0 || seconds < 0) {
		fprintf(stderr, "churn: RATE must be positive and SECONDS not negative\n");
		return 2;
	}
	period_ns = 1000000000ULL / (uint64_t)rate;
	prctl(PR_SET_NAME, "churn");
	wl_wait_start();
	wl_log("churn_start", "\"rate\":%ld,\"seconds\":%ld,\"sleep_ns\":%llu", rate, seconds,
	       (unsigned long long)sleep_ns);
	next_ns = wl_now_ns();
	end_ns = next_ns + (uint64_t)seconds * 1000000000ULL;
	while (wl_before(end_ns)) {
		struct timespec at = {(time_t)(next_ns / 1000000000ULL),
				      (long)(next_ns % 1000000000ULL)};
		pid_t child;

		/* Behind schedule on a loaded machine, it catches up at once: the rate holds. */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
			;
		next_ns += period_ns;
		child = fork();
		if (child < 0) {
			perror("fork");
			break;
		}
		if (child == 0) {
			prctl(PR_SET_NAME, "churn_child");
			wl_log("sleep_start", NULL);
			wl_sleep_ns(sleep_ns);
			wl_log("sleep_end", NULL);
			_exit(0);
		}
		forked++;
		reaped += reap(WNOHANG);
	}
	reaped += reap(0);
	wl_log("churn_end", "\"forked\":%ld,\"reaped\":%ld", forked, reaped);
	return forked == reaped ? 0 : 1;
}
