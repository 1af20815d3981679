// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A dump's native scheduling data read back by Perfetto's rules: see sched_read.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/partition.h"
#include "kernel/sched_ftrace.h"
#include "kernel/sched_read.h"
#include "trace/pb.h"

#define PACKET_INTERNED_DATA 12
#define INTERNED_STRING_IID 1
#define INTERNED_STRING_STR 2
#define NO_ROW ((size_t)-1)

enum event_kind { EV_SWITCH, EV_WAKING, EV_NEWTASK, EV_BLOCKED };

struct event {
	uint64_t ts;	/* BOOTTIME, as in the file */
	uint64_t order; /* the importer's push order, for equal times */
	enum event_kind kind;
	uint32_t cpu, pid;
	int64_t prev_state;   /* a switch's */
	uint32_t flags;	      /* a waking's common_flags */
	uint32_t source_pid;  /* a new task's parent, the event's own task */
	uint64_t symbol_iid;  /* a blocked reason's caller */
	bool io_wait;
	size_t comm;	      /* a switch's next_comm: 1 + its index in strings; 0: none */
};

struct symbol {
	uint64_t iid;
	size_t string; /* index into strings */
};

struct reader {
	struct ht_native_sched *out;
	struct event *events;
	size_t nevents, cap;
	struct symbol *symbols;
	size_t nsymbols, symbols_cap;
};

struct thread_rows {
	uint32_t tid;
	size_t last, last_blocked;
};

static struct event *push_event(struct reader *r)
{
	if (r->nevents == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct event *v = realloc(r->events, cap * sizeof(*v));

		if (!v)
			return NULL;
		r->events = v;
		r->cap = cap;
	}
	memset(&r->events[r->nevents], 0, sizeof(r->events[0]));
	r->events[r->nevents].order = r->nevents;
	return &r->events[r->nevents++];
}

static int keep_string(struct reader *r, const uint8_t *data, size_t len, size_t *index)
{
	struct ht_native_sched *o = r->out;
	char **v = realloc(o->strings, (o->nstrings + 1) * sizeof(*v));
	char *s;

	if (!v)
		return -1;
	o->strings = v;
	s = malloc(len + 1);
	if (!s)
		return -1;
	memcpy(s, data, len);
	s[len] = '\0';
	*index = o->nstrings;
	o->strings[o->nstrings++] = s;
	return 0;
}

/* Up to MAX elements of a packed varint field, into V; their count. */
static size_t unpack(const struct pb_field *f, uint64_t *v, size_t max, bool deltas)
{
	struct pb_reader r;
	uint64_t x, acc = 0;
	size_t n = 0;

	pb_reader_init(&r, f->data, f->len);
	while (n < max && r.p < r.end && pb_read_varint(&r, &x) == 0) {
		acc = deltas ? acc + x : x;
		v[n++] = acc;
	}
	return n;
}

/* How many elements a packed varint field holds. */
static size_t packed_count(const struct pb_field *f)
{
	size_t n = 0;

	for (size_t i = 0; i < f->len; i++)
		n += !(f->data[i] & 0x80);
	return n;
}

