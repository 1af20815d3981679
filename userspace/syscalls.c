// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <string.h>
#include "syscalls.h"

static const char *const syscall_names[] = {
#include "syscall_table.h"
};

#define NR_NAMES ((long)(sizeof(syscall_names) / sizeof(syscall_names[0])))

const char *ht_syscall_name(long nr)
{
	if (nr < 0 || nr >= NR_NAMES)
		return NULL;
	return syscall_names[nr];
}

int ht_syscall_number(const char *name)
{
	for (long nr = 0; nr < NR_NAMES; nr++)
		if (syscall_names[nr] && !strcmp(syscall_names[nr], name))
			return (int)nr;
	return -1;
}
