/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* x86-64 syscall names, from the installed kernel headers; what their returns mean. */
#ifndef HT_SYSCALLS_H
#define HT_SYSCALLS_H

#include <stddef.h>
#include <stdint.h>

/* Name of syscall NR, or NULL when the table has none. */
const char *ht_syscall_name(long nr);

/* Number of the syscall called NAME, or -1. */
int ht_syscall_number(const char *name);

/*
 * The errno a syscall's return RET stands for ("EAGAIN", "ERESTARTNOHAND"),
 * kernel-internal ones included; NULL when RET is no error or has no name.
 */
const char *ht_syscall_ret_name(int64_t ret);

/*
 * RET as one reads it: "0", "4096", "-11 (EAGAIN)", and for the errnos only
 * the kernel sees, what they mean: "-514 (ERESTARTNOHAND: interrupted by a
 * signal, restarted unless a handler ran)". Returns buf.
 */
const char *ht_syscall_ret_format(int64_t ret, char *buf, size_t len);

#endif /* HT_SYSCALLS_H */
