// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <string.h>
#include "kernel/breach_format.h"
#include "kernel/waker_stacks.h"
#include "base/breach_kinds.h"
#include "base/json.h"
#include "symbols/ksyms.h"
#include "base/syscalls.h"
#include "base/units.h"
#include "kernel/wait_for_work.h"

/* After the syscall's name: what a wait for work is, said where its syscall is. */
#define WAIT_FOR_WORK_TEXT " (waiting for work)"

const char *ht_wake_source_name(uint32_t source)
{
	switch (source) {
	case HT_WAKE_TASK:
		return "task";
	case HT_WAKE_IRQ:
		return "irq";
	case HT_WAKE_TIMER:
		return "timer";
	case HT_WAKE_SOFTIRQ:
		return "softirq";
	}
	return "none";
}

const char *ht_softirq_name(uint32_t vec)
{
	/* The kernel's softirq_to_name[], in lower case. */
	static const char *const names[HT_NR_SOFTIRQS] = {
		"hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched",
		"hrtimer", "rcu",
	};

	return vec < HT_NR_SOFTIRQS ? names[vec] : "unknown";
}

static void print_culprits_text(FILE *f, const struct ht_breach_info *bi)
{
	char dur[32];

	if (!bi->have_culprits)
		return;
	if (!bi->culprits.count) {
		fputs(bi->culprits.unknown_ns ? ": what ran instead predates the recording"
					      : ": nothing else ran on its CPU", f);
		return;
	}
	fputs(": ran instead", f);
	for (unsigned int i = 0; i < bi->culprits.count; i++) {
		const struct ht_culprit *c = &bi->culprits.top[i];

		fprintf(f, "%s %s[%u] %s", i ? "," : "", bi->culprit_comm[i], c->pid,
			ht_format_duration(c->ns, dur, sizeof(dur)));
	}
	if (bi->culprits.other_ns)
		fprintf(f, ", others %s", ht_format_duration(bi->culprits.other_ns, dur, sizeof(dur)));
}

/*
 * An off-CPU or syscall breach: its time in run queues after the wakeup that
 * ended its sleep (a syscall's whole time, if it never slept), said when it
 * was preempted then or when that time is a share of the breach worth naming.
 */
static void print_runnable_text(FILE *f, const struct ht_breach_info *bi)
{
	const struct ht_culprits *c = &bi->culprits;
	uint64_t dur_ns = bi->b.end_ns - bi->b.start_ns;
	char dur[32];

	if (!bi->have_culprits || (!c->preemptions && c->runnable_ns * 100 < dur_ns))
		return;
	fprintf(f, "; %s%s", bi->b.wake_source != HT_WAKE_NONE ? "then runnable " : "runnable ",
		ht_format_duration(c->runnable_ns, dur, sizeof(dur)));
	if (c->preemptions == 1)
		fputs(", preempted once", f);
	else if (c->preemptions)
		fprintf(f, ", preempted %u times", c->preemptions);
	print_culprits_text(f, bi);
}

/* Both untraced: the list the dump's argument holds, and its words. */
#define NOT_TRACED_BOTH	      "wakeup,switch-in"
#define NOT_TRACED_BOTH_WORDS "wakeup and switch-in"

const char *ht_breach_not_traced(const struct ht_breach *b)
{
	bool wakeup = b->flags & HT_BRF_WAKEUP_UNTRACED;
	bool switch_in = b->flags & HT_BRF_SWITCH_IN_UNTRACED;

	if (wakeup && switch_in)
		return NOT_TRACED_BOTH;
	return wakeup ? "wakeup" : switch_in ? "switch-in" : NULL;
}

const char *ht_not_traced_words(const char *list)
{
	return list && !strcmp(list, NOT_TRACED_BOTH) ? NOT_TRACED_BOTH_WORDS : list;
}

