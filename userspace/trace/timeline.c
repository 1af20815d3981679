// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The timeline model: see timeline.h. Everything lives in growable arrays
 * owned by struct timeline; strings, frames and call stacks are found again
 * through open-addressing hash indexes, so interning stays O(1) for the
 * hundreds of thousands of events a dump can hold.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace/timeline.h"
#include "base/clock.h"

/* Strings are packed into chunks that never move, so tl_str_get() pointers stay valid. */
#define TL_CHUNK_BYTES (64 * 1024)
/* Ids are uint32_t with 0 reserved, and event indices must fit a long on 32-bit too. */
#define TL_MAX_ITEMS ((size_t)INT32_MAX)
/*
 * Uuids the timeline picks for tracks added with uuid 0 start here: small,
 * because every event names its track, and a varint of a small number is
 * two bytes where one of a 64-bit hash is nine.
 */
#define TL_AUTO_UUID_BASE 0x1000ull

/* An open-addressing table of ids (never 0), each kept with its hash. */
struct tl_slot {
	uint32_t id;
	uint32_t hash;
};

struct tl_index {
	struct tl_slot *slots;
	size_t cap; /* a power of two, or 0 */
	size_t count;
};

struct tl_callstack {
	uint32_t first; /* into cs_frames */
	uint32_t depth;
};

struct tl_meta {
	tl_str key;
	tl_str value;
};

struct tl_string {
	const char *text;
	uint32_t len;
};

struct timeline {
	/* Strings by id; id 0 is "". */
	char **chunks;
	size_t nchunks, chunks_cap;
	size_t chunk_used, chunk_size;
	struct tl_string *strs;
	size_t nstrs, strs_cap;
	struct tl_index str_index;

	struct tl_track *tracks;
	size_t ntracks, tracks_cap;
	struct tl_index track_index;

	struct tl_event *events;
	size_t nevents, events_cap;

	/* The events' lists, and the pools behind them; entry 0 of each is unused. */
	struct tl_event_lists *lists;
	size_t nlists, lists_cap;
	struct tl_arg *args;
	size_t nargs, args_cap;
	struct tl_flow *flows;
	size_t nflows, flows_cap;

	struct tl_frame *frames; /* frames[0] unused */
	size_t nframes, frames_cap;
	struct tl_index frame_index;
	struct tl_callstack *callstacks; /* callstacks[0] unused */
	size_t ncallstacks, callstacks_cap;
	uint32_t *cs_frames;
	size_t ncs_frames, cs_frames_cap;
	struct tl_index cs_index;

	struct tl_meta *meta;
	size_t nmeta, meta_cap;
	struct tl_index meta_index; /* by key */

	struct tl_clock_snapshot clock;
	bool has_clock;

	int err;
	char errmsg[160];
};

/* Errors. */

static int tl_fail(struct timeline *tl, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int tl_fail(struct timeline *tl, int err, const char *fmt, ...)
{
	va_list ap;

	if (tl->err)
		return err;
	tl->err = err;
	va_start(ap, fmt);
	vsnprintf(tl->errmsg, sizeof(tl->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

static int tl_nomem(struct timeline *tl)
{
	return tl_fail(tl, -ENOMEM, "out of memory");
}

int tl_error(const struct timeline *tl)
{
	return tl->err;
}

const char *tl_strerror(const struct timeline *tl)
{
	return tl->err ? tl->errmsg : "no error";
}

/* Growable arrays: returns the (maybe moved) array, or NULL leaving it as it was. */
static void *tl_grow(void *array, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return array;
	if (need > TL_MAX_ITEMS)
		return NULL;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / elem)
		return NULL;
	p = realloc(array, ncap * elem);
	if (!p)
		return NULL;
	*cap = ncap;
	return p;
}

#define TL_GROW(tl, array, cap, need)                                                              \
	({                                                                                         \
		void *tl_p_ = tl_grow((tl)->array, &(tl)->cap, (need), sizeof(*(tl)->array));      \
		if (tl_p_)                                                                         \
			(tl)->array = tl_p_;                                                       \
		tl_p_ ? 0 : tl_nomem(tl);                                                          \
	})

/* Hashing. */

static uint32_t tl_hash_bytes(const void *data, size_t len, uint64_t h)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull; /* FNV-1a */
	}
	return (uint32_t)(h ^ (h >> 32));
}

static uint64_t tl_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

#define TL_FNV_SEED 0xcbf29ce484222325ull

typedef bool (*tl_index_eq)(const struct timeline *tl, uint32_t id, const void *key);

static uint32_t tl_index_find(const struct timeline *tl, const struct tl_index *ix, uint32_t hash,
			      tl_index_eq eq, const void *key)
{
	size_t mask = ix->cap - 1;

	if (!ix->cap)
		return 0;
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		const struct tl_slot *s = &ix->slots[i];

		if (!s->id)
			return 0;
		if (s->hash == hash && eq(tl, s->id, key))
			return s->id;
	}
}

static void tl_index_place(struct tl_slot *slots, size_t cap, struct tl_slot slot)
{
	size_t i = slot.hash & (cap - 1);

	while (slots[i].id)
		i = (i + 1) & (cap - 1);
	slots[i] = slot;
}

static int tl_index_insert(struct timeline *tl, struct tl_index *ix, uint32_t hash, uint32_t id)
{
	/* Keep the load under one half so probe runs stay short. */
	if ((ix->count + 1) * 2 > ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 64;
		struct tl_slot *slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return tl_nomem(tl);
		for (size_t i = 0; i < ix->cap; i++)
			if (ix->slots[i].id)
				tl_index_place(slots, cap, ix->slots[i]);
		free(ix->slots);
		ix->slots = slots;
		ix->cap = cap;
	}
	tl_index_place(ix->slots, ix->cap, (struct tl_slot){id, hash});
	ix->count++;
	return 0;
}

/* Strings. */

struct tl_str_key {
	const char *s;
	size_t len;
};

static bool tl_str_eq(const struct timeline *tl, uint32_t id, const void *key)
{
	const struct tl_str_key *k = key;

	return tl->strs[id].len == k->len && !memcmp(tl->strs[id].text, k->s, k->len);
}

/* Copy LEN bytes and a NUL into the chunk arena. */
static const char *tl_str_store(struct timeline *tl, const char *s, size_t len)
{
	char *dst;

	if (!tl->nchunks || tl->chunk_size - tl->chunk_used < len + 1) {
		size_t size = len + 1 > TL_CHUNK_BYTES ? len + 1 : TL_CHUNK_BYTES;
		char *chunk;

		if (TL_GROW(tl, chunks, chunks_cap, tl->nchunks + 1))
			return NULL;
		chunk = malloc(size);
		if (!chunk) {
			tl_nomem(tl);
			return NULL;
		}
		tl->chunks[tl->nchunks++] = chunk;
		tl->chunk_size = size;
		tl->chunk_used = 0;
	}
	dst = tl->chunks[tl->nchunks - 1] + tl->chunk_used;
	memcpy(dst, s, len);
	dst[len] = '\0';
	tl->chunk_used += len + 1;
	return dst;
}

