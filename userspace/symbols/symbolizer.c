// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbolizer of one target process. Its files are read through
 * target_files.c, as the target sees them. Per file (device, inode, path)
 * the symbol table is read once, on first use, and kept while the file
 * stays mapped with the same size and mtime.
 */
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/proc.h"
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "symbols/perf_map.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "symbols/target_files.h"

/* Perf maps of big JITs run to tens of MiB. */
#define MAX_PERF_MAP_BYTES (512u << 20)
/* Notes beyond this are dropped: each is meant to be logged. */
#define MAX_NOTES 1024

enum module_state { MODULE_UNREAD, MODULE_READ, MODULE_FAILED };

/* One mapped file (or the vdso) and its symbols. */
struct module {
	char *path;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	uint64_t vdso_size; /* for "[vdso]", whose key is its size */
	int is_vdso;
	enum module_state state;
	struct ht_elf_symbols *elf;
	char *source;	 /* where the symbols came from, for ht_symbolizer_source() */
	off_t file_size; /* of the file read, to tell when it changes */
	struct timespec file_mtime;
	int used; /* mapped in the maps being built */
	/*
	 * The file, opened when the mapping was first seen: its symbols can be
	 * read later even if the target has exited by then. -1: not held.
	 */
	int held_fd;
	char *held_source;
};

/* Per mapping of the current maps, parallel to maps.v. */
struct mapping_info {
	struct module *module; /* NULL: not a file we read (anonymous, heap, stack...) */
	int bias_state;	       /* 0: not computed yet; 1: bias holds; -1: none */
	uint64_t bias;
};

/* The target's perf map, /tmp/perf-NSPID.map in its root. */
struct jit_map {
	struct ht_perf_map map;
	int loaded;
	int checked; /* since the last refresh */
	off_t size;
	struct timespec mtime;
};

struct ht_symbolizer {
	int pid;
	struct ht_target target;
	struct ht_maps maps;
	struct mapping_info *info;
	struct module **modules;
	size_t nmodules;
	struct jit_map jit;
	char **notes;
	size_t nnotes, next_note;
	struct ht_symbolizer_stats stats;
};

static void note(struct ht_symbolizer *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct ht_symbolizer *s, const char *fmt, ...)
{
	char text[512];
	char **notes;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < s->nnotes; i++)
		if (!strcmp(s->notes[i], text))
			return;
	if (s->nnotes >= MAX_NOTES)
		return;
	notes = realloc(s->notes, (s->nnotes + 1) * sizeof(*notes));
	if (!notes)
		return;
	s->notes = notes;
	s->notes[s->nnotes] = strdup(text);
	if (s->notes[s->nnotes])
		s->nnotes++;
}

const char *ht_symbolizer_next_note(struct ht_symbolizer *s)
{
	if (s->next_note >= s->nnotes)
		return NULL;
	return s->notes[s->next_note++];
}

/* Whether the file starts like an ELF file; other mapped files are not worth a note. */
static int looks_like_elf(int fd)
{
	unsigned char magic[SELFMAG];

	return pread(fd, magic, SELFMAG, 0) == SELFMAG && !memcmp(magic, ELFMAG, SELFMAG);
}

/* ---- Separate debug files ---- */

struct debug_want {
	const char *build_id; /* must match when both files have one */
	int check_crc;
	uint32_t crc;
};

/* Whether the debug file in FD is the one WANT asks for; says why not in a note. */
static struct ht_elf_symbols *check_debug_file(struct ht_symbolizer *s, int fd, const char *shown,
					       const struct debug_want *want)
{
	struct ht_elf_symbols *d;
	const char *id;
	uint32_t crc;

	if (want->check_crc) {
		if (ht_file_crc32(fd, &crc)) {
			note(s, "%s: %s", shown, ht_last_error());
			return NULL;
		}
		if (crc != want->crc) {
			note(s, "%s: CRC 0x%08x does not match the debuglink's 0x%08x: ignored",
			     shown, crc, want->crc);
			return NULL;
		}
	}
	d = ht_elf_symbols_open_fd(fd, shown);
	if (!d) {
		note(s, "%s", ht_last_error());
		return NULL;
	}
	id = ht_elf_symbols_build_id(d);
	if (want->build_id && id && strcmp(id, want->build_id)) {
		note(s, "%s: build-id %s, not %s: ignored", shown, id, want->build_id);
		ht_elf_symbols_free(d);
		return NULL;
	}
	if (!(ht_elf_symbols_flags(d) & HT_ELF_HAS_SYMTAB)) {
		ht_elf_symbols_free(d);
		return NULL;
	}
	return d;
}

