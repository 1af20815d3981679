// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * User marks written by several processes, each with its own names.
 *
 * marks_procs tree ROLE N [CHILD_ROLE]
 *   Waits for $HT_START_FILE; then (with CHILD_ROLE) forks a child that
 *   takes CHILD_ROLE. Each process names mark 1 "ROLE main" and mark 2
 *   "ROLE worker" (a child renames what it inherited), and writes N of
 *   mark 1 on its first thread and N of mark 2 on a thread of its own, one
 *   a millisecond, a = the mark's number, b = the process's pid. Each thread
 *   logs "marked" (role, name, n) when done; then every process idles
 *   until $HT_STOP_FILE exists. The parent reaps its child.
 *
 * marks_procs many K PERIOD_MS
 *   K processes (forked at once), each writing mark 1 "proc mark" every
 *   PERIOD_MS until $HT_STOP_FILE exists; the parent logs "ready" once every
 *   child has written its first, and reaps them at the stop.
 */
#include <sys/wait.h>
#include "hybtrace/mark.h"
#include "workload.h"

static const char *role;
static long count;

static void name_marks(void)
{
	char name[64];

	snprintf(name, sizeof(name), "%s main", role);
	hybtrace_mark_name(1, name);
	snprintf(name, sizeof(name), "%s worker", role);
	hybtrace_mark_name(2, name);
}

static void write_marks(uint32_t id)
{
	for (long i = 0; i < count; i++) {
		hybtrace_mark(id, (uint64_t)i, (uint64_t)getpid());
		wl_sleep_ns(1000000ULL);
	}
	wl_log("marked", "\"role\":\"%s\",\"name\":\"%s %s\",\"n\":%ld", role, role,
	       id == 1 ? "main" : "worker", count);
}

static void *worker(void *arg)
{
	(void)arg;
	write_marks(2);
	return NULL;
}

static int tree(int argc, char **argv)
{
	const char *child_role = argc > 4 ? argv[4] : NULL;
	pid_t child = 0;
	pthread_t t;

	role = argv[2];
	count = wl_arg(argc, argv, 3, 20);
	name_marks();
	wl_log("ready", "\"role\":\"%s\"", role);
	wl_wait_start();
	if (child_role) {
		child = fork();
		if (child < 0)
			return 1;
		if (!child) {
			role = child_role;
			child_role = NULL;
			name_marks();
			wl_log("ready", "\"role\":\"%s\"", role);
		}
	}
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	write_marks(1);
	pthread_join(t, NULL);
	wl_idle(0);
	if (child > 0)
		waitpid(child, NULL, 0);
	return 0;
}

static int many(int argc, char **argv)
{
	long k = wl_arg(argc, argv, 2, 100), period_ms = wl_arg(argc, argv, 3, 100);
	int ready[2];
	char c;

	if (pipe(ready))
		return 1;
	hybtrace_mark_name(1, "proc mark");
	for (long i = 0; i < k; i++) {
		pid_t p = fork();

		if (p < 0)
			return 1;
		if (!p) {
			close(ready[0]);
			hybtrace_mark(1, 0, (uint64_t)getpid());
			if (write(ready[1], "x", 1) != 1)
				_exit(1);
			close(ready[1]);
			for (long n = 1; wl_more_rounds(n, 50); n++) {
				wl_sleep_ns((uint64_t)period_ms * 1000000ULL);
				hybtrace_mark(1, n, (uint64_t)getpid());
			}
			_exit(0);
		}
	}
	close(ready[1]);
	for (long i = 0; i < k; i++)
		if (read(ready[0], &c, 1) != 1)
			return 1;
	wl_log("ready", "\"processes\":%ld", k);
	while (wait(NULL) > 0)
		;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "tree"))
		return tree(argc, argv);
	if (argc > 2 && !strcmp(argv[1], "many"))
		return many(argc, argv);
	fprintf(stderr, "usage: marks_procs tree ROLE N [CHILD_ROLE] | many K PERIOD_MS\n");
	return 2;
}