static int tl_strings_init(struct timeline *tl)
{
	if (TL_GROW(tl, strs, strs_cap, 1))
		return -ENOMEM;
	tl->strs[0] = (struct tl_string){"", 0};
	tl->nstrs = 1;
	return 0;
}

tl_str tl_intern_n(struct timeline *tl, const char *s, size_t len)
{
	struct tl_str_key key;
	const char *copy;
	uint32_t hash, id;

	if (!s)
		return 0;
	/* Strings in the model are C strings: whatever follows a NUL is not part of it. */
	key = (struct tl_str_key){s, strnlen(s, len)};
	if (!key.len)
		return 0;
	if (key.len > UINT32_MAX - 1) {
		tl_fail(tl, -E2BIG, "string of %zu bytes is too long", key.len);
		return 0;
	}
	hash = tl_hash_bytes(key.s, key.len, TL_FNV_SEED);
	id = tl_index_find(tl, &tl->str_index, hash, tl_str_eq, &key);
	if (id)
		return id;
	if (TL_GROW(tl, strs, strs_cap, tl->nstrs + 1))
		return 0;
	copy = tl_str_store(tl, key.s, key.len);
	if (!copy)
		return 0;
	id = (uint32_t)tl->nstrs;
	if (tl_index_insert(tl, &tl->str_index, hash, id))
		return 0;
	tl->strs[id] = (struct tl_string){copy, (uint32_t)key.len};
	tl->nstrs++;
	return id;
}

tl_str tl_intern(struct timeline *tl, const char *s)
{
	return s ? tl_intern_n(tl, s, strlen(s)) : 0;
}

const char *tl_str_get(const struct timeline *tl, tl_str id)
{
	return id < tl->nstrs ? tl->strs[id].text : "";
}

size_t tl_str_count(const struct timeline *tl)
{
	return tl->nstrs - 1;
}

/* Whether S, a non-empty string, failed to intern (an error is then recorded). */
static bool tl_intern_failed(const char *s, tl_str id)
{
	return s && *s && !id;
}

/* Lifecycle. */

struct timeline *tl_new(void)
{
	struct timeline *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return NULL;
	if (tl_strings_init(tl)) {
		tl_free(tl);
		return NULL;
	}
	return tl;
}

void tl_free(struct timeline *tl)
{
	if (!tl)
		return;
	for (size_t i = 0; i < tl->nchunks; i++)
		free(tl->chunks[i]);
	free(tl->chunks);
	free(tl->strs);
	free(tl->str_index.slots);
	free(tl->tracks);
	free(tl->track_index.slots);
	free(tl->events);
	free(tl->lists);
	free(tl->args);
	free(tl->flows);
	free(tl->frames);
	free(tl->frame_index.slots);
	free(tl->callstacks);
	free(tl->cs_frames);
	free(tl->cs_index.slots);
	free(tl->meta);
	free(tl->meta_index.slots);
	free(tl);
}

/* Tracks. */

static bool tl_track_eq(const struct timeline *tl, uint32_t id, const void *key)
{
	return tl->tracks[id - 1].uuid == *(const uint64_t *)key;
}

long tl_track_find(const struct timeline *tl, uint64_t uuid)
{
	uint32_t hash = (uint32_t)tl_mix64(uuid);
	uint32_t id = tl_index_find(tl, &tl->track_index, hash, tl_track_eq, &uuid);

	return id ? (long)id - 1 : -ENOENT;
}

static uint64_t tl_unused_uuid(const struct timeline *tl)
{
	uint64_t uuid = TL_AUTO_UUID_BASE + tl->ntracks + 1;

	while (tl_track_find(tl, uuid) >= 0)
		uuid++;
	return uuid;
}

/* Fill T from DESC, keeping only the ids its kind uses. */
static int tl_track_from_desc(struct timeline *tl, const struct tl_track_desc *desc,
			      struct tl_track *t)
{
	const struct tl_track *parent = NULL;
	long p;

	*t = (struct tl_track){.kind = desc->kind, .parent_uuid = desc->parent_uuid};
	if (desc->parent_uuid) {
		p = tl_track_find(tl, desc->parent_uuid);
		if (p < 0)
			return tl_fail(tl, -ENOENT,
				       "track '%s': parent uuid %" PRIu64 " is not a track",
				       desc->name ? desc->name : "", desc->parent_uuid);
		parent = &tl->tracks[p];
	}
	switch (desc->kind) {
	case TL_TRACK_GLOBAL:
		return 0;
	case TL_TRACK_PROCESS:
		t->pid = desc->pid;
		return 0;
	case TL_TRACK_THREAD:
		t->pid = desc->pid;
		t->tid = desc->tid;
		return 0;
	case TL_TRACK_THREAD_KERNEL:
		if (!parent || parent->kind != TL_TRACK_THREAD)
			return tl_fail(tl, -EINVAL,
				       "kernel track '%s' needs a thread track as parent",
				       desc->name ? desc->name : "");
		t->pid = parent->pid;
		t->tid = parent->tid;
		return 0;
	case TL_TRACK_CPU:
		t->cpu = desc->cpu;
		return 0;
	}
	return tl_fail(tl, -EINVAL, "unknown track kind %d", (int)desc->kind);
}

int tl_add_track(struct timeline *tl, const struct tl_track_desc *desc)
{
	struct tl_track t;
	int err;

	err = tl_track_from_desc(tl, desc, &t);
	if (err)
		return err;
	t.uuid = desc->uuid ? desc->uuid : tl_unused_uuid(tl);
	if (t.uuid == TL_HYBTRACE_UUID && (t.kind != TL_TRACK_GLOBAL || t.parent_uuid))
		return tl_fail(tl, -EINVAL, "the hybtrace track is a global track without parent");
	if (t.uuid == t.parent_uuid)
		return tl_fail(tl, -EINVAL, "track %" PRIu64 " is its own parent", t.uuid);
	if (tl_track_find(tl, t.uuid) >= 0)
		return tl_fail(tl, -EEXIST, "two tracks have uuid %" PRIu64, t.uuid);
	t.name = tl_intern(tl, desc->name);
	if (tl_intern_failed(desc->name, t.name))
		return tl->err;
	if (TL_GROW(tl, tracks, tracks_cap, tl->ntracks + 1))
		return -ENOMEM;
	err = tl_index_insert(tl, &tl->track_index, (uint32_t)tl_mix64(t.uuid),
			      (uint32_t)tl->ntracks + 1);
	if (err)
		return err;
	tl->tracks[tl->ntracks] = t;
	return (int)tl->ntracks++;
}

size_t tl_track_count(const struct timeline *tl)
{
	return tl->ntracks;
}

const struct tl_track *tl_track(const struct timeline *tl, size_t index)
{
	return index < tl->ntracks ? &tl->tracks[index] : NULL;
}

/* Events. */

