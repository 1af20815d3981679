// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Trigger specs: parsed (every form, and malformed ones), then resolved
 * against a real process: the test builds a small program and shared
 * libraries in a temp directory (trigger_programs.c), runs the program and
 * resolves specs against it, by function, file:line and library, by every
 * name a user may copy for a library, inside the target's root, and again
 * only when its code changed. Spec errors are checked against the same
 * program.
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

#include "trigger_programs.h"

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
	snprintf(spec, sizeof(spec), "%s/trigprog:trig_work", trig_dir);
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
			 trig_dir);
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
	snprintf(spec, sizeof(spec), "%s/prog.c:19", trig_dir);
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
			CHECK(!t.v[i].resolved &&
			      contains(t.v[i].pending, "no module libnothere.so"));
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
	if (child_start(c, 0) || child_do(c, "dlopen %s/libtrigs-7.0.so", trig_dir) ||
	    child_do(c, "dlopen %s/libtrigv.so.1", trig_dir))
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
	snprintf(path, sizeof(path), "%s/libtrigv.so.1.0.3", trig_dir);
	expect_name(&mn, v, path, 1);
	expect_name(&mn, v, "libtrigv.so.1.0.3", 1);
	/* From ldd: the soname, and the path through its symlink. */
	expect_name(&mn, v, "libtrigv.so.1", 1);
	snprintf(path, sizeof(path), "%s/libtrigv.so.1", trig_dir);
	expect_name(&mn, v, path, 1);
	snprintf(path, sizeof(path), "%s/../%s/libtrigv.so", trig_dir, strrchr(trig_dir, '/') + 1);
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

		snprintf(cmd, sizeof(cmd), "ldd '%s/trigprog'", trig_dir);
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
			 trig_dir);
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

		CHECK(!child_do(&c, "dlopen %s/plain/libtrigs.so.7", trig_dir));
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
	snprintf(root, sizeof(root), "%s/root", trig_dir);
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
	       root, root, root, root, trig_dir, root, root, root, root, root, root, trig_dir, root,
	       trig_dir, root, trig_dir, root)) {
		CHECK(!"cannot build the root");
		return;
	}
	/* Followed on the host, the escaping links do lead to the library. */
	snprintf(path, sizeof(path), "%s/usr/lib/libescape.so", root);
	CHECK(!stat(path, &escape));
	snprintf(path, sizeof(path), "%s/libtrigv.so.1.0.3", trig_dir);
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
	snprintf(path, sizeof(path), "%s/libtrigv.so.1", trig_dir);
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
	CHECK(!child_do(&c, "dlopen %s/libtriglate.so", trig_dir));
	CHECK_EQ_U64(ht_triggers_resolve(&t, s, c.pid, HT_TRIGGERS_WAIT), 1);
	CHECK(t.v[1].resolved && t.v[1].changed && t.v[1].addr == c.late);
	CHECK(!t.v[0].changed);
	CHECK_EQ_U64(t.generation, 2);
	CHECK(contains(ht_trigger_describe(&t.v[1], buf, sizeof(buf)), "libtriglate.so"));
	ht_symbolizer_free(s);
	child_stop(&c);
}
