/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where the mark registries are in each target process, kept from one dump
 * to the next. Finding them reads the process's maps (and opens each module
 * not seen before); a service of a thousand processes would pay that for
 * every process at every dump. So a process's maps are read again only when
 * its address space changed size since (/proc/PID/statm: something was
 * mapped or unmapped, a library loaded), when it ran a new program, or when
 * what was found did not read back; else the addresses found last time are
 * used as they are.
 *
 * Bounded: HT_MARKS_PROCS_MAX processes by default; beyond it the one least
 * recently asked for gives way, never one of the current round (a dump):
 * one that finds no room is located without being kept.
 *
 * Not thread-safe: the thread that freezes dumps uses it.
 */
#ifndef HT_MARKS_PROCS_H
#define HT_MARKS_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sources/marks/marks.h"

#define HT_MARKS_PROCS_MAX 4096
/* Registries read in one process: one per module that includes mark.h, in practice. */
#define HT_MARKS_PROC_REGISTRIES 4

struct ht_marks_proc {
	int tgid;
	unsigned long long vm_pages; /* its size when its maps were read; 0: read them next time */
	uint64_t round;		     /* the round that last asked for it */
	struct ht_marks_locator locator;
	uint64_t addrs[HT_MARKS_PROC_REGISTRIES];
	size_t naddrs;
};

struct ht_marks_procs {
	struct ht_marks_proc *v; /* sorted by tgid */
	size_t count, cap, max;
	uint64_t round;
	uint64_t scratch[HT_MARKS_PROC_REGISTRIES]; /* a process that found no room */
	struct ht_marks_files files;		    /* the modules' files, for all of them */
	uint64_t maps_read;			    /* processes' maps read, in all */
	uint64_t maps_kept;			    /* lookups that read no maps */
};

/* Empty; MAX processes kept (0: HT_MARKS_PROCS_MAX). */
void ht_marks_procs_init(struct ht_marks_procs *p, size_t max);
void ht_marks_procs_free(struct ht_marks_procs *p);

/* A new round (a dump): processes asked for from now on give way to none until the next. */
void ht_marks_procs_round(struct ht_marks_procs *p);

/*
 * The registries of process TGID into *ADDRS (valid until the next call)
 * and *N, which may be 0. Returns 0; or, when its size or maps cannot be
 * read (it is gone), forgets it and returns 1 if registries were known in
 * it (marks were lost), -1 if not.
 */
int ht_marks_procs_find(struct ht_marks_procs *p, int tgid, const uint64_t **addrs, size_t *n);

/* 1 when registries were found in TGID the last time it was asked for, else 0. */
int ht_marks_procs_known(const struct ht_marks_procs *p, int tgid);

/* What was found in TGID is not to be trusted: its maps are read again next time (exec). */
void ht_marks_procs_stale(struct ht_marks_procs *p, int tgid);

/* TGID left the target set: what was kept for it goes. */
void ht_marks_procs_forget(struct ht_marks_procs *p, int tgid);

#endif /* HT_MARKS_PROCS_H */
