// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A backend that waits in epoll_wait two ways, as postgres's do: for its
 * client (a socket beside its latch: a wait for work) and for a lock (its
 * latch, an eventfd, beside the "postmaster death" pipe: a wait on another
 * thread). A "peer" thread sends each request GAP_MS after the backend
 * began waiting for it, and sets the latch HOLD_MS after the backend began
 * waiting on it. Logged: client_wait_start/_end, latch_wait_start/_end.
 * usage: latch_wait [ROUNDS [GAP_MS [HOLD_MS]]]
 */
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include "workload.h"

enum stage { STARTING, CLIENT_WAIT, LATCH_WAIT, DONE };

static int rounds;
static uint64_t gap_ns, hold_ns;
static int latch, postmaster[2], sock[2];
static int backend_tid, stage;

static int epoll_on(int a, int b)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ev.data.fd = a;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev))
		exit(1);
	ev.data.fd = b;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev))
		exit(1);
	return ep;
}

static void wait_logged(int ep, enum stage st, const char *what)
{
	struct epoll_event ev;
	char start[32], end[32];
	int n;

	snprintf(start, sizeof(start), "%s_start", what);
	snprintf(end, sizeof(end), "%s_end", what);
	wl_log(start, NULL);
	__atomic_store_n(&stage, st, __ATOMIC_SEQ_CST);
	do
		n = epoll_wait(ep, &ev, 1, -1);
	while (n < 0 && errno == EINTR);
	wl_log(end, "\"ready\":%d", n);
}

/* The backend is asleep in the wait ST: the delay counts from there. */
static void await_wait(enum stage st)
{
	while (__atomic_load_n(&stage, __ATOMIC_SEQ_CST) != (int)st || !wl_thread_sleeping(backend_tid))
		wl_sleep_ns(100000);
}

static void *peer(void *arg)
{
	uint64_t one = 1;
	char req = 'q';

	(void)arg;
	prctl(PR_SET_NAME, "peer");
	for (int i = 0; i < rounds; i++) {
		await_wait(CLIENT_WAIT);
		wl_sleep_ns(gap_ns);
		if (write(sock[1], &req, 1) != 1)
			exit(1);
		await_wait(LATCH_WAIT);
		wl_sleep_ns(hold_ns);
		if (write(latch, &one, sizeof(one)) != sizeof(one))
			exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int client_set, latch_set;
	uint64_t value;
	pthread_t t;
	char req;

	rounds = (int)wl_arg(argc, argv, 1, 3);
	gap_ns = (uint64_t)wl_arg(argc, argv, 2, 40) * 1000000ULL;
	hold_ns = (uint64_t)wl_arg(argc, argv, 3, 25) * 1000000ULL;
	latch = eventfd(0, EFD_CLOEXEC);
	if (latch < 0 || pipe2(postmaster, O_CLOEXEC) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock))
		return 1;
	client_set = epoll_on(sock[0], latch);
	latch_set = epoll_on(latch, postmaster[0]);
	prctl(PR_SET_NAME, "backend");
	backend_tid = wl_gettid();
	wl_wait_start();
	if (pthread_create(&t, NULL, peer, NULL))
		return 1;
	for (int i = 0; i < rounds; i++) {
		wait_logged(client_set, CLIENT_WAIT, "client_wait");
		if (read(sock[0], &req, 1) != 1)
			return 1;
		wait_logged(latch_set, LATCH_WAIT, "latch_wait");
		if (read(latch, &value, sizeof(value)) != sizeof(value))
			return 1;
	}
	__atomic_store_n(&stage, DONE, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	return 0;
}
