// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Wait chains' hard cases (tests/integration/test_wait_chain_cases.py), each
 * with its ground truth.
 *
 *  - convoy: a lock convoy of four threads ("cv_a", "cv_b", "cv_c" and
 *    "cv_d") on one futex word, a hand-off lock: the word holds the number
 *    of the turn; the holder of turn K spins HOLD_MS, sets the word to K + 1
 *    and wakes the holder of that turn alone (FUTEX_WAKE_BITSET, one bit per
 *    thread); the others sleep in FUTEX_WAIT_BITSET until the word is their
 *    turn's. The turns of each round go D, A, B, C, A, B, C: D waits six
 *    holds, and the lock went C -> A -> B -> C -> D in that wait: D's waker
 *    is C, whose waker is B, whose waker is A, whose waker is C again, a
 *    cycle. The threads are SCHED_BATCH: the holder of the next turn, woken,
 *    does not preempt the releaser before it waits again. Each thread keeps
 *    its turns in memory (no log, no lock, while the convoy runs); the main
 *    thread logs them once it is over: "turn" (turn, holder and holder_tid,
 *    asked_ns: before it waited for the turn, slept: whether its futex wait
 *    slept, got_ns: once it holds the lock, release_ns / woke_ns: before and
 *    after its release's wake, next_tid: the next turn's holder).
 *  - idle: the main thread ("idle_target") writes "go" to a pipe and reads
 *    another (the only read that sleeps: the waker waits for "go" in poll),
 *    until the waker ("idle_waker", pinned to CPU 1, where nothing else of
 *    this process runs) has seen it asleep, slept SLEEP_MS in
 *    clock_nanosleep, a timer on a CPU with nothing else to run, and
 *    written it a byte. Logs: "target_wait_start"/"target_wait_end",
 *    "waker_sleep_start"/"waker_sleep_end" (waker, before and after its
 *    sleep; "cpu": where it woke).
 *  - sem: three tasks in two processes. The main thread ("sem_victim")
 *    writes "go" to a pipe and waits in semtimedop on a SysV semaphore; a
 *    forked process ("sem_timer") waits until it sees the victim asleep,
 *    sleeps SLEEP_MS in clock_nanosleep and writes a byte to a thread of the
 *    victim's process ("sem_poster"), which was blocked in read and now
 *    posts the semaphore: the victim's waker is the poster, the poster's
 *    the timer process, whose sleep a timer ended. Logs:
 *    "victim_wait_start"/"victim_wait_end", "timer_sleep_start"/
 *    "timer_sleep_end", "post" (the poster, before it posts).
 *
 * Each mode logs "cases_start" first, with the tids of its tasks, and runs
 * ROUNDS rounds, or until $HT_STOP_FILE exists if named (workload.h; the
 * convoy then stops at D's next turn). In idle and sem, the waiting thread
 * pauses 40 ms between rounds in 1 ms sleeps: no off-CPU wait of its own to
 * speak of.
 * usage: chain_cases convoy [ROUNDS [HOLD_MS]]
 *        chain_cases idle|sem [ROUNDS [SLEEP_MS]]
 */
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include "workload.h"

#define PAUSE_NS      40000000ULL
#define PAUSE_STEP_NS 1000000ULL

static long rounds;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void pause_between_rounds(void)
{
	uint64_t end = wl_now_ns() + PAUSE_NS;

	while (wl_now_ns() < end)
		wl_sleep_ns(PAUSE_STEP_NS);
}

static void wait_asleep(int tid)
{
	while (!wl_proc_sleeping(tid))
		wl_sleep_ns(50000);
}

/* ---- convoy ---- */

#define CONVOY_THREADS 4
#define ROUND_TURNS    7
/* Whose each turn of a round is: D, A, B, C, A, B, C (A = 0 ... D = 3). */
static const int round_order[ROUND_TURNS] = {3, 0, 1, 2, 0, 1, 2};
#define CONVOY_D 3
/* The word before the first turn, and once the convoy is over. */
#define NO_TURN	    UINT32_MAX
#define CONVOY_OVER (UINT32_MAX - 1)
/* Rounds at most, until $HT_STOP_FILE too: the turns are kept in memory. */
#define MAX_ROUNDS 2000

struct turn {
	long turn;
	int slept;
	uint64_t asked_ns, got_ns, release_ns, woke_ns;
};

static uint32_t convoy_word;
static uint64_t hold_ns;
static long max_turns;
static int convoy_tids[CONVOY_THREADS];
static volatile int convoy_ready;
static const char *const convoy_names[CONVOY_THREADS] = {"cv_a", "cv_b", "cv_c", "cv_d"};
static struct turn *convoy_turns[CONVOY_THREADS];
static long convoy_count[CONVOY_THREADS];

static int holder_of(long turn)
{
	return round_order[turn % ROUND_TURNS];
}

static long futex(uint32_t *word, int op, uint32_t val, uint32_t bits)
{
	return syscall(SYS_futex, word, op, val, NULL, NULL, bits);
}

/* Wait until the word says TURN: whether the wait slept; -1 once the convoy is over. */
static int wait_turn(long turn, int me)
{
	int slept = 0;

	for (;;) {
		uint32_t now = __atomic_load_n(&convoy_word, __ATOMIC_ACQUIRE);

		if (now == (uint32_t)turn)
			return slept;
		if (now == CONVOY_OVER)
			return -1;
		if (!futex(&convoy_word, FUTEX_WAIT_BITSET_PRIVATE, now, 1u << me))
			slept = 1;
		else if (errno != EAGAIN && errno != EINTR)
			die("futex wait");
	}
}

/* D, at the first turn of a round: whether to stop there (ROUNDS done, or asked to). */
static int convoy_done(long turn)
{
	return turn / ROUND_TURNS >= MAX_ROUNDS || !wl_more_rounds(turn / ROUND_TURNS, rounds);
}

static void *convoy_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct turn *mine = convoy_turns[me];
	struct sched_param none = {0};
	long n = 0;

	prctl(PR_SET_NAME, convoy_names[me]);
	/*
	 * SCHED_BATCH: a thread woken does not preempt its waker, which goes on
	 * to wait for its own next turn at once, as the script needs.
	 */
	if (sched_setscheduler(0, SCHED_BATCH, &none))
		die("sched_setscheduler(SCHED_BATCH)");
	convoy_tids[me] = wl_gettid();
	__atomic_add_fetch(&convoy_ready, 1, __ATOMIC_SEQ_CST);
	for (long turn = 0; turn < max_turns; turn++) {
		struct turn *t = &mine[n];
		int next;

		if (holder_of(turn) != me)
			continue;
		t->turn = turn;
		t->asked_ns = wl_now_ns();
		t->slept = wait_turn(turn, me);
		if (t->slept < 0)
			break;
		t->got_ns = wl_now_ns();
		if (me == CONVOY_D && convoy_done(turn)) {
			/* The end: everyone still waiting leaves. */
			__atomic_store_n(&convoy_word, CONVOY_OVER, __ATOMIC_RELEASE);
			futex(&convoy_word, FUTEX_WAKE_BITSET_PRIVATE, INT32_MAX,
			      FUTEX_BITSET_MATCH_ANY);
			break;
		}
		wl_spin_until(t->got_ns + hold_ns);
		next = holder_of(turn + 1);
		t->release_ns = wl_now_ns();
		__atomic_store_n(&convoy_word, (uint32_t)(turn + 1), __ATOMIC_RELEASE);
		if (futex(&convoy_word, FUTEX_WAKE_BITSET_PRIVATE, 1, 1u << next) < 0)
			die("futex wake");
		t->woke_ns = wl_now_ns();
		n++;
	}
	convoy_count[me] = n;
	return NULL;
}

