// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
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
/* Its priority in the guard's turns at SCHED_FIFO: the lowest, below the guard's. */
#define BUILDER_RUSH_PRIO 1
#define BUILDER_NAME "hybtrace-build"

/*
 * How often an idle builder re-reads the target's mappings: often at first,
 * while a freshly started program maps its libraries, then once a second.
 */
#define WARM_FAST_INTERVAL_NS 50000000ULL
#define WARM_FAST_PERIOD_NS   2000000000ULL
#define WARM_INTERVAL_NS      1000000000ULL
/* The test mode's (test_builder_busy): the builder is in and out of the kernel all along. */
#define WARM_BUSY_INTERVAL_NS 2000000ULL

/*
 * When a process's maps are read after its exec: at once, then as the
 * dynamic loader has mapped its libraries, and once its constructors ran.
 */
static const uint64_t exec_reads_ns[] = { 0, 10000000ULL, 100000000ULL };
#define EXEC_READS (sizeof(exec_reads_ns) / sizeof(exec_reads_ns[0]))

/* The builder's lines, by the stream the event loop writes them to. */
enum { LINES_STDERR, LINES_JSON };
#define LINES_RING_BYTES (256U * 1024U)
/* While the ring or the result slot is full, the builder looks again this often. */
#define BUILDER_RETRY_MS 1

static bool taken(const int *flag)
{
	return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}

static void turn_over(int *flag, int to)
{
	__atomic_store_n(flag, to, __ATOMIC_RELEASE);
}

/*
 * Wake the side that waits on FD (an eventfd). A write fails only with the
 * count at its maximum, when FD is readable already.
 */
static void ring_bell(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
		return;
}

/* Wait until FD (an eventfd) rang or TIMEOUT_MS passed (-1: no limit); then clear it. */
static void wait_bell(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t count;

	/* Nonblocking: a read finds nothing only where the other side read it already. */
	if (poll(&p, 1, timeout_ms) > 0 && read(fd, &count, sizeof(count)) < 0)
		return;
}

/* ---- the builder thread ---- */

static void json_ratio(struct ht_json *j, const char *key, struct ht_dump_rank r)
{
	if (r.cls == HT_RANK_BREACH || r.cls == HT_RANK_WAIT_FOR_WORK)
		ht_json_fixed(j, key, r.ratio, 3);
	else
		ht_json_null(j, key);
}

/*
 * Hand the builder's lines to the event loop: STREAM's LEN bytes, in pieces
 * the ring takes, each ending at a line's end where one does. A ring full
 * for now is waited out: the builder waits on the event loop, never the
 * other way round.
 */
static void hand_lines(struct ht_dumper *d, unsigned int stream, const char *text, size_t len)
{
	size_t max = ht_text_ring_max(&d->lines) / 2;

	while (len) {
		size_t piece = len;

		if (piece > max) {
			piece = max;
			while (piece > 1 && text[piece - 1] != '\n')
				piece--;
			if (piece <= 1)
				piece = max;
		}
		while (!ht_text_ring_put(&d->lines, stream, text, piece)) {
			ring_bell(d->wake_fd);
			wait_bell(d->builder_fd, BUILDER_RETRY_MS);
		}
		text += piece;
		len -= piece;
	}
}

/* What the builder wrote into its own streams goes to the event loop now. */
static void flush_lines(struct ht_dumper *d)
{
	bool any;

	fflush(d->err_lines);
	fflush(d->out_lines);
	any = d->err_len || d->out_len;
	if (d->err_len)
		hand_lines(d, LINES_STDERR, d->err_buf, d->err_len);
	if (d->out_len)
		hand_lines(d, LINES_JSON, d->out_buf, d->out_len);
	rewind(d->err_lines);
	rewind(d->out_lines);
	fflush(d->err_lines);
	fflush(d->out_lines);
	if (any)
		ring_bell(d->wake_fd);
}

/* Give R to the event loop, once it took the one before. */
static void give_result(struct ht_dumper *d, const struct ht_dump_result *r)
{
	flush_lines(d);
	while (taken(&d->result_full)) {
		ring_bell(d->wake_fd);
		wait_bell(d->builder_fd, BUILDER_RETRY_MS);
	}
	d->result = *r;
	turn_over(&d->result_full, 1);
	ring_bell(d->wake_fd);
}

