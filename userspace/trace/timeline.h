/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The timeline model: what every source lowers into (kernel window, PT,
 * samples, breakpoint hits) and what every output reads (the Perfetto
 * writer, the report). Tracks hold slices and instants; events carry
 * arguments, flows and interned call stacks; the timeline also keeps an
 * ordered list of metadata strings and one clock snapshot.
 *
 * Building: every builder call returns a negative errno on failure and also
 * records the first failure in the timeline (tl_error(), tl_strerror()), so
 * a caller may make many calls and check once. An event handle (long) that
 * is negative passes its error on: tl_event_arg_int(tl, ev, ...) with ev < 0
 * returns ev and does nothing, so calls chain without checks in between.
 *
 * Strings are interned: a tl_str is a small integer, 0 meaning "none", and
 * tl_str_get() gives the text, stable for the life of the timeline.
 *
 * Call stacks are interned too and list frames root first (outermost caller
 * first, the frame that was executing last), the order of Perfetto's
 * Callstack.frame_ids.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, the clock the kernel's records
 * and the perf events (use_clockid) are put on; a dump's clock snapshot
 * ties it to BOOTTIME and REALTIME.
 */
#ifndef HT_TIMELINE_H
#define HT_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits that keep one event small; the reader enforces them on files too. */
#define TL_MAX_ARGS   64   /* arguments per event (a breach says up to about 50) */
#define TL_MAX_FLOWS  32   /* flow ids per event and direction */
#define TL_MAX_FRAMES 1024 /* frames per call stack */

/*
 * The uuid of the "hybtrace" track: a global track, no parent, that holds
 * hybtrace's own events (the breach, the window). The Perfetto writer puts
 * the metadata there too, and writes the track itself when the timeline
 * has none.
 */
#define TL_HYBTRACE_UUID 0x6879627472616365ull /* "hybtrace" */

typedef uint32_t tl_str;

struct timeline;

enum tl_track_kind {
	TL_TRACK_GLOBAL = 0,	    /* a named track of its own, e.g. "hybtrace" */
	TL_TRACK_PROCESS = 1,	    /* pid */
	TL_TRACK_THREAD = 2,	    /* pid, tid; parent: its process track, if any */
	TL_TRACK_THREAD_KERNEL = 3, /* what the kernel did to a thread; parent: that thread */
	TL_TRACK_CPU = 4,	    /* cpu */
};

struct tl_track {
	uint64_t uuid;
	uint64_t parent_uuid; /* 0: none */
	enum tl_track_kind kind;
	tl_str name;
	/* Only the ids the kind uses are set; the rest are 0. */
	int32_t pid;
	int32_t tid;
	int32_t cpu;
};

/*
 * What tl_add_track() needs; uuid 0 lets the timeline pick an unused one.
 * A kernel track takes pid and tid from its parent thread track.
 */
struct tl_track_desc {
	enum tl_track_kind kind;
	uint64_t uuid;
	uint64_t parent_uuid;
	const char *name;
	int32_t pid;
	int32_t tid;
	int32_t cpu;
};

enum tl_event_kind {
	TL_EVENT_SLICE = 0,
	TL_EVENT_INSTANT = 1,
};

enum tl_arg_kind {
	TL_ARG_INT = 0,
	TL_ARG_UINT = 1,
	TL_ARG_DOUBLE = 2,
	TL_ARG_STR = 3,
};

/* A debug annotation: a name and one value. */
struct tl_arg {
	tl_str name;
	enum tl_arg_kind kind;
	union {
		int64_t i;
		uint64_t u;
		double d;
		tl_str s;
	};
	uint32_t next; /* the event's next argument, 0 at the end */
};

struct tl_flow {
	uint64_t id;
	uint32_t next; /* the event's next flow in the same direction, 0 at the end */
};

/* Lists hang off an event as first/last indices into the timeline's pools. */
struct tl_list {
	uint32_t first; /* 0: empty */
	uint32_t last;
	uint32_t count;
};

/* What an event has besides its name: most have nothing, so it lives apart. */
struct tl_event_lists {
	struct tl_list args;	  /* of struct tl_arg, in the order added */
	struct tl_list flows_out; /* of struct tl_flow: flows that start or pass here */
	struct tl_list flows_in;  /* of struct tl_flow: flows that end here */
};

