// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/text_ring.h"

/*
 * A record: this header, then its bytes, padded to 8. Head and tail move in
 * steps of 8 over a size that is a multiple of 8, so a header never wraps.
 */
struct record_header {
	uint32_t len;
	uint32_t stream;
};

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

int ht_text_ring_init(struct ht_text_ring *r, size_t size)
{
	memset(r, 0, sizeof(*r));
	r->size = ALIGN8(size < 64 ? 64 : size);
	r->buf = malloc(r->size);
	if (!r->buf)
		return ht_fail("out of memory for a text ring of %zu bytes", r->size);
	return 0;
}

void ht_text_ring_free(struct ht_text_ring *r)
{
	free(r->buf);
	r->buf = NULL;
}

size_t ht_text_ring_max(const struct ht_text_ring *r)
{
	return r->size - sizeof(struct record_header);
}

/* Copy LEN bytes to ring offset AT, wrapping at its end. */
static void copy_in(struct ht_text_ring *r, uint64_t at, const char *src, size_t len)
{
	size_t off = (size_t)(at % r->size), first = r->size - off;

	if (first > len)
		first = len;
	memcpy(r->buf + off, src, first);
	memcpy(r->buf, src + first, len - first);
}

bool ht_text_ring_put(struct ht_text_ring *r, unsigned int stream, const char *text, size_t len)
{
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	size_t total = sizeof(struct record_header) + ALIGN8(len);
	struct record_header h = { (uint32_t)len, stream };

	if (len > ht_text_ring_max(r) || total > r->size - (size_t)(r->head - tail))
		return false;
	memcpy(r->buf + r->head % r->size, &h, sizeof(h));
	copy_in(r, r->head + sizeof(h), text, len);
	/* The bytes first, then the head that shows them. */
	__atomic_store_n(&r->head, r->head + total, __ATOMIC_RELEASE);
	return true;
}

unsigned int ht_text_ring_drain(struct ht_text_ring *r, ht_text_ring_fn fn, void *ctx)
{
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	unsigned int n = 0;

	while (r->tail != head) {
		struct record_header h;
		size_t off, first;

		memcpy(&h, r->buf + r->tail % r->size, sizeof(h));
		off = (size_t)((r->tail + sizeof(h)) % r->size);
		first = r->size - off < h.len ? r->size - off : h.len;
		fn(ctx, h.stream, r->buf + off, first, r->buf, h.len - first);
		/* The record is read: its room goes back to the producer. */
		__atomic_store_n(&r->tail, r->tail + sizeof(h) + ALIGN8(h.len), __ATOMIC_RELEASE);
		n++;
	}
	return n;
}