/* The arrays of one compact_sched message, each decoded to the shortest of its group. */
static int read_compact(struct reader *r, const struct pb_reader *parent,
			const struct pb_field *cf, uint32_t cpu)
{
	struct pb_field f, fields[13] = { 0 };
	bool have[13] = { false };
	struct pb_reader sub;
	uint64_t *v[13] = { 0 };
	size_t n[13] = { 0 }, nsw, nwk;
	size_t *intern = NULL, nintern = 0; /* the intern table: indexes into strings */
	int rc;

	if (pb_enter(parent, cf, &sub))
		return -1;
	while ((rc = pb_next(&sub, &f)) == 1) {
		if (f.number == HT_FTF_COMPACT_INTERN_TABLE && f.wire == PB_WIRE_LEN) {
			size_t *grown = realloc(intern, (nintern + 1) * sizeof(*intern));

			if (!grown)
				goto fail;
			intern = grown;
			if (keep_string(r, f.data, f.len, &intern[nintern++]))
				goto fail;
		} else if (f.number < 13 && f.wire == PB_WIRE_LEN) {
			fields[f.number] = f;
			have[f.number] = true;
		}
	}
	if (rc < 0) {
		free(intern);
		return -1;
	}
	for (unsigned int i = 1; i < 13; i++) {
		if (!have[i])
			continue;
		n[i] = packed_count(&fields[i]);
		v[i] = malloc((n[i] + 1) * sizeof(uint64_t));
		if (!v[i])
			goto fail;
		n[i] = unpack(&fields[i], v[i], n[i],
			      i == HT_FTF_COMPACT_SWITCH_TIMESTAMP ||
				      i == HT_FTF_COMPACT_WAKING_TIMESTAMP);
	}
	nsw = n[HT_FTF_COMPACT_SWITCH_TIMESTAMP];
	if (n[HT_FTF_COMPACT_SWITCH_PREV_STATE] < nsw)
		nsw = n[HT_FTF_COMPACT_SWITCH_PREV_STATE];
	if (n[HT_FTF_COMPACT_SWITCH_NEXT_PID] < nsw)
		nsw = n[HT_FTF_COMPACT_SWITCH_NEXT_PID];
	for (size_t i = 0; i < nsw; i++) {
		struct event *e = push_event(r);

		if (!e)
			goto fail;
		e->kind = EV_SWITCH;
		e->ts = v[HT_FTF_COMPACT_SWITCH_TIMESTAMP][i];
		e->cpu = cpu;
		e->prev_state = (int64_t)v[HT_FTF_COMPACT_SWITCH_PREV_STATE][i];
		e->pid = (uint32_t)v[HT_FTF_COMPACT_SWITCH_NEXT_PID][i];
		if (i < n[HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX] &&
		    v[HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX][i] < nintern)
			e->comm = 1 + intern[v[HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX][i]];
		r->out->switches++;
	}
	nwk = n[HT_FTF_COMPACT_WAKING_TIMESTAMP];
	if (n[HT_FTF_COMPACT_WAKING_PID] < nwk)
		nwk = n[HT_FTF_COMPACT_WAKING_PID];
	for (size_t i = 0; i < nwk; i++) {
		struct event *e = push_event(r);

		if (!e)
			goto fail;
		e->kind = EV_WAKING;
		e->ts = v[HT_FTF_COMPACT_WAKING_TIMESTAMP][i];
		e->cpu = cpu;
		e->pid = (uint32_t)v[HT_FTF_COMPACT_WAKING_PID][i];
		if (i < n[HT_FTF_COMPACT_WAKING_COMMON_FLAGS])
			e->flags = (uint32_t)v[HT_FTF_COMPACT_WAKING_COMMON_FLAGS][i];
		r->out->wakings++;
	}
	for (unsigned int i = 0; i < 13; i++)
		free(v[i]);
	free(intern);
	return 0;
fail:
	for (unsigned int i = 0; i < 13; i++)
		free(v[i]);
	free(intern);
	return ht_fail("out of memory reading the native scheduling data");
}

/* One full FtraceEvent: task_newtask and sched_blocked_reason are what matter here. */
static int read_full(struct reader *r, const struct pb_reader *parent, const struct pb_field *ef,
		     uint32_t cpu)
{
	struct pb_reader sub, inner;
	struct pb_field f, g;
	uint64_t ts = 0, pid = 0;
	struct event *e = NULL;
	int rc;

	if (pb_enter(parent, ef, &sub))
		return -1;
	while ((rc = pb_next(&sub, &f)) == 1) {
		if (f.number == HT_FTF_EVENT_TIMESTAMP) {
			ts = f.value;
		} else if (f.number == HT_FTF_EVENT_PID) {
			pid = f.value;
		} else if ((f.number == HT_FTF_EVENT_TASK_NEWTASK ||
			    f.number == HT_FTF_EVENT_SCHED_BLOCKED_REASON) &&
			   f.wire == PB_WIRE_LEN) {
			e = push_event(r);
			if (!e)
				return ht_fail("out of memory reading the native scheduling data");
			e->kind = f.number == HT_FTF_EVENT_TASK_NEWTASK ? EV_NEWTASK : EV_BLOCKED;
			e->cpu = cpu;
			if (pb_enter(&sub, &f, &inner))
				return -1;
			while ((rc = pb_next(&inner, &g)) == 1) {
				if (g.number == 1) /* the new task's, or the blocked task's pid */
					e->pid = (uint32_t)g.value;
				else if (e->kind == EV_BLOCKED &&
					 g.number == HT_FTF_BLOCKED_REASON_CALLER)
					e->symbol_iid = g.value;
				else if (e->kind == EV_BLOCKED &&
					 g.number == HT_FTF_BLOCKED_REASON_IO_WAIT)
					e->io_wait = g.value != 0;
			}
			if (rc < 0)
				return -1;
		}
	}
	if (rc < 0)
		return -1;
	if (e) {
		e->ts = ts;
		e->source_pid = (uint32_t)pid;
		if (e->kind == EV_NEWTASK)
			r->out->newtasks++;
		else
			r->out->blocked_reasons++;
	}
	return 0;
}