long tl_add_event(struct timeline *tl, enum tl_event_kind kind, int track, uint64_t ts_ns,
		  uint64_t dur_ns, tl_str name, tl_str category)
{
	struct tl_event *ev;

	if (track < 0 || (size_t)track >= tl->ntracks)
		return tl_fail(tl, -EINVAL, "event '%s' on track %d, which does not exist",
			       tl_str_get(tl, name), track);
	if (kind != TL_EVENT_SLICE && kind != TL_EVENT_INSTANT)
		return tl_fail(tl, -EINVAL, "unknown event kind %d", (int)kind);
	if (kind == TL_EVENT_INSTANT && dur_ns)
		return tl_fail(tl, -EINVAL, "instant '%s' with a duration", tl_str_get(tl, name));
	if (ts_ns + dur_ns < ts_ns)
		return tl_fail(tl, -ERANGE, "slice '%s' ends past the end of time",
			       tl_str_get(tl, name));
	if (name >= tl->nstrs || category >= tl->nstrs)
		return tl_fail(tl, -EINVAL, "event with a string id that is not interned");
	if (TL_GROW(tl, events, events_cap, tl->nevents + 1))
		return -ENOMEM;
	ev = &tl->events[tl->nevents];
	*ev = (struct tl_event){
		.ts_ns = ts_ns,
		.dur_ns = dur_ns,
		.track = (uint32_t)track,
		.kind = kind,
		.name = name,
		.category = category,
	};
	return (long)tl->nevents++;
}

static long tl_add_named(struct timeline *tl, enum tl_event_kind kind, int track, uint64_t ts_ns,
			 uint64_t dur_ns, const char *name, const char *category)
{
	tl_str name_id = tl_intern(tl, name);
	tl_str category_id = tl_intern(tl, category);

	if (tl_intern_failed(name, name_id) || tl_intern_failed(category, category_id))
		return tl->err;
	return tl_add_event(tl, kind, track, ts_ns, dur_ns, name_id, category_id);
}

long tl_add_slice(struct timeline *tl, int track, uint64_t ts_ns, uint64_t dur_ns, const char *name,
		  const char *category)
{
	return tl_add_named(tl, TL_EVENT_SLICE, track, ts_ns, dur_ns, name, category);
}

long tl_add_instant(struct timeline *tl, int track, uint64_t ts_ns, const char *name,
		    const char *category)
{
	return tl_add_named(tl, TL_EVENT_INSTANT, track, ts_ns, 0, name, category);
}

/* The event EV names, or NULL; then tl_ev_error() says why. */
static struct tl_event *tl_ev(struct timeline *tl, long ev)
{
	return ev >= 0 && (size_t)ev < tl->nevents ? &tl->events[ev] : NULL;
}

/* An error held in EV itself passes through; an index out of range is an error of its own. */
static int tl_ev_error(struct timeline *tl, long ev)
{
	if (ev < 0 && ev >= INT_MIN)
		return (int)ev;
	return tl_fail(tl, -EINVAL, "event %ld does not exist", ev);
}

int tl_slice_end(struct timeline *tl, long ev, uint64_t end_ns)
{
	struct tl_event *e = tl_ev(tl, ev);

	if (!e)
		return tl_ev_error(tl, ev);
	if (e->kind != TL_EVENT_SLICE)
		return tl_fail(tl, -EINVAL, "'%s' is an instant, not a slice",
			       tl_str_get(tl, e->name));
	if (end_ns < e->ts_ns)
		return tl_fail(tl, -EINVAL, "slice '%s' ends at %" PRIu64 " ns, before it starts",
			       tl_str_get(tl, e->name), end_ns);
	e->dur_ns = end_ns - e->ts_ns;
	return 0;
}

size_t tl_event_count(const struct timeline *tl)
{
	return tl->nevents;
}

const struct tl_event *tl_event(const struct timeline *tl, size_t index)
{
	return index < tl->nevents ? &tl->events[index] : NULL;
}

const struct tl_event *tl_events(const struct timeline *tl)
{
	return tl->events;
}

static const struct tl_event_lists tl_no_lists;

const struct tl_event_lists *tl_event_lists(const struct timeline *tl, const struct tl_event *e)
{
	return e->lists && e->lists < tl->nlists ? &tl->lists[e->lists] : &tl_no_lists;
}

/* The event's lists to add to, made at its first argument or flow; NULL when out of memory. */
static struct tl_event_lists *tl_lists_for(struct timeline *tl, struct tl_event *e)
{
	if (e->lists)
		return &tl->lists[e->lists];
	if (TL_GROW(tl, lists, lists_cap, tl->nlists + 2))
		return NULL;
	if (!tl->nlists)
		tl->nlists = 1;
	e->lists = (uint32_t)tl->nlists++;
	tl->lists[e->lists] = (struct tl_event_lists){0};
	return &tl->lists[e->lists];
}

/* Append pool entry INDEX to LIST; NEXT is the entry's link field. */
static void tl_list_append(struct tl_list *list, uint32_t index, uint32_t *last_next)
{
	if (list->first)
		*last_next = index;
	else
		list->first = index;
	list->last = index;
	list->count++;
}

int tl_event_arg(struct timeline *tl, long ev, const struct tl_arg *arg)
{
	struct tl_event_lists *lists;
	struct tl_event *e;
	uint32_t index;

	e = tl_ev(tl, ev);
	if (!e)
		return tl_ev_error(tl, ev);
	if (tl_event_lists(tl, e)->args.count >= TL_MAX_ARGS)
		return tl_fail(tl, -E2BIG, "event '%s' has more than %d arguments",
			       tl_str_get(tl, e->name), TL_MAX_ARGS);
	if (arg->kind > TL_ARG_STR)
		return tl_fail(tl, -EINVAL, "unknown argument kind %d", (int)arg->kind);
	if (arg->name >= tl->nstrs || (arg->kind == TL_ARG_STR && arg->s >= tl->nstrs))
		return tl_fail(tl, -EINVAL, "argument with a string id that is not interned");
	lists = tl_lists_for(tl, e);
	if (!lists || TL_GROW(tl, args, args_cap, tl->nargs + 2))
		return -ENOMEM;
	if (!tl->nargs)
		tl->nargs = 1;
	index = (uint32_t)tl->nargs++;
	tl->args[index] = *arg;
	tl->args[index].next = 0;
	tl_list_append(&lists->args, index, &tl->args[lists->args.last].next);
	return 0;
}

static int tl_arg_named(struct timeline *tl, long ev, const char *name, struct tl_arg *arg)
{
	if (ev < 0)
		return (int)ev;
	arg->name = tl_intern(tl, name);
	if (tl_intern_failed(name, arg->name))
		return tl->err;
	return tl_event_arg(tl, ev, arg);
}

int tl_event_arg_int(struct timeline *tl, long ev, const char *name, int64_t value)
{
	struct tl_arg arg = {.kind = TL_ARG_INT, .i = value};

	return tl_arg_named(tl, ev, name, &arg);
}

int tl_event_arg_uint(struct timeline *tl, long ev, const char *name, uint64_t value)
{
	struct tl_arg arg = {.kind = TL_ARG_UINT, .u = value};

	return tl_arg_named(tl, ev, name, &arg);
}

