// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Intel PT decode with libipt's block decoder, in the shape of libipt's
 * ptxed: sync forward to a PSB, drain the events libipt has pending, take
 * the next block, and on an error report it with its offset and sync
 * forward again. The block decoder is several times faster than the
 * instruction decoder; we ask it to end a block at every call and jump so
 * that a block is a run of consecutive instructions and each call shows.
 */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sources/intelpt/intelpt_decode.h"
#include "base/log.h"
#include "base/tsc.h"

#define PT_SYSFS "/sys/bus/event_source/devices/intel_pt/"

/* CPU. */

static unsigned read_sysfs_uint(const char *name)
{
	char path[256], text[64] = "";
	unsigned value = 0;
	FILE *f;

	snprintf(path, sizeof(path), PT_SYSFS "%s", name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(text, sizeof(text), f))
		sscanf(text, "%u", &value);
	fclose(f);
	return value;
}

/* sysfs tsc_art_ratio reads "EBX:EAX" of cpuid 0x15: the kernel writes tsc_art_num:tsc_art_den. */
static void read_tsc_art_ratio(uint32_t *eax, uint32_t *ebx)
{
	char text[64] = "";
	unsigned num = 0, den = 0;
	FILE *f = fopen(PT_SYSFS "tsc_art_ratio", "r");

	*eax = *ebx = 0;
	if (!f)
		return;
	if (fgets(text, sizeof(text), f) && sscanf(text, "%u:%u", &num, &den) == 2) {
		*eax = den;
		*ebx = num;
	}
	fclose(f);
}

void ht_pt_cpu_from_cpuid(struct ht_pt_cpu_info *out, const char *vendor, uint32_t leaf1_eax)
{
	unsigned family = (leaf1_eax >> 8) & 0xf, model = (leaf1_eax >> 4) & 0xf;

	if (family == 0xf)
		family += (leaf1_eax >> 20) & 0xff;
	if (family == 0x6 || family >= 0xf)
		model += ((leaf1_eax >> 16) & 0xf) << 4;
	out->vendor_intel = vendor && !strcmp(vendor, "GenuineIntel");
	out->family = (uint16_t)family;
	out->model = (uint8_t)model;
	out->stepping = leaf1_eax & 0xf;
}

int ht_pt_cpu_info_local(struct ht_pt_cpu_info *out)
{
	unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
	char vendor[13] = "";

	memset(out, 0, sizeof(*out));
	if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
		memcpy(vendor, &ebx, 4);
		memcpy(vendor + 4, &edx, 4);
		memcpy(vendor + 8, &ecx, 4);
	}
	eax = 0;
	__get_cpuid(1, &eax, &ebx, &ecx, &edx);
	ht_pt_cpu_from_cpuid(out, vendor, eax);
	out->nom_freq = (uint8_t)read_sysfs_uint("max_nonturbo_ratio");
	read_tsc_art_ratio(&out->tsc_art_eax, &out->tsc_art_ebx);
	out->tsc = 1;
	out->mtc = 1;
	out->mtc_freq = 3;
	return 0;
}

/* Image. */

/* Code we can read ourselves: a file mapped read-only, or a copy of memory. */
struct code_region {
	uint64_t start, end;
	const uint8_t *bytes; /* the byte at start */
	void *map;	      /* what to munmap, or NULL for a heap copy */
	size_t map_len;
	uint8_t *copy;
};

struct ht_pt_image {
	struct pt_image_section_cache *iscache;
	struct pt_image *image;
	struct code_region *regions; /* sorted by start */
	size_t count;
	size_t skipped;
	char skip_reason[256];
};

static void skip_mapping(struct ht_pt_image *img, const struct ht_pt_mapping *m, const char *why)
{
	if (!img->skipped++)
		snprintf(img->skip_reason, sizeof(img->skip_reason), "%s at %#" PRIx64 ": %s",
			 m->path ? m->path : "memory", m->start, why);
}

