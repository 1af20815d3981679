// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Many processes alive at once, each blocking again and again: a service of
 * K single-threaded processes ("many_child") under one parent ("many").
 *
 * many_procs sleep K SLEEP_MS CYCLES [LATE [BURST_US]]
 *   K - LATE children are forked at once and wait on a pipe; once each has
 *   logged its child_start, the parent logs ready, waits for
 *   $HT_START_FILE, lets them go, then forks the LATE
 *   others. Each child runs CYCLES cycles (until $HT_STOP_FILE exists
 *   instead, when named) of one SLEEP_MS nanosleep and BURST_US of CPU. Ground truth: child_start
 *   (each child, at birth), sleep_start / sleep_end around each sleep,
 *   child_end; the parent's ready, started and done.
 *
 * many_procs pingpong K ROUNDS
 *   K / 2 pairs, each passing a byte back and forth ROUNDS times over two
 *   pipes, all pairs at once from the moment every child is forked. Each
 *   pair is pinned to one of the CPUs it may use, in turn: where the
 *   scheduler would place the pairs, a pair split across CPUs or not made
 *   runs differ by half (seen: 2.7 to 4.8 us a message on 2 CPUs). Prints
 *   the time a message took, "N usecs/op" (elapsed / (K * ROUNDS) messages),
 *   as perf bench does, and logs done with elapsed_ns.
 */
#include <fcntl.h>
#include <sys/wait.h>
#include "workload.h"

/* Block until the parent closes the gate's write end (every child's copy is closed). */
static void pass_gate(int gate)
{
	char c;

	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	close(gate);
}

static void sleep_cycles(long cycles, uint64_t sleep_ns, uint64_t burst_ns)
{
	for (long i = 0; wl_more_rounds(i, cycles); i++) {
		wl_log("sleep_start", "\"cycle\":%ld", i);
		wl_sleep_ns(sleep_ns);
		wl_log("sleep_end", "\"cycle\":%ld", i);
		wl_spin_until(wl_now_ns() + burst_ns);
	}
	wl_log("child_end", NULL);
}

/* Wait until N early children have said they are born (one byte each on BORN). */
static void await_births(int born, long n)
{
	char c;

	for (long got = 0; got < n;) {
		ssize_t r = read(born, &c, 1);

		if (r == 1)
			got++;
		else if (r == 0 || errno != EINTR)
			break;
	}
}

static int reap_all(void)
{
	int status, failed = 0;

	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	return failed;
}

static int sleep_mode(long k, uint64_t sleep_ns, long cycles, long late, uint64_t burst_ns)
{
	int gate[2], born[2], failed;

	if (late > k) {
		fprintf(stderr, "many_procs: LATE %ld is more than K %ld\n", late, k);
		return 2;
	}
	if (pipe2(gate, O_CLOEXEC) || pipe2(born, O_CLOEXEC)) {
		perror("pipe");
		return 1;
	}
	wl_log("many_start", "\"k\":%ld,\"late\":%ld,\"cycles\":%ld", k, late, cycles);
	for (long i = 0; i < k; i++) {
		pid_t child;

		if (i == k - late) {
			/* ready: every early child's child_start is in the log. */
			close(born[1]);
			born[1] = -1;
			await_births(born[0], k - late);
			wl_log("ready", "\"children\":%ld", k - late);
			wl_wait_start();
			/* Every early child holds only the read end: they all see EOF now. */
			close(gate[1]);
			gate[1] = -1;
			wl_log("started", NULL);
		}
		child = fork();
		if (child < 0) {
			perror("fork");
			return 1;
		}
		if (child == 0) {
			prctl(PR_SET_NAME, "many_child");
			if (gate[1] >= 0)
				close(gate[1]);
			wl_log("child_start", "\"late\":%d", gate[1] < 0);
			if (born[1] >= 0 && write(born[1], "b", 1) != 1)
				_exit(1);
			close(born[0]);
			if (born[1] >= 0)
				close(born[1]);
			if (gate[1] >= 0)
				pass_gate(gate[0]);
			else
				close(gate[0]);
			sleep_cycles(cycles, sleep_ns, burst_ns);
			_exit(0);
		}
	}
	if (gate[1] >= 0) {
		close(born[1]);
		await_births(born[0], k);
		wl_log("ready", "\"children\":%ld", k);
		wl_wait_start();
		close(gate[1]);
		wl_log("started", NULL);
	}
	close(gate[0]);
	close(born[0]);
	failed = reap_all();
	wl_log("done", "\"failed\":%d", failed);
	return failed;
}

