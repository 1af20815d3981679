// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The dump policy as the dumper drives it: candidates offered at given
 * times, the engine's answers carried out at once, and a builder that
 * writes when told. Each test reads back a log of what happened:
 *   F3   candidate 3 frozen       W3   candidate 3 handed to the builder
 *   X3   candidate 3 dropped      R1>3 the dump of 3 replaced that of 1
 */
#include <stdio.h>
#include "check.h"
#include "dump/dump_policy.h"
#include "dump/dumper.h"

#define MS	1000000ULL
#define POST_NS (2 * MS)

struct sim {
	struct ht_dump_engine e;
	char log[1 << 16];
	bool builder_slow;     /* writes wait for finish_write() */
	uint64_t building_seq; /* the dump the builder has, 0: none */
	uint64_t building_id;
	uint64_t bytes_per_dump; /* the size of each file written */
	uint64_t seq_id[64];	 /* which candidate each kept dump is */
	bool fail_next_write;
};

static void sim_init_per_process(struct sim *s, enum ht_dump_rule rule, uint64_t min_interval_ns,
				 unsigned int max_dumps, uint64_t max_disk_bytes,
				 unsigned int max_dumps_per_process)
{
	struct ht_dump_policy p = { min_interval_ns, max_dumps, max_disk_bytes, rule,
				    max_dumps_per_process };

	memset(s, 0, sizeof(*s));
	ht_dump_engine_init(&s->e, &p);
	s->bytes_per_dump = 10;
}

static void sim_init(struct sim *s, enum ht_dump_rule rule, uint64_t min_interval_ns,
		     unsigned int max_dumps, uint64_t max_disk_bytes)
{
	sim_init_per_process(s, rule, min_interval_ns, max_dumps, max_disk_bytes, 0);
}

static void say(struct sim *s, const char *fmt, unsigned long long a, unsigned long long b)
{
	size_t n = strlen(s->log);

	snprintf(s->log + n, sizeof(s->log) - n, fmt, n ? " " : "", a, b);
}

static void finish_write(struct sim *s)
{
	struct ht_dump_kept victim;
	char path[32];
	uint64_t seq = s->building_seq;
	bool ok = !s->fail_next_write;

	if (!seq)
		return;
	s->building_seq = 0;
	s->fail_next_write = false;
	snprintf(path, sizeof(path), "dump-%llu", (unsigned long long)s->building_id);
	if (!ht_dump_engine_written(&s->e, seq, ok, s->bytes_per_dump, ok ? path : NULL, NULL, 1,
				    seq, &victim))
		return;
	say(s, "%sR%llu>%llu", s->seq_id[victim.seq], s->building_id);
	ht_dump_engine_removed(&s->e, victim.seq, true);
	ht_dump_kept_free(&victim);
}

/* What the dumper's tick does at NOW, the ring not read since. */
static void tick_unread(struct sim *s, uint64_t now_ns)
{
	for (;;) {
		struct ht_dump_action a = ht_dump_engine_next(&s->e, now_ns);

		if (a.what == HT_DUMP_ACT_NONE)
			return;
		if (a.what == HT_DUMP_ACT_FREEZE) {
			say(s, "%sF%llu", a.id, 0);
			ht_dump_engine_frozen(&s->e, a.id, true);
		} else if (a.what == HT_DUMP_ACT_WRITE) {
			say(s, "%sW%llu", a.id, 0);
			s->building_seq = a.seq;
			s->building_id = a.id;
			if (a.seq < 64)
				s->seq_id[a.seq] = a.id;
			if (!s->builder_slow)
				finish_write(s);
		} else {
			say(s, "%sX%llu", a.id, 0);
		}
	}
}

/* What the event loop does at NOW: it reads the ring to its end, then ticks. */
static void run(struct sim *s, uint64_t now_ns)
{
	ht_dump_engine_read(&s->e, now_ns);
	tick_unread(s, now_ns);
}

/* A breach of RATIO ending at NOW (offered at once), its window ending POST_NS later. */
static enum ht_dump_decision offer(struct sim *s, uint64_t id, double ratio, uint64_t now_ns)
{
	struct ht_dump_offer o = { .id = id,
				   .rank = { HT_RANK_BREACH, ratio },
				   .window_end_ns = now_ns + POST_NS };
	struct ht_dump_offer_result r = ht_dump_engine_offer(&s->e, &o, now_ns);

