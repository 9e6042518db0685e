/* SPDX-License-Identifier: MIT */
/*
 * test.h - the few assertions the C unit tests need.  A failed check
 * prints "FAIL: file:line: ..." and exits 1; main() returns 0 when every
 * test ran, 77 (meson's "skipped") when a needed input is missing.
 */
#ifndef TXL_TEST_H
#define TXL_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TEST_SKIP 77

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL: %s:%d: %s\n", __FILE__,       \
				__LINE__, #cond);                            \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_) {                                              \
			fprintf(stderr, "FAIL: %s:%d: %s == %s (%lld != "    \
				"%lld)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                \
	do {                                                                 \
		double a_ = (a), b_ = (b);                                   \
		if (!(fabs(a_ - b_) <= (tol))) {                             \
			fprintf(stderr, "FAIL: %s:%d: %s ~ %s (%.9g vs %.9g, " \
				"tol %g)\n", __FILE__, __LINE__, #a, #b, a_, \
				b_, (double)(tol));                          \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define RUN(test)                                                            \
	do {                                                                 \
		test();                                                      \
		fprintf(stderr, "ok %s\n", #test);                           \
	} while (0)

#endif
