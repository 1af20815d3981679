// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `hybtrace report` on dumps the project's own builder and writer made: a
 * directory listing with a manual dump in it, a breach's culprits as the
 * live JSON line gives them, syscall returns.
 */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kernel/breach_format.h"
#include "check.h"
#include "kernel/comm_cache.h"
#include "kernel/culprits.h"
#include "trace/dump_schema.h"
#include "kernel/kernel_timeline.h"
#include "trace/perfetto_write.h"
#include "cli/report.h"
#include "sources/sample/sampler.h"
#include "sources/sample/user_timeline.h"
#include "symbols/ksyms.h"
#include "trace/timeline.h"
#include "window_fixtures.h"

#define TGID 4000
#define A    4001 /* the target thread */
#define HOG  9000 /* another process, whose name holds brackets of its own */

static char dir[] = "/tmp/hybtrace-test-report-XXXXXX";
static struct ht_fr_event events[32];
static size_t nevents;
static struct ht_comm_cache comms;

static void add(unsigned int cpu, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t a, uint32_t b,
		uint16_t aux, uint64_t arg)
{
	events[nevents++] = fx_fr_event(cpu, ts, kind, flags, a, b, aux, arg);
}

/*
 * A dump as the builder makes it: the kernel window lowered into a timeline
 * with the metadata every dump has, written under NAME in the directory.
 */
static uint64_t dump_threshold_ns = 1000;
/* Kernel symbols for the breach's stack and samples of the target, when a test sets them. */
static const struct ht_ksyms *dump_ksyms;
static const struct ht_sample_set *dump_samples;
/* The process the dump says it is of (HT_META_PROCESS_PID), when a test sets it. */
static const char *dump_process_pid, *dump_process_comm;

static void write_dump(const char *name, const char *kind, uint64_t t0, uint64_t t1,
		       const struct ht_breach *breach)
{
	struct ht_fr_window w = fx_fr_window(events, nevents, t0, t1);
	struct timeline *tl = tl_new();
	struct ht_kernel_window kw = { .tgid = TGID, .target_comm = "target", .t0 = t0, .t1 = t1,
				       .w = &w, .comms = &comms, .breach = breach,
				       .threshold_ns = dump_threshold_ns, .ksyms = dump_ksyms };
	struct ht_user_window uw = { .t0 = t0, .t1 = t1, .period_ns = 100,
				     .samples = dump_samples, .breach = breach };
	char path[PATH_MAX], err[256], buf[32];
	struct pb_buf native;
	FILE *f;

	pb_buf_init(&native);
	CHECK(!fx_dump_lower(tl, &kw, &native));
	if (dump_samples)
		CHECK(!ht_user_timeline_build(tl, &uw));
	tl_meta_set(tl, HT_META_TARGET_PID, "4000");
	tl_meta_set(tl, HT_META_TARGET_COMM, "target");
	tl_meta_set(tl, HT_META_KIND, kind);
	if (dump_process_pid) {
		tl_meta_set(tl, HT_META_PROCESS_PID, dump_process_pid);
		tl_meta_set(tl, HT_META_PROCESS_COMM, dump_process_comm);
	}
	tl_meta_set(tl, HT_META_WALL_CLOCK, "2026-12-01T10:00:00.000+0000");
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)t0);
	tl_meta_set(tl, HT_META_WINDOW_START, buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)t1);
	tl_meta_set(tl, HT_META_WINDOW_END, buf);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK(!pftw_write_path(tl, path, err, sizeof(err)));
	/* The native scheduling data follows, as the dump builder appends it. */
	f = fopen(path, "ab");
	CHECK(f && fwrite(native.data, 1, native.len, f) == native.len && !fclose(f));
	pb_buf_free(&native);
	tl_free(tl);
}

/* What `hybtrace report ARGS...` prints on stdout; the caller frees it. */
static char *report(int argc, char **argv)
{
	char path[PATH_MAX], *text = NULL;
	int saved, fd;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s.out", dir);
	fflush(stdout);
	saved = dup(1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(saved >= 0 && fd >= 0);
	dup2(fd, 1);
	close(fd);
	CHECK(ht_report_main(argc, argv) == 0);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	f = fopen(path, "r");
	if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) {
		text = calloc(1, (size_t)n + 1);
		if (text && fread(text, 1, (size_t)n, f) != (size_t)n)
			text[0] = 0;
	}
	if (f)
		fclose(f);
	unlink(path);
	return text ? text : strdup("");
}

