/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The user-space symbolizer of one target process: address -> function,
 * module and offset; function name -> runtime addresses. ELF symbol tables
 * are read once per file and kept across refreshes while the file stays
 * the same, in a cache (elf_cache.h) that the symbolizers of several
 * processes may share (symbolizer_set.h keeps one per process). Not
 * thread-safe: one symbolizer, and the cache it uses, per thread.
 */
#ifndef HT_SYMBOLIZER_H
#define HT_SYMBOLIZER_H

#include <stddef.h>
#include <stdint.h>

struct ht_symbolizer;
struct ht_elf_cache;

struct ht_symbol {
	const char *function;	  /* NULL when unknown */
	uint64_t function_offset; /* addr - the function's start */
	/* The mapping's path, "[vdso]", "[anon]", "[jit]", "[heap]"...; NULL without a mapping. */
	const char *module;
	/* For "module+0xoffset": the file offset; from the mapping's start for anything not a file.
	 */
	uint64_t module_offset;
	const char *build_id; /* hex, or NULL */
	int executable;	      /* the mapping holding it is executable: code can be there */
};

struct ht_symbol_address {
	uint64_t addr;	    /* runtime address in the target */
	uint64_t size;	    /* the function's size, 0 when unknown */
	const char *module; /* the mapping's path */
	const char *build_id;
};

struct ht_symbolizer_stats {
	size_t modules;	       /* ELF files held now */
	size_t elf_reads;      /* ELF files read since creation: cache misses */
	size_t tables_shared;  /* tables another symbolizer of its cache had read already */
	size_t perf_map_reads; /* perf map (re)reads */
};

/* For process PID; reads its maps. Returns NULL with ht_last_error() set. */
struct ht_symbolizer *ht_symbolizer_new(int pid);

/*
 * The same, its symbol tables kept in CACHE, shared with every other
 * symbolizer of CACHE (NULL: a cache of its own). CACHE outlives it.
 */
struct ht_symbolizer *ht_symbolizer_new_shared(int pid, struct ht_elf_cache *cache);
void ht_symbolizer_free(struct ht_symbolizer *s);

/*
 * Read /proc/PID/maps again (libraries load late). ELF data of files still
 * mapped and unchanged (device, inode, path, size, mtime) is kept; the rest
 * is dropped. Returns 0, or -1 with ht_last_error() set (the old state stays).
 */
int ht_symbolizer_refresh(struct ht_symbolizer *s);

/*
 * Symbolize ADDR. Returns 0 when a mapping holds it, -1 otherwise (OUT then
 * has no module). Strings stay valid until the next refresh or free.
 */
int ht_symbolize(struct ht_symbolizer *s, uint64_t addr, struct ht_symbol *out);

/* "function", else "module+0xoffset" (the module's basename), else "0xADDR". Returns buf. */
const char *ht_symbol_format(const struct ht_symbol *sym, uint64_t addr, char *buf, size_t len);

/*
 * The runtime addresses of function NAME in every mapped module, or only in
 * MODULE (a path or a basename, "libc.so.6"; NULL for any). Up to MAX into
 * OUT; *FOUND says how many there are. Returns 0 when there is at least
 * one, -1 with ht_last_error() saying why there is none.
 */
int ht_symbolizer_lookup(struct ht_symbolizer *s, const char *module, const char *name,
			 struct ht_symbol_address *out, size_t max, size_t *found);

/*
 * Something the caller may want to log once: a module that could not be
 * read, a debug file that did not match, a perf map that was ignored. Each
 * reason is returned once; NULL when there is nothing new.
 */
const char *ht_symbolizer_next_note(struct ht_symbolizer *s);

/*
 * Where the symbols for ADDR's module were read from ("/proc/PID/map_files/...",
 * "/proc/PID/mem", a debug file...), or NULL. Valid until the next refresh.
 */
const char *ht_symbolizer_source(struct ht_symbolizer *s, uint64_t addr);

void ht_symbolizer_get_stats(const struct ht_symbolizer *s, struct ht_symbolizer_stats *out);

#endif /* HT_SYMBOLIZER_H */
