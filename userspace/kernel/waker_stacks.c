// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "kernel/waker_stacks.h"
#include "symbols/ksyms.h"

int ht_waker_stacks_on_record(void *ctx, void *data, size_t size)
{
	struct ht_waker_stacks *w = ctx;
	struct ht_waker_stack ws;

	if (size < sizeof(ws) || !((const struct ht_waker_stack *)data)->seq) {
		w->malformed++;
		return 0;
	}
	memcpy(&ws, data, sizeof(ws));
	w->kept[ws.seq % HT_WAKER_STACKS_KEPT] = ws;
	w->received++;
	return 0;
}

const struct ht_waker_stack *ht_waker_stacks_find(const struct ht_waker_stacks *w, uint32_t seq)
{
	const struct ht_waker_stack *ws = &w->kept[seq % HT_WAKER_STACKS_KEPT];

	return seq && ws->seq == seq ? ws : NULL;
}

int ht_waker_stack_kernel_start(const struct ht_waker_stack *ws, const struct ht_ksyms *ksyms)
{
	int frames = ws->kstack_bytes > 0 ? ws->kstack_bytes / (int)sizeof(uint64_t) : 0;
	const char *name;
	uint64_t start;

	if (frames > HT_WAKER_STACK_DEPTH)
		frames = HT_WAKER_STACK_DEPTH;
	/* A few frames in: the program's own, a trampoline's, __bpf_trace_*, bpf_trace_run*. */
	for (int i = 0; i < frames && i < 6; i++) {
		name = ht_ksyms_find(ksyms, ws->kstack[i], &start);
		if (name && !strncmp(name, "bpf_trace_run", strlen("bpf_trace_run")))
			return i + 1;
	}
	return 0;
}
