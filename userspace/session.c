// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "breach_format.h"
#include "code_triggers.h"
#include "comm_cache.h"
#include "dumper.h"
#include "histogram.h"
#include "json.h"
#include "kernel_btf.h"
#include "ksyms.h"
#include "log.h"
#include "monitor.h"
#include "output.h"
#include "privileges.h"
#include "proc.h"
#include "sampler.h"
#include "intelpt_capture.h"
#include "symbolizer.h"
#include "unwind_dwarf.h"
#include "session.h"
#include "units.h"

#include <bpf/btf.h>

#define STATUS_TTY_INTERVAL_S  1
#define STATUS_PLAIN_INTERVAL_S 10
/* Housekeeping: what exited threads held is given back this often. */
#define HOUSEKEEPING_NS 250000000ULL
/*
 * How long an exited task's name stays in the comm map at least; longer
 * while a dump whose window it may appear in is not yet written.
 */
#define COMM_KEEP_NS 250000000ULL

enum { EV_BREACH = 1, EV_SIGNAL, EV_STATUS, EV_TARGET_EXIT, EV_DURATION, EV_DUMP, EV_TRIGGER };

struct kind_stats {
	uint64_t count;
	uint64_t max_ns;
	uint32_t max_tid;
	char max_comm[HT_COMM_LEN + 1];
};

struct session {
	const struct ht_options *opt;
	int tgid;
	char target_comm[HT_COMM_BUF];
	struct ht_monitor monitor;
	struct ht_sampler sampler;
	struct ht_intelpt pt;
	struct ht_code_triggers triggers;
	struct ht_marks_source marks;
	struct ht_dumper dumper;
	uint64_t trigger_hits;
	uint64_t lost_reported; /* losses already said on stderr */
	struct ht_comm_cache *comms;
	struct ht_ksyms *ksyms;
	uint64_t start_ns;
	struct kind_stats kinds[HT_BREACH_KIND_MAX];
	bool status_on_tty;
	bool status_shown;
	uint64_t last_status_ns, last_records;
	int epfd, sigfd, statusfd, pidfd, durationfd, dumpfd;
	/* `run`: the child we started. */
	pid_t child;
	int child_status;
	bool child_reaped;
	int stop_signals;
	bool stop;
};

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t threshold_of(const struct ht_options *o, unsigned int kind)
{
	switch (kind) {
	case HT_BREACH_RQ_DELAY:
		return o->rq_delay_ns;
	case HT_BREACH_OFF_CPU:
		return o->off_cpu_ns;
	case HT_BREACH_SYSCALL:
		return o->syscall_ns;
	}
	return 0;
}

static void clear_status_line(struct session *s)
{
	if (s->status_on_tty && s->status_shown) {
		fputs("\r\033[K", stderr);
		s->status_shown = false;
	}
}

static void fill_culprits(struct session *s, struct ht_breach_info *bi)
{
	const struct ht_breach *b = &bi->b;
	struct ht_sched_index idx;
	struct ht_fr_window w;

	if (ht_recorder_read(&s->monitor.recorder, b->start_ns, b->end_ns, &w))
		return;
	if (ht_sched_index_build(&w, &idx)) {
		ht_fr_window_free(&w);
		return;
	}
	ht_culprits_compute(&w, &idx, b->tid, b->start_ns, b->end_ns, b->wake_cpu, &bi->culprits);
	ht_sched_index_free(&idx);
	for (unsigned int i = 0; i < bi->culprits.count; i++)
		ht_comm_lookup(s->comms, bi->culprits.top[i].pid, bi->culprits.top[i].cpu,
			       bi->culprit_comm[i], sizeof(bi->culprit_comm[i]));
	bi->have_culprits = true;
	ht_fr_window_free(&w);
}

static void note_breach(struct session *s, const struct ht_breach *b)
{
	struct kind_stats *k = &s->kinds[b->kind];
	uint64_t dur = b->end_ns - b->start_ns;

	k->count++;
	if (dur > k->max_ns) {
		k->max_ns = dur;
		k->max_tid = b->tid;
		snprintf(k->max_comm, sizeof(k->max_comm), "%.*s", HT_COMM_LEN, b->comm);
	}
}

/*
 * Freeze what is due already, and say when the next thing is due (0:
 * nothing). A timer set in the past would cost another interrupt and
 * wakeup between the breach and the freeze. A tick always moves the dumper
 * on; the bound is only a guard.
 */
static uint64_t tick_due_dumps(struct session *s)
{
	uint64_t due = ht_dumper_deadline(&s->dumper), now = monotonic_ns();

	for (int i = 0; i < 4 && due && due <= now; i++) {
		ht_dumper_tick(&s->dumper, now);
		due = ht_dumper_deadline(&s->dumper);
		now = monotonic_ns();
	}
	return due;
}

static void offer_breach_dump(struct session *s, const struct ht_breach_info *bi)
{
	struct ht_dump_job job;

	ht_dump_job_for_breach(&job, &bi->b, bi->threshold_ns);
	/* A window that has ended already (no --post) freezes now, before the breach is printed. */
	if (ht_dumper_offer(&s->dumper, &job) == HT_DUMP_NOW)
		tick_due_dumps(s);
}

