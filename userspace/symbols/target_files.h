/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Files of a traced process, opened as it sees them and in no other way:
 * the file behind a mapping through /proc/PID/map_files, else by its path
 * inside /proc/PID/root (symlinks resolved in that root) when its device
 * and inode are the mapping's; other files by path inside that root or on
 * the host. Everything is opened O_PATH first, so a FIFO or a device that
 * a hostile target put in the way is refused before it is opened.
 */
#ifndef HT_TARGET_FILES_H
#define HT_TARGET_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include "symbols/proc_maps.h"

struct ht_target {
	int pid;
	int root_fd;   /* /proc/PID/root, O_PATH; -1 when it could not be opened */
	int same_root; /* the target's root is ours: host paths name the same files */
};

/* For process PID; nothing is opened yet. */
void ht_target_init(struct ht_target *t, int pid);

/*
 * Open the target's root again (it may have changed: chroot, exec). Returns
 * 0, or -1 with ht_fail() when /proc/PID/root cannot be opened; T is then
 * still usable through map_files.
 */
int ht_target_reopen_root(struct ht_target *t);
void ht_target_close(struct ht_target *t);

/*
 * The file behind mapping M, open for reading; *SOURCE (allocated) is the
 * path it was opened by and ST its stat. Returns an fd or -1 with ht_fail().
 */
int ht_target_open_mapping(const struct ht_target *t, const struct ht_mapping *m, char **source,
			   struct stat *st);

/* The stat of the file behind mapping M, through the same doors. 0 or -1. */
int ht_target_stat_mapping(const struct ht_target *t, const struct ht_mapping *m, struct stat *st);

/*
 * A regular file at absolute PATH, in the target's root (IN_ROOT) or on the
 * host; SHOWN gets the path for messages. Returns an fd, -2 when there is
 * no such file, or -1 with ht_fail().
 */
int ht_target_open_file(const struct ht_target *t, const char *path, int in_root, char *shown,
			size_t shown_len);

/* Where separate debug files are looked for, in this order. */
enum ht_debug_place {
	HT_DEBUG_IN_ROOT, /* the target's /usr/lib/debug, symlinks resolved in its root */
	HT_DEBUG_ON_HOST, /* ours, when the target's root is another */
	HT_DEBUG_PLACES,
};

/*
 * The separate debug file of BUILD_ID (hex, as a build-id note gives it),
 * /usr/lib/debug/.build-id/ab/cdef....debug in PLACE, as gdb and libdwfl
 * name it. A regular file only: what a target plants there (a FIFO, a
 * symlink out of its root) is not opened. Returns an fd, -2 when PLACE has
 * none, or -1 with ht_fail(); SHOWN gets the path tried.
 */
int ht_target_open_build_id_debug(const struct ht_target *t, const char *build_id,
				  enum ht_debug_place place, char *shown, size_t shown_len);

/*
 * The stat of the file at absolute PATH in the target's root, its symlinks
 * resolved inside that root: one that points out of it (an absolute
 * target, "..") lands inside it again. Returns 0, -2 when there is no such
 * file, or -1 with ht_fail().
 */
int ht_target_stat_file(const struct ht_target *t, const char *path, struct stat *st);

/*
 * The directory at absolute PATH in the target's root, open for reading
 * (fdopendir). Returns an fd, -2 when there is no such directory, or -1
 * with ht_fail().
 */
int ht_target_open_dir(const struct ht_target *t, const char *path);

/* LEN bytes of the target's memory at ADDR, from /proc/PID/mem. 0, or -1 with ht_fail(). */
int ht_target_read_memory(const struct ht_target *t, uint64_t addr, void *buf, size_t len);

/* No vdso is this large; a bigger [vdso] mapping is not one. */
#define HT_VDSO_MAX_BYTES (1u << 20)

/*
 * A copy (malloc'd) of the target's vdso, the LEN bytes at START: read
 * from the target, else, without ptrace access to it, hybtrace's own vdso
 * when its size is the same (the kernel gives every process of an ABI the
 * same image); *OURS says which. NULL with ht_fail() and errno ENOMEM (no
 * memory) or ENOENT (too large, or neither copy could be had).
 */
void *ht_target_copy_vdso(const struct ht_target *t, uint64_t start, size_t len, bool *ours);

/*
 * The target's perf map, /tmp/perf-NSPID.map in its root (NSPID: its pid in
 * its own namespace), if it is a regular file, not a symlink, owned by the
 * target's user. Returns an fd; -2 when there is none; -1 with ht_fail()
 * saying why it is ignored. SHOWN gets its path.
 */
int ht_target_open_perf_map(const struct ht_target *t, char *shown, size_t shown_len,
			    struct stat *st);

/* The .gnu_debuglink CRC-32 (zlib's crc32) of all of FD. 0 or -1 with ht_fail(). */
int ht_file_crc32(int fd, uint32_t *crc);

/* Whether PATH ends in " (deleted)", as /proc shows unlinked files. */
int ht_path_is_deleted(const char *path);

#endif /* HT_TARGET_FILES_H */