	if (r.dropped)
		say(s, "%sX%llu", r.dropped_id, 0);
	run(s, now_ns);
	return r.decision;
}

/* A breach of process TGID, as offer(). */
static enum ht_dump_decision offer_of(struct sim *s, uint64_t id, int tgid, double ratio,
				      uint64_t now_ns)
{
	struct ht_dump_offer o = { .id = id,
				   .tgid = tgid,
				   .rank = { HT_RANK_BREACH, ratio },
				   .window_end_ns = now_ns + POST_NS };
	struct ht_dump_offer_result r = ht_dump_engine_offer(&s->e, &o, now_ns);

	if (r.dropped)
		say(s, "%sX%llu", r.dropped_id, 0);
	run(s, now_ns);
	return r.decision;
}

/* The same, its breach ended at ENDED_NS but the event loop read it only at NOW. */
static enum ht_dump_decision offer_late(struct sim *s, uint64_t id, double ratio,
					uint64_t ended_ns, uint64_t now_ns)
{
	struct ht_dump_offer o = { .id = id,
				   .rank = { HT_RANK_BREACH, ratio },
				   .window_end_ns = ended_ns + POST_NS,
				   .ended_ns = ended_ns };
	struct ht_dump_offer_result r = ht_dump_engine_offer(&s->e, &o, now_ns);

	if (r.dropped)
		say(s, "%sX%llu", r.dropped_id, 0);
	run(s, now_ns);
	return r.decision;
}

static enum ht_dump_decision offer_asked(struct sim *s, uint64_t id, uint64_t now_ns)
{
	struct ht_dump_offer o = { .id = id,
				   .rank = { HT_RANK_ASKED, 0 },
				   .window_end_ns = now_ns + POST_NS,
				   .asked = true };
	struct ht_dump_offer_result r = ht_dump_engine_offer(&s->e, &o, now_ns);

	if (r.dropped)
		say(s, "%sX%llu", r.dropped_id, 0);
	run(s, now_ns);
	return r.decision;
}

/* The event loop sleeps until the engine's deadline, as long as there is one before END. */
static void run_until(struct sim *s, uint64_t end_ns)
{
	uint64_t due;

	while ((due = ht_dump_engine_deadline(&s->e)) && due <= end_ns)
		run(s, due);
	run(s, end_ns);
}

/* The session ends at NOW: what is held is decided, frozen and written. */
static void finish(struct sim *s, uint64_t now_ns)
{
	ht_dump_engine_finish(&s->e);
	for (int i = 0; i < 100 && !ht_dump_engine_idle(&s->e); i++) {
		uint64_t due = ht_dump_engine_deadline(&s->e);

		if (due > now_ns)
			now_ns = due;
		run(s, now_ns);
		finish_write(s);
	}
}

static void sim_free(struct sim *s)
{
	ht_dump_engine_free(&s->e);
}

TEST(rank_is_the_largest_ratio_and_the_class_first)
{
	uint64_t dur[2] = { 30 * MS, 30 * MS }, thr[2] = { 10 * MS, 20 * MS }, none = 0;
	struct ht_dump_rank r = ht_dump_rank_breach(HT_RANK_BREACH, dur, thr, 2);
	struct ht_dump_rank idle = ht_dump_rank_breach(HT_RANK_WAIT_FOR_WORK, dur, thr, 1);
	struct ht_dump_rank trig = { HT_RANK_TRIGGER, 0 }, asked = { HT_RANK_ASKED, 0 };
	char buf[64];

	CHECK(r.ratio == 3.0);
	/* A threshold that is off does not count. */
	CHECK(ht_dump_rank_breach(HT_RANK_BREACH, dur, &none, 1).ratio == 0);
	CHECK(ht_dump_rank_cmp(r, (struct ht_dump_rank){ HT_RANK_BREACH, 2.9 }) > 0);
	CHECK(ht_dump_rank_cmp(r, (struct ht_dump_rank){ HT_RANK_BREACH, 3.0 }) == 0);
	/* Waiting for work ranks below any breach, however long; triggers and asked above. */
	CHECK(ht_dump_rank_cmp(idle, (struct ht_dump_rank){ HT_RANK_BREACH, 1.01 }) < 0);
	CHECK(ht_dump_rank_cmp(trig, r) > 0);
	CHECK(ht_dump_rank_cmp(asked, trig) > 0);
	CHECK_STR(ht_dump_rank_format(r, buf, sizeof(buf)), "3.00x its threshold");
}

