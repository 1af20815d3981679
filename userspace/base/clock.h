/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a clock in nanoseconds, and sleeping on it. Inline: the event
 * loop reads CLOCK_MONOTONIC for every batch of records.
 */
#ifndef HT_CLOCK_H
#define HT_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

/* Clock ID now, in ns; 0 (errno set) when the kernel has no such clock. */
static inline uint64_t ht_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC now, in ns: the clock of every time hybtrace records. */
static inline uint64_t ht_monotonic_ns(void)
{
	return ht_clock_ns(CLOCK_MONOTONIC);
}

static inline struct timespec ht_timespec_of_ns(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
}

/* Sleep NS nanoseconds, a signal's interruption included. */
static inline void ht_sleep_ns(uint64_t ns)
{
	struct timespec ts = ht_timespec_of_ns(ns);

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* Sleep until CLOCK_MONOTONIC reads MONOTONIC_NS, a signal's interruption included. */
static inline void ht_sleep_until_ns(uint64_t monotonic_ns)
{
	struct timespec ts = ht_timespec_of_ns(monotonic_ns);

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

#endif /* HT_CLOCK_H */
