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
 * Wait before the scenario so a tracer attached with --pid is ready: $HT_START_DELAY_MS,
 * or until the file $HT_START_FILE exists (made once the tracer said it attached).
 */
static inline void wl_start_delay(void)
{
	const char *ms = getenv("HT_START_DELAY_MS");
	const char *file = getenv("HT_START_FILE");

	if (ms)
		wl_sleep_ns((uint64_t)strtoull(ms, NULL, 10) * 1000000ULL);
	while (file && access(file, F_OK))
		wl_sleep_ns(10000000ULL);
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
