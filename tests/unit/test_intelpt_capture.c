// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Intel PT capture: the PMU's sysfs description (fake trees), the config
 * built from it, the attrs, the AUX area's rotation, the sideband ring, the
 * TSC mapping; the real sideband events on a child process; real PT where
 * the machine has it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "programs.h"
#include "sources/intelpt/intelpt_capture.h"
#include "base/log.h"
#include "base/proc.h"

/* A type no PMU has: opening it fails as a PT event would on a machine without PT. */
#define FAKE_TYPE "4242"

static char root[64];
static int tree_no;

static void put_file(const char *dir, const char *rel, const char *text)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (!text) {
		unlink(path);
		return;
	}
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s\n", text);
		fclose(f);
	}
}

static void mkdirs(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(tmp, 0755);
			*p = '/';
		}
	}
	mkdir(tmp, 0755);
}

/* A tree as a Skylake-era machine shows it; returns its sysroot; DIR gets the PMU dir. */
static const char *fake_tree(char *dir, size_t len)
{
	static char sysroot[256];
	static const char *const formats[][2] = {
		{"format/pt", "config:0"},
		{"format/cyc", "config:1"},
		{"format/mtc", "config:9"},
		{"format/tsc", "config:10"},
		{"format/noretcomp", "config:11"},
		{"format/branch", "config:13"},
		{"format/mtc_period", "config:14-17"},
		{"format/cyc_thresh", "config:19-22"},
		{"format/psb_period", "config:24-27"},
		{"caps/mtc", "1"},
		{"caps/psb_cyc", "1"},
		{"caps/mtc_periods", "249"},
		{"caps/psb_periods", "3f"},
		{"caps/cycle_thresholds", "3fff"},
		{"caps/ip_filtering", "1"},
		{"caps/num_address_ranges", "2"},
		{"caps/ptwrite", "0"},
		{"caps/topa_multiple_entries", "1"},
		{"max_nonturbo_ratio", "40"},
		{"tsc_art_ratio", "188:2"},
		{"type", FAKE_TYPE},
	};
	char sub[PATH_MAX + 16];

	if (!tree_no && prog_make_dir(root, sizeof(root), "/tmp/hybtrace-test-ptsysfs-XXXXXX"))
		return NULL;
	snprintf(sysroot, sizeof(sysroot), "%s/t%d", root, tree_no++);
	snprintf(dir, len, "%s" HT_INTELPT_SYSFS_DIR, sysroot);
	snprintf(sub, sizeof(sub), "%s/format", dir);
	mkdirs(sub);
	snprintf(sub, sizeof(sub), "%s/caps", dir);
	mkdirs(sub);
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		put_file(dir, formats[i][0], formats[i][1]);
	return sysroot;
}

static bool has(const char *haystack, const char *needle)
{
	return strstr(haystack, needle) != NULL;
}

TEST(good_tree_gives_perfs_default)
{
	struct ht_intelpt_request req;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields f;
	char dir[PATH_MAX], text[128];
	const char *sys = fake_tree(dir, sizeof(dir));
	uint64_t config;

	CHECK(sys != NULL);
	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	CHECK_EQ_U64(pmu.type, 4242);
	CHECK_EQ_U64(pmu.term_mask[HT_PT_TERM_PT], 1);
	CHECK_EQ_U64(pmu.term_mask[HT_PT_TERM_MTC_PERIOD], 0xfULL << 14);
	CHECK_EQ_U64(pmu.term_mask[HT_PT_TERM_PSB_PERIOD], 0xfULL << 24);
	CHECK(pmu.cap_mtc && pmu.cap_psb_cyc && pmu.cap_ip_filtering && !pmu.cap_ptwrite);
	CHECK_EQ_U64(pmu.mtc_periods, 0x249);
	CHECK_EQ_U64(pmu.psb_periods, 0x3f);
	CHECK_EQ_U64(pmu.cycle_thresholds, 0x3fff);
	CHECK_EQ_U64(pmu.num_address_ranges, 2);
	CHECK(pmu.has_max_nonturbo_ratio && pmu.max_nonturbo_ratio == 40);
	CHECK(pmu.has_tsc_art_ratio && pmu.tsc_art_num == 188 && pmu.tsc_art_den == 2);
	ht_intelpt_request_default(&req);
	CHECK(!ht_intelpt_build_config(&pmu, &req, &f, &config));
	CHECK_EQ_U64(config, 1ULL | 1ULL << 9 | 1ULL << 10 | 1ULL << 13 | 3ULL << 14 | 3ULL << 24);
	CHECK(f.pt && f.branch && f.tsc && f.mtc && !f.cyc && !f.noretcomp);
	CHECK_EQ_U64(f.mtc_period, 3);
	CHECK_EQ_U64(f.psb_period, 3);
	CHECK_STR(ht_pt_fields_format(&f, text, sizeof(text)),
		  "tsc,mtc,mtc_period=3,psb_period=3,pt,branch");
}

