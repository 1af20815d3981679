// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <time.h>
#include "comm_cache.h"
#include "dump_schema.h"
#include "dumper.h"
#include "json.h"
#include "kernel_timeline.h"
#include "log.h"
#include "machine.h"
#include "monitor.h"
#include "output.h"
#include "perfetto_write.h"
#include "sampler.h"
#include "sched_index.h"
#include "symbolizer.h"
#include "timeline.h"
#include "units.h"
#include "unwind_dwarf.h"
#include "user_timeline.h"

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t monotonic_ns)
{
	struct timespec ts = { (time_t)(monotonic_ns / 1000000000ULL),
			       (long)(monotonic_ns % 1000000000ULL) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* A CLOCK_MONOTONIC time as wall-clock time, through a reading of both now. */
static uint64_t to_realtime(uint64_t monotonic_ns)
{
	uint64_t mono = clock_ns(CLOCK_MONOTONIC), real = clock_ns(CLOCK_REALTIME);

	return real - (mono - monotonic_ns);
}

static void format_wall_clock(uint64_t realtime_ns, char *buf, size_t len)
{
	time_t secs = (time_t)(realtime_ns / 1000000000ULL);
	struct tm tm;
	char date[32], zone[8];

	localtime_r(&secs, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	snprintf(buf, len, "%s.%03u%s", date, (unsigned int)(realtime_ns / 1000000ULL % 1000), zone);
}

static void meta_u64(struct timeline *tl, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	tl_meta_set(tl, key, buf);
}

static void set_metadata(struct ht_dumper *d, struct timeline *tl, const struct ht_dump_job *job,
			 const struct ht_fr_window *w, uint64_t t0, uint64_t t1)
{
	struct ht_monitor_counters c;
	struct utsname u;
	char buf[256];

	tl_meta_set(tl, HT_META_VERSION, HT_VERSION);
	uname(&u);
	tl_meta_set(tl, HT_META_KERNEL, u.release);
	tl_meta_set(tl, HT_META_CPU_MODEL, ht_machine_cpu_model(buf, sizeof(buf)));
	tl_meta_set(tl, HT_META_CMDLINE, d->cfg.cmdline);
	meta_u64(tl, HT_META_TARGET_PID, (uint64_t)d->cfg.tgid);
	tl_meta_set(tl, HT_META_TARGET_COMM, d->cfg.target_comm);
	tl_meta_set(tl, HT_META_KIND, job->kind);
	format_wall_clock(to_realtime(job->end_ns), buf, sizeof(buf));
	tl_meta_set(tl, HT_META_WALL_CLOCK, buf);
	if (job->has_breach) {
		meta_u64(tl, HT_META_BREACH_TID, job->breach.tid);
		snprintf(buf, sizeof(buf), "%.*s", HT_COMM_LEN, job->breach.comm);
		tl_meta_set(tl, HT_META_BREACH_COMM, buf);
		meta_u64(tl, HT_META_BREACH_START, job->breach.start_ns);
		meta_u64(tl, HT_META_BREACH_END, job->breach.end_ns);
		meta_u64(tl, HT_META_THRESHOLD, job->threshold_ns);
	}
	meta_u64(tl, HT_META_WINDOW_START, t0);
	meta_u64(tl, HT_META_WINDOW_END, t1);
	if (w->clipped)
		meta_u64(tl, HT_META_CLIPPED_TO, w->covered_from_ns);
	meta_u64(tl, HT_META_RECORDING_START, d->cfg.monitor->attached_ns);
	meta_u64(tl, HT_META_LOSS_FR_SKIP, w->skipped_records);
	if (!ht_monitor_read_counters(d->cfg.monitor, &c)) {
		meta_u64(tl, HT_META_LOSS_RB, c.value[HT_CNT_RB_DROPS]);
		meta_u64(tl, HT_META_LOSS_STORAGE, c.value[HT_CNT_STORAGE_FAILS]);
		meta_u64(tl, HT_META_LOSS_COMM, c.value[HT_CNT_COMM_UPDATE_FAILS]);
		meta_u64(tl, HT_META_LOSS_RECURSION, c.recursion_misses);
	}
	meta_u64(tl, HT_META_BREACHES_MISSED, d->not_dumped_since_last);
}

/* Re-read the target's mappings; a target that is gone keeps what was known. */
static void refresh_mappings(struct ht_dumper *d)
{
	if (d->symbolizer)
		ht_symbolizer_refresh(d->symbolizer);
	if (d->unwinder)
		ht_dwarf_unwinder_refresh(d->unwinder);
}

/*
 * What a dump is made of, taken at the end of its window, as promptly as the
 * worker can: the flight recorder's window and copies of the sampling rings.
 */
struct capture {
	uint64_t t0, t1;
	uint64_t frozen_ns; /* CLOCK_MONOTONIC when the sources were frozen */
	struct ht_fr_window w;
	bool have_samples;
	struct ht_sampler_frozen frozen;
};

static int take_capture(struct ht_dumper *d, const struct ht_dump_job *job, struct capture *c)
{
	const struct ht_monitor *m = d->cfg.monitor;

	memset(c, 0, sizeof(*c));
	c->t0 = job->start_ns > d->cfg.pre_ns ? job->start_ns - d->cfg.pre_ns : 0;
	c->t1 = job->end_ns + d->cfg.post_ns;
	sleep_until(c->t1);
	c->frozen_ns = clock_ns(CLOCK_MONOTONIC);
	if (d->cfg.sampler) {
		c->have_samples = !ht_sampler_freeze(d->cfg.sampler, &c->frozen);
		if (!c->have_samples)
			ht_warn("dump without user-space stacks: %s", ht_last_error());
	}
	if (ht_recorder_read(&m->recorder, c->t0, c->t1, &c->w)) {
		if (c->have_samples)
			ht_sampler_frozen_free(&c->frozen);
		return -1;
	}
	/* Nothing was recorded before attach: that part of the window is clipped too. */
	if (c->t0 < m->attached_ns) {
		c->w.clipped = true;
		if (c->w.covered_from_ns < m->attached_ns)
			c->w.covered_from_ns = m->attached_ns;
	}
	return 0;
}

static void free_capture(struct capture *c)
{
	ht_fr_window_free(&c->w);
	if (c->have_samples)
		ht_sampler_frozen_free(&c->frozen);
}

/* The on-CPU source's part of the window: sampled stacks on the thread tracks. */
static void add_user_timeline(struct ht_dumper *d, struct timeline *tl,
			      const struct ht_dump_job *job, const struct capture *c)
{
	struct ht_sampler *sampler = d->cfg.sampler;
	struct ht_sample_set set;
	struct ht_user_window uw;
	char count[32];

	if (!sampler) {
		tl_meta_set(tl, HT_META_SOURCE, "none");
		return;
	}
	tl_meta_set(tl, HT_META_SOURCE, "sample");
	snprintf(count, sizeof(count), "%u", sampler->cfg.freq_hz);
	tl_meta_set(tl, HT_META_SAMPLE_FREQ, count);
	tl_meta_set(tl, HT_META_CALLGRAPH,
		    sampler->cfg.callgraph == HT_CALLGRAPH_DWARF ? "dwarf" : "fp");
	meta_u64(tl, HT_META_FREEZE_LATE, c->frozen_ns - c->t1);
	if (!c->have_samples || ht_sampler_frozen_samples(&c->frozen, c->t0, c->t1, &set))
		return;
	/* Libraries load late: the maps are read again for every dump. */
	refresh_mappings(d);
	uw = (struct ht_user_window){
		.tgid = d->cfg.tgid,
		.t0 = c->t0,
		.t1 = c->t1,
		.period_ns = sampler->period_ns,
		.samples = &set,
		.symbolizer = d->symbolizer,
		.ksyms = d->cfg.ksyms,
		.unwinder = d->unwinder,
		.breach = job->has_breach ? &job->breach : NULL,
	};
	if (ht_user_timeline_build(tl, &uw))
		ht_warn("dump without user-space stacks: %s", ht_last_error());
	meta_u64(tl, HT_META_SAMPLES, set.count);
	meta_u64(tl, HT_META_LOSS_SAMPLES, set.lost);
	meta_u64(tl, HT_META_LOSS_THROTTLE, set.throttled);
	ht_sample_set_free(&set);
}

/* Lower the captured window into TL. */
static int build_timeline(struct ht_dumper *d, struct timeline *tl, const struct ht_dump_job *job,
			  const struct capture *c)
{
	char target_comm[HT_COMM_LEN + 8];
	struct tl_clock_snapshot snap;
	struct ht_kernel_window kw;
	struct ht_sched_index idx;
	int rc;

	/* `run` named the target before its exec: what it is called now is what counts. */
	ht_comm_lookup(d->comms, (uint32_t)d->cfg.tgid, 0, target_comm, sizeof(target_comm));
	if (ht_sched_index_build(&c->w, &idx))
		return -1;
	kw = (struct ht_kernel_window){
		.tgid = d->cfg.tgid,
		.target_comm = target_comm,
		.t0 = c->t0,
		.t1 = c->t1,
		.w = &c->w,
		.idx = &idx,
		.comms = d->comms,
		.ksyms = d->cfg.ksyms,
		.breach = job->has_breach ? &job->breach : NULL,
		.threshold_ns = job->threshold_ns,
	};
	if (!tl_clock_snapshot_now(&snap))
		tl_set_clock_snapshot(tl, &snap);
	set_metadata(d, tl, job, &c->w, c->t0, c->t1);
	tl_meta_set(tl, HT_META_TARGET_COMM, target_comm);
	rc = ht_kernel_timeline_build(tl, &kw);
	ht_sched_index_free(&idx);
	if (!rc)
		add_user_timeline(d, tl, job, c);
	return rc;
}

static int write_dump(struct ht_dumper *d, const struct ht_dump_job *job, const struct capture *c,
		      char *path, size_t len, uint64_t *bytes, size_t *events)
{
	struct timeline *tl = tl_new();
	struct ht_output_file f;
	char base[256], err[256];
	struct stat st;
	int rc = -1;

	if (!tl)
		return ht_fail("out of memory");
	if (build_timeline(d, tl, job, c))
		goto out;
	*events = tl_event_count(tl);
	ht_dump_base_name(d->cfg.tgid, to_realtime(job->end_ns), job->kind, base, sizeof(base));
	if (ht_output_begin(d->cfg.output_dir, &f))
		goto out;
	if (pftw_write_fd(tl, f.fd, err, sizeof(err))) {
		ht_output_abort(&f);
		ht_fail("cannot write the dump in %s: %s", d->cfg.output_dir, err);
		goto out;
	}
	*bytes = fstat(f.fd, &st) ? 0 : (uint64_t)st.st_size;
	rc = ht_output_commit(&f, d->cfg.output_dir, base, path, len);
out:
	tl_free(tl);
	return rc;
}

static void report_written(struct ht_dumper *d, const struct ht_dump_job *job, const char *path,
			   uint64_t bytes, size_t events, uint64_t took_ns)
{
	char size[32], took[32];

	if (d->cfg.json) {
		flockfile(stdout);
		printf("{\"type\":\"dump\",\"kind\":\"%s\",\"path\":", job->kind);
		ht_json_string(stdout, path);
		printf(",\"bytes\":%llu,\"events\":%zu,\"write_ns\":%llu}\n",
		       (unsigned long long)bytes, events, (unsigned long long)took_ns);
		fflush(stdout);
		funlockfile(stdout);
	}
	ht_format_count((double)bytes, size, sizeof(size));
	fprintf(stderr, "hybtrace: dump written: %s (%sB, %zu events, %s)\n", path, size, events,
		ht_format_duration(took_ns, took, sizeof(took)));
}

/* Nice value while a dump is built and written: it never takes the CPU from the target. */
#define DUMP_NICE 19

static void set_nice(int nice)
{
	/* Raising it back needs CAP_SYS_NICE; without it the thread stays nice, which is safe. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

/* One job, start to end, outside the lock. */
static void run_job(struct ht_dumper *d, const struct ht_dump_job *job)
{
	char path[PATH_MAX + 64];
	uint64_t bytes = 0, started;
	size_t events = 0;

	struct capture c;
	int rc;

	/* Now, while the target surely still lives: it may exit within the post window. */
	refresh_mappings(d);
	rc = take_capture(d, job, &c);
	started = clock_ns(CLOCK_MONOTONIC);
	if (!rc) {
		/* Frozen and copied: the rest is the least urgent work here, it yields the CPU. */
		set_nice(DUMP_NICE);
		rc = write_dump(d, job, &c, path, sizeof(path), &bytes, &events);
		set_nice(0);
		free_capture(&c);
	}
	if (rc) {
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
		pthread_mutex_lock(&d->lock);
		d->stats.failed++;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	report_written(d, job, path, bytes, events, clock_ns(CLOCK_MONOTONIC) - started);
	pthread_mutex_lock(&d->lock);
	d->stats.written++;
	d->stats.bytes += bytes;
	d->tally.disk_bytes += bytes;
	d->not_dumped_since_last = 0;
	memset(d->said, 0, sizeof(d->said));
	pthread_mutex_unlock(&d->lock);
}

/* After a dump, a breach that came during it may follow, once the policy allows. */
static bool take_pending(struct ht_dumper *d)
{
	enum ht_dump_decision decision;
	uint64_t allowed_at;

	if (!d->have_pending || d->stopping)
		return false;
	allowed_at = d->tally.last_dump_ns + d->cfg.policy.min_interval_ns;
	if (!d->pending.asked && clock_ns(CLOCK_MONOTONIC) < allowed_at) {
		pthread_mutex_unlock(&d->lock);
		sleep_until(allowed_at);
		pthread_mutex_lock(&d->lock);
		if (d->stopping)
			return false;
	}
	/* The dump that deferred it is done: judge it as if nothing were in progress. */
	d->tally.busy = false;
	decision = ht_dump_decide(&d->cfg.policy, &d->tally, clock_ns(CLOCK_MONOTONIC),
				  d->pending.asked);
	d->tally.busy = true;
	d->have_pending = false;
	if (decision != HT_DUMP_NOW)
		return false;
	d->job = d->pending;
	d->have_job = true;
	d->stats.skipped[HT_DUMP_DEFER_BUSY]--;
	d->tally.last_dump_ns = clock_ns(CLOCK_MONOTONIC);
	d->tally.dumps++;
	return true;
}

/*
 * How often an idle worker re-reads the target's mappings: often at first,
 * while a freshly started program maps its libraries, then once a second.
 */
#define WARM_FAST_INTERVAL_NS 50000000ULL
#define WARM_FAST_PERIOD_NS   2000000000ULL
#define WARM_INTERVAL_NS      1000000000ULL

/*
 * Wait for a job; meanwhile re-read the target's mappings now and then, so
 * the symbols of its files are at hand even if it exits just as a breach
 * happens. Called and returns with the lock held.
 */
static void idle_wait(struct ht_dumper *d)
{
	bool young = clock_ns(CLOCK_MONOTONIC) - d->started_ns < WARM_FAST_PERIOD_NS;
	uint64_t deadline = clock_ns(CLOCK_REALTIME) +
			    (young ? WARM_FAST_INTERVAL_NS : WARM_INTERVAL_NS);
	struct timespec ts = { (time_t)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL) };

	if (pthread_cond_timedwait(&d->wake, &d->lock, &ts) != ETIMEDOUT || d->have_job ||
	    d->stopping)
		return;
	pthread_mutex_unlock(&d->lock);
	refresh_mappings(d);
	pthread_mutex_lock(&d->lock);
}

static void *worker(void *arg)
{
	struct ht_dumper *d = arg;
	struct ht_dump_job job;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->have_job && !d->stopping)
			idle_wait(d);
		if (!d->have_job)
			break;
		job = d->job;
		d->tally.busy = true;
		pthread_mutex_unlock(&d->lock);
		run_job(d, &job);
		pthread_mutex_lock(&d->lock);
		d->have_job = false;
		if (!take_pending(d)) {
			d->tally.busy = false;
			pthread_cond_broadcast(&d->idle);
		}
	}
	d->tally.busy = false;
	pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void stop_symbolizing(struct ht_dumper *d)
{
	ht_symbolizer_free(d->symbolizer);
	d->symbolizer = NULL;
	if (d->unwinder)
		ht_dwarf_unwinder_free(d->unwinder);
	d->unwinder = NULL;
}

/*
 * Symbols (and DWARF unwinding) for the target, kept across dumps. Without
 * them dumps still come, with addresses for names; a target that is already
 * gone needs no word about it.
 */
static void start_symbolizing(struct ht_dumper *d)
{
	d->symbolizer = ht_symbolizer_new(d->cfg.tgid);
	if (d->symbolizer && d->cfg.sampler->cfg.callgraph == HT_CALLGRAPH_DWARF)
		d->unwinder = ht_dwarf_unwinder_new(d->cfg.tgid);
	if ((!d->symbolizer || (d->cfg.sampler->cfg.callgraph == HT_CALLGRAPH_DWARF &&
				!d->unwinder)) && kill(d->cfg.tgid, 0) == 0)
		ht_warn("user-space stacks will show addresses only: %s", ht_last_error());
}

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->comms = malloc(sizeof(*d->comms));
	if (!d->comms)
		return ht_fail("out of memory");
	ht_comm_cache_init(d->comms, cfg->monitor);
	d->started_ns = clock_ns(CLOCK_MONOTONIC);
	if (cfg->sampler)
		start_symbolizing(d);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pthread_create(&d->thread, NULL, worker, d)) {
		stop_symbolizing(d);
		free(d->comms);
		d->comms = NULL;
		return ht_fail("cannot start the dump thread");
	}
	d->started = true;
	return 0;
}

static void say_decision(struct ht_dumper *d, const struct ht_dump_job *job,
			 enum ht_dump_decision decision)
{
	if (decision == HT_DUMP_NOW || d->said[decision])
		return;
	/* Each reason once between dumps: a storm of breaches is not a storm of lines. */
	d->said[decision] = true;
	fprintf(stderr, "hybtrace: %s not dumped: %s%s\n", job->kind,
		ht_dump_decision_reason(decision),
		decision == HT_DUMP_DEFER_BUSY ? " (the longest such breach may follow it)" : "");
}

static bool longer(const struct ht_dump_job *a, const struct ht_dump_job *b)
{
	return a->end_ns - a->start_ns > b->end_ns - b->start_ns;
}

enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job)
{
	enum ht_dump_decision decision;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);

	if (!d->started)
		return HT_DUMP_SKIP_COUNT;
	pthread_mutex_lock(&d->lock);
	decision = ht_dump_decide(&d->cfg.policy, &d->tally, now, job->asked);
	switch (decision) {
	case HT_DUMP_NOW:
		d->job = *job;
		d->have_job = true;
		d->tally.last_dump_ns = now;
		d->tally.dumps++;
		pthread_cond_signal(&d->wake);
		break;
	case HT_DUMP_DEFER_BUSY:
		/* An asked-for dump is never displaced by a breach. */
		if (!d->have_pending || job->asked ||
		    (!d->pending.asked && longer(job, &d->pending))) {
			d->pending = *job;
			d->have_pending = true;
		}
		/* Counted as not dumped until (unless) it follows the dump in progress. */
		d->stats.skipped[decision]++;
		d->not_dumped_since_last++;
		break;
	default:
		d->stats.skipped[decision]++;
		d->not_dumped_since_last++;
	}
	say_decision(d, job, decision);
	pthread_mutex_unlock(&d->lock);
	return decision;
}

