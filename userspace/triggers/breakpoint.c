// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdbool.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "triggers/breakpoint.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/perf_event.h"
#include "base/proc.h"

#define DEFAULT_RING_BYTES (64u << 10)
#define SIDEBAND	   (HT_BP_MAX)

#define SAMPLE_TYPE                                                                                \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |                   \
	 PERF_SAMPLE_REGS_USER)
/* Written in bit order: dx, si, di. */
#define REGS_MASK                                                                                  \
	((1ULL << PERF_REG_X86_DX) | (1ULL << PERF_REG_X86_SI) | (1ULL << PERF_REG_X86_DI))

size_t ht_bp_fds_needed(size_t nthreads, unsigned int ncpus, unsigned int ntriggers)
{
	return nthreads * ncpus * (ntriggers + 1) + ncpus;
}

/* ---- Whether they fire here ---- */

/* Where ht_bp_fires() puts its breakpoint: a call the compiler must make. */
static __attribute__((noinline)) int fires_probe_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

/* The probe itself, in the process ht_bp_fires() forks: 1 fired, 0 never, -1 (errno) not opened. */
static int probe_fires(void)
{
	int (*volatile call)(int) = fires_probe_target;
	struct perf_event_attr attr;
	volatile int sink = 0;
	uint64_t count = 0;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_BREAKPOINT;
	attr.size = sizeof(attr);
	attr.bp_type = HW_BREAKPOINT_X;
	attr.bp_addr = (uint64_t)(uintptr_t)fires_probe_target;
	attr.bp_len = sizeof(long);
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = ht_perf_event_open(&attr, 0, -1);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		sink += call(i);
	if (read(fd, &count, sizeof(count)) != (ssize_t)sizeof(count)) {
		close(fd);
		return -1;
	}
	close(fd);
	return count > 0;
}

/*
 * In a child of its own: a virtual machine may deliver a debug exception
 * after its breakpoint is gone, and the kernel then sends the task SIGTRAP,
 * which would kill the caller (seen once, the unit tests' own process). A
 * child killed so says the breakpoints misbehave here: 0. Its exit status
 * carries the answer, and errno + 2 where the event could not be opened.
 */
int ht_bp_fires(void)
{
	int status, rc;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		rc = probe_fires();
		_exit(rc >= 0 ? rc : 2 + (errno > 0 && errno < 250 ? errno : EIO));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(status))
		return 0;
	rc = WEXITSTATUS(status);
	if (rc < 2)
		return rc;
	errno = rc - 2;
	return -1;
}

/* ---- Attributes ---- */

static void bp_attr(const struct ht_breakpoints *b, uint64_t addr, struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_BREAKPOINT;
	a->size = sizeof(*a);
	a->bp_type = HW_BREAKPOINT_X;
	a->bp_addr = addr;
	a->bp_len = sizeof(long);
	a->sample_period = 1;
	a->sample_type = SAMPLE_TYPE;
	a->sample_regs_user = REGS_MASK;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->inherit = 1;
	a->wakeup_events = 1;
	a->remove_on_exec = b->remove_on_exec != 0;
	a->disabled = !b->enabled;
}

/* Exec and new code of the target's threads: COMM (with the exec flag) and MMAP records. */
static void sideband_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_SOFTWARE;
	a->size = sizeof(*a);
	a->config = PERF_COUNT_SW_DUMMY;
	a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a->sample_id_all = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->mmap = 1; /* executable mappings only */
	a->inherit = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
}

/* The ring's owner: records nothing itself; every record wakes the poller. */
static void owner_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_SOFTWARE;
	a->size = sizeof(*a);
	a->config = PERF_COUNT_SW_DUMMY;
	a->use_clockid = 1; /* SET_OUTPUT wants one clock per ring */
	a->clockid = CLOCK_MONOTONIC;
	a->watermark = 1;
	a->wakeup_watermark = 1;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
}

/* ---- Descriptors ---- */

static unsigned int slots_used(const struct ht_breakpoints *b)
{
	unsigned int n = 0;

	for (int s = 0; s < HT_BP_MAX; s++)
		n += b->addr[s] != 0;
	return n;
}

