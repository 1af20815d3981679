/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What /proc says about processes and threads. */
#ifndef HT_PROC_H
#define HT_PROC_H

#include <stddef.h>
#include <stdbool.h>

/*
 * Check that PID names a live user-space process and return its thread-group
 * id in *tgid (a thread id is accepted and resolved to its process).
 * Returns 0, or -1 with the reason in ht_last_error().
 */
int ht_proc_resolve_target(int pid, int *tgid);

/* A process id: a positive decimal number. Returns 0, or -1 with the reason. */
int ht_parse_pid(const char *s, int *pid);

/*
 * "N[,M,...]", the value of --pid, into PIDS (at most MAX) and *N, as given:
 * processes or thread ids, not yet checked against /proc. Returns 0, or -1
 * with the reason (a bad number, an empty item, more than MAX).
 */
int ht_parse_pid_list(const char *arg, int *pids, unsigned int max, unsigned int *n);

/*
 * Each of the N pids IN to its process, in TGIDS[i] (a thread id names its
 * process). Refused, naming which: a dead pid, a kernel thread, one process
 * named twice (the same pid twice, or a process and a thread of it, or two
 * of its threads). Returns 0, or -1 with the reason.
 */
int ht_resolve_target_pids(const int *in, unsigned int n, int *tgids);

/* The process of thread TID (its Tgid in /proc/TID/status). 0, or -1 when it is gone. */
int ht_proc_tgid(int tid, int *tgid);

/*
 * When process PID started, in clock ticks after boot (/proc/PID/stat field
 * 22): a pid used again by another process gives another. 0, or -1.
 */
int ht_proc_start_time(int pid, unsigned long long *ticks);

/*
 * The size of process PID's address space in pages (/proc/PID/statm's
 * first field, the kernel's total_vm: it moves at every mmap, munmap and
 * brk, and reading it walks nothing). 0, or -1 when the process is gone.
 */
int ht_proc_vm_pages(int pid, unsigned long long *pages);

/* Read the comm of thread TID into buf (NUL-terminated). Returns 0 or -1. */
int ht_proc_thread_comm(int tid, char *buf, size_t len);

/* Fields of /proc/TID/stat: state letter and flags. Returns 0 or -1. */
int ht_proc_stat_state(int tid, char *state, unsigned long *flags);

/* The real uid of process TGID. Returns 0, or -1 with the reason. */
int ht_proc_real_uid(int tgid, unsigned int *uid);

/* A small /proc or sysfs file's text, in one read, NUL-terminated in BUF. 0, or -1 (errno set). */
int ht_read_small_file(const char *path, char *buf, size_t len);

/*
 * All of FD (up to LIMIT bytes) in an allocated buffer, for files whose size
 * is unknown until read; NULL when unreadable (errno set) or larger.
 */
char *ht_read_all(int fd, size_t limit, size_t *len);

/* The number in a one-number file such as /proc/sys/kernel/pid_max. Returns 0 or -1. */
int ht_proc_read_long(const char *path, long *out);

/*
 * Bring every thread of process TGID under COVER(CTX, tid), which returns 1
 * for a thread it took on now, 0 for one it already had, -1 on failure.
 * Passes over /proc/TGID/task repeat until one finds nothing new (threads
 * born during a pass are caught by the next; later ones inherit what the
 * covered ones hold). Returns 0, or -1 with the reason in ht_last_error():
 * COVER failed, or the threads cannot be listed (a process already gone
 * is 0 when GONE_OK).
 */
int ht_proc_cover_threads(int tgid, int (*cover)(void *ctx, int tid), void *ctx, bool gone_ok);

/* Entries in directory PATH, "." and ".." included (0 when it cannot be opened). */
size_t ht_count_dir_entries(const char *path);

/* How many threads process TGID has now (0 when it is gone). */
size_t ht_proc_count_threads(int tgid);

/*
 * Room for NEED more descriptors than this process holds now (with a margin),
 * raising RLIMIT_NOFILE if needed. WHO names the feature in the error.
 * Returns 0, or -1 with the reason in ht_last_error().
 */
int ht_reserve_fds(size_t need, const char *who);

/*
 * Raise RLIMIT_NOFILE's soft limit to its hard limit (perf events per
 * thread and CPU need many). Returns the soft limit now.
 */
size_t ht_raise_nofile(void);

/*
 * Descriptors this process may still open under RLIMIT_NOFILE, less a
 * margin kept for files, sockets and /proc reads; 0 when none.
 */
size_t ht_fds_room(void);

/* The kernel's thread flag for kernel threads (include/linux/sched.h). */
#define HT_PF_KTHREAD 0x00200000UL

#endif /* HT_PROC_H */
