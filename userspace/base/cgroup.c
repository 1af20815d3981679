// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include "base/cgroup.h"
#include "base/log.h"

/* include/uapi/linux/magic.h */
#define HT_CGROUP_SUPER_MAGIC  0x27e0eb
#define HT_CGROUP2_SUPER_MAGIC 0x63677270

/* Mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

int ht_cgroup_v2_mount_in(const char *mountinfo, char *path, size_t len)
{
	char line[4096], root[PATH_MAX], point[PATH_MAX], fstype[64];
	bool found = false, found_root = false;
	FILE *f = fopen(mountinfo, "re");

	if (!f)
		return ht_fail("cannot read %s: %s", mountinfo, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");

		/* id parent major:minor root mount-point options [optional...] - fstype ... */
		if (!sep || sscanf(line, "%*d %*d %*s %4095s %4095s", root, point) != 2 ||
		    sscanf(sep + 3, "%63s", fstype) != 1 || strcmp(fstype, "cgroup2"))
			continue;
		/* A bind mount of a sub-tree is not where cgroup paths start: prefer the whole. */
		if (found && (found_root || strcmp(root, "/")))
			continue;
		unescape_octal(point);
		if ((size_t)snprintf(path, len, "%s", point) >= len)
			continue;
		found = true;
		found_root = !strcmp(root, "/");
	}
	fclose(f);
	if (!found)
		return ht_fail("no cgroup v2 file system is mounted (none in %s): mount one with "
			       "mount -t cgroup2 none /sys/fs/cgroup/unified",
			       mountinfo);
	return 0;
}

int ht_cgroup_v2_mount(char *path, size_t len)
{
	return ht_cgroup_v2_mount_in("/proc/self/mountinfo", path, len);
}

/* Why ARG, an absolute path outside the v2 mount, cannot be a --cgroup. */
static int not_on_v2(const char *arg, const char *mount)
{
	struct statfs sfs;

	if (statfs(arg, &sfs) == 0 && sfs.f_type == HT_CGROUP_SUPER_MAGIC)
		return ht_fail("cgroup %s is a cgroup v1 directory: give a cgroup v2 directory "
			       "(cgroup v2 is mounted at %s)",
			       arg, mount);
	return ht_fail("%s is not a cgroup v2 directory (cgroup v2 is mounted at %s)", arg, mount);
}

