// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only, linked into the tests that use it: see trigger_programs.h. */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "programs.h"
#include "sh.h"
#include "symbols/symbolizer.h"
#include "trigger_programs.h"

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

char trig_dir[64];
static int built; /* 0: not tried; 1: built; -1: failed */

int trig_programs_build(void)
{
	char include[PATH_MAX + 16];

	if (built)
		return built > 0 ? 0 : -1;
	built = -1;
	if (prog_find_include_dir("hybtrace/hybtrace.h", include, sizeof(include))) {
		printf("     cannot find include/hybtrace/hybtrace.h\n");
		return -1;
	}
	if (prog_make_dir(trig_dir, sizeof(trig_dir), "/tmp/ht-triggers-XXXXXX"))
		return -1;
	if (prog_write_file(trig_dir, "prog.c", prog_c) ||
	    prog_write_file(trig_dir, "twin.c", twin_c) ||
	    prog_write_file(trig_dir, "lib.c", lib_c) ||
	    prog_write_file(trig_dir, "late.c", late_c) ||
	    prog_write_file(trig_dir, "dup.c", dup_c))
		return -1;
	if (sh("cd '%s' && cc -O1 -g -shared -fPIC -o libtrig.so lib.c"
	       " && cc -O1 -g -shared -fPIC -o libtriglate.so late.c"
	       " && cc -O1 -g -shared -fPIC -DDUP_VALUE=1 -o libdupa.so dup.c"
	       " && cc -O1 -g -shared -fPIC -DDUP_VALUE=2 -o libdupb.so dup.c"
	       " && cc -O1 -g -fPIE -pie -I'%s' -o trigprog prog.c twin.c -L. -Wl,--no-as-needed "
	       "-ltrig -ldupa "
	       "-ldupb -Wl,--no-as-needed -Wl,-rpath,'%s' -pthread -ldl",
	       trig_dir, include, trig_dir))
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
	       trig_dir))
		return -1;
	built = 1;
	return 0;
}

int read_banner(struct child *c)
{
	char line[64];

	c->work = prog_read_address(c->from, "work");
	c->other = prog_read_address(c->from, "other");
	c->thread = prog_read_address(c->from, "thread");
	c->twin_a = prog_read_address(c->from, "twin_a");
	c->twin_b = prog_read_address(c->from, "twin_b");
	c->lib = prog_read_address(c->from, "lib");
	if (!fgets(line, sizeof(line), c->from) || strcmp(line, "ready\n"))
		return -1;
	return c->work && c->other && c->thread && c->twin_a && c->twin_b && c->lib ? 0 : -1;
}

int child_start(struct child *c, int fixed)
{
	memset(c, 0, sizeof(*c));
	c->pid = prog_start(trig_dir, "trigprog", NULL, fixed, &c->to, &c->from);
	if (c->pid < 0)
		return -1;
	return read_banner(c);
}

int child_do(struct child *c, const char *fmt, ...)
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

void child_stop(struct child *c)
{
	prog_stop(c->pid, c->to, c->from);
	memset(c, 0, sizeof(*c));
}

const char *function_at(struct ht_symbolizer *s, uint64_t addr)
{
	struct ht_symbol sym;

	if (ht_symbolize(s, addr, &sym) || !sym.function)
		return "";
	return sym.function;
}

int contains(const char *s, const char *want)
{
	return s && strstr(s, want) != NULL;
}
