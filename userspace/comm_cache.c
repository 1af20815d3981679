// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm_cache.h"
#include "log.h"
#include "monitor.h"
#include "proc.h"

void ht_comm_cache_init(struct ht_comm_cache *c, const struct ht_monitor *m)
{
	memset(c, 0, sizeof(*c));
	c->monitor = m;
}

void ht_comm_cache_free(struct ht_comm_cache *c)
{
	const struct ht_monitor *m = c->monitor;

	free(c->seeded);
	ht_comm_cache_init(c, m);
}

/* Where PID is among the seeded names, or where it would go (*FOUND says which). */
static size_t seeded_index(const struct ht_comm_cache *c, uint32_t pid, bool *found)
{
	size_t lo = 0, hi = c->nseeded;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->seeded[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < c->nseeded && c->seeded[lo].pid == pid;
	return lo;
}

int ht_comm_cache_seed(struct ht_comm_cache *c, uint32_t pid, const char *comm)
{
	bool found;
	size_t i = seeded_index(c, pid, &found);

	if (!found) {
		if (c->nseeded >= c->seeded_cap) {
			size_t cap = c->seeded_cap ? c->seeded_cap * 2 : 64;
			struct ht_comm_name *p = realloc(c->seeded, cap * sizeof(*p));

			if (!p)
				return ht_fail("out of memory keeping task names");
			c->seeded = p;
			c->seeded_cap = cap;
		}
		memmove(&c->seeded[i + 1], &c->seeded[i], (c->nseeded - i) * sizeof(*c->seeded));
		c->nseeded++;
		c->seeded[i].pid = pid;
	}
	snprintf(c->seeded[i].comm, sizeof(c->seeded[i].comm), "%s", comm ? comm : "");
	return 0;
}

const char *ht_comm_lookup(struct ht_comm_cache *c, uint32_t pid, unsigned int cpu, char *buf,
			   size_t len)
{
	struct ht_comm_entry entry;
	unsigned int slot = pid % HT_COMM_CACHE_SLOTS;
	bool found;
	size_t i;

	if (pid == 0) {
		snprintf(buf, len, "swapper/%u", cpu);
		return buf;
	}
	/* The map knows every rename and exit since attach: it wins over the cache. */
	if (c->monitor && !ht_monitor_lookup_comm(c->monitor, pid, &entry)) {
		snprintf(buf, len, "%.*s", HT_COMM_LEN, entry.comm);
		return buf;
	}
	i = seeded_index(c, pid, &found);
	if (found) {
		snprintf(buf, len, "%s", c->seeded[i].comm);
		return buf;
	}
	if (c->offline) {
		snprintf(buf, len, "[exited]");
		return buf;
	}
	if (c->slots[slot].pid == pid) {
		snprintf(buf, len, "%s", c->slots[slot].comm);
		return buf;
	}
	if (ht_proc_thread_comm((int)pid, buf, len)) {
		snprintf(buf, len, "[exited]");
		return buf;
	}
	c->slots[slot].pid = pid;
	snprintf(c->slots[slot].comm, sizeof(c->slots[slot].comm), "%s", buf);
	return buf;
}
