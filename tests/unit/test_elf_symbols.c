// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ELF symbol reader: this test binary's own symbols, the vdso from
 * memory, load bias for the layouts linkers produce, DT_SONAME as readelf
 * shows it, and malformed files, made by corrupting a copy of this binary
 * (or of the vdso), that must give a reason and never a crash.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "base/proc.h"
#include "symbols/proc_maps.h"

/* A function of our own to find; noinline so it has an address and a symbol. */
__attribute__((noinline)) int ht_test_marker_function(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

__attribute__((noinline, used)) static int local_marker_function(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 2;
}

static void *read_whole(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	char *buf;

	if (fd < 0)
		return NULL;
	buf = ht_read_all(fd, SIZE_MAX, len);
	close(fd);
	return buf;
}

TEST(own_symbols_at_runtime_addresses)
{
	uint64_t addr = (uint64_t)(uintptr_t)&ht_test_marker_function, bias;
	const struct ht_elf_sym *sym, *found[4];
	const struct ht_mapping *m;
	struct ht_elf_symbols *e;
	struct ht_maps maps;
	const char *id;
	int fd = open("/proc/self/exe", O_RDONLY);

	CHECK(fd >= 0);
	e = ht_elf_symbols_open_fd(fd, "/proc/self/exe");
	close(fd);
	CHECK(e != NULL);
	CHECK(ht_maps_read(getpid(), &maps) == 0);
	m = ht_maps_find(&maps, addr);
	CHECK(m != NULL);
	if (!e || !m)
		goto out;
	CHECK(ht_elf_symbols_flags(e) & HT_ELF_HAS_SYMTAB);
	CHECK(ht_elf_symbols_flags(e) & HT_ELF_HAS_EH_FRAME);
	CHECK(ht_elf_load_bias(e, m->start, m->end, m->offset, m->perms, &bias) == 0);
	sym = ht_elf_symbols_find(e, addr - bias);
	CHECK(sym && !strcmp(sym->name, "ht_test_marker_function"));
	CHECK(sym && sym->size > 0 && sym->bind == STB_GLOBAL);
	sym = ht_elf_symbols_find(e, addr - bias + 1);
	CHECK(sym && !strcmp(sym->name, "ht_test_marker_function"));
	CHECK_EQ_U64(ht_elf_symbols_lookup(e, "ht_test_marker_function", found, 4), 1);
	CHECK_EQ_U64(found[0]->addr + bias, addr);
	CHECK_EQ_U64(ht_elf_symbols_lookup(e, "no_such_function_anywhere", found, 4), 0);
	/* A local function, only in .symtab. */
	CHECK_EQ_U64(ht_elf_symbols_lookup(e, "local_marker_function", found, 4), 1);
	sym = ht_elf_symbols_find(e, (uint64_t)(uintptr_t)&local_marker_function - bias);
	CHECK(sym && !strcmp(sym->name, "local_marker_function") && sym->bind == STB_LOCAL);
	id = ht_elf_symbols_build_id(e);
	CHECK(id && strlen(id) >= 16 && strspn(id, "0123456789abcdef") == strlen(id));
out:
	ht_maps_free(&maps);
	ht_elf_symbols_free(e);
}

TEST(vdso_from_memory)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR), bias;
	const struct ht_elf_sym *found[4], *sym;
	const struct ht_mapping *m;
	struct ht_elf_symbols *e;
	struct ht_maps maps;

	if (!base)
		SKIP_TEST("no vdso");
	CHECK(ht_maps_read(getpid(), &maps) == 0);
	m = ht_maps_find(&maps, base);
	CHECK(m && !strcmp(m->path, "[vdso]"));
	if (!m) {
		ht_maps_free(&maps);
		return;
	}
	e = ht_elf_symbols_open_mem((const void *)(uintptr_t)base, m->end - m->start, "[vdso]");
	CHECK(e != NULL);
	if (e) {
		CHECK_EQ_U64(ht_elf_symbols_type(e), ET_DYN);
		CHECK(ht_elf_load_bias(e, m->start, m->end, m->offset, m->perms, &bias) == 0);
		CHECK_EQ_U64(bias, m->start);
		CHECK_EQ_U64(ht_elf_symbols_lookup(e, "__vdso_clock_gettime", found, 4), 1);
		/* The global name wins over the weak alias clock_gettime at the same address. */
		sym = ht_elf_symbols_find(e, found[0]->addr + 2);
		CHECK(sym && !strcmp(sym->name, "__vdso_clock_gettime"));
		CHECK(ht_elf_symbols_lookup(e, "clock_gettime", found, 4) == 1);
	}
	ht_elf_symbols_free(e);
	ht_maps_free(&maps);
}

