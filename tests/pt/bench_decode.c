// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Decode speed, without PT hardware: one iteration of a data-independent
 * loop (pt_workload's "bench" scenario) is single-stepped, its packets are
 * repeated into a stream of SIZE bytes (PSB+ every 4 KiB, as perf's default
 * psb_period does), and that stream is decoded four ways:
 *   libipt        the block decoder alone (ptxed's loop, nothing done per block)
 *   libipt-calls  the same, ending blocks at calls and jumps as ht_pt_decode asks
 *   decode        ht_pt_decode() with a sink that only counts
 *   path          the whole path: ht_pt_decode() into ht_callstack, slices in a
 *                 timeline, the timeline written as a Perfetto file
 * Each prints MB/s of PT and millions of instructions per second, the median
 * of RUNS runs in thread CPU time (the stages take turns, so a noisy moment
 * hurts all of them alike), then one JSON line with the figures.
 *
 * `make build/bench/bench_decode`, then from the repository root:
 *   build/bench/bench_decode [--smoke] [--size SIZE] [--runs N] [--only STAGE]
 *                            [--workload DIR]
 * DIR holds pt_workload.c and pt_lib.c (built with cc into a temporary
 * directory), or a pt_workload already built; default tests/pt.
 */
#include <errno.h>
#include <intel-pt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sources/intelpt/callstack.h"
#include "sources/intelpt/intelpt_decode.h"
#include "base/log.h"
#include "cli/options.h"
#include "trace/perfetto_write.h"
#include "sources/intelpt/pt_resolver.h"
#include "trace/timeline.h"
#include "pt_synth.h"

#define PSB_EVERY 4096
#define MAX_RUNS  100

/* The floor: at least 10 MB of PT; --smoke trades it for a few seconds. */
#define DEFAULT_SIZE_BYTES (16ULL << 20)
#define SMOKE_SIZE_BYTES   (1ULL << 20)
#define MIN_SIZE_BYTES	   (64ULL << 10)
#define MAX_SIZE_BYTES	   (1ULL << 30)
#define DEFAULT_RUNS	   5
#define SMOKE_RUNS	   3

enum stage { ST_LIBIPT, ST_LIBIPT_CALLS, ST_DECODE, ST_PATH, NSTAGES };

static const char *const stage_names[NSTAGES] = {"libipt", "libipt-calls", "decode", "path"};

struct bench_opts {
	uint64_t size_bytes;
	unsigned runs;
	int only; /* a stage, or -1: all */
	const char *workload;
};

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
static int raw_libipt(const struct stream *s, struct ht_pt_image *img, int end_on_branches,
		      uint64_t *insns)
{
	struct pt_block_decoder *dec;
	struct pt_config cfg;
	struct pt_block block;
	struct pt_event ev;
	int status;

	pt_config_init(&cfg);
	cfg.begin = s->buf;
	cfg.end = s->buf + s->len;
	cfg.flags.variant.block.end_on_call = end_on_branches;
	cfg.flags.variant.block.end_on_jump = end_on_branches;
	dec = pt_blk_alloc_decoder(&cfg);
	if (!dec)
		return -1;
	pt_blk_set_image(dec, ht_pt_image_libipt(img));
	*insns = 0;
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
			*insns += block.ninsn;
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	pt_blk_free_decoder(dec);
	if (status != -pte_eos) {
		fprintf(stderr, "libipt: %s\n", pt_errstr(pt_errcode(status)));
		return -1;
	}
	return 0;
}

static int count_sink(void *ctx, const struct ht_pt_item *items, size_t n)
{
	uint64_t *insns = ctx;

	for (size_t i = 0; i < n; i++)
		*insns += items[i].ninsn;
	return 0;
}

static int decode_only(const struct stream *s, struct ht_pt_image *img, uint64_t *insns)
{
	struct ht_pt_decode_opts o = {.image = img};

	*insns = 0;
	if (ht_pt_decode(s->buf, s->len, &o, count_sink, insns, NULL)) {
		fprintf(stderr, "decode: %s\n", ht_last_error());
		return -1;
	}
	return 0;
}

struct path_result {
	uint64_t insns;
	uint64_t slices;
	uint64_t file_bytes;
	double timeline_s; /* decode, call stacks, slices in the timeline */
	double write_s;	   /* the timeline to the Perfetto file */
	struct ht_callstack_stats stacks;
};

/* The whole path, through to the written file. FD: an empty file to write. */
static int whole_path(const struct stream *s, struct ht_pt_image *img,
		      struct ht_pt_elf_resolver *res, int fd, struct path_result *out)
{
	struct tl_track_desc td = {.kind = TL_TRACK_THREAD, .name = "bench", .pid = 1, .tid = 1};
	struct ht_pt_clock_pair pairs[] = {{0, 0}, {1000000000, 1000000000}};
	struct ht_pt_decode_opts o = {.image = img};
	struct ht_callstack_config cc = {0};
	struct ht_callstack *cs = NULL;
	struct ht_pt_decode_stats ds;
	struct ht_pt_clock clock;
	struct timeline *tl = NULL;
	char err[256];
	double t0, t1;
	off_t end;
	int ret = -1;

	if (ht_pt_clock_init(&clock, pairs, 2, 0)) {
		fprintf(stderr, "path: %s\n", ht_last_error());
		return -1;
	}
	t0 = now();
	tl = tl_new();
	if (!tl) {
		fprintf(stderr, "path: out of memory\n");
		goto cleanup;
	}
	o.clock = &clock;
	cc.tl = tl;
	cc.track = tl_add_track(tl, &td);
	cc.resolve = ht_pt_elf_resolve;
	cc.resolve_ctx = res;
	cs = ht_callstack_new(&cc);
	if (!cs || ht_pt_decode(s->buf, s->len, &o, ht_callstack_items, cs, &ds) ||
	    ht_callstack_finish(cs, 0)) {
		fprintf(stderr, "path: %s\n", ht_last_error());
		goto cleanup;
	}
	t1 = now();
	if (pftw_write_fd(tl, fd, err, sizeof(err))) {
		fprintf(stderr, "path: %s\n", err);
		goto cleanup;
	}
	out->write_s = now() - t1;
	out->timeline_s = t1 - t0;
	end = lseek(fd, 0, SEEK_CUR);
	out->file_bytes = end > 0 ? (uint64_t)end : 0;
	out->insns = ds.insns;
	ht_callstack_get_stats(cs, &out->stacks);
	out->slices = out->stacks.slices;
	ret = 0;
cleanup:
	ht_callstack_free(cs);
	tl_free(tl);
	ht_pt_clock_free(&clock);
	return ret;
}

/* An unlinked temporary file: the page cache, not the disk, is what a write costs here. */
static int open_scratch(void)
{
	const char *tmpdir = getenv("TMPDIR");
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/ht-bench-decode-XXXXXX", tmpdir ? tmpdir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "cannot create a file in %s: %s (set TMPDIR)\n",
			tmpdir ? tmpdir : "/tmp", strerror(errno));
		return -1;
	}
	unlink(path);
	return fd;
}

