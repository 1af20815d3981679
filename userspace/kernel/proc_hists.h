/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The monitor's per-process histograms (struct ht_proc_hist in records.h),
 * read from their mapped array: NSLOTS slots, then the rest's. A slot
 * belongs to a process from its first judged interval until user space
 * takes its counts once the kernel marked it gone; the programs add while
 * user space reads.
 */
#ifndef HT_PROC_HISTS_H
#define HT_PROC_HISTS_H

#include <stdbool.h>
#include <stdint.h>
#include "hybtrace/records.h"

/* A process's histograms: a row of HT_HIST_SLOTS log2(us) buckets per kind, row kind - 1. */
struct ht_proc_hist_counts {
	uint64_t slots[HT_PROC_HIST_KINDS][HT_HIST_SLOTS];
};

/* H's counts into OUT. */
void ht_proc_hist_read(const struct ht_proc_hist *h, struct ht_proc_hist_counts *out);

/* The owner of H: its tgid, 0 for none; *GONE whether its process has exited. */
uint32_t ht_proc_hist_owner(const struct ht_proc_hist *h, bool *gone);

/*
 * The slot of live process TGID, found as the programs find it (from tgid
 * modulo NSLOTS, HT_PROC_HIST_PROBES of them), or NULL.
 */
const struct ht_proc_hist *ht_proc_hists_find(const struct ht_proc_hist *v, unsigned int nslots,
					      uint32_t tgid);

/*
 * Each slot whose process is gone: FN gets its tgid and counts, then the
 * slot is zeroed and freed for the next process. Returns how many.
 */
unsigned int ht_proc_hists_take_gone(struct ht_proc_hist *v, unsigned int nslots,
				     void (*fn)(void *ctx, uint32_t tgid,
						const struct ht_proc_hist_counts *counts),
				     void *ctx);

#endif /* HT_PROC_HISTS_H */
