// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Intel PT decode and call stacks, proven without PT hardware: test
 * programs (tests/pt/) are single-stepped with ptrace, the PT packets of
 * their paths are synthesized with libipt's encoder (tests/pt/pt_synth.c),
 * and the decoder must give back exactly the path that ran, and the call
 * stacks exactly its calls and returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sources/intelpt/callstack.h"
#include "check.h"
#include "trace/dump_schema.h"
#include "sources/intelpt/intelpt_decode.h"
#include "base/log.h"
#include "sources/intelpt/ocaml_eh.h"
#include "sources/intelpt/pt_resolver.h"
#include "symbols/symbolizer.h"
#include "trace/timeline.h"
#include "pt_programs.h"
#include "pt_synth.h"

static int build_programs(void)
{
	return ht_pt_programs_build("/tmp/ht-intelpt-XXXXXX", 1);
}

#define REQUIRE_PROGRAMS() REQUIRE_BUILT(build_programs)

/* Recordings, made once per scenario. */

struct recording {
	const char *program, *scenario;
	struct ht_synth_trace t;
	int done;
};

static struct recording recordings[16];

static const struct ht_synth_trace *record(const char *program, const char *scenario)
{
	char exe[PATH_MAX + 32];
	char *argv[3];
	struct recording *r;
	struct ht_synth_record_opts o = {
		.start = "ht_trace_start",
		.stop = "ht_trace_stop",
		.max_steps = 50000,
	};

	for (r = recordings; r->program; r++)
		if (!strcmp(r->program, program) && !strcmp(r->scenario, scenario))
			return r->done ? &r->t : NULL;
	if (r - recordings >= 15)
		return NULL;
	r->program = program;
	r->scenario = scenario;
	snprintf(exe, sizeof(exe), "%s/%s", ht_pt_programs_dir, program);
	argv[0] = exe;
	argv[1] = (char *)scenario;
	argv[2] = NULL;
	o.exe = exe;
	o.argv = argv;
	if (ht_synth_record(&o, &r->t)) {
		printf("     recording %s %s: %s\n", program, scenario, ht_last_error());
		return NULL;
	}
	if (r->t.exited || !r->t.count) {
		printf("     recording %s %s did not reach ht_trace_stop\n", program, scenario);
		return NULL;
	}
	r->done = 1;
	return &r->t;
}

static const struct ht_synth_encode_opts default_encode = {
	.psb_period = 256,
	.tsc0 = 1000000,
	.tsc_per_insn = 3,
	.tsc_per_kernel = 5000,
	.tsc_every = 4,
	.end_disable = 1,
};

/* Decoding, checked against the recording as it goes. */

struct change_log {
	struct ht_cs_change *v;
	size_t n, cap;
};

struct run {
	const struct ht_synth_encode_opts *opts;
	const struct ht_synth_trace *t;
	const struct ht_synth_stream *s;
	size_t k;	/* the recorded instruction the next decoded one must be */
	int synced;	/* k is known */
	size_t matched; /* instructions decoded and equal to the recording */
	size_t first;	/* index of the first instruction decoded */
	size_t k_at_overflow;
	int first_set;
	char why[256]; /* the first mismatch */
	size_t syncs, errors, overflows, enables, disables, others;
	int last_error;
	uint64_t last_tsc;
	int tsc_backwards, tsc_off;
	/* MTC and CYC timing: blocks checked, off their bound, the worst distance to the truth */
	size_t timed, time_bad;
	uint64_t worst_known, worst_first;
	struct change_log log;
	struct timeline *tl;
	int track;
	struct ht_callstack *cs;
	struct ht_pt_elf_resolver *resolver;
};

