// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The freeze, on the event loop: every area disabled, copied oldest first
 * and enabled again, the sideband rings copied, clock pairs and maps taken
 * into a raw capture.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_private.h"
#include "base/log.h"
#include "symbols/target_files.h"

/* The mmap page's conversion, read under its sequence lock. */
static void read_time_conv(const struct perf_event_mmap_page *pg, struct ht_perf_time_conv *t)
{
	uint32_t seq;
	int tries = 0;

	do {
		seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
		t->cap_user_time = pg->cap_user_time;
		t->cap_user_time_zero = pg->cap_user_time_zero;
		t->time_shift = pg->time_shift;
		t->time_mult = pg->time_mult;
		t->time_zero = pg->time_zero;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq && ++tries < 100);
	if (!t->cap_user_time)
		memset(t, 0, sizeof(*t));
}

static void set_all(struct ht_intelpt *pt, unsigned int cpu, unsigned long request)
{
	ioctl(pt->areas[cpu].fd, request, 0);
	for (size_t i = 0; i < pt->nthreads; i++)
		if (pt->threads[i].pt_fds[cpu] >= 0)
			ioctl(pt->threads[i].pt_fds[cpu], request, 0);
}

static void note_frozen(uint64_t now, uint64_t *first, uint64_t *last)
{
	if (!*first)
		*first = now;
	*last = now;
}

/* Disable, copy, enable every area. Every area is enabled again whatever happens. */
static int freeze_areas(struct ht_intelpt *pt, struct ht_rawcap *out, uint64_t *first,
			uint64_t *last)
{
	uint64_t *frozen = calloc(pt->ncpus, sizeof(*frozen));
	int rc = 0;

	out->streams = calloc(pt->ncpus, sizeof(*out->streams));
	if (!frozen || !out->streams) {
		free(frozen);
		return ht_fail("out of memory freezing Intel PT");
	}
	/* Every area first, so the last one stops as soon after the trigger as can be. */
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		if (!pt->areas[c].aux)
			continue;
		set_all(pt, c, PERF_EVENT_IOC_DISABLE);
		frozen[c] = clock_ns(CLOCK_MONOTONIC);
		note_frozen(frozen[c], first, last);
	}
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		struct ht_intelpt_area *a = &pt->areas[c];
		struct perf_event_mmap_page *pg = a->base;
		struct ht_rawcap_stream *s;
		uint64_t head;

		if (!a->aux)
			continue;
		head = __atomic_load_n(&pg->aux_head, __ATOMIC_ACQUIRE);
		if (!rc) {
			s = &out->streams[out->nstreams];
			s->data = malloc(a->aux_len);
			if (s->data) {
				s->cpu = c;
				s->tid = a->tid;
				s->ring_bytes = a->aux_len;
				s->aux_head = head;
				s->frozen_ns = frozen[c];
				s->len = ht_intelpt_ring_copy(a->aux, a->aux_len, head, s->data);
				out->nstreams++;
			} else {
				rc = ht_fail("out of memory copying the Intel PT area of CPU %u",
					     c);
			}
		}
		set_all(pt, c, PERF_EVENT_IOC_ENABLE);
	}
	free(frozen);
	return rc;
}

static int freeze_sideband(struct ht_intelpt *pt, struct ht_rawcap *out, uint64_t *first,
			   uint64_t *last)
{
	out->sidebands = calloc(pt->ncpus, sizeof(*out->sidebands));
	if (!out->sidebands)
		return ht_fail("out of memory copying the sideband");
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		struct ht_intelpt_sbring *r = &pt->rings[c];
		struct perf_event_mmap_page *pg = r->base;
		struct ht_rawcap_sideband *s = &out->sidebands[out->nsidebands];
		size_t len;
		uint64_t head;
		int rc;

		if (!r->base)
			continue;
		/* Paused only while it is copied. */
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
		s->frozen_ns = clock_ns(CLOCK_MONOTONIC);
		head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		rc = ht_perf_backward_linearize((const uint8_t *)r->base + pg->data_offset,
						r->data_size, head, &s->data, &len);
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
		if (rc)
			return -1;
		if (pt->cfg.sideband_only)
			note_frozen(s->frozen_ns, first, last);
		s->cpu = c;
		s->len = len;
		out->nsidebands++;
	}
	return 0;
}

static void fill_config(const struct ht_intelpt *pt, struct ht_rawcap *out)
{
	struct ht_rawcap_pt_config *c = &out->pt;

	c->pmu_type = pt->pmu.type;
	c->config = pt->config;
	c->fields = pt->fields;
	c->aux_bytes = pt->cfg.sideband_only ? 0 : pt->cfg.aux_bytes;
	c->sideband_sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE;
	c->has_max_nonturbo_ratio = pt->pmu.has_max_nonturbo_ratio;
	c->max_nonturbo_ratio = pt->pmu.max_nonturbo_ratio;
	c->has_tsc_art_ratio = pt->pmu.has_tsc_art_ratio;
	c->tsc_art_num = pt->pmu.tsc_art_num;
	c->tsc_art_den = pt->pmu.tsc_art_den;
	out->cpuid = pt->cpuid;
	for (unsigned int cpu = 0; cpu < pt->ncpus; cpu++) {
		void *page = pt->areas[cpu].base ? pt->areas[cpu].base : pt->rings[cpu].base;

		if (page) {
			read_time_conv(page, &out->time_conv);
			break;
		}
	}
}

