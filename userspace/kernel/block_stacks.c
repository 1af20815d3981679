// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/block_stacks.h"
#include "trace/dump_schema.h"
#include "base/json.h"
#include "base/log.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "trace/timeline.h"
#include "base/units.h"
#include "symbols/unwind_dwarf.h"

int ht_block_stacks_init(struct ht_block_stacks *bs, unsigned int mode)
{
	memset(bs, 0, sizeof(*bs));
	bs->mode = mode;
	/* Unwinders in FP mode too: it unwinds the leaf frames a frame-pointer walk skips. */
	bs->symbols = ht_symbolizer_set_new(true, 0);
	if (!bs->symbols)
		ht_warn("stacks where threads blocked will show addresses only: %s",
			ht_last_error());
	return 0;
}

void ht_block_stacks_stale(struct ht_block_stacks *bs)
{
	if (bs->symbols)
		ht_symbolizer_set_stale(bs->symbols);
}

/* What one stack is resolved with: its process's, each NULL when not had. */
struct stack_symbols {
	struct ht_symbolizer *symbolizer;
	struct ht_dwarf_unwinder *unwinder;
};

static struct stack_symbols symbols_of(struct ht_block_stacks *bs, int tgid)
{
	struct stack_symbols ss = { NULL, NULL };
	const char *note;

	if (!bs->symbols || tgid <= 0)
		return ss;
	ss.symbolizer = ht_symbolizer_set_get(bs->symbols, tgid);
	if (ss.symbolizer)
		ss.unwinder = ht_symbolizer_set_unwinder(bs->symbols, tgid);
	/* Once per process: its stacks show addresses only. */
	while ((note = ht_symbolizer_set_next_note(bs->symbols)))
		ht_warn("stacks where threads blocked: %s", note);
	return ss;
}

void ht_block_stacks_free(struct ht_block_stacks *bs)
{
	for (size_t i = 0; i < HT_BLOCK_PENDING; i++)
		free(bs->pending[i].data);
	for (size_t i = 0; i < bs->nhinted; i++)
		free(bs->hinted[i]);
	free(bs->hinted);
	if (bs->symbols)
		ht_symbolizer_set_free(bs->symbols);
	memset(bs, 0, sizeof(*bs));
}

static bool record_valid(const void *data, size_t size)
{
	struct ht_block_stack_head h;

	if (size < sizeof(h))
		return false;
	memcpy(&h, data, sizeof(h));
	if (h.mode == HT_BLOCK_STACK_FP)
		return size >= sizeof(struct ht_block_stack_fp);
	if (h.mode == HT_BLOCK_STACK_DWARF)
		return size >= sizeof(struct ht_block_stack_dwarf);
	return false;
}

int ht_block_stacks_add(struct ht_block_stacks *bs, const void *data, size_t size)
{
	struct ht_block_pending *slot = NULL;
	void *copy;

	if (!record_valid(data, size)) {
		bs->malformed++;
		return -1;
	}
	bs->received++;
	/* A free slot, else the oldest: its breach never came (or was dropped). */
	for (size_t i = 0; i < HT_BLOCK_PENDING; i++) {
		struct ht_block_pending *p = &bs->pending[i];

		if (!p->used) {
			slot = p;
			break;
		}
		if (!slot || p->seq < slot->seq)
			slot = p;
	}
	if (slot->used) {
		bs->replaced++;
		free(slot->data);
		slot->used = false;
	}
	copy = malloc(size);
	if (!copy)
		return -1;
	memcpy(copy, data, size);
	*slot = (struct ht_block_pending){true, ++bs->seq, size, copy};
	return 0;
}

int ht_block_stacks_on_record(void *ctx, void *data, size_t size)
{
	ht_block_stacks_add(ctx, data, size);
	return 0;
}

void *ht_block_stacks_claim(struct ht_block_stacks *bs, uint32_t tid, uint32_t seq, size_t *len)
{
	struct ht_block_pending *found = NULL;
	void *data;

	for (size_t i = 0; i < HT_BLOCK_PENDING; i++) {
		struct ht_block_pending *p = &bs->pending[i];
		struct ht_block_stack_head h;

		if (!p->used)
			continue;
		memcpy(&h, p->data, sizeof(h));
		if (h.tid != tid)
			continue;
		if (h.seq == seq) {
			found = p;
		} else if (h.seq < seq) {
			/* Sent for a longer sleep of a syscall that a still longer one replaced. */
			free(p->data);
			*p = (struct ht_block_pending){0};
			bs->superseded++;
		}
	}
	if (!found) {
		bs->missing++;
		return NULL;
	}
	data = found->data;
	*len = found->len;
	*found = (struct ht_block_pending){0};
	return data;
}

