// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Call stacks from PT blocks; the rules are in callstack.h.
 *
 * Everything runs on a position counter, not on time: each instruction
 * and each event moves it by one. A frame remembers the position where it
 * began and becomes a slice when it ends; the slice waits in a queue until
 * a later timestamp is known, and is then given times interpolated between
 * the timestamps around its two positions. Timing packets are far apart
 * compared with calls (a TSC per PSB, an MTC every few hundred ns), so
 * without this most slices would have no length at all.
 */
#include <errno.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sources/intelpt/callstack.h"
#include "trace/dump_schema.h"
#include "base/log.h"
#include "sources/intelpt/ocaml_eh.h"
#include "trace/timeline.h"

#define DEFAULT_MAX_DEPTH 4096
#define FUNC_CACHE	  8192 /* addresses resolved; a power of two */
#define PLT_MAX_INSNS	  4    /* a PLT stub is endbr64 + jmp: an unnamed frame this short is one */
#define OUTER_SCAN	  256  /* how far down a longjmp's target is looked for */
#define MAX_TRAPS	  4096

enum frame_kind {
	FRAME_FUNCTION = 0,
	FRAME_SIGNAL = 1, /* holds a handler; ret_addr is where the thread resumes after it */
};

enum state {
	ST_IDLE = 0, /* before the first sync */
	ST_RUN,	     /* tracing, frames are followed */
	ST_KERNEL,   /* between a PGD and its PGE */
	ST_GAP,	     /* trace lost: no frames until it resumes */
};

struct func {
	uint64_t addr;	     /* the address looked up */
	uint64_t start, end; /* the function; 0 when unknown (end 0: its size is unknown) */
	tl_str name;
	tl_str module; /* tells unknown functions of different modules apart */
	uint8_t unnamed;
	uint8_t valid;
};

struct frame {
	uint64_t start, end; /* the function, as in struct func */
	uint64_t ret_addr;   /* where its return goes; 0 when its call was not seen */
	uint64_t p_start;
	tl_str name;
	tl_str module;
	uint32_t ninsn; /* instructions run in it (saturating): finds PLT stubs */
	uint8_t kind;
	uint8_t before; /* began before the trace: HT_ARG_BEFORE_WINDOW */
	uint8_t unnamed;
};

/* A closed slice waiting for the timestamps around its end. */
struct closed {
	uint64_t p_start, p_end;
	tl_str name;
	tl_str reason;
	uint8_t before;
};

struct anchor {
	uint64_t pos, ns;
};

struct ht_callstack {
	struct ht_callstack_config cfg;
	struct timeline *tl;
	size_t first_event; /* the first event this call stack added */
	tl_str cat, name_syscall, name_kernel, name_signal, name_gap;
	struct ht_callstack_stats st;
	int err;

	struct frame *stack;
	uint32_t depth, max_depth;
	uint64_t hidden; /* calls beyond max_depth not yet returned */
	enum state state;
	uint64_t pos;
	uint64_t run_start; /* where the current run of trace began: frames before it start here */

	/* The last block's final branch: it takes effect where the next block starts. */
	struct {
		uint64_t end_ip, next_ip;
		uint8_t branch;
		uint8_t valid;
	} pend;
	struct {
		uint64_t p_start, resume;
		uint8_t syscall;
	} kern;
	struct {
		uint64_t p_start;
		tl_str reason;
	} gap;

	struct anchor *anchors;
	size_t nanchors, anchors_cap;
	size_t segment;	   /* the anchor time_at() found last */
	uint64_t block_ns; /* the last block's time: most blocks bring no new one */
	struct closed *queue;
	size_t qhead, qlen, qcap;
	struct func *funcs;

	/* OCaml traps, merged from every table; traps[] holds the depth that pushed each. */
	uint64_t *enter, *push, *pop;
	size_t nenter, npush, npop;
	uint64_t trap_lo, trap_hi;
	uint32_t traps[MAX_TRAPS];
	size_t ntraps;
};

static void observe(struct ht_callstack *cs, enum ht_cs_op op, uint64_t from, uint64_t to)
{
	struct ht_cs_change c = {op, from, to, cs->depth};

	if (cs->cfg.observe)
		cs->cfg.observe(cs->cfg.observe_ctx, &c);
}

