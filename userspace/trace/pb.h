/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Protocol-buffer wire format, by hand: an output buffer that grows, and a
 * bounded reader that never looks past the bytes it was given.
 *
 * Writing: pb_varint() and friends append one field (tag and value).
 * A nested message is pb_begin() ... pb_end(): the length is patched in at
 * pb_end(), moving the body only when it is 128 bytes or longer, so the
 * encoding stays minimal and costs about one copy of the short bodies.
 * Allocation failure is sticky: later calls do nothing and pb_buf.err says
 * -ENOMEM, so a writer checks once at the end.
 *
 * Reading: pb_next() returns one field at a time; pb_enter() opens a
 * length-delimited field as a nested message, one level deeper, up to
 * PB_MAX_DEPTH levels. Malformed input gives a negative PB_ERR_* code.
 */
#ifndef HT_PB_H
#define HT_PB_H

#include <stddef.h>
#include <stdint.h>

enum pb_wire_type {
	PB_WIRE_VARINT = 0,
	PB_WIRE_FIXED64 = 1,
	PB_WIRE_LEN = 2,
	PB_WIRE_FIXED32 = 5,
};

/* No writer of ours nests deeper than 6; real Perfetto traces stay well under this. */
#define PB_MAX_DEPTH 32

/* The most a field number may be (2^29 - 1). */
#define PB_MAX_FIELD ((1u << 29) - 1)

struct pb_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err; /* 0 or -ENOMEM, sticky */
};

void pb_buf_init(struct pb_buf *b);
void pb_buf_free(struct pb_buf *b);
/* Forget the contents, keep the memory. */
void pb_buf_reset(struct pb_buf *b);
/* Cut the buffer back to LEN bytes (LEN <= b->len), e.g. to drop an empty message. */
void pb_buf_truncate(struct pb_buf *b, size_t len);
/* Append raw bytes (no tag). */
void pb_raw(struct pb_buf *b, const void *data, size_t len);
uint8_t *pb_claim_slow(struct pb_buf *b, size_t max);

/*
 * Room for up to MAX bytes written in place, or NULL (b->err set) when
 * memory ran out; the writer then adds what it used to b->len. Inline for
 * the same reason as pb_varint.
 */
static inline uint8_t *pb_claim(struct pb_buf *b, size_t max)
{
	if (b->err || b->cap - b->len < max)
		return pb_claim_slow(b, max);
	return b->data + b->len;
}

void pb_varint_slow(struct pb_buf *b, uint32_t field, uint64_t value);

/*
 * A varint field. Inline: a dump has millions of them, and with room for
 * the longest tag and value (20 bytes) they are written in place.
 */
static inline void pb_varint(struct pb_buf *b, uint32_t field, uint64_t value)
{
	uint64_t tag = (uint64_t)field << 3; /* wire type 0 */
	uint8_t *p;

	if (b->err || b->cap - b->len < 20) {
		pb_varint_slow(b, field, value);
		return;
	}
	p = b->data + b->len;
	while (tag >= 0x80) {
		*p++ = (uint8_t)(tag | 0x80);
		tag >>= 7;
	}
	*p++ = (uint8_t)tag;
	while (value >= 0x80) {
		*p++ = (uint8_t)(value | 0x80);
		value >>= 7;
	}
	*p++ = (uint8_t)value;
	b->len = (size_t)(p - b->data);
}
/* A signed int32/int64 field: negative values take ten bytes, as protobuf says. */
void pb_int(struct pb_buf *b, uint32_t field, int64_t value);
void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t value);
void pb_double(struct pb_buf *b, uint32_t field, double value);
void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);

/* Start a nested message in FIELD; returns a token for pb_end(). */
size_t pb_begin(struct pb_buf *b, uint32_t field);
/* Close the message pb_begin() opened and patch its length in. */
void pb_end(struct pb_buf *b, size_t token);

enum pb_error {
	PB_ERR_TRUNCATED = -1,	  /* a varint or fixed value runs past the end */
	PB_ERR_VARINT_LONG = -2,  /* a varint longer than 10 bytes or over 64 bits */
	PB_ERR_LENGTH = -3,	  /* a length larger than what remains */
	PB_ERR_WIRE_TYPE = -4,	  /* wire type 3, 4, 6 or 7 */
	PB_ERR_FIELD_NUMBER = -5, /* field number 0 or above PB_MAX_FIELD */
	PB_ERR_DEPTH = -6,	  /* nested deeper than PB_MAX_DEPTH */
};

/* A cursor over one message: [p, end) within the whole input [base, ...). */
struct pb_reader {
	const uint8_t *base;
	const uint8_t *p;
	const uint8_t *end;
	unsigned depth;
};

struct pb_field {
	uint32_t number;
	enum pb_wire_type wire;
	uint64_t value;	     /* varint, fixed64 or fixed32 value */
	const uint8_t *data; /* length-delimited payload */
	size_t len;
	size_t offset; /* where the field's tag starts in the whole input */
};

void pb_reader_init(struct pb_reader *r, const void *data, size_t len);
/* Read the next field: 1 when one was read, 0 at the end, or a PB_ERR_*. */
int pb_next(struct pb_reader *r, struct pb_field *f);
/* Open length-delimited field F (read from R) as a message one level deeper. */
int pb_enter(const struct pb_reader *r, const struct pb_field *f, struct pb_reader *sub);
/* Read one bare varint / fixed64 (the elements of a packed repeated field). */
int pb_read_varint(struct pb_reader *r, uint64_t *value);
int pb_read_fixed64(struct pb_reader *r, uint64_t *value);
/* Offset of the cursor in the whole input, for error messages. */
size_t pb_offset(const struct pb_reader *r);
/* The field's value as a double (a fixed64 holding IEEE 754 bits). */
double pb_field_double(const struct pb_field *f);
/* One line saying what a PB_ERR_* code means. */
const char *pb_strerror(int err);

#endif /* HT_PB_H */
