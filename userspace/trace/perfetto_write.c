// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Timeline -> Perfetto TrackEvent protobuf: see perfetto_write.h for the layout. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/pb.h"
#include "base/partition.h"
#include "trace/perfetto_write.h"

/* Any sequence id but 1, which Perfetto's tracing service uses for its own packets. */
#define PFTW_SEQUENCE_ID 2
/*
 * The track descriptors go on a sequence of their own that never clears
 * incremental state: Perfetto makes every thread descriptor on a sequence
 * with valid state that sequence's legacy thread, and gives events on
 * global tracks of that sequence legacy_event.passthrough_utid of it
 * (track_event_tokenizer.cc, track_event_event_importer.h).
 */
#define PFTW_DESCRIPTOR_SEQUENCE_ID 3
/* Longer chains of flows at one time than this are cut (only cycles reach it). */
#define PFTW_MAX_FLOW_RANK 64
/* Frames without a module still need a mapping; its iid lies above every string id. */
#define PFTW_NO_MODULE_MAPPING (1ull << 32)
/* Hand the encoded bytes to the file whenever this much has piled up. */
#define PFTW_FLUSH_BYTES (1024 * 1024)

/* Which interning tables a string has already been sent to, as bits. */
enum pftw_sent {
	PFTW_SENT_CATEGORY = 1 << 0,
	PFTW_SENT_NAME = 1 << 1,
	PFTW_SENT_ANNOTATION = 1 << 2,
	PFTW_SENT_FUNCTION = 1 << 3,
	PFTW_SENT_MAPPING = 1 << 4,
};

/*
 * One begin, end or instant. Among points of one time, lower ranks go
 * first: a point's rank is above that of every point that begins a flow it
 * terminates, and never below the rank of the point before it on its track.
 */
struct pftw_point {
	uint64_t ts_ns;
	uint32_t rank;
	uint32_t event;
	uint8_t type; /* PFT_TYPE_* */
};

/*
 * One track's begins, ends and instants, made one at a time as the file is
 * written: its events in canonical order, and the slices open on it.
 */
struct pftw_stream {
	const uint32_t *order;
	size_t first;	 /* where ORDER starts in the canonical order */
	size_t n, next;	 /* the track's events; the next to begin */
	uint32_t *stack; /* open slices, innermost last; room for n */
	size_t depth;
	struct pftw_point point; /* the stream's next point */
};

typedef int (*pftw_flush_fn)(void *ctx, const void *data, size_t len);

struct pftw {
	const struct timeline *tl;
	struct pb_buf out;
	uint8_t *str_sent; /* enum pftw_sent bits by string id */
	uint8_t *frame_sent;
	uint8_t *callstack_sent;
	bool no_module_sent;
	const struct tl_event *events; /* the timeline's, by index */
	uint64_t *uuids;	       /* each track's uuid, by index */
	uint32_t *order;	       /* the events in canonical order */
	uint32_t *stacks;	       /* room for every event: each stream's stack is its part */
	struct pftw_stream *streams;   /* one per track with events, in canonical order */
	uint32_t *heap;		       /* streams with points left, a min-heap by their points */
	size_t nstreams, nheap;
	uint32_t *flow_pos;  /* canonical positions of the events with flows */
	uint32_t *flow_rank; /* their ranks */
	size_t nflow;
	pftw_flush_fn flush;
	void *flush_ctx;
	int flush_err;
	char *err;
	size_t errlen;
};

