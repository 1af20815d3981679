// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * An HTTP/1.1 load for a server on 127.0.0.1:PORT: CONNECTIONS threads
 * ("http_load"), each with its own keep-alive connection, one GET PATH at a
 * time for SECONDS (0: until $HT_STOP_FILE exists), after $HT_START_FILE.
 * A connection the server closes (a worker that quits on reload) is opened
 * again. With CPU >= 0 every thread is pinned there.
 * usage: http_load PORT CONNECTIONS SECONDS [CPU [PATH]]
 * Logs: load_start (connected), done (requests, seconds, per_s, reconnects,
 * errors: requests that got no whole 200 answer).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "workload.h"

#define MAX_CONNECTIONS 256

static int port, cpu = -1;
static uint64_t end_ns;
static char request[512];
static size_t request_len;

struct conn {
	pthread_t thread;
	unsigned long long requests, reconnects, errors;
};

static int open_conn(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One request and its whole answer: 1 a 200, 0 another answer, -1 the connection ended. */
static int one_request(int fd)
{
	char buf[4096], *end, *cl;
	size_t have = 0, want;
	int ok, closing;
	ssize_t n;

	if (write(fd, request, request_len) != (ssize_t)request_len)
		return -1;
	/* The header, then Content-Length bytes of body. */
	for (;;) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = 0;
		if ((end = strstr(buf, "\r\n\r\n")))
			break;
		if (have == sizeof(buf) - 1)
			return -1;
	}
	*end = 0;
	ok = !strncmp(buf, "HTTP/1.1 200", 12);
	closing = strcasestr(buf, "\r\nConnection: close") != NULL;
	cl = strcasestr(buf, "\r\nContent-Length:");
	want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
	while (have < want) {
		n = read(fd, buf, sizeof(buf) < want - have ? sizeof(buf) : want - have);
		if (n <= 0)
			return -1;
		have += (size_t)n;
	}
	return closing ? -1 : ok;
}

static void *run_conn(void *arg)
{
	struct conn *c = arg;
	int fd, rc;

	prctl(PR_SET_NAME, "http_load");
	if (cpu >= 0)
		wl_pin(cpu);
	fd = open_conn();
	while (wl_before(end_ns)) {
		if (fd < 0) {
			c->reconnects++;
			fd = open_conn();
			if (fd < 0) {
				c->errors++;
				wl_sleep_ns(1000000);
				continue;
			}
		}
		rc = one_request(fd);
		if (rc < 0) {
			close(fd);
			fd = -1;
			continue;
		}
		c->requests += (unsigned long long)rc;
		c->errors += (unsigned long long)!rc;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct conn conns[MAX_CONNECTIONS];
	unsigned long long requests = 0, reconnects = 0, errors = 0;
	long n = wl_arg(argc, argv, 2, 8), seconds = wl_arg(argc, argv, 3, 5);
	uint64_t start_ns;
	double took_s;

	port = (int)wl_arg(argc, argv, 1, 8080);
	cpu = (int)wl_arg(argc, argv, 4, -1);
	if (n < 1 || n > MAX_CONNECTIONS || port <= 0 || port > 65535) {
		fprintf(stderr, "usage: http_load PORT CONNECTIONS SECONDS [CPU [PATH]]\n");
		return 2;
	}
	request_len = (size_t)snprintf(request, sizeof(request),
				       "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n",
				       argc > 5 ? argv[5] : "/");
	prctl(PR_SET_NAME, "http_load");
	wl_wait_start();
	start_ns = wl_now_ns();
	end_ns = start_ns + (uint64_t)seconds * 1000000000ULL;
	wl_log("load_start", "\"connections\":%ld", n);
	for (long i = 0; i < n; i++)
		if (pthread_create(&conns[i].thread, NULL, run_conn, &conns[i]))
			return 1;
	for (long i = 0; i < n; i++) {
		pthread_join(conns[i].thread, NULL);
		requests += conns[i].requests;
		reconnects += conns[i].reconnects;
		errors += conns[i].errors;
	}
	took_s = (double)(wl_now_ns() - start_ns) / 1e9;
	wl_log("done",
	       "\"requests\":%llu,\"seconds\":%.3f,\"per_s\":%.1f,\"reconnects\":%llu,"
	       "\"errors\":%llu",
	       requests, took_s, (double)requests / took_s, reconnects, errors);
	return 0;
}
