// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The raw capture file: a full round trip, versions (an older minor, a
 * newer minor with unknown sections, a newer major refused), and every kind
 * of bad input (truncated at every byte, corrupted, lengths and counts that
 * lie, sections missing, doubled or trailing). The task names it carries
 * (COMMS) and the offline comm cache they seed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "check.h"
#include "programs.h"
#include "kernel/comm_cache.h"
#include "base/log.h"
#include "base/proc.h"
#include "sources/intelpt/rawcap.h"

static char dir[64];

static bool has(const char *haystack, const char *needle)
{
	return strstr(haystack, needle) != NULL;
}

static uint8_t *bytes(size_t n, uint8_t seed)
{
	uint8_t *p = malloc(n);

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 17 + (i >> 8));
	return p;
}

static char *sdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static struct ht_fr_event fr(uint64_t ts, uint8_t kind, uint32_t a, uint32_t b, unsigned int cpu)
{
	struct ht_fr_event e;

	memset(&e, 0, sizeof(e));
	e.rec.ts_ns = ts;
	e.rec.seq = (uint32_t)ts ^ 0x5a5a;
	e.rec.kind = kind;
	e.rec.flags = HT_FRF_PREEMPT | HT_FRF_NEXT_TARGET;
	e.rec.aux = 0xbeef;
	e.rec.tid_a = a;
	e.rec.tid_b = b;
	e.rec.arg = ts * 3 + 0x8000000000000000ULL;
	e.cpu = cpu;
	return e;
}

/* A capture with every part filled, sizes given. */
static void make_full(struct ht_rawcap *c, size_t pt_len)
{
	memset(c, 0, sizeof(*c));
	c->pid = 4321;
	strcpy(c->comm, "demo_service");
	strcpy(c->kind, "rq-delay");
	strcpy(c->version, "0.1.0");
	c->threshold_ns = 1000000;
	c->start_ns = 5000000000ULL;
	c->end_ns = 5004000000ULL;
	c->pre_ns = 20000000;
	c->post_ns = 2000000;
	c->trigger_ns = 5006000000ULL;
	c->freeze_first_ns = 12000;
	c->freeze_last_ns = 45000;
	c->snap_mono_ns = 5006100000ULL;
	c->snap_boot_ns = 5106100000ULL;
	c->snap_real_ns = 1700000000000000000ULL;
	c->has_breach = true;
	c->breach.start_ns = c->start_ns;
	c->breach.end_ns = c->end_ns;
	c->breach.wake_ns = c->start_ns + 5;
	c->breach.syscall_ret = -11;
	c->breach.kind = HT_BREACH_RQ_DELAY;
	c->breach.tid = 4322;
	c->breach.tgid = 4321;
	c->breach.cpu = 3;
	c->breach.state = 1;
	c->breach.syscall_nr = -1;
	c->breach.wake_source = HT_WAKE_TASK;
	c->breach.waker_tid = 77;
	c->breach.waker_tgid = 77;
	c->breach.wake_cpu = 2;
	c->breach.kstack_bytes = 16;
	c->breach.flags = HT_BRF_JOINED;
	strcpy(c->breach.comm, "worker");
	strcpy(c->breach.waker_comm, "batch_job");
	c->breach.kstack[0] = 0xffffffff81000000ULL;
	c->breach.kstack[31] = 0xffffffff81234567ULL;
	/* 1.3: one wait of both kinds, with the off-CPU interval inside the syscall. */
	c->breach.kinds = 1U << HT_BREACH_OFF_CPU | 1U << HT_BREACH_RQ_DELAY;
	c->breach.off_cpu_waits = 3;
	c->breach.off_cpu_start_ns = c->start_ns + 1;
	c->breach.off_cpu_end_ns = c->end_ns - 1;
	c->breach.off_cpu_threshold_ns = 7000000;
	/* 1.4: a thread of a process in a container, as its own pid namespace numbers them. */
	c->breach.ns_tid = 8;
	c->breach.ns_tgid = 7;
	c->pt.pmu_type = 8;
	c->pt.config = 0x3012601;
	c->pt.fields = (struct ht_pt_fields){1, 1, 1, 1, 1, 1, 3, 2, 3};
	c->pt.aux_bytes = 4 << 20;
	c->pt.sideband_sample_type = 0x86;
	c->pt.has_max_nonturbo_ratio = true;
	c->pt.max_nonturbo_ratio = 40;
	c->pt.has_tsc_art_ratio = true;
	c->pt.tsc_art_num = 188;
	c->pt.tsc_art_den = 2;
	strcpy(c->cpuid.vendor, "GenuineIntel");
	c->cpuid.max_leaf = 0x16;
	for (int i = 0; i < 4; i++) {
		c->cpuid.leaf1[i] = 0x506e3 + (uint32_t)i;
		c->cpuid.leaf14_0[i] = 0x14000 + (uint32_t)i;
		c->cpuid.leaf14_1[i] = 0x14100 + (uint32_t)i;
		c->cpuid.leaf15[i] = 0x15000 + (uint32_t)i;
	}
	c->nclocks = 3;
	c->clocks = calloc(3, sizeof(*c->clocks));
	for (size_t i = 0; i < 3; i++)
		c->clocks[i] = (struct ht_clock_pair){1000000 * (i + 1), 2000 * (i + 1),
						      (uint32_t)(30 + i), (uint32_t)(i ? 2 : 1)};
	c->time_conv = (struct ht_perf_time_conv){true, true, 31, 1234567, 987654321};
	c->nstreams = 2;
	c->streams = calloc(2, sizeof(*c->streams));
	for (size_t i = 0; i < 2; i++) {
		struct ht_rawcap_stream *s = &c->streams[i];

		s->cpu = (uint32_t)i * 2;
		s->tid = i ? -1 : 4322;
		s->ring_bytes = 4 << 20;
		s->aux_head = 12345 + i;
		s->frozen_ns = 5006000100ULL + i;
		s->len = i ? 0 : pt_len;
		s->data = s->len ? bytes(s->len, (uint8_t)i) : NULL;
	}
	c->nsidebands = 1;
	c->sidebands = calloc(1, sizeof(*c->sidebands));
	c->sidebands[0].cpu = 5;
	c->sidebands[0].frozen_ns = 5006000200ULL;
	c->sidebands[0].len = 96;
	c->sidebands[0].data = bytes(96, 9);
	c->nmaps = 2;
	c->maps = calloc(2, sizeof(*c->maps));
	for (size_t m = 0; m < 2; m++) {
		c->maps[m].pid = 4242 + (int)m; /* 1.5: each process's own */
		c->maps[m].taken_ns = 100 + m;
		c->maps[m].count = 2 + m;
		c->maps[m].v = calloc(c->maps[m].count, sizeof(struct ht_rawcap_mapping));
		for (size_t i = 0; i < c->maps[m].count; i++) {
			struct ht_rawcap_mapping *x = &c->maps[m].v[i];

			x->start = 0x400000 + 0x10000 * i;
			x->end = x->start + 0x1000;
			x->offset = 0x1000 * i;
			strcpy(x->perms, "r-xp");
			x->path = sdup(i == 2 ? "[vdso]" : "/usr/lib/x86_64-linux-gnu/libc.so.6");
			x->build_id = sdup(i ? NULL : "0123456789abcdef0123456789abcdef01234567");
		}
	}
	c->vdso_addr = 0x7fff0000;
	c->vdso_len = 8192;
	c->vdso = bytes(8192, 7);
	c->has_window = true;
	c->window.t0 = 4980000000ULL;
	c->window.t1 = 5006000000ULL;
	c->window.clipped = true;
	c->window.covered_from_ns = 4990000000ULL;
	c->window.skipped_records = 3;
	c->window.count = 5;
	c->window.events = calloc(5, sizeof(struct ht_fr_event));
	for (size_t i = 0; i < 5; i++)
		c->window.events[i] = fr(4990000000ULL + i, (uint8_t)(1 + i), 10 + (uint32_t)i,
					 20 + (uint32_t)i, (unsigned int)i % 4);
	c->window.ncpus = 4;
	c->window.entry_switch = calloc(4, sizeof(struct ht_fr_event));
	c->window.entry_valid = calloc(4, sizeof(bool));
	for (unsigned int i = 0; i < 4; i++) {
		c->window.entry_valid[i] = i != 2;
		if (i != 2)
			c->window.entry_switch[i] =
				fr(4900000000ULL + i, HT_FR_SWITCH, i, i + 1, i);
	}
	/* Out of order, a pid twice, two pids a direct-mapped cache would collide. */
	ht_rawcap_add_comm(c, 20, "batch_job");
	ht_rawcap_add_comm(c, 10, "worker");
	ht_rawcap_add_comm(c, 20, "renamed");
	ht_rawcap_add_comm(c, 10 + HT_COMM_CACHE_SLOTS, "collides_w_10");
	ht_rawcap_add_comm(c, 4322, "");
	snprintf(c->kernel, sizeof(c->kernel), "6.18.0-test");
	snprintf(c->cpu_model, sizeof(c->cpu_model), "Intel(R) Xeon(R) Test CPU");
	snprintf(c->cmdline, sizeof(c->cmdline), "hybtrace --pid 4321 --source pt --keep-raw");
	ht_rawcap_add_ksym(c, 0xffffffff81000100ULL, "entry_SYSCALL_64_after_hwframe");
	ht_rawcap_add_ksym(c, 0xffffffffc0001000ULL, "nf_hook [nf_tables]");
	ht_rawcap_add_ksym(c, 0xffffffff81000100ULL, "a second name for one start");
}