static void print_waker_text(FILE *f, const struct ht_breach *b, bool first)
{
	const char *sep = first ? ":" : ";";

	switch (b->wake_source) {
	case HT_WAKE_TASK:
		fprintf(f, "%s woken by %u (%.*s)%s", sep, b->waker_tid, HT_COMM_LEN, b->waker_comm,
			b->flags & HT_BRF_JOINED ? " as it exited" : "");
		break;
	case HT_WAKE_SOFTIRQ:
		fprintf(f, "%s woken by softirq (%s)", sep, ht_softirq_name(b->softirq_vec));
		if (b->waker_tid)
			fprintf(f, " in %.*s[%u]", HT_COMM_LEN, b->waker_comm, b->waker_tid);
		break;
	case HT_WAKE_IRQ:
	case HT_WAKE_TIMER:
		fprintf(f, "%s woken by %s", sep, ht_wake_source_name(b->wake_source));
		break;
	default:
		if (b->kind == HT_BREACH_RQ_DELAY)
			fprintf(f, "%s preempted", sep);
	}
}

/* Of a breach that carries an off-CPU interval besides its kind: ", off-cpu 30.1ms in state S". */
static void print_off_cpu_part_text(FILE *f, const struct ht_breach *b)
{
	char dur[32];

	if (b->kind == HT_BREACH_OFF_CPU ||
	    !(ht_breach_kinds_of(b->kinds, b->kind) & HT_KIND_BIT(HT_BREACH_OFF_CPU)))
		return;
	fprintf(f, ", off-cpu %s",
		ht_format_duration(b->off_cpu_end_ns - b->off_cpu_start_ns, dur, sizeof(dur)));
	if (b->off_cpu_waits > 1)
		fprintf(f, " (the longest of %u)", b->off_cpu_waits);
	fprintf(f, " in state %c", ht_task_state_letter(b->state));
}

/*
 * A thread in a pid namespace below the initial one (a container): its own
 * pids there beside, " [ns pid 7]" for a process's first thread, else
 * " [ns tid 8 pid 7]".
 */
static void print_ns_pids_text(FILE *f, const struct ht_breach *b)
{
	if (!b->ns_tid)
		return;
	if (b->tid == b->tgid || !b->ns_tgid)
		fprintf(f, " [ns pid %u]", b->ns_tid);
	else
		fprintf(f, " [ns tid %u pid %u]", b->ns_tid, b->ns_tgid);
}

void ht_breach_print_text(FILE *f, const struct ht_breach_info *bi)
{
	const struct ht_breach *b = &bi->b;
	const char *sc = ht_syscall_name(b->syscall_nr);
	const char *idle = ht_breach_waits_for_work(b) ? WAIT_FOR_WORK_TEXT : "";
	char dur[32], ret[128], kinds[64];

	/* One line even while the dump thread prints too. */
	flockfile(f);
	fprintf(f, "%.6f %s %s tid %u (%.*s)", bi->since_start_s,
		ht_breach_kinds_name(ht_breach_kinds_of(b->kinds, b->kind), kinds, sizeof(kinds)),
		ht_format_duration(b->end_ns - b->start_ns, dur, sizeof(dur)), b->tid, HT_COMM_LEN,
		b->comm);
	if (b->tgid != b->tid)
		fprintf(f, " pid %u (%s)", b->tgid, bi->process_comm[0] ? bi->process_comm : "?");
	print_ns_pids_text(f, b);
	fprintf(f, " cpu %u", b->cpu);
	switch (b->kind) {
	case HT_BREACH_RQ_DELAY:
		print_culprits_text(f, bi);
		print_waker_text(f, b, !bi->have_culprits);
		break;
	case HT_BREACH_OFF_CPU:
		fprintf(f, " state %c", ht_task_state_letter(b->state));
		if (b->syscall_nr >= 0)
			fprintf(f, " in %s%s", sc ? sc : "syscall", idle);
		if (b->off_cpu_waits > 1)
			fprintf(f, " (the longest of %u)", b->off_cpu_waits);
		print_waker_text(f, b, true);
		print_runnable_text(f, bi);
		break;
	case HT_BREACH_SYSCALL:
		ht_syscall_ret_format((int64_t)b->syscall_ret, ret, sizeof(ret));
		if (sc)
			fprintf(f, ": %s%s = %s", sc, idle, ret);
		else
			fprintf(f, ": syscall %d = %s", b->syscall_nr, ret);
		print_off_cpu_part_text(f, b);
		print_waker_text(f, b, false);
		print_runnable_text(f, bi);
		break;
	}
	if (ht_breach_not_traced(b))
		fprintf(f, " (the kernel did not trace its %s)",
			ht_not_traced_words(ht_breach_not_traced(b)));
	if (bi->block_stack)
		ht_block_frames_print_text(f, bi->block_stack);
	else if (bi->block_stack_missing)
		fprintf(f, " (no stack where it blocked: %s)", bi->block_stack_missing);
	fputc('\n', f);
	funlockfile(f);
}