/* One candidate, opened as FD (or not: -1, -2); returns 1 when its symbols were added to MOD. */
static int add_debug_file(struct ht_symbolizer *s, struct module *mod, int fd, const char *shown,
			  const struct debug_want *want)
{
	struct ht_elf_symbols *d;
	char *source;

	if (fd < 0) {
		if (fd == -1)
			note(s, "%s", ht_last_error());
		return 0;
	}
	d = check_debug_file(s, fd, shown, want);
	close(fd);
	if (!d)
		return 0;
	if (ht_elf_symbols_merge(mod->elf, d)) {
		note(s, "%s", ht_last_error());
		return 0;
	}
	if (asprintf(&source, "%s (symbols from %s)", mod->source, shown) >= 0) {
		free(mod->source);
		mod->source = source;
	}
	return 1;
}

/* Try the file at PATH, in the target's root or on the host. */
static int try_debug_file(struct ht_symbolizer *s, struct module *mod, const char *path,
			  int in_root, const struct debug_want *want)
{
	char shown[4400];
	int fd = ht_target_open_file(&s->target, path, in_root, shown, sizeof(shown));

	return add_debug_file(s, mod, fd, shown, want);
}

/* By build-id, in the target's root, then on the host. */
static int find_by_build_id(struct ht_symbolizer *s, struct module *mod, const char *build_id)
{
	struct debug_want want = {.build_id = build_id};
	char shown[4400];
	int fd;

	for (int place = 0; place < HT_DEBUG_PLACES; place++) {
		fd = ht_target_open_build_id_debug(&s->target, build_id, place, shown,
						   sizeof(shown));
		if (add_debug_file(s, mod, fd, shown, &want))
			return 1;
	}
	return 0;
}

