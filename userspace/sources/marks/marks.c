// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading user marks out of a target. The layout below is version 1 of
 * include/hybtrace/mark.h, restated here rather than included: that header
 * defines the registry itself, which hybtrace must not have.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/tsc.h"
#include "base/log.h"
#include "sources/marks/marks.h"
#include "symbols/proc_maps.h"
#include "symbols/target_files.h"

#define MARK_MAGIC	     0x31534b52414d5448ULL /* "HTMARKS1" */
#define MARK_VERSION	     1
#define MARK_CLOCK_TSC	     1
#define MARK_CLOCK_MONOTONIC 2
#define REGISTRY_SYMBOL	     "hybtrace_mark_registry"
#define REGISTRY_SECTION     "hybtrace_marks"

/* Bounds on what a registry may claim, whatever it says. */
#define MAX_SLOTS	   65536
#define MAX_NAMES	   4096
#define MAX_RING_RECORDS   (1u << 22)
#define MAX_REGISTRY_BYTES 4096
#define CHUNK_RECORDS	   2048
/* Registries in one module's section (one per file that includes mark.h). */
#define MAX_SECTION_CANDIDATES 256

struct registry_v1 {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	uint32_t clock;
	uint32_t record_size;
	uint32_t ring_header;
	uint32_t slot_size;
	uint32_t slot_capacity;
	uint32_t slot_count;
	uint32_t name_size;
	uint32_t name_capacity;
	uint32_t name_count;
	uint32_t lock;
	uint64_t slots;
	uint64_t names;
	uint64_t dropped_threads;
	uint32_t atfork_set;
	uint32_t forks;
};

struct slot_v1 {
	uint64_t ring;
	uint64_t head;
	uint64_t start;
	uint32_t tid;
	uint32_t capacity;
};

struct name_v1 {
	uint32_t id;
	uint32_t len;
	char name[HT_MARK_NAME_LEN];
};

struct record_v1 {
	uint64_t tsc;
	uint32_t id;
	uint32_t seq;
	uint64_t a;
	uint64_t b;
};

struct ring_header_v1 {
	uint64_t head;
	uint64_t mask;
	uint32_t capacity;
	uint32_t tid;
	uint64_t reserved[5];
};

_Static_assert(sizeof(struct registry_v1) == 88, "mark.h registry layout");
_Static_assert(sizeof(struct slot_v1) == 32, "mark.h slot layout");
_Static_assert(sizeof(struct name_v1) == 64, "mark.h name layout");
_Static_assert(sizeof(struct record_v1) == 32, "mark.h record layout");
_Static_assert(sizeof(struct ring_header_v1) == 64, "mark.h ring layout");

/* ---- Clocks ---- */

static uint64_t read_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return ht_monotonic_ns();
#endif
}

void ht_tsc_pair_take(struct ht_tsc_pair *p)
{
	uint64_t best = UINT64_MAX;

	/* The tightest of a few brackets: an interrupt inside one makes it wide. */
	for (int i = 0; i < 7; i++) {
		uint64_t t0 = read_tsc(), ns = ht_monotonic_ns(), t1 = read_tsc();

		if (t1 - t0 < best) {
			best = t1 - t0;
			p->tsc = t0 + (t1 - t0) / 2;
			p->ns = ns;
		}
	}
}

int ht_tsc_to_ns(const struct ht_tsc_pair *a, const struct ht_tsc_pair *b, uint64_t tsc,
		 uint64_t *ns)
{
	if (b->tsc <= a->tsc || b->ns <= a->ns)
		return -1;
	*ns = ht_tsc_line_ns(a->tsc, a->ns, tsc, b->ns - a->ns, b->tsc - a->tsc);
	return 0;
}

/* ---- Parsing a registry ---- */

