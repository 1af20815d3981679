// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "symbols/ksyms.h"
#include "base/log.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "trace/timeline.h"
#include "symbols/unwind_dwarf.h"
#include "sources/sample/user_timeline.h"

/* A frame as the timeline will name it, with where it came from. */
struct named_frame {
	tl_str name;
	const char *module;
	uint64_t address;
};

struct open_slice {
	tl_str name;
	uint64_t start_ns;
	uint32_t samples;
};

struct thread_flame {
	int track;
	struct open_slice open[HT_SAMPLE_MAX_FRAMES];
	unsigned int depth;
	uint64_t last_ns;
};

struct builder {
	struct timeline *tl;
	const struct ht_user_window *uw;
	tl_str category;
	/* The symbols of the process of the sample being named (the last one asked for). */
	int tgid;
	struct ht_symbolizer *symbolizer;
	struct ht_dwarf_unwinder *unwinder;
};

/* The thread's track, made here (under its process's) if the kernel window had no event of it. */
static int thread_track(struct builder *b, uint32_t tgid, uint32_t tid)
{
	for (size_t i = 0; i < tl_track_count(b->tl); i++) {
		const struct tl_track *t = tl_track(b->tl, i);

		if (t->kind == TL_TRACK_THREAD && (uint32_t)t->tid == tid)
			return (int)i;
	}
	if (ht_timeline_process_track(b->tl, b->uw->comms, (int)tgid) < 0)
		return -1;
	return tl_thread_track(b->tl, (int)tgid, (int)tid);
}

/* Process TGID's symbolizer and unwinder, for the frames of its samples; NULL: addresses. */
static void use_process(struct builder *b, uint32_t tgid)
{
	if (b->tgid == (int)tgid)
		return;
	b->tgid = (int)tgid;
	b->symbolizer = b->uw->symbols ? ht_symbolizer_set_get(b->uw->symbols, (int)tgid) : NULL;
	b->unwinder = b->uw->symbols && b->uw->dwarf
			      ? ht_symbolizer_set_unwinder(b->uw->symbols, (int)tgid)
			      : NULL;
}

static void name_user_frame(struct builder *b, uint64_t addr, bool return_address,
			    struct named_frame *out)
{
	/* A return address points past its call: look up the call itself. */
	uint64_t lookup = return_address ? addr - 1 : addr;
	struct ht_symbol sym;
	char buf[256];

	out->address = addr;
	out->module = NULL;
	if (b->symbolizer && !ht_symbolize(b->symbolizer, lookup, &sym)) {
		out->module = sym.module;
		out->name = tl_intern(b->tl, ht_symbol_format(&sym, lookup, buf, sizeof(buf)));
		return;
	}
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
	out->name = tl_intern(b->tl, buf);
}

static void name_kernel_frame(struct builder *b, uint64_t addr, struct named_frame *out)
{
	uint64_t start;
	const char *name = ht_ksyms_find(b->uw->ksyms, addr, &start);
	char buf[64];

	out->address = addr;
	out->module = "[kernel]";
	if (name) {
		/* "func [module]" keeps its module; slices merge on the function. */
		out->name = tl_intern(b->tl, name);
		return;
	}
	snprintf(buf, sizeof(buf), "[kernel]+0x%llx", (unsigned long long)addr);
	out->name = tl_intern(b->tl, buf);
}

/*
 * A frame-pointer walk goes on past code built without frame pointers,
 * into garbage: keep the frames, leaf first, up to the first address that no
 * executable mapping holds. Slices then share stable roots.
 */
static unsigned int plausible_user_frames(struct builder *b, const uint64_t *user, unsigned int n)
{
	struct ht_symbol sym;

	if (!b->symbolizer)
		return n;
	for (unsigned int i = 0; i < n; i++) {
		uint64_t lookup = i ? user[i] - 1 : user[i];

		if (ht_symbolize(b->symbolizer, lookup, &sym) || !sym.executable)
			return i;
	}
	return n;
}

/*
 * The sample's frames, root first: user frames outermost first, then kernel
 * frames; the user frames by its own process's symbols.
 */
static unsigned int sample_frames(struct builder *b, const struct ht_sample *smp,
				  struct named_frame *out)
{
	uint64_t user[HT_SAMPLE_MAX_FRAMES];
	const uint64_t *kernel = smp->frames;
	unsigned int nuser = smp->nr_user, n = 0;
	bool dwarf = smp->regs_abi && smp->stack_len;

	/* A kernel thread's (--all) has no user frames, nor maps to ask for. */
	if (nuser || dwarf)
		use_process(b, smp->pid);
	memcpy(user, smp->frames + smp->nr_kernel, nuser * sizeof(user[0]));
	if (dwarf && b->unwinder) {
		struct ht_user_regs regs = { .abi = smp->regs_abi };
		unsigned int nregs = smp->nr_regs < HT_DWARF_SAMPLE_NREGS ? smp->nr_regs
									  : HT_DWARF_SAMPLE_NREGS;
		int got;

		memcpy(regs.regs, smp->regs, nregs * sizeof(smp->regs[0]));
		got = ht_dwarf_unwind(b->unwinder, &regs, b->uw->samples->blob + smp->stack_offset,
				      smp->stack_len, user, HT_SAMPLE_MAX_FRAMES - smp->nr_kernel);
		nuser = got > 0 ? (unsigned int)got : 0;
	}
	if (nuser)
		nuser = plausible_user_frames(b, user, nuser);
	for (unsigned int i = nuser; i-- > 0;)
		name_user_frame(b, user[i], i > 0, &out[n++]);
	for (unsigned int i = smp->nr_kernel; i-- > 0;)
		name_kernel_frame(b, kernel[i], &out[n++]);
	return n;
}

