// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sampler's filter. Sampling events are CPU-wide (pid -1): events on
 * the targets' own threads would make every one of their context switches
 * schedule perf contexts out and in, which costs more than the samples.
 * This program runs at each sample's overflow; returning 0 drops a sample
 * of any other process before it is written, so the rings hold the
 * targets' samples only. The target set is the monitor's: its target_procs
 * map (the same fd) and its knobs targets_all and self_tgid.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define HT_TARGETS_TEST_ONLY
#include "targets.bpf.h"

SEC("perf_event")
int keep_target_samples(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	return tgid_is_target(id >> 32, (__u32)id);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
