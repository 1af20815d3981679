// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/log.h"
#include "base/partition.h"
#include "kernel/pid_names.h"

size_t ht_pid_name_index(const struct ht_pid_name *v, size_t n, uint32_t pid, bool *found)
{
	size_t lo = HT_PARTITION_POINT(0, n, i, v[i].pid < pid);

	*found = lo < n && v[lo].pid == pid;
	return lo;
}

int ht_pid_name_set(struct ht_pid_name **v, size_t *n, size_t *cap, uint32_t pid,
		    const char *comm, bool replace)
{
	bool found;
	size_t i = ht_pid_name_index(*v, *n, pid, &found);
	struct ht_pid_name *e;

	if (found && !replace)
		return 0;
	if (!found) {
		if (*n >= *cap) {
			size_t want = *cap ? *cap * 2 : 64;
			struct ht_pid_name *p = realloc(*v, want * sizeof(*p));

			if (!p)
				return ht_fail("out of memory keeping task names");
			*v = p;
			*cap = want;
		}
		memmove(&(*v)[i + 1], &(*v)[i], (*n - i) * sizeof(**v));
		(*n)++;
	}
	e = &(*v)[i];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	snprintf(e->comm, sizeof(e->comm), "%s", comm ? comm : "");
	return 0;
}
