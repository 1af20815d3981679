// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "dump/dumper.h"
#include "base/breach_kinds.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/output.h"
#include "base/units.h"
#include "kernel/wait_for_work.h"

/* Nice value of the builder: it never takes the CPU from the target. */
#define BUILDER_NICE 19
#define BUILDER_NAME "hybtrace-build"

/*
 * How often an idle builder re-reads the target's mappings: often at first,
 * while a freshly started program maps its libraries, then once a second.
 */
#define WARM_FAST_INTERVAL_NS 50000000ULL
#define WARM_FAST_PERIOD_NS   2000000000ULL
#define WARM_INTERVAL_NS      1000000000ULL

/*
 * When a process's maps are read after its exec: at once, then as the
 * dynamic loader has mapped its libraries, and once its constructors ran.
 */
static const uint64_t exec_reads_ns[] = { 0, 10000000ULL, 100000000ULL };
#define EXEC_READS (sizeof(exec_reads_ns) / sizeof(exec_reads_ns[0]))

static void sleep_until(uint64_t monotonic_ns)
{
	struct timespec ts = { (time_t)(monotonic_ns / 1000000000ULL),
			       (long)(monotonic_ns % 1000000000ULL) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- the builder thread ---- */

static void json_ratio(struct ht_json *j, const char *key, struct ht_dump_rank r)
{
	if (r.cls == HT_RANK_BREACH || r.cls == HT_RANK_WAIT_FOR_WORK)
		ht_json_fixed(j, key, r.ratio, 3);
	else
		ht_json_null(j, key);
}

static void report_written(struct ht_dumper *d, const struct ht_dump_job *job, const char *path,
			   uint64_t bytes, size_t events, uint64_t took_ns, uint64_t cpu_ns)
{
	char size[32], took[32];

	if (d->cfg.json) {
		FILE *out = d->cfg.json_out;
		struct ht_json j;

		flockfile(out);
		ht_json_begin(&j, out);
		ht_json_str(&j, "type", "dump");
		ht_json_str(&j, "kind", job->kind);
		ht_json_str(&j, "path", path);
		/* Whose: the thread that breached or hit and its process (manual, exit: none). */
		if (job->has_breach || job->has_hit) {
			ht_json_u64(&j, "tid", job->has_breach ? job->breach.tid : job->hit.tid);
			ht_json_u64(&j, "pid", job->has_breach ? job->breach.tgid : job->hit.pid);
		}
		ht_json_u64(&j, "bytes", bytes);
		ht_json_u64(&j, "events", events);
		ht_json_u64(&j, "write_ns", took_ns);
		ht_json_u64(&j, "cpu_ns", cpu_ns);
		json_ratio(&j, "ratio", ht_dump_job_rank(job));
		ht_json_end_line(&j);
		fflush(out);
		funlockfile(out);
	}
	ht_format_count((double)bytes, size, sizeof(size));
	/* The time is the builder's, not the breach's: say so. */
	fprintf(stderr, "hybtrace: dump written: %s (%sB, %zu events, built and written in %s)\n",
		path, size, events, ht_format_duration(took_ns, took, sizeof(took)));
}

/* A worse dump was written: the least bad one kept goes, with its raw capture. */
static void replace(struct ht_dumper *d, const struct ht_dump_job *job, const char *path,
		    struct ht_dump_kept *victim)
{
	char old_rank[64], new_rank[64];
	bool gone = !ht_output_remove(victim->path, victim->dev, victim->ino);
	struct stat st;

	if (!gone)
		ht_warn("%s", ht_last_error());
	else if (victim->raw_path && !lstat(victim->raw_path, &st) && S_ISREG(st.st_mode) &&
		 unlink(victim->raw_path))
		ht_warn("cannot remove %s: %s", victim->raw_path, strerror(errno));
	ht_dump_rank_format(victim->rank, old_rank, sizeof(old_rank));
	ht_dump_rank_format(ht_dump_job_rank(job), new_rank, sizeof(new_rank));
	if (d->cfg.json) {
		FILE *out = d->cfg.json_out;
		struct ht_json j;

		flockfile(out);
		ht_json_begin(&j, out);
		ht_json_str(&j, "type", "dump_replaced");
		ht_json_str(&j, "old", victim->path);
		ht_json_str(&j, "new", path);
		json_ratio(&j, "old_ratio", victim->rank);
		json_ratio(&j, "new_ratio", ht_dump_job_rank(job));
		ht_json_bool(&j, "removed", gone);
		ht_json_end_line(&j);
		fflush(out);
		funlockfile(out);
	}
	fprintf(stderr, "hybtrace: dump replaced: %s (%s), the least bad kept, %s for %s (%s)\n",
		victim->path, old_rank, gone ? "removed" : "not removed", path, new_rank);
	pthread_mutex_lock(&d->lock);
	ht_dump_engine_removed(&d->engine, victim->seq, gone);
	pthread_mutex_unlock(&d->lock);
}

/* Build and write one captured dump, outside the lock. */
static void build_one(struct ht_dumper *d, const struct ht_dump_job *job,
		      const struct ht_dump_capture *c, uint64_t seq, uint64_t not_dumped)
{
	uint64_t bytes = 0, started = ht_clock_ns(CLOCK_MONOTONIC);
	uint64_t cpu_started = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct ht_dump_builder *b = &d->builder;
	char path[PATH_MAX + 64];
	struct ht_dump_kept victim;
	size_t events = 0;
	bool ok, replaces;

	ok = !ht_dump_builder_write(b, job, c, not_dumped, path, sizeof(path), &bytes, &events);
	if (!ok)
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
	pthread_mutex_lock(&d->lock);
	replaces = ht_dump_engine_written(&d->engine, seq, ok, bytes, path,
					  b->raw_path[0] ? b->raw_path : NULL, b->written_dev,
					  b->written_ino, &victim);
	pthread_mutex_unlock(&d->lock);
	if (!ok)
		return;
	report_written(d, job, path, bytes, events, ht_clock_ns(CLOCK_MONOTONIC) - started,
		       ht_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_started);
	if (replaces) {
		replace(d, job, path, &victim);
		ht_dump_kept_free(&victim);
	}
}

/* Whether the builder may take a capture now (the test knob holds it back). */
static bool may_build(const struct ht_dumper *d, uint64_t now_ns)
{
	return d->queued && now_ns >= d->late_until_ns;
}

/* When the builder has something to do next, waiting: CLOCK_MONOTONIC ns. Lock held. */
static uint64_t next_due(const struct ht_dumper *d)
{
	uint64_t due = d->warm_due_ns;

	for (unsigned int i = 0; i < d->nexecs; i++) {
		uint64_t at = d->execs[i].exec_ns + exec_reads_ns[d->execs[i].step];

		if (at < due)
			due = at;
	}
	if (d->queued && d->late_until_ns < due)
		due = d->late_until_ns;
	return due;
}

/* Read the maps of the processes whose exec is due a read at NOW_NS. Lock held. */
static void serve_execs(struct ht_dumper *d, uint64_t now_ns)
{
	int due[HT_DUMP_EXECS];
	unsigned int n = 0, kept = 0;

	for (unsigned int i = 0; i < d->nexecs; i++) {
		struct ht_dump_exec *x = &d->execs[i];

		if (x->exec_ns + exec_reads_ns[x->step] <= now_ns) {
			due[n++] = x->tgid;
			/* Reads missed while a dump was built are one read now. */
			while (x->step < EXEC_READS &&
			       x->exec_ns + exec_reads_ns[x->step] <= now_ns)
				x->step++;
		}
		if (x->step < EXEC_READS)
			d->execs[kept++] = *x;
	}
	d->nexecs = kept;
	if (!n)
		return;
	pthread_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < n; i++)
		ht_dump_builder_reread(&d->builder, due[i]);
	pthread_mutex_lock(&d->lock);
}

/*
 * Wait for a capture; meanwhile re-read the target's mappings now and then,
 * so the symbols of its files are at hand even if it exits just as a breach
 * happens, and those of a process that ran a new program at once. Called
 * and returns with the lock held.
 */
static void idle_wait(struct ht_dumper *d)
{
	uint64_t now = ht_clock_ns(CLOCK_MONOTONIC), due = next_due(d);
	uint64_t deadline = ht_clock_ns(CLOCK_REALTIME) + (due > now ? due - now : 0);
	struct timespec ts = { (time_t)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL) };
	bool young;

	if (due > now)
		pthread_cond_timedwait(&d->wake, &d->lock, &ts);
	if (d->stopping)
		return;
	now = ht_clock_ns(CLOCK_MONOTONIC);
	serve_execs(d, now);
	if (now < d->warm_due_ns || may_build(d, now) || d->stopping)
		return;
	young = now - d->started_ns < WARM_FAST_PERIOD_NS;
	d->warm_due_ns = now + (young ? WARM_FAST_INTERVAL_NS : WARM_INTERVAL_NS);
	pthread_mutex_unlock(&d->lock);
	ht_dump_builder_refresh(&d->builder);
	pthread_mutex_lock(&d->lock);
}

