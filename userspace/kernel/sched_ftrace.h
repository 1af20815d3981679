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
 *    (the target's), each in the bundle of the CPU its waker ran on.
 */
#ifndef HT_SCHED_FTRACE_H
#define HT_SCHED_FTRACE_H

#include <stdint.h>
#include "kernel/recorder.h"
#include "kernel/sched_index.h"
#include "trace/pb.h"

struct ht_comm_cache;

/*
 * Field numbers, checked against Perfetto's protos/perfetto: trace/trace_packet.proto,
 * common/system_info.proto, trace/ps/process_tree.proto,
 * trace/ftrace/ftrace_event_bundle.proto (tests/perfetto/trace.proto has them too).
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
};

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

struct ht_sched_ftrace_window {
	uint64_t t0, t1;		  /* the window asked for (CLOCK_MONOTONIC) */
	const struct ht_fr_window *w;	  /* what the recorder gave for it */
	const struct ht_sched_index *idx; /* its switches per CPU */
	struct ht_comm_cache *comms;	  /* comms and tgids of the tasks in it */
	/* BOOTTIME - MONOTONIC, from the clock snapshot the dump writes first. */
	int64_t boottime_offset_ns;
	const char *kernel_release; /* the traced machine's uname release */
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