static void timeline_failed(struct ht_callstack *cs)
{
	if (!cs->err)
		cs->err = ht_fail("call stacks: %s", tl_strerror(cs->tl));
}

/* Time. */

static uint64_t interpolate(const struct anchor *a, const struct anchor *b, uint64_t pos)
{
	uint64_t dt = b->ns - a->ns, dp = b->pos - a->pos, x = pos - a->pos;

	if (dt < (1ull << 32) && x < (1ull << 32))
		return a->ns + dt * x / dp;
	return a->ns + (uint64_t)((unsigned __int128)dt * x / dp);
}

static uint64_t time_at(struct ht_callstack *cs, uint64_t pos)
{
	const struct anchor *a = cs->anchors;
	size_t lo = 0, hi = cs->nanchors - 1;

	if (!cs->nanchors || pos <= a[0].pos)
		return cs->nanchors ? a[0].ns : 0;
	if (pos >= a[hi].pos)
		return a[hi].ns;
	/* Slices come in the order they end, mostly inside the segment asked for last. */
	if (cs->segment < hi && a[cs->segment].pos <= pos && pos < a[cs->segment + 1].pos)
		return interpolate(&a[cs->segment], &a[cs->segment + 1], pos);
	/* The last anchor at or before POS. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;

		if (a[mid].pos <= pos)
			lo = mid;
		else
			hi = mid - 1;
	}
	cs->segment = lo;
	return interpolate(&a[lo], &a[lo + 1], pos);
}

static void add_slice(struct ht_callstack *cs, const struct closed *c)
{
	uint64_t t0 = time_at(cs, c->p_start), t1 = time_at(cs, c->p_end);
	long ev =
		tl_add_event(cs->tl, TL_EVENT_SLICE, cs->cfg.track, t0, t1 - t0, c->name, cs->cat);

	if (ev >= 0 && c->before)
		ev = tl_event_arg_int(cs->tl, ev, HT_ARG_BEFORE_WINDOW, 1);
	if (ev >= 0 && c->reason)
		ev = tl_event_arg_str(cs->tl, ev, HT_PT_ARG_REASON, tl_str_get(cs->tl, c->reason));
	if (ev < 0)
		timeline_failed(cs);
	cs->st.slices++;
}

/* Slices whose end lies before the last timestamp have their times now. */
static void flush(struct ht_callstack *cs, int all)
{
	uint64_t limit = cs->nanchors ? cs->anchors[cs->nanchors - 1].pos : 0;

	while (cs->qlen && (all || cs->queue[cs->qhead].p_end < limit)) {
		add_slice(cs, &cs->queue[cs->qhead]);
		cs->qhead++;
		cs->qlen--;
	}
	if (!cs->qlen)
		cs->qhead = 0;
}

/*
 * A timestamp at POS. FORCED ones are kept even when the time did not move
 * (a PGD: the thread stopped here, not later), others only when it did.
 */
static void add_anchor(struct ht_callstack *cs, uint64_t pos, uint64_t ns, int forced)
{
	struct anchor *last = cs->nanchors ? &cs->anchors[cs->nanchors - 1] : NULL;

	if (last && ns < last->ns)
		ns = last->ns; /* time never runs back */
	if (!ns || (last && ns == last->ns && !forced))
		return;
	if (last && last->pos == pos) {
		last->ns = ns;
		return;
	}
	if (cs->nanchors == cs->anchors_cap) {
		size_t cap = cs->anchors_cap ? cs->anchors_cap * 2 : 1024;
		struct anchor *a = realloc(cs->anchors, cap * sizeof(*a));

		if (!a) {
			cs->err = ht_fail("out of memory for timestamps");
			return;
		}
		cs->anchors = a;
		cs->anchors_cap = cap;
	}
	cs->anchors[cs->nanchors++] = (struct anchor){pos, ns};
	flush(cs, 0);
}

static uint64_t last_ns(const struct ht_callstack *cs)
{
	return cs->nanchors ? cs->anchors[cs->nanchors - 1].ns : 0;
}

static void enqueue(struct ht_callstack *cs, uint64_t p_start, uint64_t p_end, tl_str name,
		    int before, tl_str reason)
{
	if (cs->qhead + cs->qlen == cs->qcap) {
		if (cs->qhead) {
			memmove(cs->queue, cs->queue + cs->qhead, cs->qlen * sizeof(*cs->queue));
			cs->qhead = 0;
		} else {
			size_t cap = cs->qcap ? cs->qcap * 2 : 1024;
			struct closed *q = realloc(cs->queue, cap * sizeof(*q));

			if (!q) {
				cs->err = ht_fail("out of memory for slices");
				return;
			}
			cs->queue = q;
			cs->qcap = cap;
		}
	}
	cs->queue[cs->qhead + cs->qlen++] = (struct closed){p_start, p_end, name, reason, before};
}

/* Functions. */

static tl_str unknown_name(struct ht_callstack *cs, uint64_t addr, const struct ht_pt_symbol *sym)
{
	char buf[512];
	const char *base;

	if (sym->module && sym->module[0]) {
		base = strrchr(sym->module, '/');
		snprintf(buf, sizeof(buf), "%s+%#" PRIx64, base ? base + 1 : sym->module,
			 sym->module_offset);
	} else {
		snprintf(buf, sizeof(buf), "%#" PRIx64, addr);
	}
	return tl_intern(cs->tl, buf);
}

static const struct func *lookup(struct ht_callstack *cs, uint64_t addr)
{
	struct func *f = &cs->funcs[(addr ^ (addr >> 13)) & (FUNC_CACHE - 1)];
	struct ht_pt_symbol sym;

	if (f->valid && f->addr == addr)
		return f;
	memset(&sym, 0, sizeof(sym));
	memset(f, 0, sizeof(*f));
	f->addr = addr;
	f->valid = 1;
	if (cs->cfg.resolve && !cs->cfg.resolve(cs->cfg.resolve_ctx, addr, &sym) && sym.function &&
	    sym.function[0]) {
		f->start = sym.start;
		f->end = sym.size && sym.start ? sym.start + sym.size : 0;
		f->name = tl_intern(cs->tl, sym.function);
	} else {
		f->unnamed = 1;
		f->name = unknown_name(cs, addr, &sym);
		f->module = sym.module ? tl_intern(cs->tl, sym.module) : 0;
	}
	if (!f->name)
		timeline_failed(cs);
	return f;
}

/* Whether one name is the other's ".cold" part (gcc splits cold code into NAME.cold). */
static int cold_pair(struct ht_callstack *cs, tl_str a, tl_str b)
{
	const char *x = tl_str_get(cs->tl, a), *y = tl_str_get(cs->tl, b);
	size_t lx = strlen(x), ly = strlen(y);

	if (lx > ly)
		return !strncmp(x, y, ly) && !strncmp(x + ly, ".cold", 5);
	if (ly > lx)
		return !strncmp(y, x, lx) && !strncmp(y + lx, ".cold", 5);
	return 0;
}

static int same_function(struct ht_callstack *cs, const struct frame *fr, const struct func *f)
{
	/* Without symbols, a jump that stays in its module stays in its function. */
	if (!fr->start && !f->start)
		return fr->module == f->module;
	if (fr->start == f->start)
		return 1;
	return fr->name != f->name && cold_pair(cs, fr->name, f->name);
}

static int contains(struct ht_callstack *cs, const struct frame *fr, uint64_t addr)
{
	if (fr->kind != FRAME_FUNCTION)
		return 0;
	if (fr->end)
		return addr >= fr->start && addr < fr->end;
	return same_function(cs, fr, lookup(cs, addr));
}

/* Frames. */

static struct frame *top(struct ht_callstack *cs)
{
	return &cs->stack[cs->depth - 1];
}

static void set_function(struct frame *fr, const struct func *f)
{
	fr->start = f->start;
	fr->end = f->end;
	fr->name = f->name;
	fr->module = f->module;
	fr->unnamed = f->unnamed;
}

static void push_frame(struct ht_callstack *cs, const struct func *f, uint64_t ret_addr,
		       uint64_t p_start, int before)
{
	struct frame *fr;

	if (cs->depth >= cs->max_depth) {
		cs->hidden++;
		cs->st.too_deep++;
		return;
	}
	fr = &cs->stack[cs->depth++];
	memset(fr, 0, sizeof(*fr));
	set_function(fr, f);
	fr->ret_addr = ret_addr;
	fr->p_start = p_start;
	fr->before = (uint8_t)before;
}

static void push_signal(struct ht_callstack *cs, uint64_t resume, uint64_t p)
{
	struct frame *fr;

	if (cs->depth >= cs->max_depth) {
		cs->hidden++;
		return;
	}
	fr = &cs->stack[cs->depth++];
	memset(fr, 0, sizeof(*fr));
	fr->kind = FRAME_SIGNAL;
	fr->name = cs->name_signal;
	fr->ret_addr = resume;
	fr->p_start = p;
}

static void close_frames(struct ht_callstack *cs, uint32_t n, uint64_t p_end)
{
	while (n-- && cs->depth) {
		struct frame *fr = top(cs);

		enqueue(cs, fr->p_start, p_end, fr->name, fr->before, 0);
		cs->depth--;
	}
}

/* The first frame of a run, or the caller a return went back to: it began before we saw it. */
static void push_root(struct ht_callstack *cs, uint64_t addr)
{
	push_frame(cs, lookup(cs, addr), 0, cs->run_start, 1);
}

/* The top frame's function is replaced: a tail call, a PLT stub's jump. */
static void replace(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	const struct func *f = lookup(cs, to);
	struct frame *fr = top(cs);
	uint64_t ret_addr = fr->ret_addr;

	cs->st.tail_calls++;
	if (fr->unnamed && fr->ninsn <= PLT_MAX_INSNS) {
		set_function(fr, f); /* the stub was the way in: the slice is the callee's */
	} else {
		close_frames(cs, 1, cs->pos);
		push_frame(cs, f, ret_addr, cs->pos, 0);
	}
	observe(cs, HT_CS_TAIL, from, to);
}

/* The innermost frame below the top whose function holds ADDR, or -1. */
static long outer_frame_holding(struct ht_callstack *cs, uint64_t addr)
{
	long stop = cs->depth > OUTER_SCAN ? (long)cs->depth - OUTER_SCAN : 0;

	for (long k = (long)cs->depth - 2; k >= stop; k--)
		if (contains(cs, &cs->stack[k], addr))
			return k;
	return -1;
}

/* Leave every frame above index K without returns. */
static void unwind_to(struct ht_callstack *cs, long k, enum ht_cs_op op, uint64_t from, uint64_t to)
{
	close_frames(cs, cs->depth - (uint32_t)k - 1, cs->pos);
	if (op == HT_CS_UNWIND)
		cs->st.unwinds++;
	observe(cs, op, from, to);
}

/* TO lies in a frame further out: unwind to it (longjmp, exceptions); else TO replaces the top. */
static void unwind_or_replace(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	long k = outer_frame_holding(cs, to);

	if (k >= 0)
		unwind_to(cs, k, HT_CS_UNWIND, from, to);
	else
		replace(cs, from, to);
}

static void do_jump(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	const struct func *f;

	if (cs->hidden || !cs->depth || contains(cs, top(cs), to))
		return;
	f = lookup(cs, to);
	if (top(cs)->kind == FRAME_SIGNAL) {
		push_frame(cs, f, 0, cs->pos, 0); /* code the handler's frame handed over to */
		return;
	}
	if (f->start && f->start == to) {
		replace(cs, from, to);
		return;
	}
	unwind_or_replace(cs, from, to);
}

/* A return whose frame's call we did not see, or that goes somewhere unexpected. */
static void odd_return(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	if (top(cs)->ret_addr) {
		/* It goes elsewhere than its call came from: an unwinder, a retpoline. */
		unwind_or_replace(cs, from, to);
		return;
	}
	close_frames(cs, 1, cs->pos);
	if (!cs->depth) {
		push_root(cs, to);
		return;
	}
	if (top(cs)->kind == FRAME_SIGNAL) {
		/* A handler returns to the signal trampoline (sa_restorer). */
		push_frame(cs, lookup(cs, to), 0, cs->pos, 0);
		return;
	}
	if (contains(cs, top(cs), to))
		return;
	unwind_or_replace(cs, from, to);
}

static void do_return(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	cs->st.returns++;
	if (cs->hidden) {
		cs->hidden--;
	} else if (cs->depth && top(cs)->ret_addr == to) {
		close_frames(cs, 1, cs->pos);
	} else if (cs->depth) {
		long k;

		/* Several frames at once: the return skips frames whose returns we did not see. */
		for (k = (long)cs->depth - 2; k >= 0; k--)
			if (cs->stack[k].ret_addr == to)
				break;
		if (k >= 0)
			close_frames(cs, cs->depth - (uint32_t)k, cs->pos);
		else
			odd_return(cs, from, to);
	}
	observe(cs, HT_CS_RETURN, from, to);
}

static void do_call(struct ht_callstack *cs, uint64_t from, uint64_t to, uint64_t ret_addr)
{
	/* call to the next instruction: position-independent code reading its own address */
	if (to == ret_addr)
		return;
	cs->st.calls++;
	push_frame(cs, lookup(cs, to), ret_addr, cs->pos, 0);
	observe(cs, HT_CS_CALL, from, to);
}

/* OCaml traps. */

static size_t lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int in_sorted(const uint64_t *v, size_t n, uint64_t x)
{
	size_t i = lower_bound(v, n, x);

	return i < n && v[i] == x;
}

static int is_enter_trap(const struct ht_callstack *cs, uint64_t addr)
{
	return cs->nenter && addr >= cs->trap_lo && addr <= cs->trap_hi &&
	       in_sorted(cs->enter, cs->nenter, addr);
}

/* Push-traps and pop-traps the block [LO, HI] ran, in address order (a block runs straight). */
static void scan_traps(struct ht_callstack *cs, uint64_t lo, uint64_t hi)
{
	size_t i, j;

	if (hi < cs->trap_lo || lo > cs->trap_hi)
		return;
	i = lower_bound(cs->push, cs->npush, lo);
	j = lower_bound(cs->pop, cs->npop, lo);
	for (;;) {
		uint64_t a = i < cs->npush && cs->push[i] <= hi ? cs->push[i] : UINT64_MAX;
		uint64_t b = j < cs->npop && cs->pop[j] <= hi ? cs->pop[j] : UINT64_MAX;

		if (a == UINT64_MAX && b == UINT64_MAX)
			return;
		if (a <= b) {
			if (cs->ntraps < MAX_TRAPS)
				cs->traps[cs->ntraps++] = cs->depth;
			i++;
		} else {
			if (cs->ntraps)
				cs->ntraps--;
			j++;
		}
	}
}

/* A raise landed on a handler: back to the frame that pushed its trap. */
static void enter_trap(struct ht_callstack *cs, uint64_t from, uint64_t to)
{
	long k;

	cs->st.traps++;
	if (cs->ntraps) {
		uint32_t d = cs->traps[--cs->ntraps];

		if (d && d < cs->depth)
			close_frames(cs, cs->depth - d, cs->pos);
		observe(cs, HT_CS_TRAP, from, to);
		return;
	}
	/* The trap was pushed before the trace began: the handler's function is an open frame. */
	k = cs->depth && contains(cs, top(cs), to) ? (long)cs->depth - 1
						   : outer_frame_holding(cs, to);
	if (k >= 0)
		unwind_to(cs, k, HT_CS_TRAP, from, to);
	else
		do_jump(cs, from, to);
}

/* Most branches are jumps inside the function: nothing to do, and quickly. */
static inline int stays_inside(const struct ht_callstack *cs, uint64_t to)
{
	const struct frame *fr;

	if (cs->pend.branch != HT_PT_BR_COND && cs->pend.branch != HT_PT_BR_JUMP)
		return 0;
	if (cs->nenter || cs->hidden || !cs->depth)
		return 0;
	fr = &cs->stack[cs->depth - 1];
	return fr->end && to >= fr->start && to < fr->end;
}

/* The branch that ended the last block, now that we know where it went. */
static void take_branch(struct ht_callstack *cs, uint64_t to)
{
	uint64_t from = cs->pend.end_ip;

	cs->pend.valid = 0;
	if (is_enter_trap(cs, to)) {
		enter_trap(cs, from, to);
		return;
	}
	switch (cs->pend.branch) {
	case HT_PT_BR_COND:
	case HT_PT_BR_JUMP:
	case HT_PT_BR_UNKNOWN:
		do_jump(cs, from, to);
		break;
	case HT_PT_BR_CALL:
		do_call(cs, from, to, cs->pend.next_ip);
		break;
	case HT_PT_BR_RETURN:
		do_return(cs, from, to);
		break;
	default:
		break;
	}
}

/* Gaps and the kernel. */

static void start_gap(struct ht_callstack *cs, uint64_t p, const char *reason)
{
	close_frames(cs, cs->depth, p);
	cs->hidden = 0;
	cs->ntraps = 0;
	cs->pend.valid = 0;
	cs->state = ST_GAP;
	cs->gap.p_start = p;
	cs->gap.reason = tl_intern(cs->tl, reason);
	cs->st.gaps++;
	observe(cs, HT_CS_GAP, 0, 0);
}

static void end_gap(struct ht_callstack *cs, uint64_t p)
{
	enqueue(cs, cs->gap.p_start, p, cs->name_gap, 0, cs->gap.reason);
	cs->state = ST_RUN;
	cs->run_start = p;
}

static void kernel_slice(struct ht_callstack *cs, uint64_t p_end)
{
	enqueue(cs, cs->kern.p_start, p_end, cs->kern.syscall ? cs->name_syscall : cs->name_kernel,
		0, 0);
	cs->st.kernel++;
}

/* Index of the signal frame the thread resumes from at IP, or -1. */
static long signal_frame_resuming(struct ht_callstack *cs, uint64_t ip)
{
	for (long k = (long)cs->depth - 1; k >= 0; k--)
		if (cs->stack[k].kind == FRAME_SIGNAL && cs->stack[k].ret_addr == ip)
			return k;
	return -1;
}

static void on_enabled(struct ht_callstack *cs, const struct ht_pt_item *it, uint64_t p)
{
	uint64_t ip = it->ip;
	const struct func *f;
	long k;

	if (cs->state == ST_GAP || cs->state == ST_IDLE) {
		add_anchor(cs, p, it->time_ns, cs->state == ST_GAP);
		if (cs->state == ST_GAP)
			end_gap(cs, p);
		cs->state = ST_RUN;
		cs->run_start = p;
		return;
	}
	if (cs->state != ST_KERNEL)
		return; /* a status update: tracing was on */
	add_anchor(cs, p, it->time_ns, 1);
	cs->state = ST_RUN;
	if ((cs->kern.resume && ip == cs->kern.resume) ||
	    (!cs->kern.resume && cs->depth && contains(cs, top(cs), ip))) {
		kernel_slice(cs, p);
		observe(cs, HT_CS_KERNEL, 0, ip);
		return;
	}
	k = signal_frame_resuming(cs, ip);
	if (k >= 0) {
		kernel_slice(cs, p);
		close_frames(cs, cs->depth - (uint32_t)k, p);
		observe(cs, HT_CS_SIGRETURN, 0, ip);
		return;
	}
	f = lookup(cs, ip);
	if (cs->depth && f->start == ip) {
		kernel_slice(cs, p);
		cs->st.signals++;
		push_signal(cs, cs->kern.resume, p);
		push_frame(cs, f, 0, p, 0);
		observe(cs, HT_CS_SIGNAL, 0, ip);
		return;
	}
	cs->state = ST_KERNEL;
	start_gap(cs, cs->kern.p_start, "resumed elsewhere");
	end_gap(cs, p);
}

static void on_disabled(struct ht_callstack *cs, const struct ht_pt_item *it, uint64_t p)
{
	if (cs->state != ST_RUN)
		return;
	/* An interrupt: the branch before it had gone to where the thread was stopped. */
	if (it->async && it->ip && cs->pend.valid)
		take_branch(cs, it->ip);
	cs->pend.valid = 0;
	add_anchor(cs, p, it->time_ns, 1);
	cs->kern.p_start = p;
	cs->kern.resume = it->ip;
	cs->kern.syscall = it->syscall && !it->async;
	cs->state = ST_KERNEL;
}

static void lose(struct ht_callstack *cs, uint64_t p, const char *reason)
{
	if (cs->state == ST_RUN)
		start_gap(cs, p, reason);
	else if (cs->state == ST_KERNEL)
		start_gap(cs, cs->kern.p_start, reason);
}

/* Rare, with a big buffer: kept out of the per-block path's stack frame. */
static __attribute__((noinline)) void on_error(struct ht_callstack *cs, const struct ht_pt_item *it,
					       uint64_t p)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "decode error at offset %#" PRIx64 ": %s", it->offset,
		 pt_errstr(pt_errcode(it->error)));
	add_anchor(cs, p, it->time_ns, 1);
	lose(cs, p, reason);
}