static void mismatch(struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (r->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static void log_change(void *ctx, const struct ht_cs_change *c)
{
	struct change_log *l = ctx;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = *c;
}

/*
 * libipt's time is that of the last timing packet it read. It reads ahead
 * to the next branch's packet, so a block's time may be a little past its
 * end; and code that needs no packets (direct calls and jumps) moves on
 * without reading the timing packets between, so it may lag behind.
 */
static int time_near(const struct run *r, uint64_t tsc, size_t last)
{
	const struct ht_synth_encode_opts *o = r->opts;
	size_t ahead = last + 2 * o->tsc_every + 2;

	if (ahead >= r->t->count)
		ahead = r->t->count - 1;
	return tsc <= r->s->tsc[ahead] + o->tsc_per_kernel;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/*
 * A block's time against the ground truth, with MTC and CYC timing. The
 * decoder can know no more than the time of the last packet it took in by
 * the end of the block ("known": a TNT's CYC gives its first branch's
 * time, SDM 36.3.6), which is the block's own time when its last branch
 * took a packet, and earlier for a block that ran without one. With CYC:
 * that time, within a TSC tick for each CYC packet added up since the last
 * TSC or MTC (libipt converts cycles with an 8-bit fixed-point ratio) and
 * one for the rounding of the TSC packet. With MTC only: the last MTC at or
 * before it, so less than one MTC period before it, and never after it.
 */
static void check_block_time(struct run *r, const struct ht_pt_item *it)
{
	const struct ht_synth_stream *s = r->s;
	size_t first = r->k, last = r->k + it->ninsn - 1;
	uint64_t known = s->known_tsc[last], truth = s->tsc[first];
	int ok;

	if (!it->tsc)
		return;
	r->timed++;
	if (s->opts.timing == HT_SYNTH_TIMING_CYC)
		ok = distance(it->tsc, known) <= s->known_cycs[last] + 1u;
	else
		ok = it->tsc + s->mtc_period_tsc > known && it->tsc <= known + 1;
	if (distance(it->tsc, known) > r->worst_known)
		r->worst_known = distance(it->tsc, known);
	if (distance(it->tsc, truth) > r->worst_first)
		r->worst_first = distance(it->tsc, truth);
	if (ok)
		return;
	if (!r->time_bad++ || getenv("HT_PT_SHOW"))
		printf("     block %zu..%zu: tsc %lu, truth %lu, known %lu (%u CYC), MTC period "
		       "%lu\n",
		       first, last, (unsigned long)it->tsc, (unsigned long)truth,
		       (unsigned long)known, s->known_cycs[last], (unsigned long)s->mtc_period_tsc);
}

static void check_block(struct run *r, const struct ht_pt_item *it)
{
	const struct ht_synth_trace *t = r->t;

	if (!r->synced) {
		mismatch(r, "a block at %#lx before any sync", (unsigned long)it->ip);
		return;
	}
	if (!r->first_set) {
		r->first = r->k;
		r->first_set = 1;
	}
	if (r->k + it->ninsn > t->count) {
		mismatch(r, "block at %#lx runs past the recording", (unsigned long)it->ip);
		return;
	}
	if (t->insns[r->k].ip != it->ip || t->insns[r->k + it->ninsn - 1].ip != it->end_ip)
		mismatch(r, "block %#lx..%#lx at instruction %zu, recorded %#lx..%#lx",
			 (unsigned long)it->ip, (unsigned long)it->end_ip, r->k,
			 (unsigned long)t->insns[r->k].ip,
			 (unsigned long)t->insns[r->k + it->ninsn - 1].ip);
	/* A block is a straight run: each instruction follows the one before. */
	for (uint32_t i = 1; i < it->ninsn; i++) {
		const struct ht_synth_insn *a = &t->insns[r->k + i - 1];

		if (a->ip + a->size != t->insns[r->k + i].ip)
			mismatch(r, "block at %#lx is not contiguous at %zu", (unsigned long)it->ip,
				 r->k + i);
	}
	if (it->branch == HT_PT_BR_CALL) {
		const struct ht_synth_insn *c = &t->insns[r->k + it->ninsn - 1];

		if (it->next_ip != c->ip + c->size)
			mismatch(r, "call at %#lx: return address %#lx, not %#lx",
				 (unsigned long)c->ip, (unsigned long)it->next_ip,
				 (unsigned long)(c->ip + c->size));
	}
	if (r->opts->timing != HT_SYNTH_TIMING_TSC)
		check_block_time(r, it);
	else if (it->tsc && !time_near(r, it->tsc, r->k + it->ninsn - 1)) {
		if (getenv("HT_PT_SHOW"))
			printf("     block %zu..%zu: tsc %lu, recorded %lu..%lu\n", r->k,
			       r->k + it->ninsn - 1, (unsigned long)it->tsc,
			       (unsigned long)r->s->tsc[r->k],
			       (unsigned long)r->s->tsc[r->k + it->ninsn - 1]);
		r->tsc_off++;
	}
	if (it->tsc < r->last_tsc)
		r->tsc_backwards++;
	r->last_tsc = it->tsc;
	r->k += it->ninsn;
	if (!r->why[0])
		r->matched += it->ninsn;
}

static void check_sync(struct run *r, const struct ht_pt_item *it)
{
	r->syncs++;
	for (size_t i = 0; i < r->s->npsbs; i++) {
		if (r->s->psbs[i].offset == it->offset) {
			r->k = r->s->psbs[i].index;
			r->synced = 1;
			return;
		}
	}
	mismatch(r, "synced at offset %#lx where no PSB was written", (unsigned long)it->offset);
}

static void check_item(struct run *r, const struct ht_pt_item *it)
{
	switch (it->kind) {
	case HT_PT_ITEM_BLOCK:
		check_block(r, it);
		break;
	case HT_PT_ITEM_SYNC:
		check_sync(r, it);
		break;
	case HT_PT_ITEM_ERROR:
		r->errors++;
		r->last_error = it->error;
		r->synced = 0;
		break;
	case HT_PT_ITEM_OVERFLOW:
		r->overflows++;
		r->k_at_overflow = r->k;
		r->k = r->s->ovf_resume;
		if (it->ip != r->t->insns[r->k].ip)
			mismatch(r, "overflow resumes at %#lx", (unsigned long)it->ip);
		break;
	case HT_PT_ITEM_ENABLED:
		r->enables++;
		break;
	case HT_PT_ITEM_DISABLED:
		r->disables++;
		break;
	default:
		r->others++;
		break;
	}
}

static int run_sink(void *ctx, const struct ht_pt_item *items, size_t n)
{
	struct run *r = ctx;

	for (size_t i = 0; i < n; i++)
		check_item(r, &items[i]);
	return r->cs ? ht_callstack_items(r->cs, items, n) : 0;
}

struct decode_opts {
	const struct ht_pt_mapping *maps; /* NULL: the recording's */
	size_t nmaps;
	int no_ocaml;
};

/* TSC runs at 1 GHz from 0: ns are ticks. */
static const struct ht_pt_clock_pair unit_pairs[] = {{0, 0}, {1000000000000ull, 1000000000000ull}};

static int decode(struct run *r, const struct ht_synth_trace *t, const struct ht_synth_stream *s,
		  const uint8_t *buf, size_t len, const struct decode_opts *o)
{
	struct tl_track_desc td = {.kind = TL_TRACK_THREAD, .name = "pt", .pid = 1, .tid = 1};
	const struct ht_pt_mapping *maps = o && o->maps ? o->maps : t->maps;
	size_t nmaps = o && o->maps ? o->nmaps : t->nmaps;
	const struct ht_ocaml_eh *const *eh = NULL;
	struct ht_callstack_config cc = {0};
	struct ht_pt_decode_opts dopts = {0};
	struct ht_pt_cpu_info cpu;
	struct ht_pt_clock clock;
	struct ht_pt_image *img;
	int rc;

	memset(r, 0, sizeof(*r));
	r->t = t;
	r->s = s;
	r->opts = &s->opts;
	r->tl = tl_new();
	r->track = tl_add_track(r->tl, &td);
	r->resolver = ht_pt_elf_resolver_new(maps, nmaps);
	img = ht_pt_image_new(maps, nmaps);
	if (!r->tl || r->track < 0 || !r->resolver || !img)
		return -1;
	cc.tl = r->tl;
	cc.track = r->track;
	cc.resolve = ht_pt_elf_resolve;
	cc.resolve_ctx = r->resolver;
	cc.observe = log_change;
	cc.observe_ctx = &r->log;
	if (!(o && o->no_ocaml))
		cc.nocaml = ht_pt_elf_resolver_ocaml(r->resolver, &eh);
	cc.ocaml = eh;
	r->cs = ht_callstack_new(&cc);
	ht_pt_clock_init(&clock, unit_pairs, 2, 0);
	/* What a capture of this stream would tell the decoder. */
	ht_synth_cpu_info(&s->opts, &cpu);
	dopts.cpu = &cpu;
	dopts.image = img;
	dopts.clock = &clock;
	rc = r->cs ? ht_pt_decode(buf, len, &dopts, run_sink, r, NULL) : -1;
	if (!rc)
		rc = ht_callstack_finish(r->cs, 0);
	ht_pt_clock_free(&clock);
	ht_pt_image_free(img);
	return rc;
}

static void run_free(struct run *r)
{
	ht_callstack_free(r->cs);
	ht_pt_elf_resolver_free(r->resolver);
	tl_free(r->tl);
	free(r->log.v);
	memset(r, 0, sizeof(*r));
}

static int timeline_valid(struct run *r)
{
	char why[512];

	if (tl_validate(r->tl, why, sizeof(why))) {
		printf("     tl_validate: %s\n", why);
		return 0;
	}
	return 1;
}

/* Recorded instructions [first, last) whose calls and returns the call stacks must see. */
struct span {
	size_t first, last;
};

/*
 * The calls and returns of the recorded SPANS against those the call
 * stacks saw, in order. Returns -1 when they are the same, else the index
 * of the first difference.
 */
static long compare_call_spans(const struct ht_synth_trace *t, const struct span *spans,
			       size_t nspans, const struct change_log *log)
{
	size_t j = 0;

	for (size_t sp = 0; sp < nspans; sp++) {
		for (size_t i = spans[sp].first; i < spans[sp].last; i++) {
			const struct ht_synth_insn *in = &t->insns[i];
			uint64_t to = ht_synth_flow_target(t, i);
			enum ht_cs_op op;

			if (in->iclass == ptic_call && to != in->ip + in->size)
				op = HT_CS_CALL;
			else if (in->iclass == ptic_return)
				op = HT_CS_RETURN;
			else
				continue;
			while (j < log->n && log->v[j].op != HT_CS_CALL &&
			       log->v[j].op != HT_CS_RETURN)
				j++;
			if (j >= log->n || log->v[j].op != op || log->v[j].from != in->ip ||
			    log->v[j].to != to) {
				printf("     call/return %zu (instruction %zu at %#lx) differs\n",
				       j, i, (unsigned long)in->ip);
				return (long)j;
			}
			j++;
		}
	}
	while (j < log->n && log->v[j].op != HT_CS_CALL && log->v[j].op != HT_CS_RETURN)
		j++;
	return j < log->n ? (long)j : -1;
}

static long compare_calls(const struct ht_synth_trace *t, size_t first, size_t last,
			  const struct change_log *log)
{
	struct span one = {first, last};

	return compare_call_spans(t, &one, 1, log);
}

/* Whether the log has OP going to TO. */
static int has_change(const struct change_log *log, enum ht_cs_op op, uint64_t to)
{
	for (size_t i = 0; i < log->n; i++)
		if (log->v[i].op == op && log->v[i].to == to)
			return 1;
	return 0;
}

static size_t count_ops(const struct change_log *log, enum ht_cs_op op)
{
	size_t n = 0;

	for (size_t i = 0; i < log->n; i++)
		n += log->v[i].op == op;
	return n;
}

/* The slices of the track as a tree. */

struct node {
	const char *name;
	long parent;
	uint64_t ts, end;
	int before;
	const char *reason;
};

struct tree {
	struct node *v;
	size_t n;
};

static const struct timeline *sort_tl;

static int by_start(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct tl_event *ex = tl_event(sort_tl, x), *ey = tl_event(sort_tl, y);

	if (ex->ts_ns != ey->ts_ns)
		return ex->ts_ns < ey->ts_ns ? -1 : 1;
	if (ex->dur_ns != ey->dur_ns)
		return ex->dur_ns > ey->dur_ns ? -1 : 1;
	/* Equal spans: call stacks put a parent before its children (tl_reorder_nested). */
	return x < y ? -1 : 1;
}

static const char *arg_str(const struct timeline *tl, const struct tl_event *e, const char *name,
			   int64_t *ival)
{
	for (uint32_t i = tl_event_lists(tl, e)->args.first; i; i = tl_arg(tl, i)->next) {
		const struct tl_arg *a = tl_arg(tl, i);

		if (strcmp(tl_str_get(tl, a->name), name))
			continue;
		if (a->kind == TL_ARG_STR)
			return tl_str_get(tl, a->s);
		if (ival)
			*ival = a->i;
		return "";
	}
	return NULL;
}

static int node_depth(const struct tree *tr, long i);

static void build_tree(const struct timeline *tl, struct tree *tr)
{
	size_t n = tl_event_count(tl);
	uint32_t *order = malloc((n + 1) * sizeof(*order));
	long *stack = malloc((n + 1) * sizeof(*stack));
	size_t depth = 0;

	tr->v = calloc(n + 1, sizeof(*tr->v));
	tr->n = n;
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	sort_tl = tl;
	qsort(order, n, sizeof(*order), by_start);
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = tl_event(tl, order[i]);
		struct node *nd = &tr->v[i];
		int64_t before = 0;

		nd->name = tl_str_get(tl, e->name);
		nd->ts = e->ts_ns;
		nd->end = e->ts_ns + e->dur_ns;
		arg_str(tl, e, HT_ARG_BEFORE_WINDOW, &before);
		nd->before = (int)before;
		nd->reason = arg_str(tl, e, HT_PT_ARG_REASON, NULL);
		while (depth && !(nd->ts >= tr->v[stack[depth - 1]].ts &&
				  nd->end <= tr->v[stack[depth - 1]].end))
			depth--;
		nd->parent = depth ? stack[depth - 1] : -1;
		stack[depth++] = (long)i;
	}
	free(order);
	free(stack);
	if (getenv("HT_PT_SHOW"))
		for (size_t i = 0; i < tr->n; i++)
			printf("     %*s%s [%lu +%lu]%s%s\n", node_depth(tr, (long)i) * 2, "",
			       tr->v[i].name, (unsigned long)tr->v[i].ts,
			       (unsigned long)(tr->v[i].end - tr->v[i].ts),
			       tr->v[i].before ? " before" : "",
			       tr->v[i].reason ? tr->v[i].reason : "");
}

/* The Nth slice named NAME (in start order), or -1. */
static long find_node(const struct tree *tr, const char *name, int nth)
{
	for (size_t i = 0; i < tr->n; i++)
		if (!strcmp(tr->v[i].name, name) && nth-- == 0)
			return (long)i;
	return -1;
}

static const char *parent_name(const struct tree *tr, long i)
{
	if (i < 0 || tr->v[i].parent < 0)
		return "(none)";
	return tr->v[tr->v[i].parent].name;
}

static int node_depth(const struct tree *tr, long i)
{
	int d = 0;

	while (i >= 0 && tr->v[i].parent >= 0) {
		i = tr->v[i].parent;
		d++;
	}
	return d;
}

static size_t count_named(const struct tree *tr, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < tr->n; i++)
		n += !strcmp(tr->v[i].name, name);
	return n;
}

/*
 * Record SCENARIO and encode all of it with OPTS into S. NULL when either
 * fails (S is then empty): the caller's test must fail, since the
 * encoder is the test's own.
 */
static const struct ht_synth_trace *record_encoded(const char *program, const char *scenario,
						   const struct ht_synth_encode_opts *opts,
						   struct ht_synth_stream *s)
{
	const struct ht_synth_trace *t = record(program, scenario);

	memset(s, 0, sizeof(*s));
	if (!t)
		return NULL;
	if (ht_synth_encode(t, 0, t->count, opts, s)) {
		printf("     encode %s %s: %s\n", program, scenario, ht_last_error());
		ht_synth_stream_free(s);
		return NULL;
	}
	return t;
}

/* Record SCENARIO, encode it with OPTS, decode it and compare. On failure R and S are freed. */
static int decode_scenario(struct run *r, const char *program, const char *scenario,
			   const struct ht_synth_encode_opts *opts, struct ht_synth_stream *s)
{
	const struct ht_synth_trace *t = record_encoded(program, scenario, opts, s);

	memset(r, 0, sizeof(*r));
	if (!t)
		return -1;
	if (decode(r, t, s, s->buf, s->len, NULL)) {
		printf("     decode: %s\n", ht_last_error());
		run_free(r);
		ht_synth_stream_free(s);
		return -1;
	}
	return 0;
}

static void check_exact(const char *program, const char *scenario)
{
	struct ht_synth_stream s;
	struct run r;

	if (decode_scenario(&r, program, scenario, &default_encode, &s)) {
		CHECK(!"decode failed");
		return;
	}
	if (r.why[0])
		printf("     %s: %s\n", scenario, r.why);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.matched, r.t->count);
	CHECK_EQ_U64(r.first, 0);
	CHECK_EQ_U64(r.errors, 0);
	CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_GAP), 0);
	CHECK_EQ_U64(r.tsc_backwards, 0);
	CHECK_EQ_U64(r.tsc_off, 0);
	CHECK(timeline_valid(&r));
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* Exact decode of every scenario. */

