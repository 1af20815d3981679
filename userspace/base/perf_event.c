// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/perf_event.h"

int ht_perf_event_open(struct perf_event_attr *attr, int pid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int ht_perf_event_open_cgroup(struct perf_event_attr *attr, int cgroup_fd, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, cgroup_fd, cpu, -1,
			    PERF_FLAG_FD_CLOEXEC | PERF_FLAG_PID_CGROUP);
}

size_t ht_perf_ring_data_bytes(size_t want_bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 1;

	while (pages * page < want_bytes)
		pages *= 2;
	return pages * page;
}

void *ht_perf_ring_map(int fd, size_t data_bytes, bool writable)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *base = mmap(NULL, data_bytes + page, writable ? PROT_READ | PROT_WRITE : PROT_READ,
			  MAP_SHARED, fd, 0);

	return base == MAP_FAILED ? NULL : base;
}
