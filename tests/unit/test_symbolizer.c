// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The symbolizer against real processes: the test compiles small programs
 * (PIE, non-PIE, stripped with a debuglink, shared libraries) in a temp
 * directory, runs them, and checks that the addresses they print of their
 * own functions symbolize to those functions and that the names look up
 * to those addresses: through dlopen, the vdso, a perf map and a deleted
 * binary. Tests that need root skip without it, and fail under CI=true.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "programs.h"
#include "base/log.h"
#include "symbols/elf_cache.h"
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "symbols/target_files.h"

static const char lib_c[] = "__attribute__((noinline)) int ht_lib_function(int x)\n"
			    "{\n"
			    "	__asm__ volatile(\"\" : \"+r\"(x));\n"
			    "	return x * 3 + 1;\n"
			    "}\n";

static const char late_c[] = "__attribute__((noinline)) int LATE_NAME(int x)\n"
			     "{\n"
			     "	__asm__ volatile(\"\" : \"+r\"(x));\n"
			     "	return x * 5 + 1;\n"
			     "}\n";

/*
 * Prints the runtime addresses of its functions (the library's through
 * dlsym: a non-PIE program's own pointer to it is its PLT stub), then
 * obeys stdin:
 * "perfmap" writes /tmp/perf-PID.map for its anonymous code page,
 * "dlopen PATH NAME" loads a library and prints NAME's address,
 * "dlclose" unloads it, "bind SRC DST" moves it into a mount namespace of
 * its own where SRC is mounted over DST (a container's view of a path).
 */
