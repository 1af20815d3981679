// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A flight-recorder window as Perfetto's native scheduling packets, decoded
 * back here by the rules of Perfetto's ftrace importer: bundles with a cpu,
 * compact arrays of equal length, two synthetic switches first, prev_state
 * in the kernel's trace encoding, BOOTTIME times, each waking in its
 * waker's bundle and time, utsname, tgids, new tasks as task_newtask and
 * the blocked function as sched_blocked_reason with its interned symbol.
 */
#include "check.h"
#include "kernel/blocked_function.h"
#include "kernel/comm_cache.h"
#include "kernel/sched_ftrace.h"
#include "kernel/sched_index.h"
#include "trace/pb.h"
#include "trace/perfetto_read.h"
#include "trace/perfetto_write.h"
#include "symbols/ksyms.h"
#include "trace_fixtures.h"
#include "window_fixtures.h"

#define TGID	    4000
#define A	    4001 /* a target thread */
#define B	    4002 /* the thread that wakes it */
#define HOG	    9000
#define THREAD	    4003 /* a thread B starts */
#define CHILD	    4100 /* a process B forks */
#define BOOT_OFFSET 1000000000LL

static struct ht_fr_event events[64];
static size_t nevents;
static struct ht_comm_cache comms;

static void add(unsigned int cpu, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t a, uint32_t b,
		uint16_t aux, uint64_t arg)
{
	events[nevents++] = fx_fr_event(cpu, ts, kind, flags, a, b, aux, arg);
}

#define MAX_EVENTS 32
#define MAX_FULL   4

/* A full FtraceEvent of a bundle, as Perfetto's ftrace parser reads it. */
struct decoded_full {
	uint64_t ts;
	uint32_t pid;	/* the task that ran it */
	uint32_t field; /* which event */
	uint32_t tid;	/* newtask's pid, blocked reason's pid */
	char comm[24];
	uint64_t clone_flags, caller, io_wait;
};

/* One bundle as Perfetto's tokenizer walks it: absolute times, arrays in step. */
struct decoded_bundle {
	int has_cpu;
	uint32_t cpu;
	size_t ncomms;
	char comms[8][24];
	size_t n[13]; /* elements per array, by field number */
	uint64_t sw_ts[MAX_EVENTS];
	int64_t sw_state[MAX_EVENTS];
	uint32_t sw_pid[MAX_EVENTS], sw_comm[MAX_EVENTS], sw_prio[MAX_EVENTS];
	uint64_t wk_ts[MAX_EVENTS];
	uint32_t wk_pid[MAX_EVENTS], wk_flags[MAX_EVENTS], wk_cpu[MAX_EVENTS], wk_prio[MAX_EVENTS];
	size_t nfull;
	struct decoded_full full[MAX_FULL];
	uint64_t sequence_id; /* its packet's trusted_packet_sequence_id */
};

struct decoded {
	size_t nbundles;
	struct decoded_bundle b[4];
	char release[32];
	size_t nthreads;
	uint32_t tid[8], tgid[8];
	/* InternedData.kernel_symbols: iids and strings, the sequence and its flags. */
	size_t nsymbols;
	uint64_t symbol_iid[4];
	char symbol[4][32];
	uint64_t symbols_sequence_id, symbols_sequence_flags;
};

