/* SPDX-License-Identifier: MIT */
/*
 * txl-alloc.c - 64-byte aligned buffers: a cache line each, and what the
 * vector kernels and BLAS read fastest.  Large ones (weights read into
 * memory, packed weights, the memory of long sessions) sit on 2 MiB pages
 * where the kernel gives them: generation streams through them every
 * token, and with 4 KiB pages the processor walks its page tables every
 * 4 KiB (bench/README.md, "Why the code does what it does").
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "txl-alloc.h"

#define HUGE_PAGE ((size_t)2 << 20)

uint8_t *
txl_alloc_bytes(size_t n)
{
	size_t bytes = (n + 63) / 64 * 64;
	uint8_t *p;

	if (bytes < HUGE_PAGE)
		return aligned_alloc(64, bytes ? bytes : 64);
	bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	p = aligned_alloc(HUGE_PAGE, bytes);
#ifdef MADV_HUGEPAGE
	/* advice only: where transparent huge pages are off it changes
	 * nothing */
	if (p)
		(void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
	return p;
}

float *
txl_alloc_floats(size_t n)
{
	return (float *)(void *)txl_alloc_bytes(n * sizeof(float));
}
