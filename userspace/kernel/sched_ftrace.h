/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A flight-recorder window as Perfetto's native scheduling data: the
 * packets its ftrace importer reads (src/trace_processor/importers/ftrace/
 * in the Perfetto sources), so that the file has a `sched` and a
 * `thread_state` table and the UI its "CPU Scheduling" tracks. They are
 * whole TracePackets (Trace field 1), written after the TrackEvent part of
 * a dump, whose ClockSnapshot they need:
 *  - SystemInfo.utsname (sysname "Linux", the release): Perfetto decodes
 *    prev_state by kernel version and falls back to 4.4's layout;
 *  - a ProcessTree of the window's threads with their processes (tgids);
 *  - per CPU one FtraceEventBundle (with `cpu`) in the compact_sched
 *    encoding: its context switches, and the wakeups the recorder holds
 *    (every task's), each in the bundle of the CPU its waker ran on;
 *  - in the same bundles, full FtraceEvents: a task_newtask for each fork
 *    the recorder holds (the targets'), on the CPU that recorded it, so
 *    that Perfetto starts the child in its process with its name; and a
 *    sched_blocked_reason for each sleep the window's caller names the
 *    blocked function of (the kernel has no such tracepoint: it comes from
 *    the stack the breached thread slept on), on the CPU of its switch-out,
 *    just after it. Its caller is an iid of InternedData.kernel_symbols,
 *    which a packet on the bundles' own sequence carries first.
 */
#ifndef HT_SCHED_FTRACE_H
#define HT_SCHED_FTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include "kernel/recorder.h"
#include "kernel/sched_index.h"
#include "trace/pb.h"

struct ht_comm_cache;

/*
 * Field numbers, checked against Perfetto's protos/perfetto: trace/trace_packet.proto,
 * common/system_info.proto, trace/ps/process_tree.proto,
 * trace/ftrace/ftrace_event_bundle.proto, ftrace_event.proto, sched.proto, task.proto,
 * interned_data/interned_data.proto (tests/perfetto/trace.proto has some too).
 */
enum ht_sched_ftrace_field {
	HT_FTF_PACKET_FTRACE_EVENTS = 1,
	HT_FTF_PACKET_PROCESS_TREE = 2,
	HT_FTF_PACKET_SYSTEM_INFO = 45,

	HT_FTF_SYSTEM_INFO_UTSNAME = 1,
	HT_FTF_UTSNAME_SYSNAME = 1,
	HT_FTF_UTSNAME_RELEASE = 3,

	HT_FTF_PROCESS_TREE_THREADS = 2,
	HT_FTF_THREAD_TID = 1,
	HT_FTF_THREAD_TGID = 3,

	HT_FTF_BUNDLE_CPU = 1,
	HT_FTF_BUNDLE_EVENT = 2,
	HT_FTF_BUNDLE_COMPACT_SCHED = 4,
	HT_FTF_COMPACT_SWITCH_TIMESTAMP = 1,
	HT_FTF_COMPACT_SWITCH_PREV_STATE = 2,
	HT_FTF_COMPACT_SWITCH_NEXT_PID = 3,
	HT_FTF_COMPACT_SWITCH_NEXT_PRIO = 4,
	HT_FTF_COMPACT_INTERN_TABLE = 5,
	HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX = 6,
	HT_FTF_COMPACT_WAKING_TIMESTAMP = 7,
	HT_FTF_COMPACT_WAKING_PID = 8,
	HT_FTF_COMPACT_WAKING_TARGET_CPU = 9,
	HT_FTF_COMPACT_WAKING_PRIO = 10,
	HT_FTF_COMPACT_WAKING_COMM_INDEX = 11,
	HT_FTF_COMPACT_WAKING_COMMON_FLAGS = 12,

	/* FtraceEvent: the time, the task that ran it, then one event's own message. */
	HT_FTF_EVENT_TIMESTAMP = 1,
	HT_FTF_EVENT_PID = 2,
	HT_FTF_EVENT_SCHED_BLOCKED_REASON = 18,
	HT_FTF_EVENT_TASK_NEWTASK = 235,
	HT_FTF_BLOCKED_REASON_PID = 1,
	HT_FTF_BLOCKED_REASON_CALLER = 2, /* an iid of InternedData.kernel_symbols */
	HT_FTF_BLOCKED_REASON_IO_WAIT = 3,
	HT_FTF_NEWTASK_PID = 1,
	HT_FTF_NEWTASK_COMM = 2,
	HT_FTF_NEWTASK_CLONE_FLAGS = 3,

	HT_FTF_INTERNED_KERNEL_SYMBOLS = 26, /* InternedString {iid = 1, str = 2} */
};

/* The kernel's clone flag that makes the child a thread of its parent's process. */
#define HT_CLONE_THREAD 0x00010000

/*
 * The packet sequence of the bundles (trusted_packet_sequence_id), where
 * the interned kernel symbols live; the TrackEvent writer uses 2 and 3.
 */
#define HT_FTRACE_SEQUENCE_ID 4

/* The kernel's trace_entry flags that tell Perfetto a waking came from interrupt context. */
#define HT_FTRACE_FLAG_HARDIRQ 0x08
#define HT_FTRACE_FLAG_SOFTIRQ 0x10

/*
 * The kernel's p->prio of a SCHED_OTHER task at nice 0, and of the idle
 * task: the prio of a task the records do not say (the one running when
 * the window began, known only from its switch-out). The records carry
 * the prio of every other: a switch's next, a wakeup's wakee.
 */
#define HT_FTRACE_PRIO 120

/* The function a sleep blocked in (kernel/blocked_function.h). */
struct ht_blocked_reason {
	uint32_t tid;
	uint64_t switch_out_ns; /* when it left the CPU to sleep (CLOCK_MONOTONIC) */
	const char *function;
	bool io_wait;
};

struct ht_sched_ftrace_window {
	uint64_t t0, t1;		  /* the window asked for (CLOCK_MONOTONIC) */
	const struct ht_fr_window *w;	  /* what the recorder gave for it */
	const struct ht_sched_index *idx; /* its switches per CPU */
	struct ht_comm_cache *comms;	  /* comms and tgids of the tasks in it */
	/* BOOTTIME - MONOTONIC, from the clock snapshot the dump writes first. */
	int64_t boottime_offset_ns;
	const char *kernel_release;		 /* the traced machine's uname release */
	const struct ht_blocked_reason *blocked; /* sleeps whose blocked function is known */
	size_t nblocked;
	/*
	 * The tids the dump's TrackEvent part gives a thread track, ascending:
	 * Perfetto makes each one's thread from that track's descriptor before
	 * any ftrace event, and a task_newtask would start a second one.
	 */
	const uint32_t *described;
	size_t ndescribed;
};

/*
 * sched_switch's prev_state as the kernel's __trace_sched_switch_state()
 * reports it from the raw task state the recorder keeps (bits such as
 * TASK_FREEZABLE, which Perfetto counts as invalid, drop out).
 */
int64_t ht_ftrace_prev_state(uint32_t raw_state, int preempted);

/* Append the window's packets to OUT. Returns 0, or -1 with ht_last_error(). */
int ht_sched_ftrace_write(const struct ht_sched_ftrace_window *sw, struct pb_buf *out);

#endif /* HT_SCHED_FTRACE_H */