struct parse {
	ht_mem_read_fn read;
	void *ctx;
	const struct ht_marks_window *w;
	struct ht_mark_set *out;
	const struct registry_v1 *reg;
	unsigned int registry; /* its number in OUT, for names */
	size_t budget;
	struct record_v1 *chunk;
	/* Records of the slot being read whose sequence did not match: torn or overwritten. */
	uint64_t *mismatch;
	size_t nmismatch, mismatch_cap;
};

static int note_mismatch(struct parse *p, uint64_t index)
{
	if (p->nmismatch == p->mismatch_cap) {
		size_t cap = p->mismatch_cap ? p->mismatch_cap * 2 : 64;
		uint64_t *v = realloc(p->mismatch, cap * sizeof(*v));

		if (!v)
			return ht_fail("out of memory reading marks");
		p->mismatch = v;
		p->mismatch_cap = cap;
	}
	p->mismatch[p->nmismatch++] = index;
	return 0;
}

static int validate_registry(const struct registry_v1 *r, uint64_t addr)
{
	if (r->magic != MARK_MAGIC)
		return ht_fail("no mark registry at 0x%" PRIx64 " (bad magic)", addr);
	if (r->version != MARK_VERSION)
		return ht_fail("mark registry at 0x%" PRIx64 ": version %u, this hybtrace reads %u",
			       addr, r->version, MARK_VERSION);
	if (r->size < sizeof(*r) || r->size > MAX_REGISTRY_BYTES ||
	    r->record_size != sizeof(struct record_v1) ||
	    r->ring_header != sizeof(struct ring_header_v1) ||
	    r->slot_size != sizeof(struct slot_v1) || r->name_size != sizeof(struct name_v1))
		return ht_fail("mark registry at 0x%" PRIx64 ": sizes do not match version %u",
			       addr, MARK_VERSION);
	if (r->clock != MARK_CLOCK_TSC && r->clock != MARK_CLOCK_MONOTONIC)
		return ht_fail("mark registry at 0x%" PRIx64 ": unknown clock %u", addr, r->clock);
	if (r->slot_capacity > MAX_SLOTS || r->slot_count > r->slot_capacity ||
	    r->name_capacity > MAX_NAMES || r->name_count > r->name_capacity)
		return ht_fail("mark registry at 0x%" PRIx64 ": absurd counts (%u of %u threads, "
			       "%u of %u names)",
			       addr, r->slot_count, r->slot_capacity, r->name_count,
			       r->name_capacity);
	if ((r->slot_count && !r->slots) || (r->name_count && !r->names))
		return ht_fail("mark registry at 0x%" PRIx64 ": counts without arrays", addr);
	return 0;
}

static int add_name(struct ht_mark_set *out, unsigned int registry, const struct name_v1 *n)
{
	struct ht_mark_name *e;

	/* A name must be what the writer wrote: its length, then a NUL. */
	if (n->len >= HT_MARK_NAME_LEN || n->name[n->len] || strlen(n->name) != n->len)
		return 0;
	for (size_t i = 0; i < out->nnames; i++)
		if (out->names[i].registry == registry && out->names[i].id == n->id)
			return 0;
	if (out->nnames == out->names_cap) {
		size_t cap = out->names_cap ? out->names_cap * 2 : 32;

		e = realloc(out->names, cap * sizeof(*e));
		if (!e)
			return ht_fail("out of memory reading mark names");
		out->names = e;
		out->names_cap = cap;
	}
	e = &out->names[out->nnames++];
	e->id = n->id;
	e->registry = registry;
	memcpy(e->name, n->name, n->len + 1);
	return 0;
}

static int read_names(struct parse *p)
{
	const struct registry_v1 *r = p->reg;
	struct name_v1 *names;
	size_t bytes = (size_t)r->name_count * sizeof(*names);
	int rc = 0;

	if (!r->name_count)
		return 0;
	names = malloc(bytes);
	if (!names)
		return ht_fail("out of memory reading mark names");
	/* Names are optional: unreadable ones only cost the names. */
	if (!p->read(p->ctx, r->names, names, bytes))
		for (uint32_t i = 0; i < r->name_count && !rc; i++)
			rc = add_name(p->out, p->registry, &names[i]);
	free(names);
	return rc;
}

