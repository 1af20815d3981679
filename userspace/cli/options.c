// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/breach_kinds.h"
#include "base/cgroup.h"
#include "base/log.h"
#include "cli/options.h"
#include "base/proc.h"
#include "cli/sources.h"
#include "base/syscalls.h"
#include "kernel/wait_chain.h"

void ht_options_init(struct ht_options *o)
{
	memset(o, 0, sizeof(*o));
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		o->threshold_ns[k] = ht_breach_kinds[k].default_threshold_ns;
	o->history_bytes = HT_DEFAULT_HISTORY_BYTES;
	o->output_dir = ".";
	o->pre_ns = HT_DEFAULT_PRE_NS;
	o->post_ns = HT_DEFAULT_POST_NS;
	o->min_interval_ns = HT_DEFAULT_MIN_INTERVAL_NS;
	o->max_dumps = HT_DEFAULT_MAX_DUMPS;
	o->chain_depth = HT_CHAIN_DEFAULT_DEPTH;
	o->max_disk_bytes = HT_DEFAULT_MAX_DISK;
	o->sample_freq_hz = HT_DEFAULT_SAMPLE_FREQ;
	o->max_memory_bytes = HT_DEFAULT_MAX_MEMORY;
	o->pt_size_bytes = HT_DEFAULT_PT_SIZE;
	o->source = HT_SOURCE_AUTO;
}

/* Parse "INT[.FRAC]" scaled by `scale`; *end gets what follows the number. */
static int parse_scaled_decimal(const char *s, uint64_t scale_num, uint64_t *out, const char **end)
{
	uint64_t whole = 0, frac = 0, frac_div = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		if (whole > (UINT64_MAX - 9) / 10)
			return -1;
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		for (; isdigit((unsigned char)*p); p++) {
			/* Digits beyond nanosecond or byte precision are ignored. */
			if (frac_div < 1000000000ULL) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
			}
		}
	}
	*end = p;
	if (scale_num && whole > UINT64_MAX / scale_num)
		return -1;
	*out = whole * scale_num + frac * scale_num / frac_div;
	return 0;
}

int ht_parse_duration(const char *s, uint64_t *ns)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 } };
	const char *unit;
	uint64_t value;

	if (!s || !*s)
		return ht_fail("empty duration: give a number with a unit, like 2ms or 500us");
	if (*s == '-')
		return ht_fail("duration '%s' is negative", s);
	if (!isdigit((unsigned char)*s))
		return ht_fail("duration '%s' is not a number with a unit, like 2ms or 500us", s);
	/* Probe with scale 1 to find the unit, then parse again with its scale. */
	if (parse_scaled_decimal(s, 1, &value, &unit))
		return ht_fail("duration '%s' is not a number with a unit, like 2ms or 500us", s);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(unit, units[i].unit))
			continue;
		if (parse_scaled_decimal(s, units[i].ns, &value, &unit))
			return ht_fail("duration '%s' is too large", s);
		*ns = value;
		return 0;
	}
	if (!*unit)
		return ht_fail("duration '%s' needs a unit: ns, us, ms or s", s);
	return ht_fail("duration '%s' has an unknown unit '%s': use ns, us, ms or s", s, unit);
}

int ht_parse_size(const char *s, uint64_t *bytes)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "", 1 },	      { "B", 1 },	     { "k", 1ULL << 10 },  { "K", 1ULL << 10 },
		{ "KB", 1ULL << 10 }, { "KiB", 1ULL << 10 }, { "M", 1ULL << 20 },  { "MB", 1ULL << 20 },
		{ "MiB", 1ULL << 20 }, { "G", 1ULL << 30 },  { "GB", 1ULL << 30 }, { "GiB", 1ULL << 30 },
	};
	const char *suffix;
	uint64_t value;

	if (!s || !*s)
		return ht_fail("empty size: give a number like 4M or 65536");
	if (*s == '-')
		return ht_fail("size '%s' is negative", s);
	if (parse_scaled_decimal(s, 1, &value, &suffix))
		return ht_fail("size '%s' is not a number like 4M or 65536", s);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(suffix, units[i].suffix))
			continue;
		if (parse_scaled_decimal(s, units[i].mult, &value, &suffix))
			return ht_fail("size '%s' is too large", s);
		*bytes = value;
		return 0;
	}
	return ht_fail("size '%s' has an unknown suffix '%s': use k, M or G", s, suffix);
}

