// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Triggers on code, for real: the test builds a small program and three
 * shared libraries in a temp directory, runs the program, resolves trigger
 * specs against it and puts hardware breakpoints on its functions, then
 * makes it call them (over its stdin) and checks each hit: the function,
 * the thread, the arguments in rdi, rsi, rdx. Threads born after attach,
 * a library function called through the PLT, a library loaded later with
 * dlopen, an exec, and the stop function hybtrace_trigger. Spec errors are
 * checked against the same program. Tests that need root skip without it,
 * and fail under CI=true.
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

static const char prog_c[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <pthread.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#include <stdlib.h>\n"
	"#include <string.h>\n"
	"#include <unistd.h>\n"
	"#include <hybtrace/hybtrace.h>\n"
	"\n"
	"extern uint64_t ht_trig_lib_function(uint64_t x);\n"
	"extern int dup_function(int x);\n"
	"extern void *twin_b_address(void);\n"
	"\n"
	"__attribute__((noinline)) uint64_t trig_work(uint64_t a, uint64_t b, uint64_t c)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(a), \"+r\"(b), \"+r\"(c));\n"
	"	a ^= b;\n"
	"	return a + c; /* work line */\n"
	"}\n"
	"\n"
	"__attribute__((noinline)) uint64_t trig_other(uint64_t a, uint64_t b, uint64_t c)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(a), \"+r\"(b), \"+r\"(c));\n"
	"	return a - b - c;\n"
	"}\n"
	"\n"
	"__attribute__((noinline)) uint64_t trig_thread_only(uint64_t a, uint64_t b, uint64_t c)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(a), \"+r\"(b), \"+r\"(c));\n"
	"	return a * b * c;\n"
	"}\n"
	"\n"
	"__attribute__((noinline)) static int twin(int x)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(x));\n"
	"	return x + 1;\n"
	"}\n"
	"\n"
	"static uint64_t targs[3];\n"
	"\n"
	"static void *thread_main(void *arg)\n"
	"{\n"
	"	/* Its first call: no time for a tracer to notice the thread first. */\n"
	"	trig_thread_only(targs[0], targs[1], targs[2]);\n"
	"	return arg;\n"
	"}\n"
	"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	char line[4096], path[3000];\n"
	"	unsigned long long a, b, c, n;\n"
	"	uint64_t (*late)(uint64_t) = NULL;\n"
	"\n"
	"	if (argc > 1 && !strcmp(argv[1], \"again\")) {\n"
	"		/* Right after exec: before any tracer could move its breakpoints here. "
	"*/\n"
	"		for (int i = 0; i < 3; i++)\n"
	"			trig_work(77, 0, 0);\n"
	"	}\n"
	"	printf(\"work %p\\nother %p\\nthread %p\\ntwin_a %p\\ntwin_b %p\\nlib "
	"%p\\nready\\n\",\n"
	"	       (void *)trig_work, (void *)trig_other, (void *)trig_thread_only, (void "
	"*)twin,\n"
	"	       twin_b_address(), dlsym(RTLD_DEFAULT, \"ht_trig_lib_function\"));\n"
	"	fflush(stdout);\n"
	"	while (fgets(line, sizeof(line), stdin)) {\n"
	"		if (sscanf(line, \"call %llu %llu %llu %llu\", &n, &a, &b, &c) == 4) {\n"
	"			for (unsigned long long i = 0; i < n; i++)\n"
	"				trig_work(a + i, b, c);\n"
	"		} else if (sscanf(line, \"other %llu\", &a) == 1) {\n"
	"			trig_other(a, 1, 2);\n"
	"		} else if (sscanf(line, \"thread %llu %llu %llu\", &a, &b, &c) == 3) {\n"
	"			pthread_t t;\n"
	"\n"
	"			targs[0] = a;\n"
	"			targs[1] = b;\n"
	"			targs[2] = c;\n"
	"			pthread_create(&t, NULL, thread_main, NULL);\n"
	"			pthread_join(t, NULL);\n"
	"		} else if (sscanf(line, \"lib %llu\", &a) == 1) {\n"
	"			ht_trig_lib_function(a);\n"
	"		} else if (sscanf(line, \"dlopen %2999s\", path) == 1) {\n"
	"			void *h = dlopen(path, RTLD_NOW);\n"
	"\n"
	"			late = h ? (uint64_t(*)(uint64_t))dlsym(h, "
	"\"ht_trig_late_function\") : NULL;\n"
	"			printf(\"late %p\\n\", (void *)late);\n"
	"		} else if (sscanf(line, \"late %llu\", &a) == 1 && late) {\n"
	"			late(a);\n"
	"		} else if (sscanf(line, \"stop %llu\", &a) == 1) {\n"
	"			hybtrace_trigger(a);\n"
	"		} else if (sscanf(line, \"dup %llu\", &a) == 1) {\n"
	"			dup_function((int)a);\n"
	"		} else if (!strncmp(line, \"twin\", 4)) {\n"
	"			twin(1);\n"
	"		} else if (!strncmp(line, \"exec\", 4)) {\n"
	"			fflush(stdout);\n"
	"			execl(\"/proc/self/exe\", argv[0], \"again\", (char *)NULL);\n"
	"			printf(\"exec failed\\n\");\n"
	"		}\n"
	"		printf(\"ok\\n\");\n"
	"		fflush(stdout);\n"
	"	}\n"
	"	return 0;\n"
	"}\n";

static const char twin_c[] = "__attribute__((noinline)) static int twin(int x)\n"
			     "{\n"
			     "	__asm__ volatile(\"\" : \"+r\"(x));\n"
			     "	return x + 2;\n"
			     "}\n"
			     "\n"
			     "void *twin_b_address(void)\n"
			     "{\n"
			     "	return (void *)twin;\n"
			     "}\n";

static const char lib_c[] = "#include <stdint.h>\n"
			    "__attribute__((noinline)) uint64_t ht_trig_lib_function(uint64_t x)\n"
			    "{\n"
			    "	__asm__ volatile(\"\" : \"+r\"(x));\n"
			    "	return x * 3 + 1;\n"
			    "}\n";

static const char late_c[] =
	"#include <stdint.h>\n"
	"__attribute__((noinline)) uint64_t ht_trig_late_function(uint64_t x)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(x));\n"
	"	return x * 5 + 1;\n"
	"}\n";

static const char dup_c[] = "__attribute__((noinline)) int dup_function(int x)\n"
			    "{\n"
			    "	__asm__ volatile(\"\" : \"+r\"(x));\n"
			    "	return x + DUP_VALUE;\n"
			    "}\n";

static char dir[64];
static int built; /* 0: not tried; 1: built; -1: failed */

static int write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}