/* One wait of both kinds: its job is named by both, and ranks by the larger ratio. */
TEST(a_wait_of_two_kinds_ranks_by_its_larger_ratio)
{
	struct ht_breach b = { .kind = HT_BREACH_SYSCALL,
			       .kinds = 1U << HT_BREACH_OFF_CPU | 1U << HT_BREACH_SYSCALL,
			       .start_ns = 100 * MS, .end_ns = 130 * MS,
			       .off_cpu_start_ns = 101 * MS, .off_cpu_end_ns = 129 * MS,
			       .off_cpu_threshold_ns = 7 * MS };
	struct ht_dump_job job;

	ht_dump_job_for_breach(&job, &b, 10 * MS);
	CHECK_STR(job.kind, "off-cpu+syscall");
	/* 28 ms over 7 ms beats 30 ms over 10 ms. */
	CHECK(ht_dump_job_rank(&job).ratio == 4.0);
	/* Over a larger off-CPU threshold, the syscall's ratio ranks it. */
	job.breach.off_cpu_threshold_ns = 28 * MS;
	CHECK(ht_dump_job_rank(&job).ratio == 3.0);
	/* An off-CPU breach alone ranks by its own interval and threshold. */
	b.kind = HT_BREACH_OFF_CPU;
	b.kinds = 1U << HT_BREACH_OFF_CPU;
	b.off_cpu_start_ns = b.start_ns;
	b.off_cpu_end_ns = b.end_ns;
	ht_dump_job_for_breach(&job, &b, 15 * MS);
	CHECK_STR(job.kind, "off-cpu");
	CHECK(ht_dump_job_rank(&job).ratio == 2.0);
}

TEST(growing_breaches_in_one_interval_dump_the_largest)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	for (uint64_t i = 1; i <= 5; i++)
		CHECK(offer(&s, i, 1.0 + 0.2 * (double)i, i * 20 * MS) == HT_DUMP_NOW);
	/* Each best so far froze at its window's end; the worse one dropped the one before. */
	run_until(&s, 999 * MS);
	CHECK_STR(s.log, "X1 X2 X3 X4 F5");
	run_until(&s, 1100 * MS);
	CHECK_STR(s.log, "X1 X2 X3 X4 F5 W5");
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_INTERVAL], 4);
	CHECK_EQ_U64(s.e.st.written, 1);
	sim_free(&s);
}

TEST(each_candidate_freezes_at_its_own_window_end)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	offer(&s, 1, 1.5, 10 * MS);
	CHECK_EQ_U64(ht_dump_engine_deadline(&s.e), 10 * MS + POST_NS);
	run_until(&s, 50 * MS);
	CHECK_STR(s.log, "F1");
	/* A worse one: the first is dropped at once, the new one frozen at its own window end. */
	offer(&s, 2, 2.5, 60 * MS);
	CHECK_STR(s.log, "F1 X1");
	CHECK_EQ_U64(ht_dump_engine_deadline(&s.e), 60 * MS + POST_NS);
	run_until(&s, 100 * MS);
	CHECK_STR(s.log, "F1 X1 F2");
	sim_free(&s);
}

TEST(shrinking_breaches_are_never_frozen)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	offer(&s, 1, 3.0, 0);
	for (uint64_t i = 2; i <= 5; i++)
		CHECK(offer(&s, i, 3.0 - 0.2 * (double)i, i * 20 * MS) == HT_DUMP_SKIP_INTERVAL);
	run_until(&s, 2000 * MS);
	CHECK_STR(s.log, "F1 W1");
	sim_free(&s);
}

