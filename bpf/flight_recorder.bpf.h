/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The flight recorder's write side: one ring of struct ht_flight_record per
 * CPU, fr_records[cpu << fr_slot_shift ...], overwritten oldest first, with
 * each CPU's next index in fr_heads. User space sizes both maps and maps
 * them to read the rings (userspace/kernel/recorder.c).
 */
#ifndef HT_FLIGHT_RECORDER_BPF_H
#define HT_FLIGHT_RECORDER_BPF_H

#include "settings.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ht_flight_record);
	__uint(max_entries, 1); /* set by user space: CPUs << fr_slot_shift */
} fr_records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ht_fr_head);
	__uint(max_entries, 1); /* set by user space: possible CPUs */
} fr_heads SEC(".maps");

/*
 * Reserve the next record of this CPU's ring; clears its seq so a reader
 * never takes a half-written record for a whole one.
 *
 * IRQS_OFF: the caller runs with interrupts off (the scheduler's
 * tracepoints, under the rq lock), so nothing else on this CPU can take a
 * record between its read of the head and its write: a plain increment.
 * Other callers (syscalls, fork, exec, exit) can be interrupted or
 * preempted by those, and take theirs atomically. A locked add also waits
 * for every store before it, here the previous record's, still missing in
 * the cache: it was most of a context switch's cost.
 */
static __always_inline struct ht_flight_record *fr_reserve(__u32 *seq, bool irqs_off)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct ht_flight_record *r;
	struct ht_fr_head *head;
	__u64 index;
	__u32 slot;

	head = bpf_map_lookup_elem(&fr_heads, &cpu);
	if (!head)
		return NULL;
	if (irqs_off) {
		index = head->next_index;
		head->next_index = index + 1;
	} else {
		index = __sync_fetch_and_add(&head->next_index, 1);
	}
	slot = (cpu << fr_slot_shift) | (index & ((1ULL << fr_slot_shift) - 1));
	r = bpf_map_lookup_elem(&fr_records, &slot);
	if (!r)
		return NULL;
	r->seq = 0;
	barrier();
	*seq = (__u32)(index + 1);
	return r;
}

static __always_inline void fr_commit(struct ht_flight_record *r, __u32 seq)
{
	barrier();
	*(volatile __u32 *)&r->seq = seq;
}

static __always_inline void fr_write_any(bool irqs_off, __u64 now, __u8 kind, __u8 flags, __u16 aux,
					 __u32 tid_a, __u32 tid_b, __u64 arg)
{
	struct ht_flight_record *r;
	__u32 seq;

	r = fr_reserve(&seq, irqs_off);
	if (!r)
		return;
	r->ts_ns = now;
	r->kind = kind;
	r->flags = flags;
	r->aux = aux;
	r->tid_a = tid_a;
	r->tid_b = tid_b;
	r->arg = arg;
	fr_commit(r, seq);
}

/* From the scheduler's tracepoints, interrupts off. */
static __always_inline void fr_write_sched(__u64 now, __u8 kind, __u8 flags, __u16 aux, __u32 tid_a,
					   __u32 tid_b, __u64 arg)
{
	fr_write_any(true, now, kind, flags, aux, tid_a, tid_b, arg);
}

/* From anywhere else. */
static __always_inline void fr_write(__u64 now, __u8 kind, __u8 flags, __u16 aux, __u32 tid_a,
				     __u32 tid_b, __u64 arg)
{
	fr_write_any(false, now, kind, flags, aux, tid_a, tid_b, arg);
}

#endif /* HT_FLIGHT_RECORDER_BPF_H */
