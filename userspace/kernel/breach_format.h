/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* One breach, as a line of text or a JSON object, for the live output. */
#ifndef HT_BREACH_FORMAT_H
#define HT_BREACH_FORMAT_H

#include <stdbool.h>
#include <stdio.h>
#include "kernel/block_stacks.h"
#include "kernel/culprits.h"
#include "hybtrace/records.h"

struct ht_ksyms;

#define HT_COMM_BUF (HT_COMM_LEN + 8)

/* A breach with what user space added: names, culprits, time since start. */
struct ht_breach_info {
	struct ht_breach b;
	char process_comm[HT_COMM_BUF]; /* b.tgid's name (its main thread's) */
	uint64_t threshold_ns;
	double since_start_s;
	bool have_culprits;
	struct ht_culprits culprits;
	char culprit_comm[HT_MAX_CULPRITS][HT_COMM_BUF];
	const struct ht_block_frames *block_stack; /* --block-stacks: where it blocked; NULL */
	/* --block-stacks, an off-CPU or syscall breach without it: why (ht_block_stack_missing()) */
	const char *block_stack_missing;
	/* The waker's stacks at the wakeup that ended it (b.waker_stack_seq); NULL: none kept. */
	const struct ht_waker_stack *waker_stack;
};

/* "task", "irq", "timer", "softirq" or "none" (enum ht_wake_source). */
const char *ht_wake_source_name(uint32_t source);

/*
 * What the kernel did not trace of the wait (HT_BRF_WAKEUP_UNTRACED,
 * HT_BRF_SWITCH_IN_UNTRACED): "wakeup", "switch-in", "wakeup,switch-in";
 * NULL when it traced both.
 */
const char *ht_breach_not_traced(const struct ht_breach *b);
/* That list (or the dump's HT_ARG_NOT_TRACED) as words: "wakeup and switch-in". */
const char *ht_not_traced_words(const char *list);

/* "net_rx", "timer"...: the kernel's softirq_to_name, lower case; "unknown" past them. */
const char *ht_softirq_name(uint32_t vec);

/*
 * "12.345678 rq-delay 4.21ms tid 123 (worker) pid 120 (server) cpu 0: ran
 * instead ...; woken by ...": the process only when it is not the thread;
 * a thread in a container's pid namespace adds its pids there,
 * "... pid 120 (server) [ns tid 8 pid 7] cpu 0".
 */
void ht_breach_print_text(FILE *f, const struct ht_breach_info *bi);

/* One JSON object on one line, kernel stack symbolized with KSYMS (may be NULL). */
void ht_breach_print_json(FILE *f, const struct ht_breach_info *bi, const struct ht_ksyms *ksyms);

#endif /* HT_BREACH_FORMAT_H */