static void *builder_main(void *arg)
{
	struct ht_dumper *d = arg;

	/* Named apart from the event loop: a culprit, a move that waits on it, tell them apart. */
	prctl(PR_SET_NAME, BUILDER_NAME);
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), BUILDER_NICE);
	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct ht_dump_capture capture;
		struct ht_dump_job job;
		uint64_t seq, not_dumped, one = 1;

		while (!may_build(d, ht_clock_ns(CLOCK_MONOTONIC)) && !d->stopping)
			idle_wait(d);
		if (!d->queued)
			break;
		job = d->queue_job;
		capture = d->queue_capture;
		seq = d->queue_seq;
		not_dumped = d->queue_not_dumped;
		d->queued = false;
		d->building = true;
		d->building_t0 = capture.t0;
		pthread_mutex_unlock(&d->lock);
		build_one(d, &job, &capture, seq, not_dumped);
		ht_dump_capture_free(&capture);
		/* The next dump may come now. */
		if (write(d->wake_fd, &one, sizeof(one)) < 0)
			ht_warn("cannot wake the event loop: %s", strerror(errno));
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
	d->started_ns = ht_clock_ns(CLOCK_MONOTONIC);
	d->late_until_ns = d->started_ns + cfg->test_builder_late_ns;
	d->warm_due_ns = (cfg->test_builder_late_ns ? d->late_until_ns : d->started_ns) +
			 WARM_FAST_INTERVAL_NS;
	d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake_fd < 0)
		return ht_fail("eventfd: %s", strerror(errno));
	if (ht_dump_builder_init(&d->builder, &d->cfg)) {
		close(d->wake_fd);
		return -1;
	}
	ht_dump_engine_init(&d->engine, &d->cfg.policy);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pthread_create(&d->thread, NULL, builder_main, d)) {
		ht_dump_engine_free(&d->engine);
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

	for (unsigned int i = 0; i < HT_DUMP_HELD; i++)
		if (d->held[i].used && window_start(d, &d->held[i].job) < oldest)
			oldest = window_start(d, &d->held[i].job);
	pthread_mutex_lock(&d->lock);
	if (d->queued && d->queue_capture.t0 < oldest)
		oldest = d->queue_capture.t0;
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
	fprintf(stderr, "hybtrace: %s not dumped%s: %s\n", job->kind,
		decision == HT_DUMP_LATER ? " yet" : "",
		ht_dump_decision_reason(decision, d->cfg.policy.rule));
}