/* A debuglink names a file, never a path: the target wrote it. */
static int is_plain_file_name(const char *name)
{
	return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

/*
 * .gnu_debuglink NAME next to the file, in .debug/ beside it, and under
 * /usr/lib/debug/DIR, as gdb looks; the CRC must match.
 */
static int find_by_debuglink(struct ht_symbolizer *s, struct module *mod, const char *path,
			     const char *name, uint32_t crc)
{
	struct debug_want want = {
		.build_id = ht_elf_symbols_build_id(mod->elf), .check_crc = 1, .crc = crc};
	const char *slash = strrchr(path, '/');
	int dir_len = slash ? (int)(slash - path) : 0;
	char candidate[4400];

	if (!is_plain_file_name(name) || !slash || ht_path_is_deleted(path))
		return 0;
	snprintf(candidate, sizeof(candidate), "%.*s/%s", dir_len, path, name);
	if (strcmp(candidate, path) && try_debug_file(s, mod, candidate, 1, &want))
		return 1;
	snprintf(candidate, sizeof(candidate), "%.*s/.debug/%s", dir_len, path, name);
	if (try_debug_file(s, mod, candidate, 1, &want))
		return 1;
	snprintf(candidate, sizeof(candidate), "/usr/lib/debug%.*s/%s", dir_len, path, name);
	return try_debug_file(s, mod, candidate, 1, &want) ||
	       (!s->target.same_root && try_debug_file(s, mod, candidate, 0, &want));
}

/* A file without .symtab: look for its separate debug file. */
static void add_debug_symbols(struct ht_symbolizer *s, struct module *mod, const char *path)
{
	const char *build_id = ht_elf_symbols_build_id(mod->elf);
	const char *link;
	uint32_t crc;

	if (build_id && find_by_build_id(s, mod, build_id))
		return;
	link = ht_elf_symbols_debuglink(mod->elf, &crc);
	if (link)
		find_by_debuglink(s, mod, path, link, crc);
}

/* ---- The vdso ---- */

static struct ht_elf_symbols *read_vdso(struct ht_symbolizer *s, const struct ht_mapping *m,
					char **source)
{
	size_t len = m->end - m->start;
	struct ht_elf_symbols *e;
	bool ours;
	void *buf = ht_target_copy_vdso(&s->target, m->start, len, &ours);

	if (!buf)
		return NULL;
	e = ht_elf_symbols_open_mem(buf, len, "[vdso]");
	free(buf);
	if (e && ours)
		*source = strdup("hybtrace's own vdso");
	else if (e && asprintf(source, "/proc/%d/mem", s->pid) < 0)
		*source = NULL;
	return e;
}

/* ---- Modules ---- */

static void module_release_file(struct module *mod)
{
	if (mod->held_fd >= 0)
		close(mod->held_fd);
	mod->held_fd = -1;
	free(mod->held_source);
	mod->held_source = NULL;
}

static void module_reset(struct module *mod)
{
	ht_elf_symbols_free(mod->elf);
	mod->elf = NULL;
	free(mod->source);
	mod->source = NULL;
	mod->state = MODULE_UNREAD;
	module_release_file(mod);
}

/* Open MOD's file now, while the target surely lives; read its symbols later, on first use. */
static void module_hold_file(struct ht_symbolizer *s, struct module *mod,
			     const struct ht_mapping *m)
{
	struct stat st;

	if (mod->is_vdso || mod->held_fd >= 0 || mod->state != MODULE_UNREAD)
		return;
	mod->held_fd = ht_target_open_mapping(&s->target, m, &mod->held_source, &st);
	if (mod->held_fd < 0) {
		note(s, "%s", ht_last_error());
		return;
	}
	mod->file_size = st.st_size;
	mod->file_mtime = st.st_mtim;
}

static void module_free(struct module *mod)
{
	if (!mod)
		return;
	module_reset(mod);
	free(mod->path);
	free(mod);
}

static struct ht_elf_symbols *read_module_file(struct ht_symbolizer *s, struct module *mod,
					       const struct ht_mapping *m, char **source)
{
	struct ht_elf_symbols *e;
	struct stat st;
	int fd;

	if (mod->held_fd >= 0) {
		/* The file held since the mapping appeared: the target may be gone by now. */
		fd = dup(mod->held_fd);
		*source = mod->held_source ? strdup(mod->held_source) : NULL;
		if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0 || !*source) {
			note(s, "%s: %s", mod->path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return NULL;
		}
	} else {
		fd = ht_target_open_mapping(&s->target, m, source, &st);
		if (fd < 0) {
			note(s, "%s", ht_last_error());
			return NULL;
		}
		mod->file_size = st.st_size;
		mod->file_mtime = st.st_mtim;
	}
	if (!looks_like_elf(fd)) {
		close(fd);
		return NULL;
	}
	e = ht_elf_symbols_open_fd(fd, *source);
	close(fd);
	if (!e)
		note(s, "%s", ht_last_error());
	return e;
}

/* Read MOD's symbols on first use, through mapping M. */
static void module_load(struct ht_symbolizer *s, struct module *mod, const struct ht_mapping *m)
{
	char *source = NULL;

	if (mod->state != MODULE_UNREAD)
		return;
	s->stats.elf_reads++;
	mod->state = MODULE_FAILED;
	if (mod->is_vdso) {
		mod->elf = read_vdso(s, m, &source);
		if (!mod->elf)
			note(s, "%s", ht_last_error());
	} else {
		mod->elf = read_module_file(s, mod, m, &source);
	}
	if (!mod->elf) {
		free(source);
		return;
	}
	mod->source = source;
	mod->state = MODULE_READ;
	/* Read: the symbols are ours now, the file is no longer needed. */
	module_release_file(mod);
	if (!mod->is_vdso && !(ht_elf_symbols_flags(mod->elf) & HT_ELF_HAS_SYMTAB))
		add_debug_symbols(s, mod, m->path);
}

/* Mappings of files (and the vdso) are modules; anonymous memory, [heap], [stack] are not. */
static int is_module_mapping(const struct ht_mapping *m)
{
	if (!strcmp(m->path, "[vdso]"))
		return 1;
	return m->path[0] == '/' && m->inode;
}

static int module_is(const struct module *mod, const struct ht_mapping *m)
{
	if (mod->is_vdso)
		return !strcmp(m->path, "[vdso]") && mod->vdso_size == m->end - m->start;
	return mod->inode == m->inode && mod->dev_major == m->dev_major &&
	       mod->dev_minor == m->dev_minor && !strcmp(mod->path, m->path);
}

static struct module *module_new(struct ht_symbolizer *s, const struct ht_mapping *m)
{
	struct module **mods = realloc(s->modules, (s->nmodules + 1) * sizeof(*mods));
	struct module *mod;

	if (!mods)
		return NULL;
	s->modules = mods;
	mod = calloc(1, sizeof(*mod));
	if (!mod)
		return NULL;
	mod->path = strdup(m->path);
	if (!mod->path) {
		free(mod);
		return NULL;
	}
	mod->held_fd = -1;
	mod->dev_major = m->dev_major;
	mod->dev_minor = m->dev_minor;
	mod->inode = m->inode;
	mod->is_vdso = !strcmp(m->path, "[vdso]");
	mod->vdso_size = m->end - m->start;
	s->modules[s->nmodules++] = mod;
	return mod;
}

/* A file rewritten in place keeps its inode: size and mtime tell. */
static int module_changed(struct ht_symbolizer *s, const struct module *mod,
			  const struct ht_mapping *m)
{
	struct stat st;

	if (mod->is_vdso || mod->state != MODULE_READ || ht_target_stat_mapping(&s->target, m, &st))
		return 0;
	return st.st_size != mod->file_size || st.st_mtim.tv_sec != mod->file_mtime.tv_sec ||
	       st.st_mtim.tv_nsec != mod->file_mtime.tv_nsec;
}

/* The module of mapping M, reused when it is the same file, else a new one. */
static struct module *module_for(struct ht_symbolizer *s, const struct ht_mapping *m,
				 struct module *prev)
{
	struct module *mod = NULL;

	/* A file's mappings come one after another. */
	if (prev && module_is(prev, m))
		return prev;
	for (size_t i = 0; i < s->nmodules && !mod; i++)
		if (module_is(s->modules[i], m))
			mod = s->modules[i];
	if (!mod)
		return module_new(s, m);
	if (!mod->used) {
		mod->used = 1;
		if (mod->state == MODULE_FAILED || module_changed(s, mod, m))
			module_reset(mod); /* changed, or worth another try */
	}
	return mod;
}

static void drop_unused_modules(struct ht_symbolizer *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nmodules; i++) {
		if (s->modules[i]->used)
			s->modules[n++] = s->modules[i];
		else
			module_free(s->modules[i]);
	}
	s->nmodules = n;
}

