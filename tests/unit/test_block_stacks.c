// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --block-stacks in user space: records kept until their breach, the fp fixup, the hint. */
#include <stdbool.h>
#include "kernel/block_stacks.h"
#include "check.h"
#include "cli/options.h"
#include "symbols/unwind_dwarf.h"

/* A store without symbols or unwinding: frames are addresses. */
static void store(struct ht_block_stacks *bs, unsigned int mode)
{
	memset(bs, 0, sizeof(*bs));
	bs->mode = mode;
}

static void add_fp(struct ht_block_stacks *bs, uint32_t tid, uint32_t seq, uint64_t switch_ns,
		   int frames)
{
	struct ht_block_stack_fp r;

	memset(&r, 0, sizeof(r));
	r.head = (struct ht_block_stack_head){switch_ns, tid, HT_BLOCK_STACK_FP,
					      frames * (int32_t)sizeof(uint64_t), seq};
	for (int i = 0; i < frames; i++)
		r.ips[i] = 0x1000 * (tid % 16 + 1) + (uint64_t)i;
	CHECK(!ht_block_stacks_add(bs, &r, sizeof(r)));
}

TEST(fixup_puts_back_the_frames_a_frame_pointer_walk_skips)
{
	/* libc's __lll_lock_wait, then the walk's next frame is take_convoy_lock's caller. */
	const uint64_t fp[] = {0x100, 0x500, 0x600};
	/* CFI from the leaf: lock_wait, mutex_lock, take_convoy_lock, then the same caller. */
	const uint64_t cfi[] = {0x100, 0x200, 0x300, 0x500, 0x600};
	const uint64_t want[] = {0x100, 0x200, 0x300, 0x500, 0x600};
	uint64_t out[8];
	int n = ht_block_stack_fixup(fp, 3, cfi, 4, out, 8);

	CHECK_EQ_U64(n, 5);
	CHECK(!memcmp(out, want, sizeof(want)));
	/* A frame that has its frame pointer: CFI meets the walk at once, nothing changes. */
	n = ht_block_stack_fixup(fp, 3, (const uint64_t[]){0x100, 0x500}, 2, out, 8);
	CHECK_EQ_U64(n, 3);
	CHECK(!memcmp(out, fp, sizeof(fp)));
	/* Bounded by MAX. */
	n = ht_block_stack_fixup(fp, 3, cfi, 4, out, 2);
	CHECK_EQ_U64(n, 2);
	CHECK_EQ_U64(out[1], 0x200);
}

TEST(fixup_keeps_the_walk_where_cfi_does_not_meet_it)
{
	const uint64_t fp[] = {0x100, 0x500, 0x600};
	uint64_t out[8];
	int n;

	/* CFI stopped before the walk's second frame (the copy was too short). */
	n = ht_block_stack_fixup(fp, 3, (const uint64_t[]){0x100, 0x200}, 2, out, 8);
	CHECK_EQ_U64(n, 3);
	CHECK(!memcmp(out, fp, sizeof(fp)));
	/* CFI of another place: never spliced in. */
	n = ht_block_stack_fixup(fp, 3, (const uint64_t[]){0x101, 0x200, 0x500}, 3, out, 8);
	CHECK_EQ_U64(n, 3);
	CHECK(!memcmp(out, fp, sizeof(fp)));
	/* A walk one frame deep has nothing to meet: the hint says so instead. */
	n = ht_block_stack_fixup(fp, 1, (const uint64_t[]){0x100, 0x200, 0x300}, 3, out, 8);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(out[0], 0x100);
}