static void unpack(const struct pb_field *f, struct decoded_bundle *bu)
{
	struct pb_reader r;
	uint64_t v, acc = 0;

	pb_reader_init(&r, f->data, f->len);
	while (r.p < r.end && pb_read_varint(&r, &v) == 0 && bu->n[f->number] < MAX_EVENTS) {
		size_t i = bu->n[f->number]++;

		switch (f->number) {
		case HT_FTF_COMPACT_SWITCH_TIMESTAMP:
			acc += v;
			bu->sw_ts[i] = acc;
			break;
		case HT_FTF_COMPACT_SWITCH_PREV_STATE:
			bu->sw_state[i] = (int64_t)v;
			break;
		case HT_FTF_COMPACT_SWITCH_NEXT_PID:
			bu->sw_pid[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_SWITCH_NEXT_PRIO:
			bu->sw_prio[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_WAKING_PRIO:
			bu->wk_prio[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX:
			bu->sw_comm[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_WAKING_TIMESTAMP:
			acc += v;
			bu->wk_ts[i] = acc;
			break;
		case HT_FTF_COMPACT_WAKING_PID:
			bu->wk_pid[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_WAKING_TARGET_CPU:
			bu->wk_cpu[i] = (uint32_t)v;
			break;
		case HT_FTF_COMPACT_WAKING_COMMON_FLAGS:
			bu->wk_flags[i] = (uint32_t)v;
			break;
		}
	}
}

static void decode_full(const struct pb_reader *parent, const struct pb_field *ef,
			struct decoded_full *d)
{
	struct pb_reader r, m;
	struct pb_field f, g;

	CHECK(pb_enter(parent, ef, &r) == 0);
	while (pb_next(&r, &f) > 0) {
		if (f.number == HT_FTF_EVENT_TIMESTAMP)
			d->ts = f.value;
		else if (f.number == HT_FTF_EVENT_PID)
			d->pid = (uint32_t)f.value;
		if (f.number != HT_FTF_EVENT_TASK_NEWTASK &&
		    f.number != HT_FTF_EVENT_SCHED_BLOCKED_REASON)
			continue;
		d->field = f.number;
		CHECK(pb_enter(&r, &f, &m) == 0);
		while (pb_next(&m, &g) > 0) {
			/* pid is field 1 of both */
			if (g.number == 1)
				d->tid = (uint32_t)g.value;
			if (d->field == HT_FTF_EVENT_TASK_NEWTASK &&
			    g.number == HT_FTF_NEWTASK_COMM)
				snprintf(d->comm, sizeof(d->comm), "%.*s", (int)g.len,
					 (const char *)g.data);
			if (d->field == HT_FTF_EVENT_TASK_NEWTASK &&
			    g.number == HT_FTF_NEWTASK_CLONE_FLAGS)
				d->clone_flags = g.value;
			if (d->field == HT_FTF_EVENT_SCHED_BLOCKED_REASON &&
			    g.number == HT_FTF_BLOCKED_REASON_CALLER)
				d->caller = g.value;
			if (d->field == HT_FTF_EVENT_SCHED_BLOCKED_REASON &&
			    g.number == HT_FTF_BLOCKED_REASON_IO_WAIT)
				d->io_wait = g.value;
		}
	}
}

static void decode_bundle(const struct pb_reader *parent, const struct pb_field *bf,
			  struct decoded_bundle *bu)
{
	struct pb_reader r, cr;
	struct pb_field f, g;

	CHECK(pb_enter(parent, bf, &r) == 0);
	while (pb_next(&r, &f) > 0) {
		if (f.number == HT_FTF_BUNDLE_CPU) {
			bu->has_cpu = 1;
			bu->cpu = (uint32_t)f.value;
		}
		if (f.number == HT_FTF_BUNDLE_EVENT && bu->nfull < MAX_FULL)
			decode_full(&r, &f, &bu->full[bu->nfull++]);
		if (f.number != HT_FTF_BUNDLE_COMPACT_SCHED)
			continue;
		CHECK(pb_enter(&r, &f, &cr) == 0);
		while (pb_next(&cr, &g) > 0) {
			if (g.number == HT_FTF_COMPACT_INTERN_TABLE && bu->ncomms < 8)
				snprintf(bu->comms[bu->ncomms++], sizeof(bu->comms[0]), "%.*s",
					 (int)g.len, (const char *)g.data);
			else if (g.number <= HT_FTF_COMPACT_WAKING_COMMON_FLAGS)
				unpack(&g, bu);
		}
	}
}

static void decode_kernel_symbols(const struct pb_reader *p, const struct pb_field *g,
				  struct decoded *d, uint64_t seq_id, uint64_t seq_flags)
{
	struct pb_reader m, u;
	struct pb_field h, k;

	d->symbols_sequence_id = seq_id;
	d->symbols_sequence_flags = seq_flags;
	CHECK(pb_enter(p, g, &m) == 0);
	while (pb_next(&m, &h) > 0) {
		if (h.number != HT_FTF_INTERNED_KERNEL_SYMBOLS || d->nsymbols >= 4)
			continue;
		CHECK(pb_enter(&m, &h, &u) == 0);
		while (pb_next(&u, &k) > 0) {
			if (k.number == PFT_INTERNED_IID)
				d->symbol_iid[d->nsymbols] = k.value;
			if (k.number == PFT_INTERNED_STRING)
				snprintf(d->symbol[d->nsymbols], sizeof(d->symbol[0]), "%.*s",
					 (int)k.len, (const char *)k.data);
		}
		d->nsymbols++;
	}
}

static void decode(const struct pb_buf *out, struct decoded *d)
{
	struct pb_reader top, p, m, u;
	struct pb_field f, g, h, k;

	memset(d, 0, sizeof(*d));
	pb_reader_init(&top, out->data, out->len);
	while (pb_next(&top, &f) > 0) {
		uint64_t seq_id = 0, seq_flags = 0;

		CHECK(f.number == PFT_TRACE_PACKET);
		CHECK(pb_enter(&top, &f, &p) == 0);
		while (pb_next(&p, &g) > 0) {
			/* The writer puts a packet's sequence and flags before its content. */
			if (g.number == PFT_PACKET_SEQUENCE_ID)
				seq_id = g.value;
			if (g.number == PFT_PACKET_SEQUENCE_FLAGS)
				seq_flags = g.value;
			if (g.number == PFT_PACKET_INTERNED_DATA)
				decode_kernel_symbols(&p, &g, d, seq_id, seq_flags);
			if (g.number == HT_FTF_PACKET_FTRACE_EVENTS && d->nbundles < 4) {
				d->b[d->nbundles].sequence_id = seq_id;
				decode_bundle(&p, &g, &d->b[d->nbundles++]);
			}
			if (g.number == HT_FTF_PACKET_SYSTEM_INFO) {
				CHECK(pb_enter(&p, &g, &m) == 0);
				while (pb_next(&m, &h) > 0) {
					CHECK(pb_enter(&m, &h, &u) == 0);
					while (pb_next(&u, &k) > 0)
						if (k.number == HT_FTF_UTSNAME_RELEASE)
							snprintf(d->release, sizeof(d->release),
								 "%.*s", (int)k.len,
								 (const char *)k.data);
				}
			}
			if (g.number == HT_FTF_PACKET_PROCESS_TREE) {
				CHECK(pb_enter(&p, &g, &m) == 0);
				while (pb_next(&m, &h) > 0 && d->nthreads < 8) {
					CHECK(pb_enter(&m, &h, &u) == 0);
					while (pb_next(&u, &k) > 0) {
						if (k.number == HT_FTF_THREAD_TID)
							d->tid[d->nthreads] = (uint32_t)k.value;
						if (k.number == HT_FTF_THREAD_TGID)
							d->tgid[d->nthreads] = (uint32_t)k.value;
					}
					d->nthreads++;
				}
			}
		}
	}
}

static void write_window_blocked(uint64_t t0, uint64_t t1, struct ht_fr_window *w,
				 const struct ht_blocked_reason *blocked, size_t nblocked,
				 struct decoded *d)
{
	struct ht_sched_ftrace_window sw = {.t0 = t0,
					    .t1 = t1,
					    .w = w,
					    .comms = &comms,
					    .boottime_offset_ns = BOOT_OFFSET,
					    .kernel_release = "6.18.0-test",
					    .blocked = blocked,
					    .nblocked = nblocked};
	struct ht_sched_index idx;
	struct pb_buf out;

	pb_buf_init(&out);
	CHECK(ht_sched_index_build(w, &idx) == 0);
	sw.idx = &idx;
	CHECK(ht_sched_ftrace_write(&sw, &out) == 0);
	decode(&out, d);
	ht_sched_index_free(&idx);
	pb_buf_free(&out);
}

static void write_window(uint64_t t0, uint64_t t1, struct ht_fr_window *w, struct decoded *d)
{
	write_window_blocked(t0, t1, w, NULL, 0, d);
}

static void comms_offline(void)
{
	ht_comm_cache_free(&comms);
	ht_comm_cache_init(&comms, NULL);
	comms.offline = true;
	ht_comm_cache_seed(&comms, A, "victim");
	ht_comm_cache_seed(&comms, B, "waker");
	ht_comm_cache_seed(&comms, HOG, "hog");
	ht_comm_cache_seed_tgid(&comms, A, TGID);
	ht_comm_cache_seed_tgid(&comms, B, TGID);
	ht_comm_cache_seed_tgid(&comms, HOG, HOG);
	ht_comm_cache_seed(&comms, THREAD, "worker");
	ht_comm_cache_seed(&comms, CHILD, "child");
	ht_comm_cache_seed_tgid(&comms, THREAD, TGID);
	ht_comm_cache_seed_tgid(&comms, CHILD, CHILD);
}

static const struct decoded_bundle *bundle_of(const struct decoded *d, uint32_t cpu)
{
	for (size_t i = 0; i < d->nbundles; i++)
		if (d->b[i].has_cpu && d->b[i].cpu == cpu)
			return &d->b[i];
	return NULL;
}

static int arrays_equal(const struct decoded_bundle *bu)
{
	size_t sw = bu->n[HT_FTF_COMPACT_SWITCH_TIMESTAMP],
	       wk = bu->n[HT_FTF_COMPACT_WAKING_TIMESTAMP];

	return bu->n[HT_FTF_COMPACT_SWITCH_PREV_STATE] == sw &&
	       bu->n[HT_FTF_COMPACT_SWITCH_NEXT_PID] == sw &&
	       bu->n[HT_FTF_COMPACT_SWITCH_NEXT_PRIO] == sw &&
	       bu->n[HT_FTF_COMPACT_SWITCH_NEXT_COMM_INDEX] == sw &&
	       bu->n[HT_FTF_COMPACT_WAKING_PID] == wk &&
	       bu->n[HT_FTF_COMPACT_WAKING_TARGET_CPU] == wk &&
	       bu->n[HT_FTF_COMPACT_WAKING_PRIO] == wk &&
	       bu->n[HT_FTF_COMPACT_WAKING_COMM_INDEX] == wk &&
	       bu->n[HT_FTF_COMPACT_WAKING_COMMON_FLAGS] == wk;
}

/*
 * The events added so far, with ENTRY/VALID the switches before T0, written
 * and decoded into D; *C0, *C1 the bundles of CPUs 0 and 1, each with its
 * arrays in step. 0, or -1 (checked) when either bundle is missing.
 */
static int write_two_cpus(uint64_t t0, uint64_t t1, struct ht_fr_event *entry, bool *valid,
			  struct decoded *d, const struct decoded_bundle **c0,
			  const struct decoded_bundle **c1)
{
	struct ht_fr_window w = fx_fr_window(events, nevents, t0, t1);

	w.entry_switch = entry;
	w.entry_valid = valid;
	write_window(t0, t1, &w, d);
	*c0 = bundle_of(d, 0);
	*c1 = bundle_of(d, 1);
	CHECK(*c0 && *c1);
	if (!*c0 || !*c1)
		return -1;
	CHECK(arrays_equal(*c0) && arrays_equal(*c1));
	return 0;
}

/* As the kernel's __trace_sched_switch_state() reports them (6.x). */
TEST(prev_state_as_the_kernel_traces_it)
{
	CHECK(ht_ftrace_prev_state(0, 0) == 0);	       /* R: yielded */
	CHECK(ht_ftrace_prev_state(0x1, 1) == 0x100);  /* R+: preempted, whatever the state */
	CHECK(ht_ftrace_prev_state(0x1, 0) == 0x1);    /* S */
	CHECK(ht_ftrace_prev_state(0x2001, 0) == 0x1); /* S | TASK_FREEZABLE: S */
	CHECK(ht_ftrace_prev_state(0x2, 0) == 0x2);    /* D */
	CHECK(ht_ftrace_prev_state(0x402, 0) == 0x80); /* TASK_IDLE: I */
	CHECK(ht_ftrace_prev_state(0x1002, 0) == 0x2); /* TASK_RTLOCK_WAIT: D */
	CHECK(ht_ftrace_prev_state(0x8, 0) == 0x8);    /* t */
	CHECK(ht_ftrace_prev_state(0x40, 0) == 0x40);  /* P */
	CHECK(ht_ftrace_prev_state(0x80, 0) == 0x10);  /* TASK_DEAD: X */
	CHECK(ht_ftrace_prev_state(0x2102, 0) == 0x2); /* D | TASK_WAKEKILL | TASK_FREEZABLE */
}

TEST(each_cpu_starts_with_two_switches_then_its_own_in_boottime)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, false};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, A, 0, 0);
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x2001 /* S | FREEZABLE */);
	add(1, 1500, HT_FR_SWITCH, 0, B, 0, 0, 0x1);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_PREEMPT | HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	if (write_two_cpus(500, 6000, entry, valid, &d, &c0, &c1))
		return;
	CHECK(d.nbundles == 2);
	/* CPU 0: to swapper, to A (what ran at t0), then its own two, in BOOTTIME. */
	CHECK(c0->n[HT_FTF_COMPACT_SWITCH_TIMESTAMP] == 4);
	CHECK(c0->sw_pid[0] == 0 && c0->sw_pid[1] == A && c0->sw_pid[2] == HOG &&
	      c0->sw_pid[3] == A);
	CHECK(c0->sw_ts[0] == 498 + BOOT_OFFSET && c0->sw_ts[1] == 499 + BOOT_OFFSET);
	CHECK(c0->sw_ts[2] == 1000 + BOOT_OFFSET && c0->sw_ts[3] == 5000 + BOOT_OFFSET);
	CHECK(c0->sw_state[2] == 0x1 && c0->sw_state[3] == 0x100);
	CHECK(!strcmp(c0->comms[c0->sw_comm[0]], "swapper/0"));
	CHECK(!strcmp(c0->comms[c0->sw_comm[2]], "hog"));
	CHECK(!strcmp(c0->comms[c0->sw_comm[3]], "victim"));
	/* CPU 1: nothing known at t0: the task its first switch took off ran then. */
	CHECK(c1->n[HT_FTF_COMPACT_SWITCH_TIMESTAMP] == 3 && c1->sw_pid[1] == B &&
	      c1->sw_pid[2] == 0);
	CHECK(!strcmp(d.release, "6.18.0-test"));
	CHECK(d.nthreads == 3);
	for (size_t i = 0; i < d.nthreads; i++)
		CHECK(d.tgid[i] == (d.tid[i] == HOG ? HOG : TGID));
}

/*
 * B on CPU 1 woke A, but the recorded time (A's run-queue clock) lies a
 * little after B left CPU 1: the waking moves into B's time there, in CPU
 * 1's bundle, after A's switch-out and before its switch-in.
 */
TEST(a_waking_goes_where_and_when_its_waker_ran)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, A, 0, 0);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	add(1, 3000, HT_FR_SWITCH, 0, B, 0, 0, 0x1);
	/* Recorded on CPU 0 at 3005, raised by B on CPU 1 (which left at 3000). */
	add(0, 3005, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	/* A timer woke A again later, from CPU 0's interrupt, just after its switch-in time. */
	add(0, 5500, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	add(0, 7000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 7010, HT_FR_WAKEUP, HT_FRF_TARGET | HT_FRF_FROM_TIMER, A, 0, 0, HT_WAKE_TIMER);
	if (write_two_cpus(500, 8000, entry, valid, &d, &c0, &c1))
		return;
	CHECK(c1->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 1);
	CHECK(c1->wk_pid[0] == A && c1->wk_cpu[0] == 0 && c1->wk_flags[0] == 0);
	CHECK(c1->wk_ts[0] == 2999 + BOOT_OFFSET);
	CHECK(c0->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 1);
	CHECK(c0->wk_pid[0] == A && c0->wk_flags[0] == HT_FTRACE_FLAG_HARDIRQ);
	CHECK(c0->wk_ts[0] == 6999 + BOOT_OFFSET);
	/* Every waking after the CPU's two synthetic switches. */
	CHECK(c0->wk_ts[0] > c0->sw_ts[1] && c1->wk_ts[0] > c1->sw_ts[1]);
}

/*
 * A record's time is the enqueue; its waker raised it earlier, by the delay
 * the record carries (µs). The waking is written then, in the waker's time,
 * and never before the window: a waking raised before the window began is
 * written at its start.
 */
TEST(a_waking_is_written_when_it_was_raised_never_before_the_window)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;
	uint64_t from_cpu1 = HT_WAKE_TASK | 1 << 8;

	comms_offline();
	nevents = 0;
	/* A asleep since before the window; B runs on CPU 1 throughout. */
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, A, HOG, 0, 0x1);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 0, 0);
	/* Enqueued at 10500, raised 3 us before: 7500, before the window's 10000. */
	add(0, 10500, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0,
	    from_cpu1 | (uint64_t)3 << HT_FR_WAKE_DELAY_SHIFT);
	add(0, 11000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	add(0, 11500, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	/* Enqueued at 14000, raised 2 us before, at 12000. */
	add(0, 14000, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0,
	    from_cpu1 | (uint64_t)2 << HT_FR_WAKE_DELAY_SHIFT);
	add(0, 15000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	if (write_two_cpus(10000, 20000, entry, valid, &d, &c0, &c1))
		return;
	CHECK(c1->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 2);
	CHECK(c1->wk_pid[0] == A && c1->wk_ts[0] == 10000 + BOOT_OFFSET);
	CHECK(c1->wk_pid[1] == A && c1->wk_ts[1] == 12000 + BOOT_OFFSET);
	/* The synthetic switches still come first, 2 ns before the window. */
	CHECK(c1->sw_ts[0] == 9998 + BOOT_OFFSET && c1->sw_ts[1] == 9999 + BOOT_OFFSET);
}

/*
 * A timer's wakeup raised on a CPU the recorder never saw switch (idle since
 * the recording began): that CPU still has its bundle, on its idle task, so
 * that Perfetto keeps the waking rather than the wakee's sleep running on.
 */
TEST(an_interrupts_waking_on_a_cpu_never_seen_switching_is_kept)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, false};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, HOG, 120, 0);
	add(0, 1000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 120, 0);
	add(0, 2000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 120, 0x1);
	/* CPU 1's timer wakes A, queued on CPU 0. */
	add(0, 3000, HT_FR_WAKEUP, HT_FRF_TARGET | HT_FRF_FROM_TIMER, A, 0, 0,
	    HT_WAKE_TIMER | 1 << 8);
	add(0, 4000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 120, 0);
	if (write_two_cpus(500, 5000, entry, valid, &d, &c0, &c1))
		return;
	CHECK(c1->n[HT_FTF_COMPACT_SWITCH_TIMESTAMP] == 2);
	CHECK(c1->sw_pid[0] == 0 && c1->sw_pid[1] == 0);
	CHECK(c1->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 1);
	CHECK(c1->wk_pid[0] == A && c1->wk_flags[0] == HT_FTRACE_FLAG_HARDIRQ);
	CHECK(c1->wk_ts[0] > c1->sw_ts[1]);
}