TEST(breaches_ending_together_make_one_dump)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	offer(&s, 1, 2.0, 100 * MS);
	offer(&s, 2, 2.1, 100 * MS);
	offer(&s, 3, 2.1, 100 * MS); /* as bad: the one before stays */
	run_until(&s, 3000 * MS);
	CHECK_STR(s.log, "X1 F2 W2");
	CHECK_EQ_U64(s.e.st.written, 1);
	sim_free(&s);
}

TEST(never_a_second_dump_within_an_interval)
{
	static struct sim s;
	uint64_t last_write = 0, writes = 0;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 100, 1ULL << 30);
	/* A breach every 7 ms for 10 s, each a little worse: one dump a second. */
	for (uint64_t i = 1; i < 1430; i++) {
		size_t before = strlen(s.log);

		offer(&s, i, 1.0 + (double)i / 1000, i * 7 * MS);
		for (const char *p = s.log + before; (p = strchr(p, 'W')); p++) {
			CHECK(!writes || i * 7 * MS - last_write >= 1000 * MS);
			last_write = i * 7 * MS;
			writes++;
		}
	}
	CHECK(writes >= 9 && writes <= 10);
	if (writes < 9 || writes > 10)
		printf("     %llu writes: %s\n", (unsigned long long)writes, s.log);
	sim_free(&s);
}

TEST(intervals_follow_when_breaches_ended_not_when_they_were_read)
{
	static struct sim s;

	/* A slow machine reads three breaches 5 ms apart only 300 ms later, one by one. */
	sim_init(&s, HT_DUMP_RULE_FIRST, 200 * MS, 20, 1ULL << 30);
	CHECK(offer_late(&s, 1, 2.0, 100 * MS, 400 * MS) == HT_DUMP_NOW);
	CHECK(offer_late(&s, 2, 2.0, 105 * MS, 650 * MS) == HT_DUMP_SKIP_INTERVAL);
	CHECK(offer_late(&s, 3, 2.0, 110 * MS, 900 * MS) == HT_DUMP_SKIP_INTERVAL);
	/* The next interval opens with a breach that ended after this one's end. */
	CHECK(offer_late(&s, 4, 2.0, 300 * MS, 950 * MS) == HT_DUMP_NOW);
	run_until(&s, 2000 * MS);
	CHECK_STR(s.log, "F1 W1 F4 W4");
	sim_free(&s);

	/* Under `worst`, one read after its interval's choice is made is not dumped. */
	sim_init(&s, HT_DUMP_RULE_WORST, 200 * MS, 20, 1ULL << 30);
	offer_late(&s, 1, 2.0, 100 * MS, 101 * MS);
	offer_late(&s, 2, 3.0, 150 * MS, 151 * MS);
	run_until(&s, 400 * MS);
	CHECK(offer_late(&s, 3, 9.0, 290 * MS, 400 * MS) == HT_DUMP_SKIP_INTERVAL);
	CHECK(offer_late(&s, 4, 1.5, 360 * MS, 401 * MS) == HT_DUMP_NOW);
	run_until(&s, 2000 * MS);
	CHECK_STR(s.log, "X1 F2 W2 F4 W4");
	sim_free(&s);
}

TEST(a_breach_read_after_its_intervals_end_competes_until_the_ring_is_read)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 200 * MS, 20, 1ULL << 30);
	s.e.p.read_lag_ns = 20 * MS;
	offer_late(&s, 1, 2.0, 100 * MS, 101 * MS);
	/* The interval's timer fires while a worse breach, ended 70 us before its end, is in the
	 * ring: nothing is chosen before the ring is read past the end. */
	CHECK(ht_dump_engine_deadline(&s.e) == 102 * MS);
	tick_unread(&s, 102 * MS);
	CHECK(ht_dump_engine_deadline(&s.e) == 320 * MS);
	tick_unread(&s, 320 * MS);
	CHECK(offer_late(&s, 2, 3.0, 300 * MS - 70000, 320 * MS) == HT_DUMP_NOW);
	/* Read on past the end (and its lag): the interval's worst is chosen. */
	run(&s, 321 * MS);
	/* One more that ended in it, though read later still, is passed over. */
	CHECK(offer_late(&s, 3, 9.0, 299 * MS, 330 * MS) == HT_DUMP_SKIP_INTERVAL);
	run_until(&s, 2000 * MS);
	CHECK_STR(s.log, "F1 X1 F2 W2");
	sim_free(&s);

	/* A breach that ended after the interval closes it, read or not. */
	sim_init(&s, HT_DUMP_RULE_WORST, 200 * MS, 20, 1ULL << 30);
	s.e.p.read_lag_ns = 20 * MS;
	offer_late(&s, 1, 2.0, 100 * MS, 101 * MS);
	tick_unread(&s, 305 * MS);
	CHECK(offer_late(&s, 2, 1.5, 301 * MS, 305 * MS) == HT_DUMP_NOW);
	CHECK_STR(s.log, "F1 F2 W1");
	sim_free(&s);
}