/* What RLIMIT_NOFILE leaves now: threads whose events do not fit are left out. */
static void measure_room(struct ht_breakpoints *b)
{
	size_t room = ht_fds_room();

	b->room = room > b->cfg.fds_reserved ? room - b->cfg.fds_reserved : 0;
}

/* TID did not get every event it should have: counted once. */
static void leave_out(struct ht_breakpoints *b, int tid)
{
	for (size_t i = 0; i < b->nleft; i++)
		if (b->left_tids[i] == tid)
			return;
	if (b->nleft == b->left_cap) {
		size_t cap = b->left_cap ? b->left_cap * 2 : 16;
		int *v = realloc(b->left_tids, cap * sizeof(*v));

		if (!v)
			return;
		b->left_tids = v;
		b->left_cap = cap;
	}
	b->left_tids[b->nleft++] = tid;
}

size_t ht_bp_threads_left_out(const struct ht_breakpoints *b)
{
	return b->nleft;
}

int ht_bp_retry_left_out(struct ht_breakpoints *b)
{
	size_t n = b->nleft;
	int *tids = b->left_tids;
	int rc;

	b->cfg.fds_reserved = 0;
	if (!n)
		return 0;
	/* Threads born since inherited their events: only these have none. */
	b->left_tids = NULL;
	b->nleft = b->left_cap = 0;
	rc = ht_bp_add_threads(b, tids, n);
	free(tids);
	return rc;
}

static int *fd_at(struct ht_bp_thread *t, unsigned int cpu, int slot)
{
	return &t->fds[cpu * HT_BP_FDS_PER_CPU + (unsigned int)slot];
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- Rings ---- */

static int map_ring(struct ht_breakpoints *b, unsigned int cpu)
{
	struct ht_bp_ring *r = &b->rings[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_event_attr a;
	int fd;

	owner_attr(&a);
	/* System-wide, so it never hangs up: a per-task one does when its task exits. */
	fd = b->owner_per_task ? -1 : ht_perf_event_open(&a, -1, (int)cpu);
	if (fd < 0 && (b->owner_per_task || errno == EACCES || errno == EPERM)) {
		b->owner_per_task = 1;
		fd = ht_perf_event_open(&a, b->cfg.tgid, (int)cpu);
	}
	if (fd < 0)
		return ht_fail("cannot open the trigger ring's event on CPU %u: %s", cpu,
			       strerror(errno));
	r->data_size = ht_perf_ring_data_bytes(b->cfg.ring_bytes);
	r->mmap_len = r->data_size + page;
	r->base = ht_perf_ring_map(fd, r->data_size, true);
	if (!r->base) {
		close(fd);
		return ht_fail("cannot map a trigger ring of %zu bytes: %s", r->data_size,
			       strerror(errno));
	}
	r->fd = fd;
	return 0;
}

/* ---- Threads ---- */

static struct ht_bp_thread *find_thread(struct ht_breakpoints *b, int tid)
{
	for (size_t i = 0; i < b->nthreads; i++)
		if (b->threads[i].tid == tid)
			return &b->threads[i];
	return NULL;
}

static struct ht_bp_thread *add_thread(struct ht_breakpoints *b, int tid)
{
	size_t nfds = (size_t)b->ncpus * HT_BP_FDS_PER_CPU;
	struct ht_bp_thread *t;

	if (b->nthreads == b->threads_cap) {
		size_t cap = b->threads_cap ? b->threads_cap * 2 : 16;
		struct ht_bp_thread *v = realloc(b->threads, cap * sizeof(*v));

		if (!v)
			return NULL;
		b->threads = v;
		b->threads_cap = cap;
	}
	t = &b->threads[b->nthreads];
	t->tid = tid;
	t->fds = malloc(nfds * sizeof(*t->fds));
	if (!t->fds)
		return NULL;
	for (size_t i = 0; i < nfds; i++)
		t->fds[i] = -1;
	b->nthreads++;
	return t;
}

static int share_ring(struct ht_breakpoints *b, int fd, unsigned int cpu)
{
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, b->rings[cpu].fd))
		return ht_fail("cannot share CPU %u's trigger ring: %s", cpu, strerror(errno));
	return 0;
}

/*
 * Breakpoint SLOT of thread T on CPU. Returns 0; 1 when the thread is gone; 2 when no
 * descriptor is left;
 * -1 with ht_fail().
 */
