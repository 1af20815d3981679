// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A chain of wakeups across three processes, for the critical path: A (this
 * process, "chain_a", the one to trace) reads a pipe from B ("chain_b"), B
 * reads a pipe from C ("chain_c"), C sleeps DELAY_MS (clock_nanosleep) and
 * writes one byte to B, and B, on reading it, writes one byte to A. So A's
 * read waits on B, B's on C, and C's on its timer.
 *
 * Each round A logs a_read_start, writes "go" to C on a pipe and blocks in
 * read() on B's pipe; C waits until it sees A asleep (/proc/A/stat), then
 * sleeps: A is blocked before C's sleep begins. Between rounds A pauses 50 ms
 * in 1 ms sleeps (no off-CPU wait of its own past 1 ms).
 *
 *  - pipes: as above.
 *  - hog: B and a CPU hog ("chain_hog", SCHED_FIFO 1) are pinned to one CPU
 *    (CPU 1 where A may run on it; A and C are not pinned). B, after reading C's
 *    byte and before writing to A, signals the hog on a pipe: the hog, woken
 *    on B's CPU at a real-time priority, preempts B (SCHED_OTHER) at once and
 *    spins HOG_MS, so B sits runnable behind it for about HOG_MS. B logs its
 *    run-queue delay across that write (b_behind_hog, from schedstat). Needs
 *    root (SCHED_FIFO).
 *  - exit: B is a fresh process each round (A forks it before the round):
 *    it writes to A and exits at once (the waker exits right after waking);
 *    A reaps it after its read returns.
 *  - busy: B, after reading C's byte, computes for HOG_MS (b_busy_work) on
 *    the CPU before writing to A: traced with its children, its samples
 *    show that function.
 *
 * Ground truth (wl_log, CLOCK_MONOTONIC, each line with its process's pid and
 * tid and the round): "chain" at start (pids of A, B, C and the hog, 0 where
 * there is none; in exit mode each round's B says its pid in its own lines),
 * a_read_start / a_read_end (waited_ns), c_go, c_saw_a_asleep,
 * c_sleep_start / c_sleep_end, b_read, b_behind_hog (run_delay_ns,
 * blocked_ns), hog_start / hog_stop, b_write (just before the write to A),
 * b_reaped (exit mode). The pids also go to stdout at start.
 *
 * usage: wait_chain pipes|hog|exit|busy [DELAY_MS [ROUNDS [HOG_MS]]]
 *   DELAY_MS: C's sleep, default 20; ROUNDS: default 5 (or until
 *   $HT_STOP_FILE exists, if named); HOG_MS: the hog's spin (busy: B's
 *   work), default 5.
 */
#include <signal.h>
#include <sys/wait.h>
#include "workload.h"

#define PAUSE_NS      50000000ULL
#define PAUSE_STEP_NS 1000000ULL

enum { MODE_PIPES, MODE_HOG, MODE_EXIT, MODE_BUSY };

static const char *mode_name;
static int mode;
static uint64_t delay_ns, hog_ns;
static long rounds;
static pid_t a_pid;
static int hog_cpu = -1;

/* A -> C "go", C -> B, B -> A, B -> hog, and each long-lived child's "ready" to A. */
static int go_p[2] = {-1, -1}, cb_p[2] = {-1, -1}, ba_p[2] = {-1, -1}, bh_p[2] = {-1, -1};
static int ready_p[2] = {-1, -1};

static void close_end(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* In a child: close every pipe end but KEEP0..2, and the ready pipe's read end. */
static void keep_only(int keep0, int keep1, int keep2)
{
	int *ends[] = {go_p, cb_p, ba_p, bh_p};

	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		for (int j = 0; j < 2; j++)
			if (ends[i][j] != keep0 && ends[i][j] != keep1 && ends[i][j] != keep2)
				close_end(&ends[i][j]);
	close_end(&ready_p[0]);
}

/* In a child: its name, and its death with A's. */
static void child_setup(const char *name, int cpu)
{
	prctl(PR_SET_NAME, name);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != a_pid)
		_exit(1);
	if (cpu >= 0)
		wl_pin(cpu);
}

/* A long-lived child is set up: tell A. */
static void child_ready(void)
{
	if (ready_p[1] >= 0) {
		wl_write_byte(ready_p[1]);
		close(ready_p[1]);
		ready_p[1] = -1;
	}
}

