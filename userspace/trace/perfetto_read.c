// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Perfetto trace -> timeline: see perfetto_read.h.
 *
 * Two passes over the packets. The first collects what events depend on
 * and what may stand anywhere in the file: track descriptors, the clock
 * snapshot, and hybtrace's own "metadata" and "track kinds" instants
 * (written with inline strings for this reason). The tracks go into the
 * timeline parents first. The second pass replays every packet sequence
 * with its incremental state (interned data, defaults) and turns track
 * events into slices and instants, pairing begins and ends per track.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/pb.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"

/* A mapping's path, joined from its parts, is a file name: keep it that size. */
#define PFTR_MAX_PATH_BYTES 4096
#define PFTR_MAX_PATH_PARTS 256

/* A hash map from nonzero uint64 keys to uint64 values. */
struct pftr_kv {
	uint64_t key;
	uint64_t value;
};

struct pftr_map {
	struct pftr_kv *slots;
	size_t cap; /* a power of two, or 0 */
	size_t count;
};

/* A run of ids in a sequence's id pool: a mapping's path parts, a call stack's frames. */
struct pftr_list {
	size_t first;
	size_t count;
};

struct pftr_frame {
	uint64_t function_iid;
	uint64_t mapping_iid;
	uint64_t rel_pc;
};

/* Interning tables of strings, by the InternedData field they come from. */
enum pftr_table {
	PFTR_CATEGORIES,
	PFTR_NAMES,
	PFTR_ANNOTATION_NAMES,
	PFTR_FUNCTION_NAMES,
	PFTR_MAPPING_PATHS,
	PFTR_NTABLES,
};

/* One packet sequence's incremental state. */
struct pftr_seq {
	uint32_t id;
	bool valid; /* cleared at least once, and nothing dropped since */
	uint64_t default_track_uuid;
	struct pftr_map strings[PFTR_NTABLES]; /* iid -> tl_str */
	struct pftr_map mappings;	       /* iid -> index in lists (path iids) */
	struct pftr_map frames;		       /* iid -> index in frame_recs */
	struct pftr_map callstacks;	       /* iid -> index in lists (frame iids) */
	struct pftr_map module_of;	       /* mapping iid -> tl_str, resolved */
	struct pftr_map resolved;	       /* call stack iid -> timeline call stack */
	uint64_t *ids;
	size_t nids, ids_cap;
	struct pftr_list *lists;
	size_t nlists, lists_cap;
	struct pftr_frame *frame_recs;
	size_t nframe_recs, frame_recs_cap;
};

enum pftr_desc_state {
	PFTR_DESC_NEW,
	PFTR_DESC_VISITING,
	PFTR_DESC_ADDED,
};

/* A TrackDescriptor, kept until every descriptor is known. */
struct pftr_desc {
	struct tl_track_desc track;
	tl_str name;
	enum pftr_desc_state state;
};

/* Slices begun and not yet ended on one track, innermost last. */
struct pftr_open {
	long *events;
	size_t count, cap;
};

/*
 * A flow id as a track event gave it, kept until every event is read: which
 * ids Perfetto honours depends on the order it imports them in.
 */
struct pftr_flow {
	long ev;
	uint64_t id;
	uint64_t ts_ns;
	size_t offset; /* of its packet: the file order among equal times */
	size_t index;  /* in the order read */
	bool in;       /* terminating_flow_ids */
	bool kept;
};

/* The fields of one TracePacket that the reader acts on; absent messages have data NULL. */
struct pftr_packet {
	struct pb_reader reader;
	size_t offset;
	uint64_t ts_ns;
	uint64_t seq_id;
	uint64_t flags;
	bool cleared;
	bool dropped;
	struct pb_field event;
	struct pb_field interned;
	struct pb_field defaults;
	struct pb_field track;
	struct pb_field clock;
};

struct pftr {
	const uint8_t *data;
	size_t len;
	struct timeline *tl;
	struct pftr_stats stats;
	struct pftr_seq *seqs;
	size_t nseqs, seqs_cap;
	struct pftr_map seq_index; /* sequence id + 1 -> index in seqs */
	struct pftr_desc *descs;
	size_t ndescs, descs_cap;
	struct pftr_map desc_index;  /* uuid -> index in descs */
	struct pftr_map track_kinds; /* uuid -> kind << 32 | cpu, from "track kinds" */
	bool has_clock;
	struct pftr_open *open; /* by track index */
	size_t nopen;
	struct pftr_flow *flows;
	size_t nflows, flows_cap;
	struct tl_frame frames[TL_MAX_FRAMES];
	char *err;
	size_t errlen;
};

/* Errors. */

