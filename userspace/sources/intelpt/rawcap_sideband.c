// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sideband: perf records (switches, mmaps, comm, fork/exit) parsed out
 * of a capture, and a ring written backward made into records oldest first.
 */
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "sources/intelpt/rawcap.h"
#include "sources/intelpt/rawcap_format.h"

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
