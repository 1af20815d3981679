// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for option parsing (userspace/cli/options.c) and the trigger
 * specs it accepts (userspace/triggers/trigger_spec.c). The input is a command line:
 * arguments separated by NUL bytes; the first byte picks `record` or `run`.
 * Any command line is accepted or refused with one reason, never a crash, and
 * what is accepted is consistent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/options.h"
#include "triggers/trigger_spec.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[MAX_ARGS + 2];
	struct ht_options o;
	bool run, want_help;
	char *text;
	int argc = 1;

	if (!size)
		return 0;
	run = data[0] & 1;
	text = malloc(size);
	if (!text)
		return 0;
	/* data[1..] with a final NUL: each NUL ends one argument. */
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	argv[0] = run ? "run" : "hybtrace";
	for (size_t i = 0; i < size - 1 && argc <= MAX_ARGS;) {
		argv[argc++] = text + i;
		i += strlen(text + i) + 1;
	}
	argv[argc] = NULL;

	ht_options_init(&o);
	if (ht_options_parse(&o, argc, argv, run, &want_help) == 0 && !want_help) {
		struct ht_trigger_spec spec;

		bool named = o.npids || o.cgroup_arg || o.unit;

		if (run ? (!o.run_argv || !o.run_argv[0]) : !named && !o.targets.all)
			abort();
		if ((o.npids && o.pid <= 0) || o.npids > HT_MAX_TARGET_PIDS ||
		    (o.targets.all && (named || run || o.targets.children)))
			abort();
		if (o.ntriggers > HT_MAX_TRIGGERS ||
		    (o.syscall_filter_on && !o.threshold_ns[HT_BREACH_SYSCALL]))
			abort();
		if (o.history_bytes < HT_MIN_HISTORY_BYTES || o.history_bytes > HT_MAX_HISTORY_BYTES)
			abort();
		for (unsigned int i = 0; i < o.ntriggers; i++)
			if (ht_trigger_spec_parse(o.triggers[i], &spec) == 0 &&
			    spec.kind == HT_TRIGGER_LINE && !spec.line)
				abort();
	}
	if (!memchr(o.cmdline, '\0', sizeof(o.cmdline)))
		abort();
	free(text);
	return 0;
}