int tl_event_arg_double(struct timeline *tl, long ev, const char *name, double value)
{
	struct tl_arg arg = {.kind = TL_ARG_DOUBLE, .d = value};

	return tl_arg_named(tl, ev, name, &arg);
}

int tl_event_arg_str(struct timeline *tl, long ev, const char *name, const char *value)
{
	struct tl_arg arg = {.kind = TL_ARG_STR};

	if (ev < 0)
		return (int)ev;
	arg.s = tl_intern(tl, value);
	if (tl_intern_failed(value, arg.s))
		return tl->err;
	return tl_arg_named(tl, ev, name, &arg);
}

static int tl_event_flow(struct timeline *tl, long ev, uint64_t flow_id, bool in)
{
	const struct tl_event_lists *have;
	struct tl_event_lists *lists;
	struct tl_event *e;
	struct tl_list *list;
	uint32_t index;

	e = tl_ev(tl, ev);
	if (!e)
		return tl_ev_error(tl, ev);
	have = tl_event_lists(tl, e);
	if ((in ? &have->flows_in : &have->flows_out)->count >= TL_MAX_FLOWS)
		return tl_fail(tl, -E2BIG, "event '%s' has more than %d flows %s",
			       tl_str_get(tl, e->name), TL_MAX_FLOWS, in ? "in" : "out");
	lists = tl_lists_for(tl, e);
	if (!lists || TL_GROW(tl, flows, flows_cap, tl->nflows + 2))
		return -ENOMEM;
	list = in ? &lists->flows_in : &lists->flows_out;
	if (!tl->nflows)
		tl->nflows = 1;
	index = (uint32_t)tl->nflows++;
	tl->flows[index] = (struct tl_flow){.id = flow_id};
	tl_list_append(list, index, &tl->flows[list->last].next);
	return 0;
}

int tl_event_flow_out(struct timeline *tl, long ev, uint64_t flow_id)
{
	return tl_event_flow(tl, ev, flow_id, false);
}

int tl_event_flow_in(struct timeline *tl, long ev, uint64_t flow_id)
{
	return tl_event_flow(tl, ev, flow_id, true);
}

const struct tl_arg *tl_arg(const struct timeline *tl, uint32_t index)
{
	return index && index < tl->nargs ? &tl->args[index] : NULL;
}

const struct tl_flow *tl_flow(const struct timeline *tl, uint32_t index)
{
	return index && index < tl->nflows ? &tl->flows[index] : NULL;
}

const struct tl_arg *tl_event_find_arg(const struct timeline *tl, const struct tl_event *e,
				       const char *name)
{
	for (uint32_t i = tl_event_lists(tl, e)->args.first; i; i = tl_arg(tl, i)->next) {
		const struct tl_arg *a = tl_arg(tl, i);

		if (!strcmp(tl_str_get(tl, a->name), name))
			return a;
	}
	return NULL;
}

/* Frames and call stacks. */

static uint32_t tl_frame_hash(const struct tl_frame *f)
{
	return (uint32_t)tl_mix64(tl_mix64(f->address) ^ ((uint64_t)f->function << 32 | f->module));
}

static bool tl_frame_eq(const struct timeline *tl, uint32_t id, const void *key)
{
	const struct tl_frame *a = &tl->frames[id], *b = key;

	return a->function == b->function && a->module == b->module && a->address == b->address;
}

/* Intern one frame; returns its id, or 0 with an error recorded. */
static uint32_t tl_frame_intern(struct timeline *tl, const struct tl_frame *f)
{
	uint32_t hash = tl_frame_hash(f);
	uint32_t id = tl_index_find(tl, &tl->frame_index, hash, tl_frame_eq, f);

	if (id)
		return id;
	if (TL_GROW(tl, frames, frames_cap, tl->nframes + 2))
		return 0;
	if (!tl->nframes)
		tl->nframes = 1;
	id = (uint32_t)tl->nframes;
	if (tl_index_insert(tl, &tl->frame_index, hash, id))
		return 0;
	tl->frames[tl->nframes++] = *f;
	return id;
}

struct tl_cs_key {
	const uint32_t *frame_ids;
	size_t depth;
};

static bool tl_cs_eq(const struct timeline *tl, uint32_t id, const void *key)
{
	const struct tl_cs_key *k = key;
	const struct tl_callstack *cs = &tl->callstacks[id];

	return cs->depth == k->depth &&
	       !memcmp(&tl->cs_frames[cs->first], k->frame_ids, k->depth * sizeof(uint32_t));
}

static long tl_cs_intern_ids(struct timeline *tl, const uint32_t *frame_ids, size_t depth)
{
	struct tl_cs_key key = {frame_ids, depth};
	uint32_t hash = tl_hash_bytes(frame_ids, depth * sizeof(uint32_t), TL_FNV_SEED);
	uint32_t id = tl_index_find(tl, &tl->cs_index, hash, tl_cs_eq, &key);

	if (id)
		return id;
	if (TL_GROW(tl, callstacks, callstacks_cap, tl->ncallstacks + 2) ||
	    TL_GROW(tl, cs_frames, cs_frames_cap, tl->ncs_frames + depth))
		return -ENOMEM;
	if (!tl->ncallstacks)
		tl->ncallstacks = 1;
	id = (uint32_t)tl->ncallstacks;
	if (tl_index_insert(tl, &tl->cs_index, hash, id))
		return -ENOMEM;
	memcpy(&tl->cs_frames[tl->ncs_frames], frame_ids, depth * sizeof(uint32_t));
	tl->callstacks[tl->ncallstacks++] = (struct tl_callstack){
		.first = (uint32_t)tl->ncs_frames,
		.depth = (uint32_t)depth,
	};
	tl->ncs_frames += depth;
	return id;
}

long tl_callstack_intern_frames(struct timeline *tl, const struct tl_frame *frames, size_t n)
{
	uint32_t ids[TL_MAX_FRAMES];

	if (n > TL_MAX_FRAMES)
		return tl_fail(tl, -E2BIG, "call stack of %zu frames (at most %d)", n,
			       TL_MAX_FRAMES);
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (frames[i].function >= tl->nstrs || frames[i].module >= tl->nstrs)
			return tl_fail(tl, -EINVAL, "frame with a string id that is not interned");
		ids[i] = tl_frame_intern(tl, &frames[i]);
		if (!ids[i])
			return tl->err;
	}
	return tl_cs_intern_ids(tl, ids, n);
}

long tl_callstack_intern(struct timeline *tl, const struct tl_frame_desc *frames, size_t n)
{
	struct tl_frame *f;
	long id;

	if (n > TL_MAX_FRAMES)
		return tl_fail(tl, -E2BIG, "call stack of %zu frames (at most %d)", n,
			       TL_MAX_FRAMES);
	if (!n)
		return 0;
	f = malloc(n * sizeof(*f));
	if (!f)
		return tl_nomem(tl);
	id = 0;
	for (size_t i = 0; i < n && !id; i++) {
		f[i].function = tl_intern(tl, frames[i].function);
		f[i].module = tl_intern(tl, frames[i].module);
		f[i].address = frames[i].address;
		if (tl_intern_failed(frames[i].function, f[i].function) ||
		    tl_intern_failed(frames[i].module, f[i].module))
			id = tl->err;
	}
	if (!id)
		id = tl_callstack_intern_frames(tl, f, n);
	free(f);
	return id;
}

