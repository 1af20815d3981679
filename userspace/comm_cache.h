/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pid -> comm for any task on the machine: the BPF comm map (kept current at
 * fork, exec, rename and exit) first, then /proc, then "[exited]".
 */
#ifndef HT_COMM_CACHE_H
#define HT_COMM_CACHE_H

#include <stdint.h>
#include "hybtrace/records.h"

struct ht_monitor;

#define HT_COMM_CACHE_SLOTS 4096

struct ht_comm_cache {
	const struct ht_monitor *monitor; /* NULL: /proc only (tests, offline) */
	struct {
		uint32_t pid;
		char comm[HT_COMM_LEN];
	} slots[HT_COMM_CACHE_SLOTS];
};

void ht_comm_cache_init(struct ht_comm_cache *c, const struct ht_monitor *m);

/*
 * The comm of PID into buf (at least HT_COMM_LEN + 8 bytes); pid 0 is the
 * idle task, "swapper/CPU". Returns buf.
 */
const char *ht_comm_lookup(struct ht_comm_cache *c, uint32_t pid, unsigned int cpu, char *buf,
			   size_t len);

#endif /* HT_COMM_CACHE_H */
