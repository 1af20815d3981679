// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the Perfetto trace reader (userspace/trace/perfetto_read.c):
 * any input must give a timeline or an error message, never a crash, a
 * hang or unbounded memory. A timeline it accepts must also be one the
 * writer can write and the reader read back unchanged.
 */
#include <stdint.h>
#include <stdlib.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct timeline *tl = pftr_read_mem(data, size, NULL, err, sizeof(err));

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
