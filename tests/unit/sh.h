/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Test only: shell commands for the tests and their fixtures (in the tests' library). */
#ifndef HT_TEST_SH_H
#define HT_TEST_SH_H

/* Run a shell command made like printf; a failure is printed with the command. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* HT_TEST_SH_H */