int ht_parse_syscall_list(const char *opt, const char *s, uint64_t bitmap[HT_MAX_SYSCALLS / 64])
{
	char *copy, *save = NULL, *name;
	int count = 0, rc = 0;

	memset(bitmap, 0, HT_MAX_SYSCALLS / 8);
	copy = strdup(s ? s : "");
	if (!copy)
		return ht_fail("out of memory");
	for (name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int nr = ht_syscall_number(name);

		if (nr < 0 || nr >= HT_MAX_SYSCALLS) {
			rc = ht_fail("unknown syscall '%s' in --%s", name, opt);
			break;
		}
		bitmap[nr / 64] |= 1ULL << (nr % 64);
		count++;
	}
	free(copy);
	if (!rc && !count)
		rc = ht_fail("--%s needs a comma-separated list of syscall names", opt);
	return rc;
}

int ht_parse_state_list(const char *s, uint32_t *states)
{
	/* Every state a thread can leave the CPU in of its own accord: all but R. */
	static const char off_cpu_letters[] = "SDTtXZPI";
	char *copy, *save = NULL, *name;
	int rc = 0;

	*states = 0;
	copy = strdup(s ? s : "");
	if (!copy)
		return ht_fail("out of memory");
	for (name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		const char *letter = strlen(name) == 1 ? strchr(HT_STATE_LETTERS, name[0]) : NULL;

		if (!strcmp(name, "R")) {
			rc = ht_fail("--off-cpu-states: R is not an off-CPU state (a thread that "
				     "leaves the CPU runnable was preempted: see --rq-delay)");
			break;
		}
		if (!letter || !strchr(off_cpu_letters, name[0])) {
			rc = ht_fail(
				"--off-cpu-states: unknown state '%s': use S, D, T, t, X, Z, P "
				"or I, as the live line prints them",
				name);
			break;
		}
		*states |= 1U << (letter - HT_STATE_LETTERS);
	}
	free(copy);
	if (!rc && !*states)
		rc = ht_fail("--off-cpu-states needs a comma-separated list of states, e.g. S,D");
	return rc;
}

enum {
	OPT_THRESHOLD = 256, /* + enum ht_breach_kind: that kind's threshold (--rq-delay...) */
	OPT_SYSCALLS = OPT_THRESHOLD + HT_BREACH_KIND_MAX,
	OPT_OFF_CPU_STATES,
	OPT_OFF_CPU_SYSCALLS,
	OPT_IGNORE_SYSCALLS,
	OPT_HISTORY,
	OPT_JSON,
	OPT_BTF,
	OPT_PREV_STATE,
	OPT_DURATION,
	OPT_QUIET,
	OPT_OUTPUT,
	OPT_PRE,
	OPT_POST,
	OPT_MIN_INTERVAL,
	OPT_MAX_DUMPS,
	OPT_MAX_DUMPS_PER_PROCESS,
	OPT_CHAIN_DEPTH,
	OPT_MAX_DISK,
	OPT_DUMP_ON_EXIT,
	OPT_DUMP_POLICY,
	OPT_SOURCE,
	OPT_SAMPLE_FREQ,
	OPT_SAMPLE_HISTORY,
	OPT_CALLGRAPH,
	OPT_MAX_MEMORY,
	OPT_RT_PRIORITY,
	OPT_TRIGGER,
	OPT_MULTI,
	OPT_PT_SIZE,
	OPT_PT_TIMING,
	OPT_KEEP_RAW,
	OPT_BLOCK_STACKS,
	OPT_CHILDREN,
	OPT_NO_CHILDREN,
	OPT_CGROUP,
	OPT_UNIT,
	OPT_ALL,
	OPT_END, /* not an option: the size of tables indexed by option */
};