/* Map the part of the file that backs M, clamped to the file's size. */
static int map_file_region(const struct ht_pt_mapping *m, struct code_region *r, uint64_t *size)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t aligned = m->file_offset & ~(uint64_t)(page - 1);
	uint64_t lead = m->file_offset - aligned;
	struct stat st;
	void *p;
	int fd = open(m->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size <= m->file_offset) {
		close(fd);
		return -EINVAL;
	}
	*size = m->end - m->start;
	if (*size > (uint64_t)st.st_size - m->file_offset)
		*size = (uint64_t)st.st_size - m->file_offset;
	p = mmap(NULL, *size + lead, PROT_READ, MAP_PRIVATE, fd, (off_t)aligned);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	r->map = p;
	r->map_len = *size + lead;
	r->bytes = (const uint8_t *)p + lead;
	r->start = m->start;
	r->end = m->start + *size;
	return 0;
}

static int add_file_mapping(struct ht_pt_image *img, const struct ht_pt_mapping *m)
{
	struct code_region *r = &img->regions[img->count];
	uint64_t size = 0;
	int isid, err = map_file_region(m, r, &size);

	if (err) {
		skip_mapping(img, m, strerror(-err));
		return 0;
	}
	isid = pt_iscache_add_file(img->iscache, m->path, m->file_offset, size, m->start);
	if (isid < 0 || pt_image_add_cached(img->image, img->iscache, isid, NULL) < 0) {
		munmap(r->map, r->map_len);
		skip_mapping(img, m, "libipt refused the section");
		return 0;
	}
	img->count++;
	return 0;
}

static int add_memory_mapping(struct ht_pt_image *img, const struct ht_pt_mapping *m)
{
	struct code_region *r = &img->regions[img->count];
	size_t len = m->data_len;

	if (len > m->end - m->start)
		len = m->end - m->start;
	if (!len) {
		skip_mapping(img, m, "no bytes");
		return 0;
	}
	r->copy = malloc(len);
	if (!r->copy)
		return ht_fail("out of memory for a %zu-byte code copy", len);
	memcpy(r->copy, m->data, len);
	r->bytes = r->copy;
	r->start = m->start;
	r->end = m->start + len;
	img->count++;
	return 0;
}

