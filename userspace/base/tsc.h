/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * TSC to CLOCK_MONOTONIC: the one mapping that user marks, the raw capture
 * and the Intel PT decoder place TSC values with, each through the pairs
 * (TSC, CLOCK_MONOTONIC) it took.
 */
#ifndef HT_TSC_H
#define HT_TSC_H

#include <stdint.h>

/*
 * TSC on the line through (TSC0, NS0) with slope NS_SPAN / TSC_SPAN ns per
 * tick: NS0 + (TSC - TSC0) * NS_SPAN / TSC_SPAN, rounded toward NS0 and
 * held within 0 and UINT64_MAX, with no overflow on the way. TSC_SPAN must
 * not be 0.
 */
static inline uint64_t ht_tsc_scale(uint64_t ticks, uint64_t ns_span, uint64_t tsc_span)
{
	unsigned __int128 v = (unsigned __int128)ticks * ns_span / tsc_span;

	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Inline: the Intel PT decoder places every timed block with it. */
static inline uint64_t ht_tsc_line_ns(uint64_t tsc0, uint64_t ns0, uint64_t tsc,
				      uint64_t ns_span, uint64_t tsc_span)
{
	uint64_t ahead;

	if (tsc < tsc0) {
		uint64_t back = ht_tsc_scale(tsc0 - tsc, ns_span, tsc_span);

		return back > ns0 ? 0 : ns0 - back;
	}
	ahead = ht_tsc_scale(tsc - tsc0, ns_span, tsc_span);
	return ahead > UINT64_MAX - ns0 ? UINT64_MAX : ns0 + ahead;
}

#endif /* HT_TSC_H */