static void release(struct ht_dump_held *h)
{
	if (h->have_capture)
		ht_dump_capture_free(&h->capture);
	h->have_capture = false;
	h->used = false;
}

struct ht_dump_rank ht_dump_job_rank(const struct ht_dump_job *job)
{
	const struct ht_breach *b = &job->breach;
	uint64_t duration_ns[2] = { 0 }, threshold_ns[2] = { job->threshold_ns, 0 };

	if (job->asked)
		return (struct ht_dump_rank){ .cls = HT_RANK_ASKED };
	if (!job->has_breach)
		return (struct ht_dump_rank){ .cls = HT_RANK_TRIGGER };
	duration_ns[0] = b->end_ns - b->start_ns;
	/* A syscall that slept past the off-CPU threshold too: the larger ratio ranks it. */
	if (b->kind != HT_BREACH_OFF_CPU &&
	    (ht_breach_kinds_of(b->kinds, b->kind) & HT_KIND_BIT(HT_BREACH_OFF_CPU))) {
		duration_ns[1] = b->off_cpu_end_ns - b->off_cpu_start_ns;
		threshold_ns[1] = b->off_cpu_threshold_ns;
	}
	return ht_dump_rank_breach(ht_breach_waits_for_work(b) ? HT_RANK_WAIT_FOR_WORK
							: HT_RANK_BREACH,
				   duration_ns, threshold_ns, 2);
}