TEST(first_rule_dumps_the_first_at_once)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_FIRST, 1000 * MS, 20, 1ULL << 30);
	for (uint64_t i = 1; i <= 5; i++)
		offer(&s, i, 1.0 + 0.2 * (double)i, i * 20 * MS);
	/* Written as soon as frozen, not at the interval's end. */
	run_until(&s, 200 * MS);
	CHECK_STR(s.log, "F1 W1");
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_INTERVAL], 4);
	/* The next interval opens with the first breach after this one's end. */
	CHECK(offer(&s, 6, 1.0, 1019 * MS) == HT_DUMP_SKIP_INTERVAL);
	CHECK(offer(&s, 7, 1.0, 1021 * MS) == HT_DUMP_NOW);
	run_until(&s, 1100 * MS);
	CHECK_STR(s.log, "F1 W1 F7 W7");
	sim_free(&s);
}

TEST(max_dumps_keeps_the_worst_when_they_come_last)
{
	static struct sim s;
	const double ratios[] = { 1.1, 1.2, 1.3, 3.0, 4.0 };

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 2, 1ULL << 30);
	for (uint64_t i = 0; i < 5; i++) {
		offer(&s, i, ratios[i], i * 2000 * MS);
		run_until(&s, i * 2000 * MS + 1500 * MS);
	}
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R0>2 F3 W3 R1>3 F4 W4 R2>4");
	CHECK_EQ_U64(s.e.st.written, 5);
	CHECK_EQ_U64(s.e.st.replaced, 3);
	CHECK_EQ_U64(s.e.nkept, 2);
	for (size_t i = 0; i < s.e.nkept; i++)
		CHECK(s.e.kept[i].rank.ratio >= 3.0);
	CHECK_EQ_U64(s.e.disk_bytes, 20);
	/* Not worse than the least bad kept: passed over, never frozen. */
	CHECK(offer(&s, 5, 2.9, 20000 * MS) == HT_DUMP_SKIP_COUNT);
	run_until(&s, 22000 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R0>2 F3 W3 R1>3 F4 W4 R2>4");
	sim_free(&s);
}

TEST(first_rule_stops_at_max_dumps)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_FIRST, 1000 * MS, 2, 1ULL << 30);
	for (uint64_t i = 0; i < 4; i++) {
		offer(&s, i, 1.0 + (double)i, i * 2000 * MS);
		run_until(&s, i * 2000 * MS + 1500 * MS);
	}
	CHECK_STR(s.log, "F0 W0 F1 W1");
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_COUNT], 2);
	CHECK_EQ_U64(s.e.st.replaced, 0);
	sim_free(&s);
}

TEST(max_disk_replaces_only_within_the_budget)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 0, 20, 100);
	s.bytes_per_dump = 60;
	offer(&s, 0, 1.5, 0);
	offer(&s, 1, 1.2, 100 * MS);
	run_until(&s, 200 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1");
	/* 120 bytes: the budget is used up; a worse one replaces the least bad. */
	CHECK(offer(&s, 2, 1.3, 300 * MS) == HT_DUMP_NOW);
	run_until(&s, 400 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R1>2");
	CHECK(offer(&s, 3, 1.25, 500 * MS) == HT_DUMP_SKIP_DISK);
	/* Without the least bad the disk would still be over the budget: no replacing. */
	s.bytes_per_dump = 200;
	offer(&s, 3, 1.6, 600 * MS);
	run_until(&s, 700 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R1>2 F3 W3 R2>3");
	CHECK(offer(&s, 4, 1.55, 800 * MS) == HT_DUMP_SKIP_DISK);
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_DISK], 2);
	sim_free(&s);
}

