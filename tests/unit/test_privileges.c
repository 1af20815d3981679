// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What perf events need at each kernel.perf_event_paranoid, decided from an
 * injected level, the kernel's answer to a try without CAP_SYS_ADMIN, and a
 * capability set; and the drop keeping what the session asks beyond the
 * usual set (in a child, which may lose its capabilities).
 */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/privileges.h"

#define BIT(c) (1ULL << (c))

static const uint64_t root_caps = ~0ULL >> (63 - HT_CAP_CHECKPOINT_RESTORE);
static const uint64_t bpf_perfmon =
	BIT(HT_CAP_BPF) | BIT(HT_CAP_PERFMON) | BIT(HT_CAP_SYS_PTRACE) | BIT(HT_CAP_IPC_LOCK);

TEST(perf_access_at_paranoid_2_and_below_is_cap_perfmon)
{
	/* No kernel restricts further there, whatever a try said. */
	for (int level = -1; level <= 2; level++) {
		CHECK(ht_perf_access_decide(level, false, bpf_perfmon) == HT_PERF_AS_USUAL);
		CHECK(ht_perf_access_decide(level, true, bpf_perfmon) == HT_PERF_AS_USUAL);
		CHECK(ht_perf_access_decide(level, true, root_caps) == HT_PERF_AS_USUAL);
	}
}

TEST(perf_access_at_paranoid_3_mainline_is_cap_perfmon)
{
	/* Mainline treats 3 as 2: the try without CAP_SYS_ADMIN opened. */
	CHECK(ht_perf_access_decide(3, false, bpf_perfmon) == HT_PERF_AS_USUAL);
	CHECK(ht_perf_access_decide(3, false, root_caps) == HT_PERF_AS_USUAL);
	CHECK(ht_perf_access_decide(4, false, bpf_perfmon) == HT_PERF_AS_USUAL);
}

TEST(perf_access_at_paranoid_3_debian_needs_cap_sys_admin)
{
	/* Debian's patch refused the try: CAP_SYS_ADMIN is the key, CAP_PERFMON is not. */
	CHECK(ht_perf_access_decide(3, true, root_caps) == HT_PERF_KEEP_ADMIN);
	CHECK(ht_perf_access_decide(3, true, BIT(HT_CAP_SYS_ADMIN)) == HT_PERF_KEEP_ADMIN);
	CHECK(ht_perf_access_decide(3, true, bpf_perfmon) == HT_PERF_NO_ADMIN);
	CHECK(ht_perf_access_decide(3, true, root_caps & ~BIT(HT_CAP_SYS_ADMIN)) ==
	      HT_PERF_NO_ADMIN);
	CHECK(ht_perf_access_decide(3, true, 0) == HT_PERF_NO_ADMIN);
}

TEST(perf_access_is_described_by_what_it_needs)
{
	char buf[256];

	CHECK(strstr(ht_perf_access_describe(HT_PERF_AS_USUAL, 2, buf, sizeof(buf)),
		     "kernel.perf_event_paranoid 2: CAP_PERFMON"));
	CHECK(strstr(ht_perf_access_describe(HT_PERF_AS_USUAL, 3, buf, sizeof(buf)),
		     "treats as 2"));
	ht_perf_access_describe(HT_PERF_KEEP_ADMIN, 3, buf, sizeof(buf));
	CHECK(strstr(buf, "paranoid 3") && strstr(buf, "only for CAP_SYS_ADMIN") &&
	      strstr(buf, "kept"));
	ht_perf_access_describe(HT_PERF_NO_ADMIN, 3, buf, sizeof(buf));
	CHECK(strstr(buf, "only for CAP_SYS_ADMIN") && strstr(buf, "lacks") &&
	      strstr(buf, "kernel.perf_event_paranoid=2") && !strchr(buf, '\n'));
}

/* In a child: drop, keeping ALSO_KEEP too; exit 0 if CAP_SYS_ADMIN stayed, 1 if not. */
static int drop_in_child(uint64_t also_keep)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		uint64_t kept = 0;

		if (ht_drop_capabilities(NULL, NULL, also_keep, &kept))
			_exit(2);
		if (!ht_has_capability(HT_CAP_SYS_ADMIN) || !(kept & BIT(HT_CAP_SYS_ADMIN)))
			_exit(1);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(drop_keeps_cap_sys_admin_only_when_asked)
{
	REQUIRE_ROOT();
	if (!ht_has_capability(HT_CAP_SYS_ADMIN))
		SKIP_TEST("no CAP_SYS_ADMIN to keep");
	CHECK(drop_in_child(BIT(HT_CAP_SYS_ADMIN)) == 0);
	/* Kernels before 5.9 keep it anyway, for /proc/PID/map_files. */
	if (ht_has_capability(HT_CAP_CHECKPOINT_RESTORE))
		CHECK(drop_in_child(0) == 1);
}