static void report_written(struct ht_dumper *d, const struct ht_dump_job *job, const char *path,
			   uint64_t bytes, size_t events, uint64_t took_ns, uint64_t cpu_ns)
{
	char size[32], took[32];

	if (d->cfg.json) {
		struct ht_json j;

		ht_json_begin(&j, d->out_lines);
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
	}
	ht_format_count((double)bytes, size, sizeof(size));
	/* The time is the builder's, not the breach's: say so. */
	fprintf(d->err_lines,
		"hybtrace: dump written: %s (%sB, %zu events, built and written in %s)\n", path,
		size, events, ht_format_duration(took_ns, took, sizeof(took)));
}

/* Build and write the dump the event loop handed over; its capture goes back with the result. */
static void build_one(struct ht_dumper *d)
{
	uint64_t started = ht_clock_ns(CLOCK_MONOTONIC);
	uint64_t cpu_started = ht_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct ht_dump_builder *b = &d->builder;
	struct ht_dump_result r = { .what = HT_DUMP_RESULT_BUILT, .seq = d->build_seq };
	struct ht_dump_job job = d->build_job;
	size_t events = 0;

	r.capture = d->build_capture;
	/* The slot is free for the next dump; what it held is in R and JOB now. */
	turn_over(&d->build_full, 0);
	r.ok = !ht_dump_builder_write(b, &job, &r.capture, d->build_not_dumped, r.path,
				      sizeof(r.path), &r.bytes, &events);
	if (!r.ok) {
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
	} else {
		snprintf(r.raw_path, sizeof(r.raw_path), "%s", b->raw_path);
		r.dev = b->written_dev;
		r.ino = b->written_ino;
		report_written(d, &job, r.path, r.bytes, events,
			       ht_clock_ns(CLOCK_MONOTONIC) - started,
			       ht_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_started);
	}
	give_result(d, &r);
}

/* Remove the files of dump K (replaced by a worse one); whether the dump itself is gone. */
static bool remove_files(const struct ht_dump_kept *k)
{
	bool gone = !ht_output_remove(k->path, k->dev, k->ino);
	struct stat st;

	if (!gone)
		ht_warn("%s", ht_last_error());
	else if (k->raw_path && !lstat(k->raw_path, &st) && S_ISREG(st.st_mode) &&
		 unlink(k->raw_path))
		ht_warn("cannot remove %s: %s", k->raw_path, strerror(errno));
	return gone;
}

static void remove_one(struct ht_dumper *d)
{
	struct ht_dump_result r = { .what = HT_DUMP_RESULT_REMOVED };

	r.gone = remove_files(&d->remove);
	turn_over(&d->remove_full, 0);
	give_result(d, &r);
}

/* Take the execs the event loop heard of into the builder's own schedule. */
static void take_execs(struct ht_dumper *d)
{
	uint32_t head = __atomic_load_n(&d->exec_head, __ATOMIC_ACQUIRE);

	for (; d->exec_tail != head; d->exec_tail++) {
		const struct ht_dump_exec *x = &d->exec_ring[d->exec_tail % HT_DUMP_EXECS];
		unsigned int i = 0;

		while (i < d->nexecs && d->execs[i].tgid != x->tgid)
			i++;
		/* Full: the idle re-reads and the next dump's still come. */
		if (i == HT_DUMP_EXECS)
			continue;
		d->execs[i] = (struct ht_dump_exec){ .tgid = x->tgid, .exec_ns = x->exec_ns };
		if (i == d->nexecs)
			d->nexecs++;
	}
	__atomic_store_n(&d->exec_tail, d->exec_tail, __ATOMIC_RELEASE);
}

/* Read the maps of the processes whose exec is due a read at NOW_NS. */
static void serve_execs(struct ht_dumper *d, uint64_t now_ns)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < d->nexecs; i++) {
		struct ht_dump_exec *x = &d->execs[i];

		if (x->exec_ns + exec_reads_ns[x->step] <= now_ns) {
			ht_dump_builder_reread(&d->builder, x->tgid);
			/* Reads missed while a dump was built are one read now. */
			while (x->step < EXEC_READS &&
			       x->exec_ns + exec_reads_ns[x->step] <= now_ns)
				x->step++;
		}
		if (x->step < EXEC_READS)
			d->execs[kept++] = *x;
	}
	d->nexecs = kept;
}

