// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbolizers per process: made on first use, sharing their tables, bounded
 * by count with the current dump's processes never given away, a process
 * that exited still named, and a gone process a clean failure. The
 * processes are children of this test, forked, so their addresses are its
 * own and its symbol names the truth.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"
#include "symbols/unwind_dwarf.h"

__attribute__((noinline)) int set_test_marker_function(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* A child that waits to be killed; -1 when it cannot be made. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static const char *function_at(struct ht_symbolizer *s, uint64_t addr)
{
	static struct ht_symbol sym;

	if (!s || ht_symbolize(s, addr, &sym) || !sym.function)
		return "";
	return sym.function;
}

static struct ht_symbolizer_set_stats stats(const struct ht_symbolizer_set *set)
{
	struct ht_symbolizer_set_stats st;

	ht_symbolizer_set_get_stats(set, &st);
	return st;
}

static const uint64_t marker = (uint64_t)(uintptr_t)&set_test_marker_function;

TEST(one_symbolizer_per_process_tables_read_once)
{
	struct ht_symbolizer_set *set = ht_symbolizer_set_new(false, 0);
	pid_t a = sleeper(), b = sleeper();
	struct ht_symbolizer *sa, *sb;
	size_t read_once;

	CHECK(set && a > 0 && b > 0);
	if (!set || a <= 0 || b <= 0)
		goto out;
	sa = ht_symbolizer_set_get(set, a);
	CHECK_STR(function_at(sa, marker), "set_test_marker_function");
	read_once = stats(set).elf_files_read;
	CHECK(read_once >= 1);
	sb = ht_symbolizer_set_get(set, b);
	CHECK(sb && sb != sa);
	CHECK_STR(function_at(sb, marker), "set_test_marker_function");
	/* The same program: b's symbols are a's table, read once. */
	CHECK_EQ_U64(stats(set).elf_files_read, read_once);
	CHECK(ht_symbolizer_set_get(set, a) == sa);
	CHECK_EQ_U64(stats(set).processes, 2);
	CHECK_EQ_U64(stats(set).made, 2);
	/* No unwinder without DWARF. */
	CHECK(ht_symbolizer_set_unwinder(set, a) == NULL);
out:
	reap(a);
	reap(b);
	ht_symbolizer_set_free(set);
}

TEST(least_recently_used_gives_way_but_not_the_current_dumps)
{
	struct ht_symbolizer_set *set = ht_symbolizer_set_new(false, 2);
	pid_t p[3] = {sleeper(), sleeper(), sleeper()};
	struct ht_symbolizer *first;

	CHECK(set && p[0] > 0 && p[1] > 0 && p[2] > 0);
	if (!set || p[0] <= 0 || p[1] <= 0 || p[2] <= 0)
		goto out;
	/* One dump with three processes: all three are kept while it lasts. */
	first = ht_symbolizer_set_get(set, p[0]);
	CHECK(first && ht_symbolizer_set_get(set, p[1]) && ht_symbolizer_set_get(set, p[2]));
	CHECK_EQ_U64(stats(set).processes, 3);
	CHECK_EQ_U64(stats(set).evicted, 0);
	CHECK(ht_symbolizer_set_get(set, p[0]) == first);
	/* The next dump asks for p[1] and p[2] only, then for a fourth: p[0], the oldest, goes. */
	ht_symbolizer_set_stale(set);
	CHECK(ht_symbolizer_set_get(set, p[2]) && ht_symbolizer_set_get(set, p[1]));
	CHECK(ht_symbolizer_set_get(set, getpid()) != NULL);
	CHECK_EQ_U64(stats(set).evicted, 1);
	CHECK_EQ_U64(stats(set).processes, 3);
	/* Asked for again, p[0] is made again. */
	ht_symbolizer_set_stale(set);
	CHECK_STR(function_at(ht_symbolizer_set_get(set, p[0]), marker),
		  "set_test_marker_function");
	CHECK_EQ_U64(stats(set).made, 5);
	CHECK(stats(set).processes <= 3);
out:
	for (int i = 0; i < 3; i++)
		reap(p[i]);
	ht_symbolizer_set_free(set);
}

TEST(exited_process_still_named_gone_one_fails_quietly)
{
	struct ht_symbolizer_set *set = ht_symbolizer_set_new(true, 0);
	pid_t a = sleeper(), dead = fork();
	struct ht_symbolizer *sa;
	int exited = a;

	if (dead == 0)
		_exit(0);
	if (dead > 0)
		waitpid(dead, NULL, 0);
	CHECK(set && a > 0 && dead > 0);
	if (!set || a <= 0 || dead <= 0)
		goto out;
	sa = ht_symbolizer_set_get(set, a);
	CHECK(sa && ht_symbolizer_set_unwinder(set, a));
	reap(a);
	a = -1;
	/* Its maps and files were had while it lived: its addresses are still named. */
	ht_symbolizer_set_refresh(set);
	ht_symbolizer_set_stale(set);
	CHECK(ht_symbolizer_set_get(set, exited) == sa);
	CHECK_STR(function_at(sa, marker), "set_test_marker_function");
	CHECK(ht_symbolizer_set_unwinder(set, exited) != NULL);
	/* One never seen alive: no symbolizer, and no word (it is gone). */
	CHECK(ht_symbolizer_set_get(set, dead) == NULL);
	CHECK(ht_symbolizer_set_get(set, dead) == NULL);
	CHECK(ht_symbolizer_set_unwinder(set, dead) == NULL);
	CHECK(ht_symbolizer_set_next_note(set) == NULL);
	CHECK(ht_symbolizer_set_get(set, 0) == NULL && ht_symbolizer_set_get(set, -3) == NULL);
out:
	reap(a);
	ht_symbolizer_set_free(set);
}

/* /proc/PID/exe names PATH: PID has run it (exec). */
static bool runs(pid_t pid, const char *path)
{
	char link[64], exe[4096];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n < 0)
		return false;
	exe[n] = '\0';
	return !strcmp(exe, path);
}