static int rewind_scratch(int fd)
{
	if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET) < 0) {
		fprintf(stderr, "cannot empty the scratch file: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *values, unsigned n)
{
	double sorted[MAX_RUNS];

	memcpy(sorted, values, n * sizeof(*values));
	qsort(sorted, n, sizeof(*sorted), cmp_double);
	return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void report(const char *what, const struct stream *s, double secs, uint64_t insns)
{
	printf("%-13s %8.1f MB/s of PT %8.1f M instructions/s  (%.3f s)\n", what,
	       s->len / 1e6 / secs, insns / 1e6 / secs, secs);
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--smoke] [--size SIZE] [--runs N] [--only STAGE] [--workload DIR]\n"
		"  --smoke         a 1M stream, 3 runs: a few seconds\n"
		"  --size SIZE     PT stream to decode (default 16M; 64k to 1G)\n"
		"  --runs N        runs of each stage, the median reported (default 5; 1 to %d)\n"
		"  --only STAGE    libipt, libipt-calls, decode or path (for profiling)\n"
		"  --workload DIR  pt_workload.c and pt_lib.c, or a built pt_workload "
		"(default tests/pt)\n",
		prog, MAX_RUNS);
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	int smoke = 0, size_set = 0, runs_set = 0;

	*o = (struct bench_opts){.size_bytes = DEFAULT_SIZE_BYTES,
				 .runs = DEFAULT_RUNS,
				 .only = -1,
				 .workload = "tests/pt"};
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(arg, "--smoke")) {
			smoke = 1;
			continue;
		}
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			usage(stdout, argv[0]);
			exit(0);
		}
		if (strcmp(arg, "--size") && strcmp(arg, "--runs") && strcmp(arg, "--only") &&
		    strcmp(arg, "--workload")) {
			fprintf(stderr, "unknown argument '%s'\n", arg);
			usage(stderr, argv[0]);
			return -1;
		}
		if (!val) {
			fprintf(stderr, "%s needs a value\n", arg);
			return -1;
		}
		i++;
		if (!strcmp(arg, "--size")) {
			if (ht_parse_size(val, &o->size_bytes)) {
				fprintf(stderr, "--size: %s\n", ht_last_error());
				return -1;
			}
			if (o->size_bytes < MIN_SIZE_BYTES || o->size_bytes > MAX_SIZE_BYTES) {
				fprintf(stderr, "--size %s is out of range: give 64k to 1G\n", val);
				return -1;
			}
			size_set = 1;
		} else if (!strcmp(arg, "--runs")) {
			char *end;
			long runs;

			errno = 0;
			runs = strtol(val, &end, 10);
			if (errno || end == val || *end || runs < 1 || runs > MAX_RUNS) {
				fprintf(stderr, "--runs '%s': give a whole number from 1 to %d\n",
					val, MAX_RUNS);
				return -1;
			}
			o->runs = (unsigned)runs;
			runs_set = 1;
		} else if (!strcmp(arg, "--only")) {
			for (int st = 0; st < NSTAGES; st++)
				if (!strcmp(val, stage_names[st]))
					o->only = st;
			if (o->only < 0) {
				fprintf(stderr,
					"--only '%s': give libipt, libipt-calls, decode or path\n",
					val);
				return -1;
			}
		} else {
			o->workload = val;
		}
	}
	if (smoke && !size_set)
		o->size_bytes = SMOKE_SIZE_BYTES;
	if (smoke && !runs_set)
		o->runs = SMOKE_RUNS;
	return 0;
}