/* The part of a JSON text from "ran_instead" to the end of "ran_instead_unknown_ns". */
static char *ran_instead_of(const char *json)
{
	const char *from = strstr(json, "\"ran_instead\":");
	const char *last = from ? strstr(from, "\"ran_instead_unknown_ns\":") : NULL;
	size_t len;

	if (!last)
		return strdup("(none)");
	len = (size_t)(last - from) + strlen("\"ran_instead_unknown_ns\":");
	len += strspn(from + len, "0123456789");
	return strndup(from, len);
}

/*
 * A's wait on CPU 0, woken at 1000 by a timer and run at 5000: the hog held
 * the CPU from 500.
 */
static const struct ht_breach rq_breach = { .kind = HT_BREACH_RQ_DELAY, .tid = A, .tgid = TGID,
					    .start_ns = 1000, .end_ns = 5000, .comm = "worker" };

static void rq_delay_events(void)
{
	nevents = 0;
	add(0, 400, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	add(0, 500, HT_FR_SWITCH, 0, 0, HOG, 0, 0);
	add(0, 1000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 0, 0, HT_WAKE_TIMER);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, HOG, A, 0, 0);
}

static void remove_dir(void)
{
	sh("rm -rf '%s'", dir);
	ht_comm_cache_free(&comms);
}

/* Each test may run alone: the directory and its two dumps are made once. */
static void setup(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	CHECK(mkdtemp(dir) != NULL);
	atexit(remove_dir);
	ht_comm_cache_init(&comms, NULL);
	comms.offline = true;
	CHECK(!ht_comm_cache_seed(&comms, A, "worker"));
	CHECK(!ht_comm_cache_seed(&comms, HOG, "b[2] hog"));
	rq_delay_events();
	write_dump("hybtrace-4000-20261201-100000.000-rq-delay.perfetto-trace", "rq-delay", 100,
		   6000, &rq_breach);
	nevents = 0;
	write_dump("hybtrace-4000-20261201-100001.000-manual.perfetto-trace", "manual", 100, 6000,
		   NULL);
}

TEST(directory_lists_a_manual_dump_by_its_process)
{
	char *argv[] = { "report", dir, NULL }, *json_argv[] = { "report", "--json", dir, NULL };
	char *text, *json;

	setup();
	text = report(2, argv);
	json = report(3, json_argv);
	/* A manual dump has no breached thread: the row names the process. */
	CHECK(strstr(text, " manual ") && strstr(text, "pid 4000 (target)"));
	CHECK(!strstr(text, "tid 0"));
	CHECK(strstr(text, "tid 4001 (worker)"));
	CHECK(strstr(json, "\"kind\":\"manual\",\"duration_ns\":0,\"pid\":4000,\"process\":"
			   "\"target\",\"wall_clock\""));
	CHECK(strstr(json, "\"kind\":\"rq-delay\",\"duration_ns\":4000,\"threshold_ns\":1000,"
			   "\"tid\":4001,\"comm\":"
			   "\"worker\",\"pid\":4000,\"process\":\"target\""));
	if (!strstr(text, "pid 4000 (target)"))
		printf("     %s\n", text);
	free(text);
	free(json);
}

/*
 * Worst first, as the dump policy ranks: by the ratio to the threshold. A
 * longer wait over a higher threshold comes after a shorter one far over its.
 */
TEST(directory_lists_by_ratio_to_the_threshold)
{
	char *argv[] = { "report", "--json", dir, NULL }, *json, *longer, *shorter;
	static const char name[] = "hybtrace-4000-20261201-100002.000-rq-delay.perfetto-trace";
	struct ht_breach b = rq_breach;
	char path[PATH_MAX];

	setup();
	rq_delay_events();
	b.end_ns = 5500;
	dump_threshold_ns = 5000;
	write_dump(name, "rq-delay", 100, 6000, &b);
	dump_threshold_ns = 1000;
	json = report(3, argv);
	longer = strstr(json, "\"duration_ns\":4500");
	shorter = strstr(json, "\"duration_ns\":4000");
	CHECK(longer && shorter && shorter < longer);
	if (!longer || !shorter || shorter > longer)
		printf("     %s\n", json);
	free(json);
	/* The other tests list the directory as setup() made it. */
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK(!unlink(path));
}

/*
 * --by-process: the dumps of each process together, worst first, the
 * process whose worst is worst first; a dump made before dumps named their
 * process is its target's; a manual dump is of no process, last.
 */
