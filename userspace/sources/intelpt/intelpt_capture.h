/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Intel PT capture of every thread of every target process, user space
 * only, into per-CPU AUX areas in overwrite (snapshot) mode, frozen on a
 * trigger.
 *
 * Events are opened per (thread, CPU) of each process named, with inherit
 * (the sampler's are CPU-wide): a thread or a fork born after attach is
 * traced from its first instruction, through an exec, and
 * every event on a CPU writes into that CPU's one AUX area (SET_OUTPUT), so
 * areas grow with CPUs, descriptors with threads x CPUs. Per-thread events
 * are off while the target is off the CPU, so an area holds only the
 * target's branches; a per-CPU event would fill it with whatever else ran
 * there (a competing batch job is exactly what a breach is about). A dummy
 * event per (thread, CPU) writes the sideband (context switches, mmaps,
 * comm, fork/exit) into a small per-CPU ring written backward, so it always
 * holds the newest records.
 *
 * A set that grows other than by fork (--cgroup, --all) cannot be followed
 * that way: there the events are per CPU, of the cgroup's tasks (the
 * kernel runs a cgroup event only while one of its tasks is on the CPU)
 * where only a cgroup is watched, else of every task; a freeze reads the
 * code of the target processes the sideband shows, and the decode leaves
 * the other tasks' runs out (foreign).
 *
 * On a trigger every PT event is disabled, each area copied oldest first
 * from aux_head and enabled again; TSC is tied to CLOCK_MONOTONIC by
 * (rdtsc, clock_gettime) pairs taken at attach and at each freeze. Each
 * process's executable mappings are read then too, under its pid (the
 * processes named, and with follow_forks every process the sideband
 * shows), so each process's trace is decoded against its own code.
 */
#ifndef HT_INTELPT_CAPTURE_H
#define HT_INTELPT_CAPTURE_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kernel/targets.h"
#include "symbols/proc_maps.h"
#include "sources/intelpt/rawcap.h"

#define HT_INTELPT_SYSFS_DIR	     "/sys/bus/event_source/devices/intel_pt"
#define HT_INTELPT_DEFAULT_AUX_BYTES (4ULL << 20)
#define HT_INTELPT_SIDEBAND_BYTES    (256ULL << 10)
/* The PT event's own data ring (AUX and ITRACE_START records): small, never read. */
#define HT_INTELPT_DATA_PAGES 1
/* The sideband records' sample_id. */
#define HT_INTELPT_SIDEBAND_SAMPLE_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU)

/*
 * perf_event_attr::aux_action (Linux 6.13+; Debian 12's headers call the
 * word __reserved_3): the u32 right after aux_sample_size, at byte 116.
 * Bit 0 aux_start_paused, bit 1 aux_pause, bit 2 aux_resume, as the
 * kernel's include/uapi/linux/perf_event.h has them.
 */
#define HT_ATTR_AUX_ACTION_OFFSET 116
#define HT_AUX_START_PAUSED	  (1u << 0)
#define HT_AUX_PAUSE		  (1u << 1)
#define HT_AUX_RESUME		  (1u << 2)

void ht_attr_set_aux_action(struct perf_event_attr *attr, uint32_t bits);
uint32_t ht_attr_aux_action(const struct perf_event_attr *attr);

/* The config terms hybtrace sets, by their names in the PMU's format/ directory. */
enum ht_pt_term {
	HT_PT_TERM_PT,
	HT_PT_TERM_BRANCH,
	HT_PT_TERM_TSC,
	HT_PT_TERM_MTC,
	HT_PT_TERM_MTC_PERIOD,
	HT_PT_TERM_PSB_PERIOD,
	HT_PT_TERM_CYC,
	HT_PT_TERM_CYC_THRESH,
	HT_PT_TERM_NORETCOMP,
	HT_PT_TERM_COUNT,
};

/* The intel_pt PMU as sysfs describes it. */
struct ht_intelpt_pmu {
	uint32_t type;
	uint64_t term_mask[HT_PT_TERM_COUNT]; /* its bits in attr.config; 0: no such term */
	/* caps/: booleans, and bitmaps of allowed values */
	bool cap_mtc, cap_psb_cyc, cap_ip_filtering, cap_cr3_filtering, cap_ptwrite;
	bool cap_power_event_trace, cap_topa_multiple_entries, cap_single_range_output;
	bool has_caps_dir;
	uint32_t mtc_periods, psb_periods, cycle_thresholds;
	uint32_t num_address_ranges;
	/* what the decoder needs */
	bool has_max_nonturbo_ratio;
	uint32_t max_nonturbo_ratio;
	bool has_tsc_art_ratio;
	uint32_t tsc_art_num, tsc_art_den; /* "num:den": cpuid 0x15 EBX and EAX */
};

