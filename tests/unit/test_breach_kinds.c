// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The table of breach kinds: every row whole, names that find their row, kinds joined. */
#include "base/breach_kinds.h"
#include "check.h"
#include "hybtrace/records.h"

/* A kind added to records.h without its row would print "(null)" everywhere: refused here. */
TEST(breach_kinds_every_row_is_whole)
{
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		const struct ht_breach_kind_info *ki = ht_breach_kind(k);

		CHECK(ki != NULL);
		if (!ki)
			continue;
		CHECK(ki->name && *ki->name);
		CHECK(ki->json_key && *ki->json_key);
		CHECK(ki->title && *ki->title);
		CHECK(ki->option && *ki->option);
		CHECK(ki->option_help && *ki->option_help);
		CHECK(ki->began && *ki->began);
		if (!ki->name || !ki->option)
			continue;
		/* The report finds a dump's kind by its name; '+' joins a wait's kinds. */
		CHECK_EQ_U64(ht_breach_kind_by_name(ki->name), k);
		CHECK(!strchr(ki->name, '+'));
		CHECK_STR(ht_breach_kind_name(k), ki->name);
		/* A wait of two kinds counts as both: each names the other. */
		CHECK(!(ki->breached_with & HT_KIND_BIT(k)));
		for (unsigned int j = 1; j < HT_BREACH_KIND_MAX; j++) {
			if (ki->breached_with & HT_KIND_BIT(j))
				CHECK(ht_breach_kinds[j].breached_with & HT_KIND_BIT(k));
			if (j != k && ht_breach_kinds[j].option)
				CHECK(strcmp(ht_breach_kinds[j].option, ki->option));
		}
		CHECK(!(ki->breached_with & ~((1U << HT_BREACH_KIND_MAX) - 2)));
	}
	CHECK(ht_breach_kind(0) == NULL);
	CHECK(ht_breach_kind(HT_BREACH_KIND_MAX) == NULL);
	CHECK_STR(ht_breach_kind_name(0), "unknown");
	CHECK_STR(ht_breach_kind_name(HT_BREACH_KIND_MAX), "unknown");
	/* Dumps of no breach, and waits of two kinds, have no row. */
	CHECK_EQ_U64(ht_breach_kind_by_name("manual"), 0);
	CHECK_EQ_U64(ht_breach_kind_by_name("off-cpu+syscall"), 0);
	CHECK_EQ_U64(ht_breach_kind_by_name("unknown"), 0);
}

/* What the command line, the summaries and the dumps have always called them. */
TEST(breach_kinds_rows_of_the_three)
{
	CHECK_STR(ht_breach_kinds[HT_BREACH_RQ_DELAY].name, "rq-delay");
	CHECK_STR(ht_breach_kinds[HT_BREACH_OFF_CPU].name, "off-cpu");
	CHECK_STR(ht_breach_kinds[HT_BREACH_SYSCALL].name, "syscall");
	CHECK_STR(ht_breach_kinds[HT_BREACH_RQ_DELAY].json_key, "rq_delay");
	CHECK_STR(ht_breach_kinds[HT_BREACH_OFF_CPU].json_key, "off_cpu");
	CHECK_EQ_U64(ht_breach_kinds[HT_BREACH_RQ_DELAY].default_threshold_ns, 1000000);
	CHECK_EQ_U64(ht_breach_kinds[HT_BREACH_OFF_CPU].default_threshold_ns, 0);
	CHECK_EQ_U64(ht_breach_kinds[HT_BREACH_SYSCALL].default_threshold_ns, 0);
	CHECK_EQ_U64(ht_breach_kind_by_name("syscall"), HT_BREACH_SYSCALL);
}

/* One wait of two kinds is named by both, in kind order; a record without kinds by its kind. */
TEST(breach_kinds_and_their_names)
{
	const uint32_t off = 1U << HT_BREACH_OFF_CPU, sys = 1U << HT_BREACH_SYSCALL;
	char buf[64], small[8];

	CHECK_EQ_U64(ht_breach_kinds_of(0, HT_BREACH_SYSCALL), sys);
	CHECK_EQ_U64(ht_breach_kinds_of(off | sys, HT_BREACH_SYSCALL), off | sys);
	CHECK_EQ_U64(ht_breach_kinds_of(0, 0), 0);
	CHECK_EQ_U64(ht_breach_kinds_of(0, HT_BREACH_KIND_MAX), 0);
	CHECK_STR(ht_breach_kinds_name(off | sys, buf, sizeof(buf)), "off-cpu+syscall");
	CHECK_STR(ht_breach_kinds_name(sys | off, buf, sizeof(buf)), "off-cpu+syscall");
	CHECK_STR(ht_breach_kinds_name(1U << HT_BREACH_RQ_DELAY, buf, sizeof(buf)), "rq-delay");
	CHECK_STR(ht_breach_kinds_name(0, buf, sizeof(buf)), "");
	/* The dump job's kind holds 16 bytes: both names fit it. */
	CHECK(strlen(ht_breach_kinds_name(off | sys, buf, sizeof(buf))) < 16);
	/* Cut short, never past the buffer. */
	CHECK_STR(ht_breach_kinds_name(off | sys, small, sizeof(small)), "off-cpu");
}
