// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "cli/options.h"
#include "base/syscalls.h"

TEST(durations_with_units)
{
	uint64_t ns = 0;

	CHECK(!ht_parse_duration("2ms", &ns));
	CHECK_EQ_U64(ns, 2000000);
	CHECK(!ht_parse_duration("500us", &ns));
	CHECK_EQ_U64(ns, 500000);
	CHECK(!ht_parse_duration("1.5s", &ns));
	CHECK_EQ_U64(ns, 1500000000);
	CHECK(!ht_parse_duration("250ns", &ns));
	CHECK_EQ_U64(ns, 250);
	CHECK(!ht_parse_duration("0.25ms", &ns));
	CHECK_EQ_U64(ns, 250000);
	CHECK(!ht_parse_duration("0ms", &ns));
	CHECK_EQ_U64(ns, 0);
}

TEST(durations_rejected)
{
	static const char *const bad[] = { "-1ms", "5parsecs", "", "ms", "5", "1.ms", ".5ms",
					   "1ms2", "99999999999999999999s", "1e3ms", " 1ms",
					   "1 ms", "0x10ms" };
	uint64_t ns = 77;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = ht_parse_duration(bad[i], &ns);

		if (rc != -1)
			printf("     accepted '%s'\n", bad[i]);
		CHECK(rc == -1);
		CHECK(ht_last_error()[0] != '\0');
	}
	CHECK(ht_parse_duration(NULL, &ns) == -1);
	CHECK_EQ_U64(ns, 77);
}

TEST(duration_overflow_is_an_error)
{
	uint64_t ns;

	/* 18446744073 s overflows nanoseconds in 64 bits. */
	CHECK(ht_parse_duration("18446744074s", &ns) == -1);
	CHECK(!ht_parse_duration("18446744073s", &ns));
}

TEST(sizes)
{
	uint64_t b = 0;

	CHECK(!ht_parse_size("4M", &b));
	CHECK_EQ_U64(b, 4ULL << 20);
	CHECK(!ht_parse_size("64k", &b));
	CHECK_EQ_U64(b, 64ULL << 10);
	CHECK(!ht_parse_size("1G", &b));
	CHECK_EQ_U64(b, 1ULL << 30);
	CHECK(!ht_parse_size("65536", &b));
	CHECK_EQ_U64(b, 65536);
	CHECK(!ht_parse_size("2MiB", &b));
	CHECK_EQ_U64(b, 2ULL << 20);
	CHECK(!ht_parse_size("1.5M", &b));
	CHECK_EQ_U64(b, 3ULL << 19);
	CHECK(ht_parse_size("-4M", &b) == -1);
	CHECK(ht_parse_size("4Q", &b) == -1);
	CHECK(ht_parse_size("", &b) == -1);
	CHECK(ht_parse_size("M", &b) == -1);
	CHECK(ht_parse_size("99999999999999G", &b) == -1);
}

TEST(syscall_names_and_lists)
{
	uint64_t bitmap[HT_MAX_SYSCALLS / 64];
	int read_nr = ht_syscall_number("read"), futex_nr = ht_syscall_number("futex");

	CHECK(read_nr == 0);
	CHECK(futex_nr == 202);
	CHECK_STR(ht_syscall_name(230), "clock_nanosleep");
	CHECK(ht_syscall_name(-1) == NULL);
	CHECK(ht_syscall_name(100000) == NULL);
	CHECK(!ht_parse_syscall_list("syscalls", "read,futex", bitmap));
	CHECK(bitmap[0] & 1);
	CHECK(bitmap[futex_nr / 64] & (1ULL << (futex_nr % 64)));
	CHECK(!(bitmap[0] & 2));
	CHECK(ht_parse_syscall_list("syscalls", "read,nosuchcall", bitmap) == -1);
	CHECK(strstr(ht_last_error(), "nosuchcall") != NULL);
	CHECK(ht_parse_syscall_list("syscalls", "", bitmap) == -1);
	CHECK(ht_parse_syscall_list("syscalls", ",", bitmap) == -1);
}