static void remove_dir(void)
{
	if (dir[0])
		sh("rm -rf '%s'", dir);
}

/* The repository's include/ (for <hybtrace/hybtrace.h>): from the cwd or above the binary. */
static int find_include_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n;

	if (!access("include/hybtrace/hybtrace.h", R_OK) && getcwd(exe, sizeof(exe))) {
		snprintf(out, len, "%s/include", exe);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	for (int up = 0; up < 5; up++) {
		char *slash = strrchr(exe, '/');
		char probe[PATH_MAX + 64];

		if (!slash)
			break;
		*slash = 0;
		snprintf(probe, sizeof(probe), "%s/include/hybtrace/hybtrace.h", exe);
		if (!access(probe, R_OK)) {
			snprintf(out, len, "%s/include", exe);
			return 0;
		}
	}
	return -1;
}

static int build_programs(void)
{
	char include[PATH_MAX + 16];

	if (built)
		return built > 0 ? 0 : -1;
	built = -1;
	if (find_include_dir(include, sizeof(include))) {
		printf("     cannot find include/hybtrace/hybtrace.h\n");
		return -1;
	}
	snprintf(dir, sizeof(dir), "/tmp/ht-triggers-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	atexit(remove_dir);
	if (write_file("prog.c", prog_c) || write_file("twin.c", twin_c) ||
	    write_file("lib.c", lib_c) || write_file("late.c", late_c) ||
	    write_file("dup.c", dup_c))
		return -1;
	if (sh("cd '%s' && cc -O1 -g -shared -fPIC -o libtrig.so lib.c"
	       " && cc -O1 -g -shared -fPIC -o libtriglate.so late.c"
	       " && cc -O1 -g -shared -fPIC -DDUP_VALUE=1 -o libdupa.so dup.c"
	       " && cc -O1 -g -shared -fPIC -DDUP_VALUE=2 -o libdupb.so dup.c"
	       " && cc -O1 -g -fPIE -pie -I'%s' -o trigprog prog.c twin.c -L. -Wl,--no-as-needed "
	       "-ltrig -ldupa "
	       "-ldupb -Wl,--no-as-needed -Wl,-rpath,'%s' -pthread -ldl",
	       dir, include, dir))
		return -1;
	/*
	 * A library as distributions install one: a versioned file, its soname
	 * and the development name as symlinks to it, and another name beside
	 * it; and one whose soname no file carries.
	 */
	if (sh("cd '%s' && cc -O1 -g -shared -fPIC -Wl,-soname,libtrigv.so.1 -o libtrigv.so.1.0.3 "
	       "late.c && ln -s libtrigv.so.1.0.3 libtrigv.so.1 && ln -s libtrigv.so.1 libtrigv.so"
	       " && ln -s libtrigv.so.1.0.3 libtrigv-alias.so"
	       " && cc -O1 -g -shared -fPIC -Wl,-soname,libtrigs.so.7 -o libtrigs-7.0.so late.c"
	       " && mkdir plain && cc -O1 -g -shared -fPIC -o plain/libtrigs.so.7 late.c",
	       dir))
		return -1;
	built = 1;
	return 0;
}

#define REQUIRE_PROGRAMS() REQUIRE_BUILT(build_programs)

struct child {
	pid_t pid;
	FILE *to, *from;
	uint64_t work, other, thread, twin_a, twin_b, lib, late;
};

static uint64_t read_address(struct child *c, const char *key)
{
	char line[256], name[64];
	void *p = NULL;

	if (!fgets(line, sizeof(line), c->from))
		return 0;
	if (sscanf(line, "%63s %p", name, &p) != 2 || strcmp(name, key))
		return 0;
	return (uint64_t)(uintptr_t)p;
}

/* The addresses the program prints at start (and again after exec). */
static int read_banner(struct child *c)
{
	char line[64];

	c->work = read_address(c, "work");
	c->other = read_address(c, "other");
	c->thread = read_address(c, "thread");
	c->twin_a = read_address(c, "twin_a");
	c->twin_b = read_address(c, "twin_b");
	c->lib = read_address(c, "lib");
	if (!fgets(line, sizeof(line), c->from) || strcmp(line, "ready\n"))
		return -1;
	return c->work && c->other && c->thread && c->twin_a && c->twin_b && c->lib ? 0 : -1;
}

/* Start the program; FIXED: without address randomization (exec lands at the same place). */
static int child_start(struct child *c, int fixed)
{
	int in[2], out[2];
	char path[256];

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/trigprog", dir);
	if (pipe(in) || pipe(out))
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		if (fixed)
			personality(ADDR_NO_RANDOMIZE);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to = fdopen(in[1], "w");
	c->from = fdopen(out[0], "r");
	alarm(60); /* a test that hangs on its child fails instead */
	return read_banner(c);
}

/* Send a command and wait for its "ok": every call it made has hit by then. */
static int child_do(struct child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int child_do(struct child *c, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->to, fmt, ap);
	va_end(ap);
	fputc('\n', c->to);
	fflush(c->to);
	while (fgets(line, sizeof(line), c->from)) {
		void *p;

		if (!strcmp(line, "ok\n"))
			return 0;
		if (sscanf(line, "late %p", &p) == 1)
			c->late = (uint64_t)(uintptr_t)p;
	}
	return -1;
}

static void child_stop(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	if (c->to)
		fclose(c->to);
	if (c->from)
		fclose(c->from);
	alarm(0);
	memset(c, 0, sizeof(*c));
}

static const char *function_at(struct ht_symbolizer *s, uint64_t addr)
{
	struct ht_symbol sym;

	if (ht_symbolize(s, addr, &sym) || !sym.function)
		return "";
	return sym.function;
}

static int contains(const char *s, const char *want)
{
	return s && strstr(s, want) != NULL;
}

/* ---- Parsing ---- */

TEST(spec_forms)
{
	struct ht_trigger_spec sp;

	CHECK(!ht_trigger_spec_parse("send_order", &sp));
	CHECK(sp.kind == HT_TRIGGER_SYMBOL);
	CHECK_STR(sp.symbol, "send_order");
	CHECK_STR(sp.module, "");

	CHECK(!ht_trigger_spec_parse("libc.so.6:malloc", &sp));
	CHECK(sp.kind == HT_TRIGGER_SYMBOL);
	CHECK_STR(sp.module, "libc.so.6");
	CHECK_STR(sp.symbol, "malloc");

	CHECK(!ht_trigger_spec_parse("./feed:0x4011a0", &sp));
	CHECK(sp.kind == HT_TRIGGER_ADDRESS);
	CHECK_STR(sp.module, "./feed");
	CHECK_EQ_U64(sp.vaddr, 0x4011a0);

	CHECK(!ht_trigger_spec_parse("feed.c:120", &sp));
	CHECK(sp.kind == HT_TRIGGER_LINE);
	CHECK_STR(sp.file, "feed.c");
	CHECK_EQ_U64(sp.line, 120);
	CHECK_STR(sp.module, "");

	CHECK(!ht_trigger_spec_parse("/srv/feed:src/feed.c:7", &sp));
	CHECK(sp.kind == HT_TRIGGER_LINE);
	CHECK_STR(sp.module, "/srv/feed");
	CHECK_STR(sp.file, "src/feed.c");
	CHECK_EQ_U64(sp.line, 7);

	CHECK(!ht_trigger_spec_parse(".", &sp));
	CHECK(sp.kind == HT_TRIGGER_STOP);
	CHECK_STR(sp.symbol, "hybtrace_trigger");

	CHECK(!ht_trigger_spec_parse("libfoo.so:.", &sp));
	CHECK(sp.kind == HT_TRIGGER_STOP);
	CHECK_STR(sp.module, "libfoo.so");

	CHECK(!ht_trigger_spec_parse("_ZN4feed4sendEv", &sp));
	CHECK(sp.kind == HT_TRIGGER_SYMBOL);
}

static void check_bad_spec(const char *spec, const char *want)
{
	struct ht_trigger_spec sp;

	CHECK(ht_trigger_spec_parse(spec, &sp) == -1);
	if (!contains(ht_last_error(), want))
		printf("     spec '%s': got \"%s\", want \"%s\"\n", spec, ht_last_error(), want);
	CHECK(contains(ht_last_error(), want));
	CHECK(!strchr(ht_last_error(), '\n'));
}

TEST(spec_malformed)
{
	char long_spec[HT_TRIGGER_TEXT_MAX + 10];

	check_bad_spec("", "empty trigger");
	check_bad_spec("send order", "has a space");
	check_bad_spec(":malloc", "empty left side");
	check_bad_spec("libc.so.6:", "empty right side");
	check_bad_spec("0x4011a0", "an address needs its module");
	check_bad_spec("feed.c:0", "line 0 is out of range");
	check_bad_spec("feed.c:99999999999", "out of range");
	check_bad_spec("./feed:0xzz", "not a hexadecimal address");
	check_bad_spec("./feed:0x12345678901234567890", "not a hexadecimal address");
	check_bad_spec("feed:12ab", "not a function name, a line number or a 0x address");
	check_bad_spec("9lives", "not a function name");
	check_bad_spec(":feed.c:12", "empty module");
	memset(long_spec, 'a', sizeof(long_spec) - 1);
	long_spec[sizeof(long_spec) - 1] = 0;
	check_bad_spec(long_spec, "too long");
}

TEST(at_most_four_triggers)
{
	struct ht_triggers t;

	ht_triggers_init(&t);
	CHECK(!ht_triggers_add(&t, "a"));
	CHECK(!ht_triggers_add(&t, "b"));
	CHECK(!ht_triggers_add(&t, "c"));
	CHECK(!ht_triggers_add(&t, "d"));
	CHECK(ht_triggers_add(&t, "e") == -1);
	CHECK(contains(ht_last_error(), "at most 4 triggers"));
	CHECK(contains(ht_last_error(), "debug registers"));
	CHECK_EQ_U64(t.count, 4);
	CHECK(ht_triggers_add(&t, "") == -1);
}

TEST(edit_distance)
{
	CHECK_EQ_U64(ht_edit_distance("send_order", "send_order", 3), 0);
	CHECK_EQ_U64(ht_edit_distance("sned_order", "send_order", 3), 1); /* a swap is one */
	CHECK_EQ_U64(ht_edit_distance("send_ordr", "send_order", 3), 1);
	CHECK_EQ_U64(ht_edit_distance("kitten", "sitting", 5), 3);
	CHECK_EQ_U64(ht_edit_distance("a", "abcdefgh", 3), 4); /* over the limit: limit + 1 */
	CHECK_EQ_U64(ht_edit_distance("", "ab", 3), 2);
}

/* ---- Resolving against a live process ---- */

/* Resolve one spec in C's process; its address, or 0 with the error in ht_last_error(). */
static uint64_t resolve1(struct child *c, const char *spec, unsigned flags)
{
	struct ht_symbolizer *s = ht_symbolizer_new(c->pid);
	struct ht_triggers t;
	uint64_t addr = 0;
	char err[512];

	if (!s)
		return 0;
	ht_triggers_init(&t);
	if (!ht_triggers_add(&t, spec) && ht_triggers_resolve(&t, s, c->pid, flags) >= 0 &&
	    t.v[0].resolved)
		addr = t.v[0].addr;
	snprintf(err, sizeof(err), "%s", ht_last_error());
	ht_symbolizer_free(s);
	ht_fail("%s", err);
	return addr;
}

TEST(resolve_every_form)
{
	struct ht_symbolizer *s;
	struct child c;
	char spec[512];
	uint64_t addr;

	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	CHECK(!child_start(&c, 0));
	CHECK_EQ_U64(resolve1(&c, "trig_work", 0), c.work);
	CHECK_EQ_U64(resolve1(&c, "trigprog:trig_work", 0), c.work);
	CHECK_EQ_U64(resolve1(&c, "./trigprog:trig_other", 0), c.other);
	snprintf(spec, sizeof(spec), "%s/trigprog:trig_work", dir);
	CHECK_EQ_U64(resolve1(&c, spec, 0), c.work);
	CHECK_EQ_U64(resolve1(&c, "libtrig.so:ht_trig_lib_function", 0), c.lib);
	CHECK(resolve1(&c, "libc.so.6:malloc", 0) != 0);
	CHECK(resolve1(&c, ".", 0) != 0);
	CHECK_EQ_U64(resolve1(&c, "trigprog:.", 0), resolve1(&c, ".", 0));
	/* The two static twins, told apart by their file addresses (PIE: vaddr + bias). */
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s) {
		CHECK_STR(function_at(s, c.twin_a), "twin");
		CHECK_STR(function_at(s, c.twin_b), "twin");
		ht_symbolizer_free(s);
	}
	{
		char cmd[512], line[256];
		FILE *p;
		int n = 0;

		snprintf(cmd, sizeof(cmd), "nm '%s/trigprog' | awk '$3 == \"twin\" {print $1}'",
			 dir);
		p = popen(cmd, "r");
		CHECK(p != NULL);
		while (p && fgets(line, sizeof(line), p)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(spec, sizeof(spec), "trigprog:0x%s", line);
			addr = resolve1(&c, spec, 0);
			CHECK(addr == c.twin_a || addr == c.twin_b);
			n++;
		}
		if (p)
			pclose(p);
		CHECK_EQ_U64(n, 2);
	}
	/* A source line: the first statement of trig_work's "work line". */
	s = ht_symbolizer_new(c.pid);
	addr = resolve1(&c, "prog.c:19", 0);
	CHECK(addr != 0);
	CHECK(s && !strcmp(function_at(s, addr), "trig_work"));
	CHECK_EQ_U64(resolve1(&c, "trigprog:prog.c:19", 0), addr);
	snprintf(spec, sizeof(spec), "%s/prog.c:19", dir);
	CHECK_EQ_U64(resolve1(&c, spec, 0), addr);
	/* A line of trig_other. */
	addr = resolve1(&c, "prog.c:25", 0);
	CHECK(s && !strcmp(function_at(s, addr), "trig_other"));
	ht_symbolizer_free(s);
	child_stop(&c);
}

