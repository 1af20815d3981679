// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The shared symbol-table cache alone: files found by their identity as
 * mapped (device, inode, size, mtime) and never by anything less, tables by
 * build-id or else by that identity, references counted so that the last
 * user frees, and a file held open until its symbols are read. The tables
 * are this test binary's own symbols.
 */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "symbols/elf_cache.h"
#include "symbols/elf_symbols.h"

static const struct ht_elf_file_id libc_id = {
	.dev = 0x801, .inode = 1234, .size = 1921920, .mtime_ns = 1700000000123456789LL};

/* This binary's symbols, read again each time: a table of our own to hand the cache. */
static struct ht_elf_symbols *own_symbols(void)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct ht_elf_symbols *e = fd >= 0 ? ht_elf_symbols_open_fd(fd, "self") : NULL;

	if (fd >= 0)
		close(fd);
	return e;
}

static struct ht_elf_cache_stats stats_of(const struct ht_elf_cache *c)
{
	struct ht_elf_cache_stats st;

	ht_elf_cache_get_stats(c, &st);
	return st;
}

TEST(file_found_by_its_whole_identity)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_file_id other;
	struct ht_elf_file *f, *g;

	CHECK(c != NULL);
	if (!c)
		return;
	CHECK(ht_elf_cache_find_file(c, &libc_id) == NULL);
	f = ht_elf_cache_add_file(c, &libc_id);
	CHECK(f && f->state == HT_ELF_FILE_UNREAD && f->held_fd == -1 && !f->table);
	g = ht_elf_cache_find_file(c, &libc_id);
	CHECK(g == f && f->refs == 2);
	/* Rewritten in place (same inode), on another device, another inode: another file. */
	other = libc_id;
	other.size++;
	CHECK(ht_elf_cache_find_file(c, &other) == NULL);
	other = libc_id;
	other.mtime_ns++;
	CHECK(ht_elf_cache_find_file(c, &other) == NULL);
	other = libc_id;
	other.dev++;
	CHECK(ht_elf_cache_find_file(c, &other) == NULL);
	other = libc_id;
	other.inode++;
	CHECK(ht_elf_cache_find_file(c, &other) == NULL);
	CHECK_EQ_U64(stats_of(c).files, 1);
	CHECK_EQ_U64(stats_of(c).files_shared, 1);
	ht_elf_cache_put_file(c, g);
	CHECK_EQ_U64(stats_of(c).files, 1);
	ht_elf_cache_put_file(c, f);
	CHECK_EQ_U64(stats_of(c).files, 0);
	CHECK(ht_elf_cache_find_file(c, &libc_id) == NULL);
	ht_elf_cache_free(c);
}

TEST(file_of_unknown_size_is_never_shared)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_file_id id = libc_id;
	struct ht_elf_file *f;
	char key[256];

	if (!c)
		return;
	id.size = -1;
	f = ht_elf_cache_add_file(c, &id);
	CHECK(f != NULL);
	CHECK(ht_elf_cache_find_file(c, &id) == NULL);
	/* Nor is a table of such a file without a build-id. */
	CHECK_STR(ht_elf_table_key(NULL, &id, key, sizeof(key)), "");
	CHECK_EQ_U64(stats_of(c).files, 1);
	ht_elf_cache_put_file(c, f);
	CHECK_EQ_U64(stats_of(c).files, 0);
	ht_elf_cache_free(c);
}

TEST(table_keys)
{
	struct ht_elf_file_id vdso = {.vdso_bytes = 8192}, moved = libc_id;
	char a[256], b[256];

	CHECK_STR(ht_elf_table_key("0123abcd", &libc_id, a, sizeof(a)), "build-id 0123abcd");
	/* The build-id wins over where the file is: one library in two containers' layers. */
	moved.dev = 0x22;
	moved.inode = 99;
	CHECK_STR(ht_elf_table_key("0123abcd", &moved, b, sizeof(b)), a);
	/* Without one, the identity: the same file only. */
	ht_elf_table_key(NULL, &libc_id, a, sizeof(a));
	ht_elf_table_key("", &moved, b, sizeof(b));
	CHECK(a[0] && b[0] && strcmp(a, b));
	ht_elf_table_key(NULL, &vdso, b, sizeof(b));
	CHECK(b[0] && strcmp(a, b));
}