static void offer_asked_dump(struct session *s, const char *kind)
{
	struct ht_dump_job job;

	ht_dump_job_asked(&job, kind, monotonic_ns());
	ht_dumper_offer(&s->dumper, &job);
}

static int on_breach(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	struct ht_breach_info bi = { 0 };

	if (size < sizeof(bi.b))
		return 0;
	memcpy(&bi.b, data, sizeof(bi.b));
	if (bi.b.kind == 0 || bi.b.kind >= HT_BREACH_KIND_MAX)
		return 0;
	bi.threshold_ns = threshold_of(s->opt, bi.b.kind);
	bi.since_start_s = (double)(int64_t)(bi.b.end_ns - s->start_ns) / 1e9;
	/* The dump first: its sources freeze at the window's end, whatever we do here. */
	offer_breach_dump(s, &bi);
	if (bi.b.kind == HT_BREACH_RQ_DELAY)
		fill_culprits(s, &bi);
	note_breach(s, &bi.b);
	clear_status_line(s);
	if (s->opt->json)
		ht_breach_print_json(stdout, &bi, s->ksyms);
	else
		ht_breach_print_text(stdout, &bi);
	return 0;
}

static uint64_t total_lost(const struct ht_monitor_counters *c)
{
	return c->value[HT_CNT_RB_DROPS] + c->value[HT_CNT_STORAGE_FAILS] +
	       c->value[HT_CNT_COMM_UPDATE_FAILS] + c->recursion_misses;
}

static uint64_t total_breaches(const struct session *s)
{
	uint64_t n = 0;

	for (int k = 1; k < HT_BREACH_KIND_MAX; k++)
		n += s->kinds[k].count;
	return n;
}

static void print_status(struct session *s)
{
	struct ht_monitor_counters c;
	uint64_t now = monotonic_ns();
	double dt = (double)(now - s->last_status_ns) / 1e9;
	char rate[32];

	if (ht_monitor_read_counters(&s->monitor, &c))
		return;
	ht_format_count(dt > 0 ? (double)(c.records_written - s->last_records) / dt : 0, rate,
			sizeof(rate));
	s->last_status_ns = now;
	s->last_records = c.records_written;
	fprintf(stderr, "%shybtrace: %.0fs, %s events/s, %llu breaches, %llu lost%s",
		s->status_on_tty ? "\r\033[K" : "", (double)(now - s->start_ns) / 1e9, rate,
		(unsigned long long)total_breaches(s), (unsigned long long)total_lost(&c),
		s->status_on_tty ? "" : "\n");
	s->status_shown = s->status_on_tty;
}

static void print_dump_stats_text(struct session *s)
{
	struct ht_dumper_stats d;
	char size[32];

	ht_dumper_stats(&s->dumper, &d);
	printf("  dumps: %u written (%sB) in %s, %u failed; not dumped: %llu min-interval, "
	       "%llu max-dumps, %llu max-disk, %llu during another dump\n",
	       d.written, ht_format_count((double)d.bytes, size, sizeof(size)),
	       s->opt->output_dir, d.failed,
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_INTERVAL],
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_COUNT],
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_DISK],
	       (unsigned long long)d.skipped[HT_DUMP_DEFER_BUSY]);
}

static void print_summary_text(struct session *s, const struct ht_monitor_counters *c)
{
	char dur[32];

	printf("\nhybtrace: watched pid %d (%s) for %.1fs\n", s->tgid, s->target_comm,
	       (double)(monotonic_ns() - s->start_ns) / 1e9);
	for (int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		const struct kind_stats *ks = &s->kinds[k];

		if (!threshold_of(s->opt, (unsigned int)k))
			continue;
		printf("  %-9s %llu breaches", ht_breach_kind_name((unsigned int)k),
		       (unsigned long long)ks->count);
		if (ks->count)
			printf(", largest %s (tid %u %s)",
			       ht_format_duration(ks->max_ns, dur, sizeof(dur)), ks->max_tid,
			       ks->max_comm);
		putchar('\n');
	}
	printf("  events: %llu flight-recorder records, %llu breaches detected in the kernel\n",
	       (unsigned long long)c->records_written,
	       (unsigned long long)c->value[HT_CNT_BREACHES]);
	print_dump_stats_text(s);
	printf("  lost: %llu (breach ring buffer %llu, task storage %llu, comm map %llu, "
	       "recursion %llu)\n",
	       (unsigned long long)total_lost(c), (unsigned long long)c->value[HT_CNT_RB_DROPS],
	       (unsigned long long)c->value[HT_CNT_STORAGE_FAILS],
	       (unsigned long long)c->value[HT_CNT_COMM_UPDATE_FAILS],
	       (unsigned long long)c->recursion_misses);
}

