/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Call stacks from decoded PT blocks (intelpt_decode.h), as nested slices
 * on one thread's track of the timeline, category HT_CAT_USER, each named
 * by its function.
 *
 * Rules, in the order they are tried at each branch:
 *  - a call pushes a frame for the callee (a call to the next instruction,
 *    the position-independent-code idiom, is not a call);
 *  - a branch of any kind that lands on an OCaml enter-trap unwinds to the
 *    frame that executed the matching push-trap (ocaml_eh.h);
 *  - a return pops to the frame whose return address it goes to (one frame
 *    normally, several for a return that skips frames); a return from a
 *    frame whose call came before the trace (a snapshot that starts deep in
 *    a stack) closes it and opens its caller, back-dated to the start of the
 *    trace and marked HT_ARG_BEFORE_WINDOW = 1;
 *  - a jump that stays in the function does nothing; one to another
 *    function's entry is a tail call: the frame is replaced (a PLT stub, a
 *    frame without a symbol that ran a few instructions, is renamed
 *    instead); one into the middle of an outer frame's function unwinds to
 *    that frame (longjmp); one into the middle of any other function
 *    replaces the frame. "f" and "f.cold" are one function; without
 *    symbols, a jump that stays in its module stays in its function;
 *  - with user-only tracing a syscall or an interrupt is TIP.PGD and then
 *    TIP.PGE where the thread resumes: a kernel excursion, drawn as a slice
 *    "[syscall]" (or "[kernel]" for an interrupt) under the current frame,
 *    and the stack is kept;
 *  - a PGE at the entry of a function instead is a signal handler: a slice
 *    "[signal]" nested where the thread was holds the handler's frames,
 *    until a PGE comes back to where the thread was interrupted (after
 *    rt_sigreturn) and closes them;
 *  - anything else that loses the thread (OVF, a decode error, a PGE
 *    anywhere else) closes every open frame and draws a "[gap]" slice with
 *    the reason; after it, frames start afresh (marked as above).
 * Slices close when their frame does, so they always nest; what is still
 * open at the end closes at the last time decoded (or at END_NS).
 *
 * Times: each block carries libipt's time; between two changes of it,
 * times are spread over the instructions run (so a call that took 10% of
 * the instructions between two timing packets gets 10% of the time). A PGD
 * is pinned at the time libipt gives it, so kernel time is not spread over
 * the user code before it.
 *
 * One call stack per thread: give it only that thread's trace (a per-CPU
 * AUX stream must first be cut at the thread's context switches).
 */
#ifndef HT_CALLSTACK_H
#define HT_CALLSTACK_H

#include <stddef.h>
#include <stdint.h>
#include "sources/intelpt/intelpt_decode.h"

struct timeline;
struct ht_ocaml_eh;

/* Names of the slices that are not functions. */
#define HT_PT_SLICE_SYSCALL "[syscall]" /* a syscall, with user-only tracing */
#define HT_PT_SLICE_KERNEL  "[kernel]"	/* an interrupt or fault */
#define HT_PT_SLICE_SIGNAL  "[signal]"	/* holds a signal handler's frames */
#define HT_PT_SLICE_GAP	    "[gap]"	/* arg "reason": what lost the thread */
#define HT_PT_ARG_REASON    "reason"

/* What a resolver says about an address. */
struct ht_pt_symbol {
	const char *function;	/* NULL: unknown; copied at once */
	const char *module;	/* path, "[vdso]" ...; NULL: none */
	uint64_t module_offset; /* for "module+0xoffset" when the function is unknown */
	uint64_t start;		/* the function's first byte; 0 when unknown */
	uint64_t size;		/* 0 when unknown */
};

/* Fill OUT for ADDR (zeroed first). Returns 0, or -1 when nothing is known. */
typedef int (*ht_pt_resolve_fn)(void *ctx, uint64_t addr, struct ht_pt_symbol *out);

/* What changed in the stack, for tests and debugging. */
enum ht_cs_op {
	HT_CS_CALL,	 /* a call from (its address) to */
	HT_CS_RETURN,	 /* a return from (its address) to */
	HT_CS_TAIL,	 /* the top frame was replaced by a jump from to */
	HT_CS_UNWIND,	 /* frames were left without returns (longjmp) */
	HT_CS_TRAP,	 /* an OCaml raise unwound to the frame that pushed the trap */
	HT_CS_KERNEL,	 /* a kernel excursion ended; the stack is kept */
	HT_CS_SIGNAL,	 /* a signal handler was entered at to */
	HT_CS_SIGRETURN, /* the handler's frames closed, the thread resumed at to */
	HT_CS_GAP,	 /* every frame closed: trace lost */
};

struct ht_cs_change {
	enum ht_cs_op op;
	uint64_t from, to;
	uint32_t depth; /* frames open afterwards */
};

typedef void (*ht_cs_observe_fn)(void *ctx, const struct ht_cs_change *change);

struct ht_callstack_config {
	struct timeline *tl;
	int track; /* the thread's track (tl_add_track) */
	ht_pt_resolve_fn resolve;
	void *resolve_ctx;
	/* OCaml trap tables, relocated to runtime addresses (ht_ocaml_eh_relocate); may be none. */
	const struct ht_ocaml_eh *const *ocaml;
	size_t nocaml;
	ht_cs_observe_fn observe; /* may be NULL */
	void *observe_ctx;
	uint32_t max_depth; /* frames kept; deeper calls are counted, not drawn; 0: 4096 */
};

struct ht_callstack_stats {
	uint64_t slices; /* added to the timeline */
	uint64_t calls, returns, tail_calls, unwinds, traps;
	uint64_t kernel, signals, gaps;
	uint64_t too_deep; /* calls beyond max_depth */
};

struct ht_callstack;

/* Returns NULL with ht_last_error() set. */
struct ht_callstack *ht_callstack_new(const struct ht_callstack_config *cfg);

/*
 * Take decoded items: pass this as the ht_pt_sink_fn of ht_pt_decode()
 * with the callstack as its context. Returns 0, or -1 with ht_last_error()
 * set when the timeline failed (decoding then stops).
 */
int ht_callstack_items(void *cs, const struct ht_pt_item *items, size_t n);

/*
 * Close what is still open, at END_NS when it is later than the last time
 * decoded, and add the remaining slices. Returns 0 or -1.
 */
int ht_callstack_finish(struct ht_callstack *cs, uint64_t end_ns);

void ht_callstack_get_stats(const struct ht_callstack *cs, struct ht_callstack_stats *out);
void ht_callstack_free(struct ht_callstack *cs);

#endif /* HT_CALLSTACK_H */
