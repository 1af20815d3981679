/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Breach kinds, one row each (breach_kinds.c): every name user space gives
 * a kind and how its threshold is set. Options, the event loop and its
 * summary, the live line, the kernel timeline, the dump schema and the
 * report read the rows; what is left to a new kind is its enum value
 * (records.h), its threshold's knob (bpf/settings.bpf.h, set in kernel/monitor.c) and the
 * BPF logic that measures it. In base/, the lowest layer, so that the dump
 * schema (trace/) and the report (cli/) read the same rows.
 */
#ifndef HT_BREACH_KINDS_H
#define HT_BREACH_KINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

/*
 * What a kind measures: which slice of the breached thread's kernel track
 * in a dump is the breach (dump_schema.h) and holds its kernel stack.
 */
enum ht_breach_interval {
	HT_INTERVAL_RUNQUEUE, /* a wait in a run queue: HT_EV_RUNQUEUE */
	HT_INTERVAL_OFF_CPU,  /* a sleep: HT_EV_OFF_CPU */
	HT_INTERVAL_SYSCALL,  /* a syscall: the slice of category HT_CAT_SYSCALL */
};

struct ht_breach_kind_info {
	/*
	 * "off-cpu": in the live line, JSON "kind" and "kinds", the summaries,
	 * and a dump's kind arguments and dump_kind (joined by '+' for a wait
	 * of several kinds).
	 */
	const char *name;
	const char *json_key; /* "off_cpu": the name in JSON keys (the summary's "waits") */
	const char *title;    /* "off-CPU time": the summary's histogram of it */
	/*
	 * --OPTION DUR sets its threshold, "off" disables it; the threshold
	 * lives in ht_options and ht_monitor_config as threshold_ns[kind].
	 */
	const char *option;
	const char *option_help;       /* its --help line, after "--OPTION DUR" */
	uint64_t default_threshold_ns; /* 0: off unless given */
	bool always_measured;	       /* its histogram fills while its threshold is off too */
	uint32_t breached_with;	       /* kinds one wait may breach along with it: bits 1 << kind */
	enum ht_breach_interval interval;
	const char *began; /* report: "the last sample, 2ms before <began>" */
};

/* Indexed by enum ht_breach_kind; row 0 is no kind. */
extern const struct ht_breach_kind_info ht_breach_kinds[HT_BREACH_KIND_MAX];

/* The row of KIND, or NULL for a value that is no kind. */
const struct ht_breach_kind_info *ht_breach_kind(unsigned int kind);

/* The kind named NAME ("off-cpu"), or 0: "manual", "exit", "trigger" dumps have none. */
unsigned int ht_breach_kind_by_name(const char *name);

/* Name of enum ht_breach_kind: "rq-delay", "off-cpu", "syscall"; "unknown" for no kind. */
const char *ht_breach_kind_name(unsigned int kind);

/* A breach's kinds as bits 1 << kind; a record without them (KINDS 0) has its KIND alone. */
uint32_t ht_breach_kinds_of(uint32_t kinds, uint32_t kind);

/* "off-cpu+syscall": the names of KINDS in kind order, joined by '+'. Returns buf. */
const char *ht_breach_kinds_name(uint32_t kinds, char *buf, size_t len);

#endif /* HT_BREACH_KINDS_H */
