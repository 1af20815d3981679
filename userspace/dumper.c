// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "dumper.h"
#include "json.h"
#include "log.h"
#include "units.h"

/* Nice value of the builder: it never takes the CPU from the target. */
#define BUILDER_NICE 19

/*
 * How often an idle builder re-reads the target's mappings: often at first,
 * while a freshly started program maps its libraries, then once a second.
 */
#define WARM_FAST_INTERVAL_NS 50000000ULL
#define WARM_FAST_PERIOD_NS   2000000000ULL
#define WARM_INTERVAL_NS      1000000000ULL

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

/* ---- the builder thread ---- */

static void report_written(struct ht_dumper *d, const struct ht_dump_job *job, const char *path,
			   uint64_t bytes, size_t events, uint64_t took_ns, uint64_t cpu_ns)
{
	char size[32], took[32];

	if (d->cfg.json) {
		FILE *out = d->cfg.json_out;

		flockfile(out);
		fprintf(out, "{\"type\":\"dump\",\"kind\":\"%s\",\"path\":", job->kind);
		ht_json_string(out, path);
		fprintf(out, ",\"bytes\":%llu,\"events\":%zu,\"write_ns\":%llu,\"cpu_ns\":%llu}\n",
			(unsigned long long)bytes, events, (unsigned long long)took_ns,
			(unsigned long long)cpu_ns);
		fflush(out);
		funlockfile(out);
	}
	ht_format_count((double)bytes, size, sizeof(size));
	/* The time is the builder's, not the breach's: say so. */
	fprintf(stderr, "hybtrace: dump written: %s (%sB, %zu events, built and written in %s)\n",
		path, size, events, ht_format_duration(took_ns, took, sizeof(took)));
}

/* Build and write one captured dump, outside the lock. */
static void build_one(struct ht_dumper *d, const struct ht_dump_job *job,
		      const struct ht_dump_capture *c, uint64_t not_dumped)
{
	uint64_t bytes = 0, started = clock_ns(CLOCK_MONOTONIC);
	uint64_t cpu_started = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	char path[PATH_MAX + 64];
	size_t events = 0;

	if (ht_dump_builder_write(&d->builder, job, c, not_dumped, path, sizeof(path), &bytes,
				  &events)) {
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
		pthread_mutex_lock(&d->lock);
		d->stats.failed++;
		pthread_mutex_unlock(&d->lock);
		return;
	}
	report_written(d, job, path, bytes, events, clock_ns(CLOCK_MONOTONIC) - started,
		       clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_started);
	pthread_mutex_lock(&d->lock);
	d->stats.written++;
	d->stats.bytes += bytes;
	d->tally.disk_bytes += bytes;
	pthread_mutex_unlock(&d->lock);
}

/*
 * Wait for a capture; meanwhile re-read the target's mappings now and then,
 * so the symbols of its files are at hand even if it exits just as a breach
 * happens. Called and returns with the lock held.
 */
static void idle_wait(struct ht_dumper *d)
{
	bool young = clock_ns(CLOCK_MONOTONIC) - d->started_ns < WARM_FAST_PERIOD_NS;
	uint64_t deadline = clock_ns(CLOCK_REALTIME) +
			    (young ? WARM_FAST_INTERVAL_NS : WARM_INTERVAL_NS);
	struct timespec ts = { (time_t)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL) };

	if (pthread_cond_timedwait(&d->wake, &d->lock, &ts) != ETIMEDOUT || d->queued ||
	    d->stopping)
		return;
	pthread_mutex_unlock(&d->lock);
	ht_dump_builder_refresh(&d->builder);
	pthread_mutex_lock(&d->lock);
}

