// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * User marks: the header's layout against the reader's, marks written by
 * this very process and read back, marks of a program built at test time
 * (threads, a wrapped ring, names, two files that include the header, a
 * stripped copy found by its section), and registries made of garbage in a
 * fake memory image: rejected whole, or slot by slot, never a crash.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* Small, to see slots reused and threads dropped. */
#define HYBTRACE_MARK_MAX_THREADS  4
#define HYBTRACE_MARK_RING_RECORDS 64
#include <hybtrace/mark.h>
#include "check.h"
#include "programs.h"
#include "base/log.h"
#include "sources/marks/marks.h"
#include "sources/marks/marks_procs.h"

static const char markprog_c[] =
	"#define _GNU_SOURCE\n"
	"#include <hybtrace/mark.h>\n"
	"#include <pthread.h>\n"
	"#include <stdio.h>\n"
	"\n"
	"extern void second_file_mark(uint64_t x);\n"
	"\n"
	"static int worker_tid, wrapper_tid;\n"
	"\n"
	"static void *worker(void *arg)\n"
	"{\n"
	"	worker_tid = (int)syscall(SYS_gettid);\n"
	"	for (uint64_t j = 0; j < 50; j++)\n"
	"		hybtrace_mark(2, j, 7);\n"
	"	hybtrace_mark(3, 1, 1);\n"
	"	return arg;\n"
	"}\n"
	"\n"
	"/* More marks than its ring holds: the newest 4095 can be read. */\n"
	"static void *wrapper(void *arg)\n"
	"{\n"
	"	wrapper_tid = (int)syscall(SYS_gettid);\n"
	"	for (uint64_t k = 0; k < 10000; k++)\n"
	"		hybtrace_mark(4, k, ~k);\n"
	"	return arg;\n"
	"}\n"
	"\n"
	"int main(void)\n"
	"{\n"
	"	pthread_t t;\n"
	"	char line[64];\n"
	"\n"
	"	hybtrace_mark_name(1, \"order in\");\n"
	"	hybtrace_mark_name(2, \"order out\");\n"
	"	hybtrace_mark_name(4, \"a name longer than fifty-five bytes, so that it is cut "
	"there\");\n"
	"	for (uint64_t i = 0; i < 100; i++)\n"
	"		hybtrace_mark(1, i, i * 2);\n"
	"	second_file_mark(5);\n"
	"	pthread_create(&t, NULL, worker, NULL);\n"
	"	pthread_join(t, NULL);\n"
	"	pthread_create(&t, NULL, wrapper, NULL);\n"
	"	pthread_join(t, NULL);\n"
	"	printf(\"ready %d %d\\n\", worker_tid, wrapper_tid);\n"
	"	fflush(stdout);\n"
	"	while (fgets(line, sizeof(line), stdin)) {\n"
	"		hybtrace_mark(6, 1, 2);\n"
	"		printf(\"ok\\n\");\n"
	"		fflush(stdout);\n"
	"	}\n"
	"	return 0;\n"
	"}\n";

static const char markprog2_c[] = "#include <hybtrace/mark.h>\n"
				  "\n"
				  "void second_file_mark(uint64_t x)\n"
				  "{\n"
				  "	hybtrace_mark(5, x, x);\n"
				  "}\n";

_Static_assert(sizeof(struct hybtrace_mark_registry) == 88, "registry layout");
_Static_assert(offsetof(struct hybtrace_mark_registry, slots) == 56, "registry layout");
_Static_assert(offsetof(struct hybtrace_mark_registry, dropped_threads) == 72, "registry layout");
_Static_assert(sizeof(struct hybtrace_mark_slot) == 32, "slot layout");
_Static_assert(offsetof(struct hybtrace_mark_slot, tid) == 24, "slot layout");
_Static_assert(sizeof(struct hybtrace_mark_name) == 64, "name layout");
_Static_assert(sizeof(struct hybtrace_mark_record) == 32, "record layout");
_Static_assert(offsetof(struct hybtrace_mark_record, seq) == 12, "record layout");
_Static_assert(sizeof(struct hybtrace_mark_ring) == 64, "ring layout");

static int contains(const char *s, const char *want)
{
	return s && strstr(s, want) != NULL;
}

