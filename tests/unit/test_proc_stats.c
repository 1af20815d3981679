// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The summary by process: breaches counted per process with the largest of
 * each kind, histograms taken from the monitor's slots when a process
 * exits, the bounds that fold processes into the rest, and the rows the
 * summary prints, whose histograms add up to every interval counted.
 */
#include "check.h"
#include "cli/proc_stats.h"
#include "kernel/proc_hists.h"

#define NSLOTS 8

/* The monitor's array as the programs leave it: NSLOTS slots, then the rest's. */
static struct ht_proc_hist slots[NSLOTS + 1];

static struct ht_breach breach(unsigned int kind, uint32_t tgid, uint32_t tid, uint64_t dur_ns)
{
	struct ht_breach b = { .kind = kind, .tid = tid, .tgid = tgid, .start_ns = 1000,
			       .end_ns = 1000 + dur_ns };

	snprintf(b.comm, sizeof(b.comm), "t%u", tid);
	return b;
}

/* A breach of one kind, noted as the session notes it. */
static void note(struct ht_proc_stats *s, unsigned int kind, uint32_t tgid, uint32_t tid,
		 uint64_t dur_ns, const char *comm)
{
	struct ht_breach b = breach(kind, tgid, tid, dur_ns);

	ht_kind_stats_note(&ht_proc_stats_breach(s, (int)tgid, comm)->kinds[kind], &b, dur_ns);
}

/* A slot the programs took for TGID (at tgid modulo the slots, or the next) and counted in. */
static struct ht_proc_hist *slot_for(uint32_t tgid)
{
	for (uint32_t i = 0; i < HT_PROC_HIST_PROBES; i++) {
		struct ht_proc_hist *h = &slots[(tgid + i) & (NSLOTS - 1)];

		if (h->owner == tgid || !h->owner) {
			h->owner = tgid;
			return h;
		}
	}
	return &slots[NSLOTS];
}

static void count(uint32_t tgid, unsigned int kind, unsigned int bucket, uint64_t n)
{
	slot_for(tgid)->slots[kind - 1][bucket] += n;
}

static void exits(uint32_t tgid)
{
	for (uint32_t i = 0; i < HT_PROC_HIST_PROBES; i++) {
		struct ht_proc_hist *h = &slots[(tgid + i) & (NSLOTS - 1)];

		if (h->owner == tgid)
			h->owner |= HT_PROC_HIST_GONE;
	}
}

static void on_gone(void *ctx, uint32_t tgid, const struct ht_proc_hist_counts *counts)
{
	ht_proc_stats_gone(ctx, (int)tgid, counts);
}

static const char *name_of(void *ctx, int tgid)
{
	static char buf[16];

	(void)ctx;
	snprintf(buf, sizeof(buf), "p%d", tgid);
	return buf;
}

static const struct ht_proc_entry *row_of(const struct ht_proc_entry *rows, long n, int tgid)
{
	for (long i = 0; i < n; i++)
		if (rows[i].tgid == tgid)
			return &rows[i];
	return NULL;
}

TEST(breaches_counted_by_process_with_the_largest_of_each_kind)
{
	struct ht_proc_stats s;
	const struct ht_proc_entry *a, *b;

	ht_proc_stats_init(&s, 4, 16);
	note(&s, HT_BREACH_OFF_CPU, 100, 101, 30, "alpha");
	note(&s, HT_BREACH_OFF_CPU, 100, 100, 50, "alpha");
	note(&s, HT_BREACH_RQ_DELAY, 100, 101, 7, "alpha");
	note(&s, HT_BREACH_OFF_CPU, 200, 200, 90, "beta");
	CHECK_EQ_U64(s.count, 2);
	a = &s.v[0];
	b = &s.v[1];
	CHECK(a->tgid == 100 && b->tgid == 200);
	CHECK_STR(a->comm, "alpha");
	CHECK_EQ_U64(a->waits, 3);
	CHECK_EQ_U64(a->kinds[HT_BREACH_OFF_CPU].count, 2);
	CHECK_EQ_U64(a->kinds[HT_BREACH_OFF_CPU].worst.max_ns, 50);
	CHECK_EQ_U64(a->kinds[HT_BREACH_OFF_CPU].worst.max_tid, 100);
	CHECK_EQ_U64(a->kinds[HT_BREACH_RQ_DELAY].worst.max_ns, 7);
	CHECK_EQ_U64(b->waits, 1);
	CHECK_EQ_U64(b->kinds[HT_BREACH_OFF_CPU].worst.max_ns, 90);
	CHECK_EQ_U64(s.rest.waits + s.rest_processes, 0);
	/* More waits rank first, whatever their size. */
	CHECK(ht_proc_entry_cmp(a, b) < 0);
	ht_proc_stats_free(&s);
}

