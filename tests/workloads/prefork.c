// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A preforking server: a master ("pf_master") starts WORKERS workers
 * ("pf_worker"); each serves REQUESTS requests one after the other. A
 * request is WORK_MS of the worker's own CPU (reading it), then a child
 * forked for it ("pf_req") that sleeps SLEEP_MS in one nanosleep, burns
 * BURST_MS of CPU and exits, while the worker waits for it. Everything is
 * pinned to CPU, so that a CPU hog pinned there too makes each of them wait
 * in its run queue.
 *
 * Ground truth, each line with the pid that logs it:
 *   worker_start              a worker, with its master ("master")
 *   forked                    the worker, once fork() returned: "child" and
 *                             "fork_ns", taken just before fork()
 *   req_sleep_start/_end      the child, around its sleep
 *   req_end                   the child, after its burst, just before _exit,
 *                             with its run-queue time as the kernel counts it
 *   reaped                    the worker, once waitpid() returned the child:
 *                             no instruction of the child runs after this
 *   worker_end                the worker, at its end, with its run-queue time
 *   done                      the master, at the end
 *
 * usage: prefork [WORKERS [REQUESTS [SLEEP_MS [BURST_MS [WORK_MS [CPU]]]]]]
 *        prefork hog CPU MS
 * The second form is the hog ("pf_hog"): it spins pinned to CPU for MS, or
 * until $HT_STOP_FILE exists, having logged hog_start once pinned.
 */
#include <sys/wait.h>
#include "workload.h"

static int hog(int cpu, uint64_t dur_ns)
{
	uint64_t end_ns;

	prctl(PR_SET_NAME, "pf_hog");
	wl_pin(cpu);
	wl_log("hog_start", "\"cpu\":%d", cpu);
	end_ns = wl_now_ns() + dur_ns;
	/* The stop file ends it early; the time bound keeps a test's crash from leaving it. */
	while (wl_now_ns() < end_ns && !(wl_until_stopped() && wl_stop_requested()))
		__asm__ __volatile__("" ::: "memory");
	wl_log("hog_end", NULL);
	return 0;
}

static void request(uint64_t sleep_ns, uint64_t burst_ns)
{
	prctl(PR_SET_NAME, "pf_req");
	wl_log("req_sleep_start", "\"worker\":%d", getppid());
	wl_sleep_ns(sleep_ns);
	wl_log("req_sleep_end", "\"worker\":%d", getppid());
	wl_spin_until(wl_now_ns() + burst_ns);
	wl_log("req_end", "\"worker\":%d,\"run_delay_ns\":%llu", getppid(),
	       (unsigned long long)wl_run_delay_ns());
	_exit(0);
}

static void worker(int master, long requests, uint64_t sleep_ns, uint64_t burst_ns,
		   uint64_t work_ns)
{
	prctl(PR_SET_NAME, "pf_worker");
	wl_log("worker_start", "\"master\":%d", master);
	for (long i = 0; i < requests; i++) {
		uint64_t fork_ns;
		pid_t child;

		wl_spin_until(wl_now_ns() + work_ns);
		fork_ns = wl_now_ns();
		child = fork();
		if (child < 0) {
			perror("fork");
			_exit(1);
		}
		if (child == 0)
			request(sleep_ns, burst_ns);
		wl_log("forked", "\"child\":%d,\"request\":%ld,\"fork_ns\":%llu", child, i,
		       (unsigned long long)fork_ns);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
		wl_log("reaped", "\"child\":%d,\"request\":%ld,\"fork_ns\":%llu", child, i,
		       (unsigned long long)fork_ns);
	}
	wl_log("worker_end", "\"run_delay_ns\":%llu", (unsigned long long)wl_run_delay_ns());
	_exit(0);
}

int main(int argc, char **argv)
{
	long workers, requests;
	uint64_t sleep_ns, burst_ns, work_ns;
	int cpu, failed = 0;

	if (argc > 1 && !strcmp(argv[1], "hog"))
		return hog((int)wl_arg(argc, argv, 2, 0),
			   (uint64_t)wl_arg(argc, argv, 3, 10000) * 1000000ULL);
	workers = wl_arg(argc, argv, 1, 2);
	requests = wl_arg(argc, argv, 2, 6);
	sleep_ns = (uint64_t)wl_arg(argc, argv, 3, 8) * 1000000ULL;
	burst_ns = (uint64_t)wl_arg(argc, argv, 4, 10) * 1000000ULL;
	work_ns = (uint64_t)wl_arg(argc, argv, 5, 5) * 1000000ULL;
	cpu = (int)wl_arg(argc, argv, 6, 0);

	prctl(PR_SET_NAME, "pf_master");
	/* Workers and their children inherit the CPU. */
	wl_pin(cpu);
	wl_wait_start();
	wl_log("master_start", "\"workers\":%ld,\"requests\":%ld,\"cpu\":%d", workers, requests,
	       cpu);
	for (long i = 0; i < workers; i++) {
		pid_t w = fork();

		if (w < 0) {
			perror("fork");
			return 1;
		}
		if (w == 0)
			worker(getppid(), requests, sleep_ns, burst_ns, work_ns);
	}
	for (long i = 0; i < workers; i++) {
		int status;

		if (wait(&status) < 0)
			break;
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	}
	wl_log("done", "\"failed\":%d", failed);
	return failed;
}
