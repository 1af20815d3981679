// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Intel PT half of a dump (pt_dump.h): raw captures built by hand from
 * synthesized PT (tests/pt/pt_synth.c: a single-stepped real execution,
 * its packets written with libipt's encoder) and perf sideband records
 * written here, so the routing of each stretch of trace to the thread the
 * context switches say ran it can be checked against the recording.
 *
 * The recorded path of pt_workload "basic" is cut in two at instruction K:
 * part 1 is [0, K), ending with FUP + TIP.PGD where the thread left the
 * CPU; part 2 is [K, N), starting with TSC, MODE.exec and TIP.PGE where a
 * thread comes on (after a PSB+ without FUP when it is a stream of its
 * own, as a CPU entering user mode writes it). Either part can be given to
 * any thread on any CPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sources/intelpt/callstack.h"
#include "check.h"
#include "cli/decode.h"
#include "trace/dump_schema.h"
#include "trace/pb.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_decode.h"
#include "base/log.h"
#include "sources/intelpt/pt_dump.h"
#include "sources/intelpt/pt_resolver.h"
#include "sources/intelpt/rawcap.h"
#include "trace/timeline.h"
#include "pt_programs.h"
#include "pt_synth.h"

static int build_programs(void)
{
	return ht_pt_programs_build("/tmp/ht-ptdump-XXXXXX", 0);
}

/* The recording of pt_workload basic, made once. */

static struct ht_synth_trace basic_trace;
static int basic_state; /* 0: not tried, 1: recorded, -1: failed */

static void free_recording(void)
{
	ht_synth_trace_free(&basic_trace);
}

static const struct ht_synth_trace *basic(void)
{
	char exe[PATH_MAX + 32];
	char *argv[3];
	struct ht_synth_record_opts o = {
		.start = "ht_trace_start",
		.stop = "ht_trace_stop",
		.max_steps = 50000,
	};

	if (basic_state)
		return basic_state > 0 ? &basic_trace : NULL;
	basic_state = -1;
	if (build_programs())
		return NULL;
	snprintf(exe, sizeof(exe), "%s/pt_workload", ht_pt_programs_dir);
	argv[0] = exe;
	argv[1] = "basic";
	argv[2] = NULL;
	o.exe = exe;
	o.argv = argv;
	if (ht_synth_record(&o, &basic_trace)) {
		printf("     recording pt_workload basic: %s\n", ht_last_error());
		return NULL;
	}
	atexit(free_recording);
	if (basic_trace.exited || basic_trace.count < 100) {
		printf("     recording pt_workload basic did not reach ht_trace_stop\n");
		return NULL;
	}
	basic_state = 1;
	return &basic_trace;
}

#define REQUIRE_TRACE(t)                                                                           \
	do {                                                                                       \
		(t) = basic();                                                                     \
		if (!(t)) {                                                                        \
			CHECK(!"cannot build or record the test program");                         \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* Time: TSC at 2 GHz, CLOCK_MONOTONIC 7 s at TSC 0, so ns and ticks never coincide. */

#define MONO0_NS   7000000000ull
#define TSC_PART1  1000000ull /* the first instruction's TSC */
#define TSC_SWITCH 40000ull   /* ticks from the end of part 1 to the start of part 2 */

static const struct ht_clock_pair test_clocks[] = {
	{.tsc = 0, .mono_ns = MONO0_NS, .when = HT_CLOCK_AT_ATTACH},
	{.tsc = 2000000000ull, .mono_ns = MONO0_NS + 1000000000ull, .when = HT_CLOCK_AT_FREEZE},
};

static uint64_t mono_of(uint64_t tsc)
{
	return MONO0_NS + tsc / 2;
}

/* The process the dump is about, its threads, and another process. */
#define TGID	    4242
#define TID_A	    4242
#define TID_B	    4243
#define FOREIGN_PID 999
#define FOREIGN_TID 1001

/* Encoding parts of the recording. */

struct part {
	uint8_t *buf;
	size_t len;
	uint64_t tsc_first, tsc_last; /* of its first and last instructions */
};

static void part_free(struct part *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

/*
 * The head of a stretch of trace that starts where a thread comes on the
 * CPU: (PSB+ without FUP: tracing is on but the CPU is in the kernel,)
 * TSC, MODE.exec, TIP.PGE at IP. Returns the bytes written, or -1.
 */
static int enable_head(uint8_t *buf, size_t cap, int with_psb, uint64_t psb_tsc, uint64_t tsc,
		       uint64_t ip)
{
	struct pt_packet psb = {.type = ppt_psb}, psbend = {.type = ppt_psbend};
	struct pt_packet mode = ht_synth_mode_exec_packet(), t_psb = ht_synth_tsc_packet(psb_tsc);
	struct pt_packet t = ht_synth_tsc_packet(tsc), pge = ht_synth_ip_packet(ppt_tip_pge, ip);
	struct pt_encoder *enc;
	uint64_t off = 0;
	int rc = 0;

	enc = ht_synth_encoder_new(buf, cap);
	if (!enc)
		return -1;
	if (with_psb)
		rc = ht_synth_put_packet(enc, &psb) || ht_synth_put_packet(enc, &t_psb) ||
		     ht_synth_put_packet(enc, &mode) || ht_synth_put_packet(enc, &psbend);
	if (!rc)
		rc = ht_synth_put_packet(enc, &t) || ht_synth_put_packet(enc, &mode) ||
		     ht_synth_put_packet(enc, &pge);
	pt_enc_get_offset(enc, &off);
	pt_free_encoder(enc);
	return rc ? -1 : (int)off;
}

/*
 * Instructions [FIRST, LAST) of T, the first at TSC0. FIRST 0 starts with
 * the recording's PSB+; any other starts with enable_head() (WITH_PSB: a
 * stream of its own). Every part ends with FUP + TIP.PGD at the next
 * instruction: the thread was interrupted there (or stopped, at the end).
 */
static int encode_part(const struct ht_synth_trace *t, size_t first, size_t last, uint64_t tsc0,
		       int with_psb, struct part *out)
{
	struct ht_synth_encode_opts o = {
		.psb_period = 256,
		.tsc0 = tsc0,
		.tsc_per_insn = 3,
		.tsc_per_kernel = 5000,
		.tsc_every = 4,
		.end_disable = 1,
		.no_header = first > 0,
	};
	struct ht_synth_trace sub = *t;
	struct ht_synth_stream s;
	uint8_t head[128];
	int hlen = 0;

	memset(out, 0, sizeof(*out));
	/* A trace that ends at LAST: its end_ip is where the disable's FUP points. */
	sub.count = last;
	sub.end_ip = last < t->count ? t->insns[last].ip : t->end_ip;
	if (first > 0) {
		hlen = enable_head(head, sizeof(head), with_psb, tsc0 - 50, tsc0,
				   t->insns[first].ip);
		if (hlen < 0)
			return ht_fail("cannot write the enable head");
	}
	if (ht_synth_encode(&sub, first, last, &o, &s))
		return -1;
	out->buf = malloc((size_t)hlen + s.len);
	if (!out->buf) {
		ht_synth_stream_free(&s);
		return ht_fail("out of memory");
	}
	memcpy(out->buf, head, (size_t)hlen);
	memcpy(out->buf + hlen, s.buf, s.len);
	out->len = (size_t)hlen + s.len;
	out->tsc_first = s.tsc[first];
	out->tsc_last = s.tsc[last - 1];
	ht_synth_stream_free(&s);
	return 0;
}

/* Where to cut: past the middle, between two instructions that are not branches. */
static size_t split_point(const struct ht_synth_trace *t)
{
	for (size_t k = t->count / 2; k + 1 < t->count; k++)
		if (t->insns[k - 1].iclass == ptic_other && t->insns[k].iclass == ptic_other)
			return k;
	return 0;
}

/* The whole path in one part, and the path cut at K. */
struct parts {
	size_t k;
	struct part whole, p1, p2, p2_psb; /* p2_psb: part 2 as a stream of its own */
	uint64_t tsc2;			   /* part 2's first TSC */
};

static void parts_free(struct parts *p)
{
	part_free(&p->whole);
	part_free(&p->p1);
	part_free(&p->p2);
	part_free(&p->p2_psb);
}

static int make_parts(const struct ht_synth_trace *t, struct parts *p)
{
	memset(p, 0, sizeof(*p));
	p->k = split_point(t);
	if (!p->k) {
		printf("     no place to cut the recording\n");
		return -1;
	}
	if (encode_part(t, 0, t->count, TSC_PART1, 0, &p->whole) ||
	    encode_part(t, 0, p->k, TSC_PART1, 0, &p->p1)) {
		printf("     encode: %s\n", ht_last_error());
		return -1;
	}
	p->tsc2 = p->p1.tsc_last + TSC_SWITCH;
	if (encode_part(t, p->k, t->count, p->tsc2, 0, &p->p2) ||
	    encode_part(t, p->k, t->count, p->tsc2, 1, &p->p2_psb)) {
		printf("     encode: %s\n", ht_last_error());
		return -1;
	}
	return 0;
}

/* The CLOCK_MONOTONIC time halfway between the parts: where the switches go. */
static uint64_t switch_ns(const struct parts *p)
{
	return mono_of(p->p1.tsc_last + TSC_SWITCH / 2);
}

/* Sideband records. */

struct sideband {
	uint8_t *buf;
	size_t len, cap;
	uint64_t sample_type;
	uint32_t cpu;
};

static void sb_bytes(struct sideband *sb, const void *p, size_t n)
{
	if (sb->len + n > sb->cap) {
		sb->cap = (sb->len + n) * 2 + 256;
		sb->buf = realloc(sb->buf, sb->cap);
	}
	memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
}

static void sb_u32(struct sideband *sb, uint32_t v)
{
	sb_bytes(sb, &v, sizeof(v));
}

static void sb_u64(struct sideband *sb, uint64_t v)
{
	sb_bytes(sb, &v, sizeof(v));
}

/* sample_id, in the order the perf ABI lays it out for SB's sample_type. */
static size_t sample_id_size(uint64_t t)
{
	return 8 * (!!(t & PERF_SAMPLE_TID) + !!(t & PERF_SAMPLE_TIME) + !!(t & PERF_SAMPLE_ID) +
		    !!(t & PERF_SAMPLE_STREAM_ID) + !!(t & PERF_SAMPLE_CPU) +
		    !!(t & PERF_SAMPLE_IDENTIFIER));
}

static void sb_sample_id(struct sideband *sb, uint32_t pid, uint32_t tid, uint64_t time_ns)
{
	uint64_t t = sb->sample_type;

	if (t & PERF_SAMPLE_TID) {
		sb_u32(sb, pid);
		sb_u32(sb, tid);
	}
	if (t & PERF_SAMPLE_TIME)
		sb_u64(sb, time_ns);
	if (t & PERF_SAMPLE_ID)
		sb_u64(sb, 77);
	if (t & PERF_SAMPLE_STREAM_ID)
		sb_u64(sb, 78);
	if (t & PERF_SAMPLE_CPU) {
		sb_u32(sb, sb->cpu);
		sb_u32(sb, 0);
	}
	if (t & PERF_SAMPLE_IDENTIFIER)
		sb_u64(sb, 79);
}

/* PERF_RECORD_SWITCH: the sample_id's pid/tid is the thread that came in or went out. */
static void sb_switch(struct sideband *sb, int in, uint32_t pid, uint32_t tid, uint64_t time_ns)
{
	struct perf_event_header h = {
		.type = PERF_RECORD_SWITCH,
		.misc = in ? 0 : PERF_RECORD_MISC_SWITCH_OUT,
		.size = (uint16_t)(sizeof(h) + sample_id_size(sb->sample_type)),
	};

	sb_bytes(sb, &h, sizeof(h));
	sb_sample_id(sb, pid, tid, time_ns);
}

/* PERF_RECORD_SWITCH_CPU_WIDE: the same, with the other thread of the switch in the body. */
static void sb_switch_cpu_wide(struct sideband *sb, int in, uint32_t pid, uint32_t tid,
			       uint64_t time_ns, uint32_t other_pid, uint32_t other_tid)
{
	struct perf_event_header h = {
		.type = PERF_RECORD_SWITCH_CPU_WIDE,
		.misc = in ? 0 : PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
		.size = (uint16_t)(sizeof(h) + 8 + sample_id_size(sb->sample_type)),
	};

	sb_bytes(sb, &h, sizeof(h));
	sb_u32(sb, other_pid);
	sb_u32(sb, other_tid);
	sb_sample_id(sb, pid, tid, time_ns);
}

/* PERF_RECORD_COMM: a record the routing must step over. */
static void sb_comm(struct sideband *sb, uint32_t pid, uint32_t tid, uint64_t time_ns)
{
	struct perf_event_header h = {
		.type = PERF_RECORD_COMM,
		.misc = 0,
		.size = (uint16_t)(sizeof(h) + 8 + 16 + sample_id_size(sb->sample_type)),
	};
	char comm[16] = "pt_workload";

	sb_bytes(sb, &h, sizeof(h));
	sb_u32(sb, pid);
	sb_u32(sb, tid);
	sb_bytes(sb, comm, sizeof(comm));
	sb_sample_id(sb, pid, tid, time_ns);
}

/* Raw captures. */

static void cap_init(struct ht_rawcap *cap, const struct ht_synth_trace *t)
{
	struct ht_rawcap_maps *m;

	memset(cap, 0, sizeof(*cap));
	cap->pid = TGID;
	snprintf(cap->cpuid.vendor, sizeof(cap->cpuid.vendor), "GenuineIntel");
	cap->cpuid.max_leaf = 0x14;
	cap->cpuid.leaf1[0] = 0x000506e3; /* Skylake: libipt's errata for it apply */
	cap->pt.fields.pt = 1;
	cap->pt.fields.branch = 1;
	cap->pt.fields.tsc = 1;
	cap->pt.sideband_sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE;
	cap->clocks = malloc(sizeof(test_clocks));
	memcpy(cap->clocks, test_clocks, sizeof(test_clocks));
	cap->nclocks = sizeof(test_clocks) / sizeof(test_clocks[0]);
	/* One reading of the maps: the recording's executable mappings. */
	cap->maps = calloc(1, sizeof(*cap->maps));
	cap->nmaps = 1;
	m = &cap->maps[0];
	m->taken_ns = MONO0_NS;
	m->v = calloc(t->nmaps + 1, sizeof(*m->v));
	for (size_t i = 0; i < t->nmaps; i++) {
		const struct ht_pt_mapping *pm = &t->maps[i];
		struct ht_rawcap_mapping *rm = &m->v[m->count++];

		rm->start = pm->start;
		rm->end = pm->end;
		rm->offset = pm->file_offset;
		snprintf(rm->perms, sizeof(rm->perms), "r-xp");
		if (pm->path) {
			rm->path = strdup(pm->path);
		} else {
			rm->path = strdup("[vdso]");
			cap->vdso_addr = pm->start;
			cap->vdso_len = pm->data_len;
			cap->vdso = malloc(pm->data_len ? pm->data_len : 1);
			memcpy(cap->vdso, pm->data, pm->data_len);
		}
	}
}

static void cap_stream(struct ht_rawcap *cap, uint32_t cpu, int32_t tid, const void *data,
		       size_t len)
{
	struct ht_rawcap_stream *s;

	cap->streams = realloc(cap->streams, (cap->nstreams + 1) * sizeof(*cap->streams));
	s = &cap->streams[cap->nstreams++];
	memset(s, 0, sizeof(*s));
	s->cpu = cpu;
	s->tid = tid;
	s->ring_bytes = len;
	s->data = malloc(len ? len : 1);
	memcpy(s->data, data, len);
	s->len = len;
}

static void cap_part(struct ht_rawcap *cap, uint32_t cpu, int32_t tid, const struct part *p)
{
	cap_stream(cap, cpu, tid, p->buf, p->len);
}

/* Two parts one after the other in one stream: one CPU, the thread changed in between. */
static void cap_parts(struct ht_rawcap *cap, uint32_t cpu, int32_t tid, const struct part *a,
		      const struct part *b)
{
	uint8_t *buf = malloc(a->len + b->len);

	memcpy(buf, a->buf, a->len);
	memcpy(buf + a->len, b->buf, b->len);
	cap_stream(cap, cpu, tid, buf, a->len + b->len);
	free(buf);
}

/* Hands SB's bytes to CAP. */
static void cap_sideband(struct ht_rawcap *cap, struct sideband *sb)
{
	struct ht_rawcap_sideband *s;

	cap->sidebands = realloc(cap->sidebands, (cap->nsidebands + 1) * sizeof(*cap->sidebands));
	s = &cap->sidebands[cap->nsidebands++];
	memset(s, 0, sizeof(*s));
	s->cpu = sb->cpu;
	s->data = sb->buf ? sb->buf : malloc(1);
	s->len = sb->len;
	memset(sb, 0, sizeof(*sb));
}

static struct sideband new_sideband(uint32_t cpu)
{
	return (struct sideband){.cpu = cpu, .sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE};
}

/* The dump. */

struct dump {
	struct timeline *tl;
	struct ht_pt_dump_stats st;
	int rc;
};

static void run_dump(struct dump *d, const struct ht_rawcap *cap, uint64_t t0)
{
	struct ht_pt_dump_input in = {.cap = cap, .tgid = TGID, .t0 = t0};
	char why[512];

	memset(d, 0, sizeof(*d));
	d->tl = tl_new();
	d->rc = d->tl ? ht_pt_dump_build(d->tl, &in, &d->st) : -1;
	if (d->rc)
		printf("     ht_pt_dump_build: %s\n", ht_last_error());
	if (d->tl && tl_validate(d->tl, why, sizeof(why))) {
		printf("     tl_validate: %s\n", why);
		d->rc = -2;
	}
	if (getenv("HT_PT_SHOW"))
		printf("     threads %lu runs %lu foreign %lu before %lu slices %lu gaps %lu "
		       "insns %lu errors %lu\n",
		       (unsigned long)d->st.threads, (unsigned long)d->st.runs,
		       (unsigned long)d->st.foreign_runs, (unsigned long)d->st.items_before,
		       (unsigned long)d->st.slices, (unsigned long)d->st.gaps,
		       (unsigned long)d->st.insns, (unsigned long)d->st.errors);
}

static void dump_free(struct dump *d)
{
	tl_free(d->tl);
	memset(d, 0, sizeof(*d));
}

/* A track's slices, in start order (longer first, so a parent precedes its children). */

struct slice {
	const char *name;
	uint64_t ts, dur;
	int before;
	int depth;
};

struct slices {
	struct slice *v;
	size_t n;
};

static int by_start(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int64_t arg_int(const struct timeline *tl, const struct tl_event *e, const char *name)
{
	for (uint32_t i = tl_event_lists(tl, e)->args.first; i; i = tl_arg(tl, i)->next) {
		const struct tl_arg *a = tl_arg(tl, i);

		if (!strcmp(tl_str_get(tl, a->name), name))
			return a->i;
	}
	return 0;
}

/* The index of TID's thread track, or -1. */
static long thread_track(const struct timeline *tl, int32_t tid)
{
	for (size_t i = 0; i < tl_track_count(tl); i++) {
		const struct tl_track *t = tl_track(tl, i);

		if (t->kind == TL_TRACK_THREAD && t->tid == tid)
			return (long)i;
	}
	return -1;
}

static size_t thread_track_count(const struct timeline *tl)
{
	size_t n = 0;

	for (size_t i = 0; i < tl_track_count(tl); i++)
		n += tl_track(tl, i)->kind == TL_TRACK_THREAD;
	return n;
}

/* The slices on TRACK (none for -1), with their nesting depth. */
static struct slices track_slices(const struct timeline *tl, long track)
{
	struct slices out = {0};
	size_t n = tl_event_count(tl);

	out.v = calloc(n + 1, sizeof(*out.v));
	for (size_t i = 0; track >= 0 && i < n; i++) {
		const struct tl_event *e = tl_event(tl, i);

		if ((long)e->track != track || e->kind != TL_EVENT_SLICE)
			continue;
		out.v[out.n++] = (struct slice){
			.name = tl_str_get(tl, e->name),
			.ts = e->ts_ns,
			.dur = e->dur_ns,
			.before = arg_int(tl, e, HT_ARG_BEFORE_WINDOW) != 0,
		};
	}
	qsort(out.v, out.n, sizeof(*out.v), by_start);
	for (size_t i = 0; i < out.n; i++) {
		int depth = 0;

		for (size_t j = 0; j < i; j++)
			if (out.v[j].ts <= out.v[i].ts &&
			    out.v[j].ts + out.v[j].dur >= out.v[i].ts + out.v[i].dur)
				depth++;
		out.v[i].depth = depth;
	}
	if (getenv("HT_PT_SHOW"))
		for (size_t i = 0; i < out.n; i++)
			printf("     %*s%s [%lu +%lu]%s\n", out.v[i].depth * 2, "", out.v[i].name,
			       (unsigned long)out.v[i].ts, (unsigned long)out.v[i].dur,
			       out.v[i].before ? " before" : "");
	return out;
}

static struct slices thread_slices(const struct timeline *tl, int32_t tid)
{
	return track_slices(tl, thread_track(tl, tid));
}

/* Slices named NAME that began in the trace (not back-dated). */
static size_t count_entered(const struct slices *s, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += !strcmp(s->v[i].name, name) && !s->v[i].before;
	return n;
}

static size_t count_named(const struct slices *s, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += !strcmp(s->v[i].name, name);
	return n;
}

/* Recorded calls to function NAME among instructions [FIRST, LAST). */
static size_t recorded_calls(const struct ht_synth_trace *t, size_t first, size_t last,
			     const char *name)
{
	uint64_t addr = ht_synth_symbol(t, name);
	size_t n = 0;

	for (size_t i = first; i < last && addr; i++) {
		const struct ht_synth_insn *in = &t->insns[i];

		n += in->iclass == ptic_call && ht_synth_flow_target(t, i) == addr;
	}
	return n;
}

/* Functions of the basic path that are entered by calls (tail_target is jumped to). */
static const char *const called[] = {"leaf", "fact", "tail_entry", "through_pointer"};
#define NCALLED (sizeof(called) / sizeof(called[0]))

/* Each function of CALLED entered on S as often as the recording calls it in [FIRST, LAST). */
static int calls_match(const struct ht_synth_trace *t, size_t first, size_t last,
		       const struct slices *s)
{
	int ok = 1;

	for (size_t i = 0; i < NCALLED; i++) {
		size_t want = recorded_calls(t, first, last, called[i]);
		size_t got = count_entered(s, called[i]);

		if (want != got) {
			printf("     %s: %zu slices, %zu calls recorded in [%zu, %zu)\n", called[i],
			       got, want, first, last);
			ok = 0;
		}
	}
	return ok;
}

/* The recording split in two parts (make_parts), or the test stops. */
#define REQUIRE_PARTS(t, p)                                                                        \
	do {                                                                                       \
		REQUIRE_TRACE(t);                                                                  \
		if (make_parts(t, p)) {                                                            \
			CHECK(!"encode failed");                                                   \
			parts_free(p);                                                             \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* Part 1's calls on A's track, part 2's on B's. */
static void check_a_then_b(const struct dump *d, const struct ht_synth_trace *t,
			   const struct parts *p)
{
	struct slices a = thread_slices(d->tl, TID_A), b = thread_slices(d->tl, TID_B);

	CHECK(calls_match(t, 0, p->k, &a));
	CHECK(calls_match(t, p->k, t->count, &b));
	free(a.v);
	free(b.v);
}

/* Whether A and B hold the same slices (names, times, nesting, marks). */
static int same_slices(const struct slices *a, const struct slices *b)
{
	if (a->n != b->n) {
		printf("     %zu slices against %zu\n", a->n, b->n);
		return 0;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct slice *x = &a->v[i], *y = &b->v[i];

		if (strcmp(x->name, y->name) || x->ts != y->ts || x->dur != y->dur ||
		    x->before != y->before || x->depth != y->depth) {
			printf("     slice %zu: %s [%lu +%lu] against %s [%lu +%lu]\n", i, x->name,
			       (unsigned long)x->ts, (unsigned long)x->dur, y->name,
			       (unsigned long)y->ts, (unsigned long)y->dur);
			return 0;
		}
	}
	return 1;
}

/*
 * The reference: BUF decoded straight into one call stack, with the
 * capture's CPU, clock and mappings, as a single-thread decode does it.
 */
static struct timeline *direct_decode(const struct ht_rawcap *cap, const struct ht_synth_trace *t,
				      const uint8_t *buf, size_t len, long *track)
{
	struct tl_track_desc td = {.kind = TL_TRACK_THREAD, .name = "ref", .pid = 1, .tid = 1};
	struct ht_pt_clock_pair pairs[2];
	struct ht_callstack_config cc = {0};
	struct ht_pt_decode_opts o = {0};
	struct ht_pt_cpu_info cpu = {.tsc = 1};
	struct ht_pt_elf_resolver *res = ht_pt_elf_resolver_new(t->maps, t->nmaps);
	struct ht_pt_image *img = ht_pt_image_new(t->maps, t->nmaps);
	struct timeline *tl = tl_new();
	struct ht_callstack *cs = NULL;
	struct ht_pt_clock clock = {0};
	int rc = -1;

	for (size_t i = 0; i < 2; i++)
		pairs[i] = (struct ht_pt_clock_pair){test_clocks[i].tsc, test_clocks[i].mono_ns};
	ht_pt_cpu_from_cpuid(&cpu, cap->cpuid.vendor, cap->cpuid.leaf1[0]);
	if (!res || !img || !tl || ht_pt_clock_init(&clock, pairs, 2, 0))
		goto out;
	*track = tl_add_track(tl, &td);
	cc.tl = tl;
	cc.track = (int)*track;
	cc.resolve = ht_pt_elf_resolve;
	cc.resolve_ctx = res;
	cs = ht_callstack_new(&cc);
	o.cpu = &cpu;
	o.clock = &clock;
	o.image = img;
	if (cs && !ht_pt_decode(buf, len, &o, ht_callstack_items, cs, NULL))
		rc = ht_callstack_finish(cs, 0);
out:
	ht_callstack_free(cs);
	ht_pt_clock_free(&clock);
	ht_pt_image_free(img);
	ht_pt_elf_resolver_free(res);
	if (rc) {
		printf("     direct decode: %s\n", ht_last_error());
		tl_free(tl);
		return NULL;
	}
	return tl;
}

static uint64_t distance_ns(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* Every slice of S starts at or after FROM and ends at or before TO. */
static int within(const struct slices *s, uint64_t from, uint64_t to)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].ts < from || s->v[i].ts + s->v[i].dur > to) {
			printf("     %s [%lu +%lu] outside [%lu, %lu]\n", s->v[i].name,
			       (unsigned long)s->v[i].ts, (unsigned long)s->v[i].dur,
			       (unsigned long)from, (unsigned long)to);
			return 0;
		}
	}
	return 1;
}

/* Tests. */

/* One thread, one CPU: its slices are those of a single-thread decode, on its track. */
TEST(one_thread_one_cpu)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(2);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices got = {0}, want = {0};
	struct timeline *ref = NULL;
	long ref_track = -1;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 2, -1, &p.whole);
	sb_comm(&sb, TGID, TID_A, mono_of(TSC_PART1) - 2000);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, mono_of(p.whole.tsc_last) + 20000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.streams, 1);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK_EQ_U64(d.st.foreign_runs, 0);
	CHECK(d.st.runs >= 1);
	CHECK_EQ_U64(d.st.gaps, 0);
	CHECK_EQ_U64(d.st.items_before, 0);
	CHECK_EQ_U64(d.st.items_dropped, 0);
	CHECK_EQ_U64(d.st.first_ns, mono_of(TSC_PART1));
	CHECK_EQ_U64(thread_track_count(d.tl), 1);
	CHECK(thread_track(d.tl, TID_A) >= 0);
	got = thread_slices(d.tl, TID_A);
	CHECK_EQ_U64(got.n, d.st.slices);
	CHECK(calls_match(t, 0, t->count, &got));
	CHECK_EQ_U64(count_named(&got, "basic"), 1);
	CHECK_EQ_U64(count_named(&got, "tail_target"), 1);
	CHECK(within(&got, mono_of(TSC_PART1), mono_of(p.whole.tsc_last) + 10000));
	/* Exactly what one call stack makes of the stream. */
	ref = direct_decode(&cap, t, p.whole.buf, p.whole.len, &ref_track);
	CHECK(ref != NULL);
	if (ref) {
		want = track_slices(ref, ref_track);
		CHECK(want.n > 10);
		CHECK(same_slices(&got, &want));
	}
	free(got.v);
	free(want.v);
	tl_free(ref);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* One CPU, the path cut in two: part 1 ran as A, part 2 as B; each on its own track. */
static void check_two_threads(const struct sideband *layout, int cpu_wide)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices a = {0}, b = {0};
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	sw = switch_ns(&p);
	cap_init(&cap, t);
	if (layout)
		sb.sample_type = cap.pt.sideband_sample_type = layout->sample_type;
	/* The stream's owner is A: the sideband, not the owner, says who ran part 2. */
	cap_parts(&cap, 0, TID_A, &p.p1, &p.p2);
	if (cpu_wide) {
		sb_switch_cpu_wide(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000, FOREIGN_PID,
				   FOREIGN_TID);
		sb_switch_cpu_wide(&sb, 0, TGID, TID_A, sw, TGID, TID_B);
		sb_switch_cpu_wide(&sb, 1, TGID, TID_B, sw + 1, TGID, TID_A);
	} else {
		sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
		sb_switch(&sb, 0, TGID, TID_A, sw);
		sb_comm(&sb, TGID, TID_B, sw);
		sb_switch(&sb, 1, TGID, TID_B, sw + 1);
	}
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	CHECK_EQ_U64(d.st.foreign_runs, 0);
	CHECK(d.st.runs >= 2);
	CHECK_EQ_U64(thread_track_count(d.tl), 2);
	a = thread_slices(d.tl, TID_A);
	b = thread_slices(d.tl, TID_B);
	CHECK(a.n > 0 && b.n > 0);
	CHECK_EQ_U64(a.n + b.n, d.st.slices);
	/* Each thread's calls are those of its part, no more, no fewer. */
	CHECK(calls_match(t, 0, p.k, &a));
	CHECK(calls_match(t, p.k, t->count, &b));
	/* Nothing of A's after the switch, nothing of B's before it. */
	CHECK(within(&a, mono_of(TSC_PART1), sw));
	CHECK(within(&b, sw, mono_of(t->count * 3 + p.tsc2) + 10000));
	/* B's stack began before its trace: its outer frames are back-dated, not gaps. */
	CHECK(count_named(&b, "main") == 1);
	CHECK(b.n && b.v[0].before);
	CHECK_EQ_U64(count_named(&a, HT_PT_SLICE_GAP) + count_named(&b, HT_PT_SLICE_GAP), 0);
	free(a.v);
	free(b.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

TEST(two_threads_split_by_switches)
{
	check_two_threads(NULL, 0);
}

/* SWITCH_CPU_WIDE records (a per-CPU sideband event) route the same way. */
TEST(two_threads_cpu_wide_switch_records)
{
	check_two_threads(NULL, 1);
}

/* The sample_id layout is the capture's, not a constant: more fields, the same routing. */
TEST(two_threads_other_sample_id_layout)
{
	struct sideband layout = {
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
			       PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER,
	};

	check_two_threads(&layout, 0);
}

/* Another process's thread on the CPU: its trace is dropped and counted. */
TEST(foreign_thread_dropped)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(1);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	/* Owned by a thread of the target: still the sideband decides. */
	cap_part(&cap, 1, TID_A, &p.whole);
	sb_switch(&sb, 1, FOREIGN_PID, FOREIGN_TID, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK(d.st.foreign_runs > 0);
	CHECK_EQ_U64(d.st.threads, 0);
	CHECK_EQ_U64(d.st.runs, 0);
	CHECK_EQ_U64(d.st.slices, 0);
	CHECK_EQ_U64(tl_event_count(d.tl), 0);
	CHECK_EQ_U64(thread_track_count(d.tl), 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* The target's thread, then another process's on the same CPU: only the first part is drawn. */
TEST(foreign_thread_after_target_dropped)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices a = {0};
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	sw = switch_ns(&p);
	cap_init(&cap, t);
	cap_parts(&cap, 0, -1, &p.p1, &p.p2);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, sw);
	sb_switch(&sb, 1, FOREIGN_PID, FOREIGN_TID, sw + 1);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK(d.st.foreign_runs >= 1);
	CHECK_EQ_U64(thread_track_count(d.tl), 1);
	CHECK(thread_track(d.tl, FOREIGN_TID) < 0);
	a = thread_slices(d.tl, TID_A);
	CHECK(calls_match(t, 0, p.k, &a));
	CHECK(within(&a, mono_of(TSC_PART1), sw));
	free(a.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/*
 * A moves from CPU 1 (part 1) to CPU 0 (part 2), and CPU 0's stream comes
 * first in the capture: A's track holds the whole path in time order, as
 * when both parts ran on one CPU.
 */
TEST(migration_keeps_order)
{
	const struct ht_synth_trace *t;
	struct sideband sb0 = new_sideband(0), sb1 = new_sideband(1), sbr = new_sideband(0);
	struct ht_rawcap cap, one;
	struct parts p;
	struct dump d, r;
	struct slices a = {0}, ref = {0};
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	sw = switch_ns(&p);
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.p2_psb);
	cap_part(&cap, 1, -1, &p.p1);
	/* CPU 0: another process, then A. CPU 1: A, then another process. */
	sb_switch(&sb0, 1, FOREIGN_PID, FOREIGN_TID, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb0, 0, FOREIGN_PID, FOREIGN_TID, sw);
	sb_switch(&sb0, 1, TGID, TID_A, sw + 1);
	sb_switch(&sb1, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb1, 0, TGID, TID_A, sw - 1);
	sb_switch(&sb1, 1, FOREIGN_PID, FOREIGN_TID, sw);
	cap_sideband(&cap, &sb0);
	cap_sideband(&cap, &sb1);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.streams, 2);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK_EQ_U64(thread_track_count(d.tl), 1);
	a = thread_slices(d.tl, TID_A);
	/* One stack across both CPUs: every call of the path, no gap, main entered once. */
	CHECK(calls_match(t, 0, t->count, &a));
	CHECK_EQ_U64(count_named(&a, "main"), 1);
	CHECK_EQ_U64(count_named(&a, "basic"), 1);
	CHECK_EQ_U64(count_named(&a, HT_PT_SLICE_GAP), 0);
	CHECK_EQ_U64(d.st.gaps, 0);
	/* The same as both parts on one CPU (the thread left it and came back). */
	cap_init(&one, t);
	cap_parts(&one, 0, -1, &p.p1, &p.p2);
	sb_switch(&sbr, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sbr, 0, TGID, TID_A, sw - 1);
	sb_switch(&sbr, 1, TGID, TID_A, sw + 1);
	cap_sideband(&one, &sbr);
	run_dump(&r, &one, 0);
	CHECK_EQ_U64(r.rc, 0);
	ref = thread_slices(r.tl, TID_A);
	CHECK(ref.n > 10);
	CHECK(same_slices(&a, &ref));
	free(a.v);
	free(ref.v);
	dump_free(&r);
	ht_rawcap_free(&one);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* Two threads of the target at the same time on two CPUs: each keeps its own stack. */
TEST(two_cpus_at_once)
{
	const struct ht_synth_trace *t;
	struct sideband sb0 = new_sideband(0), sb1 = new_sideband(1);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices a = {0}, b = {0};

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	/* Both streams run the whole path over the same times. */
	cap_part(&cap, 0, -1, &p.whole);
	cap_part(&cap, 1, -1, &p.whole);
	sb_switch(&sb0, 1, TGID, TID_B, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb1, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb0);
	cap_sideband(&cap, &sb1);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	a = thread_slices(d.tl, TID_A);
	b = thread_slices(d.tl, TID_B);
	CHECK(calls_match(t, 0, t->count, &a));
	CHECK(calls_match(t, 0, t->count, &b));
	CHECK(same_slices(&a, &b));
	free(a.v);
	free(b.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/*
 * Where the switch lies against part 2's first timestamp (its TIP.PGE's
 * TSC): a switch-in at exactly that time; a switch-in a little after it
 * (the conversion made the trace early), the switch-out before it.
 * Without WITH_OUT, A's switch-out is missing: only the switch-in at or
 * before the timestamp can say B.
 */
static void check_switch_at(int64_t in_offset_ns, int with_out)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(3);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	uint64_t t2;

	REQUIRE_PARTS(t, &p);
	t2 = mono_of(p.tsc2);
	cap_init(&cap, t);
	cap_parts(&cap, 3, -1, &p.p1, &p.p2);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	if (with_out)
		sb_switch(&sb, 0, TGID, TID_A, switch_ns(&p));
	sb_switch(&sb, 1, TGID, TID_B, (uint64_t)((int64_t)t2 + in_offset_ns));
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	check_a_then_b(&d, t, &p);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

TEST(switch_in_at_first_timestamp)
{
	check_switch_at(0, 1);
}

TEST(switch_in_at_first_timestamp_no_switch_out)
{
	check_switch_at(0, 0);
}

TEST(switch_in_after_first_timestamp)
{
	check_switch_at(500, 1);
}

/* Before the first switch, the thread on the CPU is the one the first switch-out takes off. */
TEST(before_first_switch_out)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	sw = switch_ns(&p);
	cap_init(&cap, t);
	cap_parts(&cap, 0, -1, &p.p1, &p.p2);
	/* The sideband's ring kept nothing older than A leaving. */
	sb_switch(&sb, 0, TGID, TID_A, sw);
	sb_switch(&sb, 1, TGID, TID_B, sw + 1);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	CHECK_EQ_U64(d.st.foreign_runs, 0);
	check_a_then_b(&d, t, &p);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/*
 * A run belongs to the thread on the CPU at its first timestamp, even when
 * the switch-out is stamped a little before the run's last instructions.
 */
TEST(run_goes_to_thread_at_its_start)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_parts(&cap, 0, -1, &p.p1, &p.p2);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, mono_of(p.p1.tsc_last) - 30);
	sb_switch(&sb, 1, TGID, TID_B, mono_of(p.p1.tsc_last) - 29);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	check_a_then_b(&d, t, &p);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* Switches split over two sideband sections of one CPU, newest first: sorted together. */
TEST(sideband_sections_merged)
{
	const struct ht_synth_trace *t;
	struct sideband late = new_sideband(0), early = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	sw = switch_ns(&p);
	cap_init(&cap, t);
	cap_parts(&cap, 0, -1, &p.p1, &p.p2);
	sb_switch(&late, 0, TGID, TID_A, sw);
	sb_switch(&late, 1, TGID, TID_B, sw + 1);
	sb_switch(&early, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &late);
	cap_sideband(&cap, &early);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	check_a_then_b(&d, t, &p);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* t0 past the middle: nothing drawn before it; the frames open at t0 are back-dated to it. */
TEST(t0_cuts_earlier_trace)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices a = {0};
	size_t mid, before_marked = 0, entered = 0, all = 0;
	uint64_t t0;

	REQUIRE_PARTS(t, &p);
	mid = t->count * 2 / 3;
	t0 = mono_of(TSC_PART1 + 3 * mid);
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.whole);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, t0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK(d.st.items_before > 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK(d.st.first_ns >= t0);
	a = thread_slices(d.tl, TID_A);
	CHECK(a.n > 0);
	for (size_t i = 0; i < a.n; i++) {
		if (a.v[i].ts < t0)
			printf("     %s starts at %lu, before t0 %lu\n", a.v[i].name,
			       (unsigned long)a.v[i].ts, (unsigned long)t0);
		CHECK(a.v[i].ts >= t0);
		before_marked += a.v[i].before;
	}
	CHECK(before_marked > 0);
	CHECK_EQ_U64(count_named(&a, "main"), 1);
	for (size_t i = 0; i < NCALLED; i++) {
		entered += count_entered(&a, called[i]);
		all += recorded_calls(t, 0, t->count, called[i]);
	}
	/* Only the calls after t0 (give or take the timing packets' spacing). */
	CHECK(entered > 0 && entered < all);
	for (size_t i = 0; i < NCALLED; i++)
		CHECK(count_entered(&a, called[i]) <=
		      recorded_calls(t, mid - 12, t->count, called[i]));
	free(a.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* t0 past all of the trace: nothing is drawn, nothing breaks. */
TEST(t0_after_everything)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.whole);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, mono_of(p.whole.tsc_last) + 1000000);
	CHECK_EQ_U64(d.rc, 0);
	CHECK(d.st.items_before > 0);
	CHECK_EQ_U64(d.st.slices, 0);
	CHECK_EQ_U64(tl_event_count(d.tl), 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* Without sideband the stream's owner ran it. */
TEST(no_sideband_uses_owner)
{
	const struct ht_synth_trace *t;
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices b = {0};

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 5, TID_B, &p.whole);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK_EQ_U64(d.st.foreign_runs, 0);
	CHECK_EQ_U64(thread_track_count(d.tl), 1);
	b = thread_slices(d.tl, TID_B);
	CHECK(calls_match(t, 0, t->count, &b));
	CHECK_EQ_U64(b.n, d.st.slices);
	free(b.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* A sideband that does not parse holds no switches: the owner, as without one. */
TEST(garbage_sideband_uses_owner)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(5);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices b = {0};

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 5, TID_B, &p.whole);
	srand(11);
	for (int i = 0; i < 1000; i++) {
		uint8_t byte = (uint8_t)rand();

		sb_bytes(&sb, &byte, 1);
	}
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	b = thread_slices(d.tl, TID_B);
	CHECK(calls_match(t, 0, t->count, &b));
	free(b.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* A per-CPU stream without sideband: no thread to give it to, dropped and counted. */
TEST(no_sideband_no_owner_dropped)
{
	const struct ht_synth_trace *t;
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.whole);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK(d.st.foreign_runs > 0);
	CHECK_EQ_U64(d.st.threads, 0);
	CHECK_EQ_U64(tl_event_count(d.tl), 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* Bytes that are no trace: 0, and nothing drawn but gaps. */
TEST(garbage_stream_bytes)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	uint8_t junk[8192], zeros[4096] = {0};
	struct dump d;

	REQUIRE_TRACE(t);
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	cap_init(&cap, t);
	cap_stream(&cap, 0, TID_A, junk, sizeof(junk));
	cap_stream(&cap, 1, TID_A, zeros, sizeof(zeros));
	cap_stream(&cap, 2, TID_A, junk, 1);
	cap_stream(&cap, 3, TID_A, junk, 0);
	sb_switch(&sb, 1, TGID, TID_A, MONO0_NS);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.streams, 4);
	CHECK_EQ_U64(d.st.insns, 0);
	for (size_t i = 0; i < tl_event_count(d.tl); i++)
		CHECK_STR(tl_str_get(d.tl, tl_event(d.tl, i)->name), HT_PT_SLICE_GAP);
	dump_free(&d);
	ht_rawcap_free(&cap);
}

/* A real stream with random bytes written over its middle: decoded around them, no crash. */
TEST(corrupted_stream)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	srand(3);
	for (size_t i = p.whole.len / 3; i < p.whole.len / 3 + 64 && i < p.whole.len; i++)
		p.whole.buf[i] = (uint8_t)rand();
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.whole);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK(d.st.insns > 0 && d.st.insns <= t->count);
	CHECK(d.st.errors >= 1);
	CHECK(d.st.threads <= 1);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/*
 * A capture without a CPU stream: nothing to draw; no crash (the sanitizer
 * build watches). pt_dump.h allows -1 for "a capture without a CPU".
 */
TEST(empty_capture)
{
	const struct ht_synth_trace *t;
	struct ht_rawcap cap;
	struct dump d;

	REQUIRE_TRACE(t);
	cap_init(&cap, t);
	run_dump(&d, &cap, 0);
	CHECK(d.rc == 0 || (d.rc == -1 && ht_last_error()[0]));
	CHECK_EQ_U64(d.st.streams, 0);
	CHECK_EQ_U64(tl_event_count(d.tl), 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
}

/*
 * Without (TSC, CLOCK_MONOTONIC) pairs no item has a time, so no switch can
 * say whose a run is: pt_dump.h promises -1 with ht_last_error() for "a
 * capture without a ... clock", rather than a dump that puts every thread's
 * trace on the stream's owner (or drops it all for a per-CPU stream).
 */
TEST(no_clock_refused)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	free(cap.clocks);
	cap.clocks = NULL;
	cap.nclocks = 0;
	/* A ran part 1 and B part 2; the stream's owner is A. */
	cap_parts(&cap, 0, TID_A, &p.p1, &p.p2);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, switch_ns(&p));
	sb_switch(&sb, 1, TGID, TID_B, switch_ns(&p) + 1);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	if (d.rc == 0)
		printf("     returned 0: %lu threads, B's track %s, %lu slices on A's\n",
		       (unsigned long)d.st.threads,
		       thread_track(d.tl, TID_B) >= 0 ? "drawn" : "missing",
		       (unsigned long)d.st.slices);
	CHECK(d.rc == -1);
	CHECK(ht_last_error()[0] != 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

/* Fewer items kept than decoded: the rest counted, what is drawn still nests. */
TEST(max_items_bounds_memory)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_pt_dump_input in = {.tgid = TGID, .max_items = 50};
	struct ht_pt_dump_stats st;
	struct ht_rawcap cap;
	struct timeline *tl;
	struct parts p;
	char why[256];

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p.whole);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	in.cap = &cap;
	tl = tl_new();
	CHECK(ht_pt_dump_build(tl, &in, &st) == 0);
	CHECK(st.items_dropped > 0);
	CHECK(tl_validate(tl, why, sizeof(why)) == 0);
	tl_free(tl);
	ht_rawcap_free(&cap);
	parts_free(&p);
}

static int count_items(void *ctx, const struct ht_pt_item *items, size_t n)
{
	size_t *count = ctx;

	(void)items;
	*count += n;
	return 0;
}

/* How many items the decoder makes of P. */
static size_t items_of(const struct ht_synth_trace *t, const struct part *p)
{
	struct ht_pt_image *img = ht_pt_image_new(t->maps, t->nmaps);
	struct ht_pt_decode_opts o = {.image = img};
	size_t n = 0;

	if (img)
		ht_pt_decode(p->buf, p->len, &o, count_items, &n, NULL);
	ht_pt_image_free(img);
	return n;
}

/*
 * pt_dump.h: each stream has an equal share of max_items and keeps its
 * newest items, the trace nearest the trigger. CPU 0 (listed first) holds
 * the later trace, B's part 2, and CPU 1 the earlier, A's part 1; with
 * room for one part in all, each keeps the end of its part.
 */
static uint64_t last_end(const struct slices *s)
{
	uint64_t end = 0;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].ts + s->v[i].dur > end)
			end = s->v[i].ts + s->v[i].dur;
	return end;
}

static int build_two_cpus(const struct ht_synth_trace *t, struct parts *p, size_t max_items,
			  struct ht_pt_dump_stats *st, struct slices *a, struct slices *b)
{
	struct sideband sb0 = new_sideband(0), sb1 = new_sideband(1);
	struct ht_pt_dump_input in = {.tgid = TGID, .max_items = max_items};
	struct ht_rawcap cap;
	struct timeline *tl = tl_new();
	int rc;

	cap_init(&cap, t);
	cap_part(&cap, 0, -1, &p->p2_psb);
	cap_part(&cap, 1, -1, &p->p1);
	sb_switch(&sb0, 1, TGID, TID_B, switch_ns(p));
	sb_switch(&sb1, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb0);
	cap_sideband(&cap, &sb1);
	in.cap = &cap;
	rc = ht_pt_dump_build(tl, &in, st);
	*a = thread_slices(tl, TID_A);
	*b = thread_slices(tl, TID_B);
	tl_free(tl);
	ht_rawcap_free(&cap);
	return rc;
}

TEST(max_items_keeps_each_cpus_newest)
{
	const struct ht_synth_trace *t;
	struct ht_pt_dump_stats all, some;
	struct slices a_all = {0}, b_all = {0}, a = {0}, b = {0};
	struct parts p;

	REQUIRE_PARTS(t, &p);
	CHECK(build_two_cpus(t, &p, 0, &all, &a_all, &b_all) == 0);
	CHECK(all.items_dropped == 0);
	CHECK(build_two_cpus(t, &p, items_of(t, &p.p1), &some, &a, &b) == 0);
	CHECK(some.items_dropped > 0);
	/* Both threads are drawn, each to the end of its trace; A's start is gone. */
	CHECK(a.n > 0 && b.n > 0);
	CHECK(last_end(&a) == last_end(&a_all));
	CHECK(last_end(&b) == last_end(&b_all));
	CHECK(some.first_ns > all.first_ns);
	CHECK(a.n + b.n < a_all.n + b_all.n);
	free(a_all.v);
	free(b_all.v);
	free(a.v);
	free(b.v);
	parts_free(&p);
}

/*
 * `hybtrace decode` of a capture of WHOLE (thread TID_A alone on CPU 0)
 * into directory TMP: the dump's path in OUT. Returns 0 or -1.
 */
static int decode_capture(const struct ht_synth_trace *t, const struct part *whole, const char *tmp,
			  char *out, size_t outlen)
{
	struct sideband sb = new_sideband(0);
	char raw[PATH_MAX], dir[PATH_MAX];
	char *argv[5];
	struct ht_rawcap cap;
	int rc;

	cap_init(&cap, t);
	cap_part(&cap, 0, -1, whole);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	snprintf(cap.kind, sizeof(cap.kind), "manual");
	snprintf(cap.comm, sizeof(cap.comm), "pt_workload");
	cap.start_ns = cap.end_ns = mono_of(whole->tsc_last);
	cap.pre_ns = cap.end_ns - mono_of(TSC_PART1) + 1000;
	cap.has_window = true;
	cap.window.t0 = cap.start_ns - cap.pre_ns;
	cap.window.t1 = cap.end_ns;
	ht_rawcap_add_comm(&cap, TID_A, "pt_workload");
	snprintf(raw, sizeof(raw), "%s/snap.hybtrace-raw", tmp);
	snprintf(dir, sizeof(dir), "%s", tmp);
	rc = ht_rawcap_write(raw, &cap);
	ht_rawcap_free(&cap);
	if (rc)
		return -1;
	argv[0] = "decode";
	argv[1] = raw;
	argv[2] = "--output";
	argv[3] = dir;
	argv[4] = NULL;
	rc = ht_decode_main(4, argv);
	unlink(raw);
	snprintf(out, outlen, "%s/snap.perfetto-trace", tmp);
	return rc ? -1 : 0;
}

/*
 * MTC and CYC timing through the whole dump. The capture holds what a real
 * one keeps for the decoder: the event's config fields, the cpuid values,
 * and the intel_pt PMU's sysfs values as the kernel writes them:
 * max_nonturbo_ratio, and tsc_art_ratio "EBX:EAX" of cpuid 0x15 (its
 * tsc_art_num is ebx, tsc_art_den eax), kept as num:den. Each call's slice
 * must start near the time the callee's first instruction ran.
 */
static void check_dump_timing(enum ht_synth_timing timing, uint64_t margin_tsc)
{
	struct ht_synth_encode_opts o = {
		.tsc0 = TSC_PART1,
		.end_disable = 1,
		.timing = timing,
		.cyc_per_insn = 40, /* basic's 162 instructions span several MTC periods */
		.cyc_per_kernel = 20000,
		.cbr = 32,
		.nom_freq = 24,
		.mtc_freq = 3,
		.art_eax = 2,
		.art_ebx = 216,
	};
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(2);
	struct ht_synth_stream s;
	struct ht_rawcap cap;
	struct slices got;
	struct dump d;
	uint64_t worst = 0;
	size_t checked = 0;

	REQUIRE_TRACE(t);
	if (ht_synth_encode(t, 0, t->count, &o, &s)) {
		printf("     encode: %s\n", ht_last_error());
		CHECK(!"encode failed");
		ht_synth_stream_free(&s);
		return;
	}
	cap_init(&cap, t);
	cap.pt.fields.mtc = 1;
	cap.pt.fields.mtc_period = o.mtc_freq;
	cap.pt.fields.cyc = timing == HT_SYNTH_TIMING_CYC;
	cap.pt.has_max_nonturbo_ratio = true;
	cap.pt.max_nonturbo_ratio = o.nom_freq;
	cap.pt.has_tsc_art_ratio = true;
	cap.pt.tsc_art_num = o.art_ebx;
	cap.pt.tsc_art_den = o.art_eax;
	cap_stream(&cap, 2, -1, s.buf, s.len);
	sb_comm(&sb, TGID, TID_A, mono_of(TSC_PART1) - 2000);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, mono_of(s.tsc[t->count - 1]) + 20000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	got = thread_slices(d.tl, TID_A);
	CHECK(calls_match(t, 0, t->count, &got));
	/* The Nth call of each function against the Nth slice of it. */
	for (size_t f = 0; f < NCALLED; f++) {
		uint64_t addr = ht_synth_symbol(t, called[f]);
		size_t n = 0;

		for (size_t i = 0; i + 1 < t->count; i++) {
			uint64_t want;
			size_t seen = 0, j;

			if (t->insns[i].iclass != ptic_call || ht_synth_flow_target(t, i) != addr)
				continue;
			for (j = 0; j < got.n; j++)
				if (!strcmp(got.v[j].name, called[f]) && !got.v[j].before &&
				    seen++ == n)
					break;
			n++;
			CHECK(j < got.n);
			if (j >= got.n)
				continue;
			want = mono_of(s.tsc[i + 1]);
			checked++;
			if (distance_ns(got.v[j].ts, want) > worst)
				worst = distance_ns(got.v[j].ts, want);
			if (distance_ns(got.v[j].ts, want) > margin_tsc / 2)
				printf("     %s call %zu at %lu ns, ran at %lu\n", called[f], n,
				       (unsigned long)got.v[j].ts, (unsigned long)want);
		}
	}
	CHECK(checked >= 10);
	CHECK(worst <= margin_tsc / 2);
	if (getenv("HT_PT_SHOW"))
		printf("     %zu calls, worst %lu ns (%lu TSC ticks) from the truth\n", checked,
		       (unsigned long)worst, (unsigned long)worst * 2);
	free(got.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	ht_synth_stream_free(&s);
}

/*
 * The call stacks spread time over the instructions run between two
 * changes of it: with MTC only, changes come an MTC period (864 TSC ticks)
 * apart; with CYC, at the packets, a few instructions (30 ticks each here)
 * apart. A decoder that misreads the crystal clock ratio, the MTC period
 * or the core:bus ratios is thousands of ticks off.
 */
TEST(dump_timing_coarse)
{
	check_dump_timing(HT_SYNTH_TIMING_MTC, 2 * 864);
}

TEST(dump_timing_fine)
{
	check_dump_timing(HT_SYNTH_TIMING_CYC, 256);
}

/*
 * `hybtrace decode` end to end: a capture with PT bytes, written as a file,
 * becomes a .perfetto-trace whose thread track holds the recorded calls.
 */
TEST(decode_command_draws_the_call_stacks)
{
	const struct ht_synth_trace *t;
	char tmp[] = "/tmp/ht-ptdecode-XXXXXX", out[PATH_MAX], err[256];
	struct timeline *tl;
	struct slices got = {0};
	struct parts p;

	REQUIRE_TRACE(t);
	if (make_parts(t, &p) || !mkdtemp(tmp)) {
		CHECK(!"setup failed");
		parts_free(&p);
		return;
	}
	CHECK(decode_capture(t, &p.whole, tmp, out, sizeof(out)) == 0);
	tl = pftr_read_path(out, NULL, err, sizeof(err));
	CHECK(tl != NULL);
	if (tl) {
		got = thread_slices(tl, TID_A);
		CHECK(calls_match(t, 0, t->count, &got));
		CHECK_EQ_U64(count_named(&got, "basic"), 1);
		free(got.v);
		tl_free(tl);
	}
	unlink(out);
	rmdir(tmp);
	parts_free(&p);
}

/* A call of the recording and how deep it ran, main's frame at depth 0. */
struct recorded_call {
	const char *name;
	unsigned int depth;
};

/*
 * The stack the recording starts in (main called ht_trace_start), then its
 * calls to CALLED and "basic", from its instructions alone.
 */
static size_t recorded_depths(const struct ht_synth_trace *t, struct recorded_call *out, size_t cap)
{
	unsigned int depth = 1;
	size_t n = 0;

	out[n++] = (struct recorded_call){"main", 0};
	out[n++] = (struct recorded_call){"ht_trace_start", 1};

	for (size_t i = 0; i < t->count; i++) {
		uint64_t to;

		if (t->insns[i].iclass == ptic_return && depth)
			depth--;
		if (t->insns[i].iclass != ptic_call)
			continue;
		depth++;
		to = ht_synth_flow_target(t, i);
		for (size_t k = 0; k <= NCALLED && n < cap; k++) {
			const char *name = k < NCALLED ? called[k] : "basic";

			if (ht_synth_symbol(t, name) == to)
				out[n++] = (struct recorded_call){name, depth};
		}
	}
	return n;
}

/*
 * The slices of a dump's thread TID as Perfetto nests them: each begin at
 * the depth its track's open slices give it, in file order (the order
 * Perfetto takes events of one time in), names from the interned data.
 */
static size_t file_nesting(const char *path, int32_t tid, struct recorded_call *out, size_t cap,
			   char names[][64], size_t nnames)
{
	uint64_t uuid = 0, *iids = calloc(nnames, sizeof(*iids));
	struct pb_reader top, packet, sub, entry;
	struct pb_field f, g, h, k;
	unsigned int depth = 0;
	size_t n = 0, len = 0, ninterned = 0;
	uint8_t *data = NULL;
	FILE *in = fopen(path, "rb");

	if (in) {
		data = malloc(1 << 24);
		len = data ? fread(data, 1, 1 << 24, in) : 0;
		fclose(in);
	}
	/* Pass 1: the thread's track; pass 2: its events. */
	for (int pass = 1; pass <= 2 && data && iids; pass++) {
		pb_reader_init(&top, data, len);
		while (pb_next(&top, &f) == 1) {
			uint64_t type = 0, on = 0, iid = 0, desc_uuid = 0;
			int thread_tid = -1, has_track = 0;

			pb_enter(&top, &f, &packet);
			while (pb_next(&packet, &g) == 1) {
				if (g.wire != PB_WIRE_LEN)
					continue;
				pb_enter(&packet, &g, &sub);
				while (pb_next(&sub, &h) == 1) {
					if (pass == 1 && g.number == PFT_PACKET_TRACK_DESCRIPTOR) {
						if (h.number == PFT_TRACK_UUID)
							desc_uuid = h.value;
						if (h.number != PFT_TRACK_THREAD)
							continue;
						pb_enter(&sub, &h, &entry);
						while (pb_next(&entry, &k) == 1)
							if (k.number == PFT_THREAD_TID)
								thread_tid = (int)k.value;
					}
					if (pass == 2 && g.number == PFT_PACKET_INTERNED_DATA &&
					    h.number == PFT_INTERNED_EVENT_NAMES &&
					    ninterned < nnames) {
						pb_enter(&sub, &h, &entry);
						while (pb_next(&entry, &k) == 1) {
							if (k.number == PFT_INTERNED_IID)
								iids[ninterned] = k.value;
							if (k.number == PFT_INTERNED_STRING)
								snprintf(names[ninterned], 64,
									 "%.*s", (int)k.len,
									 (const char *)k.data);
						}
						ninterned++;
					}
					if (pass == 2 && g.number == PFT_PACKET_TRACK_EVENT) {
						if (h.number == PFT_EVENT_TYPE)
							type = h.value;
						if (h.number == PFT_EVENT_TRACK_UUID) {
							on = h.value;
							has_track = 1;
						}
						if (h.number == PFT_EVENT_NAME_IID)
							iid = h.value;
					}
				}
			}
			if (pass == 1 && thread_tid == tid)
				uuid = desc_uuid;
			if (pass != 2 || !has_track || on != uuid)
				continue;
			if (type == PFT_TYPE_SLICE_END && depth)
				depth--;
			if (type != PFT_TYPE_SLICE_BEGIN)
				continue;
			for (size_t i = 0; i < ninterned && n < cap; i++)
				if (iids[i] == iid)
					out[n++] = (struct recorded_call){names[i], depth};
			depth++;
		}
	}
	free(data);
	free(iids);
	return n;
}

static int by_name_depth(const void *a, const void *b)
{
	const struct recorded_call *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (int)x->depth - (int)y->depth;
}

/*
 * Each call of the recording sits at the depth it ran at, as Perfetto
 * nests the file: main and ht_trace_start, on the stack before the trace
 * began, begin together. HT_PT_DUMP_KEEP=DIR keeps the dump there, with the
 * recorded depths in calls.txt, for Perfetto's own importer to check
 * (tests/integration/test_pt.py).
 */
TEST(decoded_calls_nest_as_recorded)
{
	enum { CAP = 256 };
	static struct recorded_call want[CAP], got[CAP], kept[CAP];
	static char names[4096][64];
	const struct ht_synth_trace *t;
	char tmp[] = "/tmp/ht-ptnest-XXXXXX", out[PATH_MAX], path[PATH_MAX + 16];
	const char *keep = getenv("HT_PT_DUMP_KEEP");
	size_t nwant, ngot, nkept = 0;
	struct parts p;

	REQUIRE_TRACE(t);
	if (make_parts(t, &p) || !mkdtemp(tmp)) {
		CHECK(!"setup failed");
		parts_free(&p);
		return;
	}
	CHECK(decode_capture(t, &p.whole, tmp, out, sizeof(out)) == 0);
	nwant = recorded_depths(t, want, CAP);
	ngot = file_nesting(out, TID_A, got, CAP, names, 4096);
	CHECK(nwant >= 10);
	for (size_t i = 0; i < ngot; i++)
		for (size_t k = 0; k < nwant; k++)
			if (!strcmp(got[i].name, want[k].name)) {
				kept[nkept++] = got[i];
				break;
			}
	qsort(want, nwant, sizeof(*want), by_name_depth);
	qsort(kept, nkept, sizeof(*kept), by_name_depth);
	CHECK_EQ_U64(nkept, nwant);
	for (size_t i = 0; i < nwant && i < nkept; i++)
		if (strcmp(want[i].name, kept[i].name) || want[i].depth != kept[i].depth) {
			printf("     the recording calls %s at depth %u, the file nests %s at %u\n",
			       want[i].name, want[i].depth, kept[i].name, kept[i].depth);
			CHECK(!"a call at the wrong depth");
			break;
		}
	if (keep) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/calls.txt", keep);
		f = fopen(path, "w");
		for (size_t i = 0; f && i < nwant; i++)
			fprintf(f, "%s %u\n", want[i].name, want[i].depth);
		CHECK(f && !fclose(f));
		snprintf(path, sizeof(path), "%s/pt.perfetto-trace", keep);
		CHECK(!rename(out, path) || !sh("cp %s %s", out, path));
	}
	unlink(out);
	rmdir(tmp);
	parts_free(&p);
}

/*
 * Several target processes (synthesized captures): one CPU's stream holds
 * the runs of each, every process has its own code at the same addresses,
 * and each run must be decoded and named with its own process's mappings,
 * on a track under its own pid.
 */
#define OTHER_PID 5151
#define OTHER_TID 5152

/* A second reading of the maps, for PID: the exe's mappings replaced by EXE's. */
static void cap_add_process(struct ht_rawcap *cap, int pid, const char *exe)
{
	const struct ht_rawcap_maps *first = &cap->maps[0];
	struct ht_rawcap_maps *m;

	cap->maps = realloc(cap->maps, (cap->nmaps + 1) * sizeof(*cap->maps));
	first = &cap->maps[0];
	m = &cap->maps[cap->nmaps++];
	memset(m, 0, sizeof(*m));
	m->pid = pid;
	m->taken_ns = first->taken_ns;
	m->v = calloc(first->count + 1, sizeof(*m->v));
	for (size_t i = 0; i < first->count; i++) {
		struct ht_rawcap_mapping *x = &m->v[m->count++];
		bool is_exe = strstr(first->v[i].path, "/pt_workload") != NULL;

		*x = first->v[i];
		x->build_id = NULL;
		x->path = strdup(is_exe ? exe : first->v[i].path);
	}
	if (!cap->maps[0].pid)
		cap->maps[0].pid = TGID;
}

/* The workload with its functions renamed (leaf -> leaf_b ...): the same code, other names. */
static int renamed_copy(char *out, size_t len)
{
	char cmd[3 * PATH_MAX];

	snprintf(out, len, "%s/pt_workload_b", ht_pt_programs_dir);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --redefine-sym leaf=leaf_b --redefine-sym fact=fact_b "
		 "--redefine-sym tail_entry=tail_entry_b --redefine-sym "
		 "through_pointer=through_pointer_b %s/pt_workload %s",
		 ht_pt_programs_dir, out);
	return system(cmd);
}

static int track_pid(const struct timeline *tl, int32_t tid)
{
	long i = thread_track(tl, tid);

	return i < 0 ? -1 : tl_track(tl, (size_t)i)->pid;
}

/* Synthesized: part 1 ran in the target, part 2 in another process naming its code otherwise. */
TEST(synthesized_two_processes_each_named_from_its_own_image)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	struct slices a = {0}, b = {0};
	char exe_b[PATH_MAX + 32];
	uint64_t sw;

	REQUIRE_PARTS(t, &p);
	if (renamed_copy(exe_b, sizeof(exe_b))) {
		CHECK(!"objcopy could not rename the workload's functions");
		parts_free(&p);
		return;
	}
	sw = switch_ns(&p);
	cap_init(&cap, t);
	cap_add_process(&cap, OTHER_PID, exe_b);
	cap_parts(&cap, 0, TID_A, &p.p1, &p.p2);
	sb_switch(&sb, 1, TGID, TID_A, mono_of(TSC_PART1) - 1000);
	sb_switch(&sb, 0, TGID, TID_A, sw);
	sb_switch(&sb, 1, OTHER_PID, OTHER_TID, sw + 1);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.processes, 2);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	CHECK_EQ_U64(d.st.threads, 2);
	CHECK_EQ_U64(d.st.foreign_runs, 0);
	/* Each thread under its own process. */
	CHECK_EQ_U64(track_pid(d.tl, TID_A), TGID);
	CHECK_EQ_U64(track_pid(d.tl, OTHER_TID), OTHER_PID);
	a = thread_slices(d.tl, TID_A);
	b = thread_slices(d.tl, OTHER_TID);
	CHECK(calls_match(t, 0, p.k, &a));
	CHECK_EQ_U64(count_entered(&a, "leaf_b") + count_entered(&a, "fact_b"), 0);
	/* B's calls, named from its own exe. */
	CHECK_EQ_U64(count_entered(&b, "leaf_b"), recorded_calls(t, p.k, t->count, "leaf"));
	CHECK_EQ_U64(count_entered(&b, "fact_b"), recorded_calls(t, p.k, t->count, "fact"));
	CHECK(count_entered(&b, "leaf_b") + count_entered(&b, "fact_b") > 0);
	CHECK_EQ_U64(count_entered(&b, "leaf") + count_entered(&b, "fact"), 0);
	free(a.v);
	free(b.v);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
	unlink(exe_b);
}