TEST(decode_exact_basic)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "basic");
}

TEST(decode_exact_longjmp)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "longjmp");
}

TEST(decode_exact_plt)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "plt");
}

TEST(decode_exact_syscall)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "syscall");
}

TEST(decode_exact_vdso)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "vdso");
}

TEST(decode_exact_signal)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "signal");
}

TEST(decode_exact_async_signal)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "async_signal");
}

TEST(decode_exact_deep)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "deep");
}

TEST(decode_exact_bench_loop)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "bench");
}

/* Library code in quantity: qsort's callbacks, printf's jump tables, AVX string functions. */
TEST(decode_exact_mixed)
{
	REQUIRE_PROGRAMS();
	check_exact("pt_workload", "mixed");
	CHECK(record("pt_workload", "mixed") && record("pt_workload", "mixed")->count > 5000);
}

TEST(decode_exact_ocaml)
{
	REQUIRE_PROGRAMS();
	check_exact("ocaml_workload", "-");
}

/* Without return compression every return is a TIP: the same path. */
TEST(decode_exact_noretcomp)
{
	struct ht_synth_encode_opts o = default_encode;
	struct ht_synth_stream s;
	struct run r;

	REQUIRE_PROGRAMS();
	o.noretcomp = 1;
	o.psb_period = 0;
	o.tsc_every = 0;
	if (decode_scenario(&r, "pt_workload", "basic", &o, &s)) {
		CHECK(!"decode failed");
	} else {
		CHECK(!r.why[0]);
		CHECK_EQ_U64(r.matched, r.t->count);
		CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
		CHECK(timeline_valid(&r));
	}
	run_free(&r);
	ht_synth_stream_free(&s);
}

/*
 * Return compression across a kernel excursion: a CPU keeps its stack of
 * calls through TIP.PGD and TIP.PGE (only a PSB clears it), so the returns
 * after a syscall to calls made before it are TNT bits, and the decoder
 * must still know where they go.
 */
TEST(compressed_returns_across_syscall)
{
	struct ht_synth_encode_opts o = default_encode;
	struct ht_synth_stream s;
	struct tree tr;
	struct run r;
	long sc, leaf;

	REQUIRE_PROGRAMS();
	o.psb_period = 0; /* no PSB to clear the stack between the call and its return */
	if (decode_scenario(&r, "pt_workload", "syscall", &o, &s)) {
		CHECK(!"decode failed");
		return;
	}
	/* write's return to sys_b, sys_b's to sys_a and sys_a's to main. */
	CHECK(s.kernel_compressed >= 3);
	if (r.why[0])
		printf("     %s\n", r.why);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.errors, 0);
	CHECK_EQ_U64(r.matched, r.t->count);
	CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_GAP), 0);
	CHECK(timeline_valid(&r));
	build_tree(r.tl, &tr);
	sc = find_node(&tr, HT_PT_SLICE_SYSCALL, 0);
	leaf = find_node(&tr, "leaf", 0);
	CHECK_STR(parent_name(&tr, leaf), "sys_b");
	CHECK(leaf >= 0 && sc >= 0 && tr.v[leaf].ts >= tr.v[sc].end);
	CHECK_STR(parent_name(&tr, find_node(&tr, "sys_b", 0)), "sys_a");
	CHECK_STR(parent_name(&tr, find_node(&tr, "sys_a", 0)), "main");
	free(tr.v);
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* The same through a signal: spin returns after the handler and sigreturn. */
TEST(compressed_returns_across_signal)
{
	struct ht_synth_encode_opts o = default_encode;
	struct ht_synth_stream s;
	struct run r;

	REQUIRE_PROGRAMS();
	o.psb_period = 0;
	if (decode_scenario(&r, "pt_workload", "async_signal", &o, &s)) {
		CHECK(!"decode failed");
		return;
	}
	CHECK(s.kernel_compressed >= 1);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.errors, 0);
	CHECK_EQ_U64(r.matched, r.t->count);
	CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
	CHECK(timeline_valid(&r));
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* Timing. */