static const char prog_c[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <sched.h>\n"
	"#include <sys/mount.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"#include <sys/mman.h>\n"
	"#include <unistd.h>\n"
	"extern int ht_lib_function(int);\n"
	"__attribute__((noinline)) int prog_global_function(int x)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(x));\n"
	"	return x + 2;\n"
	"}\n"
	"__attribute__((noinline)) static int prog_local_function(int x)\n"
	"{\n"
	"	__asm__ volatile(\"\" : \"+r\"(x));\n"
	"	return x + 3;\n"
	"}\n"
	"int main(void)\n"
	"{\n"
	"	char line[4096], path[64], name[256], lib[3000];\n"
	"	void *vdso = dlopen(\"linux-vdso.so.1\", RTLD_LAZY | RTLD_NOLOAD);\n"
	"	void *jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, "
	"-1, 0);\n"
	"	void *late = NULL;\n"
	"	printf(\"global %p\\nlocal %p\\nlib %p\\nvdso %p\\njit %p\\nready\\n\",\n"
	"	       (void *)prog_global_function, (void *)prog_local_function,\n"
	"	       dlsym(RTLD_DEFAULT, \"ht_lib_function\"),\n"
	"	       vdso ? dlsym(vdso, \"__vdso_clock_gettime\") : NULL, jit);\n"
	"	fflush(stdout);\n"
	"	while (fgets(line, sizeof(line), stdin)) {\n"
	"		if (!strncmp(line, \"perfmap\", 7)) {\n"
	"			FILE *f;\n"
	"			snprintf(path, sizeof(path), \"/tmp/perf-%d.map\", getpid());\n"
	"			f = fopen(path, \"w\");\n"
	"			fprintf(f, \"%lx 40 jitted_function_one\\n0x%lx 0x20 jitted "
	"two\\n\",\n"
	"				(unsigned long)jit, (unsigned long)jit + 0x40);\n"
	"			fclose(f);\n"
	"			printf(\"ok\\n\");\n"
	"		} else if (sscanf(line, \"dlopen %2999s %255s\", lib, name) == 2) {\n"
	"			late = dlopen(lib, RTLD_NOW);\n"
	"			printf(\"late %p\\n\", late ? dlsym(late, name) : NULL);\n"
	"		} else if (sscanf(line, \"bind %2999s %255s\", lib, name) == 2) {\n"
	"			int ok = !unshare(CLONE_NEWNS) &&\n"
	"				 !mount(NULL, \"/\", NULL, MS_REC | MS_PRIVATE, NULL) &&\n"
	"				 !mount(lib, name, NULL, MS_BIND, NULL);\n"
	"			printf(\"bound %d\\n\", ok);\n"
	"		} else if (!strncmp(line, \"dlclose\", 7)) {\n"
	"			printf(\"closed %d\\n\", late ? dlclose(late) : -1);\n"
	"			late = NULL;\n"
	"		}\n"
	"		fflush(stdout);\n"
	"	}\n"
	"	return prog_global_function(1) + prog_local_function(2) + ht_lib_function(3);\n"
	"}\n";

static char dir[64];
static int built; /* 0: not tried; 1: built; -1: failed */

/* Build every program once; 0 when they are there. */
static int build_programs(void)
{
	if (built)
		return built > 0 ? 0 : -1;
	built = -1;
	if (prog_make_dir(dir, sizeof(dir), "/tmp/ht-symbolizer-XXXXXX"))
		return -1;
	if (prog_write_file(dir, "lib.c", lib_c) || prog_write_file(dir, "late.c", late_c) ||
	    prog_write_file(dir, "prog.c", prog_c))
		return -1;
	if (sh("cd '%s' && cc -O1 -g -shared -fPIC -o libhtlib.so lib.c"
	       " && cc -O1 -g -shared -fPIC -DLATE_NAME=ht_late_function -o libhtlate.so late.c"
	       " && cc -O1 -g -shared -fPIC -DLATE_NAME=ht_late_function_v2 -o libhtlate2.so "
	       "late.c"
	       " && cc -O1 -g -fPIE -pie -o prog_pie prog.c -L. -lhtlib -Wl,-rpath,'%s' -ldl"
	       " && cc -O1 -g -fno-pie -no-pie -o prog_nopie prog.c -L. -lhtlib -Wl,-rpath,'%s' "
	       "-ldl",
	       dir, dir, dir))
		return -1;
	/* Stripped, with its symbols in a separate file named by .gnu_debuglink. */
	if (sh("cd '%s' && cp prog_pie prog_stripped"
	       " && objcopy --only-keep-debug prog_stripped prog_stripped.debug"
	       " && strip --strip-all prog_stripped"
	       " && objcopy --add-gnu-debuglink=prog_stripped.debug prog_stripped"
	       " && cp prog_pie prog_badcrc && strip --strip-all prog_badcrc"
	       " && cp prog_stripped.debug prog_badcrc.debug"
	       " && objcopy --add-gnu-debuglink=prog_badcrc.debug prog_badcrc"
	       " && echo changed >> prog_badcrc.debug"
	       /* Another inode with the same build-id: one program in two containers' layers. */
	       " && cp prog_pie prog_pie_copy",
	       dir))
		return -1;
	built = 1;
	return 0;
}

#define REQUIRE_PROGRAMS() REQUIRE_BUILT(build_programs)

struct child {
	pid_t pid;
	FILE *to, *from;
	uint64_t global, local, lib, vdso, jit;
};

/* Start DIR/PROGRAM and read the addresses it prints. */
static int child_start(struct child *c, const char *program)
{
	char line[64];

	memset(c, 0, sizeof(*c));
	c->pid = prog_start(dir, program, NULL, false, &c->to, &c->from);
	if (c->pid < 0)
		return -1;
	c->global = prog_read_address(c->from, "global");
	c->local = prog_read_address(c->from, "local");
	c->lib = prog_read_address(c->from, "lib");
	c->vdso = prog_read_address(c->from, "vdso");
	c->jit = prog_read_address(c->from, "jit");
	if (!fgets(line, sizeof(line), c->from) || strcmp(line, "ready\n"))
		return -1;
	return c->global && c->local && c->lib && c->jit ? 0 : -1;
}

/* Send a command, return the first line of the answer. */
static int child_ask(struct child *c, const char *cmd, char *answer, size_t len)
{
	fprintf(c->to, "%s\n", cmd);
	fflush(c->to);
	return fgets(answer, (int)len, c->from) ? 0 : -1;
}

static void child_stop(struct child *c)
{
	char path[64];

	prog_stop(c->pid, c->to, c->from);
	if (c->pid > 0) {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", c->pid);
		unlink(path);
	}
	memset(c, 0, sizeof(*c));
}

/* The function ADDR symbolizes to, "" when none. */
static const char *function_at(struct ht_symbolizer *s, uint64_t addr)
{
	struct ht_symbol sym;

	if (ht_symbolize(s, addr, &sym) || !sym.function)
		return "";
	return sym.function;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* Whether some note so far holds WANT. */
static int noted(struct ht_symbolizer *s, const char *want)
{
	static char seen[64][512];
	static int nseen;
	const char *n;

	while ((n = ht_symbolizer_next_note(s)) && nseen < 64)
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", n);
	for (int i = 0; i < nseen; i++)
		if (strstr(seen[i], want))
			return 1;
	return 0;
}

/* The address NAME looks up to in MODULE; 0 unless there is exactly one. */
static uint64_t lookup_one(struct ht_symbolizer *s, const char *module, const char *name)
{
	struct ht_symbol_address a[4];
	size_t found;

	if (ht_symbolizer_lookup(s, module, name, a, 4, &found) || found != 1)
		return 0;
	return a[0].addr;
}

static void check_program(const char *program)
{
	struct ht_symbolizer *s;
	struct ht_symbol sym;
	struct child c;
	char buf[256];

	CHECK(child_start(&c, program) == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (!s || !c.pid)
		goto out;
	CHECK_STR(function_at(s, c.global), "prog_global_function");
	CHECK_STR(function_at(s, c.local), "prog_local_function");
	CHECK_STR(function_at(s, c.lib), "ht_lib_function");
	CHECK(ht_symbolize(s, c.global + 3, &sym) == 0);
	CHECK_STR(sym.function, "prog_global_function");
	CHECK_EQ_U64(sym.function_offset, 3);
	CHECK(ends_with(sym.module, program));
	CHECK(sym.build_id && strlen(sym.build_id) == 40);
	CHECK_STR(ht_symbol_format(&sym, c.global + 3, buf, sizeof(buf)), "prog_global_function");
	CHECK(ht_symbolize(s, c.lib, &sym) == 0);
	CHECK(ends_with(sym.module, "/libhtlib.so"));
	CHECK_EQ_U64(sym.function_offset, 0);

	CHECK_EQ_U64(lookup_one(s, NULL, "prog_global_function"), c.global);
	CHECK_EQ_U64(lookup_one(s, program, "prog_local_function"), c.local);
	CHECK_EQ_U64(lookup_one(s, "libhtlib.so", "ht_lib_function"), c.lib);
	snprintf(buf, sizeof(buf), "%s/libhtlib.so", dir);
	CHECK_EQ_U64(lookup_one(s, buf, "ht_lib_function"), c.lib);
	CHECK_EQ_U64(lookup_one(s, "libc.so.6", "ht_lib_function"), 0);
	CHECK(strstr(ht_last_error(), "no function ht_lib_function in libc.so.6") != NULL);
	CHECK_EQ_U64(lookup_one(s, "libnothere.so", "ht_lib_function"), 0);
	CHECK(strstr(ht_last_error(), "no module libnothere.so") != NULL);
	CHECK(lookup_one(s, "libc.so.6", "malloc") != 0);
out:
	ht_symbolizer_free(s);
	child_stop(&c);
}

TEST(pie_program)
{
	REQUIRE_PROGRAMS();
	check_program("prog_pie");
}

TEST(non_pie_program)
{
	REQUIRE_PROGRAMS();
	check_program("prog_nopie");
}

TEST(stripped_program_with_debuglink)
{
	struct ht_symbolizer *s;
	struct child c;
	const char *source;

	REQUIRE_PROGRAMS();
	CHECK(child_start(&c, "prog_stripped") == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s && c.pid) {
		/* Neither is in .dynsym: both come from the debug file. */
		CHECK_STR(function_at(s, c.global), "prog_global_function");
		CHECK_STR(function_at(s, c.local), "prog_local_function");
		CHECK_EQ_U64(lookup_one(s, "prog_stripped", "prog_local_function"), c.local);
		source = ht_symbolizer_source(s, c.global);
		CHECK(source && strstr(source, "prog_stripped.debug"));
	}
	ht_symbolizer_free(s);
	child_stop(&c);
}

TEST(debuglink_with_wrong_crc_is_ignored)
{
	struct ht_symbolizer *s;
	struct ht_symbol sym;
	struct child c;

	REQUIRE_PROGRAMS();
	CHECK(child_start(&c, "prog_badcrc") == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s && c.pid) {
		CHECK(ht_symbolize(s, c.local, &sym) == 0);
		CHECK(sym.function == NULL);
		CHECK(ends_with(sym.module, "/prog_badcrc"));
		CHECK(noted(s, "prog_badcrc.debug: CRC"));
		/* Unknown functions still say where they are. */
		CHECK(sym.module_offset > 0 && sym.module_offset < 0x100000);
	}
	ht_symbolizer_free(s);
	child_stop(&c);
}

TEST(library_loaded_later_found_after_refresh)
{
	struct ht_symbolizer_stats before, after;
	struct ht_symbolizer *s;
	struct child c;
	char cmd[512], answer[128];
	void *p = NULL;
	uint64_t late;

	REQUIRE_PROGRAMS();
	CHECK(child_start(&c, "prog_pie") == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (!s || !c.pid)
		goto out;
	CHECK_STR(function_at(s, c.global), "prog_global_function");
	snprintf(cmd, sizeof(cmd), "dlopen %s/libhtlate.so ht_late_function", dir);
	CHECK(child_ask(&c, cmd, answer, sizeof(answer)) == 0);
	CHECK(sscanf(answer, "late %p", &p) == 1 && p);
	late = (uint64_t)(uintptr_t)p;
	CHECK(strcmp(function_at(s, late), "ht_late_function"));
	ht_symbolizer_get_stats(s, &before);
	CHECK(ht_symbolizer_refresh(s) == 0);
	CHECK_STR(function_at(s, late), "ht_late_function");
	CHECK_STR(function_at(s, c.global), "prog_global_function");
	ht_symbolizer_get_stats(s, &after);
	/* The program's symbols were kept; only the new library was read. */
	CHECK_EQ_U64(after.elf_reads, before.elf_reads + 1);
	CHECK_EQ_U64(lookup_one(s, "libhtlate.so", "ht_late_function"), late);

	/* The library replaced by another file (a new inode) at the same path. */
	CHECK(child_ask(&c, "dlclose", answer, sizeof(answer)) == 0);
	CHECK_STR(answer, "closed 0\n");
	CHECK(sh("cd '%s' && cp libhtlate2.so tmp.so && mv tmp.so libhtlate.so", dir) == 0);
	snprintf(cmd, sizeof(cmd), "dlopen %s/libhtlate.so ht_late_function_v2", dir);
	CHECK(child_ask(&c, cmd, answer, sizeof(answer)) == 0);
	CHECK(sscanf(answer, "late %p", &p) == 1 && p);
	CHECK(ht_symbolizer_refresh(s) == 0);
	CHECK_STR(function_at(s, (uint64_t)(uintptr_t)p), "ht_late_function_v2");
	CHECK_EQ_U64(lookup_one(s, "libhtlate.so", "ht_late_function"), 0);
out:
	ht_symbolizer_free(s);
	child_stop(&c);
	sh("cd '%s' && cc -O1 -g -shared -fPIC -DLATE_NAME=ht_late_function -o libhtlate.so late.c",
	   dir);
}

TEST(vdso_function)
{
	struct ht_symbolizer *s;
	struct ht_symbol sym;
	struct child c;
	const char *source;

	REQUIRE_PROGRAMS();
	CHECK(child_start(&c, "prog_pie") == 0);
	if (!c.vdso) {
		child_stop(&c);
		SKIP_TEST("no vdso in this process");
	}
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s) {
		CHECK(ht_symbolize(s, c.vdso + 1, &sym) == 0);
		CHECK_STR(sym.function, "__vdso_clock_gettime");
		CHECK_STR(sym.module, "[vdso]");
		CHECK_EQ_U64(sym.function_offset, 1);
		CHECK_EQ_U64(lookup_one(s, "[vdso]", "__vdso_clock_gettime"), c.vdso);
		source = ht_symbolizer_source(s, c.vdso);
		CHECK(source != NULL);
		/* Root reads the target's own copy; others fall back to hybtrace's. */
		if (source && geteuid() == 0)
			CHECK(strstr(source, "/mem") != NULL);
	}
	ht_symbolizer_free(s);
	child_stop(&c);
}

TEST(perf_map_for_jit_code)
{
	struct ht_symbolizer *s;
	struct ht_symbol sym;
	struct child c;
	char answer[64], buf[128];

	REQUIRE_PROGRAMS();
	CHECK(child_start(&c, "prog_pie") == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (!s || !c.pid)
		goto out;
	/* Before the map exists: anonymous memory, offset from its start. */
	CHECK(ht_symbolize(s, c.jit + 0x10, &sym) == 0);
	CHECK(sym.function == NULL);
	CHECK_STR(sym.module, "[anon]");
	CHECK_EQ_U64(sym.module_offset, 0x10);
	CHECK_STR(ht_symbol_format(&sym, c.jit + 0x10, buf, sizeof(buf)), "[anon]+0x10");
	CHECK(child_ask(&c, "perfmap", answer, sizeof(answer)) == 0);
	CHECK(ht_symbolizer_refresh(s) == 0);
	CHECK(ht_symbolize(s, c.jit + 0x30, &sym) == 0);
	CHECK_STR(sym.function, "jitted_function_one");
	CHECK_EQ_U64(sym.function_offset, 0x30);
	CHECK_STR(sym.module, "[jit]");
	CHECK_STR(function_at(s, c.jit + 0x45), "jitted two");
	CHECK(ht_symbolize(s, c.jit + 0x100, &sym) == 0);
	CHECK(sym.function == NULL);
	CHECK_STR(sym.module, "[anon]");
out:
	ht_symbolizer_free(s);
	child_stop(&c);
}

enum untrusted { SYMLINK, OTHER_OWNER, FIFO };

/* Replace the target's perf map with something it must not trust. */
static void check_perf_map_refused(enum untrusted how, const char *want_note)
{
	struct ht_symbolizer *s;
	struct child c;
	char answer[64], map[64], real[128];

	CHECK(child_start(&c, "prog_pie") == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (!s || !c.pid)
		goto out;
	CHECK(child_ask(&c, "perfmap", answer, sizeof(answer)) == 0);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", c.pid);
	snprintf(real, sizeof(real), "%s/real.map", dir);
	if (how == SYMLINK) {
		CHECK(rename(map, real) == 0);
		CHECK(symlink(real, map) == 0);
	} else if (how == OTHER_OWNER) {
		CHECK(chown(map, 12345, 12345) == 0);
	} else {
		/* Opening a FIFO for reading would wait for a writer: it must not hang us. */
		CHECK(unlink(map) == 0);
		CHECK(mkfifo(map, 0600) == 0);
	}
	CHECK(ht_symbolizer_refresh(s) == 0);
	CHECK_STR(function_at(s, c.jit + 0x30), "");
	CHECK(noted(s, want_note));
out:
	ht_symbolizer_free(s);
	child_stop(&c);
	unlink(real);
}

TEST(perf_map_symlink_ignored)
{
	REQUIRE_PROGRAMS();
	check_perf_map_refused(SYMLINK, "is a symbolic link: ignored");
}

TEST(perf_map_fifo_ignored)
{
	REQUIRE_PROGRAMS();
	check_perf_map_refused(FIFO, "is not a regular file: ignored");
}

TEST(perf_map_of_another_user_ignored)
{
	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	check_perf_map_refused(OTHER_OWNER, "is owned by uid 12345");
}

/* A deleted binary can be read only through /proc/PID/map_files. */
TEST(deleted_binary_through_map_files)
{
	struct ht_symbolizer *s;
	struct child c;
	char path[256];
	const char *source;

	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	CHECK(sh("cp '%s/prog_pie' '%s/prog_doomed'", dir, dir) == 0);
	CHECK(child_start(&c, "prog_doomed") == 0);
	snprintf(path, sizeof(path), "%s/prog_doomed", dir);
	CHECK(unlink(path) == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s && c.pid) {
		CHECK_STR(function_at(s, c.local), "prog_local_function");
		source = ht_symbolizer_source(s, c.local);
		CHECK(source && strstr(source, "/map_files/"));
		CHECK_EQ_U64(lookup_one(s, "prog_doomed (deleted)", "prog_global_function"),
			     c.global);
		CHECK_EQ_U64(lookup_one(s, "prog_doomed", "prog_global_function"), c.global);
		CHECK_EQ_U64(lookup_one(s, path, "prog_global_function"), c.global);
	}
	ht_symbolizer_free(s);
	child_stop(&c);
}

/* Set or clear capabilities in our effective set (the permitted set stays). */
static int set_effective(const int *caps, int n, int on)
{
	struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &head, data))
		return -1;
	for (int i = 0; i < n; i++) {
		uint32_t bit = 1u << (caps[i] % 32);

		if (on)
			data[caps[i] / 32].effective |= bit;
		else
			data[caps[i] / 32].effective &= ~bit;
	}
	return (int)syscall(SYS_capset, &head, data);
}

/*
 * A target in its own mount namespace sees another file at a path than we
 * do: its symbols must come from its file, through map_files and, without
 * the capabilities map_files needs, through /proc/PID/root.
 */
static void check_own_mount_namespace(int without_map_files)
{
	static const int map_files_caps[] = {CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE};
	struct ht_symbolizer *s = NULL;
	struct child c;
	char cmd[1024], answer[128];
	const char *source;
	void *p = NULL;

	CHECK(child_start(&c, "prog_pie") == 0);
	snprintf(cmd, sizeof(cmd), "bind %s/libhtlate2.so %s/libhtlate.so", dir, dir);
	CHECK(child_ask(&c, cmd, answer, sizeof(answer)) == 0);
	/* Root in an unprivileged container cannot mount: not this test's business, but CI's. */
	if (strcmp(answer, "bound 1\n") && !ci()) {
		child_stop(&c);
		SKIP_TEST("cannot make a mount namespace here");
	}
	CHECK_STR(answer, "bound 1\n");
	snprintf(cmd, sizeof(cmd), "dlopen %s/libhtlate.so ht_late_function_v2", dir);
	CHECK(child_ask(&c, cmd, answer, sizeof(answer)) == 0);
	CHECK(sscanf(answer, "late %p", &p) == 1 && p);
	if (without_map_files)
		CHECK(set_effective(map_files_caps, 2, 0) == 0);
	s = ht_symbolizer_new(c.pid);
	CHECK(s != NULL);
	if (s && p) {
		CHECK_STR(function_at(s, (uint64_t)(uintptr_t)p), "ht_late_function_v2");
		source = ht_symbolizer_source(s, (uint64_t)(uintptr_t)p);
		CHECK(source && strstr(source, without_map_files ? "/root/" : "/map_files/"));
		/* Our own view of the path has the other library. */
		CHECK_STR(function_at(s, c.global), "prog_global_function");
	}
	if (without_map_files)
		CHECK(set_effective(map_files_caps, 2, 1) == 0);
	ht_symbolizer_free(s);
	child_stop(&c);
}

TEST(target_in_own_mount_namespace)
{
	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	check_own_mount_namespace(0);
}

TEST(target_in_own_mount_namespace_without_map_files)
{
	REQUIRE_ROOT();
	REQUIRE_PROGRAMS();
	check_own_mount_namespace(1);
}

TEST(own_process_and_unknown_addresses)
{
	struct ht_symbolizer *s = ht_symbolizer_new(getpid());
	struct ht_symbol sym;
	char buf[64];

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_STR(function_at(s, (uint64_t)(uintptr_t)&ht_symbolizer_new), "ht_symbolizer_new");
	CHECK_STR(function_at(s, (uint64_t)(uintptr_t)&check_program), "check_program");
	CHECK(ht_symbolize(s, 0x10, &sym) == -1);
	CHECK(sym.module == NULL && sym.function == NULL);
	CHECK_STR(ht_symbol_format(&sym, 0x10, buf, sizeof(buf)), "0x10");
	sym = (struct ht_symbol){.module = "/usr/lib/libfoo.so.1", .module_offset = 0x1234};
	CHECK_STR(ht_symbol_format(&sym, 0, buf, sizeof(buf)), "libfoo.so.1+0x1234");
	sym = (struct ht_symbol){.module = "[vdso]", .module_offset = 0x99};
	CHECK_STR(ht_symbol_format(&sym, 0, buf, sizeof(buf)), "[vdso]+0x99");
	ht_symbolizer_free(s);
	CHECK(ht_symbolizer_new(-7) == NULL);
	CHECK(strstr(ht_last_error(), "/proc/-7/maps") != NULL);
}

/*
 * A debug file by build-id in a root of our making, as /proc/PID/root opens a
 * target's: the absolute symlink planted there resolves inside that root,
 * and a FIFO is refused unopened.
 */
TEST(build_id_debug_file_stays_in_the_root)
{
	char base[] = "/tmp/ht-debugroot-XXXXXX", root[64], canary[96], inner[192], link[128];
	char shown[512];
	struct ht_target t;
	int fd;

	CHECK(mkdtemp(base) != NULL);
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(canary, sizeof(canary), "%s/outside/canary.fifo", base);
	snprintf(inner, sizeof(inner), "%s%s", root, canary);
	CHECK(!sh("mkdir -p '%s/usr/lib/debug/.build-id/ab' '%s/outside' '%s%s/outside'", root,
		  base, root, base));
	snprintf(link, sizeof(link), "%s/usr/lib/debug/.build-id/ab/12cd34ef.debug", root);
	CHECK(!symlink(canary, link));
	CHECK(!mkfifo(canary, 0600));
	ht_target_init(&t, getpid());
	t.root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(t.root_fd >= 0);
	/* Followed from our root the symlink names our FIFO; inside that root, nothing. */
	CHECK(ht_target_open_build_id_debug(&t, "ab12cd34ef", HT_DEBUG_IN_ROOT, shown,
					    sizeof(shown)) == -2);
	/* The FIFO where it leads inside the root: refused, and no writer finds a reader. */
	CHECK(!mkfifo(inner, 0600));
	CHECK(ht_target_open_build_id_debug(&t, "ab12cd34ef", HT_DEBUG_IN_ROOT, shown,
					    sizeof(shown)) == -1);
	CHECK(strstr(ht_last_error(), "not a regular file") != NULL);
	CHECK(open(inner, O_WRONLY | O_NONBLOCK) == -1 && errno == ENXIO);
	/* A regular file there is the debug file, named as the target sees it. */
	CHECK(!sh("rm '%s' && echo debug > '%s'", inner, inner));
	fd = ht_target_open_build_id_debug(&t, "ab12cd34ef", HT_DEBUG_IN_ROOT, shown,
					   sizeof(shown));
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(strstr(shown, "/root/usr/lib/debug/.build-id/ab/12cd34ef.debug") != NULL);
	/* Only hex digits name a file: no path goes through. */
	CHECK(ht_target_open_build_id_debug(&t, "ab/../../x", HT_DEBUG_IN_ROOT, shown,
					    sizeof(shown)) == -2);
	CHECK(ht_target_open_build_id_debug(&t, "ab", HT_DEBUG_IN_ROOT, shown, sizeof(shown)) ==
	      -2);
	/* Our own /usr/lib/debug only for a target whose root is another. */
	t.same_root = 1;
	CHECK(ht_target_open_build_id_debug(&t, "ab12cd34ef", HT_DEBUG_ON_HOST, shown,
					    sizeof(shown)) == -2);
	ht_target_close(&t);
	sh("rm -rf '%s'", base);
}

/* Where the distribution keeps libc's symbols, when its debug package is installed. */
TEST(libc_debug_file_by_build_id)
{
	struct ht_symbolizer *s = ht_symbolizer_new(getpid());
	char path[128];
	struct ht_symbol sym = {0};
	const char *source;
	uint64_t addr;

	CHECK(s != NULL);
	if (!s)
		return;
	/* Not &malloc: under ASan that is the interceptor in this binary. */
	addr = lookup_one(s, "libc.so.6", "malloc");
	if (!addr || ht_symbolize(s, addr, &sym) || !sym.build_id) {
		ht_symbolizer_free(s);
		SKIP_TEST("libc is not a shared library with a build-id here");
	}
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", sym.build_id,
		 sym.build_id + 2);
	if (access(path, R_OK)) {
		ht_symbolizer_free(s);
		/* make deps installs libc6-dbg: CI must run this, not skip it. */
		if (ci()) {
			CHECK(!"no libc debug file: make deps installs libc6-dbg, and CI=true");
			return;
		}
		SKIP_TEST("no libc debug file (libc6-dbg) installed");
	}
	source = ht_symbolizer_source(s, addr);
	CHECK(source && strstr(source, path));
	CHECK_STR(sym.function, "malloc");
	/* A static function only the debug file names. */
	CHECK(lookup_one(s, "libc.so.6", "_int_malloc") != 0);
	ht_symbolizer_free(s);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The libc code mapping of the process S looks at. */
static const struct ht_mapping *libc_code(const struct ht_maps *maps)
{
	for (size_t i = 0; i < maps->count; i++)
		if (ht_mapping_is_exec(&maps->v[i]) && strstr(maps->v[i].path, "/libc.so"))
			return &maps->v[i];
	return NULL;
}

/* Every function the child prints symbolizes to its name through S. */
static void check_own_functions(struct ht_symbolizer *s, const struct child *c)
{
	CHECK_STR(function_at(s, c->global), "prog_global_function");
	CHECK_STR(function_at(s, c->local), "prog_local_function");
	CHECK_STR(function_at(s, c->lib), "ht_lib_function");
}

TEST(processes_share_symbol_tables)
{
	struct ht_elf_cache_stats cache_first, cache_all;
	struct ht_symbolizer_stats first, same, copy, other;
	struct ht_symbolizer *s[4] = {NULL};
	static const char *const programs[4] = {"prog_pie", "prog_pie", "prog_pie_copy",
						"prog_nopie"};
	struct ht_elf_cache *cache;
	struct child c[4];
	int started = 0;

	REQUIRE_PROGRAMS();
	cache = ht_elf_cache_new();
	CHECK(cache != NULL);
	if (!cache)
		return;
	for (; started < 4; started++)
		if (child_start(&c[started], programs[started]))
			break;
	CHECK(started == 4);
	if (started < 4)
		goto out;
	/* One after the other: each symbolizes its own process, the first reads what they share. */
	s[0] = ht_symbolizer_new_shared(c[0].pid, cache);
	CHECK(s[0] != NULL);
	if (!s[0])
		goto out;
	check_own_functions(s[0], &c[0]);
	ht_symbolizer_get_stats(s[0], &first);
	ht_elf_cache_get_stats(cache, &cache_first);
	CHECK_EQ_U64(first.elf_reads, 2); /* the program and libhtlib, whose addresses it asked */
	CHECK_EQ_U64(first.tables_shared, 0);
	for (int i = 1; i < 4; i++) {
		s[i] = ht_symbolizer_new_shared(c[i].pid, cache);
		CHECK(s[i] != NULL);
		if (!s[i])
			goto out;
		check_own_functions(s[i], &c[i]);
	}
	ht_symbolizer_get_stats(s[1], &same);
	ht_symbolizer_get_stats(s[2], &copy);
	ht_symbolizer_get_stats(s[3], &other);
	/* The same program, the same libraries: nothing read again. */
	CHECK_EQ_U64(same.elf_reads, 0);
	CHECK_EQ_U64(same.tables_shared, 2);
	/* A copy of it (another inode, the same build-id) shares the program's table too. */
	CHECK_EQ_U64(copy.elf_reads, 0);
	/* Another program (another build-id) is read; the libraries it shares are not. */
	CHECK_EQ_U64(other.elf_reads, 1);
	/* And no process's symbolizer names another's addresses (a mix-up would). */
	CHECK(strcmp(function_at(s[0], c[3].global), "prog_global_function") ||
	      c[3].global == c[0].global);
	/* Files held until read: one per file, not per process. */
	ht_elf_cache_get_stats(cache, &cache_all);
	CHECK_EQ_U64(cache_all.tables, cache_first.tables + 1);
	CHECK(cache_all.held_fds <= cache_first.held_fds + 2);
out:
	for (int i = 0; i < 4; i++)
		ht_symbolizer_free(s[i]);
	for (int i = 0; i < started; i++)
		child_stop(&c[i]);
	ht_elf_cache_free(cache);
}

TEST(speed_100k_addresses_in_libc)
{
	const size_t n = 100000;
	const struct ht_mapping *libc;
	struct ht_symbolizer *s;
	struct ht_symbol sym;
	struct ht_maps maps;
	uint64_t start, elapsed, span;
	size_t named = 0;

	CHECK(ht_maps_read(getpid(), &maps) == 0);
	libc = libc_code(&maps);
	if (!libc) {
		ht_maps_free(&maps);
		SKIP_TEST("no libc.so mapped (static build?)");
	}
	s = ht_symbolizer_new(getpid());
	CHECK(s != NULL);
	if (s) {
		span = libc->end - libc->start;
		ht_symbolize(s, libc->start, &sym); /* reads libc once */
		start = now_ns();
		for (size_t i = 0; i < n; i++) {
			/* Spread over the whole text, in no order. */
			uint64_t addr = libc->start + (i * 2654435761u) % span;

			if (!ht_symbolize(s, addr, &sym) && sym.function)
				named++;
		}
		elapsed = now_ns() - start;
		printf("     %zu libc addresses in %.1f ms (%.0f ns each), %zu named\n", n,
		       elapsed / 1e6, (double)elapsed / n, named);
		CHECK(elapsed < 100 * 1000000ull);
		CHECK(named > n / 2);
	}
	ht_symbolizer_free(s);
	ht_maps_free(&maps);
}
