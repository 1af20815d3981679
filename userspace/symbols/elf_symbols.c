// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Function symbols of one ELF file through libelf. libelf parses, but it
 * does not promise that a hostile file cannot make it (or us) read past
 * the end: every header, section and string used here is checked against
 * the file's size first, and anything that does not fit is an error that
 * says what and where.
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "base/partition.h"

/* Beyond these a file is not one a compiler wrote. */
#define MAX_SECTIONS	   (1u << 20)
#define MAX_SEGMENTS	   4096u
#define MAX_SYMBOLS	   (64u << 20)
#define MAX_BUILD_ID_BYTES 64u
#define MAX_TEXT_SECTIONS  256u
/* A failed lookup looks back this many functions for one that nests the address. */
#define NESTED_SCAN_LIMIT 8

struct range {
	uint64_t start, end;
};

struct ht_elf_symbols {
	char *name; /* for messages */
	int type;
	unsigned flags;
	char *build_id;
	char *debuglink;
	uint32_t debuglink_crc;
	struct ht_elf_segment *segments;
	size_t nsegments;
	struct ht_elf_sym *syms; /* every function symbol read, in no order */
	size_t nsyms, syms_cap;
	uint32_t *by_addr;  /* one preferred symbol per address, by address */
	uint64_t *addr_end; /* parallel to by_addr: where that function ends */
	size_t naddr;
	uint32_t *by_name; /* by name, then address; (name, address) pairs once */
	size_t nname;
	struct range *text; /* executable sections, to end unsized symbols */
	size_t ntext;
	char **blocks; /* the names live here */
	size_t nblocks;
};

/* State while one file is read. */
struct reader {
	Elf *elf;
	struct ht_elf_symbols *e;
	uint64_t file_size;
	size_t shnum;
	const char *shstr; /* section names, checked; NULL when there are none */
	size_t shstr_size;
	uint8_t *is_text; /* per section: SHF_EXECINSTR */
	int little_endian;
};

static int fail_elf(const struct reader *r, const char *what)
{
	return ht_fail("%s: %s: %s", r->e->name, what, elf_errmsg(-1));
}

/* Whether [off, off + size) lies inside the file. */
static int in_file(const struct reader *r, uint64_t off, uint64_t size)
{
	return off <= r->file_size && size <= r->file_size - off;
}

static int read_header(struct reader *r, GElf_Ehdr *eh)
{
	if (elf_kind(r->elf) != ELF_K_ELF)
		return ht_fail("%s: not an ELF file", r->e->name);
	if (!gelf_getehdr(r->elf, eh))
		return fail_elf(r, "bad ELF header");
	if (eh->e_ident[EI_DATA] != ELFDATA2LSB && eh->e_ident[EI_DATA] != ELFDATA2MSB)
		return ht_fail("%s: unknown byte order %u", r->e->name, eh->e_ident[EI_DATA]);
	r->little_endian = eh->e_ident[EI_DATA] == ELFDATA2LSB;
	r->e->type = eh->e_type;
	return 0;
}

static void add_segment(struct reader *r, const GElf_Phdr *ph)
{
	struct ht_elf_symbols *e = r->e;
	struct ht_elf_segment *s = &e->segments[e->nsegments++];

	s->vaddr = ph->p_vaddr;
	s->memsz = ph->p_memsz;
	s->offset = ph->p_offset;
	s->filesz = ph->p_filesz;
	s->flags = ph->p_flags;
}

static int read_segments(struct reader *r, const GElf_Ehdr *eh)
{
	size_t phnum, entsize = gelf_fsize(r->elf, ELF_T_PHDR, 1, EV_CURRENT);

	/* libelf quietly reports none when they do not fit: check the header's own count. */
	if (!eh->e_phnum)
		return 0;
	if (eh->e_phentsize != entsize)
		return ht_fail("%s: program header size %u, not %zu", r->e->name, eh->e_phentsize,
			       entsize);
	phnum = eh->e_phnum;
	/* PN_XNUM: the count is in section 0, which libelf reads. */
	if (phnum == PN_XNUM && elf_getphdrnum(r->elf, &phnum))
		return fail_elf(r, "bad program header count");
	if (phnum > MAX_SEGMENTS)
		return ht_fail("%s: %zu program headers (absurd)", r->e->name, phnum);
	if (!in_file(r, eh->e_phoff, (uint64_t)phnum * entsize))
		return ht_fail("%s: program headers past the end of the file", r->e->name);
	r->e->segments = calloc(phnum, sizeof(*r->e->segments));
	if (!r->e->segments)
		return ht_fail("%s: out of memory", r->e->name);
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(r->elf, (int)i, &ph))
			return fail_elf(r, "bad program header");
		if (ph.p_type != PT_LOAD)
			continue;
		/* A separate debug file keeps the headers but not the bytes: filesz 0 past the end.
		 */
		if (ph.p_filesz && !in_file(r, ph.p_offset, ph.p_filesz))
			return ht_fail("%s: loadable segment %zu (offset 0x%llx, size 0x%llx) "
				       "past the end of the file",
				       r->e->name, i, (unsigned long long)ph.p_offset,
				       (unsigned long long)ph.p_filesz);
		add_segment(r, &ph);
	}
	return 0;
}