TEST(fine_timing_and_explicit_values)
{
	struct ht_intelpt_request req;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields f;
	char dir[PATH_MAX], text[128];
	const char *sys = fake_tree(dir, sizeof(dir));
	uint64_t config;

	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	ht_intelpt_request_default(&req);
	req.fine_timing = true;
	req.mtc_period = 6;
	req.psb_period = 5;
	req.cyc_thresh = 2;
	req.noretcomp = true;
	CHECK(!ht_intelpt_build_config(&pmu, &req, &f, &config));
	CHECK_EQ_U64(config, 1ULL | 1ULL << 1 | 1ULL << 9 | 1ULL << 10 | 1ULL << 11 | 1ULL << 13 |
				     6ULL << 14 | 2ULL << 19 | 5ULL << 24);
	CHECK(f.cyc && f.noretcomp);
	CHECK_EQ_U64(f.cyc_thresh, 2);
	CHECK_STR(ht_pt_fields_format(&f, text, sizeof(text)),
		  "tsc,mtc,mtc_period=6,psb_period=5,cyc,cyc_thresh=2,noretcomp,pt,branch");
	/* Zero is always allowed, as the kernel allows it. */
	req.mtc_period = 0;
	CHECK(!ht_intelpt_build_config(&pmu, &req, &f, &config));
	CHECK(f.mtc && f.mtc_period == 0);
}

TEST(values_outside_the_caps_are_refused_clearly)
{
	struct ht_intelpt_request req;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields f;
	char dir[PATH_MAX];
	const char *sys = fake_tree(dir, sizeof(dir));
	uint64_t config = 77;

	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	ht_intelpt_request_default(&req);
	req.mtc_period = 5;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK_STR(ht_last_error(), "mtc_period=5 is not supported by this CPU's Intel PT "
				   "(caps/mtc_periods allows 0,3,6,9)");
	CHECK_EQ_U64(config, 0);
	req.mtc_period = 16;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK_STR(ht_last_error(), "mtc_period=16 is out of range: format/mtc_period holds 0-15");
	ht_intelpt_request_default(&req);
	req.psb_period = 6;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK_STR(ht_last_error(), "psb_period=6 is not supported by this CPU's Intel PT "
				   "(caps/psb_periods allows 0-5)");
	ht_intelpt_request_default(&req);
	req.fine_timing = true;
	req.cyc_thresh = 14;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "cyc_thresh=14 is not supported") &&
	      has(ht_last_error(), "allows 0-13"));
	ht_intelpt_request_default(&req);
	req.cyc_thresh = 1;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "needs fine timing"));
}

TEST(missing_capabilities_are_named)
{
	struct ht_intelpt_request req;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields f;
	char dir[PATH_MAX];
	const char *sys = fake_tree(dir, sizeof(dir));
	uint64_t config;

	put_file(dir, "caps/mtc", "0");
	put_file(dir, "caps/psb_cyc", NULL);
	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	ht_intelpt_request_default(&req);
	/* By default what the CPU lacks is left out, as perf does. */
	CHECK(!ht_intelpt_build_config(&pmu, &req, &f, &config));
	CHECK_EQ_U64(config, 1ULL | 1ULL << 10 | 1ULL << 13);
	req.mtc_period = 3;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "no MTC packets (caps/mtc"));
	ht_intelpt_request_default(&req);
	req.fine_timing = true;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "CYC packets") && has(ht_last_error(), "caps/psb_cyc"));
	ht_intelpt_request_default(&req);
	req.psb_period = 2;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "caps/psb_cyc"));
}

TEST(missing_format_terms_are_named)
{
	struct ht_intelpt_request req;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields f;
	char dir[PATH_MAX];
	const char *sys = fake_tree(dir, sizeof(dir));
	uint64_t config;

	put_file(dir, "format/branch", NULL);
	put_file(dir, "format/noretcomp", NULL);
	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	ht_intelpt_request_default(&req);
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK_STR(ht_last_error(),
		  "this kernel's intel_pt has no 'branch' config term (format/branch is missing)");
	put_file(dir, "format/branch", "config:13");
	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	req.noretcomp = true;
	CHECK(ht_intelpt_build_config(&pmu, &req, &f, &config) == -1);
	CHECK(has(ht_last_error(), "format/noretcomp is missing"));
}

