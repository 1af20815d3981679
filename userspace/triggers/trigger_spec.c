// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Trigger specs: parsed once, resolved against the target's mappings at
 * attach and again whenever its executable mappings change. Functions are
 * found through the symbolizer; addresses and source lines through the
 * module's own ELF file (program headers for the load bias, DWARF line
 * tables through libdw), opened as the target sees it.
 */
#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "symbols/module_names.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "symbols/target_files.h"
#include "triggers/trigger_spec.h"

/* Candidates listed in an "ambiguous" error; suggestions in a "no such function" one. */
#define MAX_CANDIDATES	   16
#define SHOWN_CANDIDATES   4
#define MAX_SUGGESTIONS	   3
#define MAX_NAME_FOR_EDITS 128

/* ---- Parsing ---- */

static int is_symbol_start(int c)
{
	return isalpha(c) || c == '_' || c == '.' || c == '$';
}

static int is_symbol_char(int c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '@';
}

static int valid_symbol(const char *s)
{
	if (!is_symbol_start((unsigned char)*s))
		return 0;
	for (s++; *s; s++)
		if (!is_symbol_char((unsigned char)*s))
			return 0;
	return 1;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

static int parse_hex(const char *s, uint64_t *out)
{
	char *end;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !isxdigit((unsigned char)s[2]))
		return -1;
	errno = 0;
	*out = strtoull(s + 2, &end, 16);
	return errno || *end ? -1 : 0;
}

static int has_space(const char *s)
{
	for (; *s; s++)
		if (isspace((unsigned char)*s))
			return 1;
	return 0;
}

int ht_trigger_spec_parse(const char *text, struct ht_trigger_spec *out)
{
	const char *colon;
	const char *right;
	size_t left_len;

	memset(out, 0, sizeof(*out));
	if (!text || !*text)
		return ht_fail("empty trigger: give a function (send_order), module:function "
			       "(libc.so.6:malloc), module:0xADDRESS, file.c:LINE or '.'");
	if (strlen(text) >= sizeof(out->text))
		return ht_fail("trigger '%.40s...' is too long (at most %d characters)", text,
			       HT_TRIGGER_TEXT_MAX - 1);
	if (has_space(text))
		return ht_fail("trigger '%s' has a space in it: give function, module:function, "
			       "module:0xADDRESS, file.c:LINE or '.'",
			       text);
	snprintf(out->text, sizeof(out->text), "%s", text);
	colon = strrchr(text, ':');
	if (!colon) {
		if (!strcmp(text, ".")) {
			out->kind = HT_TRIGGER_STOP;
			snprintf(out->symbol, sizeof(out->symbol), "%s", HT_TRIGGER_STOP_FUNCTION);
			return 0;
		}
		if (!strncmp(text, "0x", 2) || !strncmp(text, "0X", 2))
			return ht_fail("trigger '%s': an address needs its module, as nm shows "
				       "it: MODULE:%s (./feed:%s)",
				       text, text, text);
		if (!valid_symbol(text))
			return ht_fail("trigger '%s' is not a function name: give function, "
				       "module:function, module:0xADDRESS, file.c:LINE or '.'",
				       text);
		out->kind = HT_TRIGGER_SYMBOL;
		snprintf(out->symbol, sizeof(out->symbol), "%s", text);
		return 0;
	}
	right = colon + 1;
	left_len = (size_t)(colon - text);
	if (!left_len || !*right)
		return ht_fail("trigger '%s': empty %s around ':' (module:function, "
			       "module:0xADDRESS or file.c:LINE)",
			       text, left_len ? "right side" : "left side");
	if (all_digits(right)) {
		const char *file = text, *inner;
		unsigned long line;

		errno = 0;
		line = strtoul(right, NULL, 10);
		if (errno || !line || line > INT_MAX)
			return ht_fail("trigger '%s': line %s is out of range (1..%d)", text, right,
				       INT_MAX);
		out->kind = HT_TRIGGER_LINE;
		out->line = (unsigned int)line;
		/* module:file.c:LINE */
		inner = memrchr(text, ':', left_len);
		if (inner) {
			if (inner == text)
				return ht_fail("trigger '%s': empty module before the file", text);
			snprintf(out->module, sizeof(out->module), "%.*s", (int)(inner - text),
				 text);
			file = inner + 1;
		}
		snprintf(out->file, sizeof(out->file), "%.*s", (int)(colon - file), file);
		if (!out->file[0])
			return ht_fail("trigger '%s': no source file before the line", text);
		return 0;
	}
	snprintf(out->module, sizeof(out->module), "%.*s", (int)left_len, text);
	if (!strncmp(right, "0x", 2) || !strncmp(right, "0X", 2)) {
		if (parse_hex(right, &out->vaddr))
			return ht_fail("trigger '%s': %s is not a hexadecimal address", text,
				       right);
		out->kind = HT_TRIGGER_ADDRESS;
		return 0;
	}
	if (!strcmp(right, ".")) {
		out->kind = HT_TRIGGER_STOP;
		snprintf(out->symbol, sizeof(out->symbol), "%s", HT_TRIGGER_STOP_FUNCTION);
		return 0;
	}
	if (!valid_symbol(right))
		return ht_fail("trigger '%s': '%s' is not a function name, a line number or a "
			       "0x address",
			       text, right);
	out->kind = HT_TRIGGER_SYMBOL;
	snprintf(out->symbol, sizeof(out->symbol), "%s", right);
	return 0;
}

