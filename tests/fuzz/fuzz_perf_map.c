// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the perf map parser (userspace/symbols/perf_map.c): any
 * input parses without a crash; every entry it keeps is found again at its
 * start, and what a lookup returns holds the address asked for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/perf_map.h"

static void check_lookup(const struct ht_perf_map *m, uint64_t addr)
{
	const struct ht_perf_map_entry *e = ht_perf_map_find(m, addr);

	if (e && (addr < e->start || addr - e->start >= e->size || !e->name[0]))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht_perf_map m;
	size_t lines = 1;

	if (ht_perf_map_parse((const char *)data, size, &m))
		return 0; /* out of memory only */
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (m.count + m.bad_lines > lines)
		abort();
	for (size_t i = 0; i < m.count; i++) {
		const struct ht_perf_map_entry *e = &m.v[i];

		if (i && (e->start < m.v[i - 1].start))
			abort();
		/* Within the overlap scan limit the entry itself or a later one is found. */
		if (m.count < 64 && !ht_perf_map_find(&m, e->start))
			abort();
		check_lookup(&m, e->start);
		check_lookup(&m, e->start + e->size - 1);
		check_lookup(&m, e->start + e->size);
	}
	check_lookup(&m, 0);
	check_lookup(&m, UINT64_MAX);
	ht_perf_map_free(&m);
	return 0;
}