/* Put the message into ERR and return RET, for `return pftw_say(...)`. */
static int pftw_say(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int pftw_say(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

#define pftw_fail(w, ret, ...) pftw_say((w)->err, (w)->errlen, (ret), __VA_ARGS__)

/* Packets. */

static void pftw_maybe_flush(struct pftw *w, bool force)
{
	int err;

	if (!w->flush || w->flush_err || w->out.err)
		return;
	if (!force && w->out.len < PFTW_FLUSH_BYTES)
		return;
	err = w->flush(w->flush_ctx, w->out.data, w->out.len);
	if (err)
		w->flush_err = err;
	pb_buf_reset(&w->out);
}

/* Open a TracePacket on our sequence; every packet but the first needs its state. */
static size_t pftw_packet_begin(struct pftw *w, uint64_t flags)
{
	size_t packet = pb_begin(&w->out, PFT_TRACE_PACKET);

	pb_varint(&w->out, PFT_PACKET_SEQUENCE_ID, PFTW_SEQUENCE_ID);
	pb_varint(&w->out, PFT_PACKET_SEQUENCE_FLAGS, flags);
	return packet;
}

static void pftw_packet_end(struct pftw *w, size_t packet)
{
	pb_end(&w->out, packet);
	pftw_maybe_flush(w, false);
}

static void pftw_write_defaults(struct pftw *w)
{
	size_t packet = pftw_packet_begin(w, PFT_SEQ_INCREMENTAL_STATE_CLEARED);
	size_t defaults = pb_begin(&w->out, PFT_PACKET_DEFAULTS);

	pb_varint(&w->out, PFT_DEFAULTS_TIMESTAMP_CLOCK_ID, PFT_CLOCK_MONOTONIC);
	pb_end(&w->out, defaults);
	pftw_packet_end(w, packet);
}

static void pftw_write_clock(struct pftw *w, uint32_t clock_id, uint64_t ts_ns)
{
	size_t clock = pb_begin(&w->out, PFT_CLOCK_SNAPSHOT_CLOCKS);

	pb_varint(&w->out, PFT_CLOCK_ID, clock_id);
	pb_varint(&w->out, PFT_CLOCK_TIMESTAMP, ts_ns);
	pb_end(&w->out, clock);
}

static void pftw_write_clock_snapshot(struct pftw *w)
{
	const struct tl_clock_snapshot *snap = tl_clock_snapshot(w->tl);
	size_t packet = pftw_packet_begin(w, PFT_SEQ_NEEDS_INCREMENTAL_STATE);
	size_t snapshot = pb_begin(&w->out, PFT_PACKET_CLOCK_SNAPSHOT);

	if (snap) {
		pftw_write_clock(w, PFT_CLOCK_BOOTTIME, snap->boottime_ns);
		pftw_write_clock(w, PFT_CLOCK_MONOTONIC, snap->monotonic_ns);
		pftw_write_clock(w, PFT_CLOCK_REALTIME, snap->realtime_ns);
	}
	pb_varint(&w->out, PFT_CLOCK_SNAPSHOT_PRIMARY_TRACE_CLOCK, PFT_CLOCK_MONOTONIC);
	pb_end(&w->out, snapshot);
	pftw_packet_end(w, packet);
}

/* Tracks. */

static void pftw_write_track_body(struct pftw *w, const struct tl_track *t)
{
	const char *name = tl_str_get(w->tl, t->name);
	size_t desc;

	switch (t->kind) {
	case TL_TRACK_PROCESS:
		desc = pb_begin(&w->out, PFT_TRACK_PROCESS);
		pb_int(&w->out, PFT_PROCESS_PID, t->pid);
		if (t->name)
			pb_string(&w->out, PFT_PROCESS_NAME, name);
		pb_end(&w->out, desc);
		return;
	case TL_TRACK_THREAD:
		desc = pb_begin(&w->out, PFT_TRACK_THREAD);
		pb_int(&w->out, PFT_THREAD_PID, t->pid);
		pb_int(&w->out, PFT_THREAD_TID, t->tid);
		if (t->name)
			pb_string(&w->out, PFT_THREAD_NAME, name);
		pb_end(&w->out, desc);
		return;
	case TL_TRACK_GLOBAL:
	case TL_TRACK_THREAD_KERNEL:
	case TL_TRACK_CPU:
		if (t->name)
			pb_string(&w->out, PFT_TRACK_NAME, name);
		return;
	}
}

/* A packet of the descriptors' sequence: it needs no incremental state and never has any. */
static size_t pftw_descriptor_packet_begin(struct pftw *w)
{
	size_t packet = pb_begin(&w->out, PFT_TRACE_PACKET);

	pb_varint(&w->out, PFT_PACKET_SEQUENCE_ID, PFTW_DESCRIPTOR_SEQUENCE_ID);
	return packet;
}

/*
 * FIRST_NS: the first event on the track or on a track under it, 0 for
 * none. A process, thread or kernel track's descriptor carries it as its
 * time: Perfetto binds the descriptor (and its parents) to the thread or
 * process the tid or pid names when it reads it, and a task the file's
 * native scheduling data starts later (task_newtask) would be a second
 * thread of the same tid if the descriptor came first. (An untimed packet
 * would take the time of the last timed one.) Only with a clock snapshot,
 * which puts MONOTONIC on the trace's clock.
 */
static void pftw_write_track(struct pftw *w, const struct tl_track *t, uint64_t first_ns)
{
	size_t packet = pftw_descriptor_packet_begin(w);
	size_t desc;

	if (first_ns && tl_clock_snapshot(w->tl) &&
	    (t->kind == TL_TRACK_PROCESS || t->kind == TL_TRACK_THREAD ||
	     t->kind == TL_TRACK_THREAD_KERNEL)) {
		pb_varint(&w->out, PFT_PACKET_TIMESTAMP, first_ns);
		pb_varint(&w->out, PFT_PACKET_TIMESTAMP_CLOCK_ID, PFT_CLOCK_MONOTONIC);
	}
	desc = pb_begin(&w->out, PFT_PACKET_TRACK_DESCRIPTOR);

	pb_varint(&w->out, PFT_TRACK_UUID, t->uuid);
	if (t->parent_uuid)
		pb_varint(&w->out, PFT_TRACK_PARENT_UUID, t->parent_uuid);
	pftw_write_track_body(w, t);
	pb_end(&w->out, desc);
	pftw_packet_end(w, packet);
}

/*
 * Whether track T needs a line in the "track kinds" instant: Perfetto's
 * descriptors cannot say "kernel track" or "CPU", nor whether the hybtrace
 * track is the timeline's or only the writer's home for the metadata.
 */
static bool pftw_kind_hidden(const struct tl_track *t)
{
	return t->kind == TL_TRACK_THREAD_KERNEL || t->kind == TL_TRACK_CPU ||
	       t->uuid == TL_HYBTRACE_UUID;
}

static bool pftw_has_hidden_kinds(const struct timeline *tl)
{
	for (size_t i = 0; i < tl_track_count(tl); i++)
		if (pftw_kind_hidden(tl_track(tl, i)))
			return true;
	return false;
}

/* The instants on the hybtrace track (see perfetto_write.h). */

static void pftw_string_annotation(struct pftw *w, const char *name, const char *value)
{
	size_t ann = pb_begin(&w->out, PFT_EVENT_DEBUG_ANNOTATIONS);

	pb_string(&w->out, PFT_ANNOTATION_NAME, name);
	pb_string(&w->out, PFT_ANNOTATION_STRING, value);
	pb_end(&w->out, ann);
}

/* Names inline, not interned: how the reader tells these from the timeline's own events. */
static size_t pftw_own_instant_begin(struct pftw *w, uint64_t ts_ns, const char *name,
				     size_t *event)
{
	size_t packet = pftw_packet_begin(w, PFT_SEQ_NEEDS_INCREMENTAL_STATE);

	pb_varint(&w->out, PFT_PACKET_TIMESTAMP, ts_ns);
	*event = pb_begin(&w->out, PFT_PACKET_TRACK_EVENT);
	pb_varint(&w->out, PFT_EVENT_TYPE, PFT_TYPE_INSTANT);
	pb_varint(&w->out, PFT_EVENT_TRACK_UUID, TL_HYBTRACE_UUID);
	pb_string(&w->out, PFT_EVENT_NAME, name);
	return packet;
}

static void pftw_own_instant_end(struct pftw *w, size_t packet, size_t event)
{
	pb_end(&w->out, event);
	pftw_packet_end(w, packet);
}

static void pftw_write_metadata(struct pftw *w, uint64_t ts_ns)
{
	const struct timeline *tl = w->tl;
	size_t packet, event;

	packet = pftw_own_instant_begin(w, ts_ns, PFTW_META_EVENT, &event);
	for (size_t i = 0; i < tl_meta_count(tl); i++)
		pftw_string_annotation(w, tl_meta_key(tl, i), tl_meta_value(tl, i));
	pftw_own_instant_end(w, packet, event);
}

static void pftw_write_track_kinds(struct pftw *w, uint64_t ts_ns)
{
	const struct timeline *tl = w->tl;
	size_t packet, event;
	char name[24], value[24];

	packet = pftw_own_instant_begin(w, ts_ns, PFTW_TRACK_KINDS_EVENT, &event);
	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (!pftw_kind_hidden(t))
			continue;
		snprintf(name, sizeof(name), "%" PRIu64, t->uuid);
		if (t->kind == TL_TRACK_CPU)
			snprintf(value, sizeof(value), "cpu %" PRId32, t->cpu);
		else
			snprintf(value, sizeof(value), "%s", tl_track_kind_name(t->kind));
		pftw_string_annotation(w, name, value);
	}
	pftw_own_instant_end(w, packet, event);
}

/* The hybtrace track, when the timeline has none but the metadata needs a home. */
static void pftw_write_hybtrace_track(struct pftw *w)
{
	size_t packet = pftw_descriptor_packet_begin(w);
	size_t desc = pb_begin(&w->out, PFT_PACKET_TRACK_DESCRIPTOR);

	pb_varint(&w->out, PFT_TRACK_UUID, TL_HYBTRACE_UUID);
	pb_string(&w->out, PFT_TRACK_NAME, "hybtrace");
	pb_end(&w->out, desc);
	pftw_packet_end(w, packet);
}

/* Each track's first event, or that of a track under it (0: none), into FIRST[track]. */
static void pftw_tracks_first_ns(const struct timeline *tl, uint64_t *first)
{
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		long t = (long)e->track;

		/* Up the parents: a kernel track's thread, a thread's process (at most 4). */
		for (int depth = 0; t >= 0 && depth < 4; depth++) {
			if (!first[t] || e->ts_ns < first[t])
				first[t] = e->ts_ns;
			t = tl_track(tl, (size_t)t)->parent_uuid
				    ? tl_track_find(tl, tl_track(tl, (size_t)t)->parent_uuid)
				    : -1;
		}
	}
}

