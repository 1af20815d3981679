/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Triggers on code: hardware execute breakpoints (up to 4, one debug
 * register each) on every thread of the target, with the first three
 * integer arguments (rdi, rsi, rdx) of each hit.
 *
 * Events are opened per (thread, CPU) with inherit, so a thread born
 * later is covered from its first instruction; every event on a CPU
 * writes into that CPU's one forward ring, owned by a
 * dummy event that never goes away, which is what the caller polls. Next
 * to the breakpoints, one dummy event per (thread, CPU) reports exec and
 * new executable mappings of the target (COMM and MMAP records), so the
 * caller knows when to resolve its triggers again.
 *
 * One-shot (the default): the first hit disables every breakpoint; hits
 * that were already under way are counted, not returned. Multi: every hit
 * is returned and the breakpoints stay armed.
 */
#ifndef HT_BREAKPOINT_H
#define HT_BREAKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define HT_BP_MAX 4
/* Per (thread, CPU): a breakpoint per trigger, then the side-band event. */
#define HT_BP_FDS_PER_CPU (HT_BP_MAX + 1)

struct ht_bp_config {
	int tgid;
	int multi;	   /* every hit, breakpoints stay armed */
	int no_sideband;   /* no exec / mapping events (nor their descriptors) */
	int forks;	   /* hits of processes forked from the target (inherited) are returned */
	int start_disarmed; /* one-shot that fired elsewhere: set, but not armed */
	/* Descriptors per-thread events leave to what attaches after them (the monitor). */
	size_t fds_reserved;
	size_t ring_bytes; /* per CPU, rounded up to a power of two of pages; 0: 64 KiB */
};

struct ht_bp_hit {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t ip;
	uint64_t arg[3]; /* rdi, rsi, rdx at the breakpoint: the first three arguments */
	uint32_t pid, tid, cpu;
	int trigger; /* the slot given to ht_bp_set() */
	int regs_valid;
};

/* One drain: the new hits, time-ordered, and what else the rings said. */
struct ht_bp_hits {
	struct ht_bp_hit *v;
	size_t count, cap;
	unsigned int execs; /* the target exec'd: ht_bp_exec(), resolve, ht_bp_set() */
	unsigned int mmaps; /* it mapped new code (dlopen): resolve, ht_bp_set() */
	uint64_t in_flight; /* one-shot: hits after the first, or while disarmed */
	uint64_t stale;	    /* hits at an address no trigger had at the time */
	uint64_t foreign;   /* hits in another process (a fork inherits the events; not with forks) */
	uint64_t lost;	    /* records the kernel could not write: the ring was full */
	uint64_t malformed; /* records that did not parse */
};

struct ht_bp_ring {
	int fd; /* the dummy event that owns the ring: poll it */
	void *base;
	size_t mmap_len;
	size_t data_size;
};

struct ht_bp_thread {
	int tid;
	int *fds; /* [cpu * HT_BP_FDS_PER_CPU + slot]; -1: none */
};

/* Where a trigger was until it moved: hits from before still in the rings are its. */
#define HT_BP_PAST 4
struct ht_bp_past {
	uint64_t addr;
	uint64_t until_ns;
};

struct ht_breakpoints {
	struct ht_bp_config cfg;
	unsigned int ncpus;
	struct ht_bp_ring *rings;
	struct ht_bp_thread *threads;
	size_t nthreads, threads_cap;
	uint64_t addr[HT_BP_MAX]; /* 0: slot unused */
	struct ht_bp_past past[HT_BP_MAX][HT_BP_PAST];
	unsigned int past_next[HT_BP_MAX];
	int enabled;	    /* breakpoints armed (not disabled after a one-shot hit) */
	int fired;	    /* one-shot: a hit was returned since the last arm */
	int remove_on_exec; /* the kernel removes them at exec (5.13+); -1: not known yet */
	int modify;	    /* PERF_EVENT_IOC_MODIFY_ATTRIBUTES works; -1: not known yet */
	int owner_per_task; /* ring owners follow the target (no system-wide events) */
	uint8_t *scratch;   /* a record that wraps the ring, made whole */
	int open;
	/*
	 * Descriptors left under RLIMIT_NOFILE for this operation; a thread
	 * whose events do not fit is left without them (left_tids).
	 */
	size_t room;
	int *left_tids; /* threads ever left without every breakpoint */
	size_t nleft, left_cap;
};