/* When the builder has something to do next, idle: CLOCK_MONOTONIC ns. */
static uint64_t next_due(const struct ht_dumper *d)
{
	uint64_t due = d->warm_due_ns;

	for (unsigned int i = 0; i < d->nexecs; i++) {
		uint64_t at = d->execs[i].exec_ns + exec_reads_ns[d->execs[i].step];

		if (at < due)
			due = at;
	}
	if (taken(&d->build_full) && d->late_until_ns < due)
		due = d->late_until_ns;
	return due;
}

/*
 * Idle: re-read the target's mappings now and then, so the symbols of its
 * files are at hand even if it exits just as a breach happens, and those of
 * a process that ran a new program at once; then wait for work until the
 * next of those is due.
 */
static void idle(struct ht_dumper *d, uint64_t now)
{
	uint64_t due;

	serve_execs(d, now);
	if (now >= d->warm_due_ns && now >= d->late_until_ns) {
		bool young = now - d->started_ns < WARM_FAST_PERIOD_NS;

		d->warm_due_ns = now + (d->cfg.test_builder_busy ? WARM_BUSY_INTERVAL_NS
					: young			 ? WARM_FAST_INTERVAL_NS
								 : WARM_INTERVAL_NS);
		ht_dump_builder_refresh(&d->builder);
	}
	flush_lines(d);
	now = ht_clock_ns(CLOCK_MONOTONIC);
	due = next_due(d);
	if (due > now) {
		/*
		 * The guard sleeps while it waits, unless the event loop watches:
		 * on PREEMPT_RT the way into this wait may hold what its move waits on.
		 */
		ht_guard_idle_enter(&d->builder_idle);
		wait_bell(d->builder_fd, (int)((due - now + 999999) / 1000000));
		ht_guard_idle_leave(&d->builder_idle);
	}
}

static void say_no_start_cpu(const struct ht_dumper_config *cfg, int err)
{
	ht_warn("test mode: cannot start the builder on CPU %u: %s", cfg->test_builder_busy_cpu,
		strerror(err));
}

/*
 * The test mode's start: the builder is created on the CPU it names, which
 * the target may keep busy. Set at its creation, never by the builder
 * itself: hybtrace moves its threads off the target's CPUs (own_cpus.h) any
 * time after ht_dumper_start, and a builder that set its own CPU after it
 * was ready, at nice 19 on a loaded machine, came to it after such a move
 * and undid it.
 */
static void test_start_on_cpu(const struct ht_dumper_config *cfg, pthread_attr_t *attr)
{
	cpu_set_t one;
	int err;

	if (!cfg->test_builder_busy)
		return;
	CPU_ZERO(&one);
	CPU_SET(cfg->test_builder_busy_cpu, &one);
	err = pthread_attr_setaffinity_np(attr, sizeof(one), &one);
	if (err)
		say_no_start_cpu(cfg, err);
}

/* The builder's streams: memory of its own, whose lines flush_lines() hands over. */
static int open_lines(struct ht_dumper *d)
{
	d->err_lines = open_memstream(&d->err_buf, &d->err_len);
	d->out_lines = open_memstream(&d->out_buf, &d->out_len);
	if (!d->err_lines || !d->out_lines)
		return ht_fail("cannot open the dump builder's streams: %s", strerror(errno));
	d->builder.json_out = d->out_lines;
	return 0;
}

static void close_lines(struct ht_dumper *d)
{
	if (d->err_lines)
		fclose(d->err_lines);
	if (d->out_lines)
		fclose(d->out_lines);
	free(d->err_buf);
	free(d->out_buf);
}

/*
 * Its symbol state and streams are allocated here, on its own thread: glibc
 * gives it a malloc arena of its own, so that neither side frees or grows
 * the other's memory, which would take the other's arena lock. Set up at the
 * event loop's own nice value (ht_dumper_start waits for it), then at 19.
 */