static int parse(const char *const *args, int n, bool run, struct ht_options *o)
{
	char *argv[32];
	bool help;

	for (int i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	argv[n] = NULL;
	ht_options_init(o);
	return ht_options_parse(o, n, argv, run, &help);
}

TEST(record_options)
{
	static const char *const args[] = { "hybtrace", "--pid",   "42",	  "--rq-delay",
					    "2ms",	"--off-cpu", "10ms",	  "--syscall",
					    "5ms",	"--syscalls", "read,futex", "--json" };
	struct ht_options o;

	CHECK(!parse(args, 12, false, &o));
	CHECK(o.pid == 42);
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_RQ_DELAY], 2000000);
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_OFF_CPU], 10000000);
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_SYSCALL], 5000000);
	CHECK(o.syscall_filter_on);
	CHECK(o.json);
	CHECK_EQ_U64(o.history_bytes, HT_DEFAULT_HISTORY_BYTES);
}

TEST(defaults)
{
	static const char *const args[] = { "hybtrace", "-p", "7" };
	struct ht_options o;

	CHECK(!parse(args, 3, false, &o));
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_RQ_DELAY], 1000000);
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_OFF_CPU], 0);
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_SYSCALL], 0);
	/* At least 1 s at 100k switches/s of 32-byte records. */
	CHECK(o.history_bytes >= 100000ULL * sizeof(struct ht_flight_record));
}

