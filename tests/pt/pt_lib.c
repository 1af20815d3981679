// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only: a shared library the PT workload calls through its PLT. */
#define NOINLINE __attribute__((noinline))

NOINLINE static int lib_inner(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + 1;
}

NOINLINE int lib_work(int x)
{
	int sum = 0;

	for (int i = 0; i < 3; i++)
		sum += lib_inner(x + i);
	return sum;
}