static int count_tid(const struct ht_mark_set *s, int tid)
{
	int n = 0;

	for (size_t i = 0; i < s->count; i++)
		n += s->v[i].tid == tid;
	return n;
}

/* A wide-open window with a calibration taken now and a moment later. */
static void open_window(struct ht_marks_window *w)
{
	memset(w, 0, sizeof(*w));
	ht_tsc_pair_take(&w->a);
	usleep(2000);
	ht_tsc_pair_take(&w->b);
	w->t0_ns = 0;
	w->t1_ns = UINT64_MAX;
}

/* ---- Clocks ---- */

TEST(tsc_to_monotonic)
{
	struct ht_tsc_pair a = {1000, 5000}, b = {3000, 6000}, now, later;
	uint64_t ns;

	CHECK(!ht_tsc_to_ns(&a, &b, 2000, &ns));
	CHECK_EQ_U64(ns, 5500);
	CHECK(!ht_tsc_to_ns(&a, &b, 500, &ns)); /* before the first pair */
	CHECK_EQ_U64(ns, 4750);
	CHECK(!ht_tsc_to_ns(&a, &b, 7000, &ns)); /* after the last */
	CHECK_EQ_U64(ns, 8000);
	CHECK(ht_tsc_to_ns(&a, &a, 2000, &ns) == -1);
	CHECK(ht_tsc_to_ns(&b, &a, 2000, &ns) == -1);
	/* On this machine the line through two pairs puts a third within a few microseconds. */
	ht_tsc_pair_take(&now);
	usleep(20000);
	ht_tsc_pair_take(&later);
	CHECK(later.tsc > now.tsc && later.ns > now.ns);
	{
		struct ht_tsc_pair third;

		usleep(20000);
		ht_tsc_pair_take(&third);
		CHECK(!ht_tsc_to_ns(&now, &later, third.tsc, &ns));
		CHECK(ns > third.ns - 50000 && ns < third.ns + 50000);
	}
}

/* ---- This process's own marks ---- */

static int self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static int worker_tids[8];

static void *mark_and_exit(void *arg)
{
	int i = (int)(intptr_t)arg;

	worker_tids[i] = (int)syscall(SYS_gettid);
	hybtrace_mark(100 + (uint32_t)i, (uint64_t)i, 0);
	return NULL;
}

static pthread_barrier_t hold;

static void *mark_and_wait(void *arg)
{
	int i = (int)(intptr_t)arg;

	worker_tids[i] = (int)syscall(SYS_gettid);
	hybtrace_mark(200 + (uint32_t)i, (uint64_t)i, 0);
	pthread_barrier_wait(&hold); /* marked */
	pthread_barrier_wait(&hold); /* read */
	return NULL;
}

TEST(own_marks_in_order_with_names)
{
	struct ht_marks_window w;
	struct ht_mark_set set = {0};
	int self = (int)syscall(SYS_gettid);
	uint64_t before;
	size_t n = 0;

	open_window(&w);
	before = w.b.ns;
	CHECK(!hybtrace_mark_name(7, "seven"));
	CHECK(!hybtrace_mark_name(8, "eight"));
	CHECK(!hybtrace_mark_name(8, "eight again")); /* renamed in place */
	for (uint64_t i = 0; i < 10; i++)
		hybtrace_mark(i % 2 ? 7 : 8, i, i * 3);
	hybtrace_mark(9, 1, 2);
	ht_tsc_pair_take(&w.b);
	CHECK(!ht_marks_parse(self_read, NULL, (uint64_t)(uintptr_t)&hybtrace_mark_registry, &w,
			      &set));
	for (size_t i = 0; i < set.count; i++) {
		const struct ht_mark *m = &set.v[i];

		if (m->tid != self || m->id < 7 || m->id > 9)
			continue;
		if (m->id == 9) {
			CHECK(m->name == NULL);
			continue;
		}
		CHECK_EQ_U64(m->a, n);
		CHECK_EQ_U64(m->b, n * 3);
		CHECK_STR(m->name, n % 2 ? "seven" : "eight again");
		CHECK(m->time_ns + 100000 >= before && m->time_ns <= w.b.ns + 100000);
		CHECK(!n || m->index == set.v[i - 1].index + 1);
		n++;
	}
	CHECK_EQ_U64(n, 10);
	CHECK_EQ_U64(set.registries, 1);
	CHECK_EQ_U64(set.torn + set.overwritten + set.rejected_slots, 0);
	ht_mark_set_free(&set);
}