static int pftw_write_tracks(struct pftw *w, uint64_t first_ts_ns)
{
	const struct timeline *tl = w->tl;
	bool hidden = pftw_has_hidden_kinds(tl);
	bool own = tl_track_find(tl, TL_HYBTRACE_UUID) >= 0;
	uint64_t *first = calloc(tl_track_count(tl) + 1, sizeof(*first));

	if (!first)
		return -ENOMEM;
	pftw_tracks_first_ns(tl, first);
	if (!own && (hidden || tl_meta_count(tl)))
		pftw_write_hybtrace_track(w);
	for (size_t i = 0; i < tl_track_count(tl); i++)
		pftw_write_track(w, tl_track(tl, i), first[i]);
	free(first);
	if (tl_meta_count(tl))
		pftw_write_metadata(w, first_ts_ns);
	if (hidden)
		pftw_write_track_kinds(w, first_ts_ns);
	return 0;
}

/* Interned data, sent in the packet that first needs it. */

static void pftw_intern_entry(struct pftw *w, uint32_t field, uint64_t iid, const char *s)
{
	size_t entry = pb_begin(&w->out, field);

	pb_varint(&w->out, PFT_INTERNED_IID, iid);
	pb_string(&w->out, PFT_INTERNED_STRING, s);
	pb_end(&w->out, entry);
}

