/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ELF symbol tables shared by the symbolizers of many processes
 * (symbolizer_set.h): a library that 100 workers map is held open once and
 * its symbols are read once.
 *
 * Two kinds of entries, both counted by references:
 * - a file, as mappings name it: its device and inode from the maps, its
 *   size and mtime from a stat (a file rewritten in place is another one).
 *   Until its symbols are read it may hold the file open, so that they can
 *   be read after every process that mapped it has exited.
 * - a table: one file's symbols (with what a separate debug file added),
 *   keyed by the file's build-id, or by the file's identity when it has
 *   none, so that two files with one build-id (one library in two
 *   containers' layers) share one table.
 *
 * Not thread-safe: one thread uses a cache and its symbolizers.
 */
#ifndef HT_ELF_CACHE_H
#define HT_ELF_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ht_elf_symbols;
struct ht_elf_cache;

/* A mapped file's identity; size -1: unknown (it could not be opened), never shared. */
struct ht_elf_file_id {
	uint64_t dev;	     /* makedev(major, minor) of the maps line */
	uint64_t inode;	     /* of the maps line */
	int64_t size;	     /* st_size, of the file opened */
	int64_t mtime_ns;    /* st_mtim */
	uint64_t vdso_bytes; /* the vdso: its size, and dev and inode 0 */
};

struct ht_elf_table {
	struct ht_elf_symbols *elf;
	char *source; /* where its symbols were read from */
	/* The cache's. */
	char *key;
	unsigned int refs;
	struct ht_elf_table *next;
};

enum ht_elf_file_state { HT_ELF_FILE_UNREAD, HT_ELF_FILE_READ, HT_ELF_FILE_FAILED };

struct ht_elf_file {
	struct ht_elf_file_id id;
	enum ht_elf_file_state state;
	struct ht_elf_table *table; /* READ: its symbols (one reference) */
	/* UNREAD: the file, opened while a process surely mapped it; -1 when none is held. */
	int held_fd;
	char *held_source; /* the path it was opened by */
	/* The cache's. */
	bool indexed;
	unsigned int refs;
	struct ht_elf_file *next;
};

struct ht_elf_cache_stats {
	size_t files, tables; /* held now */
	size_t held_fds;      /* files held open until read */
	size_t tables_read;   /* tables added since creation: ELF files read */
	size_t tables_shared; /* tables found already read, by build-id or identity */
	size_t files_shared;  /* files found already known by another mapping */
};

struct ht_elf_cache *ht_elf_cache_new(void);
/* Frees what no one holds; a cache is freed after every symbolizer that uses it. */
void ht_elf_cache_free(struct ht_elf_cache *c);

/* The file with identity ID (not size -1), with a new reference, or NULL if unknown. */
struct ht_elf_file *ht_elf_cache_find_file(struct ht_elf_cache *c, const struct ht_elf_file_id *id);

/*
 * A new file with identity ID, UNREAD, nothing held, one reference; found
 * by ht_elf_cache_find_file() from now on unless its size is -1. NULL with
 * ht_fail() when out of memory.
 */
struct ht_elf_file *ht_elf_cache_add_file(struct ht_elf_cache *c, const struct ht_elf_file_id *id);

/* Drop a reference to F; the last closes what it holds and drops its table. */
void ht_elf_cache_put_file(struct ht_elf_cache *c, struct ht_elf_file *f);

/* Close the file F held, if any (its symbols were read, or it is held no more). */
void ht_elf_file_release(struct ht_elf_file *f);

/*
 * The key a table of a file with BUILD_ID (hex; NULL or "" for none) and
 * identity ID goes by, into BUF; "" for a file that has neither (never shared).
 */
const char *ht_elf_table_key(const char *build_id, const struct ht_elf_file_id *id, char *buf,
			     size_t len);

/* The table under KEY, with a new reference, or NULL (KEY "" never matches). */
struct ht_elf_table *ht_elf_cache_find_table(struct ht_elf_cache *c, const char *key);

/*
 * Keep ELF (taken, whatever happens) and SOURCE (copied) as the table under
 * KEY ("": kept, never found), one reference. A table already under KEY is
 * returned instead, with a new reference, and ELF freed. NULL with ht_fail()
 * when out of memory.
 */
struct ht_elf_table *ht_elf_cache_add_table(struct ht_elf_cache *c, const char *key,
					    struct ht_elf_symbols *elf, const char *source);

/* Drop a reference to T; the last frees its symbols. */
void ht_elf_cache_put_table(struct ht_elf_cache *c, struct ht_elf_table *t);

/* F's symbols are T (a reference F takes over): F becomes READ, and holds its file no more. */
void ht_elf_file_set_table(struct ht_elf_file *f, struct ht_elf_table *t);

void ht_elf_cache_get_stats(const struct ht_elf_cache *c, struct ht_elf_cache_stats *out);

#endif /* HT_ELF_CACHE_H */