static int read_bundle(struct reader *r, const struct pb_reader *parent, const struct pb_field *bf)
{
	struct pb_reader sub;
	struct pb_field f;
	bool has_cpu = false;
	uint32_t cpu = 0;
	int rc;

	if (pb_enter(parent, bf, &sub))
		return -1;
	/* The cpu first: it may follow the events it is the CPU of. */
	while ((rc = pb_next(&sub, &f)) == 1)
		if (f.number == HT_FTF_BUNDLE_CPU) {
			cpu = (uint32_t)f.value;
			has_cpu = true;
		}
	if (rc < 0)
		return -1;
	if (!has_cpu) /* Perfetto drops such a bundle */
		return 0;
	r->out->present = true;
	if (pb_enter(parent, bf, &sub))
		return -1;
	while ((rc = pb_next(&sub, &f)) == 1) {
		if (f.wire != PB_WIRE_LEN)
			continue;
		if (f.number == HT_FTF_BUNDLE_COMPACT_SCHED && read_compact(r, &sub, &f, cpu))
			return -1;
		if (f.number == HT_FTF_BUNDLE_EVENT && read_full(r, &sub, &f, cpu))
			return -1;
	}
	return rc < 0 ? -1 : 0;
}

static int read_kernel_symbols(struct reader *r, const struct pb_reader *parent,
			       const struct pb_field *inf)
{
	struct pb_reader sub, sym;
	struct pb_field f, g;
	int rc;

	if (pb_enter(parent, inf, &sub))
		return -1;
	while ((rc = pb_next(&sub, &f)) == 1) {
		struct symbol s = { 0 };
		bool named = false;

		if (f.number != HT_FTF_INTERNED_KERNEL_SYMBOLS || f.wire != PB_WIRE_LEN)
			continue;
		if (pb_enter(&sub, &f, &sym))
			return -1;
		while ((rc = pb_next(&sym, &g)) == 1) {
			if (g.number == INTERNED_STRING_IID) {
				s.iid = g.value;
			} else if (g.number == INTERNED_STRING_STR && g.wire == PB_WIRE_LEN) {
				if (keep_string(r, g.data, g.len, &s.string))
					return ht_fail("out of memory reading kernel symbols");
				named = true;
			}
		}
		if (rc < 0)
			return -1;
		if (!named)
			continue;
		if (r->nsymbols == r->symbols_cap) {
			size_t cap = r->symbols_cap ? r->symbols_cap * 2 : 16;
			struct symbol *v = realloc(r->symbols, cap * sizeof(*v));

			if (!v)
				return ht_fail("out of memory reading kernel symbols");
			r->symbols = v;
			r->symbols_cap = cap;
		}
		r->symbols[r->nsymbols++] = s;
	}
	return rc < 0 ? -1 : 0;
}

static int read_packets(struct reader *r, const void *data, size_t len)
{
	struct pb_reader top, pkt;
	struct pb_field f, g;
	int rc;

	pb_reader_init(&top, data, len);
	while ((rc = pb_next(&top, &f)) == 1) {
		if (f.number != 1 || f.wire != PB_WIRE_LEN)
			continue;
		if (pb_enter(&top, &f, &pkt))
			return ht_fail("malformed trace packet");
		while ((rc = pb_next(&pkt, &g)) == 1) {
			if (g.wire != PB_WIRE_LEN)
				continue;
			if ((g.number == HT_FTF_PACKET_FTRACE_EVENTS && read_bundle(r, &pkt, &g)) ||
			    (g.number == PACKET_INTERNED_DATA && read_kernel_symbols(r, &pkt, &g)))
				return ht_last_error()[0] ? -1 : ht_fail("malformed trace packet");
		}
		if (rc < 0)
			return ht_fail("malformed trace packet: %s", pb_strerror(rc));
	}
	return rc < 0 ? ht_fail("malformed trace: %s", pb_strerror(rc)) : 0;
}

