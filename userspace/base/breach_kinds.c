// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "base/breach_kinds.h"

/* A new kind: its enum value in records.h, a row here, its knob in monitor.c, its BPF logic. */
const struct ht_breach_kind_info ht_breach_kinds[HT_BREACH_KIND_MAX] = {
	[HT_BREACH_RQ_DELAY] =
		{
			.name = "rq-delay",
			.json_key = "rq_delay",
			.title = "run-queue delay",
			.option = "rq-delay",
			.option_help = "run-queue delay threshold (default 1ms; 'off' disables)",
			.default_threshold_ns = 1000000,
			/* The BPF program times every run-queue wait, breach or not. */
			.always_measured = true,
			.interval = HT_INTERVAL_RUNQUEUE,
			.began = "the wait began",
		},
	[HT_BREACH_OFF_CPU] =
		{
			.name = "off-cpu",
			.json_key = "off_cpu",
			.title = "off-CPU time",
			.option = "off-cpu",
			.option_help = "off-CPU (sleep) threshold (default off)",
			/* A sleep inside a syscall that breached both is one wait (records.h). */
			.breached_with = HT_KIND_BIT(HT_BREACH_SYSCALL),
			.interval = HT_INTERVAL_OFF_CPU,
			.began = "it blocked",
		},
	[HT_BREACH_SYSCALL] =
		{
			.name = "syscall",
			.json_key = "syscall",
			.title = "syscall time",
			.option = "syscall",
			.option_help = "syscall duration threshold (default off)",
			.breached_with = HT_KIND_BIT(HT_BREACH_OFF_CPU),
			.interval = HT_INTERVAL_SYSCALL,
			.began = "the syscall began",
		},
};

const struct ht_breach_kind_info *ht_breach_kind(unsigned int kind)
{
	return kind > 0 && kind < HT_BREACH_KIND_MAX ? &ht_breach_kinds[kind] : NULL;
}

unsigned int ht_breach_kind_by_name(const char *name)
{
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if (ht_breach_kinds[k].name && !strcmp(ht_breach_kinds[k].name, name))
			return k;
	return 0;
}

const char *ht_breach_kind_name(unsigned int kind)
{
	const struct ht_breach_kind_info *ki = ht_breach_kind(kind);

	return ki ? ki->name : "unknown";
}

uint32_t ht_breach_kinds_of(uint32_t kinds, uint32_t kind)
{
	if (kinds)
		return kinds;
	return ht_breach_kind(kind) ? HT_KIND_BIT(kind) : 0;
}

const char *ht_breach_kinds_name(uint32_t kinds, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX && n < len; k++)
		if (kinds & HT_KIND_BIT(k))
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "+" : "",
					      ht_breach_kind_name(k));
	return buf;
}
