/* SPDX-License-Identifier: MIT */
/*
 * bench-util.h - what the kernel benchmarks share: a clock, reproducible
 * values in [-1, 1) and aligned buffers.  Header only; each program keeps
 * its own draws.
 */
#ifndef TXL_BENCH_UTIL_H
#define TXL_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tests/unit/test-rng.h"

/* seconds on clock c (CLOCK_MONOTONIC: wall; CLOCK_THREAD_CPUTIME_ID) */
static inline double
bench_clock(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t bench_rng = 88172645463325252ull;

/* the next of a fixed sequence, uniform in [-1, 1) */
static inline float
bench_uniform(void)
{
	return (float)(xorshift64(&bench_rng) >> 40) / (float)(1 << 24) * 2.0f -
	       1.0f;
}

/* n bytes on a cache line (rounded up to whole lines); exits when there
 * is no memory */
static inline void *
bench_alloc(const char *prog, size_t n)
{
	void *p = aligned_alloc(64, (n + 63) / 64 * 64);

	if (!p) {
		fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, n);
		exit(1);
	}
	return p;
}

#endif