static int open_bp(struct ht_breakpoints *b, struct ht_bp_thread *t, unsigned int cpu, int slot)
{
	struct perf_event_attr a;
	int fd;

	bp_attr(b, b->addr[slot], &a);
	fd = ht_perf_event_open(&a, t->tid, (int)cpu);
	/* remove_on_exec came with 5.13: without it, the caller reopens at exec. */
	if (fd < 0 && errno == EINVAL && b->remove_on_exec < 0) {
		a.remove_on_exec = 0;
		fd = ht_perf_event_open(&a, t->tid, (int)cpu);
		if (fd >= 0)
			b->remove_on_exec = 0;
	}
	if (fd < 0) {
		if (errno == ESRCH)
			return 1;
		if (errno == EMFILE || errno == ENFILE)
			return 2;
		if (errno == ENOSPC)
			return ht_fail("no free debug register for thread %d (x86 has 4 per "
				       "thread; a debugger, perf or another hybtrace may hold "
				       "them)",
				       t->tid);
		return ht_fail("cannot open a breakpoint at 0x%llx for thread %d on CPU %u: %s",
			       (unsigned long long)b->addr[slot], t->tid, cpu, strerror(errno));
	}
	if (b->remove_on_exec < 0)
		b->remove_on_exec = 1;
	*fd_at(t, cpu, slot) = fd;
	return share_ring(b, fd, cpu);
}

static int open_sideband(struct ht_breakpoints *b, struct ht_bp_thread *t, unsigned int cpu)
{
	struct perf_event_attr a;
	int fd;

	sideband_attr(&a);
	fd = ht_perf_event_open(&a, t->tid, (int)cpu);
	if (fd < 0) {
		if (errno == ESRCH)
			return 1;
		if (errno == EMFILE || errno == ENFILE)
			return 2;
		return ht_fail("cannot open the exec/mmap watch for thread %d on CPU %u: %s",
			       t->tid, cpu, strerror(errno));
	}
	*fd_at(t, cpu, SIDEBAND) = fd;
	return share_ring(b, fd, cpu);
}

/* The descriptors thread T lacks. */
static size_t fds_missing(const struct ht_breakpoints *b, struct ht_bp_thread *t)
{
	size_t n = 0;

	for (unsigned int cpu = 0; cpu < b->ncpus; cpu++) {
		n += !b->cfg.no_sideband && *fd_at(t, cpu, SIDEBAND) < 0;
		for (int s = 0; s < HT_BP_MAX; s++)
			n += b->addr[s] && *fd_at(t, cpu, s) < 0;
	}
	return n;
}

/* The descriptors a thread with none needs. */
static size_t fds_needed_fresh(const struct ht_breakpoints *b)
{
	return (size_t)b->ncpus * ((b->cfg.no_sideband ? 0 : 1) + slots_used(b));
}

/*
 * Every event thread T lacks. Returns 0 (also when it is gone), 2 when they
 * do not fit under RLIMIT_NOFILE (nothing opened; T left out), or -1.
 */
static int open_thread_events(struct ht_breakpoints *b, struct ht_bp_thread *t)
{
	size_t need = fds_missing(b, t);

	if (need > b->room) {
		leave_out(b, t->tid);
		return 2;
	}
	b->room -= need;
	for (unsigned int cpu = 0; cpu < b->ncpus; cpu++) {
		int rc = 0;

		if (!b->cfg.no_sideband && *fd_at(t, cpu, SIDEBAND) < 0)
			rc = open_sideband(b, t, cpu);
		for (int s = 0; s < HT_BP_MAX && !rc; s++)
			if (b->addr[s] && *fd_at(t, cpu, s) < 0)
				rc = open_bp(b, t, cpu, s);
		if (rc == 2)
			leave_out(b, t->tid);
		if (rc)
			return rc < 0 ? -1 : rc == 2 ? 2 : 0;
	}
	return 0;
}

static void free_thread(struct ht_breakpoints *b, struct ht_bp_thread *t);

