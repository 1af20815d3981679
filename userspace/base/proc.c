// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "base/log.h"
#include "base/proc.h"

int ht_read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

char *ht_read_all(int fd, size_t limit, size_t *len)
{
	size_t cap = 64 * 1024, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		ssize_t r;

		if (n == cap) {
			char *b = cap < limit ? realloc(buf, cap * 2) : NULL;

			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r == 0) {
			*len = n;
			return buf;
		}
		n += r;
	}
	free(buf);
	return NULL;
}

int ht_proc_stat_state(int tid, char *state, unsigned long *flags)
{
	char path[64], buf[1024], *p;
	unsigned long f = 0;
	char s;

	snprintf(path, sizeof(path), "/proc/%d/stat", tid);
	if (ht_read_small_file(path, buf, sizeof(buf)))
		return -1;
	/* comm may hold spaces and parentheses: the fields start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &s, &f) != 2)
		return -1;
	*state = s;
	*flags = f;
	return 0;
}

static int read_tgid(int pid, int *tgid)
{
	char path[64], buf[4096], *line;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (ht_read_small_file(path, buf, sizeof(buf)))
		return -1;
	line = strstr(buf, "\nTgid:");
	if (!line || sscanf(line, "\nTgid: %d", tgid) != 1)
		return -1;
	return 0;
}

int ht_proc_tgid(int tid, int *tgid)
{
	return read_tgid(tid, tgid);
}

int ht_proc_vm_pages(int pid, unsigned long long *pages)
{
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/statm", pid);
	if (ht_read_small_file(path, buf, sizeof(buf)) || sscanf(buf, "%llu", pages) != 1)
		return -1;
	return 0;
}

int ht_proc_start_time(int pid, unsigned long long *ticks)
{
	char path[64], buf[1024], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (ht_read_small_file(path, buf, sizeof(buf)))
		return -1;
	/* Field 22; comm (field 2) may hold spaces and parentheses, so count after the last ')'. */
	p = strrchr(buf, ')');
	/* state ppid pgrp session tty_nr tpgid flags minflt .. stime cutime .. itrealvalue */
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d"
			 " %*d %llu",
			 ticks) != 1)
		return -1;
	return 0;
}

int ht_proc_resolve_target(int pid, int *tgid)
{
	unsigned long flags;
	char state;

	if (pid <= 0)
		return ht_fail("pid %d is not a process: give a pid above 0", pid);
	if (ht_proc_stat_state(pid, &state, &flags)) {
		if (errno == ENOENT || errno == ESRCH)
			return ht_fail("no process with pid %d", pid);
		return ht_fail("cannot read /proc/%d/stat: %s", pid, strerror(errno));
	}
	if (flags & HT_PF_KTHREAD) {
		char comm[64] = "?";

		ht_proc_thread_comm(pid, comm, sizeof(comm));
		return ht_fail("pid %d (%s) is a kernel thread: hybtrace watches user-space "
			       "processes",
			       pid, comm);
	}
	if (state == 'Z' || state == 'X')
		return ht_fail("pid %d has exited", pid);
	if (read_tgid(pid, tgid))
		return ht_fail("pid %d has exited", pid);
	return 0;
}

int ht_parse_pid(const char *s, int *pid)
{
	char *end;
	long v;

	if (!s || !*s)
		return ht_fail("empty pid");
	if (s[0] == '-' && isdigit((unsigned char)s[1]))
		return ht_fail("pid %s is not a process: give a pid above 0", s);
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || !isdigit((unsigned char)*s))
		return ht_fail("pid '%s' is not a number", s);
	if (v <= 0)
		return ht_fail("pid %ld is not a process: give a pid above 0", v);
	if (v > INT_MAX)
		return ht_fail("pid '%s' is out of range", s);
	*pid = (int)v;
	return 0;
}

