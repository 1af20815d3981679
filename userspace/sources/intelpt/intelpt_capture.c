// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Opening Intel PT for every thread of the target: one AUX area and one
 * sideband ring per CPU, events per (thread, CPU), and their closing as
 * threads exit; or events per CPU for a cgroup or every task. The design
 * is in intelpt_capture.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_private.h"
#include "base/log.h"
#include "base/perf_event.h"
#include "base/proc.h"

/* ---- the AUX area ---- */

static size_t first_nonzero(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && ((uintptr_t)(p + i) & 7))
		if (p[i++])
			return i - 1;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		if (w)
			break;
	}
	for (; i < n; i++)
		if (p[i])
			return i;
	return n;
}

size_t ht_intelpt_ring_copy(const uint8_t *area, size_t size, uint64_t head, uint8_t *out)
{
	size_t h, skip, start, n, first;

	if (!size || (size & (size - 1)))
		return 0;
	h = (size_t)(head & (size - 1));
	/* The oldest end: zeros the hardware never wrote, up to the first byte it did. */
	skip = first_nonzero(area + h, size - h);
	if (skip == size - h)
		skip += first_nonzero(area, h);
	if (skip == size)
		return 0;
	start = (h + skip) & (size - 1);
	n = size - skip;
	first = size - start < n ? size - start : n;
	memcpy(out, area + start, first);
	memcpy(out + first, area, n - first);
	return n;
}

/* ---- capture ---- */

uint64_t ht_intelpt_memory_needed(uint64_t aux_bytes, uint64_t sideband_bytes, unsigned int ncpus,
				  bool sideband_only)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t per_cpu = sideband_bytes + page;

	if (!sideband_only)
		per_cpu += aux_bytes + (1 + HT_INTELPT_DATA_PAGES) * page;
	return per_cpu * ncpus;
}

size_t ht_intelpt_fds_needed(size_t nthreads, unsigned int ncpus)
{
	return nthreads * ncpus * 2;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The online CPUs, from "0-3,5" in /sys/devices/system/cpu/online (all when unreadable). */
static void read_online(bool *online, unsigned int ncpus)
{
	char text[4096], *p = text;

	if (ht_intelpt_read_text("/sys/devices/system/cpu/online", text, sizeof(text))) {
		for (unsigned int c = 0; c < ncpus; c++)
			online[c] = true;
		return;
	}
	while (*p) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p)
			break;
		p = end;
		if (*p == '-')
			hi = strtoul(p + 1, &p, 10);
		for (unsigned long c = lo; c <= hi && c < ncpus; c++)
			online[c] = true;
		if (*p == ',')
			p++;
	}
}