/* The gap lasts until the next block, sync or enable says where and when the thread is. */
static void on_overflow(struct ht_callstack *cs, const struct ht_pt_item *it, uint64_t p)
{
	add_anchor(cs, p, it->time_ns, 1);
	lose(cs, p, "overflow");
	if (cs->state == ST_IDLE) {
		cs->state = ST_GAP;
		cs->gap.p_start = p;
		cs->gap.reason = tl_intern(cs->tl, "overflow");
	}
}

static void on_sync(struct ht_callstack *cs, const struct ht_pt_item *it, uint64_t p)
{
	add_anchor(cs, p, it->time_ns, cs->state == ST_GAP);
	if (cs->state == ST_GAP)
		end_gap(cs, p);
	if (cs->state == ST_IDLE) {
		cs->state = ST_RUN;
		cs->run_start = p;
	}
}

static void on_block(struct ht_callstack *cs, const struct ht_pt_item *it)
{
	struct frame *fr;

	if (cs->state != ST_RUN) {
		add_anchor(cs, cs->pos, it->time_ns, 1);
		/* Instructions without an enable: whatever was open is lost. */
		if (cs->state == ST_KERNEL)
			start_gap(cs, cs->kern.p_start, "no enable");
		if (cs->state == ST_GAP)
			end_gap(cs, cs->pos);
		cs->state = ST_RUN;
		cs->run_start = cs->pos;
	}
	if (it->time_ns != cs->block_ns) {
		cs->block_ns = it->time_ns;
		add_anchor(cs, cs->pos, it->time_ns, 0);
	}
	if (!cs->depth && !cs->hidden) {
		cs->pend.valid = 0;
		push_root(cs, it->ip);
	} else if (cs->pend.valid && !stays_inside(cs, it->ip)) {
		take_branch(cs, it->ip);
	}
	if (cs->nenter + cs->npush)
		scan_traps(cs, it->ip, it->end_ip);
	if (cs->depth && !cs->hidden) {
		fr = top(cs);
		/* Only a frame without a name can be a PLT stub: only its length matters. */
		if (fr->unnamed && fr->ninsn <= PLT_MAX_INSNS)
			fr->ninsn += it->ninsn;
	}
	cs->pos += it->ninsn;
	cs->pend.branch = it->branch;
	cs->pend.end_ip = it->end_ip;
	cs->pend.next_ip = it->next_ip;
	cs->pend.valid = 1;
}