TEST(directory_by_process_groups_worst_first)
{
	static const struct {
		const char *name, *pid, *comm;
		uint64_t threshold_ns; /* over a wait of 4000 ns */
	} dumps[] = {
		{ "a-2x", "5000", "alpha", 2000 }, { "b-3x", "6000", "beta", 1333 },
		{ "a-4x", "5000", "alpha", 1000 }, { "old-1.5x", NULL, NULL, 2666 },
	};
	char sub[PATH_MAX], name[64];
	char *argv[] = { "report", "--by-process", sub, NULL };
	char *json_argv[] = { "report", "--json", "--by-process", sub, NULL };
	char *text, *json, *a4, *a2, *b3, *old, *manual;

	setup();
	snprintf(sub, sizeof(sub), "%s/procs", dir);
	CHECK(!mkdir(sub, 0700));
	for (size_t i = 0; i < sizeof(dumps) / sizeof(dumps[0]); i++) {
		rq_delay_events();
		dump_process_pid = dumps[i].pid;
		dump_process_comm = dumps[i].comm;
		dump_threshold_ns = dumps[i].threshold_ns;
		snprintf(name, sizeof(name), "procs/%s.perfetto-trace", dumps[i].name);
		write_dump(name, "rq-delay", 100, 6000, &rq_breach);
	}
	dump_process_pid = dump_process_comm = NULL;
	dump_threshold_ns = 1000;
	nevents = 0;
	write_dump("procs/manual.perfetto-trace", "manual", 100, 6000, NULL);

	text = report(3, argv);
	a4 = strstr(text, "pid 5000 (alpha): 2 dumps\n");
	b3 = strstr(text, "\npid 6000 (beta): 1 dump\n");
	old = strstr(text, "\npid 4000 (target): 1 dump\n");
	manual = strstr(text, "\nof no process (manual, exit or unreadable): 1 dump\n");
	CHECK(a4 == text && b3 && old && manual && a4 < b3 && b3 < old && old < manual);
	CHECK(a4 && strstr(a4, "a-4x") < strstr(a4, "a-2x") && strstr(a4, "a-2x") < b3);
	CHECK(manual && strstr(manual, "manual.perfetto-trace"));
	if (!a4 || !b3 || !old || !manual)
		printf("     %s\n", text);

	json = report(4, json_argv);
	a4 = strstr(json, "[{\"pid\":5000,\"process\":\"alpha\",\"dumps\":[{\"file\":");
	a2 = a4 ? strstr(a4, "/a-2x.perfetto-trace") : NULL;
	b3 = strstr(json, "]},{\"pid\":6000,\"process\":\"beta\",\"dumps\":[{\"file\":");
	old = strstr(json, "]},{\"pid\":4000,\"process\":\"target\",\"dumps\":[{\"file\":");
	manual = strstr(json, "]},{\"pid\":null,\"process\":null,\"dumps\":[{\"file\":");
	CHECK(a4 == json && a2 && b3 && old && manual && a2 < b3 && b3 < old && old < manual);
	CHECK(a4 && strstr(a4, "/a-4x.perfetto-trace") < a2);
	if (!a4 || !b3 || !old || !manual)
		printf("     %s\n", json);
	free(text);
	free(json);
	sh("rm -rf '%s'", sub);
}

