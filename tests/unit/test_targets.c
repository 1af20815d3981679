// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The user half of the target set (userspace/kernel/targets.c): the list of
 * target processes kept from the kernel's events, checked against a bitmap
 * mapped as the monitor's would be, and what the session learns from it.
 */
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "kernel/targets.h"

/* A bitmap like the kernel's target_procs, anonymous memory instead of the map. */
static void fake_map(struct ht_targets *t)
{
	t->procs_bytes = (size_t)HT_TARGET_WORDS * sizeof(uint64_t);
	t->procs = mmap(NULL, t->procs_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	CHECK(t->procs != MAP_FAILED);
}

static void event(struct ht_targets *t, uint32_t kind, int tgid, uint32_t reason, const char *comm)
{
	struct ht_target_event e = {.kind = kind, .tgid = (uint32_t)tgid, .reason = reason};

	snprintf(e.comm, sizeof(e.comm), "%s", comm);
	CHECK(ht_targets_on_event(t, &e, sizeof(e)) == 0);
	/* The kernel's own bitmap changed before the event was sent. */
	if (kind == HT_TARGET_JOINED)
		t->procs[tgid >> 6] |= 1ULL << (tgid & 63);
	else if (kind == HT_TARGET_LEFT)
		t->procs[tgid >> 6] &= ~(1ULL << (tgid & 63));
}

TEST(events_keep_the_list_and_the_last_exit_ends_a_pid_session)
{
	struct ht_target_spec spec = {.tgids = {getpid()}, .ntgids = 1, .children = true};
	struct ht_targets t;

	ht_targets_init(&t, &spec);
	fake_map(&t);
	CHECK(!ht_targets_seed(&t));
	CHECK(t.count == 1 && t.v[0].tgid == getpid() && t.v[0].reason == HT_TARGET_BY_PID);
	CHECK(ht_targets_has(&t, getpid()) && !ht_targets_has(&t, getpid() + 1));
	event(&t, HT_TARGET_JOINED, 4000000, HT_TARGET_BY_FORK, "worker");
	event(&t, HT_TARGET_JOINED, 7, HT_TARGET_BY_FORK, "early");
	CHECK(t.count == 3 && t.v[0].tgid == 7 && t.v[2].tgid == 4000000);
	CHECK(ht_targets_find(&t, 4000000) &&
	      !strcmp(ht_targets_find(&t, 4000000)->comm, "worker"));
	CHECK(ht_targets_has(&t, 4000000));
	/* Past the pid space: not a process, never kept. */
	event(&t, HT_TARGET_JOINED, (int)HT_TARGET_PID_LIMIT, HT_TARGET_BY_FORK, "bad");
	CHECK(t.count == 3 && !ht_targets_has(&t, (int)HT_TARGET_PID_LIMIT));
	event(&t, HT_TARGET_LEFT, getpid(), 0, "");
	CHECK(t.count == 2 && !ht_targets_done(&t, false));
	/* Under run the command's exit ends the session, not the set's. */
	event(&t, HT_TARGET_LEFT, 7, 0, "");
	event(&t, HT_TARGET_LEFT, 4000000, 0, "");
	CHECK(t.count == 0 && ht_targets_done(&t, false) && !ht_targets_done(&t, true));
	CHECK(t.joined == 3 && t.left == 3);
	/* A short record is no event. */
	CHECK(ht_targets_on_event(&t, "x", 1) == 0);
	ht_targets_free(&t);
}

TEST(lost_events_are_made_up_from_the_bitmap)
{
	struct ht_target_spec spec = {.ntgids = 0, .children = true};
	struct ht_targets t;

	ht_targets_init(&t, &spec);
	fake_map(&t);
	event(&t, HT_TARGET_JOINED, 100, HT_TARGET_BY_FORK, "a");
	event(&t, HT_TARGET_JOINED, 200, HT_TARGET_BY_FORK, "b");
	/* 100 left, and the kernel's event of it was dropped. */
	t.procs[100 >> 6] &= ~(1ULL << (100 & 63));
	ht_targets_resync(&t, 0);
	CHECK(t.count == 2);
	ht_targets_resync(&t, 1);
	CHECK(t.count == 1 && t.v[0].tgid == 200 && t.left == 1);
	ht_targets_free(&t);
}

TEST(a_cgroup_session_ends_with_its_cgroup_and_all_never)
{
	struct ht_target_spec spec = {.cgroup_on = true, .cgroup_path = "/sys/fs/cgroup/x"};
	struct ht_target_event gone = {.kind = HT_TARGET_CGROUP_REMOVED};
	struct ht_targets t;

	ht_targets_init(&t, &spec);
	fake_map(&t);
	CHECK(!ht_targets_done(&t, false));
	CHECK(!ht_targets_on_event(&t, &gone, sizeof(gone)));
	CHECK(ht_targets_done(&t, false));
	ht_targets_free(&t);
	spec = (struct ht_target_spec){.all = true, .self_tgid = 42};
	ht_targets_init(&t, &spec);
	CHECK(!ht_targets_done(&t, false));
	CHECK(ht_targets_has(&t, 41) && !ht_targets_has(&t, 42) && !ht_targets_has(&t, 0));
	ht_targets_free(&t);
}

static const char *names(void *ctx, int pid)
{
	(void)ctx;
	return pid == 10 ? "nginx" : pid == 12 ? "worker" : NULL;
}

TEST(the_start_line_names_the_targets)
{
	struct ht_target_spec spec = {.tgids = {10}, .ntgids = 1};
	struct ht_targets t;
	char buf[256];

	ht_targets_init(&t, &spec);
	ht_targets_describe(&t, buf, sizeof(buf), names, NULL);
	CHECK_STR(buf, "pid 10 (nginx)");
	t.spec.tgids[1] = 12;
	t.spec.tgids[2] = 13;
	t.spec.ntgids = 3;
	t.spec.children = true;
	ht_targets_describe(&t, buf, sizeof(buf), names, NULL);
	CHECK_STR(buf, "pids 10 (nginx), 12 (worker), 13 and their children");
	t.spec.cgroup_on = true;
	snprintf(t.spec.cgroup_path, sizeof(t.spec.cgroup_path), "/sys/fs/cgroup/unified/x");
	t.spec.ntgids = 1;
	t.spec.children = false;
	ht_targets_describe(&t, buf, sizeof(buf), names, NULL);
	CHECK_STR(buf, "pid 10 (nginx), and cgroup /sys/fs/cgroup/unified/x");
	t.spec.ntgids = 0;
	ht_targets_describe(&t, buf, sizeof(buf), NULL, NULL);
	CHECK_STR(buf, "cgroup /sys/fs/cgroup/unified/x");
	t.spec.all = true;
	ht_targets_describe(&t, buf, sizeof(buf), NULL, NULL);
	CHECK_STR(buf, "all tasks");
	/* Cut to the buffer, never past it. */
	t.spec.all = false;
	ht_targets_describe(&t, buf, 8, NULL, NULL);
	CHECK_STR(buf, "cgroup ");
	ht_targets_free(&t);
}