static void check_resolve_error(struct child *c, const char *spec, unsigned flags,
				const char *want1, const char *want2)
{
	CHECK_EQ_U64(resolve1(c, spec, flags), 0);
	if (!contains(ht_last_error(), want1) || (want2 && !contains(ht_last_error(), want2)))
		printf("     '%s': got \"%s\"\n", spec, ht_last_error());
	CHECK(contains(ht_last_error(), want1));
	CHECK(!want2 || contains(ht_last_error(), want2));
	CHECK(!strchr(ht_last_error(), '\n'));
}

TEST(resolve_errors)
{
	struct child c;

	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	CHECK(!child_start(&c, 0));
	check_resolve_error(&c, "trig_wrok", 0, "no function trig_wrok", "did you mean trig_work");
	check_resolve_error(&c, "trigprog:trig_othr", 0, "did you mean trig_other", NULL);
	check_resolve_error(&c, "dup_function", 0, "ambiguous", "libdupa.so");
	check_resolve_error(&c, "dup_function", 0, "libdupb.so", "module:dup_function");
	check_resolve_error(&c, "twin", 0, "ambiguous: 2 functions twin in trigprog",
			    "trigprog:0xADDRESS");
	check_resolve_error(&c, "prog.c:2", 0, "line 2 of prog.c has no code", NULL);
	check_resolve_error(&c, "prog.c:21", 0, "has no code; the nearest lines with code are 20",
			    NULL);
	check_resolve_error(&c, "nothere.c:5", 0, "no source file nothere.c", NULL);
	check_resolve_error(&c, "libnothere.so:foo", 0, "no module libnothere.so is mapped", NULL);
	check_resolve_error(&c, "libtrig.so:0x1", 0, "is not in the code of", NULL);
	check_resolve_error(&c, "libc.so.6:.", 0, "no hybtrace_trigger in libc.so.6", NULL);
	/* Waiting for a library: not an error. */
	{
		struct ht_symbolizer *s = ht_symbolizer_new(c.pid);
		struct ht_triggers t;

		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "libnothere.so:foo"));
		CHECK(!ht_triggers_add(&t, "not_yet_loaded_function"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT) == 0);
		CHECK(!t.v[0].resolved && contains(t.v[0].pending, "no module libnothere.so"));
		CHECK(!t.v[1].resolved && contains(t.v[1].pending, "no function"));
		ht_symbolizer_free(s);
	}
	/* A running target (--pid): only a module not mapped yet waits; a typo is still one. */
	{
		struct ht_symbolizer *s = ht_symbolizer_new(c.pid);
		struct ht_triggers t;

		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "libnothere.so:foo"));
		CHECK(!ht_triggers_add(&t, "libnothere.so:0x1000"));
		CHECK(!ht_triggers_add(&t, "libnothere.so:prog.c:20"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT_MODULES) == 0);
		for (int i = 0; i < 3; i++)
			CHECK(!t.v[i].resolved && contains(t.v[i].pending, "no module libnothere.so"));
		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "trig_wrok"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT_MODULES) == -1);
		CHECK(contains(ht_last_error(), "did you mean trig_work"));
		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "libtrig.so:not_in_libtrig"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT_MODULES) == -1);
		CHECK(contains(ht_last_error(), "no function not_in_libtrig in libtrig.so"));
		ht_symbolizer_free(s);
	}
	CHECK(resolve1(&c, "dup_function", 0) == 0);
	CHECK(resolve1(&c, "libdupa.so:dup_function", 0) != 0);
	CHECK(resolve1(&c, "libdupb.so:dup_function", 0) !=
	      resolve1(&c, "libdupa.so:dup_function", 0));
	{
		struct ht_symbolizer *s = ht_symbolizer_new(c.pid);
		struct ht_triggers t;

		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "trig_work"));
		CHECK(!ht_triggers_add(&t, "trigprog:trig_work"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, 0) == -1);
		CHECK(contains(ht_last_error(), "are the same address"));
		CHECK(t.v[0].resolved && !t.v[1].resolved);
		ht_symbolizer_free(s);
	}
	child_stop(&c);
}

