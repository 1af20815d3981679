/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The raw capture of one snapshot (--keep-raw), and what its parts mean.
 *
 * One struct holds everything a dump is decoded from: the Intel PT bytes of
 * each AUX area, the perf sideband (context switches, mmaps), the target's
 * executable mappings with build-ids, the vdso, the CPU's cpuid values and
 * the intel_pt sysfs values libipt needs, the PT config, the TSC/monotonic
 * clock pairs, the kernel window and the breach. ht_intelpt_freeze() fills
 * the PT half, the dumper the rest; the decoder reads it the same way
 * whether it comes from memory or from a file.
 *
 * The file: a 16-byte header (magic, major, minor, header length), then
 * sections, each a 16-byte header (tag, CRC-32 of the payload, payload
 * length) and its payload; all integers little-endian. A reader skips
 * sections it does not know; a minor version only appends fields to a
 * payload or adds sections, so files of older minors and of newer minors
 * of the same major are read; a newer major is refused. The last section is
 * END: a file without it is truncated.
 */
#ifndef HT_RAWCAP_H
#define HT_RAWCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"
#include "kernel/pid_names.h"
#include "kernel/recorder.h"

#define HT_RAWCAP_MAGIC	 "HYBTRAW\n"
#define HT_RAWCAP_MAJOR	 1
/*
 * 1.1: the mmap page's TSC conversion in CLOCKS; 1.2: COMMS, machine and
 * command in META; 1.3: a breach's flags, kinds, off-CPU interval and
 * softirq vector in BREACH; 1.4: its pids in its own pid namespace; 1.5:
 * each MAPS section's process, so a capture holds several processes' code.
 */
#define HT_RAWCAP_MINOR	 5
#define HT_RAWCAP_SUFFIX ".hybtrace-raw"

/* Section tags. */
enum ht_rawcap_tag {
	HT_RAWSEC_META = 1,	 /* target, kind, dump options, trigger and freeze times */
	HT_RAWSEC_BREACH = 2,	 /* struct ht_breach */
	HT_RAWSEC_PT_CONFIG = 3, /* PMU type, attr.config and its fields, sysfs values */
	HT_RAWSEC_CPUID = 4,
	HT_RAWSEC_CLOCKS = 5,	 /* (TSC, CLOCK_MONOTONIC) pairs */
	HT_RAWSEC_PT_STREAM = 6, /* one per AUX area */
	HT_RAWSEC_SIDEBAND = 7,	 /* one per CPU */
	HT_RAWSEC_MAPS = 8,	 /* one per reading of a process's /proc/PID/maps */
	HT_RAWSEC_VDSO = 9,
	HT_RAWSEC_KWINDOW = 10,	  /* the flight-recorder window */
	HT_RAWSEC_COMMS = 11,	  /* pid -> comm of the tasks in the window */
	HT_RAWSEC_KSYMS = 12,	  /* 1.2: names of the kernel addresses the dump shows */
	HT_RAWSEC_END = 0x454e44, /* "END": the file is complete */
};

/* The PT config's fields, decoded from attr.config. */
struct ht_pt_fields {
	uint8_t pt, branch, tsc, mtc, cyc, noretcomp;
	uint8_t mtc_period; /* MTC every 2^N crystal clocks (IA32_RTIT_CTL.MTCFreq) */
	uint8_t cyc_thresh; /* CYC at most every 2^(N-1) cycles */
	uint8_t psb_period; /* PSB every 2^(N+11) bytes */
};

struct ht_rawcap_pt_config {
	uint32_t pmu_type;
	uint64_t config; /* attr.config as opened */
	struct ht_pt_fields fields;
	uint64_t aux_bytes;	       /* each AUX area; 0: none (the sideband-only test mode) */
	uint64_t sideband_sample_type; /* sample_id layout of the sideband records */
	/* /sys/bus/event_source/devices/intel_pt: what libipt's pt_config wants. */
	bool has_max_nonturbo_ratio;
	uint32_t max_nonturbo_ratio; /* pt_config.nom_freq */
	bool has_tsc_art_ratio;
	uint32_t tsc_art_num, tsc_art_den; /* "num:den": cpuid 0x15 EBX and EAX */
};