int ht_block_stack_dwarf_view(const struct ht_block_stack_dwarf *d, const uint8_t **stack,
			      size_t *len)
{
	uint64_t sp = d->regs[HT_DWARF_REG_SP];

	*stack = NULL;
	*len = 0;
	if (d->head.mode != HT_BLOCK_STACK_DWARF || d->head.bytes <= 0 ||
	    d->head.bytes > (int32_t)sizeof(d->stack))
		return -1;
	if (sp < d->stack_base || sp - d->stack_base >= (uint64_t)d->head.bytes)
		return 0;
	*stack = d->stack + (sp - d->stack_base);
	*len = (size_t)d->head.bytes - (size_t)(sp - d->stack_base);
	return 0;
}

int ht_block_stack_fixup(const uint64_t *fp, int nfp, const uint64_t *cfi, int ncfi, uint64_t *out,
			 int max)
{
	int n = 0;

	if (nfp >= 2 && ncfi >= 2 && cfi[0] == fp[0]) {
		for (int j = 1; j < ncfi; j++) {
			if (cfi[j] != fp[1])
				continue;
			for (int i = 0; i < j && n < max; i++)
				out[n++] = cfi[i];
			for (int i = 1; i < nfp && n < max; i++)
				out[n++] = fp[i];
			return n;
		}
	}
	for (int i = 0; i < nfp && n < max; i++)
		out[n++] = fp[i];
	return n;
}

static int unwind_regs(const struct stack_symbols *ss, const uint64_t *regs_in,
		       const uint8_t *stack, size_t len, uint64_t *ips)
{
	struct ht_user_regs regs = {.abi = HT_DWARF_REGS_ABI_64};
	int n;

	memcpy(regs.regs, regs_in, sizeof(regs.regs));
	n = ht_dwarf_unwind(ss->unwinder, &regs, stack, len, ips, HT_BLOCK_STACK_MAX_FRAMES);
	/* Libraries load late: read the maps again, once. */
	if (n <= 1 && !ht_dwarf_unwinder_refresh(ss->unwinder))
		n = ht_dwarf_unwind(ss->unwinder, &regs, stack, len, ips,
				    HT_BLOCK_STACK_MAX_FRAMES);
	return n > 0 ? n : 0;
}

/* The frames' addresses, innermost first. Returns how many. */
static int unwind_record(const struct stack_symbols *ss, const void *data,
			 uint64_t ips[HT_BLOCK_STACK_MAX_FRAMES], int32_t *error)
{
	struct ht_block_stack_head h;
	int n;

	memcpy(&h, data, sizeof(h));
	*error = h.bytes < 0 ? h.bytes : 0;
	if (h.mode == HT_BLOCK_STACK_FP) {
		const struct ht_block_stack_fp *fp = data;
		uint64_t cfi[HT_BLOCK_STACK_MAX_FRAMES];
		size_t leaf_len;
		int ncfi;

		n = h.bytes > 0 ? h.bytes / (int)sizeof(uint64_t) : 0;
		if (n > HT_BLOCK_STACK_MAX_FRAMES)
			n = HT_BLOCK_STACK_MAX_FRAMES;
		if (!ss->unwinder || fp->leaf_bytes <= 0 || n < 2) {
			memcpy(ips, fp->ips, (size_t)n * sizeof(ips[0]));
			return n;
		}
		leaf_len = (size_t)fp->leaf_bytes < sizeof(fp->leaf) ? (size_t)fp->leaf_bytes
								     : sizeof(fp->leaf);
		ncfi = unwind_regs(ss, (const uint64_t *)fp->regs, fp->leaf, leaf_len, cfi);
		return ht_block_stack_fixup((const uint64_t *)fp->ips, n, cfi, ncfi, ips,
					    HT_BLOCK_STACK_MAX_FRAMES);
	} else {
		const struct ht_block_stack_dwarf *d = data;
		const uint8_t *stack;
		size_t len;

		if (ht_block_stack_dwarf_view(d, &stack, &len))
			len = 0;
		if (!ss->unwinder) {
			/* No libdw: the address it blocked at, at least. */
			ips[0] = d->regs[HT_DWARF_REG_IP];
			return ips[0] ? 1 : 0;
		}
		return unwind_regs(ss, (const uint64_t *)d->regs, stack, len, ips);
	}
}

/*
 * Name the frames. A frame-pointer walk goes on past code built without
 * frame pointers, into garbage: the frames stop at the first address no
 * executable mapping holds, as the sampled stacks do (user_timeline.c).
 */
static void name_frames(const struct stack_symbols *ss, const uint64_t *ips, int n,
			struct ht_block_frames *out)
{
	bool refreshed = false;