/*
 * Synthesized: the target (named first) has other code at the addresses the
 * second process ran: the stream is that process's, decoded against its own
 * image without an error.
 */
TEST(synthesized_process_decoded_against_its_own_code)
{
	const struct ht_synth_trace *t;
	struct sideband sb = new_sideband(0);
	struct ht_rawcap cap;
	struct parts p;
	struct dump d;
	char exe_b[PATH_MAX + 32];

	REQUIRE_PARTS(t, &p);
	cap_init(&cap, t);
	/* The second process runs the real code; the target's exe is another program. */
	snprintf(exe_b, sizeof(exe_b), "%s/pt_workload", ht_pt_programs_dir);
	cap_add_process(&cap, OTHER_PID, exe_b);
	for (size_t i = 0; i < cap.maps[0].count; i++) {
		struct ht_rawcap_mapping *x = &cap.maps[0].v[i];

		if (strstr(x->path, "/pt_workload")) {
			free(x->path);
			x->path = strdup("/bin/ls");
		}
	}
	cap_part(&cap, 0, -1, &p.whole);
	sb_switch(&sb, 1, OTHER_PID, OTHER_TID, mono_of(TSC_PART1) - 1000);
	cap_sideband(&cap, &sb);
	run_dump(&d, &cap, 0);
	CHECK_EQ_U64(d.rc, 0);
	CHECK_EQ_U64(d.st.insns, t->count);
	CHECK_EQ_U64(d.st.errors, 0);
	CHECK_EQ_U64(d.st.threads, 1);
	CHECK_EQ_U64(track_pid(d.tl, OTHER_TID), OTHER_PID);
	CHECK(thread_track(d.tl, TID_A) < 0);
	dump_free(&d);
	ht_rawcap_free(&cap);
	parts_free(&p);
}
