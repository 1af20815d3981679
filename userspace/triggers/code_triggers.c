// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "triggers/code_triggers.h"
#include "base/log.h"
#include "base/proc.h"
#include "kernel/targets.h"
#include "symbols/symbolizer.h"

/*
 * Descriptors kept free for the monitor (maps, programs, links, rings) when
 * the first process is armed before it loads.
 */
#define FDS_FOR_THE_MONITOR 256

/* ---- The processes known ---- */

static struct ht_trigger_proc *find_proc(struct ht_code_triggers *ct, int tgid)
{
	for (size_t i = 0; i < ct->nprocs; i++)
		if (ct->procs[i].tgid == tgid)
			return &ct->procs[i];
	return NULL;
}

/* A new entry for TGID (pointers into ct->procs may move), or NULL. */
static struct ht_trigger_proc *add_proc(struct ht_code_triggers *ct, int tgid)
{
	struct ht_trigger_proc *p;

	if (ct->nprocs == ct->cap) {
		size_t cap = ct->cap ? ct->cap * 2 : 8;
		struct ht_trigger_proc *v = realloc(ct->procs, cap * sizeof(*v));

		if (!v)
			return NULL;
		ct->procs = v;
		ct->cap = cap;
	}
	p = &ct->procs[ct->nprocs++];
	memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	return p;
}

/* The process whose symbols and breakpoints a hit in TGID is of: itself or what it inherited. */
static struct ht_trigger_proc *owner_of(struct ht_code_triggers *ct, int tgid)
{
	struct ht_trigger_proc *p = find_proc(ct, tgid);

	if (p && p->covered_by)
		p = find_proc(ct, p->covered_by);
	return p && p->open ? p : NULL;
}

/* ---- Arming ---- */

/* Threads left out since the last word about P: one line each time. */
static void say_left_out(struct ht_code_triggers *ct, struct ht_trigger_proc *p)
{
	size_t n = ht_bp_threads_left_out(&p->bps);
	struct rlimit rl = {0, 0};

	/* Before the monitor attached, threads were left out for its sake: tried again then. */
	if (!ct->targets || n <= p->left_said)
		return;
	getrlimit(RLIMIT_NOFILE, &rl);
	fprintf(stderr,
		"hybtrace: triggers: %zu thread%s of pid %d left without breakpoints: no "
		"descriptors left under RLIMIT_NOFILE (%llu); raise it with ulimit -n\n",
		n - p->left_said, n - p->left_said == 1 ? "" : "s", p->tgid,
		(unsigned long long)rl.rlim_cur);
	p->left_said = n;
}

/* The session's view of spec I, from process P's: armed somewhere, or why not yet. */
static void note_spec(struct ht_code_triggers *ct, size_t i, const struct ht_trigger *tr,
		      bool *first_wait)
{
	struct ht_trigger *all = &ct->specs.v[i];

	*first_wait = false;
	if (tr->resolved)
		all->ever_resolved = 1;
	if (!tr->resolved && tr->pending[0] && !all->pending[0]) {
		snprintf(all->pending, sizeof(all->pending), "%s", tr->pending);
		*first_wait = true;
	}
}

/* Move every trigger of P a resolve changed; one that became unresolved is removed. */
static int apply_changes(struct ht_code_triggers *ct, struct ht_trigger_proc *p, bool all)
{
	char what[HT_TRIGGER_TEXT_MAX + 64];

	for (size_t i = 0; i < p->specs.count; i++) {
		const struct ht_trigger *tr = &p->specs.v[i];
		bool first_wait;

		if (!all && !tr->changed)
			continue;
		if (ht_bp_set(&p->bps, (unsigned int)i, tr->resolved ? tr->addr : 0))
			return -1;
		note_spec(ct, i, tr, &first_wait);
		if (tr->resolved)
			fprintf(stderr, "hybtrace: trigger %s (pid %d) armed\n",
				ht_trigger_describe(tr, what, sizeof(what)), p->tgid);
		else if (first_wait)
			fprintf(stderr, "hybtrace: trigger %s waits: %s\n", tr->spec.text,
				tr->pending);
	}
	say_left_out(ct, p);
	return 0;
}

