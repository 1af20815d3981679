// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The raw capture file: writer, bounded reader, and the helpers that give
 * its parts meaning (TSC mapping, sideband records). Every field is written
 * one by one, little-endian, never as a struct image, so the layout is the
 * file format's and not the compiler's.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "base/log.h"
#include "base/output.h"
#include "base/tsc.h"
#include "sources/intelpt/rawcap.h"

#define FILE_HEADER_BYTES    16
#define SECTION_HEADER_BYTES 16
/* Larger files are not raw captures hybtrace wrote (256 CPUs x 16M of PT is 4G). */
#define MAX_FILE_BYTES	  (16ULL << 30)
#define MAX_SECTIONS	  (1u << 20)
#define MAX_PATH_BYTES	  4096
#define MAX_KSYM_NAME	  512 /* "function [module]" */
#define MAX_BUILD_ID_HEX  128
#define MAX_SHORT_STRING  64
#define MAX_CPUS	  65536
#define FR_EVENT_BYTES	  36
#define CLOCK_PAIR_BYTES  24
#define MAPPING_MIN_BYTES (8 * 3 + 4 + 4 + 2)
#define COMM_ENTRY_BYTES  (4 + HT_COMM_LEN)
/* CLOCKS as format 1.0 wrote it ended after the pairs. */
#define CLOCKS_MINOR_CONV 1

/* Records are written field by field: a change of layout must be met here. */
_Static_assert(sizeof(struct ht_flight_record) == 32,
	       "ht_flight_record changed: update put_fr_event/rd_fr_event and FR_EVENT_BYTES");
/* block_stack_seq and syscall_fd serve the live session only: what they led to is in flags. */
_Static_assert(sizeof(struct ht_breach) == 416,
	       "ht_breach changed: update write_breach/parse_breach");
/* COMMS entries are fixed-size: a longer comm would be a new section. */
_Static_assert(HT_COMM_LEN == 16, "HT_COMM_LEN changed: COMMS entries are pid + 16 bytes");

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

static uint32_t crc32_of(uint32_t crc, const void *data, uint64_t len)
{
	const uint8_t *p = data;

	while (len) {
		uInt chunk = len > (1u << 30) ? (1u << 30) : (uInt)len;

		crc = (uint32_t)crc32(crc, p, chunk);
		p += chunk;
		len -= chunk;
	}
	return crc;
}

/* ---- Writing ---- */

/* A growing buffer for one section's fixed fields. */
struct mbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

static void mb_put(struct mbuf *b, const void *data, size_t len)
{
	if (b->oom || !len)
		return;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + len)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void mb_u8(struct mbuf *b, uint8_t v)
{
	mb_put(b, &v, 1);
}

static void mb_u16(struct mbuf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};

	mb_put(b, x, 2);
}