static uint64_t boot_ticks_now(void)
{
	long hz = sysconf(_SC_CLK_TCK);

	return clock_ns(CLOCK_BOOTTIME) / (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
}

/* When TID started, in clock ticks since boot (/proc/TGID/task/TID/stat field 22); 0: unknown. */
static uint64_t thread_start_ticks(int tgid, int tid)
{
	char path[64], text[1024], *p;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", tgid, tid);
	if (ht_intelpt_read_text(path, text, sizeof(text)))
		return 0;
	/* The comm may hold spaces and parentheses: fields count from the last ')'. */
	p = strrchr(text, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	return start;
}

static bool thread_alive(int tgid, int tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", tgid, tid);
	return access(path, F_OK) == 0;
}

static struct ht_intelpt_thread *find_thread(struct ht_intelpt *pt, int tid)
{
	for (size_t i = 0; i < pt->nthreads; i++)
		if (pt->threads[i].tid == tid)
			return &pt->threads[i];
	return NULL;
}

static struct ht_intelpt_thread *add_thread(struct ht_intelpt *pt, int tgid, int tid)
{
	struct ht_intelpt_thread *t;

	if (pt->nthreads == pt->threads_cap) {
		size_t cap = pt->threads_cap ? pt->threads_cap * 2 : 16;
		struct ht_intelpt_thread *v = realloc(pt->threads, cap * sizeof(*v));

		if (!v)
			return NULL;
		pt->threads = v;
		pt->threads_cap = cap;
	}
	t = &pt->threads[pt->nthreads];
	t->tgid = tgid;
	t->tid = tid;
	t->pt_fds = malloc(pt->ncpus * sizeof(*t->pt_fds));
	t->sb_fds = malloc(pt->ncpus * sizeof(*t->sb_fds));
	if (!t->pt_fds || !t->sb_fds) {
		free(t->pt_fds);
		free(t->sb_fds);
		return NULL;
	}
	for (unsigned int c = 0; c < pt->ncpus; c++)
		t->pt_fds[c] = t->sb_fds[c] = -1;
	pt->nthreads++;
	return t;
}

static const char *locked_hint(int err)
{
	return err == EPERM || err == ENOMEM ? " (locked memory: run as root, or lower --pt-size)"
					     : "";
}

static int map_area(struct ht_intelpt *pt, unsigned int cpu, int fd, int tid)
{
	struct ht_intelpt_area *a = &pt->areas[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *pg;

	a->base_len = (1 + HT_INTELPT_DATA_PAGES) * page;
	a->base = mmap(NULL, a->base_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->base == MAP_FAILED) {
		int err = errno;

		a->base = NULL;
		return ht_fail("cannot map the Intel PT event of CPU %u: %s%s", cpu, strerror(err),
			       locked_hint(err));
	}
	/* Where the AUX area goes, said before it is mapped. */
	pg = a->base;
	pg->aux_offset = a->base_len;
	pg->aux_size = pt->cfg.aux_bytes;
	/* Read-only: overwrite (snapshot) mode, aux_head wraps inside the area. */
	a->aux = mmap(NULL, pt->cfg.aux_bytes, PROT_READ, MAP_SHARED, fd, (off_t)a->base_len);
	if (a->aux == MAP_FAILED) {
		int err = errno;

		a->aux = NULL;
		munmap(a->base, a->base_len);
		a->base = NULL;
		return ht_fail("cannot map a %" PRIu64 "-byte Intel PT area on CPU %u: %s%s",
			       pt->cfg.aux_bytes, cpu, strerror(err), locked_hint(err));
	}
	a->aux_len = pt->cfg.aux_bytes;
	a->fd = fd;
	a->tid = tid;
	return 0;
}

static int map_ring(struct ht_intelpt *pt, unsigned int cpu, int fd)
{
	struct ht_intelpt_sbring *r = &pt->rings[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	r->data_size = pt->cfg.sideband_bytes;
	r->mmap_len = r->data_size + page;
	/* Read-only, as write_backward wants. */
	r->base = ht_perf_ring_map(fd, r->data_size, false);
	if (!r->base) {
		int err = errno;

		return ht_fail("cannot map a %zu-byte sideband ring on CPU %u: %s%s", r->data_size,
			       cpu, strerror(err), locked_hint(err));
	}
	r->fd = fd;
	return 0;
}

/* WHOM: "tid 12", "the cgroup's tasks", "every task". */
static int open_error(const char *what, const char *whom, unsigned int cpu, int err)
{
	if (err == EACCES || err == EPERM)
		return ht_fail("cannot open %s for %s on CPU %u: %s (needs root, or "
			       "CAP_PERFMON)",
			       what, whom, cpu, strerror(err));
	if (err == EMFILE || err == ENFILE)
		return ht_fail("cannot open %s for %s on CPU %u: %s (too many threads x CPUs "
			       "for the descriptor limit)",
			       what, whom, cpu, strerror(err));
	return ht_fail("cannot open %s for %s on CPU %u: %s", what, whom, cpu, strerror(err));
}

static int thread_open_error(const char *what, int tid, unsigned int cpu, int err)
{
	char whom[32];

	snprintf(whom, sizeof(whom), "tid %d", tid);
	return open_error(what, whom, cpu, err);
}

static int in_use_error(unsigned int cpu)
{
	return ht_fail("Intel PT is in use by another tool on CPU %u (perf record -e intel_pt, "
		       "another hybtrace, a debugger): stop it, or use --source sample",
		       cpu);
}

/* The descriptor limit: what it leaves out is counted, once the CPU's ring or area has an owner. */
#define OUT_OF_FDS(err) ((err) == EMFILE || (err) == ENFILE)
#define LEFT_OUT	(-2)

/*
 * The sideband event of TID on CPU: 0 with *FD (-1 when TID is gone),
 * LEFT_OUT, or -1. Opened before the PT event, so a thread that inherited the PT event
 * (cloned after it) inherited this one too.
 */
static int open_sideband(int tid, unsigned int cpu, bool pt_rings_owned, int *fd)
{
	struct perf_event_attr attr;

	ht_intelpt_sideband_attr(&attr);
	*fd = perf_open(&attr, tid, (int)cpu);
	if (*fd >= 0)
		return 0;
	if (errno == ESRCH)
		return 0;
	if (OUT_OF_FDS(errno) && pt_rings_owned)
		return LEFT_OUT;
	return thread_open_error("a sideband event", tid, cpu, errno);
}

static int attach_sideband(struct ht_intelpt *pt, struct ht_intelpt_thread *t, unsigned int cpu,
			   int fd)
{
	if (pt->rings[cpu].fd < 0) {
		if (map_ring(pt, cpu, fd)) {
			close(fd);
			return -1;
		}
		return 0;
	}
	t->sb_fds[cpu] = fd;
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, pt->rings[cpu].fd))
		return ht_fail("cannot share CPU %u's sideband ring: %s", cpu, strerror(errno));
	return 0;
}

/* 1: TID is gone; 0: done (or inherited); LEFT_OUT; -1: error. */
static int open_pt_event(struct ht_intelpt *pt, struct ht_intelpt_thread *t, unsigned int cpu,
			 int sb_fd)
{
	struct perf_event_attr attr;
	int fd, err;

	ht_intelpt_pt_attr(&pt->pmu, pt->config, &attr);
	/* Enabled once it has its area, as perf does: it cannot start without one. */
	attr.disabled = 1;
	fd = perf_open(&attr, t->tid, (int)cpu);
	if (fd < 0) {
		err = errno;
		if (err == ESRCH || (err == EBUSY && !thread_alive(t->tgid, t->tid)))
			return 1;
		/*
		 * intel_pt is exclusive: one event per task and CPU. A thread born
		 * after we opened its parent's events has inherited them; anything
		 * else is another tool's.
		 */
		if (err == EBUSY && thread_start_ticks(t->tgid, t->tid) >= pt->attach_boot_ticks) {
			pt->inherited++;
			if (sb_fd >= 0)
				close(sb_fd); /* inherited with the PT event: a second is noise */
			return 0;
		}
		if (sb_fd >= 0)
			close(sb_fd);
		if (OUT_OF_FDS(err) && pt->areas[cpu].fd >= 0)
			return LEFT_OUT;
		if (err == EBUSY)
			return in_use_error(cpu);
		return thread_open_error("an Intel PT event", t->tid, cpu, err);
	}
	if (sb_fd >= 0 && attach_sideband(pt, t, cpu, sb_fd)) {
		close(fd);
		return -1;
	}
	if (pt->areas[cpu].fd < 0) {
		if (map_area(pt, cpu, fd, t->tid)) {
			close(fd);
			return -1;
		}
	} else {
		t->pt_fds[cpu] = fd;
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, pt->areas[cpu].fd))
			return ht_fail("cannot share CPU %u's Intel PT area: %s", cpu,
				       strerror(errno));
	}
	/* Children cloned while it was off are enabled with it. */
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		return ht_fail("cannot enable the Intel PT event of tid %d on CPU %u: %s", t->tid,
			       cpu, strerror(errno));
	return 0;
}

