/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: Intel PT streams synthesized from real executions, for
 * machines without PT. A test program is single-stepped with ptrace from a
 * breakpoint at a start function to a stop function; every executed
 * instruction is recorded and classified with libipt's own instruction
 * decoder; then libipt's encoder writes the packets a CPU would have
 * written for that path with user-only tracing: PSB+ (PSB, TSC, MODE.exec,
 * FUP, PSBEND), TNT-8/TNT-64, TIP, compressed returns (the stack of calls
 * kept across kernel excursions, cleared at PSB), TIP.PGD at each syscall
 * and TIP.PGE where the thread comes back (FUP + TIP.PGD for a signal that
 * interrupts it), periodic PSB and TSC, and on request an OVF. With MTC
 * timing, a core cycle clock is the ground truth: TSC and TMA, CBR in PSB+,
 * an MTC at each crystal clock period, the kernel's time included; with
 * CYC timing also a CYC before every packet that carries a time. The
 * recording is the expected result: the instruction path and its calls
 * and returns; the stream records each instruction's time.
 */
#ifndef HT_PT_SYNTH_H
#define HT_PT_SYNTH_H

#include <stddef.h>
#include <intel-pt.h>
#include <stdint.h>
#include <sys/types.h>
#include "sources/intelpt/intelpt_decode.h"

struct ht_synth_insn {
	uint64_t ip;
	uint8_t size;
	uint8_t iclass;	     /* libipt's enum pt_insn_class */
	uint8_t indirect;    /* a near call or jump through a register or memory */
	uint8_t interrupted; /* a signal was delivered right after it */
	uint64_t resume_ip;  /* when interrupted: where the thread would have gone on */
};

struct ht_synth_trace {
	struct ht_synth_insn *insns; /* executed, in order */
	size_t count;
	uint64_t end_ip;	    /* the next instruction when recording stopped (not executed) */
	int exited;		    /* the program exited during the recording */
	struct ht_pt_mapping *maps; /* its executable mappings when the start was hit */
	size_t nmaps;
	char exe[4096];
	uint64_t exe_bias; /* runtime = file address + bias, for the executable */
};

struct ht_synth_record_opts {
	const char *exe;
	char *const *argv; /* NULL: just the program name */
	const char *start; /* function where recording starts (breakpoint) */
	const char *stop;  /* function where it stops, not executed; NULL: exit or max */
	size_t max_steps;
};

/* Run and record. Returns 0, or -1 with a message in ht_last_error(). */
int ht_synth_record(const struct ht_synth_record_opts *opts, struct ht_synth_trace *out);
void ht_synth_trace_free(struct ht_synth_trace *t);

/* The runtime address of function NAME in the recorded executable; 0 when absent. */
uint64_t ht_synth_symbol(const struct ht_synth_trace *t, const char *name);

/* Where control went after instruction I: the next executed one, or where a signal interrupted it.
 */
uint64_t ht_synth_flow_target(const struct ht_synth_trace *t, size_t i);

enum ht_synth_timing {
	HT_SYNTH_TIMING_TSC = 0, /* TSC packets only (PSB+, tsc_every, kernel excursions) */
	HT_SYNTH_TIMING_MTC,	 /* perf's default: TSC + TMA, CBR and MTC (--pt-timing coarse) */
	HT_SYNTH_TIMING_CYC,	 /* MTC and cycle-accurate CYC packets (--pt-timing fine) */
};

