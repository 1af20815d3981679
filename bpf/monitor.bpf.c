// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel half of hybtrace: a flight recorder of every context switch on
 * every CPU plus the target's wakeups, forks, execs, exits and syscalls, and
 * breach detection for the target's threads (run-queue delay, off-CPU time,
 * syscall time), computed when each interval ends.
 *
 * sched_switch runs for every task on the machine, so it stays a handful of
 * plain stores before the target check; everything else filters by tgid
 * first.
 *
 * The knobs user space sets are in settings.bpf.h; the clock, the flight
 * recorder's write, the kernel compatibility reads and --block-stacks in
 * their own headers, which another program can include.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hybtrace/records.h"

char LICENSE[] SEC("license") = "GPL";

#include "settings.bpf.h"
#include "kernel_compat.bpf.h"
#include "clock.bpf.h"
#include "flight_recorder.bpf.h"
#include "block_stacks.bpf.h"
#include "targets.bpf.h"

/* test_untraced_switch_every's count. */
__u32 test_switches_to_target = 0;
/* test_untraced_wakeup_every's count. */
__u32 test_target_wakeups = 0;

/*
 * Set by user space when the session ends: from then on no breach is
 * counted or sent, so the ring can be drained to the last one counted and
 * the summary's detected = reported + lost holds.
 */
__u32 breaches_stopped = 0;

/* x86-64 */
#define NR_IO_URING_ENTER      426
#define IORING_ENTER_GETEVENTS 1

/*
 * An off-CPU breach inside a watched syscall, held until the syscall ends:
 * a sleep that breaches both thresholds is one wait and one breach, sent at
 * sys_exit with both kinds (or alone, when the syscall stays under its
 * threshold). Of several in one syscall the longest is kept, with the
 * wakeup that ended it; its stack is in syscall_stacks, and its user stack
 * (--block-stacks) was sent as it was held, before a later sleep of the
 * syscall could take its place.
 */
struct held_off_cpu {
	__u64 start_ns; /* 0: none held */
	__u64 end_ns;
	__u64 wake_ns;
	__u32 state;
	__u32 waits; /* off-CPU intervals of this syscall over the threshold */
	__u32 cpu;
	__u32 wake_source;
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 wake_cpu;
	__u32 flags; /* the wakeup's HT_BRF_JOINED, what went untraced */
	__u32 softirq_vec;
	__u32 block_stack_seq; /* --block-stacks: the stack sent for it; 0: lost */
	__u32 waker_stack_seq; /* its waker's stacks, sent at the wakeup; 0: none */
	__u32 tgid;	       /* the held thread's process, for the end's flush */
	__u32 ns_tid, ns_tgid; /* ... and its pids in its own pid namespace (task_ns_pids) */
	char waker_comm[HT_COMM_LEN];
};

/* Per-thread interval state of the target's threads. */
struct task_state {
	__u64 runnable_since_ns; /* 0: not waiting for a CPU */
	__u64 off_cpu_since_ns;	 /* 0: not sleeping */
	__u64 syscall_since_ns;	 /* 0: not in a syscall */
	__u64 wake_ns;
	__u64 waking_ns; /* its last sched_waking, in the waker's context */
	__s32 syscall_nr;
	__u32 off_cpu_state; /* the state of its last sleep (in this syscall) */
	__u32 wake_source;   /* the wakeup that ended that sleep, and its waker */
	__u32 waker_tid;
	__u32 waker_tgid;
	__u32 wake_cpu;
	__u32 waker_cpu;
	__u32 joined; /* the last wakeup came from its own process's exiting thread */
	/*
	 * Its last sleep began and no enqueue of it followed: the wakeup that
	 * ended it went untraced (this guest's kernel hands a CPU over without
	 * its tracepoints now and then), and the waker held is an older sleep's.
	 */
	__u32 sleep_unwoken;
	/* ...so its waits since name no waker: HT_BRF_WAKEUP_UNTRACED. */
	__u32 wakeup_untraced;
	/* The syscall its last sleep began in (HT_FR_SWITCH's bits: nr + 1; 0: none). */
	__u32 sleep_syscall;
	/* syscall_stacks holds the stack seen at a switch-in past the threshold */
	__s32 syscall_kstack_bytes;
	/* Its run-queue wait began with a preemption on preempt_cpu, not with that wakeup. */
	__u32 preempted;
	__u32 preempt_cpu;
	__u32 softirq_vec;     /* wake_source HT_WAKE_SOFTIRQ: which */
	__u32 block_stack_seq; /* --block-stacks: its last sleep's stack; 0: not kept */
	__u32 waker_stack_seq; /* the waker's stacks at its last wakeup; 0: not taken */
	char waker_comm[HT_COMM_LEN];
	struct held_off_cpu held;
};

/*
 * The state lives in thread_slots, indexed by tid modulo its size: an
 * array lookup the JIT inlines, where task storage is a helper call of
 * about 50 ns, paid at every switch. A slot belongs to one thread (pid and
 * start time) from its first event to its last switch; a thread whose slot
 * is taken keeps its state in task storage instead, for its whole life.
 */
struct thread_slot {
	__u64 owner; /* slot_owner(); 0: free */
	struct task_state st;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct thread_slot);
	__uint(max_entries, 1); /* set by user space: a power of two */
} thread_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_states SEC(".maps");

struct syscall_stack {
	__u64 ips[HT_MAX_KSTACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct syscall_stack);
} syscall_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} breaches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, HT_CNT_MAX);
} counters SEC(".maps");

/* struct ht_waker_stack, before the breaches that name them. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} waker_stack_rb SEC(".maps");

/* The last seq given to a waker stack. */
__u32 waker_stack_last_seq = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, HT_HIST_ENTRIES);
} hists SEC(".maps");

/* Per-process histograms (struct ht_proc_hist): user space reads them mapped. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ht_proc_hist);
	__uint(max_entries, 1); /* set by user space: a power of two, and one for the rest */
} proc_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct ht_comm_entry);
	__uint(max_entries, 65536);
} comms SEC(".maps");

/*
 * Interrupt and timer context on this CPU: each kind stamps its entry and
 * exit with a per-CPU sequence number, and a kind is active while its entry
 * is newer than its exit and the task running is the one that was running
 * at its entry. None of these kinds nests within itself, so none needs a
 * depth counter, and an entry or exit missed while attaching heals at the
 * next one. hrtimer callbacks are two kinds: a soft one (in the hrtimer
 * softirq; on PREEMPT_RT every sleep's timer, run by ktimers/N) may be
 * interrupted by the hard ones of the timer interrupt, whose exit must not
 * end it: the sleep it then wakes was woken by a timer, not by "softirq
 * (hrtimer)". The owner: on PREEMPT_RT softirqs and soft timer callbacks
 * run in tasks that can be preempted in the middle, and the task that runs
 * next, waking another, is in none of their contexts; elsewhere interrupt
 * context cannot be left for another task, so the owner always matches.
 */
enum { CTX_HARDIRQ, CTX_SOFTIRQ, CTX_HRTIMER_HARD, CTX_HRTIMER_SOFT, CTX_TIMER, CTX_KINDS };

struct cpu_context {
	__u64 seq;
	__u64 entry[CTX_KINDS];
	__u64 exit[CTX_KINDS];
	__u32 owner[CTX_KINDS]; /* the task (pid) running at each kind's last entry */
	__u32 softirq_vec;	/* of the softirq entered last */
	/* Whether the softirq entered at in_task_seq runs in a task's context. */
	__u32 in_task;
	__u64 in_task_seq;
	/* An address on the stack the softirq entered last runs on: its tracepoint's arguments. */
	__u64 softirq_sp;
	/* Whether the timer callback entered last of each kind entered inside a softirq. */
	bool in_softirq[CTX_KINDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_context);
	__uint(max_entries, 1);
} cpu_contexts SEC(".maps");

/*
 * A target thread's last preemption, by tid modulo PREEMPT_NOTES: the
 * stale rq->clock that sched_info.last_queued got then, and the true time.
 * When the thread runs again and last_queued still holds that clock, its
 * run-queue wait started at the true time.
 *
 * Or (clock NOTE_MIGRATED) its move, while queued, to another CPU's run
 * queue: the kernel dequeues it there and enqueues it here, and
 * last_queued restarts at that enqueue; the wait began at the true time,
 * on the first CPU. Such a note is for the next switch-in only: it holds
 * the task's sched_info.pcount, which every switch-in counts, traced or
 * not (a switch-in the kernel did not trace leaves the note unread, and a
 * later wait must not begin at it: a 1.2 ms "wait" that was mostly a sleep).
 */
#define PREEMPT_NOTES 4096 /* a power of two */
#define NOTE_MIGRATED ((__u64)-1)

struct preempt_note {
	__u32 tid;
	__u32 runs; /* NOTE_MIGRATED: the task's sched_info.pcount then */
	__u64 clock;
	__u64 now;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct preempt_note);
	__uint(max_entries, PREEMPT_NOTES);
} preempt_notes SEC(".maps");

/* P's switch-ins so far (sched_info.pcount, 32 bits); 0 where the kernel has none. */
static __always_inline __u32 switch_ins_of(struct task_struct *p)
{
	return bpf_core_field_exists(p->sched_info.pcount) ? (__u32)p->sched_info.pcount : 0;
}