/* Processes whose maps one freeze reads at most: more are left to the attach-time maps. */
#define FREEZE_MAX_PROCS 256

static bool has_pid(const int *pids, size_t n, int pid)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/*
 * Whether the sideband's process PID is one whose code a freeze reads:
 * with follow_forks any (the events are only on the targets and their
 * forks), with events per CPU a target's.
 */
static bool traced_pid(const struct ht_intelpt *pt, int pid)
{
	if (pid <= 0)
		return false;
	return !pt->cfg.cpu_wide || ht_targets_has(&pt->targets, pid);
}

/*
 * The processes the frozen trace may hold: those named, and with
 * follow_forks every one the sideband shows (their forks, which inherited
 * the events, after an exec too); with events per CPU, every target
 * process it shows.
 */
static size_t traced_pids(const struct ht_intelpt *pt, const struct ht_rawcap *out, int *pids)
{
	bool from_sideband = pt->cfg.follow_forks || pt->cfg.cpu_wide;
	size_t n = 0;

	for (unsigned int i = 0; i < pt->cfg.ntgids && n < FREEZE_MAX_PROCS; i++)
		if (!has_pid(pids, n, pt->cfg.tgids[i]))
			pids[n++] = pt->cfg.tgids[i];
	for (size_t i = 0; from_sideband && i < out->nsidebands; i++) {
		struct ht_sb_set set = {0};

		if (ht_sb_parse(out->sidebands[i].data, out->sidebands[i].len,
				HT_INTELPT_SIDEBAND_SAMPLE_TYPE, &set))
			break;
		for (size_t j = 0; j < set.count && n < FREEZE_MAX_PROCS; j++) {
			int pid = (int)set.v[j].pid;

			if (traced_pid(pt, pid) && !has_pid(pids, n, pid))
				pids[n++] = pid;
		}
		ht_sb_set_free(&set);
	}
	return n;
}

/* PID's executable mappings now into OUT's next MAPS, and the vdso once. */
static int freeze_proc_maps(struct ht_intelpt *pt, int pid, struct ht_rawcap *out)
{
	struct ht_target target;
	struct ht_maps maps;
	int rc;

	/* A process that just exited leaves its attach-time mappings only. */
	if (ht_maps_read(pid, &maps))
		return 0;
	ht_target_init(&target, pid);
	ht_target_reopen_root(&target);
	rc = ht_intelpt_read_exec_maps(pt, &maps, &target, &out->maps[out->nmaps]);
	if (!rc)
		out->maps[out->nmaps++].pid = pid;
	if (!rc && !out->vdso)
		rc = ht_intelpt_copy_vdso(&maps, &target, out);
	ht_target_close(&target);
	ht_maps_free(&maps);
	return rc;
}

/* Mappings at attach and now, each process's own, and the vdso. */
static int freeze_maps(struct ht_intelpt *pt, struct ht_rawcap *out)
{
	int pids[FREEZE_MAX_PROCS];
	size_t npids = traced_pids(pt, out, pids);

	out->maps = calloc(pt->nattach_maps + npids + 1, sizeof(*out->maps));
	if (!out->maps)
		return ht_fail("out of memory");
	for (size_t i = 0; i < pt->nattach_maps; i++) {
		if (!pt->attach_maps[i].count)
			continue;
		if (ht_intelpt_copy_maps(&out->maps[out->nmaps++], &pt->attach_maps[i]))
			return ht_fail("out of memory");
	}
	for (size_t i = 0; i < npids; i++)
		if (freeze_proc_maps(pt, pids[i], out))
			return -1;
	return 0;
}

int ht_intelpt_freeze(struct ht_intelpt *pt, uint64_t trigger_ns, struct ht_rawcap *out)
{
	uint64_t first = 0, last = 0;
	struct ht_clock_pair now;

	memset(out, 0, sizeof(*out));
	if (!pt->open)
		return ht_fail("Intel PT capture is not open");
	out->trigger_ns = trigger_ns;
	if (!pt->cfg.sideband_only && freeze_areas(pt, out, &first, &last))
		goto fail;
	if (freeze_sideband(pt, out, &first, &last))
		goto fail;
	out->freeze_first_ns = first > trigger_ns ? first - trigger_ns : 0;
	out->freeze_last_ns = last > trigger_ns ? last - trigger_ns : 0;
	ht_clock_pair_take(&now, CLOCK_PAIR_TRIES, HT_CLOCK_AT_FREEZE);
	out->clocks = calloc(2, sizeof(*out->clocks));
	if (!out->clocks) {
		ht_fail("out of memory");
		goto fail;
	}
	out->clocks[out->nclocks++] = pt->attach_pair;
	out->clocks[out->nclocks++] = now;
	out->snap_mono_ns = clock_ns(CLOCK_MONOTONIC);
	out->snap_boot_ns = clock_ns(CLOCK_BOOTTIME);
	out->snap_real_ns = clock_ns(CLOCK_REALTIME);
	out->pid = pt->cfg.tgid; /* 0 with events per CPU for a cgroup or every task */
	if (pt->cfg.tgid > 0)
		ht_intelpt_read_comm(pt->cfg.tgid, out->comm, sizeof(out->comm));
	fill_config(pt, out);
	if (freeze_maps(pt, out))
		goto fail;
	return 0;
fail:
	ht_rawcap_free(out);
	return -1;
}