int ht_cgroup_resolve(const char *arg, char *abs, size_t len, uint64_t *id)
{
	char mount_at[PATH_MAX], mount[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
	const char *rel = arg;
	struct statfs sfs;
	struct stat st;
	size_t mlen;
	int n;

	if (!arg || !*arg)
		return ht_fail("empty cgroup: give a cgroup v2 directory, absolute or relative to "
			       "the cgroup v2 mount");
	if (ht_cgroup_v2_mount(mount_at, sizeof(mount_at)))
		return -1;
	if (!realpath(mount_at, mount))
		return ht_fail("cannot resolve the cgroup v2 mount %s: %s", mount_at,
			       strerror(errno));
	mlen = strlen(mount);
	/* Absolute when it starts with the mount, else relative to it ("/x" too). */
	if (!strncmp(arg, mount, mlen) && (arg[mlen] == '/' || !arg[mlen])) {
		n = snprintf(joined, sizeof(joined), "%s", arg);
	} else {
		while (*rel == '/')
			rel++;
		n = snprintf(joined, sizeof(joined), "%s/%s", mount, rel);
	}
	if (n < 0 || (size_t)n >= sizeof(joined))
		return ht_fail("cgroup path '%s' is too long", arg);
	if (!realpath(joined, real)) {
		if (errno != ENOENT && errno != ENOTDIR)
			return ht_fail("cannot resolve cgroup %s: %s", joined, strerror(errno));
		if (arg[0] == '/' && stat(arg, &st) == 0)
			return not_on_v2(arg, mount);
		return ht_fail("cgroup %s does not exist (no directory %s)", arg, joined);
	}
	mlen = strlen(mount);
	if (strncmp(real, mount, mlen) || (real[mlen] && real[mlen] != '/'))
		return ht_fail("cgroup %s is %s, outside the cgroup v2 mount %s", arg, real, mount);
	if (stat(real, &st))
		return ht_fail("cannot stat %s: %s", real, strerror(errno));
	if (statfs(real, &sfs) || sfs.f_type != HT_CGROUP2_SUPER_MAGIC)
		return not_on_v2(real, mount);
	if (!S_ISDIR(st.st_mode))
		return ht_fail("%s is a file, not a cgroup directory", real);
	if (!real[mlen] || (real[mlen] == '/' && !real[mlen + 1]))
		return ht_fail("cgroup %s is the root cgroup, every task on the machine: to watch "
			       "them all, use --all",
			       arg);
	if ((size_t)snprintf(abs, len, "%s", real) >= len)
		return ht_fail("cgroup path %s is too long", real);
	*id = (uint64_t)st.st_ino;
	return 0;
}

/* FN for each pid in DIR's cgroup.procs: 0, FN's non-zero return, or -1. */
static int each_in_procs(const char *dir, int (*fn)(int tgid, void *arg), void *arg)
{
	char path[PATH_MAX];
	int tgid, rc = 0;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= sizeof(path))
		return ht_fail("cgroup path %s is too long", dir);
	f = fopen(path, "re");
	if (!f) {
		/* Removed during the walk, or a threaded cgroup (its domain lists the processes).
		 */
		if (errno == ENOENT || errno == ENODEV || errno == EOPNOTSUPP)
			return 0;
		return ht_fail("cannot read %s: %s", path, strerror(errno));
	}
	while (!rc && fscanf(f, "%d", &tgid) == 1)
		rc = fn(tgid, arg);
	fclose(f);
	return rc;
}

/* Deep enough for any hierarchy the kernel allows a path for. */
#define HT_CGROUP_MAX_DEPTH 64

static int walk(char *dir, size_t used, size_t size, int depth, int (*fn)(int tgid, void *arg),
		void *arg)
{
	struct dirent *de;
	DIR *d;
	int rc;

	if (depth > HT_CGROUP_MAX_DEPTH)
		return ht_fail("cgroup %s is nested more than %d deep", dir, HT_CGROUP_MAX_DEPTH);
	rc = each_in_procs(dir, fn, arg);
	if (rc)
		return rc;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT && depth
			       ? 0
			       : ht_fail("cannot read cgroup %s: %s", dir, strerror(errno));
	while (!rc && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (used + 1 + n >= size) {
			rc = ht_fail("cgroup path %s/%s is too long", dir, de->d_name);
			break;
		}
		dir[used] = '/';
		memcpy(dir + used + 1, de->d_name, n + 1);
		rc = walk(dir, used + 1 + n, size, depth + 1, fn, arg);
		dir[used] = '\0';
	}
	closedir(d);
	return rc;
}

int ht_cgroup_for_each_process(const char *abs, int (*fn)(int tgid, void *arg), void *arg)
{
	char dir[PATH_MAX];
	size_t used = strlen(abs);

	if (used >= sizeof(dir))
		return ht_fail("cgroup path %s is too long", abs);
	memcpy(dir, abs, used + 1);
	return walk(dir, used, sizeof(dir), 0, fn, arg);
}

/* systemd's rule (sd_booted()): it runs as the init system when this exists. */
#define HT_SYSTEMD_RUNNING_DIR "/run/systemd/system"

