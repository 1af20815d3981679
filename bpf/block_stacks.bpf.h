/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --block-stacks, included by monitor.bpf.c: the user stack of a target
 * thread as it goes to sleep, kept with the thread until the next one, and
 * sent (hybtrace/block_stack.h) just before the breach of its wait.
 *
 * Only sched_switch can take it: there the thread leaving is current, and
 * bpf_get_task_stack() refuses another task's user stack. The record lives
 * in task storage, not on the BPF stack (512 bytes): the helpers write into
 * the map value directly.
 */
#ifndef HT_BLOCK_STACKS_BPF_H
#define HT_BLOCK_STACKS_BPF_H

#include "hybtrace/block_stack.h"

const volatile __u32 block_stack_mode = HT_BLOCK_STACK_OFF;

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

static __always_inline void keep_dwarf_stack(struct task_struct *prev, __u64 now)
{
	struct ht_block_stack_dwarf *v;
	struct pt_regs *regs;
	__u64 base;
	__s32 copied = 0;

	v = bpf_task_storage_get(&block_stacks_dwarf, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		__sync_fetch_and_add(&block_stack_drops, 1);
		return;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	v->head.switch_ns = now;
	v->head.tid = prev->pid;
	v->head.mode = HT_BLOCK_STACK_DWARF;
	v->regs[0] = regs->ax;
	v->regs[1] = regs->bx;
	v->regs[2] = regs->cx;
	v->regs[3] = regs->dx;
	v->regs[4] = regs->si;
	v->regs[5] = regs->di;
	v->regs[6] = regs->bp;
	v->regs[7] = regs->sp;
	v->regs[8] = regs->ip;
	v->regs[9] = regs->r8;
	v->regs[10] = regs->r9;
	v->regs[11] = regs->r10;
	v->regs[12] = regs->r11;
	v->regs[13] = regs->r12;
	v->regs[14] = regs->r13;
	v->regs[15] = regs->r14;
	v->regs[16] = regs->r15;
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
}

/* PREV, a target thread, goes to sleep: keep its user stack. PREV is current. */
static __always_inline void keep_block_stack(void *ctx, struct task_struct *prev, __u64 now)
{
	struct ht_block_stack_fp *v;

	if (block_stack_mode == HT_BLOCK_STACK_DWARF) {
		keep_dwarf_stack(prev, now);
		return;
	}
	v = bpf_task_storage_get(&block_stacks_fp, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		__sync_fetch_and_add(&block_stack_drops, 1);
		return;
	}
	v->head.switch_ns = now;
	v->head.tid = prev->pid;
	v->head.mode = HT_BLOCK_STACK_FP;
	v->head.bytes = bpf_get_stack(ctx, v->ips, sizeof(v->ips), BPF_F_USER_STACK);
}

/*
 * A breach of P's wait is about to be sent: send first the stack P kept, if
 * it went to sleep within [FROM_NS, TO_NS], the wait's interval.
 */
static __always_inline void send_block_stack(struct task_struct *p, __u64 from_ns, __u64 to_ns)
{
	struct ht_block_stack_dwarf *d;
	struct ht_block_stack_fp *f;
	long err;

	if (block_stack_mode == HT_BLOCK_STACK_DWARF) {
		d = bpf_task_storage_get(&block_stacks_dwarf, p, 0, 0);
		if (!d || d->head.switch_ns < from_ns || d->head.switch_ns > to_ns)
			return;
		err = bpf_ringbuf_output(&block_stack_rb, d, sizeof(*d), BPF_RB_NO_WAKEUP);
	} else if (block_stack_mode == HT_BLOCK_STACK_FP) {
		f = bpf_task_storage_get(&block_stacks_fp, p, 0, 0);
		if (!f || f->head.switch_ns < from_ns || f->head.switch_ns > to_ns)
			return;
		err = bpf_ringbuf_output(&block_stack_rb, f, sizeof(*f), BPF_RB_NO_WAKEUP);
	} else {
		return;
	}
	if (err)
		__sync_fetch_and_add(&block_stack_drops, 1);
}

#endif /* HT_BLOCK_STACKS_BPF_H */