/* NOTE is P's move while queued, and P has not been switched in since. */
static __always_inline bool move_note_unread(const struct preempt_note *note, struct task_struct *p)
{
	return note->tid == p->pid && note->clock == NOTE_MIGRATED &&
	       note->runs == switch_ins_of(p);
}

/*
 * Who is waking a task that is no target, by its tid modulo WAKE_NOTES:
 * sched_waking runs in the waker's context, sched_wakeup where the task is
 * enqueued, on the waker's CPU or later from an IPI on the wakee's. Such a
 * task has no task_state to carry the waker from one to the other; this
 * does. A note of another tid (wakings of two tids that share a slot, a few
 * microseconds apart) leaves the waker unknown.
 */
#define WAKE_NOTES 4096 /* a power of two */

struct wake_note {
	__u32 tid;
	__u32 waker_tid;
	__u64 source;	 /* as ht_flight_record::arg of a wakeup */
	__u64 waking_ns; /* its sched_waking */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct wake_note);
	__uint(max_entries, WAKE_NOTES);
} wake_notes SEC(".maps");

static __always_inline void count(__u32 counter)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &counter);

	/*
	 * Atomic: the summary's counts must add up exactly, whichever program
	 * runs in the middle of another on this CPU. Counted events are rare.
	 */
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffffffffULL) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/*
 * Process TGID's histogram slot: the one it owns among the probes from
 * tgid modulo the slots, or the first free one there, taken; else the
 * rest's, after the last slot. A slot marked gone is no one's to take.
 */
static __always_inline struct ht_proc_hist *proc_hist_of(__u32 tgid)
{
	struct ht_proc_hist *h;
	__u32 key;

	for (__u32 i = 0; i < HT_PROC_HIST_PROBES; i++) {
		key = (tgid + i) & proc_hist_mask;
		h = bpf_map_lookup_elem(&proc_hists, &key);
		if (!h)
			return NULL;
		if (h->owner == tgid)
			return h;
		/* Another CPU may take it first, maybe for this process too. */
		if (!h->owner &&
		    (!__sync_val_compare_and_swap(&h->owner, 0, tgid) || h->owner == tgid))
			return h;
	}
	key = proc_hist_mask + 1;
	return bpf_map_lookup_elem(&proc_hists, &key);
}

/*
 * One interval judged, of process TGID: counted in the session's histogram
 * and its process's. Not once the session ends (breaches_stopped): the
 * summary reads both, and they add up.
 */
static __always_inline void hist_add(__u32 kind, __u32 tgid, __u64 delta_ns)
{
	__u32 slot = log2_u64(delta_ns / 1000);
	struct ht_proc_hist *h;
	__u32 idx;
	__u64 *c;

	if (breaches_stopped)
		return;
	if (slot >= HT_HIST_SLOTS)
		slot = HT_HIST_SLOTS - 1;
	idx = HT_HIST_INDEX(kind, slot);
	c = bpf_map_lookup_elem(&hists, &idx);
	if (c)
		*c += 1;
	h = proc_hist_of(tgid);
	if (h && kind >= 1 && kind <= HT_PROC_HIST_KINDS) {
		__u64 bucket = slot;

		/* Linux 6.1's verifier loses slot's bound over the lookups: bound it again. */
		_Static_assert(!(HT_HIST_SLOTS & (HT_HIST_SLOTS - 1)), "a power of two");
		barrier_var(bucket);
		bucket &= HT_HIST_SLOTS - 1;
		__sync_fetch_and_add(&h->slots[kind - 1][bucket], 1);
	}
}

/* P's process is gone (its last thread switches out dead): its slot is user space's to take. */
static __always_inline void proc_hist_exit(struct task_struct *p)
{
	__u32 tgid = p->tgid, key;
	struct ht_proc_hist *h;

	if (p->signal->live.counter)
		return;
	for (__u32 i = 0; i < HT_PROC_HIST_PROBES; i++) {
		key = (tgid + i) & proc_hist_mask;
		h = bpf_map_lookup_elem(&proc_hists, &key);
		if (h && h->owner == tgid) {
			__sync_val_compare_and_swap(&h->owner, tgid, tgid | HT_PROC_HIST_GONE);
			return;
		}
	}
}

/* Whether CUR (a pid) is in interrupt or timer context KIND on this CPU. */
static __always_inline bool context_active(struct cpu_context *c, int kind, __u32 cur)
{
	return c->entry[kind] > c->exit[kind] && c->owner[kind] == cur;
}

/*
 * A timer callback of KIND still runs: its entry was seen and its exit not,
 * and no softirq began since (none begins inside a callback: a hard one runs
 * in interrupt context, a soft one inside its own softirq). One whose exit
 * went unseen (PREEMPT_RT's preemptible programs miss some: lost.recursion)
 * is over once a softirq began after it: a wakeup there is that softirq's
 * (6.1-rt: a receiver woken in net_rx was named a timer's whose exit had
 * been missed). Not a hard one that interrupted a softirq and returned to
 * it unseen: only preempt_count would tell that softirq's later wakeups
 * from the callback's.
 */
static __always_inline bool timer_active(struct cpu_context *c, int kind, __u32 cur)
{
	return context_active(c, kind, cur) && c->entry[kind] > c->entry[CTX_SOFTIRQ];
}

static __always_inline bool in_do_softirq(__u64 ip)
{
	for (int r = 0; r < DO_SOFTIRQ_RANGES; r++)
		if (ip >= do_softirq_ranges[r][0] && ip < do_softirq_ranges[r][1])
			return true;
	return false;
}

#define PAGE_BYTES 4096

/*
 * Whether the softirq running on this CPU runs in CUR's context, on its
 * behalf: from local_bh_enable (loopback networking runs the receiver's
 * net_rx in the sender's send), in ksoftirqd, or anywhere on PREEMPT_RT
 * (where a hardirq's exit only wakes ksoftirqd); not on the way out of a
 * hardirq, where CUR is whatever task it interrupted. preempt_count is the
 * same in both, and its per-CPU variable cannot be resolved on kernels
 * without CONFIG_KALLSYMS_ALL, so the stack the softirq runs on tells
 * (x86-64, arch/x86/include/asm/irq_stack.h, the same in 6.1 and 6.18):
 * - on CUR's own stack: ksoftirqd (a kernel thread), or a hardirq's exit
 *   that interrupted user mode (CUR is a user task there);
 * - on the irq stack: a hardirq's exit that interrupted the kernel, or
 *   do_softirq() (do_softirq_own_stack). The switch to the irq stack
 *   stores the stack pointer it left at the top slot, whose page offset
 *   is always 0xff8 (the stack is page-aligned, map_irq_stack), and the
 *   call below it pushes its return address: in do_softirq() for a task's
 *   local_bh_enable, in a sysvec or common_interrupt for a hardirq. The
 *   softirq's entry lies well within a page of that top.
 * Two loads and one 16-byte read per softirq that wakes a target (the
 * kernel stack walk this replaced cost 14 us a wakeup here: make bench,
 * section 9), kept for the rest of that softirq's wakeups.
 */
static __always_inline bool softirq_in_task(struct cpu_context *c, struct task_struct *cur)
{
	/* IRQ_STACK_SIZE, and THREAD_SIZE too on x86-64 (page_64_types.h); 0: not x86-64 */
	__u64 stack_bytes =
		bpf_core_type_exists(struct irq_stack) ? bpf_core_type_size(struct irq_stack) : 0;
	__u64 seq = c->entry[CTX_SOFTIRQ], sp = c->softirq_sp, stack, top;
	__u64 slots[2]; /* the outermost return address on the irq stack, the stack pointer left */
	bool in_task = false;

	if (bpf_core_field_exists(((struct task_struct___rt *)cur)->softirq_disable_cnt))
		return true;
	if (!do_softirq_ranges[0][0] || !stack_bytes)
		return false;
	if (c->in_task_seq == seq)
		return c->in_task;
	stack = (__u64)cur->stack;
	if (sp - stack < stack_bytes) {
		in_task = cur->flags & PF_KTHREAD;
	} else {
		top = (sp | (PAGE_BYTES - 1)) - 7;
		/* The stack pointer left must be CUR's: else this is no irq stack we know. */
		if (!bpf_probe_read_kernel(slots, sizeof(slots), (void *)(top - 8)) &&
		    slots[1] - stack < stack_bytes)
			in_task = in_do_softirq(slots[0]);
	}
	c->in_task_seq = seq;
	c->in_task = in_task;
	return in_task;
}

/*
 * Who is waking: a task, or interrupt context as the irq, softirq and timer
 * tracepoints saw it (*VEC: the softirq's vector; *IN_TASK: a softirq that
 * runs in current's context, on its behalf). preempt_count would say
 * interrupt context directly, but its per-CPU variable cannot be resolved
 * on kernels without CONFIG_KALLSYMS_ALL.
 */
