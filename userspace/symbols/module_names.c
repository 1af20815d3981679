// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "base/proc.h"
#include "symbols/elf_symbols.h"
#include "symbols/module_names.h"

/* Beyond these an ld.so.conf is not one a distribution wrote: the rest is ignored. */
#define MAX_LIB_DIRS	  64
#define MAX_CONF_BYTES	  (64 * 1024)
#define MAX_CONF_FILES	  64
#define MAX_INCLUDE_DEPTH 4
#define SONAME_MAX	  256

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__i386__)
#define MULTIARCH "i386-linux-gnu"
#endif

/* Where ld.so looks when nothing else says: the trusted directories, and Debian's multiarch. */
static const char *const standard_lib_dirs[] = {
#ifdef MULTIARCH
	"/lib/" MULTIARCH,
	"/usr/lib/" MULTIARCH,
#endif
	"/lib",
	"/usr/lib",
	"/lib64",
	"/usr/lib64",
	"/usr/local/lib",
};

struct file_key {
	dev_t dev;
	ino_t ino;
};

struct module_facts {
	signed char key_state;	  /* 0: not read; 1: KEY holds */
	signed char soname_state; /* 0: not read; 1: SONAME holds; -1: none */
	struct file_key key;
	char soname[SONAME_MAX];
};

void ht_module_names_init(struct ht_module_names *mn, const struct ht_target *tg,
			  const struct ht_maps *maps)
{
	memset(mn, 0, sizeof(*mn));
	mn->tg = tg;
	mn->maps = maps;
	mn->facts = calloc(maps->count ? maps->count : 1, sizeof(*mn->facts));
}

static void forget_name(struct ht_module_names *mn)
{
	free(mn->name);
	free(mn->keys);
	free(mn->verdict);
	mn->name = NULL;
	mn->keys = NULL;
	mn->verdict = NULL;
	mn->nkeys = 0;
	mn->keys_read = 0;
	mn->named_plainly = 0;
}

void ht_module_names_free(struct ht_module_names *mn)
{
	forget_name(mn);
	for (size_t i = 0; i < mn->nlib_dirs; i++)
		free(mn->lib_dirs[i]);
	free(mn->lib_dirs);
	free(mn->facts);
	memset(mn, 0, sizeof(*mn));
}

/* ---- What each mapped file is ---- */

static int is_file_mapping(const struct ht_mapping *m)
{
	return m->path[0] == '/' && m->inode;
}

/* The length of M's path without the " (deleted)" of a replaced file. */
static size_t path_len(const struct ht_mapping *m)
{
	return strlen(m->path) - (ht_path_is_deleted(m->path) ? strlen(" (deleted)") : 0);
}

static int same_file(const struct ht_mapping *a, const struct ht_mapping *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
}

/* Facts already read for another mapping of I's file, or I's own. */
static struct module_facts *facts_of(struct ht_module_names *mn, size_t i)
{
	struct module_facts *f = &mn->facts[i];

	if (f->key_state || f->soname_state)
		return f;
	for (size_t k = 0; k < mn->maps->count; k++) {
		if (k != i && (mn->facts[k].key_state || mn->facts[k].soname_state) &&
		    same_file(&mn->maps->v[k], &mn->maps->v[i])) {
			*f = mn->facts[k];
			break;
		}
	}
	return f;
}

/*
 * The mapped file's device and inode as a path lookup sees them: through
 * map_files (the maps' own numbers can differ, btrfs subvolumes), else the
 * maps' numbers.
 */
static const struct file_key *mapping_key(struct ht_module_names *mn, size_t i)
{
	struct module_facts *f = facts_of(mn, i);
	const struct ht_mapping *m = &mn->maps->v[i];
	struct stat st;

	if (!f->key_state) {
		f->key_state = 1;
		if (!ht_target_stat_mapping(mn->tg, m, &st)) {
			f->key.dev = st.st_dev;
			f->key.ino = st.st_ino;
		} else {
			f->key.dev = makedev(m->dev_major, m->dev_minor);
			f->key.ino = (ino_t)m->inode;
		}
	}
	return &f->key;
}

static const char *mapping_soname(struct ht_module_names *mn, size_t i)
{
	struct module_facts *f = facts_of(mn, i);
	char *source = NULL;
	struct stat st;
	int fd;

	if (!f->soname_state) {
		f->soname_state = -1;
		fd = ht_target_open_mapping(mn->tg, &mn->maps->v[i], &source, &st);
		free(source);
		if (fd >= 0) {
			if (ht_elf_soname(fd, mn->maps->v[i].path, f->soname, sizeof(f->soname)) ==
			    1)
				f->soname_state = 1;
			close(fd);
		}
	}
	return f->soname_state > 0 ? f->soname : NULL;
}

/* ---- The target's library directories ---- */

