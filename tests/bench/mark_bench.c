// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a user mark costs next to a bare rdtsc, measured in one run:
 *
 *	cc -O2 -Iinclude -o build/mark_bench tests/bench/mark_bench.c && build/mark_bench
 *
 * Arguments: [iterations per kind, default 100M] [rounds, default 20] [cpu to pin to].
 * The kinds alternate round by round, so frequency changes and neighbours
 * hit each alike; each prints its median ns per operation over the rounds.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <hybtrace/mark.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

__attribute__((noinline)) static double run_rdtsc(uint64_t n)
{
	uint64_t t0 = now_ns(), acc = 0;

	for (uint64_t i = 0; i < n; i++)
		acc += hybtrace_mark_clock_();
	sink = acc;
	return (double)(now_ns() - t0) / (double)n;
}

__attribute__((noinline)) static double run_mark(uint64_t n)
{
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		hybtrace_mark(1, i, n);
	return (double)(now_ns() - t0) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	uint64_t total = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000000ULL;
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	double tsc[256], mark[256], diff[256];
	uint64_t per_round;

	if (rounds < 1 || rounds > 256 || total < (uint64_t)rounds) {
		fprintf(stderr, "usage: %s [iterations] [rounds 1..256] [cpu]\n", argv[0]);
		return 2;
	}
	if (argc > 3) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(atoi(argv[3]), &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			perror("sched_setaffinity");
	}
	per_round = total / (uint64_t)rounds;
	hybtrace_mark(0, 0, 0); /* the ring is mapped outside the measurement */
	run_rdtsc(per_round / 10);
	run_mark(per_round / 10);
	for (int r = 0; r < rounds; r++) {
		if (r % 2) {
			mark[r] = run_mark(per_round);
			tsc[r] = run_rdtsc(per_round);
		} else {
			tsc[r] = run_rdtsc(per_round);
			mark[r] = run_mark(per_round);
		}
		diff[r] = mark[r] - tsc[r];
	}
	printf("%llu iterations each, %d interleaved rounds\n",
	       (unsigned long long)(per_round * (uint64_t)rounds), rounds);
	printf("bare rdtsc     %6.2f ns\n", median(tsc, rounds));
	printf("hybtrace_mark  %6.2f ns\n", median(mark, rounds));
	printf("mark - rdtsc   %6.2f ns (median of per-round differences)\n", median(diff, rounds));
	return 0;
}