int tl_event_set_callstack(struct timeline *tl, long ev, uint32_t callstack)
{
	struct tl_event *e;

	e = tl_ev(tl, ev);
	if (!e)
		return tl_ev_error(tl, ev);
	if (callstack >= tl->ncallstacks && callstack)
		return tl_fail(tl, -EINVAL, "call stack %u does not exist", callstack);
	e->callstack = callstack;
	return 0;
}

int tl_event_callstack(struct timeline *tl, long ev, const struct tl_frame_desc *frames, size_t n)
{
	long cs;

	if (ev < 0)
		return (int)ev;
	cs = tl_callstack_intern(tl, frames, n);
	if (cs < 0)
		return (int)cs;
	return tl_event_set_callstack(tl, ev, (uint32_t)cs);
}

size_t tl_callstack_count(const struct timeline *tl)
{
	return tl->ncallstacks ? tl->ncallstacks - 1 : 0;
}

size_t tl_callstack_depth(const struct timeline *tl, uint32_t callstack)
{
	return callstack && callstack < tl->ncallstacks ? tl->callstacks[callstack].depth : 0;
}

uint32_t tl_callstack_frame_id(const struct timeline *tl, uint32_t callstack, size_t i)
{
	if (i >= tl_callstack_depth(tl, callstack))
		return 0;
	return tl->cs_frames[tl->callstacks[callstack].first + i];
}

const struct tl_frame *tl_callstack_frame(const struct timeline *tl, uint32_t callstack, size_t i)
{
	return tl_frame(tl, tl_callstack_frame_id(tl, callstack, i));
}

size_t tl_frame_count(const struct timeline *tl)
{
	return tl->nframes ? tl->nframes - 1 : 0;
}

const struct tl_frame *tl_frame(const struct timeline *tl, uint32_t frame_id)
{
	return frame_id && frame_id < tl->nframes ? &tl->frames[frame_id] : NULL;
}

/* Metadata and clocks. */

static bool tl_meta_eq(const struct timeline *tl, uint32_t id, const void *key)
{
	return tl->meta[id - 1].key == *(const tl_str *)key;
}

/* The metadata entry for KEY, or NULL. */
static struct tl_meta *tl_meta_find(const struct timeline *tl, tl_str key)
{
	uint32_t id = tl_index_find(tl, &tl->meta_index, (uint32_t)tl_mix64(key), tl_meta_eq, &key);

	return id ? &tl->meta[id - 1] : NULL;
}

int tl_meta_set(struct timeline *tl, const char *key, const char *value)
{
	tl_str k = tl_intern(tl, key), v = tl_intern(tl, value);
	struct tl_meta *m;

	if (tl_intern_failed(key, k) || tl_intern_failed(value, v))
		return tl->err;
	if (!k)
		return tl_fail(tl, -EINVAL, "metadata with an empty key");
	m = tl_meta_find(tl, k);
	if (m) {
		m->value = v;
		return 0;
	}
	if (TL_GROW(tl, meta, meta_cap, tl->nmeta + 1) ||
	    tl_index_insert(tl, &tl->meta_index, (uint32_t)tl_mix64(k), (uint32_t)tl->nmeta + 1))
		return -ENOMEM;
	tl->meta[tl->nmeta++] = (struct tl_meta){k, v};
	return 0;
}

size_t tl_meta_count(const struct timeline *tl)
{
	return tl->nmeta;
}

const char *tl_meta_key(const struct timeline *tl, size_t index)
{
	return index < tl->nmeta ? tl_str_get(tl, tl->meta[index].key) : NULL;
}

const char *tl_meta_value(const struct timeline *tl, size_t index)
{
	return index < tl->nmeta ? tl_str_get(tl, tl->meta[index].value) : NULL;
}

const char *tl_meta_get(const struct timeline *tl, const char *key)
{
	struct tl_str_key k = {key, strlen(key)};
	uint32_t id = tl_index_find(tl, &tl->str_index, tl_hash_bytes(key, k.len, TL_FNV_SEED),
				    tl_str_eq, &k);
	const struct tl_meta *m = id ? tl_meta_find(tl, id) : NULL;

	return m ? tl_str_get(tl, m->value) : NULL;
}

void tl_set_clock_snapshot(struct timeline *tl, const struct tl_clock_snapshot *snap)
{
	tl->clock = *snap;
	tl->has_clock = true;
}

const struct tl_clock_snapshot *tl_clock_snapshot(const struct timeline *tl)
{
	return tl->has_clock ? &tl->clock : NULL;
}

int tl_clock_snapshot_now(struct tl_clock_snapshot *snap)
{
	uint64_t best = UINT64_MAX;

	/* Bracket the other two clocks between two MONOTONIC reads; keep the tightest try. */
	for (int i = 0; i < 5; i++) {
		uint64_t before = ht_clock_ns(CLOCK_MONOTONIC);
		uint64_t boot = ht_clock_ns(CLOCK_BOOTTIME);
		uint64_t real = ht_clock_ns(CLOCK_REALTIME);
		uint64_t after = ht_clock_ns(CLOCK_MONOTONIC);

		if (!before || !boot || !real || !after)
			return -errno;
		if (after - before >= best)
			continue;
		best = after - before;
		snap->monotonic_ns = before + (after - before) / 2;
		snap->boottime_ns = boot;
		snap->realtime_ns = real;
	}
	return 0;
}

/* Canonical order. */

static int tl_cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static int tl_cmp_str(const struct timeline *ta, tl_str a, const struct timeline *tb, tl_str b)
{
	if (ta == tb && a == b)
		return 0;
	return strcmp(tl_str_get(ta, a), tl_str_get(tb, b));
}

/* Order of two events (of one timeline or two) in the canonical sort. */
static int tl_event_cmp(const struct timeline *ta, const struct tl_event *a,
			const struct timeline *tb, const struct tl_event *b)
{
	int c;

	c = tl_cmp_u64(ta->tracks[a->track].uuid, tb->tracks[b->track].uuid);
	if (!c)
		c = tl_cmp_u64(a->ts_ns, b->ts_ns);
	if (!c)
		c = tl_cmp_u64(b->dur_ns, a->dur_ns);
	if (!c)
		c = (int)a->kind - (int)b->kind;
	if (!c)
		c = tl_cmp_str(ta, a->name, tb, b->name);
	if (!c)
		c = tl_cmp_str(ta, a->category, tb, b->category);
	return c;
}

/*
 * The canonical order within one timeline: track, start, longer first,
 * slices before instants, then the order events were added in. Slices of
 * equal span nest as they were added: a parent first (tl_reorder_nested).
 */