static void on_item(struct ht_callstack *cs, const struct ht_pt_item *it)
{
	uint64_t p;

	if (it->kind == HT_PT_ITEM_BLOCK) {
		on_block(cs, it);
		return;
	}
	/* Each event takes a position of its own, so a PGD and its PGE are apart. */
	p = cs->pos++;
	switch (it->kind) {
	case HT_PT_ITEM_SYNC:
		on_sync(cs, it, p);
		break;
	case HT_PT_ITEM_ENABLED:
		on_enabled(cs, it, p);
		break;
	case HT_PT_ITEM_DISABLED:
		on_disabled(cs, it, p);
		break;
	case HT_PT_ITEM_OVERFLOW:
		on_overflow(cs, it, p);
		break;
	case HT_PT_ITEM_ERROR:
		on_error(cs, it, p);
		break;
	default:
		break;
	}
}

int ht_callstack_items(void *arg, const struct ht_pt_item *items, size_t n)
{
	struct ht_callstack *cs = arg;

	for (size_t i = 0; i < n && !cs->err; i++)
		on_item(cs, &items[i]);
	return cs->err ? -1 : 0;
}

int ht_callstack_finish(struct ht_callstack *cs, uint64_t end_ns)
{
	uint64_t p = cs->pos;

	if (end_ns > last_ns(cs)) {
		add_anchor(cs, p, last_ns(cs), 1);
		p++;
		add_anchor(cs, p, end_ns, 1);
	}
	if (cs->state == ST_KERNEL)
		kernel_slice(cs, p);
	close_frames(cs, cs->depth, p);
	if (cs->state == ST_GAP)
		end_gap(cs, p);
	cs->state = ST_IDLE;
	flush(cs, 1);
	/* Slices went in as they closed; in start order the file's writer sorts them in one pass. */
	if (!cs->err && tl_reorder_nested(cs->tl, cs->first_event))
		timeline_failed(cs);
	return cs->err ? -1 : 0;
}

