// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Backward sampling rings built by hand: order, wrap, overwrite, bad records, losses. */
#include <linux/perf_event.h>
#include "check.h"
#include "sources/sample/sampler.h"
#include "symbols/unwind_dwarf.h"

#define RING 1024
#define TGID 77

static uint8_t ring[RING];
static uint64_t head;

#define FP_SAMPLE_TYPE                                                                             \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |                   \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN)

static const struct ht_sample_format fp_format = { .sample_type = FP_SAMPLE_TYPE };
/* What --callgraph dwarf opens, with three registers. */
static const struct ht_sample_format dwarf_format = {
	.sample_type = FP_SAMPLE_TYPE | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
	.regs_mask = 0x7,
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

/*
 * A --callgraph dwarf sample of three registers and a STACK_BYTES stack copy
 * (0: taken in the target's exit, after its memory was released), written
 * the way Linux 6.1 writes it: with no stack to copy, header.size ends at
 * the zero stack size, but a zero dyn_size follows anyway, over the first 8
 * bytes of the record before it (perf_output_sample_ustack(); see
 * overran_its_end() in sampler.c).
 */
static void put_dwarf_sample_61(uint64_t time, unsigned int stack_bytes)
{
	uint64_t rec[64] = { 0 };
	struct perf_event_header *h = (struct perf_event_header *)rec;
	size_t n = 1;

	rec[n++] = 0xffffffff81000000ULL + time; /* ip */
	rec[n++] = TGID | (uint64_t)78 << 32;	 /* pid, tid */
	rec[n++] = time;			 /* time */
	rec[n++] = 1;				 /* cpu 1 */
	rec[n++] = 100000;			 /* period */
	rec[n++] = 2;				 /* callchain: kernel frames only */
	rec[n++] = HT_PERF_CONTEXT_KERNEL;
	rec[n++] = 0xffffffff81000000ULL + time;
	rec[n++] = PERF_SAMPLE_REGS_ABI_64; /* user registers even in the exit */
	rec[n++] = 0x401000;
	rec[n++] = 0x7ffc0000;
	rec[n++] = time;
	rec[n++] = stack_bytes;
	for (unsigned int i = 0; i < stack_bytes / 8; i++)
		rec[n++] = time + i;
	if (stack_bytes)
		rec[n++] = stack_bytes - 8; /* dyn_size */
	h->type = PERF_RECORD_SAMPLE;
	h->misc = PERF_RECORD_MISC_KERNEL;
	h->size = (uint16_t)(n * 8);
	put(rec, n * 8);
	if (!stack_bytes)
		for (size_t i = 0; i < 8; i++)
			ring[(head + n * 8 + i) & (RING - 1)] = 0;
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

/*
 * A freeze copies a ring from its newest record down to the first sample
 * before the window: those bytes alone, copied out linearly, parse to the
 * window's samples as the whole ring does.
 */
TEST(a_window_needs_the_ring_down_to_its_first_sample_only)
{
	static const uint64_t u[] = { 0x401000, 0x402000, 0x403000 };
	struct ht_sample_set whole = { 0 }, part = { 0 };
	struct ht_sampler_frozen f = { .format = fp_format, .tgid = TGID, .nrings = 1 };
	uint8_t copy[RING];
	uint64_t wanted;

	reset();
	for (uint64_t t = 1; t <= 100; t++)
		put_sample(TGID, 78, t * 10, u, 3, NULL, 0);
	/* 88-byte records: 950..1000 are six, and the walk stops at 940. */
	wanted = ht_sample_ring_bytes_since(ring, RING, head, &fp_format, 950);
	CHECK_EQ_U64(wanted, 6 * 88);
	/* From the oldest whole record on: all of them, never the cut one. */
	CHECK_EQ_U64(ht_sample_ring_bytes_since(ring, RING, head, &fp_format, 0), RING / 88 * 88);
	CHECK_EQ_U64(ht_sample_ring_bytes_since(ring, RING, head, &fp_format, 5000), 0);
	for (uint64_t i = 0; i < wanted; i++)
		copy[i] = ring[(head + i) & (RING - 1)];
	/* Past them, whatever lies there is never read: here, the newest sample again. */
	for (uint64_t i = wanted; i + 88 <= sizeof(copy); i += 88)
		memcpy(copy + i, copy, 88);
	f.rings = &(typeof(*f.rings)){ .data = copy, .size = RING, .head = 0, .valid = wanted };
	CHECK(!ht_sampler_frozen_samples(&f, 950, 2000, &part));
	CHECK(!ht_sample_ring_parse(ring, RING, head, &fp_format, TGID, 950, 2000, &whole));
	ht_sample_set_sort(&whole);
	CHECK_EQ_U64(part.count, 6);
	CHECK_EQ_U64(part.count, whole.count);
	CHECK_EQ_U64(part.malformed, 0);
	for (size_t i = 0; i < part.count && i < whole.count; i++)
		CHECK_EQ_U64(part.v[i].time_ns, whole.v[i].time_ns);
	ht_sample_set_free(&part);
	ht_sample_set_free(&whole);
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
	/* Random bytes behind a sample that overran its end: headers rebuilt from garbage. */
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < RING; i++)
			ring[i] = (uint8_t)(rand() >> 7);
		head = (uint64_t)rand();
		put_dwarf_sample_61(UINT64_MAX - (uint64_t)round, 0);
		CHECK(!ht_sample_ring_parse(ring, RING, head, &dwarf_format, TGID, 0, UINT64_MAX,
					    &set));
		CHECK(set.count >= 1);
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

TEST(linux_61_exit_samples_keep_the_samples_before_them)
{
	struct ht_sample_set set = { 0 };

	/*
	 * Records of 184 (with a stack) and 112 bytes (in the exit), from three
	 * places: in one piece; the one at 3000 ending where the ring does, so its
	 * overrun lands at the ring's start; and that one across the ring's end.
	 */
	static const uint64_t starts[] = { 0, 368, 424 };

	for (size_t round = 0; round < sizeof(starts) / sizeof(starts[0]); round++) {
		reset();
		head = starts[round];
		put_dwarf_sample_61(1000, 64);
		put_dwarf_sample_61(2000, 64);
		put_dwarf_sample_61(3000, 0); /* 112 bytes: overwrites the header at 2000's */
		put_dwarf_sample_61(4000, 0);
		put_dwarf_sample_61(5000, 0);
		CHECK(!ht_sample_ring_parse(ring, RING, head, &dwarf_format, TGID, 0, 100000,
					    &set));
		ht_sample_set_sort(&set);
		CHECK_EQ_U64(set.count, 5);
		CHECK_EQ_U64(set.rebuilt, 3);
		CHECK_EQ_U64(set.malformed, 0);
		for (size_t i = 0; i < set.count; i++)
			CHECK_EQ_U64(set.v[i].time_ns, (i + 1) * 1000);
		/* The rebuilt sample with a stack is whole: registers, stack, its dyn_size. */
		CHECK(set.count == 5 && set.v[1].nr_regs == 3 && set.v[1].regs[2] == 2000);
		CHECK(set.count == 5 && set.v[1].stack_len == 56 &&
		      set.blob[set.v[1].stack_offset] == (uint8_t)2000);
		CHECK(set.count == 5 && set.v[4].stack_len == 0 && set.v[4].nr_kernel == 1);
		ht_sample_set_free(&set);
	}
}

TEST(a_zero_header_is_rebuilt_only_where_a_sample_overran)
{
	struct ht_sample_set set = { 0 };

	/* The target's first sample, in its exit: what follows was never written. */
	reset();
	put_dwarf_sample_61(5000, 0);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &dwarf_format, TGID, 0, 100000, &set));
	CHECK(set.count == 1 && set.rebuilt == 0 && set.malformed == 0);
	ht_sample_set_free(&set);
	/* A zero header after a sample that did not overrun its end: the walk ends there. */
	reset();
	put_dwarf_sample_61(1000, 64);
	memset(ring + (head & (RING - 1)), 0, sizeof(struct perf_event_header));
	put_dwarf_sample_61(2000, 64);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &dwarf_format, TGID, 0, 100000, &set));
	CHECK(set.count == 1 && set.v[0].time_ns == 2000 && set.rebuilt == 0);
	ht_sample_set_free(&set);
	/* Behind an overrun, fields that are no sample taken before it: counted, not guessed. */
	reset();
	put_dwarf_sample_61(9000, 64);
	put_dwarf_sample_61(5000, 0);
	CHECK(!ht_sample_ring_parse(ring, RING, head, &dwarf_format, TGID, 0, 100000, &set));
	CHECK(set.count == 1 && set.v[0].time_ns == 5000);
	CHECK(set.rebuilt == 0 && set.malformed == 1);
	ht_sample_set_free(&set);
}

