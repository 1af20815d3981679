// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kernel/block_stacks.h"
#include "kernel/waker_stacks.h"
#include "kernel/breach_format.h"
#include "base/breach_kinds.h"
#include "triggers/code_triggers.h"
#include "kernel/comm_cache.h"
#include "trace/dump_schema.h"
#include "dump/dumper.h"
#include "base/clock.h"
#include "base/histogram.h"
#include "base/json.h"
#include "kernel/kernel_btf.h"
#include "symbols/ksyms.h"
#include "base/log.h"
#include "base/main_stack.h"
#include "kernel/monitor.h"
#include "base/out_stream.h"
#include "base/output.h"
#include "cli/own_cpus.h"
#include "cli/proc_stats.h"
#include "base/privileges.h"
#include "base/proc.h"
#include "cli/sources.h"
#include "symbols/symbolizer.h"
#include "symbols/unwind_dwarf.h"
#include "cli/session.h"
#include "base/units.h"
#include "kernel/wait_for_work.h"

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
/* The flight recorder's rate is measured over this much: shorter is too noisy to warn on. */
#define REACH_WINDOW_NS 1000000000ULL
/*
 * How long after its clock read a breach may take to reach the ring: a
 * program the host preempts between the two (a vCPU's steal), or a record
 * reserved before and committed after others. Intervals are chosen this late.
 */
#define BREACH_READ_LAG_NS 20000000ULL
/* How long the ring is drained at exit for breaches still being sent. */
#define DRAIN_TRIES 500

enum { EV_BREACH = 1, EV_SIGNAL, EV_STATUS, EV_TARGET_EXIT, EV_DURATION, EV_DUMP, EV_TRIGGER };

struct session {
	const struct ht_options *opt;
	/* What is watched; hybtrace never is. */
	struct ht_target_spec spec;
	/*
	 * The first process named (--pid, run's child), 0 with --cgroup or
	 * --all alone: what is kept for one process (block stacks' symbols,
	 * own CPUs) is kept for it.
	 */
	int tgid;
	char target_comm[HT_COMM_BUF];
	struct ht_monitor monitor;
	/* The on-CPU source (--source), if any. */
	struct ht_open_source sources[HT_SOURCES_OPEN_MAX];
	unsigned int nsources;
	uint64_t source_threads_left_out; /* past the descriptor limit, counted at open */
	struct ht_code_triggers triggers;
	struct ht_marks_source marks;
	struct ht_marks_procs marks_procs; /* each target process's registries */
	struct ht_dumper dumper;
	/* Breach lines, or JSON lines: stdout or --json=FILE. */
	struct ht_out_stream out;
	bool out_gone;	    /* a write to it failed: the session ends, the summary goes to stderr */
	uint64_t unwritten; /* breaches read after that: reported, not written */
	/* What the flight recorder reaches back to, measured each second. */
	uint64_t *reach_heads; /* per CPU, at reach_since_ns */
	uint64_t reach_since_ns;
	uint64_t shortest_reach_ns; /* 0: not measured yet */
	uint64_t busiest_rate;	    /* records/s on the busiest CPU when it was shortest */
	bool pre_warned;
	uint64_t lost_reported; /* losses already said on stderr */
	uint64_t trigger_hits;
	/* One-shot: hits after the first (not reported); hits lost to a full ring. */
	uint64_t trigger_in_flight, trigger_lost;
	/* Threads left without breakpoints (RLIMIT_NOFILE); the dump builder reads it. */
	uint64_t trigger_left_out;
	struct ht_comm_cache *comms;
	struct ht_ksyms *ksyms;
	/* --block-stacks: the stacks sent before their breaches; NULL without it. */
	struct ht_block_stacks *blocks;
	struct ht_block_frames block_frames; /* the breach being read's */
	/* The wakers' stacks sent before the breaches that name them; NULL with --chain-depth 0. */
	struct ht_waker_stacks *wakers;
	uint64_t block_stacks_shown;
	uint64_t start_ns;
	/* Waits that breached each kind (one of two kinds counts in both), by kind. */
	struct ht_kind_stats kinds[HT_BREACH_KIND_MAX];
	/* The same by process, with each process's histograms once it exited. */
	struct ht_proc_stats procs;
	uint64_t reported; /* breach records read: one per wait */
	/* Those records by the set of kinds they breached (bits 1 << kind). */
	uint64_t by_kinds[1U << HT_BREACH_KIND_MAX];
	bool status_on_tty;
	bool status_shown;
	uint64_t last_status_ns, last_records;
	int epfd, sigfd, statusfd, pidfd, durationfd, dumpfd;
	/* `run`: the child we started. */
	pid_t child;
	/* Until then the child waited for us to attach: a wait of ours, not of its command. */
	uint64_t child_held_until_ns;
	uint64_t child_hold_breaches; /* read and left out: not counted as detected either */
	int child_status;
	bool child_reaped;
	int stop_signals;
	bool stop;
	bool announced; /* monitoring began: what the output stream holds is kept */
	/* What perf events need on this kernel (check_perf_events()). */
	enum ht_perf_access perf_access;
	int perf_paranoid;
	struct ht_own_cpus own_cpus;
	struct ht_wait_sets wait_sets;
	/* HYBTRACE_TEST_LOOP_STALL_MS (test_loop_stall()), and whether it was done. */
	uint64_t test_loop_stall_ns;
	bool test_loop_stalled;
};

static uint64_t monotonic_ns(void)
{
	return ht_monotonic_ns();
}

static uint64_t threshold_of(const struct ht_options *o, unsigned int kind)
{
	return kind < HT_BREACH_KIND_MAX ? o->threshold_ns[kind] : 0;
}

static void clear_status_line(struct session *s)
{
	if (s->status_on_tty && s->status_shown) {
		fputs("\r\033[K", stderr);
		s->status_shown = false;
	}
}

/*
 * hybtrace's threads moved off its target's CPUs (own_cpus.h): said the first
 * time, where to and from when (since attach, once the move is done); later
 * moves follow the target's CPUs as that line says, without a line each. A
 * move that waited long on one of its threads is said each time.
 */
#define SLOW_MOVE_NS 10000000ULL

static void say_own_cpus(struct session *s, bool moved)
{
	char where[600];

	if (!moved)
		return;
	if (ht_own_cpus_slow_move(&s->own_cpus, SLOW_MOVE_NS, where, sizeof(where))) {
		clear_status_line(s);
		fprintf(stderr, "hybtrace: %s\n", where);
	}
	if (s->own_cpus.moves != 1)
		return;
	ht_own_cpus_describe(&s->own_cpus, where, sizeof(where));
	clear_status_line(s);
	fprintf(stderr,
		"hybtrace: %s, from %.6f s on; they follow the CPUs the target may run on, so "
		"as not to run instead of it\n",
		where, (double)(int64_t)(monotonic_ns() - s->start_ns) / 1e9);
}

/*
 * Read the target's CPUs and keep off them, the dump builder raised meanwhile:
 * the event loop may wait on it there (dumper.h's ht_dumper_raise()).
 */
static void update_own_cpus(struct session *s)
{
	ht_dumper_raise(&s->dumper);
	say_own_cpus(s, ht_own_cpus_update(&s->own_cpus));
	ht_dumper_lower(&s->dumper);
}

/* What ran instead while the breached thread waited in a run queue (ht_breach_culprit_interval()). */
static void fill_culprits(struct session *s, struct ht_breach_info *bi)
{
	const struct ht_breach *b = &bi->b;
	struct ht_sched_index idx;
	struct ht_fr_window w;
	uint64_t from;
	bool queued;

	if (!ht_breach_culprit_interval(b, &from, &queued))
		return;
	/* Where it was queued at FROM may come from a record a little before. */
	if (ht_recorder_read(&s->monitor.recorder,
			     from > HT_CULPRITS_LOOKBACK_NS ? from - HT_CULPRITS_LOOKBACK_NS : 0,
			     b->end_ns, &w))
		return;
	if (ht_sched_index_build(&w, &idx)) {
		ht_fr_window_free(&w);
		return;
	}
	ht_culprits_compute(&w, &idx, b->tid, from, b->end_ns, queued, b->wake_cpu, &bi->culprits);
	ht_sched_index_free(&idx);
	for (unsigned int i = 0; i < bi->culprits.count; i++)
		ht_comm_lookup(s->comms, bi->culprits.top[i].pid, bi->culprits.top[i].cpu,
			       bi->culprit_comm[i], sizeof(bi->culprit_comm[i]));
	bi->have_culprits = true;
	ht_fr_window_free(&w);
}

/*
 * Where a task's local_bh_enable runs softirqs on the irq stack: do_softirq()
 * (6.18 splits it into do_softirq.part.0), or __local_bh_enable_ip should it
 * inline it, so the monitor can tell a softirq run in a task's context from
 * one run on a hardirq's exit. None found (kallsyms hidden): no softirq names
 * a task (but on PREEMPT_RT, where every softirq runs in one).
 */
static void find_do_softirq(const struct ht_ksyms *ksyms, struct ht_monitor_config *cfg)
{
	static const char *const names[] = { "do_softirq", "__local_bh_enable_ip" };
	size_t n = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		n += ht_ksyms_function_ranges(ksyms, names[i], cfg->do_softirq_ranges + n,
					      HT_DO_SOFTIRQ_RANGES - n);
}

/*
 * One wait: counted once, and under each kind it breached with that kind's
 * interval, for the session and for its process (named PROCESS_COMM).
 */
