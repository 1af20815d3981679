/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the raw capture's writer, reader and sideband parser share, for this
 * folder only: the format's sizes and limits, its checksum, and a bounded
 * little-endian reader (a short read marks it bad, never overruns).
 */
#ifndef HT_RAWCAP_FORMAT_H
#define HT_RAWCAP_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
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
/* MAPS before 1.5 ended after the mappings: the capture's one process. */
#define MAPS_MINOR_PID 5

/* Records are written field by field: a change of layout must be met here. */
_Static_assert(sizeof(struct ht_flight_record) == 32,
	       "ht_flight_record changed: update put_fr_event/rd_fr_event and FR_EVENT_BYTES");
/* block_stack_seq and syscall_fd serve the live session only: what they led to is in flags. */
_Static_assert(sizeof(struct ht_breach) == 424,
	       "ht_breach changed: update write_breach/parse_breach");
/* COMMS entries are fixed-size: a longer comm would be a new section. */
_Static_assert(HT_COMM_LEN == 16, "HT_COMM_LEN changed: COMMS entries are pid + 16 bytes");

static inline uint32_t crc32_of(uint32_t crc, const void *data, uint64_t len)
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

struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static inline uint64_t rd_left(const struct rd *r)
{
	return (uint64_t)(r->end - r->p);
}

static inline const uint8_t *rd_take(struct rd *r, uint64_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || rd_left(r) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return p;
}

static inline uint64_t rd_uint(struct rd *r, int bytes)
{
	const uint8_t *p = rd_take(r, (uint64_t)bytes);
	uint64_t v = 0;

	if (!p)
		return 0;
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint8_t rd_u8(struct rd *r)
{
	return (uint8_t)rd_uint(r, 1);
}

static inline uint16_t rd_u16(struct rd *r)
{
	return (uint16_t)rd_uint(r, 2);
}

static inline uint32_t rd_u32(struct rd *r)
{
	return (uint32_t)rd_uint(r, 4);
}

static inline uint64_t rd_u64(struct rd *r)
{
	return rd_uint(r, 8);
}

/* Grow *V (of *CAP elements of SIZE) to hold COUNT + 1. */
static inline int grow(void **v, size_t *cap, size_t count, size_t size)
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

#endif /* HT_RAWCAP_FORMAT_H */