TEST(a_breach_claims_exactly_the_stack_it_names)
{
	struct ht_block_stacks bs;
	struct ht_block_frames fr;
	size_t len;
	void *r;

	store(&bs, HT_BLOCK_STACK_FP);
	add_fp(&bs, 7, 4, 1000, 3);
	add_fp(&bs, 8, 4, 1500, 2);
	add_fp(&bs, 7, 5, 2000, 4);
	/* The one named, whatever its time: not the newest, not one in some window. */
	r = ht_block_stacks_claim(&bs, 7, 4, &len);
	CHECK(r && ((struct ht_block_stack_head *)r)->switch_ns == 1000);
	CHECK_EQ_U64(len, sizeof(struct ht_block_stack_fp));
	free(r);
	/* Not another thread's; a later one of the thread waits for its own breach. */
	CHECK(!ht_block_stacks_claim(&bs, 9, 5, &len));
	CHECK(!ht_block_stacks_claim(&bs, 7, 3, &len));
	CHECK_EQ_U64(bs.missing, 2);
	CHECK(!ht_block_stacks_take(&bs, 0, 7, 5, &fr));
	CHECK_EQ_U64(fr.switch_ns, 2000);
	CHECK_EQ_U64(fr.tid, 7);
	CHECK_EQ_U64(fr.depth, 4);
	CHECK_STR(fr.f[0].function, "0x8000");
	CHECK_STR(fr.f[3].function, "0x8003");
	CHECK_STR(fr.f[0].module, "");
	/* Claimed once: gone. The other thread's is still there for its own breach. */
	CHECK(ht_block_stacks_take(&bs, 0, 7, 5, &fr) == -1);
	r = ht_block_stacks_claim(&bs, 8, 4, &len);
	CHECK(r && ((struct ht_block_stack_head *)r)->switch_ns == 1500);
	free(r);
	CHECK_EQ_U64(bs.superseded, 0);
	ht_block_stacks_free(&bs);
}

TEST(a_claim_drops_the_stacks_of_sleeps_a_longer_one_replaced)
{
	struct ht_block_stacks bs;
	size_t len;
	void *r;

	/*
	 * A syscall sleeps 8 ms (held, its stack sent), then 12 ms (held
	 * instead, sent too), then 1 ms: its breach names the 12 ms sleep's
	 * stack. The 8 ms one is nobody's any more; the next sleep's is kept.
	 */
	store(&bs, HT_BLOCK_STACK_FP);
	add_fp(&bs, 7, 2, 1000, 3);
	add_fp(&bs, 7, 3, 9000, 3);
	add_fp(&bs, 7, 5, 30000, 3);
	r = ht_block_stacks_claim(&bs, 7, 3, &len);
	CHECK(r && ((struct ht_block_stack_head *)r)->switch_ns == 9000);
	free(r);
	CHECK_EQ_U64(bs.superseded, 1);
	CHECK(!ht_block_stacks_claim(&bs, 7, 2, &len));
	r = ht_block_stacks_claim(&bs, 7, 5, &len);
	CHECK(r && ((struct ht_block_stack_head *)r)->switch_ns == 30000);
	free(r);
	ht_block_stacks_free(&bs);
}

TEST(a_breach_says_why_it_has_no_stack)
{
	struct ht_breach b;

	memset(&b, 0, sizeof(b));
	b.kind = HT_BREACH_SYSCALL;
	b.flags = HT_BRF_NEVER_BLOCKED | HT_BRF_JOINED;
	CHECK_STR(ht_block_stack_missing(&b, false), "never-blocked");
	b.flags = HT_BRF_BLOCK_STACK_LOST;
	CHECK_STR(ht_block_stack_missing(&b, false), "lost");
	b.flags = 0;
	b.block_stack_seq = 9;
	CHECK_STR(ht_block_stack_missing(&b, false), "not-received");
	CHECK(!ht_block_stack_missing(&b, true));
}

TEST(stacks_whose_breach_never_came_make_room_oldest_first)
{
	struct ht_block_stacks bs;
	size_t len;
	void *r;

	store(&bs, HT_BLOCK_STACK_FP);
	for (uint32_t i = 0; i < HT_BLOCK_PENDING + 3; i++)
		add_fp(&bs, 100 + i, 1, 1000 + i, 1);
	CHECK_EQ_U64(bs.received, HT_BLOCK_PENDING + 3);
	CHECK_EQ_U64(bs.replaced, 3);
	CHECK(!ht_block_stacks_claim(&bs, 100, 1, &len));
	CHECK(!ht_block_stacks_claim(&bs, 102, 1, &len));
	r = ht_block_stacks_claim(&bs, 103, 1, &len);
	CHECK(r != NULL);
	free(r);
	ht_block_stacks_free(&bs);
}