/* ---- Module names: every name a user may copy for a library ---- */

/* The first executable mapping of the file whose path ends in SUFFIX, or -1. */
static long exec_mapping(const struct ht_maps *maps, const char *suffix)
{
	size_t k = strlen(suffix);

	for (size_t i = 0; i < maps->count; i++) {
		const char *p = maps->v[i].path;
		size_t n = strlen(p);

		if (ht_mapping_is_exec(&maps->v[i]) && n >= k && !strcmp(p + n - k, suffix))
			return (long)i;
	}
	return -1;
}

/* Whether NAME names mapping I, as WANT says it must. */
static void expect_name(struct ht_module_names *mn, long i, const char *name, int want)
{
	int got = i >= 0 && ht_module_names_match(mn, (size_t)i, name);

	if (got != want)
		printf("     '%s' %s %s, want the opposite\n", name,
		       got ? "names" : "does not name", i >= 0 ? mn->maps->v[i].path : "?");
	CHECK(got == want);
}

/* C with both fixture libraries loaded, libtrigv last (C->late is its function). */
static int load_fixture_libraries(struct child *c)
{
	if (child_start(c, 0) || child_do(c, "dlopen %s/libtrigs-7.0.so", dir) ||
	    child_do(c, "dlopen %s/libtrigv.so.1", dir))
		return -1;
	return c->late ? 0 : -1;
}

