// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Functions for code triggers, called in known ways, each call logged with
 * its arguments. Every mode but `until` logs "ready" with the addresses of
 * the functions it will call ("at": name to address), then waits for
 * $HT_START_FILE (if the test names one: see workload.h), which the test
 * makes once the tracer said it armed its triggers there; `exec` does so in
 * each image, `dlopen` before (with no address) and after the dlopen, each
 * taking the file away before it goes on.
 * usage: trigger_target calls N      send_order(i, 0x1234, 2*i) N times, 20 ms apart
 *        trigger_target thread       a thread born now calls send_order(7, 8, 9) at once
 *        trigger_target plt N        getppid() through the PLT, N times
 *        trigger_target dlopen LIB   dlopen LIB, then dl_order(1, 2, 3) twice
 *        trigger_target exec         exec itself as `calls 2`
 *        trigger_target stop ARG     hybtrace_trigger(ARG)
 *        trigger_target marks N      getppid(); mark 7 (i, 0); getppid(): N times, then
 *                                    hybtrace_trigger(1)
 *        trigger_target until        send_order(i, 0x1234, 2*i) every 5 ms from the start
 *                                    until the file $HT_STOP_FILE exists, then exit
 *        trigger_target fork         a child forked now calls send_order(1, 2, 3) at once;
 *                                    the parent calls nothing
 *        trigger_target forkexec     a child forked now execs this program as `calls 1`
 *                                    (its own "ready", with its own addresses)
 *        trigger_target threads N    N threads, born before "ready", then each calls
 *                                    send_order(i, 5, 6) once
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/wait.h>
#include "hybtrace/hybtrace.h"
#include "hybtrace/mark.h"
#include "workload.h"

__attribute__((noinline)) uint64_t send_order(uint64_t a, uint64_t b, uint64_t c)
{
	__asm__ __volatile__("" : : "r"(a), "r"(b), "r"(c) : "memory");
	return a ^ b ^ c;
}

/*
 * The N functions this image will call (name, address pairs) into the log;
 * then the wait for the test's word that the tracer armed those it traces.
 */
static void ready(int n, ...)
{
	char at[256] = "";
	size_t used = 0;
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n && used < sizeof(at); i++) {
		const char *name = va_arg(ap, const char *);

		used += (size_t)snprintf(at + used, sizeof(at) - used, "%s\"%s\":\"%#lx\"",
					 i ? "," : "", name, (unsigned long)va_arg(ap, uintptr_t));
	}
	va_end(ap);
	wl_log("ready", "\"at\":{%s}", at);
	wl_wait_start();
}

/* The next "ready" waits anew: the test makes the file again. */
static void take_start_away(void)
{
	const char *start = getenv("HT_START_FILE");

	if (start && *start)
		unlink(start);
}

static void calls(int n)
{
	for (int i = 0; i < n; i++) {
		wl_log("call", "\"args\":[%d,%d,%d]", i, 0x1234, 2 * i);
		send_order((uint64_t)i, 0x1234, 2 * (uint64_t)i);
		wl_sleep_ns(20000000ULL);
	}
}

/* Calls while a tracer attaches, until it makes $HT_STOP_FILE. */
static void calls_until_stopped(void)
{
	const char *stop = getenv("HT_STOP_FILE");

	for (int i = 0; stop && !wl_stop_requested(); i++) {
		wl_log("call", "\"args\":[%d,%d,%d]", i, 0x1234, 2 * i);
		send_order((uint64_t)i, 0x1234, 2 * (uint64_t)i);
		wl_sleep_ns(5000000ULL);
	}
	wl_log("stopped", NULL);
}

static void *thread_main(void *arg)
{
	(void)arg;
	wl_log("call", "\"args\":[7,8,9]");
	send_order(7, 8, 9);
	return NULL;
}

