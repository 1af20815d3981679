// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading a raw capture, bounded: every length is checked against what is
 * left, a malformed section is named with its offset, and nothing read is
 * trusted further than its checksum. Also the in-memory capture's helpers
 * (free, comms, kernel symbols, window).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/log.h"
#include "sources/intelpt/rawcap.h"
#include "sources/intelpt/rawcap_format.h"

static const char *tag_name(uint32_t tag)
{
	switch (tag) {
	case HT_RAWSEC_META:
		return "META";
	case HT_RAWSEC_BREACH:
		return "BREACH";
	case HT_RAWSEC_PT_CONFIG:
		return "PT_CONFIG";
	case HT_RAWSEC_CPUID:
		return "CPUID";
	case HT_RAWSEC_CLOCKS:
		return "CLOCKS";
	case HT_RAWSEC_PT_STREAM:
		return "PT_STREAM";
	case HT_RAWSEC_SIDEBAND:
		return "SIDEBAND";
	case HT_RAWSEC_MAPS:
		return "MAPS";
	case HT_RAWSEC_VDSO:
		return "VDSO";
	case HT_RAWSEC_KWINDOW:
		return "KWINDOW";
	case HT_RAWSEC_COMMS:
		return "COMMS";
	case HT_RAWSEC_KSYMS:
		return "KSYMS";
	case HT_RAWSEC_END:
		return "END";
	}
	return "unknown";
}

/* A u16-prefixed string into DST (SIZE bytes with its NUL); longer ones are malformed. */
static void rd_str16(struct rd *r, char *dst, size_t size)
{
	uint16_t n = rd_u16(r);
	const uint8_t *p;

	if (n >= size) {
		r->bad = true;
		return;
	}
	p = rd_take(r, n);
	if (!p)
		return;
	memcpy(dst, p, n);
	dst[n] = 0;
	if (strlen(dst) != n)
		r->bad = true; /* a NUL inside */
}

/* An allocated string of at most MAX bytes, prefixed by a u16 or u32 length. */
static char *rd_dup(struct rd *r, int len_bytes, size_t max, bool *oom)
{
	uint64_t n = rd_uint(r, len_bytes);
	const uint8_t *p;
	char *s;

	if (r->bad || n > max) {
		r->bad = true;
		return NULL;
	}
	p = rd_take(r, n);
	if (!p)
		return NULL;
	if (memchr(p, 0, n)) {
		r->bad = true;
		return NULL;
	}
	s = malloc(n + 1);
	if (!s) {
		*oom = true;
		return NULL;
	}
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static uint8_t *rd_blob(struct rd *r, uint64_t *len, bool *oom)
{
	uint64_t n = rd_left(r);
	uint8_t *p;

	*len = 0;
	if (r->bad || !n)
		return NULL;
	p = malloc(n);
	if (!p) {
		*oom = true;
		return NULL;
	}
	memcpy(p, rd_take(r, n), n);
	*len = n;
	return p;
}

/* A fixed-size text field: nothing after its first NUL, as the writer would write it. */
static void clean_text(char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n < size)
		memset(s + n, 0, size - n);
}

static void rd_fr_event(struct rd *r, struct ht_fr_event *e)
{
	e->rec.ts_ns = rd_u64(r);
	e->rec.seq = rd_u32(r);
	e->rec.kind = rd_u8(r);
	e->rec.flags = rd_u8(r);
	e->rec.aux = rd_u16(r);
	e->rec.tid_a = rd_u32(r);
	e->rec.tid_b = rd_u32(r);
	e->rec.arg = rd_u64(r);
	e->cpu = rd_u32(r);
}

struct rctx {
	const char *name;
	char *err;
	size_t errlen;
	struct ht_rawcap *out;
	uint16_t minor;
	bool seen[16];
	bool oom;
	size_t streams_cap, sidebands_cap, maps_cap, ksyms_cap;
};