TEST(module_names_every_name_of_a_library)
{
	struct ht_module_names mn;
	struct ht_target tg;
	struct ht_maps maps;
	struct child c;
	char path[512];
	long v, z, libc;

	REQUIRE_PROGRAMS();
	CHECK(!load_fixture_libraries(&c));
	CHECK(!ht_maps_read(c.pid, &maps));
	ht_target_init(&tg, c.pid);
	CHECK(!ht_target_reopen_root(&tg));
	ht_module_names_init(&mn, &tg, &maps);
	v = exec_mapping(&maps, "/libtrigv.so.1.0.3");
	z = exec_mapping(&maps, "/libtrigs-7.0.so");
	libc = exec_mapping(&maps, "/libc.so.6");
	CHECK(v >= 0 && z >= 0 && libc >= 0);
	/* From /proc/PID/maps: the path and the file name. */
	snprintf(path, sizeof(path), "%s/libtrigv.so.1.0.3", dir);
	expect_name(&mn, v, path, 1);
	expect_name(&mn, v, "libtrigv.so.1.0.3", 1);
	/* From ldd: the soname, and the path through its symlink. */
	expect_name(&mn, v, "libtrigv.so.1", 1);
	snprintf(path, sizeof(path), "%s/libtrigv.so.1", dir);
	expect_name(&mn, v, path, 1);
	snprintf(path, sizeof(path), "%s/../%s/libtrigv.so", dir, strrchr(dir, '/') + 1);
	expect_name(&mn, v, path, 1);
	/* From a link line: the development symlink; and any other name beside the file. */
	expect_name(&mn, v, "libtrigv.so", 1);
	expect_name(&mn, v, "libtrigv-alias.so", 1);
	expect_name(&mn, v, "./libtrigv.so.1", 1);
	/* A soname no file is called. */
	expect_name(&mn, z, "libtrigs.so.7", 1);
	expect_name(&mn, libc, "libc.so.6", 1);
	/* Not these. */
	expect_name(&mn, v, "libtrigv.so.2", 0);
	expect_name(&mn, v, "libtrigv", 0);
	expect_name(&mn, v, "libtrigv.so.1.0", 0);
	expect_name(&mn, v, "/libtrigv.so.1", 0);
	expect_name(&mn, v, "libtrigs.so.7", 0);
	expect_name(&mn, z, "libtrigv.so.1", 0);
	expect_name(&mn, z, "libtrigs-7.0.so.1", 0);
	expect_name(&mn, v, "libc.so.6", 0);
	expect_name(&mn, v, "", 0);
	expect_name(&mn, v, ".", 0);
	expect_name(&mn, v, "..", 0);
	expect_name(&mn, v, "libs/", 0);
	/* Each "NAME => PATH" line of ldd (a peer tool): both name the library ld.so mapped. */
	{
		char cmd[512], line[1024], name[256], file[512];
		int lines = 0;
		struct stat st;
		FILE *p;

		snprintf(cmd, sizeof(cmd), "ldd '%s/trigprog'", dir);
		p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p)) {
			long k = -1;

			if (sscanf(line, " %255s => %511s", name, file) != 2 || stat(file, &st))
				continue;
			for (size_t i = 0; i < maps.count && k < 0; i++)
				if (ht_mapping_is_exec(&maps.v[i]) && maps.v[i].inode == st.st_ino)
					k = (long)i;
			CHECK(k >= 0);
			expect_name(&mn, k, name, 1);
			expect_name(&mn, k, file, 1);
			lines++;
		}
		if (p)
			pclose(p);
		CHECK(lines >= 4); /* libtrig, libdupa, libdupb, libc */
	}
	ht_module_names_free(&mn);
	ht_target_close(&tg);
	ht_maps_free(&maps);
	/* Resolved through each: the same function. */
	CHECK_EQ_U64(resolve1(&c, "libtrigv.so.1:ht_trig_late_function", 0), c.late);
	CHECK_EQ_U64(resolve1(&c, "libtrigv.so:ht_trig_late_function", 0), c.late);
	CHECK_EQ_U64(resolve1(&c, "libtrigv-alias.so:ht_trig_late_function", 0), c.late);
	/* An address as nm shows it, and a source line, in the module by its soname. */
	{
		char cmd[512], line[64] = "";
		FILE *p;

		snprintf(cmd, sizeof(cmd),
			 "nm '%s/libtrigv.so.1.0.3' | awk '$3 == \"ht_trig_late_function\" "
			 "{print $1}'",
			 dir);
		p = popen(cmd, "r");
		if (p && fgets(line, sizeof(line), p))
			line[strcspn(line, "\n")] = 0;
		if (p)
			pclose(p);
		CHECK(line[0] != 0);
		snprintf(path, sizeof(path), "libtrigv.so.1:0x%s", line);
		CHECK_EQ_U64(resolve1(&c, path, 0), c.late);
		CHECK(resolve1(&c, "libtrigv.so.1:late.c:4", 0) != 0);
	}
	CHECK(resolve1(&c, "libtrigs.so.7:ht_trig_late_function", 0) != 0);
	CHECK(resolve1(&c, "libtrigs.so.7:ht_trig_late_function", 0) != c.late);
	/* Two libraries define it: the name alone is ambiguous, as before. */
	check_resolve_error(&c, "ht_trig_late_function", 0, "ambiguous", "libtrigs-7.0.so");
	/* A name that matches nothing stays unresolved: an error, or waiting with WAIT. */
	check_resolve_error(&c, "libtrigv.so.2:ht_trig_late_function", 0,
			    "no module libtrigv.so.2 is mapped", NULL);
	{
		struct ht_symbolizer *s = ht_symbolizer_new(c.pid);
		struct ht_triggers t;

		ht_triggers_init(&t);
		CHECK(!ht_triggers_add(&t, "libtrigv.so.2:ht_trig_late_function"));
		CHECK(!ht_triggers_add(&t, "libtrigv.so.1:ht_trig_late_function"));
		CHECK(s && ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT) == 1);
		CHECK(!t.v[0].resolved && !t.v[0].ever_resolved);
		CHECK(contains(t.v[0].pending, "no module libtrigv.so.2"));
		CHECK(t.v[1].resolved && t.v[1].ever_resolved && t.v[1].addr == c.late);
		ht_symbolizer_free(s);
	}
	/* A file called by another's soname: the file name wins, as it always did. */
	{
		uint64_t by_soname = resolve1(&c, "libtrigs.so.7:ht_trig_late_function", 0);

		CHECK(!child_do(&c, "dlopen %s/plain/libtrigs.so.7", dir));
		CHECK(!ht_maps_read(c.pid, &maps));
		CHECK(!ht_target_reopen_root(&tg));
		ht_module_names_init(&mn, &tg, &maps);
		z = exec_mapping(&maps, "/libtrigs-7.0.so");
		v = exec_mapping(&maps, "/plain/libtrigs.so.7");
		CHECK(v >= 0 && z >= 0);
		expect_name(&mn, v, "libtrigs.so.7", 1);
		expect_name(&mn, z, "libtrigs.so.7", 0);
		ht_module_names_free(&mn);
		ht_target_close(&tg);
		ht_maps_free(&maps);
		CHECK_EQ_U64(resolve1(&c, "libtrigs.so.7:ht_trig_late_function", 0), c.late);
		CHECK(c.late != by_soname);
	}
	child_stop(&c);
}