enum ht_dump_decision ht_dumper_offer(struct ht_dumper *d, const struct ht_dump_job *job)
{
	uint64_t now = ht_clock_ns(CLOCK_MONOTONIC), t0, t1;
	struct ht_dump_offer_result r;
	struct ht_dump_offer o;
	unsigned int id = 0;

	if (!d->started)
		return HT_DUMP_SKIP_COUNT;
	while (id < HT_DUMP_HELD && d->held[id].used)
		id++;
	/* Cannot happen: the policy holds four at most, and this is the fifth. */
	if (id == HT_DUMP_HELD)
		return HT_DUMP_SKIP_BUSY;
	ht_dump_window(&d->cfg, job, &t0, &t1);
	/* A window ending far in the future is a clock gone wrong: freeze at once. */
	if (t1 > now + d->cfg.post_ns + 1000000000ULL)
		t1 = now;
	o = (struct ht_dump_offer){
		.id = id,
		/* --max-dumps-per-process counts it against its breach's or its hit's process. */
		.tgid = job->has_breach ? (int)job->breach.tgid
			: job->has_hit	? (int)job->hit.pid
					: 0,
		.rank = ht_dump_job_rank(job),
		.window_end_ns = t1,
		.ended_ns = job->has_breach ? job->breach.end_ns : 0,
		.asked = job->asked,
	};
	d->held[id] = (struct ht_dump_held){ .used = true, .job = *job };
	pthread_mutex_lock(&d->lock);
	r = ht_dump_engine_offer(&d->engine, &o, now);
	pthread_mutex_unlock(&d->lock);
	if (r.decision != HT_DUMP_NOW && r.decision != HT_DUMP_LATER)
		release(&d->held[id]);
	if (r.dropped) {
		say_decision(d, &d->held[r.dropped_id].job, r.dropped_reason);
		release(&d->held[r.dropped_id]);
	}
	say_decision(d, job, r.decision);
	return r.decision;
}

int ht_dumper_fd(const struct ht_dumper *d)
{
	return d->started ? d->wake_fd : -1;
}

uint64_t ht_dumper_deadline(struct ht_dumper *d)
{
	uint64_t due;

	pthread_mutex_lock(&d->lock);
	due = ht_dump_engine_deadline(&d->engine);
	pthread_mutex_unlock(&d->lock);
	return due;
}

/* A held candidate's window has ended: freeze its sources now. Called with the lock held. */
static void freeze(struct ht_dumper *d, const struct ht_dump_action *a)
{
	struct ht_dump_held *h = &d->held[a->id];
	int rc;

	h->job.deferred = a->deferred;
	/* Outside the lock: the builder never waits on a freeze, nor a freeze on it. */
	pthread_mutex_unlock(&d->lock);
	rc = ht_dump_capture_take(&d->cfg, &h->job, &h->capture);
	if (rc)
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
	pthread_mutex_lock(&d->lock);
	h->have_capture = !rc;
	ht_dump_engine_frozen(&d->engine, a->id, !rc);
	if (rc)
		release(h);
}

