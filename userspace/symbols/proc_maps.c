// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * /proc/PID/maps lines look like
 *   7fab383cc000-7fab38522000 r-xp 00026000 fe:00 332835      /usr/lib/x86_64-linux-gnu/libc.so.6
 * The path is everything after the padding that follows the inode, so it
 * may hold spaces; it is absent for anonymous memory. The text comes from
 * the kernel, but a parser that is fuzzed must treat it as hostile: every
 * field is checked, and a bad line is an error that names it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "base/proc.h"
#include "base/partition.h"
#include "symbols/proc_maps.h"

/* A cursor over one line. */
struct line {
	const char *p, *end;
	size_t number; /* 1-based, for messages */
};

static int parse_hex(struct line *l, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = l->p;

	for (; l->p < l->end; l->p++) {
		char c = *l->p;
		unsigned digit;

		if (c >= '0' && c <= '9')
			digit = c - '0';
		else if (c >= 'a' && c <= 'f')
			digit = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			digit = c - 'A' + 10;
		else
			break;
		if (v >> 60)
			return -1; /* would overflow 64 bits */
		v = v << 4 | digit;
	}
	if (l->p == start)
		return -1;
	*out = v;
	return 0;
}

static int parse_dec(struct line *l, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = l->p;

	for (; l->p < l->end && *l->p >= '0' && *l->p <= '9'; l->p++) {
		unsigned digit = *l->p - '0';

		if (v > (UINT64_MAX - digit) / 10)
			return -1;
		v = v * 10 + digit;
	}
	if (l->p == start)
		return -1;
	*out = v;
	return 0;
}

static int expect(struct line *l, char c)
{
	if (l->p >= l->end || *l->p != c)
		return -1;
	l->p++;
	return 0;
}

static int parse_perms(struct line *l, char perms[5])
{
	static const char allowed[4][3] = {"r-", "w-", "x-", "ps"};

	if (l->end - l->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		if (l->p[i] != allowed[i][0] && l->p[i] != allowed[i][1])
			return -1;
		perms[i] = l->p[i];
	}
	perms[4] = '\0';
	l->p += 4;
	return 0;
}

static int parse_dev(struct line *l, struct ht_mapping *m)
{
	uint64_t major, minor;

	if (parse_hex(l, &major) || expect(l, ':') || parse_hex(l, &minor))
		return -1;
	if (major > UINT32_MAX || minor > UINT32_MAX)
		return -1;
	m->dev_major = (uint32_t)major;
	m->dev_minor = (uint32_t)minor;
	return 0;
}

static int bad_line(const struct line *l, const char *what)
{
	return ht_fail("maps line %zu: %s", l->number, what);
}

/* Fill M from one line (without its newline); M->path is allocated. */
static int parse_line(struct line *l, struct ht_mapping *m)
{
	if (memchr(l->p, '\0', l->end - l->p))
		return bad_line(l, "NUL byte");
	if (parse_hex(l, &m->start) || expect(l, '-') || parse_hex(l, &m->end))
		return bad_line(l, "bad address range");
	if (m->start >= m->end)
		return bad_line(l, "start is not below end");
	if (expect(l, ' ') || parse_perms(l, m->perms))
		return bad_line(l, "bad permissions");
	if (expect(l, ' ') || parse_hex(l, &m->offset))
		return bad_line(l, "bad offset");
	if (expect(l, ' ') || parse_dev(l, m))
		return bad_line(l, "bad device");
	if (expect(l, ' ') || parse_dec(l, &m->inode))
		return bad_line(l, "bad inode");
	if (l->p < l->end && *l->p != ' ')
		return bad_line(l, "junk after the inode");
	/* The kernel pads to a column before the path. */
	while (l->p < l->end && *l->p == ' ')
		l->p++;
	m->path = strndup(l->p, l->end - l->p);
	if (!m->path)
		return ht_fail("out of memory parsing maps");
	return 0;
}

static int append(struct ht_maps *out, size_t *cap, const struct ht_mapping *m)
{
	if (out->count == *cap) {
		size_t n = *cap ? *cap * 2 : 64;
		struct ht_mapping *v = realloc(out->v, n * sizeof(*v));

		if (!v)
			return ht_fail("out of memory parsing maps");
		out->v = v;
		*cap = n;
	}
	out->v[out->count++] = *m;
	return 0;
}

int ht_maps_parse(const char *text, size_t len, struct ht_maps *out)
{
	const char *p = text, *end = text + len;
	struct line l = {.number = 0};
	size_t cap = 0;

	out->v = NULL;
	out->count = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		struct ht_mapping m = {0};

		l.p = p;
		l.end = nl ? nl : end;
		l.number++;
		p = nl ? nl + 1 : end;
		if (l.p == l.end)
			goto bad_empty;
		if (parse_line(&l, &m))
			goto fail;
		/* Binary search relies on the kernel's order. */
		if (out->count && m.start < out->v[out->count - 1].end) {
			free(m.path);
			bad_line(&l, "overlaps or precedes the line before");
			goto fail;
		}
		if (append(out, &cap, &m)) {
			free(m.path);
			goto fail;
		}
	}
	return 0;
bad_empty:
	bad_line(&l, "empty line");
fail:
	ht_maps_free(out);
	return -1;
}

/* The whole of a /proc file; its size is unknown until read. */
static char *read_proc_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *text;

	if (fd < 0) {
		ht_fail("cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	text = ht_read_all(fd, SIZE_MAX, len);
	if (!text)
		ht_fail("cannot read %s: %s", path,
			errno == ENOMEM ? "out of memory" : strerror(errno));
	close(fd);
	return text;
}

int ht_maps_read(int pid, struct ht_maps *out)
{
	char path[64];
	size_t len;
	char *text;
	int err = -1;

	out->v = NULL;
	out->count = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	/*
	 * The kernel writes the file a page at a time; a mapping that grows
	 * between two reads can make it overlap itself once. Read it again.
	 */
	for (int attempt = 0; attempt < 3 && err; attempt++) {
		text = read_proc_file(path, &len);
		if (!text)
			return -1;
		err = ht_maps_parse(text, len, out);
		free(text);
	}
	if (err)
		return ht_fail("%s: %s", path, ht_last_error());
	return 0;
}

const struct ht_mapping *ht_maps_find(const struct ht_maps *m, uint64_t addr)
{
	/* The first mapping whose end is above addr. */
	size_t lo = HT_PARTITION_POINT(0, m->count, i, m->v[i].end <= addr);

	if (lo == m->count || m->v[lo].start > addr)
		return NULL;
	return &m->v[lo];
}

void ht_maps_free(struct ht_maps *m)
{
	for (size_t i = 0; i < m->count; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->count = 0;
}
