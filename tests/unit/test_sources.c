// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The registry of on-CPU sources: what --source auto picks, the errors, the memory shares. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "cli/options.h"
#include "cli/sources.h"
#include "sources/intelpt/intelpt_capture.h"

#define INTEL_PT_SYSFS "/sys/bus/event_source/devices/intel_pt"

static void options(struct ht_options *o, const char *source)
{
	ht_options_init(o);
	o->source = source;
	o->sample_history_bytes = 1ULL << 20;
	/* One process named, as --pid N or run's command. */
	o->targets.tgids[0] = 4242;
	o->targets.ntgids = 1;
}

TEST(auto_takes_pt_where_there_is_pt)
{
	struct ht_options o;

	setenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY", "1", 1);
	options(&o, HT_SOURCE_AUTO);
	CHECK(!ht_sources_choose(&o));
	CHECK_STR(o.source, "pt");
	CHECK_STR(ht_sources_title(&o), "Intel PT");
	/* What --max-memory counts for PT: the AUX areas and the sideband rings, as mapped. */
	CHECK_EQ_U64(
		ht_sources_memory_bytes(&o, 4),
		ht_intelpt_memory_needed(o.pt_size_bytes, HT_INTELPT_SIDEBAND_BYTES, 4, false));
	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
}

/* Intel PT follows a cgroup or every task too (events per CPU): auto takes it there as well. */
TEST(auto_takes_pt_for_a_cgroup_or_every_task)
{
	struct ht_options o;

	setenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY", "1", 1);
	options(&o, HT_SOURCE_AUTO);
	o.targets.ntgids = 0;
	o.targets.cgroup_on = true;
	CHECK(!ht_sources_choose(&o));
	CHECK_STR(o.source, "pt");
	options(&o, HT_SOURCE_AUTO);
	o.targets.ntgids = 0;
	o.targets.all = true;
	CHECK(!ht_sources_choose(&o));
	CHECK_STR(o.source, "pt");
	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
}

TEST(auto_samples_without_pt)
{
	struct ht_options o;

	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
	if (!access(INTEL_PT_SYSFS, F_OK))
		SKIP_TEST("this machine has Intel PT");
	options(&o, HT_SOURCE_AUTO);
	CHECK(!ht_sources_choose(&o));
	CHECK_STR(o.source, "sample");
	CHECK_STR(ht_sources_title(&o), "sampling");
	CHECK_EQ_U64(ht_sources_memory_bytes(&o, 4), 4 * (1ULL << 20));
}

TEST(source_pt_without_pt_is_one_line)
{
	struct ht_options o;

	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
	if (!access(INTEL_PT_SYSFS, F_OK))
		SKIP_TEST("this machine has Intel PT");
	options(&o, "pt");
	CHECK(ht_sources_choose(&o) == -1);
	CHECK_STR(ht_last_error(), "--source pt: this machine has no Intel PT (no " INTEL_PT_SYSFS
				   "); use --source sample");
}

TEST(keep_raw_needs_pt)
{
	static const char *const others[] = { "sample", HT_SOURCE_NONE };
	struct ht_options o;

	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		options(&o, others[i]);
		o.keep_raw = true;
		CHECK(ht_sources_choose(&o) == -1);
		CHECK_STR(ht_last_error(), "--keep-raw saves Intel PT snapshots: it needs --source "
					   "pt (or auto on a machine with Intel PT)");
	}
	setenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY", "1", 1);
	options(&o, "pt");
	o.keep_raw = true;
	CHECK(!ht_sources_choose(&o));
	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
}

TEST(the_options_that_size_the_rings)
{
	char buf[128];

	/* Said by the --max-memory error: "lower --history, %s, or raise --max-memory". */
	CHECK_STR(ht_sources_size_options(buf, sizeof(buf)), "--sample-history or --pt-size");
	CHECK_STR(ht_sources_size_options(buf, 20), "--sample-history");
}

TEST(none_is_no_source)
{
	struct ht_options o;
	struct ht_open_source v[HT_SOURCES_OPEN_MAX];
	struct ht_target_spec self = { .tgids = { getpid() }, .ntgids = 1 };
	unsigned int n = 7;

	options(&o, HT_SOURCE_NONE);
	CHECK(!ht_sources_choose(&o));
	CHECK_STR(o.source, HT_SOURCE_NONE);
	CHECK(ht_sources_title(&o) == NULL);
	CHECK_EQ_U64(ht_sources_memory_bytes(&o, 4), 0);
	CHECK(!ht_sources_open(&o, &self, -1, 0, v, &n));
	CHECK(n == 0);
}

/* Whether S begins with PREFIX and ends with SUFFIX. */
static bool framed(const char *s, const char *prefix, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return !strncmp(s, prefix, strlen(prefix)) && n >= m && !strcmp(s + n - m, suffix);
}

/*
 * --source's names, its error and its --help line come from the registry,
 * as they read before ("auto, pt, sample or none"; "auto (Intel PT where
 * present, else sampling), pt, sample, none"), with room for more sources.
 */
TEST(source_names_come_from_the_registry)
{
	char buf[256];

	CHECK_STR(ht_sources_lookup("pt"), "pt");
	CHECK_STR(ht_sources_lookup("sample"), "sample");
	CHECK_STR(ht_sources_lookup("auto"), HT_SOURCE_AUTO);
	CHECK_STR(ht_sources_lookup("none"), HT_SOURCE_NONE);
	CHECK(ht_sources_lookup("Intel PT") == NULL);
	CHECK(ht_sources_lookup("") == NULL);
	ht_sources_names(buf, sizeof(buf));
	CHECK(framed(buf, "auto, pt, sample", " or none"));
	CHECK_STR(ht_sources_names(buf, 12), "auto, pt");
	ht_sources_help(buf, sizeof(buf));
	CHECK(framed(buf, "auto (Intel PT where present, else sampling", ", none"));
	CHECK(strstr(buf, "), pt, sample, ") != NULL);
}

TEST(source_option_parses_through_the_registry)
{
	char *argv[] = { "hybtrace", "--pid", "1", "--source", "sample", NULL };
	char *bad[] = { "hybtrace", "--pid", "1", "--source", "lbr", NULL };
	struct ht_options o;
	bool help;

	ht_options_init(&o);
	CHECK_STR(o.source, HT_SOURCE_AUTO);
	CHECK(!ht_options_parse(&o, 5, argv, false, &help));
	CHECK_STR(o.source, "sample");
	ht_options_init(&o);
	CHECK(ht_options_parse(&o, 5, bad, false, &help) == -1);
	CHECK(framed(ht_last_error(), "--source: 'lbr' is not auto, pt, sample", " or none"));
	CHECK_STR(o.source, HT_SOURCE_AUTO);
}

/* perf_event_paranoid stands in the way of the sources that open perf events only. */
TEST(which_sources_need_perf_events)
{
	struct ht_options o;

	options(&o, "sample");
	CHECK(ht_sources_need_perf_events(&o));
	options(&o, "pt");
	CHECK(ht_sources_need_perf_events(&o));
	options(&o, HT_SOURCE_NONE);
	CHECK(!ht_sources_need_perf_events(&o));
	/* auto that found nothing usable asks for them, as before. */
	options(&o, HT_SOURCE_AUTO);
	CHECK(ht_sources_need_perf_events(&o));
}
