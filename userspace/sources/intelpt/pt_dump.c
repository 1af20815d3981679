// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sources/intelpt/callstack.h"
#include "sources/intelpt/intelpt_decode.h"
#include "base/log.h"
#include "sources/intelpt/pt_dump.h"
#include "sources/intelpt/pt_resolver.h"
#include "trace/timeline.h"

/* A context switch seen in the sideband, on one CPU. */
struct cpu_switch {
	uint64_t time_ns;
	uint32_t pid, tid;
	bool in;
};

struct cpu_switches {
	uint32_t cpu;
	struct cpu_switch *v;
	size_t count;
};

/* Items of one thread on one CPU, from one sync point or enable to the next. */
struct run {
	int32_t tid; /* -1: no thread known */
	int32_t pid; /* its process */
	bool foreign;
	uint64_t first_ns;
	size_t stream; /* keeps runs of equal time in decode order */
	size_t first, count; /* into the item store */
};

/* The code the threads ran: the last reading of the mappings, the vdso from its copy. */
struct image_maps {
	struct ht_pt_mapping *v;
	char **paths;
	size_t count;
};

/* One traced process: its own code, decoded and named from its own files. */
struct proc_image {
	int pid;
	const struct ht_rawcap_maps *last; /* its last reading of the mappings */
	struct image_maps maps;
	struct ht_pt_image *image;
	struct ht_pt_elf_resolver *resolver;
};

struct pt_dump {
	const struct ht_pt_dump_input *in;
	struct proc_image *procs;
	size_t nprocs;
	struct ht_pt_dump_stats *st;
	struct cpu_switches *cpus;
	size_t ncpus;
	/* What every stream decoded into, in decode order. */
	struct ht_pt_item *items;
	size_t nitems, items_cap, max_items;
	struct run *runs;
	size_t nruns, runs_cap;
	/* The stream being decoded, and where its runs and items begin. */
	size_t stream;
	size_t stream_first_run, stream_first_item, stream_share;
	const struct cpu_switches *sw;
	int32_t owner_tid, owner_pid;
	bool in_run;
};

