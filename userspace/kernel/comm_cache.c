// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/comm_cache.h"
#include "base/log.h"
#include "kernel/monitor.h"
#include "base/proc.h"
#include "base/partition.h"

void ht_comm_cache_init(struct ht_comm_cache *c, const struct ht_monitor *m)
{
	memset(c, 0, sizeof(*c));
	c->monitor = m;
}

void ht_comm_cache_free(struct ht_comm_cache *c)
{
	const struct ht_monitor *m = c->monitor;

	free(c->seeded);
	free(c->seeded_tgids);
	ht_comm_cache_init(c, m);
}

int ht_comm_cache_seed(struct ht_comm_cache *c, uint32_t pid, const char *comm)
{
	return ht_pid_name_set(&c->seeded, &c->nseeded, &c->seeded_cap, pid, comm, true);
}

/* Where TID is among the seeded processes, or where it would go (*FOUND says which). */
static size_t seeded_tgid_index(const struct ht_comm_cache *c, uint32_t tid, bool *found)
{
	size_t lo = HT_PARTITION_POINT(0, c->nseeded_tgids, i, c->seeded_tgids[i].tid < tid);

	*found = lo < c->nseeded_tgids && c->seeded_tgids[lo].tid == tid;
	return lo;
}

int ht_comm_cache_seed_tgid(struct ht_comm_cache *c, uint32_t tid, uint32_t tgid)
{
	bool found;
	size_t i = seeded_tgid_index(c, tid, &found);

	if (!found) {
		if (c->nseeded_tgids == c->seeded_tgids_cap) {
			size_t cap = c->seeded_tgids_cap ? 2 * c->seeded_tgids_cap : 16;
			struct ht_comm_task *v = realloc(c->seeded_tgids, cap * sizeof(*v));

			if (!v)
				return ht_fail("out of memory");
			c->seeded_tgids = v;
			c->seeded_tgids_cap = cap;
		}
		memmove(&c->seeded_tgids[i + 1], &c->seeded_tgids[i],
			(c->nseeded_tgids - i) * sizeof(c->seeded_tgids[0]));
		c->nseeded_tgids++;
	}
	c->seeded_tgids[i] = (struct ht_comm_task){ tid, tgid };
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
	i = ht_pid_name_index(c->seeded, c->nseeded, pid, &found);
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
	/*
	 * The task's comm as the kernel keeps it (and as the comm map, the raw
	 * capture and ftrace name it): /proc adds a workqueue worker's queue
	 * ("kworker/u8:5-writeback"), which would name one task two ways.
	 */
	if (len >= HT_COMM_LEN)
		buf[HT_COMM_LEN - 1] = '\0';
	c->slots[slot].pid = pid;
	snprintf(c->slots[slot].comm, sizeof(c->slots[slot].comm), "%s", buf);
	return buf;
}

uint32_t ht_comm_tgid(struct ht_comm_cache *c, uint32_t tid)
{
	unsigned int slot = tid % HT_COMM_CACHE_SLOTS;
	struct ht_comm_entry entry;
	bool found;
	size_t i;
	int tgid;

	if (tid == 0)
		return 0;
	if (c->monitor && !ht_monitor_lookup_comm(c->monitor, tid, &entry) && entry.tgid)
		return entry.tgid;
	i = seeded_tgid_index(c, tid, &found);
	if (found)
		return c->seeded_tgids[i].tgid;
	if (c->offline)
		return 0;
	if (c->tgid_slots[slot].tid == tid)
		return c->tgid_slots[slot].tgid;
	if (ht_proc_tgid((int)tid, &tgid) || tgid <= 0)
		return 0;
	c->tgid_slots[slot].tid = tid;
	c->tgid_slots[slot].tgid = (uint32_t)tgid;
	return (uint32_t)tgid;
}

const char *ht_comm_name(void *cache, uint32_t tid, char *buf, size_t len)
{
	return ht_comm_lookup(cache, tid, 0, buf, len);
}