TEST(own_ring_wraps_and_keeps_the_newest)
{
	struct ht_marks_window w;
	struct ht_mark_set set = {0};
	int self = (int)syscall(SYS_gettid);
	uint64_t last = 0;
	size_t n = 0;

	open_window(&w);
	for (uint64_t i = 0; i < 1000; i++)
		hybtrace_mark(11, i, 0);
	ht_tsc_pair_take(&w.b);
	CHECK(!ht_marks_parse(self_read, NULL, (uint64_t)(uintptr_t)&hybtrace_mark_registry, &w,
			      &set));
	for (size_t i = 0; i < set.count; i++) {
		if (set.v[i].tid != self || set.v[i].id != 11)
			continue;
		CHECK(!n || set.v[i].a == last + 1);
		last = set.v[i].a;
		n++;
	}
	/* A ring of 64 records: the last 63 marks (the oldest slot is next to be written). */
	CHECK_EQ_U64(n, 63);
	CHECK_EQ_U64(last, 999);
	ht_mark_set_free(&set);
}

TEST(slots_of_exited_threads_are_reused_then_threads_dropped)
{
	struct ht_marks_window w;
	struct ht_mark_set set = {0};
	pthread_t t[8];
	uint64_t dropped;

	hybtrace_mark(1, 0, 0); /* this thread has its slot */
	/* Five threads one after the other, in 4 slots: the exited ones' slots are taken. */
	for (int i = 0; i < 5; i++) {
		pthread_create(&t[i], NULL, mark_and_exit, (void *)(intptr_t)i);
		pthread_join(t[i], NULL);
	}
	CHECK(hybtrace_mark_registry.slot_count <= 4);
	CHECK_EQ_U64(hybtrace_mark_registry.dropped_threads, 0);
	open_window(&w);
	CHECK(!ht_marks_parse(self_read, NULL, (uint64_t)(uintptr_t)&hybtrace_mark_registry, &w,
			      &set));
	/* The last thread's mark is there, under its own tid; a taken-over ring shows no other. */
	CHECK_EQ_U64(count_tid(&set, worker_tids[4]), 1);
	for (size_t i = 0; i < set.count; i++)
		if (set.v[i].tid == worker_tids[4])
			CHECK_EQ_U64(set.v[i].id, 104);
	ht_mark_set_free(&set);
	/* Four threads alive at once with this one: one finds no slot. */
	dropped = hybtrace_mark_registry.dropped_threads;
	pthread_barrier_init(&hold, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, mark_and_wait, (void *)(intptr_t)i);
	pthread_barrier_wait(&hold);
	CHECK_EQ_U64(hybtrace_mark_registry.dropped_threads, dropped + 1);
	open_window(&w);
	CHECK(!ht_marks_parse(self_read, NULL, (uint64_t)(uintptr_t)&hybtrace_mark_registry, &w,
			      &set));
	CHECK_EQ_U64(set.dropped_threads, dropped + 1);
	pthread_barrier_wait(&hold);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&hold);
	ht_mark_set_free(&set);
}

