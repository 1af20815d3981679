// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <alloca.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/log.h"
#include "dump/builder_guard.h"

#define GUARD_NAME "hybtrace-guard"
/* Its stack: small, and all of it touched at the start. */
#define GUARD_STACK_BYTES (64 * 1024)
#define GUARD_STACK_TOUCH (32 * 1024)

/*
 * The futex word is the generation, moved by whoever wakes the guard: a wake
 * between the guard's last look and its wait makes the wait return at once.
 */
static void wake_guard(struct ht_guard_idle *w)
{
	__atomic_add_fetch(&w->gen, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &w->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ht_guard_idle_enter(struct ht_guard_idle *w)
{
	__atomic_store_n(&w->idle, 1, __ATOMIC_SEQ_CST);
}

void ht_guard_idle_leave(struct ht_guard_idle *w)
{
	__atomic_store_n(&w->idle, 0, __ATOMIC_SEQ_CST);
	/* One syscall per wait of the builder, and only while the guard sleeps. */
	if (__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST))
		wake_guard(w);
}

void ht_guard_watch_begin(struct ht_guard_idle *w)
{
	__atomic_add_fetch(&w->watch, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST))
		wake_guard(w);
}

void ht_guard_watch_end(struct ht_guard_idle *w)
{
	__atomic_sub_fetch(&w->watch, 1, __ATOMIC_SEQ_CST);
}

/* Whether the guard may sleep: the builder waits for work and nothing is watched. */
static bool may_sleep(const struct ht_guard_idle *w)
{
	return __atomic_load_n(&w->idle, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&w->watch, __ATOMIC_SEQ_CST);
}

static bool stopping(const struct ht_builder_guard *g)
{
	return __atomic_load_n(&g->stop, __ATOMIC_SEQ_CST);
}

/* Until the builder leaves its wait, a watch begins or the guard is stopped. */
static void sleep_while_idle(struct ht_builder_guard *g)
{
	struct ht_guard_idle *w = g->builder;
	uint32_t gen = __atomic_load_n(&w->gen, __ATOMIC_SEQ_CST);

	__atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
	if (may_sleep(w) && !stopping(g))
		syscall(SYS_futex, &w->gen, FUTEX_WAIT_PRIVATE, gen, NULL, NULL, 0);
	__atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
}

/* What the guard saw of the event loop at a tick. */
struct look {
	bool valid, busy;
	uint32_t turns;
	uint64_t cpu_ns;
};

static struct look look_at_loop(const struct ht_builder_guard *g)
{
	struct look l = { .valid = true };

	l.busy = __atomic_load_n(&g->beat->busy, __ATOMIC_ACQUIRE);
	l.turns = __atomic_load_n(&g->beat->turns, __ATOMIC_RELAXED);
	l.cpu_ns = ht_clock_ns(g->loop_clock);
	return l;
}

/*
 * Stalled: busy in the turn it was in at the last look, having used under a
 * quarter of the tick since. A turn that computes is no stall of the
 * builder's making: raising the builder then would cost the CPU it shares
 * for nothing.
 */
static bool stalled(const struct look *last, const struct look *now, uint64_t tick_ns)
{
	return last->valid && now->busy && last->busy && now->turns == last->turns &&
	       now->cpu_ns - last->cpu_ns < tick_ns / 4;
}

/*
 * Whether the event loop waits for its CPU (runnable: 'R' in its stat),
 * where a turn without CPU time is the machine's load, not a wait on the
 * builder (blocked, 'D' or 'S'; on PREEMPT_RT a sleeping spinlock's wait
 * reads 'D'). An open file read at its start: no open, no allocation.
 */
static bool loop_waits_for_cpu(const struct ht_builder_guard *g)
{
	char stat[512];
	const char *paren;
	ssize_t n;

	if (g->loop_stat_fd < 0)
		return false;
	n = pread(g->loop_stat_fd, stat, sizeof(stat) - 1, 0);
	if (n <= 0)
		return false;
	stat[n] = '\0';
	/* "tid (comm) S ...": the name may hold spaces and parentheses. */
	paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' && paren[2] == 'R';
}

/* Back to what the guard was at its start. */
static void guard_unrushed(struct ht_builder_guard *g)
{
	sched_setscheduler(0, g->own_policy, &g->own_param);
}

/*
 * The builder's turn at SCHED_FIFO, the guard above it meanwhile: it ends
 * when the event loop, stalled at AT, runs again (its turn ended, or it used
 * some CPU) or after HT_GUARD_RUSH_NS. A builder that holds up the event
 * loop gets its CPU at once, whatever runs there, and leaves its section
 * within microseconds. Returns whether the builder had that turn.
 */