static __always_inline __u32 wake_context(__u32 *vec, bool *in_task)
{
	__u32 zero = 0, cur = (__u32)bpf_get_current_pid_tgid();
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);

	*vec = 0;
	*in_task = false;
	if (!c)
		return HT_WAKE_TASK;
	if (timer_active(c, CTX_HRTIMER_HARD, cur) || timer_active(c, CTX_HRTIMER_SOFT, cur) ||
	    timer_active(c, CTX_TIMER, cur))
		return HT_WAKE_TIMER;
	if (context_active(c, CTX_HARDIRQ, cur))
		return HT_WAKE_IRQ;
	if (context_active(c, CTX_SOFTIRQ, cur)) {
		/*
		 * The timer softirqs run timer callbacks alone: a wakeup in one is
		 * a timer's even where the callback's own entry went unseen (on
		 * PREEMPT_RT a program preempted mid-run makes the next on its CPU
		 * miss it: lost.recursion).
		 */
		if (c->softirq_vec == TIMER_SOFTIRQ || c->softirq_vec == HRTIMER_SOFTIRQ)
			return HT_WAKE_TIMER;
		*vec = c->softirq_vec;
		/* On an idle CPU (pid 0) no one is named. */
		*in_task = cur && softirq_in_task(c, bpf_get_current_task_btf());
		return HT_WAKE_SOFTIRQ;
	}
	return HT_WAKE_TASK;
}

/* Who owns a slot: the thread's pid and its start time, never 0 (pid 0 is no target). */
static __always_inline __u64 slot_owner(struct task_struct *p)
{
	return (__u64)(__u32)p->pid << 32 | (__u32)p->start_time;
}

/*
 * P's state; CREATE: make it when P has none. NULL: none (or no memory, counted).
 * *IN_STORAGE says whether it lives in task storage rather than in a slot.
 */
