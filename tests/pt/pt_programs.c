// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test only: the PT test programs (in tests/pt) built at run time into a
 * temporary directory, for the unit tests that single-step them: see
 * pt_programs.h. SRC is where their sources were found.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pt_programs.h"
#include "sh.h"

char ht_pt_programs_dir[PATH_MAX];
static char src[PATH_MAX];
static int built;

static void remove_dir(void)
{
	if (ht_pt_programs_dir[0])
		sh("rm -rf '%s'", ht_pt_programs_dir);
}

static int has_sources(const char *d)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/pt_workload.c", d);
	return access(path, R_OK) == 0;
}

/* tests/pt, from the repository root, or from where this binary is (build/[asan/]tests/). */
static int find_sources(void)
{
	char exe[PATH_MAX];
	const char *env = getenv("HT_PT_SOURCES");
	ssize_t n;

	if (env && has_sources(env)) {
		snprintf(src, sizeof(src), "%s", env);
		return 0;
	}
	if (has_sources("tests/pt") && realpath("tests/pt", src))
		return 0;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	for (int up = 0; up < 4; up++) {
		char *slash = strrchr(exe, '/');
		char cand[PATH_MAX + 16];

		if (!slash)
			break;
		*slash = 0;
		snprintf(cand, sizeof(cand), "%s/tests/pt", exe);
		if (has_sources(cand) && realpath(cand, src))
			return 0;
	}
	return -1;
}

#define PROGRAM_CFLAGS "-O1 -g -fno-inline -fno-optimize-sibling-calls -fno-omit-frame-pointer"

int ht_pt_programs_build(const char *template, int with_ocaml)
{
	if (built)
		return built > 0 ? 0 : -1;
	built = -1;
	if (find_sources()) {
		printf("     cannot find tests/pt (set HT_PT_SOURCES)\n");
		return -1;
	}
	snprintf(ht_pt_programs_dir, sizeof(ht_pt_programs_dir), "%s", template);
	if (!mkdtemp(ht_pt_programs_dir))
		return -1;
	atexit(remove_dir);
	if (sh("cd '%s' && cc " PROGRAM_CFLAGS " -shared -fPIC -o libptlib.so '%s/pt_lib.c'"
	       " && cc " PROGRAM_CFLAGS " -Wl,-z,now -o pt_workload '%s/pt_workload.c'"
	       " -L. -lptlib -Wl,-rpath,'%s'",
	       ht_pt_programs_dir, src, src, ht_pt_programs_dir))
		return -1;
	if (with_ocaml &&
	    sh("cd '%s' && cc " PROGRAM_CFLAGS " -o ocaml_workload '%s/ocaml_workload.c'",
	       ht_pt_programs_dir, src))
		return -1;
	built = 1;
	return 0;
}

