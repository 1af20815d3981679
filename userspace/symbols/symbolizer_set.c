// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbolizers per process in a small array: a dump asks for the processes
 * of its samples, a few at a time, and the last one asked comes first.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/proc.h"
#include "symbols/elf_cache.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "symbols/unwind_dwarf.h"

/* Notes beyond this are dropped: each is meant to be logged once. */
#define MAX_NOTES 256

struct entry {
	int tgid;
	unsigned long long start_ticks; /* when the process started; 0: unknown */
	struct ht_symbolizer *symbolizer;
	struct ht_dwarf_unwinder *unwinder;
	uint64_t used;		   /* the set's tick when last asked for */
	uint64_t asked_in;	   /* the dump (generation) it was last asked for in */
	uint64_t symbolizer_fresh; /* the generation its maps were last read in */
	uint64_t unwinder_fresh;
	uint64_t symbolizer_failed; /* the generation its making failed in; 0: never */
	uint64_t unwinder_failed;
	bool noted;
};

struct ht_symbolizer_set {
	bool dwarf;
	unsigned int keep;
	struct ht_elf_cache *cache;
	struct entry *v;
	size_t n, cap;
	size_t last; /* the entry asked for last */
	uint64_t generation, tick;
	char *notes[MAX_NOTES];
	size_t nnotes, next_note;
	struct ht_symbolizer_set_stats stats;
};

struct ht_symbolizer_set *ht_symbolizer_set_new(bool dwarf, unsigned int keep)
{
	struct ht_symbolizer_set *set = calloc(1, sizeof(*set));

	if (!set) {
		ht_fail("out of memory");
		return NULL;
	}
	set->dwarf = dwarf;
	set->keep = keep ? keep : HT_SYMBOLIZER_SET_KEEP;
	set->generation = 1;
	set->cache = ht_elf_cache_new();
	if (!set->cache) {
		free(set);
		return NULL;
	}
	return set;
}

static void entry_clear(struct entry *e)
{
	ht_symbolizer_free(e->symbolizer);
	if (e->unwinder)
		ht_dwarf_unwinder_free(e->unwinder);
	e->symbolizer = NULL;
	e->unwinder = NULL;
	e->symbolizer_failed = e->unwinder_failed = 0;
	e->noted = false;
}

void ht_symbolizer_set_free(struct ht_symbolizer_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		entry_clear(&set->v[i]);
	free(set->v);
	ht_elf_cache_free(set->cache);
	for (size_t i = 0; i < set->nnotes; i++)
		free(set->notes[i]);
	free(set);
}

static void note(struct ht_symbolizer_set *set, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct ht_symbolizer_set *set, const char *fmt, ...)
{
	va_list ap;
	char *text;

	if (set->nnotes >= MAX_NOTES)
		return;
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) >= 0)
		set->notes[set->nnotes++] = text;
	va_end(ap);
}

const char *ht_symbolizer_set_next_note(struct ht_symbolizer_set *set)
{
	return set->next_note < set->nnotes ? set->notes[set->next_note++] : NULL;
}

/* Why E has no symbols, once, while its process lives: a gone one needs no word. */
static void note_failure(struct ht_symbolizer_set *set, struct entry *e, const char *what)
{
	if (e->noted || kill(e->tgid, 0))
		return;
	e->noted = true;
	note(set, "user-space stacks of process %d will show addresses only: %s: %s", e->tgid, what,
	     ht_last_error());
}

/* Room for one more: the least recently used process not of the current dump goes. */
static int make_room(struct ht_symbolizer_set *set)
{
	size_t victim = set->n;

	if (set->n >= set->keep) {
		for (size_t i = 0; i < set->n; i++)
			if (set->v[i].asked_in != set->generation &&
			    (victim == set->n || set->v[i].used < set->v[victim].used))
				victim = i;
		if (victim < set->n) {
			entry_clear(&set->v[victim]);
			set->v[victim] = set->v[--set->n];
			set->stats.evicted++;
		}
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 8;
		struct entry *v = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return ht_fail("out of memory");
		set->v = v;
		set->cap = cap;
	}
	return 0;
}

static struct entry *find(struct ht_symbolizer_set *set, int tgid)
{
	if (set->last < set->n && set->v[set->last].tgid == tgid)
		return &set->v[set->last];
	for (size_t i = 0; i < set->n; i++) {
		if (set->v[i].tgid == tgid) {
			set->last = i;
			return &set->v[i];
		}
	}
	return NULL;
}

/* Process TGID's entry, made if need be; the first time in a dump, a pid used again is seen. */
static struct entry *entry_of(struct ht_symbolizer_set *set, int tgid)
{
	struct entry *e = find(set, tgid);
	unsigned long long start = 0;

