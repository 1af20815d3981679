// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include "hybtrace/records.h"
#include "base/units.h"

/*
 * Print V, in the unit of FMTS[0], in the smallest unit in which it stays under
 * 1000 once rounded: 999.95us rounds to "1000.0us", so it prints "1.00ms".
 */
static const char *format_scaled(double v, const char *const *fmts, size_t n, char *buf, size_t len)
{
	for (size_t i = 0;; i++, v /= 1000) {
		snprintf(buf, len, fmts[i], v);
		if (i + 1 == n || strtod(buf, NULL) < 1000)
			return buf;
	}
}

const char *ht_format_duration(uint64_t ns, char *buf, size_t len)
{
	static const char *const fmts[] = { "%.1fus", "%.2fms", "%.3fs" };

	if (ns < 1000) {
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
		return buf;
	}
	return format_scaled((double)ns / 1e3, fmts, sizeof(fmts) / sizeof(fmts[0]), buf, len);
}

const char *ht_format_count(double n, char *buf, size_t len)
{
	static const char *const fmts[] = { "%.0f", "%.1fk", "%.1fM", "%.1fG" };

	return format_scaled(n, fmts, sizeof(fmts) / sizeof(fmts[0]), buf, len);
}

char ht_task_state_letter(uint32_t state)
{
	return HT_STATE_LETTERS[ht_task_state_index(state)];
}
