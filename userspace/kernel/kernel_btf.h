/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the kernel's BTF says: which tracepoints exist and in which form. */
#ifndef HT_KERNEL_BTF_H
#define HT_KERNEL_BTF_H

#include <stdbool.h>

struct btf;

#define HT_DEFAULT_BTF_PATH "/sys/kernel/btf/vmlinux"

/* Parse PATH (NULL: the running kernel's). Returns NULL with ht_last_error() set. */
struct btf *ht_btf_open(const char *path);

/* Whether the kernel has tracepoint NAME (a btf_trace_NAME typedef). */
bool ht_btf_has_tracepoint(const struct btf *btf, const char *name);

/*
 * Whether sched_switch passes prev_state as its 4th argument (Linux 5.18+):
 * its btf_trace_sched_switch prototype has 5 parameters (ctx + 4).
 */
bool ht_btf_switch_has_prev_state_arg(const struct btf *btf);

#endif /* HT_KERNEL_BTF_H */
