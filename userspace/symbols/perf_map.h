/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * JIT symbols from a perf map (/tmp/perf-PID.map): one "START SIZE name"
 * line per function, hex numbers with or without 0x. Reading the file of a
 * target safely is the symbolizer's job; this is the parser and the lookup.
 */
#ifndef HT_PERF_MAP_H
#define HT_PERF_MAP_H

#include <stddef.h>
#include <stdint.h>

struct ht_perf_map_entry {
	uint64_t start, size;
	const char *name; /* may hold spaces */
	uint32_t line;	  /* 1-based; a later line wins over an earlier one */
};

struct ht_perf_map {
	struct ht_perf_map_entry *v; /* sorted by start, then line */
	size_t count;
	size_t bad_lines; /* skipped: malformed, empty range, or without its newline yet */
	char *names;
	uint64_t *reach; /* reach[i]: the largest end of v[0..i], as JIT code gets reused */
};

/*
 * Parse the text of a perf map. Pure (fuzzed). Malformed lines are skipped
 * and counted, and so is a last line without its newline: a JIT may be
 * appending while we read. Returns 0, or -1 with ht_last_error() set when
 * out of memory.
 */
int ht_perf_map_parse(const char *text, size_t len, struct ht_perf_map *out);

/* The entry that holds ADDR (the latest one written when several do), or NULL. */
const struct ht_perf_map_entry *ht_perf_map_find(const struct ht_perf_map *m, uint64_t addr);

void ht_perf_map_free(struct ht_perf_map *m);

#endif /* HT_PERF_MAP_H */