static void mb_u32(struct mbuf *b, uint32_t v)
{
	uint8_t x[4];

	for (int i = 0; i < 4; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	mb_put(b, x, 4);
}

static void mb_u64(struct mbuf *b, uint64_t v)
{
	uint8_t x[8];

	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	mb_put(b, x, 8);
}

/* A short string: u16 length, bytes (no NUL). */
static void mb_str16(struct mbuf *b, const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;

	mb_u16(b, (uint16_t)n);
	mb_put(b, s, n);
}

struct writer {
	int fd;
	uint8_t buf[65536];
	size_t used;
	uint32_t sections;
	int err; /* errno of the first failure */
};

static void w_flush(struct writer *w)
{
	size_t off = 0;

	while (!w->err && off < w->used) {
		ssize_t n = write(w->fd, w->buf + off, w->used - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->err = n < 0 ? errno : EIO;
			break;
		}
		off += (size_t)n;
	}
	w->used = 0;
}

static void w_put(struct writer *w, const void *data, uint64_t len)
{
	const uint8_t *p = data;

	if (w->err)
		return;
	/* Large blobs go straight out, past the buffer. */
	if (len >= sizeof(w->buf)) {
		w_flush(w);
		while (!w->err && len) {
			ssize_t n = write(w->fd, p, len > (1u << 30) ? (1u << 30) : len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				w->err = n < 0 ? errno : EIO;
				break;
			}
			p += n;
			len -= (uint64_t)n;
		}
		return;
	}
	if (w->used + len > sizeof(w->buf))
		w_flush(w);
	memcpy(w->buf + w->used, p, len);
	w->used += len;
}

/* One section: the fixed fields in B, then TAIL (the bulk bytes, may be NULL). */
static void w_section(struct writer *w, uint32_t tag, struct mbuf *b, const void *tail,
		      uint64_t tail_len)
{
	struct mbuf h = {0};
	uint32_t crc;

	if (b->oom) {
		w->err = w->err ? w->err : ENOMEM;
		return;
	}
	crc = crc32_of(0, b->p, b->len);
	if (tail_len)
		crc = crc32_of(crc, tail, tail_len);
	mb_u32(&h, tag);
	mb_u32(&h, crc);
	mb_u64(&h, b->len + tail_len);
	if (h.oom) {
		w->err = w->err ? w->err : ENOMEM;
		return;
	}
	w_put(w, h.p, h.len);
	w_put(w, b->p, b->len);
	if (tail_len)
		w_put(w, tail, tail_len);
	free(h.p);
	b->len = 0;
	w->sections++;
}

static void put_fr_event(struct mbuf *b, const struct ht_fr_event *e)
{
	mb_u64(b, e->rec.ts_ns);
	mb_u32(b, e->rec.seq);
	mb_u8(b, e->rec.kind);
	mb_u8(b, e->rec.flags);
	mb_u16(b, e->rec.aux);
	mb_u32(b, e->rec.tid_a);
	mb_u32(b, e->rec.tid_b);
	mb_u64(b, e->rec.arg);
	mb_u32(b, e->cpu);
}

static void write_meta(struct writer *w, struct mbuf *b, const struct ht_rawcap *c)
{
	mb_u32(b, (uint32_t)c->pid);
	mb_str16(b, c->comm, sizeof(c->comm));
	mb_str16(b, c->kind, sizeof(c->kind));
	mb_str16(b, c->version, sizeof(c->version));
	mb_u64(b, c->threshold_ns);
	mb_u64(b, c->start_ns);
	mb_u64(b, c->end_ns);
	mb_u64(b, c->pre_ns);
	mb_u64(b, c->post_ns);
	mb_u64(b, c->trigger_ns);
	mb_u64(b, c->freeze_first_ns);
	mb_u64(b, c->freeze_last_ns);
	mb_u64(b, c->snap_mono_ns);
	mb_u64(b, c->snap_boot_ns);
	mb_u64(b, c->snap_real_ns);
	/* 1.2: where and how the capture was made. */
	mb_str16(b, c->kernel, sizeof(c->kernel));
	mb_str16(b, c->cpu_model, sizeof(c->cpu_model));
	mb_str16(b, c->cmdline, sizeof(c->cmdline));
	w_section(w, HT_RAWSEC_META, b, NULL, 0);
}

static void write_breach(struct writer *w, struct mbuf *b, const struct ht_breach *x)
{
	mb_u64(b, x->start_ns);
	mb_u64(b, x->end_ns);
	mb_u64(b, x->wake_ns);
	mb_u64(b, (uint64_t)x->syscall_ret);
	mb_u32(b, x->kind);
	mb_u32(b, x->tid);
	mb_u32(b, x->tgid);
	mb_u32(b, x->cpu);
	mb_u32(b, x->state);
	mb_u32(b, (uint32_t)x->syscall_nr);
	mb_u32(b, x->wake_source);
	mb_u32(b, x->waker_tid);
	mb_u32(b, x->waker_tgid);
	mb_u32(b, x->wake_cpu);
	mb_u32(b, (uint32_t)x->kstack_bytes);
	mb_put(b, x->comm, HT_COMM_LEN);
	mb_put(b, x->waker_comm, HT_COMM_LEN);
	mb_u32(b, HT_MAX_KSTACK_DEPTH);
	for (int i = 0; i < HT_MAX_KSTACK_DEPTH; i++)
		mb_u64(b, x->kstack[i]);
	/*
	 * 1.3: what the kernel knew of the wait (a joining thread, io_uring
	 * waiting), the kinds of one wait that breached several thresholds and
	 * a softirq wakeup's vector.
	 */
	mb_u32(b, x->flags);
	mb_u32(b, x->kinds);
	mb_u32(b, x->off_cpu_waits);
	mb_u64(b, x->off_cpu_start_ns);
	mb_u64(b, x->off_cpu_end_ns);
	mb_u64(b, x->off_cpu_threshold_ns);
	mb_u32(b, x->softirq_vec);
	w_section(w, HT_RAWSEC_BREACH, b, NULL, 0);
}

static void write_pt_config(struct writer *w, struct mbuf *b, const struct ht_rawcap_pt_config *p)
{
	const struct ht_pt_fields *f = &p->fields;

	mb_u32(b, p->pmu_type);
	mb_u64(b, p->config);
	mb_u8(b, f->pt);
	mb_u8(b, f->branch);
	mb_u8(b, f->tsc);
	mb_u8(b, f->mtc);
	mb_u8(b, f->cyc);
	mb_u8(b, f->noretcomp);
	mb_u8(b, f->mtc_period);
	mb_u8(b, f->cyc_thresh);
	mb_u8(b, f->psb_period);
	mb_u64(b, p->aux_bytes);
	mb_u64(b, p->sideband_sample_type);
	mb_u8(b, p->has_max_nonturbo_ratio);
	mb_u32(b, p->max_nonturbo_ratio);
	mb_u8(b, p->has_tsc_art_ratio);
	mb_u32(b, p->tsc_art_num);
	mb_u32(b, p->tsc_art_den);
	w_section(w, HT_RAWSEC_PT_CONFIG, b, NULL, 0);
}

static void write_cpuid(struct writer *w, struct mbuf *b, const struct ht_cpuid_values *c)
{
	char vendor[12] = {0};

	memcpy(vendor, c->vendor, strnlen(c->vendor, sizeof(vendor)));
	mb_put(b, vendor, 12);
	mb_u32(b, c->max_leaf);
	for (int i = 0; i < 4; i++)
		mb_u32(b, c->leaf1[i]);
	for (int i = 0; i < 4; i++)
		mb_u32(b, c->leaf14_0[i]);
	for (int i = 0; i < 4; i++)
		mb_u32(b, c->leaf14_1[i]);
	for (int i = 0; i < 4; i++)
		mb_u32(b, c->leaf15[i]);
	w_section(w, HT_RAWSEC_CPUID, b, NULL, 0);
}

static void write_clocks(struct writer *w, struct mbuf *b, const struct ht_rawcap *c)
{
	const struct ht_perf_time_conv *t = &c->time_conv;

	mb_u32(b, (uint32_t)c->nclocks);
	for (size_t i = 0; i < c->nclocks; i++) {
		mb_u64(b, c->clocks[i].tsc);
		mb_u64(b, c->clocks[i].mono_ns);
		mb_u32(b, c->clocks[i].spread_ns);
		mb_u32(b, c->clocks[i].when);
	}
	mb_u8(b, (uint8_t)(t->cap_user_time | t->cap_user_time_zero << 1));
	mb_u16(b, t->time_shift);
	mb_u32(b, t->time_mult);
	mb_u64(b, t->time_zero);
	w_section(w, HT_RAWSEC_CLOCKS, b, NULL, 0);
}

static void write_maps(struct writer *w, struct mbuf *b, const struct ht_rawcap_maps *m)
{
	mb_u64(b, m->taken_ns);
	mb_u32(b, (uint32_t)m->count);
	for (size_t i = 0; i < m->count; i++) {
		const struct ht_rawcap_mapping *x = &m->v[i];
		size_t path_len = x->path ? strnlen(x->path, MAX_PATH_BYTES) : 0;
		char perms[4] = {0};

		memcpy(perms, x->perms, strnlen(x->perms, 4));
		mb_u64(b, x->start);
		mb_u64(b, x->end);
		mb_u64(b, x->offset);
		mb_put(b, perms, 4);
		mb_u32(b, (uint32_t)path_len);
		mb_put(b, x->path, path_len);
		mb_str16(b, x->build_id, MAX_BUILD_ID_HEX);
	}
	w_section(w, HT_RAWSEC_MAPS, b, NULL, 0);
}

static void write_window(struct writer *w, struct mbuf *b, const struct ht_fr_window *x)
{
	mb_u64(b, x->t0);
	mb_u64(b, x->t1);
	mb_u8(b, x->clipped);
	mb_u64(b, x->covered_from_ns);
	mb_u64(b, x->skipped_records);
	mb_u64(b, x->count);
	for (size_t i = 0; i < x->count; i++)
		put_fr_event(b, &x->events[i]);
	mb_u32(b, x->ncpus);
	for (unsigned int c = 0; c < x->ncpus; c++) {
		static const struct ht_fr_event none;
		bool valid = x->entry_valid && x->entry_valid[c];

		mb_u8(b, valid);
		put_fr_event(b, valid && x->entry_switch ? &x->entry_switch[c] : &none);
	}
	w_section(w, HT_RAWSEC_KWINDOW, b, NULL, 0);
}

/* COMMS: entries back to back, no count (the payload length says it). */
static void write_comms(struct writer *w, struct mbuf *b, const struct ht_rawcap *c)
{
	for (size_t i = 0; i < c->ncomms; i++) {
		char comm[HT_COMM_LEN] = {0};

		memcpy(comm, c->comms[i].comm, strnlen(c->comms[i].comm, HT_COMM_LEN - 1));
		mb_u32(b, c->comms[i].pid);
		mb_put(b, comm, HT_COMM_LEN);
	}
	w_section(w, HT_RAWSEC_COMMS, b, NULL, 0);
}

/* KSYMS: (start, name) pairs back to back. */
static void write_ksyms(struct writer *w, struct mbuf *b, const struct ht_rawcap *c)
{
	for (size_t i = 0; i < c->nksyms; i++) {
		mb_u64(b, c->ksyms[i].start);
		mb_str16(b, c->ksyms[i].name, MAX_KSYM_NAME);
	}
	w_section(w, HT_RAWSEC_KSYMS, b, NULL, 0);
}

static int check_writable(const struct ht_rawcap *c)
{
	if (c->nclocks > UINT32_MAX)
		return ht_fail("raw capture: too many clock pairs");
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i].len && !c->streams[i].data)
			return ht_fail("raw capture: PT stream %zu has no data", i);
	for (size_t i = 0; i < c->nsidebands; i++)
		if (c->sidebands[i].len && !c->sidebands[i].data)
			return ht_fail("raw capture: sideband %zu has no data", i);
	for (size_t i = 0; i < c->nmaps; i++)
		if (c->maps[i].count > UINT32_MAX || (c->maps[i].count && !c->maps[i].v))
			return ht_fail("raw capture: bad mapping list %zu", i);
	if (c->vdso_len && !c->vdso)
		return ht_fail("raw capture: the vdso has no data");
	if (c->has_window && c->window.count && !c->window.events)
		return ht_fail("raw capture: the kernel window has no events");
	if (c->ncomms && !c->comms)
		return ht_fail("raw capture: the task names have no data");
	/* The reader refuses anything else; ht_rawcap_add_comm keeps this. */
	for (size_t i = 1; i < c->ncomms; i++)
		if (c->comms[i - 1].pid >= c->comms[i].pid)
			return ht_fail("raw capture: task names out of pid order (%u after %u)",
				       c->comms[i].pid, c->comms[i - 1].pid);
	return 0;
}