static int cmp_switch(const void *a, const void *b)
{
	const struct cpu_switch *x = a, *y = b;

	return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

static struct cpu_switches *switches_of(struct pt_dump *d, uint32_t cpu)
{
	for (size_t i = 0; i < d->ncpus; i++)
		if (d->cpus[i].cpu == cpu)
			return &d->cpus[i];
	return NULL;
}

/* Every sideband's switches, per CPU, in time order. */
static int read_switches(struct pt_dump *d)
{
	const struct ht_rawcap *cap = d->in->cap;

	d->cpus = calloc(cap->nsidebands ? cap->nsidebands : 1, sizeof(*d->cpus));
	if (!d->cpus)
		return ht_fail("out of memory");
	for (size_t i = 0; i < cap->nsidebands; i++) {
		const struct ht_rawcap_sideband *sb = &cap->sidebands[i];
		struct cpu_switches *cs = switches_of(d, sb->cpu);
		struct ht_sb_set set = { 0 };
		struct cpu_switch *grown;
		size_t n = 0;

		if (ht_sb_parse(sb->data, sb->len, cap->pt.sideband_sample_type, &set))
			return -1;
		if (!cs) {
			cs = &d->cpus[d->ncpus++];
			cs->cpu = sb->cpu;
		}
		for (size_t j = 0; j < set.count; j++)
			n += set.v[j].kind == HT_SB_SWITCH_IN || set.v[j].kind == HT_SB_SWITCH_OUT;
		grown = realloc(cs->v, (cs->count + n + 1) * sizeof(*cs->v));
		if (!grown) {
			ht_sb_set_free(&set);
			return ht_fail("out of memory");
		}
		cs->v = grown;
		for (size_t j = 0; j < set.count; j++) {
			const struct ht_sb_event *e = &set.v[j];

			if (e->kind != HT_SB_SWITCH_IN && e->kind != HT_SB_SWITCH_OUT)
				continue;
			cs->v[cs->count++] = (struct cpu_switch){
				.time_ns = e->time_ns,
				.pid = e->pid,
				.tid = e->tid,
				.in = e->kind == HT_SB_SWITCH_IN,
			};
		}
		ht_sb_set_free(&set);
		qsort(cs->v, cs->count, sizeof(*cs->v), cmp_switch);
	}
	return 0;
}

static const struct proc_image *proc_of(const struct pt_dump *d, int pid)
{
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	return NULL;
}

/*
 * The thread on the stream's CPU at T: the last switch-in at or before T.
 * A switch-out last means the run's first timestamp came a little early
 * (TSC conversion): the thread is the next one in. *PID gets its process;
 * *FOREIGN is set for a process the capture holds no code of (not traced).
 */
static int32_t thread_at(const struct pt_dump *d, uint64_t t, int32_t *pid, bool *foreign)
{
	const struct cpu_switches *cs = d->sw;
	const struct cpu_switch *hit = NULL;
	size_t lo = 0, hi;

	*foreign = false;
	*pid = d->owner_pid;
	if (!cs || !cs->count)
		return d->owner_tid;
	hi = cs->count;
	while (lo < hi) { /* first switch after T */
		size_t mid = (lo + hi) / 2;

		if (cs->v[mid].time_ns <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && cs->v[lo - 1].in)
		hit = &cs->v[lo - 1];
	else if (lo == 0 && !cs->v[0].in)
		hit = &cs->v[0]; /* before the first switch: whoever left first was on */
	for (size_t i = lo; !hit && i < cs->count; i++)
		if (cs->v[i].in)
			hit = &cs->v[i];
	if (!hit)
		hit = &cs->v[lo - 1];
	*pid = (int32_t)hit->pid;
	*foreign = !proc_of(d, (int)hit->pid);
	return (int32_t)hit->tid;
}

/* The decoder's image_at: the code of the process on the stream's CPU at TIME_NS. */
static const struct ht_pt_image *image_at(void *ctx, uint64_t time_ns)
{
	const struct pt_dump *d = ctx;
	const struct proc_image *p;
	int32_t pid;
	bool foreign;

	thread_at(d, time_ns, &pid, &foreign);
	p = proc_of(d, pid);
	return p ? p->image : NULL;
}

static int start_run(struct pt_dump *d)
{
	if (d->nruns == d->runs_cap) {
		size_t cap = d->runs_cap ? 2 * d->runs_cap : 64;
		struct run *grown = realloc(d->runs, cap * sizeof(*grown));

		if (!grown)
			return ht_fail("out of memory");
		d->runs = grown;
		d->runs_cap = cap;
	}
	d->runs[d->nruns++] = (struct run){ .tid = -1, .stream = d->stream, .first = d->nitems };
	d->in_run = true;
	return 0;
}

/*
 * The stream has used its share of the store: its older half goes, so what
 * is kept is always the newest trace, the part nearest the trigger.
 */
static void drop_oldest_half(struct pt_dump *d)
{
	size_t have = d->nitems - d->stream_first_item, drop = have / 2 ? have / 2 : have;
	size_t cut = d->stream_first_item + drop, kept = d->stream_first_run;

	for (size_t i = d->stream_first_run; i < d->nruns; i++) {
		struct run *r = &d->runs[i];
		size_t end = r->first + r->count;

		if (end <= cut && i + 1 < d->nruns)
			continue; /* wholly dropped (the current run always stays) */
		if (r->first < cut) {
			r->count = end > cut ? end - cut : 0;
			r->first = cut;
		}
		r->first -= drop;
		d->runs[kept++] = *r;
	}
	d->nruns = kept;
	memmove(&d->items[d->stream_first_item], &d->items[cut],
		(d->nitems - cut) * sizeof(*d->items));
	d->nitems -= drop;
	d->st->items_dropped += drop;
}

static int keep_item(struct pt_dump *d, const struct ht_pt_item *it)
{
	struct run *r;

	/* Before the window: its stack is rebuilt from what follows (back-dated frames). */
	if (d->in->t0 && it->time_ns && it->time_ns < d->in->t0) {
		d->st->items_before++;
		return 0;
	}
	if (d->nitems - d->stream_first_item >= d->stream_share)
		drop_oldest_half(d);
	if (d->nitems == d->items_cap) {
		size_t cap = d->items_cap ? 2 * d->items_cap : 4096;
		struct ht_pt_item *grown;

		if (cap > d->stream_first_item + d->stream_share)
			cap = d->stream_first_item + d->stream_share;
		grown = realloc(d->items, cap * sizeof(*grown));
		if (!grown)
			return ht_fail("out of memory");
		d->items = grown;
		d->items_cap = cap;
	}
	d->items[d->nitems++] = *it;
	r = &d->runs[d->nruns - 1];
	r->count++;
	if (r->tid < 0 && it->time_ns) {
		r->first_ns = it->time_ns;
		r->tid = thread_at(d, it->time_ns, &r->pid, &r->foreign);
	}
	return 0;
}

/* The decoder's sink: items into runs, a new run at every point the thread may change. */
static int route_items(void *ctx, const struct ht_pt_item *items, size_t n)
{
	struct pt_dump *d = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct ht_pt_item *it = &items[i];
		bool boundary = it->kind == HT_PT_ITEM_SYNC || it->kind == HT_PT_ITEM_ENABLED ||
				(it->kind == HT_PT_ITEM_OVERFLOW && it->ip);

		if ((boundary || !d->in_run) && start_run(d))
			return -1;
		if (keep_item(d, it))
			return -1;
	}
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

static void pt_cpu_of(const struct ht_rawcap *cap, struct ht_pt_cpu_info *cpu)
{
	memset(cpu, 0, sizeof(*cpu));
	ht_pt_cpu_from_cpuid(cpu, cap->cpuid.vendor, cap->cpuid.leaf1[0]);
	cpu->mtc_freq = cap->pt.fields.mtc_period;
	cpu->nom_freq = cap->pt.has_max_nonturbo_ratio ? (uint8_t)cap->pt.max_nonturbo_ratio : 0;
	/*
	 * sysfs tsc_art_ratio reads "EBX:EAX" of cpuid 0x15 (the kernel's
	 * tsc_art_num is ebx, tsc_art_den eax): TSC = ART x num / den. The
	 * capture's cpuid values hold the same leaf when sysfs did not.
	 */
	if (cap->pt.has_tsc_art_ratio) {
		cpu->tsc_art_eax = cap->pt.tsc_art_den;
		cpu->tsc_art_ebx = cap->pt.tsc_art_num;
	} else if (cap->cpuid.max_leaf >= 0x15) {
		cpu->tsc_art_eax = cap->cpuid.leaf15[0];
		cpu->tsc_art_ebx = cap->cpuid.leaf15[1];
	}
	cpu->tsc = cap->pt.fields.tsc;
	cpu->mtc = cap->pt.fields.mtc;
	cpu->cyc = cap->pt.fields.cyc;
	cpu->noretcomp = cap->pt.fields.noretcomp;
}

static int pt_clock_of(const struct ht_rawcap *cap, struct ht_pt_clock *clock)
{
	struct ht_pt_clock_pair *pairs;
	int rc;

	/* Without a pair, PT times cannot be put on the kernel's clock, nor routed. */
	if (!cap->nclocks)
		return ht_fail("the capture has no (TSC, CLOCK_MONOTONIC) pairs");
	pairs = calloc(cap->nclocks, sizeof(*pairs));
	if (!pairs)
		return ht_fail("out of memory");
	for (size_t i = 0; i < cap->nclocks; i++)
		pairs[i] = (struct ht_pt_clock_pair){ cap->clocks[i].tsc, cap->clocks[i].mono_ns };
	rc = ht_pt_clock_init(clock, pairs, cap->nclocks, ht_cpuid_tsc_hz(&cap->cpuid));
	free(pairs);
	return rc;
}

static void image_maps_free(struct image_maps *m)
{
	for (size_t i = 0; i < m->count; i++)
		free(m->paths[i]);
	free(m->paths);
	free(m->v);
}

static int image_maps_of(const struct ht_rawcap *cap, const struct ht_rawcap_maps *last,
			 const char *root, struct image_maps *out)
{
	size_t n = last ? last->count : 0;

	memset(out, 0, sizeof(*out));
	out->v = calloc(n + 1, sizeof(*out->v));
	out->paths = calloc(n + 1, sizeof(*out->paths));
	if (!out->v || !out->paths)
		return ht_fail("out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct ht_rawcap_mapping *m = &last->v[i];
		struct ht_pt_mapping *pm = &out->v[out->count];

		if (!m->path || !m->path[0])
			continue;
		*pm = (struct ht_pt_mapping){ .start = m->start, .end = m->end,
					      .file_offset = m->offset };
		if (!strcmp(m->path, "[vdso]")) {
			/* One kernel's vdso: the same bytes wherever each process has it. */
			if (!cap->vdso || m->end - m->start != cap->vdso_len)
				continue;
			pm->data = cap->vdso;
			pm->data_len = cap->vdso_len;
		} else if (m->path[0] == '/') {
			if (asprintf(&out->paths[out->count], "%s%s", root ? root : "", m->path) < 0)
				return ht_fail("out of memory");
			pm->path = out->paths[out->count];
		} else {
			continue; /* [stack], anonymous JIT code: no copy to decode from */
		}
		out->count++;
	}
	return 0;
}

static int maps_pid(const struct ht_rawcap *cap, const struct ht_rawcap_maps *m)
{
	return m->pid ? m->pid : cap->pid;
}

/*
 * Every process the capture holds code of, each with its last reading of
 * its mappings; without any, the target alone, with no code.
 */
static int read_procs(struct pt_dump *d)
{
	const struct ht_rawcap *cap = d->in->cap;

	d->procs = calloc(cap->nmaps + 1, sizeof(*d->procs));
	if (!d->procs)
		return ht_fail("out of memory");
	for (size_t i = 0; i < cap->nmaps; i++) {
		int pid = maps_pid(cap, &cap->maps[i]);
		struct proc_image *p = (struct proc_image *)proc_of(d, pid);

		if (!p) {
			p = &d->procs[d->nprocs++];
			p->pid = pid;
		}
		p->last = &cap->maps[i];
	}
	if (!d->nprocs)
		d->procs[d->nprocs++].pid = d->in->tgid ? d->in->tgid : cap->pid;
	for (size_t i = 0; i < d->nprocs; i++) {
		struct proc_image *p = &d->procs[i];
		char root[64];
		const char *r = d->in->file_root;

		/* Live, each process's files are read in its own mount namespace. */
		if (d->in->live_roots) {
			snprintf(root, sizeof(root), "/proc/%d/root", p->pid);
			r = access(root, R_OK) ? NULL : root;
		}
		if (image_maps_of(cap, p->last, r, &p->maps))
			return -1;
		p->image = ht_pt_image_new(p->maps.v, p->maps.count);
		p->resolver = p->image ? ht_pt_elf_resolver_new(p->maps.v, p->maps.count) : NULL;
		if (!p->resolver)
			return -1;
		d->st->image_skipped += ht_pt_image_skipped(p->image, NULL);
	}
	return 0;
}

static void free_procs(struct pt_dump *d)
{
	for (size_t i = 0; d->procs && i < d->nprocs; i++) {
		ht_pt_elf_resolver_free(d->procs[i].resolver);
		ht_pt_image_free(d->procs[i].image);
		image_maps_free(&d->procs[i].maps);
	}
	free(d->procs);
}

/* The process named first (the capture's own), else the first with code. */
static const struct proc_image *main_proc(const struct pt_dump *d)
{
	const struct proc_image *p = proc_of(d, d->in->tgid ? d->in->tgid : d->in->cap->pid);

	return p ? p : &d->procs[0];
}

/* A stream's runs from FIRST on: empty ones go, untimed ones are the owner's. */
static void settle_runs(struct pt_dump *d, size_t first)
{
	size_t kept = first;

	for (size_t i = first; i < d->nruns; i++) {
		struct run *r = &d->runs[i];

		if (!r->count)
			continue;
		if (r->tid < 0 && !r->first_ns) {
			r->tid = d->owner_tid;
			r->pid = d->owner_pid;
		}
		d->runs[kept++] = *r;
	}
	d->nruns = kept;
}

/* Decode every stream into runs. */
static int decode_streams(struct pt_dump *d, const struct ht_pt_decode_opts *opts)
{
	const struct ht_rawcap *cap = d->in->cap;

	for (size_t i = 0; i < cap->nstreams; i++) {
		const struct ht_rawcap_stream *s = &cap->streams[i];
		struct ht_pt_decode_stats ds = { 0 };

		d->stream = i;
		d->stream_first_run = d->nruns;
		d->stream_first_item = d->nitems;
		/* Each stream gets an equal share of the store: every CPU keeps its newest. */
		d->stream_share = d->max_items / cap->nstreams;
		if (d->stream_share < 2)
			d->stream_share = 2;
		d->sw = switches_of(d, s->cpu);
		d->owner_tid = s->tid >= 0 ? s->tid : -1;
		d->owner_pid = main_proc(d)->pid;
		d->in_run = false;
		if (ht_pt_decode(s->data, s->len, opts, route_items, d, &ds))
			return -1;
		settle_runs(d, d->stream_first_run);
		d->st->streams++;
		d->st->bytes += s->len;
		d->st->insns += ds.insns;
		d->st->blocks += ds.blocks;
		d->st->syncs += ds.syncs;
		d->st->errors += ds.errors;
		d->st->overflows += ds.overflows;
	}
	return 0;
}

static void note_span(struct ht_pt_dump_stats *st, const struct ht_pt_item *it, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!it[i].time_ns)
			continue;
		if (!st->first_ns || it[i].time_ns < st->first_ns)
			st->first_ns = it[i].time_ns;
		if (it[i].time_ns > st->last_ns)
			st->last_ns = it[i].time_ns;
	}
}