TEST(gone_processes_keep_their_histograms_and_the_others_fold)
{
	struct ht_proc_stats s;
	struct ht_proc_entry *rows, rest;
	long n;

	memset(slots, 0, sizeof(slots));
	ht_proc_stats_init(&s, 4, 16);
	note(&s, HT_BREACH_OFF_CPU, 100, 100, 30, "alpha");
	count(100, HT_BREACH_OFF_CPU, 4, 3);
	count(300, HT_BREACH_RQ_DELAY, 1, 5); /* never breached */
	exits(100);
	exits(300);
	CHECK(ht_proc_hists_take_gone(slots, NSLOTS, on_gone, &s) == 2);
	/* Taken and free for the next process. */
	for (unsigned int i = 0; i < NSLOTS; i++)
		CHECK(!slots[i].owner && !slots[i].slots[HT_BREACH_OFF_CPU - 1][4]);
	CHECK(s.v[0].gone && s.v[0].hist.slots[HT_BREACH_OFF_CPU - 1][4] == 3);
	CHECK_EQ_U64(s.rest_processes, 1);
	CHECK_EQ_U64(s.rest.hist.slots[HT_BREACH_RQ_DELAY - 1][1], 5);
	n = ht_proc_stats_rows(&s, slots, NSLOTS, name_of, NULL, &rows, &rest);
	CHECK(n == 1 && rows[0].tgid == 100 && rows[0].gone);
	CHECK_EQ_U64(rest.hist.slots[HT_BREACH_RQ_DELAY - 1][1], 5);
	free(rows);
	ht_proc_stats_free(&s);
}

TEST(a_reused_pid_is_a_new_process)
{
	struct ht_proc_stats s;
	struct ht_proc_hist_counts none = { 0 };

	ht_proc_stats_init(&s, 4, 16);
	note(&s, HT_BREACH_OFF_CPU, 100, 100, 30, "old");
	ht_proc_stats_gone(&s, 100, &none);
	note(&s, HT_BREACH_OFF_CPU, 100, 100, 40, "new");
	CHECK_EQ_U64(s.count, 2);
	CHECK(s.v[0].gone && !strcmp(s.v[0].comm, "old") && s.v[0].waits == 1);
	CHECK(!s.v[1].gone && !strcmp(s.v[1].comm, "new") && s.v[1].waits == 1);
	/* The new one exits too. */
	none.slots[0][2] = 9;
	ht_proc_stats_gone(&s, 100, &none);
	CHECK(s.v[1].gone && s.v[1].hist.slots[0][2] == 9);
	/* A second slot, taken by a thread that outlived the mark: to an exited one of its pid. */
	none.slots[0][2] = 1;
	ht_proc_stats_gone(&s, 100, &none);
	CHECK_EQ_U64(s.v[0].hist.slots[0][2] + s.v[1].hist.slots[0][2], 10);
	CHECK_EQ_U64(s.rest_processes, 0);
	ht_proc_stats_free(&s);
}

