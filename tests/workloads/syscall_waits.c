// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One syscall that sleeps: a "reader" thread reads a pipe (pipe) or
 * receives with MSG_WAITALL on a socket pair (sock), and a "writer" thread
 * writes one byte after each gap. A pipe's read returns with the first byte;
 * a MSG_WAITALL receive of one byte per gap returns with the last, after
 * sleeping once per gap, all in one syscall. A gap of -1 waits for
 * $HT_STOP_FILE: the receive is still running when the test stops. The
 * writer spins through its gaps, so that the reader's are the only waits.
 * usage: syscall_waits pipe|sock GAP_MS [GAP_MS...]
 * Logs: wait_start (reader, just before the syscall), write (writer, just
 * before each byte, with its gap), asleep_again (writer: the reader took the
 * byte and sleeps for the next, in the same syscall), wait_end (reader, with
 * the bytes read).
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include "workload.h"

#define MAX_GAPS 64

static int fds[2];
static long gaps_ms[MAX_GAPS];
static int ngaps;
static int use_sock;
static volatile int reader_tid;

static void *writer(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "writer");
	/* The first gap counts from the moment the reader is off the CPU. */
	while (!reader_tid || !wl_thread_sleeping(reader_tid))
		wl_sleep_ns(100000);
	for (int i = 0; i < ngaps; i++) {
		if (gaps_ms[i] < 0) {
			const char *stop = getenv("HT_STOP_FILE");

			if (stop && *stop)
				wl_wait_for_file(stop);
		} else {
			wl_spin_until(wl_now_ns() + (uint64_t)gaps_ms[i] * 1000000ULL);
		}
		wl_log("write", "\"gap_ms\":%ld,\"index\":%d", gaps_ms[i], i);
		if (write(fds[1], "x", 1) != 1)
			exit(1);
		if (!use_sock || i == ngaps - 1)
			continue;
		/* The byte is taken once nothing is left to read; then it sleeps again. */
		for (int queued = 1; queued || !wl_thread_sleeping(reader_tid); wl_sleep_ns(100000))
			if (ioctl(fds[0], FIONREAD, &queued))
				exit(1);
		wl_log("asleep_again", "\"index\":%d", i);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char buf[MAX_GAPS];
	pthread_t t;
	ssize_t n;

	if (argc < 3 || (strcmp(argv[1], "pipe") && strcmp(argv[1], "sock")) ||
	    argc - 2 > MAX_GAPS) {
		fprintf(stderr, "usage: syscall_waits pipe|sock GAP_MS [GAP_MS...]\n");
		return 2;
	}
	use_sock = !strcmp(argv[1], "sock");
	ngaps = argc - 2;
	for (int i = 0; i < ngaps; i++)
		gaps_ms[i] = strtol(argv[i + 2], NULL, 0);
	if (use_sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) : pipe(fds))
		return 1;
	prctl(PR_SET_NAME, "reader");
	wl_wait_start();
	if (pthread_create(&t, NULL, writer, NULL))
		return 1;
	wl_log("wait_start", "\"how\":\"%s\"", argv[1]);
	reader_tid = wl_gettid();
	if (use_sock)
		n = recv(fds[0], buf, (size_t)ngaps, MSG_WAITALL);
	else
		n = read(fds[0], buf, 1);
	wl_log("wait_end", "\"bytes\":%zd", n);
	pthread_join(t, NULL);
	return 0;
}
