// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "kernel/proc_hists.h"

/* The programs add with atomic adds and take slots with compare-and-swap: so do we. */
void ht_proc_hist_read(const struct ht_proc_hist *h, struct ht_proc_hist_counts *out)
{
	for (unsigned int k = 0; k < HT_PROC_HIST_KINDS; k++)
		for (unsigned int i = 0; i < HT_HIST_SLOTS; i++)
			out->slots[k][i] = __atomic_load_n(&h->slots[k][i], __ATOMIC_RELAXED);
}

uint32_t ht_proc_hist_owner(const struct ht_proc_hist *h, bool *gone)
{
	uint64_t owner = __atomic_load_n(&h->owner, __ATOMIC_ACQUIRE);

	*gone = owner & HT_PROC_HIST_GONE;
	return (uint32_t)owner;
}

const struct ht_proc_hist *ht_proc_hists_find(const struct ht_proc_hist *v, unsigned int nslots,
					      uint32_t tgid)
{
	for (uint32_t i = 0; i < HT_PROC_HIST_PROBES && nslots; i++) {
		const struct ht_proc_hist *h = &v[(tgid + i) & (nslots - 1)];

		if (__atomic_load_n(&h->owner, __ATOMIC_ACQUIRE) == tgid)
			return h;
	}
	return NULL;
}

unsigned int ht_proc_hists_take_gone(struct ht_proc_hist *v, unsigned int nslots,
				     void (*fn)(void *ctx, uint32_t tgid,
						const struct ht_proc_hist_counts *counts),
				     void *ctx)
{
	struct ht_proc_hist_counts counts;
	unsigned int taken = 0;

	for (unsigned int i = 0; i < nslots; i++) {
		struct ht_proc_hist *h = &v[i];
		bool gone;
		uint32_t tgid = ht_proc_hist_owner(h, &gone);

		if (!gone)
			continue;
		/* No program adds to it now: its owner matches no process. */
		ht_proc_hist_read(h, &counts);
		fn(ctx, tgid, &counts);
		for (unsigned int k = 0; k < HT_PROC_HIST_KINDS; k++)
			for (unsigned int s = 0; s < HT_HIST_SLOTS; s++)
				__atomic_store_n(&h->slots[k][s], 0, __ATOMIC_RELAXED);
		/* Zeroed before it is free: the next process starts from nothing. */
		__atomic_store_n(&h->owner, 0, __ATOMIC_RELEASE);
		taken++;
	}
	return taken;
}