static bool fr_eq(const struct ht_fr_event *a, const struct ht_fr_event *b)
{
	return a->rec.ts_ns == b->rec.ts_ns && a->rec.seq == b->rec.seq &&
	       a->rec.kind == b->rec.kind && a->rec.flags == b->rec.flags &&
	       a->rec.aux == b->rec.aux && a->rec.tid_a == b->rec.tid_a &&
	       a->rec.tid_b == b->rec.tid_b && a->rec.arg == b->rec.arg && a->cpu == b->cpu;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* What 1.2 added: task names, kernel symbols, the machine and the command. */
static void check_same_comms(const struct ht_rawcap *a, const struct ht_rawcap *b)
{
	CHECK_STR(a->kernel, b->kernel);
	CHECK_STR(a->cpu_model, b->cpu_model);
	CHECK_STR(a->cmdline, b->cmdline);
	CHECK_EQ_U64(a->nksyms, b->nksyms);
	for (size_t i = 0; i < a->nksyms && i < b->nksyms; i++) {
		CHECK_EQ_U64(a->ksyms[i].start, b->ksyms[i].start);
		CHECK_STR(a->ksyms[i].name, b->ksyms[i].name);
	}
	CHECK_EQ_U64(a->ncomms, b->ncomms);
	for (size_t i = 0; i < a->ncomms && i < b->ncomms; i++) {
		CHECK_EQ_U64(a->comms[i].pid, b->comms[i].pid);
		CHECK_STR(a->comms[i].comm, b->comms[i].comm);
	}
}

/* Everything but the format version and what older minors lack (CONV: the 1.1 fields). */
static void check_same(const struct ht_rawcap *a, const struct ht_rawcap *b, bool conv)
{
	CHECK_EQ_U64(a->pid, b->pid);
	CHECK_STR(a->comm, b->comm);
	CHECK_STR(a->kind, b->kind);
	CHECK_STR(a->version, b->version);
	CHECK_EQ_U64(a->threshold_ns, b->threshold_ns);
	CHECK_EQ_U64(a->start_ns, b->start_ns);
	CHECK_EQ_U64(a->end_ns, b->end_ns);
	CHECK_EQ_U64(a->pre_ns, b->pre_ns);
	CHECK_EQ_U64(a->post_ns, b->post_ns);
	CHECK_EQ_U64(a->trigger_ns, b->trigger_ns);
	CHECK_EQ_U64(a->freeze_first_ns, b->freeze_first_ns);
	CHECK_EQ_U64(a->freeze_last_ns, b->freeze_last_ns);
	CHECK_EQ_U64(a->snap_mono_ns, b->snap_mono_ns);
	CHECK_EQ_U64(a->snap_boot_ns, b->snap_boot_ns);
	CHECK_EQ_U64(a->snap_real_ns, b->snap_real_ns);
	CHECK(a->has_breach == b->has_breach);
	CHECK(!memcmp(&a->breach, &b->breach, sizeof(a->breach)));
	CHECK(!memcmp(&a->pt, &b->pt, sizeof(a->pt)));
	CHECK(!memcmp(&a->cpuid, &b->cpuid, sizeof(a->cpuid)));
	CHECK_EQ_U64(a->nclocks, b->nclocks);
	for (size_t i = 0; i < a->nclocks && i < b->nclocks; i++)
		CHECK(!memcmp(&a->clocks[i], &b->clocks[i], sizeof(a->clocks[i])));
	if (conv)
		CHECK(!memcmp(&a->time_conv, &b->time_conv, sizeof(a->time_conv)));
	CHECK_EQ_U64(a->nstreams, b->nstreams);
	for (size_t i = 0; i < a->nstreams && i < b->nstreams; i++) {
		const struct ht_rawcap_stream *x = &a->streams[i], *y = &b->streams[i];

		CHECK(x->cpu == y->cpu && x->tid == y->tid && x->ring_bytes == y->ring_bytes);
		CHECK(x->aux_head == y->aux_head && x->frozen_ns == y->frozen_ns);
		CHECK_EQ_U64(x->len, y->len);
		CHECK(x->len == y->len && (!x->len || !memcmp(x->data, y->data, x->len)));
	}
	CHECK_EQ_U64(a->nsidebands, b->nsidebands);
	for (size_t i = 0; i < a->nsidebands && i < b->nsidebands; i++) {
		const struct ht_rawcap_sideband *x = &a->sidebands[i], *y = &b->sidebands[i];

		CHECK(x->cpu == y->cpu && x->frozen_ns == y->frozen_ns && x->len == y->len);
		CHECK(x->len == y->len && !memcmp(x->data, y->data, x->len));
	}
	CHECK_EQ_U64(a->nmaps, b->nmaps);
	for (size_t m = 0; m < a->nmaps && m < b->nmaps; m++) {
		/* Before 1.5 a capture held one process's maps: pid 0, the capture's. */
		CHECK_EQ_U64(b->format_minor >= 5 ? a->maps[m].pid : 0, b->maps[m].pid);
		CHECK_EQ_U64(a->maps[m].taken_ns, b->maps[m].taken_ns);
		CHECK_EQ_U64(a->maps[m].count, b->maps[m].count);
		for (size_t i = 0; i < a->maps[m].count && i < b->maps[m].count; i++) {
			const struct ht_rawcap_mapping *x = &a->maps[m].v[i], *y = &b->maps[m].v[i];

			CHECK(x->start == y->start && x->end == y->end && x->offset == y->offset);
			CHECK_STR(x->perms, y->perms);
			CHECK(str_eq(x->path, y->path));
			CHECK(str_eq(x->build_id, y->build_id));
		}
	}
	CHECK_EQ_U64(a->vdso_addr, b->vdso_addr);
	CHECK(a->vdso_len == b->vdso_len && !memcmp(a->vdso, b->vdso, a->vdso_len));
	CHECK(a->has_window == b->has_window);
	CHECK(a->window.t0 == b->window.t0 && a->window.t1 == b->window.t1);
	CHECK(a->window.clipped == b->window.clipped);
	CHECK(a->window.covered_from_ns == b->window.covered_from_ns);
	CHECK(a->window.skipped_records == b->window.skipped_records);
	CHECK_EQ_U64(a->window.count, b->window.count);
	for (size_t i = 0; i < a->window.count && i < b->window.count; i++)
		CHECK(fr_eq(&a->window.events[i], &b->window.events[i]));
	CHECK_EQ_U64(a->window.ncpus, b->window.ncpus);
	for (unsigned int i = 0; i < a->window.ncpus && i < b->window.ncpus; i++) {
		CHECK(a->window.entry_valid[i] == b->window.entry_valid[i]);
		CHECK(fr_eq(&a->window.entry_switch[i], &b->window.entry_switch[i]));
	}
}

/* The whole file in memory. */
static uint8_t *file_bytes(const struct ht_rawcap *c, size_t *len)
{
	char path[PATH_MAX];
	struct stat st;
	uint8_t *p;
	int fd;

	snprintf(path, sizeof(path), "%s/mem.raw", dir);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ht_rawcap_write_fd(fd, c) || fstat(fd, &st))
		return NULL;
	p = malloc((size_t)st.st_size);
	*len = (size_t)pread(fd, p, (size_t)st.st_size, 0);
	close(fd);
	return p;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* Offset of the Nth section with TAG's header, or 0. */
static size_t find_section(const uint8_t *b, size_t len, uint32_t tag, int nth)
{
	size_t at = 16;

	while (at + 16 <= len) {
		uint64_t plen = get64(b + at + 8);

		if (get32(b + at) == tag && nth-- == 0)
			return at;
		if (plen > len - at - 16)
			return 0;
		at += 16 + plen;
	}
	return 0;
}

static void fix_crc(uint8_t *b, size_t at)
{
	uint64_t plen = get64(b + at + 8);

	put32(b + at + 4, (uint32_t)crc32(0, b + at + 16, (uInt)plen));
}

static int read_mem(const uint8_t *b, size_t len, struct ht_rawcap *out, char *err, size_t n)
{
	return ht_rawcap_read_mem(b, len, "x.raw", out, err, n);
}

TEST(round_trip_of_a_full_capture)
{
	struct ht_rawcap c, r;
	char path[PATH_MAX], err[512];
	struct stat st;

	CHECK(!prog_make_dir(dir, sizeof(dir), "/tmp/hybtrace-test-rawcap-XXXXXX"));
	make_full(&c, 100000);
	snprintf(path, sizeof(path), "%s/full" HT_RAWCAP_SUFFIX, dir);
	CHECK(!ht_rawcap_write(path, &c));
	CHECK(!stat(path, &st) && (st.st_mode & 0777) == 0640);
	CHECK(!ht_rawcap_read(path, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.format_major, HT_RAWCAP_MAJOR);
	CHECK_EQ_U64(r.format_minor, HT_RAWCAP_MINOR);
	check_same(&c, &r, true);
	check_same_comms(&c, &r);
	/* It had an AUX area: not a capture of the sideband-only test mode. */
	CHECK(!ht_rawcap_sideband_only(&r));
	ht_rawcap_free(&r);
	/* Never over an existing file. */
	CHECK(ht_rawcap_write(path, &c) == -1);
	CHECK(has(ht_last_error(), "File exists"));
	ht_rawcap_free(&c);
	CHECK(c.streams == NULL && c.nstreams == 0);
}

TEST(an_empty_capture_round_trips)
{
	struct ht_rawcap c, r;
	uint8_t *b;
	size_t len;
	char err[256];

	memset(&c, 0, sizeof(c));
	strcpy(c.kind, "manual");
	b = file_bytes(&c, &len);
	CHECK(b && !read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(r.kind, "manual");
	CHECK(!r.has_breach && !r.has_window && !r.nstreams && !r.nmaps && !r.vdso);
	ht_rawcap_free(&r);
	free(b);
}

TEST(saved_names_never_overwrite)
{
	struct ht_rawcap c;
	char a[PATH_MAX + 64], b[PATH_MAX + 64];

	make_full(&c, 10);
	CHECK(!ht_rawcap_save(dir, "hybtrace-1-x-manual", &c, a, sizeof(a)));
	CHECK(!ht_rawcap_save(dir, "hybtrace-1-x-manual", &c, b, sizeof(b)));
	CHECK(has(a, "/hybtrace-1-x-manual.hybtrace-raw"));
	CHECK(has(b, "/hybtrace-1-x-manual-1.hybtrace-raw"));
	CHECK(ht_rawcap_save("/nonexistent-dir", "x", &c, a, sizeof(a)) == -1);
	ht_rawcap_free(&c);
}

TEST(an_older_minor_is_read)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at;
	uint8_t *b;

	make_full(&c, 64);
	b = file_bytes(&c, &len);
	CHECK(b != NULL);
	/* Format 1.0: CLOCKS ended after its pairs (no mmap-page conversion, 15 bytes). */
	at = find_section(b, len, HT_RAWSEC_CLOCKS, 0);
	CHECK(at != 0);
	put64(b + at + 8, get64(b + at + 8) - 15);
	memmove(b + at + 16 + get64(b + at + 8), b + at + 16 + get64(b + at + 8) + 15,
		len - (at + 16 + get64(b + at + 8) + 15));
	len -= 15;
	fix_crc(b, at);
	b[10] = 0; /* minor */
	CHECK(!read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.format_minor, 0);
	CHECK(!r.time_conv.cap_user_time && !r.time_conv.time_mult);
	check_same(&c, &r, false);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
}

/*
 * Format 1.2: the breach ended at its kernel stack, without what 1.3 added:
 * the flags (a joining thread...), the kinds and the off-CPU interval.
 */
TEST(a_minor_2_breach_without_flags_is_read)
{
	const size_t added = 4 + 4 + 4 + 3 * 8 + 4 + 2 * 4;
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at, end;
	uint8_t *b;

	make_full(&c, 64);
	b = file_bytes(&c, &len);
	CHECK(b != NULL);
	at = find_section(b, len, HT_RAWSEC_BREACH, 0);
	CHECK(at != 0);
	end = at + 16 + get64(b + at + 8);
	put64(b + at + 8, get64(b + at + 8) - added);
	memmove(b + end - added, b + end, len - end);
	len -= added;
	fix_crc(b, at);
	b[10] = 2; /* minor */
	CHECK(!read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.breach.flags, 0);
	CHECK_EQ_U64(r.breach.kinds, 0);
	CHECK_EQ_U64(r.breach.off_cpu_end_ns, 0);
	r.breach.flags = c.breach.flags;
	r.breach.kinds = c.breach.kinds;
	r.breach.off_cpu_waits = c.breach.off_cpu_waits;
	r.breach.off_cpu_start_ns = c.breach.off_cpu_start_ns;
	r.breach.off_cpu_end_ns = c.breach.off_cpu_end_ns;
	r.breach.off_cpu_threshold_ns = c.breach.off_cpu_threshold_ns;
	r.breach.softirq_vec = c.breach.softirq_vec;
	r.breach.ns_tid = c.breach.ns_tid;
	r.breach.ns_tgid = c.breach.ns_tgid;
	check_same(&c, &r, true);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
}

/* Format 1.3: the breach ended at its softirq vector, without its pids in its own namespace. */
TEST(a_minor_3_breach_without_namespace_pids_is_read)
{
	const size_t added = 2 * 4;
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at, end;
	uint8_t *b;

	make_full(&c, 64);
	b = file_bytes(&c, &len);
	CHECK(b != NULL);
	at = find_section(b, len, HT_RAWSEC_BREACH, 0);
	CHECK(at != 0);
	end = at + 16 + get64(b + at + 8);
	put64(b + at + 8, get64(b + at + 8) - added);
	memmove(b + end - added, b + end, len - end);
	len -= added;
	fix_crc(b, at);
	b[10] = 3; /* minor */
	CHECK(!read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.breach.ns_tid, 0);
	CHECK_EQ_U64(r.breach.ns_tgid, 0);
	CHECK_EQ_U64(r.breach.softirq_vec, c.breach.softirq_vec);
	CHECK_EQ_U64(r.breach.off_cpu_threshold_ns, c.breach.off_cpu_threshold_ns);
	r.breach.ns_tid = c.breach.ns_tid;
	r.breach.ns_tgid = c.breach.ns_tgid;
	check_same(&c, &r, true);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
}

TEST(a_newer_minor_with_unknown_sections_is_read)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at, plen, extra = 40, grown = 24;
	uint8_t *b, *n;

	make_full(&c, 64);
	b = file_bytes(&c, &len);
	/* An unknown section right after the header, and META grown by 24 bytes. */
	n = calloc(1, len + 16 + extra + grown);
	memcpy(n, b, 16);
	put32(n + 16, 0x7777);
	put64(n + 24, extra);
	memset(n + 32, 0xab, extra);
	fix_crc(n, 16);
	at = find_section(b, len, HT_RAWSEC_META, 0);
	plen = get64(b + at + 8);
	memcpy(n + 32 + extra, b + 16, at + 16 + plen - 16);
	memset(n + 32 + extra + at + plen, 0xcd, grown);
	memcpy(n + 32 + extra + at + plen + grown, b + at + 16 + plen, len - (at + 16 + plen));
	len += 16 + extra + grown;
	at += 16 + extra;
	put64(n + at + 8, plen + grown);
	fix_crc(n, at);
	/* END counts the sections before it. */
	at = find_section(n, len, HT_RAWSEC_END, 0);
	CHECK(at != 0);
	put32(n + at + 16, get32(n + at + 16) + 1);
	fix_crc(n, at);
	n[10] = 7;
	CHECK(!read_mem(n, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.format_minor, 7);
	check_same(&c, &r, true);
	check_same_comms(&c, &r);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
	free(n);
}

TEST(a_newer_major_is_refused)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len;
	uint8_t *b;

	make_full(&c, 8);
	b = file_bytes(&c, &len);
	b[8] = 2;
	b[10] = 3;
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "x.raw: made by a newer hybtrace (format 2.3); this one reads up to 1.5");
	CHECK(!r.nstreams && !r.maps && !r.clocks && !r.comms);
	ht_rawcap_free(&c);
	free(b);
}