TEST(missing_files_and_trees)
{
	struct ht_intelpt_pmu pmu;
	char dir[PATH_MAX];
	const char *sys = fake_tree(dir, sizeof(dir));
	char none[PATH_MAX + 16];

	put_file(dir, "type", NULL);
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "/type") && has(ht_last_error(), "No such file"));
	snprintf(none, sizeof(none), "%s/nothing", root);
	CHECK(ht_intelpt_pmu_read(none, &pmu) == -1);
	CHECK(has(ht_last_error(), "no Intel PT on this machine"));
	/* Values the decoder wants are optional. */
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "max_nonturbo_ratio", NULL);
	put_file(dir, "tsc_art_ratio", NULL);
	CHECK(!ht_intelpt_pmu_read(sys, &pmu));
	CHECK(!pmu.has_max_nonturbo_ratio && !pmu.has_tsc_art_ratio);
}

TEST(malformed_files_are_named)
{
	static const char *const bad_formats[] = {
		"config:a-b", "config:17-14", "config:60-64", "config1:0",
		"config:",    "config:3-",    "config:1,x",   "",
	};
	struct ht_intelpt_pmu pmu;
	char dir[PATH_MAX];
	const char *sys;

	for (size_t i = 0; i < sizeof(bad_formats) / sizeof(bad_formats[0]); i++) {
		sys = fake_tree(dir, sizeof(dir));
		put_file(dir, "format/mtc_period", bad_formats[i]);
		CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
		CHECK(has(ht_last_error(), "intel_pt format/mtc_period: "));
	}
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "caps/mtc_periods", "zz");
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "caps/mtc_periods: \"zz\""));
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "caps/mtc", "2");
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "caps/mtc: \"2\""));
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "type", "-1");
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "malformed"));
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "tsc_art_ratio", "188");
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "tsc_art_ratio"));
	sys = fake_tree(dir, sizeof(dir));
	put_file(dir, "max_nonturbo_ratio", "4000");
	CHECK(ht_intelpt_pmu_read(sys, &pmu) == -1);
	CHECK(has(ht_last_error(), "max_nonturbo_ratio"));
}

TEST(format_ranges_scatter_and_gather)
{
	uint64_t mask = 0, config = 0xff00000000000000ULL;

	CHECK(!ht_pt_format_parse("config:0-1,4-5", &mask));
	CHECK_EQ_U64(mask, 0x33);
	CHECK(!ht_pt_term_put(mask, 0xb, &config)); /* 1011 -> bits 0,1 and 5 */
	CHECK_EQ_U64(config, 0xff00000000000023ULL);
	CHECK_EQ_U64(ht_pt_term_get(mask, config), 0xb);
	CHECK(ht_pt_term_put(mask, 16, &config) == -1);
	CHECK(!ht_pt_format_parse("config:63", &mask));
	CHECK_EQ_U64(mask, 1ULL << 63);
	CHECK(!ht_pt_format_parse("config:0-63", &mask));
	CHECK_EQ_U64(mask, UINT64_MAX);
	config = 0;
	CHECK(!ht_pt_term_put(mask, UINT64_MAX, &config));
	CHECK_EQ_U64(config, UINT64_MAX);
	CHECK(ht_pt_term_put(0, 1, &config) == -1);
}

TEST(attrs_field_by_field)
{
	struct perf_event_attr a, zero;
	struct ht_intelpt_pmu pmu;

	memset(&pmu, 0, sizeof(pmu));
	pmu.type = 8;
	ht_intelpt_pt_attr(&pmu, 0x3012601, &a);
	CHECK_EQ_U64(a.type, 8);
	CHECK_EQ_U64(a.size, sizeof(a));
	CHECK_EQ_U64(a.config, 0x3012601);
	CHECK(a.inherit && a.exclude_kernel && a.exclude_hv && a.sample_id_all);
	CHECK(!a.disabled && !a.exclude_user && !a.write_backward && !a.use_clockid);
	CHECK(!a.mmap && !a.comm && !a.context_switch && !a.freq);
	CHECK_EQ_U64(a.sample_period, 0);
	CHECK_EQ_U64(ht_attr_aux_action(&a), 0);

	ht_intelpt_sideband_attr(&a);
	CHECK_EQ_U64(a.type, PERF_TYPE_SOFTWARE);
	CHECK_EQ_U64(a.config, PERF_COUNT_SW_DUMMY);
	CHECK(a.inherit && a.mmap2 && a.comm && a.comm_exec && a.task && a.context_switch);
	CHECK(a.sample_id_all && a.use_clockid && a.write_backward);
	CHECK_EQ_U64(a.clockid, CLOCK_MONOTONIC);
	CHECK_EQ_U64(a.sample_type, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU);
	CHECK(a.exclude_kernel && !a.exclude_user && !a.disabled);
	CHECK_EQ_U64(a.sample_period, 0);

	/* aux_action: the word after aux_sample_size, nothing else touched. */
	memset(&a, 0, sizeof(a));
	memset(&zero, 0, sizeof(zero));
	ht_attr_set_aux_action(&a, HT_AUX_START_PAUSED | HT_AUX_RESUME);
	CHECK_EQ_U64(ht_attr_aux_action(&a), 5);
	CHECK_EQ_U64(((const uint8_t *)&a)[116], 5);
	CHECK(!memcmp(&a, &zero, 116));
	CHECK(!memcmp((const uint8_t *)&a + 120, (const uint8_t *)&zero + 120, sizeof(a) - 120));
	CHECK_EQ_U64(a.aux_sample_size, 0);
	CHECK_EQ_U64(a.sig_data, 0);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7) | 1; /* never zero */
}