static int name_for(const struct ht_mark_set *out, unsigned int registry, uint32_t id)
{
	int any = -1;

	for (size_t i = 0; i < out->nnames; i++) {
		if (out->names[i].id != id)
			continue;
		if (out->names[i].registry == registry)
			return (int)i;
		if (any < 0)
			any = (int)i;
	}
	return any;
}

static int push_mark(struct ht_mark_set *out, const struct ht_mark *m)
{
	if (out->count == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 256;
		struct ht_mark *v = realloc(out->v, cap * sizeof(*v));

		if (!v)
			return ht_fail("out of memory reading marks");
		out->v = v;
		out->cap = cap;
	}
	out->v[out->count++] = *m;
	return 0;
}

static int record_time(const struct parse *p, uint64_t tsc, uint64_t *ns)
{
	if (p->reg->clock == MARK_CLOCK_MONOTONIC) {
		*ns = tsc;
		return 0;
	}
	return ht_tsc_to_ns(&p->w->a, &p->w->b, tsc, ns);
}

/* Records [FIRST, LAST) of the ring at RING (CAP records) into OUT. 0, 1 unreadable, -1. */
static int read_records(struct parse *p, uint64_t ring, uint32_t cap, int tid, uint64_t first,
			uint64_t last)
{
	uint64_t i = first;

	while (i < last) {
		uint64_t pos = i & (cap - 1);
		size_t n = (size_t)(last - i);

		if (n > CHUNK_RECORDS)
			n = CHUNK_RECORDS;
		if (n > cap - pos)
			n = (size_t)(cap - pos);
		if (p->read(p->ctx,
			    ring + sizeof(struct ring_header_v1) + pos * sizeof(struct record_v1),
			    p->chunk, n * sizeof(struct record_v1)))
			return 1;
		p->out->bytes_read += n * sizeof(struct record_v1);
		for (size_t k = 0; k < n; k++, i++) {
			const struct record_v1 *rec = &p->chunk[k];
			struct ht_mark m = {.tsc = rec->tsc,
					    .index = i,
					    .a = rec->a,
					    .b = rec->b,
					    .id = rec->id,
					    .tid = tid,
					    .name_index = -1};

			if (rec->seq != (uint32_t)i) {
				if (note_mismatch(p, i))
					return -1;
				continue;
			}
			if (record_time(p, rec->tsc, &m.time_ns) || m.time_ns < p->w->t0_ns ||
			    m.time_ns > p->w->t1_ns)
				continue;
			m.name_index = name_for(p->out, p->registry, rec->id);
			if (push_mark(p->out, &m))
				return -1;
		}
	}
	return 0;
}

