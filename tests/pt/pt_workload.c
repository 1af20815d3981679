// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test only: the program the PT tests single-step (tests/pt/pt_synth.c).
 * argv[1] names a scenario; the trace runs from ht_trace_start() to
 * ht_trace_stop(). Built at test time with
 *   cc -O1 -fno-inline -fno-optimize-sibling-calls -Wl,-z,now ... -lptlib
 * so that calls stay calls, tail calls are the explicit ones below, and
 * PLT calls go straight to the library.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

int lib_work(int x);

volatile int sink;

NOINLINE void ht_trace_start(void)
{
	__asm__ volatile("" ::: "memory");
}

NOINLINE void ht_trace_stop(void)
{
	__asm__ volatile("" ::: "memory");
}

NOINLINE int leaf(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

NOINLINE int fact(int n)
{
	if (n <= 1)
		return 1;
	return n * fact(n - 1);
}

NOINLINE int tail_target(int x)
{
	return leaf(x) + 1;
}

/* A function that ends in a tail call: its jmp replaces its frame. */
__asm__(".text\n"
	".globl tail_entry\n"
	".type tail_entry, @function\n"
	"tail_entry:\n"
	"	addl $1, %edi\n"
	"	jmp tail_target\n"
	".size tail_entry, .-tail_entry\n");
int tail_entry(int x);

NOINLINE int through_pointer(int (*fn)(int), int x)
{
	return fn(x) + 1;
}

/* Straight-line work with loops, recursion, a tail call and an indirect call. */
NOINLINE int basic(void)
{
	int sum = 0;

	for (int i = 0; i < 4; i++)
		sum += leaf(i);
	sum += fact(5);
	sum += tail_entry(3);
	sum += through_pointer(leaf, 2);
	return sum;
}

static jmp_buf jump_buffer;

NOINLINE void lj3(int x)
{
	if (x)
		longjmp(jump_buffer, 1);
	sink++;
}

NOINLINE void lj2(int x)
{
	lj3(x);
	sink++;
}

NOINLINE void lj1(int x)
{
	lj2(x);
	sink++;
}

NOINLINE int do_longjmp(void)
{
	if (setjmp(jump_buffer) == 0) {
		lj1(1);
		return 0;
	}
	return leaf(1);
}

NOINLINE int do_plt(void)
{
	return lib_work(2) + leaf(1);
}

static int devnull = -1;

NOINLINE void sys_b(void)
{
	char c = 'x';

	sink += (int)write(devnull, &c, 1);
	sink += leaf(2);
}

NOINLINE void sys_a(void)
{
	sys_b();
	sink++;
}

NOINLINE int do_vdso(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int)ts.tv_nsec & 1;
}

static void on_signal(int sig)
{
	sink += leaf(sig);
}

NOINLINE void do_signal(void)
{
	kill(getpid(), SIGUSR1);
	sink += leaf(4);
}

static volatile int alarmed;

static void on_alarm(int sig)
{
	alarmed = sig;
	sink += leaf(sig);
}

/*
 * Set by spin's loop, and only there: shared with the process that sends
 * SIGALRM once it sees it, so the signal always lands inside the loop. A
 * timer armed before the loop may fire before it is reached when the
 * program runs slowly (single-stepped, under load), and then the handler
 * nests wherever the thread happened to be.
 */
static volatile int *spinning;

NOINLINE void spin(void)
{
	while (!alarmed) {
		*spinning = 1;
		sink++;
	}
}

/*
 * The sender: forked before the trace starts (an untraced child of a
 * ptrace'd program, so it runs freely), it polls for the loop and signals
 * its parent. It never exits first: its exit would send the parent a
 * SIGCHLD in the middle of the trace. It dies with its parent.
 */
static void start_alarm_sender(void)
{
	pid_t parent = getpid();

	spinning = mmap(NULL, sizeof(*spinning), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			-1, 0);
	if (spinning == MAP_FAILED)
		exit(2);
	if (fork())
		return;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	while (!*spinning)
		usleep(100);
	kill(parent, SIGALRM);
	for (;;)
		pause();
}

NOINLINE void do_async_signal(void)
{
	spin();
	sink += leaf(5);
}

NOINLINE void d5(void)
{
	ht_trace_start();
	sink += leaf(5);
}

NOINLINE void d4(void)
{
	d5();
	sink += leaf(4);
}

NOINLINE void d3(void)
{
	d4();
	sink += leaf(3);
}

NOINLINE void d2(void)
{
	d3();
	sink += leaf(2);
}

NOINLINE void d1(void)
{
	d2();
	sink += leaf(1);
}

static int by_value(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Real library code: qsort calling back, printf's jump tables, malloc, string functions. */
NOINLINE int do_mixed(void)
{
	int values[48];
	char text[256];
	char *copy;
	int sum = 0;

	for (int i = 0; i < 48; i++)
		values[i] = (i * 7919) % 101;
	qsort(values, 48, sizeof(values[0]), by_value);
	for (int i = 0; i < 6; i++)
		sum += snprintf(text, sizeof(text), "%d %s %5.2f %x|", values[i], "word",
				values[i] / 3.0, (unsigned)i);
	copy = malloc(strlen(text) + 1);
	if (copy) {
		memcpy(copy, text, strlen(text) + 1);
		sum += (int)strlen(copy) + (strchr(copy, '|') != NULL);
		free(copy);
	}
	sum += basic() + do_plt();
	sys_a();
	return sum + do_longjmp();
}

/*
 * A data-independent loop, the same path every iteration, for the decode
 * benchmark: hashing in short loops (blocks of several instructions), a
 * call every few dozen instructions, an indirect call, a tail call.
 */
static unsigned bench_data[64];

NOINLINE unsigned mix(unsigned h, int n)
{
	for (int k = 0; k < n; k++) {
		h ^= bench_data[k & 63];
		h *= 16777619u;
		h += h >> 7;
		h ^= (unsigned)k << 3;
	}
	return h;
}

NOINLINE int bench_body(int i)
{
	unsigned h = 2166136261u;

	for (int j = 0; j < 6; j++) {
		h = mix(h, 8);
		if (j & 1)
			h += (unsigned)fact(3);
		else
			h += (unsigned)through_pointer(leaf, j);
	}
	return (int)h + tail_entry(i & 0);
}

NOINLINE void bench_iteration(void)
{
	__asm__ volatile("" ::: "memory");
}

NOINLINE void do_bench(void)
{
	for (int i = 0; i < 3; i++) {
		bench_iteration();
		sink += bench_body(i);
	}
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "basic";
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	devnull = open("/dev/null", O_WRONLY);
	if (!strcmp(what, "async_signal"))
		start_alarm_sender();
	if (!strcmp(what, "deep")) {
		d1();
		ht_trace_stop();
		return 0;
	}
	ht_trace_start();
	if (!strcmp(what, "basic"))
		sink += basic();
	else if (!strcmp(what, "longjmp"))
		sink += do_longjmp();
	else if (!strcmp(what, "plt"))
		sink += do_plt();
	else if (!strcmp(what, "syscall"))
		sys_a();
	else if (!strcmp(what, "vdso"))
		sink += do_vdso();
	else if (!strcmp(what, "signal"))
		do_signal();
	else if (!strcmp(what, "async_signal"))
		do_async_signal();
	else if (!strcmp(what, "mixed"))
		sink += do_mixed();
	else if (!strcmp(what, "bench"))
		do_bench();
	ht_trace_stop();
	return 0;
}