TEST(zero_interval_dumps_each_breach_while_the_builder_keeps_up)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 0, 20, 1ULL << 30);
	s.builder_slow = true;
	/* Windows that overlap: each its own dump, each frozen at its own window's end. */
	offer(&s, 0, 2.0, 0);
	offer(&s, 1, 1.5, 1 * MS);
	run_until(&s, 10 * MS);
	CHECK_STR(s.log, "F0 W0 F1");
	/* The builder is busy with 0 and 1 waits for it: the next is held as the next best. */
	offer(&s, 2, 1.1, 20 * MS);
	run_until(&s, 30 * MS);
	CHECK_STR(s.log, "F0 W0 F1 F2");
	/* ...and a worse one takes its place; three captures held at most. */
	offer(&s, 3, 1.2, 40 * MS);
	offer(&s, 4, 1.15, 41 * MS);
	run_until(&s, 50 * MS);
	CHECK_STR(s.log, "F0 W0 F1 F2 X2 F3");
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_BUSY], 2);
	finish_write(&s);
	run(&s, 60 * MS);
	finish_write(&s);
	run(&s, 70 * MS);
	CHECK_STR(s.log, "F0 W0 F1 F2 X2 F3 W1 W3");
	sim_free(&s);
}

TEST(asked_dumps_skip_the_interval_and_outrank_breaches)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 1, 1ULL << 30);
	offer(&s, 0, 5.0, 0);
	run_until(&s, 1500 * MS);
	CHECK_STR(s.log, "F0 W0");
	/* --max-dumps 1 is used up by a breach: a manual dump replaces it. */
	CHECK(offer_asked(&s, 1, 1600 * MS) == HT_DUMP_NOW);
	run_until(&s, 1700 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 R0>1");
	/* No breach replaces a manual dump; nor does another manual dump. */
	CHECK(offer(&s, 2, 50.0, 1800 * MS) == HT_DUMP_SKIP_COUNT);
	CHECK(offer_asked(&s, 3, 1900 * MS) == HT_DUMP_SKIP_COUNT);
	sim_free(&s);
}

TEST(a_manual_dump_behind_another_follows_it)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	s.builder_slow = true;
	CHECK(offer_asked(&s, 0, 0) == HT_DUMP_NOW);
	CHECK(offer_asked(&s, 1, 1 * MS) == HT_DUMP_LATER);
	CHECK(offer_asked(&s, 2, 1 * MS) == HT_DUMP_LATER); /* the newer request waits instead */
	/* The one behind freezes once the first is handed over (late: it says so). */
	run_until(&s, 10 * MS);
	CHECK_STR(s.log, "X1 F0 W0 F2");
	CHECK(s.e.asked.deferred);
	finish_write(&s);
	run(&s, 20 * MS);
	CHECK_STR(s.log, "X1 F0 W0 F2 W2");
	sim_free(&s);
}

TEST(the_pending_best_is_written_at_exit)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	offer(&s, 0, 1.5, 0);
	offer(&s, 1, 1.7, 1 * MS);
	/* The interval has 990 ms to go, and the last window has not ended yet. */
	finish(&s, 2 * MS);
	CHECK_STR(s.log, "X0 F1 W1");
	CHECK(ht_dump_engine_idle(&s.e));
	sim_free(&s);
}

