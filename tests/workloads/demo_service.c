// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The bundled demo: a small "service" whose worker thread handles a request
 * every few milliseconds, next to a batch job that hogs the worker's CPU for
 * a while. The worker then waits in the run queue behind the batch job:
 * the run-queue delay hybtrace is built to catch.
 * usage: demo_service [SECONDS]
 */
#include <signal.h>
#include <sys/wait.h>
#include "workload.h"

static volatile int stop;

static void handle_request(void)
{
	/* About 300 us of work. */
	wl_spin_until(wl_now_ns() + 300000);
}

static void *worker(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "worker");
	wl_pin(0);
	while (!stop) {
		wl_sleep_ns(2000000);
		handle_request();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seconds = (uint64_t)wl_arg(argc, argv, 1, 3);
	pthread_t t;
	pid_t batch;

	prctl(PR_SET_NAME, "demo_service");
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	/* Quiet first, then the batch job arrives on the worker's CPU. */
	wl_sleep_ns(500000000ULL);
	batch = fork();
	if (batch == 0) {
		prctl(PR_SET_NAME, "batch_job");
		wl_pin(0);
		wl_spin_until(wl_now_ns() + seconds * 1000000000ULL);
		_exit(0);
	}
	waitpid(batch, NULL, 0);
	wl_sleep_ns(300000000ULL);
	stop = 1;
	pthread_join(t, NULL);
	return 0;
}