/* 40 bytes: a PT dump holds millions. */
struct tl_event {
	uint64_t ts_ns;
	uint64_t dur_ns; /* 0 for instants */
	uint32_t track;	 /* index of the track */
	enum tl_event_kind kind;
	tl_str name;
	tl_str category;
	uint32_t callstack; /* 0: none */
	uint32_t lists;	    /* its struct tl_event_lists; 0: no arguments, no flows */
};

struct tl_frame {
	tl_str function; /* 0: unknown */
	tl_str module;	 /* 0: none (a path such as /usr/lib/libc.so.6 otherwise) */
	uint64_t address;
};

/* A frame as callers give it: strings may be NULL or "". */
struct tl_frame_desc {
	const char *function;
	const char *module;
	uint64_t address;
};

/* Readings of three clocks taken at (nearly) the same moment. */
struct tl_clock_snapshot {
	uint64_t boottime_ns;
	uint64_t monotonic_ns;
	uint64_t realtime_ns;
};

/* Lifecycle. */
struct timeline *tl_new(void);
void tl_free(struct timeline *tl);
/* First error a builder call hit (negative errno), or 0; and what it was. */
int tl_error(const struct timeline *tl);
const char *tl_strerror(const struct timeline *tl);

/* Strings. */
tl_str tl_intern(struct timeline *tl, const char *s);		    /* NULL or "" give 0 */
tl_str tl_intern_n(struct timeline *tl, const char *s, size_t len); /* stops at a NUL */
const char *tl_str_get(const struct timeline *tl, tl_str id);	    /* "" for 0 */
size_t tl_str_count(const struct timeline *tl);			    /* ids run 1..count */

/* Tracks: tl_add_track() returns the new track's index, or -errno. */
int tl_add_track(struct timeline *tl, const struct tl_track_desc *desc);
size_t tl_track_count(const struct timeline *tl);
const struct tl_track *tl_track(const struct timeline *tl, size_t index);
/* Index of the track with UUID, or -ENOENT. */
long tl_track_find(const struct timeline *tl, uint64_t uuid);
/*
 * The track of thread TID of PID, made (under PID's process track, if there
 * is one) when no source drew one.
 */
int tl_thread_track(struct timeline *tl, int pid, int tid);

/* Events: each returns the event's index (valid until tl_sort()), or -errno. */
long tl_add_slice(struct timeline *tl, int track, uint64_t ts_ns, uint64_t dur_ns, const char *name,
		  const char *category);
long tl_add_instant(struct timeline *tl, int track, uint64_t ts_ns, const char *name,
		    const char *category);
/* Either kind with interned strings (dur_ns must be 0 for an instant). */
long tl_add_event(struct timeline *tl, enum tl_event_kind kind, int track, uint64_t ts_ns,
		  uint64_t dur_ns, tl_str name, tl_str category);
/* Set a slice's end once it is known (a slice added with dur 0 and closed later). */
int tl_slice_end(struct timeline *tl, long ev, uint64_t end_ns);

int tl_event_arg_int(struct timeline *tl, long ev, const char *name, int64_t value);
int tl_event_arg_uint(struct timeline *tl, long ev, const char *name, uint64_t value);
int tl_event_arg_double(struct timeline *tl, long ev, const char *name, double value);
int tl_event_arg_str(struct timeline *tl, long ev, const char *name, const char *value);
/* Add ARG (interned name and value; arg->next is ignored). */
int tl_event_arg(struct timeline *tl, long ev, const struct tl_arg *arg);
int tl_event_flow_out(struct timeline *tl, long ev, uint64_t flow_id);
int tl_event_flow_in(struct timeline *tl, long ev, uint64_t flow_id);
/* Intern FRAMES (root first) and attach the call stack to the event. */
int tl_event_callstack(struct timeline *tl, long ev, const struct tl_frame_desc *frames, size_t n);
/* Attach an already interned call stack (0 removes it). */
int tl_event_set_callstack(struct timeline *tl, long ev, uint32_t callstack);

