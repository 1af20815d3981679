// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Waits for work: which breaches are a thread parked for new work, how they are said and ranked. */
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include "kernel/breach_format.h"
#include "base/breach_kinds.h"
#include "check.h"
#include "dump/dump_policy.h"
#include "dump/dumper.h"
#include "base/syscalls.h"
#include "base/units.h"
#include "kernel/wait_for_work.h"

#define WAITER 100
#define JOINED 101

/* An off-CPU breach of WAITER in syscall NAME (NULL: none), 50 ms over a 10 ms threshold. */
static struct ht_breach breach_in(const char *name)
{
	struct ht_breach b = { 0 };

	b.kind = HT_BREACH_OFF_CPU;
	b.start_ns = 1000000000;
	b.end_ns = b.start_ns + 50000000;
	b.tid = WAITER;
	b.tgid = WAITER;
	b.state = 0x1; /* S */
	b.syscall_nr = name ? ht_syscall_number(name) : -1;
	b.wake_source = HT_WAKE_TASK;
	b.waker_tid = JOINED + 1;
	b.waker_tgid = WAITER;
	strcpy(b.comm, "server");
	strcpy(b.waker_comm, "client");
	return b;
}

/* pthread_join: a futex wait ended by one of the process's threads as it exits. */
static struct ht_breach join_of(uint32_t waker_tid, uint32_t waker_tgid)
{
	struct ht_breach b = breach_in("futex");

	b.wake_source = HT_WAKE_TASK;
	b.waker_tid = waker_tid;
	b.waker_tgid = waker_tgid;
	b.flags = HT_BRF_JOINED;
	return b;
}

TEST(event_loops_and_listeners_wait_for_work)
{
	static const char *const waiting[] = { "epoll_wait", "epoll_pwait", "epoll_pwait2",
					      "poll",	    "ppoll",	   "select",
					      "pselect6",   "accept",	   "accept4" };

	for (size_t i = 0; i < sizeof(waiting) / sizeof(waiting[0]); i++) {
		struct ht_breach b = breach_in(waiting[i]);

		CHECK(b.syscall_nr >= 0);
		if (!ht_breach_waits_for_work(&b))
			printf("     %s is not a wait for work\n", waiting[i]);
		CHECK(ht_breach_waits_for_work(&b));
		/* A syscall breach of it is as much a wait for work as its sleep. */
		b.kind = HT_BREACH_SYSCALL;
		CHECK(ht_breach_waits_for_work(&b));
	}
}

TEST(other_waits_are_breaches)
{
	static const char *const working[] = { "read",	  "futex", "clock_nanosleep", "write",
					      "recvfrom", "fsync", "nanosleep",	      "wait4" };
	struct ht_breach b;

	for (size_t i = 0; i < sizeof(working) / sizeof(working[0]); i++) {
		b = breach_in(working[i]);
		CHECK(b.syscall_nr >= 0);
		CHECK(!ht_breach_waits_for_work(&b));
	}
	/* Asleep outside any syscall (a page fault's I/O), or in a number without a name. */
	b = breach_in(NULL);
	CHECK(!ht_breach_waits_for_work(&b));
	b.syscall_nr = HT_MAX_SYSCALLS + 5;
	CHECK(!ht_breach_waits_for_work(&b));
	/* Queued for a CPU after epoll_wait returned: the thread had work. */
	b = breach_in("epoll_wait");
	b.kind = HT_BREACH_RQ_DELAY;
	CHECK(!ht_breach_waits_for_work(&b));
}

TEST(io_uring_waits_for_work_only_when_waiting_for_completions)
{
	struct ht_breach b = breach_in("io_uring_enter");

	CHECK(b.syscall_nr >= 0);
	CHECK(!ht_breach_waits_for_work(&b));
	b.flags = HT_BRF_URING_GETEVENTS;
	CHECK(ht_breach_waits_for_work(&b));
	b.kind = HT_BREACH_SYSCALL;
	CHECK(ht_breach_waits_for_work(&b));
}

