// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* base/proc.c: pids as --pid gives them, and their processes in /proc. */
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "base/proc.h"
#include "kernel/targets.h"

TEST(pids)
{
	int pid = 0;

	CHECK(!ht_parse_pid("1234", &pid));
	CHECK(pid == 1234);
	CHECK(ht_parse_pid("0", &pid) == -1);
	CHECK(ht_parse_pid("-5", &pid) == -1);
	CHECK(ht_parse_pid("abc", &pid) == -1);
	CHECK(ht_parse_pid("12x", &pid) == -1);
	CHECK(ht_parse_pid("", &pid) == -1);
	CHECK(ht_parse_pid("99999999999", &pid) == -1);
	CHECK(ht_parse_pid("+5", &pid) == -1);
	CHECK(ht_parse_pid(" 5", &pid) == -1);
}

TEST(pid_lists)
{
	int pids[HT_MAX_TARGET_PIDS];
	unsigned int n = 99;
	char many[HT_MAX_TARGET_PIDS * 4 + 8] = "";

	CHECK(!ht_parse_pid_list("10,12,14", pids, HT_MAX_TARGET_PIDS, &n));
	CHECK(n == 3 && pids[0] == 10 && pids[1] == 12 && pids[2] == 14);
	CHECK(!ht_parse_pid_list("7", pids, HT_MAX_TARGET_PIDS, &n));
	CHECK(n == 1 && pids[0] == 7);
	/* The list as given: the same pid twice is for the resolution to name. */
	CHECK(!ht_parse_pid_list("7,7", pids, HT_MAX_TARGET_PIDS, &n));
	CHECK(n == 2);
	for (int i = 1; i <= HT_MAX_TARGET_PIDS; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i > 1 ? "," : "",
			 i);
	CHECK(!ht_parse_pid_list(many, pids, HT_MAX_TARGET_PIDS, &n));
	CHECK(n == HT_MAX_TARGET_PIDS && pids[HT_MAX_TARGET_PIDS - 1] == HT_MAX_TARGET_PIDS);
	strcat(many, ",99");
	CHECK(ht_parse_pid_list(many, pids, HT_MAX_TARGET_PIDS, &n) == -1);
	CHECK(strstr(ht_last_error(), "more than 64 pids") != NULL);
}

TEST(pid_lists_rejected)
{
	static const struct {
		const char *arg, *want;
	} bad[] = {
		{ "", "empty pid" },
		{ ",", "empty pid in ','" },
		{ "1,", "empty pid in '1,'" },
		{ ",1", "empty pid" },
		{ "1,,2", "empty pid in '1,,2'" },
		{ "1,x", "pid 'x' is not a number" },
		{ "1, 2", "pid ' 2' is not a number" },
		{ "1,0", "pid 0 is not a process" },
		{ "1,-2", "pid -2 is not a process" },
		{ "1;2", "not a number" },
		{ "1,99999999999999999999999999999999999999", "out of range" },
	};
	int pids[4];
	unsigned int n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = ht_parse_pid_list(bad[i].arg, pids, 4, &n);

		if (rc != -1 || !strstr(ht_last_error(), bad[i].want))
			printf("     '%s': rc %d, '%s'\n", bad[i].arg, rc, ht_last_error());
		CHECK(rc == -1);
		CHECK(strstr(ht_last_error(), bad[i].want) != NULL);
	}
	CHECK(ht_parse_pid_list(NULL, pids, 4, &n) == -1);
}

static int tid_pipe[2];

static void *report_tid_and_wait(void *arg)
{
	int tid = (int)syscall(SYS_gettid);

	(void)arg;
	if (write(tid_pipe[1], &tid, sizeof(tid)) != sizeof(tid))
		_exit(1);
	pause();
	return NULL;
}

/*
 * A child process with two more threads, which it reports: tids[0] is the
 * process, tids[1] and tids[2] its threads. Returns its pid or -1.
 */
static pid_t child_with_threads(int tids[3])
{
	pid_t pid;

	if (pipe(tid_pipe))
		return -1;
	pid = fork();
	if (pid == 0) {
		pthread_t t;

		for (int i = 0; i < 2; i++)
			if (pthread_create(&t, NULL, report_tid_and_wait, NULL))
				_exit(1);
		pause();
		_exit(0);
	}
	close(tid_pipe[1]);
	tids[0] = (int)pid;
	for (int i = 1; i < 3; i++)
		if (pid > 0 && read(tid_pipe[0], &tids[i], sizeof(int)) != sizeof(int))
			tids[i] = -1;
	close(tid_pipe[0]);
	return pid;
}