/* Descriptors a thread's events take: a sideband event, and a PT event, per online CPU. */
static size_t thread_fds(const struct ht_intelpt *pt)
{
	size_t online = 0;

	for (unsigned int c = 0; c < pt->ncpus; c++)
		online += pt->cpu_online[c];
	return online * (pt->cfg.sideband_only ? 1 : 2);
}

/* A thread the descriptor limit leaves (partly) untraced: counted, said once at open. */
static void leave_out(struct ht_intelpt *pt, int tid)
{
	if (!pt->threads_left_out++)
		pt->first_left_out_tid = tid;
}

/* Events for one thread on every CPU; the first ones own the areas and rings. */
static int open_thread(struct ht_intelpt *pt, int tgid, int tid)
{
	struct ht_intelpt_thread *t;

	if (find_thread(pt, tid))
		return 0;
	t = add_thread(pt, tgid, tid); /* listed even left out: counted once */
	if (!t)
		return ht_fail("out of memory");
	/* The first thread's events own the areas: without them there is no capture at all. */
	if (pt->nthreads > 1 && pt->fds_left < thread_fds(pt)) {
		leave_out(pt, tid);
		return 0;
	}
	pt->fds_left -= pt->fds_left < thread_fds(pt) ? pt->fds_left : thread_fds(pt);
	for (unsigned int cpu = 0; cpu < pt->ncpus; cpu++) {
		int sb_fd, rc;

		if (!pt->cpu_online[cpu])
			continue;
		rc = open_sideband(tid, cpu, pt->rings[cpu].fd >= 0, &sb_fd);
		if (rc == LEFT_OUT) {
			leave_out(pt, tid);
			return 0;
		}
		if (rc)
			return -1;
		if (sb_fd < 0)
			return 0; /* it exited meanwhile */
		if (pt->cfg.sideband_only) {
			if (attach_sideband(pt, t, cpu, sb_fd))
				return -1;
			continue;
		}
		rc = open_pt_event(pt, t, cpu, sb_fd);
		if (rc == LEFT_OUT) {
			leave_out(pt, tid);
			return 0;
		}
		if (rc < 0)
			return -1;
		if (rc > 0)
			return 0; /* it exited meanwhile */
	}
	return 0;
}

