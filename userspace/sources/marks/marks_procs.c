// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/proc.h"
#include "sources/marks/marks_procs.h"

void ht_marks_procs_init(struct ht_marks_procs *p, size_t max)
{
	memset(p, 0, sizeof(*p));
	p->max = max ? max : HT_MARKS_PROCS_MAX;
}

void ht_marks_procs_free(struct ht_marks_procs *p)
{
	for (size_t i = 0; i < p->count; i++)
		ht_marks_locator_free(&p->v[i].locator);
	free(p->v);
	p->v = NULL;
	p->count = p->cap = 0;
	ht_marks_files_free(&p->files);
}

void ht_marks_procs_round(struct ht_marks_procs *p)
{
	p->round++;
}

/* The index of TGID's entry, or where it would go (*FOUND false). */
static size_t position(const struct ht_marks_procs *p, int tgid, bool *found)
{
	size_t lo = 0, hi = p->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->v[mid].tgid < tgid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < p->count && p->v[lo].tgid == tgid;
	return lo;
}

static void remove_at(struct ht_marks_procs *p, size_t i)
{
	ht_marks_locator_free(&p->v[i].locator);
	memmove(&p->v[i], &p->v[i + 1], (p->count - i - 1) * sizeof(p->v[0]));
	p->count--;
}

/* Room for one more: the process least recently asked for gives way, if not of this round. */
static bool make_room(struct ht_marks_procs *p)
{
	size_t oldest = 0;

	if (p->count < p->max) {
		if (p->count < p->cap)
			return true;
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct ht_marks_proc *v;

		if (cap > p->max)
			cap = p->max;
		v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return false;
		p->v = v;
		p->cap = cap;
		return true;
	}
	for (size_t i = 1; i < p->count; i++)
		if (p->v[i].round < p->v[oldest].round)
			oldest = i;
	if (!p->count || p->v[oldest].round == p->round)
		return false;
	remove_at(p, oldest);
	return true;
}

/* The process's maps read for its registries now (only modules new to LOCATOR are opened). */
static int locate(struct ht_marks_locator *l, uint64_t *addrs, size_t *n)
{
	size_t found = 0;

	if (ht_marks_locator_find(l, addrs, HT_MARKS_PROC_REGISTRIES, &found))
		return -1;
	*n = found < HT_MARKS_PROC_REGISTRIES ? found : HT_MARKS_PROC_REGISTRIES;
	return 0;
}

int ht_marks_procs_find(struct ht_marks_procs *p, int tgid, const uint64_t **addrs, size_t *n)
{
	struct ht_marks_proc *e;
	unsigned long long pages = 0;
	bool found;
	size_t i = position(p, tgid, &found);
	int lost;

	*addrs = p->scratch;
	*n = 0;
	/* Gone, or a zombie (no address space left): nothing to read. */
	if (ht_proc_vm_pages(tgid, &pages) || !pages) {
		lost = found && p->v[i].naddrs ? 1 : -1;
		if (found)
			remove_at(p, i);
		return lost;
	}
	if (!found) {
		struct ht_marks_locator l;
		int rc;

		if (!make_room(p)) {
			/* No room this round: located for this dump alone. */
			ht_marks_locator_init(&l, tgid);
			l.files = &p->files;
			rc = locate(&l, p->scratch, n);
			ht_marks_locator_free(&l);
			p->maps_read++;
			return rc ? -1 : 0;
		}
		i = position(p, tgid, &found);
		memmove(&p->v[i + 1], &p->v[i], (p->count - i) * sizeof(p->v[0]));
		p->count++;
		memset(&p->v[i], 0, sizeof(p->v[i]));
		p->v[i].tgid = tgid;
		ht_marks_locator_init(&p->v[i].locator, tgid);
		p->v[i].locator.files = &p->files;
	}
	e = &p->v[i];
	e->round = p->round;
	if (e->vm_pages != pages) {
		p->maps_read++;
		if (locate(&e->locator, e->addrs, &e->naddrs)) {
			lost = e->naddrs ? 1 : -1;
			remove_at(p, i);
			return lost;
		}
		e->vm_pages = pages;
	} else {
		p->maps_kept++;
	}
	*addrs = e->addrs;
	*n = e->naddrs;
	return 0;
}

int ht_marks_procs_known(const struct ht_marks_procs *p, int tgid)
{
	bool found;
	size_t i = position(p, tgid, &found);

	return found && p->v[i].naddrs ? 1 : 0;
}

void ht_marks_procs_stale(struct ht_marks_procs *p, int tgid)
{
	bool found;
	size_t i = position(p, tgid, &found);

	if (found)
		p->v[i].vm_pages = 0;
}

void ht_marks_procs_forget(struct ht_marks_procs *p, int tgid)
{
	bool found;
	size_t i = position(p, tgid, &found);

	if (found)
		remove_at(p, i);
}