static __always_inline struct task_state *state_find(struct task_struct *p, bool create,
						     bool *in_storage)
{
	__u32 index = (__u32)p->pid & thread_slot_mask;
	__u64 owner = slot_owner(p);
	struct thread_slot *slot = bpf_map_lookup_elem(&thread_slots, &index);
	struct task_state *st;
	__u64 was;

	*in_storage = false;
	if (slot && slot->owner == owner)
		return &slot->st;
	*in_storage = true;
	st = bpf_task_storage_get(&task_states, p, 0, 0);
	if (st || !create)
		return st;
	if (slot) {
		/* Free slots are zeroed; another CPU may claim it for P at the same time. */
		was = __sync_val_compare_and_swap(&slot->owner, 0, owner);
		if (was == 0 || was == owner) {
			*in_storage = false;
			return &slot->st;
		}
	}
	st = bpf_task_storage_get(&task_states, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		count(HT_CNT_STORAGE_FAILS);
	return st;
}

static __always_inline struct task_state *state_get(struct task_struct *p, bool create)
{
	bool in_storage;

	return state_find(p, create, &in_storage);
}

/* An interval was judged from a thread's state: count where that state lives. */
static __always_inline void count_judged(bool in_storage)
{
	count(in_storage ? HT_CNT_STATE_STORAGE : HT_CNT_STATE_SLOT);
}

static __always_inline struct task_state *state_of(struct task_struct *p)
{
	return state_get(p, true);
}

/* P switched out for the last time: its slot is free again, zeroed. */
static __always_inline void state_release(struct task_struct *p)
{
	__u32 index = (__u32)p->pid & thread_slot_mask;
	struct thread_slot *slot = bpf_map_lookup_elem(&thread_slots, &index);

	if (!slot || slot->owner != slot_owner(p))
		return;
	__builtin_memset(&slot->st, 0, sizeof(slot->st));
	barrier();
	*(volatile __u64 *)&slot->owner = 0;
}

/* The syscall an off-CPU wait slept in, and what it asked for (sleep_syscall_of()). */
struct sleep_syscall {
	__s32 nr;    /* -1: none */
	__u32 flags; /* HT_BRF_URING_GETEVENTS, HT_BRF_SYSCALL_FD */
	__u32 fd;    /* with HT_BRF_SYSCALL_FD: its first argument */
};

/* What the breach's wakeup says: its own thread woke it as it exited (a join). */
static __always_inline __u32 waker_flags(const struct task_state *st)
{
	return (st->joined ? HT_BRF_JOINED : 0) | (st->wakeup_untraced ? HT_BRF_WAKEUP_UNTRACED : 0);
}

/* No wakeup has ended the thread's waits since: its breaches name none. */
static __always_inline void forget_waker(struct task_state *st)
{
	st->wake_source = HT_WAKE_NONE;
	st->waker_tid = 0;
	st->waker_tgid = 0;
	st->wake_ns = 0;
	st->joined = 0;
	st->waker_stack_seq = 0;
	st->wakeup_untraced = 0;
}

/*
 * The thread gets the CPU after a sleep whose wakeup went untraced: the
 * waker held is an older sleep's, so its waits name none, and say why.
 */
static __always_inline void note_untraced_wakeup(struct task_state *st)
{
	if (!st->sleep_unwoken)
		return;
	count(HT_CNT_UNTRACED_WAKEUPS);
	forget_waker(st);
	st->sleep_unwoken = 0;
	st->wakeup_untraced = 1;
}

/* A breach that names no wakeup. */
static __always_inline void clear_waker(struct ht_breach *b)
{
	b->wake_ns = 0;
	b->wake_source = HT_WAKE_NONE;
	b->waker_tid = 0;
	b->waker_tgid = 0;
	b->wake_cpu = 0;
	b->softirq_vec = 0;
	b->waker_stack_seq = 0;
	__builtin_memset(b->waker_comm, 0, sizeof(b->waker_comm));
}

/* The state of the thread's last sleep and the wakeup that ended it, for a breach ending at END_NS. */
static __always_inline void fill_waker(struct ht_breach *b, const struct task_state *st,
				       __u64 end_ns)
{
	b->state = st->off_cpu_state;
	/* Its time comes from its rq's clock (see clock_sync): never after the end. */
	b->wake_ns = st->wake_ns < end_ns ? st->wake_ns : end_ns;
	b->wake_source = st->wake_source;
	b->waker_tid = st->waker_tid;
	b->waker_tgid = st->waker_tgid;
	b->wake_cpu = st->wake_cpu;
	b->softirq_vec = st->softirq_vec;
	b->waker_stack_seq = st->waker_stack_seq;
	__builtin_memcpy(b->waker_comm, st->waker_comm, sizeof(b->waker_comm));
	b->flags |= waker_flags(st);
}

/*
 * A run-queue breach that began with a preemption says so; otherwise a breach
 * names the wakeup that ended the thread's last sleep, whatever preemptions
 * came after it (a syscall's breach, user space adds those). SLEEP: an
 * off-CPU breach's syscall; NULL: the syscall it is in, as sys_enter saw it.
 */
static __always_inline void emit_breach(__u32 kind, struct task_struct *p, struct task_state *st,
					__u64 start_ns, __u64 end_ns, bool traced,
					const struct sleep_syscall *sleep)
{
	bool preempted = kind == HT_BREACH_RQ_DELAY && st->preempted;
	struct ht_breach *b;
	__u32 stack = 0;

	if (breaches_stopped)
		return;
	/* An off-CPU wait began with the thread's last sleep. */
	if (block_stack_mode && kind == HT_BREACH_OFF_CPU)
		stack = send_block_stack(p, st->block_stack_seq);
	count(HT_CNT_BREACHES);
	b = bpf_ringbuf_reserve(&breaches, sizeof(*b), 0);
	if (!b) {
		count(HT_CNT_RB_DROPS);
		return;
	}
	b->kind = kind;
	b->start_ns = start_ns;
	b->end_ns = end_ns;
	b->tid = p->pid;
	b->tgid = p->tgid;
	task_ns_pids(p, &b->ns_tid, &b->ns_tgid);
	b->cpu = bpf_get_smp_processor_id();
	b->syscall_nr = sleep ? sleep->nr : st->syscall_since_ns ? st->syscall_nr : -1;
	b->syscall_ret = 0;
	b->flags = sleep ? sleep->flags : 0;
	b->syscall_fd = sleep ? sleep->fd : 0;
	b->kinds = HT_KIND_BIT(kind);
	b->off_cpu_waits = kind == HT_BREACH_OFF_CPU;
	b->off_cpu_start_ns = kind == HT_BREACH_OFF_CPU ? start_ns : 0;
	b->off_cpu_end_ns = kind == HT_BREACH_OFF_CPU ? end_ns : 0;
	b->off_cpu_threshold_ns = off_cpu_thresh_ns;
	b->softirq_vec = 0;
	bpf_probe_read_kernel_str(b->comm, sizeof(b->comm), p->comm);
	if (preempted) {
		b->state = TASK_RUNNING;
		clear_waker(b);
		b->wake_cpu = st->preempt_cpu;
	} else {
		fill_waker(b, st, end_ns);
	}
	b->block_stack_seq = 0;
	if (kind == HT_BREACH_OFF_CPU)
		block_stack_to_breach(b, stack, true);
	if (traced) {
		b->kstack_bytes = bpf_get_task_stack(p, b->kstack, sizeof(b->kstack), 0);
	} else {
		b->kstack_bytes = 0;
		b->flags |= HT_BRF_SWITCH_IN_UNTRACED;
	}
	bpf_ringbuf_submit(b, BPF_RB_FORCE_WAKEUP);
}

/*
 * A thread that leaves the CPU got on it, but its state may say it is still
 * asleep: the tracepoints skipped its wakeup and switch-in (seen about once
 * in 200 sleeps on a loaded KVM guest, every program on them missing it
 * alike, with no recursion miss counted). The interval that switch-in ended
 * cannot be judged: count it rather than leave it unsaid. Only while the
 * switch-in keeps the state (see target_switch_in).
 */
static __always_inline void check_switch_in_seen(struct task_state *st)
{
	/* A syscall's too: its waker and the stack it slept on were lost with it. */
	if ((off_cpu_thresh_ns || syscall_thresh_ns) && st->off_cpu_since_ns)
		count(HT_CNT_UNSEEN_SWITCH_INS);
}

static __always_inline __u64 take_held(struct held_off_cpu *h);
static __always_inline void emit_syscall_end(struct task_struct *p, struct task_state *st,
					     bool syscall, __u64 held_start, __u64 now, long ret,
					     __u32 flags, __u32 fd);

/*
 * A target thread leaves the CPU: it is either still runnable or going to
 * sleep (then, with --block-stacks, its user stack is kept: CTX is
 * sched_switch's, where PREV is current).
 */
static __always_inline void target_switch_out(void *ctx, struct task_struct *prev, __u32 state,
					      bool preempt, __u64 now, __u64 syscall_bits)
{
	struct task_state *st;
	bool in_storage;
	__u64 held;

	/* Its last switch, after exit: nothing of it follows; what it held is sent. */
	if (state & TASK_DEAD) {
		st = state_find(prev, false, &in_storage);
		if (st)
			check_switch_in_seen(st);
		if (st && !breaches_stopped && (held = take_held(&st->held)))
			emit_syscall_end(prev, st, false, held, now, 0, 0, 0);
		state_release(prev);
		return;
	}
	st = state_of(prev);
	if (!st)
		return;
	check_switch_in_seen(st);
	if (preempt || state == TASK_RUNNING) {
		/*
		 * The wakeup that ended its last sleep stays: a preemption right
		 * after it (on PREEMPT_RT, the irq_work thread that wakes
		 * hybtrace) must not take its place in the syscall's breach.
		 */
		st->runnable_since_ns = now;
		st->off_cpu_since_ns = 0;
		st->preempted = 1;
		st->preempt_cpu = bpf_get_smp_processor_id();
	} else {
		st->runnable_since_ns = 0;
		st->off_cpu_since_ns = now;
		st->off_cpu_state = state;
		st->preempted = 0;
		/* Its enqueue comes after this (the waker waits for it to be off the CPU). */
		st->sleep_unwoken = 1;
		st->sleep_syscall = (__u32)(syscall_bits >> HT_FR_SWITCH_SYSCALL_SHIFT);
		if (block_stack_mode) {
			st->block_stack_seq = keep_block_stack(ctx, prev, now);
			/* make bench divides the program's added time by the stacks taken. */
			if (st->block_stack_seq)
				count(HT_CNT_BLOCK_STACKS_TAKEN);
		}
	}
}

/* TRACED: as target_switch_in()'s; untraced, NEXT's kernel stack is not where it waited. */
static __always_inline void judge_rq_delay(struct task_struct *next, struct task_state *st,
					   __u64 since, __u64 now, bool traced)
{
	/* Two CPUs' clock estimates (clock_sync) may put a short wait's end before its start. */
	__u64 delta = now > since ? now - since : 0;

	hist_add(HT_BREACH_RQ_DELAY, next->tgid, delta);
	if (!rq_delay_thresh_ns || delta < rq_delay_thresh_ns)
		return;
	if (!st)
		st = state_of(next);
	if (!st)
		return;
	/* Judged from sched_info, before target_switch_in() reads the state. */
	note_untraced_wakeup(st);
	emit_breach(HT_BREACH_RQ_DELAY, next, st, since, now, traced, NULL);
}

/*
 * The run-queue wait that ends here, from the scheduler's own bookkeeping:
 * sched_info.last_queued is when NEXT was queued, on the rq clock, and
 * still set at the tracepoint. next's state, cold in the cache, is then
 * read only for a breach (or for the off-CPU and syscall intervals).
 */
static __always_inline bool rq_delay_from_sched_info(struct task_struct *next,
						     const struct switch_time *t)
{
	__u64 queued;

	if (!rq_from_sched_info || !t->clock ||
	    !bpf_core_field_exists(next->sched_info.last_queued))
		return false;
	queued = next->sched_info.last_queued;
	if (queued && queued <= t->clock) {
		__u32 slot = (__u32)next->pid & (PREEMPT_NOTES - 1);
		struct preempt_note *note = bpf_map_lookup_elem(&preempt_notes, &slot);
		__u64 since = queued + t->offset;

		/* Queued by its preemption, at a clock that may have been stale. */
		if (note && note->tid == next->pid && note->clock == queued) {
			since = note->now;
		} else if (note && note->tid == next->pid && note->clock == NOTE_MIGRATED) {
			if (move_note_unread(note, next))
				since = note->now;
			note->tid = 0;
		}
		if (since > t->now)
			since = t->now;
		count(HT_CNT_RQ_SCHED_INFO);
		judge_rq_delay(next, NULL, since, t->now, true);
	}
	return true;
}

static __always_inline void keep_syscall_stack(struct task_struct *p, struct task_state *st)
{
	struct syscall_stack *stack;

	stack = bpf_task_storage_get(&syscall_stacks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!stack) {
		count(HT_CNT_STORAGE_FAILS);
		return;
	}
	st->syscall_kstack_bytes = bpf_get_task_stack(p, stack->ips, sizeof(stack->ips), 0);
}

static __always_inline bool syscall_in(const volatile __u64 *set, long nr)
{
	__u32 n;

	if (nr < 0 || nr >= HT_MAX_SYSCALLS)
		return false;
	/*
	 * Inlined where the number came from a 32-bit copy, the compiler may
	 * test one register and index with another the verifier knows no bound
	 * of: bound the index itself.
	 */
	n = (__u32)nr;
	barrier_var(n);
	n &= HT_MAX_SYSCALLS - 1;
	return set[n / 64] & (1ULL << (n % 64));
}

static __always_inline bool syscall_ignored(long nr)
{
	return ignore_syscalls_on && syscall_in(ignore_syscalls, nr);
}

static __always_inline bool io_uring_waits(unsigned long min_complete, unsigned long flags)
{
	return (flags & IORING_ENTER_GETEVENTS) && (__u32)min_complete;
}

/*
 * The syscall P slept in, read as it comes back, only for a breach
 * (syscall_in_regs()). With --syscall, sys_enter's note says the same.
 */
static __always_inline void sleep_syscall_of(struct task_struct *p, struct task_state *st,
					     struct sleep_syscall *sc)
{
	struct pt_regs *regs = user_regs_of(p);

	sc->nr = -1;
	sc->flags = 0;
	sc->fd = 0;
	if (st->syscall_since_ns)
		sc->nr = st->syscall_nr;
	else if (regs)
		sc->nr = syscall_in_regs(regs);
	if (sc->nr < 0 || !regs)
		return;
	if (sc->nr == NR_IO_URING_ENTER && io_uring_waits(regs->dx, regs->r10))
		sc->flags |= HT_BRF_URING_GETEVENTS;
	sc->flags |= HT_BRF_SYSCALL_FD;
	sc->fd = (__u32)regs->di;
}

/* A filter (--off-cpu-states, --off-cpu-syscalls, --ignore-syscalls) leaves it out. */
static __always_inline void count_filtered(void)
{
	if (!breaches_stopped)
		count(HT_CNT_FILTERED);
}

static __always_inline bool syscall_watched(long nr)
{
	if (nr < 0 || nr >= HT_MAX_SYSCALLS)
		return false;
	return !syscall_filter_on || syscall_in(syscall_filter, nr);
}

/* An off-CPU interval that ends inside a syscall that may breach too waits for its end. */
static __always_inline bool held_for_syscall(const struct task_state *st)
{
	return syscall_thresh_ns && st->syscall_since_ns && syscall_watched(st->syscall_nr);
}

/*
 * An off-CPU breach that ends at NOW inside a watched syscall: keep the
 * longest. TRACED: as off_cpu_breach().
 */
static __always_inline void hold_off_cpu(struct task_struct *p, struct task_state *st, __u64 now,
					 bool traced)
{
	struct held_off_cpu *h = &st->held;

	if (breaches_stopped)
		return;
	h->waits++;
	if (h->start_ns && now - st->off_cpu_since_ns <= h->end_ns - h->start_ns)
		return;
	h->start_ns = st->off_cpu_since_ns;
	h->end_ns = now;
	h->tgid = p->tgid;
	task_ns_pids(p, &h->ns_tid, &h->ns_tgid);
	h->state = st->off_cpu_state;
	h->cpu = bpf_get_smp_processor_id();
	h->wake_ns = st->wake_ns < now ? st->wake_ns : now;
	h->wake_source = st->wake_source;
	h->waker_tid = st->waker_tid;
	h->waker_tgid = st->waker_tgid;
	h->wake_cpu = st->wake_cpu;
	h->flags = waker_flags(st);
	h->softirq_vec = st->softirq_vec;
	h->waker_stack_seq = st->waker_stack_seq;
	__builtin_memcpy(h->waker_comm, st->waker_comm, sizeof(h->waker_comm));
	/*
	 * The stack it slept on is the breach's, whichever kinds it ends with;
	 * leaving the CPU again, it is elsewhere.
	 */
	if (traced) {
		keep_syscall_stack(p, st);
	} else {
		st->syscall_kstack_bytes = 0;
		h->flags |= HT_BRF_SWITCH_IN_UNTRACED;
	}
	/* Its user stack too: a later sleep of the syscall keeps another in its place. */
	if (block_stack_mode)
		h->block_stack_seq = send_block_stack(p, st->block_stack_seq);
}

/* The off-CPU part of a breach from the interval held (START, read before it was taken). */
static __always_inline void fill_held(struct ht_breach *b, const struct held_off_cpu *h,
				      __u64 start_ns)
{
	b->kinds |= HT_KIND_BIT(HT_BREACH_OFF_CPU);
	b->off_cpu_waits = h->waits;
	b->off_cpu_start_ns = start_ns;
	b->off_cpu_end_ns = h->end_ns;
	b->off_cpu_threshold_ns = off_cpu_thresh_ns;
	b->state = h->state;
	b->wake_ns = h->wake_ns;
	b->wake_source = h->wake_source;
	b->waker_tid = h->waker_tid;
	b->waker_tgid = h->waker_tgid;
	b->wake_cpu = h->wake_cpu;
	__builtin_memcpy(b->waker_comm, h->waker_comm, sizeof(b->waker_comm));
	/* What the kernel did not trace is the held sleep's too. */
	b->flags = (b->flags &
		    ~(HT_BRF_JOINED | HT_BRF_WAKEUP_UNTRACED | HT_BRF_SWITCH_IN_UNTRACED)) |
		   h->flags;
	b->softirq_vec = h->softirq_vec;
	b->waker_stack_seq = h->waker_stack_seq;
}

/*
 * Take the held interval: 0 when none is held or another program took it
 * (the end of the session flushes what threads still hold).
 */
static __always_inline __u64 take_held(struct held_off_cpu *h)
{
	__u64 start = h->start_ns;

	if (!start || __sync_val_compare_and_swap(&h->start_ns, start, 0) != start)
		return 0;
	return start;
}

/* The kernel stack kept for P's syscall, into B. */
static __always_inline void copy_syscall_stack(struct ht_breach *b, struct task_struct *p,
					       const struct task_state *st)
{
	struct syscall_stack *stack;
	__s32 bytes = st->syscall_kstack_bytes;

	stack = bytes > 0 ? bpf_task_storage_get(&syscall_stacks, p, 0, 0) : NULL;
	if (!stack || bytes > (__s32)sizeof(b->kstack))
		bytes = 0;
	b->kstack_bytes = bytes;
	if (stack)
		__builtin_memcpy(b->kstack, stack->ips, sizeof(b->kstack));
}

/*
 * The breach a syscall of P ends with, at NOW: the syscall's (SYSCALL) with
 * the off-CPU interval held inside it (HELD_START, 0: none), or that
 * interval alone. Clears the syscall and what it held.
 */
static __always_inline void emit_syscall_end(struct task_struct *p, struct task_state *st,
					     bool syscall, __u64 held_start, __u64 now, long ret,
					     __u32 flags, __u32 fd)
{
	/* The syscall slept (sys_enter reset the state) and no longer sleep of it is held. */
	bool blocked = held_start || st->off_cpu_state != TASK_RUNNING;
	struct ht_breach *b;
	__u32 stack = 0;

	if (held_start)
		stack = st->held.block_stack_seq;
	else if (block_stack_mode && syscall && blocked)
		stack = send_block_stack(p, st->block_stack_seq);
	count(HT_CNT_BREACHES);
	b = bpf_ringbuf_reserve(&breaches, sizeof(*b), 0);
	if (!b) {
		count(HT_CNT_RB_DROPS);
		goto out;
	}
	b->tid = p->pid;
	b->tgid = p->tgid;
	task_ns_pids(p, &b->ns_tid, &b->ns_tgid);
	b->cpu = bpf_get_smp_processor_id();
	b->syscall_nr = st->syscall_nr;
	b->syscall_ret = ret;
	b->flags = flags;
	b->syscall_fd = fd;
	b->softirq_vec = 0;
	b->off_cpu_waits = 0;
	b->off_cpu_start_ns = 0;
	b->off_cpu_end_ns = 0;
	b->off_cpu_threshold_ns = 0;
	if (syscall) {
		b->kind = HT_BREACH_SYSCALL;
		b->kinds = HT_KIND_BIT(HT_BREACH_SYSCALL);
		b->start_ns = st->syscall_since_ns;
		b->end_ns = now;
		fill_waker(b, st, now);
	} else {
		b->kind = HT_BREACH_OFF_CPU;
		b->kinds = 0;
		b->start_ns = held_start;
		b->end_ns = st->held.end_ns;
		b->cpu = st->held.cpu;
	}
	if (held_start)
		fill_held(b, &st->held, held_start);
	block_stack_to_breach(b, stack, blocked);
	copy_syscall_stack(b, p, st);
	bpf_probe_read_kernel_str(b->comm, sizeof(b->comm), p->comm);
	bpf_ringbuf_submit(b, BPF_RB_FORCE_WAKEUP);
out:
	__builtin_memset(&st->held, 0, sizeof(st->held));
	st->syscall_since_ns = 0;
}

/*
 * An off-CPU wait over the threshold: a breach, unless the filters leave it
 * out. TRACED: NEXT is being switched in, so its kernel stack and saved
 * registers are where it slept; else it is leaving the CPU again
 * (untraced_switch_in()), maybe in another syscall: only the syscall noted
 * as it fell asleep is known.
 */
static __always_inline void off_cpu_breach(struct task_struct *next, struct task_state *st,
					   __u64 now, bool traced)
{
	struct sleep_syscall sc = { .nr = -1 };

	if (traced)
		sleep_syscall_of(next, st, &sc);
	else
		sc.nr = (__s32)st->sleep_syscall - 1;
	if ((off_cpu_states &&
	     !(off_cpu_states & (1U << ht_task_state_index(st->off_cpu_state)))) ||
	    (off_cpu_syscalls_on && !syscall_in(off_cpu_syscalls, sc.nr)) ||
	    syscall_ignored(sc.nr)) {
		count_filtered();
		return;
	}
	/* Inside a syscall that may breach too, it waits for the syscall's end: one wait, one breach. */
	if (held_for_syscall(st))
		hold_off_cpu(next, st, now, traced);
	else
		emit_breach(HT_BREACH_OFF_CPU, next, st, st->off_cpu_since_ns, now, traced, &sc);
}

/*
 * A target thread gets the CPU: the intervals that end here are judged.
 * NEXT runs from T on. TRACED: at its sched_switch event; else at its
 * switch-out (untraced_switch_in()), when sched_info.last_queued is gone:
 * its run-queue wait is then timed by its own state.
 */
static __always_inline void target_switch_in(struct task_struct *next, const struct switch_time *t,
					     bool traced)
{
	bool rq_done = traced && rq_delay_from_sched_info(next, t);
	struct task_state *st;
	__u64 now = t->now;
	bool in_storage;

	if (test_skip_switch_in_one_in && bpf_get_prandom_u32() % test_skip_switch_in_one_in == 0)
		return;
	if (rq_done && !off_cpu_thresh_ns && !syscall_thresh_ns)
		return;
	st = state_find(next, true, &in_storage);
	if (!st)
		return;
	note_untraced_wakeup(st);
	if (st->runnable_since_ns && !rq_done) {
		count(HT_CNT_RQ_THREAD_STATE);
		count_judged(in_storage);
		judge_rq_delay(next, st, st->runnable_since_ns, now, traced);
	}
	st->runnable_since_ns = 0;
	if (st->off_cpu_since_ns && off_cpu_thresh_ns) {
		/* Switched out on another CPU, whose clock estimate may run a little ahead. */
		__u64 delta = now > st->off_cpu_since_ns ? now - st->off_cpu_since_ns : 0;

		count_judged(in_storage);
		hist_add(HT_BREACH_OFF_CPU, next->tgid, delta);
		if (delta >= off_cpu_thresh_ns)
			off_cpu_breach(next, st, now, traced);
	}
	st->off_cpu_since_ns = 0;
	/*
	 * A syscall already too long: keep the stack it sleeps on for its
	 * breach, unless an off-CPU interval held is the breach's (its stack).
	 * Untraced, NEXT is elsewhere by now: that stack is not known.
	 */
	if (syscall_thresh_ns && st->syscall_since_ns && !st->held.start_ns &&
	    now - st->syscall_since_ns >= syscall_thresh_ns && !syscall_ignored(st->syscall_nr)) {
		if (traced)
			keep_syscall_stack(next, st);
		else
			st->syscall_kstack_bytes = 0;
	}
}

/*
 * The state in which the task that switch T's CPU last took in (T's
 * last_next) left it, untraced: asleep, as it still is, if it is on no run
 * queue now (an exited task is dead), else runnable. The record may be
 * written late, at the CPU's next traced switch: a task woken by then was
 * asleep too, which its wakeup's record shows (wait_chain.c).
 */
static __always_inline __u32 untraced_left_state(const struct switch_time *t)
{
	struct task_struct *p = (struct task_struct *)t->last_task;

	/* Read through probes: the task may be gone, its memory another's. */
	if (!p || BPF_CORE_READ(p, pid) != (pid_t)t->last_next || BPF_CORE_READ(p, on_rq))
		return TASK_RUNNING;
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)p, state);
}

