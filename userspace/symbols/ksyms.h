/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Kernel symbols from /proc/kallsyms, read once while we may still see addresses. */
#ifndef HT_KSYMS_H
#define HT_KSYMS_H

#include <stddef.h>
#include <stdint.h>

struct ht_ksyms;

/* Load PATH (NULL: /proc/kallsyms). Returns NULL with ht_last_error() set. */
struct ht_ksyms *ht_ksyms_load(const char *path);
void ht_ksyms_free(struct ht_ksyms *k);

/* Symbols from N (start, name) pairs, as a raw capture keeps them. NULL when out of memory. */
struct ht_ksyms *ht_ksyms_from_list(const uint64_t *starts, const char *const *names, size_t n);

/* "function+0xoff" (or "[kernel]+0xADDR" when unknown) into buf. Returns buf. */
const char *ht_ksyms_format(const struct ht_ksyms *k, uint64_t addr, char *buf, size_t len);

/* The symbol containing ADDR and its start, or NULL. */
const char *ht_ksyms_find(const struct ht_ksyms *k, uint64_t addr, uint64_t *start);

/*
 * The text of function NAME: [*START, *END), up to the next symbol. Returns
 * 0, or -1 when it is not there (or addresses are hidden).
 */
int ht_ksyms_range(const struct ht_ksyms *k, const char *name, uint64_t *start, uint64_t *end);

/*
 * The text of function NAME and of the parts the compiler split from it
 * (NAME.part.0, NAME.cold, NAME.constprop.0...): up to MAX [start, end)
 * pairs into RANGES. Returns how many (0 when absent or addresses are hidden).
 */
size_t ht_ksyms_function_ranges(const struct ht_ksyms *k, const char *name, uint64_t (*ranges)[2],
				size_t max);

#endif /* HT_KSYMS_H */
