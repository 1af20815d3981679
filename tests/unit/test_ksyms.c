// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Kernel symbols: the text of a function, as the monitor's softirq check needs it. */
#include "check.h"
#include "ksyms.h"

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
