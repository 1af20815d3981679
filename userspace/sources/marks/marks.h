/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User marks (include/hybtrace/mark.h) read out of a target at dump time:
 * its registries found by symbol (or section) in its modules, the
 * registries and rings read with process_vm_readv and checked field by
 * field, since the target's memory is untrusted input: a bad registry is
 * rejected whole, a bad slot or record skipped and counted, and nothing is
 * allocated beyond a fixed budget however large the numbers it claims.
 * Timestamps move from the TSC onto CLOCK_MONOTONIC through two (rdtsc,
 * clock_gettime) pairs taken by hybtrace on the same machine.
 */
#ifndef HT_MARKS_H
#define HT_MARKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HT_MARK_NAME_LEN 56
/* Registries of one process: one per module that includes mark.h, in practice. */
#define HT_MARKS_MAX_REGISTRIES 16
/* Bytes of rings read per dump unless the window says otherwise: 1M records. */
#define HT_MARKS_DEFAULT_BUDGET (32u << 20)

/* One (TSC, CLOCK_MONOTONIC) reading, the two as close together as could be had. */
struct ht_tsc_pair {
	uint64_t tsc;
	uint64_t ns;
};

void ht_tsc_pair_take(struct ht_tsc_pair *p);

/*
 * TSC value TSC on CLOCK_MONOTONIC, through the line between pairs A and B
 * (taken apart: at attach and at the dump). Returns 0, or -1 when the pairs
 * are unusable (equal TSCs, time going backward).
 */
int ht_tsc_to_ns(const struct ht_tsc_pair *a, const struct ht_tsc_pair *b, uint64_t tsc,
		 uint64_t *ns);

struct ht_marks_window {
	uint64_t t0_ns, t1_ns;	 /* CLOCK_MONOTONIC, inclusive */
	struct ht_tsc_pair a, b; /* for TSC marks */
	size_t budget_bytes;	 /* of rings read; 0: HT_MARKS_DEFAULT_BUDGET */
};

struct ht_mark {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t tsc;	  /* as written */
	uint64_t index;	  /* the record's number in its thread's ring */
	uint64_t a, b;
	uint32_t id;
	int tid;
	const char *name; /* from hybtrace_mark_name(); NULL when unnamed. Lives in the set. */
	int name_index;	  /* internal: -1, or the entry in the set's names */
};

struct ht_mark_name {
	uint32_t id;
	unsigned int registry;
	char name[HT_MARK_NAME_LEN];
};

struct ht_mark_set {
	struct ht_mark *v;
	size_t count, cap;
	struct ht_mark_name *names;
	size_t nnames, names_cap;
	uint64_t registries;	  /* registries read */
	uint64_t threads;	  /* slots read */
	uint64_t rejected_slots;  /* slots that did not validate */
	uint64_t torn;		  /* records whose sequence did not match their place */
	uint64_t overwritten;	  /* records rewritten while being read */
	uint64_t dropped_threads; /* threads the target found no slot for (its count) */
	uint64_t out_of_budget;	  /* records not read: the budget was spent */
	uint64_t unreadable;	  /* slots whose memory could not be read */
	size_t bytes_read;
};

/* Reads LEN bytes of the target at ADDR into BUF; 0, or -1 when it cannot. */
typedef int (*ht_mem_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * Parse the registry at ADDR, reading memory through READ: its marks in
 * W's window are appended to OUT (initialise it to zeroes first), names
 * resolved. Returns 0; -1 with ht_last_error() when the registry itself
 * does not validate (nothing appended then). Pure: fuzzed.
 */
int ht_marks_parse(ht_mem_read_fn read, void *ctx, uint64_t addr, const struct ht_marks_window *w,
		   struct ht_mark_set *out);

/*
 * The runtime addresses of the mark registries in process PID: the
 * symbol hybtrace_mark_registry of each module, or in a stripped module
 * each registry in its section hybtrace_marks. Up to MAX into ADDRS, *FOUND
 * how many. Returns 0 (also when there are none), or -1 with ht_last_error().
 */
int ht_marks_locate(int pid, uint64_t *addrs, size_t max, size_t *found);

/*
 * ht_marks_locate with what it read kept from one call to the next: each
 * dump reads the target's maps again, but a module mapped at the same place
 * from the same file (device, inode, path, offset) since the last call is not
 * opened and read again; one mapped anew, elsewhere or from another file, is.
 * Opening each module's ELF file was most of a dump's freeze, which the
 * worst-breach policy makes at each new worst breach of an interval.
 */
struct ht_marks_module {
	uint64_t start, offset, inode;
	uint32_t dev_major, dev_minor;
	char *path;
	size_t n;
	uint64_t addrs[HT_MARKS_MAX_REGISTRIES];
};

/*
 * What a module's file says, shared by every process that maps it (by
 * device and inode): a service of a thousand processes of one program opens
 * its program and libraries once, not once a process. Bounded: a file
 * beyond HT_MARKS_FILES_MAX is read each time it is asked for.
 */
#define HT_MARKS_FILES_MAX    1024
#define HT_MARKS_FILE_LOADS   16 /* PT_LOAD segments kept of a file */
#define HT_MARKS_FILE_CANDIDATES 64 /* registries kept of a file */

struct ht_marks_file {
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	bool elf;  /* an ELF file whose facts below were read */
	bool exec; /* ET_EXEC: mapped at its own addresses */
	size_t nloads, nvaddrs;
	struct {
		uint64_t offset, filesz, vaddr;
	} loads[HT_MARKS_FILE_LOADS];
	uint64_t vaddrs[HT_MARKS_FILE_CANDIDATES]; /* where registries are, at link time */
};

struct ht_marks_files {
	struct ht_marks_file *v;
	size_t count, cap;
	uint64_t files_read; /* files opened and read, in all */
};

void ht_marks_files_free(struct ht_marks_files *f);

struct ht_marks_locator {
	int pid;
	struct ht_marks_module *mods;
	size_t count;
	uint64_t modules_read;	      /* modules located anew (from FILES, else their files) */
	struct ht_marks_files *files; /* shared with other processes' locators; NULL: none */
};

void ht_marks_locator_init(struct ht_marks_locator *l, int pid);
int ht_marks_locator_find(struct ht_marks_locator *l, uint64_t *addrs, size_t max, size_t *found);
void ht_marks_locator_free(struct ht_marks_locator *l);

/*
 * The marks of process PID in W's window from the registries at ADDRS
 * (from ht_marks_locate), time-ordered, into OUT (initialised here).
 * Returns 0 when at least one registry was read or there were none; -1 with
 * ht_last_error() when every registry was rejected or unreadable.
 */
int ht_marks_read(int pid, const uint64_t *addrs, size_t n, const struct ht_marks_window *w,
		  struct ht_mark_set *out);

void ht_mark_set_free(struct ht_mark_set *s);

#endif /* HT_MARKS_H */