/* A file of program headers only, as the loader sees it. */
struct fake_segment {
	uint64_t offset, vaddr, filesz;
	uint32_t flags;
};

static struct ht_elf_symbols *fake_elf(int type, const struct fake_segment *segs, int n)
{
	size_t size = sizeof(Elf64_Ehdr) + n * sizeof(Elf64_Phdr);
	struct ht_elf_symbols *e;
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
	char *image;

	for (int i = 0; i < n; i++)
		if (segs[i].offset + segs[i].filesz > size)
			size = segs[i].offset + segs[i].filesz;
	image = calloc(1, size);
	eh = (Elf64_Ehdr *)image;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = type;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = n;
	ph = (Elf64_Phdr *)(image + sizeof(*eh));
	for (int i = 0; i < n; i++) {
		ph[i].p_type = PT_LOAD;
		ph[i].p_offset = segs[i].offset;
		ph[i].p_vaddr = ph[i].p_paddr = segs[i].vaddr;
		ph[i].p_filesz = ph[i].p_memsz = segs[i].filesz;
		ph[i].p_flags = segs[i].flags;
		ph[i].p_align = 0x1000;
	}
	e = ht_elf_symbols_open_mem(image, size, "fake");
	free(image);
	return e;
}

static uint64_t bias_of(const struct ht_elf_symbols *e, uint64_t start, uint64_t end,
			uint64_t offset, const char *perms)
{
	uint64_t bias = 0xdeadbeef;

	if (ht_elf_load_bias(e, start, end, offset, perms, &bias))
		return 0xbad;
	return bias;
}

TEST(load_bias_gnu_ld_layout)
{
	/* gcc + GNU ld, -z separate-code: each segment starts its own file page. */
	static const struct fake_segment segs[] = {
		{0x0000, 0x0000, 0x0628, PF_R},
		{0x1000, 0x1000, 0x01d5, PF_R | PF_X},
		{0x2000, 0x2000, 0x0100, PF_R},
		{0x2df0, 0x3df0, 0x0248, PF_R | PF_W},
	};
	const uint64_t b = 0x555555554000;
	struct ht_elf_symbols *e = fake_elf(ET_DYN, segs, 4);

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK_EQ_U64(bias_of(e, b, b + 0x1000, 0, "r--p"), b);
	CHECK_EQ_U64(bias_of(e, b + 0x1000, b + 0x2000, 0x1000, "r-xp"), b);
	CHECK_EQ_U64(bias_of(e, b + 0x2000, b + 0x3000, 0x2000, "r--p"), b);
	/* The data page shares its file page with .rodata's: the write bit decides. */
	CHECK_EQ_U64(bias_of(e, b + 0x3000, b + 0x4000, 0x2000, "rw-p"), b);
	CHECK(ht_elf_load_bias(e, b, b + 0x1000, 0x9000, "r-xp", &(uint64_t){0}) == -1);
	CHECK(strstr(ht_last_error(), "no loadable segment") != NULL);
	ht_elf_symbols_free(e);
}