/* A section's data as it is in the file, all of it, or NULL with a message. */
static Elf_Data *section_data(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, const char *what)
{
	Elf_Data *d = elf_getdata(scn, NULL);

	if (!d) {
		fail_elf(r, what);
		return NULL;
	}
	if (sh->sh_type != SHT_NOBITS && sh->sh_size && (!d->d_buf || d->d_size != sh->sh_size)) {
		ht_fail("%s: %s: section data is %zu bytes, header says %llu", r->e->name, what,
			d->d_size, (unsigned long long)sh->sh_size);
		return NULL;
	}
	return d;
}

/* STR at offset OFF of a string table of SIZE bytes, if it is there and ends. */
static const char *string_at(const char *str, size_t size, uint64_t off)
{
	if (!str || off >= size)
		return NULL;
	/* A table that ends in NUL (every real one) ends each of its strings. */
	if (str[size - 1] != '\0' && !memchr(str + off, '\0', size - off))
		return NULL;
	return str + off;
}

static const char *section_name(const struct reader *r, const GElf_Shdr *sh)
{
	const char *name = string_at(r->shstr, r->shstr_size, sh->sh_name);

	return name ? name : "";
}

static int read_section_names(struct reader *r)
{
	size_t ndx;
	Elf_Scn *scn;
	GElf_Shdr sh;
	Elf_Data *d;

	if (elf_getshdrstrndx(r->elf, &ndx))
		return fail_elf(r, "bad section name table index");
	if (ndx == SHN_UNDEF)
		return 0;
	if (ndx >= r->shnum)
		return ht_fail("%s: section name table index %zu out of %zu sections", r->e->name,
			       ndx, r->shnum);
	scn = elf_getscn(r->elf, ndx);
	if (!scn || !gelf_getshdr(scn, &sh))
		return fail_elf(r, "bad section name table");
	if (sh.sh_type != SHT_STRTAB)
		return ht_fail("%s: section name table is not a string table", r->e->name);
	d = section_data(r, scn, &sh, "section names");
	if (!d)
		return -1;
	r->shstr = d->d_buf;
	r->shstr_size = d->d_size;
	return 0;
}

/* Every section header within the file: a cut or corrupted file stops here. */
static int check_sections(struct reader *r, const GElf_Ehdr *eh)
{
	size_t entsize = gelf_fsize(r->elf, ELF_T_SHDR, 1, EV_CURRENT), count;

	if (!eh->e_shoff)
		return 0;
	if (eh->e_shentsize != entsize)
		return ht_fail("%s: section header size %u, not %zu", r->e->name, eh->e_shentsize,
			       entsize);
	/* Section 0 holds the count when e_shnum cannot (extended numbering). */
	if (!in_file(r, eh->e_shoff, entsize))
		return ht_fail("%s: section headers past the end of the file", r->e->name);
	if (elf_getshdrnum(r->elf, &r->shnum))
		return fail_elf(r, "bad section count");
	/* libelf quietly reports none when they do not fit: check the header's own count. */
	count = eh->e_shnum ? eh->e_shnum : r->shnum;
	if (count > MAX_SECTIONS)
		return ht_fail("%s: %zu sections (absurd)", r->e->name, count);
	if (!in_file(r, eh->e_shoff, (uint64_t)count * entsize))
		return ht_fail("%s: section headers past the end of the file", r->e->name);
	if (r->shnum != count)
		return ht_fail("%s: %zu section headers, libelf sees %zu", r->e->name, count,
			       r->shnum);
	if (!r->shnum)
		return 0;
	r->is_text = calloc(r->shnum, 1);
	if (!r->is_text)
		return ht_fail("%s: out of memory", r->e->name);
	for (size_t i = 1; i < r->shnum; i++) {
		Elf_Scn *scn = elf_getscn(r->elf, i);
		GElf_Shdr sh;

		if (!scn || !gelf_getshdr(scn, &sh))
			return fail_elf(r, "bad section header");
		if (sh.sh_type != SHT_NOBITS && !in_file(r, sh.sh_offset, sh.sh_size))
			return ht_fail("%s: section %zu (offset 0x%llx, size 0x%llx) past the end "
				       "of the file (%llu bytes)",
				       r->e->name, i, (unsigned long long)sh.sh_offset,
				       (unsigned long long)sh.sh_size,
				       (unsigned long long)r->file_size);
		r->is_text[i] = (sh.sh_flags & SHF_EXECINSTR) != 0;
	}
	return read_section_names(r);
}

