// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include "kernel/kernel_btf.h"
#include "base/clock.h"
#include "base/log.h"
#include "kernel/monitor.h"
#include "base/proc.h"
#include "monitor.skel.h"

/* The last warning libbpf printed: the reason a load failed, shown once. */
static char libbpf_last_warning[256];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static int debug = -1;

	if (debug < 0)
		debug = getenv("HYBTRACE_DEBUG") != NULL;
	if (debug)
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_WARN) {
		vsnprintf(libbpf_last_warning, sizeof(libbpf_last_warning), fmt, ap);
		libbpf_last_warning[strcspn(libbpf_last_warning, "\n")] = '\0';
	}
	return 0;
}

void ht_monitor_quiet_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}

unsigned int ht_monitor_slot_shift(uint64_t bytes)
{
	uint64_t records = bytes / sizeof(struct ht_flight_record);
	unsigned int shift = 0;

	while ((1ULL << shift) < records)
		shift++;
	return shift;
}

unsigned int ht_monitor_thread_slots(long pid_max)
{
	unsigned int slots = HT_THREAD_SLOTS_MIN;

	while (slots < HT_THREAD_SLOTS_MAX && (long)slots < pid_max)
		slots <<= 1;
	return slots;
}

static long read_pid_max(void)
{
	long pid_max;

	if (ht_proc_read_long("/proc/sys/kernel/pid_max", &pid_max) || pid_max <= 0)
		return HT_THREAD_SLOTS_MAX;
	return pid_max;
}

/*
 * The programs that keep the target set go in before the set is seeded, and
 * before those that judge targets: a fork, a move or an exit during the
 * seeding is theirs. The skeleton's attach skips the links set here.
 */
static const char *const target_keepers[] = {
	"handle_sched_process_fork",
	"handle_cgroup_attach_task",
	"handle_cgroup_rmdir",
};

static int attach_by_name(struct monitor_bpf *skel, const char *const *names, size_t n)
{
	const struct bpf_object_skeleton *s = skel->skeleton;

	for (size_t i = 0; i < n; i++) {
		for (int p = 0; p < s->prog_cnt; p++) {
			struct bpf_program *prog = *s->progs[p].prog;

			if (strcmp(s->progs[p].name, names[i]) || !bpf_program__autoload(prog))
				continue;
			*s->progs[p].link = bpf_program__attach(prog);
			if (!*s->progs[p].link)
				return -errno;
		}
	}
	return 0;
}

/* Programs for tracepoints some kernels lack: skipped there, with what they add lost. */
static void disable_missing_tracepoints(struct monitor_bpf *skel, const struct btf *btf)
{
	if (!ht_btf_has_tracepoint(btf, "task_rename"))
		bpf_program__set_autoload(skel->progs.handle_task_rename, false);
}

/*
 * The interrupt and timer programs that mark when a CPU enters and leaves
 * each kind of context (see wake_context() in monitor.bpf.c), as pairs: an
 * entry without its exit would leave that context looking active for good.
 */
static const struct {
	const char *entry_tp, *exit_tp, *entry_prog, *exit_prog;
} context_pairs[] = {
	{ "irq_handler_entry", "irq_handler_exit", "handle_irq_entry", "handle_irq_exit" },
	{ "softirq_entry", "softirq_exit", "handle_softirq_entry", "handle_softirq_exit" },
	{ "hrtimer_expire_entry", "hrtimer_expire_exit", "handle_hrtimer_entry",
	  "handle_hrtimer_exit" },
	{ "timer_expire_entry", "timer_expire_exit", "handle_timer_entry", "handle_timer_exit" },
};

#define CONTEXT_PAIRS (sizeof(context_pairs) / sizeof(context_pairs[0]))

