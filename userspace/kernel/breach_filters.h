/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Breaches the kernel leaves out, as offcputime's filters do: they are not
 * detected, so they never wake hybtrace (the summary counts them apart).
 * The options fill them in; the monitor hands them to its BPF program.
 */
#ifndef HT_BREACH_FILTERS_H
#define HT_BREACH_FILTERS_H

#include <stdbool.h>
#include <stdint.h>
#include "hybtrace/records.h"

struct ht_breach_filters {
	uint32_t off_cpu_states;  /* --off-cpu-states: 1 << ht_task_state_index(); 0: any */
	bool off_cpu_syscalls_on; /* --off-cpu-syscalls: off-CPU breaches only in these */
	uint64_t off_cpu_syscalls[HT_MAX_SYSCALLS / 64];
	bool ignore_syscalls_on; /* --ignore-syscalls: no off-CPU or syscall breach in these */
	uint64_t ignore_syscalls[HT_MAX_SYSCALLS / 64];
};

#endif