TEST(load_bias_lld_shared_pages)
{
	/* lld without separate-code: code starts mid-page, its page is the file's first. */
	static const struct fake_segment segs[] = {
		{0x000, 0x0000, 0x5e0, PF_R},
		{0x5e0, 0x15e0, 0x200, PF_R | PF_X},
		{0x7e0, 0x27e0, 0x100, PF_R | PF_W},
	};
	const uint64_t b = 0x7f1234560000;
	struct ht_elf_symbols *e = fake_elf(ET_DYN, segs, 3);

	CHECK(e != NULL);
	if (!e)
		return;
	CHECK_EQ_U64(bias_of(e, b, b + 0x1000, 0, "r--p"), b);
	CHECK_EQ_U64(bias_of(e, b + 0x1000, b + 0x2000, 0, "r-xp"), b);
	CHECK_EQ_U64(bias_of(e, b + 0x2000, b + 0x3000, 0, "rw-p"), b);
	ht_elf_symbols_free(e);
}

TEST(load_bias_offsets_and_exec)
{
	static const struct fake_segment big_text[] = {
		{0x0000, 0x0000, 0x1000, PF_R},
		{0x1000, 0x1000, 0x5000, PF_R | PF_X},
	};
	static const struct fake_segment prelinked[] = {
		{0x0000, 0x400000, 0x800, PF_R | PF_X},
	};
	static const struct fake_segment exec[] = {
		{0x0000, 0x400000, 0x800, PF_R},
		{0x1000, 0x401000, 0x800, PF_R | PF_X},
	};
	const uint64_t b = 0x7f0000000000;
	struct ht_elf_symbols *e = fake_elf(ET_DYN, big_text, 2);

	/* A mapping that starts inside a segment (split by mprotect or munmap). */
	CHECK(e && bias_of(e, b + 0x3000, b + 0x5000, 0x3000, "r-xp") == b);
	ht_elf_symbols_free(e);
	/* A shared object linked at a non-zero address. */
	e = fake_elf(ET_DYN, prelinked, 1);
	CHECK(e && bias_of(e, b, b + 0x1000, 0, "r-xp") == b - 0x400000);
	ht_elf_symbols_free(e);
	/* A non-PIE executable is where it was linked. */
	e = fake_elf(ET_EXEC, exec, 2);
	CHECK(e && bias_of(e, 0x401000, 0x402000, 0x1000, "r-xp") == 0);
	ht_elf_symbols_free(e);
}

/* ---- Malformed files: corrupt a copy of this binary. ---- */

static char *self_image;
static size_t self_len;

static int load_self(void)
{
	if (!self_image)
		self_image = read_whole("/proc/self/exe", &self_len);
	return self_image && self_len > sizeof(Elf64_Ehdr);
}

static Elf64_Ehdr *ehdr(char *image)
{
	return (Elf64_Ehdr *)image;
}

static Elf64_Shdr *shdr(char *image, size_t i)
{
	return (Elf64_Shdr *)(image + ehdr(image)->e_shoff) + i;
}

static Elf64_Shdr *section_by_type(char *image, uint32_t type)
{
	for (size_t i = 1; i < ehdr(image)->e_shnum; i++)
		if (shdr(image, i)->sh_type == type)
			return shdr(image, i);
	return NULL;
}

/* Whether IMAGE (LEN bytes) is refused with a message that holds WANT. */
static int refused(const char *image, size_t len, const char *want)
{
	struct ht_elf_symbols *e = ht_elf_symbols_open_mem(image, len, "bad.elf");

	if (e) {
		ht_elf_symbols_free(e);
		printf("     accepted, expected \"%s\"\n", want);
		return 0;
	}
	if (!strstr(ht_last_error(), want) || !strstr(ht_last_error(), "bad.elf")) {
		printf("     got \"%s\", expected \"%s\"\n", ht_last_error(), want);
		return 0;
	}
	return 1;
}

/* A fresh copy to corrupt. */
static char *copy_self(void)
{
	char *c = malloc(self_len);

	memcpy(c, self_image, self_len);
	return c;
}

