// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * An epoll server idle between requests, and one slow request. A "server"
 * thread waits in epoll_wait for the requests a "client" thread sends on a
 * socket pair; the client paces them GAP_MS apart in epoll_wait (an event
 * loop's timer) and waits for each reply in epoll_wait. Request SLOW_AT
 * (counted from 0) is slow: the client holds a mutex, spinning so that it
 * never sleeps itself, until HOLD_MS after the server's handler tried to take
 * it, and the handler blocks on it. The
 * main thread waits for both in pthread_join. With "vfork", the main thread
 * first waits in D (uninterruptible) for a CLONE_VFORK child that sleeps
 * VFORK_MS before it exits.
 * usage: epoll_server [REQUESTS [GAP_MS [SLOW_AT [HOLD_MS [vfork [VFORK_MS]]]]]]
 */
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "workload.h"

#define SLOW 's'
#define FAST 'f'

static int requests, slow_at;
static uint64_t gap_ns, hold_ns, vfork_ns;
static int fds[2]; /* [0]: the server's end, [1]: the client's */
static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static atomic_int handler_waits; /* the handler is about to take the mutex */

static int epoll_on(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		perror("epoll");
		exit(1);
	}
	return ep;
}

/* Wait in epoll_wait for EP (TIMEOUT_MS, -1: until ready), logged as EVENT_start/_end. */
static int wait_logged(int ep, int timeout_ms, const char *what)
{
	struct epoll_event ev;
	char start[32], end[32];
	int n;

	snprintf(start, sizeof(start), "%s_start", what);
	snprintf(end, sizeof(end), "%s_end", what);
	wl_log(start, NULL);
	do
		n = epoll_wait(ep, &ev, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	wl_log(end, "\"ready\":%d", n);
	return n;
}

static void *server(void *arg)
{
	int ep = epoll_on(fds[0]);
	char req, reply = 'r';

	(void)arg;
	prctl(PR_SET_NAME, "server");
	wl_log("server_start", NULL);
	for (;;) {
		wait_logged(ep, -1, "idle");
		if (read(fds[0], &req, 1) != 1)
			break; /* the client closed its end: no more work */
		if (req == SLOW) {
			wl_log("lock_wait_start", NULL);
			atomic_store(&handler_waits, 1);
			pthread_mutex_lock(&shared);
			wl_log("lock_acquired", NULL);
			pthread_mutex_unlock(&shared);
		}
		if (write(fds[0], &reply, 1) != 1)
			exit(1);
	}
	close(ep);
	wl_log("server_end", NULL);
	return NULL;
}

static void *client(void *arg)
{
	int ep = epoll_on(fds[1]);
	char reply;

	(void)arg;
	prctl(PR_SET_NAME, "client");
	wl_log("client_start", NULL);
	for (int i = 0; i < requests; i++) {
		char req = i == slow_at ? SLOW : FAST;

		/* Between requests: an event loop's timer, with nothing else to do. */
		wait_logged(ep, (int)(gap_ns / 1000000), "gap");
		if (req == SLOW) {
			pthread_mutex_lock(&shared);
			wl_log("hold_start", NULL);
		}
		wl_log("request", "\"index\":%d,\"slow\":%d", i, req == SLOW);
		if (write(fds[1], &req, 1) != 1)
			exit(1);
		if (req == SLOW) {
			/*
			 * HOLD_MS from the handler's try, however late load makes
			 * it: the handler's wait is the one the tests look for.
			 */
			while (!atomic_load(&handler_waits))
				;
			wl_spin_until(wl_now_ns() + hold_ns);
			wl_log("hold_end", NULL);
			pthread_mutex_unlock(&shared);
		}
		wait_logged(ep, -1, "reply");
		if (read(fds[1], &reply, 1) != 1)
			exit(1);
	}
	close(ep);
	wl_log("client_end", NULL);
	/* The server reads the end of its work. */
	shutdown(fds[1], SHUT_WR);
	return NULL;
}

static int vfork_child(void *arg)
{
	(void)arg;
	wl_sleep_ns(vfork_ns);
	return 0;
}

/* Wait in D for a child that shares our memory until it exits (vfork). */
static void wait_vfork(void)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	int pid, status;

	wl_log("vfork_start", NULL);
	pid = clone(vfork_child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	wl_log("vfork_end", "\"child\":%d", pid);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		exit(1);
}

static void join_logged(pthread_t t, const char *who)
{
	wl_log("join_start", "\"joined\":\"%s\"", who);
	pthread_join(t, NULL);
	wl_log("join_end", "\"joined\":\"%s\"", who);
}

int main(int argc, char **argv)
{
	pthread_t s, c;

	requests = (int)wl_arg(argc, argv, 1, 8);
	gap_ns = (uint64_t)wl_arg(argc, argv, 2, 40) * 1000000ULL;
	slow_at = (int)wl_arg(argc, argv, 3, 4);
	hold_ns = (uint64_t)wl_arg(argc, argv, 4, 25) * 1000000ULL;
	vfork_ns = (uint64_t)wl_arg(argc, argv, 6, 20) * 1000000ULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds)) {
		perror("socketpair");
		return 1;
	}
	wl_wait_start();
	if (argc > 5 && !strcmp(argv[5], "vfork"))
		wait_vfork();
	if (pthread_create(&s, NULL, server, NULL) || pthread_create(&c, NULL, client, NULL))
		return 1;
	join_logged(c, "client");
	join_logged(s, "server");
	return 0;
}
