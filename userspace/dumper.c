// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
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
#include "sched_index.h"
#include "timeline.h"
#include "units.h"

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

/* Read the window and lower it into TL. */
static int build_timeline(struct ht_dumper *d, struct timeline *tl, const struct ht_dump_job *job)
{
	const struct ht_monitor *m = d->cfg.monitor;
	uint64_t t0 = job->start_ns > d->cfg.pre_ns ? job->start_ns - d->cfg.pre_ns : 0;
	uint64_t t1 = job->end_ns + d->cfg.post_ns;
	struct tl_clock_snapshot snap;
	struct ht_kernel_window kw;
	struct ht_sched_index idx;
	char target_comm[HT_COMM_LEN + 8];
	struct ht_fr_window w;
	int rc;

	if (ht_recorder_read(&m->recorder, t0, t1, &w))
		return -1;
	/* `run` named the target before its exec: what it is called now is what counts. */
	ht_comm_lookup(d->comms, (uint32_t)d->cfg.tgid, 0, target_comm, sizeof(target_comm));
	/* Nothing was recorded before attach: that part of the window is clipped too. */
	if (t0 < m->attached_ns) {
		w.clipped = true;
		if (w.covered_from_ns < m->attached_ns)
			w.covered_from_ns = m->attached_ns;
	}
	if (ht_sched_index_build(&w, &idx)) {
		ht_fr_window_free(&w);
		return -1;
	}
	kw = (struct ht_kernel_window){
		.tgid = d->cfg.tgid,
		.target_comm = target_comm,
		.t0 = t0,
		.t1 = t1,
		.w = &w,
		.idx = &idx,
		.comms = d->comms,
		.ksyms = d->cfg.ksyms,
		.breach = job->has_breach ? &job->breach : NULL,
		.threshold_ns = job->threshold_ns,
	};
	if (!tl_clock_snapshot_now(&snap))
		tl_set_clock_snapshot(tl, &snap);
	set_metadata(d, tl, job, &w, t0, t1);
	tl_meta_set(tl, HT_META_TARGET_COMM, target_comm);
	rc = ht_kernel_timeline_build(tl, &kw);
	ht_sched_index_free(&idx);
	ht_fr_window_free(&w);
	return rc;
}

static int write_dump(struct ht_dumper *d, const struct ht_dump_job *job, char *path, size_t len,
		      uint64_t *bytes, size_t *events)
{
	struct timeline *tl = tl_new();
	struct ht_output_file f;
	char base[256], err[256];
	struct stat st;
	int rc = -1;

	if (!tl)
		return ht_fail("out of memory");
	if (build_timeline(d, tl, job))
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

/* One job, start to end, outside the lock. */
static void run_job(struct ht_dumper *d, const struct ht_dump_job *job)
{
	char path[PATH_MAX + 64];
	uint64_t bytes = 0, started;
	size_t events = 0;

	sleep_until(job->end_ns + d->cfg.post_ns);
	started = clock_ns(CLOCK_MONOTONIC);
	if (write_dump(d, job, path, sizeof(path), &bytes, &events)) {
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

static void *worker(void *arg)
{
	struct ht_dumper *d = arg;
	struct ht_dump_job job;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->have_job && !d->stopping)
			pthread_cond_wait(&d->wake, &d->lock);
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

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->comms = malloc(sizeof(*d->comms));
	if (!d->comms)
		return ht_fail("out of memory");
	ht_comm_cache_init(d->comms, cfg->monitor);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pthread_create(&d->thread, NULL, worker, d)) {
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
		if (!d->have_pending || job->asked || longer(job, &d->pending)) {
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
