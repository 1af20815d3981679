/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pid -> comm for any task on the machine: the BPF comm map (kept current at
 * fork, exec, rename and exit) first, then names seeded from a raw capture,
 * then /proc, then "[exited]". An offline cache (decoding a capture made
 * elsewhere or earlier) never reads /proc: this machine's pid N is not the
 * traced one's. And tid -> tgid the same way: the comm map keeps each
 * task's process, for a thread that has exited too (until no dump to be
 * written can show it), /proc answers for a living one.
 */
#ifndef HT_COMM_CACHE_H
#define HT_COMM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"
#include "kernel/pid_names.h"

struct ht_monitor;

#define HT_COMM_CACHE_SLOTS 4096

struct ht_comm_cache {
	const struct ht_monitor *monitor; /* NULL: /proc only (tests, offline) */
	bool offline;			  /* names come only from the seeds */
	/* Seeded names, sorted by pid: never evicted, unlike the slots. */
	struct ht_pid_name *seeded;
	size_t nseeded, seeded_cap;
	/* Seeded processes, sorted by tid. */
	struct ht_comm_task {
		uint32_t tid, tgid;
	} *seeded_tgids;
	size_t nseeded_tgids, seeded_tgids_cap;
	/* /proc answers, direct-mapped by pid % slots: a collision just reads /proc again. */
	struct ht_pid_name slots[HT_COMM_CACHE_SLOTS];
	/*
	 * /proc's tid -> tgid, the same way. Only tasks the comm map does not
	 * know are asked: untouched since attach, so neither gone nor replaced.
	 */
	struct {
		uint32_t tid, tgid;
	} tgid_slots[HT_COMM_CACHE_SLOTS];
};

/* Zeroed: live (offline false), nothing seeded. */
void ht_comm_cache_init(struct ht_comm_cache *c, const struct ht_monitor *m);

/* Free the seeded names; the cache is empty (as after init) afterwards. */
void ht_comm_cache_free(struct ht_comm_cache *c);

/*
 * Name PID COMM (e.g. from a raw capture's COMMS); seeding a pid again
 * renames it. 0, or -1 with ht_fail() (memory: the name is not kept).
 */
int ht_comm_cache_seed(struct ht_comm_cache *c, uint32_t pid, const char *comm);

/*
 * Thread TID is of process TGID (e.g. a capture's, or a test's); seeding a
 * tid again moves it. 0, or -1 with ht_fail() (memory: it is not kept).
 */
int ht_comm_cache_seed_tgid(struct ht_comm_cache *c, uint32_t tid, uint32_t tgid);

/*
 * The comm of PID into buf (at least HT_COMM_LEN + 8 bytes); pid 0 is the
 * idle task, "swapper/CPU". Returns buf.
 */
const char *ht_comm_lookup(struct ht_comm_cache *c, uint32_t pid, unsigned int cpu, char *buf,
			   size_t len);

/* ht_comm_lookup() of CACHE, a struct ht_comm_cache, as ht_task_namer (chain_format.h) calls it. */
const char *ht_comm_name(void *cache, uint32_t tid, char *buf, size_t len);

/*
 * The process (thread-group id) of thread TID: the comm map's, a seeded
 * one, /proc's; 0 when unknown: offline and not seeded, a task gone and
 * forgotten, or pid 0.
 */
uint32_t ht_comm_tgid(struct ht_comm_cache *c, uint32_t tid);

#endif /* HT_COMM_CACHE_H */