	if (e && e->asked_in != set->generation && !ht_proc_start_time(tgid, &start) &&
	    e->start_ticks && start != e->start_ticks) {
		/* Another process has that pid now: what was known of the old one is of no use. */
		entry_clear(e);
		e->start_ticks = start;
	}
	if (!e) {
		if (make_room(set))
			return NULL;
		e = &set->v[set->n];
		memset(e, 0, sizeof(*e));
		e->tgid = tgid;
		if (ht_proc_start_time(tgid, &e->start_ticks))
			e->start_ticks = 0;
		set->last = set->n++;
	}
	e->used = ++set->tick;
	e->asked_in = set->generation;
	return e;
}

struct ht_symbolizer *ht_symbolizer_set_get(struct ht_symbolizer_set *set, int tgid)
{
	struct entry *e = tgid > 0 ? entry_of(set, tgid) : NULL;

	if (!e) {
		if (tgid <= 0)
			ht_fail("no process %d", tgid);
		return NULL;
	}
	if (e->symbolizer) {
		/* Libraries load late: the maps are read again for every dump. */
		if (e->symbolizer_fresh != set->generation)
			ht_symbolizer_refresh(e->symbolizer);
		e->symbolizer_fresh = set->generation;
		return e->symbolizer;
	}
	if (e->symbolizer_failed == set->generation) {
		ht_fail("no maps of process %d", tgid);
		return NULL;
	}
	e->symbolizer = ht_symbolizer_new_shared(tgid, set->cache);
	if (!e->symbolizer) {
		e->symbolizer_failed = set->generation;
		note_failure(set, e, "its maps");
		return NULL;
	}
	set->stats.made++;
	e->symbolizer_fresh = set->generation;
	return e->symbolizer;
}

struct ht_symbolizer *ht_symbolizer_set_held(struct ht_symbolizer_set *set, int tgid)
{
	struct entry *e = tgid > 0 ? entry_of(set, tgid) : NULL;

	if (e && e->symbolizer)
		return e->symbolizer;
	return ht_symbolizer_set_get(set, tgid);
}

struct ht_dwarf_unwinder *ht_symbolizer_set_unwinder(struct ht_symbolizer_set *set, int tgid)
{
	struct entry *e;

	if (!set->dwarf) {
		ht_fail("no DWARF unwinding");
		return NULL;
	}
	e = tgid > 0 ? entry_of(set, tgid) : NULL;
	if (!e) {
		if (tgid <= 0)
			ht_fail("no process %d", tgid);
		return NULL;
	}
	if (e->unwinder) {
		if (e->unwinder_fresh != set->generation)
			ht_dwarf_unwinder_refresh(e->unwinder);
		e->unwinder_fresh = set->generation;
		return e->unwinder;
	}
	if (e->unwinder_failed == set->generation) {
		ht_fail("no maps of process %d", tgid);
		return NULL;
	}
	e->unwinder = ht_dwarf_unwinder_new(tgid);
	if (!e->unwinder) {
		e->unwinder_failed = set->generation;
		note_failure(set, e, "its DWARF unwinder");
		return NULL;
	}
	e->unwinder_fresh = set->generation;
	return e->unwinder;
}

void ht_symbolizer_set_stale(struct ht_symbolizer_set *set)
{
	set->generation++;
}

void ht_symbolizer_set_refresh(struct ht_symbolizer_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		struct entry *e = &set->v[i];
		unsigned long long start;

		/* Gone, or its pid taken by another: keep what was known of it for its captures. */
		if (ht_proc_start_time(e->tgid, &start) ||
		    (e->start_ticks && start != e->start_ticks))
			continue;
		if (e->symbolizer)
			ht_symbolizer_refresh(e->symbolizer);
		if (e->unwinder)
			ht_dwarf_unwinder_refresh(e->unwinder);
	}
}

void ht_symbolizer_set_reread(struct ht_symbolizer_set *set, int tgid)
{
	struct entry *e = tgid > 0 ? find(set, tgid) : NULL;
	/* A new entry is not of the current dump: it may give way like any other. */
	uint64_t asked_in = e ? e->asked_in : set->generation - 1;

	if (e) {
		/* Not fresh, not failed in this generation: read (or tried) again below. */
		e->symbolizer_fresh = e->unwinder_fresh = 0;
		e->symbolizer_failed = e->unwinder_failed = 0;
	}
	if (!ht_symbolizer_set_get(set, tgid))
		return;
	if (set->dwarf)
		ht_symbolizer_set_unwinder(set, tgid);
	e = find(set, tgid);
	if (e)
		e->asked_in = asked_in;
}

void ht_symbolizer_set_get_stats(const struct ht_symbolizer_set *set,
				 struct ht_symbolizer_set_stats *out)
{
	struct ht_elf_cache_stats cache;

	*out = set->stats;
	out->processes = set->n;
	ht_elf_cache_get_stats(set->cache, &cache);
	out->elf_files_read = cache.tables_read;
	out->tables = cache.tables;
}
