/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The user stack a target thread had when it last went to sleep
 * (--block-stacks): taken by the sched_switch program at each voluntary
 * switch-out, while the thread is still current (a user stack can only be
 * had then), kept in task storage, and sent on its own ring buffer before
 * the breach of the wait it began, which names it by tid and seq
 * (ht_breach.block_stack_seq). Both sides compile this header.
 */
#ifndef HYBTRACE_BLOCK_STACK_H
#define HYBTRACE_BLOCK_STACK_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum ht_block_stack_mode {
	HT_BLOCK_STACK_OFF = 0,
	HT_BLOCK_STACK_FP = 1,	  /* the frame-pointer chain, and the leaf's stack for its fixup */
	HT_BLOCK_STACK_DWARF = 2, /* registers and the top of the stack, for libdw */
};

#define HT_BLOCK_STACK_MAX_FRAMES 64
/*
 * DWARF mode copies whole pages from the one SP is in: between
 * (PAGES - 1) * 4 KiB and PAGES * 4 KiB above SP, as far as they are mapped
 * and resident (the copy cannot fault pages in under the rq lock).
 */
#define HT_BLOCK_STACK_PAGE_BYTES 4096
#define HT_BLOCK_STACK_PAGES	  3
/* The registers both modes keep, in the order of unwind_dwarf.h's enum ht_dwarf_reg. */
#define HT_BLOCK_STACK_NREGS 17
/*
 * FP mode also copies this much stack from SP: a thread blocks in libc,
 * built without frame pointers, and a frame-pointer walk skips the frames
 * between its leaf and the first frame that has one (pthread_mutex_lock and
 * its caller). User space unwinds them from CFI in this copy, up to where
 * the chain goes on.
 */
#define HT_BLOCK_STACK_LEAF_BYTES 1024

/* The part both kinds of record begin with. */
struct ht_block_stack_head {
	__u64 switch_ns; /* when it left the CPU: the wait's start */
	__u32 tid;
	__u32 mode;  /* enum ht_block_stack_mode */
	__s32 bytes; /* FP: bytes of ips; DWARF: bytes of stack copied; or a negative errno */
	__u32 seq;   /* the thread's stacks kept so far, this one included: its breach names it */
};

struct ht_block_stack_fp {
	struct ht_block_stack_head head;
	__u64 ips[HT_BLOCK_STACK_MAX_FRAMES]; /* innermost first */
	__u64 regs[HT_BLOCK_STACK_NREGS];
	__s32 leaf_bytes; /* bytes of leaf, or a negative errno */
	__u32 pad;
	__u8 leaf[HT_BLOCK_STACK_LEAF_BYTES]; /* the stack from regs' SP on */
};

struct ht_block_stack_dwarf {
	struct ht_block_stack_head head;
	__u64 regs[HT_BLOCK_STACK_NREGS];
	__u64 stack_base; /* the user address stack[0] was copied from, page aligned */
	__u8 stack[HT_BLOCK_STACK_PAGES * HT_BLOCK_STACK_PAGE_BYTES];
};

#endif /* HYBTRACE_BLOCK_STACK_H */
