/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --block-stacks in user space: the stacks the monitor sends before each
 * off-CPU or syscall breach (hybtrace/block_stack.h) are kept here until
 * the breach that names them (by tid and seq) is read, then symbolized (or
 * unwound with libdw first, with --callgraph dwarf) into frames that the
 * live line, the JSON line and the dump show, each with the symbols of
 * its own process (symbolizer_set.h). Event loop only: the set it holds
 * is not shared.
 */
#ifndef HT_BLOCK_STACKS_H
#define HT_BLOCK_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hybtrace/block_stack.h"
#include "hybtrace/records.h"
#include "base/json.h"

struct ht_symbolizer_set;
struct timeline;

/* Stacks received and not yet claimed by their breach: a few breaches' worth. */
#define HT_BLOCK_PENDING 32

struct ht_block_frame {
	uint64_t ip;	    /* as unwound: every frame but the first is a return address */
	char function[128]; /* ht_symbol_format(): "function", "module+0xoff" or "0xADDR" */
	char module[96];    /* the mapping's path; "" when none holds it */
};

/* A stack where a thread blocked, resolved: innermost frame first. */
struct ht_block_frames {
	uint64_t switch_ns; /* when it left the CPU */
	uint32_t tid;
	uint32_t mode; /* enum ht_block_stack_mode */
	int32_t error; /* the kernel's negative errno when it had no stack; 0 */
	uint32_t depth;
	struct ht_block_frame f[HT_BLOCK_STACK_MAX_FRAMES];
};

struct ht_block_pending {
	bool used;
	uint64_t seq; /* arrival order: the oldest unclaimed makes room first */
	size_t len;
	void *data; /* a struct ht_block_stack_fp or _dwarf, LEN bytes */
};

struct ht_block_stacks {
	unsigned int mode; /* enum ht_block_stack_mode */
	/* Each target process's symbolizer and unwinder; NULL: addresses only. */
	struct ht_symbolizer_set *symbols;
	struct ht_block_pending pending[HT_BLOCK_PENDING];
	uint64_t seq;
	uint64_t received, malformed, replaced; /* replaced: dropped unclaimed for a newer one */
	uint64_t superseded; /* sent for a sleep a longer one of its syscall replaced */
	uint64_t missing;    /* named by a breach, never received (or dropped unclaimed) */
	/* Modules whose frame-pointer stacks were one frame deep, said once each. */
	char **hinted;
	size_t nhinted;
};

/*
 * In MODE (not OFF). Each process's symbolizer and unwinder are made as its
 * first stack is taken; without them frames are addresses, with a warning.
 * Returns 0, or -1 with ht_last_error() (out of memory).
 */
int ht_block_stacks_init(struct ht_block_stacks *bs, unsigned int mode);

/* Now and then: each process's maps are read again when its next stack is taken. */
void ht_block_stacks_stale(struct ht_block_stacks *bs);
void ht_block_stacks_free(struct ht_block_stacks *bs);

/* The ring buffer's callback (ring_buffer_sample_fn): keep a copy of one record. */
int ht_block_stacks_on_record(void *ctx, void *data, size_t size);

/* Keep a record (as the callback does). Returns 0, or -1 when it is malformed. */
int ht_block_stacks_add(struct ht_block_stacks *bs, const void *data, size_t size);

/*
 * TID's stack SEQ, the one a breach names (ht_breach.block_stack_seq),
 * removed from what is kept, with TID's older ones (sent for sleeps its
 * breaches did not keep). Returns it (free() it), or NULL (counted in
 * missing); *LEN gets its size.
 */
void *ht_block_stacks_claim(struct ht_block_stacks *bs, uint32_t tid, uint32_t seq, size_t *len);

/*
 * Why breach B (off-CPU or syscall, --block-stacks) comes without the stack
 * where it blocked: "never-blocked" (its syscall never left the CPU of its
 * own accord: there is no such place), "lost" (not kept or not sent in the
 * kernel: block_stack_drops) or "not-received" (named, and user space never
 * got it; TAKEN: whether it did). NULL when it has its stack.
 */
const char *ht_block_stack_missing(const struct ht_breach *b, bool taken);

/*
 * Claim TID's stack SEQ and resolve it into OUT with the symbols of process
 * TGID (TID's). Returns 0, or -1 when it was never received.
 */
int ht_block_stacks_take(struct ht_block_stacks *bs, int tgid, uint32_t tid, uint32_t seq,
			 struct ht_block_frames *out);

/*
 * A DWARF record's registers and the copied stack from its SP on: *STACK
 * and *LEN (0 when SP is outside the copy). Returns 0, or -1 when the
 * record is no DWARF record or copied nothing.
 */
int ht_block_stack_dwarf_view(const struct ht_block_stack_dwarf *d, const uint8_t **stack,
			      size_t *len);

/*
 * FP mode's fixup: FP (NFP frames) is the frame-pointer walk, CFI (NCFI)
 * the unwind of the leaf's copied stack. Where CFI reaches FP's second
 * frame (the return address of the first frame with a frame pointer), the
 * frames CFI found before it replace FP's first: those the walk skipped.
 * Otherwise FP as it is. Writes at most MAX into OUT; returns how many.
 */
int ht_block_stack_fixup(const uint64_t *fp, int nfp, const uint64_t *cfi, int ncfi, uint64_t *out,
			 int max);

/*
 * A frame-pointer stack one frame deep: its module, the first time it is
 * seen for that module (the caller says so once), else NULL.
 */
const char *ht_block_stacks_hint(struct ht_block_stacks *bs, const struct ht_block_frames *fr);

/*
 * The members "block_stack":["f0","f1",...],"block_stack_at_ns":N (innermost
 * first; N: when it left the CPU) of a breach's JSON object.
 */
void ht_block_frames_print_json(struct ht_json *j, const struct ht_block_frames *fr);

/* ' blocked in f0 <- f1 <- f2 <- f3' (at most four), for a breach's line of text. */
void ht_block_frames_print_text(FILE *f, const struct ht_block_frames *fr);

/*
 * The stack as an instant at the switch-out on the thread's track of TL,
 * named HT_EV_BLOCK_STACK, with the frames as its callstack (root first).
 * Returns 0, or -1 with ht_last_error().
 */
int ht_block_frames_to_timeline(struct timeline *tl, int tgid, const struct ht_block_frames *fr);

/*
 * What the sampled stack nearest a wait is, said plainly: "last sample
 * 2.86ms before it blocked" (GAP_NS before; WHAT: "it blocked"...).
 */
const char *ht_last_sample_label(uint64_t gap_ns, const char *what, char *buf, size_t len);

#endif /* HT_BLOCK_STACKS_H */