static void disable_missing_context_pairs(struct monitor_bpf *skel, const struct btf *btf)
{
	for (size_t i = 0; i < CONTEXT_PAIRS; i++) {
		struct bpf_program *entry_prog, *exit_prog;

		if (ht_btf_has_tracepoint(btf, context_pairs[i].entry_tp) &&
		    ht_btf_has_tracepoint(btf, context_pairs[i].exit_tp))
			continue;
		entry_prog = bpf_object__find_program_by_name(skel->obj, context_pairs[i].entry_prog);
		exit_prog = bpf_object__find_program_by_name(skel->obj, context_pairs[i].exit_prog);
		bpf_program__set_autoload(entry_prog, false);
		bpf_program__set_autoload(exit_prog, false);
	}
}

/*
 * Exits go in before any entry: an entry seen whose exit fired just before
 * the exit's program was attached would mark that context active on its
 * CPU until the next exit there, tens of milliseconds on a quiet CPU, and
 * every wakeup on that CPU meanwhile would be blamed on a timer. An exit
 * seen without its entry is harmless. The skeleton's attach skips the links
 * set here.
 */
static int attach_context_exits(struct monitor_bpf *skel)
{
	const char *names[CONTEXT_PAIRS];

	for (size_t i = 0; i < CONTEXT_PAIRS; i++)
		names[i] = context_pairs[i].exit_prog;
	return attach_by_name(skel, names, CONTEXT_PAIRS);
}

/* Every knob of bpf/settings.bpf.h, in its order. */
static unsigned int proc_hist_slots(const struct ht_monitor_config *cfg)
{
	return cfg->proc_hist_slots ?: HT_PROC_HIST_SLOTS;
}

static void set_settings(struct monitor_bpf *skel, const struct ht_monitor_config *cfg,
			 unsigned int slot_shift, unsigned int thread_slots)
{
	skel->rodata->targets_all = cfg->targets->all;
	skel->rodata->self_tgid = (__u32)cfg->targets->self_tgid;
	skel->rodata->targets_children = cfg->targets->children;
	skel->rodata->targets_cgroup_on = cfg->targets->cgroup_on;
	skel->rodata->target_cgroup_id = cfg->targets->cgroup_id;
	skel->rodata->prev_state_from_arg = cfg->prev_state_from_arg;
	/* Each breach kind's threshold knob (base/breach_kinds.h). */
	skel->rodata->rq_delay_thresh_ns = cfg->threshold_ns[HT_BREACH_RQ_DELAY];
	skel->rodata->off_cpu_thresh_ns = cfg->threshold_ns[HT_BREACH_OFF_CPU];
	skel->rodata->syscall_thresh_ns = cfg->threshold_ns[HT_BREACH_SYSCALL];
	skel->rodata->syscall_filter_on = cfg->syscall_filter_on;
	memcpy((void *)skel->rodata->syscall_filter, cfg->syscall_filter,
	       sizeof(cfg->syscall_filter));
	skel->rodata->off_cpu_states = cfg->filters.off_cpu_states;
	skel->rodata->off_cpu_syscalls_on = cfg->filters.off_cpu_syscalls_on;
	memcpy((void *)skel->rodata->off_cpu_syscalls, cfg->filters.off_cpu_syscalls,
	       sizeof(cfg->filters.off_cpu_syscalls));
	skel->rodata->ignore_syscalls_on = cfg->filters.ignore_syscalls_on;
	memcpy((void *)skel->rodata->ignore_syscalls, cfg->filters.ignore_syscalls,
	       sizeof(cfg->filters.ignore_syscalls));
	skel->rodata->fr_slot_shift = slot_shift;
	skel->rodata->thread_slot_mask = thread_slots - 1;
	skel->rodata->proc_hist_mask = proc_hist_slots(cfg) - 1;
	skel->rodata->rq_from_sched_info = !cfg->rq_from_thread_state;
	skel->rodata->block_stack_mode = cfg->block_stack_mode;
	skel->rodata->waker_stacks_on = cfg->waker_stacks;
	_Static_assert(sizeof(skel->rodata->do_softirq_ranges) == sizeof(cfg->do_softirq_ranges),
		       "HT_DO_SOFTIRQ_RANGES is DO_SOFTIRQ_RANGES");
	memcpy((void *)skel->rodata->do_softirq_ranges, cfg->do_softirq_ranges,
	       sizeof(skel->rodata->do_softirq_ranges));
	skel->rodata->test_skip_switch_in_one_in = cfg->test_skip_switch_in_one_in;
	skel->rodata->test_untraced_switch_every = cfg->test_untraced_switch_every;
	skel->rodata->test_untraced_after_migration = cfg->test_untraced_after_migration;
	skel->rodata->test_untraced_wakeup_every = cfg->test_untraced_wakeup_every;
	_Static_assert(sizeof(skel->rodata->test_untraced_sleep_comm) ==
			       sizeof(cfg->test_untraced_sleep_comm),
		       "a task's comm either side");
	memcpy((void *)skel->rodata->test_untraced_sleep_comm, cfg->test_untraced_sleep_comm,
	       sizeof(skel->rodata->test_untraced_sleep_comm));
	skel->rodata->test_miss_timer_entries = cfg->test_miss_timer_entries;
	skel->rodata->test_miss_timer_exits = cfg->test_miss_timer_exits;
	skel->rodata->test_one_tgid = (__u32)cfg->targets->test_one_tgid;
	skel->rodata->test_cgroup_walk = cfg->targets->test_cgroup_walk;
}

