// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The /proc/PID/maps parser, good and bad input. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
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
