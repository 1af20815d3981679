// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "cli/check.h"
#include "cli/sources.h"
#include "kernel/kernel_btf.h"
#include "base/log.h"
#include "base/machine.h"
#include "base/perf_event.h"
#include "kernel/monitor.h"
#include "base/privileges.h"
#include "triggers/breakpoint.h"

static void row(const char *what, bool ok, const char *detail)
{
	printf("  %-24s %-4s %s\n", what, ok ? "yes" : "no", detail);
}

static int noop_breach(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

/* The real proof: load and attach the monitor, watching ourselves, then detach. */
static int probe_monitor(bool prev_state_arg, char *detail, size_t len)
{
	struct ht_target_spec self = { .tgids = { getpid() }, .ntgids = 1 };
	struct ht_monitor_config cfg = {
		.targets = &self,
		.threshold_ns[HT_BREACH_RQ_DELAY] = 1000000,
		.history_bytes = 64 << 10,
		.prev_state_from_arg = prev_state_arg,
		.on_breach = noop_breach,
	};
	struct ht_monitor m;

	if (ht_monitor_open(&m, &cfg)) {
		snprintf(detail, len, "(%s)", ht_last_error());
		return -1;
	}
	snprintf(detail, len, "(loaded and attached on %u CPUs)", m.ncpus);
	ht_monitor_close(&m);
	return 0;
}

int ht_check_main(int argc, char **argv)
{
	bool has_btf, prev_arg = false, sys_tp = false, root, perf_ok, on_cpu_perf;
	const char *on_cpu;
	enum ht_perf_access perf;
	struct utsname u;
	char detail[512], cpu[128], perf_detail[256], bp_detail[128];
	struct btf *btf;
	int bp, mon = -1, paranoid;

	(void)argv;
	if (argc > 1) {
		ht_error("check takes no arguments");
		return HT_EXIT_USAGE;
	}
	uname(&u);
	ht_machine_cpu_model(cpu, sizeof(cpu));
	printf("hybtrace %s on Linux %s %s, %s, %d CPUs\n\n", HT_VERSION, u.release, u.machine, cpu,
	       libbpf_num_possible_cpus());
	btf = ht_btf_open(NULL);
	has_btf = btf != NULL;
	if (btf) {
		prev_arg = ht_btf_switch_has_prev_state_arg(btf);
		sys_tp = ht_btf_has_tracepoint(btf, "sys_enter") &&
			 ht_btf_has_tracepoint(btf, "sys_exit");
	}
	btf__free(btf);
	root = ht_has_capability(HT_CAP_SYS_ADMIN) ||
	       (ht_has_capability(HT_CAP_BPF) && ht_has_capability(HT_CAP_PERFMON));
	perf = ht_perf_access(&paranoid);
	snprintf(perf_detail, sizeof(perf_detail), "(%s)",
		 ht_perf_access_describe(perf, paranoid, detail, sizeof(detail)));
	row("kernel BTF", has_btf, has_btf ? "(" HT_DEFAULT_BTF_PATH ")" : ht_last_error());
	row("sched_switch prev_state", has_btf,
	    prev_arg ? "(tracepoint argument, 5.18+)" : "(task_struct::__state, pre-5.18 form)");
	row("BPF ring buffer", libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) > 0, "");
	row("BPF task storage", libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) > 0, "");
	row("syscall tracepoints", sys_tp, "(sys_enter, sys_exit)");
	bp = ht_bp_fires();
	if (bp < 0)
		snprintf(bp_detail, sizeof(bp_detail), "(%s)", strerror(errno));
	row("hardware breakpoints", bp == 1,
	    bp == 1   ? "(PERF_TYPE_BREAKPOINT, execute: fired on a function of hybtrace's)"
	    : bp == 0 ? "(opened, but never fired on a function of hybtrace's: the machine does "
			"not give its guests the debug registers)"
		      : bp_detail);
	on_cpu = ht_sources_check(row, &on_cpu_perf);
	/*
	 * The monitor loads with these; the on-CPU source auto picks (unless it
	 * says it needs none) and triggers need perf events too.
	 */
	perf_ok = perf != HT_PERF_NO_ADMIN || !on_cpu_perf;
	row("privileges", root && perf_ok,
	    !root		       ? "(run as root to attach)"
	    : perf == HT_PERF_NO_ADMIN ? "(CAP_BPF and CAP_PERFMON, but perf events need "
					 "CAP_SYS_ADMIN here)"
				       : "(CAP_BPF and CAP_PERFMON)");
	row("perf events", perf != HT_PERF_NO_ADMIN, perf_detail);
	if (has_btf && root) {
		mon = probe_monitor(prev_arg, detail, sizeof(detail));
		row("monitor programs", mon == 0, detail);
	}
	printf("\nhybtrace will use:\n");
	printf("  prev_state from %s\n", prev_arg ? "the sched_switch argument" : "task_struct");
	printf("  syscall breaches %s\n",
	       sys_tp ? "through sys_enter/sys_exit, attached only with --syscall"
		      : "unavailable");
	printf("  monitor: %s\n", mon == 0 ? "ready" : "not usable here");
	printf("  on-CPU source (--source auto): %s\n", on_cpu);
	printf("  code triggers (--trigger): %s\n",
	       bp == 1   ? "hardware breakpoints"
	       : bp == 0 ? "none will fire: hardware breakpoints do not fire here"
			 : "none: a hardware breakpoint cannot be opened here");
	printf("  perf events (sampling, triggers): %s\n",
	       perf == HT_PERF_NO_ADMIN	    ? "refused here without CAP_SYS_ADMIN"
	       : perf == HT_PERF_KEEP_ADMIN ? "CAP_SYS_ADMIN, kept after attaching with --trigger"
					    : "CAP_PERFMON");
	return mon == 0 && perf_ok ? 0 : HT_EXIT_FAILURE;
}
