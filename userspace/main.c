// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * hybtrace: watch one process's threads from the kernel and report latency
 * breaches. Subcommands come from a table, as bpftool's do.
 */
#include <stdio.h>
#include <string.h>
#include "cli/check.h"
#include "cli/decode.h"
#include "base/log.h"
#include "kernel/monitor.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/session.h"

static int parse_or_usage(struct ht_options *o, int argc, char **argv, bool run, bool *help)
{
	ht_options_init(o);
	if (ht_options_parse(o, argc, argv, run, help)) {
		ht_error("%s", ht_last_error());
		return HT_EXIT_USAGE;
	}
	if (*help) {
		ht_options_usage();
		return 0;
	}
	/* What the targets name is checked before anything is opened or attached. */
	if (ht_options_resolve_targets(o)) {
		ht_error("%s", ht_last_error());
		return HT_EXIT_USAGE;
	}
	return 0;
}

static int cmd_record(int argc, char **argv)
{
	struct ht_options o;
	bool help;
	int rc = parse_or_usage(&o, argc, argv, false, &help);

	if (rc || help)
		return rc;
	return ht_session_record(&o);
}

static int cmd_run(int argc, char **argv)
{
	struct ht_options o;
	bool help;
	int rc = parse_or_usage(&o, argc, argv, true, &help);

	if (rc || help)
		return rc;
	return ht_session_run(&o);
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ht_options_usage();
	return 0;
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("hybtrace %s\n", HT_VERSION);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "record", cmd_record },
	{ "run", cmd_run },
	{ "check", ht_check_main },
	{ "report", ht_report_main },
	{ "decode", ht_decode_main },
	{ "help", cmd_help },
	{ "--help", cmd_help },
	{ "-h", cmd_help },
	{ "--version", cmd_version },
	{ "-V", cmd_version },
	{ "version", cmd_version },
};

int main(int argc, char **argv)
{
	ht_monitor_quiet_libbpf();
	if (argc < 2)
		return cmd_record(argc, argv);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	/* No subcommand: options go to record, as in `hybtrace --pid N`. */
	if (argv[1][0] == '-')
		return cmd_record(argc, argv);
	ht_error("unknown command '%s' (see hybtrace --help)", argv[1]);
	return HT_EXIT_USAGE;
}