TEST(record_options_rejected)
{
	static const char *const unknown[] = { "hybtrace", "--pid", "1", "--frobnicate" };
	static const char *const no_value[] = { "hybtrace", "--pid" };
	static const char *const bad_dur[] = { "hybtrace", "--pid", "1", "--rq-delay", "5parsecs" };
	static const char *const zero[] = { "hybtrace", "--pid", "1", "--rq-delay", "0ms" };
	static const char *const no_pid[] = { "hybtrace", "--rq-delay", "1ms" };
	static const char *const filter_alone[] = { "hybtrace", "--pid", "1", "--syscalls", "read" };
	static const char *const stray[] = { "hybtrace", "--pid", "1", "extra" };
	static const char *const history[] = { "hybtrace", "--pid", "1", "--history", "1k" };
	struct ht_options o;

	CHECK(parse(unknown, 4, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--frobnicate") != NULL);
	CHECK(parse(no_value, 2, false, &o) == -1);
	CHECK(parse(bad_dur, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "rq-delay") != NULL);
	CHECK(parse(zero, 5, false, &o) == -1);
	CHECK(parse(no_pid, 3, false, &o) == -1);
	CHECK(parse(filter_alone, 5, false, &o) == -1);
	CHECK(parse(stray, 4, false, &o) == -1);
	CHECK(parse(history, 5, false, &o) == -1);
}

TEST(off_disables_a_threshold)
{
	static const char *const args[] = { "hybtrace", "--pid", "3", "--rq-delay", "off" };
	struct ht_options o;

	CHECK(!parse(args, 5, false, &o));
	CHECK_EQ_U64(o.threshold_ns[HT_BREACH_RQ_DELAY], 0);
}

TEST(dump_policy_option)
{
	static const char *const first[] = { "hybtrace", "--pid", "3", "--dump-policy", "first" };
	static const char *const worst[] = { "hybtrace", "--pid", "3", "--dump-policy", "worst" };
	static const char *const bad[] = { "hybtrace", "--pid", "3", "--dump-policy", "last" };
	static const char *const none[] = { "hybtrace", "--pid", "3" };
	struct ht_options o;

	CHECK(!parse(none, 3, false, &o));
	CHECK(o.dump_rule == HT_DUMP_RULE_WORST);
	CHECK(!parse(first, 5, false, &o));
	CHECK(o.dump_rule == HT_DUMP_RULE_FIRST);
	CHECK(!parse(worst, 5, false, &o));
	CHECK(o.dump_rule == HT_DUMP_RULE_WORST);
	CHECK(parse(bad, 5, false, &o) == -1);
	CHECK_STR(ht_last_error(), "--dump-policy: 'last' is not worst or first");
}

TEST(max_dumps_per_process_option)
{
	static const char *const set[] = { "hybtrace", "--pid", "3", "--max-dumps-per-process",
					   "2" };
	static const char *const zero[] = { "hybtrace", "--pid", "3", "--max-dumps-per-process",
					    "00" };
	static const char *const bad[] = { "hybtrace", "--pid", "3", "--max-dumps-per-process",
					   "two" };
	static const char *const none[] = { "hybtrace", "--pid", "3" };
	struct ht_options o;

	CHECK(!parse(none, 3, false, &o));
	CHECK_EQ_U64(o.max_dumps_per_process, 0);
	CHECK(!parse(set, 5, false, &o));
	CHECK_EQ_U64(o.max_dumps_per_process, 2);
	CHECK_EQ_U64(o.max_dumps, HT_DEFAULT_MAX_DUMPS);
	CHECK(parse(zero, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--max-dumps 0") != NULL);
	CHECK(parse(bad, 5, false, &o) == -1);
	CHECK_STR(ht_last_error(),
		  "--max-dumps-per-process: 'two' is not a count from 0 to 1000000");
}

TEST(off_cpu_state_lists)
{
	uint32_t states = 0;

	CHECK(!ht_parse_state_list("D", &states));
	CHECK_EQ_U64(states, 1U << 2);
	CHECK(!ht_parse_state_list("S,D", &states));
	CHECK_EQ_U64(states, (1U << 1) | (1U << 2));
	/* The letters the live line prints, TASK_IDLE's I included. */
	CHECK(!ht_parse_state_list("S,D,T,t,X,Z,P,I", &states));
	CHECK_EQ_U64(states, 0x1fe);
	/* R is no off-CPU state: a thread preempted while runnable is a run-queue wait. */
	CHECK(ht_parse_state_list("R", &states) == -1);
	CHECK(strstr(ht_last_error(), "R is not an off-CPU state") != NULL);
	CHECK(ht_parse_state_list("S,Q", &states) == -1);
	CHECK_STR(ht_last_error(), "--off-cpu-states: unknown state 'Q': use S, D, T, t, X, Z, P "
				   "or I, as the live line prints them");
	CHECK(ht_parse_state_list("s", &states) == -1);
	CHECK(strstr(ht_last_error(), "unknown state 's'") != NULL);
	CHECK(ht_parse_state_list("SD", &states) == -1);
	CHECK(strstr(ht_last_error(), "unknown state 'SD'") != NULL);
	CHECK(ht_parse_state_list("", &states) == -1);
	CHECK(strstr(ht_last_error(), "needs a comma-separated list of states") != NULL);
	CHECK(ht_parse_state_list(",", &states) == -1);
}

static bool has_syscall(const uint64_t *bitmap, const char *name)
{
	int nr = ht_syscall_number(name);

	return nr >= 0 && (bitmap[nr / 64] & (1ULL << (nr % 64)));
}

TEST(breach_filter_options)
{
	static const char *const args[] = { "hybtrace",	     "--pid",	   "3",
					    "--off-cpu",	     "10ms",	   "--syscall",
					    "10ms",		     "--off-cpu-states", "S,D",
					    "--off-cpu-syscalls", "futex,read", "--ignore-syscalls",
					    "epoll_wait,accept4" };
	static const char *const none[] = { "hybtrace", "--pid", "3", "--off-cpu", "10ms" };
	struct ht_options o;

	CHECK(!parse(args, 13, false, &o));
	CHECK_EQ_U64(o.filters.off_cpu_states, (1U << 1) | (1U << 2));
	CHECK(o.filters.off_cpu_syscalls_on);
	CHECK(has_syscall(o.filters.off_cpu_syscalls, "futex"));
	CHECK(has_syscall(o.filters.off_cpu_syscalls, "read"));
	CHECK(!has_syscall(o.filters.off_cpu_syscalls, "epoll_wait"));
	CHECK(o.filters.ignore_syscalls_on);
	CHECK(has_syscall(o.filters.ignore_syscalls, "epoll_wait"));
	CHECK(has_syscall(o.filters.ignore_syscalls, "accept4"));
	CHECK(!has_syscall(o.filters.ignore_syscalls, "futex"));
	/* They filter nothing unless given. */
	CHECK(!parse(none, 5, false, &o));
	CHECK(!o.filters.off_cpu_states && !o.filters.off_cpu_syscalls_on &&
	      !o.filters.ignore_syscalls_on);
}

TEST(breach_filter_options_rejected)
{
	static const char *const state[] = { "hybtrace", "--pid", "3", "--off-cpu", "10ms",
					     "--off-cpu-states", "W" };
	static const char *const sc[] = { "hybtrace", "--pid", "3", "--off-cpu", "10ms",
					  "--off-cpu-syscalls", "futex,nosuchcall" };
	static const char *const ignore[] = { "hybtrace", "--pid", "3", "--syscall", "10ms",
					      "--ignore-syscalls", "epoll_wiat" };
	static const char *const twice[] = { "hybtrace", "--pid", "3", "--off-cpu", "10ms",
					     "--off-cpu-states", "S", "--off-cpu-states", "D" };
	static const char *const twice_ignore[] = { "hybtrace", "--pid", "3", "--syscall",
						    "10ms", "--ignore-syscalls", "poll",
						    "--ignore-syscalls", "ppoll" };
	static const char *const twice_sc[] = { "hybtrace", "--pid", "3", "--off-cpu", "10ms",
						"--off-cpu-syscalls", "read", "--off-cpu-syscalls",
						"futex" };
	static const char *const states_alone[] = { "hybtrace", "--pid", "3", "--syscall", "1ms",
						    "--off-cpu-states", "D" };
	static const char *const sc_alone[] = { "hybtrace", "--pid", "3",
						"--off-cpu-syscalls", "futex" };
	static const char *const ignore_alone[] = { "hybtrace", "--pid", "3",
						    "--ignore-syscalls", "poll" };
	struct ht_options o;

	CHECK(parse(state, 7, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "unknown state 'W'") != NULL);
	CHECK(parse(sc, 7, false, &o) == -1);
	CHECK_STR(ht_last_error(), "unknown syscall 'nosuchcall' in --off-cpu-syscalls");
	CHECK(parse(ignore, 7, false, &o) == -1);
	CHECK_STR(ht_last_error(), "unknown syscall 'epoll_wiat' in --ignore-syscalls");
	CHECK(parse(twice, 9, false, &o) == -1);
	CHECK_STR(ht_last_error(), "--off-cpu-states given twice (S, then D): give it once");
	CHECK(parse(twice_ignore, 9, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--ignore-syscalls given twice (poll, then ppoll)") != NULL);
	CHECK(parse(twice_sc, 9, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--off-cpu-syscalls given twice") != NULL);
	/* A filter of breaches that cannot happen is a mistake worth saying. */
	CHECK(parse(states_alone, 7, false, &o) == -1);
	CHECK_STR(ht_last_error(), "--off-cpu-states needs --off-cpu DUR, the threshold");
	CHECK(parse(sc_alone, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--off-cpu-syscalls needs --off-cpu DUR") != NULL);
	CHECK(parse(ignore_alone, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--ignore-syscalls") != NULL);
}

TEST(run_options)
{
	static const char *const args[] = { "run", "--rq-delay", "3ms", "--", "sleep", "1" };
	static const char *const no_cmd[] = { "run", "--rq-delay", "3ms" };
	static const char *const with_pid[] = { "run", "--pid", "5", "--", "true" };
	struct ht_options o;

	CHECK(!parse(args, 6, true, &o));
	CHECK_STR(o.run_argv[0], "sleep");
	CHECK_STR(o.run_argv[1], "1");
	CHECK(o.run_argv[2] == NULL);
	CHECK(parse(no_cmd, 3, true, &o) == -1);
	/* run watches its command and, beside it, what --pid names. */
	CHECK(!parse(with_pid, 5, true, &o));
	CHECK(o.npids == 1 && o.pids[0] == 5 && o.pid == 5);
}

TEST(target_options)
{
	static const char *const list[] = { "hybtrace", "--pid", "10,12,14", "--children" };
	static const char *const one[] = { "hybtrace", "-p", "7" };
	static const char *const cgroup[] = { "hybtrace", "--cgroup", "x", "--pid", "3" };
	static const char *const unit[] = { "hybtrace", "--unit", "nginx" };
	static const char *const all[] = { "hybtrace", "--all" };
	static const char *const run[] = { "run", "--", "true" };
	static const char *const run_no[] = { "run", "--no-children", "--cgroup", "x", "--",
					      "true" };
	struct ht_options o;

	CHECK(!parse(list, 4, false, &o));
	CHECK(o.npids == 3 && o.pids[0] == 10 && o.pids[1] == 12 && o.pids[2] == 14);
	CHECK(o.pid == 10);
	CHECK(o.targets.children && !o.targets.all && !o.cgroup_arg && !o.unit);
	/* --pid does not follow children unless told to; run does unless told not to. */
	CHECK(!parse(one, 3, false, &o));
	CHECK(o.npids == 1 && o.pid == 7 && !o.targets.children);
	CHECK(!parse(run, 3, true, &o));
	CHECK(o.targets.children && o.npids == 0 && o.pid == 0);
	CHECK(!parse(run_no, 6, true, &o));
	CHECK(!o.targets.children);
	CHECK_STR(o.cgroup_arg, "x");
	CHECK(!parse(cgroup, 5, false, &o));
	CHECK_STR(o.cgroup_arg, "x");
	CHECK(o.pid == 3 && !o.targets.children);
	CHECK(!parse(unit, 3, false, &o));
	CHECK_STR(o.unit, "nginx");
	CHECK(o.npids == 0 && o.pid == 0);
	CHECK(!parse(all, 2, false, &o));
	CHECK(o.targets.all && !o.targets.children && o.npids == 0);
}

TEST(target_options_rejected)
{
	static const struct {
		int n;
		bool run;
		const char *args[8];
		const char *want;
	} cases[] = {
		{ 1, false, { "hybtrace" }, "which process? give --pid N, --cgroup PATH" },
		{ 2, false, { "hybtrace", "--children" }, "which process?" },
		{ 3, false, { "hybtrace", "--all", "--children" }, "--all watches every task" },
		{ 4, false, { "hybtrace", "--all", "--pid", "1" }, "stands alone" },
		{ 4, false, { "hybtrace", "--all", "--cgroup", "x" }, "stands alone" },
		{ 4, false, { "hybtrace", "--unit", "u", "--all" }, "stands alone" },
		{ 4, true, { "run", "--all", "--", "true" }, "stands alone" },
		{ 5, false, { "hybtrace", "--cgroup", "x", "--unit", "y" }, "give one" },
		{ 5, false, { "hybtrace", "--children", "--no-children", "--pid", "1" }, "give one" },
		{ 5, false, { "hybtrace", "--cgroup", "x", "--cgroup", "y" }, "--cgroup given twice" },
		{ 5, false, { "hybtrace", "--unit", "x", "--unit", "y" }, "--unit given twice" },
		{ 5, false, { "hybtrace", "--pid", "1", "--pid", "2" }, "--pid given twice (1, then 2)" },
		{ 3, false, { "hybtrace", "--pid", "1,,2" }, "--pid: empty pid in '1,,2'" },
		{ 3, false, { "hybtrace", "--pid", "1," }, "empty pid" },
		{ 3, false, { "hybtrace", "--pid", "" }, "empty pid" },
		{ 3, false, { "hybtrace", "--pid", "1,x" }, "pid 'x' is not a number" },
		{ 3, false, { "hybtrace", "--pid", "4,0" }, "pid 0 is not a process" },
		{ 3, false, { "hybtrace", "--cgroup", "" }, "--cgroup needs a cgroup v2 directory" },
		{ 3, false, { "hybtrace", "--unit", "" }, "--unit needs a systemd unit" },
	};
	const char *run_full[] = { "run", "--pid", NULL, "--", "true" };
	char full[HT_MAX_TARGET_PIDS * 4] = "";
	struct ht_options o;

	/* run's command takes a place in the spec's list: one fewer pid beside it. */
	for (int i = 1; i <= HT_MAX_TARGET_PIDS; i++)
		snprintf(full + strlen(full), sizeof(full) - strlen(full), "%s%d", i > 1 ? "," : "", i);
	run_full[2] = full;
	CHECK(parse(run_full, 5, true, &o) == -1);
	CHECK(strstr(ht_last_error(), "at most 63 pids beside it") != NULL);
	*strrchr(full, ',') = '\0';
	CHECK(!parse(run_full, 5, true, &o));
	CHECK(o.npids == HT_MAX_TARGET_PIDS - 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = parse(cases[i].args, cases[i].n, cases[i].run, &o);

		if (rc != -1 || !strstr(ht_last_error(), cases[i].want))
			printf("     case %zu: rc %d, '%s'\n", i, rc, ht_last_error());
		CHECK(rc == -1);
		CHECK(strstr(ht_last_error(), cases[i].want) != NULL);
	}
}

/* A child that sleeps until killed, for --pid to name. */
static pid_t sleeping_child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

TEST(targets_resolved)
{
	static const char *const args[] = { "hybtrace", "--pid", NULL, "--children" };
	const char *argv[4];
	char list[64], self[16];
	struct ht_options o;
	pid_t child = sleeping_child();

	CHECK(child > 0);
	if (child <= 0)
		return;
	memcpy(argv, args, sizeof(args));
	snprintf(list, sizeof(list), "%d", (int)child);
	argv[2] = list;
	CHECK(!parse(argv, 4, false, &o));
	CHECK(!ht_options_resolve_targets(&o));
	CHECK(o.targets.ntgids == 1 && o.targets.tgids[0] == child && o.pid == child);
	CHECK(o.targets.children && !o.targets.cgroup_on && !o.targets.all);
	CHECK(o.targets.self_tgid == getpid());
	/* Never hybtrace itself: its own pid is refused, whatever it watches. */
	snprintf(self, sizeof(self), "%d", (int)getpid());
	argv[2] = self;
	CHECK(!parse(argv, 4, false, &o));
	CHECK(ht_options_resolve_targets(&o) == -1);
	CHECK(strstr(ht_last_error(), "is hybtrace itself") != NULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

TEST(repeated_options_rejected)
{
	static const char *const pid[] = { "hybtrace", "--pid", "1", "--pid", "2" };
	static const char *const short_long[] = { "hybtrace", "-p", "1", "--pid", "2" };
	static const char *const rq[] = { "hybtrace", "--pid", "1", "--rq-delay", "1ms",
					  "--rq-delay", "2ms" };
	static const char *const json[] = { "hybtrace", "--pid", "1", "--json", "--json=x.json" };
	static const char *const output[] = { "run", "--output", "a", "--output", "b", "--",
					      "true" };
	struct ht_options o;

	CHECK(parse(pid, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--pid given twice (1, then 2)") != NULL);
	CHECK(parse(short_long, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--pid") != NULL);
	CHECK(parse(rq, 7, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--rq-delay given twice (1ms, then 2ms)") != NULL);
	CHECK(parse(json, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--json given twice (stdout, then x.json)") != NULL);
	CHECK(parse(output, 7, true, &o) == -1);
	CHECK(strstr(ht_last_error(), "--output") != NULL);
}

TEST(options_that_may_repeat)
{
	static const char *const args[] = { "hybtrace", "--pid",   "1",	      "--trigger", "a",
					    "--trigger", "b",	     "--quiet", "--quiet" };
	struct ht_options o;

	CHECK(!parse(args, 9, false, &o));
	CHECK(o.ntriggers == 2);
	CHECK_STR(o.triggers[1], "b");
	CHECK(o.quiet);
}

TEST(json_destinations)
{
	static const char *const plain[] = { "hybtrace", "--pid", "1", "--json" };
	static const char *const dash[] = { "hybtrace", "--pid", "1", "--json=-" };
	static const char *const file[] = { "hybtrace", "--pid", "1", "--json=out.json" };
	static const char *const empty[] = { "hybtrace", "--pid", "1", "--json=" };
	static const char *const spaced[] = { "hybtrace", "--pid", "1", "--json", "out.json" };
	static const char *const run_spaced[] = { "run", "--json", "out.json", "--", "true" };
	static const char *const run_cmd[] = { "run", "--json", "sleep", "1" };
	struct ht_options o;

	CHECK(!parse(plain, 4, false, &o));
	CHECK(o.json && o.json_path == NULL);
	CHECK(!parse(dash, 4, false, &o));
	CHECK(o.json && o.json_path == NULL);
	CHECK(!parse(file, 4, false, &o));
	CHECK(o.json);
	CHECK_STR(o.json_path, "out.json");
	CHECK(parse(empty, 4, false, &o) == -1);
	CHECK(parse(spaced, 5, false, &o) == -1);
	CHECK(strstr(ht_last_error(), "--json=out.json") != NULL);
	CHECK(parse(run_spaced, 5, true, &o) == -1);
	CHECK(strstr(ht_last_error(), "--json=out.json") != NULL);
	/* Without `--`, the word after --json starts the command, as before. */
	CHECK(!parse(run_cmd, 4, true, &o));
	CHECK(o.json && o.json_path == NULL);
	CHECK_STR(o.run_argv[0], "sleep");
}