struct ht_synth_encode_opts {
	uint32_t psb_period;	 /* bytes between PSB+; 0: only the first */
	uint64_t tsc0;		 /* TSC of the first instruction */
	uint32_t tsc_per_insn;	 /* TSC timing: ticks per instruction ... */
	uint32_t tsc_per_kernel; /* ... and per kernel excursion */
	uint32_t tsc_every;	 /* a TSC packet every this many instructions; 0: none */
	int noretcomp;		 /* every return gets a TIP */
	size_t ovf_at, ovf_len;	 /* the packets of instructions [at, at + len) are lost to an OVF */
	int end_disable;	 /* end with FUP + TIP.PGD at end_ip, as a stop would */
	int no_header;		 /* no PSB+ first (a chunk to repeat) */
	/*
	 * MTC and CYC timing: the ground truth is a core cycle clock, each
	 * instruction cyc_per_insn cycles, each kernel excursion
	 * cyc_per_kernel more. TSC runs at nom_freq / cbr ticks per cycle
	 * (the CPU at a core:bus ratio of cbr, its TSC at the nominal one),
	 * the crystal clock that MTC counts at art_eax / art_ebx per TSC tick
	 * (cpuid 0x15: TSC = ART x ebx / eax), an MTC every 2^mtc_freq of its
	 * ticks, with the kernel running too. Pick art_ebx / art_eax whole and
	 * nom_freq / cbr exact in 8 fractional bits (libipt's fixed point) for
	 * times a decoder can give back exactly.
	 */
	enum ht_synth_timing timing;
	uint32_t cyc_per_insn, cyc_per_kernel;
	uint8_t cbr, nom_freq, mtc_freq;
	uint32_t art_eax, art_ebx;
};

struct ht_synth_psb {
	uint64_t offset; /* of the PSB in the stream */
	size_t index;	 /* the instruction its FUP names */
};

struct ht_synth_stream {
	uint8_t *buf;
	size_t len;
	struct ht_synth_psb *psbs;
	size_t npsbs;
	uint64_t *tsc; /* per instruction of the range: its TSC (the ground truth) */
	/*
	 * Per instruction: the TSC of the last packet a decoder takes time
	 * from by the end of it (its TNT's first branch, a TIP, a PGE; not a
	 * kernel excursion it starts), and how many CYC packets since the last
	 * TSC or MTC had gone into that time.
	 */
	uint64_t *known_tsc;
	uint32_t *known_cycs;
	struct ht_synth_encode_opts opts; /* what made it */
	size_t ovf_offset;		  /* of the OVF packet */
	size_t ovf_resume;		  /* the instruction its FUP names */
	uint64_t mtc_period_tsc;	  /* TSC ticks between two MTCs */
	size_t nmtc, ncyc;		  /* MTC and CYC packets written */
	/* compressed returns whose call came before a kernel excursion (PGD ... PGE) */
	size_t kernel_compressed;
};

/* Encode instructions [FIRST, LAST) of T. Returns 0, or -1 with ht_last_error(). */
int ht_synth_encode(const struct ht_synth_trace *t, size_t first, size_t last,
		    const struct ht_synth_encode_opts *opts, struct ht_synth_stream *out);
void ht_synth_stream_free(struct ht_synth_stream *s);

/* What a capture would tell the decoder for a stream encoded with OPTS: the CPU is unknown. */
void ht_synth_cpu_info(const struct ht_synth_encode_opts *opts, struct ht_pt_cpu_info *out);

/* Append a PSB+ naming IP with TSC to a stream being built by hand. Returns bytes, or -1. */
int ht_synth_psb_plus(uint8_t *buf, size_t cap, uint64_t ip, uint64_t tsc);

/* libipt's encoder writing into BUF's CAP bytes (pt_free_encoder() it), or NULL. */
struct pt_encoder *ht_synth_encoder_new(uint8_t *buf, size_t cap);

/* Packets for streams built by hand with libipt's encoder. */
int ht_synth_put_packet(struct pt_encoder *enc, const struct pt_packet *p); /* 0 or -1 */
struct pt_packet ht_synth_ip_packet(enum pt_packet_type type, uint64_t ip); /* 48-bit, sext */
struct pt_packet ht_synth_mode_exec_packet(void);			    /* 64-bit code */
struct pt_packet ht_synth_tsc_packet(uint64_t tsc);

#endif /* HT_PT_SYNTH_H */