/*
 * Names looked up in another root (a container's, a chroot's): found in its
 * library directories and those of its ld.so.conf, and never by following
 * a symlink out of it, though on the host that symlink leads to the file.
 */
TEST(module_names_inside_the_target_root)
{
	struct ht_module_names mn;
	struct ht_target tg;
	struct ht_maps maps;
	struct stat lib, escape;
	struct child c;
	char root[128], path[512];
	long v;

	REQUIRE_PROGRAMS();
	snprintf(root, sizeof(root), "%s/root", dir);
	if (sh("rm -rf '%s' && mkdir -p '%s/usr/lib' '%s/etc/ld.so.conf.d' '%s/opt/trig/lib'"
	       " && ln '%s/libtrigv.so.1.0.3' '%s/usr/lib/libtrigv.so.1.0.3'"
	       " && ln -s libtrigv.so.1.0.3 '%s/usr/lib/libinroot.so'"
	       " && ln -s /usr/lib/libtrigv.so.1.0.3 '%s/opt/trig/lib/libconf.so'"
	       " && echo 'include /etc/ld.so.conf.d/*.conf' > '%s/etc/ld.so.conf'"
	       " && printf '# a comment\n  /opt/trig/lib  \n' > '%s/etc/ld.so.conf.d/trig.conf'"
	       " && mkfifo '%s/etc/ld.so.conf.d/fifo.conf'"
	       " && ln -s '%s/libtrigv.so.1.0.3' '%s/usr/lib/libescape.so'"
	       " && ln -s '../../../../../../../..%s/libtrigv.so.1.0.3' '%s/usr/lib/libclimb.so'"
	       " && ln -s '%s/libtrigv.so.1.0.3' '%s/opt/trig/lib/libescape2.so'",
	       root, root, root, root, dir, root, root, root, root, root, root, dir, root, dir,
	       root, dir, root)) {
		CHECK(!"cannot build the root");
		return;
	}
	/* Followed on the host, the escaping links do lead to the library. */
	snprintf(path, sizeof(path), "%s/usr/lib/libescape.so", root);
	CHECK(!stat(path, &escape));
	snprintf(path, sizeof(path), "%s/libtrigv.so.1.0.3", dir);
	CHECK(!stat(path, &lib) && lib.st_ino == escape.st_ino);
	CHECK(!load_fixture_libraries(&c));
	CHECK(!ht_maps_read(c.pid, &maps));
	ht_target_init(&tg, c.pid);
	tg.root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(tg.root_fd >= 0);
	ht_module_names_init(&mn, &tg, &maps);
	v = exec_mapping(&maps, "/libtrigv.so.1.0.3");
	CHECK(v >= 0);
	/* In a library directory of the root; in one its ld.so.conf adds (the FIFO beside is
	 * not read). */
	expect_name(&mn, v, "libinroot.so", 1);
	expect_name(&mn, v, "libconf.so", 1);
	expect_name(&mn, v, "/usr/lib/libinroot.so", 1);
	/* Its soname is read through map_files, which needs root (hybtrace keeps what it needs). */
	if (geteuid() == 0)
		expect_name(&mn, v, "libtrigv.so.1", 1);
	/* Out of the root: an absolute link, one that climbs, and the host's own names. */
	expect_name(&mn, v, "libescape.so", 0);
	expect_name(&mn, v, "libescape2.so", 0);
	expect_name(&mn, v, "libclimb.so", 0);
	expect_name(&mn, v, "/usr/lib/libescape.so", 0);
	expect_name(&mn, v, "libtrigv-alias.so", 0);
	snprintf(path, sizeof(path), "%s/libtrigv.so.1", dir);
	expect_name(&mn, v, path, 0);
	ht_module_names_free(&mn);
	ht_target_close(&tg);
	ht_maps_free(&maps);
	child_stop(&c);
}