static int pftr_fail(struct pftr *r, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pftr_fail(struct pftr *r, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
	return ret;
}

static int pftr_nomem(struct pftr *r)
{
	return pftr_fail(r, -ENOMEM, "out of memory");
}

/* Malformed protobuf at OFFSET, inside WHAT. */
static int pftr_pb_fail(struct pftr *r, int pb_err, size_t offset, const char *what)
{
	bool cut = pb_err == PB_ERR_LENGTH || pb_err == PB_ERR_TRUNCATED;

	return pftr_fail(r, -EINVAL, "at byte %zu in %s: %s%s", offset, what, pb_strerror(pb_err),
			 cut ? " (is the file truncated?)" : "");
}

static int pftr_bad_wire(struct pftr *r, const struct pb_field *f, const char *what)
{
	return pftr_fail(r, -EINVAL, "at byte %zu: field %" PRIu32 " of %s has wire type %d",
			 f->offset, f->number, what, (int)f->wire);
}

/* The timeline refused something (memory, limits): its message says what. */
static int pftr_model_fail(struct pftr *r)
{
	return pftr_fail(r, tl_error(r->tl) ? tl_error(r->tl) : -EINVAL, "%s", tl_strerror(r->tl));
}

/* Maps. */

static uint64_t pftr_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static struct pftr_kv *pftr_map_slot(const struct pftr_map *m, uint64_t key)
{
	size_t mask = m->cap - 1;

	for (size_t i = pftr_mix(key) & mask;; i = (i + 1) & mask)
		if (m->slots[i].key == key || !m->slots[i].key)
			return &m->slots[i];
}

static bool pftr_map_get(const struct pftr_map *m, uint64_t key, uint64_t *value)
{
	struct pftr_kv *kv;

	if (!m->cap)
		return false;
	kv = pftr_map_slot(m, key);
	if (!kv->key)
		return false;
	*value = kv->value;
	return true;
}

static int pftr_map_grow(struct pftr_map *m)
{
	struct pftr_map bigger = {.cap = m->cap ? m->cap * 2 : 16};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			*pftr_map_slot(&bigger, m->slots[i].key) = m->slots[i];
	bigger.count = m->count;
	free(m->slots);
	*m = bigger;
	return 0;
}

/* Set KEY (nonzero) to VALUE; *existed says whether it was there before. */
static int pftr_map_put(struct pftr_map *m, uint64_t key, uint64_t value, bool *existed)
{
	struct pftr_kv *kv;

	if ((m->count + 1) * 2 > m->cap && pftr_map_grow(m))
		return -ENOMEM;
	kv = pftr_map_slot(m, key);
	if (existed)
		*existed = kv->key != 0;
	if (!kv->key)
		m->count++;
	*kv = (struct pftr_kv){key, value};
	return 0;
}

/* Forget everything; freeing (not clearing) keeps a reset as cheap as the entries were. */
static void pftr_map_free(struct pftr_map *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

/* Growable arrays: 0, or -ENOMEM leaving the array as it was. */
static int pftr_grow(void **array, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*array, ncap * elem);
	if (!p)
		return -ENOMEM;
	*array = p;
	*cap = ncap;
	return 0;
}

#define PFTR_GROW(array, cap, need) pftr_grow((void **)&(array), &(cap), (need), sizeof(*(array)))

/* Packet sequences. */

static void pftr_seq_reset(struct pftr_seq *s)
{
	for (int t = 0; t < PFTR_NTABLES; t++)
		pftr_map_free(&s->strings[t]);
	pftr_map_free(&s->mappings);
	pftr_map_free(&s->frames);
	pftr_map_free(&s->callstacks);
	pftr_map_free(&s->module_of);
	pftr_map_free(&s->resolved);
	s->nids = 0;
	s->nlists = 0;
	s->nframe_recs = 0;
	s->default_track_uuid = 0;
}

static void pftr_seq_free(struct pftr_seq *s)
{
	pftr_seq_reset(s);
	free(s->ids);
	free(s->lists);
	free(s->frame_recs);
}

static int pftr_seq_get(struct pftr *r, uint64_t seq_id, struct pftr_seq **out)
{
	uint32_t id = (uint32_t)seq_id; /* a uint32 field in Perfetto's proto */
	uint64_t index;

	if (pftr_map_get(&r->seq_index, (uint64_t)id + 1, &index)) {
		*out = &r->seqs[index];
		return 0;
	}
	if (r->nseqs >= PFTR_MAX_SEQUENCES)
		return pftr_fail(r, -E2BIG, "more than %d packet sequences", PFTR_MAX_SEQUENCES);
	if (PFTR_GROW(r->seqs, r->seqs_cap, r->nseqs + 1) ||
	    pftr_map_put(&r->seq_index, (uint64_t)id + 1, r->nseqs, NULL))
		return pftr_nomem(r);
	*out = &r->seqs[r->nseqs++];
	memset(*out, 0, sizeof(**out));
	(*out)->id = id;
	return 0;
}

/* Reading fields. */

static int pftr_scalar(struct pftr *r, const struct pb_field *f, enum pb_wire_type wire,
		       const char *what, uint64_t *out)
{
	if (f->wire != wire)
		return pftr_bad_wire(r, f, what);
	*out = f->value;
	return 0;
}

/* Keep length-delimited field F in *SLOT. */
static int pftr_keep(struct pftr *r, const struct pb_field *f, const char *what,
		     struct pb_field *slot)
{
	if (f->wire != PB_WIRE_LEN)
		return pftr_bad_wire(r, f, what);
	*slot = *f;
	return 0;
}

static int pftr_enter(struct pftr *r, const struct pb_reader *parent, const struct pb_field *f,
		      const char *what, struct pb_reader *sub)
{
	int err = pb_enter(parent, f, sub);

	if (err == PB_ERR_WIRE_TYPE)
		return pftr_bad_wire(r, f, what);
	return err ? pftr_pb_fail(r, err, f->offset, what) : 0;
}

typedef int (*pftr_value_fn)(struct pftr *r, void *ctx, uint64_t value);

/* Each element of a repeated ELEM field, packed or not. */
static int pftr_repeated(struct pftr *r, const struct pb_reader *parent, const struct pb_field *f,
			 enum pb_wire_type elem, const char *what, pftr_value_fn fn, void *ctx)
{
	struct pb_reader packed;
	uint64_t v = 0;
	int err;

	if (f->wire == elem)
		return fn(r, ctx, f->value);
	err = pftr_enter(r, parent, f, what, &packed);
	while (!err && packed.p < packed.end) {
		err = elem == PB_WIRE_VARINT ? pb_read_varint(&packed, &v)
					     : pb_read_fixed64(&packed, &v);
		if (err)
			return pftr_pb_fail(r, err, pb_offset(&packed), what);
		err = fn(r, ctx, v);
	}
	return err;
}

typedef int (*pftr_field_fn)(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			     void *ctx);

/* Call FN on each field of the message in length-delimited field F, a WHAT. */
static int pftr_each_field(struct pftr *r, const struct pb_reader *parent, const struct pb_field *f,
			   const char *what, pftr_field_fn fn, void *ctx)
{
	struct pb_reader msg;
	struct pb_field g;
	int ret;

	ret = pftr_enter(r, parent, f, what, &msg);
	if (ret)
		return ret;
	while ((ret = pb_next(&msg, &g)) > 0) {
		ret = fn(r, &msg, &g, ctx);
		if (ret)
			return ret;
	}
	return ret ? pftr_pb_fail(r, ret, g.offset, what) : 0;
}

/* Intern the string in length-delimited field F (a field of WHAT). */
static int pftr_string(struct pftr *r, const struct pb_field *f, const char *what, tl_str *out)
{
	if (f->wire != PB_WIRE_LEN)
		return pftr_bad_wire(r, f, what);
	*out = tl_intern_n(r->tl, (const char *)f->data, f->len);
	if (!*out && f->len && f->data[0])
		return pftr_model_fail(r);
	return 0;
}

/* The top level: a Trace is packets and nothing else. */

static int pftr_packet_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			     void *ctx)
{
	struct pftr_packet *p = ctx;
	uint64_t v = 0;
	int err;

	(void)msg;
	switch (f->number) {
	case PFT_PACKET_TIMESTAMP:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TracePacket", &p->ts_ns);
	case PFT_PACKET_SEQUENCE_ID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TracePacket", &p->seq_id);
	case PFT_PACKET_SEQUENCE_FLAGS:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TracePacket", &p->flags);
	case PFT_PACKET_INCREMENTAL_STATE_CLEARED:
		err = pftr_scalar(r, f, PB_WIRE_VARINT, "TracePacket", &v);
		p->cleared = !err && v;
		return err;
	case PFT_PACKET_PREVIOUS_PACKET_DROPPED:
		err = pftr_scalar(r, f, PB_WIRE_VARINT, "TracePacket", &v);
		p->dropped = !err && v;
		return err;
	case PFT_PACKET_TRACK_EVENT:
		return pftr_keep(r, f, "TracePacket", &p->event);
	case PFT_PACKET_INTERNED_DATA:
		return pftr_keep(r, f, "TracePacket", &p->interned);
	case PFT_PACKET_DEFAULTS:
		return pftr_keep(r, f, "TracePacket", &p->defaults);
	case PFT_PACKET_TRACK_DESCRIPTOR:
		return pftr_keep(r, f, "TracePacket", &p->track);
	case PFT_PACKET_CLOCK_SNAPSHOT:
		return pftr_keep(r, f, "TracePacket", &p->clock);
	}
	return 0;
}

typedef int (*pftr_packet_fn)(struct pftr *r, struct pftr_packet *p);

static int pftr_each_packet(struct pftr *r, pftr_packet_fn fn)
{
	struct pftr_packet packet;
	struct pb_reader top;
	struct pb_field f;
	int ret;

	pb_reader_init(&top, r->data, r->len);
	while ((ret = pb_next(&top, &f)) > 0) {
		if (f.number != PFT_TRACE_PACKET || f.wire != PB_WIRE_LEN)
			return pftr_fail(r, -EINVAL,
					 "at byte %zu: not a Perfetto trace: field %" PRIu32
					 " (wire type %d) where a TracePacket should be",
					 f.offset, f.number, (int)f.wire);
		memset(&packet, 0, sizeof(packet));
		packet.offset = f.offset;
		ret = pftr_each_field(r, &top, &f, "a TracePacket", pftr_packet_field, &packet);
		if (!ret)
			ret = pftr_enter(r, &top, &f, "the trace", &packet.reader);
		if (!ret)
			ret = fn(r, &packet);
		if (ret)
			return ret;
	}
	return ret ? pftr_pb_fail(r, ret, f.offset, "the trace") : 0;
}

/* Pass 1: track descriptors. */

struct pftr_desc_ctx {
	struct pftr_desc *desc;
	tl_str name;	   /* TrackDescriptor.name */
	tl_str owner_name; /* thread_name or process_name */
};

