// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Off-CPU with a known waker: a "blocked" thread waits on a futex (or reads a
 * pipe) until a "releaser" thread wakes it after a delay. With "thread", the
 * blocked thread is not the main one but a thread of its own.
 * usage: offcpu_wake futex|pipe [DELAY_MS [ROUNDS [thread]]]
 */
#include <linux/futex.h>
#include "workload.h"

static int futex_word;
static int pipe_fds[2];
static int use_pipe;
static uint64_t delay_ns;
static int blocked_tid;

static void *releaser(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "releaser");
	/* The delay counts from the moment the blocked thread is off the CPU. */
	while (!wl_thread_sleeping(blocked_tid))
		wl_sleep_ns(100000);
	wl_log("blocked_seen_asleep", NULL);
	wl_sleep_ns(delay_ns);
	wl_log("release", NULL);
	if (use_pipe) {
		if (write(pipe_fds[1], "x", 1) != 1)
			exit(1);
	} else {
		__atomic_store_n(&futex_word, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static void block(void)
{
	char byte;

	if (use_pipe) {
		if (read(pipe_fds[0], &byte, 1) != 1)
			exit(1);
		return;
	}
	while (!__atomic_load_n(&futex_word, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

static const char *how;
static int rounds;

static void *block_rounds(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "blocked");
	blocked_tid = wl_gettid();
	for (int i = 0; i < rounds; i++) {
		pthread_t t;

		futex_word = 0;
		if (pthread_create(&t, NULL, releaser, NULL))
			exit(1);
		wl_log("block_start", "\"how\":\"%s\"", how);
		block();
		wl_log("block_end", NULL);
		pthread_join(t, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc < 2 || (strcmp(argv[1], "futex") && strcmp(argv[1], "pipe"))) {
		fprintf(stderr, "usage: offcpu_wake futex|pipe [DELAY_MS [ROUNDS [thread]]]\n");
		return 2;
	}
	how = argv[1];
	use_pipe = !strcmp(how, "pipe");
	delay_ns = (uint64_t)wl_arg(argc, argv, 2, 20) * 1000000ULL;
	rounds = (int)wl_arg(argc, argv, 3, 1);
	if (use_pipe && pipe(pipe_fds))
		return 1;
	prctl(PR_SET_NAME, "blocked");
	wl_wait_start();
	if (argc > 4 && !strcmp(argv[4], "thread")) {
		if (pthread_create(&t, NULL, block_rounds, NULL))
			return 1;
		pthread_join(t, NULL);
		return 0;
	}
	block_rounds(NULL);
	return 0;
}