/*
 * The newest 1168 bytes of a CPU's ring as hybtrace read them on Debian's
 * 6.1.0-57-cloud (6.1.192): the target sampled at 200 Hz while its exit
 * released 256 MiB. Four samples taken in the exit, kernel frames only, user
 * registers, stack size 0; the newest has its header, each older one's is
 * zero (the dyn_size of the one written after it). Registers as
 * HT_DWARF_SAMPLE_REGS_MASK.
 */
static const uint64_t linux_61_exit_ring[] = {
	0x0100000100000009, 0xffffffffa4e9ac02, 0x0000008000000080, 0x000000026cb06e39,
	0x0000000000000000, 0x00000000004c4b40, 0x0000000000000006, 0xffffffffffffff80,
	0xffffffffa4e9ac02, 0xffffffffa4e9b32d, 0xffffffffa4e9b394, 0xffffffffa5803f4d,
	0xffffffffa5a00126, 0x0000000000000002, 0xffffffffffffffda, 0x00007f93577989e0,
	0x00007f935769d409, 0x000000000000003c, 0x00000000000000e7, 0x0000000000000000,
	0x0000000000000000, 0x00007fff4ce14458, 0x00007f935769d409, 0xffffffffffffff80,
	0x00007fff4ce1438f, 0x00007fff4ce14310, 0x0000000000000246, 0x00007f93577989e0,
	0x00007f935779e2e0, 0x0000000000000001, 0x00007f935779e2c8, 0x0000000000000000,
	0x0000000000000000, 0xffffffffa5818139, 0x0000008000000080, 0x000000026c63f54c,
	0x0000000000000000, 0x00000000004c4b40, 0x000000000000000c, 0xffffffffffffff80,
	0xffffffffa5818139, 0xffffffffa508258f, 0xffffffffa50cdcad, 0xffffffffa50ce384,
	0xffffffffa50cb23d, 0xffffffffa4e910ae, 0xffffffffa4e9aa46, 0xffffffffa4e9b32d,
	0xffffffffa4e9b394, 0xffffffffa5803f4d, 0xffffffffa5a00126, 0x0000000000000002,
	0xffffffffffffffda, 0x00007f93577989e0, 0x00007f935769d409, 0x000000000000003c,
	0x00000000000000e7, 0x0000000000000000, 0x0000000000000000, 0x00007fff4ce14458,
	0x00007f935769d409, 0xffffffffffffff80, 0x00007fff4ce1438f, 0x00007fff4ce14310,
	0x0000000000000246, 0x00007f93577989e0, 0x00007f935779e2e0, 0x0000000000000001,
	0x00007f935779e2c8, 0x0000000000000000, 0x0000000000000000, 0xffffffffa50bb3ad,
	0x0000008000000080, 0x000000026c1791cb, 0x0000000000000000, 0x00000000004c4b40,
	0x000000000000000a, 0xffffffffffffff80, 0xffffffffa50bb3ad, 0xffffffffa50bc04a,
	0xffffffffa50cb1d4, 0xffffffffa4e910ae, 0xffffffffa4e9aa46, 0xffffffffa4e9b32d,
	0xffffffffa4e9b394, 0xffffffffa5803f4d, 0xffffffffa5a00126, 0x0000000000000002,
	0xffffffffffffffda, 0x00007f93577989e0, 0x00007f935769d409, 0x000000000000003c,
	0x00000000000000e7, 0x0000000000000000, 0x0000000000000000, 0x00007fff4ce14458,
	0x00007f935769d409, 0xffffffffffffff80, 0x00007fff4ce1438f, 0x00007fff4ce14310,
	0x0000000000000246, 0x00007f93577989e0, 0x00007f935779e2e0, 0x0000000000000001,
	0x00007f935779e2c8, 0x0000000000000000, 0x0000000000000000, 0xffffffffa4f73a10,
	0x0000008000000080, 0x000000026c1120e8, 0x0000000000000000, 0x00000000004c4b40,
	0x000000000000000e, 0xffffffffffffff80, 0xffffffffa4f73a10, 0xffffffffa5137e61,
	0xffffffffa5138e03, 0xffffffffa50d795d, 0xffffffffa50bb3ad, 0xffffffffa50bc04a,
	0xffffffffa50cb1d4, 0xffffffffa4e910ae, 0xffffffffa4e9aa46, 0xffffffffa4e9b32d,
	0xffffffffa4e9b394, 0xffffffffa5803f4d, 0xffffffffa5a00126, 0x0000000000000002,
	0xffffffffffffffda, 0x00007f93577989e0, 0x00007f935769d409, 0x000000000000003c,
	0x00000000000000e7, 0x0000000000000000, 0x0000000000000000, 0x00007fff4ce14458,
	0x00007f935769d409, 0xffffffffffffff80, 0x00007fff4ce1438f, 0x00007fff4ce14310,
	0x0000000000000246, 0x00007f93577989e0, 0x00007f935779e2e0, 0x0000000000000001,
	0x00007f935779e2c8, 0x0000000000000000,
};

