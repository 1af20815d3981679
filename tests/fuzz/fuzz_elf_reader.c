// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the ELF symbol reader (userspace/symbols/elf_symbols.c),
 * through the in-memory opener the vdso uses: any input gives symbols or a
 * message, never a crash or a read out of bounds. What it accepts must
 * answer lookups consistently: each function is found at its address and
 * by its name, and merging a second copy changes no answer. The DT_SONAME
 * reader gets the same input as a file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symbols/elf_symbols.h"
#include "base/log.h"

/* Enough lookups to cover a small file without making each run slow. */
#define MAX_CHECKED 512

static void check_function(const struct ht_elf_symbols *e, const struct ht_elf_sym *s)
{
	const struct ht_elf_sym *found = ht_elf_symbols_find(e, s->addr), *named[8];
	size_t n = ht_elf_symbols_lookup(e, s->name, named, 8), hit = 0;

	/* The last address is no function's start: its end cannot be written. */
	if (s->addr == UINT64_MAX)
		return;
	if (!found || found->addr != s->addr)
		abort();
	if (!n)
		abort();
	for (size_t i = 0; i < n && i < 8; i++)
		hit |= named[i]->addr == s->addr;
	if (n <= 8 && !hit)
		abort();
}

static void check_accessors(const struct ht_elf_symbols *e)
{
	const struct ht_elf_segment *segs;
	size_t nsegs, count = ht_elf_symbols_count(e);
	const char *id = ht_elf_symbols_build_id(e), *link;
	uint32_t crc;
	uint64_t bias;

	if (id && (!*id || strspn(id, "0123456789abcdef") != strlen(id)))
		abort();
	link = ht_elf_symbols_debuglink(e, &crc);
	if (link && !*link)
		abort();
	segs = ht_elf_symbols_segments(e, &nsegs);
	for (size_t i = 0; i < nsegs; i++) {
		ht_elf_load_bias(e, 0x7f0000000000, 0x7f0000001000, segs[i].offset & ~0xfffull,
				 (segs[i].flags & 1) ? "r-xp" : "r--p", &bias);
		ht_elf_symbols_find(e, segs[i].vaddr);
		ht_elf_symbols_find(e, segs[i].vaddr + segs[i].memsz);
	}
	for (size_t i = 0; i < count && i < MAX_CHECKED; i++)
		check_function(e, ht_elf_symbols_at(e, i));
	if (ht_elf_symbols_at(e, count))
		abort();
	ht_elf_symbols_find(e, 0);
	ht_elf_symbols_find(e, UINT64_MAX);
}

/* The soname reader takes a file: the input goes into one kept in memory. */
static void check_soname(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char soname[64];
	int found;

	if (fd < 0)
		fd = memfd_create("fuzz.elf", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	found = ht_elf_soname(fd, "fuzz", soname, sizeof(soname));
	if (found < 0 && !ht_last_error()[0])
		abort(); /* every failure says why */
	if (found == 1 && (!soname[0] || strlen(soname) >= sizeof(soname)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht_elf_symbols *e = ht_elf_symbols_open_mem(data, size, "fuzz"), *again;
	size_t count;

	check_soname(data, size);
	if (!e) {
		if (!ht_last_error()[0])
			abort(); /* every failure says why */
		return 0;
	}
	check_accessors(e);
	count = ht_elf_symbols_count(e);
	again = ht_elf_symbols_open_mem(data, size, "fuzz again");
	if (!again || ht_elf_symbols_merge(e, again))
		abort();
	if (ht_elf_symbols_count(e) != count)
		abort();
	check_accessors(e);
	ht_elf_symbols_free(e);
	return 0;
}
