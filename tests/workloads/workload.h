/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Helpers for the test workloads: each workload produces one known scenario
 * and logs its ground truth (CLOCK_MONOTONIC ns, tids) as JSON lines to the
 * file named by $HT_WORKLOAD_LOG (stderr if unset).
 */
#ifndef HT_WORKLOAD_H
#define HT_WORKLOAD_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t wl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline int wl_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

static FILE *wl_log_file;
static pthread_mutex_t wl_log_lock = PTHREAD_MUTEX_INITIALIZER;

/* Log one JSON object (the caller writes the fields) plus "tid" and "ts_ns". */
__attribute__((format(printf, 2, 3))) static inline void wl_log(const char *event,
								 const char *fmt, ...)
{
	uint64_t ts = wl_now_ns();
	va_list ap;

	pthread_mutex_lock(&wl_log_lock);
	if (!wl_log_file) {
		const char *path = getenv("HT_WORKLOAD_LOG");

		wl_log_file = path ? fopen(path, "a") : NULL;
		if (!wl_log_file)
			wl_log_file = stderr;
	}
	fprintf(wl_log_file, "{\"event\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts_ns\":%llu", event,
		getpid(), wl_gettid(), (unsigned long long)ts);
	if (fmt && *fmt) {
		fputc(',', wl_log_file);
		va_start(ap, fmt);
		vfprintf(wl_log_file, fmt, ap);
		va_end(ap);
	}
	fputs("}\n", wl_log_file);
	fflush(wl_log_file);
	pthread_mutex_unlock(&wl_log_lock);
}

static inline void wl_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static inline void wl_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One byte from FD: 1, or 0 at end of file; an error ends the process (_exit, fork-safe). */
static inline int wl_read_byte(int fd)
{
	char byte;
	ssize_t n;

	while ((n = read(fd, &byte, 1)) < 0 && errno == EINTR)
		;
	if (n < 0) {
		perror("read");
		_exit(1);
	}
	return n == 1;
}

/* One byte to FD; an error ends the process. */
static inline void wl_write_byte(int fd)
{
	ssize_t n;

	while ((n = write(fd, "x", 1)) < 0 && errno == EINTR)
		;
	if (n != 1) {
		perror("write");
		_exit(1);
	}
}

/* Whether the task whose stat file is PATH is asleep: state S. */
static inline int wl_stat_sleeping(const char *path)
{
	char buf[512], *p;
	FILE *f;
	int asleep = 0;

	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		asleep = p[2] == 'S';
	fclose(f);
	return asleep;
}

/* Whether thread TID of this process is asleep (state S in /proc). */
static inline int wl_thread_sleeping(int tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	return wl_stat_sleeping(path);
}

/* Whether process PID (its main thread) is asleep. */
static inline int wl_proc_sleeping(int pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return wl_stat_sleeping(path);
}

/* Burn CPU until the monotonic clock reaches `until`. */
static inline void wl_spin_until(uint64_t until)
{
	while (wl_now_ns() < until)
		__asm__ __volatile__("" ::: "memory");
}

static inline long wl_arg(int argc, char **argv, int i, long dflt)
{
	return argc > i ? strtol(argv[i], NULL, 0) : dflt;
}

/*
 * The test drives a workload through two files it names in the environment,
 * so it needs no pid (the workload may be hybtrace's child, or in another
 * pid namespace) and no fixed sleep:
 *  - $HT_START_FILE: the scenario begins once this file exists, so a tracer
 *    attached with --pid is ready (the test makes it once hybtrace says it
 *    is attached);
 *  - $HT_STOP_FILE: what would run for a count of rounds or seconds goes on
 *    until this file exists instead, so it cannot end before the test has
 *    done what it needs while it runs.
 */

/*
 * Whether the directory that would hold PATH is gone: the test that named it
 * has ended (or failed and cleaned up), and no one will make the file. A
 * workload waiting for it ends then instead of running on unwatched.
 */
static inline int wl_dir_gone(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	return access(dir[0] ? dir : "/", F_OK) && errno == ENOENT;
}

/*
 * Block until PATH exists (or its directory is removed): one sleep, woken by
 * its creation, not a polling loop.
 */
static inline void wl_wait_for_file(const char *path)
{
	char dir[4096], buf[4096];
	const char *slash = strrchr(path, '/');
	int fd = inotify_init1(IN_CLOEXEC);

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (fd >= 0 && inotify_add_watch(fd, dir[0] ? dir : "/",
					 IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF) < 0) {
		close(fd);
		fd = -1;
	}
	/* Checked after the watch is set: a file made in between is not missed. */
	while (access(path, F_OK) && !wl_dir_gone(path)) {
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			wl_sleep_ns(1000000);
	}
	if (fd >= 0)
		close(fd);
}

/* Before the scenario: wait for $HT_START_FILE, if the test named one. */
static inline void wl_wait_start(void)
{
	const char *path = getenv("HT_START_FILE");

	if (path && *path)
		wl_wait_for_file(path);
}

/* Whether the test named a $HT_STOP_FILE: the workload then runs until it exists. */
static inline int wl_until_stopped(void)
{
	const char *path = getenv("HT_STOP_FILE");

	return path && *path;
}

/*
 * Whether the test asked the workload to stop. Cheap enough for a spinning
 * loop: the file is looked for at most once a millisecond.
 */
static inline int wl_stop_requested(void)
{
	static __thread uint64_t next_look_ns;
	static volatile int stopped;
	uint64_t now;

	if (stopped)
		return 1;
	now = wl_now_ns();
	if (now < next_look_ns)
		return 0;
	next_look_ns = now + 1000000;
	if (!access(getenv("HT_STOP_FILE"), F_OK) || wl_dir_gone(getenv("HT_STOP_FILE")))
		stopped = 1;
	return stopped;
}

/* Whether another round is due: ROUNDS of them, or until the stop file exists. */
static inline int wl_more_rounds(long done, long rounds)
{
	return wl_until_stopped() ? !wl_stop_requested() : done < rounds;
}

/* Whether to go on: until END_NS on the monotonic clock, or until the stop file exists. */
static inline int wl_before(uint64_t end_ns)
{
	return wl_until_stopped() ? !wl_stop_requested() : wl_now_ns() < end_ns;
}

/* Idle NS, or until the stop file exists: one sleep either way. */
static inline void wl_idle(uint64_t ns)
{
	if (wl_until_stopped())
		wl_wait_for_file(getenv("HT_STOP_FILE"));
	else
		wl_sleep_ns(ns);
}

/* The calling thread's time waiting in a run queue so far (the kernel's sched_info). */
static inline uint64_t wl_run_delay_ns(void)
{
	unsigned long long cpu_ns = 0, delay_ns = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &cpu_ns, &delay_ns) != 2)
		delay_ns = 0;
	fclose(f);
	return delay_ns;
}

/*
 * Touch $HT_EXIT_TOUCH_MB of fresh memory, left mapped: the exit that follows spends a
 * while freeing it, after the task let go of its mm (user registers, no user stack).
 */
static inline void wl_exit_touch(void)
{
	const char *mb = getenv("HT_EXIT_TOUCH_MB");
	size_t bytes = mb ? (size_t)strtoull(mb, NULL, 10) << 20 : 0;
	volatile char *p;

	if (!bytes)
		return;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	/* Small pages: each one is freed on its own, which takes the exit a while. */
	madvise((void *)p, bytes, MADV_NOHUGEPAGE);
	wl_log("touch_start", "\"bytes\":%zu", bytes);
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = 1;
	wl_log("touch_end", NULL);
}

#endif /* HT_WORKLOAD_H */
