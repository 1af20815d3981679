// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test only, linked into the tests that use it: see pt_synth.h.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include "symbols/elf_symbols.h"
#include "base/log.h"
#include "symbols/proc_maps.h"
#include "pt_synth.h"

/* Instruction classification, with libipt's decoder on a one-instruction image. */

struct synth_class {
	uint64_t ip;
	uint8_t size, iclass, indirect, rep, valid;
};

#define CLASS_SLOTS 65536 /* a power of two */

struct classifier {
	int mem_fd;
	struct synth_class *slots;
};

struct one_insn {
	uint64_t ip;
	uint8_t bytes[16];
	size_t len;
};

static int read_one(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip,
		    void *context)
{
	struct one_insn *o = context;
	size_t n;

	(void)asid;
	if (ip < o->ip || ip >= o->ip + o->len)
		return -pte_nomap;
	n = o->ip + o->len - ip;
	if (n > size)
		n = size;
	memcpy(buffer, o->bytes + (ip - o->ip), n);
	return (int)n;
}

int ht_synth_put_packet(struct pt_encoder *enc, const struct pt_packet *p)
{
	return pt_enc_next(enc, p) < 0 ? -1 : 0;
}

struct pt_packet ht_synth_ip_packet(enum pt_packet_type type, uint64_t ip)
{
	struct pt_packet p = {.type = type};

	p.payload.ip.ipc = pt_ipc_sext_48;
	p.payload.ip.ip = ip & 0xffffffffffffull;
	return p;
}

struct pt_packet ht_synth_mode_exec_packet(void)
{
	struct pt_packet p = {.type = ppt_mode};

	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	return p;
}

struct pt_packet ht_synth_tsc_packet(uint64_t tsc)
{
	struct pt_packet p = {.type = ppt_tsc};

	p.payload.tsc.tsc = tsc;
	return p;
}

static int write_psb_plus(struct pt_encoder *enc, uint64_t ip, uint64_t tsc)
{
	struct pt_packet psb = {.type = ppt_psb}, end = {.type = ppt_psbend};
	struct pt_packet t = ht_synth_tsc_packet(tsc), mode = ht_synth_mode_exec_packet();
	struct pt_packet fup = ht_synth_ip_packet(ppt_fup, ip);

	if (ht_synth_put_packet(enc, &psb) || ht_synth_put_packet(enc, &t) ||
	    ht_synth_put_packet(enc, &mode) || ht_synth_put_packet(enc, &fup) ||
	    ht_synth_put_packet(enc, &end))
		return -1;
	return 0;
}

struct pt_encoder *ht_synth_encoder_new(uint8_t *buf, size_t cap)
{
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + cap;
	return pt_alloc_encoder(&cfg);
}

int ht_synth_psb_plus(uint8_t *buf, size_t cap, uint64_t ip, uint64_t tsc)
{
	struct pt_encoder *enc = ht_synth_encoder_new(buf, cap);
	uint64_t off = 0;
	int rc;

	if (!enc)
		return -1;
	rc = write_psb_plus(enc, ip, tsc);
	pt_enc_get_offset(enc, &off);
	pt_free_encoder(enc);
	return rc ? -1 : (int)off;
}

/* Whether the instruction at RAW is an indirect near call or jump: opcode FF. */
static int is_indirect(const uint8_t *raw, size_t n)
{
	size_t i = 0;

	while (i < n && (raw[i] == 0x66 || raw[i] == 0x67 || raw[i] == 0xf2 || raw[i] == 0xf3 ||
			 raw[i] == 0x2e || raw[i] == 0x3e || raw[i] == 0x26 || raw[i] == 0x36 ||
			 raw[i] == 0x64 || raw[i] == 0x65 || raw[i] == 0xf0))
		i++;
	if (i < n && (raw[i] & 0xf0) == 0x40)
		i++;
	return i < n && raw[i] == 0xff;
}

static int has_rep(const uint8_t *raw, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (raw[i] == 0xf3 || raw[i] == 0xf2)
			return 1;
		if (raw[i] != 0x66 && raw[i] != 0x67 && raw[i] != 0x2e && raw[i] != 0x3e &&
		    raw[i] != 0x26 && raw[i] != 0x36 && raw[i] != 0x64 && raw[i] != 0x65 &&
		    raw[i] != 0xf0)
			return 0;
	}
	return 0;
}

