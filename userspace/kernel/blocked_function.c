// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "kernel/blocked_function.h"
#include "symbols/ksyms.h"

/*
 * Scheduler functions by name, for symbol tables without the section
 * markers (a raw capture keeps only the symbols its stacks need): the
 * __sched functions a sleep passes through most.
 */
static const char *const sched_prefixes[] = {
	"__schedule",	  "schedule",		"io_schedule",	       "preempt_schedule",
	"__cond_resched", "do_nanosleep",	"wait_for_completion", "__wait_for_common",
	"bit_wait",	  "usleep_range_state", "__mutex_lock",	       "mutex_lock",
	"rwsem_down_",	  "rt_mutex_",		"__rt_mutex_",	       "__down",
};

struct text_range {
	uint64_t start, end;
};

/* The kernel's __sched and __lock text, from their markers' addresses. */
static size_t sched_text(const struct ht_ksyms *ksyms, struct text_range *r)
{
	static const char *const markers[][2] = {
		{"__sched_text_start", "__sched_text_end"},
		{"__lock_text_start", "__lock_text_end"},
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
		uint64_t start, end, unused;

		if (ht_ksyms_range(ksyms, markers[i][0], &start, &unused) ||
		    ht_ksyms_range(ksyms, markers[i][1], &end, &unused) || end <= start)
			continue;
		r[n++] = (struct text_range){start, end};
	}
	return n;
}

static bool sched_named(const char *name)
{
	for (size_t i = 0; i < sizeof(sched_prefixes) / sizeof(sched_prefixes[0]); i++)
		if (!strncmp(name, sched_prefixes[i], strlen(sched_prefixes[i])))
			return true;
	return false;
}

const char *ht_blocked_function(const uint64_t *kstack, int depth, const struct ht_ksyms *ksyms,
				char *buf, size_t len, bool *io_wait)
{
	struct text_range text[2];
	size_t ntext = sched_text(ksyms, text);

	*io_wait = false;
	for (int i = 0; i < depth; i++) {
		uint64_t start;
		const char *name = ht_ksyms_find(ksyms, kstack[i], &start);
		bool in_text = false;

		if (!name)
			return NULL; /* an unknown frame: no name to give, none to skip */
		for (size_t t = 0; t < ntext; t++)
			in_text |= kstack[i] >= text[t].start && kstack[i] < text[t].end;
		if (!strncmp(name, "io_schedule", strlen("io_schedule")))
			*io_wait = true;
		if (in_text || sched_named(name))
			continue;
		snprintf(buf, len, "%s", name);
		return buf;
	}
	return NULL;
}