int ht_rawcap_write_fd(int fd, const struct ht_rawcap *c)
{
	struct writer *w;
	struct mbuf b = {0}, h = {0};
	int err;

	if (check_writable(c))
		return -1;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ht_fail("out of memory writing a raw capture");
	w->fd = fd;
	mb_put(&h, HT_RAWCAP_MAGIC, 8);
	mb_u16(&h, HT_RAWCAP_MAJOR);
	mb_u16(&h, HT_RAWCAP_MINOR);
	mb_u32(&h, FILE_HEADER_BYTES);
	if (h.oom)
		w->err = ENOMEM;
	w_put(w, h.p, h.len);
	free(h.p);

	write_meta(w, &b, c);
	if (c->has_breach)
		write_breach(w, &b, &c->breach);
	write_pt_config(w, &b, &c->pt);
	write_cpuid(w, &b, &c->cpuid);
	write_clocks(w, &b, c);
	for (size_t i = 0; i < c->nstreams; i++) {
		const struct ht_rawcap_stream *s = &c->streams[i];

		mb_u32(&b, s->cpu);
		mb_u32(&b, (uint32_t)s->tid);
		mb_u64(&b, s->ring_bytes);
		mb_u64(&b, s->aux_head);
		mb_u64(&b, s->frozen_ns);
		w_section(w, HT_RAWSEC_PT_STREAM, &b, s->data, s->len);
	}
	for (size_t i = 0; i < c->nsidebands; i++) {
		const struct ht_rawcap_sideband *s = &c->sidebands[i];

		mb_u32(&b, s->cpu);
		mb_u64(&b, s->frozen_ns);
		w_section(w, HT_RAWSEC_SIDEBAND, &b, s->data, s->len);
	}
	for (size_t i = 0; i < c->nmaps; i++)
		write_maps(w, &b, &c->maps[i]);
	if (c->vdso_len) {
		mb_u64(&b, c->vdso_addr);
		w_section(w, HT_RAWSEC_VDSO, &b, c->vdso, c->vdso_len);
	}
	if (c->has_window)
		write_window(w, &b, &c->window);
	if (c->ncomms)
		write_comms(w, &b, c);
	if (c->nksyms)
		write_ksyms(w, &b, c);
	mb_u32(&b, w->sections);
	w_section(w, HT_RAWSEC_END, &b, NULL, 0);
	w_flush(w);
	free(b.p);
	err = w->err;
	free(w);
	if (err)
		return ht_fail("cannot write the raw capture: %s", strerror(err));
	return 0;
}