static int add_text_range(struct reader *r, const GElf_Shdr *sh)
{
	struct ht_elf_symbols *e = r->e;
	struct range *t;

	/* Real files have a handful; past the cap unsized symbols end at the next one. */
	if (!(sh->sh_flags & SHF_ALLOC) || !sh->sh_size ||
	    sh->sh_addr + sh->sh_size < sh->sh_addr || e->ntext >= MAX_TEXT_SECTIONS)
		return 0;
	t = realloc(e->text, (e->ntext + 1) * sizeof(*t));
	if (!t)
		return ht_fail("%s: out of memory", e->name);
	e->text = t;
	e->text[e->ntext++] = (struct range){sh->sh_addr, sh->sh_addr + sh->sh_size};
	return 0;
}

/*
 * Whether SYM is a function we keep. Functions and ifuncs; untyped symbols
 * with a size in code are assembly functions that lack a .type.
 */
static int is_function(const struct reader *r, const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if (sym->st_shndx == SHN_UNDEF || !sym->st_value)
		return 0;
	if (type == STT_FUNC || type == STT_GNU_IFUNC)
		return 1;
	return type == STT_NOTYPE && sym->st_size && sym->st_shndx < r->shnum &&
	       r->is_text[sym->st_shndx];
}

static int grow_syms(struct ht_elf_symbols *e, size_t more)
{
	size_t cap = e->syms_cap ? e->syms_cap : 256;
	struct ht_elf_sym *s;

	if (e->nsyms + more > MAX_SYMBOLS)
		return ht_fail("%s: more than %u function symbols", e->name, MAX_SYMBOLS);
	if (e->nsyms + more <= e->syms_cap)
		return 0;
	while (cap < e->nsyms + more)
		cap *= 2;
	s = realloc(e->syms, cap * sizeof(*s));
	if (!s)
		return ht_fail("%s: out of memory", e->name);
	e->syms = s;
	e->syms_cap = cap;
	return 0;
}

static int add_block(struct ht_elf_symbols *e, char *block)
{
	char **b = realloc(e->blocks, (e->nblocks + 1) * sizeof(*b));

	if (!b) {
		free(block);
		return ht_fail("%s: out of memory", e->name);
	}
	e->blocks = b;
	e->blocks[e->nblocks++] = block;
	return 0;
}

struct symtab {
	const char *what; /* ".symtab" */
	Elf_Data *syms, *strs;
	size_t count;
};

/*
 * One pass over a symbol table: checks every function's name, counts the
 * functions and their name bytes; with NAMES set, also adds them.
 */
static int scan_symbols(struct reader *r, const struct symtab *t, size_t *nfuncs,
			size_t *name_bytes, char *names)
{
	*nfuncs = *name_bytes = 0;
	for (size_t i = 1; i < t->count; i++) {
		GElf_Sym sym;
		const char *name;
		size_t len;

		if (!gelf_getsym(t->syms, (int)i, &sym))
			return fail_elf(r, t->what);
		if (!is_function(r, &sym))
			continue;
		name = string_at(t->strs->d_buf, t->strs->d_size, sym.st_name);
		if (!name)
			return ht_fail("%s: %s symbol %zu: name offset %u past the end of its "
				       "string table (%zu bytes)",
				       r->e->name, t->what, i, sym.st_name, t->strs->d_size);
		if (!*name)
			continue;
		len = strlen(name) + 1;
		if (names) {
			struct ht_elf_sym *s = &r->e->syms[r->e->nsyms++];

			memcpy(names + *name_bytes, name, len);
			*s = (struct ht_elf_sym){.addr = sym.st_value,
						 .size = sym.st_size,
						 .name = names + *name_bytes,
						 .bind = GELF_ST_BIND(sym.st_info),
						 .type = GELF_ST_TYPE(sym.st_info)};
		}
		*name_bytes += len;
		(*nfuncs)++;
	}
	return 0;
}

/* The string table a symbol table names, checked. */
static Elf_Data *linked_strings(struct reader *r, const GElf_Shdr *sh, const char *what)
{
	Elf_Scn *scn;
	GElf_Shdr str;

	if (!sh->sh_link || sh->sh_link >= r->shnum) {
		ht_fail("%s: %s links to section %u, not a string table", r->e->name, what,
			sh->sh_link);
		return NULL;
	}
	scn = elf_getscn(r->elf, sh->sh_link);
	if (!scn || !gelf_getshdr(scn, &str)) {
		fail_elf(r, what);
		return NULL;
	}
	if (str.sh_type != SHT_STRTAB) {
		ht_fail("%s: %s links to section %u, not a string table", r->e->name, what,
			sh->sh_link);
		return NULL;
	}
	return section_data(r, scn, &str, what);
}