TEST(malformed_truncated)
{
	Elf64_Ehdr *eh;

	if (!load_self())
		SKIP_TEST("cannot read /proc/self/exe");
	eh = ehdr(self_image);
	CHECK(refused(self_image, 0, "bad.elf"));
	CHECK(refused(self_image, 20, "bad.elf"));
	CHECK(refused(self_image, sizeof(Elf64_Ehdr), "program headers past the end"));
	/* Cut before the section headers, which sit at the end. */
	CHECK(refused(self_image, eh->e_shoff + 10, "section headers past the end"));
	CHECK(refused("hello, world", 12, "not an ELF file"));
}

TEST(malformed_section_past_end)
{
	char *c;
	Elf64_Shdr *sh;

	if (!load_self())
		SKIP_TEST("cannot read /proc/self/exe");
	c = copy_self();
	sh = section_by_type(c, SHT_SYMTAB);
	CHECK(sh != NULL);
	if (sh) {
		sh->sh_offset = self_len - 8;
		CHECK(refused(c, self_len, "past the end of the file"));
		sh->sh_offset = UINT64_MAX - 4;
		CHECK(refused(c, self_len, "past the end of the file"));
	}
	free(c);
	c = copy_self();
	ehdr(c)->e_shoff = UINT64_MAX - 100;
	CHECK(refused(c, self_len, "bad.elf"));
	free(c);
}

TEST(malformed_symbol_tables)
{
	Elf64_Shdr *sh;
	Elf64_Sym *syms;
	char *c;
	size_t n;

	if (!load_self())
		SKIP_TEST("cannot read /proc/self/exe");
	c = copy_self();
	sh = section_by_type(c, SHT_SYMTAB);
	if (!sh) {
		free(c);
		SKIP_TEST("this test binary has no .symtab");
	}
	sh->sh_entsize = 7;
	CHECK(refused(c, self_len, ".symtab has entries of 7 bytes, not 24"));
	sh->sh_entsize = 0;
	CHECK(refused(c, self_len, ".symtab has entries of 0 bytes"));
	sh->sh_entsize = sizeof(Elf64_Sym);
	sh->sh_size += 5;
	CHECK(refused(c, self_len, "not a whole number of entries"));
	sh->sh_size -= 5;
	sh->sh_link = 0;
	CHECK(refused(c, self_len, "not a string table"));
	sh->sh_link = 60000;
	CHECK(refused(c, self_len, "not a string table"));
	free(c);

	/* A function whose name lies past the end of the string table. */
	c = copy_self();
	sh = section_by_type(c, SHT_SYMTAB);
	syms = (Elf64_Sym *)(c + sh->sh_offset);
	n = sh->sh_size / sizeof(*syms);
	for (size_t i = 1; i < n; i++) {
		if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && syms[i].st_shndx &&
		    syms[i].st_value) {
			syms[i].st_name = 0x7fffffff;
			break;
		}
	}
	CHECK(refused(c, self_len, "past the end of its string table"));
	free(c);
}

TEST(malformed_headers)
{
	Elf64_Phdr *ph;
	char *c;

	if (!load_self())
		SKIP_TEST("cannot read /proc/self/exe");
	c = copy_self();
	ehdr(c)->e_phnum = 0xfff0;
	CHECK(refused(c, self_len, "bad.elf"));
	free(c);
	c = copy_self();
	ehdr(c)->e_shnum = 0xfff0;
	CHECK(refused(c, self_len, "bad.elf"));
	free(c);
	c = copy_self();
	ehdr(c)->e_shentsize = 12;
	CHECK(refused(c, self_len, "bad.elf"));
	free(c);
	c = copy_self();
	ehdr(c)->e_shstrndx = 0xfff0;
	CHECK(refused(c, self_len, "bad.elf"));
	free(c);
	c = copy_self();
	ph = (Elf64_Phdr *)(c + ehdr(c)->e_phoff);
	for (int i = 0; i < ehdr(c)->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD) {
			ph[i].p_filesz = self_len * 2;
			break;
		}
	}
	CHECK(refused(c, self_len, "loadable segment"));
	free(c);
}