static void print_dump_stats_json(struct session *s)
{
	struct ht_dumper_stats d;

	ht_dumper_stats(&s->dumper, &d);
	printf(",\"dumps\":{\"written\":%u,\"bytes\":%llu,\"failed\":%u,\"skipped\":{"
	       "\"min_interval\":%llu,\"max_dumps\":%llu,\"max_disk\":%llu,\"busy\":%llu}}",
	       d.written, (unsigned long long)d.bytes, d.failed,
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_INTERVAL],
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_COUNT],
	       (unsigned long long)d.skipped[HT_DUMP_SKIP_DISK],
	       (unsigned long long)d.skipped[HT_DUMP_DEFER_BUSY]);
}

static void print_summary_json(struct session *s, const struct ht_monitor_counters *c)
{
	printf("{\"type\":\"summary\",\"pid\":%d,\"comm\":", s->tgid);
	ht_json_string(stdout, s->target_comm);
	printf(",\"seconds\":%.3f,\"breaches\":{", (double)(monotonic_ns() - s->start_ns) / 1e9);
	for (int k = 1; k < HT_BREACH_KIND_MAX; k++)
		printf("%s\"%s\":{\"count\":%llu,\"max_ns\":%llu}", k > 1 ? "," : "",
		       ht_breach_kind_name((unsigned int)k), (unsigned long long)s->kinds[k].count,
		       (unsigned long long)s->kinds[k].max_ns);
	printf("},\"detected\":%llu,\"records\":%llu,\"lost\":{\"total\":%llu,"
	       "\"ring_buffer\":%llu,\"task_storage\":%llu,\"comm_map\":%llu,\"recursion\":%llu}",
	       (unsigned long long)c->value[HT_CNT_BREACHES],
	       (unsigned long long)c->records_written, (unsigned long long)total_lost(c), (unsigned long long)c->value[HT_CNT_RB_DROPS],
	       (unsigned long long)c->value[HT_CNT_STORAGE_FAILS],
	       (unsigned long long)c->value[HT_CNT_COMM_UPDATE_FAILS],
	       (unsigned long long)c->recursion_misses);
	/* Which path judged the intervals: the tests check that a fallback they force ran. */
	printf(",\"judged\":{\"rq_sched_info\":%llu,\"rq_thread_state\":%llu,"
	       "\"thread_slot\":%llu,\"task_storage\":%llu}",
	       (unsigned long long)c->value[HT_CNT_RQ_SCHED_INFO],
	       (unsigned long long)c->value[HT_CNT_RQ_THREAD_STATE],
	       (unsigned long long)c->value[HT_CNT_STATE_SLOT],
	       (unsigned long long)c->value[HT_CNT_STATE_STORAGE]);
	print_dump_stats_json(s);
}

static void print_summary(struct session *s)
{
	static const char *const titles[HT_BREACH_KIND_MAX] = {
		[HT_BREACH_RQ_DELAY] = "run-queue delay",
		[HT_BREACH_OFF_CPU] = "off-CPU time",
		[HT_BREACH_SYSCALL] = "syscall time",
	};
	struct ht_monitor_counters c;
	uint64_t slots[HT_HIST_SLOTS];
	char title[128];

	clear_status_line(s);
	/* `run` read the name before exec; what it is called now is what counts. */
	ht_comm_lookup(s->comms, (uint32_t)s->tgid, 0, s->target_comm, sizeof(s->target_comm));
	if (ht_monitor_read_counters(&s->monitor, &c)) {
		ht_warn("%s", ht_last_error());
		return;
	}
	if (s->opt->json)
		print_summary_json(s, &c);
	else
		print_summary_text(s, &c);
	if (s->opt->json)
		fputs(",\"histograms\":{", stdout);
	for (unsigned int k = 1, n = 0; k < HT_BREACH_KIND_MAX; k++) {
		/* Run-queue delays are always measured; the others when their breach is on. */
		if (k != HT_BREACH_RQ_DELAY && !threshold_of(s->opt, k))
			continue;
		if (ht_monitor_read_hist(&s->monitor, k, slots))
			continue;
		if (s->opt->json) {
			printf("%s\"%s\":", n++ ? "," : "", ht_breach_kind_name(k));
			ht_hist_print_json(stdout, slots, HT_HIST_SLOTS);
		} else {
			snprintf(title, sizeof(title), "%s of pid %d (%s), log2 buckets:", titles[k],
				 s->tgid, s->target_comm);
			ht_hist_print(stdout, title, slots, HT_HIST_SLOTS);
		}
	}
	if (s->opt->json)
		fputs("}}\n", stdout);
	fflush(stdout);
}

static int add_fd(struct session *s, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev))
		return ht_fail("epoll: %s", strerror(errno));
	return 0;
}

static int arm_timer(int fd, uint64_t first_ns, uint64_t interval_ns)
{
	struct itimerspec its = {
		.it_value = { (time_t)(first_ns / 1000000000ULL), (long)(first_ns % 1000000000ULL) },
		.it_interval = { (time_t)(interval_ns / 1000000000ULL),
				 (long)(interval_ns % 1000000000ULL) },
	};

	return timerfd_settime(fd, 0, &its, NULL);
}