static int tl_order_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct timeline *tl = ctx;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	const struct tl_event *x = &tl->events[a], *y = &tl->events[b];
	int c = tl_cmp_u64(tl->tracks[x->track].uuid, tl->tracks[y->track].uuid);

	if (!c)
		c = tl_cmp_u64(x->ts_ns, y->ts_ns);
	if (!c)
		c = tl_cmp_u64(y->dur_ns, x->dur_ns);
	if (!c)
		c = (int)x->kind - (int)y->kind;
	return c ? c : tl_cmp_u64(a, b);
}

static int tl_track_uuid_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct timeline *tl = ctx;
	uint64_t a = tl->tracks[*(const uint32_t *)pa].uuid,
		 b = tl->tracks[*(const uint32_t *)pb].uuid;

	return a < b ? -1 : a > b;
}

/* What the canonical order looks at first, side by side: most comparisons end here. */
struct tl_sort_key {
	uint64_t uuid, ts, ndur; /* ndur: ~dur, so longer slices (parents) come first */
	uint32_t idx;
};

static bool tl_key_before(const struct timeline *tl, const struct tl_sort_key *a,
			  const struct tl_sort_key *b)
{
	if (a->uuid != b->uuid)
		return a->uuid < b->uuid;
	if (a->ts != b->ts)
		return a->ts < b->ts;
	if (a->ndur != b->ndur)
		return a->ndur < b->ndur;
	return tl_order_cmp(&a->idx, &b->idx, (void *)tl) < 0;
}

/*
 * A stable bottom-up merge sort of the keys: with the keys in one array
 * instead of behind the indices, a dump of millions of slices sorts in
 * about a third of qsort_r's time. Runs already in order are found first.
 */
static struct tl_sort_key *tl_sort_keys(const struct timeline *tl, struct tl_sort_key *a,
					struct tl_sort_key *b, size_t n)
{
	size_t *runs = malloc((n + 2) * sizeof(*runs)), nruns = 0;

	if (!runs)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!i || tl_key_before(tl, &a[i], &a[i - 1]))
			runs[nruns++] = i;
	runs[nruns] = n;
	while (nruns > 1) {
		size_t out = 0, kept = 0;
		struct tl_sort_key *t;

		for (size_t r = 0; r < nruns; r += 2) {
			size_t i = runs[r], mid = runs[r + 1];
			size_t end = r + 2 <= nruns ? runs[r + 2] : mid, j = mid;

			runs[kept++] = out;
			while (i < mid && j < end)
				b[out++] = tl_key_before(tl, &a[j], &a[i]) ? a[j++] : a[i++];
			while (i < mid)
				b[out++] = a[i++];
			while (j < end)
				b[out++] = a[j++];
		}
		runs[kept] = out;
		nruns = kept;
		t = a;
		a = b;
		b = t;
	}
	free(runs);
	return a;
}

/* Whether one track's events, in the order they were added, are in canonical order already. */
static bool tl_part_in_order(const struct timeline *tl, const uint32_t *idx, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		const struct tl_event *a = &tl->events[idx[i - 1]], *b = &tl->events[idx[i]];

		if (a->ts_ns != b->ts_ns) {
			if (a->ts_ns > b->ts_ns)
				return false;
		} else if (a->dur_ns != b->dur_ns) {
			if (a->dur_ns < b->dur_ns)
				return false;
		} else if (a->kind > b->kind) {
			return false;
		}
	}
	return true;
}

/* Sort one track's part of ORDER (N events) through keys, with room for N in KEYS and TMP. */
static bool tl_sort_part(const struct timeline *tl, uint32_t *order, size_t n,
			 struct tl_sort_key *keys, struct tl_sort_key *tmp)
{
	const struct tl_sort_key *sorted;

	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &tl->events[order[i]];

		keys[i] = (struct tl_sort_key){tl->tracks[e->track].uuid, e->ts_ns, ~e->dur_ns,
					       order[i]};
	}
	sorted = tl_sort_keys(tl, keys, tmp, n);
	if (!sorted)
		return false;
	for (size_t i = 0; i < n; i++)
		order[i] = sorted[i].idx;
	return true;
}

/*
 * The canonical order: events grouped by track (tracks in uuid order, by a
 * counting pass, each track's events in the order they were added), then
 * each track's part sorted unless it is in order already, as a track whose
 * slices were added in order (tl_reorder_nested) is: a PT dump's millions
 * of slices then cost one pass and no sort keys.
 */
uint32_t *tl_sorted_order(const struct timeline *tl)
{
	size_t n = tl->nevents, nt = tl->ntracks, widest = 0;
	uint32_t *order = malloc((n + 1) * sizeof(*order));
	size_t *at = calloc(nt + 1, sizeof(*at));
	uint32_t *by_uuid = malloc((nt + 1) * sizeof(*by_uuid));
	bool *unsorted = calloc(nt + 1, sizeof(*unsorted));
	struct tl_sort_key *keys = NULL, *tmp = NULL;
	bool ok = order && at && by_uuid && unsorted;

	if (ok) {
		/* Where each track's events start, tracks taken in uuid order. */
		for (size_t i = 0; i < n; i++)
			at[tl->events[i].track]++;
		for (size_t t = 0; t < nt; t++)
			by_uuid[t] = (uint32_t)t;
		qsort_r(by_uuid, nt, sizeof(*by_uuid), tl_track_uuid_cmp, (void *)tl);
		for (size_t k = 0, sum = 0; k < nt; k++) {
			size_t count = at[by_uuid[k]];

			at[by_uuid[k]] = sum;
			sum += count;
		}
		for (size_t i = 0; i < n; i++)
			order[at[tl->events[i].track]++] = (uint32_t)i;
		/* at[t] is now the end of track t's part: find the parts out of order. */
		for (size_t k = 0, start = 0; k < nt; k++) {
			size_t end = at[by_uuid[k]];

			unsorted[k] = !tl_part_in_order(tl, order + start, end - start);
			if (unsorted[k] && end - start > widest)
				widest = end - start;
			start = end;
		}
	}
	if (ok && widest) {
		keys = malloc(widest * sizeof(*keys));
		tmp = malloc(widest * sizeof(*tmp));
		ok = keys && tmp;
	}
	for (size_t k = 0, start = 0; ok && k < nt; k++) {
		size_t end = at[by_uuid[k]];

		if (unsorted[k])
			ok = tl_sort_part(tl, order + start, end - start, keys, tmp);
		start = end;
	}
	free(keys);
	free(tmp);
	free(at);
	free(by_uuid);
	free(unsorted);
	if (!ok) {
		free(order);
		return NULL;
	}
	return order;
}

/*
 * Events [FIRST, n) are slices of one track that nest and were added as
 * they closed (children before their parent): put them in start order, a
 * parent before its children, which is the canonical order, so sorting
 * them later is one pass. Each closed slice adopts the subtrees before it
 * that start within it; a stack of subtrees (as linked lists) does it in
 * one pass.
 */
