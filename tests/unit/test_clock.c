// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The one clock reader, against the kernel's clock_gettime, and the one TSC mapping. */
#include <errno.h>
#include <time.h>
#include "check.h"
#include "base/clock.h"
#include "base/tsc.h"

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

TEST(tsc_on_the_line_through_a_pair)
{
	/* 3 GHz: 3 ticks a ns, from (3000, 1000). */
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 3000, 1, 3), 1000);
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 4500, 1, 3), 1500);
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 4502, 1, 3), 1500); /* rounded toward the pair */
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 2998, 1, 3), 1000);
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 1500, 1, 3), 500);
	/* Before time 0, and past UINT64_MAX: held at the ends. */
	CHECK_EQ_U64(ht_tsc_line_ns(3000, 1000, 0, 1000, 1), 0);
	CHECK_EQ_U64(ht_tsc_line_ns(0, UINT64_MAX - 5, 10, 1, 1), UINT64_MAX);
	/* Products past 64 (and 127) bits come out whole. */
	CHECK_EQ_U64(ht_tsc_line_ns(0, 0, UINT64_MAX, UINT64_MAX, UINT64_MAX), UINT64_MAX);
	CHECK_EQ_U64(ht_tsc_line_ns(0, 0, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX), UINT64_MAX - 1);
	CHECK_EQ_U64(ht_tsc_line_ns(UINT64_MAX, UINT64_MAX - 1, 0, UINT64_MAX - 1, UINT64_MAX), 0);
	/* One pair and a frequency: 2 GHz. */
	CHECK_EQ_U64(ht_tsc_line_ns(1000000, 5000000000ULL, 3000000, 1000000000, 2000000000),
		     5001000000ULL);
}
