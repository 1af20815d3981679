/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cgroup v2 directories and systemd units, as --cgroup and --unit name them.
 * Errors through ht_fail(), worded as the command line prints them.
 */
#ifndef HT_CGROUP_H
#define HT_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Where cgroup v2 is mounted: /sys/fs/cgroup on a unified machine,
 * /sys/fs/cgroup/unified in systemd's hybrid mode. Returns 0, or -1 with the
 * reason when no cgroup2 file system is mounted.
 */
int ht_cgroup_v2_mount(char *path, size_t len);

/* The same, read from MOUNTINFO (a /proc/PID/mountinfo file). */
int ht_cgroup_v2_mount_in(const char *mountinfo, char *path, size_t len);

/*
 * ARG, a cgroup v2 directory absolute (under the v2 mount) or relative to the
 * mount, to its absolute path in ABS and its cgroup id in *ID: the
 * directory's inode number, which is its kernfs node's id, the id BPF reads
 * at task->cgroups->dfl_cgrp->kn->id (and name_to_handle_at() returns).
 * Refused: a path that does not exist, is not a directory of the v2 mount
 * (a v1 hierarchy, or outside), or is the root cgroup (--all watches every
 * task). Returns 0, or -1 with the reason.
 */
int ht_cgroup_resolve(const char *arg, char *abs, size_t len, uint64_t *id);

/*
 * FN(tgid, ARG) for each process in cgroup ABS and in every cgroup below it
 * (their cgroup.procs). A cgroup removed during the walk is passed over.
 * Returns 0, FN's first non-zero return, or -1 with the reason when ABS
 * cannot be read.
 */
int ht_cgroup_for_each_process(const char *abs, int (*fn)(int tgid, void *arg), void *arg);

/*
 * The cgroup of systemd unit UNIT (NAME, or NAME.service, .scope, .slice),
 * from `systemctl show -p ControlGroup`, resolved as ht_cgroup_resolve()
 * does into ABS. Refused: systemd not running (no /run/systemd/system), a
 * unit not loaded, a unit without processes. HYBTRACE_TEST_SYSTEMCTL=PATH
 * runs PATH instead of systemctl, standing for a running systemd (tests).
 * Returns 0, or -1 with the reason.
 */
int ht_systemd_unit_cgroup(const char *unit, char *abs, size_t len);

#endif /* HT_CGROUP_H */
