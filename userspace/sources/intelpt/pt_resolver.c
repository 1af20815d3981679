// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "sources/intelpt/ocaml_eh.h"
#include "sources/intelpt/pt_resolver.h"
#include "symbols/symbolizer.h"

/* One ELF file (or memory image), read once however often it is mapped. */
struct module {
	char *path; /* NULL for a memory image */
	const void *data;
	struct ht_elf_symbols *elf;
	struct ht_ocaml_eh eh;
	int has_eh;
};

struct range {
	uint64_t start, end, file_offset, bias;
	size_t module;
	int has_bias;
};

struct ht_pt_elf_resolver {
	struct module *modules;
	size_t nmodules;
	struct range *ranges; /* sorted by start */
	size_t nranges;
	const struct ht_ocaml_eh **eh;
	size_t neh;
};

static struct ht_elf_symbols *open_file(const char *path)
{
	struct ht_elf_symbols *e;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	e = ht_elf_symbols_open_fd(fd, path);
	close(fd);
	return e;
}

/* The module of M, read now if it is new. Returns its index. */
static size_t module_of(struct ht_pt_elf_resolver *r, const struct ht_pt_mapping *m)
{
	struct module *mod;

	for (size_t i = 0; i < r->nmodules; i++) {
		mod = &r->modules[i];
		if (m->path ? mod->path && !strcmp(mod->path, m->path) : mod->data == m->data)
			return i;
	}
	mod = &r->modules[r->nmodules];
	memset(mod, 0, sizeof(*mod));
	if (m->path) {
		mod->path = strdup(m->path);
		mod->elf = open_file(m->path);
	} else {
		mod->data = m->data;
		mod->elf = ht_elf_symbols_open_mem(m->data, m->data_len, "[vdso]");
	}
	return r->nmodules++;
}

/* A file with a trap note: its entries become runtime addresses of this mapping. */
static void load_ocaml(struct module *mod, uint64_t bias)
{
	uint64_t base_vaddr = 0;
	int fd;

	if (!mod->path || mod->has_eh)
		return;
	fd = open(mod->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (ht_ocaml_eh_read_fd(fd, mod->path, &mod->eh, &base_vaddr) == 0) {
		ht_ocaml_eh_relocate(&mod->eh, base_vaddr + bias);
		mod->has_eh = 1;
	}
	close(fd);
}

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

struct ht_pt_elf_resolver *ht_pt_elf_resolver_new(const struct ht_pt_mapping *maps, size_t n)
{
	struct ht_pt_elf_resolver *r = calloc(1, sizeof(*r));

	if (!r || !(r->modules = calloc(n + 1, sizeof(*r->modules))) ||
	    !(r->ranges = calloc(n + 1, sizeof(*r->ranges))) ||
	    !(r->eh = calloc(n + 1, sizeof(*r->eh)))) {
		ht_pt_elf_resolver_free(r);
		ht_fail("out of memory for a symbol resolver");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ht_pt_mapping *m = &maps[i];
		struct range *g = &r->ranges[r->nranges++];
		struct module *mod;

		g->start = m->start;
		g->end = m->end;
		g->file_offset = m->path ? m->file_offset : 0;
		g->module = module_of(r, m);
		mod = &r->modules[g->module];
		g->has_bias = mod->elf && !ht_elf_load_bias(mod->elf, m->start, m->end,
							    g->file_offset, "r-xp", &g->bias);
		if (g->has_bias)
			load_ocaml(mod, g->bias);
	}
	for (size_t i = 0; i < r->nmodules; i++)
		if (r->modules[i].has_eh)
			r->eh[r->neh++] = &r->modules[i].eh;
	qsort(r->ranges, r->nranges, sizeof(*r->ranges), range_cmp);
	return r;
}

void ht_pt_elf_resolver_free(struct ht_pt_elf_resolver *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->modules && i < r->nmodules; i++) {
		free(r->modules[i].path);
		ht_elf_symbols_free(r->modules[i].elf);
		ht_ocaml_eh_free(&r->modules[i].eh);
	}
	free(r->modules);
	free(r->ranges);
	free(r->eh);
	free(r);
}

static const struct range *find_range(const struct ht_pt_elf_resolver *r, uint64_t addr)
{
	size_t lo = 0, hi = r->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->ranges[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < r->nranges && r->ranges[lo].start <= addr)
		return &r->ranges[lo];
	return NULL;
}

int ht_pt_elf_resolve(void *ctx, uint64_t addr, struct ht_pt_symbol *out)
{
	struct ht_pt_elf_resolver *r = ctx;
	const struct range *g = find_range(r, addr);
	const struct module *mod;
	const struct ht_elf_sym *sym;

	memset(out, 0, sizeof(*out));
	if (!g)
		return -1;
	mod = &r->modules[g->module];
	out->module = mod->path ? mod->path : "[vdso]";
	out->module_offset = addr - g->start + g->file_offset;
	if (!g->has_bias)
		return 0;
	sym = ht_elf_symbols_find(mod->elf, addr - g->bias);
	if (!sym)
		return 0;
	out->function = sym->name;
	out->start = sym->addr + g->bias;
	out->size = sym->size;
	return 0;
}

size_t ht_pt_elf_resolver_ocaml(const struct ht_pt_elf_resolver *r,
				const struct ht_ocaml_eh *const **tables)
{
	*tables = (const struct ht_ocaml_eh *const *)r->eh;
	return r->neh;
}

int ht_pt_resolve_symbolizer(void *ctx, uint64_t addr, struct ht_pt_symbol *out)
{
	struct ht_symbol sym;

	memset(out, 0, sizeof(*out));
	if (ht_symbolize(ctx, addr, &sym))
		return -1;
	out->module = sym.module;
	out->module_offset = sym.module_offset;
	if (sym.function) {
		out->function = sym.function;
		out->start = addr - sym.function_offset;
	}
	return 0;
}