static void note_breach(struct session *s, const struct ht_breach *b, const char *process_comm)
{
	uint32_t kinds = ht_breach_kinds_of(b->kinds, b->kind);
	struct ht_proc_entry *proc = ht_proc_stats_breach(&s->procs, (int)b->tgid, process_comm);

	s->reported++;
	s->by_kinds[kinds & ((1U << HT_BREACH_KIND_MAX) - 1)]++;
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		uint64_t dur = b->end_ns - b->start_ns;

		if (!(kinds & HT_KIND_BIT(k)))
			continue;
		if (k == HT_BREACH_OFF_CPU && b->kind != k && b->off_cpu_end_ns)
			dur = b->off_cpu_end_ns - b->off_cpu_start_ns;
		ht_kind_stats_note(&s->kinds[k], b, dur);
		ht_kind_stats_note(&proc->kinds[k], b, dur);
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
	if (bi->block_stack) {
		job.has_block_stack = true;
		job.block_stack = *bi->block_stack;
	}
	if (bi->waker_stack) {
		job.has_waker_stack = true;
		job.waker_stack = *bi->waker_stack;
	}
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

/*
 * A write to the output stream failed: its reader went away (EPIPE), or the
 * file cannot grow. Nothing more is written there and the session ends as
 * on SIGINT, with its summary on stderr. Under `run`, CMD gets SIGTERM, as
 * when hybtrace itself does: no one reads what it is watched for any more.
 */
static void check_out(struct session *s)
{
	int err = ht_out_stream_error(&s->out);

	if (s->out_gone || !err)
		return;
	s->out_gone = true;
	s->stop = true;
	clear_status_line(s);
	if (err == EPIPE)
		ht_error("the reader of %s went away: stopping", ht_out_stream_name(&s->out));
	else
		ht_error("cannot write %s: %s: stopping", ht_out_stream_name(&s->out),
			 strerror(err));
	if (s->child && !s->child_reaped)
		kill(s->child, SIGTERM);
}

/*
 * The user stack B's thread had as its wait began (--block-stacks), sent
 * before B, which names it; or NULL, and *MISSING says why. Symbolized now,
 * before the dump is offered: the dump needs its frames, and the
 * symbolizer keeps what it read, so this is quick.
 */
static const struct ht_block_frames *block_stack_of(struct session *s, const struct ht_breach *b,
						    const char **missing)
{
	struct ht_block_frames *fr = &s->block_frames;
	const char *module;
	bool taken = false;

	*missing = NULL;
	if (!s->blocks || (b->kind != HT_BREACH_OFF_CPU && b->kind != HT_BREACH_SYSCALL))
		return NULL;
	/* Sent on its own ring before B was: read it up to B. */
	if (b->block_stack_seq) {
		ht_monitor_consume_block_stacks(&s->monitor);
		taken = !ht_block_stacks_take(s->blocks, (int)b->tgid, b->tid, b->block_stack_seq,
					      fr);
	}
	*missing = ht_block_stack_missing(b, taken);
	if (!taken)
		return NULL;
	s->block_stacks_shown++;
	module = ht_block_stacks_hint(s->blocks, fr);
	if (module) {
		clear_status_line(s);
		ht_warn("stacks where threads blocked in %s are one frame deep: it has no frame "
			"pointers; try --callgraph dwarf",
			strrchr(module, '/') ? strrchr(module, '/') + 1 : module);
	}
	return fr;
}

/* The test mode's stall (test_loop_stall_ns()): once, in the turn, without CPU. */
static void test_loop_stall(struct session *s)
{
	if (!s->test_loop_stall_ns || s->test_loop_stalled)
		return;
	s->test_loop_stalled = true;
	ht_sleep_ns(s->test_loop_stall_ns);
}

static int on_breach(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	struct ht_breach_info bi = { 0 };
	bool own_cpus_due;

	if (size < sizeof(bi.b))
		return 0;
	memcpy(&bi.b, data, sizeof(bi.b));
	if (bi.b.kind == 0 || bi.b.kind >= HT_BREACH_KIND_MAX)
		return 0;
	if (s->child && bi.b.tid == (uint32_t)s->child && bi.b.start_ns < s->child_held_until_ns) {
		s->child_hold_breaches++;
		return 0;
	}
	/*
	 * Woken on the breach's CPU, maybe: the target's, where the dump builder
	 * may be too. This thread and the builder leave the breached thread's
	 * CPUs now, the builder raised first (a move waits for it to leave a
	 * kernel section) and until all is done: what comes first may wait on it
	 * as well (their mmap lock). The target's other threads are read after
	 * the freeze, which reading them would put off.
	 */
	own_cpus_due = ht_own_cpus_breach_due(&s->own_cpus, bi.b.cpu, (int)bi.b.tid,
					      monotonic_ns());
	if (own_cpus_due) {
		int early[2] = { 0, ht_dumper_builder_tid(&s->dumper) };
		int guard = ht_dumper_guard_tid(&s->dumper);

		/* The guard first: the raise wakes it, and it wakes where it is. */
		if (guard)
			ht_own_cpus_leave_breached(&s->own_cpus, &guard, 1);
		/* Lowered once update_own_cpus() below is done. */
		ht_dumper_raise(&s->dumper);
		test_loop_stall(s);
		ht_own_cpus_leave_breached(&s->own_cpus, early, s->dumper.started ? 2 : 1);
	}
	bi.threshold_ns = threshold_of(s->opt, bi.b.kind);
	/* Sent at the end for a thread still in its syscall, by tid alone: its name is ours to find. */
	if (!bi.b.comm[0]) {
		char comm[HT_COMM_BUF];

		ht_comm_lookup(s->comms, bi.b.tid, bi.b.cpu, comm, sizeof(comm));
		snprintf(bi.b.comm, sizeof(bi.b.comm), "%.*s", HT_COMM_LEN - 1, comm);
	}
	if (bi.b.tgid == bi.b.tid)
		snprintf(bi.process_comm, sizeof(bi.process_comm), "%.*s", HT_COMM_LEN, bi.b.comm);
	else
		ht_comm_lookup(s->comms, bi.b.tgid, bi.b.cpu, bi.process_comm,
			       sizeof(bi.process_comm));
	bi.since_start_s = (double)(int64_t)(bi.b.end_ns - s->start_ns) / 1e9;
	/* Before anything ranks or prints it: a wait on a latch is no wait for work. */
	ht_wait_sets_judge(&s->wait_sets, &bi.b, monotonic_ns());
	bi.block_stack = block_stack_of(s, &bi.b, &bi.block_stack_missing);
	if (bi.b.waker_stack_seq && s->wakers) {
		/* Sent just before the breach, on a ring of its own: delivered once this returns. */
		ht_monitor_consume_waker_stacks(&s->monitor);
		bi.waker_stack = ht_waker_stacks_find(s->wakers, bi.b.waker_stack_seq);
	}
	/* The dump first: its sources freeze at the window's end, whatever we do here. */
	offer_breach_dump(s, &bi);
	if (own_cpus_due) {
		update_own_cpus(s);
		ht_dumper_lower(&s->dumper);
	}
	note_breach(s, &bi.b, bi.process_comm);
	if (s->out_gone) {
		s->unwritten++;
		return 0;
	}
	fill_culprits(s, &bi);
	clear_status_line(s);
	/* One line whole: the dump builder writes its lines to the same stream. */
	flockfile(s->out.f);
	if (s->opt->json)
		ht_breach_print_json(s->out.f, &bi, s->ksyms);
	else
		ht_breach_print_text(s->out.f, &bi);
	funlockfile(s->out.f);
	check_out(s);
	/* The line that met the closed pipe was not written either. */
	s->unwritten += s->out_gone;
	return 0;
}

static uint64_t total_lost(const struct ht_monitor_counters *c)
{
	return c->value[HT_CNT_RB_DROPS] + c->value[HT_CNT_STORAGE_FAILS] +
	       c->value[HT_CNT_COMM_UPDATE_FAILS] + c->recursion_misses +
	       c->value[HT_CNT_UNSEEN_SWITCH_INS];
}

/* Breach records, one per wait, whatever kinds it breached. */
static uint64_t total_breaches(const struct session *s)
{
	return s->reported;
}

/* Breaches the kernel counted, but for the `run` child's wait for us to attach. */
static uint64_t detected(const struct session *s, const struct ht_monitor_counters *c)
{
	return c->value[HT_CNT_BREACHES] - s->child_hold_breaches;
}

/* Waits that breached exactly the kinds ONLY. */
static uint64_t waits_of(const struct session *s, uint32_t only)
{
	return s->by_kinds[only];
}

/* Whether one of KINDS (bits 1 << kind) has its threshold on. */
static bool any_threshold(const struct ht_options *o, uint32_t kinds)
{
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		if ((kinds & HT_KIND_BIT(k)) && threshold_of(o, k))
			return true;
	return false;
}

/* Whether one wait may breach kinds K and J > K both (their rows say so): a pair to count. */
static bool kinds_pair(unsigned int k, unsigned int j)
{
	return j > k && (ht_breach_kinds[k].breached_with & HT_KIND_BIT(j));
}

/* "waits: 12 breached: 7 off-cpu only, 3 syscall only, 2 both (off-cpu and syscall)" */
static void print_waits_text(struct session *s, FILE *f)
{
	const char *sep = ":";

	fprintf(f, "  waits: %llu breached", (unsigned long long)total_breaches(s));
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		if (!threshold_of(s->opt, k))
			continue;
		/* "only" where a wait could have breached another threshold too. */
		fprintf(f, "%s %llu %s%s", sep, (unsigned long long)waits_of(s, HT_KIND_BIT(k)),
			ht_breach_kinds[k].name,
			any_threshold(s->opt, ht_breach_kinds[k].breached_with) ? " only" : "");
		sep = ",";
	}
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		for (unsigned int j = 1; j < HT_BREACH_KIND_MAX; j++) {
			if (!kinds_pair(k, j) || !threshold_of(s->opt, k) ||
			    !threshold_of(s->opt, j))
				continue;
			fprintf(f, "%s %llu both (%s and %s)", sep,
				(unsigned long long)waits_of(s, HT_KIND_BIT(k) | HT_KIND_BIT(j)),
				ht_breach_kinds[k].name, ht_breach_kinds[j].name);
			sep = ",";
		}
	fputc('\n', f);
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

static void print_dump_stats_text(struct session *s, FILE *f)
{
	uint64_t lifts = ht_dumper_stalls_lifted(&s->dumper);
	struct ht_dump_stats d;
	char size[32];

	ht_dumper_stats(&s->dumper, &d);
	fprintf(f,
		"  dumps: %u kept (%sB) in %s, %u written, %u replaced by worse ones, %u failed; "
		"not dumped: %llu min-interval, %llu max-dumps, ",
		d.written - d.replaced, ht_format_count((double)d.bytes, size, sizeof(size)),
		s->opt->output_dir, d.written, d.replaced, d.failed,
		(unsigned long long)d.skipped[HT_DUMP_SKIP_INTERVAL],
		(unsigned long long)d.skipped[HT_DUMP_SKIP_COUNT]);
	if (s->opt->max_dumps_per_process)
		fprintf(f, "%llu max-dumps-per-process, ",
			(unsigned long long)d.skipped[HT_DUMP_SKIP_PROCESS]);
	fprintf(f, "%llu max-disk, %llu during another dump (policy %s)\n",
		(unsigned long long)d.skipped[HT_DUMP_SKIP_DISK],
		(unsigned long long)d.skipped[HT_DUMP_SKIP_BUSY],
		s->opt->dump_rule == HT_DUMP_RULE_FIRST ? "first" : "worst");
	/* The builder_guard.h figures: said where it happened. */
	if (lifts)
		fprintf(f, "  dump builder: raised %llu times while hybtrace's event loop waited on "
			   "it, %llu turns at SCHED_FIFO\n", (unsigned long long)lifts,
			(unsigned long long)ht_dumper_stall_rushes(&s->dumper));
}

static uint64_t recorder_records_per_cpu(const struct session *s)
{
	return 1ULL << s->monitor.recorder.slot_shift;
}

static void print_recorder_text(struct session *s, FILE *f, const struct ht_monitor_counters *c)
{
	char dur[32], rate[32];

	fprintf(f, "  events: %llu flight-recorder records (%llu per CPU in the ring",
		(unsigned long long)c->records_written,
		(unsigned long long)recorder_records_per_cpu(s));
	if (s->shortest_reach_ns)
		fprintf(f, ", which reached back %s at least: %s records/s on the busiest CPU",
			ht_format_duration(s->shortest_reach_ns, dur, sizeof(dur)),
			ht_format_count((double)s->busiest_rate, rate, sizeof(rate)));
	fputs(")\n", f);
}

/* Hits, and the specs that never armed: a module name that matched nothing says so here. */
static void print_triggers_text(struct session *s, FILE *f)
{
	size_t n = ht_code_triggers_count(&s->triggers);

	if (!n)
		return;
	fprintf(f, "  triggers: %llu hit%s", (unsigned long long)s->trigger_hits,
		s->trigger_hits == 1 ? "" : "s");
	if (s->trigger_in_flight)
		fprintf(f, ", %llu more after the first (one-shot: not reported)",
			(unsigned long long)s->trigger_in_flight);
	fprintf(f, ", %llu lost (ring full)", (unsigned long long)s->trigger_lost);
	if (s->trigger_left_out)
		fprintf(f, ", %llu thread%s left without breakpoints (RLIMIT_NOFILE)",
			(unsigned long long)s->trigger_left_out, s->trigger_left_out == 1 ? "" : "s");
	if (s->triggers.never_fire)
		fputs("; hardware breakpoints do not fire on this machine", f);
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const char *why = ht_code_trigger_unresolved(&s->triggers, i);

		if (why)
			fprintf(f, "  trigger %s never resolved%s%s\n",
				ht_code_trigger_text(&s->triggers, (int)i), *why ? ": " : "", why);
	}
}

