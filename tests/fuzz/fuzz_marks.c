// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the user-mark reader (userspace/sources/marks/marks.c): the input
 * is a target's memory, mapped at 0x10000 with the registry at its start,
 * read through the same callback the live reader uses. Any input parses
 * without a crash, reads no more than its budget, and every mark it keeps
 * is in the window with a sane name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources/marks/marks.h"

#define BASE   0x10000ULL
#define BUDGET (64u << 10)

struct image {
	const uint8_t *data;
	size_t size;
	unsigned int reads;
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *im = ctx;

	im->reads++;
	if (addr < BASE || addr - BASE > im->size || len > im->size - (addr - BASE))
		return -1;
	memcpy(buf, im->data + (addr - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = {data, size, 0};
	/* TSC and CLOCK_MONOTONIC one to one; the window leaves out the first microsecond. */
	struct ht_marks_window w = {.t0_ns = 1000,
				    .t1_ns = UINT64_MAX - 1,
				    .a = {0, 0},
				    .b = {1u << 20, 1u << 20},
				    .budget_bytes = BUDGET};
	struct ht_mark_set set = {0};

	if (ht_marks_parse(image_read, &im, BASE, &w, &set) && set.count)
		abort(); /* rejected whole: nothing kept */
	if (set.bytes_read > BUDGET || set.count > BUDGET / 32)
		abort();
	for (size_t i = 0; i < set.count; i++) {
		const struct ht_mark *m = &set.v[i];

		if (m->time_ns < w.t0_ns || m->time_ns > w.t1_ns || m->tid <= 0)
			abort();
		if (m->name && strnlen(m->name, HT_MARK_NAME_LEN) >= HT_MARK_NAME_LEN)
			abort();
	}
	ht_mark_set_free(&set);
	return 0;
}
