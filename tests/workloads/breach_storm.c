// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A breach storm: one thread sleeps SLEEP_US again and again for SECONDS,
 * so every sleep is a syscall (and off-CPU) breach above a lower threshold,
 * about a thousand times a second (or until $HT_STOP_FILE exists). Logs how
 * many sleeps it made.
 * usage: breach_storm [SECONDS [SLEEP_US]]
 */
#include "workload.h"

int main(int argc, char **argv)
{
	uint64_t seconds = (uint64_t)wl_arg(argc, argv, 1, 5);
	uint64_t sleep_ns = (uint64_t)wl_arg(argc, argv, 2, 800) * 1000ULL;
	uint64_t end, sleeps = 0;

	prctl(PR_SET_NAME, "storm");
	wl_wait_start();
	wl_log("storm_start", "\"sleep_ns\":%llu", (unsigned long long)sleep_ns);
	end = wl_now_ns() + seconds * 1000000000ULL;
	while (wl_before(end)) {
		wl_sleep_ns(sleep_ns);
		sleeps++;
	}
	wl_log("storm_end", "\"sleeps\":%llu", (unsigned long long)sleeps);
	return 0;
}