/*
 * A CPU at 3.2 GHz (core:bus ratio 32) with a 2.4 GHz TSC (nominal ratio
 * 24): 3/4 TSC tick a cycle, exact in libipt's fixed point. The crystal
 * clock ticks every 108 TSC ticks (cpuid 0x15: eax 2, ebx 216, a
 * Skylake's), an MTC every 8 of them (perf's mtc_period=3): 864 TSC ticks,
 * 1152 cycles, 384 instructions of 3 cycles. A kernel excursion takes
 * 20000 cycles, 13 MTC periods. One PSB and no other TSC: after it, time
 * comes from MTC and CYC alone.
 */
static const struct ht_synth_encode_opts timed_encode = {
	.tsc0 = 1000000,
	.end_disable = 1,
	.timing = HT_SYNTH_TIMING_MTC,
	.cyc_per_insn = 3,
	.cyc_per_kernel = 20000,
	.cbr = 32,
	.nom_freq = 24,
	.mtc_freq = 3,
	.art_eax = 2,
	.art_ebx = 216,
};

/* Decode SCENARIO with TIMING: the path exact, each block's time within its bound. */
static void check_timing(const char *scenario, enum ht_synth_timing timing, uint32_t psb_period)
{
	struct ht_synth_encode_opts o = timed_encode;
	struct ht_synth_stream s;
	struct run r;

	o.timing = timing;
	o.psb_period = psb_period;
	if (decode_scenario(&r, "pt_workload", scenario, &o, &s)) {
		CHECK(!"decode failed");
		return;
	}
	if (r.why[0])
		printf("     %s: %s\n", scenario, r.why);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.matched, r.t->count);
	CHECK_EQ_U64(r.errors, 0);
	CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
	CHECK_EQ_U64(s.mtc_period_tsc, 864);
	CHECK(s.nmtc >= 3);
	CHECK(timing != HT_SYNTH_TIMING_CYC || s.ncyc > s.nmtc);
	CHECK(timing == HT_SYNTH_TIMING_CYC || s.ncyc == 0);
	CHECK(r.timed > 50);
	CHECK_EQ_U64(r.time_bad, 0);
	CHECK_EQ_U64(r.tsc_backwards, 0);
	CHECK(timeline_valid(&r));
	if (getenv("HT_PT_SHOW"))
		printf("     %s: %zu instructions, %zu blocks timed; worst %lu ticks from the "
		       "packets' time, %lu from the block's first instruction; %zu MTC, %zu CYC\n",
		       scenario, r.t->count, r.timed, (unsigned long)r.worst_known,
		       (unsigned long)r.worst_first, s.nmtc, s.ncyc);
	run_free(&r);
	ht_synth_stream_free(&s);
}

TEST(timing_coarse_mixed)
{
	REQUIRE_PROGRAMS();
	check_timing("mixed", HT_SYNTH_TIMING_MTC, 0);
}

TEST(timing_fine_mixed)
{
	REQUIRE_PROGRAMS();
	check_timing("mixed", HT_SYNTH_TIMING_CYC, 0);
}

/* A signal: FUP + TIP.PGD, the MTCs of the kernel, the handler, sigreturn. */
TEST(timing_coarse_async_signal)
{
	REQUIRE_PROGRAMS();
	check_timing("async_signal", HT_SYNTH_TIMING_MTC, 0);
}

TEST(timing_fine_async_signal)
{
	REQUIRE_PROGRAMS();
	check_timing("async_signal", HT_SYNTH_TIMING_CYC, 0);
}

/* PSB+ every 2 KiB: TSC, TMA and CBR again, CYC counted from each. */
TEST(timing_fine_with_psbs)
{
	REQUIRE_PROGRAMS();
	check_timing("bench", HT_SYNTH_TIMING_CYC, 2048);
}

TEST(timing_coarse_with_psbs)
{
	REQUIRE_PROGRAMS();
	check_timing("bench", HT_SYNTH_TIMING_MTC, 2048);
}

/*
 * The kernel's time is the kernel's: the [syscall] slice lasts the 20000
 * cycles (15000 TSC ticks, ns here) the kernel ran, known from the MTCs
 * written meanwhile, within a TSC tick per CYC with fine timing and an MTC
 * period with coarse.
 */
static void check_syscall_time(enum ht_synth_timing timing, uint64_t margin)
{
	struct ht_synth_encode_opts o = timed_encode;
	struct ht_synth_stream s;
	struct tree tr;
	struct run r;
	long sc;

	o.timing = timing;
	if (decode_scenario(&r, "pt_workload", "syscall", &o, &s) || r.why[0]) {
		CHECK(!"decode failed");
		run_free(&r);
		ht_synth_stream_free(&s);
		return;
	}
	build_tree(r.tl, &tr);
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_SYSCALL), 1);
	sc = find_node(&tr, HT_PT_SLICE_SYSCALL, 0);
	CHECK(sc >= 0);
	if (sc >= 0) {
		uint64_t dur = tr.v[sc].end - tr.v[sc].ts;

		if (distance(dur, 15000) > margin)
			printf("     [syscall] lasts %lu ns, not 15000 +- %lu\n",
			       (unsigned long)dur, (unsigned long)margin);
		CHECK(distance(dur, 15000) <= margin);
	}
	free(tr.v);
	run_free(&r);
	ht_synth_stream_free(&s);
}

TEST(timing_fine_kernel_time)
{
	REQUIRE_PROGRAMS();
	check_syscall_time(HT_SYNTH_TIMING_CYC, 8);
}

TEST(timing_coarse_kernel_time)
{
	REQUIRE_PROGRAMS();
	check_syscall_time(HT_SYNTH_TIMING_MTC, 864);
}

static int count_items(void *ctx, const struct ht_pt_item *items, size_t n)
{
	size_t *count = ctx;

	(void)items;
	*count += n;
	return 0;
}

/* Count the packets of TYPE in BUF. */
static size_t count_packets(const uint8_t *buf, size_t len, enum pt_packet_type type)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;
	struct pt_packet p;
	size_t n = 0;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd || pt_pkt_sync_set(pd, 0) < 0)
		return 0;
	while (pt_pkt_next(pd, &p, sizeof(p)) >= 0)
		n += p.type == type;
	pt_pkt_free_decoder(pd);
	return n;
}