TEST(reread_at_exec_drops_the_old_programs_maps_and_makes_a_new_process_one)
{
	struct ht_symbolizer_set *set = ht_symbolizer_set_new(true, 1);
	char sleep_path[4096] = "/bin/sleep";
	int go[2] = {-1, -1};
	pid_t a = -1, b = sleeper();
	struct ht_symbolizer *sa;

	CHECK(set && b > 0 && !pipe(go));
	if (!set || b <= 0 || go[0] < 0)
		goto out;
	if (!realpath("/bin/sleep", sleep_path))
		CHECK(0);
	a = fork();
	if (a == 0) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) == 1)
			execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(1);
	}
	CHECK(a > 0);
	if (a <= 0)
		goto out;
	/* Before its exec, A is this test's fork: the marker is named. */
	sa = ht_symbolizer_set_get(set, a);
	CHECK_STR(function_at(sa, marker), "set_test_marker_function");
	CHECK(write(go[1], "x", 1) == 1);
	for (int i = 0; i < 5000 && !runs(a, sleep_path); i++)
		usleep(1000);
	CHECK(runs(a, sleep_path));
	/* The maps as they are after the exec: sleep has nothing at the marker's address. */
	ht_symbolizer_set_reread(set, a);
	CHECK(ht_symbolizer_set_get(set, a) == sa);
	CHECK_STR(function_at(sa, marker), "");
	CHECK(ht_symbolizer_set_unwinder(set, a) != NULL);
	/* A process not held is made, but is not of the current dump: it gives way. */
	ht_symbolizer_set_reread(set, b);
	CHECK_EQ_U64(stats(set).made, 2);
	CHECK(ht_symbolizer_set_get(set, getpid()) != NULL);
	CHECK_EQ_U64(stats(set).evicted, 1);
	CHECK(ht_symbolizer_set_get(set, a) == sa);
out:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	reap(a);
	reap(b);
	ht_symbolizer_set_free(set);
}