static int pftr_int32(struct pftr *r, const struct pb_field *f, const char *what, int32_t *out)
{
	uint64_t v = 0;
	int err = pftr_scalar(r, f, PB_WIRE_VARINT, what, &v);

	*out = (int32_t)(uint32_t)v; /* int32 is sign-extended to 64 bits on the wire */
	return err;
}

/*
 * Perfetto's tid is int64 (other systems' thread ids are wider); the timeline
 * holds Linux's, which fit in 32 bits: refuse one that does not rather than
 * wrap it onto another thread.
 */
static int pftr_tid(struct pftr *r, const struct pb_field *f, int32_t *out)
{
	uint64_t v = 0;
	int err = pftr_scalar(r, f, PB_WIRE_VARINT, "ThreadDescriptor", &v);
	int64_t tid = (int64_t)v;

	if (err)
		return err;
	if (tid < INT32_MIN || tid > INT32_MAX)
		return pftr_fail(r, -EINVAL,
				 "at byte %zu: thread id %" PRId64 " does not fit in 32 bits",
				 f->offset, tid);
	*out = (int32_t)tid;
	return 0;
}

static int pftr_thread_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			     void *ctx)
{
	struct pftr_desc_ctx *c = ctx;

	(void)msg;
	switch (f->number) {
	case PFT_THREAD_PID:
		return pftr_int32(r, f, "ThreadDescriptor", &c->desc->track.pid);
	case PFT_THREAD_TID:
		return pftr_tid(r, f, &c->desc->track.tid);
	case PFT_THREAD_NAME:
		return pftr_string(r, f, "ThreadDescriptor", &c->owner_name);
	}
	return 0;
}

static int pftr_process_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			      void *ctx)
{
	struct pftr_desc_ctx *c = ctx;

	(void)msg;
	switch (f->number) {
	case PFT_PROCESS_PID:
		return pftr_int32(r, f, "ProcessDescriptor", &c->desc->track.pid);
	case PFT_PROCESS_NAME:
		return pftr_string(r, f, "ProcessDescriptor", &c->owner_name);
	}
	return 0;
}

static int pftr_track_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    void *ctx)
{
	struct pftr_desc_ctx *c = ctx;
	struct tl_track_desc *t = &c->desc->track;

	switch (f->number) {
	case PFT_TRACK_UUID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackDescriptor", &t->uuid);
	case PFT_TRACK_PARENT_UUID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackDescriptor", &t->parent_uuid);
	case PFT_TRACK_NAME:
	case PFT_TRACK_STATIC_NAME:
		return pftr_string(r, f, "TrackDescriptor", &c->name);
	case PFT_TRACK_PROCESS:
		/* A thread descriptor says more; it wins whatever the field order. */
		if (t->kind != TL_TRACK_THREAD)
			t->kind = TL_TRACK_PROCESS;
		return pftr_each_field(r, msg, f, "a ProcessDescriptor", pftr_process_field, c);
	case PFT_TRACK_THREAD:
		t->kind = TL_TRACK_THREAD;
		return pftr_each_field(r, msg, f, "a ThreadDescriptor", pftr_thread_field, c);
	}
	return 0;
}

static int pftr_read_descriptor(struct pftr *r, const struct pftr_packet *p)
{
	struct pftr_desc d = {.track.kind = TL_TRACK_GLOBAL};
	struct pftr_desc_ctx c = {.desc = &d};
	uint64_t uuid;
	int err;

	err = pftr_each_field(r, &p->reader, &p->track, "a TrackDescriptor", pftr_track_field, &c);
	if (err)
		return err;
	uuid = d.track.uuid;
	/* Uuid 0 is Perfetto's implicit track; repeats are descriptors sent again. */
	if (!uuid || pftr_map_get(&r->desc_index, uuid, &(uint64_t){0}))
		return 0;
	d.name = c.name ? c.name : c.owner_name;
	if (PFTR_GROW(r->descs, r->descs_cap, r->ndescs + 1) ||
	    pftr_map_put(&r->desc_index, uuid, r->ndescs, NULL))
		return pftr_nomem(r);
	r->descs[r->ndescs++] = d;
	return 0;
}

/* Pass 1: the clock snapshot. */

static int pftr_clock_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    void *ctx)
{
	uint64_t *clock = ctx; /* [0] id, [1] timestamp */

	(void)msg;
	if (f->number == PFT_CLOCK_ID)
		return pftr_scalar(r, f, PB_WIRE_VARINT, "ClockSnapshot.Clock", &clock[0]);
	if (f->number == PFT_CLOCK_TIMESTAMP)
		return pftr_scalar(r, f, PB_WIRE_VARINT, "ClockSnapshot.Clock", &clock[1]);
	return 0;
}

static int pftr_snapshot_field(struct pftr *r, const struct pb_reader *msg,
			       const struct pb_field *f, void *ctx)
{
	struct tl_clock_snapshot *snap = ctx;
	uint64_t clock[2] = {0, 0};
	int err;

	if (f->number != PFT_CLOCK_SNAPSHOT_CLOCKS)
		return 0;
	err = pftr_each_field(r, msg, f, "a ClockSnapshot", pftr_clock_field, clock);
	if (err)
		return err;
	if (clock[0] == PFT_CLOCK_BOOTTIME)
		snap->boottime_ns = clock[1];
	else if (clock[0] == PFT_CLOCK_MONOTONIC)
		snap->monotonic_ns = clock[1];
	else if (clock[0] == PFT_CLOCK_REALTIME)
		snap->realtime_ns = clock[1];
	else
		return 0;
	r->has_clock = true;
	return 0;
}

/* The first snapshot with clocks the timeline knows; traces from Perfetto hold many. */
static int pftr_read_clock(struct pftr *r, const struct pftr_packet *p)
{
	struct tl_clock_snapshot snap = {0};
	int err;

	err = pftr_each_field(r, &p->reader, &p->clock, "a ClockSnapshot", pftr_snapshot_field,
			      &snap);
	if (!err && r->has_clock)
		tl_set_clock_snapshot(r->tl, &snap);
	return err;
}

/* Debug annotations, as both passes see them. */

struct pftr_annotation {
	uint64_t name_iid;
	struct pb_field name; /* data NULL when absent */
	bool has_value;
	struct tl_arg arg; /* kind and value; the name and a string value come later */
	struct pb_field string;
};

static int pftr_annotation_value(struct pftr *r, const struct pb_field *f,
				 struct pftr_annotation *a, enum tl_arg_kind kind,
				 enum pb_wire_type wire)
{
	a->has_value = true;
	a->arg.kind = kind;
	if (kind == TL_ARG_STR)
		return pftr_keep(r, f, "DebugAnnotation", &a->string);
	return pftr_scalar(r, f, wire, "DebugAnnotation", &a->arg.u);
}

static int pftr_annotation_field(struct pftr *r, const struct pb_reader *msg,
				 const struct pb_field *f, void *ctx)
{
	struct pftr_annotation *a = ctx;

	(void)msg;
	switch (f->number) {
	case PFT_ANNOTATION_NAME_IID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "DebugAnnotation", &a->name_iid);
	case PFT_ANNOTATION_NAME:
		return pftr_keep(r, f, "DebugAnnotation", &a->name);
	case PFT_ANNOTATION_BOOL:
	case PFT_ANNOTATION_INT:
		return pftr_annotation_value(r, f, a, TL_ARG_INT, PB_WIRE_VARINT);
	case PFT_ANNOTATION_UINT:
	case PFT_ANNOTATION_POINTER:
		return pftr_annotation_value(r, f, a, TL_ARG_UINT, PB_WIRE_VARINT);
	case PFT_ANNOTATION_DOUBLE:
		return pftr_annotation_value(r, f, a, TL_ARG_DOUBLE, PB_WIRE_FIXED64);
	case PFT_ANNOTATION_STRING:
		return pftr_annotation_value(r, f, a, TL_ARG_STR, PB_WIRE_LEN);
	}
	return 0;
}

