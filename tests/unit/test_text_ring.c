// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Lines from the dump builder to the event loop, with no lock between them. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "base/text_ring.h"

struct got {
	char text[4096];
	size_t len;
	unsigned int streams[64];
	unsigned int records;
	unsigned int pieces; /* records that came in two pieces */
};

static void take(void *ctx, unsigned int stream, const char *a, size_t alen, const char *b,
		 size_t blen)
{
	struct got *g = ctx;

	if (g->records < 64)
		g->streams[g->records] = stream;
	g->records++;
	if (blen)
		g->pieces++;
	memcpy(g->text + g->len, a, alen);
	memcpy(g->text + g->len + alen, b, blen);
	g->len += alen + blen;
}

TEST(records_come_out_in_order_with_their_streams)
{
	struct ht_text_ring r;
	struct got g = { 0 };

	CHECK(!ht_text_ring_init(&r, 256));
	CHECK(ht_text_ring_put(&r, 0, "one\n", 4));
	CHECK(ht_text_ring_put(&r, 1, "{\"two\":2}\n", 10));
	CHECK(ht_text_ring_put(&r, 0, "three\n", 6));
	CHECK_EQ_U64(ht_text_ring_drain(&r, take, &g), 3);
	CHECK_EQ_U64(g.len, 20);
	CHECK(!memcmp(g.text, "one\n{\"two\":2}\nthree\n", 20));
	CHECK(g.streams[0] == 0 && g.streams[1] == 1 && g.streams[2] == 0);
	CHECK_EQ_U64(ht_text_ring_drain(&r, take, &g), 0);
	ht_text_ring_free(&r);
}

/* A full ring refuses what does not fit, takes it again once the reader made room. */
TEST(a_full_ring_refuses_until_read)
{
	struct ht_text_ring r;
	struct got g = { 0 };
	char line[40];

	memset(line, 'x', sizeof(line));
	CHECK(!ht_text_ring_init(&r, 128));
	/* 8 bytes of header, 40 of text: two fit in 128, a third does not. */
	CHECK(ht_text_ring_put(&r, 0, line, sizeof(line)));
	CHECK(ht_text_ring_put(&r, 0, line, sizeof(line)));
	CHECK(!ht_text_ring_put(&r, 0, line, sizeof(line)));
	CHECK_EQ_U64(ht_text_ring_drain(&r, take, &g), 2);
	CHECK(ht_text_ring_put(&r, 0, line, sizeof(line)));
	/* Longer than the ring can ever hold: refused, not cut. */
	CHECK(!ht_text_ring_put(&r, 0, g.text, ht_text_ring_max(&r) + 1));
	ht_text_ring_free(&r);
}

/* A record that runs past the ring's end comes out whole, in two pieces. */
TEST(a_record_across_the_end_comes_out_whole)
{
	struct ht_text_ring r;
	struct got g = { 0 };
	const char *text = "0123456789abcdefghijklmnopqrstuvwxyz\n";

	CHECK(!ht_text_ring_init(&r, 64));
	CHECK(ht_text_ring_put(&r, 0, "aaaaaaaaaaaaaaaaaaaaaaaa", 24));
	CHECK_EQ_U64(ht_text_ring_drain(&r, take, &g), 1);
	memset(&g, 0, sizeof(g));
	CHECK(ht_text_ring_put(&r, 1, text, strlen(text)));
	CHECK_EQ_U64(ht_text_ring_drain(&r, take, &g), 1);
	CHECK_EQ_U64(g.pieces, 1);
	CHECK_EQ_U64(g.len, strlen(text));
	CHECK(!memcmp(g.text, text, strlen(text)));
	ht_text_ring_free(&r);
}

/* One writer and one reader at once: every line arrives, once, in order. */
#define LINES 200000

static struct ht_text_ring shared;
static int writer_done;

static void *writer(void *arg)
{
	struct ht_text_ring *r = arg;
	char line[32];

	for (unsigned int i = 0; i < LINES; i++) {
		int n = snprintf(line, sizeof(line), "%u\n", i);

		while (!ht_text_ring_put(r, i & 1, line, (size_t)n))
			;
	}
	__atomic_store_n(&writer_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct check_order {
	unsigned int next;
	bool ok;
};

static void check_line(void *ctx, unsigned int stream, const char *a, size_t alen, const char *b,
		       size_t blen)
{
	struct check_order *c = ctx;
	char line[32];
	unsigned int v;

	if (alen + blen >= sizeof(line)) {
		c->ok = false;
		return;
	}
	memcpy(line, a, alen);
	memcpy(line + alen, b, blen);
	line[alen + blen] = 0;
	if (sscanf(line, "%u", &v) != 1 || v != c->next || stream != (v & 1))
		c->ok = false;
	c->next++;
}

TEST(a_writer_and_a_reader_at_once_lose_nothing)
{
	struct check_order c = { 0, true };
	pthread_t t;

	CHECK(!ht_text_ring_init(&shared, 1024));
	CHECK(!pthread_create(&t, NULL, writer, &shared));
	/* Until the writer is done and the ring empty: a lost line shows as a short count. */
	while (!__atomic_load_n(&writer_done, __ATOMIC_ACQUIRE) ||
	       ht_text_ring_drain(&shared, check_line, &c))
		ht_text_ring_drain(&shared, check_line, &c);
	pthread_join(t, NULL);
	CHECK(c.ok);
	CHECK_EQ_U64(c.next, LINES);
	ht_text_ring_free(&shared);
}
