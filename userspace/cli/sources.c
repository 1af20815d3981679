// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The registry of on-CPU sources: each row is a source's operations (its
 * --source value is ops->name), what --help says of it and how the options
 * configure it. A new source is a row: --source, its error and --help read
 * their names here, the options name none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "cli/sources.h"
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_source.h"
#include "sources/sample/sample_source.h"
#include "sources/sample/sampler.h"
#include "symbols/unwind_dwarf.h"

/* Each source's own configuration, filled from the options. */
union source_config {
	struct ht_sampler_config sample;
	struct ht_intelpt_config pt;
};

struct source_entry {
	const struct ht_source_ops *ops;
	/* What --help says auto takes it for: "Intel PT where present" (the richest first). */
	const char *auto_help;
	const char *size_option; /* the option that sizes its rings; NULL: it has none */
	/* Its configuration for SPEC, with BUDGET_BYTES of --max-memory left; NULL: none. */
	void (*configure)(const struct ht_options *o, const struct ht_target_spec *spec,
			  int targets_fd, uint64_t budget_bytes, union source_config *cfg);
	/* Options that only it serves, given whether it was chosen; 0, or -1. */
	int (*options_check)(const struct ht_options *o, bool chosen);
};

/* The one process SPEC names and no other, or 0. */
static int only_process(const struct ht_target_spec *spec)
{
	if (spec->ntgids != 1 || spec->children || spec->cgroup_on || spec->all)
		return 0;
	return spec->tgids[0];
}

static void configure_sample(const struct ht_options *o, const struct ht_target_spec *spec,
			     int targets_fd, uint64_t budget_bytes, union source_config *cfg)
{
	(void)budget_bytes;
	cfg->sample = (struct ht_sampler_config){
		.tgid = only_process(spec),
		.targets_fd = targets_fd,
		.targets_all = spec->all,
		.self_tgid = spec->self_tgid,
		.test_one_tgid = spec->test_one_tgid,
		.freq_hz = o->sample_freq_hz,
		.ring_bytes = o->sample_history_bytes,
		.callgraph = o->callgraph == HT_CALLGRAPH_MODE_DWARF ? HT_CALLGRAPH_DWARF
								     : HT_CALLGRAPH_FP,
		.regs_mask = HT_DWARF_SAMPLE_REGS_MASK,
		.stack_bytes = HT_SAMPLE_STACK_BYTES,
	};
}

/*
 * Intel PT follows the processes named (--pid, run's command), and with
 * --children their forks, thread by thread; a set that grows otherwise
 * (--cgroup, --all) CPU by CPU: the cgroup's tasks where it is watched alone.
 */
static void configure_pt(const struct ht_options *o, const struct ht_target_spec *spec,
			 int targets_fd, uint64_t budget_bytes, union source_config *cfg)
{
	bool cpu_wide = spec->cgroup_on || spec->all;

	cfg->pt = (struct ht_intelpt_config){
		.tgid = spec->ntgids ? spec->tgids[0] : 0,
		.follow_forks = spec->children,
		.cpu_wide = cpu_wide,
		.cgroup_path = spec->cgroup_on && !spec->ntgids && !spec->children
				       ? spec->cgroup_path
				       : NULL,
		.targets_fd = targets_fd,
		.targets_all = spec->all,
		.self_tgid = spec->self_tgid,
		.aux_bytes = o->pt_size_bytes,
		.memory_budget_bytes = budget_bytes,
		/* Tests on machines without PT: the sideband, maps and raw captures, no PT bytes.
		 */
		.sideband_only = getenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY") != NULL,
		.keep_raw = o->keep_raw,
	};
	for (unsigned int i = 0; i < spec->ntgids && i < HT_INTELPT_MAX_PROCS; i++)
		cfg->pt.tgids[cfg->pt.ntgids++] = spec->tgids[i];
	ht_intelpt_request_default(&cfg->pt.request);
	cfg->pt.request.fine_timing = o->pt_fine_timing;
}

static int pt_options_check(const struct ht_options *o, bool chosen)
{
	if (o->keep_raw && !chosen)
		return ht_fail("--keep-raw saves Intel PT snapshots: it needs --source pt (or auto "
			       "on a machine with Intel PT)");
	return 0;
}

/* From the simplest to the richest: `auto` picks the last one usable here. */
static const struct source_entry sources[] = {
	{ &ht_sample_source, "sampling", "--sample-history", configure_sample, NULL },
	{ &ht_intelpt_source, "Intel PT where present", "--pt-size", configure_pt,
	  pt_options_check },
};

#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

static const struct source_entry *chosen(const struct ht_options *o)
{
	for (size_t i = 0; i < NSOURCES; i++)
		if (o->source && !strcmp(sources[i].ops->name, o->source))
			return &sources[i];
	return NULL;
}

/* ITEMS into BUF, SEP between them and LAST_SEP before the last; whole items only. */
static const char *join(char *buf, size_t len, const char *const *items, size_t n, const char *sep,
			const char *last_sep)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *before = !i ? "" : i + 1 < n ? sep : last_sep;
		int w = snprintf(buf + used, len - used, "%s%s", before, items[i]);

		if (w < 0 || (size_t)w >= len - used) {
			buf[used] = '\0';
			break;
		}
		used += (size_t)w;
	}
	return buf;
}

