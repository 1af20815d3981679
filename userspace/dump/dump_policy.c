// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dump/dump_policy.h"

/* ---- ranks ---- */

struct ht_dump_rank ht_dump_rank_breach(enum ht_dump_rank_class cls, const uint64_t *duration_ns,
					const uint64_t *threshold_ns, size_t kinds)
{
	struct ht_dump_rank r = { .cls = cls, .ratio = 0 };

	for (size_t i = 0; i < kinds; i++) {
		double ratio;

		if (!threshold_ns[i])
			continue;
		ratio = (double)duration_ns[i] / (double)threshold_ns[i];
		if (ratio > r.ratio)
			r.ratio = ratio;
	}
	return r;
}

int ht_dump_rank_cmp(struct ht_dump_rank a, struct ht_dump_rank b)
{
	if (a.cls != b.cls)
		return a.cls < b.cls ? -1 : 1;
	if (a.ratio != b.ratio)
		return a.ratio < b.ratio ? -1 : 1;
	return 0;
}

const char *ht_dump_rank_format(struct ht_dump_rank r, char *buf, size_t len)
{
	switch (r.cls) {
	case HT_RANK_TRIGGER:
		snprintf(buf, len, "a trigger's hit");
		break;
	case HT_RANK_ASKED:
		snprintf(buf, len, "asked for");
		break;
	case HT_RANK_WAIT_FOR_WORK:
		snprintf(buf, len, "%.2fx its threshold, waiting for work", r.ratio);
		break;
	default:
		snprintf(buf, len, "%.2fx its threshold", r.ratio);
	}
	return buf;
}

const char *ht_dump_decision_reason(enum ht_dump_decision d, enum ht_dump_rule rule)
{
	bool worst = rule == HT_DUMP_RULE_WORST;

	switch (d) {
	case HT_DUMP_NOW:
		return "dumping";
	case HT_DUMP_LATER:
		return "it follows the dump being made";
	case HT_DUMP_SKIP_BUSY:
		return worst ? "a dump is being written, and a worse breach follows it"
			     : "a dump is being written";
	case HT_DUMP_SKIP_INTERVAL:
		return worst ? "a worse breach in the same min-interval" : "min-interval";
	case HT_DUMP_SKIP_COUNT:
		return worst ? "not worse than the max-dumps kept" : "max-dumps reached";
	case HT_DUMP_SKIP_DISK:
		return worst ? "max-disk used up, and not worse than the least bad dump"
			     : "max-disk used up";
	case HT_DUMP_SKIP_PROCESS:
		return worst ? "not worse than the max-dumps-per-process kept of its process"
			     : "max-dumps-per-process reached for its process";
	case HT_DUMP_DECISIONS:
		break;
	}
	return "?";
}

/* ---- the session's dumps ---- */

void ht_dump_kept_free(struct ht_dump_kept *k)
{
	free(k->path);
	free(k->raw_path);
	k->path = k->raw_path = NULL;
}

static struct ht_dump_kept *find_kept(struct ht_dump_engine *e, uint64_t seq)
{
	for (size_t i = 0; i < e->nkept; i++)
		if (e->kept[i].seq == seq)
			return &e->kept[i];
	return NULL;
}

static void remove_kept(struct ht_dump_engine *e, struct ht_dump_kept *k)
{
	ht_dump_kept_free(k);
	*k = e->kept[--e->nkept];
}

/* Whether kept dump K is of process TGID; every dump is of process 0 (the session). */
static bool of_process(const struct ht_dump_kept *k, int tgid)
{
	return !tgid || k->tgid == tgid;
}

/* Kept dumps of process TGID (0: of any) not on their way out. */
static size_t live_kept(const struct ht_dump_engine *e, int tgid)
{
	size_t n = 0;

	for (size_t i = 0; i < e->nkept; i++)
		n += !e->kept[i].doomed && of_process(&e->kept[i], tgid);
	return n;
}

/*
 * The least bad kept dump of process TGID (0: of any) not already being
 * replaced; among equals the newest goes.
 */
static struct ht_dump_kept *least_bad(struct ht_dump_engine *e, int tgid)
{
	struct ht_dump_kept *least = NULL;

	for (size_t i = 0; i < e->nkept; i++) {
		struct ht_dump_kept *k = &e->kept[i];
		int c;

		if (k->doomed || !of_process(k, tgid))
			continue;
		c = least ? ht_dump_rank_cmp(k->rank, least->rank) : -1;
		if (c < 0 || (c == 0 && k->seq > least->seq))
			least = k;
	}
	return least;
}