static int add_trigger_fds(struct session *s)
{
	int fds[256];
	size_t n = ht_code_triggers_fds(&s->triggers, fds, 256);

	for (size_t i = 0; i < n; i++)
		if (add_fd(s, fds[i], EV_TRIGGER))
			return -1;
	return 0;
}

static int open_loop_fds(struct session *s)
{
	sigset_t mask;
	uint64_t interval;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGUSR2);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	s->statusfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	s->durationfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	s->dumpfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (s->epfd < 0 || s->sigfd < 0 || s->statusfd < 0 || s->durationfd < 0 || s->dumpfd < 0)
		return ht_fail("cannot set up the event loop: %s", strerror(errno));
	interval = HOUSEKEEPING_NS;
	if (arm_timer(s->statusfd, interval, interval))
		return ht_fail("timerfd: %s", strerror(errno));
	if (s->opt->duration_ns && arm_timer(s->durationfd, s->opt->duration_ns, 0))
		return ht_fail("timerfd: %s", strerror(errno));
	if (add_fd(s, ht_monitor_breach_fd(&s->monitor), EV_BREACH) ||
	    add_fd(s, s->sigfd, EV_SIGNAL) || add_fd(s, s->statusfd, EV_STATUS) ||
	    add_fd(s, s->pidfd, EV_TARGET_EXIT) || add_fd(s, s->durationfd, EV_DURATION) ||
	    add_fd(s, s->dumpfd, EV_DUMP) || add_fd(s, ht_dumper_fd(&s->dumper), EV_DUMP))
		return -1;
	return add_trigger_fds(s);
}

/* A code trigger's hit: a dump of kind "trigger" around it. */
static void offer_trigger_dump(struct session *s, const struct ht_bp_hit *hit)
{
	struct ht_dump_job job;
	struct ht_symbol sym;

	memset(&job, 0, sizeof(job));
	snprintf(job.kind, sizeof(job.kind), "trigger");
	job.start_ns = hit->time_ns;
	job.end_ns = hit->time_ns;
	job.has_hit = true;
	job.hit = *hit;
	snprintf(job.trigger, sizeof(job.trigger), "%s",
		 ht_code_trigger_text(&s->triggers, hit->trigger));
	if (s->triggers.symbolizer && !ht_symbolize(s->triggers.symbolizer, hit->ip, &sym))
		ht_symbol_format(&sym, hit->ip, job.function, sizeof(job.function));
	else
		snprintf(job.function, sizeof(job.function), "0x%llx", (unsigned long long)hit->ip);
	clear_status_line(s);
	if (s->opt->json) {
		flockfile(stdout);
		printf("{\"type\":\"trigger\",\"time_s\":%.6f,\"trigger\":",
		       (double)(int64_t)(hit->time_ns - s->start_ns) / 1e9);
		ht_json_string(stdout, job.trigger);
		printf(",\"function\":");
		ht_json_string(stdout, job.function);
		printf(",\"tid\":%u,\"cpu\":%u,\"ip\":%llu,\"args\":[%llu,%llu,%llu],"
		       "\"time_ns\":%llu}\n",
		       hit->tid, hit->cpu, (unsigned long long)hit->ip,
		       (unsigned long long)hit->arg[0], (unsigned long long)hit->arg[1],
		       (unsigned long long)hit->arg[2], (unsigned long long)hit->time_ns);
		funlockfile(stdout);
	} else {
		printf("%.6f trigger %s hit in tid %u cpu %u at %s: rdi=%#llx rsi=%#llx rdx=%#llx\n",
		       (double)(int64_t)(hit->time_ns - s->start_ns) / 1e9, job.trigger, hit->tid,
		       hit->cpu, job.function, (unsigned long long)hit->arg[0],
		       (unsigned long long)hit->arg[1], (unsigned long long)hit->arg[2]);
	}
	s->trigger_hits++;
	ht_dumper_offer(&s->dumper, &job);
}

static void handle_trigger_hits(struct session *s)
{
	struct ht_bp_hits hits;

	if (ht_code_triggers_drain(&s->triggers, &hits)) {
		ht_warn("triggers: %s", ht_last_error());
		return;
	}
	for (size_t i = 0; i < hits.count; i++)
		offer_trigger_dump(s, &hits.v[i]);
	ht_bp_hits_free(&hits);
}

static void handle_signal(struct session *s)
{
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGUSR2) {
			clear_status_line(s);
			fprintf(stderr, "hybtrace: SIGUSR2: manual dump requested\n");
			offer_asked_dump(s, "manual");
			continue;
		}
		/* `run`: a terminal's signal reached the child too; a kill(1) did not. */
		if (s->child && !s->child_reaped && s->stop_signals++ == 0) {
			if (si.ssi_signo == SIGTERM)
				kill(s->child, SIGTERM);
			continue;
		}
		s->stop = true;
	}
}