static int configure(struct monitor_bpf *skel, const struct ht_monitor_config *cfg,
		     unsigned int ncpus, const struct btf *btf)
{
	unsigned int shift = ht_monitor_slot_shift(cfg->history_bytes);
	unsigned int thread_slots = cfg->thread_slots ?: ht_monitor_thread_slots(read_pid_max());
	int err;

	set_settings(skel, cfg, shift, thread_slots);

	err = bpf_map__set_max_entries(skel->maps.fr_records, ncpus << shift);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.fr_heads, ncpus);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.clock_syncs, ncpus);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.thread_slots, thread_slots);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.proc_hists, proc_hist_slots(cfg) + 1);
	/* Pins matter only where a cgroup move could take a target out. */
	if (!err && !cfg->targets->cgroup_on)
		err = bpf_map__set_max_entries(skel->maps.pinned_procs, 1);
	/* Unused without --block-stacks: the smallest ring there is. */
	if (!err && !cfg->block_stack_mode)
		err = bpf_map__set_max_entries(skel->maps.block_stack_rb, (__u32)getpagesize());
	if (!err && !cfg->waker_stacks)
		err = bpf_map__set_max_entries(skel->maps.waker_stack_rb, (__u32)getpagesize());
	if (err)
		return ht_fail("cannot size the flight recorder: %s", strerror(-err));

	/* Syscall tracepoints slow every task on the machine: attach only when asked. */
	if (!cfg->threshold_ns[HT_BREACH_SYSCALL]) {
		bpf_program__set_autoload(skel->progs.handle_sys_enter, false);
		bpf_program__set_autoload(skel->progs.handle_sys_exit, false);
	}
	/*
	 * Off-CPU breaches are held in syscalls only with both thresholds; what
	 * is held at the end is flushed by a loop over the slots (bpf_loop,
	 * Linux 5.17): without it, held in a syscall that never returned is lost.
	 */
	if (!cfg->threshold_ns[HT_BREACH_SYSCALL] || !cfg->threshold_ns[HT_BREACH_OFF_CPU] ||
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_loop, NULL) <= 0)
		bpf_program__set_autoload(skel->progs.flush_held, false);
	/* Every cgroup move on the machine formats a path for this tracepoint: --cgroup only. */
	if (!cfg->targets->cgroup_on) {
		bpf_program__set_autoload(skel->progs.handle_cgroup_attach_task, false);
		bpf_program__set_autoload(skel->progs.handle_cgroup_rmdir, false);
	}
	disable_missing_tracepoints(skel, btf);
	disable_missing_context_pairs(skel, btf);
	return 0;
}