static void add_lib_dir(struct ht_module_names *mn, const char *dir, size_t len)
{
	char **v;

	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (!len || dir[0] != '/' || len >= PATH_MAX || mn->nlib_dirs >= MAX_LIB_DIRS)
		return;
	for (size_t i = 0; i < mn->nlib_dirs; i++)
		if (strlen(mn->lib_dirs[i]) == len && !strncmp(mn->lib_dirs[i], dir, len))
			return;
	v = realloc(mn->lib_dirs, (mn->nlib_dirs + 1) * sizeof(*v));
	if (!v)
		return;
	mn->lib_dirs = v;
	v[mn->nlib_dirs] = strndup(dir, len);
	if (v[mn->nlib_dirs])
		mn->nlib_dirs++;
}

static void read_ld_conf(struct ht_module_names *mn, const char *path, int depth, int *files);

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * "include PATTERN" of ld.so.conf, relative to the including file's
 * directory. Wildcards only in its last component, as every distribution
 * writes it (ld.so.conf.d's *.conf); files in name order, as glob gives them.
 */
static void include_conf(struct ht_module_names *mn, const char *from, const char *pattern,
			 int depth, int *files)
{
	char full[PATH_MAX], dir[PATH_MAX], *names[MAX_CONF_FILES];
	const char *slash, *glob;
	size_t n = 0;
	struct dirent *de;
	DIR *d;
	int fd, at;

	if (pattern[0] == '/')
		at = snprintf(full, sizeof(full), "%s", pattern);
	else
		at = snprintf(full, sizeof(full), "%.*s/%s", (int)(strrchr(from, '/') - from), from,
			      pattern);
	if (at < 0 || (size_t)at >= sizeof(full))
		return;
	slash = strrchr(full, '/');
	glob = slash + 1;
	snprintf(dir, sizeof(dir), "%.*s", slash == full ? 1 : (int)(slash - full), full);
	if (strpbrk(dir, "*?["))
		return;
	if (!strpbrk(glob, "*?[")) {
		read_ld_conf(mn, full, depth, files);
		return;
	}
	fd = ht_target_open_dir(mn->tg, dir);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (n < MAX_CONF_FILES && (de = readdir(d)))
		if (!fnmatch(glob, de->d_name, FNM_PERIOD) &&
		    (names[n] = strdup(de->d_name)) != NULL)
			n++;
	closedir(d);
	qsort(names, n, sizeof(names[0]), by_name);
	for (size_t i = 0; i < n; i++) {
		int at = snprintf(full, sizeof(full), "%s/%s", strcmp(dir, "/") ? dir : "",
				  names[i]);

		if (at > 0 && (size_t)at < sizeof(full))
			read_ld_conf(mn, full, depth, files);
		free(names[i]);
	}
}

/* The directories of ld.so.conf file PATH (in the target's root), one a line. */
static void read_ld_conf(struct ht_module_names *mn, const char *path, int depth, int *files)
{
	char shown[PATH_MAX + 64], *text, *line, *next;
	size_t len;
	int fd;

	if (depth > MAX_INCLUDE_DEPTH || ++*files > MAX_CONF_FILES)
		return;
	fd = ht_target_open_file(mn->tg, path, 1, shown, sizeof(shown));
	if (fd < 0)
		return;
	text = ht_read_all(fd, MAX_CONF_BYTES, &len);
	close(fd);
	if (!text)
		return;
	/* ht_read_all leaves no terminator: the text ends at its last full line. */
	while (len && text[len - 1] != '\n')
		len--;
	for (line = text; line < text + len; line = next + 1) {
		char *word, *end;

		next = memchr(line, '\n', (size_t)(text + len - line));
		*next = 0;
		if ((end = strchr(line, '#')))
			*end = 0;
		for (word = line; isspace((unsigned char)*word); word++)
			;
		if (!strncmp(word, "include", 7) && isspace((unsigned char)word[7])) {
			for (word += 8;; word = end) {
				while (isspace((unsigned char)*word))
					word++;
				if (!*word)
					break;
				for (end = word; *end && !isspace((unsigned char)*end); end++)
					;
				if (*end)
					*end++ = 0;
				include_conf(mn, path, word, depth + 1, files);
			}
			continue;
		}
		/* A directory, perhaps with an old "=TYPE" or separators after it. */
		add_lib_dir(mn, word, strcspn(word, " \t\r:,="));
	}
	free(text);
}

static void read_lib_dirs(struct ht_module_names *mn)
{
	int files = 0;

	mn->lib_dirs_read = 1;
	for (size_t i = 0; i < sizeof(standard_lib_dirs) / sizeof(standard_lib_dirs[0]); i++)
		add_lib_dir(mn, standard_lib_dirs[i], strlen(standard_lib_dirs[i]));
	if (mn->tg->root_fd >= 0)
		read_ld_conf(mn, "/etc/ld.so.conf", 0, &files);
}

/* ---- Names ---- */

static void add_key(struct ht_module_names *mn, const struct stat *st)
{
	struct file_key *k;

	if (!S_ISREG(st->st_mode))
		return;
	for (size_t i = 0; i < mn->nkeys; i++)
		if (mn->keys[i].dev == st->st_dev && mn->keys[i].ino == st->st_ino)
			return;
	k = realloc(mn->keys, (mn->nkeys + 1) * sizeof(*k));
	if (!k)
		return;
	mn->keys = k;
	k[mn->nkeys++] = (struct file_key){.dev = st->st_dev, .ino = st->st_ino};
}

/* Whether DIR/NAME, inside the target's root, is the file KEY. */
static int names_file(struct ht_module_names *mn, const char *dir, size_t dir_len, const char *name,
		      const struct file_key *key)
{
	char path[PATH_MAX];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%.*s/%s", (int)dir_len, dir, name);

	if (n < 0 || (size_t)n >= sizeof(path) || ht_target_stat_file(mn->tg, path, &st))
		return 0;
	return S_ISREG(st.st_mode) && st.st_dev == key->dev && st.st_ino == key->ino;
}

/* The files NAME resolves to: itself if absolute, else in each library directory. */
static void read_keys(struct ht_module_names *mn)
{
	struct stat st;

	mn->keys_read = 1;
	if (mn->tg->root_fd < 0)
		return;
	if (mn->name[0] == '/') {
		if (!ht_target_stat_file(mn->tg, mn->name, &st))
			add_key(mn, &st);
		return;
	}
	if (!mn->lib_dirs_read)
		read_lib_dirs(mn);
	for (size_t i = 0; i < mn->nlib_dirs; i++) {
		char path[PATH_MAX];
		int n = snprintf(path, sizeof(path), "%s/%s", mn->lib_dirs[i], mn->name);

		if (n > 0 && (size_t)n < sizeof(path) && !ht_target_stat_file(mn->tg, path, &st))
			add_key(mn, &st);
	}
}

static int key_listed(const struct ht_module_names *mn, const struct file_key *key)
{
	for (size_t i = 0; i < mn->nkeys; i++)
		if (mn->keys[i].dev == key->dev && mn->keys[i].ino == key->ino)
			return 1;
	return 0;
}

/* Where M's file name starts: every file mapping's path is absolute. */
static size_t base_at(const struct ht_mapping *m)
{
	return (size_t)((const char *)memrchr(m->path, '/', path_len(m)) - m->path) + 1;
}

/* Whether NAME is M's path (when absolute) or its file name. */
static int named_plainly(const struct ht_mapping *m, const char *name)
{
	size_t len = path_len(m), base = base_at(m);

	if (name[0] == '/')
		return strlen(name) == len && !strncmp(m->path, name, len);
	return strlen(name) == len - base && !strncmp(m->path + base, name, len - base);
}

static int decide(struct ht_module_names *mn, size_t i)
{
	const struct ht_mapping *m = &mn->maps->v[i];
	const char *name = mn->name, *soname;
	size_t base = base_at(m);
	const struct file_key *key;

	if (named_plainly(m, name))
		return 1;
	if (mn->named_plainly || !mn->facts)
		return 0;
	if (name[0] != '/') {
		soname = mapping_soname(mn, i);
		if (soname && !strcmp(soname, name))
			return 1;
	}
	if (!mn->keys_read)
		read_keys(mn);
	key = mapping_key(mn, i);
	if (key_listed(mn, key))
		return 1;
	/* A symlink beside the file, wherever that is: libz.so.1 -> libz.so.1.2.13. */
	return name[0] != '/' && mn->tg->root_fd >= 0 &&
	       names_file(mn, m->path, base - 1, name, key);
}

int ht_module_names_match(struct ht_module_names *mn, size_t i, const char *name)
{
	const char *slash;
	int v;

	if (i >= mn->maps->count || !is_file_mapping(&mn->maps->v[i]) || !*name)
		return 0;
	/* "./feed" or "build/libx.so": by its file name, as the target's cwd is not ours. */
	slash = name[0] == '/' ? NULL : strrchr(name, '/');
	if (slash)
		name = slash + 1;
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (!mn->name || strcmp(mn->name, name)) {
		forget_name(mn);
		mn->name = strdup(name);
		if (!mn->name)
			return 0;
		mn->verdict = malloc(mn->maps->count);
		if (mn->verdict)
			memset(mn->verdict, -1, mn->maps->count);
		for (size_t k = 0; k < mn->maps->count && !mn->named_plainly; k++)
			mn->named_plainly = ht_mapping_is_exec(&mn->maps->v[k]) &&
					    is_file_mapping(&mn->maps->v[k]) &&
					    named_plainly(&mn->maps->v[k], mn->name);
	}
	if (mn->verdict && mn->verdict[i] >= 0)
		return mn->verdict[i];
	v = decide(mn, i);
	if (mn->verdict)
		mn->verdict[i] = (signed char)v;
	return v;
}
