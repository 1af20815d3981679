/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the files of the Intel PT capture share among themselves; for this folder only. */
#ifndef HT_INTELPT_PRIVATE_H
#define HT_INTELPT_PRIVATE_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/perf_event.h"
#include "sources/intelpt/intelpt_capture.h"
#include "symbols/target_files.h"

/* Brackets tried per clock pair: the tightest is kept. */
#define CLOCK_PAIR_TRIES 16
#define MIN_AUX_PAGES	 2

static inline int perf_open(struct perf_event_attr *attr, int pid, int cpu)
{
	return ht_perf_event_open(attr, pid, cpu);
}

static inline uint64_t clock_ns(clockid_t id)
{
	return ht_clock_ns(id);
}

/* A file's build-id, looked up once per (device, inode). */
struct ht_build_id_entry {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path;
	char *build_id; /* NULL: the file has none, or could not be read */
};

/* A small sysfs file's text without its trailing newline: 0, -1 (errno set). */
int ht_intelpt_read_text(const char *path, char *buf, size_t len);

/* intelpt_maps.c */
void ht_intelpt_free_maps(struct ht_rawcap_maps *m);
void ht_intelpt_read_attach_maps(struct ht_intelpt *pt);
int ht_intelpt_read_exec_maps(struct ht_intelpt *pt, const struct ht_maps *maps,
			      const struct ht_target *target, struct ht_rawcap_maps *out);
int ht_intelpt_copy_vdso(const struct ht_maps *maps, const struct ht_target *target,
			 struct ht_rawcap *out);
int ht_intelpt_copy_maps(struct ht_rawcap_maps *dst, const struct ht_rawcap_maps *src);
void ht_intelpt_read_comm(int pid, char *comm, size_t len);

#endif /* HT_INTELPT_PRIVATE_H */
