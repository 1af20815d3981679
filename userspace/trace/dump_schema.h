/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a dump holds, by name: the contract between the code that builds a
 * dump's timeline (kernel_timeline.c, the on-CPU sources) and the code that
 * reads it back (report.c). Perfetto shows these names as they are.
 */
#ifndef HT_DUMP_SCHEMA_H
#define HT_DUMP_SCHEMA_H

/* The breach kinds: their names, and the slice each one's interval is (enum ht_breach_interval). */
#include "base/breach_kinds.h"

/*
 * Tracks. Thread tracks are named "comm"; their kernel tracks (bound to the
 * thread, under it in Perfetto) "comm syscalls"; earlier dumps named them
 * "comm (kernel)", and had CPU tracks "CPU N" of slices "comm[pid]". The
 * report rebuilds those (and the kernel tracks' run-queue and off-CPU
 * slices) in its model of a dump from the native scheduling data.
 */
#define HT_TRACK_HYBTRACE     "hybtrace"   /* the breach's instant, the window, metadata */
#define HT_TRACK_CPU_FMT      "CPU %u"
#define HT_TRACK_KERNEL_SUFFIX " syscalls"

/* Categories. */
#define HT_CAT_SCHED	"sched"	  /* off-CPU, run-queue and CPU slices, wakeups */
#define HT_CAT_SYSCALL	"syscall" /* syscall slices, named by the syscall */
#define HT_CAT_BREACH	"breach"  /* the breach slice and instant */
#define HT_CAT_WINDOW	"window"  /* window bounds, clipping */
#define HT_CAT_USER	"user"	  /* user-space slices (on-CPU sources) */
#define HT_CAT_CHAIN	"chain"	  /* the stretches of the breach's wait chain */

/*
 * On a thread's kernel track: its syscalls (category HT_CAT_SYSCALL, named
 * by the syscall) and the breach's slice (HT_EV_BREACH). Earlier dumps had
 * these three there too; the report's model of a dump has them, rebuilt.
 */
#define HT_EV_OFF_CPU	 "off-cpu"   /* args: state, syscall; callstack: kernel stack */
#define HT_EV_RUNQUEUE	 "runqueue"  /* args: cause, cpu, ran_instead.N.*, flow in from waker */
#define HT_EV_WAKES	 "wakes"     /* instant where a wakeup was raised: args wakee_tid, source */
/*
 * On a thread's own track: user-space slices (named by function), its
 * lifecycle ("thread created", "exec", "exit"), and these instants.
 */
#define HT_EV_STACK_BEFORE "user stack before" /* the breached thread's last sample before it */
#define HT_EV_STACK_AFTER  "user stack after"  /* its first sample after it */
/* --block-stacks: its user stack as it went to sleep, at the switch-out (callstack: the frames) */
#define HT_EV_BLOCK_STACK  "blocked here"
#define HT_EV_MARK	   "mark"	       /* a user mark, unless it has a name: args id, a, b */
/*
 * The breach: a slice over its interval on its thread's kernel track and an
 * instant at its end on the hybtrace track (earlier dumps: both there). Both
 * carry the breach's arguments (kind ... ran_instead.N, woken_by) and kernel stack.
 */
#define HT_EV_BREACH	 "breach"
/*
 * The breach's wait chain (kernel/wait_chain.h): one slice per stretch,
 * category HT_CAT_CHAIN, under the breach's slice on its thread's kernel
 * track, named "comm stretch" ("chain_b running"); a blocked stretch whose
 * waker was followed holds that waker's. Args: depth, tid, comm, stretch,
 * cpu; runnable: behind_tid, behind_comm, behind_ns; blocked: state,
 * syscall, woken_by, waker_tid, waker_comm, chain_stop; exited,
 * began_before_window. The breach's own events say chain_depth (asked)
 * and chain_cut_by_window.
 */
