// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Dump files. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "base/log.h"
#include "base/output.h"

static char dir[] = "/tmp/hybtrace-test-output-XXXXXX";

static int count_files(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;
	int n = 0;

	while (dp && (de = readdir(dp)))
		n += de->d_name[0] != '.' || strncmp(de->d_name, ".hybtrace-", 10) == 0;
	if (dp)
		closedir(dp);
	return n;
}

static void write_dump(const char *base, char *final, size_t len)
{
	struct ht_output_file f;

	CHECK(!ht_output_begin(dir, &f));
	CHECK(write(f.fd, "data", 4) == 4);
	CHECK(!ht_output_commit(&f, dir, base, final, len));
}

TEST(names_never_overwrite)
{
	char a[PATH_MAX + 64], b[PATH_MAX + 64], c[PATH_MAX + 64];
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	write_dump("hybtrace-1-x-rq-delay", a, sizeof(a));
	write_dump("hybtrace-1-x-rq-delay", b, sizeof(b));
	write_dump("hybtrace-1-x-rq-delay", c, sizeof(c));
	CHECK(strstr(a, "hybtrace-1-x-rq-delay.perfetto-trace") != NULL);
	CHECK(strstr(b, "hybtrace-1-x-rq-delay-1.perfetto-trace") != NULL);
	CHECK(strstr(c, "hybtrace-1-x-rq-delay-2.perfetto-trace") != NULL);
	CHECK(!stat(a, &st) && (st.st_mode & 0777) == 0640);
	CHECK(count_files(dir) == 3);
}

TEST(abort_leaves_nothing)
{
	struct ht_output_file f;

	CHECK(!ht_output_begin(dir, &f));
	CHECK(write(f.fd, "partial", 7) == 7);
	ht_output_abort(&f);
	CHECK(access(f.tmp_path, F_OK) != 0);
	CHECK(count_files(dir) == 3);
}

TEST(output_dir_checks)
{
	char file[PATH_MAX];

	snprintf(file, sizeof(file), "%s/plain", dir);
	CHECK(!ht_output_dir_check(dir));
	CHECK(ht_output_dir_check("/nonexistent/dir") == -1);
	fclose(fopen(file, "w"));
	CHECK(ht_output_dir_check(file) == -1);
	CHECK(strstr(ht_last_error(), "not a directory") != NULL);
	unlink(file);
}

TEST(base_name_format)
{
	char buf[128];

	/* 2026-01-02 03:04:05.678 UTC, in the local zone: check the shape. */
	ht_dump_base_name(42, 1767323045678000000ULL, "off-cpu", buf, sizeof(buf));
	CHECK(!strncmp(buf, "hybtrace-42-2026010", 19));
	CHECK(strlen(buf) == strlen("hybtrace-42-20260102-030405.678-off-cpu"));
	CHECK(!strcmp(buf + strlen(buf) - strlen(".678-off-cpu"), ".678-off-cpu"));
}

TEST(remove_only_the_file_written)
{
	char a[PATH_MAX + 64], other[PATH_MAX + 64];
	struct stat st;

	write_dump("hybtrace-2-x-syscall", a, sizeof(a));
	CHECK(!stat(a, &st));
	/* Someone put another file in its place: it stays. */
	snprintf(other, sizeof(other), "%s/other", dir);
	fclose(fopen(other, "w"));
	CHECK(!rename(other, a));
	CHECK(ht_output_remove(a, (uint64_t)st.st_dev, (uint64_t)st.st_ino) == -1);
	CHECK(strstr(ht_last_error(), "no longer the dump") != NULL);
	CHECK(!access(a, F_OK));
	CHECK(!stat(a, &st));
	CHECK(!ht_output_remove(a, (uint64_t)st.st_dev, (uint64_t)st.st_ino));
	CHECK(access(a, F_OK) != 0);
	/* Gone already: removed as far as the budget goes. */
	CHECK(!ht_output_remove(a, (uint64_t)st.st_dev, (uint64_t)st.st_ino));
}

TEST(cleanup)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}