void ht_dumper_wait_idle(struct ht_dumper *d)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	while (d->have_job || d->tally.busy)
		pthread_cond_wait(&d->idle, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

void ht_dumper_stop(struct ht_dumper *d)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	d->have_pending = false;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	pthread_cond_destroy(&d->idle);
	stop_symbolizing(d);
	free(d->comms);
	d->comms = NULL;
	d->started = false;
}

void ht_dumper_stats(struct ht_dumper *d, struct ht_dumper_stats *out)
{
	if (!d->started) {
		*out = d->stats;
		return;
	}
	pthread_mutex_lock(&d->lock);
	*out = d->stats;
	pthread_mutex_unlock(&d->lock);
}

void ht_dump_job_for_breach(struct ht_dump_job *job, const struct ht_breach *b,
			    uint64_t threshold_ns)
{
	memset(job, 0, sizeof(*job));
	snprintf(job->kind, sizeof(job->kind), "%s", ht_breach_kind_name(b->kind));
	job->has_breach = true;
	job->breach = *b;
	job->threshold_ns = threshold_ns;
	job->start_ns = b->start_ns;
	job->end_ns = b->end_ns;
}

void ht_dump_job_asked(struct ht_dump_job *job, const char *kind, uint64_t now_ns)
{
	memset(job, 0, sizeof(*job));
	snprintf(job->kind, sizeof(job->kind), "%s", kind);
	job->start_ns = now_ns;
	job->end_ns = now_ns;
	job->asked = true;
}
