/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a traced program includes to tell hybtrace that something was slow:
 *
 *	#include <hybtrace/hybtrace.h>
 *	...
 *	if (latency_ns > budget_ns)
 *		hybtrace_trigger(order_id);
 *
 * and `hybtrace --trigger .` arms a hardware breakpoint on it: the call is
 * the trigger, ARG (in rdi) comes with it. Nothing to link: the function
 * is defined here, weak, so every file may include this header and the
 * program still has one hybtrace_trigger for the tracer to find by name.
 * Without a tracer a call costs a call and a return.
 */
#ifndef HYBTRACE_HYBTRACE_H
#define HYBTRACE_HYBTRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * noinline keeps the call; the asm that takes ARG keeps the body, so no
 * compiler may drop the call as one without effect (gcc 12 and clang 14
 * delete calls to an empty noinline function). noipa (gcc) also forbids
 * clones (hybtrace_trigger.constprop.0) and signature changes under LTO,
 * which would move the call away from the symbol or ARG out of rdi.
 */
#if defined(__has_attribute)
#if __has_attribute(noipa)
#define HYBTRACE_NOIPA_ __attribute__((noipa))
#endif
#endif
#ifndef HYBTRACE_NOIPA_
#define HYBTRACE_NOIPA_
#endif

__attribute__((weak, noinline, used, visibility("default"))) HYBTRACE_NOIPA_ void
hybtrace_trigger(uint64_t arg)
{
	__asm__ __volatile__("" : : "r"(arg) : "memory");
}

#ifdef __cplusplus
}
#endif

#endif /* HYBTRACE_HYBTRACE_H */