int tl_reorder_nested(struct timeline *tl, size_t first)
{
	size_t n = tl->nevents > first ? tl->nevents - first : 0, out = 0;
	uint32_t *next, *head, *tail, depth = 0;
	struct tl_event *ev = tl->events + first;

	if (n < 2)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (ev[i].track != ev[0].track || ev[i].kind != TL_EVENT_SLICE)
			return 0; /* not one track's slices: left as they are */
	next = malloc(n * sizeof(*next));
	head = malloc(n * sizeof(*head));
	tail = malloc(n * sizeof(*tail));
	if (!next || !head || !tail) {
		free(next);
		free(head);
		free(tail);
		return tl_nomem(tl);
	}
	/*
	 * A stack of subtrees, each a linked list in start order: subtree k's
	 * root is stack entry k (kept in TAIL's unused slots of finished roots
	 * would be clever; a separate array is plain), its list runs from
	 * head[root] to tail[root] through next[].
	 */
	uint32_t *stack = malloc(n * sizeof(*stack));

	if (!stack) {
		free(next);
		free(head);
		free(tail);
		return tl_nomem(tl);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t from = depth, t = i;

		next[i] = UINT32_MAX;
		/* The subtrees on top that start within this slice are its children, in order. */
		while (from && ev[stack[from - 1]].ts_ns >= ev[i].ts_ns)
			from--;
		for (uint32_t k = from; k < depth; k++) {
			next[t] = stack[k];
			t = tail[stack[k]];
		}
		tail[i] = t;
		depth = from;
		stack[depth++] = i;
	}
	/* The roots in order, each followed by its subtree: where each event goes. */
	for (uint32_t k = 0; k < depth; k++)
		for (uint32_t i = stack[k]; i != UINT32_MAX; i = next[i])
			head[out++] = i; /* position OUT takes event I */
	free(next);
	free(tail);
	free(stack);
	/* Apply it in place, one cycle at a time: no second copy of the events. */
	for (uint32_t i = 0; i < n; i++) {
		struct tl_event keep;
		uint32_t j = i;

		if (head[i] == UINT32_MAX || head[i] == i)
			continue;
		keep = ev[i];
		for (;;) {
			uint32_t src = head[j];

			head[j] = UINT32_MAX;
			if (src == i) {
				ev[j] = keep;
				break;
			}
			ev[j] = ev[src];
			j = src;
		}
	}
	free(head);
	return 0;
}

int tl_sort(struct timeline *tl)
{
	uint32_t *order = tl_sorted_order(tl);
	struct tl_event *sorted = malloc((tl->nevents + 1) * sizeof(*sorted));

	if (!order || !sorted) {
		free(order);
		free(sorted);
		return tl_nomem(tl);
	}
	for (size_t i = 0; i < tl->nevents; i++)
		sorted[i] = tl->events[order[i]];
	free(order);
	free(tl->events);
	tl->events = sorted;
	tl->events_cap = tl->nevents + 1;
	return 0;
}

/* Validation. */

static uint64_t tl_end(const struct tl_event *e)
{
	return e->ts_ns + e->dur_ns;
}

/* Check that slice E nests in the open slices on STACK; pushes E. */
static int tl_nest_one(const struct timeline *tl, const struct tl_event *e,
		       const struct tl_event **stack, size_t *depth, char *why, size_t whylen)
{
	const struct tl_event *top;

	while (*depth && tl_end(stack[*depth - 1]) <= e->ts_ns)
		(*depth)--;
	top = *depth ? stack[*depth - 1] : NULL;
	if (top && tl_end(e) > tl_end(top)) {
		snprintf(why, whylen,
			 "track '%s': slice '%s' [%" PRIu64 ", %" PRIu64
			 ") starts inside '%s' [%" PRIu64 ", %" PRIu64 ") but ends after it",
			 tl_str_get(tl, tl->tracks[e->track].name), tl_str_get(tl, e->name),
			 e->ts_ns, tl_end(e), tl_str_get(tl, top->name), top->ts_ns, tl_end(top));
		return -EINVAL;
	}
	stack[(*depth)++] = e;
	return 0;
}

int tl_validate(const struct timeline *tl, char *why, size_t whylen)
{
	uint32_t *order = tl_sorted_order(tl);
	int err;

	if (!order) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	err = tl_validate_order(tl, order, why, whylen);
	free(order);
	return err;
}

int tl_validate_order(const struct timeline *tl, const uint32_t *order, char *why, size_t whylen)
{
	const struct tl_event **stack = malloc((tl->nevents + 1) * sizeof(*stack));
	size_t depth = 0;
	int err = 0;

	if (!stack) {
		snprintf(why, whylen, "out of memory");
		err = -ENOMEM;
	}
	for (size_t i = 0; !err && i < tl->nevents; i++) {
		const struct tl_event *e = &tl->events[order[i]];

		if (i && e->track != tl->events[order[i - 1]].track)
			depth = 0;
		if (e->kind == TL_EVENT_SLICE)
			err = tl_nest_one(tl, e, stack, &depth, why, whylen);
	}
	free(stack);
	return err;
}

/*
 * One pass of tl_untangle: a slice that starts inside the slice open on its
 * track but ends after it starts where that one ends instead.
 */
static size_t tl_untangle_pass(struct timeline *tl, const uint32_t *order, struct tl_event **stack)
{
	size_t depth = 0, moved = 0;

	for (size_t i = 0; i < tl->nevents; i++) {
		struct tl_event *e = &tl->events[order[i]];
		uint64_t end = tl_end(e);

		if (i && e->track != tl->events[order[i - 1]].track)
			depth = 0;
		if (e->kind != TL_EVENT_SLICE)
			continue;
		while (depth && tl_end(stack[depth - 1]) <= e->ts_ns)
			depth--;
		if (depth && end > tl_end(stack[depth - 1])) {
			e->ts_ns = tl_end(stack[depth - 1]);
			e->dur_ns = end - e->ts_ns;
			moved++;
			continue; /* placed anew by the next pass */
		}
		stack[depth++] = e;
	}
	return moved;
}

size_t tl_untangle(struct timeline *tl)
{
	struct tl_event **stack = malloc((tl->nevents + 1) * sizeof(*stack));
	size_t total = 0;

	if (!stack)
		return 0;
	/* Each pass moves starts only later, and a slice past its neighbours stops moving. */
	for (int pass = 0; pass < 8; pass++) {
		uint32_t *order = tl_sorted_order(tl);
		size_t moved;

		if (!order)
			break;
		moved = tl_untangle_pass(tl, order, stack);
		free(order);
		total += moved;
		if (!moved)
			break;
	}
	free(stack);
	return total;
}

/* Equality. */

static bool tl_args_equal(const struct timeline *ta, const struct tl_event *a,
			  const struct timeline *tb, const struct tl_event *b)
{
	const struct tl_list *la = &tl_event_lists(ta, a)->args, *lb = &tl_event_lists(tb, b)->args;
	uint32_t ia = la->first, ib = lb->first;

	if (la->count != lb->count)
		return false;
	for (; ia && ib; ia = ta->args[ia].next, ib = tb->args[ib].next) {
		const struct tl_arg *x = &ta->args[ia], *y = &tb->args[ib];

		if (x->kind != y->kind || tl_cmp_str(ta, x->name, tb, y->name))
			return false;
		if (x->kind == TL_ARG_STR ? tl_cmp_str(ta, x->s, tb, y->s) != 0
					  : x->u != y->u) /* doubles compare by bits */
			return false;
	}
	return true;
}