/* ---- The perf map ---- */

/* Load or reload the perf map when it changed; at most once per refresh. */
static void check_perf_map(struct ht_symbolizer *s)
{
	struct jit_map *j = &s->jit;
	char shown[128];
	struct stat st;
	size_t len;
	char *text;
	int fd;

	if (j->checked)
		return;
	j->checked = 1;
	fd = ht_target_open_perf_map(&s->target, shown, sizeof(shown), &st);
	if (fd < 0) {
		if (fd == -1)
			note(s, "%s", ht_last_error());
		goto drop;
	}
	if (j->loaded && st.st_size == j->size && st.st_mtim.tv_sec == j->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == j->mtime.tv_nsec) {
		close(fd);
		return;
	}
	text = ht_read_all(fd, MAX_PERF_MAP_BYTES, &len);
	close(fd);
	if (!text) {
		note(s, "perf map %s: unreadable or over %u MiB: ignored", shown,
		     MAX_PERF_MAP_BYTES >> 20);
		goto drop;
	}
	ht_perf_map_free(&j->map);
	j->loaded = !ht_perf_map_parse(text, len, &j->map);
	free(text);
	j->size = st.st_size;
	j->mtime = st.st_mtim;
	s->stats.perf_map_reads++;
	return;
drop:
	ht_perf_map_free(&j->map);
	j->loaded = 0;
}

/* ---- Lifecycle ---- */