/* One PSB, no timing packets: long runs of branches go into TNT-64 packets. */
TEST(decode_exact_sparse_packets)
{
	struct ht_synth_encode_opts o = default_encode;
	struct ht_synth_stream s;
	struct run r;

	REQUIRE_PROGRAMS();
	o.psb_period = 0;
	o.tsc_every = 0;
	if (decode_scenario(&r, "pt_workload", "mixed", &o, &s)) {
		CHECK(!"decode failed");
	} else {
		CHECK(count_packets(s.buf, s.len, ppt_tnt_64) > 10);
		CHECK(!r.why[0]);
		CHECK_EQ_U64(r.matched, r.t->count);
		CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
		CHECK(timeline_valid(&r));
	}
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* The configuration from a saved CPU: libipt's errata for it are on, the path the same. */
TEST(decode_with_cpu_errata)
{
	const struct ht_synth_trace *t;
	struct ht_pt_decode_opts o = {0};
	struct ht_pt_decode_stats st;
	struct ht_pt_cpu_info cpu = {.mtc_freq = 3, .nom_freq = 24, .tsc = 1, .mtc = 1};
	struct ht_synth_stream s;
	size_t n = 0;

	REQUIRE_PROGRAMS();
	ht_pt_cpu_from_cpuid(&cpu, "GenuineIntel", 0x000506e3); /* Skylake: SKL014 ... */
	cpu.tsc_art_eax = 2;
	cpu.tsc_art_ebx = 216;
	t = record_encoded("pt_workload", "syscall", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	o.image = ht_pt_image_new(t->maps, t->nmaps);
	o.cpu = &cpu;
	CHECK(ht_pt_decode(s.buf, s.len, &o, count_items, &n, &st) == 0);
	CHECK_EQ_U64(st.insns, t->count);
	CHECK_EQ_U64(st.errors, 0);
	CHECK_EQ_U64(st.disables, 2); /* the syscall, and the end */
	CHECK_EQ_U64(st.enables, 1);
	ht_pt_image_free((struct ht_pt_image *)o.image);
	ht_synth_stream_free(&s);
}

/* The overwrite ring. */

/* Write S through a ring of SIZE bytes as the CPU would, then read it oldest first. */
static uint8_t *through_ring(const struct ht_synth_stream *s, size_t size)
{
	uint8_t *ring = calloc(1, size), *out = malloc(size);
	uint64_t head = 0;

	for (size_t i = 0; i < s->len; i++) {
		ring[head % size] = s->buf[i];
		head++;
	}
	ht_pt_ring_linearize(ring, size, head % size, out);
	free(ring);
	return out;
}

/* The first PSB wholly inside the last SIZE bytes of the stream. */
static const struct ht_synth_psb *first_psb_kept(const struct ht_synth_stream *s, size_t size)
{
	size_t lost = s->len > size ? s->len - size : 0;

	for (size_t i = 0; i < s->npsbs; i++)
		if (s->psbs[i].offset >= lost)
			return &s->psbs[i];
	return NULL;
}

TEST(ring_wrapped_several_times)
{
	const struct ht_synth_trace *t;
	const struct ht_synth_psb *psb;
	struct ht_synth_stream s, shifted;
	struct tree tr;
	struct run r;
	size_t size;
	uint8_t *buf;
	long i;

	REQUIRE_PROGRAMS();
	t = record_encoded("pt_workload", "mixed", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	size = s.len / 3 - 17; /* wraps three times, at an odd place */
	buf = through_ring(&s, size);
	psb = first_psb_kept(&s, size);
	CHECK(psb != NULL);
	/* Offsets in the linear copy are offsets in the stream minus what was overwritten. */
	shifted = s;
	shifted.psbs = malloc(s.npsbs * sizeof(*s.psbs));
	for (size_t j = 0; j < s.npsbs; j++) {
		shifted.psbs[j] = s.psbs[j];
		if (s.psbs[j].offset < s.len - size)
			shifted.psbs[j].offset = UINT64_MAX; /* overwritten */
		else
			shifted.psbs[j].offset -= s.len - size;
	}
	CHECK(decode(&r, t, &shifted, buf, size, NULL) == 0);
	if (r.why[0])
		printf("     %s\n", r.why);
	CHECK(!r.why[0]);
	CHECK(psb && r.first == psb->index);
	CHECK(psb && r.matched == t->count - psb->index);
	CHECK(compare_calls(t, r.first, t->count, &r.log) < 0);
	CHECK(timeline_valid(&r));
	/* The frames open at the first PSB began before it: the outermost are marked so. */
	build_tree(r.tl, &tr);
	i = find_node(&tr, "main", 0);
	CHECK(i >= 0 && tr.v[i].before);
	free(tr.v);
	run_free(&r);
	free(shifted.psbs);
	free(buf);
	ht_synth_stream_free(&s);
}

/* A ring that never filled: zeros (PAD) first, then the whole stream. */
TEST(ring_not_filled)
{
	const struct ht_synth_trace *t;
	struct ht_synth_stream s, shifted;
	struct run r;
	size_t size;
	uint8_t *buf;

	REQUIRE_PROGRAMS();
	t = record_encoded("pt_workload", "basic", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	size = s.len + 4096;
	buf = through_ring(&s, size);
	shifted = s;
	shifted.psbs = malloc(s.npsbs * sizeof(*s.psbs));
	for (size_t i = 0; i < s.npsbs; i++) {
		shifted.psbs[i] = s.psbs[i];
		shifted.psbs[i].offset += 4096;
	}
	CHECK(decode(&r, t, &shifted, buf, size, NULL) == 0);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.first, 0);
	CHECK_EQ_U64(r.matched, t->count);
	CHECK_EQ_U64(r.errors, 0);
	CHECK(timeline_valid(&r));
	run_free(&r);
	free(shifted.psbs);
	free(buf);
	ht_synth_stream_free(&s);
}

/* Lost trace. */

static long gap_with_reason(const struct tree *tr, const char *prefix)
{
	for (size_t i = 0; i < tr->n; i++)
		if (!strcmp(tr->v[i].name, HT_PT_SLICE_GAP) && tr->v[i].reason &&
		    !strncmp(tr->v[i].reason, prefix, strlen(prefix)))
			return (long)i;
	return -1;
}

TEST(overflow_is_a_gap)
{
	struct ht_synth_encode_opts o = default_encode;
	struct ht_synth_stream s;
	struct tree tr;
	struct run r;
	long g;

	REQUIRE_PROGRAMS();
	o.ovf_at = 300;
	o.ovf_len = 200;
	if (decode_scenario(&r, "pt_workload", "bench", &o, &s)) {
		CHECK(!"decode failed");
		return;
	}
	if (r.why[0])
		printf("     %s\n", r.why);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.overflows, 1);
	/*
	 * What ran after the last packet before the OVF is lost with it (the
	 * decoder cannot know how far the thread got); from the FUP after it,
	 * everything is back.
	 */
	CHECK(r.k_at_overflow <= o.ovf_at && r.k_at_overflow + 16 > o.ovf_at);
	CHECK_EQ_U64(r.matched, r.k_at_overflow + r.t->count - (o.ovf_at + o.ovf_len));
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_GAP), 1);
	CHECK(compare_call_spans(
		      r.t,
		      (struct span[]){{0, r.k_at_overflow - 1}, {o.ovf_at + o.ovf_len, r.t->count}},
		      2, &r.log) < 0);
	CHECK(timeline_valid(&r));
	build_tree(r.tl, &tr);
	g = gap_with_reason(&tr, "overflow");
	CHECK(g >= 0);
	CHECK(g >= 0 && tr.v[g].parent < 0); /* a gap closes every frame */
	free(tr.v);
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* Offset of the first TIP or TNT packet at or after FROM. */
static uint64_t packet_after(const uint8_t *buf, size_t len, uint64_t from)
{
	struct pt_packet_decoder *pd;
	struct pt_config cfg;
	struct pt_packet p;
	uint64_t off = 0, found = 0;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd || pt_pkt_sync_set(pd, 0) < 0)
		return 0;
	for (;;) {
		pt_pkt_get_offset(pd, &off);
		if (pt_pkt_next(pd, &p, sizeof(p)) < 0)
			break;
		if (off >= from &&
		    (p.type == ppt_tip || p.type == ppt_tnt_8 || p.type == ppt_tnt_64)) {
			found = off;
			break;
		}
	}
	pt_pkt_free_decoder(pd);
	return found;
}

