// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sampling behind the on-CPU source interface: the rings are copied at the
 * freeze, parsed, unwound and symbolized into thread slices when lowered.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "sources/sample/sample_source.h"
#include "sources/sample/sampler.h"
#include "sources/sample/user_timeline.h"
#include "trace/dump_schema.h"
#include "trace/timeline.h"

static_assert(sizeof(struct ht_sampler_frozen) <= HT_SOURCE_FROZEN_BYTES,
	      "a frozen sampler fits in a capture's slot");

static bool sample_check(void (*row)(const char *what, bool ok, const char *detail))
{
	int clk = ht_sampler_probe();

	row("cpu-clock sampling", clk == 0, clk ? strerror(-clk) : "(software event)");
	return clk == 0;
}

static int sample_usable(void)
{
	return 0;
}

static uint64_t sample_memory_bytes(const void *config, unsigned int ncpus)
{
	const struct ht_sampler_config *cfg = config;

	return (uint64_t)ncpus * cfg->ring_bytes;
}

static int sample_open(void *state, const void *config)
{
	return ht_sampler_open(state, config);
}

static const char *sample_dump_name(const void *state)
{
	(void)state;
	return "sample";
}

static void sample_announce(const void *state, FILE *f)
{
	const struct ht_sampler *s = state;

	fprintf(f, "hybtrace: on-CPU source: sampling at %u Hz with %s call stacks%s\n",
		s->cfg.freq_hz, s->cfg.callgraph == HT_CALLGRAPH_DWARF ? "DWARF" : "frame-pointer",
		access("/sys/bus/event_source/devices/intel_pt", F_OK)
			? " (no Intel PT on this machine)"
			: "");
}

static unsigned int sample_symbols(const void *state)
{
	const struct ht_sampler *s = state;

	return HT_SOURCE_SYMBOLS | (s->cfg.callgraph == HT_CALLGRAPH_DWARF ? HT_SOURCE_DWARF : 0);
}

static int sample_freeze(void *state, const struct ht_source_freeze *f, void *frozen)
{
	if (!ht_sampler_freeze(state, f->t0, frozen))
		return 0;
	ht_warn("dump without user-space stacks: %s", ht_last_error());
	return -1;
}

/* Sampled stacks on the thread tracks. */
static void sample_lower(const void *state, const void *frozen, const struct ht_source_lowering *l)
{
	const struct ht_sampler *sampler = state;
	struct timeline *tl = l->tl;
	struct ht_sample_set set;
	struct ht_user_window uw;
	char count[32];

	tl_meta_set(tl, HT_META_SOURCE, "sample");
	snprintf(count, sizeof(count), "%u", sampler->cfg.freq_hz);
	tl_meta_set(tl, HT_META_SAMPLE_FREQ, count);
	tl_meta_set(tl, HT_META_CALLGRAPH,
		    sampler->cfg.callgraph == HT_CALLGRAPH_DWARF ? "dwarf" : "fp");
	ht_source_meta_u64(tl, HT_META_FREEZE_LATE, l->frozen_ns - l->t1);
	if (!frozen)
		return;
	/* Every target process's samples, each on its thread's track, by its own symbols. */
	if (ht_sampler_frozen_samples(frozen, l->t0, l->t1, &set))
		return;
	uw = (struct ht_user_window){
		.t0 = l->t0,
		.t1 = l->t1,
		.period_ns = sampler->period_ns,
		.samples = &set,
		.symbols = l->symbols,
		.dwarf = sampler->cfg.callgraph == HT_CALLGRAPH_DWARF,
		.ksyms = l->ksyms,
		.comms = l->comms,
		.breach = l->breach,
	};
	if (ht_user_timeline_build(tl, &uw))
		ht_warn("dump without user-space stacks: %s", ht_last_error());
	ht_source_meta_u64(tl, HT_META_SAMPLES, set.count);
	ht_source_meta_u64(tl, HT_META_SAMPLES_FOREIGN, set.foreign);
	ht_source_meta_u64(tl, HT_META_LOSS_SAMPLES, set.lost);
	ht_source_meta_u64(tl, HT_META_LOSS_THROTTLE, set.throttled);
	ht_source_meta_u64(tl, HT_META_LOSS_SAMPLES_BAD, set.malformed);
	ht_source_meta_u64(tl, HT_META_SAMPLES_REBUILT, set.rebuilt);
	ht_sample_set_free(&set);
}

static void sample_frozen_free(void *frozen)
{
	ht_sampler_frozen_free(frozen);
}

static void sample_close(void *state)
{
	ht_sampler_close(state);
}

const struct ht_source_ops ht_sample_source = {
	.name = "sample",
	.title = "sampling",
	.state_bytes = sizeof(struct ht_sampler),
	.check = sample_check,
	.check_auto = "sampling (cpu-clock), as there is no Intel PT",
	.usable = sample_usable,
	.memory_bytes = sample_memory_bytes,
	.open = sample_open,
	.dump_name = sample_dump_name,
	.announce = sample_announce,
	.symbols = sample_symbols,
	.freeze = sample_freeze,
	.lower = sample_lower,
	.frozen_free = sample_frozen_free,
	.close = sample_close,
};
