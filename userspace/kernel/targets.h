/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What hybtrace watches: processes named by pid, their children, a cgroup v2
 * subtree, or every task. The command line resolves it; the monitor keeps
 * the set in the kernel (bpf/targets.bpf.h) as processes fork, move and exit.
 */
#ifndef HT_TARGETS_H
#define HT_TARGETS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* Processes --pid may name at once. */
#define HT_MAX_TARGET_PIDS 64

struct ht_target_spec {
	int tgids[HT_MAX_TARGET_PIDS]; /* --pid, resolved to processes, and run's child */
	unsigned int ntgids;
	bool children;			/* forks of a target are targets, to any depth */
	bool cgroup_on;			/* --cgroup or --unit */
	uint64_t cgroup_id;		/* the directory's kernfs id (its inode number) */
	char cgroup_path[PATH_MAX];	/* absolute, under the cgroup v2 mount */
	bool all;			/* every task but hybtrace's own */
	int self_tgid;			/* hybtrace: never a target */
};

#endif