int ht_parse_pid_list(const char *arg, int *pids, unsigned int max, unsigned int *n)
{
	char item[32];
	const char *p = arg;

	*n = 0;
	if (!arg || !*arg)
		return ht_fail("empty pid");
	for (;;) {
		size_t len = strcspn(p, ",");

		if (!len)
			return ht_fail(
				"empty pid in '%s': give pids separated by commas, like 10,12",
				arg);
		if (*n == max)
			return ht_fail("more than %u pids in '%s'", max, arg);
		if (len >= sizeof(item))
			return ht_fail("pid '%.*s' is out of range", (int)len, p);
		snprintf(item, sizeof(item), "%.*s", (int)len, p);
		if (ht_parse_pid(item, &pids[*n]))
			return -1;
		++*n;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int ht_resolve_target_pids(const int *in, unsigned int n, int *tgids)
{
	for (unsigned int i = 0; i < n; i++) {
		if (ht_proc_resolve_target(in[i], &tgids[i]))
			return -1;
		for (unsigned int j = 0; j < i; j++) {
			if (tgids[j] != tgids[i])
				continue;
			if (in[j] == in[i])
				return ht_fail("pid %d is named twice: give each process once",
					       in[i]);
			if (in[j] == tgids[i] || in[i] == tgids[i])
				return ht_fail(
					"pid %d is a thread of process %d, named too: give each "
					"process once",
					in[j] == tgids[i] ? in[i] : in[j], tgids[i]);
			return ht_fail("pids %d and %d are threads of one process, %d: give each "
				       "process once",
				       in[j], in[i], tgids[i]);
		}
	}
	return 0;
}

int ht_proc_thread_comm(int tid, char *buf, size_t len)
{
	char path[64], tmp[64];
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", tid);
	if (ht_read_small_file(path, tmp, sizeof(tmp)))
		return -1;
	n = strcspn(tmp, "\n");
	tmp[n] = '\0';
	snprintf(buf, len, "%s", tmp);
	return 0;
}

int ht_proc_real_uid(int tgid, unsigned int *uid)
{
	char path[64], buf[2048], *line;

	snprintf(path, sizeof(path), "/proc/%d/status", tgid);
	if (ht_read_small_file(path, buf, sizeof(buf)))
		return ht_fail("cannot read %s: %s", path, strerror(errno));
	line = strstr(buf, "\nUid:");
	if (!line || sscanf(line + 5, "%u", uid) != 1)
		return ht_fail("%s has no Uid line", path);
	return 0;
}

int ht_proc_read_long(const char *path, long *out)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%ld", out) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/* Enough passes for a process that spawns threads as fast as they are listed. */
#define COVER_PASSES 8

/* One pass: how many threads were new, or -1. */
static int cover_pass(int tgid, int (*cover)(void *ctx, int tid), void *ctx, bool gone_ok)
{
	char path[64];
	struct dirent *de;
	int added = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", tgid);
	d = opendir(path);
	if (!d && errno == ENOENT && gone_ok)
		return 0;
	if (!d)
		return ht_fail("cannot list the threads of pid %d: %s", tgid, strerror(errno));
	while ((de = readdir(d))) {
		int tid = atoi(de->d_name);
		int rc = tid > 0 ? cover(ctx, tid) : 0;

		if (rc < 0) {
			closedir(d);
			return -1;
		}
		added += rc;
	}
	closedir(d);
	return added;
}

int ht_proc_cover_threads(int tgid, int (*cover)(void *ctx, int tid), void *ctx, bool gone_ok)
{
	for (int pass = 0; pass < COVER_PASSES; pass++) {
		int added = cover_pass(tgid, cover, ctx, gone_ok);

		if (added <= 0)
			return added;
	}
	return 0;
}

size_t ht_count_dir_entries(const char *path)
{
	DIR *d = opendir(path);
	size_t n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

size_t ht_proc_count_threads(int tgid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", tgid);
	return ht_count_dir_entries(path);
}

/* What ht_fds_room() leaves for everything but per-thread perf events. */
#define FDS_MARGIN 64

size_t ht_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return (size_t)rl.rlim_cur;
}

size_t ht_fds_room(void)
{
	size_t open_now = ht_count_dir_entries("/proc/self/fd");
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX / 2;
	if (rl.rlim_cur <= open_now + FDS_MARGIN)
		return 0;
	return (size_t)rl.rlim_cur - open_now - FDS_MARGIN;
}

int ht_reserve_fds(size_t need, const char *who)
{
	size_t open_now = ht_count_dir_entries("/proc/self/fd");
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return ht_fail("getrlimit: %s", strerror(errno));
	need += open_now + FDS_MARGIN;
	if (rl.rlim_cur >= need)
		return 0;
	rl.rlim_cur = need;
	if (rl.rlim_max < need)
		rl.rlim_max = need;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return ht_fail("%s: %zu file descriptors are needed, more than RLIMIT_NOFILE allows: %s "
			       "(raise it with ulimit -n, or run as root)",
			       who, need, strerror(errno));
	return 0;
}