/* Whether resolving IN (N pids) is refused with a message holding WANT and WANT2. */
static int refused(const int *in, unsigned int n, const char *want, const char *want2)
{
	int tgids[8];

	if (ht_resolve_target_pids(in, n, tgids) == 0)
		return 0;
	if (!strstr(ht_last_error(), want) || (want2 && !strstr(ht_last_error(), want2))) {
		printf("     '%s' lacks '%s'\n", ht_last_error(), want);
		return 0;
	}
	return 1;
}

TEST(target_pids_resolved)
{
	char twice[64], thread_of[96], two_threads[96];
	int tids[3], tgids[3];
	pid_t child = child_with_threads(tids);

	CHECK(child > 0 && tids[1] > 0 && tids[2] > 0);
	if (child <= 0 || tids[1] <= 0 || tids[2] <= 0)
		goto out;
	/* A process, and a thread id that names its process. */
	CHECK(!ht_resolve_target_pids(tids, 1, tgids));
	CHECK(tgids[0] == child);
	CHECK(!ht_resolve_target_pids(&tids[1], 1, tgids));
	CHECK(tgids[0] == child);
	{
		int two[2] = { (int)getpid(), (int)child };

		CHECK(!ht_resolve_target_pids(two, 2, tgids));
		CHECK(tgids[0] == getpid() && tgids[1] == child);
	}
	/* One process named twice, however: both are named in the message. */
	snprintf(twice, sizeof(twice), "pid %d is named twice", (int)child);
	snprintf(thread_of, sizeof(thread_of), "pid %d is a thread of process %d", tids[1],
		 (int)child);
	snprintf(two_threads, sizeof(two_threads), "pids %d and %d are threads of one process, %d",
		 tids[1], tids[2], (int)child);
	{
		int same[2] = { tids[0], tids[0] };
		int proc_thread[2] = { tids[0], tids[1] };
		int thread_proc[3] = { (int)getpid(), tids[1], tids[0] };
		int threads[2] = { tids[1], tids[2] };

		CHECK(refused(same, 2, twice, NULL));
		CHECK(refused(proc_thread, 2, thread_of, NULL));
		CHECK(refused(thread_proc, 3, thread_of, NULL));
		CHECK(refused(threads, 2, two_threads, NULL));
	}
out:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
}

TEST(target_pids_refused)
{
	char exited[64];
	int kthreadd[2] = { (int)getpid(), 2 };
	int dead[1], zombie[1];
	pid_t pid = fork();

	/* A kernel thread is named: pid 2 is kthreadd. */
	CHECK(refused(kthreadd, 2, "pid 2 (kthreadd) is a kernel thread", NULL));
	/* A process that has exited and been reaped. */
	if (pid == 0)
		_exit(0);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	waitpid(pid, NULL, 0);
	dead[0] = (int)pid;
	/* Unless its pid was taken again meanwhile. */
	if (kill(pid, 0) == -1)
		CHECK(refused(dead, 1, "no process with pid", NULL));
	/* Exited, not yet reaped. */
	pid = fork();
	if (pid == 0)
		_exit(0);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	zombie[0] = (int)pid;
	for (int i = 0; i < 1000; i++) {
		char state = 0;
		unsigned long flags;

		if (ht_proc_stat_state(pid, &state, &flags) || state == 'Z')
			break;
		usleep(1000);
	}
	snprintf(exited, sizeof(exited), "pid %d has exited", (int)pid);
	CHECK(refused(zombie, 1, exited, NULL));
	waitpid(pid, NULL, 0);
}

TEST(thread_to_process_and_start_time)
{
	unsigned long long mine = 0, its = 0, again = 0;
	char path[64], buf[1024], *field;
	int tids[3], tgid = 0;
	pid_t child = child_with_threads(tids), dead;

	CHECK(child > 0 && tids[1] > 0);
	if (child <= 0 || tids[1] <= 0)
		goto out;
	CHECK(!ht_proc_tgid(tids[1], &tgid) && tgid == child);
	CHECK(!ht_proc_tgid(child, &tgid) && tgid == child);
	/* Field 22 of /proc/PID/stat, counted by spaces after the comm's ')'. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)getpid());
	CHECK(!ht_read_small_file(path, buf, sizeof(buf)));
	field = strrchr(buf, ')');
	for (int i = 0; field && i < 20; i++)
		field = strchr(field + 1, ' ');
	CHECK(field && !ht_proc_start_time(getpid(), &mine));
	CHECK(field && mine == strtoull(field + 1, NULL, 10));
	CHECK(!ht_proc_start_time(child, &its) && its >= mine);
	CHECK(!ht_proc_start_time(child, &again) && again == its);
out:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	/* A process that is gone has neither. */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	CHECK(ht_proc_tgid(dead, &tgid) == -1);
	CHECK(ht_proc_start_time(dead, &its) == -1);
}