const char *ht_sources_lookup(const char *arg)
{
	if (!strcmp(arg, HT_SOURCE_AUTO))
		return HT_SOURCE_AUTO;
	if (!strcmp(arg, HT_SOURCE_NONE))
		return HT_SOURCE_NONE;
	for (size_t i = 0; i < NSOURCES; i++)
		if (!strcmp(arg, sources[i].ops->name))
			return sources[i].ops->name;
	return NULL;
}

/* What --source takes, as auto tries them: auto, the richest source first, none. */
const char *ht_sources_names(char *buf, size_t len)
{
	const char *names[NSOURCES + 2];
	size_t n = 0;

	names[n++] = HT_SOURCE_AUTO;
	for (size_t i = NSOURCES; i-- > 0;)
		names[n++] = sources[i].ops->name;
	names[n++] = HT_SOURCE_NONE;
	return join(buf, len, names, n, ", ", " or ");
}

const char *ht_sources_help(char *buf, size_t len)
{
	const char *items[NSOURCES];
	char picks[192], names[128];

	for (size_t i = 0; i < NSOURCES; i++)
		items[i] = sources[NSOURCES - 1 - i].auto_help;
	join(picks, sizeof(picks), items, NSOURCES, ", else ", ", else ");
	for (size_t i = 0; i < NSOURCES; i++)
		items[i] = sources[NSOURCES - 1 - i].ops->name;
	join(names, sizeof(names), items, NSOURCES, ", ", ", ");
	snprintf(buf, len, "%s (%s), %s, %s", HT_SOURCE_AUTO, picks, names, HT_SOURCE_NONE);
	return buf;
}

int ht_sources_choose(struct ht_options *o)
{
	const struct source_entry *e;

	if (!strcmp(o->source, HT_SOURCE_AUTO)) {
		for (size_t i = NSOURCES; i-- > 0;) {
			if (!sources[i].ops->usable()) {
				o->source = sources[i].ops->name;
				break;
			}
		}
	} else if ((e = chosen(o)) && e->ops->usable()) {
		char why[256];

		snprintf(why, sizeof(why), "%s", ht_last_error());
		return ht_fail("--source %s: %s", e->ops->name, why);
	}
	for (size_t i = 0; i < NSOURCES; i++)
		if (sources[i].options_check &&
		    sources[i].options_check(o, &sources[i] == chosen(o)))
			return -1;
	return 0;
}

uint64_t ht_sources_memory_bytes(const struct ht_options *o, unsigned int ncpus)
{
	const struct source_entry *e = chosen(o);
	struct ht_target_spec none = { 0 };
	union source_config cfg = { 0 };

	if (!e)
		return 0;
	if (e->configure)
		e->configure(o, &none, -1, 0, &cfg);
	return e->ops->memory_bytes(&cfg, ncpus);
}

const char *ht_sources_size_options(char *buf, size_t len)
{
	const char *options[NSOURCES];
	size_t n = 0;

	for (size_t i = 0; i < NSOURCES; i++)
		if (sources[i].size_option)
			options[n++] = sources[i].size_option;
	return join(buf, len, options, n, ", ", " or ");
}

bool ht_sources_need_perf_events(const struct ht_options *o)
{
	const struct source_entry *e = chosen(o);

	if (!strcmp(o->source, HT_SOURCE_NONE))
		return false;
	/* auto that found no source here is still counted as needing them, as it always was. */
	return !e || !e->ops->no_perf_events;
}

const char *ht_sources_title(const struct ht_options *o)
{
	const struct source_entry *e = chosen(o);

	return e ? e->ops->title : NULL;
}

int ht_sources_open(const struct ht_options *o, const struct ht_target_spec *spec, int targets_fd,
		    uint64_t budget_bytes, struct ht_open_source *v, unsigned int *n)
{
	const struct source_entry *e = chosen(o);
	union source_config cfg = { 0 };
	void *state;

	*n = 0;
	if (!e)
		return 0;
	if (e->configure)
		e->configure(o, spec, targets_fd, budget_bytes, &cfg);
	state = calloc(1, e->ops->state_bytes ? e->ops->state_bytes : 1);
	if (!state)
		return ht_fail("out of memory");
	if (e->ops->open(state, &cfg)) {
		free(state);
		return -1;
	}
	v[0] = (struct ht_open_source){.ops = e->ops, .state = state};
	*n = 1;
	return 0;
}

void ht_sources_close(struct ht_open_source *v, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		v[i].ops->close(v[i].state);
		free(v[i].state);
		v[i] = (struct ht_open_source){ 0 };
	}
}

const char *ht_sources_check(void (*row)(const char *what, bool ok, const char *detail),
			     bool *need_perf_events)
{
	const char *auto_line = "none: neither Intel PT nor cpu-clock sampling works here";
	const struct source_entry *pick = NULL;

	for (size_t i = 0; i < NSOURCES; i++) {
		if (sources[i].ops->check(row)) {
			auto_line = sources[i].ops->check_auto;
			pick = &sources[i];
		}
	}
	/* Where no source works, perf events are still asked for, as they always were. */
	*need_perf_events = !pick || !pick->ops->no_perf_events;
	return auto_line;
}
