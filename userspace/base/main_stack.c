// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <alloca.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "base/main_stack.h"

/* Within the stack limit, with half of it left for what the stack already holds. */
static size_t allowed(size_t bytes)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_STACK, &lim) || lim.rlim_cur == RLIM_INFINITY)
		return bytes;
	return bytes < lim.rlim_cur / 2 ? bytes : (size_t)(lim.rlim_cur / 2);
}

/* Not inlined: the area is this call's own frame, gone when it returns. */
__attribute__((noinline)) size_t ht_main_stack_reserve(size_t bytes)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi;
	volatile char *area;

	bytes = allowed(bytes);
	if (bytes < 2 * page)
		return 0;
	area = alloca(bytes);
	/* The lowest byte: the fault that grows the mapping to here, at once. */
	area[0] = 0;
	/*
	 * Only the mapping is wanted: the pages touched go back (a compiler
	 * that probes each page of an alloca touches them all).
	 */
	lo = ((uintptr_t)area + page - 1) & ~(page - 1);
	hi = ((uintptr_t)area + bytes) & ~(page - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
	return bytes;
}