/*
 * Whether a dump of RANK, of process TGID, may be made now, and which kept
 * dump it then replaces (*VICTIM, or NULL). Under the limits it is simply
 * made; at a limit, under `worst`, it must be worse than the least bad kept
 * dump (of its own process, at that process's limit), and the disk used
 * without that one must be under the budget (so the budget is exceeded by
 * one dump at most, as when it is checked before each dump).
 */
static enum ht_dump_decision may_dump(struct ht_dump_engine *e, struct ht_dump_rank rank, int tgid,
				      struct ht_dump_kept **victim)
{
	bool process_full = tgid && e->p.max_dumps_per_process &&
			    live_kept(e, tgid) >= e->p.max_dumps_per_process;
	bool count_full = process_full || live_kept(e, 0) >= e->p.max_dumps;
	enum ht_dump_decision full = process_full ? HT_DUMP_SKIP_PROCESS
				     : count_full ? HT_DUMP_SKIP_COUNT
						  : HT_DUMP_SKIP_DISK;
	struct ht_dump_kept *least;

	*victim = NULL;
	if (!count_full && e->disk_bytes < e->p.max_disk_bytes)
		return HT_DUMP_NOW;
	if (e->p.rule == HT_DUMP_RULE_FIRST)
		return full;
	/* Replacing one of its process's own keeps both counts. */
	least = least_bad(e, process_full ? tgid : 0);
	if (!least || ht_dump_rank_cmp(rank, least->rank) <= 0)
		return full;
	if (e->disk_bytes - (least->written ? least->bytes : 0) >= e->p.max_disk_bytes)
		return HT_DUMP_SKIP_DISK;
	*victim = least;
	return HT_DUMP_NOW;
}

/* ---- the engine ---- */

void ht_dump_engine_init(struct ht_dump_engine *e, const struct ht_dump_policy *p)
{
	memset(e, 0, sizeof(*e));
	e->p = *p;
	e->next_seq = 1;
}

void ht_dump_engine_free(struct ht_dump_engine *e)
{
	for (size_t i = 0; i < e->nkept; i++)
		ht_dump_kept_free(&e->kept[i]);
	free(e->kept);
	e->kept = NULL;
	e->nkept = e->kept_cap = 0;
}

static void skip(struct ht_dump_engine *e, enum ht_dump_decision d)
{
	e->st.skipped[d]++;
	e->not_dumped++;
}

static void hold(struct ht_dump_cand *slot, const struct ht_dump_offer *o)
{
	*slot = (struct ht_dump_cand){ .used = true,
				       .id = o->id,
				       .tgid = o->tgid,
				       .rank = o->rank,
				       .window_end_ns = o->window_end_ns };
}

/* Why a candidate that ended at ENDED_NS and lost within the open interval is not dumped. */
static enum ht_dump_decision lost_in_interval(const struct ht_dump_engine *e, uint64_t ended_ns)
{
	/* Past its end, the interval goes on only while its choice waits for the builder. */
	return ended_ns < e->interval_end_ns ? HT_DUMP_SKIP_INTERVAL : HT_DUMP_SKIP_BUSY;
}

/*
 * Whether every breach that ended in the open interval has been offered: one
 * that ended at PAST_NS, after the interval, is (the ring hands breaches over
 * as they end), or the event loop read the ring far enough past its end.
 */
static bool interval_read(const struct ht_dump_engine *e, uint64_t past_ns)
{
	return past_ns >= e->interval_end_ns ||
	       e->read_ns >= e->interval_end_ns + e->p.read_lag_ns;
}

/*
 * The interval's best becomes its choice once the slot for it is free: once
 * the interval is over and read (PAST_NS: interval_read()), at once under
 * `first` (nothing can beat the first), or when the session ends. Returns
 * whether it did.
 */
static bool close_interval(struct ht_dump_engine *e, uint64_t past_ns)
{
	if (!e->best.used || e->chosen.used)
		return false;
	if (e->p.rule != HT_DUMP_RULE_FIRST && !e->finishing && !interval_read(e, past_ns))
		return false;
	e->chosen = e->best;
	e->best.used = false;
	/* Under `first` the interval goes on: the rest of it is passed over. */
	if (e->p.rule == HT_DUMP_RULE_WORST)
		e->interval_open = false;
	return true;
}

static void expire_interval(struct ht_dump_engine *e, uint64_t past_ns)
{
	if (e->interval_open && !e->best.used && interval_read(e, past_ns))
		e->interval_open = false;
}

void ht_dump_engine_read(struct ht_dump_engine *e, uint64_t read_ns)
{
	if (read_ns > e->read_ns)
		e->read_ns = read_ns;
}