/* Losses are said as they happen, not only in the status line and the summary. */
static void report_new_losses(struct session *s)
{
	struct ht_monitor_counters c;
	uint64_t lost;

	if (ht_monitor_read_counters(&s->monitor, &c))
		return;
	lost = total_lost(&c);
	if (lost <= s->lost_reported)
		return;
	clear_status_line(s);
	fprintf(stderr, "hybtrace: %llu more events lost (breach ring buffer %llu, task storage "
			"%llu, comm map %llu, recursion %llu in all)\n",
		(unsigned long long)(lost - s->lost_reported),
		(unsigned long long)c.value[HT_CNT_RB_DROPS],
		(unsigned long long)c.value[HT_CNT_STORAGE_FAILS],
		(unsigned long long)c.value[HT_CNT_COMM_UPDATE_FAILS],
		(unsigned long long)c.recursion_misses);
	if (s->opt->json) {
		flockfile(stdout);
		printf("{\"type\":\"lost\",\"total\":%llu,\"ring_buffer\":%llu}\n",
		       (unsigned long long)lost, (unsigned long long)c.value[HT_CNT_RB_DROPS]);
		funlockfile(stdout);
	}
	s->lost_reported = lost;
}

/*
 * Four times a second: what exited threads held (breakpoints, names) is
 * given back, losses are said; the status line when it is due.
 */
static void housekeeping(struct session *s)
{
	uint64_t interval = (s->status_on_tty ? STATUS_TTY_INTERVAL_S : STATUS_PLAIN_INTERVAL_S) *
			    1000000000ULL;
	uint64_t now = monotonic_ns(), forget_before;

	ht_code_triggers_reap(&s->triggers);
	if (s->pt.open)
		ht_intelpt_reap(&s->pt);
	/* A name goes once no dump still to be written can show its task. */
	forget_before = now - COMM_KEEP_NS;
	if (s->dumper.started) {
		uint64_t oldest = ht_dumper_oldest_window(&s->dumper);

		if (oldest < forget_before)
			forget_before = oldest;
	}
	ht_monitor_forget_exited(&s->monitor, forget_before);
	report_new_losses(s);
	if (!s->opt->quiet && now - s->last_status_ns >= interval - HOUSEKEEPING_NS / 2)
		print_status(s);
}

static void drain_timer(int fd)
{
	uint64_t expirations;

	while (read(fd, &expirations, sizeof(expirations)) == sizeof(expirations))
		;
}

