// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Intel PT behind the on-CPU source interface: the freeze keeps a raw
 * capture (the rings and all a decode needs), lowering decodes it into call
 * stacks, and with --keep-raw it is saved next to its dump.
 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "base/log.h"
#include "base/machine.h"
#include "base/output.h"
#include "kernel/comm_cache.h"
#include "kernel/recorder.h"
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_source.h"
#include "sources/intelpt/pt_dump.h"
#include "symbols/ksyms.h"
#include "trace/dump_schema.h"
#include "trace/timeline.h"

#define INTEL_PT_SYSFS "/sys/bus/event_source/devices/intel_pt"

static_assert(sizeof(struct ht_rawcap) <= HT_SOURCE_FROZEN_BYTES,
	      "a raw capture fits in a capture's slot");

static bool pt_check(void (*row)(const char *what, bool ok, const char *detail))
{
	struct ht_intelpt_info info;

	ht_intelpt_probe(NULL, &info);
	row("intel_pt", info.present, info.why);
	row("PT exact stop (aux_pause)", info.aux_pause == HT_AUX_PAUSE_YES, info.aux_pause_why);
	return info.present;
}

static int pt_usable(void)
{
	if (access(INTEL_PT_SYSFS, F_OK) == 0 || getenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY"))
		return 0;
	return ht_fail("this machine has no Intel PT (no " INTEL_PT_SYSFS "); use --source sample");
}

static uint64_t pt_memory_bytes(const void *config, unsigned int ncpus)
{
	const struct ht_intelpt_config *cfg = config;

	return ht_intelpt_memory_needed(cfg->aux_bytes, HT_INTELPT_SIDEBAND_BYTES, ncpus, false);
}

static int pt_open(void *state, const void *config)
{
	return ht_intelpt_open(state, config);
}

static uint64_t pt_threads_left_out(const void *state)
{
	const struct ht_intelpt *pt = state;

	return pt->threads_left_out;
}

static void pt_reap(void *state)
{
	ht_intelpt_reap(state);
}

/* The test mode opened no PT event: its dumps must not pass for Intel PT ones. */
static const char *pt_source_name(bool sideband_only)
{
	return sideband_only ? HT_SOURCE_PT_SIDEBAND_ONLY : "pt";
}

static const char *pt_dump_name(const void *state)
{
	const struct ht_intelpt *pt = state;

	return pt_source_name(pt->cfg.sideband_only);
}

/* How the events follow the targets (intelpt_capture.h). */
static const char *pt_events_of(const struct ht_intelpt *pt)
{
	if (!pt->cfg.cpu_wide)
		return "events per thread";
	return pt->cfg.cgroup_path ? "events per CPU for the cgroup's tasks"
				   : "events per CPU for every task";
}

static void pt_announce(const void *state, FILE *f)
{
	const struct ht_intelpt *pt = state;

	if (pt->cfg.sideband_only)
		fprintf(f, "hybtrace: on-CPU source: Intel PT's sideband only (test mode "
			   "HYBTRACE_TEST_PT_SIDEBAND_ONLY: no PT event, no PT data), %s\n",
			pt_events_of(pt));
	else
		fprintf(f, "hybtrace: on-CPU source: Intel PT, %lluk per CPU, %s timing, %s\n",
			(unsigned long long)(pt->cfg.aux_bytes >> 10),
			pt->cfg.request.fine_timing ? "fine (CYC)" : "coarse (TSC, MTC)",
			pt_events_of(pt));
}

/* The rings, and what a decode needs besides them to make the same dump later. */
static int pt_freeze(void *state, const struct ht_source_freeze *f, void *frozen)
{
	struct ht_rawcap *raw = frozen;

	if (ht_intelpt_freeze(state, f->frozen_ns, raw)) {
		ht_warn("dump without Intel PT: %s", ht_last_error());
		return -1;
	}
	snprintf(raw->kind, sizeof(raw->kind), "%s", f->kind);
	snprintf(raw->version, sizeof(raw->version), "%s", HT_VERSION);
	raw->threshold_ns = f->threshold_ns;
	raw->start_ns = f->start_ns;
	raw->end_ns = f->end_ns;
	raw->pre_ns = f->pre_ns;
	raw->post_ns = f->post_ns;
	raw->has_breach = f->breach != NULL;
	if (f->breach)
		raw->breach = *f->breach;
	return 0;
}

/* Every call and return of the target's threads, decoded from the frozen rings. */
static void pt_lower(const void *state, const void *frozen, const struct ht_source_lowering *l)
{
	const struct ht_intelpt *pt = state;
	const struct ht_rawcap *raw = frozen;
	struct timeline *tl = l->tl;
	struct ht_pt_dump_stats st;
	char config[128];
	struct ht_pt_dump_input in = { .cap = raw, .tgid = l->tgid, .t0 = l->t0 };

	if (!raw) {
		tl_meta_set(tl, HT_META_SOURCE, pt_source_name(pt->cfg.sideband_only));
		return;
	}
	tl_meta_set(tl, HT_META_SOURCE, pt_source_name(ht_rawcap_sideband_only(raw)));
	/* Set at open only: never a silent gap (offline the session's count is not known). */
	if (pt)
		ht_source_meta_u64(tl, HT_META_LOSS_PT_LEFT_OUT, pt->threads_left_out);
	tl_meta_set(tl, HT_META_PT_CONFIG,
		    ht_pt_fields_format(&raw->pt.fields, config, sizeof(config)));
	ht_source_meta_u64(tl, HT_META_PT_FREEZE_FIRST, raw->freeze_first_ns);
	ht_source_meta_u64(tl, HT_META_PT_FREEZE_LAST, raw->freeze_last_ns);
	/* Live, each process's files are read in its own mount namespace. */
	in.live_roots = l->live;
	if (ht_pt_dump_build(tl, &in, &st)) {
		ht_warn("dump without Intel PT call stacks: %s", ht_last_error());
		return;
	}
	ht_source_meta_u64(tl, HT_META_PT_BYTES, st.bytes);
	ht_source_meta_u64(tl, HT_META_PT_INSNS, st.insns);
	ht_source_meta_u64(tl, HT_META_PT_THREADS, st.threads);
	ht_source_meta_u64(tl, HT_META_PT_PROCESSES, st.processes);
	ht_source_meta_u64(tl, HT_META_PT_FROM, st.first_ns);
	ht_source_meta_u64(tl, HT_META_LOSS_PT_ERRORS, st.errors);
	ht_source_meta_u64(tl, HT_META_LOSS_PT_OVF, st.overflows);
	ht_source_meta_u64(tl, HT_META_LOSS_PT_ITEMS, st.items_dropped);
	ht_source_meta_u64(tl, HT_META_LOSS_PT_IMAGE, st.image_skipped);
}

/* A raw capture carries its moment on three clocks, and, once kept, the machine it was made on. */
static bool pt_origin(const void *frozen, struct ht_source_origin *o)
{
	const struct ht_rawcap *raw = frozen;
	bool made_elsewhere = raw->kernel[0] != '\0';

	*o = (struct ht_source_origin){
		.mono_ns = raw->snap_mono_ns,
		.boot_ns = raw->snap_boot_ns,
		.real_ns = raw->snap_real_ns,
		.kernel = made_elsewhere ? raw->kernel : NULL,
		.cpu_model = made_elsewhere ? raw->cpu_model : NULL,
		.cmdline = made_elsewhere ? raw->cmdline : NULL,
	};
	return true;
}

static void save_comm(struct ht_comm_cache *comms, struct ht_rawcap *raw, uint32_t pid,
		      unsigned int cpu)
{
	char name[HT_COMM_LEN + 8];

	if (!pid)
		return;
	ht_comm_lookup(comms, pid, cpu, name, sizeof(name));
	if (strcmp(name, "[exited]"))
		ht_rawcap_add_comm(raw, pid, name);
}

/* The names the dump gave every task of the window, so a decode elsewhere gives the same. */
static void save_comms(struct ht_comm_cache *comms, int tgid, const struct ht_fr_window *w,
		       struct ht_rawcap *raw)
{
	save_comm(comms, raw, (uint32_t)tgid, 0);
	for (size_t i = 0; i < w->count; i++) {
		save_comm(comms, raw, w->events[i].rec.tid_a, w->events[i].cpu);
		save_comm(comms, raw, w->events[i].rec.tid_b, w->events[i].cpu);
	}
	for (unsigned int cpu = 0; cpu < w->ncpus; cpu++) {
		if (!w->entry_valid || !w->entry_valid[cpu])
			continue;
		save_comm(comms, raw, w->entry_switch[cpu].rec.tid_a, cpu);
		save_comm(comms, raw, w->entry_switch[cpu].rec.tid_b, cpu);
	}
	if (raw->has_breach)
		save_comm(comms, raw, raw->breach.waker_tid, raw->breach.wake_cpu);
}

/* The names of the breach's kernel stack: the capture may be decoded under another kernel. */
static void save_ksyms(const struct ht_ksyms *ksyms, struct ht_rawcap *raw)
{
	int depth = raw->breach.kstack_bytes > 0 ? raw->breach.kstack_bytes / 8 : 0;

	if (!raw->has_breach || !ksyms)
		return;
	for (int i = 0; i < depth && i < HT_MAX_KSTACK_DEPTH; i++) {
		uint64_t start;
		const char *name = ht_ksyms_find(ksyms, raw->breach.kstack[i], &start);

		if (name && ht_rawcap_add_ksym(raw, start, name))
			return;
	}
}

/*
 * --keep-raw: the snapshot next to its dump, under the dump's own name. A
 * failure costs the raw file only: the dump is written already.
 */
static void pt_written(const void *state, const void *frozen, struct ht_source_written *wr)
{
	const struct ht_intelpt *pt = state;
	struct ht_rawcap raw = *(const struct ht_rawcap *)frozen; /* a view: it owns nothing */
	const char *name = strrchr(wr->dump_path, '/');
	char base[256], final[PATH_MAX + 64];
	struct utsname u;
	size_t n;

	if (!pt || !pt->cfg.keep_raw)
		return;
	name = name ? name + 1 : wr->dump_path;
	n = strlen(name);
	if (n > strlen(HT_DUMP_SUFFIX) &&
	    !strcmp(name + n - strlen(HT_DUMP_SUFFIX), HT_DUMP_SUFFIX))
		n -= strlen(HT_DUMP_SUFFIX);
	snprintf(base, sizeof(base), "%.*s", (int)n, name);
	raw.has_window = true;
	raw.window = *wr->w;
	raw.comms = NULL;
	raw.ncomms = raw.comms_cap = 0;
	raw.ksyms = NULL;
	raw.nksyms = 0;
	save_comms(wr->comms, wr->tgid, wr->w, &raw);
	save_ksyms(wr->ksyms, &raw);
	/* Where and how it was made, read here rather than in the event loop's freeze. */
	uname(&u);
	snprintf(raw.kernel, sizeof(raw.kernel), "%s", u.release);
	ht_machine_cpu_model(raw.cpu_model, sizeof(raw.cpu_model));
	snprintf(raw.cmdline, sizeof(raw.cmdline), "%s", wr->cmdline ? wr->cmdline : "");
	if (ht_rawcap_save(wr->output_dir, base, &raw, final, sizeof(final))) {
		ht_warn("raw capture not kept: %s", ht_last_error());
	} else {
		snprintf(wr->kept_path, wr->kept_len, "%s", final);
		if (!wr->json)
			ht_note("raw capture kept: %s", final);
	}
	free(raw.comms);
	for (size_t i = 0; i < raw.nksyms; i++)
		free(raw.ksyms[i].name);
	free(raw.ksyms);
}

static void pt_frozen_free(void *frozen)
{
	ht_rawcap_free(frozen);
}

static void pt_close(void *state)
{
	ht_intelpt_close(state);
}

const struct ht_source_ops ht_intelpt_source = {
	.name = "pt",
	.title = "Intel PT",
	.state_bytes = sizeof(struct ht_intelpt),
	.check = pt_check,
	.check_auto = "Intel PT",
	.usable = pt_usable,
	.memory_bytes = pt_memory_bytes,
	.open = pt_open,
	.threads_left_out = pt_threads_left_out,
	.reap = pt_reap,
	.dump_name = pt_dump_name,
	.announce = pt_announce,
	.freeze = pt_freeze,
	.lower = pt_lower,
	.origin = pt_origin,
	.written = pt_written,
	.frozen_free = pt_frozen_free,
	.close = pt_close,
};

struct ht_rawcap *ht_intelpt_frozen_offline(struct ht_source_frozen *slot)
{
	memset(slot, 0, sizeof(*slot));
	slot->ops = &ht_intelpt_source;
	slot->frozen = true;
	return (struct ht_rawcap *)slot->u.bytes;
}