static int pftr_read_annotation(struct pftr *r, const struct pb_reader *msg,
				const struct pb_field *f, struct pftr_annotation *a)
{
	memset(a, 0, sizeof(*a));
	return pftr_each_field(r, msg, f, "a DebugAnnotation", pftr_annotation_field, a);
}

/* Pass 1: hybtrace's own instants (see perfetto_write.h). */

struct pftr_own_event {
	uint64_t type;
	uint64_t track_uuid;
	bool has_track_uuid;
	uint64_t name_iid;
	struct pb_field name;
};

static bool pftr_field_is(const struct pb_field *f, const char *s)
{
	return f->data && f->len == strlen(s) && !memcmp(f->data, s, f->len);
}

static int pftr_own_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			  void *ctx)
{
	struct pftr_own_event *e = ctx;

	(void)msg;
	switch (f->number) {
	case PFT_EVENT_TYPE:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->type);
	case PFT_EVENT_TRACK_UUID:
		e->has_track_uuid = true;
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->track_uuid);
	case PFT_EVENT_NAME_IID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->name_iid);
	case PFT_EVENT_NAME:
		return pftr_keep(r, f, "TrackEvent", &e->name);
	}
	return 0;
}

/* Both instants carry inline name/string pairs: interned here, the timeline owns them. */
static int pftr_own_pair(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			 tl_str *key, tl_str *value)
{
	struct pftr_annotation a;
	int err;

	*key = *value = 0;
	if (f->number != PFT_EVENT_DEBUG_ANNOTATIONS)
		return 0;
	err = pftr_read_annotation(r, msg, f, &a);
	if (err || !a.name.data || a.arg.kind != TL_ARG_STR || !a.has_value)
		return err;
	err = pftr_string(r, &a.name, "DebugAnnotation", key);
	return err ? err : pftr_string(r, &a.string, "DebugAnnotation", value);
}

static int pftr_meta_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			   void *ctx)
{
	tl_str key, value;
	int err;

	(void)ctx;
	err = pftr_own_pair(r, msg, f, &key, &value);
	if (err || !key)
		return err;
	if (tl_meta_set(r->tl, tl_str_get(r->tl, key), tl_str_get(r->tl, value)))
		return pftr_model_fail(r);
	return 0;
}

/* "cpu N" or "thread_kernel" for track "UUID", into r->track_kinds. */
static int pftr_track_kind(struct pftr *r, const char *uuid_text, const char *kind)
{
	unsigned long long uuid;
	long cpu = 0;
	enum tl_track_kind k;
	char *end;

	errno = 0;
	uuid = strtoull(uuid_text, &end, 10);
	if (errno || *end || !uuid)
		return pftr_fail(r, -EINVAL, "track kinds: '%s' is not a track uuid", uuid_text);
	if (!strcmp(kind, "thread_kernel")) {
		k = TL_TRACK_THREAD_KERNEL;
	} else if (!strcmp(kind, "global")) {
		k = TL_TRACK_GLOBAL;
	} else if (!strncmp(kind, "cpu ", 4)) {
		k = TL_TRACK_CPU;
		cpu = strtol(kind + 4, &end, 10);
		if (errno || *end || end == kind + 4 || cpu < 0 || cpu > INT32_MAX)
			return pftr_fail(r, -EINVAL, "track kinds: bad cpu in '%s'", kind);
	} else {
		return pftr_fail(r, -EINVAL, "track kinds: unknown kind '%s'", kind);
	}
	if (pftr_map_put(&r->track_kinds, uuid, (uint64_t)k << 32 | (uint32_t)cpu, NULL))
		return pftr_nomem(r);
	return 0;
}

static int pftr_kinds_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    void *ctx)
{
	tl_str key, value;
	int err;

	(void)ctx;
	err = pftr_own_pair(r, msg, f, &key, &value);
	if (err || !key)
		return err;
	return pftr_track_kind(r, tl_str_get(r->tl, key), tl_str_get(r->tl, value));
}

/*
 * Which of the writer's own instants an event is, as the function that
 * reads it; NULL for any other event. Own instants are instants on the
 * hybtrace track (named there, not by default) with an inline name; the
 * timeline's own events on that track have interned names.
 */
static pftr_field_fn pftr_own_kind(const struct pftr_own_event *e)
{
	if (!e->has_track_uuid || e->track_uuid != TL_HYBTRACE_UUID ||
	    e->type != PFT_TYPE_INSTANT || e->name_iid)
		return NULL;
	if (pftr_field_is(&e->name, PFTW_META_EVENT))
		return pftr_meta_field;
	if (pftr_field_is(&e->name, PFTW_TRACK_KINDS_EVENT))
		return pftr_kinds_field;
	return NULL;
}

static int pftr_own_event(struct pftr *r, const struct pftr_packet *p, pftr_field_fn *fn)
{
	struct pftr_own_event e = {0};
	int err;

	err = pftr_each_field(r, &p->reader, &p->event, "a TrackEvent", pftr_own_field, &e);
	*fn = err ? NULL : pftr_own_kind(&e);
	return err;
}

static int pftr_read_own_event(struct pftr *r, const struct pftr_packet *p)
{
	pftr_field_fn fn;
	int err = pftr_own_event(r, p, &fn);

	if (err || !fn)
		return err;
	return pftr_each_field(r, &p->reader, &p->event, "a TrackEvent", fn, NULL);
}

static int pftr_pass1(struct pftr *r, struct pftr_packet *p)
{
	int err = 0;

	r->stats.packets++;
	if (p->track.data)
		err = pftr_read_descriptor(r, p);
	if (!err && p->clock.data && !r->has_clock)
		err = pftr_read_clock(r, p);
	if (!err && p->event.data)
		err = pftr_read_own_event(r, p);
	return err;
}

/* Between the passes: tracks into the timeline, each after its parent. */

static void pftr_apply_kind(struct pftr *r, struct tl_track_desc *t)
{
	uint64_t v = 0;

	if (!pftr_map_get(&r->track_kinds, t->uuid, &v))
		return;
	t->kind = (enum tl_track_kind)(v >> 32);
	t->cpu = (int32_t)(uint32_t)v;
	t->pid = t->tid = 0; /* a kernel track takes them from its thread */
}

static int pftr_add_desc(struct pftr *r, struct pftr_desc *d)
{
	d->track.name = tl_str_get(r->tl, d->name);
	pftr_apply_kind(r, &d->track);
	d->state = PFTR_DESC_ADDED;
	return tl_add_track(r->tl, &d->track) < 0 ? pftr_model_fail(r) : 0;
}

/* Add descriptor I after its ancestors; CHAIN has room for every descriptor. */
static int pftr_add_chain(struct pftr *r, size_t i, size_t *chain)
{
	size_t n = 0;
	uint64_t parent = 0;

	for (size_t j = i; r->descs[j].state != PFTR_DESC_ADDED;) {
		struct pftr_desc *d = &r->descs[j];

		if (d->state == PFTR_DESC_VISITING)
			return pftr_fail(r, -EINVAL, "track %" PRIu64 " is its own ancestor",
					 d->track.uuid);
		d->state = PFTR_DESC_VISITING;
		chain[n++] = j;
		if (!d->track.parent_uuid)
			break;
		if (!pftr_map_get(&r->desc_index, d->track.parent_uuid, &parent))
			return pftr_fail(r, -EINVAL,
					 "track %" PRIu64 " ('%s') has parent %" PRIu64
					 ", which no TrackDescriptor describes",
					 d->track.uuid, tl_str_get(r->tl, d->name),
					 d->track.parent_uuid);
		j = parent;
	}
	while (n--) {
		int err = pftr_add_desc(r, &r->descs[chain[n]]);

		if (err)
			return err;
	}
	return 0;
}