static bool rush(struct ht_builder_guard *g, const struct look *at)
{
	struct sched_param above = { .sched_priority = HT_GUARD_RUSH_PRIO };
	bool rushed;

	if (!g->rush || g->cannot_rush)
		return false;
	if (sched_setscheduler(0, SCHED_FIFO, &above)) {
		g->cannot_rush = true;
		return false;
	}
	rushed = g->rush(g->ctx);
	for (uint64_t waited = 0; rushed && waited < HT_GUARD_RUSH_NS;
	     waited += HT_GUARD_RUSH_LOOK_NS) {
		struct look now;

		ht_sleep_ns(HT_GUARD_RUSH_LOOK_NS);
		now = look_at_loop(g);
		if (!now.busy || now.turns != at->turns ||
		    now.cpu_ns - at->cpu_ns >= HT_GUARD_RUSH_LOOK_NS / 4)
			break;
	}
	if (rushed) {
		g->end_rush(g->ctx);
		__atomic_add_fetch(&g->rushes, 1, __ATOMIC_RELAXED);
	}
	guard_unrushed(g);
	return rushed;
}

/* The guard's whole path once, and its stack's pages: none faults in later. */
__attribute__((noinline)) static void touch_path(struct ht_builder_guard *g)
{
	volatile char *stack = alloca(GUARD_STACK_TOUCH);

	memset((char *)stack, 0, GUARD_STACK_TOUCH);
	(void)look_at_loop(g);
	(void)loop_waits_for_cpu(g);
	ht_sleep_ns(1);
	g->raise(g->ctx);
	g->lower(g->ctx);
	/* The end of a turn the builder does not have: nothing changes but its path is in. */
	if (g->end_rush)
		g->end_rush(g->ctx);
	guard_unrushed(g);
	syscall(SYS_futex, &g->builder->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *guard_main(void *arg)
{
	struct ht_builder_guard *g = arg;
	uint64_t tick_ns = g->tick_ns ? g->tick_ns : HT_GUARD_TICK_NS;
	struct look last = { 0 };
	bool holding = false;

	prctl(PR_SET_NAME, GUARD_NAME);
	__atomic_store_n(&g->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	touch_path(g);
	while (!stopping(g)) {
		struct look now;
		bool stall;

		if (!holding && may_sleep(g->builder)) {
			sleep_while_idle(g);
			/* Awake: a stall is judged from here, one tick on. */
			last = look_at_loop(g);
			continue;
		}
		ht_sleep_ns(tick_ns);
		now = look_at_loop(g);
		stall = stalled(&last, &now, tick_ns) && !loop_waits_for_cpu(g);
		if (stall && !holding) {
			g->raise(g->ctx);
			holding = true;
			__atomic_add_fetch(&g->lifts, 1, __ATOMIC_RELAXED);
		} else if (holding && (!now.busy || now.turns != last.turns)) {
			g->lower(g->ctx);
			holding = false;
		}
		/* At each tick of a stall; the next is judged from after the turn. */
		if (stall && rush(g, &now))
			now = look_at_loop(g);
		last = now;
	}
	if (holding)
		g->lower(g->ctx);
	return NULL;
}

static void close_loop_stat(struct ht_builder_guard *g)
{
	if (g->loop_stat_fd >= 0)
		close(g->loop_stat_fd);
	g->loop_stat_fd = -1;
}

int ht_builder_guard_start(struct ht_builder_guard *g)
{
	pthread_attr_t attr;
	int err;

	g->stop = 0;
	g->tid = 0;
	g->lifts = g->rushes = 0;
	g->cannot_rush = false;
	/* The creator's, which the guard inherits. */
	g->own_policy = sched_getscheduler(0);
	if (g->own_policy < 0 || sched_getparam(0, &g->own_param)) {
		g->own_policy = SCHED_OTHER;
		g->own_param = (struct sched_param){ 0 };
	}
	/* Already real-time, the builder with it: a turn at priority 1 would lower it. */
	if (g->own_policy != SCHED_OTHER && g->own_policy != SCHED_BATCH)
		g->cannot_rush = true;
	err = pthread_getcpuclockid(pthread_self(), &g->loop_clock);
	if (err)
		return ht_fail("cannot read the event loop's CPU clock: %s", strerror(err));
	/* Opened here, by the event loop: the guard itself opens nothing. */
	g->loop_stat_fd = open("/proc/thread-self/stat", O_RDONLY | O_CLOEXEC);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, GUARD_STACK_BYTES);
	err = pthread_create(&g->thread, &attr, guard_main, g);
	pthread_attr_destroy(&attr);
	if (err) {
		close_loop_stat(g);
		return ht_fail("cannot start the dump builder's guard: %s", strerror(err));
	}
	g->started = true;
	return 0;
}

void ht_builder_guard_stop(struct ht_builder_guard *g)
{
	if (!g->started)
		return;
	__atomic_store_n(&g->stop, 1, __ATOMIC_SEQ_CST);
	wake_guard(g->builder);
	pthread_join(g->thread, NULL);
	g->started = false;
	close_loop_stat(g);
}

uint64_t ht_builder_guard_lifts(const struct ht_builder_guard *g)
{
	return __atomic_load_n(&g->lifts, __ATOMIC_RELAXED);
}

int ht_builder_guard_tid(const struct ht_builder_guard *g)
{
	return g->started ? __atomic_load_n(&g->tid, __ATOMIC_ACQUIRE) : 0;
}

uint64_t ht_builder_guard_rushes(const struct ht_builder_guard *g)
{
	return __atomic_load_n(&g->rushes, __ATOMIC_RELAXED);
}