/* Rename without replacing; filesystems without RENAME_NOREPLACE get link + unlink. */
static int rename_noreplace(const char *from, const char *to)
{
	if (!renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(from, to))
		return -1;
	unlink(from);
	return 0;
}

/* Write into a fresh temporary file in DIR; the caller renames it. */
static int write_temp(const char *dir, const struct ht_rawcap *c, struct ht_output_file *f)
{
	if (ht_output_begin(dir, f))
		return -1;
	if (ht_rawcap_write_fd(f->fd, c)) {
		ht_output_abort(f);
		return -1;
	}
	if (fsync(f->fd)) {
		int err = errno;

		ht_output_abort(f);
		return ht_fail("cannot write the raw capture in %s: %s", dir, strerror(err));
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

int ht_rawcap_write(const char *path, const struct ht_rawcap *c)
{
	char copy[PATH_MAX];
	struct ht_output_file f;

	if (strlen(path) >= sizeof(copy))
		return ht_fail("raw capture path too long: %s", path);
	strcpy(copy, path);
	if (write_temp(dirname(copy), c, &f))
		return -1;
	if (rename_noreplace(f.tmp_path, path)) {
		int err = errno;

		unlink(f.tmp_path);
		return ht_fail("cannot name the raw capture %s: %s", path, strerror(err));
	}
	return 0;
}

int ht_rawcap_save(const char *dir, const char *base, const struct ht_rawcap *c, char *final,
		   size_t len)
{
	struct ht_output_file f;

	if (write_temp(dir, c, &f))
		return -1;
	for (int n = 0; n < 10000; n++) {
		if (n == 0)
			snprintf(final, len, "%s/%s" HT_RAWCAP_SUFFIX, dir, base);
		else
			snprintf(final, len, "%s/%s-%d" HT_RAWCAP_SUFFIX, dir, base, n);
		if (!rename_noreplace(f.tmp_path, final))
			return 0;
		if (errno != EEXIST) {
			int err = errno;

			unlink(f.tmp_path);
			return ht_fail("cannot name the raw capture %s: %s", final, strerror(err));
		}
	}
	unlink(f.tmp_path);
	return ht_fail("cannot name the raw capture: %s/%s-N" HT_RAWCAP_SUFFIX " all exist", dir,
		       base);
}

/* ---- Reading ---- */

struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd_left(const struct rd *r)
{
	return (uint64_t)(r->end - r->p);
}

static const uint8_t *rd_take(struct rd *r, uint64_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || rd_left(r) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return p;
}

static uint64_t rd_uint(struct rd *r, int bytes)
{
	const uint8_t *p = rd_take(r, (uint64_t)bytes);
	uint64_t v = 0;

	if (!p)
		return 0;
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint8_t rd_u8(struct rd *r)
{
	return (uint8_t)rd_uint(r, 1);
}

static uint16_t rd_u16(struct rd *r)
{
	return (uint16_t)rd_uint(r, 2);
}

static uint32_t rd_u32(struct rd *r)
{
	return (uint32_t)rd_uint(r, 4);
}

static uint64_t rd_u64(struct rd *r)
{
	return rd_uint(r, 8);
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

/* Grow *V (of *CAP elements of SIZE) to hold COUNT + 1. */
static int grow(void **v, size_t *cap, size_t count, size_t size)
{
	void *p;
	size_t n;

	if (count < *cap)
		return 0;
	n = *cap ? *cap * 2 : 8;
	p = realloc(*v, n * size);
	if (!p)
		return -1;
	memset((uint8_t *)p + *cap * size, 0, (n - *cap) * size);
	*v = p;
	*cap = n;
	return 0;
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

/* ---- cpuid ---- */

void ht_cpuid_family_model(uint32_t eax, unsigned int *family, unsigned int *model,
			   unsigned int *stepping)
{
	unsigned int f = (eax >> 8) & 0xf, m = (eax >> 4) & 0xf;

	if (f == 0xf)
		f += (eax >> 20) & 0xff;
	if (f == 0x6 || f >= 0xf)
		m += ((eax >> 16) & 0xf) << 4;
	*family = f;
	*model = m;
	*stepping = eax & 0xf;
}

uint64_t ht_cpuid_tsc_hz(const struct ht_cpuid_values *c)
{
	if (c->max_leaf < 0x15 || !c->leaf15[0] || !c->leaf15[1] || !c->leaf15[2])
		return 0;
	return (uint64_t)c->leaf15[2] * c->leaf15[1] / c->leaf15[0];
}

/* ---- TSC -> CLOCK_MONOTONIC ---- */

static int pair_cmp(const void *a, const void *b)
{
	const struct ht_clock_pair *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->spread_ns < y->spread_ns ? -1 : x->spread_ns > y->spread_ns;
}

int ht_tsc_map_init(struct ht_tsc_map *m, const struct ht_clock_pair *pairs, size_t n,
		    uint64_t fallback_hz)
{
	size_t kept = 0;

	memset(m, 0, sizeof(*m));
	if (!n)
		return ht_fail("no TSC/CLOCK_MONOTONIC pairs: PT times cannot be placed");
	m->pairs = malloc(n * sizeof(*pairs));
	if (!m->pairs)
		return ht_fail("out of memory");
	memcpy(m->pairs, pairs, n * sizeof(*pairs));
	qsort(m->pairs, n, sizeof(*pairs), pair_cmp);
	/*
	 * Same TSC twice: keep the tighter. A pair whose time goes backwards
	 * from the one before is noise larger than its bracket: drop it.
	 */
	for (size_t i = 0; i < n; i++) {
		if (kept && m->pairs[i].tsc == m->pairs[kept - 1].tsc)
			continue;
		if (kept && m->pairs[i].mono_ns <= m->pairs[kept - 1].mono_ns)
			continue;
		m->pairs[kept++] = m->pairs[i];
	}
	m->n = kept;
	if (kept >= 2) {
		m->ns_span = m->pairs[kept - 1].mono_ns - m->pairs[0].mono_ns;
		m->tsc_span = m->pairs[kept - 1].tsc - m->pairs[0].tsc;
		return 0;
	}
	if (fallback_hz) {
		m->ns_span = 1000000000ULL;
		m->tsc_span = fallback_hz;
		return 0;
	}
	ht_tsc_map_free(m);
	return ht_fail("one TSC/CLOCK_MONOTONIC pair and no TSC frequency: PT times cannot be "
		       "placed");
}

void ht_tsc_map_free(struct ht_tsc_map *m)
{
	free(m->pairs);
	memset(m, 0, sizeof(*m));
}

uint64_t ht_tsc_to_mono(const struct ht_tsc_map *m, uint64_t tsc)
{
	const struct ht_clock_pair *first, *last;
	size_t lo = 0, hi;

	if (!m->n || !m->tsc_span)
		return 0;
	first = &m->pairs[0];
	last = &m->pairs[m->n - 1];
	if (tsc < first->tsc)
		return ht_tsc_line_ns(first->tsc, first->mono_ns, tsc, m->ns_span, m->tsc_span);
	if (tsc >= last->tsc)
		return ht_tsc_line_ns(last->tsc, last->mono_ns, tsc, m->ns_span, m->tsc_span);
	/* The last pair at or before TSC; the next one is after it. */
	hi = m->n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->pairs[mid].tsc <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	return ht_tsc_line_ns(m->pairs[lo].tsc, m->pairs[lo].mono_ns, tsc,
			      m->pairs[hi].mono_ns - m->pairs[lo].mono_ns,
			      m->pairs[hi].tsc - m->pairs[lo].tsc);
}

/* ---- Sideband records ---- */

static int sb_push(struct ht_sb_set *s, struct ht_sb_event **e)
{
	if (grow((void **)&s->v, &s->cap, s->count, sizeof(*s->v)))
		return ht_fail("out of memory parsing the sideband");
	*e = &s->v[s->count];
	memset(*e, 0, sizeof(**e));
	return 0;
}

static int sb_string(struct ht_sb_set *s, const uint8_t *p, size_t n, size_t *offset)
{
	if (s->strings_len + n + 1 > s->strings_cap) {
		size_t cap = s->strings_cap ? s->strings_cap : 1024;
		char *v;

		while (cap < s->strings_len + n + 1)
			cap *= 2;
		v = realloc(s->strings, cap);
		if (!v)
			return ht_fail("out of memory parsing the sideband");
		s->strings = v;
		s->strings_cap = cap;
	}
	memcpy(s->strings + s->strings_len, p, n);
	s->strings[s->strings_len + n] = 0;
	*offset = s->strings_len;
	s->strings_len += n + 1;
	return 0;
}

/* Bytes of the sample_id block that ends each non-sample record. */
static size_t sample_id_bytes(uint64_t t)
{
	size_t n = 0;

	n += (t & PERF_SAMPLE_TID) ? 8 : 0;
	n += (t & PERF_SAMPLE_TIME) ? 8 : 0;
	n += (t & PERF_SAMPLE_ID) ? 8 : 0;
	n += (t & PERF_SAMPLE_STREAM_ID) ? 8 : 0;
	n += (t & PERF_SAMPLE_CPU) ? 8 : 0;
	n += (t & PERF_SAMPLE_IDENTIFIER) ? 8 : 0;
	return n;
}

static void parse_sample_id(struct rd *r, uint64_t t, struct ht_sb_event *e)
{
	if (t & PERF_SAMPLE_TID) {
		e->pid = rd_u32(r);
		e->tid = rd_u32(r);
	}
	if (t & PERF_SAMPLE_TIME)
		e->time_ns = rd_u64(r);
	if (t & PERF_SAMPLE_ID)
		rd_u64(r);
	if (t & PERF_SAMPLE_STREAM_ID)
		rd_u64(r);
	if (t & PERF_SAMPLE_CPU) {
		e->cpu = rd_u32(r);
		rd_u32(r);
	}
}

/* A NUL-terminated string within the body's remaining bytes. */
static int sb_body_string(struct ht_sb_set *s, struct rd *body, struct ht_sb_event *e)
{
	const uint8_t *nul = memchr(body->p, 0, rd_left(body));

	if (!nul)
		return 1;
	return sb_string(s, body->p, (size_t)(nul - body->p), &e->path_offset) ? -1 : 0;
}

/* One record; 1 when it is malformed, -1 on memory. */
static int sb_record(struct ht_sb_set *s, const uint8_t *rec, uint16_t size, uint64_t sample_type)
{
	struct perf_event_header h;
	size_t id_bytes = sample_id_bytes(sample_type);
	struct ht_sb_event *e = NULL;
	struct rd body, id;
	int rc = 0;

	memcpy(&h, rec, sizeof(h));
	if (h.type == PERF_RECORD_SAMPLE || size < sizeof(h) + id_bytes)
		return h.type == PERF_RECORD_SAMPLE ? (s->unknown++, 0) : 1;
	body = (struct rd){rec + sizeof(h), rec + size - id_bytes, false};
	id = (struct rd){rec + size - id_bytes, rec + size, false};
	switch (h.type) {
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
	case PERF_RECORD_COMM:
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
	case PERF_RECORD_LOST:
	case PERF_RECORD_ITRACE_START:
		break;
	default:
		s->unknown++;
		return 0;
	}
	if (sb_push(s, &e))
		return -1;
	parse_sample_id(&id, sample_type, e);
	switch (h.type) {
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		e->kind =
			(h.misc & PERF_RECORD_MISC_SWITCH_OUT) ? HT_SB_SWITCH_OUT : HT_SB_SWITCH_IN;
		e->preempt = (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
		break;
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		e->kind = HT_SB_MMAP;
		e->pid = rd_u32(&body);
		e->tid = rd_u32(&body);
		e->addr = rd_u64(&body);
		e->len = rd_u64(&body);
		e->pgoff = rd_u64(&body);
		if (h.type == PERF_RECORD_MMAP2) {
			rd_take(&body, 24); /* device and inode, or the build-id */
			e->prot = rd_u32(&body);
			e->flags = rd_u32(&body);
		}
		if (!body.bad)
			rc = sb_body_string(s, &body, e);
		break;
	case PERF_RECORD_COMM:
		e->kind = HT_SB_COMM;
		e->exec = (h.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
		e->pid = rd_u32(&body);
		e->tid = rd_u32(&body);
		if (!body.bad)
			rc = sb_body_string(s, &body, e);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		e->kind = h.type == PERF_RECORD_FORK ? HT_SB_FORK : HT_SB_EXIT;
		e->pid = rd_u32(&body);
		e->ppid = rd_u32(&body);
		e->tid = rd_u32(&body);
		e->ptid = rd_u32(&body);
		break;
	case PERF_RECORD_LOST:
		e->kind = HT_SB_LOST;
		rd_u64(&body);
		e->lost = rd_u64(&body);
		break;
	case PERF_RECORD_ITRACE_START:
		e->kind = HT_SB_ITRACE_START;
		e->pid = rd_u32(&body);
		e->tid = rd_u32(&body);
		break;
	}
	if (rc < 0)
		return -1;
	if (rc || body.bad || id.bad)
		return 1;
	s->count++;
	return 0;
}

int ht_sb_parse(const uint8_t *data, size_t len, uint64_t sample_type, struct ht_sb_set *out)
{
	size_t at = 0;

	while (len - at >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		int rc;

		memcpy(&h, data + at, sizeof(h));
		/* A size that cannot be right: nothing after it can be trusted. */
		if (h.size < sizeof(h) || h.size > len - at) {
			out->malformed++;
			return 0;
		}
		rc = sb_record(out, data + at, h.size, sample_type);
		if (rc < 0)
			return -1;
		out->malformed += (uint64_t)rc;
		at += h.size;
	}
	if (at != len)
		out->malformed++;
	return 0;
}

void ht_sb_set_free(struct ht_sb_set *s)
{
	free(s->v);
	free(s->strings);
	memset(s, 0, sizeof(*s));
}

int ht_perf_backward_linearize(const uint8_t *ring, size_t size, uint64_t head, uint8_t **out,
			       size_t *len)
{
	uint64_t mask = size - 1, walked = 0;
	size_t *starts, n = 0, total = 0;
	uint8_t *buf;

	*out = NULL;
	*len = 0;
	if (!size || (size & mask))
		return ht_fail("a sideband ring of %zu bytes is not a power of two", size);
	starts = malloc((size / sizeof(struct perf_event_header) + 1) * sizeof(*starts));
	if (!starts)
		return ht_fail("out of memory copying the sideband");
	/* Newest at head, older ones after it, up to a never-written or overwritten end. */
	while (walked + sizeof(struct perf_event_header) <= size) {
		struct perf_event_header h;
		size_t at = (size_t)((head + walked) & mask), first;

		first = size - at < sizeof(h) ? size - at : sizeof(h);
		memcpy(&h, ring + at, first);
		memcpy((uint8_t *)&h + first, ring, sizeof(h) - first);
		if (h.size < sizeof(h) || (h.size & 7) || walked + h.size > size)
			break;
		starts[n++] = (size_t)walked;
		walked += h.size;
	}
	total = (size_t)walked;
	buf = malloc(total ? total : 1);
	if (!buf) {
		free(starts);
		return ht_fail("out of memory copying the sideband");
	}
	/* Oldest first: the records in reverse order of the walk. */
	for (size_t i = n, pos = 0; i-- > 0;) {
		size_t rec_end = i + 1 < n ? starts[i + 1] : total;
		size_t rec_len = rec_end - starts[i];
		size_t at = (size_t)((head + starts[i]) & mask);
		size_t first = size - at < rec_len ? size - at : rec_len;

		memcpy(buf + pos, ring + at, first);
		memcpy(buf + pos + first, ring, rec_len - first);
		pos += rec_len;
	}
	free(starts);
	*out = buf;
	*len = total;
	return 0;
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
