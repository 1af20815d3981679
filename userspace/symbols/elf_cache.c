// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Shared ELF symbol tables: two small hash tables (files by identity, tables
 * by key) with chains. A session holds a few hundred distinct files at most.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "symbols/elf_cache.h"
#include "symbols/elf_symbols.h"

#define BUCKETS 256

struct ht_elf_cache {
	struct ht_elf_file *files[BUCKETS];
	struct ht_elf_table *tables[BUCKETS];
	/* Files of unknown identity and tables without a key: found by no one, freed all the same.
	 */
	struct ht_elf_file *unindexed_files;
	struct ht_elf_table *unindexed_tables;
	struct ht_elf_cache_stats stats;
};

static unsigned int mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (unsigned int)(h % BUCKETS);
}

static unsigned int file_bucket(const struct ht_elf_file_id *id)
{
	return mix(id->dev * 31 + id->inode * 131 + (uint64_t)id->size * 7 +
		   (uint64_t)id->mtime_ns + id->vdso_bytes);
}

static unsigned int key_bucket(const char *key)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 1099511628211ULL;
	return mix(h);
}

static bool same_id(const struct ht_elf_file_id *a, const struct ht_elf_file_id *b)
{
	return a->dev == b->dev && a->inode == b->inode && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->vdso_bytes == b->vdso_bytes;
}

struct ht_elf_cache *ht_elf_cache_new(void)
{
	struct ht_elf_cache *c = calloc(1, sizeof(*c));

	if (!c)
		ht_fail("out of memory");
	return c;
}

static void table_free(struct ht_elf_table *t)
{
	ht_elf_symbols_free(t->elf);
	free(t->source);
	free(t->key);
	free(t);
}

void ht_elf_file_release(struct ht_elf_file *f)
{
	if (f->held_fd >= 0)
		close(f->held_fd);
	f->held_fd = -1;
	free(f->held_source);
	f->held_source = NULL;
}

static void file_free(struct ht_elf_cache *c, struct ht_elf_file *f)
{
	ht_elf_file_release(f);
	if (f->table)
		ht_elf_cache_put_table(c, f->table);
	free(f);
}

void ht_elf_cache_free(struct ht_elf_cache *c)
{
	if (!c)
		return;
	/* Files first: they drop their tables' references. */
	for (unsigned int b = 0; b <= BUCKETS; b++) {
		struct ht_elf_file **head = b < BUCKETS ? &c->files[b] : &c->unindexed_files;

		while (*head) {
			struct ht_elf_file *f = *head;

			*head = f->next;
			f->refs = 0;
			file_free(c, f);
		}
	}
	for (unsigned int b = 0; b <= BUCKETS; b++) {
		struct ht_elf_table **head = b < BUCKETS ? &c->tables[b] : &c->unindexed_tables;

		while (*head) {
			struct ht_elf_table *t = *head;

			*head = t->next;
			table_free(t);
		}
	}
	free(c);
}

static struct ht_elf_file **file_head(struct ht_elf_cache *c, const struct ht_elf_file *f)
{
	return f->indexed ? &c->files[file_bucket(&f->id)] : &c->unindexed_files;
}

struct ht_elf_file *ht_elf_cache_find_file(struct ht_elf_cache *c, const struct ht_elf_file_id *id)
{
	if (id->size < 0)
		return NULL;
	for (struct ht_elf_file *f = c->files[file_bucket(id)]; f; f = f->next) {
		if (same_id(&f->id, id)) {
			f->refs++;
			c->stats.files_shared++;
			return f;
		}
	}
	return NULL;
}

struct ht_elf_file *ht_elf_cache_add_file(struct ht_elf_cache *c, const struct ht_elf_file_id *id)
{
	struct ht_elf_file *f = calloc(1, sizeof(*f)), **head;

	if (!f) {
		ht_fail("out of memory");
		return NULL;
	}
	f->id = *id;
	f->held_fd = -1;
	f->refs = 1;
	f->indexed = id->size >= 0;
	head = file_head(c, f);
	f->next = *head;
	*head = f;
	c->stats.files++;
	return f;
}

void ht_elf_cache_put_file(struct ht_elf_cache *c, struct ht_elf_file *f)
{
	struct ht_elf_file **p;

	if (!f || --f->refs)
		return;
	for (p = file_head(c, f); *p && *p != f; p = &(*p)->next)
		;
	if (*p)
		*p = f->next;
	c->stats.files--;
	file_free(c, f);
}

const char *ht_elf_table_key(const char *build_id, const struct ht_elf_file_id *id, char *buf,
			     size_t len)
{
	if (build_id && *build_id)
		snprintf(buf, len, "build-id %s", build_id);
	else if (id->size >= 0)
		snprintf(buf, len, "file %" PRIu64 ":%" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64,
			 id->dev, id->inode, id->size, id->mtime_ns, id->vdso_bytes);
	else if (len)
		buf[0] = '\0';
	return buf;
}

static struct ht_elf_table **table_head(struct ht_elf_cache *c, const char *key)
{
	return *key ? &c->tables[key_bucket(key)] : &c->unindexed_tables;
}

struct ht_elf_table *ht_elf_cache_find_table(struct ht_elf_cache *c, const char *key)
{
	if (!*key)
		return NULL;
	for (struct ht_elf_table *t = *table_head(c, key); t; t = t->next) {
		if (!strcmp(t->key, key)) {
			t->refs++;
			c->stats.tables_shared++;
			return t;
		}
	}
	return NULL;
}

struct ht_elf_table *ht_elf_cache_add_table(struct ht_elf_cache *c, const char *key,
					    struct ht_elf_symbols *elf, const char *source)
{
	struct ht_elf_table *t = ht_elf_cache_find_table(c, key), **head;

	if (t) {
		ht_elf_symbols_free(elf);
		return t;
	}
	t = calloc(1, sizeof(*t));
	if (t) {
		t->key = strdup(key);
		t->source = source ? strdup(source) : NULL;
	}
	if (!t || !t->key || (source && !t->source)) {
		if (t) {
			free(t->key);
			free(t->source);
		}
		free(t);
		ht_elf_symbols_free(elf);
		ht_fail("out of memory");
		return NULL;
	}
	t->elf = elf;
	t->refs = 1;
	head = table_head(c, key);
	t->next = *head;
	*head = t;
	c->stats.tables++;
	c->stats.tables_read++;
	return t;
}

void ht_elf_cache_put_table(struct ht_elf_cache *c, struct ht_elf_table *t)
{
	struct ht_elf_table **p;

	if (!t || --t->refs)
		return;
	for (p = table_head(c, t->key); *p && *p != t; p = &(*p)->next)
		;
	if (*p)
		*p = t->next;
	c->stats.tables--;
	table_free(t);
}

void ht_elf_file_set_table(struct ht_elf_file *f, struct ht_elf_table *t)
{
	f->table = t;
	f->state = HT_ELF_FILE_READ;
	ht_elf_file_release(f);
}

void ht_elf_cache_get_stats(const struct ht_elf_cache *c, struct ht_elf_cache_stats *out)
{
	*out = c->stats;
	out->held_fds = 0;
	for (unsigned int b = 0; b <= BUCKETS; b++)
		for (const struct ht_elf_file *f = b < BUCKETS ? c->files[b] : c->unindexed_files;
		     f; f = f->next)
			out->held_fds += f->held_fd >= 0;
}