/* Returns 0, 2 when left out (not kept: a later scan tries again), or -1. */
static int open_tid(struct ht_breakpoints *b, int tid)
{
	struct ht_bp_thread *t = find_thread(b, tid);
	bool fresh = !t;
	int rc;

	if (!t) {
		t = add_thread(b, tid);
		if (!t)
			return ht_fail("out of memory");
	}
	rc = open_thread_events(b, t);
	if (rc == 2 && fresh && fds_missing(b, t) == fds_needed_fresh(b)) {
		free_thread(b, t);
		b->nthreads--;
	}
	return rc;
}

/* ht_proc_cover_threads()'s callback: a breakpoint set on each thread not yet covered. */
static int cover_thread(void *ctx, int tid)
{
	struct ht_breakpoints *b = ctx;
	int rc;

	if (find_thread(b, tid))
		return 0;
	rc = open_tid(b, tid);
	return rc < 0 ? -1 : rc == 0;
}

/* A target already gone is no error: the session sees the exit. */
int ht_bp_rescan(struct ht_breakpoints *b)
{
	measure_room(b);
	return ht_proc_cover_threads(b->cfg.tgid, cover_thread, b, true);
}

int ht_bp_add_threads(struct ht_breakpoints *b, const int *tids, size_t n)
{
	measure_room(b);
	for (size_t i = 0; i < n; i++)
		if (tids[i] > 0 && open_tid(b, tids[i]) < 0)
			return -1;
	return 0;
}

static int thread_alive(int tgid, int tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", tgid, tid);
	return access(path, F_OK) == 0;
}

static void free_thread(struct ht_breakpoints *b, struct ht_bp_thread *t)
{
	for (size_t i = 0; i < (size_t)b->ncpus * HT_BP_FDS_PER_CPU; i++)
		close_fd(&t->fds[i]);
	free(t->fds);
}

void ht_bp_reap(struct ht_breakpoints *b)
{
	size_t out = 0;

	for (size_t i = 0; i < b->nthreads; i++) {
		if (thread_alive(b->cfg.tgid, b->threads[i].tid))
			b->threads[out++] = b->threads[i];
		else
			free_thread(b, &b->threads[i]);
	}
	b->nthreads = out;
}

/* ---- Lifecycle ---- */

int ht_bp_open(struct ht_breakpoints *b, const struct ht_bp_config *cfg)
{
	int ncpus = libbpf_num_possible_cpus();

	memset(b, 0, sizeof(*b));
	b->cfg = *cfg;
	if (!b->cfg.ring_bytes)
		b->cfg.ring_bytes = DEFAULT_RING_BYTES;
	if (ncpus <= 0)
		return ht_fail("cannot count CPUs");
	if (cfg->tgid <= 0)
		return ht_fail("no target process for triggers");
	b->ncpus = (unsigned int)ncpus;
	b->enabled = 1;
	b->remove_on_exec = -1;
	b->modify = -1;
	b->rings = calloc(b->ncpus, sizeof(*b->rings));
	b->scratch = malloc(1u << 16);
	if (!b->rings || !b->scratch) {
		free(b->rings);
		free(b->scratch);
		return ht_fail("out of memory");
	}
	for (unsigned int c = 0; c < b->ncpus; c++)
		b->rings[c].fd = -1;
	b->enabled = !cfg->start_disarmed;
	b->open = 1;
	b->room = ht_fds_room();
	if (b->room < b->ncpus) {
		ht_fail("triggers: no descriptor left under RLIMIT_NOFILE for pid %d's rings "
			"(raise it with ulimit -n)",
			cfg->tgid);
		goto fail;
	}
	for (unsigned int c = 0; c < b->ncpus; c++)
		if (map_ring(b, c))
			goto fail;
	if (ht_bp_rescan(b))
		goto fail;
	return 0;
fail:
	ht_bp_close(b);
	return -1;
}

void ht_bp_close(struct ht_breakpoints *b)
{
	if (!b->open)
		return;
	for (size_t i = 0; i < b->nthreads; i++)
		free_thread(b, &b->threads[i]);
	for (unsigned int c = 0; c < b->ncpus; c++) {
		if (b->rings[c].base)
			munmap(b->rings[c].base, b->rings[c].mmap_len);
		close_fd(&b->rings[c].fd);
	}
	free(b->threads);
	free(b->rings);
	free(b->scratch);
	free(b->left_tids);
	memset(b, 0, sizeof(*b));
}