static struct ht_dump_offer_result offer_asked(struct ht_dump_engine *e,
					       const struct ht_dump_offer *o)
{
	struct ht_dump_offer_result r = { .decision = HT_DUMP_NOW };
	struct ht_dump_kept *victim;

	r.decision = may_dump(e, o->rank, o->tgid, &victim);
	if (r.decision != HT_DUMP_NOW) {
		skip(e, r.decision);
		return r;
	}
	if (!e->asked.used) {
		hold(&e->asked, o);
		return r;
	}
	/* One waits behind the one being made; a newer request takes its place. */
	if (e->pending.used) {
		r.dropped = true;
		r.dropped_id = e->pending.id;
		r.dropped_reason = HT_DUMP_SKIP_BUSY;
		skip(e, HT_DUMP_SKIP_BUSY);
	}
	hold(&e->pending, o);
	r.decision = HT_DUMP_LATER;
	return r;
}

struct ht_dump_offer_result ht_dump_engine_offer(struct ht_dump_engine *e,
						 const struct ht_dump_offer *o, uint64_t now_ns)
{
	struct ht_dump_offer_result r = { .decision = HT_DUMP_NOW };
	uint64_t ended_ns = o->ended_ns && o->ended_ns < now_ns ? o->ended_ns : now_ns;
	struct ht_dump_kept *victim;

	if (o->asked)
		return offer_asked(e, o);
	/* The ring hands breaches over in the order they were sent: those before it are read. */
	if (o->ended_ns)
		ht_dump_engine_read(e, ended_ns);
	/*
	 * An interval that has ended is closed before the newcomer is judged if the
	 * newcomer ended after it; one that ended in it, read late, still competes.
	 */
	close_interval(e, ended_ns);
	expire_interval(e, ended_ns);
	/* Read late, it ended in an interval whose dump is chosen: not another one of it. */
	if (!e->interval_open && ended_ns < e->interval_end_ns) {
		r.decision = HT_DUMP_SKIP_INTERVAL;
		skip(e, r.decision);
		return r;
	}
	/* Checked again when it is written: a hopeless candidate is never frozen. */
	r.decision = may_dump(e, o->rank, o->tgid, &victim);
	if (r.decision != HT_DUMP_NOW) {
		skip(e, r.decision);
		return r;
	}
	if (!e->interval_open) {
		e->interval_open = true;
		e->interval_end_ns = ended_ns + e->p.min_interval_ns;
		hold(&e->best, o);
		return r;
	}
	if (e->best.used) {
		if (e->p.rule == HT_DUMP_RULE_WORST &&
		    ht_dump_rank_cmp(o->rank, e->best.rank) > 0) {
			r.dropped = true;
			r.dropped_id = e->best.id;
			r.dropped_reason = lost_in_interval(e, ended_ns);
			skip(e, r.dropped_reason);
			hold(&e->best, o);
			return r;
		}
		r.decision = lost_in_interval(e, ended_ns);
		skip(e, r.decision);
		return r;
	}
	/* The interval's dump is chosen already (`first`), or its best could not be frozen. */
	if (e->p.rule == HT_DUMP_RULE_FIRST) {
		r.decision = HT_DUMP_SKIP_INTERVAL;
		skip(e, r.decision);
		return r;
	}
	hold(&e->best, o);
	return r;
}

static struct ht_dump_kept *add_kept(struct ht_dump_engine *e, const struct ht_dump_cand *c)
{
	struct ht_dump_kept *k;

	if (e->nkept == e->kept_cap) {
		size_t cap = e->kept_cap ? e->kept_cap * 2 : 16;
		struct ht_dump_kept *grown = realloc(e->kept, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		e->kept = grown;
		e->kept_cap = cap;
	}
	k = &e->kept[e->nkept++];
	*k = (struct ht_dump_kept){ .seq = e->next_seq++, .tgid = c->tgid, .rank = c->rank };
	return k;
}

/* Hand SLOT's candidate to the builder, if the limits still let it be dumped. */
static struct ht_dump_action write_one(struct ht_dump_engine *e, struct ht_dump_cand *slot)
{
	struct ht_dump_action a = { .id = slot->id };
	struct ht_dump_kept *victim, *k;
	uint64_t victim_seq;

