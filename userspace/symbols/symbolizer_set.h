/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The user-space symbols of every target process: a symbolizer (and, for
 * DWARF call stacks, an unwinder) per process, made the first time a
 * process is asked for, all of them sharing their ELF symbol tables
 * (elf_cache.h), so 100 workers of one server read libc's symbols once.
 *
 * Bounded by count, least recently used first, not freed when a process
 * leaves the target set: a process that has exited may still have samples
 * in a capture not yet built, and its symbolizer (maps kept, files held
 * since they were mapped) is all that can still name them. A process not
 * asked for in the current dump (since the last ht_symbolizer_set_stale())
 * gives way once `keep` processes are held; those of the current dump
 * never do, however many there are. A pid used again by another process
 * (another start time) gets a new symbolizer.
 *
 * Not thread-safe: one thread uses a set.
 */
#ifndef HT_SYMBOLIZER_SET_H
#define HT_SYMBOLIZER_SET_H

#include <stdbool.h>
#include <stddef.h>

struct ht_symbolizer;
struct ht_dwarf_unwinder;
struct ht_symbolizer_set;

/* Processes kept by default beyond the current dump's. */
#define HT_SYMBOLIZER_SET_KEEP 32

struct ht_symbolizer_set_stats {
	size_t processes;      /* held now */
	size_t made;	       /* symbolizers made since creation */
	size_t evicted;	       /* given way to others */
	size_t elf_files_read; /* ELF files read by all of them: each shared file once */
	size_t tables;	       /* symbol tables held now, shared */
};

/* With DWARF unwinders when DWARF; KEEP processes (0: HT_SYMBOLIZER_SET_KEEP). NULL, ht_fail. */
struct ht_symbolizer_set *ht_symbolizer_set_new(bool dwarf, unsigned int keep);
void ht_symbolizer_set_free(struct ht_symbolizer_set *set);

/*
 * The symbolizer of process TGID: made now (reading its maps), or the one
 * held, its maps read again if they were not since ht_symbolizer_set_stale().
 * NULL with ht_last_error() when its maps cannot be read (it is gone, say);
 * not tried again until the next ht_symbolizer_set_stale(). What it returns
 * stays valid until the next ht_symbolizer_set_stale() or the set's free:
 * only a process not asked for since then gives way.
 */
struct ht_symbolizer *ht_symbolizer_set_get(struct ht_symbolizer_set *set, int tgid);

/*
 * The same, but a symbolizer held is returned with the maps it has, read
 * for an earlier dump: for a caller that asks again (ht_symbolizer_set_get())
 * only when an address falls outside them.
 */
struct ht_symbolizer *ht_symbolizer_set_held(struct ht_symbolizer_set *set, int tgid);

/* TGID's DWARF unwinder, the same way; NULL when the set has none, or with ht_last_error(). */
struct ht_dwarf_unwinder *ht_symbolizer_set_unwinder(struct ht_symbolizer_set *set, int tgid);

/* A new dump: each process's maps are read again when it is next asked for. */
void ht_symbolizer_set_stale(struct ht_symbolizer_set *set);

/* Read every held process's maps again now (libraries load late; a process may exit soon). */
void ht_symbolizer_set_refresh(struct ht_symbolizer_set *set);

/*
 * Read process TGID's maps again now, its symbolizer (and unwinder) made if
 * it has none: it runs a new program, which may exit before the next dump.
 * Not between a get and the dump it serves; it does not make TGID one of
 * the current dump's.
 */
void ht_symbolizer_set_reread(struct ht_symbolizer_set *set, int tgid);

/*
 * Something the caller may want to log once: a live process whose
 * symbolizer or unwinder could not be made. NULL when there is nothing new.
 */
const char *ht_symbolizer_set_next_note(struct ht_symbolizer_set *set);

void ht_symbolizer_set_get_stats(const struct ht_symbolizer_set *set,
				 struct ht_symbolizer_set_stats *out);

#endif /* HT_SYMBOLIZER_SET_H */