/*
 * Read SYSROOT/sys/bus/event_source/devices/intel_pt (SYSROOT NULL or ""
 * for the machine's own). Returns 0, or -1 with ht_last_error(): "no Intel
 * PT on this machine (...)" when the directory is absent, else the file that
 * is missing or malformed.
 */
int ht_intelpt_pmu_read(const char *sysroot, struct ht_intelpt_pmu *pmu);

/* Parse one format file's text ("config:0", "config:14-17"), into the bits of attr.config. */
int ht_pt_format_parse(const char *text, uint64_t *mask);

/*
 * Put VALUE into the bits of MASK (lowest bits of VALUE into the lowest
 * bits of MASK). -1 when VALUE does not fit.
 */
int ht_pt_term_put(uint64_t mask, uint64_t value, uint64_t *config);
uint64_t ht_pt_term_get(uint64_t mask, uint64_t config);

/* What the user asked for; ht_intelpt_request_default() gives perf's defaults. */
struct ht_intelpt_request {
	bool fine_timing; /* --pt-timing fine: CYC packets too */
	int mtc_period;	  /* -1: 3, or the nearest the CPU allows */
	int psb_period;	  /* -1: 3, or the nearest the CPU allows */
	int cyc_thresh;	  /* -1: 0 (with fine timing) */
	bool noretcomp;	  /* a TIP for every return: costs bandwidth, eases decoding */
};

void ht_intelpt_request_default(struct ht_intelpt_request *req);

/*
 * attr.config for REQ on PMU, every value checked against caps/ (a clear
 * one-line error naming the missing capability or the values allowed).
 * FIELDS gets what was set. perf's default: tsc,mtc,mtc_period=3,psb_period=3,pt,branch.
 */
int ht_intelpt_build_config(const struct ht_intelpt_pmu *pmu, const struct ht_intelpt_request *req,
			    struct ht_pt_fields *fields, uint64_t *config);

/* The fields of CONFIG; and as perf writes them ("tsc,mtc,mtc_period=3,...") into BUF. */
void ht_intelpt_decode_config(const struct ht_intelpt_pmu *pmu, uint64_t config,
			      struct ht_pt_fields *fields);
const char *ht_pt_fields_format(const struct ht_pt_fields *f, char *buf, size_t len);

/* The PT event and the sideband event, as opened for each (thread, CPU). */
void ht_intelpt_pt_attr(const struct ht_intelpt_pmu *pmu, uint64_t config,
			struct perf_event_attr *attr);
void ht_intelpt_sideband_attr(struct perf_event_attr *attr);

/* ---- hybtrace check ---- */

enum ht_aux_pause_support {
	HT_AUX_PAUSE_UNKNOWN = 0, /* could not tell (no permission...) */
	HT_AUX_PAUSE_NO_KERNEL,	  /* the kernel predates aux_action (before 6.13) */
	HT_AUX_PAUSE_NO_PMU,	  /* the kernel has it, this PMU (or no PT) does not */
	HT_AUX_PAUSE_YES,
};

struct ht_intelpt_info {
	bool present;
	char why[256]; /* present: a summary; absent: why */
	struct ht_intelpt_pmu pmu;
	char default_config[96]; /* "tsc,mtc,mtc_period=3,psb_period=3,pt,branch" */
	uint64_t default_config_bits;
	bool kernel_aux_action; /* the kernel knows aux_start_paused/aux_pause/aux_resume */
	enum ht_aux_pause_support aux_pause;
	char aux_pause_why[160];
};

/* What `hybtrace check` says about Intel PT. Always fills INFO; returns 0. */
int ht_intelpt_probe(const char *sysroot, struct ht_intelpt_info *info);

/* ---- Capture ---- */

/* Processes a capture is opened on by name (--pid); their forks inherit its events. */
#define HT_INTELPT_MAX_PROCS 64

struct ht_intelpt_config {
	int tgid; /* the process named first */
	/* Every process named, TGID among them; 0: TGID alone. */
	int tgids[HT_INTELPT_MAX_PROCS];
	unsigned int ntgids;
	/* Their forks are targets too (--children, run): their code is read at each freeze. */
	bool follow_forks;
	const char *sysroot; /* NULL: the machine's own */
	struct ht_intelpt_request request;
	uint64_t aux_bytes;	      /* per CPU, a power of two (--pt-size); 0: 4M */
	uint64_t sideband_bytes;      /* per CPU, a power of two; 0: 256k */
	uint64_t memory_budget_bytes; /* all areas and rings together; 0: no limit */
	/*
	 * Events per CPU (--cgroup, --all): of the tasks of the cgroup
	 * CGROUP_PATH where it is set (a cgroup alone is watched), else of
	 * every task. TGID may be 0. A freeze reads the code of the processes
	 * of the target set (the monitor's bitmap, TARGETS_FD; with
	 * TARGETS_ALL every process but SELF_TGID) that its sideband shows.
	 */
	bool cpu_wide;
	const char *cgroup_path;
	int targets_fd;
	bool targets_all;
	int self_tgid;
	/* Only the sideband events (no PT hardware needed): tests, and sideband alone. */
	bool sideband_only;
	bool keep_raw; /* --keep-raw: each snapshot is saved next to its dump */
};

