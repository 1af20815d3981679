// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A known call structure for the on-CPU sources: main -> work_a -> work_b
 * spins PHASE_MS, returns; then main -> work_c spins PHASE_MS; then a
 * SLEEP_MS nanosleep (a syscall breach that triggers the dump). Built three
 * times: with frame pointers (callstack), without (callstack_nofp), and
 * without them or any CFI of its own (callstack_nocfi). With
 * "thread", the rounds run in a thread born 200 ms after the start.
 * $HT_EXIT_TOUCH_MB: memory to touch before the exit (workload.h).
 * usage: callstack [PHASE_MS [SLEEP_MS [ROUNDS [thread]]]]
 */
#include "workload.h"

static uint64_t phase_ns;

/*
 * Burn CPU in the caller's own code: the clock is read (in the vdso, where
 * a frame-pointer walk would skip our caller) only every few tens of us.
 */
static inline __attribute__((always_inline)) void burn_until(uint64_t until)
{
	volatile uint64_t x = 0;

	while (wl_now_ns() < until)
		for (int i = 0; i < 50000; i++)
			x += (uint64_t)i;
}

/* Calls are followed by an empty asm so none becomes a tail call or is folded away. */
__attribute__((noinline)) void work_b(void)
{
	wl_log("b_start", NULL);
	burn_until(wl_now_ns() + phase_ns);
	wl_log("b_end", NULL);
	__asm__ __volatile__("" ::: "memory");
}

__attribute__((noinline)) void work_a(void)
{
	wl_log("a_start", NULL);
	work_b();
	wl_log("a_end", NULL);
	__asm__ __volatile__("" ::: "memory");
}

__attribute__((noinline)) void work_c(void)
{
	wl_log("c_start", NULL);
	burn_until(wl_now_ns() + phase_ns);
	wl_log("c_end", NULL);
	__asm__ __volatile__("" ::: "memory");
}

static uint64_t sleep_ns;
static int rounds;

static void *run_rounds(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		work_a();
		work_c();
		wl_log("sleep_start", NULL);
		wl_sleep_ns(sleep_ns);
		wl_log("sleep_end", NULL);
	}
	__asm__ __volatile__("" ::: "memory");
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	phase_ns = (uint64_t)wl_arg(argc, argv, 1, 20) * 1000000ULL;
	sleep_ns = (uint64_t)wl_arg(argc, argv, 2, 15) * 1000000ULL;
	rounds = (int)wl_arg(argc, argv, 3, 1);
	wl_wait_start();
	if (argc > 4 && !strcmp(argv[4], "thread")) {
		wl_sleep_ns(200000000ULL);
		if (pthread_create(&t, NULL, run_rounds, NULL))
			return 1;
		pthread_join(t, NULL);
		return 0;
	}
	run_rounds(NULL);
	wl_exit_touch();
	return 0;
}