/* One thread's ring: its records still whole once read. 0, or -1 (memory). */
static int read_slot(struct parse *p, const struct slot_v1 *s)
{
	struct ring_header_v1 h;
	uint64_t head1, head2, first, lo, last_head;
	size_t kept_from = p->out->count, n;
	uint32_t cap = s->capacity;
	int rc;

	if (!s->tid || s->tid > INT_MAX || !cap || (cap & (cap - 1)) || cap > MAX_RING_RECORDS ||
	    !s->ring || (s->ring & 7) || s->head != s->ring) {
		p->out->rejected_slots++;
		return 0;
	}
	if (p->read(p->ctx, s->ring, &h, sizeof(h))) {
		p->out->unreadable++;
		return 0;
	}
	if (h.capacity != cap || h.mask != (uint64_t)cap - 1 || s->start > h.head) {
		p->out->rejected_slots++;
		return 0;
	}
	p->out->threads++;
	head1 = h.head;
	/* The record at head - cap may be under rewrite as record head: never trusted. */
	first = head1 >= cap ? head1 - cap + 1 : 0;
	if (first < s->start)
		first = s->start;
	/* Over budget: the newest records are the ones worth having. */
	n = p->budget / sizeof(struct record_v1);
	if (head1 - first > n) {
		p->out->out_of_budget += head1 - first - n;
		first = head1 - n;
	}
	p->budget -= (size_t)(head1 - first) * sizeof(struct record_v1);
	p->nmismatch = 0;
	rc = read_records(p, s->ring, cap, (int)s->tid, first, head1);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		p->out->unreadable++;
		p->out->count = kept_from;
		return 0;
	}
	/* Records the writer reached again while we read are not the ones we wanted. */
	if (p->read(p->ctx, s->head, &head2, sizeof(head2)) || head2 < head1)
		head2 = head1;
	last_head = head2;
	lo = last_head >= cap ? last_head - cap + 1 : 0;
	n = kept_from;
	for (size_t i = kept_from; i < p->out->count; i++) {
		if (p->out->v[i].index < lo) {
			p->out->overwritten++;
			continue;
		}
		p->out->v[n++] = p->out->v[i];
	}
	p->out->count = n;
	/* A record rewritten under us is overwritten; one that should be whole is torn. */
	for (size_t i = 0; i < p->nmismatch; i++) {
		if (p->mismatch[i] < lo)
			p->out->overwritten++;
		else
			p->out->torn++;
	}
	return 0;
}

static int read_slots(struct parse *p)
{
	const struct registry_v1 *r = p->reg;
	size_t bytes = (size_t)r->slot_count * sizeof(struct slot_v1);
	struct slot_v1 *slots;
	int rc = 0;

	if (!r->slot_count)
		return 0;
	slots = malloc(bytes);
	if (!slots)
		return ht_fail("out of memory reading mark slots");
	if (p->read(p->ctx, r->slots, slots, bytes)) {
		free(slots);
		p->out->unreadable++;
		return 0;
	}
	for (uint32_t i = 0; i < r->slot_count && !rc; i++)
		rc = read_slot(p, &slots[i]);
	free(slots);
	return rc;
}

static void resolve_names(struct ht_mark_set *out)
{
	for (size_t i = 0; i < out->count; i++) {
		int k = out->v[i].name_index;

		out->v[i].name = k >= 0 && (size_t)k < out->nnames ? out->names[k].name : NULL;
	}
}

int ht_marks_parse(ht_mem_read_fn read, void *ctx, uint64_t addr, const struct ht_marks_window *w,
		   struct ht_mark_set *out)
{
	struct registry_v1 reg;
	struct parse p = {.read = read, .ctx = ctx, .w = w, .out = out, .reg = &reg};
	size_t marks_before = out->count, names_before = out->nnames;
	int rc;

	if (read(ctx, addr, &reg, sizeof(reg)))
		return ht_fail("cannot read the mark registry at 0x%" PRIx64, addr);
	if (validate_registry(&reg, addr))
		return -1;
	if (reg.clock == MARK_CLOCK_TSC && ht_tsc_to_ns(&w->a, &w->b, w->a.tsc, &(uint64_t){0}))
		return ht_fail("marks count TSC ticks: two (TSC, clock) pairs taken apart are "
			       "needed to place them");
	p.budget = w->budget_bytes ? w->budget_bytes : HT_MARKS_DEFAULT_BUDGET;
	p.budget = p.budget > out->bytes_read ? p.budget - out->bytes_read : 0;
	p.registry = (unsigned int)out->registries;
	p.chunk = malloc(CHUNK_RECORDS * sizeof(*p.chunk));
	if (!p.chunk)
		return ht_fail("out of memory reading marks");
	rc = read_names(&p);
	if (!rc)
		rc = read_slots(&p);
	free(p.chunk);
	free(p.mismatch);
	if (rc) {
		out->count = marks_before;
		out->nnames = names_before;
		resolve_names(out);
		return -1;
	}
	out->registries++;
	out->dropped_threads += reg.dropped_threads;
	resolve_names(out);
	return 0;
}