TEST(malformed_fd_truncated_file)
{
	char path[] = "/tmp/ht-elf-test-XXXXXX";
	struct ht_elf_symbols *e;
	int fd;

	if (!load_self())
		SKIP_TEST("cannot read /proc/self/exe");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	unlink(path);
	CHECK(write(fd, self_image, self_len / 2) == (ssize_t)(self_len / 2));
	e = ht_elf_symbols_open_fd(fd, "half.elf");
	CHECK(e == NULL);
	CHECK(strstr(ht_last_error(), "half.elf") != NULL);
	ht_elf_symbols_free(e);
	close(fd);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	CHECK(ht_elf_symbols_open_fd(fd, "root") == NULL);
	CHECK(strstr(ht_last_error(), "not a regular file") != NULL);
	close(fd);
}

/* Every prefix of a small real file: none may crash. */
TEST(malformed_every_prefix_of_vdso)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	const struct ht_mapping *m;
	struct ht_maps maps;
	size_t len, accepted = 0;

	if (!base || ht_maps_read(getpid(), &maps))
		SKIP_TEST("no vdso");
	m = ht_maps_find(&maps, base);
	len = m ? m->end - m->start : 0;
	ht_maps_free(&maps);
	for (size_t n = 0; n < len; n += 7) {
		struct ht_elf_symbols *e =
			ht_elf_symbols_open_mem((const void *)(uintptr_t)base, n, "cut");

		if (e) {
			accepted++;
			ht_elf_symbols_find(e, 0x1000);
			ht_elf_symbols_free(e);
		} else {
			CHECK(ht_last_error()[0] != '\0');
		}
	}
	CHECK(len > 0);
	(void)accepted;
}

/* ---- Other kinds of files, from the fuzz corpus (tests run from the repository root). ---- */

#define SEEDS "tests/fuzz/corpus/elf_reader/"

static struct ht_elf_symbols *open_seed(const char *name)
{
	char path[256];
	struct ht_elf_symbols *e;
	int fd;