	slot->used = false;
	a.reason = may_dump(e, slot->rank, slot->tgid, &victim);
	if (a.reason != HT_DUMP_NOW) {
		a.what = HT_DUMP_ACT_DROP;
		skip(e, a.reason);
		return a;
	}
	victim_seq = victim ? victim->seq : 0;
	k = add_kept(e, slot);
	if (!k) {
		a.what = HT_DUMP_ACT_DROP;
		a.reason = HT_DUMP_SKIP_COUNT;
		skip(e, a.reason);
		return a;
	}
	if (victim_seq) {
		find_kept(e, victim_seq)->doomed = true;
		k->replaces = true;
		k->victim_seq = victim_seq;
	}
	a.what = HT_DUMP_ACT_WRITE;
	a.seq = k->seq;
	a.replaces = k->replaces;
	a.victim_seq = victim_seq;
	a.not_dumped = e->not_dumped;
	e->not_dumped = 0;
	e->building = true;
	return a;
}

struct ht_dump_action ht_dump_engine_next(struct ht_dump_engine *e, uint64_t now_ns)
{
	struct ht_dump_cand *slots[] = { &e->asked, &e->chosen, &e->best };
	struct ht_dump_action none = { .what = HT_DUMP_ACT_NONE };

	for (;;) {
		/* Each candidate held is frozen when its window ends, whatever else waits. */
		for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
			struct ht_dump_cand *c = slots[i];

			if (c->used && !c->frozen && now_ns >= c->window_end_ns)
				return (struct ht_dump_action){ .what = HT_DUMP_ACT_FREEZE,
								.id = c->id,
								.deferred = c->deferred };
		}
		if (!e->asked.used && e->pending.used) {
			e->asked = e->pending;
			e->asked.deferred = true;
			e->pending.used = false;
			continue;
		}
		if (close_interval(e, 0))
			continue;
		break;
	}
	expire_interval(e, 0);
	if (e->building)
		return none;
	if (e->asked.used && e->asked.frozen)
		return write_one(e, &e->asked);
	if (e->chosen.used && e->chosen.frozen)
		return write_one(e, &e->chosen);
	return none;
}

void ht_dump_engine_frozen(struct ht_dump_engine *e, uint64_t id, bool ok)
{
	struct ht_dump_cand *slots[] = { &e->asked, &e->chosen, &e->best };

	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		struct ht_dump_cand *c = slots[i];

		if (!c->used || c->frozen || c->id != id)
			continue;
		if (ok) {
			c->frozen = true;
		} else {
			c->used = false;
			e->st.failed++;
		}
		return;
	}
}

uint64_t ht_dump_engine_deadline(const struct ht_dump_engine *e)
{
	const struct ht_dump_cand *slots[] = { &e->asked, &e->chosen, &e->best };
	uint64_t due = 0;

	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		const struct ht_dump_cand *c = slots[i];

		if (c->used && !c->frozen && (!due || c->window_end_ns < due))
			due = c->window_end_ns;
	}
	/* A manual dump behind another moves up (and freezes) at once once that one is out. */
	if (e->pending.used && !e->asked.used)
		due = 1;
	if (e->best.used && !e->chosen.used) {
		/* The event loop reads the ring then, and says so before it ticks. */
		uint64_t close = e->p.rule == HT_DUMP_RULE_WORST && !e->finishing
					 ? e->interval_end_ns + e->p.read_lag_ns
					 : 1;

		if (!due || close < due)
			due = close;
	}
	return due;
}

void ht_dump_engine_finish(struct ht_dump_engine *e)
{
	e->finishing = true;
}

bool ht_dump_engine_idle(const struct ht_dump_engine *e)
{
	return !e->asked.used && !e->pending.used && !e->chosen.used && !e->best.used &&
	       !e->building;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

bool ht_dump_engine_written(struct ht_dump_engine *e, uint64_t seq, bool ok, uint64_t bytes,
			    const char *path, const char *raw_path, uint64_t dev, uint64_t ino,
			    struct ht_dump_kept *victim)
{
	struct ht_dump_kept *k = find_kept(e, seq), *v;

	e->building = false;
	if (!k)
		return false;
	v = k->replaces ? find_kept(e, k->victim_seq) : NULL;
	if (!ok) {
		e->st.failed++;
		/* The dump it was to replace stays. */
		if (v)
			v->doomed = false;
		remove_kept(e, k);
		return false;
	}
	k->written = true;
	k->bytes = bytes;
	k->path = dup_or_null(path);
	k->raw_path = dup_or_null(raw_path);
	k->dev = dev;
	k->ino = ino;
	e->disk_bytes += bytes;
	e->st.written++;
	if (!v)
		return false;
	*victim = *v;
	victim->path = dup_or_null(v->path);
	victim->raw_path = dup_or_null(v->raw_path);
	return true;
}

void ht_dump_engine_removed(struct ht_dump_engine *e, uint64_t seq, bool gone)
{
	struct ht_dump_kept *k = find_kept(e, seq);

	if (!k)
		return;
	/* A file that could not be removed still takes its room on the disk. */
	if (gone)
		e->disk_bytes -= k->bytes;
	e->st.replaced++;
	remove_kept(e, k);
}