static void print_triggers_json(struct session *s, struct ht_json *j)
{
	size_t n = ht_code_triggers_count(&s->triggers);

	ht_json_object(j, "triggers");
	ht_json_u64(j, "hits", s->trigger_hits);
	ht_json_u64(j, "in_flight", s->trigger_in_flight);
	ht_json_u64(j, "lost", s->trigger_lost);
	ht_json_u64(j, "left_out", s->trigger_left_out);
	ht_json_bool(j, "breakpoints_fire", !s->triggers.never_fire);
	ht_json_array(j, "never_resolved");
	for (size_t i = 0; i < n; i++) {
		const char *why = ht_code_trigger_unresolved(&s->triggers, i);

		if (!why)
			continue;
		ht_json_object(j, NULL);
		ht_json_str(j, "trigger", ht_code_trigger_text(&s->triggers, (int)i));
		ht_json_str(j, "why", why);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_close(j);
}

/* --off-cpu-states, --off-cpu-syscalls or --ignore-syscalls: breaches the kernel leaves out. */
static bool filters_on(const struct ht_options *o)
{
	return o->filters.off_cpu_states || o->filters.off_cpu_syscalls_on ||
	       o->filters.ignore_syscalls_on;
}

static const char *comm_of_pid(void *ctx, int pid)
{
	struct session *s = ctx;
	static char buf[HT_COMM_BUF];

	if (pid == s->tgid && s->target_comm[0])
		return s->target_comm;
	return ht_comm_lookup(s->comms, (uint32_t)pid, 0, buf, sizeof(buf));
}

/* "pid 12 (server)", "pids 12 (a), 14 (b) and their children", "cgroup /x", "all tasks" */
static const char *targets_text(struct session *s, char *buf, size_t len)
{
	ht_targets_describe(&s->monitor.targets, buf, len, comm_of_pid, s);
	return buf;
}

/* Processes that joined the set after the start (forks, cgroup moves), and left it. */
static void print_target_processes_text(struct session *s, FILE *f)
{
	const struct ht_targets *t = &s->monitor.targets;

	if (s->spec.all || (!s->spec.children && !s->spec.cgroup_on && s->spec.ntgids < 2))
		return;
	fprintf(f, "  processes: %llu watched in all, %llu still running, %llu changes lost\n",
		(unsigned long long)t->joined, (unsigned long long)t->count,
		(unsigned long long)ht_monitor_target_event_drops(&s->monitor));
}

static void print_summary_text(struct session *s, FILE *f, const struct ht_monitor_counters *c)
{
	char what[512];

	fprintf(f, "\nhybtrace: watched %s for %.1fs\n", targets_text(s, what, sizeof(what)),
		(double)(monotonic_ns() - s->start_ns) / 1e9);
	print_target_processes_text(s, f);
	for (int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		const struct ht_kind_stats *ks = &s->kinds[k];

		if (!threshold_of(s->opt, (unsigned int)k))
			continue;
		fprintf(f, "  %-9s %llu breaches", ht_breach_kind_name((unsigned int)k),
			(unsigned long long)ks->count);
		if (ks->worst.count) {
			fputs(", ", f);
			ht_print_largest(f, &ks->worst);
		}
		if (ks->idle.count) {
			fprintf(f, "; %llu of them waiting for work, ",
				(unsigned long long)ks->idle.count);
			ht_print_largest(f, &ks->idle);
		}
		fputc('\n', f);
	}
	print_waits_text(s, f);
	/* The ring was drained after the programs stopped counting: this adds up. */
	fprintf(f,
		"  breaches: %llu detected in the kernel = %llu reported + %llu lost (breach "
		"ring buffer full)",
		(unsigned long long)detected(s, c),
		(unsigned long long)total_breaches(s),
		(unsigned long long)c->value[HT_CNT_RB_DROPS]);
	if (filters_on(s->opt))
		fprintf(f, "; %llu more left out by the filters",
			(unsigned long long)c->value[HT_CNT_FILTERED]);
	if (s->unwritten)
		fprintf(f, "; %llu of the reported came after %s went away, unwritten",
			(unsigned long long)s->unwritten, ht_out_stream_name(&s->out));
	fputc('\n', f);
	print_recorder_text(s, f, c);
	print_dump_stats_text(s, f);
	print_triggers_text(s, f);
	fprintf(f,
		"  lost: %llu (breach ring buffer %llu, task storage %llu, comm map %llu, "
		"recursion %llu, unseen switch-ins %llu)\n",
		(unsigned long long)total_lost(c), (unsigned long long)c->value[HT_CNT_RB_DROPS],
		(unsigned long long)c->value[HT_CNT_STORAGE_FAILS],
		(unsigned long long)c->value[HT_CNT_COMM_UPDATE_FAILS],
		(unsigned long long)c->recursion_misses,
		(unsigned long long)c->value[HT_CNT_UNSEEN_SWITCH_INS]);
	if (s->wakers && c->value[HT_CNT_WAKER_STACKS])
		fprintf(f,
			"  waker stacks: %llu taken at wakeups that ended a wait over its "
			"threshold, %llu lost (ring full)\n",
			(unsigned long long)c->value[HT_CNT_WAKER_STACKS],
			(unsigned long long)c->value[HT_CNT_WAKER_STACK_DROPS]);
	if (s->source_threads_left_out)
		fprintf(f, "  on-CPU source: %llu threads left out (descriptor limit)\n",
			(unsigned long long)s->source_threads_left_out);
	if (s->blocks)
		fprintf(f,
			"  block stacks: %llu taken at voluntary switch-outs, %llu shown with "
			"their breaches, %llu not kept or sent (task storage, ring full), %llu "
			"sent for breaches not read, %llu named by a breach and not received\n",
			(unsigned long long)c->value[HT_CNT_BLOCK_STACKS_TAKEN],
			(unsigned long long)s->block_stacks_shown,
			(unsigned long long)ht_monitor_block_stack_drops(&s->monitor),
			(unsigned long long)s->blocks->replaced,
			(unsigned long long)s->blocks->missing);
}

static void print_dump_stats_json(struct session *s, struct ht_json *j)
{
	struct ht_dump_stats d;

	ht_dumper_stats(&s->dumper, &d);
	ht_json_object(j, "dumps");
	ht_json_str(j, "policy", s->opt->dump_rule == HT_DUMP_RULE_FIRST ? "first" : "worst");
	ht_json_u64(j, "kept", d.written - d.replaced);
	ht_json_u64(j, "bytes", d.bytes);
	ht_json_u64(j, "written", d.written);
	ht_json_u64(j, "replaced", d.replaced);
	ht_json_u64(j, "failed", d.failed);
	ht_json_u64(j, "builder_lifts", ht_dumper_stalls_lifted(&s->dumper));
	ht_json_u64(j, "builder_rushes", ht_dumper_stall_rushes(&s->dumper));
	ht_json_object(j, "skipped");
	ht_json_u64(j, "min_interval", d.skipped[HT_DUMP_SKIP_INTERVAL]);
	ht_json_u64(j, "max_dumps", d.skipped[HT_DUMP_SKIP_COUNT]);
	ht_json_u64(j, "max_disk", d.skipped[HT_DUMP_SKIP_DISK]);
	ht_json_u64(j, "busy", d.skipped[HT_DUMP_SKIP_BUSY]);
	ht_json_u64(j, "max_dumps_per_process", d.skipped[HT_DUMP_SKIP_PROCESS]);
	ht_json_close(j);
	ht_json_close(j);
}

/* "targets": {"pids": [...], "children": true, "cgroup": "/x" | null, "all": false} */
static void print_targets_json(struct session *s, struct ht_json *j)
{
	ht_json_object(j, "targets");
	ht_json_array(j, "pids");
	for (unsigned int i = 0; i < s->spec.ntgids; i++)
		ht_json_i64(j, NULL, s->spec.tgids[i]);
	ht_json_close(j);
	ht_json_bool(j, "children", s->spec.children);
	if (s->spec.cgroup_on)
		ht_json_str(j, "cgroup", s->spec.cgroup_path);
	else
		ht_json_null(j, "cgroup");
	ht_json_bool(j, "all", s->spec.all);
	ht_json_close(j);
}

/* The summary line up to its histograms, which print_summary adds. */
static void print_summary_json(struct session *s, struct ht_json *j,
			       const struct ht_monitor_counters *c)
{
	char key[64];

	ht_json_str(j, "type", "summary");
	ht_json_i64(j, "pid", s->tgid);
	ht_json_str(j, "comm", s->target_comm);
	print_targets_json(s, j);
	ht_json_object(j, "target_processes");
	ht_json_u64(j, "watched", s->monitor.targets.joined);
	ht_json_u64(j, "running", s->monitor.targets.count);
	ht_json_u64(j, "changes_lost", ht_monitor_target_event_drops(&s->monitor));
	ht_json_close(j);
	ht_json_fixed(j, "seconds", (double)(monotonic_ns() - s->start_ns) / 1e9, 3);
	ht_json_object(j, "breaches");
	for (int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		ht_json_object(j, ht_breach_kind_name((unsigned int)k));
		ht_json_u64(j, "count", s->kinds[k].count);
		ht_json_u64(j, "max_ns", s->kinds[k].worst.max_ns);
		ht_json_object(j, "wait_for_work");
		ht_json_u64(j, "count", s->kinds[k].idle.count);
		ht_json_u64(j, "max_ns", s->kinds[k].idle.max_ns);
		ht_json_close(j);
		ht_json_close(j);
	}
	ht_json_close(j);
	ht_json_object(j, "waits");
	ht_json_u64(j, "breached", total_breaches(s));
	/* "rq_delay", "off_cpu_only" (of a kind that may share a wait), "off_cpu_and_syscall". */
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		snprintf(key, sizeof(key), "%s%s", ht_breach_kinds[k].json_key,
			 ht_breach_kinds[k].breached_with ? "_only" : "");
		ht_json_u64(j, key, waits_of(s, HT_KIND_BIT(k)));
	}
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		for (unsigned int i = 1; i < HT_BREACH_KIND_MAX; i++)
			if (kinds_pair(k, i)) {
				snprintf(key, sizeof(key), "%s_and_%s", ht_breach_kinds[k].json_key,
					 ht_breach_kinds[i].json_key);
				ht_json_u64(j, key, waits_of(s, HT_KIND_BIT(k) | HT_KIND_BIT(i)));
			}
	ht_json_close(j);
	ht_json_u64(j, "detected", detected(s, c));
	ht_json_u64(j, "reported", total_breaches(s));
	ht_json_u64(j, "filtered", c->value[HT_CNT_FILTERED]);
	ht_json_u64(j, "records", c->records_written);
	ht_json_object(j, "recorder");
	ht_json_u64(j, "records_per_cpu", recorder_records_per_cpu(s));
	ht_json_u64(j, "shortest_reach_ns", s->shortest_reach_ns);
	ht_json_close(j);
	ht_json_object(j, "lost");
	ht_json_u64(j, "total", total_lost(c));
	ht_json_u64(j, "ring_buffer", c->value[HT_CNT_RB_DROPS]);
	ht_json_u64(j, "task_storage", c->value[HT_CNT_STORAGE_FAILS]);
	ht_json_u64(j, "comm_map", c->value[HT_CNT_COMM_UPDATE_FAILS]);
	ht_json_u64(j, "recursion", c->recursion_misses);
	ht_json_u64(j, "unseen_switch_in", c->value[HT_CNT_UNSEEN_SWITCH_INS]);
	/* Not in the total: threads, not records. */
	ht_json_u64(j, "source_threads_left_out", s->source_threads_left_out);
	ht_json_close(j);
	/* Which path judged the intervals: the tests check that a fallback they force ran. */
	ht_json_object(j, "judged");
	ht_json_u64(j, "rq_sched_info", c->value[HT_CNT_RQ_SCHED_INFO]);
	ht_json_u64(j, "rq_thread_state", c->value[HT_CNT_RQ_THREAD_STATE]);
	ht_json_u64(j, "thread_slot", c->value[HT_CNT_STATE_SLOT]);
	ht_json_u64(j, "task_storage", c->value[HT_CNT_STATE_STORAGE]);
	ht_json_u64(j, "untraced_switch_in", c->value[HT_CNT_UNTRACED_SWITCH_INS]);
	ht_json_u64(j, "untraced_wakeup", c->value[HT_CNT_UNTRACED_WAKEUPS]);
	ht_json_close(j);
	/* Stacks taken: what make bench divides the sched_switch program's added time by. */
	if (s->blocks) {
		ht_json_object(j, "block_stacks");
		ht_json_u64(j, "taken", c->value[HT_CNT_BLOCK_STACKS_TAKEN]);
		ht_json_u64(j, "shown", s->block_stacks_shown);
		ht_json_u64(j, "lost", ht_monitor_block_stack_drops(&s->monitor));
		ht_json_u64(j, "unclaimed", s->blocks->replaced);
		ht_json_u64(j, "not_received", s->blocks->missing);
		ht_json_close(j);
	}
	/* Waker stacks: what make bench divides the sched_waking program's added time by. */
	if (s->wakers) {
		ht_json_object(j, "waker_stacks");
		ht_json_u64(j, "taken", c->value[HT_CNT_WAKER_STACKS]);
		ht_json_u64(j, "lost", c->value[HT_CNT_WAKER_STACK_DROPS]);
		ht_json_close(j);
	}
	print_dump_stats_json(s, j);
	print_triggers_json(s, j);
}

