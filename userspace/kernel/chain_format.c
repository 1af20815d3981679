// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "base/syscalls.h"
#include "base/units.h"
#include "kernel/breach_format.h"
#include "kernel/chain_format.h"
#include "trace/dump_schema.h"

void ht_chain_line_of(const struct ht_wait_chain *c, size_t i, ht_task_namer name, void *ctx,
		      char bufs[3][HT_CHAIN_NAME_LEN], char *state, size_t state_len,
		      struct ht_chain_line *l)
{
	const struct ht_chain_stretch *st = &c->stretches[i];

	memset(l, 0, sizeof(*l));
	l->start_ns = st->start_ns;
	l->end_ns = st->end_ns;
	l->depth = st->depth;
	l->tid = st->tid;
	l->comm = name(ctx, st->tid, bufs[0], HT_CHAIN_NAME_LEN);
	l->stretch = ht_stretch_kind_name(st->kind);
	l->cpu = st->cpu;
	l->exited = st->exited;
	l->before_window = st->before_window;
	l->leaf = ht_chain_stretch_is_leaf(c, i);
	if (st->kind == HT_STRETCH_RUNNABLE && st->behind) {
		l->behind = st->behind;
		l->behind_comm = name(ctx, st->behind, bufs[1], HT_CHAIN_NAME_LEN);
		l->behind_ns = st->behind_ns;
	}
	if (st->kind != HT_STRETCH_BLOCKED)
		return;
	if (st->state == HT_CHAIN_STATE_UNKNOWN)
		snprintf(state, state_len, "%s", HT_STATE_UNKNOWN);
	else
		snprintf(state, state_len, "%c", ht_task_state_letter(st->state));
	l->state = state;
	l->syscall = st->syscall >= 0 ? ht_syscall_name(st->syscall) ?: "unknown" : NULL;
	l->woken_by = st->wake_source != HT_WAKE_NONE ? ht_wake_source_name(st->wake_source) : NULL;
	if (st->waker) {
		l->waker = st->waker;
		l->waker_comm = name(ctx, st->waker, bufs[2], HT_CHAIN_NAME_LEN);
	}
	l->stop = ht_chain_stop_name(st->stop);
}

static double share_of(const struct ht_chain_summary *sum, const struct ht_chain_line *l)
{
	uint64_t wait = sum->end_ns - sum->start_ns;

	return wait ? (double)(l->end_ns - l->start_ns) / (double)wait : 0;
}

