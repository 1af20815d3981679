/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: flight-recorder windows built by hand, and their lowering into
 * a timeline, for the tests of the kernel side and of what reads its
 * timelines (test_kernel_timeline.c, test_report.c, test_dump_build.c,
 * test_culprits.c).
 */
#ifndef HT_WINDOW_FIXTURES_H
#define HT_WINDOW_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kernel/kernel_timeline.h"
#include "kernel/recorder.h"
#include "trace/pb.h"
#include "trace/timeline.h"

/* One record as the BPF side writes it, read on CPU; its sequence number 0. */
struct ht_fr_event fx_fr_event(unsigned int cpu, uint64_t ts_ns, uint8_t kind, uint8_t flags,
			       uint32_t tid_a, uint32_t tid_b, uint16_t aux, uint64_t arg);

/*
 * The window T0..T1 over COUNT EVENTS on two CPUs, with no switch known
 * before T0 on either (its entry arrays are shared and all zero: a test
 * that sets what ran at T0 brings its own).
 */
struct ht_fr_window fx_fr_window(struct ht_fr_event *events, size_t count, uint64_t t0,
				 uint64_t t1);

/*
 * KW's window lowered into TL as the dump builder lowers it: its scheduling
 * index built, the kernel timeline built on it (KW's idx is set for the
 * call), the index freed. 0, or -1 with the step that failed printed.
 */
int fx_kernel_timeline_lower(struct timeline *tl, struct ht_kernel_window *kw);

/*
 * KW's window as the dump builder adds it to a dump: lowered as above with
 * the clock snapshot BOOTTIME = MONOTONIC + 500 ns set on TL, then its
 * native scheduling data (kernel/sched_ftrace.h) into NATIVE, to follow
 * TL's own packets in the file. 0, or -1 with the step that failed printed.
 */
int fx_dump_lower(struct timeline *tl, struct ht_kernel_window *kw, struct pb_buf *native);

/* The N-th event named NAME on the kernel track of thread TID, or NULL. */
const struct tl_event *fx_kernel_event(const struct timeline *tl, uint32_t tid, const char *name,
				       int n);

/* Whether event E (may be NULL) has the text argument NAME equal to WANT. */
bool fx_arg_is(const struct timeline *tl, const struct tl_event *e, const char *name,
	       const char *want);

#endif /* HT_WINDOW_FIXTURES_H */
