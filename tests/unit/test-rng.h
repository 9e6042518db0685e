/* SPDX-License-Identifier: MIT */
/*
 * test-rng.h - the reproducible draws of the C tests and benchmarks:
 * Marsaglia's xorshift64 (shifts 13, 7, 17), each caller with its own
 * state and seed.  Header only, so that a program of bench/ can take it
 * too.
 */
#ifndef TXL_TEST_RNG_H
#define TXL_TEST_RNG_H

#include <stdint.h>

/* the next state of *s (never 0 from a seed that is not) */
static inline uint64_t
xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