	out->depth = 0;
	for (int i = 0; i < n; i++) {
		/* A return address points past its call: look up the call itself. */
		uint64_t lookup = i ? ips[i] - 1 : ips[i];
		struct ht_block_frame *fr = &out->f[out->depth];
		struct ht_symbol sym;
		int found = -1;

		if (ss->symbolizer) {
			found = ht_symbolize(ss->symbolizer, lookup, &sym);
			/* Libraries load late: read the maps again, once. */
			if (found && !refreshed) {
				refreshed = true;
				if (!ht_symbolizer_refresh(ss->symbolizer))
					found = ht_symbolize(ss->symbolizer, lookup, &sym);
			}
			if (found || !sym.executable)
				break;
		}
		fr->ip = ips[i];
		if (found) {
			snprintf(fr->function, sizeof(fr->function), "0x%llx",
				 (unsigned long long)ips[i]);
			fr->module[0] = '\0';
		} else {
			ht_symbol_format(&sym, lookup, fr->function, sizeof(fr->function));
			snprintf(fr->module, sizeof(fr->module), "%s",
				 sym.module ? sym.module : "");
		}
		out->depth++;
	}
}

const char *ht_block_stack_missing(const struct ht_breach *b, bool taken)
{
	if (b->flags & HT_BRF_NEVER_BLOCKED)
		return "never-blocked";
	if (b->flags & HT_BRF_BLOCK_STACK_LOST)
		return "lost";
	return b->block_stack_seq && !taken ? "not-received" : NULL;
}

int ht_block_stacks_take(struct ht_block_stacks *bs, int tgid, uint32_t tid, uint32_t seq,
			 struct ht_block_frames *out)
{
	struct stack_symbols ss;
	uint64_t ips[HT_BLOCK_STACK_MAX_FRAMES];
	struct ht_block_stack_head h;
	size_t len;
	void *data = ht_block_stacks_claim(bs, tid, seq, &len);
	int n;

	if (!data)
		return -1;
	memcpy(&h, data, sizeof(h));
	out->switch_ns = h.switch_ns;
	out->tid = h.tid;
	out->mode = h.mode;
	ss = symbols_of(bs, tgid);
	n = unwind_record(&ss, data, ips, &out->error);
	name_frames(&ss, ips, n, out);
	free(data);
	return 0;
}

const char *ht_block_stacks_hint(struct ht_block_stacks *bs, const struct ht_block_frames *fr)
{
	const char *module;
	char **grown;

	if (fr->mode != HT_BLOCK_STACK_FP || fr->depth != 1 || !fr->f[0].module[0])
		return NULL;
	module = fr->f[0].module;
	for (size_t i = 0; i < bs->nhinted; i++)
		if (!strcmp(bs->hinted[i], module))
			return NULL;
	grown = realloc(bs->hinted, (bs->nhinted + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	bs->hinted = grown;
	bs->hinted[bs->nhinted] = strdup(module);
	if (!bs->hinted[bs->nhinted])
		return NULL;
	return bs->hinted[bs->nhinted++];
}

void ht_block_frames_print_json(struct ht_json *j, const struct ht_block_frames *fr)
{
	ht_json_array(j, "block_stack");
	for (uint32_t i = 0; i < fr->depth; i++)
		ht_json_str(j, NULL, fr->f[i].function);
	ht_json_close(j);
	/* When it left the CPU: which of its sleeps the stack is of. */
	ht_json_u64(j, "block_stack_at_ns", fr->switch_ns);
	if (fr->error)
		ht_json_i64(j, "block_stack_error", fr->error);
}

void ht_block_frames_print_text(FILE *f, const struct ht_block_frames *fr)
{
	uint32_t n = fr->depth < 4 ? fr->depth : 4;

	if (!n)
		return;
	fputs(" blocked in ", f);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? " <- " : "", fr->f[i].function);
	if (fr->depth > n)
		fputs(" <- ...", f);
}

const char *ht_last_sample_label(uint64_t gap_ns, const char *what, char *buf, size_t len)
{
	char dur[32];

	snprintf(buf, len, "last sample %s before %s", ht_format_duration(gap_ns, dur, sizeof(dur)),
		 what);
	return buf;
}

int ht_block_frames_to_timeline(struct timeline *tl, int tgid, const struct ht_block_frames *fr)
{
	struct tl_frame_desc desc[HT_BLOCK_STACK_MAX_FRAMES];
	int track = tl_thread_track(tl, tgid, (int)fr->tid);
	long ev;

	if (track < 0)
		return ht_fail("no track for thread %u: %s", fr->tid, strerror(-track));
	ev = tl_add_instant(tl, track, fr->switch_ns, HT_EV_BLOCK_STACK, HT_CAT_USER);
	if (ev < 0)
		return ht_fail("cannot add the stack where it blocked: %s", strerror((int)-ev));
	tl_event_arg_str(tl, ev, HT_ARG_CALLGRAPH,
			 fr->mode == HT_BLOCK_STACK_DWARF ? "dwarf" : "fp");
	/* Root first, as every call stack of the timeline. */
	for (uint32_t i = 0; i < fr->depth; i++) {
		const struct ht_block_frame *src = &fr->f[fr->depth - 1 - i];

		desc[i] = (struct tl_frame_desc){src->function, src->module[0] ? src->module : NULL,
						 src->ip};
	}
	if (fr->depth && tl_event_callstack(tl, ev, desc, fr->depth) < 0)
		return ht_fail("cannot attach the stack where it blocked");
	return 0;
}