static int read_symbols(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, const char *what)
{
	size_t entsize = gelf_fsize(r->elf, ELF_T_SYM, 1, EV_CURRENT);
	struct symtab t = {.what = what};
	size_t nfuncs, name_bytes;
	char *names;

	if (sh->sh_entsize != entsize)
		return ht_fail("%s: %s has entries of %llu bytes, not %zu", r->e->name, what,
			       (unsigned long long)sh->sh_entsize, entsize);
	if (sh->sh_size % entsize)
		return ht_fail("%s: %s size %llu is not a whole number of entries", r->e->name,
			       what, (unsigned long long)sh->sh_size);
	t.count = sh->sh_size / entsize;
	if (t.count > INT32_MAX)
		return ht_fail("%s: %s has %zu entries (absurd)", r->e->name, what, t.count);
	t.strs = linked_strings(r, sh, what);
	t.syms = t.strs ? section_data(r, scn, sh, what) : NULL;
	if (!t.syms)
		return -1;
	if (scan_symbols(r, &t, &nfuncs, &name_bytes, NULL))
		return -1;
	if (!nfuncs)
		return 0;
	names = malloc(name_bytes);
	if (!names || add_block(r->e, names))
		return ht_fail("%s: out of memory", r->e->name);
	if (grow_syms(r->e, nfuncs))
		return -1;
	return scan_symbols(r, &t, &nfuncs, &name_bytes, names);
}

static int set_build_id(struct reader *r, const uint8_t *desc, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char *s;

	if (!len || len > MAX_BUILD_ID_BYTES || r->e->build_id)
		return 0;
	s = malloc(2 * len + 1);
	if (!s)
		return ht_fail("%s: out of memory", r->e->name);
	for (size_t i = 0; i < len; i++) {
		s[2 * i] = hex[desc[i] >> 4];
		s[2 * i + 1] = hex[desc[i] & 15];
	}
	s[2 * len] = '\0';
	r->e->build_id = s;
	return 0;
}

static int read_notes(struct reader *r, Elf_Data *d)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const uint8_t *base = d->d_buf;

		if (next <= off || name_off > d->d_size || nh.n_namesz > d->d_size - name_off ||
		    desc_off > d->d_size || nh.n_descsz > d->d_size - desc_off)
			break;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp(base + name_off, "GNU", 4))
			return set_build_id(r, base + desc_off, nh.n_descsz);
		off = next;
	}
	return 0;
}