/*
 * Wakeups of tasks that are no target are native too, each task with the
 * prio its records carry; one whose waker the monitor did not learn
 * (HT_WAKE_NONE) is left out rather than given to whatever ran where it was
 * recorded.
 */
TEST(every_tasks_wakings_with_their_prios)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;
	uint64_t rt = (uint64_t)98 << HT_FR_WAKE_PRIO_SHIFT;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, HOG, 120, 0);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 110, 0);
	add(0, 1000, HT_FR_SWITCH, 0, HOG, 0, 120, 0x1);
	/* B (nice -10) on CPU 1 wakes HOG, no target, an RT task of prio 98: recorded on CPU 0. */
	add(0, 2000, HT_FR_WAKEUP, 0, HOG, B, 0, HT_WAKE_TASK | 1 << 8 | rt);
	add(0, 2500, HT_FR_SWITCH, 0, 0, HOG, 98, 0);
	add(0, 3000, HT_FR_SWITCH, 0, HOG, 0, 120, 0x1);
	/* A wakeup of HOG whose waker is unknown: no waking. */
	add(0, 3500, HT_FR_WAKEUP, 0, HOG, 0, 0, HT_WAKE_NONE | rt);
	add(0, 4000, HT_FR_SWITCH, 0, 0, HOG, 98, 0);
	/* Nor of a target's whose waker is unknown (its sched_waking came before it was one). */
	add(1, 4100, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_NONE);
	add(0, 4500, HT_FR_SWITCH, 0, HOG, 0, 120, 0x1);
	/* Woken by the idle task "in task context": an IPI's callback, interrupt context. */
	add(0, 4800, HT_FR_WAKEUP, 0, HOG, 0, 0, HT_WAKE_TASK | 1 << 8 | rt);
	add(0, 5000, HT_FR_SWITCH, 0, 0, HOG, 98, 0);
	add(0, 5200, HT_FR_SWITCH, 0, HOG, 0, 120, 0x1);
	/* By a task that never runs on CPU 1 in the window (its ring no longer reaches): none. */
	add(0, 5400, HT_FR_WAKEUP, 0, HOG, 777, 0, HT_WAKE_TASK | 1 << 8 | rt);
	add(0, 5600, HT_FR_SWITCH, 0, 0, HOG, 98, 0);
	if (write_two_cpus(500, 6000, entry, valid, &d, &c0, &c1))
		return;
	/* Synthetic: swapper at 120, the running task at its entry switch's prio. */
	CHECK(c0->sw_prio[0] == 120 && c0->sw_prio[1] == 120 && c1->sw_prio[1] == 110);
	CHECK(c0->n[HT_FTF_COMPACT_SWITCH_TIMESTAMP] == 10);
	CHECK(c0->sw_pid[3] == HOG && c0->sw_prio[3] == 98);
	CHECK(c0->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 0);
	CHECK(c1->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 2);
	CHECK(c1->wk_pid[0] == HOG && c1->wk_prio[0] == 98 && c1->wk_ts[0] == 2000 + BOOT_OFFSET);
	CHECK(c1->wk_flags[0] == 0);
	CHECK(c1->wk_pid[1] == HOG && c1->wk_flags[1] == HT_FTRACE_FLAG_HARDIRQ);
}

