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
#include <stddef.h>
#include <stdint.h>
#include "hybtrace/records.h"

/* Processes --pid may name at once. */
#define HT_MAX_TARGET_PIDS 64

struct ht_target_spec {
	int tgids[HT_MAX_TARGET_PIDS]; /* --pid, resolved to processes, and run's child */
	unsigned int ntgids;
	bool children;		    /* forks of a target are targets, to any depth */
	bool cgroup_on;		    /* --cgroup or --unit */
	uint64_t cgroup_id;	    /* the directory's kernfs id (its inode number) */
	char cgroup_path[PATH_MAX]; /* absolute, under the cgroup v2 mount */
	bool all;		    /* every task but hybtrace's own */
	int self_tgid;		    /* hybtrace: never a target */
	/* For make bench: 0, or the one process the programs test by its tgid, as before the set */
	int test_one_tgid;
	/* For make bench: the monitor's programs walk the cgroup at each test instead of the set */
	bool test_cgroup_walk;
};

/* PID_MAX_LIMIT on 64-bit: the bitmaps have a bit for every pid there can be. */
#define HT_TARGET_PID_LIMIT (1U << 22)
#define HT_TARGET_WORDS	    (HT_TARGET_PID_LIMIT / 64)

/* A process of the target set, as the kernel's events (and the seeding) said. */
struct ht_target_proc {
	int tgid;
	uint32_t reason; /* HT_TARGET_BY_* it joined by */
	int parent_tgid; /* HT_TARGET_BY_FORK: who forked it */
	char comm[HT_COMM_LEN + 1];
};

/*
 * The set as user space sees it: the kernel's bitmaps, mapped, and the list
 * of target processes kept from the monitor's target_events ring. Not with
 * --all, which keeps no list.
 */
struct ht_targets {
	struct ht_target_spec spec;
	uint64_t *procs;		  /* target_procs: bit tgid */
	uint64_t *pinned;		  /* pinned_procs (--cgroup only), else NULL */
	size_t procs_bytes, pinned_bytes; /* their mappings */
	struct ht_target_proc *v;	  /* sorted by tgid */
	size_t count, cap;
	uint64_t joined, left; /* processes that joined and left since the start */
	bool cgroup_removed;   /* the watched cgroup is gone */
	uint64_t drops_seen;   /* the kernel's event drops already checked against the bitmap */
	/* Called (by the ring's callback) as a target process runs a new program; may be NULL. */
	void (*on_exec)(void *ctx, int tgid);
	void *on_exec_ctx;
	/* Called (the same way) as a target process leaves the set; may be NULL. */
	void (*on_left)(void *ctx, int tgid);
	void *on_left_ctx;
};

/* Zero T and keep SPEC. */
void ht_targets_init(struct ht_targets *t, const struct ht_target_spec *spec);

/* Map the kernel's bitmaps (PINNED_FD < 0: none). Returns 0, or -1 with ht_fail(). */
int ht_targets_map(struct ht_targets *t, int procs_fd, int pinned_fd);

/*
 * Make TGID a target (REASON HT_TARGET_BY_*): its bit, and with
 * HT_TARGET_BY_PID its pin; in the list. Returns 0, or -1 with ht_fail().
 */
int ht_targets_add(struct ht_targets *t, int tgid, uint32_t reason);

/*
 * The spec's processes into the set: its pids (pinned) and the processes of
 * its cgroup. Run once the programs that keep the set (fork, cgroup
 * moves) are attached, before those that judge: a fork during the walk is
 * the kernel's to add.
 * Returns 0, or -1 with ht_fail().
 */
int ht_targets_seed(struct ht_targets *t);

/*
 * Once every program runs: the spec's pids that exited before the last
 * switch of their process could clear their bits leave the set (their pid
 * could be reused).
 */
void ht_targets_check_seeded(struct ht_targets *t);

/* A struct ht_target_event from the kernel; the ring's callback (CTX: T). */
int ht_targets_on_event(void *ctx, void *data, size_t size);

/* Whether the kernel's bitmap has TGID (with --all: any task but hybtrace's own). */
bool ht_targets_has(const struct ht_targets *t, int tgid);

/* TGID's entry in the list, or NULL. */
const struct ht_target_proc *ht_targets_find(const struct ht_targets *t, int tgid);

/*
 * The kernel lost DROPS events in all: entries whose bit is clear leave the
 * list, so that "the last is gone" still comes. Processes that joined
 * unseen stay out of the list (they are targets all the same).
 */
void ht_targets_resync(struct ht_targets *t, uint64_t drops);

/*
 * Whether the session is over for the set: with --cgroup when the cgroup is
 * removed, else (--pid) when the last target process is gone. Never with
 * --all, nor for `run` (its command's exit ends it).
 */
bool ht_targets_done(const struct ht_targets *t, bool run);

/*
 * What is watched, for the start line: "pids 10, 12 (nginx) and their
 * children", "cgroup /x", "all tasks". COMM_OF names a pid (may be NULL).
 */
void ht_targets_describe(const struct ht_targets *t, char *buf, size_t len,
			 const char *(*comm_of)(void *ctx, int pid), void *ctx);

void ht_targets_free(struct ht_targets *t);

#endif
