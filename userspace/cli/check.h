/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `hybtrace check`: what this machine supports and what hybtrace will use. */
#ifndef HT_CHECK_H
#define HT_CHECK_H

int ht_check_main(int argc, char **argv);

#endif /* HT_CHECK_H */
