/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A process's mappings, from /proc/PID/maps. */
#ifndef HT_PROC_MAPS_H
#define HT_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>

struct ht_mapping {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* file offset of start */
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char perms[5]; /* "r-xp" */
	/*
	 * "" for anonymous memory; "[vdso]", "[heap]", "[anon:NAME]" as the
	 * kernel writes them; a " (deleted)" suffix is kept.
	 */
	char *path;
};

/* Sorted by start, never overlapping. */
struct ht_maps {
	struct ht_mapping *v;
	size_t count;
};

/*
 * Parse the text of a maps file. Pure (fuzzed). Returns 0, or -1 with
 * ht_last_error() naming the first bad line; OUT is then empty.
 */
int ht_maps_parse(const char *text, size_t len, struct ht_maps *out);

/* Read and parse /proc/PID/maps. Returns 0, or -1 with ht_last_error() set. */
int ht_maps_read(int pid, struct ht_maps *out);

/* The mapping that holds ADDR, or NULL. */
const struct ht_mapping *ht_maps_find(const struct ht_maps *m, uint64_t addr);

/* Whether the mapping is executable. */
static inline int ht_mapping_is_exec(const struct ht_mapping *m)
{
	return m->perms[2] == 'x';
}

void ht_maps_free(struct ht_maps *m);

#endif /* HT_PROC_MAPS_H */