/* After --pid and a threshold per breach kind (long_options, made by make_long_options). */
static const struct option other_options[] = {
	{ "syscalls", required_argument, NULL, OPT_SYSCALLS },
	{ "off-cpu-states", required_argument, NULL, OPT_OFF_CPU_STATES },
	{ "off-cpu-syscalls", required_argument, NULL, OPT_OFF_CPU_SYSCALLS },
	{ "ignore-syscalls", required_argument, NULL, OPT_IGNORE_SYSCALLS },
	{ "history", required_argument, NULL, OPT_HISTORY },
	/* Optional, so `--json` alone stays stdout: the file is given as --json=FILE. */
	{ "json", optional_argument, NULL, OPT_JSON },
	{ "btf", required_argument, NULL, OPT_BTF },
	{ "prev-state", required_argument, NULL, OPT_PREV_STATE },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "output", required_argument, NULL, OPT_OUTPUT },
	{ "pre", required_argument, NULL, OPT_PRE },
	{ "post", required_argument, NULL, OPT_POST },
	{ "min-interval", required_argument, NULL, OPT_MIN_INTERVAL },
	{ "max-dumps", required_argument, NULL, OPT_MAX_DUMPS },
	{ "max-dumps-per-process", required_argument, NULL, OPT_MAX_DUMPS_PER_PROCESS },
	{ "chain-depth", required_argument, NULL, OPT_CHAIN_DEPTH },
	{ "max-disk", required_argument, NULL, OPT_MAX_DISK },
	{ "dump-on-exit", no_argument, NULL, OPT_DUMP_ON_EXIT },
	{ "dump-policy", required_argument, NULL, OPT_DUMP_POLICY },
	{ "source", required_argument, NULL, OPT_SOURCE },
	{ "sample-freq", required_argument, NULL, OPT_SAMPLE_FREQ },
	{ "sample-history", required_argument, NULL, OPT_SAMPLE_HISTORY },
	{ "callgraph", required_argument, NULL, OPT_CALLGRAPH },
	{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
	{ "rt-priority", required_argument, NULL, OPT_RT_PRIORITY },
	{ "trigger", required_argument, NULL, OPT_TRIGGER },
	{ "multi", no_argument, NULL, OPT_MULTI },
	{ "pt-size", required_argument, NULL, OPT_PT_SIZE },
	{ "pt-timing", required_argument, NULL, OPT_PT_TIMING },
	{ "keep-raw", no_argument, NULL, OPT_KEEP_RAW },
	{ "block-stacks", no_argument, NULL, OPT_BLOCK_STACKS },
	{ "children", no_argument, NULL, OPT_CHILDREN },
	{ "no-children", no_argument, NULL, OPT_NO_CHILDREN },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "unit", required_argument, NULL, OPT_UNIT },
	{ "all", no_argument, NULL, OPT_ALL },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

#define N_OTHER_OPTIONS (sizeof(other_options) / sizeof(other_options[0]))

static struct option long_options[1 + HT_BREACH_KIND_MAX - 1 + N_OTHER_OPTIONS];

/* --pid, each breach kind's threshold as its row names it, then the others. */
static void make_long_options(void)
{
	size_t n = 0;

	long_options[n++] = (struct option){ "pid", required_argument, NULL, 'p' };
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		long_options[n++] = (struct option){ ht_breach_kinds[k].option, required_argument,
						     NULL, OPT_THRESHOLD + (int)k };
	memcpy(long_options + n, other_options, sizeof(other_options));
}

/* A threshold: a positive duration, or "off". */
static int parse_threshold(const char *opt, const char *arg, uint64_t *ns)
{
	if (arg && !strcmp(arg, "off")) {
		*ns = 0;
		return 0;
	}
	if (ht_parse_duration(arg, ns))
		return ht_fail("--%s: %s", opt, ht_last_error());
	if (*ns == 0)
		return ht_fail("--%s: a threshold must be above 0 (use 'off' to disable)", opt);
	return 0;
}

static int parse_history(const char *arg, uint64_t *bytes)
{
	if (ht_parse_size(arg, bytes))
		return ht_fail("--history: %s", ht_last_error());
	if (*bytes < HT_MIN_HISTORY_BYTES || *bytes > HT_MAX_HISTORY_BYTES)
		return ht_fail("--history: %s is outside 64k..1G", arg);
	return 0;
}

static int parse_prev_state(const char *arg, enum ht_prev_state_mode *mode)
{
	if (!strcmp(arg, "auto"))
		*mode = HT_PREV_STATE_AUTO;
	else if (!strcmp(arg, "arg"))
		*mode = HT_PREV_STATE_ARG;
	else if (!strcmp(arg, "task"))
		*mode = HT_PREV_STATE_TASK;
	else
		return ht_fail("--prev-state: '%s' is not auto, arg or task", arg);
	return 0;
}

/* A window margin: a duration, 0 allowed, at most 10 s. */
static int parse_margin(const char *opt, const char *arg, uint64_t *ns)
{
	if (ht_parse_duration(arg, ns))
		return ht_fail("--%s: %s", opt, ht_last_error());
	if (*ns > 10000000000ULL)
		return ht_fail("--%s: %s is more than 10s", opt, arg);
	return 0;
}

static int parse_count(const char *opt, const char *arg, unsigned int *n)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || !isdigit((unsigned char)arg[0]) || v > 1000000)
		return ht_fail("--%s: '%s' is not a count from 0 to 1000000", opt, arg);
	*n = (unsigned int)v;
	return 0;
}

