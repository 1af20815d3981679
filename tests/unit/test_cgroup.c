// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * base/cgroup.c: the cgroup v2 mount, --cgroup paths and ids against a
 * cgroup made here (and the kernel's own id for it, name_to_handle_at()),
 * the processes of a subtree, and --unit through a stand-in systemctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "base/cgroup.h"
#include "base/log.h"

/* MOUNTINFO's text in a file; its v2 mount into OUT. Returns what ht_cgroup_v2_mount_in() does. */
static int mount_in(const char *mountinfo, char *out, size_t len)
{
	char path[] = "/tmp/hybtrace-test-mountinfo-XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0 || write(fd, mountinfo, strlen(mountinfo)) != (ssize_t)strlen(mountinfo)) {
		printf("     cannot write %s\n", path);
		return -2;
	}
	close(fd);
	rc = ht_cgroup_v2_mount_in(path, out, len);
	unlink(path);
	return rc;
}

TEST(v2_mount_from_mountinfo)
{
	/* systemd's hybrid mode, as on Debian 12 guests booted with it. */
	static const char hybrid[] =
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
		"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
	/* The unified layout, with an optional field before the separator. */
	static const char unified[] = "22 1 0:20 / / rw - ext4 /dev/vda1 rw\n"
				      "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 "
				      "cgroup2 rw,nsdelegate\n";
	/* A bind mount of a sub-tree first: the whole hierarchy is where paths start. */
	static const char bind_first[] =
		"50 1 0:30 /system.slice /mnt/sub rw - cgroup2 cgroup2 rw\n"
		"51 1 0:30 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n";
	static const char v1_only[] = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
	char path[PATH_MAX];

	CHECK(mount_in(hybrid, path, sizeof(path)) == 0);
	CHECK_STR(path, "/sys/fs/cgroup/unified");
	CHECK(mount_in(unified, path, sizeof(path)) == 0);
	CHECK_STR(path, "/sys/fs/cgroup");
	CHECK(mount_in(bind_first, path, sizeof(path)) == 0);
	CHECK_STR(path, "/mnt/my cgroups");
	CHECK(mount_in(v1_only, path, sizeof(path)) == -1);
	CHECK(strstr(ht_last_error(), "no cgroup v2 file system is mounted") != NULL);
	CHECK(ht_cgroup_v2_mount_in("/nonexistent/mountinfo", path, sizeof(path)) == -1);
}

TEST(v2_mount_as_findmnt_sees_it)
{
	char path[PATH_MAX], line[PATH_MAX] = "";
	FILE *p = popen("findmnt -n -t cgroup2 -o TARGET 2>/dev/null | head -n 1", "r");

	if (!p || !fgets(line, sizeof(line), p) || !line[0]) {
		if (p)
			pclose(p);
		SKIP_TEST("no cgroup2 mount, or no findmnt");
	}
	pclose(p);
	line[strcspn(line, "\n")] = '\0';
	CHECK(ht_cgroup_v2_mount(path, sizeof(path)) == 0);
	CHECK_STR(path, line);
}

/* A cgroup made for the test under the v2 mount, with a child "sub" and an "empty" one. */
struct test_cgroup {
	char mount[256], name[64], dir[512], sub[600], empty[600];
	pid_t in_dir, in_sub;
};

static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static int move_to(const char *dir, pid_t pid)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return sh("echo %d > %s", (int)pid, path);
}

static int make_cgroups(struct test_cgroup *c)
{
	memset(c, 0, sizeof(*c));
	if (ht_cgroup_v2_mount(c->mount, sizeof(c->mount)))
		return -1;
	snprintf(c->name, sizeof(c->name), "hybtrace-test-cgroup-%d", (int)getpid());
	snprintf(c->dir, sizeof(c->dir), "%s/%s", c->mount, c->name);
	snprintf(c->sub, sizeof(c->sub), "%s/sub", c->dir);
	snprintf(c->empty, sizeof(c->empty), "%s/empty", c->dir);
	if (mkdir(c->dir, 0755) || mkdir(c->sub, 0755) || mkdir(c->empty, 0755))
		return -1;
	c->in_dir = sleeper();
	c->in_sub = sleeper();
	if (c->in_dir <= 0 || c->in_sub <= 0)
		return -1;
	return move_to(c->dir, c->in_dir) || move_to(c->sub, c->in_sub) ? -1 : 0;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* A cgroup whose last process was just reaped may be busy for a moment. */
static void remove_dir(const char *dir)
{
	for (int i = 0; dir[0] && i < 1000; i++) {
		if (!rmdir(dir) || errno == ENOENT)
			return;
		usleep(1000);
	}
	printf("     cannot remove %s: %s\n", dir, strerror(errno));
}

static void remove_cgroups(struct test_cgroup *c)
{
	reap(c->in_dir);
	reap(c->in_sub);
	remove_dir(c->sub);
	remove_dir(c->empty);
	remove_dir(c->dir);
}

/* The cgroup id the kernel exports for PATH: kernfs's file handle is the node's 64-bit id. */
static uint64_t kernel_cgroup_id(const char *path)
{
	union {
		struct file_handle fh;
		char room[sizeof(struct file_handle) + 8];
	} h;
	uint64_t id = 0;
	int mount_id;

	h.fh.handle_bytes = 8;
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) || h.fh.handle_bytes != 8)
		return 0;
	memcpy(&id, h.fh.f_handle, sizeof(id));
	return id;
}