/* The dump timer follows the dumper: the next window end or deferred dump. */
static void arm_dump_timer(struct session *s)
{
	uint64_t due = tick_due_dumps(s);
	struct itimerspec its = { 0 };

	if (due) {
		its.it_value.tv_sec = (time_t)(due / 1000000000ULL);
		its.it_value.tv_nsec = (long)(due % 1000000000ULL);
	}
	timerfd_settime(s->dumpfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int run_loop(struct session *s)
{
	struct epoll_event events[8];

	while (!s->stop) {
		int n;

		arm_dump_timer(s);
		n = epoll_wait(s->epfd, events, 8, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ht_fail("epoll_wait: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++) {
			switch (events[i].data.u64) {
			case EV_BREACH:
				ht_monitor_consume(&s->monitor);
				break;
			case EV_SIGNAL:
				handle_signal(s);
				break;
			case EV_STATUS:
				drain_timer(s->statusfd);
				housekeeping(s);
				break;
			case EV_DUMP:
				drain_timer(s->dumpfd);
				ht_dumper_tick(&s->dumper, monotonic_ns());
				break;
			case EV_TRIGGER:
				handle_trigger_hits(s);
				break;
			case EV_DURATION:
			case EV_TARGET_EXIT:
				s->stop = true;
				break;
			}
		}
	}
	/* Breaches the last events raised are still in the ring. */
	ht_monitor_consume(&s->monitor);
	return 0;
}

/* The dump in progress (and an exit dump, if asked for) finish before we detach. */
static void finish_dumps(struct session *s)
{
	if (s->opt->dump_on_exit)
		offer_asked_dump(s, "exit");
	ht_dumper_wait_idle(&s->dumper);
	ht_dumper_stop(&s->dumper);
}

static void close_session(struct session *s)
{
	ht_dumper_stop(&s->dumper);
	ht_code_triggers_close(&s->triggers);
	ht_sampler_close(&s->sampler);
	if (s->pt.open)
		ht_intelpt_close(&s->pt);
	ht_monitor_close(&s->monitor);
	ht_ksyms_free(s->ksyms);
	free(s->comms);
	for (int *fd = &s->epfd; fd <= &s->dumpfd; fd++)
		if (*fd >= 0)
			close(*fd);
}

static void block_loop_signals(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
}

/*
 * Intel PT for every thread of the target. With `auto`, a PT that cannot be
 * had (another tool holds it on a CPU, the memory budget) falls back to
 * sampling, said in one line; with `--source pt` it is an error.
 */
static int start_intelpt(struct session *s, enum ht_source *source)
{
	const struct ht_options *o = s->opt;
	struct ht_intelpt_config cfg = {
		.tgid = s->tgid,
		.aux_bytes = o->pt_size_bytes,
		/* check_sources made sure the flight recorder leaves this much. */
		.memory_budget_bytes = o->max_memory_bytes -
				       o->history_bytes * (uint64_t)libbpf_num_possible_cpus(),
		/* Tests on machines without PT: the sideband, maps and raw captures, no PT bytes. */
		.sideband_only = getenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY") != NULL,
	};

	ht_intelpt_request_default(&cfg.request);
	cfg.request.fine_timing = o->pt_fine_timing;
	if (!ht_intelpt_open(&s->pt, &cfg))
		return 0;
	if (o->source == HT_SOURCE_PT)
		return -1;
	ht_warn("Intel PT not used, sampling instead: %s", ht_last_error());
	*source = HT_SOURCE_SAMPLE;
	return 0;
}

/* The on-CPU source: Intel PT, or sampling of every thread of the target. */
static int start_on_cpu_source(struct session *s)
{
	const struct ht_options *o = s->opt;
	enum ht_source source = o->source;
	struct ht_sampler_config cfg = {
		.tgid = s->tgid,
		.freq_hz = o->sample_freq_hz,
		.ring_bytes = o->sample_history_bytes,
		.callgraph = o->callgraph == HT_CALLGRAPH_MODE_DWARF ? HT_CALLGRAPH_DWARF
								 : HT_CALLGRAPH_FP,
		.regs_mask = HT_DWARF_SAMPLE_REGS_MASK,
		.stack_bytes = HT_SAMPLE_STACK_BYTES,
	};

	if (source == HT_SOURCE_PT && start_intelpt(s, &source))
		return -1;
	if (source != HT_SOURCE_SAMPLE)
		return 0;
	return ht_sampler_open(&s->sampler, &cfg);
}

/* The event loop at a real-time priority: breaches are taken as soon as they end. */
static int set_realtime(unsigned int priority)
{
	struct sched_param sp = { .sched_priority = (int)priority };

	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		return ht_fail("--rt-priority %u: %s (needs CAP_SYS_NICE)", priority,
			       strerror(errno));
	return 0;
}

static int start_dumper(struct session *s)
{
	s->marks.tgid = s->tgid;
	ht_tsc_pair_take(&s->marks.attach_pair);
	const struct ht_options *o = s->opt;
	struct ht_dumper_config cfg = {
		.output_dir = o->output_dir,
		.pre_ns = o->pre_ns,
		.post_ns = o->post_ns,
		.policy = { o->min_interval_ns, o->max_dumps, o->max_disk_bytes },
		.tgid = s->tgid,
		.target_comm = s->target_comm,
		.cmdline = o->cmdline,
		.json = o->json,
		.monitor = &s->monitor,
		.ksyms = s->ksyms,
		.sampler = s->sampler.open ? &s->sampler : NULL,
		.intelpt = s->pt.open ? &s->pt : NULL,
		.keep_raw = o->keep_raw,
		.rt_priority = o->rt_priority,
		.marks = &s->marks,
	};

	return ht_dumper_start(&s->dumper, &cfg);
}

/* HYBTRACE_TEST_THREAD_SLOTS: a power of two from 1 to 32768, else 0 (sized to pid_max). */
static unsigned int test_thread_slots(void)
{
	const char *v = getenv("HYBTRACE_TEST_THREAD_SLOTS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n && n <= HT_THREAD_SLOTS_MAX && !(n & (n - 1)) ? (unsigned int)n : 0;
}

static bool resolve_prev_state_arg(const struct ht_options *o)
{
	struct btf *btf;
	bool has_arg;

	if (o->prev_state_mode != HT_PREV_STATE_AUTO)
		return o->prev_state_mode == HT_PREV_STATE_ARG;
	btf = ht_btf_open(o->btf_path);
	if (!btf)
		return false;
	has_arg = ht_btf_switch_has_prev_state_arg(btf);
	btf__free(btf);
	return has_arg;
}

/* One map operation, as the loop and the dumper will do them. */
static int probe_bpf_maps(void *ctx)
{
	struct session *s = ctx;
	struct ht_monitor_counters c;

	return ht_monitor_read_counters(&s->monitor, &c);
}

/*
 * Everything between "we know the target" and "the loop runs". Returns 0, or
 * the exit status to fail with (the reason in ht_last_error()).
 */
static int start_session(struct session *s, const struct ht_options *o, int tgid)
{
	struct ht_monitor_config cfg = {
		.tgid = tgid,
		.rq_delay_ns = o->rq_delay_ns,
		.off_cpu_ns = o->off_cpu_ns,
		.syscall_ns = o->syscall_ns,
		.syscall_filter_on = o->syscall_filter_on,
		.history_bytes = o->history_bytes,
		.btf_path = o->btf_path,
		.on_breach = on_breach,
		.on_breach_ctx = s,
	};
	struct btf *btf;

	s->opt = o;
	s->tgid = tgid;
	s->status_on_tty = isatty(STDERR_FILENO);
	if (ht_proc_thread_comm(tgid, s->target_comm, sizeof(s->target_comm)))
		snprintf(s->target_comm, sizeof(s->target_comm), "?");
	/* A missing or bad BTF file is the user's to fix: say so before anything loads. */
	btf = ht_btf_open(o->btf_path);
	if (!btf)
		return HT_EXIT_USAGE;
	btf__free(btf);
	cfg.prev_state_from_arg = resolve_prev_state_arg(o);
	/* For tests: the path kernels without CONFIG_SCHED_INFO take. */
	cfg.rq_from_thread_state = getenv("HYBTRACE_RQ_FROM_STORAGE") != NULL;
	/* For tests: so few thread slots that threads share them and fall back to task storage. */
	cfg.thread_slots = test_thread_slots();
	memcpy(cfg.syscall_filter, o->syscall_filter, sizeof(cfg.syscall_filter));
	s->comms = malloc(sizeof(*s->comms));
	if (!s->comms) {
		ht_fail("out of memory");
		return HT_EXIT_FAILURE;
	}
	/* Specs are checked before anything else attaches: a typo is exit 2, nothing left. */
	if (o->ntriggers && ht_code_triggers_open(&s->triggers, s->tgid, o->triggers, o->ntriggers,
						  o->multi, s->child != 0))
		return HT_EXIT_USAGE;
	/* Kernel addresses are readable now, while we are privileged. */
	s->ksyms = ht_ksyms_load(NULL);
	if (ht_monitor_open(&s->monitor, &cfg))
		return HT_EXIT_FAILURE;
	ht_comm_cache_init(s->comms, &s->monitor);
	s->start_ns = s->monitor.attached_ns;
	s->last_status_ns = s->start_ns;
	if (start_on_cpu_source(s))
		return HT_EXIT_FAILURE;
	/* Attached: from here on only what perf events, dumps and /proc need. */
	if (ht_drop_capabilities(probe_bpf_maps, s, NULL) || start_dumper(s))
		return HT_EXIT_FAILURE;
	if (o->rt_priority && set_realtime(o->rt_priority))
		return HT_EXIT_FAILURE;
	return open_loop_fds(s) ? HT_EXIT_FAILURE : 0;
}

static void init_session(struct session *s)
{
	memset(s, 0, sizeof(*s));
	s->epfd = s->sigfd = s->statusfd = s->pidfd = s->durationfd = s->dumpfd = -1;
}

/*
 * What the rings will hold, checked before anything is attached: the flight
 * recorder and the sampling rings, per CPU, against --max-memory. Also says
 * which on-CPU source `auto` means here.
 */
static int check_sources(struct ht_options *o)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t need;

	if (o->source == HT_SOURCE_PT || o->source == HT_SOURCE_AUTO) {
		bool has_pt = access("/sys/bus/event_source/devices/intel_pt", F_OK) == 0 ||
			      getenv("HYBTRACE_TEST_PT_SIDEBAND_ONLY");

		if (o->source == HT_SOURCE_PT && !has_pt)
			return ht_fail("--source pt: this machine has no Intel PT (no "
				       "/sys/bus/event_source/devices/intel_pt); use --source sample");
		o->source = has_pt ? HT_SOURCE_PT : HT_SOURCE_SAMPLE;
	}
	if (o->keep_raw && o->source != HT_SOURCE_PT)
		return ht_fail("--keep-raw saves Intel PT snapshots: it needs --source pt (or auto "
			       "on a machine with Intel PT)");
	if (ncpus <= 0)
		return ht_fail("cannot count CPUs");
	need = (uint64_t)ncpus * o->history_bytes;
	if (o->source == HT_SOURCE_SAMPLE)
		need += (uint64_t)ncpus * o->sample_history_bytes;
	if (o->source == HT_SOURCE_PT)
		need += ht_intelpt_memory_needed(o->pt_size_bytes, HT_INTELPT_SIDEBAND_BYTES,
						 (unsigned int)ncpus, false);
	if (need > o->max_memory_bytes)
		return ht_fail("the rings need %lluM on %d CPUs, more than --max-memory %lluM: "
			       "lower --history, --sample-history or --pt-size, or raise "
			       "--max-memory",
			       (unsigned long long)(need >> 20), ncpus,
			       (unsigned long long)(o->max_memory_bytes >> 20));
	return 0;
}

static int pidfd_open_target(int pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		ht_fail(errno == ESRCH ? "pid %d exited" : "cannot watch pid %d: %s", pid,
			strerror(errno));
	return fd;
}

static const char *on_cpu_source_name(const struct session *s)
{
	return s->pt.open ? "pt" : s->sampler.open ? "sample" : "none";
}

static void announce(const struct session *s)
{
	char buf[64];

	if (s->opt->json) {
		/* Whoever reads the stream learns when monitoring has begun. */
		printf("{\"type\":\"attached\",\"pid\":%d,\"comm\":", s->tgid);
		ht_json_string(stdout, s->target_comm);
		printf(",\"source\":\"%s\"}\n", on_cpu_source_name(s));
		return;
	}
	if (s->opt->quiet)
		return;
	fprintf(stderr, "hybtrace: watching pid %d (%s): rq-delay %s", s->tgid, s->target_comm,
		s->opt->rq_delay_ns ? ht_format_duration(s->opt->rq_delay_ns, buf, sizeof(buf))
				    : "off");
	fprintf(stderr, ", off-cpu %s",
		s->opt->off_cpu_ns ? ht_format_duration(s->opt->off_cpu_ns, buf, sizeof(buf))
				   : "off");
	fprintf(stderr, ", syscall %s; Ctrl-C to stop\n",
		s->opt->syscall_ns ? ht_format_duration(s->opt->syscall_ns, buf, sizeof(buf))
				   : "off");
	if (s->pt.open)
		fprintf(stderr, "hybtrace: on-CPU source: Intel PT, %lluk per CPU, %s timing%s\n",
			(unsigned long long)(s->opt->pt_size_bytes >> 10),
			s->opt->pt_fine_timing ? "fine (CYC)" : "coarse (TSC, MTC)",
			s->pt.cfg.sideband_only ? " (test mode: sideband only, no PT bytes)" : "");
	else if (s->sampler.open)
		fprintf(stderr, "hybtrace: on-CPU source: sampling at %u Hz with %s call stacks%s\n",
			s->opt->sample_freq_hz,
			s->opt->callgraph == HT_CALLGRAPH_MODE_DWARF ? "DWARF" : "frame-pointer",
			access("/sys/bus/event_source/devices/intel_pt", F_OK)
				? " (no Intel PT on this machine)" : "");
	else
		fprintf(stderr, "hybtrace: on-CPU source: none\n");
}

int ht_session_record(struct ht_options *o)
{
	struct session s;
	int tgid, status;

	init_session(&s);
	setvbuf(stdout, NULL, _IOLBF, 0);
	status = HT_EXIT_USAGE;
	if (ht_proc_resolve_target(o->pid, &tgid) || ht_check_monitor_privileges() ||
	    ht_check_target_privileges(tgid) || ht_output_dir_check(o->output_dir) || check_sources(o))
		goto fail;
	s.pidfd = pidfd_open_target(tgid);
	if (s.pidfd < 0)
		goto fail;
	block_loop_signals();
	status = start_session(&s, o, tgid);
	if (status)
		goto fail;
	announce(&s);
	status = HT_EXIT_FAILURE;
	if (run_loop(&s))
		goto fail;
	finish_dumps(&s);
	print_summary(&s);
	status = 0;
	goto out;
fail:
	ht_error("%s", ht_last_error());
out:
	close_session(&s);
	return status;
}

/*
 * Fork a child that waits on GO_FD before exec, so the monitor is attached
 * before CMD's first instruction. exec errors come back on a close-on-exec pipe.
 */
static pid_t spawn_held(char **argv, int *go_fd, int *err_fd)
{
	int go[2], err[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return ht_fail("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		return ht_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char byte;
		int e;

		close(go[1]);
		close(err[0]);
		if (read(go[0], &byte, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	*go_fd = go[1];
	*err_fd = err[0];
	return pid;
}

static int child_exit_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return HT_EXIT_FAILURE;
}

/* Release the held child; returns 0, or -1 if its exec failed. */
static int release_child(char **argv, int go_fd, int err_fd)
{
	int exec_errno;

	ssize_t n;

	if (write(go_fd, "g", 1) != 1)
		return ht_fail("cannot start '%s': %s", argv[0], strerror(errno));
	close(go_fd);
	n = read(err_fd, &exec_errno, sizeof(exec_errno));
	close(err_fd);
	if (n == sizeof(exec_errno))
		return ht_fail("cannot run '%s': %s", argv[0], strerror(exec_errno));
	return 0;
}

int ht_session_run(struct ht_options *o)
{
	int go_fd = -1, err_fd = -1, status, rc;
	struct session s;

	init_session(&s);
	setvbuf(stdout, NULL, _IOLBF, 0);
	status = HT_EXIT_USAGE;
	if (ht_check_monitor_privileges() || ht_output_dir_check(o->output_dir) ||
	    check_sources(o))
		goto fail;
	status = HT_EXIT_FAILURE;
	s.child = spawn_held(o->run_argv, &go_fd, &err_fd);
	if (s.child < 0) {
		s.child = 0;
		goto fail;
	}
	s.pidfd = pidfd_open_target(s.child);
	if (s.pidfd < 0)
		goto fail;
	block_loop_signals();
	status = start_session(&s, o, s.child);
	if (status)
		goto fail;
	status = 127; /* as a shell says "command not found" */
	rc = release_child(o->run_argv, go_fd, err_fd);
	go_fd = err_fd = -1;
	if (rc)
		goto fail;
	announce(&s);
	status = HT_EXIT_FAILURE;
	if (run_loop(&s))
		goto fail;
	finish_dumps(&s);
	print_summary(&s);
	if (waitpid(s.child, &s.child_status, 0) == s.child) {
		s.child_reaped = true;
		status = child_exit_status(s.child_status);
	}
	goto out;
fail:
	ht_error("%s", ht_last_error());
out:
	if (go_fd >= 0)
		close(go_fd); /* a child still held reads EOF and exits */
	if (err_fd >= 0)
		close(err_fd);
	if (s.child && !s.child_reaped)
		waitpid(s.child, NULL, 0);
	close_session(&s);
	return status;
}