static void run_c(void)
{
	struct timespec ts = {(time_t)(delay_ns / 1000000000ULL), (long)(delay_ns % 1000000000ULL)};

	child_setup("chain_c", -1);
	keep_only(go_p[0], cb_p[1], -1);
	child_ready();
	for (long round = 0; wl_read_byte(go_p[0]); round++) {
		struct timespec left = ts;

		wl_log("c_go", "\"round\":%ld", round);
		/* A wrote "go" right before its read: once asleep, it is in the read. */
		while (!wl_proc_sleeping(a_pid))
			wl_sleep_ns(50000);
		wl_log("c_saw_a_asleep", "\"round\":%ld,\"a_pid\":%d", round, (int)a_pid);
		wl_log("c_sleep_start", "\"round\":%ld,\"delay_ns\":%llu", round,
		       (unsigned long long)delay_ns);
		while (clock_nanosleep(CLOCK_MONOTONIC, 0, &left, &left) == EINTR)
			;
		wl_log("c_sleep_end", "\"round\":%ld", round);
		wl_write_byte(cb_p[1]);
	}
	_exit(0);
}

/* In B, hog mode: wake the hog on this CPU, which preempts B for HOG_MS. */
static void behind_hog(long round)
{
	uint64_t delay_before = wl_run_delay_ns(), t0 = wl_now_ns();

	wl_write_byte(bh_p[1]);
	wl_log("b_behind_hog", "\"round\":%ld,\"run_delay_ns\":%llu,\"blocked_ns\":%llu", round,
	       (unsigned long long)(wl_run_delay_ns() - delay_before),
	       (unsigned long long)(wl_now_ns() - t0));
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * In B, busy mode: compute for HOG_MS of its own CPU time (however long
 * others hold the CPU) before writing (not inlined: it is named).
 */
static __attribute__((noinline)) void b_busy_work(long round)
{
	uint64_t until = thread_cpu_ns() + hog_ns;

	wl_log("b_busy_start", "\"round\":%ld", round);
	while (thread_cpu_ns() < until)
		;
	wl_log("b_busy_end", "\"round\":%ld", round);
}

/*
 * B's wakeup of A. Its own frame: libc's write keeps no frame pointer, so
 * a frame-pointer stack taken in it skips its caller's frame, this one,
 * and shows b_rounds.
 */
static __attribute__((noinline)) void b_write_to_a(void)
{
	wl_write_byte(ba_p[1]);
}

/*
 * B's rounds from FIRST: read C's byte, (hog mode: sit behind the hog; busy: compute),
 * write A's. Not inlined: the waker's stack names it.
 */
static __attribute__((noinline)) void b_rounds(long first, int once)
{
	for (long round = first; wl_read_byte(cb_p[0]); round++) {
		wl_log("b_read", "\"round\":%ld", round);
		if (mode == MODE_HOG)
			behind_hog(round);
		if (mode == MODE_BUSY)
			b_busy_work(round);
		wl_log("b_write", "\"round\":%ld", round);
		b_write_to_a();
		if (once)
			_exit(0); /* the waker exits right after the wakeup */
	}
	_exit(0);
}

static pid_t fork_or_die(void)
{
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	return pid;
}

static void run_hog(void)
{
	struct sched_param fifo = {.sched_priority = 1};

	child_setup("chain_hog", hog_cpu);
	keep_only(bh_p[0], -1, -1);
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) {
		perror("chain_hog: sched_setscheduler(SCHED_FIFO) (needs root)");
		_exit(1);
	}
	child_ready();
	for (long round = 0; wl_read_byte(bh_p[0]); round++) {
		uint64_t start = wl_now_ns();

		wl_log("hog_start", "\"round\":%ld,\"cpu\":%d", round, sched_getcpu());
		wl_spin_until(start + hog_ns);
		wl_log("hog_stop", "\"round\":%ld", round);
	}
	_exit(0);
}

/* The long-lived B (pipes, hog), with the pipe ends it needs. */
static pid_t fork_b(void)
{
	pid_t pid = fork_or_die();

	if (pid)
		return pid;
	child_setup("chain_b", hog_cpu);
	keep_only(cb_p[0], ba_p[1], bh_p[1]);
	child_ready();
	b_rounds(0, 0);
	return 0;
}

/* Exit mode: this round's B, which reads C's byte, writes A's and exits. */
static pid_t fork_exit_b(long round)
{
	pid_t pid = fork_or_die();

	if (pid)
		return pid;
	child_setup("chain_b", -1);
	keep_only(cb_p[0], ba_p[1], -1);
	b_rounds(round, 1);
	return 0;
}

/*
 * Hog mode's CPU for B and the hog: CPU 1 where A may run on it, else A's first. A and C
 * stay free to run on any CPU (pinned, they would wait behind whatever else runs there, and
 * hybtrace keeps its own threads off the CPUs its target is pinned to: onto B's).
 */
static void pick_hog_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE && hog_cpu != 1; cpu++)
		if (CPU_ISSET(cpu, &set) && (cpu == 1 || hog_cpu < 0))
			hog_cpu = cpu;
}

