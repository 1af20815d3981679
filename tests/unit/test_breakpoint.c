// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Hardware breakpoints on code, for real: the program of trigger_programs.c
 * runs, trigger specs resolve against it, breakpoints go on its functions,
 * then it calls them (over its stdin) and each hit is checked: the function,
 * the thread, the arguments in rdi, rsi, rdx. Threads born after attach, a
 * library function called through the PLT, a library loaded later with
 * dlopen, an exec, and the stop function hybtrace_trigger (under -O3 -flto
 * too). Tests that need root skip without it, and fail under CI=true.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include "triggers/breakpoint.h"
#include "check.h"
#include "base/log.h"
#include "symbols/module_names.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "symbols/target_files.h"
#include "triggers/trigger_spec.h"

#include "programs.h"
#include "trigger_programs.h"

/* ---- Breakpoints ---- */

struct session {
	struct child c;
	struct ht_symbolizer *s;
	struct ht_triggers t;
	struct ht_breakpoints b;
	struct ht_bp_hits hits;
};

/* Start the program, resolve SPECS (NULL-ended), open breakpoints and set them. */
static int session_start(struct session *x, int multi, int fixed, unsigned flags, ...)
{
	struct ht_bp_config cfg = {0};
	const char *spec;
	va_list ap;

	memset(x, 0, sizeof(*x));
	if (child_start(&x->c, fixed))
		return -1;
	x->s = ht_symbolizer_new(x->c.pid);
	if (!x->s)
		return -1;
	ht_triggers_init(&x->t);
	va_start(ap, flags);
	while ((spec = va_arg(ap, const char *)))
		if (ht_triggers_add(&x->t, spec)) {
			va_end(ap);
			return -1;
		}
	va_end(ap);
	if (ht_triggers_resolve(&x->t, x->s, x->c.pid, flags) < 0)
		return -1;
	cfg.tgid = x->c.pid;
	cfg.multi = multi;
	if (ht_bp_open(&x->b, &cfg))
		return -1;
	for (size_t i = 0; i < x->t.count; i++)
		if (x->t.v[i].resolved && ht_bp_set(&x->b, (unsigned)i, x->t.v[i].addr))
			return -1;
	return 0;
}

/* Re-resolve and move the breakpoints that changed. */
static int session_update(struct session *x, unsigned flags)
{
	int n = ht_triggers_resolve(&x->t, x->s, x->c.pid, flags);

	if (n < 0)
		return -1;
	for (size_t i = 0; i < x->t.count; i++)
		if (x->t.v[i].changed &&
		    ht_bp_set(&x->b, (unsigned)i, x->t.v[i].resolved ? x->t.v[i].addr : 0))
			return -1;
	return n;
}

static void session_stop(struct session *x)
{
	ht_bp_close(&x->b);
	ht_bp_hits_free(&x->hits);
	ht_symbolizer_free(x->s);
	child_stop(&x->c);
}

/* Whether the rings have something to read within MS milliseconds. */
static int wait_readable(struct session *x, int ms)
{
	struct pollfd p[64];
	int fds[64];
	size_t n = ht_bp_poll_fds(&x->b, fds, 64);

	for (size_t i = 0; i < n; i++)
		p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
	return poll(p, n, ms) > 0;
}

static int drain(struct session *x)
{
	return ht_bp_drain(&x->b, &x->hits);
}

/*
 * Some virtual machines take a breakpoint and never deliver a hit: no
 * test of hits there (test_triggers.check_and_trigger_agree_with_the_kernel
 * checks ht_bp_fires() against the kernel's own count).
 */
#define REQUIRE_FIRING()                                                                           \
	do {                                                                                       \
		if (ht_bp_fires() == 0)                                                            \
			SKIP_TEST("hardware breakpoints do not fire on this machine");             \
	} while (0)

#define REQUIRE_SESSION(x, ...)                                                                    \
	do {                                                                                       \
		REQUIRE_ROOT();                                                                    \
		REQUIRE_FIRING();                                                                  \
		REQUIRE_PROGRAMS();                                                                \
		if (session_start(x, __VA_ARGS__, NULL)) {                                         \
			printf("     session: %s\n", ht_last_error());                             \
			CHECK(!"session_start");                                                   \
			session_stop(x);                                                           \
			return;                                                                    \
		}                                                                                  \
	} while (0)