size_t ht_bp_poll_fds(const struct ht_breakpoints *b, int *fds, size_t max)
{
	size_t n = 0;

	for (unsigned int c = 0; c < b->ncpus && n < max; c++)
		if (b->rings[c].fd >= 0)
			fds[n++] = b->rings[c].fd;
	return n;
}

/* ---- Setting, moving, arming ---- */

/* SLOT leaves its address: hits there until now, still in the rings, remain its hits. */
static void remember_move(struct ht_breakpoints *b, int slot)
{
	struct ht_bp_past *p;

	if (!b->addr[slot])
		return;
	p = &b->past[slot][b->past_next[slot]++ % HT_BP_PAST];
	p->addr = b->addr[slot];
	p->until_ns = ht_monotonic_ns();
}

static void close_slot(struct ht_breakpoints *b, int slot)
{
	for (size_t i = 0; i < b->nthreads; i++)
		for (unsigned int c = 0; c < b->ncpus; c++)
			close_fd(fd_at(&b->threads[i], c, slot));
}

/* Move SLOT's events to b->addr[slot] in place. Returns 0, 1 when the kernel cannot. */
static int modify_slot(struct ht_breakpoints *b, int slot)
{
	struct perf_event_attr a;

	if (!b->modify)
		return 1;
	bp_attr(b, b->addr[slot], &a);
	for (size_t i = 0; i < b->nthreads; i++) {
		for (unsigned int c = 0; c < b->ncpus; c++) {
			int *fd = fd_at(&b->threads[i], c, slot);

			if (*fd < 0 || !ioctl(*fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &a)) {
				if (*fd >= 0)
					b->modify = 1;
				continue;
			}
			/* Not supported for these events (before 4.17, or this kind): reopen all.
			 */
			if (b->modify < 0 &&
			    (errno == EINVAL || errno == ENOTTY || errno == EOPNOTSUPP)) {
				b->modify = 0;
				return 1;
			}
			/* This one alone (its thread exiting): reopened below. */
			close_fd(fd);
		}
	}
	return 0;
}

int ht_bp_set(struct ht_breakpoints *b, unsigned int slot, uint64_t addr)
{
	int had;

	if (slot >= HT_BP_MAX)
		return ht_fail("trigger %u: at most %d triggers (debug registers)", slot,
			       HT_BP_MAX);
	for (int s = 0; s < HT_BP_MAX; s++)
		if (addr && (unsigned int)s != slot && b->addr[s] == addr)
			return ht_fail("triggers %d and %u would be one breakpoint at 0x%llx", s,
				       slot, (unsigned long long)addr);
	if (b->addr[slot] == addr)
		return 0;
	had = b->addr[slot] != 0;
	remember_move(b, (int)slot);
	b->addr[slot] = addr;
	if (!addr) {
		close_slot(b, (int)slot);
		return 0;
	}
	if (had && modify_slot(b, (int)slot))
		close_slot(b, (int)slot);
	measure_room(b);
	/* Known threads first, then any born meanwhile (they inherit from here on). */
	for (size_t i = 0; i < b->nthreads; i++)
		if (open_thread_events(b, &b->threads[i]) < 0)
			goto fail;
	if (ht_bp_rescan(b))
		goto fail;
	return 0;
fail:
	close_slot(b, (int)slot);
	b->addr[slot] = 0;
	return -1;
}

static int for_each_bp(struct ht_breakpoints *b, unsigned long request)
{
	for (size_t i = 0; i < b->nthreads; i++)
		for (unsigned int c = 0; c < b->ncpus; c++)
			for (int s = 0; s < HT_BP_MAX; s++) {
				int fd = *fd_at(&b->threads[i], c, s);

				/* Also stops the events inherited from it. */
				if (fd >= 0 && ioctl(fd, request, 0) && errno != ESRCH)
					return ht_fail("cannot %s a breakpoint: %s",
						       request == PERF_EVENT_IOC_ENABLE ? "enable"
											: "disable",
						       strerror(errno));
			}
	return 0;
}

int ht_bp_disarm(struct ht_breakpoints *b)
{
	b->enabled = 0;
	return for_each_bp(b, PERF_EVENT_IOC_DISABLE);
}

/* Armed or not as before (b->enabled): the last drain judges its hits as any other. */
int ht_bp_stop(struct ht_breakpoints *b)
{
	return for_each_bp(b, PERF_EVENT_IOC_DISABLE);
}

