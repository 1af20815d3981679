// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sampled stacks lowered into the timeline: samples with known stacks at
 * known times give slices of known names, depths, spans and sample counts;
 * a gap ends every slice; each thread its own track; the breached thread's
 * stacks before and after its wait; frames named by the symbolizer from this
 * very process, a frame-pointer walk's garbage cut off.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "hybtrace/records.h"
#include "sources/sample/sampler.h"
#include "sources/sample/user_timeline.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "trace/dump_schema.h"
#include "trace/timeline.h"

#define TGID	  100
#define T1	  101
#define T2	  102
#define PERIOD_NS 1000

/* Frames by address (no symbolizer): named "0xADDR". */
#define MAIN  0x1000
#define WORK  0x2000
#define LEAF  0x3000
#define OTHER 0x4000
#define IDLE  0x5000
#define KFUNC 0xffffffff81000000ull

static struct ht_sample samples[16];
static struct ht_sample_set set = {.v = samples};

/* A sample of TID at T_NS: user frames ROOT first (as a reader says a stack), kernel frames after.
 */
static void add_sample(uint32_t tid, uint64_t t_ns, const uint64_t *user, unsigned int nuser,
		       const uint64_t *kernel, unsigned int nkernel)
{
	struct ht_sample *s = &samples[set.count++];

	memset(s, 0, sizeof(*s));
	s->time_ns = t_ns;
	s->pid = TGID;
	s->tid = tid;
	s->period = PERIOD_NS;
	/* perf's callchain: kernel frames leaf first, then user frames leaf first. */
	s->nr_kernel = (uint16_t)nkernel;
	s->nr_user = (uint16_t)nuser;
	for (unsigned int i = 0; i < nkernel; i++)
		s->frames[i] = kernel[nkernel - 1 - i];
	for (unsigned int i = 0; i < nuser; i++)
		s->frames[nkernel + i] = user[nuser - 1 - i];
}

/* The window every test builds: the samples above, no symbols unless given. */
static struct timeline *build(struct ht_symbolizer_set *symbols, const struct ht_breach *breach)
{
	struct ht_user_window uw = {.t0 = 0,
				    .t1 = 100000,
				    .period_ns = PERIOD_NS,
				    .samples = &set,
				    .symbols = symbols,
				    .breach = breach};
	struct timeline *tl = tl_new();

	CHECK(tl != NULL);
	if (tl)
		CHECK(!ht_user_timeline_build(tl, &uw));
	return tl;
}

/* A slice as a viewer shows it: its track's thread, depth on that track, name, span, samples. */
struct seen_slice {
	int32_t tid;
	unsigned int depth;
	char name[64];
	uint64_t start_ns, end_ns;
	uint64_t samples;
};

/*
 * The slices in canonical order, each with its depth: how many slices of
 * its track enclose it, as Perfetto nests them (a slice that starts where
 * another ends is no child of it).
 */
static size_t slices_of(const struct timeline *tl, struct seen_slice *out, size_t cap)
{
	uint32_t *order = tl_sorted_order(tl);
	uint64_t open_end[64];
	uint32_t open_track = UINT32_MAX;
	size_t n = 0, depth = 0;

	CHECK(order != NULL);
	for (size_t k = 0; order && k < tl_event_count(tl) && n < cap; k++) {
		const struct tl_event *e = tl_event(tl, order[k]);
		const struct tl_event_lists *l = tl_event_lists(tl, e);
		struct seen_slice *s = &out[n];

		if (e->kind != TL_EVENT_SLICE)
			continue;
		if (e->track != open_track)
			depth = 0;
		open_track = e->track;
		while (depth && open_end[depth - 1] <= e->ts_ns)
			depth--;
		memset(s, 0, sizeof(*s));
		s->tid = tl_track(tl, e->track)->tid;
		s->depth = (unsigned int)depth;
		snprintf(s->name, sizeof(s->name), "%s", tl_str_get(tl, e->name));
		s->start_ns = e->ts_ns;
		s->end_ns = e->ts_ns + e->dur_ns;
		for (uint32_t a = l->args.first; a; a = tl_arg(tl, a)->next)
			if (!strcmp(tl_str_get(tl, tl_arg(tl, a)->name), HT_ARG_SAMPLES))
				s->samples = tl_arg(tl, a)->u;
		CHECK_STR(tl_str_get(tl, e->category), HT_CAT_USER);
		if (depth < 64)
			open_end[depth++] = s->end_ns;
		n++;
	}
	free(order);
	return n;
}

static void print_slices(const struct seen_slice *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("     tid %d depth %u %s [%llu, %llu) samples %llu\n", v[i].tid, v[i].depth,
		       v[i].name, (unsigned long long)v[i].start_ns,
		       (unsigned long long)v[i].end_ns, (unsigned long long)v[i].samples);
}