/* Every thread's turns, once the convoy is over: no log, no lock while it runs. */
static void log_turns(void)
{
	for (int me = 0; me < CONVOY_THREADS; me++) {
		for (long i = 0; i < convoy_count[me]; i++) {
			const struct turn *t = &convoy_turns[me][i];

			wl_log("turn",
			       "\"turn\":%ld,\"holder\":\"%s\",\"holder_tid\":%d,\"slept\":%d,"
			       "\"asked_ns\":%llu,\"got_ns\":%llu,\"release_ns\":%llu,"
			       "\"woke_ns\":%llu,\"next_tid\":%d",
			       t->turn, convoy_names[me], convoy_tids[me], t->slept,
			       (unsigned long long)t->asked_ns, (unsigned long long)t->got_ns,
			       (unsigned long long)t->release_ns, (unsigned long long)t->woke_ns,
			       convoy_tids[holder_of(t->turn + 1)]);
		}
	}
}

static int run_convoy(long hold_ms)
{
	pthread_t threads[CONVOY_THREADS];

	hold_ns = (uint64_t)hold_ms * 1000000ULL;
	/* D's turn that ends the convoy is one past the last round. */
	max_turns =
		(wl_until_stopped() || rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds) * ROUND_TURNS + 1;
	convoy_word = NO_TURN;
	for (long i = 0; i < CONVOY_THREADS; i++) {
		convoy_turns[i] = calloc((size_t)max_turns, sizeof(struct turn));
		if (!convoy_turns[i])
			die("calloc");
		if (pthread_create(&threads[i], NULL, convoy_thread, (void *)(intptr_t)i))
			die("pthread_create");
	}
	/* D's first turn comes once every thread is there and asleep. */
	while (__atomic_load_n(&convoy_ready, __ATOMIC_SEQ_CST) < CONVOY_THREADS)
		wl_sleep_ns(100000);
	for (int i = 0; i < CONVOY_THREADS; i++)
		wait_asleep(convoy_tids[i]);
	wl_log("cases_start",
	       "\"mode\":\"convoy\",\"a\":%d,\"b\":%d,\"c\":%d,\"d\":%d,\"hold_ns\":%llu",
	       convoy_tids[0], convoy_tids[1], convoy_tids[2], convoy_tids[3],
	       (unsigned long long)hold_ns);
	__atomic_store_n(&convoy_word, 0, __ATOMIC_RELEASE);
	futex(&convoy_word, FUTEX_WAKE_BITSET_PRIVATE, 1, 1u << holder_of(0));
	for (int i = 0; i < CONVOY_THREADS; i++)
		pthread_join(threads[i], NULL);
	log_turns();
	wl_log("cases_end", NULL);
	return 0;
}

