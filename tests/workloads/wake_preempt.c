// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A syscall's sleep, then a preemption within it. The target reads a timerfd
 * into a fresh transparent huge page, on CPU 1: the timer wakes it, and
 * storing the count faults in 2 MB of zeroes, a page at a time with a
 * reschedule point between pages. A SCHED_FIFO hog ("fifo_hog", another
 * process) pinned to CPU 1 wakes by its own timer DELAY_US after the
 * target's (half the read's time alone, by default) and spins
 * HOLD_MS there: it preempts the target inside its read. A SCHED_IDLE
 * spinner keeps CPU 1 from idling, so the target runs as soon as its timer
 * fires (an idle virtual CPU woke it later than DELAY_US, after the hog).
 * Each round logs the timer's expiry and the reader's involuntary context
 * switches during the read (getrusage), its preemptions. Needs root
 * (SCHED_FIFO) and transparent huge pages (madvise).
 * usage: wake_preempt [ROUNDS [HOLD_MS [DELAY_US]]]
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include "workload.h"

#define PERIOD_NS  30000000ULL
#define HUGE_BYTES (2UL << 20)

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static long involuntary_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nivcsw;
}

static void hog(long rounds, uint64_t first_ns, uint64_t delay_ns, uint64_t hold_ns)
{
	struct sched_param fifo = {.sched_priority = 1};

	prctl(PR_SET_NAME, "fifo_hog");
	wl_pin(1);
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) {
		perror("sched_setscheduler");
		_exit(1);
	}
	for (long i = 0; i < rounds; i++) {
		uint64_t wake_ns = first_ns + (uint64_t)i * PERIOD_NS + delay_ns;

		sleep_until(wake_ns);
		wl_spin_until(wake_ns + hold_ns);
	}
	_exit(0);
}

/* At SCHED_IDLE on CPU 1 until killed: whatever else wants the CPU takes it at once. */
static void idle_spin(void)
{
	struct sched_param none = {0};

	prctl(PR_SET_NAME, "idle_spin");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (sched_setscheduler(0, SCHED_IDLE, &none))
		_exit(1);
	for (;;)
		;
}

/* Read timerfd TFD, to expire at NS, into PAGE: a fresh huge page. */
static ssize_t read_fresh(int tfd, uint64_t ns, char *page)
{
	struct itimerspec its = {0};
	uint64_t count;

	its.it_value.tv_sec = (time_t)(ns / 1000000000ULL);
	its.it_value.tv_nsec = (long)(ns % 1000000000ULL);
	madvise(page, HUGE_BYTES, MADV_DONTNEED);
	if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL))
		return -1;
	return read(tfd, page, sizeof(count));
}

/* How long a read takes from the timer's expiry alone: faulting the page in, mostly. */
static uint64_t read_time_ns(int tfd, char *page)
{
	uint64_t best_ns = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		uint64_t ns = wl_now_ns() + 1000000, took_ns;

		if (read_fresh(tfd, ns, page) < 0)
			exit(1);
		took_ns = wl_now_ns() - ns;
		best_ns = took_ns < best_ns ? took_ns : best_ns;
	}
	return best_ns;
}

int main(int argc, char **argv)
{
	long rounds = wl_arg(argc, argv, 1, 10);
	uint64_t hold_ns = (uint64_t)wl_arg(argc, argv, 2, 3) * 1000000ULL;
	uint64_t delay_ns = (uint64_t)wl_arg(argc, argv, 3, 0) * 1000ULL;
	uint64_t first_ns, alone_ns;
	char *area, *page;
	pid_t child, spinner;
	int tfd;

	wl_wait_start();
	wl_pin(1);
	/* No timer slack (50 us for a normal task): the hog's timer must come later. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	/*
	 * CPU 1 never idles: a wakeup from an idle virtual CPU took longer
	 * here than DELAY_US, the hog then ran first and preempted no read.
	 */
	spinner = fork();
	if (spinner == 0)
		idle_spin();
	area = mmap(NULL, 2 * HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	if (area == MAP_FAILED || tfd < 0)
		return 1;
	page = (char *)(((uintptr_t)area + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1));
	if (madvise(page, HUGE_BYTES, MADV_HUGEPAGE)) {
		perror("madvise");
		return 1;
	}
	alone_ns = read_time_ns(tfd, page);
	if (!delay_ns)
		delay_ns = alone_ns / 2;
	wl_log("calibrated", "\"alone_ns\":%llu,\"delay_ns\":%llu", (unsigned long long)alone_ns,
	       (unsigned long long)delay_ns);
	/* Rounds at fixed times both processes know: the hog's timer follows the reader's. */
	first_ns = wl_now_ns() + 2 * PERIOD_NS;
	child = fork();
	if (child == 0)
		hog(rounds, first_ns, delay_ns, hold_ns);
	prctl(PR_SET_NAME, "reader");
	wl_log("hog", "\"hog_pid\":%d", child);
	for (long i = 0; i < rounds; i++) {
		uint64_t timer_ns = first_ns + (uint64_t)i * PERIOD_NS;
		long before;
		ssize_t n;

		wl_log("read_start", "\"timer_ns\":%llu", (unsigned long long)timer_ns);
		before = involuntary_switches();
		n = read_fresh(tfd, timer_ns, page);
		wl_log("read_end", "\"ret\":%zd,\"preempted\":%ld", n,
		       involuntary_switches() - before);
	}
	waitpid(child, NULL, 0);
	kill(spinner, SIGKILL);
	waitpid(spinner, NULL, 0);
	return 0;
}