TEST(forked_child_starts_its_own_registry)
{
	pid_t pid;
	int status = 0;

	hybtrace_mark(1, 1, 1);
	pid = fork();
	if (pid == 0) {
		int ok;

		hybtrace_mark(2, 2, 2);
		ok = hybtrace_mark_registry.slot_count == 1 &&
		     hybtrace_mark_registry.slots.ptr[0].tid == (uint32_t)syscall(SYS_gettid);
		_exit(ok ? 0 : 1);
	}
	CHECK(pid > 0);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- A program built at test time ---- */

static char dir[64];
static int built;

static int build_program(void)
{
	char include[PATH_MAX + 16];

	if (built)
		return built > 0 ? 0 : -1;
	built = -1;
	if (prog_find_include_dir("hybtrace/mark.h", include, sizeof(include)))
		return -1;
	if (prog_make_dir(dir, sizeof(dir), "/tmp/ht-marks-XXXXXX"))
		return -1;
	if (prog_write_file(dir, "markprog.c", markprog_c) ||
	    prog_write_file(dir, "markprog2.c", markprog2_c))
		return -1;
	if (sh("cd '%s' && cc -O2 -g -Wall -Wextra -Werror -I'%s' -o markprog markprog.c "
	       "markprog2.c -pthread && cp markprog markprog_stripped && strip --strip-all "
	       "markprog_stripped",
	       dir, include))
		return -1;
	built = 1;
	return 0;
}

struct child {
	pid_t pid;
	FILE *to, *from;
	int worker, wrapper;
};

static int child_start(struct child *c, const char *program)
{
	char line[128];

	memset(c, 0, sizeof(*c));
	c->pid = prog_start(dir, program, NULL, false, &c->to, &c->from);
	if (c->pid < 0)
		return -1;
	if (!fgets(line, sizeof(line), c->from) ||
	    sscanf(line, "ready %d %d", &c->worker, &c->wrapper) != 2)
		return -1;
	return 0;
}

static void child_stop(struct child *c)
{
	prog_stop(c->pid, c->to, c->from);
	memset(c, 0, sizeof(*c));
}

static void check_program_marks(const char *program, size_t want_registries)
{
	struct ht_marks_window w;
	struct ht_mark_set set;
	uint64_t addrs[HT_MARKS_MAX_REGISTRIES], started;
	size_t found = 0, main_n = 0, worker_n = 0, wrapper_n = 0;
	struct child c;
	char line[64];

	REQUIRE_BUILT(build_program);
	open_window(&w);
	started = w.a.ns;
	CHECK(!child_start(&c, program));
	ht_tsc_pair_take(&w.b);
	CHECK(!ht_marks_locate(c.pid, addrs, HT_MARKS_MAX_REGISTRIES, &found));
	CHECK_EQ_U64(found, want_registries);
	CHECK(!ht_marks_read(c.pid, addrs, found, &w, &set));
	CHECK_EQ_U64(set.count, 100 + 1 + 50 + 1 + 4095);
	CHECK_EQ_U64(set.threads, 3);
	CHECK_EQ_U64(set.torn + set.overwritten + set.rejected_slots + set.unreadable, 0);
	for (size_t i = 0; i < set.count; i++) {
		const struct ht_mark *m = &set.v[i];

		CHECK(i == 0 || m->time_ns >= set.v[i - 1].time_ns);
		CHECK(m->time_ns >= started && m->time_ns <= w.b.ns);
		if (m->tid == c.pid && m->id == 1) {
			CHECK_EQ_U64(m->a, main_n);
			CHECK_EQ_U64(m->b, main_n * 2);
			CHECK_STR(m->name, "order in");
			main_n++;
		} else if (m->tid == c.pid) {
			/* From the other file: the same thread's ring, right after. */
			CHECK_EQ_U64(m->id, 5);
			CHECK_EQ_U64(m->index, 100);
			CHECK(m->name == NULL);
		} else if (m->tid == c.worker && m->id == 2) {
			CHECK_EQ_U64(m->a, worker_n);
			CHECK_STR(m->name, "order out");
			worker_n++;
		} else if (m->tid == c.worker) {
			CHECK_EQ_U64(m->id, 3);
			CHECK(m->name == NULL);
		} else if (m->tid == c.wrapper) {
			CHECK_EQ_U64(m->a, 10000 - 4095 + wrapper_n);
			CHECK_EQ_U64(m->b, ~m->a);
			CHECK_EQ_U64(m->index, m->a);
			CHECK(m->name && strlen(m->name) == 55);
			wrapper_n++;
		} else {
			CHECK(!"a mark of an unknown thread");
		}
	}
	CHECK_EQ_U64(main_n, 100);
	CHECK_EQ_U64(worker_n, 50);
	CHECK_EQ_U64(wrapper_n, 4095);
	/* A narrow window: the worker's marks only. */
	if (worker_n == 50) {
		struct ht_mark_set narrow;
		uint64_t t0 = UINT64_MAX, t1 = 0;

		for (size_t i = 0; i < set.count; i++)
			if (set.v[i].tid == c.worker) {
				t0 = set.v[i].time_ns < t0 ? set.v[i].time_ns : t0;
				t1 = set.v[i].time_ns > t1 ? set.v[i].time_ns : t1;
			}
		w.t0_ns = t0;
		w.t1_ns = t1;
		CHECK(!ht_marks_read(c.pid, addrs, found, &w, &narrow));
		CHECK_EQ_U64(count_tid(&narrow, c.worker), 51);
		CHECK_EQ_U64(narrow.count, 51);
		ht_mark_set_free(&narrow);
		w.t0_ns = 0;
		w.t1_ns = UINT64_MAX;
	}
	ht_mark_set_free(&set);
	/* One more, after the first read. */
	fputs("mark\n", c.to);
	fflush(c.to);
	CHECK(fgets(line, sizeof(line), c.from) && !strcmp(line, "ok\n"));
	ht_tsc_pair_take(&w.b);
	CHECK(!ht_marks_read(c.pid, addrs, found, &w, &set));
	CHECK(set.count > 0 && set.v[set.count - 1].id == 6 && set.v[set.count - 1].tid == c.pid);
	ht_mark_set_free(&set);
	child_stop(&c);
}

TEST(program_marks_read_back)
{
	REQUIRE_ROOT();
	check_program_marks("markprog", 1);
}

TEST(stripped_program_marks_found_by_section)
{
	/* Two files include the header: two registries in the section, one of them used. */
	REQUIRE_ROOT();
	check_program_marks("markprog_stripped", 2);
}

/*
 * The locator keeps what it read of each module: a second look at the same
 * process opens no file, and a module mapped anew elsewhere (here the same
 * program in another process: as a pid reused, or a target that execs its own
 * file again) is read again, never given the registries of where it was.
 */
TEST(locator_reads_a_module_again_only_when_mapped_anew)
{
	uint64_t first[HT_MARKS_MAX_REGISTRIES], again[HT_MARKS_MAX_REGISTRIES];
	uint64_t other[HT_MARKS_MAX_REGISTRIES], fresh[HT_MARKS_MAX_REGISTRIES];
	size_t nfirst = 0, nagain = 0, nother = 0, nfresh = 0;
	struct ht_marks_locator l;
	struct child a, b;
	uint64_t read_once;

	REQUIRE_ROOT();
	REQUIRE_BUILT(build_program);
	CHECK(!child_start(&a, "markprog"));
	CHECK(!child_start(&b, "markprog"));
	ht_marks_locator_init(&l, a.pid);
	CHECK(!ht_marks_locator_find(&l, first, HT_MARKS_MAX_REGISTRIES, &nfirst));
	CHECK_EQ_U64(nfirst, 1);
	read_once = l.modules_read;
	CHECK(read_once > 0);
	CHECK(!ht_marks_locator_find(&l, again, HT_MARKS_MAX_REGISTRIES, &nagain));
	CHECK_EQ_U64(nagain, 1);
	CHECK_EQ_U64(again[0], first[0]);
	CHECK_EQ_U64(l.modules_read, read_once);

	l.pid = b.pid;
	CHECK(!ht_marks_locator_find(&l, other, HT_MARKS_MAX_REGISTRIES, &nother));
	CHECK(!ht_marks_locate(b.pid, fresh, HT_MARKS_MAX_REGISTRIES, &nfresh));
	CHECK_EQ_U64(nother, 1);
	CHECK_EQ_U64(nfresh, 1);
	CHECK_EQ_U64(other[0], fresh[0]);
	/* Placed elsewhere by ASLR: its program was read again. */
	if (fresh[0] != first[0])
		CHECK(l.modules_read > read_once);
	ht_marks_locator_free(&l);
	child_stop(&b);
	child_stop(&a);
}

/*
 * Each process's registries are kept from dump to dump: its maps are read
 * again only when its address space changed or it is marked stale (exec),
 * a process gone is forgotten (and said to have lost marks when it had
 * registries), and a full set keeps this round's processes, locating one
 * more without keeping it. The files of modules are read once for all.
 */
TEST(marks_procs_reads_maps_only_when_a_process_changes)
{
	struct ht_marks_procs p;
	const uint64_t *addrs;
	uint64_t first, files_read;
	struct child a, b;
	size_t n = 0;
	int gone;

	REQUIRE_ROOT();
	REQUIRE_BUILT(build_program);
	CHECK(!child_start(&a, "markprog"));
	CHECK(!child_start(&b, "markprog"));
	ht_marks_procs_init(&p, 1);
	ht_marks_procs_round(&p);
	CHECK(ht_marks_procs_find(&p, a.pid, &addrs, &n) == 0);
	CHECK_EQ_U64(n, 1);
	first = addrs[0];
	CHECK_EQ_U64(p.maps_read, 1);
	/* Nothing mapped since: the same answer without reading the maps. */
	ht_marks_procs_round(&p);
	CHECK(ht_marks_procs_find(&p, a.pid, &addrs, &n) == 0);
	CHECK(n == 1 && addrs[0] == first);
	CHECK_EQ_U64(p.maps_read, 1);
	CHECK_EQ_U64(p.maps_kept, 1);
	CHECK_EQ_U64(ht_marks_procs_known(&p, a.pid), 1);
	/* It ran a new program: read again. */
	ht_marks_procs_stale(&p, a.pid);
	CHECK(ht_marks_procs_find(&p, a.pid, &addrs, &n) == 0);
	CHECK_EQ_U64(p.maps_read, 2);
	/* Full, and a is of this round: b is located, not kept; of the same program, no file read. */
	files_read = p.files.files_read;
	CHECK(files_read > 0);
	CHECK(ht_marks_procs_find(&p, b.pid, &addrs, &n) == 0);
	CHECK_EQ_U64(n, 1);
	CHECK_EQ_U64(p.files.files_read, files_read);
	CHECK_EQ_U64(ht_marks_procs_known(&p, b.pid), 0);
	CHECK_EQ_U64(ht_marks_procs_known(&p, a.pid), 1);
	/* The next round: a, not asked for, gives way to b. */
	ht_marks_procs_round(&p);
	CHECK(ht_marks_procs_find(&p, b.pid, &addrs, &n) == 0);
	CHECK_EQ_U64(ht_marks_procs_known(&p, b.pid), 1);
	CHECK_EQ_U64(ht_marks_procs_known(&p, a.pid), 0);
	/* Gone after it was located: its marks are lost, and it is forgotten. */
	gone = b.pid;
	child_stop(&b);
	CHECK(ht_marks_procs_find(&p, gone, &addrs, &n) == 1);
	CHECK_EQ_U64(n, 0);
	CHECK_EQ_U64(ht_marks_procs_known(&p, gone), 0);
	CHECK_EQ_U64(p.count, 0);
	ht_marks_procs_forget(&p, a.pid);
	ht_marks_procs_free(&p);
	child_stop(&a);
}

TEST(process_without_marks)
{
	uint64_t addrs[4];
	size_t found = 1;
	struct ht_mark_set set;
	struct ht_marks_window w;
	pid_t pid;

	REQUIRE_ROOT();
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "10", (char *)NULL);
		_exit(127);
	}
	usleep(100000);
	CHECK(!ht_marks_locate(pid, addrs, 4, &found));
	CHECK_EQ_U64(found, 0);
	open_window(&w);
	CHECK(!ht_marks_read(pid, addrs, 0, &w, &set));
	CHECK_EQ_U64(set.count, 0);
	/* An address that is no registry. */
	addrs[0] = 0x1000;
	CHECK(ht_marks_read(pid, addrs, 1, &w, &set) == -1);
	CHECK(contains(ht_last_error(), "cannot read the mark registry"));
	ht_mark_set_free(&set);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* ---- Garbage ---- */