TEST(ring_rotation_from_aux_head)
{
	enum { SIZE = 4096 };
	uint8_t *area = calloc(1, SIZE), *out = malloc(SIZE), *want = malloc(SIZE);

	/* Never wrapped: written from 0 to head; the zeros after head are the oldest end. */
	fill(area, 1000, 3);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 1000, out), 1000);
	CHECK(!memcmp(out, area, 1000));
	/* Wrapped: oldest at head. */
	fill(area, SIZE, 5);
	memcpy(want, area + 3000, SIZE - 3000);
	memcpy(want + SIZE - 3000, area, 3000);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 3000, out), SIZE);
	CHECK(!memcmp(out, want, SIZE));
	/* aux_head is taken modulo the size. */
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 3000 + 5 * SIZE, out), SIZE);
	CHECK(!memcmp(out, want, SIZE));
	/* PADs inside the data stay: only the oldest end's zeros go. */
	memset(area + 100, 0, 50);
	memset(area + 3500, 0, 8);
	memcpy(want, area + 3000, SIZE - 3000);
	memcpy(want + SIZE - 3000, area, 3000);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 3000, out), SIZE);
	CHECK(!memcmp(out, want, SIZE));
	/* Zeros at head that run across the end of the area. */
	fill(area, SIZE, 9);
	memset(area + 4000, 0, 96);
	memset(area, 0, 10);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 4000, out), SIZE - 106);
	CHECK(!memcmp(out, area + 10, 3990));
	/* Head at 0 and at the end. */
	fill(area, SIZE, 1);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 0, out), SIZE);
	CHECK(!memcmp(out, area, SIZE));
	/* Nothing ever written. */
	memset(area, 0, SIZE);
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, SIZE, 1234, out), 0);
	/* Not a power of two: nothing. */
	CHECK_EQ_U64(ht_intelpt_ring_copy(area, 3000, 0, out), 0);
	free(area);
	free(out);
	free(want);
}

/* A record as the kernel writes it: header, body, sample_id (pid, tid, time, cpu). */
static size_t make_record(uint8_t *p, uint32_t type, uint16_t misc, const void *body,
			  size_t body_len, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu)
{
	struct perf_event_header h = {type, misc, (uint16_t)(8 + ((body_len + 7) & ~7UL) + 24)};
	uint32_t ids[2] = {pid, tid}, cpus[2] = {cpu, 0};

	memset(p, 0, h.size);
	memcpy(p, &h, 8);
	if (body_len)
		memcpy(p + 8, body, body_len);
	memcpy(p + h.size - 24, ids, 8);
	memcpy(p + h.size - 16, &time, 8);
	memcpy(p + h.size - 8, cpus, 8);
	return h.size;
}

/* Write records backward into RING from *HEAD, as write_backward does. */
static void write_backward(uint8_t *ring, size_t size, uint64_t *head, const uint8_t *rec,
			   size_t len)
{
	*head -= len;
	for (size_t i = 0; i < len; i++)
		ring[(*head + i) & (size - 1)] = rec[i];
}

