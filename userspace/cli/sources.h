/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The on-CPU sources hybtrace has (sources/source.h), and how the command
 * line names, picks, sizes and opens one. The only file that names a source.
 */
#ifndef HT_SOURCES_H
#define HT_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cli/options.h"
#include "kernel/targets.h"
#include "sources/source.h"

/*
 * --source ARG as ht_options keeps it: HT_SOURCE_AUTO, HT_SOURCE_NONE or a
 * source's name; NULL if it is none of them.
 */
const char *ht_sources_lookup(const char *arg);

/* What --source takes, for its error: "auto, pt, sample or none", into BUF. */
const char *ht_sources_names(char *buf, size_t len);

/* --source's --help text: "auto (Intel PT where present, else sampling), pt, sample, none". */
const char *ht_sources_help(char *buf, size_t len);

/*
 * Resolve --source auto to the richest source usable here and check the one
 * asked for, and the options that need a source. 0, or -1 with ht_last_error().
 */
int ht_sources_choose(struct ht_options *o);

/* The chosen source's share of --max-memory on NCPUS CPUs. */
uint64_t ht_sources_memory_bytes(const struct ht_options *o, unsigned int ncpus);

/* The options that size the sources' rings, "--sample-history or --pt-size", into BUF. */
const char *ht_sources_size_options(char *buf, size_t len);

/*
 * Whether the chosen source opens perf events (kernel.perf_event_paranoid
 * applies): any but none and a source whose ops say no_perf_events.
 */
bool ht_sources_need_perf_events(const struct ht_options *o);

/* The chosen source in messages ("Intel PT", "sampling"); NULL: none. */
const char *ht_sources_title(const struct ht_options *o);

/*
 * Open the chosen source for the targets SPEC names (the monitor's target
 * set is TARGETS_FD), with BUDGET_BYTES of --max-memory left, into V
 * (HT_SOURCES_OPEN_MAX of them); *N gets how many. 0, or -1.
 */
int ht_sources_open(const struct ht_options *o, const struct ht_target_spec *spec, int targets_fd,
		    uint64_t budget_bytes, struct ht_open_source *v, unsigned int *n);
void ht_sources_close(struct ht_open_source *v, unsigned int n);

/*
 * `hybtrace check`: every source's rows through ROW; returns what --source
 * auto means here, and *NEED_PERF_EVENTS whether that needs perf events.
 */
const char *ht_sources_check(void (*row)(const char *what, bool ok, const char *detail),
			     bool *need_perf_events);

#endif /* HT_SOURCES_H */
