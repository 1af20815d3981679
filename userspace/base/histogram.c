// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "base/histogram.h"

#define BAR_WIDTH 40

static unsigned int last_used_slot(const uint64_t *slots, unsigned int nslots)
{
	unsigned int last = 0;

	for (unsigned int i = 0; i < nslots; i++)
		if (slots[i])
			last = i + 1;
	return last;
}

/* Slot i holds values v with log2(v) == i: [2^i, 2^(i+1) - 1], and slot 0 also 0. */
static uint64_t slot_low(unsigned int i)
{
	return i ? 1ULL << i : 0;
}

static uint64_t slot_high(unsigned int i)
{
	return (1ULL << (i + 1)) - 1;
}

/* From bucket FROM on: 0, as runqlat prints, or the first with a count. */
static void print_from(FILE *f, const char *title, const uint64_t *slots, unsigned int nslots,
		       unsigned int from)
{
	unsigned int last = last_used_slot(slots, nslots);
	uint64_t max = 0;

	fprintf(f, "\n%s\n", title);
	if (!last) {
		fprintf(f, "     (none)\n");
		return;
	}
	for (unsigned int i = 0; i < last; i++)
		if (slots[i] > max)
			max = slots[i];
	fprintf(f, "%14s%10s : count    distribution\n", "usecs", "");
	for (unsigned int i = from; i < last; i++) {
		unsigned int stars = (unsigned int)(slots[i] * BAR_WIDTH / max);

		fprintf(f, "%10llu -> %-10llu : %-8llu |", (unsigned long long)slot_low(i),
			(unsigned long long)slot_high(i), (unsigned long long)slots[i]);
		for (unsigned int s = 0; s < BAR_WIDTH; s++)
			fputc(s < stars ? '*' : ' ', f);
		fputs("|\n", f);
	}
}

void ht_hist_print(FILE *f, const char *title, const uint64_t *slots, unsigned int nslots)
{
	print_from(f, title, slots, nslots, 0);
}

void ht_hist_print_used(FILE *f, const char *title, const uint64_t *slots, unsigned int nslots)
{
	unsigned int first = 0;

	while (first < nslots && !slots[first])
		first++;
	print_from(f, title, slots, nslots, first);
}

void ht_hist_print_json(struct ht_json *j, const char *key, const uint64_t *slots,
			unsigned int nslots)
{
	unsigned int last = last_used_slot(slots, nslots);

	ht_json_array(j, key);
	for (unsigned int i = 0; i < last; i++) {
		ht_json_object(j, NULL);
		ht_json_u64(j, "from_us", slot_low(i));
		ht_json_u64(j, "to_us", slot_high(i));
		ht_json_u64(j, "count", slots[i]);
		ht_json_close(j);
	}
	ht_json_close(j);
}
