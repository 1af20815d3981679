/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Facts about this machine for reports and metadata. */
#ifndef HT_MACHINE_H
#define HT_MACHINE_H

#include <stddef.h>

/* The CPU's model name from /proc/cpuinfo, or "unknown CPU". Returns buf. */
const char *ht_machine_cpu_model(char *buf, size_t len);

#endif /* HT_MACHINE_H */