/* Feed each thread's runs, in time order, to a call stack on its track under its process. */
static int draw_threads(struct pt_dump *d, struct timeline *tl)
{
	if (d->nruns)
		qsort(d->runs, d->nruns, sizeof(*d->runs), cmp_run);
	for (size_t i = 0; i < d->nruns;) {
		int32_t tid = d->runs[i].tid, pid = d->runs[i].pid;
		const struct proc_image *p = proc_of(d, pid);
		const struct ht_ocaml_eh *const *eh = NULL;
		size_t j = i;
		struct ht_callstack_config cc = { 0 };
		struct ht_callstack_stats cst;
		struct ht_callstack *cs;
		int track;

		while (j < d->nruns && d->runs[j].tid == tid && d->runs[j].pid == pid)
			j++;
		if (tid < 0 || d->runs[i].foreign || !p) {
			d->st->foreign_runs += j - i;
			i = j;
			continue;
		}
		track = tl_thread_track(tl, pid, tid);
		if (track < 0)
			return ht_fail("timeline: %s", tl_strerror(tl));
		cc.tl = tl;
		cc.track = track;
		cc.resolve = d->in->resolve ? d->in->resolve : ht_pt_elf_resolve;
		cc.resolve_ctx = d->in->resolve ? d->in->resolve_ctx : (void *)p->resolver;
		cc.nocaml = ht_pt_elf_resolver_ocaml(p->resolver, &eh);
		cc.ocaml = eh;
		cs = ht_callstack_new(&cc);
		if (!cs)
			return -1;
		for (; i < j; i++) {
			const struct run *run = &d->runs[i];

			d->st->runs++;
			note_span(d->st, &d->items[run->first], run->count);
			if (ht_callstack_items(cs, &d->items[run->first], run->count)) {
				ht_callstack_free(cs);
				return -1;
			}
		}
		if (ht_callstack_finish(cs, 0)) {
			ht_callstack_free(cs);
			return -1;
		}
		ht_callstack_get_stats(cs, &cst);
		d->st->slices += cst.slices;
		d->st->gaps += cst.gaps;
		d->st->threads++;
		ht_callstack_free(cs);
	}
	return 0;
}

