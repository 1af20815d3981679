/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Just enough JSON writing for one object per line. */
#ifndef HT_JSON_H
#define HT_JSON_H

#include <stdio.h>

/* Write S as a JSON string literal, quotes included. */
void ht_json_string(FILE *f, const char *s);

#endif /* HT_JSON_H */