#define BASE	 0x10000ULL
#define SLOTS_AT 0x100
#define NAMES_AT 0x200
#define RING_AT	 0x1000
#define RING_CAP 8

struct fake {
	uint8_t mem[0x2000];
	uint64_t head_bump; /* added to the head on its second read: the writer moved on */
};

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake *f = ctx;

	if (addr < BASE || addr - BASE > sizeof(f->mem) || len > sizeof(f->mem) - (addr - BASE))
		return -1;
	memcpy(buf, f->mem + (addr - BASE), len);
	/* The ring header is read whole first; a read of the head alone is the second look. */
	if (addr == BASE + RING_AT && len == 8) {
		uint64_t h;

		memcpy(&h, buf, 8);
		h += f->head_bump;
		memcpy(buf, &h, 8);
	}
	return 0;
}

static struct hybtrace_mark_registry *freg(struct fake *f)
{
	return (struct hybtrace_mark_registry *)(void *)f->mem;
}

static struct hybtrace_mark_slot *fslot(struct fake *f)
{
	return (struct hybtrace_mark_slot *)(void *)(f->mem + SLOTS_AT);
}

static struct hybtrace_mark_ring *fring(struct fake *f)
{
	return (struct hybtrace_mark_ring *)(void *)(f->mem + RING_AT);
}