size_t tl_event_count(const struct timeline *tl);
const struct tl_event *tl_event(const struct timeline *tl, size_t index);
/* Every event, by index: valid until the next one is added. */
const struct tl_event *tl_events(const struct timeline *tl);
/* The event's arguments and flows; all empty when it has none. */
const struct tl_event_lists *tl_event_lists(const struct timeline *tl, const struct tl_event *e);
/* Pool entries named by those lists (index >= 1). */
const struct tl_arg *tl_arg(const struct timeline *tl, uint32_t index);
const struct tl_flow *tl_flow(const struct timeline *tl, uint32_t index);
/* Event E's argument called NAME, or NULL. */
const struct tl_arg *tl_event_find_arg(const struct timeline *tl, const struct tl_event *e,
				       const char *name);

/* Call stacks: ids run 1..count; 0 is "none". Returns the id or -errno. */
long tl_callstack_intern(struct timeline *tl, const struct tl_frame_desc *frames, size_t n);
long tl_callstack_intern_frames(struct timeline *tl, const struct tl_frame *frames, size_t n);
size_t tl_callstack_count(const struct timeline *tl);
size_t tl_callstack_depth(const struct timeline *tl, uint32_t callstack);
/* Frame I of the call stack, root first. */
const struct tl_frame *tl_callstack_frame(const struct timeline *tl, uint32_t callstack, size_t i);
/* Frames are interned as well; ids run 1..count. */
size_t tl_frame_count(const struct timeline *tl);
uint32_t tl_callstack_frame_id(const struct timeline *tl, uint32_t callstack, size_t i);
const struct tl_frame *tl_frame(const struct timeline *tl, uint32_t frame_id);

/* Metadata: an ordered list of key/value strings; setting a key again replaces its value. */
int tl_meta_set(struct timeline *tl, const char *key, const char *value);
size_t tl_meta_count(const struct timeline *tl);
const char *tl_meta_key(const struct timeline *tl, size_t index);
const char *tl_meta_value(const struct timeline *tl, size_t index);
const char *tl_meta_get(const struct timeline *tl, const char *key); /* NULL if unset */

/* The clock snapshot: NULL until one is set. */
void tl_set_clock_snapshot(struct timeline *tl, const struct tl_clock_snapshot *snap);
const struct tl_clock_snapshot *tl_clock_snapshot(const struct timeline *tl);
/* Read BOOTTIME, MONOTONIC and REALTIME as close together as the machine allows. */
int tl_clock_snapshot_now(struct tl_clock_snapshot *snap);

/*
 * Canonical order: by track uuid, then start time, then longer slices first
 * (so a parent precedes its children), slices before instants, then the
 * order they were added in (slices of equal span nest that way: add a
 * parent before its children, or see tl_reorder_nested()). tl_sort()
 * puts the events in that order (event indices change); tl_sorted_order()
 * gives the permutation without moving anything (free() it).
 */
int tl_sort(struct timeline *tl);
uint32_t *tl_sorted_order(const struct timeline *tl);
/*
 * Events from FIRST on, slices of one track added as they closed (children
 * first), rearranged into start order so that sorting them is cheap. Does
 * nothing when they are not all slices of one track. Event indices from
 * FIRST on change. Returns 0 or -ENOMEM.
 */
int tl_reorder_nested(struct timeline *tl, size_t first);

/*
 * Check that the slices of each track nest: a slice that starts inside
 * another ends inside it too (touching ends are fine), or Perfetto draws
 * them wrongly. (Tracks are checked as they are added.) Returns 0, or
 * -EINVAL with the first problem, naming both slices, in WHY.
 */
int tl_validate(const struct timeline *tl, char *why, size_t whylen);
/* The same with the canonical ORDER already at hand (tl_sorted_order()). */
int tl_validate_order(const struct timeline *tl, const uint32_t *order, char *why, size_t whylen);

/*
 * Make the slices of each track nest where two sources' clocks disagree: a
 * slice that starts inside another but ends after it starts at the other's
 * end instead (a start measured a few microseconds early is the usual
 * cause). Returns how many slices moved.
 */
size_t tl_untangle(struct timeline *tl);

/*
 * Whether A and B hold the same tracks (by uuid), events (in canonical
 * order, with equal arguments, flows and call stacks), metadata and clock
 * snapshot. When they differ, WHY says where first.
 */
bool tl_equal(const struct timeline *a, const struct timeline *b, char *why, size_t whylen);

/* "global", "process", "thread", "thread_kernel" or "cpu". */
const char *tl_track_kind_name(enum tl_track_kind kind);

#endif /* HT_TIMELINE_H */