/* Every run's seconds too, for an interval on the ratio (tests/bench/bench.py). */
static void print_runs(const char *key, const double *secs, unsigned n)
{
	printf(",\"%s_runs\":[", key);
	for (unsigned i = 0; i < n; i++)
		printf("%s%.4f", i ? "," : "", secs[i]);
	printf("]");
}

static void print_json(const struct stream *s, const struct bench_opts *o,
		       const double med[NSTAGES], double secs[NSTAGES][MAX_RUNS],
		       const uint64_t insns[NSTAGES], const struct path_result *path,
		       double timeline_s, double write_s)
{
	printf("{\"stream_bytes\":%zu,\"stream_mb\":%.3f,\"stream_minsn\":%.3f,\"runs\":%u", s->len,
	       s->len / 1e6, s->insns / 1e6, o->runs);
	for (int st = 0; st < NSTAGES; st++) {
		char key[32];

		if (!med[st])
			continue;
		snprintf(key, sizeof(key), "%s", stage_names[st]);
		for (char *c = key; *c; c++)
			if (*c == '-')
				*c = '_';
		printf(",\"%s_s\":%.4f,\"%s_mb_s\":%.2f,\"%s_minsn_s\":%.2f", key, med[st], key,
		       s->len / 1e6 / med[st], key, insns[st] / 1e6 / med[st]);
		print_runs(key, secs[st], o->runs);
	}
	if (med[ST_PATH])
		printf(",\"path_timeline_s\":%.4f,\"path_write_s\":%.4f,\"slices\":%lu,"
		       "\"file_bytes\":%lu",
		       timeline_s, write_s, (unsigned long)path->slices,
		       (unsigned long)path->file_bytes);
	if (med[ST_PATH] && med[ST_LIBIPT])
		printf(",\"ratio\":%.4f", med[ST_LIBIPT] / med[ST_PATH]);
	printf("}\n");
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX], exe[PATH_MAX + 32], *av[3];
	struct ht_synth_record_opts ro = {
		.start = "do_bench", .stop = "ht_trace_stop", .max_steps = 50000};
	struct ht_synth_trace t = {0};
	struct ht_pt_elf_resolver *res = NULL;
	struct ht_pt_image *img = NULL;
	struct stream s = {0};
	struct bench_opts o;
	struct path_result path = {0};
	static double secs[NSTAGES][MAX_RUNS], timeline_s[MAX_RUNS], write_s[MAX_RUNS];
	double med[NSTAGES] = {0};
	uint64_t insns[NSTAGES] = {0};
	size_t first = 0, last = 0;
	int built = -1, fd = -1, ret = 1;

	if (parse_args(argc, argv, &o))
		return 2;
	built = build(o.workload, dir, sizeof(dir));
	if (built < 0) {
		fprintf(stderr, "cannot build the workload from %s: give --workload DIR\n",
			o.workload);
		return 1;
	}
	snprintf(exe, sizeof(exe), "%s/pt_workload", dir);
	av[0] = exe;
	av[1] = "bench";
	av[2] = NULL;
	ro.exe = exe;
	ro.argv = av;
	if (ht_synth_record(&ro, &t) || find_iteration(&t, &first, &last) ||
	    make_stream(&t, first, last, o.size_bytes, &s)) {
		fprintf(stderr, "cannot make the stream: %s\n", ht_last_error());
		goto cleanup;
	}
	img = ht_pt_image_new(t.maps, t.nmaps);
	res = ht_pt_elf_resolver_new(t.maps, t.nmaps);
	if (!img || !res) {
		fprintf(stderr, "cannot load the workload's code: %s\n", ht_last_error());
		goto cleanup;
	}
	fd = open_scratch();
	if (fd < 0)
		goto cleanup;
	/* Untimed: the first pass pays for faulting in the stream and filling libipt's caches. */
	if (raw_libipt(&s, img, 0, &insns[ST_LIBIPT]))
		goto cleanup;
	for (unsigned run = 0; run < o.runs; run++) {
		for (int st = 0; st < NSTAGES; st++) {
			double t0 = now();

			if (o.only >= 0 && o.only != st)
				continue;
			if (st == ST_PATH) {
				/* Timed inside: freeing the timeline is not part of writing it. */
				if (rewind_scratch(fd) || whole_path(&s, img, res, fd, &path))
					goto cleanup;
				secs[st][run] = path.timeline_s + path.write_s;
				timeline_s[run] = path.timeline_s;
				write_s[run] = path.write_s;
				insns[st] = path.insns;
				continue;
			}
			if (st == ST_DECODE
				    ? decode_only(&s, img, &insns[st])
				    : raw_libipt(&s, img, st == ST_LIBIPT_CALLS, &insns[st]))
				goto cleanup;
			secs[st][run] = now() - t0;
		}
	}
	printf("median of %u runs, thread CPU time\n", o.runs);
	for (int st = 0; st < NSTAGES; st++) {
		if (o.only >= 0 && o.only != st)
			continue;
		med[st] = median(secs[st], o.runs);
		report(stage_names[st], &s, med[st], insns[st]);
	}
	if (med[ST_PATH]) {
		printf("  path: %.3f s decode to timeline, %.3f s to the file (medians); ",
		       median(timeline_s, o.runs), median(write_s, o.runs));
		printf("%.1f M slices, %.1f MB written\n", path.slices / 1e6,
		       path.file_bytes / 1e6);
		printf("  stacks: calls %lu returns %lu tail calls %lu unwinds %lu gaps %lu\n",
		       (unsigned long)path.stacks.calls, (unsigned long)path.stacks.returns,
		       (unsigned long)path.stacks.tail_calls, (unsigned long)path.stacks.unwinds,
		       (unsigned long)path.stacks.gaps);
	}
	if (med[ST_PATH] && med[ST_LIBIPT])
		printf("whole path at %.0f%% of libipt alone (target: at least 50%%)\n",
		       100.0 * med[ST_LIBIPT] / med[ST_PATH]);
	/* The stream ends without a PGD: libipt runs on to the next branch, a few more. */
	for (int st = 0; st < NSTAGES; st++)
		if (med[st] && insns[st] < s.insns)
			printf("warning: %s decoded %lu instructions of %lu\n", stage_names[st],
			       (unsigned long)insns[st], (unsigned long)s.insns);
	print_json(&s, &o, med, secs, insns, &path, med[ST_PATH] ? median(timeline_s, o.runs) : 0,
		   med[ST_PATH] ? median(write_s, o.runs) : 0);
	ret = 0;
cleanup:
	if (fd >= 0)
		close(fd);
	ht_pt_elf_resolver_free(res);
	ht_pt_image_free(img);
	ht_synth_trace_free(&t);
	free(s.buf);
	if (built == 0) {
		snprintf(exe, sizeof(exe), "rm -rf '%s'", dir);
		if (system(exe))
			ret = 1;
	}
	return ret;
}