void ht_triggers_init(struct ht_triggers *t)
{
	memset(t, 0, sizeof(*t));
}

int ht_triggers_add(struct ht_triggers *t, const char *spec)
{
	struct ht_trigger_spec parsed;

	if (t->count >= HT_TRIGGER_MAX)
		return ht_fail("at most %d triggers: x86 has %d debug registers per thread "
			       "('%s' is one too many)",
			       HT_TRIGGER_MAX, HT_TRIGGER_MAX, spec ? spec : "");
	if (ht_trigger_spec_parse(spec, &parsed))
		return -1;
	memset(&t->v[t->count], 0, sizeof(t->v[0]));
	t->v[t->count].spec = parsed;
	t->count++;
	t->maps_key = 0;
	return 0;
}

/* ---- Edit distance, for "did you mean" ---- */

unsigned int ht_edit_distance(const char *a, const char *b, unsigned int limit)
{
	size_t n = strlen(a), m = strlen(b);
	unsigned int rows[3][MAX_NAME_FOR_EDITS + 1];
	unsigned int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (n > MAX_NAME_FOR_EDITS || m > MAX_NAME_FOR_EDITS)
		return limit + 1;
	if ((n > m ? n - m : m - n) > limit)
		return limit + 1;
	for (size_t j = 0; j <= m; j++)
		prev[j] = (unsigned int)j;
	for (size_t i = 1; i <= n; i++) {
		unsigned int row_min;

		cur[0] = (unsigned int)i;
		row_min = cur[0];
		for (size_t j = 1; j <= m; j++) {
			unsigned int cost = a[i - 1] != b[j - 1];
			unsigned int v = prev[j - 1] + cost;

			if (prev[j] + 1 < v)
				v = prev[j] + 1;
			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < v)
				v = prev2[j - 2] + 1;
			cur[j] = v;
			if (v < row_min)
				row_min = v;
		}
		if (row_min > limit)
			return limit + 1;
		{
			unsigned int *t = prev2;

			prev2 = prev;
			prev = cur;
			cur = t;
		}
	}
	return prev[m] > limit ? limit + 1 : prev[m];
}

/* ---- The target's modules ---- */

/* "./feed" is matched by basename, "/srv/feed" by path. */
static const char *module_key(const char *spec_module)
{
	const char *base;

	if (spec_module[0] == '/')
		return spec_module;
	base = strrchr(spec_module, '/');
	return base ? base + 1 : spec_module;
}

static int is_file_mapping(const struct ht_mapping *m)
{
	return m->path[0] == '/' && m->inode;
}

static int same_file(const struct ht_mapping *a, const struct ht_mapping *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
}

/* Executable file mappings that are the first of their file in MAPS: one per module. */
static int first_exec_of_module(const struct ht_maps *maps, size_t i)
{
	if (!ht_mapping_is_exec(&maps->v[i]) || !is_file_mapping(&maps->v[i]))
		return 0;
	for (size_t k = 0; k < i; k++)
		if (ht_mapping_is_exec(&maps->v[k]) && same_file(&maps->v[k], &maps->v[i]))
			return 0;
	return 1;
}

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* What the triggers depend on: the executable file mappings. Never 0. */
static uint64_t maps_fingerprint(const struct ht_maps *maps)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < maps->count; i++) {
		const struct ht_mapping *m = &maps->v[i];

		if (!ht_mapping_is_exec(m))
			continue;
		h = fnv(h, &m->start, sizeof(m->start));
		h = fnv(h, &m->end, sizeof(m->end));
		h = fnv(h, &m->offset, sizeof(m->offset));
		h = fnv(h, &m->inode, sizeof(m->inode));
		h = fnv(h, &m->dev_major, sizeof(m->dev_major));
		h = fnv(h, &m->dev_minor, sizeof(m->dev_minor));
		h = fnv(h, m->path, strlen(m->path) + 1);
	}
	return h ? h : 1;
}

