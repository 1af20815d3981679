/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: what the tests that build small programs at run time and
 * drive them share (trigger_programs.c, test_marks.c, test_symbolizer.c,
 * test_unwind_dwarf.c): a directory of their own, the sources written into
 * it, the repository's include/, and a child on pipes.
 */
#ifndef HT_TEST_PROGRAMS_H
#define HT_TEST_PROGRAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Make DIR (LEN bytes) from mkdtemp's TEMPLATE; it is removed with all it holds at exit. */
int prog_make_dir(char *dir, size_t len, const char *template);

/* Write TEXT into the file NAME in DIR. 0 or -1. */
int prog_write_file(const char *dir, const char *name, const char *text);

/*
 * The repository's FOLDER (e.g. "tests/pt"), as an absolute path: the one
 * under the cwd, or under a folder above the running binary
 * (build/[asan/]tests/), that holds FILE. 0 or -1.
 */
int prog_find_folder(const char *folder, const char *file, char *out, size_t len);

/* The repository's include/ folder that holds HEADER (e.g. "hybtrace/mark.h"). 0 or -1. */
int prog_find_include_dir(const char *header, char *out, size_t len);

/*
 * Start the program NAME in DIR (with one argument ARG, unless NULL) with
 * its stdin on *TO and its stdout on *FROM, without address randomization
 * when FIXED (an exec lands at the same place). A 60 s alarm fails the test
 * that hangs on it. The child's pid, or -1 (*TO and *FROM NULL).
 */
pid_t prog_start(const char *dir, const char *name, const char *arg, bool fixed, FILE **to,
		 FILE **from);

/* Kill and reap PID (when > 0), close TO and FROM (when not NULL), cancel the alarm. */
void prog_stop(pid_t pid, FILE *to, FILE *from);

/* The address on the next line FROM gives when it reads "KEY ADDRESS"; 0 when not. */
uint64_t prog_read_address(FILE *from, const char *key);

#endif /* HT_TEST_PROGRAMS_H */