/* The reader of `hybtrace report` reads a dump with the native packets as it reads one without. */
TEST(the_reader_passes_over_the_native_packets)
{
	struct timeline *rich = fx_make_rich(), *tl;
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	struct ht_sched_ftrace_window sw = {.t0 = 500,
					    .t1 = 6000,
					    .comms = &comms,
					    .boottime_offset_ns = BOOT_OFFSET,
					    .kernel_release = "6.18.0-test"};
	struct ht_sched_index idx;
	struct ht_fr_window w;
	struct pftr_stats stats;
	struct pb_buf b;
	char err[256] = "";
	void *data = NULL;
	size_t len = 0;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, A, 0, 0);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 0, 0x1);
	add(0, 3005, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
	w = fx_fr_window(events, nevents, 500, 6000);
	w.entry_switch = entry;
	w.entry_valid = valid;
	CHECK(!pftw_write_mem(rich, &data, &len, err, sizeof(err)));
	pb_buf_init(&b);
	pb_raw(&b, data, len);
	CHECK(ht_sched_index_build(&w, &idx) == 0);
	sw.w = &w;
	sw.idx = &idx;
	CHECK(ht_sched_ftrace_write(&sw, &b) == 0);
	CHECK(b.len > len);
	tl = pftr_read_mem(b.data, b.len, &stats, err, sizeof(err));
	CHECK(tl && fx_same(rich, tl));
	/* system_info, process_tree, a bundle per CPU */
	CHECK_EQ_U64(stats.skipped_packets, 4);
	ht_sched_index_free(&idx);
	free(data);
	pb_buf_free(&b);
	tl_free(tl);
	tl_free(rich);
}

