/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Dump files, written safely: a temporary name in the output directory
 * (O_EXCL, O_NOFOLLOW, mode 0640, owned by the sudo user), renamed to the
 * final name only once complete, never over an existing file.
 */
#ifndef HT_OUTPUT_H
#define HT_OUTPUT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define HT_DUMP_SUFFIX ".perfetto-trace"

struct ht_output_file {
	int fd;
	char tmp_path[PATH_MAX];
};

/* The directory exists, is a directory, and we may create files in it. */
int ht_output_dir_check(const char *dir);

/* "hybtrace-PID-YYYYmmdd-HHMMSS.mmm-KIND" for a wall-clock time (local time). */
const char *ht_dump_base_name(int pid, uint64_t realtime_ns, const char *kind, char *buf,
			      size_t len);

/* Under sudo, a file hybtrace creates belongs to the user who ran sudo. */
void ht_output_give_to_sudo_user(int fd);

/* Create the temporary file. Returns 0, or -1 with ht_last_error(). */
int ht_output_begin(const char *dir, struct ht_output_file *f);

/*
 * Flush, then rename to DIR/BASE.perfetto-trace, or BASE-N.perfetto-trace
 * when that exists. FINAL gets the path. On failure the temporary is gone.
 */
int ht_output_commit(struct ht_output_file *f, const char *dir, const char *base, char *final,
		     size_t len);

/*
 * Flush F (a temporary file in DIR) to the disk and close it; on failure
 * it is removed and the error names it as WHAT ("dump"). 0 or -1.
 */
int ht_output_sync(struct ht_output_file *f, const char *dir, const char *what);

/*
 * Rename TMP_PATH to DIR/BASE+SUFFIX, or DIR/BASE-N+SUFFIX when that
 * exists, never over a file. FINAL gets the path. On failure TMP_PATH is
 * gone and the error names the file as WHAT ("dump").
 */
int ht_output_name(const char *tmp_path, const char *dir, const char *base, const char *suffix,
		   const char *what, char *final, size_t len);

/* Rename without replacing; filesystems without RENAME_NOREPLACE get link + unlink. 0 or -1. */
int ht_output_rename_noreplace(const char *from, const char *to);

/*
 * Remove a dump written before (one a worse dump replaces), only if PATH is
 * still that file (DEV, INO): a file someone put in its place stays. A file
 * already gone counts as removed. Returns 0, or -1 with ht_last_error().
 */
int ht_output_remove(const char *path, uint64_t dev, uint64_t ino);

/* Close and remove the temporary file. */
void ht_output_abort(struct ht_output_file *f);

#endif /* HT_OUTPUT_H */