/* The build-id from the PT_NOTE segments, for a file without section headers. */
static int read_note_segments(struct reader *r)
{
	size_t phnum;

	if (elf_getphdrnum(r->elf, &phnum) || phnum > MAX_SEGMENTS)
		return 0;
	for (size_t i = 0; i < phnum && !r->e->build_id; i++) {
		GElf_Phdr ph;
		Elf_Data *d;

		if (!gelf_getphdr(r->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (!ph.p_filesz || !in_file(r, ph.p_offset, ph.p_filesz))
			continue;
		d = elf_getdata_rawchunk(r->elf, ph.p_offset, ph.p_filesz,
					 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		if (d && read_notes(r, d))
			return -1;
	}
	return 0;
}

/* .gnu_debuglink: a file name, NUL, padding to 4 bytes, then a CRC-32. */
static int read_debuglink(struct reader *r, Elf_Data *d)
{
	const uint8_t *p = d->d_buf;
	size_t len = d->d_buf ? strnlen(d->d_buf, d->d_size) : d->d_size;
	size_t crc_off = (len + 4) & ~(size_t)3;
	uint32_t crc;

	if (!len || len == d->d_size || crc_off > d->d_size || d->d_size - crc_off < 4)
		return 0; /* malformed: as if absent */
	if (r->e->debuglink)
		return 0; /* a second one: the first counts */
	if (r->little_endian)
		crc = p[crc_off] | p[crc_off + 1] << 8 | p[crc_off + 2] << 16 |
		      (uint32_t)p[crc_off + 3] << 24;
	else
		crc = (uint32_t)p[crc_off] << 24 | p[crc_off + 1] << 16 | p[crc_off + 2] << 8 |
		      p[crc_off + 3];
	r->e->debuglink = strndup(d->d_buf, len);
	if (!r->e->debuglink)
		return ht_fail("%s: out of memory", r->e->name);
	r->e->debuglink_crc = crc;
	return 0;
}

static int read_section(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh)
{
	const char *name = section_name(r, sh);
	Elf_Data *d;

	if (sh->sh_flags & SHF_EXECINSTR && add_text_range(r, sh))
		return -1;
	switch (sh->sh_type) {
	case SHT_SYMTAB:
		r->e->flags |= sh->sh_size ? HT_ELF_HAS_SYMTAB : 0;
		return read_symbols(r, scn, sh, ".symtab");
	case SHT_DYNSYM:
		r->e->flags |= sh->sh_size ? HT_ELF_HAS_DYNSYM : 0;
		return read_symbols(r, scn, sh, ".dynsym");
	case SHT_NOTE:
		/* A note libelf cannot convert (odd alignment) only costs the build-id. */
		d = section_data(r, scn, sh, name);
		return d ? read_notes(r, d) : 0;
	}
	if (!strcmp(name, ".eh_frame"))
		r->e->flags |= HT_ELF_HAS_EH_FRAME;
	else if (!strcmp(name, ".debug_frame"))
		r->e->flags |= HT_ELF_HAS_DEBUG_FRAME;
	else if (!strcmp(name, ".gnu_debuglink") && sh->sh_type == SHT_PROGBITS) {
		d = section_data(r, scn, sh, name);
		return d ? read_debuglink(r, d) : 0;
	}
	return 0;
}

static int read_sections(struct reader *r)
{
	for (size_t i = 1; i < r->shnum; i++) {
		Elf_Scn *scn = elf_getscn(r->elf, i);
		GElf_Shdr sh;

		if (!scn || !gelf_getshdr(scn, &sh))
			return fail_elf(r, "bad section header");
		if (read_section(r, scn, &sh))
			return -1;
	}
	return 0;
}

/* Which of two names for one address to show: global, then weak, then local, then others. */
static int bind_rank(uint8_t bind)
{
	switch (bind) {
	case STB_GLOBAL:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	}
	return 3;
}

static int by_addr_cmp(const void *a, const void *b, void *arg)
{
	const struct ht_elf_sym *syms = arg;
	const struct ht_elf_sym *x = &syms[*(const uint32_t *)a], *y = &syms[*(const uint32_t *)b];

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (bind_rank(x->bind) != bind_rank(y->bind))
		return bind_rank(x->bind) - bind_rank(y->bind);
	if ((x->type == STT_NOTYPE) != (y->type == STT_NOTYPE))
		return x->type == STT_NOTYPE ? 1 : -1;
	/* The name people call it by: "malloc", not "__libc_malloc". */
	if (strspn(x->name, "_") != strspn(y->name, "_"))
		return strspn(x->name, "_") < strspn(y->name, "_") ? -1 : 1;
	if (strlen(x->name) != strlen(y->name))
		return strlen(x->name) < strlen(y->name) ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int by_name_cmp(const void *a, const void *b, void *arg)
{
	const struct ht_elf_sym *syms = arg;
	const struct ht_elf_sym *x = &syms[*(const uint32_t *)a], *y = &syms[*(const uint32_t *)b];
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Where the executable section holding ADDR ends, or 0. */
static uint64_t text_end(const struct ht_elf_symbols *e, uint64_t addr)
{
	for (size_t i = 0; i < e->ntext; i++)
		if (addr >= e->text[i].start && addr < e->text[i].end)
			return e->text[i].end;
	return 0;
}

/*
 * Where the function at by_addr[k] ends: its size (the largest of its
 * aliases'), else the next function or the end of its section, whichever
 * comes first.
 */
static uint64_t function_end(const struct ht_elf_symbols *e, size_t k, uint64_t size)
{
	uint64_t addr = e->syms[e->by_addr[k]].addr;
	uint64_t next = k + 1 < e->naddr ? e->syms[e->by_addr[k + 1]].addr : UINT64_MAX;
	uint64_t section_end = text_end(e, addr);

	if (size)
		return addr + size < addr ? UINT64_MAX : addr + size;
	if (section_end && section_end < next)
		return section_end;
	if (next != UINT64_MAX)
		return next;
	return addr == UINT64_MAX ? addr : addr + 1;
}

/* Collapse the address-sorted index to one symbol per address; largest size of the aliases. */
static void dedupe_addresses(struct ht_elf_symbols *e, uint64_t *sizes)
{
	size_t n = 0;

	for (size_t i = 0; i < e->naddr; i++) {
		const struct ht_elf_sym *s = &e->syms[e->by_addr[i]];

		if (n && e->syms[e->by_addr[n - 1]].addr == s->addr) {
			if (s->size > sizes[n - 1])
				sizes[n - 1] = s->size;
			continue;
		}
		sizes[n] = s->size;
		e->by_addr[n++] = e->by_addr[i];
	}
	e->naddr = n;
}

static void dedupe_names(struct ht_elf_symbols *e)
{
	size_t n = 0;

	for (size_t i = 0; i < e->nname; i++) {
		const struct ht_elf_sym *s = &e->syms[e->by_name[i]];

		if (n) {
			const struct ht_elf_sym *prev = &e->syms[e->by_name[n - 1]];

			if (prev->addr == s->addr && !strcmp(prev->name, s->name))
				continue;
		}
		e->by_name[n++] = e->by_name[i];
	}
	e->nname = n;
}

static int build_indexes(struct ht_elf_symbols *e)
{
	uint64_t *sizes;

	free(e->by_addr);
	free(e->by_name);
	free(e->addr_end);
	e->by_addr = malloc((e->nsyms + 1) * sizeof(*e->by_addr));
	e->by_name = malloc((e->nsyms + 1) * sizeof(*e->by_name));
	e->addr_end = malloc((e->nsyms + 1) * sizeof(*e->addr_end));
	if (!e->by_addr || !e->by_name || !e->addr_end)
		return ht_fail("%s: out of memory", e->name);
	for (size_t i = 0; i < e->nsyms; i++)
		e->by_addr[i] = e->by_name[i] = (uint32_t)i;
	e->naddr = e->nname = e->nsyms;
	qsort_r(e->by_addr, e->naddr, sizeof(*e->by_addr), by_addr_cmp, e->syms);
	qsort_r(e->by_name, e->nname, sizeof(*e->by_name), by_name_cmp, e->syms);
	/* addr_end holds the sizes until each end is known. */
	sizes = e->addr_end;
	dedupe_addresses(e, sizes);
	dedupe_names(e);
	for (size_t k = 0; k < e->naddr; k++) {
		/* The name shown keeps the size an alias had. */
		e->syms[e->by_addr[k]].size = sizes[k];
		e->addr_end[k] = function_end(e, k, sizes[k]);
	}
	return 0;
}

static struct ht_elf_symbols *symbols_new(const char *name)
{
	struct ht_elf_symbols *e = calloc(1, sizeof(*e));

	if (e)
		e->name = strdup(name ? name : "ELF file");
	if (!e || !e->name) {
		free(e);
		ht_fail("out of memory");
		return NULL;
	}
	return e;
}

static struct ht_elf_symbols *read_elf(Elf *elf, uint64_t file_size, const char *name)
{
	struct ht_elf_symbols *e = symbols_new(name);
	struct reader r = {.elf = elf, .e = e, .file_size = file_size};
	GElf_Ehdr eh;
	int err;

	if (!e)
		return NULL;
	err = read_header(&r, &eh) || read_segments(&r, &eh) || check_sections(&r, &eh) ||
	      read_sections(&r) || (!e->build_id && read_note_segments(&r)) || build_indexes(e);
	free(r.is_text);
	if (err) {
		ht_elf_symbols_free(e);
		return NULL;
	}
	return e;
}

struct ht_elf_symbols *ht_elf_symbols_open_fd(int fd, const char *name)
{
	struct ht_elf_symbols *e;
	struct stat st;
	Elf *elf;

	if (fstat(fd, &st)) {
		ht_fail("%s: %s", name, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		ht_fail("%s: not a regular file", name);
		return NULL;
	}
	elf_version(EV_CURRENT);
	/* Read, not mmap: a file truncated under us must be an error, not SIGBUS. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		ht_fail("%s: %s", name, elf_errmsg(-1));
		return NULL;
	}
	e = read_elf(elf, (uint64_t)st.st_size, name);
	elf_end(elf);
	return e;
}

struct ht_elf_symbols *ht_elf_symbols_open_mem(const void *data, size_t len, const char *name)
{
	struct ht_elf_symbols *e;
	char *copy;
	Elf *elf;

	/* libelf wants a writable image it may convert in place; it gets its own. */
	copy = malloc(len ? len : 1);
	if (!copy) {
		ht_fail("%s: out of memory", name);
		return NULL;
	}
	if (len)
		memcpy(copy, data, len);
	elf_version(EV_CURRENT);
	elf = elf_memory(copy, len);
	if (!elf) {
		ht_fail("%s: %s", name, elf_errmsg(-1));
		free(copy);
		return NULL;
	}
	e = read_elf(elf, len, name);
	elf_end(elf);
	free(copy);
	return e;
}

/* DT_SONAME in the dynamic section SCN: 1 and OUT, 0 when absent, -1 on a bad section. */
static int dynamic_soname(struct reader *r, Elf_Scn *scn, const GElf_Shdr *sh, char *out,
			  size_t len)
{
	size_t entsize = gelf_fsize(r->elf, ELF_T_DYN, 1, EV_CURRENT);
	Elf_Data *strs, *d;
	const char *soname;

	if (sh->sh_entsize != entsize || sh->sh_size % entsize)
		return ht_fail("%s: .dynamic has entries of %llu bytes, not %zu", r->e->name,
			       (unsigned long long)sh->sh_entsize, entsize);
	strs = linked_strings(r, sh, ".dynamic");
	d = strs ? section_data(r, scn, sh, ".dynamic") : NULL;
	if (!d)
		return -1;
	for (size_t i = 0; i < sh->sh_size / entsize; i++) {
		GElf_Dyn dyn;

		if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_SONAME)
			continue;
		soname = string_at(strs->d_buf, strs->d_size, dyn.d_un.d_val);
		if (!soname || !*soname || strlen(soname) >= len)
			return 0;
		memcpy(out, soname, strlen(soname) + 1);
		return 1;
	}
	return 0;
}

int ht_elf_soname(int fd, const char *name, char *out, size_t len)
{
	struct ht_elf_symbols *e = symbols_new(name);
	struct reader r = {.e = e};
	struct stat st;
	GElf_Ehdr eh;
	int found = 0;

	if (!e)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		found = ht_fail("%s: not a regular file", name);
		goto out;
	}
	r.file_size = (uint64_t)st.st_size;
	elf_version(EV_CURRENT);
	/* Read, not mmap, as for the symbols: a file truncated under us is an error. */
	r.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!r.elf) {
		found = ht_fail("%s: %s", name, elf_errmsg(-1));
		goto out;
	}
	if (read_header(&r, &eh) || check_sections(&r, &eh)) {
		found = -1;
		goto out;
	}
	for (size_t i = 1; i < r.shnum && !found; i++) {
		Elf_Scn *scn = elf_getscn(r.elf, i);
		GElf_Shdr sh;

		if (!scn || !gelf_getshdr(scn, &sh)) {
			found = fail_elf(&r, "bad section header");
			break;
		}
		if (sh.sh_type == SHT_DYNAMIC)
			found = dynamic_soname(&r, scn, &sh, out, len);
	}
out:
	if (r.elf)
		elf_end(r.elf);
	free(r.is_text);
	ht_elf_symbols_free(e);
	return found;
}

int ht_elf_build_id_fd(int fd, const char *name, char *out, size_t len)
{
	struct ht_elf_symbols *e = symbols_new(name);
	struct reader r = {.e = e};
	struct stat st;
	GElf_Ehdr eh;
	int found = -1;

	if (!e)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		ht_fail("%s: not a regular file", name);
		goto out;
	}
	r.file_size = (uint64_t)st.st_size;
	elf_version(EV_CURRENT);
	/* Only the headers and the notes are read: not the symbols, the costly part. */
	r.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!r.elf) {
		ht_fail("%s: %s", name, elf_errmsg(-1));
		goto out;
	}
	if (read_header(&r, &eh) || read_note_segments(&r))
		goto out;
	found = e->build_id && strlen(e->build_id) < len;
	if (found)
		memcpy(out, e->build_id, strlen(e->build_id) + 1);
out:
	if (r.elf)
		elf_end(r.elf);
	ht_elf_symbols_free(e);
	return found;
}

void ht_elf_symbols_free(struct ht_elf_symbols *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->nblocks; i++)
		free(e->blocks[i]);
	free(e->blocks);
	free(e->syms);
	free(e->by_addr);
	free(e->addr_end);
	free(e->by_name);
	free(e->text);
	free(e->segments);
	free(e->build_id);
	free(e->debuglink);
	free(e->name);
	free(e);
}

