// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The main thread's stack grown ahead (main_stack.h), as the kernel maps it. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/main_stack.h"

/* The size of the [stack] mapping, from /proc/self/maps. */
static unsigned long stack_mapped(void)
{
	char line[512];
	unsigned long lo, hi, size = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			size = hi - lo;
	if (f)
		fclose(f);
	return size;
}

/*
 * In a fresh process (a child: this one's stack may have grown already), the
 * mapping reaches the reserve at once: the faults below it only read the
 * mmap lock from then on.
 */
TEST(the_stack_is_mapped_ahead)
{
	int status = -1;
	pid_t child = fork();

	if (child == 0) {
		unsigned long before = stack_mapped(), after;
		size_t got = ht_main_stack_reserve(HT_MAIN_STACK_RESERVE);

		after = stack_mapped();
		printf("     [stack] %lu -> %lu kB\n", before / 1024, after / 1024);
		fflush(stdout);
		_exit(got == HT_MAIN_STACK_RESERVE && before < HT_MAIN_STACK_RESERVE / 2 &&
		      after >= HT_MAIN_STACK_RESERVE ? 0 : 1);
	}
	CHECK(child > 0 && waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
