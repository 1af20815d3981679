// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A library trigger_target loads with dlopen after the tracer attached. */
#include <stdint.h>

__attribute__((noinline)) uint64_t dl_order(uint64_t a, uint64_t b, uint64_t c)
{
	__asm__ __volatile__("" : : "r"(a), "r"(b), "r"(c) : "memory");
	return a + b + c;
}
