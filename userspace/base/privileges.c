// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/log.h"
#include "base/perf_event.h"
#include "base/privileges.h"
#include "base/proc.h"

#define CAP_BIT(c) (1ULL << (c))

static int read_caps(uint64_t *effective, uint64_t *permitted)
{
	struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &header, data))
		return -1;
	*effective = data[0].effective | (uint64_t)data[1].effective << 32;
	*permitted = data[0].permitted | (uint64_t)data[1].permitted << 32;
	return 0;
}

/* This thread's sets become EFFECTIVE and PERMITTED; nothing inheritable. */
static int write_caps(uint64_t effective, uint64_t permitted)
{
	struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {
		{ (uint32_t)effective, (uint32_t)permitted, 0 },
		{ (uint32_t)(effective >> 32), (uint32_t)(permitted >> 32), 0 },
	};

	return syscall(SYS_capset, &header, data) ? -1 : 0;
}

bool ht_has_capability(int cap)
{
	uint64_t effective, permitted;

	return !read_caps(&effective, &permitted) && (effective & CAP_BIT(cap));
}

int ht_check_monitor_privileges(void)
{
	if (ht_has_capability(HT_CAP_SYS_ADMIN))
		return 0;
	if (!ht_has_capability(HT_CAP_BPF))
		return ht_fail("missing capability CAP_BPF: run as root (sudo hybtrace ...) "
			       "or grant CAP_BPF and CAP_PERFMON");
	if (!ht_has_capability(HT_CAP_PERFMON))
		return ht_fail("missing capability CAP_PERFMON: run as root (sudo hybtrace ...) "
			       "or grant CAP_BPF and CAP_PERFMON");
	return 0;
}

int ht_check_target_privileges(int tgid)
{
	unsigned int uid;

	if (ht_has_capability(HT_CAP_SYS_PTRACE))
		return 0;
	if (ht_proc_real_uid(tgid, &uid))
		return -1;
	if (uid == geteuid())
		return 0;
	return ht_fail("missing capability CAP_SYS_PTRACE: process %d belongs to uid %u, "
		       "and watching another user's process needs it", tgid, uid);
}

static int last_cap(void)
{
	long n;

	if (ht_proc_read_long("/proc/sys/kernel/cap_last_cap", &n) || n < 0 || n >= 64)
		return 40;
	return (int)n;
}

int ht_perf_paranoid(void)
{
	long n;

	if (ht_proc_read_long("/proc/sys/kernel/perf_event_paranoid", &n))
		return 2;
	return n < -1 ? -1 : n > 100 ? 100 : (int)n;
}

enum ht_perf_access ht_perf_access_decide(int paranoid, bool refused, uint64_t effective)
{
	if (paranoid <= 2 || !refused)
		return HT_PERF_AS_USUAL;
	return effective & CAP_BIT(HT_CAP_SYS_ADMIN) ? HT_PERF_KEEP_ADMIN : HT_PERF_NO_ADMIN;
}

/*
 * Whether the kernel refuses this thread a perf event on itself without
 * CAP_SYS_ADMIN: a disabled dummy event, which any caller may open at
 * paranoid 2 and below. CAP_SYS_ADMIN leaves the effective set for the try
 * and comes back (it stays permitted).
 */
static bool refused_without_admin(void)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_DUMMY,
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	uint64_t effective, permitted;
	bool admin, refused;
	int fd, err;

	if (read_caps(&effective, &permitted))
		return false;
	admin = effective & CAP_BIT(HT_CAP_SYS_ADMIN);
	if (admin && write_caps(effective & ~CAP_BIT(HT_CAP_SYS_ADMIN), permitted))
		return false;
	fd = ht_perf_event_open(&a, 0, -1);
	err = errno;
	if (fd >= 0)
		close(fd);
	refused = fd < 0 && (err == EACCES || err == EPERM);
	if (admin && write_caps(effective, permitted))
		ht_warn("cannot take CAP_SYS_ADMIN back: %s", strerror(errno));
	return refused;
}

enum ht_perf_access ht_perf_access(int *paranoid)
{
	int level = ht_perf_paranoid();
	uint64_t effective = 0, permitted;

