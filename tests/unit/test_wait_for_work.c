// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Waits for work: which breaches are a thread parked for new work, how they are said and ranked. */
#include "breach_format.h"
#include "check.h"
#include "dump_policy.h"
#include "dumper.h"
#include "syscalls.h"
#include "units.h"
#include "wait_for_work.h"

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
	CHECK(s && strstr(s, "\"wait_for_work\":true"));
	free(s);
	s = text_of(&busy, false);
	CHECK(s && strstr(s, " in read") && !strstr(s, "waiting for work"));
	free(s);
	s = text_of(&busy, true);
	CHECK(s && strstr(s, "\"wait_for_work\":false") && strstr(s, "\"exiting\":false"));
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