/* A hybtrace track that "track kinds" does not claim is the writer's, not the timeline's. */
static void pftr_drop_writers_track(struct pftr *r)
{
	uint64_t index, kind;

	if (pftr_map_get(&r->desc_index, TL_HYBTRACE_UUID, &index) &&
	    !pftr_map_get(&r->track_kinds, TL_HYBTRACE_UUID, &kind))
		r->descs[index].state = PFTR_DESC_ADDED;
}

static int pftr_add_tracks(struct pftr *r)
{
	size_t *chain = malloc((r->ndescs + 1) * sizeof(*chain));
	int err = 0;

	if (!chain)
		return pftr_nomem(r);
	pftr_drop_writers_track(r);
	for (size_t i = 0; !err && i < r->ndescs; i++)
		err = pftr_add_chain(r, i, chain);
	free(chain);
	if (err)
		return err;
	r->nopen = tl_track_count(r->tl);
	r->open = calloc(r->nopen + 1, sizeof(*r->open));
	return r->open ? 0 : pftr_nomem(r);
}

/* Pass 2: interned data and defaults. */

struct pftr_intern_ctx {
	struct pftr_seq *seq;
	uint64_t iid;
	struct pb_field string;
	struct pftr_list list;
	struct pftr_frame frame;
};

static int pftr_push_id(struct pftr *r, void *ctx, uint64_t id)
{
	struct pftr_intern_ctx *c = ctx;
	struct pftr_seq *s = c->seq;

	if (PFTR_GROW(s->ids, s->ids_cap, s->nids + 1))
		return pftr_nomem(r);
	s->ids[s->nids++] = id;
	c->list.count++;
	return 0;
}

/* EventName, EventCategory, DebugAnnotationName, InternedString: {iid 1, name/str 2}. */
static int pftr_string_entry_field(struct pftr *r, const struct pb_reader *msg,
				   const struct pb_field *f, void *ctx)
{
	struct pftr_intern_ctx *c = ctx;

	(void)msg;
	if (f->number == PFT_INTERNED_IID)
		return pftr_scalar(r, f, PB_WIRE_VARINT, "an interned string", &c->iid);
	if (f->number == PFT_INTERNED_STRING)
		return pftr_keep(r, f, "an interned string", &c->string);
	return 0;
}

static int pftr_mapping_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			      void *ctx)
{
	struct pftr_intern_ctx *c = ctx;

	if (f->number == PFT_MAPPING_IID)
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Mapping", &c->iid);
	if (f->number == PFT_MAPPING_PATH_STRING_IDS)
		return pftr_repeated(r, msg, f, PB_WIRE_VARINT, "Mapping", pftr_push_id, c);
	return 0;
}

static int pftr_callstack_field(struct pftr *r, const struct pb_reader *msg,
				const struct pb_field *f, void *ctx)
{
	struct pftr_intern_ctx *c = ctx;

	if (f->number == PFT_CALLSTACK_IID)
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Callstack", &c->iid);
	if (f->number == PFT_CALLSTACK_FRAME_IDS)
		return pftr_repeated(r, msg, f, PB_WIRE_VARINT, "Callstack", pftr_push_id, c);
	return 0;
}

static int pftr_frame_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    void *ctx)
{
	struct pftr_intern_ctx *c = ctx;

	(void)msg;
	switch (f->number) {
	case PFT_FRAME_IID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Frame", &c->iid);
	case PFT_FRAME_FUNCTION_NAME_ID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Frame", &c->frame.function_iid);
	case PFT_FRAME_MAPPING_ID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Frame", &c->frame.mapping_iid);
	case PFT_FRAME_REL_PC:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "Frame", &c->frame.rel_pc);
	}
	return 0;
}

/*
 * Record iid -> VALUE in MAP. Perfetto forbids giving an iid a second
 * meaning; if a file does, resolved call stacks may be stale, so forget them.
 */
static int pftr_define(struct pftr *r, struct pftr_seq *s, struct pftr_map *map, uint64_t iid,
		       uint64_t value)
{
	bool existed;

	if (!iid)
		return 0; /* 0 means "not set" */
	if (pftr_map_put(map, iid, value, &existed))
		return pftr_nomem(r);
	if (existed) {
		pftr_map_free(&s->module_of);
		pftr_map_free(&s->resolved);
	}
	return 0;
}

static int pftr_string_entry(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			     struct pftr_seq *s, enum pftr_table table)
{
	struct pftr_intern_ctx c = {.seq = s};
	tl_str id = 0;
	int err;

	err = pftr_each_field(r, msg, f, "InternedData", pftr_string_entry_field, &c);
	if (!err && c.string.data)
		err = pftr_string(r, &c.string, "an interned string", &id);
	return err ? err : pftr_define(r, s, &s->strings[table], c.iid, id);
}

/* A Mapping or Callstack: an iid and a list of ids. */
static int pftr_list_entry(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			   struct pftr_seq *s, pftr_field_fn fn, struct pftr_map *map)
{
	struct pftr_intern_ctx c = {.seq = s, .list.first = s->nids};
	int err;

	err = pftr_each_field(r, msg, f, "InternedData", fn, &c);
	if (err)
		return err;
	if (PFTR_GROW(s->lists, s->lists_cap, s->nlists + 1))
		return pftr_nomem(r);
	s->lists[s->nlists] = c.list;
	return pftr_define(r, s, map, c.iid, s->nlists++);
}

static int pftr_frame_entry(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    struct pftr_seq *s)
{
	struct pftr_intern_ctx c = {.seq = s};
	int err;

	err = pftr_each_field(r, msg, f, "InternedData", pftr_frame_field, &c);
	if (err)
		return err;
	if (PFTR_GROW(s->frame_recs, s->frame_recs_cap, s->nframe_recs + 1))
		return pftr_nomem(r);
	s->frame_recs[s->nframe_recs] = c.frame;
	return pftr_define(r, s, &s->frames, c.iid, s->nframe_recs++);
}

static int pftr_interned_field(struct pftr *r, const struct pb_reader *msg,
			       const struct pb_field *f, void *ctx)
{
	struct pftr_seq *s = ctx;

	switch (f->number) {
	case PFT_INTERNED_EVENT_CATEGORIES:
		return pftr_string_entry(r, msg, f, s, PFTR_CATEGORIES);
	case PFT_INTERNED_EVENT_NAMES:
		return pftr_string_entry(r, msg, f, s, PFTR_NAMES);
	case PFT_INTERNED_ANNOTATION_NAMES:
		return pftr_string_entry(r, msg, f, s, PFTR_ANNOTATION_NAMES);
	case PFT_INTERNED_FUNCTION_NAMES:
		return pftr_string_entry(r, msg, f, s, PFTR_FUNCTION_NAMES);
	case PFT_INTERNED_MAPPING_PATHS:
		return pftr_string_entry(r, msg, f, s, PFTR_MAPPING_PATHS);
	case PFT_INTERNED_MAPPINGS:
		return pftr_list_entry(r, msg, f, s, pftr_mapping_field, &s->mappings);
	case PFT_INTERNED_CALLSTACKS:
		return pftr_list_entry(r, msg, f, s, pftr_callstack_field, &s->callstacks);
	case PFT_INTERNED_FRAMES:
		return pftr_frame_entry(r, msg, f, s);
	}
	return 0;
}

static int pftr_event_defaults_field(struct pftr *r, const struct pb_reader *msg,
				     const struct pb_field *f, void *ctx)
{
	struct pftr_seq *s = ctx;

	(void)msg;
	if (f->number != PFT_TRACK_EVENT_DEFAULTS_TRACK_UUID)
		return 0;
	return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEventDefaults", &s->default_track_uuid);
}