static const struct code_region *find_region(const struct ht_pt_image *img, uint64_t addr)
{
	size_t lo = 0, hi = img->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (img->regions[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < img->count && img->regions[lo].start <= addr)
		return &img->regions[lo];
	return NULL;
}

size_t ht_pt_image_read(const struct ht_pt_image *img, uint64_t addr, void *buf, size_t len)
{
	const struct code_region *r = img ? find_region(img, addr) : NULL;

	if (!r)
		return 0;
	if (len > r->end - addr)
		len = r->end - addr;
	memcpy(buf, r->bytes + (addr - r->start), len);
	return len;
}

/* libipt reads the memory copies (vdso, JIT code) through this. */
static int read_memory(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip,
		       void *context)
{
	size_t got = ht_pt_image_read(context, ip, buffer, size);

	(void)asid;
	return got ? (int)got : -pte_nomap;
}

static int region_cmp(const void *a, const void *b)
{
	const struct code_region *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Overlapping regions (a file mapped twice over itself) keep the later one, as libipt does. */
static void drop_overlaps(struct ht_pt_image *img)
{
	size_t out = 0;

	for (size_t i = 0; i < img->count; i++) {
		if (out && img->regions[out - 1].end > img->regions[i].start)
			img->regions[out - 1].end = img->regions[i].start;
		img->regions[out++] = img->regions[i];
	}
	img->count = out;
}

struct ht_pt_image *ht_pt_image_new(const struct ht_pt_mapping *maps, size_t n)
{
	struct ht_pt_image *img = calloc(1, sizeof(*img));

	if (!img || (n && !(img->regions = calloc(n, sizeof(*img->regions))))) {
		free(img);
		ht_fail("out of memory for a trace image of %zu mappings", n);
		return NULL;
	}
	img->iscache = pt_iscache_alloc("hybtrace");
	img->image = pt_image_alloc("hybtrace");
	if (!img->iscache || !img->image) {
		ht_pt_image_free(img);
		ht_fail("libipt could not allocate an image");
		return NULL;
	}
	/* Keep sections mapped: unmapping one drops its block cache, which is most of the speed. */
	pt_iscache_set_limit(img->iscache, 1ull << 40);
	pt_image_set_callback(img->image, read_memory, img);
	for (size_t i = 0; i < n; i++) {
		const struct ht_pt_mapping *m = &maps[i];
		int err;

		if (m->end <= m->start) {
			skip_mapping(img, m, "empty range");
			continue;
		}
		err = m->path ? add_file_mapping(img, m) : add_memory_mapping(img, m);
		if (err) {
			ht_pt_image_free(img);
			return NULL;
		}
	}
	qsort(img->regions, img->count, sizeof(*img->regions), region_cmp);
	drop_overlaps(img);
	return img;
}

void ht_pt_image_free(struct ht_pt_image *img)
{
	if (!img)
		return;
	if (img->image)
		pt_image_free(img->image);
	if (img->iscache)
		pt_iscache_free(img->iscache);
	for (size_t i = 0; i < img->count; i++) {
		if (img->regions[i].map)
			munmap(img->regions[i].map, img->regions[i].map_len);
		free(img->regions[i].copy);
	}
	free(img->regions);
	free(img);
}

struct pt_image *ht_pt_image_libipt(const struct ht_pt_image *img)
{
	return img->image;
}

size_t ht_pt_image_skipped(const struct ht_pt_image *img, const char **first_reason)
{
	if (first_reason)
		*first_reason = img->skipped ? img->skip_reason : NULL;
	return img->skipped;
}

/* Clock. */

static int pair_cmp(const void *a, const void *b)
{
	const struct ht_pt_clock_pair *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->mono_ns < y->mono_ns ? -1 : x->mono_ns > y->mono_ns;
}

int ht_pt_clock_init(struct ht_pt_clock *clock, const struct ht_pt_clock_pair *pairs, size_t n,
		     uint64_t tsc_hz)
{
	size_t out = 0;

	memset(clock, 0, sizeof(*clock));
	clock->tsc_hz = tsc_hz;
	if (!n)
		return 0;
	clock->pairs = malloc(n * sizeof(*pairs));
	if (!clock->pairs)
		return ht_fail("out of memory for %zu clock pairs", n);
	memcpy(clock->pairs, pairs, n * sizeof(*pairs));
	qsort(clock->pairs, n, sizeof(*pairs), pair_cmp);
	/* A pair must move both clocks forward, or the line through it says time runs back. */
	for (size_t i = 0; i < n; i++) {
		const struct ht_pt_clock_pair *p = &clock->pairs[i];

		if (out && (p->tsc <= clock->pairs[out - 1].tsc ||
			    p->mono_ns <= clock->pairs[out - 1].mono_ns))
			continue;
		clock->pairs[out++] = *p;
	}
	clock->count = out;
	return 0;
}

void ht_pt_clock_free(struct ht_pt_clock *clock)
{
	free(clock->pairs);
	memset(clock, 0, sizeof(*clock));
}

uint64_t ht_pt_tsc_to_ns(const struct ht_pt_clock *clock, uint64_t tsc)
{
	const struct ht_pt_clock_pair *a, *b;
	size_t lo = 0, hi;

	if (!clock || !clock->count)
		return 0;
	if (clock->count == 1) {
		a = &clock->pairs[0];
		if (!clock->tsc_hz)
			return a->mono_ns;
		return ht_tsc_line_ns(a->tsc, a->mono_ns, tsc, 1000000000, clock->tsc_hz);
	}
	/* The segment that holds TSC, or the nearest one at either end. */
	hi = clock->count - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (clock->pairs[mid].tsc <= tsc)
			lo = mid;
		else
			hi = mid;
	}
	a = &clock->pairs[lo];
	b = &clock->pairs[lo + 1];
	return ht_tsc_line_ns(a->tsc, a->mono_ns, tsc, b->mono_ns - a->mono_ns, b->tsc - a->tsc);
}

/* Instructions. */

static int is_legacy_prefix(uint8_t b)
{
	switch (b) {
	case 0xf0:
	case 0xf2:
	case 0xf3:
	case 0x2e:
	case 0x36:
	case 0x3e:
	case 0x26:
	case 0x64:
	case 0x65:
	case 0x66:
	case 0x67:
		return 1;
	}
	return 0;
}

/* Bytes of a ModRM byte and what it implies (SIB, displacement); 0 when P runs out. */
static unsigned modrm_length(const uint8_t *p, size_t n)
{
	unsigned mod, rm, len = 1;

	if (!n)
		return 0;
	mod = p[0] >> 6;
	rm = p[0] & 7;
	if (mod == 3)
		return 1;
	if (rm == 4) {
		if (n < 2)
			return 0;
		len++;
		if (mod == 0 && (p[1] & 7) == 5)
			len += 4;
	} else if (mod == 0 && rm == 5) {
		len += 4; /* RIP-relative */
	}
	if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len;
}

unsigned ht_x86_call_length(const uint8_t *p, size_t n, enum ht_pt_branch *kind)
{
	size_t i = 0;
	unsigned m;

	while (i < n && i < 14 && is_legacy_prefix(p[i]))
		i++;
	if (i < n && (p[i] & 0xf0) == 0x40)
		i++; /* REX */
	if (i >= n)
		return 0;
	switch (p[i]) {
	case 0xe8: /* call rel32 (operand size is 64 bits in long mode whatever the prefix) */
		*kind = HT_PT_BR_CALL;
		return i + 5 <= n && i + 5 <= 15 ? (unsigned)i + 5 : 0;
	case 0xff: /* call r/m: ModRM reg field 2 */
		if (i + 1 >= n || ((p[i + 1] >> 3) & 7) != 2)
			return 0;
		m = modrm_length(p + i + 1, n - i - 1);
		if (!m || i + 1 + m > n || i + 1 + m > 15)
			return 0;
		*kind = HT_PT_BR_CALL;
		return (unsigned)i + 1 + m;
	case 0x0f: /* syscall, sysenter */
		if (i + 1 >= n || (p[i + 1] != 0x05 && p[i + 1] != 0x34))
			return 0;
		*kind = HT_PT_BR_FAR_CALL;
		return (unsigned)i + 2;
	case 0xcd: /* int imm8 */
		if (i + 1 >= n)
			return 0;
		*kind = HT_PT_BR_FAR_CALL;
		return (unsigned)i + 2;
	case 0xcc: /* int3 */
	case 0xf1: /* int1 */
		*kind = HT_PT_BR_FAR_CALL;
		return (unsigned)i + 1;
	}
	return 0;
}

/* Decode. */

#define END_CACHE_SIZE 1024 /* block ends decoded; a power of two */
/* Items handed to the sink at once: a call per block would cost as much as the block. */
#define ITEM_BATCH 64

/* What we know of the instruction that ended a block. */
struct end_insn {
	uint64_t ip;
	uint8_t valid;
	uint8_t len;  /* a call, syscall or int: its length; else 0 */
	uint8_t kind; /* then HT_PT_BR_CALL or HT_PT_BR_FAR_CALL */
};

struct decoder {
	struct pt_block_decoder *blk;
	const struct ht_pt_decode_opts *opts;
	const struct ht_pt_image *image; /* the code of the process being decoded */
	ht_pt_sink_fn sink;
	void *ctx;
	struct ht_pt_decode_stats st;
	uint64_t tsc, time_ns; /* the last time read, and its conversion */
	/* The block before the next event: a synchronous disable binds to its last instruction. */
	uint64_t last_end_ip;
	uint8_t last_valid;
	struct end_insn ends[END_CACHE_SIZE];
	struct end_insn scratch;
	struct ht_pt_item items[ITEM_BATCH];
	size_t nitems;
};

static void update_time(struct decoder *d, uint64_t tsc)
{
	if (tsc == d->tsc)
		return;
	d->tsc = tsc;
	d->time_ns = ht_pt_tsc_to_ns(d->opts->clock, tsc);
}

static void read_block_time(struct decoder *d)
{
	uint32_t lost_mtc, lost_cyc;
	uint64_t tsc;

	/* -pte_no_time before the first TSC: keep 0 rather than a relative count. */
	if (pt_blk_time(d->blk, &tsc, &lost_mtc, &lost_cyc) == 0)
		update_time(d, tsc);
}

static int flush_items(struct decoder *d)
{
	int rc = d->nitems ? d->sink(d->ctx, d->items, d->nitems) : 0;

	d->nitems = 0;
	return rc;
}

/* A run may begin here: decode it with the code of the process now on the CPU. */
static void choose_image(struct decoder *d)
{
	const struct ht_pt_image *img;

	if (!d->opts->image_at)
		return;
	img = d->opts->image_at(d->opts->image_ctx, d->time_ns);
	if (!img || img == d->image || pt_blk_set_image(d->blk, img->image) < 0)
		return;
	d->image = img;
	/* The cached instructions were another process's. */
	memset(d->ends, 0, sizeof(d->ends));
}

static int emit(struct decoder *d, struct ht_pt_item *item)
{
	item->tsc = d->tsc;
	item->time_ns = d->time_ns;
	d->items[d->nitems++] = *item;
	return d->nitems == ITEM_BATCH ? flush_items(d) : 0;
}

/* The instruction that ended a block, decoded once per address. */
static const struct end_insn *end_insn_at(struct decoder *d, uint64_t ip, const struct pt_block *b)
{
	struct end_insn *e = &d->ends[(ip ^ (ip >> 12)) & (END_CACHE_SIZE - 1)];
	enum ht_pt_branch kind = HT_PT_BR_NONE;
	uint8_t raw[16];
	size_t n;

	if (e->valid && e->ip == ip)
		return e;
	if (b && b->truncated) {
		/* Its bytes straddle two sections: use the block's copy, and keep nothing. */
		e = &d->scratch;
		n = b->size;
		memcpy(raw, b->raw, n);
	} else {
		n = ht_pt_image_read(d->image, ip, raw, sizeof(raw));
	}
	e->ip = ip;
	e->valid = 1;
	e->len = (uint8_t)ht_x86_call_length(raw, n, &kind);
	e->kind = (uint8_t)kind;
	return e;
}

static enum ht_pt_branch branch_of(enum pt_insn_class iclass)
{
	switch (iclass) {
	case ptic_call:
		return HT_PT_BR_CALL;
	case ptic_return:
		return HT_PT_BR_RETURN;
	case ptic_jump:
		return HT_PT_BR_JUMP;
	case ptic_cond_jump:
		return HT_PT_BR_COND;
	case ptic_far_call:
		return HT_PT_BR_FAR_CALL;
	case ptic_far_return:
		return HT_PT_BR_FAR_RET;
	case ptic_far_jump:
		return HT_PT_BR_FAR_JUMP;
	case ptic_error:
		return HT_PT_BR_UNKNOWN;
	default:
		return HT_PT_BR_NONE;
	}
}

/* Blocks are most items: each is written in place, every field set. */
static int emit_block(struct decoder *d, const struct pt_block *b, uint64_t tsc)
{
	struct ht_pt_item *item = &d->items[d->nitems];
	enum ht_pt_branch branch = branch_of(b->iclass);

	update_time(d, tsc);
	item->kind = HT_PT_ITEM_BLOCK;
	item->tsc = d->tsc;
	item->time_ns = d->time_ns;
	item->ip = b->ip;
	item->end_ip = b->end_ip;
	item->next_ip = 0;
	item->ninsn = b->ninsn;
	item->branch = (uint8_t)branch;
	item->async = 0;
	item->syscall = 0;
	item->error = 0;
	item->event = 0;
	if (branch == HT_PT_BR_CALL) {
		const struct end_insn *e = end_insn_at(d, b->end_ip, b);

		if (e->len && e->kind == HT_PT_BR_CALL)
			item->next_ip = b->end_ip + e->len;
	}
	d->st.blocks++;
	d->st.insns += b->ninsn;
	d->last_end_ip = b->end_ip;
	d->last_valid = 1;
	return ++d->nitems == ITEM_BATCH ? flush_items(d) : 0;
}

/* Where a thread comes back to after the synchronous disable at the last block's end. */
static void disable_resume(struct decoder *d, struct ht_pt_item *item)
{
	const struct end_insn *e;

	if (!d->last_valid)
		return;
	e = end_insn_at(d, d->last_end_ip, NULL);
	if (!e->len)
		return;
	item->ip = d->last_end_ip + e->len;
	item->syscall = e->kind == HT_PT_BR_FAR_CALL;
}

static int emit_event(struct decoder *d, const struct pt_event *ev)
{
	struct ht_pt_item item = {.kind = HT_PT_ITEM_OTHER, .event = ev->type};

	if (ev->has_tsc)
		update_time(d, ev->tsc);
	/* A tick only says the time changed: the blocks carry it. */
	if (ev->type == ptev_tick)
		return 0;
	switch (ev->type) {
	case ptev_enabled:
		item.kind = HT_PT_ITEM_ENABLED;
		item.ip = ev->variant.enabled.ip;
		d->st.enables++;
		choose_image(d);
		break;
	case ptev_disabled:
		item.kind = HT_PT_ITEM_DISABLED;
		disable_resume(d, &item);
		d->st.disables++;
		break;
	case ptev_async_disabled:
		item.kind = HT_PT_ITEM_DISABLED;
		item.async = 1;
		item.ip = ev->variant.async_disabled.at;
		d->st.disables++;
		break;
	case ptev_overflow:
		item.kind = HT_PT_ITEM_OVERFLOW;
		item.ip = ev->ip_suppressed ? 0 : ev->variant.overflow.ip;
		pt_blk_get_offset(d->blk, &item.offset);
		d->st.overflows++;
		break;
	case ptev_async_branch:
		item.ip = ev->variant.async_branch.from;
		item.end_ip = ev->ip_suppressed ? 0 : ev->variant.async_branch.to;
		break;
	default:
		break;
	}
	d->last_valid = 0;
	return emit(d, &item);
}

static int emit_error(struct decoder *d, int code)
{
	struct ht_pt_item item = {.kind = HT_PT_ITEM_ERROR, .error = code};

	pt_blk_get_offset(d->blk, &item.offset);
	d->st.errors++;
	d->last_valid = 0;
	return emit(d, &item);
}

/* decode_run's result when the sink asked to stop. */
#define SINK_STOPPED 1
/* Events taken at once between two blocks (a PSB+ brings a few). */
#define EVENT_BATCH 16

/*
 * Decode from a sync point until an error or the end. Returns the libipt
 * status that ended it (-pte_eos at the end), or SINK_STOPPED.
 */
static int decode_run(struct decoder *d, int status, int *sink_rc)
{
	struct pt_event evs[EVENT_BATCH];
	struct pt_block block;
	uint64_t block_tsc = 0;
	int have_block = 0;

	for (;;) {
		size_t nev = 0;

		while ((status & pts_event_pending) && nev < EVENT_BATCH) {
			status = pt_blk_event(d->blk, &evs[nev], sizeof(evs[0]));
			if (status < 0)
				break;
			nev++;
		}
		if (have_block) {
			/*
			 * The packet that a branch of the block took in brought a
			 * new time: libipt says so with a tick right after it.
			 */
			for (size_t i = 0; i < nev; i++) {
				if (evs[i].type == ptev_tick && evs[i].has_tsc) {
					block_tsc = evs[i].tsc;
					break;
				}
			}
			*sink_rc = emit_block(d, &block, block_tsc);
			if (*sink_rc)
				return SINK_STOPPED;
			have_block = 0;
		}
		for (size_t i = 0; i < nev; i++) {
			*sink_rc = emit_event(d, &evs[i]);
			if (*sink_rc)
				return SINK_STOPPED;
		}
		if (status < 0)
			return status;
		if (status & pts_event_pending)
			continue;
		block.ninsn = 0;
		status = pt_blk_next(d->blk, &block, sizeof(block));
		/*
		 * Not pt_blk_time(): to decode the blocks that lead to an event
		 * libipt reads the event first, and its time with it, so that
		 * would put those blocks at the event's time, after they ran.
		 * Events and ticks give each change of time where it happened.
		 */
		block_tsc = d->tsc;
		/* A block that ends in an error still holds the instructions that ran. */
		have_block = block.ninsn != 0;
		if (status < 0) {
			if (have_block && (*sink_rc = emit_block(d, &block, block_tsc)))
				return SINK_STOPPED;
			return status;
		}
	}
}

static int make_config(struct pt_config *cfg, const uint8_t *buf, size_t len,
		       const struct ht_pt_cpu_info *cpu)
{
	pt_config_init(cfg);
	cfg->begin = (uint8_t *)buf;
	cfg->end = (uint8_t *)buf + len;
	cfg->flags.variant.block.end_on_call = 1;
	cfg->flags.variant.block.end_on_jump = 1;
	/* A tick event where the time changes: see decode_run(). */
	cfg->flags.variant.block.enable_tick_events = 1;
	if (!cpu)
		return 0;
	if (cpu->vendor_intel) {
		cfg->cpu.vendor = pcv_intel;
		cfg->cpu.family = cpu->family;
		cfg->cpu.model = cpu->model;
		cfg->cpu.stepping = cpu->stepping;
		/* An unknown model has no errata we know of: decode without them. */
		if (pt_cpu_errata(&cfg->errata, &cfg->cpu) < 0)
			memset(&cfg->errata, 0, sizeof(cfg->errata));
	}
	if (cpu->mtc) {
		cfg->mtc_freq = cpu->mtc_freq;
		cfg->cpuid_0x15_eax = cpu->tsc_art_eax;
		cfg->cpuid_0x15_ebx = cpu->tsc_art_ebx;
	}
	cfg->nom_freq = cpu->nom_freq;
	return 0;
}

static int decode_all(struct decoder *d)
{
	uint64_t last_sync = 0, last_failed = 0, offset;
	int failed = 0;
	int have_sync = 0, status, rc = 0;

	for (;;) {
		struct ht_pt_item sync = {.kind = HT_PT_ITEM_SYNC};

		status = pt_blk_sync_forward(d->blk);
		if (status < 0) {
			if (status == -pte_eos)
				return 0;
			/* A bad PSB+: report it and look further on, as long as that moves on. */
			rc = emit_error(d, status);
			if (rc)
				return rc;
			if (pt_blk_get_offset(d->blk, &offset) < 0 ||
			    (failed && offset <= last_failed))
				return 0;
			failed = 1;
			last_failed = offset;
			continue;
		}
		pt_blk_get_sync_offset(d->blk, &sync.offset);
		/* libipt searches on from where it stopped; never decode the same part twice. */
		if (have_sync && sync.offset <= last_sync)
			return 0;
		if (!have_sync)
			d->st.first_sync_offset = sync.offset;
		have_sync = 1;
		last_sync = sync.offset;
		d->st.syncs++;
		d->last_valid = 0;
		read_block_time(d);
		choose_image(d);
		rc = emit(d, &sync);
		if (rc)
			return rc;
		status = decode_run(d, status, &rc);
		if (status == SINK_STOPPED)
			return rc;
		if (status == -pte_eos)
			return 0;
		rc = emit_error(d, status);
		if (rc)
			return rc;
	}
}

int ht_pt_decode(const uint8_t *buf, size_t len, const struct ht_pt_decode_opts *opts,
		 ht_pt_sink_fn sink, void *ctx, struct ht_pt_decode_stats *stats)
{
	struct pt_config cfg;
	struct decoder *d;
	int rc;

	if (!opts || !opts->image || !sink || (!buf && len))
		return ht_fail("PT decode needs an image and a sink");
	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!len)
		return 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return ht_fail("out of memory for a PT decoder");
	make_config(&cfg, buf, len, opts->cpu);
	d->blk = pt_blk_alloc_decoder(&cfg);
	if (!d->blk) {
		free(d);
		return ht_fail("libipt refused the trace configuration");
	}
	if (pt_blk_set_image(d->blk, opts->image->image) < 0) {
		pt_blk_free_decoder(d->blk);
		free(d);
		return ht_fail("libipt refused the trace image");
	}
	d->opts = opts;
	d->image = opts->image;
	d->sink = sink;
	d->ctx = ctx;
	d->st.bytes = len;
	rc = decode_all(d);
	if (!rc)
		rc = flush_items(d);
	if (stats)
		*stats = d->st;
	pt_blk_free_decoder(d->blk);
	free(d);
	return rc;
}

void ht_pt_ring_linearize(const uint8_t *ring, size_t size, uint64_t aux_head, uint8_t *out)
{
	size_t head;

	if (!size)
		return;
	head = (size_t)(aux_head % size);
	memcpy(out, ring + head, size - head);
	memcpy(out + (size - head), ring, head);
}
