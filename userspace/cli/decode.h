/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `hybtrace decode RAW`: a raw capture (--keep-raw) into the dump the live path makes. */
#ifndef HT_DECODE_H
#define HT_DECODE_H

int ht_decode_main(int argc, char **argv);

#endif /* HT_DECODE_H */