static void pftw_intern_string(struct pftw *w, tl_str id, enum pftw_sent table, uint32_t field)
{
	if (!id || (w->str_sent[id] & table))
		return;
	w->str_sent[id] |= table;
	pftw_intern_entry(w, field, id, tl_str_get(w->tl, id));
}

/* The iid of the mapping for MODULE, sending the mapping if it is new. */
static uint64_t pftw_intern_mapping(struct pftw *w, tl_str module)
{
	uint64_t iid = module ? module : PFTW_NO_MODULE_MAPPING;
	bool sent = module ? w->str_sent[module] & PFTW_SENT_MAPPING : w->no_module_sent;
	size_t mapping;

	if (sent)
		return iid;
	if (module) {
		w->str_sent[module] |= PFTW_SENT_MAPPING;
		/* The whole path as one component: Perfetto shows it as it is. */
		pftw_intern_entry(w, PFT_INTERNED_MAPPING_PATHS, module, tl_str_get(w->tl, module));
	} else {
		w->no_module_sent = true;
	}
	mapping = pb_begin(&w->out, PFT_INTERNED_MAPPINGS);
	pb_varint(&w->out, PFT_MAPPING_IID, iid);
	if (module)
		pb_varint(&w->out, PFT_MAPPING_PATH_STRING_IDS, module);
	pb_end(&w->out, mapping);
	return iid;
}

static void pftw_intern_frame(struct pftw *w, uint32_t frame_id)
{
	const struct tl_frame *f = tl_frame(w->tl, frame_id);
	uint64_t mapping_iid;
	size_t frame;

	if (w->frame_sent[frame_id])
		return;
	w->frame_sent[frame_id] = 1;
	pftw_intern_string(w, f->function, PFTW_SENT_FUNCTION, PFT_INTERNED_FUNCTION_NAMES);
	mapping_iid = pftw_intern_mapping(w, f->module);
	frame = pb_begin(&w->out, PFT_INTERNED_FRAMES);
	pb_varint(&w->out, PFT_FRAME_IID, frame_id);
	if (f->function)
		pb_varint(&w->out, PFT_FRAME_FUNCTION_NAME_ID, f->function);
	/* Perfetto drops frames without a mapping, and a mapping needs rel_pc. */
	pb_varint(&w->out, PFT_FRAME_MAPPING_ID, mapping_iid);
	pb_varint(&w->out, PFT_FRAME_REL_PC, f->address);
	pb_end(&w->out, frame);
}

static void pftw_intern_callstack(struct pftw *w, uint32_t cs)
{
	size_t depth = tl_callstack_depth(w->tl, cs);
	size_t entry;

	if (w->callstack_sent[cs])
		return;
	w->callstack_sent[cs] = 1;
	for (size_t i = 0; i < depth; i++)
		pftw_intern_frame(w, tl_callstack_frame_id(w->tl, cs, i));
	entry = pb_begin(&w->out, PFT_INTERNED_CALLSTACKS);
	pb_varint(&w->out, PFT_CALLSTACK_IID, cs);
	/* Repeated uint64, not packed: what Perfetto's decoders expect of proto2. */
	for (size_t i = 0; i < depth; i++)
		pb_varint(&w->out, PFT_CALLSTACK_FRAME_IDS, tl_callstack_frame_id(w->tl, cs, i));
	pb_end(&w->out, entry);
}

static void pftw_write_interned(struct pftw *w, const struct tl_event *e)
{
	size_t before = w->out.len;
	size_t interned = pb_begin(&w->out, PFT_PACKET_INTERNED_DATA);
	size_t start = w->out.len;

	pftw_intern_string(w, e->category, PFTW_SENT_CATEGORY, PFT_INTERNED_EVENT_CATEGORIES);
	pftw_intern_string(w, e->name, PFTW_SENT_NAME, PFT_INTERNED_EVENT_NAMES);
	for (uint32_t a = tl_event_lists(w->tl, e)->args.first; a; a = tl_arg(w->tl, a)->next)
		pftw_intern_string(w, tl_arg(w->tl, a)->name, PFTW_SENT_ANNOTATION,
				   PFT_INTERNED_ANNOTATION_NAMES);
	if (e->callstack)
		pftw_intern_callstack(w, e->callstack);
	if (w->out.len == start)
		pb_buf_truncate(&w->out, before);
	else
		pb_end(&w->out, interned);
}

/* Events. */

static void pftw_write_arg(struct pftw *w, const struct tl_arg *arg)
{
	size_t ann = pb_begin(&w->out, PFT_EVENT_DEBUG_ANNOTATIONS);

	if (arg->name)
		pb_varint(&w->out, PFT_ANNOTATION_NAME_IID, arg->name);
	else
		pb_string(&w->out, PFT_ANNOTATION_NAME, "");
	switch (arg->kind) {
	case TL_ARG_INT:
		pb_int(&w->out, PFT_ANNOTATION_INT, arg->i);
		break;
	case TL_ARG_UINT:
		pb_varint(&w->out, PFT_ANNOTATION_UINT, arg->u);
		break;
	case TL_ARG_DOUBLE:
		pb_double(&w->out, PFT_ANNOTATION_DOUBLE, arg->d);
		break;
	case TL_ARG_STR:
		pb_string(&w->out, PFT_ANNOTATION_STRING, tl_str_get(w->tl, arg->s));
		break;
	}
	pb_end(&w->out, ann);
}