int ht_pt_dump_build(struct timeline *tl, const struct ht_pt_dump_input *in,
		     struct ht_pt_dump_stats *stats)
{
	struct ht_pt_dump_stats local;
	struct pt_dump d = { .in = in, .st = stats ? stats : &local };
	struct ht_pt_decode_opts opts = {0};
	struct ht_pt_cpu_info cpu;
	struct ht_pt_clock clock = { 0 };
	int rc = -1;

	memset(d.st, 0, sizeof(*d.st));
	d.max_items = in->max_items ? in->max_items : HT_PT_DUMP_MAX_ITEMS;
	pt_cpu_of(in->cap, &cpu);
	if (pt_clock_of(in->cap, &clock) || read_procs(&d) || read_switches(&d))
		goto out;
	d.st->processes = d.nprocs;
	opts = (struct ht_pt_decode_opts){.cpu = &cpu,
					  .clock = &clock,
					  .image = main_proc(&d)->image,
					  .image_at = image_at,
					  .image_ctx = &d};
	if (decode_streams(&d, &opts) || draw_threads(&d, tl))
		goto out;
	rc = 0;
out:
	free_procs(&d);
	ht_pt_clock_free(&clock);
	for (size_t i = 0; i < d.ncpus; i++)
		free(d.cpus[i].v);
	free(d.cpus);
	free(d.items);
	free(d.runs);
	return rc;
}