/*
 * P's own breakpoints: the specs resolved in its mappings, events on each
 * of its threads. Returns 0, or -1 with ht_last_error() (P stays, unarmed).
 */
static int arm_proc(struct ht_code_triggers *ct, struct ht_trigger_proc *p, unsigned int wait)
{
	struct ht_bp_config cfg = {
		.tgid = p->tgid,
		.multi = ct->multi,
		/* Without --children a fork's inherited hits are not a target's. */
		.forks = ct->children,
		/* One-shot across processes: after the hit, later ones are set disarmed. */
		.start_disarmed = !ct->multi && ct->fired,
		/* Armed before the monitor loads: room is kept for its maps, programs, links. */
		.fds_reserved = ct->targets ? 0 : FDS_FOR_THE_MONITOR,
	};

	p->covered_by = 0;
	ht_triggers_init(&p->specs);
	for (size_t i = 0; i < ct->specs.count; i++)
		if (ht_triggers_add(&p->specs, ct->specs.v[i].spec.text))
			return -1;
	p->symbolizer = ht_symbolizer_new(p->tgid);
	if (!p->symbolizer)
		return -1;
	if (ht_triggers_resolve(&p->specs, p->symbolizer, p->tgid, wait) < 0)
		return -1;
	if (ht_bp_open(&p->bps, &cfg))
		return -1;
	p->open = true;
	ct->fds_changed = true;
	return apply_changes(ct, p, true);
}

static int push(struct ht_bp_hits *out, const struct ht_bp_hit *h)
{
	if (out->count == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 16;
		struct ht_bp_hit *v = realloc(out->v, cap * sizeof(*v));

		if (!v)
			return -1;
		out->v = v;
		out->cap = cap;
	}
	out->v[out->count++] = *h;
	return 0;
}

/* IN's hits of P into OUT: its own, and its targets forks'; the rest are foreign. */
static void merge(struct ht_code_triggers *ct, struct ht_trigger_proc *p, struct ht_bp_hits *in,
		  struct ht_bp_hits *out)
{
	for (size_t i = 0; i < in->count; i++) {
		const struct ht_bp_hit *h = &in->v[i];

		/* The kernel's bitmap: a fork just made is a target before its event is read. */
		if ((int)h->pid != p->tgid &&
		    (!ct->targets || !ht_targets_has(ct->targets, (int)h->pid))) {
			out->foreign++;
			continue;
		}
		if (push(out, h))
			out->lost++;
	}
	out->in_flight += in->in_flight;
	out->lost += in->lost;
	out->stale += in->stale;
	out->foreign += in->foreign;
	out->malformed += in->malformed;
	out->execs += in->execs;
	out->mmaps += in->mmaps;
}

/* What P held goes; its hits still in the rings wait for the next drain. */
static void disarm_proc(struct ht_code_triggers *ct, struct ht_trigger_proc *p)
{
	if (p->open) {
		struct ht_bp_hits h = {0};

		if (!ht_bp_drain(&p->bps, &h)) {
			h.execs = h.mmaps = 0; /* no code to follow any more */
			merge(ct, p, &h, &ct->carry);
		}
		ht_bp_hits_free(&h);
		ct->left_gone += ht_bp_threads_left_out(&p->bps);
		ht_bp_close(&p->bps);
		ct->fds_changed = true;
	}
	ht_symbolizer_free(p->symbolizer);
	p->symbolizer = NULL;
	p->open = false;
}

static void warn_proc(const struct ht_trigger_proc *p)
{
	ht_warn("triggers: pid %d: %s", p->tgid, ht_last_error());
}

/*
 * TGID leaves: what it held is closed. Closing its events takes the ones
 * its forks inherited with them: those are armed on their own now.
 */
