// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A run-queue wait across a migration. Needs root (SCHED_FIFO) and two CPUs.
 *
 * By default the main thread runs on CPU 1 and pins itself to CPU 0 while a
 * SCHED_FIFO hog ("fifo_hog", another process) spins there for HOLD_MS.
 * sched_setaffinity has CPU 1's stopper preempt the thread and move it to
 * CPU 0's queue, where it waits until the hog is done: a wait that begins on
 * one CPU and is spent behind a known task on another. Logs the hog's bounds
 * and the pin.
 *
 * With "queued", the main thread ("migrator") spins on CPU 1 when a SCHED_FIFO
 * hog there ("cpu1_hog") preempts it at "hogs_start" for HOLD_MS / 4, while
 * another ("cpu0_hog") spins on CPU 0 for HOLD_MS. A third process ("mover",
 * SCHED_FIFO above them, on CPU 0) moves the waiting thread to CPU 0 at
 * "moved": the wait begins behind one hog, is moved while queued, and ends
 * behind the other.
 * In both, the thread then sleeps 20 ms (nap_start, nap_end).
 * usage: migrate_wait [HOLD_MS [queued]]
 */
#include <signal.h>
#include <sys/wait.h>
#include "workload.h"

#define PAUSE_NS 20000000ULL /* the sleep after the move */

static void fifo(const char *name, int cpu, int priority)
{
	struct sched_param sp = { .sched_priority = priority };

	prctl(PR_SET_NAME, name);
	wl_pin(cpu);
	if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
		perror("sched_setscheduler");
		_exit(1);
	}
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * A child set up as NAME, SCHED_FIFO at PRIORITY on CPU, that says it is
 * ready on READY and then reads the start time from its own pipe: under
 * load a child may take longer to be set up than any fixed delay, and the
 * scenario's times must hold. Returns the child's pid and, in the child,
 * 0 with *START_NS read.
 */
static pid_t start_child(const char *name, int cpu, int priority, int ready, int *go,
			 uint64_t *start_ns)
{
	int pipefd[2];
	pid_t pid;

	if (pipe(pipefd))
		exit(1);
	pid = fork();
	if (pid) {
		close(pipefd[0]);
		*go = pipefd[1];
		return pid;
	}
	close(pipefd[1]);
	fifo(name, cpu, priority);
	if (write(ready, "r", 1) != 1 ||
	    read(pipefd[0], start_ns, sizeof(*start_ns)) != sizeof(*start_ns))
		_exit(1);
	return 0;
}

/* A hog that spins on CPU for HOLD_NS from the start time it is given. */
static pid_t start_hog(const char *name, int cpu, uint64_t hold_ns, int ready, int *go)
{
	uint64_t start_ns;
	pid_t pid = start_child(name, cpu, 1, ready, go, &start_ns);

	if (pid)
		return pid;
	sleep_until(start_ns);
	wl_spin_until(start_ns + hold_ns);
	_exit(0);
}

/*
 * Spin until UNTIL, then log the stretches the thread did not run since
 * SINCE, when it last saw itself running, as it saw them ("gaps": [last seen
 * running, running again] pairs over 500 us): its own account of when each
 * wait began. Under load the kernel may give a starved thread a turn between
 * two FIFO hogs' (the fair server), and a wait that spans the move then
 * begins at its last turn, not at the start.
 */
static void spin_noting_gaps(uint64_t since, uint64_t until)
{
	char gaps[16 * 48] = "";
	size_t used = 0;
	int n = 0;
	uint64_t last = since, now;

	while ((now = wl_now_ns()) < until) {
		if (now - last > 500000 && n < 16) {
			used += (size_t)snprintf(gaps + used, sizeof(gaps) - used, "%s[%llu,%llu]",
						 n ? "," : "", (unsigned long long)last,
						 (unsigned long long)now);
			n++;
		}
		last = now;
	}
	wl_log("gaps", "\"gaps\":[%s]", gaps);
}

/* A sleep, and the wakeup after it: a short run-queue wait of its own. */
static void nap(void)
{
	wl_log("nap_start", NULL);
	wl_sleep_ns(PAUSE_NS);
	wl_log("nap_end", NULL);
}

static int queued(uint64_t hold_ns)
{
	uint64_t seen_ns, start_ns, move_ns;
	pid_t me = getpid(), hogs[2], mover;
	int ready[2], go[3];
	cpu_set_t cpu0;
	char byte;

	prctl(PR_SET_NAME, "migrator");
	wl_pin(1);
	if (pipe(ready))
		return 1;
	hogs[0] = start_hog("cpu0_hog", 0, hold_ns, ready[1], &go[0]);
	hogs[1] = start_hog("cpu1_hog", 1, hold_ns / 4 + hold_ns / 2, ready[1], &go[1]);
	mover = start_child("mover", 0, 2, ready[1], &go[2], &start_ns);
	if (mover == 0) {
		sleep_until(start_ns + hold_ns / 4);
		CPU_ZERO(&cpu0);
		CPU_SET(0, &cpu0);
		if (sched_setaffinity(me, sizeof(cpu0), &cpu0))
			_exit(1);
		wl_log("moved", "\"moved_tid\":%d", me);
		_exit(0);
	}
	/* All three are SCHED_FIFO and waiting: the start is theirs to keep. */
	for (int i = 0; i < 3; i++)
		if (read(ready[0], &byte, 1) != 1)
			return 1;
	/*
	 * Runnable throughout: preempted at the start, waiting until the CPU 0
	 * hog is done. Its gaps are noted from before the start is handed out:
	 * a thread held up between the two (once, under load, past the hogs'
	 * start) still tells when it stopped running. Its line comes after.
	 */
	seen_ns = wl_now_ns();
	start_ns = seen_ns + 20000000ULL;
	move_ns = start_ns + hold_ns / 4;
	for (int i = 0; i < 3; i++)
		if (write(go[i], &start_ns, sizeof(start_ns)) != sizeof(start_ns))
			return 1;
	spin_noting_gaps(seen_ns, start_ns + hold_ns + 10000000ULL);
	wl_log("hogs", "\"cpu0_hog\":%d,\"cpu1_hog\":%d,\"start_ns\":%llu,\"move_ns\":%llu",
	       hogs[0], hogs[1], (unsigned long long)start_ns, (unsigned long long)move_ns);
	wl_log("waited", "\"cpu\":%d", sched_getcpu());
	for (int i = 0; i < 2; i++)
		waitpid(hogs[i], NULL, 0);
	waitpid(mover, NULL, 0);
	nap();
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t hold_ns = (uint64_t)wl_arg(argc, argv, 1, 30) * 1000000ULL;
	struct sched_param fifo = { .sched_priority = 1 };
	int ready[2];
	pid_t hog;
	char byte;

	wl_wait_start();
	if (argc > 2 && !strcmp(argv[2], "queued"))
		return queued(hold_ns);
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
	nap();
	return 0;
}
