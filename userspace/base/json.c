// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/json.h"

/*
 * The one escaping. Runs of plain bytes go out in one write; unlocked, as
 * the caller holds the FILE's lock for the whole line.
 */
static void put_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run = p;

	putc_unlocked('"', f);
	for (; *p; p++) {
		char esc[8];

		if (*p >= 0x20 && *p != 0x7f && *p != '"' && *p != '\\')
			continue;
		fwrite_unlocked(run, 1, (size_t)(p - run), f);
		run = p + 1;
		switch (*p) {
		case '"':
			fputs_unlocked("\\\"", f);
			break;
		case '\\':
			fputs_unlocked("\\\\", f);
			break;
		case '\n':
			fputs_unlocked("\\n", f);
			break;
		case '\t':
			fputs_unlocked("\\t", f);
			break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			fputs_unlocked(esc, f);
		}
	}
	fwrite_unlocked(run, 1, (size_t)(p - run), f);
	putc_unlocked('"', f);
}

/* Decimal digits without printf: breach lines carry some twenty numbers each. */
static void put_u64(FILE *f, uint64_t v)
{
	char buf[20], *p = buf + sizeof(buf);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(p, 1, (size_t)(buf + sizeof(buf) - p), f);
}

/* The separator before a member of the innermost container, and its key. */
static void member(struct ht_json *j, const char *key)
{
	uint64_t bit = 1ULL << (j->depth - 1);

	if (j->has_member & bit)
		putc_unlocked(',', j->f);
	j->has_member |= bit;
	/* Keys are names the program spells, never data: nothing to escape. */
	if (key) {
		putc_unlocked('"', j->f);
		fputs_unlocked(key, j->f);
		fputs_unlocked("\":", j->f);
	}
}

static void open_container(struct ht_json *j, bool array)
{
	uint64_t bit = 1ULL << j->depth;

	putc_unlocked(array ? '[' : '{', j->f);
	j->depth++;
	j->has_member &= ~bit;
	if (array)
		j->is_array |= bit;
	else
		j->is_array &= ~bit;
}

static void begin(struct ht_json *j, FILE *f, bool array)
{
	j->f = f;
	j->depth = 0;
	j->has_member = 0;
	j->is_array = 0;
	open_container(j, array);
}

void ht_json_begin(struct ht_json *j, FILE *f)
{
	begin(j, f, false);
}

void ht_json_begin_array(struct ht_json *j, FILE *f)
{
	begin(j, f, true);
}

void ht_json_end_line(struct ht_json *j)
{
	ht_json_close(j);
	putc_unlocked('\n', j->f);
}

void ht_json_continue(struct ht_json *j, FILE *f)
{
	j->f = f;
	j->depth = 1;
	j->has_member = 1;
	j->is_array = 0;
}

void ht_json_object(struct ht_json *j, const char *key)
{
	member(j, key);
	open_container(j, false);
}

void ht_json_array(struct ht_json *j, const char *key)
{
	member(j, key);
	open_container(j, true);
}

void ht_json_close(struct ht_json *j)
{
	j->depth--;
	putc_unlocked(j->is_array & (1ULL << j->depth) ? ']' : '}', j->f);
}

void ht_json_str(struct ht_json *j, const char *key, const char *s)
{
	member(j, key);
	if (s)
		put_string(j->f, s);
	else
		fputs_unlocked("null", j->f);
}

void ht_json_split(struct ht_json *j, const char *key, const char *list, char sep)
{
	const char seps[2] = { sep, 0 };

	ht_json_array(j, key);
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, seps);
		char *item = strndup(p, len);

		/* From a file, maybe: escaped as any string. */
		ht_json_str(j, NULL, item ? item : "");
		free(item);
		p += len + (p[len] == sep);
	}
	ht_json_close(j);
}

void ht_json_data_str(struct ht_json *j, const char *key, const char *s)
{
	member(j, NULL);
	put_string(j->f, key);
	putc_unlocked(':', j->f);
	put_string(j->f, s);
}

void ht_json_u64(struct ht_json *j, const char *key, uint64_t v)
{
	member(j, key);
	put_u64(j->f, v);
}

void ht_json_i64(struct ht_json *j, const char *key, int64_t v)
{
	member(j, key);
	if (v < 0) {
		putc_unlocked('-', j->f);
		put_u64(j->f, 0 - (uint64_t)v);
	} else {
		put_u64(j->f, (uint64_t)v);
	}
}

void ht_json_bool(struct ht_json *j, const char *key, bool v)
{
	member(j, key);
	fputs_unlocked(v ? "true" : "false", j->f);
}

void ht_json_null(struct ht_json *j, const char *key)
{
	member(j, key);
	fputs_unlocked("null", j->f);
}

void ht_json_fixed(struct ht_json *j, const char *key, double v, int decimals)
{
	member(j, key);
	fprintf(j->f, "%.*f", decimals, v);
}