static int append_text(struct ht_elf_symbols *dst, const struct ht_elf_symbols *src)
{
	struct range *t;

	if (!src->ntext)
		return 0;
	t = realloc(dst->text, (dst->ntext + src->ntext) * sizeof(*t));
	if (!t)
		return ht_fail("%s: out of memory", dst->name);
	memcpy(t + dst->ntext, src->text, src->ntext * sizeof(*t));
	dst->text = t;
	dst->ntext += src->ntext;
	return 0;
}

int ht_elf_symbols_merge(struct ht_elf_symbols *dst, struct ht_elf_symbols *src)
{
	char **blocks;
	int err = -1;

	blocks = realloc(dst->blocks, (dst->nblocks + src->nblocks + 1) * sizeof(*blocks));
	if (!blocks) {
		ht_fail("%s: out of memory", dst->name);
		goto out;
	}
	dst->blocks = blocks;
	if (grow_syms(dst, src->nsyms) || append_text(dst, src))
		goto out;
	/* The names move with their blocks: src gives them up. */
	if (src->nblocks)
		memcpy(dst->blocks + dst->nblocks, src->blocks, src->nblocks * sizeof(*blocks));
	dst->nblocks += src->nblocks;
	src->nblocks = 0;
	if (src->nsyms)
		memcpy(dst->syms + dst->nsyms, src->syms, src->nsyms * sizeof(*dst->syms));
	dst->nsyms += src->nsyms;
	dst->flags |= src->flags & HT_ELF_HAS_SYMTAB;
	dst->flags |= src->flags & HT_ELF_HAS_DEBUG_FRAME;
	err = build_indexes(dst);
out:
	ht_elf_symbols_free(src);
	return err;
}

