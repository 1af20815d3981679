// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The one clock reader, against the kernel's clock_gettime. */
#include <errno.h>
#include <time.h>
#include "check.h"
#include "base/clock.h"

static uint64_t raw_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

TEST(clock_reads_lie_between_two_kernel_reads)
{
	static const clockid_t ids[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		uint64_t before = raw_ns(ids[i]), t = ht_clock_ns(ids[i]), after = raw_ns(ids[i]);

		CHECK(before <= t && t <= after);
	}
	{
		uint64_t before = raw_ns(CLOCK_MONOTONIC), t = ht_monotonic_ns();

		CHECK(before <= t && t <= raw_ns(CLOCK_MONOTONIC));
	}
	/* Seconds and nanoseconds joined: more than a second's worth since boot. */
	CHECK(ht_monotonic_ns() > 1000000000ULL);
}

TEST(a_clock_the_kernel_lacks_reads_zero)
{
	errno = 0;
	CHECK_EQ_U64(ht_clock_ns((clockid_t)12345), 0);
	CHECK(errno == EINVAL);
}