TEST(truncated_at_every_byte)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len;
	uint8_t *b;
	int failed = 0;

	make_full(&c, 300);
	b = file_bytes(&c, &len);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);

		memcpy(copy, b, cut);
		if (read_mem(copy, cut, &r, err, sizeof(err)) != -1 || !err[0] ||
		    (cut >= 16 && !has(err, "truncated")) || r.nstreams || r.window.events ||
		    r.comms)
			failed++;
		free(copy);
	}
	CHECK_EQ_U64(failed, 0);
	CHECK(read_mem(b, 0, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "x.raw: not a hybtrace raw capture (empty file)");
	CHECK(read_mem(b, 12, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "x.raw: truncated in the file header");
	ht_rawcap_free(&c);
	free(b);
}

TEST(corruption_is_caught_by_the_checksums)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len;
	uint8_t *b;
	int missed = 0;

	make_full(&c, 200);
	b = file_bytes(&c, &len);
	/* Flip one bit in every payload byte in turn. */
	for (size_t at = 16; at + 16 <= len;) {
		uint64_t plen = get64(b + at + 8);

		for (size_t i = 0; i < plen; i++) {
			b[at + 16 + i] ^= 0x10;
			if (read_mem(b, len, &r, err, sizeof(err)) != -1 ||
			    !has(err, "checksum mismatch"))
				missed++;
			b[at + 16 + i] ^= 0x10;
		}
		at += 16 + plen;
	}
	CHECK_EQ_U64(missed, 0);
	b[0] = 'X';
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "x.raw: not a hybtrace raw capture (bad magic)");
	ht_rawcap_free(&c);
	free(b);
}

