/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Opening perf events and mapping their rings: one copy for every source and trigger. */
#ifndef HT_PERF_EVENT_H
#define HT_PERF_EVENT_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * perf_event_open(2) for PID on CPU (either may be -1), alone in its group,
 * closed on exec. Returns the fd, or -1 with errno set.
 */
int ht_perf_event_open(struct perf_event_attr *attr, int pid, int cpu);

/*
 * The same for the tasks of the cgroup whose directory CGROUP_FD is open, on
 * CPU (PERF_FLAG_PID_CGROUP: counted while one of them runs there).
 */
int ht_perf_event_open_cgroup(struct perf_event_attr *attr, int cgroup_fd, int cpu);

/* The data size of a ring holding at least WANT_BYTES: a power-of-two count of pages. */
size_t ht_perf_ring_data_bytes(size_t want_bytes);

/*
 * Map the ring of event FD: the metadata page, then DATA_BYTES of data (a
 * power-of-two count of pages). Read-only for a ring the kernel overwrites
 * (write_backward); writable for a forward one, whose reader moves
 * data_tail. Returns the mapping, of DATA_BYTES plus a page, or NULL with
 * errno set.
 */
void *ht_perf_ring_map(int fd, size_t data_bytes, bool writable);

#endif /* HT_PERF_EVENT_H */