void ht_mark_set_free(struct ht_mark_set *s)
{
	free(s->v);
	free(s->names);
	memset(s, 0, sizeof(*s));
}

/* ---- A live target ---- */

struct target_mem {
	int pid;
	int mem_fd; /* /proc/PID/mem, opened when process_vm_readv is refused */
};

static int target_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct target_mem *t = ctx;
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
	ssize_t n;
	char path[64];

	if (!len)
		return 0;
	if (t->mem_fd < 0) {
		n = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != EPERM && errno != ENOSYS))
			return -1;
		snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
		t->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (t->mem_fd < 0)
			return -1;
	}
	n = pread(t->mem_fd, buf, len, (off_t)addr);
	return n == (ssize_t)len ? 0 : -1;
}

static int mark_cmp(const void *x, const void *y)
{
	const struct ht_mark *a = x, *b = y;

	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

int ht_marks_read(int pid, const uint64_t *addrs, size_t n, const struct ht_marks_window *w,
		  struct ht_mark_set *out)
{
	struct target_mem t = {.pid = pid, .mem_fd = -1};
	char first_error[512] = "";
	size_t ok = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		if (!ht_marks_parse(target_read, &t, addrs[i], w, out))
			ok++;
		else if (!first_error[0])
			snprintf(first_error, sizeof(first_error), "%s", ht_last_error());
	}
	if (t.mem_fd >= 0)
		close(t.mem_fd);
	if (out->count > 1)
		qsort(out->v, out->count, sizeof(out->v[0]), mark_cmp);
	resolve_names(out);
	if (n && !ok)
		return ht_fail("marks of process %d: %s", pid, first_error);
	return 0;
}

/* ---- Finding the registries ---- */

static int is_file_mapping(const struct ht_mapping *m)
{
	return m->path[0] == '/' && m->inode;
}

static int same_file(const struct ht_mapping *a, const struct ht_mapping *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
}

/* The file address of the registry symbol, from .symtab or .dynsym; 0 when none. */
static uint64_t registry_symbol(Elf *elf)
{
	Elf_Scn *scn = NULL;
	uint64_t found = 0;

	for (int pass = 0; pass < 2 && !found; pass++) {
		GElf_Word want = pass ? SHT_DYNSYM : SHT_SYMTAB;

		while (!found && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *data;
			size_t count;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			if (!data)
				continue;
			count = data->d_size / sh.sh_entsize;
			for (size_t i = 0; i < count; i++) {
				GElf_Sym sym;
				const char *name;

				if (!gelf_getsym(data, (int)i, &sym) ||
				    GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
				    sym.st_shndx == SHN_UNDEF || !sym.st_value)
					continue;
				name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (name && !strcmp(name, REGISTRY_SYMBOL)) {
					found = sym.st_value;
					break;
				}
			}
		}
		scn = NULL;
	}
	return found;
}

/* Registries in the section of a stripped module: each 64-byte place that holds the magic. */
static size_t registry_section(Elf *elf, uint64_t *vaddrs, size_t max)
{
	size_t shstrndx, n = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, REGISTRY_SECTION))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		for (size_t off = 0; off + 8 <= data->d_size && n < max; off += 64) {
			uint64_t magic;

			memcpy(&magic, (const uint8_t *)data->d_buf + off, 8);
			if (magic == MARK_MAGIC)
				vaddrs[n++] = sh.sh_addr + off;
		}
	}
	return n;
}

/* The target's root, opened the first time a file of it must be read. */
struct lazy_target {
	int pid;
	bool opened;
	struct ht_target tg;
};

static const struct ht_target *lazy_target_get(struct lazy_target *t)
{
	if (!t->opened) {
		elf_version(EV_CURRENT);
		ht_target_init(&t->tg, t->pid);
		ht_target_reopen_root(&t->tg);
		t->opened = true;
	}
	return &t->tg;
}