TEST(backward_sideband_ring_read_oldest_first)
{
	enum { SIZE = 512 };
	uint8_t *ring = calloc(1, SIZE), rec[128], *lin;
	uint64_t head = 0;
	struct ht_sb_set set;
	size_t len, n;

	/* 20 switch records of 32 bytes: 640 bytes into 512, so the oldest are gone. */
	for (int i = 0; i < 20; i++) {
		n = make_record(rec, PERF_RECORD_SWITCH, i & 1 ? PERF_RECORD_MISC_SWITCH_OUT : 0,
				NULL, 0, 100, 100 + (uint32_t)i, 1000 + (uint64_t)i, 1);
		write_backward(ring, SIZE, &head, rec, n);
	}
	CHECK(!ht_perf_backward_linearize(ring, SIZE, head, &lin, &len));
	CHECK_EQ_U64(len, 512);
	memset(&set, 0, sizeof(set));
	CHECK(!ht_sb_parse(lin, len, HT_INTELPT_SIDEBAND_SAMPLE_TYPE, &set));
	CHECK_EQ_U64(set.count, 16);
	CHECK_EQ_U64(set.malformed, 0);
	for (size_t i = 0; i < set.count; i++) {
		CHECK_EQ_U64(set.v[i].time_ns, 1004 + i);
		CHECK_EQ_U64(set.v[i].tid, 104 + i);
		CHECK_EQ_U64(set.v[i].kind, (i & 1) ? HT_SB_SWITCH_OUT : HT_SB_SWITCH_IN);
		CHECK_EQ_U64(set.v[i].cpu, 1);
	}
	ht_sb_set_free(&set);
	free(lin);
	/* A record torn by the overwrite at the oldest end is left out. */
	memset(ring, 0, SIZE);
	head = 0;
	for (int i = 0; i < 5; i++) {
		n = make_record(rec, PERF_RECORD_SWITCH, 0, NULL, 0, 1, 1, (uint64_t)i, 0);
		write_backward(ring, SIZE, &head, rec, n);
	}
	CHECK(!ht_perf_backward_linearize(ring, SIZE, head, &lin, &len));
	CHECK_EQ_U64(len, 5 * 32);
	free(lin);
	/* Not a power of two. */
	CHECK(ht_perf_backward_linearize(ring, 500, 0, &lin, &len) == -1);
	free(ring);
}

static struct ht_clock_pair pair(uint64_t tsc, uint64_t mono)
{
	return (struct ht_clock_pair){.tsc = tsc, .mono_ns = mono, .spread_ns = 40};
}

TEST(tsc_to_monotonic_on_synthetic_pairs)
{
	struct ht_clock_pair p[4];
	struct ht_tsc_map m;

	/* 3 GHz TSC. */
	p[0] = pair(3000000000ULL, 1000000000ULL);
	p[1] = pair(6000000000ULL, 2000000000ULL);
	CHECK(!ht_tsc_map_init(&m, p, 2, 0));
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 4500000000ULL), 1500000000ULL);
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 3000000000ULL), 1000000000ULL);
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 9000000000ULL), 3000000000ULL); /* after */
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 2999999997ULL), 999999999ULL);	/* before */
	ht_tsc_map_free(&m);
	/* Before the first pair and before time 0: clamped. */
	p[0] = pair(3000000000ULL, 1000);
	CHECK(!ht_tsc_map_init(&m, p, 2, 0));
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 3), 0);
	ht_tsc_map_free(&m);
	/* Piecewise: each interval has its own rate; order of pairs does not matter. */
	p[0] = pair(2000, 2000);
	p[1] = pair(1000, 1000);
	p[2] = pair(4000, 2500);
	CHECK(!ht_tsc_map_init(&m, p, 3, 0));
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 1500), 1500);
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 3000), 2250);
	ht_tsc_map_free(&m);
	/* A duplicate TSC and a pair whose time goes back are dropped. */
	p[0] = pair(1000, 1000);
	p[1] = pair(1000, 1003);
	p[2] = pair(2000, 900);
	p[3] = pair(3000, 3000);
	CHECK(!ht_tsc_map_init(&m, p, 4, 0));
	CHECK_EQ_U64(m.n, 2);
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 2000), 2000);
	ht_tsc_map_free(&m);
	/* One pair: the rate must come from elsewhere. */
	p[0] = pair(1000000, 5000000000ULL);
	CHECK(ht_tsc_map_init(&m, p, 1, 0) == -1);
	CHECK(has(ht_last_error(), "no TSC frequency"));
	CHECK(!ht_tsc_map_init(&m, p, 1, 2000000000ULL));
	CHECK_EQ_U64(ht_tsc_to_mono(&m, 3000000), 5001000000ULL); /* 2M ticks at 2 GHz */
	ht_tsc_map_free(&m);
	CHECK(ht_tsc_map_init(&m, p, 0, 1) == -1);
	/* Huge spans do not overflow. */
	p[0] = pair(0, 0);
	p[1] = pair(UINT64_MAX / 2, UINT64_MAX / 4);
	CHECK(!ht_tsc_map_init(&m, p, 2, 0));
	CHECK_EQ_U64(ht_tsc_to_mono(&m, UINT64_MAX / 4), UINT64_MAX / 8);
	CHECK_EQ_U64(ht_tsc_to_mono(&m, UINT64_MAX), UINT64_MAX / 2 - 1);
	ht_tsc_map_free(&m);
}