/* A module's file, open for its program headers and DWARF. */
struct module_file {
	int fd;
	Elf *elf;
	GElf_Ehdr ehdr;
};

static void module_file_close(struct module_file *mf)
{
	if (mf->elf)
		elf_end(mf->elf);
	if (mf->fd >= 0)
		close(mf->fd);
	mf->elf = NULL;
	mf->fd = -1;
}

static int elf_from_fd(int fd, const char *shown, Elf **elf, GElf_Ehdr *ehdr)
{
	elf_version(EV_CURRENT);
	*elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!*elf || elf_kind(*elf) != ELF_K_ELF || !gelf_getehdr(*elf, ehdr)) {
		if (*elf)
			elf_end(*elf);
		*elf = NULL;
		return ht_fail("%s is not an ELF file", shown);
	}
	return 0;
}

static int module_file_open(const struct ht_target *tg, const struct ht_mapping *m,
			    struct module_file *mf)
{
	struct stat st;
	char *source = NULL;

	mf->elf = NULL;
	mf->fd = ht_target_open_mapping(tg, m, &source, &st);
	free(source);
	if (mf->fd < 0)
		return -1;
	if (elf_from_fd(mf->fd, m->path, &mf->elf, &mf->ehdr)) {
		module_file_close(mf);
		return -1;
	}
	return 0;
}

/*
 * The load bias of executable mapping M of this file: runtime = vaddr + bias.
 * The PT_LOAD segment whose file bytes the mapping holds gives it.
 */
static int mapping_bias(struct module_file *mf, const struct ht_mapping *m, uint64_t *bias)
{
	uint64_t len = m->end - m->start;
	size_t n;

	if (mf->ehdr.e_type == ET_EXEC) {
		*bias = 0;
		return 0;
	}
	if (elf_getphdrnum(mf->elf, &n))
		return ht_fail("%s: unreadable program headers", m->path);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(mf->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) || !ph.p_filesz)
			continue;
		if (ph.p_offset + ph.p_filesz <= m->offset || ph.p_offset >= m->offset + len)
			continue;
		*bias = m->start - m->offset + ph.p_offset - ph.p_vaddr;
		return 0;
	}
	return ht_fail("%s: no executable segment in its mapping at offset 0x%" PRIx64, m->path,
		       m->offset);
}

/* Whether file address VADDR is code: in an executable PT_LOAD segment. */
static int vaddr_is_code(Elf *elf, uint64_t vaddr)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_memsz)
			return 1;
	}
	return 0;
}

/* The executable mapping of the module of M that holds runtime address ADDR, or NULL. */
static const struct ht_mapping *exec_mapping_holding(const struct ht_maps *maps,
						     const struct ht_mapping *m, uint64_t addr)
{
	const struct ht_mapping *h = ht_maps_find(maps, addr);

	return h && ht_mapping_is_exec(h) && same_file(h, m) ? h : NULL;
}

/* ---- Resolution context ---- */

struct resolve_ctx {
	struct ht_symbolizer *s;
	struct ht_target tg;
	struct ht_maps maps;
	struct ht_module_names names; /* which mappings a spec's module names */
	int pid;
	unsigned int flags;
};

/* Index of the first executable mapping of a module named WANT, or -1. */
static long find_module(struct resolve_ctx *c, const char *want)
{
	for (size_t i = 0; i < c->maps.count; i++)
		if (first_exec_of_module(&c->maps, i) && ht_module_names_match(&c->names, i, want))
			return (long)i;
	return -1;
}

/* Whether any mapping (executable or not) of the process is module WANT. */
static int module_mapped(struct resolve_ctx *c, const char *want)
{
	for (size_t i = 0; i < c->maps.count; i++)
		if (ht_module_names_match(&c->names, i, want))
			return 1;
	return 0;
}

static void set_resolved(struct ht_trigger *tr, uint64_t addr, const char *module)
{
	tr->resolved = 1;
	tr->ever_resolved = 1;
	tr->addr = addr;
	snprintf(tr->module, sizeof(tr->module), "%s", module);
	tr->pending[0] = 0;
}

static void set_unresolved(struct ht_trigger *tr)
{
	tr->resolved = 0;
	tr->addr = 0;
	tr->module[0] = 0;
}

/*
 * Unresolved: pending when the caller waits for it (for anything, or for
 * the module NO_MODULE says is not mapped), else the error.
 */
static int not_found(struct resolve_ctx *c, struct ht_trigger *tr, const char *why, bool no_module)
{
	set_unresolved(tr);
	if ((c->flags & HT_TRIGGERS_WAIT) || (no_module && (c->flags & HT_TRIGGERS_WAIT_MODULES))) {
		snprintf(tr->pending, sizeof(tr->pending), "%s", why);
		return 0;
	}
	return ht_fail("%s", why);
}

