/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Perfetto trace file -> timeline model: the reader behind `hybtrace
 * report`. It reads what perfetto_write.c writes back into an equal
 * timeline (tl_equal()), and reads other TrackEvent traces as far as the
 * model can hold them: process, thread and named tracks, slices from
 * SLICE_BEGIN/SLICE_END pairs, instants, debug annotations, flows, interned
 * call stacks, interned data and incremental state per packet sequence.
 * Timestamps are taken as they are, in whatever clock the file used.
 *
 * What it skips, and counts in struct pftr_stats: packets of other kinds
 * (ftrace, process stats, ...), counter events, events on undescribed
 * tracks or whose sequence lost its incremental state, annotations with
 * nested values, and arguments, flows or frames beyond the model's limits.
 * Flows follow Perfetto's importer, which takes events by time and then
 * file order: a terminating flow id whose flow has not begun by then (or
 * has ended) is dropped, as Perfetto drops it, so what the reader gives is
 * what the Perfetto UI shows.
 *
 * What it refuses, with one line in ERR and NULL returned: input that is
 * not a protobuf Trace (empty, ELF, gzip, text, random bytes), truncated or
 * malformed protobuf, a SLICE_END with no slice open, a slice that never
 * ends, an iid that was never interned. Input never makes it read out of
 * bounds, loop without end, or allocate more than a small multiple of the
 * input's size.
 */
#ifndef HT_PERFETTO_READ_H
#define HT_PERFETTO_READ_H

#include <stddef.h>
#include <stdint.h>

#include "trace/timeline.h"

/* The most a trace file may hold: the reader keeps it all in memory. */
#define PFTR_MAX_FILE_BYTES (1ull << 30)
/* Packet sequences (writers) one trace may use. */
#define PFTR_MAX_SEQUENCES 4096

struct pftr_stats {
	uint64_t packets;	  /* TracePackets read */
	uint64_t events;	  /* TrackEvents that became slices and instants */
	uint64_t skipped_packets; /* packets carrying nothing the model holds */
	uint64_t skipped_events;  /* counters, events on unknown tracks or with lost state */
	uint64_t skipped_details; /* annotations, flows, call stacks the model cannot hold */
	uint64_t flows_begun;	  /* flow ids that began a flow, as Perfetto imports them */
	uint64_t flow_ends_dropped; /* terminating flow ids of flows not begun: Perfetto drops them */
};

/* Read a trace from memory. STATS may be NULL. Returns a new timeline or NULL. */
struct timeline *pftr_read_mem(const void *data, size_t len, struct pftr_stats *stats, char *err,
			       size_t errlen);
/*
 * The bytes of trace file PATH (at most PFTR_MAX_FILE_BYTES) into *DATA (freed
 * by the caller), for readers of other parts of the same file. 0, or -1 with
 * a message naming PATH in ERR.
 */
int pftr_read_file(const char *path, uint8_t **data, size_t *len, char *err, size_t errlen);
/* Read a trace file; messages start with PATH. */
struct timeline *pftr_read_path(const char *path, struct pftr_stats *stats, char *err,
				size_t errlen);

#endif /* HT_PERFETTO_READ_H */