static void remove_proc(struct ht_code_triggers *ct, int tgid)
{
	struct ht_trigger_proc *p = find_proc(ct, tgid);

	if (!p)
		return;
	disarm_proc(ct, p);
	*p = ct->procs[--ct->nprocs];
	for (size_t i = 0; i < ct->nprocs; i++) {
		struct ht_trigger_proc *q = &ct->procs[i];

		if (q->covered_by != tgid)
			continue;
		if (arm_proc(ct, q, HT_TRIGGERS_WAIT)) {
			warn_proc(q);
			disarm_proc(ct, q);
		}
	}
}

/* ---- Lifecycle ---- */

int ht_code_triggers_open(struct ht_code_triggers *ct, int tgid, char *const *specs, size_t n,
			  bool multi, bool children, unsigned int wait)
{
	struct ht_trigger_proc *p;

	memset(ct, 0, sizeof(*ct));
	ct->multi = multi;
	ct->children = children;
	ht_triggers_init(&ct->specs);
	for (size_t i = 0; i < n; i++)
		if (ht_triggers_add(&ct->specs, specs[i]))
			return -1;
	/* Per-thread events for every thread of every target: as many descriptors as allowed. */
	ht_raise_nofile();
	ct->open = true;
	if (tgid > 0) {
		p = add_proc(ct, tgid);
		if (!p || arm_proc(ct, p, wait)) {
			if (!p)
				ht_fail("out of memory");
			ht_code_triggers_close(ct);
			return -1;
		}
	}
	/*
	 * Armed triggers that can never fire: said once the specs hold, the
	 * session going on for its breaches.
	 */
	ct->never_fire = ht_bp_fires() == 0;
	if (ct->never_fire)
		ht_warn("--trigger: hardware breakpoints do not fire on this machine (one on a "
			"function of hybtrace's was taken but never hit: a virtual machine that does "
			"not give its guests the debug registers): no trigger will fire");
	return 0;
}

void ht_code_triggers_close(struct ht_code_triggers *ct)
{
	for (size_t i = 0; i < ct->nprocs; i++)
		disarm_proc(ct, &ct->procs[i]);
	free(ct->procs);
	free(ct->execs);
	ht_bp_hits_free(&ct->carry);
	memset(ct, 0, sizeof(*ct));
}

void ht_code_triggers_follow(struct ht_code_triggers *ct, const struct ht_targets *targets)
{
	if (!ct->open)
		return;
	ct->targets = targets;
	/* Never equal to the set's counts: the first sync looks at every process. */
	ct->targets_joined = UINT64_MAX;
	for (size_t i = 0; i < ct->nprocs; i++) {
		struct ht_trigger_proc *p = &ct->procs[i];

		if (!p->open)
			continue;
		if (ht_bp_retry_left_out(&p->bps))
			warn_proc(p);
		say_left_out(ct, p);
	}
}

void ht_code_triggers_exec(struct ht_code_triggers *ct, int tgid)
{
	struct ht_trigger_proc *p;

	if (!ct->open || !ct->targets)
		return;
	/* Its own events follow it through the exec (their side band): nothing to do. */
	p = find_proc(ct, tgid);
	if (p && p->open)
		return;
	for (size_t i = 0; i < ct->nexecs; i++)
		if (ct->execs[i] == tgid)
			return;
	if (ct->nexecs == ct->execs_cap) {
		size_t cap = ct->execs_cap ? ct->execs_cap * 2 : 16;
		int *v = realloc(ct->execs, cap * sizeof(*v));

		if (!v)
			return;
		ct->execs = v;
		ct->execs_cap = cap;
	}
	ct->execs[ct->nexecs++] = tgid;
}

static bool execd(const struct ht_code_triggers *ct, int tgid)
{
	for (size_t i = 0; i < ct->nexecs; i++)
		if (ct->execs[i] == tgid)
			return true;
	return false;
}

/*
 * A target process not known yet: covered by what it inherited when an
 * armed process forked it (and it has not exec'd since), else armed.
 */