static int builder_setup(struct ht_dumper *d)
{
	if (ht_dump_builder_init(&d->builder, &d->cfg))
		return -1;
	if (open_lines(d)) {
		close_lines(d);
		ht_dump_builder_free(&d->builder);
		return -1;
	}
	return 0;
}

static void *builder_main(void *arg)
{
	struct ht_dumper *d = arg;

	/* Named apart from the event loop: a culprit, a move that waits on it, tell them apart. */
	prctl(PR_SET_NAME, BUILDER_NAME);
	if (builder_setup(d)) {
		snprintf(d->setup_error, sizeof(d->setup_error), "%s", ht_last_error());
		turn_over(&d->ready, -1);
		ring_bell(d->wake_fd);
		return NULL;
	}
	ht_log_to(d->err_lines);
	d->builder_tid = (int)syscall(SYS_gettid);
	turn_over(&d->ready, 1);
	ring_bell(d->wake_fd);
	setpriority(PRIO_PROCESS, (id_t)d->builder_tid, BUILDER_NICE);
	for (;;) {
		uint64_t now = ht_clock_ns(CLOCK_MONOTONIC);

		take_execs(d);
		/* A replaced dump goes before the next one is written, as the policy counts. */
		if (taken(&d->remove_full))
			remove_one(d);
		else if (taken(&d->build_full) && now >= d->late_until_ns)
			build_one(d);
		else if (taken(&d->stopping))
			break;
		else
			idle(d, now);
	}
	flush_lines(d);
	ht_log_to(NULL);
	close_lines(d);
	ht_dump_builder_free(&d->builder);
	turn_over(&d->exited, 1);
	ring_bell(d->wake_fd);
	return NULL;
}

static void close_fds(struct ht_dumper *d)
{
	if (d->wake_fd >= 0)
		close(d->wake_fd);
	if (d->builder_fd >= 0)
		close(d->builder_fd);
}

/* The raise itself, the event loop's or the guard's. */
static bool raise_builder(struct ht_dumper *d)
{
	bool raised;

	pthread_mutex_lock(&d->raise_lock);
	/* Not a thread that exited: its id may be another's by now. */
	if (d->raise_holds++ == 0 && !taken(&d->exited) && d->loop_nice < BUILDER_NICE)
		d->raised = !setpriority(PRIO_PROCESS, (id_t)d->builder_tid, d->loop_nice);
	raised = d->raised;
	pthread_mutex_unlock(&d->raise_lock);
	return raised;
}

static void lower_builder(struct ht_dumper *d)
{
	pthread_mutex_lock(&d->raise_lock);
	if (d->raise_holds && --d->raise_holds == 0 && d->raised) {
		if (!taken(&d->exited))
			setpriority(PRIO_PROCESS, (id_t)d->builder_tid, BUILDER_NICE);
		d->raised = false;
	}
	pthread_mutex_unlock(&d->raise_lock);
}

static bool guard_raise(void *ctx)
{
	return raise_builder(ctx);
}

static void guard_lower(void *ctx)
{
	lower_builder(ctx);
}

/*
 * The guard's turn for the builder at SCHED_FIFO, below the guard; its end
 * puts the builder back at the normal policy, keeping the nice value a
 * raise gave it. Given to the guard only where that is the builder's policy
 * (guard_may_rush()).
 */
static bool guard_rush(void *ctx)
{
	struct sched_param fifo = { .sched_priority = BUILDER_RUSH_PRIO };
	struct ht_dumper *d = ctx;
	bool rushed;

	pthread_mutex_lock(&d->raise_lock);
	if (!d->rushed && !taken(&d->exited))
		d->rushed = !sched_setscheduler(d->builder_tid, SCHED_FIFO, &fifo);
	rushed = d->rushed;
	pthread_mutex_unlock(&d->raise_lock);
	return rushed;
}

static void guard_end_rush(void *ctx)
{
	struct sched_param normal = { 0 };
	struct ht_dumper *d = ctx;

	pthread_mutex_lock(&d->raise_lock);
	if (d->rushed && !taken(&d->exited))
		sched_setscheduler(d->builder_tid, SCHED_OTHER, &normal);
	d->rushed = false;
	pthread_mutex_unlock(&d->raise_lock);
}

/*
 * Turns at SCHED_FIFO for the builder: where the event loop (the caller),
 * and the builder it started, run at the normal policy, and hybtrace was not
 * started at a nice value above 0 (one run with `nice` was told to give way).
 */