static void pftw_write_flows(struct pftw *w, const struct tl_list *flows, uint32_t field)
{
	for (uint32_t f = flows->first; f; f = tl_flow(w->tl, f)->next)
		pb_fixed64(&w->out, field, tl_flow(w->tl, f)->id);
}

/* What a begin or an instant says besides its type and track. */
static void pftw_write_event_details(struct pftw *w, const struct tl_event *e)
{
	const struct tl_event_lists *lists = tl_event_lists(w->tl, e);

	if (e->category)
		pb_varint(&w->out, PFT_EVENT_CATEGORY_IIDS, e->category);
	if (e->name)
		pb_varint(&w->out, PFT_EVENT_NAME_IID, e->name);
	for (uint32_t a = lists->args.first; a; a = tl_arg(w->tl, a)->next)
		pftw_write_arg(w, tl_arg(w->tl, a));
	pftw_write_flows(w, &lists->flows_out, PFT_EVENT_FLOW_IDS);
	pftw_write_flows(w, &lists->flows_in, PFT_EVENT_TERMINATING_FLOW_IDS);
	if (e->callstack)
		pb_varint(&w->out, PFT_EVENT_CALLSTACK_IID, e->callstack);
}

static uint8_t *pftw_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint8_t *pftw_put_field(uint8_t *p, uint32_t field, uint64_t v)
{
	return pftw_put_varint(pftw_put_varint(p, (uint64_t)field << 3), v);
}

/*
 * Most points are an end, or a begin whose name and category went out
 * already and that has nothing else to say: a packet of about 20 bytes,
 * the same fields in the same order as the general path writes them, built
 * at once. A PT dump is millions of these. Returns false where it does not
 * apply.
 */
static bool pftw_write_short_point(struct pftw *w, const struct pftw_point *pt,
				   const struct tl_event *e)
{
	/* The event's fields come first: the packet's header needs their length. */
	uint8_t ev[48], *q = ev, *packet, *p;

	if (pt->type != PFT_TYPE_SLICE_END &&
	    (e->lists || e->callstack || (e->name && !(w->str_sent[e->name] & PFTW_SENT_NAME)) ||
	     (e->category && !(w->str_sent[e->category] & PFTW_SENT_CATEGORY))))
		return false;
	q = pftw_put_field(q, PFT_EVENT_TYPE, pt->type);
	q = pftw_put_field(q, PFT_EVENT_TRACK_UUID, w->uuids[e->track]);
	if (pt->type != PFT_TYPE_SLICE_END) {
		if (e->category)
			q = pftw_put_field(q, PFT_EVENT_CATEGORY_IIDS, e->category);
		if (e->name)
			q = pftw_put_field(q, PFT_EVENT_NAME_IID, e->name);
	}
	/* Written in place; the body is under 128 bytes, so its length takes one byte. */
	packet = pb_claim(&w->out, 96);
	if (!packet)
		return true; /* the buffer's error ends the run */
	p = pftw_put_field(packet + 2, PFT_PACKET_SEQUENCE_ID, PFTW_SEQUENCE_ID);
	p = pftw_put_field(p, PFT_PACKET_SEQUENCE_FLAGS, PFT_SEQ_NEEDS_INCREMENTAL_STATE);
	p = pftw_put_field(p, PFT_PACKET_TIMESTAMP, pt->ts_ns);
	p = pftw_put_varint(p, (uint64_t)PFT_PACKET_TRACK_EVENT << 3 | PB_WIRE_LEN);
	p = pftw_put_varint(p, (uint64_t)(q - ev));
	memcpy(p, ev, sizeof(ev)); /* a fixed size copies inline; only q - ev bytes count */
	p += q - ev;
	packet[0] = (uint8_t)(PFT_TRACE_PACKET << 3 | PB_WIRE_LEN);
	packet[1] = (uint8_t)(p - packet - 2);
	w->out.len += (size_t)(p - packet);
	if (w->out.len >= PFTW_FLUSH_BYTES)
		pftw_maybe_flush(w, false);
	return true;
}

static void pftw_write_point(struct pftw *w, const struct pftw_point *pt)
{
	const struct tl_event *e = &w->events[pt->event];
	size_t packet, event;

	if (pftw_write_short_point(w, pt, e))
		return;
	/* Every packet after the defaults must say it needs them (trace_packet.proto). */
	packet = pftw_packet_begin(w, PFT_SEQ_NEEDS_INCREMENTAL_STATE);
	pb_varint(&w->out, PFT_PACKET_TIMESTAMP, pt->ts_ns);
	if (pt->type != PFT_TYPE_SLICE_END)
		pftw_write_interned(w, e);
	event = pb_begin(&w->out, PFT_PACKET_TRACK_EVENT);
	pb_varint(&w->out, PFT_EVENT_TYPE, pt->type);
	pb_varint(&w->out, PFT_EVENT_TRACK_UUID, w->uuids[e->track]);
	if (pt->type != PFT_TYPE_SLICE_END)
		pftw_write_event_details(w, e);
	pb_end(&w->out, event);
	pftw_packet_end(w, packet);
}