/* ---- Functions ---- */

struct suggestion {
	char name[MAX_NAME_FOR_EDITS + 1];
	unsigned int distance;
};

static void consider(struct suggestion *best, size_t *nbest, const char *name, unsigned int d)
{
	size_t at;

	for (size_t i = 0; i < *nbest; i++)
		if (!strcmp(best[i].name, name))
			return;
	at = *nbest;
	while (at > 0 && best[at - 1].distance > d)
		at--;
	if (at >= MAX_SUGGESTIONS)
		return;
	if (*nbest < MAX_SUGGESTIONS)
		(*nbest)++;
	memmove(&best[at + 1], &best[at], (*nbest - 1 - at) * sizeof(best[0]));
	snprintf(best[at].name, sizeof(best[at].name), "%s", name);
	best[at].distance = d;
}

/* Up to 3 names of the target's functions (in MODULE, or all) closest to NAME, ", "-joined. */
static void suggest(struct resolve_ctx *c, const char *module, const char *name, char *out,
		    size_t len)
{
	struct suggestion best[MAX_SUGGESTIONS + 1];
	size_t nbest = 0, used = 0;
	size_t name_len = strlen(name);
	unsigned int limit = name_len < 6 ? 2 : (unsigned int)(name_len / 3);

	out[0] = 0;
	for (size_t i = 0; i < c->maps.count; i++) {
		const struct ht_mapping *m = &c->maps.v[i];
		struct ht_elf_symbols *e;
		char *source = NULL;
		struct stat st;
		int fd;

		if (!first_exec_of_module(&c->maps, i) ||
		    (module && !ht_module_names_match(&c->names, i, module)))
			continue;
		fd = ht_target_open_mapping(&c->tg, m, &source, &st);
		free(source);
		if (fd < 0)
			continue;
		e = ht_elf_symbols_open_fd(fd, m->path);
		close(fd);
		if (!e)
			continue;
		for (size_t k = 0, n = ht_elf_symbols_count(e); k < n; k++) {
			const struct ht_elf_sym *sym = ht_elf_symbols_at(e, k);
			unsigned int d = ht_edit_distance(name, sym->name, limit);

			if (d <= limit)
				consider(best, &nbest, sym->name, d);
		}
		ht_elf_symbols_free(e);
	}
	for (size_t i = 0; i < nbest && used + 1 < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "",
					 best[i].name);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/*
 * The addresses of function NAME in every module MODULE names (in all with
 * MODULE NULL), as ht_symbolizer_lookup() gives them. The symbolizer is
 * asked by each matching file's own path: it knows file names, not sonames
 * or symlinks.
 */
static int lookup_function(struct resolve_ctx *c, const char *module, const char *name,
			   struct ht_symbol_address *out, size_t max, size_t *found)
{
	*found = 0;
	if (!module)
		return ht_symbolizer_lookup(c->s, NULL, name, out, max, found);
	for (size_t i = 0; i < c->maps.count; i++) {
		const char *path = c->maps.v[i].path;
		size_t stored = *found < max ? *found : max, n = 0, k;

		if (!first_exec_of_module(&c->maps, i) ||
		    !ht_module_names_match(&c->names, i, module))
			continue;
		for (k = 0; k < i; k++)
			if (first_exec_of_module(&c->maps, k) && !strcmp(c->maps.v[k].path, path))
				break;
		if (k < i)
			continue; /* that path was asked already */
		if (!ht_symbolizer_lookup(c->s, path, name, out + stored, max - stored, &n))
			*found += n;
	}
	return *found ? 0 : ht_fail("no function %s in %s of process %d", name, module, c->pid);
}

static int resolve_function(struct resolve_ctx *c, struct ht_trigger *tr)
{
	const struct ht_trigger_spec *sp = &tr->spec;
	const char *module = sp->module[0] ? module_key(sp->module) : NULL;
	struct ht_symbol_address cand[MAX_CANDIDATES];
	size_t found = 0, distinct = 0;
	char why[HT_TRIGGER_TEXT_MAX], near[256], list[320];
	size_t used = 0;

	if (lookup_function(c, module, sp->symbol, cand, MAX_CANDIDATES, &found) || !found) {
		if (module && !module_mapped(c, module)) {
			snprintf(why, sizeof(why),
				 "trigger '%s': no module %s is mapped in "
				 "process %d (yet)",
				 sp->text, module, c->pid);
			return not_found(c, tr, why, true);
		}
		if (sp->kind == HT_TRIGGER_STOP) {
			snprintf(why, sizeof(why),
				 "trigger '%s': no %s in %s of process %d: the "
				 "program calls it after including <hybtrace/hybtrace.h>",
				 sp->text, HT_TRIGGER_STOP_FUNCTION, module ? module : "any module",
				 c->pid);
			return not_found(c, tr, why, false);
		}
		if (c->flags & HT_TRIGGERS_WAIT)
			near[0] = 0;
		else
			suggest(c, module, sp->symbol, near, sizeof(near));
		snprintf(why, sizeof(why), "trigger '%s': no function %s in %s of process %d%s%s",
			 sp->text, sp->symbol, module ? module : "any module", c->pid,
			 near[0] ? "; did you mean " : "", near);
		return not_found(c, tr, why, false);
	}
	if (found > MAX_CANDIDATES)
		found = MAX_CANDIDATES;
	/* Aliases of one function (same address) are one candidate. */
	for (size_t i = 0; i < found; i++) {
		size_t k;

		for (k = 0; k < distinct; k++)
			if (cand[k].addr == cand[i].addr)
				break;
		if (k == distinct)
			cand[distinct++] = cand[i];
	}
	if (distinct == 1) {
		set_resolved(tr, cand[0].addr, cand[0].module);
		return 0;
	}
	list[0] = 0;
	for (size_t i = 0; i < distinct && i < SHOWN_CANDIDATES && used + 1 < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s (0x%" PRIx64 ")",
					 i ? ", " : "", cand[i].module, cand[i].addr);
	set_unresolved(tr);
	/* Two in one module (static functions of one name): only an address tells them apart. */
	if (!strcmp(cand[0].module, cand[1].module))
		return ht_fail("trigger '%s' is ambiguous: %zu functions %s in %s: %s; pick one "
			       "by its address as nm shows it, %s:0xADDRESS",
			       sp->text, distinct, sp->symbol, base_name(cand[0].module), list,
			       base_name(cand[0].module));
	return ht_fail("trigger '%s' is ambiguous: %zu functions %s: %s%s; pick one as "
		       "module:%s (%s:%s)",
		       sp->text, distinct, sp->symbol, list,
		       distinct > SHOWN_CANDIDATES ? ", ..." : "", sp->symbol,
		       base_name(cand[0].module), sp->symbol);
}

/* ---- Addresses and lines: a file address in a module ---- */

/* A cached file address still valid: the same file is mapped. Returns the mapping index or -1. */
static long cached_module(const struct resolve_ctx *c, const struct ht_trigger *tr)
{
	for (size_t i = 0; i < c->maps.count; i++) {
		const struct ht_mapping *m = &c->maps.v[i];

		if (tr->cached_path[0] && first_exec_of_module(&c->maps, i) &&
		    m->inode == tr->cached_inode && m->dev_major == tr->cached_dev_major &&
		    m->dev_minor == tr->cached_dev_minor && !strcmp(m->path, tr->cached_path))
			return (long)i;
	}
	return -1;
}

static void cache_vaddr(struct ht_trigger *tr, const struct ht_mapping *m, uint64_t vaddr)
{
	tr->cached_vaddr = vaddr;
	tr->cached_inode = m->inode;
	tr->cached_dev_major = m->dev_major;
	tr->cached_dev_minor = m->dev_minor;
	snprintf(tr->cached_path, sizeof(tr->cached_path), "%s", m->path);
}

/* Runtime address of file address VADDR of the module whose first exec mapping is M. */
static int place_vaddr(struct resolve_ctx *c, struct ht_trigger *tr, const struct ht_mapping *m,
		       struct module_file *mf, uint64_t vaddr)
{
	uint64_t bias = 0, addr;

	if (!vaddr_is_code(mf->elf, vaddr))
		return ht_fail("trigger '%s': 0x%" PRIx64 " is not in the code of %s (no "
			       "executable segment holds it)",
			       tr->spec.text, vaddr, m->path);
	if (mapping_bias(mf, m, &bias))
		return ht_fail("trigger '%s': %s", tr->spec.text, ht_last_error());
	addr = vaddr + bias;
	if (!exec_mapping_holding(&c->maps, m, addr))
		return ht_fail("trigger '%s': 0x%" PRIx64 " of %s is not mapped executable in "
			       "process %d",
			       tr->spec.text, vaddr, m->path, c->pid);
	set_resolved(tr, addr, m->path);
	cache_vaddr(tr, m, vaddr);
	return 0;
}

static int resolve_address(struct resolve_ctx *c, struct ht_trigger *tr)
{
	const char *want = module_key(tr->spec.module);
	long i = find_module(c, want);
	struct module_file mf = {.fd = -1};
	char why[HT_TRIGGER_TEXT_MAX];
	int rc;

	if (i < 0) {
		set_unresolved(tr);
		snprintf(why, sizeof(why),
			 "trigger '%s': no module %s is mapped executable in "
			 "process %d (yet)",
			 tr->spec.text, want, c->pid);
		return not_found(c, tr, why, true);
	}
	if (module_file_open(&c->tg, &c->maps.v[i], &mf)) {
		set_unresolved(tr);
		return ht_fail("trigger '%s': %s", tr->spec.text, ht_last_error());
	}
	rc = place_vaddr(c, tr, &c->maps.v[i], &mf, tr->spec.vaddr);
	if (rc)
		set_unresolved(tr);
	module_file_close(&mf);
	return rc;
}

/* What a search of line tables found. */
struct line_search {
	const char *file;
	unsigned int line;
	int file_seen;	    /* some line of a matching file */
	int found;	    /* an is_stmt address of the line */
	uint64_t vaddr;	    /* the lowest */
	unsigned int below; /* nearest line with code before, 0 if none */
	unsigned int above; /* nearest after, 0 if none */
};

/* "feed.c" matches any path whose basename it is; "src/feed.c" a path ending in /src/feed.c. */
static int source_matches(const char *path, const char *want)
{
	size_t n = strlen(path), k;

	while (!strncmp(want, "./", 2))
		want += 2;
	k = strlen(want);
	if (!strcmp(path, want))
		return 1;
	return n > k && path[n - k - 1] == '/' && !strcmp(path + n - k, want);
}

static void search_lines(Dwarf *dw, Elf *code_elf, struct line_search *ls)
{
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Die cudie;
	Dwarf_Half version;
	uint8_t unit_type;

	while (!dwarf_get_units(dw, cu, &next, &version, &unit_type, &cudie, NULL)) {
		Dwarf_Lines *lines;
		size_t n;

		cu = next;
		if (dwarf_getsrclines(&cudie, &lines, &n))
			continue;
		for (size_t i = 0; i < n; i++) {
			Dwarf_Line *l = dwarf_onesrcline(lines, i);
			const char *src = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
			bool stmt = false, end = false;
			Dwarf_Addr addr;
			int lineno;

			if (!src || dwarf_lineno(l, &lineno) || lineno <= 0 ||
			    dwarf_lineaddr(l, &addr) || dwarf_lineendsequence(l, &end) || end ||
			    !source_matches(src, ls->file))
				continue;
			/* Code discarded at link time keeps address 0 (or a tombstone). */
			if (!vaddr_is_code(code_elf, addr))
				continue;
			ls->file_seen = 1;
			if ((unsigned int)lineno < ls->line) {
				if ((unsigned int)lineno > ls->below)
					ls->below = (unsigned int)lineno;
				continue;
			}
			if ((unsigned int)lineno > ls->line) {
				if (!ls->above || (unsigned int)lineno < ls->above)
					ls->above = (unsigned int)lineno;
				continue;
			}
			if (dwarf_linebeginstatement(l, &stmt) || !stmt)
				continue;
			if (!ls->found || addr < ls->vaddr)
				ls->vaddr = addr;
			ls->found = 1;
		}
	}
}

/* A separate debug file for MF: by build-id, then the debuglink beside the file. */
static int open_debug_file(const struct resolve_ctx *c, const struct ht_mapping *m,
			   struct module_file *mf, struct module_file *dbg)
{
	const unsigned char *id = NULL;
	ssize_t id_len = dwelf_elf_gnu_build_id(mf->elf, (const void **)&id);
	char path[4400], shown[4400];
	const char *link, *slash;
	GElf_Word crc;

	dbg->fd = -1;
	dbg->elf = NULL;
	if (id_len > 1 && id_len <= 64) {
		int at = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);

		for (ssize_t k = 1; k < id_len; k++)
			at += snprintf(path + at, sizeof(path) - (size_t)at, "%02x", id[k]);
		snprintf(path + at, sizeof(path) - (size_t)at, ".debug");
		dbg->fd = ht_target_open_file(&c->tg, path, 1, shown, sizeof(shown));
		if (dbg->fd < 0 && !c->tg.same_root)
			dbg->fd = ht_target_open_file(&c->tg, path, 0, shown, sizeof(shown));
	}
	link = dwelf_elf_gnu_debuglink(mf->elf, &crc);
	slash = strrchr(m->path, '/');
	if (dbg->fd < 0 && link && !strchr(link, '/') && slash && !ht_path_is_deleted(m->path)) {
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - m->path), m->path, link);
		if (strcmp(path, m->path))
			dbg->fd = ht_target_open_file(&c->tg, path, 1, shown, sizeof(shown));
		if (dbg->fd < 0) {
			snprintf(path, sizeof(path), "%.*s/.debug/%s", (int)(slash - m->path),
				 m->path, link);
			dbg->fd = ht_target_open_file(&c->tg, path, 1, shown, sizeof(shown));
		}
	}
	if (dbg->fd < 0)
		return -1;
	if (elf_from_fd(dbg->fd, shown, &dbg->elf, &dbg->ehdr)) {
		module_file_close(dbg);
		return -1;
	}
	return 0;
}