/*
 * The waker's stacks at the wakeup that ended the breach's wait (taken
 * only for such wakeups): an instant on the waker's thread track,
 * category HT_CAT_CHAIN, args wakee_tid, wakee_comm, waker_tid,
 * waker_comm; callstack: its user
 * frames, then its kernel frames (innermost last).
 */
#define HT_EV_WOKE	     "woke"
#define HT_ARG_WAKEE_COMM    "wakee_comm"
#define HT_ARG_DEPTH	     "depth"
#define HT_ARG_STRETCH	     "stretch"	   /* "running", "runnable", "blocked", "unknown" */
#define HT_ARG_BEHIND_TID    "behind_tid"  /* who held its CPU the longest */
#define HT_ARG_BEHIND_COMM   "behind_comm"
#define HT_ARG_BEHIND_NS     "behind_ns"
#define HT_ARG_CHAIN_STOP    "chain_stop"  /* why its waker was not followed: "timer", "depth"... */
#define HT_ARG_EXITED	     "exited"	   /* 1: the task exited within the window */
#define HT_ARG_CHAIN_DEPTH   "chain_depth" /* breach: the levels of wakers asked for */
#define HT_ARG_CHAIN_CUT     "chain_cut_by_window" /* breach: 1 when its chain reached the edge */
/* On the hybtrace track. */
#define HT_EV_WINDOW	 "window"    /* slice over the dump window */
#define HT_EV_CLIPPED	 "clipped"   /* slice over the part of the window the rings lost */
#define HT_EV_TRIGGER	 "trigger"   /* a code trigger's hit, here and on its thread's track */

/* Argument names. */
/* A breach kind's name (ht_breach_kinds[].name), "manual", "exit". */
#define HT_ARG_KIND	     "kind"
#define HT_ARG_KINDS	     "kinds"	      /* every kind the wait breached: "off-cpu+syscall" */
/* A syscall breach that slept past the off-CPU threshold too: that interval and threshold. */
#define HT_ARG_OFF_CPU_START_NS	    "off_cpu_start_ns"
#define HT_ARG_OFF_CPU_NS	    "off_cpu_duration_ns"
#define HT_ARG_OFF_CPU_THRESHOLD_NS "off_cpu_threshold_ns"
#define HT_ARG_DURATION_NS   "duration_ns"
#define HT_ARG_THRESHOLD_NS  "threshold_ns"
#define HT_ARG_TID	     "tid"
#define HT_ARG_PID	     "pid"
#define HT_ARG_COMM	     "comm"
/* breach: a thread in a container's pid namespace, its pids there (tid, pid: the initial one's) */
#define HT_ARG_NS_PID	     "ns_pid"
#define HT_ARG_NS_TID	     "ns_tid"
#define HT_ARG_CPU	     "cpu"
#define HT_ARG_WAIT_FOR_WORK "wait_for_work"  /* breach: 1 when a thread parked for new work */
/* breach: what the kernel did not trace of it, "wakeup,switch-in" (ht_breach_not_traced()) */
#define HT_ARG_NOT_TRACED    "not_traced"
#define HT_ARG_STATE	     "state"	      /* "S", "D", "R+" (preempted) ..., or: */
#define HT_STATE_UNKNOWN     "unknown"	      /* asleep since before the rings' oldest record */
#define HT_ARG_SYSCALL	     "syscall"
#define HT_ARG_SYSCALL_NR    "nr"
#define HT_ARG_SYSCALL_RET   "ret"
#define HT_ARG_SYSCALL_ARG0  "arg0"
#define HT_ARG_CAUSE	     "cause"	      /* "woken", "preempted", "new task" */
#define HT_ARG_WAKE_SOURCE   "woken_by"	      /* "task", "irq", "timer", "softirq" */
#define HT_ARG_SOFTIRQ	     "softirq"	      /* woken_by softirq: "net_rx", "timer"... */
#define HT_ARG_WAKER_TID     "waker_tid"      /* a task; a softirq's, the task it ran in */
#define HT_ARG_WAKER_COMM    "waker_comm"
#define HT_ARG_WAKEE_TID     "wakee_tid"
#define HT_ARG_RAN_INSTEAD   "ran_instead"    /* ran_instead.N = "comm[pid]", .N_ns, .N_cpu */
#define HT_ARG_OTHER_NS	     "ran_instead_other_ns"
#define HT_ARG_UNKNOWN_NS    "ran_instead_unknown_ns"
#define HT_ARG_IDLE_NS	     "ran_instead_idle_ns" /* its CPU idle: no culprit */
#define HT_ARG_RUNNABLE_NS   "runnable_ns"    /* breach: its time in run queues, all of the above */
#define HT_ARG_START_NS	     "start_ns"
#define HT_ARG_END_NS	     "end_ns"
#define HT_ARG_BEFORE_WINDOW "began_before_window" /* 1: the slice's real start is earlier */
#define HT_ARG_SAMPLES	     "samples"	      /* user slices: how many samples it spans */
#define HT_ARG_CALLGRAPH     "callgraph"      /* HT_EV_BLOCK_STACK: "fp" or "dwarf" */
#define HT_ARG_TRIGGER	     "trigger"	      /* the spec as given */
#define HT_ARG_FUNCTION	     "function"	      /* where the trigger stopped */
#define HT_ARG_IP	     "ip"
#define HT_ARG_RDI	     "rdi"	      /* the first three integer arguments */
#define HT_ARG_RSI	     "rsi"
#define HT_ARG_RDX	     "rdx"
#define HT_ARG_MARK_ID	     "id"
#define HT_ARG_MARK_A	     "a"
#define HT_ARG_MARK_B	     "b"