static bool guard_may_rush(const struct ht_dumper *d)
{
	return sched_getscheduler(0) == SCHED_OTHER && d->loop_nice <= 0;
}

/*
 * The guard watches the calling thread, the event loop, from here on. Without
 * one the session goes on: only a stall of the event loop lasts longer.
 */
static void start_guard(struct ht_dumper *d)
{
	struct ht_builder_guard *g = &d->guard;
	bool rush = guard_may_rush(d);

	*g = (struct ht_builder_guard){ .beat = &d->beat, .builder = &d->builder_idle,
					.raise = guard_raise, .lower = guard_lower,
					.rush = rush ? guard_rush : NULL,
					.end_rush = rush ? guard_end_rush : NULL, .ctx = d };
	if (ht_builder_guard_start(g))
		ht_warn("%s; a stall of the event loop on the dump builder lasts until the "
			"builder gets its turn", ht_last_error());
}

int ht_dumper_start(struct ht_dumper *d, const struct ht_dumper_config *cfg)
{
	pthread_attr_t attr;
	int ready, err;

	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->started_ns = ht_clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_init(&d->raise_lock, NULL);
	/* The event loop is busy until its first epoll_wait. */
	d->beat.busy = 1;
	/* What a raise lifts the builder to: this thread's (PRIO_PROCESS 0 is the caller). */
	errno = 0;
	d->loop_nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		d->loop_nice = BUILDER_NICE;
	d->late_until_ns = d->started_ns + cfg->test_builder_late_ns;
	d->warm_due_ns = (cfg->test_builder_late_ns ? d->late_until_ns : d->started_ns) +
			 WARM_FAST_INTERVAL_NS;
	d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	d->builder_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->wake_fd < 0 || d->builder_fd < 0) {
		close_fds(d);
		return ht_fail("eventfd: %s", strerror(errno));
	}
	if (ht_text_ring_init(&d->lines, LINES_RING_BYTES)) {
		close_fds(d);
		return -1;
	}
	pthread_attr_init(&attr);
	test_start_on_cpu(cfg, &attr);
	err = pthread_create(&d->thread, &attr, builder_main, d);
	if (err == EINVAL && cfg->test_builder_busy) {
		say_no_start_cpu(cfg, err);
		err = pthread_create(&d->thread, NULL, builder_main, d);
	}
	pthread_attr_destroy(&attr);
	if (err) {
		ht_text_ring_free(&d->lines);
		close_fds(d);
		return ht_fail("cannot start the dump thread: %s", strerror(err));
	}
	while (!(ready = __atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)))
		wait_bell(d->wake_fd, -1);
	if (ready < 0) {
		pthread_join(d->thread, NULL);
		ht_text_ring_free(&d->lines);
		close_fds(d);
		return ht_fail("%s", d->setup_error);
	}
	ht_dump_engine_init(&d->engine, &d->cfg.policy);
	d->started = true;
	start_guard(d);
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
	if (d->building && d->building_t0 < oldest)
		oldest = d->building_t0;
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

int ht_dumper_builder_tid(const struct ht_dumper *d)
{
	return d->builder_tid;
}

int ht_dumper_guard_tid(const struct ht_dumper *d)
{
	return d->started ? ht_builder_guard_tid(&d->guard) : 0;
}

bool ht_dumper_raise(struct ht_dumper *d)
{
	if (!d->started)
		return false;
	ht_guard_watch_begin(&d->builder_idle);
	return raise_builder(d);
}

void ht_dumper_lower(struct ht_dumper *d)
{
	if (!d->started)
		return;
	lower_builder(d);
	ht_guard_watch_end(&d->builder_idle);
}

uint64_t ht_dumper_stalls_lifted(const struct ht_dumper *d)
{
	return ht_builder_guard_lifts(&d->guard);
}

uint64_t ht_dumper_stall_rushes(const struct ht_dumper *d)
{
	return ht_builder_guard_rushes(&d->guard);
}

int ht_dumper_fd(const struct ht_dumper *d)
{
	return d->started ? d->wake_fd : -1;
}