TEST(malformed_records_are_counted_not_kept)
{
	struct ht_block_stacks bs;
	struct ht_block_stack_fp r;

	store(&bs, HT_BLOCK_STACK_FP);
	memset(&r, 0, sizeof(r));
	r.head.mode = HT_BLOCK_STACK_FP;
	r.head.tid = 5;
	CHECK(ht_block_stacks_add(&bs, &r, sizeof(r.head)) == -1);
	CHECK(ht_block_stacks_add(&bs, &r, 3) == -1);
	r.head.mode = 7;
	CHECK(ht_block_stacks_add(&bs, &r, sizeof(r)) == -1);
	/* A DWARF record is larger than an FP one: the FP size is not enough. */
	r.head.mode = HT_BLOCK_STACK_DWARF;
	CHECK(ht_block_stacks_add(&bs, &r, sizeof(r)) == -1);
	CHECK_EQ_U64(bs.malformed, 4);
	CHECK_EQ_U64(bs.received, 0);
	ht_block_stacks_free(&bs);
}

TEST(a_kernel_error_is_kept_with_no_frames)
{
	struct ht_block_stacks bs;
	struct ht_block_stack_fp r;
	struct ht_block_frames fr;
	char *text = NULL;
	size_t size = 0;
	struct ht_json j;
	FILE *f;

	store(&bs, HT_BLOCK_STACK_FP);
	memset(&r, 0, sizeof(r));
	r.head = (struct ht_block_stack_head){10, 3, HT_BLOCK_STACK_FP, -14, 1};
	CHECK(!ht_block_stacks_add(&bs, &r, sizeof(r)));
	CHECK(!ht_block_stacks_take(&bs, 0, 3, 1, &fr));
	CHECK_EQ_U64(fr.depth, 0);
	CHECK(fr.error == -14);
	f = open_memstream(&text, &size);
	ht_json_continue(&j, f);
	ht_block_frames_print_json(&j, &fr);
	ht_block_frames_print_text(f, &fr);
	fclose(f);
	CHECK_STR(text, ",\"block_stack\":[],\"block_stack_at_ns\":10,\"block_stack_error\":-14");
	free(text);
	ht_block_stacks_free(&bs);
}

TEST(dwarf_view_starts_the_copy_at_sp)
{
	static struct ht_block_stack_dwarf d;
	const uint8_t *stack;
	size_t len;

	memset(&d, 0, sizeof(d));
	d.head.mode = HT_BLOCK_STACK_DWARF;
	d.head.bytes = 2 * HT_BLOCK_STACK_PAGE_BYTES;
	d.stack_base = 0x7ffd0000;
	d.regs[HT_DWARF_REG_SP] = 0x7ffd0ff0;
	CHECK(!ht_block_stack_dwarf_view(&d, &stack, &len));
	CHECK(stack == d.stack + 0xff0);
	CHECK_EQ_U64(len, 2 * HT_BLOCK_STACK_PAGE_BYTES - 0xff0);
	/* SP beyond what was copied (the next page was not resident): nothing to unwind in. */
	d.head.bytes = HT_BLOCK_STACK_PAGE_BYTES;
	d.regs[HT_DWARF_REG_SP] = 0x7ffd1008;
	CHECK(!ht_block_stack_dwarf_view(&d, &stack, &len));
	CHECK(!stack && !len);
	d.regs[HT_DWARF_REG_SP] = 0x7ffcfff8;
	CHECK(!ht_block_stack_dwarf_view(&d, &stack, &len));
	CHECK(!len);
	/* No copy, a bad size, or no DWARF record at all. */
	d.head.bytes = -14;
	CHECK(ht_block_stack_dwarf_view(&d, &stack, &len) == -1);
	d.head.bytes = (int32_t)sizeof(d.stack) + 1;
	CHECK(ht_block_stack_dwarf_view(&d, &stack, &len) == -1);
	d.head.bytes = 64;
	d.head.mode = HT_BLOCK_STACK_FP;
	CHECK(ht_block_stack_dwarf_view(&d, &stack, &len) == -1);
}