/* cpuid, as the CPU that traced answered it (0 where a leaf is past the maximum). */
struct ht_cpuid_values {
	char vendor[13]; /* "GenuineIntel" */
	uint32_t max_leaf;
	uint32_t leaf1[4];    /* eax, ebx, ecx, edx: family, model, stepping */
	uint32_t leaf14_0[4]; /* Intel PT capabilities, subleaf 0 */
	uint32_t leaf14_1[4]; /* subleaf 1: address ranges, MTC and cycle threshold bitmaps */
	uint32_t leaf15[4];   /* eax: TSC/crystal denominator, ebx: numerator, ecx: crystal Hz */
};

/* Family, model and stepping with the extended fields folded in, from leaf 1 eax. */
void ht_cpuid_family_model(uint32_t leaf1_eax, unsigned int *family, unsigned int *model,
			   unsigned int *stepping);

enum ht_clock_pair_when {
	HT_CLOCK_AT_ATTACH = 1,
	HT_CLOCK_AT_FREEZE = 2,
};

/* One reading of the TSC bracketed by two of CLOCK_MONOTONIC, the tightest of several. */
struct ht_clock_pair {
	uint64_t tsc;
	uint64_t mono_ns;   /* the middle of the bracket */
	uint32_t spread_ns; /* the bracket's width: the pair's uncertainty */
	uint32_t when;	    /* enum ht_clock_pair_when */
};

/* The perf mmap page's TSC conversion, kept only as a cross-check (not valid in KVM guests). */
struct ht_perf_time_conv {
	bool cap_user_time;	 /* time_shift and time_mult are valid */
	bool cap_user_time_zero; /* time_zero too */
	uint16_t time_shift;
	uint32_t time_mult;
	uint64_t time_zero;
};

/* The PT bytes of one AUX area. */
struct ht_rawcap_stream {
	uint32_t cpu;
	int32_t tid;	     /* the thread whose event owns the area; -1 for a per-CPU event */
	uint64_t ring_bytes; /* the area's size */
	uint64_t aux_head;   /* where in the area the oldest byte was */
	uint64_t frozen_ns;  /* CLOCK_MONOTONIC when it was disabled */
	uint8_t *data;	     /* oldest first; never-written bytes left out */
	uint64_t len;
};

/* The sideband of one CPU: perf records, oldest first, as the kernel wrote them. */
struct ht_rawcap_sideband {
	uint32_t cpu;
	uint64_t frozen_ns;
	uint8_t *data;
	uint64_t len;
};

struct ht_rawcap_mapping {
	uint64_t start, end, offset;
	char perms[5];
	char *path;	/* as /proc/PID/maps shows it */
	char *build_id; /* lowercase hex, or NULL */
};

/* The executable mappings of one process, as read at one moment. */
struct ht_rawcap_maps {
	int pid; /* the process; 0 in files before 1.5: the capture's pid */
	uint64_t taken_ns;
	struct ht_rawcap_mapping *v;
	size_t count;
};

#define HT_RAWCAP_KIND_LEN 16

/* A kernel function: its first address and its name as kallsyms gave it. */
struct ht_rawcap_ksym {
	uint64_t start;
	char *name;
};

struct ht_rawcap {
	/* The version of the file read (the writer writes its own). */
	uint16_t format_major, format_minor;

	/* META */
	int pid;
	char comm[HT_COMM_LEN];
	char kind[HT_RAWCAP_KIND_LEN]; /* rq-delay, off-cpu, syscall, off-cpu+syscall, ... */
	char version[32];	       /* hybtrace's */
	uint64_t threshold_ns;
	uint64_t start_ns, end_ns; /* the interval the window is built around */
	uint64_t pre_ns, post_ns;  /* the dump options that rebuild the same window */
	uint64_t trigger_ns;	   /* when the freeze was asked for */
	uint64_t freeze_first_ns;  /* delay from the trigger to the first area disabled */
	uint64_t freeze_last_ns;   /* ... and to the last */
	uint64_t snap_mono_ns, snap_boot_ns, snap_real_ns; /* one moment on three clocks */
	/* 1.2: the machine and the command (empty in older files). */
	char kernel[65];     /* uname release */
	char cpu_model[128]; /* /proc/cpuinfo model name */
	char cmdline[1024];  /* how hybtrace was started */