/* What the file of mapping M says: its type, PT_LOAD segments and registries. 0, -1: unopened. */
static int read_file_facts(const struct ht_target *tg, const struct ht_mapping *m,
			   struct ht_marks_file *f)
{
	uint64_t vaddrs[MAX_SECTION_CANDIDATES];
	char *source = NULL;
	struct stat st;
	GElf_Ehdr eh;
	size_t n, nv;
	Elf *elf;
	int fd;

	memset(f, 0, sizeof(*f));
	f->inode = m->inode;
	f->dev_major = m->dev_major;
	f->dev_minor = m->dev_minor;
	fd = ht_target_open_mapping(tg, m, &source, &st);
	free(source);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &eh) && !elf_getphdrnum(elf, &n)) {
		f->elf = true;
		f->exec = eh.e_type == ET_EXEC;
		for (size_t i = 0; i < n && f->nloads < HT_MARKS_FILE_LOADS; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
				continue;
			f->loads[f->nloads].offset = ph.p_offset;
			f->loads[f->nloads].filesz = ph.p_filesz;
			f->loads[f->nloads].vaddr = ph.p_vaddr;
			f->nloads++;
		}
		vaddrs[0] = registry_symbol(elf);
		nv = vaddrs[0] ? 1 : registry_section(elf, vaddrs, MAX_SECTION_CANDIDATES);
		f->nvaddrs = nv < HT_MARKS_FILE_CANDIDATES ? nv : HT_MARKS_FILE_CANDIDATES;
		memcpy(f->vaddrs, vaddrs, f->nvaddrs * sizeof(vaddrs[0]));
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return 0;
}

/* Runtime = vaddr + bias for the module of file F whose first mapping is M. */
static int module_bias(const struct ht_marks_file *f, const struct ht_mapping *m, uint64_t *bias)
{
	if (f->exec) {
		*bias = 0;
		return 0;
	}
	for (size_t i = 0; i < f->nloads; i++) {
		if (f->loads[i].offset + f->loads[i].filesz <= m->offset ||
		    f->loads[i].offset >= m->offset + (m->end - m->start))
			continue;
		*bias = m->start - m->offset + f->loads[i].offset - f->loads[i].vaddr;
		return 0;
	}
	return -1;
}

static void add_address(uint64_t addr, uint64_t *addrs, size_t max, size_t *found)
{
	for (size_t i = 0; i < *found && i < max; i++)
		if (addrs[i] == addr)
			return;
	if (*found < max)
		addrs[*found] = addr;
	(*found)++;
}

/* The facts of M's file: those FILES holds, else read now (and kept while there is room). */
static const struct ht_marks_file *file_facts(struct ht_marks_files *files, struct lazy_target *tg,
					      const struct ht_mapping *m, struct ht_marks_file *own)
{
	if (files) {
		for (size_t i = 0; i < files->count; i++) {
			const struct ht_marks_file *f = &files->v[i];

			if (f->inode == m->inode && f->dev_major == m->dev_major &&
			    f->dev_minor == m->dev_minor)
				return f;
		}
		files->files_read++;
	}
	/* A file this process could not open may open through another's root: not kept. */
	if (read_file_facts(lazy_target_get(tg), m, own) || !files || files->count >= HT_MARKS_FILES_MAX)
		return own;
	if (files->count == files->cap) {
		size_t cap = files->cap ? files->cap * 2 : 64;
		struct ht_marks_file *v = realloc(files->v, cap * sizeof(*v));

		if (!v)
			return own;
		files->v = v;
		files->cap = cap;
	}
	files->v[files->count] = *own;
	return &files->v[files->count++];
}

void ht_marks_files_free(struct ht_marks_files *f)
{
	free(f->v);
	memset(f, 0, sizeof(*f));
}

/* The registries of the module whose first mapping is M, up to HT_MARKS_MAX_REGISTRIES. */
static void locate_in_module(struct ht_marks_files *files, struct lazy_target *tg,
			     const struct ht_maps *maps, const struct ht_mapping *m,
			     struct ht_marks_module *mod)
{
	struct ht_marks_file own;
	const struct ht_marks_file *f = file_facts(files, tg, m, &own);
	uint64_t bias;

