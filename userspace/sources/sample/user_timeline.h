/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Sampled stacks lowered into the timeline: per thread, consecutive samples
 * that share a stack prefix become nested slices on the thread's track, a
 * flame chart of its time. A slice runs from its first sample to its last
 * sample plus one period, with the sample count as an argument; a gap of
 * more than two periods (the thread was off the CPU) ends every slice.
 */
#ifndef HT_USER_TIMELINE_H
#define HT_USER_TIMELINE_H

#include <stdint.h>
#include "hybtrace/records.h"
#include "sources/sample/sampler.h"

struct timeline;
struct ht_symbolizer_set;
struct ht_ksyms;
struct ht_comm_cache;

struct ht_user_window {
	uint64_t t0, t1;
	uint64_t period_ns;
	const struct ht_sample_set *samples; /* time order, of any target process */
	/*
	 * User frames, by the symbolizer of each sample's process; NULL:
	 * addresses. With dwarf, each process's unwinder too; else the samples'
	 * frame-pointer chains.
	 */
	struct ht_symbolizer_set *symbols;
	bool dwarf;
	const struct ht_ksyms *ksyms;	/* kernel frames; NULL: addresses */
	struct ht_comm_cache *comms;	/* names the process track a thread needs; NULL: "pid N" */
	const struct ht_breach *breach; /* its thread gets stacks before and after */
};

/* Add the samples' slices to TL. Returns 0, or -1 with ht_last_error(). */
int ht_user_timeline_build(struct timeline *tl, const struct ht_user_window *uw);

#endif /* HT_USER_TIMELINE_H */