/* ht_proc_cover_threads()'s callback: a capture opened on each thread not yet covered. */
struct cover {
	struct ht_intelpt *pt;
	int tgid;
};

static int cover_thread(void *ctx, int tid)
{
	struct cover *c = ctx;

	if (find_thread(c->pt, tid))
		return 0;
	return open_thread(c->pt, c->tgid, tid) ? -1 : 1;
}

/* ---- events per CPU (--cgroup, --all) ---- */

/* ATTR on CPU for the tasks of the cgroup open at CGROUP_FD, or (-1) for every task. */
static int open_cpu_event(struct perf_event_attr *attr, int cgroup_fd, unsigned int cpu)
{
	attr->inherit = 0; /* no task to pass it on from */
	if (cgroup_fd >= 0)
		return ht_perf_event_open_cgroup(attr, cgroup_fd, (int)cpu);
	return perf_open(attr, -1, (int)cpu);
}

/* CPU's sideband ring and PT area, each its own event's. */
static int open_cpu(struct ht_intelpt *pt, int cgroup_fd, unsigned int cpu)
{
	const char *whom = cgroup_fd >= 0 ? "the cgroup's tasks" : "every task";
	struct perf_event_attr attr;
	int fd;

	ht_intelpt_sideband_attr(&attr);
	fd = open_cpu_event(&attr, cgroup_fd, cpu);
	if (fd < 0)
		return open_error("a sideband event", whom, cpu, errno);
	if (map_ring(pt, cpu, fd)) {
		close(fd);
		return -1;
	}
	if (pt->cfg.sideband_only)
		return 0;
	ht_intelpt_pt_attr(&pt->pmu, pt->config, &attr);
	attr.disabled = 1; /* enabled once it has its area */
	fd = open_cpu_event(&attr, cgroup_fd, cpu);
	if (fd < 0)
		return errno == EBUSY ? in_use_error(cpu)
				      : open_error("an Intel PT event", whom, cpu, errno);
	if (map_area(pt, cpu, fd, -1)) {
		close(fd);
		return -1;
	}
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		return ht_fail("cannot enable the Intel PT event of CPU %u: %s", cpu,
			       strerror(errno));
	return 0;
}

/*
 * CGROUP_FD where the kernel takes cgroup events for it, else -1 (closed):
 * events for every task, whose code the target set filters. A machine whose
 * perf_event controller is bound to a cgroup v1 hierarchy takes none for a
 * v2 directory.
 */
static int cgroup_events_or_none(struct ht_intelpt *pt, int cgroup_fd)
{
	struct perf_event_attr attr;
	unsigned int cpu = 0;
	int fd, err;

	while (cpu + 1 < pt->ncpus && !pt->cpu_online[cpu])
		cpu++;
	ht_intelpt_sideband_attr(&attr);
	attr.disabled = 1;
	fd = open_cpu_event(&attr, cgroup_fd, cpu);
	if (fd >= 0) {
		close(fd);
		return cgroup_fd;
	}
	err = errno;
	if (err != EBADF && err != EINVAL && err != EOPNOTSUPP)
		return cgroup_fd; /* the real open says what is wrong */
	ht_warn("Intel PT: no perf events for cgroup %s (%s): events for every task, the "
		"cgroup's code kept",
		pt->cfg.cgroup_path, strerror(err));
	close(cgroup_fd);
	return -1;
}

/*
 * Events per online CPU, and the target set that says whose code a freeze
 * reads. Only the cgroup's tasks where only a cgroup is watched: the kernel
 * runs its events while one of them is on the CPU, so the areas hold
 * nothing else.
 */