/* Decode the instruction in O with libipt: PSB+ naming its address, then ask for it. */
static int classify_bytes(struct one_insn *o, struct synth_class *c)
{
	uint8_t stream[64];
	struct pt_config cfg;
	struct pt_insn_decoder *dec;
	struct pt_image *image;
	struct pt_insn insn;
	struct pt_event ev;
	int len, status;

	len = ht_synth_psb_plus(stream, sizeof(stream), o->ip, 0);
	if (len < 0)
		return -1;
	pt_config_init(&cfg);
	cfg.begin = stream;
	cfg.end = stream + len;
	dec = pt_insn_alloc_decoder(&cfg);
	image = pt_image_alloc(NULL);
	if (!dec || !image)
		goto fail;
	pt_image_set_callback(image, read_one, o);
	pt_insn_set_image(dec, image);
	status = pt_insn_sync_forward(dec);
	while (status >= 0 && (status & pts_event_pending))
		status = pt_insn_event(dec, &ev, sizeof(ev));
	if (status < 0)
		goto fail;
	memset(&insn, 0, sizeof(insn));
	/* It fills in the instruction before it looks for the trace it needs to go on. */
	pt_insn_next(dec, &insn, sizeof(insn));
	if (!insn.size || insn.iclass == ptic_error)
		goto fail;
	c->ip = o->ip;
	c->size = insn.size;
	c->iclass = (uint8_t)insn.iclass;
	c->indirect = is_indirect(insn.raw, insn.size);
	c->rep = has_rep(insn.raw, insn.size);
	c->valid = 1;
	pt_insn_free_decoder(dec);
	pt_image_free(image);
	return 0;
fail:
	if (dec)
		pt_insn_free_decoder(dec);
	if (image)
		pt_image_free(image);
	return -1;
}

static const struct synth_class *classify(struct classifier *cl, uint64_t ip)
{
	struct synth_class *c = &cl->slots[(ip ^ (ip >> 16)) & (CLASS_SLOTS - 1)];
	struct one_insn o = {.ip = ip};
	ssize_t n;

	if (c->valid && c->ip == ip)
		return c;
	n = pread(cl->mem_fd, o.bytes, sizeof(o.bytes), (off_t)ip);
	if (n <= 0)
		return NULL;
	o.len = (size_t)n;
	memset(c, 0, sizeof(*c));
	if (classify_bytes(&o, c))
		return NULL;
	return c;
}

/* The child. */

static int wait_stop(pid_t pid, int *sig)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return ht_fail("waitpid: %s", strerror(errno));
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return 1;
	*sig = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
	return 0;
}

static int get_rip(pid_t pid, uint64_t *rip)
{
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs))
		return ht_fail("PTRACE_GETREGS: %s", strerror(errno));
	*rip = regs.rip;
	return 0;
}

static int set_rip(pid_t pid, uint64_t rip)
{
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs))
		return -1;
	regs.rip = rip;
	return ptrace(PTRACE_SETREGS, pid, NULL, &regs) ? -1 : 0;
}

/* The executable's load bias: from its mapping that holds the ELF header's file offset 0. */
static int exe_bias(pid_t pid, const char *exe, struct ht_elf_symbols *elf, uint64_t *bias)
{
	struct ht_maps maps;
	int rc = -1;

	if (ht_maps_read(pid, &maps))
		return -1;
	for (size_t i = 0; i < maps.count && rc; i++) {
		const struct ht_mapping *m = &maps.v[i];

		if (!ht_mapping_is_exec(m) || strcmp(m->path, exe))
			continue;
		rc = ht_elf_load_bias(elf, m->start, m->end, m->offset, m->perms, bias);
	}
	ht_maps_free(&maps);
	if (rc)
		return ht_fail("no executable mapping of %s", exe);
	return 0;
}

static int read_vdso(int mem_fd, const struct ht_mapping *m, struct ht_pt_mapping *out)
{
	size_t len = m->end - m->start;
	void *copy = malloc(len);

	if (!copy || pread(mem_fd, copy, len, (off_t)m->start) != (ssize_t)len) {
		free(copy);
		return -1;
	}
	out->data = copy;
	out->data_len = len;
	return 0;
}

/* Save the child's executable mappings: files by path, the vdso by a copy of its bytes. */
static int save_mappings(pid_t pid, int mem_fd, struct ht_synth_trace *t)
{
	struct ht_maps maps;

	if (ht_maps_read(pid, &maps))
		return -1;
	t->maps = calloc(maps.count + 1, sizeof(*t->maps));
	if (!t->maps) {
		ht_maps_free(&maps);
		return ht_fail("out of memory");
	}
	for (size_t i = 0; i < maps.count; i++) {
		const struct ht_mapping *m = &maps.v[i];
		struct ht_pt_mapping *out = &t->maps[t->nmaps];

		if (!ht_mapping_is_exec(m))
			continue;
		out->start = m->start;
		out->end = m->end;
		out->file_offset = m->offset;
		if (m->path[0] == '/') {
			out->path = strdup(m->path);
			t->nmaps++;
		} else if (!strcmp(m->path, "[vdso]") && !read_vdso(mem_fd, m, out)) {
			t->nmaps++;
		}
	}
	ht_maps_free(&maps);
	return 0;
}

