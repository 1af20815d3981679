// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the raw capture reader (userspace/sources/intelpt/rawcap.c): any
 * input gives a capture or one line saying why not, never a crash, and
 * nothing is left allocated on failure. Each input is read twice: as it
 * is, and with its section checksums made right, so that mutations reach
 * the section parsers behind the CRC. What reads is parsed further
 * (sideband records, the TSC map) and written back: the copy must read
 * again to the same capture.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "sources/intelpt/rawcap.h"

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Recompute each section's CRC where the section's length holds. */
static void fix_crcs(uint8_t *b, size_t len)
{
	size_t at = 16;

	if (len >= 16 && get32(b + 12) >= 16 && get32(b + 12) <= len)
		at = get32(b + 12);
	while (at + 16 <= len) {
		uint64_t plen = get64(b + at + 8);
		uint32_t crc;

		if (plen > len - at - 16)
			return;
		crc = (uint32_t)crc32(0, b + at + 16, (uInt)plen);
		for (int i = 0; i < 4; i++)
			b[at + 4 + i] = (uint8_t)(crc >> (8 * i));
		at += 16 + plen;
	}
}

static void check_empty(const struct ht_rawcap *c)
{
	if (c->streams || c->nstreams || c->sidebands || c->maps || c->clocks || c->vdso ||
	    c->window.events || c->window.entry_switch || c->window.entry_valid || c->comms ||
	    c->ncomms || c->ksyms || c->nksyms)
		abort();
}

static void check_sideband(const struct ht_rawcap *c)
{
	for (size_t i = 0; i < c->nsidebands; i++) {
		struct ht_sb_set s;

		memset(&s, 0, sizeof(s));
		if (ht_sb_parse(c->sidebands[i].data, c->sidebands[i].len,
				c->pt.sideband_sample_type, &s))
			abort();
		for (size_t e = 0; e < s.count; e++)
			if (s.strings && s.v[e].path_offset >= s.strings_len)
				abort();
		ht_sb_set_free(&s);
	}
}

static void check_clocks(const struct ht_rawcap *c)
{
	struct ht_tsc_map m;
	uint64_t prev = 0;

	if (ht_tsc_map_init(&m, c->clocks, c->nclocks, ht_cpuid_tsc_hz(&c->cpuid)))
		return;
	/* The mapping never goes backwards. */
	for (size_t i = 0; i < m.n; i++) {
		uint64_t t = ht_tsc_to_mono(&m, m.pairs[i].tsc);

		if (t < prev || t != m.pairs[i].mono_ns)
			abort();
		prev = t;
		if (m.pairs[i].tsc != UINT64_MAX && ht_tsc_to_mono(&m, m.pairs[i].tsc + 1) < t)
			abort();
	}
	ht_tsc_to_mono(&m, 0);
	ht_tsc_to_mono(&m, UINT64_MAX);
	ht_tsc_map_free(&m);
}

static void check_same(const struct ht_rawcap *a, const struct ht_rawcap *b)
{
	if (a->pid != b->pid || strcmp(a->comm, b->comm) || strcmp(a->kind, b->kind) ||
	    a->nstreams != b->nstreams || a->nsidebands != b->nsidebands || a->nmaps != b->nmaps ||
	    a->nclocks != b->nclocks || a->vdso_len != b->vdso_len ||
	    a->has_breach != b->has_breach || a->has_window != b->has_window ||
	    a->window.count != b->window.count || a->window.ncpus != b->window.ncpus ||
	    memcmp(&a->pt, &b->pt, sizeof(a->pt)) ||
	    memcmp(&a->cpuid, &b->cpuid, sizeof(a->cpuid)) ||
	    memcmp(&a->breach, &b->breach, sizeof(a->breach)) ||
	    memcmp(&a->time_conv, &b->time_conv, sizeof(a->time_conv)) ||
	    strcmp(a->kernel, b->kernel) || strcmp(a->cpu_model, b->cpu_model) ||
	    strcmp(a->cmdline, b->cmdline) || a->ncomms != b->ncomms || a->nksyms != b->nksyms ||
	    (a->ncomms && memcmp(a->comms, b->comms, a->ncomms * sizeof(*a->comms))) ||
	    (a->window.count && memcmp(a->window.events, b->window.events,
				       a->window.count * sizeof(*a->window.events))))
		abort();
	for (size_t i = 0; i < a->nstreams; i++)
		if (a->streams[i].len != b->streams[i].len ||
		    (a->streams[i].len &&
		     memcmp(a->streams[i].data, b->streams[i].data, a->streams[i].len)))
			abort();
	for (size_t i = 0; i < a->nksyms; i++)
		if (a->ksyms[i].start != b->ksyms[i].start || strcmp(a->ksyms[i].name, b->ksyms[i].name))
			abort();
	for (size_t i = 0; i < a->nmaps; i++) {
		if (a->maps[i].count != b->maps[i].count)
			abort();
		for (size_t j = 0; j < a->maps[i].count; j++)
			if (strcmp(a->maps[i].v[j].path, b->maps[i].v[j].path) ||
			    strcmp(a->maps[i].v[j].perms, b->maps[i].v[j].perms) ||
			    !a->maps[i].v[j].build_id != !b->maps[i].v[j].build_id)
				abort();
	}
}

/* Write C and read it back: the same capture. */
static void round_trip(const struct ht_rawcap *c)
{
	int fd = memfd_create("rawcap", 0);
	struct ht_rawcap again;
	char err[512];
	uint8_t *buf;
	off_t len;

	if (fd < 0)
		return;
	if (ht_rawcap_write_fd(fd, c))
		abort();
	len = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)len);
	if (!buf || pread(fd, buf, (size_t)len, 0) != len)
		abort();
	close(fd);
	if (ht_rawcap_read_mem(buf, (size_t)len, "again", &again, err, sizeof(err)))
		abort();
	check_same(c, &again);
	ht_rawcap_free(&again);
	free(buf);
}

static void one(const uint8_t *data, size_t size)
{
	struct ht_rawcap c;
	char err[512];

	if (ht_rawcap_read_mem(data, size, "fuzz", &c, err, sizeof(err))) {
		/* One line that says why, and nothing left behind. */
		if (!err[0] || strchr(err, '\n'))
			abort();
		check_empty(&c);
		return;
	}
	if (c.format_major != HT_RAWCAP_MAJOR || strlen(c.comm) >= sizeof(c.comm))
		abort();
	for (size_t i = 0; i < c.nstreams; i++)
		if (!c.streams[i].data != !c.streams[i].len)
			abort();
	for (size_t i = 0; i < c.nmaps; i++)
		for (size_t j = 0; j < c.maps[i].count; j++)
			if (!c.maps[i].v[j].path || c.maps[i].v[j].end < c.maps[i].v[j].start)
				abort();
	if (c.window.ncpus && (!c.window.entry_switch || !c.window.entry_valid))
		abort();
	check_sideband(&c);
	check_clocks(&c);
	round_trip(&c);
	ht_rawcap_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	one(data, size);
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	fix_crcs(copy, size);
	one(copy, size);
	free(copy);
	return 0;
}
