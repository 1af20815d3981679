// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attach the empty programs and wait: `empty_progs` runs until killed. The
 * benchmark measures a workload with them attached (the floor) and reads
 * their per-run cost with kernel.bpf_stats_enabled.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include "empty.skel.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	struct empty_bpf *skel = empty_bpf__open_and_load();

	if (!skel || empty_bpf__attach(skel)) {
		fprintf(stderr, "empty_progs: cannot load or attach the empty programs\n");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("attached\n");
	fflush(stdout);
	while (!stop)
		pause();
	empty_bpf__destroy(skel);
	return 0;
}
