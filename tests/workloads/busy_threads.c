// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * N threads that keep their CPUs busy for SECONDS (or until $HT_STOP_FILE
 * exists): the load a dump of a busy process is measured on.
 * usage: busy_threads [N [SECONDS]]
 */
#include "workload.h"

static uint64_t end_ns;

__attribute__((noinline)) static void busy_inner(void)
{
	volatile uint64_t x = 0;

	for (int i = 0; i < 100000; i++)
		x += (uint64_t)i;
}

static void *busy(void *arg)
{
	(void)arg;
	while (wl_before(end_ns))
		busy_inner();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = (int)wl_arg(argc, argv, 1, 4);
	pthread_t t[64];

	if (n < 1 || n > 64)
		return 2;
	end_ns = wl_now_ns() + (uint64_t)wl_arg(argc, argv, 2, 10) * 1000000000ULL;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, busy, NULL))
			return 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
