/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Binary search as a partition point: every sorted lookup in hybtrace (a pid
 * in a list, a time in a flight record, an address among symbols) asks for
 * the first element that is no longer "before" what it looks for.
 */
#ifndef HT_PARTITION_H
#define HT_PARTITION_H

#include <stddef.h>

/*
 * The first index in [FIRST, END) at which BEFORE, an expression of the index
 * variable I, is false, or END; BEFORE must be true up to some index and false
 * from there on. For example the first entry of a list sorted by tgid that is
 * not below TGID: HT_PARTITION_POINT(0, n, i, v[i].tgid < tgid).
 */
#define HT_PARTITION_POINT(first, end, i, before)                                                  \
	({                                                                                         \
		size_t lo_ = (first), hi_ = (end);                                                 \
		while (lo_ < hi_) {                                                                \
			size_t i = lo_ + (hi_ - lo_) / 2;                                          \
			if (before)                                                                \
				lo_ = i + 1;                                                       \
			else                                                                       \
				hi_ = i;                                                           \
		}                                                                                  \
		lo_;                                                                               \
	})

#endif