uint64_t ht_dumper_deadline(struct ht_dumper *d)
{
	return ht_dump_engine_deadline(&d->engine);
}

/* A held candidate's window has ended: freeze its sources now. */
static void freeze(struct ht_dumper *d, const struct ht_dump_action *a)
{
	struct ht_dump_held *h = &d->held[a->id];
	int rc;

	h->job.deferred = a->deferred;
	rc = ht_dump_capture_take(&d->cfg, &h->job, &h->capture);
	if (rc)
		ht_error("dump failed: %s (monitoring goes on)", ht_last_error());
	h->have_capture = !rc;
	ht_dump_engine_frozen(&d->engine, a->id, !rc);
	if (rc)
		release(h);
}

/* The policy chose a frozen candidate: the builder takes it (the policy knows it is idle). */
static void hand_over(struct ht_dumper *d, const struct ht_dump_action *a)
{
	struct ht_dump_held *h = &d->held[a->id];

	d->build_job = h->job;
	d->build_capture = h->capture;
	d->build_seq = a->seq;
	d->build_not_dumped = a->not_dumped;
	d->building = true;
	d->building_t0 = h->capture.t0;
	d->building_rank = ht_dump_job_rank(&h->job);
	h->have_capture = false;
	release(h);
	memset(d->said, 0, sizeof(d->said));
	turn_over(&d->build_full, 1);
	ring_bell(d->builder_fd);
}

/* The builder removed the dump that the one at replacing_path replaces: say so. */
static void say_replaced(struct ht_dumper *d, bool gone)
{
	const struct ht_dump_kept *victim = &d->remove;
	char old_rank[64], new_rank[64];

	ht_dump_rank_format(victim->rank, old_rank, sizeof(old_rank));
	ht_dump_rank_format(d->replacing_rank, new_rank, sizeof(new_rank));
	if (d->cfg.json) {
		FILE *out = d->cfg.json_out;
		struct ht_json j;

		ht_json_begin(&j, out);
		ht_json_str(&j, "type", "dump_replaced");
		ht_json_str(&j, "old", victim->path);
		ht_json_str(&j, "new", d->replacing_path);
		json_ratio(&j, "old_ratio", victim->rank);
		json_ratio(&j, "new_ratio", d->replacing_rank);
		ht_json_bool(&j, "removed", gone);
		ht_json_end_line(&j);
		fflush(out);
	}
	fprintf(stderr, "hybtrace: dump replaced: %s (%s), the least bad kept, %s for %s (%s)\n",
		victim->path, old_rank, gone ? "removed" : "not removed", d->replacing_path,
		new_rank);
}

static void removed(struct ht_dumper *d, bool gone)
{
	say_replaced(d, gone);
	ht_dump_engine_removed(&d->engine, d->remove.seq, gone);
	ht_dump_kept_free(&d->remove);
	d->removing = false;
}

/* The builder is done with the dump R: the policy hears of it, and what it replaces goes. */
static void built(struct ht_dumper *d, struct ht_dump_result *r)
{
	struct ht_dump_kept victim;
	bool replaces;

	ht_dump_capture_free(&r->capture);
	d->building = false;
	replaces = ht_dump_engine_written(&d->engine, r->seq, r->ok, r->bytes, r->path,
					  r->raw_path[0] ? r->raw_path : NULL, r->dev, r->ino,
					  &victim);
	if (!replaces)
		return;
	d->remove = victim;
	d->removing = true;
	snprintf(d->replacing_path, sizeof(d->replacing_path), "%s", r->path);
	d->replacing_rank = d->building_rank;
	if (taken(&d->exited)) {
		/* No builder any more (the session is stopping): the event loop removes it. */
		removed(d, remove_files(&d->remove));
		return;
	}
	turn_over(&d->remove_full, 1);
	ring_bell(d->builder_fd);
}

static void print_lines(void *ctx, unsigned int stream, const char *a, size_t alen, const char *b,
			size_t blen)
{
	struct ht_dumper *d = ctx;
	FILE *f = stream == LINES_JSON ? d->cfg.json_out : stderr;

	fwrite(a, 1, alen, f);
	fwrite(b, 1, blen, f);
	fflush(f);
}

