// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>
#include "base/log.h"
#include "symbols/target_files.h"

struct file_id {
	uint32_t major, minor;
	uint64_t inode;
};

void ht_target_init(struct ht_target *t, int pid)
{
	t->pid = pid;
	t->root_fd = -1;
	t->same_root = 0;
}

int ht_target_reopen_root(struct ht_target *t)
{
	char path[64];
	struct stat target, ours;

	ht_target_close(t);
	snprintf(path, sizeof(path), "/proc/%d/root", t->pid);
	t->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (t->root_fd < 0) {
		t->same_root = 0;
		return ht_fail("%s: %s", path, strerror(errno));
	}
	t->same_root = !fstat(t->root_fd, &target) && !stat("/", &ours) &&
		       target.st_dev == ours.st_dev && target.st_ino == ours.st_ino;
	return 0;
}

void ht_target_close(struct ht_target *t)
{
	if (t->root_fd >= 0)
		close(t->root_fd);
	t->root_fd = -1;
}

/* PATH (absolute) inside the target's root; its symlinks cannot lead out of it. */
static int open_in_root(const struct ht_target *t, const char *path, int flags)
{
	struct open_how how = {.flags = (uint64_t)flags,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	long fd;

	if (t->root_fd < 0) {
		errno = EBADF;
		return -1;
	}
	fd = syscall(SYS_openat2, t->root_fd, path, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return (int)fd;
	/* Before Linux 5.6 absolute symlinks leave the root: the inode check must catch it. */
	while (*path == '/')
		path++;
	return openat(t->root_fd, *path ? path : ".", flags);
}

/*
 * Turn an O_PATH descriptor into a readable one, if it is a regular file
 * (and the expected one). PATH_FD is closed. Returns an fd or -1 with ht_fail().
 */
static int reopen_regular(int path_fd, const char *shown, const struct file_id *expect,
			  struct stat *st)
{
	char self[64];
	int fd;

	if (fstat(path_fd, st)) {
		fd = ht_fail("%s: %s", shown, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st->st_mode)) {
		fd = ht_fail("%s: not a regular file", shown);
		goto out;
	}
	if (expect && (st->st_ino != expect->inode || major(st->st_dev) != expect->major ||
		       minor(st->st_dev) != expect->minor)) {
		fd = ht_fail("%s: not the mapped file (inode %llu on %u:%u, the mapping has %llu "
			     "on %u:%u)",
			     shown, (unsigned long long)st->st_ino, major(st->st_dev),
			     minor(st->st_dev), (unsigned long long)expect->inode, expect->major,
			     expect->minor);
		goto out;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
	fd = open(self, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		ht_fail("%s: %s", shown, strerror(errno));
out:
	close(path_fd);
	return fd;
}

int ht_path_is_deleted(const char *path)
{
	size_t n = strlen(path), k = strlen(" (deleted)");

	return n >= k && !strcmp(path + n - k, " (deleted)");
}

static void map_files_path(const struct ht_target *t, const struct ht_mapping *m, char *buf,
			   size_t len)
{
	snprintf(buf, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, t->pid, m->start, m->end);
}

int ht_target_open_mapping(const struct ht_target *t, const struct ht_mapping *m, char **source,
			   struct stat *st)
{
	struct file_id id = {m->dev_major, m->dev_minor, m->inode};
	char by_range[96], by_path[4200];
	int pfd, map_errno, fd;

	*source = NULL;
	map_files_path(t, m, by_range, sizeof(by_range));
	pfd = open(by_range, O_PATH | O_CLOEXEC);
	if (pfd >= 0) {
		fd = reopen_regular(pfd, by_range, NULL, st);
		*source = fd >= 0 ? strdup(by_range) : NULL;
		return fd;
	}
	/* Without CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: by path, if it is still that file. */
	map_errno = errno;
	if (ht_path_is_deleted(m->path) || m->path[0] != '/')
		return ht_fail("%s: %s, and %s has no path to open", by_range, strerror(map_errno),
			       m->path);
	snprintf(by_path, sizeof(by_path), "/proc/%d/root%s", t->pid, m->path);
	pfd = open_in_root(t, m->path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return ht_fail("%s: %s (and %s: %s)", by_path, strerror(errno), by_range,
			       strerror(map_errno));
	fd = reopen_regular(pfd, by_path, &id, st);
	*source = fd >= 0 ? strdup(by_path) : NULL;
	return fd;
}

int ht_target_stat_mapping(const struct ht_target *t, const struct ht_mapping *m, struct stat *st)
{
	char by_range[96];
	int pfd, err;

	map_files_path(t, m, by_range, sizeof(by_range));
	if (!stat(by_range, st))
		return 0;
	if (ht_path_is_deleted(m->path) || m->path[0] != '/')
		return -1;
	pfd = open_in_root(t, m->path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	err = fstat(pfd, st);
	close(pfd);
	return err || st->st_ino != m->inode ? -1 : 0;
}

int ht_target_open_file(const struct ht_target *t, const char *path, int in_root, char *shown,
			size_t shown_len)
{
	struct stat st;
	int pfd;

	if (in_root) {
		snprintf(shown, shown_len, "/proc/%d/root%s", t->pid, path);
		pfd = open_in_root(t, path, O_PATH | O_CLOEXEC);
	} else {
		snprintf(shown, shown_len, "%s", path);
		pfd = open(path, O_PATH | O_CLOEXEC);
	}
	if (pfd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return -2;
	if (pfd < 0)
		return ht_fail("%s: %s", shown, strerror(errno));
	return reopen_regular(pfd, shown, NULL, &st);
}

int ht_target_open_build_id_debug(const struct ht_target *t, const char *build_id,
				  enum ht_debug_place place, char *shown, size_t shown_len)
{
	size_t len = strlen(build_id);
	char path[256];

	snprintf(shown, shown_len, "%s", "");
	/* Two digits name the directory; the note's bytes, never a path, name the file. */
	if (len < 3 || len > 128 || strspn(build_id, "0123456789abcdef") != len)
		return -2;
	/* The same root: the host's copy is the one just tried. */
	if (place == HT_DEBUG_ON_HOST && t->same_root)
		return -2;
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", build_id,
		 build_id + 2);
	return ht_target_open_file(t, path, place == HT_DEBUG_IN_ROOT, shown, shown_len);
}

int ht_target_stat_file(const struct ht_target *t, const char *path, struct stat *st)
{
	int pfd = open_in_root(t, path, O_PATH | O_CLOEXEC);
	int err;

	if (pfd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return -2;
	if (pfd < 0)
		return ht_fail("/proc/%d/root%s: %s", t->pid, path, strerror(errno));
	err = fstat(pfd, st);
	close(pfd);
	return err ? ht_fail("/proc/%d/root%s: %s", t->pid, path, strerror(errno)) : 0;
}

int ht_target_open_dir(const struct ht_target *t, const char *path)
{
	/* O_DIRECTORY: a FIFO or a device in the way is refused before it is opened. */
	int fd = open_in_root(t, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return -2;
	if (fd < 0)
		return ht_fail("/proc/%d/root%s: %s", t->pid, path, strerror(errno));
	return fd;
}

int ht_target_read_memory(const struct ht_target *t, uint64_t addr, void *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ht_fail("%s: %s", path, strerror(errno));
	n = pread(fd, buf, len, (off_t)addr);
	close(fd);
	if (n < 0)
		return ht_fail("%s at 0x%" PRIx64 ": %s", path, addr, strerror(errno));
	if ((size_t)n != len)
		return ht_fail("%s at 0x%" PRIx64 ": %zd of %zu bytes", path, addr, n, len);
	return 0;
}

struct target_ids {
	int nspid;	 /* the pid as the target sees it */
	uint32_t uid[2]; /* real, effective */
};

static int read_target_ids(int pid, struct target_ids *ids)
{
	char path[64], line[512];
	int have_uid = 0;
	FILE *f;

	ids->nspid = pid;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return ht_fail("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4)) {
			have_uid = sscanf(line + 4, "%u %u", &ids->uid[0], &ids->uid[1]) == 2;
		} else if (!strncmp(line, "NSpid:", 6)) {
			/* The last field is the pid in the innermost namespace. */
			char *last = strrchr(line, '\t');

			if (last)
				ids->nspid = atoi(last + 1);
		}
	}
	fclose(f);
	return have_uid ? 0 : ht_fail("%s: no Uid line", path);
}

int ht_target_open_perf_map(const struct ht_target *t, char *shown, size_t shown_len,
			    struct stat *st)
{
	struct target_ids ids;
	char path[64];
	int fd;

	if (read_target_ids(t->pid, &ids))
		return -1;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", ids.nspid);
	snprintf(shown, shown_len, "/proc/%d/root%s", t->pid, path);
	/* O_NONBLOCK: a FIFO put there must not hang us before fstat says what it is. */
	fd = open_in_root(t, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return -2;
	if (fd < 0 && errno == ELOOP)
		return ht_fail("perf map %s is a symbolic link: ignored", shown);
	if (fd < 0)
		return ht_fail("perf map %s: %s: ignored", shown, strerror(errno));
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		close(fd);
		return ht_fail("perf map %s is not a regular file: ignored", shown);
	}
	if (st->st_uid != ids.uid[0] && st->st_uid != ids.uid[1]) {
		close(fd);
		return ht_fail(
			"perf map %s is owned by uid %u, not by the target's uid %u: ignored",
			shown, st->st_uid, ids.uid[0]);
	}
	return fd;
}

int ht_file_crc32(int fd, uint32_t *out)
{
	size_t cap = 256 * 1024;
	unsigned char *buf = malloc(cap);
	uLong crc = crc32(0L, Z_NULL, 0);
	off_t off = 0;

	if (!buf)
		return ht_fail("out of memory");
	for (;;) {
		ssize_t n = pread(fd, buf, cap, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return ht_fail("reading for the CRC: %s", strerror(errno));
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	free(buf);
	*out = (uint32_t)crc;
	return 0;
}

/* hybtrace's own vdso: its mapping at AT_SYSINFO_EHDR. */
static const void *own_vdso(size_t *len)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	const struct ht_mapping *m;
	struct ht_maps maps;

	*len = 0;
	if (!base || ht_maps_read(getpid(), &maps))
		return NULL;
	m = ht_maps_find(&maps, base);
	*len = m && m->start == base ? m->end - m->start : 0;
	ht_maps_free(&maps);
	return *len ? (const void *)(uintptr_t)base : NULL;
}

void *ht_target_copy_vdso(const struct ht_target *t, uint64_t start, size_t len, bool *ours)
{
	size_t own_len = 0;
	char why[256];
	const void *own;
	void *buf;

	*ours = false;
	if (len > HT_VDSO_MAX_BYTES) {
		ht_fail("[vdso] of process %d: %zu bytes, too large for a vdso", t->pid, len);
		errno = ENOENT;
		return NULL;
	}
	buf = malloc(len);
	if (!buf) {
		ht_fail("out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (!ht_target_read_memory(t, start, buf, len))
		return buf;
	/* Without ptrace access to the target (no root, Yama): our copy of the same image. */
	snprintf(why, sizeof(why), "%s", ht_last_error());
	own = own_vdso(&own_len);
	if (!own || own_len != len) {
		free(buf);
		ht_fail("[vdso] of process %d: %s, and hybtrace's own vdso differs", t->pid, why);
		errno = ENOENT;
		return NULL;
	}
	memcpy(buf, own, len);
	*ours = true;
	return buf;
}
