// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Backward sampling rings built by hand: order, wrap, overwrite, bad records, losses. */
#include <linux/perf_event.h>
#include "check.h"
#include "sampler.h"

#define RING 1024
#define TGID 77

static uint8_t ring[RING];
static uint64_t head;

static const struct ht_sample_format fp_format = {
	.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
		       PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN,
};

/* Write a record the way the kernel does for write_backward: just below head. */
static void put(const void *rec, size_t len)
{
	head -= len;
	for (size_t i = 0; i < len; i++)
		ring[(head + i) & (RING - 1)] = ((const uint8_t *)rec)[i];
}

static void put_sample(uint32_t pid, uint32_t tid, uint64_t time, const uint64_t *user, int nuser,
		       const uint64_t *kernel, int nkernel)
{
	uint64_t rec[64];
	struct perf_event_header *h = (struct perf_event_header *)rec;
	int n = 1;

	rec[n++] = user[0];				  /* ip */
	rec[n++] = pid | (uint64_t)tid << 32;		  /* pid, tid */
	rec[n++] = time;				  /* time */
	rec[n++] = 1;					  /* cpu 1 */
	rec[n++] = 100000;				  /* period */
	rec[n++] = (uint64_t)(nuser + nkernel + (nkernel ? 2 : 1));
	if (nkernel) {
		rec[n++] = HT_PERF_CONTEXT_KERNEL;
		for (int i = 0; i < nkernel; i++)
			rec[n++] = kernel[i];
	}
	rec[n++] = HT_PERF_CONTEXT_USER;
	for (int i = 0; i < nuser; i++)
		rec[n++] = user[i];
	h->type = PERF_RECORD_SAMPLE;
	h->misc = 0;
	h->size = (uint16_t)(n * 8);
	put(rec, (size_t)n * 8);
}

static void reset(void)
{
	memset(ring, 0, sizeof(ring));
	head = 0;
}

TEST(newest_first_ring_parses_to_time_order)
{
	static const uint64_t u[] = { 0x401000, 0x402000 }, k[] = { 0xffffffff81000000ULL };
	struct ht_sample_set set = { 0 };

	reset();
	put_sample(TGID, 78, 1000, u, 2, NULL, 0);
	put_sample(TGID, 79, 2000, u, 2, k, 1);
	put_sample(TGID, 78, 3000, u, 1, NULL, 0);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 0, 10000, &set));
	ht_sample_set_sort(&set);
	CHECK_EQ_U64(set.count, 3);
	CHECK_EQ_U64(set.v[0].time_ns, 1000);
	CHECK(set.v[1].tid == 79 && set.v[1].nr_kernel == 1 && set.v[1].nr_user == 2);
	CHECK_EQ_U64(set.v[1].frames[0], 0xffffffff81000000ULL);
	CHECK_EQ_U64(set.v[1].frames[1], 0x401000);
	CHECK_EQ_U64(set.v[2].nr_user, 1);
	ht_sample_set_free(&set);
}

TEST(window_and_process_filter)
{
	static const uint64_t u[] = { 0x401000 };
	struct ht_sample_set set = { 0 };

	reset();
	put_sample(TGID, 78, 1000, u, 1, NULL, 0);
	put_sample(999, 999, 2000, u, 1, NULL, 0); /* a child process: not the target */
	put_sample(TGID, 78, 3000, u, 1, NULL, 0);
	put_sample(TGID, 78, 9000, u, 1, NULL, 0);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 1500, 5000, &set));
	CHECK_EQ_U64(set.count, 1);
	CHECK_EQ_U64(set.v[0].time_ns, 3000);
	ht_sample_set_free(&set);
}

TEST(overwritten_ring_keeps_whole_newest_records)
{
	static const uint64_t u[] = { 0x401000, 0x402000, 0x403000 };
	struct ht_sample_set set = { 0 };
	int written = 0;

	reset();
	/* 88-byte records (11 words) into 1024 bytes: wraps many times; the oldest get cut. */
	for (uint64_t t = 1; t <= 100; t++, written++)
		put_sample(TGID, 78, t * 10, u, 3, NULL, 0);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 0, 100000, &set));
	ht_sample_set_sort(&set);
	CHECK_EQ_U64(set.count, RING / 88);
	CHECK_EQ_U64(set.v[set.count - 1].time_ns, 1000);
	CHECK_EQ_U64(set.malformed, 0);
	for (size_t i = 1; i < set.count; i++)
		CHECK_EQ_U64(set.v[i].time_ns - set.v[i - 1].time_ns, 10);
	ht_sample_set_free(&set);
}

