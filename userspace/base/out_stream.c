// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/log.h"
#include "base/out_stream.h"
#include "base/output.h"

#define STREAM_MODE 0640

static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
	struct ht_out_stream *s = cookie;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(s->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int expected = 0;

			__atomic_compare_exchange_n(&s->err, &expected, n < 0 ? errno : EIO, false,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
			return done ? (ssize_t)done : -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)len;
}

static int stream_close(void *cookie)
{
	struct ht_out_stream *s = cookie;

	return s->path ? close(s->fd) : 0;
}

static int open_file(struct ht_out_stream *s, const char *path)
{
	s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, STREAM_MODE);
	if (s->fd >= 0) {
		s->created = true;
		/* The umask must not make it more private or more public than the dumps. */
		if (fchmod(s->fd, STREAM_MODE))
			ht_warn("chmod %s: %s", path, strerror(errno));
		ht_output_give_to_sudo_user(s->fd);
		return 0;
	}
	if (errno == EEXIST)
		s->fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (s->fd >= 0)
		return 0;
	if (errno == ELOOP)
		return ht_fail("--json=%s is a symbolic link: give the file it points to, or - for "
			       "stdout", path);
	return ht_fail("cannot create --json=%s: %s", path, strerror(errno));
}

int ht_out_stream_open(struct ht_out_stream *s, const char *path)
{
	cookie_io_functions_t io = { .write = stream_write, .close = stream_close };

	memset(s, 0, sizeof(*s));
	s->fd = STDOUT_FILENO;
	if (path && strcmp(path, "-")) {
		s->path = path;
		if (open_file(s, path))
			return -1;
	}
	s->f = fopencookie(s, "w", io);
	if (!s->f) {
		ht_out_stream_close(s, true);
		return ht_fail("out of memory");
	}
	/* Whoever reads the stream sees each line as it is written. */
	setvbuf(s->f, NULL, _IOLBF, 0);
	return 0;
}

int ht_out_stream_error(const struct ht_out_stream *s)
{
	return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

const char *ht_out_stream_name(const struct ht_out_stream *s)
{
	return s->path ? s->path : "stdout";
}

void ht_out_stream_close(struct ht_out_stream *s, bool discard)
{
	if (s->f)
		fclose(s->f);
	else if (s->path && s->fd >= 0)
		close(s->fd);
	if (discard && s->created)
		unlink(s->path);
	s->f = NULL;
	s->fd = -1;
}
