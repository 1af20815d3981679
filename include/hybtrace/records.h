/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records shared by bpf/monitor.bpf.c and user space: the flight-recorder
 * record, the breach event, counters and histogram layout. Both sides
 * compile this header, so it uses only fixed-width kernel types.
 */
#ifndef HYBTRACE_RECORDS_H
#define HYBTRACE_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define HT_COMM_LEN	    16
#define HT_MAX_KSTACK_DEPTH 32
#define HT_MAX_SYSCALLS	    512
#define HT_HIST_SLOTS	    32

/* Kinds of flight-recorder records. */
enum ht_fr_kind {
	HT_FR_SWITCH = 1,     /* tid_a = prev, tid_b = next, aux = next's prio,
			       * arg = prev_state (low 32 bits)
			       *       | the syscall prev is in, plus one (0: none),
			       *         << HT_FR_SWITCH_SYSCALL_SHIFT */
	/* 2: unused */
	HT_FR_WAKEUP = 3,     /* enqueued, any task (HT_FRF_TARGET: a target's):
			       * tid_a = wakee, tid_b = waker (0 from irq or timer;
			       * from a softirq, the task it ran in, or 0),
			       * aux = the CPU it is queued on,
			       * arg = enum ht_wake_source | the waker's CPU << 8 (16 bits)
			       *       | microseconds from the waker's sched_waking
			       *         to this enqueue << HT_FR_WAKE_DELAY_SHIFT
			       *         (16 bits; 0: not known)
			       *       | the softirq vector << HT_FR_WAKE_VEC_SHIFT
			       *       | the wakee's prio << HT_FR_WAKE_PRIO_SHIFT;
			       * HT_WAKE_NONE: waker unknown (a task not targeted) */
	HT_FR_WAKEUP_NEW = 4, /* a new task enqueued: as HT_FR_WAKEUP */
	HT_FR_MIGRATE = 5,    /* tid_a = task, aux = destination cpu, arg = origin cpu */
	HT_FR_FORK = 6,	      /* tid_a = parent, tid_b = child, arg = child's tgid */
	HT_FR_EXEC = 7,	      /* tid_a = task, tid_b = tid before exec */
	HT_FR_EXIT = 8,	      /* tid_a = task, arg = exit code */
	HT_FR_SYS_ENTER = 9,  /* tid_a = task, aux = syscall nr, arg = first argument */
	HT_FR_SYS_EXIT = 10,  /* tid_a = task, aux = syscall nr, arg = return value */
	HT_FR_KIND_MAX,
};

#define HT_FR_SWITCH_SYSCALL_SHIFT 32
#define HT_FR_WAKE_DELAY_SHIFT	   24
#define HT_FR_WAKE_DELAY_MAX_US	   0xffff
#define HT_FR_WAKE_VEC_SHIFT	   40
#define HT_FR_WAKE_PRIO_SHIFT	   48

/* Bits of ht_flight_record::flags. */
#define HT_FRF_PREEMPT	   0x01 /* switch: prev was preempted (still runnable) */
#define HT_FRF_PREV_TARGET 0x02 /* switch: prev belongs to the target */
#define HT_FRF_NEXT_TARGET 0x04 /* switch: next belongs to the target */
#define HT_FRF_FROM_IRQ	   0x08 /* wakeup: raised in interrupt context (softirq too) */
#define HT_FRF_FROM_TIMER  0x10 /* wakeup: raised by an expiring timer */
#define HT_FRF_TARGET	   0x20 /* wakeup, fork, exec, exit: tid_a belongs to the target */
/*
 * switch: the kernel ran next without a sched_switch event (some kernels
 * switch that way out of a few tasks); the record is made at next's own
 * switch-out, timed by the kernel's sched_info.last_arrival, prev being the
 * task the CPU's last traced switch had taken in.
 */
#define HT_FRF_UNTRACED	   0x40

/*
 * One flight-recorder record: 32 bytes, written with plain stores into a
 * per-CPU slice of an mmapable array. The writer clears seq, stores the
 * fields, then stores seq = (ring index + 1) truncated to 32 bits; a reader
 * that sees the same expected seq before and after copying has a whole
 * record, anything else is torn or overwritten.
 */
