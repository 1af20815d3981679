/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The main thread's stack, grown ahead. The kernel grows it a page range at a
 * time, on the fault below its end, and that fault takes the process's mmap
 * lock for writing (Linux 6.1's lock_mm_and_find_vma): the event loop then
 * waits for every thread of hybtrace holding it for reading. The dump
 * builder, at nice 19 on a CPU a target keeps busy, was seen preempted in a
 * page fault for 240 ms holding it so, and the event loop waiting in its own
 * stack's fault all that time (6.1 cloud, under TCG). Grown once at the
 * start, before any other thread exists, the stack's later faults only read.
 */
#ifndef HT_MAIN_STACK_H
#define HT_MAIN_STACK_H

#include <stddef.h>

/* What the event loop's stack may reach: the demo's grew to 260 kB. */
#define HT_MAIN_STACK_RESERVE (1024 * 1024)

/*
 * Grow the calling thread's stack to BYTES below here (at most half the stack
 * limit), and give back the pages that took: the mapping stays. Call it on
 * the main thread; on another it changes nothing. Returns the bytes reserved.
 */
size_t ht_main_stack_reserve(size_t bytes);

#endif /* HT_MAIN_STACK_H */
