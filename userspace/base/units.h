/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Numbers as people read them: durations, counts, task states. */
#ifndef HT_UNITS_H
#define HT_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "850ns", "12.3us", "4.21ms", "1.234s". Returns buf. */
const char *ht_format_duration(uint64_t ns, char *buf, size_t len);

/* "950", "12.3k", "4.5M". Returns buf. */
const char *ht_format_count(double n, char *buf, size_t len);

/* The ps(1) letter of a raw task state: R S D T t X Z P I. */
char ht_task_state_letter(uint32_t state);

#endif /* HT_UNITS_H */
