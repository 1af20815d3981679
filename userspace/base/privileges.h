/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which capabilities this process holds, what a feature is missing, and the
 * drop to the few that monitoring still needs once everything is attached.
 */
#ifndef HT_PRIVILEGES_H
#define HT_PRIVILEGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Capability numbers (linux/capability.h), named here so old headers do not matter. */
#define HT_CAP_CHOWN		   0
#define HT_CAP_DAC_OVERRIDE	   1
#define HT_CAP_DAC_READ_SEARCH	   2
#define HT_CAP_FOWNER		   3
#define HT_CAP_KILL		   5
#define HT_CAP_SETPCAP		   8
#define HT_CAP_IPC_LOCK		   14
#define HT_CAP_SYS_PTRACE	   19
#define HT_CAP_SYS_ADMIN	   21
#define HT_CAP_SYS_NICE		   23
#define HT_CAP_SYSLOG		   34
#define HT_CAP_PERFMON		   38
#define HT_CAP_BPF		   39
#define HT_CAP_CHECKPOINT_RESTORE  40

/* Whether the effective set holds capability CAP. */
bool ht_has_capability(int cap);

/*
 * The monitor needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). Returns 0, or
 * -1 with a one-line reason naming the missing capability.
 */
int ht_check_monitor_privileges(void);

/*
 * Watching another user's process (its threads' perf events, its memory, its
 * files through /proc/PID/map_files) needs CAP_SYS_PTRACE. Returns 0, or -1
 * with the reason.
 */
int ht_check_target_privileges(int tgid);

/*
 * Drop every capability that monitoring no longer needs, from the calling
 * thread and the bounding set; call it before any other thread starts.
 * BPF_PROBE does one map operation on an attached map: where the kernel still
 * asks CAP_BPF for that (before 6.5, with unprivileged BPF disabled), CAP_BPF
 * is kept. ALSO_KEEP: capabilities this session needs beyond the usual ones
 * (CAP_SYS_ADMIN where perf events need it: ht_perf_access()). Returns 0, or
 * -1 with the reason; *KEPT says what stayed.
 */
int ht_drop_capabilities(int (*bpf_probe)(void *ctx), void *ctx, uint64_t also_keep,
			 uint64_t *kept);

/*
 * What opening perf events (sampling, Intel PT, triggers) needs here. Up to
 * kernel.perf_event_paranoid 2, CAP_PERFMON (or CAP_SYS_ADMIN). Above 2,
 * mainline behaves as at 2, but Debian's kernels (its patch "security,perf:
 * Allow further restriction of perf_event_open"), as Android's, refuse
 * every perf_event_open without CAP_SYS_ADMIN; later versions of that patch
 * accept CAP_PERFMON too. Which one this kernel is, is found by trying.
 */
enum ht_perf_access {
	HT_PERF_AS_USUAL,   /* CAP_PERFMON is enough */
	HT_PERF_KEEP_ADMIN, /* only CAP_SYS_ADMIN, which is held: keep it while events open */
	HT_PERF_NO_ADMIN,   /* only CAP_SYS_ADMIN, which is not held: no perf event opens */
};

/* kernel.perf_event_paranoid, or 2 (the kernel's default) where it cannot be read. */
int ht_perf_paranoid(void);

/*
 * The decision, from PARANOID, whether the kernel refused a perf_event_open
 * to this process without CAP_SYS_ADMIN (REFUSED), and the EFFECTIVE set.
 */
enum ht_perf_access ht_perf_access_decide(int paranoid, bool refused, uint64_t effective);

/* The same for this process on this kernel; *PARANOID (if not NULL) gets the level. */
enum ht_perf_access ht_perf_access(int *paranoid);

/* One line: what perf events need at PARANOID with access A ("CAP_PERFMON ..."). */
const char *ht_perf_access_describe(enum ht_perf_access a, int paranoid, char *buf, size_t len);

#endif /* HT_PRIVILEGES_H */