void ht_chain_json(struct ht_json *j, const char *key, const struct ht_chain_summary *sum,
		   const struct ht_chain_line *lines, size_t n)
{
	ht_json_object(j, key);
	ht_json_u64(j, "start_ns", sum->start_ns);
	ht_json_u64(j, "end_ns", sum->end_ns);
	ht_json_u64(j, "duration_ns", sum->end_ns - sum->start_ns);
	ht_json_u64(j, "max_depth", sum->max_depth);
	ht_json_bool(j, "cut_by_window", sum->cut_by_window);
	ht_json_bool(j, "truncated", sum->truncated);
	ht_json_array(j, "stretches");
	for (size_t i = 0; i < n; i++) {
		const struct ht_chain_line *l = &lines[i];

		ht_json_object(j, NULL);
		ht_json_u64(j, "depth", l->depth);
		ht_json_u64(j, "start_ns", l->start_ns);
		ht_json_u64(j, "duration_ns", l->end_ns - l->start_ns);
		ht_json_fixed(j, "share", share_of(sum, l), 4);
		ht_json_bool(j, "leaf", l->leaf);
		ht_json_u64(j, "tid", l->tid);
		ht_json_str(j, "comm", l->comm);
		ht_json_str(j, "stretch", l->stretch);
		if (l->cpu >= 0)
			ht_json_u64(j, "cpu", (uint64_t)l->cpu);
		if (l->exited)
			ht_json_bool(j, "exited", true);
		if (l->before_window)
			ht_json_bool(j, "began_before_window", true);
		if (l->behind) {
			ht_json_object(j, "behind");
			ht_json_u64(j, "tid", l->behind);
			ht_json_str(j, "comm", l->behind_comm);
			ht_json_u64(j, "ns", l->behind_ns);
			ht_json_close(j);
		}
		if (l->state)
			ht_json_str(j, "state", l->state);
		if (l->syscall)
			ht_json_str(j, "syscall", l->syscall);
		if (l->woken_by)
			ht_json_str(j, "woken_by", l->woken_by);
		if (l->waker) {
			ht_json_object(j, "waker");
			ht_json_u64(j, "tid", l->waker);
			ht_json_str(j, "comm", l->waker_comm);
			ht_json_close(j);
		}
		if (l->stop)
			ht_json_str(j, "stop", l->stop);
		if (l->user_depth) {
			ht_json_array(j, "sampled_user_stack");
			for (unsigned int f = 0; f < l->user_depth; f++)
				ht_json_str(j, NULL, l->user_stack[f]);
			ht_json_close(j);
		}
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_close(j);
}

/* "comm[tid]", with "(exited)" after a task that exited. */
static void task_name(char *buf, size_t len, const char *comm, uint32_t tid, bool exited)
{
	snprintf(buf, len, "%s[%u]%s", comm ? comm : "?", tid, exited ? " (exited)" : "");
}

void ht_chain_text(const struct ht_chain_summary *sum, const struct ht_chain_line *l, char *buf,
		   size_t len)
{
	char dur[32], task[HT_CHAIN_NAME_LEN + 32], other[HT_CHAIN_NAME_LEN + 32], what[160];
	size_t n;

	ht_format_duration(l->end_ns - l->start_ns, dur, sizeof(dur));
	task_name(task, sizeof(task), l->comm, l->tid, l->exited);
	if (!strcmp(l->stretch, "runnable") && l->behind) {
		task_name(other, sizeof(other), l->behind_comm, l->behind, false);
		snprintf(what, sizeof(what), "runnable, behind %s", other);
	} else if (!strcmp(l->stretch, "running")) {
		unsigned int from = l->user_depth > 3 ? l->user_depth - 3 : 0;

		n = (size_t)snprintf(what, sizeof(what), "running");
		if (l->cpu >= 0 && n < sizeof(what))
			n += (size_t)snprintf(what + n, sizeof(what) - n, " on CPU %d", l->cpu);
		/* Its innermost sampled frames, where it was sampled. */
		for (unsigned int f = from; f < l->user_depth && n < sizeof(what); f++)
			n += (size_t)snprintf(what + n, sizeof(what) - n, "%s%s",
					      f == from ? ", in " : " > ", l->user_stack[f]);
	} else if (l->state) {
		n = (size_t)snprintf(what, sizeof(what), "blocked %s%s%s", l->state,
				     l->syscall ? " in " : "", l->syscall ? l->syscall : "");
		if (l->before_window && n < sizeof(what))
			n += (size_t)snprintf(what + n, sizeof(what) - n,
					      " since before the window");
		if (l->waker && n < sizeof(what)) {
			task_name(other, sizeof(other), l->waker_comm, l->waker, false);
			n += (size_t)snprintf(what + n, sizeof(what) - n, ", woken by %s", other);
		} else if (l->woken_by && n < sizeof(what)) {
			n += (size_t)snprintf(what + n, sizeof(what) - n, ", woken by %s",
					      l->woken_by);
		} else if (n < sizeof(what)) {
			n += (size_t)snprintf(what + n, sizeof(what) - n, ", %s",
					      l->stop ? l->stop : "not woken");
		}
		if (l->stop && l->waker && n < sizeof(what))
			snprintf(what + n, sizeof(what) - n, " (not followed: %s)", l->stop);
	} else {
		snprintf(what, sizeof(what), "%s",
			 strcmp(l->stretch, "unknown") ? l->stretch : "unknown: before the window");
	}
	snprintf(buf, len, "%9s %5.1f%%  %*s%s %s", dur, 100.0 * share_of(sum, l),
		 (int)(2 * l->depth), "", task, what);
}
