// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Kernel symbols: the text of a function, as the monitor's softirq check needs it. */
#include "check.h"
#include "symbols/ksyms.h"

/* A function's text runs to the next address; an alias at its own address is no end. */
TEST(a_range_ends_at_the_next_address)
{
	static const uint64_t starts[] = { 0x3000, 0x1000, 0x1200, 0x1200, 0x2000 };
	static const char *const names[] = { "last", "first", "__irq_exit_rcu", "alias",
					     "next" };
	struct ht_ksyms *k = ht_ksyms_from_list(starts, names, 5);
	uint64_t start = 0, end = 0;

	CHECK(k != NULL);
	CHECK(!ht_ksyms_range(k, "__irq_exit_rcu", &start, &end));
	CHECK_EQ_U64(start, 0x1200);
	CHECK_EQ_U64(end, 0x2000);
	CHECK(!ht_ksyms_range(k, "first", &start, &end));
	CHECK_EQ_U64(end, 0x1200);
	/* Not there, and the last symbol, whose end no one knows. */
	CHECK(ht_ksyms_range(k, "irq_exit_rcu", &start, &end) == -1);
	CHECK(ht_ksyms_range(k, "last", &start, &end) == -1);
	ht_ksyms_free(k);
	/* Hidden addresses (no CAP_SYSLOG): nothing. */
	CHECK(ht_ksyms_range(NULL, "first", &start, &end) == -1);
}

/*
 * do_softirq's text as this kernel (6.18) lists it: the function and the
 * part the compiler split off (do_softirq.part.0), never a function whose
 * name merely begins the same (do_softirq_own_stack, on kernels that have
 * one out of line).
 */
TEST(a_function_s_ranges_take_its_split_parts)
{
	static const uint64_t starts[] = { 0x1000, 0x1100, 0x1200, 0x1300, 0x1400, 0x1500 };
	static const char *const names[] = { "do_softirq.part.0", "handle_softirqs",
					     "do_softirq",	  "do_softirq_own_stack",
					     "do_softirq.cold",	  "end" };
	struct ht_ksyms *k = ht_ksyms_from_list(starts, names, 6);
	uint64_t ranges[4][2] = { { 0 } };

	CHECK(k != NULL);
	CHECK(ht_ksyms_function_ranges(k, "do_softirq", ranges, 4) == 3);
	CHECK_EQ_U64(ranges[0][0], 0x1000);
	CHECK_EQ_U64(ranges[0][1], 0x1100);
	CHECK_EQ_U64(ranges[1][0], 0x1200);
	CHECK_EQ_U64(ranges[1][1], 0x1300);
	CHECK_EQ_U64(ranges[2][0], 0x1400);
	CHECK_EQ_U64(ranges[2][1], 0x1500);
	/* No more than room for. */
	CHECK(ht_ksyms_function_ranges(k, "do_softirq", ranges, 1) == 1);
	CHECK(ht_ksyms_function_ranges(k, "do_softirq", ranges, 0) == 0);
	/* The last symbol has no known end; hidden addresses give nothing. */
	CHECK(ht_ksyms_function_ranges(k, "end", ranges, 4) == 0);
	CHECK(ht_ksyms_function_ranges(NULL, "do_softirq", ranges, 4) == 0);
	ht_ksyms_free(k);
}
