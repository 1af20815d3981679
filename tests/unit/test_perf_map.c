// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The perf map parser (/tmp/perf-PID.map of JIT runtimes), good and bad input. */
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "symbols/perf_map.h"

static int perf_parse(const char *text, struct ht_perf_map *m)
{
	return ht_perf_map_parse(text, strlen(text), m);
}

TEST(perf_map_parse_and_find)
{
	struct ht_perf_map m;
	const struct ht_perf_map_entry *e;

	CHECK(perf_parse("7f0000001000 40 LazyCompile:~foo bar.js:12\n"
			 "0x7f0000002000 0x20 jitted_two\r\n"
			 "7F0000003000 10 \tthree  \n",
			 &m) == 0);
	CHECK_EQ_U64(m.count, 3);
	CHECK_EQ_U64(m.bad_lines, 0);
	e = ht_perf_map_find(&m, 0x7f0000001000);
	CHECK(e && !strcmp(e->name, "LazyCompile:~foo bar.js:12"));
	e = ht_perf_map_find(&m, 0x7f000000103f);
	CHECK(e && e->start == 0x7f0000001000);
	CHECK(ht_perf_map_find(&m, 0x7f0000001040) == NULL);
	e = ht_perf_map_find(&m, 0x7f0000002010);
	CHECK(e && !strcmp(e->name, "jitted_two"));
	e = ht_perf_map_find(&m, 0x7f0000003000);
	CHECK(e && !strcmp(e->name, "three"));
	CHECK(ht_perf_map_find(&m, 0x1000) == NULL);
	ht_perf_map_free(&m);
}

TEST(perf_map_later_lines_win)
{
	struct ht_perf_map m;
	const struct ht_perf_map_entry *e;

	/* Code reused by the JIT: the later line describes what is there now. */
	CHECK(perf_parse("1000 1000 old_big\n1800 100 new_small\n1000 10 new_at_start\n", &m) == 0);
	e = ht_perf_map_find(&m, 0x1850);
	CHECK(e && !strcmp(e->name, "new_small"));
	e = ht_perf_map_find(&m, 0x1005);
	CHECK(e && !strcmp(e->name, "new_at_start"));
	e = ht_perf_map_find(&m, 0x1900);
	CHECK(e && !strcmp(e->name, "old_big"));
	ht_perf_map_free(&m);
}

TEST(perf_map_bad_lines_skipped)
{
	static const char text[] = "zz 10 bad_start\n"
				   "1000 bad_size\n"
				   "2000 0 empty\n"
				   "ffffffffffffffff 10 wraps\n"
				   "3000 10\n"
				   "11111111111111111 10 too_big\n"
				   "4000 10 a\0b\n"
				   "\n"
				   "5000 10 good\n"
				   "6000 10 cut_sh";
	struct ht_perf_map m;

	CHECK(ht_perf_map_parse(text, sizeof(text) - 1, &m) == 0);
	CHECK_EQ_U64(m.count, 1);
	CHECK_EQ_U64(m.bad_lines, 8);
	CHECK(ht_perf_map_find(&m, 0x5005) != NULL);
	CHECK(ht_perf_map_find(&m, 0x6005) == NULL); /* still being written */
	CHECK(ht_perf_map_find(&m, 0x4005) == NULL);
	ht_perf_map_free(&m);
	CHECK(ht_perf_map_parse("", 0, &m) == 0 && m.count == 0);
	CHECK(ht_perf_map_find(&m, 0) == NULL);
	ht_perf_map_free(&m);
}