/*
 * B starts a thread and forks a process on CPU 1: the thread a task_newtask
 * in CPU 1's bundle, from B, with its comm and CLONE_THREAD, before anything
 * else of its own (its waking, its time from the run-queue clock, lies
 * before the fork's), and not in the process tree, where Perfetto would
 * start a second thread of its tid; the process in the process tree only
 * (Perfetto's process of a task_newtask takes no name from the dump).
 */
TEST(forks_are_task_newtask_events_before_the_child_is_seen)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;
	struct ht_fr_window w;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, A, 0, 0);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(1, 1000, HT_FR_WAKEUP_NEW, HT_FRF_TARGET, THREAD, B, 0, HT_WAKE_TASK | 1 << 8);
	add(1, 1010, HT_FR_FORK, HT_FRF_TARGET, B, THREAD, 0, TGID);
	add(0, 1500, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, THREAD, 120, 0x1);
	add(1, 2000, HT_FR_FORK, HT_FRF_TARGET, B, CHILD, 0, CHILD);
	add(1, 3000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, B, CHILD, 120, 0x1);
	w = fx_fr_window(events, nevents, 500, 4000);
	w.entry_switch = entry;
	w.entry_valid = valid;
	write_window(500, 4000, &w, &d);
	c0 = bundle_of(&d, 0);
	c1 = bundle_of(&d, 1);
	CHECK(c0 && c1);
	if (!c0 || !c1)
		return;
	CHECK(arrays_equal(c0) && arrays_equal(c1));
	CHECK(c0->nfull == 0 && c1->nfull == 1);
	CHECK(c1->full[0].field == HT_FTF_EVENT_TASK_NEWTASK && c1->full[0].pid == B &&
	      c1->full[0].tid == THREAD && !strcmp(c1->full[0].comm, "worker") &&
	      c1->full[0].clone_flags == HT_CLONE_THREAD);
	CHECK(c1->n[HT_FTF_COMPACT_WAKING_TIMESTAMP] == 1 && c1->wk_pid[0] == THREAD);
	CHECK(c1->full[0].ts < c1->wk_ts[0]);
	/* After the CPU's two synthetic switches. */
	CHECK(c1->full[0].ts > c1->sw_ts[1]);
	CHECK(d.nthreads == 3);
	for (size_t i = 0; i < d.nthreads; i++)
		CHECK(d.tid[i] != THREAD && (d.tid[i] != CHILD || d.tgid[i] == CHILD));
}