/*
 * PREV leaves a CPU whose latest switch took another task in: the kernel
 * switched to PREV without the tracepoint (on some kernels a few tasks hand
 * their CPU over that way). sched_info.last_arrival says when PREV began to
 * run, on this rq's clock: the switch is recorded as it happened, and for a
 * target what that switch-in ends is judged, before its switch-out.
 */
static __always_inline void untraced_switch_in(struct task_struct *prev, bool target,
					       const struct switch_time *t)
{
	struct switch_time in = *t;
	__u64 arrival = 0;
	bool timed;

	if (bpf_core_field_exists(prev->sched_info.last_arrival))
		arrival = prev->sched_info.last_arrival;
	timed = t->clock && arrival && arrival <= t->clock &&
		arrival + t->offset > t->last_switch_ns;
	/*
	 * The idle task has no sched_info: its arrival is stale. Any other
	 * task's switch-in is recorded even untimed (its arrival just before
	 * the traced switch's time, which a clamp may have moved later): a
	 * task that never held the CPU would be given its whole time.
	 */
	if (!timed && !prev->pid)
		return;
	in.clock = 0;
	/* Without the kernel's time: right after the switch that took the other task in. */
	in.now = timed ? arrival + t->offset : t->last_switch_ns;
	if (in.now > t->now)
		in.now = t->now;
	count(HT_CNT_UNTRACED_SWITCH_INS);
	fr_write_sched(in.now, HT_FR_SWITCH, HT_FRF_UNTRACED | (target ? HT_FRF_NEXT_TARGET : 0),
		       prev->prio, t->last_next, prev->pid, untraced_left_state(t));
	if (target)
		target_switch_in(prev, &in, false);
}

