// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Symbol tables of N processes that map the same files, as a dump of N
 * workers of one server needs them: each process's own symbolizer with its
 * own tables (as one symbolizer per process would be), then a symbolizer set
 * whose processes share theirs (symbols/symbolizer_set.h). For each: the
 * time to make them all and to name one address in every executable
 * mapping of every process (every ELF file read), the heap they hold
 * (mallinfo2), the descriptors, and the ELF files read.
 *
 * usage: bench_symbols [N [-- PROGRAM ARGS...]]
 * The processes are forks of this program (which maps libbpf, libdw, libelf,
 * libipt, libz, libc...), or N runs of PROGRAM.
 */
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "symbols/proc_maps.h"
#include "symbols/symbolizer.h"
#include "symbols/symbolizer_set.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Name the first address of every executable mapping of PID through S: every ELF file read. */
static size_t name_every_module(struct ht_symbolizer *s, int pid)
{
	struct ht_symbol sym;
	struct ht_maps maps;
	size_t named = 0;

	if (!s || ht_maps_read(pid, &maps))
		return 0;
	for (size_t i = 0; i < maps.count; i++)
		if (ht_mapping_is_exec(&maps.v[i]) && !ht_symbolize(s, maps.v[i].start, &sym) &&
		    sym.function)
			named++;
	ht_maps_free(&maps);
	return named;
}

struct result {
	uint64_t ns;
	size_t heap_bytes, fds, elf_reads, named;
};

static void print(const char *what, int n, const struct result *r)
{
	printf("%-34s %3d processes: %8.1f ms, heap %8.1f MiB, %4zu descriptors, %4zu ELF files "
	       "read, %zu addresses named\n",
	       what, n, (double)r->ns / 1e6, (double)r->heap_bytes / (1 << 20), r->fds,
	       r->elf_reads, r->named);
}

/* One symbolizer per process, each with a cache of its own: tables read once per process. */
static void private_tables(const pid_t *pids, int n, struct result *r)
{
	struct ht_symbolizer **s = calloc((size_t)n, sizeof(*s));
	size_t heap0 = heap_bytes(), fds0 = open_fds();
	uint64_t t0 = now_ns();

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < n && s; i++) {
		struct ht_symbolizer_stats st;

		s[i] = ht_symbolizer_new(pids[i]);
		r->named += name_every_module(s[i], pids[i]);
		if (s[i]) {
			ht_symbolizer_get_stats(s[i], &st);
			r->elf_reads += st.elf_reads;
		}
	}
	r->ns = now_ns() - t0;
	r->heap_bytes = heap_bytes() - heap0;
	r->fds = open_fds() - fds0;
	for (int i = 0; i < n && s; i++)
		ht_symbolizer_free(s[i]);
	free(s);
}

/* A symbolizer set: one symbolizer per process, the tables shared. */
static void shared_tables(const pid_t *pids, int n, struct result *r)
{
	size_t heap0 = heap_bytes(), fds0 = open_fds();
	uint64_t t0 = now_ns();
	struct ht_symbolizer_set *set = ht_symbolizer_set_new(false, (unsigned int)n);
	struct ht_symbolizer_set_stats st;

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < n && set; i++)
		r->named += name_every_module(ht_symbolizer_set_get(set, pids[i]), pids[i]);
	r->ns = now_ns() - t0;
	r->heap_bytes = heap_bytes() - heap0;
	r->fds = open_fds() - fds0;
	if (set) {
		ht_symbolizer_set_get_stats(set, &st);
		r->elf_reads = st.elf_files_read;
	}
	ht_symbolizer_set_free(set);
}

int main(int argc, char **argv)
{
	int n = argc > 1 && strcmp(argv[1], "--") ? atoi(argv[1]) : 50;
	char **program = NULL;
	struct result r;
	pid_t *pids;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--") && i + 1 < argc)
			program = &argv[i + 1];
	if (n <= 0 || !(pids = calloc((size_t)n, sizeof(*pids))))
		return 2;
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			if (program) {
				execvp(program[0], program);
				_exit(127);
			}
			for (;;)
				pause();
		}
	}
	/* Let an exec'd program map its libraries (50 interpreters starting on 2 CPUs: seconds). */
	if (program)
		sleep(10);
	/* Warm the page cache and libelf: the first reader would pay for both. */
	shared_tables(pids, 1, &r);
	private_tables(pids, n, &r);
	print("one symbolizer per process (own)", n, &r);
	shared_tables(pids, n, &r);
	print("symbolizer set (shared tables)", n, &r);
	for (int i = 0; i < n; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	free(pids);
	return 0;
}