	bool has_breach;
	struct ht_breach breach;

	bool has_window;
	struct ht_fr_window window;

	struct ht_rawcap_pt_config pt;
	struct ht_cpuid_values cpuid;

	struct ht_clock_pair *clocks;
	size_t nclocks;
	struct ht_perf_time_conv time_conv;

	struct ht_rawcap_stream *streams;
	size_t nstreams;
	struct ht_rawcap_sideband *sidebands;
	size_t nsidebands;
	struct ht_rawcap_maps *maps;
	size_t nmaps;

	uint64_t vdso_addr;
	uint8_t *vdso;
	size_t vdso_len;

	/*
	 * COMMS: the names the kernel window's tasks had when the dump was
	 * made, so an offline decode names them as the live dump did (its /proc
	 * is not ours). Sorted by pid, each pid once (ht_rawcap_add_comm keeps
	 * it so).
	 */
	struct ht_pid_name *comms;
	size_t ncomms;
	size_t comms_cap; /* entries allocated */
	/* The kernel functions of the stacks the dump shows: a decode elsewhere names them alike. */
	struct ht_rawcap_ksym *ksyms;
	size_t nksyms;
};

/*
 * Everything a struct ht_rawcap points to is owned by it (malloc'd) and
 * freed here; the struct is zeroed.
 */
void ht_rawcap_free(struct ht_rawcap *cap);

/* Name the kernel function at START (once per START). 0, or -1 with ht_fail(). */
int ht_rawcap_add_ksym(struct ht_rawcap *cap, uint64_t start, const char *name);

/* Copy window W into CAP (has_window set). 0, or -1 with ht_fail(). */
int ht_rawcap_set_window(struct ht_rawcap *cap, const struct ht_fr_window *w);

/*
 * Name PID COMM (truncated to HT_COMM_LEN - 1) in CAP's COMMS; a pid already
 * there keeps its first name. 0, or -1 with ht_fail() (memory).
 */
int ht_rawcap_add_comm(struct ht_rawcap *cap, uint32_t pid, const char *comm);

/* The name COMMS gives PID, or NULL. */
const char *ht_rawcap_find_comm(const struct ht_rawcap *cap, uint32_t pid);

/*
 * A capture of the test mode HYBTRACE_TEST_PT_SIDEBAND_ONLY: no PT event was
 * opened, so no AUX area and no PT bytes; only the sideband and mappings.
 */
static inline bool ht_rawcap_sideband_only(const struct ht_rawcap *cap)
{
	return cap->pt.aux_bytes == 0;
}

/* Write CAP to FD (positioned where the file starts). 0, or -1 with ht_fail(). */
int ht_rawcap_write_fd(int fd, const struct ht_rawcap *cap);

/*
 * Write CAP to PATH: a temporary file in PATH's directory, renamed to PATH
 * once complete, never over an existing file. 0, or -1 with ht_fail().
 */
int ht_rawcap_write(const char *path, const struct ht_rawcap *cap);

/*
 * Write CAP as DIR/BASE.hybtrace-raw (BASE-N.hybtrace-raw when that exists),
 * mode 0640, owned by the sudo user, as dumps are. FINAL gets the path.
 */
int ht_rawcap_save(const char *dir, const char *base, const struct ht_rawcap *cap, char *final,
		   size_t len);

/*
 * Read a raw capture file into OUT (initialised here). Returns 0, or -1
 * with one line in ERR ("PATH: ...") and OUT empty. Bounded: lengths are
 * checked against the file, never trusted.
 */