TEST(lengths_and_counts_that_lie)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at;
	uint8_t *b;

	make_full(&c, 200);
	b = file_bytes(&c, &len);
	/* A section length past the end. */
	at = find_section(b, len, HT_RAWSEC_VDSO, 0);
	put64(b + at + 8, 1ULL << 62);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "truncated at byte") && has(err, "the VDSO section claims"));
	free(b);
	/* Counts larger than the payload, with checksums made right: malformed, no allocation. */
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_KWINDOW, 0);
	put64(b + at + 16 + 33, 1ULL << 60);
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed KWINDOW section at byte"));
	free(b);
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_CLOCKS, 0);
	put32(b + at + 16, 0xffffffff);
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed CLOCKS section"));
	free(b);
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_MAPS, 0);
	put32(b + at + 16 + 8, 100000);
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed MAPS section"));
	free(b);
	/* A path length inside a mapping that runs past the section. */
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_MAPS, 0);
	put32(b + at + 16 + 12 + 28, 5000);
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed MAPS section"));
	free(b);
	/* A comm longer than a comm. */
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_META, 0);
	b[at + 16 + 4] = 40;
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed META section"));
	free(b);
	/* A header length past the file. */
	b = file_bytes(&c, &len);
	put32(b + 12, (uint32_t)len + 1);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed file header"));
	free(b);
	ht_rawcap_free(&c);
}