static bool tl_flows_equal(const struct timeline *ta, const struct tl_list *a,
			   const struct timeline *tb, const struct tl_list *b)
{
	uint32_t ia = a->first, ib = b->first;

	if (a->count != b->count)
		return false;
	for (; ia && ib; ia = ta->flows[ia].next, ib = tb->flows[ib].next)
		if (ta->flows[ia].id != tb->flows[ib].id)
			return false;
	return true;
}

static bool tl_callstacks_equal(const struct timeline *ta, uint32_t a, const struct timeline *tb,
				uint32_t b)
{
	size_t depth = tl_callstack_depth(ta, a);

	if (depth != tl_callstack_depth(tb, b))
		return false;
	for (size_t i = 0; i < depth; i++) {
		const struct tl_frame *x = tl_callstack_frame(ta, a, i);
		const struct tl_frame *y = tl_callstack_frame(tb, b, i);

		if (x->address != y->address || tl_cmp_str(ta, x->function, tb, y->function) ||
		    tl_cmp_str(ta, x->module, tb, y->module))
			return false;
	}
	return true;
}

/* What differs between two events, or NULL. */
static const char *tl_event_diff(const struct timeline *ta, const struct tl_event *a,
				 const struct timeline *tb, const struct tl_event *b)
{
	const struct tl_event_lists *la = tl_event_lists(ta, a), *lb = tl_event_lists(tb, b);

	if (tl_event_cmp(ta, a, tb, b))
		return "track, time, kind, name or category";
	if (!tl_args_equal(ta, a, tb, b))
		return "arguments";
	if (!tl_flows_equal(ta, &la->flows_out, tb, &lb->flows_out))
		return "outgoing flows";
	if (!tl_flows_equal(ta, &la->flows_in, tb, &lb->flows_in))
		return "terminating flows";
	if (!tl_callstacks_equal(ta, a->callstack, tb, b->callstack))
		return "call stack";
	return NULL;
}

static bool tl_events_equal(const struct timeline *a, const struct timeline *b, char *why,
			    size_t whylen)
{
	uint32_t *oa = tl_sorted_order(a), *ob = tl_sorted_order(b);
	bool equal = oa && ob;

	if (!equal)
		snprintf(why, whylen, "out of memory");
	for (size_t i = 0; equal && i < a->nevents; i++) {
		const struct tl_event *x = &a->events[oa[i]], *y = &b->events[ob[i]];
		const char *diff = tl_event_diff(a, x, b, y);

		if (!diff)
			continue;
		snprintf(why, whylen,
			 "event %zu ('%s' at %" PRIu64 " ns on track %" PRIu64
			 ") differs from '%s' at %" PRIu64 " ns on track %" PRIu64 " in its %s",
			 i, tl_str_get(a, x->name), x->ts_ns, a->tracks[x->track].uuid,
			 tl_str_get(b, y->name), y->ts_ns, b->tracks[y->track].uuid, diff);
		equal = false;
	}
	free(oa);
	free(ob);
	return equal;
}

static bool tl_tracks_equal(const struct timeline *a, const struct timeline *b, char *why,
			    size_t whylen)
{
	for (size_t i = 0; i < a->ntracks; i++) {
		const struct tl_track *x = &a->tracks[i];
		long j = tl_track_find(b, x->uuid);
		const struct tl_track *y = j >= 0 ? &b->tracks[j] : NULL;

		if (!y) {
			snprintf(why, whylen, "track %" PRIu64 " ('%s') is missing", x->uuid,
				 tl_str_get(a, x->name));
			return false;
		}
		if (x->kind != y->kind || x->parent_uuid != y->parent_uuid || x->pid != y->pid ||
		    x->tid != y->tid || x->cpu != y->cpu || tl_cmp_str(a, x->name, b, y->name)) {
			snprintf(why, whylen,
				 "track %" PRIu64 " ('%s', %s) differs from ('%s', %s)", x->uuid,
				 tl_str_get(a, x->name), tl_track_kind_name(x->kind),
				 tl_str_get(b, y->name), tl_track_kind_name(y->kind));
			return false;
		}
	}
	return true;
}

static bool tl_meta_equal(const struct timeline *a, const struct timeline *b, char *why,
			  size_t whylen)
{
	for (size_t i = 0; i < a->nmeta; i++) {
		if (strcmp(tl_meta_key(a, i), tl_meta_key(b, i)) ||
		    strcmp(tl_meta_value(a, i), tl_meta_value(b, i))) {
			snprintf(why, whylen, "metadata %zu: '%s'='%s' vs '%s'='%s'", i,
				 tl_meta_key(a, i), tl_meta_value(a, i), tl_meta_key(b, i),
				 tl_meta_value(b, i));
			return false;
		}
	}
	return true;
}

static bool tl_counts_equal(const struct timeline *a, const struct timeline *b, char *why,
			    size_t whylen)
{
	if (a->ntracks != b->ntracks || a->nevents != b->nevents || a->nmeta != b->nmeta) {
		snprintf(why, whylen,
			 "%zu tracks, %zu events, %zu metadata vs %zu tracks, %zu events, %zu "
			 "metadata",
			 a->ntracks, a->nevents, a->nmeta, b->ntracks, b->nevents, b->nmeta);
		return false;
	}
	if (a->has_clock != b->has_clock ||
	    (a->has_clock && memcmp(&a->clock, &b->clock, sizeof(a->clock)))) {
		snprintf(why, whylen, "clock snapshots differ");
		return false;
	}
	return true;
}

bool tl_equal(const struct timeline *a, const struct timeline *b, char *why, size_t whylen)
{
	return tl_counts_equal(a, b, why, whylen) && tl_meta_equal(a, b, why, whylen) &&
	       tl_tracks_equal(a, b, why, whylen) && tl_events_equal(a, b, why, whylen);
}

const char *tl_track_kind_name(enum tl_track_kind kind)
{
	switch (kind) {
	case TL_TRACK_GLOBAL:
		return "global";
	case TL_TRACK_PROCESS:
		return "process";
	case TL_TRACK_THREAD:
		return "thread";
	case TL_TRACK_THREAD_KERNEL:
		return "thread_kernel";
	case TL_TRACK_CPU:
		return "cpu";
	}
	return "unknown";
}

int tl_thread_track(struct timeline *tl, int pid, int tid)
{
	struct tl_track_desc desc = {.kind = TL_TRACK_THREAD, .pid = pid, .tid = (int32_t)tid};
	uint64_t parent = 0;
	char name[32];

	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_THREAD && t->tid == tid)
			return (int)i;
		if (t->kind == TL_TRACK_PROCESS && t->pid == pid)
			parent = t->uuid;
	}
	snprintf(name, sizeof(name), "tid %d", tid);
	desc.name = name;
	desc.parent_uuid = parent;
	return tl_add_track(tl, &desc);
}
