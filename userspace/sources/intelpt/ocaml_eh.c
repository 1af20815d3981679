// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The .note.ocaml_eh reader. The bytes come from a file the traced process
 * mapped: every length is checked before it is used, and a list that runs
 * past its note is an error, never a read beyond it.
 */
#include <elf.h>
#include <endian.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/log.h"
#include "sources/intelpt/ocaml_eh.h"

#define OCAML_NOTE_NAME "OCaml"
#define OCAML_NOTE_TYPE 1
#define SECTION_NOTE	".note.ocaml_eh"
#define SECTION_BASE	".stapsdt.base"
#define MAX_SECTIONS	(1u << 20)

/* A growing list of addresses. */
struct list {
	uint64_t *v;
	size_t n, cap;
};

static int list_add(struct list *l, uint64_t value)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return ht_fail("out of memory for OCaml trap addresses");
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = value;
	return 0;
}

static uint64_t read_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t read_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

/*
 * One descriptor: the base, then three lists ended by 0. Entries are kept
 * relative to the base so that notes with different bases can be merged.
 */
static int parse_desc(const uint8_t *d, size_t len, struct list lists[3])
{
	size_t pos = 8;
	uint64_t base;

	if (len < 8)
		return ht_fail(SECTION_NOTE ": descriptor of %zu bytes has no base", len);
	base = read_u64(d);
	for (int which = 0; which < 3; which++) {
		for (;;) {
			uint64_t addr;

			if (len - pos < 8)
				return ht_fail(SECTION_NOTE ": trap list %d is not ended by 0",
					       which + 1);
			addr = read_u64(d + pos);
			pos += 8;
			if (!addr)
				break;
			if (list_add(&lists[which], addr - base))
				return -1;
		}
	}
	return 0;
}

static size_t pad(size_t n, size_t align)
{
	return (n + align - 1) & ~(align - 1);
}

static void take(struct ht_ocaml_eh *out, struct list lists[3])
{
	out->enter = lists[0].v;
	out->nenter = lists[0].n;
	out->push = lists[1].v;
	out->npush = lists[1].n;
	out->pop = lists[2].v;
	out->npop = lists[2].n;
}

int ht_ocaml_eh_parse(const void *data, size_t len, size_t align, struct ht_ocaml_eh *out)
{
	const uint8_t *p = data;
	struct list lists[3] = {0};
	size_t pos = 0;
	int found = 0;

	memset(out, 0, sizeof(*out));
	if (align != 8)
		align = 4;
	while (len - pos >= 12) {
		uint32_t namesz = read_u32(p + pos), descsz = read_u32(p + pos + 4);
		uint32_t type = read_u32(p + pos + 8);
		size_t name_at = pos + 12, desc_at, next;

		/* Sizes are 32-bit: these sums cannot overflow a 64-bit size_t. */
		desc_at = name_at + pad(namesz, align);
		next = desc_at + pad(descsz, align);
		if (desc_at > len || descsz > len - desc_at)
			goto bad;
		if (type == OCAML_NOTE_TYPE && namesz == sizeof(OCAML_NOTE_NAME) &&
		    !memcmp(p + name_at, OCAML_NOTE_NAME, sizeof(OCAML_NOTE_NAME))) {
			if (parse_desc(p + desc_at, descsz, lists))
				goto fail;
			found = 1;
		}
		if (next >= len)
			break;
		pos = next;
	}
	if (!found) {
		for (int i = 0; i < 3; i++)
			free(lists[i].v);
		return 1;
	}
	take(out, lists);
	return 0;
bad:
	ht_fail(SECTION_NOTE ": note at offset %zu runs past the section's %zu bytes", pos, len);
fail:
	for (int i = 0; i < 3; i++)
		free(lists[i].v);
	return -1;
}

/* The section named NAME, or NULL. */
static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	size_t shstrndx, n = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn)) && n++ < MAX_SECTIONS) {
		const char *s;

		if (!gelf_getshdr(scn, sh))
			return NULL;
		s = elf_strptr(elf, shstrndx, sh->sh_name);
		if (s && !strcmp(s, name))
			return scn;
	}
	return NULL;
}

static int read_elf(Elf *elf, uint64_t file_size, const char *name, struct ht_ocaml_eh *out,
		    uint64_t *stapsdt_base)
{
	GElf_Shdr note_sh, base_sh;
	Elf_Scn *note, *base;
	Elf_Data *data;

	memset(out, 0, sizeof(*out));
	if (elf_kind(elf) != ELF_K_ELF)
		return ht_fail("%s: not an ELF file", name);
	note = find_section(elf, SECTION_NOTE, &note_sh);
	if (!note)
		return 1;
	base = find_section(elf, SECTION_BASE, &base_sh);
	if (!base)
		return ht_fail("%s: has " SECTION_NOTE " but no " SECTION_BASE, name);
	if (note_sh.sh_type == SHT_NOBITS || note_sh.sh_offset > file_size ||
	    note_sh.sh_size > file_size - note_sh.sh_offset)
		return ht_fail("%s: " SECTION_NOTE " lies outside the file", name);
	data = elf_getdata(note, NULL);
	if (!data || !data->d_buf || data->d_size > note_sh.sh_size)
		return ht_fail("%s: cannot read " SECTION_NOTE ": %s", name, elf_errmsg(-1));
	*stapsdt_base = base_sh.sh_addr;
	return ht_ocaml_eh_parse(data->d_buf, data->d_size, note_sh.sh_addralign, out);
}

int ht_ocaml_eh_read_mem(const void *image, size_t len, struct ht_ocaml_eh *out,
			 uint64_t *stapsdt_base)
{
	void *copy;
	Elf *elf;
	int rc;

	memset(out, 0, sizeof(*out));
	/* libelf may write to an image it was given; it gets a copy. */
	copy = malloc(len ? len : 1);
	if (!copy)
		return ht_fail("out of memory for an ELF image of %zu bytes", len);
	memcpy(copy, image, len);
	elf_version(EV_CURRENT);
	elf = elf_memory(copy, len);
	if (!elf) {
		free(copy);
		return ht_fail("not an ELF image: %s", elf_errmsg(-1));
	}
	rc = read_elf(elf, len, "ELF image", out, stapsdt_base);
	elf_end(elf);
	free(copy);
	return rc;
}

int ht_ocaml_eh_read_fd(int fd, const char *name, struct ht_ocaml_eh *out, uint64_t *stapsdt_base)
{
	struct stat st;
	Elf *elf;
	int rc;

	memset(out, 0, sizeof(*out));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return ht_fail("%s: not a regular file", name);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return ht_fail("%s: %s", name, elf_errmsg(-1));
	rc = read_elf(elf, (uint64_t)st.st_size, name, out, stapsdt_base);
	elf_end(elf);
	return rc;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void relocate_list(uint64_t *v, size_t n, uint64_t base)
{
	for (size_t i = 0; i < n; i++)
		v[i] += base;
	if (n)
		qsort(v, n, sizeof(*v), u64_cmp);
}

void ht_ocaml_eh_relocate(struct ht_ocaml_eh *eh, uint64_t runtime_base)
{
	relocate_list(eh->enter, eh->nenter, runtime_base);
	relocate_list(eh->push, eh->npush, runtime_base);
	relocate_list(eh->pop, eh->npop, runtime_base);
}

void ht_ocaml_eh_free(struct ht_ocaml_eh *eh)
{
	free(eh->enter);
	free(eh->push);
	free(eh->pop);
	memset(eh, 0, sizeof(*eh));
}