/* TL's slices are WANT's NWANT, field by field; the slices seen are printed when they are not. */
static void check_slices(const struct timeline *tl, const struct seen_slice *want, size_t nwant)
{
	struct seen_slice v[16];
	size_t n = slices_of(tl, v, 16);

	CHECK_EQ_U64(n, nwant);
	if (n != nwant) {
		print_slices(v, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ_U64(v[i].tid, want[i].tid);
		CHECK_EQ_U64(v[i].depth, want[i].depth);
		CHECK_STR(v[i].name, want[i].name);
		CHECK_EQ_U64(v[i].start_ns, want[i].start_ns);
		CHECK_EQ_U64(v[i].end_ns, want[i].end_ns);
		CHECK_EQ_U64(v[i].samples, want[i].samples);
	}
}

/*
 * T1 runs main > work > leaf for three periods, main > work > other for one,
 * is off the CPU for a little longer than two periods, then runs main > idle with a
 * kernel frame under it. A slice spans its first sample to its last plus a
 * period; one that a changed stack ends stops at the sample that changed it.
 */
TEST(stacks_become_nested_slices_of_known_spans)
{
	static const uint64_t mwl[] = {MAIN, WORK, LEAF}, mwo[] = {MAIN, WORK, OTHER};
	static const uint64_t mi[] = {MAIN, IDLE}, k[] = {KFUNC};
	static const struct seen_slice want[] = {
		{T1, 0, "0x1000", 1000, 5000, 4},
		{T1, 1, "0x2000", 1000, 5000, 4},
		{T1, 2, "0x3000", 1000, 4000, 3},
		{T1, 2, "0x4000", 4000, 5000, 1},
		/* After the gap: a new main, not the old one stretched over the gap. */
		{T1, 0, "0x1000", 6100, 7100, 1},
		{T1, 1, "0x5000", 6100, 7100, 1},
		/* Kernel frames go under the user frames, named by address without ksyms. */
		{T1, 2, "[kernel]+0xffffffff81000000", 6100, 7100, 1},
	};
	struct timeline *tl;

	set.count = 0;
	add_sample(T1, 1000, mwl, 3, NULL, 0);
	add_sample(T1, 2000, mwl, 3, NULL, 0);
	add_sample(T1, 3000, mwl, 3, NULL, 0);
	add_sample(T1, 4000, mwo, 3, NULL, 0);
	add_sample(T1, 6100, mi, 2, k, 1); /* a little more than two periods after the last */
	tl = build(NULL, NULL);
	check_slices(tl, want, sizeof(want) / sizeof(want[0]));
	tl_free(tl);
}

/*
 * A sample that comes early (timer jitter) ends what it replaces at its own
 * time, not a period after the last one; a gap of just two periods is no gap.
 */
TEST(early_samples_and_short_gaps)
{
	static const uint64_t ma[] = {MAIN, WORK}, mb[] = {MAIN, OTHER};
	static const struct seen_slice want[] = {
		{T1, 0, "0x1000", 1000, 4600, 3},
		{T1, 1, "0x2000", 1000, 1600, 1},
		{T1, 1, "0x4000", 1600, 4600, 2},
	};
	struct timeline *tl;

	set.count = 0;
	add_sample(T1, 1000, ma, 2, NULL, 0);
	add_sample(T1, 1600, mb, 2, NULL, 0); /* 0.6 periods after the last */
	add_sample(T1, 3600, mb, 2, NULL, 0); /* two periods later: still on the CPU */
	tl = build(NULL, NULL);
	check_slices(tl, want, sizeof(want) / sizeof(want[0]));
	tl_free(tl);
}

/* Two threads' samples interleaved in time: each thread's slices on its own track. */
TEST(threads_interleaved_get_tracks_of_their_own)
{
	static const uint64_t a[] = {MAIN, WORK}, b[] = {MAIN, IDLE};
	static const struct seen_slice want[] = {
		/* Tracks are in the order the threads were first sampled. */
		{T1, 0, "0x1000", 1000, 3000, 2},
		{T1, 1, "0x2000", 1000, 3000, 2},
		{T2, 0, "0x1000", 1100, 3100, 2},
		{T2, 1, "0x5000", 1100, 3100, 2},
	};
	const struct ht_user_window uw = {.t1 = 100000, .period_ns = PERIOD_NS, .samples = &set};
	struct timeline *tl;
	int process;

	set.count = 0;
	add_sample(T1, 1000, a, 2, NULL, 0);
	add_sample(T2, 1100, b, 2, NULL, 0);
	add_sample(T1, 2000, a, 2, NULL, 0);
	add_sample(T2, 2100, b, 2, NULL, 0);
	/* The kernel window drew the process: the threads' tracks go under it. */
	tl = tl_new();
	process = tl_add_track(
		tl,
		&(struct tl_track_desc){.kind = TL_TRACK_PROCESS, .pid = TGID, .name = "target"});
	CHECK(process >= 0);
	CHECK(!ht_user_timeline_build(tl, &uw));
	check_slices(tl, want, sizeof(want) / sizeof(want[0]));
	CHECK_EQ_U64(tl_track_count(tl), 3);
	for (size_t i = 1; i < tl_track_count(tl) && process >= 0; i++) {
		const struct tl_track *t = tl_track(tl, i);

		CHECK(t->kind == TL_TRACK_THREAD && t->pid == TGID);
		CHECK_EQ_U64(t->parent_uuid, tl_track(tl, (size_t)process)->uuid);
		CHECK_STR(tl_str_get(tl, t->name), t->tid == T1 ? "tid 101" : "tid 102");
	}
	tl_free(tl);
}

/* The call stack of the only instant named NAME, root first, as "name;name;..." . */
static void stack_of(const struct timeline *tl, const char *name, uint64_t *ts_ns, char *out,
		     size_t len)
{
	size_t found = 0;

	out[0] = 0;
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);
		size_t used = 0;

		if (e->kind != TL_EVENT_INSTANT || strcmp(tl_str_get(tl, e->name), name))
			continue;
		found++;
		*ts_ns = e->ts_ns;
		CHECK_EQ_U64(tl_track(tl, e->track)->tid, T1);
		for (size_t f = 0; f < tl_callstack_depth(tl, e->callstack) && used < len; f++) {
			const struct tl_frame *fr = tl_callstack_frame(tl, e->callstack, f);

			used += (size_t)snprintf(out + used, len - used, "%s%s:%llx", f ? ";" : "",
						 tl_str_get(tl, fr->function),
						 (unsigned long long)fr->address);
		}
	}
	CHECK_EQ_U64(found, 1);
}

