// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/syscalls.h"
#include "kernel/wait_for_work.h"

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

	if ((b->kind != HT_BREACH_OFF_CPU && b->kind != HT_BREACH_SYSCALL) || !name ||
	    (b->flags & HT_BRF_WAITS_ON_NOTICES))
		return false;
	for (size_t i = 0; i < sizeof(waiting_syscalls) / sizeof(waiting_syscalls[0]); i++)
		if (!strcmp(name, waiting_syscalls[i]))
			return true;
	if (!strcmp(name, "io_uring_enter"))
		return b->flags & HT_BRF_URING_GETEVENTS;
	return joined(b, name);
}

static bool is_epoll_wait(const char *name)
{
	return name && !strncmp(name, "epoll_", 6) && strcmp(name, "epoll_ctl") &&
	       strncmp(name, "epoll_create", 12);
}

bool ht_breach_epoll_fd(const struct ht_breach *b, uint32_t *fd)
{
	if ((b->kind != HT_BREACH_OFF_CPU && b->kind != HT_BREACH_SYSCALL) ||
	    !(b->flags & HT_BRF_SYSCALL_FD) || !is_epoll_wait(ht_syscall_name(b->syscall_nr)))
		return false;
	*fd = b->syscall_fd;
	return true;
}

bool ht_fd_link_is_notice(const char *link)
{
	return !strcmp(link, "anon_inode:[eventfd]") || !strcmp(link, "anon_inode:[signalfd]") ||
	       !strncmp(link, "pipe:[", 6);
}

enum ht_wait_set ht_wait_set_of(const char *fdinfo,
				bool (*link_of)(void *ctx, int fd, char *link, size_t len), void *ctx)
{
	enum ht_wait_set kind = HT_WAIT_SET_UNKNOWN;
	char link[64];

	/* fs/eventpoll.c ep_show_fdinfo(): one "tfd: FD events: ..." line per watched fd. */
	for (const char *line = fdinfo; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char *end;
		long fd;

		if (strncmp(line, "tfd:", 4))
			continue;
		fd = strtol(line + 4, &end, 10);
		if (end == line + 4 || fd < 0 || !link_of(ctx, (int)fd, link, sizeof(link)))
			return HT_WAIT_SET_UNKNOWN;
		if (!ht_fd_link_is_notice(link))
			return HT_WAIT_SET_INPUT;
		kind = HT_WAIT_SET_NOTICES;
	}
	return kind;
}

static bool proc_fd_link(void *ctx, int fd, char *link, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/fd/%d", *(const uint32_t *)ctx, fd);
	n = readlink(path, link, len - 1);
	if (n < 0)
		return false;
	link[n] = 0;
	return true;
}

static enum ht_wait_set read_wait_set(uint32_t tgid, uint32_t fd)
{
	char path[64], text[8192];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/fdinfo/%u", tgid, fd);
	f = fopen(path, "re");
	if (!f)
		return HT_WAIT_SET_UNKNOWN;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	/* A set too large to read whole is an event loop's. */
	if (n == sizeof(text) - 1)
		return HT_WAIT_SET_INPUT;
	return ht_wait_set_of(text, proc_fd_link, &tgid);
}

void ht_wait_sets_judge(struct ht_wait_sets *sets, struct ht_breach *b, uint64_t now_ns)
{
	const uint64_t keep_ns = 1000000000ULL;
	size_t i, reuse = 0;
	uint32_t fd;

	if (!ht_breach_epoll_fd(b, &fd))
		return;
	/* The same set, else the slot read longest ago (free ones first). */
	for (i = 0; i < HT_WAIT_SETS_CACHED; i++) {
		if (sets->set[i].read_ns && sets->set[i].tgid == b->tgid &&
		    sets->set[i].fd == fd)
			break;
		if (sets->set[i].read_ns < sets->set[reuse].read_ns)
			reuse = i;
	}
	if (i == HT_WAIT_SETS_CACHED || now_ns - sets->set[i].read_ns >= keep_ns) {
		i = i == HT_WAIT_SETS_CACHED ? reuse : i;
		sets->set[i].tgid = b->tgid;
		sets->set[i].fd = fd;
		sets->set[i].read_ns = now_ns ? now_ns : 1;
		sets->set[i].kind = read_wait_set(b->tgid, fd);
		sets->reads++;
	}
	if (sets->set[i].kind == HT_WAIT_SET_NOTICES)
		b->flags |= HT_BRF_WAITS_ON_NOTICES;
}
