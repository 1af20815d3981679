/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Which capabilities this process holds, and what a feature is missing. */
#ifndef HT_PRIVILEGES_H
#define HT_PRIVILEGES_H

#include <stdbool.h>

#define HT_CAP_SYS_ADMIN 21
#define HT_CAP_PERFMON	 38
#define HT_CAP_BPF	 39

/* Whether the effective set holds capability CAP. */
bool ht_has_capability(int cap);

/*
 * The monitor needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). Returns 0, or
 * -1 with a one-line reason naming the missing capability.
 */
int ht_check_monitor_privileges(void);

#endif /* HT_PRIVILEGES_H */