	snprintf(path, sizeof(path), SEEDS "%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	e = ht_elf_symbols_open_fd(fd, path);
	close(fd);
	return e;
}

static int seeds_here(void)
{
	return access(SEEDS "seed_tiny_so", R_OK) == 0;
}

static uint64_t addr_of(const struct ht_elf_symbols *e, const char *name)
{
	const struct ht_elf_sym *s[2];

	return ht_elf_symbols_lookup(e, name, s, 2) == 1 ? s[0]->addr : 0;
}

TEST(big_endian_and_32_bit_files)
{
	struct ht_elf_symbols *le, *be, *e32;

	if (!seeds_here())
		SKIP_TEST("run from the repository root");
	le = open_seed("seed_tiny_so");
	be = open_seed("seed_tiny_bigendian_so");
	e32 = open_seed("seed_tiny32_so");
	CHECK(le && be && e32);
	if (le && be) {
		/* Byte-swapped from a little-endian build: what readelf shows. */
		CHECK(addr_of(le, "tiny_global") != 0);
		CHECK_EQ_U64(addr_of(be, "tiny_global"), 0x2e4);
		CHECK_EQ_U64(addr_of(be, "tiny_local"), 0x2e0);
		CHECK_EQ_U64(addr_of(be, "tiny_global"), addr_of(le, "tiny_global"));
		CHECK_STR(ht_elf_symbols_build_id(be), "7930d1b69860a575cd5378695154f5c8f4ec0419");
		CHECK_STR(ht_elf_symbols_build_id(le), "7930d1b69860a575cd5378695154f5c8f4ec0419");
	}
	if (e32) {
		const struct ht_elf_sym *s = ht_elf_symbols_find(e32, addr_of(e32, "tiny_caller"));

		CHECK(s && !strcmp(s->name, "tiny_caller"));
		CHECK(ht_elf_symbols_build_id(e32) != NULL);
	}
	ht_elf_symbols_free(le);
	ht_elf_symbols_free(be);
	ht_elf_symbols_free(e32);
}

TEST(stripped_file_merged_with_its_debug_file)
{
	struct ht_elf_symbols *stripped, *debug;
	const char *link;
	uint32_t crc = 0;

	if (!seeds_here())
		SKIP_TEST("run from the repository root");
	stripped = open_seed("seed_tiny_stripped_so");
	debug = open_seed("seed_tiny_debug");
	CHECK(stripped && debug);
	if (!stripped || !debug) {
		ht_elf_symbols_free(stripped);
		ht_elf_symbols_free(debug);
		return;
	}
	CHECK(!(ht_elf_symbols_flags(stripped) & HT_ELF_HAS_SYMTAB));
	CHECK(ht_elf_symbols_flags(debug) & HT_ELF_HAS_SYMTAB);
	link = ht_elf_symbols_debuglink(stripped, &crc);
	CHECK_STR(link, "tiny.debug");
	CHECK(crc != 0);
	CHECK_STR(ht_elf_symbols_build_id(stripped), ht_elf_symbols_build_id(debug));
	/* The static function is only in the debug file. */
	CHECK_EQ_U64(addr_of(stripped, "tiny_local"), 0);
	CHECK(addr_of(stripped, "tiny_global") != 0);
	CHECK_EQ_U64(addr_of(stripped, "tiny_weak"), 0x30e);
	CHECK(ht_elf_symbols_merge(stripped, debug) == 0);
	CHECK_EQ_U64(addr_of(stripped, "tiny_local"), 0x2e0);
	CHECK_EQ_U64(addr_of(stripped, "tiny_hidden"), 0x2e8);
	CHECK_EQ_U64(addr_of(stripped, "tiny_global"), 0x2e4);
	CHECK(ht_elf_symbols_flags(stripped) & HT_ELF_HAS_SYMTAB);
	CHECK_STR(ht_elf_symbols_debuglink(stripped, NULL), "tiny.debug");
	ht_elf_symbols_free(stripped);
}

/* ---- DT_SONAME ---- */

/* IMAGE (LEN bytes) as a file in memory: ht_elf_soname reads a descriptor. */
static int soname_of_image(const void *image, size_t len, char *out, size_t out_len)
{
	int fd = memfd_create("soname.elf", MFD_CLOEXEC), found;

	if (fd < 0 || write(fd, image, len) != (ssize_t)len) {
		if (fd >= 0)
			close(fd);
		return -2;
	}
	found = ht_elf_soname(fd, "soname.elf", out, out_len);
	close(fd);
	return found;
}

/* What readelf -d says PATH's soname is ("" for none). */
static void readelf_soname(const char *path, char *out, size_t len)
{
	char cmd[512];
	FILE *p;

	out[0] = 0;
	snprintf(cmd, sizeof(cmd), "readelf -d '%s' | sed -n 's/.*soname: \\[\\(.*\\)\\]$/\\1/p'",
		 path);
	p = popen(cmd, "r");
	if (p && fgets(out, (int)len, p))
		out[strcspn(out, "\n")] = 0;
	if (p)
		pclose(p);
}

TEST(soname_as_readelf_shows_it)
{
	const struct ht_mapping *libc = NULL;
	char got[256], want[256];
	struct ht_maps maps;
	int fd;

	/* The C library this test runs with, as the dynamic linker names it. */
	CHECK(!ht_maps_read(getpid(), &maps));
	for (size_t i = 0; i < maps.count; i++)
		if (ht_mapping_is_exec(&maps.v[i]) && strstr(maps.v[i].path, "/libc.so"))
			libc = &maps.v[i];
	CHECK(libc != NULL);
	if (libc) {
		readelf_soname(libc->path, want, sizeof(want));
		CHECK(want[0] != 0);
		fd = open(libc->path, O_RDONLY);
		CHECK(fd >= 0 && ht_elf_soname(fd, libc->path, got, sizeof(got)) == 1);
		CHECK_STR(got, want);
		/* A buffer too small for it: as if there were none, never a cut name. */
		CHECK(fd >= 0 && ht_elf_soname(fd, libc->path, got, 4) == 0);
		if (fd >= 0)
			close(fd);
	}
	ht_maps_free(&maps);
	/* An executable has none. */
	fd = open("/proc/self/exe", O_RDONLY);
	CHECK(fd >= 0 && ht_elf_soname(fd, "self", got, sizeof(got)) == 0);
	if (fd >= 0)
		close(fd);
	if (!seeds_here())
		SKIP_TEST("run from the repository root");
	fd = open(SEEDS "seed_vdso_so", O_RDONLY);
	CHECK(fd >= 0 && ht_elf_soname(fd, "vdso", got, sizeof(got)) == 1);
	CHECK_STR(got, "linux-vdso.so.1");
	if (fd >= 0)
		close(fd);
	/* A library linked without -soname. */
	fd = open(SEEDS "seed_tiny_so", O_RDONLY);
	CHECK(fd >= 0 && ht_elf_soname(fd, "tiny", got, sizeof(got)) == 0);
	if (fd >= 0)
		close(fd);
}

TEST(soname_malformed)
{
	Elf64_Shdr *dyn_sh;
	Elf64_Dyn *dyn;
	size_t len, prefix_ok = 0;
	char *image, *c, got[256];
	int fd;

	if (!seeds_here())
		SKIP_TEST("run from the repository root");
	image = read_whole(SEEDS "seed_vdso_so", &len);
	CHECK(image && section_by_type(image, SHT_DYNAMIC));
	if (!image || !section_by_type(image, SHT_DYNAMIC)) {
		free(image);
		return;
	}
	CHECK_EQ_U64(soname_of_image(image, len, got, sizeof(got)), 1);
	c = malloc(len);
	memcpy(c, image, len);
	dyn_sh = section_by_type(c, SHT_DYNAMIC);
	dyn_sh->sh_entsize = 7;
	CHECK_EQ_U64(soname_of_image(c, len, got, sizeof(got)), (uint64_t)-1);
	CHECK(strstr(ht_last_error(), ".dynamic has entries of 7 bytes") != NULL);
	dyn_sh->sh_entsize = sizeof(Elf64_Dyn);
	dyn_sh->sh_link = 0;
	CHECK_EQ_U64(soname_of_image(c, len, got, sizeof(got)), (uint64_t)-1);
	CHECK(strstr(ht_last_error(), "not a string table") != NULL);
	memcpy(c, image, len);
	dyn_sh = section_by_type(c, SHT_DYNAMIC);
	dyn_sh->sh_offset = len - 8;
	CHECK_EQ_U64(soname_of_image(c, len, got, sizeof(got)), (uint64_t)-1);
	CHECK(strstr(ht_last_error(), "past the end") != NULL);
	/* A name past the end of the string table: no name, not bytes from beyond it. */
	memcpy(c, image, len);
	dyn_sh = section_by_type(c, SHT_DYNAMIC);
	dyn = (Elf64_Dyn *)(c + dyn_sh->sh_offset);
	for (size_t i = 0; i < dyn_sh->sh_size / sizeof(*dyn); i++)
		if (dyn[i].d_tag == DT_SONAME)
			dyn[i].d_un.d_val = 0x7fffffff;
	CHECK_EQ_U64(soname_of_image(c, len, got, sizeof(got)), 0);
	free(c);
	/* Every prefix: an answer each time, never a crash (ASan runs this too). */
	for (size_t n = 0; n < len; n += 7) {
		int found = soname_of_image(image, n, got, sizeof(got));

		CHECK(found >= -1 && found <= 1);
		prefix_ok += found == -1 && ht_last_error()[0];
	}
	CHECK(prefix_ok > 0);
	CHECK_EQ_U64(soname_of_image("hello, world", 12, got, sizeof(got)), (uint64_t)-1);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	CHECK(ht_elf_soname(fd, "root", got, sizeof(got)) == -1);
	CHECK(strstr(ht_last_error(), "not a regular file") != NULL);
	close(fd);
	free(image);
}