struct ht_flight_record {
	__u64 ts_ns;
	__u32 seq;
	__u8 kind;
	__u8 flags;
	__u16 aux;
	__u32 tid_a;
	__u32 tid_b;
	__u64 arg;
};

/* Per-CPU write position, padded to a cache line so CPUs never share one. */
struct ht_fr_head {
	__u64 next_index;
	__u64 pad[7];
};

enum ht_breach_kind {
	HT_BREACH_RQ_DELAY = 1,
	HT_BREACH_OFF_CPU = 2,
	HT_BREACH_SYSCALL = 3,
	HT_BREACH_KIND_MAX,
};

/* What ended a wait. */
enum ht_wake_source {
	HT_WAKE_NONE = 0,  /* not woken: preempted, or still running */
	HT_WAKE_TASK = 1,  /* a task called wake_up */
	HT_WAKE_IRQ = 2,   /* from interrupt context */
	HT_WAKE_TIMER = 3, /* from an expiring timer */
	/*
	 * From a softirq, ht_breach::softirq_vec; its waker is the task it ran
	 * in when it ran in a task's context (local_bh_enable, as loopback
	 * networking in the sender's send; ksoftirqd), else none.
	 */
	HT_WAKE_SOFTIRQ = 4,
};

/* Bits of ht_breach::flags: what the kernel knew of the wait, for user space to judge it. */
/*
 * Another thread of its own process woke it as that thread exited (PF_EXITING):
 * the kernel's wakeup of a pthread_join at the joined thread's exit. Kept
 * through the preemptions that follow the wakeup, unlike the waker's name.
 */
#define HT_BRF_JOINED	       0x01
/* In io_uring_enter waiting for completions (IORING_ENTER_GETEVENTS, min_complete > 0). */
#define HT_BRF_URING_GETEVENTS 0x02
/*
 * --block-stacks, a breach without a stack: its syscall never left the CPU
 * of its own accord (it ran, spun or was held up in the kernel, or was
 * preempted), so there is no place where it blocked...
 */
#define HT_BRF_NEVER_BLOCKED 0x04
/* ...or it blocked, but that stack was not kept or not sent (block_stack_drops). */
#define HT_BRF_BLOCK_STACK_LOST 0x08
/* ht_breach::syscall_fd holds the syscall's first argument (x86-64 rdi, truncated). */
#define HT_BRF_SYSCALL_FD 0x10
/*
 * Set by user space: the epoll set it waited on watches only notifications
 * between threads or processes (eventfd, signalfd, pipes): a wait on a latch
 * or a condition, not for new work (wait_for_work.c).
 */
#define HT_BRF_WAITS_ON_NOTICES 0x20
/*
 * What the kernel did not trace of the wait (this guest's kernel hands a CPU
 * over without its tracepoints now and then; a program's recursion guard
 * skips an event too): the wakeup that ended its sleep, so it names no
 * waker...
 */
#define HT_BRF_WAKEUP_UNTRACED 0x40
/*
 * ...or the switch-in that ended it, judged at the switch-out after
 * (untraced_switch_in()): no kernel stack of where it slept.
 */
#define HT_BRF_SWITCH_IN_UNTRACED 0x80

/* The kernel's softirq vectors (include/linux/interrupt.h), as softirq_to_name. */
#define HT_NR_SOFTIRQS 10