/*
 * CUR returns from its syscall while its state says it still sleeps: the
 * kernel took it in without the tracepoint, and the CPU's next traced
 * switch will record that switch (untraced_switch_in()), after the
 * syscall's breach is sent. What the switch-in ended is judged now, so that
 * the breach holds its off-CPU part and says what was not traced: at the
 * kernel's sched_info.last_arrival where this CPU's clock offset places it
 * after the CPU's last traced switch, else right after that switch.
 */
static __always_inline void untraced_switch_in_at_exit(struct task_struct *cur,
						       struct task_state *st, __u64 now)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct clock_sync *sync = bpf_map_lookup_elem(&clock_syncs, &cpu);
	struct switch_time in = { .now = now };
	__u64 arrival = 0, at;

	if (bpf_core_field_exists(cur->sched_info.last_arrival))
		arrival = cur->sched_info.last_arrival;
	if (sync && sync->last_ns && sync->last_ns < now) {
		at = arrival + sync->offset;
		in.now = sync->rq_clock && arrival && at > sync->last_ns && at <= now ? at
										 : sync->last_ns;
	}
	target_switch_in(cur, &in, false);
}

/* PREV was preempted: sched_info_enqueue stamps it with t->clock. */
static __always_inline void note_preemption(struct task_struct *prev, const struct switch_time *t)
{
	__u32 slot = (__u32)prev->pid & (PREEMPT_NOTES - 1);
	struct preempt_note *note = bpf_map_lookup_elem(&preempt_notes, &slot);

	if (!note)
		return;
	note->tid = prev->pid;
	note->clock = t->clock;
	note->now = t->now;
}

/*
 * The syscall PREV leaves the CPU in, for its switch record (HT_FR_SWITCH):
 * a chain through tasks that are no targets says what each blocked in. A
 * helper call and a few loads.
 */
static __always_inline __u64 switch_out_syscall(struct task_struct *prev)
{
	struct pt_regs *regs = user_regs_of(prev);
	__s32 nr;

	if (!regs)
		return 0;
	nr = syscall_in_regs(regs);
	return nr < 0 ? 0 : (__u64)(nr + 1) << HT_FR_SWITCH_SYSCALL_SHIFT;
}

/* For tests: P is named test_untraced_sleep_comm. */
static __always_inline bool named_untraced_sleeper(struct task_struct *p)
{
#pragma unroll
	for (int i = 0; i < sizeof(test_untraced_sleep_comm); i++) {
		if (p->comm[i] != test_untraced_sleep_comm[i])
			return false;
		if (!test_untraced_sleep_comm[i])
			break;
	}
	return true;
}

/* For tests: a move of P while queued is noted and not yet read (test_untraced_after_migration). */
static __always_inline bool migration_noted(struct task_struct *p)
{
	__u32 slot = (__u32)p->pid & (PREEMPT_NOTES - 1);
	struct preempt_note *note = bpf_map_lookup_elem(&preempt_notes, &slot);

	if (!note || !move_note_unread(note, p))
		return false;
	/* Hidden once: the kernel's next switch-in of it is traced. */
	note->runs--;
	return true;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 state = switch_prev_state(ctx, prev);
	bool prev_target = is_target(prev);
	bool next_target = is_target(next);
	struct switch_time t;
	__u64 syscall_bits;
	__u8 flags = 0;

	/*
	 * For tests: the kernel's untraced switches (untraced_switch_in()), on
	 * demand: from another task to a target, as the kernel's are out of
	 * tasks that are never targets.
	 */
	if (test_untraced_switch_every && next_target && !prev_target &&
	    ++test_switches_to_target % test_untraced_switch_every == 0)
		return 0;
	if (test_untraced_after_migration && next_target && !prev_target &&
	    migration_noted(next))
		return 0;
	if (test_untraced_sleep_comm[0] && !preempt && state != TASK_RUNNING &&
	    named_untraced_sleeper(prev))
		return 0;
	switch_now(prev, next, &t, prev_target || next_target);
	if (t.untraced)
		untraced_switch_in(prev, prev_target, &t);
	if (preempt)
		flags |= HT_FRF_PREEMPT;
	if (prev_target)
		flags |= HT_FRF_PREV_TARGET;
	if (next_target)
		flags |= HT_FRF_NEXT_TARGET;
	syscall_bits = switch_out_syscall(prev);
	fr_write_sched(t.now, HT_FR_SWITCH, flags, next->prio, prev->pid, next->pid,
		       state | syscall_bits);

	if (prev_target) {
		target_switch_out(ctx, prev, state, preempt, t.now, syscall_bits);
		if ((preempt || state == TASK_RUNNING) && t.clock)
			note_preemption(prev, &t);
		if (state & TASK_DEAD) {
			targets_exit(prev);
			proc_hist_exit(prev);
		}
	} else if (state & TASK_DEAD) {
		/* A thread of a process whose last thread left the set first: its slot is free. */
		state_release(prev);
		/* A process that left the set (a cgroup move) alive gives its slot back now. */
		proc_hist_exit(prev);
	}
	if (next_target)
		target_switch_in(next, &t, true);
	return 0;
}

/*
 * A task waking itself (between setting its state and calling schedule) is
 * woken without the rq lock, interrupts on: its record is then taken atomically.
 */
static __always_inline bool is_current(struct task_struct *p)
{
	return (void *)p == (void *)bpf_get_current_task_btf();
}

/* The record's arg of a wakeup: see HT_FR_WAKEUP. */
static __always_inline __u64 wake_arg(__u32 source, __u32 waker_cpu, __u32 vec)
{
	return source | (__u64)(waker_cpu & 0xffff) << 8 |
	       (__u64)(vec & 0xff) << HT_FR_WAKE_VEC_SHIFT;
}

/*
 * How long after its sched_waking at WAKING_NS a wakeup enqueued at NOW:
 * a remote CPU's interrupt later, an idle vCPU's hundreds of microseconds.
 * In microseconds, for the record's arg; 0 when not known (a waking too
 * far back is another's).
 */
static __always_inline __u64 wake_delay(__u64 now, __u64 waking_ns)
{
	__u64 us = now > waking_ns ? (now - waking_ns) / 1000 : 0;

	return waking_ns && us <= HT_FR_WAKE_DELAY_MAX_US ? us << HT_FR_WAKE_DELAY_SHIFT : 0;
}

static __always_inline __u64 with_prio(__u64 arg, struct task_struct *p)
{
	return arg | (__u64)(p->prio & 0xff) << HT_FR_WAKE_PRIO_SHIFT;
}

/* The waker of P, no target, for its sched_wakeup: see wake_notes. */
static __always_inline void note_other_waking(struct task_struct *p)
{
	__u32 slot = (__u32)p->pid & (WAKE_NOTES - 1);
	struct wake_note *note = bpf_map_lookup_elem(&wake_notes, &slot);
	__u32 source, vec, waker = 0;
	bool in_task;

	if (!note)
		return;
	source = wake_context(&vec, &in_task);
	if (source == HT_WAKE_TASK || in_task)
		waker = (__u32)bpf_get_current_pid_tgid();
	note->tid = p->pid;
	note->waker_tid = waker;
	note->source = wake_arg(source, bpf_get_smp_processor_id(), vec);
	note->waking_ns = bpf_ktime_get_ns();
}

/*
 * The wait P's wakeup ends is already over its threshold: off the CPU that
 * long, or in a watched syscall that long. Its breach will come; so do its
 * waker's stacks.
 */
static __always_inline bool wait_breached(const struct task_state *st, __u64 now)
{
	if (off_cpu_thresh_ns && st->off_cpu_since_ns && now > st->off_cpu_since_ns &&
	    now - st->off_cpu_since_ns >= off_cpu_thresh_ns)
		return true;
	return syscall_thresh_ns && st->syscall_since_ns && now > st->syscall_since_ns &&
	       now - st->syscall_since_ns >= syscall_thresh_ns;
}

