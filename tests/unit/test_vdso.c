// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The one vdso copy: the target's bytes, else hybtrace's own image of the same size. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "symbols/proc_maps.h"
#include "symbols/target_files.h"

/* This process's [vdso] mapping, as /proc/self/maps shows it. */
static int own_mapping(uint64_t *start, size_t *len)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	const struct ht_mapping *m;
	struct ht_maps maps;

	if (!base || ht_maps_read(getpid(), &maps))
		return -1;
	m = ht_maps_find(&maps, base);
	*start = base;
	*len = m && !strcmp(m->path, "[vdso]") ? m->end - m->start : 0;
	ht_maps_free(&maps);
	return *len ? 0 : -1;
}

TEST(the_targets_own_bytes_when_they_can_be_read)
{
	struct ht_target t;
	uint64_t start;
	size_t len;
	bool ours = true;
	void *copy;

	if (own_mapping(&start, &len))
		SKIP_TEST("no vdso in this process");
	ht_target_init(&t, getpid());
	copy = ht_target_copy_vdso(&t, start, len, &ours);
	CHECK(copy != NULL);
	CHECK(!ours);
	CHECK(copy && !memcmp(copy, (const void *)(uintptr_t)start, len));
	free(copy);
	ht_target_close(&t);
}

TEST(our_own_image_when_the_target_cannot_be_read)
{
	struct ht_target t;
	uint64_t start;
	size_t len;
	bool ours = false;
	void *copy;

	if (own_mapping(&start, &len))
		SKIP_TEST("no vdso in this process");
	/* No such process: its memory cannot be read. */
	ht_target_init(&t, 0x3ffffff0);
	copy = ht_target_copy_vdso(&t, start, len, &ours);
	CHECK(copy != NULL);
	CHECK(ours);
	CHECK(copy && !memcmp(copy, (const void *)(uintptr_t)start, len));
	free(copy);
	/* A vdso of another size is another image: none. */
	errno = 0;
	CHECK(ht_target_copy_vdso(&t, start, len / 2, &ours) == NULL && errno == ENOENT);
	CHECK(strstr(ht_last_error(), "hybtrace's own vdso differs") != NULL);
	errno = 0;
	CHECK(ht_target_copy_vdso(&t, start, HT_VDSO_MAX_BYTES + 1, &ours) == NULL &&
	      errno == ENOENT);
	CHECK(strstr(ht_last_error(), "too large for a vdso") != NULL);
	ht_target_close(&t);
}
