// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Protocol-buffer wire format: see pb.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace/pb.h"

#define PB_MAX_VARINT_BYTES 10

void pb_buf_init(struct pb_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void pb_buf_free(struct pb_buf *b)
{
	free(b->data);
	pb_buf_init(b);
}

void pb_buf_reset(struct pb_buf *b)
{
	b->len = 0;
}

void pb_buf_truncate(struct pb_buf *b, size_t len)
{
	if (len < b->len)
		b->len = len;
}

/* Make room for EXTRA more bytes; false (and b->err set) when memory ran out. */
static int pb_reserve(struct pb_buf *b, size_t extra)
{
	size_t cap;
	uint8_t *data;

	if (b->err)
		return 0;
	if (b->cap - b->len >= extra)
		return 1;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra)
		cap *= 2;
	data = realloc(b->data, cap);
	if (!data) {
		b->err = -ENOMEM;
		return 0;
	}
	b->data = data;
	b->cap = cap;
	return 1;
}

static size_t pb_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Encode V at P (room for 10 bytes assumed); returns the bytes written. */
static size_t pb_encode_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static void pb_put_varint(struct pb_buf *b, uint64_t v)
{
	if (!pb_reserve(b, PB_MAX_VARINT_BYTES))
		return;
	b->len += pb_encode_varint(b->data + b->len, v);
}

static void pb_put_tag(struct pb_buf *b, uint32_t field, enum pb_wire_type wire)
{
	pb_put_varint(b, ((uint64_t)field << 3) | wire);
}

void pb_raw(struct pb_buf *b, const void *data, size_t len)
{
	if (!len || !pb_reserve(b, len))
		return;
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

uint8_t *pb_claim_slow(struct pb_buf *b, size_t max)
{
	return pb_reserve(b, max) ? b->data + b->len : NULL;
}

void pb_varint_slow(struct pb_buf *b, uint32_t field, uint64_t value)
{
	pb_put_tag(b, field, PB_WIRE_VARINT);
	pb_put_varint(b, value);
}

void pb_int(struct pb_buf *b, uint32_t field, int64_t value)
{
	pb_varint(b, field, (uint64_t)value);
}

void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t value)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(value >> (8 * i));
	pb_put_tag(b, field, PB_WIRE_FIXED64);
	pb_raw(b, le, sizeof(le));
}

void pb_double(struct pb_buf *b, uint32_t field, double value)
{
	uint64_t bits;

	memcpy(&bits, &value, sizeof(bits));
	pb_fixed64(b, field, bits);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len)
{
	pb_put_tag(b, field, PB_WIRE_LEN);
	pb_put_varint(b, len);
	pb_raw(b, data, len);
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

size_t pb_begin(struct pb_buf *b, uint32_t field)
{
	pb_put_tag(b, field, PB_WIRE_LEN);
	/* One byte for the length: most bodies are shorter than 128 bytes. */
	if (pb_reserve(b, 1))
		b->data[b->len++] = 0;
	return b->len;
}

void pb_end(struct pb_buf *b, size_t token)
{
	size_t body = b->len - token;
	size_t n = pb_varint_len(body);

	if (b->err)
		return;
	if (n > 1) {
		if (!pb_reserve(b, n - 1))
			return;
		memmove(b->data + token + n - 1, b->data + token, body);
		b->len += n - 1;
	}
	pb_encode_varint(b->data + token - 1, body);
}

void pb_reader_init(struct pb_reader *r, const void *data, size_t len)
{
	r->base = data;
	r->p = data;
	r->end = r->p + len;
	r->depth = 0;
}

int pb_read_varint(struct pb_reader *r, uint64_t *value)
{
	uint64_t v = 0;

	for (int i = 0; i < PB_MAX_VARINT_BYTES; i++) {
		uint8_t byte;

		if (r->p >= r->end)
			return PB_ERR_TRUNCATED;
		byte = *r->p++;
		/* The tenth byte holds bit 63 only. */
		if (i == PB_MAX_VARINT_BYTES - 1 && byte > 1)
			return PB_ERR_VARINT_LONG;
		v |= (uint64_t)(byte & 0x7f) << (7 * i);
		if (!(byte & 0x80)) {
			*value = v;
			return 0;
		}
	}
	return PB_ERR_VARINT_LONG;
}

static int pb_read_le(struct pb_reader *r, unsigned bytes, uint64_t *value)
{
	uint64_t v = 0;

	if ((size_t)(r->end - r->p) < bytes)
		return PB_ERR_TRUNCATED;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += bytes;
	*value = v;
	return 0;
}

int pb_read_fixed64(struct pb_reader *r, uint64_t *value)
{
	return pb_read_le(r, 8, value);
}

static int pb_read_value(struct pb_reader *r, struct pb_field *f)
{
	uint64_t len;
	int err;

	switch (f->wire) {
	case PB_WIRE_VARINT:
		return pb_read_varint(r, &f->value);
	case PB_WIRE_FIXED64:
		return pb_read_le(r, 8, &f->value);
	case PB_WIRE_FIXED32:
		return pb_read_le(r, 4, &f->value);
	case PB_WIRE_LEN:
		err = pb_read_varint(r, &len);
		if (err)
			return err;
		if (len > (uint64_t)(r->end - r->p))
			return PB_ERR_LENGTH;
		f->data = r->p;
		f->len = (size_t)len;
		r->p += len;
		return 0;
	}
	return PB_ERR_WIRE_TYPE;
}

int pb_next(struct pb_reader *r, struct pb_field *f)
{
	uint64_t tag;
	int err;

	if (r->p >= r->end)
		return 0;
	f->offset = pb_offset(r);
	err = pb_read_varint(r, &tag);
	if (err)
		return err;
	if ((tag >> 3) == 0 || (tag >> 3) > PB_MAX_FIELD)
		return PB_ERR_FIELD_NUMBER;
	f->number = (uint32_t)(tag >> 3);
	f->wire = (enum pb_wire_type)(tag & 7);
	f->value = 0;
	f->data = NULL;
	f->len = 0;
	err = pb_read_value(r, f);
	return err ? err : 1;
}

int pb_enter(const struct pb_reader *r, const struct pb_field *f, struct pb_reader *sub)
{
	if (f->wire != PB_WIRE_LEN)
		return PB_ERR_WIRE_TYPE;
	if (r->depth + 1 > PB_MAX_DEPTH)
		return PB_ERR_DEPTH;
	sub->base = r->base;
	sub->p = f->data;
	sub->end = f->data + f->len;
	sub->depth = r->depth + 1;
	return 0;
}

size_t pb_offset(const struct pb_reader *r)
{
	return (size_t)(r->p - r->base);
}

double pb_field_double(const struct pb_field *f)
{
	double d;

	memcpy(&d, &f->value, sizeof(d));
	return d;
}

const char *pb_strerror(int err)
{
	switch (err) {
	case PB_ERR_TRUNCATED:
		return "data ends inside a value";
	case PB_ERR_VARINT_LONG:
		return "varint longer than 10 bytes or wider than 64 bits";
	case PB_ERR_LENGTH:
		return "length larger than the bytes that remain";
	case PB_ERR_WIRE_TYPE:
		return "unknown or unexpected wire type";
	case PB_ERR_FIELD_NUMBER:
		return "field number 0 or out of range";
	case PB_ERR_DEPTH:
		return "messages nested too deeply";
	}
	return "malformed protobuf";
}