TEST(a_failed_write_keeps_the_dump_it_was_to_replace)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 0, 1, 1ULL << 30);
	offer(&s, 0, 1.5, 0);
	run_until(&s, 10 * MS);
	s.fail_next_write = true;
	offer(&s, 1, 2.0, 20 * MS);
	run_until(&s, 30 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1");
	CHECK_EQ_U64(s.e.st.failed, 1);
	CHECK_EQ_U64(s.e.nkept, 1);
	CHECK(!s.e.kept[0].doomed);
	/* It can be replaced by the next worse one. */
	offer(&s, 2, 2.0, 40 * MS);
	run_until(&s, 50 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R0>2");
	sim_free(&s);
}

TEST(a_failed_freeze_is_counted_and_forgotten)
{
	static struct sim s;
	struct ht_dump_action a;

	sim_init(&s, HT_DUMP_RULE_WORST, 1000 * MS, 20, 1ULL << 30);
	offer(&s, 0, 1.5, 0);
	a = ht_dump_engine_next(&s.e, 3 * MS);
	CHECK(a.what == HT_DUMP_ACT_FREEZE && a.id == 0);
	ht_dump_engine_frozen(&s.e, 0, false);
	CHECK_EQ_U64(s.e.st.failed, 1);
	/* The interval is still open: a later breach of it is its dump. */
	CHECK(offer(&s, 1, 1.1, 10 * MS) == HT_DUMP_NOW);
	run_until(&s, 1500 * MS);
	CHECK_STR(s.log, "F1 W1");
	sim_free(&s);
}

TEST(max_dumps_zero_never_dumps)
{
	static struct sim s;

	sim_init(&s, HT_DUMP_RULE_WORST, 0, 0, 1ULL << 30);
	CHECK(offer(&s, 0, 9.0, 0) == HT_DUMP_SKIP_COUNT);
	CHECK(offer_asked(&s, 1, 1 * MS) == HT_DUMP_SKIP_COUNT);
	run_until(&s, 100 * MS);
	CHECK_STR(s.log, "");
	CHECK(ht_dump_engine_idle(&s.e));
	sim_free(&s);
}

/* The kept dumps of process TGID, by their ratios, worst first (at most 8). */
static size_t kept_of(const struct sim *s, int tgid, double *ratios)
{
	size_t n = 0;

	for (size_t i = 0; i < s->e.nkept && n < 8; i++) {
		double r = s->e.kept[i].rank.ratio;
		size_t at = n;

		if (s->e.kept[i].tgid != tgid)
			continue;
		n++;
		while (at > 0 && ratios[at - 1] < r) {
			ratios[at] = ratios[at - 1];
			at--;
		}
		ratios[at] = r;
	}
	return n;
}

TEST(per_process_limit_keeps_each_process_worst)
{
	static struct sim s;
	/* (process, ratio), each in an interval of its own. */
	const struct {
		int tgid;
		double ratio;
		enum ht_dump_decision want;
	} offers[] = {
		{ 100, 1.5, HT_DUMP_NOW },	    { 200, 1.2, HT_DUMP_NOW },
		{ 100, 1.1, HT_DUMP_SKIP_PROCESS }, { 100, 2.0, HT_DUMP_NOW },
		{ 200, 3.0, HT_DUMP_NOW },	    { 200, 2.5, HT_DUMP_SKIP_PROCESS },
		{ 100, 2.0, HT_DUMP_SKIP_PROCESS },
	};
	double ratios[8];

	sim_init_per_process(&s, HT_DUMP_RULE_WORST, 100 * MS, 10, 1ULL << 30, 1);
	for (uint64_t i = 0; i < sizeof(offers) / sizeof(offers[0]); i++) {
		CHECK(offer_of(&s, i, offers[i].tgid, offers[i].ratio, i * 1000 * MS) ==
		      offers[i].want);
		run_until(&s, i * 1000 * MS + 500 * MS);
	}
	/* Each process's worse replaced its own least bad, never the other's. */
	CHECK_STR(s.log, "F0 W0 F1 W1 F3 W3 R0>3 F4 W4 R1>4");
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_PROCESS], 3);
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_COUNT], 0);
	CHECK_EQ_U64(s.e.nkept, 2);
	memset(ratios, 0, sizeof(ratios));
	CHECK(kept_of(&s, 100, ratios) == 1 && ratios[0] == 2.0);
	CHECK(kept_of(&s, 200, ratios) == 1 && ratios[0] == 3.0);
	sim_free(&s);
}

