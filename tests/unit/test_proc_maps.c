// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The /proc/PID/maps parser and the perf map parser, good and bad input. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "symbols/perf_map.h"
#include "symbols/proc_maps.h"

static int parse(const char *text, struct ht_maps *m)
{
	return ht_maps_parse(text, strlen(text), m);
}

/* Whether TEXT is refused with a message that holds WANT. */
static int refused(const char *text, size_t len, const char *want)
{
	struct ht_maps m;

	if (ht_maps_parse(text, len, &m) == 0) {
		ht_maps_free(&m);
		return 0;
	}
	return m.count == 0 && m.v == NULL && strstr(ht_last_error(), want) != NULL;
}

static const char sample[] =
	"56031d35d000-56031d35f000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
	"56031d35f000-56031d364000 r-xp 00002000 fe:00 247134                     /usr/bin/cat\n"
	"56033cc02000-56033cc23000 rw-p 00000000 00:00 0                          [heap]\n"
	"7fab38323000-7fab38345000 rw-p 00000000 00:00 0 \n"
	"7fab383cc000-7fab38522000 r-xp 00026000 103:0a 332835 /opt/my lib/libx.so (deleted)\n"
	"7ffc0b9f0000-7ffc0b9f2000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static int refused_str(const char *text, const char *want)
{
	return refused(text, strlen(text), want);
}

TEST(maps_parse_fields)
{
	struct ht_maps m;

	CHECK(parse(sample, &m) == 0);
	CHECK_EQ_U64(m.count, 7);
	if (m.count != 7)
		return;
	CHECK_EQ_U64(m.v[1].start, 0x56031d35f000);
	CHECK_EQ_U64(m.v[1].end, 0x56031d364000);
	CHECK_EQ_U64(m.v[1].offset, 0x2000);
	CHECK_STR(m.v[1].perms, "r-xp");
	CHECK_EQ_U64(m.v[1].dev_major, 0xfe);
	CHECK_EQ_U64(m.v[1].inode, 247134);
	CHECK_STR(m.v[1].path, "/usr/bin/cat");
	CHECK_STR(m.v[2].path, "[heap]");
	CHECK_STR(m.v[3].path, "");
	CHECK_EQ_U64(m.v[4].dev_major, 0x103);
	CHECK_EQ_U64(m.v[4].dev_minor, 0xa);
	CHECK_STR(m.v[4].path, "/opt/my lib/libx.so (deleted)");
	CHECK(ht_mapping_is_exec(&m.v[4]));
	CHECK(!ht_mapping_is_exec(&m.v[0]));
	CHECK_EQ_U64(m.v[6].end, 0xffffffffff601000);
	ht_maps_free(&m);
}

TEST(maps_find)
{
	struct ht_maps m;

	CHECK(parse(sample, &m) == 0);
	CHECK(ht_maps_find(&m, 0x56031d35d000) == &m.v[0]);
	CHECK(ht_maps_find(&m, 0x56031d35efff) == &m.v[0]);
	CHECK(ht_maps_find(&m, 0x56031d35f000) == &m.v[1]);
	CHECK(ht_maps_find(&m, 0x56031d364000) == NULL); /* gap */
	CHECK(ht_maps_find(&m, 0) == NULL);
	CHECK(ht_maps_find(&m, 0x7ffc0b9f1234) == &m.v[5]);
	CHECK(ht_maps_find(&m, 0xffffffffff600000) == &m.v[6]);
	CHECK(ht_maps_find(&m, UINT64_MAX) == NULL);
	ht_maps_free(&m);
}

TEST(maps_parse_empty_and_unterminated)
{
	struct ht_maps m;

	CHECK(ht_maps_parse("", 0, &m) == 0 && m.count == 0);
	CHECK(parse("1000-2000 r-xp 00000000 00:00 0", &m) == 0 && m.count == 1);
	ht_maps_free(&m);
	CHECK(parse("1000-2000 r-xp 00000000 00:00 0\n", &m) == 0 && m.count == 1);
	ht_maps_free(&m);
}

TEST(maps_parse_long_path)
{
	char line[9000];
	struct ht_maps m;
	int n = snprintf(line, sizeof(line), "1000-2000 r-xp 00000000 08:01 12 /");

	memset(line + n, 'a', 8000);
	line[n + 8000] = '\0';
	CHECK(parse(line, &m) == 0);
	CHECK(m.count == 1 && strlen(m.v[0].path) == 8001);
	ht_maps_free(&m);
}

TEST(maps_parse_bad_lines)
{
	static const char nul_text[] = "1000-2000 r-xp 00000000 00:00 0 /a\0b\n";

	CHECK(refused_str("1000-2000 r-xp 00000000 00:00 0\nzz-2000 r-xp 0 00:00 0\n",
			  "line 2: bad address range"));
	CHECK(refused_str("2000-1000 r-xp 00000000 00:00 0", "start is not below end"));
	CHECK(refused_str("1000-1000 r-xp 00000000 00:00 0", "start is not below end"));
	CHECK(refused_str("1000-2000 r-xq 00000000 00:00 0", "bad permissions"));
	CHECK(refused_str("1000-2000 r-x 00000000 00:00 0", "bad permissions"));
	CHECK(refused_str("1000-2000 r-xp", "bad offset"));
	CHECK(refused_str("1000-2000 r-xp 00000000", "bad device"));
	CHECK(refused_str("1000-2000 r-xp 00000000 0000 0", "bad device"));
	CHECK(refused_str("1000-2000 r-xp 00000000 00:00", "bad inode"));
	CHECK(refused_str("1000-2000 r-xp 00000000 00:00 12x", "junk after the inode"));
	CHECK(refused_str("10000000000000000-20000000000000000 r-xp 0 00:00 0", "bad address"));
	CHECK(refused_str("1000-2000 r-xp 11111111111111111 00:00 0", "bad offset"));
	CHECK(refused_str("1000-2000 r-xp 0 100000000:00 0", "bad device"));
	CHECK(refused_str("1000-2000 r-xp 0 00:00 99999999999999999999", "bad inode"));
	CHECK(refused(nul_text, sizeof(nul_text) - 1, "NUL byte"));
	CHECK(refused_str("1000-2000 r-xp 0 00:00 0\n\n3000-4000 r-xp 0 00:00 0",
			  "line 2: empty line"));
	CHECK(refused_str("3000-4000 r-xp 0 00:00 0\n1000-2000 r-xp 0 00:00 0",
			  "line 2: overlaps"));
	CHECK(refused_str("1000-3000 r-xp 0 00:00 0\n2000-4000 r-xp 0 00:00 0",
			  "line 2: overlaps"));
	CHECK(refused_str("-2000 r-xp 0 00:00 0", "bad address range"));
}

TEST(maps_read_self)
{
	struct ht_maps m;
	const struct ht_mapping *code;

	CHECK(ht_maps_read(getpid(), &m) == 0);
	code = ht_maps_find(&m, (uint64_t)(uintptr_t)&ht_maps_parse);
	CHECK(code != NULL);
	if (code) {
		CHECK(ht_mapping_is_exec(code));
		CHECK(code->path[0] == '/');
	}
	ht_maps_free(&m);
	CHECK(ht_maps_read(-5, &m) == -1);
	CHECK(strstr(ht_last_error(), "/proc/-5/maps") != NULL);
}

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