const struct ht_elf_sym *ht_elf_symbols_find(const struct ht_elf_symbols *e, uint64_t vaddr)
{
	/* lo = how many functions start at or below vaddr. */
	size_t lo = HT_PARTITION_POINT(0, e->naddr, i, e->syms[e->by_addr[i]].addr <= vaddr);

	/* Usually the last one; a function may also nest a smaller one (a cold part). */
	for (size_t k = lo, steps = 0; k > 0 && steps < NESTED_SCAN_LIMIT; k--, steps++)
		if (vaddr < e->addr_end[k - 1])
			return &e->syms[e->by_addr[k - 1]];
	return NULL;
}

size_t ht_elf_symbols_lookup(const struct ht_elf_symbols *e, const char *name,
			     const struct ht_elf_sym **out, size_t max)
{
	size_t n = 0;
	size_t lo =
		HT_PARTITION_POINT(0, e->nname, i, strcmp(e->syms[e->by_name[i]].name, name) < 0);

	for (; lo < e->nname && !strcmp(e->syms[e->by_name[lo]].name, name); lo++, n++)
		if (n < max)
			out[n] = &e->syms[e->by_name[lo]];
	return n;
}

size_t ht_elf_symbols_count(const struct ht_elf_symbols *e)
{
	return e->naddr;
}