/* Send the current task's stacks, the waker of P; their seq, or 0 when they found no room. */
static __always_inline __u32 send_waker_stack(void *ctx, struct task_struct *p,
					      struct task_struct *cur, __u64 now)
{
	struct ht_waker_stack *ws;
	__u32 seq;

	count(HT_CNT_WAKER_STACKS);
	ws = bpf_ringbuf_reserve(&waker_stack_rb, sizeof(*ws), 0);
	if (!ws) {
		count(HT_CNT_WAKER_STACK_DROPS);
		return 0;
	}
	ws->time_ns = now;
	seq = __sync_fetch_and_add(&waker_stack_last_seq, 1) + 1;
	ws->seq = seq;
	ws->wakee_tid = p->pid;
	ws->waker_tid = cur->pid;
	ws->waker_tgid = cur->tgid;
	copy_comm(ws->waker_comm, cur);
	ws->kstack_bytes = bpf_get_stack(ctx, ws->kstack, sizeof(ws->kstack), 0);
	if (cur->flags & PF_KTHREAD)
		ws->ustack_bytes = -EINVAL;
	else
		ws->ustack_bytes =
			bpf_get_stack(ctx, ws->ustack, sizeof(ws->ustack), BPF_F_USER_STACK);
	/* Not forced: the breach that names it comes right after and wakes the reader. */
	bpf_ringbuf_submit(ws, 0);
	return seq;
}

/*
 * Who woke the target: runs in the waker's context, before any remote
 * enqueue; sched_wakeup writes the record, with this, once it is queued.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(handle_sched_waking, struct task_struct *p)
{
	struct task_struct *cur;
	struct task_state *st;
	__u32 source, vec;
	bool in_task;

	if (!is_target(p)) {
		note_other_waking(p);
		return 0;
	}
	st = state_of(p);
	if (!st)
		return 0;
	source = wake_context(&vec, &in_task);
	cur = bpf_get_current_task_btf();
	st->wake_source = source;
	st->softirq_vec = vec;
	st->waker_cpu = bpf_get_smp_processor_id();
	st->waker_stack_seq = 0;
	st->waking_ns = bpf_ktime_get_ns();
	/* An idle CPU's softirq runs on no one's behalf: its idle task has pid 0. */
	if (source != HT_WAKE_TASK && !(in_task && cur->pid)) {
		st->waker_tid = 0;
		st->waker_tgid = 0;
		st->joined = 0;
		__builtin_memset(st->waker_comm, 0, sizeof(st->waker_comm));
		return 0;
	}
	st->waker_tid = cur->pid;
	st->waker_tgid = cur->tgid;
	st->joined = (cur->flags & PF_EXITING) && cur->tgid == p->tgid && cur->pid != p->pid;
	copy_comm(st->waker_comm, cur);
	/* The time read above: a second read costs as much again (clock.bpf.h). */
	if (waker_stacks_on && !breaches_stopped && wait_breached(st, st->waking_ns))
		st->waker_stack_seq = send_waker_stack(ctx, p, cur, st->waking_ns);
	return 0;
}

/* A wakeup record's flags for its source (enum ht_wake_source). */
static __always_inline __u8 wake_flags(__u32 source)
{
	if (source == HT_WAKE_IRQ || source == HT_WAKE_SOFTIRQ)
		return HT_FRF_FROM_IRQ;
	return source == HT_WAKE_TIMER ? HT_FRF_FROM_TIMER : 0;
}

static __always_inline void enqueued(struct task_struct *p, struct task_state *st, __u8 kind)
{
	__u64 now = enqueue_now(p);
	__u8 flags = HT_FRF_TARGET | wake_flags(st->wake_source);
	__u32 cpu = task_cpu(p);

	/* A task woken while still queued keeps its older start. */
	if (!st->runnable_since_ns)
		st->runnable_since_ns = now;
	st->wake_cpu = cpu;
	st->wake_ns = now;
	st->sleep_unwoken = 0;
	st->wakeup_untraced = 0;
	/* A new task has no sched_waking: its waking_ns is another wakeup's. */
	fr_write_any(!is_current(p), now, kind, flags, cpu, p->pid, st->waker_tid,
		     with_prio(wake_arg(st->wake_source, st->waker_cpu, st->softirq_vec), p) |
			     (kind == HT_FR_WAKEUP ? wake_delay(now, st->waking_ns) : 0));
	st->waking_ns = 0;
}

/*
 * P, no target, is enqueued: its wakeup goes in the flight recorder too, so
 * a dump has the thread states of the tasks around a breach (the task that
 * held the CPU, the waker, the waker's waker). Its waker: the note its
 * sched_waking left, or current for a new task.
 */
