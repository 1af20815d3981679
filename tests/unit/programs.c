// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only, linked into the tests that use it: see programs.h. */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>
#include "programs.h"
#include "sh.h"

/* The directories to remove at exit: a test binary makes one or two. */
static char made_dirs[4][PATH_MAX];
static int nmade_dirs;

static void remove_made_dirs(void)
{
	for (int i = 0; i < nmade_dirs; i++)
		sh("rm -rf '%s'", made_dirs[i]);
}

int prog_make_dir(char *dir, size_t len, const char *template)
{
	snprintf(dir, len, "%s", template);
	if (nmade_dirs >= (int)(sizeof(made_dirs) / sizeof(made_dirs[0])) || !mkdtemp(dir)) {
		dir[0] = 0;
		return -1;
	}
	if (!nmade_dirs)
		atexit(remove_made_dirs);
	snprintf(made_dirs[nmade_dirs++], sizeof(made_dirs[0]), "%s", dir);
	return 0;
}

int prog_write_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static bool holds(const char *folder, const char *file)
{
	char path[PATH_MAX * 3];

	snprintf(path, sizeof(path), "%s/%s", folder, file);
	return access(path, R_OK) == 0;
}

int prog_find_folder(const char *folder, const char *file, char *out, size_t len)
{
	char exe[PATH_MAX], cand[PATH_MAX * 2], found[PATH_MAX];
	ssize_t n;

	if (holds(folder, file) && realpath(folder, found))
		goto found;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	for (int up = 0; up < 5; up++) {
		char *slash = strrchr(exe, '/');

		if (!slash)
			break;
		*slash = 0;
		snprintf(cand, sizeof(cand), "%s/%s", exe, folder);
		if (holds(cand, file) && realpath(cand, found))
			goto found;
	}
	return -1;
found:
	snprintf(out, len, "%s", found);
	return 0;
}

int prog_find_include_dir(const char *header, char *out, size_t len)
{
	return prog_find_folder("include", header, out, len);
}

pid_t prog_start(const char *dir, const char *name, const char *arg, bool fixed, FILE **to,
		 FILE **from)
{
	char path[PATH_MAX];
	int in[2], out[2];
	pid_t pid;

	*to = *from = NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (pipe(in))
		return -1;
	if (pipe(out)) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		if (fixed)
			personality(ADDR_NO_RANDOMIZE);
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		return -1;
	}
	*to = fdopen(in[1], "w");
	*from = fdopen(out[0], "r");
	alarm(60); /* a test that hangs on its child fails instead */
	return pid;
}

void prog_stop(pid_t pid, FILE *to, FILE *from)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (to)
		fclose(to);
	if (from)
		fclose(from);
	alarm(0);
}

uint64_t prog_read_address(FILE *from, const char *key)
{
	char line[256], name[64];
	void *p = NULL;

	if (!fgets(line, sizeof(line), from))
		return 0;
	if (sscanf(line, "%63s %p", name, &p) != 2 || strcmp(name, key))
		return 0;
	return (uint64_t)(uintptr_t)p;
}