static int map_rings(struct ht_monitor *m, unsigned int shift)
{
	long page = sysconf(_SC_PAGESIZE);

	m->records_len = ((size_t)m->ncpus << shift) * sizeof(struct ht_flight_record);
	m->records_len = (m->records_len + (size_t)page - 1) & ~((size_t)page - 1);
	m->heads_len = m->ncpus * sizeof(struct ht_fr_head);
	m->heads_len = (m->heads_len + (size_t)page - 1) & ~((size_t)page - 1);
	m->records_mem = mmap(NULL, m->records_len, PROT_READ, MAP_SHARED,
			      bpf_map__fd(m->skel->maps.fr_records), 0);
	if (m->records_mem == MAP_FAILED) {
		m->records_mem = NULL;
		return ht_fail("cannot map the flight recorder: %s", strerror(errno));
	}
	m->heads_mem = mmap(NULL, m->heads_len, PROT_READ, MAP_SHARED,
			    bpf_map__fd(m->skel->maps.fr_heads), 0);
	if (m->heads_mem == MAP_FAILED) {
		m->heads_mem = NULL;
		return ht_fail("cannot map the flight recorder heads: %s", strerror(errno));
	}
	m->proc_hists_len = ((size_t)m->proc_hist_slots + 1) * sizeof(struct ht_proc_hist);
	m->proc_hists_len = (m->proc_hists_len + (size_t)page - 1) & ~((size_t)page - 1);
	m->proc_hists = mmap(NULL, m->proc_hists_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			     bpf_map__fd(m->skel->maps.proc_hists), 0);
	if (m->proc_hists == MAP_FAILED) {
		m->proc_hists = NULL;
		return ht_fail("cannot map the per-process histograms: %s", strerror(errno));
	}
	m->recorder.records = m->records_mem;
	m->recorder.heads = m->heads_mem;
	m->recorder.ncpus = m->ncpus;
	m->recorder.slot_shift = shift;
	return 0;
}

static int load_failure(const char *what, int err)
{
	if (err == -EPERM || err == -EACCES)
		return ht_fail("%s: permission denied: run as root, or grant CAP_BPF and CAP_PERFMON",
			       what);
	if (libbpf_last_warning[0])
		return ht_fail("%s: %s (%s; HYBTRACE_DEBUG=1 shows libbpf's log)", what,
			       strerror(-err), libbpf_last_warning);
	return ht_fail("%s: %s", what, strerror(-err));
}