static int open_cpus(struct ht_intelpt *pt)
{
	struct ht_target_spec *spec = calloc(1, sizeof(*spec));
	int cgroup_fd = -1, rc = 0;

	if (!spec)
		return ht_fail("out of memory");
	spec->all = pt->cfg.targets_all;
	spec->self_tgid = pt->cfg.self_tgid;
	ht_targets_init(&pt->targets, spec);
	free(spec);
	if (!pt->cfg.targets_all && ht_targets_map(&pt->targets, pt->cfg.targets_fd, -1))
		return -1;
	if (pt->cfg.cgroup_path) {
		cgroup_fd = open(pt->cfg.cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cgroup_fd < 0)
			return ht_fail("cannot open the cgroup %s: %s", pt->cfg.cgroup_path,
				       strerror(errno));
		cgroup_fd = cgroup_events_or_none(pt, cgroup_fd);
	}
	for (unsigned int cpu = 0; cpu < pt->ncpus && !rc; cpu++)
		if (pt->cpu_online[cpu])
			rc = open_cpu(pt, cgroup_fd, cpu);
	/* The events hold the cgroup. */
	if (cgroup_fd >= 0)
		close(cgroup_fd);
	return rc;
}

/* Descriptors the rest of hybtrace opens after the sources (event loop, dumps, symbols). */
#define FDS_KEPT_FOR_HYBTRACE 256

/*
 * The soft descriptor limit up to the hard one: as many threads traced as
 * it allows, beyond what the rest of hybtrace keeps. Returns what is left for PT.
 */
static size_t raise_fd_limit(void)
{
	size_t room;

	ht_raise_nofile();
	room = ht_fds_room();
	if (room >= SIZE_MAX / 2)
		return SIZE_MAX;
	return room > FDS_KEPT_FOR_HYBTRACE ? room - FDS_KEPT_FOR_HYBTRACE : 0;
}

static int check_sizes(struct ht_intelpt_config *cfg, unsigned int online)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), need;

	if (!cfg->aux_bytes)
		cfg->aux_bytes = HT_INTELPT_DEFAULT_AUX_BYTES;
	if (!cfg->sideband_bytes)
		cfg->sideband_bytes = HT_INTELPT_SIDEBAND_BYTES;
	if (!is_pow2(cfg->aux_bytes) || cfg->aux_bytes < MIN_AUX_PAGES * page)
		return ht_fail("--pt-size must be a power of two of at least %" PRIu64 "k",
			       MIN_AUX_PAGES * page / 1024);
	if (!is_pow2(cfg->sideband_bytes) || cfg->sideband_bytes < page)
		return ht_fail("the sideband ring must be a power of two of at least %" PRIu64
			       " bytes",
			       page);
	need = ht_intelpt_memory_needed(cfg->aux_bytes, cfg->sideband_bytes, online,
					cfg->sideband_only);
	if (cfg->memory_budget_bytes && need > cfg->memory_budget_bytes)
		return ht_fail("Intel PT needs %" PRIu64 "M (%u CPUs x %" PRIu64 "k of PT area and "
			       "sideband), more than the memory budget of %" PRIu64 "M: lower "
			       "--pt-size or raise --max-memory",
			       need >> 20, online, (need / online) >> 10,
			       cfg->memory_budget_bytes >> 20);
	return 0;
}

/* Events for every thread of every process named, as many as the descriptor limit allows. */
static int open_threads(struct ht_intelpt *pt)
{
	size_t nthreads = 0;

	if (!pt->cfg.ntgids) {
		pt->cfg.tgids[0] = pt->cfg.tgid;
		pt->cfg.ntgids = 1;
	}
	for (unsigned int i = 0; i < pt->cfg.ntgids; i++)
		nthreads += ht_proc_count_threads(pt->cfg.tgids[i]);
	/* What is left beyond the limit is left out and counted, not fatal. */
	ht_reserve_fds(ht_intelpt_fds_needed(nthreads * 2, pt->ncpus) + FDS_KEPT_FOR_HYBTRACE,
		       "Intel PT capture");
	pt->fds_left = raise_fd_limit();
	for (unsigned int i = 0; i < pt->cfg.ntgids; i++) {
		struct cover c = {pt, pt->cfg.tgids[i]};

		/* A process named that is gone already leaves the others traced. */
		if (ht_proc_cover_threads(c.tgid, cover_thread, &c, i > 0))
			return -1;
	}
	if (pt->threads_left_out)
		ht_warn("Intel PT: %" PRIu64 " threads left out (tid %d first): their events "
			"would pass the descriptor limit (ulimit -n); each dump counts them in "
			"loss.pt_threads_left_out",
			pt->threads_left_out, pt->first_left_out_tid);
	return 0;
}

