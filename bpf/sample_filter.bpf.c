// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sampler's filter. Sampling events are CPU-wide (pid -1): events on
 * the target's own threads would make every one of its context switches
 * schedule perf contexts out and in, which costs more than the samples.
 * This program runs at each sample's overflow; returning 0 drops a sample
 * of any other process before it is written, so the rings hold the
 * target's samples only.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;

SEC("perf_event")
int keep_target_samples(struct bpf_perf_event_data *ctx)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