/* ---- Reading the rings ---- */

struct reader {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t take_u64(struct reader *r)
{
	uint64_t v;

	if (r->end - r->p < 8) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

static struct ht_bp_hit *push_hit(struct ht_bp_hits *h)
{
	if (h->count == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct ht_bp_hit *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		h->v = v;
		h->cap = cap;
	}
	memset(&h->v[h->count], 0, sizeof(h->v[0]));
	return &h->v[h->count];
}

static void parse_sample(struct reader *r, int tgid, int forks, struct ht_bp_hits *out)
{
	struct ht_bp_hit hit = {.trigger = -1};
	struct ht_bp_hit *slot;
	uint64_t v, abi;

	hit.ip = take_u64(r);
	v = take_u64(r);
	hit.pid = (uint32_t)v;
	hit.tid = (uint32_t)(v >> 32);
	hit.time_ns = take_u64(r);
	hit.cpu = (uint32_t)take_u64(r);
	abi = take_u64(r);
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		uint64_t dx = take_u64(r), si = take_u64(r), di = take_u64(r);

		hit.arg[0] = di;
		hit.arg[1] = si;
		hit.arg[2] = dx;
		hit.regs_valid = 1;
	}
	if (r->bad)
		return; /* counted by the caller */
	if ((int)hit.pid != tgid && !forks) {
		out->foreign++;
		return;
	}
	slot = push_hit(out);
	if (!slot) {
		out->lost++; /* no memory: as good as lost */
		return;
	}
	*slot = hit;
	out->count++;
}

static void parse_record(const uint8_t *rec, size_t len, int tgid, int forks,
			 struct ht_bp_hits *out)
{
	struct perf_event_header h;
	struct reader r;
	uint64_t v;

	if (len < sizeof(h)) {
		out->malformed++;
		return;
	}
	memcpy(&h, rec, sizeof(h));
	if (h.size > len || h.size < sizeof(h)) {
		out->malformed++;
		return;
	}
	r = (struct reader){rec + sizeof(h), rec + h.size, 0};
	switch (h.type) {
	case PERF_RECORD_SAMPLE:
		parse_sample(&r, tgid, forks, out);
		break;
	case PERF_RECORD_COMM:
		/* Exec: the new image's addresses are not the old ones. */
		v = take_u64(&r);
		if (!r.bad && (int)(uint32_t)v == tgid && (h.misc & PERF_RECORD_MISC_COMM_EXEC))
			out->execs++;
		break;
	case PERF_RECORD_MMAP:
		v = take_u64(&r);
		if (!r.bad && (int)(uint32_t)v == tgid)
			out->mmaps++;
		break;
	case PERF_RECORD_LOST:
		take_u64(&r); /* id */
		v = take_u64(&r);
		if (!r.bad)
			out->lost += v;
		break;
	}
	if (r.bad)
		out->malformed++;
}

void ht_bp_parse_record(const uint8_t *rec, size_t len, int tgid, struct ht_bp_hits *out)
{
	parse_record(rec, len, tgid, 0, out);
}

/* Everything CPU C's ring holds now, into OUT; the ring is then empty. */
static void read_ring(struct ht_breakpoints *b, unsigned int c, struct ht_bp_hits *out)
{
	struct ht_bp_ring *r = &b->rings[c];
	struct perf_event_mmap_page *page = r->base;
	const uint8_t *data;
	uint64_t head, tail, mask = r->data_size - 1;

	if (!r->base)
		return;
	data = (const uint8_t *)r->base + (r->mmap_len - r->data_size);
	head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
	tail = page->data_tail;
	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		size_t at = (size_t)(tail & mask), first;
		const uint8_t *rec;

		first = r->data_size - at < sizeof(h) ? r->data_size - at : sizeof(h);
		memcpy(&h, data + at, first);
		memcpy((uint8_t *)&h + first, data, sizeof(h) - first);
		if (h.size < sizeof(h) || tail + h.size > head) {
			out->malformed++;
			break;
		}
		if (at + h.size <= r->data_size) {
			rec = data + at;
		} else {
			first = r->data_size - at;
			memcpy(b->scratch, data + at, first);
			memcpy(b->scratch + first, data, h.size - first);
			rec = b->scratch;
		}
		parse_record(rec, h.size, b->cfg.tgid, b->cfg.forks, out);
		tail += h.size;
	}
	__atomic_store_n(&page->data_tail, head, __ATOMIC_RELEASE);
}

