// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "base/log.h"
#include "base/perf_event.h"
#include "sample_filter.skel.h"
#include "sources/sample/sampler.h"

#define MAX_RECORD_BYTES 65536

int ht_sampler_probe(void)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = 1000,
		.freq = 1,
		.disabled = 1,
		.exclude_kernel = 1,
	};
	int fd = ht_perf_event_open(&attr, 0, -1);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static void build_attr(const struct ht_sampler *s, struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_SOFTWARE;
	a->size = sizeof(*a);
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	/* A fixed period in ns: slices can honestly end one period after their last sample. */
	a->sample_period = s->period_ns;
	a->sample_type = s->format.sample_type;
	a->write_backward = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->sample_id_all = 1;
	a->exclude_hv = 1;
	/* The idle task is never the target: its ticks need not even reach the filter. */
	a->exclude_idle = 1;
	if (s->cfg.callgraph == HT_CALLGRAPH_DWARF) {
		a->sample_regs_user = s->cfg.regs_mask;
		a->sample_stack_user = s->cfg.stack_bytes;
		/* Without frame pointers the kernel's user walk is noise: the stack copy replaces it. */
		a->exclude_callchain_user = 1;
	}
}

static int map_ring(struct ht_sampler *s, unsigned int cpu, int fd)
{
	struct ht_sampler_ring *r = &s->rings[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	r->data_size = ht_perf_ring_data_bytes(s->cfg.ring_bytes);
	r->mmap_len = r->data_size + page;
	/* Read-only: an overwrite ring, which is what write_backward wants. */
	r->base = ht_perf_ring_map(fd, r->data_size, false);
	if (!r->base) {
		return ht_fail("cannot map a sampling ring of %zu bytes: %s%s", r->data_size,
			       strerror(errno),
			       errno == EPERM ? " (locked memory: needs CAP_IPC_LOCK, or a "
						"smaller --sample-history)" : "");
	}
	r->fd = fd;
	return 0;
}

/* The filter that keeps the target's samples only, loaded once for every CPU's event. */
static int load_filter(struct ht_sampler *s)
{
	s->filter = sample_filter_bpf__open();
	if (!s->filter)
		return ht_fail("cannot open the sampling filter: %s", strerror(errno));
	s->filter->rodata->targets_all = s->cfg.targets_all;
	s->filter->rodata->self_tgid = (__u32)s->cfg.self_tgid;
	s->filter->rodata->test_one_tgid = (__u32)s->cfg.test_one_tgid;
	/* The monitor's map: the set it keeps as processes fork and exit is the filter's. */
	if (!s->cfg.targets_all &&
	    bpf_map__reuse_fd(s->filter->maps.target_procs, s->cfg.targets_fd))
		return ht_fail("cannot share the target set with the sampling filter: %s",
			       strerror(errno));
	if (sample_filter_bpf__load(s->filter))
		return ht_fail("cannot load the sampling filter: %s", strerror(errno));
	return 0;
}

/* One event on CPU, with the filter, owning that CPU's ring. */
static int open_cpu(struct ht_sampler *s, unsigned int cpu)
{
	int prog = bpf_program__fd(s->filter->progs.keep_target_samples);
	struct perf_event_attr attr;
	int fd;

	build_attr(s, &attr);
	attr.disabled = 1; /* until the filter is on: no other process's sample is written */
	fd = ht_perf_event_open(&attr, -1, (int)cpu);
	if (fd < 0) {
		/* A CPU that is possible but offline has nothing to sample. */
		if (errno == ENODEV)
			return 0;
		return ht_fail("cannot open a cpu-clock sampling event on CPU %u: %s%s", cpu,
			       strerror(errno),
			       errno == EACCES || errno == EPERM ? " (needs CAP_PERFMON)" : "");
	}
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog)) {
		ht_fail("cannot attach the sampling filter on CPU %u: %s", cpu, strerror(errno));
		close(fd);
		return -1;
	}
	if (map_ring(s, cpu, fd)) {
		close(fd);
		return -1;
	}
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		return ht_fail("cannot start sampling on CPU %u: %s", cpu, strerror(errno));
	return 0;
}