/* report --json gives a breach's culprits in the fields of the live JSON line. */
TEST(ran_instead_is_the_live_lines)
{
	char path[PATH_MAX], *argv[] = { "report", "--json", path, NULL };
	struct ht_breach_info bi = {.b = rq_breach, .threshold_ns = 1000, .have_culprits = true};
	struct ht_fr_window w;
	struct ht_sched_index idx;
	char *live = NULL, *reported, *a, *b;
	size_t live_len = 0;
	FILE *f;

	setup();
	rq_delay_events();
	snprintf(path, sizeof(path), "%s/hybtrace-4000-20261201-100000.000-rq-delay.perfetto-trace",
		 dir);
	/* The live side: culprits of the same window, as session.c computes them. */
	w = fx_fr_window(events, nevents, 100, 6000);
	CHECK(!ht_sched_index_build(&w, &idx));
	ht_culprits_compute(&w, &idx, A, rq_breach.start_ns, rq_breach.end_ns, true, 0,
			    &bi.culprits);
	ht_sched_index_free(&idx);
	for (unsigned int i = 0; i < bi.culprits.count; i++)
		ht_comm_lookup(&comms, bi.culprits.top[i].pid, bi.culprits.top[i].cpu,
			       bi.culprit_comm[i], sizeof(bi.culprit_comm[i]));
	f = open_memstream(&live, &live_len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	reported = report(3, argv);
	a = ran_instead_of(live);
	b = ran_instead_of(reported);
	CHECK_STR(b, a);
	CHECK_STR(a, "\"ran_instead\":[{\"pid\":9000,\"comm\":\"b[2] hog\",\"cpu\":0,\"ns\":4000}],"
		     "\"ran_instead_other_ns\":0,\"ran_instead_unknown_ns\":0");
	free(a);
	free(b);
	free(live);
	free(reported);
}

/* A syscall's line: the wakeup that ended its sleep, then the preemption after it. */
TEST(syscall_line_names_its_waker_then_its_preemption)
{
	struct ht_breach_info bi = {
		.b = { .kind = HT_BREACH_SYSCALL, .tid = A, .tgid = TGID, .start_ns = 1000000,
		       .end_ns = 21000000, .wake_ns = 19800000, .state = 1, .syscall_nr = 230,
		       .wake_source = HT_WAKE_TIMER, .comm = "worker" },
		.have_culprits = true,
		.culprits = { .top = { { .pid = HOG, .cpu = 1, .ns = 1000000 } },
			      .count = 1,
			      .unknown_ns = 200000,
			      .runnable_ns = 1200000,
			      .preemptions = 1 },
	};
	char *text = NULL, *json = NULL;
	size_t len = 0;
	FILE *f;

	snprintf(bi.culprit_comm[0], sizeof(bi.culprit_comm[0]), "fifo_hog");
	f = open_memstream(&text, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	fclose(f);
	CHECK(strstr(text, ": clock_nanosleep = 0; woken by timer; then runnable 1.20ms, "
			   "preempted once: ran instead fifo_hog[9000] 1.00ms\n"));
	f = open_memstream(&json, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	CHECK(strstr(json, "\"state\":\"S\""));
	CHECK(strstr(json, "\"woken_by\":{\"source\":\"timer\",\"at_ns\":19800000}"));
	CHECK(strstr(json, "\"ran_instead_unknown_ns\":200000,\"ran_instead_idle_ns\":0,"
			   "\"runnable_ns\":1200000,\"preemptions\":1"));
	if (!strstr(text, "preempted once"))
		printf("     %s", text);
	free(text);
	free(json);
}

TEST(syscall_returns_name_their_errno)
{
	char path[PATH_MAX], *argv[] = { "report", path, NULL }, *text;

	setup();
	nevents = 0;
	add(0, 1000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 270 /* pselect6 */, 0);
	add(0, 3000, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 270, (uint64_t)-514);
	write_dump("hybtrace-4000-20261201-100002.000-exit.perfetto-trace", "exit", 100, 6000, NULL);
	snprintf(path, sizeof(path), "%s/hybtrace-4000-20261201-100002.000-exit.perfetto-trace", dir);
	text = report(2, argv);
	CHECK(strstr(text, "pselect6 2.0us = -514 (ERESTARTNOHAND: interrupted by a signal"));
	if (!strstr(text, "ERESTARTNOHAND"))
		printf("     %s\n", text);
	free(text);
}

/*
 * A's read from 1000 to 30200, asleep in it from 1100 to 30100, woken by B:
 * one wait over both thresholds (syscall 10us, off-CPU 5us).
 */
#define B 4002
static const struct ht_breach both_breach = {
	.kind = HT_BREACH_SYSCALL, .kinds = 1U << HT_BREACH_OFF_CPU | 1U << HT_BREACH_SYSCALL,
	.tid = A, .tgid = TGID, .start_ns = 1000, .end_ns = 30200, .syscall_nr = 0 /* read */,
	.syscall_ret = 1, .state = 1, .wake_source = HT_WAKE_TASK, .waker_tid = B,
	.waker_tgid = TGID, .wake_ns = 30000, .comm = "worker", .waker_comm = "writer",
	.off_cpu_start_ns = 1100, .off_cpu_end_ns = 30100, .off_cpu_waits = 2,
	.off_cpu_threshold_ns = 5000
};

static void both_events(void)
{
	nevents = 0;
	add(0, 1000, HT_FR_SYS_ENTER, HT_FRF_TARGET, A, 0, 0, 3);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	/* B wakes it from CPU 1, where B runs then (the native waking's waker). */
	add(1, 29000, HT_FR_SWITCH, 0, 0, B, 0, 0);
	add(1, 30000, HT_FR_WAKEUP, HT_FRF_TARGET, A, B, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 30100, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	add(0, 30200, HT_FR_SYS_EXIT, HT_FRF_TARGET, A, 0, 0, 1);
}

/* The dump of one wait of both kinds: report names both, and ranks it by the larger ratio. */
TEST(one_wait_of_both_kinds_in_its_dump)
{
	static const char name[] = "hybtrace-4000-20261201-100003.000-off-cpu+syscall.perfetto-trace";
	char path[PATH_MAX], *argv[] = { "report", path, NULL };
	char *jargv[] = { "report", "--json", path, NULL }, *dargv[] = { "report", "--json", dir, NULL };
	char *text, *json, *listing;

	setup();
	both_events();
	dump_threshold_ns = 10000;
	write_dump(name, "off-cpu+syscall", 100, 31000, &both_breach);
	dump_threshold_ns = 1000;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = report(2, argv);
	CHECK(!strncmp(text, "off-cpu+syscall 29.2us (threshold 10.0us), off-cpu 29.0us of it "
			     "(threshold 5.0us) in tid 4001 (worker)", 82));
	if (strncmp(text, "off-cpu+syscall", 15))
		printf("     %.300s\n", text);
	json = report(3, jargv);
	CHECK(strstr(json, "\"kind\":\"off-cpu+syscall\"") != NULL);
	CHECK(strstr(json, "\"kinds\":[\"off-cpu\",\"syscall\"],\"off_cpu_duration_ns\":29000,"
			   "\"off_cpu_threshold_ns\":5000,\"duration_ns\":29200,"
			   "\"threshold_ns\":10000") != NULL);
	/* Its off-CPU slice is the breach's, from 1100 to the wakeup: the one report describes. */
	CHECK(strstr(json, "\"off_cpu\":{\"state\":\"S\",\"syscall\":\"read\",\"ns\":28900}") != NULL);
	CHECK(strstr(json, "\"what\":\"BREACH ends off-cpu+syscall 29.2us\"") != NULL);
	if (!strstr(json, "\"off_cpu\":{\"state\":\"S\",\"syscall\":\"read\",\"ns\":28900}"))
		printf("     %.4000s\n", json);
	/*
	 * Listed by the larger ratio, 29.0us over 5us (5.8x), before the rq-delay
	 * dump's 4.0x; by the syscall's alone (2.92x) it would come after.
	 */
	listing = report(3, dargv);
	CHECK(strstr(listing, "off-cpu+syscall.perfetto") &&
	      strstr(listing, "off-cpu+syscall.perfetto") < strstr(listing, "rq-delay.perfetto"));
	free(text);
	free(json);
	free(listing);
	CHECK(!unlink(path));
}

/* The live line and JSON object of one wait of both kinds. */
TEST(one_wait_of_both_kinds_live)
{
	struct ht_breach_info bi = { .b = both_breach,
				     .threshold_ns = 10000,
				     .since_start_s = 1.5,
				     .process_comm = "server" };
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	CHECK(!strncmp(out, "1.500000 off-cpu+syscall 29.2us tid 4001 (worker) pid 4000 (server) "
			    "cpu 0: read = 1, off-cpu 29.0us (the longest of 2) in state S; woken "
			    "by 4002 (writer)\n",
		       146));
	CHECK(strstr(out, "\"tid\":4001,\"comm\":\"worker\",\"process_comm\":\"server\"") != NULL);
	CHECK(strstr(out, "\"kind\":\"syscall\",\"duration_ns\":29200,\"threshold_ns\":10000") !=
	      NULL);
	CHECK(strstr(out, "\"kinds\":[\"off-cpu\",\"syscall\"],\"off_cpu\":{\"start_ns\":1100,"
			  "\"end_ns\":30100,\"duration_ns\":29000,\"threshold_ns\":5000,"
			  "\"waits_over_threshold\":2}") != NULL);
	if (!strstr(out, "\"waits_over_threshold\":2"))
		printf("     %s\n", out);
	/* A record of one kind says that kind alone. */
	bi.b = rq_breach;
	len = 0;
	free(out);
	out = NULL;
	f = open_memstream(&out, &len);
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	CHECK(strstr(out, "\"kinds\":[\"rq-delay\"],\"cpu\"") != NULL);
	free(out);
}

/*
 * A thread in a container's pid namespace: the live line adds its pids there
 * beside the process, the JSON ns_pid and ns_tid; a thread of the initial
 * namespace (ns_tid 0) has neither.
 */
TEST(a_thread_in_a_container_names_its_pids_there)
{
	struct ht_breach_info bi = { .b = both_breach,
				     .threshold_ns = 10000,
				     .process_comm = "server" };
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	bi.b.ns_tid = 8;
	bi.b.ns_tgid = 7;
	f = open_memstream(&out, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	ht_breach_print_json(f, &bi, NULL);
	/* The process's first thread: one pid. */
	bi.b.tid = bi.b.tgid;
	bi.b.ns_tid = 7;
	snprintf(bi.b.comm, sizeof(bi.b.comm), "server");
	ht_breach_print_text(f, &bi);
	/* The initial namespace: no word of it. */
	bi.b.ns_tid = 0;
	bi.b.ns_tgid = 0;
	ht_breach_print_text(f, &bi);
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	CHECK(strstr(out, " tid 4001 (worker) pid 4000 (server) [ns tid 8 pid 7] cpu 0: read = 1"));
	CHECK(strstr(out, "\"process_comm\":\"server\",\"ns_pid\":7,\"ns_tid\":8,\"kinds\""));
	CHECK(strstr(out, " tid 4000 (server) [ns pid 7] cpu 0: read = 1"));
	CHECK(strstr(out, " tid 4000 (server) cpu 0: read = 1"));
	/* Of the two JSON objects, the first alone. */
	CHECK(strstr(out, "\"ns_") && !strstr(strstr(out, "\"ns_") + 1, "\"ns_pid\""));
	free(out);
}

#define SENDER 7000 /* another process, whose send ran the softirq that woke A */

/*
 * A sleeps at 400; SENDER's send on CPU 1 runs net_rx, which wakes A at
 * 2000 onto CPU 0, idle until A runs at 2300. The live line, the live JSON,
 * the report and its JSON name the softirq and SENDER; the idle CPU is no
 * culprit.
 */
TEST(a_softirq_wakeup_names_the_task_it_ran_in)
{
	static const char name[] = "hybtrace-4000-20261201-100003.000-off-cpu.perfetto-trace";
	const uint64_t arg = HT_WAKE_SOFTIRQ | 1 << 8 | (uint64_t)3 << HT_FR_WAKE_VEC_SHIFT;
	struct ht_breach_info bi = {
		.b = { .kind = HT_BREACH_OFF_CPU, .tid = A, .tgid = TGID, .start_ns = 400,
		       .end_ns = 2300, .wake_ns = 2000, .state = 1, .syscall_nr = -1,
		       .wake_source = HT_WAKE_SOFTIRQ, .softirq_vec = 3, .waker_tid = SENDER,
		       .waker_tgid = SENDER, .comm = "worker", .waker_comm = "sender" },
		.have_culprits = true,
		.culprits = { .idle_ns = 300, .runnable_ns = 300 },
	};
	char path[PATH_MAX], *argv[] = { "report", "--json", path, NULL };
	char *text_argv[] = { "report", path, NULL };
	char *line = NULL, *json = NULL, *reported, *reported_text;
	size_t len = 0;
	FILE *f;

	setup();
	CHECK(!ht_comm_cache_seed(&comms, SENDER, "sender"));
	nevents = 0;
	add(0, 400, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	add(1, 450, HT_FR_SWITCH, 0, 0, SENDER, 0, 0);
	add(1, 2000, HT_FR_WAKEUP, HT_FRF_TARGET | HT_FRF_FROM_IRQ, A, SENDER, 0, arg);
	add(0, 2300, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	write_dump(name, "off-cpu", 100, 3000, &bi.b);
	nevents = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);

	f = open_memstream(&line, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	fclose(f);
	CHECK(strstr(line, ": woken by softirq (net_rx) in sender[7000]"));
	f = open_memstream(&json, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_json(f, &bi, NULL);
	fclose(f);
	CHECK(strstr(json, "\"woken_by\":{\"source\":\"softirq\",\"at_ns\":2000,"
			   "\"softirq\":\"net_rx\",\"tid\":7000,\"pid\":7000,\"comm\":\"sender\","
			   "\"exiting\":false}"));
	CHECK(strstr(json, "\"ran_instead\":[],\"ran_instead_other_ns\":0,"
			   "\"ran_instead_unknown_ns\":0,\"ran_instead_idle_ns\":300"));

	reported = report(3, argv);
	/* The same fields; the dump knows the pid of the target's threads only. */
	CHECK(strstr(reported, "\"woken_by\":{\"source\":\"softirq\",\"at_ns\":2000,"
			       "\"softirq\":\"net_rx\",\"tid\":7000,\"pid\":null,"
			       "\"comm\":\"sender\"}"));
	CHECK(strstr(reported, "\"ran_instead\":[],\"ran_instead_other_ns\":0,"
			       "\"ran_instead_unknown_ns\":0,\"ran_instead_idle_ns\":300"));
	reported_text = report(2, text_argv);
	CHECK(strstr(reported_text, "woken by softirq (net_rx) in sender[7000]"));
	CHECK(strstr(reported_text, "(its CPU idle)"));
	CHECK(!strstr(reported_text, "[0]"));
	if (!strstr(reported, "net_rx") || !strstr(reported_text, "net_rx"))
		printf("     %s\n     %s\n     %s", line, reported, reported_text);
	free(line);
	free(json);
	free(reported);
	free(reported_text);
	/* The other tests list the directory as setup() made it. */
	CHECK(!unlink(path));
}

/*
 * A run-queue wait of A from 3000 whose wakeup the kernel did not trace:
 * the breach names no waker, and neither does the report, though the
 * window holds A's older wait, woken by SENDER at 1000.
 */
TEST(a_wait_whose_wakeup_went_untraced_names_no_older_waker)
{
	static const char name[] = "hybtrace-4000-20261201-100004.000-rq-delay.perfetto-trace";
	struct ht_breach b = { .kind = HT_BREACH_RQ_DELAY, .tid = A, .tgid = TGID,
			       .start_ns = 3000, .end_ns = 5000, .state = 1, .syscall_nr = -1,
			       .comm = "worker" };
	char path[PATH_MAX], *argv[] = { "report", "--json", path, NULL };
	char *reported;

	setup();
	CHECK(!ht_comm_cache_seed(&comms, SENDER, "sender"));
	nevents = 0;
	add(0, 400, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	add(1, 450, HT_FR_SWITCH, 0, 0, SENDER, 0, 0);
	add(1, 1000, HT_FR_WAKEUP, HT_FRF_TARGET, A, SENDER, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 1100, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	add(0, 1500, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	write_dump(name, "rq-delay", 100, 6000, &b);
	nevents = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	reported = report(3, argv);
	CHECK(strstr(reported, "\"woken_by\":null"));
	CHECK(strstr(reported, "\"wakeup_chain\":[]"));
	if (!strstr(reported, "\"woken_by\":null"))
		printf("     %.1500s\n", reported);
	free(reported);
	CHECK(!unlink(path));
}

/* A sample of A at T_NS, frames by address (no symbolizer), ROOT first. */
static void add_sample(struct ht_sample_set *set, uint64_t t_ns, const uint64_t *root_first,
		       unsigned int n)
{
	struct ht_sample *smp = &set->v[set->count++];

	memset(smp, 0, sizeof(*smp));
	smp->time_ns = t_ns;
	smp->pid = TGID;
	smp->tid = A;
	smp->nr_user = (uint16_t)n;
	for (unsigned int i = 0; i < n; i++)
		smp->frames[i] = root_first[n - 1 - i]; /* perf's order: leaf first */
}

/*
 * The report of an off-CPU wait, from the dump file: A slept at 400 in
 * schedule() under do_nanosleep(), a timer woke it at 1000, the hog held its
 * CPU until 5000. The headline names the breach, it slept 600ns, the culprit
 * took the whole 4.0us of the run-queue wait, the timer woke it, the kernel stack is the breach's
 * (root first, as "innermost last" says), and the user stacks are A's samples at 300 (100ns before
 * it blocked) and at 5100 (after it came back).
 */
TEST(off_cpu_wait_prints_its_breach_culprit_and_stacks)
{
	static const char name[] = "hybtrace-4000-20261201-100004.000-off-cpu.perfetto-trace";
	static const uint64_t starts[] = {0xffffffff81000000ull, 0xffffffff81001000ull,
					  0xffffffff81002000ull};
	static const char *const knames[] = {"schedule", "do_nanosleep", "hrtimer_nanosleep"};
	static const uint64_t before[] = {0x1000, 0x2000, 0x3000}, after[] = {0x1000, 0x4000};
	struct ht_breach b = {.kind = HT_BREACH_OFF_CPU,
			      .tid = A,
			      .tgid = TGID,
			      .start_ns = 400,
			      .end_ns = 5000,
			      .wake_ns = 1000,
			      .state = 1,
			      .syscall_nr = -1,
			      .wake_source = HT_WAKE_TIMER,
			      .comm = "worker"};
	struct ht_sample v[3];
	struct ht_sample_set set = {.v = v};
	char path[PATH_MAX], *argv[] = {"report", path, NULL}, *text;
	char *jargv[] = {"report", "--json", path, NULL};
	struct ht_ksyms *ksyms = ht_ksyms_from_list(starts, knames, 3);

	setup();
	CHECK(ksyms != NULL);
	/* BPF's order: the leaf first. */
	b.kstack[0] = starts[0] + 0x10;
	b.kstack[1] = starts[1] + 0x20;
	b.kstack[2] = starts[2] + 0x8;
	b.kstack_bytes = 3 * 8;
	add_sample(&set, 300, before, 3);
	add_sample(&set, 5100, after, 2);
	rq_delay_events();
	dump_ksyms = ksyms;
	dump_samples = &set;
	write_dump(name, "off-cpu", 100, 6000, &b);
	dump_ksyms = NULL;
	dump_samples = NULL;
	nevents = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = report(2, argv);
	CHECK(!strncmp(text,
		       "off-cpu 4.6us (threshold 1.0us) in tid 4001 (worker) of pid 4000 "
		       "(target)\n",
		       strlen("off-cpu 4.6us (threshold 1.0us) in tid 4001 (worker) of pid 4000 "
			      "(target)\n")));
	CHECK(strstr(text, "\nran instead, during the 4.0us run-queue wait:\n"
			   "  b[2] hog[9000]                    4.0us  100.0%\n"));
	/* Asleep from 400 to the wakeup at 1000; the rest of the breach was the run-queue wait. */
	CHECK(strstr(text, "\noff the CPU: state S for 600ns\n"));
	CHECK(strstr(text, "\nkernel stack where it waited (innermost last):\n"
			   "  hrtimer_nanosleep+0x8\n  do_nanosleep+0x20\n  schedule+0x10\n"));
	CHECK(strstr(text, "\nlast sample 100ns before it blocked (-0.000ms, innermost last):\n"
			   "  0x1000\n  0x2000\n  0x3000\n"));
	CHECK(strstr(text, "\nuser stack just after it came back (+0.005ms, innermost last):\n"
			   "  0x1000\n  0x4000\n"));
	CHECK(strstr(text, "\nwakeup chain:\n  worker[4001] woken by timer at +0.001ms\n"));
	if (!strstr(text, "schedule+0x10") || !strstr(text, "hog[9000]"))
		printf("%s\n", text);
	free(text);
	/* The same in report --json: the stacks in the same order, the gap before it blocked. */
	text = report(3, jargv);
	CHECK(strstr(text, "\"user_stack_blocked\":[],\"user_stack_before\":[\"0x1000\","
			   "\"0x2000\",\"0x3000\"],\"user_stack_before_gap_ns\":100,"
			   "\"user_stack_after\":[\"0x1000\",\"0x4000\"],\"kernel_stack\":["
			   "\"hrtimer_nanosleep+0x8\",\"do_nanosleep+0x20\",\"schedule+0x10\"]"));
	CHECK(strstr(text, "\"ran_instead\":[{\"pid\":9000,\"comm\":\"b[2] hog\",\"cpu\":0,"
			   "\"ns\":4000}]"));
	if (!strstr(text, "\"kernel_stack\":[\"hrtimer"))
		printf("%s\n", text);
	free(text);
	ht_ksyms_free(ksyms);
	/* The other tests list the directory as setup() made it. */
	CHECK(!unlink(path));
}

/*
 * A dump of two processes (a worker of another service woke the target's
 * thread): each thread is labelled with its own process in the text, and
 * the JSON timeline names it in "pid" and "process" beside an unchanged
 * "thread". A dump of one process keeps its labels as they were.
 */
TEST(threads_of_several_processes_name_their_process)
{
	char path[PATH_MAX], *argv[] = { "report", path, NULL };
	char *json_argv[] = { "report", "--json", path, NULL };
	char *text, *json;

	setup();
	CHECK(!ht_comm_cache_seed(&comms, 5000, "other"));
	CHECK(!ht_comm_cache_seed(&comms, 5001, "peer"));
	CHECK(!ht_comm_cache_seed_tgid(&comms, 5001, 5000));
	CHECK(!ht_comm_cache_seed_tgid(&comms, A, TGID));
	nevents = 0;
	add(0, 400, HT_FR_SWITCH, HT_FRF_PREV_TARGET, A, 0, 0, 1 /* S */);
	add(1, 800, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, 5001, 0, 0);
	add(0, 1000, HT_FR_WAKEUP, HT_FRF_TARGET, A, 5001, 0, HT_WAKE_TASK | 1 << 8);
	add(0, 5000, HT_FR_SWITCH, HT_FRF_NEXT_TARGET, 0, A, 0, 0);
	write_dump("two-processes.perfetto-trace", "rq-delay", 100, 6000, &rq_breach);
	snprintf(path, sizeof(path), "%s/two-processes.perfetto-trace", dir);
	text = report(2, argv);
	CHECK(strstr(text, " worker[4001] pid 4000 (target) ") != NULL);
	CHECK(strstr(text, " peer[5001] pid 5000 (other) ") != NULL);
	json = report(3, json_argv);
	CHECK(strstr(json, "\"thread\":\"peer[5001]\",\"pid\":5000,\"process\":\"other\"") != NULL);
	CHECK(strstr(json, "\"thread\":\"worker[4001]\",\"pid\":4000,\"process\":\"target\"") !=
	      NULL);
	free(text);
	free(json);
	/* One process: "comm[tid]" alone, as before. */
	snprintf(path, sizeof(path), "%s/hybtrace-4000-20261201-100000.000-rq-delay.perfetto-trace",
		 dir);
	text = report(2, argv);
	CHECK(strstr(text, " worker[4001] ") && !strstr(text, "worker[4001] pid"));
	free(text);
}
