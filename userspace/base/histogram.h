/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Log2 histograms printed the way runqlat and the other libbpf-tools print them. */
#ifndef HT_HISTOGRAM_H
#define HT_HISTOGRAM_H

#include <stdint.h>
#include <stdio.h>
#include "base/json.h"

void ht_hist_print(FILE *f, const char *title, const uint64_t *slots, unsigned int nslots);

/* The same from the first bucket with a count: shorter, where there are many. */
void ht_hist_print_used(FILE *f, const char *title, const uint64_t *slots, unsigned int nslots);

/* As member KEY of J, an array of {"from_us", "to_us", "count"}, non-empty range only. */
void ht_hist_print_json(struct ht_json *j, const char *key, const uint64_t *slots,
			unsigned int nslots);

#endif /* HT_HISTOGRAM_H */