static int rfail(struct rctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int rfail(struct rctx *x, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (x->err && x->errlen)
		snprintf(x->err, x->errlen, "%s: %s", x->name, msg);
	return -1;
}

static void parse_meta(struct rd *r, struct ht_rawcap *c)
{
	c->pid = (int)rd_u32(r);
	rd_str16(r, c->comm, sizeof(c->comm));
	rd_str16(r, c->kind, sizeof(c->kind));
	rd_str16(r, c->version, sizeof(c->version));
	c->threshold_ns = rd_u64(r);
	c->start_ns = rd_u64(r);
	c->end_ns = rd_u64(r);
	c->pre_ns = rd_u64(r);
	c->post_ns = rd_u64(r);
	c->trigger_ns = rd_u64(r);
	c->freeze_first_ns = rd_u64(r);
	c->freeze_last_ns = rd_u64(r);
	c->snap_mono_ns = rd_u64(r);
	c->snap_boot_ns = rd_u64(r);
	c->snap_real_ns = rd_u64(r);
	if (!rd_left(r))
		return; /* 1.1 ends here */
	rd_str16(r, c->kernel, sizeof(c->kernel));
	rd_str16(r, c->cpu_model, sizeof(c->cpu_model));
	rd_str16(r, c->cmdline, sizeof(c->cmdline));
}

static void parse_breach(struct rd *r, struct ht_breach *x)
{
	uint32_t depth;
	const uint8_t *p;

	x->start_ns = rd_u64(r);
	x->end_ns = rd_u64(r);
	x->wake_ns = rd_u64(r);
	x->syscall_ret = (int64_t)rd_u64(r);
	x->kind = rd_u32(r);
	x->tid = rd_u32(r);
	x->tgid = rd_u32(r);
	x->cpu = rd_u32(r);
	x->state = rd_u32(r);
	x->syscall_nr = (int32_t)rd_u32(r);
	x->wake_source = rd_u32(r);
	x->waker_tid = rd_u32(r);
	x->waker_tgid = rd_u32(r);
	x->wake_cpu = rd_u32(r);
	x->kstack_bytes = (int32_t)rd_u32(r);
	if ((p = rd_take(r, HT_COMM_LEN)))
		memcpy(x->comm, p, HT_COMM_LEN);
	if ((p = rd_take(r, HT_COMM_LEN)))
		memcpy(x->waker_comm, p, HT_COMM_LEN);
	x->comm[HT_COMM_LEN - 1] = 0;
	x->waker_comm[HT_COMM_LEN - 1] = 0;
	clean_text(x->comm, HT_COMM_LEN);
	clean_text(x->waker_comm, HT_COMM_LEN);
	/* The depth is written so a build with a deeper stack reads older files. */
	depth = rd_u32(r);
	if (depth > rd_left(r) / 8) {
		r->bad = true;
		return;
	}
	for (uint32_t i = 0; i < depth; i++) {
		uint64_t v = rd_u64(r);

		if (i < HT_MAX_KSTACK_DEPTH)
			x->kstack[i] = v;
	}
	if (x->kstack_bytes > HT_MAX_KSTACK_DEPTH * 8)
		x->kstack_bytes = HT_MAX_KSTACK_DEPTH * 8;
	if (!rd_left(r))
		return; /* 1.2 ends here */
	x->flags = rd_u32(r);
	x->kinds = rd_u32(r);
	x->off_cpu_waits = rd_u32(r);
	x->off_cpu_start_ns = rd_u64(r);
	x->off_cpu_end_ns = rd_u64(r);
	x->off_cpu_threshold_ns = rd_u64(r);
	x->softirq_vec = rd_u32(r);
	if (!rd_left(r))
		return; /* 1.3 ends here */
	x->ns_tid = rd_u32(r);
	x->ns_tgid = rd_u32(r);
}

static void parse_pt_config(struct rd *r, struct ht_rawcap_pt_config *p)
{
	struct ht_pt_fields *f = &p->fields;

	p->pmu_type = rd_u32(r);
	p->config = rd_u64(r);
	f->pt = rd_u8(r);
	f->branch = rd_u8(r);
	f->tsc = rd_u8(r);
	f->mtc = rd_u8(r);
	f->cyc = rd_u8(r);
	f->noretcomp = rd_u8(r);
	f->mtc_period = rd_u8(r);
	f->cyc_thresh = rd_u8(r);
	f->psb_period = rd_u8(r);
	p->aux_bytes = rd_u64(r);
	p->sideband_sample_type = rd_u64(r);
	p->has_max_nonturbo_ratio = rd_u8(r) != 0;
	p->max_nonturbo_ratio = rd_u32(r);
	p->has_tsc_art_ratio = rd_u8(r) != 0;
	p->tsc_art_num = rd_u32(r);
	p->tsc_art_den = rd_u32(r);
}

static void parse_cpuid(struct rd *r, struct ht_cpuid_values *c)
{
	const uint8_t *p = rd_take(r, 12);

	if (p)
		memcpy(c->vendor, p, 12);
	c->vendor[12] = 0;
	clean_text(c->vendor, sizeof(c->vendor));
	c->max_leaf = rd_u32(r);
	for (int i = 0; i < 4; i++)
		c->leaf1[i] = rd_u32(r);
	for (int i = 0; i < 4; i++)
		c->leaf14_0[i] = rd_u32(r);
	for (int i = 0; i < 4; i++)
		c->leaf14_1[i] = rd_u32(r);
	for (int i = 0; i < 4; i++)
		c->leaf15[i] = rd_u32(r);
}

static void parse_clocks(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	uint32_t n = rd_u32(r);

	if (n > rd_left(r) / CLOCK_PAIR_BYTES) {
		r->bad = true;
		return;
	}
	if (n) {
		c->clocks = calloc(n, sizeof(*c->clocks));
		if (!c->clocks) {
			x->oom = true;
			return;
		}
	}
	c->nclocks = n;
	for (uint32_t i = 0; i < n; i++) {
		c->clocks[i].tsc = rd_u64(r);
		c->clocks[i].mono_ns = rd_u64(r);
		c->clocks[i].spread_ns = rd_u32(r);
		c->clocks[i].when = rd_u32(r);
	}
	if (x->minor >= CLOCKS_MINOR_CONV) {
		uint8_t flags = rd_u8(r);

		c->time_conv.cap_user_time = flags & 1;
		c->time_conv.cap_user_time_zero = (flags >> 1) & 1;
		c->time_conv.time_shift = rd_u16(r);
		c->time_conv.time_mult = rd_u32(r);
		c->time_conv.time_zero = rd_u64(r);
	}
}

static void parse_stream(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	struct ht_rawcap_stream s = {0};

	s.cpu = rd_u32(r);
	s.tid = (int32_t)rd_u32(r);
	s.ring_bytes = rd_u64(r);
	s.aux_head = rd_u64(r);
	s.frozen_ns = rd_u64(r);
	if (r->bad)
		return;
	if (grow((void **)&c->streams, &x->streams_cap, c->nstreams, sizeof(s))) {
		x->oom = true;
		return;
	}
	s.data = rd_blob(r, &s.len, &x->oom);
	if (!x->oom)
		c->streams[c->nstreams++] = s;
}

static void parse_sideband(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	struct ht_rawcap_sideband s = {0};

	s.cpu = rd_u32(r);
	s.frozen_ns = rd_u64(r);
	if (r->bad)
		return;
	if (grow((void **)&c->sidebands, &x->sidebands_cap, c->nsidebands, sizeof(s))) {
		x->oom = true;
		return;
	}
	s.data = rd_blob(r, &s.len, &x->oom);
	if (!x->oom)
		c->sidebands[c->nsidebands++] = s;
}

static void free_maps(struct ht_rawcap_maps *m)
{
	for (size_t i = 0; i < m->count; i++) {
		free(m->v[i].path);
		free(m->v[i].build_id);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static void parse_maps(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	struct ht_rawcap_maps m = {0};
	uint32_t n;

	m.taken_ns = rd_u64(r);
	n = rd_u32(r);
	if (r->bad || n > rd_left(r) / MAPPING_MIN_BYTES) {
		r->bad = true;
		return;
	}
	if (n && !(m.v = calloc(n, sizeof(*m.v)))) {
		x->oom = true;
		return;
	}
	for (uint32_t i = 0; i < n && !r->bad && !x->oom; i++) {
		struct ht_rawcap_mapping *e = &m.v[i];
		const uint8_t *perms;

		e->start = rd_u64(r);
		e->end = rd_u64(r);
		e->offset = rd_u64(r);
		perms = rd_take(r, 4);
		if (perms)
			memcpy(e->perms, perms, 4);
		e->perms[4] = 0;
		clean_text(e->perms, sizeof(e->perms));
		e->path = rd_dup(r, 4, MAX_PATH_BYTES, &x->oom);
		e->build_id = rd_dup(r, 2, MAX_BUILD_ID_HEX, &x->oom);
		m.count = i + 1;
		if (!r->bad && (e->end < e->start || !e->path))
			r->bad = true;
		if (e->build_id && !e->build_id[0]) {
			free(e->build_id);
			e->build_id = NULL;
		}
	}
	if (x->minor >= MAPS_MINOR_PID && !r->bad)
		m.pid = (int)rd_u32(r);
	if (r->bad || x->oom || grow((void **)&c->maps, &x->maps_cap, c->nmaps, sizeof(m))) {
		x->oom = x->oom || !r->bad;
		free_maps(&m);
		return;
	}
	c->maps[c->nmaps++] = m;
}

static void parse_vdso(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	uint64_t len;

	c->vdso_addr = rd_u64(r);
	c->vdso = rd_blob(r, &len, &x->oom);
	c->vdso_len = (size_t)len;
}

static void parse_window(struct rctx *x, struct rd *r)
{
	struct ht_fr_window *w = &x->out->window;
	uint64_t count;
	uint32_t ncpus;

	w->t0 = rd_u64(r);
	w->t1 = rd_u64(r);
	w->clipped = rd_u8(r) != 0;
	w->covered_from_ns = rd_u64(r);
	w->skipped_records = rd_u64(r);
	count = rd_u64(r);
	if (r->bad || count > rd_left(r) / FR_EVENT_BYTES) {
		r->bad = true;
		return;
	}
	if (count && !(w->events = calloc(count, sizeof(*w->events)))) {
		x->oom = true;
		return;
	}
	w->count = count;
	for (uint64_t i = 0; i < count; i++)
		rd_fr_event(r, &w->events[i]);
	ncpus = rd_u32(r);
	if (r->bad || ncpus > MAX_CPUS || ncpus > rd_left(r) / (FR_EVENT_BYTES + 1)) {
		r->bad = true;
		return;
	}
	w->ncpus = ncpus;
	if (!ncpus)
		return;
	w->entry_switch = calloc(ncpus, sizeof(*w->entry_switch));
	w->entry_valid = calloc(ncpus, sizeof(*w->entry_valid));
	if (!w->entry_switch || !w->entry_valid) {
		x->oom = true;
		return;
	}
	for (uint32_t c = 0; c < ncpus; c++) {
		w->entry_valid[c] = rd_u8(r) != 0;
		rd_fr_event(r, &w->entry_switch[c]);
	}
}

/* Whole entries, pids strictly increasing (what add_comm's binary search needs). */
static void parse_comms(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;
	uint64_t n = rd_left(r) / COMM_ENTRY_BYTES;

	if (rd_left(r) % COMM_ENTRY_BYTES) {
		r->bad = true;
		return;
	}
	if (n && !(c->comms = calloc(n, sizeof(*c->comms)))) {
		x->oom = true;
		return;
	}
	c->comms_cap = n;
	for (uint64_t i = 0; i < n; i++) {
		struct ht_pid_name *e = &c->comms[i];
		const uint8_t *p;

		e->pid = rd_u32(r);
		if ((p = rd_take(r, HT_COMM_LEN)))
			memcpy(e->comm, p, HT_COMM_LEN);
		/* The file's bytes may not end in a NUL: ours do. */
		e->comm[HT_COMM_LEN - 1] = 0;
		clean_text(e->comm, HT_COMM_LEN);
		if (i && e->pid <= c->comms[i - 1].pid) {
			r->bad = true;
			return;
		}
		c->ncomms = i + 1;
	}
}

/* Names for the kernel stacks: a name, never empty, with no NUL inside. */
static void parse_ksyms(struct rctx *x, struct rd *r)
{
	struct ht_rawcap *c = x->out;

	while (rd_left(r) && !r->bad && !x->oom) {
		struct ht_rawcap_ksym k;

		k.start = rd_u64(r);
		k.name = rd_dup(r, 2, MAX_KSYM_NAME, &x->oom);
		if (!k.name || !k.name[0]) {
			r->bad = r->bad || !x->oom;
			free(k.name);
			return;
		}
		clean_text(k.name, strlen(k.name) + 1);
		if (grow((void **)&c->ksyms, &x->ksyms_cap, c->nksyms, sizeof(k))) {
			x->oom = true;
			free(k.name);
			return;
		}
		c->ksyms[c->nksyms++] = k;
	}
}

/* Sections that may appear once. */
static bool singleton(uint32_t tag)
{
	return tag == HT_RAWSEC_META || tag == HT_RAWSEC_BREACH || tag == HT_RAWSEC_PT_CONFIG ||
	       tag == HT_RAWSEC_CPUID || tag == HT_RAWSEC_CLOCKS || tag == HT_RAWSEC_VDSO ||
	       tag == HT_RAWSEC_KWINDOW || tag == HT_RAWSEC_COMMS || tag == HT_RAWSEC_KSYMS;
}

static int parse_section(struct rctx *x, uint32_t tag, struct rd *r)
{
	struct ht_rawcap *c = x->out;

	switch (tag) {
	case HT_RAWSEC_META:
		parse_meta(r, c);
		break;
	case HT_RAWSEC_BREACH:
		parse_breach(r, &c->breach);
		c->has_breach = true;
		break;
	case HT_RAWSEC_PT_CONFIG:
		parse_pt_config(r, &c->pt);
		break;
	case HT_RAWSEC_CPUID:
		parse_cpuid(r, &c->cpuid);
		break;
	case HT_RAWSEC_CLOCKS:
		parse_clocks(x, r);
		break;
	case HT_RAWSEC_PT_STREAM:
		parse_stream(x, r);
		break;
	case HT_RAWSEC_SIDEBAND:
		parse_sideband(x, r);
		break;
	case HT_RAWSEC_MAPS:
		parse_maps(x, r);
		break;
	case HT_RAWSEC_VDSO:
		parse_vdso(x, r);
		break;
	case HT_RAWSEC_KWINDOW:
		c->has_window = true;
		parse_window(x, r);
		break;
	case HT_RAWSEC_COMMS:
		parse_comms(x, r);
		break;
	case HT_RAWSEC_KSYMS:
		parse_ksyms(x, r);
		break;
	default:
		return 0; /* a newer minor's section: skipped */
	}
	if (x->oom)
		return rfail(x, "out of memory reading the %s section", tag_name(tag));
	return r->bad ? -1 : 0;
}

static int read_sections(struct rctx *x, const uint8_t *data, size_t len, size_t pos)
{
	uint32_t sections = 0;

	for (;;) {
		uint32_t tag, crc, end_count;
		uint64_t plen;
		struct rd h, r;
		size_t at = pos;

		if (len - pos < SECTION_HEADER_BYTES)
			return rfail(x, "truncated at byte %zu: no END section (%s)", pos,
				     pos == len ? "the file ends" : "a partial section header");
		h = (struct rd){data + pos, data + len, false};
		tag = rd_u32(&h);
		crc = rd_u32(&h);
		plen = rd_u64(&h);
		pos += SECTION_HEADER_BYTES;
		if (plen > len - pos)
			return rfail(x,
				     "truncated at byte %zu: the %s section claims %llu bytes, "
				     "%zu are left",
				     at, tag_name(tag), (unsigned long long)plen, len - pos);
		if (crc32_of(0, data + pos, plen) != crc)
			return rfail(x, "corrupted %s section at byte %zu (checksum mismatch)",
				     tag_name(tag), at);
		r = (struct rd){data + pos, data + pos + plen, false};
		pos += plen;
		if (tag == HT_RAWSEC_END) {
			end_count = rd_u32(&r);
			if (r.bad || end_count != sections)
				return rfail(x, "malformed END section at byte %zu", at);
			if (pos != len)
				return rfail(x, "%zu bytes after the END section", len - pos);
			break;
		}
		if (++sections > MAX_SECTIONS)
			return rfail(x, "more than %u sections", MAX_SECTIONS);
		if (singleton(tag)) {
			if (x->seen[tag])
				return rfail(x, "two %s sections (the second at byte %zu)",
					     tag_name(tag), at);
			x->seen[tag] = true;
		}
		if (parse_section(x, tag, &r)) {
			if (x->oom)
				return -1;
			return rfail(x, "malformed %s section at byte %zu", tag_name(tag), at);
		}
	}
	if (!x->seen[HT_RAWSEC_META])
		return rfail(x, "no META section");
	return 0;
}

int ht_rawcap_read_mem(const uint8_t *data, size_t len, const char *name, struct ht_rawcap *out,
		       char *err, size_t errlen)
{
	struct rctx x = {
		.name = name ? name : "raw capture", .err = err, .errlen = errlen, .out = out};
	struct rd h = {data, data + len, false};
	uint16_t major, minor;
	uint32_t header_len;

	memset(out, 0, sizeof(*out));
	if (err && errlen)
		err[0] = 0;
	if (len < 8 || memcmp(data, HT_RAWCAP_MAGIC, 8))
		return rfail(&x, "not a hybtrace raw capture (%s)",
			     len ? "bad magic" : "empty file");
	rd_take(&h, 8);
	major = rd_u16(&h);
	minor = rd_u16(&h);
	header_len = rd_u32(&h);
	if (h.bad)
		return rfail(&x, "truncated in the file header");
	if (major > HT_RAWCAP_MAJOR)
		return rfail(&x,
			     "made by a newer hybtrace (format %u.%u); this one reads up to "
			     "%d.%d",
			     major, minor, HT_RAWCAP_MAJOR, HT_RAWCAP_MINOR);
	if (major < 1)
		return rfail(&x, "format %u.%u was never written by hybtrace", major, minor);
	if (header_len < FILE_HEADER_BYTES || header_len > len)
		return rfail(&x, "malformed file header (header length %u)", header_len);
	out->format_major = major;
	out->format_minor = minor;
	x.minor = minor;
	if (read_sections(&x, data, len, header_len)) {
		ht_rawcap_free(out);
		out->format_major = major;
		out->format_minor = minor;
		return -1;
	}
	return 0;
}

int ht_rawcap_read(const char *path, struct ht_rawcap *out, char *err, size_t errlen)
{
	struct stat st;
	uint8_t *data;
	size_t got = 0;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
		snprintf(err, errlen, "%s: %lld bytes, larger than any raw capture", path,
			 (long long)st.st_size);
		close(fd);
		return -1;
	}
	data = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!data) {
		snprintf(err, errlen, "%s: out of memory", path);
		close(fd);
		return -1;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, data + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	rc = ht_rawcap_read_mem(data, got, path, out, err, errlen);
	free(data);
	return rc;
}

void ht_rawcap_free(struct ht_rawcap *c)
{
	for (size_t i = 0; i < c->nstreams; i++)
		free(c->streams[i].data);
	free(c->streams);
	for (size_t i = 0; i < c->nsidebands; i++)
		free(c->sidebands[i].data);
	free(c->sidebands);
	for (size_t i = 0; i < c->nmaps; i++)
		free_maps(&c->maps[i]);
	free(c->maps);
	free(c->clocks);
	free(c->vdso);
	free(c->window.events);
	free(c->window.entry_switch);
	free(c->window.entry_valid);
	free(c->comms);
	for (size_t i = 0; i < c->nksyms; i++)
		free(c->ksyms[i].name);
	free(c->ksyms);
	memset(c, 0, sizeof(*c));
}

const char *ht_rawcap_find_comm(const struct ht_rawcap *c, uint32_t pid)
{
	bool found;
	size_t i = ht_pid_name_index(c->comms, c->ncomms, pid, &found);

	return found ? c->comms[i].comm : NULL;
}

int ht_rawcap_add_comm(struct ht_rawcap *c, uint32_t pid, const char *comm)
{
	return ht_pid_name_set(&c->comms, &c->ncomms, &c->comms_cap, pid, comm, false);
}

int ht_rawcap_set_window(struct ht_rawcap *c, const struct ht_fr_window *w)
{
	struct ht_fr_window n = *w;

	n.events = NULL;
	n.entry_switch = NULL;
	n.entry_valid = NULL;
	if (w->count && !(n.events = malloc(w->count * sizeof(*n.events))))
		goto oom;
	if (w->count)
		memcpy(n.events, w->events, w->count * sizeof(*n.events));
	if (w->ncpus) {
		n.entry_switch = calloc(w->ncpus, sizeof(*n.entry_switch));
		n.entry_valid = calloc(w->ncpus, sizeof(*n.entry_valid));
		if (!n.entry_switch || !n.entry_valid)
			goto oom;
		if (w->entry_switch)
			memcpy(n.entry_switch, w->entry_switch, w->ncpus * sizeof(*n.entry_switch));
		if (w->entry_valid)
			memcpy(n.entry_valid, w->entry_valid, w->ncpus * sizeof(*n.entry_valid));
	}
	free(c->window.events);
	free(c->window.entry_switch);
	free(c->window.entry_valid);
	c->window = n;
	c->has_window = true;
	return 0;
oom:
	free(n.events);
	free(n.entry_switch);
	free(n.entry_valid);
	return ht_fail("out of memory copying the kernel window");
}

int ht_rawcap_add_ksym(struct ht_rawcap *cap, uint64_t start, const char *name)
{
	struct ht_rawcap_ksym *grown;

	for (size_t i = 0; i < cap->nksyms; i++)
		if (cap->ksyms[i].start == start)
			return 0;
	grown = realloc(cap->ksyms, (cap->nksyms + 1) * sizeof(*grown));
	if (!grown)
		return ht_fail("out of memory");
	cap->ksyms = grown;
	cap->ksyms[cap->nksyms].start = start;
	cap->ksyms[cap->nksyms].name = strndup(name, MAX_KSYM_NAME);
	if (!cap->ksyms[cap->nksyms].name)
		return ht_fail("out of memory");
	cap->nksyms++;
	return 0;
}