TEST(linux_61_ring_bytes_parse_to_every_sample)
{
	static const uint64_t times_ns[] = { 10402996456ULL, 10403418571ULL, 10408424780ULL,
					     10413436473ULL };
	struct ht_sample_format fmt = {
		.sample_type = dwarf_format.sample_type,
		.regs_mask = HT_DWARF_SAMPLE_REGS_MASK,
	};
	static uint8_t bytes[2048]; /* the rest never written: the walk ends after them */
	struct ht_sample_set set = { 0 };

	memcpy(bytes, linux_61_exit_ring, sizeof(linux_61_exit_ring));
	CHECK(!ht_sample_ring_parse(bytes, sizeof(bytes), 0, &fmt, 128, 0, UINT64_MAX, &set));
	ht_sample_set_sort(&set);
	CHECK_EQ_U64(set.count, 4);
	CHECK_EQ_U64(set.rebuilt, 3);
	CHECK_EQ_U64(set.malformed, 0);
	for (size_t i = 0; i < set.count && i < 4; i++) {
		CHECK_EQ_U64(set.v[i].time_ns, times_ns[i]);
		CHECK(set.v[i].tid == 128 && set.v[i].regs_abi == PERF_SAMPLE_REGS_ABI_64);
		CHECK(set.v[i].nr_regs == 17 && set.v[i].nr_kernel > 0 && !set.v[i].stack_len);
	}
	ht_sample_set_free(&set);
}
