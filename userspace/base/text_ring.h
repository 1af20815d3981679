/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Text from one thread to another without a lock: one producer appends
 * records (a stream number and its bytes), one consumer takes them in order.
 * Neither ever waits on the other: a record that does not fit is refused,
 * and the producer tries again later. The dump builder hands its lines to
 * the event loop this way (dumper.c): a thread at nice 19 that held a lock
 * the event loop needs could keep it waiting for as long as the target
 * keeps their CPU busy.
 */
#ifndef HT_TEXT_RING_H
#define HT_TEXT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ht_text_ring {
	char *buf;
	size_t size;   /* a multiple of 8 */
	uint64_t head; /* bytes ever appended: the producer's */
	uint64_t tail; /* bytes ever taken: the consumer's */
};

/* A ring of SIZE bytes (rounded up to a multiple of 8). Returns 0, or -1 with ht_last_error(). */
int ht_text_ring_init(struct ht_text_ring *r, size_t size);
void ht_text_ring_free(struct ht_text_ring *r);

/* The longest record the ring takes. */
size_t ht_text_ring_max(const struct ht_text_ring *r);

/* Producer: append LEN bytes of STREAM; false when they do not fit now (or ever). */
bool ht_text_ring_put(struct ht_text_ring *r, unsigned int stream, const char *text, size_t len);

/*
 * Consumer: hand each record to FN in order, as one or two pieces (A, then
 * B where it wraps around the ring's end; BLEN 0 otherwise). Returns how many.
 */
typedef void (*ht_text_ring_fn)(void *ctx, unsigned int stream, const char *a, size_t alen,
				const char *b, size_t blen);
unsigned int ht_text_ring_drain(struct ht_text_ring *r, ht_text_ring_fn fn, void *ctx);

#endif /* HT_TEXT_RING_H */