static void check_paths(const struct test_cgroup *c)
{
	char abs[PATH_MAX], rel[PATH_MAX + 8], file[PATH_MAX + 16];
	uint64_t id = 0, sub_id = 0;
	struct stat st;

	/* Absolute, relative, and "/NAME" relative to the mount: one directory, one id. */
	CHECK(ht_cgroup_resolve(c->dir, abs, sizeof(abs), &id) == 0);
	CHECK_STR(abs, c->dir);
	CHECK(stat(c->dir, &st) == 0 && id == (uint64_t)st.st_ino);
	CHECK(id != 0 && id == kernel_cgroup_id(c->dir));
	CHECK(ht_cgroup_resolve(c->name, abs, sizeof(abs), &id) == 0);
	CHECK_STR(abs, c->dir);
	snprintf(rel, sizeof(rel), "/%s", c->name);
	CHECK(ht_cgroup_resolve(rel, abs, sizeof(abs), &id) == 0);
	CHECK_STR(abs, c->dir);
	snprintf(rel, sizeof(rel), "%s/sub/", c->name);
	CHECK(ht_cgroup_resolve(rel, abs, sizeof(abs), &sub_id) == 0);
	CHECK_STR(abs, c->sub);
	CHECK(sub_id != id && sub_id == kernel_cgroup_id(c->sub));

	/* Refused, with what to do. */
	CHECK(ht_cgroup_resolve("hybtrace-no-such-cgroup", abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "does not exist") != NULL);
	CHECK(ht_cgroup_resolve("/", abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "root cgroup") && strstr(ht_last_error(), "--all"));
	CHECK(ht_cgroup_resolve(c->mount, abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "--all") != NULL);
	snprintf(rel, sizeof(rel), "%s/..", c->name);
	CHECK(ht_cgroup_resolve(rel, abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "root cgroup") != NULL);
	CHECK(ht_cgroup_resolve("..", abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "outside the cgroup v2 mount") != NULL);
	CHECK(ht_cgroup_resolve("/tmp", abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "not a cgroup v2 directory") != NULL);
	snprintf(file, sizeof(file), "%s/cgroup.procs", c->name);
	CHECK(ht_cgroup_resolve(file, abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "not a cgroup directory") != NULL);
	CHECK(ht_cgroup_resolve("", abs, sizeof(abs), &id) == -1);
}

