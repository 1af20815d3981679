/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The monitor's settings: every knob user space sets before load
 * (userspace/kernel/monitor.c, set_settings(), one line per knob, in this
 * order). They are read-only once loaded, so the verifier sees their
 * values and drops the code a setting turns off. The headers that read one
 * include this; what changes while the programs run (breaches_stopped,
 * counters) is no setting and lives with its program.
 */
#ifndef HT_SETTINGS_BPF_H
#define HT_SETTINGS_BPF_H

#include "hybtrace/records.h"
#include "hybtrace/block_stack.h"

/* The target set (targets.bpf.h, userspace/kernel/targets.h). */
const volatile bool targets_all = false;	/* --all: every task but self_tgid's */
const volatile __u32 self_tgid = 0;		/* hybtrace: never a target */
const volatile bool targets_children = false;	/* --children: a target's forks are targets */
const volatile bool targets_cgroup_on = false;	/* --cgroup: its subtree's processes are targets */
const volatile __u64 target_cgroup_id = 0;	/* its kernfs id */
const volatile bool prev_state_from_arg = true; /* false: read task_struct (pre-5.18) */

/* Breach thresholds, 0: off. */
const volatile __u64 rq_delay_thresh_ns = 0;
const volatile __u64 off_cpu_thresh_ns = 0;
const volatile __u64 syscall_thresh_ns = 0;

/* --syscalls: only these syscalls breach */
const volatile bool syscall_filter_on = false;
const volatile __u64 syscall_filter[HT_MAX_SYSCALLS / 64] = {};
/* --off-cpu-states: the states an off-CPU breach may be in, 1 << ht_task_state_index(); 0: any */
const volatile __u32 off_cpu_states = 0;
/* --off-cpu-syscalls: off-CPU breaches only in these syscalls */
const volatile bool off_cpu_syscalls_on = false;
const volatile __u64 off_cpu_syscalls[HT_MAX_SYSCALLS / 64] = {};
/* --ignore-syscalls: no off-CPU or syscall breach in these */
const volatile bool ignore_syscalls_on = false;
const volatile __u64 ignore_syscalls[HT_MAX_SYSCALLS / 64] = {};

/* Sizes of maps user space sizes. */
const volatile __u32 fr_slot_shift = 0;	   /* log2 of flight records per CPU */
const volatile __u32 thread_slot_mask = 0; /* thread_slots - 1: a power of two less one */
const volatile __u32 proc_hist_mask = 0;   /* proc_hists' slots - 1 (one more for the rest) */

/* Run-queue waits from task_struct::sched_info (CONFIG_SCHED_INFO); false: the thread's state. */
const volatile bool rq_from_sched_info = true;

/* --block-stacks: enum ht_block_stack_mode. */
const volatile __u32 block_stack_mode = HT_BLOCK_STACK_OFF;

/* The waker's stacks at a wakeup that ends a wait over its threshold (--chain-depth > 0). */
const volatile bool waker_stacks_on = false;

/*
 * The text of do_softirq() and of what may have inlined it
 * (__local_bh_enable_ip), with their compiler-made parts (.part.N):
 * [start, end) from kallsyms. On x86-64 they alone switch to the irq stack
 * to run softirqs in a task's context (see softirq_in_task()). All zero:
 * unknown, and no softirq names a task (but on PREEMPT_RT).
 */
#define DO_SOFTIRQ_RANGES 4
const volatile __u64 do_softirq_ranges[DO_SOFTIRQ_RANGES][2] = {};

/*
 * For tests: ignore one switch-in of a target thread in N, at random, as the
 * kernel sometimes skips one (at random: every Nth would fall in step with a
 * thread's own pattern of switches, on the sleeps' ends or never).
 */
const volatile __u32 test_skip_switch_in_one_in = 0;
/* For tests: act as if the kernel did not trace every Nth switch from another task to a target. */
const volatile __u32 test_untraced_switch_every = 0;
/*
 * For tests: act as if the kernel did not trace a target's first switch-in
 * after its move while queued to another CPU (it hides a few, and then the
 * move's note, preempt_notes, goes unread).
 */
const volatile bool test_untraced_after_migration = false;
/* For tests: act as if the kernel did not trace every Nth wakeup of a target (it hides some with a switch). */
const volatile __u32 test_untraced_wakeup_every = 0;
/*
 * For tests: act as if the kernel did not trace the switches out of threads
 * so named as they go to sleep (the CPU's next traced switch then records
 * them, untraced_switch_in()); "" for none.
 */
const volatile char test_untraced_sleep_comm[16] = {};
/* For tests: miss every timer callback's entry, as a program preempted mid-run on PREEMPT_RT makes others miss. */
const volatile bool test_miss_timer_entries = false;
/*
 * For tests: miss the exit of every timer callback that did not interrupt a
 * softirq, as the same preempted programs make others miss (one that did
 * cannot be told over; see timer_active()).
 */
const volatile bool test_miss_timer_exits = false;
/*
 * For make bench: 0, or the one process whose tgid is_target() compares, the
 * test before the target set, so that what the set costs is measured alone
 * (HYBTRACE_TEST_ONE_TGID). Its forks are no targets then.
 */
const volatile __u32 test_one_tgid = 0;
/*
 * For make bench: the monitor's programs test a task by walking up its
 * cgroup to the watched one's kernfs id at each test (in_target_cgroup()),
 * the alternative to the set's bitmap, so that the two are measured against
 * each other (HYBTRACE_TEST_CGROUP_WALK, --cgroup alone).
 */
const volatile bool test_cgroup_walk = false;

#endif /* HT_SETTINGS_BPF_H */