/* A valid registry: one thread, a ring of 8 with records 4..11, two names. */
static void fake_init(struct fake *f)
{
	struct hybtrace_mark_registry *r = freg(f);
	struct hybtrace_mark_name *n = (struct hybtrace_mark_name *)(void *)(f->mem + NAMES_AT);
	struct hybtrace_mark_ring *ring = fring(f);

	memset(f, 0, sizeof(*f));
	r->magic = HYBTRACE_MARK_MAGIC;
	r->version = HYBTRACE_MARK_VERSION;
	r->size = sizeof(*r);
	r->clock = HYBTRACE_MARK_CLOCK_MONOTONIC;
	r->record_size = sizeof(struct hybtrace_mark_record);
	r->ring_header = sizeof(struct hybtrace_mark_ring);
	r->slot_size = sizeof(struct hybtrace_mark_slot);
	r->slot_capacity = 4;
	r->slot_count = 1;
	r->name_size = sizeof(struct hybtrace_mark_name);
	r->name_capacity = 4;
	r->name_count = 2;
	r->slots.addr = BASE + SLOTS_AT;
	r->names.addr = BASE + NAMES_AT;
	fslot(f)->ring = BASE + RING_AT;
	fslot(f)->head = BASE + RING_AT;
	fslot(f)->tid = 4242;
	fslot(f)->capacity = RING_CAP;
	n[0].id = 1;
	n[0].len = 3;
	memcpy(n[0].name, "one", 4);
	n[1].id = 2;
	n[1].len = 3;
	memcpy(n[1].name, "two", 3);
	n[1].name[3] = 'x'; /* no NUL where its length says: not a name */
	ring->head = 12;
	ring->mask = RING_CAP - 1;
	ring->capacity = RING_CAP;
	for (uint64_t i = 4; i < 12; i++) {
		struct hybtrace_mark_record *rec = &ring->rec[i & (RING_CAP - 1)];

		rec->tsc = 1000 + i;
		rec->id = (uint32_t)(1 + i % 2);
		rec->seq = (uint32_t)i;
		rec->a = i;
	}
}

