/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a clock in nanoseconds. Inline: the event loop reads
 * CLOCK_MONOTONIC for every batch of records.
 */
#ifndef HT_CLOCK_H
#define HT_CLOCK_H

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

#endif /* HT_CLOCK_H */