static void read_rings(struct ht_breakpoints *b, struct ht_bp_hits *out)
{
	for (unsigned int c = 0; c < b->ncpus; c++)
		read_ring(b, c, out);
}

static int hit_cmp(const void *x, const void *y)
{
	const struct ht_bp_hit *a = x, *b = y;

	if (a->time_ns != b->time_ns)
		return a->time_ns < b->time_ns ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* The trigger hit H belongs to: where it is now, or where it was then; -1 if none. */
static int trigger_of(const struct ht_breakpoints *b, const struct ht_bp_hit *h)
{
	for (int s = 0; s < HT_BP_MAX; s++)
		if (b->addr[s] && b->addr[s] == h->ip)
			return s;
	for (int s = 0; s < HT_BP_MAX; s++)
		for (int k = 0; k < HT_BP_PAST; k++)
			if (b->past[s][k].addr == h->ip && h->time_ns <= b->past[s][k].until_ns)
				return s;
	return -1;
}

/* Name the trigger of each hit in OUT from FROM on; drop stale ones; time order. */
static void classify(struct ht_breakpoints *b, struct ht_bp_hits *out, size_t from)
{
	size_t n = from;

	for (size_t i = from; i < out->count; i++) {
		struct ht_bp_hit *h = &out->v[i];

		h->trigger = trigger_of(b, h);
		if (h->trigger < 0) {
			out->stale++;
			continue;
		}
		out->v[n++] = *h;
	}
	out->count = n;
	if (out->count - from > 1)
		qsort(out->v + from, out->count - from, sizeof(out->v[0]), hit_cmp);
}

/* Read and drop every hit in the rings, counting them in flight. */
static void discard_hits(struct ht_breakpoints *b, struct ht_bp_hits *out)
{
	size_t keep = out->count;

	read_rings(b, out);
	classify(b, out, keep);
	out->in_flight += out->count - keep;
	out->count = keep;
}

int ht_bp_drain(struct ht_breakpoints *b, struct ht_bp_hits *out)
{
	struct ht_bp_hit *v = out->v;
	size_t cap = out->cap;

	memset(out, 0, sizeof(*out));
	out->v = v;
	out->cap = cap;
	read_rings(b, out);
	classify(b, out, 0);
	if (b->cfg.multi || !out->count)
		return 0;
	if (b->fired || !b->enabled) {
		out->in_flight += out->count;
		out->count = 0;
		return 0;
	}
	/* One-shot: the first hit is the trigger; the rest were already on their way. */
	out->in_flight += out->count - 1;
	out->count = 1;
	b->fired = 1;
	if (ht_bp_disarm(b))
		return -1;
	/* Hits written before the disable took effect on every CPU. */
	discard_hits(b, out);
	return 0;
}

int ht_bp_rearm(struct ht_breakpoints *b)
{
	struct ht_bp_hits old = {0};

	/* Whatever the rings hold is from before: not a new trigger. */
	discard_hits(b, &old);
	b->enabled = 1;
	b->fired = 0;
	if (for_each_bp(b, PERF_EVENT_IOC_ENABLE)) {
		ht_bp_hits_free(&old);
		return -1;
	}
	ht_bp_hits_free(&old);
	return 0;
}

void ht_bp_hits_free(struct ht_bp_hits *h)
{
	free(h->v);
	memset(h, 0, sizeof(*h));
}

int ht_bp_exec(struct ht_breakpoints *b)
{
	for (int s = 0; s < HT_BP_MAX; s++) {
		remember_move(b, s);
		b->addr[s] = 0;
	}
	/*
	 * Every thread anew: a thread other than the leader that execs takes the
	 * leader's tid, so the events we hold under either tid may be the dead
	 * one's. The caller reads the maps after this: nothing mapped is missed.
	 */
	for (size_t i = 0; i < b->nthreads; i++)
		free_thread(b, &b->threads[i]);
	b->nthreads = 0;
	return ht_bp_rescan(b);
}
