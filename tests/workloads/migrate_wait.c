// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A run-queue wait across a migration: the main thread runs on CPU 1 and
 * pins itself to CPU 0 while a SCHED_FIFO hog ("fifo_hog", another process)
 * spins there for HOLD_MS. sched_setaffinity has CPU 1's stopper preempt the
 * thread and move it to CPU 0's queue, where it waits until the hog is done:
 * a wait that begins on one CPU and is spent behind a known task on another.
 * Needs root (SCHED_FIFO). Logs the hog's bounds and the pin.
 * usage: migrate_wait [HOLD_MS]
 */
#include <signal.h>
#include <sys/wait.h>
#include "workload.h"

int main(int argc, char **argv)
{
	uint64_t hold_ns = (uint64_t)wl_arg(argc, argv, 1, 30) * 1000000ULL;
	struct sched_param fifo = { .sched_priority = 1 };
	int ready[2];
	pid_t hog;
	char byte;

	wl_wait_start();
	wl_pin(1);
	if (pipe(ready))
		return 1;
	hog = fork();
	if (hog == 0) {
		prctl(PR_SET_NAME, "fifo_hog");
		wl_pin(0);
		if (sched_setscheduler(0, SCHED_FIFO, &fifo)) {
			perror("sched_setscheduler");
			_exit(1);
		}
		wl_log("hog_start", NULL);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		wl_spin_until(wl_now_ns() + hold_ns);
		wl_log("hog_end", NULL);
		_exit(0);
	}
	prctl(PR_SET_NAME, "migrator");
	if (read(ready[0], &byte, 1) != 1)
		return 1;
	wl_log("migrate", "\"hog_pid\":%d", hog);
	wl_pin(0);
	wl_log("migrated", "\"hog_pid\":%d", hog);
	waitpid(hog, NULL, 0);
	return 0;
}