int ht_symbolizer_refresh(struct ht_symbolizer *s)
{
	struct ht_maps maps;
	struct mapping_info *info;
	struct module *prev = NULL;

	if (ht_maps_read(s->pid, &maps))
		return -1;
	/* An exiting or exited target has no mappings left: keep what we knew of it. */
	if (!maps.count) {
		ht_maps_free(&maps);
		return ht_fail("process %d has no mappings left (it exited): keeping the last ones",
			       s->pid);
	}
	info = calloc(maps.count + 1, sizeof(*info));
	if (!info) {
		ht_maps_free(&maps);
		return ht_fail("out of memory");
	}
	/* Without its root, files open through map_files only. */
	if (ht_target_reopen_root(&s->target))
		note(s, "%s", ht_last_error());
	for (size_t i = 0; i < s->nmodules; i++)
		s->modules[i]->used = 0;
	for (size_t i = 0; i < maps.count; i++) {
		if (!is_module_mapping(&maps.v[i]))
			continue;
		prev = module_for(s, &maps.v[i], prev);
		if (!prev) {
			free(info);
			ht_maps_free(&maps);
			return ht_fail("out of memory");
		}
		prev->used = 1;
		module_hold_file(s, prev, &maps.v[i]);
		info[i].module = prev;
	}
	drop_unused_modules(s);
	ht_maps_free(&s->maps);
	free(s->info);
	s->maps = maps;
	s->info = info;
	s->jit.checked = 0;
	return 0;
}

struct ht_symbolizer *ht_symbolizer_new(int pid)
{
	struct ht_symbolizer *s = calloc(1, sizeof(*s));

	if (!s) {
		ht_fail("out of memory");
		return NULL;
	}
	s->pid = pid;
	ht_target_init(&s->target, pid);
	if (ht_symbolizer_refresh(s)) {
		ht_symbolizer_free(s);
		return NULL;
	}
	return s;
}

void ht_symbolizer_free(struct ht_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmodules; i++)
		module_free(s->modules[i]);
	free(s->modules);
	ht_maps_free(&s->maps);
	free(s->info);
	ht_perf_map_free(&s->jit.map);
	for (size_t i = 0; i < s->nnotes; i++)
		free(s->notes[i]);
	free(s->notes);
	ht_target_close(&s->target);
	free(s);
}

/* ---- Queries ---- */

/* Mapping I's module, read, with its bias known; NULL when it has no symbols. */
static struct module *mapping_symbols(struct ht_symbolizer *s, size_t i)
{
	struct mapping_info *info = &s->info[i];
	const struct ht_mapping *m = &s->maps.v[i];

	if (!info->module)
		return NULL;
	module_load(s, info->module, m);
	if (!info->module->elf)
		return NULL;
	if (!info->bias_state)
		info->bias_state = ht_elf_load_bias(info->module->elf, m->start, m->end, m->offset,
						    m->perms, &info->bias)
					   ? -1
					   : 1;
	return info->module;
}

static void symbolize_jit(struct ht_symbolizer *s, const struct ht_mapping *m, uint64_t addr,
			  struct ht_symbol *out)
{
	const struct ht_perf_map_entry *e;

	if (!ht_mapping_is_exec(m))
		return;
	check_perf_map(s);
	e = s->jit.loaded ? ht_perf_map_find(&s->jit.map, addr) : NULL;
	if (!e)
		return;
	out->function = e->name;
	out->function_offset = addr - e->start;
	out->module = "[jit]";
}

int ht_symbolize(struct ht_symbolizer *s, uint64_t addr, struct ht_symbol *out)
{
	const struct ht_mapping *m = ht_maps_find(&s->maps, addr);
	struct module *mod;
	const struct ht_elf_sym *sym;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!m)
		return -1;
	i = (size_t)(m - s->maps.v);
	out->executable = ht_mapping_is_exec(m);
	out->module = m->path[0] ? m->path : "[anon]";
	out->module_offset = addr - m->start;
	if (s->info[i].module && !s->info[i].module->is_vdso)
		out->module_offset += m->offset;
	mod = mapping_symbols(s, i);
	if (!mod) {
		symbolize_jit(s, m, addr, out);
		return 0;
	}
	out->build_id = ht_elf_symbols_build_id(mod->elf);
	/* Functions live in code; a data mapping's bias can be ambiguous (RELRO). */
	if (s->info[i].bias_state != 1 || !ht_mapping_is_exec(m))
		return 0;
	sym = ht_elf_symbols_find(mod->elf, addr - s->info[i].bias);
	if (sym) {
		out->function = sym->name;
		out->function_offset = addr - s->info[i].bias - sym->addr;
	}
	return 0;
}