static int parse_pt_option(struct ht_options *o, int opt, const char *arg)
{
	switch (opt) {
	case OPT_PT_SIZE:
		if (ht_parse_size(arg, &o->pt_size_bytes))
			return ht_fail("--pt-size: %s", ht_last_error());
		/* The AUX area is mapped in pages and the kernel wants a power of two of them. */
		if (o->pt_size_bytes < (64ULL << 10) || o->pt_size_bytes > (1ULL << 30) ||
		    (o->pt_size_bytes & (o->pt_size_bytes - 1)))
			return ht_fail("--pt-size: %s is not a power of two from 64k to 1G", arg);
		return 0;
	case OPT_PT_TIMING:
		if (!strcmp(arg, "coarse"))
			o->pt_fine_timing = false;
		else if (!strcmp(arg, "fine"))
			o->pt_fine_timing = true;
		else
			return ht_fail("--pt-timing: '%s' is not coarse or fine", arg);
		return 0;
	case OPT_KEEP_RAW:
		o->keep_raw = true;
		return 0;
	}
	return ht_fail("unknown option (see hybtrace --help)");
}

static int parse_source_option(struct ht_options *o, int opt, const char *arg)
{
	const char *source;
	unsigned int freq;
	char names[256];

	switch (opt) {
	case OPT_SOURCE:
		source = ht_sources_lookup(arg);
		if (!source)
			return ht_fail("--source: '%s' is not %s", arg,
				       ht_sources_names(names, sizeof(names)));
		o->source = source;
		return 0;
	case OPT_SAMPLE_FREQ:
		if (parse_count("sample-freq", arg, &freq) || freq == 0 || freq > 100000)
			return ht_fail("--sample-freq: '%s' is not a rate from 1 to 100000 Hz", arg);
		o->sample_freq_hz = freq;
		return 0;
	case OPT_SAMPLE_HISTORY:
		if (ht_parse_size(arg, &o->sample_history_bytes))
			return ht_fail("--sample-history: %s", ht_last_error());
		if (o->sample_history_bytes < (8ULL << 10) || o->sample_history_bytes > (1ULL << 30))
			return ht_fail("--sample-history: %s is outside 8k..1G", arg);
		return 0;
	case OPT_CALLGRAPH:
		if (!strcmp(arg, "fp"))
			o->callgraph = HT_CALLGRAPH_MODE_FP;
		else if (!strcmp(arg, "dwarf"))
			o->callgraph = HT_CALLGRAPH_MODE_DWARF;
		else
			return ht_fail("--callgraph: '%s' is not fp or dwarf", arg);
		return 0;
	case OPT_MAX_MEMORY:
		if (ht_parse_size(arg, &o->max_memory_bytes))
			return ht_fail("--max-memory: %s", ht_last_error());
		return 0;
	case OPT_RT_PRIORITY:
		if (parse_count("rt-priority", arg, &o->rt_priority) || o->rt_priority > 99)
			return ht_fail("--rt-priority: '%s' is not a priority from 0 (off) to 99", arg);
		return 0;
	case OPT_TRIGGER:
		if (o->ntriggers == HT_MAX_TRIGGERS)
			return ht_fail("--trigger: at most %d triggers (x86 has 4 debug registers "
				       "per thread)", HT_MAX_TRIGGERS);
		if (!*arg)
			return ht_fail("--trigger needs a symbol, module:symbol, module:0xADDR, "
				       "file.c:LINE or '.'");
		o->triggers[o->ntriggers++] = (char *)arg;
		return 0;
	case OPT_MULTI:
		o->multi = true;
		return 0;
	}
	return parse_pt_option(o, opt, arg);
}

static int parse_dump_option(struct ht_options *o, int opt, const char *arg)
{
	switch (opt) {
	case OPT_OUTPUT:
		if (!*arg)
			return ht_fail("--output needs a directory");
		o->output_dir = arg;
		return 0;
	case OPT_PRE:
		return parse_margin("pre", arg, &o->pre_ns);
	case OPT_POST:
		return parse_margin("post", arg, &o->post_ns);
	case OPT_MIN_INTERVAL:
		return parse_margin("min-interval", arg, &o->min_interval_ns);
	case OPT_MAX_DUMPS:
		return parse_count("max-dumps", arg, &o->max_dumps);
	case OPT_MAX_DUMPS_PER_PROCESS:
		if (parse_count("max-dumps-per-process", arg, &o->max_dumps_per_process))
			return -1;
		/* Left out, no process has a limit of its own; --max-dumps 0 dumps nothing. */
		if (!o->max_dumps_per_process)
			return ht_fail("--max-dumps-per-process: 0 would dump nothing: use "
				       "--max-dumps 0 for that");
		return 0;
	case OPT_CHAIN_DEPTH:
		if (parse_count("chain-depth", arg, &o->chain_depth))
			return -1;
		if (o->chain_depth > HT_CHAIN_MAX_DEPTH)
			return ht_fail("--chain-depth: %u is more than %u levels", o->chain_depth,
				       HT_CHAIN_MAX_DEPTH);
		return 0;
	case OPT_MAX_DISK:
		if (ht_parse_size(arg, &o->max_disk_bytes))
			return ht_fail("--max-disk: %s", ht_last_error());
		return 0;
	case OPT_DUMP_ON_EXIT:
		o->dump_on_exit = true;
		return 0;
	case OPT_DUMP_POLICY:
		if (!strcmp(arg, "worst"))
			o->dump_rule = HT_DUMP_RULE_WORST;
		else if (!strcmp(arg, "first"))
			o->dump_rule = HT_DUMP_RULE_FIRST;
		else
			return ht_fail("--dump-policy: '%s' is not worst or first", arg);
		return 0;
	}
	return parse_source_option(o, opt, arg);
}