/*
 * Parents first: the frames of one sample make slices of equal span, and
 * those nest in the order they are added (timeline.h).
 */
static void close_from(struct builder *b, struct thread_flame *f, unsigned int depth,
		       uint64_t end_ns)
{
	for (unsigned int i = depth; i < f->depth; i++) {
		struct open_slice *o = &f->open[i];
		long ev = tl_add_event(b->tl, TL_EVENT_SLICE, f->track, o->start_ns,
				       end_ns - o->start_ns, o->name, b->category);

		tl_event_arg_uint(b->tl, ev, HT_ARG_SAMPLES, o->samples);
	}
	if (f->depth > depth)
		f->depth = depth;
}

static void add_sample(struct builder *b, struct thread_flame *f, const struct ht_sample *smp,
		       const struct named_frame *frames, unsigned int n)
{
	uint64_t period = b->uw->period_ns, end = f->last_ns + period;
	unsigned int common = 0;

	/* Off the CPU for a while: nothing that was open can honestly go on. */
	if (f->depth && smp->time_ns - f->last_ns > 2 * period)
		close_from(b, f, 0, end);
	while (common < f->depth && common < n && f->open[common].name == frames[common].name)
		common++;
	/* A sample that came early (timer jitter) bounds what it replaces. */
	close_from(b, f, common, end < smp->time_ns ? end : smp->time_ns);
	for (unsigned int i = common; i < n; i++)
		f->open[f->depth++] = (struct open_slice){ frames[i].name, smp->time_ns, 0 };
	for (unsigned int i = 0; i < f->depth; i++)
		f->open[i].samples++;
	f->last_ns = smp->time_ns;
}

static void stack_instant(struct builder *b, int track, const char *name,
			  const struct ht_sample *smp)
{
	struct named_frame frames[HT_SAMPLE_MAX_FRAMES];
	struct tl_frame_desc desc[HT_SAMPLE_MAX_FRAMES];
	unsigned int n = sample_frames(b, smp, frames);
	long ev = tl_add_instant(b->tl, track, smp->time_ns, name, HT_CAT_USER);

	for (unsigned int i = 0; i < n; i++)
		desc[i] = (struct tl_frame_desc){ tl_str_get(b->tl, frames[i].name), frames[i].module,
						  frames[i].address };
	if (n)
		tl_event_callstack(b->tl, ev, desc, n);
}

/* The breached thread's stacks just before it left the CPU and just after it came back. */
static void add_breach_stacks(struct builder *b)
{
	const struct ht_breach *br = b->uw->breach;
	const struct ht_sample_set *set = b->uw->samples;
	const struct ht_sample *before = NULL, *after = NULL;
	uint32_t tgid;
	int track;

	if (!br)
		return;
	for (size_t i = 0; i < set->count; i++) {
		const struct ht_sample *smp = &set->v[i];

		if (smp->tid != br->tid)
			continue;
		if (smp->time_ns <= br->start_ns)
			before = smp;
		else if (smp->time_ns >= br->end_ns && !after)
			after = smp;
	}
	if (!before && !after)
		return;
	tgid = before ? before->pid : after->pid;
	track = thread_track(b, tgid, br->tid);
	if (track < 0)
		return;
	if (before)
		stack_instant(b, track, HT_EV_STACK_BEFORE, before);
	if (after)
		stack_instant(b, track, HT_EV_STACK_AFTER, after);
}

static struct thread_flame *flame_of(struct builder *b, struct thread_flame **flames, size_t *n,
				     size_t *cap, const struct ht_sample *smp, uint32_t **tids)
{
	uint32_t tid = smp->tid;

	for (size_t i = 0; i < *n; i++)
		if ((*tids)[i] == tid)
			return &(*flames)[i];
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct thread_flame *f = realloc(*flames, c * sizeof(*f));
		uint32_t *t = realloc(*tids, c * sizeof(*t));

		if (f)
			*flames = f;
		if (t)
			*tids = t;
		if (!f || !t)
			return NULL;
		*cap = c;
	}
	memset(&(*flames)[*n], 0, sizeof((*flames)[0]));
	(*flames)[*n].track = thread_track(b, smp->pid, tid);
	(*tids)[*n] = tid;
	return &(*flames)[(*n)++];
}

int ht_user_timeline_build(struct timeline *tl, const struct ht_user_window *uw)
{
	struct builder b = { .tl = tl, .uw = uw, .tgid = -1 };
	struct named_frame frames[HT_SAMPLE_MAX_FRAMES];
	struct thread_flame *flames = NULL;
	uint32_t *tids = NULL;
	size_t nflames = 0, cap = 0;
	int rc = 0;

	b.category = tl_intern(tl, HT_CAT_USER);
	for (size_t i = 0; i < uw->samples->count; i++) {
		const struct ht_sample *smp = &uw->samples->v[i];
		struct thread_flame *f = flame_of(&b, &flames, &nflames, &cap, smp, &tids);
		unsigned int n;

		if (!f || f->track < 0) {
			rc = ht_fail("out of memory building user-space slices");
			break;
		}
		n = sample_frames(&b, smp, frames);
		add_sample(&b, f, smp, frames, n);
	}
	for (size_t i = 0; i < nflames; i++)
		close_from(&b, &flames[i], 0, flames[i].last_ns + uw->period_ns);
	if (!rc)
		add_breach_stacks(&b);
	free(flames);
	free(tids);
	if (!rc && tl_error(tl))
		rc = ht_fail("cannot build user-space slices: %s", tl_strerror(tl));
	return rc;
}