int ht_sampler_open(struct ht_sampler *s, const struct ht_sampler_config *cfg)
{
	int ncpus = libbpf_num_possible_cpus();

	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	if (ncpus <= 0)
		return ht_fail("cannot count CPUs");
	if (!cfg->freq_hz || cfg->freq_hz > 100000)
		return ht_fail("--sample-freq must be 1..100000 Hz");
	s->ncpus = (unsigned int)ncpus;
	s->period_ns = 1000000000ULL / cfg->freq_hz;
	s->format.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	if (cfg->callgraph == HT_CALLGRAPH_DWARF) {
		s->format.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		s->format.regs_mask = cfg->regs_mask;
	}
	s->rings = calloc(s->ncpus, sizeof(*s->rings));
	if (!s->rings)
		return ht_fail("out of memory");
	for (unsigned int c = 0; c < s->ncpus; c++)
		s->rings[c].fd = -1;
	s->open = true;
	if (load_filter(s))
		goto fail;
	for (unsigned int cpu = 0; cpu < s->ncpus; cpu++)
		if (open_cpu(s, cpu))
			goto fail;
	return 0;
fail:
	ht_sampler_close(s);
	return -1;
}

void ht_sampler_close(struct ht_sampler *s)
{
	if (!s->open)
		return;
	for (unsigned int c = 0; c < s->ncpus; c++) {
		if (s->rings[c].base)
			munmap(s->rings[c].base, s->rings[c].mmap_len);
		if (s->rings[c].fd >= 0)
			close(s->rings[c].fd);
	}
	sample_filter_bpf__destroy(s->filter);
	free(s->rings);
	memset(s, 0, sizeof(*s));
}

/* ---- parsing ---- */

struct reader {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t take_u64(struct reader *r)
{
	uint64_t v;

