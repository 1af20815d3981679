// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the /proc/PID/maps parser (userspace/symbols/proc_maps.c):
 * any input gives mappings or a message, never a crash; what it accepts
 * is sorted, never overlaps, and every lookup agrees with a plain scan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "symbols/proc_maps.h"

/* The mapping holding ADDR, found the slow way. */
static const struct ht_mapping *scan(const struct ht_maps *m, uint64_t addr)
{
	for (size_t i = 0; i < m->count; i++)
		if (addr >= m->v[i].start && addr < m->v[i].end)
			return &m->v[i];
	return NULL;
}

static void check_lookup(const struct ht_maps *m, uint64_t addr)
{
	if (ht_maps_find(m, addr) != scan(m, addr))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht_maps m;

	if (ht_maps_parse((const char *)data, size, &m)) {
		if (!ht_last_error()[0] || m.count || m.v)
			abort(); /* every failure says why, and leaves nothing behind */
		return 0;
	}
	for (size_t i = 0; i < m.count; i++) {
		const struct ht_mapping *x = &m.v[i];

		if (x->start >= x->end || (i && x->start < m.v[i - 1].end))
			abort();
		if (strlen(x->perms) != 4 || !x->path)
			abort();
		check_lookup(&m, x->start);
		check_lookup(&m, x->end - 1);
		check_lookup(&m, x->end);
		check_lookup(&m, x->start - 1);
	}
	check_lookup(&m, 0);
	check_lookup(&m, UINT64_MAX);
	ht_maps_free(&m);
	return 0;
}