TEST(corrupt_byte_resyncs_at_next_psb)
{
	const struct ht_synth_trace *t;
	struct ht_synth_stream s;
	struct tree tr;
	struct run r;
	uint64_t bad;

	REQUIRE_PROGRAMS();
	t = record_encoded("pt_workload", "bench", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK(s.npsbs >= 4);
	if (s.npsbs < 4)
		return;
	bad = packet_after(s.buf, s.len, s.psbs[1].offset + 20);
	CHECK(bad && bad < s.psbs[2].offset);
	/* A TIP with the reserved IP compression 0b111: no decoder accepts it. */
	s.buf[bad] = 0xed;
	CHECK(decode(&r, t, &s, s.buf, s.len, NULL) == 0);
	if (r.why[0])
		printf("     %s\n", r.why);
	CHECK(!r.why[0]);
	CHECK_EQ_U64(r.errors, 1);
	CHECK(r.syncs == 2);
	/* Exact up to the error, and from the next PSB to the end. */
	CHECK_EQ_U64(r.k, t->count);
	CHECK(r.matched >= s.psbs[1].index + (t->count - s.psbs[2].index));
	CHECK(timeline_valid(&r));
	build_tree(r.tl, &tr);
	CHECK(gap_with_reason(&tr, "decode error") >= 0);
	free(tr.v);
	run_free(&r);
	ht_synth_stream_free(&s);
}

TEST(missing_image_section)
{
	struct ht_synth_encode_opts o = default_encode;
	const struct ht_synth_trace *t;
	struct ht_pt_mapping maps[16];
	struct decode_opts d = {.maps = maps};
	struct ht_synth_stream s;
	struct tree tr;
	struct run r;

	REQUIRE_PROGRAMS();
	o.psb_period = 32; /* a PSB soon after the library returns */
	t = record_encoded("pt_workload", "plt", &o, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	for (size_t i = 0; i < t->nmaps && d.nmaps < 16; i++)
		if (!t->maps[i].path || !strstr(t->maps[i].path, "libptlib"))
			maps[d.nmaps++] = t->maps[i];
	CHECK(d.nmaps == t->nmaps - 1);
	CHECK(decode(&r, t, &s, s.buf, s.len, &d) == 0);
	if (r.why[0])
		printf("     %s\n", r.why);
	CHECK(!r.why[0]);
	CHECK(r.errors >= 1);
	CHECK(r.last_error == -pte_nomap);
	CHECK(r.matched > 0 && r.matched < t->count);
	CHECK(timeline_valid(&r));
	build_tree(r.tl, &tr);
	CHECK(gap_with_reason(&tr, "decode error") >= 0);
	CHECK(find_node(&tr, "lib_work", 0) < 0);
	free(tr.v);
	run_free(&r);
	ht_synth_stream_free(&s);
}

/* Stacks. */

/* SCENARIO decoded into R and its call tree into TR; on failure R is freed. */
static int decode_tree(struct run *r, struct tree *tr, const char *program, const char *scenario)
{
	struct ht_synth_stream s;
	int rc = decode_scenario(r, program, scenario, &default_encode, &s);

	ht_synth_stream_free(&s);
	if (rc || r->why[0] || !timeline_valid(r)) {
		printf("     %s: %s\n", scenario, r->why[0] ? r->why : "decode failed");
		run_free(r);
		return -1;
	}
	build_tree(r->tl, tr);
	return 0;
}

TEST(stack_recursion_and_tail_call)
{
	struct tree tr;
	struct run r;
	long i, tail, target;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "basic")) {
		CHECK(!"decode failed");
		return;
	}
	/* fact(5) recurses five deep, each inside the one before. */
	CHECK_EQ_U64(count_named(&tr, "fact"), 5);
	i = find_node(&tr, "fact", 4);
	CHECK_STR(parent_name(&tr, i), "fact");
	CHECK_STR(parent_name(&tr, find_node(&tr, "fact", 0)), "basic");
	CHECK(node_depth(&tr, i) == node_depth(&tr, find_node(&tr, "fact", 0)) + 4);
	/* tail_entry jumps to tail_target: its frame is replaced, both under basic. */
	tail = find_node(&tr, "tail_entry", 0);
	target = find_node(&tr, "tail_target", 0);
	CHECK(tail >= 0 && target >= 0);
	CHECK_STR(parent_name(&tr, tail), "basic");
	CHECK_STR(parent_name(&tr, target), "basic");
	CHECK(tail >= 0 && target >= 0 && tr.v[tail].end <= tr.v[target].ts);
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 4)), "tail_target");
	CHECK(has_change(&r.log, HT_CS_TAIL,
			 record("pt_workload", "basic")
				 ? ht_synth_symbol(record("pt_workload", "basic"), "tail_target")
				 : 1));
	/* Called through a pointer. */
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 5)), "through_pointer");
	/* The trace began inside ht_trace_start: main's frame was open before it. */
	i = find_node(&tr, "main", 0);
	CHECK(i >= 0 && tr.v[i].before && tr.v[i].parent < 0);
	free(tr.v);
	run_free(&r);
}

TEST(stack_longjmp)
{
	struct tree tr;
	struct run r;
	long lj3, after;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "longjmp")) {
		CHECK(!"decode failed");
		return;
	}
	lj3 = find_node(&tr, "lj3", 0);
	CHECK_STR(parent_name(&tr, lj3), "lj2");
	CHECK_STR(parent_name(&tr, find_node(&tr, "lj2", 0)), "lj1");
	CHECK_STR(parent_name(&tr, find_node(&tr, "lj1", 0)), "do_longjmp");
	/* After the longjmp, do_longjmp goes on: leaf is its child, not lj3's. */
	after = find_node(&tr, "leaf", 0);
	CHECK_STR(parent_name(&tr, after), "do_longjmp");
	CHECK(after >= 0 && lj3 >= 0 && tr.v[after].ts >= tr.v[lj3].end);
	CHECK(count_ops(&r.log, HT_CS_UNWIND) >= 1);
	CHECK_STR(parent_name(&tr, find_node(&tr, "do_longjmp", 0)), "main");
	free(tr.v);
	run_free(&r);
}

TEST(stack_plt_call_into_library)
{
	struct tree tr;
	struct run r;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "plt")) {
		CHECK(!"decode failed");
		return;
	}
	/* The PLT stub's jump renames its frame: lib_work sits right under do_plt. */
	CHECK_STR(parent_name(&tr, find_node(&tr, "lib_work", 0)), "do_plt");
	CHECK_EQ_U64(count_named(&tr, "lib_inner"), 3);
	CHECK_STR(parent_name(&tr, find_node(&tr, "lib_inner", 2)), "lib_work");
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 0)), "do_plt");
	for (size_t i = 0; i < tr.n; i++)
		CHECK(strstr(tr.v[i].name, "pt_workload+") == NULL);
	free(tr.v);
	run_free(&r);
}

TEST(stack_syscall_keeps_stack)
{
	struct tree tr;
	struct run r;
	long sc, leaf;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "syscall")) {
		CHECK(!"decode failed");
		return;
	}
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_SYSCALL), 1);
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_GAP), 0);
	sc = find_node(&tr, HT_PT_SLICE_SYSCALL, 0);
	/* [syscall] under libc's write, under sys_b, under sys_a. */
	CHECK(sc >= 0 && tr.v[sc].parent >= 0);
	if (sc >= 0 && tr.v[sc].parent >= 0)
		CHECK_STR(parent_name(&tr, tr.v[sc].parent), "sys_b");
	CHECK_STR(parent_name(&tr, find_node(&tr, "sys_b", 0)), "sys_a");
	/* The kernel's 5000 ticks are the excursion's, not the user code's. */
	CHECK(sc >= 0 && tr.v[sc].end - tr.v[sc].ts >= 5000);
	leaf = find_node(&tr, "leaf", 0);
	CHECK_STR(parent_name(&tr, leaf), "sys_b");
	CHECK(leaf >= 0 && sc >= 0 && tr.v[leaf].ts >= tr.v[sc].end);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_KERNEL), 1);
	free(tr.v);
	run_free(&r);
}

TEST(stack_snapshot_five_frames_deep)
{
	static const char *const chain[] = {"ht_trace_start", "d5", "d4", "d3", "d2", "d1", "main"};
	struct tree tr;
	struct run r;
	long leaf;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "deep")) {
		CHECK(!"decode failed");
		return;
	}
	/* Each frame whose call came before the trace returns into a back-dated caller. */
	for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]); i++) {
		long n = find_node(&tr, chain[i], 0);

		CHECK(n >= 0);
		if (n < 0)
			continue;
		CHECK(tr.v[n].before);
		CHECK(tr.v[n].ts == tr.v[0].ts);
		if (i + 1 < sizeof(chain) / sizeof(chain[0]))
			CHECK_STR(parent_name(&tr, n), chain[i + 1]);
	}
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 0)), "d5");
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 4)), "d1");
	leaf = find_node(&tr, "leaf", 0);
	CHECK(leaf >= 0 && !tr.v[leaf].before);
	free(tr.v);
	run_free(&r);
}

TEST(stack_signal_handler)
{
	struct tree tr;
	struct run r;
	long sig, handler, after;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "signal")) {
		CHECK(!"decode failed");
		return;
	}
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_SIGNAL), 1);
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_GAP), 0);
	sig = find_node(&tr, HT_PT_SLICE_SIGNAL, 0);
	handler = find_node(&tr, "on_signal", 0);
	CHECK_STR(parent_name(&tr, handler), HT_PT_SLICE_SIGNAL);
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 0)), "on_signal");
	/* The signal came at the end of kill(): it nests there, in do_signal. */
	CHECK(sig >= 0 && tr.v[sig].parent >= 0);
	if (sig >= 0 && tr.v[sig].parent >= 0)
		CHECK_STR(parent_name(&tr, tr.v[sig].parent), "do_signal");
	/* sigreturn went back: do_signal's next call is its own child again. */
	after = find_node(&tr, "leaf", 1);
	CHECK_STR(parent_name(&tr, after), "do_signal");
	CHECK(after >= 0 && sig >= 0 && tr.v[after].ts >= tr.v[sig].end);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_SIGNAL), 1);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_SIGRETURN), 1);
	free(tr.v);
	run_free(&r);
}