/* The policy chose a frozen candidate: the builder takes it (it is idle). Lock held. */
static void hand_over(struct ht_dumper *d, const struct ht_dump_action *a)
{
	struct ht_dump_held *h = &d->held[a->id];

	d->queue_job = h->job;
	d->queue_capture = h->capture;
	d->queue_seq = a->seq;
	d->queue_not_dumped = a->not_dumped;
	d->queued = true;
	h->have_capture = false;
	release(h);
	memset(d->said, 0, sizeof(d->said));
	pthread_cond_signal(&d->wake);
}

void ht_dumper_exec(struct ht_dumper *d, int tgid)
{
	unsigned int i = 0;

	if (!d->started || tgid <= 0)
		return;
	pthread_mutex_lock(&d->lock);
	while (i < d->nexecs && d->execs[i].tgid != tgid)
		i++;
	/* Full: the idle re-reads and the next dump's still come. */
	if (i < HT_DUMP_EXECS) {
		d->execs[i] = (struct ht_dump_exec){ .tgid = tgid,
						     .exec_ns = ht_clock_ns(CLOCK_MONOTONIC) };
		if (i == d->nexecs)
			d->nexecs++;
		pthread_cond_signal(&d->wake);
	}
	pthread_mutex_unlock(&d->lock);
}

void ht_dumper_read(struct ht_dumper *d, uint64_t read_ns)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	ht_dump_engine_read(&d->engine, read_ns);
	pthread_mutex_unlock(&d->lock);
}

void ht_dumper_tick(struct ht_dumper *d, uint64_t now_ns)
{
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
		struct ht_dump_action a = ht_dump_engine_next(&d->engine, now_ns);

		if (a.what == HT_DUMP_ACT_NONE)
			break;
		if (a.what == HT_DUMP_ACT_FREEZE) {
			freeze(d, &a);
		} else if (a.what == HT_DUMP_ACT_WRITE) {
			hand_over(d, &a);
		} else {
			say_decision(d, &d->held[a.id].job, a.reason);
			release(&d->held[a.id]);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

void ht_dumper_wait_idle(struct ht_dumper *d)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	ht_dump_engine_finish(&d->engine);
	pthread_mutex_unlock(&d->lock);
	/* The event loop no longer runs: what is held is frozen and written from here. */
	for (;;) {
		uint64_t due = ht_dumper_deadline(d);
		bool idle;

		if (due) {
			sleep_until(due);
			ht_dumper_tick(d, ht_clock_ns(CLOCK_MONOTONIC));
			continue;
		}
		pthread_mutex_lock(&d->lock);
		while (d->queued || d->building)
			pthread_cond_wait(&d->idle, &d->lock);
		idle = ht_dump_engine_idle(&d->engine);
		pthread_mutex_unlock(&d->lock);
		if (idle)
			break;
		ht_dumper_tick(d, ht_clock_ns(CLOCK_MONOTONIC));
	}
}

void ht_dumper_stop(struct ht_dumper *d)
{
	if (!d->started)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	/* What the builder never took, and what the policy still held. */
	if (d->queued)
		ht_dump_capture_free(&d->queue_capture);
	d->queued = false;
	for (unsigned int i = 0; i < HT_DUMP_HELD; i++)
		release(&d->held[i]);
	ht_dump_engine_free(&d->engine);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	pthread_cond_destroy(&d->idle);
	ht_dump_builder_free(&d->builder);
	close(d->wake_fd);
	d->started = false;
}

void ht_dumper_stats(struct ht_dumper *d, struct ht_dump_stats *out)
{
	if (!d->started) {
		*out = d->engine.st;
		out->bytes = d->engine.disk_bytes;
		return;
	}
	pthread_mutex_lock(&d->lock);
	*out = d->engine.st;
	out->bytes = d->engine.disk_bytes;
	pthread_mutex_unlock(&d->lock);
}

void ht_dump_job_for_breach(struct ht_dump_job *job, const struct ht_breach *b,
			    uint64_t threshold_ns)
{
	memset(job, 0, sizeof(*job));
	/* "off-cpu+syscall" for one wait of both kinds: the file's name and its dump_kind. */
	ht_breach_kinds_name(ht_breach_kinds_of(b->kinds, b->kind), job->kind, sizeof(job->kind));
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