TEST(bounds_fold_the_fewest_breaches_into_the_rest)
{
	struct ht_proc_stats s;
	struct ht_proc_hist_counts h = { 0 };
	const uint32_t waits[] = { 3, 1, 2 };

	ht_proc_stats_init(&s, 2, 4);
	for (uint32_t p = 0; p < 3; p++) {
		for (uint32_t i = 0; i < waits[p]; i++)
			note(&s, HT_BREACH_SYSCALL, 10 + p, 10 + p, 100 + p, "x");
		h.slots[HT_BREACH_SYSCALL - 1][p] = 1;
		ht_proc_stats_gone(&s, (int)(10 + p), &h);
		h.slots[HT_BREACH_SYSCALL - 1][p] = 0;
	}
	/* Two exited kept: pid 11, with one breach, is in the rest, counts and histogram. */
	CHECK_EQ_U64(s.count, 2);
	CHECK(s.v[0].tgid == 10 && s.v[1].tgid == 12);
	CHECK_EQ_U64(s.rest_processes, 1);
	CHECK_EQ_U64(s.rest.waits, 1);
	CHECK_EQ_U64(s.rest.kinds[HT_BREACH_SYSCALL].count, 1);
	CHECK_EQ_U64(s.rest.kinds[HT_BREACH_SYSCALL].worst.max_ns, 101);
	CHECK_EQ_U64(s.rest.hist.slots[HT_BREACH_SYSCALL - 1][1], 1);
	/* At most four entries: two live more fit, the next one's breaches count in the rest. */
	note(&s, HT_BREACH_SYSCALL, 20, 20, 5, "y");
	note(&s, HT_BREACH_SYSCALL, 21, 21, 5, "y");
	note(&s, HT_BREACH_SYSCALL, 22, 22, 500, "z");
	CHECK_EQ_U64(s.count, 4);
	CHECK_EQ_U64(s.rest.waits, 2);
	CHECK_EQ_U64(s.rest.kinds[HT_BREACH_SYSCALL].worst.max_ns, 500);
	ht_proc_stats_free(&s);
}

TEST(rows_rank_processes_and_add_up_to_every_interval)
{
	struct ht_proc_stats s;
	struct ht_proc_entry *rows, rest;
	uint64_t fed = 0, got = 0;
	const struct ht_proc_entry *r;
	long n;

	memset(slots, 0, sizeof(slots));
	ht_proc_stats_init(&s, 2, 64);
	/* Twenty processes, more than the slots: the later ones count in the rest's. */
	for (uint32_t p = 1; p <= 20; p++) {
		count(p, HT_BREACH_RQ_DELAY, p % 5, p);
		fed += p;
		if (p % 3 == 0)
			note(&s, HT_BREACH_RQ_DELAY, p, p, 1000 * p, NULL);
		if (p % 4 == 0) {
			exits(p);
			ht_proc_hists_take_gone(slots, NSLOTS, on_gone, &s);
		}
	}
	n = ht_proc_stats_rows(&s, slots, NSLOTS, name_of, NULL, &rows, &rest);
	CHECK(n > 2);
	for (long i = 0; i < n; i++) {
		got += ht_proc_hist_total(&rows[i].hist, HT_BREACH_RQ_DELAY);
		if (i)
			CHECK(ht_proc_entry_cmp(&rows[i - 1], &rows[i]) < 0);
	}
	got += ht_proc_hist_total(&rest.hist, HT_BREACH_RQ_DELAY);
	CHECK_EQ_U64(got, fed);
	/* Live without a breach: named by the caller, with its slot's counts. */
	r = row_of(rows, n, 1);
	CHECK(r && !strcmp(r->comm, "p1") && !r->gone && r->hist.slots[0][1] == 1);
	/* Live with breaches, ranked first among equals by the largest. */
	r = row_of(rows, n, 9);
	CHECK(r && r->waits == 1 && r->hist.slots[0][4] == 9);
	CHECK(rows[0].waits == 1 && ht_proc_entry_max_ns(&rows[0]) >= 9000);
	free(rows);
	ht_proc_stats_free(&s);
}

TEST(a_slot_is_found_as_the_programs_find_it)
{
	memset(slots, 0, sizeof(slots));
	slot_for(3);
	slot_for(11); /* 11 modulo 8 is 3: the next slot */
	CHECK(ht_proc_hists_find(slots, NSLOTS, 3) == &slots[3]);
	CHECK(ht_proc_hists_find(slots, NSLOTS, 11) == &slots[4]);
	CHECK(ht_proc_hists_find(slots, NSLOTS, 19) == NULL);
	exits(11);
	CHECK(ht_proc_hists_find(slots, NSLOTS, 11) == NULL);
}