/*
 * Whether an execute breakpoint fires on this machine: one on a function of
 * hybtrace's own, in a child process, hit a few times. 1: it fired; 0: the
 * kernel took it but it never fired (a virtual machine that does not give
 * its guests the debug registers), or it killed the child with a stray
 * SIGTRAP; -1 (errno): it could not be opened.
 */
int ht_bp_fires(void);

/*
 * Rings and side-band events for every thread of cfg->tgid; no breakpoint
 * yet. Threads whose events would not fit under RLIMIT_NOFILE are left out
 * (ht_bp_threads_left_out()); rings that do not fit are an error. 0 or -1.
 */
int ht_bp_open(struct ht_breakpoints *b, const struct ht_bp_config *cfg);
void ht_bp_close(struct ht_breakpoints *b);

/*
 * Put trigger SLOT (0..3) at runtime address ADDR on every thread; move it
 * if it was elsewhere (in place where the kernel can, else closed and
 * reopened); ADDR 0 removes it. Returns 0, or -1 with ht_last_error().
 */
int ht_bp_set(struct ht_breakpoints *b, unsigned int slot, uint64_t addr);

/* Arm every breakpoint again after a one-shot hit; hits still in the rings are dropped. */
int ht_bp_rearm(struct ht_breakpoints *b);
/* Disable every breakpoint (they stay set). */
int ht_bp_disarm(struct ht_breakpoints *b);
/*
 * The session ends: disable every breakpoint, so that the rings hold every
 * hit there will be; ht_bp_drain() then reads them as it would have.
 */
int ht_bp_stop(struct ht_breakpoints *b);

/* The descriptors to poll for input (one per CPU); returns how many, up to MAX into FDS. */
size_t ht_bp_poll_fds(const struct ht_breakpoints *b, int *fds, size_t max);

/*
 * Read every ring: new hits into OUT (emptied first) and the counts of the
 * rest. One-shot: at most one hit, and the first disables every
 * breakpoint. Returns 0, or -1 with ht_last_error().
 */
int ht_bp_drain(struct ht_breakpoints *b, struct ht_bp_hits *out);
void ht_bp_hits_free(struct ht_bp_hits *h);

/* Open events for threads TIDS (those not known yet). 0 or -1. */
int ht_bp_add_threads(struct ht_breakpoints *b, const int *tids, size_t n);
/* Open events for every thread of the target not known yet. 0 or -1. */
int ht_bp_rescan(struct ht_breakpoints *b);
/* Close the events of threads that have exited. */
void ht_bp_reap(struct ht_breakpoints *b);

/*
 * The target exec'd: its old image is gone. Every breakpoint is removed
 * (slots are then unused: resolve the triggers in the new image and
 * ht_bp_set() them again) and every thread's events are opened afresh.
 * Where the kernel lacks remove_on_exec (before 5.13), the breakpoints
 * stayed on the old addresses until this call: call it at once.
 */
int ht_bp_exec(struct ht_breakpoints *b);

/*
 * Threads that did not get every breakpoint, for want of descriptors under
 * RLIMIT_NOFILE (each counted once).
 */
size_t ht_bp_threads_left_out(const struct ht_breakpoints *b);

/*
 * What attaches after the breakpoints has attached: the threads left out
 * so far are tried again with every descriptor there is (cfg.fds_reserved
 * becomes 0), and only those still left out stay counted. 0 or -1.
 */
int ht_bp_retry_left_out(struct ht_breakpoints *b);

/* File descriptors needed for NTHREADS threads with NTRIGGERS triggers. */
size_t ht_bp_fds_needed(size_t nthreads, unsigned int ncpus, unsigned int ntriggers);

/*
 * Parse one record of a breakpoint ring (REC, LEN bytes, header included)
 * into OUT's hits and counters; hits not yet classified (trigger -1).
 * Exposed for tests.
 */
void ht_bp_parse_record(const uint8_t *rec, size_t len, int tgid, struct ht_bp_hits *out);

#endif /* HT_BREAKPOINT_H */
