/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one JSON writer: every JSON line and document hybtrace prints goes
 * through it, so there is one escaping (of every string, and of every key
 * that is data) and one number format (integers in decimal, fractions with
 * a fixed count of decimals).
 * It writes straight to a FILE and allocates nothing. Its writes are
 * unlocked (the breach lines are on the event loop's path): when other
 * threads write to the FILE, the caller holds its lock (flockfile) around
 * the line.
 *
 * A member's KEY is its name in the enclosing object, a name the program
 * spells (written as is, never data), or NULL for an element of an array;
 * a key that is data (a dump's metadata) goes through ht_json_data_str.
 * Objects and arrays nest up to HT_JSON_MAX_DEPTH.
 */
#ifndef HT_JSON_H
#define HT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HT_JSON_MAX_DEPTH 64

struct ht_json {
	FILE *f;
	unsigned int depth;  /* open objects and arrays */
	uint64_t has_member; /* bit D: the container at depth D holds a member already */
	uint64_t is_array;   /* bit D: the container at depth D is an array */
};

/* Open a JSON line (or document) on F: its outer object. */
void ht_json_begin(struct ht_json *j, FILE *f);
/* Open a JSON document on F whose outer value is an array. */
void ht_json_begin_array(struct ht_json *j, FILE *f);
/* Close the outer object (or array) and end the line. */
void ht_json_end_line(struct ht_json *j);
/* Add members to an object on F that the caller opened and wrote members into. */
void ht_json_continue(struct ht_json *j, FILE *f);

/* Open an object or an array as a member; ht_json_close ends the innermost one. */
void ht_json_object(struct ht_json *j, const char *key);
void ht_json_array(struct ht_json *j, const char *key);
void ht_json_close(struct ht_json *j);

/* Members. A NULL string is written as null. */
void ht_json_str(struct ht_json *j, const char *key, const char *s);
/* A string member whose KEY is data: escaped as a string is. */
void ht_json_data_str(struct ht_json *j, const char *key, const char *s);
void ht_json_u64(struct ht_json *j, const char *key, uint64_t v);
void ht_json_i64(struct ht_json *j, const char *key, int64_t v);
void ht_json_bool(struct ht_json *j, const char *key, bool v);
void ht_json_null(struct ht_json *j, const char *key);
/* An array of the strings LIST holds between SEP characters: "a+b" -> ["a","b"]; NULL: []. */
void ht_json_split(struct ht_json *j, const char *key, const char *list, char sep);
/* V with DECIMALS digits after the point ("%.*f"): seconds, ratios. */
void ht_json_fixed(struct ht_json *j, const char *key, double v, int decimals);

#endif /* HT_JSON_H */
