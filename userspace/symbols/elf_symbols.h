/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One ELF file's function symbols (.symtab and .dynsym merged), its
 * loadable segments, build-id and .gnu_debuglink, read through libelf with
 * every size and offset checked first: the files come from the traced
 * process and may be truncated or hostile.
 */
#ifndef HT_ELF_SYMBOLS_H
#define HT_ELF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

struct ht_elf_symbols;

struct ht_elf_sym {
	uint64_t addr; /* file virtual address (st_value) */
	uint64_t size; /* st_size; 0 when unknown (it then reaches the next symbol) */
	const char *name;
	uint8_t bind; /* STB_GLOBAL, STB_WEAK, STB_LOCAL */
	uint8_t type; /* STT_FUNC, STT_GNU_IFUNC, STT_NOTYPE */
};

/* A PT_LOAD program header. */
struct ht_elf_segment {
	uint64_t vaddr, memsz;
	uint64_t offset, filesz;
	uint32_t flags; /* PF_R | PF_W | PF_X */
};

enum {
	HT_ELF_HAS_SYMTAB = 1 << 0, /* a .symtab with entries: nothing left to find elsewhere */
	HT_ELF_HAS_DYNSYM = 1 << 1,
	HT_ELF_HAS_EH_FRAME = 1 << 2,
	HT_ELF_HAS_DEBUG_FRAME = 1 << 3,
};

/*
 * Read FD (a regular file; not closed, may be closed after the call).
 * NAME is for messages. Returns NULL with ht_last_error() saying why.
 */
struct ht_elf_symbols *ht_elf_symbols_open_fd(int fd, const char *name);

/* Read an image in memory (the vdso); DATA is copied. */
struct ht_elf_symbols *ht_elf_symbols_open_mem(const void *data, size_t len, const char *name);

void ht_elf_symbols_free(struct ht_elf_symbols *e);

/*
 * Move the symbols of SRC (a separate debug file) into DST and free SRC.
 * DST keeps its own segments, build-id and debuglink. Returns 0 or -1.
 */
int ht_elf_symbols_merge(struct ht_elf_symbols *dst, struct ht_elf_symbols *src);

/* The function that holds file address VADDR, or NULL. */
const struct ht_elf_sym *ht_elf_symbols_find(const struct ht_elf_symbols *e, uint64_t vaddr);

/*
 * Every symbol named NAME (aliases at several addresses, local functions of
 * the same name): up to MAX into OUT. Returns how many there are.
 */
size_t ht_elf_symbols_lookup(const struct ht_elf_symbols *e, const char *name,
			     const struct ht_elf_sym **out, size_t max);

/* How many distinct function addresses are known. */
size_t ht_elf_symbols_count(const struct ht_elf_symbols *e);

/* The function at the I-th distinct address, in address order (I < count). */
const struct ht_elf_sym *ht_elf_symbols_at(const struct ht_elf_symbols *e, size_t i);

/* ET_EXEC, ET_DYN (or another e_type). */
int ht_elf_symbols_type(const struct ht_elf_symbols *e);

/* HT_ELF_HAS_* bits. */
unsigned ht_elf_symbols_flags(const struct ht_elf_symbols *e);

/* The GNU build-id as lowercase hex, or NULL. */
const char *ht_elf_symbols_build_id(const struct ht_elf_symbols *e);

/* The .gnu_debuglink file name and its CRC-32, or NULL. */
const char *ht_elf_symbols_debuglink(const struct ht_elf_symbols *e, uint32_t *crc);

/* The PT_LOAD segments, in program-header order. */
const struct ht_elf_segment *ht_elf_symbols_segments(const struct ht_elf_symbols *e, size_t *count);

/*
 * The load bias of one mapping of this file: runtime address = file vaddr +
 * bias, for the addresses of that mapping. The mapping [MAP_START, MAP_END)
 * at file offset MAP_OFFSET with MAP_PERMS ("r-xp") is as /proc/PID/maps
 * gives it. Returns 0, or -1 with ht_last_error() set when no loadable segment
 * lies in the mapping.
 */
int ht_elf_load_bias(const struct ht_elf_symbols *e, uint64_t map_start, uint64_t map_end,
		     uint64_t map_offset, const char *map_perms, uint64_t *bias);

/*
 * The DT_SONAME of the ELF file FD ("libz.so.1"), from its .dynamic section,
 * into OUT (LEN bytes). NAME is for messages. Returns 1 when it has one, 0
 * when it has none (an executable, a library linked without -soname, a
 * file without section headers, a name longer than LEN), -1 with
 * ht_last_error() when FD is not a readable ELF file.
 */
int ht_elf_soname(int fd, const char *name, char *out, size_t len);

/*
 * The GNU build-id of the ELF file FD as lowercase hex into OUT (LEN
 * bytes), from its PT_NOTE segments, without reading its symbols. NAME is
 * for messages. Returns 1 when it has one, 0 when it has none (or one
 * longer than LEN), -1 with ht_last_error() when FD is not a readable ELF
 * file.
 */
int ht_elf_build_id_fd(int fd, const char *name, char *out, size_t len);

#endif /* HT_ELF_SYMBOLS_H */
