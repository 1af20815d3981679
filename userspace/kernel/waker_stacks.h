/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The wakers' stacks the monitor sent (struct ht_waker_stack), kept until
 * the breach that names each by seq arrives: it comes right after its own,
 * so the last few are enough. Filled by the ring's callback, read by the
 * event loop: one thread.
 */
#ifndef HT_WAKER_STACKS_H
#define HT_WAKER_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

#define HT_WAKER_STACKS_KEPT 64

struct ht_waker_stacks {
	struct ht_waker_stack kept[HT_WAKER_STACKS_KEPT]; /* by seq modulo the count */
	uint64_t received, malformed;
};

/* ring_buffer_sample_fn: CTX is a struct ht_waker_stacks. */
int ht_waker_stacks_on_record(void *ctx, void *data, size_t size);

/* The stacks of seq SEQ, if still kept: NULL when gone (or never sent). */
const struct ht_waker_stack *ht_waker_stacks_find(const struct ht_waker_stacks *w, uint32_t seq);

struct ht_ksyms;

/*
 * The first frame of WS's kernel stack that is the waker's own: taken
 * from a tracepoint's BPF program, it begins with the program and the
 * tracing code that ran it, up to bpf_trace_run*. 0 when KSYMS cannot tell.
 */
int ht_waker_stack_kernel_start(const struct ht_waker_stack *ws, const struct ht_ksyms *ksyms);

#endif /* HT_WAKER_STACKS_H */
