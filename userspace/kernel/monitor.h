/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The BPF monitor's lifecycle: open the skeleton, set its knobs, size the
 * flight recorder, load, attach, map the rings; then counters, histograms
 * and comms for the rest of user space; one close that detaches everything.
 */
#ifndef HT_MONITOR_H
#define HT_MONITOR_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>
#include "hybtrace/records.h"
#include "kernel/breach_filters.h"
#include "kernel/recorder.h"
#include "kernel/targets.h"

struct monitor_bpf;

#define HT_DO_SOFTIRQ_RANGES 4 /* DO_SOFTIRQ_RANGES in bpf/settings.bpf.h */

struct ht_monitor_config {
	const struct ht_target_spec *targets; /* what is watched */
	uint64_t threshold_ns[HT_BREACH_KIND_MAX]; /* by enum ht_breach_kind; 0: off */
	bool syscall_filter_on;
	uint64_t syscall_filter[HT_MAX_SYSCALLS / 64];
	struct ht_breach_filters filters;
	uint64_t history_bytes;	   /* per CPU */
	bool prev_state_from_arg;  /* false: read task_struct, the pre-5.18 path */
	bool rq_from_thread_state; /* run-queue waits timed in the thread's state, not sched_info */
	unsigned int thread_slots; /* 0: ht_monitor_thread_slots(pid_max); else a power of two */
	unsigned int proc_hist_slots; /* 0: HT_PROC_HIST_SLOTS; else a power of two */
	unsigned int test_skip_switch_in_one_in; /* for tests: 0, or ignore 1 switch-in in N at random */
	/* for tests: 0, or hide every Nth switch to a target from the monitor, as some kernels do */
	unsigned int test_untraced_switch_every;
	/* for tests: hide a target's first switch-in after its move while queued to another CPU */
	bool test_untraced_after_migration;
	/* for tests: 0, or hide every Nth wakeup of a target from the monitor */
	unsigned int test_untraced_wakeup_every;
	bool test_miss_timer_entries; /* for tests: miss every timer callback's entry */
	/* for tests: miss the exit of every timer callback that did not interrupt a softirq */
	bool test_miss_timer_exits;
	/* for tests: "", or hide the switch-outs into sleep of the threads so named */
	char test_untraced_sleep_comm[16];
	const char *btf_path;	  /* NULL: the running kernel's */
	/* [start, end) of do_softirq() and its callers' text (find_do_softirq); zero: unknown */
	uint64_t do_softirq_ranges[HT_DO_SOFTIRQ_RANGES][2];
	ring_buffer_sample_fn on_breach;
	void *on_breach_ctx;
	/* --block-stacks: enum ht_block_stack_mode, and what takes each stack (block_stacks.h). */
	unsigned int block_stack_mode;
	ring_buffer_sample_fn on_block_stack;
	void *on_block_stack_ctx;
	/* The waker's stacks at each wakeup that ends a wait over its threshold (waker_stacks.h) */
	bool waker_stacks;
	ring_buffer_sample_fn on_waker_stack;
	void *on_waker_stack_ctx;
};

struct ht_monitor {
	struct monitor_bpf *skel;
	struct ring_buffer *breach_rb;
	struct ring_buffer *block_rb; /* NULL without --block-stacks */
	struct ring_buffer *waker_rb; /* NULL without waker stacks */
	struct ht_recorder recorder;
	/* The target set: seeded at open, kept from the kernel's events by ht_monitor_consume. */
	struct ht_targets targets;
	void *records_mem, *heads_mem;
	size_t records_len, heads_len;
	/* Per-process histograms, mapped: proc_hist_slots processes, then the rest's. */
	struct ht_proc_hist *proc_hists;
	size_t proc_hists_len;
	unsigned int proc_hist_slots;
	unsigned int ncpus;
	bool syscalls_on;
	uint64_t attached_ns; /* CLOCK_MONOTONIC */
};

/* Everything that was dropped or missed, summed over CPUs and programs. */
struct ht_monitor_counters {
	uint64_t value[HT_CNT_MAX];
	uint64_t recursion_misses;
	uint64_t records_written; /* flight-recorder records, all CPUs */
};

/* Load and attach. Returns 0, or -1 with the reason in ht_last_error(). */
int ht_monitor_open(struct ht_monitor *m, const struct ht_monitor_config *cfg);

/* Detach, unmap, free. Safe on a zeroed or half-opened monitor. */
void ht_monitor_close(struct ht_monitor *m);

/*
 * The fd to poll for breaches and changes of the target set, and the call
 * that delivers them (breaches to on_breach, changes to m->targets).
 */
int ht_monitor_breach_fd(const struct ht_monitor *m);
int ht_monitor_consume(struct ht_monitor *m);

/*
 * Deliver the block stacks sent so far: each is sent just before its
 * breach, so a breach's own stack has been delivered once this returns.
 */
int ht_monitor_consume_block_stacks(struct ht_monitor *m);

/* Deliver the waker stacks sent so far: each is sent before the breach that names it. */
int ht_monitor_consume_waker_stacks(struct ht_monitor *m);

/* Block stacks that could not be kept or sent (ring full, no task storage). */
uint64_t ht_monitor_block_stack_drops(const struct ht_monitor *m);

/*
 * The session ends: the programs count and send no more breaches, and the
 * ones that began before are in the ring or counted dropped on return.
 */
void ht_monitor_stop_breaches(struct ht_monitor *m);

int ht_monitor_read_counters(const struct ht_monitor *m, struct ht_monitor_counters *out);

/* Histogram of KIND (enum ht_breach_kind): HT_HIST_SLOTS log2(us) buckets. */
int ht_monitor_read_hist(const struct ht_monitor *m, unsigned int kind,
			 uint64_t slots[HT_HIST_SLOTS]);

/*
 * Processes with histograms of their own at once (a power of two: a slot
 * each, found by tgid): those beyond, or whose slots are taken, count in the
 * rest's. 776 bytes each.
 */
#define HT_PROC_HIST_SLOTS 4096U

/* The comm map's entry for PID. Returns 0, or -1 if it has none. */
int ht_monitor_lookup_comm(const struct ht_monitor *m, uint32_t pid, struct ht_comm_entry *out);

/* The target_procs map, which the sampling filter shares. */
int ht_monitor_targets_fd(const struct ht_monitor *m);

/* Events of the target set the kernel's ring had no room for. */
uint64_t ht_monitor_target_event_drops(const struct ht_monitor *m);

/* Keep libbpf's messages for the one-line error; HYBTRACE_DEBUG=1 shows them all. */
void ht_monitor_quiet_libbpf(void);

/*
 * Delete the comm-map entries of tasks that exited before BEFORE_NS: a storm
 * of short-lived threads must not leave the map full. Returns how many.
 */
unsigned int ht_monitor_forget_exited(const struct ht_monitor *m, uint64_t before_ns);

/* Log2 of the flight-recorder records per CPU for a ring of BYTES. */
unsigned int ht_monitor_slot_shift(uint64_t bytes);

/*
 * How many per-thread state slots the programs get for a kernel whose
 * pid_max is PID_MAX: one per possible tid, a power of two between
 * HT_THREAD_SLOTS_MIN and HT_THREAD_SLOTS_MAX (160 bytes each). Threads
 * whose tids collide modulo that share nothing: the later keeps task storage.
 */
#define HT_THREAD_SLOTS_MIN 1024U
#define HT_THREAD_SLOTS_MAX 32768U
unsigned int ht_monitor_thread_slots(long pid_max);

#endif /* HT_MONITOR_H */