static pid_t start_child(const struct ht_synth_record_opts *opts)
{
	char *default_argv[] = {(char *)opts->exe, NULL};
	pid_t pid = fork();

	if (pid)
		return pid;
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	execv(opts->exe, opts->argv ? opts->argv : default_argv);
	_exit(127);
}

/* Run to ADDR with a breakpoint; rip is then ADDR. */
static int run_to(pid_t pid, uint64_t addr)
{
	long word, trap;
	int sig;

	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, (void *)addr, NULL);
	if (errno)
		return ht_fail("PEEKTEXT %#lx: %s", (unsigned long)addr, strerror(errno));
	trap = (word & ~0xffl) | 0xcc;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)addr, (void *)trap))
		return ht_fail("POKETEXT: %s", strerror(errno));
	for (;;) {
		if (ptrace(PTRACE_CONT, pid, NULL, NULL) || wait_stop(pid, &sig))
			return ht_fail("the program ended before reaching its start function");
		if (sig == SIGTRAP)
			break;
	}
	if (ptrace(PTRACE_POKETEXT, pid, (void *)addr, (void *)word) || set_rip(pid, addr))
		return ht_fail("cannot restore the breakpoint: %s", strerror(errno));
	return 0;
}

static int append(struct ht_synth_trace *t, size_t *cap, const struct synth_class *c)
{
	if (t->count == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4096;
		void *p = realloc(t->insns, ncap * sizeof(*t->insns));

		if (!p)
			return ht_fail("out of memory");
		t->insns = p;
		*cap = ncap;
	}
	t->insns[t->count++] = (struct ht_synth_insn){
		.ip = c->ip,
		.size = c->size,
		.iclass = c->iclass,
		.indirect = c->indirect,
	};
	return 0;
}

/*
 * Single-step from rip to STOP. A step that stops with SIGTRAP executed the
 * instruction (a rep string instruction traps after each iteration: it is
 * one instruction to PT, counted when rip moves on). A step that stops with
 * another signal executed it only if rip moved; the signal is delivered on
 * the next step, which stops at the handler's first instruction.
 */
static int step_loop(pid_t pid, struct classifier *cl, uint64_t stop, size_t max,
		     struct ht_synth_trace *t)
{
	size_t cap = 0, steps = 0;
	uint64_t cur = 0, next = 0;
	int pending = 0, sig, ended;

	if (get_rip(pid, &cur))
		return -1;
	while (cur != stop && steps++ < max) {
		const struct synth_class *c = classify(cl, cur);
		int delivering = pending;

		if (!c)
			return ht_fail("cannot decode the instruction at %#lx", (unsigned long)cur);
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)pending))
			return ht_fail("PTRACE_SINGLESTEP: %s", strerror(errno));
		pending = 0;
		ended = wait_stop(pid, &sig);
		if (ended < 0)
			return -1;
		if (ended) {
			t->exited = 1;
			return append(t, &cap, c);
		}
		if (get_rip(pid, &next))
			return -1;
		if (delivering) {
			/* Nothing ran: the kernel set up the handler's frame instead. */
			if (t->count) {
				t->insns[t->count - 1].interrupted = 1;
				t->insns[t->count - 1].resume_ip = cur;
			}
		} else if (sig == SIGTRAP) {
			if (!(next == cur && c->rep) && append(t, &cap, c))
				return -1;
		} else {
			if (next != cur && append(t, &cap, c))
				return -1;
			pending = sig;
		}
		cur = next;
	}
	t->end_ip = cur;
	return 0;
}