TEST(tables_shared_by_key_and_freed_by_the_last)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_symbols *mine = own_symbols(), *again = own_symbols();
	struct ht_elf_table *t, *u, *v;
	struct ht_elf_file *f, *g;
	struct ht_elf_file_id second = libc_id;

	CHECK(c && mine && again);
	if (!c || !mine || !again)
		return;
	CHECK(ht_elf_cache_find_table(c, "build-id 42") == NULL);
	t = ht_elf_cache_add_table(c, "build-id 42", mine, "/proc/1/map_files/x");
	CHECK(t && t->elf == mine && t->refs == 1);
	CHECK_STR(t->source, "/proc/1/map_files/x");
	/* Adding the same key again keeps the first and frees the second (ASan sees a leak else).
	 */
	u = ht_elf_cache_add_table(c, "build-id 42", again, "elsewhere");
	CHECK(u == t && t->refs == 2 && t->elf == mine);
	v = ht_elf_cache_find_table(c, "build-id 42");
	CHECK(v == t && t->refs == 3);
	CHECK(ht_elf_cache_find_table(c, "build-id 43") == NULL);
	CHECK(ht_elf_cache_find_table(c, "") == NULL);
	CHECK_EQ_U64(stats_of(c).tables, 1);
	CHECK_EQ_U64(stats_of(c).tables_read, 1);
	CHECK_EQ_U64(stats_of(c).tables_shared, 2);

	/* Two files (two containers' copies) on one table: each holds a reference. */
	f = ht_elf_cache_add_file(c, &libc_id);
	second.inode++;
	g = ht_elf_cache_add_file(c, &second);
	CHECK(f && g);
	if (!f || !g)
		return;
	ht_elf_file_set_table(f, u);
	ht_elf_file_set_table(g, v);
	CHECK(f->state == HT_ELF_FILE_READ && g->state == HT_ELF_FILE_READ);
	ht_elf_cache_put_table(c, t);
	CHECK_EQ_U64(t->refs, 2);
	ht_elf_cache_put_file(c, f);
	CHECK_EQ_U64(stats_of(c).tables, 1);
	ht_elf_cache_put_file(c, g);
	CHECK_EQ_U64(stats_of(c).tables, 0);
	CHECK(ht_elf_cache_find_table(c, "build-id 42") == NULL);
	ht_elf_cache_free(c);
}

TEST(table_without_key_is_kept_and_never_found)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_symbols *mine = own_symbols(), *again = own_symbols();
	struct ht_elf_table *t, *u;

	if (!c || !mine || !again)
		return;
	t = ht_elf_cache_add_table(c, "", mine, NULL);
	u = ht_elf_cache_add_table(c, "", again, NULL);
	CHECK(t && u && t != u && !t->source);
	CHECK_EQ_U64(stats_of(c).tables, 2);
	ht_elf_cache_put_table(c, t);
	ht_elf_cache_put_table(c, u);
	CHECK_EQ_U64(stats_of(c).tables, 0);
	ht_elf_cache_free(c);
}

TEST(held_file_closed_once_read_or_dropped)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_file *f, *g;
	struct ht_elf_table *t;
	struct ht_elf_symbols *mine = own_symbols();
	struct ht_elf_file_id other = libc_id;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int fd2 = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (!c || !mine || fd < 0 || fd2 < 0)
		return;
	f = ht_elf_cache_add_file(c, &libc_id);
	f->held_fd = fd;
	f->held_source = strdup("/proc/self/exe");
	CHECK_EQ_U64(stats_of(c).held_fds, 1);
	t = ht_elf_cache_add_table(c, "k", mine, f->held_source);
	ht_elf_file_set_table(f, t);
	CHECK(f->held_fd == -1 && !f->held_source);
	CHECK(fcntl(fd, F_GETFD) == -1);
	CHECK_EQ_U64(stats_of(c).held_fds, 0);
	ht_elf_cache_put_file(c, f);

	/* A file never read: its last user closes it. */
	other.inode++;
	g = ht_elf_cache_add_file(c, &other);
	g->held_fd = fd2;
	g->held_source = strdup("/proc/self/exe");
	ht_elf_cache_put_file(c, g);
	CHECK(fcntl(fd2, F_GETFD) == -1);
	CHECK_EQ_U64(stats_of(c).files, 0);
	ht_elf_cache_free(c);
}

TEST(cache_freed_with_entries_still_held)
{
	struct ht_elf_cache *c = ht_elf_cache_new();
	struct ht_elf_symbols *mine = own_symbols();
	struct ht_elf_file *f;
	struct ht_elf_table *t;

	if (!c || !mine)
		return;
	/* What its users never gave back goes with the cache (ASan sees a leak else). */
	f = ht_elf_cache_add_file(c, &libc_id);
	t = ht_elf_cache_add_table(c, "k", mine, "s");
	ht_elf_file_set_table(f, ht_elf_cache_find_table(c, "k"));
	(void)t;
	ht_elf_cache_free(c);
}

TEST(build_id_without_reading_symbols)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct ht_elf_symbols *mine = own_symbols();
	char id[160], small[4];

	if (fd < 0 || !mine)
		return;
	/* The unit tests are linked with a build-id (gcc's default on Debian). */
	if (!ht_elf_symbols_build_id(mine)) {
		close(fd);
		ht_elf_symbols_free(mine);
		SKIP_TEST("this binary has no build-id");
	}
	CHECK(ht_elf_build_id_fd(fd, "self", id, sizeof(id)) == 1);
	CHECK_STR(id, ht_elf_symbols_build_id(mine));
	CHECK(ht_elf_build_id_fd(fd, "self", small, sizeof(small)) == 0);
	close(fd);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	CHECK(ht_elf_build_id_fd(fd, "status", id, sizeof(id)) == -1);
	close(fd);
	ht_elf_symbols_free(mine);
}
