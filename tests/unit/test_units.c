// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Numbers as the output prints them: durations, counts, syscall returns. */
#include <errno.h>
#include "check.h"
#include "hybtrace/records.h"
#include "base/syscalls.h"
#include "base/units.h"

static const char *dur(uint64_t ns)
{
	static char buf[32];

	return ht_format_duration(ns, buf, sizeof(buf));
}

static const char *count(double n)
{
	static char buf[32];

	return ht_format_count(n, buf, sizeof(buf));
}

static const char *ret(int64_t r)
{
	static char buf[128];

	return ht_syscall_ret_format(r, buf, sizeof(buf));
}

TEST(durations_in_each_unit)
{
	CHECK_STR(dur(0), "0ns");
	CHECK_STR(dur(999), "999ns");
	CHECK_STR(dur(1000), "1.0us");
	CHECK_STR(dur(12345), "12.3us");
	CHECK_STR(dur(4210000), "4.21ms");
	CHECK_STR(dur(1234000000), "1.234s");
	CHECK_STR(dur(3600000000000ULL), "3600.000s");
}

/* The unit is the one the rounded figure fits: never "1000.0us" or "1000.00ms". */
TEST(durations_that_round_up_take_the_next_unit)
{
	CHECK_STR(dur(999949), "999.9us");
	CHECK_STR(dur(999950), "1.00ms");
	CHECK_STR(dur(999999), "1.00ms");
	CHECK_STR(dur(1000000), "1.00ms");
	CHECK_STR(dur(999994999), "999.99ms");
	CHECK_STR(dur(999995000), "1.000s");
	CHECK_STR(dur(999999999), "1.000s");
	CHECK_STR(dur(1000000000), "1.000s");
	/* Every figure below 1000 in its unit, across the edges. */
	for (uint64_t ns = 999000; ns < 1001000; ns += 7)
		CHECK(strtod(dur(ns), NULL) < 1000);
	for (uint64_t ns = 999900000; ns < 1000100000; ns += 997)
		CHECK(strtod(dur(ns), NULL) < 1000);
}

TEST(counts_that_round_up_take_the_next_unit)
{
	CHECK_STR(count(0), "0");
	CHECK_STR(count(999), "999");
	CHECK_STR(count(999.6), "1.0k");
	CHECK_STR(count(2700), "2.7k");
	CHECK_STR(count(999949), "999.9k");
	CHECK_STR(count(999950), "1.0M");
	CHECK_STR(count(4.5e6), "4.5M");
	CHECK_STR(count(999.96e6), "1.0G");
	CHECK_STR(count(5e12), "5000.0G");
}

TEST(syscall_returns_name_their_errno)
{
	CHECK_STR(ret(0), "0");
	CHECK_STR(ret(4096), "4096");
	CHECK_STR(ret(-EAGAIN), "-11 (EAGAIN)");
	CHECK_STR(ret(-EINTR), "-4 (EINTR)");
	CHECK_STR(ht_syscall_ret_name(-ETIMEDOUT), "ETIMEDOUT");
	CHECK(ht_syscall_ret_name(0) == NULL);
	CHECK(ht_syscall_ret_name(11) == NULL);
	/* Below -4095 a return is an address or a value, not an error. */
	CHECK(ht_syscall_ret_name(-4096) == NULL);
	CHECK_STR(ret(-4096), "-4096");
	CHECK(ht_syscall_ret_name(-4095) == NULL);
	CHECK_STR(ret(-600), "-600");
}

/* include/linux/errno.h: the errnos only the kernel sees, with what each means. */
TEST(kernel_internal_errnos_are_named_and_explained)
{
	static const char *const names[] = { "ERESTARTSYS",	      "ERESTARTNOINTR",
					     "ERESTARTNOHAND",	      "ENOIOCTLCMD",
					     "ERESTART_RESTARTBLOCK", "EPROBE_DEFER",
					     "EOPENSTALE",	      "ENOPARAM" };

	for (int i = 0; i < 8; i++)
		CHECK_STR(ht_syscall_ret_name(-512 - i), names[i]);
	CHECK(ht_syscall_ret_name(-520) == NULL);
	CHECK(ht_syscall_ret_name(-511) == NULL);
	CHECK_STR(ret(-514), "-514 (ERESTARTNOHAND: interrupted by a signal, restarted unless a "
			     "handler ran)");
	CHECK(!strncmp(ret(-512), "-512 (ERESTARTSYS: interrupted by a signal", 42));
	CHECK(strstr(ret(-516), "restart_syscall") != NULL);
}
