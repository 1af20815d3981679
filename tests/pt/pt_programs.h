/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test only: the PT test programs (in tests/pt) built at run time into a
 * temporary directory, for the unit tests that single-step them.
 */
#ifndef HT_PT_PROGRAMS_H
#define HT_PT_PROGRAMS_H

#include <limits.h>

/* Where the programs were built (empty until ht_pt_programs_build succeeds). */
extern char ht_pt_programs_dir[PATH_MAX];

/*
 * Build pt_workload (with libptlib.so) and, WITH_OCAML, ocaml_workload into a
 * fresh directory made from TEMPLATE, once per test binary. 0 or -1.
 */
int ht_pt_programs_build(const char *template, int with_ocaml);

#endif /* HT_PT_PROGRAMS_H */
