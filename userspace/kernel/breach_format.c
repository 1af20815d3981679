// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include "kernel/breach_format.h"
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

void ht_breach_print_text(FILE *f, const struct ht_breach_info *bi)
{
	const struct ht_breach *b = &bi->b;
	const char *sc = ht_syscall_name(b->syscall_nr);
	const char *idle = ht_breach_waits_for_work(b) ? WAIT_FOR_WORK_TEXT : "";
	char dur[32], ret[128], kinds[64];

	/* One line even while the dump thread prints too. */
	flockfile(f);
	fprintf(f, "%.6f %s %s tid %u (%.*s) cpu %u", bi->since_start_s,
		ht_breach_kinds_name(ht_breach_kinds_of(b->kinds, b->kind), kinds, sizeof(kinds)),
		ht_format_duration(b->end_ns - b->start_ns, dur, sizeof(dur)), b->tid, HT_COMM_LEN,
		b->comm, b->cpu);
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
	if (bi->block_stack)
		ht_block_frames_print_text(f, bi->block_stack);
	else if (bi->block_stack_missing)
		fprintf(f, " (no stack where it blocked: %s)", bi->block_stack_missing);
	fputc('\n', f);
	funlockfile(f);
}

static void print_kstack_json(FILE *f, const struct ht_breach *b, const struct ht_ksyms *ksyms)
{
	int frames = b->kstack_bytes > 0 ? b->kstack_bytes / (int)sizeof(uint64_t) : 0;
	char name[256];

	if (frames > HT_MAX_KSTACK_DEPTH)
		frames = HT_MAX_KSTACK_DEPTH;
	fputs(",\"kernel_stack\":[", f);
	for (int i = 0; i < frames; i++) {
		if (i)
			fputc(',', f);
		ht_json_string(f, ht_ksyms_format(ksyms, b->kstack[i], name, sizeof(name)));
	}
	fputc(']', f);
}

static void print_waker_json(FILE *f, const struct ht_breach *b)
{
	char comm[HT_COMM_LEN + 1];

	fprintf(f, ",\"woken_by\":");
	if (b->wake_source == HT_WAKE_NONE) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"source\":\"%s\",\"at_ns\":%llu", ht_wake_source_name(b->wake_source),
		(unsigned long long)b->wake_ns);
	if (b->wake_source == HT_WAKE_SOFTIRQ)
		fprintf(f, ",\"softirq\":\"%s\"", ht_softirq_name(b->softirq_vec));
	/* A softirq names the task it ran in, when it ran in one's context. */
	if (b->wake_source == HT_WAKE_TASK || (b->wake_source == HT_WAKE_SOFTIRQ && b->waker_tid)) {
		snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, b->waker_comm);
		fprintf(f, ",\"tid\":%u,\"pid\":%u,\"comm\":", b->waker_tid, b->waker_tgid);
		ht_json_string(f, comm);
		fprintf(f, ",\"exiting\":%s", b->flags & HT_BRF_JOINED ? "true" : "false");
	}
	fputc('}', f);
}

static void print_culprits_json(FILE *f, const struct ht_breach_info *bi)
{
	if (!bi->have_culprits)
		return;
	fputs(",\"ran_instead\":[", f);
	for (unsigned int i = 0; i < bi->culprits.count; i++) {
		const struct ht_culprit *c = &bi->culprits.top[i];

		fprintf(f, "%s{\"pid\":%u,\"comm\":", i ? "," : "", c->pid);
		ht_json_string(f, bi->culprit_comm[i]);
		fprintf(f, ",\"cpu\":%u,\"ns\":%llu}", c->cpu, (unsigned long long)c->ns);
	}
	fprintf(f,
		"],\"ran_instead_other_ns\":%llu,\"ran_instead_unknown_ns\":%llu,"
		"\"ran_instead_idle_ns\":%llu,\"runnable_ns\":%llu,\"preemptions\":%u",
		(unsigned long long)bi->culprits.other_ns,
		(unsigned long long)bi->culprits.unknown_ns,
		(unsigned long long)bi->culprits.idle_ns,
		(unsigned long long)bi->culprits.runnable_ns, bi->culprits.preemptions);
}

