/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A minimal unit-test harness. Each test is a function registered with
 * TEST(name); CHECK() records a failure with file:line and goes on, so one
 * run shows every broken expectation. Output, one line per test, is what
 * tests/run counts:
 *   PASS name
 *   FAIL name: file:line: expression
 *   SKIP name: reason            (SKIP_TEST(reason), for what this machine lacks)
 * The binary exits 1 if any test failed.
 */
#ifndef HT_TEST_CHECK_H
#define HT_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sh.h"

struct ht_test {
	const char *name;
	void (*fn)(void);
};

/* Under CI (CI=true) a test may not skip for want of root. */
static int ci(void) __attribute__((unused));

static int ci(void)
{
	const char *v = getenv("CI");

	return v && !strcmp(v, "true");
}

#define HT_MAX_TESTS 256
/*
 * FN() builds the programs a test runs, or the test fails: cc is a
 * requirement of the suite, so a missing compiler is no reason to skip.
 */
#define REQUIRE_BUILT(fn)                                                                          \
	do {                                                                                       \
		if (fn()) {                                                                        \
			CHECK(!"cannot build the test programs");                                  \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static struct ht_test ht_tests[HT_MAX_TESTS];
static int ht_ntests;
static int ht_current_failed;
static int ht_current_skipped;
static const char *ht_current_name;

#define TEST(name)                                                                                 \
	static void test_##name(void);                                                             \
	__attribute__((constructor)) static void register_##name(void)                             \
	{                                                                                          \
		if (ht_ntests < HT_MAX_TESTS)                                                      \
			ht_tests[ht_ntests++] = (struct ht_test){ #name, test_##name };            \
	}                                                                                          \
	static void test_##name(void)

#define CHECK(expr)                                                                                \
	do {                                                                                       \
		if (!(expr)) {                                                                     \
			if (!ht_current_failed)                                                    \
				printf("FAIL %s: %s:%d: %s\n", ht_current_name, __FILE__,          \
				       __LINE__, #expr);                                           \
			else                                                                       \
				printf("     %s: %s:%d: %s\n", ht_current_name, __FILE__,          \
				       __LINE__, #expr);                                           \
			ht_current_failed = 1;                                                     \
		}                                                                                  \
	} while (0)

/* Say why the test cannot run here and stop it; it is counted as skipped. */
#define SKIP_TEST(reason)                                                                          \
	do {                                                                                       \
		printf("SKIP %s: %s\n", ht_current_name, (reason));                                \
		ht_current_skipped = 1;                                                            \
		return;                                                                            \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
	do {                                                                                       \
		unsigned long long ht_a_ = (a), ht_b_ = (b);                                       \
		if (ht_a_ != ht_b_) {                                                              \
			printf("%s %s: %s:%d: %s == %s (%llu != %llu)\n",                           \
			       ht_current_failed ? "    " : "FAIL", ht_current_name, __FILE__,     \
			       __LINE__, #a, #b, ht_a_, ht_b_);                                    \
			ht_current_failed = 1;                                                     \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *ht_a_ = (a), *ht_b_ = (b);                                             \
		if (!ht_a_ || !ht_b_ || strcmp(ht_a_, ht_b_)) {                                    \
			printf("%s %s: %s:%d: %s == \"%s\" (got \"%s\")\n",                         \
			       ht_current_failed ? "    " : "FAIL", ht_current_name, __FILE__,     \
			       __LINE__, #a, ht_b_ ? ht_b_ : "(null)", ht_a_ ? ht_a_ : "(null)");  \
			ht_current_failed = 1;                                                     \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	int failed = 0;

	for (int i = 0; i < ht_ntests; i++) {
		if (argc > 1 && strcmp(argv[1], ht_tests[i].name))
			continue;
		ht_current_name = ht_tests[i].name;
		ht_current_failed = 0;
		ht_current_skipped = 0;
		ht_tests[i].fn();
		if (!ht_current_failed && !ht_current_skipped)
			printf("PASS %s\n", ht_tests[i].name);
		failed |= ht_current_failed;
		fflush(stdout);
	}
	return failed;
}

/* A test that needs root: skipped without it, failed instead under CI. */
#define REQUIRE_ROOT()                                                                             \
	do {                                                                                       \
		if (geteuid() != 0) {                                                              \
			if (ci()) {                                                                \
				CHECK(!"needs root, and CI=true");                                 \
				return;                                                            \
			}                                                                          \
			SKIP_TEST("needs root");                                                   \
		}                                                                                  \
	} while (0)

#endif /* HT_TEST_CHECK_H */