/* A child made after the tracer armed the parent: it runs on what it inherited. */
static int fork_and_call(void)
{
	int status;
	pid_t pid;

	ready(1, "send_order", (uintptr_t)send_order);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		wl_log("call", "\"args\":[1,2,3]");
		send_order(1, 2, 3);
		wl_sleep_ns(20000000ULL);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* A child made after the tracer armed the parent runs another image: armed anew. */
static int fork_and_exec(const char *argv0)
{
	int status;
	pid_t pid;

	ready(1, "send_order", (uintptr_t)send_order);
	take_start_away();
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		wl_log("exec", NULL);
		execl("/proc/self/exe", argv0, "calls", "1", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static pthread_barrier_t threads_go;

static void *thread_calls(void *arg)
{
	uint64_t i = (uint64_t)(uintptr_t)arg;

	pthread_barrier_wait(&threads_go);
	wl_log("call", "\"args\":[%llu,5,6]", (unsigned long long)i);
	send_order(i, 5, 6);
	return NULL;
}

/* N threads that a tracer attaching now must each give events of their own. */
static int threads_call(long n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));

	if (!t || n < 1 || pthread_barrier_init(&threads_go, NULL, (unsigned)n + 1))
		return 1;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, thread_calls, (void *)(uintptr_t)i))
			return 1;
	ready(1, "send_order", (uintptr_t)send_order);
	pthread_barrier_wait(&threads_go);
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	wl_sleep_ns(20000000ULL);
	return 0;
}

static int use_library(const char *path)
{
	uint64_t (*fn)(uint64_t, uint64_t, uint64_t);
	void *lib;

	/* A tracer that attaches first (--pid) is told the library is not there yet. */
	ready(0);
	take_start_away();
	lib = dlopen(path, RTLD_NOW);
	if (!lib || !(fn = (uint64_t (*)(uint64_t, uint64_t, uint64_t))dlsym(lib, "dl_order"))) {
		fprintf(stderr, "trigger_target: %s\n", dlerror());
		return 1;
	}
	wl_log("dlopened", NULL);
	/* The tracer sees the new mapping and arms the trigger in it. */
	ready(1, "dl_order", (uintptr_t)fn);
	for (int i = 0; i < 2; i++) {
		wl_log("call", "\"args\":[1,2,3]");
		fn(1, 2, 3);
		wl_sleep_ns(20000000ULL);
	}
	return 0;
}

static void marks(int n)
{
	hybtrace_mark_name(7, "order sent");
	for (int i = 0; i < n; i++) {
		wl_log("before", "\"i\":%d", i);
		getppid();
		hybtrace_mark(7, (uint64_t)i, 0);
		getppid();
		wl_log("after", "\"i\":%d", i);
		wl_sleep_ns(1000000ULL);
	}
	hybtrace_trigger(1);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";
	long n = wl_arg(argc, argv, 2, 3);
	pthread_t t;

	/* The calls begin at once: they are there to be made while the tracer attaches. */
	if (!strcmp(mode, "until")) {
		calls_until_stopped();
		return 0;
	}
	if (!strcmp(mode, "calls")) {
		ready(1, "send_order", (uintptr_t)send_order);
		calls((int)n);
	} else if (!strcmp(mode, "thread")) {
		ready(1, "send_order", (uintptr_t)send_order);
		if (pthread_create(&t, NULL, thread_main, NULL))
			return 1;
		pthread_join(t, NULL);
	} else if (!strcmp(mode, "plt")) {
		ready(1, "getppid", (uintptr_t)getppid);
		for (long i = 0; i < n; i++) {
			wl_log("call", NULL);
			getppid();
			wl_sleep_ns(20000000ULL);
		}
	} else if (!strcmp(mode, "dlopen")) {
		return use_library(argc > 2 ? argv[2] : "libtrig.so");
	} else if (!strcmp(mode, "exec")) {
		ready(1, "send_order", (uintptr_t)send_order);
		/* The new image waits for its own word: its code is armed after the exec. */
		take_start_away();
		wl_log("exec", NULL);
		execl("/proc/self/exe", argv[0], "calls", "2", (char *)NULL);
		return 127;
	} else if (!strcmp(mode, "fork")) {
		return fork_and_call();
	} else if (!strcmp(mode, "forkexec")) {
		return fork_and_exec(argv[0]);
	} else if (!strcmp(mode, "threads")) {
		return threads_call(n);
	} else if (!strcmp(mode, "stop")) {
		ready(1, "hybtrace_trigger", (uintptr_t)hybtrace_trigger);
		wl_log("stop", "\"arg\":%ld", n);
		hybtrace_trigger((uint64_t)n);
		wl_sleep_ns(20000000ULL);
	} else if (!strcmp(mode, "marks")) {
		ready(2, "getppid", (uintptr_t)getppid, "hybtrace_trigger",
		      (uintptr_t)hybtrace_trigger);
		marks((int)n);
		wl_sleep_ns(20000000ULL);
	} else {
		fprintf(stderr, "trigger_target: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