	mod->n = 0;
	if (!f->elf || module_bias(f, m, &bias))
		return;
	for (size_t i = 0; i < f->nvaddrs; i++) {
		const struct ht_mapping *h = ht_maps_find(maps, f->vaddrs[i] + bias);

		if (h && same_file(h, m))
			add_address(f->vaddrs[i] + bias, mod->addrs, HT_MARKS_MAX_REGISTRIES,
				    &mod->n);
	}
	if (mod->n > HT_MARKS_MAX_REGISTRIES)
		mod->n = HT_MARKS_MAX_REGISTRIES;
}

/* The same module mapped at the same place from the same file as MOD. */
static bool same_module(const struct ht_marks_module *mod, const struct ht_mapping *m)
{
	return mod->start == m->start && mod->offset == m->offset && mod->inode == m->inode &&
	       mod->dev_major == m->dev_major && mod->dev_minor == m->dev_minor &&
	       !strcmp(mod->path, m->path);
}

static void module_free(struct ht_marks_module *mod)
{
	free(mod->path);
	mod->path = NULL;
}

void ht_marks_locator_init(struct ht_marks_locator *l, int pid)
{
	memset(l, 0, sizeof(*l));
	l->pid = pid;
}

void ht_marks_locator_free(struct ht_marks_locator *l)
{
	for (size_t i = 0; i < l->count; i++)
		module_free(&l->mods[i]);
	free(l->mods);
	l->mods = NULL;
	l->count = 0;
}

int ht_marks_locator_find(struct ht_marks_locator *l, uint64_t *addrs, size_t max, size_t *found)
{
	struct lazy_target tg = {.pid = l->pid};
	struct ht_marks_module *now;
	struct ht_maps maps;
	size_t n = 0;

	*found = 0;
	if (ht_maps_read(l->pid, &maps))
		return -1;
	now = calloc(maps.count ? maps.count : 1, sizeof(*now));
	if (!now) {
		ht_maps_free(&maps);
		return ht_fail("out of memory locating marks");
	}
	/* The modules mapped now: those seen at the same place before keep what was read. */
	for (size_t i = 0; i < maps.count; i++) {
		const struct ht_mapping *m = &maps.v[i];
		struct ht_marks_module *mod = &now[n];
		int seen = 0;

		if (!is_file_mapping(m))
			continue;
		for (size_t k = 0; k < i && !seen; k++)
			seen = same_file(&maps.v[k], m);
		if (seen)
			continue;
		for (size_t k = 0; k < l->count; k++) {
			if (l->mods[k].path && same_module(&l->mods[k], m)) {
				*mod = l->mods[k];
				l->mods[k].path = NULL;
				break;
			}
		}
		if (!mod->path) {
			mod->path = strdup(m->path);
			if (!mod->path)
				continue;
			mod->start = m->start;
			mod->offset = m->offset;
			mod->inode = m->inode;
			mod->dev_major = m->dev_major;
			mod->dev_minor = m->dev_minor;
			locate_in_module(l->files, &tg, &maps, m, mod);
			l->modules_read++;
		}
		for (size_t k = 0; k < mod->n; k++)
			add_address(mod->addrs[k], addrs, max, found);
		n++;
	}
	if (tg.opened)
		ht_target_close(&tg.tg);
	/* Modules no longer mapped are forgotten: mapped again, they are read again. */
	ht_marks_locator_free(l);
	l->mods = now;
	l->count = n;
	ht_maps_free(&maps);
	return 0;
}

int ht_marks_locate(int pid, uint64_t *addrs, size_t max, size_t *found)
{
	struct ht_marks_locator l;
	int rc;

	ht_marks_locator_init(&l, pid);
	rc = ht_marks_locator_find(&l, addrs, max, found);
	ht_marks_locator_free(&l);
	return rc;
}