static void on_process_gone(void *ctx, uint32_t tgid, const struct ht_proc_hist_counts *counts)
{
	struct session *s = ctx;

	ht_proc_stats_gone(&s->procs, (int)tgid, counts);
}

/*
 * The histograms of processes that exited, taken from their slots (which
 * new processes need) into the summary's counts; their breaches read first,
 * so that a late one is not taken for a new process of the same pid.
 */
static void take_gone_processes(struct session *s)
{
	if (!s->monitor.proc_hists)
		return;
	ht_monitor_consume(&s->monitor);
	ht_proc_hists_take_gone(s->monitor.proc_hists, s->monitor.proc_hist_slots,
				on_process_gone, s);
}

/* The summary's part by process, as text or as members of J. */
static void print_procs(struct session *s, FILE *f, struct ht_json *j)
{
	const struct ht_monitor *m = &s->monitor;
	struct ht_proc_hist_counts outside;
	struct ht_proc_entry *rows, rest;
	long n;

	if (!m->proc_hists)
		return;
	n = ht_proc_stats_rows(&s->procs, m->proc_hists, m->proc_hist_slots, comm_of_pid, s, &rows,
			       &rest);
	if (n < 0) {
		ht_warn("no summary by process: out of memory");
		return;
	}
	ht_proc_hist_read(&m->proc_hists[m->proc_hist_slots], &outside);
	ht_proc_stats_print(f, j, s->opt->threshold_ns, rows, n, &rest, s->procs.rest_processes,
			    &outside, m->proc_hist_slots);
	free(rows);
}

/*
 * On the output stream; on stderr, as text for whoever watches there, once
 * its reader went away.
 */
static void print_summary(struct session *s)
{
	FILE *f = s->out_gone ? stderr : s->out.f;
	bool json = s->opt->json && !s->out_gone;
	struct ht_monitor_counters c;
	uint64_t slots[HT_HIST_SLOTS];
	char title[640], what[512];
	struct ht_json j;

	clear_status_line(s);
	/* `run` read the name before exec; what it is called now is what counts. */
	if (s->tgid)
		ht_comm_lookup(s->comms, (uint32_t)s->tgid, 0, s->target_comm,
			       sizeof(s->target_comm));
	if (ht_monitor_read_counters(&s->monitor, &c)) {
		ht_warn("%s", ht_last_error());
		return;
	}
	/* What the processes that exited counted: the rest is read from their slots. */
	take_gone_processes(s);
	if (json) {
		/* One line whole: the dump builder writes its lines to the same stream. */
		flockfile(f);
		ht_json_begin(&j, f);
		print_summary_json(s, &j, &c);
	} else {
		print_summary_text(s, f, &c);
	}
	if (json)
		ht_json_object(&j, "histograms");
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++) {
		if (!ht_summary_measures(s->opt->threshold_ns, k))
			continue;
		if (ht_monitor_read_hist(&s->monitor, k, slots))
			continue;
		if (json) {
			ht_hist_print_json(&j, ht_breach_kind_name(k), slots, HT_HIST_SLOTS);
		} else {
			snprintf(title, sizeof(title),
				 "%s of %s, log2 buckets:", ht_breach_kinds[k].title,
				 targets_text(s, what, sizeof(what)));
			ht_hist_print(f, title, slots, HT_HIST_SLOTS);
		}
	}
	if (json) {
		ht_json_close(&j);
		print_procs(s, f, &j);
		ht_json_end_line(&j);
		funlockfile(f);
	} else {
		print_procs(s, f, NULL);
	}
	fflush(f);
	/* The reader may go away during the summary too: say so, and how it ends. */
	check_out(s);
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

