// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A thread sleeps in one long syscall: nanosleep of DELAY_MS, ROUNDS times
 * (or until $HT_STOP_FILE exists).
 * Each log line carries the thread's voluntary switches so far (nvcsw).
 * With "late", the sleeping happens in a thread created after a pause, so a
 * tracer attached at the start sees a thread born after attach.
 * usage: sleeper [DELAY_MS [ROUNDS [late]]]
 */
#include <sys/resource.h>
#include "workload.h"

static uint64_t delay_ns;
static int rounds;

/* The kernel's count of this thread's voluntary switches: what a tracer may see leave. */
static long voluntary_switches(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nvcsw;
}

static void *sleep_rounds(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "sleeper");
	for (int i = 0; wl_more_rounds(i, rounds); i++) {
		long nvcsw = voluntary_switches();

		wl_log("sleep_start", "\"delay_ns\":%llu,\"nvcsw\":%ld",
		       (unsigned long long)delay_ns, nvcsw);
		wl_sleep_ns(delay_ns);
		nvcsw = voluntary_switches();
		wl_log("sleep_end", "\"nvcsw\":%ld", nvcsw);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	delay_ns = (uint64_t)wl_arg(argc, argv, 1, 15) * 1000000ULL;
	rounds = (int)wl_arg(argc, argv, 2, 1);
	wl_wait_start();
	if (argc > 3 && !strcmp(argv[3], "late")) {
		pthread_t t;

		/* Be born well after the tracer attached. */
		wl_sleep_ns(200000000ULL);
		if (pthread_create(&t, NULL, sleep_rounds, NULL))
			return 1;
		pthread_join(t, NULL);
		return 0;
	}
	sleep_rounds(NULL);
	return 0;
}