/*
 * Ordering begins and ends: each track's stream is in time order, and the
 * file takes the earliest next point of all streams; a heap of the streams
 * does it point by point, so no array of every point is ever built.
 *
 * Perfetto imports points of one time in file order, which decides two
 * things there. Slices that begin together nest in the order they begin:
 * a track's stream begins a parent before its children and ends children
 * first. And a flow whose end comes before its begin is lost: the importer
 * skips a terminating id that is not active, and the begin read later
 * stays open (track_event_event_importer.h). So among points of one time
 * the heap takes the lowest rank first (struct pftw_point), then the first
 * track in canonical order.
 */

static uint64_t pftw_end_ns(const struct tl_event *e)
{
	return e->ts_ns + e->dur_ns;
}

static bool pftw_has_flows(const struct pftw *w, const struct tl_event *e)
{
	const struct tl_event_lists *l;

	if (!e->lists)
		return false;
	l = tl_event_lists(w->tl, e);
	return l->flows_out.count || l->flows_in.count;
}

/* The rank of the event at canonical position POS: 0 unless it has flows. */
static uint32_t pftw_event_rank(const struct pftw *w, size_t pos)
{
	size_t lo;

	if (!pftw_has_flows(w, &w->events[w->order[pos]]))
		return 0;
	lo = HT_PARTITION_POINT(0, w->nflow, i, w->flow_pos[i] < pos);
	return lo < w->nflow && w->flow_pos[lo] == pos ? w->flow_rank[lo] : 0;
}

/*
 * The stream's next point, or false when it has none left: before an event
 * starts, every open slice that has ended by then is closed, innermost
 * first; after the last event the open slices close.
 */
static bool pftw_stream_take(const struct pftw *w, struct pftw_stream *s)
{
	const struct tl_event *events = w->events;

	if (s->depth) {
		const struct tl_event *top = &events[s->stack[s->depth - 1]];

		if (s->next == s->n || pftw_end_ns(top) <= events[s->order[s->next]].ts_ns) {
			s->depth--;
			s->point = (struct pftw_point){pftw_end_ns(top), 0, s->stack[s->depth],
						       PFT_TYPE_SLICE_END};
			return true;
		}
	}
	if (s->next == s->n)
		return false;
	uint32_t id = s->order[s->next++];
	const struct tl_event *e = &events[id];
	uint32_t rank = pftw_event_rank(w, s->first + s->next - 1);

	if (e->kind == TL_EVENT_INSTANT) {
		s->point = (struct pftw_point){e->ts_ns, rank, id, PFT_TYPE_INSTANT};
	} else {
		s->point = (struct pftw_point){e->ts_ns, rank, id, PFT_TYPE_SLICE_BEGIN};
		s->stack[s->depth++] = id;
	}
	return true;
}

/* The next point, ranked no lower than the one before it at the same time. */
static bool pftw_stream_advance(const struct pftw *w, struct pftw_stream *s)
{
	struct pftw_point prev = s->point;

	if (!pftw_stream_take(w, s))
		return false;
	if (s->point.ts_ns == prev.ts_ns && s->point.rank < prev.rank)
		s->point.rank = prev.rank;
	return true;
}

/* Where a flow begins or passes: what terminating it at the same time must follow. */
struct pftw_flow_src {
	uint64_t id;
	uint64_t ts_ns;
	uint32_t at; /* index into flow_pos */
};

static int pftw_flow_src_cmp(const void *pa, const void *pb)
{
	const struct pftw_flow_src *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	return (a->at > b->at) - (a->at < b->at);
}

/* The first of N sources of flow ID at TS_NS, or N. */
static size_t pftw_flow_src_find(const struct pftw_flow_src *src, size_t n, uint64_t id,
				 uint64_t ts_ns)
{
	return HT_PARTITION_POINT(0, n, i,
				  src[i].id < id || (src[i].id == id && src[i].ts_ns < ts_ns));
}

/* One pass of raising ranks to what the events before them ask; true if any rose. */
static bool pftw_rank_pass(struct pftw *w, const struct pftw_flow_src *src, size_t nsrc)
{
	bool rose = false;

	for (size_t k = 0; k < w->nflow; k++) {
		const struct tl_event *e = &w->events[w->order[w->flow_pos[k]]];
		const struct tl_event *p = k ? &w->events[w->order[w->flow_pos[k - 1]]] : NULL;
		uint32_t rank = w->flow_rank[k];

		/* Never below an event before it on its track at the same time. */
		if (p && p->track == e->track && p->ts_ns == e->ts_ns && w->flow_rank[k - 1] > rank)
			rank = w->flow_rank[k - 1];
		for (uint32_t f = tl_event_lists(w->tl, e)->flows_in.first; f;
		     f = tl_flow(w->tl, f)->next) {
			uint64_t id = tl_flow(w->tl, f)->id;

			for (size_t i = pftw_flow_src_find(src, nsrc, id, e->ts_ns);
			     i < nsrc && src[i].id == id && src[i].ts_ns == e->ts_ns; i++)
				if (src[i].at != k && w->flow_rank[src[i].at] >= rank)
					rank = w->flow_rank[src[i].at] + 1;
		}
		if (rank > PFTW_MAX_FLOW_RANK)
			rank = PFTW_MAX_FLOW_RANK;
		if (rank != w->flow_rank[k]) {
			w->flow_rank[k] = rank;
			rose = true;
		}
	}
	return rose;
}

