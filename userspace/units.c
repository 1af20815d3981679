// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include "hybtrace/records.h"
#include "units.h"

const char *ht_format_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3fs", (double)ns / 1e9);
	return buf;
}

const char *ht_format_count(double n, char *buf, size_t len)
{
	if (n < 1000)
		snprintf(buf, len, "%.0f", n);
	else if (n < 1e6)
		snprintf(buf, len, "%.1fk", n / 1e3);
	else if (n < 1e9)
		snprintf(buf, len, "%.1fM", n / 1e6);
	else
		snprintf(buf, len, "%.1fG", n / 1e9);
	return buf;
}

char ht_task_state_letter(uint32_t state)
{
	/* As the kernel's task_state_index(): TASK_IDLE is I, RT-lock waits count as D. */
	static const char letters[] = "RSDTtXZP";
	uint32_t report;
	int bit = 0;

	if ((state & 0x7f) == 0x02 && (state & 0x400))
		return 'I';
	if (state & 0x1000)
		return 'D';
	if (state & 0x80) /* TASK_DEAD: its last switch-out */
		return 'X';
	report = state & 0x7f;
	while (report) {
		bit++;
		report >>= 1;
	}
	return letters[bit];
}

const char *ht_breach_kind_name(unsigned int kind)
{
	switch (kind) {
	case HT_BREACH_RQ_DELAY:
		return "rq-delay";
	case HT_BREACH_OFF_CPU:
		return "off-cpu";
	case HT_BREACH_SYSCALL:
		return "syscall";
	}
	return "unknown";
}