/*
 * The breached thread's last sample at or before its wait began and its first
 * at or after the wait ended become instants with the sample's stack; other
 * threads' samples and those inside the wait are no candidates.
 */
TEST(breach_stacks_before_and_after)
{
	static const uint64_t before[] = {MAIN, WORK}, inside[] = {MAIN, LEAF};
	static const uint64_t after[] = {MAIN, IDLE}, k[] = {KFUNC};
	const struct ht_breach breach = {.kind = HT_BREACH_OFF_CPU,
					 .tid = T1,
					 .tgid = TGID,
					 .start_ns = 5000,
					 .end_ns = 9000};
	struct timeline *tl;
	char stack[512];
	uint64_t ts_ns = 0;

	set.count = 0;
	add_sample(T1, 2000, inside, 2, NULL, 0);
	add_sample(T1, 5000, before, 2, NULL, 0);
	add_sample(T2, 5100, inside, 2, NULL, 0);
	add_sample(T1, 7000, inside, 2, NULL, 0);
	add_sample(T2, 8900, after, 2, NULL, 0);
	add_sample(T1, 9000, after, 2, k, 1);
	add_sample(T1, 9500, inside, 2, NULL, 0);
	tl = build(NULL, &breach);
	stack_of(tl, HT_EV_STACK_BEFORE, &ts_ns, stack, sizeof(stack));
	CHECK_EQ_U64(ts_ns, 5000);
	CHECK_STR(stack, "0x1000:1000;0x2000:2000");
	stack_of(tl, HT_EV_STACK_AFTER, &ts_ns, stack, sizeof(stack));
	CHECK_EQ_U64(ts_ns, 9000);
	CHECK_STR(stack, "0x1000:1000;0x5000:5000;[kernel]+0xffffffff81000000:ffffffff81000000");
	tl_free(tl);

	/* No sample of the breached thread outside its wait: no instants. */
	set.count = 0;
	add_sample(T1, 7000, inside, 2, NULL, 0);
	tl = build(NULL, &breach);
	for (size_t i = 0; i < tl_event_count(tl); i++)
		CHECK(tl_event(tl, i)->kind != TL_EVENT_INSTANT);
	tl_free(tl);
}

/* Functions of this test binary, called nowhere: their addresses are the frames. */
__attribute__((noinline)) void ut_root_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void ut_mid_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void ut_leaf_fn(void)
{
	__asm__ volatile("" ::: "memory");
}

/*
 * The first address past function NAME at START as the symbolizer sees it:
 * where a call that is NAME's last instruction returns to.
 */
static uint64_t end_of(struct ht_symbolizer *s, uint64_t start, const char *name)
{
	struct ht_symbol sym;
	uint64_t a = start + 1;

	while (a < start + 4096 && !ht_symbolize(s, a, &sym) && sym.function &&
	       !strcmp(sym.function, name))
		a++;
	CHECK(a < start + 4096);
	return a;
}

