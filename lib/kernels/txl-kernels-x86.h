/* SPDX-License-Identifier: MIT */
/*
 * txl-kernels-x86.h - what the vector kernel files (txl-kernels-avx2.c,
 * txl-kernels-avx512.c) share whatever their vectors' width: the kernels
 * that are copies, and the rows' pointers of the four-row loops.  What
 * differs, the instruction set's, stays in each file.
 */
#ifndef TXL_KERNELS_X86_H
#define TXL_KERNELS_X86_H

#include <string.h>

#include "txl-kernels.h"

/* q0..q3: rows r .. r + 3 of blocks of type T from base, ld bytes apart
 * (four pointers, not an array: GCC keeps arrays of them in memory). */
#define ROWS4(T, base, r, ld, q0, q1, q2, q3)                                \
	const T *q0 = (const void *)((base) + (size_t)(r) * (ld));           \
	const T *q1 = (const void *)((const uint8_t *)q0 + (ld));            \
	const T *q2 = (const void *)((const uint8_t *)q1 + (ld));            \
	const T *q3 = (const void *)((const uint8_t *)q2 + (ld))

static void
widen_f32(float *dst, const void *src, size_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

static void
narrow_f32(void *dst, const float *src, size_t n)
{
	memcpy(dst, src, n * sizeof(float));
}

#endif /* TXL_KERNELS_X86_H */
