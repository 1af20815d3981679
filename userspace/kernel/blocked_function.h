/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The function a sleeping thread blocked in, from the kernel stack it slept
 * on, as the kernel's sched_blocked_reason tracepoint names it: the caller
 * get_wchan() reports, the first frame that is not a scheduler function
 * (the kernel's in_sched_functions(): the __sched and __lock text).
 */
#ifndef HT_BLOCKED_FUNCTION_H
#define HT_BLOCKED_FUNCTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ht_ksyms;

/*
 * KSTACK holds DEPTH return addresses, the leaf first, as BPF's
 * bpf_get_task_stack() gives them. The blocked function's name (no offset)
 * into BUF, and into *IO_WAIT whether it slept in io_schedule*(), as the
 * kernel's p->in_iowait says. Returns BUF, or NULL when no frame names one.
 */
const char *ht_blocked_function(const uint64_t *kstack, int depth, const struct ht_ksyms *ksyms,
				char *buf, size_t len, bool *io_wait);

#endif /* HT_BLOCKED_FUNCTION_H */