int ht_monitor_open(struct ht_monitor *m, const struct ht_monitor_config *cfg)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = cfg->btf_path);
	struct btf *btf;
	int ncpus, err;

	memset(m, 0, sizeof(*m));
	if (!cfg->targets->all && !cfg->targets->ntgids && !cfg->targets->cgroup_on)
		return ht_fail("nothing to watch");
	ht_targets_init(&m->targets, cfg->targets);
	ht_monitor_quiet_libbpf();
	btf = ht_btf_open(cfg->btf_path);
	if (!btf)
		return -1;
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) {
		btf__free(btf);
		return ht_fail("cannot count CPUs: %s", strerror(-ncpus));
	}
	m->ncpus = (unsigned int)ncpus;
	m->skel = monitor_bpf__open_opts(&open_opts);
	if (!m->skel) {
		btf__free(btf);
		return load_failure("cannot open the BPF programs", -errno);
	}
	m->proc_hist_slots = proc_hist_slots(cfg);
	err = configure(m->skel, cfg, m->ncpus, btf);
	btf__free(btf);
	if (err)
		goto fail;
	err = monitor_bpf__load(m->skel);
	if (err) {
		load_failure("cannot load the BPF programs", err);
		goto fail;
	}
	if (map_rings(m, ht_monitor_slot_shift(cfg->history_bytes)))
		goto fail;
	m->breach_rb = ring_buffer__new(bpf_map__fd(m->skel->maps.breaches), cfg->on_breach,
					cfg->on_breach_ctx, NULL);
	if (!m->breach_rb) {
		ht_fail("cannot open the breach ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (ring_buffer__add(m->breach_rb, bpf_map__fd(m->skel->maps.target_events),
			     ht_targets_on_event, &m->targets)) {
		ht_fail("cannot open the target event ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (ht_targets_map(&m->targets, bpf_map__fd(m->skel->maps.target_procs),
			   cfg->targets->cgroup_on ? bpf_map__fd(m->skel->maps.pinned_procs) : -1))
		goto fail;
	if (cfg->block_stack_mode) {
		m->block_rb = ring_buffer__new(bpf_map__fd(m->skel->maps.block_stack_rb),
					       cfg->on_block_stack, cfg->on_block_stack_ctx, NULL);
		if (!m->block_rb) {
			ht_fail("cannot open the block-stack ring buffer: %s", strerror(errno));
			goto fail;
		}
	}
	if (cfg->waker_stacks) {
		m->waker_rb = ring_buffer__new(bpf_map__fd(m->skel->maps.waker_stack_rb),
					       cfg->on_waker_stack, cfg->on_waker_stack_ctx, NULL);
		if (!m->waker_rb) {
			ht_fail("cannot open the waker-stack ring buffer: %s", strerror(errno));
			goto fail;
		}
	}
	err = attach_by_name(m->skel, target_keepers,
			     sizeof(target_keepers) / sizeof(target_keepers[0]));
	if (err) {
		load_failure("cannot attach the BPF programs", err);
		goto fail;
	}
	if (ht_targets_seed(&m->targets))
		goto fail;
	err = attach_context_exits(m->skel);
	if (!err)
		err = monitor_bpf__attach(m->skel);
	if (err) {
		load_failure("cannot attach the BPF programs", err);
		goto fail;
	}
	ht_targets_check_seeded(&m->targets);
	m->syscalls_on = cfg->threshold_ns[HT_BREACH_SYSCALL] != 0;
	m->attached_ns = ht_monotonic_ns();
	return 0;
fail:
	ht_monitor_close(m);
	return -1;
}

void ht_monitor_close(struct ht_monitor *m)
{
	if (m->skel)
		monitor_bpf__detach(m->skel);
	ring_buffer__free(m->breach_rb);
	ring_buffer__free(m->block_rb);
	ring_buffer__free(m->waker_rb);
	if (m->records_mem)
		munmap(m->records_mem, m->records_len);
	if (m->heads_mem)
		munmap(m->heads_mem, m->heads_len);
	if (m->proc_hists)
		munmap(m->proc_hists, m->proc_hists_len);
	monitor_bpf__destroy(m->skel);
	ht_targets_free(&m->targets);
	memset(m, 0, sizeof(*m));
}

void ht_monitor_stop_breaches(struct ht_monitor *m)
{
	__atomic_store_n(&m->skel->bss->breaches_stopped, 1, __ATOMIC_RELEASE);
	/*
	 * MEMBARRIER_CMD_GLOBAL waits for an RCU grace period, and the programs
	 * run inside RCU read-side sections: a program that read the flag as 0
	 * has submitted or dropped its breach when this returns. Where it is
	 * refused (nohz_full), the caller's drain waits for the counts instead.
	 */
	syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
	/* Off-CPU breaches held in syscalls still running: sent now, counted as the others. */
	if (bpf_program__autoload(m->skel->progs.flush_held)) {
		LIBBPF_OPTS(bpf_test_run_opts, opts);

		if (bpf_prog_test_run_opts(bpf_program__fd(m->skel->progs.flush_held), &opts))
			ht_warn("off-CPU breaches held in syscalls not yet returned are lost: %s",
				strerror(errno));
	}
}

int ht_monitor_breach_fd(const struct ht_monitor *m)
{
	return ring_buffer__epoll_fd(m->breach_rb);
}

int ht_monitor_consume(struct ht_monitor *m)
{
	return ring_buffer__consume(m->breach_rb);
}

int ht_monitor_consume_block_stacks(struct ht_monitor *m)
{
	return m->block_rb ? ring_buffer__consume(m->block_rb) : 0;
}