/* A program built without -g (sleep(1)): the error says that no module has debug info. */
TEST(line_in_a_process_without_debug_info)
{
	char exe[PATH_MAX], want[PATH_MAX], error[600];
	struct ht_symbolizer *s;
	struct ht_triggers t;
	ssize_t n = -1;
	pid_t pid;

	REQUIRE_ROOT();
	if (!realpath("/bin/sleep", want))
		SKIP_TEST("no /bin/sleep");
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0);
	/* Resolve once the exec has happened. */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	for (int i = 0; i < 500; i++) {
		char link[PATH_MAX];

		n = readlink(exe, link, sizeof(link) - 1);
		if (n > 0 && (link[n] = 0, !strcmp(link, want)))
			break;
		usleep(10000);
	}
	s = ht_symbolizer_new(pid);
	CHECK(s != NULL);
	ht_triggers_init(&t);
	CHECK(!ht_triggers_add(&t, "nothere.c:5"));
	CHECK(s && ht_triggers_resolve(&t, s, pid, 0) == -1);
	snprintf(want, sizeof(want),
		 "trigger 'nothere.c:5': no module of process %d has debug info (DWARF) to find "
		 "lines in: build it with -g",
		 pid);
	snprintf(error, sizeof(error), "%s", ht_last_error());
	CHECK_STR(error, want);
	ht_symbolizer_free(s);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