/* Search module M's line tables (its own DWARF, else with SEPARATE a debug file's). */
static int module_lines(const struct resolve_ctx *c, const struct ht_mapping *m, int separate,
			struct line_search *ls, int *has_dwarf)
{
	struct module_file mf = {.fd = -1}, dbg = {.fd = -1};
	Dwarf *dw;

	*has_dwarf = 0;
	if (module_file_open(&c->tg, m, &mf))
		return -1;
	dw = dwarf_begin_elf(mf.elf, DWARF_C_READ, NULL);
	if (!dw && separate && !open_debug_file(c, m, &mf, &dbg))
		dw = dwarf_begin_elf(dbg.elf, DWARF_C_READ, NULL);
	if (dw) {
		*has_dwarf = 1;
		search_lines(dw, mf.elf, ls);
		dwarf_end(dw);
	}
	module_file_close(&dbg);
	module_file_close(&mf);
	return 0;
}

static int line_error(struct ht_trigger *tr, const struct line_search *ls, const char *where)
{
	char near[96] = "";

	set_unresolved(tr);
	if (!ls->file_seen)
		return ht_fail("trigger '%s': no source file %s in the debug info of %s",
			       tr->spec.text, ls->file, where);
	if (ls->below && ls->above)
		snprintf(near, sizeof(near), "; the nearest lines with code are %u and %u",
			 ls->below, ls->above);
	else if (ls->below || ls->above)
		snprintf(near, sizeof(near), "; the nearest line with code is %u",
			 ls->below ? ls->below : ls->above);
	return ht_fail("trigger '%s': line %u of %s has no code%s", tr->spec.text, ls->line,
		       ls->file, near);
}