/*
 * A's sleep from 1000 on CPU 0 blocked in futex_wait_queue: a
 * sched_blocked_reason in CPU 0's bundle 1 ns after the switch-out (Perfetto
 * gives it to the thread's last blocked state), as the task that runs there
 * then, its caller the iid of the kernel symbol interned on the bundles'
 * sequence by a packet that clears that sequence's state. A switch-out
 * that leaves A runnable gets none.
 */
TEST(a_blocked_function_follows_its_sleeps_switch_out)
{
	struct ht_fr_event entry[2];
	bool valid[2] = {true, true};
	const struct ht_blocked_reason blocked[2] = {
		{.tid = A, .switch_out_ns = 1002, .function = "futex_wait_queue"},
		{.tid = A, .switch_out_ns = 6000, .function = "do_epoll_wait", .io_wait = true},
	};
	const struct decoded_bundle *c0, *c1;
	static struct decoded d;
	struct ht_fr_window w;

	comms_offline();
	nevents = 0;
	entry[0] = fx_fr_event(0, 100, HT_FR_SWITCH, 0, 0, A, 0, 0);
	entry[1] = fx_fr_event(1, 100, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(0, 1000, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, HOG, 120, 0x1);
	add(1, 3000, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 120, 0);
	add(0, 6000, HT_FR_SWITCH, HT_FRF_PREV_TARGET | HT_FRF_PREEMPT, A, HOG, 120, 0x1);
	w = fx_fr_window(events, nevents, 500, 8000);
	w.entry_switch = entry;
	w.entry_valid = valid;
	write_window_blocked(500, 8000, &w, blocked, 2, &d);
	c0 = bundle_of(&d, 0);
	c1 = bundle_of(&d, 1);
	CHECK(c0 && c1);
	if (!c0 || !c1)
		return;
	CHECK(arrays_equal(c0));
	CHECK(c0->nfull == 1 && c1->nfull == 0);
	CHECK(c0->full[0].field == HT_FTF_EVENT_SCHED_BLOCKED_REASON);
	CHECK(c0->full[0].ts == 1001 + BOOT_OFFSET && c0->full[0].pid == HOG &&
	      c0->full[0].tid == A && c0->full[0].io_wait == 0);
	CHECK(d.nsymbols == 1 && d.symbol_iid[0] == c0->full[0].caller &&
	      !strcmp(d.symbol[0], "futex_wait_queue"));
	CHECK(d.symbols_sequence_id == HT_FTRACE_SEQUENCE_ID &&
	      (d.symbols_sequence_flags & PFT_SEQ_INCREMENTAL_STATE_CLEARED));
	CHECK(c0->sequence_id == HT_FTRACE_SEQUENCE_ID);
	/* Its switch-out, then the blocked reason, before its switch-in at 5000. */
	CHECK(c0->sw_ts[2] == 1000 + BOOT_OFFSET && c0->full[0].ts < c0->sw_ts[3]);
}

/*
 * The first frame of the stack a thread slept on that is no scheduler
 * function (the kernel's __sched text, or by name without its markers),
 * and whether it passed through io_schedule.
 */
TEST(the_blocked_function_skips_the_scheduler)
{
	const uint64_t starts[] = {0x1000, 0x1000, 0x1100, 0x1200, 0x1300,
				   0x1400, 0x2000, 0x2100, 0x2200};
	const char *const names[] = {"__sched_text_start", "__schedule",
				     "schedule",	   "io_schedule",
				     "schedule_timeout",   "__sched_text_end",
				     "futex_wait_queue",   "folio_wait_bit_common",
				     "do_syscall_64"};
	const uint64_t futex[] = {0x1010, 0x1110, 0x1310, 0x2010, 0x2210};
	const uint64_t io[] = {0x1010, 0x1110, 0x1210, 0x2110, 0x2210};
	const uint64_t unknown[] = {0x1010, 0x10};
	struct ht_ksyms *k = ht_ksyms_from_list(starts, names, 9);
	struct ht_ksyms *bare = ht_ksyms_from_list(starts + 1, names + 1, 4);
	char fn[64];
	bool io_wait = true;

	CHECK(k && bare);
	if (!k || !bare)
		return;
	CHECK(ht_blocked_function(futex, 5, k, fn, sizeof(fn), &io_wait) &&
	      !strcmp(fn, "futex_wait_queue") && !io_wait);
	CHECK(ht_blocked_function(io, 5, k, fn, sizeof(fn), &io_wait) &&
	      !strcmp(fn, "folio_wait_bit_common") && io_wait);
	CHECK(!ht_blocked_function(unknown, 2, k, fn, sizeof(fn), &io_wait));
	/* Without the section markers, by name: __schedule, schedule and io_schedule. */
	fn[0] = 0;
	CHECK(!ht_blocked_function(io, 3, bare, fn, sizeof(fn), &io_wait) && io_wait);
	ht_ksyms_free(k);
	ht_ksyms_free(bare);
}
