// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The live output stream: --json=FILE created safely, write errors kept. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "base/out_stream.h"

static char dir[] = "/tmp/hybtrace-test-stream-XXXXXX";

static void path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static size_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (size_t)st.st_size;
}

TEST(a_new_file_is_created_0640_and_written_line_by_line)
{
	char path[256];
	struct ht_out_stream s;
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	path_in_dir(path, sizeof(path), "new.json");
	/* Whatever the umask, the mode is the dumps' own. */
	umask(077);
	CHECK(!ht_out_stream_open(&s, path));
	CHECK(s.created);
	CHECK_STR(ht_out_stream_name(&s), path);
	CHECK(!stat(path, &st) && (st.st_mode & 0777) == 0640);
	fputs("{\"a\":1}\n", s.f);
	/* Line-buffered: a reader sees the line before anything else is written. */
	CHECK(file_size(path) == 8);
	CHECK(ht_out_stream_error(&s) == 0);
	ht_out_stream_close(&s, false);
	CHECK(file_size(path) == 8);
}

TEST(an_existing_file_is_truncated_and_kept_on_discard)
{
	char path[256];
	struct ht_out_stream s;

	path_in_dir(path, sizeof(path), "old.json");
	CHECK(!sh("printf 'old contents\\n' > %s", path));
	CHECK(!ht_out_stream_open(&s, path));
	CHECK(!s.created);
	CHECK(file_size(path) == 0);
	ht_out_stream_close(&s, true);
	/* Not ours to remove: it was there before. */
	CHECK(access(path, F_OK) == 0);
}

TEST(a_created_file_is_removed_on_discard)
{
	char path[256];
	struct ht_out_stream s;

	path_in_dir(path, sizeof(path), "discarded.json");
	CHECK(!ht_out_stream_open(&s, path));
	ht_out_stream_close(&s, true);
	CHECK(access(path, F_OK) == -1 && errno == ENOENT);
}

TEST(symlinks_and_missing_directories_are_refused)
{
	char path[256], target[256];
	struct ht_out_stream s;

	path_in_dir(target, sizeof(target), "victim");
	path_in_dir(path, sizeof(path), "link.json");
	CHECK(!sh("printf 'keep me\\n' > %s && ln -s %s %s", target, target, path));
	CHECK(ht_out_stream_open(&s, path) == -1);
	CHECK(strstr(ht_last_error(), "symbolic link") != NULL);
	CHECK(file_size(target) == 8);
	path_in_dir(path, sizeof(path), "no/such/dir.json");
	CHECK(ht_out_stream_open(&s, path) == -1);
	CHECK(strstr(ht_last_error(), "No such file") != NULL);
}

TEST(stdout_is_the_default)
{
	struct ht_out_stream s;

	CHECK(!ht_out_stream_open(&s, NULL));
	CHECK_STR(ht_out_stream_name(&s), "stdout");
	CHECK(s.fd == STDOUT_FILENO);
	ht_out_stream_close(&s, true);
	/* stdout stays open for whoever comes next. */
	CHECK(fcntl(STDOUT_FILENO, F_GETFD) >= 0);
	CHECK(!ht_out_stream_open(&s, "-"));
	CHECK_STR(ht_out_stream_name(&s), "stdout");
	ht_out_stream_close(&s, false);
}

TEST(a_reader_that_goes_away_is_epipe_kept_for_the_loop)
{
	char path[256];
	struct ht_out_stream s;
	int reader;

	signal(SIGPIPE, SIG_IGN);
	path_in_dir(path, sizeof(path), "fifo");
	CHECK(!mkfifo(path, 0600));
	/* A reader first, so that opening the FIFO for writing does not wait. */
	reader = open(path, O_RDONLY | O_NONBLOCK);
	CHECK(reader >= 0);
	CHECK(!ht_out_stream_open(&s, path));
	fputs("first\n", s.f);
	CHECK(ht_out_stream_error(&s) == 0);
	close(reader);
	fputs("second\n", s.f);
	CHECK(ht_out_stream_error(&s) == EPIPE);
	/* stdio forgets the error after the failed write; the stream does not. */
	fflush(s.f);
	fputs("third\n", s.f);
	CHECK(ht_out_stream_error(&s) == EPIPE);
	ht_out_stream_close(&s, false);
	CHECK(!sh("rm -rf %s", dir));
}