static int cmp_event(const void *a, const void *b)
{
	const struct event *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* The state string task_state.cc gives a kernel >= 4.14 prev_state. */
static void state_name(int64_t raw, char *out)
{
	static const struct {
		unsigned int bit;
		char c;
	} flags[] = { { 0x01, 'S' }, { 0x02, 'D' }, { 0x04, 'T' }, { 0x08, 't' },
		      { 0x10, 'X' }, { 0x20, 'Z' }, { 0x40, 'P' }, { 0x80, 'I' } };
	size_t n = 0;

	if (raw < 0 || (raw & 0xfe00)) {
		strcpy(out, "?");
		return;
	}
	if (!(raw & 0xff)) {
		strcpy(out, raw & 0x100 ? "R+" : "R");
		return;
	}
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (raw & flags[i].bit)
			out[n++] = flags[i].c;
	out[n] = '\0';
}

static bool is_blocked(const char *state)
{
	return strcmp(state, "R") && strcmp(state, "Running");
}

struct simulation {
	struct ht_native_sched *out;
	size_t cap;
	struct thread_rows *threads; /* open addressing by tid; tid 0 is never kept */
	size_t nslots;
};

static struct thread_rows *rows_of(struct simulation *s, uint32_t tid)
{
	size_t i = (tid * 2654435761u) & (s->nslots - 1);

	while (s->threads[i].tid && s->threads[i].tid != tid)
		i = (i + 1) & (s->nslots - 1);
	if (!s->threads[i].tid)
		s->threads[i] = (struct thread_rows){ .tid = tid, .last = NO_ROW,
						      .last_blocked = NO_ROW };
	return &s->threads[i];
}

static void close_pending(struct simulation *s, struct thread_rows *t, uint64_t ts)
{
	if (t->last != NO_ROW)
		s->out->states[t->last].dur_ns = (int64_t)(ts - s->out->states[t->last].ts_ns);
}

static int open_state(struct simulation *s, struct thread_rows *t, uint64_t ts, const char *state,
		      int32_t cpu, bool woken, uint32_t waker, bool irq)
{
	struct ht_thread_state *row;

	if (s->out->nstates == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct ht_thread_state *v = realloc(s->out->states, cap * sizeof(*v));

		if (!v)
			return -1;
		s->out->states = v;
		s->cap = cap;
	}
	row = &s->out->states[s->out->nstates];
	*row = (struct ht_thread_state){ .tid = t->tid, .ts_ns = ts, .dur_ns = -1, .cpu = cpu,
					 .woken = woken, .waker_tid = waker, .irq = irq };
	snprintf(row->state, sizeof(row->state), "%s", state);
	t->last = s->out->nstates++;
	if (is_blocked(state))
		t->last_blocked = t->last;
	else if (!strcmp(state, "Running"))
		t->last_blocked = NO_ROW;
	return 0;
}

static const char *symbol_name(const struct reader *r, uint64_t iid)
{
	for (size_t i = 0; i < r->nsymbols; i++)
		if (r->symbols[i].iid == iid)
			return r->out->strings[r->symbols[i].string];
	return NULL;
}

static int simulate(struct reader *r, uint32_t ncpus)
{
	struct simulation s = { .out = r->out };
	int64_t *running = malloc((ncpus + 1) * sizeof(*running)); /* -1: no switch yet */
	int rc = 0;

	s.nslots = 64;
	while (s.nslots < 2 * r->nevents + 2)
		s.nslots <<= 1;
	s.threads = calloc(s.nslots, sizeof(*s.threads));
	if (!running || !s.threads) {
		free(running);
		free(s.threads);
		return ht_fail("out of memory reading the native scheduling data");
	}
	for (uint32_t c = 0; c <= ncpus; c++)
		running[c] = -1;
	for (size_t i = 0; i < r->nevents && !rc; i++) {
		const struct event *e = &r->events[i];
		struct thread_rows *t;
		char state[HT_THREAD_STATE_LEN];

		switch (e->kind) {
		case EV_SWITCH:
			if (running[e->cpu] >= 0) {
				if (running[e->cpu] > 0) {
					t = rows_of(&s, (uint32_t)running[e->cpu]);
					/* Not running by its rows: data was lost, the state stays open. */
					if (t->last == NO_ROW ||
					    !strcmp(r->out->states[t->last].state, "Running"))
						close_pending(&s, t, e->ts);
					state_name(e->prev_state, state);
					rc = open_state(&s, t, e->ts, state, -1, false, 0, false);
				}
				if (!rc && e->pid) {
					t = rows_of(&s, e->pid);
					close_pending(&s, t, e->ts);
					rc = open_state(&s, t, e->ts, "Running", (int32_t)e->cpu,
							false, 0, false);
					if (!rc && e->comm)
						r->out->states[t->last].comm =
							r->out->strings[e->comm - 1];
				}
			}
			running[e->cpu] = e->pid;
			break;
		case EV_WAKING:
			if (running[e->cpu] < 0) {
				r->out->wakings_dropped++;
				break;
			}
			if (!e->pid)
				break;
			t = rows_of(&s, e->pid);
			if (t->last != NO_ROW && !is_blocked(r->out->states[t->last].state)) {
				r->out->wakings_spurious++;
				break;
			}
			close_pending(&s, t, e->ts);
			rc = open_state(&s, t, e->ts, "R", -1, true, (uint32_t)running[e->cpu],
					(e->flags & (HT_FTRACE_FLAG_HARDIRQ | HT_FTRACE_FLAG_SOFTIRQ)) != 0);
			break;
		case EV_NEWTASK:
			if (!e->pid)
				break;
			rc = open_state(&s, rows_of(&s, e->pid), e->ts, "R", -1, true,
					e->source_pid, false);
			if (!rc)
				r->out->states[r->out->nstates - 1].newtask = true;
			break;
		case EV_BLOCKED:
			t = e->pid ? rows_of(&s, e->pid) : NULL;
			if (t && t->last_blocked != NO_ROW)
				r->out->states[t->last_blocked].blocked_function =
					symbol_name(r, e->symbol_iid);
			break;
		}
	}
	free(running);
	free(s.threads);
	return rc ? ht_fail("out of memory reading the native scheduling data") : 0;
}

static const struct ht_thread_state *sort_base;

/* By thread; within one, the order the rows were opened in, which is time order. */
static int cmp_state_index(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (sort_base[x].tid != sort_base[y].tid)
		return sort_base[x].tid < sort_base[y].tid ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int sort_states(struct ht_native_sched *out)
{
	size_t *index = malloc(out->nstates * sizeof(*index));
	struct ht_thread_state *sorted = malloc(out->nstates * sizeof(*sorted));

	if (!index || !sorted) {
		free(index);
		free(sorted);
		return ht_fail("out of memory reading the native scheduling data");
	}
	for (size_t i = 0; i < out->nstates; i++)
		index[i] = i;
	sort_base = out->states;
	qsort(index, out->nstates, sizeof(*index), cmp_state_index);
	for (size_t i = 0; i < out->nstates; i++)
		sorted[i] = out->states[index[i]];
	free(out->states);
	out->states = sorted;
	free(index);
	return 0;
}

int ht_native_sched_read(const void *data, size_t len, int64_t boottime_offset_ns,
			 struct ht_native_sched *out)
{
	struct reader r = { .out = out };
	uint32_t ncpus = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = read_packets(&r, data, len);
	for (size_t i = 0; !rc && i < r.nevents; i++) {
		if (r.events[i].cpu >= 4096) {
			rc = ht_fail("a scheduling bundle of CPU %u", r.events[i].cpu);
			break;
		}
		if (r.events[i].cpu + 1 > ncpus)
			ncpus = r.events[i].cpu + 1;
	}
	if (!rc && r.nevents) {
		qsort(r.events, r.nevents, sizeof(r.events[0]), cmp_event);
		rc = simulate(&r, ncpus);
	}
	/* Into the MONOTONIC clock of the rest of the dump. */
	for (size_t i = 0; !rc && i < out->nstates; i++)
		out->states[i].ts_ns =
			(uint64_t)((int64_t)out->states[i].ts_ns - boottime_offset_ns);
	if (!rc && out->nstates > 1)
		rc = sort_states(out);
	free(r.events);
	free(r.symbols);
	if (rc)
		ht_native_sched_free(out);
	return rc;
}

void ht_native_sched_free(struct ht_native_sched *s)
{
	for (size_t i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	free(s->states);
	memset(s, 0, sizeof(*s));
}

const struct ht_thread_state *ht_native_sched_thread(const struct ht_native_sched *s,
						     uint32_t tid, size_t *n)
{
	/* Rows are sorted by thread: TID's run from its first one. */
	size_t first = HT_PARTITION_POINT(0, s->nstates, i, s->states[i].tid < tid), lo = first;

	while (lo < s->nstates && s->states[lo].tid == tid)
		lo++;
	*n = lo - first;
	return *n ? &s->states[first] : NULL;
}
