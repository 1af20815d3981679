/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Task names in an array sorted by pid: a window names few tasks and looks
 * them up once per event, so sorted inserts and binary search. Used by the
 * raw capture (the names the live dump gave) and the comm cache (names
 * seeded from a capture).
 */
#ifndef HT_PID_NAMES_H
#define HT_PID_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

struct ht_pid_name {
	uint32_t pid;
	char comm[HT_COMM_LEN];
};

/* Where PID is in V[0..N), or where it would go (*FOUND says which). */
size_t ht_pid_name_index(const struct ht_pid_name *v, size_t n, uint32_t pid, bool *found);

/*
 * Name PID COMM (NULL: "") in the array *V of *N names, *CAP allocated,
 * truncated to a comm. A PID already there keeps its name unless REPLACE.
 * Returns 0, or -1 out of memory with the reason in ht_last_error().
 */
int ht_pid_name_set(struct ht_pid_name **v, size_t *n, size_t *cap, uint32_t pid,
		    const char *comm, bool replace);

#endif /* HT_PID_NAMES_H */
