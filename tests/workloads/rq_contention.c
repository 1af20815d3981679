// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Run-queue contention: a CPU-bound victim thread and a CPU hog in another
 * process ("rq_hog"), both pinned to one CPU for a while. The victim waits
 * in the run queue whenever the hog runs. Both bounds log the victim's
 * run-queue time as the kernel counts it (sched_info.run_delay).
 * usage: rq_contention [CPU [MILLISECONDS]]
 */
#include <signal.h>
#include <sys/wait.h>
#include "workload.h"

int main(int argc, char **argv)
{
	int cpu = (int)wl_arg(argc, argv, 1, 0);
	uint64_t dur_ns = (uint64_t)wl_arg(argc, argv, 2, 2000) * 1000000ULL;
	pid_t hog;
	uint64_t end;

	wl_wait_start();
	hog = fork();
	if (hog == 0) {
		prctl(PR_SET_NAME, "rq_hog");
		wl_pin(cpu);
		wl_spin_until(wl_now_ns() + dur_ns + 500000000ULL);
		_exit(0);
	}
	prctl(PR_SET_NAME, "rq_victim");
	/* Logged before pinning: the victim may queue behind the hog from then on. */
	wl_log("contention_start",
	       "\"hog_pid\":%d,\"hog_comm\":\"rq_hog\",\"cpu\":%d,\"run_delay_ns\":%llu", hog, cpu,
	       (unsigned long long)wl_run_delay_ns());
	wl_pin(cpu);
	/* From here on it may run only there (a tracer that keeps off its CPU may learn it). */
	wl_log("pinned", "\"cpu\":%d", cpu);
	end = wl_now_ns() + dur_ns;
	wl_spin_until(end);
	kill(hog, SIGKILL);
	waitpid(hog, NULL, 0);
	/* Logged once the hog is gone: no wait behind it can end later. */
	wl_log("contention_end", "\"hog_pid\":%d,\"run_delay_ns\":%llu", hog,
	       (unsigned long long)wl_run_delay_ns());
	return 0;
}