const struct ht_elf_sym *ht_elf_symbols_at(const struct ht_elf_symbols *e, size_t i)
{
	return i < e->naddr ? &e->syms[e->by_addr[i]] : NULL;
}

int ht_elf_symbols_type(const struct ht_elf_symbols *e)
{
	return e->type;
}

unsigned ht_elf_symbols_flags(const struct ht_elf_symbols *e)
{
	return e->flags;
}

const char *ht_elf_symbols_build_id(const struct ht_elf_symbols *e)
{
	return e->build_id;
}

const char *ht_elf_symbols_debuglink(const struct ht_elf_symbols *e, uint32_t *crc)
{
	if (crc)
		*crc = e->debuglink_crc;
	return e->debuglink;
}

const struct ht_elf_segment *ht_elf_symbols_segments(const struct ht_elf_symbols *e, size_t *count)
{
	*count = e->nsegments;
	return e->segments;
}

/*
 * The kernel maps each PT_LOAD segment from the page that holds p_offset
 * to the page that holds p_vaddr + bias, so inside one mapping
 *   file offset = addr - map_start + map_offset
 *   vaddr       = file offset - p_offset + p_vaddr
 * and bias = addr - vaddr = map_start - map_offset + p_offset - p_vaddr.
 * The segment is the one whose file bytes the mapping holds. Two segments
 * can share a file page (lld packs them; the page after .rodata is also
 * that of .data): the mapping's permissions, which come from p_flags, tell
 * them apart, execute first. A RELRO part of the data segment turns
 * read-only and may be taken for the one before it; only executable
 * mappings are used for code, and those are told right. An ET_EXEC file is
 * not relocated.
 */
static int perms_score(const struct ht_elf_segment *s, const char *map_perms)
{
	int exec = map_perms[0] && map_perms[1] && map_perms[2] == 'x';
	int write = map_perms[0] && map_perms[1] == 'w';

	return 2 * (!!(s->flags & PF_X) == exec) + (!!(s->flags & PF_W) == write);
}

int ht_elf_load_bias(const struct ht_elf_symbols *e, uint64_t map_start, uint64_t map_end,
		     uint64_t map_offset, const char *map_perms, uint64_t *bias)
{
	const struct ht_elf_segment *best = NULL;
	uint64_t map_len = map_end - map_start;
	int best_score = -1;

	if (e->type == ET_EXEC) {
		*bias = 0;
		return 0;
	}
	for (size_t i = 0; i < e->nsegments; i++) {
		const struct ht_elf_segment *s = &e->segments[i];
		int score = perms_score(s, map_perms);

		/* Overlap of [map_offset, +map_len) with the segment's file bytes. */
		if (!s->filesz || map_offset >= s->offset + s->filesz ||
		    (s->offset >= map_offset && s->offset - map_offset >= map_len))
			continue;
		if (!best || score > best_score) {
			best = s;
			best_score = score;
		}
	}
	if (!best)
		return ht_fail("%s: no loadable segment at file offset 0x%llx", e->name,
			       (unsigned long long)map_offset);
	*bias = map_start - map_offset + best->offset - best->vaddr;
	return 0;
}