/* ---- idle ---- */

static uint64_t sleep_ns;
static int go_p[2], reply_p[2];
static int target_tid;

static void sleep_logged(const char *start, const char *end)
{
	struct timespec ts = {(time_t)(sleep_ns / 1000000000ULL), (long)(sleep_ns % 1000000000ULL)};

	wl_log(start, "\"sleep_ns\":%llu", (unsigned long long)sleep_ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
	wl_log(end, "\"cpu\":%d", sched_getcpu());
}

static void *idle_waker(void *arg)
{
	struct pollfd go = {.fd = go_p[0], .events = POLLIN};

	(void)arg;
	prctl(PR_SET_NAME, "idle_waker");
	/* It waits for "go" in poll: the target's read is the only one that sleeps. */
	while (poll(&go, 1, -1) >= 0 && wl_read_byte(go_p[0])) {
		/* The target wrote "go" right before its read: once asleep, it is in it. */
		wait_asleep(target_tid);
		sleep_logged("waker_sleep_start", "waker_sleep_end");
		wl_write_byte(reply_p[1]);
	}
	return NULL;
}

static int run_idle(void)
{
	pthread_t waker;
	pthread_attr_t attr;
	cpu_set_t one;
	int pinned;

	prctl(PR_SET_NAME, "idle_target");
	target_tid = wl_gettid();
	if (pipe(go_p) || pipe(reply_p))
		die("pipe");
	/* The waker alone on CPU 1 (where there is one): its timer fires on an idle CPU. */
	pinned = sysconf(_SC_NPROCESSORS_ONLN) > 1;
	pthread_attr_init(&attr);
	if (pinned) {
		CPU_ZERO(&one);
		CPU_SET(1, &one);
		pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	}
	if (pthread_create(&waker, &attr, idle_waker, NULL))
		die("pthread_create");
	wl_log("cases_start", "\"mode\":\"idle\",\"target\":%d,\"waker_cpu\":%d,\"sleep_ns\":%llu",
	       target_tid, pinned ? 1 : -1, (unsigned long long)sleep_ns);
	for (long round = 0; wl_more_rounds(round, rounds); round++) {
		if (round)
			pause_between_rounds();
		wl_log("target_wait_start", "\"round\":%ld", round);
		wl_write_byte(go_p[1]);
		if (!wl_read_byte(reply_p[0]))
			die("reply");
		wl_log("target_wait_end", "\"round\":%ld", round);
	}
	close(go_p[1]);
	pthread_join(waker, NULL);
	wl_log("cases_end", NULL);
	return 0;
}

/* ---- sem ---- */

static int sem_id;
static int post_p[2];

static void *sem_poster(void *arg)
{
	struct sembuf up = {0, 1, 0};

	(void)arg;
	prctl(PR_SET_NAME, "sem_poster");
	while (wl_read_byte(post_p[0])) {
		wl_log("post", NULL);
		if (syscall(SYS_semtimedop, sem_id, &up, 1, NULL))
			die("semtimedop +1");
	}
	return NULL;
}

static void run_sem_timer(int victim)
{
	prctl(PR_SET_NAME, "sem_timer");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(go_p[1]);
	close(post_p[0]);
	while (wl_read_byte(go_p[0])) {
		wait_asleep(victim);
		sleep_logged("timer_sleep_start", "timer_sleep_end");
		wl_write_byte(post_p[1]);
	}
	_exit(0);
}

static int run_sem(void)
{
	struct sembuf down = {0, -1, 0};
	pthread_t poster;
	pid_t timer;
	int victim = wl_gettid(), status;

	prctl(PR_SET_NAME, "sem_victim");
	sem_id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (sem_id < 0)
		die("semget");
	if (pipe(go_p) || pipe(post_p))
		die("pipe");
	timer = fork();
	if (timer < 0)
		die("fork");
	if (!timer)
		run_sem_timer(victim);
	close(go_p[0]);
	close(post_p[1]);
	if (pthread_create(&poster, NULL, sem_poster, NULL))
		die("pthread_create");
	wl_log("cases_start", "\"mode\":\"sem\",\"victim\":%d,\"timer\":%d,\"sleep_ns\":%llu",
	       victim, (int)timer, (unsigned long long)sleep_ns);
	for (long round = 0; wl_more_rounds(round, rounds); round++) {
		if (round)
			pause_between_rounds();
		wl_log("victim_wait_start", "\"round\":%ld", round);
		wl_write_byte(go_p[1]);
		while (syscall(SYS_semtimedop, sem_id, &down, 1, NULL))
			if (errno != EINTR)
				die("semtimedop -1");
		wl_log("victim_wait_end", "\"round\":%ld", round);
	}
	close(go_p[1]);
	if (waitpid(timer, &status, 0) != timer || status)
		fprintf(stderr, "chain_cases: sem_timer failed\n");
	pthread_join(poster, NULL);
	semctl(sem_id, 0, IPC_RMID);
	wl_log("cases_end", NULL);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "convoy")) {
		rounds = wl_arg(argc, argv, 2, 8);
		return run_convoy(wl_arg(argc, argv, 3, 4));
	}
	if (!strcmp(mode, "idle") || !strcmp(mode, "sem")) {
		rounds = wl_arg(argc, argv, 2, 5);
		sleep_ns = (uint64_t)wl_arg(argc, argv, 3, 20) * 1000000ULL;
		wl_wait_start();
		return !strcmp(mode, "idle") ? run_idle() : run_sem();
	}
	fprintf(stderr, "usage: chain_cases convoy [ROUNDS [HOLD_MS]]\n"
			"       chain_cases idle|sem [ROUNDS [SLEEP_MS]]\n");
	return 2;
}