int ht_synth_record(const struct ht_synth_record_opts *opts, struct ht_synth_trace *out)
{
	struct classifier cl = {.mem_fd = -1};
	struct ht_elf_symbols *elf = NULL;
	uint64_t start = 0, stop = 0;
	char path[64];
	pid_t pid;
	int sig, rc = -1, fd;

	memset(out, 0, sizeof(*out));
	if (!realpath(opts->exe, out->exe))
		return ht_fail("%s: %s", opts->exe, strerror(errno));
	fd = open(out->exe, O_RDONLY | O_CLOEXEC);
	elf = fd >= 0 ? ht_elf_symbols_open_fd(fd, out->exe) : NULL;
	if (fd >= 0)
		close(fd);
	if (!elf)
		return ht_fail("%s: cannot read its symbols", out->exe);
	cl.slots = calloc(CLASS_SLOTS, sizeof(*cl.slots));
	pid = start_child(opts);
	if (pid < 0 || !cl.slots || wait_stop(pid, &sig)) {
		ht_fail("cannot start %s", out->exe);
		goto done;
	}
	if (exe_bias(pid, out->exe, elf, &out->exe_bias))
		goto kill;
	start = ht_synth_symbol(out, opts->start);
	stop = opts->stop ? ht_synth_symbol(out, opts->stop) : 0;
	if (!start || (opts->stop && !stop)) {
		ht_fail("%s: no function %s", out->exe, start ? opts->stop : opts->start);
		goto kill;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	cl.mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (cl.mem_fd < 0 || run_to(pid, start) || save_mappings(pid, cl.mem_fd, out))
		goto kill;
	rc = step_loop(pid, &cl, stop, opts->max_steps, out);
kill:
	if (!out->exited) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
done:
	if (cl.mem_fd >= 0)
		close(cl.mem_fd);
	free(cl.slots);
	ht_elf_symbols_free(elf);
	return rc;
}

uint64_t ht_synth_symbol(const struct ht_synth_trace *t, const char *name)
{
	const struct ht_elf_sym *sym;
	struct ht_elf_symbols *elf;
	uint64_t addr = 0;
	int fd = open(t->exe, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	elf = ht_elf_symbols_open_fd(fd, t->exe);
	close(fd);
	if (elf && ht_elf_symbols_lookup(elf, name, &sym, 1))
		addr = sym->addr + t->exe_bias;
	ht_elf_symbols_free(elf);
	return addr;
}

void ht_synth_trace_free(struct ht_synth_trace *t)
{
	for (size_t i = 0; i < t->nmaps; i++) {
		free((void *)t->maps[i].path);
		free((void *)t->maps[i].data);
	}
	free(t->maps);
	free(t->insns);
	memset(t, 0, sizeof(*t));
}

/*
 * A syscall that a signal interrupted comes back in the handler, which is
 * the next instruction recorded; any other instruction was on its way to
 * resume_ip when the signal came.
 */
uint64_t ht_synth_flow_target(const struct ht_synth_trace *t, size_t i)
{
	const struct ht_synth_insn *in = &t->insns[i];

	if (in->interrupted && in->iclass != ptic_far_call)
		return in->resume_ip;
	return i + 1 < t->count ? t->insns[i + 1].ip : t->end_ip;
}

/* Encoding. */

#define RETSTACK   64	 /* libipt's return-compression stack keeps the last 64 calls */
#define TMA_FC_MAX 0x1ff /* TMA's fast counter has 9 bits */

struct encoder {
	struct pt_encoder *enc;
	const struct ht_synth_encode_opts *o;
	struct ht_synth_stream *out;
	uint64_t tnt_bits;
	unsigned tnt_count;
	uint64_t tnt_first; /* the cycle of the pending TNT's first branch */
	uint64_t ret[RETSTACK];
	unsigned ret_top, ret_count;
	/* how many of the stack's entries were pushed before the last kernel excursion */
	unsigned ret_before_kernel;
	uint64_t last_psb;
	size_t psb_cap;
	/*
	 * The ground truth: a core cycle clock. Instruction i retires at its
	 * cycle; TSC = tsc0 + cycle x nom / cbr; the crystal clock (CTC, what
	 * MTC counts) ticks every art_ebx / art_eax TSC. Kept as TSC x cbr so
	 * that every conversion is exact.
	 */
	uint64_t now;	     /* the cycle the packets being written belong to */
	uint64_t cpi, cpk;   /* cycles per instruction, per kernel excursion */
	uint64_t nom, cbr;   /* TSC ticks per cycle: nom / cbr */
	uint64_t next_mtc;   /* the CTC value of the next MTC */
	uint64_t cyc_last;   /* the cycle of the last CYC (the cycle counter restarts there) */
	uint32_t cycs;	     /* CYC packets since the last TSC or MTC */
	uint64_t timed;	     /* the cycle of the last packet libipt takes a block's time from */
	uint32_t timed_cycs; /* the CYC packets since the last TSC or MTC that went into it */
	int packets_lost;    /* within an overflow: no packets at all */
};

static int timing_mtc(const struct encoder *e)
{
	return e->o->timing >= HT_SYNTH_TIMING_MTC;
}

static int timing_cyc(const struct encoder *e)
{
	return e->o->timing == HT_SYNTH_TIMING_CYC;
}

/* TSC x cbr at CYCLE. */
static unsigned __int128 clk_at(const struct encoder *e, uint64_t cycle)
{
	return (unsigned __int128)e->o->tsc0 * e->cbr + (unsigned __int128)cycle * e->nom;
}

static uint64_t tsc_at(const struct encoder *e, uint64_t cycle)
{
	return (uint64_t)(clk_at(e, cycle) / e->cbr);
}

/* The crystal clock at CYCLE: TSC x eax / ebx, rounded down. */
static uint64_t ctc_at(const struct encoder *e, uint64_t cycle)
{
	return (uint64_t)(clk_at(e, cycle) * e->o->art_eax /
			  ((unsigned __int128)e->o->art_ebx * e->cbr));
}

/* The first cycle at which the crystal clock reads CTC or more. */
static uint64_t cycle_of_ctc(const struct encoder *e, uint64_t ctc)
{
	unsigned __int128 num = (unsigned __int128)ctc * e->o->art_ebx * e->cbr;
	unsigned __int128 clk = (num + e->o->art_eax - 1) / e->o->art_eax;
	unsigned __int128 base = (unsigned __int128)e->o->tsc0 * e->cbr;

	if (clk <= base)
		return 0;
	return (uint64_t)((clk - base + e->nom - 1) / e->nom);
}

static uint64_t enc_offset(struct encoder *e)
{
	uint64_t off = 0;

	pt_enc_get_offset(e->enc, &off);
	return off;
}

/*
 * With cycle-accurate timing a CYC precedes every packet that carries a
 * time (CycThresh 0): the core cycles since the last CYC, up to AT. None
 * when no cycle passed.
 */
static int put_cyc(struct encoder *e, uint64_t at)
{
	struct pt_packet p = {.type = ppt_cyc};

	if (!timing_cyc(e) || at <= e->cyc_last)
		return 0;
	p.payload.cyc.value = at - e->cyc_last;
	e->cyc_last = at;
	e->cycs++;
	e->out->ncyc++;
	return ht_synth_put_packet(e->enc, &p);
}

/*
 * A TNT's CYC gives the time of its first branch (SDM, cycle-accurate
 * mode): the bits gather until another packet must go out, and every
 * packet goes out in time order, so anything else flushes them first.
 */
static int flush_tnt(struct encoder *e)
{
	struct pt_packet p = {.type = e->tnt_count > 6 ? ppt_tnt_64 : ppt_tnt_8};

	if (!e->tnt_count)
		return 0;
	p.payload.tnt.bit_size = (uint8_t)e->tnt_count;
	p.payload.tnt.payload = e->tnt_bits;
	e->tnt_bits = 0;
	e->tnt_count = 0;
	return put_cyc(e, e->tnt_first) || ht_synth_put_packet(e->enc, &p);
}

/* Oldest branch in the most significant bit, as the decoder reads them. */
static int add_tnt(struct encoder *e, int taken)
{
	if (!e->tnt_count) {
		e->tnt_first = e->now;
		e->timed = e->now;
		e->timed_cycs = e->cycs + timing_cyc(e);
	}
	e->tnt_bits = e->tnt_bits << 1 | (taken ? 1 : 0);
	if (++e->tnt_count == 47)
		return flush_tnt(e);
	return 0;
}

/* A packet that carries the time of NOW: pending TNT bits first, then its CYC. */
static int put_timed(struct encoder *e, const struct pt_packet *p)
{
	if (flush_tnt(e) || put_cyc(e, e->now))
		return -1;
	e->timed = e->now;
	e->timed_cycs = e->cycs;
	return ht_synth_put_packet(e->enc, p);
}

static int put_ip(struct encoder *e, enum pt_packet_type type, uint64_t ip)
{
	struct pt_packet p = ht_synth_ip_packet(type, ip);

	return put_timed(e, &p);
}

/* TMA: the crystal clock at the TSC just written, and the TSC ticks since it last ticked. */
static int put_tma(struct encoder *e)
{
	struct pt_packet p = {.type = ppt_tma};
	uint64_t ctc = ctc_at(e, e->now);
	unsigned __int128 edge = (unsigned __int128)ctc * e->o->art_ebx * e->cbr;
	unsigned __int128 fc = (clk_at(e, e->now) * e->o->art_eax - edge) /
			       ((unsigned __int128)e->o->art_eax * e->cbr);

	if (fc > TMA_FC_MAX)
		return ht_fail(
			"a crystal clock tick of %u/%u TSC ticks overflows TMA's fast counter",
			e->o->art_ebx, e->o->art_eax);
	p.payload.tma.ctc = (uint16_t)ctc;
	p.payload.tma.fc = (uint16_t)fc;
	return ht_synth_put_packet(e->enc, &p);
}

/* TSC, and with MTC a TMA after it, as a CPU writes them. */
static int put_tsc_tma(struct encoder *e)
{
	struct pt_packet p = ht_synth_tsc_packet(tsc_at(e, e->now));

	if (ht_synth_put_packet(e->enc, &p))
		return -1;
	e->cycs = 0;
	return timing_mtc(e) ? put_tma(e) : 0;
}

static int put_tsc(struct encoder *e)
{
	if (flush_tnt(e) || put_cyc(e, e->now))
		return -1;
	return put_tsc_tma(e);
}

static int put_pgd(struct encoder *e)
{
	struct pt_packet p = {.type = ppt_tip_pgd};

	p.payload.ip.ipc = pt_ipc_suppressed;
	return put_timed(e, &p);
}

/*
 * Time goes on to cycle TO. The crystal clock keeps ticking whatever the
 * thread does, in the kernel too (user-only tracing stops the packets of
 * the code, not the timing ones): an MTC for each multiple of 2^mtc_freq
 * it reaches, at the cycle it reaches it. None while packets are lost.
 */
static int advance(struct encoder *e, uint64_t to)
{
	while (timing_mtc(e)) {
		uint64_t at = cycle_of_ctc(e, e->next_mtc);
		struct pt_packet p = {.type = ppt_mtc};

		if (at > to)
			break;
		p.payload.mtc.ctc = (uint8_t)(e->next_mtc >> e->o->mtc_freq);
		e->next_mtc += 1ull << e->o->mtc_freq;
		if (e->packets_lost)
			continue;
		e->now = at;
		if (flush_tnt(e) || put_cyc(e, at) || ht_synth_put_packet(e->enc, &p))
			return -1;
		e->cycs = 0;
		e->out->nmtc++;
	}
	e->now = to;
	return 0;
}

static void push_ret(struct encoder *e, uint64_t ip)
{
	/* A full stack drops its oldest entry. */
	if (e->ret_count == RETSTACK && e->ret_before_kernel)
		e->ret_before_kernel--;
	e->ret_top = (e->ret_top + 1) % RETSTACK;
	e->ret[e->ret_top] = ip;
	if (e->ret_count < RETSTACK)
		e->ret_count++;
}

/* A return can be a taken TNT bit when it goes where the last unmatched call came from. */
static int try_compress(struct encoder *e, uint64_t target)
{
	if (e->o->noretcomp || !e->ret_count || e->ret[e->ret_top] != target)
		return 0;
	e->ret_top = (e->ret_top + RETSTACK - 1) % RETSTACK;
	e->ret_count--;
	if (e->ret_before_kernel > e->ret_count) {
		e->ret_before_kernel = e->ret_count;
		e->out->kernel_compressed++;
	}
	return 1;
}

/*
 * The kernel ran from the last instruction's cycle to RESUME_AT: tracing
 * stops (PGD) and starts again (MODE.exec, PGE) at RESUME. With TSC only,
 * a TSC before MODE.exec gives the time back; with MTC, the MTCs written
 * meanwhile do. The return-compression stack is kept: only a PSB clears
 * it ("only RETs that correspond to CALLs seen since the last PSB may be
 * compressed"), and libipt's decoder keeps its own across PGD and PGE too.
 */
static int kernel_excursion(struct encoder *e, uint64_t resume, uint64_t resume_at)
{
	struct pt_packet mode = ht_synth_mode_exec_packet();

	if (put_pgd(e) || advance(e, resume_at))
		return -1;
	if (!timing_mtc(e) && put_tsc(e))
		return -1;
	if (put_timed(e, &mode) || put_ip(e, ppt_tip_pge, resume))
		return -1;
	e->ret_before_kernel = e->ret_count;
	return 0;
}

/* The packets of instruction IN's own flow to TARGET; a far call's are kernel_excursion()'s. */
static int encode_flow(struct encoder *e, const struct ht_synth_insn *in, uint64_t target)
{
	uint64_t fallthrough = in->ip + in->size;

	switch (in->iclass) {
	case ptic_cond_jump:
		return add_tnt(e, target != fallthrough);
	case ptic_call:
		if (!(!in->indirect && target == fallthrough))
			push_ret(e, fallthrough);
		return in->indirect ? put_ip(e, ppt_tip, target) : 0;
	case ptic_jump:
		return in->indirect ? put_ip(e, ppt_tip, target) : 0;
	case ptic_return:
		if (try_compress(e, target))
			return add_tnt(e, 1);
		return put_ip(e, ppt_tip, target);
	case ptic_far_call:
		return 0;
	case ptic_far_return:
	case ptic_far_jump:
		return ht_fail("far transfer at %#lx in user space", (unsigned long)in->ip);
	default:
		return 0;
	}
}

static int record_psb(struct encoder *e, uint64_t offset, size_t index)
{
	struct ht_synth_stream *s = e->out;

	if (s->npsbs == e->psb_cap) {
		size_t ncap = e->psb_cap ? e->psb_cap * 2 : 64;
		void *p = realloc(s->psbs, ncap * sizeof(*s->psbs));

		if (!p)
			return -1;
		s->psbs = p;
		e->psb_cap = ncap;
	}
	s->psbs[s->npsbs++] = (struct ht_synth_psb){offset, index};
	return 0;
}

/*
 * PSB+ naming IP: PSB, TSC (with MTC: TMA, CBR), MODE.exec, FUP, PSBEND.
 * With CYC, a CYC first, so that the next one counts from the TSC.
 */
static int psb(struct encoder *e, uint64_t ip, size_t index)
{
	struct pt_packet psb = {.type = ppt_psb}, end = {.type = ppt_psbend};
	struct pt_packet cbr = {.type = ppt_cbr}, mode = ht_synth_mode_exec_packet();
	struct pt_packet fup = ht_synth_ip_packet(ppt_fup, ip);
	uint64_t off;

	if (flush_tnt(e) || put_cyc(e, e->now))
		return -1;
	off = enc_offset(e);
	cbr.payload.cbr.ratio = (uint8_t)e->cbr;
	if (ht_synth_put_packet(e->enc, &psb) || put_tsc_tma(e) ||
	    (timing_mtc(e) && ht_synth_put_packet(e->enc, &cbr)) ||
	    ht_synth_put_packet(e->enc, &mode) || ht_synth_put_packet(e->enc, &fup) ||
	    ht_synth_put_packet(e->enc, &end) || record_psb(e, off, index))
		return -1;
	e->last_psb = off;
	e->timed = e->now;
	e->timed_cycs = 0;
	/* A decoder that syncs here starts with an empty return stack. */
	e->ret_count = 0;
	e->ret_before_kernel = 0;
	return 0;
}

/* Lose instructions [at, at + len): flush what came before, OVF, then FUP where it resumes. */
static int overflow(struct encoder *e, const struct ht_synth_trace *t, size_t resume)
{
	struct pt_packet ovf = {.type = ppt_ovf};

	e->packets_lost = 0;
	/* With CYC, the OVF's CYC says how long the overflow lasted. */
	if (flush_tnt(e) || put_cyc(e, e->now))
		return -1;
	e->out->ovf_offset = enc_offset(e);
	e->out->ovf_resume = resume;
	if (ht_synth_put_packet(e->enc, &ovf) || put_tsc_tma(e) ||
	    put_ip(e, ppt_fup, t->insns[resume].ip))
		return -1;
	e->ret_count = 0;
	e->ret_before_kernel = 0;
	return 0;
}

static int encode_insn(struct encoder *e, const struct ht_synth_trace *t, size_t i, size_t last)
{
	const struct ht_synth_insn *in = &t->insns[i];
	const struct ht_synth_encode_opts *o = e->o;
	uint64_t next = i + 1 < t->count ? t->insns[i + 1].ip : t->end_ip;
	int async = in->interrupted && in->iclass != ptic_far_call;
	int lost = o->ovf_len && i >= o->ovf_at && i < o->ovf_at + o->ovf_len;
	int kernel = in->iclass == ptic_far_call || async;
	uint64_t next_at = e->now + e->cpi + (kernel ? e->cpk : 0);

	e->packets_lost = lost;
	e->out->tsc[i] = tsc_at(e, e->now);
	if (!lost && in->iclass == ptic_far_call && i + 1 == t->count && t->exited) {
		e->out->known_tsc[i] = tsc_at(e, e->timed);
		return put_pgd(e); /* exit_group: the kernel never comes back */
	}
	if (!lost && encode_flow(e, in, ht_synth_flow_target(t, i)))
		return -1;
	/* What a decoder can know of the time by the end of this instruction: not the kernel's. */
	e->out->known_tsc[i] = tsc_at(e, e->timed);
	e->out->known_cycs[i] = e->timed_cycs;
	if (!lost && in->iclass == ptic_far_call && kernel_excursion(e, next, next_at))
		return -1;
	/* A signal interrupted the thread on its way to resume_ip: it comes back in the handler. */
	if (!lost && async &&
	    (put_ip(e, ppt_fup, in->resume_ip) || kernel_excursion(e, next, next_at)))
		return -1;
	if (advance(e, next_at))
		return -1;
	if (i + 1 >= last)
		return 0;
	if (o->ovf_len && i + 1 == o->ovf_at + o->ovf_len)
		return overflow(e, t, i + 1);
	if (lost)
		return 0;
	if (o->tsc_every && (i + 1) % o->tsc_every == 0 && put_tsc(e))
		return -1;
	if (o->psb_period && enc_offset(e) - e->last_psb >= o->psb_period)
		return psb(e, t->insns[i + 1].ip, i + 1);
	return 0;
}

/* The clock of OPTS: cycles per instruction and per excursion, TSC ticks per cycle. */
static int setup_clock(struct encoder *e, const struct ht_synth_encode_opts *o)
{
	if (o->timing == HT_SYNTH_TIMING_TSC) {
		/* A cycle is a TSC tick. */
		e->cpi = o->tsc_per_insn;
		e->cpk = o->tsc_per_kernel;
		e->nom = e->cbr = 1;
		return 0;
	}
	if (o->timing != HT_SYNTH_TIMING_MTC && o->timing != HT_SYNTH_TIMING_CYC)
		return ht_fail("unknown timing %d", (int)o->timing);
	if (!o->cbr || !o->nom_freq || !o->art_eax || !o->art_ebx || o->mtc_freq > 15)
		return ht_fail(
			"MTC timing needs cbr, nom_freq, art_eax, art_ebx and mtc_freq <= 15");
	e->cpi = o->cyc_per_insn;
	e->cpk = o->cyc_per_kernel;
	e->nom = o->nom_freq;
	e->cbr = o->cbr;
	/* The first MTC is the first multiple of 2^mtc_freq after the start. */
	e->next_mtc = ((ctc_at(e, 0) >> o->mtc_freq) + 1) << o->mtc_freq;
	return 0;
}

int ht_synth_encode(const struct ht_synth_trace *t, size_t first, size_t last,
		    const struct ht_synth_encode_opts *opts, struct ht_synth_stream *out)
{
	struct encoder e = {.o = opts, .out = out};
	size_t cap = (last - first) * 24 + 4096;

	memset(out, 0, sizeof(*out));
	out->opts = *opts;
	if (first >= last || last > t->count)
		return ht_fail("bad instruction range");
	if (setup_clock(&e, opts))
		return -1;
	if (opts->timing != HT_SYNTH_TIMING_TSC) {
		uint64_t mtc = e.next_mtc,
			 mtc_cycles = cycle_of_ctc(&e, mtc + (1ull << opts->mtc_freq)) -
				      cycle_of_ctc(&e, mtc);
		uint64_t cycles = (last - first) * e.cpi;

		for (size_t i = first; i < last; i++)
			if (t->insns[i].iclass == ptic_far_call || t->insns[i].interrupted)
				cycles += e.cpk;
		/* A CYC before each packet, and each MTC with its CYC. */
		cap += (last - first) * 12 + (size_t)(cycles / (mtc_cycles ? mtc_cycles : 1)) * 12;
		out->mtc_period_tsc = ((uint64_t)opts->art_ebx << opts->mtc_freq) / opts->art_eax;
	}
	out->buf = malloc(cap);
	out->tsc = calloc(t->count, sizeof(*out->tsc));
	out->known_tsc = calloc(t->count, sizeof(*out->known_tsc));
	out->known_cycs = calloc(t->count, sizeof(*out->known_cycs));
	if (!out->buf || !out->tsc || !out->known_tsc || !out->known_cycs)
		return ht_fail("out of memory");
	e.enc = ht_synth_encoder_new(out->buf, cap);
	if (!e.enc)
		return ht_fail("libipt refused the encoder configuration");
	if (!opts->no_header && psb(&e, t->insns[first].ip, first))
		goto fail;
	for (size_t i = first; i < last; i++)
		if (encode_insn(&e, t, i, last))
			goto fail;
	if (flush_tnt(&e))
		goto fail;
	if (opts->end_disable && (put_ip(&e, ppt_fup, t->end_ip) || put_pgd(&e)))
		goto fail;
	out->len = enc_offset(&e);
	pt_free_encoder(e.enc);
	return 0;
fail:
	pt_free_encoder(e.enc);
	return ht_fail("encoding failed at offset %lu", (unsigned long)enc_offset(&e));
}

void ht_synth_cpu_info(const struct ht_synth_encode_opts *opts, struct ht_pt_cpu_info *out)
{
	memset(out, 0, sizeof(*out));
	out->tsc = 1;
	out->noretcomp = opts->noretcomp ? 1 : 0;
	if (opts->timing == HT_SYNTH_TIMING_TSC)
		return;
	out->mtc = 1;
	out->mtc_freq = opts->mtc_freq;
	out->nom_freq = opts->nom_freq;
	out->tsc_art_eax = opts->art_eax;
	out->tsc_art_ebx = opts->art_ebx;
	out->cyc = opts->timing == HT_SYNTH_TIMING_CYC;
}

void ht_synth_stream_free(struct ht_synth_stream *s)
{
	free(s->buf);
	free(s->psbs);
	free(s->tsc);
	free(s->known_tsc);
	free(s->known_cycs);
	memset(s, 0, sizeof(*s));
}
