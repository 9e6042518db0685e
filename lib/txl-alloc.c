/* SPDX-License-Identifier: MIT */
/*
 * txl-alloc.c - 64-byte aligned buffers: a cache line each, and what the
 * vector kernels and BLAS read fastest.
 */
#include <stdlib.h>

#include "txl-alloc.h"

uint8_t *
txl_alloc_bytes(size_t n)
{
	size_t bytes = (n + 63) / 64 * 64;

	return aligned_alloc(64, bytes ? bytes : 64);
}

float *
txl_alloc_floats(size_t n)
{
	return (float *)(void *)txl_alloc_bytes(n * sizeof(float));
}