TEST(breakpoint_one_shot_fires_once)
{
	struct session x;

	REQUIRE_SESSION(&x, 0, 0, 0, "trig_work");
	CHECK(!child_do(&x.c, "call 5 100 200 300"));
	CHECK(wait_readable(&x, 1000));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	CHECK_EQ_U64(x.hits.in_flight, 4);
	if (x.hits.count == 1) {
		CHECK_EQ_U64(x.hits.v[0].ip, x.c.work);
		CHECK_EQ_U64(x.hits.v[0].trigger, 0);
		CHECK_EQ_U64(x.hits.v[0].pid, (uint64_t)x.c.pid);
		CHECK_EQ_U64(x.hits.v[0].tid, (uint64_t)x.c.pid);
		CHECK(x.hits.v[0].regs_valid);
		CHECK_EQ_U64(x.hits.v[0].arg[0], 100);
		CHECK_EQ_U64(x.hits.v[0].arg[1], 200);
		CHECK_EQ_U64(x.hits.v[0].arg[2], 300);
		CHECK(x.hits.v[0].time_ns > 0);
	}
	/* Disarmed: no more hits, not even counted. */
	CHECK(!child_do(&x.c, "call 3 1 2 3"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 0);
	CHECK_EQ_U64(x.hits.in_flight, 0);
	/* Armed again: once more. */
	CHECK(!ht_bp_rearm(&x.b));
	CHECK(!child_do(&x.c, "call 2 7 8 9"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	CHECK_EQ_U64(x.hits.in_flight, 1);
	CHECK(x.hits.count == 1 && x.hits.v[0].arg[0] == 7);
	session_stop(&x);
}

TEST(breakpoint_multi_fires_per_call)
{
	struct session x;
	struct timespec ts;
	uint64_t now;

	REQUIRE_SESSION(&x, 1, 0, 0, "trig_work", "trig_other");
	CHECK(!child_do(&x.c, "call 5 10 20 30"));
	CHECK(!child_do(&x.c, "other 99"));
	CHECK(!drain(&x));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	CHECK_EQ_U64(x.hits.count, 6);
	CHECK_EQ_U64(x.hits.in_flight, 0);
	for (size_t i = 0; i < 5 && i < x.hits.count; i++) {
		CHECK_EQ_U64(x.hits.v[i].trigger, 0);
		CHECK_EQ_U64(x.hits.v[i].arg[0], 10 + i);
		CHECK_EQ_U64(x.hits.v[i].arg[1], 20);
		CHECK_EQ_U64(x.hits.v[i].arg[2], 30);
		CHECK(i == 0 || x.hits.v[i].time_ns >= x.hits.v[i - 1].time_ns);
		CHECK(x.hits.v[i].time_ns <= now && now - x.hits.v[i].time_ns < 10000000000ULL);
	}
	if (x.hits.count == 6) {
		CHECK_EQ_U64(x.hits.v[5].trigger, 1);
		CHECK_EQ_U64(x.hits.v[5].ip, x.c.other);
		CHECK_EQ_U64(x.hits.v[5].arg[0], 99);
		CHECK_EQ_U64(x.hits.v[5].arg[1], 1);
		CHECK_EQ_U64(x.hits.v[5].arg[2], 2);
	}
	CHECK(!child_do(&x.c, "call 2 1 1 1"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 2);
	session_stop(&x);
}

TEST(breakpoint_in_thread_born_after_attach)
{
	struct session x;

	REQUIRE_SESSION(&x, 1, 0, 0, "trig_thread_only");
	CHECK(!child_do(&x.c, "thread 4 5 6"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	if (x.hits.count == 1) {
		CHECK(x.hits.v[0].tid != (uint32_t)x.c.pid);
		CHECK_EQ_U64(x.hits.v[0].pid, (uint64_t)x.c.pid);
		CHECK_EQ_U64(x.hits.v[0].ip, x.c.thread);
		CHECK_EQ_U64(x.hits.v[0].arg[0], 4);
		CHECK_EQ_U64(x.hits.v[0].arg[1], 5);
		CHECK_EQ_U64(x.hits.v[0].arg[2], 6);
	}
	/* The thread is gone: its events (inherited ones) leave nothing to reap. */
	ht_bp_reap(&x.b);
	CHECK_EQ_U64(x.b.nthreads, 1);
	session_stop(&x);
}

TEST(breakpoint_on_library_function_through_plt)
{
	struct session x;

	REQUIRE_SESSION(&x, 1, 0, 0, "ht_trig_lib_function");
	CHECK_EQ_U64(x.t.v[0].addr, x.c.lib);
	CHECK(contains(x.t.v[0].module, "libtrig.so"));
	CHECK(!child_do(&x.c, "lib 4242"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	CHECK(x.hits.count == 1 && x.hits.v[0].arg[0] == 4242 && x.hits.v[0].ip == x.c.lib);
	session_stop(&x);
}

TEST(breakpoint_in_library_loaded_later)
{
	struct session x;

	REQUIRE_SESSION(&x, 1, 0, HT_TRIGGERS_WAIT, "ht_trig_late_function");
	CHECK(!x.t.v[0].resolved);
	CHECK(!child_do(&x.c, "dlopen %s/libtriglate.so", trig_dir));
	/* The side-band events saw the new code mapped: time to resolve again. */
	CHECK(wait_readable(&x, 1000));
	CHECK(!drain(&x));
	CHECK(x.hits.mmaps >= 1);
	CHECK_EQ_U64(session_update(&x, HT_TRIGGERS_WAIT), 1);
	CHECK(x.t.v[0].resolved && x.t.v[0].addr == x.c.late);
	CHECK(!child_do(&x.c, "late 31337"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	CHECK(x.hits.count == 1 && x.hits.v[0].arg[0] == 31337 && x.hits.v[0].ip == x.c.late);
	session_stop(&x);
}

TEST(breakpoint_across_exec)
{
	struct session x;
	uint64_t old_work;

	/* Without randomization the new image puts trig_work where the old one had it. */
	REQUIRE_SESSION(&x, 1, 1, 0, "trig_work");
	old_work = x.c.work;
	CHECK(!child_do(&x.c, "call 1 5 5 5"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	/* The new image calls trig_work(77) three times before it says ready. */
	fprintf(x.c.to, "exec\n");
	fflush(x.c.to);
	CHECK(!read_banner(&x.c));
	CHECK(!drain(&x));
	CHECK(x.hits.execs >= 1);
	if (x.b.remove_on_exec == 1) {
		/* Removed at exec: nothing fired at the old address in the new image. */
		CHECK_EQ_U64(x.hits.count, 0);
		CHECK_EQ_U64(x.hits.stale, 0);
	} else {
		printf("     (no remove_on_exec on this kernel: stale hits possible)\n");
	}
	if (x.c.work != old_work)
		printf("     (randomized anyway: 0x%" PRIx64 " then 0x%" PRIx64 ")\n", old_work,
		       x.c.work);
	/* What the caller does on exec: drop the old image's breakpoints and resolutions. */
	CHECK(!ht_bp_exec(&x.b));
	CHECK_EQ_U64(x.b.addr[0], 0);
	ht_triggers_reset(&x.t);
	CHECK(!x.t.v[0].resolved);
	CHECK_EQ_U64(session_update(&x, 0), 1);
	CHECK_EQ_U64(x.t.v[0].addr, x.c.work);
	CHECK_EQ_U64(x.b.addr[0], x.c.work);
	CHECK(!child_do(&x.c, "call 2 88 0 1"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 2);
	CHECK(x.hits.count == 2 && x.hits.v[0].arg[0] == 88 && x.hits.v[1].arg[0] == 89);
	session_stop(&x);
}

TEST(breakpoint_on_stop_function)
{
	struct session x;

	REQUIRE_SESSION(&x, 0, 0, 0, ".");
	CHECK(!child_do(&x.c, "stop 123456789"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 1);
	CHECK(x.hits.count == 1 && x.hits.v[0].arg[0] == 123456789);
	CHECK(x.hits.count == 1 && !strcmp(function_at(x.s, x.hits.v[0].ip), "hybtrace_trigger"));
	session_stop(&x);
}

static void check_move(int force_reopen)
{
	struct session x;

	REQUIRE_SESSION(&x, 1, 0, 0, "trig_work");
	if (force_reopen)
		x.b.modify = 0;
	CHECK(!child_do(&x.c, "call 1 1 0 0"));
	CHECK(!ht_bp_set(&x.b, 0, x.c.other));
	CHECK(!child_do(&x.c, "call 1 2 0 0"));
	CHECK(!child_do(&x.c, "other 3"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 2);
	if (x.hits.count == 2) {
		CHECK(x.hits.v[0].ip == x.c.work && x.hits.v[0].arg[0] == 1);
		CHECK(x.hits.v[1].ip == x.c.other && x.hits.v[1].arg[0] == 3);
	}
	CHECK(force_reopen ? x.b.modify == 0 : x.b.modify == 1);
	/* Removed: nothing fires. */
	CHECK(!ht_bp_set(&x.b, 0, 0));
	CHECK(!child_do(&x.c, "other 4"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count + x.hits.stale, 0);
	session_stop(&x);
}

TEST(breakpoint_moves_in_place)
{
	check_move(0);
}

TEST(breakpoint_moves_by_reopening)
{
	check_move(1);
}

TEST(breakpoint_slot_rules)
{
	struct session x;

	REQUIRE_SESSION(&x, 1, 0, 0, "trig_work");
	CHECK(ht_bp_set(&x.b, 4, x.c.other) == -1);
	CHECK(ht_bp_set(&x.b, 1, x.c.work) == -1);
	CHECK(contains(ht_last_error(), "one breakpoint"));
	CHECK(!ht_bp_set(&x.b, 1, x.c.other));
	CHECK(!ht_bp_set(&x.b, 2, x.c.thread));
	CHECK(!ht_bp_set(&x.b, 3, x.c.lib));
	CHECK(!child_do(&x.c, "lib 1"));
	CHECK(!child_do(&x.c, "thread 1 2 3"));
	CHECK(!drain(&x));
	CHECK_EQ_U64(x.hits.count, 2);
	{
		int tids[2] = {x.c.pid, x.c.pid};

		CHECK(!ht_bp_add_threads(&x.b, tids, 2));
		CHECK_EQ_U64(x.b.nthreads, 1);
	}
	session_stop(&x);
}

TEST(breakpoint_records_parse_safely)
{
	uint8_t rec[256];
	struct perf_event_header h = {.type = PERF_RECORD_SAMPLE, .size = 16};
	struct ht_bp_hits hits = {0};
	uint64_t v[12] = {0};

	/* A sample cut short. */
	memcpy(rec, &h, sizeof(h));
	memset(rec + sizeof(h), 0, 8);
	ht_bp_parse_record(rec, 16, 7, &hits);
	CHECK_EQ_U64(hits.malformed, 1);
	CHECK_EQ_U64(hits.count, 0);
	/* Size beyond the buffer, and too small. */
	h.size = 200;
	memcpy(rec, &h, sizeof(h));
	ht_bp_parse_record(rec, 64, 7, &hits);
	h.size = 4;
	memcpy(rec, &h, sizeof(h));
	ht_bp_parse_record(rec, 64, 7, &hits);
	ht_bp_parse_record(rec, 3, 7, &hits);
	CHECK_EQ_U64(hits.malformed, 4);
	/* A whole one, of another process: foreign. Then ours. */
	v[0] = 0x401000;
	v[1] = 8 | (9ULL << 32);
	v[2] = 1000;
	v[3] = 1;
	v[4] = PERF_SAMPLE_REGS_ABI_64;
	v[5] = 3; /* dx */
	v[6] = 2; /* si */
	v[7] = 1; /* di */
	h.size = (uint16_t)(sizeof(h) + 8 * 8);
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), v, 8 * 8);
	ht_bp_parse_record(rec, h.size, 7, &hits);
	CHECK_EQ_U64(hits.foreign, 1);
	ht_bp_parse_record(rec, h.size, 8, &hits);
	CHECK_EQ_U64(hits.count, 1);
	CHECK(hits.count == 1 && hits.v[0].arg[0] == 1 && hits.v[0].arg[1] == 2 &&
	      hits.v[0].arg[2] == 3 && hits.v[0].tid == 9 && hits.v[0].cpu == 1);
	/* Lost records add up. */
	h.type = PERF_RECORD_LOST;
	h.size = sizeof(h) + 16;
	v[0] = 1;
	v[1] = 5;
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), v, 16);
	ht_bp_parse_record(rec, h.size, 8, &hits);
	CHECK_EQ_U64(hits.lost, 5);
	/* Random bytes never crash it. */
	srand(1);
	for (int i = 0; i < 20000; i++) {
		for (size_t k = 0; k < sizeof(rec); k++)
			rec[k] = (uint8_t)rand();
		ht_bp_parse_record(rec, (size_t)(rand() % (int)sizeof(rec)), 8, &hits);
	}
	ht_bp_hits_free(&hits);
}

/* ---- The stop function under -O3 -flto ---- */

static const char lto_main_c[] = "#include <hybtrace/hybtrace.h>\n"
				 "#include <stdio.h>\n"
				 "extern void elsewhere(int x);\n"
				 "static int scaled(int x)\n"
				 "{\n"
				 "	return x * 3;\n"
				 "}\n"
				 "int main(int argc, char **argv)\n"
				 "{\n"
				 "	char line[16];\n"
				 "	(void)argv;\n"
				 "	printf(\"ready\\n\");\n"
				 "	fflush(stdout);\n"
				 "	while (fgets(line, sizeof(line), stdin)) {\n"
				 "		hybtrace_trigger(0x1234);\n"
				 "		hybtrace_trigger((uint64_t)scaled(argc));\n"
				 "		elsewhere(argc);\n"
				 "		printf(\"ok\\n\");\n"
				 "		fflush(stdout);\n"
				 "	}\n"
				 "	return 0;\n"
				 "}\n";

static const char lto_other_c[] = "#include <hybtrace/hybtrace.h>\n"
				  "void elsewhere(int x)\n"
				  "{\n"
				  "	hybtrace_trigger((uint64_t)x + 100);\n"
				  "}\n";

/* Calls to hybtrace_trigger in PROGRAM's disassembly; -1 when it has no such symbol. */
static int count_stop_calls(const char *program)
{
	char cmd[512], line[512];
	int calls = 0, symbol = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm '%s/%s'", trig_dir, program);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p))
		symbol |= strstr(line, " hybtrace_trigger\n") != NULL &&
			  (strstr(line, " T ") || strstr(line, " W "));
	if (p)
		pclose(p);
	if (!symbol)
		return -1;
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn '%s/%s'", trig_dir, program);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p))
		calls += strstr(line, "call") && strstr(line, "<hybtrace_trigger>");
	if (p)
		pclose(p);
	return calls;
}

TEST(stop_function_survives_lto)
{
	char include[PATH_MAX + 16];
	struct ht_bp_config cfg = {0};
	struct ht_breakpoints b;
	struct ht_bp_hits hits = {0};
	struct ht_symbolizer *s = NULL;
	struct ht_triggers t;
	struct child c;
	char line[64];

	REQUIRE_FIRING();
	REQUIRE_PROGRAMS();
	CHECK(!prog_find_include_dir("hybtrace/hybtrace.h", include, sizeof(include)));
	if (prog_write_file(trig_dir, "lto_main.c", lto_main_c) ||
	    prog_write_file(trig_dir, "lto_other.c", lto_other_c)) {
		CHECK(!"cannot write the LTO program");
		return;
	}
	CHECK(!sh("cd '%s' && gcc -O3 -flto -Wall -Wextra -Werror -I'%s' -o lto_gcc lto_main.c "
		  "lto_other.c",
		  trig_dir, include));
	/* Every call is still a call: none inlined, none dropped, none to a clone. */
	CHECK_EQ_U64(count_stop_calls("lto_gcc"), 3);
	if (!system("command -v clang >/dev/null && command -v ld.lld >/dev/null")) {
		CHECK(!sh("cd '%s' && clang -O3 -flto -fuse-ld=lld -Wall -Wextra -Werror -I'%s' "
			  "-o lto_clang lto_main.c lto_other.c",
			  trig_dir, include));
		CHECK_EQ_U64(count_stop_calls("lto_clang"), 3);
	} else if (ci()) {
		/* make deps installs lld: CI runs both halves, as every machine should. */
		CHECK(!"ld.lld is missing (make deps installs lld), and CI=true");
	} else {
		printf("     (no clang with lld here: gcc only; make deps installs lld)\n");
	}
	if (geteuid() != 0) {
		if (ci())
			CHECK(!"needs root, and CI=true");
		return;
	}
	/* And the breakpoint on it sees each call with its argument in rdi. */
	memset(&c, 0, sizeof(c));
	c.pid = prog_start(trig_dir, "lto_gcc", "x", false, &c.to, &c.from);
	if (c.pid < 0) {
		CHECK(!"pipe");
		return;
	}
	CHECK(fgets(line, sizeof(line), c.from) && !strcmp(line, "ready\n"));
	s = ht_symbolizer_new(c.pid);
	ht_triggers_init(&t);
	cfg.tgid = c.pid;
	cfg.multi = 1;
	CHECK(s && !ht_triggers_add(&t, ".") && ht_triggers_resolve(&t, s, c.pid, 0) == 1);
	CHECK(!ht_bp_open(&b, &cfg));
	CHECK(!ht_bp_set(&b, 0, t.v[0].addr));
	CHECK(!child_do(&c, "go"));
	CHECK(!ht_bp_drain(&b, &hits));
	CHECK_EQ_U64(hits.count, 3);
	if (hits.count == 3) {
		CHECK_EQ_U64(hits.v[0].arg[0], 0x1234);
		CHECK_EQ_U64(hits.v[1].arg[0], 6); /* argc 2, times 3 */
		CHECK_EQ_U64(hits.v[2].arg[0], 102);
	}
	ht_bp_close(&b);
	ht_bp_hits_free(&hits);
	ht_symbolizer_free(s);
	child_stop(&c);
}
