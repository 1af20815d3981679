// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Protobuf wire helpers: varints, nested lengths patched, the reader on malformed input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trace/pb.h"

TEST(pb_varints_round_trip)
{
	static const uint64_t values[] = {0,	 1,	127,	    128,	300,
					  16383, 16384, UINT32_MAX, 1ull << 63, UINT64_MAX};
	struct pb_buf b;
	struct pb_reader r;
	struct pb_field f;

	pb_buf_init(&b);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		pb_varint(&b, (uint32_t)i + 1, values[i]);
	pb_int(&b, 20, -1);
	pb_fixed64(&b, 21, 0x0102030405060708ull);
	pb_double(&b, 22, -2.5);
	pb_string(&b, PB_MAX_FIELD, "x");
	CHECK(!b.err);
	pb_reader_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		CHECK(pb_next(&r, &f) == 1);
		CHECK(f.number == i + 1 && f.wire == PB_WIRE_VARINT);
		CHECK_EQ_U64(f.value, values[i]);
	}
	CHECK(pb_next(&r, &f) == 1 && f.value == UINT64_MAX); /* -1 takes ten bytes */
	CHECK(pb_next(&r, &f) == 1 && f.wire == PB_WIRE_FIXED64);
	CHECK_EQ_U64(f.value, 0x0102030405060708ull);
	CHECK(pb_next(&r, &f) == 1 && pb_field_double(&f) == -2.5);
	CHECK(pb_next(&r, &f) == 1 && f.number == PB_MAX_FIELD && f.len == 1);
	CHECK(pb_next(&r, &f) == 0);
	pb_buf_free(&b);
}

TEST(pb_nested_lengths_are_patched)
{
	static const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, 70000};
	struct pb_buf b;
	struct pb_reader r, sub, inner;
	struct pb_field f, g;
	char *body = calloc(1, 70000);

	pb_buf_init(&b);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t outer = pb_begin(&b, 1);
		size_t mid = pb_begin(&b, 2);

		pb_bytes(&b, 3, body, sizes[i]);
		pb_end(&b, mid);
		pb_varint(&b, 4, i);
		pb_end(&b, outer);
	}
	CHECK(!b.err);
	pb_reader_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK(pb_next(&r, &f) == 1 && !pb_enter(&r, &f, &sub));
		CHECK(pb_next(&sub, &g) == 1 && g.number == 2 && !pb_enter(&sub, &g, &inner));
		CHECK(pb_next(&inner, &g) == 1 && g.number == 3);
		CHECK_EQ_U64(g.len, sizes[i]);
		CHECK(pb_next(&sub, &g) == 1 && g.number == 4 && g.value == i);
		CHECK(pb_next(&sub, &g) == 0);
	}
	CHECK(pb_next(&r, &f) == 0);
	free(body);
	pb_buf_free(&b);
}

static int pb_first_error(const void *data, size_t len)
{
	struct pb_reader r;
	struct pb_field f;
	int ret;

	pb_reader_init(&r, data, len);
	while ((ret = pb_next(&r, &f)) > 0)
		;
	return ret;
}

TEST(pb_reader_rejects_malformed_input)
{
	CHECK(pb_first_error("\x08", 1) == PB_ERR_TRUNCATED);
	CHECK(pb_first_error("\x08\x80\x80", 3) == PB_ERR_TRUNCATED);
	/* Eleven bytes, and ten whose last carries more than bit 63. */
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12) ==
	      PB_ERR_VARINT_LONG);
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11) ==
	      PB_ERR_VARINT_LONG);
	CHECK(pb_first_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11) == 0);
	CHECK(pb_first_error("\x0a\x05"
			     "abc",
			     5) == PB_ERR_LENGTH);
	CHECK(pb_first_error("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10) == PB_ERR_LENGTH);
	CHECK(pb_first_error("\x09\x01\x02", 3) == PB_ERR_TRUNCATED);
	CHECK(pb_first_error("\x0d\x01\x02\x03\x04", 5) == 0);
	CHECK(pb_first_error("\x0b", 1) == PB_ERR_WIRE_TYPE); /* start group */
	CHECK(pb_first_error("\x0c", 1) == PB_ERR_WIRE_TYPE); /* end group */
	CHECK(pb_first_error("\x0e\x00", 2) == PB_ERR_WIRE_TYPE);
	CHECK(pb_first_error("\x0f\x00", 2) == PB_ERR_WIRE_TYPE);
	CHECK(pb_first_error("\x00\x00", 2) == PB_ERR_FIELD_NUMBER);
	CHECK(pb_first_error("\x80\x80\x80\x80\x10\x00", 6) == PB_ERR_FIELD_NUMBER);
	CHECK(strlen(pb_strerror(PB_ERR_DEPTH)) > 0);
}

TEST(pb_reader_limits_depth)
{
	struct pb_buf b;
	struct pb_reader r[PB_MAX_DEPTH + 2];
	struct pb_field f;
	size_t tokens[PB_MAX_DEPTH + 1];
	int depth = 0, err = 0;

	pb_buf_init(&b);
	for (int i = 0; i <= PB_MAX_DEPTH; i++)
		tokens[i] = pb_begin(&b, 1);
	pb_varint(&b, 2, 1);
	for (int i = PB_MAX_DEPTH; i >= 0; i--)
		pb_end(&b, tokens[i]);
	pb_reader_init(&r[0], b.data, b.len);
	while (!err && pb_next(&r[depth], &f) == 1 && f.wire == PB_WIRE_LEN) {
		err = pb_enter(&r[depth], &f, &r[depth + 1]);
		if (!err)
			depth++;
	}
	CHECK(err == PB_ERR_DEPTH);
	CHECK(depth == PB_MAX_DEPTH);
	pb_buf_free(&b);
}
