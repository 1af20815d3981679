/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Errors: library code records one message with ht_fail() and returns an
 * error; the command that gives up prints it once, as one line.
 */
#ifndef HT_LOG_H
#define HT_LOG_H

#include <stdarg.h>
#include <stdio.h>

/* Exit status for errors a user can cause (bad options, bad pid, bad file). */
#define HT_EXIT_USAGE 2
/* Exit status for failures of the machine or the kernel. */
#define HT_EXIT_FAILURE 1

/* Record why the current operation failed; returns -1 for `return ht_fail(...)`. */
int ht_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message recorded by ht_fail() in this thread ("" if none). */
const char *ht_last_error(void);

/* Print "hybtrace: MESSAGE" on stderr, one line. */
void ht_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "hybtrace: warning: MESSAGE" on stderr, one line. */
void ht_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "hybtrace: MESSAGE" on stderr, one line: news, not an error. */
void ht_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * This thread's ht_error(), ht_warn() and ht_note() lines go to F instead of stderr
 * (NULL: stderr again). The dump builder keeps its lines apart this way and
 * hands them to the event loop, which alone writes to the shared streams.
 */
void ht_log_to(FILE *f);

#endif /* HT_LOG_H */
