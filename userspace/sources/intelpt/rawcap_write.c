// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Writing a raw capture. Every field is written one by one, little-endian,
 * never as a struct image, so the layout is the file format's and not the
 * compiler's; a file is written under a temporary name, then renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "base/output.h"
#include "sources/intelpt/rawcap.h"
#include "sources/intelpt/rawcap_format.h"

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
	/* 1.4: its pids in its own pid namespace (a container's), 0 in the initial one. */
	mb_u32(b, x->ns_tid);
	mb_u32(b, x->ns_tgid);
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
	mb_u32(b, (uint32_t)m->pid); /* 1.5 */
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

/* Write into a fresh temporary file in DIR; the caller renames it. */
static int write_temp(const char *dir, const struct ht_rawcap *c, struct ht_output_file *f)
{
	if (ht_output_begin(dir, f))
		return -1;
	if (ht_rawcap_write_fd(f->fd, c)) {
		ht_output_abort(f);
		return -1;
	}
	return ht_output_sync(f, dir, "raw capture");
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
	if (ht_output_rename_noreplace(f.tmp_path, path)) {
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
	return ht_output_name(f.tmp_path, dir, base, HT_RAWCAP_SUFFIX, "raw capture", final, len);
}