/*
 * The ranks of the events with flows. Each pass carries a rank at least one
 * flow further along a chain of flows at one time, so the longest chain
 * takes as many passes; a cycle (a flow's end before its begin, both at one
 * time and on one chain) cannot be ordered and stops at the cap.
 */
static int pftw_rank_flows(struct pftw *w)
{
	size_t n = tl_event_count(w->tl), nsrc = 0, at = 0;
	struct pftw_flow_src *src;

	for (size_t pos = 0; pos < n; pos++) {
		const struct tl_event *e = &w->events[w->order[pos]];

		if (pftw_has_flows(w, e)) {
			w->nflow++;
			nsrc += tl_event_lists(w->tl, e)->flows_out.count;
		}
	}
	if (!w->nflow)
		return 0;
	w->flow_pos = malloc(w->nflow * sizeof(*w->flow_pos));
	w->flow_rank = calloc(w->nflow, sizeof(*w->flow_rank));
	src = malloc((nsrc + 1) * sizeof(*src));
	if (!w->flow_pos || !w->flow_rank || !src) {
		free(src);
		return pftw_fail(w, -ENOMEM, "out of memory");
	}
	nsrc = 0;
	for (size_t pos = 0; pos < n; pos++) {
		const struct tl_event *e = &w->events[w->order[pos]];

		if (!pftw_has_flows(w, e))
			continue;
		for (uint32_t f = tl_event_lists(w->tl, e)->flows_out.first; f;
		     f = tl_flow(w->tl, f)->next)
			src[nsrc++] = (struct pftw_flow_src){tl_flow(w->tl, f)->id, e->ts_ns,
							     (uint32_t)at};
		w->flow_pos[at++] = (uint32_t)pos;
	}
	qsort(src, nsrc, sizeof(*src), pftw_flow_src_cmp);
	for (int pass = 0; pass <= PFTW_MAX_FLOW_RANK && pftw_rank_pass(w, src, nsrc); pass++)
		;
	free(src);
	return 0;
}

static bool pftw_stream_before(const struct pftw *w, uint32_t a, uint32_t b)
{
	const struct pftw_point *pa = &w->streams[a].point, *pb = &w->streams[b].point;

	if (pa->ts_ns != pb->ts_ns)
		return pa->ts_ns < pb->ts_ns;
	if (pa->rank != pb->rank)
		return pa->rank < pb->rank;
	return a < b;
}

static void pftw_heap_down(struct pftw *w, size_t i)
{
	uint32_t *h = w->heap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= w->nheap)
			return;
		if (c + 1 < w->nheap && pftw_stream_before(w, h[c + 1], h[c]))
			c++;
		if (!pftw_stream_before(w, h[c], h[i]))
			return;
		uint32_t t = h[i];

		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

/* One stream per track, in canonical order, each with its first point, and the heap of them. */
static int pftw_make_streams(struct pftw *w)
{
	const struct timeline *tl = w->tl;
	size_t n = tl_event_count(tl), start = 0;

	w->stacks = malloc((n + 1) * sizeof(*w->stacks));
	w->streams = malloc((tl_track_count(tl) + 1) * sizeof(*w->streams));
	w->heap = malloc((tl_track_count(tl) + 1) * sizeof(*w->heap));
	if (!w->stacks || !w->streams || !w->heap)
		return pftw_fail(w, -ENOMEM, "out of memory");
	for (size_t i = 1; i <= n; i++) {
		struct pftw_stream *s = &w->streams[w->nstreams];

		if (i < n && w->events[w->order[i]].track == w->events[w->order[start]].track)
			continue;
		*s = (struct pftw_stream){
			.order = w->order + start,
			.first = start,
			.n = i - start,
			.stack = w->stacks + start,
		};
		pftw_stream_take(w, s);
		w->heap[w->nheap++] = (uint32_t)w->nstreams++;
		start = i;
	}
	for (size_t i = w->nheap / 2; i-- > 0;)
		pftw_heap_down(w, i);
	return 0;
}

/* Write the earliest point of all streams; false when none is left. */
static bool pftw_write_next_point(struct pftw *w)
{
	struct pftw_stream *s;

	if (!w->nheap)
		return false;
	s = &w->streams[w->heap[0]];
	pftw_write_point(w, &s->point);
	if (!pftw_stream_advance(w, s))
		w->heap[0] = w->heap[--w->nheap];
	pftw_heap_down(w, 0);
	return true;
}

/* The whole file. */

/*
 * The first event's time: the first point of the streams' heap (each
 * stream's first point is its track's earliest event), else the snapshot's.
 */
static uint64_t pftw_first_ts(const struct pftw *w)
{
	const struct tl_clock_snapshot *snap = tl_clock_snapshot(w->tl);

	if (w->nheap)
		return w->streams[w->heap[0]].point.ts_ns;
	return snap ? snap->monotonic_ns : 0;
}

