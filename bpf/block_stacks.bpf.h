/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --block-stacks, included by monitor.bpf.c: the user stack of a target
 * thread as it goes to sleep, kept with the thread until the next one, and
 * sent (hybtrace/block_stack.h) before the breach of its wait. Each stack a
 * thread keeps gets the next seq; the thread's state notes the seq of its
 * last sleep's stack, and a breach names the seq it was sent with: which
 * stack belongs to which wait never hangs on comparing times.
 *
 * Only sched_switch can take it: there the thread leaving is current, and
 * bpf_get_task_stack() refuses another task's user stack. The record lives
 * in task storage, not on the BPF stack (512 bytes): the helpers write into
 * the map value directly.
 */
#ifndef HT_BLOCK_STACKS_BPF_H
#define HT_BLOCK_STACKS_BPF_H

#include "hybtrace/block_stack.h"
#include "settings.bpf.h"

/* Stacks not sent because their ring was full, or not kept for want of task storage. */
__u64 block_stack_drops = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ht_block_stack_fp);
} block_stacks_fp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ht_block_stack_dwarf);
} block_stacks_dwarf SEC(".maps");

/* Read only when a breach is read: no wakeup of its own. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} block_stack_rb SEC(".maps");

/* The user registers P entered the kernel with, in enum ht_dwarf_reg's order. */
static __always_inline void copy_user_regs(__u64 *out, struct task_struct *p)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);

	out[0] = regs->ax;
	out[1] = regs->bx;
	out[2] = regs->cx;
	out[3] = regs->dx;
	out[4] = regs->si;
	out[5] = regs->di;
	out[6] = regs->bp;
	out[7] = regs->sp;
	out[8] = regs->ip;
	out[9] = regs->r8;
	out[10] = regs->r9;
	out[11] = regs->r10;
	out[12] = regs->r11;
	out[13] = regs->r12;
	out[14] = regs->r13;
	out[15] = regs->r14;
	out[16] = regs->r15;
}

/* The seq of a thread's next stack: 0 is never one. */
static __always_inline __u32 next_block_stack_seq(__u32 seq)
{
	return seq + 1 ?: 1;
}

static __always_inline void count_block_stack_drop(void)
{
	__sync_fetch_and_add(&block_stack_drops, 1);
}

/* The head of PREV's next stack, either mode's, as PREV leaves the CPU at NOW. */
static __always_inline void begin_block_stack(struct ht_block_stack_head *head,
					      struct task_struct *prev, __u64 now, __u32 mode)
{
	head->seq = next_block_stack_seq(head->seq);
	head->switch_ns = now;
	head->tid = prev->pid;
	head->mode = mode;
}

static __always_inline __u32 keep_dwarf_stack(struct task_struct *prev, __u64 now)
{
	struct ht_block_stack_dwarf *v;
	__u64 base;
	__s32 copied = 0;

	v = bpf_task_storage_get(&block_stacks_dwarf, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		count_block_stack_drop();
		return 0;
	}
	begin_block_stack(&v->head, prev, now, HT_BLOCK_STACK_DWARF);
	copy_user_regs(v->regs, prev);
	/* Whole pages at constant offsets: the verifier sees each copy's bounds. */
	base = v->regs[7] & ~(__u64)(HT_BLOCK_STACK_PAGE_BYTES - 1);
	v->stack_base = base;
#pragma unroll
	for (int i = 0; i < HT_BLOCK_STACK_PAGES; i++) {
		if (bpf_probe_read_user(&v->stack[i * HT_BLOCK_STACK_PAGE_BYTES],
					HT_BLOCK_STACK_PAGE_BYTES,
					(void *)(base + (__u64)i * HT_BLOCK_STACK_PAGE_BYTES)))
			break;
		copied += HT_BLOCK_STACK_PAGE_BYTES;
	}
	v->head.bytes = copied;
	return v->head.seq;
}

/*
 * PREV, a target thread, goes to sleep: keep its user stack. PREV is
 * current. Returns the stack's seq, or 0 when it could not be kept.
 */
static __always_inline __u32 keep_block_stack(void *ctx, struct task_struct *prev, __u64 now)
{
	struct ht_block_stack_fp *v;
	__u32 to_page_end;

	if (block_stack_mode == HT_BLOCK_STACK_DWARF)
		return keep_dwarf_stack(prev, now);
	v = bpf_task_storage_get(&block_stacks_fp, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		count_block_stack_drop();
		return 0;
	}
	begin_block_stack(&v->head, prev, now, HT_BLOCK_STACK_FP);
	v->head.bytes = bpf_get_stack(ctx, v->ips, sizeof(v->ips), BPF_F_USER_STACK);
	copy_user_regs(v->regs, prev);
	v->leaf_bytes = bpf_probe_read_user(v->leaf, sizeof(v->leaf), (void *)v->regs[7])
				?: (__s32)sizeof(v->leaf);
	/* Near the top of a stack: what is left of SP's page. */
	to_page_end = HT_BLOCK_STACK_PAGE_BYTES - (v->regs[7] & (HT_BLOCK_STACK_PAGE_BYTES - 1));
	if (v->leaf_bytes < 0 && to_page_end < sizeof(v->leaf) &&
	    !bpf_probe_read_user(v->leaf, to_page_end, (void *)v->regs[7]))
		v->leaf_bytes = (__s32)to_page_end;
	return v->head.seq;
}

/*
 * Send P's stack SEQ, the one its state says its wait began with, before
 * the breach that names it. Returns SEQ, or 0 when it was not kept (counted
 * then) or the ring is full (counted here).
 */
static __always_inline __u32 send_block_stack(struct task_struct *p, __u32 seq)
{
	struct ht_block_stack_dwarf *d;
	struct ht_block_stack_fp *f;
	long err = -1; /* not the stack kept */

	if (!seq)
		return 0;
	if (block_stack_mode == HT_BLOCK_STACK_DWARF) {
		d = bpf_task_storage_get(&block_stacks_dwarf, p, 0, 0);
		if (d && d->head.seq == seq)
			err = bpf_ringbuf_output(&block_stack_rb, d, sizeof(*d), BPF_RB_NO_WAKEUP);
	} else {
		f = bpf_task_storage_get(&block_stacks_fp, p, 0, 0);
		if (f && f->head.seq == seq)
			err = bpf_ringbuf_output(&block_stack_rb, f, sizeof(*f), BPF_RB_NO_WAKEUP);
	}
	if (!err)
		return seq;
	count_block_stack_drop();
	return 0;
}

/*
 * The stack a breach names (SENT, 0: none), or why it has none: its wait
 * never BLOCKED, or its stack was lost.
 */
static __always_inline void block_stack_to_breach(struct ht_breach *b, __u32 sent, bool blocked)
{
	b->block_stack_seq = sent;
	if (block_stack_mode && !sent)
		b->flags |= blocked ? HT_BRF_BLOCK_STACK_LOST : HT_BRF_NEVER_BLOCKED;
}

#endif /* HT_BLOCK_STACKS_BPF_H */
