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
#include "programs.h"
#include "pt_programs.h"
#include "sh.h"

char ht_pt_programs_dir[PATH_MAX];
static char src[PATH_MAX];
static int built;

static int has_sources(const char *d)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/pt_workload.c", d);
	return access(path, R_OK) == 0;
}

/* tests/pt, from $HT_PT_SOURCES, the repository root, or from where this binary is. */
static int find_sources(void)
{
	const char *env = getenv("HT_PT_SOURCES");

	if (env && has_sources(env)) {
		snprintf(src, sizeof(src), "%s", env);
		return 0;
	}
	return prog_find_folder("tests/pt", "pt_workload.c", src, sizeof(src));
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
	if (prog_make_dir(ht_pt_programs_dir, sizeof(ht_pt_programs_dir), template))
		return -1;
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

