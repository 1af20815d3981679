// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "log.h"
#include "privileges.h"

bool ht_has_capability(int cap)
{
	struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &header, data))
		return false;
	return data[cap / 32].effective & (1U << (cap % 32));
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