static void print_kstack_json(struct ht_json *j, const struct ht_breach *b,
			      const struct ht_ksyms *ksyms)
{
	int frames = b->kstack_bytes > 0 ? b->kstack_bytes / (int)sizeof(uint64_t) : 0;
	char name[256];

	if (frames > HT_MAX_KSTACK_DEPTH)
		frames = HT_MAX_KSTACK_DEPTH;
	ht_json_array(j, "kernel_stack");
	for (int i = 0; i < frames; i++)
		ht_json_str(j, NULL, ht_ksyms_format(ksyms, b->kstack[i], name, sizeof(name)));
	ht_json_close(j);
}

/*
 * The waker's stacks at the wakeup, innermost first: the kernel's by name,
 * the user's as addresses (naming them is the dump builder's, off the
 * event loop).
 */
static void print_waker_stack_json(struct ht_json *j, const struct ht_waker_stack *ws,
				   const struct ht_ksyms *ksyms)
{
	int kframes = ws->kstack_bytes > 0 ? ws->kstack_bytes / (int)sizeof(uint64_t) : 0;
	int uframes = ws->ustack_bytes > 0 ? ws->ustack_bytes / (int)sizeof(uint64_t) : 0;
	int kstart = ht_waker_stack_kernel_start(ws, ksyms);
	char name[256];

	ht_json_object(j, "waker_stack");
	ht_json_u64(j, "at_ns", ws->time_ns);
	ht_json_u64(j, "tid", ws->waker_tid);
	ht_json_array(j, "kernel");
	for (int i = kstart; i < kframes && i < HT_WAKER_STACK_DEPTH; i++)
		ht_json_str(j, NULL, ht_ksyms_format(ksyms, ws->kstack[i], name, sizeof(name)));
	ht_json_close(j);
	ht_json_array(j, "user");
	for (int i = 0; i < uframes && i < HT_WAKER_STACK_DEPTH; i++) {
		snprintf(name, sizeof(name), "0x%llx", (unsigned long long)ws->ustack[i]);
		ht_json_str(j, NULL, name);
	}
	ht_json_close(j);
	ht_json_close(j);
}

static void print_waker_json(struct ht_json *j, const struct ht_breach *b)
{
	char comm[HT_COMM_LEN + 1];

	if (b->wake_source == HT_WAKE_NONE) {
		ht_json_null(j, "woken_by");
		return;
	}
	ht_json_object(j, "woken_by");
	ht_json_str(j, "source", ht_wake_source_name(b->wake_source));
	ht_json_u64(j, "at_ns", b->wake_ns);
	if (b->wake_source == HT_WAKE_SOFTIRQ)
		ht_json_str(j, "softirq", ht_softirq_name(b->softirq_vec));
	/* A softirq names the task it ran in, when it ran in one's context. */
	if (b->wake_source == HT_WAKE_TASK || (b->wake_source == HT_WAKE_SOFTIRQ && b->waker_tid)) {
		snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, b->waker_comm);
		ht_json_u64(j, "tid", b->waker_tid);
		ht_json_u64(j, "pid", b->waker_tgid);
		ht_json_str(j, "comm", comm);
		ht_json_bool(j, "exiting", b->flags & HT_BRF_JOINED);
	}
	ht_json_close(j);
}