TEST(lost_and_throttle_records_are_counted)
{
	static const uint64_t u[] = { 0x401000 };
	struct ht_sample_set set = { 0 };
	uint64_t lost[3] = { 0, 1234, 17 };
	uint64_t throttle[4] = { 0, 500, 1, 2 };
	struct perf_event_header *h;

	reset();
	put_sample(TGID, 78, 1000, u, 1, NULL, 0);
	h = (struct perf_event_header *)lost;
	h->type = PERF_RECORD_LOST;
	h->size = sizeof(lost);
	put(lost, sizeof(lost));
	h = (struct perf_event_header *)throttle;
	h->type = PERF_RECORD_THROTTLE;
	h->size = sizeof(throttle);
	put(throttle, sizeof(throttle));
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 0, 100000, &set));
	CHECK_EQ_U64(set.count, 1);
	CHECK_EQ_U64(set.lost, 17);
	CHECK_EQ_U64(set.throttled, 1);
	ht_sample_set_free(&set);
}

TEST(bad_records_never_crash)
{
	struct ht_sample_set set = { 0 };
	uint64_t rec[4] = { 0 };
	struct perf_event_header *h = (struct perf_event_header *)rec;

	reset();
	/* A sample whose callchain claims more frames than the record holds. */
	h->type = PERF_RECORD_SAMPLE;
	h->size = sizeof(rec);
	rec[1] = 0x401000;
	rec[2] = TGID | (uint64_t)78 << 32;
	rec[3] = 1000;
	put(rec, sizeof(rec));
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 0, 100000, &set));
	CHECK_EQ_U64(set.count, 0);
	CHECK_EQ_U64(set.malformed, 1);
	ht_sample_set_free(&set);
	/* Random bytes. */
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < RING; i++)
			ring[i] = (uint8_t)(rand() >> 7);
		CHECK(!ht_sample_ring_parse(ring, RING, (uint64_t)rand(), &fp_format, TGID, 0,
					    UINT64_MAX, &set));
		ht_sample_set_free(&set);
	}
	CHECK(ht_sample_ring_parse(ring, 1000, 0, &fp_format, TGID, 0, 1, &set) == -1);
}

TEST(dwarf_samples_carry_registers_and_stack)
{
	struct ht_sample_format fmt = {
		.sample_type = fp_format.sample_type | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
		.regs_mask = 0x7, /* three registers */
	};
	uint64_t rec[32];
	struct perf_event_header *h = (struct perf_event_header *)rec;
	struct ht_sample_set set = { 0 };
	int n = 1;

	reset();
	rec[n++] = 0x401000;
	rec[n++] = TGID | (uint64_t)78 << 32;
	rec[n++] = 5000;
	rec[n++] = 0;
	rec[n++] = 100000;
	rec[n++] = 0; /* no callchain frames */
	rec[n++] = 2; /* abi 64 */
	rec[n++] = 11;
	rec[n++] = 22;
	rec[n++] = 33;
	rec[n++] = 16; /* stack size */
	rec[n++] = 0x1111111111111111ULL;
	rec[n++] = 0x2222222222222222ULL;
	rec[n++] = 12; /* dyn_size */
	h->type = PERF_RECORD_SAMPLE;
	h->size = (uint16_t)(n * 8);
	put(rec, (size_t)n * 8);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fmt, TGID, 0, 100000, &set));
	CHECK_EQ_U64(set.count, 1);
	CHECK(set.v[0].regs_abi == 2 && set.v[0].nr_regs == 3 && set.v[0].regs[2] == 33);
	CHECK_EQ_U64(set.v[0].stack_len, 12);
	CHECK(set.blob && set.blob[set.v[0].stack_offset] == 0x11);
	ht_sample_set_free(&set);
}