static int pftw_prepare(struct pftw *w)
{
	const struct timeline *tl = w->tl;
	char why[256];
	int err;

	if (tl_error(tl))
		return pftw_fail(w, -EINVAL, "the timeline is incomplete: %s", tl_strerror(tl));
	/* One canonical order serves the check and the layout. */
	w->order = tl_sorted_order(tl);
	if (!w->order)
		return pftw_fail(w, -ENOMEM, "out of memory");
	if (tl_validate_order(tl, w->order, why, sizeof(why)))
		return pftw_fail(w, -EINVAL, "the timeline is not valid: %s", why);
	w->events = tl_events(tl);
	w->uuids = malloc((tl_track_count(tl) + 1) * sizeof(*w->uuids));
	if (!w->uuids)
		return pftw_fail(w, -ENOMEM, "out of memory");
	for (size_t i = 0; i < tl_track_count(tl); i++)
		w->uuids[i] = tl_track(tl, i)->uuid;
	w->str_sent = calloc(tl_str_count(tl) + 1, 1);
	w->frame_sent = calloc(tl_frame_count(tl) + 1, 1);
	w->callstack_sent = calloc(tl_callstack_count(tl) + 1, 1);
	if (!w->str_sent || !w->frame_sent || !w->callstack_sent)
		return pftw_fail(w, -ENOMEM, "out of memory");
	err = pftw_rank_flows(w);
	return err ? err : pftw_make_streams(w);
}

static int pftw_run(struct pftw *w)
{
	int err = pftw_prepare(w);

	if (err)
		return err;
	pftw_write_defaults(w);
	pftw_write_clock_snapshot(w);
	err = pftw_write_tracks(w, pftw_first_ts(w));
	if (err)
		return pftw_fail(w, err, "out of memory");
	/* Stop at the first failure rather than pile the rest of the trace up in memory. */
	while (!w->flush_err && !w->out.err && pftw_write_next_point(w))
		;
	pftw_maybe_flush(w, true);
	if (w->out.err)
		return pftw_fail(w, w->out.err, "out of memory");
	if (w->flush_err)
		return pftw_fail(w, w->flush_err, "cannot write the trace: %s",
				 strerror(-w->flush_err));
	return 0;
}

static void pftw_done(struct pftw *w)
{
	pb_buf_free(&w->out);
	free(w->str_sent);
	free(w->frame_sent);
	free(w->callstack_sent);
	free(w->uuids);
	free(w->stacks);
	free(w->streams);
	free(w->heap);
	free(w->flow_pos);
	free(w->flow_rank);
	free(w->order);
}

static int pftw_write_to(const struct timeline *tl, pftw_flush_fn flush, void *ctx, char *err,
			 size_t errlen)
{
	struct pftw w = {
		.tl = tl,
		.flush = flush,
		.flush_ctx = ctx,
		.err = err,
		.errlen = errlen,
	};
	int ret = pftw_run(&w);

	pftw_done(&w);
	return ret;
}

int pftw_write_mem(const struct timeline *tl, void **data, size_t *len, char *err, size_t errlen)
{
	struct pftw w = {.tl = tl, .err = err, .errlen = errlen};
	int ret = pftw_run(&w);

	if (!ret) {
		*data = w.out.data;
		*len = w.out.len;
		pb_buf_init(&w.out);
	}
	pftw_done(&w);
	return ret;
}

static int pftw_flush_fd(void *ctx, const void *data, size_t len)
{
	int fd = *(int *)ctx;
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int pftw_write_fd(const struct timeline *tl, int fd, char *err, size_t errlen)
{
	return pftw_write_to(tl, pftw_flush_fd, &fd, err, errlen);
}

static int pftw_flush_stream(void *ctx, const void *data, size_t len)
{
	FILE *stream = ctx;

	errno = 0;
	if (fwrite(data, 1, len, stream) != len)
		return errno ? -errno : -EIO;
	return 0;
}

int pftw_write_stream(const struct timeline *tl, FILE *stream, char *err, size_t errlen)
{
	int ret = pftw_write_to(tl, pftw_flush_stream, stream, err, errlen);

	if (!ret && fflush(stream))
		return pftw_say(err, errlen, -errno, "cannot write the trace: %s", strerror(errno));
	return ret;
}

/* Give the finished temporary file the usual mode and make it durable before the rename. */
static int pftw_finish_tmp(int fd, const char *tmp, char *err, size_t errlen)
{
	/* Readable by the user who ran hybtrace under sudo, like the files it reads. */
	if (fchmod(fd, 0644) || fsync(fd))
		return pftw_say(err, errlen, -errno, "cannot write %s: %s", tmp, strerror(errno));
	return 0;
}

int pftw_write_path(const struct timeline *tl, const char *path, char *err, size_t errlen)
{
	char *tmp;
	int fd, ret;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
		return pftw_say(err, errlen, -ENOMEM, "out of memory");
	fd = mkstemp(tmp);
	if (fd < 0) {
		ret = pftw_say(err, errlen, -errno, "cannot create a file next to %s: %s", path,
			       strerror(errno));
		free(tmp);
		return ret;
	}
	ret = pftw_write_fd(tl, fd, err, errlen);
	if (!ret)
		ret = pftw_finish_tmp(fd, tmp, err, errlen);
	if (close(fd) && !ret)
		ret = pftw_say(err, errlen, -errno, "cannot write %s: %s", tmp, strerror(errno));
	if (!ret && rename(tmp, path))
		ret = pftw_say(err, errlen, -errno, "cannot rename %s to %s: %s", tmp, path,
			       strerror(errno));
	if (ret)
		unlink(tmp);
	free(tmp);
	return ret;
}
