/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* x86-64 syscall names, from the installed kernel headers. */
#ifndef HT_SYSCALLS_H
#define HT_SYSCALLS_H

/* Name of syscall NR, or NULL when the table has none. */
const char *ht_syscall_name(long nr);

/* Number of the syscall called NAME, or -1. */
int ht_syscall_number(const char *name);

#endif /* HT_SYSCALLS_H */