static int pftr_defaults_field(struct pftr *r, const struct pb_reader *msg,
			       const struct pb_field *f, void *ctx)
{
	if (f->number != PFT_DEFAULTS_TRACK_EVENT_DEFAULTS)
		return 0;
	return pftr_each_field(r, msg, f, "TrackEventDefaults", pftr_event_defaults_field, ctx);
}

/* Pass 2: looking interned things up. */

static int pftr_lookup(struct pftr *r, const struct pftr_seq *s, const struct pftr_map *map,
		       uint64_t iid, const char *what, uint64_t *value)
{
	if (pftr_map_get(map, iid, value))
		return 0;
	return pftr_fail(r, -EINVAL, "%s iid %" PRIu64 " was never interned on packet sequence %u",
			 what, iid, s->id);
}

static int pftr_lookup_string(struct pftr *r, const struct pftr_seq *s, enum pftr_table table,
			      uint64_t iid, tl_str *out)
{
	static const char *const what[PFTR_NTABLES] = {
		"event category", "event name",	  "debug annotation name",
		"function name",  "mapping path",
	};
	uint64_t v = 0;
	int err = pftr_lookup(r, s, &s->strings[table], iid, what[table], &v);

	*out = (tl_str)v;
	return err;
}

/* Append the part to PATH (PFTR_MAX_PATH_BYTES long); Perfetto joins parts with '/'. */
static int pftr_path_append(struct pftr *r, char *path, size_t *len, const char *part, bool slash)
{
	size_t n = strlen(part);

	if (*len + slash + n >= PFTR_MAX_PATH_BYTES)
		return pftr_fail(r, -EINVAL, "a mapping path is longer than %d bytes",
				 PFTR_MAX_PATH_BYTES);
	if (slash)
		path[(*len)++] = '/';
	memcpy(path + *len, part, n);
	*len += n;
	return 0;
}

/* The module a mapping names: one part as it is, several joined as Perfetto shows them. */
static int pftr_module(struct pftr *r, struct pftr_seq *s, uint64_t mapping_iid, tl_str *module)
{
	char path[PFTR_MAX_PATH_BYTES];
	const struct pftr_list *parts;
	size_t len = 0;
	uint64_t v = 0;
	int err;

	if (pftr_map_get(&s->module_of, mapping_iid, &v)) {
		*module = (tl_str)v;
		return 0;
	}
	err = pftr_lookup(r, s, &s->mappings, mapping_iid, "mapping", &v);
	if (err)
		return err;
	parts = &s->lists[v];
	if (parts->count > PFTR_MAX_PATH_PARTS)
		return pftr_fail(r, -EINVAL, "mapping %" PRIu64 " has %zu path parts", mapping_iid,
				 parts->count);
	for (size_t i = 0; i < parts->count; i++) {
		const char *text;
		tl_str part;

		err = pftr_lookup_string(r, s, PFTR_MAPPING_PATHS, s->ids[parts->first + i], &part);
		if (err)
			return err;
		text = tl_str_get(r->tl, part);
		/* "/" before every part, as Perfetto does, but never two at the start. */
		err = pftr_path_append(r, path, &len, text,
				       parts->count > 1 && !(i == 0 && text[0] == '/'));
		if (err)
			return err;
	}
	*module = tl_intern_n(r->tl, path, len);
	if (!*module && len && path[0])
		return pftr_model_fail(r);
	return pftr_map_put(&s->module_of, mapping_iid, *module, NULL) ? pftr_nomem(r) : 0;
}

static int pftr_frame(struct pftr *r, struct pftr_seq *s, uint64_t frame_iid, struct tl_frame *out)
{
	const struct pftr_frame *f;
	uint64_t v = 0;
	int err;

	err = pftr_lookup(r, s, &s->frames, frame_iid, "frame", &v);
	if (err)
		return err;
	f = &s->frame_recs[v];
	*out = (struct tl_frame){.address = f->rel_pc};
	if (f->function_iid)
		err = pftr_lookup_string(r, s, PFTR_FUNCTION_NAMES, f->function_iid,
					 &out->function);
	if (!err && f->mapping_iid)
		err = pftr_module(r, s, f->mapping_iid, &out->module);
	return err;
}

/* The timeline's call stack for CALLSTACK_IID (0 when it has too many frames to keep). */
static int pftr_callstack(struct pftr *r, struct pftr_seq *s, uint64_t callstack_iid, uint32_t *out)
{
	struct pftr_list frames;
	uint64_t v = 0;
	long id;
	int err;

	if (pftr_map_get(&s->resolved, callstack_iid, &v)) {
		*out = (uint32_t)v;
		return 0;
	}
	err = pftr_lookup(r, s, &s->callstacks, callstack_iid, "callstack", &v);
	if (err)
		return err;
	frames = s->lists[v];
	id = 0;
	if (frames.count > TL_MAX_FRAMES)
		r->stats.skipped_details++;
	for (size_t i = 0; !err && frames.count <= TL_MAX_FRAMES && i < frames.count; i++)
		err = pftr_frame(r, s, s->ids[frames.first + i], &r->frames[i]);
	if (err)
		return err;
	if (frames.count <= TL_MAX_FRAMES)
		id = tl_callstack_intern_frames(r->tl, r->frames, frames.count);
	if (id < 0)
		return pftr_model_fail(r);
	*out = (uint32_t)id;
	return pftr_map_put(&s->resolved, callstack_iid, *out, NULL) ? pftr_nomem(r) : 0;
}

/* Pass 2: track events. */

struct pftr_event {
	struct pftr_seq *seq;
	uint64_t type;
	uint64_t track_uuid;
	bool has_track_uuid;
	uint64_t name_iid;
	struct pb_field name;
	uint64_t category_iid;
	struct pb_field category;
	uint64_t callstack_iid;
	long ev; /* the timeline event it became */
	uint64_t ts_ns;
	size_t offset;
};

static int pftr_first_category(struct pftr *r, void *ctx, uint64_t iid)
{
	struct pftr_event *e = ctx;

	(void)r;
	/* The timeline keeps one category per event: the first. */
	if (!e->category_iid && !e->category.data)
		e->category_iid = iid;
	return 0;
}

static int pftr_event_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			    void *ctx)
{
	struct pftr_event *e = ctx;

	switch (f->number) {
	case PFT_EVENT_TYPE:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->type);
	case PFT_EVENT_TRACK_UUID:
		e->has_track_uuid = true;
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->track_uuid);
	case PFT_EVENT_NAME_IID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->name_iid);
	case PFT_EVENT_NAME:
		return pftr_keep(r, f, "TrackEvent", &e->name);
	case PFT_EVENT_CATEGORY_IIDS:
		return pftr_repeated(r, msg, f, PB_WIRE_VARINT, "TrackEvent", pftr_first_category,
				     e);
	case PFT_EVENT_CATEGORIES:
		if (!e->category_iid && !e->category.data)
			return pftr_keep(r, f, "TrackEvent", &e->category);
		return 0;
	case PFT_EVENT_CALLSTACK_IID:
		return pftr_scalar(r, f, PB_WIRE_VARINT, "TrackEvent", &e->callstack_iid);
	}
	return 0;
}

static int pftr_event_strings(struct pftr *r, const struct pftr_event *e, tl_str *name,
			      tl_str *category)
{
	int err = 0;

	*name = *category = 0;
	if (e->name_iid)
		err = pftr_lookup_string(r, e->seq, PFTR_NAMES, e->name_iid, name);
	else if (e->name.data)
		err = pftr_string(r, &e->name, "TrackEvent", name);
	if (!err && e->category_iid)
		err = pftr_lookup_string(r, e->seq, PFTR_CATEGORIES, e->category_iid, category);
	else if (!err && e->category.data)
		err = pftr_string(r, &e->category, "TrackEvent", category);
	return err;
}