static int parse_one(struct ht_options *o, int opt, const char *arg)
{
	if (opt > OPT_THRESHOLD && opt < OPT_THRESHOLD + HT_BREACH_KIND_MAX) {
		unsigned int k = (unsigned int)(opt - OPT_THRESHOLD);

		return parse_threshold(ht_breach_kinds[k].option, arg, &o->threshold_ns[k]);
	}
	switch (opt) {
	case 'p':
		if (ht_parse_pid_list(arg, o->pids, HT_MAX_TARGET_PIDS, &o->npids))
			return ht_fail("--pid: %s", ht_last_error());
		o->pid = o->pids[0];
		return 0;
	case OPT_CGROUP:
		if (!*arg)
			return ht_fail("--cgroup needs a cgroup v2 directory, absolute or relative "
				       "to the cgroup v2 mount");
		o->cgroup_arg = arg;
		return 0;
	case OPT_UNIT:
		if (!*arg)
			return ht_fail("--unit needs a systemd unit, like nginx or nginx.service");
		o->unit = arg;
		return 0;
	case OPT_SYSCALLS:
		o->syscall_filter_on = true;
		return ht_parse_syscall_list("syscalls", arg, o->syscall_filter);
	case OPT_OFF_CPU_STATES:
		return ht_parse_state_list(arg, &o->filters.off_cpu_states);
	case OPT_OFF_CPU_SYSCALLS:
		o->filters.off_cpu_syscalls_on = true;
		return ht_parse_syscall_list("off-cpu-syscalls", arg, o->filters.off_cpu_syscalls);
	case OPT_IGNORE_SYSCALLS:
		o->filters.ignore_syscalls_on = true;
		return ht_parse_syscall_list("ignore-syscalls", arg, o->filters.ignore_syscalls);
	case OPT_HISTORY:
		o->history_given = true;
		return parse_history(arg, &o->history_bytes);
	case OPT_JSON:
		o->json = true;
		if (!arg || !strcmp(arg, "-"))
			return 0;
		if (!*arg)
			return ht_fail("--json= needs a file name, or - for stdout");
		o->json_path = arg;
		return 0;
	case OPT_BTF:
		o->btf_path = arg;
		return 0;
	case OPT_PREV_STATE:
		return parse_prev_state(arg, &o->prev_state_mode);
	case OPT_DURATION:
		if (ht_parse_duration(arg, &o->duration_ns) || !o->duration_ns)
			return ht_fail("--duration: %s",
				       o->duration_ns ? ht_last_error() : "must be above 0");
		return 0;
	case OPT_QUIET:
		o->quiet = true;
		return 0;
	case OPT_BLOCK_STACKS:
		o->block_stacks = true;
		return 0;
	}
	return parse_dump_option(o, opt, arg);
}