int ht_rawcap_read(const char *path, struct ht_rawcap *out, char *err, size_t errlen);

/* The same from memory (fuzzed). NAME is for messages. */
int ht_rawcap_read_mem(const uint8_t *data, size_t len, const char *name, struct ht_rawcap *out,
		       char *err, size_t errlen);

/* ---- Mapping TSC onto CLOCK_MONOTONIC ---- */

struct ht_tsc_map {
	struct ht_clock_pair *pairs; /* sorted by TSC */
	size_t n;
	/* The rate: ns_span / tsc_span, from the two pairs farthest apart (or the fallback). */
	uint64_t ns_span, tsc_span;
};

/*
 * From N pairs; with fewer than two distinct pairs the rate comes from
 * FALLBACK_HZ (the TSC frequency, e.g. from cpuid 0x15; 0 when unknown).
 * Returns 0, or -1 with ht_fail() when there is no rate at all.
 */
int ht_tsc_map_init(struct ht_tsc_map *m, const struct ht_clock_pair *pairs, size_t n,
		    uint64_t fallback_hz);
void ht_tsc_map_free(struct ht_tsc_map *m);

/*
 * TSC -> CLOCK_MONOTONIC ns: interpolated between the pairs around TSC,
 * extrapolated at the rate beyond them.
 */
uint64_t ht_tsc_to_mono(const struct ht_tsc_map *m, uint64_t tsc);

/* The TSC frequency cpuid leaf 0x15 gives (crystal Hz x ebx / eax), or 0. */
uint64_t ht_cpuid_tsc_hz(const struct ht_cpuid_values *c);

/* ---- The sideband ---- */

enum ht_sb_kind {
	HT_SB_SWITCH_IN = 1, /* the thread came on the CPU */
	HT_SB_SWITCH_OUT,    /* it left it (preempt says whether it was still runnable) */
	HT_SB_MMAP,
	HT_SB_COMM,
	HT_SB_FORK,
	HT_SB_EXIT,
	HT_SB_LOST, /* the kernel could not write LOST records */
	HT_SB_ITRACE_START,
};

struct ht_sb_event {
	uint8_t kind; /* enum ht_sb_kind */
	bool preempt;
	bool exec;		/* comm: from an exec */
	uint64_t time_ns;	/* CLOCK_MONOTONIC */
	uint32_t cpu, pid, tid; /* from the record's sample_id */
	/* mmap: the mapping; fork/exit: ppid in addr's place is not used */
	uint64_t addr, len, pgoff;
	uint32_t prot, flags;
	size_t path_offset;  /* mmap: into the set's strings; comm: its name */
	uint32_t ppid, ptid; /* fork, exit */
	uint64_t lost;	     /* lost */
};

struct ht_sb_set {
	struct ht_sb_event *v;
	size_t count, cap;
	char *strings;
	size_t strings_len, strings_cap;
	uint64_t malformed; /* records that did not parse */
	uint64_t unknown;   /* records of other types */
};

/*
 * Parse sideband records (oldest first, as stored) whose sample_id layout is
 * SAMPLE_TYPE, appending to OUT (zeroed by the caller). Records that do not
 * parse are counted, not fatal. Returns 0, or -1 with ht_fail() (memory).
 */
int ht_sb_parse(const uint8_t *data, size_t len, uint64_t sample_type, struct ht_sb_set *out);

static inline const char *ht_sb_string(const struct ht_sb_set *s, const struct ht_sb_event *e)
{
	return s->strings ? s->strings + e->path_offset : "";
}

void ht_sb_set_free(struct ht_sb_set *s);

/*
 * Records of a ring written backward (write_backward), read from HEAD
 * newest first, returned oldest first as a forward stream in *OUT
 * (malloc'd, *LEN bytes). SIZE is a power of two. 0, or -1 with ht_fail().
 */
int ht_perf_backward_linearize(const uint8_t *ring, size_t size, uint64_t head, uint8_t **out,
			       size_t *len);

#endif /* HT_RAWCAP_H */