/* One latency breach, sent on the BPF ring buffer when its interval ends. */
struct ht_breach {
	__u64 start_ns;
	__u64 end_ns;
	__u64 wake_ns;	     /* when it was woken (0 if not woken) */
	__s64 syscall_ret;   /* syscall breaches */
	__u32 kind;	     /* enum ht_breach_kind */
	__u32 tid;
	__u32 tgid;
	__u32 cpu;	     /* CPU at the end of the interval */
	__u32 state;	     /* task state it left the CPU in */
	__s32 syscall_nr;    /* the syscall, or the one it was inside; -1 if none */
	__u32 wake_source;   /* enum ht_wake_source */
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 wake_cpu;	     /* CPU it was queued on when woken */
	__s32 kstack_bytes;  /* bytes in kstack, or a negative errno */
	__u32 flags;	     /* HT_BRF_* */
	char comm[HT_COMM_LEN];
	char waker_comm[HT_COMM_LEN];
	__u64 kstack[HT_MAX_KSTACK_DEPTH];
	/*
	 * Every threshold this wait breached, as bits 1 << kind. A sleep inside
	 * a syscall that breached both the off-CPU and the syscall threshold is
	 * one breach: kind HT_BREACH_SYSCALL over the syscall, with the longest
	 * off-CPU interval of the syscall below. 0 in older raw captures: 1 << kind.
	 */
	__u32 kinds;
	__u32 off_cpu_waits;	/* off-CPU intervals of the syscall over the threshold */
	__u64 off_cpu_start_ns; /* with HT_BREACH_OFF_CPU in kinds: its interval */
	__u64 off_cpu_end_ns;
	__u64 off_cpu_threshold_ns;
	__u32 softirq_vec; /* HT_WAKE_SOFTIRQ: the softirq that woke it */
	/*
	 * --block-stacks: the seq of the stack sent for this wait (struct
	 * ht_block_stack_head), 0 when none was; then HT_BRF_NEVER_BLOCKED or
	 * HT_BRF_BLOCK_STACK_LOST says why.
	 */
	__u32 block_stack_seq;
	__u32 syscall_fd; /* with HT_BRF_SYSCALL_FD: the syscall's first argument */
	/*
	 * The thread's and its process's pids in their own pid namespace (a
	 * container's), where that is not the initial one; 0 otherwise. tid
	 * and tgid are the initial namespace's, as every program sees them.
	 */
	__u32 ns_tid;
	__u32 ns_tgid;
	/* The waker's stacks at the wakeup that ended it (struct ht_waker_stack); 0: none. */
	__u32 waker_stack_seq;
};

/*
 * The waker's kernel and user (frame-pointer) stacks at a wakeup that ended
 * a wait already over its threshold: taken in sched_waking, where the waker
 * is current, only then (a stack costs microseconds; the whole program
 * nanoseconds), and sent on its own ring before the breach that names it
 * by seq.
 */
#define HT_WAKER_STACK_DEPTH 32

struct ht_waker_stack {
	__u64 time_ns; /* the wakeup, as the waker raised it */
	__u32 seq;     /* 1, 2, ...; ht_breach::waker_stack_seq */
	__u32 wakee_tid;
	__u32 waker_tid;
	__u32 waker_tgid;
	__s32 kstack_bytes; /* bytes of kstack, or a negative errno */
	__s32 ustack_bytes; /* bytes of ustack, or a negative errno (a kernel thread has none) */
	char waker_comm[HT_COMM_LEN];
	__u64 kstack[HT_WAKER_STACK_DEPTH]; /* innermost first */
	__u64 ustack[HT_WAKER_STACK_DEPTH];
};

#define HT_KIND_BIT(kind) (1U << (kind))

/*
 * Entry of the pid-to-comm map, kept current at fork, exec, rename, exit.
 * User space deletes an entry a while after its task exited.
 */
struct ht_comm_entry {
	char comm[HT_COMM_LEN];
	__u32 tgid;
	__u32 exited;
	__u64 exit_ns; /* CLOCK_MONOTONIC of the exit; 0 while it lives */
};

/*
 * The ps(1) letter of a raw task state is HT_STATE_LETTERS[ht_task_state_index()],
 * as the kernel's task_state_index() has it: TASK_IDLE is I, RT-lock waits count
 * as D, and TASK_DEAD (a task's last switch-out) as X.
 */
#define HT_STATE_LETTERS "RSDTtXZPI"

static inline __u32 ht_task_state_index(__u32 state)
{
	__u32 report = state & 0x7f;

	if (report == 0x02 && (state & 0x400))
		return 8;
	if (state & 0x1000)
		return 2;
	if (state & 0x80)
		return 5;
	/* fls(): the highest bit set, counted from 1. */
	for (int bit = 7; bit > 0; bit--)
		if (report & (1U << (bit - 1)))
			return (__u32)bit;
	return 0;
}

