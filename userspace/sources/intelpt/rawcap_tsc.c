// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Time in a raw capture: the TSC frequency from cpuid, and TSC mapped onto
 * CLOCK_MONOTONIC through the (rdtsc, clock) pairs taken at attach and at
 * each freeze.
 */
#include <stdlib.h>
#include <string.h>
#include "base/tsc.h"
#include "base/log.h"
#include "sources/intelpt/rawcap.h"

/* ---- cpuid ---- */

void ht_cpuid_family_model(uint32_t eax, unsigned int *family, unsigned int *model,
			   unsigned int *stepping)
{
	unsigned int f = (eax >> 8) & 0xf, m = (eax >> 4) & 0xf;

	if (f == 0xf)
		f += (eax >> 20) & 0xff;
	if (f == 0x6 || f >= 0xf)
		m += ((eax >> 16) & 0xf) << 4;
	*family = f;
	*model = m;
	*stepping = eax & 0xf;
}

uint64_t ht_cpuid_tsc_hz(const struct ht_cpuid_values *c)
{
	if (c->max_leaf < 0x15 || !c->leaf15[0] || !c->leaf15[1] || !c->leaf15[2])
		return 0;
	return (uint64_t)c->leaf15[2] * c->leaf15[1] / c->leaf15[0];
}

/* ---- TSC -> CLOCK_MONOTONIC ---- */

static int pair_cmp(const void *a, const void *b)
{
	const struct ht_clock_pair *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->spread_ns < y->spread_ns ? -1 : x->spread_ns > y->spread_ns;
}

int ht_tsc_map_init(struct ht_tsc_map *m, const struct ht_clock_pair *pairs, size_t n,
		    uint64_t fallback_hz)
{
	size_t kept = 0;

	memset(m, 0, sizeof(*m));
	if (!n)
		return ht_fail("no TSC/CLOCK_MONOTONIC pairs: PT times cannot be placed");
	m->pairs = malloc(n * sizeof(*pairs));
	if (!m->pairs)
		return ht_fail("out of memory");
	memcpy(m->pairs, pairs, n * sizeof(*pairs));
	qsort(m->pairs, n, sizeof(*pairs), pair_cmp);
	/*
	 * Same TSC twice: keep the tighter. A pair whose time goes backwards
	 * from the one before is noise larger than its bracket: drop it.
	 */
	for (size_t i = 0; i < n; i++) {
		if (kept && m->pairs[i].tsc == m->pairs[kept - 1].tsc)
			continue;
		if (kept && m->pairs[i].mono_ns <= m->pairs[kept - 1].mono_ns)
			continue;
		m->pairs[kept++] = m->pairs[i];
	}
	m->n = kept;
	if (kept >= 2) {
		m->ns_span = m->pairs[kept - 1].mono_ns - m->pairs[0].mono_ns;
		m->tsc_span = m->pairs[kept - 1].tsc - m->pairs[0].tsc;
		return 0;
	}
	if (fallback_hz) {
		m->ns_span = 1000000000ULL;
		m->tsc_span = fallback_hz;
		return 0;
	}
	ht_tsc_map_free(m);
	return ht_fail("one TSC/CLOCK_MONOTONIC pair and no TSC frequency: PT times cannot be "
		       "placed");
}

void ht_tsc_map_free(struct ht_tsc_map *m)
{
	free(m->pairs);
	memset(m, 0, sizeof(*m));
}

uint64_t ht_tsc_to_mono(const struct ht_tsc_map *m, uint64_t tsc)
{
	const struct ht_clock_pair *first, *last;
	size_t lo = 0, hi;

	if (!m->n || !m->tsc_span)
		return 0;
	first = &m->pairs[0];
	last = &m->pairs[m->n - 1];
	if (tsc < first->tsc)
		return ht_tsc_line_ns(first->tsc, first->mono_ns, tsc, m->ns_span, m->tsc_span);
	if (tsc >= last->tsc)
		return ht_tsc_line_ns(last->tsc, last->mono_ns, tsc, m->ns_span, m->tsc_span);
	/* The last pair at or before TSC; the next one is after it. */
	hi = m->n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->pairs[mid].tsc <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	return ht_tsc_line_ns(m->pairs[lo].tsc, m->pairs[lo].mono_ns, tsc,
			      m->pairs[hi].mono_ns - m->pairs[lo].mono_ns,
			      m->pairs[hi].tsc - m->pairs[lo].tsc);
}