TEST(stack_async_signal)
{
	const struct ht_synth_trace *t;
	struct ht_pt_symbol where;
	struct tree tr;
	struct run r;
	size_t interrupted = 0;
	long sig;

	REQUIRE_PROGRAMS();
	if (decode_tree(&r, &tr, "pt_workload", "async_signal")) {
		CHECK(!"decode failed");
		return;
	}
	/*
	 * SIGALRM interrupts the spin loop (the program sends it once the loop
	 * runs): [kernel], then the handler nested in spin.
	 */
	t = r.t;
	for (size_t i = 0; i < t->count; i++) {
		if (!t->insns[i].interrupted)
			continue;
		interrupted++;
		CHECK(ht_pt_elf_resolve(r.resolver, t->insns[i].ip, &where) == 0);
		CHECK_STR(where.function, "spin");
	}
	CHECK_EQ_U64(interrupted, 1);
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_SIGNAL), 1);
	sig = find_node(&tr, HT_PT_SLICE_SIGNAL, 0);
	CHECK_STR(parent_name(&tr, sig), "spin");
	CHECK_STR(parent_name(&tr, find_node(&tr, "on_alarm", 0)), HT_PT_SLICE_SIGNAL);
	/* The signal's, and the end of the trace (FUP + TIP.PGD at ht_trace_stop). */
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_KERNEL), 2);
	CHECK_STR(parent_name(&tr, find_node(&tr, HT_PT_SLICE_KERNEL, 0)), "spin");
	CHECK_EQ_U64(count_named(&tr, HT_PT_SLICE_GAP), 0);
	CHECK_STR(parent_name(&tr, find_node(&tr, "leaf", 1)), "do_async_signal");
	free(tr.v);
	run_free(&r);
}

/* OCaml. */

static uint64_t trace_symbol(const char *program, const char *name)
{
	const struct ht_synth_trace *t = record(program, "-");

	return t ? ht_synth_symbol(t, name) : 0;
}

TEST(ocaml_note_of_test_binary)
{
	char path[PATH_MAX + 32];
	struct ht_ocaml_eh eh;
	uint64_t base = 0, entry, try_fn, bias;
	const struct ht_synth_trace *t;
	int fd;

	REQUIRE_PROGRAMS();
	snprintf(path, sizeof(path), "%s/ocaml_workload", ht_pt_programs_dir);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(ht_ocaml_eh_read_fd(fd, path, &eh, &base) == 0);
	close(fd);
	CHECK_EQ_U64(eh.nenter, 2);
	CHECK_EQ_U64(eh.npush, 2);
	CHECK_EQ_U64(eh.npop, 2);
	t = record("ocaml_workload", "-");
	CHECK(t != NULL);
	if (!t) {
		ht_ocaml_eh_free(&eh);
		return;
	}
	bias = t->exe_bias;
	ht_ocaml_eh_relocate(&eh, base + bias);
	entry = trace_symbol("ocaml_workload", "caml_entry");
	try_fn = trace_symbol("ocaml_workload", "caml_try");
	/* Relocated, the handlers lie in caml_try (first) and caml_entry (second). */
	CHECK(eh.nenter == 2 && eh.enter[0] > try_fn && eh.enter[0] < entry);
	CHECK(eh.nenter == 2 && eh.enter[1] > entry && eh.enter[1] < entry + 100);
	ht_ocaml_eh_free(&eh);
}

/* The OCaml workload decoded into R (with its exception note when USE_NOTE) and its call tree
 * into TR; on failure R is freed. */
static int ocaml_tree(struct run *r, struct tree *tr, int use_note)
{
	struct decode_opts d = {.no_ocaml = !use_note};
	struct ht_synth_stream s;
	const struct ht_synth_trace *t = record_encoded("ocaml_workload", "-", &default_encode, &s);
	int rc;

	memset(r, 0, sizeof(*r));
	if (!t)
		return -1;
	rc = decode(r, t, &s, s.buf, s.len, &d);
	ht_synth_stream_free(&s);
	if (rc || r->why[0] || !timeline_valid(r)) {
		run_free(r);
		return -1;
	}
	build_tree(r->tl, tr);
	return 0;
}

TEST(ocaml_raise_unwinds_to_handler)
{
	struct tree tr;
	struct run r;
	long after, raise, outer, inner;

	REQUIRE_PROGRAMS();
	if (ocaml_tree(&r, &tr, 1)) {
		CHECK(!"decode failed");
		return;
	}
	CHECK(compare_calls(r.t, 0, r.t->count, &r.log) < 0);
	CHECK_EQ_U64(count_named(&tr, "caml_entry"), 2);
	outer = find_node(&tr, "caml_entry", 0);
	inner = find_node(&tr, "caml_entry", 1);
	CHECK_STR(parent_name(&tr, inner), "caml_entry");
	CHECK_STR(parent_name(&tr, find_node(&tr, "caml_raise", 0)), "caml_g");
	CHECK_STR(parent_name(&tr, find_node(&tr, "caml_leaf", 0)), "caml_try");
	/* The raise leaves caml_raise, caml_g, caml_f and the inner caml_entry... */
	raise = find_node(&tr, "caml_raise", 0);
	CHECK(raise >= 0 && inner >= 0 && tr.v[inner].end == tr.v[raise].end);
	/* ... and the handler runs in the outer caml_entry, which pushed the trap. */
	after = find_node(&tr, "caml_after_raise", 0);
	CHECK(after >= 0 && outer >= 0 && tr.v[after].parent == outer);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_TRAP), 1);
	free(tr.v);
	run_free(&r);
}

/* Without the note the handler would be put in the innermost frame that holds it: wrong. */
TEST(ocaml_without_note_picks_inner_frame)
{
	struct tree tr;
	struct run r;
	long after, inner;

	REQUIRE_PROGRAMS();
	if (ocaml_tree(&r, &tr, 0)) {
		CHECK(!"decode failed");
		return;
	}
	after = find_node(&tr, "caml_after_raise", 0);
	inner = find_node(&tr, "caml_entry", 1);
	CHECK(after >= 0 && inner >= 0 && tr.v[after].parent == inner);
	CHECK_EQ_U64(count_ops(&r.log, HT_CS_TRAP), 0);
	free(tr.v);
	run_free(&r);
}

/* Pieces. */

TEST(ocaml_note_parser)
{
	/* namesz 6, descsz 8 + 3*8 + 2*8 + 1*8, type 1, "OCaml\0" + pad, desc */
	uint8_t note[12 + 8 + 64];
	uint64_t desc[] = {0x1000, 0x1010, 0, 0x1020, 0x1030, 0, 0x1040, 0};
	struct ht_ocaml_eh eh;
	uint32_t hdr[3] = {6, sizeof(desc), 1};

	memcpy(note, hdr, 12);
	memcpy(note + 12, "OCaml\0\0\0", 8);
	memcpy(note + 20, desc, sizeof(desc));
	CHECK(ht_ocaml_eh_parse(note, sizeof(note), 4, &eh) == 0);
	CHECK_EQ_U64(eh.nenter, 1);
	CHECK_EQ_U64(eh.npush, 2);
	CHECK_EQ_U64(eh.npop, 1);
	ht_ocaml_eh_relocate(&eh, 0x555500002000ull);
	CHECK_EQ_U64(eh.enter[0], 0x555500002010ull);
	CHECK_EQ_U64(eh.push[1], 0x555500002030ull);
	CHECK_EQ_U64(eh.pop[0], 0x555500002040ull);
	ht_ocaml_eh_free(&eh);
	/* Cut anywhere: an error or no note, never a read past the end (ASan watches). */
	for (size_t len = 0; len < sizeof(note); len++) {
		uint8_t *copy = malloc(len ? len : 1);

		memcpy(copy, note, len);
		CHECK(ht_ocaml_eh_parse(copy, len, 4, &eh) != 0);
		free(copy);
	}
	/* A list without its 0. */
	desc[7] = 5;
	memcpy(note + 20, desc, sizeof(desc));
	CHECK(ht_ocaml_eh_parse(note, sizeof(note), 4, &eh) == -1);
	/* Another owner, another type: no note. */
	memcpy(note + 12, "OCamL\0\0\0", 8);
	CHECK(ht_ocaml_eh_parse(note, sizeof(note), 4, &eh) == 1);
	memcpy(note + 12, "OCaml\0\0\0", 8);
	hdr[2] = 2;
	memcpy(note, hdr, 12);
	CHECK(ht_ocaml_eh_parse(note, sizeof(note), 4, &eh) == 1);
	/* A huge descsz. */
	hdr[1] = 0xffffffff;
	hdr[2] = 1;
	memcpy(note, hdr, 12);
	CHECK(ht_ocaml_eh_parse(note, sizeof(note), 4, &eh) == -1);
	/* Not an ELF file. */
	CHECK(ht_ocaml_eh_read_mem("garbage", 7, &eh, &desc[0]) == -1);
}