/* A cgroup v1 hierarchy, where the machine has one (hybrid mode): refused as such. */
static void check_v1(void)
{
	char line[4096], point[PATH_MAX] = "", abs[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	uint64_t id;

	while (f && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - cgroup ");

		if (sep && sscanf(line, "%*d %*d %*s %*s %4095s", point) == 1)
			break;
		point[0] = '\0';
	}
	if (f)
		fclose(f);
	if (!point[0])
		return;
	CHECK(ht_cgroup_resolve(point, abs, sizeof(abs), &id) == -1);
	CHECK(strstr(ht_last_error(), "cgroup v1") != NULL);
}

struct seen {
	int pids[16];
	int n;
	int stop_after;
};

static int note(int tgid, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		s->pids[s->n] = tgid;
	s->n++;
	return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

static int seen_has(const struct seen *s, int pid)
{
	for (int i = 0; i < s->n && i < 16; i++)
		if (s->pids[i] == pid)
			return 1;
	return 0;
}

static void check_processes(const struct test_cgroup *c)
{
	struct seen all = { 0 }, sub = { 0 }, empty = { 0 }, stop = { .stop_after = 1 };

	/* The cgroup's own process and its descendant's, nothing else. */
	CHECK(ht_cgroup_for_each_process(c->dir, note, &all) == 0);
	CHECK(all.n == 2 && seen_has(&all, c->in_dir) && seen_has(&all, c->in_sub));
	CHECK(!seen_has(&all, getpid()));
	CHECK(ht_cgroup_for_each_process(c->sub, note, &sub) == 0);
	CHECK(sub.n == 1 && seen_has(&sub, c->in_sub));
	CHECK(ht_cgroup_for_each_process(c->empty, note, &empty) == 0);
	CHECK(empty.n == 0);
	/* The callback's non-zero return stops the walk and is returned. */
	CHECK(ht_cgroup_for_each_process(c->dir, note, &stop) == 7);
	CHECK(stop.n == 1);
	CHECK(ht_cgroup_for_each_process("/nonexistent-cgroup", note, &empty) == -1);
}

/* A stand-in systemctl that records its arguments and prints SHOW. */
static int fake_systemctl(const char *dir, const char *show, int status)
{
	return sh("printf '#!/bin/sh\\necho \"$@\" > %s/args\\nprintf \"%s\"\\nexit %d\\n' "
		  "> %s/systemctl && chmod +x %s/systemctl",
		  dir, show, status, dir, dir);
}

static int read_args(const char *dir, char *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/args", dir);
	f = fopen(path, "re");
	buf[0] = '\0';
	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void check_units(const struct test_cgroup *c)
{
	char dir[] = "/tmp/hybtrace-test-systemctl-XXXXXX", tool[PATH_MAX], show[512];
	char abs[PATH_MAX], args[512];

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	snprintf(tool, sizeof(tool), "%s/systemctl", dir);
	setenv("HYBTRACE_TEST_SYSTEMCTL", tool, 1);

	/* A loaded unit with processes: its cgroup, found from systemctl's relative path. */
	snprintf(show, sizeof(show),
		 "LoadState=loaded\\\\nActiveState=active\\\\nControlGroup=/%s\\\\n", c->name);
	CHECK(fake_systemctl(dir, show, 0) == 0);
	CHECK(ht_systemd_unit_cgroup("nginx", abs, sizeof(abs)) == 0);
	CHECK_STR(abs, c->dir);
	CHECK(read_args(dir, args, sizeof(args)) == 0);
	CHECK_STR(args, "show -p LoadState -p ActiveState -p ControlGroup -- nginx.service");
	CHECK(ht_systemd_unit_cgroup("docker-1234.scope", abs, sizeof(abs)) == 0);
	CHECK(read_args(dir, args, sizeof(args)) == 0);
	CHECK(strstr(args, "-- docker-1234.scope") != NULL);

	/* Not loaded; loaded but stopped; a cgroup with no process left. */
	CHECK(fake_systemctl(dir, "LoadState=not-found\\\\nActiveState=inactive\\\\nControlGroup=\\\\n",
			     0) == 0);
	CHECK(ht_systemd_unit_cgroup("nosuch", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "nosuch.service is not loaded (LoadState=not-found)") != NULL);
	CHECK(fake_systemctl(dir, "LoadState=loaded\\\\nActiveState=inactive\\\\nControlGroup=\\\\n",
			     0) == 0);
	CHECK(ht_systemd_unit_cgroup("stopped", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "stopped.service has no processes (ActiveState=inactive") !=
	      NULL);
	snprintf(show, sizeof(show),
		 "LoadState=loaded\\\\nActiveState=active\\\\nControlGroup=/%s/empty\\\\n", c->name);
	CHECK(fake_systemctl(dir, show, 0) == 0);
	CHECK(ht_systemd_unit_cgroup("idle", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "idle.service has no processes") != NULL);
	/* systemctl itself failing, or missing. */
	CHECK(fake_systemctl(dir, "", 1) == 0);
	CHECK(ht_systemd_unit_cgroup("x", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "show failed") != NULL);
	setenv("HYBTRACE_TEST_SYSTEMCTL", "/nonexistent/systemctl", 1);
	CHECK(ht_systemd_unit_cgroup("x", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "cannot run") != NULL);
	/* Not unit names. */
	CHECK(ht_systemd_unit_cgroup("-H", abs, sizeof(abs)) == -1);
	CHECK(ht_systemd_unit_cgroup("a/b", abs, sizeof(abs)) == -1);
	CHECK(ht_systemd_unit_cgroup("", abs, sizeof(abs)) == -1);
	unsetenv("HYBTRACE_TEST_SYSTEMCTL");
	sh("rm -rf %s", dir);
}

TEST(cgroup_paths_processes_and_units)
{
	struct test_cgroup c;

	REQUIRE_ROOT();
	if (make_cgroups(&c)) {
		CHECK(!"cannot make a cgroup under the v2 mount");
		printf("     %s\n", ht_last_error());
	} else {
		check_paths(&c);
		check_v1();
		check_processes(&c);
		check_units(&c);
	}
	remove_cgroups(&c);
	CHECK(access(c.dir, F_OK) == -1);
}

TEST(unit_without_systemd)
{
	char abs[PATH_MAX];

	/* systemd's own rule (sd_booted): it runs when /run/systemd/system exists. */
	if (access("/run/systemd/system", F_OK) == 0)
		SKIP_TEST("systemd runs here");
	unsetenv("HYBTRACE_TEST_SYSTEMCTL");
	CHECK(ht_systemd_unit_cgroup("nginx", abs, sizeof(abs)) == -1);
	CHECK(strstr(ht_last_error(), "systemd is not running here (no /run/systemd/system)") !=
	      NULL);
	CHECK(strstr(ht_last_error(), "--cgroup") != NULL);
}