TEST(joining_its_own_exiting_thread_waits_for_work)
{
	struct ht_breach b = join_of(JOINED, WAITER);

	CHECK(ht_breach_waits_for_work(&b));
	b.kind = HT_BREACH_SYSCALL;
	CHECK(ht_breach_waits_for_work(&b));
	/* A thread that woke it and lives on: a lock handed over, a condition signalled. */
	b = join_of(JOINED, WAITER);
	b.flags = 0;
	CHECK(!ht_breach_waits_for_work(&b));
	/*
	 * Preempted between the wakeup and the syscall's exit, the syscall
	 * breach no longer names its waker: the kernel's flag still says it.
	 */
	b = join_of(0, 0);
	b.kind = HT_BREACH_SYSCALL;
	b.wake_source = HT_WAKE_NONE;
	CHECK(ht_breach_waits_for_work(&b));
	/* Only a futex wait is a join (the flag in clone would be a vfork, never set). */
	b = join_of(JOINED, WAITER);
	b.syscall_nr = ht_syscall_number("clone");
	CHECK(!ht_breach_waits_for_work(&b));
}

static char *text_of(const struct ht_breach *b, bool json)
{
	struct ht_breach_info bi = { .b = *b, .threshold_ns = 10000000, .since_start_s = 1.5 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (json)
		ht_breach_print_json(f, &bi, NULL);
	else
		ht_breach_print_text(f, &bi);
	fclose(f);
	return buf;
}

TEST(the_live_line_and_json_say_it)
{
	struct ht_breach idle = breach_in("epoll_wait"), busy = breach_in("read"),
			 join = join_of(JOINED, WAITER);
	char *s;

	s = text_of(&idle, false);
	CHECK(s && strstr(s, " state S in epoll_wait (waiting for work)"));
	free(s);
	idle.kind = HT_BREACH_SYSCALL;
	s = text_of(&idle, false);
	CHECK(s && strstr(s, ": epoll_wait (waiting for work) = "));
	free(s);
	s = text_of(&idle, true);
	CHECK(s && strstr(s, "\"wait_for_work\":true") && !strstr(s, "epoll_fd"));
	free(s);
	/* Its set's descriptor, where its first argument was read. */
	idle.flags |= HT_BRF_SYSCALL_FD;
	idle.syscall_fd = 7;
	s = text_of(&idle, true);
	CHECK(s && strstr(s, "\"epoll_fd\":7,\"wait_for_work\":true"));
	free(s);
	busy.flags |= HT_BRF_SYSCALL_FD;
	busy.syscall_fd = 7;
	s = text_of(&busy, false);
	CHECK(s && strstr(s, " in read") && !strstr(s, "waiting for work"));
	free(s);
	s = text_of(&busy, true);
	CHECK(s && strstr(s, "\"wait_for_work\":false") && strstr(s, "\"exiting\":false") &&
	      !strstr(s, "epoll_fd"));
	free(s);
	s = text_of(&join, false);
	CHECK(s && strstr(s, "in futex (waiting for work)") &&
	      strstr(s, "woken by 101 (client) as it exited"));
	free(s);
	s = text_of(&join, true);
	CHECK(s && strstr(s, "\"wait_for_work\":true") && strstr(s, "\"exiting\":true"));
	free(s);
}

static struct ht_dump_job job_of(const struct ht_breach *b)
{
	struct ht_dump_job job = { .has_breach = true, .breach = *b, .threshold_ns = 10000000 };

	snprintf(job.kind, sizeof(job.kind), "%s", ht_breach_kind_name(b->kind));
	job.start_ns = b->start_ns;
	job.end_ns = b->end_ns;
	return job;
}

TEST(a_wait_for_work_ranks_below_every_other_breach)
{
	struct ht_breach idle = breach_in("epoll_wait"), busy = breach_in("futex"),
			 join = join_of(JOINED, WAITER);
	struct ht_dump_job idle_job, busy_job, join_job;

	/* 5 s idle against 11 ms in a lock. */
	idle.end_ns = idle.start_ns + 5000000000ULL;
	busy.end_ns = busy.start_ns + 11000000;
	idle_job = job_of(&idle);
	busy_job = job_of(&busy);
	join_job = job_of(&join);
	CHECK(ht_dump_job_rank(&idle_job).cls == HT_RANK_WAIT_FOR_WORK);
	CHECK(ht_dump_job_rank(&join_job).cls == HT_RANK_WAIT_FOR_WORK);
	CHECK(ht_dump_job_rank(&busy_job).cls == HT_RANK_BREACH);
	CHECK(ht_dump_rank_cmp(ht_dump_job_rank(&busy_job), ht_dump_job_rank(&idle_job)) > 0);
	CHECK(ht_dump_rank_cmp(ht_dump_job_rank(&busy_job), ht_dump_job_rank(&join_job)) > 0);
	/* Among waits for work, the longer is worse still. */
	CHECK(ht_dump_rank_cmp(ht_dump_job_rank(&idle_job), ht_dump_job_rank(&join_job)) > 0);
}

TEST(state_letters_as_the_kernel_reports_them)
{
	CHECK(ht_task_state_letter(0x0) == 'R');
	CHECK(ht_task_state_letter(0x1) == 'S');
	CHECK(ht_task_state_letter(0x2) == 'D');
	CHECK(ht_task_state_letter(0x2 | 0x100) == 'D');  /* TASK_KILLABLE */
	CHECK(ht_task_state_letter(0x2 | 0x400) == 'I');  /* TASK_IDLE */
	CHECK(ht_task_state_letter(0x1 | 0x2000) == 'S'); /* TASK_FREEZABLE */
	CHECK(ht_task_state_letter(0x1000) == 'D');	  /* TASK_RTLOCK_WAIT */
	CHECK(ht_task_state_letter(0x80) == 'X');	  /* TASK_DEAD */
	CHECK(ht_task_state_letter(0x4) == 'T');
	CHECK(ht_task_state_letter(0x8) == 't');
	CHECK(ht_task_state_letter(0x40) == 'P');
	CHECK_EQ_U64(ht_task_state_index(0x2 | 0x100), 2);
	CHECK_EQ_U64(ht_task_state_index(0x1), 1);
}

/* What /proc/PID/fd would say of each descriptor of a made-up set. */
struct fake_links {
	const char *link[8];
};

static bool fake_link(void *ctx, int fd, char *link, size_t len)
{
	const struct fake_links *f = ctx;

	if (fd < 0 || fd >= 8 || !f->link[fd])
		return false;
	snprintf(link, len, "%s", f->link[fd]);
	return true;
}

TEST(an_epoll_set_of_notifications_alone_is_a_latch)
{
	/* As fs/eventpoll.c prints a set: postgres's WaitLatch set, then its client set. */
	const char *latch = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n"
			    "tfd:        3 events:       19 data:                3  pos:0 "
			    "ino:2f8b sdev:e\n"
			    "tfd:        5 events:       19 data:                5  pos:0 "
			    "ino:2f8c sdev:e\n";
	const char *client = "pos:\t0\nflags:\t02000002\n"
			     "tfd:        3 events:       19 data:                3  pos:0 ino:1 sdev:e\n"
			     "tfd:        6 events:       19 data:                6  pos:0 ino:2 sdev:8\n";
	struct fake_links links = { .link = { [3] = "pipe:[12171]", [5] = "anon_inode:[signalfd]",
					     [6] = "socket:[12200]", [7] = "anon_inode:[timerfd]" } };

	CHECK(ht_wait_set_of(latch, fake_link, &links) == HT_WAIT_SET_NOTICES);
	CHECK(ht_wait_set_of(client, fake_link, &links) == HT_WAIT_SET_INPUT);
	/* A timer is an event loop's tick: input. */
	CHECK(ht_wait_set_of("tfd: 7 events: 19\n", fake_link, &links) == HT_WAIT_SET_INPUT);
	/* Nothing watched, or a descriptor gone: not known, the syscall's rule stands. */
	CHECK(ht_wait_set_of("pos:\t0\nflags:\t02\n", fake_link, &links) == HT_WAIT_SET_UNKNOWN);
	CHECK(ht_wait_set_of("tfd: 3 events: 19\ntfd: 4 events: 19\n", fake_link, &links) ==
	      HT_WAIT_SET_UNKNOWN);
	CHECK(ht_wait_set_of("tfd: x\n", fake_link, &links) == HT_WAIT_SET_UNKNOWN);
	CHECK(ht_fd_link_is_notice("anon_inode:[eventfd]"));
	CHECK(!ht_fd_link_is_notice("anon_inode:[eventpoll]"));
	CHECK(!ht_fd_link_is_notice("/dev/pts/0"));
}

/* An epoll_wait breach of this process on EPFD, as the kernel sends it. */
static struct ht_breach epoll_breach_on(int epfd)
{
	struct ht_breach b = breach_in("epoll_wait");

	b.tgid = (uint32_t)getpid();
	b.flags = HT_BRF_SYSCALL_FD;
	b.syscall_fd = (uint32_t)epfd;
	return b;
}

static int epoll_watching(int fd_a, int fd_b)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ev.data.fd = fd_a;
	CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, fd_a, &ev));
	ev.data.fd = fd_b;
	CHECK(!epoll_ctl(ep, EPOLL_CTL_ADD, fd_b, &ev));
	return ep;
}

