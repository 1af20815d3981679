/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The on-CPU source where there is no Intel PT: software cpu-clock sampling
 * of every thread of the target into per-CPU rings written backward, so the
 * last moments can be read from the newest record on. One event per CPU,
 * CPU-wide, with a BPF filter (bpf/sample_filter.bpf.c) that drops other
 * processes' samples before they are written: threads born later are
 * sampled from their first instruction, and the target's context switches
 * do not pay for perf contexts of their own.
 */
#ifndef HT_SAMPLER_H
#define HT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HT_SAMPLE_MAX_FRAMES 128
/* User stack copied per sample with --callgraph dwarf, as perf record does by default. */
#define HT_SAMPLE_STACK_BYTES 8192
/* perf's callchain context markers (linux/perf_event.h). */
#define HT_PERF_CONTEXT_KERNEL ((uint64_t)-128)
#define HT_PERF_CONTEXT_USER   ((uint64_t)-512)
#define HT_PERF_CONTEXT_MAX    ((uint64_t)-4095)

enum ht_callgraph { HT_CALLGRAPH_FP, HT_CALLGRAPH_DWARF };

struct ht_sampler_config {
	int tgid; /* the one target process; 0: several, the filter keeps each's samples */
	/* The target set the filter tests: the monitor's target_procs map, and its --all. */
	int targets_fd;
	bool targets_all;
	int self_tgid;
	int test_one_tgid; /* for make bench: see ht_target_spec */
	unsigned int freq_hz;
	uint64_t ring_bytes; /* per CPU, rounded up to a power of two of pages */
	enum ht_callgraph callgraph;
	uint64_t regs_mask;  /* dwarf: sample_regs_user */
	uint32_t stack_bytes; /* dwarf: sample_stack_user */
};

/* What a ring's sample records hold: mirrors the attr they were opened with. */
struct ht_sample_format {
	uint64_t sample_type;
	uint64_t regs_mask;
};

/* One sample, parsed. Frames are addresses, leaf first; user frames after kernel ones. */
struct ht_sample {
	uint64_t time_ns;
	uint32_t pid, tid, cpu;
	uint64_t period;
	uint16_t nr_kernel, nr_user;
	uint64_t frames[HT_SAMPLE_MAX_FRAMES];
	/* dwarf: user registers (abi != 0) and the copied user stack (in the set's blob). */
	uint64_t regs_abi;
	uint64_t regs[32];
	unsigned int nr_regs;
	size_t stack_offset, stack_len;
};

struct ht_sample_set {
	struct ht_sample *v;
	size_t count, cap;
	uint8_t *blob; /* user stack copies */
	size_t blob_len, blob_cap;
	uint64_t lost;	    /* PERF_RECORD_LOST: samples the kernel could not write */
	uint64_t throttled; /* PERF_RECORD_THROTTLE: times sampling was throttled */
	uint64_t malformed; /* records that did not parse: the walk of a ring ends at one */
	uint64_t foreign;   /* samples of other processes: the filter lets none through */
	uint64_t rebuilt;   /* samples whose header the kernel overwrote, read from their fields */
};

struct ht_sampler_ring {
	int fd;		 /* the event whose mmap this is; pauses the ring */
	void *base;	 /* the mmap: header page, then data */
	size_t mmap_len;
	size_t data_size;
};

struct ht_sampler {
	struct ht_sampler_config cfg;
	struct ht_sample_format format;
	uint64_t period_ns;
	unsigned int ncpus;
	struct ht_sampler_ring *rings; /* per CPU; fd -1 for a CPU that is offline */
	struct sample_filter_bpf *filter;
	bool open;
};

/*
 * Start sampling cfg->tgid (needs CAP_PERFMON and CAP_BPF, for the filter).
 * Returns 0, or -1 with ht_last_error().
 */
int ht_sampler_open(struct ht_sampler *s, const struct ht_sampler_config *cfg);

/* Whether a cpu-clock sampling event opens here (never enabled): 0, or -errno. */
int ht_sampler_probe(void);
void ht_sampler_close(struct ht_sampler *s);

/* Copies of every ring, taken at one moment, to be parsed at leisure. */
struct ht_sampler_frozen {
	struct ht_sample_format format;
	int tgid;
	unsigned int nrings;
	struct {
		uint8_t *data;
		size_t size;   /* a power of two */
		uint64_t head; /* where the newest record starts */
		uint64_t valid; /* bytes copied from head on */
	} *rings;
};

/*
 * Copy every ring's records from the newest down to the first sample before
 * T0, all rings paused at once, each only until its copy is taken.
 * Returns 0, or -1 with ht_last_error().
 */
int ht_sampler_freeze(struct ht_sampler *s, uint64_t t0, struct ht_sampler_frozen *out);
void ht_sampler_frozen_free(struct ht_sampler_frozen *f);

/* The target's samples in [t0, t1] from the copies, in time order, into OUT (initialised here). */
int ht_sampler_frozen_samples(const struct ht_sampler_frozen *f, uint64_t t0, uint64_t t1,
			      struct ht_sample_set *out);
void ht_sample_set_free(struct ht_sample_set *set);

/*
 * The bytes of a backward ring from HEAD, newest record first, down to (not
 * including) the first sample taken before T0: what a window from T0 needs.
 */
uint64_t ht_sample_ring_bytes_since(const uint8_t *data, size_t size, uint64_t head,
				    const struct ht_sample_format *fmt, uint64_t t0);

/*
 * Parse one backward ring's data (SIZE bytes, a power of two) from HEAD,
 * newest record first, appending the samples of TGID (0: any) in [t0, t1].
 * Exposed for tests and fuzzing.
 */
int ht_sample_ring_parse(const uint8_t *data, size_t size, uint64_t head,
			 const struct ht_sample_format *fmt, int tgid, uint64_t t0, uint64_t t1,
			 struct ht_sample_set *out);

/* Sort a set's samples by time. */
void ht_sample_set_sort(struct ht_sample_set *set);

#endif /* HT_SAMPLER_H */
