// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "base/syscalls.h"

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

/*
 * The kernel's own errnos (include/linux/errno.h): sys_exit sees them, user
 * space gets EINTR, a restart or another errno instead.
 */
static const struct {
	const char *name, *meaning;
} kernel_errnos[] = {
	{ "ERESTARTSYS", "interrupted by a signal, restarted if its handler has SA_RESTART" },
	{ "ERESTARTNOINTR", "interrupted by a signal, always restarted" },
	{ "ERESTARTNOHAND", "interrupted by a signal, restarted unless a handler ran" },
	{ "ENOIOCTLCMD", "no such ioctl command" },
	{ "ERESTART_RESTARTBLOCK", "interrupted by a signal, resumed by restart_syscall" },
	{ "EPROBE_DEFER", "the driver asks to probe again later" },
	{ "EOPENSTALE", "open found a stale dentry" },
	{ "ENOPARAM", "parameter not supported" },
};

#define KERNEL_ERRNO_FIRST 512
#define NR_KERNEL_ERRNOS   ((int64_t)(sizeof(kernel_errnos) / sizeof(kernel_errnos[0])))
/* As the kernel's IS_ERR_VALUE(): returns from -4095 to -1 are errors. */
#define MAX_ERRNO 4095

static const char *kernel_errno_meaning(int64_t ret)
{
	int64_t i = -ret - KERNEL_ERRNO_FIRST;

	return i >= 0 && i < NR_KERNEL_ERRNOS ? kernel_errnos[i].meaning : NULL;
}

const char *ht_syscall_ret_name(int64_t ret)
{
	int64_t i = -ret - KERNEL_ERRNO_FIRST;

	if (ret >= 0 || ret < -MAX_ERRNO)
		return NULL;
	if (i >= 0 && i < NR_KERNEL_ERRNOS)
		return kernel_errnos[i].name;
	return strerrorname_np((int)-ret);
}

const char *ht_syscall_ret_format(int64_t ret, char *buf, size_t len)
{
	const char *name = ht_syscall_ret_name(ret), *meaning = kernel_errno_meaning(ret);

	if (name && meaning)
		snprintf(buf, len, "%" PRId64 " (%s: %s)", ret, name, meaning);
	else if (name)
		snprintf(buf, len, "%" PRId64 " (%s)", ret, name);
	else
		snprintf(buf, len, "%" PRId64, ret);
	return buf;
}