/* Run SYSTEMCTL show for UNIT; its stdout into OUT. Returns 0, or -1 with the reason. */
static int systemctl_show(const char *systemctl, const char *unit, char *out, size_t len)
{
	char *argv[] = { (char *)systemctl, "show", "-p", "LoadState", "-p", "ActiveState",
			 "-p", "ControlGroup", "--", (char *)unit, NULL };
	posix_spawn_file_actions_t fa;
	size_t used = 0;
	int pipefd[2], status, err;
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC))
		return ht_fail("pipe: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
	/* Its own complaints would be a second line: what it printed is judged here. */
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	err = posix_spawnp(&pid, systemctl, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (err) {
		close(pipefd[0]);
		return ht_fail("--unit %s: cannot run %s: %s", unit, systemctl, strerror(err));
	}
	while (used + 1 < len && (n = read(pipefd[0], out + used, len - 1 - used)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		used += (size_t)n;
	}
	out[used] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return ht_fail("--unit %s: waitpid: %s", unit, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return ht_fail("--unit %s: %s show failed (status %d)", unit, systemctl,
			       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}

/* The value of KEY= in systemctl show's OUT, into VALUE ("" when absent). */
static void show_value(const char *out, const char *key, char *value, size_t len)
{
	size_t klen = strlen(key);
	const char *line = out;

	value[0] = '\0';
	while (*line) {
		size_t n = strcspn(line, "\n");

		if (n > klen && !strncmp(line, key, klen) && line[klen] == '=') {
			snprintf(value, len, "%.*s", (int)(n - klen - 1), line + klen + 1);
			return;
		}
		line += n + (line[n] == '\n');
	}
}

static int count_one(int tgid, void *arg)
{
	(void)tgid;
	++*(unsigned long *)arg;
	return 0;
}

/* NAME.service unless NAME already ends in a unit type that has processes. */
static int unit_name(const char *unit, char *name, size_t len)
{
	static const char *const types[] = { ".service", ".scope", ".slice",
					     ".socket",	 ".mount", ".swap" };
	size_t n = strlen(unit);

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t t = strlen(types[i]);

		if (n > t && !strcmp(unit + n - t, types[i]))
			return (size_t)snprintf(name, len, "%s", unit) < len ? 0 : -1;
	}
	return (size_t)snprintf(name, len, "%s.service", unit) < len ? 0 : -1;
}

int ht_systemd_unit_cgroup(const char *unit, char *abs, size_t len)
{
	char name[256], out[8192], load[64], active[64], cgroup[PATH_MAX];
	const char *systemctl = getenv("HYBTRACE_TEST_SYSTEMCTL");
	unsigned long processes = 0;
	uint64_t id;

	if (!unit || !*unit)
		return ht_fail("--unit needs a systemd unit, like nginx or nginx.service");
	if (unit[0] == '-' || strchr(unit, '/') || strpbrk(unit, " \t\n") ||
	    unit_name(unit, name, sizeof(name)))
		return ht_fail("--unit: '%s' is not a systemd unit name", unit);
	if (!systemctl || !*systemctl) {
		if (access(HT_SYSTEMD_RUNNING_DIR, F_OK))
			return ht_fail(
				"--unit %s: systemd is not running here (no %s): give the "
				"unit's cgroup with --cgroup PATH or its processes with --pid",
				unit, HT_SYSTEMD_RUNNING_DIR);
		systemctl = "systemctl";
	}
	if (systemctl_show(systemctl, name, out, sizeof(out)))
		return -1;
	show_value(out, "LoadState", load, sizeof(load));
	show_value(out, "ActiveState", active, sizeof(active));
	show_value(out, "ControlGroup", cgroup, sizeof(cgroup));
	if (strcmp(load, "loaded"))
		return ht_fail("--unit %s: unit %s is not loaded (LoadState=%s): see systemctl "
			       "list-units",
			       unit, name, load[0] ? load : "none");
	if (!cgroup[0])
		return ht_fail("--unit %s: unit %s has no processes (ActiveState=%s, no cgroup)",
			       unit, name, active[0] ? active : "none");
	if (ht_cgroup_resolve(cgroup, abs, len, &id))
		return ht_fail("--unit %s: %s", unit, ht_last_error());
	if (ht_cgroup_for_each_process(abs, count_one, &processes))
		return ht_fail("--unit %s: %s", unit, ht_last_error());
	if (!processes)
		return ht_fail("--unit %s: unit %s has no processes (ActiveState=%s, cgroup %s "
			       "empty)",
			       unit, name, active[0] ? active : "none", abs);
	return 0;
}
