// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A thread storm: THREADS threads, created BATCH at a time, each sleeping
 * SLEEP_US in one nanosleep (a syscall breach above a lower threshold) and
 * exiting. Logs every thread's tid at its end, then stays alive IDLE_MS (or
 * until $HT_STOP_FILE exists) so a tracer's resources can be counted after
 * the storm.
 * usage: thread_storm [THREADS [BATCH [SLEEP_US [IDLE_MS]]]]
 */
#include "workload.h"

static uint64_t sleep_ns;

static void *storm_thread(void *arg)
{
	(void)arg;
	wl_sleep_ns(sleep_ns);
	wl_log("thread_done", NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = (int)wl_arg(argc, argv, 1, 1000);
	int batch = (int)wl_arg(argc, argv, 2, 50);
	uint64_t idle_ns = (uint64_t)wl_arg(argc, argv, 4, 3000) * 1000000ULL;
	pthread_t *ids;

	sleep_ns = (uint64_t)wl_arg(argc, argv, 3, 3000) * 1000ULL;
	if (threads < 1 || batch < 1 || !(ids = calloc((size_t)batch, sizeof(*ids))))
		return 2;
	prctl(PR_SET_NAME, "storm_main");
	wl_wait_start();
	wl_log("storm_start", NULL);
	for (int done = 0; done < threads;) {
		int n = threads - done < batch ? threads - done : batch;

		for (int i = 0; i < n; i++)
			if (pthread_create(&ids[i], NULL, storm_thread, NULL))
				return 1;
		for (int i = 0; i < n; i++)
			pthread_join(ids[i], NULL);
		done += n;
	}
	wl_log("storm_end", "\"threads\":%d", threads);
	wl_idle(idle_ns);
	free(ids);
	return 0;
}