/* "kinds" beside "kind", and the off-CPU interval of a breach that has one. */
static void print_kinds_json(FILE *f, const struct ht_breach *b)
{
	uint32_t kinds = ht_breach_kinds_of(b->kinds, b->kind);
	unsigned int n = 0;

	fputs(",\"kinds\":[", f);
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (kinds & HT_KIND_BIT(k))
			fprintf(f, "%s\"%s\"", n++ ? "," : "", ht_breach_kind_name(k));
	fputc(']', f);
	if (!(kinds & HT_KIND_BIT(HT_BREACH_OFF_CPU)) || !b->off_cpu_end_ns)
		return;
	fprintf(f,
		",\"off_cpu\":{\"start_ns\":%llu,\"end_ns\":%llu,\"duration_ns\":%llu,"
		"\"threshold_ns\":%llu,\"waits_over_threshold\":%u}",
		(unsigned long long)b->off_cpu_start_ns, (unsigned long long)b->off_cpu_end_ns,
		(unsigned long long)(b->off_cpu_end_ns - b->off_cpu_start_ns),
		(unsigned long long)b->off_cpu_threshold_ns, b->off_cpu_waits);
}

void ht_breach_print_json(FILE *f, const struct ht_breach_info *bi, const struct ht_ksyms *ksyms)
{
	const struct ht_breach *b = &bi->b;
	const char *sc = ht_syscall_name(b->syscall_nr);
	char comm[HT_COMM_LEN + 1], state[2] = { ht_task_state_letter(b->state), 0 };

	snprintf(comm, sizeof(comm), "%.*s", HT_COMM_LEN, b->comm);
	flockfile(f);
	fprintf(f,
		"{\"type\":\"breach\",\"time_s\":%.6f,\"kind\":\"%s\",\"duration_ns\":%llu,"
		"\"threshold_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,\"pid\":%u,\"tid\":%u,"
		"\"comm\":",
		bi->since_start_s, ht_breach_kind_name(b->kind),
		(unsigned long long)(b->end_ns - b->start_ns), (unsigned long long)bi->threshold_ns,
		(unsigned long long)b->start_ns, (unsigned long long)b->end_ns, b->tgid, b->tid);
	ht_json_string(f, comm);
	print_kinds_json(f, b);
	fprintf(f, ",\"cpu\":%u,\"state\":\"%s\",\"wake_cpu\":%u", b->cpu, state, b->wake_cpu);
	if (b->syscall_nr >= 0) {
		fprintf(f, ",\"syscall_nr\":%d,\"syscall\":", b->syscall_nr);
		if (sc)
			ht_json_string(f, sc);
		else
			fputs("null", f);
	}
	if (b->kind == HT_BREACH_SYSCALL) {
		const char *err = ht_syscall_ret_name((int64_t)b->syscall_ret);

		fprintf(f, ",\"syscall_ret\":%" PRId64 ",\"syscall_ret_name\":",
			(int64_t)b->syscall_ret);
		if (err)
			ht_json_string(f, err);
		else
			fputs("null", f);
	}
	fprintf(f, ",\"wait_for_work\":%s", ht_breach_waits_for_work(b) ? "true" : "false");
	print_waker_json(f, b);
	print_culprits_json(f, bi);
	print_kstack_json(f, b, ksyms);
	if (bi->block_stack)
		ht_block_frames_print_json(f, bi->block_stack);
	if (bi->block_stack_missing) {
		fputs(",\"block_stack_missing\":", f);
		ht_json_string(f, bi->block_stack_missing);
	}
	fputs("}\n", f);
	funlockfile(f);
}