/* What the builder gave back: its lines, then its result. Never waits. */
static void collect(struct ht_dumper *d)
{
	struct ht_dump_result *r = &d->result;

	ht_text_ring_drain(&d->lines, print_lines, d);
	if (!taken(&d->result_full))
		return;
	/* The lines it wrote before this result, printed before what the result brings. */
	ht_text_ring_drain(&d->lines, print_lines, d);
	if (r->what == HT_DUMP_RESULT_BUILT)
		built(d, r);
	else
		removed(d, r->gone);
	turn_over(&d->result_full, 0);
	/* A builder waiting for the slot looks again now. */
	ring_bell(d->builder_fd);
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
	r = ht_dump_engine_offer(&d->engine, &o, now);
	if (r.decision != HT_DUMP_NOW && r.decision != HT_DUMP_LATER)
		release(&d->held[id]);
	if (r.dropped) {
		say_decision(d, &d->held[r.dropped_id].job, r.dropped_reason);
		release(&d->held[r.dropped_id]);
	}
	say_decision(d, job, r.decision);
	return r.decision;
}

void ht_dumper_exec(struct ht_dumper *d, int tgid)
{
	uint32_t tail;

	if (!d->started || tgid <= 0)
		return;
	tail = __atomic_load_n(&d->exec_tail, __ATOMIC_ACQUIRE);
	/* Full: the idle re-reads and the next dump's still come. */
	if (d->exec_head - tail == HT_DUMP_EXECS)
		return;
	d->exec_ring[d->exec_head % HT_DUMP_EXECS] = (struct ht_dump_exec){
		.tgid = tgid, .exec_ns = ht_clock_ns(CLOCK_MONOTONIC)
	};
	__atomic_store_n(&d->exec_head, d->exec_head + 1, __ATOMIC_RELEASE);
	ring_bell(d->builder_fd);
}

void ht_dumper_read(struct ht_dumper *d, uint64_t read_ns)
{
	if (!d->started)
		return;
	ht_dump_engine_read(&d->engine, read_ns);
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
	collect(d);
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
}

/*
 * The event loop's last turn is over: from here it waits for the builder's
 * work, which is no stall for the guard to end.
 */
static void ends_its_turns(struct ht_dumper *d)
{
	ht_loop_beat_waits(&d->beat);
}

void ht_dumper_wait_idle(struct ht_dumper *d)
{
	if (!d->started)
		return;
	ht_dump_engine_finish(&d->engine);
	/* The event loop no longer runs: what is held is frozen and written from here. */
	ends_its_turns(d);
	for (;;) {
		uint64_t due = ht_dumper_deadline(d);

		if (due) {
			ht_sleep_until_ns(due);
		} else if (d->building || d->removing) {
			wait_bell(d->wake_fd, -1);
		} else if (ht_dump_engine_idle(&d->engine)) {
			/* Lines of the last idle re-read, if any. */
			collect(d);
			break;
		}
		ht_dumper_tick(d, ht_clock_ns(CLOCK_MONOTONIC));
	}
}

void ht_dumper_stop(struct ht_dumper *d)
{
	if (!d->started)
		return;
	ends_its_turns(d);
	turn_over(&d->stopping, 1);
	ring_bell(d->builder_fd);
	/* A dump being written is finished; what the builder gives back meanwhile is taken. */
	while (!taken(&d->exited)) {
		collect(d);
		wait_bell(d->wake_fd, 100);
	}
	pthread_join(d->thread, NULL);
	/* Lowers what it raised: to a builder that is gone, nothing is done. */
	ht_builder_guard_stop(&d->guard);
	collect(d);
	/* What the builder never took: a replaced dump to remove, a dump to write. */
	if (taken(&d->remove_full))
		removed(d, remove_files(&d->remove));
	if (taken(&d->build_full))
		ht_dump_capture_free(&d->build_capture);
	turn_over(&d->build_full, 0);
	for (unsigned int i = 0; i < HT_DUMP_HELD; i++)
		release(&d->held[i]);
	ht_dump_engine_free(&d->engine);
	ht_text_ring_free(&d->lines);
	close_fds(d);
	d->started = false;
}

void ht_dumper_stats(struct ht_dumper *d, struct ht_dump_stats *out)
{
	*out = d->engine.st;
	out->bytes = d->engine.disk_bytes;
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
