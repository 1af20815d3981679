// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Decode speed, without PT hardware: one iteration of a data-independent
 * loop (pt_workload's "bench" scenario) is single-stepped, its packets are
 * repeated into a stream of SIZE MiB (PSB+ every 4 KiB, as perf's default
 * psb_period does), and that stream is decoded three ways:
 *   libipt     the block decoder alone (ptxed's loop, nothing done per block)
 *   decode     ht_pt_decode() with a sink that only counts
 *   stacks     ht_pt_decode() into ht_callstack: slices in a timeline
 * Each prints MB/s of PT and millions of instructions per second, best of
 * five runs in thread CPU time.
 *
 * Build and run from the repository root (after `make`):
 *   cc -D_GNU_SOURCE -O2 -g -Iinclude -Iuserspace -Itests/pt -o build/bench_decode \
 *      tests/pt/bench_decode.c build/libhybtrace.a -lipt -lbpf -ldw -lelf -lz -lpthread
 *   build/bench_decode [SIZE_MIB] [tests/pt]
 */
#include <intel-pt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "callstack.h"
#include "intelpt_decode.h"
#include "log.h"
#include "pt_resolver.h"
#include "timeline.h"
#include "pt_synth.c"

#define PSB_EVERY 4096
#define RUNS	  5

static double now(void)
{
	struct timespec ts;

	/* CPU time: other work on the machine then costs this less. */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int build(const char *where, char *dir, size_t len)
{
	char cmd[4 * PATH_MAX + 512], src[PATH_MAX];

	if (!realpath(where, src))
		return -1;
	/* A directory that holds a built pt_workload already (a machine without cc). */
	snprintf(cmd, sizeof(cmd), "%s/pt_workload", src);
	if (access(cmd, X_OK) == 0) {
		snprintf(dir, len, "%s", src);
		return 1;
	}
	snprintf(dir, len, "/tmp/ht-bench-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && cc -O1 -g -fno-inline -fno-optimize-sibling-calls -shared -fPIC "
		 "-o libptlib.so '%s/pt_lib.c' && cc -O1 -g -fno-inline "
		 "-fno-optimize-sibling-calls -Wl,-z,now -o pt_workload '%s/pt_workload.c' -L. "
		 "-lptlib -Wl,-rpath,'%s'",
		 dir, src, src, dir);
	return system(cmd) ? -1 : 0;
}

/* Indices of the first two loop iterations after the first: [*first, *last). */
static int find_iteration(const struct ht_synth_trace *t, size_t *first, size_t *last)
{
	uint64_t mark = ht_synth_symbol(t, "bench_iteration");
	size_t seen = 0;

	for (size_t i = 0; i < t->count && mark; i++) {
		if (t->insns[i].ip != mark)
			continue;
		if (seen == 1)
			*first = i;
		if (seen == 2) {
			*last = i;
			return 0;
		}
		seen++;
	}
	return -1;
}

struct stream {
	uint8_t *buf;
	size_t len, cap;
	uint64_t insns;
};

static int put(struct stream *s, const void *p, size_t n)
{
	if (s->len + n > s->cap)
		return -1;
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return 0;
}

/* PSB+ at the loop head, then the iteration's packets again and again. */
static int make_stream(const struct ht_synth_trace *t, size_t first, size_t last, size_t size,
		       struct stream *out)
{
	struct ht_synth_encode_opts o = {.tsc0 = 1, .tsc_per_insn = 1, .no_header = 1};
	struct ht_synth_stream chunk;
	uint8_t psb[64];
	size_t since_psb = PSB_EVERY;
	uint64_t tsc = 1000;
	int n;

	if (ht_synth_encode(t, first, last, &o, &chunk))
		return -1;
	out->cap = size + chunk.len + 2 * sizeof(psb);
	out->buf = malloc(out->cap);
	if (!out->buf)
		return -1;
	while (out->len < size) {
		if (since_psb >= PSB_EVERY) {
			n = ht_synth_psb_plus(psb, sizeof(psb), t->insns[first].ip, tsc);
			if (n < 0 || put(out, psb, (size_t)n))
				return -1;
			since_psb = 0;
		}
		if (put(out, chunk.buf, chunk.len))
			return -1;
		since_psb += chunk.len;
		out->insns += last - first;
		tsc += (last - first) * 3;
	}
	printf("iteration: %zu instructions, %zu bytes of PT; stream %.1f MiB, %.1f M "
	       "instructions\n",
	       last - first, chunk.len, out->len / 1048576.0, out->insns / 1e6);
	ht_synth_stream_free(&chunk);
	return 0;
}

/* libipt alone, ptxed's loop. */
static uint64_t raw_libipt(const struct stream *s, struct ht_pt_image *img, int our_flags)
{
	struct pt_block_decoder *dec;
	struct pt_config cfg;
	struct pt_block block;
	struct pt_event ev;
	uint64_t insns = 0;
	int status;

	pt_config_init(&cfg);
	cfg.begin = s->buf;
	cfg.end = s->buf + s->len;
	cfg.flags.variant.block.end_on_call = our_flags;
	cfg.flags.variant.block.end_on_jump = our_flags;
	dec = pt_blk_alloc_decoder(&cfg);
	pt_blk_set_image(dec, ht_pt_image_libipt(img));
	for (;;) {
		status = pt_blk_sync_forward(dec);
		if (status < 0)
			break;
		for (;;) {
			while (status & pts_event_pending) {
				status = pt_blk_event(dec, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			status = pt_blk_next(dec, &block, sizeof(block));
			insns += block.ninsn;
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	pt_blk_free_decoder(dec);
	return insns;
}

static int count_sink(void *ctx, const struct ht_pt_item *items, size_t n)
{
	uint64_t *insns = ctx;

	for (size_t i = 0; i < n; i++)
		*insns += items[i].ninsn;
	return 0;
}

static uint64_t decode_only(const struct stream *s, struct ht_pt_image *img)
{
	struct ht_pt_decode_opts o = {.image = img};
	uint64_t insns = 0;

	if (ht_pt_decode(s->buf, s->len, &o, count_sink, &insns, NULL))
		fprintf(stderr, "decode: %s\n", ht_last_error());
	return insns;
}

static uint64_t slices;

static uint64_t to_stacks(const struct stream *s, struct ht_pt_image *img,
			  struct ht_pt_elf_resolver *res)
{
	struct tl_track_desc td = {.kind = TL_TRACK_THREAD, .name = "bench", .pid = 1, .tid = 1};
	struct ht_pt_clock_pair pairs[] = {{0, 0}, {1000000000, 1000000000}};
	struct ht_pt_decode_opts o = {.image = img};
	struct ht_callstack_config cc = {0};
	struct ht_callstack_stats st;
	struct ht_pt_decode_stats ds;
	struct ht_pt_clock clock;
	struct ht_callstack *cs;
	struct timeline *tl = tl_new();

	ht_pt_clock_init(&clock, pairs, 2, 0);
	o.clock = &clock;
	cc.tl = tl;
	cc.track = tl_add_track(tl, &td);
	cc.resolve = ht_pt_elf_resolve;
	cc.resolve_ctx = res;
	cs = ht_callstack_new(&cc);
	if (!cs || ht_pt_decode(s->buf, s->len, &o, ht_callstack_items, cs, &ds) ||
	    ht_callstack_finish(cs, 0))
		fprintf(stderr, "stacks: %s\n", ht_last_error());
	ht_callstack_get_stats(cs, &st);
	slices = st.slices;
	if (getenv("HT_BENCH_STATS"))
		printf("calls %lu returns %lu tail %lu unwinds %lu gaps %lu kernel %lu\n",
		       (unsigned long)st.calls, (unsigned long)st.returns,
		       (unsigned long)st.tail_calls, (unsigned long)st.unwinds,
		       (unsigned long)st.gaps, (unsigned long)st.kernel);
	ht_callstack_free(cs);
	tl_free(tl);
	ht_pt_clock_free(&clock);
	return ds.insns;
}

static void report(const char *what, const struct stream *s, double secs, uint64_t insns)
{
	printf("%-8s %8.1f MB/s of PT %8.1f M instructions/s  (%.3f s, %.1f M instructions)\n",
	       what, s->len / 1e6 / secs, insns / 1e6 / secs, secs, insns / 1e6);
}

int main(int argc, char **argv)
{
	size_t size = (argc > 1 ? strtoul(argv[1], NULL, 10) : 16) << 20;
	const char *src = argc > 2 ? argv[2] : "tests/pt";
	char dir[PATH_MAX], exe[PATH_MAX + 32], *av[3];
	int built;
	struct ht_synth_record_opts ro = {
		.start = "do_bench", .stop = "ht_trace_stop", .max_steps = 50000};
	struct ht_synth_trace t;
	struct ht_pt_elf_resolver *res;
	struct ht_pt_image *img;
	struct stream s = {0};
	size_t first = 0, last = 0;
	double best[4] = {1e9, 1e9, 1e9, 1e9};
	uint64_t insns[4] = {0};

	built = build(src, dir, sizeof(dir));
	if (built < 0) {
		fprintf(stderr, "cannot build the workload from %s\n", src);
		return 1;
	}
	snprintf(exe, sizeof(exe), "%s/pt_workload", dir);
	av[0] = exe;
	av[1] = "bench";
	av[2] = NULL;
	ro.exe = exe;
	ro.argv = av;
	if (ht_synth_record(&ro, &t) || find_iteration(&t, &first, &last) ||
	    make_stream(&t, first, last, size, &s)) {
		fprintf(stderr, "cannot make the stream: %s\n", ht_last_error());
		return 1;
	}
	img = ht_pt_image_new(t.maps, t.nmaps);
	res = ht_pt_elf_resolver_new(t.maps, t.nmaps);
	for (int run = 0; run < RUNS; run++) {
		for (int way = 0; way < 4; way++) {
			double t0 = now(), dt;

			if (getenv("HT_BENCH_ONLY") && atoi(getenv("HT_BENCH_ONLY")) != way)
				continue;
			if (way == 0)
				insns[way] = raw_libipt(&s, img, 0);
			else if (way == 1)
				insns[way] = raw_libipt(&s, img, 1);
			else if (way == 2)
				insns[way] = decode_only(&s, img);
			else
				insns[way] = to_stacks(&s, img, res);
			dt = now() - t0;
			if (dt < best[way])
				best[way] = dt;
		}
	}
	report("libipt", &s, best[0], insns[0]);
	report("libipt*", &s, best[1], insns[1]);
	report("decode", &s, best[2], insns[2]);
	report("stacks", &s, best[3], insns[3]);
	printf("(libipt*: the block decoder ending blocks at calls and jumps, as ht_pt_decode "
	       "asks)\n");
	printf("stacks: %.1f M slices; whole path at %.0f%% of libipt alone\n", slices / 1e6,
	       100.0 * best[0] / best[3]);
	/* The stream ends without a PGD: libipt runs on to the next branch, a few more. */
	if (insns[3] < s.insns || insns[0] < s.insns)
		printf("warning: decoded %lu instructions of %lu\n", (unsigned long)insns[3],
		       (unsigned long)s.insns);
	ht_pt_elf_resolver_free(res);
	ht_pt_image_free(img);
	ht_synth_trace_free(&t);
	free(s.buf);
	if (built)
		return 0;
	snprintf(exe, sizeof(exe), "rm -rf '%s'", dir);
	return system(exe) ? 1 : 0;
}
