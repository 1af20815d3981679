// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the Perfetto trace reader (userspace/trace/perfetto_read.c):
 * any input must give a timeline or an error message, never a crash, a
 * hang or unbounded memory. A timeline it accepts must also be one the
 * writer can write and the reader read back unchanged. The same bytes go
 * to the reader of native scheduling data (userspace/kernel/sched_read.c):
 * thread states or an error, and states only of the threads it names.
 */
#include <stdint.h>
#include <stdlib.h>

#include "kernel/sched_read.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "trace/timeline.h"

/* Whether TL survives a write and a read equal to itself. */
static int round_trips(const struct timeline *tl)
{
	char err[256];
	void *data;
	size_t len;
	struct timeline *back;
	int equal;

	/* A file may hold what the writer refuses (slices that do not nest): that is fine. */
	if (pftw_write_mem(tl, &data, &len, err, sizeof(err)))
		return 1;
	back = pftr_read_mem(data, len, NULL, err, sizeof(err));
	equal = back && tl_equal(tl, back, err, sizeof(err));
	free(data);
	tl_free(back);
	return equal;
}

/* Whether the native reader reads DATA into consistent states, or fails cleanly. */
static int native_sched_reads(const uint8_t *data, size_t size)
{
	struct ht_native_sched ns;
	size_t n = 0;

	if (ht_native_sched_read(data, size, 0, &ns))
		return !ns.nstates && !ns.states;
	for (size_t i = 0; i < ns.nstates; i++) {
		const struct ht_thread_state *first = ht_native_sched_thread(&ns, ns.states[i].tid, &n);

		if (!first || !n || first->tid != ns.states[i].tid)
			return 0;
	}
	ht_native_sched_free(&ns);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct timeline *tl;

	if (!native_sched_reads(data, size))
		abort();
	tl = pftr_read_mem(data, size, NULL, err, sizeof(err));

	if (!tl) {
		if (!err[0])
			abort(); /* every failure says why */
		return 0;
	}
	if (!round_trips(tl))
		abort();
	tl_free(tl);
	return 0;
}