/* What ht_proc_stats_print writes, as text (JSON: as the members of one object). */
static char *printed(const struct ht_proc_entry *rows, long n, const struct ht_proc_entry *rest,
		     uint64_t rest_processes, const struct ht_proc_hist_counts *outside, bool json)
{
	static const uint64_t thresholds[HT_BREACH_KIND_MAX] = { [HT_BREACH_OFF_CPU] = 10 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct ht_json j;

	if (json)
		ht_json_begin(&j, f);
	ht_proc_stats_print(f, json ? &j : NULL, thresholds, rows, n, rest, rest_processes, outside,
			    NSLOTS);
	if (json)
		ht_json_end_line(&j);
	fclose(f);
	return text;
}

TEST(the_summary_shows_the_most_breaches_first_and_sums_the_others)
{
	struct ht_proc_stats s;
	struct ht_proc_entry *rows, rest;
	struct ht_proc_hist_counts outside = { 0 };
	char *text, *json, *first, *second;
	long n;

	memset(slots, 0, sizeof(slots));
	ht_proc_stats_init(&s, 64, 64);
	/* Twelve processes: 112 breached twelve times ... 101 once. */
	for (uint32_t p = 101; p <= 112; p++)
		for (uint32_t i = 0; i < p - 100; i++)
			note(&s, HT_BREACH_OFF_CPU, p, p, 1000 * (i + 1), "worker");
	for (uint32_t p = 101; p <= 112; p++) {
		struct ht_proc_hist_counts h = { 0 };

		h.slots[HT_BREACH_OFF_CPU - 1][9] = p - 100;
		h.slots[HT_BREACH_RQ_DELAY - 1][2] = 1;
		ht_proc_stats_gone(&s, (int)p, &h);
	}
	n = ht_proc_stats_rows(&s, slots, NSLOTS, name_of, NULL, &rows, &rest);
	CHECK(n == 12);
	text = printed(rows, n, &rest, 0, &outside, false);
	CHECK(strstr(text, "\nby process, the most breaches first (12 processes):\n") == text);
	first = strstr(text, "\npid 112 (worker), exited: 12 waits breached: off-cpu 12, largest "
			     "12.0us (tid 112 t112)\n");
	second = strstr(text, "\npid 111 (worker), exited: 11 waits breached");
	CHECK(first && second && first < second);
	/* Ten shown; the two with the fewest summed. */
	CHECK(!strstr(text, "\npid 102 ") && !strstr(text, "\npid 101 "));
	CHECK(strstr(text, "\n2 other processes: 3 waits breached: off-cpu 3, largest 2.0us (tid "
			   "102 t102)\n"));
	/* Each histogram from its first bucket with a count on. */
	CHECK(strstr(text, "  off-CPU time of pid 112 (worker), log2 buckets:\n"
			   "         usecs           : count    distribution\n"
			   "       512 -> 1023       : 12 "));
	CHECK(strstr(text, "  run-queue delay of pid 112 (worker), log2 buckets:\n"
			   "         usecs           : count    distribution\n"
			   "         4 -> 7          : 1 "));
	if (!first || !second)
		printf("     %s\n", text);

	json = printed(rows, n, &rest, 0, &outside, true);
	CHECK(strstr(json, "{\"processes\":[{\"pid\":112,\"comm\":\"worker\",\"running\":false,"
			   "\"waits_breached\":12,\"breaches\":{\"rq-delay\":{\"count\":0,"));
	CHECK(strstr(json, "\"off-cpu\":{\"count\":12,\"max_ns\":12000,\"max_tid\":112,"
			   "\"max_comm\":\"t112\",\"wait_for_work\":{\"count\":0,\"max_ns\":0}}"));
	CHECK(strstr(json,
		     "\"histograms\":{\"rq-delay\":[{\"from_us\":0,\"to_us\":1,\"count\":0},"));
	CHECK(strstr(json, "{\"pid\":101,"));
	CHECK(strstr(json, "\"other_processes\":{\"processes\":0,\"intervals_without_slot\":0,"
			   "\"histogram_slots\":8,\"waits_breached\":0,"));
	free(text);
	free(json);
	free(rows);
	ht_proc_stats_free(&s);
}

TEST(one_process_alone_has_no_block_of_its_own)
{
	struct ht_proc_entry row = { .tgid = 7, .waits = 1 }, rest = { 0 };
	struct ht_proc_hist_counts outside = { 0 };
	char *text = printed(&row, 1, &rest, 0, &outside, false);

	CHECK_STR(text, "");
	free(text);
	/* Intervals no slot took: said, with the process's own. */
	rest.hist.slots[0][3] = 2;
	outside.slots[0][3] = 2;
	text = printed(&row, 1, &rest, 0, &outside, false);
	CHECK(strstr(text, "\n0 other processes, and those no histogram slot took: 0 waits "
			   "breached\n"));
	free(text);
}