static int pftr_begin(struct pftr *r, struct pftr_event *e, enum tl_event_kind kind, int track,
		      uint64_t ts_ns)
{
	struct pftr_open *open = &r->open[track];
	tl_str name, category;
	uint32_t callstack = 0;
	int err;

	err = pftr_event_strings(r, e, &name, &category);
	if (!err && e->callstack_iid)
		err = pftr_callstack(r, e->seq, e->callstack_iid, &callstack);
	if (err)
		return err;
	e->ev = tl_add_event(r->tl, kind, track, ts_ns, 0, name, category);
	if (e->ev < 0 || tl_event_set_callstack(r->tl, e->ev, callstack))
		return pftr_model_fail(r);
	r->stats.events++;
	if (kind == TL_EVENT_INSTANT)
		return 0;
	if (PFTR_GROW(open->events, open->cap, open->count + 1))
		return pftr_nomem(r);
	open->events[open->count++] = e->ev;
	return 0;
}

static int pftr_end(struct pftr *r, struct pftr_event *e, int track, uint64_t ts_ns, size_t offset)
{
	struct pftr_open *open = &r->open[track];
	const char *track_name = tl_str_get(r->tl, tl_track(r->tl, track)->name);
	const struct tl_event *begin;

	if (!open->count)
		return pftr_fail(r, -EINVAL,
				 "at byte %zu: SLICE_END at %" PRIu64
				 " ns on track '%s' with no slice open",
				 offset, ts_ns, track_name);
	e->ev = open->events[--open->count];
	begin = tl_event(r->tl, (size_t)e->ev);
	if (ts_ns < begin->ts_ns)
		return pftr_fail(r, -EINVAL,
				 "at byte %zu: slice '%s' on track '%s' ends at %" PRIu64
				 " ns, before it begins at %" PRIu64 " ns",
				 offset, tl_str_get(r->tl, begin->name), track_name, ts_ns,
				 begin->ts_ns);
	if (e->callstack_iid)
		r->stats.skipped_details++; /* the timeline keeps the stack of the begin */
	return tl_slice_end(r->tl, e->ev, ts_ns) ? pftr_model_fail(r) : 0;
}

/* Arguments and flows, added to the event once it exists (an end adds to its begin). */

static int pftr_keep_flow(struct pftr_event *e, struct pftr *r, uint64_t id, bool in)
{
	if (PFTR_GROW(r->flows, r->flows_cap, r->nflows + 1))
		return pftr_nomem(r);
	r->flows[r->nflows] = (struct pftr_flow){
		.ev = e->ev,
		.id = id,
		.ts_ns = e->ts_ns,
		.offset = e->offset,
		.index = r->nflows,
		.in = in,
	};
	r->nflows++;
	return 0;
}

static int pftr_flow_out(struct pftr *r, void *ctx, uint64_t id)
{
	return pftr_keep_flow(ctx, r, id, false);
}

static int pftr_flow_in(struct pftr *r, void *ctx, uint64_t id)
{
	return pftr_keep_flow(ctx, r, id, true);
}

/* Perfetto's import order for one id: by time, then file order; an event's begins first. */
static int pftr_flow_import_cmp(const void *pa, const void *pb)
{
	const struct pftr_flow *a = pa, *b = pb;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	if (a->in != b->in)
		return a->in ? 1 : -1;
	return (a->index > b->index) - (a->index < b->index);
}

static int pftr_flow_read_cmp(const void *pa, const void *pb)
{
	const struct pftr_flow *a = pa, *b = pb;

	return (a->index > b->index) - (a->index < b->index);
}

/*
 * Keep the flows Perfetto keeps (track_event_event_importer.h, flow_tracker.cc):
 * a flow id on an event begins a flow unless one with that id is active,
 * which it then passes through; a terminating id ends the active flow, and
 * one that is not active is dropped, and counted. Then the kept ids go on
 * their events in the order read.
 */
static int pftr_add_flows(struct pftr *r)
{
	if (!r->nflows)
		return 0;
	qsort(r->flows, r->nflows, sizeof(*r->flows), pftr_flow_import_cmp);
	for (size_t i = 0; i < r->nflows; i++) {
		struct pftr_flow *f = &r->flows[i];
		bool active = i && r->flows[i - 1].id == f->id && r->flows[i - 1].kept &&
			      !(r->flows[i - 1].in);

		/* ACTIVE: the previous event of this id began or passed the flow. */
		if (!f->in) {
			r->stats.flows_begun += !active;
			f->kept = true;
		} else if (active) {
			f->kept = true;
		} else {
			r->stats.flow_ends_dropped++;
		}
	}
	qsort(r->flows, r->nflows, sizeof(*r->flows), pftr_flow_read_cmp);
	for (size_t i = 0; i < r->nflows; i++) {
		const struct pftr_flow *f = &r->flows[i];
		const struct tl_event_lists *l;

		if (!f->kept)
			continue;
		l = tl_event_lists(r->tl, tl_event(r->tl, (size_t)f->ev));
		if ((f->in ? l->flows_in.count : l->flows_out.count) >= TL_MAX_FLOWS) {
			r->stats.skipped_details++;
			continue;
		}
		if (f->in ? tl_event_flow_in(r->tl, f->ev, f->id)
			  : tl_event_flow_out(r->tl, f->ev, f->id))
			return pftr_model_fail(r);
	}
	return 0;
}

static int pftr_add_annotation(struct pftr *r, struct pftr_event *e, const struct pb_reader *msg,
			       const struct pb_field *f)
{
	struct pftr_annotation a;
	int err;

	err = pftr_read_annotation(r, msg, f, &a);
	if (err)
		return err;
	if (!a.has_value ||
	    tl_event_lists(r->tl, tl_event(r->tl, (size_t)e->ev))->args.count >= TL_MAX_ARGS) {
		r->stats.skipped_details++; /* nested values, or too many */
		return 0;
	}
	if (a.name_iid)
		err = pftr_lookup_string(r, e->seq, PFTR_ANNOTATION_NAMES, a.name_iid, &a.arg.name);
	else if (a.name.data)
		err = pftr_string(r, &a.name, "DebugAnnotation", &a.arg.name);
	if (!err && a.arg.kind == TL_ARG_STR)
		err = pftr_string(r, &a.string, "DebugAnnotation", &a.arg.s);
	if (err)
		return err;
	return tl_event_arg(r->tl, e->ev, &a.arg) ? pftr_model_fail(r) : 0;
}

static int pftr_detail_field(struct pftr *r, const struct pb_reader *msg, const struct pb_field *f,
			     void *ctx)
{
	struct pftr_event *e = ctx;

	switch (f->number) {
	case PFT_EVENT_DEBUG_ANNOTATIONS:
		return pftr_add_annotation(r, e, msg, f);
	case PFT_EVENT_FLOW_IDS:
		return pftr_repeated(r, msg, f, PB_WIRE_FIXED64, "TrackEvent", pftr_flow_out, e);
	case PFT_EVENT_FLOW_IDS_OLD:
		return pftr_repeated(r, msg, f, PB_WIRE_VARINT, "TrackEvent", pftr_flow_out, e);
	case PFT_EVENT_TERMINATING_FLOW_IDS:
		return pftr_repeated(r, msg, f, PB_WIRE_FIXED64, "TrackEvent", pftr_flow_in, e);
	case PFT_EVENT_TERMINATING_FLOW_IDS_OLD:
		return pftr_repeated(r, msg, f, PB_WIRE_VARINT, "TrackEvent", pftr_flow_in, e);
	}
	return 0;
}