static void frames(struct ht_block_frames *fr, unsigned int mode, const char *module, int depth)
{
	memset(fr, 0, sizeof(*fr));
	fr->mode = mode;
	fr->depth = (uint32_t)depth;
	for (int i = 0; i < depth; i++) {
		snprintf(fr->f[i].function, sizeof(fr->f[i].function), "f%d", i);
		snprintf(fr->f[i].module, sizeof(fr->f[i].module), "%s", module);
	}
}

TEST(one_frame_deep_fp_stacks_are_hinted_once_per_module)
{
	struct ht_block_stacks bs;
	struct ht_block_frames fr;

	store(&bs, HT_BLOCK_STACK_FP);
	frames(&fr, HT_BLOCK_STACK_FP, "/usr/lib/x86_64-linux-gnu/libc.so.6", 1);
	CHECK_STR(ht_block_stacks_hint(&bs, &fr), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	CHECK(!ht_block_stacks_hint(&bs, &fr));
	frames(&fr, HT_BLOCK_STACK_FP, "/usr/bin/app", 1);
	CHECK_STR(ht_block_stacks_hint(&bs, &fr), "/usr/bin/app");
	/* Deeper stacks, DWARF ones, and frames no module holds say nothing. */
	frames(&fr, HT_BLOCK_STACK_FP, "/usr/lib/other.so", 2);
	CHECK(!ht_block_stacks_hint(&bs, &fr));
	frames(&fr, HT_BLOCK_STACK_DWARF, "/usr/lib/other.so", 1);
	CHECK(!ht_block_stacks_hint(&bs, &fr));
	frames(&fr, HT_BLOCK_STACK_FP, "", 1);
	CHECK(!ht_block_stacks_hint(&bs, &fr));
	ht_block_stacks_free(&bs);
}

TEST(json_and_text_name_the_frames_innermost_first)
{
	struct ht_block_frames fr;
	char *text = NULL;
	size_t size = 0;
	struct ht_json j;
	FILE *f;

	frames(&fr, HT_BLOCK_STACK_FP, "m", 5);
	fr.switch_ns = 1234;
	snprintf(fr.f[1].function, sizeof(fr.f[1].function), "a\"b");
	f = open_memstream(&text, &size);
	ht_json_continue(&j, f);
	ht_block_frames_print_json(&j, &fr);
	fputc('|', f);
	ht_block_frames_print_text(f, &fr);
	fputc('|', f);
	fr.depth = 2;
	ht_block_frames_print_text(f, &fr);
	fclose(f);
	CHECK_STR(text, ",\"block_stack\":[\"f0\",\"a\\\"b\",\"f2\",\"f3\",\"f4\"],"
			"\"block_stack_at_ns\":1234| blocked in f0 <- a\"b <- f2 <- f3 <- ...| "
			"blocked in f0 <- a\"b");
	free(text);
}

static int parse(struct ht_options *o, const char *const *args, int n)
{
	char *argv[16];
	bool help;

	for (int i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	ht_options_init(o);
	return ht_options_parse(o, n, argv, false, &help);
}

TEST(block_stacks_needs_a_wait_threshold)
{
	struct ht_options o;

	CHECK(parse(&o, (const char *const[]){"hybtrace", "-p", "1", "--block-stacks"}, 4) == -1);
	CHECK(parse(&o,
		    (const char *const[]){"hybtrace", "-p", "1", "--block-stacks", "--off-cpu",
					  "5ms"},
		    6) == 0);
	CHECK(o.block_stacks);
	CHECK(parse(&o,
		    (const char *const[]){"hybtrace", "-p", "1", "--syscall", "5ms",
					  "--block-stacks"},
		    6) == 0);
	CHECK(parse(&o, (const char *const[]){"hybtrace", "-p", "1", "--off-cpu", "5ms"}, 5) == 0);
	CHECK(!o.block_stacks);
}

TEST(the_last_sample_says_how_long_before_it_blocked)
{
	char buf[96];

	CHECK_STR(ht_last_sample_label(2861000, "it blocked", buf, sizeof(buf)),
		  "last sample 2.86ms before it blocked");
	CHECK_STR(ht_last_sample_label(0, "the syscall began", buf, sizeof(buf)),
		  "last sample 0ns before the syscall began");
}