/* The command line as one string, arguments separated by spaces. */
static void record_cmdline(struct ht_options *o, int argc, char **argv)
{
	size_t used = 0;

	o->cmdline[0] = '\0';
	/* A subcommand's argv starts at its name: say whose it is. */
	if (argc > 0 && !strchr(argv[0], '/') && strcmp(argv[0], "hybtrace"))
		used = (size_t)snprintf(o->cmdline, sizeof(o->cmdline), "hybtrace ");
	for (int i = 0; i < argc && used + 1 < sizeof(o->cmdline); i++) {
		int n = snprintf(o->cmdline + used, sizeof(o->cmdline) - used, "%s%s",
				 i ? " " : "", argv[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* The long_options entry of OPT (-p is --pid). */
static const struct option *option_entry(int opt)
{
	for (const struct option *e = long_options; e->name; e++)
		if (e->val == opt)
			return e;
	return NULL;
}

/*
 * An option that takes a value, given twice, is an error: the second would
 * silently win (`--pid A --pid B` watched B). Flags may repeat, being the
 * same either way, and --trigger takes one spec each time.
 */
static int check_repeat(const char **seen, int opt, const char *arg)
{
	const struct option *e = option_entry(opt);

	if (!e || e->has_arg == no_argument || opt == OPT_TRIGGER)
		return 0;
	if (!seen[opt]) {
		/* --json alone has no value: remember it as what it means. */
		seen[opt] = arg ? arg : "stdout";
		return 0;
	}
	return ht_fail("--%s given twice (%s, then %s): give it once", e->name, seen[opt],
		       arg ? arg : "stdout");
}

/*
 * `--json FILE`: the value of an optional argument must follow '=', so FILE
 * ends the options. Under `run` it would become the command, unless the
 * command comes after a `--` further on.
 */
static bool json_file_without_equals(int argc, char **argv, bool run)
{
	if (optind <= 0 || optind >= argc || strcmp(argv[optind - 1], "--json"))
		return false;
	if (!run)
		return true;
	for (int i = optind + 1; i < argc; i++)
		if (!strcmp(argv[i], "--"))
			return true;
	return false;
}

/* The target flags, whose meaning depends on the others: see check_targets(). */
struct target_flags {
	bool children, no_children;
};

static bool target_flag(struct ht_options *o, int opt, struct target_flags *f)
{
	switch (opt) {
	case OPT_CHILDREN:
		f->children = true;
		return true;
	case OPT_NO_CHILDREN:
		f->no_children = true;
		return true;
	case OPT_ALL:
		o->targets.all = true;
		return true;
	}
	return false;
}

/* At least one target (run's command is one); --all alone; one cgroup. */
static int check_targets(struct ht_options *o, const struct target_flags *f, bool run)
{
	bool named = o->npids || o->cgroup_arg || o->unit;

	if (f->children && f->no_children)
		return ht_fail("--children and --no-children: give one");
	if (o->targets.all && (named || run || f->children || f->no_children))
		return ht_fail("--all watches every task and stands alone: no --pid, --cgroup, "
			       "--unit, --children or run beside it");
	if (o->cgroup_arg && o->unit)
		return ht_fail("--cgroup and --unit both name a cgroup: give one");
	/* The spec's list holds run's command too. */
	if (run && o->npids == HT_MAX_TARGET_PIDS)
		return ht_fail("--pid: run's command is a target too: at most %d pids beside it",
			       HT_MAX_TARGET_PIDS - 1);
	if (!run && !named && !o->targets.all)
		return ht_fail("which process? give --pid N, --cgroup PATH, --unit NAME or --all, "
			       "or use: hybtrace run -- CMD");
	/* run follows CMD's children unless told not to; --pid follows them when told. */
	o->targets.children = run ? !f->no_children : f->children;
	return 0;
}

int ht_options_parse(struct ht_options *o, int argc, char **argv, bool run, bool *want_help)
{
	const char *seen[OPT_END] = { 0 };
	struct target_flags flags = { 0 };
	uint64_t off_cpu_ns, syscall_ns;
	int opt;

	*want_help = false;
	make_long_options();
	record_cmdline(o, argc, argv);
	/* 0, not 1: glibc then forgets a previous scan (subcommands, tests, the fuzzer). */
	optind = 0;
	opterr = 0;
	/* '+': stop at the first non-option, which starts the command of `run`. */
	while ((opt = getopt_long(argc, argv, "+p:h", long_options, NULL)) != -1) {
		if (opt == 'h') {
			*want_help = true;
			return 0;
		}
		if (opt == '?' || opt == ':') {
			const char *bad = argv[optind - 1];

			if (optopt && optopt < 256 && opt == '?')
				return ht_fail("unknown option '-%c' (see hybtrace --help)", optopt);
			return ht_fail("bad option '%s' (unknown, or missing its value; see hybtrace --help)",
				       bad);
		}
		if (target_flag(o, opt, &flags))
			continue;
		if (check_repeat(seen, opt, optarg) || parse_one(o, opt, optarg))
			return -1;
	}
	off_cpu_ns = o->threshold_ns[HT_BREACH_OFF_CPU];
	syscall_ns = o->threshold_ns[HT_BREACH_SYSCALL];
	if (o->syscall_filter_on && !syscall_ns)
		return ht_fail("--syscalls needs --syscall DUR, the threshold");
	if (o->block_stacks && !off_cpu_ns && !syscall_ns)
		return ht_fail("--block-stacks shows where a thread went to sleep: it needs "
			       "--off-cpu DUR or --syscall DUR");
	if (o->filters.off_cpu_states && !off_cpu_ns)
		return ht_fail("--off-cpu-states needs --off-cpu DUR, the threshold");
	if (o->filters.off_cpu_syscalls_on && !off_cpu_ns)
		return ht_fail("--off-cpu-syscalls needs --off-cpu DUR, the threshold");
	if (o->filters.ignore_syscalls_on && !off_cpu_ns && !syscall_ns)
		return ht_fail("--ignore-syscalls filters off-CPU and syscall breaches: give "
			       "--off-cpu DUR or --syscall DUR");
	if (!o->sample_history_bytes)
		o->sample_history_bytes = o->callgraph == HT_CALLGRAPH_MODE_DWARF
						  ? HT_DEFAULT_SAMPLE_HISTORY_DWARF
						  : HT_DEFAULT_SAMPLE_HISTORY_FP;
	if (json_file_without_equals(argc, argv, run))
		return ht_fail("'%s' after --json: a file is given as --json=%s", argv[optind],
			       argv[optind]);
	if (run) {
		if (optind >= argc)
			return ht_fail("run needs a command: hybtrace run [options] -- CMD [ARGS...]");
		o->run_argv = &argv[optind];
		return check_targets(o, &flags, run);
	}
	if (optind < argc)
		return ht_fail("unexpected argument '%s' (see hybtrace --help)", argv[optind]);
	return check_targets(o, &flags, run);
}

int ht_options_resolve_targets(struct ht_options *o)
{
	struct ht_target_spec *t = &o->targets;
	const char *cgroup = o->cgroup_arg;
	char unit_cgroup[PATH_MAX];

	t->self_tgid = (int)getpid();
	if (ht_resolve_target_pids(o->pids, o->npids, t->tgids))
		return -1;
	t->ntgids = o->npids;
	for (unsigned int i = 0; i < t->ntgids; i++)
		if (t->tgids[i] == t->self_tgid)
			return ht_fail("pid %d is hybtrace itself", o->pids[i]);
	if (t->ntgids)
		o->pid = t->tgids[0];
	if (o->unit) {
		if (ht_systemd_unit_cgroup(o->unit, unit_cgroup, sizeof(unit_cgroup)))
			return -1;
		cgroup = unit_cgroup;
	}
	if (cgroup) {
		if (ht_cgroup_resolve(cgroup, t->cgroup_path, sizeof(t->cgroup_path),
				      &t->cgroup_id))
			return -1;
		t->cgroup_on = true;
	}
	return 0;
}

void ht_options_usage(void)
{
	char source_help[256];

	printf("usage: hybtrace [record] --pid N[,M...] | --cgroup PATH | --unit NAME | --all "
	       "[options]\n"
	       "       hybtrace run [options] -- CMD [ARGS...]\n"
	       "       hybtrace report FILE|DIR [--json] [--all]\n"
	       "       hybtrace decode RAW [--output DIR]\n"
	       "       hybtrace check\n"
	       "       hybtrace --version | --help\n"
	       "\n"
	       "Watches every thread of the target processes and reports latency breaches.\n"
	       "\n"
	       "Targets (at least one, or run's CMD; they combine, but --all stands alone):\n"
	       "  -p, --pid N[,M...]   processes to watch (a thread id names its process)\n"
	       "  --children           and every process they fork after attach, to any depth,\n"
	       "                       through exec (the default under run)\n"
	       "  --no-children        not the processes they fork (under run: CMD alone)\n"
	       "  --cgroup PATH        every process in cgroup v2 directory PATH and below it,\n"
	       "                       now and later (absolute, or relative to the v2 mount)\n"
	       "  --unit NAME          a systemd unit's cgroup (NAME or NAME.service)\n"
	       "  --all                every task on the machine but hybtrace's own\n"
	       "\n"
	       "Breaches:\n");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s DUR", ht_breach_kinds[k].option);
		printf("  %-19s  %s\n", flag, ht_breach_kinds[k].option_help);
	}
	printf("  --syscalls LIST      only these syscalls breach, e.g. read,futex\n"
	       "  --off-cpu-states LIST  only off-CPU waits in these states breach (S, D, T, t,\n"
	       "                       Z, P, I as the live line prints them), e.g. D or S,D\n"
	       "  --off-cpu-syscalls LIST  only off-CPU waits in these syscalls breach, e.g. futex\n"
	       "  --ignore-syscalls LIST  no off-CPU or syscall breach in these, e.g. epoll_wait\n"
	       "                       (the kernel drops what these three filter out, before\n"
	       "                       any dump or output; the summary counts it as filtered)\n"
	       "  --history SIZE       flight-recorder ring per CPU (default 8M: 262144 records,\n"
	       "                       1.3s at 100k switches and 100k wakeups a second; said at\n"
	       "                       start, checked as it runs)\n"
	       "  --duration DUR       stop after DUR (default: when the target exits)\n"
	       "  --json[=FILE]        one JSON object per line, on stdout or in FILE (- is\n"
	       "                       stdout); under run with JSON on stdout, CMD's stdout\n"
	       "                       goes to stderr\n"
	       "  --quiet              no status line on stderr\n"
	       "  --btf PATH           kernel BTF file (default /sys/kernel/btf/vmlinux)\n"
	       "  --prev-state MODE    auto, arg (tracepoint argument) or task (task_struct)\n"
	       "\n"
	       "Dumps (one Perfetto trace file per breach):\n"
	       "  --output DIR         where dumps go (default: the current directory)\n"
	       "  --pre DUR            window before the breach (default 20ms), as far back as\n"
	       "                       --history reaches: a warning says when it falls short\n"
	       "  --post DUR           window after the breach (default 2ms)\n"
	       "  --min-interval DUR   at most one dump per DUR (default 1s)\n"
	       "  --max-dumps N        dumps kept (default 20; 0: never dump)\n"
	       "  --max-dumps-per-process N  dumps kept of each process (default: no limit\n"
	       "                       but --max-dumps): the worst of each, by the same rule\n"
	       "  --max-disk SIZE      disk budget for all dumps (default 512M)\n"
	       "  --dump-policy RULE   worst (default): the worst breach of each --min-interval,\n"
	       "                       by its ratio to its threshold, and a worse one replaces\n"
	       "                       the least bad dump kept; first: the first of each\n"
	       "                       interval, until --max-dumps or --max-disk is reached\n"
	       "  --chain-depth N      levels of wakers a dump follows back from the breach's\n"
	       "                       (default 3; 0: no wait chain)\n"
	       "  --dump-on-exit       also dump the last window when stopping\n"
	       "  SIGUSR2              dump the last window now\n"
	       "\n"
	       "What the threads ran in user space:\n");
	printf("  --source SRC         %s\n", ht_sources_help(source_help, sizeof(source_help)));
	printf("  --sample-freq HZ     sampling rate per thread (default 999)\n"
	       "  --sample-history SIZE  sampling ring per CPU (default 1M; 8M with dwarf)\n"
	       "  --callgraph MODE     fp (frame pointers, default) or dwarf (for code without them)\n"
	       "  --block-stacks       take each thread's user stack as it goes to sleep, and show\n"
	       "                       it with its off-CPU and syscall breaches (--callgraph\n"
	       "                       dwarf: unwound with DWARF CFI)\n"
	       "  --pt-size SIZE       Intel PT ring per CPU, a power of two (default 4M)\n"
	       "  --pt-timing MODE     coarse (TSC and MTC, default) or fine (cycle-accurate CYC too)\n"
	       "  --keep-raw           also save each PT snapshot as FILE.hybtrace-raw, for\n"
	       "                       `hybtrace decode FILE` (here or on another machine)\n"
	       "  --max-memory SIZE    all rings together (default 512M)\n"
	       "  --rt-priority N      SCHED_FIFO priority for the event loop and freezing the\n"
	       "                       sources (default 0: off)\n"
	       "\n"
	       "Code triggers (hardware breakpoints; a hit is a dump of KIND trigger):\n"
	       "  --trigger SPEC       symbol, module:symbol, module:0xADDR, file.c:LINE, or '.' for\n"
	       "                       hybtrace_trigger() (include/hybtrace/hybtrace.h); up to 4\n"
	       "  --multi              dump at every hit (under the dump policy), not only the first\n"
	       "  -h, --help           this text\n"
	       "\n"
	       "Durations take a unit: ns, us, ms, s (2ms, 500us, 1.5s).\n"
	       "Sizes take k, M or G (64k, 4M). An option given twice is an error (--trigger and\n"
	       "flags excepted).\n"
	       "hybtrace stops, finishing the dump in progress and printing its summary, when\n"
	       "the target exits, at --duration, on SIGINT or SIGTERM, and when the reader of its\n"
	       "stdout (or JSON stream) goes away; the summary then goes to stderr. Under run,\n"
	       "CMD then gets SIGTERM, and hybtrace exits with CMD's status.\n");
}