/* Between rounds: PAUSE_NS in short sleeps, none an off-CPU wait to speak of. */
static void pause_between_rounds(void)
{
	uint64_t end = wl_now_ns() + PAUSE_NS;

	while (wl_now_ns() < end)
		wl_sleep_ns(PAUSE_STEP_NS);
}

static void usage(void)
{
	fprintf(stderr, "usage: wait_chain pipes|hog|exit|busy [DELAY_MS [ROUNDS [HOG_MS]]]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	pid_t b = 0, c, hog = 0;
	int children = 0, status, failed = 0;
	long round;

	if (argc < 2)
		usage();
	mode_name = argv[1];
	if (!strcmp(mode_name, "pipes"))
		mode = MODE_PIPES;
	else if (!strcmp(mode_name, "hog"))
		mode = MODE_HOG;
	else if (!strcmp(mode_name, "exit"))
		mode = MODE_EXIT;
	else if (!strcmp(mode_name, "busy"))
		mode = MODE_BUSY;
	else
		usage();
	delay_ns = (uint64_t)wl_arg(argc, argv, 2, 20) * 1000000ULL;
	rounds = wl_arg(argc, argv, 3, 5);
	hog_ns = (uint64_t)wl_arg(argc, argv, 4, 5) * 1000000ULL;
	a_pid = getpid();
	prctl(PR_SET_NAME, "chain_a");
	signal(SIGPIPE, SIG_IGN);
	if (pipe(go_p) || pipe(cb_p) || pipe(ba_p) || pipe(ready_p) ||
	    (mode == MODE_HOG && pipe(bh_p))) {
		perror("pipe");
		return 1;
	}
	if (mode == MODE_HOG)
		pick_hog_cpu();

	if (mode == MODE_HOG) {
		hog = fork_or_die();
		if (!hog)
			run_hog();
		children++;
		close_end(&bh_p[0]);
	}
	if (mode != MODE_EXIT) {
		b = fork_b();
		children++;
		close_end(&bh_p[1]);
		close_end(&cb_p[0]);
		close_end(&ba_p[1]);
	}
	c = fork_or_die();
	if (!c)
		run_c();
	children++;
	close_end(&go_p[0]);
	close_end(&cb_p[1]);
	close_end(&ready_p[1]);
	for (int i = 0; i < children; i++)
		if (!wl_read_byte(ready_p[0])) {
			/* The others die with A (PR_SET_PDEATHSIG). */
			fprintf(stderr, "wait_chain: a child failed to start\n");
			return 1;
		}
	close_end(&ready_p[0]);
	/*
	 * B, long-lived, asleep in its read before A's first round, as before
	 * every later one: else B, preempted by A right after its "ready", may
	 * fall asleep only after A's first read began.
	 */
	while (b && !wl_proc_sleeping(b))
		wl_sleep_ns(50000);

	printf("chain_a %d chain_b %d chain_c %d chain_hog %d\n", (int)a_pid, (int)b, (int)c,
	       (int)hog);
	fflush(stdout);
	wl_log("chain",
	       "\"mode\":\"%s\",\"a\":%d,\"b\":%d,\"c\":%d,\"hog\":%d,\"delay_ns\":%llu,"
	       "\"hog_ns\":%llu,\"hog_cpu\":%d",
	       mode_name, (int)a_pid, (int)b, (int)c, (int)hog, (unsigned long long)delay_ns,
	       (unsigned long long)hog_ns, hog_cpu);
	wl_wait_start();

	for (round = 0; wl_more_rounds(round, rounds); round++) {
		pid_t fresh_b;
		uint64_t start;

		if (round)
			pause_between_rounds();
		fresh_b = mode == MODE_EXIT ? fork_exit_b(round) : 0;
		start = wl_now_ns();
		wl_log("a_read_start", "\"round\":%ld", round);
		wl_write_byte(go_p[1]);
		if (!wl_read_byte(ba_p[0])) {
			fprintf(stderr, "wait_chain: B's pipe closed in round %ld\n", round);
			failed = 1;
			break;
		}
		wl_log("a_read_end", "\"round\":%ld,\"waited_ns\":%llu", round,
		       (unsigned long long)(wl_now_ns() - start));
		if (fresh_b) {
			if (waitpid(fresh_b, &status, 0) != fresh_b || status)
				failed = 1;
			wl_log("b_reaped", "\"round\":%ld,\"b\":%d", round, (int)fresh_b);
		}
	}

	/* No more "go": C ends, then B (its pipe's end), then the hog (B's). */
	close_end(&go_p[1]);
	close_end(&ba_p[0]);
	while (children-- > 0)
		if (wait(&status) < 0 || status)
			failed = 1;
	return failed;
}