/* Setup. */

static int merge_traps(struct ht_callstack *cs)
{
	size_t ne = 0, np = 0, no = 0;

	for (size_t i = 0; i < cs->cfg.nocaml; i++) {
		ne += cs->cfg.ocaml[i]->nenter;
		np += cs->cfg.ocaml[i]->npush;
		no += cs->cfg.ocaml[i]->npop;
	}
	cs->enter = malloc((ne + 1) * sizeof(uint64_t));
	cs->push = malloc((np + 1) * sizeof(uint64_t));
	cs->pop = malloc((no + 1) * sizeof(uint64_t));
	if (!cs->enter || !cs->push || !cs->pop)
		return ht_fail("out of memory for OCaml traps");
	cs->trap_lo = UINT64_MAX;
	for (size_t i = 0; i < cs->cfg.nocaml; i++) {
		const struct ht_ocaml_eh *eh = cs->cfg.ocaml[i];

		memcpy(cs->enter + cs->nenter, eh->enter, eh->nenter * sizeof(uint64_t));
		memcpy(cs->push + cs->npush, eh->push, eh->npush * sizeof(uint64_t));
		memcpy(cs->pop + cs->npop, eh->pop, eh->npop * sizeof(uint64_t));
		cs->nenter += eh->nenter;
		cs->npush += eh->npush;
		cs->npop += eh->npop;
	}
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void trap_range(struct ht_callstack *cs, uint64_t *v, size_t n)
{
	if (!n)
		return;
	qsort(v, n, sizeof(*v), u64_cmp);
	if (v[0] < cs->trap_lo)
		cs->trap_lo = v[0];
	if (v[n - 1] > cs->trap_hi)
		cs->trap_hi = v[n - 1];
}

struct ht_callstack *ht_callstack_new(const struct ht_callstack_config *cfg)
{
	struct ht_callstack *cs;

	if (!cfg->tl) {
		ht_fail("call stacks need a timeline");
		return NULL;
	}
	cs = calloc(1, sizeof(*cs));
	if (!cs) {
		ht_fail("out of memory for call stacks");
		return NULL;
	}
	cs->cfg = *cfg;
	cs->tl = cfg->tl;
	cs->first_event = tl_event_count(cfg->tl);
	cs->max_depth = cfg->max_depth ? cfg->max_depth : DEFAULT_MAX_DEPTH;
	cs->stack = calloc(cs->max_depth, sizeof(*cs->stack));
	cs->funcs = calloc(FUNC_CACHE, sizeof(*cs->funcs));
	if (!cs->stack || !cs->funcs || merge_traps(cs)) {
		ht_callstack_free(cs);
		ht_fail("out of memory for call stacks");
		return NULL;
	}
	trap_range(cs, cs->enter, cs->nenter);
	trap_range(cs, cs->push, cs->npush);
	trap_range(cs, cs->pop, cs->npop);
	cs->cat = tl_intern(cs->tl, HT_CAT_USER);
	cs->name_syscall = tl_intern(cs->tl, HT_PT_SLICE_SYSCALL);
	cs->name_kernel = tl_intern(cs->tl, HT_PT_SLICE_KERNEL);
	cs->name_signal = tl_intern(cs->tl, HT_PT_SLICE_SIGNAL);
	cs->name_gap = tl_intern(cs->tl, HT_PT_SLICE_GAP);
	if (!cs->cat || !cs->name_gap || tl_error(cs->tl)) {
		ht_fail("call stacks: %s", tl_strerror(cs->tl));
		ht_callstack_free(cs);
		return NULL;
	}
	return cs;
}

void ht_callstack_get_stats(const struct ht_callstack *cs, struct ht_callstack_stats *out)
{
	*out = cs->st;
}

void ht_callstack_free(struct ht_callstack *cs)
{
	if (!cs)
		return;
	free(cs->stack);
	free(cs->funcs);
	free(cs->anchors);
	free(cs->queue);
	free(cs->enter);
	free(cs->push);
	free(cs->pop);
	free(cs);
}