int ht_monitor_targets_fd(const struct ht_monitor *m)
{
	return bpf_map__fd(m->skel->maps.target_procs);
}

uint64_t ht_monitor_target_event_drops(const struct ht_monitor *m)
{
	return __atomic_load_n(&m->skel->bss->target_event_drops, __ATOMIC_RELAXED);
}

int ht_monitor_consume_waker_stacks(struct ht_monitor *m)
{
	return m->waker_rb ? ring_buffer__consume(m->waker_rb) : 0;
}

uint64_t ht_monitor_block_stack_drops(const struct ht_monitor *m)
{
	return __atomic_load_n(&m->skel->bss->block_stack_drops, __ATOMIC_RELAXED);
}

/* Sum a per-CPU u64 array entry. */
static int percpu_sum(int map_fd, unsigned int ncpus, uint32_t key, uint64_t *sum)
{
	uint64_t values[ncpus];

	if (bpf_map_lookup_elem(map_fd, &key, values))
		return -1;
	*sum = 0;
	for (unsigned int i = 0; i < ncpus; i++)
		*sum += values[i];
	return 0;
}

static uint64_t recursion_misses(const struct ht_monitor *m)
{
	struct bpf_program *prog;
	uint64_t total = 0;

	bpf_object__for_each_program(prog, m->skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len))
			total += info.recursion_misses;
	}
	return total;
}

int ht_monitor_read_counters(const struct ht_monitor *m, struct ht_monitor_counters *out)
{
	int fd = bpf_map__fd(m->skel->maps.counters);

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < HT_CNT_MAX; i++)
		if (percpu_sum(fd, m->ncpus, i, &out->value[i]))
			return ht_fail("cannot read counters: %s", strerror(errno));
	out->recursion_misses = recursion_misses(m);
	for (unsigned int cpu = 0; cpu < m->ncpus; cpu++)
		out->records_written += ht_recorder_written(&m->recorder, cpu);
	return 0;
}

int ht_monitor_read_hist(const struct ht_monitor *m, unsigned int kind,
			 uint64_t slots[HT_HIST_SLOTS])
{
	int fd = bpf_map__fd(m->skel->maps.hists);

	for (uint32_t s = 0; s < HT_HIST_SLOTS; s++)
		if (percpu_sum(fd, m->ncpus, HT_HIST_INDEX(kind, s), &slots[s]))
			return ht_fail("cannot read histograms: %s", strerror(errno));
	return 0;
}

int ht_monitor_lookup_comm(const struct ht_monitor *m, uint32_t pid, struct ht_comm_entry *out)
{
	return bpf_map_lookup_elem(bpf_map__fd(m->skel->maps.comms), &pid, out) ? -1 : 0;
}

/* Entries read per syscall while looking for exited tasks. */
#define FORGET_BATCH 1024

unsigned int ht_monitor_forget_exited(const struct ht_monitor *m, uint64_t before_ns)
{
	int fd = bpf_map__fd(m->skel->maps.comms);
	static __u32 keys[FORGET_BATCH], doomed[FORGET_BATCH];
	static struct ht_comm_entry entries[FORGET_BATCH];
	__u32 batch, out_batch, count;
	unsigned int deleted = 0;
	bool first = true;
	int err;

	/* Read in batches (one syscall per FORGET_BATCH entries), delete what is stale. */
	do {
		unsigned int n = 0;

		count = FORGET_BATCH;
		err = bpf_map_lookup_batch(fd, first ? NULL : &batch, &out_batch, keys, entries,
					   &count, NULL);
		if (err && errno != ENOENT)
			break;
		first = false;
		batch = out_batch;
		for (__u32 i = 0; i < count; i++)
			if (entries[i].exited && entries[i].exit_ns < before_ns)
				doomed[n++] = keys[i];
		if (n) {
			__u32 done = n;

			if (!bpf_map_delete_batch(fd, doomed, &done, NULL))
				deleted += done;
		}
	} while (!err);
	return deleted;
}