static __always_inline void other_enqueued(struct task_struct *p, __u8 kind)
{
	__u32 slot = (__u32)p->pid & (WAKE_NOTES - 1);
	struct wake_note *note;
	__u64 now = enqueue_now(p);
	__u32 waker = 0;
	__u64 arg = HT_WAKE_NONE;

	if (kind == HT_FR_WAKEUP_NEW) {
		waker = (__u32)bpf_get_current_pid_tgid();
		arg = wake_arg(HT_WAKE_TASK, bpf_get_smp_processor_id(), 0);
	} else {
		note = bpf_map_lookup_elem(&wake_notes, &slot);
		if (note && note->tid == (__u32)p->pid) {
			waker = note->waker_tid;
			arg = note->source | wake_delay(now, note->waking_ns);
			note->tid = 0;
		}
	}
	fr_write_any(!is_current(p), now, kind, wake_flags(arg & 0xff), task_cpu(p), p->pid,
		     waker, with_prio(arg, p));
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct *p)
{
	struct task_state *st;

	note_wake_clock(p);
	if (!is_target(p)) {
		other_enqueued(p, HT_FR_WAKEUP);
		return 0;
	}
	if (test_untraced_wakeup_every && ++test_target_wakeups % test_untraced_wakeup_every == 0)
		return 0;
	st = state_of(p);
	if (st)
		enqueued(p, st, HT_FR_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_state *st;

	note_wake_clock(p);
	if (!is_target(p)) {
		other_enqueued(p, HT_FR_WAKEUP_NEW);
		return 0;
	}
	st = state_of(p);
	if (!st)
		return 0;
	st->wake_source = HT_WAKE_TASK;
	st->softirq_vec = 0;
	st->waker_tid = cur->pid;
	st->waker_tgid = cur->tgid;
	st->waker_cpu = bpf_get_smp_processor_id();
	st->joined = 0;
	copy_comm(st->waker_comm, cur);
	enqueued(p, st, HT_FR_WAKEUP_NEW);
	return 0;
}

/* P moves while queued (see preempt_note): its wait began when its state says. */
static __always_inline void note_migration(struct task_struct *p)
{
	__u32 slot = (__u32)p->pid & (PREEMPT_NOTES - 1);
	struct preempt_note *note;
	struct task_state *st;

	st = state_get(p, false);
	if (!st || !st->runnable_since_ns)
		return;
	note = bpf_map_lookup_elem(&preempt_notes, &slot);
	if (!note)
		return;
	note->tid = p->pid;
	note->runs = switch_ins_of(p);
	note->clock = NOTE_MIGRATED;
	note->now = st->runnable_since_ns;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(handle_sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	if (!is_target(p))
		return 0;
	fr_write(bpf_ktime_get_ns(), HT_FR_MIGRATE, HT_FRF_TARGET, dest_cpu, p->pid, 0,
		 task_cpu(p));
	/* A sleeping task moves as it is woken: its wait begins after. */
	if (p->on_rq == TASK_ON_RQ_MIGRATING)
		note_migration(p);
	return 0;
}

static __always_inline void comm_update(struct task_struct *p, const char *comm, __u32 exited)
{
	struct ht_comm_entry e = {};
	__u32 pid = p->pid;

	bpf_probe_read_kernel_str(e.comm, sizeof(e.comm), comm);
	e.tgid = p->tgid;
	e.exited = exited;
	e.exit_ns = exited ? bpf_ktime_get_ns() : 0;
	if (bpf_map_update_elem(&comms, &pid, &e, BPF_ANY))
		count(HT_CNT_COMM_UPDATE_FAILS);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	comm_update(child, child->comm, 0);
	targets_fork(parent, child);
	if (is_target(child))
		fr_write(bpf_ktime_get_ns(), HT_FR_FORK, HT_FRF_TARGET, 0, parent->pid,
			 child->pid, child->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_sched_process_exec, struct task_struct *p, pid_t old_pid)
{
	comm_update(p, p->comm, 0);
	targets_exec(p);
	if (is_target(p))
		fr_write(bpf_ktime_get_ns(), HT_FR_EXEC, HT_FRF_TARGET, 0, p->pid, old_pid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_sched_process_exit, struct task_struct *p)
{
	comm_update(p, p->comm, 1);
	if (is_target(p))
		fr_write(bpf_ktime_get_ns(), HT_FR_EXIT, HT_FRF_TARGET, 0, p->pid, 0,
			 p->exit_code);
	return 0;
}

/* Attached with --cgroup only: the kernel formats the cgroup's path for it, under a lock. */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(handle_cgroup_attach_task, struct cgroup *dst, const char *path,
	     struct task_struct *task, bool threadgroup)
{
	targets_cgroup_moved(task);
	return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(handle_cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	targets_cgroup_removed(cgrp);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(handle_task_rename, struct task_struct *task, const char *comm)
{
	comm_update(task, comm, 0);
	return 0;
}

static __always_inline int context_mark(int kind, bool entry)
{
	__u32 zero = 0;
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);

	if (!c || kind < 0 || kind >= CTX_KINDS)
		return 0;
	c->seq++;
	if (entry) {
		c->entry[kind] = c->seq;
		c->owner[kind] = (__u32)bpf_get_current_pid_tgid();
	} else {
		c->exit[kind] = c->seq;
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(handle_irq_entry)
{
	return context_mark(CTX_HARDIRQ, true);
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(handle_irq_exit)
{
	return context_mark(CTX_HARDIRQ, false);
}

/*
 * Two stores more than the other marks: softirq_entry fires thousands of
 * times a second. CTX (the tracepoint's arguments, in bpf_trace_run1's
 * frame) lies on the stack the softirq runs on, whereas the program's own
 * stack may be a private one (6.13+).
 */
SEC("tp_btf/softirq_entry")
int BPF_PROG(handle_softirq_entry, unsigned int vec_nr)
{
	__u32 zero = 0;
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);

	if (!c)
		return 0;
	c->seq++;
	c->entry[CTX_SOFTIRQ] = c->seq;
	c->owner[CTX_SOFTIRQ] = (__u32)bpf_get_current_pid_tgid();
	c->softirq_vec = vec_nr;
	c->softirq_sp = (__u64)ctx;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(handle_softirq_exit)
{
	return context_mark(CTX_SOFTIRQ, false);
}

/* Which kind a callback of HRTIMER, about to run, runs as: soft (a softirq; a task on PREEMPT_RT) or hard. */
static __always_inline int hrtimer_kind(struct hrtimer *hrtimer)
{
	if (bpf_core_field_exists(hrtimer->is_soft) && hrtimer->is_soft)
		return CTX_HRTIMER_SOFT;
	return CTX_HRTIMER_HARD;
}

/* A timer callback of KIND begins. */
static __always_inline int timer_entry(int kind)
{
	__u32 zero = 0, cur = (__u32)bpf_get_current_pid_tgid();
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);

	if (!c || test_miss_timer_entries)
		return 0;
	if (kind >= 0 && kind < CTX_KINDS)
		c->in_softirq[kind] = context_active(c, CTX_SOFTIRQ, cur);
	return context_mark(kind, true);
}

/*
 * For tests: miss the exit of a callback of KIND, as PREEMPT_RT's preempted
 * programs make some miss; those that did not enter inside a softirq (the
 * ones timer_active() can tell are over).
 */
static __always_inline bool test_miss_exit(struct cpu_context *c, int kind)
{
	return test_miss_timer_exits && kind >= 0 && kind < CTX_KINDS && !c->in_softirq[kind];
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(handle_hrtimer_entry, struct hrtimer *hrtimer)
{
	return timer_entry(hrtimer_kind(hrtimer));
}

/*
 * The exit closes the innermost callback open: a hard one may run inside a
 * soft one, never the reverse. (The hrtimer itself may be gone by now: a
 * sleeper's, on the stack of a task its callback woke, that ran on.)
 */
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(handle_hrtimer_exit)
{
	__u32 zero = 0;
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);
	bool hard, soft;
	int kind;

	if (!c)
		return 0;
	hard = c->entry[CTX_HRTIMER_HARD] > c->exit[CTX_HRTIMER_HARD];
	soft = c->entry[CTX_HRTIMER_SOFT] > c->exit[CTX_HRTIMER_SOFT];
	kind = soft && (!hard || c->entry[CTX_HRTIMER_SOFT] > c->entry[CTX_HRTIMER_HARD])
		       ? CTX_HRTIMER_SOFT
		       : CTX_HRTIMER_HARD;
	if (test_miss_exit(c, kind))
		return 0;
	return context_mark(kind, false);
}

SEC("tp_btf/timer_expire_entry")
int BPF_PROG(handle_timer_entry)
{
	return timer_entry(CTX_TIMER);
}

SEC("tp_btf/timer_expire_exit")
int BPF_PROG(handle_timer_exit)
{
	__u32 zero = 0;
	struct cpu_context *c = bpf_map_lookup_elem(&cpu_contexts, &zero);

	if (!c || test_miss_exit(c, CTX_TIMER))
		return 0;
	return context_mark(CTX_TIMER, false);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long nr)
{
	struct task_struct *cur;
	struct task_state *st;
	__u64 now, held;

	__u64 id = bpf_get_current_pid_tgid();

	if (!tgid_is_target(id >> 32, (__u32)id))
		return 0;
	cur = bpf_get_current_task_btf();
	st = state_of(cur);
	if (!st)
		return 0;
	now = bpf_ktime_get_ns();
	/* Held in a syscall whose exit was never seen: sent alone, not given to this one. */
	if (st->held.start_ns && !breaches_stopped && (held = take_held(&st->held)))
		emit_syscall_end(cur, st, false, held, now, 0, 0, 0);
	st->syscall_since_ns = now;
	st->syscall_nr = nr;
	st->syscall_kstack_bytes = 0;
	/* What wakes it from here on is what ends this syscall's waits; it has not slept yet. */
	st->off_cpu_state = TASK_RUNNING;
	forget_waker(st);
	fr_write(now, HT_FR_SYS_ENTER, HT_FRF_TARGET, nr, cur->pid, 0, regs->di);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *cur;
	struct task_state *st;
	__u64 now, delta, held;
	bool in_storage, breach;
	__u32 flags = 0;

	__u64 id = bpf_get_current_pid_tgid();

	if (!tgid_is_target(id >> 32, (__u32)id))
		return 0;
	cur = bpf_get_current_task_btf();
	st = state_find(cur, false, &in_storage);
	if (!st || !st->syscall_since_ns)
		return 0;
	now = bpf_ktime_get_ns();
	if (st->off_cpu_since_ns) {
		untraced_switch_in_at_exit(cur, st, now);
		flags = HT_BRF_SWITCH_IN_UNTRACED;
	}
	delta = now - st->syscall_since_ns;
	count_judged(in_storage);
	fr_write(now, HT_FR_SYS_EXIT, HT_FRF_TARGET, st->syscall_nr, cur->pid, 0, ret);
	hist_add(HT_BREACH_SYSCALL, id >> 32, delta);
	breach = delta >= syscall_thresh_ns && syscall_watched(st->syscall_nr);
	if (breach && syscall_ignored(st->syscall_nr)) {
		count_filtered();
		breach = false;
	}
	/* After the end an interval held stays for the flush (flush_held). */
	if (breaches_stopped || (!breach && !st->held.start_ns)) {
		st->syscall_since_ns = 0;
		return 0;
	}
	held = take_held(&st->held);
	if (!breach && !held) {
		st->syscall_since_ns = 0;
		return 0;
	}
	if (st->syscall_nr == NR_IO_URING_ENTER && io_uring_waits(regs->dx, regs->r10))
		flags |= HT_BRF_URING_GETEVENTS;
	/* The registers saved at its entry: its first argument is still there. */
	emit_syscall_end(cur, st, breach, held, now, ret, flags | HT_BRF_SYSCALL_FD,
			 (__u32)regs->di);
	return 0;
}

/*
 * The end of the session: breaches_stopped is set, so no other program
 * sends or takes what is held. Off-CPU intervals held in syscalls that have
 * not returned are sent as off-CPU breaches. Run by user space
 * (BPF_PROG_TEST_RUN), never attached. Threads whose state lives in task
 * storage (their slot was taken) cannot be walked here.
 */
static long flush_slot(__u32 index, void *ctx)
{
	struct thread_slot *slot = bpf_map_lookup_elem(&thread_slots, &index);
	struct ht_comm_entry *comm;
	struct ht_breach *b;
	__u32 tid;
	__u64 start;

	if (!slot || !slot->owner || !(start = take_held(&slot->st.held)))
		return 0;
	tid = slot->owner >> 32;
	count(HT_CNT_BREACHES);
	b = bpf_ringbuf_reserve(&breaches, sizeof(*b), 0);
	if (!b) {
		count(HT_CNT_RB_DROPS);
		return 0;
	}
	__builtin_memset(b, 0, sizeof(*b));
	b->kind = HT_BREACH_OFF_CPU;
	b->start_ns = start;
	b->end_ns = slot->st.held.end_ns;
	b->tid = tid;
	b->tgid = slot->st.held.tgid;
	b->ns_tid = slot->st.held.ns_tid;
	b->ns_tgid = slot->st.held.ns_tgid;
	b->cpu = slot->st.held.cpu;
	b->syscall_nr = slot->st.syscall_nr;
	fill_held(b, &slot->st.held, start);
	block_stack_to_breach(b, slot->st.held.block_stack_seq, true);
	comm = bpf_map_lookup_elem(&comms, &tid);
	if (comm)
		__builtin_memcpy(b->comm, comm->comm, sizeof(b->comm));
	bpf_ringbuf_submit(b, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("raw_tp")
int flush_held(void *ctx)
{
	bpf_loop(thread_slot_mask + 1, flush_slot, NULL, 0);
	return 0;
}