static void print_culprits_json(struct ht_json *j, const struct ht_breach_info *bi)
{
	if (!bi->have_culprits)
		return;
	ht_json_array(j, "ran_instead");
	for (unsigned int i = 0; i < bi->culprits.count; i++) {
		const struct ht_culprit *c = &bi->culprits.top[i];

		ht_json_object(j, NULL);
		ht_json_u64(j, "pid", c->pid);
		ht_json_str(j, "comm", bi->culprit_comm[i]);
		ht_json_u64(j, "cpu", c->cpu);
		ht_json_u64(j, "ns", c->ns);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_u64(j, "ran_instead_other_ns", bi->culprits.other_ns);
	ht_json_u64(j, "ran_instead_unknown_ns", bi->culprits.unknown_ns);
	ht_json_u64(j, "ran_instead_idle_ns", bi->culprits.idle_ns);
	ht_json_u64(j, "runnable_ns", bi->culprits.runnable_ns);
	ht_json_u64(j, "preemptions", bi->culprits.preemptions);
}

/* "kinds" beside "kind", and the off-CPU interval of a breach that has one. */
static void print_kinds_json(struct ht_json *j, const struct ht_breach *b)
{
	uint32_t kinds = ht_breach_kinds_of(b->kinds, b->kind);

	ht_json_array(j, "kinds");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (kinds & HT_KIND_BIT(k))
			ht_json_str(j, NULL, ht_breach_kind_name(k));
	ht_json_close(j);
	if (!(kinds & HT_KIND_BIT(HT_BREACH_OFF_CPU)) || !b->off_cpu_end_ns)
		return;
	ht_json_object(j, "off_cpu");
	ht_json_u64(j, "start_ns", b->off_cpu_start_ns);
	ht_json_u64(j, "end_ns", b->off_cpu_end_ns);
	ht_json_u64(j, "duration_ns", b->off_cpu_end_ns - b->off_cpu_start_ns);
	ht_json_u64(j, "threshold_ns", b->off_cpu_threshold_ns);
	ht_json_u64(j, "waits_over_threshold", b->off_cpu_waits);
	ht_json_close(j);
}

void ht_breach_print_json(FILE *f, const struct ht_breach_info *bi, const struct ht_ksyms *ksyms)
{
	const struct ht_breach *b = &bi->b;
	const char *sc = ht_syscall_name(b->syscall_nr);
	char comm[HT_COMM_LEN + 1], state[2] = { ht_task_state_letter(b->state), 0 };
	struct ht_json j;
	uint32_t epoll_fd;

	snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, b->comm);
	flockfile(f);
	ht_json_begin(&j, f);
	ht_json_str(&j, "type", "breach");
	ht_json_fixed(&j, "time_s", bi->since_start_s, 6);
	ht_json_str(&j, "kind", ht_breach_kind_name(b->kind));
	ht_json_u64(&j, "duration_ns", b->end_ns - b->start_ns);
	ht_json_u64(&j, "threshold_ns", bi->threshold_ns);
	ht_json_u64(&j, "start_ns", b->start_ns);
	ht_json_u64(&j, "end_ns", b->end_ns);
	ht_json_u64(&j, "pid", b->tgid);
	ht_json_u64(&j, "tid", b->tid);
	ht_json_str(&j, "comm", comm);
	ht_json_str(&j, "process_comm", bi->process_comm[0] ? bi->process_comm : comm);
	/* Only for a thread in a pid namespace below the initial one (a container). */
	if (b->ns_tid) {
		ht_json_u64(&j, "ns_pid", b->ns_tgid);
		ht_json_u64(&j, "ns_tid", b->ns_tid);
	}
	print_kinds_json(&j, b);
	ht_json_u64(&j, "cpu", b->cpu);
	ht_json_str(&j, "state", state);
	ht_json_u64(&j, "wake_cpu", b->wake_cpu);
	if (b->syscall_nr >= 0) {
		ht_json_i64(&j, "syscall_nr", b->syscall_nr);
		ht_json_str(&j, "syscall", sc);
	}
	if (b->kind == HT_BREACH_SYSCALL) {
		ht_json_i64(&j, "syscall_ret", (int64_t)b->syscall_ret);
		ht_json_str(&j, "syscall_ret_name", ht_syscall_ret_name((int64_t)b->syscall_ret));
	}
	if (ht_breach_epoll_fd(b, &epoll_fd))
		ht_json_u64(&j, "epoll_fd", epoll_fd);
	ht_json_bool(&j, "wait_for_work", ht_breach_waits_for_work(b));
	print_waker_json(&j, b);
	/* Why it names no waker or no stack. */
	ht_json_split(&j, "not_traced", ht_breach_not_traced(b), ',');
	print_culprits_json(&j, bi);
	print_kstack_json(&j, b, ksyms);
	if (bi->waker_stack)
		print_waker_stack_json(&j, bi->waker_stack, ksyms);
	if (bi->block_stack)
		ht_block_frames_print_json(&j, bi->block_stack);
	if (bi->block_stack_missing)
		ht_json_str(&j, "block_stack_missing", bi->block_stack_missing);
	ht_json_end_line(&j);
	funlockfile(f);
}