static int pftr_read_event(struct pftr *r, const struct pftr_packet *p, struct pftr_seq *s)
{
	struct pftr_event e = {.seq = s, .ts_ns = p->ts_ns, .offset = p->offset};
	pftr_field_fn own;
	uint64_t uuid;
	long track;
	int err;

	err = pftr_own_event(r, p, &own);
	if (err || own)
		return err; /* read in pass 1 */
	err = pftr_each_field(r, &p->reader, &p->event, "a TrackEvent", pftr_event_field, &e);
	if (err)
		return err;
	uuid = e.has_track_uuid ? e.track_uuid : s->default_track_uuid;
	track = tl_track_find(r->tl, uuid);
	if (track < 0 || !uuid ||
	    (e.type != PFT_TYPE_SLICE_BEGIN && e.type != PFT_TYPE_SLICE_END &&
	     e.type != PFT_TYPE_INSTANT)) {
		r->stats.skipped_events++; /* counters, legacy events, undescribed tracks */
		return 0;
	}
	if (e.type == PFT_TYPE_SLICE_END)
		err = pftr_end(r, &e, (int)track, p->ts_ns, p->offset);
	else
		err = pftr_begin(r, &e,
				 e.type == PFT_TYPE_INSTANT ? TL_EVENT_INSTANT : TL_EVENT_SLICE,
				 (int)track, p->ts_ns);
	if (err)
		return err;
	return pftr_each_field(r, &p->reader, &p->event, "a TrackEvent", pftr_detail_field, &e);
}

static bool pftr_packet_used(const struct pftr_packet *p)
{
	return p->event.data || p->track.data || p->clock.data || p->interned.data ||
	       p->defaults.data;
}

static int pftr_pass2(struct pftr *r, struct pftr_packet *p)
{
	struct pftr_seq *s = NULL;
	int err;

	err = pftr_seq_get(r, p->seq_id, &s);
	if (err)
		return err;
	if (p->dropped)
		s->valid = false;
	if ((p->flags & PFT_SEQ_INCREMENTAL_STATE_CLEARED) || p->cleared) {
		pftr_seq_reset(s);
		s->valid = true;
	}
	if ((p->flags & PFT_SEQ_NEEDS_INCREMENTAL_STATE) && !s->valid) {
		/* Perfetto skips these too: their interned data is gone. */
		r->stats.skipped_packets++;
		r->stats.skipped_events += p->event.data != NULL;
		return 0;
	}
	if (!pftr_packet_used(p))
		r->stats.skipped_packets++;
	if (p->defaults.data)
		err = pftr_each_field(r, &p->reader, &p->defaults, "TracePacketDefaults",
				      pftr_defaults_field, s);
	if (!err && p->interned.data)
		err = pftr_each_field(r, &p->reader, &p->interned, "InternedData",
				      pftr_interned_field, s);
	if (!err && p->event.data)
		err = pftr_read_event(r, p, s);
	return err;
}

/* After pass 2: every slice must have ended. */
static int pftr_check_open(struct pftr *r)
{
	for (size_t t = 0; t < tl_track_count(r->tl); t++) {
		const struct tl_event *e;

		if (!r->open[t].count)
			continue;
		e = tl_event(r->tl, (size_t)r->open[t].events[r->open[t].count - 1]);
		return pftr_fail(r, -EINVAL,
				 "slice '%s' on track '%s' begins at %" PRIu64 " ns and never ends",
				 tl_str_get(r->tl, e->name),
				 tl_str_get(r->tl, tl_track(r->tl, t)->name), e->ts_ns);
	}
	return 0;
}

/* Input that is plainly something else gets a message saying what it is. */
static const char *pftr_sniff(const uint8_t *data, size_t len)
{
	size_t text = 0;

	if (!len)
		return "the file is empty: there is no trace in it";
	if (len >= 4 && !memcmp(data,
				"\x7f"
				"ELF",
				4))
		return "this is an ELF file, not a Perfetto trace";
	if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b)
		return "this file is gzip-compressed: gunzip it first";
	if (len >= 8 && !memcmp(data, "PERFILE2", 8))
		return "this is a perf.data file, not a Perfetto trace";
	if (data[0] == '{' || data[0] == '[')
		return "this looks like JSON, not a Perfetto protobuf trace";
	while (text < len && text < 64 &&
	       (data[text] == '\n' || data[text] == '\t' || data[text] == '\r' ||
		(data[text] >= 0x20 && data[text] < 0x7f)))
		text++;
	if (text == len || text == 64)
		return "this looks like text, not a Perfetto protobuf trace";
	if (data[0] != 0x0a)
		return "this is not a Perfetto trace: it does not start with a TracePacket";
	return NULL;
}

static int pftr_run(struct pftr *r)
{
	const char *what = pftr_sniff(r->data, r->len);
	int err;

	if (what)
		return pftr_fail(r, -EINVAL, "%s", what);
	r->tl = tl_new();
	if (!r->tl)
		return pftr_nomem(r);
	err = pftr_each_packet(r, pftr_pass1);
	if (!err)
		err = pftr_add_tracks(r);
	if (!err)
		err = pftr_each_packet(r, pftr_pass2);
	if (!err)
		err = pftr_check_open(r);
	return err ? err : pftr_add_flows(r);
}

static void pftr_done(struct pftr *r)
{
	for (size_t i = 0; i < r->nseqs; i++)
		pftr_seq_free(&r->seqs[i]);
	free(r->seqs);
	pftr_map_free(&r->seq_index);
	free(r->descs);
	pftr_map_free(&r->desc_index);
	pftr_map_free(&r->track_kinds);
	for (size_t t = 0; t < r->nopen; t++)
		free(r->open[t].events);
	free(r->open);
	free(r->flows);
}

struct timeline *pftr_read_mem(const void *data, size_t len, struct pftr_stats *stats, char *err,
			       size_t errlen)
{
	struct pftr *r = calloc(1, sizeof(*r));
	struct timeline *tl = NULL;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	*r = (struct pftr){.data = data, .len = len, .err = err, .errlen = errlen};
	if (!pftr_run(r)) {
		tl = r->tl;
		r->tl = NULL;
		if (stats)
			*stats = r->stats;
	}
	pftr_done(r);
	tl_free(r->tl);
	free(r);
	return tl;
}

/* Read all of FD, up to PFTR_MAX_FILE_BYTES. */
static int pftr_slurp(int fd, uint8_t **data, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	size_t cap = 0;

	*data = NULL;
	*len = 0;
	if (fstat(fd, &st))
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "it is a directory");
		return -EISDIR;
	}
	for (;;) {
		ssize_t n;

		if (*len == cap &&
		    pftr_grow((void **)data, &cap, cap ? cap * 2 : (size_t)st.st_size + 1, 1))
			return -ENOMEM;
		n = read(fd, *data + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return 0;
		*len += (size_t)n;
		if (*len > PFTR_MAX_FILE_BYTES) {
			snprintf(err, errlen, "it is larger than %llu MiB",
				 PFTR_MAX_FILE_BYTES >> 20);
			return -EFBIG;
		}
	}
}

int pftr_read_file(const char *path, uint8_t **data, size_t *len, char *err, size_t errlen)
{
	char why[256] = "";
	int fd, ret;

	*data = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	ret = pftr_slurp(fd, data, len, why, sizeof(why));
	close(fd);
	if (ret) {
		snprintf(err, errlen, "cannot read %s: %s", path, why[0] ? why : strerror(-ret));
		return -1;
	}
	return 0;
}

struct timeline *pftr_read_path(const char *path, struct pftr_stats *stats, char *err,
				size_t errlen)
{
	struct timeline *tl;
	char why[256] = "";
	uint8_t *data;
	size_t len;

	if (pftr_read_file(path, &data, &len, err, errlen))
		return NULL;
	tl = pftr_read_mem(data, len, stats, why, sizeof(why));
	if (!tl)
		snprintf(err, errlen, "%s: %s", path, why);
	free(data);
	return tl;
}