TEST(the_set_is_read_from_the_kernel_once_a_second)
{
	static struct ht_wait_sets sets;
	int latch = eventfd(0, EFD_CLOEXEC), pm[2], sock[2];
	int latch_set, client_set;
	struct ht_breach b;

	CHECK(latch >= 0 && !pipe2(pm, O_CLOEXEC) &&
	      !socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock));
	latch_set = epoll_watching(latch, pm[0]);
	client_set = epoll_watching(latch, sock[0]);
	/* The kernel's own fdinfo and fd links of this process. */
	b = epoll_breach_on(latch_set);
	ht_wait_sets_judge(&sets, &b, 1000);
	CHECK(b.flags & HT_BRF_WAITS_ON_NOTICES);
	CHECK(!ht_breach_waits_for_work(&b));
	b = epoll_breach_on(client_set);
	ht_wait_sets_judge(&sets, &b, 1000);
	CHECK(!(b.flags & HT_BRF_WAITS_ON_NOTICES));
	CHECK(ht_breach_waits_for_work(&b));
	CHECK_EQ_U64(sets.reads, 2);
	/* A socket joins the latch's set: seen once the second has passed, not before. */
	CHECK(!epoll_ctl(latch_set, EPOLL_CTL_ADD, sock[1],
			 &(struct epoll_event){ .events = EPOLLIN }));
	b = epoll_breach_on(latch_set);
	ht_wait_sets_judge(&sets, &b, 900001000);
	CHECK(b.flags & HT_BRF_WAITS_ON_NOTICES);
	CHECK_EQ_U64(sets.reads, 2);
	b = epoll_breach_on(latch_set);
	ht_wait_sets_judge(&sets, &b, 1000001000);
	CHECK(!(b.flags & HT_BRF_WAITS_ON_NOTICES));
	CHECK_EQ_U64(sets.reads, 3);
	/* Not an epoll wait, or no descriptor from the kernel: nothing is read. */
	b = epoll_breach_on(latch_set);
	b.syscall_nr = ht_syscall_number("poll");
	ht_wait_sets_judge(&sets, &b, 5000000000);
	b = epoll_breach_on(latch_set);
	b.flags = 0;
	ht_wait_sets_judge(&sets, &b, 5000000000);
	CHECK(!(b.flags & HT_BRF_WAITS_ON_NOTICES));
	b = epoll_breach_on(latch_set);
	b.kind = HT_BREACH_RQ_DELAY;
	ht_wait_sets_judge(&sets, &b, 5000000000);
	CHECK_EQ_U64(sets.reads, 3);
	/* A set closed before it is read: unknown, a wait for work by its syscall. */
	b = epoll_breach_on(client_set);
	close(client_set);
	ht_wait_sets_judge(&sets, &b, 5000000000);
	CHECK(ht_breach_waits_for_work(&b));
	close(latch_set);
	close(latch);
	close(pm[0]);
	close(pm[1]);
	close(sock[0]);
	close(sock[1]);
}