static void join_proc(struct ht_code_triggers *ct, const struct ht_target_proc *tp)
{
	struct ht_trigger_proc *parent = NULL, *p;
	int covered_by = 0;

	/* A fork (--children, or into the watched cgroup) names its parent. */
	if (tp->parent_tgid > 0 && !execd(ct, tp->tgid))
		parent = find_proc(ct, tp->parent_tgid);
	if (parent)
		covered_by = parent->covered_by ? parent->covered_by
			     : parent->open	? parent->tgid
						: 0;
	p = add_proc(ct, tp->tgid);
	if (!p)
		return;
	if (covered_by) {
		p->covered_by = covered_by;
		return;
	}
	if (arm_proc(ct, p, HT_TRIGGERS_WAIT)) {
		warn_proc(p);
		disarm_proc(ct, p);
	}
}

void ht_code_triggers_sync(struct ht_code_triggers *ct)
{
	const struct ht_targets *t = ct->targets;

	if (!ct->open || !t)
		return;
	if (t->joined == ct->targets_joined && t->left == ct->targets_left && !ct->nexecs)
		return;
	ct->targets_joined = t->joined;
	ct->targets_left = t->left;
	/* Gone first: a fork's parent that left no longer covers it. */
	for (size_t i = ct->nprocs; i-- > 0;)
		if (i < ct->nprocs && !ht_targets_find(t, ct->procs[i].tgid))
			remove_proc(ct, ct->procs[i].tgid);
	/* A covered process that exec'd lost what it inherited: armed on its own. */
	for (size_t i = 0; i < ct->nexecs; i++) {
		struct ht_trigger_proc *p = find_proc(ct, ct->execs[i]);

		if (p && !p->open && arm_proc(ct, p, HT_TRIGGERS_WAIT)) {
			warn_proc(p);
			disarm_proc(ct, p);
		}
	}
	for (size_t i = 0; i < t->count; i++)
		if (!find_proc(ct, t->v[i].tgid))
			join_proc(ct, &t->v[i]);
	ct->nexecs = 0;
}

size_t ht_code_triggers_fds(const struct ht_code_triggers *ct, int *fds, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < ct->nprocs && n < max; i++)
		if (ct->procs[i].open)
			n += ht_bp_poll_fds(&ct->procs[i].bps, fds + n, max - n);
	return n;
}

/* ---- Hits ---- */

/* P's code changed under its triggers: resolve again, move what moved. */
static void follow_code(struct ht_code_triggers *ct, struct ht_trigger_proc *p,
			const struct ht_bp_hits *hits)
{
	unsigned int flags = HT_TRIGGERS_WAIT;

	if (hits->execs) {
		/* A new image: every old address is gone. */
		ht_bp_exec(&p->bps);
		ht_triggers_reset(&p->specs);
		flags |= HT_TRIGGERS_FORCE;
	}
	if (ht_triggers_resolve(&p->specs, p->symbolizer, p->tgid, flags) < 0 ||
	    apply_changes(ct, p, hits->execs != 0))
		ht_warn("triggers: %s", ht_last_error());
}