TEST(clock_pairs_are_tight_and_ordered)
{
	struct ht_clock_pair a, b;
	struct timespec ts;
	uint64_t now;

	ht_clock_pair_take(&a, 16, HT_CLOCK_AT_ATTACH);
	usleep(2000);
	ht_clock_pair_take(&b, 16, HT_CLOCK_AT_FREEZE);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	CHECK(a.tsc && b.tsc > a.tsc);
	CHECK(b.mono_ns > a.mono_ns + 2000000 && b.mono_ns <= now);
	CHECK(a.spread_ns < 1000000 && b.spread_ns < 1000000);
	CHECK_EQ_U64(a.when, HT_CLOCK_AT_ATTACH);
	CHECK_EQ_U64(b.when, HT_CLOCK_AT_FREEZE);
}

TEST(cpuid_fields)
{
	struct ht_cpuid_values c;
	unsigned int fam, model, step;

	ht_cpuid_read(&c);
	CHECK(strlen(c.vendor) == 12);
	CHECK(c.max_leaf >= 1 && c.leaf1[0]);
	/* A Skylake client: family 6, model 0x5e, stepping 3. */
	ht_cpuid_family_model(0x000506e3, &fam, &model, &step);
	CHECK(fam == 6 && model == 0x5e && step == 3);
	/* An AMD Zen 3: family 0x19. */
	ht_cpuid_family_model(0x00a00f11, &fam, &model, &step);
	CHECK(fam == 0x19 && model == 0x01 && step == 1);
	c.max_leaf = 0x15;
	c.leaf15[0] = 2;
	c.leaf15[1] = 188;
	c.leaf15[2] = 24000000;
	CHECK_EQ_U64(ht_cpuid_tsc_hz(&c), 2256000000ULL);
	c.leaf15[2] = 0;
	CHECK_EQ_U64(ht_cpuid_tsc_hz(&c), 0);
}

static bool machine_has_pt(void)
{
	return access("/sys/bus/event_source/devices/intel_pt", F_OK) == 0;
}

TEST(open_without_pt_says_so)
{
	struct ht_intelpt_config cfg = {.tgid = getpid()};
	struct ht_intelpt pt;

	if (machine_has_pt())
		SKIP_TEST("this machine has Intel PT (the hardware test covers it)");
	ht_intelpt_request_default(&cfg.request);
	CHECK(ht_intelpt_open(&pt, &cfg) == -1);
	CHECK(has(ht_last_error(), "no Intel PT on this machine"));
	CHECK(!pt.open);
}

TEST(open_on_a_fake_tree_fails_cleanly)
{
	struct ht_intelpt_config cfg = {.tgid = getpid()};
	struct ht_intelpt pt;
	char dir[PATH_MAX];
	size_t fds = ht_count_dir_entries("/proc/self/fd");

	cfg.sysroot = fake_tree(dir, sizeof(dir));
	ht_intelpt_request_default(&cfg.request);
	cfg.aux_bytes = 3 << 20;
	CHECK(ht_intelpt_open(&pt, &cfg) == -1);
	CHECK(has(ht_last_error(), "--pt-size must be a power of two"));
	cfg.aux_bytes = 4 << 20;
	cfg.memory_budget_bytes = 1 << 20;
	CHECK(ht_intelpt_open(&pt, &cfg) == -1);
	CHECK(has(ht_last_error(), "more than the memory budget of 1M"));
	cfg.memory_budget_bytes = 0;
	cfg.request.mtc_period = 7;
	CHECK(ht_intelpt_open(&pt, &cfg) == -1);
	CHECK(has(ht_last_error(), "mtc_period=7 is not supported"));
	cfg.request.mtc_period = -1;
	/* The kernel knows no PMU of that type: a clean error, nothing left open. */
	CHECK(ht_intelpt_open(&pt, &cfg) == -1);
	CHECK(has(ht_last_error(), "cannot open"));
	CHECK(!pt.open);
	CHECK_EQ_U64(ht_count_dir_entries("/proc/self/fd"), fds);
}

static bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	uname(&u);
	sscanf(u.release, "%d.%d", &ma, &mi);
	return ma > major || (ma == major && mi >= minor);
}

TEST(probe_reports_presence_and_aux_pause)
{
	struct ht_intelpt_info info;
	char dir[PATH_MAX];
	const char *sys = fake_tree(dir, sizeof(dir));

	CHECK(!ht_intelpt_probe(NULL, &info));
	if (!machine_has_pt()) {
		CHECK(!info.present);
		CHECK(has(info.why, "no Intel PT on this machine"));
		if (info.aux_pause != HT_AUX_PAUSE_UNKNOWN) {
			CHECK(info.kernel_aux_action == kernel_at_least(6, 13));
			CHECK(info.aux_pause == (kernel_at_least(6, 13) ? HT_AUX_PAUSE_NO_PMU
									: HT_AUX_PAUSE_NO_KERNEL));
		}
	}
	CHECK(!ht_intelpt_probe(sys, &info));
	CHECK(info.present);
	CHECK_EQ_U64(info.pmu.type, 4242);
	CHECK_STR(info.default_config, "tsc,mtc,mtc_period=3,psb_period=3,pt,branch");
	CHECK(has(info.why, "type 4242; mtc yes (periods 0,3,6,9)"));
	if (info.kernel_aux_action) /* the fake PMU cannot be opened to ask */
		CHECK(info.aux_pause == HT_AUX_PAUSE_UNKNOWN && has(info.aux_pause_why, "cannot"));
}