static int resolve_line(struct resolve_ctx *c, struct ht_trigger *tr)
{
	const char *want = tr->spec.module[0] ? module_key(tr->spec.module) : NULL;
	struct line_search merged = {.file = tr->spec.file, .line = tr->spec.line};
	long hit = -1, any_dwarf = 0;
	uint64_t hit_vaddr = 0;
	char why[HT_TRIGGER_TEXT_MAX];
	struct module_file mf = {.fd = -1};
	long i;
	int rc;

	/* Found before in a file that is still mapped: only the bias may have moved. */
	i = cached_module(c, tr);
	if (i >= 0 && !module_file_open(&c->tg, &c->maps.v[i], &mf)) {
		rc = place_vaddr(c, tr, &c->maps.v[i], &mf, tr->cached_vaddr);
		module_file_close(&mf);
		if (!rc)
			return 0;
	}
	for (size_t k = 0; k < c->maps.count; k++) {
		const struct ht_mapping *m = &c->maps.v[k];
		struct line_search ls = {.file = tr->spec.file, .line = tr->spec.line};
		int has_dwarf;

		if (!first_exec_of_module(&c->maps, k) ||
		    (want && !ht_module_names_match(&c->names, k, want)))
			continue;
		/* Without a module, only files that carry their DWARF: libc's debug file is huge.
		 */
		if (module_lines(c, m, want != NULL, &ls, &has_dwarf))
			continue;
		any_dwarf += has_dwarf;
		merged.file_seen |= ls.file_seen;
		if (ls.below > merged.below)
			merged.below = ls.below;
		if (ls.above && (!merged.above || ls.above < merged.above))
			merged.above = ls.above;
		if (!ls.found)
			continue;
		if (hit >= 0) {
			set_unresolved(tr);
			return ht_fail("trigger '%s' is ambiguous: %s:%u has code in %s and in %s; "
				       "pick one as module:%s:%u",
				       tr->spec.text, tr->spec.file, tr->spec.line,
				       c->maps.v[hit].path, m->path, tr->spec.file, tr->spec.line);
		}
		hit = (long)k;
		hit_vaddr = ls.vaddr;
	}
	if (hit < 0) {
		if (want && find_module(c, want) < 0) {
			snprintf(why, sizeof(why),
				 "trigger '%s': no module %s is mapped executable "
				 "in process %d (yet)",
				 tr->spec.text, want, c->pid);
			return not_found(c, tr, why, true);
		}
		if (!any_dwarf) {
			set_unresolved(tr);
			if (!want)
				return ht_fail(
					"trigger '%s': no module of process %d has debug info "
					"(DWARF) to find lines in: build it with -g",
					tr->spec.text, c->pid);
			return ht_fail("trigger '%s': %s has no debug info (DWARF) to find lines "
				       "in: build it with -g",
				       tr->spec.text, want);
		}
		return line_error(tr, &merged, want ? want : "any module");
	}
	if (module_file_open(&c->tg, &c->maps.v[hit], &mf)) {
		set_unresolved(tr);
		return ht_fail("trigger '%s': %s", tr->spec.text, ht_last_error());
	}
	rc = place_vaddr(c, tr, &c->maps.v[hit], &mf, hit_vaddr);
	if (rc)
		set_unresolved(tr);
	module_file_close(&mf);
	return rc;
}

