/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command-line options of `hybtrace [record]` and `hybtrace run`, and their parsers. */
#ifndef HT_OPTIONS_H
#define HT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include "dump/dump_policy.h"
#include "kernel/breach_filters.h"
#include "kernel/targets.h"
#include "hybtrace/records.h"

enum ht_prev_state_mode {
	HT_PREV_STATE_AUTO = 0, /* from the tracepoint argument when the kernel has it */
	HT_PREV_STATE_ARG,	/* force the tracepoint argument (5.18+) */
	HT_PREV_STATE_TASK,	/* force task_struct::__state, the pre-5.18 path */
};

/* --source's own values; the others are the sources' names (cli/sources.c). */
#define HT_SOURCE_AUTO "auto" /* the richest source usable here */
#define HT_SOURCE_NONE "none"

enum ht_callgraph_mode { HT_CALLGRAPH_MODE_FP = 0, HT_CALLGRAPH_MODE_DWARF };

/* x86 has 4 debug registers per thread. */
#define HT_MAX_TRIGGERS 4

struct ht_options {
	/*
	 * The first process --pid names (as given until ht_options_resolve_targets(),
	 * its process after); 0 without --pid. targets is the whole set.
	 */
	int pid;
	int pids[HT_MAX_TARGET_PIDS]; /* --pid as given: processes or thread ids */
	unsigned int npids;
	const char *cgroup_arg;	       /* --cgroup as given */
	const char *unit;	       /* --unit as given */
	struct ht_target_spec targets; /* children and all set by the parser, the rest resolved */
	/* By enum ht_breach_kind: --rq-delay, --off-cpu, ... (base/breach_kinds.h); 0: off */
	uint64_t threshold_ns[HT_BREACH_KIND_MAX];
	bool syscall_filter_on;
	uint64_t syscall_filter[HT_MAX_SYSCALLS / 64];
	struct ht_breach_filters filters;
	uint64_t history_bytes; /* flight-recorder ring per CPU */
	bool history_given;	/* by --history; else the default, fitted to --max-memory */
	uint64_t duration_ns;	/* stop after this long; 0: until the target exits */
	bool json;
	const char *json_path; /* --json=FILE: JSON lines go there; NULL: stdout */
	bool quiet;	       /* no status line */
	const char *btf_path;  /* NULL: /sys/kernel/btf/vmlinux */
	enum ht_prev_state_mode prev_state_mode;
	char **run_argv; /* `hybtrace run`: the command to start */
	/* Dumps. */
	const char *output_dir;
	uint64_t pre_ns, post_ns;
	uint64_t min_interval_ns;
	unsigned int max_dumps; /* 0: never */
	unsigned int max_dumps_per_process; /* 0: no limit but max_dumps */
	unsigned int chain_depth;	    /* levels of wakers a breach's wait chain follows */
	uint64_t max_disk_bytes;
	bool dump_on_exit;
	enum ht_dump_rule dump_rule; /* --dump-policy */
	/* On-CPU source: HT_SOURCE_AUTO, HT_SOURCE_NONE or a source's name. */
	const char *source;
	unsigned int sample_freq_hz;
	uint64_t sample_history_bytes; /* per CPU; 0: the callgraph's default */
	enum ht_callgraph_mode callgraph;
	bool block_stacks;	/* the user stack where each wait began (--block-stacks) */
	uint64_t pt_size_bytes; /* Intel PT AUX area per CPU, a power of two */
	bool pt_fine_timing;	/* CYC packets too */
	bool keep_raw;		/* save each PT snapshot for `hybtrace decode` */
	uint64_t max_memory_bytes;
	unsigned int rt_priority; /* SCHED_FIFO for the event loop and freezes; 0: off */
	/* Code triggers. */
	char *triggers[HT_MAX_TRIGGERS];
	unsigned int ntriggers;
	bool multi;	    /* every hit dumps (under the policy), not just the first */
	char cmdline[1024]; /* how hybtrace was started, for the dumps' metadata */
};

/* Defaults: see README.md's option table; thresholds' in base/breach_kinds.c. */
/*
 * At least 1 s on one CPU at 100k switches and 100k wakeups a second (the
 * wakeups of every task are recorded), a power of two: 262144 records, 1.3 s.
 */
#define HT_DEFAULT_HISTORY_BYTES   (8ULL << 20)
/* ...halved, down to this, where the default would not fit --max-memory. */
#define HT_SMALLEST_DEFAULT_HISTORY_BYTES (1ULL << 20)
#define HT_DEFAULT_PRE_NS	   20000000ULL
#define HT_DEFAULT_POST_NS	   2000000ULL
#define HT_DEFAULT_MIN_INTERVAL_NS 1000000000ULL
#define HT_DEFAULT_MAX_DUMPS	   20
#define HT_DEFAULT_MAX_DISK	   (512ULL << 20)
#define HT_MIN_HISTORY_BYTES	   (64ULL << 10)
/* Measured: see README, "What it costs". */
#define HT_DEFAULT_SAMPLE_FREQ		999
#define HT_DEFAULT_SAMPLE_HISTORY_FP	(1ULL << 20)
#define HT_DEFAULT_SAMPLE_HISTORY_DWARF (8ULL << 20)
#define HT_DEFAULT_PT_SIZE		(4ULL << 20)
#define HT_DEFAULT_MAX_MEMORY		(512ULL << 20)
#define HT_MAX_HISTORY_BYTES		(1ULL << 30)

void ht_options_init(struct ht_options *o);

/*
 * Parse the arguments of `record` (run = false) or `run` (run = true).
 * Returns 0, or -1 with the reason in ht_last_error(); sets *want_help
 * when --help was asked for.
 */
int ht_options_parse(struct ht_options *o, int argc, char **argv, bool run, bool *want_help);

/*
 * What the parsed options name, against the machine: each --pid to its
 * process, --cgroup or --unit to a cgroup v2 directory and its id, into
 * o->targets (o->pid becomes the first process). Every refusal says which
 * target and why. Returns 0, or -1 with the reason in ht_last_error().
 */
int ht_options_resolve_targets(struct ht_options *o);

/* "2ms", "500us", "1.5s", "250ns" -> nanoseconds; a unit is required. */
int ht_parse_duration(const char *s, uint64_t *ns);

/* "16M", "4k", "1G", "65536", "2MiB" -> bytes (powers of 1024). */
int ht_parse_size(const char *s, uint64_t *bytes);

/* "read,futex,clock_nanosleep", the value of --OPT -> a bitmap of syscall numbers. */
int ht_parse_syscall_list(const char *opt, const char *s, uint64_t bitmap[HT_MAX_SYSCALLS / 64]);

/* "S,D", the value of --off-cpu-states -> bits 1 << ht_task_state_index(). */
int ht_parse_state_list(const char *s, uint32_t *states);

/* Print the usage text of `record`/`run` to stdout. */
void ht_options_usage(void);

#endif /* HT_OPTIONS_H */