static void *builder_main(void *arg)
{
	struct ht_dumper *d = arg;

	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), BUILDER_NICE);
	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct ht_dump_capture capture;
		struct ht_dump_job job;
		uint64_t not_dumped;

		while (!d->queued && !d->stopping)
			idle_wait(d);
		if (!d->queued)
			break;
		job = d->queue[0].job;
		capture = d->queue[0].capture;
		memmove(&d->queue[0], &d->queue[1], (d->queued - 1) * sizeof(d->queue[0]));
		d->queued--;
		/* Room in the queue: a deferred dump may follow now. */
		if (d->have_pending) {
			uint64_t one = 1;

			if (write(d->wake_fd, &one, sizeof(one)) < 0)
				ht_warn("cannot wake the event loop: %s", strerror(errno));
		}
		d->building = true;
		d->building_t0 = capture.t0;
		not_dumped = d->not_dumped_since_last;
		d->not_dumped_since_last = 0;
		memset(d->said, 0, sizeof(d->said));
		pthread_mutex_unlock(&d->lock);
		build_one(d, &job, &capture, not_dumped);
		ht_dump_capture_free(&capture);
		pthread_mutex_lock(&d->lock);
		d->building = false;
		pthread_cond_broadcast(&d->idle);
	}
	pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->started_ns = clock_ns(CLOCK_MONOTONIC);
	d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake_fd < 0)
		return ht_fail("eventfd: %s", strerror(errno));
	if (ht_dump_builder_init(&d->builder, &d->cfg)) {
		close(d->wake_fd);
		return -1;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pthread_create(&d->thread, NULL, builder_main, d)) {
		ht_dump_builder_free(&d->builder);
		close(d->wake_fd);
		return ht_fail("cannot start the dump thread");
	}
	d->started = true;
	return 0;
}

/* ---- the event loop's side ---- */

static uint64_t window_start(const struct ht_dumper *d, const struct ht_dump_job *job)
{
	return job->start_ns > d->cfg.pre_ns ? job->start_ns - d->cfg.pre_ns : 0;
}

uint64_t ht_dumper_oldest_window(struct ht_dumper *d)
{
	uint64_t oldest = UINT64_MAX;

	if (d->armed)
		oldest = window_start(d, &d->armed_job);
	if (d->have_pending && window_start(d, &d->pending) < oldest)
		oldest = window_start(d, &d->pending);
	pthread_mutex_lock(&d->lock);
	for (unsigned int i = 0; i < d->queued; i++)
		if (d->queue[i].capture.t0 < oldest)
			oldest = d->queue[i].capture.t0;
	if (d->building && d->building_t0 < oldest)
		oldest = d->building_t0;
	pthread_mutex_unlock(&d->lock);
	return oldest;
}

static void say_decision(struct ht_dumper *d, const struct ht_dump_job *job,
			 enum ht_dump_decision decision)
{
	/* Each reason once between dumps (a storm of breaches is not a storm of lines); a dump
	 * someone asked for is answered every time. */
	if (decision == HT_DUMP_NOW || (d->said[decision] && !job->asked))
		return;
	d->said[decision] = true;
	fprintf(stderr, "hybtrace: %s not dumped: %s%s\n", job->kind,
		ht_dump_decision_reason(decision),
		decision == HT_DUMP_DEFER_BUSY ? " (the longest such breach may follow it)" : "");
}

static bool longer(const struct ht_dump_job *a, const struct ht_dump_job *b)
{
	return a->end_ns - a->start_ns > b->end_ns - b->start_ns;
}

/* Whether a dump would have to wait: one is armed, or the builder's queue is full. */
static void update_busy(struct ht_dumper *d)
{
	d->tally.busy = d->armed || d->queued >= HT_DUMP_QUEUE;
}

/* Arm JOB: its sources freeze when its window ends. Called with the lock held. */
static void arm(struct ht_dumper *d, const struct ht_dump_job *job, uint64_t now)
{
	d->armed_job = *job;
	d->armed = true;
	d->tally.last_dump_ns = now;
	d->tally.dumps++;
	update_busy(d);
}

enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job)
{
	enum ht_dump_decision decision;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);

	if (!d->started)
		return HT_DUMP_SKIP_COUNT;
	pthread_mutex_lock(&d->lock);
	update_busy(d);
	decision = ht_dump_decide(&d->cfg.policy, &d->tally, now, job->asked);
	switch (decision) {
	case HT_DUMP_NOW:
		arm(d, job, now);
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

/* When the pending dump may follow: at once if asked for, else after the minimum interval. */
static uint64_t pending_due(const struct ht_dumper *d)
{
	if (d->pending.asked)
		return 1;
	return d->tally.last_dump_ns + d->cfg.policy.min_interval_ns;
}

int ht_dumper_fd(const struct ht_dumper *d)
{
	return d->started ? d->wake_fd : -1;
}

uint64_t ht_dumper_deadline(struct ht_dumper *d)
{
	uint64_t t0, t1, due = 0;

	pthread_mutex_lock(&d->lock);
	if (d->armed) {
		ht_dump_window(&d->cfg, &d->armed_job, &t0, &t1);
		due = t1;
		/* A window ending far in the future is a clock gone wrong: freeze at once. */
		if (due > clock_ns(CLOCK_MONOTONIC) + d->cfg.post_ns + 1000000000ULL)
			due = clock_ns(CLOCK_MONOTONIC);
	} else if (d->have_pending && d->queued < HT_DUMP_QUEUE) {
		due = pending_due(d);
	}
	pthread_mutex_unlock(&d->lock);
	return due;
}

/* The armed dump's window has ended: freeze its sources and queue the capture. */
static void freeze_armed(struct ht_dumper *d)
{
	struct ht_dump_job job = d->armed_job;
	struct ht_dump_capture capture;
	int rc;

	/* Outside the lock: the builder never waits on a freeze, nor a freeze on it. */
	pthread_mutex_unlock(&d->lock);
	rc = ht_dump_capture_take(&d->cfg, &job, &capture);
	pthread_mutex_lock(&d->lock);
	d->armed = false;
	if (rc) {
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
		d->stats.failed++;
	} else if (d->queued < HT_DUMP_QUEUE) {
		d->queue[d->queued].job = job;
		d->queue[d->queued].capture = capture;
		d->queued++;
		pthread_cond_signal(&d->wake);
	} else {
		/* Cannot happen: a dump is armed only while the queue has room. */
		ht_dump_capture_free(&capture);
		d->stats.failed++;
	}
	update_busy(d);
}

/* A deferred dump follows once the policy allows it (its window is in the past). */
static bool arm_pending(struct ht_dumper *d, uint64_t now)
{
	enum ht_dump_decision decision;

	if (!d->have_pending || d->queued >= HT_DUMP_QUEUE || now < pending_due(d))
		return false;
	update_busy(d);
	decision = ht_dump_decide(&d->cfg.policy, &d->tally, now, d->pending.asked);
	d->have_pending = false;
	if (decision != HT_DUMP_NOW)
		return false;
	d->stats.skipped[HT_DUMP_DEFER_BUSY]--;
	d->pending.deferred = true;
	arm(d, &d->pending, now);
	return true;
}

void ht_dumper_tick(struct ht_dumper *d, uint64_t now_ns)
{
	uint64_t t0, t1;

	if (!d->started)
		return;
	/* Whatever woke us: the eventfd is read here, its count does not matter. */
	{
		uint64_t count;

		if (read(d->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
			ht_warn("eventfd: %s", strerror(errno));
	}
	pthread_mutex_lock(&d->lock);
	for (;;) {
		if (d->armed) {
			ht_dump_window(&d->cfg, &d->armed_job, &t0, &t1);
			if (now_ns < t1 && t1 <= now_ns + d->cfg.post_ns + 1000000000ULL)
				break;
			freeze_armed(d);
			continue;
		}
		if (!arm_pending(d, now_ns))
			break;
	}
	pthread_mutex_unlock(&d->lock);
}

void ht_dumper_wait_idle(struct ht_dumper *d)
{
	if (!d->started)
		return;
	/* The event loop no longer runs: what is armed or pending is frozen here. */
	for (;;) {
		uint64_t due = ht_dumper_deadline(d);
		bool idle;

		if (due) {
			sleep_until(due);
			ht_dumper_tick(d, clock_ns(CLOCK_MONOTONIC));
			continue;
		}
		pthread_mutex_lock(&d->lock);
		/* A pending dump waits for room in the queue: the builder makes it. */
		while (d->queued || d->building)
			pthread_cond_wait(&d->idle, &d->lock);
		idle = !d->armed && !d->have_pending;
		pthread_mutex_unlock(&d->lock);
		if (idle)
			break;
		ht_dumper_tick(d, clock_ns(CLOCK_MONOTONIC));
	}
}

void ht_dumper_stop(struct ht_dumper *d)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	d->have_pending = false;
	d->armed = false;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	/* Captures the builder never took. */
	for (unsigned int i = 0; i < d->queued; i++)
		ht_dump_capture_free(&d->queue[i].capture);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	pthread_cond_destroy(&d->idle);
	ht_dump_builder_free(&d->builder);
	close(d->wake_fd);
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