/* ---- All triggers ---- */

static int resolve_one(struct resolve_ctx *c, struct ht_trigger *tr)
{
	switch (tr->spec.kind) {
	case HT_TRIGGER_SYMBOL:
	case HT_TRIGGER_STOP:
		return resolve_function(c, tr);
	case HT_TRIGGER_ADDRESS:
		return resolve_address(c, tr);
	case HT_TRIGGER_LINE:
		return resolve_line(c, tr);
	}
	return ht_fail("trigger '%s': unknown kind", tr->spec.text);
}

int ht_triggers_resolve(struct ht_triggers *t, struct ht_symbolizer *s, int pid, unsigned flags)
{
	struct resolve_ctx c = {.s = s, .pid = pid, .flags = flags};
	char first_error[512] = "";
	int changed = 0;
	uint64_t key;

	for (size_t i = 0; i < t->count; i++)
		t->v[i].changed = 0;
	if (ht_maps_read(pid, &c.maps))
		return -1;
	key = maps_fingerprint(&c.maps);
	if (key == t->maps_key && !(flags & HT_TRIGGERS_FORCE)) {
		ht_maps_free(&c.maps);
		return 0;
	}
	/* The symbolizer reads the maps after us: it sees at least what we saw. */
	if (ht_symbolizer_refresh(s)) {
		ht_maps_free(&c.maps);
		return -1;
	}
	ht_target_init(&c.tg, pid);
	ht_target_reopen_root(&c.tg); /* without it, files open through map_files */
	ht_module_names_init(&c.names, &c.tg, &c.maps);
	for (size_t i = 0; i < t->count; i++) {
		struct ht_trigger *tr = &t->v[i];
		int was_resolved = tr->resolved;
		uint64_t was_addr = tr->addr;

		tr->pending[0] = 0;
		if (resolve_one(&c, tr) && !first_error[0])
			snprintf(first_error, sizeof(first_error), "%s", ht_last_error());
		tr->changed = tr->resolved != was_resolved || tr->addr != was_addr;
	}
	/* Two triggers on one address would be one debug register firing twice. */
	for (size_t i = 0; i < t->count; i++) {
		for (size_t k = i + 1; k < t->count; k++) {
			if (!t->v[i].resolved || !t->v[k].resolved || t->v[i].addr != t->v[k].addr)
				continue;
			if (!first_error[0])
				snprintf(first_error, sizeof(first_error),
					 "triggers '%s' and '%s' are the same address 0x%" PRIx64
					 " in %s: give it once",
					 t->v[i].spec.text, t->v[k].spec.text, t->v[k].addr,
					 t->v[k].module);
			t->v[k].changed |= t->v[k].resolved;
			set_unresolved(&t->v[k]);
		}
	}
	for (size_t i = 0; i < t->count; i++)
		changed += t->v[i].changed;
	if (changed)
		t->generation++;
	ht_module_names_free(&c.names);
	ht_target_close(&c.tg);
	ht_maps_free(&c.maps);
	/* Errors too are said once per change of the mappings: nothing else would change them. */
	t->maps_key = key;
	if (first_error[0])
		return ht_fail("%s", first_error);
	return changed;
}

void ht_triggers_reset(struct ht_triggers *t)
{
	for (size_t i = 0; i < t->count; i++) {
		struct ht_trigger *tr = &t->v[i];

		set_unresolved(tr);
		tr->ever_resolved = 0;
		tr->changed = 0;
		tr->pending[0] = 0;
		tr->cached_path[0] = 0;
	}
	t->maps_key = 0;
}

const char *ht_trigger_describe(const struct ht_trigger *tr, char *buf, size_t len)
{
	if (!tr->resolved)
		snprintf(buf, len, "%s (not resolved%s%s)", tr->spec.text,
			 tr->pending[0] ? ": " : "", tr->pending);
	else if (tr->spec.kind == HT_TRIGGER_STOP)
		snprintf(buf, len, "%s at 0x%" PRIx64 " in %s", HT_TRIGGER_STOP_FUNCTION, tr->addr,
			 tr->module);
	else
		snprintf(buf, len, "%s at 0x%" PRIx64 " in %s", tr->spec.text, tr->addr,
			 tr->module);
	return buf;
}
