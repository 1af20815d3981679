/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Intel PT decode: one PT byte stream (one CPU's AUX buffer, or one
 * thread's) through libipt's block decoder into a stream of items: blocks
 * of instructions with how the last one left the block (call, return,
 * jump ...), and the events between them (tracing enabled and disabled,
 * overflows, decode errors). callstack.h turns the items into slices.
 *
 * Everything the decoder needs comes from the caller, so a capture can be
 * decoded live or offline on another machine: the CPU and the trace
 * configuration (struct ht_pt_cpu_info), the executable mappings (struct
 * ht_pt_mapping), and (tsc, CLOCK_MONOTONIC) pairs (struct ht_pt_clock).
 */
#ifndef HT_INTELPT_DECODE_H
#define HT_INTELPT_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What libipt needs to know about the machine and the trace configuration
 * to decode it right; the capture side fills it when it opens the intel_pt
 * event and saves it with the capture.
 */
struct ht_pt_cpu_info {
	/* cpuid leaf 0: 1 when the vendor string is "GenuineIntel". Errata apply only then. */
	uint8_t vendor_intel;
	/*
	 * cpuid leaf 1, EAX: family = bits 11:8, plus bits 27:20 (extended
	 * family) when that is 15; model = bits 7:4, plus bits 19:16 << 4
	 * (extended model) when the family is 6 or 15; stepping = bits 3:0.
	 */
	uint16_t family;
	uint8_t model;
	uint8_t stepping;
	/*
	 * The mtc_period the event was opened with (perf_event_attr.config at
	 * the bits /sys/bus/event_source/devices/intel_pt/format/mtc_period
	 * names; perf's default is 3). Only used when mtc is set.
	 */
	uint8_t mtc_freq;
	/*
	 * /sys/bus/event_source/devices/intel_pt/max_nonturbo_ratio (the
	 * nominal core:bus ratio, MSR_PLATFORM_INFO[15:8]); lets CBR packets
	 * calibrate CYC. 0 when unknown.
	 */
	uint8_t nom_freq;
	/*
	 * cpuid leaf 0x15 EAX and EBX (ART to TSC: TSC = ART * EBX / EAX),
	 * as /sys/bus/event_source/devices/intel_pt/tsc_art_ratio shows them
	 * in the other order: "EBX:EAX". Needed with MTC; 0 when unknown.
	 */
	uint32_t tsc_art_eax;
	uint32_t tsc_art_ebx;
	/*
	 * The config bits the event was opened with (format/tsc, mtc, cyc,
	 * noretcomp). mtc says whether mtc_freq and the ratio apply; libipt
	 * reads the others from the stream, they are kept for the record.
	 */
	uint8_t tsc, mtc, cyc, noretcomp;
};

/*
 * The CPU fields from saved cpuid values: VENDOR is leaf 0's 12-character
 * string, LEAF1_EAX leaf 1's EAX (struct ht_cpuid_values in rawcap.h keeps
 * both). The other fields are left as they are.
 */
void ht_pt_cpu_from_cpuid(struct ht_pt_cpu_info *out, const char *vendor, uint32_t leaf1_eax);

/*
 * This machine's CPU (cpuid) and the intel_pt PMU's timing attributes
 * (sysfs; left 0 where the PMU is absent). The trace configuration bits are
 * set to perf's default (tsc, mtc, mtc_period=3): the capture overwrites
 * them with what it opened. Returns 0.
 */
int ht_pt_cpu_info_local(struct ht_pt_cpu_info *out);

/*
 * One executable mapping of the traced process: code in a file (path at
 * file_offset), or bytes in memory (a copy of the vdso, JIT code). The
 * decoder reads instructions from these, so they must be what ran.
 */
struct ht_pt_mapping {
	uint64_t start, end;  /* [start, end): runtime addresses */
	uint64_t file_offset; /* where start lies in path */
	const char *path;     /* NULL: the bytes are in data */
	const void *data;     /* end - start bytes (data_len may be shorter) */
	size_t data_len;
};

/* The traced memory image: libipt's image and section cache plus our own view of the code. */
struct ht_pt_image;
struct pt_image;

/*
 * Build an image of MAPS (copied). A file that cannot be read is left out
 * (decoding there then reports -pte_nomap gaps) and counted; see
 * ht_pt_image_skipped(). Returns NULL with ht_last_error() set only when
 * nothing can be built (no memory, bad arguments).
 */
struct ht_pt_image *ht_pt_image_new(const struct ht_pt_mapping *maps, size_t n);
void ht_pt_image_free(struct ht_pt_image *img);
/* How many mappings were left out, and why the first was. */
size_t ht_pt_image_skipped(const struct ht_pt_image *img, const char **first_reason);
/* libipt's image, for a caller that runs libipt itself (the benchmark). */
struct pt_image *ht_pt_image_libipt(const struct ht_pt_image *img);
/* Copy up to LEN code bytes at ADDR; returns how many could be read (0: unmapped). */
size_t ht_pt_image_read(const struct ht_pt_image *img, uint64_t addr, void *buf, size_t len);

/*
 * TSC to CLOCK_MONOTONIC. The capture takes (rdtsc, clock_gettime) pairs
 * around the recording (at least one at its start and one at its end; more
 * give a better fit when the guest's TSC drifts against the kernel clock).
 * A TSC between two pairs is interpolated on the line through them; one
 * outside is extrapolated along the nearest two. With a single pair the
 * slope comes from tsc_hz. Pairs whose tsc or time goes backwards are
 * dropped.
 */
struct ht_pt_clock_pair {
	uint64_t tsc;
	uint64_t mono_ns;
};

struct ht_pt_clock {
	struct ht_pt_clock_pair *pairs; /* sorted by tsc */
	size_t count;
	uint64_t tsc_hz; /* slope with a single pair; 0: unknown */
};

/* Copy and sort PAIRS into CLOCK. Returns 0, or -1 with ht_last_error() set. */
int ht_pt_clock_init(struct ht_pt_clock *clock, const struct ht_pt_clock_pair *pairs, size_t n,
		     uint64_t tsc_hz);
void ht_pt_clock_free(struct ht_pt_clock *clock);
/* CLOCK_MONOTONIC ns of TSC; 0 when the clock has no pairs. */
uint64_t ht_pt_tsc_to_ns(const struct ht_pt_clock *clock, uint64_t tsc);

/* How the last instruction of a block left it (libipt's instruction class). */
enum ht_pt_branch {
	HT_PT_BR_NONE = 0, /* no branch: the block ended for another reason */
	HT_PT_BR_CALL,	   /* near call; next_ip is its return address */
	HT_PT_BR_RETURN,   /* near return */
	HT_PT_BR_JUMP,	   /* near unconditional jump, direct or indirect */
	HT_PT_BR_COND,	   /* near conditional jump, taken or not */
	HT_PT_BR_FAR_CALL, /* syscall, sysenter, int, far call */
	HT_PT_BR_FAR_RET,  /* sysret, iret, far return */
	HT_PT_BR_FAR_JUMP, /* far jump */
	HT_PT_BR_UNKNOWN,  /* libipt did not say: an indirect jump or a far transfer */
};

enum ht_pt_item_kind {
	HT_PT_ITEM_BLOCK = 0, /* ninsn instructions from ip to end_ip ran, in address order */
	HT_PT_ITEM_SYNC,      /* synchronized at the PSB at offset: a new run of trace begins */
	HT_PT_ITEM_ENABLED,   /* TIP.PGE: tracing (re)starts at ip */
	HT_PT_ITEM_DISABLED, /* TIP.PGD: tracing stops (user-only: the thread entered the kernel) */
	HT_PT_ITEM_OVERFLOW, /* OVF: trace was lost; ip is where it resumes, 0 while disabled */
	HT_PT_ITEM_ERROR,    /* decode error at offset: trace is lost up to the next SYNC */
	HT_PT_ITEM_OTHER,    /* another libipt event (exec mode, paging, vmcs ...): pt_event */
};

struct ht_pt_item {
	uint8_t kind;	/* enum ht_pt_item_kind */
	uint8_t branch; /* BLOCK: enum ht_pt_branch */
	uint8_t async; /* DISABLED: asynchronous (an interrupt, not an instruction of the thread) */
	uint8_t syscall; /* DISABLED: the last instruction was syscall, sysenter or int */
	uint32_t ninsn;	 /* BLOCK */
	/*
	 * The time: libipt's TSC estimate (TSC packets refined by MTC and
	 * CYC where the trace has them; 0 before the first TSC) at the last
	 * packet decoded by the end of a block (so a block that ran without
	 * one has the time of the packet before it, never a later one), and
	 * the same on CLOCK_MONOTONIC (0 without a clock).
	 */
	uint64_t tsc;
	uint64_t time_ns;
	/*
	 * BLOCK: the first instruction. ENABLED: where tracing starts.
	 * DISABLED: where the thread resumes when it comes back (the
	 * instruction after a syscall or call, the interrupted one for an
	 * asynchronous disable), 0 when that cannot be known. OVERFLOW: where
	 * tracing resumes, 0 when it resumed disabled. OTHER: the event's IP
	 * where it has one.
	 */
	uint64_t ip;
	uint64_t end_ip; /* BLOCK: the last instruction */
	union {
		uint64_t next_ip; /* BLOCK ending in a call: its return address; else 0 */
		uint64_t offset;  /* SYNC, ERROR, OVERFLOW: offset in the trace buffer */
	};
	int32_t error; /* ERROR: negative libipt error code (pt_errstr(-error) says what) */
	int32_t event; /* OTHER: libipt's enum pt_event_type */
};

/*
 * Take N items, in order (they come in batches: a call per block would
 * cost about as much as decoding the block). Return nonzero to stop
 * decoding; the value is passed on as ht_pt_decode()'s result.
 */
typedef int (*ht_pt_sink_fn)(void *ctx, const struct ht_pt_item *items, size_t n);

struct ht_pt_decode_stats {
	uint64_t bytes; /* size of the buffer */
	uint64_t blocks;
	uint64_t insns;
	uint64_t syncs;	 /* PSBs synchronized on */
	uint64_t errors; /* decode errors (each a gap) */
	uint64_t overflows;
	uint64_t enables, disables;
	uint64_t first_sync_offset; /* where decoding began; bytes before it were skipped */
};

struct ht_pt_decode_opts {
	const struct ht_pt_cpu_info *cpu; /* NULL: unknown CPU, no errata */
	const struct ht_pt_clock *clock;  /* NULL: items have time_ns 0 */
	const struct ht_pt_image *image;  /* the code that ran */
	/*
	 * One CPU's stream holds the runs of every traced process, each at
	 * its own addresses: where a run may begin (a sync point, tracing
	 * enabled), the image of the process on the CPU at TIME_NS (0 before
	 * the first timing packet). NULL, or NULL returned: IMAGE.
	 */
	const struct ht_pt_image *(*image_at)(void *ctx, uint64_t time_ns);
	void *image_ctx;
};

/*
 * Decode BUF (LEN bytes, oldest first; see ht_pt_ring_linearize) and hand
 * every item to SINK in order. Decode errors are items (ERROR), never
 * swallowed: decoding goes on at the next PSB. Returns 0 when the end of
 * the buffer was reached, the sink's value when it stopped decoding, or -1
 * with ht_last_error() set when decoding could not start (bad
 * configuration, no memory). STATS may be NULL.
 */
int ht_pt_decode(const uint8_t *buf, size_t len, const struct ht_pt_decode_opts *opts,
		 ht_pt_sink_fn sink, void *ctx, struct ht_pt_decode_stats *stats);

/*
 * An AUX ring in overwrite (snapshot) mode holds its oldest data at
 * aux_head (taken after the event was disabled): copy RING (SIZE bytes) to
 * OUT oldest first. Bytes never written are zero and decode as PAD.
 */
void ht_pt_ring_linearize(const uint8_t *ring, size_t size, uint64_t aux_head, uint8_t *out);

/*
 * Length of the x86-64 instruction at P (N bytes available) when it is a
 * near call, syscall, sysenter or int; 0 otherwise. *KIND is set to
 * HT_PT_BR_CALL or HT_PT_BR_FAR_CALL. Exposed for tests.
 */
unsigned ht_x86_call_length(const uint8_t *p, size_t n, enum ht_pt_branch *kind);

#endif /* HT_INTELPT_DECODE_H */
