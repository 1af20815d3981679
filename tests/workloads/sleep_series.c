// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Breaches of known sizes in a known order: one thread ("series") sleeps
 * each MS of the list in clock_nanosleep, one after the other, and waits
 * GAP_MS between two in poll(), which is not clock_nanosleep: with
 * `--syscalls clock_nanosleep` only the sleeps breach. Each sleep is logged
 * with the time it really took (sleep_end's slept_ns). Then it waits
 * TAIL_MS in poll() before it exits, so a tracer's interval can end first.
 * usage: sleep_series GAP_MS MS[,MS...] [TAIL_MS]
 */
#include <poll.h>
#include "workload.h"

static void wait_ms(long ms)
{
	uint64_t end = wl_now_ns() + (uint64_t)ms * 1000000ULL;

	/* poll() returns early on a signal: wait out the rest. */
	for (uint64_t now = wl_now_ns(); now < end; now = wl_now_ns())
		poll(NULL, 0, (int)((end - now + 999999) / 1000000));
}

int main(int argc, char **argv)
{
	long gap_ms = wl_arg(argc, argv, 1, 0), tail_ms = wl_arg(argc, argv, 3, 0);
	const char *list = argc > 2 ? argv[2] : "15";
	int i = 0;

	prctl(PR_SET_NAME, "series");
	wl_wait_start();
	for (const char *p = list; *p; i++) {
		char *end;
		long ms = strtol(p, &end, 10);
		uint64_t start;

		if (end == p || ms <= 0) {
			fprintf(stderr, "sleep_series: bad list '%s'\n", list);
			return 2;
		}
		if (i)
			wait_ms(gap_ms);
		wl_log("sleep_start", "\"i\":%d,\"delay_ns\":%llu", i,
		       (unsigned long long)ms * 1000000ULL);
		start = wl_now_ns();
		wl_sleep_ns((uint64_t)ms * 1000000ULL);
		wl_log("sleep_end", "\"i\":%d,\"start_ns\":%llu,\"slept_ns\":%llu", i,
		       (unsigned long long)start, (unsigned long long)(wl_now_ns() - start));
		p = *end == ',' ? end + 1 : end;
	}
	wait_ms(tail_ms);
	wl_log("series_end", NULL);
	return 0;
}
