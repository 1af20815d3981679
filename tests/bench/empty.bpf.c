// SPDX-License-Identifier: GPL-2.0
/*
 * Empty programs on the monitor's hottest tracepoints: the benchmark's
 * floor, and the baseline its per-program costs are reported net of.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(empty_sched_switch)
{
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(empty_sched_wakeup)
{
	return 0;
}
