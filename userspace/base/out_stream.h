/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stream live output goes to: breach lines, or with --json the JSON
 * lines, on stdout or in --json=FILE. Line-buffered, and it keeps the first
 * write error (EPIPE when the reader went away), which stdio forgets: after
 * a failed write glibc drops the buffer and a later fflush() succeeds. The
 * event loop asks for that error and ends the session on it.
 */
#ifndef HT_OUT_STREAM_H
#define HT_OUT_STREAM_H

#include <stdbool.h>
#include <stdio.h>

struct ht_out_stream {
	FILE *f;
	int fd;
	const char *path; /* NULL: stdout */
	bool created;	  /* the file is new: ht_out_stream_close(…, true) removes it */
	int err;	  /* the first write error (an errno), 0 while every write went out */
};

/*
 * Open PATH (NULL or "-": stdout). A new file is created mode 0640, owned by
 * the sudo user; an existing one (a file, a FIFO, a device) is truncated and
 * written as it is; never through a symlink, a root-owned stream being where
 * a planted link would do harm. Returns 0, or -1 with ht_last_error().
 */
int ht_out_stream_open(struct ht_out_stream *s, const char *path);

/* The first write error (an errno), or 0. Any thread may write; any may ask. */
int ht_out_stream_error(const struct ht_out_stream *s);

/* "stdout" or the file's path, for messages. */
const char *ht_out_stream_name(const struct ht_out_stream *s);

/*
 * Flush and close (stdout's descriptor stays open). DISCARD removes a file
 * this stream created: a session that never started leaves nothing behind.
 */
void ht_out_stream_close(struct ht_out_stream *s, bool discard);

#endif /* HT_OUT_STREAM_H */