	if (paranoid)
		*paranoid = level;
	/* Nothing to find out where no kernel asks more than CAP_PERFMON. */
	if (level <= 2)
		return HT_PERF_AS_USUAL;
	read_caps(&effective, &permitted);
	return ht_perf_access_decide(level, refused_without_admin(), effective);
}

const char *ht_perf_access_describe(enum ht_perf_access a, int paranoid, char *buf, size_t len)
{
	switch (a) {
	case HT_PERF_AS_USUAL:
		snprintf(buf, len, "kernel.perf_event_paranoid %d%s: CAP_PERFMON or CAP_SYS_ADMIN",
			 paranoid, paranoid > 2 ? ", which this kernel treats as 2" : "");
		break;
	case HT_PERF_KEEP_ADMIN:
		snprintf(buf, len,
			 "kernel.perf_event_paranoid %d, where this kernel opens perf events only "
			 "for CAP_SYS_ADMIN (Debian's restriction): held, and kept after attaching "
			 "for --trigger",
			 paranoid);
		break;
	case HT_PERF_NO_ADMIN:
		snprintf(buf, len,
			 "kernel.perf_event_paranoid %d, where this kernel opens perf events only "
			 "for CAP_SYS_ADMIN (Debian's restriction), which hybtrace lacks: run it "
			 "as root, or set kernel.perf_event_paranoid=2",
			 paranoid);
		break;
	}
	return buf;
}

/*
 * What monitoring needs once attached: perf events for threads and images
 * that come later (PERFMON, IPC_LOCK), the target's memory and files
 * (SYS_PTRACE, and CHECKPOINT_RESTORE for map_files, which kernels before
 * 5.9 gave only to SYS_ADMIN), writing dumps for the invoking user (CHOWN,
 * DAC_*, FOWNER), the real-time event loop (SYS_NICE), signalling a child
 * started by `run` (KILL).
 */
static uint64_t needed_after_setup(int last)
{
	uint64_t keep = CAP_BIT(HT_CAP_PERFMON) | CAP_BIT(HT_CAP_IPC_LOCK) |
			CAP_BIT(HT_CAP_SYS_PTRACE) | CAP_BIT(HT_CAP_CHOWN) |
			CAP_BIT(HT_CAP_DAC_OVERRIDE) | CAP_BIT(HT_CAP_DAC_READ_SEARCH) |
			CAP_BIT(HT_CAP_FOWNER) | CAP_BIT(HT_CAP_SYS_NICE) | CAP_BIT(HT_CAP_KILL);

	if (last >= HT_CAP_CHECKPOINT_RESTORE)
		keep |= CAP_BIT(HT_CAP_CHECKPOINT_RESTORE);
	else
		keep |= CAP_BIT(HT_CAP_SYS_ADMIN);
	return keep;
}

int ht_drop_capabilities(int (*bpf_probe)(void *ctx), void *ctx, uint64_t also_keep, uint64_t *kept)
{
	uint64_t effective, permitted, keep;
	int last = last_cap();

	if (read_caps(&effective, &permitted))
		return ht_fail("capget: %s", strerror(errno));
	keep = (needed_after_setup(last) | also_keep) & permitted;
	/* The bounding set first: that needs CAP_SETPCAP, which goes next. */
	if (effective & CAP_BIT(HT_CAP_SETPCAP))
		for (int cap = 0; cap <= last; cap++)
			if (!(keep & CAP_BIT(cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) &&
			    errno != EINVAL)
				return ht_fail("dropping capability %d: %s", cap, strerror(errno));
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	/* Try without CAP_BPF, able to take it back while it is still permitted. */
	if (write_caps(keep, keep | (permitted & CAP_BIT(HT_CAP_BPF))))
		return ht_fail("capset: %s", strerror(errno));
	if (bpf_probe && bpf_probe(ctx) && (errno == EPERM || errno == EACCES))
		keep |= permitted & CAP_BIT(HT_CAP_BPF);
	if (write_caps(keep, keep))
		return ht_fail("capset: %s", strerror(errno));
	if (kept)
		*kept = keep;
	return 0;
}