TEST(per_process_limit_beside_the_sessions)
{
	static struct sim s;

	/* Two a process, two in all: the session's limit holds over a process under its own. */
	sim_init_per_process(&s, HT_DUMP_RULE_WORST, 100 * MS, 2, 1ULL << 30, 2);
	CHECK(offer_of(&s, 0, 100, 1.1, 0) == HT_DUMP_NOW);
	run_until(&s, 500 * MS);
	CHECK(offer_of(&s, 1, 100, 1.2, 1000 * MS) == HT_DUMP_NOW);
	run_until(&s, 1500 * MS);
	/* Process 200 has none, but the session is full: the least bad of all goes. */
	CHECK(offer_of(&s, 2, 200, 5.0, 2000 * MS) == HT_DUMP_NOW);
	run_until(&s, 2500 * MS);
	/* Process 100 is under its two, and not worse than the least bad of the session. */
	CHECK(offer_of(&s, 3, 100, 1.15, 3000 * MS) == HT_DUMP_SKIP_COUNT);
	run_until(&s, 3500 * MS);
	CHECK_STR(s.log, "F0 W0 F1 W1 F2 W2 R0>2");
	CHECK_EQ_U64(s.e.nkept, 2);
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_PROCESS], 0);
	CHECK_EQ_U64(s.e.st.skipped[HT_DUMP_SKIP_COUNT], 1);
	sim_free(&s);
}

TEST(per_process_limit_under_the_first_rule_and_for_asked_dumps)
{
	static struct sim s;

	sim_init_per_process(&s, HT_DUMP_RULE_FIRST, 100 * MS, 10, 1ULL << 30, 1);
	CHECK(offer_of(&s, 0, 100, 1.0, 0) == HT_DUMP_NOW);
	run_until(&s, 500 * MS);
	CHECK(offer_of(&s, 1, 100, 9.0, 1000 * MS) == HT_DUMP_SKIP_PROCESS);
	run_until(&s, 1500 * MS);
	/* A manual dump is of no process: it counts against none. */
	CHECK(offer_asked(&s, 2, 2000 * MS) == HT_DUMP_NOW);
	run_until(&s, 2500 * MS);
	CHECK(offer_of(&s, 3, 200, 1.0, 3000 * MS) == HT_DUMP_NOW);
	run_until(&s, 3500 * MS);
	CHECK_STR(s.log, "F0 W0 F2 W2 F3 W3");
	CHECK(!strcmp(ht_dump_decision_reason(HT_DUMP_SKIP_PROCESS, HT_DUMP_RULE_FIRST),
		      "max-dumps-per-process reached for its process"));
	sim_free(&s);
}

TEST(per_process_limit_counts_a_dump_still_being_written)
{
	static struct sim s;

	/* The builder still writes process 100's first when its second, worse, is chosen. */
	sim_init_per_process(&s, HT_DUMP_RULE_WORST, 100 * MS, 10, 1ULL << 30, 1);
	s.builder_slow = true;
	CHECK(offer_of(&s, 0, 100, 1.5, 0) == HT_DUMP_NOW);
	run_until(&s, 150 * MS);
	CHECK(offer_of(&s, 1, 100, 1.4, 200 * MS) == HT_DUMP_SKIP_PROCESS);
	CHECK(offer_of(&s, 2, 100, 2.0, 300 * MS) == HT_DUMP_NOW);
	run_until(&s, 450 * MS);
	finish_write(&s);
	run_until(&s, 500 * MS);
	finish_write(&s);
	CHECK_STR(s.log, "F0 W0 F2 W2 R0>2");
	CHECK_EQ_U64(s.e.nkept, 1);
	sim_free(&s);
}

TEST(decisions_add_up)
{
	static struct sim s;
	uint64_t offered = 0, skipped = 0;

	sim_init(&s, HT_DUMP_RULE_WORST, 100 * MS, 3, 1ULL << 30);
	s.builder_slow = true;
	for (uint64_t i = 1; i < 500; i++) {
		offer(&s, i, 1.0 + (double)((i * 37) % 101) / 10, i * 3 * MS);
		offered++;
		if (i % 50 == 0)
			finish_write(&s);
	}
	finish(&s, 2000 * MS);
	for (int d = 0; d < HT_DUMP_DECISIONS; d++)
		skipped += s.e.st.skipped[d];
	CHECK_EQ_U64(skipped + s.e.st.written + s.e.st.failed, offered);
	CHECK_EQ_U64(s.e.st.written - s.e.st.replaced, 3);
	sim_free(&s);
}
