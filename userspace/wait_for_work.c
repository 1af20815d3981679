// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "syscalls.h"
#include "wait_for_work.h"

/* The syscalls a thread waits for new work in, whatever it waits on. */
static const char *const waiting_syscalls[] = {
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll",	"ppoll",
	"select",     "pselect6",    "accept",	     "accept4",
};

/* A thread joined: its exit (the kernel's futex wake of its tid word) ended the wait. */
static bool joined(const struct ht_breach *b, const char *name)
{
	return !strcmp(name, "futex") && (b->flags & HT_BRF_JOINED);
}

bool ht_breach_waits_for_work(const struct ht_breach *b)
{
	const char *name = ht_syscall_name(b->syscall_nr);

	if ((b->kind != HT_BREACH_OFF_CPU && b->kind != HT_BREACH_SYSCALL) || !name)
		return false;
	for (size_t i = 0; i < sizeof(waiting_syscalls) / sizeof(waiting_syscalls[0]); i++)
		if (!strcmp(name, waiting_syscalls[i]))
			return true;
	if (!strcmp(name, "io_uring_enter"))
		return b->flags & HT_BRF_URING_GETEVENTS;
	return joined(b, name);
}
