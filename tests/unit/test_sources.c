// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The registry of on-CPU sources: what --source auto picks, the errors, the memory shares. */
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "cli/options.h"
#include "cli/sources.h"
#include "sources/intelpt/intelpt_capture.h"

#define INTEL_PT_SYSFS "/sys/bus/event_source/devices/intel_pt"

static void options(struct ht_options *o, enum ht_source source)
{
	ht_options_init(o);
	o->source = source;
	o->sample_history_bytes = 1ULL << 20;
}

TEST(auto_takes_pt_where_there_is_pt)
{
	struct ht_options o;

	setenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY", "1", 1);
	options(&o, HT_SOURCE_AUTO);
	CHECK(!ht_sources_choose(&o));
	CHECK(o.source == HT_SOURCE_PT);
	CHECK_STR(ht_sources_title(&o), "Intel PT");
	/* What --max-memory counts for PT: the AUX areas and the sideband rings, as mapped. */
	CHECK_EQ_U64(
		ht_sources_memory_bytes(&o, 4),
		ht_intelpt_memory_needed(o.pt_size_bytes, HT_INTELPT_SIDEBAND_BYTES, 4, false));
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
	CHECK(o.source == HT_SOURCE_SAMPLE);
	CHECK_STR(ht_sources_title(&o), "sampling");
	CHECK_EQ_U64(ht_sources_memory_bytes(&o, 4), 4 * (1ULL << 20));
}

TEST(source_pt_without_pt_is_one_line)
{
	struct ht_options o;

	unsetenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");
	if (!access(INTEL_PT_SYSFS, F_OK))
		SKIP_TEST("this machine has Intel PT");
	options(&o, HT_SOURCE_PT);
	CHECK(ht_sources_choose(&o) == -1);
	CHECK_STR(ht_last_error(), "--source pt: this machine has no Intel PT (no " INTEL_PT_SYSFS
				   "); use --source sample");
}

TEST(keep_raw_needs_pt)
{
	static const enum ht_source others[] = { HT_SOURCE_SAMPLE, HT_SOURCE_NONE };
	struct ht_options o;

	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		options(&o, others[i]);
		o.keep_raw = true;
		CHECK(ht_sources_choose(&o) == -1);
		CHECK_STR(ht_last_error(), "--keep-raw saves Intel PT snapshots: it needs --source "
					   "pt (or auto on a machine with Intel PT)");
	}
	setenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY", "1", 1);
	options(&o, HT_SOURCE_PT);
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
	CHECK(o.source == HT_SOURCE_NONE);
	CHECK(ht_sources_title(&o) == NULL);
	CHECK_EQ_U64(ht_sources_memory_bytes(&o, 4), 0);
	CHECK(!ht_sources_open(&o, &self, -1, 0, v, &n));
	CHECK(n == 0);
}
