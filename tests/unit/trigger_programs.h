/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: the program and shared libraries the trigger tests run
 * (test_trigger_spec.c, test_breakpoint.c), built at run time into a
 * temporary directory, and the child that runs the program: it prints the
 * addresses of its functions, then calls them on commands over its stdin.
 */
#ifndef HT_TRIGGER_PROGRAMS_H
#define HT_TRIGGER_PROGRAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct ht_symbolizer;

/* Where the programs are (empty until trig_programs_build succeeds). */
extern char trig_dir[64];

/* Build them, once per test binary. 0 or -1. */
int trig_programs_build(void);
#define REQUIRE_PROGRAMS() REQUIRE_BUILT(trig_programs_build)

struct child {
	pid_t pid;
	FILE *to, *from;
	uint64_t work, other, thread, twin_a, twin_b, lib, late;
};

/* Start the program; FIXED: without address randomization (exec lands at the same place). */
int child_start(struct child *c, int fixed);
/* Send a command and wait for its "ok": every call it made has hit by then. */
int child_do(struct child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void child_stop(struct child *c);
/* The addresses the program prints at start (and again after exec). 0 or -1. */
int read_banner(struct child *c);

/* The function at ADDR, or "". */
const char *function_at(struct ht_symbolizer *s, uint64_t addr);
/* Whether S (may be NULL) holds WANT. */
int contains(const char *s, const char *want);

#endif /* HT_TRIGGER_PROGRAMS_H */