/* Memory the areas and rings take for NCPUS CPUs, as mapped. */
uint64_t ht_intelpt_memory_needed(uint64_t aux_bytes, uint64_t sideband_bytes, unsigned int ncpus,
				  bool sideband_only);

/* Descriptors for NTHREADS threads (for RLIMIT_NOFILE). */
size_t ht_intelpt_fds_needed(size_t nthreads, unsigned int ncpus);

struct ht_intelpt_area {
	int fd;	    /* the event whose mmap this is */
	int tid;    /* its thread */
	void *base; /* header page and data ring */
	size_t base_len;
	void *aux; /* the AUX area, read-only: overwrite mode */
	size_t aux_len;
};

struct ht_intelpt_sbring {
	int fd;
	void *base;
	size_t mmap_len, data_size;
};

struct ht_intelpt_thread {
	int tgid, tid;
	/* per CPU; -1 where the fd is an area's or ring's owner, or the event was inherited */
	int *pt_fds;
	int *sb_fds;
};

struct ht_build_id_entry;

struct ht_intelpt {
	struct ht_intelpt_config cfg;
	struct ht_intelpt_pmu pmu;
	struct ht_pt_fields fields;
	uint64_t config;
	unsigned int ncpus;
	bool *cpu_online;
	struct ht_intelpt_area *areas;	 /* per CPU */
	struct ht_intelpt_sbring *rings; /* per CPU */
	struct ht_intelpt_thread *threads;
	size_t nthreads, threads_cap;
	uint64_t attach_boot_ticks; /* threads that started later may have inherited events */
	size_t inherited;	    /* (thread, CPU) events found already inherited */
	struct ht_cpuid_values cpuid;
	struct ht_clock_pair attach_pair;
	struct ht_rawcap_maps *attach_maps; /* per process named, at attach */
	size_t nattach_maps;
	/*
	 * Threads left without events on some CPU: the descriptor limit
	 * (RLIMIT_NOFILE, its soft value raised to the hard one) was reached.
	 */
	uint64_t threads_left_out;
	int first_left_out_tid;
	size_t fds_left; /* what the limit leaves PT, the rest of hybtrace's share kept */
	struct ht_build_id_entry *build_ids;
	size_t nbuild_ids, build_ids_cap;
	struct ht_targets targets; /* cpu_wide: which processes' code a freeze reads */
	bool open;
};

/*
 * Open the events for every thread of every process cfg names and map the
 * areas; their forks inherit the events (and so are traced from their
 * first instruction, through exec). With cpu_wide, one PT and one sideband
 * event per CPU instead. A thread whose events would pass the
 * descriptor limit is left out and counted (threads_left_out), not fatal. Returns
 * 0, or -1 with ht_last_error(): "no Intel PT on this machine (...)" where
 * there is none; "Intel PT is in use by another tool on CPU N ..." on EBUSY;
 * the memory budget, locked memory, permissions.
 */
int ht_intelpt_open(struct ht_intelpt *pt, const struct ht_intelpt_config *cfg);
void ht_intelpt_close(struct ht_intelpt *pt);

/* Close the events of threads that have exited (the areas stay). */
void ht_intelpt_reap(struct ht_intelpt *pt);

/*
 * Freeze on a trigger at TRIGGER_NS (CLOCK_MONOTONIC): disable every PT
 * event, copy each area oldest first and enable it again; copy the
 * sideband rings; take clock pairs; read the executable mappings (with
 * build-ids) and the vdso. OUT is initialised here with the PT half of a
 * raw capture (pid, comm, trigger_ns, freeze_first_ns/freeze_last_ns: the
 * delays from the trigger to the first and the last area disabled); the
 * caller adds the window, the breach and the dump options. 0, or -1.
 */
int ht_intelpt_freeze(struct ht_intelpt *pt, uint64_t trigger_ns, struct ht_rawcap *out);

/*
 * Copy a snapshot-mode AUX area of SIZE bytes (a power of two) oldest
 * first, starting at HEAD (taken modulo SIZE), into OUT (SIZE bytes).
 * Never-written bytes (zero, decoded as PAD) at the oldest end are left
 * out. Returns the bytes written.
 */
size_t ht_intelpt_ring_copy(const uint8_t *area, size_t size, uint64_t head, uint8_t *out);

/* The tightest of TRIES (rdtsc, CLOCK_MONOTONIC) brackets. */
void ht_clock_pair_take(struct ht_clock_pair *pair, unsigned int tries, uint32_t when);

/* cpuid leaves 0, 1, 0x14 and 0x15 of the CPU this runs on. */
void ht_cpuid_read(struct ht_cpuid_values *c);

#endif /* HT_INTELPT_CAPTURE_H */