static int fake_parse(struct fake *f, struct ht_mark_set *set, size_t budget)
{
	struct ht_marks_window w = {.t0_ns = 0, .t1_ns = UINT64_MAX, .budget_bytes = budget};

	memset(set, 0, sizeof(*set));
	return ht_marks_parse(fake_read, f, BASE, &w, set);
}

TEST(fake_registry_parses)
{
	struct fake f;
	struct ht_mark_set set;

	fake_init(&f);
	CHECK(!fake_parse(&f, &set, 0));
	/* Records 5..11: 4 is in the slot record 12 would be written to. */
	CHECK_EQ_U64(set.count, 7);
	for (size_t i = 0; i < set.count; i++) {
		CHECK_EQ_U64(set.v[i].index, 5 + i);
		CHECK_EQ_U64(set.v[i].time_ns, 1005 + i);
		CHECK_EQ_U64(set.v[i].tid, 4242);
		if (set.v[i].id == 1)
			CHECK_STR(set.v[i].name, "one");
		else
			CHECK(set.v[i].name == NULL);
	}
	ht_mark_set_free(&set);
}

static void check_rejected(struct fake *f, const char *want)
{
	struct ht_mark_set set;

	CHECK(fake_parse(f, &set, 0) == -1);
	CHECK_EQ_U64(set.count, 0);
	if (!contains(ht_last_error(), want))
		printf("     got \"%s\", want \"%s\"\n", ht_last_error(), want);
	CHECK(contains(ht_last_error(), want));
	ht_mark_set_free(&set);
}

