/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* When a breach may become a dump: rate, count and disk limits. */
#ifndef HT_DUMP_POLICY_H
#define HT_DUMP_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct ht_dump_policy {
	uint64_t min_interval_ns; /* between the starts of two dumps */
	unsigned int max_dumps;	  /* 0: never dump */
	uint64_t max_disk_bytes;  /* all dumps of this session together */
};

struct ht_dump_tally {
	uint64_t last_dump_ns; /* 0: none yet */
	unsigned int dumps;
	uint64_t disk_bytes;
	bool busy; /* a dump is being written */
};

enum ht_dump_decision {
	HT_DUMP_NOW,
	HT_DUMP_DEFER_BUSY,	/* a dump is in progress: this one may follow it */
	HT_DUMP_SKIP_INTERVAL,	/* the previous dump is too recent */
	HT_DUMP_SKIP_COUNT,	/* --max-dumps reached (or 0) */
	HT_DUMP_SKIP_DISK,	/* --max-disk used up */
};

/*
 * Decide for a dump requested at NOW_NS. A manual or exit dump (ASKED) is
 * not held to the minimum interval but still to the count and disk limits.
 */
enum ht_dump_decision ht_dump_decide(const struct ht_dump_policy *p, const struct ht_dump_tally *t,
				     uint64_t now_ns, bool asked);

/* "min-interval", "max-dumps", ... for messages. */
const char *ht_dump_decision_reason(enum ht_dump_decision d);

#endif /* HT_DUMP_POLICY_H */