/* Metadata keys (tl_meta_*). Losses are counts; "0" when none. */
#define HT_META_VERSION	       "hybtrace_version"
#define HT_META_KERNEL	       "kernel"
#define HT_META_CPU_MODEL      "cpu_model"
#define HT_META_CMDLINE	       "cmdline"
#define HT_META_TARGET_PID     "target_pid"
#define HT_META_TARGET_COMM    "target_comm"
/* The process a breach's or a trigger hit's dump is of (none in manual and exit dumps). */
#define HT_META_PROCESS_PID    "process_pid"
#define HT_META_PROCESS_COMM   "process_comm"
/*
 * The breach's kinds' names (ht_breach_kinds[].name: rq-delay, off-cpu, syscall),
 * joined by '+' for one wait of several (off-cpu+syscall); manual, exit.
 */
#define HT_META_KIND	       "dump_kind"
#define HT_META_WALL_CLOCK     "wall_clock"	   /* ISO 8601 with ms and zone, breach end */
#define HT_META_TRIGGER	       "trigger"	/* trigger dumps: the spec */
#define HT_META_LOSS_MARKS     "loss.marks"	/* torn, overwritten or unreadable mark records */
/* Processes with mark registries skipped: gone before their marks were read, or unreadable. */
#define HT_META_LOSS_MARK_PROCESSES "loss.mark_processes"
#define HT_META_MARK_PROCESSES "marks.processes" /* processes whose mark registries were read */
#define HT_META_MARKS_READ_NS  "marks.read_ns"	/* the freeze's time finding and reading marks */
#define HT_META_BREACH_TID     "breach_tid"
#define HT_META_BREACH_COMM    "breach_comm"
#define HT_META_BREACH_START   "breach_start_ns"
#define HT_META_BREACH_END     "breach_end_ns"
#define HT_META_THRESHOLD      "threshold_ns"
#define HT_META_WAIT_FOR_WORK  "breach_wait_for_work" /* 1: waiting for work (wait_for_work.h) */
#define HT_META_WINDOW_START   "window_start_ns"
#define HT_META_WINDOW_END     "window_end_ns"
#define HT_META_CLIPPED_TO     "window_clipped_to_ns" /* set only when clipped */
#define HT_META_RECORDING_START "recording_start_ns"	/* when the monitor attached */
#define HT_META_LOSS_FR_SKIP   "loss.flight_recorder_skipped"
#define HT_META_LOSS_RB	       "loss.ring_buffer_drops"
#define HT_META_LOSS_STORAGE   "loss.task_storage_failures"
#define HT_META_LOSS_COMM      "loss.comm_map_failures"
#define HT_META_LOSS_RECURSION "loss.recursion_misses"
#define HT_META_LOSS_UNSEEN_SWITCH_IN "loss.unseen_switch_ins" /* intervals left unjudged */
/* --trigger: threads left without breakpoints for want of descriptors (RLIMIT_NOFILE). */
#define HT_META_LOSS_TRIGGER_THREADS "loss.trigger_threads_left_out"
#define HT_META_BREACHES_MISSED "breaches_not_dumped"	/* since the previous dump */
#define HT_META_DEFERRED       "dump_deferred"	/* 1: it waited for another dump */
#define HT_META_SOURCE	       "on_cpu_source"	/* sample, pt, pt-sideband-only, none */
/* The test mode HYBTRACE_TEST_PT_SIDEBAND_ONLY: no PT event, AUX area or PT data. */
#define HT_SOURCE_PT_SIDEBAND_ONLY "pt-sideband-only"
#define HT_META_SAMPLE_FREQ    "sample_freq_hz"
#define HT_META_CALLGRAPH      "callgraph"	/* fp, dwarf */
#define HT_META_SAMPLES	       "samples_in_window"
#define HT_META_SAMPLES_FOREIGN "samples_of_other_processes" /* in the rings: always 0 */
#define HT_META_FREEZE_LATE    "freeze_late_ns"	/* on-CPU sources frozen this long after the window's end */
#define HT_META_LOSS_SAMPLES   "loss.samples_lost"	/* PERF_RECORD_LOST */
/* Sampling records that did not parse; one whose header is damaged also ends its ring's walk. */
#define HT_META_LOSS_SAMPLES_BAD "loss.samples_unreadable"
/* Samples whose header the kernel overwrote (Linux 6.1, in a target's exit), read from fields. */
#define HT_META_SAMPLES_REBUILT "samples_header_rebuilt"
/* Slices moved to nest on their track: their sources' clocks disagreed (see tl_untangle). */
#define HT_META_UNTANGLED      "timeline.slices_moved"
#define HT_META_LOSS_THROTTLE  "loss.sample_throttles" /* PERF_RECORD_THROTTLE */
/* Intel PT: the trigger-to-freeze delays, what was decoded, and what was lost. */
#define HT_META_PT_CONFIG	"pt.config"	    /* as perf writes it: tsc,mtc,mtc_period=3,... */
#define HT_META_PT_FREEZE_FIRST "pt.freeze_first_ns" /* trigger to the first ring disabled */
#define HT_META_PT_FREEZE_LAST	"pt.freeze_last_ns"  /* ... and to the last */
#define HT_META_PT_BYTES	"pt.bytes"
#define HT_META_PT_INSNS	"pt.instructions"
#define HT_META_PT_THREADS	"pt.threads"
#define HT_META_PT_PROCESSES	"pt.processes"	    /* processes whose own code the capture holds */
#define HT_META_PT_FROM		"pt.trace_from_ns"  /* the oldest time decoded */
#define HT_META_LOSS_PT_ERRORS	"loss.pt_decode_errors"
#define HT_META_LOSS_PT_OVF	"loss.pt_overflows"
#define HT_META_LOSS_PT_ITEMS	"loss.pt_items_dropped"
#define HT_META_LOSS_PT_IMAGE	"loss.pt_code_unreadable" /* mappings whose code was not readable */
/* Threads without PT events: they would have passed the descriptor limit. */
#define HT_META_LOSS_PT_LEFT_OUT "loss.pt_threads_left_out"
#define HT_META_DECODED_FROM	"decoded_from"	    /* `hybtrace decode`: the raw capture */

#endif /* HT_DUMP_SCHEMA_H */