/* ---- the real sideband, on a child that starts a thread after attach ---- */

static int report_fd;

static void *late_thread(void *arg)
{
	pid_t tid = gettid();
	int fd = open("/bin/true", O_RDONLY);
	void *p = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) : NULL;

	(void)arg;
	for (int i = 0; i < 20; i++)
		usleep(500);
	if (write(report_fd, &tid, sizeof(tid)) != sizeof(tid))
		_exit(3);
	for (;;)
		pause();
	return p;
}

static void child(int go, int report)
{
	pthread_t th;
	char c;

	report_fd = report;
	if (read(go, &c, 1) != 1)
		_exit(2);
	pthread_create(&th, NULL, late_thread, NULL);
	for (;;)
		pause();
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

TEST(sideband_follows_a_thread_born_after_attach)
{
	struct ht_intelpt_config cfg = {0};
	struct ht_intelpt pt;
	struct ht_rawcap cap;
	struct ht_sb_set set;
	int go[2], rep[2];
	struct pollfd pfd;
	pid_t pid, tid = 0;
	uint64_t t_attach, trigger;
	bool switched_out = false, switched_in = false, mapped = false, lib_id = false;

	if (pipe(go) || pipe(rep))
		SKIP_TEST("no pipes");
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(rep[0]);
		child(go[0], rep[1]);
	}
	close(go[0]);
	close(rep[1]);
	cfg.tgid = pid;
	cfg.sideband_only = true;
	cfg.sideband_bytes = 64 << 10;
	t_attach = mono_now();
	if (ht_intelpt_open(&pt, &cfg)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if ((has(ht_last_error(), "needs root") || has(ht_last_error(), "ermission")) &&
		    !ci())
			SKIP_TEST("perf events need root or CAP_PERFMON");
		CHECK(!"open");
		printf("     %s\n", ht_last_error());
		return;
	}
	CHECK(write(go[1], "g", 1) == 1);
	pfd = (struct pollfd){.fd = rep[0], .events = POLLIN};
	CHECK(poll(&pfd, 1, 10000) == 1 && read(rep[0], &tid, sizeof(tid)) == sizeof(tid));
	usleep(2000);
	trigger = mono_now();
	CHECK(!ht_intelpt_freeze(&pt, trigger, &cap));
	CHECK(cap.nsidebands >= 1);
	/* No PT event, no AUX area: the capture says so, and its dumps will. */
	CHECK(ht_rawcap_sideband_only(&cap) && cap.nstreams == 0);
	memset(&set, 0, sizeof(set));
	for (size_t i = 0; i < cap.nsidebands; i++)
		CHECK(!ht_sb_parse(cap.sidebands[i].data, cap.sidebands[i].len,
				   cap.pt.sideband_sample_type, &set));
	CHECK_EQ_U64(set.malformed, 0);
	for (size_t i = 0; i < set.count; i++) {
		const struct ht_sb_event *e = &set.v[i];

		CHECK(e->time_ns >= t_attach && e->time_ns <= trigger + 1000000000ULL);
		if (e->tid != (uint32_t)tid)
			continue;
		CHECK_EQ_U64(e->pid, pid);
		switched_out |= e->kind == HT_SB_SWITCH_OUT;
		switched_in |= e->kind == HT_SB_SWITCH_IN;
		if (e->kind == HT_SB_MMAP && ends_with(ht_sb_string(&set, e), "/true")) {
			mapped = true;
			CHECK(e->prot & PROT_EXEC);
			CHECK_EQ_U64(e->len, 4096);
		}
	}
	CHECK(switched_out && switched_in && mapped);
	/* Mappings at attach and now; the late mapping only now; build-ids of libraries. */
	CHECK_EQ_U64(cap.nmaps, 2);
	for (size_t m = 0; m < cap.nmaps; m++) {
		bool has_true = false;

		for (size_t i = 0; i < cap.maps[m].count; i++) {
			const struct ht_rawcap_mapping *x = &cap.maps[m].v[i];

			CHECK(x->perms[2] == 'x');
			has_true |= ends_with(x->path, "/true");
			if (has(x->path, "libc.so")) {
				lib_id = x->build_id && strlen(x->build_id) == 40;
			}
		}
		CHECK(has_true == (m == 1));
	}
	CHECK(lib_id);
	CHECK(cap.vdso_len >= 4096 && !memcmp(cap.vdso, "\177ELF", 4));
	CHECK_EQ_U64(cap.nclocks, 2);
	CHECK(cap.clocks[1].tsc > cap.clocks[0].tsc);
	CHECK(cap.clocks[1].mono_ns > cap.clocks[0].mono_ns);
	CHECK(cap.freeze_first_ns <= cap.freeze_last_ns);
	CHECK(cap.freeze_last_ns < 1000000000ULL);
	CHECK_EQ_U64(cap.pid, pid);
	CHECK_EQ_U64(cap.trigger_ns, trigger);
	CHECK(cap.snap_real_ns > cap.snap_mono_ns);
	ht_sb_set_free(&set);
	ht_rawcap_free(&cap);
	ht_intelpt_reap(&pt);
	ht_intelpt_close(&pt);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(go[1]);
	close(rep[0]);
}