/* Every process's trigger rings, those polled already left as they are. */
static int add_trigger_fds(struct session *s)
{
	size_t cap = 256, n;
	int *fds;

	for (;;) {
		fds = malloc(cap * sizeof(*fds));
		if (!fds)
			return ht_fail("out of memory");
		n = ht_code_triggers_fds(&s->triggers, fds, cap);
		if (n < cap)
			break;
		free(fds);
		cap *= 2;
	}
	s->triggers.fds_changed = false;
	for (size_t i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EV_TRIGGER };

		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fds[i], &ev) && errno != EEXIST) {
			free(fds);
			return ht_fail("epoll: %s", strerror(errno));
		}
	}
	free(fds);
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
	    (s->pidfd >= 0 && add_fd(s, s->pidfd, EV_TARGET_EXIT)) ||
	    add_fd(s, s->durationfd, EV_DURATION) ||
	    add_fd(s, s->dumpfd, EV_DUMP) || add_fd(s, ht_dumper_fd(&s->dumper), EV_DUMP))
		return -1;
	return add_trigger_fds(s);
}

static void print_trigger_hit(struct session *s, const struct ht_dump_job *job,
			      const struct ht_bp_hit *hit)
{
	FILE *f = s->out.f;

	if (s->out_gone)
		return;
	clear_status_line(s);
	/* One line whole: the dump builder writes its lines to the same stream. */
	flockfile(f);
	if (s->opt->json) {
		struct ht_json j;

		ht_json_begin(&j, f);
		ht_json_str(&j, "type", "trigger");
		ht_json_fixed(&j, "time_s", (double)(int64_t)(hit->time_ns - s->start_ns) / 1e9, 6);
		ht_json_str(&j, "trigger", job->trigger);
		ht_json_str(&j, "function", job->function);
		ht_json_u64(&j, "pid", hit->pid);
		ht_json_u64(&j, "tid", hit->tid);
		ht_json_u64(&j, "cpu", hit->cpu);
		ht_json_u64(&j, "ip", hit->ip);
		ht_json_array(&j, "args");
		for (int i = 0; i < 3; i++)
			ht_json_u64(&j, NULL, hit->arg[i]);
		ht_json_close(&j);
		ht_json_u64(&j, "time_ns", hit->time_ns);
		ht_json_end_line(&j);
	} else {
		fprintf(f,
			"%.6f trigger %s hit in pid %u tid %u cpu %u at %s: rdi=%#llx rsi=%#llx "
			"rdx=%#llx\n",
			(double)(int64_t)(hit->time_ns - s->start_ns) / 1e9, job->trigger, hit->pid,
			hit->tid, hit->cpu, job->function, (unsigned long long)hit->arg[0],
			(unsigned long long)hit->arg[1], (unsigned long long)hit->arg[2]);
	}
	funlockfile(f);
}

/* A code trigger's hit: a dump of kind "trigger" around it. */
static void offer_trigger_dump(struct session *s, const struct ht_bp_hit *hit)
{
	struct ht_dump_job job;

	memset(&job, 0, sizeof(job));
	snprintf(job.kind, sizeof(job.kind), "trigger");
	job.start_ns = hit->time_ns;
	job.end_ns = hit->time_ns;
	job.has_hit = true;
	job.hit = *hit;
	snprintf(job.trigger, sizeof(job.trigger), "%s",
		 ht_code_trigger_text(&s->triggers, hit->trigger));
	/*
	 * A process forked since the target set was last read (it called at
	 * once): its fork is on the monitor's ring still; read it, so that the
	 * hit is named with its parent's image.
	 */
	if (!ht_targets_find(&s->monitor.targets, (int)hit->pid))
		ht_monitor_consume(&s->monitor);
	ht_code_trigger_function(&s->triggers, hit, job.function, sizeof(job.function));
	print_trigger_hit(s, &job, hit);
	check_out(s);
	s->trigger_hits++;
	ht_dumper_offer(&s->dumper, &job);
}

static void report_trigger_hits(struct session *s, struct ht_bp_hits *hits)
{
	for (size_t i = 0; i < hits->count; i++)
		offer_trigger_dump(s, &hits->v[i]);
	s->trigger_in_flight += hits->in_flight;
	s->trigger_lost += hits->lost;
	if (hits->lost) {
		clear_status_line(s);
		ht_warn("triggers: %llu hits lost: the kernel found their ring full",
			(unsigned long long)hits->lost);
	}
	ht_bp_hits_free(hits);
}

static void handle_trigger_hits(struct session *s)
{
	struct ht_bp_hits hits;

	__atomic_store_n(&s->trigger_left_out, ht_code_triggers_left_out(&s->triggers),
			 __ATOMIC_RELAXED);
	if (s->triggers.fds_changed && add_trigger_fds(s))
		ht_warn("triggers: %s", ht_last_error());

	if (ht_code_triggers_drain(&s->triggers, &hits)) {
		ht_warn("triggers: %s", ht_last_error());
		return;
	}
	report_trigger_hits(s, &hits);
}

/*
 * The end: the breakpoints stop and what the rings still hold is reported,
 * hits of a target that has exited included, before the summary counts them.
 */
static void finish_triggers(struct session *s)
{
	struct ht_bp_hits hits;

	if (ht_code_triggers_finish(&s->triggers, &hits)) {
		ht_warn("triggers: %s", ht_last_error());
		return;
	}
	report_trigger_hits(s, &hits);
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
			"%llu, comm map %llu, recursion %llu, unseen switch-ins %llu in all)\n",
		(unsigned long long)(lost - s->lost_reported),
		(unsigned long long)c.value[HT_CNT_RB_DROPS],
		(unsigned long long)c.value[HT_CNT_STORAGE_FAILS],
		(unsigned long long)c.value[HT_CNT_COMM_UPDATE_FAILS],
		(unsigned long long)c.recursion_misses,
		(unsigned long long)c.value[HT_CNT_UNSEEN_SWITCH_INS]);
	if (s->opt->json && !s->out_gone) {
		struct ht_json j;

		flockfile(s->out.f);
		ht_json_begin(&j, s->out.f);
		ht_json_str(&j, "type", "lost");
		ht_json_u64(&j, "total", lost);
		ht_json_u64(&j, "ring_buffer", c.value[HT_CNT_RB_DROPS]);
		ht_json_end_line(&j);
		funlockfile(s->out.f);
	}
	s->lost_reported = lost;
}

/* A size as --history takes it: "64k", "16M", "1G". */
static const char *format_size(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= (1ULL << 30) && !(bytes & ((1ULL << 30) - 1)))
		snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
	else if (bytes >= (1ULL << 20))
		snprintf(buf, len, "%lluM", (unsigned long long)((bytes + (1ULL << 20) - 1) >> 20));
	else
		snprintf(buf, len, "%lluk", (unsigned long long)((bytes + 1023) >> 10));
	return buf;
}

/* The --history that holds --pre at RATE records/s: a power of two, as the ring is. */
static uint64_t history_for(uint64_t pre_ns, uint64_t rate)
{
	double need = (double)pre_ns / 1e9 * (double)rate * sizeof(struct ht_flight_record);
	uint64_t bytes = HT_MIN_HISTORY_BYTES;

	while (bytes < HT_MAX_HISTORY_BYTES * 2 && (double)bytes < need)
		bytes <<= 1;
	return bytes;
}

/*
 * How far back the flight recorder reaches: its records per CPU over the
 * busiest CPU's rate in the last second or so. A --pre beyond that is said
 * once: those dumps are clipped to what the ring still holds (and say so).
 */