/*
 * With the symbolizer, frames are this process's functions: the leaf by its
 * address, callers by their return address (one past the call, which may be
 * the next function's first byte: the lookup is of the byte before). A
 * frame-pointer walk that ran into garbage keeps only the frames up to the
 * first address no executable mapping holds.
 */
TEST(frames_named_by_the_symbolizer_and_garbage_cut)
{
	static const struct seen_slice want[] = {
		{T1, 0, "ut_root_fn", 1000, 2000, 1},
		{T1, 1, "ut_mid_fn", 1000, 2000, 1},
		{T1, 2, "ut_leaf_fn", 1000, 2000, 1},
	};
	struct ht_symbolizer *s = ht_symbolizer_new(getpid());
	struct ht_symbolizer_set *symbols;
	struct timeline *tl;
	uint64_t user[5];

	CHECK(s != NULL);
	if (!s)
		return;
	/* Root first: garbage above ut_root_fn, as a walk past code without frame pointers. */
	user[0] = (uint64_t)(uintptr_t)main + 1;
	user[1] = 0x10;
	user[2] = end_of(s, (uintptr_t)ut_root_fn, "ut_root_fn");
	user[3] = end_of(s, (uintptr_t)ut_mid_fn, "ut_mid_fn");
	user[4] = (uint64_t)(uintptr_t)ut_leaf_fn;
	set.count = 0;
	add_sample(T1, 1000, user, 5, NULL, 0);
	samples[0].pid = (uint32_t)getpid();
	symbols = ht_symbolizer_set_new(false, 0);
	CHECK(symbols != NULL);
	tl = build(symbols, NULL);
	check_slices(tl, want, sizeof(want) / sizeof(want[0]));
	tl_free(tl);
	ht_symbolizer_set_free(symbols);
	ht_symbolizer_free(s);
}

/*
 * Samples of two processes: each named by its own process's symbols, each
 * thread under its own process's track. The second process is gone (its
 * symbols cannot be had): its frames stay addresses, though the same
 * addresses name functions of this one.
 */
TEST(each_process_named_by_its_own_symbols)
{
	static const struct seen_slice want[] = {
		{T1, 0, "ut_leaf_fn", 1000, 2000, 1},
		{T2, 0, "", 1100, 2100, 1},
	};
	struct ht_symbolizer_set *symbols = ht_symbolizer_set_new(false, 0);
	uint64_t user[1] = {(uint64_t)(uintptr_t)ut_leaf_fn};
	struct seen_slice addr = want[1];
	pid_t gone = fork();
	struct timeline *tl;

	if (gone == 0)
		_exit(0);
	CHECK(symbols && gone > 0);
	if (!symbols || gone <= 0)
		return;
	waitpid(gone, NULL, 0);
	snprintf(addr.name, sizeof(addr.name), "0x%llx", (unsigned long long)user[0]);
	set.count = 0;
	add_sample(T1, 1000, user, 1, NULL, 0);
	add_sample(T2, 1100, user, 1, NULL, 0);
	samples[0].pid = (uint32_t)getpid();
	samples[1].pid = (uint32_t)gone;
	tl = build(symbols, NULL);
	check_slices(tl, (struct seen_slice[]){want[0], addr}, 2);
	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);
		long parent = tl_track_find(tl, t->parent_uuid);

		if (t->kind != TL_TRACK_THREAD)
			continue;
		CHECK(t->pid == (t->tid == T1 ? getpid() : gone));
		CHECK(parent >= 0 && tl_track(tl, (size_t)parent)->kind == TL_TRACK_PROCESS &&
		      tl_track(tl, (size_t)parent)->pid == t->pid);
	}
	tl_free(tl);
	ht_symbolizer_set_free(symbols);
}

/* A kernel thread's samples (--all) have kernel frames alone: no process's symbols are asked. */
TEST(kernel_only_samples_ask_for_no_symbols)
{
	static const uint64_t k[] = {KFUNC};
	struct ht_symbolizer_set *symbols = ht_symbolizer_set_new(false, 0);
	struct ht_symbolizer_set_stats st;
	struct timeline *tl;

	CHECK(symbols != NULL);
	if (!symbols)
		return;
	set.count = 0;
	add_sample(T1, 1000, NULL, 0, k, 1);
	samples[0].pid = (uint32_t)getpid();
	tl = build(symbols, NULL);
	ht_symbolizer_set_get_stats(symbols, &st);
	CHECK_EQ_U64(st.processes, 0);
	CHECK_EQ_U64(st.made, 0);
	tl_free(tl);
	ht_symbolizer_set_free(symbols);
}
