// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbolizer of one target process. Its files are read through
 * target_files.c, as the target sees them. Per file (device, inode, size,
 * mtime) the symbol table is read once, on first use, and kept while the
 * file stays mapped; the tables live in a cache (elf_cache.c) that
 * symbolizers of other processes may share.
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
#include <sys/sysmacros.h>
#include <unistd.h>
#include "base/proc.h"
#include "symbols/elf_cache.h"
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

/*
 * One mapped file (or the vdso) as this process maps it; its symbols are
 * the cache's, shared with every process that maps the same file.
 */
struct module {
	char *path;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	uint64_t vdso_size; /* for "[vdso]", whose key is its size */
	int is_vdso;
	int used; /* mapped in the maps being built */
	struct ht_elf_file *file;
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
	struct ht_elf_cache *cache;
	int own_cache; /* made for this symbolizer alone */
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

/* A file's symbols being read, before the cache shares them. */
struct loading {
	struct ht_elf_symbols *elf;
	char *source;
};

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

/* One candidate, opened as FD (or not: -1, -2); returns 1 when its symbols were added to LD. */
static int add_debug_file(struct ht_symbolizer *s, struct loading *ld, int fd, const char *shown,
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
	if (ht_elf_symbols_merge(ld->elf, d)) {
		note(s, "%s", ht_last_error());
		return 0;
	}
	if (asprintf(&source, "%s (symbols from %s)", ld->source, shown) >= 0) {
		free(ld->source);
		ld->source = source;
	}
	return 1;
}

/* Try the file at PATH, in the target's root or on the host. */
static int try_debug_file(struct ht_symbolizer *s, struct loading *ld, const char *path,
			  int in_root, const struct debug_want *want)
{
	char shown[4400];
	int fd = ht_target_open_file(&s->target, path, in_root, shown, sizeof(shown));

	return add_debug_file(s, ld, fd, shown, want);
}

/* By build-id, in the target's root, then on the host. */
static int find_by_build_id(struct ht_symbolizer *s, struct loading *ld, const char *build_id)
{
	struct debug_want want = {.build_id = build_id};
	char shown[4400];
	int fd;

	for (int place = 0; place < HT_DEBUG_PLACES; place++) {
		fd = ht_target_open_build_id_debug(&s->target, build_id, place, shown,
						   sizeof(shown));
		if (add_debug_file(s, ld, fd, shown, &want))
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
static int find_by_debuglink(struct ht_symbolizer *s, struct loading *ld, const char *path,
			     const char *name, uint32_t crc)
{
	struct debug_want want = {
		.build_id = ht_elf_symbols_build_id(ld->elf), .check_crc = 1, .crc = crc};
	const char *slash = strrchr(path, '/');
	int dir_len = slash ? (int)(slash - path) : 0;
	char candidate[4400];

	if (!is_plain_file_name(name) || !slash || ht_path_is_deleted(path))
		return 0;
	snprintf(candidate, sizeof(candidate), "%.*s/%s", dir_len, path, name);
	if (strcmp(candidate, path) && try_debug_file(s, ld, candidate, 1, &want))
		return 1;
	snprintf(candidate, sizeof(candidate), "%.*s/.debug/%s", dir_len, path, name);
	if (try_debug_file(s, ld, candidate, 1, &want))
		return 1;
	snprintf(candidate, sizeof(candidate), "/usr/lib/debug%.*s/%s", dir_len, path, name);
	return try_debug_file(s, ld, candidate, 1, &want) ||
	       (!s->target.same_root && try_debug_file(s, ld, candidate, 0, &want));
}

/* A file without .symtab: look for its separate debug file. */
static void add_debug_symbols(struct ht_symbolizer *s, struct loading *ld, const char *path)
{
	const char *build_id = ht_elf_symbols_build_id(ld->elf);
	const char *link;
	uint32_t crc;

	if (build_id && find_by_build_id(s, ld, build_id))
		return;
	link = ht_elf_symbols_debuglink(ld->elf, &crc);
	if (link)
		find_by_debuglink(s, ld, path, link, crc);
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

/* ---- Modules: this process's view of the files the cache shares ---- */

/* MOD's symbols, once read; NULL before, or when they could not be. */
static struct ht_elf_symbols *module_elf(const struct module *mod)
{
	const struct ht_elf_file *f = mod->file;

	return f && f->state == HT_ELF_FILE_READ ? f->table->elf : NULL;
}

static void module_free(struct ht_symbolizer *s, struct module *mod)
{
	if (!mod)
		return;
	ht_elf_cache_put_file(s->cache, mod->file);
	free(mod->path);
	free(mod);
}

/* The file behind M as the cache knows files: its maps' device and inode, ST's size and mtime. */
static struct ht_elf_file_id file_id(const struct ht_mapping *m, const struct stat *st)
{
	return (struct ht_elf_file_id){
		.dev = makedev(m->dev_major, m->dev_minor),
		.inode = m->inode,
		.size = st ? (int64_t)st->st_size : -1,
		.mtime_ns =
			st ? (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec : 0,
	};
}

/* Keep FD (SOURCE, its path) in F until its symbols are read; else close it. */
static void hold_in(struct ht_elf_file *f, int fd, char *source)
{
	if (fd >= 0 && f->state == HT_ELF_FILE_UNREAD && f->held_fd < 0 && source) {
		f->held_fd = fd;
		f->held_source = source;
		return;
	}
	if (fd >= 0)
		close(fd);
	free(source);
}

/*
 * The shared file of MOD, mapped by M: the one the cache knows, else a new
 * one, which holds the file open now, while the target surely lives, so
 * that its symbols can be read later even if it has exited by then.
 */
static struct ht_elf_file *attach_file(struct ht_symbolizer *s, const struct module *mod,
				       const struct ht_mapping *m)
{
	struct ht_elf_file_id id = {.vdso_bytes = mod->vdso_size};
	struct ht_elf_file *f;
	char *source = NULL;
	struct stat st;
	int fd = -1;

	if (!mod->is_vdso) {
		fd = ht_target_open_mapping(&s->target, m, &source, &st);
		if (fd < 0)
			note(s, "%s", ht_last_error());
		id = file_id(m, fd >= 0 ? &st : NULL);
	}
	f = ht_elf_cache_find_file(s->cache, &id);
	if (f && f->state == HT_ELF_FILE_READ)
		s->stats.tables_shared++;
	if (!f)
		f = ht_elf_cache_add_file(s->cache, &id);
	if (f)
		hold_in(f, fd, source);
	else if (fd >= 0)
		close(fd);
	if (!f)
		free(source);
	return f;
}

/* A file not read yet and not held (it could not be opened before): try again now. */
static void hold_again(struct ht_symbolizer *s, struct module *mod, const struct ht_mapping *m)
{
	struct ht_elf_file *f = mod->file;
	char *source = NULL;
	struct stat st;
	int fd;

	if (mod->is_vdso || f->state != HT_ELF_FILE_UNREAD || f->held_fd >= 0)
		return;
	fd = ht_target_open_mapping(&s->target, m, &source, &st);
	if (fd < 0) {
		note(s, "%s", ht_last_error());
		return;
	}
	hold_in(f, fd, source);
}

/* The file of MOD open for reading: the one held, else opened through mapping M. */
static int open_module_file(struct ht_symbolizer *s, struct module *mod, const struct ht_mapping *m,
			    char **source)
{
	struct ht_elf_file *f = mod->file;
	struct stat st;
	int fd;

	if (f->held_fd >= 0) {
		/* The file held since the mapping appeared: the target may be gone by now. */
		fd = dup(f->held_fd);
		*source = f->held_source ? strdup(f->held_source) : NULL;
		if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0 || !*source) {
			note(s, "%s: %s", mod->path, strerror(errno));
			if (fd >= 0)
				close(fd);
			free(*source);
			*source = NULL;
			return -1;
		}
		return fd;
	}
	fd = ht_target_open_mapping(&s->target, m, source, &st);
	if (fd < 0)
		note(s, "%s", ht_last_error());
	return fd;
}

/*
 * The table of FD's file (SOURCE, mapped at M): the cache's when a table
 * with its build-id (or, without one, of the same file) was read already,
 * else read now, with its debug file's symbols. NULL when it has none.
 */
static struct ht_elf_table *read_module_file(struct ht_symbolizer *s, struct module *mod,
					     const struct ht_mapping *m, int fd, char *source)
{
	char build_id[160], key[256];
	struct ht_elf_table *t;
	struct loading ld;
	int has_id;

	if (!looks_like_elf(fd))
		return NULL;
	has_id = ht_elf_build_id_fd(fd, source, build_id, sizeof(build_id));
	if (has_id < 0) {
		note(s, "%s", ht_last_error());
		return NULL;
	}
	ht_elf_table_key(has_id ? build_id : NULL, &mod->file->id, key, sizeof(key));
	t = ht_elf_cache_find_table(s->cache, key);
	if (t) {
		s->stats.tables_shared++;
		return t;
	}
	s->stats.elf_reads++;
	ld = (struct loading){.elf = ht_elf_symbols_open_fd(fd, source), .source = strdup(source)};
	if (!ld.elf || !ld.source) {
		note(s, "%s", ld.elf ? "out of memory" : ht_last_error());
		ht_elf_symbols_free(ld.elf);
		free(ld.source);
		return NULL;
	}
	if (!(ht_elf_symbols_flags(ld.elf) & HT_ELF_HAS_SYMTAB))
		add_debug_symbols(s, &ld, m->path);
	t = ht_elf_cache_add_table(s->cache, key, ld.elf, ld.source);
	free(ld.source);
	return t;
}

/* The vdso's table: the kernel maps one image into every process of an ABI. */
static struct ht_elf_table *read_module_vdso(struct ht_symbolizer *s, struct module *mod,
					     const struct ht_mapping *m)
{
	struct ht_elf_symbols *elf;
	struct ht_elf_table *t;
	char *source = NULL;
	char key[256];

	s->stats.elf_reads++;
	elf = read_vdso(s, m, &source);
	if (!elf) {
		note(s, "%s", ht_last_error());
		return NULL;
	}
	ht_elf_table_key(ht_elf_symbols_build_id(elf), &mod->file->id, key, sizeof(key));
	t = ht_elf_cache_add_table(s->cache, key, elf, source);
	free(source);
	return t;
}

/* Read MOD's symbols on first use, through mapping M. */
static void module_load(struct ht_symbolizer *s, struct module *mod, const struct ht_mapping *m)
{
	struct ht_elf_file *f = mod->file;
	struct ht_elf_table *t = NULL;
	char *source = NULL;
	int fd;

	if (!f || f->state != HT_ELF_FILE_UNREAD)
		return;
	f->state = HT_ELF_FILE_FAILED;
	if (mod->is_vdso) {
		t = read_module_vdso(s, mod, m);
	} else {
		fd = open_module_file(s, mod, m, &source);
		if (fd >= 0) {
			t = read_module_file(s, mod, m, fd, source);
			close(fd);
		}
		free(source);
	}
	/* Read: the symbols are ours now, the file is no longer needed. */
	if (t)
		ht_elf_file_set_table(f, t);
	else
		ht_elf_file_release(f);
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
	mod->dev_major = m->dev_major;
	mod->dev_minor = m->dev_minor;
	mod->inode = m->inode;
	mod->is_vdso = !strcmp(m->path, "[vdso]");
	mod->vdso_size = m->end - m->start;
	mod->file = attach_file(s, mod, m);
	if (!mod->file) {
		free(mod->path);
		free(mod);
		return NULL;
	}
	s->modules[s->nmodules++] = mod;
	return mod;
}

/* A file rewritten in place keeps its inode: size and mtime tell. */
static int module_changed(struct ht_symbolizer *s, const struct module *mod,
			  const struct ht_mapping *m)
{
	const struct ht_elf_file *f = mod->file;
	struct ht_elf_file_id now;
	struct stat st;

	if (mod->is_vdso || f->state != HT_ELF_FILE_READ ||
	    ht_target_stat_mapping(&s->target, m, &st))
		return 0;
	now = file_id(m, &st);
	return now.size != f->id.size || now.mtime_ns != f->id.mtime_ns;
}

/* The module of mapping M, reused when it is the same file, else a new one. */
static struct module *module_for(struct ht_symbolizer *s, const struct ht_mapping *m,
				 struct module *prev)
{
	struct module *mod = NULL;
	struct ht_elf_file *f;

	/* A file's mappings come one after another. */
	if (prev && module_is(prev, m))
		return prev;
	for (size_t i = 0; i < s->nmodules && !mod; i++)
		if (module_is(s->modules[i], m))
			mod = s->modules[i];
	if (!mod)
		return module_new(s, m);
	if (mod->used)
		return mod;
	mod->used = 1;
	/* Worth another try; for every process that maps it, as it is one file. */
	if (mod->file->state == HT_ELF_FILE_FAILED)
		mod->file->state = HT_ELF_FILE_UNREAD;
	if (module_changed(s, mod, m)) {
		f = attach_file(s, mod, m);
		if (!f)
			return NULL;
		ht_elf_cache_put_file(s->cache, mod->file);
		mod->file = f;
	}
	hold_again(s, mod, m);
	return mod;
}

static void drop_unused_modules(struct ht_symbolizer *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nmodules; i++) {
		if (s->modules[i]->used)
			s->modules[n++] = s->modules[i];
		else
			module_free(s, s->modules[i]);
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

struct ht_symbolizer *ht_symbolizer_new_shared(int pid, struct ht_elf_cache *cache)
{
	struct ht_symbolizer *s = calloc(1, sizeof(*s));

	if (!s) {
		ht_fail("out of memory");
		return NULL;
	}
	s->pid = pid;
	s->cache = cache;
	if (!cache) {
		s->cache = ht_elf_cache_new();
		s->own_cache = 1;
		if (!s->cache) {
			free(s);
			return NULL;
		}
	}
	ht_target_init(&s->target, pid);
	if (ht_symbolizer_refresh(s)) {
		ht_symbolizer_free(s);
		return NULL;
	}
	return s;
}

struct ht_symbolizer *ht_symbolizer_new(int pid)
{
	return ht_symbolizer_new_shared(pid, NULL);
}

void ht_symbolizer_free(struct ht_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmodules; i++)
		module_free(s, s->modules[i]);
	free(s->modules);
	ht_maps_free(&s->maps);
	free(s->info);
	ht_perf_map_free(&s->jit.map);
	for (size_t i = 0; i < s->nnotes; i++)
		free(s->notes[i]);
	free(s->notes);
	ht_target_close(&s->target);
	if (s->own_cache)
		ht_elf_cache_free(s->cache);
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
	if (!module_elf(info->module))
		return NULL;
	if (!info->bias_state)
		info->bias_state = ht_elf_load_bias(module_elf(info->module), m->start, m->end,
						    m->offset, m->perms, &info->bias)
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
	out->build_id = ht_elf_symbols_build_id(module_elf(mod));
	/* Functions live in code; a data mapping's bias can be ambiguous (RELRO). */
	if (s->info[i].bias_state != 1 || !ht_mapping_is_exec(m))
		return 0;
	sym = ht_elf_symbols_find(module_elf(mod), addr - s->info[i].bias);
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

	return mod ? mod->file->table->source : NULL;
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
	n = ht_elf_symbols_lookup(module_elf(mod), name, NULL, 0);
	if (!n)
		return 0;
	syms = malloc(n * sizeof(*syms));
	if (!syms)
		return ht_fail("out of memory");
	ht_elf_symbols_lookup(module_elf(mod), name, syms, n);
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
				.build_id = ht_elf_symbols_build_id(module_elf(mod)),
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
		out->modules += module_elf(s->modules[i]) != NULL;
}