	if (r->end - r->p < 8) {
		r->bad = true;
		return 0;
	}
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

static void take_u32_pair(struct reader *r, uint32_t *a, uint32_t *b)
{
	uint64_t v = take_u64(r);

	*a = (uint32_t)v;
	*b = (uint32_t)(v >> 32);
}

static struct ht_sample *set_push(struct ht_sample_set *set)
{
	if (set->count == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		struct ht_sample *v = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		set->v = v;
		set->cap = cap;
	}
	memset(&set->v[set->count], 0, sizeof(set->v[0]));
	return &set->v[set->count];
}

static int blob_append(struct ht_sample_set *set, const uint8_t *data, size_t len, size_t *offset)
{
	if (set->blob_len + len > set->blob_cap) {
		size_t cap = set->blob_cap ? set->blob_cap : 1 << 16;
		uint8_t *b;

		while (cap < set->blob_len + len)
			cap *= 2;
		b = realloc(set->blob, cap);
		if (!b)
			return -1;
		set->blob = b;
		set->blob_cap = cap;
	}
	memcpy(set->blob + set->blob_len, data, len);
	*offset = set->blob_len;
	set->blob_len += len;
	return 0;
}

static void parse_callchain(struct reader *r, struct ht_sample *smp)
{
	uint64_t nr = take_u64(r), context = 0;

	if (nr > (uint64_t)(r->end - r->p) / 8) {
		r->bad = true;
		return;
	}
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t ip = take_u64(r);

		if (ip >= HT_PERF_CONTEXT_MAX) {
			context = ip;
			continue;
		}
		if (smp->nr_kernel + smp->nr_user >= HT_SAMPLE_MAX_FRAMES)
			continue;
		/* Kernel frames come first in the chain, then the user ones. */
		if (context == HT_PERF_CONTEXT_KERNEL)
			smp->frames[smp->nr_kernel++] = ip;
		else if (context == HT_PERF_CONTEXT_USER)
			smp->frames[smp->nr_kernel + smp->nr_user++] = ip;
	}
}

static void parse_user_regs(struct reader *r, const struct ht_sample_format *fmt,
			    struct ht_sample *smp)
{
	smp->regs_abi = take_u64(r);
	if (!smp->regs_abi)
		return;
	for (unsigned int bit = 0; bit < 64; bit++) {
		uint64_t v;

		if (!(fmt->regs_mask & (1ULL << bit)))
			continue;
		v = take_u64(r);
		if (smp->nr_regs < sizeof(smp->regs) / sizeof(smp->regs[0]))
			smp->regs[smp->nr_regs++] = v;
	}
}

static int parse_user_stack(struct reader *r, struct ht_sample *smp, struct ht_sample_set *set)
{
	uint64_t size = take_u64(r), dyn;
	const uint8_t *data = r->p;

	if (!size || r->bad)
		return 0;
	if (size > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		return 0;
	}
	r->p += size;
	dyn = take_u64(r);
	if (r->bad || dyn > size)
		return 0;
	smp->stack_len = (size_t)dyn;
	return blob_append(set, data, (size_t)dyn, &smp->stack_offset);
}

static int parse_sample(const uint8_t *rec, size_t len, const struct ht_sample_format *fmt,
			int tgid, uint64_t t0, uint64_t t1, struct ht_sample_set *set)
{
	struct reader r = { rec + sizeof(struct perf_event_header), rec + len, false };
	struct ht_sample *smp = set_push(set);
	uint32_t unused;

	if (!smp)
		return ht_fail("out of memory parsing samples");
	if (fmt->sample_type & PERF_SAMPLE_IP)
		take_u64(&r);
	if (fmt->sample_type & PERF_SAMPLE_TID)
		take_u32_pair(&r, &smp->pid, &smp->tid);
	if (fmt->sample_type & PERF_SAMPLE_TIME)
		smp->time_ns = take_u64(&r);
	if (fmt->sample_type & PERF_SAMPLE_CPU)
		take_u32_pair(&r, &smp->cpu, &unused);
	if (fmt->sample_type & PERF_SAMPLE_PERIOD)
		smp->period = take_u64(&r);
	if (fmt->sample_type & PERF_SAMPLE_CALLCHAIN)
		parse_callchain(&r, smp);
	if ((tgid && (int)smp->pid != tgid) || smp->time_ns < t0 || smp->time_ns > t1 || r.bad) {
		set->malformed += r.bad;
		set->foreign += !r.bad && tgid && (int)smp->pid != tgid;
		return 0;
	}
	if (fmt->sample_type & PERF_SAMPLE_REGS_USER)
		parse_user_regs(&r, fmt, smp);
	if ((fmt->sample_type & PERF_SAMPLE_STACK_USER) && parse_user_stack(&r, smp, set))
		return ht_fail("out of memory copying user stacks");
	if (r.bad) {
		set->malformed++;
		return 0;
	}
	set->count++;
	return 0;
}

/* LEN bytes of a ring of SIZE bytes from offset AT on, across its end. */
static void ring_copy(void *dst, const uint8_t *data, size_t size, size_t at, size_t len)
{
	size_t first = size - at < len ? size - at : len;

	memcpy(dst, data + at, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

/* The fields ht_sample_format can hold, in the order the kernel writes them. */
#define SAMPLE_FIELDS                                                                              \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |                   \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |                      \
	 PERF_SAMPLE_STACK_USER)

/* Where a sample's fields end and what they say, read from the fields alone. */
struct sample_shape {
	size_t bytes; /* header included; 0: they run past the bytes there are */
	uint32_t pid;
	uint64_t time_ns;
	uint64_t regs_abi;
	uint64_t stack_bytes, stack_dyn_bytes; /* PERF_SAMPLE_STACK_USER's size and dyn_size */
};

static void skip_words(struct reader *r, uint64_t n)
{
	if (n > (uint64_t)(r->end - r->p) / 8)
		r->bad = true;
	else
		r->p += n * 8;
}

static void sample_shape(const uint8_t *rec, size_t len, const struct ht_sample_format *fmt,
			 struct sample_shape *s)
{
	struct reader r = { rec + sizeof(struct perf_event_header), rec + len, false };
	uint64_t type = fmt->sample_type;

	memset(s, 0, sizeof(*s));
	if (len < sizeof(struct perf_event_header) || (type & ~(uint64_t)SAMPLE_FIELDS))
		return;
	skip_words(&r, !!(type & PERF_SAMPLE_IP));
	if (type & PERF_SAMPLE_TID)
		s->pid = (uint32_t)take_u64(&r);
	if (type & PERF_SAMPLE_TIME)
		s->time_ns = take_u64(&r);
	skip_words(&r, !!(type & PERF_SAMPLE_CPU) + !!(type & PERF_SAMPLE_PERIOD));
	if (type & PERF_SAMPLE_CALLCHAIN)
		skip_words(&r, take_u64(&r));
	if (type & PERF_SAMPLE_REGS_USER) {
		s->regs_abi = take_u64(&r);
		if (s->regs_abi)
			skip_words(&r, (uint64_t)__builtin_popcountll(fmt->regs_mask));
	}
	if (type & PERF_SAMPLE_STACK_USER) {
		s->stack_bytes = take_u64(&r);
		if (s->stack_bytes && s->stack_bytes <= (uint64_t)(r.end - r.p)) {
			r.p += s->stack_bytes;
			s->stack_dyn_bytes = take_u64(&r);
		} else if (s->stack_bytes) {
			r.bad = true;
		}
	}
	if (!r.bad)
		s->bytes = (size_t)(r.p - rec);
}

/*
 * Whether the kernel wrote a word past the end of this sample, over the
 * header of the record before it (the next one in a backward ring).
 *
 * Linux 6.1 does, for a sample taken in the target's exit once its memory is
 * gone (seen on Debian's 6.1.0-57, 6.1.192): since the stable backport of
 * 4f6fc7821283 ("perf: Fix sample vs do_exit()", 6.1.142),
 * perf_sample_ustack_size() returns 0 without current->mm, so
 * perf_prepare_sample() reserves only the u64 stack size; but
 * perf_sample_regs_user() checks only PF_KTHREAD and still hands the task's
 * user registers, so perf_output_sample_ustack() takes its "regs" branch and
 * writes size 0 and then dyn_size 0: 8 bytes past header.size. A user stack
 * pointer of 0 (or above TASK_SIZE) does the same there. Mainline closed the
 * exit case with 76ed27608f7d ("perf: sched: Fix perf crash with new
 * is_user_task() helper"): without mm there are no user registers (abi
 * NONE), and 8 bytes are reserved and written; 6.18.44 writes that.
 * The sign: user registers, a zero stack size, and nothing after it.
 */
static bool overran_its_end(const struct sample_shape *s, size_t record_bytes,
			    const struct ht_sample_format *fmt)
{
	return (fmt->sample_type & PERF_SAMPLE_STACK_USER) && s->regs_abi && !s->stack_bytes &&
	       s->bytes == record_bytes;
}

/*
 * The size of the sample at AT, whose header a newer sample overwrote with
 * zeroes (overran_its_end): its fields are whole, and say where it ends.
 * 0 where they are no sample taken before NEWER_NS; *DAMAGED then says
 * whether something else is there (rather than never-written space, or a
 * record cut by the overwrite at the oldest end, where the walk ends anyway).
 */
static size_t rebuilt_size(const uint8_t *data, size_t size, size_t at, size_t avail,
			   const struct ht_sample_format *fmt, uint64_t newer_ns, uint8_t *rec,
			   bool *damaged)
{
	struct sample_shape s;

	if (avail > MAX_RECORD_BYTES)
		avail = MAX_RECORD_BYTES;
	ring_copy(rec, data, size, at, avail);
	sample_shape(rec, avail, fmt, &s);
	*damaged = false;
	if (!s.bytes || (!s.pid && !s.time_ns))
		return 0;
	if (!s.pid || !s.time_ns || s.time_ns > newer_ns || s.regs_abi > PERF_SAMPLE_REGS_ABI_64 ||
	    s.stack_dyn_bytes > s.stack_bytes || s.bytes > UINT16_MAX) {
		*damaged = true;
		return 0;
	}
	return s.bytes;
}

static bool header_is_zero(const struct perf_event_header *h)
{
	return !h->type && !h->misc && !h->size;
}

/* A walk of a backward ring, newest record first. */
struct ring_walk {
	const uint8_t *data;
	size_t size;  /* a power of two */
	uint64_t head;
	uint64_t limit; /* bytes from head that may be walked */
	const struct ht_sample_format *fmt;
	uint64_t walked, newer_ns;
	bool overran; /* the newer record wrote over this one's header */
	uint8_t *rec; /* the current record, MAX_RECORD_BYTES */
	uint64_t rebuilt, malformed;
};

/*
 * The next record into W->rec: its header in *H and, for a sample, its
 * shape. false at the end: never written, cut by the overwrite at the
 * oldest end, damaged, or the limit reached.
 */
static bool ring_next(struct ring_walk *w, struct perf_event_header *h, struct sample_shape *shape)
{
	uint64_t mask = w->size - 1;
	size_t at = (size_t)((w->head + w->walked) & mask);
	bool damaged = false;

	if (w->walked + sizeof(*h) > w->limit)
		return false;
	ring_copy(h, w->data, w->size, at, sizeof(*h));
	if (w->overran && header_is_zero(h)) {
		h->type = PERF_RECORD_SAMPLE;
		h->size = (uint16_t)rebuilt_size(w->data, w->size, at, (size_t)(w->limit - w->walked),
						 w->fmt, w->newer_ns, w->rec, &damaged);
		w->rebuilt += h->size != 0;
	} else if (!header_is_zero(h) && h->size < sizeof(*h)) {
		damaged = true; /* no kernel writes that */
	}
	if (h->size < sizeof(*h) || w->walked + h->size > w->limit) {
		w->malformed += damaged;
		return false;
	}
	ring_copy(w->rec, w->data, w->size, at, h->size);
	w->walked += h->size;
	w->overran = false;
	if (h->type == PERF_RECORD_SAMPLE) {
		sample_shape(w->rec, h->size, w->fmt, shape);
		w->overran = overran_its_end(shape, h->size, w->fmt);
		w->newer_ns = shape->time_ns;
	}
	return true;
}

static int ring_walk_init(struct ring_walk *w, const uint8_t *data, size_t size, uint64_t head,
			  uint64_t limit, const struct ht_sample_format *fmt)
{
	*w = (struct ring_walk){ .data = data, .size = size, .head = head, .fmt = fmt,
				 .limit = limit < size ? limit : size, .newer_ns = UINT64_MAX };
	if (!size || (size & (size - 1)))
		return ht_fail("a sampling ring of %zu bytes is not a power of two", size);
	w->rec = malloc(MAX_RECORD_BYTES);
	return w->rec ? 0 : ht_fail("out of memory parsing samples");
}

/* Parse at most LIMIT bytes from HEAD: see ht_sample_ring_parse. */
static int ring_parse(const uint8_t *data, size_t size, uint64_t head, uint64_t limit,
		      const struct ht_sample_format *fmt, int tgid, uint64_t t0, uint64_t t1,
		      struct ht_sample_set *out)
{
	struct perf_event_header h;
	struct sample_shape shape;
	struct ring_walk w;
	int rc = 0;

	if (ring_walk_init(&w, data, size, head, limit, fmt))
		return -1;
	while (!rc && ring_next(&w, &h, &shape)) {
		switch (h.type) {
		case PERF_RECORD_SAMPLE:
			rc = parse_sample(w.rec, h.size, fmt, tgid, t0, t1, out);
			break;
		case PERF_RECORD_LOST:
			if (h.size >= sizeof(h) + 16)
				out->lost += *(const uint64_t *)(w.rec + sizeof(h) + 8);
			break;
		case PERF_RECORD_THROTTLE:
			out->throttled++;
			break;
		}
	}
	out->rebuilt += w.rebuilt;
	out->malformed += w.malformed;
	free(w.rec);
	return rc;
}

int ht_sample_ring_parse(const uint8_t *data, size_t size, uint64_t head,
			 const struct ht_sample_format *fmt, int tgid, uint64_t t0, uint64_t t1,
			 struct ht_sample_set *out)
{
	return ring_parse(data, size, head, size, fmt, tgid, t0, t1, out);
}

uint64_t ht_sample_ring_bytes_since(const uint8_t *data, size_t size, uint64_t head,
				    const struct ht_sample_format *fmt, uint64_t t0)
{
	struct perf_event_header h;
	struct sample_shape shape;
	struct ring_walk w;
	uint64_t before = 0;

	if (ring_walk_init(&w, data, size, head, size, fmt))
		return size; /* the whole ring, rather than less than the window */
	while (ring_next(&w, &h, &shape)) {
		/* Older than the window: nothing from here on is wanted. */
		if (h.type == PERF_RECORD_SAMPLE && shape.time_ns && shape.time_ns < t0)
			break;
		before = w.walked;
	}
	free(w.rec);
	return before;
}

static int sample_cmp(const void *a, const void *b)
{
	const struct ht_sample *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

void ht_sample_set_sort(struct ht_sample_set *set)
{
	if (set->count > 1)
		qsort(set->v, set->count, sizeof(set->v[0]), sample_cmp);
}

/* Every CPU's ring stops taking samples, and its head is read, before any is copied. */
static void pause_rings(struct ht_sampler *s, struct ht_sampler_frozen *out)
{
	for (unsigned int c = 0; c < s->ncpus; c++) {
		struct ht_sampler_ring *r = &s->rings[c];
		struct perf_event_mmap_page *page = r->base;

		if (!r->base)
			continue;
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
		out->rings[c].head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
	}
}

static void resume_rings(struct ht_sampler *s, unsigned int from)
{
	for (unsigned int c = from; c < s->ncpus; c++)
		if (s->rings[c].base)
			ioctl(s->rings[c].fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
}

/* The smallest power of two of at least N bytes (at least 8). */
static size_t pow2_at_least(uint64_t n)
{
	size_t p = 8;

	while (p < n)
		p <<= 1;
	return p;
}

int ht_sampler_freeze(struct ht_sampler *s, uint64_t t0, struct ht_sampler_frozen *out)
{
	memset(out, 0, sizeof(*out));
	out->format = s->format;
	out->tgid = s->cfg.tgid;
	out->rings = calloc(s->ncpus, sizeof(*out->rings));
	if (!out->rings)
		return ht_fail("out of memory copying the sampling rings");
	out->nrings = s->ncpus;
	/*
	 * All rings stop at once, and each resumes once the part of it the
	 * window needs is copied: a ring still sampling while another is
	 * copied writes over the window's oldest samples, and one paused
	 * longer than its copy leaves a hole in the samples of the dumps
	 * after this one. Copies are slow where fresh memory is (tens of ms
	 * for 8 MB in some VMs, more under load): only what the window needs
	 * is copied, the newest records down to the first before T0.
	 */
	pause_rings(s, out);
	for (unsigned int c = 0; c < s->ncpus; c++) {
		struct ht_sampler_ring *r = &s->rings[c];
		const uint8_t *data = (const uint8_t *)r->base + (r->mmap_len - r->data_size);
		uint64_t wanted;
		uint8_t *copy;

		if (!r->base)
			continue;
		wanted = ht_sample_ring_bytes_since(data, r->data_size, out->rings[c].head,
						    &s->format, t0);
		copy = malloc(pow2_at_least(wanted));
		if (!copy) {
			resume_rings(s, c);
			ht_sampler_frozen_free(out);
			return ht_fail("out of memory copying a sampling ring");
		}
		ring_copy(copy, data, r->data_size,
			  (size_t)(out->rings[c].head & (r->data_size - 1)), (size_t)wanted);
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
		/* Linear from 0: the walk ends at the copy's end, never wraps. */
		out->rings[c].data = copy;
		out->rings[c].size = pow2_at_least(wanted);
		out->rings[c].head = 0;
		out->rings[c].valid = wanted;
	}
	return 0;
}

void ht_sampler_frozen_free(struct ht_sampler_frozen *f)
{
	for (unsigned int c = 0; f->rings && c < f->nrings; c++)
		free(f->rings[c].data);
	free(f->rings);
	memset(f, 0, sizeof(*f));
}

int ht_sampler_frozen_samples(const struct ht_sampler_frozen *f, uint64_t t0, uint64_t t1,
			      struct ht_sample_set *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int c = 0; c < f->nrings; c++) {
		if (!f->rings[c].data)
			continue;
		if (ring_parse(f->rings[c].data, f->rings[c].size, f->rings[c].head,
			       f->rings[c].valid, &f->format, f->tgid, t0, t1, out)) {
			ht_sample_set_free(out);
			return -1;
		}
	}
	ht_sample_set_sort(out);
	return 0;
}

void ht_sample_set_free(struct ht_sample_set *set)
{
	free(set->v);
	free(set->blob);
	memset(set, 0, sizeof(*set));
}