static void check_recorder_reach(struct session *s, uint64_t now)
{
	uint64_t window = now - s->reach_since_ns, busiest = 0, reach, need;
	unsigned int busiest_cpu = 0;
	char pre[32], held[32], rate[32], size[32], hint[96];

	if (!s->reach_heads || window < REACH_WINDOW_NS)
		return;
	for (unsigned int cpu = 0; cpu < s->monitor.ncpus; cpu++) {
		uint64_t head = ht_recorder_written(&s->monitor.recorder, cpu);
		uint64_t r = (head - s->reach_heads[cpu]) * 1000000000ULL / window;

		if (r > busiest) {
			busiest = r;
			busiest_cpu = cpu;
		}
		s->reach_heads[cpu] = head;
	}
	s->reach_since_ns = now;
	if (!busiest)
		return;
	reach = recorder_records_per_cpu(s) * 1000000000ULL / busiest;
	if (!s->shortest_reach_ns || reach < s->shortest_reach_ns) {
		s->shortest_reach_ns = reach;
		s->busiest_rate = busiest;
	}
	if (s->pre_warned || s->opt->pre_ns <= reach)
		return;
	s->pre_warned = true;
	need = history_for(s->opt->pre_ns, busiest);
	if (need <= HT_MAX_HISTORY_BYTES)
		snprintf(hint, sizeof(hint), "--history %s would hold it",
			 format_size(need, size, sizeof(size)));
	else
		snprintf(hint, sizeof(hint), "not even --history 1G holds it at that rate");
	clear_status_line(s);
	ht_warn("--pre %s reaches back further than the flight recorder: its %llu records per "
		"CPU hold about %s at the %s records/s of CPU %u, and dumps are clipped to that "
		"(%s)",
		ht_format_duration(s->opt->pre_ns, pre, sizeof(pre)),
		(unsigned long long)recorder_records_per_cpu(s),
		ht_format_duration(reach, held, sizeof(held)),
		ht_format_count((double)busiest, rate, sizeof(rate)), busiest_cpu, hint);
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

	ht_code_triggers_sync(&s->triggers);
	ht_code_triggers_reap(&s->triggers);
	/* Block stacks' processes read their maps again at their next stack. */
	if (s->blocks)
		ht_block_stacks_stale(s->blocks);
	if (s->triggers.fds_changed)
		handle_trigger_hits(s);
	for (unsigned int i = 0; i < s->nsources; i++)
		if (s->sources[i].ops->reap)
			s->sources[i].ops->reap(s->sources[i].state);
	/* A name goes once no dump still to be written can show its task. */
	forget_before = now - COMM_KEEP_NS;
	if (s->dumper.started) {
		uint64_t oldest = ht_dumper_oldest_window(&s->dumper);

		if (oldest < forget_before)
			forget_before = oldest;
	}
	ht_monitor_forget_exited(&s->monitor, forget_before);
	take_gone_processes(s);
	if (ht_own_cpus_refresh_due(&s->own_cpus, now))
		update_own_cpus(s);
	report_new_losses(s);
	check_recorder_reach(s, now);
	/* The dump builder writes to the stream too: its failures are seen here. */
	check_out(s);
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

/*
 * The end: the programs stop counting breaches, then the ring is read until
 * each breach they counted was read here or counted dropped, so that the
 * summary's detected = reported + lost holds, as it says.
 */
static void drain_breaches(struct session *s)
{
	struct timespec pause = { 0, 1000000 };
	struct ht_monitor_counters c;

	ht_monitor_stop_breaches(&s->monitor);
	for (int i = 0;; i++) {
		ht_monitor_consume(&s->monitor);
		if (ht_monitor_read_counters(&s->monitor, &c))
			return;
		if (total_breaches(s) + c.value[HT_CNT_RB_DROPS] >= detected(s, &c))
			return;
		if (i == DRAIN_TRIES) {
			ht_warn("%llu breaches counted in the kernel never reached the ring buffer",
				(unsigned long long)(detected(s, &c) - total_breaches(s) -
						     c.value[HT_CNT_RB_DROPS]));
			return;
		}
		nanosleep(&pause, NULL);
	}
}

/*
 * The set's changes came in with the breaches: the session ends when the
 * last target process is gone (--pid) or the cgroup is removed (--cgroup).
 */
static void check_targets(struct session *s)
{
	struct ht_targets *t = &s->monitor.targets;

	/* Changes the kernel could not send: the bitmap says who is still there. */
	ht_targets_resync(t, ht_monitor_target_event_drops(&s->monitor));
	if (ht_targets_done(t, s->child != 0))
		s->stop = true;
	/* The triggers follow the set: arm what joined or exec'd, close what left. */
	ht_code_triggers_sync(&s->triggers);
	if (s->triggers.fds_changed)
		handle_trigger_hits(s);
}

/*
 * Read the breach ring (and the target set's changes beside it) to its end,
 * and tell the dumper: an interval's choice waits for this (plus
 * BREACH_READ_LAG_NS), so that a breach that ended just before the
 * interval's end, still in the ring as its timer fires, competes in it.
 */
static void read_breaches(struct session *s)
{
	uint64_t t0 = monotonic_ns();

	ht_monitor_consume(&s->monitor);
	ht_dumper_read(&s->dumper, t0);
	check_targets(s);
}

static int run_loop(struct session *s)
{
	struct epoll_event events[8];

	/*
	 * Hits written before the rings were added to epoll are not reported
	 * readable: a perf event's poll hands out its readiness once, and the
	 * add and the first wait each poll. Read them now; later ones wake us.
	 */
	handle_trigger_hits(s);
	while (!s->stop) {
		int n;

		arm_dump_timer(s);
		/* Waiting here is no stall: the dump builder's guard looks at the rest. */
		ht_loop_beat_waits(&s->dumper.beat);
		n = epoll_wait(s->epfd, events, 8, -1);
		ht_loop_beat_woke(&s->dumper.beat);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return ht_fail("epoll_wait: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++) {
			switch (events[i].data.u64) {
			case EV_BREACH:
				read_breaches(s);
				break;
			case EV_SIGNAL:
				handle_signal(s);
				break;
			case EV_STATUS:
				drain_timer(s->statusfd);
				housekeeping(s);
				check_targets(s);
				break;
			case EV_DUMP:
				drain_timer(s->dumpfd);
				read_breaches(s);
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
	drain_breaches(s);
	finish_triggers(s);
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
	ht_marks_procs_free(&s->marks_procs);
	ht_code_triggers_close(&s->triggers);
	ht_sources_close(s->sources, s->nsources);
	s->nsources = 0;
	ht_monitor_close(&s->monitor);
	ht_proc_stats_free(&s->procs);
	if (s->blocks)
		ht_block_stacks_free(s->blocks);
	free(s->blocks);
	free(s->wakers);
	ht_ksyms_free(s->ksyms);
	free(s->comms);
	free(s->reach_heads);
	for (int *fd = &s->epfd; fd <= &s->dumpfd; fd++)
		if (*fd >= 0)
			close(*fd);
	/* A session that never began leaves no JSON file behind. */
	ht_out_stream_close(&s->out, !s->announced);
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

/* The on-CPU source --source chose, for every thread of the target. */
static int start_on_cpu_source(struct session *s)
{
	const struct ht_options *o = s->opt;
	/* check_sources made sure the flight recorder leaves this much. */
	uint64_t budget = o->max_memory_bytes -
			  o->history_bytes * (uint64_t)libbpf_num_possible_cpus();

	if (ht_sources_open(o, &s->spec, ht_monitor_targets_fd(&s->monitor), budget, s->sources,
			    &s->nsources))
		return -1;
	for (unsigned int i = 0; i < s->nsources; i++)
		if (s->sources[i].ops->threads_left_out)
			s->source_threads_left_out +=
				s->sources[i].ops->threads_left_out(s->sources[i].state);
	return 0;
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

/*
 * HYBTRACE_TEST_LOOP_STALL_MS (up to 10000): the event loop sleeps that long
 * once, at the first breach that tells it the target's CPU, the builder
 * raised: a stall of the event loop while it watches the builder, which the
 * guard is to see (builder_guard.h).
 */
static uint64_t test_loop_stall_ns(void)
{
	const char *v = getenv("HYBTRACE_TEST_LOOP_STALL_MS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n <= 10000 ? n * 1000000ULL : 0;
}

/*
 * HYBTRACE_TEST_BUILDER_LATE_MS: for up to 10000 ms after its start the dump
 * builder neither builds nor re-reads the targets' maps when idle (a short
 * program has exited by then), else 0.
 */
static uint64_t test_builder_late_ns(void)
{
	const char *v = getenv("HYBTRACE_TEST_BUILDER_LATE_MS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n <= 10000 ? n * 1000000ULL : 0;
}

/*
 * HYBTRACE_TEST_BUILDER_BUSY_CPU: the dump builder starts on that CPU (one
 * the target keeps busy) and re-reads the maps every 2 ms while idle.
 */
static void test_builder_busy(struct ht_dumper_config *cfg)
{
	const char *v = getenv("HYBTRACE_TEST_BUILDER_BUSY_CPU");
	char *end;
	unsigned long cpu;

	if (!v || !*v)
		return;
	cpu = strtoul(v, &end, 10);
	if (*end || cpu >= CPU_SETSIZE)
		return;
	cfg->test_builder_busy = true;
	cfg->test_builder_busy_cpu = (unsigned int)cpu;
}

/* A target process runs a new program: the ring's callback, on the event loop. */
static void on_target_exec(void *ctx, int tgid)
{
	struct session *s = ctx;

	ht_marks_procs_stale(&s->marks_procs, tgid);
	ht_dumper_exec(&s->dumper, tgid);
	ht_code_triggers_exec(&s->triggers, tgid);
}

/* A target process left the set (the ring's callback): its mark registries are forgotten. */
static void on_target_left(void *ctx, int tgid)
{
	struct session *s = ctx;

	ht_marks_procs_forget(&s->marks_procs, tgid);
}

static int start_dumper(struct session *s)
{
	ht_tsc_pair_take(&s->marks.attach_pair);
	s->marks.procs = &s->marks_procs;
	s->marks.comms = s->comms;
	const struct ht_options *o = s->opt;
	struct ht_dumper_config cfg = {
		.output_dir = o->output_dir,
		.pre_ns = o->pre_ns,
		.post_ns = o->post_ns,
		.policy = { o->min_interval_ns, o->max_dumps, o->max_disk_bytes, o->dump_rule,
			    o->max_dumps_per_process, BREACH_READ_LAG_NS },
		.tgid = s->tgid,
		.target_comm = s->target_comm,
		.cmdline = o->cmdline,
		.json = o->json,
		.json_out = s->out.f,
		.monitor = &s->monitor,
		.ksyms = s->ksyms,
		.sources = s->sources,
		.nsources = s->nsources,
		.marks = &s->marks,
		.trigger_threads_left_out = o->ntriggers ? &s->trigger_left_out : NULL,
		.chain_depth = o->chain_depth,
		.test_builder_late_ns = test_builder_late_ns(),
	};

	test_builder_busy(&cfg);
	s->test_loop_stall_ns = test_loop_stall_ns();
	return ht_dumper_start(&s->dumper, &cfg);
}

/* HYBTRACE_TEST_THREAD_SLOTS: a power of two from 1 to 32768, else 0 (sized to pid_max). */
static unsigned int test_thread_slots(void)
{
	const char *v = getenv("HYBTRACE_TEST_THREAD_SLOTS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n && n <= HT_THREAD_SLOTS_MAX && !(n & (n - 1)) ? (unsigned int)n : 0;
}

/* HYBTRACE_TEST_PROC_HIST_SLOTS: a power of two from 1 to 4096, else 0 (HT_PROC_HIST_SLOTS). */
static unsigned int test_proc_hist_slots(void)
{
	const char *v = getenv("HYBTRACE_TEST_PROC_HIST_SLOTS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n && n <= HT_PROC_HIST_SLOTS && !(n & (n - 1)) ? (unsigned int)n : 0;
}

/* For tests: a count N from LEAST to 1000 in the environment variable NAME; 0 without one. */
static unsigned int test_every(const char *name, unsigned long least)
{
	const char *v = getenv(name);
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n >= least && n <= 1000 ? (unsigned int)n : 0;
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
static int start_session(struct session *s, const struct ht_options *o)
{
	int tgid = s->tgid;
	const char *sleeper;
	struct ht_monitor_config cfg = {
		.targets = &s->spec,
		.syscall_filter_on = o->syscall_filter_on,
		.filters = o->filters,
		.history_bytes = o->history_bytes,
		.btf_path = o->btf_path,
		.on_breach = on_breach,
		.on_breach_ctx = s,
	};
	uint64_t also_keep = 0;
	struct btf *btf;

	s->opt = o;
	/* This thread is the event loop: its stack grown now, before the dump builder starts. */
	ht_main_stack_reserve(HT_MAIN_STACK_RESERVE);
	s->status_on_tty = isatty(STDERR_FILENO);
	if (tgid && ht_proc_thread_comm(tgid, s->target_comm, sizeof(s->target_comm)))
		snprintf(s->target_comm, sizeof(s->target_comm), "?");
	/* A breakpoint in every process of the machine is not what anyone means. */
	if (o->ntriggers && s->spec.all) {
		ht_fail("--trigger cannot go with --all: name the processes (--pid, --cgroup, run)");
		return HT_EXIT_USAGE;
	}
	if (!tgid && o->block_stacks) {
		ht_fail("--block-stacks follows one process: name it with --pid or run");
		return HT_EXIT_USAGE;
	}
	/* For make bench: the programs test one process by its tgid, as before the target set. */
	if (getenv("HYBTRACE_TEST_ONE_TGID")) {
		if (s->spec.ntgids != 1 || s->spec.cgroup_on || s->spec.all) {
			ht_fail("HYBTRACE_TEST_ONE_TGID takes one process (--pid or run), no --cgroup "
				"or --all");
			return HT_EXIT_USAGE;
		}
		s->spec.test_one_tgid = s->spec.tgids[0];
	}
	/* For make bench: the alternative to the set's test, a walk up the task's cgroup. */
	if (getenv("HYBTRACE_TEST_CGROUP_WALK")) {
		if (!s->spec.cgroup_on || s->spec.ntgids || s->spec.children || s->spec.all) {
			ht_fail("HYBTRACE_TEST_CGROUP_WALK takes --cgroup alone");
			return HT_EXIT_USAGE;
		}
		s->spec.test_cgroup_walk = true;
	}
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
	/* For tests: so few histogram slots that processes find none and count in the rest. */
	cfg.proc_hist_slots = test_proc_hist_slots();
	/* For tests: the switch-ins the kernel sometimes skips, one in N at random. */
	cfg.test_skip_switch_in_one_in = test_every("HYBTRACE_TEST_SKIP_SWITCH_IN", 2);
	/* For tests: the switches some kernels make without the tracepoint, on demand. */
	cfg.test_untraced_switch_every = test_every("HYBTRACE_TEST_UNTRACED_SWITCH", 1);
	cfg.test_untraced_after_migration = getenv("HYBTRACE_TEST_UNTRACED_AFTER_MIGRATION") != NULL;
	/* For tests: the wakeups such a switch hides with it, on demand. */
	cfg.test_untraced_wakeup_every = test_every("HYBTRACE_TEST_UNTRACED_WAKEUP", 2);
	/* For tests: a sleeper's switch-outs the kernel did not trace, on demand. */
	sleeper = getenv("HYBTRACE_TEST_UNTRACED_SLEEP_COMM");
	snprintf(cfg.test_untraced_sleep_comm, sizeof(cfg.test_untraced_sleep_comm), "%s",
		 sleeper ? sleeper : "");
	/* For tests: the timer callbacks' entries PREEMPT_RT's preemptible programs miss. */
	cfg.test_miss_timer_entries = getenv("HYBTRACE_TEST_MISS_TIMER_ENTRIES") != NULL;
	cfg.test_miss_timer_exits = getenv("HYBTRACE_TEST_MISS_TIMER_EXITS") != NULL;
	memcpy(cfg.threshold_ns, o->threshold_ns, sizeof(cfg.threshold_ns));
	memcpy(cfg.syscall_filter, o->syscall_filter, sizeof(cfg.syscall_filter));
	s->comms = malloc(sizeof(*s->comms));
	if (!s->comms) {
		ht_fail("out of memory");
		return HT_EXIT_FAILURE;
	}
	/*
	 * The attach begins: the triggers are armed first, the monitor next. Every
	 * time hybtrace prints (hits, breaches, the summary's) counts from here,
	 * so that a hit made while the monitor loads is not before the zero.
	 */
	s->start_ns = monotonic_ns();
	/*
	 * Specs are checked before anything else attaches: a typo is exit 2,
	 * nothing left. `run`'s child has not exec'd yet: everything waits for
	 * it; a running target may still load the library a spec names.
	 */
	if (o->ntriggers &&
	    ht_code_triggers_open(&s->triggers, s->tgid, o->triggers, o->ntriggers, o->multi,
				  s->spec.children || s->spec.cgroup_on,
				  s->child ? HT_TRIGGERS_WAIT : HT_TRIGGERS_WAIT_MODULES))
		return HT_EXIT_USAGE;
	/* Kernel addresses are readable now, while we are privileged. */
	s->ksyms = ht_ksyms_load(NULL);
	if (o->block_stacks) {
		s->blocks = malloc(sizeof(*s->blocks));
		if (!s->blocks) {
			ht_fail("out of memory");
			return HT_EXIT_FAILURE;
		}
		cfg.block_stack_mode = o->callgraph == HT_CALLGRAPH_MODE_DWARF ? HT_BLOCK_STACK_DWARF
									: HT_BLOCK_STACK_FP;
		ht_block_stacks_init(s->blocks, cfg.block_stack_mode);
		cfg.on_block_stack = ht_block_stacks_on_record;
		cfg.on_block_stack_ctx = s->blocks;
	}
	/* A wait chain starts with the waker: its stacks, where the chain needs them. */
	if (o->chain_depth) {
		s->wakers = calloc(1, sizeof(*s->wakers));
		if (!s->wakers) {
			ht_fail("out of memory");
			return HT_EXIT_FAILURE;
		}
		cfg.waker_stacks = true;
		cfg.on_waker_stack = ht_waker_stacks_on_record;
		cfg.on_waker_stack_ctx = s->wakers;
	}
	find_do_softirq(s->ksyms, &cfg);
	if (ht_monitor_open(&s->monitor, &cfg))
		return HT_EXIT_FAILURE;
	/* Events are read in the run loop only, once the dumper runs. */
	s->monitor.targets.on_exec = on_target_exec;
	s->monitor.targets.on_exec_ctx = s;
	s->monitor.targets.on_left = on_target_left;
	s->monitor.targets.on_left_ctx = s;
	/* The other target processes (--pid A,B, a cgroup's) are armed as the set is known. */
	ht_code_triggers_follow(&s->triggers, &s->monitor.targets);
	ht_code_triggers_sync(&s->triggers);
	ht_comm_cache_init(s->comms, &s->monitor);
	/* Rates count the monitor's records, from its attach on. */
	s->last_status_ns = s->monitor.attached_ns;
	s->reach_since_ns = s->monitor.attached_ns;
	s->reach_heads = calloc(s->monitor.ncpus, sizeof(*s->reach_heads));
	if (start_on_cpu_source(s))
		return HT_EXIT_FAILURE;
	/*
	 * Attached: from here on only what perf events, dumps and /proc need.
	 * Triggers open events after this (new images, libraries): where only
	 * CAP_SYS_ADMIN opens them, it stays.
	 */
	if (o->ntriggers && s->perf_access == HT_PERF_KEEP_ADMIN) {
		also_keep |= 1ULL << HT_CAP_SYS_ADMIN;
		fprintf(stderr,
			"hybtrace: kernel.perf_event_paranoid is %d and this kernel opens perf "
			"events only for CAP_SYS_ADMIN: hybtrace keeps it after attaching, for the "
			"triggers' breakpoints in images and libraries to come\n",
			s->perf_paranoid);
	}
	if (ht_drop_capabilities(probe_bpf_maps, s, also_keep, NULL) || start_dumper(s))
		return HT_EXIT_FAILURE;
	if (o->rt_priority && set_realtime(o->rt_priority))
		return HT_EXIT_FAILURE;
	/* The dump builder runs by now: both threads keep off the target's CPUs. */
	if (tgid && ht_own_cpus_init(&s->own_cpus, tgid, monotonic_ns()))
		update_own_cpus(s);
	return open_loop_fds(s) ? HT_EXIT_FAILURE : 0;
}

static void init_session(struct session *s)
{
	memset(s, 0, sizeof(*s));
	s->epfd = s->sigfd = s->statusfd = s->pidfd = s->durationfd = s->dumpfd = -1;
	ht_proc_stats_init(&s->procs, HT_PROC_STATS_MAX_GONE, HT_PROC_STATS_MAX);
	ht_marks_procs_init(&s->marks_procs, 0);
}

/*
 * A reader of the output that goes away is a write error (EPIPE) that ends
 * the session with its summary, not a signal that kills hybtrace with the
 * dump in progress unfinished (exit 141).
 */
static void ignore_sigpipe(void)
{
	signal(SIGPIPE, SIG_IGN);
}

/*
 * What the rings will hold, checked before anything is attached: the flight
 * recorder and the sampling rings, per CPU, against --max-memory. Also says
 * which on-CPU source `auto` means here.
 */
static int check_sources(struct ht_options *o)
{
	int ncpus = libbpf_num_possible_cpus();
	char sizes[128];
	uint64_t need;

	if (ht_sources_choose(o))
		return -1;
	if (ncpus <= 0)
		return ht_fail("cannot count CPUs");
	/* The default ring, on a machine of many CPUs: halved until the rings fit. */
	while (!o->history_given && o->history_bytes > HT_SMALLEST_DEFAULT_HISTORY_BYTES &&
	       (uint64_t)ncpus * o->history_bytes + ht_sources_memory_bytes(o, (unsigned int)ncpus) >
		       o->max_memory_bytes)
		o->history_bytes >>= 1;
	need = (uint64_t)ncpus * o->history_bytes;
	need += ht_sources_memory_bytes(o, (unsigned int)ncpus);
	if (need > o->max_memory_bytes)
		return ht_fail("the rings need %lluM on %d CPUs, more than --max-memory %lluM: "
			       "lower --history, %s, or raise --max-memory",
			       (unsigned long long)(need >> 20), ncpus,
			       (unsigned long long)(o->max_memory_bytes >> 20),
			       ht_sources_size_options(sizes, sizeof(sizes)));
	return 0;
}

/*
 * Perf events (the on-CPU source, triggers) where the kernel opens them
 * only for CAP_SYS_ADMIN: found out before anything attaches, so that a
 * hybtrace without it says so at once (exit 2) instead of triggers that
 * never fire, and one with it knows to keep it.
 */
static int check_perf_events(struct session *s, const struct ht_options *o)
{
	const char *what = o->ntriggers ? "--trigger" : ht_sources_title(o);
	char why[256];

	if (!o->ntriggers && !ht_sources_need_perf_events(o))
		return 0;
	s->perf_access = ht_perf_access(&s->perf_paranoid);
	if (s->perf_access != HT_PERF_NO_ADMIN)
		return 0;
	return ht_fail("%s needs perf events: %s%s", what,
		       ht_perf_access_describe(s->perf_access, s->perf_paranoid, why, sizeof(why)),
		       o->ntriggers ? "" : " (or --source none)");
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
	if (s->nsources)
		return s->sources[0].ops->dump_name(s->sources[0].state);
	return "none";
}

static void announce(struct session *s)
{
	char buf[64], reach[32], what[512];

	s->announced = true;
	if (s->opt->json) {
		struct ht_json j;

		/* Whoever reads the stream learns when monitoring has begun. */
		flockfile(s->out.f);
		ht_json_begin(&j, s->out.f);
		ht_json_str(&j, "type", "attached");
		ht_json_i64(&j, "pid", s->tgid);
		ht_json_str(&j, "comm", s->target_comm);
		print_targets_json(s, &j);
		ht_json_str(&j, "source", on_cpu_source_name(s));
		ht_json_end_line(&j);
		funlockfile(s->out.f);
		check_out(s);
		return;
	}
	if (s->opt->quiet)
		return;
	fprintf(stderr, "hybtrace: watching %s", targets_text(s, what, sizeof(what)));
	for (unsigned int k = 1; k < HT_BREACH_KIND_MAX; k++)
		fprintf(stderr, "%s %s %s", k > 1 ? "," : ":", ht_breach_kinds[k].name,
			threshold_of(s->opt, k)
				? ht_format_duration(threshold_of(s->opt, k), buf, sizeof(buf))
				: "off");
	fputs("; Ctrl-C to stop\n", stderr);
	for (unsigned int i = 0; i < s->nsources; i++)
		s->sources[i].ops->announce(s->sources[i].state, stderr);
	if (!s->nsources)
		fprintf(stderr, "hybtrace: on-CPU source: none\n");
	/* What --pre can have; measured as it runs, and said if it falls short. */
	fprintf(stderr,
		"hybtrace: flight recorder: %llu records per CPU, %s at 200k records/s "
		"(100k switches and 100k wakeups); --pre %s\n",
		(unsigned long long)recorder_records_per_cpu(s),
		ht_format_duration(recorder_records_per_cpu(s) * 5000ULL, reach, sizeof(reach)),
		ht_format_duration(s->opt->pre_ns, buf, sizeof(buf)));
}

/* Whether SPEC is one process and nothing else: its pidfd says when it is gone. */
static bool one_process(const struct ht_target_spec *spec)
{
	return spec->ntgids == 1 && !spec->children && !spec->cgroup_on && !spec->all;
}

static int check_targets_privileges(const struct ht_target_spec *spec)
{
	for (unsigned int i = 0; i < spec->ntgids; i++)
		if (ht_check_target_privileges(spec->tgids[i]))
			return -1;
	return 0;
}

int ht_session_record(struct ht_options *o)
{
	struct session s;
	int status;

	init_session(&s);
	ignore_sigpipe();
	/* The options resolved the targets: processes, cgroup, --all. */
	s.spec = o->targets;
	s.spec.self_tgid = getpid();
	s.tgid = s.spec.ntgids ? s.spec.tgids[0] : 0;
	status = HT_EXIT_USAGE;
	if (ht_check_monitor_privileges() || check_targets_privileges(&s.spec) ||
	    ht_output_dir_check(o->output_dir) || check_sources(o) ||
	    check_perf_events(&s, o) || ht_out_stream_open(&s.out, o->json_path))
		goto fail;
	/* One process: its pidfd ends the session, as the set's last exit would. */
	if (one_process(&s.spec)) {
		s.pidfd = pidfd_open_target(s.tgid);
		if (s.pidfd < 0)
			goto fail;
	}
	block_loop_signals();
	status = start_session(&s, o);
	if (status)
		goto fail;
	announce(&s);
	status = HT_EXIT_FAILURE;
	if (run_loop(&s))
		goto fail;
	finish_dumps(&s);
	print_summary(&s);
	/* A reader that went away ends the session as Ctrl-C does; a full disk does not. */
	status = s.out_gone && ht_out_stream_error(&s.out) != EPIPE ? HT_EXIT_FAILURE : 0;
	goto out;
fail:
	ht_error("%s", ht_last_error());
out:
	close_session(&s);
	return status;
}

/*
 * HYBTRACE_TEST_HOLD_AFTER_ATTACH_MS: 1 to 1000 ms that the held child still
 * waits, asleep, after the monitor is attached (its wait is then seen whole),
 * else 0.
 */
static unsigned int test_hold_after_attach_ms(void)
{
	const char *v = getenv("HYBTRACE_TEST_HOLD_AFTER_ATTACH_MS");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n <= 1000 ? (unsigned int)n : 0;
}

/*
 * Fork a child that waits on GO_FD before exec, so the monitor is attached
 * before CMD's first instruction. exec errors come back on a close-on-exec
 * pipe. STDOUT_TO_STDERR: the JSON stream has stdout, CMD's output goes to
 * stderr so that stdout stays JSON lines only.
 */
static pid_t spawn_held(char **argv, bool stdout_to_stderr, int *go_fd, int *err_fd)
{
	const char *base = strrchr(argv[0], '/');
	char own_name[16] = "", cmd_name[16];
	int go[2], err[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return ht_fail("pipe: %s", strerror(errno));
	/*
	 * The child is named as the kernel will name it at exec (the file's base
	 * name), not "hybtrace": set here before fork, it has that name from its
	 * first event on, in the comm map, /proc, live lines and dumps alike.
	 */
	snprintf(cmd_name, sizeof(cmd_name), "%s", base && base[1] ? base + 1 : argv[0]);
	prctl(PR_GET_NAME, own_name);
	prctl(PR_SET_NAME, cmd_name);
	pid = fork();
	if (pid != 0)
		prctl(PR_SET_NAME, own_name);
	if (pid < 0)
		return ht_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char byte;
		int e;

		close(go[1]);
		close(err[0]);
		/* hybtrace ignores SIGPIPE; an ignored signal would stay so across exec. */
		signal(SIGPIPE, SIG_DFL);
		if (stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(127);
		/* With the test hold, a first byte says "attached", the second "go". */
		for (int i = test_hold_after_attach_ms() ? 2 : 1; i > 0; i--)
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
static int release_child(struct session *s, char **argv, int go_fd, int err_fd)
{
	unsigned int hold_ms = test_hold_after_attach_ms();
	int exec_errno;
	ssize_t n;

	if (hold_ms) {
		if (write(go_fd, "a", 1) != 1)
			return ht_fail("cannot start '%s': %s", argv[0], strerror(errno));
		usleep(hold_ms * 1000);
	}
	s->child_held_until_ns = monotonic_ns();
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
	ignore_sigpipe();
	status = HT_EXIT_USAGE;
	if (ht_check_monitor_privileges() || check_targets_privileges(&o->targets) ||
	    ht_output_dir_check(o->output_dir) || check_sources(o) ||
	    check_perf_events(&s, o) || ht_out_stream_open(&s.out, o->json_path))
		goto fail;
	status = HT_EXIT_FAILURE;
	s.child = spawn_held(o->run_argv, o->json && !o->json_path, &go_fd, &err_fd);
	if (s.child < 0) {
		s.child = 0;
		goto fail;
	}
	s.pidfd = pidfd_open_target(s.child);
	if (s.pidfd < 0)
		goto fail;
	/*
	 * CMD first, then what --pid named beside it; its children are followed
	 * unless --no-children, as perf record and strace -f do.
	 */
	s.spec = o->targets;
	s.spec.self_tgid = getpid();
	if (s.spec.ntgids == HT_MAX_TARGET_PIDS) {
		ht_fail("run's command and %d processes: at most %d in all", HT_MAX_TARGET_PIDS,
			HT_MAX_TARGET_PIDS);
		goto fail;
	}
	memmove(&s.spec.tgids[1], &s.spec.tgids[0], s.spec.ntgids * sizeof(s.spec.tgids[0]));
	s.spec.tgids[0] = s.child;
	s.spec.ntgids++;
	s.tgid = s.child;
	block_loop_signals();
	status = start_session(&s, o);
	if (status)
		goto fail;
	status = 127; /* as a shell says "command not found" */
	rc = release_child(&s, o->run_argv, go_fd, err_fd);
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
