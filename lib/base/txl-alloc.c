/* SPDX-License-Identifier: MIT */
/*
 * txl-alloc.c - 64-byte aligned buffers: a cache line each, and what the
 * vector kernels and BLAS read fastest.  Large ones (weights read into
 * memory, packed weights, the memory of long sessions) sit on 2 MiB pages
 * where the kernel gives them: generation streams through them every
 * token, and with 4 KiB pages the processor walks its page tables every
 * 4 KiB (bench/README.md, "Why the code does what it does").
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "txl-alloc.h"

#define HUGE_PAGE ((size_t)2 << 20)

/*
 * glibc maps a block of at least its threshold (128 KiB) on its own and
 * unmaps it when freed, but the first such free raises the threshold to
 * that block's size (up to 32 MiB): from then on the buffers of
 * sessions come from the heap, where what is freed between live blocks
 * stays resident.  A server that makes and drops sessions grew from 64
 * to 750 MB that way with no leak.  The threshold set once keeps it
 * where glibc starts, so that every large buffer goes back to the
 * system when freed (it changes no size glibc would map at first).
 */
#define MMAP_THRESHOLD ((size_t)128 << 10)

static void
pin_threshold(void)
{
#ifdef __GLIBC__
	(void)mallopt(M_MMAP_THRESHOLD, (int)MMAP_THRESHOLD);
#endif
}

uint8_t *
txl_alloc_bytes(size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	size_t bytes = (n + 63) / 64 * 64;
	uint8_t *p;

	pthread_once(&once, pin_threshold);

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
