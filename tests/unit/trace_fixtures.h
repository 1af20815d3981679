/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: timelines and files for the tests of the Perfetto writer and
 * reader (test_perfetto_write.c, test_perfetto_read.c).
 */
#ifndef HT_TRACE_FIXTURES_H
#define HT_TRACE_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/timeline.h"

int fx_add_track(struct timeline *tl, enum tl_track_kind kind, const char *name, uint64_t parent,
		 int32_t pid, int32_t tid, int32_t cpu);
uint64_t fx_uuid_of(const struct timeline *tl, int track);

/* A timeline with every kind of track, argument, flow and call stack the model has. */
struct timeline *fx_make_rich(void);

/* Whether A and B are equal; when not, why is printed (a test's continuation line). */
bool fx_same(const struct timeline *a, const struct timeline *b);

/* CLOCK_MONOTONIC in seconds. */
double fx_now_s(void);

/* PATH in a directory of this run's own, removed at exit (tests unlink their files); free() it. */
char *fx_tmp_path(const char *name);

#endif /* HT_TRACE_FIXTURES_H */