TEST(garbage_registry_rejected)
{
	struct fake f;

	fake_init(&f);
	freg(&f)->magic ^= 1;
	check_rejected(&f, "bad magic");
	fake_init(&f);
	freg(&f)->version = 99;
	check_rejected(&f, "version 99");
	fake_init(&f);
	freg(&f)->slot_count = 1u << 30;
	check_rejected(&f, "absurd counts");
	fake_init(&f);
	freg(&f)->slot_capacity = 0xffffffffu;
	freg(&f)->slot_count = 0xfffffff0u;
	check_rejected(&f, "absurd counts");
	fake_init(&f);
	freg(&f)->name_count = 4000000;
	check_rejected(&f, "absurd counts");
	fake_init(&f);
	freg(&f)->record_size = 16;
	check_rejected(&f, "sizes do not match");
	fake_init(&f);
	freg(&f)->clock = 7;
	check_rejected(&f, "unknown clock");
	fake_init(&f);
	freg(&f)->slots.addr = 0;
	check_rejected(&f, "counts without arrays");
	fake_init(&f);
	freg(&f)->clock = HYBTRACE_MARK_CLOCK_TSC; /* and no calibration in the window */
	check_rejected(&f, "two (TSC, clock) pairs");
}

static void check_slot(struct fake *f, uint64_t count, uint64_t rejected, uint64_t unreadable)
{
	struct ht_mark_set set;

	CHECK(!fake_parse(f, &set, 0));
	CHECK_EQ_U64(set.count, count);
	CHECK_EQ_U64(set.rejected_slots, rejected);
	CHECK_EQ_U64(set.unreadable, unreadable);
	ht_mark_set_free(&set);
}

TEST(garbage_slots_skipped)
{
	struct fake f;
	struct ht_mark_set set;

	fake_init(&f);
	fslot(&f)->capacity = 3; /* not a power of two */
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fslot(&f)->capacity = 1u << 31;
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fslot(&f)->tid = 0;
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fslot(&f)->head = BASE + RING_AT + 8;
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fslot(&f)->ring = fslot(&f)->head = 0xfffffffffffffff8ULL; /* nowhere */
	check_slot(&f, 0, 0, 1);
	fake_init(&f);
	fring(&f)->capacity = 16; /* the ring disagrees with its slot */
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fslot(&f)->start = 13; /* after the head */
	check_slot(&f, 0, 1, 0);
	fake_init(&f);
	fring(&f)->head = 0xffffffffffffff00ULL; /* a huge head: still just the ring's 8 */
	check_slot(&f, 0, 0, 0);
	/* A record in the wrong place: torn. */
	fake_init(&f);
	fring(&f)->rec[5].seq = 99;
	CHECK(!fake_parse(&f, &set, 0));
	CHECK_EQ_U64(set.count, 6);
	CHECK_EQ_U64(set.torn, 1);
	ht_mark_set_free(&set);
	/* The writer went 3 further while we read: the 3 oldest may be rewritten. */
	fake_init(&f);
	f.head_bump = 3;
	CHECK(!fake_parse(&f, &set, 0));
	CHECK_EQ_U64(set.count, 4);
	CHECK_EQ_U64(set.overwritten, 3);
	CHECK(set.count && set.v[0].index == 8);
	ht_mark_set_free(&set);
	/* A budget of 2 records: the 2 newest. */
	fake_init(&f);
	CHECK(!fake_parse(&f, &set, 64));
	CHECK_EQ_U64(set.count, 2);
	CHECK_EQ_U64(set.out_of_budget, 5);
	CHECK(set.count == 2 && set.v[1].index == 11);
	ht_mark_set_free(&set);
	/* A slot taken over from an exited thread: only the new owner's records. */
	fake_init(&f);
	fslot(&f)->start = 10;
	check_slot(&f, 2, 0, 0);
}

TEST(random_garbage_never_crashes)
{
	struct fake f;
	struct ht_mark_set set;
	struct ht_marks_window w = {.t0_ns = 0, .t1_ns = UINT64_MAX, .budget_bytes = 4096};

	srand(2);
	for (int round = 0; round < 3000; round++) {
		fake_init(&f);
		/* Flip a few random bytes of the valid image, or fill it with noise. */
		if (round % 10 == 0)
			for (size_t i = 0; i < sizeof(f.mem); i++)
				f.mem[i] = (uint8_t)rand();
		else
			for (int k = 0; k < 1 + round % 8; k++)
				f.mem[(size_t)rand() % 0x1200] = (uint8_t)rand();
		memset(&set, 0, sizeof(set));
		ht_marks_parse(fake_read, &f, BASE, &w, &set);
		CHECK(set.count <= 4096 / 32);
		ht_mark_set_free(&set);
	}
}