/* What struct ht_target_event says. */
enum ht_target_event_kind {
	HT_TARGET_JOINED = 1,	      /* tgid became a target */
	HT_TARGET_LEFT = 2,	      /* tgid's last thread exited, or it left the watched cgroup */
	HT_TARGET_CGROUP_REMOVED = 3, /* the watched cgroup was removed */
	HT_TARGET_EXEC = 4,	      /* tgid, a target, runs a new program (exec) */
};

/* Why a process joined (or, HT_TARGET_BY_CGROUP, left) the set. */
#define HT_TARGET_BY_PID    0x1 /* --pid, or run's child: seeded by user space */
#define HT_TARGET_BY_FORK   0x2 /* --children: forked by a target */
#define HT_TARGET_BY_CGROUP 0x4 /* in the watched cgroup, or moved into (out of) it */

/* A change of the target set, on the monitor's target_events ring. */
struct ht_target_event {
	__u64 time_ns;
	__u32 kind; /* enum ht_target_event_kind */
	__u32 tgid;
	__u32 reason;	   /* HT_TARGET_BY_* */
	__u32 parent_tgid; /* HT_TARGET_BY_FORK: the process that forked it */
	char comm[HT_COMM_LEN];
};

/* Counters in a per-CPU array; nothing is dropped without one of these. */
enum ht_counter {
	HT_CNT_RB_DROPS = 0,	   /* breach reservations that failed */
	HT_CNT_STORAGE_FAILS,	   /* task storage that could not be had */
	HT_CNT_COMM_UPDATE_FAILS,  /* comm map updates that failed */
	HT_CNT_BREACHES,	   /* breaches detected (sent or dropped) */
	/* Which path judged each interval, so the tests can tell a fallback ran: */
	HT_CNT_RQ_SCHED_INFO,	   /* run-queue waits timed by sched_info.last_queued */
	HT_CNT_RQ_THREAD_STATE,	   /* run-queue waits timed by the thread's own state */
	HT_CNT_STATE_SLOT,	   /* intervals judged from a thread slot's state */
	HT_CNT_STATE_STORAGE,	   /* intervals judged from task storage */
	HT_CNT_FILTERED,	   /* breaches the filters (--ignore-syscalls...) left out */
	HT_CNT_UNSEEN_SWITCH_INS,  /* target switch-ins no program saw; their intervals unjudged */
	HT_CNT_BLOCK_STACKS_TAKEN, /* --block-stacks: stacks kept at voluntary switch-outs */
	HT_CNT_UNTRACED_SWITCH_INS, /* switch-ins the kernel did not trace, made up at switch-out */
	HT_CNT_WAKER_STACKS,	    /* waker stacks taken (wakeups that ended a wait over its threshold) */
	HT_CNT_WAKER_STACK_DROPS,   /* ... that found no room on their ring */
	HT_CNT_UNTRACED_WAKEUPS,    /* sleeps that ended with no wakeup traced: no waker named */
	HT_CNT_MAX,
};

/* Histograms: log2 of microseconds, per kind, in one per-CPU array. */
#define HT_HIST_INDEX(kind, slot) ((kind) * HT_HIST_SLOTS + (slot))
#define HT_HIST_ENTRIES		  (HT_BREACH_KIND_MAX * HT_HIST_SLOTS)

/*
 * The same histograms per process: a slot per target process in an
 * mmapable array, taken by the first interval of its process judged at
 * tgid modulo the slots, or one of the next HT_PROC_HIST_PROBES - 1; the
 * element after the last slot counts the intervals of processes that found
 * none. Counted with atomic adds: a process's threads run on several CPUs.
 * Once the process's last thread is gone the slot is marked, and user
 * space takes its counts and frees it (a new process of the same pid does
 * not match the mark).
 */
#define HT_PROC_HIST_KINDS  (HT_BREACH_KIND_MAX - 1) /* row kind - 1 */
#define HT_PROC_HIST_PROBES 4
#define HT_PROC_HIST_GONE   (1ULL << 32) /* in owner, beside the tgid */

struct ht_proc_hist {
	__u64 owner; /* 0: free; the tgid; the tgid | HT_PROC_HIST_GONE */
	__u64 slots[HT_PROC_HIST_KINDS][HT_HIST_SLOTS];
};

#endif /* HYBTRACE_RECORDS_H */
