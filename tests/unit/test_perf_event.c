// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Opening perf events and mapping their rings, against the kernel. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "base/perf_event.h"

static void dummy_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_DUMMY;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
}

TEST(ring_data_is_a_power_of_two_count_of_pages)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	CHECK_EQ_U64(ht_perf_ring_data_bytes(0), page);
	CHECK_EQ_U64(ht_perf_ring_data_bytes(1), page);
	CHECK_EQ_U64(ht_perf_ring_data_bytes(page), page);
	CHECK_EQ_U64(ht_perf_ring_data_bytes(page + 1), 2 * page);
	CHECK_EQ_U64(ht_perf_ring_data_bytes(3 * page), 4 * page);
	CHECK_EQ_U64(ht_perf_ring_data_bytes(64 * 1024 * 1024), 64 * 1024 * 1024);
}

TEST(an_event_on_this_thread_opens_closed_on_exec_and_maps)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), data = ht_perf_ring_data_bytes(2 * page);
	struct perf_event_mmap_page *meta;
	struct perf_event_attr a;
	int fd;

	dummy_attr(&a);
	fd = ht_perf_event_open(&a, 0, -1);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		SKIP_TEST("perf events refused here");
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	meta = ht_perf_ring_map(fd, data, true);
	CHECK(meta != NULL);
	if (meta) {
		/* The kernel says where the data lies: after the one metadata page. */
		CHECK_EQ_U64(meta->data_offset, page);
		CHECK_EQ_U64(meta->data_size, data);
		munmap(meta, data + page);
	}
	/* Not a power of two of pages: the kernel refuses it. */
	errno = 0;
	CHECK(ht_perf_ring_map(fd, 3 * page, false) == NULL && errno == EINVAL);
	close(fd);
	errno = 0;
	CHECK(ht_perf_ring_map(-1, page, false) == NULL && errno == EBADF);
}
