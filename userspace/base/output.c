// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "base/log.h"
#include "base/output.h"

#define DUMP_MODE 0640
#define MAX_SUFFIX 10000

int ht_output_dir_check(const char *dir)
{
	struct stat st;

	if (stat(dir, &st))
		return ht_fail("output directory %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ht_fail("output directory %s is not a directory", dir);
	if (access(dir, W_OK | X_OK))
		return ht_fail("output directory %s is not writable: %s", dir, strerror(errno));
	return 0;
}

const char *ht_dump_base_name(int pid, uint64_t realtime_ns, const char *kind, char *buf,
			      size_t len)
{
	time_t secs = (time_t)(realtime_ns / 1000000000ULL);
	unsigned int ms = (unsigned int)(realtime_ns / 1000000ULL % 1000);
	struct tm tm;
	char stamp[32];

	localtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(buf, len, "hybtrace-%d-%s.%03u-%s", pid, stamp, ms, kind);
	return buf;
}

void ht_output_give_to_sudo_user(int fd)
{
	const char *uid = getenv("SUDO_UID"), *gid = getenv("SUDO_GID");
	char *end;
	long u, g;

	if (!uid || !gid || geteuid() != 0)
		return;
	u = strtol(uid, &end, 10);
	if (*end || u < 0)
		return;
	g = strtol(gid, &end, 10);
	if (*end || g < 0)
		return;
	if (fchown(fd, (uid_t)u, (gid_t)g))
		ht_warn("cannot give the file to uid %ld: %s", u, strerror(errno));
}

int ht_output_begin(const char *dir, struct ht_output_file *f)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		uint32_t r;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)getpid() ^ (uint32_t)attempt * 2654435761u;
		snprintf(f->tmp_path, sizeof(f->tmp_path), "%s/.hybtrace-%08x.tmp", dir, r);
		f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     DUMP_MODE);
		if (f->fd >= 0) {
			/* The umask must not make it more private or more public than 0640. */
			if (fchmod(f->fd, DUMP_MODE))
				ht_warn("chmod %s: %s", f->tmp_path, strerror(errno));
			ht_output_give_to_sudo_user(f->fd);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	f->fd = -1;
	return ht_fail("cannot create a file in %s: %s", dir, strerror(errno));
}

void ht_output_abort(struct ht_output_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	unlink(f->tmp_path);
}

int ht_output_remove(const char *path, uint64_t dev, uint64_t ino)
{
	struct stat st;

	if (lstat(path, &st))
		return errno == ENOENT ? 0 : ht_fail("cannot remove %s: %s", path, strerror(errno));
	if ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)
		return ht_fail("%s is no longer the dump hybtrace wrote: left in place", path);
	if (unlink(path) && errno != ENOENT)
		return ht_fail("cannot remove %s: %s", path, strerror(errno));
	return 0;
}

int ht_output_rename_noreplace(const char *from, const char *to)
{
	if (!renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(from, to))
		return -1;
	unlink(from);
	return 0;
}

int ht_output_sync(struct ht_output_file *f, const char *dir, const char *what)
{
	if (fsync(f->fd)) {
		int err = errno;

		ht_output_abort(f);
		return ht_fail("cannot write the %s in %s: %s", what, dir, strerror(err));
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

int ht_output_commit(struct ht_output_file *f, const char *dir, const char *base, char *final,
		     size_t len)
{
	if (ht_output_sync(f, dir, "dump"))
		return -1;
	return ht_output_name(f->tmp_path, dir, base, HT_DUMP_SUFFIX, "dump", final, len);
}

int ht_output_name(const char *tmp_path, const char *dir, const char *base, const char *suffix,
		   const char *what, char *final, size_t len)
{
	for (int n = 0; n < MAX_SUFFIX; n++) {
		if (n == 0)
			snprintf(final, len, "%s/%s%s", dir, base, suffix);
		else
			snprintf(final, len, "%s/%s-%d%s", dir, base, n, suffix);
		if (!ht_output_rename_noreplace(tmp_path, final))
			return 0;
		if (errno != EEXIST) {
			int err = errno;

			unlink(tmp_path);
			return ht_fail("cannot name the %s %s: %s", what, final, strerror(err));
		}
	}
	unlink(tmp_path);
	return ht_fail("cannot name the %s: %s/%s-N%s all exist", what, dir, base, suffix);
}