int ht_intelpt_open(struct ht_intelpt *pt, const struct ht_intelpt_config *cfg)
{
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned int online = 0;

	memset(pt, 0, sizeof(*pt));
	pt->cfg = *cfg;
	if (nconf <= 0)
		return ht_fail("cannot count CPUs");
	if (cfg->tgid <= 0 && !cfg->cpu_wide)
		return ht_fail("Intel PT capture needs a target pid");
	if (!cfg->sideband_only) {
		if (ht_intelpt_pmu_read(cfg->sysroot, &pt->pmu) ||
		    ht_intelpt_build_config(&pt->pmu, &cfg->request, &pt->fields, &pt->config))
			return -1;
	}
	pt->ncpus = (unsigned int)nconf;
	pt->cpu_online = calloc(pt->ncpus, sizeof(*pt->cpu_online));
	pt->areas = calloc(pt->ncpus, sizeof(*pt->areas));
	pt->rings = calloc(pt->ncpus, sizeof(*pt->rings));
	pt->open = true;
	if (!pt->cpu_online || !pt->areas || !pt->rings) {
		ht_fail("out of memory");
		goto fail;
	}
	for (unsigned int c = 0; c < pt->ncpus; c++)
		pt->areas[c].fd = pt->rings[c].fd = -1;
	read_online(pt->cpu_online, pt->ncpus);
	for (unsigned int c = 0; c < pt->ncpus; c++)
		online += pt->cpu_online[c];
	if (check_sizes(&pt->cfg, online ? online : 1))
		goto fail;
	ht_cpuid_read(&pt->cpuid);
	pt->attach_boot_ticks = boot_ticks_now();
	if (pt->cfg.cpu_wide ? open_cpus(pt) : open_threads(pt))
		goto fail;
	ht_clock_pair_take(&pt->attach_pair, CLOCK_PAIR_TRIES, HT_CLOCK_AT_ATTACH);
	ht_intelpt_read_attach_maps(pt);
	return 0;
fail:
	ht_intelpt_close(pt);
	return -1;
}

void ht_intelpt_close(struct ht_intelpt *pt)
{
	if (!pt->open)
		return;
	for (size_t i = 0; i < pt->nthreads; i++) {
		for (unsigned int c = 0; c < pt->ncpus; c++) {
			if (pt->threads[i].pt_fds[c] >= 0)
				close(pt->threads[i].pt_fds[c]);
			if (pt->threads[i].sb_fds[c] >= 0)
				close(pt->threads[i].sb_fds[c]);
		}
		free(pt->threads[i].pt_fds);
		free(pt->threads[i].sb_fds);
	}
	for (unsigned int c = 0; pt->areas && c < pt->ncpus; c++) {
		struct ht_intelpt_area *a = &pt->areas[c];

		if (a->aux)
			munmap(a->aux, a->aux_len);
		if (a->base)
			munmap(a->base, a->base_len);
		if (a->fd >= 0)
			close(a->fd);
	}
	for (unsigned int c = 0; pt->rings && c < pt->ncpus; c++) {
		struct ht_intelpt_sbring *r = &pt->rings[c];

		if (r->base)
			munmap(r->base, r->mmap_len);
		if (r->fd >= 0)
			close(r->fd);
	}
	for (size_t i = 0; i < pt->nbuild_ids; i++) {
		free(pt->build_ids[i].path);
		free(pt->build_ids[i].build_id);
	}
	free(pt->build_ids);
	for (size_t i = 0; i < pt->nattach_maps; i++)
		ht_intelpt_free_maps(&pt->attach_maps[i]);
	free(pt->attach_maps);
	free(pt->threads);
	free(pt->areas);
	free(pt->rings);
	free(pt->cpu_online);
	ht_targets_free(&pt->targets);
	memset(pt, 0, sizeof(*pt));
}

void ht_intelpt_reap(struct ht_intelpt *pt)
{
	size_t out = 0;

	for (size_t i = 0; i < pt->nthreads; i++) {
		struct ht_intelpt_thread *t = &pt->threads[i];

		if (thread_alive(t->tgid, t->tid)) {
			pt->threads[out++] = *t;
			continue;
		}
		/* Owners stay open: their areas still take inherited threads' trace. */
		for (unsigned int c = 0; c < pt->ncpus; c++) {
			if (t->pt_fds[c] >= 0)
				close(t->pt_fds[c]);
			if (t->sb_fds[c] >= 0)
				close(t->sb_fds[c]);
		}
		free(t->pt_fds);
		free(t->sb_fds);
	}
	pt->nthreads = out;
}