static void pingpong_side(int in, int out, long rounds, int first)
{
	char c = 0;

	for (long i = 0; i < rounds; i++) {
		if (first && write(out, &c, 1) != 1)
			_exit(1);
		if (read(in, &c, 1) != 1)
			_exit(1);
		if (!first && write(out, &c, 1) != 1)
			_exit(1);
	}
	_exit(0);
}

static int pingpong_mode(long k, long rounds)
{
	int gate[2], failed, cpus[CPU_SETSIZE], ncpus = 0;
	uint64_t start_ns, elapsed_ns;
	cpu_set_t allowed;

	if (k < 2 || rounds <= 0) {
		fprintf(stderr, "many_procs: pingpong needs K >= 2 and ROUNDS > 0\n");
		return 2;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		perror("sched_getaffinity");
		return 1;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &allowed))
			cpus[ncpus++] = cpu;
	if (pipe2(gate, O_CLOEXEC)) {
		perror("pipe");
		return 1;
	}
	for (long i = 0; i < k / 2; i++) {
		int ab[2], ba[2];

		if (pipe2(ab, O_CLOEXEC) || pipe2(ba, O_CLOEXEC)) {
			perror("pipe");
			return 1;
		}
		for (int side = 0; side < 2; side++) {
			pid_t child = fork();

			if (child < 0) {
				perror("fork");
				return 1;
			}
			if (child == 0) {
				prctl(PR_SET_NAME, "many_child");
				wl_pin(cpus[i % ncpus]);
				close(gate[1]);
				pass_gate(gate[0]);
				if (side == 0)
					pingpong_side(ba[0], ab[1], rounds, 1);
				pingpong_side(ab[0], ba[1], rounds, 0);
			}
		}
		close(ab[0]);
		close(ab[1]);
		close(ba[0]);
		close(ba[1]);
	}
	start_ns = wl_now_ns();
	close(gate[1]);
	close(gate[0]);
	failed = reap_all();
	elapsed_ns = wl_now_ns() - start_ns;
	printf("%.3f usecs/op\n", (double)elapsed_ns / 1000.0 / (double)((k / 2) * 2 * rounds));
	wl_log("done", "\"failed\":%d,\"elapsed_ns\":%llu", failed, (unsigned long long)elapsed_ns);
	return failed;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sleep";
	long k = wl_arg(argc, argv, 2, 100);

	prctl(PR_SET_NAME, "many");
	if (k <= 0) {
		fprintf(stderr, "many_procs: K must be positive\n");
		return 2;
	}
	if (!strcmp(mode, "sleep"))
		return sleep_mode(k, (uint64_t)wl_arg(argc, argv, 3, 100) * 1000000ULL,
				  wl_arg(argc, argv, 4, 3), wl_arg(argc, argv, 5, 0),
				  (uint64_t)wl_arg(argc, argv, 6, 200) * 1000ULL);
	if (!strcmp(mode, "pingpong"))
		return pingpong_mode(k, wl_arg(argc, argv, 3, 2000));
	fprintf(stderr, "usage: many_procs sleep K SLEEP_MS CYCLES [LATE [BURST_US]] | "
			"many_procs pingpong K ROUNDS\n");
	return 2;
}
