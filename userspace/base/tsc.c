// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "base/tsc.h"

/* TICKS * NS_SPAN / TSC_SPAN, rounded down, UINT64_MAX when larger. */
static uint64_t scale(uint64_t ticks, uint64_t ns_span, uint64_t tsc_span)
{
	unsigned __int128 v = (unsigned __int128)ticks * ns_span / tsc_span;

	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t ht_tsc_line_ns(uint64_t tsc0, uint64_t ns0, uint64_t tsc, uint64_t ns_span,
			uint64_t tsc_span)
{
	uint64_t ahead;

	if (tsc < tsc0) {
		uint64_t back = scale(tsc0 - tsc, ns_span, tsc_span);

		return back > ns0 ? 0 : ns0 - back;
	}
	ahead = scale(tsc - tsc0, ns_span, tsc_span);
	return ahead > UINT64_MAX - ns0 ? UINT64_MAX : ns0 + ahead;
}
