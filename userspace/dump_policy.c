// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "dump_policy.h"

enum ht_dump_decision ht_dump_decide(const struct ht_dump_policy *p, const struct ht_dump_tally *t,
				     uint64_t now_ns, bool asked)
{
	if (t->dumps >= p->max_dumps)
		return HT_DUMP_SKIP_COUNT;
	if (t->disk_bytes >= p->max_disk_bytes)
		return HT_DUMP_SKIP_DISK;
	if (t->busy)
		return HT_DUMP_DEFER_BUSY;
	if (!asked && t->last_dump_ns && now_ns - t->last_dump_ns < p->min_interval_ns)
		return HT_DUMP_SKIP_INTERVAL;
	return HT_DUMP_NOW;
}

const char *ht_dump_decision_reason(enum ht_dump_decision d)
{
	switch (d) {
	case HT_DUMP_NOW:
		return "dumping";
	case HT_DUMP_DEFER_BUSY:
		return "a dump is being written";
	case HT_DUMP_SKIP_INTERVAL:
		return "min-interval";
	case HT_DUMP_SKIP_COUNT:
		return "max-dumps reached";
	case HT_DUMP_SKIP_DISK:
		return "max-disk used up";
	}
	return "?";
}
