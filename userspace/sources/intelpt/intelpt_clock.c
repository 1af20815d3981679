// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cpuid (the TSC ratios a decoder needs) and (rdtsc, CLOCK_MONOTONIC)
 * pairs that tie PT time to the kernel's.
 */
#include <cpuid.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_private.h"
#include "base/log.h"

void ht_cpuid_read(struct ht_cpuid_values *c)
{
	unsigned int a, b, cx, d;

	memset(c, 0, sizeof(*c));
	if (!__get_cpuid(0, &a, &b, &cx, &d))
		return;
	c->max_leaf = a;
	memcpy(c->vendor, &b, 4);
	memcpy(c->vendor + 4, &d, 4);
	memcpy(c->vendor + 8, &cx, 4);
	c->vendor[12] = 0;
	__cpuid_count(1, 0, c->leaf1[0], c->leaf1[1], c->leaf1[2], c->leaf1[3]);
	if (c->max_leaf >= 0x14) {
		__cpuid_count(0x14, 0, c->leaf14_0[0], c->leaf14_0[1], c->leaf14_0[2],
			      c->leaf14_0[3]);
		__cpuid_count(0x14, 1, c->leaf14_1[0], c->leaf14_1[1], c->leaf14_1[2],
			      c->leaf14_1[3]);
	}
	if (c->max_leaf >= 0x15)
		__cpuid_count(0x15, 0, c->leaf15[0], c->leaf15[1], c->leaf15[2], c->leaf15[3]);
}

static uint64_t rdtsc_ordered(void)
{
	uint64_t t;

	_mm_lfence();
	t = __rdtsc();
	_mm_lfence();
	return t;
}

void ht_clock_pair_take(struct ht_clock_pair *pair, unsigned int tries, uint32_t when)
{
	uint64_t best = UINT64_MAX;

	memset(pair, 0, sizeof(*pair));
	pair->when = when;
	for (unsigned int i = 0; i < (tries ? tries : 1); i++) {
		uint64_t m1 = clock_ns(CLOCK_MONOTONIC);
		uint64_t tsc = rdtsc_ordered();
		uint64_t m2 = clock_ns(CLOCK_MONOTONIC);

		if (m2 - m1 >= best)
			continue;
		best = m2 - m1;
		pair->tsc = tsc;
		pair->mono_ns = m1 + best / 2;
		pair->spread_ns = best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
	}
}