TEST(sections_missing_doubled_or_trailing)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at, plen;
	uint8_t *b, *n;

	make_full(&c, 16);
	b = file_bytes(&c, &len);
	/* Bytes after END. */
	n = malloc(len + 8);
	memcpy(n, b, len);
	memset(n + len, 0, 8);
	CHECK(read_mem(n, len + 8, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "8 bytes after the END section"));
	/* No END. */
	at = find_section(b, len, HT_RAWSEC_END, 0);
	CHECK(read_mem(b, at, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "no END section"));
	/* Two META: the first section repeated. */
	at = find_section(b, len, HT_RAWSEC_META, 0);
	plen = get64(b + at + 8);
	free(n);
	n = malloc(len + 16 + plen);
	memcpy(n, b, 16);
	memcpy(n + 16, b + at, 16 + plen);
	memcpy(n + 32 + plen, b + 16, len - 16);
	CHECK(read_mem(n, len + 16 + plen, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "two META sections"));
	/* No META: turn it into an unknown tag (END's count still holds). */
	put32(b + at, 0x99);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "no META section"));
	/* END's count wrong. */
	put32(b + at, HT_RAWSEC_META);
	at = find_section(b, len, HT_RAWSEC_END, 0);
	put32(b + at + 16, 99);
	fix_crc(b, at);
	CHECK(read_mem(b, len, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "malformed END section"));
	free(n);
	free(b);
	ht_rawcap_free(&c);
}

TEST(files_that_are_not_captures)
{
	struct ht_rawcap r;
	char err[256], path[PATH_MAX];
	FILE *f;

	CHECK(ht_rawcap_read("/nonexistent.raw", &r, err, sizeof(err)) == -1);
	CHECK_STR(err, "/nonexistent.raw: No such file or directory");
	CHECK(ht_rawcap_read(dir, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "not a regular file"));
	snprintf(path, sizeof(path), "%s/empty", dir);
	f = fopen(path, "w");
	if (f)
		fclose(f);
	CHECK(ht_rawcap_read(path, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "not a hybtrace raw capture (empty file)"));
}