/* ---- real Intel PT ---- */

static volatile int spin_sink;

static void spin_child(void)
{
	for (;;)
		for (int i = 0; i < 1000; i++)
			spin_sink += i & 3 ? i : -i;
}

/* A PSB packet: 02 82 repeated eight times. */
static bool has_psb(const uint8_t *p, size_t n)
{
	static const uint8_t psb[16] = {2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
					2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82};

	return n >= 16 && memmem(p, n, psb, 16) != NULL;
}

TEST(real_pt_capture)
{
	struct ht_intelpt_config cfg = {0};
	struct ht_intelpt pt;
	struct ht_rawcap cap;
	bool psb = false;
	pid_t pid;

	if (!machine_has_pt())
		SKIP_TEST("no Intel PT on this machine");
	pid = fork();
	if (pid == 0)
		spin_child();
	cfg.tgid = pid;
	ht_intelpt_request_default(&cfg.request);
	cfg.aux_bytes = 1 << 20;
	if (ht_intelpt_open(&pt, &cfg)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (has(ht_last_error(), "needs root") && !ci())
			SKIP_TEST("perf events need root or CAP_PERFMON");
		CHECK(!"open");
		printf("     %s\n", ht_last_error());
		return;
	}
	usleep(200000);
	CHECK(!ht_intelpt_freeze(&pt, mono_now(), &cap));
	CHECK(cap.nstreams >= 1);
	for (size_t i = 0; i < cap.nstreams; i++) {
		CHECK(cap.streams[i].len <= cap.streams[i].ring_bytes);
		psb |= has_psb(cap.streams[i].data, cap.streams[i].len);
	}
	CHECK(psb);
	CHECK(!ht_rawcap_sideband_only(&cap));
	CHECK(cap.pt.fields.pt && cap.pt.fields.branch && cap.pt.fields.tsc);
	CHECK(!strcmp(cap.cpuid.vendor, "GenuineIntel"));
	ht_rawcap_free(&cap);
	ht_intelpt_close(&pt);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * Events per CPU for a cgroup where the kernel takes no cgroup events for its
 * directory (here a directory that is no cgroup; on a machine whose
 * perf_event controller is bound to cgroup v1, a v2 one): events for every
 * task instead, and a capture that holds other tasks' records, not a failure.
 */
TEST(cpu_wide_without_cgroup_events_takes_every_task)
{
	struct ht_intelpt_config cfg = {
		.cpu_wide = true,
		.cgroup_path = "/tmp",
		.targets_all = true,
		.self_tgid = getpid(),
		.sideband_only = true,
		.sideband_bytes = 64 << 10,
	};
	struct ht_intelpt pt;
	struct ht_rawcap cap;
	struct ht_sb_set set;
	bool others = false;

	REQUIRE_ROOT();
	ht_intelpt_request_default(&cfg.request);
	if (ht_intelpt_open(&pt, &cfg)) {
		printf("     %s\n", ht_last_error());
		CHECK(!"open");
		return;
	}
	usleep(20000);
	CHECK(!ht_intelpt_freeze(&pt, mono_now(), &cap));
	memset(&set, 0, sizeof(set));
	for (size_t i = 0; i < cap.nsidebands; i++)
		CHECK(!ht_sb_parse(cap.sidebands[i].data, cap.sidebands[i].len,
				   cap.pt.sideband_sample_type, &set));
	for (size_t i = 0; i < set.count; i++)
		others |= set.v[i].pid != (uint32_t)getpid() && set.v[i].pid != 0;
	CHECK(others);
	ht_sb_set_free(&set);
	ht_rawcap_free(&cap);
	ht_intelpt_close(&pt);
}
