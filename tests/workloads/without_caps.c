// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Runs CMD without capabilities CAPS, as `capsh --drop=CAPS --` does (out of
 * the bounding set, so root's exec gives CMD every capability but those),
 * for tests of what hybtrace does with fewer; the kernel matrix's guests have
 * no capsh. First it tries what a tracer without them may do on this kernel:
 * a perf_event_open of an execute breakpoint on itself, with CAPS out of its
 * effective set for the try, logged as "perf_open" with the errno (0: it
 * opened). Debian's kernels at kernel.perf_event_paranoid 3 refuse it without
 * CAP_SYS_ADMIN; mainline treats 3 as 2. With --probe-only, CMD keeps CAPS:
 * only the try is made.
 * usage: without_caps [--probe-only] CAP[,CAP...] CMD [ARG...]
 *        CAP: cap_sys_admin, cap_perfmon, cap_bpf, cap_sys_ptrace, or a number
 */
#include <linux/capability.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include "workload.h"

static const struct {
	const char *name;
	int cap;
} names[] = {
	{"cap_sys_ptrace", 19},
	{"cap_sys_admin", 21},
	{"cap_perfmon", 38},
	{"cap_bpf", 39},
};

static int cap_number(const char *s)
{
	char *end;
	long n;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].cap;
	n = strtol(s, &end, 10);
	return *s && !*end && n >= 0 && n < 64 ? (int)n : -1;
}

static int caps_io(int set, uint64_t *effective, uint64_t *permitted)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {};

	if (set) {
		d[0].effective = (uint32_t)*effective;
		d[1].effective = (uint32_t)(*effective >> 32);
		d[0].permitted = (uint32_t)*permitted;
		d[1].permitted = (uint32_t)(*permitted >> 32);
		return (int)syscall(SYS_capset, &h, d);
	}
	if (syscall(SYS_capget, &h, d))
		return -1;
	*effective = d[0].effective | (uint64_t)d[1].effective << 32;
	*permitted = d[0].permitted | (uint64_t)d[1].permitted << 32;
	return 0;
}

__attribute__((noinline)) static void probe_target(void)
{
	__asm__ __volatile__("" ::: "memory");
}

/* The try, with MASK out of the effective set: 0 or the errno. */
static int perf_open_without(uint64_t mask)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof(a),
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = (uint64_t)(uintptr_t)probe_target,
		.bp_len = sizeof(long),
		.sample_period = 1,
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	uint64_t effective, permitted, without;
	int fd, err;

	if (caps_io(0, &effective, &permitted))
		return errno;
	without = effective & ~mask;
	if (caps_io(1, &without, &permitted))
		return errno;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	err = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	if (caps_io(1, &effective, &permitted))
		return errno;
	return err;
}

int main(int argc, char **argv)
{
	int probe_only = argc > 1 && !strcmp(argv[1], "--probe-only");
	char *list, *tok, *save = NULL;
	uint64_t mask = 0;
	int i = 1 + probe_only, err;

	if (argc < i + 2) {
		fprintf(stderr, "usage: without_caps [--probe-only] CAP[,CAP...] CMD [ARG...]\n");
		return 2;
	}
	list = argv[i];
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int cap = cap_number(tok);

		if (cap < 0) {
			fprintf(stderr, "without_caps: unknown capability %s\n", tok);
			return 2;
		}
		mask |= 1ULL << cap;
	}
	err = perf_open_without(mask);
	wl_log("perf_open", "\"errno\":%d,\"without\":%llu,\"probe_only\":%s", err,
	       (unsigned long long)mask, probe_only ? "true" : "false");
	for (int cap = 0; cap < 64 && !probe_only; cap++)
		if ((mask & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)) {
			fprintf(stderr, "without_caps: dropping capability %d: %s\n", cap,
				strerror(errno));
			return 1;
		}
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "without_caps: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