const char *ht_symbol_format(const struct ht_symbol *sym, uint64_t addr, char *buf, size_t len)
{
	const char *base;

	if (sym->function) {
		snprintf(buf, len, "%s", sym->function);
	} else if (sym->module) {
		base = strrchr(sym->module, '/');
		snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : sym->module,
			 sym->module_offset);
	} else {
		snprintf(buf, len, "0x%" PRIx64, addr);
	}
	return buf;
}

const char *ht_symbolizer_source(struct ht_symbolizer *s, uint64_t addr)
{
	const struct ht_mapping *m = ht_maps_find(&s->maps, addr);
	struct module *mod = m ? mapping_symbols(s, (size_t)(m - s->maps.v)) : NULL;

	return mod ? mod->source : NULL;
}

/* Whether the first LEN bytes of PATH are WANT, all of it. */
static int equals_head(const char *path, size_t len, const char *want)
{
	return strlen(want) == len && !strncmp(path, want, len);
}

/* By path or basename, with or without the " (deleted)" of a replaced file. */
static int module_matches(const char *path, const char *want)
{
	const char *base = strrchr(path, '/');
	size_t len = strlen(path) - (ht_path_is_deleted(path) ? strlen(" (deleted)") : 0);

	if (!want || !strcmp(path, want) || (base && !strcmp(base + 1, want)))
		return 1;
	return equals_head(path, len, want) ||
	       (base && equals_head(base + 1, len - (size_t)(base + 1 - path), want));
}

/* The addresses of NAME that mapping I holds, counted in *FOUND, stored up to MAX. */
static int lookup_in_mapping(struct ht_symbolizer *s, size_t i, const char *name,
			     struct ht_symbol_address *out, size_t max, size_t *found)
{
	const struct ht_mapping *m = &s->maps.v[i];
	struct module *mod = ht_mapping_is_exec(m) ? mapping_symbols(s, i) : NULL;
	const struct ht_elf_sym **syms;
	size_t n;

	/* Functions live in code; a data mapping's bias can be ambiguous (RELRO). */
	if (!mod || s->info[i].bias_state != 1)
		return 0;
	n = ht_elf_symbols_lookup(mod->elf, name, NULL, 0);
	if (!n)
		return 0;
	syms = malloc(n * sizeof(*syms));
	if (!syms)
		return ht_fail("out of memory");
	ht_elf_symbols_lookup(mod->elf, name, syms, n);
	for (size_t k = 0; k < n; k++) {
		uint64_t addr = syms[k]->addr + s->info[i].bias;

		/* Each function lies in one mapping of its file: the one with its code. */
		if (addr < m->start || addr >= m->end)
			continue;
		if (*found < max)
			out[*found] = (struct ht_symbol_address){
				.addr = addr,
				.size = syms[k]->size,
				.module = m->path,
				.build_id = ht_elf_symbols_build_id(mod->elf),
			};
		(*found)++;
	}
	free(syms);
	return 0;
}

int ht_symbolizer_lookup(struct ht_symbolizer *s, const char *module, const char *name,
			 struct ht_symbol_address *out, size_t max, size_t *found)
{
	int module_seen = 0;

	*found = 0;
	for (size_t i = 0; i < s->maps.count; i++) {
		if (!s->info[i].module || !module_matches(s->maps.v[i].path, module))
			continue;
		module_seen = 1;
		if (lookup_in_mapping(s, i, name, out, max, found))
			return -1;
	}
	if (*found)
		return 0;
	if (module && !module_seen)
		return ht_fail("no module %s is mapped in process %d", module, s->pid);
	return ht_fail("no function %s in %s of process %d", name, module ? module : "the modules",
		       s->pid);
}

void ht_symbolizer_get_stats(const struct ht_symbolizer *s, struct ht_symbolizer_stats *out)
{
	*out = s->stats;
	out->modules = 0;
	for (size_t i = 0; i < s->nmodules; i++)
		out->modules += s->modules[i]->elf != NULL;
}
