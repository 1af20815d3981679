/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `hybtrace report FILE|DIR`: a dump reviewed in a terminal (or as JSON),
 * read back with the project's own reader. Needs no privileges.
 */
#ifndef HT_REPORT_H
#define HT_REPORT_H

int ht_report_main(int argc, char **argv);

#endif /* HT_REPORT_H */
