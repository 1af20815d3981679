/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Timeline -> Perfetto trace file: a protobuf `Trace`, one TracePacket
 * after another, TrackEvent packets with interned names, categories,
 * argument names and call stacks on one packet sequence, the track
 * descriptors on a second one.
 *
 * What a file holds, in order:
 *  1. A packet that clears the sequence's incremental state and declares,
 *     through TracePacketDefaults, that timestamps are CLOCK_MONOTONIC.
 *  2. A ClockSnapshot: BOOTTIME, MONOTONIC and REALTIME readings when the
 *     timeline has a snapshot, and primary_trace_clock = MONOTONIC, so the
 *     Perfetto UI shows the same nanoseconds hybtrace prints.
 *  3. TrackDescriptors: process and thread tracks carry Process/Thread
 *     descriptors; kernel, CPU and global tracks are plain named tracks
 *     (a kernel track is a child of its thread's track). They go on their
 *     own sequence, which never has incremental state: a thread descriptor
 *     on the events' sequence would make Perfetto attribute every event of
 *     a global track (a CPU's, hybtrace's) to that thread.
 *  4. Two instants at the first event's time on the "hybtrace" track (uuid
 *     TL_HYBTRACE_UUID; the writer describes it when the timeline has no
 *     such track): "metadata", whose debug annotations are the metadata
 *     keys and values in order, and "track kinds", whose annotations
 *     "<uuid>" = "thread_kernel", "cpu <n>" or "global" say what Perfetto's
 *     descriptors cannot: kernel and CPU tracks, and that the hybtrace
 *     track belongs to the timeline. Both show as ordinary arguments in
 *     the UI. Their names are written inline, never interned (the
 *     timeline's own events always are), so a reader tells them apart and
 *     finds them in one pass, before it has any interning state. Each is
 *     left out when it would be empty.
 *  5. The events in time order: a slice becomes SLICE_BEGIN and SLICE_END
 *     (nested properly: at one time, ends come before begins, a parent
 *     begins before its children and a child ends before its parent); an
 *     instant is TYPE_INSTANT. Perfetto keeps file order among points of
 *     one time, so there the point that begins a flow comes before the
 *     point that terminates it, across tracks and along chains of flows
 *     (within one track the canonical order rules: a flow that ends on an
 *     event placed before its begin, at the same time, stays lost). Arguments,
 *     flows and the call stack ride on the begin. Interned entries appear
 *     in the packet that first uses them, as Perfetto's SDK does; the iids
 *     are the timeline's own string, frame and call-stack ids. A call
 *     stack is an interned Callstack of Frames, root first; each Frame has
 *     a function name, rel_pc = the frame's address, and a Mapping, since
 *     Perfetto drops frames without one: the module's path as the
 *     mapping's single path part, or a mapping without a path.
 *
 * Every function validates the timeline first (tl_validate()) and writes
 * nothing but the message into ERR when it fails.
 */
#ifndef HT_PERFETTO_WRITE_H
#define HT_PERFETTO_WRITE_H

#include <stddef.h>
#include <stdio.h>

#include "trace/timeline.h"

/*
 * Field numbers and enum values, checked against Perfetto's protos/perfetto
 * (trace/trace.proto, trace_packet.proto, trace_packet_defaults.proto,
 * clock_snapshot.proto, common/builtin_clock.proto,
 * interned_data/interned_data.proto, profiling/profile_common.proto and
 * track_event/{track_event,track_descriptor,process_descriptor,
 * thread_descriptor,debug_annotation}.proto). The reader shares them.
 */
enum pft_field {
	PFT_TRACE_PACKET = 1,

	PFT_PACKET_CLOCK_SNAPSHOT = 6,
	PFT_PACKET_TIMESTAMP = 8,
	PFT_PACKET_SEQUENCE_ID = 10, /* trusted_packet_sequence_id */
	PFT_PACKET_TRACK_EVENT = 11,
	PFT_PACKET_INTERNED_DATA = 12,
	PFT_PACKET_SEQUENCE_FLAGS = 13,
	PFT_PACKET_INCREMENTAL_STATE_CLEARED = 41, /* bool, older writers */
	PFT_PACKET_PREVIOUS_PACKET_DROPPED = 42,
	PFT_PACKET_TIMESTAMP_CLOCK_ID = 58,
	PFT_PACKET_DEFAULTS = 59, /* trace_packet_defaults */
	PFT_PACKET_TRACK_DESCRIPTOR = 60,

	PFT_DEFAULTS_TRACK_EVENT_DEFAULTS = 11,
	PFT_DEFAULTS_TIMESTAMP_CLOCK_ID = 58,
	PFT_TRACK_EVENT_DEFAULTS_TRACK_UUID = 11,

	PFT_CLOCK_SNAPSHOT_CLOCKS = 1,
	PFT_CLOCK_SNAPSHOT_PRIMARY_TRACE_CLOCK = 2,
	PFT_CLOCK_ID = 1,
	PFT_CLOCK_TIMESTAMP = 2,

	PFT_TRACK_UUID = 1,
	PFT_TRACK_NAME = 2,
	PFT_TRACK_PROCESS = 3,
	PFT_TRACK_THREAD = 4,
	PFT_TRACK_PARENT_UUID = 5,
	PFT_TRACK_STATIC_NAME = 10,
	PFT_PROCESS_PID = 1,
	PFT_PROCESS_NAME = 6,
	PFT_THREAD_PID = 1,
	PFT_THREAD_TID = 2,
	PFT_THREAD_NAME = 5,

	PFT_EVENT_CATEGORY_IIDS = 3,
	PFT_EVENT_DEBUG_ANNOTATIONS = 4,
	PFT_EVENT_TYPE = 9,
	PFT_EVENT_NAME_IID = 10,
	PFT_EVENT_TRACK_UUID = 11,
	PFT_EVENT_CATEGORIES = 22, /* string, not interned */
	PFT_EVENT_NAME = 23,	   /* string, not interned */
	PFT_EVENT_FLOW_IDS_OLD = 36,
	PFT_EVENT_TERMINATING_FLOW_IDS_OLD = 42,
	PFT_EVENT_FLOW_IDS = 47,	     /* repeated fixed64 */
	PFT_EVENT_TERMINATING_FLOW_IDS = 48, /* repeated fixed64 */
	PFT_EVENT_CALLSTACK_IID = 56,

	PFT_ANNOTATION_NAME_IID = 1,
	PFT_ANNOTATION_BOOL = 2,
	PFT_ANNOTATION_UINT = 3,
	PFT_ANNOTATION_INT = 4,
	PFT_ANNOTATION_DOUBLE = 5, /* fixed64 */
	PFT_ANNOTATION_STRING = 6,
	PFT_ANNOTATION_POINTER = 7,
	PFT_ANNOTATION_NAME = 10,

	PFT_INTERNED_EVENT_CATEGORIES = 1,
	PFT_INTERNED_EVENT_NAMES = 2,
	PFT_INTERNED_ANNOTATION_NAMES = 3,
	PFT_INTERNED_FUNCTION_NAMES = 5,
	PFT_INTERNED_FRAMES = 6,
	PFT_INTERNED_CALLSTACKS = 7,
	PFT_INTERNED_MAPPING_PATHS = 17,
	PFT_INTERNED_MAPPINGS = 19,
	/* EventName, EventCategory, DebugAnnotationName and InternedString alike */
	PFT_INTERNED_IID = 1,
	PFT_INTERNED_STRING = 2,

	PFT_MAPPING_IID = 1,
	PFT_MAPPING_PATH_STRING_IDS = 7,
	PFT_FRAME_IID = 1,
	PFT_FRAME_FUNCTION_NAME_ID = 2,
	PFT_FRAME_MAPPING_ID = 3,
	PFT_FRAME_REL_PC = 4,
	PFT_CALLSTACK_IID = 1,
	PFT_CALLSTACK_FRAME_IDS = 2,
};

enum pft_value {
	PFT_SEQ_INCREMENTAL_STATE_CLEARED = 1,
	PFT_SEQ_NEEDS_INCREMENTAL_STATE = 2,

	PFT_CLOCK_REALTIME = 1,
	PFT_CLOCK_MONOTONIC = 3,
	PFT_CLOCK_BOOTTIME = 6,

	PFT_TYPE_SLICE_BEGIN = 1,
	PFT_TYPE_SLICE_END = 2,
	PFT_TYPE_INSTANT = 3,
};

/* Names of the instants on the "hybtrace" track (see item 4 above). */
#define PFTW_META_EVENT	       "metadata"
#define PFTW_TRACK_KINDS_EVENT "track kinds"

/* Write the trace into a malloc()ed buffer (*data, *len); free() it. Returns 0 or -errno. */
int pftw_write_mem(const struct timeline *tl, void **data, size_t *len, char *err, size_t errlen);
/* Write the trace to an open file descriptor or stream. Returns 0 or -errno. */
int pftw_write_fd(const struct timeline *tl, int fd, char *err, size_t errlen);
int pftw_write_stream(const struct timeline *tl, FILE *stream, char *err, size_t errlen);
/*
 * Write the trace to PATH through a temporary file in the same directory
 * that is renamed over PATH only once it is complete. Returns 0 or -errno.
 */
int pftw_write_path(const struct timeline *tl, const char *path, char *err, size_t errlen);

#endif /* HT_PERFETTO_WRITE_H */