TEST(window_copy)
{
	struct ht_rawcap c, d;

	make_full(&c, 1);
	memset(&d, 0, sizeof(d));
	CHECK(!ht_rawcap_set_window(&d, &c.window));
	CHECK(d.has_window && d.window.count == 5 && d.window.ncpus == 4);
	CHECK(d.window.events != c.window.events);
	CHECK(fr_eq(&d.window.events[4], &c.window.events[4]));
	CHECK(!d.window.entry_valid[2] && d.window.entry_valid[3]);
	ht_rawcap_free(&d);
	ht_rawcap_free(&c);
}

/* ---- task names (COMMS) and the comm cache they seed ---- */

/* Drop N bytes at AT from B (*LEN bytes). */
static void cut(uint8_t *b, size_t *len, size_t at, size_t n)
{
	memmove(b + at, b + at + n, *len - (at + n));
	*len -= n;
}

TEST(task_names_round_trip_sorted_once_each)
{
	struct ht_rawcap c, r, none;
	struct ht_pid_name swap;
	char err[256];
	size_t len;
	uint8_t *b;
	int fd;

	make_full(&c, 16);
	CHECK_EQ_U64(c.ncomms, 4);
	CHECK_EQ_U64(c.comms[0].pid, 10);
	CHECK_EQ_U64(c.comms[2].pid, 10 + HT_COMM_CACHE_SLOTS);
	CHECK_EQ_U64(c.comms[3].pid, 4322);
	CHECK_STR(ht_rawcap_find_comm(&c, 20), "batch_job"); /* the first name stays */
	CHECK_STR(ht_rawcap_find_comm(&c, 4322), "");
	CHECK(ht_rawcap_find_comm(&c, 11) == NULL);
	CHECK(!ht_rawcap_add_comm(&c, 5, "a_name_longer_than_a_comm"));
	CHECK_STR(ht_rawcap_find_comm(&c, 5), "a_name_longer_t");
	b = file_bytes(&c, &len);
	CHECK(b && find_section(b, len, HT_RAWSEC_COMMS, 0));
	CHECK(!read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	check_same(&c, &r, true);
	check_same_comms(&c, &r);
	/* What was read takes more names, still in order; many of them grow the array. */
	CHECK(!ht_rawcap_add_comm(&r, 15, "late"));
	for (uint32_t pid = 100000; pid > 90000; pid -= 3)
		CHECK(!ht_rawcap_add_comm(&r, pid, "many"));
	CHECK_EQ_U64(r.ncomms, 6 + 3334);
	for (size_t i = 1; i < r.ncomms; i++)
		CHECK(r.comms[i - 1].pid < r.comms[i].pid);
	CHECK_STR(ht_rawcap_find_comm(&r, 15), "late");
	CHECK_STR(ht_rawcap_find_comm(&r, 4322), "");
	ht_rawcap_free(&r);
	CHECK(r.comms == NULL && r.ncomms == 0 && r.comms_cap == 0);
	free(b);
	/* No names, no section. */
	memset(&none, 0, sizeof(none));
	b = file_bytes(&none, &len);
	CHECK(b && !find_section(b, len, HT_RAWSEC_COMMS, 0));
	CHECK(!read_mem(b, len, &r, err, sizeof(err)) && !r.ncomms && !r.comms);
	free(b);
	/* Filled by hand out of order: refused, as no reader would take it. */
	swap = c.comms[0];
	c.comms[0] = c.comms[1];
	c.comms[1] = swap;
	fd = open("/dev/null", O_WRONLY);
	CHECK(fd >= 0 && ht_rawcap_write_fd(fd, &c) == -1);
	CHECK_STR(ht_last_error(), "raw capture: task names out of pid order (5 after 10)");
	close(fd);
	ht_rawcap_free(&c);
}

/* Bytes META's 1.2 strings take in C's file: three u16 lengths and their text. */
static size_t meta_1_2_bytes(const struct ht_rawcap *c)
{
	return 6 + strlen(c->kernel) + strlen(c->cpu_model) + strlen(c->cmdline);
}

TEST(a_minor_1_file_without_task_names_is_read)
{
	struct ht_rawcap c, r;
	char err[256];
	size_t len, at, meta_tail;
	uint8_t *b;

	make_full(&c, 64);
	b = file_bytes(&c, &len);
	CHECK(b != NULL);
	/* Format 1.1 had no COMMS nor KSYMS: cut them out, END counts two sections fewer. */
	at = find_section(b, len, HT_RAWSEC_COMMS, 0);
	CHECK(at != 0);
	cut(b, &len, at, 16 + get64(b + at + 8));
	at = find_section(b, len, HT_RAWSEC_KSYMS, 0);
	CHECK(at != 0);
	cut(b, &len, at, 16 + get64(b + at + 8));
	/* ... and META ended at the three-clock moment. */
	meta_tail = meta_1_2_bytes(&c);
	at = find_section(b, len, HT_RAWSEC_META, 0);
	CHECK(at != 0);
	cut(b, &len, at + 16 + get64(b + at + 8) - meta_tail, meta_tail);
	put64(b + at + 8, get64(b + at + 8) - meta_tail);
	fix_crc(b, at);
	at = find_section(b, len, HT_RAWSEC_END, 0);
	CHECK(at != 0);
	put32(b + at + 16, get32(b + at + 16) - 2);
	fix_crc(b, at);
	b[10] = 1; /* minor */
	CHECK(!read_mem(b, len, &r, err, sizeof(err)));
	CHECK_STR(err, "");
	CHECK_EQ_U64(r.format_minor, 1);
	CHECK(r.ncomms == 0 && r.comms == NULL);
	CHECK(r.nksyms == 0 && r.ksyms == NULL);
	CHECK_STR(r.kernel, "");
	CHECK_STR(r.cmdline, "");
	check_same(&c, &r, true);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
}

TEST(bad_task_names_are_refused)
{
	struct ht_rawcap c, r;
	char err[256], want[256];
	size_t len, n_len, at, plen;
	uint8_t *b, *n;

	make_full(&c, 16);
	b = file_bytes(&c, &len);
	at = find_section(b, len, HT_RAWSEC_COMMS, 0);
	CHECK(at != 0);
	plen = get64(b + at + 8);
	CHECK_EQ_U64(plen, c.ncomms * (4 + HT_COMM_LEN));
	snprintf(want, sizeof(want), "x.raw: malformed COMMS section at byte %zu", at);
	n = malloc(len + 16 + plen);
	/* Not a whole number of entries: one byte short. */
	memcpy(n, b, len);
	n_len = len;
	cut(n, &n_len, at + 16 + plen - 1, 1);
	put64(n + at + 8, plen - 1);
	fix_crc(n, at);
	CHECK(read_mem(n, n_len, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, want);
	CHECK(!r.comms && !r.ncomms);
	/* Pids out of order, or one twice. */
	memcpy(n, b, len);
	put32(n + at + 16 + 20, 1);
	fix_crc(n, at);
	CHECK(read_mem(n, len, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, want);
	memcpy(n, b, len);
	put32(n + at + 16 + 20, get32(n + at + 16));
	fix_crc(n, at);
	CHECK(read_mem(n, len, &r, err, sizeof(err)) == -1);
	CHECK_STR(err, want);
	/* Names that fill all 16 bytes, or carry bytes after their NUL: ended and cleaned. */
	memcpy(n, b, len);
	memset(n + at + 16 + 4, 'A', HT_COMM_LEN);
	memcpy(n + at + 16 + 24, "ab\0xyz", 6);
	fix_crc(n, at);
	CHECK(!read_mem(n, len, &r, err, sizeof(err)));
	CHECK_STR(r.comms[0].comm, "AAAAAAAAAAAAAAA");
	CHECK_STR(r.comms[1].comm, "ab");
	CHECK(!memcmp(r.comms[1].comm, "ab\0\0\0\0", 6));
	ht_rawcap_free(&r);
	/* Two COMMS sections. */
	memcpy(n, b, at + 16 + plen);
	memcpy(n + at + 16 + plen, b + at, len - at);
	CHECK(read_mem(n, len + 16 + plen, &r, err, sizeof(err)) == -1);
	CHECK(has(err, "two COMMS sections"));
	free(n);
	free(b);
	ht_rawcap_free(&c);
}

/* This process's comm, as /proc says it. */
static void own_comm(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/comm", "r");

	buf[0] = 0;
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	if (f)
		fclose(f);
}

/*
 * A live lookup names a task by its comm as the kernel keeps it, which is
 * what the raw capture keeps too: /proc/PID/comm of a workqueue worker adds
 * its queue ("kworker/R-mm_percpu_wq", "kworker/u8:5-writeback").
 */
TEST(comm_cache_live_names_fit_a_comm)
{
	static struct ht_comm_cache cache;
	char buf[HT_COMM_LEN + 8], proc[64];
	struct dirent *e;
	int longer = 0;
	DIR *d = opendir("/proc");

	CHECK(d != NULL);
	if (!d)
		return;
	ht_comm_cache_init(&cache, NULL);
	while ((e = readdir(d))) {
		int pid = atoi(e->d_name);

		if (pid <= 0 || ht_proc_thread_comm(pid, proc, sizeof(proc)))
			continue;
		if (strlen(proc) < HT_COMM_LEN)
			continue;
		longer++;
		ht_comm_lookup(&cache, (uint32_t)pid, 0, buf, sizeof(buf));
		if (strncmp(buf, proc, HT_COMM_LEN - 1) || strlen(buf) != HT_COMM_LEN - 1)
			printf("     pid %d: /proc says '%s', looked up '%s'\n", pid, proc, buf);
		CHECK(!strncmp(buf, proc, HT_COMM_LEN - 1) && strlen(buf) == HT_COMM_LEN - 1);
	}
	closedir(d);
	/* Linux 6.x names its rescuer workers kworker/R-<queue>: there is always one. */
	if (!longer)
		SKIP_TEST("no task on this machine has a /proc comm longer than a comm");
}

TEST(comm_cache_offline_names_only_what_was_seeded)
{
	static struct ht_comm_cache cache;
	struct ht_rawcap c, r;
	char buf[HT_COMM_LEN + 8], self[HT_COMM_LEN + 8], want[HT_COMM_LEN + 8], err[256];
	uint32_t me = (uint32_t)getpid();
	size_t len;
	uint8_t *b;

	make_full(&c, 8);
	b = file_bytes(&c, &len);
	CHECK(b && !read_mem(b, len, &r, err, sizeof(err)));
	ht_comm_cache_init(&cache, NULL);
	CHECK(!cache.offline);
	cache.offline = true;
	for (size_t i = 0; i < r.ncomms; i++)
		CHECK(!ht_comm_cache_seed(&cache, r.comms[i].pid, r.comms[i].comm));
	/* 10 and 10 + slots share a slot: both kept. */
	CHECK_STR(ht_comm_lookup(&cache, 10, 0, buf, sizeof(buf)), "worker");
	CHECK_STR(ht_comm_lookup(&cache, 10 + HT_COMM_CACHE_SLOTS, 0, buf, sizeof(buf)),
		  "collides_w_10");
	CHECK_STR(ht_comm_lookup(&cache, 20, 0, buf, sizeof(buf)), "batch_job");
	CHECK_STR(ht_comm_lookup(&cache, 0, 3, buf, sizeof(buf)), "swapper/3");
	/* This machine's tasks are not the capture's: /proc is never read. */
	CHECK_STR(ht_comm_lookup(&cache, me, 0, buf, sizeof(buf)), "[exited]");
	CHECK_STR(ht_comm_lookup(&cache, 1, 0, buf, sizeof(buf)), "[exited]");
	/* Seeding again renames; a hundred pids on one slot all stay. */
	CHECK(!ht_comm_cache_seed(&cache, 20, "renamed"));
	CHECK_STR(ht_comm_lookup(&cache, 20, 0, buf, sizeof(buf)), "renamed");
	for (uint32_t k = 0; k < 100; k++) {
		snprintf(want, sizeof(want), "task%u", k);
		CHECK(!ht_comm_cache_seed(&cache, 100000 + k * HT_COMM_CACHE_SLOTS, want));
	}
	for (uint32_t k = 0; k < 100; k++) {
		snprintf(want, sizeof(want), "task%u", k);
		CHECK_STR(ht_comm_lookup(&cache, 100000 + k * HT_COMM_CACHE_SLOTS, 0, buf,
					 sizeof(buf)),
			  want);
	}
	CHECK_EQ_U64(cache.nseeded, 4 + 100);
	/* Live: /proc for what was not seeded, seeds before the slots. */
	cache.offline = false;
	own_comm(self, sizeof(self));
	CHECK(self[0] != 0);
	CHECK_STR(ht_comm_lookup(&cache, me, 0, buf, sizeof(buf)), self);
	CHECK(!ht_comm_cache_seed(&cache, me, "seeded_me"));
	CHECK_STR(ht_comm_lookup(&cache, me, 0, buf, sizeof(buf)), "seeded_me");
	ht_comm_cache_free(&cache);
	CHECK(!cache.seeded && !cache.nseeded && !cache.offline);
	CHECK_STR(ht_comm_lookup(&cache, me, 0, buf, sizeof(buf)), self);
	ht_rawcap_free(&r);
	ht_rawcap_free(&c);
	free(b);
}

/* ---- the sideband's records ---- */

static size_t rec(uint8_t *p, uint32_t type, uint16_t misc, const void *body, size_t body_len,
		  uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu)
{
	size_t size = 8 + ((body_len + 7) & ~(size_t)7) + 24;
	struct perf_event_header h = {type, misc, (uint16_t)size};
	uint32_t ids[2] = {pid, tid}, cpus[2] = {cpu, 0};

	memset(p, 0, size);
	memcpy(p, &h, 8);
	if (body_len)
		memcpy(p + 8, body, body_len);
	memcpy(p + size - 24, ids, 8);
	memcpy(p + size - 16, &time, 8);
	memcpy(p + size - 8, cpus, 8);
	return size;
}

TEST(sideband_records_parse)
{
	uint8_t buf[1024], body[128];
	struct ht_sb_set s;
	size_t n = 0;
	uint32_t u[4];
	uint64_t q[3];

	n += rec(buf + n, PERF_RECORD_SWITCH,
		 PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, NULL, 0, 10, 11,
		 100, 2);
	n += rec(buf + n, PERF_RECORD_SWITCH, 0, NULL, 0, 10, 11, 200, 3);
	/* mmap2: pid, tid, addr, len, pgoff, 24 bytes of ids, prot, flags, name */
	memset(body, 0, sizeof(body));
	u[0] = 10;
	u[1] = 12;
	memcpy(body, u, 8);
	q[0] = 0x7f0000001000ULL;
	q[1] = 0x2000;
	q[2] = 0x1000;
	memcpy(body + 8, q, 24);
	u[0] = 5;
	u[1] = 2;
	memcpy(body + 56, u, 8);
	strcpy((char *)body + 64, "/usr/lib/libfoo.so");
	n += rec(buf + n, PERF_RECORD_MMAP2, 0, body, 64 + 19, 10, 12, 300, 1);
	u[0] = 10;
	u[1] = 12;
	memcpy(body, u, 8);
	strcpy((char *)body + 8, "worker");
	n += rec(buf + n, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, body, 15, 10, 12, 400, 1);
	u[0] = 10;
	u[1] = 10;
	u[2] = 13;
	u[3] = 12;
	memcpy(body, u, 16);
	memset(body + 16, 0, 8);
	n += rec(buf + n, PERF_RECORD_FORK, 0, body, 24, 10, 12, 500, 0);
	n += rec(buf + n, PERF_RECORD_EXIT, 0, body, 24, 10, 13, 600, 0);
	q[0] = 1;
	q[1] = 42;
	n += rec(buf + n, PERF_RECORD_LOST, 0, q, 16, 0, 0, 700, 0);
	n += rec(buf + n, PERF_RECORD_THROTTLE, 0, q, 16, 0, 0, 800, 0); /* not ours */
	/* an mmap2 whose name has no NUL inside the record */
	memset(body + 64, 'x', 40);
	n += rec(buf + n, PERF_RECORD_MMAP2, 0, body, 104, 10, 12, 900, 1);
	memset(&s, 0, sizeof(s));
	CHECK(!ht_sb_parse(buf, n, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU, &s));
	CHECK_EQ_U64(s.count, 7);
	CHECK_EQ_U64(s.unknown, 1);
	CHECK_EQ_U64(s.malformed, 1);
	CHECK(s.v[0].kind == HT_SB_SWITCH_OUT && s.v[0].preempt && s.v[0].tid == 11);
	CHECK(s.v[0].time_ns == 100 && s.v[0].cpu == 2);
	CHECK(s.v[1].kind == HT_SB_SWITCH_IN && !s.v[1].preempt && s.v[1].cpu == 3);
	CHECK(s.v[2].kind == HT_SB_MMAP && s.v[2].addr == 0x7f0000001000ULL);
	CHECK(s.v[2].len == 0x2000 && s.v[2].pgoff == 0x1000 && s.v[2].prot == 5);
	CHECK_STR(ht_sb_string(&s, &s.v[2]), "/usr/lib/libfoo.so");
	CHECK(s.v[3].kind == HT_SB_COMM && s.v[3].exec);
	CHECK_STR(ht_sb_string(&s, &s.v[3]), "worker");
	CHECK(s.v[4].kind == HT_SB_FORK && s.v[4].tid == 13 && s.v[4].ptid == 12);
	CHECK(s.v[5].kind == HT_SB_EXIT && s.v[5].time_ns == 600);
	CHECK(s.v[6].kind == HT_SB_LOST && s.v[6].lost == 42);
	ht_sb_set_free(&s);
	/* A size that lies stops the walk. */
	((struct perf_event_header *)buf)->size = 4;
	memset(&s, 0, sizeof(s));
	CHECK(!ht_sb_parse(buf, n, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU, &s));
	CHECK(s.count == 0 && s.malformed == 1);
	ht_sb_set_free(&s);
	/* A record shorter than its sample_id. */
	memset(&s, 0, sizeof(s));
	((struct perf_event_header *)buf)->size = 16;
	CHECK(!ht_sb_parse(buf, 16, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU, &s));
	CHECK(s.count == 0 && s.malformed == 1);
	ht_sb_set_free(&s);
}
