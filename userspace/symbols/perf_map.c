// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/partition.h"
#include "symbols/perf_map.h"

/* How far back a lookup looks for an earlier entry that still covers the address. */
#define OVERLAP_SCAN_LIMIT 64

static int is_space(char c)
{
	return c == ' ' || c == '\t';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int parse_hex(const char **pp, const char *end, uint64_t *out)
{
	const char *p = *pp, *digits;
	uint64_t v = 0;

	if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	digits = p;
	for (; p < end && hex_digit(*p) >= 0; p++) {
		if (v >> 60)
			return -1;
		v = v << 4 | (uint64_t)hex_digit(*p);
	}
	if (p == digits)
		return -1;
	*pp = p;
	*out = v;
	return 0;
}

static const char *skip_spaces(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	return p;
}

/* One line into E, its name copied to *NAMES. Returns -1 for a line to skip. */
static int parse_line(const char *p, const char *end, struct ht_perf_map_entry *e, char **names)
{
	const char *name;

	p = skip_spaces(p, end);
	if (parse_hex(&p, end, &e->start) || p == end || !is_space(*p))
		return -1;
	p = skip_spaces(p, end);
	if (parse_hex(&p, end, &e->size) || p == end || !is_space(*p))
		return -1;
	name = skip_spaces(p, end);
	while (end > name && (end[-1] == '\r' || is_space(end[-1])))
		end--;
	if (name == end || memchr(name, '\0', end - name))
		return -1;
	if (!e->size || e->start + e->size < e->start)
		return -1;
	memcpy(*names, name, end - name);
	(*names)[end - name] = '\0';
	e->name = *names;
	*names += end - name + 1;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct ht_perf_map_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static size_t count_lines(const char *text, size_t len)
{
	size_t n = 1;

	for (const char *p = text; (p = memchr(p, '\n', text + len - p)); p++)
		n++;
	return n;
}

int ht_perf_map_parse(const char *text, size_t len, struct ht_perf_map *out)
{
	const char *p = text, *end = text + len;
	size_t lines = count_lines(text, len);
	char *names;
	uint32_t line = 0;

	memset(out, 0, sizeof(*out));
	/* Names never outgrow the text. */
	out->v = malloc(lines * sizeof(*out->v));
	out->reach = malloc(lines * sizeof(*out->reach));
	out->names = malloc(len + 1);
	if (!out->v || !out->reach || !out->names) {
		ht_perf_map_free(out);
		return ht_fail("out of memory parsing a perf map");
	}
	names = out->names;
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p);
		const char *line_end = nl ? nl : end;
		struct ht_perf_map_entry e = {.line = ++line};

		/* A last line without its newline may be one the JIT is still writing. */
		if (line_end > p && nl && parse_line(p, line_end, &e, &names) == 0)
			out->v[out->count++] = e;
		else if (line_end > p)
			out->bad_lines++;
		p = nl ? nl + 1 : end;
	}
	qsort(out->v, out->count, sizeof(*out->v), entry_cmp);
	for (size_t i = 0; i < out->count; i++) {
		uint64_t e = out->v[i].start + out->v[i].size;

		out->reach[i] = i && out->reach[i - 1] > e ? out->reach[i - 1] : e;
	}
	return 0;
}

const struct ht_perf_map_entry *ht_perf_map_find(const struct ht_perf_map *m, uint64_t addr)
{
	const struct ht_perf_map_entry *best = NULL;
	/* lo = the number of entries that start at or below addr. */
	size_t lo = HT_PARTITION_POINT(0, m->count, i, m->v[i].start <= addr);

	for (size_t i = lo, steps = 0; i > 0 && steps < OVERLAP_SCAN_LIMIT; i--, steps++) {
		const struct ht_perf_map_entry *e = &m->v[i - 1];

		if (m->reach[i - 1] <= addr)
			break;
		if (addr < e->start + e->size && (!best || e->line > best->line))
			best = e;
	}
	return best;
}

void ht_perf_map_free(struct ht_perf_map *m)
{
	free(m->v);
	free(m->reach);
	free(m->names);
	memset(m, 0, sizeof(*m));
}