static int hit_cmp(const void *x, const void *y)
{
	const struct ht_bp_hit *a = x, *b = y;

	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/*
 * One-shot across processes: the earliest hit is the one; every other
 * process's breakpoints are disabled, and what their rings held counts as
 * in flight.
 */
static void one_shot(struct ht_code_triggers *ct, struct ht_bp_hits *out)
{
	if (!out->count)
		return;
	if (ct->fired) {
		out->in_flight += out->count;
		out->count = 0;
		return;
	}
	out->in_flight += out->count - 1;
	out->count = 1;
	ct->fired = true;
	for (size_t i = 0; i < ct->nprocs; i++) {
		struct ht_trigger_proc *p = &ct->procs[i];
		struct ht_bp_hits h = {0};

		if (!p->open || !p->bps.enabled)
			continue;
		if (ht_bp_disarm(&p->bps))
			ht_warn("triggers: %s", ht_last_error());
		if (!ht_bp_drain(&p->bps, &h))
			out->in_flight += h.count + h.in_flight;
		ht_bp_hits_free(&h);
	}
}

int ht_code_triggers_drain(struct ht_code_triggers *ct, struct ht_bp_hits *out)
{
	memset(out, 0, sizeof(*out));
	if (!ct->open)
		return 0;
	/* What processes that left held. */
	*out = ct->carry;
	memset(&ct->carry, 0, sizeof(ct->carry));
	for (size_t i = 0; i < ct->nprocs; i++) {
		struct ht_trigger_proc *p = &ct->procs[i];
		struct ht_bp_hits h = {0};

		if (!p->open)
			continue;
		if (ht_bp_drain(&p->bps, &h)) {
			ht_bp_hits_free(&h);
			return -1;
		}
		if (h.execs || h.mmaps)
			follow_code(ct, p, &h);
		merge(ct, p, &h, out);
		ht_bp_hits_free(&h);
	}
	if (out->count > 1)
		qsort(out->v, out->count, sizeof(out->v[0]), hit_cmp);
	if (!ct->multi)
		one_shot(ct, out);
	ct->foreign += out->foreign;
	return 0;
}

int ht_code_triggers_finish(struct ht_code_triggers *ct, struct ht_bp_hits *out)
{
	memset(out, 0, sizeof(*out));
	if (!ct->open)
		return 0;
	/* Nothing is resolved again: no hit can come at a new address any more. */
	for (size_t i = 0; i < ct->nprocs; i++)
		if (ct->procs[i].open && ht_bp_stop(&ct->procs[i].bps))
			ht_warn("triggers: %s", ht_last_error());
	return ht_code_triggers_drain(ct, out);
}

static bool process_alive(int tgid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", tgid);
	return access(path, F_OK) == 0;
}

void ht_code_triggers_reap(struct ht_code_triggers *ct)
{
	if (!ct->open)
		return;
	for (size_t i = ct->nprocs; i-- > 0;) {
		struct ht_trigger_proc *p;

		if (i >= ct->nprocs)
			continue;
		p = &ct->procs[i];
		/* Gone whole: its forks keep their breakpoints only if armed on their own now. */
		if (!process_alive(p->tgid))
			remove_proc(ct, p->tgid);
		else if (p->open)
			ht_bp_reap(&p->bps);
	}
}

/* ---- For the summary and the hits' lines ---- */

const char *ht_code_trigger_text(const struct ht_code_triggers *ct, int slot)
{
	if (slot < 0 || (size_t)slot >= ct->specs.count)
		return "?";
	return ct->specs.v[slot].spec.text;
}

size_t ht_code_triggers_count(const struct ht_code_triggers *ct)
{
	return ct->specs.count;
}

const char *ht_code_trigger_unresolved(const struct ht_code_triggers *ct, size_t slot)
{
	const struct ht_trigger *tr;
	char prefix[HT_TRIGGER_TEXT_MAX + 16];
	size_t n;

	if (slot >= ct->specs.count || ct->specs.v[slot].ever_resolved)
		return NULL;
	tr = &ct->specs.v[slot];
	/* The reason names the spec already: the summary puts it first. */
	n = (size_t)snprintf(prefix, sizeof(prefix), "trigger '%s': ", tr->spec.text);
	if (n < sizeof(prefix) && !strncmp(tr->pending, prefix, n))
		return tr->pending + n;
	return tr->pending;
}

const char *ht_code_trigger_function(struct ht_code_triggers *ct, const struct ht_bp_hit *h,
				     char *buf, size_t len)
{
	struct ht_trigger_proc *p = owner_of(ct, (int)h->pid);
	const struct ht_target_proc *tp;
	struct ht_symbol sym;

	/* A fork not synced yet: its parent's image is its own. */
	if (!p && ct->targets && (tp = ht_targets_find(ct->targets, (int)h->pid)))
		p = owner_of(ct, tp->parent_tgid);
	if (p && p->symbolizer && !ht_symbolize(p->symbolizer, h->ip, &sym))
		ht_symbol_format(&sym, h->ip, buf, len);
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)h->ip);
	return buf;
}

uint64_t ht_code_triggers_left_out(const struct ht_code_triggers *ct)
{
	uint64_t n = ct->left_gone;

	for (size_t i = 0; i < ct->nprocs; i++)
		if (ct->procs[i].open)
			n += ht_bp_threads_left_out(&ct->procs[i].bps);
	return n;
}