TEST(call_length)
{
	static const struct {
		uint8_t bytes[16];
		unsigned n, len;
		enum ht_pt_branch kind;
	} cases[] = {
		{{0xe8, 1, 2, 3, 4}, 5, 5, HT_PT_BR_CALL},	       /* call rel32 */
		{{0xff, 0xd0}, 2, 2, HT_PT_BR_CALL},		       /* call *%rax */
		{{0x41, 0xff, 0xd3}, 3, 3, HT_PT_BR_CALL},	       /* call *%r11 */
		{{0xff, 0x15, 1, 2, 3, 4}, 6, 6, HT_PT_BR_CALL},       /* call *x(%rip) */
		{{0xff, 0x54, 0x24, 8}, 4, 4, HT_PT_BR_CALL},	       /* call *8(%rsp) */
		{{0xff, 0x14, 0x25, 1, 2, 3, 4}, 7, 7, HT_PT_BR_CALL}, /* call *abs32 */
		{{0x3e, 0xff, 0xd0}, 3, 3, HT_PT_BR_CALL},	       /* notrack call */
		{{0x0f, 0x05}, 2, 2, HT_PT_BR_FAR_CALL},	       /* syscall */
		{{0xcd, 0x80}, 2, 2, HT_PT_BR_FAR_CALL},	       /* int $0x80 */
		{{0xff, 0xe0}, 2, 0, HT_PT_BR_NONE},		       /* jmp *%rax */
		{{0xe8, 1, 2}, 3, 0, HT_PT_BR_NONE},		       /* cut short */
		{{0x90}, 1, 0, HT_PT_BR_NONE},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ht_pt_branch kind = HT_PT_BR_NONE;
		unsigned len = ht_x86_call_length(cases[i].bytes, cases[i].n, &kind);

		CHECK_EQ_U64(len, cases[i].len);
		if (cases[i].len)
			CHECK_EQ_U64(kind, cases[i].kind);
	}
}

TEST(cpu_from_cpuid)
{
	struct ht_pt_cpu_info c;

	memset(&c, 0, sizeof(c));
	/* Skylake client: family 6, model 0x5e (extended model 5), stepping 3. */
	ht_pt_cpu_from_cpuid(&c, "GenuineIntel", 0x000506e3);
	CHECK_EQ_U64(c.vendor_intel, 1);
	CHECK_EQ_U64(c.family, 6);
	CHECK_EQ_U64(c.model, 0x5e);
	CHECK_EQ_U64(c.stepping, 3);
	/* Family 15 adds the extended family; AMD is no vendor libipt knows. */
	ht_pt_cpu_from_cpuid(&c, "AuthenticAMD", 0x00a10f11);
	CHECK_EQ_U64(c.vendor_intel, 0);
	CHECK_EQ_U64(c.family, 0x19);
	CHECK_EQ_U64(c.model, 0x11);
	CHECK(ht_pt_cpu_info_local(&c) == 0);
	CHECK(c.family != 0);
}

TEST(clock_mapping)
{
	struct ht_pt_clock_pair pairs[] = {
		{3000, 2000}, {1000, 1000}, {5000, 2500}, {4000, 1900}, /* last: backwards */
	};
	struct ht_pt_clock c;

	CHECK(ht_pt_clock_init(&c, pairs, 4, 0) == 0);
	CHECK_EQ_U64(c.count, 3);
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 1000), 1000);
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 2000), 1500); /* on the first segment */
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 4000), 2250); /* on the second */
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 7000), 3000); /* extrapolated from the last */
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 0), 500);     /* ... and the first */
	ht_pt_clock_free(&c);
	/* One pair: the slope comes from the TSC frequency (2 GHz). */
	CHECK(ht_pt_clock_init(&c, pairs, 1, 2000000000) == 0);
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 5000), 3000);
	ht_pt_clock_free(&c);
	CHECK(ht_pt_clock_init(&c, NULL, 0, 0) == 0);
	CHECK_EQ_U64(ht_pt_tsc_to_ns(&c, 5000), 0);
	ht_pt_clock_free(&c);
}

TEST(ring_linearize)
{
	const uint8_t ring[] = {5, 6, 7, 1, 2, 3, 4};
	uint8_t out[7];

	ht_pt_ring_linearize(ring, sizeof(ring), 3, out);
	for (int i = 0; i < 7; i++)
		CHECK_EQ_U64(out[i], (unsigned)i + 1);
	ht_pt_ring_linearize(ring, sizeof(ring), 3 + 7 * 5, out); /* a head that counts wraps */
	CHECK_EQ_U64(out[0], 1);
}

TEST(decode_garbage_and_empty)
{
	struct ht_pt_mapping none = {.start = 0x1000, .end = 0x2000, .path = "/nonexistent/x"};
	struct ht_pt_image *img = ht_pt_image_new(&none, 1);
	struct ht_pt_decode_opts o = {.image = img};
	struct ht_pt_decode_stats st;
	uint8_t junk[4096];
	const char *why = NULL;
	size_t n = 0;

	CHECK(img != NULL);
	if (!img)
		return;
	CHECK_EQ_U64(ht_pt_image_skipped(img, &why), 1);
	CHECK(why && strstr(why, "/nonexistent/x"));
	CHECK(ht_pt_decode(NULL, 0, &o, count_items, &n, &st) == 0);
	CHECK_EQ_U64(n, 0);
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	/* Random bytes hold no PSB: nothing to decode, no crash. */
	CHECK(ht_pt_decode(junk, sizeof(junk), &o, count_items, &n, &st) == 0);
	CHECK_EQ_U64(st.syncs, 0);
	CHECK(ht_pt_decode(junk, sizeof(junk), NULL, count_items, &n, &st) == -1);
	ht_pt_image_free(img);
}

/* A PSB whose header is garbage: an error, and decoding goes on at the next PSB. */
TEST(decode_bad_psb_header)
{
	const struct ht_synth_trace *t;
	struct ht_pt_decode_opts o = {0};
	struct ht_pt_decode_stats st;
	struct ht_synth_stream s;
	uint8_t *buf;
	size_t n = 0, len;

	REQUIRE_PROGRAMS();
	t = record_encoded("pt_workload", "basic", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	/* PSB, then an unknown extended opcode where PSB+ should go on; then the stream. */
	len = 16 + 2 + s.len;
	buf = malloc(len);
	memcpy(buf, s.buf, 16);
	buf[16] = 0x02;
	buf[17] = 0x02;
	memcpy(buf + 18, s.buf, s.len);
	o.image = ht_pt_image_new(t->maps, t->nmaps);
	CHECK(ht_pt_decode(buf, len, &o, count_items, &n, &st) == 0);
	CHECK(st.errors >= 1);
	CHECK_EQ_U64(st.insns, t->count);
	ht_pt_image_free((struct ht_pt_image *)o.image);
	free(buf);
	ht_synth_stream_free(&s);
}

/* A sink that stops the decoder: its value comes back. */
static int stop_at_first_block(void *ctx, const struct ht_pt_item *items, size_t n)
{
	size_t *calls = ctx;

	(*calls)++;
	for (size_t i = 0; i < n; i++)
		if (items[i].kind == HT_PT_ITEM_BLOCK)
			return 42;
	return 0;
}

TEST(decode_sink_stops)
{
	const struct ht_synth_trace *t;
	struct ht_synth_stream s;
	struct ht_pt_image *img;
	struct ht_pt_decode_opts o = {0};
	struct ht_pt_decode_stats st;
	size_t calls = 0;

	REQUIRE_PROGRAMS();
	t = record_encoded("pt_workload", "mixed", &default_encode, &s);
	CHECK(t != NULL);
	if (!t)
		return;
	img = ht_pt_image_new(t->maps, t->nmaps);
	o.image = img;
	CHECK(ht_pt_decode(s.buf, s.len, &o, stop_at_first_block, &calls, &st) == 42);
	CHECK_EQ_U64(calls, 1);
	CHECK(st.blocks >= 1 && st.insns < t->count);
	ht_pt_image_free(img);
	ht_synth_stream_free(&s);
}

/* The live path's resolver: the project's symbolizer on this very process. */
TEST(resolver_over_symbolizer)
{
	struct ht_symbolizer *sym = ht_symbolizer_new(getpid());
	struct ht_pt_symbol out;
	uint64_t here = (uint64_t)(uintptr_t)&test_resolver_over_symbolizer;

	CHECK(sym != NULL);
	if (!sym)
		return;
	CHECK(ht_pt_resolve_symbolizer(sym, here, &out) == 0);
	CHECK_STR(out.function, "test_resolver_over_symbolizer");
	CHECK_EQ_U64(out.start, here);
	CHECK(ht_pt_resolve_symbolizer(sym, 8, &out) == -1);
	ht_symbolizer_free(sym);
}