TEST(resolve_again_only_when_code_changes)
{
	struct ht_symbolizer *s;
	struct ht_triggers t;
	struct child c;
	char buf[512];

	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	CHECK(!child_start(&c, 0));
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (!s) {
		child_stop(&c);
		return;
	}
	ht_triggers_init(&t);
	CHECK(!ht_triggers_add(&t, "trig_work"));
	CHECK(!ht_triggers_add(&t, "libtriglate.so:ht_trig_late_function"));
	CHECK_EQ_U64(ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT), 1);
	CHECK(t.v[0].resolved && t.v[0].changed && t.v[0].addr == c.work);
	CHECK(!t.v[1].resolved && contains(t.v[1].pending, "no module libtriglate.so"));
	CHECK(contains(ht_trigger_describe(&t.v[1], buf, sizeof(buf)), "not resolved"));
	CHECK_EQ_U64(t.generation, 1);
	CHECK_EQ_U64(ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT), 0);
	CHECK(!t.v[0].changed);
	CHECK_EQ_U64(t.generation, 1);
	CHECK(!child_do(&c, "dlopen %s/libtriglate.so", dir));
	CHECK_EQ_U64(ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT), 1);
	CHECK(t.v[1].resolved && t.v[1].changed && t.v[1].addr == c.late);
	CHECK(!t.v[0].changed);
	CHECK_EQ_U64(t.generation, 2);
	CHECK(contains(ht_trigger_describe(&t.v[1], buf, sizeof(buf)), "libtriglate.so"));
	ht_symbolizer_free(s);
	child_stop(&c);
}

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

#define REQUIRE_SESSION(x, ...)                                                                    \
	do {                                                                                       \
		REQUIRE_ROOT();                                                                    \
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
	CHECK(!child_do(&x.c, "dlopen %s/libtriglate.so", dir));
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

	snprintf(cmd, sizeof(cmd), "nm '%s/%s'", dir, program);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p))
		symbol |= strstr(line, " hybtrace_trigger\n") != NULL &&
			  (strstr(line, " T ") || strstr(line, " W "));
	if (p)
		pclose(p);
	if (!symbol)
		return -1;
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn '%s/%s'", dir, program);
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
	char path[256], line[64];
	int in[2], out[2];

	REQUIRE_PROGRAMS();
	CHECK(!find_include_dir(include, sizeof(include)));
	if (write_file("lto_main.c", lto_main_c) || write_file("lto_other.c", lto_other_c)) {
		CHECK(!"cannot write the LTO program");
		return;
	}
	CHECK(!sh("cd '%s' && gcc -O3 -flto -Wall -Wextra -Werror -I'%s' -o lto_gcc lto_main.c "
		  "lto_other.c",
		  dir, include));
	/* Every call is still a call: none inlined, none dropped, none to a clone. */
	CHECK_EQ_U64(count_stop_calls("lto_gcc"), 3);
	if (!system("command -v clang >/dev/null && command -v ld.lld >/dev/null")) {
		CHECK(!sh("cd '%s' && clang -O3 -flto -fuse-ld=lld -Wall -Wextra -Werror -I'%s' "
			  "-o lto_clang lto_main.c lto_other.c",
			  dir, include));
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
	snprintf(path, sizeof(path), "%s/lto_gcc", dir);
	if (pipe(in) || pipe(out)) {
		CHECK(!"pipe");
		return;
	}
	c.pid = fork();
	if (c.pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, "x", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c.to = fdopen(in[1], "w");
	c.from = fdopen(out[0], "r");
	alarm(60);
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
