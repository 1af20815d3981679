// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A loopback TCP ping-pong between two processes: this one ("pp_receiver",
 * pinned to CPU 1) sends a request byte and waits in recv for the reply;
 * a forked process ("pp_sender", pinned to CPU 0) reads the request, sleeps
 * GAP_MS, and sends the reply. Loopback runs the receiver's net_rx softirq
 * in the sender's send (local_bh_enable), and that softirq wakes the
 * receiver: each wait ends with a wakeup from softirq context on the
 * sender's behalf.
 *
 * With "hog", a third process ("pp_hog", SCHED_FIFO, pinned to CPU 1)
 * spins from HOG_BEFORE_MS before each reply to HOG_AFTER_MS after it: the
 * receiver is woken while the hog holds its CPU and waits behind it.
 *
 * With "rps" (root), the loopback device's receive packet steering sends
 * every packet to CPU 1 for the run: the sender's send queues it there and
 * raises CPU 1's net_rx with an IPI, and that softirq runs on the IPI's
 * exit, on behalf of no task, in whatever CPU 1 was running. A fourth
 * process ("pp_bystander", pinned to CPU 1) keeps it running something: it
 * spins in user mode 1 ms, then reads /dev/zero for about as long (in the
 * kernel), in turn, so the IPI comes from both. The old setting is put
 * back at the end.
 *
 * Logs: "pingpong_start" (receiver, sender, hog and bystander pids), per
 * round "wait_start"/"wait_end" (receiver), "send" (sender, just before its
 * send), "hog_start"/"hog_end" (hog).
 * usage: tcp_pingpong [ROUNDS [GAP_MS [hog|rps]]]
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "workload.h"

#define HOG_BEFORE_MS 2
#define HOG_AFTER_MS  3

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void full_read(int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	if (n != (ssize_t)len)
		exit(n == 0 ? 0 : 1); /* the other side is gone: the round is over */
}

static void full_write(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die("write");
}

/* Spin for HOG_BEFORE_MS + HOG_AFTER_MS each time a byte comes. */
static void hog(int go_fd)
{
	struct sched_param sp = { .sched_priority = 1 };
	char byte;

	prctl(PR_SET_NAME, "pp_hog");
	wl_pin(1);
	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		die("sched_setscheduler");
	for (;;) {
		full_read(go_fd, &byte, 1);
		wl_log("hog_start", NULL);
		wl_spin_until(wl_now_ns() + (HOG_BEFORE_MS + HOG_AFTER_MS) * 1000000ULL);
		wl_log("hog_end", NULL);
	}
}

#define RPS_CPUS	      "/sys/class/net/lo/queues/rx-0/rps_cpus"
#define BYSTANDER_CHUNK_BYTES (1 << 20)

static char rps_saved[128];
static pid_t rps_owner;

static void rps_write(const char *mask)
{
	FILE *f = fopen(RPS_CPUS, "w");

	if (!f || fputs(mask, f) == EOF || fclose(f))
		die("rps_cpus (needs root and CONFIG_RPS)");
}

/* Put the old steering back however the run ends, but only from the process that set it. */
static void rps_restore(void)
{
	if (getpid() == rps_owner)
		rps_write(rps_saved);
}

static void rps_steer_to_cpu1(void)
{
	FILE *f = fopen(RPS_CPUS, "r");

	if (!f || !fgets(rps_saved, sizeof(rps_saved), f))
		die("rps_cpus (needs CONFIG_RPS)");
	fclose(f);
	rps_owner = getpid();
	rps_write("2");
	atexit(rps_restore);
}

/* Keep CPU 1 busy in user mode and in the kernel, in turn, until killed. */
static void bystander(void)
{
	char *buf = malloc(BYSTANDER_CHUNK_BYTES);
	int fd = open("/dev/zero", O_RDONLY);

	prctl(PR_SET_NAME, "pp_bystander");
	wl_pin(1);
	if (!buf || fd < 0)
		die("bystander");
	for (;;) {
		uint64_t end_ns = wl_now_ns() + 1000000;

		wl_spin_until(end_ns);
		end_ns = wl_now_ns() + 1000000;
		while (wl_now_ns() < end_ns)
			if (read(fd, buf, BYSTANDER_CHUNK_BYTES) < 0)
				die("read /dev/zero");
	}
}

static void sender(int port, uint64_t gap_ns, int go_fd)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	char byte;

	prctl(PR_SET_NAME, "pp_sender");
	wl_pin(0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (;;) {
		full_read(fd, &byte, 1);
		if (go_fd >= 0) {
			wl_sleep_ns(gap_ns > HOG_BEFORE_MS * 1000000ULL
					    ? gap_ns - HOG_BEFORE_MS * 1000000ULL
					    : 0);
			full_write(go_fd, "g", 1);
			wl_sleep_ns(HOG_BEFORE_MS * 1000000ULL);
		} else {
			wl_sleep_ns(gap_ns);
		}
		wl_log("send", NULL);
		full_write(fd, "r", 1);
	}
}

int main(int argc, char **argv)
{
	long rounds = wl_arg(argc, argv, 1, 20);
	uint64_t gap_ns = (uint64_t)wl_arg(argc, argv, 2, 5) * 1000000ULL;
	int with_hog = argc > 3 && !strcmp(argv[3], "hog");
	int with_rps = argc > 3 && !strcmp(argv[3], "rps");
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t addr_len = sizeof(addr);
	int lfd, fd, one = 1, go[2] = { -1, -1 };
	pid_t sender_pid, hog_pid = 0, bystander_pid = 0;
	char byte;

	prctl(PR_SET_NAME, "pp_receiver");
	wl_pin(1);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&addr, &addr_len))
		die("listen");
	if (with_hog) {
		if (pipe(go))
			die("pipe");
		hog_pid = fork();
		if (hog_pid < 0)
			die("fork");
		if (!hog_pid) {
			close(go[1]);
			hog(go[0]);
		}
		close(go[0]);
	}
	if (with_rps) {
		rps_steer_to_cpu1();
		bystander_pid = fork();
		if (bystander_pid < 0)
			die("fork");
		if (!bystander_pid)
			bystander();
	}
	sender_pid = fork();
	if (sender_pid < 0)
		die("fork");
	if (!sender_pid)
		sender(ntohs(addr.sin_port), gap_ns, go[1]);
	if (go[1] >= 0)
		close(go[1]);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	wl_wait_start();
	wl_log("pingpong_start", "\"sender_pid\":%d,\"hog_pid\":%d,\"bystander_pid\":%d",
	       (int)sender_pid, (int)hog_pid, (int)bystander_pid);
	for (long i = 0; wl_more_rounds(i, rounds); i++) {
		full_write(fd, "q", 1);
		wl_log("wait_start", NULL);
		full_read(fd, &byte, 1);
		wl_log("wait_end", NULL);
	}
	wl_log("pingpong_end", NULL);
	close(fd);
	kill(sender_pid, SIGKILL);
	waitpid(sender_pid, NULL, 0);
	if (hog_pid) {
		kill(hog_pid, SIGKILL);
		waitpid(hog_pid, NULL, 0);
	}
	if (bystander_pid) {
		kill(bystander_pid, SIGKILL);
		waitpid(bystander_pid, NULL, 0);
	}
	return 0;
}
