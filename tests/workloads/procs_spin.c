// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Three programs of one service on one CPU, each burning the CPU in
 * functions of its own name: procs_spin (role alpha) starts procs_spin_beta
 * and procs_spin_gamma (this source built with ROLE beta and gamma, found
 * beside it) and works too. Each process, pinned to CPU, runs ROUNDS
 * rounds of BURN_MS in ROLE_burn() (which calls ROLE_inner()) and a
 * SLEEP_MS sleep: as one wakes while another burns, it waits in the run
 * queue, and a dump's window holds the three processes' samples, each of
 * which a symbolizer of another process would name wrong.
 *
 * Ground truth, each line with the pid that logs it:
 *   ready       a process, pinned and running its own program: "role", "burn"
 *               (its burn function's name), "inner"
 *   burn_start / burn_end   around each round's burn
 *   done        alpha, once the others have exited
 *
 * usage: procs_spin [ROUNDS [BURN_MS [SLEEP_MS [CPU]]]]
 * With $HT_STOP_FILE set, every process stops at its next round once the
 * file exists (the rounds bound the run either way).
 */
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/wait.h>
#include "workload.h"

#ifndef ROLE
#define ROLE alpha
#endif
#define STR_(x)	   #x
#define STR(x)	   STR_(x)
#define CAT_(a, b) a##_##b
#define CAT(a, b)  CAT_(a, b)
#define BURN	   CAT(ROLE, burn)
#define INNER	   CAT(ROLE, inner)

/*
 * Not a leaf (it reads the clock): gcc keeps a leaf function without a frame
 * pointer, and a frame-pointer walk from it skips its caller.
 */
__attribute__((noinline)) static uint64_t INNER(uint64_t *x)
{
	for (int i = 0; i < 1000; i++)
		__asm__ __volatile__("" : "+r"(*x));
	return wl_now_ns();
}

__attribute__((noinline)) static uint64_t BURN(uint64_t until_ns)
{
	uint64_t x = 0;

	while (INNER(&x) < until_ns)
		x++;
	return x;
}

/* Start the program of ROLE_NAME beside this one with the same arguments. */
static pid_t start(const char *role_name, char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0) {
		perror("readlink");
		exit(1);
	}
	self[n] = '\0';
	snprintf(path, sizeof(path), "%s/procs_spin_%s", dirname(self), role_name);
	pid = fork();
	if (pid == 0) {
		argv[0] = path;
		execv(path, argv);
		perror(path);
		_exit(127);
	}
	return pid;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 40;
	uint64_t burn_ns = (argc > 2 ? atol(argv[2]) : 20) * 1000000ULL;
	uint64_t sleep_ns = (argc > 3 ? atol(argv[3]) : 10) * 1000000ULL;
	int cpu = argc > 4 ? atoi(argv[4]) : 0;
	bool alpha = !strcmp(STR(ROLE), "alpha");
	pid_t others[2] = { 0, 0 };
	uint64_t sum = 0;

	prctl(PR_SET_NAME, STR(ROLE) "_spin");
	if (alpha) {
		others[0] = start("beta", argv);
		others[1] = start("gamma", argv);
	}
	wl_pin(cpu);
	wl_log("ready", "\"role\":\"%s\",\"burn\":\"%s\",\"inner\":\"%s\"", STR(ROLE), STR(BURN),
	       STR(INNER));
	for (long r = 0; r < rounds && !(wl_until_stopped() && wl_stop_requested()); r++) {
		wl_log("burn_start", NULL);
		sum += BURN(wl_now_ns() + burn_ns);
		wl_log("burn_end", NULL);
		wl_sleep_ns(sleep_ns);
	}
	for (int i = 0; i < 2; i++)
		if (others[i] > 0)
			waitpid(others[i], NULL, 0);
	if (alpha)
		wl_log("done", NULL);
	return sum == 42;
}
